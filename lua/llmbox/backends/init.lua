-- The backend registry: the one list of backends llmbox knows. The CLI (`llmbox backends`,
-- `-b NAME`), `llmbox doctor`, the MCP server's BACKEND setting, sessions and pools all read it, so
-- a name, an alias or a capability is stated once.
--
-- Every available driver implements the same contract:
--   driver.open(spec) -> handle | nil, err    spec: the neutral sandbox spec (llmbox.plan)
--   handle:run{ argv, env, cwd, stdin, files, limits, on_stdout, on_stderr } -> result | nil, err
--   handle:copy_in(host_path, path) / handle:copy_out(path, host_path, max) -> true | nil, err
--   handle:close()
--   driver.maintain()          collects what finished runs left behind (pools call it when idle)
--   driver.usable()            -> true | false, why: can it run sandboxes on this host, now
-- and declares what it can do (driver.capabilities) and where things are inside its sandboxes
-- (driver.layout), so callers ask instead of guess.
--
-- Besides the built-in backends, operators register their own: a Lua file `backends/NAME.lua`
-- in a directory of the policy path (LLMBOX_POLICY_PATH, then the shipped policies) returns a
-- driver table with that contract (open, open_start, usable, maintain, capabilities, layout;
-- description and aliases optional). Unlike policies, which are data run in a sandbox, such a
-- file is code, loaded as any Lua module: it is as trusted as the policy path it lies on. A
-- file that does not load or keep the contract is listed with the reason and refused by name;
-- a built-in backend's name cannot be taken.
local type, ipairs, pairs, format, concat, sort = type, ipairs, pairs, string.format, table.concat, table.sort

local _M = { _VERSION = "0.2.0" }

-- Every capability a backend may declare, in the order `llmbox backends` prints them.
_M.CAPABILITIES = {
    "pool",                 -- sessions may be pre-created and pooled
    "persistent_workspace", -- the workspace survives across the runs of a session
    "network_policy",       -- the network can be cut to loopback
    "seccomp",              -- the policy's syscall rules are enforced
    "images",               -- runs inside an image chosen by the user
    "interactive",          -- one interpreter lives across runs (cells)
    "existing_sandbox",     -- keeps a sandbox past its session, and attaches to one by id
    "egress",               -- outbound network that can never reach the host
    "commit",               -- saves a sandbox's workspace as an image (session:commit)
    "rootfs",               -- runs a root filesystem (rootfs = DIR, --image dir:DIR) instead of the host's
    "run_limits",           -- lowers memory and the CPU quota for one run, below the sandbox's
}

-- Where things are inside a sandbox; every driver declares all of them.
_M.LAYOUT_KEYS = { "workspace", "code", "plots", "tmp" }

-- Planned backends are listed so that asking for one gets "not built yet", not "unknown backend".
local REGISTRY = {
    { name = "native", module = "llmbox.backends.native", aliases = {},
        description = "llmbox's own jail: namespaces, seccomp, rlimits and cgroups; needs no daemon" },
    { name = "bubblewrap", aliases = { "bwrap" }, module = "llmbox.backends.bubblewrap",
        description = "the same jail built by bwrap (bubblewrap) from the policy; needs no daemon" },
    { name = "nsjail", aliases = {}, module = "llmbox.backends.nsjail",
        description = "the same jail built by an installed nsjail from a generated configuration" },
    { name = "docker", aliases = {}, module = "llmbox.backends.docker",
        description = "containers through the Docker Engine API (images; needs dockerd)" },
    { name = "podman", aliases = {}, module = "llmbox.backends.podman",
        description = "containers through Podman's Docker-compatible API (images; needs its API service)" },
    { name = "kubernetes", aliases = { "k8s" }, module = "llmbox.backends.kubernetes",
        description = "pods through the Kubernetes API (images; needs a cluster and its kubeconfig)" },
    -- the seed's Windows backends: what they would take is in the README (Backends)
    { name = "windows-mxc", aliases = { "mxc" }, unavailable = "runs only on Windows (MXC app containers)",
        description = "Windows' process isolation for untrusted code (MXC); not on Linux" },
    { name = "wsl2", aliases = { "wsl" }, unavailable = "runs only on Windows (a WSL2 utility VM)",
        description = "a Linux jail inside Windows' WSL2 virtual machine; not on Linux" },
}

local by_name = {}
for _, e in ipairs(REGISTRY) do
    by_name[e.name] = e
    for _, a in ipairs(e.aliases) do by_name[a] = e end
end

-- Operators' backends, read from the policy path once per distinct path.
local operators = { key = nil, list = {}, by_name = {} }

local function load_operator(path, name)
    local e = { name = name, aliases = {}, file = path, description = "an operator's backend" }
    if by_name[name] then
        e.error = format("%s: %q is a built-in backend's name; name the file after your backend", path, name)
        return e
    end
    local chunk, err = loadfile(path)
    local ok, driver = false, err
    if chunk then ok, driver = pcall(chunk) end
    if not ok then
        e.error = format("%s does not load: %s", path, tostring(driver))
    elseif type(driver) ~= "table" then
        e.error = format("%s must return a driver table, got %s", path, type(driver))
    else
        -- (its own field: a driver that delegates to another through __index has that one's)
        if rawget(driver, "name") == nil then rawset(driver, "name", name) end
        local valid, verr
        if rawget(driver, "name") ~= name then
            valid, verr = false, format("its name is %q, its file's %q", tostring(rawget(driver, "name")), name)
        elseif type(rawget(driver, "capabilities")) ~= "table" or type(driver.layout) ~= "table" then
            valid, verr = false, "it declares no capabilities and layout tables"
        else
            valid, verr = _M.check_driver(driver)
        end
        if not valid then
            e.error = format("%s does not keep the driver contract: %s", path, verr)
        else
            e.driver = driver
            e.description = type(driver.description) == "string" and driver.description or e.description
            for _, a in ipairs(type(driver.aliases) == "table" and driver.aliases or {}) do
                if type(a) == "string" and not by_name[a:lower()] then e.aliases[#e.aliases + 1] = a:lower() end
            end
        end
    end
    return e
end

-- The operators' registry entries, in the policy path's order (the first file of a name wins).
local function operator_entries()
    local dirs = require("llmbox.policy.files").dirs()
    local key = concat(dirs, ":")
    if operators.key == key then return operators end
    local core = require "llmbox.core"
    local list, named = {}, {}
    for _, d in ipairs(dirs) do
        for _, f in ipairs(core.listdir(d .. "/backends") or {}) do
            local n = f:match("^([%w_%-]+)%.lua$")
            if n and not named[n:lower()] then
                local e = load_operator(d .. "/backends/" .. f, n:lower())
                list[#list + 1] = e
                named[e.name] = e
                for _, a in ipairs(e.aliases) do named[a] = named[a] or e end
            end
        end
    end
    operators.key, operators.list, operators.by_name = key, list, named
    return operators
end

local function all_entries()
    local t = {}
    for _, e in ipairs(REGISTRY) do t[#t + 1] = e end
    for _, e in ipairs(operator_entries().list) do t[#t + 1] = e end
    return t
end

-- Can this entry be asked for sandboxes in this build?
local function built(e)
    return not e.planned and not e.unavailable and not e.error
end

-- The names of the backends this build can use, sorted (operators' included).
function _M.names()
    local t = {}
    for _, e in ipairs(all_entries()) do
        if built(e) then t[#t + 1] = e.name end
    end
    sort(t)
    return t
end

-- An entry's driver module (built-in or an operator's).
local function driver_of(e)
    return e.driver or require(e.module)
end

local function available_list()
    return concat(_M.names(), ", ")
end

-- The registry entry for a name or alias (any case), available or planned; nil, err when unknown.
function _M.entry(name)
    if type(name) ~= "string" then error("backend name expected, got " .. type(name), 2) end
    local e = by_name[name:lower()] or operator_entries().by_name[name:lower()]
    if not e then
        return nil, format("unknown backend %q (available: %s)", name, available_list())
    end
    return e
end

-- The backend sessions and pools use when none is named: $LLMBOX_BACKEND, else native.
function _M.default()
    local name = os.getenv("LLMBOX_BACKEND")
    return (name and name ~= "") and name or "native"
end

-- The driver module for a name or alias; nil, err for planned and unknown names.
function _M.get(name)
    if type(name) ~= "string" then error("backend name expected, got " .. type(name), 2) end
    local e, err = _M.entry(name)
    if not e then return nil, err end
    if e.planned then
        return nil, format("backend %q is not built yet in this version of llmbox (available: %s)",
            e.name, available_list())
    elseif e.unavailable then
        return nil, format("backend %q is not available on Linux: it %s (available: %s)", e.name,
            e.unavailable, available_list())
    elseif e.error then
        return nil, format("backend %q cannot be used: %s", e.name, e.error)
    end
    return driver_of(e)
end

--- backends.with_capability(name) -> { "docker", ... }: the built backends that declare it
--- (whether they are usable here is not asked: no engine is contacted)
function _M.with_capability(cap)
    local out = {}
    for _, e in ipairs(all_entries()) do
        if built(e) and driver_of(e).capabilities[cap] then out[#out + 1] = e.name end
    end
    table.sort(out)
    return out
end

-- What `llmbox backends` prints: every backend, its status, whether it is usable here (and why
-- not), its capabilities (a sorted list of names) and its layout.
function _M.list()
    local out = {}
    for _, e in ipairs(all_entries()) do
        local b = { name = e.name, aliases = { unpack(e.aliases) }, description = e.description, capabilities = {},
            file = e.file }
        if e.planned then
            b.status, b.usable, b.why = "planned", false, "not built yet in this version of llmbox"
        elseif e.unavailable then
            b.status, b.usable, b.why = "unavailable", false, e.unavailable
        elseif e.error then
            b.status, b.usable, b.why = "broken", false, e.error
        else
            local driver = driver_of(e)
            b.status = e.file and "registered" or "available"
            local okc, ok, why = pcall(driver.usable)
            if not okc then ok, why = false, "its usable() failed: " .. tostring(ok) end
            b.usable, b.why = ok and true or false, why
            for _, c in ipairs(_M.CAPABILITIES) do
                if driver.capabilities[c] then b.capabilities[#b.capabilities + 1] = c end
            end
            b.layout = {}
            for k, v in pairs(driver.layout) do b.layout[k] = v end
        end
        out[#out + 1] = b
    end
    return out
end

-- Checks a driver module's declarations; the conformance specs and new drivers use it.
function _M.check_driver(driver)
    for _, k in ipairs(_M.LAYOUT_KEYS) do
        local v = driver.layout and driver.layout[k]
        if type(v) ~= "string" or v:sub(1, 1) ~= "/" then
            return nil, format("driver %s: layout.%s must be an absolute path", tostring(driver.name), k)
        end
    end
    for _, c in ipairs(_M.CAPABILITIES) do
        if type(driver.capabilities[c]) ~= "boolean" then
            return nil, format("driver %s: capabilities.%s must be declared (true or false)", tostring(driver.name), c)
        end
    end
    -- open_start: opening in steps (fds/step/result), so event loops never wait for a sandbox
    for _, f in ipairs({ "open", "open_start", "usable", "maintain" }) do
        if type(driver[f]) ~= "function" then
            return nil, format("driver %s: %s must be a function", tostring(driver.name), f)
        end
    end
    return true
end

return _M

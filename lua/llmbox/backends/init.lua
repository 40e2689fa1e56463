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
}

-- Where things are inside a sandbox; every driver declares all of them.
_M.LAYOUT_KEYS = { "workspace", "code", "plots", "tmp" }

-- Planned backends are listed so that asking for one gets "not built yet", not "unknown backend".
local REGISTRY = {
    { name = "native", module = "llmbox.backends.native", aliases = {},
        description = "llmbox's own jail: namespaces, seccomp, rlimits and cgroups; needs no daemon" },
    { name = "bubblewrap", aliases = { "bwrap" }, planned = true,
        description = "the same promise built from bwrap's command line" },
    { name = "nsjail", aliases = {}, planned = true,
        description = "a generated configuration for an installed nsjail" },
    { name = "docker", aliases = {}, module = "llmbox.backends.docker",
        description = "containers through the Docker Engine API (images; needs dockerd)" },
    { name = "podman", aliases = {}, module = "llmbox.backends.podman",
        description = "containers through Podman's Docker-compatible API (images; needs its API service)" },
    { name = "kubernetes", aliases = { "k8s" }, planned = true,
        description = "pods through the Kubernetes API" },
}

local by_name = {}
for _, e in ipairs(REGISTRY) do
    by_name[e.name] = e
    for _, a in ipairs(e.aliases) do by_name[a] = e end
end

-- The names of the backends this build can use, sorted.
function _M.names()
    local t = {}
    for _, e in ipairs(REGISTRY) do
        if not e.planned then t[#t + 1] = e.name end
    end
    sort(t)
    return t
end

local function available_list()
    return concat(_M.names(), ", ")
end

-- The registry entry for a name or alias (any case), available or planned; nil, err when unknown.
function _M.entry(name)
    if type(name) ~= "string" then error("backend name expected, got " .. type(name), 2) end
    local e = by_name[name:lower()]
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
    end
    return require(e.module)
end

--- backends.with_capability(name) -> { "docker", ... }: the built backends that declare it
--- (whether they are usable here is not asked: no engine is contacted)
function _M.with_capability(cap)
    local out = {}
    for _, e in ipairs(REGISTRY) do
        if not e.planned and require(e.module).capabilities[cap] then out[#out + 1] = e.name end
    end
    table.sort(out)
    return out
end

-- What `llmbox backends` prints: every backend, its status, whether it is usable here (and why
-- not), its capabilities (a sorted list of names) and its layout.
function _M.list()
    local out = {}
    for _, e in ipairs(REGISTRY) do
        local b = { name = e.name, aliases = { unpack(e.aliases) }, description = e.description, capabilities = {} }
        if e.planned then
            b.status, b.usable, b.why = "planned", false, "not built yet in this version of llmbox"
        else
            local driver = require(e.module)
            b.status = "available"
            local ok, why = driver.usable()
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

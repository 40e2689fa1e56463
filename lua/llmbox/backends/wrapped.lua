-- What the bubblewrap and nsjail drivers share: finding the tool and llmbox's jail-ready program,
-- and the jail both tools are asked to build, as one ordered list of steps that each driver
-- writes in its tool's terms (bwrap's options, nsjail's configuration). The jail is the native
-- one's (runtime/jail.c): a tmpfs root with the top-level links, size-limited /sandbox, /tmp and
-- /dev/shm, a /dev of five nodes, the policy's read-only paths, /proc, /etc's files, everything
-- else read-only.
local core = require "llmbox.core"
local native = require "llmbox.backends.native"

local ipairs, tostring, format = ipairs, tostring, string.format

local _M = {}

local TOPS = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" }
local DEVICES = { "null", "zero", "full", "random", "urandom" }

--- wrapped.find_tool(name, env_var, install_hint) -> absolute path | nil, why: $env_var, else
--- the first `name` on PATH
function _M.find_tool(name, env_var, install_hint)
    local set = os.getenv(env_var)
    if set and set ~= "" then
        if set:sub(1, 1) ~= "/" then return nil, format("%s=%s: an absolute path is needed", env_var, set) end
        return set
    end
    for dir in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
        local path = dir .. "/" .. name
        local f = dir:sub(1, 1) == "/" and io.open(path, "rb")
        if f then
            f:close()
            return path
        end
    end
    return nil, format("%s is not installed (%s; or set %s)", name, install_hint, env_var)
end

--- wrapped.find_ready() -> path | nil, why: llmbox's jail-ready (backends/jail_ready.c), beside
--- the C module (build/lib/llmbox/jail-ready, or where `make install` put it)
function _M.find_ready()
    local so = package.searchpath("llmbox.core", package.cpath)
    local path = so and so:gsub("core%.so$", "jail-ready")
    local f = path and io.open(path, "rb")
    if not f then
        return nil, "llmbox's jail-ready helper is missing beside llmbox's core module (run make)"
    end
    f:close()
    return path
end

--- wrapped.etc_files(hostname) -> { { path, data }, ... }: /etc as the native jail has it (the
--- same table in C, lb_jail_etc)
function _M.etc_files(hostname)
    return core.jail_etc(hostname)
end

--- wrapped.steps(cfg) -> steps | nil, err: the jail for a core open config (native.translate's),
--- in order; each step is one of
---   { "symlink", target, dst }     { "ro", host_src, dst }     { "dev", path }
---   { "tmpfs", dst, bytes, mode }  { "readonly", dst }         { "proc", dst }
--- Read-only sources are resolved here (inside the root filesystem for its paths), so a missing
--- one is named as the native jail names it, and the tool gets a real host path.
function _M.steps(cfg)
    local st = {}
    local function add(...) st[#st + 1] = { ... } end
    -- merged-/usr roots have /bin -> usr/bin etc.: the same links, else the directories
    local root = cfg.rootfs or ""
    for _, top in ipairs(TOPS) do
        local target = core.readlink(root .. top)
        if target then
            add("symlink", target, top)
        elseif core.listdir(root .. top) then
            add("ro", root .. top, top)
        end
    end
    add("tmpfs", "/sandbox", cfg.workspace, "0755")
    add("tmpfs", "/tmp", cfg.tmp, "1777")
    add("tmpfs", "/dev", 65536, "0755")
    for _, d in ipairs(DEVICES) do add("dev", "/dev/" .. d) end
    add("symlink", "/proc/self/fd", "/dev/fd")
    for i, name in ipairs({ "stdin", "stdout", "stderr" }) do add("symlink", "/proc/self/fd/" .. (i - 1), "/dev/" .. name) end
    add("tmpfs", "/dev/shm", cfg.tmp, "1777")
    add("readonly", "/dev")
    -- after the tmpfs mounts, so a read-only path below /tmp (an offline package source) stays
    -- visible
    for _, m in ipairs(cfg.ro) do
        local in_root = m.in_root and cfg.rootfs
        local src, why = core.resolve_in_root(in_root and cfg.rootfs or "/", m.src)
        if src then
            add("ro", src, m.dst)
        elseif not m.optional then
            if in_root then
                return nil, format("read-only path %s is not in the root filesystem %s (use an image that has it, "
                    .. "or mark it optional in the policy's filesystem.ro): %s", m.src, cfg.rootfs, tostring(why))
            end
            return nil, format("read-only path %s is not available on this host (remove it from the policy's "
                .. "filesystem.ro or mark it optional): %s", m.src, tostring(why))
        end
    end
    add("proc", "/proc")
    add("readonly", "/")
    return st
end

--- wrapped.driver(D, find_tool) -> D: completes a wrapped driver that has name and
--- command(spec) (-> the core's open config with cfg.wrap, or nil, err) with what the contract
--- asks: capabilities and layout (native's), usable, open_start, open, maintain
function _M.driver(D, find_tool)
    D.capabilities = core.backends()[D.name]
    D.layout = native.layout
    D.maintain = native.maintain
    function D.usable()
        local tool, why = find_tool()
        if not tool then return false, why end
        local ready
        ready, why = _M.find_ready()
        if not ready then return false, why end
        -- the kernel features the jail needs are the native jail's (user namespaces, seccomp...)
        return native.usable()
    end
    --- D.open_start(spec) -> opening | nil, err (as native.open_start)
    function D.open_start(spec)
        local cfg, err = D.command(spec)
        if not cfg then return nil, err end
        return native.opening(D.name, cfg)
    end
    --- D.open(spec) -> handle | nil, err
    function D.open(spec)
        local opening, err, code = D.open_start(spec)
        if not opening then return nil, err, code end
        return native.finish(opening)
    end
    return D
end

return _M

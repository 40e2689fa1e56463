-- Engine options a caller may pass to the docker and podman backends (`runtime = { ... }`, the
-- seed's names: mem_limit, cpus, pids_limit, ulimits, tmpfs, network_mode, read_only,
-- security_opt, cap_drop, cap_add, user, privileged, volumes, devices). They are checked against
-- the session's policy: what only tightens the sandbox is folded into its spec (a lower memory,
-- CPU, process or open-file ceiling, an extra size-limited tmpfs, more capabilities dropped);
-- what would loosen it (privileged mode, another network, added capabilities, devices, another
-- user or security option, a writable root) is refused, naming the option and the policy. Host
-- mounts (volumes) are taken read-only, and only of what the policy already shows its sandboxes
-- read-only (filesystem.ro, which native mounts the same way).
local format, tostring, type, pairs, ipairs = string.format, tostring, type, pairs, ipairs
local min = math.min
local util = require "llmbox.util"

local _M = {}

local KNOWN = { "mem_limit", "cpus", "pids_limit", "ulimits", "tmpfs", "network_mode", "read_only", "security_opt",
    "cap_drop", "cap_add", "user", "privileged", "volumes", "devices" }
local known = {}
for _, k in ipairs(KNOWN) do known[k] = true end

-- "512m", "1g", "65536", or a number of bytes (docker's units: b, k, m, g).
local function size(v)
    if type(v) == "number" then return v > 0 and v or nil end
    if type(v) ~= "string" then return nil end
    local n, unit = v:lower():match("^(%d+%.?%d*)([bkmg]?)b?$")
    n = tonumber(n)
    if not n then return nil end
    local mult = ({ [""] = 1, b = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3 })[unit]
    return math.floor(n * mult)
end

local function human(bytes)
    if bytes % (1024 ^ 3) == 0 then return format("%dG", bytes / 1024 ^ 3) end
    if bytes % (1024 ^ 2) == 0 then return format("%dM", bytes / 1024 ^ 2) end
    return format("%d bytes", bytes)
end

-- Paths a tmpfs may not cover: the sandbox's own mounts, llmbox's private one, the kernel's.
local RESERVED = { "/", "/sandbox", "/tmp", "/.llmbox", "/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin",
    "/lib", "/lib64" }

local function copy(t)
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    return c
end

-- Is path at or below dir (whole components)?
local function under(path, dir)
    return path == dir or dir == "/" or path:sub(1, #dir + 1) == dir .. "/"
end

local function plain_absolute(path)
    return type(path) == "string" and path:match("^/[%w._/@+,=-]*$") ~= nil and not path:find("//", 1, true)
        and not path:find("/%.%.?/") and not path:find("/%.%.?$")
end

-- One host mount, "SRC:DST[:ro]" -> { src =, dst = } | nil, err. SRC is resolved on this host
-- (no symlink leads out of what the policy shows) and must be at or below one of the spec's
-- read-only paths (the policy's filesystem.ro, the recipe's, the install sources), also
-- resolved; DST may not cover the sandbox's own mounts or the image's system directories; the
-- mount is read-only.
local function volume(spec, v)
    local function refuse(why)
        return nil, format("runtime.volumes = %s is refused: %s (policy %q)", tostring(v), why, spec.policy.name)
    end
    if type(v) ~= "string" then return refuse("expected \"/host/path:/path/inside[:ro]\"") end
    local src, dst, mode = v:match("^([^:]+):([^:]+):?([^:]*)$")
    if not src or not plain_absolute(src) or not plain_absolute(dst) then
        return refuse("expected \"/host/path:/path/inside[:ro]\", both absolute, without . or ..")
    end
    if mode ~= "" and mode ~= "ro" then
        return refuse("host mounts are read-only (\":ro\"), as the policy's own are")
    end
    if #dst > 1 then dst = dst:gsub("/$", "") end
    for _, r in ipairs(RESERVED) do
        if under(dst, r) and (r ~= "/" or dst == "/") then
            return refuse(format("%s would cover %s, which the sandbox keeps as it is", dst, r))
        end
    end
    local real = util.realpath(src)
    if not real then return refuse(format("%s does not exist on this host", src)) end
    for _, m in ipairs(spec.mounts or {}) do
        local allowed = util.realpath(m.src)
        if allowed and under(real, allowed) then return { src = real, dst = dst } end
    end
    return refuse(format("host mounts reach the host's files: only what the policy's filesystem.ro shows "
        .. "(read-only) may be mounted, and %s is not in it", real))
end

local function list(v)
    if type(v) == "string" then return { v } end
    if type(v) == "table" then return v end
    return nil
end

--- runtime.apply(spec, opts) -> spec | nil, err: folds the caller's engine options into a sandbox
--- spec (plan.sandbox's) that they may only tighten; anything else is refused, naming it.
function _M.apply(spec, opts)
    if opts == nil then return spec end
    if type(opts) ~= "table" then return nil, "runtime: expected a table of engine options" end
    local pol = spec.policy.name
    local lim = spec.limits
    local function refuse(key, value, why)
        return nil, format("runtime.%s = %s is refused: %s (policy %q; no policy can allow it in this version)",
            key, tostring(value), why, pol)
    end
    for k in pairs(opts) do
        if not known[k] then
            return nil, format("runtime: unknown engine option %q (known: %s)", tostring(k), table.concat(KNOWN, ", "))
        end
    end
    -- what would loosen the sandbox
    if opts.privileged ~= nil and opts.privileged ~= false then
        return refuse("privileged", opts.privileged, "a privileged container holds every capability and device")
    end
    if opts.network_mode ~= nil and opts.network_mode ~= "none" then
        return refuse("network_mode", format("%q", tostring(opts.network_mode)),
            "sandboxes have no network (network_mode \"none\")")
    end
    if opts.read_only ~= nil and opts.read_only ~= true then
        return refuse("read_only", opts.read_only, "the root file system stays read-only")
    end
    if opts.user ~= nil and opts.user ~= "1000" and opts.user ~= "1000:1000" and opts.user ~= 1000 then
        return refuse("user", format("%q", tostring(opts.user)), "programs run as the sandbox user, 1000:1000")
    end
    local caps = list(opts.cap_add)
    if opts.cap_add ~= nil and (not caps or #caps > 0) then
        return refuse("cap_add", caps and table.concat(caps, ",") or tostring(opts.cap_add),
            "programs run with no capability")
    end
    local dev = opts.devices
    if dev ~= nil and not (type(dev) == "table" and next(dev) == nil) then
        return refuse("devices", type(dev) == "table" and table.concat(list(dev) or {}, ",") or tostring(dev),
            "host devices reach the host's hardware")
    end
    local mounts
    if opts.volumes ~= nil then
        mounts = {}
        for _, v in ipairs(list(opts.volumes) or { opts.volumes }) do
            local m, err = volume(spec, v)
            if not m then return nil, err end
            mounts[#mounts + 1] = m
        end
    end
    for _, o in ipairs(list(opts.security_opt) or {}) do
        if o ~= "no-new-privileges" and o ~= "no-new-privileges:true" and o ~= "no-new-privileges=true" then
            return refuse("security_opt", format("%q", tostring(o)),
                "the policy's seccomp rules and no-new-privileges hold for every run")
        end
    end
    if opts.security_opt ~= nil and not list(opts.security_opt) then
        return nil, "runtime.security_opt: expected a list of strings"
    end
    for _, c in ipairs(list(opts.cap_drop) or {}) do
        if type(c) ~= "string" or not c:upper():match("^[A-Z_]+$") then
            return nil, format("runtime.cap_drop: %q is not a capability name", tostring(c))
        end
    end
    -- what tightens it: the lower of the option and the policy's ceiling
    local out = copy(spec)
    out.limits = copy(lim)
    out.volumes = mounts and #mounts > 0 and mounts or nil
    local function ceiling(key, name, value, cur, show)
        if value > cur then
            return nil, format("runtime.%s = %s is above policy %q's %s limit (%s): choose a policy that allows it",
                key, show(value), pol, name, show(cur))
        end
        return value
    end
    if opts.mem_limit ~= nil then
        local b = size(opts.mem_limit)
        if not b then return nil, format("runtime.mem_limit = %s is not a size (512m, 1g)", tostring(opts.mem_limit)) end
        if b < 16 * 1024 * 1024 then return nil, "runtime.mem_limit: below 16m no interpreter starts" end
        local v, err = ceiling("mem_limit", "memory", b, lim.memory, human)
        if not v then return nil, err end
        out.limits.memory = v
    end
    if opts.pids_limit ~= nil then
        local n = tonumber(opts.pids_limit)
        if not n or n < 1 or n % 1 ~= 0 then return nil, "runtime.pids_limit: expected a whole number above 0" end
        local v, err = ceiling("pids_limit", "processes", n, lim.processes, tostring)
        if not v then return nil, err end
        out.limits.processes = v
    end
    if opts.cpus ~= nil then
        local n = tonumber(opts.cpus)
        if not n or n < 0.01 then return nil, "runtime.cpus: expected a CPU count of at least 0.01" end
        if lim.cpus then
            local v, err = ceiling("cpus", "cpus", n, lim.cpus, tostring)
            if not v then return nil, err end
        end
        out.limits.cpus = n
    end
    if opts.ulimits ~= nil then
        if type(opts.ulimits) ~= "table" then return nil, "runtime.ulimits: expected a table ({ nofile = 256 })" end
        for name, v in pairs(opts.ulimits) do
            if name ~= "nofile" then
                return nil, format("runtime.ulimits.%s: only nofile is taken (the others are the policy's, per run)",
                    tostring(name))
            end
            local n = tonumber(type(v) == "table" and (v.hard or v.soft) or v)
            if not n or n < 16 or n % 1 ~= 0 then return nil, "runtime.ulimits.nofile: expected a whole number >= 16" end
            local got, err = ceiling("ulimits.nofile", "open_files", n, lim.open_files or n, tostring)
            if not got then return nil, err end
            out.limits.open_files = min(got, lim.open_files or got)
        end
    end
    if opts.tmpfs ~= nil then
        if type(opts.tmpfs) ~= "table" then
            return nil, 'runtime.tmpfs: expected a table ({ ["/scratch"] = "size=64m" })'
        end
        out.tmpfs = {}
        for path, o in pairs(opts.tmpfs) do
            if type(path) ~= "string" or not path:match("^/[%w._/-]+$") or path:find("/%.%.?/") or path:find("/%.%.?$")
                or path:find("//", 1, true) then
                return nil, format("runtime.tmpfs: %q is not an absolute path", tostring(path))
            end
            path = path:gsub("/$", "")
            for _, r in ipairs(RESERVED) do
                if path == r or (r ~= "/" and path:sub(1, #r + 1) == r .. "/") then
                    return nil, format("runtime.tmpfs: %s would cover %s, which the sandbox keeps as it is", path, r)
                end
            end
            local b = size(type(o) == "string" and o:match("size=([%w.]+)") or o)
            if not b then return nil, format('runtime.tmpfs["%s"]: give its size ("size=64m")', path) end
            local v, err = ceiling(format('tmpfs["%s"]', path), "tmp", b, lim.tmp, human)
            if not v then return nil, err end
            out.tmpfs[path] = v
        end
    end
    return out
end

return _M

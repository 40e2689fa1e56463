-- The bubblewrap backend: bwrap builds the jail from a command line made here from the neutral
-- sandbox spec (llmbox.plan); llmbox then holds the jail and runs in it as in its own
-- (backends/bubblewrap.c says how). Everything past opening (runs, copies, plots, installs,
-- pools, interactive cells) is the native driver's, so both keep the same promise.
--
-- What bwrap is asked for: new user, mount, pid, net, ipc, uts and cgroup namespaces; the sandbox
-- user 1000 (mapped to nobody when llmbox runs as root, to the caller otherwise); a tmpfs root
-- holding only the policy's read-only paths (or a root filesystem's); size-limited tmpfs
-- /sandbox, /tmp and /dev/shm; a /dev of null, zero, full, random and urandom; /proc; /etc's
-- passwd, group, hosts, nsswitch.conf and hostname; everything else read-only; no environment,
-- no capabilities; and the policy's seccomp program, compiled by libseccomp and handed over by
-- fd. What bwrap cannot do (a cgroup limit) is done by llmbox's supervisor for each run, as on
-- native; what neither can (a network) is refused.
local core = require "llmbox.core"
local native = require "llmbox.backends.native"

local ipairs, tostring, format = ipairs, tostring, string.format

local _M = { _VERSION = "0.1.0", name = "bubblewrap" }

_M.capabilities = core.backends().bubblewrap
_M.layout = native.layout
_M.maintain = native.maintain

local SANDBOX_ID = "1000" -- LB_SANDBOX_UID and GID (runtime/llmbox.h)
local TOPS = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" }
local DEVICES = { "null", "zero", "full", "random", "urandom" }

-- bwrap: $LLMBOX_BWRAP, else the first one on PATH; nil, why when there is none.
local function find_bwrap()
    local set = os.getenv("LLMBOX_BWRAP")
    if set and set ~= "" then
        if set:sub(1, 1) ~= "/" then return nil, ("LLMBOX_BWRAP=%s: an absolute path is needed"):format(set) end
        return set
    end
    for dir in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
        local path = dir .. "/bwrap"
        local f = io.open(path, "rb")
        if f then
            f:close()
            return path:sub(1, 1) == "/" and path or nil
        end
    end
    return nil, "bwrap is not installed (Debian: apt-get install bubblewrap; or set LLMBOX_BWRAP)"
end

-- The program bwrap starts once the jail is built (backends/bwrap_done.c), beside the C module:
-- build/lib/llmbox/bwrap-done, or where `make install` put it.
local function find_done()
    local so = package.searchpath("llmbox.core", package.cpath)
    local path = so and so:gsub("core%.so$", "bwrap-done")
    local f = path and io.open(path, "rb")
    if not f then
        return nil, "llmbox's bwrap-done helper is missing beside llmbox's core module (run make)"
    end
    f:close()
    return path
end

function _M.usable()
    local bwrap, why = find_bwrap()
    if not bwrap then return false, why end
    local done
    done, why = find_done()
    if not done then return false, why end
    -- the kernel features the jail needs are the native jail's (user namespaces, seccomp, ...)
    return native.usable()
end

-- /etc as the native jail has it (runtime/jail.c, write_etc).
local function etc_files(hostname)
    return {
        { path = "/etc/passwd", data = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            .. "sandbox:x:1000:1000:sandbox:/sandbox:/bin/sh\n"
            .. "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
        { path = "/etc/group", data = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n" },
        { path = "/etc/hosts", data = format("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n", hostname) },
        { path = "/etc/nsswitch.conf", data = "passwd: files\ngroup: files\nhosts: files dns\n" },
        { path = "/etc/hostname", data = hostname },
    }
end

local function is_dir(path)
    return core.listdir(path) ~= nil
end

--- bubblewrap.command(spec) -> cfg | nil, err: the core's open config for a neutral sandbox
--- spec, with cfg.wrap = { argv = bwrap's command line, done, files } (the specs read it). The
--- driver adds the files, the seccomp program, the info and block fds and the program to start.
function _M.command(spec)
    local cfg, err = native.translate(spec, _M.name)
    if not cfg then return nil, err end
    local bwrap, done
    bwrap, err = find_bwrap()
    if not bwrap then return nil, err end
    done, err = find_done()
    if not done then return nil, err end
    local a = { bwrap }
    local function add(...)
        for _, v in ipairs({ ... }) do a[#a + 1] = tostring(v) end
    end
    add("--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--uid", SANDBOX_ID, "--gid", SANDBOX_ID, "--hostname", cfg.hostname or "llmbox",
        "--die-with-parent", "--clearenv", "--cap-drop", "ALL", "--chdir", "/")
    -- merged-/usr roots have /bin -> usr/bin etc.: the same links, else the directories
    local root = cfg.rootfs or ""
    for _, top in ipairs(TOPS) do
        local target = core.readlink(root .. top)
        if target then
            add("--symlink", target, top)
        elseif is_dir(root .. top) then
            add("--ro-bind", root .. top, top)
        end
    end
    add("--size", cfg.workspace, "--perms", "0755", "--tmpfs", "/sandbox")
    add("--size", cfg.tmp, "--perms", "1777", "--tmpfs", "/tmp")
    add("--size", 65536, "--perms", "0755", "--tmpfs", "/dev")
    for _, d in ipairs(DEVICES) do add("--dev-bind", "/dev/" .. d, "/dev/" .. d) end
    add("--symlink", "/proc/self/fd", "/dev/fd")
    for i, name in ipairs({ "stdin", "stdout", "stderr" }) do
        add("--symlink", "/proc/self/fd/" .. (i - 1), "/dev/" .. name)
    end
    add("--size", cfg.tmp, "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/dev")
    -- after the tmpfs mounts, so a read-only path below /tmp (an offline package source) stays
    -- visible; sources resolved here, so a missing one is named as the native jail names it
    for _, m in ipairs(cfg.ro) do
        local src, why
        if m.in_root and cfg.rootfs then
            src, why = core.resolve_in_root(cfg.rootfs, m.src)
        else
            src, why = core.resolve_in_root("/", m.src)
        end
        if src then
            add("--ro-bind", src, m.dst)
        elseif not m.optional then
            if m.in_root and cfg.rootfs then
                return nil, format("read-only path %s is not in the root filesystem %s (use an image that has it, "
                    .. "or mark it optional in the policy's filesystem.ro): %s", m.src, cfg.rootfs, tostring(why))
            end
            return nil, format("read-only path %s is not available on this host (remove it from the policy's "
                .. "filesystem.ro or mark it optional): %s", m.src, tostring(why))
        end
    end
    add("--proc", "/proc", "--remount-ro", "/")
    cfg.wrap = { argv = a, done = done, files = etc_files(cfg.hostname or "llmbox") }
    return cfg
end

--- bubblewrap.open_start(spec) -> opening | nil, err (as native.open_start)
function _M.open_start(spec)
    local cfg, err = _M.command(spec)
    if not cfg then return nil, err end
    return native.opening("bubblewrap", cfg)
end

--- bubblewrap.open(spec) -> handle | nil, err
function _M.open(spec)
    local opening, err, code = _M.open_start(spec)
    if not opening then return nil, err, code end
    return native.finish(opening)
end

return _M

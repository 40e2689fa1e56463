-- The bubblewrap backend: bwrap builds the jail from a command line made here from the neutral
-- sandbox spec (llmbox.plan); llmbox then holds the jail and runs in it as in its own
-- (backends/wrapped.c says how). Everything past opening (runs, copies, plots, installs,
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
local native = require "llmbox.backends.native"
local wrapped = require "llmbox.backends.wrapped"

local ipairs, tostring = ipairs, tostring

local _M = { _VERSION = "0.1.0", name = "bubblewrap" }

local SANDBOX_ID = "1000" -- LB_SANDBOX_UID and GID (runtime/llmbox.h)

local function find_bwrap()
    return wrapped.find_tool("bwrap", "LLMBOX_BWRAP", "Debian: apt-get install bubblewrap")
end

--- bubblewrap.command(spec) -> cfg | nil, err: the core's open config for a neutral sandbox
--- spec, with cfg.wrap = { argv = bwrap's command line, ready, files } (the specs read it). The
--- driver adds the files, the seccomp program, the info and block fds and the program to start.
function _M.command(spec)
    local cfg, err = native.translate(spec, _M.name)
    if not cfg then return nil, err end
    local bwrap, ready, steps
    bwrap, err = find_bwrap()
    if not bwrap then return nil, err end
    ready, err = wrapped.find_ready()
    if not ready then return nil, err end
    steps, err = wrapped.steps(cfg)
    if not steps then return nil, err end
    local a = { bwrap }
    local function add(...)
        for _, v in ipairs({ ... }) do a[#a + 1] = tostring(v) end
    end
    add("--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--uid", SANDBOX_ID, "--gid", SANDBOX_ID, "--hostname", cfg.hostname or "llmbox",
        "--die-with-parent", "--clearenv", "--cap-drop", "ALL", "--chdir", "/")
    for _, s in ipairs(steps) do
        local kind = s[1]
        if kind == "symlink" then
            add("--symlink", s[2], s[3])
        elseif kind == "ro" then
            add("--ro-bind", s[2], s[3])
        elseif kind == "tmpfs" then
            add("--size", s[3], "--perms", s[4], "--tmpfs", s[2])
        elseif kind == "dev" then
            add("--dev-bind", s[2], s[2])
        elseif kind == "proc" then
            add("--proc", s[2])
        elseif kind == "readonly" then
            add("--remount-ro", s[2])
        end
    end
    local files = wrapped.etc_files(cfg.hostname or "llmbox")
    for _, f in ipairs(files) do
        -- egress's pinned names (see llmbox.egress)
        if f.path == "/etc/hosts" and cfg.hosts_extra then f.data = f.data .. cfg.hosts_extra end
    end
    cfg.wrap = { argv = a, ready = ready, files = files }
    return cfg
end

return wrapped.driver(_M, find_bwrap)

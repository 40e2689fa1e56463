-- The nsjail backend: an installed nsjail builds the jail from a configuration made here from the
-- neutral sandbox spec (llmbox.plan), in nsjail's protobuf text format (its config.proto); llmbox
-- then holds the jail and runs in it as in its own (backends/wrapped.c says how; everything past
-- opening is the native driver's, as on bubblewrap).
--
-- Debian 12 has no nsjail package, so nothing here has run nsjail itself: the specs check the
-- configuration, run the driver's handshake with bwrap standing in for nsjail, and skip real
-- nsjail runs, saying why, unless an nsjail is installed (LLMBOX_NSJAIL, or `nsjail` on PATH).
--
-- nsjail gets three fds: 3 this configuration, 4 llmbox's jail-ready, 5 a unix socket. The
-- configuration starts jail-ready through /proc/self/fd/4 with `--send-namespaces 5`: it sends
-- the jail's namespaces over the socket and exits. nsjail's own rlimits, cgroups and seccomp
-- (Kafel) are not used: that program needs none, and every run gets the policy's limits and
-- seccomp filter from llmbox's supervisor, as on native.
local native = require "llmbox.backends.native"
local wrapped = require "llmbox.backends.wrapped"

local ipairs, tostring, format, concat = ipairs, tostring, string.format, table.concat

local _M = { _VERSION = "0.1.0", name = "nsjail" }

local function find_nsjail()
    return wrapped.find_tool("nsjail", "LLMBOX_NSJAIL",
        "Debian 12 has no nsjail package: build it from its sources, github.com/google/nsjail, and put it on PATH")
end

-- A protobuf text-format string: quoted, with C escapes for what is not printable ASCII.
local function str(s)
    return '"' .. tostring(s):gsub('[%c"\\\128-\255]', function(c)
        if c == "\n" then return "\\n" end
        if c == "\t" then return "\\t" end
        if c == '"' or c == "\\" then return "\\" .. c end
        return format("\\%03o", c:byte())
    end) .. '"'
end
_M.quote = str

--- nsjail.config(spec) -> text, cfg | nil, err: nsjail's configuration for a neutral sandbox spec
--- (and the core's open config it goes with)
function _M.config(spec)
    local cfg, err = native.translate(spec, _M.name)
    if not cfg then return nil, err end
    local steps
    steps, err = wrapped.steps(cfg)
    if not steps then return nil, err end
    local hostname = cfg.hostname or "llmbox"
    local out = {
        "# made by llmbox from policy " .. str(spec.policy and spec.policy.name or "?"),
        'name: "llmbox"',
        "mode: ONCE",
        "hostname: " .. str(hostname),
        'cwd: "/"',
        -- jail-ready exits at once; a jail that takes this long to build is broken
        "time_limit: 30",
        "keep_env: false",
        "keep_caps: false",
        "disable_no_new_privs: false",
        "disable_rl: true",
        "log_level: WARNING",
        "pass_fd: 4",
        "pass_fd: 5",
        "clone_newnet: true",
        "clone_newuser: true",
        "clone_newns: true",
        "clone_newpid: true",
        "clone_newipc: true",
        "clone_newuts: true",
        "clone_newcgroup: true",
        -- the sandbox user, mapped to the uid nsjail runs as (nobody when llmbox runs as root)
        'uidmap { inside_id: "1000" outside_id: "" count: 1 }',
        'gidmap { inside_id: "1000" outside_id: "" count: 1 }',
        "mount_proc: false",
    }
    local function mount(fields) out[#out + 1] = "mount { " .. concat(fields, " ") .. " }" end
    for _, f in ipairs(wrapped.etc_files(hostname)) do
        mount({ "src_content: " .. str(f.data), "dst: " .. str(f.path), "rw: false" })
    end
    local readonly = {}
    for _, s in ipairs(steps) do
        if s[1] == "readonly" then readonly[s[2]] = true end
    end
    for _, s in ipairs(steps) do
        local kind = s[1]
        if kind == "symlink" then
            mount({ "src: " .. str(s[2]), "dst: " .. str(s[3]), "is_symlink: true" })
        elseif kind == "ro" then
            mount({ "src: " .. str(s[2]), "dst: " .. str(s[3]), "is_bind: true", "rw: false", "nosuid: true",
                "nodev: true" })
        elseif kind == "tmpfs" then
            -- (nsjail mounts everything, then makes the rw: false ones read-only)
            local owner = s[2] == "/sandbox" and ",uid=1000,gid=1000" or ""
            mount({ "dst: " .. str(s[2]), 'fstype: "tmpfs"', "options: " .. str(format("size=%d,mode=%s%s", s[3], s[4],
                owner)), "rw: " .. tostring(not readonly[s[2]]), "is_dir: true", "nosuid: true",
                "nodev: " .. tostring(s[2] ~= "/dev") })
        elseif kind == "dev" then
            mount({ "src: " .. str(s[2]), "dst: " .. str(s[2]), "is_bind: true", "rw: true", "nosuid: true",
                "noexec: true" })
        elseif kind == "proc" then
            mount({ "dst: " .. str(s[2]), 'fstype: "proc"', "rw: false" })
        end
        -- "readonly" /: nsjail's root is read-only unless asked otherwise
    end
    out[#out + 1] = 'exec_bin { path: "/proc/self/fd/4" arg: "--send-namespaces" arg: "5" }'
    return concat(out, "\n") .. "\n", cfg
end

--- nsjail.command(spec) -> cfg | nil, err: the core's open config, with cfg.wrap = { argv, ready,
--- config }
function _M.command(spec)
    local nsjail, ready, err
    nsjail, err = find_nsjail()
    if not nsjail then return nil, err end
    ready, err = wrapped.find_ready()
    if not ready then return nil, err end
    local text, cfg = _M.config(spec)
    if not text then return nil, cfg end
    cfg.wrap = { argv = { nsjail, "--config", "/proc/self/fd/3" }, ready = ready, config = text }
    return cfg
end

return wrapped.driver(_M, find_nsjail)

-- `llmbox doctor`: what this host supports, which limits are enforced by what, which backends are
-- usable, and how to fix what is missing. Every line says where it comes from:
--   probe  one kernel feature tried in a throwaway child (core.probe)
--   jail   a real sandbox, opened with the default policy, running programs that hit each limit
--   fact   read, not tried: the kernel's name, who runs llmbox, what this build contains
local core = require "llmbox.core"
local cjson = require "cjson.safe"
local util = require "llmbox.util"
local engine = require "llmbox.engine"

local format, now_ms = string.format, util.now_ms

local _M = { _VERSION = "0.1.0" }

local KiB = 1024

-- Runs f(...) and returns its first two results and how long it took, in ms.
local function timed(f, ...)
    local t0 = now_ms()
    local a, b = f(...)
    return a, b, now_ms() - t0
end

local function round(ms) return math.floor(ms * 10 + 0.5) / 10 end

local function contained(j)
    return format("uid %s, capabilities %s, no_new_privs %s, seccomp filter %s", tostring(j.uid),
        tostring(j.capabilities), tostring(j.no_new_privs), tostring(j.seccomp))
end

-- Opens a jail (on `backend`, default native), runs /bin/true in it, then reads from inside what
-- the program got.
local function jail_test(llmbox, backend)
    local j = { source = "jail" }
    local s, err, ms = timed(llmbox.session, { policy = "default", backend = backend })
    j.open_ms = round(ms)
    if not s then
        j.ok, j.error = false, tostring(err)
        return j
    end
    local r
    r, err, ms = timed(s.exec, s, { "/bin/true" }, { timeout = 10 })
    j.run_ms = round(ms)
    if r then
        j.exit_code = r.exit_code
        local st = s:exec("id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status", { timeout = 10 })
        local out = st and st.stdout or ""
        j.uid = tonumber(out:match("^(%d+)\n"))
        j.capabilities = out:match("CapEff:%s*(%x+)")
        j.no_new_privs = out:match("NoNewPrivs:%s*(%d)") == "1"
        j.seccomp = out:match("Seccomp:%s*(%d)") == "2" -- 2: a filter is loaded
    end
    if not r then
        j.ok, j.error = false, "running /bin/true: " .. tostring(err)
    elseif r.exit_code ~= 0 then
        j.ok, j.error = false, format("/bin/true exited %d: %s", r.exit_code, r.stderr)
    elseif not (j.uid and j.uid ~= 0 and j.capabilities and tonumber(j.capabilities, 16) == 0
        and j.no_new_privs and j.seccomp) then
        j.ok, j.error = false, "the program was not contained: " .. contained(j)
    else
        j.ok = true
    end
    return j, s
end

-- Each limit: how this host enforces it (from the probes), and a run in the jail that hits it.
-- `try(s, p)` returns ok, result, detail: result is "fired" (the run was stopped and the result
-- names the limit), "denied" (the program's fork or allocation failed: enforced, but not reported
-- as a fired limit), "set" (read back inside the jail; firing it would take too long) or
-- "unavailable" (runs that ask for it are refused here).
local function limit_tests(p)
    local function fired(r, name) return r and r.limit == name end
    return {
        { "timeout", "the supervisor (SIGKILL to the run's pid namespace)", function(s)
            local r, err = s:exec({ "sleep", "5" }, { timeout = 0.2 })
            if fired(r, "timeout") and r.timed_out then
                return true, "fired", format("a 0.2 s limit stopped `sleep 5` after %d ms", r.duration_ms)
            end
            return false, "not enforced", "`sleep 5` with a 0.2 s limit was not stopped: " .. tostring(r and r.exit_code or err)
        end },
        { "cpu", "RLIMIT_CPU (SIGXCPU, then SIGKILL)", function(s)
            local r, err = s:exec("ulimit -t", { cpu = 1, timeout = 10 })
            if r and r.stdout == "1\n" then
                return true, "set", "read back in the jail as 1 s (firing it takes a second of CPU)"
            end
            return false, "not enforced", "a 1 s limit read back as " .. tostring(r and r.stdout or err)
        end },
        { "memory", p.cgroup_memory and "the run's memory cgroup (an OOM kill is reported)"
            or "RLIMIT_DATA, with a loose RLIMIT_AS (allocations fail; not reported as fired)", function(s)
            -- tail keeps the last 48 MiB of a stream without newlines in memory
            local r, err = s:exec("head -c 64m /dev/zero | tail -c 48m >/dev/null", { memory = 16 * 1024 * KiB, timeout = 10 })
            if fired(r, "memory") then
                return true, "fired", "the memory cgroup killed a program holding 48 MiB under a 16 MiB limit"
            elseif not p.cgroup_memory and r and r.exit_code ~= 0 and not r.timed_out then
                return true, "denied", "a program asking for 48 MiB under a 16 MiB limit failed to allocate"
            end
            return false, "not enforced", "a program holding 48 MiB under a 16 MiB limit "
                .. (r and format("exited %d", r.exit_code) or tostring(err))
        end },
        { "processes", p.cgroup_pids and "the run's pids cgroup (a fork bomb ends the run)"
            or "RLIMIT_NPROC per sandbox user namespace (fork fails; not reported as fired)", function(s)
            local r, err = s:exec("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do sleep 1 >/dev/null 2>&1 & done",
                { processes = 8, timeout = 10 })
            if fired(r, "processes") then
                return true, "fired", "the pids cgroup ended a run that started 16 processes under a limit of 8"
            elseif not p.cgroup_pids and r and r.stderr:find("fork", 1, true) then
                return true, "denied", "fork failed for a run starting 16 processes under a limit of 8"
            end
            return false, "not enforced", "a run starting 16 processes under a limit of 8 "
                .. (r and format("exited %d", r.exit_code) or tostring(err))
        end },
        { "cpus", p.cgroup_cpu and "the run's cpu cgroup (a CFS quota of that many CPUs' time)"
            or "nothing here (no cpu cgroup we may write to): runs and policies that ask for a CPU quota are refused",
            function(s)
            local r, err = s:exec({ "/bin/true" }, { cpus = 0.5, timeout = 10 })
            if r and r.exit_code == 0 then
                return true, "set", "a run with a quota of 0.5 CPUs ran in its cpu cgroup (the share is not measured)"
            elseif not r and not p.cgroup_cpu and tostring(err):find("no cpu cgroup", 1, true) then
                return true, "unavailable", "a run asking for 0.5 CPUs was refused (no cpu cgroup)"
            end
            return false, "not enforced", "a run with a quota of 0.5 CPUs: " .. tostring(r and r.exit_code or err)
        end },
        { "open_files", "RLIMIT_NOFILE (open fails with EMFILE)", function(s)
            local r, err = s:exec("ulimit -n", { open_files = 16, timeout = 10 })
            if r and r.stdout == "16\n" then return true, "set", "read back in the jail as 16" end
            return false, "not enforced", "a limit of 16 read back as " .. tostring(r and r.stdout or err)
        end },
        { "file_size", "RLIMIT_FSIZE (SIGXFSZ)", function(s)
            local r, err = s:exec("head -c 8192 /dev/zero > /sandbox/.doctor", { file_size = 4 * KiB, timeout = 10 })
            if fired(r, "file_size") then return true, "fired", "stopped a write of 8 KiB under a 4 KiB limit" end
            return false, "not enforced", "a write of 8 KiB under a 4 KiB limit "
                .. (r and format("exited %d", r.exit_code) or tostring(err))
        end },
        { "output", "the supervisor (the run is killed, output truncated)", function(s)
            local r, err = s:exec("head -c 100000 /dev/zero", { output = 1000, timeout = 10 })
            if fired(r, "output") and r.truncated and #r.stdout <= 1000 then
                return true, "fired", "killed a run printing 100000 bytes under a 1000-byte limit"
            end
            return false, "not enforced", "a run printing 100000 bytes under a 1000-byte limit "
                .. (r and format("kept %d bytes", #r.stdout) or tostring(err))
        end },
        { "workspace", "the size of the /sandbox tmpfs (ENOSPC)", function(s)
            local r, err = s:exec("stat -f -c '%b %S' /sandbox", { timeout = 10 })
            local blocks, size = (r and r.stdout or ""):match("^(%d+) (%d+)\n$")
            local bytes = blocks and tonumber(blocks) * tonumber(size)
            if bytes and bytes == s.policy.limits.workspace then
                return true, "set", format("read in the jail: /sandbox is a %d MiB tmpfs", bytes / (1024 * KiB))
            end
            return false, "not enforced", format("/sandbox should be %d bytes, the jail says %s",
                s.policy.limits.workspace, tostring(bytes or (r and r.stdout) or err))
        end },
    }
end

-- Moving a process into a cgroup takes the kernel's threadgroup lock for writing, which waits
-- for an RCU grace period unless a cgroup hierarchy is mounted with favordynmods: measured here,
-- 5-27 ms for the first move after a quiet moment (every CLI run), the largest part of a cold
-- run's overhead. With v1 cgroups for the runs (`version`, core.cgroup()) a run's first child
-- moves its one thread instead, which takes no such lock (runtime/cgroup.c).
-- -> ok (v1, favordynmods found, or no cgroup mounted), detail, the mount point to remount
function _M.cgroup_moves(mounts_text, version)
    if version == 1 then
        return true, "moving a run into its cgroups is fast (cgroup v1: a run's first child moves its one "
            .. "thread, which takes no threadgroup lock)"
    end
    local v2, v1, fast
    for line in (mounts_text or ""):gmatch("[^\n]+") do
        local dir, fstype, opts = line:match("^%S+ (%S+) (%S+) (%S+)")
        if fstype == "cgroup2" or fstype == "cgroup" then
            if fstype == "cgroup2" then v2 = v2 or dir else v1 = v1 or dir end
            for o in opts:gmatch("[^,]+") do
                if o == "favordynmods" then fast = dir end
            end
        end
    end
    if fast then
        return true, "moving a run into its cgroup is fast (" .. fast .. " is mounted with favordynmods)"
    end
    local at = v2 or v1
    if not at then return true, "no cgroup hierarchy mounted" end
    return false, "each run's move into its cgroup waits for an RCU grace period (10-22 ms measured on a "
        .. "2-core host; no cgroup mount has favordynmods)", at
end

-- Which C library the run helper was built with (`llmbox-run --libc`), and what that means.
local function helper_libc(path)
    local f = io.popen("'" .. path:gsub("'", "'\\''") .. "' --libc 2>/dev/null")
    local out = f and f:read("*a") or ""
    if f then f:close() end
    return out:match("^(%a+)\n$")
end

local LIBC_NOTE = {
    musl = "static, musl",
    glibc = "static, glibc: its start-up asks the CPU about its caches, ~0.3 ms of every run on a "
        .. "virtual machine; install musl-tools and run make for a musl one",
}

function _M.report()
    local p = core.probe()
    local checks = {}
    -- advice: a check that llmbox works without (shown as "note", not "FAIL")
    local function add(name, source, ok, detail, fix, advice)
        checks[#checks + 1] = { name = name, source = source, ok = ok, detail = detail, fix = (not ok) and fix or nil,
            advice = advice or nil }
    end
    add("kernel", "fact", true, p.kernel)
    add("running as", "fact", true, p.is_root and "root (sandbox uid maps to host uid 65534, or LLMBOX_HOST_UID)"
        or "an ordinary user (sandbox uid maps to your uid)")
    add("user namespaces", "probe", p.userns, p.userns and "can be created" or ("cannot be created: " .. p.userns_error),
        "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
        .. "(Debian) or user.max_user_namespaces=15000; on Ubuntu 24.04+ also "
        .. "kernel.apparmor_restrict_unprivileged_userns=0, or run as root; in a container, allow "
        .. "unshare and clone with CLONE_NEWUSER in its seccomp profile")
    add("seccomp", "probe", p.seccomp, p.seccomp and "a filter was loaded" or "no filter could be loaded",
        "use a kernel built with CONFIG_SECCOMP_FILTER")
    add("mount_setattr", "probe", p.mount_setattr, p.mount_setattr and "available (read-only bind mounts)" or "missing",
        "the native backend needs Linux >= 5.12")
    add("openat2", "probe", p.openat2, p.openat2 and "available (safe file transfer)" or "missing",
        "the native backend needs Linux >= 5.6")
    local cg = p.cgroup_version > 0
    add("cgroups", "probe", cg, p.cgroup_note .. (cg and "; writable" or ""),
        "run as root, or delegate a cgroup v2 subtree to this user and set LLMBOX_CGROUP to it")

    local f = io.open("/proc/mounts", "rb")
    local fast, moves, at = _M.cgroup_moves(f and f:read("*a"), p.cgroup_version)
    if f then f:close() end
    -- read from the mounts and the cgroup version, not measured
    add("cgroup moves", "fact", fast, moves, at and ("as root: mount -o remount,favordynmods " .. at
        .. " (Linux >= 6.0; host-wide: forks and exits take that lock's slower side instead; "
        .. "see README, \"Where the time goes\")"), true)

    local native = require "llmbox.backends.native"
    local libc = native.helper and helper_libc(native.helper)
    add("run helper", "fact", native.helper ~= nil, native.helper
        and (native.helper .. ": every native jail's setup and run starts from it ("
            .. (LIBC_NOTE[libc] or "its C library unknown: it does not answer --libc") .. ")")
        or native.helper_error, "run make, or reinstall llmbox (llmbox-run goes beside core.so)")

    local jail, s = jail_test(require "llmbox")
    local limits, limits_ok = {}, true
    for _, t in ipairs(limit_tests(p)) do
        local l = { name = t[1], enforced_by = t[2], source = "jail" }
        if s then
            local t0 = now_ms()
            l.ok, l.result, l.detail = t[3](s)
            l.ms = round(now_ms() - t0)
        else
            l.ok, l.result, l.detail = false, "not tried", "the sandbox could not be created"
        end
        limits_ok = limits_ok and l.ok
        limits[#limits + 1] = l
    end
    if s then
        local t0 = now_ms()
        s:close()
        jail.close_ms = round(now_ms() - t0)
    end

    -- egress (network mode "egress"): a session with it opened and closed; information only
    if jail.ok then
        local pol = assert(require("llmbox.session").load_policy("default"))
        pol.network = { mode = "egress", allow = {} }
        local t0 = now_ms()
        local es, eerr = require("llmbox").session({ policy = pol, backend = "native" })
        local ms = round(now_ms() - t0)
        if es then es:close() end
        add("egress", "jail", es ~= nil, es and format("a session with network mode \"egress\" opened in %g ms "
            .. "(pasta, nftables)", ms) or ("not usable here: " .. tostring(eerr)),
            "egress needs pasta (Debian's passt), libnftables1 and a host with a default route; "
            .. "network mode \"none\" works without them", true)
    end
    local native_ok = p.userns and p.seccomp and p.mount_setattr and p.openat2 and jail.ok
    -- what pools can do here: which languages start warm (their recipe has a warm program)
    local warm = {}
    for _, r in ipairs(require("llmbox.recipes").all().list) do
        if r.warm then warm[#warm + 1] = r.name end
    end
    local backends = {}
    for _, b in ipairs(require("llmbox.backends").list()) do
        local has = {}
        for _, c in ipairs(b.capabilities) do has[c] = true end
        local built = b.status == "available" or b.status == "registered"
        local pools = not built and "" or has.pool
            and ("; pools: yes, warm start for " .. (#warm > 0 and table.concat(warm, ", ") or "none")) or "; pools: no"
        if built then
            local langs = require("llmbox.interactive").languages()
            pools = pools .. (has.interactive and ("; interactive sessions: " .. table.concat(langs, ", "))
                or "; interactive sessions: no")
        end
        if b.name == "native" then
            backends[#backends + 1] = { name = b.name, source = "jail", ok = native_ok, detail = (native_ok
                and "usable: a test jail ran" or "not usable on this host: see the failed checks above") .. pools }
        elseif b.name == "bubblewrap" and b.usable then
            -- the same test jail, built by bwrap
            local bj, bs = jail_test(require "llmbox", "bubblewrap")
            if bs then bs:close() end
            backends[#backends + 1] = { name = b.name, source = "jail", ok = bj.ok, detail = (bj.ok
                and "usable: a test jail built by bwrap ran" or ("not usable here: " .. tostring(bj.error))) .. pools }
        elseif b.status == "available" and engine.KINDS[b.name] then
            -- the engine the backend drives: is it there, and which version
            local e, why = engine.connect(b.name)
            backends[#backends + 1] = { name = b.name, source = "probe", ok = e ~= nil, detail = (e
                and format("usable: %s %s (API %s) answers at %s", engine.KINDS[b.name], e.version, e.api_version,
                    e.endpoint.name) or ("not usable here: " .. tostring(why))) .. pools }
        elseif b.name == "kubernetes" and b.status == "available" then
            -- its API server, and whether the policy accepts the cluster's isolation
            local ok, detail = require("llmbox.backends").get("kubernetes").describe()
            backends[#backends + 1] = { name = b.name, source = "probe", ok = ok, detail = detail .. pools }
        elseif built then
            backends[#backends + 1] = { name = b.name, source = "probe", ok = b.usable,
                detail = (b.usable and "usable" or ("not usable here: " .. tostring(b.why))) .. pools
                    .. (b.file and ("; registered from " .. b.file) or "") }
        else
            backends[#backends + 1] = { name = b.name, source = "fact", ok = false, detail = b.why }
        end
    end
    return { checks = checks, jail = jail, limits = limits, backends = backends, daemon = _M.daemon(),
        ok = native_ok and limits_ok }
end

--- daemon() -> { address, ok, detail }: does a `llmbox serve` answer where `llmbox run --server`
--- would look ($LLMBOX_SERVER, else the default socket)? Information, never a failure.
function _M.daemon()
    local addr = os.getenv("LLMBOX_SERVER")
    if not addr or addr == "" then addr = require("llmbox.serve").default_listen() end
    if not addr then
        return { ok = false, detail = "no address to try: $LLMBOX_SERVER and $XDG_RUNTIME_DIR are unset" }
    end
    local t, terr = require("llmbox.cli.remote").target(addr)
    if not t then return { address = addr, ok = false, detail = terr } end
    local res, err = require("llmbox.http").request({ url = t.base .. "/healthz", unix_socket = t.unix_socket,
        timeout_ms = 1000 })
    local doc = res and res.status == 200 and select(2, pcall(cjson.decode, res.body))
    if type(doc) == "table" and doc.status == "ok" then
        return { address = addr, ok = true, detail = format("llmbox serve %s answers at %s", tostring(doc.version), addr) }
    end
    return { address = addr, ok = false, detail = format("no llmbox serve answers at %s (%s); `llmbox serve` starts "
        .. "one (README: The daemon)", addr, res and ("HTTP " .. res.status) or tostring(err)) }
end

local MARK = { [true] = " ok ", [false] = "FAIL" }

function _M.main(args)
    local r = _M.report()
    if args[1] == "--json" then
        local limits = {}
        for _, l in ipairs(r.limits) do limits[l.name] = l end
        io.stdout:write(cjson.encode({ checks = r.checks, jail = r.jail, limits = limits, backends = r.backends,
            daemon = r.daemon, ok = r.ok }), "\n")
        return r.ok and 0 or 1
    end
    local w = function(...) io.stdout:write(format(...)) end
    w("llmbox %s doctor\n\nHost (probe: tried in a throwaway child; fact: read, not tried):\n", core.VERSION)
    for _, c in ipairs(r.checks) do
        w("  [%s] %-16s %s (%s)\n", c.advice and not c.ok and "note" or MARK[c.ok], c.name, c.detail, c.source)
        if c.fix then w("         %-16s fix: %s\n", "", c.fix) end
    end
    local j = r.jail
    w("\nSandbox test (a real jail, default policy):\n")
    if j.ok then
        w("  [ ok ] %-16s ran /bin/true as uid %d: no capabilities, no_new_privs, a seccomp filter "
            .. "(open %.1f ms, run %.1f ms, close %.1f ms)\n", "jail", j.uid, j.open_ms, j.run_ms, j.close_ms or 0)
    else
        w("  [FAIL] %-16s %s\n", "jail", j.error)
    end
    w("\nLimits (each tried in that jail):\n")
    for _, l in ipairs(r.limits) do
        w("  [%s] %-11s %-11s %s%s\n         %-11s by %s\n", MARK[l.ok], l.name, l.result, l.detail,
            l.ms and format(" (%.1f ms)", l.ms) or "", "", l.enforced_by)
    end
    w("\nBackends (native, bubblewrap: from a test jail; docker, podman: their engine asked; the others: "
        .. "facts about this build):\n")
    for _, b in ipairs(r.backends) do
        w("  [%s] %-11s %s\n", b.ok and " ok " or " -- ", b.name, b.detail)
    end
    w("\nDaemon (where `llmbox run --server` and resty.llmbox look by default):\n  [%s] %-11s %s\n",
        r.daemon.ok and " ok " or " -- ", "serve", r.daemon.detail)
    w("\n%s", r.ok and "The native sandbox works on this host.\n"
        or "The native sandbox cannot run on this host, or does not enforce a limit: fix the FAIL lines above.\n")
    return r.ok and 0 or 1
end

return _M

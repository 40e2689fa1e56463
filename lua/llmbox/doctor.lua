-- `llmbox doctor`: what this host supports, which limits are enforced by what, which backends are
-- usable, and how to fix what is missing. Every line comes from a probe that tries the real thing.
local core = require "llmbox.core"
local cjson = require "cjson.safe"

local format = string.format

local _M = { _VERSION = "0.1.0" }

function _M.report()
    local p = core.probe()
    local checks = {}
    local function add(name, ok, detail, fix)
        checks[#checks + 1] = { name = name, ok = ok, detail = detail, fix = (not ok) and fix or nil }
    end
    add("kernel", true, p.kernel)
    add("running as", true, p.is_root and "root (sandbox uid maps to host uid 65534, or LLMBOX_HOST_UID)"
        or "an ordinary user (sandbox uid maps to your uid)")
    add("user namespaces", p.userns, p.userns and "can be created" or ("cannot be created: " .. p.userns_error),
        "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
        .. "(Debian) or user.max_user_namespaces=15000; on Ubuntu 24.04+ also "
        .. "kernel.apparmor_restrict_unprivileged_userns=0, or run as root")
    add("seccomp", p.seccomp, p.seccomp and "filters can be loaded" or "not available",
        "use a kernel built with CONFIG_SECCOMP_FILTER")
    add("mount_setattr", p.mount_setattr, p.mount_setattr and "available (read-only bind mounts)" or "missing",
        "the native backend needs Linux >= 5.12")
    add("openat2", p.openat2, p.openat2 and "available (safe file transfer)" or "missing",
        "the native backend needs Linux >= 5.6")
    local cg = p.cgroup_version > 0
    add("cgroups", cg, p.cgroup_note,
        "run as root, or delegate a cgroup v2 subtree to this user and set LLMBOX_CGROUP to it")

    local limits = {
        { "timeout", "enforced by the supervisor (SIGKILL to the run's pid namespace)" },
        { "cpu", "enforced by RLIMIT_CPU (SIGXCPU, then SIGKILL)" },
        { "memory", p.cgroup_memory and "enforced by the run's memory cgroup (OOM kill is reported)"
            or "enforced by RLIMIT_DATA, with a loose RLIMIT_AS (allocations fail; not reported as fired)" },
        { "processes", p.cgroup_pids and "enforced by the run's pids cgroup (a fork bomb ends the run)"
            or "enforced by RLIMIT_NPROC per sandbox user namespace (fork fails; not reported as fired)" },
        { "cpus", p.cgroup_cpu and "enforced by the run's cpu cgroup (a CFS quota of that many CPUs' time)"
            or "cannot be enforced here (no cpu cgroup we may write to): runs and policies that ask "
            .. "for a CPU quota are refused" },
        { "open_files", "enforced by RLIMIT_NOFILE (open fails with EMFILE)" },
        { "file_size", "enforced by RLIMIT_FSIZE (SIGXFSZ)" },
        { "output", "enforced by the supervisor (the run is killed, output truncated)" },
        { "workspace", "enforced by the size of the /sandbox tmpfs (ENOSPC)" },
    }
    local native_ok = p.userns and p.seccomp and p.mount_setattr and p.openat2
    -- what pools can do here: which languages start warm (their recipe has a warm program)
    local warm = {}
    for _, r in ipairs(require("llmbox.recipes").all().list) do
        if r.warm then warm[#warm + 1] = r.name end
    end
    local caps = core.backends().native or {}
    local backends = {
        { name = "native", ok = native_ok, detail = (native_ok and "usable" or
            "not usable on this host: see the failed checks above")
            .. (caps.pool and ("; pools: yes, warm start for " .. (#warm > 0 and table.concat(warm, ", ") or "none"))
                or "; pools: no") },
    }
    for _, b in ipairs({ "bubblewrap", "docker", "podman", "kubernetes" }) do
        backends[#backends + 1] = { name = b, ok = false, detail = "not available in this version of llmbox" }
    end
    return { checks = checks, limits = limits, backends = backends, ok = native_ok }
end

function _M.main(args)
    local r = _M.report()
    if args[1] == "--json" then
        local limits = {}
        for _, l in ipairs(r.limits) do limits[l[1]] = l[2] end
        io.stdout:write(cjson.encode({ checks = r.checks, limits = limits, backends = r.backends, ok = r.ok }), "\n")
        return r.ok and 0 or 1
    end
    io.stdout:write("llmbox ", core.VERSION, " doctor\n\nHost:\n")
    for _, c in ipairs(r.checks) do
        io.stdout:write(format("  [%s] %-16s %s\n", c.ok and " ok " or "FAIL", c.name, c.detail))
        if c.fix then io.stdout:write(format("         %-16s fix: %s\n", "", c.fix)) end
    end
    io.stdout:write("\nLimits:\n")
    for _, l in ipairs(r.limits) do io.stdout:write(format("  %-11s %s\n", l[1], l[2])) end
    io.stdout:write("\nBackends:\n")
    for _, b in ipairs(r.backends) do
        io.stdout:write(format("  [%s] %-11s %s\n", b.ok and " ok " or " -- ", b.name, b.detail))
    end
    io.stdout:write("\n", r.ok and "The native sandbox works on this host.\n"
        or "The native sandbox cannot run on this host: fix the FAIL lines above.\n")
    return r.ok and 0 or 1
end

return _M

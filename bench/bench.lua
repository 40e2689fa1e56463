-- llmbox benchmark: fresh-sandbox latency, in-session runs, copies, parallel throughput and memory,
-- side by side with bare python3, bwrap and docker. Run it with `make bench` (which installs what
-- it needs and builds llmbox first), or directly from the repository's root:
--
--   build/bin/llmbox script bench/bench.lua [RESULTS_DIR]
--
-- Environment: BENCH_QUICK=1 (fewer iterations, for trying it out), BENCH_DOCKER ("ok IMAGE
-- DOCKER_BIN" or "skip REASON", as printed by bench/docker-setup.sh; unset: docker is skipped),
-- BENCH_PODMAN (the same, from bench/podman-setup.sh).
-- Writes RESULTS_DIR/results.md, results.json and latency.png (default bench/results).
-- Never a timed test: it reports what it measures, goals included, and always exits 0 unless the
-- sandbox itself fails.
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local B = require "common"
local json = require "cjson"

local now, fmt = B.now_ms, string.format
local ROOT = B.capture("cd '" .. dir .. "/..' && pwd")
local RESULTS = arg[1] or (ROOT .. "/bench/results")
local QUICK = os.getenv("BENCH_QUICK") == "1"
local LLMBOX_BIN = ROOT .. "/build/bin/llmbox"
local PY = "/usr/bin/python3"

math.randomseed(12345) -- reproducible bootstrap intervals

-- Iterations (full / quick). Latency rows are measured round-robin (one sample of each per round)
-- so that drift in the machine's load hits every row alike.
local N = QUICK and {
    warmup = 2, rounds = 15, docker_rounds = 5, session = 30, copy_small = 10, copy_big = 3,
    par_reps = 2, par_ms = 1500, cell = 6, host_runs = 2000,
} or {
    warmup = 3, rounds = 60, docker_rounds = 20, session = 100, copy_small = 30, copy_big = 7,
    par_reps = 5, par_ms = 2500, cell = 15, host_runs = 10000,
}

local function log(...)
    io.stderr:write(fmt(...), "\n")
end

local function die(msg)
    io.stderr:write("bench: ", msg, "\n")
    os.exit(1)
end

-- ---------------------------------------------------------------- the alternatives

-- bwrap with what the native jail does: new user, pid, net, ipc, uts, cgroup and mount
-- namespaces, a read-only tmpfs root with /usr read-only, /bin /lib /lib64 /sbin as links, the
-- same /etc files, a fresh /proc, a minimal /dev, tmpfs /tmp and /sandbox, uid 1000, no
-- capabilities, a clean environment. (bwrap has no seccomp filter or cgroup limits by default.)
local BWRAP = { "/usr/bin/bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
    "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
    "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
    "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
    "--ro-bind-try", "/etc/localtime", "/etc/localtime",
    "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
    "--ro-bind-try", "/etc/ssl/certs", "/etc/ssl/certs",
    "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/sandbox", "--chdir", "/sandbox",
    "--remount-ro", "/", "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
    "--setenv", "HOME", "/sandbox", "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
    PY, "-c", "print(1)" }

local docker_state = os.getenv("BENCH_DOCKER") or "skip docker setup was not run (use make bench)"
local DOCKER_IMAGE, DOCKER_BIN = docker_state:match("^ok (%S+) (%S+)")
local DOCKER_SKIP = not DOCKER_IMAGE and (docker_state:match("^skip (.*)") or docker_state) or nil
local podman_state = os.getenv("BENCH_PODMAN") or "skip podman setup was not run (use make bench)"
local PODMAN_IMAGE, PODMAN_BIN = podman_state:match("^ok (%S+) (%S+)")
local PODMAN_SKIP = not PODMAN_IMAGE and (podman_state:match("^skip (.*)") or podman_state) or nil
-- The container engines llmbox drives, each with its own image of the same root and its own
-- `run --rm` to compare with (podman needs rlimits at or below the host's: ENVIRONMENT.md).
local ENGINES = {}
if DOCKER_IMAGE then
    ENGINES[#ENGINES + 1] = { kind = "docker", image = DOCKER_IMAGE,
        run = { DOCKER_BIN, "run", "--rm", "--network", "none", DOCKER_IMAGE, "python3", "-c", "print(1)" } }
end
if PODMAN_IMAGE then
    ENGINES[#ENGINES + 1] = { kind = "podman", image = PODMAN_IMAGE,
        run = { PODMAN_BIN, "run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit",
            "nproc=1024:1024", PODMAN_IMAGE, "python3", "-c", "print(1)" } }
end

local have_bwrap = B.read_file("/usr/bin/bwrap") ~= nil

-- ---------------------------------------------------------------- latency rows

local rows = {}   -- in display order
local by_id = {}
local function row(id, label, opts)
    local r = { id = id, label = label, samples = {}, errors = 0, note = opts and opts.note,
        unit = opts and opts.unit or "ms", section = opts and opts.section or "latency",
        short = opts and opts.short or id }
    rows[#rows + 1] = r
    by_id[id] = r
    return r
end

local pool -- the fast-path pool (warm, min 2)

-- Waits until the pool has no interpreter still starting, so no row is measured while a refill
-- competes for the CPU.
local function quiesce()
    if not pool then return end
    local t0 = now()
    while pool:stats().starting > 0 and now() - t0 < 10000 do B.sleep_ms(2) end
    B.sleep_ms(5)
end

local function record(r, ms, ok, what)
    if ok then
        r.samples[#r.samples + 1] = ms
    else
        r.errors = r.errors + 1
        if r.errors <= 3 then log("bench: %s: unexpected result: %s", r.label, tostring(what)) end
    end
end

-- A named part of a row's samples (where the time goes), reported as medians.
local function part(r, name, ms)
    r.parts = r.parts or { order = {} }
    if not r.parts[name] then
        r.parts[name] = {}
        r.parts.order[#r.parts.order + 1] = name
    end
    local t = r.parts[name]
    t[#t + 1] = ms
end

local function time_process(r, argv)
    local ms, out, code = B.time_cmd(argv)
    record(r, ms, ms and code == 0 and out == "1\n", ms and fmt("exit %s, output %q", tostring(code), out) or out)
end

local function check_result(res, err, want_warm)
    if not res then return false, err end
    if res.exit_code ~= 0 or res.stdout ~= "1\n" then
        return false, fmt("exit %s, stdout %q, stderr %q", tostring(res.exit_code), tostring(res.stdout), tostring(res.stderr))
    end
    if want_warm and res.warm ~= true then return false, "the run did not use the prestarted interpreter" end
    return true
end

-- A cold session + run + close, with the parts timed; opts: the session's (backend, rootfs).
local function cold_session(r, opts)
    local t0 = now()
    local s, err = llmbox.session(opts)
    local t1 = now()
    local res, rerr, t2
    if s then
        res, rerr = s:run("print(1)")
        t2 = now()
        s:close()
    end
    local ms = now() - t0
    local ok, why = check_result(res, rerr or err)
    record(r, ms, ok, why)
    if ok then part(r, "llmbox.session{ lang = \"python\" }", t1 - t0) part(r, "s:run", t2 - t1)
        part(r, "s:run's own duration_ms", res.duration_ms) part(r, "s:close()", ms - (t2 - t0)) end
end

-- `llmbox run --timings --json`: its stages (llmbox.run's, from main() on) and what the process
-- spends before main() and after its last stage, on the same clock
local function cli_parts(r)
    local ms, out, code, _, t0, t1 = B.time_cmd({ LLMBOX_BIN, "run", "--timings", "--json", "-c", "print(1)" })
    local ok, res = pcall(json.decode, out or "")
    local t = ok and type(res) == "table" and res.timings
    if not (ms and code == 0 and t and t.main_started_ms) then return end
    if t.peak_rss_kib then
        r.rss_kib = r.rss_kib or {}
        r.rss_kib[#r.rss_kib + 1] = t.peak_rss_kib
    end
    part(r, "exec until main(): dynamic loader, libraries", t.main_started_ms - t0)
    part(r, "load: llmbox's Lua modules", t.load)
    part(r, "recipe", t.recipe)
    part(r, "policy: load and check", t.policy)
    part(r, "admit: the code checks", t.admit)
    part(r, "open: the jail's namespaces and mounts", t.open)
    part(r, "run, around the program: plan, files, supervision", t.run - t.program)
    part(r, "the program: its first child's start to exit (entering the jail, cgroups, seccomp, python3 itself)", t.program)
    part(r, "close", t.close)
    part(r, "exit: output, Lua state closed, reaped", t1 - (t.main_started_ms + t.total))
end

local latency_rows = {
    { row("bare", "bare python3 -c 'print(1)' (floor)", { short = "bare python3" }), function(r) time_process(r, { PY, "-c", "print(1)" }) end },
    { row("pooled", "llmbox pooled (fast path): lease + run", { short = "llmbox pooled" }), function(r)
        local t0 = now()
        local s, err = llmbox.session({ pool = pool })
        local t1 = now()
        local res, rerr
        if s then res, rerr = s:run("print(1)") end
        local ms = now() - t0
        if s then s:close() end
        pool:maintain() -- refills the pool: not timed
        local ok, why = check_result(res, rerr or err, true)
        record(r, ms, ok, why)
        if ok then part(r, "lease: llmbox.session{ pool = p }", t1 - t0) part(r, "s:run", ms - (t1 - t0))
            part(r, "s:run's own duration_ms", res.duration_ms) end
    end },
    { row("cold", "llmbox cold: session + run + close", { short = "llmbox cold" }), function(r)
        cold_session(r, { lang = "python" })
    end },
    { row("cli", "llmbox CLI: llmbox run -c 'print(1)'", { short = "llmbox CLI run" }), function(r)
        local ms, out, code = B.time_cmd({ LLMBOX_BIN, "run", "-c", "print(1)" })
        record(r, ms, ms and code == 0 and out == "1\n", ms and fmt("exit %s, output %q", tostring(code), out) or out)
        -- the same run again with --timings --json: where its time goes (not a sample of the row)
        quiesce()
        cli_parts(r)
    end },
}
-- the same, from a root filesystem (issue 16): the container specs' Python image, unpacked into a
-- directory once (made from this host's files: spec/support/python_image.py)
local ROOTFS, ROOTFS_TMP = os.getenv("BENCH_ROOTFS"), nil
if not ROOTFS then
    local tmp = B.capture("mktemp -d /tmp/llmbox-bench-rootfs.XXXXXX"):gsub("%s+$", "")
    if os.execute(("chmod 755 %s && /usr/bin/python3 spec/support/python_image.py %s/py.tar >/dev/null 2>&1 && "
        .. "mkdir %s/root && tar -xf %s/py.tar -C %s/root && rm %s/py.tar"):format(tmp, tmp, tmp, tmp, tmp, tmp)) == 0 then
        ROOTFS = tmp .. "/root"
    end
    ROOTFS_TMP = tmp
end
if ROOTFS then
    latency_rows[#latency_rows + 1] = { row("cold_rootfs", "llmbox cold from a root filesystem (rootfs = DIR)",
        { short = "llmbox cold, rootfs" }), function(r)
        cold_session(r, { lang = "python", rootfs = ROOTFS })
    end }
end
-- egress (issue 18): a cold session with network mode "egress" (its namespace, ruleset and
-- pasta) whose run makes one connection, refused by the ruleset at once (169.254.169.254: no
-- packet leaves the machine), against the same run in a "none" session
local EGRESS_CODE = [[
import socket
try:
    socket.create_connection(("169.254.169.254", 80), timeout=5)
except OSError as e:
    print(e.errno)
]]
local function egress_session(r, mode)
    local pol = assert(require("llmbox.session").load_policy("default"))
    pol.network = { mode = mode, allow = {} }
    local t0 = now()
    local s, err = llmbox.session({ lang = "python", policy = pol })
    local t1 = now()
    local res, rerr
    if s then
        res, rerr = s:run(EGRESS_CODE)
        s:close()
    end
    local ms = now() - t0
    local want = mode == "egress" and "111\n" or "101\n" -- ECONNREFUSED; ENETUNREACH
    record(r, ms, res and res.stdout == want, res and res.stdout or rerr or err)
    if res then part(r, "llmbox.session{...}", t1 - t0) end
end
if B.capture("command -v pasta 2>/dev/null") ~= "" then
    latency_rows[#latency_rows + 1] = { row("cold_none_connect", "llmbox cold, network none: session + a run that "
        .. "connects (unreachable) + close", { short = "llmbox cold, none + connect" }), function(r)
        egress_session(r, "none")
    end }
    latency_rows[#latency_rows + 1] = { row("cold_egress_connect", "llmbox cold, network egress: session + a run that "
        .. "connects (refused by the ruleset) + close", { short = "llmbox cold, egress + connect" }), function(r)
        egress_session(r, "egress")
    end }
end
if have_bwrap then
    latency_rows[#latency_rows + 1] = { row("bwrap", "bwrap (same namespaces and mounts)", { short = "bwrap" }), function(r)
        time_process(r, BWRAP)
    end }
    -- llmbox's bubblewrap backend (issue 16): bwrap builds each session's jail
    latency_rows[#latency_rows + 1] = { row("cold_bubblewrap", "llmbox cold on the bubblewrap backend: session + run + close",
        { short = "llmbox cold, bubblewrap" }), function(r)
        cold_session(r, { lang = "python", backend = "bubblewrap" })
    end }
    latency_rows[#latency_rows + 1] = { row("cli_bubblewrap", "llmbox CLI on bubblewrap: llmbox run -b bwrap -c 'print(1)'",
        { short = "llmbox CLI, bubblewrap" }), function(r)
        time_process(r, { LLMBOX_BIN, "run", "-b", "bwrap", "-c", "print(1)" })
    end }
end
-- llmbox's docker and podman backends: the same image, hardened as the sandbox spec asks,
-- driven through the Engine API; closing is also a row of its own (its goal is its own)
local DOCKER_RUN = { argv = { "python3", "-c", "print(1)" }, env = { "PATH=/usr/bin:/bin" }, cwd = "/sandbox",
    limits = { timeout = 30, output = 65536 } }
for _, eng in ipairs(ENGINES) do
    local k = eng.kind
    eng.driver = require("llmbox.backends.engines").driver(k)
    eng.spec = require("llmbox.plan").sandbox(assert(require("llmbox.policy").load("default")), nil,
        { image = eng.image })
    latency_rows[#latency_rows + 1] = { row(k, k .. " run --rm --network none", { short = k .. " run" }),
        function(r, round)
            if round > N.docker_rounds then return end
            time_process(r, eng.run)
            B.sleep_ms(100) -- let the engine finish tearing the container down
        end }
    -- (filled from the open + run + close row's parts once the latency rounds are done, so that
    -- the warm-up rounds stay out of it)
    row(k .. "_close", fmt("llmbox %s backend: close (remove the container)", k),
        { section = "session", short = k .. ": close" })
    latency_rows[#latency_rows + 1] = { row(k .. "_driver", fmt("llmbox %s backend: open + run + close", k),
        { short = "llmbox " .. k }), function(r, round)
        if round > N.docker_rounds then return end
        local t0 = now()
        local h, err = eng.driver.open(eng.spec)
        local t1 = now()
        local res, rerr, t2
        if h then
            res, rerr = h:run(DOCKER_RUN)
            t2 = now()
            h:close()
        end
        local ms = now() - t0
        local ok, why = check_result(res, rerr or err)
        record(r, ms, ok, why)
        if ok then
            part(r, "open: create, start, find the keeper", t1 - t0) part(r, "run: one exec", t2 - t1)
            part(r, "close: remove the container", ms - (t2 - t0))
        end
        B.sleep_ms(100)
    end }
end

-- The kubernetes backend (issue 17) against the stand-in that bench/run.sh starts (BENCH_K8S=1,
-- KUBECONFIG its kubeconfig): its pods are native jails on this host, so these rows measure
-- llmbox's side of a cluster (the API calls, the exec websockets, the run wrapper), not a real
-- cluster's scheduling, image pulls or network.
local K8S_OPTS = { lang = "python", backend = "kubernetes", policy = "kubernetes", image = "llmbox-bench:stand-in" }
local k8s_session, k8s_pool
if os.getenv("BENCH_K8S") == "1" and os.getenv("KUBECONFIG") then
    latency_rows[#latency_rows + 1] = { row("k8s_cold", "llmbox kubernetes backend (stand-in): open + run + close",
        { short = "llmbox k8s, stand-in" }), function(r, round)
        if round > N.docker_rounds then return end
        cold_session(r, K8S_OPTS)
    end }
    latency_rows[#latency_rows + 1] = { row("k8s_run", "llmbox kubernetes backend (stand-in): a run in an open pod",
        { short = "k8s: run in a pod" }), function(r)
        if not k8s_session then k8s_session = assert(llmbox.session(K8S_OPTS)) end
        local t0 = now()
        local res, rerr = k8s_session:run("print(1)")
        record(r, now() - t0, check_result(res, rerr))
    end }
    latency_rows[#latency_rows + 1] = { row("k8s_pooled", "llmbox kubernetes backend (stand-in): pooled lease + run",
        { short = "k8s: pooled" }), function(r)
        if not k8s_pool then
            k8s_pool = assert(llmbox.pool({ lang = "python", backend = "kubernetes", policy = "kubernetes",
                image = K8S_OPTS.image, min = 2, max = 4 }))
        end
        local t0 = now()
        local s, err = llmbox.session({ pool = k8s_pool })
        local res, rerr
        if s then res, rerr = s:run("print(1)") end
        local ms = now() - t0
        if s then s:close() end
        k8s_pool:maintain() -- refills the pool: not timed
        record(r, ms, check_result(res, rerr or err))
    end }
end

-- ---------------------------------------------------------------- the run

local function cpu_pressure()
    local p = B.read_file("/proc/pressure/cpu")
    return p and p:match("some avg10=(%S+) avg60=(%S+)") and fmt("some avg10=%s avg60=%s", p:match("some avg10=(%S+) avg60=(%S+)")) or "n/a"
end
local load_start, pressure_start = (B.read_file("/proc/loadavg") or ""):match("^(%S+ %S+ %S+)"), cpu_pressure()
local t_start = now()
log("bench: %s run; results go to %s", QUICK and "quick (BENCH_QUICK=1)" or "full", RESULTS)
assert(os.execute("mkdir -p '" .. RESULTS .. "'"))

local err
pool, err = llmbox.pool({ lang = "python", min = 2, max = 4 })
if not pool then die("cannot create the pool: " .. tostring(err)) end
quiesce()

-- 1. fresh sandbox latency, round-robin
local total_rounds = N.warmup + N.rounds
log("bench: latency of a fresh sandbox (%d rounds of %d rows)", N.rounds, #latency_rows)
for round = 1, total_rounds do
    for _, lr in ipairs(latency_rows) do
        quiesce()
        local r = lr[1]
        if round <= N.warmup then
            local saved, saved_err, saved_parts = r.samples, r.errors, r.parts
            r.samples = {}
            lr[2](r, round)
            r.samples, r.errors, r.parts = saved, saved_err, saved_parts
        else
            lr[2](r, round - N.warmup)
        end
    end
end
local pool_stats = pool:stats()
for _, eng in ipairs(ENGINES) do
    local parts = by_id[eng.kind .. "_driver"].parts
    by_id[eng.kind .. "_close"].samples = parts and parts["close: remove the container"] or {}
end

-- 2. runs inside one open session
log("bench: runs inside an open session (%d each)", N.session)
local in_run = row("session_run", "open session: s:run('print(1)')", { section = "session", short = "in session: run" })
local in_exec = row("session_exec", "open session: s:exec({'true'})", { section = "session", short = "in session: exec true" })
do
    local s = assert(llmbox.session({ lang = "python" }))
    for i = 1, N.warmup do s:run("print(1)") s:exec({ "true" }) end
    for i = 1, N.session do
        quiesce()
        local t0 = now()
        local res, rerr = s:run("print(1)")
        local ms = now() - t0
        local ok, why = check_result(res, rerr)
        record(in_run, ms, ok, why)
        t0 = now()
        res, rerr = s:exec({ "true" })
        ms = now() - t0
        record(in_exec, ms, res and res.exit_code == 0, res and ("exit " .. tostring(res.exit_code)) or rerr)
    end
    s:close()
end

-- 2b. interactive sessions (issue 15): cells of one interpreter
log("bench: interactive cells (%d each)", N.session)
local cell_inc = row("cell_inc", "interactive session: cell x = x + 1", { section = "session", short = "cell: x = x + 1" })
local cell_plot = row("cell_plot", "interactive session: cell plotting a line (matplotlib, after the first)",
    { section = "session", short = "cell: plot a line" })
do
    local s, serr = llmbox.session({ lang = "python", interactive = true })
    if not s then
        record(cell_inc, 0, false, serr)
    else
        assert(s:run("x = 0\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nNone"))
        for i = 1, N.warmup + N.session do
            quiesce()
            local t0 = now()
            local res, rerr = s:run("x = x + 1")
            local ms = now() - t0
            if i > N.warmup then record(cell_inc, ms, res and res.exit_code == 0, res and res.stderr or rerr) end
        end
        for i = 1, N.warmup + math.max(5, math.floor(N.session / 3)) do
            quiesce()
            local t0 = now()
            local res, rerr = s:run("plt.plot([1, 3, 2])\nNone")
            local ms = now() - t0
            if i > N.warmup then
                record(cell_plot, ms, res and res.exit_code == 0 and #res.plots == 1,
                    res and ("exit " .. res.exit_code .. ", " .. #res.plots .. " plots " .. res.stderr) or rerr)
            end
        end
        s:close()
    end
    -- a lease from an interactive pool: its interpreter already started; lease + first cell
    local cell_pool = row("cell_pooled", "interactive pool: lease + first cell x = 1",
        { section = "session", short = "cell: pooled first" })
    local ip, perr = llmbox.pool({ lang = "python", interactive = true, min = 2, max = 4 })
    if not ip then
        record(cell_pool, 0, false, perr)
    else
        for i = 1, N.warmup + N.session do
            ip:maintain()
            quiesce()
            B.sleep_ms(150) -- as the pooled rows: the refill is not this lease's time
            local t0 = now()
            local ls, lerr = llmbox.session({ pool = ip })
            local res, rerr
            if ls then res, rerr = ls:run("x = 1") end
            local ms = now() - t0
            if ls then ls:close() end
            if i > N.warmup then record(cell_pool, ms, res and res.exit_code == 0, res and res.stderr or rerr or lerr) end
        end
        ip:close()
    end
end

-- 2c. the data-science cell (issue 19): numpy and matplotlib imported, a line plot saved; in a
-- cold session, leased from a pool, and leased from a pool that preloads both modules. Round
-- robin; a pool's refill is not the lease's time (as the pooled rows)
local DS_CODE = [[
import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 10, 200)
plt.plot(x, np.sin(x))
plt.savefig("line.png")
]]
log("bench: the data-science cell, cold and pooled (%d each)", N.cell)
do
    local ds = {
        { row("ds_cold", "cold: session + cell + close", { section = "cell", short = "cell: cold" }) },
        { row("ds_pooled", "pooled: lease + cell", { section = "cell", short = "cell: pooled" }), {} },
        { row("ds_preload", "pooled, preload = { \"numpy\", \"matplotlib.pyplot\" }: lease + cell",
            { section = "cell", short = "cell: pooled, preload" }), { "numpy", "matplotlib.pyplot" } },
    }
    for _, d in ipairs(ds) do
        if d[2] then
            local perr
            d.pool, perr = llmbox.pool({ lang = "python", min = 1, max = 2, preload = d[2] })
            if not d.pool then record(d[1], 0, false, perr) end
        end
    end
    for i = 1, N.warmup + N.cell do
        for _, d in ipairs(ds) do
            local r, p = d[1], d.pool
            if d[2] and not p then goto next end
            if p then
                p:maintain()
                local t0 = now()
                while p:stats().starting > 0 and now() - t0 < 20000 do B.sleep_ms(5) end
                B.sleep_ms(150)
            end
            quiesce()
            do
                local t0 = now()
                local s, serr = llmbox.session(p and { pool = p } or { lang = "python" })
                local res, rerr
                if s then res, rerr = s:run(DS_CODE) s:close() end
                local ms = now() - t0
                if i > N.warmup then
                    record(r, ms, res and res.exit_code == 0 and #res.plots == 1 and (not p or res.warm),
                        res and fmt("exit %s, %d plots, warm %s: %s", tostring(res.exit_code), #res.plots,
                            tostring(res.warm), res.stderr) or rerr or serr)
                end
            end
            ::next::
        end
    end
    for _, d in ipairs(ds) do
        if d.pool then d.pool:close() end
    end
end

-- what the daemon's load rows found (goals below)
local SERVE = {}

-- the daemon (issue 14): POST /v1/run of print(1) over its unix socket, a warm worker answering;
-- a connection per request (libcurl's, through llmbox.http), as a one-off client makes; back to
-- back requests are slower (the refill competes for the 2 cores): the daemon's rows of issue 14
-- will measure those
do
    local r = row("serve_run", "llmbox serve: POST /v1/run print(1) over its unix socket",
        { section = "session", short = "daemon: POST /v1/run" })
    local sdir = B.capture("mktemp -d /tmp/llmbox-bench-serve.XXXXXX")
    local sock = sdir .. "/llmbox.sock"
    local d = B.spawn({ "/bin/sh", "-c", "exec '" .. LLMBOX_BIN .. "' serve --listen 'unix:" .. sock .. "' 2>/dev/null" })
    local http = require "llmbox.http"
    local function post(path, body)
        local res, perr = http.request({ url = "http://llmbox" .. path, method = body and "POST" or "GET",
            unix_socket = sock, body = body, headers = { ["Content-Type"] = "application/json" }, timeout_ms = 30000 })
        if not res then return nil, perr end
        if res.status ~= 200 then return nil, "HTTP " .. res.status .. ": " .. tostring(res.body) end
        return json.decode(res.body)
    end
    local up
    for _ = 1, 200 do
        if post("/healthz") then up = true break end
        B.sleep_ms(25)
    end
    if not up then
        record(r, 0, false, "the daemon did not answer on " .. sock)
    else
        for i = 1, N.warmup + N.session do
            quiesce()
            -- as the pooled rows wait for their refill: the daemon's warm worker starts the
            -- next interpreter after it answered, which is not this request's time
            B.sleep_ms(150)
            local t0 = now()
            local res, rerr = post("/v1/run", '{"code":"print(1)"}')
            local ms = now() - t0
            if i > N.warmup then
                local ok, why = check_result(res, rerr)
                record(r, ms, ok, why)
            end
        end
        -- the CLI through the daemon: a process per run, as `llmbox run` is used
        local rc = row("serve_cli", "llmbox run --server unix:SOCK -c 'print(1)'",
            { section = "session", short = "daemon: llmbox run --server" })
        for i = 1, N.warmup + N.session do
            quiesce()
            B.sleep_ms(150)
            if i > N.warmup then
                time_process(rc, { LLMBOX_BIN, "run", "--server", "unix:" .. sock, "-c", "print(1)" })
            else
                B.time_cmd({ LLMBOX_BIN, "run", "--server", "unix:" .. sock, "-c", "print(1)" })
            end
        end
        -- many clients at once, then the daemon's memory across many requests (bench/load.py:
        -- keep-alive connections, one run after another)
        local function load(clients, mode, amount)
            local text = B.capture(fmt("%s %s/load.py '%s' %d %s %d", PY, ROOT .. "/bench", sock, clients, mode, amount))
            local ok, doc = pcall(json.decode, text or "")
            return ok and doc or { errors = -1, first_error = "bench/load.py: " .. tostring(text) }
        end
        local function rss_kib()
            local st = B.capture("grep VmRSS /proc/" .. d.pid .. "/status")
            return tonumber((st or ""):match("(%d+)"))
        end
        local secs = QUICK and 10 or 60
        log("bench: the daemon: 64 clients for %d s", secs)
        SERVE.load = load(64, "--seconds", secs)
        SERVE.load.seconds_asked = secs
        local total = QUICK and 2000 or 10000
        log("bench: the daemon's memory across %d requests", total)
        SERVE.rss = { rss_kib() }
        SERVE.mem = load(8, "--requests", total / 2)
        SERVE.rss[2] = rss_kib()
        local second = load(8, "--requests", total / 2)
        SERVE.rss[3] = rss_kib()
        SERVE.mem.requests = SERVE.mem.requests + second.requests
        SERVE.mem.errors = SERVE.mem.errors + second.errors
        SERVE.mem.first_error = SERVE.mem.first_error or second.first_error
    end
    os.execute("kill -TERM " .. d.pid)
    B.wait(d)
    os.execute("rm -rf '" .. sdir .. "'")
end

for _, eng in ipairs(ENGINES) do
    local k = eng.kind
    local r = row(k .. "_session_run", fmt("open %s container: run python3 -c 'print(1)'", k),
        { section = "session", short = k .. ": run in open container" })
    local h, herr = eng.driver.open(eng.spec)
    if not h then
        record(r, 0, false, herr)
    else
        for _ = 1, N.warmup do h:run(DOCKER_RUN) end
        for _ = 1, N.docker_rounds do
            quiesce()
            local t0 = now()
            local res, rerr = h:run(DOCKER_RUN)
            local ok, why = check_result(res, rerr)
            record(r, now() - t0, ok, why)
        end
        h:close()
    end
end

for _, eng in ipairs(ENGINES) do
    -- an interactive session in a container (issue 15): its interpreter is one exec kept open,
    -- its channel carried by llmbox's helper over the exec's streams
    local k = eng.kind
    local r = row(k .. "_cell", fmt("%s interactive session: cell x = x + 1", k),
        { section = "session", short = k .. ": cell x = x + 1" })
    local s, serr = llmbox.session({ lang = "python", backend = k, image = eng.image, interactive = true })
    local first, ferr
    if s then first, ferr = s:run("x = 0") end
    if not first then
        record(r, 0, false, serr or ferr)
    else
        for i = 1, N.warmup + N.session do
            quiesce()
            local t0 = now()
            local res, rerr = s:run("x = x + 1")
            local ms = now() - t0
            if i > N.warmup then record(r, ms, res and res.exit_code == 0, res and res.stderr or rerr) end
        end
    end
    if s then s:close() end
end

for _, eng in ipairs(ENGINES) do
    -- a pool of containers: the lease's first run goes to the interpreter its container started
    -- ahead of time (the warm mode of the driver's wrapper); the refill is not timed
    local k = eng.kind
    local r = row(k .. "_pooled", fmt("%s pool: lease + run python3 'print(1)'", k),
        { section = "session", short = k .. ": pooled lease + run" })
    local p, perr = llmbox.pool({ lang = "python", backend = k, image = eng.image, min = 2, max = 3 })
    if not p then
        record(r, 0, false, perr)
    else
        for i = 1, N.warmup + N.docker_rounds do
            local since = now()
            while p:stats().starting > 0 and now() - since < 20000 do
                p:maintain()
                B.sleep_ms(5)
            end
            quiesce()
            -- as the native pooled row: the lease and its run are timed; giving it back (the
            -- container's removal) and the refill are the pool's, not timed
            local t0 = now()
            local s, lerr = llmbox.session({ pool = p })
            local t1 = now()
            local res, rerr
            if s then res, rerr = s:run("print(1)") end
            local ms = now() - t0
            if s then s:close() end
            local ok, why = check_result(res, rerr or lerr)
            if res and not res.warm then ok, why = false, "the lease ran cold" end
            if i > N.warmup then
                record(r, ms, ok, why)
                if ok then part(r, "lease: llmbox.session{ pool = p }", t1 - t0) part(r, "s:run", ms - (t1 - t0)) end
            end
            p:maintain()
        end
        p:close()
    end
end

-- 3. copies in and out
log("bench: copies of 1 MiB (%d) and 100 MiB (%d) each way", N.copy_small, N.copy_big)
local tmpdir = B.capture("mktemp -d /tmp/llmbox-bench.XXXXXX")
local function make_file(path, mib)
    local chunk = {}
    for i = 1, 65536 do chunk[i] = string.char(math.random(0, 255), math.random(0, 255), math.random(0, 255), math.random(0, 255)) end
    chunk = table.concat(chunk) -- 256 KiB of random bytes
    local f = assert(io.open(path, "wb"))
    for i = 1, mib * 4 do f:write(chunk) end
    f:close()
end
-- native's, then each engine's (the same files, into a container of the bench's image)
local copy_backends = { { id = "", label = "", opts = { lang = "python" } } }
for _, eng in ipairs(ENGINES) do
    copy_backends[#copy_backends + 1] = { id = eng.kind .. "_", label = eng.kind .. ": ",
        opts = { lang = "python", backend = eng.kind, image = eng.image } }
end
local copy_cases = {}
for _, cb in ipairs(copy_backends) do
    for _, c in ipairs({ { "1m", 1, N.copy_small }, { "100m", 100, N.copy_big } }) do
        copy_cases[#copy_cases + 1] = { c[1], c[2], c[3], cb }
    end
end
for _, c in ipairs(copy_cases) do
    local tag, mib, iters, cb = c[1], c[2], c[3], c[4]
    local host = tmpdir .. "/in-" .. tag
    make_file(host, mib)
    local r_in = row(cb.id .. "copy_to_" .. tag, fmt("%scopy_to %d MiB (host -> /sandbox)", cb.label, mib),
        { section = "copy" })
    local r_out = row(cb.id .. "copy_from_" .. tag, fmt("%scopy_from %d MiB (/sandbox -> host)", cb.label, mib),
        { section = "copy" })
    r_in.mib, r_out.mib = mib, mib
    local s = assert(llmbox.session(cb.opts))
    for i = 1, iters + 1 do
        quiesce()
        local t0 = now()
        local ok, cerr = s:copy_to(host, "/sandbox/x")
        local ms = now() - t0
        if i > 1 then record(r_in, ms, ok, cerr) end
        local out = tmpdir .. "/out-" .. tag
        t0 = now()
        ok, cerr = s:copy_from("/sandbox/x", out)
        ms = now() - t0
        if ok then
            local f = io.open(out, "rb")
            local size = f and f:seek("end") or -1
            if f then f:close() end
            if size ~= mib * 1048576 then ok, cerr = false, "copied " .. size .. " bytes" end
        end
        if i > 1 then record(r_out, ms, ok, cerr) end
        os.remove(out)
        s:exec({ "rm", "-f", "/sandbox/x" })
    end
    s:close()
    os.remove(host)
end
os.execute("rm -rf '" .. tmpdir .. "'")
pool:close()
pool = nil
if k8s_session then k8s_session:close() end
if k8s_pool then k8s_pool:close() end

-- 4. parallel throughput: separate processes, started together
log("bench: parallel throughput, %d x %.1f s per configuration", N.par_reps, N.par_ms / 1000)
local par = {}
local function run_parallel(mode, n)
    local ws = {}
    for i = 1, n do
        ws[i] = assert(B.spawn({ LLMBOX_BIN, "script", ROOT .. "/bench/worker.lua", mode },
            { stdin_pipe = true, stderr_separate = true }))
    end
    for _, w in ipairs(ws) do
        local line = B.read_line(w)
        if line ~= "ready" then die(fmt("worker %s did not get ready: %s", mode, tostring(line))) end
    end
    local start = now() + 20
    for _, w in ipairs(ws) do B.write(w, fmt("go %.3f %.3f\n", start, start + N.par_ms)) end
    local ok, failed, first, last = 0, 0, math.huge, 0
    for _, w in ipairs(ws) do
        local line = B.read_line(w)
        local a, b, c, d = (line or ""):match("^result (%d+) (%d+) (%S+) (%S+)$")
        if not a then die(fmt("worker %s failed: %s", mode, tostring(line))) end
        ok, failed = ok + tonumber(a), failed + tonumber(b)
        first, last = math.min(first, tonumber(c)), math.max(last, tonumber(d))
        B.wait(w)
    end
    return ok / ((last - first) / 1000), ok, failed
end
for _, mode in ipairs({ "bare", "cold", "pooled" }) do
    for _, n in ipairs({ 2, 4 }) do
        local label = ({ bare = "bare python3", cold = "llmbox cold", pooled = "llmbox pooled (own pool each)" })[mode]
        local r = row("par_" .. mode .. "_" .. n, fmt("%s, %d processes", label, n), { section = "parallel", unit = "runs/s" })
        r.mode, r.n, r.runs, r.failed = mode, n, 0, 0
        for rep = 1, N.par_reps do
            local rate, ok, failed = run_parallel(mode, n)
            r.samples[#r.samples + 1] = rate
            r.runs, r.failed = r.runs + ok, r.failed + failed
            r.errors = r.errors + failed
        end
        par[#par + 1] = r
    end
end

-- 5. memory per idle pooled sandbox
log("bench: memory of a pool of 8 idle sandboxes")
local MEM_N = 8
local mem
do
    local w = assert(B.spawn({ LLMBOX_BIN, "script", ROOT .. "/bench/worker.lua", "mem", tostring(MEM_N) },
        { stderr_separate = true }))
    local line = B.read_line(w)
    B.wait(w)
    local okj, m = pcall(json.decode, line or "")
    if not okj or type(m) ~= "table" then die("the memory worker failed: " .. tostring(line)) end
    mem = m
    mem.per_sandbox_kib = m.idle > 0 and m.sandbox_pss_kib / m.idle or nil
    local by_comm = {}
    for _, p in ipairs(m.processes) do
        by_comm[p.comm] = by_comm[p.comm] or { n = 0, kib = 0, shared = 0 }
        by_comm[p.comm].n = by_comm[p.comm].n + 1
        if p.shares_parent_memory then by_comm[p.comm].shared = by_comm[p.comm].shared + 1 end
        by_comm[p.comm].kib = by_comm[p.comm].kib + p.pss_kib
    end
    mem.by_comm = by_comm
end

-- 6. a pool host's memory across many runs (issue 19)
log("bench: a pool host making %d runs", N.host_runs)
local host_mem
do
    local w = assert(B.spawn({ LLMBOX_BIN, "script", ROOT .. "/bench/worker.lua", "host", tostring(N.host_runs) },
        { stderr_separate = true }))
    local line = B.read_line(w)
    B.wait(w)
    local okj, m = pcall(json.decode, line or "")
    if okj and type(m) == "table" and m.rss_kib then host_mem = m else log("bench: the pool host worker failed: %s", tostring(line)) end
end

local elapsed = (now() - t_start) / 1000

-- ---------------------------------------------------------------- statistics

for _, r in ipairs(rows) do
    if #r.samples > 0 then
        r.median, r.lo, r.hi = B.median_ci(r.samples)
        r.p90 = B.quantile(r.samples, 0.9)
        r.min = B.quantile(r.samples, 0)
    end
end

-- Ratios of latency medians: each llmbox way against each alternative.
local ratios = {}
local function ratio(a, b)
    local ra, rb = by_id[a], by_id[b]
    if not (ra and rb and #ra.samples > 0 and #rb.samples > 0) then return end
    local v, lo, hi = B.ratio_ci(ra.samples, rb.samples)
    ratios[#ratios + 1] = { a = a, b = b, label = ra.label .. " / " .. rb.label, ratio = v, lo = lo, hi = hi }
end
for _, a in ipairs({ "pooled", "cold", "cli" }) do
    for _, b in ipairs({ "bare", "bwrap", "docker", "podman" }) do ratio(a, b) end
end
ratio("docker_driver", "docker")
ratio("podman_driver", "podman")
ratio("pooled", "cold")
ratio("session_run", "bare")
ratio("cold_egress_connect", "cold_none_connect")

-- Difference of medians cold - bare, with a bootstrap interval.
local function diff_ci(a, b)
    local A, Bs = by_id[a].samples, by_id[b].samples
    if #A == 0 or #Bs == 0 then return nil end
    local ds, ta, tb = {}, {}, {}
    local function rs(xs, tmp)
        for i = 1, #xs do tmp[i] = xs[math.random(#xs)] end
        return B.median(tmp)
    end
    for i = 1, B.BOOT do ds[i] = rs(A, ta) - rs(Bs, tb) end
    table.sort(ds)
    return B.median(A) - B.median(Bs), ds[math.floor(B.BOOT * 0.025)], ds[math.ceil(B.BOOT * 0.975)]
end

-- ---------------------------------------------------------------- goals

local goals = {}
local function goal(name, target, value, pass, detail)
    goals[#goals + 1] = { name = name, target = target, value = value, pass = pass, detail = detail }
end
do
    local p = by_id.pooled
    goal("fast path p50 for a fresh Python sandbox", "<= 3 ms",
        p.median and fmt("%.2f ms [%.2f, %.2f]", p.median, p.lo, p.hi) or "n/a",
        p.median ~= nil and p.median <= 3, "llmbox.session{pool=p} + s:run('print(1)')")
    local d, dlo, dhi = diff_ci("cold", "bare")
    goal("cold native within 10 ms of bare python3", "<= +10 ms",
        d and fmt("%+.1f ms [%+.1f, %+.1f] (%.1f vs %.1f ms)", d, dlo, dhi, by_id.cold.median, by_id.bare.median) or "n/a",
        d ~= nil and d <= 10, "median(cold session+run+close) - median(bare python3)")
    if by_id.cold_rootfs then
        local dr, drlo, drhi = diff_ci("cold_rootfs", "cold")
        goal("a cold run from a root filesystem, over one from the host's /usr", "<= +2 ms",
            dr and fmt("%+.2f ms [%+.2f, %+.2f] (%.1f vs %.1f ms)", dr, drlo, drhi, by_id.cold_rootfs.median,
                by_id.cold.median) or "n/a", dr ~= nil and dr <= 2,
            "median(cold session+run+close, rootfs = the Python image unpacked) - median(the same from /usr)")
    end
    local best, bare_best
    for _, r in ipairs(par) do
        if r.mode ~= "bare" and r.median and (not best or r.median > best.median) then best = r end
        if r.mode == "bare" and r.median and (not bare_best or r.median > bare_best.median) then bare_best = r end
    end
    goal("fresh-sandbox Python runs/s", ">= 300 runs/s",
        best and fmt("%.0f runs/s [%.0f, %.0f]", best.median, best.lo, best.hi) or "n/a",
        best ~= nil and best.median >= 300, (best and ("best llmbox configuration: " .. best.label) or "")
        .. (bare_best and fmt("; bare python3 processes reach %.0f runs/s here (%s)", bare_best.median, bare_best.label) or ""))
    local per = mem.per_sandbox_kib
    goal("PSS per idle pooled sandbox", "<= 2 MiB",
        per and fmt("%.2f MiB", per / 1024) or "n/a", per ~= nil and per <= 2048,
        fmt("sum of Pss of the pool's processes / %d idle sandboxes", mem.idle))
    -- issue 19's: the cold path against bwrap, runs in an open session, throughput, the
    -- data-science cell, memory
    local function ratio_goal(name, a, b, target, detail)
        local ra, rb = by_id[a], by_id[b]
        if not (ra and rb and ra.median and rb.median) then return end
        local v, lo, hi = B.ratio_ci(ra.samples, rb.samples)
        goal(name, fmt("<= %.1fx", target), fmt("%.2fx [%.2f, %.2f] (%.1f vs %.1f ms)", v, lo, hi, ra.median, rb.median),
            v <= target, detail)
    end
    ratio_goal("CLI run against bwrap", "cli", "bwrap", 1.0, "median(llmbox run -c 'print(1)') / median(bwrap); "
        .. "where the CLI's time goes: the latency section's parts")
    ratio_goal("cold in-process session + run + close against bwrap", "cold", "bwrap", 0.9,
        "median(llmbox.session + s:run + s:close) / median(bwrap)")
    local dsr, dslo, dshi = diff_ci("session_run", "bare")
    goal("a run in an open session, over bare python3", "<= +3 ms",
        dsr and fmt("%+.1f ms [%+.1f, %+.1f] (%.1f vs %.1f ms)", dsr, dslo, dshi, by_id.session_run.median,
            by_id.bare.median) or "n/a", dsr ~= nil and dsr <= 3, "median(s:run('print(1)')) - median(bare python3)")
    local ex = by_id.session_exec
    goal("exec true in an open session", "<= 2 ms", ex.median and fmt("%.2f ms [%.2f, %.2f]", ex.median, ex.lo, ex.hi)
        or "n/a", ex.median ~= nil and ex.median <= 2, ex.label)
    if best and bare_best then
        local share = best.median / bare_best.median
        goal("fresh-interpreter sandboxes/s against bare python3 processes", ">= 95%",
            fmt("%.0f%% (%.0f vs %.0f runs/s)", share * 100, best.median, bare_best.median), share >= 0.95,
            best.label .. " against " .. bare_best.label)
    end
    local dp = by_id.ds_preload
    if dp then
        goal("data-science cell, pooled with preload", "<= 60 ms", dp.median and fmt("%.1f ms [%.1f, %.1f]", dp.median,
            dp.lo, dp.hi) or "n/a", dp.median ~= nil and dp.median <= 60, "lease + a cell importing numpy and "
            .. "matplotlib and saving a line plot" .. (by_id.ds_pooled.median and fmt("; without preload %.0f ms, cold %.0f ms",
            by_id.ds_pooled.median, by_id.ds_cold.median or 0) or ""))
    end
    if host_mem then
        local r = host_mem.rss_kib
        goal(fmt("a pool host: memory flat across %d runs", host_mem.runs), "second half grows <= 1 MiB",
            fmt("RSS %.1f -> %.1f -> %.1f MiB, peak %.1f MiB", r[1] / 1024, r[2] / 1024, r[3] / 1024, host_mem.hwm_kib / 1024),
            host_mem.failed == 0 and r[3] - r[2] <= 1024, fmt("%d failed; leases of a reused sandbox running true, %.0f s",
                host_mem.failed, host_mem.seconds))
    end
    local cli = by_id.cli
    if cli and cli.rss_kib then
        table.sort(cli.rss_kib)
        goal("the CLI's peak RSS", "reported", fmt("%.1f MiB (largest %.1f MiB)",
            B.quantile(cli.rss_kib, 0.5) / 1024, cli.rss_kib[#cli.rss_kib] / 1024), true,
            "median VmHWM of the `llmbox run --timings -c 'print(1)'` processes (their own: wait4's maxrss "
            .. "would count the benchmark's own memory, as posix_spawn's child shares it until exec)")
    end
    -- the daemon's (issue 14)
    local sr = by_id.serve_run
    if sr then
        goal("daemon: POST /v1/run print(1) over the unix socket, warm", "<= 3 ms",
            sr.median and fmt("%.2f ms [%.2f, %.2f]", sr.median, sr.lo, sr.hi) or "n/a",
            sr.median ~= nil and sr.median <= 3, sr.label)
    end
    -- interactive sessions (issue 15)
    for _, g in ipairs({ { "cell_inc", "interactive: cell x = x + 1", 1 }, { "cell_plot", "interactive: cell plotting a line", 30 },
        { "cell_pooled", "interactive: pooled lease + first cell", 3 },
        { "docker_cell", "interactive on docker: cell x = x + 1", 1 },
        { "podman_cell", "interactive on podman: cell x = x + 1", 1 } }) do
        local r = by_id[g[1]]
        if r then
            goal(g[2], fmt("<= %d ms", g[3]), r.median and fmt("%.2f ms [%.2f, %.2f]", r.median, r.lo, r.hi) or "n/a",
                r.median ~= nil and r.median <= g[3], r.label)
        end
    end
    local sc = by_id.serve_cli
    if sc then
        goal("daemon: llmbox run --server, end to end", "<= 12 ms",
            sc.median and fmt("%.1f ms [%.1f, %.1f]", sc.median, sc.lo, sc.hi) or "n/a",
            sc.median ~= nil and sc.median <= 12, sc.label .. (by_id.cli and by_id.cli.median
                and fmt("; the local CLI run: %.1f ms", by_id.cli.median) or ""))
    end
    local L = SERVE.load
    if L then
        goal(fmt("daemon: 64 concurrent clients for %d s", L.seconds_asked), "no error; p99 reported",
            L.errors == 0 and fmt("%d runs, 0 errors, p50 %.0f ms, p99 %.0f ms, %.0f runs/s", L.requests, L.p50 or 0,
                L.p99 or 0, L.rps or 0) or fmt("%s errors: %s", tostring(L.errors), tostring(L.first_error)),
            L.errors == 0 and (L.requests or 0) > 0,
            "POST /v1/run print(1), keep-alive connections over the unix socket; runs beyond the slots wait")
    end
    local M = SERVE.mem
    if M and SERVE.rss[1] and SERVE.rss[3] then
        local growth = SERVE.rss[3] - SERVE.rss[2]
        goal(fmt("daemon: memory flat across %d requests", M.requests), "second half grows <= 1 MiB",
            fmt("RSS %.1f -> %.1f -> %.1f MiB", SERVE.rss[1] / 1024, SERVE.rss[2] / 1024, SERVE.rss[3] / 1024),
            M.errors == 0 and growth <= 1024, fmt("%d errors; RSS before, after the first half, after the second", M.errors))
    end
    -- the docker and podman backends' (issue 13)
    for _, eng in ipairs(ENGINES) do
        local k = eng.kind
        for _, g in ipairs({ { "_driver", "open + run + close", 300 }, { "_session_run", "a run in an open container", 80 },
            { "_pooled", "pooled lease + run", 50 }, { "_close", "close", 150 } }) do
            local r = by_id[k .. g[1]]
            if r then
                goal(k .. ": " .. g[2], fmt("<= %d ms", g[3]),
                    r.median and fmt("%.1f ms [%.1f, %.1f]", r.median, r.lo, r.hi) or "n/a",
                    r.median ~= nil and r.median <= g[3], r.label)
            end
        end
    end
end

-- ---------------------------------------------------------------- host description

local function first_line(s) return (s:match("^[^\n]*")) end
local host = {
    date = os.date("!%Y-%m-%d %H:%M:%S UTC"),
    kernel = B.capture("uname -srm"),
    cpu = (B.capture("grep -m1 'model name' /proc/cpuinfo"):match(":%s*(.*)") or "?"),
    cores = tonumber(B.capture("nproc")),
    memory = fmt("%.1f GiB", (B.meminfo_kib("MemTotal") or 0) / 1048576),
    os = B.capture(". /etc/os-release && echo \"$PRETTY_NAME\""),
    python3 = B.capture(PY .. " --version"),
    bwrap = have_bwrap and B.capture("/usr/bin/bwrap --version") or "not installed",
    docker = DOCKER_BIN and (B.capture(DOCKER_BIN .. " version --format 'client {{.Client.Version}}, engine {{.Server.Version}}'")) or ("skipped: " .. tostring(DOCKER_SKIP)),
    podman = PODMAN_BIN and (B.capture(PODMAN_BIN .. " version --format '{{.Client.Version}}'")) or ("skipped: " .. tostring(PODMAN_SKIP)),
    llmbox = first_line(B.capture(LLMBOX_BIN .. " --version")),
    luajit = jit and jit.version or "?",
    load = fmt("%s at start, %s at end", tostring(load_start), tostring((B.read_file("/proc/loadavg") or ""):match("^(%S+ %S+ %S+)"))),
    cpu_pressure = fmt("%s at start; %s at end (after the benchmark's own parallel phase)", pressure_start, cpu_pressure()),
    cgroups = B.capture("test -d /sys/fs/cgroup/memory && echo 'v1 (hybrid)' || echo v2"),
    quick = QUICK,
    elapsed_s = elapsed,
}

-- ---------------------------------------------------------------- output

local function fnum(v, unit)
    if v == nil then return "n/a" end
    if unit == "runs/s" then return fmt("%.0f", v) end
    if v >= 100 then return fmt("%.0f", v) end
    if v >= 10 then return fmt("%.1f", v) end
    return fmt("%.2f", v)
end

local function ci(r)
    if not r.median then return "n/a" end
    return fmt("%s [%s, %s]", fnum(r.median, r.unit), fnum(r.lo, r.unit), fnum(r.hi, r.unit))
end

local SECTIONS = {
    { "latency", "Fresh sandbox running Python print(1): latency (ms)" },
    { "session", "Inside an already-open session (ms)" },
    { "cell", "A data-science cell: numpy and matplotlib imported, a line plot saved (ms)" },
    { "copy", "Copies (ms; MiB/s from the median)" },
    { "parallel", "Parallel fresh sandboxes, separate processes (throughput, runs/s, higher is better)" },
}

local md = {}
local function out(s) md[#md + 1] = s end

out("# llmbox benchmark results")
out("")
out(fmt("Generated by `make bench`%s on %s. Medians with bootstrap 95%% confidence intervals " ..
    "(%d resamples); n = samples, p90 = 90th percentile.", QUICK and " (BENCH_QUICK=1)" or "", host.date, B.BOOT))
out("")
out("## Host")
out("")
out("| | |")
out("|---|---|")
local HOST_LABELS = { load = "load average (1, 5, 15 min)", cpu_pressure = "CPU pressure (/proc/pressure/cpu)" }
for _, k in ipairs({ "os", "kernel", "cpu", "cores", "memory", "cgroups", "python3", "bwrap", "docker", "podman", "llmbox", "luajit", "load", "cpu_pressure" }) do
    out(fmt("| %s | %s |", HOST_LABELS[k] or k, tostring(host[k])))
end
out(fmt("| benchmark wall time | %.0f s |", elapsed))
out("")
for _, sec in ipairs(SECTIONS) do
    out("## " .. sec[2])
    out("")
    if sec[1] == "copy" then
        out("| what | median [95% CI] | MiB/s | n | errors |")
        out("|---|---|---|---|---|")
    elseif sec[1] == "parallel" then
        out("| what | runs/s median [95% CI] | repetitions | runs | failed |")
        out("|---|---|---|---|---|")
    else
        out("| what | median [95% CI] | min | p90 | n | errors |")
        out("|---|---|---|---|---|---|")
    end
    for _, r in ipairs(rows) do
        if r.section == sec[1] then
            if sec[1] == "copy" then
                out(fmt("| %s | %s | %s | %d | %d |", r.label, ci(r), r.median and fmt("%.0f", r.mib / (r.median / 1000)) or "n/a", #r.samples, r.errors))
            elseif sec[1] == "parallel" then
                out(fmt("| %s | %s | %d | %d | %d |", r.label, ci(r), #r.samples, r.runs, r.failed))
            else
                out(fmt("| %s | %s | %s | %s | %d | %d |", r.label, ci(r), fnum(r.min), fnum(r.p90), #r.samples, r.errors))
            end
        end
    end
    if sec[1] == "latency" and DOCKER_SKIP then
        out(fmt("| docker run | skipped: %s | | | | |", DOCKER_SKIP))
    end
    if sec[1] == "latency" and PODMAN_SKIP then
        out(fmt("| podman run | skipped: %s | | | | |", PODMAN_SKIP))
    end
    if sec[1] == "latency" and not have_bwrap then
        out("| bwrap | skipped: /usr/bin/bwrap is not installed | | | | |")
    end
    out("")
    if sec[1] == "latency" then
        out("Where the time goes (medians of the parts of each sample, ms):")
        out("")
        out("| row | part | median [95% CI] |")
        out("|---|---|---|")
        for _, id in ipairs({ "pooled", "cold", "cli", "docker_driver", "podman_driver", "docker_pooled", "podman_pooled" }) do
            local r = by_id[id] or {}
            for _, name in ipairs(r.parts and r.parts.order or {}) do
                local m, lo, hi = B.median_ci(r.parts[name])
                out(fmt("| %s | %s | %s [%s, %s] |", r.short, name, fnum(m), fnum(lo), fnum(hi)))
            end
        end
        out("")
    end
end
out("## Ratios of median latencies (lower is faster for the left side)")
out("")
out("| ratio | value [95% CI] |")
out("|---|---|")
for _, r in ipairs(ratios) do
    out(fmt("| %s | %.3fx [%.3f, %.3f] |", r.label, r.ratio, r.lo, r.hi))
end
out("")
out("## Memory of idle pooled sandboxes (PSS)")
out("")
out(fmt("A pool with min = %d, all prewarmed and idle (%d idle, %d starting). PSS summed over every " ..
    "process below the pool's host process, each address space once (a run's init shares its " ..
    "first child's).", MEM_N, mem.idle, mem.starting))
out("")
out("| what | PSS |")
out("|---|---|")
out(fmt("| per idle pooled sandbox | %.2f MiB |", (mem.per_sandbox_kib or 0) / 1024))
out(fmt("| all %d sandboxes | %.2f MiB (%d processes) |", mem.idle, mem.sandbox_pss_kib / 1024, #mem.processes))
local comms = {}
for c in pairs(mem.by_comm) do comms[#comms + 1] = c end
table.sort(comms)
for _, c in ipairs(comms) do
    local bc = mem.by_comm[c]
    out(fmt("| of which `%s` processes | %d, %.2f MiB%s |", c, bc.n, bc.kib / 1024,
        bc.shared > 0 and fmt(" (%d share their parent's address space: counted with it)", bc.shared) or ""))
end
out(fmt("| the host process holding the pool (llmbox script) | %.2f MiB |", (mem.host_pss_kib or 0) / 1024))
out("")
out("## Goals")
out("")
out("| goal | target | measured | result | how |")
out("|---|---|---|---|---|")
for _, g in ipairs(goals) do
    out(fmt("| %s | %s | %s | **%s** | %s |", g.name, g.target, g.value, g.pass and "PASS" or "MISS", g.detail))
end
out("")
out("## What the rows measure")
out("")
out("- *bare python3*: `posix_spawn` of `/usr/bin/python3 -c 'print(1)'` until it is reaped (no shell).")
out("- *llmbox pooled*: `llmbox.session{ pool = p }` + `s:run(\"print(1)\")` with " ..
    "`p = llmbox.pool{ lang = \"python\", min = 2, max = 4 }`; the lease's first run uses an interpreter " ..
    "prestarted in a fresh jail (every result checked: stdout `1`, `warm == true`). `s:close()` and " ..
    "`p:maintain()`, which refills the pool, are not timed; before every sample of every row the benchmark waits until no " ..
    "refill is still starting.")
out("- *llmbox cold*: `llmbox.session{ lang = \"python\" }` + `s:run` + `s:close()` in the benchmark's process.")
out("- *llmbox CLI*: the `llmbox run -c 'print(1)'` process, including LuaJIT and library start-up.")
out("- *bwrap*: bubblewrap with the same namespaces and read-only mounts (see `BWRAP` in bench/bench.lua); " ..
    "it installs no seccomp filter and no cgroup/rlimit limits, which llmbox does.")
out("- *docker*: `docker run --rm --network none` of a local Debian bookworm minbase image with python3 " ..
    "(built offline by bench/docker-setup.sh); *podman*: `podman run --rm --network none` of the same image " ..
    "(loaded from Docker by bench/podman-setup.sh).")
out("- *llmbox docker/podman*: the backend's `open` + `run` (one exec of `python3 -c 'print(1)'`) + `close` " ..
    "through the Engine API; *close* is that sample's close alone; the pooled and in-container rows are " ..
    "timed as native's; the copies go into a container of the same image.")
out("- *parallel*: N separate `llmbox script bench/worker.lua MODE` processes released together by a " ..
    "start barrier, each starting fresh sandboxes one after another for " .. fmt("%.1f", N.par_ms / 1000) ..
    " s; runs/s = all completed runs / (last finish - first start). The pooled workers each own a pool " ..
    "(min 2, max 4) and call `p:maintain()` after each lease, so the refill is included.")
out("")
local md_text = table.concat(md, "\n")

-- stdout: the same tables
io.stdout:write("\n", md_text, "\n")

local function write(path, s)
    local f = assert(io.open(path, "wb"))
    f:write(s)
    f:close()
end
write(RESULTS .. "/results.md", md_text)

local jrows = {}
for _, r in ipairs(rows) do
    jrows[#jrows + 1] = { id = r.id, label = r.label, section = r.section, unit = r.unit, n = #r.samples,
        errors = r.errors, median = r.median, ci95 = r.median and { r.lo, r.hi } or nil, p90 = r.p90,
        min = r.min, mib_per_s = r.mib and r.median and r.mib / (r.median / 1000) or nil,
        samples = r.samples }
    if r.parts then
        local parts = {}
        for _, name in ipairs(r.parts.order) do
            local m, lo, hi = B.median_ci(r.parts[name])
            parts[#parts + 1] = { part = name, median = m, ci95 = { lo, hi } }
        end
        jrows[#jrows].parts = parts
    end
end
write(RESULTS .. "/results.json", json.encode({
    host = host, quick = QUICK, bootstrap_resamples = B.BOOT, rows = jrows, ratios = ratios,
    memory = { pool_min = MEM_N, idle = mem.idle, per_sandbox_kib = mem.per_sandbox_kib,
        sandbox_pss_kib = mem.sandbox_pss_kib, host_pss_kib = mem.host_pss_kib, processes = mem.processes },
    goals = goals, docker_skipped = DOCKER_SKIP, podman_skipped = PODMAN_SKIP, pool_stats_after_latency = pool_stats,
}) .. "\n")

-- ---------------------------------------------------------------- chart

local dat = {}
local ymax = 0
for _, r in ipairs(rows) do
    if (r.section == "latency" or r.section == "session") and r.median then
        dat[#dat + 1] = fmt("\"%s\" %.4f %.4f %.4f", r.short, r.median, r.lo, r.hi)
        ymax = math.max(ymax, r.hi)
    end
end
write(RESULTS .. "/latency.dat", "# label median ci_low ci_high (ms)\n" .. table.concat(dat, "\n") .. "\n")
local gp = {
    "set terminal pngcairo size 1100,620 font 'DejaVu Sans,10'",
    fmt("set output '%s/latency.png'", RESULTS),
    fmt("set title \"Python print(1): median latency with bootstrap 95%% CI (%s, %d cores, %s)\"",
        host.cpu:gsub("\"", ""), host.cores or 0, host.date:sub(1, 10)),
    "set ylabel 'milliseconds (log scale)'",
    "set logscale y",
    fmt("set yrange [0.5:%g]", ymax * 5),
    "set style data histogram",
    "set style histogram errorbars gap 1 lw 1.5",
    "set style fill solid 0.75 border -1",
    "set boxwidth 0.8",
    "set xtics rotate by -25 scale 0 font ',9'",
    "set grid ytics",
    "set bmargin 7",
    "set key top left opaque box",
    fmt("plot '%s/latency.dat' using 2:3:4:xtic(1) lc rgb '#3b75af' title 'median, 95%% CI', "
        .. "'' using 0:($4*1.18):(sprintf('%%.1f', $2)) with labels notitle, "
        .. "3 with lines dt 2 lw 1.5 lc rgb '#c0392b' title 'fast-path goal: 3 ms'", RESULTS),
}
write(RESULTS .. "/latency.gp", table.concat(gp, "\n") .. "\n")
local gnuplot_ok = os.execute("gnuplot '" .. RESULTS .. "/latency.gp'")
if gnuplot_ok ~= 0 and gnuplot_ok ~= true then
    log("bench: gnuplot failed or is not installed: no latency.png")
end
os.remove(RESULTS .. "/latency.gp")
if ROOTFS_TMP then os.execute("rm -rf '" .. ROOTFS_TMP .. "'") end

log("bench: done in %.0f s; wrote %s/results.md, results.json, latency.png, latency.dat", elapsed, RESULTS)
return 0

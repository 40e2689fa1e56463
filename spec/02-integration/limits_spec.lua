-- Every limit firing in a real sandbox: the run ends, the whole tree dies, and the result says
-- which limit fired.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local core = require "llmbox.core"

local probe = core.probe()

describe("limits #conformance", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python", policy = "default" })) end)
    after_each(function() s:close() end)

    -- What a backend without run_limits (kubernetes: a pod's memory and CPU are fixed when it is
    -- made) says when a run asks for less: a refusal naming it, never a run with more.
    local function fixed_limits(what, opts)
        if s.driver.capabilities.run_limits then return end
        local r, err = s:run("print(1)", opts)
        assert.is_nil(r)
        assert.matches("cannot " .. what .. " for one run", err, 1, true)
        pending("the " .. s.driver.name .. " backend has no run_limits: a run that asks is refused, as asserted")
    end

    it("wall-clock timeout kills the whole tree #unpriv", function()
        local t0 = helpers.now()
        local r = assert(s:exec("sleep 100 & sleep 100; echo never", { timeout = 1 }))
        local took = helpers.now() - t0
        assert.is_true(r.timed_out)
        assert.equal("timeout", r.limit)
        assert.equal(137, r.exit_code)
        assert.is_true(took < 5, "took " .. took .. " s")
        assert.equal("", r.stdout)
        -- nothing survived into the next run
        r = assert(s:exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '"))
        assert.is_nil(r.stdout:find("sleep 100", 1, true), r.stdout)
    end)

    it("CPU seconds #unpriv", function()
        local r = assert(s:run("while True: pass", { cpu = 1, timeout = 20 }))
        assert.equal("cpu", r.limit)
        assert.is_false(r.timed_out)
        assert.is_true(r.exit_code > 128)
    end)

    it("CPU time of a run stopped by its wall clock is what it used, or absent #unpriv", function()
        local r = assert(s:run("while True: pass", { timeout = 2 }))
        assert.equal("timeout", r.limit)
        if probe.cgroup_cpuacct and helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
        if probe.cgroup_cpuacct then
            -- the busy loop spun for most of 2 s (less on a loaded machine), and cannot have
            -- used more CPU time than wall time: it has one thread
            assert.is_number(r.cpu_ms)
            assert.is_true(r.cpu_ms > 100, "cpu_ms " .. tostring(r.cpu_ms))
            assert.is_true(r.cpu_ms <= r.duration_ms + 100, "cpu_ms " .. r.cpu_ms .. " in " .. r.duration_ms .. " ms")
        else
            assert.is_nil(r.cpu_ms) -- unknown: left out, never a wrong number
        end
        -- the CLI's JSON says the same (`make demo` shows this run)
        local status, out = helpers.cli({ "run", "--json", "-t", "2", "-l", "python", "-c", "while True: pass" })
        assert.equal(124, status)
        local j = require("cjson").decode(out)
        if probe.cgroup_cpuacct then
            assert.is_true(j.cpu_ms > 100, out)
        else
            assert.is_nil(j.cpu_ms, out)
        end
        -- control: a run that ends on its own always says how much CPU time it used
        r = assert(s:run("sum(range(10**6))"))
        assert.is_true(r.cpu_ms > 0)
    end)

    it("cpus: a CPU quota caps a busy loop at that share of its wall time #unpriv", function()
        local busy = "import time\nt = time.time()\nwhile time.time() - t < 2: pass"
        -- a policy's quota is checked when it is loaded
        local bad = helpers.write(helpers.tmppath(".lua"), 'return { extends = "default", limits = { cpus = 0 } }')
        local _, perr = llmbox.session({ lang = "python", policy = bad })
        os.remove(bad)
        assert.matches("limits.cpus", perr, 1, true)
        fixed_limits("change the CPU quota", { cpus = 0.5 })
        if not probe.cgroup_cpu then
            local r, err = s:run(busy, { cpus = 0.5 })
            assert.is_nil(r)
            assert.matches("no cpu cgroup to enforce it", err, 1, true)
            local p = helpers.write(helpers.tmppath(".lua"), 'return { extends = "default", limits = { cpus = 1 } }')
            local s2, serr = llmbox.session({ lang = "python", policy = p })
            os.remove(p)
            assert.is_nil(s2)
            assert.matches("sets a CPU quota", serr, 1, true)
            pending("the quota itself needs a cpu cgroup; here it is refused, as asserted (" .. probe.cgroup_note .. ")")
        end
        local r = assert(s:run(busy, { cpus = 0.5, timeout = 20 }))
        assert.equal(0, r.exit_code)
        local share = r.cpu_ms / r.duration_ms
        -- at most half a CPU, give or take the quota period; more than nothing on a loaded host
        assert.is_true(share <= 0.6, ("share %.2f (cpu %d ms in %d ms)"):format(share, r.cpu_ms, r.duration_ms))
        assert.is_true(share >= 0.1, ("share %.2f"):format(share))
        -- the policy is the ceiling: a run may lower a policy's quota, never raise it
        local p = helpers.write(helpers.tmppath(".lua"), 'return { extends = "default", limits = { cpus = 1 } }')
        local capped = assert(llmbox.session({ lang = "python", policy = p }))
        os.remove(p)
        local _, err = capped:run("print(1)", { cpus = 2 })
        assert.matches("cpus 2 exceeds the limit of policy", err, 1, true)
        assert.equal("1\n", assert(capped:run("print(1)", { cpus = 0.5 })).stdout)
        _, err = capped:run("print(1)", { cpus = 0.001 })
        assert.matches("below the smallest CPU quota", err, 1, true)
        capped:close()
    end)

    it("memory", function()
        fixed_limits("lower memory", { memory = 64 * 1024 * 1024 })
        local r = assert(s:run("x = bytearray(400 * 1024 * 1024); print(len(x))", { memory = 64 * 1024 * 1024 }))
        assert.is_not.equal(0, r.exit_code)
        assert.equal("", r.stdout)
        if probe.cgroup_memory then
            assert.equal("memory", r.limit)
        else
            assert.matches("MemoryError", r.stderr)
        end
    end)

    it("number of processes: a fork bomb ends, reported as the processes limit", function()
        local r = assert(s:exec("b() { b | b & }; b; sleep 5", { processes = 16, timeout = 20 }))
        assert.is_false(r.timed_out)
        -- and the next run works
        local r2 = assert(s:exec({ "echo", "ok" }))
        assert.equal("ok\n", r2.stdout)
        if not probe.cgroup_pids then
            pending("the verdict needs a pids cgroup: without one, RLIMIT_NPROC only makes fork fail ("
                .. probe.cgroup_note .. ")")
        end
        if helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
        assert.equal("processes", r.limit)
    end)

    it("open files #unpriv", function()
        local r = assert(s:run([[
fs = []
try:
    while True: fs.append(open('/dev/null'))
except OSError as e:
    print(e.errno, len(fs) < 40)
]], { open_files = 32 }))
        assert.equal("24 True\n", r.stdout) -- EMFILE
    end)

    it("file size #unpriv", function()
        -- the default action of SIGXFSZ kills the writer, and the result names the limit
        local r = assert(s:exec("exec head -c 2000000 /dev/zero > /sandbox/big", { file_size = 1024 * 1024 }))
        assert.equal("file_size", r.limit)
        assert.equal(128 + 25, r.exit_code) -- SIGXFSZ
        assert.equal(25, r.signal)
        -- a shell reports its child's SIGXFSZ as status 153: still the file size limit
        r = assert(s:exec("head -c 2000000 /dev/zero > /sandbox/big", { file_size = 1024 * 1024 }))
        assert.equal("file_size", r.limit)
        -- CPython ignores SIGXFSZ: the write fails with EFBIG instead
        r = assert(s:run("open('/sandbox/big', 'wb').write(b'0' * 2000000)", { file_size = 1024 * 1024 }))
        assert.equal(1, r.exit_code)
        assert.matches("File too large", r.stderr)
        -- control: a file below the limit
        r = assert(s:exec("head -c 1000 /dev/zero > /sandbox/small", { file_size = 1024 * 1024 }))
        assert.equal(0, r.exit_code)
        assert.is_nil(r.limit)
    end)

    it("bytes of output, truncating what is kept #unpriv", function()
        local r = assert(s:exec("yes llmbox", { output = 10000, timeout = 20 }))
        assert.equal("output", r.limit)
        assert.is_true(r.truncated)
        assert.equal(10000, #r.stdout)
        assert.is_false(r.timed_out)
    end)

    it("workspace size #unpriv", function()
        local small = assert(llmbox.session({ lang = "python", policy = "strict" }))
        -- many files, each below the file size limit, until the workspace is full
        local r = assert(small:exec("for i in 1 2 3 4 5 6 7 8 9 10; do head -c 10000000 /dev/zero > /sandbox/f$i || exit 9; done"))
        assert.equal(9, r.exit_code)
        assert.matches("No space left on device", r.stderr)
        -- /tmp is bounded too
        r = assert(small:exec("for i in $(seq 1 40); do head -c 10000000 /dev/zero > /tmp/f$i || exit 9; done"))
        small:close()
        assert.equal(9, r.exit_code)
    end)

    it("refuses a limit above the policy's instead of granting it #unpriv", function()
        local r, err = s:run("print(1)", { timeout = 100000 })
        assert.is_nil(r)
        assert.matches("exceeds the limit of policy", err)
    end)
end)

-- The native chain moves a run's first child into the run's cgroups (on v1 by its one thread,
-- which spares the kernel's threadgroup lock and its RCU grace period): everything the run
-- starts, processes and their threads, must be in them in every hierarchy, and the caller in none.
describe("a native run's processes", function()
    local function lines(path)
        local out, f = {}, io.open(path, "rb")
        if not f then return out end
        for l in f:lines() do out[#out + 1] = l end
        f:close()
        return out
    end

    -- "memory" -> the path of that hierarchy in /proc/PID/task/TID/cgroup (v2: the "0::" line)
    local function cgroup_of(pid, tid, controller)
        for _, l in ipairs(lines(("/proc/%s/task/%s/cgroup"):format(pid, tid))) do
            local ctrls, path = l:match("^%d+:([^:]*):(.*)$")
            if ctrls == "" and controller == "v2" then return path end
            for c in (ctrls or ""):gmatch("[^,]+") do
                if c == controller then return path end
            end
        end
    end

    it("are all in the run's cgroups, the caller in none; the first child keeps only CAP_KILL", function()
        local version = core.cgroup()
        if not (helpers.is_root() and (version == 1 or version == 2)) or (os.getenv("LLMBOX_BACKEND") or "native") ~= "native" then
            pending("needs root, per-run cgroups and the native backend")
            return
        end
        local controllers = version == 2 and { "v2" } or { "memory", "pids", "cpuacct" }
        local marker = "987." .. math.random(100, 999)
        local out = helpers.tmpname()
        -- a shell, a background sleep, and python with a second thread, all waiting
        local prog = "sleep " .. marker .. " & python3 -c 'import threading, time; "
            .. "t = threading.Thread(target=time.sleep, args=(30,)); t.start(); t.join()' " .. marker .. "; wait"
        os.execute(("%s exec -t 20 -- sh -c %s > %s 2>&1 & echo $! > %s.pid"):format(
            helpers.shell_quote(helpers.bin), helpers.shell_quote(prog), out, out))
        local caller = helpers.read(out .. ".pid"):match("%d+")
        finally(function()
            os.execute("kill " .. caller .. " 2>/dev/null")
            os.remove(out); os.remove(out .. ".pid")
        end)
        local pids
        for _ = 1, 100 do
            pids = {}
            for pid in helpers.capture("pgrep -f " .. helpers.shell_quote(marker:gsub("%.", "[.]") .. "$") .. " || true"):gmatch("%d+") do
                pids[#pids + 1] = pid
            end
            -- the sleep, and python with its two threads
            local threads = 0
            for _, pid in ipairs(pids) do threads = threads + #core.listdir("/proc/" .. pid .. "/task") end
            if #pids == 2 and threads == 3 then break end
            os.execute("sleep 0.1")
        end
        assert.equal(2, #pids, "the run's processes never started: " .. helpers.read(out))
        local checked = 0
        for _, pid in ipairs(pids) do
            for _, tid in ipairs(core.listdir("/proc/" .. pid .. "/task")) do
                for _, c in ipairs(controllers) do
                    local path = cgroup_of(pid, tid, c)
                    assert.matches("/llmbox/run%-" .. caller .. "%-", path or "(none)", 1, false,
                        ("task %s of process %s, %s hierarchy"):format(tid, pid, c))
                    checked = checked + 1
                end
            end
        end
        assert.equal(3 * #controllers, checked)
        for _, c in ipairs(controllers) do
            assert.is_nil((cgroup_of(caller, caller, c) or ""):find("/llmbox/", 1, true), "the caller moved too")
        end

        -- the run's first child shares its memory with the init (pid 1 of the run), so once the
        -- init runs it keeps only CAP_KILL (to end the run); the init keeps nothing
        local function status(pid)
            local t = {}
            for _, l in ipairs(lines("/proc/" .. pid .. "/status")) do
                local k, v = l:match("^(%w+):%s*(.-)%s*$")
                if k then t[k] = v end
            end
            return t
        end
        local first, init
        for pid in helpers.capture("pgrep -P " .. caller .. " || true"):gmatch("%d+") do
            for child in helpers.capture("pgrep -P " .. pid .. " || true"):gmatch("%d+") do
                if status(child).Name == "llmbox-init" then first, init = pid, child end
            end
        end
        assert.is_truthy(first, "no first child with an llmbox-init below it")
        local c1, c2 = status(first), status(init)
        assert.same({ "0000000000000020", "0000000000000020", "0000000000000000", "1" },
            { c1.CapEff, c1.CapPrm, c1.CapInh, c1.NoNewPrivs }, "the first child")
        assert.same({ "0000000000000000", "0000000000000000", "1" }, { c2.CapEff, c2.CapPrm, c2.NoNewPrivs }, "the init")
    end)
end)

-- Pools against real native sandboxes: warm leases behave like fresh cold sessions, leases are
-- isolated from each other, exhaustion modes, fairness, maintenance and pool policies.
local llmbox = require "llmbox"
local pool_mod = require "llmbox.pool"
local helpers = require "spec.helpers"
local ffi = require "ffi"
pcall(ffi.cdef, "int getpid(void);")

local function sleep(s) os.execute("sleep " .. s) end

-- The docker and podman backends: a session is a container (see the specs that differ below);
-- native's and bubblewrap's are llmbox's own jails.
local CONTAINER = assert(require("llmbox.backends").get(require("llmbox.backends").default())).capabilities.images

local function wait_ready(p)
    local deadline = helpers.now() + 10
    while p:stats().starting > 0 and helpers.now() < deadline do sleep(0.02) end
end

-- Runs code in a lease and closes it; returns the result.
local NOCHECKS = "spec/fixtures/policies/default-nochecks.lua"

local function lease_run(p, code, opts)
    local s = assert(llmbox.session({ pool = p }))
    local r = assert(s:run(code, opts))
    s:close()
    return r
end

-- pids of the live descendants of `root` (default: this process) whose command line contains
-- `needle`
local function descendants_matching(needle, root)
    local out = {}
    for _, pid in ipairs(require("llmbox.util").descendants(root or ffi.C.getpid())) do
        local cmd = helpers.read("/proc/" .. pid .. "/cmdline") or ""
        if cmd:find(needle, 1, true) then out[#out + 1] = pid end
    end
    return out
end

-- The describe block's setup and teardown: a pool (opts) and a cold session to compare its
-- leases with, handed to set(pool, cold).
local function pool_and_cold(opts, set)
    local p, cold
    setup(function()
        p = assert(llmbox.pool(opts))
        cold = assert(llmbox.session({ lang = "python" }))
        set(p, cold)
    end)
    teardown(function()
        if p then p:close() end
        if cold then cold:close() end
    end)
end

describe("pool warm leases #conformance #unpriv", function()
    local p, cold
    pool_and_cold({ lang = "python", min = 1, max = 3 }, function(a, b) p, cold = a, b end)

    -- The same program, cold and warm: what the user sees must be the same.
    local programs = {
        { "print", "print('hello')" },
        { "argv and main", "import sys, os\nprint(sys.argv, __name__, __file__, sys.path[0], os.getcwd())",
            { args = { "a", "b c" } } },
        { "stdin", "import sys\nprint(sys.stdin.read().upper())", { stdin = "abc" } },
        { "exit status", "import sys\nprint('x')\nsys.exit(7)" },
        { "exit message", "import sys\nsys.exit('bye')" },
        { "traceback", "def f():\n    raise ValueError('boom')\nf()\n" },
        { "syntax error", "print(\n" },
        { "unclosed file is flushed", "f = open('/sandbox/unclosed.txt', 'w')\nf.write('kept')\n" ..
            "import atexit\natexit.register(lambda: print('atexit ran'))" },
        { "non-daemon thread joined", "import threading, time\n" ..
            "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\nprint('main done')" },
        { "environment", "import os\nprint(sorted(k for k in os.environ))" },
        { "modules", "import sys\nprint('json' in sys.modules, 'runpy' in sys.modules)" },
    }
    for _, case in ipairs(programs) do
        it("matches a cold run: " .. case[1], function()
            wait_ready(p)
            local w = lease_run(p, case[2], case[3])
            local c = assert(cold:run(case[2], case[3]))
            assert.is_true(w.warm, "the lease's first run should use the warm interpreter")
            assert.is_nil(c.warm)
            assert.equal(c.exit_code, w.exit_code)
            assert.equal(c.stdout, w.stdout)
            assert.equal(c.stderr, w.stderr)
        end)
    end

    it("reads a file the unclosed-file program left, in the same lease", function()
        local s = assert(llmbox.session({ pool = p }))
        assert(s:run("f = open('/sandbox/u.txt', 'w')\nf.write('kept')"))
        local r = assert(s:exec({ "cat", "/sandbox/u.txt" }))
        s:close()
        assert.equal("kept", r.stdout)
    end)

    it("a container's warm program has no channel to report on: a forged report ends nothing", function()
        if not CONTAINER then return end -- native's report socket: the spec below
        -- every socket or FIFO the program holds gets the report native's programs send
        local code = [[
import os, stat, time
for fd in os.listdir('/proc/self/fd'):
    try:
        m = os.fstat(int(fd)).st_mode
        if int(fd) > 2 and (stat.S_ISSOCK(m) or stat.S_ISFIFO(m)):
            os.write(int(fd), b"exit 0 0 0 0 0\n")
    except OSError:
        pass
time.sleep(0.3)
print('still here')
raise SystemExit(3)
]]
        wait_ready(p)
        local r = lease_run(p, code)
        assert.is_true(r.warm)
        assert.equal("still here\n", r.stdout)
        assert.equal(3, r.exit_code)
    end)

    it("a program that forges its exit report only ends its own run early", function()
        if CONTAINER then return end -- no report channel in a container: the spec above
        -- find the supervisor's socket, claim to be done, then keep running
        local code = [[
import os, stat, time
for fd in os.listdir('/proc/self/fd'):
    try:
        if stat.S_ISSOCK(os.fstat(int(fd)).st_mode):
            os.write(int(fd), b"exit 0 0 0 0 0\n")
    except OSError:
        pass
os.close(1)
os.close(2)
while True:
    time.sleep(0.01)
]]
        -- a pool of its own with nothing kept ready: the only new warm interpreter is this
        -- lease's (once the shared pool's refill has started its own)
        wait_ready(p)
        local before = {}
        for _, pid in ipairs(descendants_matching("llmbox_warm")) do before[pid] = true end
        local own = assert(llmbox.pool({ lang = "python", min = 0, max = 1 }))
        local s = assert(llmbox.session({ pool = own }))
        assert.equal("ready", s._warm.pending:wait(10000)) -- its interpreter has started
        local mine = {}
        for _, pid in ipairs(descendants_matching("llmbox_warm")) do
            if not before[pid] then mine[#mine + 1] = pid end
        end
        assert.equal(1, #mine)
        local t = helpers.now()
        local r = assert(s:run(code, { timeout = 20 }))
        assert.is_true(r.warm)
        assert.equal(0, r.exit_code)
        assert.is_nil(r.limit)
        assert.is_true(helpers.now() - t < 5, "the run should end at the report, not at the timeout")
        -- the still-running program was killed with its run (the lease is still open)
        local left
        for _ = 1, 50 do
            local st = helpers.read("/proc/" .. mine[1] .. "/stat")
            left = (st and not st:match("^%d+ %b() Z")) and 1 or 0
            if left == 0 then break end
            sleep(0.05)
        end
        -- if it survived, end it here: the pool's close would wait for it forever
        if left ~= 0 then os.execute("kill -9 " .. mine[1]) end
        s:close()
        own:close()
        assert.equal(0, left, "the program that lied about its exit is still running")
    end)

    it("applies the run's timeout to a warm run", function()
        wait_ready(p)
        local r = lease_run(p, "import time\ntime.sleep(30)", { timeout = 0.5 })
        assert.is_true(r.warm)
        assert.is_true(r.timed_out)
        assert.equal("timeout", r.limit)
        assert.is_true(r.duration_ms < 5000)
    end)

    it("collects plots from a warm run", function()
        wait_ready(p)
        local r = lease_run(p, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
        assert.is_true(r.warm)
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(1, #r.plots)
        assert.equal("png", r.plots[1].format)
    end)

    it("runs cold when the run asks for what the warm interpreter was not started with", function()
        wait_ready(p)
        local s = assert(llmbox.session({ pool = p, env = { EXTRA = "1" } }))
        local r = assert(s:run("import os\nprint(os.environ['EXTRA'])"))
        s:close()
        assert.is_nil(r.warm)
        assert.equal("1\n", r.stdout, r.stderr)
        s = assert(llmbox.session({ pool = p }))
        -- (a backend without run_limits has no lower memory for one run: another limit, then)
        r = assert(s:run("print(2)", s.driver.capabilities.run_limits and { memory = 64 * 1024 * 1024 }
            or { open_files = 100 }))
        s:close()
        assert.is_nil(r.warm)
        assert.equal("2\n", r.stdout, r.stderr)
    end)

    it("later runs of a lease are ordinary runs in the same sandbox", function()
        local s = assert(llmbox.session({ pool = p }))
        local a = assert(s:run("open('/sandbox/k', 'w').write('v')"))
        local b = assert(s:run("print(open('/sandbox/k').read())"))
        s:close()
        assert.is_true(a.warm)
        assert.is_nil(b.warm)
        assert.equal("v\n", b.stdout)
        assert.same({ nil, "session is closed" }, { s:run("print(1)") })
    end)
end)

-- Python that prints what a lease can see of the one before it.
local SNOOP = [[
import os, re
def ns(n): return os.readlink('/proc/self/ns/' + n)
print('NS', ' '.join(ns(n) for n in ('user', 'mnt', 'pid', 'net', 'ipc', 'uts')))
def ls(d):
    try: return sorted(os.listdir(d))
    except OSError as e: return ['error: %s' % e]
print('SANDBOX', ls('/sandbox'))
print('TMP', [x for x in ls('/tmp') if x != 'llmbox'], ls('/tmp/llmbox'))
print('SHM', ls('/dev/shm'))
print('PROCS', sorted(p for p in os.listdir('/proc') if p.isdigit()))
def cmd(p):
    try: return open('/proc/%s/cmdline' % p, 'rb').read()
    except OSError: return b''
print('LEFT', len([p for p in os.listdir('/proc') if p.isdigit() and cmd(p) == b'sleep\0' + b'60\0']))
def count(needles):
    c = [0] * len(needles)
    for line in open('/proc/self/maps'):
        m = re.match(r'([0-9a-f]+)-([0-9a-f]+) (\S+)', line)
        if 'r' not in m.group(3) or '[v' in line:
            continue
        try:
            with open('/proc/self/mem', 'rb') as f:
                f.seek(int(m.group(1), 16))
                data = f.read(int(m.group(2), 16) - int(m.group(1), 16))
        except (OSError, OverflowError, ValueError):
            continue
        for i, n in enumerate(needles):
            c[i] += data.count(n)
    return c
a = ('1-terces-' + 'esael')[::-1].encode()
b = ('2-terces-' + 'esael')[::-1].encode()
print('MEM', count([a, b]))
]]

local LEAVE = [[
import os, subprocess
secret = 'lease-secret-1' * 1000
open('/sandbox/secret.txt', 'w').write(secret)
open('/sandbox/.hidden', 'w').write(secret)
os.makedirs('/sandbox/locked/deep')
os.chmod('/sandbox/locked', 0)
open('/tmp/secret.txt', 'w').write(secret)
open('/dev/shm/secret', 'w').write(secret)
subprocess.Popen(['sleep', '60'])
print('NS', ' '.join(os.readlink('/proc/self/ns/' + n) for n in ('user', 'mnt', 'pid', 'net', 'ipc', 'uts')))
]]

local function parse(out)
    local t = {}
    for line in out:gmatch("[^\n]+") do
        local k, v = line:match("^(%u+) (.*)$")
        if k then t[k] = v end
    end
    return t
end

-- Nothing of the first lease's processes: native's run sees pid 1 (llmbox-init) and itself;
-- a container's run also sees the container's init, its keeper and the run's wrapper (root's,
-- out of the program's reach), never a process the lease before it left.
local function assert_no_leftovers(b)
    assert.equal("0", b.LEFT)
    if not CONTAINER then assert.equal("['1', '2']", b.PROCS) end
end

describe("pool preload #conformance #unpriv", function()
    local p, cold
    pool_and_cold({ lang = "python", min = 1, max = 2, preload = { "numpy", "json" } }, function(a, b) p, cold = a, b end)

    it("a lease's code finds the modules imported, and otherwise sees what a cold run sees", function()
        wait_ready(p)
        local probe = "import sys\nprint('numpy' in sys.modules, 'json' in sys.modules)"
        local w = lease_run(p, probe)
        assert.is_true(w.warm)
        assert.equal("True True\n", w.stdout, w.stderr)
        assert.equal("False False\n", assert(cold:run(probe)).stdout)
        for _, case in ipairs({
            { "import numpy as np\nprint(np.arange(5).sum(), np.linspace(0, 1, 3))" },
            { "import sys, os\nprint(sys.argv, __name__, sys.path[0], os.getcwd())", { args = { "x", "y z" } } },
            { "import os\nprint(sorted(os.environ))" },
            { "import numpy\nraise ValueError('boom')" },
        }) do
            wait_ready(p)
            w = lease_run(p, case[1], case[2])
            local c = assert(cold:run(case[1], case[2]))
            assert.is_true(w.warm)
            assert.equal(c.exit_code, w.exit_code)
            assert.equal(c.stdout, w.stdout)
            assert.equal(c.stderr, w.stderr)
        end
    end)

    it("each prestarted interpreter imported them itself: numpy's random state differs", function()
        local seen = {}
        for _ = 1, 3 do
            wait_ready(p)
            local r = lease_run(p, "import numpy as np\nprint(np.random.randint(0, 2**62))")
            assert.is_true(r.warm)
            assert.is_nil(seen[r.stdout], "two leases drew the same number: " .. r.stdout)
            seen[r.stdout] = true
        end
    end)

    it("a preloaded matplotlib is warmed without a trace: no figure open, plots equal a cold run's byte for byte", function()
        local mp = assert(llmbox.pool({ lang = "python", min = 1, max = 1, preload = { "numpy", "matplotlib.pyplot" } }))
        finally(function() mp:close() end)
        local probe = "import sys, os\nimport matplotlib.pyplot as plt\n"
            .. "print(plt.get_fignums(), sorted(os.listdir('.')), sorted(os.listdir('/tmp')))"
        wait_ready(mp)
        local w = lease_run(mp, probe)
        local c = assert(cold:run(probe))
        assert.is_true(w.warm)
        assert.equal(c.stdout, w.stdout, w.stderr)
        assert.equal(0, #w.plots)
        for _, code in ipairs({
            "import numpy as np\nimport matplotlib.pyplot as plt\nx = np.linspace(0, 10, 200)\n"
                .. "plt.plot(x, np.sin(x), label='sin')\nplt.title('t')\nplt.legend()\nplt.savefig('line.png')",
            -- plt.ion() and a later change: captured as drawn at exit, savefig's file as written
            "import matplotlib.pyplot as plt\nplt.ion()\nplt.bar(['a', 'b'], [1, 2])\n"
                .. "plt.savefig('b.png', transparent=True)\nplt.xlabel('later')\n"
                .. "print(open('b.png', 'rb').read()[:4])",
        }) do
            wait_ready(mp)
            w = lease_run(mp, code)
            c = assert(cold:run(code))
            assert.is_true(w.warm)
            assert.equal(0, w.exit_code, w.stderr)
            assert.equal(c.stdout, w.stdout)
            assert.equal(#c.plots, #w.plots)
            assert.is_true(#w.plots >= 1)
            for i = 1, #c.plots do
                assert.equal(c.plots[i].data, w.plots[i].data, "plot " .. i .. " differs from a cold run's")
            end
        end
    end)

    it("an interactive pool's interpreters preload too: the first cell finds the module imported", function()
        local ip = assert(llmbox.pool({ lang = "python", interactive = true, min = 1, max = 1, preload = { "json" } }))
        wait_ready(ip)
        local s = assert(llmbox.session({ pool = ip }))
        local r = assert(s:run("import sys\nprint('json' in sys.modules, sys.argv)"))
        s:close()
        ip:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("True ['']\n", r.stdout)
    end)

    it("refuses a module that does not import, and a pool without warm starts", function()
        local bad, err = llmbox.pool({ lang = "python", min = 1, max = 1, preload = { "numpy", "nmpy_misspelt" } })
        assert.is_nil(bad)
        assert.matches("preload: importing numpy, nmpy_misspelt in a sandbox failed %(exit 1%): "
            .. "ModuleNotFoundError: No module named 'nmpy_misspelt'", err)
        bad, err = llmbox.pool({ lang = "python", min = 1, max = 1, preload = { "json" }, warm = false })
        assert.is_nil(bad)
        assert.matches("preload needs warm = true", err)
        bad, err = llmbox.pool({ lang = "python", min = 1, max = 1, preload = { "nmpy_misspelt" }, interactive = true })
        assert.is_nil(bad)
        assert.matches("No module named 'nmpy_misspelt'", err)
        bad, err = llmbox.pool({ lang = "shell", min = 1, max = 1, preload = { "json" } })
        assert.is_nil(bad)
        assert.matches('recipe "shell" cannot preload', err)
        bad, err = llmbox.pool({ lang = "python", min = 1, max = 1, preload = { "os..path" } })
        assert.is_nil(bad)
        assert.matches("preload%[1%]: not a module name", err)
    end)
end)

describe("pool isolation between leases #conformance #unpriv", function()
    it("two consecutive single-use leases share no files, processes, namespaces or memory", function()
        -- min = 2: both jails exist at once, so their namespace ids cannot be recycled ones
        local p = assert(llmbox.pool({ lang = "python", min = 2, max = 2, policy = NOCHECKS }))
        local first = lease_run(p, LEAVE)
        assert.equal(0, first.exit_code, first.stderr)
        local r = lease_run(p, SNOOP)
        p:close()
        assert.equal(0, r.exit_code, r.stderr)
        local a, b = parse(first.stdout), parse(r.stdout)
        local ns_a, ns_b = {}, {}
        for x in a.NS:gmatch("%S+") do ns_a[#ns_a + 1] = x end
        for x in b.NS:gmatch("%S+") do ns_b[#ns_b + 1] = x end
        -- user, net and uts belong to the jail (pid, mnt and ipc are per run, and a freed
        -- namespace's id may be given again, so only the jail's are compared); a container
        -- shares the engine's user namespace (no user namespace remapping), its net and uts
        -- are its own
        for _, i in ipairs(CONTAINER and { 4, 6 } or { 1, 4, 6 }) do assert.are_not.equal(ns_a[i], ns_b[i]) end
        assert.equal("[]", b.SANDBOX)
        assert.equal("[] ['hooks', 'main.py']", b.TMP)
        assert.equal("[]", b.SHM)
        assert_no_leftovers(b)
        local ma, mb = b.MEM:match("%[(%d+), (%d+)%]")
        assert.equal(mb, ma, "the first lease's secret is in the second lease's memory")
    end)

    it("a reused sandbox (max_uses = 2) is emptied between leases", function()
        local p = assert(llmbox.pool({ lang = "python", min = 1, max = 1, max_uses = 2, policy = NOCHECKS }))
        local first = lease_run(p, LEAVE)
        assert.equal(0, first.exit_code, first.stderr)
        local created = p:stats().created
        local s = assert(llmbox.session({ pool = p }))
        assert.equal(created, p:stats().created, "the second lease should reuse the sandbox")
        local r = assert(s:run(SNOOP))
        s:close()
        p:close()
        local b = parse(r.stdout)
        assert.equal("[]", b.SANDBOX)
        assert.equal("[] ['hooks', 'main.py']", b.TMP)
        assert.equal("[]", b.SHM)
        assert_no_leftovers(b)
        local ma, mb = b.MEM:match("%[(%d+), (%d+)%]")
        assert.equal(mb, ma)
    end)

    it("a closed lease cannot reach the sandbox it had", function()
        local p = assert(llmbox.pool({ lang = "python", min = 1, max = 1, max_uses = 5 }))
        local s = assert(llmbox.session({ pool = p }))
        s:close()
        local next_lease = assert(llmbox.session({ pool = p }))
        assert.same({ nil, "session is closed" }, { s:run("print(1)") })
        local r, err = s:copy_to("/etc/hostname", "/sandbox/x")
        assert.is_nil(r)
        assert.matches("closed", err)
        next_lease:close()
        p:close()
    end)
end)

describe("pool exhaustion and fairness #unpriv", function()
    it("fail_fast refuses at once", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1, exhaustion = "fail_fast" }))
        local a = assert(p:acquire())
        local b, err = p:acquire()
        assert.is_nil(b)
        assert.matches("pool exhausted: all 1 sandboxes are leased", err, 1, true)
        assert.equal(1, p:stats().failures)
        a:close()
        b = assert(p:acquire())
        b:close()
        p:close()
    end)

    it("temporary makes a sandbox outside the pool and destroys it after use", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1, exhaustion = "temporary" }))
        local a = assert(p:acquire())
        local b = assert(p:acquire())
        local st = p:stats()
        assert.equal(1, st.total, "a temporary sandbox is not part of the pool")
        assert.equal(1, st.temporary)
        local r = assert(b:exec("echo temp"))
        assert.equal("temp\n", r.stdout)
        b:close()
        a:close()
        assert.is_true(p:stats().total <= 1)
        p:close()
    end)

    it("wait outside a coroutine says how to wait instead of hanging", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1 }))
        local a = assert(p:acquire())
        local b, err = p:acquire()
        assert.is_nil(b)
        assert.matches("cannot wait: call acquire from a coroutine", err, 1, true)
        a:close()
        p:close()
    end)

    it("wait hands sandboxes to coroutines in arrival order", function()
        -- a scheduler that resumes a waiter as soon as the pool hands it a lease, and keeps
        -- what it yields next
        local yielded = {}
        local function resume(co, ...)
            local ok, v = coroutine.resume(co, ...)
            assert(ok, v)
            yielded[#yielded + 1] = v
        end
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1, resume = resume }))
        local order, cos = {}, {}
        local holder = assert(p:acquire())
        for i = 1, 4 do
            cos[i] = coroutine.create(function()
                local s, err = p:acquire()
                assert(s, err)
                local r = assert(s:exec("echo " .. i))
                order[#order + 1] = r.stdout:gsub("\n", "")
                coroutine.yield("working") -- hold the lease until resumed again
                s:close()
            end)
        end
        for i = 1, 4 do
            local ok, v = coroutine.resume(cos[i])
            assert.is_true(ok, v)
            assert.equal(pool_mod.WAITING, v)
        end
        assert.equal(4, p:stats().waiting)
        holder:close() -- never runs a waiter inside another caller's close()
        assert.same({}, order)
        for i = 1, 4 do
            assert(p:maintain()) -- makes the sandbox the first waiter gets, and hands it over
            assert.same({ unpack({ "1", "2", "3", "4" }, 1, i) }, order)
            assert.equal("working", yielded[i]) -- what it yielded reached its scheduler
            coroutine.resume(cos[i]) -- releases (the sandbox is single-use: destroyed)
        end
        assert.equal(4, p:stats().waits)
        assert.equal(0, p:stats().total) -- single use and min = 0: each went when returned
        assert.equal(5, p:stats().created)
        p:close()
    end)

    it("a waiter gets an error after acquisition_timeout", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1, acquisition_timeout = 0.2 }))
        local a = assert(p:acquire())
        local got
        local co = coroutine.create(function() got = { p:acquire() } end)
        coroutine.resume(co)
        sleep(0.3)
        p:maintain()
        assert.is_nil(got[1])
        assert.matches("no sandbox came free within acquisition_timeout", got[2], 1, true)
        a:close()
        p:close()
    end)

    it("closing the pool wakes its waiters", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1 }))
        local a = assert(p:acquire())
        local got
        local co = coroutine.create(function() got = { p:acquire() } end)
        coroutine.resume(co)
        p:close()
        assert.same({ nil, "pool is closed" }, got)
        a:close()
        assert.equal(0, p:stats().total)
    end)
end)

describe("pool maintenance #unpriv", function()
    it("prewarms min sandboxes and keeps that many ready", function()
        local p = assert(llmbox.pool({ lang = "python", min = 3, max = 5 }))
        wait_ready(p)
        local st = p:stats()
        assert.equal(3, st.idle)
        assert.equal(3, st.created)
        lease_run(p, "print(1)")
        st = p:stats()
        assert.equal(2, st.idle, "giving a lease back refills nothing by itself")
        assert(p:maintain())
        wait_ready(p)
        st = p:stats()
        assert.equal(3, st.idle)
        assert.equal(4, st.created)
        assert.equal(1, st.recycled)
        assert.equal(1, st.hits)
        p:close()
    end)

    it("replaces a ready sandbox whose interpreter died", function()
        local p = assert(llmbox.pool({ lang = "python", min = 2, max = 3, health_check_interval = 0.05 }))
        wait_ready(p)
        local victims = descendants_matching("llmbox_warm.py")
        assert.equal(2, #victims)
        os.execute("kill -9 " .. victims[1])
        sleep(0.2)
        assert(p:maintain())
        wait_ready(p)
        local st = p:stats()
        assert.equal(1, st.unhealthy)
        assert.equal(2, st.idle)
        assert.equal(0, lease_run(p, "print(1)").exit_code)
        p:close()
    end)

    it("recycles sandboxes past max_lifetime", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 1, max = 2, max_lifetime = 0.1 }))
        sleep(0.2)
        assert(p:maintain())
        local st = p:stats()
        assert.equal(1, st.recycled)
        assert.equal(2, st.created)
        assert.equal(1, st.idle)
        p:close()
    end)

    it("drops sandboxes idle longer than idle_timeout above the target", function()
        local p = assert(llmbox.pool({ lang = "shell", min = 1, max = 3, max_uses = 5, idle_timeout = 0.1 }))
        local a, b = assert(p:acquire()), assert(p:acquire())
        a:close()
        b:close()
        assert.equal(2, p:stats().dirty) -- reusable: both came back, to be emptied by maintain()
        assert.equal(0, p:stats().idle)
        assert(p:maintain())
        assert.equal(2, p:stats().idle)
        sleep(0.2)
        assert(p:maintain())
        local st = p:stats()
        assert.equal(1, st.idle, "one above the target (min = 1) should have gone")
        assert.equal(1, st.recycled)
        p:close()
    end)

    it("ready sandboxes die with a caller killed by SIGKILL", function()
        local script = helpers.write(helpers.tmppath(".lua"), [[
local ffi = require "ffi"
ffi.cdef("int getpid(void);")
local p = assert(llmbox.pool({ lang = "python", min = 2, max = 2 }))
while p:stats().starting > 0 do os.execute("sleep 0.05") end
io.stdout:write(ffi.C.getpid(), "\n")
io.stdout:flush()
os.execute("sleep 60")
]])
        local f = io.popen("exec " .. helpers.shell_quote(helpers.bin) .. " script " .. helpers.shell_quote(script))
        local caller = tonumber(f:read("*l"))
        assert.is_number(caller)
        -- the caller's descendants: its two prestarted interpreters
        local kids = descendants_matching("llmbox_warm", caller)
        assert.equal(2, #kids)
        os.execute("kill -9 " .. caller)
        f:close()
        local alive
        for _ = 1, 50 do
            alive = 0
            for _, pid in ipairs(kids) do
                local st = helpers.read("/proc/" .. pid .. "/stat")
                if st and not st:match("^%d+ %b() Z") then alive = alive + 1 end
            end
            if alive == 0 then break end
            sleep(0.1)
        end
        assert.equal(0, alive, "prestarted interpreters outlived their caller")
        os.remove(script)
    end)

    it("leaves nothing behind when closed", function()
        local p = assert(llmbox.pool({ lang = "python", min = 3, max = 3 }))
        wait_ready(p)
        assert.equal(3, #descendants_matching("llmbox_warm.py"))
        p:close()
        sleep(0.1)
        assert.equal(0, #descendants_matching("llmbox_warm.py"))
    end)
end)

describe("pool policies #unpriv", function()
    it("loads the shipped pool policies", function()
        local d = assert(pool_mod.load_policy("default"))
        assert.equal(2, d.min)
        assert.equal(10, d.max)
        assert.equal(300, d.idle_timeout)
        assert.equal("wait", d.exhaustion)
        local demand = assert(pool_mod.load_policy("demand"))
        assert.equal("function", type(demand.hooks.target))
        assert.equal("temporary", demand.exhaustion)
    end)

    it("reports a bad pool policy clearly", function()
        local _, err = pool_mod.load_policy("default", { min = 5, max = 2 })
        assert.matches("min (5) is above max (2)", err, 1, true)
        _, err = pool_mod.load_policy("default", { exhaustion = "block" })
        assert.matches("exhaustion", err, 1, true)
        assert.matches("wait", err, 1, true)
        local path = helpers.write(helpers.tmppath(".lua"), "return { min = 1, maxx = 3 }")
        _, err = pool_mod.load_policy(path)
        assert.matches("maxx", err, 1, true)
        os.remove(path)
        _, err = pool_mod.load_policy("no-such-pool")
        assert.matches('pool policy "no-such-pool" not found', err, 1, true)
        assert.has_error(function() llmbox.pool({ lang = "python", minn = 1 }) end,
            'pool: unknown option "minn" (see llmbox.pool in the README)')
        local p
        p, err = llmbox.pool({ lang = "python", libraries = { "x" } })
        assert.is_nil(p)
        assert.matches("does not allow installs", err, 1, true)
    end)

    it("a policy file cannot reach io or os.execute", function()
        local path = helpers.write(helpers.tmppath(".lua"), "os.execute('true') return { min = 1 }")
        local _, err = pool_mod.load_policy(path)
        assert.matches("raised an error", err, 1, true)
        os.remove(path)
    end)

    it("a target hook decides how many to keep ready", function()
        local path = helpers.write(helpers.tmppath(".lua"),
            "return { min = 1, max = 4, hooks = { target = function(ctx) return ctx.min + 2 end } }")
        local p = assert(llmbox.pool({ lang = "shell", pool_policy = path }))
        assert.equal(3, p:stats().total)
        p:close()
        os.remove(path)
        -- a failing hook falls back to min
        path = helpers.write(helpers.tmppath(".lua"),
            "return { min = 1, max = 4, hooks = { target = function(ctx) error('nope') end } }")
        p = assert(llmbox.pool({ lang = "shell", pool_policy = path }))
        assert.equal(1, p:stats().total)
        p:close()
        os.remove(path)
        -- and so does one that never returns
        path = helpers.write(helpers.tmppath(".lua"),
            "return { min = 1, max = 4, hooks = { target = function(ctx) while true do end end } }")
        p = assert(llmbox.pool({ lang = "shell", pool_policy = path }))
        assert.equal(1, p:stats().total)
        p:close()
        os.remove(path)
    end)
end)

describe("pool warm runs and cgroup limits", function()
    it("reports the memory cgroup's OOM kill of a warm run as limit = memory", function()
        if not select(2, require("llmbox.core").cgroup()) then -- (version, memory, ...)
            pending("no usable memory cgroup on this host: nothing kills, allocation fails instead")
            return
        end
        local p = assert(llmbox.pool({ lang = "python", min = 1, max = 1 }))
        wait_ready(p)
        local r = lease_run(p, "x = bytearray(900 * 1024 * 1024)\nprint('survived')")
        p:close()
        assert.is_true(r.warm)
        assert.equal("memory", r.limit)
        assert.equal(137, r.exit_code)
        assert.equal("", r.stdout)
    end)
end)

describe("pool soak #unpriv", function()
    it("200 leases leave no descriptors, processes or cgroups behind", function()
        local core = require "llmbox.core"
        local function fds() return #core.listdir("/proc/self/fd") end
        local function cgroups()
            local n = 0
            for _, base in ipairs(helpers.cgroup_bases()) do
                for _, name in ipairs(core.listdir(base) or {}) do
                    if name:match("^run%-" .. ffi.C.getpid() .. "%-") then n = n + 1 end
                end
            end
            return n
        end
        local fds_before = fds()
        local p = assert(llmbox.pool({ lang = "python", min = 2, max = 3, max_uses = 2 }))
        local early
        for i = 1, 200 do
            local s = assert(llmbox.session({ pool = p }))
            local r = assert(s:run(("print(%d)"):format(i)))
            assert.equal(i .. "\n", r.stdout)
            s:close()
            if i % 50 == 0 then assert(p:maintain()) end
            if i == 50 then early = fds() end -- compared in the same state: just after maintain()
        end
        -- steady: the pool's own descriptors do not grow with the number of leases
        assert.is_true(fds() <= early + 2, ("descriptors grew from %d to %d"):format(early, fds()))
        local st = p:stats()
        assert.equal(200, st.acquired)
        assert.equal(0, st.failures)
        p:close()
        assert.equal(fds_before, fds())
        assert.equal(0, #descendants_matching(""))
        local left
        for _ = 1, 20 do
            left = cgroups()
            if left == 0 then break end
            sleep(0.05)
        end
        assert.equal(0, left)
    end)
end)

describe("pool work off the caller's path #unpriv", function()
    local count_opens = helpers.count_opens

    it("giving a lease back opens no sandbox; maintain() refills", function()
        local p = assert(llmbox.pool({ lang = "python", min = 2, max = 3 }))
        local s = assert(p:acquire())
        assert.equal(0, count_opens(function() s:close() end))
        assert.equal(1, count_opens(function() assert(p:maintain()) end)) -- the control: it does open
        assert.equal(2, p:stats().total)
        p:close()
    end)

    it("hands a waiter its lease through the resume hook, never running it in close()", function()
        local scheduled = {}
        local p = assert(llmbox.pool({ lang = "shell", min = 0, max = 1, max_uses = 3,
            resume = function(co, ...) scheduled[#scheduled + 1] = { co = co, n = select("#", ...), ... } end }))
        local holder = assert(p:acquire())
        local got
        local co = coroutine.create(function()
            local s = assert(p:acquire())
            got = assert(s:exec("echo waited")).stdout
            coroutine.yield("mine") -- goes to the scheduler that resumed it
            s:close()
        end)
        assert.equal(pool_mod.WAITING, select(2, coroutine.resume(co)))
        holder:close() -- reusable (max_uses = 3): comes back to be emptied, then goes to the waiter
        assert.same({}, scheduled)
        assert(p:maintain())
        assert.equal(1, #scheduled)
        assert.equal(co, scheduled[1].co)
        assert.is_nil(got) -- scheduled, not run: the scheduler resumes it
        local w = scheduled[1]
        local ok, yielded = coroutine.resume(w.co, unpack(w, 1, w.n))
        assert.is_true(ok)
        assert.equal("mine", yielded)
        assert.equal("waited\n", got)
        coroutine.resume(co)
        assert.equal("dead", coroutine.status(co))
        p:close()
    end)

    it("leases hand the sandbox on: a session handed off is closed, its successor works", function()
        local s = assert(llmbox.session({ lang = "shell" }))
        local t = assert(s:handoff())
        assert.is_true(s:closed())
        local r, err = s:exec("true")
        assert.is_nil(r)
        assert.equal("session is closed", err)
        assert.equal("ok\n", assert(t:exec("echo ok")).stdout)
        t:close()
    end)
end)

describe("warm channel #unpriv", function()
    local warm = require "llmbox.warm"

    it("frames a request: version, path, cwd, arguments, then the code", function()
        assert.equal("1\0/c/main.py\0/w\0" .. "2\0a\0b c\0print(1)",
            assert(warm.request("/c/main.py", "/w", { "a", "b c" }, "print(1)")))
        local r, err = warm.request("/c/main.py", "/w", { "a\0b" }, "x")
        assert.is_nil(r)
        assert.equal("args[1]: expected a string without NUL bytes", err)
    end)

    it("the program refuses a request of another version, and runs one of its own", function()
        local s = assert(llmbox.session({ lang = "python" }))
        assert.is_true(assert(s:prestart()))
        local w = s._warm -- this spec looks inside: it speaks the channel itself
        local code = "print('served')"
        local res = assert(w.pending:finish({ request = assert(warm.request("/tmp/llmbox/main.py", "/sandbox", {},
            code, "9")) }))
        assert.is_not.equal(0, res.exit_code)
        assert.matches("unknown warm-start request version b'9'", res.stderr, 1, true)
        s._warm = nil
        assert.is_true(assert(s:prestart()))
        w = s._warm
        res = assert(w.pending:finish({ request = assert(warm.request("/tmp/llmbox/main.py", "/sandbox", {}, code)) }))
        assert.equal(0, res.exit_code)
        assert.equal("served\n", res.stdout)
        s._warm = nil
        s:close()
    end)
end)

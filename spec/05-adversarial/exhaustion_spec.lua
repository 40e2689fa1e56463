-- Adversarial corpus, part 3: exhausting resources. Fork and memory bombs, full disks, output
-- floods, endless loops, daemons that try to outlive the run, SysV IPC left behind, descriptor
-- floods. Each run must end with the right `limit` (or a failing syscall the program reports),
-- the host must be unaffected, and the next run must work.
local helpers = require "spec.helpers"
local A = require "spec.05-adversarial.attacks"
local core = require "llmbox.core"

local probe = core.probe()

describe("exhaustion: processes and memory #conformance #unpriv", function()
    local s
    before_each(function() s = A.session() end)
    after_each(function() s:close() end)

    local function no_host_leftovers(marker)
        assert.same({}, A.host_pids(marker))
    end

    it("a fork bomb ends (processes limit with a pids cgroup), leaves nothing, and the next run works", function()
        local marker = A.token("bomb")
        local t0 = helpers.now()
        local r = assert(s:run([[
import os, sys
while True:
    try:
        os.fork()
    except OSError:
        pass
]], { args = { marker }, processes = 32, timeout = probe.cgroup_pids and 10 or 3 }))
        local took = helpers.now() - t0
        assert.is_not.equal(0, r.exit_code)
        if probe.cgroup_pids then
            no_host_leftovers(marker)
            if helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
            assert.equal("processes", r.limit)
            assert.is_true(took < 5, "took " .. took .. " s")
        else
            -- RLIMIT_NPROC only makes fork fail; this bomb retries forever, the clock ends it
            assert.is_truthy(r.limit == "processes" or r.limit == "timeout", tostring(r.limit))
        end
        no_host_leftovers(marker)
        -- the shell's classic, written without the `:(){ :|:& };:` spelling the code checks know
        local shell = assert(s:exec("b() { b | b & }; b; sleep 3", { processes = 32, timeout = 10 }))
        assert.is_false(shell.timed_out)
        -- control: the host can still fork, and the session's next run works
        assert.is_true(os.execute("true") == 0)
        -- and nothing of the bomb is left (the pattern is written so that it does not match itself)
        r = assert(s:exec("echo ok; cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'b [|] b'"))
        assert.equal("ok\n0\n", r.stdout)
        A.fresh_ok()
        if not probe.cgroup_pids then
            pending("the shell bomb's verdict needs a pids cgroup: without one, RLIMIT_NPROC only makes fork fail ("
                .. probe.cgroup_note .. ")")
        end
        assert.equal("processes", shell.limit)
    end)

    it("a memory bomb ends with the memory limit (or MemoryError without a memory cgroup)", function()
        if not s.driver.capabilities.run_limits then
            local _, err = s:run("print(1)", { memory = 128 * 1024 * 1024 })
            assert.matches("cannot lower memory for one run", err, 1, true)
            pending("the " .. s.driver.name .. " backend has no run_limits (a pod's memory is fixed when it is made): "
                .. "refused, as asserted")
        end
        local r = assert(s:run([[
hog = []
while True:
    hog.append(bytearray(16 * 1024 * 1024))
    hog[-1][::4096] = b'x' * (16 * 1024 * 1024 // 4096)    # touch every page
]], { memory = 128 * 1024 * 1024, timeout = 20 }))
        assert.is_not.equal(0, r.exit_code)
        assert.is_false(r.timed_out)
        if probe.cgroup_memory then
            assert.equal("memory", r.limit)
            assert.is_true(r.max_rss <= 140 * 1024 * 1024, "max_rss " .. tostring(r.max_rss))
        else
            assert.matches("MemoryError", r.stderr)
        end
        -- control: the same allocation below the limit works, and so does the next run
        r = assert(s:run("b = bytearray(32 * 1024 * 1024); b[::4096] = b'x' * (len(b) // 4096); print('ok')",
            { memory = 128 * 1024 * 1024 }))
        assert.equal("ok\n", r.stdout)
        A.fresh_ok()
    end)
end)

describe("exhaustion: the processes verdict does not depend on timing #conformance #unpriv", function()
    it("a shell fork bomb that ends with status 0 is reported as the processes limit, on busy CPUs", function()
        if not probe.cgroup_pids then
            pending("needs a pids cgroup: without one a fork bomb only sees fork fail (RLIMIT_NPROC)")
            return
        end
        -- both CPUs busy on the host: the runs are slow and their bombs may die out before
        -- the supervisor looks, and the program's exit status is 0 (its last command succeeds)
        local hogs = { A.spawn("sh -c 'while :; do :; done'"), A.spawn("sh -c 'while :; do :; done'") }
        local s = A.session()
        finally(function()
            s:close()
            for _, pid in ipairs(hogs) do A.host_kill(pid) end
        end)
        local seen = {}
        for i = 1, 10 do
            local r = assert(s:exec("b() { b | b & }; b; sleep 3", { processes = 32, timeout = 20 }))
            seen[i] = tostring(r.limit)
        end
        if helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
        assert.same({ "processes", "processes", "processes", "processes", "processes",
            "processes", "processes", "processes", "processes", "processes" }, seen)
        -- control: the same shell without a bomb is no limit
        local r = assert(s:exec("true & sleep 0.1", { processes = 32 }))
        assert.is_nil(r.limit)
    end)
end)

describe("exhaustion: disks #conformance #unpriv", function()
    for _, pol in ipairs(A.POLICIES) do
        it("filling the workspace and /tmp gives ENOSPC; the next run can delete and write (" .. pol.name .. ")", function()
            local s = A.session(pol.path)
            finally(function() s:close() end)
            local limits = s.policy.limits
            local fill = [[
import errno, os, sys
d, total, i = sys.argv[1], 0, 0
chunk = b'\0' * (4 * 1024 * 1024)
try:
    while True:                                # files below the file size limit, until full
        with open('%s/fill%d' % (d, i), 'wb') as f:
            for _ in range(8):
                f.write(chunk); total += len(chunk)
        i += 1
except OSError as e:
    print(errno.errorcode[e.errno], total)
]]
            for _, d in ipairs({ { "/sandbox", limits.workspace }, { "/tmp", limits.tmp } }) do
                local r = assert(s:run(fill, { args = { d[1] } }))
                assert.equal(0, r.exit_code, r.stderr)
                local e, total = r.stdout:match("^(%u+) (%d+)\n$")
                assert.equal("ENOSPC", e, d[1] .. ": " .. r.stdout)
                total = tonumber(total)
                assert.is_true(total <= d[2] and total >= d[2] - 16 * 1024 * 1024, d[1] .. ": " .. total)
                -- the next run: whatever is left can be deleted, and writing works again
                r = assert(s:exec(("rm -f %s/fill*; head -c 8000000 /dev/zero > %s/after && wc -c < %s/after")
                    :format(d[1], d[1], d[1])))
                assert.equal(0, r.exit_code, r.stderr)
                assert.equal("8000000\n", r.stdout)
            end
            A.fresh_ok(pol.path)
        end)
    end
end)

describe("exhaustion: output floods #conformance #unpriv", function()
    local s
    before_each(function() s = A.session() end)
    after_each(function() s:close() end)

    local function flooded(r, t0)
        local took = helpers.now() - t0
        local cap = s.policy.limits.output
        assert.equal("output", r.limit)
        assert.is_true(r.truncated)
        assert.is_false(r.timed_out)
        assert.is_true(#r.stdout + #r.stderr <= cap, "kept " .. (#r.stdout + #r.stderr))
        assert.is_true(#r.stdout + #r.stderr >= cap / 2, "kept " .. (#r.stdout + #r.stderr))
        assert.is_true(took < 5, "took " .. took .. " s")
    end

    it("gigabytes on stdout stop at the output limit, quickly", function()
        local t0 = helpers.now()
        local r = assert(s:exec("yes | head -c 5G"))
        flooded(r, t0)
        assert.matches("^y\ny\n", r.stdout)
        assert.equal(137, r.exit_code)
        -- control: output below the limit is kept whole
        r = assert(s:exec("yes | head -c 100000"))
        assert.equal(100000, #r.stdout)
        assert.is_nil(r.limit)
        assert.is_false(r.truncated)
        A.fresh_ok()
    end)

    it("a gibibyte on stderr from Python stops at the output limit, quickly", function()
        local t0 = helpers.now()
        local r = assert(s:run([[
import sys
b = b'e' * (1 << 20)
for _ in range(1024):
    sys.stderr.buffer.write(b)
print('never')
]]))
        flooded(r, t0)
        assert.equal("", r.stdout)
        assert.matches("^eeee", r.stderr)
        -- both streams at once
        t0 = helpers.now()
        r = assert(s:exec("yes out & yes err >&2"))
        flooded(r, t0)
        A.fresh_ok()
    end)
end)

describe("exhaustion: endless programs #conformance #unpriv", function()
    local s
    before_each(function() s = A.session() end)
    after_each(function() s:close() end)

    it("busy loops hit the CPU limit, sleepy ones the wall clock", function()
        local r = assert(s:run("while True: pass", { cpu = 1, timeout = 10 }))
        assert.equal("cpu", r.limit)
        assert.is_false(r.timed_out)
        assert.is_true(r.exit_code > 128)
        r = assert(s:exec("while :; do :; done", { cpu = 1, timeout = 10 }))
        assert.equal("cpu", r.limit)
        -- ignoring SIGXCPU does not help: the hard limit kills (2 s of CPU; the wall clock has
        -- room for a loaded CI host, where the loop may get half a core)
        local t0 = helpers.now()
        r = assert(s:run("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass",
            { cpu = 1, timeout = 8 }))
        assert.equal(137, r.exit_code)
        if helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
        assert.equal("cpu", r.limit) -- the hard limit, one second above the soft one
        assert.equal(137, r.exit_code)
        assert.is_true(helpers.now() - t0 < 8)
        -- no CPU used, so only the wall clock can end it; SIGTERM and SIGHUP are ignored too
        t0 = helpers.now()
        r = assert(s:run("import signal, time\nfor sg in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
            .. "    signal.signal(sg, signal.SIG_IGN)\nwhile True: time.sleep(0.1)", { timeout = 1 }))
        assert.equal("timeout", r.limit)
        assert.is_true(r.timed_out)
        assert.is_true(helpers.now() - t0 < 3)
        -- control: a short loop finishes normally
        r = assert(s:run("n = 0\nfor i in range(100000): n += i\nprint(n)", { cpu = 1, timeout = 10 }))
        assert.equal("4999950000\n", r.stdout)
        assert.is_nil(r.limit)
        A.fresh_ok()
    end)

    it("daemons (double fork + setsid, nohup, setsid -f, Python) do not outlive the run", function()
        local base = tostring(math.random(1000000, 9999999))
        local marker = "sleep " .. base .. "."
        local seen_on_host
        local r = assert(s:exec([[
(setsid sleep $B.1 >/dev/null 2>&1 &) &
nohup sleep $B.2 >/dev/null 2>&1 &
setsid -f sleep $B.3 >/dev/null 2>&1
python3 -c 'import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 3); os.execv("/bin/sleep", ["sleep", os.environ["B"] + ".4"])
    os._exit(0)
os.wait()'
sleep 0.5
n=0
for c in /proc/[0-9]*/cmdline; do
  case "$(tr '\0' ' ' < "$c" 2>/dev/null)" in "sleep $B."?" ") n=$((n + 1));; esac
done
echo "daemons $n"
sleep 1   # the host looks while the run is still alive
]], {
            env = { B = base },
            on_stdout = function(chunk)
                -- control: while the run lives, the host's /proc shows its daemons
                if chunk:find("daemons", 1, true) then seen_on_host = #A.host_pids(marker, true) end
            end,
        }))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("daemons 4\n", r.stdout)
        assert.equal(4, seen_on_host)
        -- the run is over: none of them is left on the host
        assert.same({}, A.host_pids(marker, true))
        -- nor in the session's next run
        r = assert(s:exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; ls /proc | grep -cE '^[0-9]+$'"))
        assert.not_matches(marker, r.stdout, 1, true)
        A.fresh_ok()
    end)
end)

describe("exhaustion: SysV IPC left behind #conformance #unpriv", function()
    local SHM = [[
key = int(os.environ['KEY'])
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
def get(flags):
    ctypes.set_errno(0)
    i = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(4096), ctypes.c_int(flags))
    return i, errno.errorcode.get(ctypes.get_errno(), 'OK') if i < 0 else 'OK'
]]

    it("a shared memory segment does not survive the run (deny-list: allowed within a run)", function()
        local s = A.session()
        finally(function() s:close() end)
        local key = math.random(0x10000000, 0x7ffffff0)
        local hexkey = ("0x%08x"):format(key)
        local r, res = A.py(s, SHM .. [[
import subprocess
i, e = get(0o1000 | 0o600)                               # IPC_CREAT
print('create', e)
addr = libc.shmat(i, None, 0)
ctypes.memmove(addr, os.environ['TOK'].encode(), len(os.environ['TOK']))
# control: another process of the same run finds the segment and reads it
child = subprocess.run([sys.executable, '-c', '''
import ctypes, os
libc = ctypes.CDLL(None); libc.shmat.restype = ctypes.c_void_p
i = libc.shmget(ctypes.c_int(int(os.environ["KEY"])), ctypes.c_size_t(0), 0)
print(ctypes.string_at(libc.shmat(i, None, 0), len(os.environ["TOK"])).decode() if i >= 0 else "absent")
'''], capture_output=True, text=True)
print('ctl-child', child.stdout.strip())
print('ctl-ipcs', os.environ['HEXKEY'] in subprocess.run(['ipcs', '-m'], capture_output=True, text=True).stdout)
]], { env = { KEY = tostring(key), HEXKEY = hexkey, TOK = "shm-token" } })
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("OK", res.create)
        assert.equal("shm-token", res["ctl-child"])
        assert.equal("True", res["ctl-ipcs"])
        -- the next run of the same session: gone
        local r2, res2 = A.py(s, SHM .. [[
import subprocess
print('lookup', get(0)[1])
print('ipcs', os.environ['HEXKEY'] in subprocess.run(['ipcs', '-m'], capture_output=True, text=True).stdout)
]], { env = { KEY = tostring(key), HEXKEY = hexkey } })
        assert.equal(0, r2.exit_code, r2.stderr)
        assert.equal("ENOENT", res2.lookup)
        assert.equal("False", res2.ipcs)
        -- nor on the host
        local p = io.popen("ipcs -m 2>/dev/null")
        local host = p:read("*a")
        p:close()
        assert.matches("Shared Memory", host, 1, true) -- control: ipcs works here
        assert.not_matches(hexkey, host, 1, true)
        A.fresh_ok()
    end)

    it("the allow-list refuses SysV IPC outright", function()
        local s = A.session(A.POLICIES[2].path)
        finally(function() s:close() end)
        local r, res = A.py(s, SHM .. [[
print('create', get(0o1000 | 0o600)[1])
probe('msgget', 68, 0, 0o1000 | 0o600)
probe('semget', 64, 0, 1, 0o1000 | 0o600)
]], { env = { KEY = tostring(math.random(0x10000000, 0x7ffffff0)) } })
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("ENOSYS", res.create)
        assert.equal("ENOSYS", res.msgget)
        assert.equal("ENOSYS", res.semget)
        A.fresh_ok(A.POLICIES[2].path)
    end)
end)

describe("exhaustion: file descriptors #conformance #unpriv", function()
    for _, pol in ipairs(A.POLICIES) do
        it("thousands of open files stop at open_files with EMFILE (" .. pol.name .. ")", function()
            local s = A.session(pol.path)
            finally(function() s:close() end)
            local limit = s.policy.limits.open_files
            local r, res = A.py(s, [[
import resource
fs = []
try:
    for _ in range(20000):
        fs.append(os.open('/dev/null', os.O_RDONLY))
    print('opened all')
except OSError as e:
    print('stopped', errno.errorcode[e.errno], max(fs))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 64, hard * 64)); print('raise OK')
except (ValueError, OSError) as e:
    print('raise refused')
oserr('dup2-high', lambda: os.dup2(0, 100000))
resource.setrlimit(resource.RLIMIT_NOFILE, (16, hard))   # control: lowering is allowed
print('lowered', resource.getrlimit(resource.RLIMIT_NOFILE)[0])
]])
            assert.equal(0, r.exit_code, r.stderr)
            local e, maxfd = res.stopped:match("^(%u+) (%d+)$")
            assert.equal("EMFILE", e)
            assert.equal(limit - 1, tonumber(maxfd)) -- the highest descriptor is open_files - 1
            assert.equal("refused", res.raise)
            assert.equal("EBADF", res["dup2-high"])
            assert.equal("16", res.lowered)
            A.fresh_ok(pol.path)
        end)
    end
end)

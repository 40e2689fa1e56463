-- Adversarial corpus, part 2: reaching the host from inside. Host processes, host sockets (TCP,
-- abstract and file-system unix sockets, container engine sockets), kernel devices and tunables,
-- /sys, the caller's environment and file descriptors. Each attack has a control.
local helpers = require "spec.helpers"
local A = require "spec.05-adversarial.attacks"

local ffi = require "ffi"
pcall(ffi.cdef, [[
int setenv(const char *, const char *, int);
int open(const char *, int, ...);
int close(int);
]])

describe("reach: host processes #conformance #unpriv", function()
    it("cannot signal a host process, guessing every pid; the host can", function()
        -- as root the host process runs as the sandbox's own host uid (65534): only the pid
        -- namespace stands between them
        local marker = ("%d.%03d"):format(math.random(100, 999), math.random(1, 999))
        local pid = A.spawn("sleep " .. marker)
        finally(function() A.host_kill(pid) end)
        assert.is_true(A.alive(pid))
        assert.is_true(pid < 65536)
        local s = A.session()
        local r, res = A.py(s, [[
import signal
host = int(os.environ['HOSTPID'])
oserr('kill-host-pid', lambda: os.kill(host, signal.SIGKILL))
probe('pidfd_open-host-pid', 434, host, 0)
# control: the probe kills what it can reach (a child of its own)
child = os.fork()
if child == 0:
    import time; time.sleep(30); os._exit(0)
os.kill(child, signal.SIGKILL)
print('ctl-kill-child', os.waitpid(child, 0)[1] == signal.SIGKILL)
me = os.getpid()
visible = []
for p in range(1, 65536):
    try:
        os.kill(p, 0); visible.append(p)
    except OSError:
        pass
# native: the run's init and itself; a container: itself (init, the keeper and the run's
# wrapper are root's, out of its reach)
print('visible', visible == [1, me] or visible == [me] and os.environ.get('CONTAINER') == '1')
for p in range(1, 65536):
    if p != me:
        try: os.kill(p, signal.SIGKILL)
        except OSError: pass
try:
    os.kill(-1, signal.SIGKILL)            # everything this process may signal
except OSError as e:
    print('kill-all', errno.errorcode[e.errno])
print('survived', 'yes', flush=True)
]], { env = { HOSTPID = tostring(pid), CONTAINER = s.driver.capabilities.images and "1" or "0" } })
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("ESRCH", res["kill-host-pid"])
        assert.equal("ESRCH", res["pidfd_open-host-pid"])
        assert.equal("True", res["ctl-kill-child"])
        assert.equal("True", res.visible) -- only the run's init and itself
        assert.equal("yes", res.survived)
        local r2 = assert(s:exec("kill -9 $HOSTPID; echo \"status $?\"", { env = { HOSTPID = tostring(pid) } }))
        s:close()
        assert.matches("No such process", r2.stderr)
        assert.equal("status 1\n", r2.stdout)
        assert.is_true(A.alive(pid), "the host process was killed from the sandbox")
        assert.same({ pid }, A.host_pids("sleep " .. marker))
        -- control: the host can signal it
        assert.is_true(A.host_kill(pid))
        A.fresh_ok()
    end)
end)

describe("reach: the run's own init #conformance #unpriv", function()
    it("ignores every signal the program sends it; the run ends normally", function()
        local s = A.session()
        local r, res = A.py(s, [[
import signal, time
for sg in range(1, 65):
    try:
        os.kill(1, sg)
    except OSError as e:
        print('refused', sg, e.errno)
time.sleep(0.2)
# native: the program's parent is the run's init; a container: llmbox's, out of the program's
# reach (root's on an engine; in a pod, where everything is one user, kept off by llmbox's filter)
parent = os.getppid()
def out_of_reach(p):
    try:
        os.kill(p, 0)
        return False
    except PermissionError:
        return True
print('init-alive', os.path.exists('/proc/1') and (parent == 1 or os.environ.get('CONTAINER') == '1'
      and out_of_reach(parent)))
# control: the same signals reach a process the program may kill
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
os.kill(child, signal.SIGTERM)
print('ctl-child', os.waitpid(child, 0)[1] == signal.SIGTERM)
]], { env = { CONTAINER = s.driver.capabilities.images and "1" or "0" } })
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("True", res["init-alive"])
        assert.equal("True", res["ctl-child"])
        assert.is_nil(r.limit)
        assert.equal("next\n", assert(s:exec("echo next")).stdout)
        s:close()
        A.fresh_ok()
    end)

    it("cannot have the kernel signal its supervisors for it (a file's owner, F_SETSIG)", function()
        local s = A.session()
        local r, res = A.py(s, [[
import fcntl, signal, socket, struct, time
parent = os.getppid()
rp, wp = os.pipe()
def arm():
    fcntl.fcntl(rp, fcntl.F_SETSIG, signal.SIGKILL)
    fcntl.fcntl(rp, fcntl.F_SETOWN, parent)
    fcntl.fcntl(rp, fcntl.F_SETFL, fcntl.fcntl(rp, fcntl.F_GETFL) | os.O_ASYNC)
    os.write(wp, b'x')
oserr('setown-parent', arm)
oserr('setown-ex-parent', lambda: fcntl.fcntl(rp, 15, struct.pack('ii', 0, parent)))
oserr('fiosetown-parent', lambda: fcntl.ioctl(socket.socket(), 0x8901, struct.pack('i', parent)))
time.sleep(0.3)
# control: its own process may own its files' signals
oserr('ctl-setown-self', lambda: fcntl.fcntl(rp, fcntl.F_SETOWN, os.getpid()))
print('survived', 'yes', flush=True)
]])
        -- where the supervisor is within reach of the file owner's signals at all (a pod's,
        -- the program's own user), setting it as the owner is refused; elsewhere the kernel
        -- does not deliver them (the run's init; root's wrapper)
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("yes", res.survived)
        assert.equal("OK", res["ctl-setown-self"])
        assert.is_nil(r.limit)
        assert.equal("next\n", assert(s:exec("echo next")).stdout)
        s:close()
    end)
end)

-- A host-side server on TCP 127.0.0.1, an abstract unix socket and file-system unix sockets; it
-- logs every connection it accepts.
local SERVER = [[
import os, select, socket, sys, time
tok, stop, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
socks = {}
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(('127.0.0.1', 0)); t.listen(16)
socks[t] = 'tcp'
a = socket.socket(socket.AF_UNIX); a.bind('\0llmbox-test-' + tok); a.listen(16); socks[a] = 'abstract'
for p in paths:
    u = socket.socket(socket.AF_UNIX); u.bind(p); u.listen(16); socks[u] = 'fs'
print('ready', t.getsockname()[1], flush=True)
deadline = time.time() + 60
while time.time() < deadline and not os.path.exists(stop):
    for s in select.select(list(socks), [], [], 0.05)[0]:
        c, _ = s.accept(); print('accepted', socks[s], flush=True); c.close()
for p in paths: os.unlink(p)
print('stopped', flush=True)
]]

-- Connects to everything; prints "kind target OK|ERRNO" lines.
local CLIENT = [[
import errno, os, socket
def conn(kind, fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr); print(kind, 'OK', flush=True)
    except OSError as e:
        print(kind, errno.errorcode.get(e.errno, e.errno), flush=True)
    s.close()
conn('tcp', socket.AF_INET, ('127.0.0.1', int(os.environ['PORT'])))
conn('abstract', socket.AF_UNIX, '\0llmbox-test-' + os.environ['TOK'])
for i, p in enumerate(os.environ['PATHS'].split()):
    conn('fs%d' % i, socket.AF_UNIX, p)
]]

describe("reach: host sockets #conformance #unpriv", function()
    it("a host TCP listener, abstract socket and socket files are unreachable", function()
        local tok = A.token("sock")
        local stop = "/tmp/llmbox-stop-" .. tok
        local paths = { "/tmp/llmbox-test-" .. tok .. ".sock", "/var/tmp/llmbox-test-" .. tok .. ".sock" }
        if helpers.is_root() then paths[#paths + 1] = "/run/llmbox-test-" .. tok .. ".sock" end
        local srv = io.popen(A.HOST_PY .. " -c " .. A.q(SERVER) .. " " .. tok .. " " .. stop .. " " .. table.concat(paths, " "))
        local port = tonumber((srv:read("*l") or ""):match("^ready (%d+)$"))
        finally(function()
            helpers.write(stop, "")
            srv:close()
            os.remove(stop)
        end)
        assert.is_number(port)
        local env = { PORT = tostring(port), TOK = tok, PATHS = table.concat(paths, " ") }
        -- control: the host reaches all of them
        local envs = ("PORT=%d TOK=%s PATHS=%s "):format(port, tok, A.q(env.PATHS))
        local p = io.popen(envs .. A.HOST_PY .. " -c " .. A.q(CLIENT))
        local host = A.results(p:read("*a"))
        p:close()
        assert.equal("OK", host.tcp)
        assert.equal("OK", host.abstract)
        for i = 0, #paths - 1 do assert.equal("OK", host["fs" .. i]) end
        -- the sandbox reaches none of them, under both filters
        for _, pol in ipairs(A.POLICIES) do
            local s = A.session(pol.path)
            local r = assert(s:run(CLIENT .. [[
print('unix-table-clean', os.environ['TOK'] not in open('/proc/net/unix').read())
# control: the same address and name are free in the sandbox's own network namespace
srv = socket.socket(); srv.bind(('127.0.0.1', int(os.environ['PORT']))); srv.listen(1)
ab = socket.socket(socket.AF_UNIX); ab.bind('\0llmbox-test-' + os.environ['TOK']); ab.listen(1)
conn('ctl-tcp', socket.AF_INET, ('127.0.0.1', int(os.environ['PORT'])))
conn('ctl-abstract', socket.AF_UNIX, '\0llmbox-test-' + os.environ['TOK'])
]], { env = env }))
            s:close()
            local res = A.results(r.stdout)
            assert.equal(0, r.exit_code, r.stderr)
            assert.equal("ECONNREFUSED", res.tcp, pol.name)
            assert.equal("ECONNREFUSED", res.abstract, pol.name)
            for i = 0, #paths - 1 do assert.equal("ENOENT", res["fs" .. i], pol.name) end
            assert.equal("True", res["unix-table-clean"])
            assert.equal("OK", res["ctl-tcp"])
            assert.equal("OK", res["ctl-abstract"])
        end
        helpers.write(stop, "")
        local log = srv:read("*a")
        -- exactly the host's own connections were accepted
        local n = select(2, log:gsub("accepted", ""))
        assert.equal(2 + #paths, n, log)
        assert.matches("stopped\n$", log)
        A.fresh_ok()
    end)

    it("container engine sockets are absent", function()
        local s = A.session()
        local r, res = A.py(s, [[
import socket
for name, p in [('var-run-docker', '/var/run/docker.sock'), ('run-docker', '/run/docker.sock'),
                ('containerd', '/run/containerd/containerd.sock'), ('podman', '/run/podman/podman.sock'),
                ('user-podman', '/run/user/1000/podman/podman.sock')]:
    c = socket.socket(socket.AF_UNIX)
    oserr(name, lambda: c.connect(p))
dirs = [d for d in ('/run', '/var', '/var/run') if os.path.exists(d)]
print('dirs', dirs)
import stat
socks = [os.path.join(r, f) for d in dirs for r, _, fs in os.walk(d) for f in fs
         if stat.S_ISSOCK(os.lstat(os.path.join(r, f)).st_mode)]
print('socks', socks)
# control: a socket file in the workspace is reachable the same way
srv = socket.socket(socket.AF_UNIX); srv.bind('/sandbox/ctl.sock'); srv.listen(1)
oserr('ctl-sock', lambda: socket.socket(socket.AF_UNIX).connect('/sandbox/ctl.sock'))
]])
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "var-run-docker", "run-docker", "containerd", "podman", "user-podman" }) do
            assert.equal("ENOENT", res[k], k)
        end
        -- native has none of these directories; an engine may make /run and /var (Podman
        -- does, for its own files), never with a socket in them
        if not s.driver.capabilities.images then assert.equal("[]", res.dirs) end
        assert.equal("[]", res.socks)
        assert.equal("OK", res["ctl-sock"])
        A.fresh_ok()
    end)
end)

local function host_exists(p)
    local ok = os.execute("test -e " .. A.q(p))
    return ok == 0 or ok == true
end

for _, pol in ipairs(A.POLICIES) do
describe("reach: devices, kernel tunables and /sys under the " .. pol.name .. " #conformance #unpriv", function()
    local s
    before_each(function() s = A.session(pol.path) end)
    after_each(function() s:close() end)

    it("kernel memory, ports, the kernel log and disks are not there", function()
        local r, res = A.py(s, [[
import stat
for d in ['mem', 'kmem', 'port', 'kmsg', 'console', 'tty0', 'vda', 'sda', 'nvme0n1', 'loop0', 'fuse', 'net/tun', 'cpu/0/msr']:
    oserr('open-' + d, lambda: os.open('/dev/' + d, os.O_RDONLY))
oserr('mknod-mem', lambda: os.mknod('/sandbox/mem', stat.S_IFCHR | 0o600, os.makedev(1, 1)))
oserr('mknod-disk', lambda: os.mknod('/tmp/vda', stat.S_IFBLK | 0o600, os.makedev(254, 0)))
oserr('kcore', lambda: open('/proc/kcore', 'rb').read(16))
# control: a device that is provided opens and reads
oserr('ctl-urandom', lambda: len(open('/dev/urandom', 'rb').read(8)) == 8 or 1/0)
oserr('ctl-fifo', lambda: os.mkfifo('/sandbox/fifo'))
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, d in ipairs({ "mem", "kmem", "port", "kmsg", "console", "tty0", "vda", "sda", "nvme0n1", "loop0",
            "fuse", "net/tun", "cpu/0/msr" }) do
            assert.equal("ENOENT", res["open-" .. d], d)
        end
        assert.equal("EPERM", res["mknod-mem"])
        assert.equal("EPERM", res["mknod-disk"])
        -- where the kernel has no /proc/kcore (this one), its absence is all there is to see
        local kcore = host_exists("/proc/kcore") and { EACCES = true, EPERM = true } or { ENOENT = true }
        assert.is_truthy(kcore[res.kcore], res.kcore)
        assert.equal("OK", res["ctl-urandom"])
        assert.equal("OK", res["ctl-fifo"])
        A.fresh_ok(pol.path)
    end)

    it("/proc/sys, /proc/sysrq-trigger and oom_score_adj refuse writes; the host's values stay", function()
        local host_before = {}
        local files = { "kernel/core_pattern", "kernel/hostname", "kernel/domainname", "kernel/modprobe",
            "kernel/panic", "kernel/sysrq", "kernel/randomize_va_space", "kernel/pid_max", "vm/overcommit_memory",
            "net/ipv4/ip_forward", "fs/suid_dumpable" }
        for _, f in ipairs(files) do host_before[f] = helpers.read("/proc/sys/" .. f) end
        local r, res = A.py(s, [[
def rewrite(p):                              # writes back the value it reads: harmless had it worked
    v = open(p).read()
    with open(p, 'w') as f:
        f.write(v)
for f in os.environ['FILES'].split():
    oserr('write-' + f, lambda: rewrite('/proc/sys/' + f))
def write(p, v):                             # closes the file, so a refused write raises
    with open(p, 'w') as f:
        f.write(v)
oserr('sysrq-trigger', lambda: write('/proc/sysrq-trigger', 'h'))
oserr('oom-lower', lambda: write('/proc/self/oom_score_adj', '-1000'))
# controls: /proc/sys is readable, and raising one's own oom score is allowed
print('ctl-ostype', open('/proc/sys/kernel/ostype').read().strip())
oserr('ctl-oom-raise', lambda: write('/proc/self/oom_score_adj', '500'))
print('oom', open('/proc/self/oom_score_adj').read().strip())
]], { env = { FILES = table.concat(files, " ") } })
        assert.equal(0, r.exit_code, r.stderr)
        for _, f in ipairs(files) do
            local e = res["write-" .. f]
            assert.is_truthy(e == "EACCES" or e == "EPERM" or e == "EROFS" or e == "ENOENT", f .. ": " .. tostring(e))
        end
        local sysrq = host_exists("/proc/sysrq-trigger") and { EACCES = true, EROFS = true } or { ENOENT = true }
        assert.is_truthy(sysrq[res["sysrq-trigger"]], res["sysrq-trigger"])
        assert.is_truthy(res["oom-lower"] == "EACCES" or res["oom-lower"] == "EPERM", res["oom-lower"])
        assert.equal("Linux", res["ctl-ostype"])
        assert.equal("OK", res["ctl-oom-raise"])
        assert.equal("500", res.oom)
        for _, f in ipairs(files) do assert.equal(host_before[f], helpers.read("/proc/sys/" .. f), f) end
        A.fresh_ok(pol.path)
    end)

    it("/sys is not mounted and cannot be created", function()
        local r, res = A.py(s, [[
print('sys-exists', os.path.exists('/sys'))
for p in ['/sys/kernel/uevent_helper', '/sys/fs/cgroup/release_agent', '/sys/fs/cgroup/memory/cgroup.procs',
          '/sys/class/net/lo/mtu', '/sys/power/state']:
    oserr('write-' + p.replace('/', '_'), lambda: open(p, 'w').write('x'))
oserr('mkdir-sys', lambda: os.mkdir('/sys'))
mounts = open('/proc/self/mountinfo').read()
print('sysfs-mounted', ' - sysfs ' in mounts or ' - cgroup' in mounts)
print('ctl-proc-mounted', ' - proc ' in mounts)
]])
        assert.equal(0, r.exit_code, r.stderr)
        -- a container always has the engine's read-only /sys: llmbox hides all of it but the
        -- container's own cgroups (which its keeper reads), and nothing there can be written
        local container = s.driver.capabilities.images
        assert.equal(container and "True" or "False", res["sys-exists"])
        local n = 0
        for k, v in pairs(res) do
            if k:match("^write%-") then
                n = n + 1
                if container then
                    assert.is_truthy(v == "ENOENT" or v == "EROFS" or v == "EACCES", k .. ": " .. v)
                else
                    assert.equal("ENOENT", v, k)
                end
            end
        end
        assert.equal(5, n)
        assert.equal(container and "EEXIST" or "EROFS", res["mkdir-sys"])
        assert.equal(container and "True" or "False", res["sysfs-mounted"])
        assert.equal("True", res["ctl-proc-mounted"])
        A.fresh_ok(pol.path)
    end)
end)
end

describe("reach: what the caller holds #conformance #unpriv", function()
    it("does not see the caller's environment (library and CLI)", function()
        local token = A.token("env")
        ffi.C.setenv("LLMBOX_ADV_HOST_TOKEN", token, 1)
        finally(function() ffi.C.setenv("LLMBOX_ADV_HOST_TOKEN", "", 1) end)
        assert.equal(token, os.getenv("LLMBOX_ADV_HOST_TOKEN")) -- control: the host has it
        local s = A.session()
        local r = assert(s:exec("env; cat /proc/self/environ; echo; echo CTL=$CTL"))
        s:close()
        assert.not_matches(token, r.stdout, 1, true)
        assert.not_matches("LLMBOX_ADV_HOST_TOKEN", r.stdout, 1, true)
        assert.matches("PATH=", r.stdout, 1, true) -- control: the probe lists the environment
        -- the CLI, with the variable exported into its own environment
        local st, out = helpers.cli({ "exec", "-p", A.DEFAULT, "--", "sh", "-c", "env; echo marker" },
            { env = "LLMBOX_ADV_CLI_TOKEN=" .. token })
        assert.equal(0, st)
        assert.matches("marker\n", out, 1, true)
        assert.not_matches(token, out, 1, true)
        A.fresh_ok()
    end)

    it("inherits none of the caller's file descriptors", function()
        local secret = helpers.write(helpers.tmpname(), "fd-secret")
        local opened = {}
        for i = 1, 4 do opened[i] = assert(io.open(secret, "rb")) end -- no O_CLOEXEC in LuaJIT
        local dirfd = ffi.C.open("/", 0x10000) -- O_RDONLY | O_DIRECTORY, no O_CLOEXEC: a way out if inherited
        finally(function()
            for _, f in ipairs(opened) do f:close() end
            ffi.C.close(dirfd)
            os.remove(secret)
        end)
        -- control: the caller really holds them, inheritable
        assert.is_true(dirfd > 2)
        local fdinfo = assert(helpers.read("/proc/self/fdinfo/" .. dirfd))
        local flags = tonumber(fdinfo:match("flags:%s*(%d+)"), 8)
        assert.equal(0, require("bit").band(flags, tonumber("2000000", 8))) -- O_CLOEXEC not set
        local s = A.session()
        local r, res = A.py(s, [[
print('fds', sorted(os.listdir('/proc/self/fd'), key=int))
leaked = []
for fd in range(3, 4096):
    try:
        os.fstat(fd); leaked.append(fd)
    except OSError:
        pass
print('leaked', leaked)
oserr('fchdir-3', lambda: os.fchdir(3))
]])
        local r2 = assert(s:exec("ls /proc/self/fd | tr '\\n' ' '"))
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("['0', '1', '2', '3']", res.fds) -- 3 is listdir's own
        assert.equal("[]", res.leaked)
        assert.equal("EBADF", res["fchdir-3"])
        assert.equal("0 1 2 3 ", r2.stdout)
        A.fresh_ok()
    end)
end)

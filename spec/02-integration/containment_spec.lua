-- Containment basics: what the sandboxed program can see and do. Each attack has a control case
-- showing the probe itself works.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"

describe("containment #unpriv", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python", policy = "default" })) end)
    after_each(function() s:close() end)

    local function py(code) return assert(s:run(code)) end

    it("does not show host files outside the runtime paths", function()
        local secret = helpers.write(helpers.tmpname(), "HOST-SECRET-1234")
        local r = py(([[
import os
print(os.path.exists(%q), os.path.exists('/root'), os.path.exists('/home'), os.path.exists('/etc/shadow'))
print(sorted(os.listdir('/')))
print(sorted(os.listdir('/etc')))
]]):format(secret))
        os.remove(secret)
        local lines = {}
        for l in r.stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end
        assert.equal("False False False False", lines[1])
        assert.not_matches("home", lines[2])
        assert.not_matches("shadow", lines[3])
        -- control: the runtime path is there
        assert.equal("True\n", py("import os; print(os.path.exists('/usr/bin/python3'))").stdout)
    end)

    it("cannot write outside the workspace and /tmp", function()
        local r = py([[
import os
for p in ['/usr/evil', '/etc/evil', '/evil', '/proc/evil', '/dev/evil']:
    try:
        open(p, 'w'); print('WROTE', p)
    except OSError as e:
        print('denied', p, e.errno)
open('/sandbox/ok', 'w').write('1'); open('/tmp/ok', 'w').write('1'); print('control ok')
]])
        assert.not_matches("WROTE", r.stdout)
        assert.matches("control ok", r.stdout)
    end)

    it("has no network but loopback", function()
        local r = py([[
import socket, os
print(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2); print('CONNECTED')
except OSError as e:
    print('no route', e.errno)
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname()); print('loopback ok')
]])
        assert.not_matches("CONNECTED", r.stdout)
        assert.matches("no route", r.stdout)
        assert.matches("loopback ok", r.stdout)
    end)

    it("cannot reach a listener on the host's loopback", function()
        -- the host side: a listener on 127.0.0.1 in the test process's namespace
        local port = 40000 + math.random(1000, 9999)
        local server = "import socket,time;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
            .. "s.bind((\"127.0.0.1\"," .. port .. "));s.listen(5);print(\"up\",flush=True);time.sleep(8)"
        local srv = io.popen("exec python3 -c '" .. server .. "'", "r")
        assert.equal("up", srv:read("*l"))
        local r = py(([[
import socket
try:
    socket.create_connection(('127.0.0.1', %d), timeout=2); print('CONNECTED')
except OSError as e:
    print('refused', e.errno)
]]):format(port))
        srv:close()
        assert.equal("refused 111\n", r.stdout)
    end)

    it("does not see the host environment", function()
        local ffi = require "ffi"
        pcall(ffi.cdef, "int setenv(const char *, const char *, int);")
        ffi.C.setenv("LLMBOX_SPEC_SECRET", "hunter2", 1)
        assert.equal("hunter2", os.getenv("LLMBOX_SPEC_SECRET")) -- control: the host has it
        local r = py("import os; print(sorted(os.environ), list(os.environ.values()))")
        assert.not_matches("hunter2", r.stdout)
        assert.not_matches("LLMBOX_SPEC_SECRET", r.stdout)
        assert.not_matches("'USER'", r.stdout)
        assert.matches("'PATH'", r.stdout)
        assert.matches("'HOME'", r.stdout)
    end)

    it("runs as an unprivileged uid with no capabilities and no_new_privs", function()
        local r = py([[
import os
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
print(os.getuid(), os.getgid(), os.getgroups())
for k in ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp']:
    print(k, st[k].strip())
print(open('/proc/self/uid_map').read().split())
]])
        local expect_host = helpers.is_root() and "65534" or helpers.uid()
        assert.matches("^1000 1000 %[%]\n", r.stdout) -- no supplementary group of the caller
        for _, k in ipairs({ "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" }) do
            assert.matches(k .. " 0000000000000000", r.stdout, 1, true)
        end
        assert.matches("NoNewPrivs 1", r.stdout, 1, true)
        assert.matches("Seccomp 2", r.stdout, 1, true)
        assert.matches("['1000', '" .. expect_host .. "', '1']", r.stdout, 1, true)
    end)

    it("leaks no file descriptor of the caller", function()
        local f = assert(io.open(helpers.tmpname(), "w")) -- LuaJIT opens without O_CLOEXEC
        local r = py("import os; print(sorted(os.listdir('/proc/self/fd')))")
        f:close()
        assert.equal("['0', '1', '2', '3']\n", r.stdout) -- 3 is listdir's own
    end)

    it("sees only its own processes", function()
        local r = py("import os; print(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
        assert.equal("2 [1, 2]\n", r.stdout)
    end)
end)

-- The kernel-side rules, attacked with ctypes under both kinds of filter: the default policy's
-- deny-list and the strict policy's allow-list (fixtures with code checks off, so the attacks
-- reach the kernel). A refused call fails with EPERM (1), or with ENOSYS (38) where an allow-list
-- does not know it; explicit refusals (namespace clone flags, TIOCSTI) are EPERM in both.
for _, case in ipairs({ { "default-nochecks", "1" }, { "strict-nochecks", "38" } }) do
local policy, refused = case[1], case[2]
describe("seccomp under " .. policy .. " #unpriv", function()
    local s
    before_each(function()
        s = assert(llmbox.session({ lang = "python", policy = "spec/fixtures/policies/" .. policy .. ".lua" }))
    end)
    after_each(function() s:close() end)
    local function py(code) return assert(s:run(code)) end

    it("refuses dangerous syscalls", function()
        local r = py([[
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def try_(name, *args):
    nr = {'mount':165,'unshare':272,'ptrace':101,'bpf':321,'keyctl':250,'perf_event_open':298,
          'userfaultfd':323,'io_uring_setup':425,'reboot':169,'setns':308,'kexec_load':246,
          'init_module':175,'add_key':248,'process_vm_readv':310}[name]
    res = libc.syscall(nr, *args)
    print(name, res, ctypes.get_errno())
for n in ['mount','unshare','ptrace','bpf','keyctl','perf_event_open','userfaultfd','io_uring_setup',
          'reboot','setns','kexec_load','init_module','add_key','process_vm_readv']:
    try_(n, 0, 0, 0, 0, 0)
print('getpid', libc.syscall(39) == os.getpid())
]])
        for _, name in ipairs({ "mount", "unshare", "ptrace", "bpf", "keyctl", "perf_event_open", "userfaultfd",
            "io_uring_setup", "reboot", "setns", "kexec_load", "init_module", "add_key", "process_vm_readv" }) do
            assert.matches("\n?" .. name .. " %-1 " .. refused .. "\n", r.stdout)
        end
        assert.matches("getpid True", r.stdout) -- control
    end)

    it("refuses namespace-creating clone flags and TIOCSTI, also with high bits", function()
        local r = py([[
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
print('clone', libc.syscall(56, CLONE_NEWUSER | 17, 0, 0, 0, 0), ctypes.get_errno())
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_ulong, ctypes.c_char_p]
print('tiocsti', libc.syscall(16, 0, 0x5412, b'x'), ctypes.get_errno())
print('tiocsti-high', libc.syscall(16, 0, 0xdead00005412, b'x'), ctypes.get_errno())
print('fionread', libc.syscall(16, 0, 0x541B, ctypes.create_string_buffer(8).raw), ctypes.get_errno())
]])
        assert.matches("clone %-1 1\n", r.stdout)
        assert.matches("tiocsti %-1 1\n", r.stdout)
        assert.matches("tiocsti%-high %-1 1\n", r.stdout)
        -- control: an ordinary ioctl reaches the kernel (ENOTTY on /dev/null stdin, not EPERM)
        assert.matches("fionread %-1 25\n", r.stdout)
    end)

    it("kills the x32 and i386 ABIs", function()
        local r = py([[
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(39 | 0x40000000)
print('survived')
]])
        assert.equal(128 + 31, r.exit_code) -- SIGSYS
        assert.equal("", r.stdout)
        -- i386 write(1, "PWNED\n", 6) through int 0x80: killed by the filter (SIGSYS), or by the
        -- kernel where IA32 emulation is compiled out (SIGSEGV); either way nothing is written.
        local c = helpers.write(helpers.tmpname(), [[
static const char msg[] = "PWNED\n";
int main(void) {
    long r;
    __asm__ volatile ("int $0x80" : "=a"(r) : "a"(4), "b"(1), "c"(msg), "d"(6) : "memory");
    return 0;
}
]])
        local bin = c .. ".bin"
        assert.is_truthy(os.execute("cc -x c -o " .. bin .. " " .. c) == 0)
        assert(s:copy_to(bin, "/sandbox/int80"))
        local r2 = assert(s:exec("chmod +x /sandbox/int80 && /sandbox/int80; echo status $?"))
        assert.not_matches("PWNED", r2.stdout)
        assert.is_truthy(r2.stdout:match("status 159") or r2.stdout:match("status 139"), r2.stdout)
        os.remove(c); os.remove(bin)
    end)
end)
end

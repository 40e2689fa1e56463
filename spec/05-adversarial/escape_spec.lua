-- Adversarial corpus, part 1: getting out of the jail. Host files, the runtime paths, /proc
-- tricks, mounts and namespaces, kernel interfaces, other syscall ABIs and terminals. Every
-- attack has a control showing the probe itself would have noticed success, and every case ends
-- by checking that a fresh sandbox still works.
local helpers = require "spec.helpers"
local A = require "spec.05-adversarial.attacks"

local ffi = require "ffi"
pcall(ffi.cdef, "int setenv(const char *, const char *, int);")

-- Host directories a secret may be planted in: those we can write (all of them as root; /tmp,
-- /var/tmp and $HOME as nobody).
local PLANT_DIRS = { "/root", "/etc", "/var/tmp", "/home", "/tmp", "/opt", "/srv", "/run", "/var/lib",
    "/mnt", os.getenv("HOME") }

local function host_stat(path)
    local p = io.popen("stat -c '%s %Y %a %i' " .. A.q(path) .. " 2>/dev/null")
    local s = p:read("*l")
    p:close()
    return s
end

describe("escape: host files #conformance #unpriv", function()
    local s
    before_each(function() s = A.session() end)
    after_each(function() s:close() end)

    it("finds no planted host secret anywhere in the sandbox's file system", function()
        local token = A.token("llmbox-secret")
        local planted, seen = {}, {}
        finally(function() for _, p in ipairs(planted) do os.remove(p) end end)
        for _, d in ipairs(PLANT_DIRS) do
            local p = d .. "/" .. token .. ".txt"
            local f = not seen[d] and io.open(p, "wb")
            seen[d] = true
            if f then
                f:write("secret ", token, "\n")
                f:close()
                planted[#planted + 1] = p
            end
        end
        assert.is_true(#planted >= 2, "could not plant secrets on the host")
        if helpers.is_root() then assert.is_true(#planted >= 5) end
        -- control: the same searches find the token in a file copied into the workspace
        local ctl = helpers.write(helpers.tmpname(), "control " .. token .. "\n")
        assert(s:copy_to(ctl, "/sandbox/" .. token .. ".ctl"))
        os.remove(ctl)
        -- The token reaches the program through the environment, so no file inside holds it.
        -- grep every file outside /proc (where grep's own argv holds it) and /usr (the host's
        -- runtime, exposed on purpose, 8 GB here, nothing planted); find names everywhere.
        local r = assert(s:exec([[
cd /
grep -rlF -e "$T" $(find / -mindepth 1 -maxdepth 1 ! -type l ! -name proc ! -name usr) 2>/dev/null | sed 's/^/content /'
find / -path /proc -prune -o -name "*$T*" -print 2>/dev/null | sed 's/^/name /'
for p in $PLANTED; do
  for v in "$p" "/proc/1/root/../..$p" "/proc/self/root/../..$p" "/sandbox/../..$p"; do
    cat "$v" >/dev/null 2>&1 && echo "READ $v"
  done
done
echo done
]], { env = { T = token, PLANTED = table.concat(planted, " ") } }))
        local ctl_path = "/sandbox/" .. token .. ".ctl"
        assert.equal("content " .. ctl_path .. "\nname " .. ctl_path .. "\ndone\n", r.stdout)
        A.fresh_ok()
    end)

    it("cannot write the runtime paths, and the host's copies are unchanged", function()
        local watched = { "/usr/bin/python3", "/etc/ld.so.cache", "/usr/bin/env", "/etc/localtime" }
        local before = {}
        for i, p in ipairs(watched) do before[i] = host_stat(p) end
        local r, res = A.py(s, [[
targets = {
    'create-usr': lambda: open('/usr/llmbox-evil', 'w'),
    'create-usr-local-bin': lambda: open('/usr/local/bin/llmbox-evil', 'w'),
    'create-bin-via-link': lambda: open('/bin/llmbox-evil', 'w'),
    'create-lib-via-link': lambda: open('/lib/llmbox-evil.so', 'w'),
    'overwrite-python': lambda: open('/usr/bin/python3', 'r+b'),
    'overwrite-ld-cache': lambda: open('/etc/ld.so.cache', 'r+b'),
    'truncate-ld-cache': lambda: os.truncate('/etc/ld.so.cache', 0),
    'chmod-python': lambda: os.chmod('/usr/bin/python3', 0o755),
    'utime-python': lambda: os.utime('/usr/bin/python3', (0, 0)),
    'rename-env': lambda: os.rename('/usr/bin/env', '/usr/bin/env.bak'),
    'unlink-localtime': lambda: os.unlink('/etc/localtime'),
    'replace-bin-link': lambda: os.unlink('/bin'),
    'append-passwd': lambda: open('/etc/passwd', 'a'),
    'mkdir-root': lambda: os.mkdir('/llmbox-evil'),
    'symlink-usr': lambda: os.symlink('/sandbox/x', '/usr/bin/llmbox-evil'),
}
for name, fn in targets.items():
    oserr(name, fn)
# control: the same operations in the workspace succeed
open('/sandbox/f', 'w').write('x')
for name, fn in {'ctl-create': lambda: open('/sandbox/g', 'w'), 'ctl-chmod': lambda: os.chmod('/sandbox/f', 0o755),
                 'ctl-rename': lambda: os.rename('/sandbox/f', '/sandbox/h'), 'ctl-mkdir': lambda: os.mkdir('/sandbox/d'),
                 'ctl-symlink': lambda: os.symlink('/sandbox/h', '/sandbox/l')}.items():
    oserr(name, fn)
]])
        assert.equal(0, r.exit_code, r.stderr)
        local n = 0
        for name, e in pairs(res) do
            if name:match("^ctl%-") then
                assert.equal("OK", e, name)
            elseif name ~= "control-wrapper" then
                n = n + 1
                -- an image may lack a file the host has (/etc/ld.so.cache, /etc/localtime):
                -- changing it fails as absent; creating anything fails as read-only everywhere
                local absent = e == "ENOENT" and s.driver.capabilities.images
                    and not name:match("^create") and name ~= "mkdir-root"
                assert.is_truthy(absent or e == "EROFS" or e == "EACCES" or e == "EPERM" or e == "EBUSY",
                    name .. ": " .. e)
            end
        end
        assert.equal(15, n)
        -- the host's files are untouched, and nothing new appeared in its /usr
        for i, p in ipairs(watched) do assert.equal(before[i], host_stat(p), p) end
        for _, p in ipairs({ "/usr/llmbox-evil", "/usr/bin/llmbox-evil", "/usr/lib/llmbox-evil.so",
            "/usr/bin/env.bak" }) do
            assert.is_nil(host_stat(p), p)
        end
        A.fresh_ok()
    end)
    it("copies in and out do not follow what the program planted (links, FIFOs)", function()
        local r = assert(s:exec("mkfifo /sandbox/fifo && ln -s / /sandbox/up && ln -s /proc/1/root /sandbox/p1 "
            .. "&& mkdir /sandbox/d && ln -s /etc /sandbox/d/etc && echo ok > /sandbox/plain"))
        assert.equal(0, r.exit_code, r.stderr)
        local token = A.token("copy")
        local src = helpers.write(helpers.tmpname(), token)
        local dst = helpers.tmpname()
        finally(function() os.remove(src); os.remove(dst); os.remove("/tmp/" .. token) end)
        local t0 = helpers.now()
        local ok, err = s:copy_from("/sandbox/fifo", dst) -- must not block the caller on a FIFO
        assert.is_nil(ok)
        assert.is_string(err)
        assert.is_true(helpers.now() - t0 < 5)
        for _, p in ipairs({ "/sandbox/up/etc/hostname", "/sandbox/p1/etc/passwd", "/sandbox/d/etc/passwd" }) do
            ok = s:copy_from(p, dst)
            assert.is_nil(ok, p)
        end
        for _, p in ipairs({ "/sandbox/up/tmp/" .. token, "/sandbox/p1/tmp/" .. token, "/sandbox/d/etc/" .. token }) do
            ok = s:copy_to(src, p)
            assert.is_nil(ok, p)
        end
        assert.is_nil(helpers.read("/tmp/" .. token)) -- nothing landed on the host
        r = assert(s:exec("ls /tmp /etc"))
        assert.not_matches(token, r.stdout, 1, true)
        -- control: an ordinary copy both ways works
        assert(s:copy_to(src, "/sandbox/in.txt"))
        assert(s:copy_from("/sandbox/plain", dst))
        assert.equal("ok\n", helpers.read(dst))
        assert.equal(token, assert(s:exec({ "cat", "/sandbox/in.txt" })).stdout)
        A.fresh_ok()
    end)
end)

for _, pol in ipairs(A.POLICIES) do
describe("escape: /proc tricks under the " .. pol.name .. " #conformance #unpriv", function()
    local s
    before_each(function() s = A.session(pol.path) end)
    after_each(function() s:close() end)

    it("/proc/self/root and /proc/1/root lead nowhere but the sandbox's own root", function()
        local host_hostname = helpers.read("/etc/hostname")
        local r, res = A.py(s, [[
for name, p in [('p1-shadow', '/proc/1/root/../../etc/shadow'), ('p1-hostname', '/proc/1/root/etc/hostname'),
                ('self-shadow', '/proc/self/root/../../../etc/shadow'),
                ('self-root-home', '/proc/self/root/../root/.bashrc'), ('cwd-up', '/proc/self/cwd/../../etc/shadow')]:
    oserr(name, lambda: print(open(p).read()))
oserr('p1-root-list', lambda: print(os.listdir('/proc/1/root')))
print('self-root-is-root', os.stat('/proc/self/root/').st_ino == os.stat('/').st_ino and sorted(os.listdir('/proc/self/root')) == sorted(os.listdir('/')))
print('self-root-up-is-root', sorted(os.listdir('/proc/self/root/../../..')) == sorted(os.listdir('/')))
print('hostname', os.uname().nodename, open('/proc/self/root/etc/hostname').read().strip())
# control: the same path tricks read a file that does exist in the sandbox
print('ctl-read', open('/proc/self/root/../../etc/passwd').read().count(':') > 0)
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "p1-shadow", "p1-hostname", "self-shadow", "self-root-home", "cwd-up" }) do
            assert.is_truthy(res[k] == "ENOENT" or res[k] == "EACCES", k .. ": " .. tostring(res[k]))
        end
        assert.equal("EACCES", res["p1-root-list"]) -- the run's init is not dumpable
        assert.equal("True", res["self-root-is-root"])
        assert.equal("True", res["self-root-up-is-root"])
        assert.equal("True", res["ctl-read"])
        assert.equal("llmbox llmbox", res.hostname) -- a UTS namespace and an /etc/hostname of its own
        if host_hostname and #host_hostname > 1 then assert.not_matches(host_hostname, r.stdout, 1, true) end
        A.fresh_ok(pol.path)
    end)

    it("the run's init (/proc/1, a fork of the caller) keeps its environment and memory closed", function()
        local token = A.token("llmbox-env")
        ffi.C.setenv("LLMBOX_ADV_SECRET", token, 1)
        assert.equal(token, os.getenv("LLMBOX_ADV_SECRET")) -- control: the caller has it
        local s2 = A.session(pol.path) -- created after setenv: pid 1 inherits the caller's memory
        local r, res = A.py(s2, [[
oserr('p1-environ', lambda: print(open('/proc/1/environ', 'rb').read()))
oserr('p1-mem', lambda: print(open('/proc/1/mem', 'rb').read(1)))
oserr('p1-maps', lambda: print(open('/proc/1/maps').read()))
oserr('p1-fd', lambda: print(os.listdir('/proc/1/fd')))
oserr('p1-cwd', lambda: print(os.readlink('/proc/1/cwd')))
oserr('p1-exe', lambda: print(os.readlink('/proc/1/exe')))
oserr('p1-ns', lambda: print(os.listdir('/proc/1/ns')))
oserr('p1-stack', lambda: print(open('/proc/1/stack').read()))
# control: the same reads of the program's own /proc entries work
buf = ctypes.create_string_buffer(b'CONTROL-MEMORY-CONTENT')
with open('/proc/self/mem', 'rb') as m:
    m.seek(ctypes.addressof(buf)); print('ctl-mem', m.read(22) == buf.value)
print('ctl-environ', b'CTL_VAR=' + os.environ['CTL_VAR'].encode() in open('/proc/self/environ', 'rb').read())
]], { env = { CTL_VAR = "visible" } })
        s2:close()
        ffi.C.setenv("LLMBOX_ADV_SECRET", "", 1)
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "p1-environ", "p1-mem", "p1-maps", "p1-fd", "p1-cwd", "p1-exe", "p1-ns", "p1-stack" }) do
            assert.equal("EACCES", res[k], k)
        end
        assert.equal("True", res["ctl-mem"])
        assert.equal("True", res["ctl-environ"])
        assert.not_matches(token, r.stdout, 1, true)
        A.fresh_ok(pol.path)
    end)
end)

describe("escape: mounts and namespaces under the " .. pol.name .. " #conformance #unpriv", function()
    local s
    before_each(function() s = A.session(pol.path) end)
    after_each(function() s:close() end)

    it("chroot, pivot_root, mount and umount fail, and the mounts stay as built", function()
        local r, res = A.py(s, [[
before = open('/proc/self/mountinfo').read()
os.mkdir('/sandbox/m'); os.mkdir('/sandbox/m/old'); open('/sandbox/keep', 'w').write('kept')
MS_BIND, MS_REMOUNT, MS_REC, MS_PRIVATE = 4096, 32, 16384, 1 << 18
probe('mount-tmpfs', 165, b'none', b'/sandbox/m', b'tmpfs', 0, None)
probe('mount-bind-over-sandbox', 165, b'/tmp', b'/sandbox', None, MS_BIND, None)
probe('mount-remount-usr-rw', 165, None, b'/usr', None, MS_REMOUNT | MS_BIND, None)
probe('mount-remount-root-rw', 165, None, b'/', None, MS_REMOUNT, None)
probe('mount-private', 165, None, b'/', None, MS_REC | MS_PRIVATE, None)
probe('umount-usr', 166, b'/usr', 2)
probe('umount-proc', 166, b'/proc', 2)
probe('chroot', 161, b'/sandbox/m')
probe('pivot_root', 155, b'/sandbox/m', b'/sandbox/m/old')
probe('fsopen', 430, b'tmpfs', 0)
probe('open_tree', 428, -100, b'/usr', 1)
probe('move_mount', 429, -100, b'/tmp', -100, b'/sandbox', 0)
probe('mount_setattr', 442, -100, b'/usr', 0, ctypes.create_string_buffer(32), 32)
print('mounts-unchanged', open('/proc/self/mountinfo').read() == before)
print('sandbox-kept', open('/sandbox/keep').read() == 'kept' and os.listdir('/sandbox/m') == ['old'])
]])
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("OK", res["control-wrapper"])
        for _, k in ipairs({ "mount-tmpfs", "mount-bind-over-sandbox", "mount-remount-usr-rw", "mount-remount-root-rw",
            "mount-private", "umount-usr", "umount-proc", "chroot", "pivot_root", "fsopen", "open_tree", "move_mount",
            "mount_setattr" }) do
            assert.equal(pol.refused, res[k], k)
        end
        assert.equal("True", res["mounts-unchanged"])
        assert.equal("True", res["sandbox-kept"])
        -- the same from the shell tools an agent would reach for
        local r2 = assert(s:exec([[
mkdir -p /sandbox/n
mount -t tmpfs none /sandbox/n 2>/dev/null; echo "mount $?"
mount --bind /tmp /sandbox 2>/dev/null; echo "bind $?"
/usr/sbin/chroot /sandbox/n /bin/true 2>/dev/null; echo "chroot $?"
unshare -r true 2>/dev/null; echo "unshare-r $?"
unshare -rm sh -c 'mount --bind /tmp /sandbox' 2>/dev/null; echo "unshare-rm-bind $?"
grep -c ' /sandbox/n ' /proc/self/mountinfo
cat /sandbox/keep; echo
]]))
        assert.equal(0, r2.exit_code)
        local st = A.results(r2.stdout)
        if not s.driver.capabilities.images then
            assert.equal("32", st.mount) -- mount(8): "mount failure"
            assert.equal("32", st.bind)
        else
            -- in a container the sandbox user is no root to mount(8), which stops before
            -- calling mount(2) (exit 1, or 255 when the allow-list refuses what it probes
            -- first); the calls themselves are refused above
            assert.is_not.equal("0", st.mount)
            assert.is_not.equal("0", st.bind)
        end
        assert.equal("125", st.chroot) -- chroot(8) itself failed, /bin/true never ran
        assert.equal("1", st["unshare-r"])
        assert.equal("1", st["unshare-rm-bind"])
        assert.matches("\n0\nkept\n$", r2.stdout)
        A.fresh_ok(pol.path)
    end)

    it("nested user namespaces and other new namespaces are refused (unshare, clone, clone3)", function()
        local r, res = A.py(s, [[
FLAGS = {'user': 0x10000000, 'mnt': 0x20000, 'pid': 0x20000000, 'net': 0x40000000, 'ipc': 0x08000000,
         'uts': 0x04000000, 'cgroup': 0x02000000, 'time': 0x80}
SIGCHLD = 17
userns_before = os.readlink('/proc/self/ns/user')
def clone(name, flags):
    r, e = sc(56, flags | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)                 # the child, had it been created
    if r > 0:
        os.waitpid(r, 0)
    print(name, e, flush=True)
for ns, f in FLAGS.items():
    probe('unshare-' + ns, 272, f)
    clone('clone-' + ns, f)
probe('unshare-user-mnt', 272, FLAGS['user'] | FLAGS['mnt'])
clone('clone-user-mnt-pid', FLAGS['user'] | FLAGS['mnt'] | FLAGS['pid'])
args = struct.pack('QQQQQQQQ', FLAGS['user'], 0, 0, 0, SIGCHLD, 0, 0, 0)
r = probe('clone3-user', 435, ctypes.create_string_buffer(args, len(args)), len(args))
if r == 0: os._exit(0)
print('userns-unchanged', os.readlink('/proc/self/ns/user') == userns_before)
# control: plain fork through the same clone wrapper works
clone('ctl-clone-fork', 0)
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, ns in ipairs({ "user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time" }) do
            assert.equal(pol.refused, res["unshare-" .. ns], "unshare " .. ns)
            assert.equal("EPERM", res["clone-" .. ns], "clone " .. ns)
        end
        assert.equal(pol.refused, res["unshare-user-mnt"])
        assert.equal("EPERM", res["clone-user-mnt-pid"])
        assert.equal("ENOSYS", res["clone3-user"]) -- clone3 looks absent, glibc falls back to clone
        assert.equal("True", res["userns-unchanged"])
        assert.equal("OK", res["ctl-clone-fork"])
        local r2 = assert(s:exec("unshare -U true 2>&1; echo \"unshare-U $?\"; unshare --user --map-root-user id -u 2>&1; echo \"map-root $?\""))
        assert.not_matches("unshare%-U 0\n", r2.stdout)
        assert.not_matches("map%-root 0\n", r2.stdout)
        assert.not_matches("^0\n", r2.stdout) -- never uid 0, even inside a nested namespace
        A.fresh_ok(pol.path)
    end)

    it("setns into any namespace is refused", function()
        local r, res = A.py(s, [[
for ns in ['user', 'mnt', 'pid', 'net', 'ipc', 'uts', 'cgroup']:
    oserr('open-p1-' + ns, lambda: os.open('/proc/1/ns/' + ns, os.O_RDONLY))
    fd = os.open('/proc/self/ns/' + ns, os.O_RDONLY)   # control: the file opens
    probe('setns-self-' + ns, 308, fd, 0)
    os.close(fd)
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, ns in ipairs({ "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" }) do
            assert.equal("EACCES", res["open-p1-" .. ns], ns) -- pid 1 is not dumpable
            assert.equal(pol.refused, res["setns-self-" .. ns], ns)
        end
        A.fresh_ok(pol.path)
    end)
end)

describe("escape: kernel interfaces under the " .. pol.name .. " #conformance #unpriv", function()
    local s
    before_each(function() s = A.session(pol.path) end)
    after_each(function() s:close() end)

    it("ptrace (TRACEME, attach to pid 1 and to a sibling) and process_vm_readv are refused", function()
        local r, res = A.py(s, [[
import time
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
print('ctl-child-signalable', 'OK' if os.kill(child, 0) is None else 'no')
buf = ctypes.create_string_buffer(64)
iov = struct.pack('QQ', ctypes.addressof(buf), 64)
liov = ctypes.create_string_buffer(iov, 16)
riov = ctypes.create_string_buffer(iov, 16)
for name, pid in [('p1', 1), ('sibling', child)]:
    probe('ptrace-attach-' + name, 101, 16, pid, 0, 0)
    probe('ptrace-seize-' + name, 101, 0x4206, pid, 0, 0)
    probe('process_vm_readv-' + name, 310, pid, liov, 1, riov, 1, 0)
    probe('process_vm_writev-' + name, 311, pid, liov, 1, riov, 1, 0)
    probe('pidfd_open-' + name, 434, pid, 0)
probe('ptrace-traceme', 101, 0, 0, 0, 0)
os.kill(child, 9); os.waitpid(child, 0)
]])
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("OK", res["ctl-child-signalable"])
        for _, name in ipairs({ "p1", "sibling" }) do
            assert.equal(pol.refused, res["ptrace-attach-" .. name], name)
            assert.equal(pol.refused, res["ptrace-seize-" .. name], name)
            assert.equal(pol.refused, res["process_vm_readv-" .. name], name)
            assert.equal(pol.refused, res["process_vm_writev-" .. name], name)
        end
        -- control for the pid arguments: pidfd_open (allowed by both filters) finds both targets
        assert.equal("OK", res["pidfd_open-p1"])
        assert.equal("OK", res["pidfd_open-sibling"])
        assert.equal(pol.refused, res["ptrace-traceme"])
        A.fresh_ok(pol.path)
    end)

    it("keyctl, bpf, perf_event_open, userfaultfd and io_uring are refused", function()
        local r, res = A.py(s, [[
probe('keyctl', 250, 0, -3, 1)                       # KEYCTL_GET_KEYRING_ID, session keyring, create
probe('add_key', 248, b'user', b'llmbox', b'payload', 7, -2)
probe('request_key', 249, b'user', b'llmbox', None, 0)
bpf_attr = ctypes.create_string_buffer(struct.pack('IIII', 2, 4, 4, 1), 128)   # BPF_MAP_CREATE, array
probe('bpf-map-create', 321, 0, bpf_attr, 128)
prog = struct.pack('BBhi', 0xb7, 0, 0, 0) + struct.pack('BBhi', 0x95, 0, 0, 0)   # r0 = 0; exit
insns = ctypes.create_string_buffer(prog, len(prog)); lic = ctypes.create_string_buffer(b'GPL')
bpf_prog = ctypes.create_string_buffer(struct.pack('IIQQ', 1, 2, ctypes.addressof(insns), ctypes.addressof(lic)), 128)
probe('bpf-prog-load', 321, 5, bpf_prog, 128)
perf_attr = ctypes.create_string_buffer(struct.pack('IIQ', 1, 128, 0), 128)    # software, cpu clock
probe('perf_event_open', 298, perf_attr, 0, -1, -1, 0)
probe('userfaultfd', 323, 0o2000000)
probe('io_uring_setup', 425, 8, ctypes.create_string_buffer(120))
probe('io_uring_enter', 426, 0, 1, 0, 0, None, 0)
print('ctl-dev-userfaultfd', os.path.exists('/dev/userfaultfd'))
]])
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("OK", res["control-wrapper"])
        for _, k in ipairs({ "keyctl", "add_key", "request_key", "bpf-map-create", "bpf-prog-load", "perf_event_open",
            "userfaultfd", "io_uring_setup", "io_uring_enter" }) do
            assert.equal(pol.refused, res[k], k)
        end
        assert.equal("False", res["ctl-dev-userfaultfd"])
        A.fresh_ok(pol.path)
    end)

    it("kernel modules, kexec, reboot, the clock, the kernel log and I/O ports are refused", function()
        local modules_before = helpers.read("/proc/modules")
        local r, res = A.py(s, [[
elf = ctypes.create_string_buffer(b'\x7fELF' + b'\0' * 60, 64)
probe('init_module', 175, elf, 64, b'')
fd = os.open('/dev/null', os.O_RDONLY)
probe('finit_module', 313, fd, b'', 0)
probe('delete_module', 176, b'llmbox_nope', 0o4000)
probe('kexec_load', 246, 0, 0, None, 0)
probe('kexec_file_load', 320, fd, fd, 0, b'', 0)
probe('reboot', 169, 0xfee1dead, 672274793, 0, None)      # LINUX_REBOOT_CMD_CAD_OFF: harmless if it worked
ts = ctypes.create_string_buffer(16)
assert sc(228, 0, ts)[1] == 'OK'                          # control: clock_gettime through the wrapper
probe('clock_settime', 227, 0, ts)                        # set the clock to what it already says
tv = ctypes.create_string_buffer(struct.pack('qq', *struct.unpack('qq', ts.raw[:16])[:1], 0), 16)
probe('settimeofday', 164, tv, None)
timex = ctypes.create_string_buffer(208)                  # modes = 0: only reads
probe('adjtimex', 159, timex)
probe('clock_adjtime', 305, 0, timex)
probe('syslog-read', 103, 3, ctypes.create_string_buffer(4096), 4096)
probe('iopl', 172, 3)
probe('ioperm', 173, 0x80, 1, 1)
probe('swapon', 167, b'/sandbox/swap', 0)
probe('acct', 163, b'/sandbox/acct')
probe('personality', 135, 0x0040000)                      # ADDR_NO_RANDOMIZE
probe('open_by_handle_at', 304, -100, ctypes.create_string_buffer(128), 0)
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
            "reboot", "clock_settime", "settimeofday", "adjtimex", "clock_adjtime", "syslog-read", "iopl", "ioperm",
            "swapon", "acct", "personality", "open_by_handle_at" }) do
            assert.equal(pol.refused, res[k], k)
        end
        assert.equal(modules_before, helpers.read("/proc/modules"))
        A.fresh_ok(pol.path)
    end)

    it("raw and packet sockets are refused; ordinary sockets work", function()
        local r, res = A.py(s, [[
import socket
AF_PACKET = 17
for name, fam, typ, proto in [('inet-raw-icmp', socket.AF_INET, socket.SOCK_RAW, 1),
                              ('inet-raw-tcp', socket.AF_INET, socket.SOCK_RAW, 6),
                              ('inet6-raw', socket.AF_INET6, socket.SOCK_RAW, 58),
                              ('packet-raw', AF_PACKET, socket.SOCK_RAW, 0x0300),
                              ('packet-dgram', AF_PACKET, socket.SOCK_DGRAM, 0x0300),
                              ('ctl-inet-stream', socket.AF_INET, socket.SOCK_STREAM, 0),
                              ('ctl-inet-dgram', socket.AF_INET, socket.SOCK_DGRAM, 0)]:
    oserr(name, lambda: socket.socket(fam, typ, proto).close())
]])
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "inet-raw-icmp", "inet-raw-tcp", "inet6-raw", "packet-raw", "packet-dgram" }) do
            assert.equal("EPERM", res[k], k)
        end
        assert.equal("OK", res["ctl-inet-stream"])
        assert.equal("OK", res["ctl-inet-dgram"])
        A.fresh_ok(pol.path)
    end)

    it("sockets of families the policy does not name are refused: vsock, alg, xdp, tipc, rds, other netlink", function()
        -- (only created, never connected: vsock leads to the hypervisor's services on a VM host)
        local probe = [[
import socket
for name, fam, typ, proto in [('vsock', 40, socket.SOCK_STREAM, 0), ('alg', 38, socket.SOCK_SEQPACKET, 0),
                              ('xdp', 44, socket.SOCK_RAW, 0), ('tipc', 30, socket.SOCK_RDM, 0),
                              ('rds', 21, socket.SOCK_SEQPACKET, 0), ('bluetooth', 31, socket.SOCK_STREAM, 3),
                              ('can', 29, socket.SOCK_RAW, 1), ('key', 15, socket.SOCK_RAW, 2),
                              ('netlink-audit', 16, socket.SOCK_RAW, 9), ('netlink-uevent', 16, socket.SOCK_RAW, 15),
                              ('beyond', 200, socket.SOCK_STREAM, 0), ('high-bits-vsock', 40 | (1 << 32), 1, 0),
                              ('ctl-unix', socket.AF_UNIX, socket.SOCK_STREAM, 0),
                              ('ctl-inet6', socket.AF_INET6, socket.SOCK_DGRAM, 0),
                              ('ctl-netlink-route', 16, socket.SOCK_RAW, 0)]:
    if name.startswith('high-bits'):
        probe(name, 41, fam, typ, proto)  # the raw call: Python would truncate the family
    else:
        oserr(name, lambda: socket.socket(fam, typ, proto).close())
]]
        local r, res = A.py(s, probe)
        assert.equal(0, r.exit_code, r.stderr)
        for _, k in ipairs({ "vsock", "alg", "xdp", "tipc", "rds", "bluetooth", "can", "key", "netlink-audit",
            "netlink-uevent", "beyond", "high-bits-vsock" }) do
            assert.equal("EPERM", res[k], k)
        end
        for _, k in ipairs({ "ctl-unix", "ctl-inet6", "ctl-netlink-route" }) do assert.equal("OK", res[k], k) end
        -- control: a policy that names alg lets socket() through to the kernel, which answers
        -- as it does (a kernel without AF_ALG says EAFNOSUPPORT), and still refuses vsock
        local pol_path = helpers.write(helpers.tmppath(".lua"), ('return { extends = %q, syscalls = { '
            .. 'socket_families = { "unix", "inet", "inet6", "netlink_route", "alg" } } }'):format(
            (pol.path:sub(1, 1) == "/" and "" or (helpers.root .. "/")) .. pol.path))
        local s2 = A.session(pol_path)
        local r2, res2 = A.py(s2, probe)
        s2:close()
        os.remove(pol_path)
        assert.equal(0, r2.exit_code, r2.stderr)
        assert.is_truthy(res2.alg == "OK" or res2.alg == "EAFNOSUPPORT", tostring(res2.alg))
        assert.equal("EPERM", res2.vsock)
        A.fresh_ok(pol.path)
    end)
end)

describe("escape: other syscall ABIs and terminals under the " .. pol.name .. " #conformance #unpriv", function()
    local s
    before_each(function() s = A.session(pol.path) end)
    after_each(function() s:close() end)

    -- write(1, "PWNED\n", 6) through the native, x32 and i386 entry points. -no-pie keeps the
    -- message below 4 GiB, so an i386 write would have a valid pointer.
    local ABI_C = [[
#include <string.h>
static const char msg[] = "PWNED\n";
static const char ok[] = "native ok\n";
int main(int argc, char **argv) {
    long r = -1;
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "native"))
        __asm__ volatile("syscall" : "=a"(r) : "a"(1L), "D"(1L), "S"(ok), "d"(10L) : "rcx", "r11", "memory");
    else if (!strcmp(m, "x32"))
        __asm__ volatile("syscall" : "=a"(r) : "a"(1L | 0x40000000L), "D"(1L), "S"(msg), "d"(6L) : "rcx", "r11", "memory");
    else if (!strcmp(m, "int80"))
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(4L), "b"(1L), "c"(msg), "d"(6L) : "memory");
    return r < 0 ? 3 : 0;
}
]]

    it("x32 syscalls die of SIGSYS, int 0x80 dies, and nothing is written", function()
        local hostbin = A.cc(ABI_C, "-no-pie -O0")
        local bin = A.put(s, hostbin, "abi")
        os.remove(hostbin)
        local r = assert(s:exec({ bin, "native" })) -- control: the probe writes when it may
        assert.equal("native ok\n", r.stdout)
        assert.equal(0, r.exit_code)
        r = assert(s:exec({ bin, "x32" }))
        assert.equal(128 + 31, r.exit_code)
        assert.equal(31, r.signal)
        assert.equal("", r.stdout)
        -- i386: the filter kills it (SIGSYS) where the kernel has IA32 emulation; this kernel
        -- has none (the same binary dies of SIGSEGV outside the sandbox too)
        r = assert(s:exec({ bin, "int80" }))
        assert.is_truthy(r.exit_code == 159 or r.exit_code == 139, tostring(r.exit_code))
        assert.equal("", r.stdout)
        -- and from Python: x32 getpid, then an x32 write
        local r2 = A.py(s, "sc(39 | 0x40000000)\nprint('survived')")
        assert.equal(159, r2.exit_code)
        assert.equal("control-wrapper OK\n", r2.stdout)
        r2 = A.py(s, "sc(1 | 0x40000000, 1, b'PWNED\\n', 6)\nprint('survived')")
        assert.equal(159, r2.exit_code)
        assert.equal("control-wrapper OK\n", r2.stdout)
        A.fresh_ok(pol.path)
    end)

    it("has no terminal to attack, and TIOCSTI is refused on every descriptor, also with high bits", function()
        local tty_gap
        local r, res = A.py(s, [[
import fcntl, pty
oserr('openpty', pty.openpty)
oserr('dev-tty', lambda: os.open('/dev/tty', os.O_RDWR))
oserr('dev-ptmx', lambda: os.open('/dev/ptmx', os.O_RDWR))
print('isatty', any(os.isatty(fd) for fd in (0, 1, 2)))
rp, wp = os.pipe()
for fd in (0, 1, 2, rp):
    oserr('tiocsti-%d' % fd, lambda: fcntl.ioctl(fd, 0x5412, b'x'))
    probe('tiocsti-high-%d' % fd, 16, fd, 0x100005412, b'x')
    probe('tiocsti-high2-%d' % fd, 16, fd, 0xffffffff00005412, b'x')
    probe('tioclinux-%d' % fd, 16, fd, 0x541C, ctypes.create_string_buffer(b'\x06'))
# control: other ioctls reach the kernel (FIONREAD on a pipe works, TCGETS says "not a tty")
os.write(wp, b'abc')
n = ctypes.c_int(0)
print('ctl-fionread', sc(16, rp, 0x541B, ctypes.byref(n))[1], n.value)
oserr('ctl-tcgets', lambda: fcntl.ioctl(0, 0x5401, b'\0' * 64))
]])
        assert.equal(0, r.exit_code, r.stderr)
        assert.is_truthy(res.openpty and res.openpty ~= "OK", res.openpty)
        if not s.driver.capabilities.images then
            assert.equal("ENOENT", res["dev-tty"])
        elseif helpers.standin_lacks("tty") then
            tty_gap = helpers.standin_lacks("tty") -- (said at the end: the checks below still run)
        else
            -- an engine always makes /dev/tty: with no controlling terminal it opens nothing
            assert.equal("ENXIO", res["dev-tty"])
        end
        assert.equal("ENOENT", res["dev-ptmx"])
        assert.equal("False", res.isatty)
        for _, fd in ipairs({ "0", "1", "2", "3" }) do
            assert.equal("EPERM", res["tiocsti-" .. fd], fd)
            assert.equal("EPERM", res["tiocsti-high-" .. fd], fd)
            assert.equal("EPERM", res["tiocsti-high2-" .. fd], fd)
            assert.equal("EPERM", res["tioclinux-" .. fd], fd)
        end
        assert.equal("OK 3", res["ctl-fionread"])
        assert.equal("ENOTTY", res["ctl-tcgets"])
        A.fresh_ok(pol.path)
        if tty_gap then pending(tty_gap) end
    end)
end)
end

describe("escape: the caller's real terminal #conformance #unpriv", function()
    -- `script` gives the llmbox CLI a real pty as its controlling terminal and stdio.
    local function in_pty(cmd)
        local p = io.popen("script -qec " .. A.q(cmd) .. " /dev/null </dev/null 2>&1")
        local out = p:read("*a")
        p:close()
        return (out:gsub("\r", ""))
    end
    local PROBE = [[
import os, fcntl, errno
print('isatty', [os.isatty(fd) for fd in (0, 1, 2)])
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, 0x5412, b'#'); print('tiocsti', fd, 'OK')
    except OSError as e:
        print('tiocsti', fd, errno.errorcode[e.errno])
]]

    it("does not reach the sandbox: no tty there, and TIOCSTI is refused", function()
        if os.execute("command -v script >/dev/null 2>&1") ~= 0 then
            pending("script(1) is not installed")
            return
        end
        -- control: on the host, inside the same kind of pty, the probe sees a tty and TIOCSTI works
        local host = in_pty(A.HOST_PY .. " -c " .. A.q(PROBE))
        assert.matches("isatty [True, True, True]", host, 1, true)
        assert.matches("tiocsti 0 OK", host, 1, true)
        local out = in_pty(A.q(helpers.bin) .. " exec -q -p " .. A.DEFAULT .. " -- /usr/bin/python3 -c " .. A.q(PROBE))
        assert.matches("isatty [False, False, False]", out, 1, true)
        for fd = 0, 2 do assert.matches("tiocsti " .. fd .. " EPERM", out, 1, true) end
        assert.not_matches("OK", out, 1, true)
        A.fresh_ok()
    end)
end)

describe("escape: what the caller's process leaves in /proc/1 #conformance #unpriv", function()
    it("the caller's command line is not readable by the program", function()
        -- pid 1 of each run is forked from the caller without exec, so its /proc/1/cmdline is the
        -- caller's argv: a host secret when a caller was started with one (--api-key=...).
        local token = A.token("llmbox-argv")
        local base = helpers.tmppath()
        local script = helpers.write(base .. ".lua", ([[
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local s = assert(require("llmbox").session({ lang = "python", policy = %q }))
local r = assert(s:exec({ "cat", "/proc/1/cmdline" }))
io.write(r.stdout)
s:close()
]]):format(A.DEFAULT))
        local p = io.popen("luajit " .. A.q(script) .. " --api-key=" .. token)
        local out = p:read("*a")
        p:close()
        os.remove(script)
        os.remove(base)
        -- control: the probe does read pid 1's command line: llmbox's own init on native, the
        -- engine's (docker-init, catatonit) in a container
        if (os.getenv("LLMBOX_BACKEND") or "native") == "native" then
            assert.equal("llmbox-init", out:match("^[^%z]*"))
        else
            assert.matches("init", out:match("^[^%z]*"))
        end
        assert.not_matches(token, out, 1, true)
    end)
end)

-- Whether pid's readable memory holds needle (root reads any process's /proc/PID/mem); nil when
-- the process is gone.
local function memory_holds(pid, needle)
    local maps = io.open("/proc/" .. pid .. "/maps", "rb")
    local mem = io.open("/proc/" .. pid .. "/mem", "rb")
    if not (maps and mem) then
        if maps then maps:close() end
        if mem then mem:close() end
        return nil
    end
    local found, read = false, 0
    for l in maps:lines() do
        local a, b, perms, name = l:match("^(%x+)%-(%x+) (%S+) %S+ %S+ %S+%s*(.*)$")
        if a and perms:sub(1, 1) == "r" and not name:match("^%[v") then
            local from, to = tonumber(a, 16), tonumber(b, 16)
            local data = to - from <= 512 * 1024 * 1024 and mem:seek("set", from) and mem:read(to - from)
            if data then
                read = read + #data
                if data:find(needle, 1, true) then found = true break end
            end
        end
    end
    maps:close()
    mem:close()
    return found, read
end

describe("escape: what the caller's process leaves in the run's first processes (native, root)", function()
    it("nothing of the caller's memory is in the run's first child or its pid 1", function()
        -- the run's first child and pid 1 used to be a fork of the caller: a copy of everything
        -- it held (keys, tokens, other users' data) sat in processes beside the sandbox
        if (os.getenv("LLMBOX_BACKEND") or "native") ~= "native" or not helpers.is_root() then
            pending("the native backend's own processes, read as root")
            return
        end
        local token = A.token("llmbox-heap")
        local base = helpers.tmppath()
        local script = helpers.write(base .. ".lua", ([[
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local held = {}
for i = 1, 64 do held[i] = string.rep("x", i) .. (%q):upper():lower() end
local s = assert(require("llmbox").session({ lang = "python", policy = %q }))
s:exec({ "sleep", "30" })
]]):format(token, A.DEFAULT))
        local p = io.popen("sh -c 'echo $$; exec luajit " .. script .. " 2>/dev/null'")
        local caller = p:read("*l")
        finally(function()
            os.execute("kill " .. caller .. " 2>/dev/null")
            p:close()
            os.remove(script)
            os.remove(base)
        end)
        local first, init
        for _ = 1, 100 do
            for pid in helpers.capture("pgrep -P " .. caller .. " || true"):gmatch("%d+") do
                for child in helpers.capture("pgrep -P " .. pid .. " || true"):gmatch("%d+") do
                    local comm = helpers.read("/proc/" .. child .. "/comm") or ""
                    if comm:match("^llmbox%-init") then first, init = pid, child end
                end
            end
            if init then break end
            os.execute("sleep 0.1")
        end
        assert.is_truthy(init, "the run never started")
        -- control: the caller holds the token, and the scan finds it there
        assert.is_true(memory_holds(caller, token), "the scan does not find the token in the caller")
        for _, pid in ipairs({ first, init }) do
            local found, read = memory_holds(pid, token)
            assert.is_false(found, "process " .. pid .. " holds the caller's memory")
            assert.is_true(read > 0, "nothing of process " .. pid .. " was read")
        end
    end)
end)

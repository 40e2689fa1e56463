-- Shared pieces of the adversarial corpus (spec/05-adversarial/*_spec.lua): sessions under the
-- fixture policies that keep the jail but switch code checks off (so attacks reach the kernel),
-- a Python prelude that calls any syscall through ctypes and prints the outcome, C helpers, and
-- host-side helpers (unique tokens, host processes, host sockets).
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local luassert = require "luassert"

local A = {}

A.q = helpers.shell_quote
A.HOST_PY = "/usr/bin/python3" -- not a pyenv shim under /root: must work as nobody too

-- Both kinds of seccomp filter. `refused` is what a call the policy refuses returns: EPERM from
-- the deny-list, ENOSYS from the allow-list for calls it does not list (explicit refusals such as
-- namespace clone flags and TIOCSTI are EPERM under both).
A.POLICIES = {
    { name = "deny-list", path = "spec/fixtures/policies/default-nochecks.lua", refused = "EPERM" },
    { name = "allow-list", path = "spec/fixtures/policies/strict-nochecks.lua", refused = "ENOSYS" },
}
A.DEFAULT = A.POLICIES[1].path

function A.session(policy, lang)
    return assert(llmbox.session({ lang = lang or "python", policy = policy or A.DEFAULT }))
end

-- A fresh sandbox still works after an attack.
function A.fresh_ok(policy)
    local s = A.session(policy)
    local r = assert(s:run("print('fresh ok')"))
    s:close()
    luassert.equal(0, r.exit_code, r.stderr)
    luassert.equal("fresh ok\n", r.stdout)
end

local seq = 0
-- A unique token nobody could guess or hit by accident.
function A.token(prefix)
    local f = assert(io.open("/dev/urandom", "rb"))
    local b = f:read(10)
    f:close()
    seq = seq + 1
    return (prefix or "llmbox-adv") .. "-" .. b:gsub(".", function(c) return ("%02x"):format(c:byte()) end) .. seq
end

-- Every "name result" line of a probe's output, as a table.
function A.results(stdout)
    local t = {}
    for name, res in stdout:gmatch("([%w_%-%./]+) ([^\n]*)\n") do t[name] = res end
    return t
end

-- Python: sc(nr, *args) -> (ret, errno name); probe(name, nr, *args) prints "name OK" or
-- "name ERRNAME". Integers are passed as longs, bytes and ctypes objects as pointers.
A.PY = [[
import ctypes, errno, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def _arg(a):
    return ctypes.c_long(a) if isinstance(a, int) else a
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    return r, ('OK' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())))
def probe(name, nr, *args):
    r, e = sc(nr, *args)
    print(name, e, flush=True)
    return r
def oserr(name, fn, *args):
    try:
        fn(*args)
        print(name, 'OK', flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)), flush=True)
# control: the same wrapper makes harmless calls, with integer and pointer arguments
_u = ctypes.create_string_buffer(6 * 65)
assert sc(39)[0] == os.getpid() and sc(63, _u)[1] == 'OK' and _u.raw.startswith(b'Linux')
print('control-wrapper OK', flush=True)
]]

-- Runs a Python attack (the prelude first) in session s; returns the result and its probe lines.
function A.py(s, code, opts)
    local r = assert(s:run(A.PY .. code, opts))
    return r, A.results(r.stdout)
end

-- Python: search(tok) -> every place the token shows up in this sandbox: file contents (outside
-- /proc, and /usr, the host's read-only runtime), file names anywhere, and the command lines of
-- other processes. The token must reach the program through its environment, never its code.
A.SEARCH_PY = [[
import os, subprocess
def search(tok):
    sh = ('grep -rlF -e "$T" $(find / -mindepth 1 -maxdepth 1 ! -type l ! -name proc ! -name usr) 2>/dev/null;'
          'find / -path /proc -prune -o -name "*$T*" -print 2>/dev/null')
    hits = subprocess.run(['/bin/sh', '-c', sh], env={'T': tok, 'PATH': '/usr/bin:/bin'},
                          capture_output=True, text=True).stdout.split()
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) != os.getpid():
            try:
                if tok.encode() in open('/proc/%s/cmdline' % p, 'rb').read():
                    hits.append('cmdline:' + p)
            except OSError:
                pass
    return sorted(set(hits))
]]

-- Compiles C source on the host; returns the binary's path (the caller removes it).
function A.cc(src, flags)
    local base = helpers.tmppath()
    local c = helpers.write(base .. ".c", src)
    local bin = base .. ".bin"
    local ok = os.execute("cc " .. (flags or "") .. " -o " .. A.q(bin) .. " " .. A.q(c) .. " 2>&1")
    os.remove(c)
    os.remove(base)
    assert(ok == 0 or ok == true, "cc failed")
    return bin
end

-- Copies a host binary into the workspace as /sandbox/NAME.
function A.put(s, bin, name)
    assert(s:copy_to(bin, "/sandbox/" .. name))
    luassert.equal(0, assert(s:exec({ "chmod", "+x", "/sandbox/" .. name })).exit_code)
    return "/sandbox/" .. name
end

-- Host side ------------------------------------------------------------------------------------

-- The uid the sandbox user maps to on the host (root: 65534, else our own).
function A.sandbox_host_uid()
    return helpers.is_root() and "65534" or helpers.uid()
end

-- Runs CMD (a shell string) in the background on the host, as the sandbox's host uid when we are
-- root (so only the namespaces, not uid checks, stand between it and the sandbox). Returns its pid.
function A.spawn(cmd)
    local pre = helpers.is_root() and "setpriv --reuid=65534 --regid=65534 --clear-groups " or ""
    local p = io.popen(pre .. "sh -c " .. A.q("exec " .. cmd) .. " </dev/null >/dev/null 2>&1 & echo $!")
    local pid = tonumber(p:read("*l"))
    p:close()
    assert(pid, "spawn failed")
    return pid
end

-- A host process is alive (exists and is not a zombie).
function A.alive(pid)
    local st = helpers.read("/proc/" .. pid .. "/stat")
    if not st then return false end
    local state = st:match("^%d+ %b() (%a)")
    return state ~= nil and state ~= "Z" and state ~= "X"
end

-- Host pids whose command line contains `marker` (plain text; NULs read as spaces), or with
-- `prefix`, starts with it.
function A.host_pids(marker, prefix)
    local found = {}
    local p = io.popen("ls /proc")
    for name in p:lines() do
        if name:match("^%d+$") then
            local cl = helpers.read("/proc/" .. name .. "/cmdline")
            local at = cl and cl:gsub("%z", " "):find(marker, 1, true)
            if at and (at == 1 or not prefix) then found[#found + 1] = tonumber(name) end
        end
    end
    p:close()
    return found
end

-- Kills a host process from the host and waits until it is gone; returns whether the kill worked.
function A.host_kill(pid)
    local ok = os.execute("kill -9 " .. pid .. " 2>/dev/null")
    ok = (ok == 0 or ok == true)
    for _ = 1, 100 do
        if not A.alive(pid) then break end
        os.execute("sleep 0.02")
    end
    return ok and not A.alive(pid)
end

return A

-- Helpers shared by bench/bench.lua and bench/worker.lua: a monotonic clock, sleeping, spawning
-- processes without a shell (posix_spawn, so a row measures the program and not /bin/sh), /proc
-- readers and the statistics (medians with bootstrap confidence intervals).
local ffi = require "ffi"
local C = ffi.C

local _M = {}

for _, decl in ipairs({
    "typedef struct { int __allocated; int __used; void *__actions; int __pad[16]; } bench_spawn_fa_t;",
    "int posix_spawn_file_actions_init(bench_spawn_fa_t *fa);",
    "int posix_spawn_file_actions_destroy(bench_spawn_fa_t *fa);",
    "int posix_spawn_file_actions_adddup2(bench_spawn_fa_t *fa, int fd, int newfd);",
    "int posix_spawn_file_actions_addclose(bench_spawn_fa_t *fa, int fd);",
    "int posix_spawn_file_actions_addopen(bench_spawn_fa_t *fa, int fd, const char *path, int oflag, unsigned int mode);",
    "int posix_spawn(int *pid, const char *path, const bench_spawn_fa_t *fa, const void *attr, char *const argv[], char *const envp[]);",
    "int pipe2(int fds[2], int flags);",
    "long read(int fd, void *buf, size_t n);",
    "long write(int fd, const void *buf, size_t n);",
    "int close(int fd);",
    "int waitpid(int pid, int *status, int options);",
    -- struct rusage as longs: ru_utime and ru_stime (2 each), then ru_maxrss (KiB) at [4]
    "int wait4(int pid, int *status, int options, long *rusage);",
    "int poll(void *fds, unsigned long nfds, int timeout);",
    "int getpid(void);",
    "int kill(int pid, int sig);",
    "extern char **environ;",
    "long syscall(long number, ...);",
}) do
    pcall(ffi.cdef, decl)
end

local O_CLOEXEC, O_RDONLY = 0x80000, 0

local util = require "llmbox.util"
_M.now_ms = util.now_ms

function _M.sleep_ms(ms)
    C.poll(nil, 0, math.floor(ms))
end

local function cargv(argv)
    local n = #argv
    local arr = ffi.new("char *[?]", n + 1)
    local keep = {}
    for i = 1, n do
        keep[i] = ffi.new("char[?]", #argv[i] + 1, argv[i])
        arr[i - 1] = keep[i]
    end
    arr[n] = nil
    return arr, keep
end

-- Starts argv[1] (an absolute path) with stdin from /dev/null (or a pipe when opts.stdin_pipe),
-- stdout and stderr into one pipe. Returns a process object: { pid, out_fd, in_fd }.
function _M.spawn(argv, opts)
    opts = opts or {}
    local out = ffi.new("int[2]")
    assert(C.pipe2(out, O_CLOEXEC) == 0, "pipe2 failed")
    local inp
    local fa = ffi.new("bench_spawn_fa_t")
    C.posix_spawn_file_actions_init(fa)
    if opts.stdin_pipe then
        inp = ffi.new("int[2]")
        assert(C.pipe2(inp, O_CLOEXEC) == 0, "pipe2 failed")
        C.posix_spawn_file_actions_adddup2(fa, inp[0], 0)
    else
        C.posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0)
    end
    C.posix_spawn_file_actions_adddup2(fa, out[1], 1)
    -- with stderr_separate, stderr stays the caller's (workers report failures there)
    if not opts.stderr_separate then C.posix_spawn_file_actions_adddup2(fa, out[1], 2) end
    local pid = ffi.new("int[1]")
    local cv, keep = cargv(argv)
    local rc = C.posix_spawn(pid, argv[1], fa, nil, cv, C.environ)
    C.posix_spawn_file_actions_destroy(fa)
    C.close(out[1])
    if inp then C.close(inp[0]) end
    local _ = keep
    if rc ~= 0 then
        C.close(out[0])
        if inp then C.close(inp[1]) end
        return nil, "posix_spawn " .. argv[1] .. " failed: errno " .. rc
    end
    return { pid = pid[0], out_fd = out[0], in_fd = inp and inp[1] or nil, buf = "" }
end

local rbuf = ffi.new("char[65536]")

-- Reads one line (without the newline) from the process's stdout, or nil at EOF.
function _M.read_line(p)
    while true do
        local nl = p.buf:find("\n", 1, true)
        if nl then
            local line = p.buf:sub(1, nl - 1)
            p.buf = p.buf:sub(nl + 1)
            return line
        end
        local n = tonumber(C.read(p.out_fd, rbuf, 65536))
        if n <= 0 then
            if p.buf ~= "" then
                local line = p.buf
                p.buf = ""
                return line
            end
            return nil
        end
        p.buf = p.buf .. ffi.string(rbuf, n)
    end
end

function _M.read_all(p)
    local parts = { p.buf }
    p.buf = ""
    while true do
        local n = tonumber(C.read(p.out_fd, rbuf, 65536))
        if n <= 0 then break end
        parts[#parts + 1] = ffi.string(rbuf, n)
    end
    return table.concat(parts)
end

function _M.write(p, s)
    C.write(p.in_fd, s, #s)
end

-- Closes the pipes and reaps the process; returns its exit status (128 + N for a signal).
function _M.wait(p)
    if p.out_fd then C.close(p.out_fd) p.out_fd = nil end
    if p.in_fd then C.close(p.in_fd) p.in_fd = nil end
    local st, ru = ffi.new("int[1]"), ffi.new("long[18]")
    C.wait4(p.pid, st, 0, ru)
    p.maxrss_kib = tonumber(ru[4])
    local s = st[0]
    if bit.band(s, 0x7f) == 0 then return bit.rshift(bit.band(s, 0xff00), 8) end
    return 128 + bit.band(s, 0x7f)
end

-- Runs argv to completion: elapsed ms (spawn to reaped), output (stdout + stderr), exit status,
-- the process's peak RSS (KiB), and when it was spawned and reaped (now_ms).
function _M.time_cmd(argv)
    local t0 = _M.now_ms()
    local p, err = _M.spawn(argv)
    if not p then return nil, err end
    local out = _M.read_all(p)
    local code = _M.wait(p)
    local t1 = _M.now_ms()
    return t1 - t0, out, code, p.maxrss_kib, t0, t1
end

-- Output of a command (for versions in the host description), through the shell.
function _M.capture(cmd)
    local f = io.popen(cmd .. " 2>/dev/null")
    if not f then return "" end
    local s = f:read("*a") or ""
    f:close()
    return (s:gsub("%s+$", ""))
end

_M.read_file = util.read_file

function _M.getpid()
    return C.getpid()
end

-- ---- /proc ----

-- Live descendants of pid (not pid itself).
_M.descendants = util.descendants

-- Pss of one process in KiB (smaps_rollup), or nil if it is gone.
-- A field of this process's /proc/self/status in KiB (VmRSS, VmHWM), or nil.
function _M.status_kib(field)
    local s = _M.read_file("/proc/self/status") or ""
    return tonumber(s:match(field .. ":%s*(%d+) kB"))
end

function _M.pss_kib(pid)
    local s = _M.read_file("/proc/" .. pid .. "/smaps_rollup")
    if not s then return nil end
    return tonumber(s:match("\nPss:%s+(%d+) kB"))
end

-- Whether two processes share one address space (kcmp(2), KCMP_VM). A run's init shares its
-- first child's (runtime/chain.c): smaps_rollup reports those pages under both, so a sum over
-- processes must count them once. Unknown architectures: false (the sum may then count twice).
local SYS_KCMP = ({ x64 = 312, arm64 = 272 })[ffi.arch]
function _M.same_vm(a, b)
    if not SYS_KCMP then return false end
    return C.syscall(SYS_KCMP, ffi.new("int", a), ffi.new("int", b), ffi.new("int", 1),
        ffi.new("unsigned long", 0), ffi.new("unsigned long", 0)) == 0
end

function _M.comm(pid)
    return (_M.read_file("/proc/" .. pid .. "/comm") or "?"):gsub("%s+$", "")
end

function _M.meminfo_kib(key)
    local s = _M.read_file("/proc/meminfo") or ""
    return tonumber(s:match(key .. ":%s+(%d+) kB"))
end

-- ---- statistics ----

local function median_sorted(t)
    local n = #t
    if n == 0 then return nil end
    if n % 2 == 1 then return t[(n + 1) / 2] end
    return (t[n / 2] + t[n / 2 + 1]) / 2
end

function _M.median(xs)
    local t = {}
    for i = 1, #xs do t[i] = xs[i] end
    table.sort(t)
    return median_sorted(t)
end

function _M.quantile(xs, q)
    local t = {}
    for i = 1, #xs do t[i] = xs[i] end
    table.sort(t)
    if #t == 0 then return nil end
    local pos = 1 + (#t - 1) * q
    local lo = math.floor(pos)
    local hi = math.min(lo + 1, #t)
    return t[lo] + (t[hi] - t[lo]) * (pos - lo)
end

local function resample_median(xs, tmp)
    local n = #xs
    for i = 1, n do tmp[i] = xs[math.random(n)] end
    table.sort(tmp)
    return median_sorted(tmp)
end

_M.BOOT = 2000

-- Median and its bootstrap 95% percentile interval.
function _M.median_ci(xs, boots)
    boots = boots or _M.BOOT
    if #xs == 0 then return nil end
    local meds, tmp = {}, {}
    for b = 1, boots do meds[b] = resample_median(xs, tmp) end
    table.sort(meds)
    return _M.median(xs), meds[math.max(1, math.floor(boots * 0.025))], meds[math.ceil(boots * 0.975)]
end

-- Ratio of medians a/b and its bootstrap 95% interval (both samples resampled independently).
function _M.ratio_ci(a, b, boots)
    boots = boots or _M.BOOT
    if #a == 0 or #b == 0 then return nil end
    local rs, ta, tb = {}, {}, {}
    for i = 1, boots do rs[i] = resample_median(a, ta) / resample_median(b, tb) end
    table.sort(rs)
    return _M.median(a) / _M.median(b), rs[math.max(1, math.floor(boots * 0.025))], rs[math.ceil(boots * 0.975)]
end

return _M

-- llmbox.mcp.reaper: the server waits for every process that becomes its child, not only the
-- workers it started. Cancelling a run SIGKILLs a worker's whole tree, and what is left of a run
-- whose supervisor died reparents to the nearest subreaper or to pid 1; when `llmbox mcp` is pid 1
-- (a container started without --init), or a subreaper as set up here, nobody else would ever
-- wait for those processes, and their zombies would pile up until pids run out.
--
--   reaper.start(is_ours)   -- is_ours(pid): a child libuv started and waits for itself
--
-- libuv waits for the processes it spawned, by pid; this reaps only the others, so it never steals
-- an exit status libuv is waiting for: waitid(WNOWAIT) looks at a zombie without collecting it,
-- and only a child that is not libuv's is then collected, by its pid.
local ffi = require "ffi"
local uv = require "luv"
local ctx = require "llmbox.mcp.context"

local ipairs, pcall, tostring = ipairs, pcall, tostring

local _M = { _VERSION = "0.1.0" }

-- one declaration per cdef: one that another module made already must not hide the others
for _, decl in ipairs({
    "int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);",
    [[typedef struct {
        int si_signo, si_errno, si_code;
        union { int pad[29]; struct { int pid; unsigned uid; } child; void *align; } u;
    } llmbox_siginfo;]],
    "int waitid(int idtype, unsigned id, llmbox_siginfo *info, int options);",
    "int waitpid(int pid, int *status, int options);",
    "char *strerror(int errnum);",
}) do pcall(ffi.cdef, decl) end
local C = ffi.C
local PR_SET_CHILD_SUBREAPER = 36
local P_ALL, WNOHANG, WEXITED, WNOWAIT = 0, 1, 4, 0x01000000
local MAX_PER_PASS = 10000

local info = ffi.new("llmbox_siginfo")

--- become_subreaper() -> true | nil, err: orphans of our descendants reparent to us, not to init
function _M.become_subreaper()
    if C.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) ~= 0 then
        return nil, "prctl(PR_SET_CHILD_SUBREAPER): " .. ffi.string(C.strerror(ffi.errno()))
    end
    return true
end

--- reap(is_ours) -> how many were collected, and whether a child of libuv's stood in the way
-- (waitid shows one zombie at a time: the next pass, after libuv has collected its own, goes on)
function _M.reap(is_ours)
    local n = 0
    for _ = 1, MAX_PER_PASS do
        ffi.fill(info, ffi.sizeof(info))
        if C.waitid(P_ALL, 0, info, WEXITED + WNOHANG + WNOWAIT) ~= 0 then break end -- ECHILD: none
        local pid = info.u.child.pid
        if pid == 0 then break end -- children, none of them a zombie
        if is_ours(pid) then return n, true end
        if C.waitpid(pid, nil, WNOHANG) ~= pid then break end
        n = n + 1
    end
    return n, false
end

--- start(is_ours): become a subreaper, and reap on SIGCHLD and every second (a signal can stand
-- for several exits, and the first zombie may be libuv's, collected in the same loop turn)
function _M.start(is_ours)
    local ok, err = _M.become_subreaper()
    if not ok then ctx.log("%s; orphans of cancelled runs go to init", tostring(err)) end
    local retry = uv.new_timer()
    local function pass()
        local _, blocked = _M.reap(is_ours)
        if blocked and not retry:is_active() then retry:start(20, 0, pass) end
    end
    local sig = uv.new_signal()
    sig:start("sigchld", pass)
    sig:unref()
    local timer = uv.new_timer()
    timer:start(1000, 1000, pass)
    timer:unref()
    retry:unref()
    pass()
end

return _M

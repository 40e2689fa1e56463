-- The warm channel: how llmbox talks to a program started ahead of time in a pooled sandbox (a
-- prestarted run, see pool.lua), and the one place that knows its format. The other end is the
-- recipe's warm program (recipes/python/llmbox_warm.py); the C core only carries the bytes
-- (runtime/llmbox.h: lb_run_spec.prestart, supervise.c).
--
-- Version 1, on fd 3 of the program (a stream socket):
--   program -> llmbox   "R", once the program is ready for its request
--   llmbox -> program   one request, then EOF:
--                         VERSION \0 PATH \0 CWD \0 NARGS \0 (ARG \0) * NARGS CODE
--                       VERSION is "1"; PATH is where the code goes (it is written there, so
--                       tracebacks quote it), CWD the working directory, then the program's
--                       arguments and the code itself (any bytes)
--   program -> llmbox   (optional) "exit STATUS UTIME_US STIME_US MAXRSS_KB PROBE\n" once the
--                       program is done, so the result does not wait for the interpreter's
--                       teardown; the kernel's status wins when it comes first
-- A program that gets a request of another version exits non-zero and says so on stderr. The
-- program can only misreport its own result this way; it can never reach another run.
-- Interactive cells will be version 2: several requests on one channel, each framed by length.
local type, ipairs, pairs, tostring = type, ipairs, pairs, tostring
local concat, format = table.concat, string.format

local _M = { _VERSION = "0.1.0", VERSION = "1" }

-- How long the first run of a lease waits for a warm program that is still starting: waiting
-- beats a cold start, which would start the same interpreter again.
_M.LEASE_WAIT_MS = 10000

--- warm.request(path, cwd, args, code [, version]) -> bytes | nil, err
function _M.request(path, cwd, args, code, version)
    local req = { version or _M.VERSION, path, cwd, tostring(#args) }
    for i, a in ipairs(args) do
        if type(a) ~= "string" or a:find("\0", 1, true) then
            return nil, format("args[%d]: expected a string without NUL bytes", i)
        end
        req[#req + 1] = a
    end
    req[#req + 1] = code
    return concat(req, "\0")
end

-- Run options a warm program can honour: everything else (other limits, a different working
-- directory, libraries) needs a program started with them, so the run starts cold instead.
local SERVES = { timeout = 1, output = 1, stdin = 1, args = 1, on_stdout = 1, on_stderr = 1, on_phase = 1,
    keep_plots = 1, artifacts = 1, artifacts_max = 1, cwd = 1, env = 1, clean = 1, libraries = 1 }

--- warm.serves(w, recipe, env, cwd, workspace, opts) -> true when the prestarted program `w` can
--- run this request exactly as a cold start would: same recipe, the workspace as its directory,
--- no libraries, only options it honours, and exactly the environment a cold run would get.
function _M.serves(w, recipe, env, cwd, workspace, opts)
    if w.recipe ~= recipe or (cwd ~= nil and cwd ~= workspace) then return false end
    if opts.libraries and #opts.libraries > 0 then return false end
    for k in pairs(opts) do
        if not SERVES[k] then return false end
    end
    if #env ~= #w.env then return false end
    for i = 1, #env do
        if env[i] ~= w.env[i] then return false end
    end
    return true
end

--- warm.new(pending, recipe, env) -> the state of one prestarted program (see Session:prestart)
function _M.new(pending, recipe, env)
    return { pending = pending, recipe = recipe, env = env, wait_ms = 0 }
end

--- warm.state(w) -> "ready" | "starting" | "dead"
function _M.state(w)
    return w.pending:wait(0)
end

return _M

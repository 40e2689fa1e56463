-- llmbox.mcp.workers: the server's child processes. Sandboxes are built in `llmbox worker`
-- children (llmbox.mcp.worker), never in the server: one per execute_code or check_code call, one
-- per stateful session, plus warm ones that keep a pool of ready sandboxes. They speak JSON lines.
--
--   local w = assert(workers.spawn())
--   local result, err, raw = w:request({ op = "run", code = "print(1)" }, on_event)  -- in a handler
--   w:close()   -- lets it finish and exit;   w:kill() -- SIGKILLs it and its whole tree
--
-- The number of one-shot workers is bounded (LLMBOX_MCP_MAX_RUNS): acquire_slot() waits for one.
local uv = require "luv"
local json = require "llmbox.json"
local util = require "llmbox.util"
local rpc = require "llmbox.mcp.jsonrpc"
local ctx = require "llmbox.mcp.context"
local progress = require "llmbox.mcp.progress"

local type, pairs, ipairs, next, tostring, pcall, error, setmetatable = type, pairs, ipairs, next, tostring, pcall,
    error, setmetatable
local format = string.format
local S, log, await = ctx.state, ctx.log, ctx.await

local _M = { _VERSION = "0.1.0" }

local Worker = {}
Worker.__index = Worker

--- spawn() -> worker | nil, err
function _M.spawn()
    local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
    local w = setmetatable({ stdin = stdin, stdout = stdout, pending = {}, next_id = 0, alive = true }, Worker)
    -- the worker checks that its parent is still this process (see llmbox.mcp.worker)
    local args = { "worker", "--parent", tostring(uv.os_getpid()) }
    local handle, pid = uv.spawn(S.exe, { args = args, stdio = { stdin, stdout, 2 } },
        function(code, signal)
            w:exited(code, signal)
        end)
    if not handle then
        stdin:close()
        stdout:close()
        return nil, "cannot start the sandbox worker " .. S.exe .. ": " .. tostring(pid)
    end
    w.handle, w.pid = handle, pid
    S.workers[w] = true
    S.worker_pids[pid] = w
    -- no limit: the worker is ours, and what it sends is bounded by the policy's output limits
    local feed = rpc.lines(function(line) w:message(line) end)
    stdout:read_start(function(err, data)
        if err or not data then
            if not stdout:is_closing() then stdout:close() end
            feed(nil)
            w.eof = true
            w:finish()
            return
        end
        feed(data)
    end)
    return w
end

function Worker:message(line)
    local msg = json.decode(line)
    if type(msg) ~= "table" then
        log("worker %d sent a line that is not JSON: %s", self.pid, line:sub(1, 200))
        return
    end
    local p = self.pending[msg.id]
    if not p then return end
    if msg.event then
        if p.on_event then p.on_event(msg) end
        return
    end
    self.pending[msg.id] = nil
    p.done(msg.result, msg.error, msg)
end

function Worker:exited(code, signal)
    self.alive = false
    self.status = { code, signal }
    S.workers[self] = nil
    S.worker_pids[self.pid] = nil
    if not self.handle:is_closing() then self.handle:close() end
    if not self.stdin:is_closing() then self.stdin:close() end
    self:finish()
end

-- Requests still open once the worker has exited and its last output is read failed with it.
function Worker:finish()
    if self.alive or not self.eof or self.finished then return end
    self.finished = true
    local code, signal = self.status[1], self.status[2]
    local why = self.killed_because
        or format("the sandbox worker exited unexpectedly (status %s, signal %s)", tostring(code), tostring(signal))
    local pending = self.pending
    self.pending = {}
    for _, p in pairs(pending) do p.done(nil, why, {}) end
    if self.on_exit then self.on_exit(code, signal) end
end

--- w:request(msg [, on_event [, timeout]]) -> result | nil, err, raw message
-- Waits (call it from a handler). With `timeout` (seconds), a worker that has not answered by
-- then is killed and the request fails saying so.
function Worker:request(msg, on_event, timeout)
    if not self.alive then return nil, "the sandbox worker is gone" end
    self.next_id = self.next_id + 1
    msg.id = self.next_id
    local timer
    if timeout then
        timer = uv.new_timer()
        timer:start(ctx.floor_ms(timeout), 0, function()
            self:kill(format("the sandbox worker did not answer %s within %g s", msg.op, timeout))
        end)
    end
    local res, err, raw = await(function(resume)
        self.pending[msg.id] = { done = resume, on_event = on_event }
        self.stdin:write(json.encode(msg) .. "\n")
    end)
    if timer then timer:close() end
    return res, err, raw
end

-- Closing stdin lets the worker close its session and exit on its own.
function Worker:close()
    if self.alive and not self.stdin:is_closing() then self.stdin:shutdown(function() end) end
end

--- w:kill([why]): kills the worker and its whole tree; its open requests fail with `why`. The
-- worker's death alone ends its runs (every process of a run has PR_SET_PDEATHSIG, re-armed after
-- the switch to the sandbox user); killing the tree too, from a snapshot taken first, does not
-- depend on that. What is left over reparents to the server and is reaped (llmbox.mcp.reaper).
function Worker:kill(why)
    if self.alive then
        self.killed_because = self.killed_because or why or "the run was cancelled"
        local tree = util.descendants(self.pid)
        pcall(self.handle.kill, self.handle, "sigkill")
        for _, pid in ipairs(tree) do uv.kill(pid, "sigkill") end
    end
end

--- open(call, lang, policy [, deferred]) -> a worker holding an open session | nil, err; with
--- `deferred` (one run), the worker makes the sandbox only once the code is admitted
function _M.open(call, lang, policy, deferred, interactive)
    local w, err = _M.spawn()
    if not w then return nil, err end
    call.worker = w
    local res, oerr = w:request({ op = "open", lang = lang, policy = policy, memory = S.cfg.memory,
        cpus = S.cfg.cpus, backend = S.cfg.backend, deferred = deferred, interactive = interactive })
    if not res then
        w:kill()
        return nil, oerr
    end
    return w
end

-- slots ---------------------------------------------------------------------------------------

function _M.release_slot()
    local nxt = table.remove(S.waiting, 1)
    if nxt then
        nxt() -- the slot passes on to the next waiter
    else
        S.running = S.running - 1
    end
end

--- acquire_slot(call) -> true | false when the call was cancelled while it waited
-- One-shot workers wait for a free slot (LLMBOX_MCP_MAX_RUNS) so an agent that fires many calls
-- at once queues them instead of starting unbounded sandboxes.
function _M.acquire_slot(call)
    if S.running < S.cfg.max_runs then
        S.running = S.running + 1
        return true
    end
    progress.send(call, "waiting for a free sandbox slot")
    await(function(resume) S.waiting[#S.waiting + 1] = resume end)
    if call.cancelled then
        _M.release_slot()
        return false
    end
    return true
end

--- with_slot(call, fn) -> fn()'s result, run while holding a slot; nil when cancelled waiting
function _M.with_slot(call, fn)
    if not _M.acquire_slot(call) then return nil end
    local ok, result = pcall(fn)
    _M.release_slot()
    if not ok then error(result, 0) end
    return result
end

-- warm workers ------------------------------------------------------------------------------
-- The fast path for execute_code: workers that each hold a small pool of ready sandboxes (with
-- the interpreter already started, where the language can), reused from call to call; every call
-- still gets a fresh, never-used sandbox. At most LLMBOX_MCP_WARM per language; beyond that,
-- calls get one-shot workers.

function _M.warm_capable(lang)
    local r = require("llmbox.recipes").get(lang)
    return r and r.warm and r.name or nil
end

function _M.take_warm(lang)
    local idle = S.warm_idle[lang]
    while idle and #idle > 0 do
        local w = table.remove(idle)
        if w.alive then return w end
    end
end

--- warm_target(lang) -> how many warm workers a language keeps (LLMBOX_MCP_WARM, or the
--- daemon's pools)
function _M.warm_target(lang)
    return S.cfg.warm_by_lang and S.cfg.warm_by_lang[lang] or S.cfg.warm
end

function _M.start_warm(lang)
    if _M.warm_target(lang) <= 0 or (S.warm_count[lang] or 0) >= _M.warm_target(lang) then return nil end
    local w = _M.spawn()
    if not w then return nil end
    S.warm_count[lang] = (S.warm_count[lang] or 0) + 1
    w.warm_lang, w.warm_gen = lang, S.warm_gen
    w.on_exit = function() S.warm_count[lang] = S.warm_count[lang] - 1 end
    local res, err = w:request({ op = "open", lang = lang, policy = S.cfg.policy, memory = S.cfg.memory,
        cpus = S.cfg.cpus, backend = S.cfg.backend, pool = true })
    if not res then
        log("a warm %s worker could not start: %s", lang, tostring(err))
        w:kill()
        return nil
    end
    return w
end

function _M.give_back(w)
    if w.alive and not S.closing and w.warm_gen == S.warm_gen then
        local idle = S.warm_idle[w.warm_lang] or {}
        S.warm_idle[w.warm_lang] = idle
        idle[#idle + 1] = w
    else
        w:close()
    end
end

--- drain_warm(): closes the idle warm workers (their sandboxes were made under policies a
--- reload replaced) and starts a fresh one
function _M.drain_warm()
    for _, idle in pairs(S.warm_idle) do
        for _, w in ipairs(idle) do w:close() end
    end
    S.warm_idle = {}
    -- (and those in use now are closed when they come back)
    S.warm_gen = (S.warm_gen or 0) + 1
    _M.prewarm()
end

--- refill(lang): starts warm workers up to the language's target, off the caller's path (each
--- in a coroutine of its own; the loop goes on)
function _M.refill(lang)
    while not S.closing and (S.warm_count[lang] or 0) < _M.warm_target(lang) do
        local before = S.warm_count[lang] or 0
        local co = coroutine.create(function()
            local w = _M.start_warm(lang)
            if w then _M.give_back(w) end
        end)
        local ok, err = coroutine.resume(co)
        if not ok then log("starting a warm %s worker failed: %s", lang, tostring(err)) end
        -- (a worker that could not even be spawned leaves the count as it was: stop here)
        if (S.warm_count[lang] or 0) <= before then return end
    end
end

--- prewarm(): starts one warm Python worker ahead of the first call
function _M.prewarm()
    if S.cfg.warm <= 0 or not _M.warm_capable("python") then return end
    local co = coroutine.create(function()
        local w = _M.start_warm("python")
        if w then _M.give_back(w) end
    end)
    local ok, err = coroutine.resume(co)
    if not ok then log("prewarming failed: %s", tostring(err)) end
end

--- setup(log [, env [, exe]]) -> true | nil: a server of workers' state from the environment
--- (llmbox.mcp.config: SANDBOX_*, LLMBOX_POLICY, ...) and its private temporary directory; what
--- is wrong is logged, and nil means: do not start (exit 125)
function _M.setup(log_line, env, exe)
    local config = require "llmbox.mcp.config"
    local tmpdir = require "llmbox.mcp.tmpdir"
    local cfg, err, warnings = config.from_env(env)
    for _, warning in ipairs(cfg and cfg.warnings or warnings or {}) do log_line("warning: %s", warning) end
    if not cfg then
        for line in err:gmatch("[^\n]+") do log_line("configuration error: %s", line) end
        log_line("refusing to start; fix the environment variables above")
        return nil
    end
    for _, note in ipairs(cfg.notes) do log_line("note: %s", note) end
    S.cfg, S.exe = cfg, exe or uv.exepath()
    local dir, removed = tmpdir.create()
    if not dir then
        log_line("%s; set TMPDIR to a directory this user can write to", tostring(removed))
        return nil
    end
    S.tmpdir = dir
    for _, name in ipairs(removed) do log_line("removed %s, left by a server that no longer runs", name) end
    return true
end

--- run_loop(shutdown, log): what a server of workers (`llmbox mcp`, `llmbox serve`) runs until
--- it stops: SIGTERM and SIGINT call shutdown(), every child is reaped (also the orphans of
--- killed workers, and all of them when it is pid 1), a write to a client that is gone fails with
--- EPIPE instead of killing it before it can clean up (a handler, unlike SIG_IGN, is not
--- inherited by the workers), one warm Python worker is started, and the loop runs.
function _M.run_loop(shutdown, log_line)
    for _, signame in ipairs({ "sigterm", "sigint" }) do
        local sig = uv.new_signal()
        sig:start(signame, function() log_line("%s, stopping", signame); shutdown() end)
        sig:unref()
    end
    require("llmbox.mcp.reaper").start(function(pid) return S.worker_pids[pid] ~= nil end)
    local sigpipe = uv.new_signal()
    sigpipe:start("sigpipe", function() end)
    sigpipe:unref()
    _M.prewarm()
    uv.run("default")
end

--- stop(on_stopped): closes idle warm workers, gives the others a moment to close their
-- sessions, then kills what is left; on_stopped() when none is left or after 3.5 s
function _M.stop(on_stopped)
    for _, idle in pairs(S.warm_idle) do
        for _, w in ipairs(idle) do w:close() end
    end
    S.warm_idle = {}
    local t = uv.new_timer()
    local waited = 0
    t:start(50, 50, function()
        waited = waited + 50
        if next(S.workers) == nil or waited >= 3000 then
            for w in pairs(S.workers) do w:kill("the server is stopping") end
            if next(S.workers) == nil or waited >= 3500 then
                t:close()
                on_stopped()
            end
        end
    end)
end

return _M

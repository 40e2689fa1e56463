-- Stepped tasks: work written as plain blocking code (a container engine's calls: HTTP requests,
-- exec streams, short sleeps) run in a coroutine, so that an event loop can drive it without
-- ever blocking — the contract every driver's open_start and reset_start keep:
--
--   local t = task.new(fn, ...)
--   repeat
--       local fds, events, timeout_ms = t:fds()   -- what to watch, and when the next step is due
--       ...                                       -- the caller's poll over these and its own
--   until t:step(0)                               -- does what is ready, never waits
--   local a, b, c = t:result()                    -- fn's results
--
-- Inside the task, every wait goes through task.await (llmbox.http's client and streams,
-- util.sleep_ms): it yields to the caller with what it waits for instead of waiting. Outside a
-- task, await returns false and the caller blocks as before.
local util = require "llmbox.util"

local setmetatable, select, unpack, tostring = setmetatable, select, unpack, tostring
local co_create, co_resume, co_yield, co_running, co_status =
    coroutine.create, coroutine.resume, coroutine.yield, coroutine.running, coroutine.status
local max, floor = math.max, math.floor

local _M = {}

-- The running tasks, by coroutine (weak: a task nobody holds any more goes).
local by_co = setmetatable({}, { __mode = "k" })

local Task = {}
Task.__index = Task

--- task.new(fn, ...) -> task: fn(...) run in steps; nothing runs before the first step
function _M.new(fn, ...)
    local args, n = { ... }, select("#", ...)
    local t = setmetatable({}, Task)
    t.co = co_create(function() return fn(unpack(args, 1, n)) end)
    by_co[t.co] = t
    return t
end

--- task.await(what) -> true (waited, inside a task) | false (not in a task: wait yourself).
--- what: { client = c } (an llmbox.http client's requests), { stream = raw, events = "r" | "w",
--- deadline = ms } (a raw stream's readiness), or { deadline = ms } alone (a sleep); deadlines
--- are util.now_ms() values.
function _M.await(what)
    local co = co_running()
    local t = co and by_co[co]
    if not t then return false end
    t.waiting = what
    co_yield()
    return true
end

local function remaining(deadline)
    if not deadline then return nil end
    return max(0, floor(deadline - util.now_ms()))
end

--- t:fds() -> fds, events, timeout_ms | nil: what the task waits for
function Task:fds()
    local w = self.waiting
    if self.finished or not w then return {}, {}, 0 end
    if w.client then return w.client:fds() end
    if w.stream then
        local fd = w.stream:fd()
        if fd then return { fd }, { w.events }, remaining(w.deadline) end
        return {}, {}, 0
    end
    return {}, {}, remaining(w.deadline)
end

--- t:step(wait_ms) -> done: waits at most wait_ms (0: not at all, -1: until what the task waits
--- for is ready) and then lets the task run to its next wait or its end
function Task:step(wait_ms)
    if self.finished then return true end
    wait_ms = wait_ms or 0
    local w = self.waiting
    if w then
        local left = remaining(w.deadline)
        local ms = wait_ms
        if left and (ms < 0 or left < ms) then ms = left end
        if w.client then
            w.client:step(ms)
        elseif w.stream and w.stream:fd() then
            if ms ~= 0 then w.stream:wait(w.events, ms) end
        elseif ms > 0 then
            util.sleep_ms(ms)
        end
    end
    self.waiting = nil
    local ok, a, b, c = co_resume(self.co)
    if not ok then
        self.finished, self.res = true, { nil, "the task failed: " .. tostring(a) }
    elseif co_status(self.co) == "dead" then
        self.finished, self.res = true, { a, b, c }
    end
    return self.finished == true
end

--- t:result() -> what fn returned (driven to its end first, blocking)
function Task:result()
    while not self:step(-1) do end
    return unpack(self.res, 1, 3)
end

return _M

-- A pool served to several callers at once: `llmbox script examples/pool-workers.lua [N]`.
-- N coroutines (think: requests in a daemon) share a pool of 2 Python sandboxes. The pool hands
-- them out in arrival order; a caller that finds none free waits (its coroutine yields) until
-- one is ready for it. Each lease is a fresh sandbox whose interpreter started ahead of time.
local n = tonumber(arg[1]) or 4

-- A tiny scheduler: a queue of coroutines to resume, with the values to resume them with.
local runnable = {}
local function schedule(co, ...) runnable[#runnable + 1] = { co = co, n = select("#", ...), ... } end

-- The pool never runs a waiter itself: it hands it back to this scheduler (resume hook).
local p = assert(llmbox.pool{ lang = "python", min = 2, max = 2, resume = schedule })
local order = {}
for i = 1, n do
    schedule(coroutine.create(function()
        local s = assert(llmbox.session{ pool = p }) -- may wait: yields until a sandbox is ready
        local r = assert(s:run(("print('caller %d:', sum(range(%d)))"):format(i, i * 10)))
        order[#order + 1] = r.stdout:gsub("\n$", "") .. (r.warm and " (warm)" or "")
        coroutine.yield("hold") -- hold the lease for a moment, as a real request would
        s:close()               -- back to the pool; the refill waits for maintain()
    end))
end
local waited = 0
while #runnable > 0 do
    local job = table.remove(runnable, 1)
    local ok, what = coroutine.resume(job.co, unpack(job, 1, job.n))
    assert(ok, what)
    if what == require("llmbox.pool").WAITING then
        waited = waited + 1 -- the pool will hand it back through `schedule`
    elseif coroutine.status(job.co) == "suspended" then
        schedule(job.co) -- it yielded for another reason: resume it later
    end
    if #runnable == 0 then p:maintain() end -- idle: refill, and wake the next waiter
end
for _, line in ipairs(order) do print(line) end
print(("%d callers, %d waited, %d sandboxes created"):format(n, waited, p:stats().created))
p:close()

-- A pool served to several callers at once: `llmbox script examples/pool-workers.lua [N]`.
-- N coroutines (think: requests in a daemon) share a pool of 2 Python sandboxes. The pool hands
-- them out in arrival order; a caller that finds none free waits (its coroutine yields) until
-- one comes back. Each lease is a fresh sandbox whose interpreter started ahead of time.
local n = tonumber(arg[1]) or 4

local p = assert(llmbox.pool{ lang = "python", min = 2, max = 2 })
local callers, busy, order = {}, {}, {}
for i = 1, n do
    callers[i] = coroutine.create(function()
        local s = assert(llmbox.session{ pool = p }) -- may wait: yields until a lease comes back
        local r = assert(s:run(("print('caller %d:', sum(range(%d)))"):format(i, i * 10)))
        order[#order + 1] = r.stdout:gsub("\n$", "") .. (r.warm and " (warm)" or "")
        busy[i] = true
        coroutine.yield() -- hold the lease for a moment, as a real request would
        busy[i] = nil
        s:close()         -- the first waiting caller gets a sandbox now
    end)
end
-- A tiny scheduler: start everyone, then resume callers that hold a lease until all are done.
-- (Waiting callers are resumed by the pool itself when a lease is returned.)
for i = 1, n do assert(coroutine.resume(callers[i])) end
local waited = p:stats().waiting
repeat
    local progressed = false
    for i = 1, n do
        if busy[i] then
            assert(coroutine.resume(callers[i]))
            progressed = true
        end
    end
until not progressed
for _, line in ipairs(order) do print(line) end
local st = p:stats()
print(("%d callers, %d waited, %d sandboxes created"):format(n, waited, st.created))
p:close()

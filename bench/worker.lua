-- One benchmark worker process, started by bench/bench.lua:
--
--   llmbox script bench/worker.lua MODE [N]
--
-- MODE bare | cold | pooled: prepares (a pooled worker builds and prewarms its own pool), prints
-- "ready", waits for "go START_MS END_MS" on stdin (the start barrier; times are CLOCK_MONOTONIC
-- ms, which all processes share), then starts fresh Python sandboxes running print(1) one after
-- another until END_MS and prints "result OK FAILED FIRST_MS LAST_MS".
--   bare:   /usr/bin/python3 -c 'print(1)' processes (the floor)
--   cold:   llmbox.session{ lang = "python" } + run + close
--   pooled: llmbox.session{ pool = p } + run + close + maintain (the refill, so its cost counts)
--
-- MODE mem N: a pool of N prewarmed sandboxes; once all are ready, prints one JSON line with the
-- Pss of this process and of every process below it (the pool's sandboxes).
--
-- MODE host N: a pool host making N runs: leases of a pool of one sandbox, reused (warm = false,
-- max_uses above N: each lease is emptied by maintain(), as the pool does), each running `true`;
-- prints one JSON line with this process's RSS after 200 runs, after N/2 and after N, its peak
-- (VmHWM) and how many runs failed.
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local B = require "common"
local json = require "cjson"

local mode, n = arg[1], tonumber(arg[2] or "0")
local now = B.now_ms

local function fail(msg)
    io.stderr:write("bench worker (", tostring(mode), "): ", msg, "\n")
    os.exit(1)
end

local function wait_ready(p, max_ms)
    local t0 = now()
    while p:stats().starting > 0 do
        if now() - t0 > max_ms then return false end
        B.sleep_ms(2)
    end
    return true
end

if mode == "mem" then
    local p, err = llmbox.pool({ lang = "python", min = n, max = n })
    if not p then fail(tostring(err)) end
    if not wait_ready(p, 30000) then fail("the pool's interpreters did not start within 30 s") end
    B.sleep_ms(300) -- let the interpreters settle (page faults of the import finish)
    local st = p:stats()
    local me = B.getpid()
    local procs, total = {}, 0
    local info = require("llmbox.util").processes()
    for _, pid in ipairs(B.descendants(me)) do
        -- a run's init shares its parent's address space: its pages are counted with the parent
        local ppid = info[pid] and info[pid].ppid
        local shared = ppid ~= nil and ppid ~= me and B.same_vm(pid, ppid)
        local k = B.pss_kib(pid)
        if k then
            if shared then k = 0 end
            total = total + k
            procs[#procs + 1] = { pid = pid, comm = B.comm(pid), pss_kib = k, shares_parent_memory = shared or nil }
        end
    end
    -- each ready sandbox is at least its supervisor, its init and its interpreter: fewer means
    -- the processes were not found, and a sum of nothing must not pass for a small footprint
    if #procs < 3 * n then fail(("found %d processes for %d ready sandboxes"):format(#procs, n)) end
    io.stdout:write(json.encode({
        idle = st.idle, starting = st.starting, total = st.total,
        host_pss_kib = B.pss_kib(me), sandbox_pss_kib = total, processes = procs,
    }), "\n")
    io.stdout:flush()
    p:close()
    return 0
end

if mode == "host" then
    local p, err = llmbox.pool({ lang = "python", min = 1, max = 1, warm = false, max_uses = n + 1000 })
    if not p then fail(tostring(err)) end
    local failed = 0
    local function lease()
        local s, lerr = llmbox.session({ pool = p })
        local r = s and s:exec({ "true" })
        if s then s:close() end
        p:maintain()
        if not (r and r.exit_code == 0) then
            failed = failed + 1
            if failed <= 3 then io.stderr:write("bench worker (host): ", tostring(lerr or (r and r.stderr)), "\n") end
        end
    end
    for _ = 1, 200 do lease() end
    collectgarbage()
    local t0 = now()
    local rss = { B.status_kib("VmRSS") }
    for i = 1, n do
        lease()
        if i == math.floor(n / 2) or i == n then
            collectgarbage()
            rss[#rss + 1] = B.status_kib("VmRSS")
        end
    end
    io.stdout:write(json.encode({ runs = n, failed = failed, rss_kib = rss, hwm_kib = B.status_kib("VmHWM"),
        seconds = (now() - t0) / 1000 }), "\n")
    io.stdout:flush()
    p:close()
    return 0
end

local run_one, pool
if mode == "bare" then
    local argv = { "/usr/bin/python3", "-c", "print(1)" }
    run_one = function()
        local _, out, code = B.time_cmd(argv)
        return code == 0 and out == "1\n"
    end
elseif mode == "cold" then
    run_one = function()
        local s = llmbox.session({ lang = "python" })
        if not s then return false end
        local r = s:run("print(1)")
        s:close()
        return r ~= nil and r.exit_code == 0 and r.stdout == "1\n"
    end
elseif mode == "pooled" then
    local p, err = llmbox.pool({ lang = "python", min = 2, max = 4 })
    if not p then fail(tostring(err)) end
    if not wait_ready(p, 30000) then fail("the pool's interpreters did not start within 30 s") end
    pool = p
    run_one = function()
        local s = llmbox.session({ pool = p })
        if not s then return false end
        local r = s:run("print(1)")
        s:close()
        p:maintain() -- the refill: this worker is its own loop, so its cost counts
        return r ~= nil and r.exit_code == 0 and r.stdout == "1\n" and r.warm == true
    end
else
    fail("unknown mode (bare, cold, pooled, mem)")
end

io.stdout:write("ready\n")
io.stdout:flush()
local line = io.read("*l")
local start, stop = (line or ""):match("^go (%S+) (%S+)$")
start, stop = tonumber(start), tonumber(stop)
if not start then fail("no go line on stdin") end
while now() < start do B.sleep_ms(1) end
local ok, failed = 0, 0
local first = now()
while now() < stop do
    if run_one() then ok = ok + 1 else failed = failed + 1 end
end
local last = now()
io.stdout:write(string.format("result %d %d %.3f %.3f\n", ok, failed, first, last))
io.stdout:flush()
if pool then pool:close() end
return 0

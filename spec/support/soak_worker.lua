-- One soak worker: `llmbox script spec/support/soak_worker.lua RUNS [POLICY] [leak]`. Runs RUNS
-- fresh sandboxes in a row, a mix of normal runs and runs ended by limits and timeouts, and prints
-- one JSON line: counts by outcome, unexpected results, and this process's fds and memory at 10%
-- and at the end. Its sandboxes carry LLMBOX_SOAK from its environment, so that what they leave
-- can be told from other users' (soak_lib.lua). `leak` leaves a process and a cgroup behind on
-- purpose, as a control for that accounting.
local cjson = require "cjson"
local core = require "llmbox.core"

local runs = tonumber(arg[1]) or 100
local policy = (arg[2] or "") ~= "" and arg[2] or "spec/fixtures/policies/default-nochecks.lua"
local env = { LLMBOX_SOAK = os.getenv("LLMBOX_SOAK") }

local function fds() return #core.listdir("/proc/self/fd") end
local function rss_kb()
    local f = io.open("/proc/self/status")
    local text = f:read("*a")
    f:close()
    return tonumber(text:match("VmRSS:%s+(%d+)"))
end

-- kind -> code, run options, predicate on the result
local kinds = {
    { "ok", "print(sum(range(1000)))", {}, function(r) return r.exit_code == 0 and r.stdout == "499500\n" end },
    { "fail", "raise SystemExit(3)", {}, function(r) return r.exit_code == 3 end },
    { "timeout", "import time; time.sleep(30)", { timeout = 0.3 }, function(r) return r.limit == "timeout" end },
    { "output", "import sys\nwhile True: sys.stdout.write('x' * 65536)", { output = 100000 },
        function(r) return r.limit == "output" and #r.stdout == 100000 end },
    { "memory", "x = bytearray(300 * 1024 * 1024)", { memory = 64 * 1024 * 1024 },
        function(r) return r.exit_code ~= 0 end },
    { "daemon", "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        import time; time.sleep(600)\nprint('bye')",
        {}, function(r) return r.exit_code == 0 end },
}

local counts, bad = {}, {}
local early_fds, early_rss
for i = 1, runs do
    local k = kinds[(i - 1) % #kinds + 1]
    local s, err = llmbox.session({ lang = "python", policy = policy, env = env })
    if not s then
        bad[#bad + 1] = "session: " .. tostring(err)
    else
        local r, rerr = s:run(k[2], k[3])
        s:close()
        if not r then
            bad[#bad + 1] = k[1] .. ": " .. tostring(rerr)
        elseif not k[4](r) then
            bad[#bad + 1] = ("%s: exit %s limit %s stderr %s"):format(k[1], tostring(r.exit_code), tostring(r.limit), r.stderr:sub(1, 200))
        end
    end
    counts[k[1]] = (counts[k[1]] or 0) + 1
    if i == math.max(1, math.floor(runs / 10)) then
        collectgarbage("collect")
        early_fds, early_rss = fds(), rss_kb()
    end
end
collectgarbage("collect")
if arg[3] == "leak" then
    -- a process (it inherits LLMBOX_SOAK), in a cgroup named after this worker where root may
    -- make one: with a process in it, nobody's sweep of stale cgroups can remove it
    local f = io.open("/proc/self/stat")
    local cg = "/sys/fs/cgroup/pids/llmbox/run-" .. f:read("*a"):match("^%d+") .. "-leak"
    f:close()
    os.execute(("mkdir %s 2>/dev/null; sh -c 'echo $$ > %s/cgroup.procs 2>/dev/null; exec sleep 60' "
        .. "</dev/null >/dev/null 2>&1 &"):format(cg, cg))
end
io.write(cjson.encode({ counts = counts, bad = bad, early_fds = early_fds, end_fds = fds(),
    early_rss_kb = early_rss, end_rss_kb = rss_kb() }), "\n")

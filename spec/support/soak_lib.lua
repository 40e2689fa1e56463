-- The soak: N workers, each running M fresh sandboxes (spec/support/soak_worker.lua), all at
-- once; then the host must be as it was: no process, mount, cgroup or temporary file left, and
-- each worker's fds and memory flat.
local cjson = require "cjson"
local core = require "llmbox.core"

local _M = {}

local function lines(cmd)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
end

-- What a leak would change: sandbox processes (uid of the sandbox on the host), mounts seen by
-- this process, per-run cgroups, llmbox temporary files in /tmp.
function _M.host_state()
    local uid = lines("id -u"):gsub("%s", "")
    local sandbox_uid = uid == "0" and (os.getenv("LLMBOX_HOST_UID") or "65534") or nil
    local procs = sandbox_uid and lines("ps -o pid= -u " .. sandbox_uid .. " | wc -l"):gsub("%s", "") or "n/a"
    local cgroups = 0
    for _, base in ipairs({ "/sys/fs/cgroup/memory/llmbox", "/sys/fs/cgroup/pids/llmbox", "/sys/fs/cgroup/llmbox" }) do
        for _, name in ipairs(core.listdir(base) or {}) do
            if name:match("^run%-") then cgroups = cgroups + 1 end
        end
    end
    local mounts = #lines("cat /proc/self/mountinfo"):gsub("[^\n]", "")
    local tmp = 0
    for _, name in ipairs(core.listdir("/tmp") or {}) do
        if name:match("llmbox%-%d+$") then tmp = tmp + 1 end
    end
    return { sandbox_procs = procs, cgroups = cgroups, mounts = mounts, tmp_files = tmp }
end

function _M.run(workers, runs, bin)
    bin = bin or "build/bin/llmbox"
    local before = _M.host_state()
    local outs = {}
    for w = 1, workers do
        outs[w] = os.tmpname()
        os.execute(("%s script spec/support/soak_worker.lua %d > %s 2>&1 &"):format(bin, runs, outs[w]))
    end
    -- wait for every worker (each writes its JSON line last)
    local deadline = os.time() + 60 + runs * workers / 5
    local results = {}
    while os.time() < deadline do
        local done = 0
        for w = 1, workers do
            local f = io.open(outs[w])
            local text = f and f:read("*a") or ""
            if f then f:close() end
            local line = text:match("({.-})%s*$")
            if line then results[w] = cjson.decode(line); done = done + 1 end
        end
        if done == workers then break end
        os.execute("sleep 0.5")
    end
    -- the kernel tears the last namespaces down asynchronously: give it a few seconds
    local after
    for _ = 1, 20 do
        after = _M.host_state()
        local same = true
        for k, v in pairs(before) do if after[k] ~= v then same = false end end
        if same then break end
        os.execute("sleep 0.25")
    end
    local problems, counts = {}, {}
    for w = 1, workers do
        local r = results[w]
        if not r then
            local f = io.open(outs[w])
            problems[#problems + 1] = ("worker %d did not finish: %s"):format(w, f and f:read("*a"):sub(1, 300) or "")
            if f then f:close() end
        else
            for k, n in pairs(r.counts) do counts[k] = (counts[k] or 0) + n end
            for _, b in ipairs(r.bad) do problems[#problems + 1] = ("worker %d: %s"):format(w, b) end
            if r.end_fds > r.early_fds then
                problems[#problems + 1] = ("worker %d: fds grew from %d to %d"):format(w, r.early_fds, r.end_fds)
            end
            if r.end_rss_kb > r.early_rss_kb + 2048 then
                problems[#problems + 1] = ("worker %d: memory grew from %d to %d KiB"):format(w, r.early_rss_kb, r.end_rss_kb)
            end
        end
        os.remove(outs[w])
    end
    for k, v in pairs(before) do
        if after[k] ~= v then
            problems[#problems + 1] = ("host %s: %s before, %s after"):format(k, tostring(v), tostring(after[k]))
        end
    end
    return { workers = workers, runs = runs, counts = counts, problems = problems, before = before,
        after = after, results = results }
end

function _M.describe(rep)
    local total = 0
    for _, n in pairs(rep.counts) do total = total + n end
    local parts = {}
    for k, n in pairs(rep.counts) do parts[#parts + 1] = k .. "=" .. n end
    table.sort(parts)
    local out = { ("soak: %d workers x %d runs = %d sandboxes (%s)"):format(rep.workers, rep.runs, total, table.concat(parts, " ")),
        ("host before: %s"):format(cjson.encode(rep.before)), ("host after:  %s"):format(cjson.encode(rep.after)) }
    for _, r in ipairs(rep.results) do
        out[#out + 1] = ("worker fds %d -> %d, rss %d -> %d KiB"):format(r.early_fds, r.end_fds, r.early_rss_kb, r.end_rss_kb)
    end
    for _, p in ipairs(rep.problems) do out[#out + 1] = "PROBLEM: " .. p end
    return table.concat(out, "\n")
end

return _M

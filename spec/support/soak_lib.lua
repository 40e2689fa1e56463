-- The soak: N workers, each running M fresh sandboxes (spec/support/soak_worker.lua), all at
-- once; then nothing this soak created may be left: no process, per-run cgroup, jail mount or
-- temporary file, and each worker's fds and memory flat.
--
-- What is counted is what *this* soak made, never the host's totals: other users' sandboxes
-- start and finish meanwhile (other specs, other soaks), and their coming and going is not ours.
-- Ours are recognised by marks they cannot lose:
--   - processes: the soak's token in their environment (the workers have it, so every process
--     they fork has it too, and every sandboxed program gets it from the session's env), or
--     membership of one of our cgroups;
--   - cgroups: named run-PID-... after the process that made them, one of our workers;
--   - temporary files: named ...llmbox-PID, the same way.
local cjson = require "cjson"
local core = require "llmbox.core"

local _M = {}

local CGROUP_BASES = {
    "/sys/fs/cgroup/memory/llmbox", "/sys/fs/cgroup/pids/llmbox", "/sys/fs/cgroup/cpuacct/llmbox",
    "/sys/fs/cgroup/cpu/llmbox", "/sys/fs/cgroup/llmbox",
}

local util = require "llmbox.util"
local read = util.read_file

local function ours(name, pids)
    local pid = name:match("^run%-(%d+)%-") or name:match("llmbox%-(%d+)$")
    return pid ~= nil and pids[tonumber(pid)] == true
end

-- What is left of this soak: workers' pids (a set) and the token they and their sandboxes carry.
function _M.leftovers(pids, token)
    local procs, cgroups, tmp = {}, {}, {}
    for _, base in ipairs(CGROUP_BASES) do
        for _, name in ipairs(core.listdir(base) or {}) do
            if ours(name, pids) then cgroups[#cgroups + 1] = base .. "/" .. name end
        end
    end
    local mark = "LLMBOX_SOAK=" .. token
    for _, name in ipairs(core.listdir("/proc") or {}) do
        local pid = tonumber(name:match("^%d+$"))
        if pid then
            local env = read("/proc/" .. name .. "/environ") or ""
            local cg = read("/proc/" .. name .. "/cgroup") or ""
            local in_ours = false
            for run in cg:gmatch("/llmbox/(run%-%d+%-[^\n/]*)") do
                if ours(run, pids) then in_ours = true end
            end
            if (env .. "\0"):find(mark .. "\0", 1, true) or in_ours then
                local stat = read("/proc/" .. name .. "/stat") or ""
                procs[#procs + 1] = name .. " " .. (stat:match("%((.*)%)") or "?")
            end
        end
    end
    for _, name in ipairs(core.listdir("/tmp") or {}) do
        if ours(name, pids) then tmp[#tmp + 1] = "/tmp/" .. name end
    end
    -- a jail's mounts live in its own mount namespace: any in ours would be a broken setup
    local mounts = {}
    for line in (read("/proc/self/mountinfo") or ""):gmatch("[^\n]+") do
        if line:find(" /newroot", 1, true) or line:find(" /oldroot", 1, true) then mounts[#mounts + 1] = line end
    end
    return { processes = procs, cgroups = cgroups, tmp_files = tmp, mounts = mounts }
end

local function empty(left)
    for _, list in pairs(left) do if #list > 0 then return false end end
    return true
end

-- opts.leak: the workers leave a process and a cgroup behind on purpose (a control for the
-- accounting itself). opts.during: called once the workers have started.
function _M.run(workers, runs, bin, opts)
    bin = bin or "build/bin/llmbox"
    opts = opts or {}
    local token = ("%d-%d"):format(os.time(), math.random(1e9))
    local outs, pids = {}, {}
    local outdir = assert(util.private_dir("llmbox-soak"))
    for w = 1, workers do
        outs[w] = outdir .. "/worker-" .. w
        -- exec: the worker's pid is the one its cgroups and temporary files are named after
        local p = io.popen(("LLMBOX_SOAK=%s sh -c 'exec \"$0\" script spec/support/soak_worker.lua %d \"\" %s' %s > %s 2>&1 & echo $!")
            :format(token, runs, opts.leak and "leak" or "", bin, outs[w]))
        pids[tonumber(p:read("*l"))] = true
        p:close()
    end
    if opts.during then opts.during() end
    -- wait for every worker (each writes its JSON line last)
    local deadline = os.time() + 60 + runs * workers / 5
    local results = {}
    while os.time() < deadline do
        local done = 0
        for w = 1, workers do
            local line = (read(outs[w]) or ""):match("({.-})%s*$")
            if line then results[w] = cjson.decode(line); done = done + 1 end
        end
        if done == workers then break end
        os.execute("sleep 0.5")
    end
    -- the kernel tears the last namespaces down asynchronously: give it a few seconds
    local left
    for _ = 1, 20 do
        left = _M.leftovers(pids, token)
        if empty(left) then break end
        os.execute("sleep 0.25")
    end
    local problems, counts = {}, {}
    for w = 1, workers do
        local r = results[w]
        if not r then
            problems[#problems + 1] = ("worker %d did not finish: %s"):format(w, (read(outs[w]) or ""):sub(1, 300))
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
    end
    util.remove_tree(outdir)
    for _, kind in ipairs({ "processes", "cgroups", "tmp_files", "mounts" }) do
        for _, what in ipairs(left[kind]) do
            problems[#problems + 1] = ("left behind (%s): %s"):format(kind, what)
        end
    end
    local worker_pids = {}
    for pid in pairs(pids) do worker_pids[#worker_pids + 1] = pid end
    table.sort(worker_pids)
    return { workers = workers, runs = runs, counts = counts, problems = problems, left = left,
        results = results, worker_pids = worker_pids, token = token }
end

function _M.describe(rep)
    local total = 0
    for _, n in pairs(rep.counts) do total = total + n end
    local parts = {}
    for k, n in pairs(rep.counts) do parts[#parts + 1] = k .. "=" .. n end
    table.sort(parts)
    local out = { ("soak: %d workers x %d runs = %d sandboxes (%s)"):format(rep.workers, rep.runs, total, table.concat(parts, " ")),
        ("left behind by this soak (workers %s): %d processes, %d cgroups, %d temporary files, %d mounts"):format(
            table.concat(rep.worker_pids, " "), #rep.left.processes, #rep.left.cgroups, #rep.left.tmp_files,
            #rep.left.mounts) }
    for _, r in ipairs(rep.results) do
        out[#out + 1] = ("worker fds %d -> %d, rss %d -> %d KiB"):format(r.early_fds, r.end_fds, r.early_rss_kb, r.end_rss_kb)
    end
    for _, p in ipairs(rep.problems) do out[#out + 1] = "PROBLEM: " .. p end
    return table.concat(out, "\n")
end

return _M

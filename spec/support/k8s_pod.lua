-- A pod of the Kubernetes stand-in (spec/support/k8s_standin.py): one llmbox session on the
-- native backend for the pod's lifetime, whose execs the stand-in hands over one at a time as
-- JSON lines on stdin:
--   {"argv": [...], "stdin_fifo": "/run/standin/in-..."}   (the FIFO: when the exec has stdin)
-- and which answers on stdout, as the exec goes:
--   {"stream": "stdout" | "stderr", "data": "<base64>"} ... then {"exit": N} | {"error": "..."}
-- An exec whose client went away is stopped (its process tree killed) when the file CANCEL
-- appears, which the stand-in makes then. argv: MEMORY (bytes, the pod's limit; 0: the
-- policy's) CANCEL. An exec's own wall clock is the pod's lifetime, as in a cluster.
local llmbox = require "llmbox"
local session = require "llmbox.session"
local plan = require "llmbox.plan"
local json = require "llmbox.json"
local artifacts = require "llmbox.artifacts"

local memory, cancel = tonumber(arg[1]) or 0, arg[2]
-- the container's environment (argv[3]: JSON, the pod's env list): every exec gets it, as a
-- container runtime gives it to every process it starts in the container
local pod_env = {}
for _, e in ipairs(json.decode(arg[3] or "[]") or {}) do
    if type(e) == "table" and type(e.name) == "string" then pod_env[#pod_env + 1] = e.name .. "=" .. tostring(e.value or "") end
end
local policy = assert(session.load_policy("default"))
policy.limits.timeout = 24 * 3600
policy.limits.output = 1024 * 1024 * 1024
if memory > 0 then policy.limits.memory = memory end
-- the image every pod runs: the host's /usr, with every language's files (as the languages
-- image the specs build for the engines holds them all)
for _, recipe in ipairs(llmbox.langs()) do
    for _, m in ipairs(recipe.mounts or {}) do
        policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = m, dst = m, optional = true }
    end
end
-- the sizes of the pod's emptyDir volumes (argv[4], argv[5]: bytes, 0: the policy's)
local workspace, tmp = tonumber(arg[4]) or 0, tonumber(arg[5]) or 0
if workspace > 0 then policy.limits.workspace = workspace end
if tmp > 0 then policy.limits.tmp = tmp end
-- the execs' stdin FIFOs (argv[6]: the stand-in's directory for this pod), read-only inside
if arg[6] then policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = arg[6], dst = "/run/standin" } end
-- the pod's configMap volumes (argv[7]: JSON, [{src, dst}]), read-only as a kubelet mounts them
for _, m in ipairs(json.decode(arg[7] or "[]") or {}) do
    policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = m.src, dst = m.dst }
end

local s, err = llmbox.session{ backend = "native", policy = policy }
local function say(t)
    io.stdout:write(json.encode(t), "\n")
    io.stdout:flush()
end
if not s then
    say({ error = "the pod's sandbox: " .. tostring(err) })
    os.exit(1)
end
say({ ready = true })

local function cancelled()
    local f = io.open(cancel)
    if f then f:close() end
    return f ~= nil
end

local function exec(req)
    os.remove(cancel)
    local argv = req.argv
    if req.stdin_fifo then
        -- the exec's stdin as it streams in, through the FIFO the stand-in writes
        argv = { "/bin/sh", "-c", 'f=$1; shift; exec "$@" < "$f"', "sh", req.stdin_fifo }
        for _, a in ipairs(req.argv) do argv[#argv + 1] = a end
    end
    local spec, perr = plan.exec(s.policy, s.layout, s.env, argv, {})
    if not spec then return nil, perr end
    for _, kv in ipairs(pod_env) do spec.env[#spec.env + 1] = kv end
    local run, rerr = s.handle:start(spec)
    if not run then return nil, rerr end
    local over
    repeat
        over = run:step(50)
        local q = run:take()
        for i = 1, q and #q or 0, 2 do say({ stream = q[i], data = artifacts.base64(q[i + 1]) }) end
        if not over and cancelled() then run:abort("the exec's client went away") end
    until over
    local q = run:take()
    for i = 1, q and #q or 0, 2 do say({ stream = q[i], data = artifacts.base64(q[i + 1]) }) end
    return run:result()
end

for line in io.stdin:lines() do
    local req = json.decode(line)
    if type(req) ~= "table" or type(req.argv) ~= "table" then
        say({ error = "a request is {argv, stdin}" })
    else
        local res, rerr = exec(req)
        if res then
            say({ exit = res.exit_code or 128 + (res.signal or 9) })
        else
            say({ error = tostring(rerr) })
        end
    end
end
s:close()

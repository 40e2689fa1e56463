-- A pod of the Kubernetes stand-in (spec/support/k8s_standin.py): one llmbox session on the
-- native backend for the pod's lifetime, whose execs the stand-in hands over as JSON lines on
-- stdin, and which run side by side:
--   {"id": N, "argv": [...], "stdin_fifo": "/run/standin/in-...", "cancel": "/path"}
-- (the FIFO: when the exec has stdin) and which answers on stdout, as each exec goes:
--   {"id": N, "stream": "stdout" | "stderr", "data": "<base64>"} ... then {"id": N, "exit": N}
--   | {"id": N, "error": "..."}
-- An exec whose client went away is stopped (its process tree killed) when its file "cancel"
-- appears, which the stand-in makes then. argv: MEMORY (bytes, the pod's limit; 0: the
-- policy's). An exec's own wall clock is the pod's lifetime, as in a cluster.
local llmbox = require "llmbox"
local session = require "llmbox.session"
local plan = require "llmbox.plan"
local json = require "llmbox.json"
local artifacts = require "llmbox.artifacts"
local ffi = require "ffi"

local memory = tonumber(arg[1]) or 0
-- the container's environment (argv[2]: JSON, the pod's env list): every exec gets it, as a
-- container runtime gives it to every process it starts in the container
local pod_env = {}
for _, e in ipairs(json.decode(arg[2] or "[]") or {}) do
    if type(e) == "table" and type(e.name) == "string" then pod_env[#pod_env + 1] = e.name .. "=" .. tostring(e.value or "") end
end
local policy = assert(session.load_policy("default"))
policy.limits.timeout = 24 * 3600
policy.limits.output = 1024 * 1024 * 1024
if memory > 0 then policy.limits.memory = memory end
-- a container runtime's default profile leaves socket families to the pod (llmbox's filter in
-- it refuses what its policy does not name)
policy.syscalls.socket_families = require("llmbox.policy.schema").SOCKET_FAMILIES
-- the image every pod runs: the host's /usr, with every language's files (as the languages
-- image the specs build for the engines holds them all)
for _, recipe in ipairs(llmbox.langs()) do
    for _, m in ipairs(recipe.mounts or {}) do
        policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = m, dst = m, optional = true }
    end
end
-- the sizes of the pod's emptyDir volumes (argv[3], argv[4]: bytes, 0: the policy's)
local workspace, tmp = tonumber(arg[3]) or 0, tonumber(arg[4]) or 0
if workspace > 0 then policy.limits.workspace = workspace end
if tmp > 0 then policy.limits.tmp = tmp end
-- the execs' stdin FIFOs (argv[5]: the stand-in's directory for this pod), read-only inside
if arg[5] then policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = arg[5], dst = "/run/standin" } end
-- a container's /sys: the node's, read-only, its cgroups hidden (an empty directory over
-- /sys/fs/cgroup: the host's would tell of the whole machine's, not the pod's)
local empty = os.tmpname()
os.remove(empty)
assert(os.execute("mkdir -m 0755 " .. empty) == 0)
policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = "/sys", dst = "/sys" }
policy.filesystem.ro[#policy.filesystem.ro + 1] = { src = empty, dst = "/sys/fs/cgroup" }
-- the pod's configMap volumes (argv[6]: JSON, [{src, dst}]), read-only as a kubelet mounts them
for _, m in ipairs(json.decode(arg[6] or "[]") or {}) do
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

-- Execs run side by side, as a container runtime runs them: one loop polls stdin (requests)
-- and every running exec's descriptors, and steps what is ready.
ffi.cdef [[
struct pollfd { int fd; short events; short revents; };
int poll(struct pollfd *fds, unsigned long nfds, int timeout);
long read(int fd, void *buf, unsigned long count);
]]
local POLLIN, POLLOUT = 1, 4
local running = {} -- id -> { run, cancel }

local function flush(id, run)
    local q = run:take()
    for i = 1, q and #q or 0, 2 do say({ id = id, stream = q[i], data = artifacts.base64(q[i + 1]) }) end
end

local function start(req)
    local argv = req.argv
    if req.stdin_fifo then
        -- the exec's stdin as it streams in, through the FIFO the stand-in writes
        argv = { "/bin/sh", "-c", 'f=$1; shift; exec "$@" < "$f"', "sh", req.stdin_fifo }
        for _, a in ipairs(req.argv) do argv[#argv + 1] = a end
    end
    local spec, perr = plan.exec(s.policy, s.layout, s.env, argv, {})
    if not spec then return nil, perr end
    for _, kv in ipairs(pod_env) do spec.env[#spec.env + 1] = kv end
    return s.handle:start(spec)
end

local function finish(id, x)
    flush(id, x.run)
    local res, rerr = x.run:result()
    running[id] = nil
    if res then
        say({ id = id, exit = res.exit_code or 128 + (res.signal or 9) })
    else
        say({ id = id, error = tostring(rerr) })
    end
end

local function request(line)
    local req = json.decode(line)
    if type(req) ~= "table" or type(req.argv) ~= "table" then
        say({ id = type(req) == "table" and req.id or nil, error = "a request is {id, argv, stdin_fifo, cancel}" })
        return
    end
    local run, serr = start(req)
    if not run then
        say({ id = req.id, error = tostring(serr) })
        return
    end
    running[req.id] = { run = run, cancel = req.cancel }
end

local buf, open = ffi.new("char[65536]"), true
local pending_line = ""
while open or next(running) do
    local fds, timeout = {}, 1000
    if open then fds[1] = 0 end
    for _, x in pairs(running) do
        local rf, ev, t = x.run:fds()
        for i, fd in ipairs(rf) do fds[#fds + 1] = { fd = fd, ev = ev[i] } end
        if t and t < timeout then timeout = t end
        -- (a cancelled exec is looked for every 50 ms)
        if timeout > 50 then timeout = 50 end
    end
    local n = #fds
    local pf = ffi.new("struct pollfd[?]", math.max(n, 1))
    for i = 1, n do
        local f = fds[i]
        if type(f) == "number" then
            pf[i - 1].fd, pf[i - 1].events = f, POLLIN
        else
            pf[i - 1].fd = f.fd
            pf[i - 1].events = (f.ev:find("r") and POLLIN or 0) + (f.ev:find("w") and POLLOUT or 0)
        end
    end
    ffi.C.poll(pf, n, timeout)
    if open and pf[0].revents ~= 0 then
        local got = tonumber(ffi.C.read(0, buf, 65536))
        if got <= 0 then
            -- the stand-in is gone (or deleted the pod): so are the pod's processes, its main
            -- process (which never ends by itself) included
            open = false
            for _, x in pairs(running) do x.run:abort("the pod was deleted") end
        else
            pending_line = pending_line .. ffi.string(buf, got)
            while true do
                local nl = pending_line:find("\n", 1, true)
                if not nl then break end
                local line = pending_line:sub(1, nl - 1)
                pending_line = pending_line:sub(nl + 1)
                request(line)
            end
        end
    end
    for id, x in pairs(running) do
        if x.cancel then
            local f = io.open(x.cancel)
            if f then
                f:close()
                os.remove(x.cancel)
                x.run:abort("the exec's client went away")
            end
        end
        local over = x.run:step(0)
        if over then finish(id, x) else flush(id, x.run) end
    end
end
s:close()
os.remove(empty)

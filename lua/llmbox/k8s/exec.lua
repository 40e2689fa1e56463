-- Exec in a pod over the websocket channel protocol (llmbox.k8s.channel), with libwebsockets
-- underneath (llmbox.ws_core: libcurl here speaks no websockets). v5.channel.k8s.io is offered
-- first, v4 after it; stdin can be ended on v5 only. An exec has the interface of a container
-- engine's (llmbox.engine: send, close_stdin, peek, abandon, finish), so the run machinery of the
-- engines' driver serves pods unchanged (llmbox.backends.kubernetes).
--
-- The API server gives an exec no environment, working directory or user: the command runs as
-- the pod's user, in the container's directory and environment (the kubernetes driver's starter
-- sets a run's own). Every wait yields to the caller's loop inside a task (llmbox.task). TLS is
-- always verified.
local ws_core = require "llmbox.ws_core"
local channel = require "llmbox.k8s.channel"
local task = require "llmbox.task"
local util = require "llmbox.util"

local setmetatable, ipairs, tostring, tonumber, format, concat = setmetatable, ipairs, tostring, tonumber,
    string.format, table.concat
local max, floor = math.max, math.floor

local _M = {}

local engine = require "llmbox.engine"

-- What an exec's on_output returns to stop reading (as llmbox.engine's STOP).
_M.STOP = engine.STOP

-- stdin goes in messages of at most this much.
local CHUNK = 256 * 1024

-- How long a connection and its upgrade may take.
local CONNECT_TIMEOUT_S = 15

local escape = util.url_encode

--- exec.path(ns, pod, container, argv, stdin) -> the exec request's path and query
function _M.path(ns, pod, container, argv, stdin)
    local q = { "container=" .. escape(container), "stdout=true", "stderr=true", "stdin=" .. tostring(stdin == true) }
    for _, a in ipairs(argv) do q[#q + 1] = "command=" .. escape(a) end
    return format("/api/v1/namespaces/%s/pods/%s/exec?%s", escape(ns), escape(pod), concat(q, "&"))
end

local Exec = {}
Exec.__index = Exec

-- The loop's view of the connection (llmbox.task's { client = ... }: fds and step).
local Waiter = {}
Waiter.__index = Waiter
function Waiter:fds()
    if not self.ws then return {}, {}, 0 end
    return self.ws:fds()
end
function Waiter:step(ms)
    if self.ws then self.ws:step(ms) end
end

-- Waits for the connection's next event, at most ms (nil: until something happens).
function Exec:wait(ms)
    local ws = self.ws
    if not ws then return end
    if ms == 0 then
        ws:step(0)
        return
    end
    local _, _, due = ws:fds()
    if not task.await({ client = self.waiter, deadline = ms and util.now_ms() + ms }) then
        local wait = ms or -1
        if due and due >= 0 and (wait < 0 or due < wait) then wait = due end
        ws:step(wait)
    else
        ws:step(0)
    end
end

-- Takes the messages that arrived: output into self.out/self.err lists, the status kept.
function Exec:drain()
    local ws = self.ws
    if not ws then return end
    while true do
        local msg = ws:take()
        if not msg then return end
        local name, data = channel.parse(msg)
        if name == "stdout" or name == "stderr" then
            if #data > 0 then
                local q = self.queue
                q[#q + 1] = name
                q[#q + 1] = data
            end
        elseif name == "error" then
            if #data > 0 then self.status = data end
        end
    end
end

--- x:send(data) -> true | nil, err: more of the exec's stdin
function Exec:send(data)
    if not self.ws then return nil, "the exec was abandoned" end
    for i = 1, #data, CHUNK do
        local ok, err = self.ws:send(channel.frame(channel.STDIN, data:sub(i, i + CHUNK - 1)))
        if not ok then return nil, "sending the exec's stdin: " .. tostring(err), "EPIPE" end
    end
    return true
end

--- x:close_stdin() -> true | nil, err: the exec's stdin ends (v5.channel.k8s.io only)
function Exec:close_stdin()
    if not self.ws then return nil, "the exec was abandoned" end
    local payload, err = channel.close_stdin(self.protocol)
    if not payload then return nil, err, "EOPNOTSUPP" end
    return self.ws:send(payload)
end

-- Output in the queue, as stdout and stderr strings (the queue emptied).
function Exec:take_queue()
    local o, e = {}, {}
    local q = self.queue
    for i = 1, #q, 2 do
        local list = q[i] == "stdout" and o or e
        list[#list + 1] = q[i + 1]
    end
    self.queue = {}
    return concat(o), concat(e)
end

--- x:peek(ms) -> stdout, stderr | nil, "eof" | nil, err: output that arrived within ms
function Exec:peek(ms)
    if not self.ws then return nil, "the exec was abandoned" end
    self:wait(ms)
    self:drain()
    local state = self.ws:step(0)
    self:drain()
    if #self.queue == 0 and (state == "closed" or state == "failed") then return nil, "eof" end
    return self:take_queue()
end

--- x:abandon(): drops the connection; what the command started is the caller's to stop (the
--- API server does not stop an exec whose client went away)
function Exec:abandon()
    if self.ws then
        self.ws:discard()
        self.ws = nil
        self.waiter.ws = nil
    end
end

--- x:finish({ timeout_ms, on_stop, exit_code }, on_output) -> { exit_code, stdout, stderr,
--- stopped } | nil, err: reads the output to the exec's end, as llmbox.engine's exec does: the
--- exit status from the error channel; stopped after timeout_ms or when on_output returns STOP
--- (then on_stop(why) is called once the connection is dropped, and the exit code is unknown)
function Exec:finish(cmd, on_output)
    if not self.ws then return nil, "the exec was abandoned" end
    local deadline = cmd.timeout_ms and util.now_ms() + cmd.timeout_ms
    local kept = engine.output_keeper(on_output)
    local out, errs = kept.stdout, kept.stderr
    local stopped
    local function keep_queue()
        local q = self.queue
        self.queue = {}
        for i = 1, #q, 2 do kept:keep(q[i], q[i + 1]) end
        stopped = stopped or kept.stopped
    end
    local state
    repeat
        self:drain()
        keep_queue()
        state = self.ws:step(0)
        if state == "closed" or state == "failed" then
            self:drain()
            keep_queue()
            break
        end
        -- the status is the exec's last word: its output came before it (the close that
        -- follows is not waited for)
        if self.status then break end
        if not stopped and deadline and util.now_ms() >= deadline then stopped = "timeout" end
        if not stopped then
            self:wait(deadline and max(0, floor(deadline - util.now_ms())) or nil)
        end
    until stopped
    local why = state == "failed" and (self.ws:error()) or nil
    self:abandon()
    if stopped then
        if cmd.on_stop then cmd.on_stop(stopped) end
        return { stdout = concat(out), stderr = concat(errs), stopped = stopped }
    end
    local said = cmd.exit_code and cmd.exit_code()
    local code, serr
    if self.status then
        code, serr = channel.exit_status(self.status)
    end
    if said then code = said end
    if not code then
        return nil, serr or format("the exec's stream to pod %s ended before the command did (%s): the pod may have "
            .. "been deleted or evicted, or the connection to the API server dropped", self.pod,
            tostring(why or "no exit status came")), "EPIPE"
    end
    return { exit_code = code, stdout = concat(out), stderr = concat(errs) }
end

--- exec.start(conn, { namespace, pod, container, argv, stdin }, explain) -> exec |
--- nil, err, code: connects and upgrades; stdin, when not nil, is sent first and kept open for
--- more (x:send, x:close_stdin). explain(status) -> message: what the API server says when it
--- refuses the upgrade (asked again over plain HTTP, which carries its reason).
function _M.start(conn, cmd, explain)
    local argv = cmd.argv
    local scheme, host, port, prefix = conn.server:match("^(https?)://([^/:]+):?(%d*)(.*)$")
    if not scheme then return nil, "the API server's address is not a URL: " .. tostring(conn.server), "EINVAL" end
    host = host:gsub("^%[(.*)%]$", "%1")
    port = tonumber(port) or (scheme == "https" and 443 or 80)
    local path = prefix:gsub("/$", "") .. _M.path(cmd.namespace, cmd.pod, cmd.container, argv, cmd.stdin ~= nil)
    local headers = conn.token and ("Authorization: Bearer " .. conn.token .. "\n") or nil
    local ws, err, code = ws_core.open({ host = host, port = port, path = path, tls = scheme == "https",
        protocols = concat(channel.PROTOCOLS, ","), headers = headers, ca_pem = conn.ca, cert_pem = conn.cert,
        key_pem = conn.key, connect_timeout_s = CONNECT_TIMEOUT_S })
    if not ws then return nil, "exec in pod " .. cmd.pod .. ": " .. tostring(err), code end
    local x = setmetatable({ ws = ws, waiter = setmetatable({ ws = ws }, Waiter), queue = {}, pod = cmd.pod }, Exec)
    local give_up = util.now_ms() + CONNECT_TIMEOUT_S * 1000
    local state = ws:step(0)
    while state == "connecting" and util.now_ms() < give_up do
        x:wait(max(1, give_up - util.now_ms()))
        state = ws:step(0)
    end
    if state ~= "open" then
        local why, http_status = ws:error()
        x:abandon()
        if http_status and http_status >= 400 and explain then
            return nil, explain(http_status, path), http_status
        end
        return nil, format("exec in pod %s: the API server at %s did not take the exec: %s", cmd.pod, conn.server,
            state == "connecting" and format("no answer within %d s", CONNECT_TIMEOUT_S) or tostring(why)),
            state == "connecting" and "ETIMEDOUT" or "ECONNREFUSED"
    end
    x.protocol = ws:protocol()
    if cmd.stdin ~= nil and #cmd.stdin > 0 then
        local ok, serr, scode = x:send(cmd.stdin)
        if not ok then
            x:abandon()
            return nil, serr, scode
        end
    end
    return x
end

--- exec.run(conn, cmd, on_output, explain) -> { exit_code, stdout, stderr, stopped } | nil, err:
--- one command to its end (cmd as exec.start's, plus timeout_ms, on_stop, as x:finish's)
function _M.run(conn, cmd, on_output, explain)
    local x, err, code = _M.start(conn, cmd, explain)
    if not x then return nil, err, code end
    return engine.run_started(x, cmd, on_output)
end

return _M

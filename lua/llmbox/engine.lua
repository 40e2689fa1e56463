-- llmbox.engine: the container engines' API — Docker's Engine API and Podman's Docker-compatible
-- one — over llmbox.http. Where the engine is, whether it answers, and JSON requests whose
-- failures say what was wrong and what to do. The docker and podman backends build on it.
--
--   local engine = require "llmbox.engine"
--   local ep = assert(engine.endpoint("docker"))     -- $DOCKER_HOST or /var/run/docker.sock
--   local e = assert(engine.connect("podman"))       -- pings it and learns its version
--   local containers = assert(e:json("GET", "/containers/json?all=1"))
--
-- Endpoints (what the engines' own clients honour):
--   docker: $DOCKER_HOST — unix:///path, or tcp://host:port (HTTPS with client certificates when
--           $DOCKER_TLS_VERIFY is set or $DOCKER_CERT_PATH holds them: ca.pem, cert.pem, key.pem);
--           else unix:///var/run/docker.sock
--   podman: $CONTAINER_HOST (unix:///path), else /run/podman/podman.sock for root and
--           $XDG_RUNTIME_DIR/podman/podman.sock for others (`podman system service` listens there)
local http = require "llmbox.http"
local json = require "llmbox.json"
local util = require "llmbox.util"

local type, tostring, format, getenv, concat = type, tostring, string.format, os.getenv, table.concat

local _M = { _VERSION = "0.1.0" }

_M.KINDS = { docker = "Docker", podman = "Podman" }

local function is_root()
    local ok, ffi = pcall(require, "ffi")
    if not ok then return false end
    pcall(ffi.cdef, "unsigned int geteuid(void);")
    return ffi.C.geteuid() == 0
end

-- unix:///path or tcp://host:port -> endpoint fields | nil, err
local function parse(kind, value, origin, env)
    local path = value:match("^unix://(/.+)$")
    if path then return { kind = kind, socket = path, name = "unix://" .. path, origin = origin } end
    local hostport = value:match("^tcp://([^/]+)/?$")
    if hostport and kind == "docker" then
        if not hostport:find(":", 1, true) then hostport = hostport .. ":2376" end
        local certs = env("DOCKER_CERT_PATH")
        if not certs or certs == "" then
            local home = env("HOME")
            certs = home and home .. "/.docker" or nil
        end
        local verify = env("DOCKER_TLS_VERIFY")
        local tls = (verify ~= nil and verify ~= "" and verify ~= "0") or (env("DOCKER_CERT_PATH") or "") ~= ""
        local ep = { kind = kind, name = "tcp://" .. hostport, origin = origin,
            base = (tls and "https://" or "http://") .. hostport }
        if tls then
            ep.tls = { ca_file = certs .. "/ca.pem", cert_file = certs .. "/cert.pem", key_file = certs .. "/key.pem" }
        end
        return ep
    end
    return nil, format("%s=%q: expected unix:///path%s", origin, value,
        kind == "docker" and " or tcp://host:port" or "")
end

--- engine.endpoint(kind [, getenv]) -> endpoint | nil, err: where the engine of that kind is
--- (kind: "docker" or "podman"); getenv, for tests, stands in for os.getenv.
function _M.endpoint(kind, env)
    if not _M.KINDS[kind] then error(format("engine.endpoint: unknown engine %q (docker or podman)", tostring(kind)), 2) end
    env = env or getenv
    local var = kind == "docker" and "DOCKER_HOST" or "CONTAINER_HOST"
    local value = env(var)
    if value and value ~= "" then return parse(kind, value, var, env) end
    if kind == "docker" then
        return { kind = kind, socket = "/var/run/docker.sock", name = "unix:///var/run/docker.sock", origin = "default" }
    end
    local path
    if is_root() then
        path = "/run/podman/podman.sock"
    else
        local dir = env("XDG_RUNTIME_DIR")
        if not dir or dir == "" then
            return nil, "podman: $XDG_RUNTIME_DIR is not set, so its socket cannot be found: set CONTAINER_HOST=unix:///path"
        end
        path = dir .. "/podman/podman.sock"
    end
    return { kind = kind, socket = path, name = "unix://" .. path, origin = "default" }
end

-- What to do when the engine cannot be reached, by cause.
local function unreachable(ep, err, code)
    local who = _M.KINDS[ep.kind]
    local start = ep.kind == "docker" and "start it (`systemctl start docker`, or `dockerd` as root)"
        or "start its API service (`podman system service --time=0 " .. ep.name .. "`)"
    local override = ep.kind == "docker" and "DOCKER_HOST" or "CONTAINER_HOST"
    if code == "ENOENT" then
        return format("no %s engine at %s (the socket does not exist): %s, or set %s", who, ep.name, start, override)
    elseif code == "ECONNREFUSED" then
        return format("no %s engine answers at %s (nothing listens there): %s", who, ep.name, start)
    elseif code == "EACCES" then
        return format("permission denied on %s: run as root or as a member of the socket's group (%s)",
            ep.socket or ep.name, ep.kind)
    end
    return format("the %s engine at %s: %s", who, ep.name, tostring(err))
end

local Engine = {}
Engine.__index = Engine

-- The request's options for this endpoint.
local function request_opts(self, method, path, body, opts)
    local ep = self.endpoint
    local o = {
        url = (ep.base or "http://" .. ep.kind) .. (self.prefix or "") .. path,
        method = method,
        unix_socket = ep.socket,
        timeout_ms = opts and opts.timeout_ms or 30000,
        connect_timeout_ms = 5000,
        max_body = opts and opts.max_body or 64 * 1024 * 1024,
        headers = opts and opts.headers or {},
        on_data = opts and opts.on_data,
    }
    if ep.tls then
        o.ca_file, o.cert_file, o.key_file = ep.tls.ca_file, ep.tls.cert_file, ep.tls.key_file
    end
    if body ~= nil then
        if type(body) == "table" then
            o.body = json.encode(body)
            o.headers["Content-Type"] = "application/json"
        else
            o.body = body
        end
    end
    return o
end

--- e:request(method, path [, body] [, opts]) -> response | nil, err, errno_name: one API call;
--- path is below the API version ("/containers/json"); a table body is sent as JSON; opts:
--- timeout_ms, max_body, headers, on_data (a streamed body). Any HTTP status is a response.
function Engine:request(method, path, body, opts)
    local res, err, code = http.request(request_opts(self, method, path, body, opts))
    if not res then return nil, unreachable(self.endpoint, err, code), code end
    return res
end

-- The engine's own words on a failed call: {"message": "..."}.
local function engine_message(res)
    local ok, doc = pcall(json.decode, res.body or "")
    if ok and type(doc) == "table" and type(doc.message) == "string" then return doc.message end
    local text = (res.body or ""):gsub("%s+$", "")
    return #text > 0 and text:sub(1, 300) or "no message"
end

--- e:json(method, path [, body] [, opts]) -> decoded body (or true for an empty one) | nil, err,
--- status: a call that must succeed (2xx); a failure carries the engine's message and status.
function Engine:json(method, path, body, opts)
    local res, err, code = self:request(method, path, body, opts)
    if not res then return nil, err, code end
    if res.status < 200 or res.status > 299 then
        return nil, format("%s %s: %s (HTTP %d from the %s engine)", method, path:match("^[^?]*"),
            engine_message(res), res.status, _M.KINDS[self.endpoint.kind]), res.status
    end
    if res.body == "" then return true end
    local ok, doc = pcall(json.decode, res.body)
    if not ok then
        return nil, format("%s %s: the %s engine answered with something that is not JSON", method, path,
            _M.KINDS[self.endpoint.kind])
    end
    -- a JSON null (Podman's libpod update answers with one) is a success without a document
    if doc == nil or doc == json.null then return true end
    return doc
end

--- engine.demux(data) -> stdout, stderr, rest: an exec's output as the engines send it when
--- no TTY is attached (frames of an 8-byte header — stream, 3 zero bytes, big-endian length —
--- and the payload); rest is an incomplete frame to prepend to the next chunk.
function _M.demux(data)
    local out, err = {}, {}
    local pos, n = 1, #data
    while n - pos + 1 >= 8 do
        local stream = data:byte(pos)
        local b1, b2, b3, b4 = data:byte(pos + 4, pos + 7)
        local len = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
        if n - pos + 1 < 8 + len then break end
        local payload = data:sub(pos + 8, pos + 7 + len)
        if stream == 2 then err[#err + 1] = payload else out[#out + 1] = payload end
        pos = pos + 8 + len
    end
    return concat(out), concat(err), data:sub(pos)
end

--- e:upgrade(method, path [, body]) -> stream, status | nil, err, errno_name: a call whose
--- answer takes over the connection ("Upgrade: tcp", as an exec's start with stdin does): the
--- request is written by hand on a raw stream (llmbox.http), the status line and headers read
--- back, and the stream handed over for what follows.
function Engine:upgrade(method, path, body)
    local ep = self.endpoint
    local c = http.client()
    local opts = request_opts(self, method, path, nil, { timeout_ms = 10000 })
    local stream, err, code = c:connect(opts)
    if not stream then
        c:close()
        return nil, unreachable(ep, err, code), code
    end
    -- (the client is this stream's alone: its connection goes with it)
    local function close()
        stream:close()
        c:close()
    end
    local payload = body ~= nil and json.encode(body) or ""
    local head = concat({
        format("%s %s HTTP/1.1", method, (self.prefix or "") .. path),
        "Host: " .. ep.kind,
        "Connection: Upgrade",
        "Upgrade: tcp",
        "Content-Type: application/json",
        "Content-Length: " .. #payload,
        "", "" }, "\r\n")
    local ok
    ok, err, code = stream:send(head .. payload)
    if not ok then
        close()
        return nil, err, code
    end
    -- the status line and headers, up to the blank line; what follows is the stream's
    local got = ""
    while not got:find("\r\n\r\n", 1, true) do
        if #got > 65536 then
            close()
            return nil, format("%s %s: the engine's answer has no end of headers", method, path)
        end
        local data, why, rcode = stream:recv(10000)
        if not data then
            close()
            return nil, format("%s %s: the engine closed the connection before answering (%s)", method, path,
                tostring(why)), rcode
        end
        if data == "" then
            close()
            return nil, format("%s %s: the engine did not answer within 10 s", method, path), "ETIMEDOUT"
        end
        got = got .. data
    end
    local stop = got:find("\r\n\r\n", 1, true)
    local status = tonumber(got:match("^HTTP/1%.%d (%d%d%d)"))
    local rest = got:sub(stop + 4)
    if status ~= 101 and status ~= 200 then
        -- an error's JSON body, as much as arrived with the headers
        close()
        return nil, format("%s %s: %s (HTTP %s from the %s engine)", method, path:match("^[^?]*"),
            engine_message({ body = rest }), tostring(status), _M.KINDS[ep.kind]), status
    end
    stream:unread(rest)
    stream.client = c -- the stream's connection belongs to this client: keep it alive
    return stream, status
end

-- What an exec's on_output returns to stop reading (see e:exec).
_M.STOP = setmetatable({}, { __tostring = function() return "engine.STOP" end })

--- engine.output_keeper(on_output) -> keeper: what an exec keeps of its output, as e:exec says:
--- keeper:keep("stdout" | "stderr", chunk) hands each chunk to on_output (whose string is kept
--- instead; STOP ends the reading: keeper.stopped = "output"), into keeper.stdout / .stderr
--- (lists of chunks). Shared by the engines' execs and Kubernetes' (llmbox.k8s.exec).
function _M.output_keeper(on_output)
    local k = { stdout = {}, stderr = {} }
    function k.keep(self, name, chunk)
        if #chunk == 0 or self.stopped then return end
        if on_output then
            local kept, stop = on_output(name, chunk)
            if kept == _M.STOP then
                self.stopped = "output"
                return
            end
            if type(kept) == "string" then chunk = kept end
            if stop == _M.STOP then self.stopped = "output" end
        end
        local list = self[name]
        list[#list + 1] = chunk
    end
    return k
end

--- engine.run_started(x, cmd, on_output) -> as e:exec: an exec that has started (x, from
--- e:exec_start or llmbox.k8s.exec's start) run to its end: its stdin ended when it has one
--- (cmd.stdin), then its output read
function _M.run_started(x, cmd, on_output)
    if cmd.stdin ~= nil then
        local ok, err, code = x:close_stdin()
        if not ok then
            x:abandon()
            return nil, err, code
        end
    end
    return x:finish(cmd, on_output)
end

-- How long a stopped exec may take to end before the call fails.
local STOPPED_WAIT_MS = 10000

-- An exec that has started: its stream is open, stdin may still be written (see e:exec_start).
local Exec = {}
Exec.__index = Exec

--- x:send(data) -> true | nil, err: more of the exec's stdin
function Exec:send(data)
    local ok, err, code = self.stream:send(data)
    if not ok then return nil, "sending the exec's stdin: " .. tostring(err), code end
    return true
end

--- x:close_stdin() -> true | nil, err: the exec's stdin ends (the stream stays open to read)
function Exec:close_stdin()
    local ok, err, code = self.stream:shutdown_write()
    if not ok then return nil, "closing the exec's stdin: " .. tostring(err), code end
    return true
end

--- x:peek(ms) -> stdout, stderr | nil, "eof" | nil, err: output that has arrived within ms,
--- demultiplexed but not handed to anyone: the caller keeps it (for x:finish's `pending`)
function Exec:peek(ms)
    local data, why, code = self.stream:recv(ms)
    if not data then return nil, why, code end
    local o, e
    o, e, self.rest = _M.demux(self.rest .. data)
    return o, e
end

--- x:abandon(): closes the stream; the exec's processes are the caller's to stop
function Exec:abandon()
    if self.stream then
        self.stream:close()
        -- the stream's own client (e:upgrade): else its connection stays open until collected
        if self.stream.client then self.stream.client:close() end
        self.stream = nil
    end
end

--- x:finish({ timeout_ms, on_stop, exit_code }, on_output) -> as e:exec: reads the output to its
--- end; exit_code(), when given, may return the exit status the output said (then the engine
--- is not asked)
function Exec:finish(cmd, on_output)
    local engine, stream = self.engine, self.stream
    if not stream then return nil, "the exec was abandoned" end
    local rest = self.rest
    local deadline = cmd.timeout_ms and util.now_ms() + cmd.timeout_ms
    local kept = _M.output_keeper(on_output)
    local out, errs = kept.stdout, kept.stderr
    local o, e
    o, e, rest = _M.demux(rest)
    kept:keep("stdout", o)
    kept:keep("stderr", e)
    local timed_out
    while not kept.stopped do
        local wait = -1
        if deadline then wait = math.max(0, math.floor(deadline - util.now_ms())) end
        local data, why, rcode = stream:recv(wait)
        if not data then
            if why ~= "eof" then
                self:abandon()
                return nil, "reading the exec's output: " .. tostring(why), rcode
            end
            break
        end
        if data == "" and deadline and util.now_ms() >= deadline then
            timed_out = true
            break
        end
        o, e, rest = _M.demux(rest .. data)
        kept:keep("stdout", o)
        kept:keep("stderr", e)
    end
    local stopped = timed_out and "timeout" or kept.stopped
    self:abandon()
    if stopped and cmd.on_stop then cmd.on_stop(stopped) end
    -- an exec that said its exit status in its output (cmd.exit_code reads it) costs no call
    local said = not stopped and cmd.exit_code and cmd.exit_code()
    if said then return { exit_code = said, stdout = concat(out), stderr = concat(errs) } end
    -- the engine may not have recorded the exit code yet when the stream ends; a stopped exec
    -- ends once its processes are killed
    local info, err, code
    local give_up = util.now_ms() + (stopped and STOPPED_WAIT_MS or 1000)
    repeat
        info, err, code = engine:json("GET", "/exec/" .. self.id .. "/json")
        if not info then return nil, err, code end
        if not info.Running then break end
        if util.now_ms() > give_up then
            return nil, stopped and "the exec did not end within 10 s of being stopped"
                or "the exec went on running after its output ended", "ETIMEDOUT"
        end
        util.sleep_ms(5)
    until false
    return { exit_code = info.ExitCode, stdout = concat(out), stderr = concat(errs), stopped = stopped }
end

--- e:exec_start(container, { argv, env, cwd, user, stdin }) -> exec | nil, err: starts argv in a
--- running container with its stdin open (when cmd.stdin is not nil, which is sent first) and
--- returns at once; x:send, x:close_stdin, x:peek and x:finish drive it from there. Pools' warm
--- starts keep an exec open this way until a lease's first run.
function Engine:exec_start(id, cmd)
    local made, err, code = self:json("POST", "/containers/" .. id .. "/exec", {
        Cmd = cmd.argv,
        Env = json.array(cmd.env or {}),
        WorkingDir = cmd.cwd,
        User = cmd.user,
        AttachStdin = cmd.stdin ~= nil,
        AttachStdout = true,
        AttachStderr = true,
        Tty = false,
    })
    if not made then return nil, err, code end
    local stream
    stream, err, code = self:upgrade("POST", "/exec/" .. made.Id .. "/start", { Detach = false, Tty = false })
    if not stream then return nil, err, code end
    local x = setmetatable({ engine = self, id = made.Id, stream = stream, rest = "" }, Exec)
    if cmd.stdin ~= nil and #cmd.stdin > 0 then
        local ok
        ok, err, code = x:send(cmd.stdin)
        if not ok then
            x:abandon()
            return nil, err, code
        end
    end
    return x
end

--- e:exec(container, { argv, env, cwd, user, stdin, timeout_ms, on_stop }, on_output) ->
--- { exit_code, stdout, stderr, stopped } | nil, err: runs argv in a running container to its
--- end (Docker's exec API: stdin over the upgraded connection), the output demultiplexed as it
--- arrives and handed to on_output("stdout" | "stderr", chunk), whose return value (a string)
--- is what the result keeps of the chunk. The exec is stopped after timeout_ms, or when
--- on_output returns engine.STOP (instead of the chunk, or after it as a second value): the
--- output is read no further (a flood cannot hold the engine, or the caller, while it is
--- stopped), on_stop("timeout" | "output") kills its processes (the API cannot stop an
--- exec), and the exit code is read once it has ended.
function Engine:exec(id, cmd, on_output)
    local x, err, code = self:exec_start(id, cmd)
    if not x then return nil, err, code end
    return _M.run_started(x, cmd, on_output)
end

--- engine.connect(kind | endpoint) -> engine | nil, err: reaches the engine, checks that it
--- speaks the Engine API, and pins the API version it offers (e.version, e.api_version).
function _M.connect(what)
    local ep = what
    if type(what) ~= "table" then
        local err
        ep, err = _M.endpoint(what)
        if not ep then return nil, err end
    end
    local e = setmetatable({ endpoint = ep }, Engine)
    -- /_ping's headers name the API version and the server: Podman's /version gathers host
    -- facts and takes over a second, on every connection
    local res, err = e:request("GET", "/_ping", nil, { timeout_ms = 10000 })
    if not res then return nil, err end
    local h = res.headers or {}
    local api = h["api-version"]
    if res.status ~= 200 or type(api) ~= "string" or not api:match("^1%.%d+$") then
        return nil, format("%s does not answer like a %s engine (/_ping: HTTP %s, no Api-Version header)", ep.name,
            _M.KINDS[ep.kind], tostring(res.status))
    end
    local server = h["libpod-api-version"] or (h.server or ""):match("^%a+/([^%s]+)") or "unknown"
    e.version, e.api_version = server, api
    -- every later call names the version it was written for, as the engines' own clients do
    e.prefix = "/v" .. api
    return e
end

return _M

-- resty.llmbox: `llmbox serve`'s client for OpenResty (lua-nginx-module). It speaks the daemon's
-- HTTP API over cosockets only, so an nginx worker never blocks and never forks: the runs happen
-- in the daemon's children, and the worker serves other requests while it waits.
--
--   local llmbox = require "resty.llmbox"
--   local c = assert(llmbox.new{ server = "unix:/run/llmbox/llmbox.sock", token = nil, timeout = 30 })
--   local res, err = c:run{ lang = "python", code = "print(6*7)" }      -- res.stdout == "42\n"
--   local s = assert(c:session{ lang = "python" })
--   s:put_file("data.csv", "a,b\n1,2\n"); s:run{ code = "print(open('data.csv').read())" }
--   s:close()
--
-- Every call returns its answer, or nil, a message, and the daemon's error object
-- ({ status, code, message [, violations] }: code "refused" for code a policy refuses, "timeout"
-- or "connect" for the socket's own failures). Connections are kept alive in the worker's
-- cosocket pool (keepalive = false turns it off).
local cjson = require "cjson.safe"

local ngx = ngx
local type, tostring, tonumber, pairs, setmetatable = type, tostring, tonumber, pairs, setmetatable
local format, lower = string.format, string.lower

local _M = { _VERSION = "0.1.0" }

local Client = {}
Client.__index = Client

local Session = {}
Session.__index = Session

local function default_server()
    local ffi = require "ffi"
    pcall(ffi.cdef, "unsigned int getuid(void);")
    if ffi.C.getuid() == 0 then return "unix:/run/llmbox/llmbox.sock" end
    local dir = os.getenv("XDG_RUNTIME_DIR")
    return dir and dir ~= "" and ("unix:" .. dir .. "/llmbox.sock") or nil
end

--- new{ server = "unix:PATH" | "HOST:PORT", token?, timeout? (seconds, 30), connect_timeout?
--- (seconds, 5), keepalive? (true), pool_size? (32), idle? (seconds a pooled connection may
--- wait, 60) } -> client | nil, err
function _M.new(opts)
    if opts ~= nil and type(opts) ~= "table" then error("resty.llmbox.new: expected a table of options", 2) end
    opts = opts or {}
    local server = opts.server or os.getenv("LLMBOX_SERVER") or default_server()
    if type(server) ~= "string" then
        return nil, "no server: give server = \"unix:/path\" or \"HOST:PORT\" (llmbox serve --listen ...)"
    end
    local c = { server = server, token = opts.token or os.getenv("LLMBOX_TOKEN"),
        timeout = (opts.timeout or 30) * 1000, connect_timeout = (opts.connect_timeout or 5) * 1000,
        keepalive = opts.keepalive ~= false, pool_size = opts.pool_size or 32, idle = (opts.idle or 60) * 1000 }
    local path = server:match("^unix:(/.+)$")
    if path then
        c.unix = "unix:" .. path
    else
        local host, port = server:match("^%[?([%w%.%-:]-)%]?:(%d+)$")
        if not host or host == "" or tonumber(port) > 65535 then
            return nil, format("server %q: expected unix:/path or HOST:PORT", server)
        end
        c.host, c.port = host, tonumber(port)
    end
    return setmetatable(c, Client)
end

local function fail(status, code, message, extra)
    local e = { status = status, code = code, message = message }
    for k, v in pairs(extra or {}) do e[k] = v end
    return nil, message, e
end

-- "%2F" for what a query value may not hold
local function escape(s)
    return (s:gsub("[^%w%-%._~/]", function(ch) return format("%%%02X", ch:byte()) end))
end

local function connect(self)
    local sock = ngx.socket.tcp()
    sock:settimeouts(self.connect_timeout, self.timeout, self.timeout)
    local ok, err
    if self.unix then
        ok, err = sock:connect(self.unix)
    else
        ok, err = sock:connect(self.host, self.port)
    end
    if not ok then
        return fail(nil, "connect", format("cannot reach llmbox serve at %s: %s", self.server, tostring(err)))
    end
    return sock
end

-- The status line and headers (names lower-case) of an answer.
local function read_head(sock)
    local line, err = sock:receive("*l")
    if not line then return nil, err end
    local status = tonumber(line:match("^HTTP/1%.%d (%d%d%d)"))
    if not status then return nil, "not an HTTP answer: " .. line:sub(1, 80) end
    local headers = {}
    while true do
        line, err = sock:receive("*l")
        if not line then return nil, err end
        if line == "" then break end
        local k, v = line:match("^([^:]+):%s*(.-)%s*$")
        if k then headers[lower(k)] = v end
    end
    return status, headers
end

-- The message of a socket failure, with its code: "timeout" is the client's own deadline.
local function io_fail(self, what, err)
    local code = err == "timeout" and "timeout" or "connection"
    return fail(nil, code, format("llmbox serve at %s: %s: %s", self.server, what, tostring(err)))
end

-- One request. opts: { body (string), type (its Content-Type), raw (answer bytes, not JSON),
-- on_event (server-sent events: fn(event, data_table)) } -> decoded answer, status | nil, err, e
function Client:request(method, path, opts)
    opts = opts or {}
    local sock, cerr, ce = connect(self)
    if not sock then return nil, cerr, ce end
    local body = opts.body or ""
    local head = { format("%s %s HTTP/1.1\r\nHost: llmbox\r\nContent-Length: %d\r\n", method, path, #body) }
    if #body > 0 then head[#head + 1] = "Content-Type: " .. (opts.type or "application/json") .. "\r\n" end
    if self.token then head[#head + 1] = "Authorization: Bearer " .. self.token .. "\r\n" end
    if opts.on_event then head[#head + 1] = "Accept: text/event-stream\r\n" end
    head[#head + 1] = "\r\n"
    head[#head + 1] = body
    local ok, err = sock:send(head)
    if not ok then
        sock:close()
        return io_fail(self, "sending the request", err)
    end
    local status, headers = read_head(sock)
    if not status then
        sock:close()
        return io_fail(self, "reading the answer", headers)
    end
    local data
    if headers["content-type"] == "text/event-stream" and opts.on_event then
        -- events until the daemon closes: the last one is the result (or error)
        local event, last = nil, nil
        while true do
            local line, rerr = sock:receive("*l")
            if not line then
                sock:close()
                if rerr == "closed" and last then break end
                return io_fail(self, "reading the event stream", rerr)
            end
            if line:sub(1, 7) == "event: " then
                event = line:sub(8)
            elseif line:sub(1, 6) == "data: " then
                local doc = cjson.decode(line:sub(7))
                if event == "result" or event == "error" then
                    last = { event, doc }
                else
                    opts.on_event(event, doc)
                end
            end
        end
        if last[1] == "error" then
            local e = type(last[2]) == "table" and last[2].error or {}
            return fail(422, e.code, e.message, e)
        end
        return last[2], 200
    end
    local len = tonumber(headers["content-length"])
    if not len then
        sock:close()
        return fail(status, "protocol", "the daemon's answer has no Content-Length")
    end
    data, err = sock:receive(len)
    if not data then
        sock:close()
        return io_fail(self, "reading the answer's body", err)
    end
    if self.keepalive and lower(headers["connection"] or "") == "keep-alive" then
        sock:setkeepalive(self.idle, self.pool_size)
    else
        sock:close()
    end
    if status >= 400 then
        local doc = cjson.decode(data)
        local e = type(doc) == "table" and type(doc.error) == "table" and doc.error or {}
        return fail(status, e.code or "http_" .. status, e.message or format("HTTP %d: %s", status, data:sub(1, 200)), e)
    end
    if opts.raw then return data, status end
    local doc = cjson.decode(data)
    if doc == nil then return fail(status, "protocol", "the daemon's answer is not JSON") end
    return doc, status
end

local function json_call(self, method, path, doc, on_output)
    if doc ~= nil and type(doc) ~= "table" then error("expected a table of options", 3) end
    local body = doc and cjson.encode(doc) or nil
    return self:request(method, path, { body = body, on_event = on_output and function(event, d)
        if event == "stdout" or event == "stderr" then on_output(event, d.data) end
    end })
end

-- A run's request: the options the daemon knows, without the callback.
local function run_body(opts)
    local doc = {}
    for k, v in pairs(opts) do
        if k ~= "on_output" then doc[k] = v end
    end
    -- (cjson writes an empty table as {}: the daemon wants arrays)
    for _, k in pairs({ "args", "libraries" }) do
        if type(doc[k]) == "table" and doc[k][1] == nil then doc[k] = nil end
    end
    return doc
end

--- c:run{ lang?, code, args?, stdin?, timeout?, policy?, libraries?, on_output? } -> result | nil, err, e
--- on_output(stream, data) is called with "stdout"/"stderr" pieces as the run makes them.
function Client:run(opts)
    if type(opts) ~= "table" or type(opts.code) ~= "string" then error("c:run: expected { code = \"...\" }", 2) end
    return json_call(self, "POST", "/v1/run", run_body(opts), opts.on_output)
end

--- c:check{ code, lang?, policy? } -> the policy's verdict | nil, err, e
function Client:check(opts)
    return json_call(self, "POST", "/v1/check", opts)
end

--- c:languages(), c:policies(), c:backends(), c:health()
function Client:languages() return self:request("GET", "/v1/languages") end
function Client:policies() return self:request("GET", "/v1/policies") end
function Client:backends() return self:request("GET", "/v1/backends") end
function Client:health() return self:request("GET", "/healthz") end

--- c:session{ lang?, policy? } -> session | nil, err, e. The session holds one sandbox in the
--- daemon until s:close() (or until it is idle for the daemon's session timeout).
function Client:session(opts)
    local doc, err, e = json_call(self, "POST", "/v1/sessions", opts or {})
    if not doc then return nil, err, e end
    return setmetatable({ client = self, id = doc.id, language = doc.language, policy = doc.policy }, Session)
end

function Session:path(what)
    return "/v1/sessions/" .. self.id .. (what and "/" .. what or "")
end

--- s:run{ code, args?, stdin?, timeout?, libraries? } -> result | nil, err, e
function Session:run(opts)
    if type(opts) ~= "table" or type(opts.code) ~= "string" then error("s:run: expected { code = \"...\" }", 2) end
    return json_call(self.client, "POST", self:path("run"), run_body(opts))
end

--- s:exec{ cmd = { "ls", "-l" } | "shell string", stdin?, timeout? } -> result | nil, err, e
function Session:exec(opts)
    return json_call(self.client, "POST", self:path("exec"), opts)
end

--- s:install{ libraries = { ... }, timeout? } -> result | nil, err, e
function Session:install(opts)
    return json_call(self.client, "POST", self:path("install"), opts)
end

--- s:put_file(path, data) -> { path, size } | nil, err, e (path under /sandbox or relative to it)
function Session:put_file(path, data)
    return self.client:request("PUT", self:path("files") .. "?path=" .. escape(path),
        { body = data, type = "application/octet-stream" })
end

--- s:get_file(path) -> bytes (a tar for a directory) | nil, err, e
function Session:get_file(path)
    return self.client:request("GET", self:path("files") .. "?path=" .. escape(path), { raw = true })
end

--- s:close() -> true | nil, err, e
function Session:close()
    local doc, err, e = self.client:request("DELETE", self:path())
    if not doc then return nil, err, e end
    return true
end

return _M

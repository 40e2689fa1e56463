-- HTTP for the engine drivers (Docker, Podman, Kubernetes): requests on one libcurl multi handle
-- (llmbox.http_core, runtime/http.c) that a loop drives. A blocking call is a small loop over the same
-- steps an event loop would take (client:fds(), client:step(0)); streamed bodies reach on_data
-- from Lua, never from inside C, so a callback may yield.
--
--   local http = require "llmbox.http"
--   local res, err = http.request{ url = "http://localhost/_ping", unix_socket = "/run/docker.sock" }
--   local c = http.client()
--   local a = c:request{ url = ..., on_data = function(chunk) ... end }
--   local b = c:request{ url = ... }
--   local ra, rb = c:wait(a), c:wait(b)          -- both progress while either is awaited
local http_core = require "llmbox.http_core"
local task = require "llmbox.task"
local util = require "llmbox.util"

local setmetatable, pcall, tostring, type, pairs = setmetatable, pcall, tostring, type, pairs
local format, sort = string.format, table.sort
local max, floor = math.max, math.floor

local _M = { _VERSION = "0.1.0" }

local Client, Request = {}, {}
Client.__index, Request.__index = Client, Request

-- Headers as given: an array of "Name: value" lines, or a map (sent in name order).
local function header_lines(h)
    if h == nil then return nil end
    if type(h) ~= "table" then error("headers: expected a table", 3) end
    if #h > 0 then return h end
    local lines = {}
    for k, v in pairs(h) do lines[#lines + 1] = format("%s: %s", tostring(k), tostring(v)) end
    sort(lines)
    return lines
end

function _M.client()
    return setmetatable({ core = http_core.new(), requests = {} }, Client)
end

-- opts: url (required), method, unix_socket, headers, body, ca_file, cert_file, key_file (or
-- ca_pem, cert_pem, key_pem: the same in memory),
-- timeout_ms, connect_timeout_ms, max_body, on_data(chunk).
function Client:request(opts)
    if type(opts) ~= "table" or type(opts.url) ~= "string" then
        error("request: expected a table with a url", 2)
    end
    if opts.on_data ~= nil and type(opts.on_data) ~= "function" then
        error("request: on_data must be a function", 2)
    end
    local spec = {}
    for k, v in pairs(opts) do
        if k ~= "on_data" and k ~= "headers" then spec[k] = v end
    end
    spec.headers = header_lines(opts.headers)
    local raw, err, code = self.core:request(spec)
    if not raw then return nil, err, code end
    local r = setmetatable({ raw = raw, on_data = opts.on_data, client = self }, Request)
    self.requests[r] = true
    return r
end

function Client:fds() return self.core:fds() end

-- Lets curl work for at most wait_ms (0: never blocks, -1: until something is due), then hands
-- each request's new body bytes to its on_data. Returns how many requests still run.
function Client:step(wait_ms)
    local running = self.core:step(wait_ms or 0)
    for r in pairs(self.requests) do r:deliver() end
    return running
end

-- Drives the client until r is over and returns r's result (other requests progress meanwhile).
function Client:wait(r)
    -- (inside a stepped task, llmbox.task: the task's caller steps the client instead)
    while not r.raw:done() and not r.failed do
        if not task.await({ client = self }) then self:step(-1) end
    end
    return r:result()
end

function Client:close()
    for r in pairs(self.requests) do r:discard() end
    self.core:close()
end

function Request:deliver()
    if not self.on_data or self.failed then return end
    local chunk = self.raw:take()
    if not chunk then return end
    local ok, err = pcall(self.on_data, chunk)
    if not ok then
        self.failed = "on_data callback failed: " .. tostring(err)
        self.raw:discard()
    end
end

function Request:done() return self.failed ~= nil or self.raw:done() end

-- { status, headers = { [lower-case name] = value }, body } | nil, err, errno_name. With
-- on_data the body holds only what the callback did not receive.
function Request:result()
    self.client.requests[self] = nil
    if self.failed then return nil, self.failed, "ECANCELED" end
    self:deliver()
    if self.failed then return nil, self.failed, "ECANCELED" end
    return self.raw:result()
end

function Request:discard()
    self.client.requests[self] = nil
    self.raw:discard()
end

-- Raw streams: a connection (unix socket, TCP or TLS) on which the caller speaks for itself, as
-- an engine's exec does once a request upgrades it ("Upgrade: tcp": stdin one way, the output
-- the other).
local Stream = {}
Stream.__index = Stream

--- c:connect(opts) -> stream | nil, err, errno_name: connects (opts as for request: url,
--- unix_socket, TLS files, timeout_ms for the connection) and hands the connection over.
function Client:connect(opts)
    if type(opts) ~= "table" or type(opts.url) ~= "string" then
        error("connect: expected a table with a url", 2)
    end
    local spec = {}
    for k, v in pairs(opts) do
        if k ~= "headers" and k ~= "body" and k ~= "on_data" then spec[k] = v end
    end
    spec.connect_only = true
    local raw, err, code = self.core:request(spec)
    if not raw then return nil, err, code end
    while not raw:done() do
        if not task.await({ client = self }) then self.core:step(-1) end
    end
    if not raw:fd() then
        -- the connection failed: result() says why
        local res, ferr, fcode = raw:result()
        if res then return nil, opts.url .. ": connected, but libcurl has no socket to hand over", "EIO" end
        return nil, ferr, fcode
    end
    return setmetatable({ raw = raw, pending = "" }, Stream)
end

function Stream:fd() return self.raw:fd() end

--- stream:send(data [, timeout_ms]) -> true | nil, err, errno_name: all of data, waiting as needed
function Stream:send(data, timeout_ms)
    local pos, limit = 1, timeout_ms or 30000
    local deadline
    while pos <= #data do
        local n, again, code = self.raw:send(data, pos)
        if not n then return nil, again, code end
        pos = pos + n
        if n > 0 or not deadline then deadline = util.now_ms() + limit end -- the limit is per wait
        if again and pos <= #data then
            local stuck = util.now_ms() >= deadline
            if not stuck and not task.await({ stream = self.raw, events = "w", deadline = deadline }) then
                stuck = not self.raw:wait("w", max(0, floor(deadline - util.now_ms())))
            end
            if stuck then
                return nil, "the stream took no data for " .. tostring(limit) .. " ms", "ETIMEDOUT"
            end
        end
    end
    return true
end

--- stream:recv([wait_ms]) -> data | "" (nothing yet) | nil, "eof" | nil, err, errno_name; what
--- unread() put back comes first. wait_ms: how long to wait for data (0: not at all, -1: until
--- some arrives)
function Stream:recv(wait_ms)
    if #self.pending > 0 then
        local data = self.pending
        self.pending = ""
        return data
    end
    local deadline = wait_ms and wait_ms > 0 and util.now_ms() + wait_ms or nil
    while true do
        local data, state, code = self.raw:recv()
        if data == nil then return nil, state, code end
        if #data > 0 then return data end
        if state == "eof" then return nil, "eof" end
        if wait_ms == 0 or (deadline and util.now_ms() >= deadline) then return "" end
        if not task.await({ stream = self.raw, events = "r", deadline = deadline }) then
            if not self.raw:wait("r", deadline and max(0, floor(deadline - util.now_ms())) or -1) then return "" end
        end
    end
end

--- stream:unread(data): data the next recv returns first (what a reader took too much of)
function Stream:unread(data) self.pending = data .. self.pending end

function Stream:shutdown_write() return self.raw:shutdown_write() end
function Stream:close() self.raw:discard() end

-- One request, to its end: res | nil, err, errno_name.
function _M.request(opts)
    if type(opts) ~= "table" then error("request: expected a table", 2) end
    local c = _M.client()
    local r, err, code = c:request(opts)
    if not r then
        c:close()
        return nil, err, code
    end
    local res
    res, err, code = c:wait(r)
    c:close()
    return res, err, code
end

return _M

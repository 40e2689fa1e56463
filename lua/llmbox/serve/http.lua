-- llmbox.serve.http: HTTP/1.1 for `llmbox serve`, on the daemon's libuv loop (lua-luv). The bytes
-- are parsed by Node's http-parser (Debian's libhttp-parser, core.http_request_parser): no HTTP
-- is parsed by hand here. This file owns the connections — reading, limits, keep-alive,
-- timeouts, writing responses — and hands each complete request to a handler that runs as a
-- coroutine, so it may wait for workers without blocking the loop.
--
--   local server = assert(http.listen({ unix = "/run/llmbox/llmbox.sock" }, handler, limits))
--   -- handler(req) -> status, body [, headers]; req = { method, path, query, headers, body, conn }
--   server:close()
local uv = require "luv"
local core = require "llmbox.core"
local json = require "llmbox.json"

local format, concat, pairs, ipairs, tostring, tonumber, next = string.format, table.concat, pairs, ipairs, tostring,
    tonumber, next
local co_create, co_resume, co_status = coroutine.create, coroutine.resume, coroutine.status

local _M = { _VERSION = "0.1.0" }

-- Defaults: the largest request head and body, and how long a connection may stay silent.
_M.LIMITS = { max_head = 64 * 1024, max_body = 16 * 1024 * 1024, idle_ms = 30000 }

_M.REASONS = {
    [200] = "OK", [201] = "Created", [202] = "Accepted", [204] = "No Content", [400] = "Bad Request", [401] = "Unauthorized",
    [403] = "Forbidden", [404] = "Not Found", [405] = "Method Not Allowed", [408] = "Request Timeout",
    [413] = "Content Too Large", [415] = "Unsupported Media Type", [422] = "Unprocessable Content",
    [431] = "Request Header Fields Too Large", [499] = "Client Closed Request", [500] = "Internal Server Error",
    [503] = "Service Unavailable",
}

-- "%41" -> "A", "+" -> " " (a query string's form encoding)
local function unescape(s)
    return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function split_target(url)
    local path, q = url:match("^([^?#]*)%??([^#]*)")
    local query = {}
    for pair in (q or ""):gmatch("[^&]+") do
        local k, v = pair:match("^([^=]*)=?(.*)$")
        query[unescape(k)] = unescape(v)
    end
    return path or url, query
end

local Conn = {}
Conn.__index = Conn

function Conn:write(status, body, headers)
    if self.closed then return end
    local h = { format("HTTP/1.1 %d %s\r\n", status, _M.REASONS[status] or "Unknown") }
    headers = headers or {}
    if not headers["Content-Type"] then headers["Content-Type"] = "application/json" end
    headers["Content-Length"] = tostring(#body)
    headers["Connection"] = self.keep_alive and "keep-alive" or "close"
    for k, v in pairs(headers) do h[#h + 1] = k .. ": " .. v .. "\r\n" end
    h[#h + 1] = "\r\n"
    h[#h + 1] = body
    self.stream:write(concat(h))
    if not self.keep_alive then self:close() end
end

--- conn:stream_start(status, headers): a response whose body follows in pieces (server-sent
--- events): no length, so the connection closes after it
function Conn:stream_start(status, headers)
    self.streaming = true
    self.keep_alive = false
    local h = { format("HTTP/1.1 %d %s\r\n", status, _M.REASONS[status] or "Unknown") }
    for k, v in pairs(headers or {}) do h[#h + 1] = k .. ": " .. v .. "\r\n" end
    h[#h + 1] = "Connection: close\r\n\r\n"
    if not self.closed then self.stream:write(concat(h)) end
end

--- conn:stream_write(data): the next piece of a streamed body
function Conn:stream_write(data)
    if not self.closed then self.stream:write(data) end
end

function Conn:close()
    if self.closed then return end
    self.closed = true
    if self.timer and not self.timer:is_closing() then self.timer:close() end
    if not self.stream:is_closing() then
        self.stream:shutdown(function() if not self.stream:is_closing() then self.stream:close() end end)
    end
    if self.on_close then self.on_close() end
end

-- The idle timer: reset by every read; a connection silent for idle_ms is closed (a request
-- being handled is not idle: the timer waits for the handler).
function Conn:touch()
    if self.timer and not self.busy then self.timer:again() end
end

-- A complete request: handled in a coroutine. The connection goes on reading (so that a client
-- that goes away is seen, and its run stopped), but what arrives is parsed only once it answered.
function Conn:dispatch(req)
    self.busy = true
    local co = co_create(function()
        local ok, status, body, headers = pcall(self.handler, req)
        if not ok then
            self.server.log_error(tostring(status))
            status, body, headers = 500, '{"error":{"code":"internal","message":"internal error"}}', nil
        end
        self.keep_alive = self.keep_alive and req.keep_alive
        if self.streaming then
            -- the handler answered in pieces: the body ends with the connection
            self:close()
        else
            self:write(status, body or "", headers)
        end
        self.busy = false
        if self.gone then
            self:close()
        elseif not self.closed then
            self:touch()
            -- what arrived behind this request (pipelined) is parsed now
            if self.queued then
                local q = self.queued
                self.queued = nil
                self:feed(q)
            end
        end
    end)
    local ok, err = co_resume(co)
    if not ok then self.server.log_error(tostring(err)) end
    return co_status(co)
end

-- The codes of what the connection itself refuses, before any route sees the request.
local FAIL_CODES = { [400] = "bad_request", [413] = "body_too_large", [431] = "head_too_large" }

function Conn:fail(status, message)
    self.keep_alive = false
    self:write(status, json.encode({ error = { code = FAIL_CODES[status] or "bad_request", message = message } }))
end

function Conn:feed(data)
    if self.busy then
        self.queued = (self.queued or "") .. data
        return
    end
    local events, used, status = self.parser:feed(data)
    if not events then return self:fail(status, used) end
    for _, ev in ipairs(events) do
        local kind = ev[1]
        if kind == "head" then
            local path, query = split_target(ev[3])
            self.req = { method = ev[2], url = ev[3], path = path, query = query, headers = ev[4],
                keep_alive = ev[5], parts = {}, size = 0, conn = self }
            local len = tonumber(ev[4]["content-length"] or "")
            if len and len > self.limits.max_body then
                return self:fail(413, format("the request body is larger than %d bytes", self.limits.max_body))
            end
        elseif kind == "body" then
            local r = self.req
            r.size = r.size + #ev[2]
            if r.size > self.limits.max_body then
                return self:fail(413, format("the request body is larger than %d bytes", self.limits.max_body))
            end
            r.parts[#r.parts + 1] = ev[2]
        elseif kind == "end" then
            local r = self.req
            self.req = nil
            r.body = concat(r.parts)
            r.parts = nil
            -- a pipelined request behind this one is parsed once this one is answered
            if used < #data then self.queued = data:sub(used + 1) .. (self.queued or "") end
            self:dispatch(r)
            return
        end
    end
end

function Conn:read()
    self.stream:read_start(function(err, data)
        if self.closed then return end
        if err or not data then
            -- the client is gone (or half-closed): a handler still running is told (conn.on_gone)
            self.gone = true
            if self.busy then
                if self.on_gone then self.on_gone() end
            else
                self:close()
            end
            return
        end
        self:touch()
        self:feed(data)
    end)
end

--- http.listen(addr, handler [, limits [, log_error]]) -> server | nil, err: addr is
--- { unix = path } or { host = "127.0.0.1", port = 8080 }
function _M.listen(addr, handler, limits, log_error)
    limits = limits or _M.LIMITS
    local server = { conns = {}, log_error = log_error or function() end }
    local handle, ok, err
    if addr.unix then
        handle = uv.new_pipe(false)
        ok, err = handle:bind(addr.unix)
    else
        handle = uv.new_tcp()
        ok, err = handle:bind(addr.host, addr.port)
    end
    if not ok then
        handle:close()
        return nil, tostring(err)
    end
    ok, err = handle:listen(128, function(lerr)
        if lerr then return end
        local stream = addr.unix and uv.new_pipe(false) or uv.new_tcp()
        if not pcall(handle.accept, handle, stream) then
            stream:close()
            return
        end
        local c = setmetatable({ stream = stream, handler = handler, limits = limits, server = server,
            keep_alive = true, parser = core.http_request_parser({ max_head = limits.max_head }) }, Conn)
        server.conns[c] = true
        c.on_close = function() server.conns[c] = nil end
        c.timer = uv.new_timer()
        c.timer:start(limits.idle_ms, limits.idle_ms, function()
            if not c.busy then
                c.keep_alive = false
                c:close()
            end
        end)
        c:read()
    end)
    if not ok then
        handle:close()
        return nil, tostring(err)
    end
    server.handle = handle
    --- server.close(): no more connections; idle ones close now, those whose request is being
    --- handled after their answer
    function server.close()
        if not handle:is_closing() then handle:close() end
        for c in pairs(server.conns) do
            if c.busy then c.keep_alive = false else c:close() end
        end
    end
    --- server.drained() -> true when every connection is closed
    function server.drained()
        return next(server.conns) == nil
    end
    return server
end

return _M

-- llmbox.mcp.jsonrpc: JSON-RPC 2.0 over lines, as MCP's stdio transport frames it: splitting a
-- byte stream into lines, writing messages and errors, and checking what came in before it is
-- routed (requests to a method, notifications, responses to us).
--
--   local rpc = require "llmbox.mcp.jsonrpc"
--   local feed = rpc.lines(function(line) ... end, rpc.MAX_LINE, on_too_long)
--   feed(chunk) ... feed(nil)                       -- nil: end of input
--   rpc.handle_line(line, { request = fn(id, method, params), notification = fn(method, params) })
--   rpc.respond(id, result); rpc.respond_error(id, rpc.INVALID_PARAMS, "message")
--
-- Messages go to stdout, except those about a request that has a sink: rpc.sinks[rpc.key(id)] =
-- fn(msg) takes its response and the notifications sent on its behalf (progress) instead. The
-- daemon's MCP endpoint (llmbox.serve.mcp_http) answers each HTTP request that way; `llmbox mcp`
-- registers none.
local json = require "llmbox.json"
local ctx = require "llmbox.mcp.context"

local io, type, next, tostring = io, type, next, tostring
local find, sub, concat = string.find, string.sub, table.concat

local _M = { _VERSION = "0.1.0" }

-- error codes
_M.PARSE_ERROR, _M.INVALID_REQUEST, _M.METHOD_NOT_FOUND, _M.INVALID_PARAMS, _M.INTERNAL_ERROR =
    -32700, -32600, -32601, -32602, -32603
_M.RESOURCE_NOT_FOUND = -32002

_M.MAX_LINE = 32 * 1024 * 1024      -- an upload_file of ~24 MB fits, base64-encoded

--- lines(on_line [, max, on_too_long]) -> feed(chunk | nil)
-- Splits a stream into lines without copying what came before (a 32 MB line in 64 KB reads
-- costs one concatenation, not one per read). A line longer than `max` bytes is dropped up to its
-- newline and reported with on_too_long(); nil flushes the last line, unterminated.
function _M.lines(on_line, max, on_too_long)
    local parts, size, skipping = {}, 0, false
    local function add(piece)
        if skipping then return end
        size = size + #piece
        if max and size > max then
            parts, size, skipping = {}, 0, true
            if on_too_long then on_too_long() end
            return
        end
        parts[#parts + 1] = piece
    end
    return function(data)
        if data == nil then
            if size > 0 and not skipping then on_line(concat(parts)) end
            parts, size, skipping = {}, 0, false
            return
        end
        local start = 1
        while true do
            local nl = find(data, "\n", start, true)
            if not nl then break end
            add(sub(data, start, nl - 1))
            if not skipping then
                local line = concat(parts)
                parts, size = {}, 0
                on_line(line)
            end
            parts, size, skipping = {}, 0, false
            start = nl + 1
        end
        if start <= #data then add(sub(data, start)) end
    end
end

-- Our stdout is the protocol channel: a failed write means the client is gone, and whoever
-- waits for that is told through on_write_error (the server stops).
_M.on_write_error = nil

-- request key (rpc.key(id)) -> fn(msg): where that request's answer goes instead of stdout
_M.sinks = {}

--- write(msg [, for_id]): a message to the client; `for_id`: the request a notification is about
function _M.write(msg, for_id)
    local about = for_id
    if about == nil and msg.id ~= json.null then about = msg.id end
    local sink = about ~= nil and _M.sinks[_M.key(about)]
    if sink then return sink(msg) end
    local ok, err = io.stdout:write(json.encode(msg), "\n")
    if ok then ok, err = io.stdout:flush() end
    if not ok then
        ctx.log("cannot write to stdout: %s", tostring(err))
        if _M.on_write_error then _M.on_write_error(err) end
    end
end

function _M.respond(id, result)
    _M.write({ jsonrpc = "2.0", id = id, result = result })
end

function _M.respond_error(id, code, message, data)
    local err = { code = code, message = message }
    if data ~= nil then err.data = data end
    _M.write({ jsonrpc = "2.0", id = id == nil and json.null or id, error = err })
end

--- notify(method, params [, for_id]): a notification; for_id: the request it belongs to, if any
function _M.notify(method, params, for_id)
    _M.write({ jsonrpc = "2.0", method = method, params = params }, for_id)
end

-- A request's id as a table key (1 and "1" are different requests).
function _M.key(id)
    return type(id) .. ":" .. tostring(id)
end

local function valid_id(id)
    return type(id) == "string" or (type(id) == "number" and id == id)
end

--- classify(msg) -> "request", id, method, params | "notification", nil, method, params | "response"
---                 | nil, code, message, id (the error to answer; id when it could be read), quiet
--- Checks one decoded message. `quiet`: an invalid notification, which gets no answer.
function _M.classify(msg)
    if type(msg) ~= "table" or not json.is_object(msg) or next(msg) == nil then
        if type(msg) == "table" and next(msg) ~= nil then
            return nil, _M.INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not supported; send one "
                .. "message per line"
        end
        return nil, _M.INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object"
    end
    local id = msg.id
    local has_id = id ~= nil
    if has_id and not valid_id(id) then
        return nil, _M.INVALID_REQUEST, "Invalid Request: id must be a string or a number"
    end
    if msg.jsonrpc ~= "2.0" then
        return nil, _M.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id
    end
    if msg.method == nil and (msg.result ~= nil or msg.error ~= nil) then
        return "response" -- to a request of ours: we send none, so there is nothing to match
    end
    if type(msg.method) ~= "string" then
        return nil, _M.INVALID_REQUEST, 'Invalid Request: "method" must be a string', id
    end
    local params = msg.params
    if params == nil or params == json.null then params = {} end
    if not json.is_object(params) then
        return nil, _M.INVALID_PARAMS, "params must be an object", id, not has_id
    end
    if not has_id then return "notification", nil, msg.method, params end
    return "request", id, msg.method, params
end

--- handle(msg, route): checks a decoded message and routes it: route.request(id, method, params)
-- for requests, route.notification(method, params) for notifications. Invalid messages are
-- answered here.
function _M.handle(msg, route)
    local kind, a, b, c, quiet = _M.classify(msg)
    if kind == "request" then return route.request(a, b, c) end
    if kind == "notification" then return route.notification(b, c) end
    if kind == nil and not quiet then return _M.respond_error(c, a, b) end
end

--- handle_line(line, route): one line of input (see handle)
function _M.handle_line(line, route)
    if sub(line, -1) == "\r" then line = sub(line, 1, -2) end
    if find(line, "^%s*$") then return end
    local msg, err = json.decode(line)
    if msg == nil and err then
        return _M.respond_error(nil, _M.PARSE_ERROR, "Parse error: " .. tostring(err))
    end
    return _M.handle(msg, route)
end

return _M

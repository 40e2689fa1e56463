-- llmbox.mcp.calls: tools/call. Each call runs as a coroutine that waits on its worker, so a
-- handler reads top to bottom while the loop goes on serving; the response is sent when it
-- finishes. `notifications/cancelled` kills the call's worker (and closes its session, if it ran
-- in one), and no response is sent.
local json = require "llmbox.json"
local tools = require "llmbox.mcp.tools"
local rpc = require "llmbox.mcp.jsonrpc"
local ctx = require "llmbox.mcp.context"
local results = require "llmbox.mcp.results"
local sessions = require "llmbox.mcp.sessions"

local type, pairs, tostring, xpcall = type, pairs, tostring, xpcall
local format = string.format
local S, log, now = ctx.state, ctx.log, ctx.now

local _M = { _VERSION = "0.1.0" }

-- name -> handler(args, call) -> result (or nil when cancelled)
_M.handlers = {}
for _, mod in pairs({ "llmbox.mcp.code_tools", "llmbox.mcp.sessions", "llmbox.mcp.transfer" }) do
    for name, fn in pairs(require(mod).handlers) do _M.handlers[name] = fn end
end

-- called whenever a call ends (the server stops once its input has ended and nothing is left)
_M.on_done = function() end

--- call(id, params [, peer]): starts a tools/call; `peer`: the MCP session over HTTP it came in on
--- (its tenant's policies, the owner of the sessions it opens), nil on stdio
function _M.call(id, params, peer)
    if type(params.name) ~= "string" then
        return rpc.respond_error(id, rpc.INVALID_PARAMS, "tools/call: params.name must be a tool name")
    end
    local handler = _M.handlers[params.name]
    if not handler then
        return rpc.respond_error(id, rpc.INVALID_PARAMS, format("Unknown tool: %s (tools/list lists them)",
            params.name))
    end
    local args = params.arguments
    if args == nil or args == json.null then args = {} end
    if not json.is_object(args) then
        return rpc.respond_error(id, rpc.INVALID_PARAMS, "tools/call: params.arguments must be an object")
    end
    local meta = type(params._meta) == "table" and params._meta or {}
    local token = meta.progressToken
    if type(token) ~= "string" and type(token) ~= "number" then token = nil end
    local key = rpc.key(id)
    local call = { id = id, key = key, token = token, progress = 0, last_progress = now(), started = now(),
        peer = peer }
    S.inflight[key] = call
    local co = coroutine.create(function()
        local result
        -- invalid arguments are a tool error the model can read and correct (MCP 2025-11-25)
        local valid, verr = tools.validate(params.name, args)
        if not valid then
            result = results.error(format("invalid arguments for %s: %s", params.name, verr))
        else
            local ok, res = xpcall(handler, debug.traceback, args, call)
            if not ok then
                log("%s failed: %s", params.name, tostring(res))
                if not call.cancelled then
                    rpc.respond_error(id, rpc.INTERNAL_ERROR, "internal error in " .. params.name
                        .. " (details in the server's log)")
                end
                S.inflight[key] = nil
                return _M.on_done()
            end
            result = res
        end
        if S.inflight[key] == call then S.inflight[key] = nil end
        if not call.cancelled and result then rpc.respond(id, result) end
        _M.on_done()
    end)
    local ok, err = coroutine.resume(co)
    if not ok then log("internal error: %s", tostring(err)) end
end

local function cancel_call(call, why)
    S.inflight[call.key] = nil
    call.cancelled = true
    if call.worker then
        call.worker:kill()
        if call.session then sessions.close(call.session, why) end
    end
end

--- cancel(params): notifications/cancelled
function _M.cancel(params)
    if params.requestId == nil then return end
    local call = S.inflight[rpc.key(params.requestId)]
    if not call then return end -- finished already, or never existed: nothing to do (per spec)
    log("request %s cancelled%s", tostring(call.id),
        type(params.reason) == "string" and (": " .. params.reason) or "")
    cancel_call(call, "a run in it was cancelled")
    _M.on_done()
end

function _M.cancel_all(why)
    for _, call in pairs(S.inflight) do cancel_call(call, why) end
end

return _M

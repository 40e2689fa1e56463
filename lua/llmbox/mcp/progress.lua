-- llmbox.mcp.progress: notifications/progress for calls that carry a progress token: what the
-- call is doing, the run's output as it comes, and "still running" every few seconds of silence.
local rpc = require "llmbox.mcp.jsonrpc"
local ctx = require "llmbox.mcp.context"

local pairs, format = pairs, string.format

local _M = { _VERSION = "0.1.0" }

local EVERY = 5                 -- seconds between "still running" notifications
local MAX_OUTPUT = 500          -- output chunks forwarded as progress per call

function _M.send(call, message)
    if not call.token or call.cancelled then return end
    call.progress = call.progress + 1
    call.last_progress = ctx.now()
    local params = { progressToken = call.token, progress = call.progress }
    if message then params.message = message end
    rpc.notify("notifications/progress", params, call.id)
end

--- output(call) -> on_event for a worker's run: phases and output chunks as progress
function _M.output(call)
    local forwarded = 0
    return function(ev)
        if ev.event == "phase" then
            _M.send(call, ev.phase == "install" and "installing libraries" or "running")
        elseif forwarded < MAX_OUTPUT then
            forwarded = forwarded + 1
            local text = ev.data or ""
            if #text > 1000 then text = text:sub(1, 1000) .. "..." end
            _M.send(call, ev.event .. ": " .. text)
        end
    end
end

--- tick(): from the server's timer; "running, N s" for calls that said nothing for a while
function _M.tick()
    local t = ctx.now()
    for _, call in pairs(ctx.state.inflight) do
        if call.token and t - call.last_progress >= EVERY then
            _M.send(call, format("running, %d s", math.floor(t - call.started)))
        end
    end
end

return _M

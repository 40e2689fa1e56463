-- llmbox.mcp.context: what the parts of the MCP server share: its state (one per process: stdio
-- is one connection), the log, the loop's clock, and await() for handlers that run as coroutines.
--
--   local ctx = require "llmbox.mcp.context"
--   local S = ctx.state
--   ctx.log("session %s opened", id)
--   local result, err = ctx.await(function(resume) start_something(resume) end)
local uv = require "luv"

local io, select, unpack, tostring = io, select, unpack, tostring
local format = string.format
local co_resume, co_yield, co_running = coroutine.resume, coroutine.yield, coroutine.running

local _M = { _VERSION = "0.1.0" }

_M.state = {
    cfg = nil,
    exe = nil,               -- the llmbox binary, started as `llmbox worker`
    tmpdir = nil,            -- the server's private temporary directory (llmbox.mcp.tmpdir)
    protocol = nil,          -- negotiated version, nil before initialize (stdio; over HTTP each
                             -- MCP session keeps its own: llmbox.serve.mcp_http)
    inflight = {},           -- request key -> call state, for cancellation and progress
    sessions = {},           -- session id -> session
    nsessions = 0,
    workers = {},            -- every live worker (for shutdown)
    worker_pids = {},        -- pid -> worker, for the reaper: libuv waits for these itself
    running = 0,             -- runs and checks in progress in one-shot workers
    warm_idle = {},          -- language -> idle workers holding a pool of ready sandboxes
    warm_count = {},         -- language -> live such workers
    waiting = {},            -- one-shot runs waiting for a slot (max_runs)
    closing = false,
    eof = false,
}

-- one write per line: workers share stderr, and a line must not be cut by theirs
function _M.log(fmt, ...)
    io.stderr:write("llmbox mcp: " .. format(fmt, ...) .. "\n")
    io.stderr:flush()
end

--- policies(call) -> the default policy, the policies the client may pick, the tenant (or nil).
-- A call's peer is the MCP session it came in on over HTTP (llmbox.serve.mcp_http), holding its
-- daemon tenant's policies; stdio calls have none and get the server's (LLMBOX_POLICY,
-- LLMBOX_MCP_POLICIES).
function _M.policies(call)
    local peer = call and call.peer
    if peer and peer.policies then return peer.policy, peer.policies, peer.tenant end
    return _M.state.cfg.policy, _M.state.cfg.policies, nil
end

-- seconds, from the loop's clock
function _M.now()
    return uv.now() / 1000
end

function _M.floor_ms(s)
    return math.floor(s * 1000 + 0.5)
end

--- await(start) -> what start's callback was called with. Call from a coroutine: `start` gets a
-- resume function; the coroutine waits until it is called (at most once counts), so a handler
-- reads top to bottom even though everything it waits for is a libuv callback.
function _M.await(start)
    local co = co_running()
    local done, results = false, nil
    local waiting = false
    start(function(...)
        if done then return end
        done = true
        if waiting then
            local ok, err = co_resume(co, ...)
            if not ok then _M.log("internal error: %s", tostring(err)) end
        else
            results = { n = select("#", ...), ... }
        end
    end)
    if done then return unpack(results, 1, results.n) end
    waiting = true
    return co_yield()
end

return _M

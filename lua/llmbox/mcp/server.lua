-- llmbox.mcp.server: `llmbox mcp`, a Model Context Protocol server over stdio (JSON-RPC 2.0, one
-- message per line). stdout carries only protocol messages; everything logged goes to stderr.
--
--   local server = require "llmbox.mcp.server"
--   os.exit(server.main())        -- reads the configuration from the environment, then serves
--
-- One libuv loop (lua-luv) reads stdin and drives the children; requests are answered while runs
-- are in progress, and several runs proceed at once. The parts, one file each under llmbox.mcp:
--   jsonrpc     framing, replies, checking what comes in     calls      tools/call, cancellation
--   code_tools  execute_code, check_code, languages          sessions   the session tools
--   transfer    upload_file, download_file                   staging    checked staged files
--   workers     `llmbox worker` children, slots, warm pool,  reaper     waiting for every child
--               the loop (run_loop)
--   tmpdir      the private temporary directory              progress   progress notifications
--   results     tool results as MCP content                  context    shared state, log, await
-- This file holds the methods other than tools/call, the loop, startup and shutdown. The methods
-- and their routing are exported (server.methods, server.route) for the daemon's MCP endpoint
-- (llmbox.serve.mcp_http), which passes a peer: the MCP session the message came in on.
local uv = require "luv"
local json = require "llmbox.json"
local tools = require "llmbox.mcp.tools"
local config = require "llmbox.mcp.config"
local rpc = require "llmbox.mcp.jsonrpc"
local ctx = require "llmbox.mcp.context"
local results = require "llmbox.mcp.results"
local calls = require "llmbox.mcp.calls"
local sessions = require "llmbox.mcp.sessions"
local workers = require "llmbox.mcp.workers"
local progress = require "llmbox.mcp.progress"
local tmpdir = require "llmbox.mcp.tmpdir"
local code_tools = require "llmbox.mcp.code_tools"

local type, ipairs, next, tostring, pcall, xpcall = type, ipairs, next, tostring, pcall, xpcall
local format = string.format
local S, log = ctx.state, ctx.log

local _M = { _VERSION = "0.1.0" }

-- Newest first; an unknown requested version is answered with the newest (the spec's rule).
_M.PROTOCOL_VERSIONS = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }

-- ---------------------------------------------------------------------------------------------
-- JSON-RPC methods other than tools/call: each (params [, peer]) returns a result, or nil, code,
-- message [, data]. `peer`: an MCP session over HTTP, which keeps its own protocol version; nil on
-- stdio, whose one connection keeps it in S.protocol.

local methods = {}
_M.methods = methods

-- the version a peer (or stdio) negotiated
local function protocol(peer)
    if peer then return peer.protocol end
    return S.protocol
end

function methods.initialize(params, peer)
    if type(params.protocolVersion) ~= "string" then
        return nil, rpc.INVALID_PARAMS, "initialize: params.protocolVersion must be a string such as \""
            .. _M.PROTOCOL_VERSIONS[1] .. "\""
    end
    local version = _M.PROTOCOL_VERSIONS[1]
    for _, v in ipairs(_M.PROTOCOL_VERSIONS) do
        if v == params.protocolVersion then version = v end
    end
    if peer then peer.protocol = version else S.protocol = version end
    local client = type(params.clientInfo) == "table" and params.clientInfo or {}
    log("initialize: client %s %s, protocol %s (asked %s)", tostring(client.name), tostring(client.version),
        version, params.protocolVersion)
    local info = { name = "llmbox", version = require("llmbox.core").VERSION }
    if version >= results.MODERN then info.title = "llmbox sandbox" end
    return {
        protocolVersion = version,
        capabilities = { tools = { listChanged = false }, resources = { subscribe = false, listChanged = false } },
        serverInfo = info,
        instructions = "Runs code in isolated sandboxes (no network). Use execute_code for one-off runs; "
            .. "create_session, run_in_session, upload_file, download_file and close_session for work in "
            .. "steps. Plots come back as images.",
    }
end

function methods.ping()
    return {}
end

methods["tools/list"] = function(_, peer)
    local p = protocol(peer)
    return { tools = tools.list("mcp", p == nil or p >= results.MODERN) }
end

local LANGUAGES_URI = "sandbox://languages"

methods["resources/list"] = function()
    return { resources = json.array({ {
        uri = LANGUAGES_URI, name = "languages", title = "Supported languages",
        description = "The languages the sandbox runs, with aliases, extensions, plot and library support.",
        mimeType = "application/json",
    } }) }
end

methods["resources/templates/list"] = function()
    return { resourceTemplates = json.array() }
end

methods["resources/read"] = function(params)
    if type(params.uri) ~= "string" then
        return nil, rpc.INVALID_PARAMS, "resources/read: params.uri must be a string"
    end
    if params.uri ~= LANGUAGES_URI then
        return nil, rpc.RESOURCE_NOT_FOUND, "Resource not found: " .. params.uri, { uri = params.uri }
    end
    return { contents = json.array({ { uri = LANGUAGES_URI, mimeType = "application/json",
        text = json.encode(code_tools.languages()) } }) }
end

local route = {}
_M.route = route

--- route.request(id, method, params [, peer]): answers through rpc.respond (now, or when a
--- tools/call finishes)
function route.request(id, method, params, peer)
    if method == "tools/call" then return calls.call(id, params, peer) end
    local m = methods[method]
    if not m then
        return rpc.respond_error(id, rpc.METHOD_NOT_FOUND, "Method not found: " .. method)
    end
    local ok, res, code, message, data = pcall(m, params, peer)
    if not ok then
        log("%s failed: %s", method, tostring(res))
        return rpc.respond_error(id, rpc.INTERNAL_ERROR, "internal error (details in the server's log)")
    end
    if res == nil then return rpc.respond_error(id, code, message, data) end
    rpc.respond(id, res)
end

function route.notification(method, params)
    if method == "notifications/cancelled" then calls.cancel(params) end
    -- notifications/initialized and anything unknown: nothing to answer
end

-- ---------------------------------------------------------------------------------------------
-- the loop

local function shutdown()
    if S.closing then return end
    S.closing = true
    sessions.close_all("the server is stopping")
    calls.cancel_all("the server is stopping")
    workers.stop(uv.stop)
end

local function stop_when_idle()
    if S.eof and next(S.inflight) == nil then shutdown() end
end
calls.on_done = stop_when_idle

local function read_stdin(on_data)
    local kind = uv.guess_handle(0)
    if kind == "file" then
        -- a regular file cannot be polled: read it in the thread pool, chunk by chunk
        local function step()
            uv.fs_read(0, 65536, -1, function(err, data)
                if err or not data or data == "" then return on_data(nil) end
                on_data(data)
                step()
            end)
        end
        return step()
    end
    local h = kind == "tty" and uv.new_tty(0, true) or uv.new_pipe(false)
    if kind ~= "tty" then h:open(0) end
    h:read_start(function(err, data)
        if err then log("stdin: %s", tostring(err)) end
        if not data then
            h:read_stop()
            h:close()
        end
        on_data(data)
    end)
end

local function serve()
    local feed = rpc.lines(function(line) rpc.handle_line(line, route) end, rpc.MAX_LINE, function()
        rpc.respond_error(nil, rpc.PARSE_ERROR, format("Parse error: message longer than %d bytes", rpc.MAX_LINE))
    end)
    read_stdin(function(data)
        feed(data)
        if not data then
            -- calls in progress still get their answers (a script may pipe requests in and
            -- close its end); SIGTERM stops without waiting
            S.eof = true
            log("end of input, stopping%s", next(S.inflight) and " when the calls in progress finish" or "")
            return stop_when_idle()
        end
    end)
    -- the client is gone when its end of stdout is: nobody is left to answer
    rpc.on_write_error = shutdown
    -- idle sessions, and "still running" progress for calls that print nothing
    local tick = math.max(0.1, math.min(S.cfg.session_idle / 2, 1))
    local timer = uv.new_timer()
    timer:start(ctx.floor_ms(tick), ctx.floor_ms(tick), function()
        sessions.tick()
        progress.tick()
    end)
    timer:unref()
    workers.run_loop(shutdown, log)
end

--- main() -> exit status. Validates the environment, then serves until end of input.
function _M.main(opts)
    opts = opts or {}
    if not workers.setup(log, opts.env, opts.exe) then return 125 end
    log("serving on stdio (%s)", config.describe(S.cfg))
    local ok, serr = xpcall(serve, debug.traceback)
    local rok, rerr = tmpdir.remove(S.tmpdir)
    if not rok then log("cannot remove %s: %s", S.tmpdir, tostring(rerr)) end
    if not ok then
        log("internal error: %s", tostring(serr))
        return 125
    end
    return 0
end

return _M

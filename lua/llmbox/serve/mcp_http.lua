-- llmbox.serve.mcp_http: MCP's Streamable HTTP transport (MCP 2025-03-26 and later) at /mcp in
-- `llmbox serve`: the tools of `llmbox mcp`, answered by the same code (llmbox.mcp.server's
-- methods and routing, llmbox.mcp.calls for tools/call) on the daemon's loop and workers.
--
--   POST   /mcp   one JSON-RPC message (a batch only in sessions of 2025-03-26 or older)
--                  initialize -> its result, with the new session in the Mcp-Session-Id header
--                  a request  -> its response as application/json; a tools/call with a progress
--                                token, from a client that accepts text/event-stream, gets an
--                                event stream: its notifications/progress, then the response
--                  a notification or a response -> 202, no body
--   DELETE /mcp   ends the session: its calls are cancelled, its tool sessions closed
--   GET    /mcp   405: no stream of server-initiated messages (we send none)
--
-- Every request but initialize carries Mcp-Session-Id: 400 without it, 404 for an id that was
-- ended, expired (LLMBOX_MCP_SESSION_IDLE seconds without a request), or never existed, and for
-- another tenant's. An MCP session is one peer of the MCP server: its negotiated protocol version,
-- its tenant's policies (ctx.policies), and the tool sessions it opened, which no other MCP
-- session can use (llmbox.mcp.sessions). JSON-RPC ids are the client's own and collide between
-- clients: each request runs under an internal id of ours ("mcp-http-N"), whose answer comes back
-- through a sink (llmbox.mcp.jsonrpc) to the waiting HTTP response, with the client's id restored.
--
--   for key, fn in pairs(require("llmbox.serve.mcp_http").routes()) do routes[key] = fn end
local json = require "llmbox.json"
local rpc = require "llmbox.mcp.jsonrpc"
local ctx = require "llmbox.mcp.context"
local calls = require "llmbox.mcp.calls"
local results = require "llmbox.mcp.results"
local progress = require "llmbox.mcp.progress"
local sessions = require "llmbox.mcp.sessions"
local server = require "llmbox.mcp.server"

local type, pairs, ipairs, next, tostring, pcall = type, pairs, ipairs, next, tostring, pcall
local format, concat = string.format, table.concat
local S = ctx.state

local _M = { _VERSION = "0.1.0" }

-- MCP sessions one tenant may hold open at once: each costs little, but not nothing.
_M.MAX_PER_TENANT = 64

-- JSON-RPC codes of our own (the -32000 range is the server's): a request that will never be
-- answered because it was cancelled, or because its session ended.
local REQUEST_CANCELLED, SESSION_GONE = -32800, -32001

local peers = {}        -- Mcp-Session-Id -> peer (an MCP session)
local nrequests = 0     -- for internal request ids
local ticking = false
local end_session -- (peer, why), below

local function log(fmt, ...)
    io.stderr:write("llmbox serve: mcp: " .. format(fmt, ...) .. "\n")
    io.stderr:flush()
end

local function new_id()
    -- 128 random bits: another client cannot find a session by guessing (and a tenant's token is
    -- needed too); visible ASCII, as the spec asks
    local f = io.open("/dev/urandom", "rb")
    local bytes = f and f:read(16)
    if f then f:close() end
    if not bytes or #bytes ~= 16 then return nil end
    return "mcp-" .. bytes:gsub(".", function(c) return format("%02x", c:byte()) end)
end

local function error_msg(id, code, message)
    return { jsonrpc = "2.0", id = id == nil and json.null or id, error = { code = code, message = message } }
end

-- An HTTP error whose body is a JSON-RPC error, as MCP clients read it.
local function fail(status, code, message, id, headers)
    return status, json.encode(error_msg(id, code, message)), headers
end

-- ---------------------------------------------------------------------------------------------
-- checks every request passes

-- DNS rebinding: a web page whose site name was made to resolve to 127.0.0.1 reaches a loopback
-- listener from the user's browser, with its own Origin. Programs (SDKs, curl) send no Origin; a
-- browser page may talk to us only from a loopback origin. (A token is needed anyway on TCP,
-- which such a page does not have; this holds without one too.)
local function origin_ok(origin)
    if origin == nil then return true end
    local host = origin:lower():match("^https?://([^/]+)$")
    if not host then return false end -- "null" (file:, sandboxed frames) included
    host = host:gsub(":%d+$", "")
    return host == "localhost" or host == "[::1]" or host:match("^127%.%d+%.%d+%.%d+$") ~= nil
end

local function supported(version)
    for _, v in ipairs(server.PROTOCOL_VERSIONS) do
        if v == version then return true end
    end
    return false
end

-- -> nil, or status, body of the refusal
local function check_headers(req)
    local h = req.headers
    if not origin_ok(h.origin) then
        return fail(403, -32000, format("Forbidden: Origin %s is not allowed: the MCP endpoint takes requests from "
            .. "programs (no Origin) and from pages on a loopback origin (localhost, 127.0.0.1, [::1])", h.origin))
    end
    local version = h["mcp-protocol-version"]
    if version and not supported(version) then
        return fail(400, -32000, format("Bad Request: unsupported MCP-Protocol-Version %s (supported: %s)", version,
            concat(server.PROTOCOL_VERSIONS, ", ")))
    end
end

local function tenant_name(req)
    return req.tenant and req.tenant.tenant
end

-- The policies the request's tenant may pick (its token's, read again on each request: a reload
-- may change them), or the daemon's own without tokens.
local function policies_of(peer, req)
    local tenant = req.tenant
    peer.policy = tenant and tenant.default_policy or S.cfg.policy
    peer.policies = tenant and tenant.policies or S.cfg.policies
end

-- The request's MCP session -> peer | nil, status, body
local function find(req, id)
    local sid = req.headers["mcp-session-id"]
    if not sid then
        return nil, fail(400, -32000, "Bad Request: the Mcp-Session-Id header is missing: send the one initialize's "
            .. "response gave, or initialize a session first", id)
    end
    local peer = peers[sid]
    -- an idle session is gone whether or not the timer has come round since
    if peer and next(peer.requests) == nil and ctx.now() - peer.last_used >= S.cfg.session_idle then
        end_session(peer, format("idle for %gs", S.cfg.session_idle))
        peer = nil
    end
    -- another tenant's session is as unknown as one that never existed
    if not peer or peer.tenant ~= tenant_name(req) then
        return nil, fail(404, SESSION_GONE, format("Session not found: it was ended, expired after %gs idle, or "
            .. "never existed; initialize a new one (without Mcp-Session-Id)", S.cfg.session_idle), id)
    end
    policies_of(peer, req)
    return peer
end

-- ---------------------------------------------------------------------------------------------
-- requests in progress: each runs under an internal id; its answer settles it

local function settle(w, msg)
    if w.settled then return end
    w.settled, w.answer = true, msg
    rpc.sinks[rpc.key(w.internal)] = nil
    if w.peer.requests[w.key] == w then w.peer.requests[w.key] = nil end
    w.peer.last_used = ctx.now()
    if w.wake then w.wake() end
end

--- start(peer, id, method, params [, on_notify]) -> w: routes a request of the peer's under an
--- internal id; on_notify(msg) gets the notifications sent about it (progress)
local function start(peer, id, method, params, on_notify)
    nrequests = nrequests + 1
    local w = { id = id, key = rpc.key(id), internal = "mcp-http-" .. nrequests, peer = peer }
    peer.requests[w.key] = w
    peer.last_used = ctx.now()
    rpc.sinks[rpc.key(w.internal)] = function(msg)
        if msg.method then
            if on_notify and not w.settled then on_notify(msg) end
            return
        end
        msg.id = id
        -- structuredContent exists from 2025-06-18 on (the stdio server leaves it out itself)
        if type(msg.result) == "table" and peer.protocol < results.MODERN then msg.result.structuredContent = nil end
        settle(w, msg)
    end
    local ok, err = pcall(server.route.request, w.internal, method, params, peer)
    if not ok then
        log("%s failed: %s", method, tostring(err))
        settle(w, error_msg(id, rpc.INTERNAL_ERROR, "internal error (details in the server's log)"))
    end
    return w
end

--- wait(w) -> the response, or nil when it was cancelled or its session ended
local function wait(w)
    if not w.settled then ctx.await(function(resume) w.wake = resume end) end
    return w.answer
end

-- Cancels a tools/call as notifications/cancelled does on stdio (its worker killed; a session
-- it ran in closed with it); the request is never answered.
local function cancel(w, why)
    if w.settled then return end
    w.cancelled = why
    calls.cancel({ requestId = w.internal, reason = why })
    settle(w, nil)
end

function end_session(peer, why)
    if peers[peer.id] ~= peer then return end
    peers[peer.id] = nil
    for _, w in pairs(peer.requests) do
        w.ended = true
        cancel(w, why)
    end
    sessions.close_owned(peer, why)
    log("session of tenant %s ended (%s)", tostring(peer.tenant), why)
end

--- close_all(why): ends every MCP session (the daemon is stopping)
function _M.close_all(why)
    for _, peer in pairs(peers) do end_session(peer, why) end
end

-- Idle tool sessions and MCP sessions, and "still running" progress: what the stdio server's
-- timer does, started with the first MCP session.
local function start_ticking()
    if ticking then return end
    ticking = true
    local uv = require "luv"
    local every = ctx.floor_ms(math.max(0.1, math.min(S.cfg.session_idle / 2, 1)))
    local timer = uv.new_timer()
    timer:start(every, every, function()
        if S.closing then
            -- the daemon is stopping: the tool sessions' workers may close before it kills them
            _M.close_all("the server is stopping")
            timer:close()
            return
        end
        sessions.tick()
        progress.tick()
        local t = ctx.now()
        for _, peer in pairs(peers) do
            if next(peer.requests) == nil and t - peer.last_used >= S.cfg.session_idle then
                end_session(peer, format("idle for %gs", S.cfg.session_idle))
            end
        end
    end)
    timer:unref()
end

-- ---------------------------------------------------------------------------------------------
-- messages

local function initialize(req, id, params)
    local name = tenant_name(req)
    local n = 0
    for _, p in pairs(peers) do
        if p.tenant == name then n = n + 1 end
    end
    if n >= _M.MAX_PER_TENANT then
        return fail(503, -32000, format("too many MCP sessions open (%d%s): end one with DELETE /mcp", n,
            name and (" for tenant " .. name) or ""), id)
    end
    local sid = new_id()
    if not sid then return fail(500, rpc.INTERNAL_ERROR, "cannot read /dev/urandom for a session id", id) end
    local peer = { id = sid, tenant = name, requests = {}, last_used = ctx.now() }
    policies_of(peer, req)
    local ok, res, code, message, data = pcall(server.methods.initialize, params, peer)
    if not ok then
        log("initialize failed: %s", tostring(res))
        return fail(500, rpc.INTERNAL_ERROR, "internal error (details in the server's log)", id)
    end
    if not res then
        local e = error_msg(id, code, message)
        e.error.data = data
        return 200, json.encode(e)
    end
    peers[sid] = peer
    start_ticking()
    log("session of tenant %s started (protocol %s)", tostring(name), peer.protocol)
    return 200, json.encode({ jsonrpc = "2.0", id = id, result = res }), { ["Mcp-Session-Id"] = sid }
end

local function notification(peer, method, params)
    if method == "notifications/cancelled" then
        -- the client's id, in this session only (never passed on: it is not ours)
        local w = params.requestId ~= nil and peer.requests[rpc.key(params.requestId)]
        if w then cancel(w, type(params.reason) == "string" and params.reason or "cancelled by the client") end
        return
    end
    server.route.notification(method, params)
end

local function accepts_sse(req)
    return (req.headers.accept or ""):find("text/event-stream", 1, true) ~= nil
end

-- One request, answered as JSON, or as an event stream once there is a notification to send first.
local function request(req, peer, id, method, params)
    if peer.requests[rpc.key(id)] then
        return fail(400, rpc.INVALID_REQUEST, format("Invalid Request: id %s is in use by a request in progress in "
            .. "this session", json.encode(id)), id)
    end
    local sse, streaming = accepts_sse(req), false
    local function event(msg)
        if not streaming then
            streaming = true
            req.conn:stream_start(200, { ["Content-Type"] = "text/event-stream", ["Cache-Control"] = "no-cache" })
        end
        req.conn:stream_write("event: message\ndata: " .. json.encode(msg) .. "\n\n")
    end
    local w = start(peer, id, method, params, sse and event or nil)
    -- a client that goes away has its call cancelled, as on stdio when it sends notifications/cancelled
    req.conn.on_gone = function() cancel(w, "the client disconnected") end
    local msg = wait(w)
    req.conn.on_gone = nil
    if req.conn.gone then return fail(499, REQUEST_CANCELLED, "the client disconnected", id) end
    if msg == nil then
        -- cancelled, or the session ended: no answer. A stream can end without one; JSON cannot.
        if sse then
            if not streaming then req.conn:stream_start(200, { ["Content-Type"] = "text/event-stream" }) end
            return 200
        end
        msg = w.ended and error_msg(id, SESSION_GONE, "the MCP session ended: " .. tostring(w.cancelled))
            or error_msg(id, REQUEST_CANCELLED, "the request was cancelled: " .. tostring(w.cancelled))
    end
    if streaming then
        event(msg)
        return 200
    end
    return 200, json.encode(msg)
end

-- A JSON array of messages: MCP 2025-03-26 allows them (2025-06-18 dropped batches). Answered as
-- one JSON array of the responses, once all are done.
local function batch(req, peer, list)
    if peer.protocol >= "2025-06-18" then
        return fail(400, rpc.INVALID_REQUEST, format("Invalid Request: batches (JSON arrays) are not part of MCP %s, "
            .. "which this session negotiated: send one message per POST", peer.protocol))
    end
    local out, waiting = json.array(), {}
    for _, msg in ipairs(list) do
        local kind, a, b, c, quiet = rpc.classify(msg)
        if kind == "request" then
            if b == "initialize" then
                out[#out + 1] = error_msg(a, rpc.INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
            elseif peer.requests[rpc.key(a)] then
                out[#out + 1] = error_msg(a, rpc.INVALID_REQUEST, "Invalid Request: this id is in use by a request in "
                    .. "progress in this session")
            else
                waiting[#waiting + 1] = start(peer, a, b, c)
            end
        elseif kind == "notification" then
            notification(peer, b, c)
        elseif kind == nil and not quiet then
            out[#out + 1] = error_msg(c, a, b)
        end
    end
    req.conn.on_gone = function()
        for _, w in ipairs(waiting) do cancel(w, "the client disconnected") end
    end
    for _, w in ipairs(waiting) do
        -- (cancelled requests get no response)
        out[#out + 1] = wait(w)
    end
    req.conn.on_gone = nil
    if req.conn.gone then return fail(499, REQUEST_CANCELLED, "the client disconnected") end
    if #out == 0 then return 202, "" end
    return 200, json.encode(out)
end

local function post(req)
    local status, body = check_headers(req)
    if status then return status, body end
    local ctype = (req.headers["content-type"] or "application/json"):lower():match("^%s*([^;%s]*)")
    if ctype ~= "application/json" then
        return fail(415, -32000, "Unsupported Media Type: send the JSON-RPC message as Content-Type: application/json")
    end
    local ok, msg = pcall(json.decode, req.body)
    if not ok or msg == nil then return fail(400, rpc.PARSE_ERROR, "Parse error: the body is not JSON") end
    if type(msg) == "table" and not json.is_object(msg) then
        local peer, fstatus, fbody = find(req)
        if not peer then return fstatus, fbody end
        return batch(req, peer, msg)
    end
    local kind, a, b, c = rpc.classify(msg)
    if not kind then return fail(400, a, b, c) end
    if kind == "request" and b == "initialize" then
        -- always a new session: a client that lost its own (404) starts over with the same transport
        return initialize(req, a, c)
    end
    local peer, fstatus, fbody = find(req, a)
    if not peer then return fstatus, fbody end
    peer.last_used = ctx.now()
    if kind == "response" then return 202, "" end
    -- (the method in the access log: the client's string, so cut short)
    if kind == "notification" then
        notification(peer, b, c)
        return 202, "", nil, { mcp = b:sub(1, 64) }
    end
    local rstatus, rbody, rheaders = request(req, peer, a, b, c)
    return rstatus, rbody, rheaders, { mcp = b:sub(1, 64) }
end

local function delete(req)
    local status, body = check_headers(req)
    if status then return status, body end
    local peer, fstatus, fbody = find(req)
    if not peer then return fstatus, fbody end
    end_session(peer, "ended by the client")
    return 200, ""
end

--- routes() -> { ["POST /mcp"] = handler, ["DELETE /mcp"] = handler } for llmbox.serve
function _M.routes()
    return { ["POST /mcp"] = post, ["DELETE /mcp"] = delete }
end

--- count() -> the MCP sessions open
function _M.count()
    local n = 0
    for _ in pairs(peers) do n = n + 1 end
    return n
end

return _M

-- llmbox.mcp.sessions: stateful sessions (create_session, run_in_session, close_session). Each
-- session is one worker holding one sandbox whose /sandbox persists across calls; operations on a
-- session run one at a time, and an idle session is closed after LLMBOX_MCP_SESSION_IDLE seconds.
-- A session opened over HTTP belongs to the MCP session (call.peer) that opened it: to any other
-- peer it is as unknown as one that never existed.
local ctx = require "llmbox.mcp.context"
local results = require "llmbox.mcp.results"
local workers = require "llmbox.mcp.workers"
local progress = require "llmbox.mcp.progress"

local io, ipairs, pairs, pcall, error, tostring = io, ipairs, pairs, pcall, error, tostring
local format, concat = string.format, table.concat
local S, log, await, now = ctx.state, ctx.log, ctx.await, ctx.now

local _M = { _VERSION = "0.1.0" }

local function new_id()
    -- unguessable enough that one client cannot address another's session by counting
    local f = io.open("/dev/urandom", "rb")
    local bytes = f and f:read(8) or tostring(require("luv").hrtime())
    if f then f:close() end
    return "s-" .. bytes:gsub(".", function(c) return format("%02x", c:byte()) end)
end

function _M.close(sess, why)
    if S.sessions[sess.id] ~= sess then return end
    S.sessions[sess.id] = nil
    S.nsessions = S.nsessions - 1
    sess.closed = why
    sess.worker:close()
    log("session %s closed (%s)", sess.id, why)
    for _, resume in ipairs(sess.queue) do resume() end
    sess.queue = {}
end

function _M.close_all(why)
    for _, sess in pairs(S.sessions) do _M.close(sess, why) end
end

--- close_owned(peer, why): closes the sessions an MCP session over HTTP opened
function _M.close_owned(peer, why)
    for _, sess in pairs(S.sessions) do
        if sess.owner == peer then _M.close(sess, why) end
    end
end

local function expire_if_idle(sess, t)
    if not sess.busy and t - sess.last_used >= S.cfg.session_idle then
        _M.close(sess, format("idle for %gs", S.cfg.session_idle))
        return true
    end
end

--- tick(): closes the sessions idle for longer than LLMBOX_MCP_SESSION_IDLE
function _M.tick()
    local t = now()
    for _, sess in pairs(S.sessions) do expire_if_idle(sess, t) end
end

-- The session `id` names, if the call's peer opened it (stdio calls: no peer, nor sessions of one).
local function get(id, call)
    local sess = S.sessions[id]
    if sess and sess.owner ~= call.peer then sess = nil end
    -- expired is expired, whether or not the timer has come round since
    if sess and expire_if_idle(sess, now()) then sess = nil end
    if not sess then
        return nil, format("no open session %q: it was closed, expired after %gs idle, or never existed; "
            .. "create one with create_session", id, S.cfg.session_idle)
    end
    return sess
end

--- with_session(call, id, fn) -> fn(sess)'s result, or a tool error. One operation at a time per
-- session (its worker is one process); others wait their turn.
function _M.with_session(call, id, fn)
    local sess, err = get(id, call)
    if not sess then return results.error(err) end
    if sess.busy then
        await(function(resume) sess.queue[#sess.queue + 1] = resume end)
        if call.cancelled then
            -- pass the turn on: the session is free again and someone may be waiting
            local nxt = not sess.busy and table.remove(sess.queue, 1)
            if nxt then nxt() end
            return nil
        end
        if sess.closed then return results.error(format("session %q was closed: %s", id, sess.closed)) end
    end
    sess.busy = true
    call.session = sess
    local ok, res = pcall(fn, sess)
    sess.busy = false
    sess.last_used = now()
    local nxt = table.remove(sess.queue, 1)
    if nxt then nxt() end
    if not ok then error(res, 0) end
    return res
end

local handlers = {}
_M.handlers = handlers

function handlers.create_session(args, call)
    local default, policies, tenant = ctx.policies(call)
    local policy = args.policy or default
    local allowed = false
    for _, p in ipairs(policies) do allowed = allowed or p == policy end
    if not allowed then
        return results.error(format("policy %q is not allowed %s (allowed: %s; the operator lists more in %s)",
            policy, tenant and ("for tenant " .. tenant) or "by this server", concat(policies, ", "),
            tenant and "the token's policies" or "LLMBOX_MCP_POLICIES"))
    end
    if S.nsessions >= S.cfg.max_sessions then
        return results.error(format("too many open sessions (%d, LLMBOX_MCP_MAX_SESSIONS); close one with "
            .. "close_session", S.nsessions))
    end
    progress.send(call, "starting the sandbox")
    local w, err = workers.open(call, args.language or "python", policy, nil, args.interactive or nil)
    if not w then return results.error(err) end
    call.worker = nil -- cancelling create_session after this point leaves the session open
    local sess = { id = new_id(), worker = w, language = args.language or "python", policy = policy,
        last_used = now(), queue = {}, owner = call.peer, interactive = args.interactive == true }
    S.sessions[sess.id] = sess
    S.nsessions = S.nsessions + 1
    w.on_exit = function() _M.close(sess, "its sandbox worker exited") end
    log("session %s opened (%s, policy %s)", sess.id, sess.language, policy)
    return results.json({ session_id = sess.id, language = sess.language, policy = policy,
        idle_timeout = S.cfg.session_idle, interactive = sess.interactive })
end

function handlers.run_in_session(args, call)
    return _M.with_session(call, args.session_id, function(sess)
        call.worker = sess.worker
        local res, err = sess.worker:request({ op = "run", code = args.code, libraries = args.libraries,
            timeout = args.timeout, stream = call.token ~= nil }, progress.output(call))
        call.worker = nil
        if not res then return results.error(err) end
        return results.run(res)
    end)
end

function handlers.close_session(args, call)
    local sess, err = get(args.session_id, call)
    if not sess then return results.error(err) end
    _M.close(sess, "closed by the client")
    return results.json({ closed = true })
end

return _M

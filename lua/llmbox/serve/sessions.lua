-- llmbox.serve.sessions: the daemon's session routes. A session is one `llmbox worker` holding
-- one sandbox whose /sandbox persists across calls (as the MCP server's sessions); its calls run
-- one at a time, in order; an idle one is closed after LLMBOX_MCP_SESSION_IDLE seconds. Files go
-- through the daemon's private temporary directory (llmbox.mcp.staging) and the worker's copies,
-- which never leave /sandbox.
--
--   POST   /v1/sessions                 {lang?, policy?}              -> 201 {id, language, policy, idle_timeout}
--   POST   /v1/sessions/{id}/run        {code, args?, stdin?, timeout?, libraries?} -> result
--   POST   /v1/sessions/{id}/exec       {cmd (argv or a shell string), stdin?, timeout?} -> result
--   POST   /v1/sessions/{id}/install    {libraries, timeout?}          -> the install's result
--   PUT    /v1/sessions/{id}/files?path=P   (the file's bytes)         -> 201 {path, size}
--   GET    /v1/sessions/{id}/files?path=P   -> the file's bytes, or a tar of a directory
--   DELETE /v1/sessions/{id}                                           -> {closed: true}
local uv = require "luv"
local core = require "llmbox.core"
local json = require "llmbox.json"
local ctx = require "llmbox.mcp.context"
local workers = require "llmbox.mcp.workers"
local staging = require "llmbox.mcp.staging"

local ipairs, pairs, tostring, format = ipairs, pairs, tostring, string.format
local S, await = ctx.state, ctx.await

local _M = { _VERSION = "0.1.0" }

-- The largest file a GET returns (a directory's tar included).
_M.MAX_DOWNLOAD = 16 * 1024 * 1024

local sessions, count = {}, 0

local function new_id()
    local f = io.open("/dev/urandom", "rb")
    local bytes = f and f:read(12) or tostring(uv.hrtime())
    if f then f:close() end
    return "s-" .. bytes:gsub(".", function(c) return format("%02x", c:byte()) end)
end

local function close(sess, why)
    if sessions[sess.id] ~= sess then return end
    sessions[sess.id] = nil
    count = count - 1
    sess.closed = why
    sess.worker:close()
    for _, resume in ipairs(sess.queue) do resume() end
    sess.queue = {}
end

local function expire_if_idle(sess, t)
    if not sess.busy and t - sess.last_used >= S.cfg.session_idle then
        close(sess, format("idle for %gs", S.cfg.session_idle))
        return true
    end
end

--- tick(): closes the sessions idle for LLMBOX_MCP_SESSION_IDLE seconds or more
function _M.tick()
    local t = ctx.now()
    for _, sess in pairs(sessions) do expire_if_idle(sess, t) end
end

--- count() -> the open sessions
function _M.count() return count end

function _M.close_all(why)
    for _, sess in pairs(sessions) do close(sess, why) end
end

-- The session id names, if the request's tenant may see it: another tenant's is as unknown as
-- one that never existed (404, not 403).
local function find(req, id)
    local sess = sessions[id]
    if sess and sess.tenant ~= (req.tenant and req.tenant.tenant) then return nil end
    -- expired is expired, whether or not the timer has come round since
    if sess and expire_if_idle(sess, ctx.now()) then return nil end
    return sess
end

-- One call on a session at a time: fn(sess) -> status, body, headers; a 404 for an unknown id.
local function with_session(api, req, id, fn)
    local sess = find(req, id)
    if not sess then
        return 404, api.err_body("no_session", format("no open session %q: it was closed, expired after %gs idle, "
            .. "or never existed", id, S.cfg.session_idle))
    end
    if sess.busy then
        await(function(resume) sess.queue[#sess.queue + 1] = resume end)
        if sess.closed then return 404, api.err_body("no_session", format("session %q was closed: %s", id, sess.closed)) end
    end
    sess.busy = true
    local ok, status, body, headers = pcall(fn, sess)
    sess.busy = false
    sess.last_used = ctx.now()
    local nxt = table.remove(sess.queue, 1)
    if nxt then nxt() end
    if not ok then error(status, 0) end
    return status, body, headers
end

-- A worker's answer (result, err, raw) as a response.
local function answer(api, res, err, raw)
    if res then return 200, api.result_json(res) end
    if raw and raw.refused then return 422, api.err_body("refused", tostring(err), { violations = raw.violations }) end
    return 422, api.err_body("failed", tostring(err))
end

-- "x.txt" and "/sandbox/x.txt" both mean the workspace's x.txt (as the MCP server's file tools)
local function workspace_path(p)
    if type(p) ~= "string" or p == "" then return nil, "give the file's path: ?path=..." end
    return require("llmbox.mcp.transfer").workspace_path(p)
end

--- routes(api) -> { ["METHOD /v1/sessions/*/verb"] = handler(req, id) }; api: the daemon's helpers
--- (err_body, fields, json_body, allowed_policy, result_json)
function _M.routes(api)
    local r = {}

    r["POST /v1/sessions"] = function(req)
        local doc, status, body = api.json_body(req, true)
        if not doc then return status, body end
        local f, ferr = api.fields(doc, { lang = { "string" }, policy = { "string" }, interactive = { "boolean" } })
        if not f then return 400, api.err_body("bad_request", ferr) end
        local policy, pstatus, pbody = api.allowed_policy(f.policy, req.tenant)
        if not policy then return pstatus, pbody end
        local lang = f.lang or "python"
        local recipe = require("llmbox.recipes").get(lang)
        if not recipe then return 400, api.err_body("bad_request", format("unknown language %q", lang)) end
        if count >= S.cfg.max_sessions then
            return 503, api.err_body("too_many_sessions", format("too many open sessions (%d, "
                .. "LLMBOX_MCP_MAX_SESSIONS): close one with DELETE /v1/sessions/{id}", count))
        end
        local w, err = workers.open({}, recipe.name, policy, nil, f.interactive or nil)
        if not w then return 422, api.err_body("failed", tostring(err)) end
        local sess = { id = new_id(), worker = w, language = recipe.name, policy = policy, last_used = ctx.now(),
            queue = {}, tenant = req.tenant and req.tenant.tenant }
        sessions[sess.id] = sess
        count = count + 1
        w.on_exit = function() close(sess, "its sandbox worker exited") end
        if req.conn.gone then
            close(sess, "the client disconnected")
            return 499, api.err_body("cancelled", "the client disconnected")
        end
        return 201, json.encode({ id = sess.id, language = sess.language, policy = policy,
            idle_timeout = S.cfg.session_idle, interactive = f.interactive == true })
    end

    r["DELETE /v1/sessions/*"] = function(req, id)
        local sess = find(req, id)
        if not sess then return 404, api.err_body("no_session", format("no open session %q", id)) end
        close(sess, "closed by the client")
        return 200, json.encode({ closed = true })
    end

    -- a worker's request on the session; the client's disconnect kills the worker (and so the
    -- session: its state is gone with its sandbox)
    local function on_session(req, id, msg)
        return with_session(api, req, id, function(sess)
            req.conn.on_gone = function() sess.worker:kill("the client disconnected") end
            local res, err, raw = sess.worker:request(msg)
            req.conn.on_gone = nil
            if msg.op == "run" then api.count_run(sess.language, res, raw) end
            return answer(api, res, err, raw)
        end)
    end

    r["POST /v1/sessions/*/run"] = function(req, id)
        local doc, status, body = api.json_body(req)
        if not doc then return status, body end
        local f, ferr = api.fields(doc, { code = { "string", true }, args = { "strings" }, stdin = { "string" },
            timeout = { "number" }, libraries = { "strings" } })
        if not f then return 400, api.err_body("bad_request", ferr) end
        return on_session(req, id, { op = "run", code = f.code, args = f.args, stdin = f.stdin, timeout = f.timeout,
            libraries = f.libraries })
    end

    r["POST /v1/sessions/*/exec"] = function(req, id)
        local doc, status, body = api.json_body(req)
        if not doc then return status, body end
        local cmd = doc.cmd
        doc.cmd = nil
        local f, ferr = api.fields(doc, { stdin = { "string" }, timeout = { "number" } })
        if not f then return 400, api.err_body("bad_request", ferr) end
        local argv_ok = type(cmd) == "table" and #cmd > 0
        for _, a in ipairs(type(cmd) == "table" and cmd or {}) do argv_ok = argv_ok and type(a) == "string" end
        if not argv_ok and not (type(cmd) == "string" and cmd ~= "") then
            return 400, api.err_body("bad_request", "cmd must be an argv (a non-empty array of strings) or a shell string")
        end
        return on_session(req, id, { op = "exec", cmd = cmd, stdin = f.stdin, timeout = f.timeout })
    end

    r["POST /v1/sessions/*/install"] = function(req, id)
        local doc, status, body = api.json_body(req)
        if not doc then return status, body end
        local f, ferr = api.fields(doc, { libraries = { "strings", true }, timeout = { "number" } })
        if not f then return 400, api.err_body("bad_request", ferr) end
        return on_session(req, id, { op = "install", libraries = f.libraries, timeout = f.timeout })
    end

    -- A file operation's failure as its status and code: what the client can fix apart from what it cannot.
    -- (the worker's messages end with the system's own, strerror's, words)
    local function file_failure(what, path, err)
        err = tostring(err)
        local status, code = 422, "failed"
        if err:find("No such file", 1, true) or err:find("does not exist", 1, true) then
            status, code = 404, "not_found"
        elseif err:find("Too many levels of symbolic links", 1, true) then
            status, code = 400, "symlink_refused"
            err = "it is a symbolic link, and the file routes never follow one"
        elseif err:find("Is a directory", 1, true) then
            status, code = 409, "is_a_directory"
            err = "it is a directory: PUT writes files (put each file of a tree by its own path)"
        end
        return status, api.err_body(code, format("cannot %s %s: %s", what, path, err))
    end

    r["PUT /v1/sessions/*/files"] = function(req, id)
        local path, perr = workspace_path(req.query.path)
        if not path then return 400, api.err_body("bad_request", perr) end
        return with_session(api, req, id, function(sess)
            local tmp = staging.path()
            local ok, err = staging.write(tmp, req.body)
            if not ok then
                return 500, api.err_body("staging_failed", format("cannot upload %s: staging it failed: %s; nothing "
                    .. "was written to the sandbox", path, tostring(err)))
            end
            local res, cerr = sess.worker:request({ op = "copy_in", src = tmp, dst = path, size = #req.body })
            staging.discard(tmp)
            if not res then return file_failure("write", path, cerr) end
            return 201, json.encode({ path = path, size = #req.body })
        end)
    end

    r["GET /v1/sessions/*/files"] = function(req, id)
        local path, perr = workspace_path(req.query.path)
        if not path then return 400, api.err_body("bad_request", perr) end
        return with_session(api, req, id, function(sess)
            local tmp = staging.path()
            local res, err = sess.worker:request({ op = "copy_out", src = path, dst = tmp, max = _M.MAX_DOWNLOAD })
            if not res then
                staging.discard(tmp)
                return file_failure("read", path, err)
            end
            local data, rerr, is_dir = staging.read(tmp, _M.MAX_DOWNLOAD)
            if is_dir then
                -- a directory: its tree as a tar (links and special files were skipped by the copy)
                data, rerr = core.tar_host(tmp, ".")
                if data and #data > _M.MAX_DOWNLOAD then
                    data, rerr = nil, format("the archive of %s is larger than %d bytes", path, _M.MAX_DOWNLOAD)
                end
            end
            staging.discard(tmp)
            if not data then return 422, api.err_body("failed", format("cannot read %s: %s", path, tostring(rerr))) end
            return 200, data, { ["Content-Type"] = is_dir and "application/x-tar" or "application/octet-stream" }
        end)
    end

    return r
end

return _M

-- llmbox.mcp.server: `llmbox mcp`, a Model Context Protocol server over stdio (JSON-RPC 2.0, one
-- message per line). stdout carries only protocol messages; everything logged goes to stderr.
--
--   local server = require "llmbox.mcp.server"
--   os.exit(server.main())        -- reads the configuration from the environment, then serves
--
-- One libuv loop (lua-luv) reads stdin and drives the children; requests are answered while runs
-- are in progress, and several runs proceed at once. Sandboxes are built in child processes
-- (`llmbox worker`, see llmbox.mcp.worker), never here: one per execute_code call, one per
-- stateful session. Each tools/call runs as a coroutine that waits on its worker, so a handler
-- reads top to bottom; `notifications/cancelled` kills the worker and no response is sent.
local uv = require "luv"
local json = require "llmbox.json"
local tools = require "llmbox.mcp.tools"
local config = require "llmbox.mcp.config"
local artifacts = require "llmbox.artifacts"
local util = require "llmbox.util"

local io, type, pairs, ipairs, next, select, unpack, tostring, pcall, xpcall = io, type, pairs, ipairs, next,
    select, unpack, tostring, pcall, xpcall
local format, concat = string.format, table.concat
local co_create, co_resume, co_yield, co_running = coroutine.create, coroutine.resume, coroutine.yield,
    coroutine.running

local _M = { _VERSION = "0.1.0" }

-- Newest first; an unknown requested version is answered with the newest (the spec's rule).
_M.PROTOCOL_VERSIONS = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
-- output schemas, structuredContent and tool titles exist from this version on
local MODERN = "2025-06-18"

-- JSON-RPC error codes
local PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR =
    -32700, -32600, -32601, -32602, -32603
local RESOURCE_NOT_FOUND = -32002

local MAX_LINE = 32 * 1024 * 1024      -- an upload_file of ~24 MB fits, base64-encoded
local MAX_DOWNLOAD = 10 * 1024 * 1024
local PROGRESS_EVERY = 5               -- seconds between "still running" notifications
local MAX_PROGRESS_OUTPUT = 500        -- output chunks forwarded as progress per call

-- one write per line: workers share stderr, and a line must not be cut by theirs
local function log(fmt, ...)
    io.stderr:write("llmbox mcp: " .. format(fmt, ...) .. "\n")
    io.stderr:flush()
end

local function now()
    return uv.now() / 1000
end

-- ---------------------------------------------------------------------------------------------
-- the server's state (one per process: stdio is one connection)

local S = {
    cfg = nil,
    exe = nil,
    tmpdir = nil,
    protocol = nil,          -- negotiated version, nil before initialize
    inflight = {},           -- request key -> call state, for cancellation and progress
    sessions = {},           -- session id -> session
    nsessions = 0,
    workers = {},            -- every live worker (for shutdown)
    running = 0,             -- one-shot runs in progress
    warm_idle = {},          -- language -> idle workers holding a pool of ready sandboxes
    warm_count = {},         -- language -> live such workers
    waiting = {},            -- one-shot runs waiting for a slot (max_runs)
    closing = false,
    next_id = 0,
}

local function write_message(msg)
    io.stdout:write(json.encode(msg), "\n")
    io.stdout:flush()
end

local function respond(id, result)
    write_message({ jsonrpc = "2.0", id = id, result = result })
end

local function respond_error(id, code, message, data)
    local err = { code = code, message = message }
    if data ~= nil then err.data = data end
    write_message({ jsonrpc = "2.0", id = id == nil and json.null or id, error = err })
end

local function request_key(id)
    return type(id) .. ":" .. tostring(id)
end

local function modern()
    return S.protocol == nil or S.protocol >= MODERN
end

-- ---------------------------------------------------------------------------------------------
-- coroutines: a handler waits for a callback with await(function(resume) ... end)

local function await(start)
    local co = co_running()
    local done, results = false, nil
    local waiting = false
    start(function(...)
        if done then return end
        done = true
        if waiting then
            local ok, err = co_resume(co, ...)
            if not ok then log("internal error: %s", tostring(err)) end
        else
            results = { n = select("#", ...), ... }
        end
    end)
    if done then return unpack(results, 1, results.n) end
    waiting = true
    return co_yield()
end

local function floor_ms(s)
    return math.floor(s * 1000 + 0.5)
end

-- ---------------------------------------------------------------------------------------------
-- workers: `llmbox worker` children speaking JSON lines (llmbox.mcp.worker)

local Worker = {}
Worker.__index = Worker

local function spawn_worker()
    local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
    local w = setmetatable({ stdin = stdin, stdout = stdout, pending = {}, next_id = 0, buf = "", alive = true },
        Worker)
    -- the worker checks that its parent is still this process (see llmbox.mcp.worker)
    local args = { "worker", "--parent", tostring(uv.os_getpid()) }
    local handle, pid = uv.spawn(S.exe, { args = args, stdio = { stdin, stdout, 2 } },
        function(code, signal)
            w:exited(code, signal)
        end)
    if not handle then
        stdin:close()
        stdout:close()
        return nil, "cannot start the sandbox worker " .. S.exe .. ": " .. tostring(pid)
    end
    w.handle, w.pid = handle, pid
    S.workers[w] = true
    stdout:read_start(function(err, data)
        if err or not data then
            if not stdout:is_closing() then stdout:close() end
            w.eof = true
            w:finish()
            return
        end
        w.buf = w.buf .. data
        while true do
            local nl = w.buf:find("\n", 1, true)
            if not nl then break end
            local line = w.buf:sub(1, nl - 1)
            w.buf = w.buf:sub(nl + 1)
            w:message(line)
        end
    end)
    return w
end

function Worker:message(line)
    local msg = json.decode(line)
    if type(msg) ~= "table" then
        log("worker %d sent a line that is not JSON: %s", self.pid, line:sub(1, 200))
        return
    end
    local p = self.pending[msg.id]
    if not p then return end
    if msg.event then
        if p.on_event then p.on_event(msg) end
        return
    end
    self.pending[msg.id] = nil
    p.done(msg.result, msg.error, msg)
end

function Worker:exited(code, signal)
    self.alive = false
    self.status = { code, signal }
    S.workers[self] = nil
    if not self.handle:is_closing() then self.handle:close() end
    if not self.stdin:is_closing() then self.stdin:close() end
    self:finish()
end

-- Requests still open once the worker has exited and its last output is read failed with it.
function Worker:finish()
    if self.alive or not self.eof or self.finished then return end
    self.finished = true
    local code, signal = self.status[1], self.status[2]
    local why = self.killed and "the run was cancelled"
        or format("the sandbox worker exited unexpectedly (status %s, signal %s)", tostring(code), tostring(signal))
    local pending = self.pending
    self.pending = {}
    for _, p in pairs(pending) do p.done(nil, why, {}) end
    if self.on_exit then self.on_exit(code, signal) end
end

-- request(msg [, on_event]) -> result | nil, err, raw message (waits; call from a handler)
function Worker:request(msg, on_event)
    if not self.alive then return nil, "the sandbox worker is gone" end
    self.next_id = self.next_id + 1
    msg.id = self.next_id
    return await(function(resume)
        self.pending[msg.id] = { done = resume, on_event = on_event }
        self.stdin:write(json.encode(msg) .. "\n")
    end)
end

-- Closing stdin lets the worker close its session and exit on its own.
function Worker:close()
    if self.alive and not self.stdin:is_closing() then self.stdin:shutdown(function() end) end
end

-- Kills the worker and its whole tree. The worker's death alone ends its runs (every process of a
-- run has PR_SET_PDEATHSIG, re-armed after the switch to the sandbox user); killing the tree too,
-- from a snapshot taken first, does not depend on that.
function Worker:kill()
    if self.alive then
        self.killed = true
        local tree = util.descendants(self.pid)
        pcall(self.handle.kill, self.handle, "sigkill")
        for _, pid in ipairs(tree) do uv.kill(pid, "sigkill") end
    end
end

-- ---------------------------------------------------------------------------------------------
-- progress notifications

local function progress(call, message)
    if not call.token or call.cancelled then return end
    call.progress = call.progress + 1
    call.last_progress = now()
    local params = { progressToken = call.token, progress = call.progress }
    if message then params.message = message end
    write_message({ jsonrpc = "2.0", method = "notifications/progress", params = params })
end

local function output_progress(call)
    local forwarded = 0
    return function(ev)
        if ev.event == "phase" then
            progress(call, ev.phase == "install" and "installing libraries" or "running")
        elseif forwarded < MAX_PROGRESS_OUTPUT then
            forwarded = forwarded + 1
            local text = ev.data or ""
            if #text > 1000 then text = text:sub(1, 1000) .. "..." end
            progress(call, ev.event .. ": " .. text)
        end
    end
end

-- ---------------------------------------------------------------------------------------------
-- tool results

local function text_result(text, is_error, structured)
    local r = { content = json.array({ { type = "text", text = text } }) }
    if is_error then r.isError = true end
    if structured and modern() then r.structuredContent = structured end
    return r
end

local function tool_error(msg)
    return text_result(msg, true)
end

local function json_result(t)
    return text_result(json.encode(t), false, t)
end

local MIME = { png = "image/png", svg = "image/svg+xml", html = "text/html" }

-- A run: the JSON summary as text (and structuredContent), then one image block per PNG/SVG plot
-- and an embedded resource per HTML plot (Plotly).
local function run_result(res)
    local plots = res.plots or {}
    res.plots = #plots
    res.cpu_ms = nil
    local r = text_result(json.encode(res), false, res)
    for i, p in ipairs(plots) do
        if p.format == "html" then
            r.content[#r.content + 1] = { type = "resource", resource = {
                uri = format("sandbox://plots/%d.html", i), mimeType = MIME.html, blob = p.data } }
        else
            r.content[#r.content + 1] = { type = "image", data = p.data, mimeType = MIME[p.format] or "image/png" }
        end
    end
    return r
end

-- A failed worker request as a tool result: the sandbox (not the program) failed, or the policy
-- refused the code; either way the model should read why.
local function worker_error(err, raw)
    if raw and raw.refused then
        return text_result(tostring(err), true)
    end
    return tool_error(tostring(err))
end

-- ---------------------------------------------------------------------------------------------
-- the tools

local handlers = {}

local function open_worker(call, lang, policy)
    local w, err = spawn_worker()
    if not w then return nil, err end
    call.worker = w
    local res, oerr = w:request({ op = "open", lang = lang, policy = policy, memory = S.cfg.memory,
        cpus = S.cfg.cpus, backend = S.cfg.backend })
    if not res then
        w:kill()
        return nil, oerr
    end
    return w
end

-- The fast path for execute_code: workers that each hold a small pool of ready sandboxes (with the
-- interpreter already started, where the language can), reused from call to call; every call
-- still gets a fresh, never-used sandbox. At most LLMBOX_MCP_WARM per language; beyond that,
-- calls get one-shot workers.
local function warm_capable(lang)
    local r = require("llmbox.recipes").get(lang)
    return r and r.warm and r.name or nil
end

local function take_warm_worker(lang)
    local idle = S.warm_idle[lang]
    while idle and #idle > 0 do
        local w = table.remove(idle)
        if w.alive then return w end
    end
end

local function start_warm_worker(lang)
    if S.cfg.warm <= 0 or (S.warm_count[lang] or 0) >= S.cfg.warm then return nil end
    local w = spawn_worker()
    if not w then return nil end
    S.warm_count[lang] = (S.warm_count[lang] or 0) + 1
    w.warm_lang = lang
    w.on_exit = function() S.warm_count[lang] = S.warm_count[lang] - 1 end
    local res, err = w:request({ op = "open", lang = lang, policy = S.cfg.policy, memory = S.cfg.memory,
        cpus = S.cfg.cpus, backend = S.cfg.backend, pool = true })
    if not res then
        log("a warm %s worker could not start: %s", lang, tostring(err))
        w:kill()
        return nil
    end
    return w
end

local function give_back(w)
    if w.alive and not S.closing then
        local idle = S.warm_idle[w.warm_lang] or {}
        S.warm_idle[w.warm_lang] = idle
        idle[#idle + 1] = w
    else
        w:close()
    end
end

--- Starts one warm Python worker ahead of the first call (from the main loop, after config).
function _M.prewarm()
    if S.cfg.warm <= 0 or not warm_capable("python") then return end
    local co = co_create(function()
        local w = start_warm_worker("python")
        if w then give_back(w) end
    end)
    local ok, err = co_resume(co)
    if not ok then log("prewarming failed: %s", tostring(err)) end
end

local function release_slot()
    local nxt = table.remove(S.waiting, 1)
    if nxt then
        nxt() -- the slot passes on to the next waiter
    else
        S.running = S.running - 1
    end
end

-- One-shot runs wait for a free slot (LLMBOX_MCP_MAX_RUNS) so an agent that fires many calls at
-- once queues them instead of starting unbounded sandboxes.
local function acquire_slot(call)
    if S.running < S.cfg.max_runs then
        S.running = S.running + 1
        return true
    end
    progress(call, "waiting for a free sandbox slot")
    await(function(resume) S.waiting[#S.waiting + 1] = resume end)
    if call.cancelled then
        release_slot()
        return false
    end
    return true
end


function handlers.execute_code(args, call)
    if not acquire_slot(call) then return nil end
    local ok, result = pcall(function()
        progress(call, "starting the sandbox")
        local lang = args.language or "python"
        local warm_lang = warm_capable(lang)
        local w = warm_lang and (take_warm_worker(warm_lang) or start_warm_worker(warm_lang))
        local err
        if w then
            call.worker = w
        else
            w, err = open_worker(call, lang, S.cfg.policy)
            if not w then return tool_error(err) end
        end
        local res, rerr, raw = w:request({ op = "run", code = args.code, libraries = args.libraries,
            timeout = args.timeout, stream = call.token ~= nil }, output_progress(call))
        if w.warm_lang then give_back(w) else w:close() end
        if not res then return worker_error(rerr, raw) end
        return run_result(res)
    end)
    release_slot()
    if not ok then error(result, 0) end
    return result
end

local function language_info(r)
    return {
        name = r.name, description = r.description,
        aliases = json.array(r.aliases), extensions = json.array(r.extensions),
        plots = r.plots, libraries = r.install ~= nil,
    }
end

local function languages()
    local out = json.array()
    for i, r in ipairs(require("llmbox.recipes").all().list) do out[i] = language_info(r) end
    return out
end

function handlers.get_supported_languages()
    return json_result({ languages = languages() })
end

function handlers.get_language_details(args, call)
    local recipes = require "llmbox.recipes"
    local r, err = recipes.get(args.language)
    if not r then return tool_error(err) end
    local info = language_info(r)
    info.example = r.example or json.null
    info.package_manager = r.details.package_manager or json.null
    info.preinstalled = json.array(r.details.preinstalled or {})
    -- the version as the sandbox sees it, probed in a worker like any run
    local w, werr = open_worker(call, r.name, S.cfg.policy)
    if w then
        local v = w:request({ op = "version" })
        w:close()
        info.version = v and v.version or json.null
    else
        log("get_language_details: %s", tostring(werr))
        info.version = json.null
    end
    return json_result(info)
end

function handlers.check_code(args)
    local recipes = require "llmbox.recipes"
    local checks = require "llmbox.checks"
    local r, err = recipes.get(args.language or "python")
    if not r then return tool_error(err) end
    local p, perr = config.load_policy(S.cfg, S.cfg.policy)
    if not p then return tool_error(perr) end
    local report = checks.check(args.code, r.checks or r.name, p.checks)
    return json_result({ safe = report.safe, blocked = report.blocked and true or false, mode = report.mode,
        violations = json.array(report.violations) })
end

-- sessions ------------------------------------------------------------------------------------

local function new_session_id()
    -- unguessable enough that one client cannot address another's session by counting
    local f = io.open("/dev/urandom", "rb")
    local bytes = f and f:read(8) or tostring(uv.hrtime())
    if f then f:close() end
    return "s-" .. bytes:gsub(".", function(c) return format("%02x", c:byte()) end)
end

local function close_session(sess, why)
    if S.sessions[sess.id] ~= sess then return end
    S.sessions[sess.id] = nil
    S.nsessions = S.nsessions - 1
    sess.closed = why
    sess.worker:close()
    log("session %s closed (%s)", sess.id, why)
    for _, resume in ipairs(sess.queue) do resume() end
    sess.queue = {}
end

local function get_session(id)
    local sess = S.sessions[id]
    if not sess then
        return nil, format("no open session %q: it was closed, expired after %gs idle, or never existed; "
            .. "create one with create_session", id, S.cfg.session_idle)
    end
    return sess
end

-- One operation at a time per session (its worker is one process); others wait their turn.
local function with_session(call, id, fn)
    local sess, err = get_session(id)
    if not sess then return tool_error(err) end
    if sess.busy then
        await(function(resume) sess.queue[#sess.queue + 1] = resume end)
        if call.cancelled then
            -- pass the turn on: the session is free again and someone may be waiting
            local nxt = not sess.busy and table.remove(sess.queue, 1)
            if nxt then nxt() end
            return nil
        end
        if sess.closed then return tool_error(format("session %q was closed: %s", id, sess.closed)) end
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

function handlers.create_session(args, call)
    local policy = args.policy or S.cfg.policy
    local allowed = false
    for _, p in ipairs(S.cfg.policies) do allowed = allowed or p == policy end
    if not allowed then
        return tool_error(format("policy %q is not allowed by this server (allowed: %s; the operator lists "
            .. "more in LLMBOX_MCP_POLICIES)", policy, concat(S.cfg.policies, ", ")))
    end
    if S.nsessions >= S.cfg.max_sessions then
        return tool_error(format("too many open sessions (%d, LLMBOX_MCP_MAX_SESSIONS); close one with close_session",
            S.nsessions))
    end
    progress(call, "starting the sandbox")
    local w, err = open_worker(call, args.language or "python", policy)
    if not w then return tool_error(err) end
    call.worker = nil -- cancelling create_session after this point leaves the session open
    local sess = { id = new_session_id(), worker = w, language = args.language or "python", policy = policy,
        last_used = now(), queue = {} }
    S.sessions[sess.id] = sess
    S.nsessions = S.nsessions + 1
    w.on_exit = function() close_session(sess, "its sandbox worker exited") end
    log("session %s opened (%s, policy %s)", sess.id, sess.language, policy)
    return json_result({ session_id = sess.id, language = sess.language, policy = policy,
        idle_timeout = S.cfg.session_idle })
end

function handlers.run_in_session(args, call)
    return with_session(call, args.session_id, function(sess)
        call.worker = sess.worker
        local res, err, raw = sess.worker:request({ op = "run", code = args.code, libraries = args.libraries,
            timeout = args.timeout, stream = call.token ~= nil }, output_progress(call))
        call.worker = nil
        if not res then return worker_error(err, raw) end
        return run_result(res)
    end)
end

-- "x.txt" and "/sandbox/x.txt" both mean the workspace's x.txt; anything else is refused here,
-- and the copy itself never leaves /sandbox (openat2 beneath, no symlinks; see the README).
local function workspace_path(p)
    if p:sub(1, 1) ~= "/" then p = "/sandbox/" .. p end
    if p:sub(1, 9) ~= "/sandbox/" or #p == 9 then
        return nil, format("path %q is outside the workspace: give a path under /sandbox/ or relative to it", p)
    end
    if ("/" .. p .. "/"):find("/%.%.?/") then
        return nil, format("path %q must not contain . or .. components", p)
    end
    return p
end

local tmp_seq = 0
local function tmp_path()
    tmp_seq = tmp_seq + 1
    return format("%s/f%d", S.tmpdir, tmp_seq)
end

function handlers.upload_file(args, call)
    local path, perr = workspace_path(args.path)
    if not path then return tool_error(perr) end
    local data = args.content
    if args.encoding == "base64" then
        local d, derr = artifacts.unbase64(data)
        if not d then return tool_error("content: " .. derr) end
        data = d
    end
    return with_session(call, args.session_id, function(sess)
        local tmp = tmp_path()
        local f = assert(io.open(tmp, "wb"))
        f:write(data)
        f:close()
        local res, err = sess.worker:request({ op = "copy_in", src = tmp, dst = path })
        os.remove(tmp)
        if not res then return tool_error(format("cannot write %s: %s", path, tostring(err))) end
        return json_result({ path = path, size = #data })
    end)
end

local function is_text(data)
    return not data:find("%z") and util.utf8_repair(data) == data
end

function handlers.download_file(args, call)
    local path, perr = workspace_path(args.path)
    if not path then return tool_error(perr) end
    return with_session(call, args.session_id, function(sess)
        local tmp = tmp_path()
        local res, err = sess.worker:request({ op = "copy_out", src = path, dst = tmp, max = MAX_DOWNLOAD })
        if not res then
            os.remove(tmp)
            return tool_error(format("cannot read %s: %s", path, tostring(err)))
        end
        local f = io.open(tmp, "rb")
        local data = f and f:read("*a")
        if f then f:close() end
        os.remove(tmp)
        if not data then
            artifacts.remove_tree(tmp)
            return tool_error(format("%s is a directory: download files one at a time", path))
        end
        local text = is_text(data)
        return json_result({ path = path, size = #data, encoding = text and "text" or "base64",
            content = text and data or artifacts.base64(data) })
    end)
end

function handlers.close_session(args)
    local sess, err = get_session(args.session_id)
    if not sess then return tool_error(err) end
    close_session(sess, "closed by the client")
    return json_result({ closed = true })
end

-- ---------------------------------------------------------------------------------------------
-- JSON-RPC methods

local methods = {}

function methods.initialize(params)
    if type(params.protocolVersion) ~= "string" then
        return nil, INVALID_PARAMS, "initialize: params.protocolVersion must be a string such as \""
            .. _M.PROTOCOL_VERSIONS[1] .. "\""
    end
    local version = _M.PROTOCOL_VERSIONS[1]
    for _, v in ipairs(_M.PROTOCOL_VERSIONS) do
        if v == params.protocolVersion then version = v end
    end
    S.protocol = version
    local client = type(params.clientInfo) == "table" and params.clientInfo or {}
    log("initialize: client %s %s, protocol %s (asked %s)", tostring(client.name), tostring(client.version),
        version, params.protocolVersion)
    local info = { name = "llmbox", version = require("llmbox.core").VERSION }
    if version >= MODERN then info.title = "llmbox sandbox" end
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

methods["tools/list"] = function()
    return { tools = tools.list("mcp", modern()) }
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
        return nil, INVALID_PARAMS, "resources/read: params.uri must be a string"
    end
    if params.uri ~= LANGUAGES_URI then
        return nil, RESOURCE_NOT_FOUND, "Resource not found: " .. params.uri, { uri = params.uri }
    end
    return { contents = json.array({ { uri = LANGUAGES_URI, mimeType = "application/json",
        text = json.encode(languages()) } }) }
end

-- tools/call runs as a coroutine; the response is sent when it finishes, unless cancelled.
local function call_tool(id, params)
    if type(params.name) ~= "string" then
        return respond_error(id, INVALID_PARAMS, "tools/call: params.name must be a tool name")
    end
    local handler = handlers[params.name]
    if not handler then
        return respond_error(id, INVALID_PARAMS, format("Unknown tool: %s (tools/list lists them)", params.name))
    end
    local args = params.arguments
    if args == nil or args == json.null then args = {} end
    if not json.is_object(args) then
        return respond_error(id, INVALID_PARAMS, "tools/call: params.arguments must be an object")
    end
    local meta = type(params._meta) == "table" and params._meta or {}
    local token = meta.progressToken
    if type(token) ~= "string" and type(token) ~= "number" then token = nil end
    local key = request_key(id)
    local call = { id = id, key = key, token = token, progress = 0, last_progress = now(), started = now() }
    S.inflight[key] = call
    local co = co_create(function()
        local result
        -- invalid arguments are a tool error the model can read and correct (MCP 2025-11-25)
        local valid, verr = tools.validate(params.name, args)
        if not valid then
            result = tool_error(format("invalid arguments for %s: %s", params.name, verr))
        else
            local ok, res = xpcall(handler, debug.traceback, args, call)
            if not ok then
                log("%s failed: %s", params.name, tostring(res))
                if not call.cancelled then
                    respond_error(id, INTERNAL_ERROR, "internal error in " .. params.name .. " (details in the server's log)")
                end
                S.inflight[key] = nil
                return _M.stop_when_idle()
            end
            result = res
        end
        if S.inflight[key] == call then S.inflight[key] = nil end
        if not call.cancelled and result then respond(id, result) end
        _M.stop_when_idle()
    end)
    local ok, err = co_resume(co)
    if not ok then log("internal error: %s", tostring(err)) end
end

local function cancel(params)
    if type(params) ~= "table" or params.requestId == nil then return end
    local call = S.inflight[request_key(params.requestId)]
    if not call then return end -- finished already, or never existed: nothing to do (per spec)
    S.inflight[call.key] = nil
    call.cancelled = true
    log("request %s cancelled%s", tostring(call.id),
        type(params.reason) == "string" and (": " .. params.reason) or "")
    if call.worker then
        call.worker:kill()
        if call.session then close_session(call.session, "a run in it was cancelled") end
    end
    _M.stop_when_idle()
end

-- ---------------------------------------------------------------------------------------------
-- dispatch

local function valid_id(id)
    return type(id) == "string" or (type(id) == "number" and id == id)
end

local function handle_message(msg)
    if type(msg) ~= "table" or not json.is_object(msg) or next(msg) == nil then
        if type(msg) == "table" and next(msg) ~= nil then
            return respond_error(nil, INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not supported; "
                .. "send one message per line")
        end
        return respond_error(nil, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object")
    end
    local id = msg.id
    local has_id = id ~= nil
    if has_id and not valid_id(id) then
        return respond_error(nil, INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    end
    if msg.jsonrpc ~= "2.0" then
        return respond_error(id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    end
    if msg.method == nil and (msg.result ~= nil or msg.error ~= nil) then
        return -- a response to a request of ours: we send none, so there is nothing to match
    end
    if type(msg.method) ~= "string" then
        return respond_error(id, INVALID_REQUEST, 'Invalid Request: "method" must be a string')
    end
    local params = msg.params
    if params == nil or params == json.null then params = {} end
    if not json.is_object(params) then
        if has_id then respond_error(id, INVALID_PARAMS, "params must be an object") end
        return
    end
    if not has_id then
        if msg.method == "notifications/cancelled" then cancel(params) end
        -- notifications/initialized and anything unknown: nothing to answer
        return
    end
    if msg.method == "tools/call" then return call_tool(id, params) end
    local m = methods[msg.method]
    if not m then
        return respond_error(id, METHOD_NOT_FOUND, "Method not found: " .. msg.method)
    end
    local ok, res, code, message, data = pcall(m, params)
    if not ok then
        log("%s failed: %s", msg.method, tostring(res))
        return respond_error(id, INTERNAL_ERROR, "internal error (details in the server's log)")
    end
    if res == nil then return respond_error(id, code, message, data) end
    respond(id, res)
end

local function handle_line(line)
    if line:sub(-1) == "\r" then line = line:sub(1, -2) end
    if line:find("^%s*$") then return end
    local msg, err = json.decode(line)
    if msg == nil and err then
        return respond_error(nil, PARSE_ERROR, "Parse error: " .. tostring(err))
    end
    handle_message(msg)
end

-- ---------------------------------------------------------------------------------------------
-- the loop

local function shutdown()
    if S.closing then return end
    S.closing = true
    for _, sess in pairs(S.sessions) do close_session(sess, "the server is stopping") end
    for _, idle in pairs(S.warm_idle) do
        for _, w in ipairs(idle) do w:close() end
    end
    S.warm_idle = {}
    for _, call in pairs(S.inflight) do
        call.cancelled = true
        if call.worker then call.worker:kill() end
    end
    -- give workers a moment to close their sessions, then make sure
    local t = uv.new_timer()
    local waited = 0
    t:start(50, 50, function()
        waited = waited + 50
        if next(S.workers) == nil or waited >= 3000 then
            for w in pairs(S.workers) do w:kill() end
            t:close()
            if next(S.workers) == nil or waited >= 3500 then uv.stop() end
        end
    end)
end

function _M.stop_when_idle()
    if S.eof and next(S.inflight) == nil then shutdown() end
end

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
    local buf, skipping = "", false
    read_stdin(function(data)
        if not data then
            if buf ~= "" and not skipping then handle_line(buf) end
            buf = ""
            -- calls in progress still get their answers (a script may pipe requests in and
            -- close its end); SIGTERM stops without waiting
            S.eof = true
            log("end of input, stopping%s", next(S.inflight) and " when the calls in progress finish" or "")
            return _M.stop_when_idle()
        end
        buf = buf .. data
        while true do
            local nl = buf:find("\n", 1, true)
            if not nl then break end
            local line = buf:sub(1, nl - 1)
            buf = buf:sub(nl + 1)
            if skipping then
                skipping = false
            else
                handle_line(line)
            end
        end
        if #buf > MAX_LINE then
            respond_error(nil, PARSE_ERROR, format("Parse error: message longer than %d bytes", MAX_LINE))
            buf, skipping = "", true
        end
    end)
    -- idle sessions, and "still running" progress for calls that print nothing
    local tick = math.max(0.1, math.min(S.cfg.session_idle / 2, 1))
    local timer = uv.new_timer()
    timer:start(floor_ms(tick), floor_ms(tick), function()
        local t = now()
        for _, sess in pairs(S.sessions) do
            if not sess.busy and t - sess.last_used >= S.cfg.session_idle then
                close_session(sess, format("idle for %gs", S.cfg.session_idle))
            end
        end
        for _, call in pairs(S.inflight) do
            if call.token and t - call.last_progress >= PROGRESS_EVERY then
                progress(call, format("running, %d s", math.floor(t - call.started)))
            end
        end
    end)
    timer:unref()
    for _, signame in ipairs({ "sigterm", "sigint" }) do
        local sig = uv.new_signal()
        sig:start(signame, function() log("%s, stopping", signame); shutdown() end)
        sig:unref()
    end
    _M.prewarm()
    uv.run("default")
end

--- main() -> exit status. Validates the environment, then serves until end of input.
function _M.main(opts)
    opts = opts or {}
    local cfg, err = config.from_env(opts.env)
    if not cfg then
        for line in err:gmatch("[^\n]+") do log("configuration error: %s", line) end
        log("refusing to start; fix the environment variables above")
        return 125
    end
    for _, note in ipairs(cfg.notes) do log("note: %s", note) end
    S.cfg = cfg
    S.exe = opts.exe or uv.exepath()
    local dir, derr = uv.fs_mkdtemp((os.getenv("TMPDIR") or "/tmp") .. "/llmbox-mcp-XXXXXX")
    if not dir then
        log("cannot create a temporary directory: %s", tostring(derr))
        return 125
    end
    S.tmpdir = dir
    log("serving on stdio (%s)", config.describe(cfg))
    local ok, serr = xpcall(serve, debug.traceback)
    artifacts.remove_tree(S.tmpdir)
    if not ok then
        log("internal error: %s", tostring(serr))
        return 125
    end
    return 0
end

return _M

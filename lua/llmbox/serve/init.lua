-- llmbox.serve: `llmbox serve`, the daemon that every client can share (issue 14). One libuv loop
-- (lua-luv) serves HTTP/1.1 (llmbox.serve.http, parsed by http-parser) on a unix socket; runs
-- happen in `llmbox worker` children, never in the daemon (the MCP server's workers, with their
-- warm pools, slots and reaper: llmbox.mcp.workers), so one slow run holds up nobody.
--
-- It serves GET /healthz, GET /v1/languages, /v1/policies, /v1/backends, POST /v1/check and
-- POST /v1/run (this file), the session routes (llmbox.serve.sessions), MCP's Streamable HTTP
-- transport at /mcp (llmbox.serve.mcp_http) and GET /metrics (llmbox.serve.metrics), answering
-- JSON and errors as { error = { code, message } }, on unix sockets and, with the config file's
-- tokens (llmbox.serve.config), TCP; a token names a tenant, its policies and its sessions.
-- SIGHUP reloads the config file and the policies (llmbox.serve.snapshot).
--
--   os.exit(require("llmbox.serve").main({ "--listen", "unix:/tmp/llmbox.sock" }))
local uv = require "luv"
local json = require "llmbox.json"
local http = require "llmbox.serve.http"
local ctx = require "llmbox.mcp.context"
local workers = require "llmbox.mcp.workers"
local tmpdir = require "llmbox.mcp.tmpdir"
local sessions = require "llmbox.serve.sessions"
local metrics = require "llmbox.serve.metrics"
local mcp_http = require "llmbox.serve.mcp_http"

local type, ipairs, pairs, next, tostring, tonumber, format = type, ipairs, pairs, next, tostring, tonumber,
    string.format
local S = ctx.state

local _M = { _VERSION = "0.1.0" }

local function log(fmt, ...)
    io.stderr:write("llmbox serve: " .. format(fmt, ...) .. "\n")
    io.stderr:flush()
end

-- One JSON line per request on stderr: what an operator greps and ships.
local function access_log(req, status, started, extra)
    local line = { route = req.method .. " " .. req.path, status = status,
        duration_ms = math.floor((uv.hrtime() / 1e6 - started) * 1000 + 0.5) / 1000 }
    for k, v in pairs(extra or {}) do line[k] = v end
    io.stderr:write(json.encode(line), "\n")
end

--- the default socket: /run/llmbox/llmbox.sock as root, else $XDG_RUNTIME_DIR/llmbox.sock
function _M.default_listen(getenv, uid)
    getenv = getenv or os.getenv
    if (uid or uv.getuid()) == 0 then
        return "unix:/run/llmbox/llmbox.sock"
    end
    local dir = getenv("XDG_RUNTIME_DIR")
    if dir and dir ~= "" then return "unix:" .. dir .. "/llmbox.sock" end
    return nil
end

--- parse_listen("unix:/path" | "HOST:PORT", have_tokens) -> { unix = path } | { host, port } | nil, err
function _M.parse_listen(addr, have_tokens)
    local path = addr:match("^unix:(.+)$")
    if path then
        if path:sub(1, 1) ~= "/" then return nil, format("--listen %s: the socket's path must be absolute", addr) end
        return { unix = path }
    end
    local host, port = addr:match("^%[?([%w%.%-:]-)%]?:(%d+)$")
    if host and host ~= "" then
        if not have_tokens then
            return nil, format("--listen %s: a TCP listener needs client tokens: give them in a config file "
                .. "(--config FILE, tokens = { ... }), or listen on a unix socket (unix:/path), whose file "
                .. "permissions say who may connect", addr)
        end
        port = tonumber(port)
        if port > 65535 then return nil, format("--listen %s: no such port", addr) end
        return { host = host, port = port }
    end
    return nil, format("--listen %s: expected unix:/path or HOST:PORT", addr)
end

local function err_body(code, message, extra)
    local e = { code = code, message = message }
    for k, v in pairs(extra or {}) do e[k] = v end
    return json.encode({ error = e })
end

-- The request's JSON object, or nil, status, body (allow_empty: no body is {}).
local function json_body(req, allow_empty)
    if req.body == "" and allow_empty then return {} end
    if req.body == "" then return nil, 400, err_body("bad_request", "expected a JSON object in the request body") end
    local ok, doc = pcall(json.decode, req.body)
    if not ok or type(doc) ~= "table" or not json.is_object(doc) then
        return nil, 400, err_body("bad_request", "the request body is not a JSON object")
    end
    return doc
end

local function field(doc, name, kind, required)
    local v = doc[name]
    if v == nil or v == json.null then
        if required then return nil, format("%s is required", name) end
        return nil
    end
    if kind == "strings" then
        if type(v) ~= "table" then return nil, format("%s must be an array of strings", name) end
        for _, s in ipairs(v) do
            if type(s) ~= "string" then return nil, format("%s must be an array of strings", name) end
        end
        return v
    end
    if type(v) ~= kind then return nil, format("%s must be a %s", name, kind) end
    return v
end

-- Checks a request's fields against { name = { kind, required } }; unknown fields are refused.
local function fields(doc, spec)
    for k in pairs(doc) do
        if not spec[k] then
            local known = {}
            for n in pairs(spec) do known[#known + 1] = n end
            table.sort(known)
            return nil, format("unknown field %q (known: %s)", tostring(k), table.concat(known, ", "))
        end
    end
    local out = {}
    for name, s in pairs(spec) do
        local v, err = field(doc, name, s[1], s[2])
        if err then return nil, err end
        out[name] = v
    end
    return out
end

local routes = {}

routes["GET /healthz"] = function()
    return 200, json.encode({ status = "ok", version = require("llmbox.core").VERSION })
end

routes["GET /v1/languages"] = function()
    local out = json.array()
    for _, r in ipairs(require("llmbox").langs()) do
        out[#out + 1] = { name = r.name, aliases = json.array(r.aliases), extensions = json.array(r.extensions),
            description = r.description, plots = r.plots, libraries = r.install ~= nil,
            interactive = r.interactive ~= false }
    end
    return 200, json.encode(out)
end

routes["GET /v1/policies"] = function()
    return 200, json.encode(json.array(require("llmbox").policies()))
end

routes["GET /v1/backends"] = function()
    local list = require("llmbox").backends()
    for _, b in ipairs(list) do
        b.aliases, b.capabilities = json.array(b.aliases), json.array(b.capabilities)
    end
    return 200, json.encode(json.array(list))
end

-- The policy a request asks for, if the operator lets clients pick it: the daemon's own
-- (LLMBOX_POLICY) and those LLMBOX_MCP_POLICIES lists, as the MCP server's clients may pick; a
-- client must never choose a looser one on its own. -> name | nil, status, body
local function allowed_policy(name, tenant)
    local allowed = tenant and tenant.policies or S.cfg.policies
    name = name or (tenant and tenant.default_policy) or S.cfg.policy
    for _, p in ipairs(allowed) do
        if p == name then return name end
    end
    return nil, 403, err_body("policy_not_allowed", format("policy %q is not allowed %s (allowed: %s%s)", name,
        tenant and ("for tenant " .. tenant.tenant) or "by this server", table.concat(allowed, ", "),
        tenant and "; the operator lists more in the token's policies" or "; the operator lists more in LLMBOX_MCP_POLICIES"))
end

-- A worker's result as the answer's JSON: the arrays it held, empty ones included, stay arrays.
local function result_json(res)
    res.plots = json.array(res.plots or {})
    if res.warnings then res.warnings = json.array(res.warnings) end
    return json.encode(res)
end

--- count_run(lang, result, raw): a finished run (or one that could not be) in the metrics
function _M.count_run(lang, res, raw)
    if not res then return metrics.run(lang, raw and raw.refused and "refused" or "error") end
    local limit = res.limit ~= json.null and res.limit or nil
    metrics.run(lang, limit and "limit" or res.exit_code == 0 and "ok" or "failed", (res.duration_ms or 0) / 1000, limit)
end

routes["GET /metrics"] = function()
    local gauges = {
        { "llmbox_sessions_open", "open sessions", sessions.count() },
        { "llmbox_runs_in_progress", "one-shot runs and checks holding a slot", S.running },
    }
    for lang, idle in pairs(S.warm_idle) do
        gauges[#gauges + 1] = { "llmbox_warm_workers_idle", "warm workers waiting for a run, by language", #idle,
            { language = lang } }
    end
    return 200, metrics.text(gauges), { ["Content-Type"] = "text/plain; version=0.0.4" }
end

local RUN_FIELDS = { lang = { "string" }, code = { "string", true }, args = { "strings" }, stdin = { "string" },
    timeout = { "number" }, policy = { "string" }, libraries = { "strings" } }

-- A call for the workers' slots and cancellation (llmbox.mcp.workers).
local function new_call(req)
    local call = {}
    req.conn.on_gone = function()
        call.cancelled = true
        if call.worker then call.worker:kill("the client disconnected") end
    end
    return call
end

routes["POST /v1/run"] = function(req)
    local doc, status, body = json_body(req)
    if not doc then return status, body end
    local f, ferr = fields(doc, RUN_FIELDS)
    if not f then return 400, err_body("bad_request", ferr) end
    if f.code == "" then return 400, err_body("bad_request", "code is empty") end
    local lang = f.lang or "python"
    local recipe = require("llmbox.recipes").get(lang)
    if not recipe then return 400, err_body("bad_request", format("unknown language %q (GET /v1/languages)", lang)) end
    local policy, pstatus, pbody = allowed_policy(f.policy, req.tenant)
    if not policy then return pstatus, pbody end
    -- Accept: text/event-stream: the output as it comes (stdout, stderr and phase events), then
    -- the result (or an error) as the last event
    local sse
    if (req.headers.accept or ""):find("text/event-stream", 1, true) then
        req.conn:stream_start(200, { ["Content-Type"] = "text/event-stream", ["Cache-Control"] = "no-cache" })
        sse = function(msg)
            local data = msg.event == "phase" and { phase = msg.phase } or { data = msg.data }
            req.conn:stream_write(format("event: %s\ndata: %s\n\n", msg.event, json.encode(data)))
        end
    end
    local call = new_call(req)
    -- (with_slot passes one value on)
    local out = workers.with_slot(call, function()
        -- the warm workers hold sandboxes of the daemon's policy: another policy gets a fresh worker
        local warm = policy == S.cfg.policy and workers.warm_capable(recipe.name)
        local w = warm and workers.take_warm(warm)
        if warm then
            metrics.warm(w ~= nil)
            -- the next one gets ready while this one runs
            if w then workers.refill(warm) end
        end
        w = w or (warm and workers.start_warm(warm))
        local oerr
        if w then
            call.worker = w
        else
            w, oerr = workers.open(call, recipe.name, policy, true)
            if not w then return { nil, oerr } end
        end
        local r, rerr, rraw = w:request({ op = "run", code = f.code, libraries = f.libraries, timeout = f.timeout,
            args = f.args, stdin = f.stdin, stream = sse ~= nil }, sse)
        if w.warm_lang then workers.give_back(w) else w:close() end
        return { r, rerr, rraw }
    end)
    if call.cancelled or not out then return 499, err_body("cancelled", "the client disconnected") end
    local res, err, raw = out[1], out[2], out[3]
    local code, answer, extra
    if res then
        code, answer, extra = 200, result_json(res), { limit = res.limit ~= json.null and res.limit or nil }
    elseif raw and raw.refused then
        code, answer = 422, err_body("refused", tostring(err), { violations = raw.violations })
    elseif S.closing then
        code, answer = 503, err_body("shutting_down", "the server is stopping: the run was stopped after its grace")
    else
        code, answer = 422, err_body("run_failed", tostring(err))
    end
    _M.count_run(recipe.name, res, raw)
    if sse then
        req.conn:stream_write(format("event: %s\ndata: %s\n\n", res and "result" or "error", answer))
    end
    return code, answer, nil, extra
end

routes["POST /v1/check"] = function(req)
    local doc, status, body = json_body(req)
    if not doc then return status, body end
    local f, ferr = fields(doc, { code = { "string", true }, lang = { "string" }, policy = { "string" } })
    if not f then return 400, err_body("bad_request", ferr) end
    local policy, pstatus, pbody = allowed_policy(f.policy, req.tenant)
    if not policy then return pstatus, pbody end
    local call = new_call(req)
    local out = workers.with_slot(call, function()
        local w, serr = workers.spawn()
        if not w then return { nil, serr } end
        call.worker = w
        local r, cerr = w:request({ op = "check", code = f.code, lang = f.lang or "python",
            policy = policy, memory = S.cfg.memory }, nil, 120)
        w:close()
        return { r, cerr }
    end)
    if call.cancelled or not out then return 499, err_body("cancelled", "the client disconnected") end
    local report, err = out[1], out[2]
    if not report then return 422, err_body("check_failed", tostring(err)) end
    report.violations = json.array(report.violations or {})
    return 200, json.encode(report)
end

for key, fn in pairs(sessions.routes({ err_body = err_body, fields = fields, json_body = json_body,
    allowed_policy = allowed_policy, result_json = result_json, count_run = _M.count_run })) do
    routes[key] = fn
end

-- MCP's Streamable HTTP transport: POST and DELETE /mcp (GET is 405: no server-initiated stream)
for key, fn in pairs(mcp_http.routes()) do
    routes[key] = fn
end

-- Routes by path pattern ("*" is an id: letters, digits and dashes), and the methods of each.
local PATTERNS = {}
for key, fn in pairs(routes) do
    local m, path = key:match("^(%S+) (.+)$")
    local pat = "^" .. path:gsub("%*", "([%%w%%-]+)") .. "$"
    PATTERNS[pat] = PATTERNS[pat] or { methods = {}, handlers = {}, path = path }
    table.insert(PATTERNS[pat].methods, m)
    table.sort(PATTERNS[pat].methods)
    PATTERNS[pat].handlers[m] = fn
end

-- Constant time for strings of one length: a client learns nothing from how long a refusal took.
local function same(a, b)
    local diff = #a == #b and 0 or 1
    for i = 1, math.max(#a, #b) do
        diff = bit.bor(diff, bit.bxor(a:byte(i) or 0, b:byte(i) or 0))
    end
    return diff == 0
end

-- The tenant of a request's bearer token (every token is compared, found or not), or nil.
local function tenant_of(req, tokens)
    local given = (req.headers.authorization or ""):match("^[Bb]earer%s+(%S+)%s*$") or ""
    local found
    for token, entry in pairs(tokens) do
        if same(given, token) then found = entry end
    end
    return found
end

local SERVE = { tokens = nil, limits = nil }

local function handle(req)
    local started = uv.hrtime() / 1e6
    local status, body, headers, extra
    if SERVE.tokens and not (req.method == "GET" and req.path == "/healthz") then
        req.tenant = tenant_of(req, SERVE.tokens)
        if not req.tenant then
            status, body, headers = 401, err_body("unauthorized", "give a token this server knows: "
                .. "Authorization: Bearer <token>"), { ["WWW-Authenticate"] = 'Bearer realm="llmbox"' }
            access_log(req, status, started)
            metrics.request("unauthorized", status)
            return status, body, headers
        end
        extra = { tenant = req.tenant.tenant }
    end
    local route = "unmatched"
    for pat, p in pairs(PATTERNS) do
        local id = req.path:match(pat)
        if id then
            route = req.method .. " " .. p.path
            local fn = p.handlers[req.method]
            if fn then
                local more
                status, body, headers, more = fn(req, id ~= req.path and id or nil)
                for k, v in pairs(more or {}) do
                    extra = extra or {}
                    extra[k] = v
                end
            else
                local allow = table.concat(p.methods, ", ")
                status, body, headers = 405, err_body("method_not_allowed", format("%s %s: use %s", req.method,
                    req.path, allow)), { Allow = allow }
            end
            break
        end
    end
    if not status then status, body = 404, err_body("not_found", format("no route %s %s", req.method, req.path)) end
    metrics.request(route, status)
    access_log(req, status, started, extra)
    return status, body, headers
end

local function usage_error(msg)
    io.stderr:write("llmbox: ", msg, "\n")
    return 125
end

-- The configuration file's settings (the defaults without one) -> conf | nil, err
local function load_conf(config_file)
    if not config_file then
        return { listen = {}, tokens = {}, pools = {}, limits = { max_body = http.LIMITS.max_body,
            max_head = http.LIMITS.max_head, idle = http.LIMITS.idle_ms / 1000 } }
    end
    return require("llmbox.serve.config").load(config_file)
end

-- Takes the policies' snapshot number gen and checks, from it, the config file and every policy
-- a client may pick (and what more `accept(conf)` asks). -> conf, snapshot dir | nil, err
local function load_all(config_file, gen, accept)
    local conf
    local root, err = require("llmbox.serve.snapshot").take(S.tmpdir, gen, function()
        local c, cerr = load_conf(config_file)
        if not c then return nil, cerr end
        local policy = require "llmbox.policy"
        for _, name in ipairs(S.cfg.policies) do
            local p, perr = policy.load(name)
            if not p then return nil, format("policy %q: %s", name, tostring(perr)) end
        end
        if accept then
            local ok, aerr = accept(c)
            if not ok then return nil, aerr end
        end
        conf = c
        return true
    end)
    if not root then return nil, err end
    return conf, root
end

-- The config's pools and run limit onto the workers' settings (the environment's where it says nothing).
local ENV_RUNS
local function apply_workers(conf)
    ENV_RUNS = ENV_RUNS or S.cfg.max_runs
    S.cfg.max_runs = conf.limits.max_runs or ENV_RUNS
    local by_lang = {}
    for lang, n in pairs(conf.pools) do by_lang[require("llmbox.recipes").get(lang).name] = n end
    S.cfg.warm_by_lang = by_lang
    for lang in pairs(by_lang) do workers.refill(lang) end
end

local function limits_of(conf)
    return { max_body = conf.limits.max_body, max_head = conf.limits.max_head,
        idle_ms = math.floor(conf.limits.idle * 1000) }
end

--- main(args) -> exit status: serves until SIGTERM or SIGINT; SIGHUP reloads
function _M.main(args)
    local listens, config_file = {}, nil
    local i = 1
    while i <= #args do
        local a = args[i]
        if a == "--listen" and args[i + 1] then
            listens[#listens + 1] = args[i + 1]
            i = i + 2
        elseif a == "--config" and args[i + 1] then
            config_file = args[i + 1]
            i = i + 2
        else
            return usage_error(format("serve: unknown argument %q (llmbox serve [--listen ADDR]... [--config FILE])",
                a))
        end
    end
    if not workers.setup(log) then return 125 end
    local gen = 1
    local conf, snap = load_all(config_file, gen)
    if not conf then
        tmpdir.remove(S.tmpdir)
        return usage_error("serve: " .. snap)
    end
    SERVE.tokens = next(conf.tokens) and conf.tokens or nil
    local limits = limits_of(conf)
    local from_cli = #listens > 0
    if not from_cli then listens = conf.listen end
    if #listens == 0 then
        local default = _M.default_listen()
        if not default then
            tmpdir.remove(S.tmpdir)
            return usage_error("serve: $XDG_RUNTIME_DIR is not set, so there is no default socket: give --listen "
                .. "unix:/path")
        end
        listens[1] = default
    end
    local addrs = {}
    for n, l in ipairs(listens) do
        local addr, err = _M.parse_listen(l, SERVE.tokens ~= nil)
        if not addr then
            tmpdir.remove(S.tmpdir)
            return usage_error(err)
        end
        addrs[n] = addr
    end
    local servers = {}
    local function stop_all()
        for _, s in ipairs(servers) do s.close() end
    end
    for n, addr in ipairs(addrs) do
        -- a socket file left by a daemon that is gone is replaced; one that answers is not
        if addr.unix then
            -- its directory is made if missing (/run/llmbox after a boot), the owner's alone to write
            local at = ""
            for part in (addr.unix:match("^(.*)/[^/]+$") or ""):gmatch("[^/]+") do
                at = at .. "/" .. part
                if not uv.fs_stat(at) then uv.fs_mkdir(at, 493) end
            end
            local probe = uv.new_pipe(false)
            local live = false
            probe:connect(addr.unix, function(cerr) live = not cerr; probe:close() end)
            uv.run("default")
            if live then
                stop_all()
                return usage_error(format("serve: %s: another server already answers there", listens[n]))
            end
            os.remove(addr.unix)
        end
        local s, lerr = http.listen(addr, handle, limits, function(e) log("internal error: %s", e) end)
        if not s then
            stop_all()
            return usage_error(format("serve: cannot listen on %s: %s", listens[n], tostring(lerr)))
        end
        servers[#servers + 1] = s
        log("listening on %s%s", listens[n], SERVE.tokens and " (tokens required)" or "")
    end
    local function shutdown()
        if S.closing then return end
        S.closing = true
        stop_all()
        for _, addr in ipairs(addrs) do
            if addr.unix then os.remove(addr.unix) end
        end
        sessions.close_all("the server is stopping")
        mcp_http.close_all("the server is stopping")
        workers.stop(function()
            -- the answers of runs that finished, or were stopped, go out before the loop ends
            local waited, t = 0, uv.new_timer()
            t:start(0, 20, function()
                waited = waited + 20
                local drained = true
                for _, srv in ipairs(servers) do drained = drained and srv.drained() end
                if drained or waited >= 2000 then
                    t:close()
                    uv.stop()
                end
            end)
        end)
    end
    -- SIGHUP: the config file and the policies again; what does not load leaves the running ones
    local function reload()
        if S.closing then return end
        local new, root = load_all(config_file, gen + 1, function(c)
            for _, addr in ipairs(addrs) do
                if not addr.unix and not next(c.tokens) then
                    return nil, format("%s: the TCP listeners need tokens, and it has none", config_file)
                end
            end
            return true
        end)
        if not new then
            metrics.reload(false)
            return log("reload refused, the running configuration and policies stay: %s", root)
        end
        gen = gen + 1
        require("llmbox.util").remove_tree(snap)
        snap = root
        -- tokens and limits apply to the next request; a tenant's open sessions stay its own
        SERVE.tokens = next(new.tokens) and new.tokens or nil
        for k, v in pairs(limits_of(new)) do limits[k] = v end
        apply_workers(new)
        if not from_cli and table.concat(new.listen, " ") ~= table.concat(listens, " ") then
            log("reload: listeners change only with a restart (still %s)", table.concat(listens, ", "))
        end
        -- idle warm workers hold sandboxes of the old policies; runs in progress finish under them
        workers.drain_warm()
        metrics.reload(true)
        log("reloaded%s and the policies (snapshot %d)", config_file and (" " .. config_file) or "", gen)
    end
    local hup = uv.new_signal()
    hup:start("sighup", function() log("sighup, reloading"); reload() end)
    hup:unref()
    local tick = uv.new_timer()
    tick:start(1000, 1000, sessions.tick)
    tick:unref()
    -- (after the listeners: their probes run the loop, which would wait for the workers)
    apply_workers(conf)
    workers.run_loop(shutdown, log)
    tmpdir.remove(S.tmpdir)
    return 0
end

return _M

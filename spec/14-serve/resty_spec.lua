-- resty.llmbox and the OpenResty gateway of examples/openresty, inside real nginx (Debian's
-- nginx-light + libnginx-mod-http-lua) in front of a real `llmbox serve`: what the gateway's
-- callers see, and that the nginx worker keeps answering while runs are in progress.
local helpers = require "spec.helpers"
local json = require "llmbox.json"
local serve = require "spec.support.serve"

local q = helpers.shell_quote

local NGINX = "/usr/sbin/nginx"
local TOKEN = string.rep("g7", 16)
local ALICE, BOB, CAROL = "key-alice-000000000000", "key-bob-1111111111111", "key-carol-22222222222"

-- The resty.llmbox calls the specs make from inside nginx: GET /t/<name> answers their outcome.
local T_MODULE = [=[
local llmbox = require "resty.llmbox"
local cjson = require "cjson.safe"
local _M = {}
local function client(over)
    local o = { server = os.getenv("LLMBOX_SERVER"), token = os.getenv("LLMBOX_TOKEN"), timeout = 20 }
    for k, v in pairs(over or {}) do o[k] = v end
    return assert(llmbox.new(o))
end
local cases = {}
function cases.session()
    local c = client()
    local s, err = c:session{ lang = "python" }
    if not s then return { err = err } end
    local out = { id = s.id }
    out.put = s:put_file("data/in.csv", "a,b\n1,2\n")
    out.run1 = s:run{ code = "x = open('data/in.csv').read(); open('out.txt', 'w').write(x.upper()); print(len(x))" }
    out.exec = s:exec{ cmd = { "cat", "out.txt" } }
    out.get = s:get_file("out.txt")
    out.closed = s:close()
    local r, rerr, e = s:run{ code = "print(1)" }
    out.after_close = { res = r, err = rerr, status = e and e.status, code = e and e.code }
    return out
end
function cases.languages()
    local langs = client():languages()
    return { first = langs and langs[1] and langs[1].name, count = langs and #langs }
end
function cases.bad_token()
    local r, err, e = client{ token = string.rep("x", 32) }:run{ code = "print(1)" }
    return { res = r, err = err, status = e.status, code = e.code }
end
function cases.unreachable()
    local r, err, e = client{ server = "unix:/nonexistent/llmbox.sock" }:run{ code = "print(1)" }
    return { res = r, err = err, code = e.code }
end
function cases.refused()
    local r, err, e = client():run{ code = "import subprocess", policy = "strict" }
    return { res = r, err = err, status = e.status, code = e.code, violations = e.violations }
end
function cases.stream()
    local pieces = {}
    local r = client():run{ code = "import sys\nprint('a', flush=True)\nprint('b', file=sys.stderr)",
        on_output = function(stream, data) pieces[#pieces + 1] = stream .. ":" .. data end }
    return { pieces = pieces, exit_code = r and r.exit_code }
end
function _M.run()
    local name = ngx.var.uri:match("^/t/([%w_]+)$")
    local out = cases[name]()
    ngx.header["Content-Type"] = "application/json"
    ngx.say(cjson.encode(out))
end
return _M
]=]

describe("resty.llmbox and the OpenResty gateway in nginx #unpriv", function()
    local d, dir, port, tport, nginx_pid

    -- curl to nginx -> status, body text, decoded body
    local function get(method, path, key, body, opts)
        opts = opts or {}
        return serve.curl({ port = opts.port or port, method = method, path = path, token = key, body = body,
            curl = opts.curl })
    end

    -- GET /t/<name> on the specs' own server: a resty.llmbox case's outcome
    local function case(name)
        local status, text, doc = get("GET", "/t/" .. name, nil, nil, { port = tport })
        assert.equal(200, status, text .. tostring(helpers.read(dir .. "/ex/openresty/logs/error.log")))
        return doc
    end

    setup(function()
        assert(helpers.read(NGINX), "nginx is missing: make deps-test installs nginx-light and libnginx-mod-http-lua")
        dir = helpers.tmpdir()
        port, tport = serve.free_port(), serve.free_port()
        local conf = helpers.write(dir .. "/serve.lua", ([[return {
            listen = { "unix:%s/llmbox.sock" },
            tokens = { ["%s"] = { tenant = "gateway", policies = { "default", "strict" } } },
        }]]):format(dir, TOKEN))
        d = serve.start(dir, "--config " .. q(conf))
        -- the example as shipped, in a prefix of its own, with llmbox's Lua where a checkout has it
        local prefix = dir .. "/ex/openresty/"
        assert(os.execute(("mkdir -p %slogs && ln -s %s %s/lua"):format(q(prefix), q(helpers.root .. "/lua"), q(dir))) == 0)
        local ngconf = assert(helpers.read(helpers.root .. "/examples/openresty/nginx.conf"))
        local n
        ngconf, n = ngconf:gsub("listen 127%.0%.0%.1:8080;", ("listen 127.0.0.1:%d;"):format(port))
        assert.equal(1, n)
        -- and the specs' own server for resty.llmbox's calls
        ngconf = ngconf:gsub("}%s*$", ("    server { listen 127.0.0.1:%d; location /t/ { content_by_lua_block "
            .. "{ require('resty_t').run() } } }\n}\n"):format(tport))
        -- (nginx run by root hands its workers to nobody, who may not reach a root's socket)
        if helpers.is_root() then ngconf = "user root;\n" .. ngconf end
        helpers.write(prefix .. "nginx.conf", ngconf)
        helpers.write(prefix .. "gateway.lua", assert(helpers.read(helpers.root .. "/examples/openresty/gateway.lua")))
        helpers.write(prefix .. "resty_t.lua", T_MODULE)
        helpers.write(prefix .. "keys.lua", ([[return {
            ["%s"] = { tenant = "alice", policy = "default", per_minute = 1000 },
            ["%s"] = { tenant = "bob", policy = "strict", per_minute = 1000 },
            ["%s"] = { tenant = "carol", policy = "default", per_minute = 2 },
        }]]):format(ALICE, BOB, CAROL))
        local p = io.popen(("cd %s && LLMBOX_SERVER=unix:%s/llmbox.sock LLMBOX_TOKEN=%s %s -p %s -c nginx.conf "
            .. ">%s/nginx.out 2>&1 & echo $!"):format(q(prefix), q(dir), TOKEN, NGINX, q(prefix), q(dir)))
        nginx_pid = tonumber(p:read("*l"))
        p:close()
        for _ = 1, 100 do
            if get("GET", "/ping") == 200 then break end
            os.execute("sleep 0.05")
        end
        assert(get("GET", "/ping") == 200, "nginx did not start: " .. tostring(helpers.read(dir .. "/nginx.out"))
            .. tostring(helpers.read(prefix .. "logs/error.log")))
    end)
    teardown(function()
        if nginx_pid then
            os.execute("kill -QUIT " .. nginx_pid .. " 2>/dev/null")
            for _ = 1, 40 do
                if os.execute("kill -0 " .. nginx_pid .. " 2>/dev/null") ~= 0 then break end
                os.execute("sleep 0.05")
            end
            os.execute("kill -KILL " .. nginx_pid .. " 2>/dev/null")
        end
        if d then serve.stop(d) end
    end)

    it("runs a caller's code under its tenant's policy, chosen by the gateway", function()
        local code = json.encode({ code = "import socket, sys; print(6*7, sys.argv[1:])", args = { "x" } })
        local status, text, r = get("POST", "/run", ALICE, code)
        assert.equal(200, status, text)
        assert.equal("42 ['x']\n", r.stdout)
        assert.equal(0, r.exit_code)
        -- bob's tenant has the strict policy, which refuses sockets
        local err
        status, text, err = get("POST", "/run", BOB, code)
        assert.equal(422, status, text)
        assert.equal("refused", err.error.code)
        -- a caller never picks the policy itself
        status, text, err = get("POST", "/run", BOB, json.encode({ code = "print(1)", policy = "default" }))
        assert.equal(400, status, text)
        assert.matches("policy", err.error.message)
    end)

    it("refuses callers without a known key, and a key over its rate", function()
        local status, _, err = get("POST", "/run", nil, '{"code":"print(1)"}')
        assert.equal(401, status)
        assert.equal("unauthorized", err.error.code)
        status = get("POST", "/run", "not-a-key", '{"code":"print(1)"}')
        assert.equal(401, status)
        -- carol may start 2 runs a minute: of 5 in a row, whichever minute they fall in, one is over
        local seen = {}
        for _ = 1, 5 do
            local s, text, doc = get("POST", "/run", CAROL, '{"code":"print(1)"}')
            seen[s] = (seen[s] or 0) + 1
            if s == 429 then assert.equal("rate_limited", doc.error.code, text) end
        end
        assert.is_true((seen[429] or 0) >= 1)
        assert.is_true((seen[200] or 0) >= 2)
    end)

    it("streams a run's output as server-sent events through the gateway", function()
        local _, text = get("POST", "/run", ALICE,
            json.encode({ code = "import sys, time\nprint('one', flush=True)\ntime.sleep(0.2)\nprint('two', file=sys.stderr)" }),
            { curl = "-N -H 'Accept: text/event-stream'" })
        local events = {}
        for event, data in text:gmatch("event: (%w+)\ndata: ([^\n]*)\n\n") do
            events[#events + 1] = { event, json.decode(data) }
        end
        assert.same({ "stdout", { data = "one\n" } }, events[1])
        assert.same({ "stderr", { data = "two\n" } }, events[2])
        assert.equal("result", events[3][1])
        assert.equal(0, events[3][2].exit_code)
    end)

    it("keeps answering other requests at once while many runs are in progress", function()
        -- 8 runs of 2 s each through one nginx worker; while they are all still running, /ping answers
        local outs = {}
        for i = 1, 8 do
            outs[i] = dir .. "/run" .. i
            os.execute(("curl -s --max-time 60 -o %s -H 'Authorization: Bearer %s' --data-binary %s "
                .. "'http://127.0.0.1:%d/run' &"):format(q(outs[i]), ALICE,
                q('{"code":"import time; time.sleep(2); print(\\"done\\")"}'), port))
        end
        local pongs = 0
        for _ = 1, 20 do
            local status, text = get("GET", "/ping")
            if status == 200 and text == "pong\n" then pongs = pongs + 1 end
        end
        -- (curl writes its output file only when the answer comes)
        local finished = 0
        for i = 1, 8 do
            if helpers.read(outs[i]) then finished = finished + 1 end
        end
        assert.equal(20, pongs)
        assert.equal(0, finished, "the pings were answered only after runs had finished")
        -- and every run gets its answer
        for i = 1, 8 do
            for _ = 1, 400 do
                if (helpers.read(outs[i]) or ""):find("}", 1, true) then break end
                os.execute("sleep 0.05")
            end
            local r = json.decode(assert(helpers.read(outs[i])))
            assert.equal("done\n", r.stdout)
        end
    end)

    it("resty.llmbox: sessions with files, exec, and the daemon's errors", function()
        local s = case("session")
        assert.is_string(s.id)
        assert.equal(8, s.put.size)
        assert.equal("8\n", s.run1.stdout)
        assert.equal("A,B\n1,2\n", s.exec.stdout)
        assert.equal("A,B\n1,2\n", s.get)
        assert.is_true(s.closed)
        assert.equal(404, s.after_close.status)
        assert.equal("no_session", s.after_close.code)
        local l = case("languages")
        assert.is_true(l.count >= 7)
        local b = case("bad_token")
        assert.equal(401, b.status)
        assert.equal("unauthorized", b.code)
        local u = case("unreachable")
        assert.equal("connect", u.code)
        assert.matches("cannot reach llmbox serve at unix:/nonexistent/llmbox.sock", u.err, 1, true)
        local r = case("refused")
        assert.equal(422, r.status)
        assert.equal("refused", r.code)
        assert.is_true(#r.violations >= 1)
    end)

    it("resty.llmbox: a run's output as it comes, to a callback", function()
        local s = case("stream")
        assert.same({ "stdout:a\n", "stderr:b\n" }, s.pieces)
        assert.equal(0, s.exit_code)
    end)
end)

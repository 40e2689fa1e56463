-- `llmbox serve`, the daemon's first routes, as a client sees them: a real daemon on a unix
-- socket, real HTTP clients (curl, and Python's socket module for what curl will not send), runs
-- in real sandboxes through the daemon's workers.
local helpers = require "spec.helpers"
local json = require "llmbox.json"
local serve = require "spec.support.serve"

local q = helpers.shell_quote

local start, stop = serve.start, serve.stop

-- curl over the socket -> status, body (text), decoded body (or nil)
local function call(d, method, path, body, extra)
    return serve.curl({ sock = d.sock, method = method, path = path, body = body, json = true, curl = extra,
        max_time = 30 })
end

describe("llmbox serve #unpriv", function()
    local d
    setup(function()
        d = start(helpers.tmpdir())
    end)
    teardown(function()
        if d then stop(d) end
    end)

    it("answers /healthz and lists languages, policies and backends", function()
        local status, _, doc = call(d, "GET", "/healthz")
        assert.equal(200, status)
        assert.equal("ok", doc.status)
        local _, _, langs = call(d, "GET", "/v1/languages")
        local names = {}
        for _, l in ipairs(langs) do names[l.name] = true end
        assert.is_true(names.python and names.shell)
        local _, _, pols = call(d, "GET", "/v1/policies")
        assert.is_true(#pols >= 3)
        local _, _, bs = call(d, "GET", "/v1/backends")
        assert.equal("native", bs[1].name)
    end)

    it("runs code with its arguments and stdin, and answers with the result `llmbox run --json` prints", function()
        local status, text, r = call(d, "POST", "/v1/run",
            json.encode({ code = "import sys; print(6*7, sys.argv[1:], input())", args = { "a" }, stdin = "in" }))
        assert.equal(200, status, text)
        assert.equal("42 ['a'] in\n", r.stdout)
        assert.equal(0, r.exit_code)
        assert.is_false(r.timed_out)
        assert.same({}, r.plots)
        assert.matches('"plots":%[%]', text)
        status, text, r = call(d, "POST", "/v1/run", json.encode({ lang = "shell", code = "echo hi; exit 3" }))
        assert.equal(200, status, text)
        assert.equal("hi\n", r.stdout)
        assert.equal(3, r.exit_code)
        status, text, r = call(d, "POST", "/v1/run", json.encode({ code = "import time; time.sleep(10)", timeout = 0.5 }))
        assert.equal(200, status, text)
        assert.equal("timeout", r.limit)
        assert.is_true(r.timed_out)
    end)

    it("streams a run's output as server-sent events, then its result", function()
        local out = helpers.tmpname()
        local body = helpers.write(helpers.tmpname(), json.encode({
            code = "import sys, time\nprint(1, flush=True)\ntime.sleep(0.2)\nprint(2, file=sys.stderr)" }))
        os.execute(("curl -sN --unix-socket %s -H 'Accept: text/event-stream' --data-binary @%s http://d/v1/run > %s")
            :format(q(d.sock), q(body), q(out)))
        local events = {}
        for name, data in (helpers.read(out) or ""):gmatch("event: (%w+)\ndata: ([^\n]*)\n\n") do
            events[#events + 1] = { name, json.decode(data) }
        end
        assert.equal(3, #events, helpers.read(out))
        assert.same({ "stdout", { data = "1\n" } }, events[1])
        assert.same({ "stderr", { data = "2\n" } }, events[2])
        assert.equal("result", events[3][1])
        assert.equal(0, events[3][2].exit_code)
        assert.equal("1\n", events[3][2].stdout)
        -- a refusal is the stream's last event
        helpers.write(body, json.encode({ code = "import subprocess", policy = "strict" }))
        os.execute(("curl -sN --unix-socket %s -H 'Accept: text/event-stream' --data-binary @%s http://d/v1/run > %s")
            :format(q(d.sock), q(body), q(out)))
        local name, data = (helpers.read(out) or ""):match("event: (%w+)\ndata: ([^\n]*)")
        assert.equal("error", name)
        assert.equal("refused", json.decode(data).error.code)
    end)

    it("refuses code the policy refuses, and bad requests, with JSON errors", function()
        local status, _, doc = call(d, "POST", "/v1/run", json.encode({ code = "import subprocess", policy = "strict" }))
        assert.equal(422, status)
        assert.equal("refused", doc.error.code)
        assert.equal("module:subprocess", doc.error.violations[1].rule)
        local cases = {
            { "POST", "/v1/run", "nope", 400, "the request body is not a JSON object" },
            { "POST", "/v1/run", "{}", 400, "code is required" },
            { "POST", "/v1/run", '{"code":""}', 400, "code is empty" },
            { "POST", "/v1/run", '{"code":1}', 400, "code must be a string" },
            { "POST", "/v1/run", '{"code":"1","args":[1]}', 400, "args must be an array of strings" },
            { "POST", "/v1/run", '{"code":"1","x":1}', 400, 'unknown field "x"' },
            { "POST", "/v1/run", '{"code":"1","lang":"cobol"}', 400, 'unknown language "cobol"' },
            { "POST", "/v1/run", '{"code":"1","policy":"permissive"}', 403,
                'policy "permissive" is not allowed by this server (allowed: default, strict' },
            { "POST", "/v1/check", '{"code":"1","policy":"permissive"}', 403, 'policy "permissive" is not allowed' },
            { "GET", "/nope", nil, 404, "no route GET /nope" },
            { "GET", "/v1/run", nil, 405, "GET /v1/run: use POST" },
        }
        for _, c in ipairs(cases) do
            local st, text, e = call(d, c[1], c[2], c[3])
            assert.equal(c[4], st, text)
            assert.is_table(e and e.error, text)
            assert.matches(c[5], e.error.message, 1, true)
        end
    end)

    it("checks code against a policy without running it", function()
        local status, _, doc = call(d, "POST", "/v1/check", json.encode({ code = "import os; os.system('x')" }))
        assert.equal(200, status)
        assert.is_false(doc.safe)
        assert.equal("os-system", doc.violations[1].rule)
        status, _, doc = call(d, "POST", "/v1/check", json.encode({ code = "print(1)" }))
        assert.equal(200, status)
        assert.is_true(doc.safe)
        assert.same({}, doc.violations)
    end)

    it("holds HTTP's limits: malformed, too large, pipelined, and a client that goes away", function()
        local py = [[
import json, socket, sys
def ask(raw):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(raw)
    data = b""
    while True:
        d = s.recv(65536)
        if not d: break
        data += d
    return data
print(ask(b"GARBAGE\r\n\r\n").split(b"\r\n")[0].decode())
r = ask(b"POST /v1/run HTTP/1.1\r\nHost: d\r\nContent-Length: 99999999\r\n\r\n")
print(r.split(b"\r\n")[0].decode())
print(json.loads(r.split(b"\r\n\r\n", 1)[1])["error"]["code"])
print(ask(b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n").split(b"\r\n")[0].decode())
print(ask(b"GET /healthz HTTP/1.1\r\nHost: d\r\n\r\nGET /healthz HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n").count(b"HTTP/1.1 200"))
]]
        local f = helpers.write(helpers.tmpname(".py"), py)
        local p = io.popen("python3 " .. q(f) .. " " .. q(d.sock))
        local out = p:read("*a")
        p:close()
        os.remove(f)
        assert.equal("HTTP/1.1 400 Bad Request\nHTTP/1.1 413 Content Too Large\nbody_too_large\n"
            .. "HTTP/1.1 431 Request Header Fields Too Large\n2\n", out)
        -- a client that disconnects mid-run: its run is stopped, and the daemon says so
        os.execute(("curl -s --max-time 1 --unix-socket %s -X POST http://d/v1/run -d %s >/dev/null"):format(q(d.sock),
            q(json.encode({ code = "import time; time.sleep(60)" }))))
        local seen
        for _ = 1, 100 do
            seen = (helpers.read(d.dir .. "/log") or ""):find('"status":499', 1, true)
            if seen then break end
            os.execute("sleep 0.05")
        end
        assert.is_truthy(seen, helpers.read(d.dir .. "/log"))
        assert.equal(200, (call(d, "GET", "/healthz")))
    end)

    it("keeps a session's workspace across its runs, commands and files, and closes it", function()
        local status, text, doc = call(d, "POST", "/v1/sessions", json.encode({ lang = "python" }))
        assert.equal(201, status, text)
        local id = doc.id
        assert.equal("python", doc.language)
        assert.equal("default", doc.policy)
        local base = "/v1/sessions/" .. id
        status, text = call(d, "POST", base .. "/run", json.encode({ code = "open('a.txt', 'w').write('hello')" }))
        assert.equal(200, status, text)
        status, text, doc = call(d, "POST", base .. "/exec", json.encode({ cmd = { "cat", "a.txt" } }))
        assert.equal(200, status, text)
        assert.equal("hello", doc.stdout)
        status, text, doc = call(d, "POST", base .. "/exec", json.encode({ cmd = "ls | wc -l" }))
        assert.equal(200, status, text)
        assert.equal("1\n", doc.stdout)
        -- files: bytes in and out, a directory as a tar, nothing outside the workspace
        local blob = helpers.write(helpers.tmpname(), "bytes\0\1")
        status, text, doc = call(d, "PUT", base .. "/files?path=d/b.bin", nil, "--data-binary @" .. q(blob))
        assert.equal(201, status, text)
        assert.same({ path = "/sandbox/d/b.bin", size = 7 }, doc)
        status, text = call(d, "GET", base .. "/files?path=/sandbox/d/b.bin")
        assert.equal(200, status, text)
        assert.equal("bytes\0\1", text)
        local tarfile = helpers.tmpname()
        os.execute(("curl -s --unix-socket %s -o %s 'http://d%s/files?path=d'"):format(q(d.sock), q(tarfile), base))
        local p = io.popen("tar -tf " .. q(tarfile))
        local listing = p:read("*a")
        p:close()
        assert.matches("b.bin", listing, 1, true)
        status, text, doc = call(d, "GET", base .. "/files?path=nope")
        assert.equal(404, status, text)
        assert.equal("not_found", doc.error.code)
        status, text, doc = call(d, "GET", base .. "/files?path=../etc/passwd")
        assert.equal(400, status, text)
        assert.matches("must not contain . or .. components", doc.error.message, 1, true)
        -- a link is never followed, and a directory is not a file to write: each said so
        call(d, "POST", base .. "/exec", json.encode({ cmd = "ln -s d/b.bin link" }))
        for _, method in ipairs({ "GET", "PUT" }) do
            status, text, doc = call(d, method, base .. "/files?path=link", nil, method == "PUT" and "--data-binary x" or nil)
            assert.equal(400, status, text)
            assert.equal("symlink_refused", doc.error.code)
        end
        status, text, doc = call(d, "PUT", base .. "/files?path=d", nil, "--data-binary x")
        assert.equal(409, status, text)
        assert.equal("is_a_directory", doc.error.code)
        status, text, doc = call(d, "POST", base .. "/install", json.encode({ libraries = { "x" } }))
        assert.equal(422, status, text)
        assert.matches("does not allow library installs", doc.error.message, 1, true)
        status, text, doc = call(d, "POST", base .. "/exec", json.encode({ cmd = {} }))
        assert.equal(400, status, text)
        assert.matches("cmd must be an argv", doc.error.message, 1, true)
        -- closed: gone for good
        status, text, doc = call(d, "DELETE", base)
        assert.equal(200, status, text)
        assert.is_true(doc.closed)
        status, text, doc = call(d, "POST", base .. "/run", json.encode({ code = "print(1)" }))
        assert.equal(404, status, text)
        assert.equal("no_session", doc.error.code)
        status = call(d, "POST", "/v1/sessions", json.encode({ policy = "permissive" }))
        assert.equal(403, status, text)
    end)

    it("counts requests, runs, limits and warm leases in Prometheus text at /metrics", function()
        call(d, "POST", "/v1/run", json.encode({ code = "import time; time.sleep(5)", timeout = 0.3 }))
        local status, text = call(d, "GET", "/metrics")
        assert.equal(200, status)
        for line in text:gmatch("[^\n]+") do
            if line:sub(1, 1) ~= "#" then
                assert.matches("^[%a_:][%w_:]*{?[^}]*}? [%d.e+-]+$", line)
            end
        end
        assert.matches('llmbox_http_requests_total{route="POST /v1/run",status="200"} %d+', text)
        assert.matches('llmbox_runs_total{language="python",outcome="limit"} %d+', text)
        assert.matches('llmbox_limits_total{limit="timeout"} %d+', text)
        assert.matches('llmbox_run_duration_seconds_count{language="python"} %d+', text)
        assert.matches('llmbox_warm_leases_total{result="hit"} %d+', text)
        assert.matches("llmbox_sessions_open 0", text, 1, true)
    end)

    it("takes `llmbox run --server`: the same output and exit status as a local run", function()
        local srv = "unix:" .. d.sock
        local _
        local status, out, err = helpers.cli({ "run", "--server", srv, "-c",
            "import sys; print('hi', sys.argv[1:]); print('oops', file=sys.stderr); exit(3)", "--", "a" })
        assert.equal(3, status)
        assert.equal("hi ['a']\n", out)
        assert.equal("oops\n", err)
        status, out = helpers.cli({ "run", "--server", srv, "-i", "-c", "print(input())" }, { stdin = "fed\n" })
        assert.equal(0, status)
        assert.equal("fed\n", out)
        status, _, err = helpers.cli({ "run", "--server", srv, "-t", "0.5", "-c", "import time; time.sleep(5)" })
        assert.equal(124, status)
        assert.matches("the run was stopped: wall-clock timeout (0.5 s) reached", err, 1, true)
        status, _, err = helpers.cli({ "run", "--server", srv, "-p", "strict", "-c", "import subprocess" })
        assert.equal(126, status)
        assert.matches('refused by policy "strict"', err, 1, true)
        status, out = helpers.cli({ "run", "--json", "-l", "shell", "-c", "echo json" },
            { env = "LLMBOX_SERVER=" .. q(srv) })
        assert.equal(0, status)
        assert.equal("json\n", json.decode(out).stdout)
        status, _, err = helpers.cli({ "run", "--server", srv, "-b", "docker", "-c", "print(1)" })
        assert.equal(125, status)
        assert.matches("--backend does not go with --server", err, 1, true)
        status, _, err = helpers.cli({ "run", "--server", "unix:" .. d.dir .. "/none.sock", "-c", "print(1)" })
        assert.equal(125, status)
        assert.matches("cannot reach the llmbox server at unix:", err, 1, true)
    end)

    it("is found by llmbox doctor where `llmbox run --server` would look", function()
        -- (doctor's exit status is the sandbox's verdict, not the daemon's)
        local _, out = helpers.cli({ "doctor", "--json" }, { env = "LLMBOX_SERVER=unix:" .. q(d.sock) })
        local r = json.decode(out)
        assert.is_true(r.daemon.ok, out)
        assert.matches("answers at unix:" .. d.sock, r.daemon.detail, 1, true)
        _, out = helpers.cli({ "doctor" }, { env = "LLMBOX_SERVER=unix:" .. q(d.dir .. "/none.sock") })
        assert.matches("no llmbox serve answers at unix:" .. d.dir .. "/none.sock", out, 1, true)
    end)

    it("logs one JSON line per request", function()
        call(d, "GET", "/healthz")
        local log = helpers.read(d.dir .. "/log")
        local last
        for line in log:gmatch("[^\n]+") do
            if line:sub(1, 1) == "{" then last = json.decode(line) end
        end
        assert.equal("GET /healthz", last.route)
        assert.equal(200, last.status)
        assert.is_number(last.duration_ms)
    end)
end)

describe("llmbox serve's idle sessions #unpriv", function()
    it("closes a session idle for LLMBOX_MCP_SESSION_IDLE seconds", function()
        local d = start(helpers.tmpdir(), nil, nil, "LLMBOX_MCP_SESSION_IDLE=1")
        finally(function() stop(d) end)
        local _, _, doc = call(d, "POST", "/v1/sessions", "{}")
        assert.equal(200, (call(d, "POST", "/v1/sessions/" .. doc.id .. "/run", '{"code":"print(1)"}')))
        os.execute("sleep 2.5")
        local status, _, e = call(d, "POST", "/v1/sessions/" .. doc.id .. "/run", '{"code":"print(1)"}')
        assert.equal(404, status)
        assert.matches("expired after 1s idle", e.error.message, 1, true)
    end)
end)

local free_port = serve.free_port

describe("llmbox serve with a config file: tokens, tenants, TCP #unpriv", function()
    local d, port, dir
    local ALICE, BOB = string.rep("a1", 16), string.rep("b2", 16)
    setup(function()
        dir = helpers.tmpdir()
        port = free_port()
        local conf = helpers.write(dir .. "/serve.lua", ([[return {
            listen = { "unix:%s/llmbox.sock", "127.0.0.1:%d" },
            tokens = {
                ["%s"] = { tenant = "alice", policies = { "default", "strict" } },
                ["%s"] = { tenant = "bob", policies = { "strict" } },
            },
            limits = { idle = "10s" },
        }]]):format(dir, port, ALICE, BOB))
        d = start(dir, "--config " .. q(conf))
    end)
    teardown(function()
        if d then stop(d) end
    end)

    local function as(token, method, path, body, over_tcp)
        local auth = token and ("-H 'Authorization: Bearer " .. token .. "'") or ""
        if over_tcp then
            local out = helpers.tmpname()
            local cmd = ("curl -s --max-time 30 -o %s -w '%%{http_code}' -X %s %s 'http://127.0.0.1:%d%s'"):format(
                q(out), method, auth, port, path)
            if body then cmd = cmd .. " --data-binary @" .. q(helpers.write(helpers.tmpname(), body)) end
            local p = io.popen(cmd)
            local status = tonumber(p:read("*a"))
            p:close()
            local text = helpers.read(out) or ""
            local ok, doc = pcall(json.decode, text)
            return status, text, ok and doc or nil
        end
        return call(d, method, path, body, auth)
    end

    it("asks every request but /healthz for a known token, on every listener", function()
        assert.equal(200, (as(nil, "GET", "/healthz")))
        local status, _, doc = as(nil, "GET", "/v1/policies")
        assert.equal(401, status)
        assert.equal("unauthorized", doc.error.code)
        assert.equal(401, (as(string.rep("x", 32), "GET", "/v1/policies")))
        assert.equal(401, (as(ALICE .. "x", "GET", "/v1/policies")))
        assert.equal(200, (as(ALICE, "GET", "/v1/policies")))
        -- over TCP, the same
        assert.equal(401, (as(nil, "POST", "/v1/run", '{"code":"print(1)"}', true)))
        local st, text, r = as(ALICE, "POST", "/v1/run", '{"code":"print(1)"}', true)
        assert.equal(200, st, text)
        assert.equal("1\n", r.stdout)
        -- the CLI takes its token from $LLMBOX_TOKEN
        local out, err
        status, out, err = helpers.cli({ "run", "--server", "127.0.0.1:" .. port, "-c", "print(7)" },
            { env = "LLMBOX_TOKEN=" .. ALICE })
        assert.equal(0, status, err)
        assert.equal("7\n", out)
        status, _, err = helpers.cli({ "run", "--server", "127.0.0.1:" .. port, "-c", "print(7)" })
        assert.equal(125, status)
        assert.matches("give a token this server knows", err, 1, true)
        -- the log names the tenant
        assert.matches('"tenant":"alice"', helpers.read(dir .. "/log"), 1, true)
    end)

    it("gives a tenant its token's policies only, and its own sessions only (404 for another's)", function()
        local status, _, doc = as(BOB, "POST", "/v1/run", '{"code":"print(1)","policy":"default"}')
        assert.equal(403, status)
        assert.matches('policy "default" is not allowed for tenant bob (allowed: strict;', doc.error.message, 1, true)
        -- bob's default is his first policy, strict
        status, _, doc = as(BOB, "POST", "/v1/run", '{"code":"import subprocess"}')
        assert.equal(422, status)
        assert.matches('policy "strict"', doc.error.message, 1, true)
        status, _, doc = as(ALICE, "POST", "/v1/sessions", "{}")
        assert.equal(201, status)
        local id = doc.id
        assert.equal(200, (as(ALICE, "POST", "/v1/sessions/" .. id .. "/run", '{"code":"print(1)"}')))
        status, _, doc = as(BOB, "POST", "/v1/sessions/" .. id .. "/run", '{"code":"print(1)"}')
        assert.equal(404, status)
        assert.equal("no_session", doc.error.code)
        assert.equal(404, (as(BOB, "DELETE", "/v1/sessions/" .. id)))
        assert.equal(200, (as(ALICE, "DELETE", "/v1/sessions/" .. id)))
    end)
end)

describe("llmbox serve's start and stop #unpriv", function()
    it("refuses a bad config file, naming the file and the key", function()
        local dir = helpers.tmpdir()
        local function refused(text, pattern)
            local f = helpers.write(dir .. "/c.lua", text)
            local status, _, err = helpers.cli({ "serve", "--config", f, "--listen", "unix:" .. dir .. "/s.sock" })
            assert.equal(125, status, err)
            assert.matches(pattern, err, 1, true)
        end
        refused("return { tokens = { short = { tenant = 'a', policies = { 'default' } } } }",
            'the token of tenant "a" is shorter than 16 characters')
        refused(("return { tokens = { ['%s'] = { tenant = 'a', policies = { 'nosuch' } } } }"):format(string.rep("t", 20)),
            'policies: no policy named "nosuch"')
        refused(("return { tokens = { ['%s'] = { policies = { 'default' } } } }"):format(string.rep("t", 20)),
            "tenant")
        refused("return { listen = 'x' }", "listen")
        refused("return { limits = { idle = 'soon' } }", "limits.idle")
        refused("return { nope = 1 }", "nope")
        refused("this is not lua", "--config " .. dir .. "/c.lua")
        refused("return 1", "the file must return a table")
    end)

    it("refuses a TCP listener without tokens, and a socket another server answers on", function()
        local status, _, err = helpers.cli({ "serve", "--listen", "127.0.0.1:0" })
        assert.equal(125, status)
        assert.matches("a TCP listener needs client tokens", err, 1, true)
        status, _, err = helpers.cli({ "serve", "--listen", "unix:relative.sock" })
        assert.equal(125, status)
        assert.matches("must be absolute", err, 1, true)
        local dir = helpers.tmpdir()
        local d = start(dir)
        status, _, err = helpers.cli({ "serve", "--listen", "unix:" .. d.sock })
        assert.equal(125, status)
        assert.matches("another server already answers there", err, 1, true)
        -- SIGTERM: it stops and removes its socket
        stop(d)
        -- a socket's missing directory is made
        local d2 = start(dir, "--listen unix:" .. q(dir .. "/run/llmbox/s.sock"), dir .. "/run/llmbox/s.sock")
        assert.equal(200, (call(d2, "GET", "/healthz")))
        stop(d2)
        assert.is_nil(io.open(d.sock))
        assert.matches("stopping", helpers.read(dir .. "/log"), 1, true)
    end)
end)

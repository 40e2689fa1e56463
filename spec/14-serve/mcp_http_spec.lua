-- MCP's Streamable HTTP transport at /mcp in `llmbox serve`: a real daemon on TCP with tenants'
-- tokens, driven by the official MCP TypeScript SDK's StreamableHTTPClientTransport
-- (spec/support/mcp/http_client.mjs) and by curl for what the SDK does not send.
local cjson = require "cjson"
local helpers = require "spec.helpers"
local serve = require "support.serve"
local sdk = require "support.mcp.sdk"
local json = require "llmbox.json"

local q = helpers.shell_quote

local ALICE, BOB = string.rep("a1", 16), string.rep("b2", 16)

-- http_client.mjs SCENARIO against the daemon -> what it printed, decoded
local function client(scenario, opts)
    assert(sdk.installed(), "the MCP SDK is not installed: run `make deps-test` (npm ci --prefix spec/support/mcp)")
    local p = io.popen(("cd %s && node http_client.mjs %s %s 2>&1"):format(q(sdk.dir), scenario, q(cjson.encode(opts))))
    local out = p:read("*a")
    p:close()
    local ok, res = pcall(cjson.decode, out)
    assert(ok and type(res) == "table", "the SDK client printed no JSON:\n" .. out)
    return res
end

-- POST (or `method`) to /mcp with curl -> status, decoded body (or the text), headers (lower-case names)
local function mcp(url, token, msg, headers, method)
    local out, head = helpers.tmpname(), helpers.tmpname()
    local cmd = { ("curl -s --max-time 30 -o %s -D %s -w '%%{http_code}' -X %s"):format(q(out), q(head), method or "POST") }
    if token then cmd[#cmd + 1] = "-H " .. q("Authorization: Bearer " .. token) end
    for k, v in pairs(headers or {}) do cmd[#cmd + 1] = "-H " .. q(k .. ": " .. v) end
    if msg then
        local body = type(msg) == "string" and msg or json.encode(msg)
        cmd[#cmd + 1] = "-H 'Content-Type: application/json' --data-binary @" .. q(helpers.write(helpers.tmpname(), body))
    end
    cmd[#cmd + 1] = q(url)
    local p = io.popen(table.concat(cmd, " "))
    local status = tonumber(p:read("*a"))
    p:close()
    local text = helpers.read(out) or ""
    local hs = {}
    for k, v in (helpers.read(head) or ""):gmatch("([%w%-]+):%s*([^\r\n]*)") do hs[k:lower()] = v end
    local ok, doc = pcall(json.decode, text)
    return status, ok and doc or text, hs
end

local function init_msg(version)
    return { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = version or "2025-06-18",
        capabilities = {}, clientInfo = { name = "curl", version = "1" } } }
end

local function tool(id, name, args)
    return { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = name, arguments = args } }
end

-- initialize over curl -> the session id
local function initialize(url, token, version)
    local status, doc, hs = mcp(url, token, init_msg(version))
    assert.equal(200, status, cjson.encode(doc))
    assert.is_string(hs["mcp-session-id"])
    assert.equal(202, (mcp(url, token, { jsonrpc = "2.0", method = "notifications/initialized" },
        { ["Mcp-Session-Id"] = hs["mcp-session-id"] })))
    return hs["mcp-session-id"], doc.result
end

describe("MCP over HTTP at /mcp #unpriv", function()
    local d, dir, url
    setup(function()
        dir = helpers.tmpdir()
        local port = serve.free_port()
        url = ("http://127.0.0.1:%d/mcp"):format(port)
        local conf = helpers.write(dir .. "/serve.lua", ([[return {
            listen = { "unix:%s/llmbox.sock", "127.0.0.1:%d" },
            tokens = {
                ["%s"] = { tenant = "alice", policies = { "default", "strict" } },
                ["%s"] = { tenant = "bob", policies = { "strict" } },
            },
        }]]):format(dir, port, ALICE, BOB))
        d = serve.start(dir, "--config " .. q(conf))
    end)
    teardown(function()
        if d then serve.stop(d) end
    end)

    local main -- what the SDK client's main scenario returned (its sessions are still open)

    it("serves the official SDK client: tools, runs, progress as an event stream, a session with state", function()
        main = client("main", { url = url, token = ALICE })
        assert.is_nil(main.error, main.error)
        assert.matches("^mcp%-%x+$", main.session_id)
        assert.equal(36, #main.session_id)
        assert.equal("2025-11-25", main.protocol)
        assert.equal("llmbox", main.server.name)
        assert.same({ "execute_code", "get_supported_languages", "get_language_details", "check_code",
            "create_session", "run_in_session", "upload_file", "download_file", "close_session" }, main.tools)
        assert.equal("42\n", main.run.structuredContent.stdout)
        assert.equal("42\n", sdk.text_json(main.run).stdout)
        -- the progress came before the result, on the POST's event stream
        assert.equal("first\nsecond\n", main.streamed.structuredContent.stdout)
        local messages = {}
        for _, p in ipairs(main.progress) do messages[#messages + 1] = p.message end
        assert.same({ "starting the sandbox", "stdout: first\n", "stdout: second\n" }, messages)
        -- a tool session keeps its files between runs; its policy is the tenant's default
        assert.equal("default", main.opened.policy)
        assert.equal(0, main.write.structuredContent.exit_code)
        assert.equal("42\n", main.read.structuredContent.stdout)
        assert.is_true(main.strict.isError)
        assert.matches('policy "permissive" is not allowed for tenant alice (allowed: default, strict;',
            main.strict.content[1].text, 1, true)
        assert.same({}, main.errors)
        local log = helpers.read(dir .. "/log")
        assert.matches('"mcp":"tools/call","route":"POST /mcp","status":200,"tenant":"alice"', log, 1, true)
        -- (the SDK asks for a stream of its own with GET, and takes the 405)
        assert.matches('"route":"GET /mcp","status":405', log, 1, true)
    end)

    it("binds a tool session to its MCP session: another tenant's, or another session's, is unknown", function()
        assert.is_table(main, "needs the test above")
        local tool_session = main.opened.session_id
        local run = tool(7, "run_in_session", { session_id = tool_session, code = "print(1)" })
        -- bob, in an MCP session of his own: as if it never existed
        local bob = initialize(url, BOB)
        local status, doc = mcp(url, BOB, run, { ["Mcp-Session-Id"] = bob })
        assert.equal(200, status)
        assert.equal(7, doc.id)
        assert.is_true(doc.result.isError)
        assert.matches("no open session \"" .. tool_session .. "\"", doc.result.content[1].text, 1, true)
        -- bob cannot use alice's MCP session either: 404, as an unknown id
        status, doc = mcp(url, BOB, run, { ["Mcp-Session-Id"] = main.session_id })
        assert.equal(404, status)
        assert.matches("Session not found", doc.error.message, 1, true)
        assert.equal(404, (mcp(url, BOB, nil, { ["Mcp-Session-Id"] = main.session_id }, "DELETE")))
        -- another MCP session of alice's own does not see it either
        local other = initialize(url, ALICE)
        status, doc = mcp(url, ALICE, run, { ["Mcp-Session-Id"] = other })
        assert.equal(200, status)
        assert.is_true(doc.result.isError)
        assert.matches("no open session", doc.result.content[1].text, 1, true)
        -- the session that opened it: still there
        status, doc = mcp(url, ALICE, run, { ["Mcp-Session-Id"] = main.session_id })
        assert.equal(200, status)
        assert.equal("1\n", doc.result.structuredContent.stdout)
        -- bob's execute_code runs under his default policy, strict
        status, doc = mcp(url, BOB, tool(8, "execute_code", { code = "import subprocess" }), { ["Mcp-Session-Id"] = bob })
        assert.equal(200, status)
        assert.matches('refused by policy "strict"', doc.result.content[1].text, 1, true)
        -- DELETE ends alice's MCP session and closes its tool session; the id is 404 from then on
        assert.equal(200, (mcp(url, ALICE, nil, { ["Mcp-Session-Id"] = main.session_id }, "DELETE")))
        status = mcp(url, ALICE, run, { ["Mcp-Session-Id"] = main.session_id })
        assert.equal(404, status)
        assert.matches("session " .. tool_session .. " closed (ended by the client)", helpers.read(dir .. "/log"), 1, true)
        assert.equal(404, (mcp(url, ALICE, nil, { ["Mcp-Session-Id"] = main.session_id }, "DELETE")))
    end)

    it("cancels a call the SDK aborts, and ends the session with terminateSession()", function()
        local out = client("cancel_and_end", { url = url, token = ALICE })
        assert.is_nil(out.error, out.error)
        assert.is_number(out.seen_ms)
        assert.matches("^rejected", out.outcome)
        -- the run's process went away with the cancel, and the session went on answering
        assert.is_number(out.gone_ms)
        assert.is_true(out.cancelled_ms < 3000, out.cancelled_ms)
        assert.equal("still serving\n", out.after.structuredContent.stdout)
        assert.is_true(out.terminated)
        assert.equal(404, out.later.code)
        assert.matches("cancelled: the spec cancels", helpers.read(dir .. "/log"), 1, true)
    end)

    it("refuses what the transport's rules refuse", function()
        -- no token, or a wrong one: 401, for the SDK too
        local out = client("connect", { url = url, token = string.rep("x", 32) })
        assert.equal(401, out.code)
        assert.equal(401, (mcp(url, nil, init_msg())))
        local sid = initialize(url, ALICE)
        local list = { jsonrpc = "2.0", id = 2, method = "tools/list" }
        -- without Mcp-Session-Id: 400; an id that never existed: 404
        local status, doc = mcp(url, ALICE, list)
        assert.equal(400, status)
        assert.matches("Mcp-Session-Id header is missing", doc.error.message, 1, true)
        assert.equal(2, doc.id)
        status, doc = mcp(url, ALICE, list, { ["Mcp-Session-Id"] = "mcp-" .. string.rep("0", 32) })
        assert.equal(404, status)
        assert.equal(-32001, doc.error.code)
        -- an unsupported MCP-Protocol-Version, a foreign Origin, a body that is not JSON
        status, doc = mcp(url, ALICE, list, { ["Mcp-Session-Id"] = sid, ["MCP-Protocol-Version"] = "1999-01-01" })
        assert.equal(400, status)
        assert.matches("unsupported MCP-Protocol-Version 1999-01-01", doc.error.message, 1, true)
        status, doc = mcp(url, ALICE, list, { ["Mcp-Session-Id"] = sid, Origin = "http://evil.example" })
        assert.equal(403, status)
        assert.matches("Origin http://evil.example is not allowed", doc.error.message, 1, true)
        status, doc = mcp(url, ALICE, list, { ["Mcp-Session-Id"] = sid, Origin = "http://localhost:6274",
            ["MCP-Protocol-Version"] = "2025-06-18" })
        assert.equal(200, status)
        assert.equal("execute_code", doc.result.tools[1].name)
        status, doc = mcp(url, ALICE, "{nope", { ["Mcp-Session-Id"] = sid })
        assert.equal(400, status)
        assert.equal(-32700, doc.error.code)
        status, doc = mcp(url, ALICE, { jsonrpc = "1.0", id = 3, method = "ping" }, { ["Mcp-Session-Id"] = sid })
        assert.equal(400, status)
        assert.equal(-32600, doc.error.code)
        -- an unknown method is a JSON-RPC error, answered
        status, doc = mcp(url, ALICE, { jsonrpc = "2.0", id = "x", method = "nope" }, { ["Mcp-Session-Id"] = sid })
        assert.equal(200, status)
        assert.equal("x", doc.id)
        assert.equal(-32601, doc.error.code)
        -- batches were dropped in 2025-06-18
        status, doc = mcp(url, ALICE, { list, list }, { ["Mcp-Session-Id"] = sid })
        assert.equal(400, status)
        assert.matches("batches (JSON arrays) are not part of MCP 2025-06-18", doc.error.message, 1, true)
        -- no stream of server-initiated messages
        local _, hs
        status, _, hs = mcp(url, ALICE, nil, { ["Mcp-Session-Id"] = sid, Accept = "text/event-stream" }, "GET")
        assert.equal(405, status)
        assert.equal("DELETE, POST", hs.allow)
    end)

    it("speaks 2025-03-26 to a client that asks for it: batches, no structured content", function()
        local sid, res = initialize(url, ALICE, "2025-03-26")
        assert.equal("2025-03-26", res.protocolVersion)
        local h = { ["Mcp-Session-Id"] = sid, ["MCP-Protocol-Version"] = "2025-03-26" }
        local status, doc = mcp(url, ALICE, {
            { jsonrpc = "2.0", id = 1, method = "ping" },
            { jsonrpc = "2.0", method = "notifications/progress", params = {} },
            tool(2, "execute_code", { code = "echo batched", language = "shell" }),
            { jsonrpc = "2.0", id = 3, method = "tools/list" },
        }, h)
        assert.equal(200, status, cjson.encode(doc))
        assert.equal(3, #doc)
        assert.same({ 1, 2, 3 }, { doc[1].id, doc[2].id, doc[3].id })
        assert.equal("batched\n", cjson.decode(doc[2].result.content[1].text).stdout)
        assert.is_nil(doc[2].result.structuredContent)
        assert.is_nil(doc[3].result.tools[1].outputSchema)
        -- notifications only: 202
        assert.equal(202, (mcp(url, ALICE, { { jsonrpc = "2.0", method = "notifications/initialized" } }, h)))
    end)

    it("cancels the call of a client that disconnects", function()
        local sid = initialize(url, ALICE)
        os.execute(("curl -s --max-time 1 -o /dev/null -H %s -H %s -H 'Content-Type: application/json' -d %s %s")
            :format(q("Authorization: Bearer " .. ALICE), q("Mcp-Session-Id: " .. sid),
                q(json.encode(tool(5, "execute_code", { code = "import time; time.sleep(60)" }))), q(url)))
        local log
        for _ = 1, 100 do
            log = helpers.read(dir .. "/log") or ""
            if log:find('"mcp":"tools/call","route":"POST /mcp","status":499', 1, true) then break end
            os.execute("sleep 0.05")
        end
        assert.matches('"mcp":"tools/call","route":"POST /mcp","status":499', log, 1, true)
        assert.matches("cancelled: the client disconnected", log, 1, true)
        -- the session goes on
        local status, doc = mcp(url, ALICE, tool(6, "execute_code", { code = "print(5)" }), { ["Mcp-Session-Id"] = sid })
        assert.equal(200, status)
        assert.equal("5\n", doc.result.structuredContent.stdout)
    end)
end)

describe("MCP over HTTP without tokens #unpriv", function()
    it("serves a unix socket, and ends an MCP session idle for LLMBOX_MCP_SESSION_IDLE seconds", function()
        local d = serve.start(helpers.tmpdir(), nil, nil, "LLMBOX_MCP_SESSION_IDLE=1")
        local sock = d.sock
        finally(function() serve.stop(d) end)
        local function post(msg, sid)
            local out = helpers.tmpname()
            local cmd = ("curl -s -o %s -w '%%{http_code}' -D %s --unix-socket %s -H 'Content-Type: application/json' %s "
                .. "--data-binary @%s http://d/mcp"):format(q(out), q(out .. ".h"), q(sock),
                sid and ("-H " .. q("Mcp-Session-Id: " .. sid)) or "", q(helpers.write(helpers.tmpname(), json.encode(msg))))
            local pp = io.popen(cmd)
            local status = tonumber(pp:read("*a"))
            pp:close()
            return status, json.decode(helpers.read(out)), (helpers.read(out .. ".h") or ""):match("[Mm]cp%-[Ss]ession%-[Ii]d: (%S+)")
        end
        local _, _, sid = post(init_msg())
        assert.is_string(sid)
        local status, doc = post(tool(2, "create_session", {}), sid)
        assert.equal(200, status)
        -- no tenant: the daemon's own policy
        assert.equal("default", doc.result.structuredContent.policy)
        os.execute("sleep 2.5")
        status, doc = post({ jsonrpc = "2.0", id = 3, method = "ping" }, sid)
        assert.equal(404, status)
        assert.matches("expired after 1s idle", doc.error.message, 1, true)
        assert.matches("closed (idle for 1s)", helpers.read(d.dir .. "/log"), 1, true)
    end)
end)

-- The JSON-RPC and MCP lifecycle rules, byte for byte: what a well-behaved client library never
-- sends (malformed JSON, invalid requests) gets the right error, and the server keeps answering.
local cjson = require "cjson"
local raw = require "support.mcp.raw"

local INIT = { protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "raw", version = "1" } }

local function init(c, version)
    local p = { protocolVersion = version or INIT.protocolVersion, capabilities = INIT.capabilities,
        clientInfo = INIT.clientInfo }
    local r = assert(c:request(1, "initialize", p), "no answer to initialize")
    c:send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return r
end

describe("mcp protocol #unpriv", function()
    it("negotiates the protocol version and describes the server", function()
        for _, v in ipairs({ "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }) do
            local c = raw.start()
            local r = init(c, v)
            assert.equal(v, r.result.protocolVersion)
            assert.equal("llmbox", r.result.serverInfo.name)
            assert.is_table(r.result.capabilities.tools)
            assert.is_table(r.result.capabilities.resources)
            c:close()
        end
        -- a version we do not know is answered with the newest we support
        local c = raw.start()
        assert.equal("2025-11-25", init(c, "2099-01-01").result.protocolVersion)
        c:close()
    end)

    it("leaves out output schemas for clients older than 2025-06-18", function()
        local c = raw.start()
        init(c, "2025-03-26")
        local tools = c:request(2, "tools/list", {}).result.tools
        assert.is_nil(tools[1].outputSchema)
        assert.is_table(tools[1].inputSchema)
        local r = c:request(3, "tools/call", { name = "get_supported_languages", arguments = {} }).result
        assert.is_nil(r.structuredContent)
        assert.equal("text", r.content[1].type)
        c:close()
        c = raw.start()
        init(c, "2025-06-18")
        assert.is_table(c:request(2, "tools/list", {}).result.tools[1].outputSchema)
        c:close()
    end)

    it("answers malformed JSON with -32700 and id null, and keeps serving", function()
        local c = raw.start()
        init(c)
        for _, bad in ipairs({ "{not json", '{"jsonrpc":"2.0","id":7,"method":"ping"', "\1\2\3", '"unterminated' }) do
            c:send(bad)
            local r = assert(c:recv(), "no answer to " .. bad)
            assert.equal(-32700, r.error.code)
            assert.equal(cjson.null, r.id)
        end
        assert.same({}, c:request(8, "ping").result)
        c:close()
    end)

    it("answers invalid requests with -32600", function()
        local c = raw.start()
        init(c)
        local cases = {
            { line = "[]", id = cjson.null },
            { line = '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', id = cjson.null, msg = "batch" },
            { line = "42", id = cjson.null },
            { line = "null", id = cjson.null },
            { line = '{"id":3,"method":"ping"}', id = 3, msg = "jsonrpc" },
            { line = '{"jsonrpc":"1.0","id":4,"method":"ping"}', id = 4 },
            { line = '{"jsonrpc":"2.0","id":5,"method":17}', id = 5, msg = "method" },
            { line = '{"jsonrpc":"2.0","id":true,"method":"ping"}', id = cjson.null, msg = "id" },
            { line = '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', id = cjson.null },
        }
        for _, case in ipairs(cases) do
            c:send(case.line)
            local r = assert(c:recv(), "no answer to " .. case.line)
            assert.equal(-32600, r.error.code, case.line)
            assert.equal(case.id, r.id, case.line)
            if case.msg then assert.matches(case.msg, r.error.message) end
        end
        assert.same({}, c:request(9, "ping").result)
        c:close()
    end)

    it("answers unknown methods with -32601 and bad params with -32602", function()
        local c = raw.start()
        init(c)
        local r = c:request(2, "prompts/list", {})
        assert.equal(-32601, r.error.code)
        assert.equal(2, r.id)
        r = c:request("str-id", "no/such/method")
        assert.equal(-32601, r.error.code)
        assert.equal("str-id", r.id)
        c:send('{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1,2]}')
        assert.equal(-32602, c:recv().error.code)
        r = c:request(4, "initialize", { capabilities = {} })
        assert.equal(-32602, r.error.code)
        assert.matches("protocolVersion", r.error.message)
        r = c:request(5, "tools/call", { name = "no_such_tool", arguments = {} })
        assert.equal(-32602, r.error.code)
        assert.matches("no_such_tool", r.error.message)
        r = c:request(6, "resources/read", { uri = "sandbox://nothing" })
        assert.equal(-32002, r.error.code)
        assert.equal(7, c:request(7, "ping").id)
        c:close()
    end)

    it("never answers a notification, known or not", function()
        local c = raw.start()
        init(c)
        c:send('{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}')
        c:send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}')
        c:send('{"jsonrpc":"2.0","method":"tools/list"}')
        -- the next line is the ping's answer: nothing came for the three notifications
        assert.equal(5, c:request(5, "ping").id)
        assert.is_nil(c:recv(0.3))
        c:close()
    end)

    it("writes only protocol to stdout and its log to stderr", function()
        local c = raw.start()
        init(c)
        c:send("{broken")
        c:request(2, "tools/call", { name = "execute_code", arguments = { code = "echo to-stdout; echo to-stderr >&2",
            language = "shell" } })
        c:request(3, "tools/call", { name = "create_session", arguments = { language = "shell" } })
        local status, stderr = c:close()
        assert.equal(0, status)
        assert.matches("llmbox mcp: serving on stdio", stderr)
        assert.matches("llmbox mcp: session s%-%x+ opened", stderr)
        -- every line that came out was a JSON-RPC message (the program's output is inside them)
        for _, line in ipairs(c.lines) do
            assert.equal("2.0", cjson.decode(line).jsonrpc)
        end
    end)

    it("answers the calls in progress when its input ends, then exits", function()
        local c = raw.start()
        init(c)
        c:send(cjson.encode({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "execute_code",
            arguments = { code = "sleep 0.5; echo finished", language = "shell" } } }))
        c.stdin:close()
        local r = assert(c:recv(10), "no answer after the input ended")
        assert.equal(2, r.id)
        assert.matches("finished", r.result.structuredContent.stdout)
        assert.equal(0, (c:close()))
    end)
end)

-- The server's event loop only reads, dispatches and answers: the code checks of check_code run
-- in a worker process, so a large input delays no other request.
local cjson = require "cjson"
local raw = require "support.mcp.raw"

describe("mcp event loop #unpriv", function()
    it("answers other requests while check_code checks a large input", function()
        local c = raw.start({ LLMBOX_MCP_WARM = "0" })
        c:init()
        -- 256 KiB of code with a finding at the end: checking it takes a while, wherever it runs
        local line = "x = [i * 2 for i in range(10)]  # a comment that mentions import os\n"
        local code = line:rep(math.floor(256 * 1024 / #line)) .. "import subprocess\nsubprocess.run(['ls'])\n"
        c:send(cjson.encode({ jsonrpc = "2.0", id = 2, method = "tools/call",
            params = { name = "check_code", arguments = { code = code } } }))
        c:send(cjson.encode({ jsonrpc = "2.0", id = 3, method = "tools/list" }))
        c:send(cjson.encode({ jsonrpc = "2.0", id = 4, method = "ping" }))
        c:send(cjson.encode({ jsonrpc = "2.0", id = 5, method = "tools/call",
            params = { name = "execute_code", arguments = { code = "echo small", language = "shell" } } }))
        -- the order of the answers: the list and the ping come before the check's verdict
        local order = {}
        for _ = 1, 4 do
            local msg = assert(c:recv(120), "an answer is missing; got " .. table.concat(order, ","))
            order[#order + 1] = msg.id
            if msg.id == 2 then
                local verdict = msg.result.structuredContent
                assert.is_false(verdict.safe)
                assert.is_true(verdict.blocked)
                assert.matches("subprocess", verdict.violations[1].rule)
            elseif msg.id == 3 then
                assert.equal(9, #msg.result.tools)
            elseif msg.id == 5 then
                assert.equal("small\n", msg.result.structuredContent.stdout)
            end
        end
        local pos = {}
        for i, id in ipairs(order) do pos[id] = i end
        assert.is_true(pos[3] < pos[2], "tools/list waited for the check: " .. table.concat(order, ","))
        assert.is_true(pos[4] < pos[2], "ping waited for the check: " .. table.concat(order, ","))
        c:close()
    end)
end)

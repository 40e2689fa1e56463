-- Runs spec/support/mcp/client.mjs (the official MCP TypeScript SDK client) against build/bin/llmbox
-- and returns what it printed, decoded: sdk.run("calls", { calls = { { name =, arguments = } } }).
local cjson = require "cjson"
local helpers = require "spec.helpers"

local _M = {}

_M.dir = helpers.root .. "/spec/support/mcp"

function _M.installed()
    return helpers.read(_M.dir .. "/node_modules/@modelcontextprotocol/sdk/package.json") ~= nil
end

function _M.run(scenario, opts)
    assert(_M.installed(), "the MCP SDK is not installed: run `make deps-test` (npm ci --prefix spec/support/mcp)")
    local cmd = ("LLMBOX_BIN=%s node %s %s %s 2>&1"):format(helpers.shell_quote(helpers.bin),
        helpers.shell_quote(_M.dir .. "/client.mjs"), scenario, helpers.shell_quote(cjson.encode(opts or {})))
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    local ok, res = pcall(cjson.decode, out)
    assert(ok and type(res) == "table", "the SDK client printed no JSON:\n" .. out)
    return res
end

-- The JSON in a tool result's first text block.
function _M.text_json(result)
    assert(result.content and result.content[1] and result.content[1].type == "text",
        "no text block in " .. cjson.encode(result))
    return cjson.decode(result.content[1].text)
end

return _M

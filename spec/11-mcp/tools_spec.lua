-- One definition per tool, three shapes: MCP, OpenAI function calling, Anthropic tool use
-- (`llmbox tools --format ...`), and the argument checks the server applies.
local cjson = require "cjson"
local helpers = require "spec.helpers"
local tools = require "llmbox.mcp.tools"

local function cli_tools(fmt)
    local status, out, err = helpers.cli({ "tools", "--format", fmt })
    assert.equal(0, status, err)
    return cjson.decode(out), out
end

describe("agent tool schemas #unpriv", function()
    it("prints the same tools in each format", function()
        local mcp, text = cli_tools("mcp")
        local openai = cli_tools("openai")
        local anthropic = cli_tools("anthropic")
        assert.equal(9, #mcp)
        for i, t in ipairs(mcp) do
            assert.equal("function", openai[i].type)
            assert.equal(t.name, openai[i]["function"].name)
            assert.equal(t.name, anthropic[i].name)
            assert.same(t.inputSchema, openai[i]["function"].parameters)
            assert.same(t.inputSchema, anthropic[i].input_schema)
            assert.equal(t.description, anthropic[i].description)
            assert.equal("object", t.inputSchema.type)
        end
        -- JSON types survive: a tool without arguments has an empty *object* of properties, and
        -- lists are arrays
        assert.matches('"name":"get_supported_languages","outputSchema":', text, 1, true)
        assert.matches('"properties":{},"type":"object"', text, 1, true)
        assert.matches('"required":["code"]', text, 1, true)
        assert.matches('"enum":["text","base64"]', text, 1, true)
        -- the default format is mcp
        local _, plain = helpers.cli({ "tools" })
        assert.equal(text, plain)
    end)

    it("refuses an unknown format, saying which exist", function()
        local status, out, err = helpers.cli({ "tools", "--format", "langchain" })
        assert.equal(125, status)
        assert.equal("", out)
        assert.matches("mcp, openai, anthropic", err)
    end)

    it("validates arguments against the input schema", function()
        assert.is_true(tools.validate("execute_code", { code = "1", language = "python", libraries = { "a" }, timeout = 2 }))
        local cases = {
            { {}, 'missing required property "code"' },
            { { code = "" }, "code: must not be empty" },
            { { code = "1", timeout = 0 }, "timeout: must be greater than 0" },
            { { code = "1", timeout = "5" }, "timeout: expected number, got string" },
            { { code = "1", libraries = { 1 } }, "libraries%[0%]: expected string" },
            { { code = "1", libraries = "numpy" }, "libraries: expected array, got string" },
            { { code = "1", extra = 1 }, 'unknown property "extra"' },
        }
        for _, case in ipairs(cases) do
            local ok, err = tools.validate("execute_code", case[1])
            assert.is_nil(ok)
            assert.matches(case[2], err)
        end
        local ok, err = tools.validate("upload_file", { session_id = "s", path = "p", content = "", encoding = "hex" })
        assert.is_nil(ok)
        assert.matches("encoding: expected one of text, base64", err)
        assert.has_error(function() tools.validate("nope", {}) end)
    end)
end)

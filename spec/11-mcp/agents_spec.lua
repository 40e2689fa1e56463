-- examples/agents: each agent framework, installed from npm, connects to `llmbox mcp` over stdio
-- and sees the sandbox's tools; no model is called (--list-tools, --try-tool).
local cjson = require "cjson"
local helpers = require "spec.helpers"

local dir = helpers.root .. "/examples/agents"
local EXPECTED = { "execute_code", "get_supported_languages", "get_language_details", "check_code",
    "create_session", "run_in_session", "upload_file", "download_file", "close_session" }

local function example(name, flag)
    assert(helpers.read(dir .. "/node_modules/.package-lock.json"),
        "the examples' packages are not installed: run `make deps-test` (npm ci --prefix examples/agents)")
    local errfile = helpers.tmpname()
    local p = io.popen(("cd %s && LLMBOX_BIN=%s node %s.mjs %s 2>%s"):format(helpers.shell_quote(dir),
        helpers.shell_quote(helpers.bin), name, flag, helpers.shell_quote(errfile)))
    local out = p:read("*a")
    p:close()
    local err = helpers.read(errfile) or ""
    os.remove(errfile)
    local last = out:match("([^\n]+)\n?$")
    local ok, res = pcall(cjson.decode, last or "")
    assert(ok, name .. " printed no JSON:\n" .. out .. "\nstderr:\n" .. err:sub(-3000))
    return res
end

describe("agent framework examples #unpriv", function()
    for _, name in ipairs({ "openai-agents", "vercel-ai", "langchain" }) do
        it(name .. " gets every llmbox tool and can call one without a model", function()
            assert.same(EXPECTED, example(name, "--list-tools"))
            local r = example(name, "--try-tool")
            -- each framework wraps the MCP result its own way; the run's JSON is in the text block
            local block = r.content and r.content[1] or r
            assert.equal("text", block.type)
            assert.equal("42\n", cjson.decode(block.text).stdout)
        end)
    end
end)

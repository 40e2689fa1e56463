-- Interactive sessions through the other doors: MCP's session tools (the official SDK client
-- over stdio) and the daemon's session routes (real HTTP).
local helpers = require "spec.helpers"
local json = require "llmbox.json"
local sdk = require "support.mcp.sdk"
local serve = require "spec.support.serve"

local function call(name, arguments) return { name = name, arguments = arguments or {} } end

describe("interactive sessions over MCP and HTTP #unpriv", function()
    it("are MCP sessions created with interactive: true, whose run_in_session calls are cells", function()
        local out = sdk.run("calls", { calls = {
            call("create_session", { language = "python", interactive = true }),
            call("run_in_session", { session_id = "$session", code = "import math\ncount = 41" }),
            call("run_in_session", { session_id = "$session", code = "count += 1\nmath.sqrt(count ** 2)" }),
            call("run_in_session", { session_id = "$session", code = "import time\ntime.sleep(20)", timeout = 0.5 }),
            call("run_in_session", { session_id = "$session", code = "count" }),
            call("close_session", { session_id = "$session" }),
        } })
        assert.is_nil(out.error, out.error)
        local r = out.results
        assert.is_true(r[1].structuredContent.interactive)
        assert.equal(0, r[2].structuredContent.exit_code)
        assert.equal("42.0", r[3].structuredContent.value)
        assert.equal(2, r[3].structuredContent.cell)
        assert.equal("timeout", r[4].structuredContent.limit)
        assert.is_false(r[4].structuredContent.state_lost)
        assert.equal("42", r[5].structuredContent.value)
    end)

    it("are the daemon's sessions created with {interactive: true}", function()
        local d = serve.start(helpers.tmpdir())
        finally(function() serve.stop(d) end)
        local function post(path, doc)
            return serve.curl({ sock = d.sock, method = "POST", path = path, body = json.encode(doc), json = true })
        end
        local status, text, s = post("/v1/sessions", { interactive = true })
        assert.equal(201, status, text)
        assert.is_true(s.interactive)
        local base = "/v1/sessions/" .. s.id
        assert.equal(200, (post(base .. "/run", { code = "rows = [1, 2, 3]" })))
        local _, _, r = post(base .. "/run", { code = "sum(rows)" })
        assert.equal("6", r.value)
        assert.equal(2, r.cell)
        local _, _, bad = post("/v1/sessions", { interactive = "yes" })
        assert.matches("interactive must be a boolean", bad.error.message, 1, true)
        local st, _, e = post("/v1/sessions", { interactive = true, lang = "ruby" })
        assert.equal(422, st)
        assert.matches("no interactive mode", e.error.message, 1, true)
    end)
end)

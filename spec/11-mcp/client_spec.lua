-- `llmbox mcp` driven by the official MCP TypeScript SDK client over stdio (spec/support/mcp):
-- what an agent sees when it lists and calls the tools.
local cjson = require "cjson"
local sdk = require "support.mcp.sdk"
local artifacts = require "llmbox.artifacts"

local function call(name, arguments) return { name = name, arguments = arguments or {} } end

-- one server, these calls in order; returns the whole transcript
local function calls(list, opts)
    opts = opts or {}
    opts.calls = list
    local out = sdk.run("calls", opts)
    assert.is_nil(out.error, out.error)
    return out
end

describe("mcp with the official SDK client #unpriv", function()
    it("lists every tool with JSON Schemas, and the languages resource", function()
        local out = calls({}, { resources = true })
        local names = {}
        for _, t in ipairs(out.tools) do
            names[#names + 1] = t.name
            assert.equal("object", t.inputSchema.type, t.name)
            assert.is_string(t.description)
        end
        assert.same({ "execute_code", "get_supported_languages", "get_language_details", "check_code",
            "create_session", "run_in_session", "upload_file", "download_file", "close_session" }, names)
        assert.same({ "code" }, out.tools[1].inputSchema.required)
        assert.equal("integer", out.tools[1].outputSchema.properties.exit_code.type)
        assert.equal("llmbox", out.server.name)
        assert.equal("sandbox://languages", out.resources[1].uri)
        local langs = cjson.decode(out.languages.contents[1].text)
        local python
        for _, l in ipairs(langs) do if l.name == "python" then python = l end end
        assert.is_true(python.plots)
    end)

    it("runs code: output, exit status, and a failing program is not a tool error", function()
        local out = calls({
            call("execute_code", { code = "print(6 * 7)" }),
            call("execute_code", { code = "import sys; print('oops', file=sys.stderr); sys.exit(3)" }),
            call("execute_code", { code = 'echo "$0"; echo hi from sh', language = "shell" }),
        })
        local ok, failed, sh = out.results[1], out.results[2], out.results[3]
        assert.is_nil(ok.isError)
        assert.equal("42\n", sdk.text_json(ok).stdout)
        assert.equal(0, ok.structuredContent.exit_code)
        assert.is_false(ok.structuredContent.timed_out)
        assert.equal(cjson.null, ok.structuredContent.limit)
        assert.is_nil(failed.isError)
        assert.equal(3, failed.structuredContent.exit_code)
        assert.equal("oops\n", failed.structuredContent.stderr)
        assert.matches("hi from sh", sh.structuredContent.stdout)
    end)

    it("returns each matplotlib plot as a PNG image block", function()
        local out = calls({ call("execute_code", { code = [[
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50); plt.plot([1, 2, 3], [1, 4, 9]); plt.show()
plt.figure(figsize=(2, 2), dpi=50); plt.bar([1, 2], [3, 4]); plt.show()
print("plotted")
]] }) })
        local r = out.results[1]
        assert.is_nil(r.isError)
        assert.equal(2, r.structuredContent.plots)
        assert.equal(3, #r.content)
        local sizes = {}
        for i = 2, 3 do
            assert.equal("image", r.content[i].type)
            assert.equal("image/png", r.content[i].mimeType)
            local png = assert(artifacts.unbase64(r.content[i].data))
            sizes[#sizes + 1] = { artifacts.png_size(png) }
        end
        assert.same({ { 200, 150 }, { 100, 100 } }, sizes)
    end)

    it("stops a run at its timeout and says which limit fired", function()
        local t0 = os.time()
        local out = calls({
            call("execute_code", { code = "import time\nprint('start', flush=True)\ntime.sleep(30)", timeout = 1 }),
            call("execute_code", { code = "print(1)", timeout = 100000 }),
        })
        local r = out.results[1]
        assert.is_true(os.time() - t0 < 20)
        assert.is_nil(r.isError)
        assert.is_true(r.structuredContent.timed_out)
        assert.equal("timeout", r.structuredContent.limit)
        assert.equal("start\n", r.structuredContent.stdout)
        -- asking for more than the policy allows is refused, with the reason
        assert.is_true(out.results[2].isError)
        assert.matches("exceeds the limit of policy", out.results[2].content[1].text)
    end)

    it("reports bad arguments and refused code as tool errors the model can read", function()
        local out = calls({
            call("execute_code", {}),
            call("execute_code", { code = 42 }),
            call("execute_code", { code = "print(1)", bogus = true }),
            call("execute_code", { code = "print(1)", language = "cobol" }),
            call("execute_code", { code = "import os\nos.system('ls')" }),
            call("no_such_tool", {}),
        })
        local r = out.results
        for i = 1, 5 do assert.is_true(r[i].isError, "call " .. i) end
        assert.matches('missing required property "code"', r[1].content[1].text)
        assert.matches("code: expected string, got number", r[2].content[1].text)
        assert.matches('unknown property "bogus"', r[3].content[1].text)
        assert.matches('unknown language "cobol"', r[4].content[1].text)
        assert.matches("refused by policy \"default\": os%-system", r[5].content[1].text)
        -- an unknown tool is a protocol error
        assert.matches("%-32602", r[6].error)
    end)

    it("answers the language and check tools", function()
        local out = calls({
            call("get_supported_languages"),
            call("get_language_details", { language = "py" }),
            call("get_language_details", { language = "klingon" }),
            call("check_code", { code = "import subprocess\nsubprocess.run(['ls'])" }),
            call("check_code", { code = "print('fine')" }),
        })
        local r = out.results
        local names = {}
        for _, l in ipairs(r[1].structuredContent.languages) do names[l.name] = true end
        assert.is_true(names.python and names.shell and names.javascript)
        local d = sdk.text_json(r[2])
        assert.equal("python", d.name)
        assert.matches("^Python 3%.", d.version)
        assert.is_true(d.plots)
        assert.is_true(r[3].isError)
        local bad = r[4].structuredContent
        assert.is_false(bad.safe)
        assert.is_true(bad.blocked)
        assert.equal("subprocess", bad.violations[1].rule:match("subprocess"))
        assert.equal(1, bad.violations[1].line)
        assert.is_true(r[5].structuredContent.safe)
        assert.same({}, r[5].structuredContent.violations)
    end)

    it("keeps a session's workspace across calls, moves files both ways, then closes it", function()
        local bin = "\0\1\2\255binary"
        local out = calls({
            call("create_session", { language = "python" }),
            call("upload_file", { session_id = "$session", path = "data/in.txt", content = "hello\n" }),
            call("upload_file", { session_id = "$session", path = "/sandbox/blob", content = artifacts.base64(bin),
                encoding = "base64" }),
            call("run_in_session", { session_id = "$session", code = [[
import os
os.makedirs('out', exist_ok=True)
open('out/result.txt', 'w').write(open('data/in.txt').read().upper())
print(len(open('blob', 'rb').read()))
]] }),
            call("run_in_session", { session_id = "$session", code = "print(open('out/result.txt').read(), end='')" }),
            call("download_file", { session_id = "$session", path = "out/result.txt" }),
            call("download_file", { session_id = "$session", path = "blob" }),
            call("download_file", { session_id = "$session", path = "../etc/passwd" }),
            call("download_file", { session_id = "$session", path = "/etc/passwd" }),
            call("download_file", { session_id = "$session", path = "missing.txt" }),
            call("close_session", { session_id = "$session" }),
            call("run_in_session", { session_id = "$session", code = "print(1)" }),
        })
        local r = out.results
        assert.matches("^s%-", r[1].structuredContent.session_id)
        assert.same({ path = "/sandbox/data/in.txt", size = 6 }, r[2].structuredContent)
        assert.equal(#bin, r[3].structuredContent.size)
        assert.equal(tostring(#bin) .. "\n", r[4].structuredContent.stdout)
        assert.equal("HELLO\n", r[5].structuredContent.stdout)
        assert.same({ path = "/sandbox/out/result.txt", size = 6, encoding = "text", content = "HELLO\n" },
            r[6].structuredContent)
        assert.equal("base64", r[7].structuredContent.encoding)
        assert.equal(bin, artifacts.unbase64(r[7].structuredContent.content))
        assert.is_true(r[8].isError)
        assert.is_true(r[9].isError)
        assert.matches("outside the workspace", r[9].content[1].text)
        assert.is_true(r[10].isError)
        assert.is_true(r[11].structuredContent.closed)
        assert.is_true(r[12].isError)
        assert.matches("no open session", r[12].content[1].text)
    end)

    it("closes sessions after the idle timeout, and only offers the policies the operator allows", function()
        local out = calls({
            call("create_session", {}),
            { sleep = 2500 },
            call("run_in_session", { session_id = "$session", code = "print(1)" }),
            call("create_session", { policy = "permissive" }),
            call("create_session", { policy = "strict" }),
        }, { env = { LLMBOX_MCP_SESSION_IDLE = "1", LLMBOX_MCP_POLICIES = "strict" } })
        local r = out.results
        assert.equal(1, r[1].structuredContent.idle_timeout)
        assert.is_true(r[3].isError)
        assert.matches("no open session", r[3].content[1].text)
        assert.matches("closed %(idle for 1s%)", out.stderr)
        assert.is_true(r[4].isError)
        assert.matches('policy "permissive" is not allowed', r[4].content[1].text)
        assert.equal("strict", r[5].structuredContent.policy)
    end)

    it("cancels a run: the run's processes go away, no result arrives, the server goes on", function()
        local n = tostring(math.random(1000, 9999))
        -- no warm workers: this counts the server's workers (warm_spec covers those)
        local out = sdk.run("cancel", { argv = { "sleep", "25." .. n }, env = { LLMBOX_MCP_WARM = "0" },
            arguments = { code = "sleep 25." .. n, language = "shell" } })
        assert.is_nil(out.error, out.error)
        assert.is_number(out.seen_ms, "the run never started")
        assert.equal(1, out.workers_before)
        assert.matches("^rejected: .*the spec cancels", out.outcome)
        assert.is_number(out.gone_ms, "the run's process outlived the cancellation")
        assert.is_true(out.workers_gone)
        assert.is_true(out.ping)
        assert.equal("still serving\n", out.after.structuredContent.stdout)
        assert.matches("request 1 cancelled", out.stderr)
    end)

    it("cancelling a run in a session closes that session", function()
        local n = tostring(math.random(1000, 9999))
        local out = sdk.run("cancel", { argv = { "sleep", "24." .. n }, tool = "run_in_session",
            env = { LLMBOX_MCP_WARM = "0" },
            session = { language = "shell" }, arguments = { code = "sleep 24." .. n } })
        assert.is_nil(out.error, out.error)
        assert.is_number(out.seen_ms, "the run never started")
        assert.is_number(out.gone_ms, "the run's process outlived the cancellation")
        assert.is_true(out.workers_gone)
        assert.is_true(out.session_after.isError)
        assert.matches("no open session", out.session_after.content[1].text)
        assert.matches("closed %(a run in it was cancelled%)", out.stderr)
    end)

    it("answers while a run is in progress, and runs several at once", function()
        local out = sdk.run("concurrent", {})
        assert.is_nil(out.error, out.error)
        assert.is_true(out.ping_at < 1500, "ping waited for the run: " .. tostring(out.ping_at))
        assert.is_true(out.list_at < 1500)
        assert.equal(9, out.tools)
        assert.is_true(out.slow_at >= 2000)
        assert.equal("slow done\n", out.slow.structuredContent.stdout)
        -- two runs of 1.5 s each, side by side
        assert.is_true(out.both_ms < 2900, "the runs did not overlap: " .. tostring(out.both_ms))
        assert.equal("run 1\n", out.both[1].structuredContent.stdout)
        assert.equal("run 2\n", out.both[2].structuredContent.stdout)
    end)

    it("sends progress notifications while a run prints", function()
        local out = sdk.run("progress", { arguments = { language = "shell",
            code = "for i in 1 2 3; do echo line $i; sleep 0.2; done" } })
        assert.is_nil(out.error, out.error)
        local messages, last = {}, 0
        for _, p in ipairs(out.progress) do
            assert.is_true(p.progress > last) -- progress only goes up
            last = p.progress
            messages[#messages + 1] = p.message
        end
        assert.equal("starting the sandbox", messages[1])
        assert.same({ "stdout: line 1\n", "stdout: line 2\n", "stdout: line 3\n" }, { unpack(messages, 2, 4) })
        assert.equal("line 1\nline 2\nline 3\n", out.result.structuredContent.stdout)
    end)
end)

describe("mcp library installs", function()
    it("installs from npm with progress, under a policy that allows installs", function()
        local out = sdk.run("progress", { env = { LLMBOX_POLICY = "permissive" }, arguments = {
            language = "javascript", libraries = { "is-odd@3.0.1" }, code = "console.log(require('is-odd')(3))" } })
        assert.is_nil(out.error, out.error)
        local saw_install = false
        for _, p in ipairs(out.progress) do saw_install = saw_install or p.message == "installing libraries" end
        assert.is_true(saw_install)
        assert.equal("true\n", out.result.structuredContent.stdout)
        -- the default policy refuses installs, and says so
        out = sdk.run("calls", { calls = { call("execute_code", { language = "javascript", libraries = { "is-odd" },
            code = "1" }) } })
        assert.is_true(out.results[1].isError)
        assert.matches("does not allow library installs", out.results[1].content[1].text)
    end)
end)

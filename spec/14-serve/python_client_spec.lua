-- The Python client (examples/python/llmbox_client.py) against real daemons: one on a unix socket
-- without tokens, one on TCP with tokens. The tests themselves are Python's unittest
-- (python_client_test.py, next to this file); each `it` runs some of its TestCases and shows
-- their output when they fail.
local helpers = require "spec.helpers"
local serve = require "spec.support.serve"

local q = helpers.shell_quote

local TEST = helpers.root .. "/spec/14-serve/python_client_test.py"

-- python3 TEST ARGS with env ("NAME=value ...") -> exit status, stdout and stderr together.
-- -B: no __pycache__ in the checkout; TMPDIR: the Python tests' files in our private directory.
local function python(env, args)
    local out = helpers.tmpname()
    local ok, _, code = os.execute(("cd %s && env %s TMPDIR=%s python3 -B %s %s >%s 2>&1 </dev/null"):format(
        q(helpers.root), env, q(helpers.tmpdir()), q(TEST), args, q(out)))
    local status = type(ok) == "number" and math.floor(ok / 256) or code
    local text = helpers.read(out) or ""
    os.remove(out)
    return status, text
end

describe("the Python client, examples/python/llmbox_client.py #unpriv", function()
    local plain, tokened, env
    local TOKEN = string.rep("c3", 16)
    setup(function()
        local dir = helpers.tmpdir()
        plain = serve.start(dir)
        local tdir = helpers.tmpdir()
        local port = serve.free_port()
        local conf = helpers.write(tdir .. "/serve.lua", ([[return {
            listen = { "unix:%s/llmbox.sock", "127.0.0.1:%d" },
            tokens = { ["%s"] = { tenant = "py", policies = { "default" } } },
        }]]):format(tdir, port, TOKEN))
        tokened = serve.start(tdir, "--config " .. q(conf))
        env = ("LLMBOX_TEST_SERVER=%s LLMBOX_TEST_TCP=127.0.0.1:%d LLMBOX_TEST_TOKEN=%s"):format(
            q("unix:" .. plain.sock), port, TOKEN)
    end)
    teardown(function()
        if plain then serve.stop(plain) end
        if tokened then serve.stop(tokened) end
    end)

    -- runs TestCases; passes when every test in them ran and passed
    local function passes(cases)
        local status, out = python(env, table.concat(cases, " "))
        assert.equal(0, status, out)
        assert.matches("\nOK\n", out, 1, true)
        assert.matches("Ran [1-9]%d* tests? in", out)
        assert.not_matches("skipped", out, 1, true)
        return out
    end

    local covered = {}
    local function cases(names, title)
        for _, n in ipairs(names) do covered[#covered + 1] = n end
        it(title, function() passes(names) end)
    end

    cases({ "Addresses" }, "parses server addresses and finds the daemon's default socket")
    cases({ "OneShot" }, "runs code once (POST /v1/run): output, exit codes, a timeout as a result, the "
        .. "daemon's errors (unknown language: 400) as LlmboxError, and says how to start a daemon it cannot reach")
    cases({ "Sessions" }, "keeps a session's files across runs and commands, brings plots back as PNG bytes, "
        .. "and deletes the session when the with-block ends (a later call is 404)")
    cases({ "Files" }, "copies files and directories both ways, and refuses archives that would escape")
    cases({ "TcpTokens" }, "speaks to a daemon on TCP with its token, from arguments or the environment, "
        .. "and gets 401 with a wrong one")

    it("runs examples/python/example.py as its README shows", function()
        local dir = helpers.tmpdir()
        local out = helpers.tmpname()
        local ok = os.execute(("cd %s && LLMBOX_SERVER=%s python3 -B %s >%s 2>&1 </dev/null"):format(q(dir),
            q("unix:" .. plain.sock), q(helpers.root .. "/examples/python/example.py"), q(out)))
        local text = helpers.read(out) or ""
        assert.is_true(ok == 0 or ok == true, text)
        assert.matches("sum of squares: 55\nsaved plot0.png (640x480)\n", text, 1, true)
        assert.matches("squares.csv\none-shot: 42\nrefused: 400 bad_request: unknown language", text, 1, true)
        assert.equal("\137PNG\r\n\26\n", (helpers.read(dir .. "/plot0.png") or ""):sub(1, 8))
    end)

    it("runs every TestCase python_client_test.py has", function()
        local status, out = python("", "--list")
        assert.equal(0, status, out)
        local listed = {}
        for name in out:gmatch("[^\n]+") do listed[#listed + 1] = name end
        table.sort(covered)
        assert.same(listed, covered)
    end)
end)

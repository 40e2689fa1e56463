-- The examples run for real, so they cannot rot.
local helpers = require "spec.helpers"
local _ -- the placeholder for values a spec ignores

describe("examples #unpriv", function()
    it("cli-session.sh", function()
        local out = helpers.tmpname()
        local ok = os.execute("sh examples/cli-session.sh " .. helpers.shell_quote(helpers.bin) .. " >" .. out .. " 2>&1 </dev/null")
        local text = helpers.read(out)
        os.remove(out)
        assert.is_truthy(ok == 0 or ok == true, text)
        assert.matches("^45\n", text)
        assert.matches('"stdout":"%[\'alpha\', \'beta\'%]\\n"', text)
        assert.matches("I am sandbox in /sandbox", text, 1, true)
        assert.matches("\nsafe\n", text)
        assert.matches("timeout status: 124", text, 1, true)
    end)

    it("operator-script.lua, with arguments", function()
        local st, out = helpers.cli({ "script", "examples/operator-script.lua", "3", "strict" })
        assert.equal(0, st)
        assert.equal("run 1\nrun 2\nrun 3\nis_safe(subprocess): false (1 violation)\ndone with policy strict\n", out)
    end)

    it("pool-workers.lua: callers served in arrival order from a pool of two", function()
        local st, out, err = helpers.cli({ "script", "examples/pool-workers.lua", "4" })
        assert.equal(0, st, err)
        assert.equal("caller 1: 45 (warm)\ncaller 2: 190 (warm)\ncaller 3: 435 (warm)\n"
            .. "caller 4: 780 (warm)\n4 callers, 2 waited, 6 sandboxes created\n", out)
    end)

    it("policies/classroom.lua: a custom policy extending strict", function()
        local st, out, err = helpers.cli({ "run", "-p", "examples/policies/classroom.lua", "-c",
            "import os, subprocess\nprint(os.environ['COURSE'])" })
        -- warn mode: the code runs, and the warning names the rule
        assert.equal(0, st)
        assert.equal("intro-to-python\n", out)
        assert.matches("warning", err)
        assert.matches("subprocess", err)
        -- its limits are in force: 128M memory, 20 s timeout at most
        st, _, err = helpers.cli({ "run", "-p", "examples/policies/classroom.lua", "-t", "60", "-c", "1" })
        assert.equal(125, st)
        assert.matches("exceeds the limit", err)
    end)
end)

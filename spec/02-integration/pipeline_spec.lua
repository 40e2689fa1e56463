-- The run as a pipeline: admit (before any sandbox exists) -> plan -> execute -> collect -> render.
local llmbox = require "llmbox"
local admit = require "llmbox.admit"
local render = require "llmbox.render"
local recipes = require "llmbox.recipes"

local REFUSED = "import os\nos.system('id')\n"

local count_opens = require("spec.helpers").count_opens

describe("run pipeline #unpriv", function()
    it("refuses code before any sandbox exists, and runs admitted code in one", function()
        local r, err, report
        local n = count_opens(function() r, err, report = llmbox.run(REFUSED) end)
        assert.is_nil(r)
        assert.matches('^refused by policy "default": ', err)
        assert.is_true(report.blocked)
        assert.equal(0, n) -- the control below shows the counter sees opens
        n = count_opens(function() r = assert(llmbox.run("print(1)")) end)
        assert.equal("1\n", r.stdout)
        assert.equal(1, n)
    end)

    it("refuses libraries the policy does not allow before any sandbox exists", function()
        local r, err
        local n = count_opens(function() r, err = llmbox.run("print(1)", { libraries = { "six" } }) end)
        assert.is_nil(r)
        assert.equal('policy "default" does not allow library installs (libraries.allow = false)', err)
        assert.equal(0, n)
        n = count_opens(function()
            r, err = llmbox.run("print(1)", { policy = "permissive", libraries = { "--index-url=http://x" } })
        end)
        assert.is_nil(r)
        assert.matches("starts with '-'", err, 1, true)
        assert.equal(0, n)
    end)

    it("checks code itself unless given an admission made for that code, recipe and policy", function()
        local s = assert(llmbox.session({ lang = "python" }))
        local py = assert(recipes.get("python"))
        -- a table that looks like an admission is not one
        local r, err = s:run(REFUSED, nil, { report = { violations = {} }, code = REFUSED, recipe = py, policy = s.policy })
        assert.is_nil(r)
        assert.matches("refused by policy", err, 1, true)
        -- an admission of other code does not cover this code
        local a = assert(admit.run("print(2)", py, s.policy))
        assert.is_false(admit.covers(a, REFUSED, py, s.policy))
        r, err = s:run(REFUSED, nil, a)
        assert.is_nil(r)
        assert.matches("refused by policy", err, 1, true)
        -- the right one is used as it is (its warnings reach the result)
        r = assert(s:run("print(2)", nil, a))
        assert.equal("2\n", r.stdout)
        s:close()
    end)

    it("renders one result object for every door", function()
        local o = render.result({ exit_code = 0, stdout = "ok\255\n", stderr = "", duration_ms = 1.23456789,
            plots = { { format = "svg", data = "<svg/>" } } })
        assert.equal("ok\239\191\189\n", o.stdout) -- invalid UTF-8 becomes U+FFFD
        assert.equal(1.235, o.duration_ms)
        assert.is_nil(o.cpu_ms) -- unknown: absent, not 0
        assert.equal(false, o.timed_out)
        assert.equal("PHN2Zy8+", o.plots[1].data)
        assert.equal(require("llmbox.json").null, o.plots[1].width)
        assert.equal('[]', require("llmbox.json").encode(render.result({ exit_code = 0, duration_ms = 0 }).plots))
        -- the CLI's --json is the same object
        local cjson = require "cjson"
        local st, out = require("spec.helpers").cli({ "run", "--json", "-c", "print(1)" })
        assert.equal(0, st)
        local j = cjson.decode(out)
        for _, k in ipairs({ "exit_code", "stdout", "stderr", "timed_out", "limit", "duration_ms", "truncated",
            "signal", "phase", "plots" }) do
            assert.is_not_nil(j[k], k)
        end
    end)
end)

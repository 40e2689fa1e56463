-- Library installs: into the session's workspace, from an offline source or the npm registry,
-- with a network for the install step only (egress of its own: spec/02-integration/egress_spec.lua),
-- and names that cannot smuggle options. The offline ones are in the conformance suite: the
-- container backends mount the policy's offline sources read-only, as native does; an install
-- that needs the network is refused there (the npm one is native's alone).
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local wheel = require "support.wheel"

local function policy_file(text)
    return helpers.write(helpers.tmppath(".lua"), text)
end

describe("libraries", function()
    local wheels, pol
    setup(function()
        wheels = helpers.tmppath()
        wheel.build(wheels, "llmboxdemo", "1.0", "def answer():\n    return 42\n")
        pol = policy_file(([[return { extends = "default", checks = { mode = "off" },
            libraries = { allow = true, sources = { python = { find_links = { %q } } } } }]]):format(wheels))
    end)
    teardown(function()
        os.execute("rm -rf " .. helpers.shell_quote(wheels))
        os.remove(pol)
    end)

    it("streams the install's output after an on_phase mark, then the program's #unpriv #conformance", function()
        local events = {}
        local function on(kind) return function(x) events[#events + 1] = kind .. ":" .. x end end
        local r = assert(llmbox.run("print('ran')", { policy = pol, libraries = { "llmboxdemo==1.0" },
            on_phase = on("phase"), on_stdout = on("out"), on_stderr = on("err") }))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("phase:install", events[1])
        local text = table.concat(events, "\n")
        local run_at = assert(text:find("phase:run", 1, true))
        assert.matches("Successfully installed llmboxdemo", text:sub(1, run_at), 1, true)
        -- after the run's mark, the program's output (an engine may deliver it in more than one chunk)
        local after, seen_run = {}, false
        for _, e in ipairs(events) do
            if seen_run then after[#after + 1] = e:gsub("^out:", "", 1) end
            if e == "phase:run" then seen_run = true end
        end
        assert.equal("ran\n", table.concat(after))
        -- without on_phase, the install stays quiet (the CLI shows it only when it fails)
        events = {}
        assert(llmbox.run("print('ran')", { policy = pol, libraries = { "llmboxdemo==1.0" },
            on_stdout = on("out"), on_stderr = on("err") }))
        -- (the program's output only: an engine may deliver it in more than one chunk)
        for i, e in ipairs(events) do
            assert.matches("^out:", e)
            events[i] = e:sub(5)
        end
        assert.equal("ran\n", table.concat(events))
    end)

    it("installs a locally built wheel into the session's workspace, offline #unpriv #conformance", function()
        local s = assert(llmbox.session({ lang = "python", policy = pol }))
        local r = assert(s:run("import llmboxdemo; print(llmboxdemo.answer())", { libraries = { "llmboxdemo==1.0" } }))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("42\n", r.stdout)
        -- it stays installed for the session's next runs, in the workspace
        r = assert(s:run("import llmboxdemo, os; print(llmboxdemo.__file__)"))
        assert.equal("/sandbox/.llmbox/python/llmboxdemo/__init__.py\n", r.stdout)
        s:close()
        -- and another session does not have it
        local s2 = assert(llmbox.session({ lang = "python", policy = pol }))
        r = assert(s2:run("import llmboxdemo"))
        s2:close()
        assert.equal(1, r.exit_code)
        assert.matches("ModuleNotFoundError", r.stderr)
    end)

    it("pools pre-install libraries into each ready sandbox, before the warm start #unpriv #conformance", function()
        local p = assert(llmbox.pool({ lang = "python", policy = pol, min = 1, max = 2,
            libraries = { "llmboxdemo==1.0" } }))
        for _ = 1, 2 do
            local s = assert(llmbox.session({ pool = p }))
            local r = assert(s:run("import llmboxdemo; print(llmboxdemo.answer())"))
            s:close()
            assert.equal(0, r.exit_code, r.stderr)
            assert.equal("42\n", r.stdout)
            assert.is_true(r.warm)
        end
        p:close()
        -- installing into a lease drops its warm interpreter, which could not import the library
        p = assert(llmbox.pool({ lang = "python", policy = pol, min = 1, max = 1 }))
        local s = assert(llmbox.session({ pool = p }))
        local inst = assert(s:install({ "llmboxdemo==1.0" }))
        assert.equal(0, inst.exit_code, inst.stderr)
        local r = assert(s:run("import llmboxdemo; print(llmboxdemo.answer())"))
        s:close()
        p:close()
        assert.is_nil(r.warm)
        assert.equal("42\n", r.stdout, r.stderr)
        local bad
        p, bad = llmbox.pool({ lang = "python", policy = pol, min = 1, libraries = { "no-such-package" } })
        assert.is_nil(p)
        assert.matches("installing libraries failed", bad, 1, true)
    end)

    it("reports a failed install as the install's result, not a sandbox error #unpriv #conformance", function()
        local s = assert(llmbox.session({ lang = "python", policy = pol }))
        local r = assert(s:run("print(1)", { libraries = { "no-such-package" } }))
        s:close()
        assert.equal("install", r.phase)
        assert.is_not.equal(0, r.exit_code)
        assert.matches("No matching distribution", r.stderr)
    end)

    it("refuses package names that smuggle options, paths, URLs or shell #unpriv #conformance", function()
        local s = assert(llmbox.session({ lang = "python", policy = pol }))
        for _, bad in ipairs({ "--index-url=http://evil.example/", "-e.", "x; rm -rf /", "$(id)", "a b",
            "../../etc/passwd", "/tmp/x.whl", "http://evil.example/x.whl", "git+https://x/y", "" }) do
            local r, err = s:install({ bad })
            assert.is_nil(r, bad)
            assert.matches("^install: package 1", err)
        end
        s:close()
    end)

    it("is refused by a policy that does not allow installs #unpriv #conformance", function()
        local s = assert(llmbox.session({ lang = "python", policy = "default" }))
        local r, err = s:run("print(1)", { libraries = { "anything" } })
        s:close()
        assert.is_nil(r)
        assert.matches("does not allow library installs", err)
    end)

    it("installs a real npm package from the registry, with the network only for the install", function()
        local s = assert(llmbox.session({ lang = "javascript", policy = "permissive" }))
        local r = assert(s:run("const isNumber = require('is-number'); console.log(isNumber(5), isNumber('x'))",
            { libraries = { "is-number@7.0.0" } }))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("true false\n", r.stdout)
        -- the program itself has no network: not even the install's names resolve (they are in
        -- the install runs' own /etc/hosts only)
        r = assert(s:run([[
require('https').get('https://registry.npmjs.org/', () => console.log('NETWORK'))
  .on('error', (e) => console.log('no network: ' + e.code));
]]))
        s:close()
        assert.equal("no network: EAI_AGAIN\n", r.stdout)
    end)
end)

describe("libraries from local R and Ruby repositories #unpriv #conformance", function()
    local dir
    setup(function()
        dir = helpers.tmppath()
        local ok = os.execute("sh spec/support/build_repos.sh " .. helpers.shell_quote(dir) .. " >/dev/null 2>&1")
        assert(ok == 0 or ok == true, "building the local repositories failed")
    end)
    teardown(function() os.execute("rm -rf " .. helpers.shell_quote(dir)) end)

    it("R: install.packages from a local repository into the workspace", function()
        local pol = helpers.write(helpers.tmppath(".lua"), ([[return { extends = "default",
            libraries = { allow = true, sources = { r = { repos = %q } } } }]]):format(dir .. "/cran"))
        local s = assert(llmbox.session({ lang = "r", policy = pol }))
        local r = assert(s:run("library(llmboxr); cat(answer(), '\\n')", { libraries = { "llmboxr" } }))
        s:close()
        os.remove(pol)
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("42 \n", r.stdout)
    end)

    it("Ruby: gem install from a local source into the workspace", function()
        local pol = helpers.write(helpers.tmppath(".lua"), ([[return { extends = "default",
            libraries = { allow = true, sources = { ruby = { source = %q } } } }]]):format(dir .. "/gems"))
        local s = assert(llmbox.session({ lang = "ruby", policy = pol }))
        local r = assert(s:run("require 'llmboxrb'; puts Llmboxrb.answer", { libraries = { "llmboxrb" } }))
        s:close()
        os.remove(pol)
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("42\n", r.stdout)
    end)
end)

-- core.spawn: a supervised process without a jail, for backends that wrap another sandbox
-- program (bubblewrap, nsjail). Same steps, result and limits as a run; nothing it started
-- outlives it.
local core = require "llmbox.core"
local native = require "llmbox.backends.native"
local helpers = require "spec.helpers"

local ENV = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8" }

local function spawn(spec, on_stdout)
    spec.env = spec.env or ENV
    spec.cwd = spec.cwd or "/"
    local run, err = core.spawn(spec)
    if not run then return nil, err end
    return native.drive(run, on_stdout, nil)
end

local function alive(pid)
    local st = helpers.read("/proc/" .. pid .. "/stat")
    return st ~= nil and not st:match("^%d+ %b() Z")
end

describe("core.spawn #unpriv", function()
    it("runs argv with stdin, environment and cwd, and reports output and exit status", function()
        local chunks = {}
        local r = assert(spawn({ argv = { "/bin/sh", "-c", "pwd; echo \"$X\"; tr a-z A-Z; echo err >&2; exit 3" },
            env = { "PATH=/usr/bin:/bin", "X=set" }, cwd = "/tmp", stdin = "abc\n" },
            function(c) chunks[#chunks + 1] = c end))
        assert.equal("/tmp\nset\nABC\n", r.stdout)
        assert.equal("err\n", r.stderr)
        assert.equal(3, r.exit_code)
        assert.equal(r.stdout, table.concat(chunks))
    end)

    it("says when the command cannot start, like a shell", function()
        local r = assert(spawn({ argv = { "/nonexistent/prog" } }))
        assert.equal(127, r.exit_code)
        assert.matches("llmbox: cannot execute /nonexistent/prog", r.stderr, 1, true)
    end)

    it("kills the whole tree at the timeout, daemons that left the group too", function()
        local mark = helpers.tmppath()
        local r = assert(spawn({ argv = { "/bin/sh", "-c",
            "setsid sh -c 'echo $$ > " .. mark .. "; exec sleep 30' >/dev/null 2>&1 & sleep 30" }, limits = { timeout = 0.5 } }))
        assert.is_true(r.timed_out)
        assert.equal("timeout", r.limit)
        -- it let go of the output pipes: only the supervisor's sweep can end it
        local pid = tonumber(helpers.read(mark))
        assert.is_number(pid)
        assert.is_false(alive(pid), "the setsid daemon outlived the spawn")
        os.remove(mark)
    end)

    it("kills what the program left behind when it exits on its own", function()
        local mark = helpers.tmppath()
        local r = assert(spawn({ argv = { "/bin/sh", "-c",
            "(setsid sh -c 'echo $$ > " .. mark .. "; exec sleep 30' >/dev/null 2>&1 &) ; sleep 0.2; echo done" } }))
        assert.equal(0, r.exit_code)
        assert.equal("done\n", r.stdout)
        -- it let go of the output pipes: only the supervisor's sweep can end it
        local pid = tonumber(helpers.read(mark))
        assert.is_number(pid)
        assert.is_false(alive(pid), "a grandchild outlived the spawn")
        os.remove(mark)
    end)

    it("caps output and refuses what needs a jail", function()
        local r = assert(spawn({ argv = { "/bin/sh", "-c", "yes" }, limits = { output = 1000 } }))
        assert.equal("output", r.limit)
        assert.is_true(r.truncated)
        assert.equal(1000, #r.stdout)
        local run, err = core.spawn({ argv = { "/bin/true" }, env = ENV, cwd = "/", files = { { path = "/x", data = "" } } })
        assert.is_nil(run)
        assert.matches("need a jail", err, 1, true)
        run, err = core.spawn({ argv = { "/bin/true" }, env = ENV })
        assert.is_nil(run)
        assert.matches("working directory is required", err, 1, true)
    end)
end)

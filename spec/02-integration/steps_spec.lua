-- Runs that never block: the C core supervises a run in steps, output reaches the callbacks from
-- Lua (so they may yield or fail), and an event loop can drive several runs at once.
local llmbox = require "llmbox"
local native = require "llmbox.backends.native"
local ffi = require "ffi"

pcall(ffi.cdef, "int getpid(void);")

-- The caller's children that have exited but were not waited for (zombies).
local function zombies()
    local n = 0
    local p = io.popen("ps -o stat= --ppid " .. ffi.C.getpid())
    for line in p:lines() do
        if line:match("^Z") then n = n + 1 end
    end
    p:close()
    return n
end

describe("runs in steps #unpriv", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python" })) end)
    after_each(function() s:close() end)

    it("lets an output callback yield, and the run goes on when it is resumed", function()
        local seen = {}
        local co = coroutine.create(function()
            return s:run("import sys\nfor i in range(3): print(i)\nsys.exit(4)", {
                on_stdout = function(chunk)
                    seen[#seen + 1] = chunk
                    coroutine.yield("chunk")
                end,
            })
        end)
        local yields, r = 0
        repeat
            local ok
            ok, r = coroutine.resume(co)
            assert(ok, r)
            if r == "chunk" then yields = yields + 1 end
        until coroutine.status(co) == "dead"
        assert.is_true(yields >= 1)
        assert.equal(yields, #seen)
        assert.equal("0\n1\n2\n", table.concat(seen))
        assert.equal("0\n1\n2\n", r.stdout)
        assert.equal(4, r.exit_code)
    end)

    it("fails the run with the callback's error, and stops it", function()
        local r, err = s:run("import time\nprint('x', flush=True)\ntime.sleep(30)",
            { on_stdout = function() error("boom", 0) end })
        assert.is_nil(r)
        assert.equal("on_stdout callback failed: boom", err)
        -- control: the same program with a working callback runs to its end (shortened)
        r = assert(s:run("print('x')", { on_stdout = function() end }))
        assert.equal("x\n", r.stdout)
    end)

    it("drives two runs at once from one loop, never blocking in a step", function()
        local h = s.handle
        local env = { "PATH=/usr/bin:/bin" }
        local a = assert(h:start({ argv = { "/bin/sh", "-c", "sleep 0.3; echo a" }, env = env }))
        local b = assert(h:start({ argv = { "/bin/sh", "-c", "echo b; exit 2" }, env = env }))
        local out, over = { a = {}, b = {} }, {}
        local steps = 0
        while not (over.a and over.b) do
            for name, run in pairs({ a = a, b = b }) do
                if not over[name] then
                    over[name] = run:step(0)
                    steps = steps + 1
                    local chunks = run:take()
                    for i = 2, #(chunks or {}), 2 do table.insert(out[name], chunks[i]) end
                    local fds, events, timeout = run:fds()
                    assert.is_table(fds)
                    assert.equal(#fds, #events)
                    assert.is_true(timeout == nil or timeout >= 0)
                end
            end
            os.execute("sleep 0.01")
        end
        local ra, rb = assert(a:result()), assert(b:result())
        assert.equal("a\n", ra.stdout)
        assert.equal(0, ra.exit_code)
        assert.equal("b\n", rb.stdout)
        assert.equal(2, rb.exit_code)
        assert.equal("b\n", table.concat(out.b))
        assert.is_true(steps > 2) -- b ended while a was still going
        assert.has_error(function() a:step() end, "this run has ended")
    end)

    it("keeps the stdin it was given alive while it runs, whatever the caller does with its table", function()
        local spec = { argv = { "/bin/cat" }, env = { "PATH=/usr/bin:/bin" }, stdin = ("stdin!"):rep(50000) }
        local run = assert(s.handle:start(spec))
        spec.stdin = nil
        for _ = 1, 3 do collectgarbage() end
        local r = assert(native.drive(run))
        assert.equal(300000, #r.stdout)
        assert.equal(("stdin!"):rep(50000), r.stdout)
    end)

    it("kills a run that is collected unfinished, without waiting, and leaves nothing behind", function()
        local mark = s.layout.workspace .. "/late"
        do
            local run = assert(s.handle:start({ argv = { "/bin/sh", "-c", "sleep 0.5; touch " .. mark },
                env = { "PATH=/usr/bin:/bin" } }))
            assert.is_false(run:step(0))
        end
        collectgarbage()
        collectgarbage()
        native.maintain(true) -- collects what the discarded run left
        assert.equal(0, zombies())
        os.execute("sleep 0.7")
        local r = assert(s:exec({ "ls", s.layout.workspace }))
        assert.equal("", r.stdout) -- it was killed before it could write
        -- control: the same program, left to run, writes its mark
        r = assert(s:exec({ "/bin/sh", "-c", "sleep 0.5; touch " .. mark .. "; ls " .. s.layout.workspace }))
        assert.equal("late\n", r.stdout)
    end)
end)

describe("opening and emptying in steps #unpriv", function()
    local plan = require "llmbox.plan"
    local policy = require "llmbox.policy"
    local recipes = require "llmbox.recipes"
    local core = require "llmbox.core"
    local spec = plan.sandbox(assert(policy.load("default")), assert(recipes.get("python")))

    local function children()
        local n = 0
        local p = io.popen("ps -o pid= --ppid " .. ffi.C.getpid())
        for _ in p:lines() do n = n + 1 end
        p:close()
        return n - 1 -- ps itself
    end

    -- Steps a task to its end, counting the steps that were not the last.
    local function drive(task)
        local steps = 0
        while true do
            local fds = task:fds()
            assert.is_true(#fds <= 1)
            if task:step(-1) then return steps end
            steps = steps + 1
        end
    end

    it("opens a jail only as the caller steps it, one fd at a time, and the jail works", function()
        local opening = assert(native.open_start(spec))
        -- the setup child waits for the caller's uid maps, which only a step writes: however
        -- long the caller does other things, the jail is not made behind its back
        os.execute("sleep 0.2")
        local fds, events = opening:fds()
        assert.equal(1, #fds)
        assert.same({ "r" }, events)
        -- namespaces made (maps written), root built, setup children gone: each its own step
        assert.is_true(drive(opening) >= 2)
        local h = assert(opening:result())
        local r = assert(h:run({ argv = { "/bin/sh", "-c", "echo in; id -u" }, env = { "PATH=/usr/bin:/bin" },
            cwd = "/sandbox", limits = { timeout = 10 } }))
        assert.equal("in\n1000\n", r.stdout)
        h:close()
        assert.equal(0, zombies())
    end)

    it("drives several openings at once from one loop", function()
        local a, b = assert(native.open_start(spec)), assert(native.open_start(spec))
        local over = {}
        while not (over[a] and over[b]) do
            for _, t in ipairs({ a, b }) do
                if not over[t] then over[t] = t:step(0) end
            end
        end
        local ha, hb = assert(a:result()), assert(b:result())
        assert(ha:run({ argv = { "/bin/sh", "-c", "echo a > /sandbox/f" }, env = {}, cwd = "/", limits = { timeout = 10 } }))
        local r = assert(hb:run({ argv = { "/bin/sh", "-c", "cat /sandbox/f 2>&1 || true" }, env = {}, cwd = "/",
            limits = { timeout = 10 } }))
        assert.matches("No such file", r.stdout, 1, true) -- two jails, two workspaces
        ha:close()
        hb:close()
    end)

    it("reports a setup failure from result(), and leaves nothing behind", function()
        local bad = {}
        for k, v in pairs(spec) do bad[k] = v end
        bad.mounts = { { src = "/nonexistent/llmbox-spec", dst = "/x", optional = false } }
        local opening = assert(native.open_start(bad))
        drive(opening)
        local h, err = opening:result()
        assert.is_nil(h)
        assert.matches("/nonexistent/llmbox-spec", err, 1, true)
        assert.equal(0, zombies())
        assert.has_error(function() opening.task:step(0) end, "the task has ended")
    end)

    it("abandons an opening that is collected unfinished, without waiting, and core.reap ends it", function()
        local before = children()
        do
            local opening = assert(native.open_start(spec))
            opening:step(-1) -- the namespaces exist; the root is being built
        end
        collectgarbage()
        collectgarbage()
        core.reap(true)
        assert.equal(before, children())
        assert.equal(0, zombies())
    end)

    it("empties a jail in steps; the jail may even be closed meanwhile", function()
        local h = assert(native.open(spec))
        assert(h:run({ argv = { "/bin/sh", "-c", "echo x > /sandbox/kept; echo y > /tmp/t" }, env = {}, cwd = "/",
            limits = { timeout = 10 } }))
        local task = assert(h:reset_start())
        drive(task)
        assert.is_true(assert(task:result()))
        local r = assert(h:run({ argv = { "/bin/sh", "-c", "ls -A /sandbox /tmp" }, env = {}, cwd = "/",
            limits = { timeout = 10 } }))
        assert.equal("/sandbox:\n\n/tmp:\n", r.stdout)
        task = assert(h:reset_start())
        h:close()
        assert.is_true(assert(task:result()))
        assert.equal(0, zombies())
    end)
end)

-- The backend conformance suite. Every spec tagged #conformance (this file's contract, and the
-- languages, plots, copies, limits, pools and warm/cold equivalence, and the adversarial corpus)
-- runs against the backend named by $LLMBOX_BACKEND (native when unset), and spec/run.sh runs
-- them again for every backend listed in $LLMBOX_CONFORMANCE_BACKENDS. A backend is done when
-- they all pass on it as on native.
local llmbox = require "llmbox"
local backends = require "llmbox.backends"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"

local name = backends.default()
local driver = assert(backends.get(name))
local caps = driver.capabilities

describe("conformance: the " .. name .. " backend's contract #conformance #unpriv", function()
    it("declares every capability and every layout path, and the driver functions", function()
        assert(backends.check_driver(driver))
        local ok, why = driver.usable()
        assert.is_true(ok, why)
    end)

    it("opens a sandbox in steps an event loop can drive, and empties it in steps when it pools", function()
        local spec = plan.sandbox(assert(policy.load("default")), nil, { image = plan.image(driver, nil) })
        local opening = assert(driver.open_start(spec))
        repeat
            local fds, events, timeout = opening:fds()
            assert.is_table(fds)
            assert.is_table(events)
            assert.is_true(timeout == nil or timeout >= 0)
        until opening:step(-1)
        local h = assert(opening:result())
        assert.is_false(h:closed())
        if caps.pool then
            local task = assert(h:reset_start())
            repeat until task:step(-1)
            assert.is_true(assert(task:result()))
        end
        h:close()
    end)

    it("puts the code and the working directory where its layout says", function()
        local s = assert(llmbox.session({ lang = "python" }))
        local r = assert(s:run("import os\nprint(os.getcwd())\nprint(__file__)"))
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(driver.layout.workspace .. "\n" .. driver.layout.code .. "/main.py\n", r.stdout)
    end)

    it("keeps the workspace across the runs of a session when it says persistent_workspace", function()
        local s = assert(llmbox.session({ lang = "shell" }))
        assert.equal(0, assert(s:run("echo kept > note.txt")).exit_code)
        local r = assert(s:run("cat note.txt"))
        s:close()
        if caps.persistent_workspace then
            assert.equal("kept\n", r.stdout)
        else
            assert.is_not.equal(0, r.exit_code)
        end
    end)

    it("cuts the network to loopback when it says network_policy", function()
        if not caps.network_policy then
            pending("the backend does not declare network_policy: policies with network = none are refused")
            return
        end
        local s = assert(llmbox.session({ lang = "shell" }))
        local r = assert(s:exec("cat /proc/net/dev"))
        s:close()
        local ifaces = {}
        for iface in r.stdout:gmatch("\n%s*([%w@._-]+):") do ifaces[#ifaces + 1] = iface end
        assert.same({ "lo" }, ifaces)
    end)

    it("enforces the policy's syscall rules when it says seccomp", function()
        if not caps.seccomp then
            pending("the backend does not declare seccomp")
            return
        end
        local s = assert(llmbox.session({ lang = "shell" }))
        -- the default policy refuses new namespaces; the control starts a plain child process
        local r = assert(s:run("if unshare --user true 2>/dev/null; then echo made; else echo refused; fi\n"
            .. "sh -c 'echo forked'"))
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("refused\nforked\n", r.stdout)
    end)

    it("hands out fresh sandboxes from a pool when it says pool", function()
        if not caps.pool then
            local p, err = llmbox.pool({ lang = "shell", min = 0, max = 1 })
            assert.is_nil(p)
            assert.matches("does not support pools", err, 1, true)
            return
        end
        local p = assert(llmbox.pool({ lang = "shell", min = 1, max = 2 }))
        local a = assert(p:acquire())
        assert.equal(0, assert(a:run("echo secret > left.txt")).exit_code)
        a:close()
        assert(p:maintain())
        local b = assert(p:acquire())
        local r = assert(b:run("ls"))
        b:close()
        assert.equal("", r.stdout)
        assert.equal(2, p:stats().acquired)
        p:close()
    end)

    it("refuses what it does not declare instead of running with less", function()
        local spec = plan.sandbox(assert(policy.load("default")), nil, { image = plan.image(driver, nil) })
        if not caps.images then
            spec.image = "python:3.12-slim"
            local h, err = driver.open(spec)
            assert.is_nil(h)
            assert.matches("image", err, 1, true)
            spec.image = nil
        end
        if not caps.egress then
            spec.network = { mode = "egress" }
            local h, err = driver.open(spec)
            assert.is_nil(h)
            assert.matches("egress", err, 1, true)
        end
        if not caps.existing_sandbox then
            local s, err = llmbox.session({ lang = "shell", keep = true })
            assert.is_nil(s)
            assert.matches("cannot keep a sandbox past its session or attach to one", err, 1, true)
        end
        if not caps.commit then
            local s = assert(llmbox.session({ lang = "shell" }))
            local img, err = s:commit("localhost/llmbox-spec-never:1")
            s:close()
            assert.is_nil(img)
            assert.matches("cannot commit a sandbox to an image", err, 1, true)
        end
    end)

    it("keeps a sandbox past close and attaches to it by id, when it says it can", function()
        if not caps.existing_sandbox then return end
        local s = assert(llmbox.session({ lang = "shell", keep = true }))
        local id = assert(s:id())
        assert.equal(0, assert(s:run("echo kept > state")).exit_code)
        s:close()
        local a = assert(llmbox.session({ lang = "shell", container = id }))
        local r = assert(a:run("cat state"))
        a:close({ remove = true })
        assert.equal("kept\n", r.stdout)
        local gone, err = llmbox.session({ lang = "shell", container = id })
        assert.is_nil(gone)
        assert.matches("no container", err, 1, true)
    end)
end)

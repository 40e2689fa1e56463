-- Reliability: many sandboxes at once leave nothing behind; a caller killed mid-run leaves
-- nothing behind; host-side failures and unmet requirements are clear errors.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local soak = require "support.soak_lib"
local q = helpers.shell_quote

local function sh(cmd)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
end

describe("reliability", function()
    it("soak: hundreds of sandboxes, many at once, some killed by limits and timeouts, leave nothing", function()
        local rep = soak.run(4, 120)
        assert.same({}, rep.problems, soak.describe(rep))
        local total = 0
        for _, n in pairs(rep.counts) do total = total + n end
        assert.equal(480, total)
    end)

    it("soak: counts what it created, not the host's totals, while other sandboxes come and go", function()
        -- a neighbour that is running when the soak starts and finishes during it, and others
        -- starting and stopping all along: none of them is the soak's to account for
        local function background(cmd)
            local p = io.popen("sh -c " .. q("exec " .. cmd) .. " </dev/null >/dev/null 2>&1 & echo $!")
            local pid = p:read("*l")
            p:close()
            return pid
        end
        local neighbour = background(q(helpers.bin) .. " exec -- sleep 1")
        local churn = background("sh -c " .. q("while :; do " .. q(helpers.bin) .. " exec -- sleep 0.2; done"))
        finally(function() os.execute("kill " .. churn .. " " .. neighbour .. " 2>/dev/null") end)
        local function running(pid) return sh("ps -o pid= -p " .. pid):match("%d") ~= nil end
        local function sandboxes_of(pid) -- its per-run cgroups exist while its sandbox runs
            local n = 0
            for _, base in ipairs(helpers.cgroup_bases()) do
                for _, name in ipairs(require("llmbox.core").listdir(base) or {}) do
                    if name:match("^run%-" .. pid .. "%-") then n = n + 1 end
                end
            end
            return n
        end
        for _ = 1, 50 do -- until the neighbour's sandbox runs
            if not helpers.is_root() or sandboxes_of(neighbour) > 0 then break end
            os.execute("sleep 0.05")
        end
        assert.is_true(running(neighbour), "the neighbour ended before the soak began: no test")
        local rep = soak.run(2, 20, nil, { during = function()
            for _ = 1, 100 do -- the neighbour finishes while the soak runs
                if not running(neighbour) then break end
                os.execute("sleep 0.05")
            end
        end })
        assert.same({}, rep.problems, soak.describe(rep))
        assert.is_false(running(neighbour))
    end)

    it("soak: a process or cgroup the soak leaves behind is reported (control)", function()
        local rep = soak.run(1, 2, nil, { leak = true })
        local leaked = {}
        for _, p in ipairs(rep.left.processes) do leaked[#leaked + 1] = p:match("^%d+") end
        finally(function() if #leaked > 0 then os.execute("kill " .. table.concat(leaked, " ")) end end)
        assert.equal(1, #rep.left.processes, soak.describe(rep))
        assert.matches("sleep", rep.left.processes[1])
        assert.matches("left behind %(processes%)", table.concat(rep.problems, "\n"))
        if not (helpers.is_root() and require("llmbox.core").probe().cgroup_pids) then
            pending("the leaked cgroup half of this control needs root and a pids cgroup")
        end
        assert.equal(1, #rep.left.cgroups, soak.describe(rep))
        assert.matches("%-leak$", rep.left.cgroups[1])
        os.execute("kill " .. table.concat(leaked, " "))
        leaked = {}
        for _ = 1, 50 do -- empty once the sleep is gone
            if os.execute("rmdir " .. q(rep.left.cgroups[1]) .. " 2>/dev/null") == 0 then break end
            os.execute("sleep 0.1")
        end
    end)

    it("a caller killed with SIGKILL mid-run leaves no process and no cgroup behind", function()
        local n = math.random(100, 999)
        local marker = "sleep 987." .. n
        -- matches the whole command line of the sleeps only: not the caller's, the shell's in
        -- the sandbox, or the searching commands' (pgrep -x -f)
        local pattern = "sleep 987[.]" .. n
        local out = helpers.tmpname()
        os.execute(("%s exec -- sh -c %s > %s 2>&1 & echo $! > %s.pid"):format(q(helpers.bin),
            q(marker .. " & " .. marker), out, out))
        local pid = helpers.read(out .. ".pid"):match("%d+")
        -- wait until the sandboxed sleeps run
        local seen = false
        for _ = 1, 50 do
            if sh("pgrep -x -f " .. q(pattern) .. " | wc -l"):match("%d+") == "2" then seen = true break end
            os.execute("sleep 0.1")
        end
        assert.is_true(seen, "the sandboxed processes never started")
        os.execute("kill -9 " .. pid)
        local gone = false
        for _ = 1, 50 do
            if sh("pgrep -x -f " .. q(pattern) .. " | wc -l"):match("%d+") == "0" then gone = true break end
            os.execute("sleep 0.1")
        end
        assert.is_true(gone, "sandboxed processes outlived their caller")
        -- its per-run cgroups are swept by the next runs (once the kernel has let go of the
        -- killed tree, which can take a moment after its processes vanish)
        local left
        for _ = 1, 20 do
            local s = assert(llmbox.session({ lang = "shell" }))
            assert(s:run("true"))
            s:close()
            left = 0
            for _, base in ipairs(helpers.cgroup_bases()) do
                for _, name in ipairs(require("llmbox.core").listdir(base) or {}) do
                    if name:match("^run%-" .. pid .. "%-") then left = left + 1 end
                end
            end
            if left == 0 then break end
            os.execute("sleep 0.1")
        end
        assert.equal(0, left)
        os.remove(out); os.remove(out .. ".pid")
    end)

    it("sweeps a dead caller's cgroups, but not an empty one from another pid namespace", function()
        local base = "/sys/fs/cgroup/pids/llmbox"
        if not (helpers.is_root() and require("llmbox.core").probe().cgroup_pids) then
            pending("needs a pids cgroup llmbox may write to")
            return
        end
        -- pid 4194303 runs nowhere here: in our pid namespace that means its creator is dead;
        -- in another one (llmbox in a container, or as pid 1 of its own) it says nothing about
        -- the creator, and an empty cgroup there may be one that a run is about to join
        local ns = sh("readlink /proc/self/ns/pid"):match("%[(%d+)%]")
        local dead_here = base .. "/run-4194303-1-1-" .. ns
        local elsewhere = base .. "/run-4194303-1-2-" .. (tonumber(ns) + 1)
        finally(function() os.execute("rmdir " .. q(dead_here) .. " " .. q(elsewhere) .. " 2>/dev/null") end)
        assert.is_true(os.execute("mkdir " .. q(dead_here) .. " " .. q(elsewhere)) == 0)
        local s = assert(llmbox.session({ lang = "shell" }))
        -- a process sweeps each cgroup directory at most once a second (the runs of the specs
        -- before this one may just have)
        os.execute("sleep 1.1")
        assert(s:exec("true"))
        s:close()
        assert.is_nil(helpers.read(dead_here .. "/pids.max"), "a dead caller's cgroup was kept")
        assert.is_truthy(helpers.read(elsewhere .. "/pids.max"), "another namespace's fresh cgroup was swept")
    end)

    it("out of disk on the host side: a clear error, the old file intact, no temporary left", function()
        local dir = helpers.tmppath()
        assert.is_true(os.execute("mkdir -p " .. q(dir) .. " && mount -t tmpfs -o size=256k tmpfs " .. q(dir)) == 0)
        helpers.write(dir .. "/keep", "old")
        local s = assert(llmbox.session({ lang = "shell" }))
        assert(s:exec("head -c 1000000 /dev/zero > /sandbox/big"))
        local ok, err = s:copy_from("/sandbox/big", dir .. "/keep")
        s:close()
        assert.is_nil(ok)
        assert.matches("No space left on device", err)
        assert.equal("old", helpers.read(dir .. "/keep"))
        assert.equal("keep\n", sh("ls -A " .. q(dir)))
        os.execute("umount " .. q(dir) .. " && rmdir " .. q(dir))
    end)

    it("a missing runtime path is an error naming the path, not a weaker jail", function()
        local p = helpers.write(helpers.tmppath(".lua"), [[
return { extends = "default", filesystem = { ro = { "/usr", "/opt/no-such-runtime" } } }]])
        local s, err = llmbox.session({ lang = "python", policy = p })
        assert.is_nil(s)
        assert.matches("/opt/no-such-runtime is not available on this host", err, 1, true)
        assert.matches("optional", err)
        os.remove(p)
    end)

    it("a cgroup the operator asked for and cannot have is an error, not a fallback", function()
        local st, _, err = helpers.cli({ "run", "-c", "print(1)" }, { env = "LLMBOX_CGROUP=/nonexistent/llmbox" })
        assert.equal(125, st)
        assert.matches("LLMBOX_CGROUP=/nonexistent/llmbox cannot be used", err, 1, true)
        -- a policy that requires cgroups, on a host where this user has none: refused
        local p = helpers.write(helpers.tmppath(".lua"), 'return { extends = "default", limits = { cgroup = "require" } }')
        local version = require("llmbox.core").cgroup()
        local s, serr = llmbox.session({ lang = "python", policy = p })
        if version == 0 then
            assert.is_nil(s)
            assert.matches("requires cgroup%-enforced limits", serr)
        else
            assert.is_truthy(s, serr) -- control: where cgroups exist, the policy runs
            assert.equal("1\n", assert(s:run("print(1)")).stdout)
            s:close()
        end
        os.remove(p)
    end)
end)

describe("reliability, unprivileged #unpriv", function()
    it("a policy that requires cgroups is refused where this user has none", function()
        local p = helpers.write(helpers.tmppath(".lua"), 'return { extends = "default", limits = { cgroup = "require" } }')
        local version, _, _, note = require("llmbox.core").cgroup()
        local s, err = llmbox.session({ lang = "python", policy = p })
        os.remove(p)
        if version == 0 then
            assert.is_nil(s)
            assert.matches("requires cgroup%-enforced limits", err)
            assert.matches(note, err, 1, true)
        else
            assert.is_truthy(s)
            s:close()
        end
    end)
end)

-- `llmbox doctor` through the real binary: it opens a real jail, runs programs in it that hit
-- each limit, and says where every line comes from.
local helpers = require "spec.helpers"
local cjson = require "cjson"
local core = require "llmbox.core"

local q = helpers.shell_quote
local LIMITS = { "timeout", "cpu", "memory", "processes", "cpus", "open_files", "file_size", "output", "workspace" }

-- `llmbox doctor --json` run by `sh -c PREFIX`; status and the decoded report
local function doctor_json(prefix)
    local out = helpers.tmpname()
    local cmd = (prefix or "") .. q(helpers.bin) .. " doctor --json >" .. q(out) .. " 2>&1 </dev/null"
    local ok, _, code = os.execute(cmd)
    local status = type(ok) == "number" and math.floor(ok / 256) or code
    local text = helpers.read(out)
    os.remove(out)
    local j = cjson.decode(text)
    return status, j, text
end

-- the host check of that name in a `llmbox doctor --json` that succeeded
local function doctor_check(name)
    local st, j, text = doctor_json()
    assert.equal(0, st, text)
    for _, c in ipairs(j.checks) do
        if c.name == name then return c end
    end
    error("no check named " .. name .. " in " .. text)
end

describe("llmbox doctor #unpriv", function()
    it("names the run helper every native jail and run starts from", function()
        local found = doctor_check("run helper")
        assert.same({ true, "fact" }, { found.ok, found.source })
        local path = found.detail:match("^(/%S+/llmbox%-run):")
        assert.is_truthy(path, found.detail)
        assert.is_nil(path:find("/../", 1, true), "a resolved path: " .. path)
        local ok = os.execute("test -x " .. q(path))
        assert.is_true(ok == 0 or ok == true, path .. " is not executable")
        -- make builds it with musl wherever musl-gcc is (make deps installs musl-tools)
        local musl = os.execute("command -v musl-gcc >/dev/null 2>&1")
        musl = musl == 0 or musl == true
        assert.matches(musl and "%(static, musl%)$" or "%(static, glibc: .*musl%-tools.*%)$", found.detail)
    end)

    it("says whether moving runs into their cgroups waits for the kernel, and how to fix it", function()
        local moves = require("llmbox.doctor").cgroup_moves
        local ok, detail, at = moves("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
            .. "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
            .. "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
        assert.is_false(ok)
        assert.matches("RCU grace period", detail)
        assert.equal("/sys/fs/cgroup/unified", at)
        ok, detail = moves("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nsdelegate,favordynmods 0 0\n")
        assert.is_true(ok)
        assert.matches("favordynmods", detail)
        assert.equal("/sys/fs/cgroup/memory",
            select(3, moves("cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n")))
        assert.is_true((moves("proc /proc proc rw 0 0\n")))
        -- v1 cgroups for the runs: their first child moves its one thread, without that lock
        ok, detail, at = moves("cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n", 1)
        assert.is_true(ok)
        assert.matches("one thread", detail)
        assert.is_nil(at)
        assert.is_false((moves("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n", 2)))
        -- the report says what this host's mounts say, as advice (a note, not a FAIL: doctor's
        -- verdict does not depend on it)
        local here, _, remount_at = moves(helpers.read("/proc/mounts"), require("llmbox.core").cgroup())
        local found = doctor_check("cgroup moves")
        assert.equal(here, found.ok)
        assert.equal("fact", found.source) -- read from the mounts, not measured
        assert.is_true(found.advice)
        if not here then
            assert.equal("as root: mount -o remount,favordynmods " .. remount_at, found.fix:match("^[^(]*"):gsub("%s+$", ""))
        end
        local out = helpers.tmpname()
        os.execute(q(helpers.bin) .. " doctor >" .. q(out) .. " 2>&1 </dev/null")
        assert.matches("%[" .. (here and " ok " or "note") .. "%] cgroup moves ", helpers.read(out))
        os.remove(out)
    end)

    it("opens a real jail, runs /bin/true in it and reports what happened, with timings", function()
        local st, j, text = doctor_json()
        assert.equal(0, st, text)
        assert.is_true(j.ok)
        local jail = j.jail
        assert.is_true(jail.ok, text)
        assert.equal("jail", jail.source)
        assert.equal(0, jail.exit_code)
        for _, k in ipairs({ "open_ms", "run_ms", "close_ms" }) do
            assert.is_number(jail[k], k)
            assert.is_true(jail[k] >= 0, k)
        end
        -- what the program saw from inside: not root, no capabilities, no_new_privs, a filter
        assert.is_true(jail.uid > 0)
        assert.equal("0000000000000000", jail.capabilities)
        assert.is_true(jail.no_new_privs)
        assert.is_true(jail.seccomp)
    end)

    it("tries every limit in that jail and says whether it fired, was denied or was set", function()
        local _, j, text = doctor_json()
        local probe = core.probe()
        for _, name in ipairs(LIMITS) do
            local l = j.limits[name]
            assert.is_table(l, name)
            assert.is_true(l.ok, name .. ": " .. tostring(l.detail))
            assert.equal("jail", l.source, name)
            assert.is_number(l.ms, name)
            assert.is_string(l.detail, name)
        end
        -- the supervisor's and the rlimits' limits fire on every host
        for _, name in ipairs({ "timeout", "file_size", "output" }) do
            assert.equal("fired", j.limits[name].result, name)
        end
        for _, name in ipairs({ "cpu", "open_files", "workspace" }) do
            assert.equal("set", j.limits[name].result, name)
        end
        -- the cgroup limits fire where the host has those controllers (this host has them: the
        -- core is not skipped here); without them the program's fork or allocation is denied
        assert.equal(probe.cgroup_memory and "fired" or "denied", j.limits.memory.result, text)
        assert.equal(probe.cgroup_pids and "fired" or "denied", j.limits.processes.result, text)
        assert.equal(probe.cgroup_cpu and "set" or "unavailable", j.limits.cpus.result, text)
        -- lines that are facts, not probes, say so
        local sources = {}
        for _, c in ipairs(j.checks) do sources[c.name] = c.source end
        assert.equal("fact", sources.kernel)
        assert.equal("probe", sources["user namespaces"])
        assert.equal("probe", sources.seccomp)
        for _, b in ipairs(j.backends) do
            if b.name == "bubblewrap" then
                -- bwrap is installed by make test: a test jail it built ran
                assert.equal("jail", b.source)
                assert.is_true(b.ok, b.detail)
                assert.matches("^usable: a test jail built by bwrap ran", b.detail)
            elseif b.name == "nsjail" then
                -- built; usable only where an nsjail is installed (Debian has none)
                assert.equal("probe", b.source)
                assert.matches(b.ok and "^usable" or "^not usable here: nsjail is not installed", b.detail)
            elseif b.name ~= "native" then
                -- docker and podman: their engine was asked, and the line says which answered
                -- where, or why none did; the others are facts about this build
                local want = (b.name == "docker" or b.name == "podman" or b.name == "kubernetes") and "probe" or "fact"
                assert.equal(want, b.source, b.name)
                if want == "fact" then
                    -- Windows' own (or, were there one, a planned backend)
                    local windows = b.name == "windows-mxc" or b.name == "wsl2"
                    assert.matches(windows and "runs only on Windows" or "not built yet", b.detail, 1, true)
                elseif b.name == "kubernetes" then
                    -- its API server was asked, where a kubeconfig names one
                    assert.matches(b.ok and "^usable" or "^not usable here: ", b.detail)
                elseif b.ok then
                    assert.matches("^usable: %a+ [%d.]+.* %(API 1%.%d+%) answers at ", b.detail)
                else
                    assert.matches("^not usable here: ", b.detail)
                end
            end
        end
    end)

    it("marks where each line comes from in its text output", function()
        local st, out = helpers.cli({ "doctor" })
        assert.equal(0, st, out)
        assert.matches("Sandbox test", out, 1, true)
        assert.matches("%[ ok %] jail%s+ran /bin/true", out)
        assert.matches("timeout%s+fired", out)
        assert.matches("(probe)", out, 1, true)
        assert.matches("(fact)", out, 1, true)
    end)

    it("reports a jail that cannot be created and exits non-zero (no user namespaces)", function()
        -- under a seccomp filter that refuses CLONE_NEWUSER, as a container's default profile does
        local wrap = "luajit " .. q(helpers.root .. "/spec/support/no_userns.lua") .. " "
        local st, j, text = doctor_json(wrap)
        assert.equal(1, st, text)
        assert.is_false(j.ok)
        assert.is_false(j.jail.ok)
        assert.matches("creating namespaces", j.jail.error, 1, true)
        assert.matches("Operation not permitted", j.jail.error, 1, true)
        for _, c in ipairs(j.checks) do
            if c.name == "user namespaces" then
                assert.is_false(c.ok)
                assert.matches("sysctl", c.fix, 1, true)
            end
        end
        for _, name in ipairs(LIMITS) do
            assert.is_false(j.limits[name].ok, name)
            assert.equal("not tried", j.limits[name].result, name)
        end
        -- control: the same kind of filter without the CLONE_NEWUSER rules leaves the doctor happy
        st, j, text = doctor_json(wrap .. "--control ")
        assert.equal(0, st, text)
        assert.is_true(j.jail.ok)
    end)
end)

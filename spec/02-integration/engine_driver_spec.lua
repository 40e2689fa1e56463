-- The docker and podman drivers (llmbox.backends.engines) on the real engines with a
-- busybox image (spec/support/busybox_image.lua): sessions are containers, runs are execs with
-- files, stdin, environment, limits and a whole-container sweep; what they cannot do yet is
-- refused with a message that says so.
local engines = require "llmbox.backends.engines"
local engine = require "llmbox.engine"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local busybox = require "spec.support.busybox_image"
local helpers = require "spec.helpers"

local ENV = { "PATH=/bin" }

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("the %s driver"):format(kind), function()
        local driver = engines.driver(kind)
        local e, why = engine.connect(kind)
        local h

        local function spec()
            return plan.sandbox(assert(policy.load("default")), nil, { image = busybox.IMAGE })
        end

        setup(function()
            if not e then return end
            assert(busybox.ensure(e))
            h = assert(driver.open(spec()))
        end)
        teardown(function()
            if h then h:close() end
        end)

        local function needs_engine()
            local why_not = busybox.unavailable(kind, e, why)
            if why_not then pending(why_not) end
            return not why_not
        end

        local function run(argv, extra)
            local s = { argv = argv, env = ENV, cwd = "/sandbox", limits = { timeout = 20, output = 1048576 } }
            for k, v in pairs(extra or {}) do s[k] = v end
            return h:run(s)
        end

        it("declares its capabilities and layout, and is usable when the engine answers", function()
            if not needs_engine() then return end
            assert(require("llmbox.backends").check_driver(driver))
            assert.is_true(driver.usable())
            assert.is_true(driver.capabilities.images)
        end)

        it("runs a program with its files, stdin, environment and working directory", function()
            if not needs_engine() then return end
            local chunks = {}
            local r = assert(run({ "/bin/sh", "/tmp/llmbox/main.sh", "arg1" }, {
                files = { { path = "/tmp/llmbox/main.sh", data = 'echo "$1 $X $(pwd)"; cat; echo oops >&2; exit 4' } },
                stdin = "from stdin\n", env = { "PATH=/bin", "X=set" }, cwd = "/tmp",
                on_stdout = function(c) chunks[#chunks + 1] = c end,
            }))
            assert.equal(4, r.exit_code)
            assert.equal("arg1 set /tmp\nfrom stdin\n", r.stdout)
            assert.equal("oops\n", r.stderr)
            assert.equal(r.stdout, table.concat(chunks))
            assert.is_false(r.timed_out)
            assert.is_number(r.duration_ms)
        end)

        it("keeps the workspace across runs, and the sandbox user owns what it writes", function()
            if not needs_engine() then return end
            assert.equal(0, assert(run({ "/bin/sh", "-c", "echo kept > /sandbox/note" })).exit_code)
            local r = assert(run({ "/bin/sh", "-c", "cat /sandbox/note; id -u" }))
            assert.equal("kept\n1000\n", r.stdout)
        end)

        it("stops a run at its timeout and kills everything it started, daemons too", function()
            if not needs_engine() then return end
            local r = assert(run({ "/bin/sh", "-c", "(sleep 1000 &) ; sleep 1000" }, { limits = { timeout = 1 } }))
            assert.is_true(r.timed_out)
            assert.equal("timeout", r.limit)
            assert.equal(137, r.exit_code)
            local ps = assert(run({ "/bin/sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '" }))
            assert.is_nil(ps.stdout:find("sleep 1000", 1, true), ps.stdout)
        end)

        it("kills what a run left behind when it ends on its own", function()
            if not needs_engine() then return end
            assert(run({ "/bin/sh", "-c", "(sleep 1000 &); echo started" }))
            local ps = assert(run({ "/bin/sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '" }))
            assert.is_nil(ps.stdout:find("sleep 1000", 1, true), ps.stdout)
        end)

        it("cannot end its container or its own run: a program that signals every process it can", function()
            if not needs_engine() then return end
            -- the run's wrapper and llmbox's helper are root's: kill(-1) reaches the program alone
            local r = assert(run({ "/bin/sh", "-c", "kill -9 -1; kill -9 1 2>&1; echo survived" }))
            assert.equal(0, r.exit_code, r.stderr)
            assert.matches("survived\n$", r.stdout)
            local after = assert(run({ "/bin/sh", "-c", "echo still here" }))
            assert.equal("still here\n", after.stdout)
        end)

        it("runs programs through llmbox's helper on any image: the sandbox user, no capability, max_rss", function()
            if not needs_engine() then return end
            assert.equal("helper", h.drop) -- busybox's image has no setpriv: the helper is placed
            local r = assert(run({ "/bin/sh", "-c", "id -u; id -g; id -G; grep -E 'Cap(Inh|Prm|Eff)' /proc/self/status; "
                .. "grep NoNewPrivs /proc/self/status" }))
            assert.equal("1000\n1000\n1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
                .. "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n", r.stdout)
            -- its peak memory: a shell that holds ~8 MiB in a variable
            r = assert(run({ "/bin/sh", "-c", "x=$(head -c 8000000 /dev/zero | tr '\\0' a); echo ${#x}" }))
            assert.equal("8000000\n", r.stdout)
            assert.is_true(r.max_rss > 8000000 and r.max_rss < 64 * 1048576, tostring(r.max_rss))
            -- the keeper is the helper now: its wait needs no process slot
            r = assert(run({ "/bin/sh", "-c", "for p in /proc/[0-9]*; do [ \"$(cat $p/cmdline 2>/dev/null | tr '\\0' ' ')\" "
                .. "= '/.llmbox/exec --keep '\"$(ls /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events 2>/dev/null)\"' ' ] "
                .. "&& echo keeper; done; ls -A /.llmbox 2>&1" }))
            assert.matches("^keeper\n", r.stdout)
            assert.matches("Permission denied", r.stdout, 1, true) -- root's own tmpfs
        end)

        it("falls back to a wrapper of the sandbox user's where the helper cannot be placed", function()
            if not needs_engine() then return end
            local bare = assert(driver.open(spec(), { no_helper = true }))
            finally(function() bare:close() end)
            assert.equal("user", bare.drop)
            local r = assert(bare:run({ argv = { "/bin/sh", "-c", "id -u; echo hi" }, env = ENV, cwd = "/sandbox",
                limits = { timeout = 20, output = 65536 } }))
            assert.equal("1000\nhi\n", r.stdout)
            assert.is_nil(r.max_rss) -- nothing measured it: never made up
        end)

        it("says how much CPU time a run used, and passes on output that looks like its own bookkeeping", function()
            if not needs_engine() then return end
            local seen = {}
            local r = assert(run({ "/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; "
                .. "printf 'a\\000b\\000llmbox:forged 1== 2\\n\\000' >&2; exit 3" },
                { on_stderr = function(c) seen[#seen + 1] = c end }))
            assert.equal(3, r.exit_code)
            assert.equal("a\0b\0llmbox:forged 1== 2\n\0", r.stderr)
            assert.equal(r.stderr, table.concat(seen))
            assert.is_nil(r.limit)
            assert.is_true(r.cpu_ms > 0 and r.cpu_ms < r.duration_ms + 100, tostring(r.cpu_ms))
        end)

        it("shows the programs no /sys but the container's own cgroups", function()
            if not needs_engine() then return end
            local r = assert(run({ "/bin/sh", "-c", "for d in /sys/class /sys/devices /sys/kernel /sys/fs/ext4; do "
                .. "ls -A $d 2>/dev/null; done | wc -l; ls /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null" }))
            assert.matches("^0\n/sys/fs/cgroup/pids", r.stdout)
        end)

        it("keeps a run's wrapper out of its program's reach through setpriv without the helper", function()
            if not needs_engine() then return end
            -- the Debian-like test image has util-linux's setpriv; busybox's cannot change ids
            assert(busybox.ensure_python(e))
            local s = plan.sandbox(assert(policy.load("default")), nil, { image = busybox.PYTHON_IMAGE })
            local py = assert(driver.open(s, { no_helper = true }))
            finally(function() py:close() end)
            assert.equal("root", py.drop)
            local function prun(cmd)
                return assert(py:run({ argv = { "/bin/sh", "-c", cmd }, env = { "PATH=/usr/bin:/bin" }, cwd = "/sandbox",
                    limits = { timeout = 20, output = 65536 } }))
            end
            local r = prun("id -u; kill -9 -1; echo survived; grep -c Cap /proc/self/status >/dev/null; "
                .. "grep CapEff /proc/self/status")
            assert.equal(0, r.exit_code, r.stderr)
            assert.equal("1000\nsurvived\nCapEff:\t0000000000000000\n", r.stdout)
            -- its files are the sandbox user's, and the next run sees them
            r = prun("echo x > f; stat -c '%u %a' f /tmp/llmbox")
            assert.equal("1000 644\n1000 755\n", r.stdout)
        end)

        it("caps the output, says so, and stops the program", function()
            if not needs_engine() then return end
            local r = assert(run({ "/bin/sh", "-c", "while :; do echo yyyyyyyyyyyyyyyyyyyy; done" },
                { limits = { timeout = 20, output = 10000 } }))
            assert.equal("output", r.limit)
            assert.is_true(r.truncated)
            assert.equal(10000, #r.stdout)
            assert.is_false(r.timed_out)
        end)

        it("reports the container's memory ceiling when it kills a run", function()
            if not needs_engine() then return end
            local s = spec()
            s.limits.memory = 64 * 1024 * 1024
            local small = assert(driver.open(s))
            local r = assert(small:run({ argv = { "/bin/sh", "-c", 'x=$(head -c 300000000 /dev/zero | tr "\\0" a); echo ${#x}' },
                env = ENV, cwd = "/sandbox", limits = { timeout = 30, output = 65536 } }))
            -- the control: a program that kills itself is not a memory limit
            local self_kill = assert(small:run({ argv = { "/bin/sh", "-c", "kill -9 $$" }, env = ENV, cwd = "/sandbox",
                limits = { timeout = 30, output = 65536 } }))
            small:close()
            assert.equal(137, r.exit_code)
            assert.equal("memory", r.limit)
            assert.equal(9, r.signal)
            assert.equal(137, self_kill.exit_code)
            assert.is_nil(self_kill.limit)
        end)

        it("applies the rlimits of one run: open files and file size", function()
            if not needs_engine() then return end
            local r = assert(run({ "/bin/sh", "-c", "ulimit -n; ulimit -f" },
                { limits = { timeout = 20, output = 4096, open_files = 40, file_size = 1048576 } }))
            assert.equal("40\n2048\n", r.stdout)
        end)

        it("lowers the container's ceilings for one run, names the limit that fired, and restores them", function()
            if not needs_engine() then return end
            local function ceilings()
                local r = assert(run({ "/bin/sh", "-c", "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max "
                    .. "/sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null; exit 0" }))
                return r.stdout
            end
            local before = ceilings()
            -- a fork bomb that outlives its refused forks: the verdict is still the process limit
            local r = assert(run({ "/bin/sh", "-c", "b() { b | b & }; b; sleep 2; echo done" },
                { limits = { timeout = 20, output = 65536, processes = 8 } }))
            assert.equal("processes", r.limit, r.stderr)
            -- a memory ceiling for one run below the container's
            r = assert(run({ "/bin/sh", "-c", 'x=$(head -c 300000000 /dev/zero | tr "\\0" a); echo ${#x}' },
                { limits = { timeout = 30, output = 65536, memory = 32 * 1024 * 1024 } }))
            assert.equal("memory", r.limit)
            -- CPU seconds: SIGXCPU at the soft limit, and no job message from the wrapper
            r = assert(run({ "/bin/sh", "-c", "while :; do :; done" }, { limits = { timeout = 20, output = 4096, cpu = 1 } }))
            assert.equal("cpu", r.limit)
            assert.equal(152, r.exit_code)
            assert.equal("", r.stderr)
            -- file size, as a shell reports it
            r = assert(run({ "/bin/sh", "-c", "head -c 2000000 /dev/zero > /sandbox/big; exit $?" },
                { limits = { timeout = 20, output = 4096, file_size = 1048576 } }))
            assert.equal("file_size", r.limit)
            -- the next run has the container's own ceilings again, and ends with no verdict
            assert.equal(before, ceilings())
            r = assert(run({ "/bin/sh", "-c", "rm -f /sandbox/big; exit 3" }))
            assert.equal(3, r.exit_code)
            assert.is_nil(r.limit)
        end)

        it("collects a run's results in memory, and says when there are none", function()
            if not needs_engine() then return end
            assert(run({ "/bin/sh", "-c", "mkdir -p /sandbox/out/sub; echo a > /sandbox/out/a.txt; echo b > /sandbox/out/sub/b" }))
            local files = assert(h:collect("/sandbox/out", 1048576))
            table.sort(files, function(a, b) return a.name < b.name end)
            assert.same({ { name = "a.txt", size = 2, data = "a\n" }, { name = "sub/b", size = 2, data = "b\n" } }, files)
            local none, err, code = h:collect("/sandbox/nothing-here", 100)
            assert.is_nil(none)
            assert.equal("ENOENT", code, err)
        end)

        it("empties the workspace and /tmp on reset", function()
            if not needs_engine() then return end
            assert(run({ "/bin/sh", "-c", "echo x > /sandbox/f; echo y > /tmp/.hidden" }))
            assert(h:reset())
            local r = assert(run({ "/bin/sh", "-c", "ls -A /sandbox /tmp" }))
            assert.equal("/sandbox:\n\n/tmp:\nllmbox\n", r.stdout)
        end)

        it("copies files and directories in and out, skipping links, with copy_out's limit", function()
            if not needs_engine() then return end
            local dir = helpers.tmpdir()
            assert(os.execute(("mkdir -p %s/tree/sub && echo one > %s/tree/a && echo two > %s/tree/sub/b "
                .. "&& ln -s /etc/passwd %s/tree/link && echo single > %s/file"):format(dir, dir, dir, dir, dir)))
            local ok, skipped = h:copy_in(dir .. "/tree", "/sandbox/tree")
            assert.is_true(ok, skipped)
            assert.same({ "llmbox/link" }, skipped) -- named as native names them
            assert(h:copy_in(dir .. "/file", "/sandbox/file", tonumber("600", 8)))
            local r = assert(run({ "/bin/sh", "-c", "cat /sandbox/tree/a /sandbox/tree/sub/b /sandbox/file; "
                .. "stat -c %a /sandbox/file; ls /sandbox/tree" }))
            assert.equal("one\ntwo\nsingle\n600\na\nsub\n", r.stdout)
            -- and back out: a file whole, a directory beneath the destination
            assert(h:copy_out("/sandbox/file", dir .. "/back.txt"))
            assert.equal("single\n", helpers.read(dir .. "/back.txt"))
            assert(os.execute("mkdir " .. dir .. "/out"))
            assert(h:copy_out("/sandbox/tree", dir .. "/out"))
            assert.equal("two\n", helpers.read(dir .. "/out/sub/b")) -- its contents, as native copies them
            local none, err, code = h:copy_out("/sandbox/missing", dir .. "/x")
            assert.is_nil(none)
            assert.equal("ENOENT", code, err)
            assert(run({ "/bin/sh", "-c", "dd if=/dev/zero of=/sandbox/big bs=1024 count=3072 2>/dev/null" }))
            none, err, code = h:copy_out("/sandbox/big", dir .. "/big", 1048576)
            assert.is_nil(none)
            assert.equal("EFBIG", code, err)
            assert.is_nil(helpers.read(dir .. "/big"))
        end)

        it("honours the engine options that tighten the sandbox, and refuses one that loosens it", function()
            if not needs_engine() then return end
            local llmbox = require "llmbox"
            local s = assert(llmbox.session({ backend = kind, lang = "shell", image = busybox.IMAGE,
                runtime = { mem_limit = "64m", tmpfs = { ["/scratch"] = "size=2m" }, ulimits = { nofile = 64 } } }))
            finally(function() s:close() end)
            local r = assert(s:run("cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
                .. "cat /sys/fs/cgroup/memory.max; echo x > /scratch/f && cat /scratch/f; ulimit -n; "
                .. "head -c 3000000 /dev/zero > /scratch/big || echo full"))
            assert.equal("67108864\nx\n64\nfull\n", r.stdout)
            -- emptied for the next user, as the workspace is
            assert(s.handle:reset())
            r = assert(s:run("ls -A /scratch | wc -l"))
            assert.equal("0\n", r.stdout)
            local s2, err = llmbox.session({ backend = kind, lang = "shell", image = busybox.IMAGE,
                runtime = { cap_add = { "SYS_ADMIN" } } })
            assert.is_nil(s2)
            assert.matches("runtime.cap_add = SYS_ADMIN is refused", err, 1, true)
        end)

        it("copies a large file in and out whole (sent in place, not copied per write)", function()
            if not needs_engine() then return end
            local dir = helpers.tmpdir()
            finally(function() os.execute("rm -rf " .. helpers.shell_quote(dir)) end)
            -- 48 MiB that differ all along: a misplaced piece would show
            local f = assert(io.open(dir .. "/big", "wb"))
            local pad = string.rep("x", 65536 - 9) .. "\n"
            for i = 1, 48 * 16 do f:write(string.format("%08d", i), pad) end
            f:close()
            assert(h:copy_in(dir .. "/big", "/sandbox/big"))
            local r = assert(run({ "/bin/sh", "-c", "wc -c < /sandbox/big; tail -c 65536 /sandbox/big | head -c 8" }))
            assert.equal(tostring(48 * 1048576) .. "\n00000768", r.stdout)
            assert(h:copy_out("/sandbox/big", dir .. "/back"))
            local same = os.execute("cmp -s " .. dir .. "/big " .. dir .. "/back")
            assert.is_true(same == 0 or same == true, "the copy back differs")
            assert(run({ "rm", "-f", "/sandbox/big" }))
        end)

        it("mounts, read-only, a host path the policy shows its sandboxes, and no other", function()
            if not needs_engine() then return end
            local llmbox = require "llmbox"
            local dir = helpers.tmpdir()
            helpers.write(dir .. "/data.csv", "a,b\n1,2\n")
            os.execute("chmod 755 " .. helpers.shell_quote(dir) .. " && chmod 644 " .. helpers.shell_quote(dir .. "/data.csv"))
            local p = assert(policy.from_table({ extends = "default", filesystem = { ro = { "/usr", dir } } }, "data"))
            local s = assert(llmbox.session({ backend = kind, lang = "shell", image = busybox.IMAGE, policy = p,
                runtime = { volumes = { dir .. ":/data:ro" } } }))
            finally(function()
                s:close()
                os.execute("rm -rf " .. helpers.shell_quote(dir))
            end)
            local r = assert(s:run("cat /data/data.csv; touch /data/x 2>/dev/null || echo read-only"))
            assert.equal("a,b\n1,2\nread-only\n", r.stdout)
            -- not under the policy's read-only paths: refused, naming the path
            local s2, err = llmbox.session({ backend = kind, lang = "shell", image = busybox.IMAGE,
                runtime = { volumes = { dir .. ":/data" } } })
            assert.is_nil(s2)
            assert.matches("only what the policy's filesystem.ro shows", err, 1, true)
        end)

        it("refuses an install that needs the network, saying what works instead", function()
            if not needs_engine() then return end
            assert(busybox.ensure_python(e))
            local s = assert(require("llmbox").session({ backend = kind, lang = "python", image = busybox.PYTHON_IMAGE,
                policy = "permissive" }))
            finally(function() s:close() end)
            local r, err = s:install({ "anything" })
            assert.is_nil(r)
            assert.matches(("the %s backend gives no run a network, and this policy's installs need one"):format(kind),
                err, 1, true)
            assert.matches("install from offline sources here", err, 1, true)
        end)

        it("opens and empties containers in steps: two openings progress in one loop, none blocks it", function()
            if not needs_engine() then return end
            local a, b = driver.open_start(spec()), driver.open_start(spec())
            local steps, waits, both_open = 0, 0, false
            local done = {}
            repeat
                for name, t in pairs({ a = a, b = b }) do
                    if not done[name] then
                        local fds, events, timeout = t:fds()
                        assert.is_table(fds)
                        assert.equal(#fds, #events)
                        assert.is_true(timeout == nil or timeout >= 0)
                        if #fds > 0 then waits = waits + 1 end
                        done[name] = t:step(0)
                        steps = steps + 1
                    end
                end
                if not done.a and not done.b and steps > 2 then both_open = true end
                require("llmbox.util").sleep_ms(1)
            until done.a and done.b
            -- each opening took many steps (every engine call yielded), and while one waited
            -- for its engine the other went on
            assert.is_true(steps > 10, "steps: " .. steps)
            assert.is_true(waits > 0)
            assert.is_true(both_open)
            local ha, hb = assert(a:result()), assert(b:result())
            finally(function()
                ha:close()
                hb:close()
            end)
            assert.equal("a\n", assert(ha:run({ argv = { "/bin/sh", "-c", "echo a > f; cat f" }, env = ENV,
                cwd = "/sandbox", limits = { timeout = 20, output = 65536 } })).stdout)
            local r = ha:reset_start()
            local n = 0
            repeat n = n + 1 until r:step(-1)
            assert.is_true(assert(r:result()))
            assert.is_true(n > 1)
            assert.equal("0\n", assert(ha:run({ argv = { "/bin/sh", "-c", "ls -A | wc -l" }, env = ENV,
                cwd = "/sandbox", limits = { timeout = 20, output = 65536 } })).stdout)
            -- a failed opening is a result too, not an error raised at the loop
            local bad = spec()
            bad.image = "localhost/llmbox-no-such-image:0"
            bad.pull = { policy = "never" }
            local none, err = driver.open_start(bad):result()
            assert.is_nil(none)
            assert.matches('pull = "never"', err, 1, true)
        end)

        it("says in the run's report whether the probed directory holds anything", function()
            if not needs_engine() then return end
            local dir = "/tmp/llmbox/plots"
            local r = assert(run({ "/bin/sh", "-c", "rm -rf " .. dir }, { probe = dir }))
            assert.is_false(r.probe_found) -- absent
            r = assert(run({ "/bin/sh", "-c", "mkdir -p " .. dir }, { probe = dir }))
            assert.is_false(r.probe_found) -- empty
            r = assert(run({ "/bin/sh", "-c", "echo x > " .. dir .. "/.hidden" }, { probe = dir }))
            assert.is_true(r.probe_found)
            -- unreadable to the wrapper: not known, so the caller looks itself
            r = assert(run({ "/bin/sh", "-c", "chmod 0 " .. dir }, { probe = dir }))
            assert.is_nil(r.probe_found)
            assert(run({ "/bin/sh", "-c", "chmod 755 " .. dir .. "; rm -rf " .. dir }))
            r = assert(run({ "true" }))
            assert.is_nil(r.probe_found) -- nothing asked
        end)

        it("runs in steps a caller's loop drives: output taken as it comes, the timeout held", function()
            if not needs_engine() then return end
            local r = h:start({ argv = { "/bin/sh", "-c", "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three" }, env = ENV,
                cwd = "/sandbox", limits = { timeout = 20, output = 65536 } })
            local got, steps, waited = {}, 0, 0
            repeat
                local fds, _, timeout = r:fds()
                if #fds > 0 or (timeout and timeout > 0) then waited = waited + 1 end
                local done = r:step(0)
                steps = steps + 1
                for _, x in ipairs(r:take() or {}) do got[#got + 1] = x end
                require("llmbox.util").sleep_ms(2)
            until done
            for _, x in ipairs(r:take() or {}) do got[#got + 1] = x end
            local res = assert(r:result())
            assert.equal(0, res.exit_code)
            assert.equal("one\nthree\n", res.stdout)
            assert.equal("two\n", res.stderr)
            assert.same({ "stdout", "one\n", "stderr", "two\n", "stdout", "three\n" }, got)
            assert.is_true(steps > 10 and waited > 0, steps .. " steps")
            -- the wall clock, held while nobody blocks
            r = h:start({ argv = { "/bin/sh", "-c", "sleep 30" }, env = ENV, cwd = "/sandbox",
                limits = { timeout = 0.5, output = 65536 } })
            repeat until r:step(50)
            res = assert(r:result())
            assert.equal("timeout", res.limit)
            assert.equal(137, res.exit_code)
        end)

        it("refuses a run the host's network, saying what works instead", function()
            if not needs_engine() then return end
            local ok, err = run({ "true" }, { install_network = true })
            assert.is_nil(ok)
            assert.matches("gives no run a network", err, 1, true)
        end)

        it("says what is missing when no image is named or the image is not there", function()
            if not needs_engine() then return end
            local s = spec()
            s.image = nil
            local none, err = driver.open(s)
            assert.is_nil(none)
            assert.matches("runs images: name one", err, 1, true)
            for _, bad in ipairs({ "../../containers/x", "img?x=1", "a b", "/abs", "" }) do
                s.image = bad
                none, err = driver.open(s)
                assert.is_nil(none, bad)
                assert.matches("is not an image reference", err, 1, true)
            end
            -- missing: pulled, and the pull's failure is the engine's (no registry on localhost:443)
            s.image = "localhost/llmbox-no-such-image:0"
            none, err = driver.open(s)
            assert.is_nil(none)
            assert.matches("^pulling localhost/llmbox%-no%-such%-image:0: .*localhost", err)
            s.pull = { policy = "never" }
            none, err = driver.open(s)
            assert.is_nil(none)
            assert.matches('image "localhost/llmbox-no-such-image:0" is not on the ' .. kind .. ' engine, and pull = "never"',
                err, 1, true)
        end)

        it("removes, in maintain(), what a dead llmbox process left, and nothing else", function()
            if not needs_engine() then return end
            local container = require "llmbox.backends.container"
            local boot = helpers.read("/proc/sys/kernel/random/boot_id"):gsub("%s", "")
            local function make(owner)
                local body = assert(container.create_body(spec(), { image = busybox.IMAGE,
                    seccomp_file = kind == "podman" and h.seccomp_file or nil, nproc = kind == "podman" and 1024 or nil,
                    labels = { [container.OWNER] = owner } }))
                return assert(e:json("POST", "/containers/create", body)).Id
            end
            local dead = make(boot .. "/999999999/1")          -- a pid that does not exist
            local other = make("another-machine/1/1")          -- another machine's: not ours to judge
            local unlabelled = assert(e:json("POST", "/containers/create", { Image = busybox.IMAGE,
                Cmd = { "true" } })).Id                       -- not llmbox's at all
            assert(driver.maintain())
            local function exists(id) return assert(e:request("GET", "/containers/" .. id .. "/json")).status == 200 end
            assert.is_false(exists(dead))
            assert.is_true(exists(other))
            assert.is_true(exists(unlabelled))
            assert.is_true(exists(h.id)) -- this process's, alive
            for _, id in ipairs({ other, unlabelled }) do e:request("DELETE", "/containers/" .. id .. "?force=1") end
        end)

        it("removes its container on close, and leaves nothing behind", function()
            if not needs_engine() then return end
            local h2 = assert(driver.open(spec()))
            local id = h2.id
            assert.equal(200, assert(e:request("GET", "/containers/" .. id .. "/json")).status)
            h2:close()
            assert.is_true(h2:closed())
            assert.equal(404, assert(e:request("GET", "/containers/" .. id .. "/json")).status)
        end)
    end)
end

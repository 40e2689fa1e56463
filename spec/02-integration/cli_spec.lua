-- The CLI contract, through the real binary.
local helpers = require "spec.helpers"
local _ -- the placeholder for values a spec ignores
local cjson = require "cjson"
local cli = helpers.cli

describe("llmbox CLI #unpriv", function()
    it("runs -c CODE and streams the program's output", function()
        local st, out, err = cli({ "run", "-l", "python", "-c", "import sys; print('hi'); print('err', file=sys.stderr)" })
        assert.equal(0, st)
        assert.equal("hi\n", out)
        assert.equal("err\n", err)
    end)

    it("exits with the program's status", function()
        local st = cli({ "run", "-c", "import sys; sys.exit(7)" })
        assert.equal(7, st)
    end)

    it("runs a FILE, picking the language from its extension, with ARGS after --", function()
        local f = helpers.write(helpers.tmpname(".py"), "import sys; print(sys.argv[1:])")
        local st, out = cli({ "run", f, "--", "a", "-b" })
        assert.equal(0, st)
        assert.equal("['a', '-b']\n", out)
        local sh = helpers.write(helpers.tmpname(".sh"), 'echo "shell: $1"')
        st, out = cli({ "run", sh, "x" })
        assert.equal(0, st)
        assert.equal("shell: x\n", out)
        os.remove(f); os.remove(sh)
    end)

    it("reads code from standard input with -", function()
        local st, out = cli({ "run", "-l", "sh", "-" }, { stdin = "echo from-stdin" })
        assert.equal(0, st)
        assert.equal("from-stdin\n", out)
    end)

    it("passes standard input to the program with -i", function()
        local st, out = cli({ "run", "-i", "-c", "import sys; print(sys.stdin.read()[::-1])" }, { stdin = "abc" })
        assert.equal(0, st)
        assert.equal("cba\n", out)
    end)

    it("prints one JSON object with --json", function()
        local st, out = cli({ "run", "--json", "-c", "print('x'); import sys; sys.exit(2)" })
        assert.equal(2, st)
        local j = cjson.decode(out)
        assert.equal(2, j.exit_code)
        assert.equal("x\n", j.stdout)
        assert.equal("", j.stderr)
        assert.is_false(j.timed_out)
        assert.equal(cjson.null, j.limit)
        assert.is_number(j.duration_ms)
        assert.is_false(j.truncated)
    end)

    it("says where the time went with --timings", function()
        local st, out, err = cli({ "run", "--timings", "-c", "print(1)" })
        assert.equal(0, st)
        assert.equal("1\n", out)
        assert.matches("^llmbox: timings %(ms%): load [%d.]+, recipe [%d.]+, policy [%d.]+, admit [%d.]+, "
            .. "open [%d.]+, run [%d.]+ %(program [%d.]+%), close [%d.]+, total [%d.]+\n$", err)
        st, out = cli({ "run", "--timings", "--json", "-c", "print(2)" })
        assert.equal(0, st)
        local r = cjson.decode(out)
        assert.equal("2\n", r.stdout)
        local t, sum = r.timings, 0
        for _, k in ipairs({ "load", "recipe", "policy", "admit", "open", "run", "close" }) do
            assert.is_true(type(t[k]) == "number" and t[k] >= 0, k)
            sum = sum + t[k]
        end
        -- the stages follow one another from main() on; the program is part of the run
        assert.is_true(sum <= t.total + 0.01, "stages " .. sum .. " > total " .. t.total)
        assert.is_true(t.program > 0 and t.program <= t.run, "program " .. t.program)
        assert.equal(r.duration_ms, t.program)
        assert.is_true(t.main_started_ms > 0)
        -- without the flag, no timings
        st, out = cli({ "run", "--json", "-c", "print(3)" })
        assert.equal(0, st)
        assert.is_nil(cjson.decode(out).timings)
        -- a run sent to a daemon has its stages there
        local err2
        st, _, err2 = cli({ "run", "--server", "unix:/nonexistent.sock", "--timings", "-c", "print(4)" })
        assert.equal(125, st)
        assert.matches("--timings does not go with --server", err2, 1, true)
    end)

    it("repairs invalid UTF-8 in --json output", function()
        local _, out = cli({ "run", "--json", "-c", "import sys; sys.stdout.buffer.write(b'a\\xffb')" })
        assert.equal("a\239\191\189b", cjson.decode(out).stdout)
    end)

    it("exits 124 on timeout and says so", function()
        local st, _, err = cli({ "run", "-t", "1", "-c", "while True: pass" })
        assert.equal(124, st)
        assert.matches("timeout", err)
        local _, out = cli({ "run", "--json", "-t", "1", "-c", "import time; time.sleep(10)" })
        local j = cjson.decode(out)
        assert.is_true(j.timed_out)
        assert.equal("timeout", j.limit)
    end)

    it("exits 125 when llmbox or the sandbox fails, with a message", function()
        local st, _, err = cli({ "run", "-l", "cobol", "-c", "x" })
        assert.equal(125, st)
        assert.matches('unknown language "cobol"', err, 1, true)
        st, _, err = cli({ "run", "-p", "nope", "-c", "x" })
        assert.equal(125, st)
        assert.matches("nope", err)
        st, _, err = cli({ "run", "--bogus" })
        assert.equal(125, st)
        assert.matches("unknown option %-%-bogus", err)
        st, _, err = cli({ "run", "-t", "abc", "-c", "1" })
        assert.equal(125, st)
        assert.matches("positive number", err)
        st, _, err = cli({ "run", "/no/such/file.py" })
        assert.equal(125, st)
        assert.matches("cannot read", err)
    end)

    it("names the file, the key and what was expected when a policy is broken", function()
        local bad = helpers.write(helpers.tmpname(".lua"), 'return { limits = { memroy = "1G" } }')
        local st, _, err = cli({ "run", "-p", bad, "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches(bad, err, 1, true)
        assert.matches('limits.memroy: unknown key (did you mean "memory"?)', err, 1, true)
        helpers.write(bad, 'return { syscalls = { deny = { replace = { "mount", "frobnicate" } } } }')
        st, _, err = cli({ "run", "-p", bad, "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches(bad, err, 1, true)
        assert.matches('syscalls.deny[2]: unknown syscall "frobnicate"', err, 1, true)
        os.remove(bad)
    end)

    it("exits 126 when an enforcing policy refuses the code, naming the rule", function()
        local st, out, err = cli({ "run", "-c", "import subprocess\nsubprocess.run(['ls'])" })
        assert.equal(126, st)
        assert.equal("", out)
        assert.matches("refused by policy", err)
        assert.matches("subprocess", err)
    end)

    it("execs a command", function()
        local st, out = cli({ "exec", "--", "sh", "-c", "echo $0 $1; exit 3", "a", "b" })
        assert.equal(3, st)
        assert.equal("a b\n", out)
        local _, jout = cli({ "exec", "--json", "--", "echo", "hi" })
        assert.equal("hi\n", cjson.decode(jout).stdout)
    end)

    it("checks code", function()
        local st, out = cli({ "check", "-c", "print('# import os')" })
        assert.equal(0, st)
        assert.matches("safe", out)
        st, out = cli({ "check", "--json", "-c", "import a, subprocess" })
        assert.equal(1, st)
        local j = cjson.decode(out)
        assert.is_false(j.safe)
        assert.is_true(#j.violations >= 1)
    end)

    it("honours $LLMBOX_POLICY in every command that takes -p, and -p wins over it", function()
        -- a policy whose checks only warn: with it, `import subprocess` is safe to check and runs
        local warn = helpers.write(helpers.tmpname(".lua"), 'return { extends = "default", checks = { mode = "warn" } }')
        local env = "LLMBOX_POLICY=" .. helpers.shell_quote(warn)
        local st, out = cli({ "check", "--json", "-c", "import subprocess" }, { env = env })
        assert.equal(1, st)
        assert.same({ "warn", false }, { cjson.decode(out).mode, cjson.decode(out).blocked })
        local err
        st, _, err = cli({ "run", "-q", "-c", "import subprocess" }, { env = env })
        assert.equal(0, st, err)
        st, out = cli({ "check", "--json", "-p", "default", "-c", "import subprocess" }, { env = env })
        assert.equal(1, st)
        assert.same({ "enforce", true }, { cjson.decode(out).mode, cjson.decode(out).blocked })
        -- a policy that cannot be loaded fails each command, named, instead of falling back
        local missing = helpers.tmppath(".lua")
        for _, args in ipairs({ { "check", "-c", "1" }, { "run", "-c", "1" }, { "exec", "--", "true" } }) do
            st, _, err = cli(args, { env = "LLMBOX_POLICY=" .. helpers.shell_quote(missing) })
            assert.equal(125, st, args[1])
            assert.matches(missing, err, 1, true)
        end
    end)

    it("lists languages with versions", function()
        local st, out = cli({ "langs", "--json" })
        assert.equal(0, st)
        local langs = cjson.decode(out)
        local by = {}
        for _, l in ipairs(langs) do by[l.name] = l end
        assert.matches("^Python 3%.", by.python.version)
        assert.is_truthy(by.shell)
        assert.is_true(by.python.plots)
        assert.is_true(by.python.libraries)
        assert.matches("pip", by.python.package_manager)
        assert.is_true(#by.python.preinstalled > 0)
        assert.is_string(by.python.example)
        assert.is_true(by.python.interactive)
        assert.is_false(by.shell.interactive)
        for _, name in ipairs({ "javascript", "java", "cpp", "go", "r", "ruby" }) do
            assert.is_string(by[name] and by[name].version, name .. " has no version")
        end
        st, out = cli({ "langs" })
        assert.equal(0, st)
        assert.matches("python%s+Python 3%.%S+%s+interactive", out)
    end)

    it("lists the backends: status, usable here, capabilities and layout", function()
        local st, out = cli({ "backends", "--json" })
        assert.equal(0, st)
        local list = cjson.decode(out)
        local by = {}
        for _, b in ipairs(list) do by[b.name] = b end
        assert.equal("available", by.native.status)
        assert.is_true(by.native.usable)
        assert.equal("/sandbox", by.native.layout.workspace)
        assert.equal("/tmp/llmbox", by.native.layout.code)
        local caps = table.concat(by.native.capabilities, ",")
        assert.matches("pool", caps, 1, true)
        assert.matches("seccomp", caps, 1, true)
        assert.not_matches("images", caps, 1, true) -- the jail runs the host's interpreters
        -- docker and podman are built: usable where their engine answers, else why not
        for _, name in ipairs({ "docker", "podman" }) do
            assert.equal("available", by[name].status, name)
            -- else why not: the socket it tried, and what to do
            if not by[name].usable then assert.matches("sock", by[name].why) end
            assert.matches("images", table.concat(by[name].capabilities, ","), 1, true)
        end
        -- kubernetes is built: usable where a kubeconfig reaches a cluster, else why not
        assert.equal("available", by.kubernetes.status)
        if not by.kubernetes.usable then assert.matches("Kubernetes", by.kubernetes.why) end
        assert.matches("images", table.concat(by.kubernetes.capabilities, ","), 1, true)
        -- the seed's Windows backends: listed, with why they cannot be had here
        assert.is_false(by.wsl2.usable)
        assert.same({}, by.wsl2.capabilities)
        assert.matches('"capabilities":[]', out, 1, true) -- empty lists stay JSON arrays
        assert.same({ "bwrap" }, by.bubblewrap.aliases)
        st, out = cli({ "backends" })
        assert.equal(0, st)
        assert.matches("native%s+usable", out)
        assert.matches("layout: workspace /sandbox, code /tmp/llmbox", out, 1, true)
        assert.matches("bubblewrap %(bwrap%)%s+usable", out)
        assert.matches("kubernetes %(k8s%)%s+%a+%s+pods through the Kubernetes API", out)
        local err
        st, _, err = cli({ "backends", "--yaml" })
        assert.equal(125, st)
        assert.matches("backends takes only --json", err, 1, true)
    end)

    it("passes --image to the backend, and native refuses one with what to use instead", function()
        for _, args in ipairs({ { "run", "--image", "python:3.12-slim", "-c", "print(1)" },
            { "exec", "--image", "python:3.12-slim", "--", "true" } }) do
            local st, _, err = cli(args)
            assert.equal(125, st)
            assert.matches("an image was asked for (python:3.12-slim); the native backend runs the host's "
                .. "interpreters", err, 1, true)
        end
    end)

    it("names what is built when asked for a backend that is not", function()
        local st, _, err = cli({ "run", "-b", "wsl", "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches('backend "wsl2" is not available on Linux', err, 1, true)
        assert.matches('(available: bubblewrap, docker, kubernetes, native, nsjail, podman)', err, 1, true)
        st, _, err = cli({ "run", "-b", "vmware", "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches('unknown backend "vmware" (available: bubblewrap, docker, kubernetes, native, nsjail, podman)', err, 1, true)
    end)

    it("lists policies", function()
        local st, out = cli({ "policies" })
        assert.equal(0, st)
        for _, name in ipairs({ "default", "strict", "permissive" }) do assert.matches(name, out) end
    end)

    it("runs an operator's script with arguments", function()
        local f = helpers.write(helpers.tmpname(".lua"), [[
local s = assert(llmbox.session{ lang = "python" })
local r = assert(s:run("import sys; print(sys.argv[1])", { args = { arg[1] } }))
io.write(r.stdout, #arg, " ", arg[0]:match("[^/]+$"), "\n")
s:close()
return 3
]])
        local st, out = cli({ "script", f, "one", "two" })
        assert.equal(3, st)
        assert.matches("^one\n2 ", out)
        os.remove(f)
    end)

    it("prints empty lists as JSON arrays, not objects", function()
        local st, out = cli({ "run", "--json", "-c", "print(1)" })
        assert.equal(0, st)
        assert.matches('"plots":[]', out, 1, true)
        st, out = cli({ "check", "--json", "-c", "print(1)" })
        assert.equal(0, st)
        assert.matches('"violations":[]', out, 1, true)
    end)

    it("has a doctor, --help and --version", function()
        local st, out = cli({ "doctor" })
        assert.equal(0, st)
        assert.matches("user namespaces", out)
        assert.matches("native", out)
        assert.matches("pools: yes, warm start for python", out, 1, true)
        local _, jout = cli({ "doctor", "--json" })
        assert.is_true(cjson.decode(jout).ok)
        st, out = cli({ "--help" })
        assert.equal(0, st)
        assert.matches("Exit status", out)
        st, out = cli({ "--version" })
        assert.equal(0, st)
        assert.matches("^llmbox %d+%.%d+%.%d+", out)
        st = cli({ "frobnicate" })
        assert.equal(125, st)
    end)
end)

describe("llmbox CLI messages #unpriv", function()
    it("says a FILE that is a directory is one, for run and check", function()
        local dir = helpers.tmpdir()
        for _, cmd in ipairs({ "run", "check" }) do
            local st, out, err = cli({ cmd, dir })
            assert.equal(125, st)
            assert.equal("", out)
            assert.matches("cannot read " .. dir .. ": it is a directory", err, 1, true)
            assert.matches("-c CODE", err, 1, true)
            assert.not_matches("nil", err)
        end
    end)

    it("gives the system's reason when a FILE cannot be read", function()
        for _, cmd in ipairs({ "run", "check" }) do
            local st, _, err = cli({ cmd, "/no/such/file.py" })
            assert.equal(125, st)
            assert.equal("llmbox: cannot read /no/such/file.py: No such file or directory\n", err)
        end
        local f = helpers.write(helpers.tmpname(".py"), "print(1)")
        assert(os.execute("chmod 000 " .. helpers.shell_quote(f)))
        local prefix = ""
        if helpers.is_root() then
            -- root reads anything: drop to nobody (who needs to reach the binary and the tree)
            prefix = "setpriv --reuid=nobody --regid=nogroup --clear-groups"
            -- (LuaJIT's os.execute returns the status: 0 when it worked)
            if os.execute(prefix .. " " .. helpers.shell_quote(helpers.bin) .. " --version >/dev/null 2>&1") ~= 0 then
                return pending("nobody cannot reach " .. helpers.bin .. " (spec/run.sh covers this as nobody)")
            end
        end
        for _, cmd in ipairs({ "run", "check" }) do
            local st, _, err = cli({ cmd, f }, { env = prefix })
            assert.equal(125, st)
            assert.equal("llmbox: cannot read " .. f .. ": Permission denied\n", err)
        end
    end)

    it("prints why a command could not be started", function()
        local st, out, err = cli({ "exec", "--", "/nonexistent" })
        assert.equal(127, st)
        assert.equal("", out)
        assert.equal("llmbox: cannot execute /nonexistent: No such file or directory\n", err)
        st, _, err = cli({ "exec", "--", "no-such-command" })
        assert.equal(127, st)
        assert.matches("no%-such%-command: command not found", err)
    end)

    it("refuses empty code", function()
        for _, cmd in ipairs({ "run", "check" }) do
            local st, out, err = cli({ cmd, "-c", "" })
            assert.equal(125, st)
            assert.equal("", out)
            assert.equal("llmbox: -c: the code is empty; give the code to run\n", err)
            st, _, err = cli({ cmd, "-" }, { stdin = "" })
            assert.equal(125, st)
            assert.equal("llmbox: -: standard input held no code\n", err)
        end
    end)

    it("takes -t only as plain decimal seconds", function()
        for _, bad in ipairs({ "0x10", "inf", "nan", "1e3", "-1", "0", "0.0", " 5", "5s", "" }) do
            local st, out, err = cli({ "run", "-t", bad, "-c", "print(1)" })
            assert.equal(125, st, bad)
            assert.equal("", out)
            assert.equal(("llmbox: -t: expected a positive number of seconds in decimal, like 5 or 0.5; got %q\n"):format(bad), err)
        end
        for _, good in ipairs({ "5", "0.5", "2.", ".25", "007" }) do
            local st, out, err = cli({ "run", "--timeout=" .. good, "-c", "print(1)" })
            assert.equal(0, st, err)
            assert.equal("1\n", out)
        end
    end)

    it("starts the stop message on its own line", function()
        local code = "import sys, time; sys.stdout.write('abc'); sys.stdout.flush(); time.sleep(30)"
        -- one file for both streams, as on a terminal
        local st, out = cli({ "run", "-t", "0.5", "-c", code }, { merge = true })
        assert.equal(124, st)
        assert.equal("abc\nllmbox: the run was stopped: wall-clock timeout (0.5 s) reached\n", out)
        -- apart: standard error gets no stray empty line
        local err
        st, out, err = cli({ "run", "-t", "0.5", "-c", code })
        assert.equal(124, st)
        assert.equal("abc", out)
        assert.equal("llmbox: the run was stopped: wall-clock timeout (0.5 s) reached\n", err)
        st, out, err = cli({ "run", "-t", "0.5", "-c", (code:gsub("stdout", "stderr")) })
        assert.equal(124, st)
        assert.equal("", out)
        assert.equal("abc\nllmbox: the run was stopped: wall-clock timeout (0.5 s) reached\n", err)
        st, out = cli({ "run", "-t", "0.5", "-c", "import time; print('done'); time.sleep(30)" }, { merge = true })
        assert.equal(124, st)
        assert.equal("done\nllmbox: the run was stopped: wall-clock timeout (0.5 s) reached\n", out)
    end)

    it("keeps lines whole when parallel runs write to one pipe", function()
        -- python -u writes each print as two write(2)s, the text and then the newline
        local code = "for i in range(4000): print('%05d' % i + 'x' * 60)"
        local out = helpers.tmpname()
        local runs = {}
        for i = 1, 3 do runs[i] = helpers.shell_quote(helpers.bin) .. " run -c " .. helpers.shell_quote(code) .. " &" end
        assert(os.execute("( " .. table.concat(runs, " ") .. " wait ) </dev/null | cat >" .. helpers.shell_quote(out)))
        local lines, bad = 0, {}
        for line in io.lines(out) do
            lines = lines + 1
            if not line:match("^%d%d%d%d%d" .. ("x"):rep(60) .. "$") and #bad < 5 then bad[#bad + 1] = line end
        end
        assert.same({}, bad)
        assert.equal(12000, lines)
    end)

    it("says in --json which step failed", function()
        local _, out = cli({ "run", "--json", "-l", "cpp", "-c", "int main() { return nope; }" })
        local j = cjson.decode(out)
        assert.equal("compile", j.phase)
        assert.matches("nope", j.stderr)
        _, out = cli({ "run", "--json", "-l", "cpp", "-c", "int main() { return 3; }" })
        j = cjson.decode(out)
        assert.equal(3, j.exit_code)
        assert.equal(cjson.null, j.phase)
        _, out = cli({ "exec", "--json", "--", "true" })
        assert.equal(cjson.null, cjson.decode(out).phase)
    end)

    it("has in --json the fields the MCP result has", function()
        local pol = helpers.write(helpers.tmpname(".lua"), 'return { extends = "default", checks = { mode = "warn" } }')
        local st, out, err = cli({ "run", "--json", "-p", pol, "-c", "import subprocess" })
        assert.equal(0, st, err)
        local j = cjson.decode(out)
        for _, k in ipairs({ "exit_code", "stdout", "stderr", "timed_out", "limit", "duration_ms", "truncated",
            "signal", "phase", "cpu_ms", "plots" }) do
            assert.is_not_nil(j[k], k)
        end
        assert.matches("subprocess", j.warnings[1].rule)
    end)
end)

describe("llmbox run --libraries #unpriv", function()
    local pol
    setup(function()
        local wheel = require "support.wheel"
        local wheels = helpers.private_dir() .. "/wheels" -- (0711: the jail reaches it)
        wheel.build(wheels, "llmboxdemo", "1.0", "def answer():\n    return 42\n")
        wheel.build(wheels, "llmboxtwo", "1.5", "TWO = 2\n")
        pol = helpers.write(helpers.tmpname(".lua"), ([[return { extends = "default", checks = { mode = "off" },
            libraries = { allow = true, sources = { python = { find_links = { %q } } } } }]]):format(wheels))
    end)

    it("installs the libraries, then runs the code with them", function()
        local st, out, err = cli({ "run", "-p", pol, "--libraries", "llmboxdemo==1.0,llmboxtwo>=1.0,<2", "-c",
            "import llmboxdemo, llmboxtwo; print(llmboxdemo.answer() + llmboxtwo.TWO)" })
        assert.equal(0, st, err)
        assert.equal("44\n", out)
        assert.equal("", err) -- the installer's chatter is not the program's output
        st, out, err = cli({ "run", "-p", pol, "--libraries=llmboxdemo", "--libraries", "llmboxtwo", "--json", "-c",
            "import llmboxdemo, llmboxtwo; print(llmboxdemo.answer() + llmboxtwo.TWO)" })
        assert.equal(0, st, err)
        assert.equal("44\n", cjson.decode(out).stdout)
    end)

    it("shows a failed install as the install's result, and does not run the code", function()
        local st, out, err = cli({ "run", "-p", pol, "--libraries", "no-such-package", "-c", "print('ran')" })
        assert.is_not.equal(0, st)
        assert.is_not.equal(125, st, err)
        assert.equal("", out)
        assert.matches("No matching distribution", err, 1, true)
        local last = "\nllmbox: installing the libraries failed (exit " .. st .. "); the code did not run\n"
        assert.equal(last, err:sub(-#last))
        _, out = cli({ "run", "-p", pol, "--json", "--libraries", "no-such-package", "-c", "print('ran')" })
        local j = cjson.decode(out)
        assert.equal("install", j.phase)
        assert.is_not.equal(0, j.exit_code)
        assert.matches("No matching distribution", j.stderr, 1, true)
    end)

    it("refuses what the policy or the package names do not allow", function()
        local st, _, err = cli({ "run", "--libraries", "llmboxdemo", "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches('policy "default" does not allow library installs', err, 1, true)
        st, _, err = cli({ "run", "-p", pol, "--libraries", "-e.", "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches("install: package 1 (\"-e.\") starts with '-'", err, 1, true)
        st, _, err = cli({ "run", "-p", pol, "--libraries", "a,,b", "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches("--libraries: an empty name in \"a,,b\"", err, 1, true)
        local many = {}
        for i = 1, 51 do many[i] = "p" .. i end
        st, _, err = cli({ "run", "-p", pol, "--libraries", table.concat(many, ","), "-c", "print(1)" })
        assert.equal(125, st)
        assert.matches("--libraries: at most 50 libraries, got 51", err, 1, true)
        st, _, err = cli({ "run", "-l", "cpp", "-p", pol, "--libraries", "fmt", "-c", "int main(){}" })
        assert.equal(125, st)
        assert.matches("installing libraries is not supported for cpp", err, 1, true)
    end)
end)

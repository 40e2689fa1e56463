-- The Lua API against real native sandboxes.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"

describe("session #unpriv", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python", policy = "default" })) end)
    after_each(function() if s then s:close() end end)

    it("runs code and returns the documented result shape", function()
        local r = assert(s:run("print(6*7)", { timeout = 5 }))
        assert.equal(0, r.exit_code)
        assert.equal("42\n", r.stdout)
        assert.equal("", r.stderr)
        assert.is_false(r.timed_out)
        assert.is_nil(r.limit)
        assert.is_false(r.truncated)
        assert.is_number(r.duration_ms)
        assert.is_true(r.duration_ms > 0)
    end)

    it("reports a failing program as an exit code, not an error", function()
        local r, err = s:run("import sys\nprint('to stderr', file=sys.stderr)\nsys.exit(3)")
        assert.is_nil(err)
        assert.equal(3, r.exit_code)
        assert.equal("to stderr\n", r.stderr)
        r = assert(s:run("raise ValueError('boom')"))
        assert.equal(1, r.exit_code)
        assert.matches('File "/tmp/llmbox/main.py", line 1', r.stderr, 1, true)
        assert.matches("ValueError: boom", r.stderr, 1, true)
    end)

    it("reports a program killed by a signal as 128 + signal", function()
        local r = assert(s:run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
        assert.equal(128 + 15, r.exit_code)
        assert.equal(15, r.signal)
    end)

    it("reports sandbox errors as nil, err", function()
        s:close()
        local r, err = s:run("print(1)")
        assert.is_nil(r)
        assert.matches("closed", err)
        local s2, err2 = llmbox.session({ lang = "cobol" })
        assert.is_nil(s2)
        assert.matches('unknown language "cobol"', err2, 1, true)
        local s3, err3 = llmbox.session({ policy = "no-such-policy" })
        assert.is_nil(s3)
        assert.matches("no%-such%-policy", err3)
        local s4, err4 = llmbox.session({ backend = "wsl2" })
        assert.is_nil(s4)
        assert.matches("not available on Linux", err4, 1, true)
    end)

    it("raises on caller mistakes", function()
        assert.has_error(function() s:run(42) end)
        assert.has_error(function() s:run("print(1)", { tiemout = 3 }) end, 'run: unknown option "tiemout"')
        assert.has_error(function() llmbox.session({ langg = "python" }) end)
    end)

    it("streams output to callbacks as it arrives", function()
        local seen, first_at = "", nil
        local t0 = helpers.now()
        local r = assert(s:run([[
import time
print("first", flush=True)
time.sleep(1.5)
print("second", flush=True)
]], { on_stdout = function(c)
            seen = seen .. c
            if not first_at and seen:find("first\n", 1, true) then first_at = helpers.now() - t0 end
        end }))
        local t_end = helpers.now() - t0
        assert.equal("first\nsecond\n", r.stdout)
        assert.equal(r.stdout, seen)
        -- the first line reached the callback long before the run ended
        assert.is_true(t_end - first_at > 1.0, "first line came late")
    end)

    it("survives invalid UTF-8 and NUL bytes in output", function()
        local r = assert(s:run([[import sys; sys.stdout.buffer.write(b"\xff\xfe ok \x00 \xc3\x28")]]))
        assert.equal("\255\254 ok \0 \195\40", r.stdout)
    end)

    it("passes stdin and arguments to the program", function()
        local r = assert(s:run("import sys; print(sys.argv[1:], sys.stdin.read().upper())",
            { args = { "a b", "--x" }, stdin = "hello" }))
        assert.equal("['a b', '--x'] HELLO\n", r.stdout)
    end)

    it("survives a program that exits without reading its stdin (no SIGPIPE in the caller)", function()
        local r = assert(s:exec({ "head", "-c", "5" }, { stdin = string.rep("y", 8 * 1024 * 1024) }))
        assert.equal("yyyyy", r.stdout)
        r = assert(s:exec({ "true" }, { stdin = string.rep("x", 8 * 1024 * 1024) }))
        assert.equal(0, r.exit_code)
    end)

    it("execs argv and shell strings with the same result shape", function()
        local r = assert(s:exec({ "echo", "hi there" }))
        assert.equal("hi there\n", r.stdout)
        assert.equal(0, r.exit_code)
        r = assert(s:exec("echo $((6*7)); exit 4"))
        assert.equal("42\n", r.stdout)
        assert.equal(4, r.exit_code)
        r = assert(s:exec({ "no-such-command" }))
        assert.equal(127, r.exit_code)
        assert.matches("command not found", r.stderr)
    end)

    it("keeps the workspace across runs of a session, and only there", function()
        assert.equal(0, assert(s:run("open('/sandbox/state.txt','w').write('kept')")).exit_code)
        local r = assert(s:run("print(open('/sandbox/state.txt').read())"))
        assert.equal("kept\n", r.stdout)
        local other = assert(llmbox.session({ lang = "python" }))
        r = assert(other:run("import os; print(os.listdir('/sandbox'))"))
        other:close()
        assert.equal("[]\n", r.stdout)
    end)

    it("kills everything a run started before the next run", function()
        local r = assert(s:exec("(sleep 300 &) ; (setsid sleep 301 &) ; echo started"))
        assert.equal("started\n", r.stdout)
        r = assert(s:exec("ps -eo pid,comm 2>/dev/null || ls /proc"))
        assert.not_matches("sleep", r.stdout)
        r = assert(s:exec("ls /proc | grep -E '^[0-9]+$' | wc -l"))
        -- pid 1 (the run's init), the shell, ls, grep, wc at most
        assert.is_true(tonumber(r.stdout) <= 5, "processes left: " .. r.stdout)
    end)

    it("copies files in and out of the workspace", function()
        local src = helpers.write(helpers.tmpname(), "payload\0with nul\n")
        assert(s:copy_to(src, "/sandbox/dir/in.txt"))
        local r = assert(s:exec({ "cat", "/sandbox/dir/in.txt" }))
        assert.equal("payload\0with nul\n", r.stdout)
        assert.equal(0, assert(s:exec("echo result > /sandbox/out.txt")).exit_code)
        local dst = helpers.tmpname()
        assert(s:copy_from("out.txt", dst))
        assert.equal("result\n", helpers.read(dst))
        os.remove(src); os.remove(dst)
    end)

    it("refuses copies that leave the workspace or follow planted links", function()
        local src = helpers.write(helpers.tmpname(), "x")
        local ok, err = s:copy_to(src, "/etc/passwd")
        assert.is_nil(ok); assert.matches("outside the workspace", err)
        ok, err = s:copy_to(src, "/sandbox/../etc/x")
        assert.is_nil(ok); assert.matches("%.%.", err)
        -- a symlink planted by sandboxed code, pointing at a host path
        assert(s:exec("ln -s /etc/passwd /sandbox/link; ln -s / /sandbox/rootlink"))
        local dst = helpers.tmpname()
        ok, err = s:copy_from("/sandbox/link", dst)
        assert.is_nil(ok); assert.matches("symlinks", err)
        ok, err = s:copy_from("/sandbox/rootlink/etc/passwd", dst)
        assert.is_nil(ok); assert.matches("symlinks", err)
        ok, err = s:copy_to(src, "/sandbox/link")
        assert.is_nil(ok); assert.matches("symlink", err)
        os.remove(src); os.remove(dst)
    end)

    it("destroys the jail on close", function()
        assert(s:run("open('/sandbox/x','w').write('1')"))
        s:close()
        assert.is_true(s:closed())
        local r, err = s:exec({ "true" })
        assert.is_nil(r)
        assert.matches("closed", err)
    end)
end)

-- Every open session holds file descriptors (its namespaces); a run needs more while it runs
-- (12 at most here: its pipes, both ends, at fork time). Sessions may not take the descriptors
-- that runs need.
describe("sessions and file descriptors #unpriv", function()
    local q = helpers.shell_quote
    local SCRIPT = [==[
-- run by the llmbox CLI, or by plain LuaJIT from the source tree
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local llmbox = require "llmbox"
local cjson = require "cjson"
local out = { limits = io.open("/proc/self/limits"):read("*a"):match("Max open files%s+(%d+)") }
local sessions, max = {}, tonumber(arg[1]) or 1000
while #sessions < max do
    local s, err = llmbox.session({ lang = "shell" })
    if not s then out.err = err break end
    sessions[#sessions + 1] = s
end
out.open = #sessions
out.runs_ok = 0
for _, s in ipairs(sessions) do
    local r, err = s:exec("echo ok")
    if r and r.stdout == "ok\n" then out.runs_ok = out.runs_ok + 1 else out.run_err = err end
end
-- a run that copies a file out, too
local last = sessions[#sessions]
local ok, err = last:exec("echo data > /sandbox/f")
ok, err = last:copy_from("/sandbox/f", os.tmpname())
out.copy = ok and "ok" or err
for _, s in ipairs(sessions) do s:close() end
out.after_close = llmbox.session({ lang = "shell" }) and "ok" or "refused"
io.write(cjson.encode(out), "\n")
]==]

    -- The counts assume a process that starts with stdio only: descriptors the spec runner
    -- holds (leaked by earlier specs, more or fewer by timing) would count against the limit.
    local CLEAN_FDS = "/usr/bin/python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], "
        .. "sys.argv[1:])' "

    local function run(prefix, max)
        local script = helpers.write(helpers.tmppath(".lua"), SCRIPT)
        local p = io.popen(CLEAN_FDS .. prefix .. " " .. q(script) .. " " .. (max or "") .. " 2>&1")
        local text = p:read("*a")
        p:close()
        os.remove(script)
        return require("cjson").decode(text:match("({.*})%s*$") or error("no result: " .. text))
    end

    it("refuses one more session with the numbers, and the runs of the open ones keep working", function()
        local out = run("sh -c 'ulimit -n 256; exec \"$0\" script \"$1\" \"$2\"' " .. q(helpers.bin))
        assert.equal("256", out.limits)
        assert.matches("cannot open another sandbox session: this process has %d+ file descriptors open "
            .. "and may have 256 %(ulimit %-n; the hard limit is 256%); each session holds 5", out.err)
        assert.matches("Raise the limit (ulimit -n", out.err, 1, true)
        -- (256 - 32 kept free - stdio and the Lua state's own) / 5 per session
        assert.is_true(out.open >= 35 and out.open <= 45, "sessions: " .. out.open)
        assert.equal(out.open, out.runs_ok, out.run_err)
        assert.equal("ok", out.copy)
        assert.equal("ok", out.after_close)
    end)

    it("the CLI raises its soft limit to the hard one; the library in another process does not", function()
        -- more sessions than 128 descriptors could hold
        local out = run("sh -c 'ulimit -Sn 128; exec \"$0\" script \"$1\" \"$2\"' " .. q(helpers.bin), 40)
        local hard = io.popen("sh -c 'ulimit -Hn'"):read("*l")
        assert.equal(hard, out.limits)
        assert.equal(40, out.open, out.err)
        assert.equal(40, out.runs_ok)
        -- plain LuaJIT keeps the limit it was given, and gets the same clear refusal
        out = run("env -C " .. q(helpers.root) .. " sh -c 'ulimit -Sn 128; exec luajit \"$0\"'")
        assert.equal("128", out.limits)
        assert.matches("may have 128 %(ulimit %-n; the hard limit is " .. hard .. "%)", out.err)
        assert.is_true(out.open >= 12 and out.open <= 20, "sessions: " .. out.open)
        assert.equal(out.open, out.runs_ok, out.run_err)
    end)
end)

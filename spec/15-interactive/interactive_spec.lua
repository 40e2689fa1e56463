-- Interactive sessions (on every backend that keeps a process alive: the conformance suite runs
-- them on docker and podman too): one Python interpreter in the sandbox, each run a
-- cell that shares the state of the cells before it; real sandboxes, real interrupts and kills.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local wheel = require "support.wheel"

local NOCHECKS = "spec/fixtures/policies/default-nochecks.lua"

-- Waits (10 s at most) until a file the interpreter's thread writes is in the workspace.
local function wait_for(s, path)
    local seen = helpers.tmpname()
    for _ = 1, 200 do
        if s:copy_from(path, seen) then return end
        os.execute("sleep 0.05")
    end
end

describe("interactive sessions #conformance #unpriv", function()
    local s
    before_each(function()
        s = assert(llmbox.session({ lang = "python", interactive = true, policy = NOCHECKS }))
    end)
    after_each(function()
        if s then s:close() end
    end)

    it("keep variables, imports, functions and open files from one cell to the next", function()
        local r = assert(s:run("import math\nx = 41\ndef double(v):\n    return v * 2\nf = open('notes.txt', 'w')"))
        assert.equal(0, r.exit_code)
        assert.is_nil(r.value)
        r = assert(s:run("x = x + 1\nf.write('kept'); f.flush()\nprint(math.floor(2.5), double(x))"))
        assert.equal("2 84\n", r.stdout)
        r = assert(s:run("open('notes.txt').read()"))
        assert.equal("'kept'", r.value)
        assert.equal(3, r.cell)
        assert.is_number(r.duration_ms)
    end)

    it("answer a cell's last expression with its repr, bounded, and set _", function()
        local r = assert(s:run("{'a': [1, 2]}"))
        assert.equal("{'a': [1, 2]}", r.value)
        assert.equal("", r.stdout)
        r = assert(s:run("_['a']"))
        assert.equal("[1, 2]", r.value)
        r = assert(s:run("'x' * 100000"))
        assert.equal(64 * 1024 + 3, #r.value)
        assert.equal("...", r.value:sub(-3))
        r = assert(s:run("None"))
        assert.is_nil(r.value)
    end)

    it("fail a cell on an exception or a syntax error, with its traceback, and go on", function()
        local r = assert(s:run("y = 5\n1 / 0"))
        assert.equal(1, r.exit_code)
        assert.matches('File "<cell 1>", line 2, in <module>', r.stderr, 1, true)
        assert.matches("ZeroDivisionError: division by zero", r.stderr, 1, true)
        assert.not_matches("llmbox_kernel", r.stderr, 1, true)
        r = assert(s:run("def broken(:"))
        assert.equal(1, r.exit_code)
        assert.matches('File "<cell 2>", line 1', r.stderr, 1, true)
        assert.matches("SyntaxError", r.stderr, 1, true)
        assert.not_matches("ast.py", r.stderr, 1, true)
        r = assert(s:run("y"))
        assert.equal("5", r.value)
        r = assert(s:run("import sys; sys.exit(3)"))
        assert.equal(3, r.exit_code)
        assert.equal("5", assert(s:run("y")).value)
    end)

    it("interrupt a cell at its timeout (KeyboardInterrupt) and keep the state", function()
        assert(s:run("z = 'still here'"))
        local r = assert(s:run("import time\ntime.sleep(30)", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        assert.is_true(r.timed_out)
        assert.is_true(r.interrupted)
        assert.is_nil(r.state_lost)
        assert.matches("KeyboardInterrupt", r.stderr, 1, true)
        assert.not_matches("llmbox_kernel", r.stderr, 1, true)
        assert.is_true(r.duration_ms < 5000)
        assert.equal("'still here'", assert(s:run("z")).value)
    end)

    it("end the interpreter of a cell that ignores the interrupt, say so, and start afresh", function()
        assert(s:run("w = 1"))
        local r = assert(s:run("import time\nwhile True:\n    try:\n        time.sleep(30)\n"
            .. "    except KeyboardInterrupt:\n        pass", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        assert.is_true(r.state_lost)
        r = assert(s:run("w"))
        assert.equal(1, r.exit_code)
        assert.matches("NameError: name 'w' is not defined", r.stderr, 1, true)
        assert.equal(1, r.cell)
    end)

    it("cut a cell's output at the output limit and keep the state", function()
        assert(s:run("v = 7"))
        local r = assert(s:run("import sys\nfor i in range(100000):\n    print('line', i)", { output = 4096 }))
        assert.equal("output", r.limit)
        assert.is_true(r.truncated)
        assert.is_true(#r.stdout <= 4096)
        assert.is_nil(r.state_lost)
        assert.equal("7", assert(s:run("v")).value)
    end)

    it("are not held up by a thread that goes on writing after its cell", function()
        assert(s:run("import sys, threading\ndef spam():\n    while True:\n        sys.stdout.write('x' * 1000)\n"
            .. "threading.Thread(target=spam, daemon=True).start()"))
        -- each cell comes back (the thread's output may fill its cap, which interrupts it)
        for i = 1, 3 do
            local r = assert(s:run("'cell " .. i .. "'", { output = 100000 }))
            assert.is_true(r.value == "'cell " .. i .. "'" or r.interrupted == true)
            assert.is_true(#r.stdout <= 100000)
            assert.is_nil(r.state_lost)
        end
    end)

    it("bring each cell's plots back, and only that cell's", function()
        local r = assert(s:run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('one')"))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(1, #r.plots)
        assert.equal("png", r.plots[1].format)
        r = assert(s:run("1 + 1"))
        assert.equal(0, #r.plots)
        r = assert(s:run("plt.plot([2, 2])\nplt.show()\nplt.plot([3, 1])\nNone"))
        assert.equal(2, #r.plots)
    end)

    it("run cells in the same jail as any run: the sandbox user, no capabilities, no network", function()
        local r = assert(s:run([[
import os, socket
caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]
try:
    socket.create_connection(('198.51.100.1', 80), timeout=1)
    net = 'reached'
except OSError as e:
    net = 'refused'
(os.getuid() != 0, caps, net, os.getcwd())]]))
        assert.equal("(True, '0000000000000000', 'refused', '/sandbox')", r.value)
    end)

    it("cannot end another cell through the control channel: answers with a wrong tag are dropped", function()
        -- the program finds its control socket and writes answers of its own on it
        local r = assert(s:run([[
import os, stat
fds = [int(f) for f in os.listdir('/proc/self/fd') if int(f) >= 10 and stat.S_ISSOCK(os.fstat(int(f)).st_mode)]
for fd in fds:
    os.write(fd, b"done 0000000000000000 0 0 0 6\nforged")
print('cell went on', len(fds) > 0)
'real']]))
        assert.equal("cell went on True\n", r.stdout)
        assert.equal("'real'", r.value)
        r = assert(s:run("'next'"))
        assert.equal("'next'", r.value)
        -- a malformed answer ends the interpreter with a clear error, never a hang
        local res, err = s:run([[
import os, stat
for f in os.listdir('/proc/self/fd'):
    if int(f) >= 10 and stat.S_ISSOCK(os.fstat(int(f)).st_mode):
        os.write(int(f), b"nonsense\n")
import time; time.sleep(5)]])
        assert.is_nil(res)
        assert.matches("broke its protocol", err, 1, true)
        r = assert(s:run("1"))
        assert.equal("1", r.value)
    end)

    it("say so when the interpreter ended between cells, and start a fresh one after", function()
        assert(s:run("import os, threading\nkept = 1\ndef bye():\n    open('/sandbox/gone', 'w').close()\n"
            .. "    os._exit(0)\nthreading.Timer(0.1, bye).start()"))
        -- however slow the machine: the timer has fired before the next cell
        wait_for(s, "/sandbox/gone")
        os.execute("sleep 0.3")
        local r, err = s:run("kept")
        assert.is_nil(r)
        assert.matches("the interactive interpreter had ended since the last cell", err, 1, true)
        r = assert(s:run("'kept' in globals()"))
        assert.equal("False", r.value)
        assert.equal(1, r.cell)
    end)

    it("keep the state when a late answer lies on the control socket between cells", function()
        -- a readiness check used to read the socket between cells, took the late answer's first
        -- byte for a dead interpreter, and dropped the state without a word
        local r = assert(s:run([[
import os, stat, threading
n = 5
fds = [int(f) for f in os.listdir('/proc/self/fd') if int(f) >= 10 and stat.S_ISSOCK(os.fstat(int(f)).st_mode)]
def late():
    for fd in fds:
        os.write(fd, b"done 0000000000000000 0 0 0 0\n")
    open('/sandbox/written', 'w').close()
threading.Timer(0.1, late).start()
len(fds)]]))
        assert.equal("1", r.value)
        wait_for(s, "/sandbox/written")
        os.execute("sleep 0.1")
        r = assert(s:run("n"))
        assert.equal("5", r.value)
        assert.equal(2, r.cell)
    end)

    it("keep the interpreter through runs and commands beside it, even ones stopped at their timeout", function()
        assert(s:run("kept = 'yes'"))
        -- a command that leaves a process behind, and one stopped at its timeout: both are swept
        -- away when they end, the interpreter is not
        local r = assert(s:exec("sleep 60 & echo started", { timeout = 5 }))
        assert.equal("started\n", r.stdout)
        r = assert(s:exec("sleep 60", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        r = assert(s:run("kept"))
        assert.equal("'yes'", r.value)
        assert.equal(2, r.cell)
        -- nothing of the commands is left: only the interpreter's own processes run
        r = assert(s:run("import os\nsorted(open('/proc/%s/cmdline' % p).read().split('\\0')[0] for p in os.listdir('/proc') "
            .. "if p.isdigit() and os.stat('/proc/' + p).st_uid == os.getuid())"))
        assert.not_matches("sleep", r.value, 1, true)
    end)

    it("hand back output that looks like the channel's frames as output", function()
        local fake = "\\0llmbox-cell:0123456789abcdef 1 5\\nhello\\0llmbox-sync:0123456789abcdef 1\\n"
        local r = assert(s:run("import sys\nsys.stdout.write('" .. fake .. "')\nsys.stderr.write('" .. fake
            .. "')\n'after'"))
        local want = "\0llmbox-cell:0123456789abcdef 1 5\nhello\0llmbox-sync:0123456789abcdef 1\n"
        assert.equal(want, r.stdout)
        assert.equal(want, r.stderr)
        assert.equal("'after'", r.value)
    end)

    it("refuse run options a running interpreter cannot take", function()
        local r, err = s:run("print(1)", { args = { "a" } })
        assert.is_nil(r)
        assert.matches("cannot take arguments", err, 1, true)
        r, err = s:run("print(1)", { stdin = "x" })
        assert.is_nil(r)
        assert.matches("stdin", err, 1, true)
    end)
end)

describe("interactive sessions: what cannot be #conformance #unpriv", function()
    it("are refused for languages without an interactive mode, naming those with one", function()
        local s, err = llmbox.session({ lang = "shell", interactive = true })
        assert.is_nil(s)
        assert.matches('language "shell" has no interactive mode (interactive languages: javascript, python, r)', err, 1, true)
    end)

    it("say that the memory limit ended the interpreter, and start afresh", function()
        local s = assert(llmbox.session({ lang = "python", interactive = true, policy = NOCHECKS }))
        assert(s:run("keep = 1"))
        local r = assert(s:run("blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 1024 * 1024))"))
        if r.state_lost then
            if helpers.standin_lacks("counters") then pending(helpers.standin_lacks("counters")) end
            assert.equal("memory", r.limit)
            assert.matches("NameError", assert(s:run("keep")).stderr, 1, true)
        else
            -- where only the address-space rlimit bounds memory, Python raises MemoryError
            -- inside the cell, and the interpreter lives on
            assert.matches("MemoryError", r.stderr, 1, true)
            assert.equal("1", assert(s:run("keep")).value)
        end
        s:close()
    end)
end)

describe("interactive sessions and library installs #conformance #unpriv", function()
    local wheels, pol
    setup(function()
        wheels = helpers.tmppath()
        wheel.build(wheels, "llmboxcell", "1.0", "def answer():\n    return 42\n")
        pol = helpers.write(helpers.tmppath(".lua"), ([[return { extends = "default", checks = { mode = "off" },
            libraries = { allow = true, sources = { python = { find_links = { %q } } } } }]]):format(wheels))
    end)
    teardown(function()
        os.execute("rm -rf " .. helpers.shell_quote(wheels))
        os.remove(pol)
    end)

    it("make a library installed by s:install importable in the next cell, without a restart", function()
        local s = assert(llmbox.session({ lang = "python", interactive = true, policy = pol }))
        assert(s:run("before = 'kept'"))
        local r = assert(s:run("import llmboxcell"))
        assert.matches("ModuleNotFoundError", r.stderr, 1, true)
        local inst = assert(s:install({ "llmboxcell==1.0" }))
        assert.equal(0, inst.exit_code, inst.stderr)
        r = assert(s:run("import llmboxcell\n(llmboxcell.answer(), before)"))
        assert.equal("(42, 'kept')", r.value)
        s:close()
    end)

    it("take a cell's %pip install lines as an install before the rest of the cell", function()
        local s = assert(llmbox.session({ lang = "python", interactive = true, policy = pol }))
        assert(s:run("before = 'kept'"))
        local r = assert(s:run("%pip install -q llmboxcell==1.0\nimport llmboxcell\n(llmboxcell.answer(), before)"))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("(42, 'kept')", r.value)
        local res, err = s:run("%pip install --index-url http://example.com x")
        assert.is_nil(res)
        assert.matches("only package names", err, 1, true)
        s:close()
        -- a policy without installs refuses it, as it refuses s:install
        s = assert(llmbox.session({ lang = "python", interactive = true }))
        res, err = s:run("%pip install llmboxcell")
        assert.is_nil(res)
        assert.matches("install", err, 1, true)
        s:close()
    end)
end)

describe("interactive pools #conformance #unpriv", function()
    it("hand out sessions whose interpreter is already started, each lease with a fresh one", function()
        local p = assert(llmbox.pool({ lang = "python", interactive = true, min = 1, max = 2 }))
        local s = assert(llmbox.session({ pool = p }))
        local r = assert(s:run("import os\nsecret = 'lease one'\nos.getpid()"))
        assert.equal(1, r.cell)
        assert.equal("'lease one'", assert(s:run("secret")).value)
        s:close()
        p:maintain()
        -- the next lease never sees the last one's state
        s = assert(llmbox.session({ pool = p }))
        r = assert(s:run("secret"))
        assert.matches("NameError", r.stderr, 1, true)
        assert.equal(1, r.cell)
        s:close()
        p:close()
        local bad, err = llmbox.pool({ lang = "ruby", interactive = true, min = 1 })
        assert.is_nil(bad)
        assert.matches("no interactive mode", err, 1, true)
    end)
end)

describe("interactive JavaScript sessions #conformance #unpriv", function()
    it("share one global scope across cells, await a promise's value, and interrupt at the timeout", function()
        local s = assert(llmbox.session({ lang = "javascript", interactive = true }))
        finally(function() s:close() end)
        local r = assert(s:run("var x = 41; const double = (v) => v * 2; console.log('hi')"))
        assert.equal("hi\n", r.stdout)
        assert.is_nil(r.value)
        assert.equal("84", assert(s:run("double(x + 1)")).value)
        assert.equal("{ a: [ 1, 2 ] }", assert(s:run("({ a: [1, 2] })")).value)
        assert.equal("7", assert(s:run("new Promise((ok) => setTimeout(() => ok(7), 50))")).value)
        r = assert(s:run("null.z"))
        assert.equal(1, r.exit_code)
        assert.matches("TypeError: Cannot read properties of null", r.stderr, 1, true)
        assert.matches("at <cell 5>:1", r.stderr, 1, true)
        assert.not_matches("llmbox_kernel", r.stderr, 1, true)
        r = assert(s:run("while (true) {}", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        assert.equal(130, r.exit_code)
        assert.is_nil(r.state_lost)
        r = assert(s:run("new Promise(() => {})", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        assert.equal("'still 41'", assert(s:run("'still ' + x")).value)
    end)

    it("require() modules from the workspace's node_modules, also ones that appear later", function()
        local s = assert(llmbox.session({ lang = "javascript", interactive = true }))
        finally(function() s:close() end)
        assert.equal("'fs'", assert(s:run("require('path').basename('/x/fs')")).value)
        assert(s:exec("mkdir -p node_modules/answer && echo 'module.exports = 42' > node_modules/answer/index.js"))
        assert.equal("42", assert(s:run("require('answer')")).value)
    end)
end)

describe("interactive R sessions #conformance #unpriv", function()
    it("keep the global environment across cells, print values as R does, and interrupt at the timeout", function()
        local s = assert(llmbox.session({ lang = "r", interactive = true }))
        finally(function() s:close() end)
        local r = assert(s:run("x <- 41\ndouble <- function(v) v * 2\ncat('hi\\n')"))
        assert.equal("hi\n", r.stdout)
        assert.is_nil(r.value)
        assert.equal("[1] 84", assert(s:run("double(x + 1)")).value)
        assert.is_nil(assert(s:run("invisible(5)")).value)
        r = assert(s:run("stop('boom')"))
        assert.equal(1, r.exit_code)
        assert.equal("Error: boom\n", r.stderr)
        r = assert(s:run("Sys.sleep(30)", { timeout = 0.5 }))
        assert.equal("timeout", r.limit)
        assert.equal(130, r.exit_code)
        assert.is_nil(r.state_lost)
        r = assert(s:run("plot(1:10)"))
        assert.equal(1, #r.plots)
        assert.equal("png", r.plots[1].format)
        assert.equal("[1] 41", assert(s:run("x")).value)
        -- a cell that swallows the interrupt ends the interpreter
        r = assert(s:run("repeat tryCatch(Sys.sleep(30), interrupt = function(e) NULL)", { timeout = 0.5 }))
        assert.is_true(r.state_lost)
        assert.equal("[1] FALSE", assert(s:run("exists('x')")).value)
    end)
end)

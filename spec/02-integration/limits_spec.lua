-- Every limit firing in a real sandbox: the run ends, the whole tree dies, and the result says
-- which limit fired.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local core = require "llmbox.core"

local probe = core.probe()

describe("limits", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python", policy = "default" })) end)
    after_each(function() s:close() end)

    it("wall-clock timeout kills the whole tree #unpriv", function()
        local t0 = helpers.now()
        local r = assert(s:exec("sleep 100 & sleep 100; echo never", { timeout = 1 }))
        local took = helpers.now() - t0
        assert.is_true(r.timed_out)
        assert.equal("timeout", r.limit)
        assert.equal(137, r.exit_code)
        assert.is_true(took < 5, "took " .. took .. " s")
        assert.equal("", r.stdout)
        -- nothing survived into the next run
        r = assert(s:exec("ls /proc | grep -cE '^[0-9]+$'"))
        assert.is_true(tonumber(r.stdout) <= 4)
    end)

    it("CPU seconds #unpriv", function()
        local r = assert(s:run("while True: pass", { cpu = 1, timeout = 20 }))
        assert.equal("cpu", r.limit)
        assert.is_false(r.timed_out)
        assert.is_true(r.exit_code > 128)
    end)

    it("memory", function()
        local r = assert(s:run("x = bytearray(400 * 1024 * 1024); print(len(x))", { memory = 64 * 1024 * 1024 }))
        assert.is_not.equal(0, r.exit_code)
        assert.equal("", r.stdout)
        if probe.cgroup_memory then
            assert.equal("memory", r.limit)
        else
            assert.matches("MemoryError", r.stderr)
        end
    end)

    it("number of processes: a fork bomb ends", function()
        local r = assert(s:exec("b() { b | b & }; b; sleep 5", { processes = 16, timeout = 20 }))
        assert.is_false(r.timed_out)
        if probe.cgroup_pids then assert.equal("processes", r.limit) end
        -- and the next run works
        r = assert(s:exec({ "echo", "ok" }))
        assert.equal("ok\n", r.stdout)
    end)

    it("open files #unpriv", function()
        local r = assert(s:run([[
fs = []
try:
    while True: fs.append(open('/dev/null'))
except OSError as e:
    print(e.errno, len(fs) < 40)
]], { open_files = 32 }))
        assert.equal("24 True\n", r.stdout) -- EMFILE
    end)

    it("file size #unpriv", function()
        -- the default action of SIGXFSZ kills the writer, and the result names the limit
        local r = assert(s:exec("exec head -c 2000000 /dev/zero > /sandbox/big", { file_size = 1024 * 1024 }))
        assert.equal("file_size", r.limit)
        assert.equal(128 + 25, r.exit_code) -- SIGXFSZ
        assert.equal(25, r.signal)
        -- a shell reports its child's SIGXFSZ as status 153: still the file size limit
        r = assert(s:exec("head -c 2000000 /dev/zero > /sandbox/big", { file_size = 1024 * 1024 }))
        assert.equal("file_size", r.limit)
        -- CPython ignores SIGXFSZ: the write fails with EFBIG instead
        r = assert(s:run("open('/sandbox/big', 'wb').write(b'0' * 2000000)", { file_size = 1024 * 1024 }))
        assert.equal(1, r.exit_code)
        assert.matches("File too large", r.stderr)
        -- control: a file below the limit
        r = assert(s:exec("head -c 1000 /dev/zero > /sandbox/small", { file_size = 1024 * 1024 }))
        assert.equal(0, r.exit_code)
        assert.is_nil(r.limit)
    end)

    it("bytes of output, truncating what is kept #unpriv", function()
        local r = assert(s:exec("yes llmbox", { output = 10000, timeout = 20 }))
        assert.equal("output", r.limit)
        assert.is_true(r.truncated)
        assert.equal(10000, #r.stdout)
        assert.is_false(r.timed_out)
    end)

    it("workspace size #unpriv", function()
        local small = assert(llmbox.session({ lang = "python", policy = "strict" }))
        -- many files, each below the file size limit, until the workspace is full
        local r = assert(small:exec("for i in 1 2 3 4 5 6 7 8 9 10; do head -c 10000000 /dev/zero > /sandbox/f$i || exit 9; done"))
        assert.equal(9, r.exit_code)
        assert.matches("No space left on device", r.stderr)
        -- /tmp is bounded too
        r = assert(small:exec("for i in $(seq 1 40); do head -c 10000000 /dev/zero > /tmp/f$i || exit 9; done"))
        small:close()
        assert.equal(9, r.exit_code)
    end)

    it("refuses a limit above the policy's instead of granting it #unpriv", function()
        local r, err = s:run("print(1)", { timeout = 100000 })
        assert.is_nil(r)
        assert.matches("exceeds the limit of policy", err)
    end)
end)

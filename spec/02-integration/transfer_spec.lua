-- copy_to / copy_from: files and directories, never following a link out of the workspace, and
-- never losing what was at the destination.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local function tmpdir()
    local d = helpers.tmppath()
    assert(os.execute("mkdir -p " .. q(d)) == 0)
    return d
end

local function tree(dir) -- "relative/path:content" lines of every regular file, sorted
    local p = io.popen("cd " .. q(dir) .. " && find . -type f | sort | while read f; do printf '%s:%s\\n' \"$f\" \"$(cat \"$f\")\"; done")
    local out = p:read("*a")
    p:close()
    return out
end

describe("file transfer #conformance #unpriv", function()
    local s
    before_each(function() s = assert(llmbox.session({ lang = "python", policy = "spec/fixtures/policies/default-nochecks.lua" })) end)
    after_each(function() s:close() end)

    it("copies a directory tree in and out, recursively", function()
        local src = tmpdir()
        assert(os.execute(("cd %s && mkdir -p a/b/c && echo one > top.txt && echo two > a/b/c/deep.txt && printf 'x\\0y' > a/bin && chmod 700 a/b"):format(q(src))) == 0)
        assert(s:copy_to(src, "/sandbox/in"))
        local r = assert(s:exec("cd /sandbox/in && find . | sort && cat a/b/c/deep.txt && stat -c %a a/b"))
        assert.equal(".\n./a\n./a/b\n./a/b/c\n./a/b/c/deep.txt\n./a/bin\n./top.txt\ntwo\n700\n", r.stdout)
        assert(s:exec("cp -r /sandbox/in /sandbox/out && echo three > /sandbox/out/new.txt"))
        local dst = tmpdir() .. "/copy"
        assert(s:copy_from("/sandbox/out", dst))
        assert.equal(tree(src) .. "", (tree(dst):gsub("%./new%.txt:three\n", "")))
        assert.matches("./new.txt:three", tree(dst), 1, true)
        os.execute("rm -rf " .. q(src) .. " " .. q(dst))
    end)

    it("makes the directories on the way to a destination, as an upload to data/x needs", function()
        local src = helpers.write(helpers.tmppath(), "payload")
        finally(function() os.remove(src) end)
        assert(s:copy_to(src, "data/deep/x.txt"))
        local r = assert(s:exec("cat /sandbox/data/deep/x.txt; echo; stat -c %u /sandbox/data/deep"))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("payload\n1000\n", r.stdout) -- the sandbox user's directories
    end)

    it("collects a run's results in memory: files and names below the directory, links skipped", function()
        assert(s:exec("mkdir -p /sandbox/res/sub && printf 'x\\0y' > /sandbox/res/bin && echo deep > /sandbox/res/sub/d.txt"
            .. " && ln -s /etc/passwd /sandbox/res/link && ln -s .. /sandbox/res/up"))
        local files = assert(s.handle:collect("/sandbox/res", 0))
        table.sort(files, function(a, b) return a.name < b.name end)
        assert.equal(2, #files)
        assert.same({ name = "bin", size = 3, data = "x\0y" }, files[1])
        assert.same({ name = "sub/d.txt", size = 5, data = "deep\n" }, files[2])
        -- a single file comes back under the empty name (the session names it)
        assert.same({ { name = "", size = 3, data = "x\0y" } }, assert(s.handle:collect("/sandbox/res/bin")))
        local none, err, code = s.handle:collect("/sandbox/absent")
        assert.is_nil(none)
        assert.equal("ENOENT", code, err)
        none, err = s.handle:collect("/sandbox/res", 4)
        assert.is_nil(none)
        assert.matches("larger than the limit of 4 bytes", err, 1, true)
        none, err = s.handle:collect("/etc")
        assert.is_nil(none)
        assert.matches("/etc", err, 1, true)
    end)

    it("never follows symlinks planted in the workspace, and says what it skipped", function()
        local secret = helpers.write(helpers.tmpname(), "HOST-SECRET-" .. math.random(1e9))
        assert(s:exec("mkdir -p /sandbox/d/sub && echo ok > /sandbox/d/real.txt && "
            .. "ln -s /etc/passwd /sandbox/d/passwd && ln -s / /sandbox/d/root && "
            .. "ln -s ../../.. /sandbox/d/sub/up && ln -s " .. q(secret) .. " /sandbox/d/secret && mkfifo /sandbox/d/fifo"))
        local dst = tmpdir() .. "/d"
        local ok, skipped = s:copy_from("/sandbox/d", dst)
        assert.is_true(ok)
        table.sort(skipped)
        assert.same({ "llmbox/fifo", "llmbox/passwd", "llmbox/root", "llmbox/secret", "llmbox/sub/up" }, skipped)
        assert.equal("./real.txt:ok\n", tree(dst))
        local p = io.popen("find " .. q(dst) .. " -type l | wc -l")
        assert.equal("0", p:read("*l"))
        p:close()
        -- the link itself as the source, and a path through a linked directory
        local ok2, err = s:copy_from("/sandbox/d/passwd", dst .. "/x")
        assert.is_nil(ok2)
        assert.matches("symlinks", err)
        ok2 = s:copy_from("/sandbox/d/root/etc/passwd", dst .. "/x")
        assert.is_nil(ok2)
        -- control: a regular file next to them copies
        assert(s:copy_from("/sandbox/d/real.txt", dst .. "/x"))
        assert.equal("ok\n", helpers.read(dst .. "/x"))
        os.remove(secret)
        os.execute("rm -rf " .. q(dst))
    end)

    it("refuses to write through a symlink or .. into the workspace", function()
        local src = tmpdir()
        helpers.write(src .. "/f", "data")
        assert(s:exec("ln -s /tmp /sandbox/tmplink && ln -s /etc /sandbox/etclink"))
        local ok, err = s:copy_to(src .. "/f", "/sandbox/tmplink/f")
        assert.is_nil(ok); assert.matches("symlinks", err)
        ok, err = s:copy_to(src, "/sandbox/etclink")
        assert.is_nil(ok); assert.matches("symlinks", err)
        ok, err = s:copy_to(src .. "/f", "../f")
        assert.is_nil(ok); assert.matches("%.%.", err)
        local r = assert(s:exec("ls -A /tmp /etc | grep -cx f"))
        assert.equal("0\n", r.stdout) -- nothing arrived behind the links
        os.execute("rm -rf " .. q(src))
    end)

    it("survives a directory swapped for a symlink while it copies", function()
        -- the program swaps /sandbox/race/x between a directory and a symlink to / as fast as it
        -- can; copies run from the output callback, i.e. while it is running
        local dst = tmpdir()
        local attempts, copied, leaked = 0, 0, false
        local r = assert(s:run([[
import os, sys, time
os.makedirs('/sandbox/race/x/inner', exist_ok=True)
open('/sandbox/race/x/inner/f', 'w').write('fine')
print('ready', flush=True)
end = time.time() + 3
while time.time() < end:
    os.rename('/sandbox/race/x', '/sandbox/race/x.d'); os.symlink('/', '/sandbox/race/x')
    os.unlink('/sandbox/race/x'); os.rename('/sandbox/race/x.d', '/sandbox/race/x')
]], { timeout = 20, on_stdout = function()
            if attempts > 0 then return end -- once, while the program runs
            for i = 1, 30 do
                attempts = attempts + 1
                local target = dst .. "/c" .. i
                if s:copy_from("/sandbox/race", target) then
                    copied = copied + 1
                    local p = io.popen("find " .. q(target) .. " -name usr -o -name etc -o -type l | head -1")
                    if p:read("*l") then leaked = true end
                    p:close()
                end
            end
        end }))
        assert.equal(0, r.exit_code)
        assert.equal(30, attempts)
        assert.is_false(leaked)
        assert.is_true(copied > 0, "no copy succeeded at all")
        os.execute("rm -rf " .. q(dst))
    end)

    it("copies only beneath /sandbox: the jail's /tmp (where llmbox keeps the code) is refused", function()
        assert(s:exec("mkdir -p /tmp/d && echo t > /tmp/d/f && echo w > /sandbox/f"))
        local dst = helpers.write(helpers.tmpname(), "precious")
        for _, path in ipairs({ "/tmp/d/f", "/tmp/d", "/tmp/llmbox", "/dev/shm/x", "/sandbox", "/" }) do
            local ok, err = s:copy_from(path, dst)
            assert.is_nil(ok, path)
            assert.matches("outside the workspace: use a path under /sandbox/", err, 1, true)
            assert.matches(path, err, 1, true)
            assert.equal("precious", helpers.read(dst), path)
            ok, err = s:copy_to(dst, path)
            assert.is_nil(ok, path)
            assert.matches("outside the workspace", err, 1, true)
        end
        -- a run's artifacts come from the workspace too, refused before the code runs
        assert.error_matches(function()
            s:run("open('/tmp/d/g', 'w').write('x')", { artifacts = "/tmp/d" })
        end, "artifacts: path /tmp/d is outside the workspace", 1, true)
        assert.equal("f\n", assert(s:exec("ls /tmp/d")).stdout) -- the code did not run
        -- controls: the workspace, by absolute and by relative path
        assert(s:copy_from("/sandbox/f", dst))
        assert.equal("w\n", helpers.read(dst))
        assert(s:copy_from("f", dst))
        os.remove(dst)
    end)

    it("never loses what was at the destination when a copy fails", function()
        local dst = helpers.write(helpers.tmpname(), "precious")
        local ok, err = s:copy_from("/sandbox/missing.txt", dst)
        assert.is_nil(ok); assert.matches("missing.txt", err, 1, true)
        assert.equal("precious", helpers.read(dst))
        assert(s:exec("head -c 100000 /dev/zero > /sandbox/big"))
        ok, err = s:copy_from("/sandbox/big", dst, 1000) -- over max_bytes
        assert.is_nil(ok)
        assert.matches("larger than the limit", err)
        assert.equal("precious", helpers.read(dst))
        local dir, base = dst:match("^(.*)/([^/]+)$")
        local p = io.popen("ls -a " .. q(dir) .. " | grep -cF " .. q("." .. base .. ".llmbox-"))
        assert.equal("0", p:read("*l")) -- no temporary file left behind
        p:close()
        -- a device as the destination is written in place and not replaced
        assert(s:exec("echo hi > /sandbox/small"))
        assert(s:copy_from("/sandbox/small", "/dev/null"))
        local f = io.open("/dev/null", "w")
        assert.is_truthy(f)
        f:close()
        -- control: a good copy replaces the file
        assert(s:copy_from("/sandbox/small", dst))
        assert.equal("hi\n", helpers.read(dst))
        os.remove(dst)
    end)

    it("copies to and from bare file and directory names, relative to the current directory", function()
        -- the README's own example: copy_from("/sandbox/output.txt", "output.txt")
        local ffi = require "ffi"
        pcall(ffi.cdef, "int chdir(const char *path);")
        local cwd, dir = helpers.root, tmpdir()
        assert.equal(0, ffi.C.chdir(dir))
        finally(function()
            ffi.C.chdir(cwd)
            os.execute("rm -rf " .. q(dir))
        end)
        helpers.write("input.txt", "in")
        assert(os.execute("mkdir indir && echo deep > indir/f") == 0)
        assert(s:copy_to("input.txt", "in.txt"))
        assert(s:copy_to("indir", "indir"))
        assert(s:exec("cat /sandbox/in.txt > /sandbox/output.txt && cp -r /sandbox/indir /sandbox/outdir"))
        assert(s:copy_from("/sandbox/output.txt", "output.txt"))
        assert.equal("in", helpers.read("output.txt"))
        assert(s:copy_from("outdir", "outdir")) -- a directory, to a name that does not exist yet
        assert.equal("deep\n", helpers.read("outdir/f"))
        assert(s:copy_from("/sandbox/output.txt", "output.txt")) -- and over an existing file
        assert.equal("in", helpers.read("output.txt"))
        assert.equal(".\n..\nindir\ninput.txt\noutdir\noutput.txt\n", (function()
            local p = io.popen("ls -a")
            local out = p:read("*a")
            p:close()
            return out
        end)()) -- and no temporary file left behind
    end)
end)

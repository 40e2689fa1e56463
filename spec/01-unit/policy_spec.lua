-- llmbox.policy: the shipped presets, inheritance, the search path, and the errors an operator
-- sees for a broken policy file.
local policy = require "llmbox.policy"
local helpers = require "spec.helpers"
local ffi = require "ffi"

pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
pcall(ffi.cdef, "int unsetenv(const char *name);")

local function mktemp_dir()
    local p = helpers.tmppath()
    assert(os.execute("mkdir -p '" .. p .. "'"))
    return p
end

local function write(dir, name, text)
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
end

local function rmrf(dir)
    if dir and dir:match("^/tmp/") then
        os.execute("rm -rf '" .. dir .. "'")
    end
end

local M = 1024 * 1024

describe("shipped policies", function()
    local default, strict, permissive

    setup(function()
        default = assert(policy.load("default"))
        strict = assert(policy.load("strict"))
        permissive = assert(policy.load("permissive"))
    end)

    it("default has the documented limits", function()
        assert.same({
            timeout = 30, cpu = 30, memory = 512 * M, processes = 64, open_files = 256,
            file_size = 64 * M, output = 1 * M, workspace = 256 * M, tmp = 64 * M, cgroup = "auto",
        }, default.limits)
    end)

    it("default has exactly the contract's top-level keys", function()
        local keys = {}
        for k in pairs(default) do keys[#keys + 1] = k end
        table.sort(keys)
        assert.same({ "checks", "description", "env", "filesystem", "kubernetes", "libraries", "limits", "name",
            "network", "path", "syscalls" }, keys)
        assert.equal("default", default.name)
        assert.matches("/policies/default%.lua$", default.path)
        assert.is_true(#default.description > 10)
    end)

    it("default mounts /usr and a few /etc files read-only, never /etc or /home", function()
        local ro = default.filesystem.ro
        assert.same({ src = "/usr", dst = "/usr", optional = false }, ro[1])
        local by_src = {}
        for _, m in ipairs(ro) do
            assert.equal(m.src, m.dst)
            by_src[m.src] = m
            assert.not_equal("/etc", m.src)
            assert.not_equal("/home", m.src)
            assert.is_nil(m.src:match("^/home"))
        end
        assert.is_true(by_src["/etc/localtime"].optional)
        assert.is_true(by_src["/etc/ssl/certs"].optional)
        assert.is_truthy(by_src["/etc/ld.so.cache"])
        assert.is_truthy(by_src["/etc/alternatives"])
    end)

    it("default: loopback-only network, a fixed environment", function()
        assert.same({ mode = "none", allow = {} }, default.network)
        assert.same({ PATH = "/usr/local/bin:/usr/bin:/bin", HOME = "/sandbox", LANG = "C.UTF-8" },
            default.env.set)
        assert.same({ "TZ" }, default.env.pass)
    end)

    it("default refuses the documented syscalls", function()
        local s = default.syscalls
        assert.equal("allow", s.default)
        assert.equal("errno", s.action)
        assert.is_true(s.deny_namespace_clone)
        assert.same({ "TIOCSTI", "TIOCLINUX" }, s.deny_ioctls)
        local deny = {}
        for _, n in ipairs(s.deny) do deny[n] = true end
        for n in ([[mount umount2 pivot_root chroot unshare setns ptrace process_vm_readv
            process_vm_writev bpf perf_event_open keyctl add_key request_key userfaultfd io_uring_setup
            io_uring_enter io_uring_register kexec_load kexec_file_load init_module finit_module
            delete_module reboot swapon swapoff acct settimeofday clock_settime clock_adjtime adjtimex
            syslog open_by_handle_at name_to_handle_at quotactl fanotify_init lookup_dcookie vhangup
            iopl ioperm uselib personality mount_setattr move_mount open_tree fsopen fsmount fsconfig
            fspick pidfd_getfd]]):gmatch("%S+") do
            assert.is_true(deny[n], n .. " is not in default's deny list")
        end
    end)

    it("every syscall name in the presets exists on x86_64", function()
        local f = io.open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
        if not f then
            pending("no x86_64 unistd_64.h on this machine")
            return
        end
        local header = f:read("*a")
        f:close()
        for _, p in ipairs({ default, strict, permissive }) do
            for _, list in ipairs({ p.syscalls.deny, p.syscalls.allow }) do
                for _, n in ipairs(list) do
                    assert.is_truthy(header:find("#define __NR_" .. n .. " ", 1, true),
                        p.name .. ": unknown syscall " .. n)
                end
            end
        end
    end)

    it("default checks: enforce at high, with python and shell rules", function()
        local c = default.checks
        assert.equal("enforce", c.mode)
        assert.equal("high", c.threshold)
        local mods = {}
        for _, m in ipairs(c.rules.python.restricted_modules) do mods[m.name] = m.severity end
        assert.equal("high", mods.subprocess)
        assert.equal("high", mods.ctypes)
        assert.equal("medium", mods.socket)
        assert.is_nil(mods.os) -- `import os; os.path.join` must stay quiet
        local ids = {}
        for _, r in ipairs(c.rules.python.patterns) do ids[r.id] = r.severity end
        assert.equal("high", ids["os-system"])
        assert.equal("high", ids["os-popen"])
        assert.equal("medium", ids.eval)
        assert.equal("medium", ids.exec)
        assert.equal("medium", ids["dunder-import"])
        local sh = {}
        for _, r in ipairs(c.rules.shell.patterns) do sh[r.id] = r.severity end
        assert.equal("high", sh["rm-root"])
        assert.equal("high", sh["download-and-run"])
        assert.equal("high", sh["dev-tcp"])
    end)

    it("strict tightens limits, switches to an allow-list and a medium threshold", function()
        assert.same({
            timeout = 10, cpu = 10, memory = 256 * M, processes = 32, open_files = 256,
            file_size = 64 * M, output = 256 * 1024, workspace = 64 * M, tmp = 64 * M,
            cgroup = "auto",
        }, strict.limits)
        assert.equal("strict", strict.name)
        assert.equal("deny", strict.syscalls.default)
        assert.equal("errno", strict.syscalls.action)
        assert.is_true(strict.syscalls.deny_namespace_clone)
        local allow = {}
        for _, n in ipairs(strict.syscalls.allow) do allow[n] = true end
        for n in ([[read write openat close mmap mprotect munmap brk futex clone clone3 execve
            exit_group wait4 pipe2 rt_sigaction rt_sigprocmask rt_sigreturn poll epoll_wait
            getrandom clock_gettime socketpair newfstatat statx getdents64 rseq prlimit64
            set_robust_list set_tid_address arch_prctl ioctl fcntl dup2 lseek]]):gmatch("%S+") do
            assert.is_true(allow[n], n .. " missing from strict's allow-list")
        end
        for _, n in ipairs(default.syscalls.deny) do
            assert.is_nil(allow[n], n .. " is refused by default but allowed by strict")
        end
        assert.equal("enforce", strict.checks.mode)
        assert.equal("medium", strict.checks.threshold)
        -- inherited, not restated
        assert.same(default.filesystem, strict.filesystem)
        assert.same(default.env, strict.env)
        assert.same(default.network, strict.network)
        assert.same(default.checks.rules, strict.checks.rules)
        assert.not_equal(default.description, strict.description)
    end)

    it("permissive grows limits and warns, but keeps the jail", function()
        assert.same({
            timeout = 300, cpu = 300, memory = 2048 * M, processes = 256, open_files = 256,
            file_size = 64 * M, output = 16 * M, workspace = 1024 * M, tmp = 64 * M,
            cgroup = "auto",
        }, permissive.limits)
        assert.equal("warn", permissive.checks.mode)
        assert.same({ mode = "none", allow = {} }, permissive.network)
        assert.same(default.syscalls, permissive.syscalls)
        assert.same(default.filesystem, permissive.filesystem)
    end)

    it("a policy that says nothing is as tight as default", function()
        local dir = mktemp_dir()
        finally(function() rmrf(dir) end)
        local empty = assert(policy.load(write(dir, "empty.lua", "return {}")))
        for _, k in ipairs({ "limits", "filesystem", "network", "env", "syscalls" }) do
            assert.same(default[k], empty[k], k)
        end
        assert.equal("", empty.description)
        assert.equal("enforce", empty.checks.mode)
    end)

    it("list() shows every shipped policy with its description, sorted", function()
        local names = {}
        for _, e in ipairs(policy.list()) do
            names[#names + 1] = e.name
            assert.matches("/" .. e.name .. "%.lua$", e.path)
            assert.is_true(#e.description > 10, e.name)
        end
        local seen = {}
        for _, n in ipairs(names) do seen[n] = true end
        assert.is_true(seen.default and seen.strict and seen.permissive)
        local sorted = { unpack(names) }
        table.sort(sorted)
        assert.same(sorted, names)
    end)
end)

describe("policy search path", function()
    local dir1, dir2

    before_each(function()
        dir1, dir2 = mktemp_dir(), mktemp_dir()
    end)

    after_each(function()
        ffi.C.unsetenv("LLMBOX_POLICY_PATH")
        rmrf(dir1)
        rmrf(dir2)
    end)

    it("dirs() puts LLMBOX_POLICY_PATH first, skips missing and repeated dirs", function()
        local dirs = policy.dirs({ LLMBOX_POLICY_PATH = dir1 .. ":/nonexistent/x::" .. dir2 .. ":" .. dir1 })
        assert.equal(dir1, dirs[1])
        assert.equal(dir2, dirs[2])
        assert.matches("/policies$", dirs[3])
        assert.is_nil(dirs[4] and dirs[4] == dirs[3] or nil)
        for _, d in ipairs(dirs) do assert.not_equal("/nonexistent/x", d) end
    end)

    it("dirs() takes a lookup function and defaults to the process environment", function()
        local dirs = policy.dirs(function(k) return k == "LLMBOX_POLICY_PATH" and dir2 or nil end)
        assert.equal(dir2, dirs[1])
        ffi.C.setenv("LLMBOX_POLICY_PATH", dir1, 1)
        assert.equal(dir1, policy.dirs()[1])
        assert.has_error(function() policy.dirs(42) end)
    end)

    it("load() finds names in LLMBOX_POLICY_PATH, first directory first", function()
        write(dir1, "team.lua", 'return { description = "from dir1" }')
        write(dir2, "team.lua", 'return { description = "from dir2" }')
        write(dir2, "other.lua", 'return { description = "only in dir2" }')
        ffi.C.setenv("LLMBOX_POLICY_PATH", dir1 .. ":" .. dir2, 1)
        local p = assert(policy.load("team"))
        assert.equal("from dir1", p.description)
        assert.equal(dir1 .. "/team.lua", p.path)
        assert.equal("only in dir2", assert(policy.load("other")).description)
        local listed = {}
        for _, e in ipairs(policy.list()) do listed[e.name] = e end
        assert.equal("from dir1", listed.team.description)
        assert.equal("only in dir2", listed.other.description)
        assert.truthy(listed.default)
    end)

    it("a default.lua early in the path may extend the shipped default", function()
        write(dir1, "default.lua", 'return { extends = "default", limits = { timeout = "5s" } }')
        ffi.C.setenv("LLMBOX_POLICY_PATH", dir1, 1)
        local p = assert(policy.load("default"))
        assert.equal(dir1 .. "/default.lua", p.path)
        assert.equal(5, p.limits.timeout)
        assert.equal(512 * M, p.limits.memory)
    end)

    it("a missing name says where it looked and what exists", function()
        ffi.C.setenv("LLMBOX_POLICY_PATH", dir1, 1)
        write(dir1, "mine.lua", "return {}")
        local p, err = policy.load("stritc")
        assert.is_nil(p)
        assert.matches('^no policy named "stritc" %(did you mean "strict"%?%); searched ', err)
        assert.matches(dir1, err, 1, true)
        assert.matches("/policies", err, 1, true)
        assert.matches("available: default, kubernetes, mine, permissive, strict", err, 1, true)
    end)

    it("a missing path is reported as such", function()
        local p, err = policy.load(dir1 .. "/nope.lua")
        assert.is_nil(p)
        assert.equal("policy file not found: " .. dir1 .. "/nope.lua", err)
    end)

    it("load() with a non-string is a caller mistake", function()
        assert.has_error(function() policy.load(42) end,
            "policy.load: expected a policy name or path (string), got number")
    end)
end)

describe("broken policy files", function()
    local dir

    before_each(function() dir = mktemp_dir() end)
    after_each(function() rmrf(dir) end)

    local function load_text(name, text)
        local path = write(dir, name .. ".lua", text)
        local p, err = policy.load(path)
        assert.is_nil(p)
        assert.is_string(err)
        return err, 'policy "' .. name .. '" (' .. path .. "): "
    end

    it("unknown key: names the file and the key, suggests the fix, lists allowed keys", function()
        local err, prefix = load_text("typo", 'return { limits = { memroy = "1G" } }')
        assert.equal(prefix .. 'limits.memroy: unknown key (did you mean "memory"?); allowed keys in '
            .. "limits: cgroup, cpu, cpus, file_size, memory, open_files, output, processes, timeout, tmp, workspace", err)
        err = load_text("top", "return { limit = {} }")
        assert.matches('limit: unknown key (did you mean "limits"?); allowed keys: checks, description, '
            .. "env, extends, filesystem, kubernetes, libraries, limits, network, syscalls", err, 1, true)
    end)

    it("wrong type", function()
        local err, prefix = load_text("wt", "return { limits = { memory = true } }")
        assert.equal(prefix .. 'limits.memory: expected a size (bytes, or a string such as "512M"), got boolean', err)
        err, prefix = load_text("wt2", 'return { limits = { processes = "many" } }')
        assert.equal(prefix .. 'limits.processes: expected a whole number, got string "many"', err)
        err, prefix = load_text("wt3", 'return { env = { pass = "TZ" } }')
        assert.equal(prefix .. 'env.pass: expected a list (a table such as { "a", "b" }), got string "TZ"', err)
    end)

    it("bad size string and out-of-range values", function()
        local err, prefix = load_text("bs", 'return { limits = { workspace = "256Q" } }')
        assert.equal(prefix .. 'limits.workspace: expected a size (bytes, or a string such as "512M"), '
            .. 'got string "256Q"', err)
        err, prefix = load_text("zero", "return { limits = { tmp = 0 } }")
        assert.equal(prefix .. "limits.tmp: must be at least 64K, got number 0", err)
        err, prefix = load_text("fds", "return { limits = { open_files = 3 } }")
        assert.equal(prefix .. "limits.open_files: must be at least 16, got number 3", err)
        err, prefix = load_text("dur", 'return { limits = { timeout = "forever" } }')
        assert.matches("^" .. prefix:gsub("%p", "%%%0") .. "limits%.timeout: expected a duration", err)
    end)

    it("bad enum values say what is allowed", function()
        local err, prefix = load_text("net", 'return { network = { mode = "host" } }')
        assert.equal(prefix .. 'network.mode: expected one of "none", "egress", got string "host"; "none" '
            .. '(loopback only) or "egress" (outbound only, never the host)', err)
        -- egress's allow list: each entry checked, and only with mode = "egress"
        err, prefix = load_text("allow", 'return { network = { mode = "egress", allow = { "pypi.org:443", "1.2.3.4:0" } } }')
        assert.equal(prefix .. 'network: network.allow[2]: "1.2.3.4:0": the port must be 1 to 65535', err)
        err, prefix = load_text("allow2", 'return { network = { allow = { "pypi.org:443" } } }')
        assert.equal(prefix .. 'network: allow lists where egress may go: set mode = "egress" too', err)
        err, prefix = load_text("mode", 'return { checks = { mode = "enforcing" } }')
        assert.equal(prefix .. 'checks.mode: expected one of "enforce", "warn", "off", got string '
            .. '"enforcing" (did you mean "enforce"?)', err)
        err, prefix = load_text("ioctl", 'return { syscalls = { deny_ioctls = { "TIOCSTI", "FIONREAD" } } }')
        assert.equal(prefix .. 'syscalls.deny_ioctls[2]: expected one of "TIOCSTI", "TIOCLINUX", "TIOCSETD", '
            .. '"TIOCCONS", got string "FIONREAD"', err)
    end)

    it("syscall names must be plain identifiers", function()
        local err, prefix = load_text("sc", 'return { syscalls = { deny = { "mount", "Mount(2)" } } }')
        assert.equal(prefix .. 'syscalls.deny[2]: expected a syscall name such as "mount" (lower-case '
            .. 'letters, digits and _), got string "Mount(2)"', err)
    end)

    it("an allow-list policy with nothing allowed is refused", function()
        local err, prefix = load_text("deny", 'return { syscalls = { default = "deny" } }')
        assert.equal(prefix .. 'syscalls: default is "deny" but allow is empty, so no program could start; '
            .. 'list the syscalls programs need in allow, or set default = "allow"', err)
    end)

    it("mount entries must be absolute, without '..', and not /", function()
        local err, prefix = load_text("rel", 'return { filesystem = { ro = { "usr" } } }')
        assert.equal(prefix .. 'filesystem.ro[1].src: expected an absolute path such as "/usr", got string "usr"', err)
        err, prefix = load_text("dots", 'return { filesystem = { ro = { "/usr/../etc" } } }')
        assert.equal(prefix .. 'filesystem.ro[1].src: must not contain "." or ".." components, '
            .. 'got "/usr/../etc"', err)
        err, prefix = load_text("root", 'return { filesystem = { ro = { "/usr", "/" } } }')
        assert.matches("^" .. prefix:gsub("%p", "%%%0") .. 'filesystem%.ro%[2%]: binding "/" would expose', err)
        err, prefix = load_text("nosrc", "return { filesystem = { ro = { { dst = \"/x\" } } } }")
        assert.equal(prefix .. "filesystem.ro[1].src: is required (a string)", err)
    end)

    it("a bad Lua pattern in a rule is caught at load time", function()
        local err, prefix = load_text("pat", [[return { checks = { rules = { python = {
            patterns = { { id = "x", pattern = "os.system(" } } } } } }]])
        assert.equal(prefix .. 'checks.rules.python.patterns[1].pattern: invalid Lua pattern "os.system(": '
            .. "unfinished capture (escape magic characters ( ) . % + - * ? [ ] ^ $ with %)", err)
        err = load_text("pat2", [[return { checks = { rules = { ["*"] = {
            patterns = { { id = "y", patterns = { "ok", "[a-" } } } } } } }]])
        assert.matches('checks.rules["*"].patterns[1].patterns[2]: invalid Lua pattern "[a-": missing \']\'',
            err, 1, true)
        err = load_text("pat3", [[return { checks = { rules = { python = {
            patterns = { { id = "z" } } } } } }]])
        assert.matches('checks.rules.python.patterns[1]: needs exactly one of "pattern"', err, 1, true)
    end)

    it("a pattern that could make checking quadratic is refused at load time", function()
        local err, prefix = load_text("slow", [[return { checks = { rules = { python = {
            patterns = { { id = "x", pattern = "x[%w%s]*y" } } } } } }]])
        assert.equal(prefix .. 'checks.rules.python.patterns[1].pattern: pattern "x[%w%s]*y" could take time '
            .. "quadratic in the code's length: \"[%w%s]*\" can also match \"x\", which starts the pattern, so "
            .. "a long run of it is read again from every start; narrow the class, start the pattern with a "
            .. "frontier such as %f[%w_] that the class stays inside, or bridge the parts with [^...]* (searched "
            .. "part by part)", err)
        err = load_text("slow2", [[return { checks = { rules = { shell = {
            patterns = { { id = "y", patterns = { "ok", "a%s*%s*b" } } } } } } }]])
        assert.matches('"%s*" is followed by "%s*", and both can match \\t', err, 1, true)
        -- the same idea written so that it stays linear loads fine
        assert(policy.load(write(dir, "fast.lua", [[return { checks = { rules = { python = {
            patterns = { { id = "x", patterns = { "%f[%w_]x[%w_]*y", "x[^\n]*y", "AKIA%u+" } } } } } } }]])))
    end)

    it("a syntax error names the file and the line", function()
        local err, prefix = load_text("syntax", "return {\n  limits = { memory = '1G' \n  oops\n}")
        assert.equal(1, select(2, err:gsub(prefix:gsub("%p", "%%%0"), "")))
        assert.matches("syntax error: ", err, 1, true)
        assert.matches("syntax.lua:3:", err, 1, true)
    end)

    it("a file that returns no table", function()
        local err, prefix = load_text("nothing", "local x = 1")
        assert.equal(prefix .. "the file must return a table such as return { description = \"...\", "
            .. 'limits = { memory = "512M" } }, got nil', err)
        err = load_text("str", 'return "default"')
        assert.matches('got string "default"$', err)
    end)

    it("a file that raises", function()
        local err, prefix = load_text("raise", 'error("set LLMBOX_X first")')
        assert.matches("^" .. prefix:gsub("%p", "%%%0") .. "the file raised an error: .*set LLMBOX_X first", err)
    end)

    it("an endless loop fails cleanly instead of hanging", function()
        local saved = policy.load_timeout
        policy.load_timeout = 0.2
        finally(function() policy.load_timeout = saved end)
        local t0 = os.clock()
        local err, prefix = load_text("loop", "while true do end")
        assert.equal(prefix .. "the file did not finish within 0.2s (an endless loop?)", err)
        err = load_text("loop2", "local function f(n) return f(n + 1) end return f(1)")
        assert.matches("did not finish within", err, 1, true)
        err = load_text("loop3", "local t = {} for i = 1, 1e12 do t[1] = i end")
        assert.matches("did not finish within", err, 1, true)
        assert.is_true(os.clock() - t0 < 3)
        -- the hook is gone afterwards: ordinary code is not interrupted
        assert.is_nil(debug.gethook())
        local x = 0
        for i = 1, 3e6 do x = x + i end
        assert.is_true(x > 0)
    end)

    it("policy files cannot reach io, os.execute, require or load", function()
        for _, code in ipairs({
            'io.open("/tmp/x", "w")', 'os.execute("true")', 'require("os")', 'load("return 1")',
            'dofile("/etc/passwd")', "setmetatable({}, {})", "pcall(print)", "coroutine.create(print)",
            'string.dump(print)',
        }) do
            local err = load_text("env", code .. "\nreturn {}")
            assert.matches("the file raised an error: ", err, 1, true)
        end
    end)

    it("policy files can compute values with string, math and os.getenv", function()
        ffi.C.setenv("LLMBOX_SPEC_MEM", "300M", 1)
        local path = write(dir, "computed.lua", [[
            local mem = os.getenv("LLMBOX_SPEC_MEM") or "1G"
            return {
                description = string.format("memory %s, max %d", mem, math.max(1, 2)),
                limits = { memory = mem, processes = tonumber("12") },
            }]])
        local p = assert(policy.load(path))
        assert.equal(300 * M, p.limits.memory)
        assert.equal(12, p.limits.processes)
        assert.equal("memory 300M, max 2", p.description)
        ffi.C.unsetenv("LLMBOX_SPEC_MEM")
    end)
end)

describe("extends", function()
    local dir

    before_each(function() dir = mktemp_dir() end)
    after_each(function() rmrf(dir) end)

    it("merges records, replaces lists, appends with { append = }", function()
        write(dir, "base.lua", [[return {
            description = "base",
            limits = { memory = "1G", timeout = 60 },
            env = { set = { A = "1", B = "2" }, pass = { "TZ", "LANG" } },
            syscalls = { deny = { replace = { "mount", "ptrace" } } },
        }]])
        local path = write(dir, "child.lua", [[return {
            extends = "./base.lua",
            limits = { timeout = 5 },
            env = { set = { B = "two", C = "3" }, pass = { "HOME" } },
            syscalls = { deny = { append = { "bpf" } } },
            filesystem = { ro = { append = { { src = "/opt/data", dst = "/data", optional = true } } } },
        }]])
        local p = assert(policy.load(path))
        assert.equal("child", p.name)
        assert.equal("", p.description) -- never inherited
        assert.equal(1024 * M, p.limits.memory)
        assert.equal(5, p.limits.timeout)
        -- base.lua has no `extends`: it starts from the built-in defaults, whose map it extends
        assert.same({ A = "1", B = "two", C = "3", PATH = "/usr/local/bin:/usr/bin:/bin", HOME = "/sandbox",
            LANG = "C.UTF-8" }, p.env.set)
        assert.same({ "HOME" }, p.env.pass)
        assert.same({ "mount", "ptrace", "bpf" }, p.syscalls.deny)
        local ro = p.filesystem.ro
        assert.same({ src = "/opt/data", dst = "/data", optional = true }, ro[#ro])
        assert.same({ src = "/usr", dst = "/usr", optional = false }, ro[1])
    end)

    it("a list can be emptied by the child", function()
        write(dir, "base.lua", 'return { env = { pass = { "TZ" } } }')
        local p = assert(policy.load(write(dir, "c.lua", 'return { extends = "./base.lua", env = { pass = {} } }')))
        assert.same({}, p.env.pass)
    end)

    it("extends a shipped policy by name", function()
        local p = assert(policy.load(write(dir, "mine.lua", [[return {
            extends = "strict", limits = { timeout = "2s" },
            checks = { rules = { python = { restricted_modules = { append = { "numpy" } } } } },
        }]])))
        assert.equal(2, p.limits.timeout)
        assert.equal(256 * M, p.limits.memory)
        assert.equal("deny", p.syscalls.default)
        local last = p.checks.rules.python.restricted_modules
        assert.same({ name = "numpy", severity = "high" }, last[#last])
        assert.is_true(#last > 5)
    end)

    it("errors in the child name the child file", function()
        local path = write(dir, "bad.lua", 'return { extends = "default", limits = { cpu = "fast" } }')
        local _, err = policy.load(path)
        assert.matches('^policy "bad" %(' .. path:gsub("%p", "%%%0") .. '%): limits%.cpu: expected a duration', err)
    end)

    it("errors in the parent name both files", function()
        local ppath = write(dir, "parent.lua", "return { limits = { memory = false } }")
        local cpath = write(dir, "kid.lua", 'return { extends = "./parent.lua" }')
        local _, err = policy.load(cpath)
        assert.equal('policy "kid" (' .. cpath .. '): extends "./parent.lua": policy "parent" (' .. ppath
            .. '): limits.memory: expected a size (bytes, or a string such as "512M"), got boolean', err)
    end)

    it("detects cycles", function()
        write(dir, "a.lua", 'return { extends = "./b.lua" }')
        write(dir, "b.lua", 'return { extends = "./a.lua" }')
        local _, err = policy.load(dir .. "/a.lua")
        assert.matches('extends "./a.lua" makes a cycle: a -> b -> a; one of these files must stop '
            .. "extending the other", err, 1, true)
        assert.matches('^policy "a" %(', err)
        write(dir, "self.lua", 'return { extends = "./self.lua" }')
        _, err = policy.load(dir .. "/self.lua")
        assert.matches("makes a cycle: self -> self", err, 1, true)
    end)

    it("a missing target says what exists", function()
        local path = write(dir, "orphan.lua", 'return { extends = "defualt" }')
        local _, err = policy.load(path)
        assert.matches('^policy "orphan" %(' .. path:gsub("%p", "%%%0") .. '%): extends "defualt": '
            .. 'no policy named "defualt" %(did you mean "default"%?%); searched .*available: ', err)
        path = write(dir, "orphan2.lua", 'return { extends = "./gone.lua" }')
        _, err = policy.load(path)
        assert.matches('extends "./gone.lua": policy file not found: ' .. dir .. "/./gone.lua", err, 1, true)
    end)

    it("extends must be a string", function()
        local path = write(dir, "ext.lua", "return { extends = { 'default' } }")
        local _, err = policy.load(path)
        assert.matches('extends: expected the name or path of a policy, such as "default", got table', err, 1, true)
    end)
end)

describe("policy.from_table", function()
    it("checks a policy built in code", function()
        local p = assert(policy.from_table({ extends = "default", limits = { memory = "1G" } }, "inline"))
        assert.equal("inline", p.name)
        assert.equal(1024 * M, p.limits.memory)
        local _, err = policy.from_table({ limits = { memroy = 1 } }, "inline")
        assert.matches('^policy "inline": limits%.memroy: unknown key %(did you mean "memory"%?%)', err)
        assert.has_error(function() policy.from_table("x") end)
    end)
end)

describe("loaded policies are reused while their files stay the same", function()
    it("returns equal copies, so a caller's change does not leak into the next load", function()
        local a = assert(policy.load("default"))
        a.limits.memory = 1
        table.insert(a.filesystem.ro, { src = "/home", dst = "/home" })
        local b = assert(policy.load("default"))
        assert.equal(512 * M, b.limits.memory)
        for _, m in ipairs(b.filesystem.ro) do assert.are_not.equal("/home", m.src) end
    end)

    it("reads a policy again when it or a file it extends changed", function()
        local dir = mktemp_dir()
        write(dir, "base.lua", 'return { extends = "default", limits = { timeout = 11 } }')
        local child = write(dir, "child.lua", 'return { extends = "./base.lua", limits = { cpu = 3 } }')
        local p = assert(policy.load(child))
        assert.equal(11, p.limits.timeout)
        assert.equal(3, p.limits.cpu)
        write(dir, "child.lua", 'return { extends = "./base.lua", limits = { cpu = 4 } }')
        assert.equal(4, assert(policy.load(child)).limits.cpu)
        write(dir, "base.lua", 'return { extends = "default", limits = { timeout = 12 } }')
        assert.equal(12, assert(policy.load(child)).limits.timeout)
        write(dir, "base.lua", 'return { limits = { timeout = "soon" } }')
        local bad, err = policy.load(child)
        assert.is_nil(bad)
        assert.matches("timeout", err)
        rmrf(dir)
    end)
end)

describe("inheriting never loosens by accident", function()
    local dir
    local checks = require "llmbox.checks"

    before_each(function() dir = mktemp_dir() end)
    after_each(function() rmrf(dir) end)

    local function load(name, text)
        local path = write(dir, name .. ".lua", text)
        local p, err = policy.load(path)
        return p, err, 'policy "' .. name .. '" (' .. path .. "): "
    end

    local function ids(list)
        local out = {}
        for _, r in ipairs(list) do out[r.id or r.name or r] = r.severity or true end
        return out
    end

    it("a plain restricted_modules list may not drop the parent's modules", function()
        local p, err, prefix = load("mods", [[return { extends = "default",
            checks = { rules = { python = { restricted_modules = { "numpy" } } } } }]])
        assert.is_nil(p)
        assert.equal(prefix .. 'checks.rules.python.restricted_modules: this list leaves out "subprocess", '
            .. '"pty", "ctypes", "cffi", "socket" and 28 more, inherited from policy "default", and a plain '
            .. "list may not drop inherited rules; to add to them write restricted_modules = { append = "
            .. '{ "numpy" } }; to drop some on purpose write restricted_modules = { remove = { "subprocess" } }; '
            .. "to state the whole list write restricted_modules = { replace = { ... } }", err)
    end)

    it("a plain patterns list may not drop the parent's rules", function()
        local p, err, prefix = load("pats", [[return { extends = "strict",
            checks = { rules = { python = { patterns = { { id = "mine", pattern = "xyz" } } } } } }]])
        assert.is_nil(p)
        assert.matches(prefix .. 'checks.rules.python.patterns: this list leaves out "os-system", "os-popen"',
            err, 1, true)
        assert.matches('inherited from policy "strict"', err, 1, true)
        assert.matches("patterns = { append = { ... } }", err, 1, true)
    end)

    it("a plain syscall deny list may not drop the parent's, nor the built-in defaults'", function()
        local p, err, prefix = load("sys", 'return { extends = "default", syscalls = { deny = { "bpf" } } }')
        assert.is_nil(p)
        assert.matches(prefix .. 'syscalls.deny: this list leaves out "mount", "umount2"', err, 1, true)
        assert.matches('deny = { append = { "bpf" } }', err, 1, true)
        -- a file without `extends` starts from the built-in defaults
        p, err, prefix = load("alone", 'return { syscalls = { deny = { "bpf" } } }')
        assert.is_nil(p)
        assert.matches(prefix .. 'syscalls.deny: this list leaves out "mount"', err, 1, true)
        assert.matches("inherited from the built-in defaults", err, 1, true)
        p, err = load("ioctl", 'return { syscalls = { deny_ioctls = { "TIOCSTI" } } }')
        assert.is_nil(p)
        assert.matches('syscalls.deny_ioctls: this list leaves out "TIOCLINUX"', err, 1, true)
    end)

    it("append keeps every inherited rule: `import subprocess` stays refused", function()
        local p = assert(load("app", [[return { extends = "default",
            checks = { rules = { python = { restricted_modules = { append = { "numpy" } } } } },
            syscalls = { deny = { append = { "chown" } } } }]]))
        local mods = ids(p.checks.rules.python.restricted_modules)
        assert.equal("high", mods.subprocess)
        assert.equal("high", mods.numpy)
        assert.is_true(checks.check("import subprocess", "python", p.checks).blocked)
        assert.is_true(checks.check("import numpy", "python", p.checks).blocked)
        local deny = p.syscalls.deny
        assert.equal("chown", deny[#deny])
        assert.equal("mount", deny[1])
    end)

    it("a plain list that keeps every inherited entry may add to it", function()
        local default = assert(policy.load("default"))
        local names = {}
        for _, n in ipairs(default.syscalls.deny) do names[#names + 1] = string.format("%q", n) end
        local p = assert(load("all", 'return { extends = "default", syscalls = { deny = { '
            .. table.concat(names, ", ") .. ', "chown" } } }'))
        assert.equal(#default.syscalls.deny + 1, #p.syscalls.deny)
    end)

    it("remove drops named rules on purpose, and a misspelt name is an error", function()
        local p = assert(load("rm", [[return { extends = "default", checks = { rules = { python = {
            restricted_modules = { remove = { "socket", "requests" } },
            patterns = { remove = { "eval" } } } } } }]]))
        local mods = ids(p.checks.rules.python.restricted_modules)
        assert.is_nil(mods.socket)
        assert.is_nil(mods.requests)
        assert.equal("high", mods.subprocess)
        assert.is_nil(ids(p.checks.rules.python.patterns).eval)
        assert.equal("medium", ids(p.checks.rules.python.patterns).exec)
        local _, err, prefix = load("typo", [[return { extends = "default", checks = { rules = { python = {
            restricted_modules = { remove = { "sockte" } } } } } }]])
        assert.equal(prefix .. 'checks.rules.python.restricted_modules.remove[1]: "sockte" is not in the list '
            .. 'inherited from policy "default" (did you mean "socket"?)', err)
    end)

    it("replace states the whole list; remove + append restates a rule", function()
        local p = assert(load("rep", [[return { extends = "default", checks = { rules = {
            shell = { patterns = { replace = { { id = "only", pattern = "danger" } } } },
            python = { patterns = { remove = { "eval" }, append = {
                { id = "eval", pattern = "%f[%w_.]eval%s*%(", severity = "low" } } } } } } }]]))
        assert.same({ only = "high" }, ids(p.checks.rules.shell.patterns))
        assert.equal("low", ids(p.checks.rules.python.patterns).eval)
        local _, err = load("both", [[return { extends = "default",
            syscalls = { deny = { replace = { "mount" }, append = { "bpf" } } } }]])
        assert.matches("syscalls.deny: replace states the whole list, so it cannot be combined", err, 1, true)
        _, err = load("form", 'return { extends = "default", syscalls = { deny = { apend = { "bpf" } } } }')
        assert.matches('syscalls.deny.apend: unknown key (did you mean "append"?)', err, 1, true)
    end)

    it("a rule restated weaker, in a plain list or by append, is refused", function()
        local _, err, prefix = load("weak", [[return { extends = "default", checks = { rules = { python = {
            restricted_modules = { append = { { name = "subprocess", severity = "low" } } } } } } }]])
        assert.equal(prefix .. 'checks.rules.python.restricted_modules.append: "subprocess" is restated with '
            .. 'severity "low", lower than in policy "default"; to weaken it on purpose remove it first: '
            .. 'restricted_modules = { remove = { "subprocess" }, append = { ... } }', err)
        _, err = load("weak2", [[return { extends = "default", checks = { rules = { python = {
            patterns = { append = { { id = "os-system", pattern = "never matches" } } } } } } }]])
        assert.matches('"os-system" is restated without its pattern "os%.system%s*%(", so it matches less',
            err, 1, true)
        -- the same entry restated stricter is fine
        local p = assert(load("strong", [[return { extends = "default", checks = { rules = { python = {
            restricted_modules = { append = { { name = "socket", severity = "high" } } } } } } }]]))
        assert.equal("high", ids(p.checks.rules.python.restricted_modules).socket)
    end)

    it("lists that grant things may be replaced by a plain list: leaving entries out only tightens", function()
        local p = assert(load("grants", [[return { extends = "default", env = { pass = {} },
            filesystem = { ro = { "/usr" } } }]]))
        assert.same({}, p.env.pass)
        assert.same({ { src = "/usr", dst = "/usr", optional = false } }, p.filesystem.ro)
        p = assert(load("grants2", 'return { extends = "default", filesystem = { ro = { remove = { "/etc/ssl/certs" } } } }'))
        for _, m in ipairs(p.filesystem.ro) do assert.not_equal("/etc/ssl/certs", m.src) end
    end)

    it("entries are checked where the child wrote them", function()
        local _, err, prefix = load("where", 'return { extends = "default", syscalls = { deny = { append = { "bpf", "Bad!" } } } }')
        assert.equal(prefix .. 'syscalls.deny.append[2]: expected a syscall name such as "mount" (lower-case '
            .. 'letters, digits and _), got string "Bad!"', err)
    end)

    it("every shipped and example policy still loads", function()
        for _, name in ipairs({ "default", "strict", "permissive", "examples/policies/classroom.lua",
            "spec/fixtures/policies/default-nochecks.lua", "spec/fixtures/policies/strict-nochecks.lua" }) do
            assert(policy.load(name))
        end
    end)
end)

describe("policy files in YAML or JSON", function()
    local dir

    before_each(function() dir = mktemp_dir() end)
    after_each(function() rmrf(dir) end)

    it("by the file's name: says policies are Lua and shows the same policy in Lua", function()
        local path = write(dir, "mine.yaml", "# team policy\nextends: default\nlimits:\n  memory: 512M\n"
            .. "  timeout: 30\nenv:\n  pass:\n    - TZ\n    - LANG\n")
        local p, err = policy.load(path)
        assert.is_nil(p)
        assert.equal('policy "mine.yaml" (' .. path .. "): policies are Lua files, not YAML, so this file "
            .. "cannot be read. The same policy "
            .. 'in Lua (save it as a .lua file): return { env = { pass = { "TZ", "LANG" } }, extends = "default", '
            .. 'limits = { memory = "512M", timeout = 30 } }', err)
        path = write(dir, "mine.json", '{"extends": "strict", "checks": {"mode": "warn"}}')
        p, err = policy.load(path)
        assert.is_nil(p)
        assert.equal('policy "mine.json" (' .. path .. "): policies are Lua files, not JSON, so this file "
            .. "cannot be read. The same policy "
            .. 'in Lua (save it as a .lua file): return { checks = { mode = "warn" }, extends = "strict" }', err)
    end)

    it("by the text, when a .lua file holds YAML or JSON", function()
        local path = write(dir, "y.lua", "---\nlimits:\n  memory: 1G\n")
        local _, err = policy.load(path)
        assert.matches('not YAML, .*return { limits = { memory = "1G" } }$', err)
        path = write(dir, "j.lua", '{\n  "limits": { "memory": "1G" }\n}\n')
        _, err = policy.load(path)
        assert.matches('not JSON, .*return { limits = { memory = "1G" } }$', err)
        -- YAML beyond what the example understands still gets the message, with a generic example
        path = write(dir, "z.lua", "limits: {memory: 1G}\n")
        _, err = policy.load(path)
        assert.matches('not YAML, .*return { extends = "default", limits = {', err)
        -- a plain Lua syntax error stays one
        path = write(dir, "lua.lua", "return { limits = { memory = '1G' }")
        _, err = policy.load(path)
        assert.matches("syntax error: ", err, 1, true)
    end)

    it("a .yaml name given as a name, not a path, is read as a file too", function()
        local cwd = io.popen("pwd"):read("*l")
        local path = write(cwd, "llmbox-spec-tmp.yml", "checks:\n  mode: off\n")
        finally(function() os.remove(path) end)
        local _, err = policy.load("llmbox-spec-tmp.yml")
        assert.matches('^policy "llmbox%-spec%-tmp%.yml" %(.*%): policies are Lua files, not YAML, .*'
            .. 'return { checks = { mode = "off" } }$', err)
    end)
end)

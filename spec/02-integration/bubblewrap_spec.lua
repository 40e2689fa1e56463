-- The bubblewrap backend (issue 16): bwrap builds the jail from the policy, llmbox holds it and
-- runs in it. The conformance suite (languages, plots, copies, limits, pools, interactive cells,
-- the adversarial corpus) runs on it as on native (spec/run.sh: LLMBOX_CONFORMANCE_BACKENDS);
-- this file has what is the backend's own: the command line, whose the jail is, what is left
-- running, and what happens when bwrap is missing or fails.
local llmbox = require "llmbox"
local backends = require "llmbox.backends"
local bubblewrap = require "llmbox.backends.bubblewrap"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local recipes = require "llmbox.recipes"
local helpers = require "spec.helpers"

local q = helpers.shell_quote
local root = io.open("/proc/self/status"):read("*a"):match("\nUid:%s+(%d+)") == "0"

local function argv_of(opts)
    local pol = assert(policy.load(opts and opts.policy or "default"))
    local spec = assert(plan.sandbox(pol, assert(recipes.get("python")), opts or {}))
    local cfg, err = bubblewrap.command(spec)
    return cfg and cfg.wrap.argv, err, cfg
end

-- pids of this process's children whose program is bwrap
local function bwrap_children()
    local me = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
    local found = {}
    local p = io.popen("ps -o pid=,comm= --ppid " .. me)
    for line in p:lines() do
        local pid, comm = line:match("^%s*(%d+)%s+(%S+)")
        if comm == "bwrap" then found[#found + 1] = pid end
    end
    p:close()
    return found
end

describe("the bubblewrap backend #unpriv", function()
    setup(function()
        local ok, why = bubblewrap.usable()
        assert(ok, "bubblewrap is not usable here (make test installs it): " .. tostring(why))
    end)

    it("is in the registry under its alias, with native's capabilities and layout", function()
        local d = assert(backends.get("bwrap"))
        assert.equal("bubblewrap", d.name)
        assert(backends.check_driver(d))
        local native = assert(backends.get("native"))
        assert.same(native.capabilities, d.capabilities)
        assert.same(native.layout, d.layout)
    end)

    it("builds bwrap's command line from the policy: new namespaces, its paths read-only, sizes, nothing shared", function()
        local argv, err, cfg = argv_of()
        assert(argv, err)
        local line = table.concat(argv, " ")
        assert.matches("^/%S*bwrap ", line)
        for _, want in ipairs({ "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--uid 1000 --gid 1000", "--die-with-parent", "--clearenv", "--cap-drop ALL",
            "--ro-bind /usr /usr", "--perms 0755 --tmpfs /sandbox", "--perms 1777 --tmpfs /tmp",
            "--dev-bind /dev/null /dev/null", "--proc /proc", "--remount-ro /dev", "--remount-ro /" }) do
            assert.matches(" " .. want, line, 1, true)
        end
        -- the sizes are the policy's
        assert.matches("--size " .. cfg.workspace .. " --perms 0755 --tmpfs /sandbox", line, 1, true)
        -- nothing of the host is writable or shared in
        for _, never in ipairs({ "--bind ", "--share-net", "--dev-bind / ", "--cap-add", "--unshare-user-try" }) do
            assert.not_matches(never, line .. " ", 1, true)
        end
        -- the root is made read-only last, after every mount
        assert.equal("/", argv[#argv])
        assert.equal("--remount-ro", argv[#argv - 1])
        -- /etc's files come from llmbox, as on native
        local names = {}
        for _, f in ipairs(cfg.wrap.files) do names[#names + 1] = f.path end
        assert.same({ "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/hostname" }, names)
    end)

    it("refuses what the jail cannot give, naming the backend", function()
        local pol = assert(policy.load("default"))
        local spec = assert(plan.sandbox(pol, assert(recipes.get("python")), {}))
        spec.network = { mode = "host" }
        local cfg, err = bubblewrap.command(spec)
        assert.is_nil(cfg)
        assert.matches('asks for network mode "host"; the bubblewrap backend provides "none" (loopback only) and "egress"',
            err, 1, true)
        spec = assert(plan.sandbox(pol, assert(recipes.get("python")), {}))
        spec.mounts[#spec.mounts + 1] = { src = "/nonexistent/llmbox-path", dst = "/opt/x" }
        cfg, err = bubblewrap.command(spec)
        assert.is_nil(cfg)
        assert.matches("read-only path /nonexistent/llmbox-path is not available on this host", err, 1, true)
        local s
        s, err = llmbox.session({ backend = "bwrap", image = "python:3.12" })
        assert.is_nil(s)
        assert.matches("the bubblewrap backend runs the host's interpreters, or a root filesystem", err, 1, true)
    end)

    it("runs the sandbox user as the host uid the jail is mapped to, never as host root", function()
        local r = assert(llmbox.run("import os\nprint(os.getuid(), os.getgid())\nprint(open('/proc/self/uid_map').read().split())",
            { backend = "bubblewrap" }))
        assert.equal(0, r.exit_code, r.stderr)
        local uid = root and "65534" or io.open("/proc/self/status"):read("*a"):match("\nUid:%s+(%d+)")
        assert.equal("1000 1000\n['1000', '" .. uid .. "', '1']\n", r.stdout)
    end)

    it("keeps a session's workspace across runs and commands", function()
        local s = assert(llmbox.session({ lang = "python", backend = "bubblewrap" }))
        finally(function() s:close() end)
        assert.equal(0, assert(s:run("open('kept', 'w').write('yes')")).exit_code)
        assert.equal("yes", assert(s:run("print(open('kept').read(), end='')")).stdout)
        assert(s:exec({ "sh", "-c", "test -f kept" }).exit_code == 0)
    end)

    it("leaves no bwrap running once a session is open", function()
        local s = assert(llmbox.session({ lang = "python", backend = "bubblewrap" }))
        finally(function() s:close() end)
        assert.same({}, bwrap_children())
        assert.equal(0, assert(s:run("print(1)")).exit_code)
        assert.same({}, bwrap_children())
    end)

    it("says so when bwrap is missing, and passes on what bwrap said when it fails", function()
        local st, _, err = helpers.cli({ "run", "-b", "bwrap", "-c", "print(1)" },
            { env = "env LLMBOX_BWRAP=/nonexistent/bwrap" })
        assert.equal(125, st)
        assert.matches("cannot run /nonexistent/bwrap: No such file or directory", err, 1, true)
        local out
        st, out = helpers.cli({ "backends" }, { env = "env PATH=/nonexistent" })
        assert.equal(0, st)
        assert.matches("bubblewrap %(bwrap%)%s+unusable.-why not: bwrap is not installed %(Debian: apt%-get install bubblewrap", out)
        -- a bwrap that refuses its command line: its own words reach the caller
        local dir = helpers.tmpdir()
        os.execute("chmod 755 " .. q(dir))
        local fake = dir .. "/bwrap"
        helpers.write(fake, "#!/bin/sh\nexec /usr/bin/bwrap --no-such-option \"$@\"\n")
        os.execute("chmod 755 " .. q(fake))
        st, _, err = helpers.cli({ "run", "-b", "bwrap", "-c", "print(1)" }, { env = "env LLMBOX_BWRAP=" .. q(fake) })
        assert.equal(125, st)
        assert.matches("bubblewrap could not build the sandbox (bwrap: exit status 1: bwrap: Unknown option --no-such-option)",
            err, 1, true)
        assert.same({}, bwrap_children())
    end)

    it("runs execute_code through the MCP server with BACKEND=bwrap", function()
        local raw = require "support.mcp.raw"
        local c = raw.start({ BACKEND = "bwrap", LLMBOX_MCP_WARM = "0" })
        finally(function() c:close() end)
        c:init()
        local r = c:request(2, "tools/call", { name = "execute_code",
            arguments = { language = "python", code = "import os\nprint(os.getuid())" } })
        assert.is_table(r.result, r.error and r.error.message)
        local out = r.result.structuredContent
        assert.equal(0, out.exit_code, out.stderr)
        assert.equal("1000\n", out.stdout)
        local _, stderr = c:close()
        assert.matches("backend=bubblewrap", stderr, 1, true)
    end)

    it("runs from the CLI", function()
        local st, out, err = helpers.cli({ "run", "-b", "bubblewrap", "-l", "python", "-c", "print(6 * 7)" })
        assert.equal(0, st, err)
        assert.equal("42\n", out)
        st, out, err = helpers.cli({ "exec", "-b", "bwrap", "--", "sh", "-c", "id -u; hostname" })
        assert.equal(0, st, err)
        assert.equal("1000\nllmbox\n", out)
    end)
end)

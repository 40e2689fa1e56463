-- The nsjail backend (issue 16). Debian 12 has no nsjail package and its sources are not
-- reachable from Debian's, so no real nsjail runs here: these specs check the configuration
-- llmbox generates, and run the driver's side of it (nsjail's three fds, jail-ready sending the
-- namespaces over the socket, errors) with bwrap standing in for nsjail. Real nsjail runs are
-- skipped, saying so, unless one is installed (LLMBOX_NSJAIL or `nsjail` on PATH).
local llmbox = require "llmbox"
local backends = require "llmbox.backends"
local bubblewrap = require "llmbox.backends.bubblewrap"
local nsjail = require "llmbox.backends.nsjail"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local recipes = require "llmbox.recipes"
local helpers = require "spec.helpers"

local q = helpers.shell_quote

local function spec_for(name)
    return assert(plan.sandbox(assert(policy.load(name or "default")), assert(recipes.get("python")), {}))
end

-- An "nsjail" that is bwrap building the same jail from its own command line (llmbox's bwrap
-- argv), ignoring the configuration on fd 3 and starting jail-ready as the configuration says:
-- through fd 4, sending the namespaces over fd 5.
local function stand_in(extra)
    local argv = assert(bubblewrap.command(spec_for())).wrap.argv
    local words = {}
    for i, a in ipairs(argv) do words[i] = q(a) end
    local dir = helpers.tmpdir()
    os.execute("chmod 755 " .. q(dir))
    local path = dir .. "/nsjail"
    helpers.write(path, ("#!/bin/sh\n[ \"$1 $2\" = '--config /proc/self/fd/3' ] || exit 9\n"
        .. "exec %s %s-- /proc/self/fd/4 --send-namespaces 5\n"):format(table.concat(words, " "), extra or ""))
    os.execute("chmod 755 " .. q(path))
    return path
end

describe("the nsjail backend #unpriv", function()
    it("is in the registry, built, with native's capabilities but egress, and says why it cannot run without nsjail", function()
        local d = assert(backends.get("nsjail"))
        assert(backends.check_driver(d))
        -- native's capabilities but egress (not built for nsjail's jails yet)
        local caps = {}
        for k, v in pairs(assert(backends.get("native")).capabilities) do caps[k] = v end
        caps.egress = false
        assert.same(caps, d.capabilities)
        local st, out = helpers.cli({ "backends" }, { env = "env PATH=/nonexistent" })
        assert.equal(0, st)
        assert.matches("nsjail%s+unusable.-why not: nsjail is not installed %(Debian 12 has no nsjail package", out)
        local _, err
        st, _, err = helpers.cli({ "run", "-b", "nsjail", "-c", "print(1)" }, { env = "env PATH=/nonexistent" })
        assert.equal(125, st)
        assert.matches("nsjail is not installed", err, 1, true)
    end)

    it("generates nsjail's configuration from the policy", function()
        local text = assert(nsjail.config(spec_for()))
        for _, want in ipairs({ 'mode: ONCE', 'hostname: "llmbox"', "keep_env: false", "keep_caps: false",
            "disable_no_new_privs: false", "clone_newnet: true", "clone_newuser: true", "clone_newns: true",
            "clone_newpid: true", "clone_newipc: true", "clone_newuts: true", "clone_newcgroup: true",
            'uidmap { inside_id: "1000" outside_id: "" count: 1 }', "pass_fd: 4", "pass_fd: 5",
            'mount { src: "/usr" dst: "/usr" is_bind: true rw: false nosuid: true nodev: true }',
            'mount { dst: "/proc" fstype: "proc" rw: false }',
            'exec_bin { path: "/proc/self/fd/4" arg: "--send-namespaces" arg: "5" }' }) do
            assert.matches("\n" .. want .. "\n", "\n" .. text, 1, true)
        end
        -- the sizes are the policy's
        local pol = assert(policy.load("default"))
        assert.matches(('dst: "/sandbox" fstype: "tmpfs" options: "size=%d,'):format(pol.limits.workspace), text, 1, true)
        -- the only writable mounts are llmbox's tmpfs and the five device nodes
        for line in text:gmatch("[^\n]+") do
            if line:match("rw: true") then
                assert.is_truthy(line:match('fstype: "tmpfs"') or line:match('^mount { src: "/dev/%a+" dst: "/dev/%a+" is_bind'),
                    line)
            end
        end
        -- /etc's files, quoted as protobuf text
        assert.matches('src_content: "127.0.0.1\\tlocalhost llmbox\\n', text, 1, true)
        assert.equal('"a\\"b\\\\c\\n\\000\\303\\251"', nsjail.quote('a"b\\c\n\0é'))
        -- what the jail cannot give is refused, naming the backend
        local sp = spec_for()
        sp.network = { mode = "egress" }
        local none, err = nsjail.config(sp)
        assert.is_nil(none)
        assert.matches('the nsjail backend provides "none" (loopback only); egress: the native and bubblewrap', err, 1, true)
    end)

    it("runs in the jail the tool built: the driver's side, with bwrap standing in for nsjail", function()
        local fake = stand_in()
        local st, out, err = helpers.cli({ "run", "-b", "nsjail", "-l", "python", "-c",
            "import os\nprint(os.getuid(), open('/proc/self/uid_map').read().split()[0], os.uname().nodename)" },
            { env = "env LLMBOX_NSJAIL=" .. q(fake) })
        assert.equal(0, st, err)
        assert.equal("1000 1000 llmbox\n", out)
        -- a session keeps its workspace; a pool's sandboxes are emptied as on native
        st, out, err = helpers.cli({ "exec", "-b", "nsjail", "--", "sh", "-c", "echo kept > f; cat f; id -u" },
            { env = "env LLMBOX_NSJAIL=" .. q(fake) })
        assert.equal(0, st, err)
        assert.equal("kept\n1000\n", out)
    end)

    it("passes on what the tool said when it fails, and refuses a jail whose namespaces never came", function()
        local st, _, err = helpers.cli({ "run", "-b", "nsjail", "-c", "print(1)" },
            { env = "env LLMBOX_NSJAIL=" .. q(stand_in("--no-such-option ")) })
        assert.equal(125, st)
        assert.matches("nsjail could not build the sandbox (nsjail: exit status 1: bwrap: Unknown option --no-such-option)",
            err, 1, true)
        -- a tool that exits 0 without starting jail-ready: no jail is handed out
        st, _, err = helpers.cli({ "run", "-b", "nsjail", "-c", "print(1)" }, { env = "env LLMBOX_NSJAIL=/bin/true" })
        assert.equal(125, st)
        assert.matches("nsjail could not build the sandbox", err, 1, true)
    end)

    it("runs on a real nsjail when one is installed", function()
        local ok, why = nsjail.usable()
        if not ok then
            pending("skipped: " .. tostring(why))
            return
        end
        local r = assert(llmbox.run("import os; print(os.getuid())", { backend = "nsjail" }))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("1000\n", r.stdout)
    end)
end)

-- llmbox.engine: where Docker and Podman are, and calls to their Engine API, against the real
-- engines (spec/run.sh starts dockerd and Podman's API service when it runs as root; make test
-- installs both). As nobody, the engines' sockets are root's: the specs check the message that
-- says so.
local engine = require "llmbox.engine"
local helpers = require "spec.helpers"
local busybox = require "spec.support.busybox_image"
local uv = require "luv"

local function env(t) return function(k) return t[k] end end

describe("engine endpoints #unpriv", function()
    it("finds Docker at DOCKER_HOST, or at its default socket", function()
        local ep = assert(engine.endpoint("docker", env({})))
        assert.equal("/var/run/docker.sock", ep.socket)
        assert.equal("default", ep.origin)
        ep = assert(engine.endpoint("docker", env({ DOCKER_HOST = "unix:///srv/d.sock" })))
        assert.same({ kind = "docker", socket = "/srv/d.sock", name = "unix:///srv/d.sock", origin = "DOCKER_HOST" }, ep)
    end)

    it("speaks TLS with client certificates to a TCP engine when DOCKER_TLS_VERIFY says so", function()
        local ep = assert(engine.endpoint("docker", env({ DOCKER_HOST = "tcp://10.0.0.5:2376", DOCKER_TLS_VERIFY = "1",
            DOCKER_CERT_PATH = "/etc/llmbox/docker" })))
        assert.equal("https://10.0.0.5:2376", ep.base)
        assert.same({ ca_file = "/etc/llmbox/docker/ca.pem", cert_file = "/etc/llmbox/docker/cert.pem",
            key_file = "/etc/llmbox/docker/key.pem" }, ep.tls)
        ep = assert(engine.endpoint("docker", env({ DOCKER_HOST = "tcp://build-host", HOME = "/home/u" })))
        assert.equal("http://build-host:2376", ep.base)
        assert.is_nil(ep.tls)
    end)

    it("finds Podman at CONTAINER_HOST, or where its API service listens", function()
        local ep = assert(engine.endpoint("podman", env({ CONTAINER_HOST = "unix:///run/user/7/podman/podman.sock" })))
        assert.equal("/run/user/7/podman/podman.sock", ep.socket)
        ep = assert(engine.endpoint("podman", env({ XDG_RUNTIME_DIR = "/run/user/7" })))
        if helpers.is_root() then
            assert.equal("/run/podman/podman.sock", ep.socket)
        else
            assert.equal("/run/user/7/podman/podman.sock", ep.socket)
            local none, err = engine.endpoint("podman", env({}))
            assert.is_nil(none)
            assert.matches("XDG_RUNTIME_DIR is not set", err, 1, true)
        end
    end)

    it("refuses an address it cannot use, naming the variable", function()
        local ep, err = engine.endpoint("docker", env({ DOCKER_HOST = "ssh://me@host" }))
        assert.is_nil(ep)
        assert.equal('DOCKER_HOST="ssh://me@host": expected unix:///path or tcp://host:port', err)
        ep, err = engine.endpoint("podman", env({ CONTAINER_HOST = "tcp://host:1" }))
        assert.is_nil(ep)
        assert.matches("CONTAINER_HOST", err, 1, true)
        assert.has_error(function() engine.endpoint("lxd") end, 'engine.endpoint: unknown engine "lxd" (docker or podman)')
    end)

    it("says what to do when no engine is there", function()
        local e, err = engine.connect({ kind = "docker", socket = "/nonexistent/d.sock", name = "unix:///nonexistent/d.sock" })
        assert.is_nil(e)
        assert.equal("no Docker engine at unix:///nonexistent/d.sock (the socket does not exist): start it "
            .. "(`systemctl start docker`, or `dockerd` as root), or set DOCKER_HOST", err)
        -- a socket file nobody listens on any more
        local path = helpers.private_dir() .. "/stale.sock"
        assert(os.execute(("python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' %s")
            :format(helpers.shell_quote(path))))
        assert(uv.fs_stat(path))
        e, err = engine.connect({ kind = "podman", socket = path, name = "unix://" .. path })
        assert.is_nil(e)
        assert.matches("no Podman engine answers at unix://" .. path .. " (nothing listens there)", err, 1, true)
    end)
end)

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("the %s engine #unpriv"):format(kind), function()
        local e, why
        local ep, ep_err = engine.endpoint(kind)
        if ep then e, why = engine.connect(ep) else why = ep_err end

        it("is reached, or the reason is one a user can act on", function()
            if e then return end
            if ep and not helpers.is_root() and uv.fs_stat(ep.socket) then
                -- the engine runs, but its socket is root's
                assert.matches("permission denied on " .. ep.socket, why, 1, true)
                return
            end
            pending(("no %s engine here: %s"):format(kind, why))
        end)

        local function needs_engine()
            local why_not = busybox.unavailable(kind, e, why)
            if why_not then pending(why_not) end
            return not why_not
        end

        it("answers with its version and the API version every later call names", function()
            if not needs_engine() then return end
            assert.matches("^%d+%.%d+", e.version)
            assert.matches("^1%.%d+$", e.api_version)
            assert.equal("/v" .. e.api_version, e.prefix)
        end)

        it("lists containers as JSON, and passes the engine's own message on a failed call", function()
            if not needs_engine() then return end
            local before = assert(e:json("GET", "/containers/json?all=1"))
            assert.is_table(before)
            local created, err, status = e:json("POST", "/containers/create?name=llmbox-spec-never",
                { Image = "llmbox-no-such-image:0", Cmd = { "true" } })
            assert.is_nil(created)
            assert.equal(404, status)
            assert.matches("^POST /containers/create: .*[Ii]mage", err)
            assert.matches(("from the %s engine"):format(engine.KINDS[kind]), err, 1, true)
            assert.equal(#before, #assert(e:json("GET", "/containers/json?all=1")))
        end)

        it("hands back any status as a response through request()", function()
            if not needs_engine() then return end
            local res = assert(e:request("GET", "/containers/llmbox-spec-missing/json"))
            assert.equal(404, res.status)
            res = assert(e:request("GET", "/_ping"))
            assert.equal(200, res.status)
            assert.equal("OK", res.body)
        end)
    end)
end

-- A container made from the translation of the neutral spec (llmbox.backends.container), on each
-- real engine: it is what create_body promises. The image is a static busybox (no registry here),
-- imported through the engine's API.
local container = require "llmbox.backends.container"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"

local IMAGE = busybox.IMAGE
local busybox_image = busybox.ensure

-- Runs argv in the container as the sandbox user: exit code, stdout, stderr.
local function exec(e, id, argv)
    local r = assert(e:exec(id, { argv = argv, user = container.USER, cwd = "/sandbox" }))
    return r.exit_code, r.stdout, r.stderr
end

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("a container from the sandbox spec on %s"):format(kind), function()
        local e, why = engine.connect(kind)
        local id

        setup(function()
            if not e then return end
            assert(busybox_image(e))
            local spec = plan.sandbox(assert(policy.load("default")), nil)
            local seccomp_file
            if kind == "podman" then
                -- Podman reads the profile from a file on its host (this one)
                seccomp_file = helpers.tmppath(".json")
                helpers.write(seccomp_file, container.profile_json(container.seccomp_profile(spec.syscalls)))
            end
            local nproc
            if kind == "podman" then
                -- below the engine's own hard limit, which may be lower than this process's
                nproc = math.min(4096,
                    tonumber(assert(helpers.read("/proc/self/limits")):match("Max processes%s+%S+%s+(%d+)")))
            end
            local body = assert(container.create_body(spec, { image = IMAGE, seccomp_file = seccomp_file,
                nproc = nproc }))
            local made = assert(e:json("POST", "/containers/create", body))
            id = made.Id
            assert(e:json("POST", "/containers/" .. id .. "/start"))
        end)
        teardown(function()
            if id then e:request("DELETE", "/containers/" .. id .. "?force=1") end
        end)

        local function needs_engine()
            local why_not = busybox.unavailable(kind, e, why)
            if why_not then pending(why_not) end
            return not why_not
        end

        it("runs as the sandbox user with no capabilities, no new privileges and a seccomp filter", function()
            if not needs_engine() then return end
            local code, out = exec(e, id, { "id", "-u" })
            assert.equal(0, code)
            assert.equal("1000\n", out)
            code, out = exec(e, id, { "grep", "-E", "^(CapEff|CapPrm|NoNewPrivs|Seccomp):", "/proc/self/status" })
            assert.equal(0, code)
            assert.matches("CapPrm:%s+0000000000000000", out)
            assert.matches("CapEff:%s+0000000000000000", out)
            assert.matches("NoNewPrivs:%s+1", out)
            assert.matches("Seccomp:%s+2", out)
        end)

        it("has a read-only root, a writable workspace and /tmp, and no network but loopback", function()
            if not needs_engine() then return end
            local code, _, err = exec(e, id, { "touch", "/new-file" })
            assert.is_not.equal(0, code)
            assert.matches("Read%-only file system", err)
            local made
            code, _, made = exec(e, id, { "touch", "/sandbox/kept", "/tmp/t" })
            assert.equal(0, code, made)
            local out
            code, out = exec(e, id, { "cat", "/proc/net/dev" })
            assert.equal(0, code)
            local ifaces = {}
            for iface in out:gmatch("\n%s*([%w@._-]+):") do ifaces[#ifaces + 1] = iface end
            assert.same({ "lo" }, ifaces)
        end)

        it("refuses new namespaces through the policy's syscall rules", function()
            if not needs_engine() then return end
            local code, _, err = exec(e, id, { "unshare", "-U", "true" })
            assert.is_not.equal(0, code)
            assert.matches("Operation not permitted", err, 1, true)
        end)

        it("runs a command with stdin, the environment and the working directory it is given", function()
            if not needs_engine() then return end
            local seen = {}
            local r = assert(e:exec(id, { argv = { "sh", "-c", "cat; echo \"$A $(pwd)\" >&2; exit 3" },
                stdin = "from stdin\n", env = { "A=set" }, cwd = "/tmp", user = container.USER },
                function(stream, chunk) seen[#seen + 1] = stream .. ":" .. chunk end))
            assert.equal(3, r.exit_code)
            assert.equal("from stdin\n", r.stdout)
            assert.equal("set /tmp\n", r.stderr)
            assert.same({ "stdout:from stdin\n", "stderr:set /tmp\n" }, seen)
        end)

        it("carries a large stdin through and its output back in many frames", function()
            if not needs_engine() then return end
            local data = string.rep("0123456789abcdef", 65536) -- 1 MiB
            local r = assert(e:exec(id, { argv = { "sh", "-c", "cat > /sandbox/big; wc -c < /sandbox/big; cat /sandbox/big" },
                stdin = data, user = container.USER }))
            assert.equal(0, r.exit_code, r.stderr)
            assert.equal("1048576\n" .. data, r.stdout)
        end)

        it("places files with the archive core.tar_pack makes, owned by the sandbox user", function()
            if not needs_engine() then return end
            local archive = assert(require("llmbox.core").tar_pack({
                { path = "/tmp/llmbox/main.sh", data = "echo placed\n", mode = 493 },
                { path = "/sandbox/data/in.txt", data = "input\n" },
            }, 1000, 1000))
            local r = assert(e:exec(id, { argv = { "tar", "-x", "-C", "/" }, stdin = archive, user = container.USER }))
            assert.equal(0, r.exit_code, r.stderr)
            local code, out = exec(e, id, { "sh", "-c", "/tmp/llmbox/main.sh; cat /sandbox/data/in.txt; ls -ln /sandbox/data" })
            assert.equal(0, code)
            assert.matches("^placed\ninput\n", out)
            assert.matches("1000%s+1000", out)
        end)

        it("says what the engine says when the container is not there", function()
            if not needs_engine() then return end
            local r, err, status = e:exec("llmbox-spec-no-such-container", { argv = { "true" } })
            assert.is_nil(r)
            assert.equal(404, status)
            assert.matches("^POST /containers/llmbox%-spec%-no%-such%-container/exec: .*from the " .. engine.KINDS[kind]
                .. " engine", err)
        end)

        it("carries llmbox's label, the policy's ceilings and the init", function()
            if not needs_engine() then return end
            local info = assert(e:json("GET", "/containers/" .. id .. "/json"))
            local p = assert(policy.load("default"))
            assert.equal("1", info.Config.Labels["io.llmbox.managed"])
            assert.equal(p.limits.memory, info.HostConfig.Memory)
            assert.equal(p.limits.processes + 5, info.HostConfig.PidsLimit) -- init, the keeper, its sleep, a wrapper, the helper
            assert.is_true(info.HostConfig.ReadonlyRootfs)
            assert.equal("none", info.HostConfig.NetworkMode)
        end)
    end)
end

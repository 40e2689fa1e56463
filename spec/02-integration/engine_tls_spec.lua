-- The docker backend over TCP with TLS client certificates, as DOCKER_HOST, DOCKER_TLS_VERIFY and
-- DOCKER_CERT_PATH configure Docker's own client: against the real dockerd, which
-- spec/support/engines.sh starts with a loopback TCP listener (tcp://127.0.0.1:2376, --tlsverify)
-- and a throwaway CA, server and client certificate (build/engines/tls).
local helpers = require "spec.helpers"
local busybox = require "spec.support.busybox_image"
local engine = require "llmbox.engine"

local TLS = helpers.root .. "/build/engines/tls"
local q = helpers.shell_quote

describe("docker over TCP with TLS client certificates", function()
    local e = engine.connect("docker")

    local function needs_listener()
        local why_not
        if not e then
            why_not = "no Docker engine here"
        elseif not helpers.read(TLS .. "/cert.pem")
            or os.execute("curl -s --max-time 2 -o /dev/null http://127.0.0.1:2376/ 2>/dev/null") == 7 * 256 then
            why_not = "dockerd was not started by spec/support/engines.sh (it was already running), so it has no TLS "
                .. "listener on 127.0.0.1:2376"
        end
        if why_not then pending(why_not) end
        return not why_not
    end

    it("runs a program through an engine reached over TLS, and says what is wrong when TLS is", function()
        if not needs_listener() then return end
        assert(busybox.ensure(e))
        local env = "DOCKER_HOST=tcp://127.0.0.1:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=" .. q(TLS)
        -- a run: the exec's stream is upgraded on the TLS connection
        local st, out, err = helpers.cli({ "exec", "-b", "docker", "--image", busybox.IMAGE, "--", "sh", "-c",
            "echo over tls; cat" }, { env = env, stdin = "and its stdin\n" })
        assert.equal(0, st, err)
        assert.equal("over tls\n", out) -- exec gives the program no stdin unless -i
        st, out, err = helpers.cli({ "exec", "-i", "-b", "docker", "--image", busybox.IMAGE, "--", "cat" },
            { env = env, stdin = "and its stdin\n" })
        assert.equal(0, st, err)
        assert.equal("and its stdin\n", out)
        -- doctor names where it answered
        local _, dout = helpers.cli({ "doctor" }, { env = env })
        assert.matches("usable: Docker [^\n]* answers at tcp://127.0.0.1:2376", dout)
        -- a CA that did not sign the server's certificate: refused, never sent in the clear
        local bad = helpers.tmpdir()
        assert(os.execute(("cp %s/cert.pem %s/ca.pem && cp %s/cert.pem %s/key.pem %s/"):format(q(TLS), q(bad), q(TLS),
            q(TLS), q(bad))) == 0)
        st, _, err = helpers.cli({ "exec", "-b", "docker", "--image", busybox.IMAGE, "--", "true" },
            { env = "DOCKER_HOST=tcp://127.0.0.1:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=" .. q(bad) })
        assert.equal(125, st)
        assert.matches("tcp://127.0.0.1:2376", err, 1, true)
        assert.matches("[Cc]ertificate", err)
        -- no client certificate: the engine refuses the connection
        local nocert = helpers.tmpdir()
        assert(os.execute(("cp %s/ca.pem %s/"):format(q(TLS), q(nocert))) == 0)
        st, _, err = helpers.cli({ "exec", "-b", "docker", "--image", busybox.IMAGE, "--", "true" },
            { env = "DOCKER_HOST=tcp://127.0.0.1:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=" .. q(nocert) })
        assert.equal(125, st)
        assert.matches("tcp://127.0.0.1:2376", err, 1, true)
    end)
end)

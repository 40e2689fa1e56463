-- `llmbox mcp` reads its configuration from the environment once, at startup: each setting is
-- honoured or refused with a message that says why, before anything is served.
local helpers = require "spec.helpers"
local config = require "llmbox.mcp.config"
local raw = require "support.mcp.raw"
local sdk = require "support.mcp.sdk"

local function start(env)
    return helpers.cli({ "mcp" }, { env = env })
end

describe("mcp configuration #unpriv", function()
    it("refuses settings it cannot honour, at startup, saying what to do", function()
        local cases = {
            { "BACKEND=wsl2", 'backend "wsl2" is not available on Linux' },
            { "BACKEND=vmware", 'unknown backend "vmware"' },
            { "SANDBOX_NETWORK_MODE=bridge", 'which policy "default" does not allow (its network.mode is "none")' },
            { "SANDBOX_NETWORK_MODE=host", "SANDBOX_NETWORK_MODE=host is refused" },
            { "SANDBOX_PRIVILEGED=true", "SANDBOX_PRIVILEGED=true is refused" },
            { "SANDBOX_PRIVILEGED=maybe", "is not a boolean" },
            { "SANDBOX_SECURITY_OPT=seccomp=unconfined", '"seccomp=unconfined" is refused' },
            { "SANDBOX_SECURITY_OPT=apparmor=unconfined", '"apparmor=unconfined" is refused' },
            { "SANDBOX_SECURITY_OPT=no-new-privileges:false", "cannot be turned off" },
            { "SANDBOX_MEMORY=lots", "is not a size" },
            { "SANDBOX_MEMORY=4g", 'exceeds the memory limit of policy "default"' },
            { "SANDBOX_MEMORY=1m", "below 16m" },
            { "SANDBOX_MEMORY=256m SANDBOX_MEM_LIMIT=128m", "disagree" },
            { "SANDBOX_CAP_DROP='ALL,bad cap!'", "is not a capability name" },
            { "LLMBOX_POLICY=no-such-policy", 'no policy named "no-such-policy"' },
            { "LLMBOX_MCP_SESSION_IDLE=-5", "expected a positive number" },
            { "LLMBOX_MCP_WARM=lots", "expected a whole number from 0 (off) to 64" },
        }
        for _, case in ipairs(cases) do
            local status, out, err = start(case[1])
            assert.equal(125, status, case[1])
            assert.equal("", out, case[1]) -- nothing on the protocol channel
            assert.matches(case[2], err, 1, true)
            assert.matches("refusing to start", err)
        end
        -- every problem at once, not one per attempt
        local _, _, err = start("BACKEND=wsl2 SANDBOX_PRIVILEGED=1")
        assert.matches('backend "wsl2"', err, 1, true)
        assert.matches("SANDBOX_PRIVILEGED", err)
    end)

    it("accepts what the jail already does and serves", function()
        local c = raw.start({ BACKEND = "native", SANDBOX_NETWORK_MODE = "none", SANDBOX_READ_ONLY = "false",
            SANDBOX_CAP_DROP = "ALL", SANDBOX_SECURITY_OPT = "no-new-privileges", SANDBOX_PRIVILEGED = "false",
            SANDBOX_MEMORY = "256m", LLMBOX_POLICY = "strict" })
        local r = c:request(1, "initialize", { protocolVersion = "2025-06-18", capabilities = {},
            clientInfo = { name = "t", version = "1" } })
        assert.equal("2025-06-18", r.result.protocolVersion)
        local _, stderr = c:close()
        assert.matches("policy=strict memory=256M", stderr)
        assert.matches("SANDBOX_READ_ONLY=false: the jail's root stays read%-only", stderr)
    end)

    it("says which policy to choose when SANDBOX_MEMORY is above the policy's limit", function()
        -- the shipped policies that allow 1G, read from the policies themselves
        local allow = {}
        for _, entry in ipairs(require("llmbox.policy").list()) do
            local p = require("llmbox.policy").load(entry.name)
            if p and p.limits.memory >= 1024 * 1024 * 1024 then allow[#allow + 1] = entry.name end
        end
        assert.is_true(#allow > 0, "no shipped policy allows 1G: this case proves nothing")
        local status, _, err = start("SANDBOX_MEMORY=1g")
        assert.equal(125, status)
        assert.matches("exceeds the memory limit of policy \"default\" (512M)", err, 1, true)
        for _, name in ipairs(allow) do
            assert.matches("LLMBOX_POLICY=" .. name, err, 1, true)
        end
        -- more than any shipped policy allows (the seed's documented 4G): how to write one
        status, _, err = start("SANDBOX_MEMORY=4G")
        assert.equal(125, status)
        assert.matches("no shipped policy allows 4G", err, 1, true)
        assert.matches('extends = "default"', err, 1, true)
        assert.matches('limits = { memory = "4G" }', err, 1, true)
        assert.matches("LLMBOX_POLICY=/path/to/", err, 1, true)
    end)

    it("says what to set instead of a backend that cannot run here", function()
        for _, name in ipairs({ "wsl2", "windows-mxc" }) do
            local status, _, err = start("BACKEND=" .. name)
            assert.equal(125, status)
            assert.matches(("backend %q is not available on Linux"):format(name), err, 1, true)
            assert.matches("BACKEND=native", err, 1, true)
            assert.matches("needs no daemon", err, 1, true)
        end
    end)

    it("warns about SANDBOX_ variables it does not know, naming the nearest known one", function()
        local c = raw.start({ SANDBOX_NETWORKMODE = "none", SANDBOX_NETWORK_MODE = "", SANDBOX_FOO = "1" })
        local r = c:request(1, "initialize", { protocolVersion = "2025-06-18", capabilities = {},
            clientInfo = { name = "t", version = "1" } })
        assert.equal("2025-06-18", r.result.protocolVersion) -- a warning, not a refusal
        local _, stderr = c:close()
        assert.matches("warning: SANDBOX_NETWORKMODE is not a variable llmbox knows, and is ignored; "
            .. "did you mean SANDBOX_NETWORK_MODE?", stderr, 1, true)
        assert.matches("warning: SANDBOX_FOO is not a variable llmbox knows", stderr, 1, true)
        -- the known ones are listed
        assert.matches("SANDBOX_MEMORY, SANDBOX_MEM_LIMIT", stderr, 1, true)
        local cfg = assert(config.from_env({ SANDBOX_MEMROY = "1g", BACKEND = "native" }))
        assert.equal(1, #cfg.warnings)
        assert.matches("SANDBOX_MEMROY .* did you mean SANDBOX_MEMORY%?", cfg.warnings[1])
        assert.same({}, assert(config.from_env({})).warnings)
    end)

    it("applies SANDBOX_MEMORY to the runs", function()
        local code = "x = bytearray(%d * 1024 * 1024); print('allocated')"
        local out = sdk.run("calls", { env = { SANDBOX_MEMORY = "64m" }, calls = {
            { name = "execute_code", arguments = { code = code:format(16) } },
            { name = "execute_code", arguments = { code = code:format(200) } },
        } })
        assert.is_nil(out.error, out.error)
        assert.equal("allocated\n", out.results[1].structuredContent.stdout)
        local big = out.results[2].structuredContent
        assert.is_true(big.exit_code ~= 0)
        assert.equal("", big.stdout)
    end)

    it("from_env: derives the policy, and reads nothing it was not given", function()
        local cfg = assert(config.from_env({ SANDBOX_MEM_LIMIT = "100m", LLMBOX_MCP_SESSION_IDLE = "30",
            LLMBOX_MCP_POLICIES = "strict, permissive" }))
        assert.equal(100 * 1024 * 1024, cfg.memory)
        assert.equal(30, cfg.session_idle)
        assert.same({ "default", "strict", "permissive" }, cfg.policies)
        local p = assert(config.load_policy(cfg, "permissive"))
        assert.equal(100 * 1024 * 1024, p.limits.memory)
        assert.equal(300, p.limits.timeout) -- the rest of the policy is untouched
        cfg = assert(config.from_env({}))
        assert.is_nil(cfg.memory)
        assert.equal(600, cfg.session_idle)
        assert.same({ "default" }, cfg.policies)
    end)
end)

describe("mcp configuration: CPU count #unpriv", function()
    -- the seed's documented configurations set SANDBOX_CPU_COUNT=1: a cpu cgroup quota
    local cpu_cgroup = select(5, require("llmbox.core").cgroup())

    it("SANDBOX_CPU_COUNT and SANDBOX_CPUS set the cpus limit, or are refused where no cgroup can hold it", function()
        local cfg, err = config.from_env({ SANDBOX_CPU_COUNT = "1" })
        if not cpu_cgroup then
            assert.is_nil(cfg)
            assert.matches("SANDBOX_CPU_COUNT=1 cannot be honoured on this host: no cpu cgroup", err, 1, true)
            local status, _, serr = start("SANDBOX_CPUS=0.5")
            assert.equal(125, status)
            assert.matches("SANDBOX_CPUS=0.5 cannot be honoured", serr, 1, true)
            pending("setting the quota needs a cpu cgroup; here it is refused, as asserted")
        end
        assert.is_truthy(cfg, err)
        assert.equal(1, cfg.cpus)
        assert.equal(1, assert(config.load_policy(cfg, "default")).limits.cpus)
        cfg = assert(config.from_env({ SANDBOX_CPUS = "0.5" }))
        assert.equal(0.5, assert(config.load_policy(cfg, "strict")).limits.cpus)
        -- the server starts with it, and says so
        local c = raw.start({ SANDBOX_CPU_COUNT = "1" })
        local r = c:request(1, "initialize", { protocolVersion = "2025-06-18", capabilities = {},
            clientInfo = { name = "t", version = "1" } })
        assert.equal("2025-06-18", r.result.protocolVersion)
        local _, stderr = c:close()
        assert.matches("cpus=1", stderr, 1, true)
    end)

    it("refuses CPU counts it cannot honour, saying what to do", function()
        local policy = helpers.write(helpers.tmppath(".lua"),
            'return { extends = "default", limits = { cpus = 1 } }')
        finally(function() os.remove(policy) end)
        local function refused(cases)
            for _, case in ipairs(cases) do
                local status, out, err = start(case[1])
                assert.equal(125, status, case[1])
                assert.equal("", out, case[1])
                assert.matches(case[2], err, 1, true)
            end
        end
        refused({
            { "SANDBOX_CPUS=lots", "is not a CPU count" },
            { "SANDBOX_CPU_COUNT=0", "is not a CPU count" },
            { "SANDBOX_CPUS=0.001", "is not a CPU count" },
        })
        if not cpu_cgroup then
            pending("the checks of valid counts need a cpu cgroup: without one any count is refused (see above)")
        end
        refused({
            { "SANDBOX_CPUS=1 SANDBOX_CPU_COUNT=2", "disagree" },
            { "SANDBOX_CPUS=2 LLMBOX_POLICY=" .. policy, "SANDBOX_CPUS 2 exceeds the cpus limit of policy" },
        })
        -- control: at the policy's ceiling
        assert.equal(1, assert(config.load_policy(assert(config.from_env({ SANDBOX_CPUS = "1" })), policy)).limits.cpus)
    end)

    it("applies SANDBOX_CPUS to the runs", function()
        if not cpu_cgroup then
            pending("needs a cpu cgroup (refused at startup here, see above)")
            return
        end
        -- the program measures its own CPU share over about a second of busy loop
        local code = "import os, time\nt0, c0 = time.time(), os.times()\n"
            .. "while time.time() - t0 < 1: pass\n"
            .. "c1 = os.times()\nprint(round((c1.user + c1.system - c0.user - c0.system) / (time.time() - t0), 2))"
        local out = sdk.run("calls", { env = { SANDBOX_CPUS = "0.25" }, calls = {
            { name = "execute_code", arguments = { code = code } },
        } })
        assert.is_nil(out.error, out.error)
        local share = tonumber(out.results[1].structuredContent.stdout)
        assert.is_truthy(share, out.results[1].structuredContent.stderr)
        assert.is_true(share < 0.4, "CPU share " .. tostring(share) .. " with a quota of 0.25")
    end)
end)

-- The backend registry: one list that the CLI, doctor, MCP config and sessions read.
local backends = require "llmbox.backends"
local recipes = require "llmbox.recipes"
local session = require "llmbox.session"

describe("backend registry #unpriv", function()
    it("gets drivers by name or alias, in any case, and says what is not built", function()
        assert.equal("native", assert(backends.get("native")).name)
        assert.equal("native", assert(backends.get("NATIVE")).name)
        assert.equal("bubblewrap", assert(backends.get("bwrap")).name)
        assert.equal("kubernetes", assert(backends.get("k8s")).name)
        local d, err = backends.get("wsl2")
        assert.is_nil(d)
        assert.equal('backend "wsl2" is not available on Linux: it runs only on Windows (a WSL2 utility VM) '
            .. '(available: bubblewrap, docker, kubernetes, native, nsjail, podman)', err)
        d, err = backends.get("nope")
        assert.is_nil(d)
        assert.equal('unknown backend "nope" (available: bubblewrap, docker, kubernetes, native, nsjail, podman)', err)
        assert.has_error(function() backends.get(42) end, "backend name expected, got number")
        assert.same({ "bubblewrap", "docker", "kubernetes", "native", "nsjail", "podman" }, backends.names())
        assert.equal("kubernetes", assert(backends.entry("k8s")).name)
    end)

    it("holds every driver to the contract: all capabilities and layout paths declared", function()
        for _, name in ipairs(backends.names()) do
            local driver = assert(backends.get(name))
            assert(backends.check_driver(driver))
        end
        local broken = { name = "x", layout = { workspace = "sandbox" }, capabilities = {} }
        local ok, err = backends.check_driver(broken)
        assert.is_nil(ok)
        assert.equal("driver x: layout.workspace must be an absolute path", err)
    end)

    it("lists what `llmbox backends` prints, without sharing its tables", function()
        local list = backends.list()
        assert.equal("native", list[1].name)
        assert.equal("available", list[1].status)
        list[2].aliases[1] = "changed"
        assert.same({ "bwrap" }, backends.list()[2].aliases)
        for _, b in ipairs(list) do
            assert.is_boolean(b.usable)
            if b.status == "planned" then assert.same({}, b.capabilities) end
        end
    end)

    it("fills the recipes' {code} and {workspace} from the backend's layout", function()
        local py = assert(recipes.get("python"))
        local layout = { workspace = "/work", code = "/opt/code", plots = "/opt/code/plots", tmp = "/tmp" }
        assert.same({ "/usr/bin/python3", "-u", "/opt/code/main.py", "a" },
            recipes.argv(py, "/opt/code/main.py", { "a" }, nil, layout))
        assert.equal("/opt/code/hooks:/work/.llmbox/python", recipes.env(py, layout).PYTHONPATH)
        local files = recipes.files(py, "/opt/code/main.py", "print(1)", layout)
        for i = 2, #files do assert.matches("^/opt/code/hooks/", files[i].path) end
        local argv = recipes.install_argv(py, { "x" }, { find_links = {} }, layout)
        local target
        for i, a in ipairs(argv) do if a == "--target" then target = argv[i + 1] end end
        assert.equal("/work/.llmbox/python", target)
    end)

    it("gives sessions the paths of their backend", function()
        local driver = assert(backends.get("native"))
        local s = session.wrap(driver, session.load_policy("default"), nil, nil)
        assert.equal("/sandbox", s.layout.workspace)
        local ok, err = s:copy_to("/etc/passwd", "/tmp/x")
        assert.is_nil(ok)
        assert.equal("session is closed", err) -- a handle-less session: nothing is reached
        s.handle = {} -- paths are checked before the handle is used
        ok, err = s:copy_to("/etc/passwd", "/tmp/x")
        assert.is_nil(ok)
        assert.equal("path /tmp/x is outside the workspace: use a path under /sandbox/ or one relative to it", err)
    end)
end)

describe("backends that operators register #unpriv", function()
    local helpers = require "spec.helpers"
    local json = require "llmbox.json"
    local dir, env
    setup(function()
        dir = helpers.tmpdir()
        os.execute("mkdir -p " .. helpers.shell_quote(dir .. "/backends"))
        -- native under another name, without pools: an operator's driver may wrap a built-in one
        helpers.write(dir .. "/backends/mine.lua", [[
local native = require "llmbox.backends.native"
local caps = {}
for k, v in pairs(native.capabilities) do caps[k] = v end
caps.pool = false
return setmetatable({ description = "native, as an operator registered it", aliases = { "my" },
    capabilities = caps }, { __index = native })
]])
        helpers.write(dir .. "/backends/broken.lua", "return {")
        helpers.write(dir .. "/backends/half.lua", "return { capabilities = {}, layout = {} }")
        helpers.write(dir .. "/backends/docker.lua", "return {}")
        env = "LLMBOX_POLICY_PATH=" .. helpers.shell_quote(dir)
    end)

    it("are listed with their file, capabilities and whether they are usable, and broken ones with why", function()
        local st, out, err = helpers.cli({ "backends", "--json" }, { env = env })
        assert.equal(0, st, err)
        local by, dockers = {}, {}
        for _, b in ipairs(json.decode(out)) do
            by[b.name] = b
            if b.name == "docker" then dockers[#dockers + 1] = b end
        end
        assert.equal("registered", by.mine.status)
        assert.is_true(by.mine.usable)
        assert.equal(dir .. "/backends/mine.lua", by.mine.file)
        assert.same({ "my" }, by.mine.aliases)
        assert.equal("persistent_workspace", by.mine.capabilities[1]) -- no pool
        assert.equal("broken", by.broken.status)
        assert.matches("broken.lua does not load", by.broken.why, 1, true)
        assert.matches("does not keep the driver contract: driver half: layout.workspace must be an absolute path",
            by.half.why, 1, true)
        -- a built-in backend's name is not taken: docker stays the engine's
        assert.equal(2, #dockers)
        assert.equal("available", dockers[1].status)
        assert.equal("broken", dockers[2].status)
        assert.matches('"docker" is a built-in backend\'s name', dockers[2].why, 1, true)
        st, out = helpers.cli({ "backends" }, { env = env })
        assert.equal(0, st)
        assert.matches("mine %(my%)%s+usable%s+native, as an operator registered it\n    registered from: ", out)
        assert.matches("windows%-mxc %(mxc%)%s+unavailable", out)
    end)

    it("run code when asked for by name or alias; a broken one is refused with its reason", function()
        local st, out, err = helpers.cli({ "run", "-b", "my", "-c", "print(6 * 7)" }, { env = env })
        assert.equal(0, st, err)
        assert.equal("42\n", out)
        st, out, err = helpers.cli({ "run", "-b", "broken", "-c", "print(1)" }, { env = env })
        assert.equal("", out)
        assert.equal(125, st)
        assert.matches('backend "broken" cannot be used: ' .. dir .. "/backends/broken.lua does not load", err, 1, true)
        st, out, err = helpers.cli({ "run", "-b", "wsl2", "-c", "print(1)" }, { env = env })
        assert.equal("", out)
        assert.equal(125, st)
        assert.matches('backend "wsl2" is not available on Linux: it runs only on Windows', err, 1, true)
        assert.matches("available: bubblewrap, docker, kubernetes, mine, native, nsjail, podman", err, 1, true)
    end)
end)

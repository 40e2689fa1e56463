-- The backend registry: one list that the CLI, doctor, MCP config and sessions read.
local backends = require "llmbox.backends"
local recipes = require "llmbox.recipes"
local session = require "llmbox.session"

describe("backend registry #unpriv", function()
    it("gets drivers by name or alias, in any case, and says what is not built", function()
        assert.equal("native", assert(backends.get("native")).name)
        assert.equal("native", assert(backends.get("NATIVE")).name)
        local d, err = backends.get("bwrap")
        assert.is_nil(d)
        assert.equal('backend "bubblewrap" is not built yet in this version of llmbox (available: docker, native, podman)', err)
        d, err = backends.get("nope")
        assert.is_nil(d)
        assert.equal('unknown backend "nope" (available: docker, native, podman)', err)
        assert.has_error(function() backends.get(42) end, "backend name expected, got number")
        assert.same({ "docker", "native", "podman" }, backends.names())
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

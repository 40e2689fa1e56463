-- The neutral sandbox spec: built once from policy + recipe, the only thing a driver's open sees.
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local recipes = require "llmbox.recipes"
local native = require "llmbox.backends.native"

describe("sandbox plan #unpriv", function()
    it("carries the policy's limits, network, syscalls and mounts, and the recipe's mounts", function()
        local p = assert(policy.load("default"))
        local py = assert(recipes.get("python"))
        local spec = plan.sandbox(p, py)
        assert.same({ name = "default", path = p.path }, spec.policy)
        assert.equal("none", spec.network.mode)
        assert.equal(p.limits.workspace, spec.limits.workspace)
        assert.equal(p.limits.tmp, spec.limits.tmp)
        assert.same(p.syscalls.deny, spec.syscalls.deny)
        assert.is_nil(spec.image)
        local by_dst = {}
        for _, m in ipairs(spec.mounts) do by_dst[m.dst] = m end
        assert.is_truthy(by_dst["/usr"])
        assert.is_true(by_dst["/etc/matplotlibrc"].optional) -- the recipe's, optional
        -- no recipe: only the policy's
        assert.is_nil(plan.sandbox(p, nil).mounts[#spec.mounts])
    end)

    it("mounts offline library sources only when the policy allows installs", function()
        local base = assert(policy.load("permissive")) -- shared (cached): never changed here
        local function with_libraries(allow)
            return setmetatable({ libraries = { allow = allow, network = false,
                sources = { python = { find_links = { "/srv/wheels" } } } } }, { __index = base })
        end
        local found
        for _, m in ipairs(plan.sandbox(with_libraries(true), nil).mounts) do
            if m.dst == "/srv/wheels" then found = m end
        end
        assert.same({ src = "/srv/wheels", dst = "/srv/wheels", optional = false, install_source = true }, found)
        for _, m in ipairs(plan.sandbox(with_libraries(false), nil).mounts) do
            assert.is_not.equal("/srv/wheels", m.dst)
        end
    end)

    it("is all the native driver needs, and it refuses what the jail cannot honour", function()
        local spec = plan.sandbox(assert(policy.load("default")), nil)
        -- a jail driver without egress refuses it (nsjail: not yet)
        spec.network.mode = "egress"
        local cfg, terr = native.translate(spec, "nsjail")
        assert.is_nil(cfg)
        assert.equal('policy "default" asks for network mode "egress"; the nsjail backend provides "none" '
            .. '(loopback only); egress: the native and bubblewrap backends, so far', terr)
        spec.network.mode = "host"
        local h, err = native.open(spec)
        assert.is_nil(h)
        assert.equal('policy "default" asks for network mode "host"; the native backend provides '
            .. '"none" (loopback only) and "egress"', err)
        spec.network.mode = "none"
        spec.image = "python:3.12-slim"
        h, err = native.open(spec)
        assert.is_nil(h)
        assert.equal("an image was asked for (python:3.12-slim); the native backend runs the host's "
            .. "interpreters, or a root filesystem (rootfs = DIR, --image dir:DIR): use a backend that runs images "
            .. "(docker, podman)", err)
        assert.equal("img:1", plan.sandbox(assert(policy.load("default")), nil, { image = "img:1" }).image)
        spec.image = nil
        h = assert(native.open(spec)) -- the control
        assert.equal("hi\n", assert(h:run({ argv = { "/bin/echo", "hi" }, env = {} })).stdout)
        h:close()
    end)
end)

describe("run plan #unpriv", function()
    local p = assert(policy.load("default"))
    local layout = native.layout
    local function env_map(list)
        local m = {}
        for _, kv in ipairs(list) do
            local k, v = kv:match("^([^=]+)=(.*)$")
            m[k] = v
        end
        return m
    end

    it("places the code outside the workspace, with the recipe's hooks, and plans plots", function()
        local py = assert(recipes.get("python"))
        local run = assert(plan.run(p, py, layout, "print(1)", { args = { "a" }, env = { X = "1" } }, { S = "2" }))
        assert.equal(layout.code .. "/" .. py.file, run.path)
        assert.same({ path = run.path, data = "print(1)", mode = 420 }, run.files[1])
        assert.is_true(#run.files > 1, "the recipe's hook files")
        assert.equal("a", run.argv[#run.argv])
        assert.is_nil(run.compile)
        assert.equal(layout.workspace, run.cwd)
        local env = env_map(run.env)
        assert.equal("1", env.X)
        assert.equal("2", env.S)
        assert.equal(layout.plots, env.LLMBOX_PLOTS_DIR)
        assert.equal(layout.plots, run.probe)
        assert.same({ layout.plots }, run.clean)
        assert.same({ dir = layout.plots, max = p.limits.tmp }, run.collect.plots)
        assert.is_nil(run.collect.artifacts)
        -- keep_plots keeps them; artifacts default to the workspace's output/ and 10 MiB
        run = assert(plan.run(p, py, layout, "", { keep_plots = true, artifacts = true }))
        assert.is_nil(run.clean)
        assert.same({ dir = layout.workspace .. "/output", max = 10 * 1024 * 1024 }, run.collect.artifacts)
    end)

    it("plans a compile step for compiled languages, and no plots for recipes that draw none", function()
        local cpp = assert(recipes.get("cpp"))
        local run = assert(plan.run(p, cpp, layout, "int main(){}", {}))
        assert.is_table(run.compile)
        assert.is_nil(run.probe)
        assert.is_nil(run.collect.plots)
        assert.is_nil(env_map(run.env).LLMBOX_PLOTS_DIR)
    end)

    it("lowers the policy's limits where asked and refuses to raise them", function()
        local run = assert(plan.run(p, assert(recipes.get("python")), layout, "", { timeout = 1 }))
        assert.equal(1, run.limits.timeout)
        assert.equal(p.limits.memory, run.limits.memory)
        local none, err = plan.run(p, assert(recipes.get("python")), layout, "", { timeout = p.limits.timeout + 1 })
        assert.is_nil(none)
        assert.matches("exceeds the limit of policy \"default\"", err, 1, true)
        assert.is_nil((plan.limits(p, { memory = 0 / 0 })))
    end)

    it("plans installs with the package manager, the CA bundle and the install's own time limit", function()
        local base = assert(policy.load("permissive"))
        local lp = setmetatable({ libraries = { allow = true, network = false, timeout = 50,
            sources = {} } }, { __index = base })
        local spec = assert(plan.install(lp, assert(recipes.get("python")), { "six" }, layout, nil, { timeout = 20 }))
        assert.equal("six", spec.argv[#spec.argv])
        assert.is_nil(table.concat(spec.argv, " "):find("--find-links", 1, true))
        assert.equal(20, spec.limits.timeout)
        assert.is_false(spec.install_network)
        assert.equal("/etc/ssl/certs/ca-certificates.crt", env_map(spec.env).SSL_CERT_FILE)
        -- the install's ceiling is libraries.timeout, not the run's
        assert.equal(50, assert(plan.install(lp, assert(recipes.get("python")), { "six" }, layout, nil, {})).limits.timeout)
    end)

    it("plans a command with no recipe, and the warm program of a recipe that has one", function()
        local spec = assert(plan.exec(p, layout, nil, { "/bin/true" }, { cwd = "/tmp" }))
        assert.same({ "/bin/true" }, spec.argv)
        assert.equal("/tmp", spec.cwd)
        assert.is_nil(env_map(spec.env).LLMBOX_PLOTS_DIR)
        local py = assert(recipes.get("python"))
        local w = assert(plan.warm(p, py, layout, nil))
        -- the warm program gets what a cold run with no options gets
        assert.same(assert(plan.run(p, py, layout, "", {})).env, w.env)
        assert.is_nil(plan.warm(p, assert(recipes.get("cpp")), layout, nil))
    end)
end)

describe("sandbox image #unpriv", function()
    local images = { capabilities = { images = true } }
    local function env(v) return function(name) return name == "LLMBOX_IMAGE" and v or nil end end

    it("is the caller's, else $LLMBOX_IMAGE, else the recipe's own, on backends that run images", function()
        local py = assert(recipes.get("python"))
        assert.equal("mine:1", plan.image(images, py, "mine:1", env("org/all:2")))
        assert.equal("org/all:2", plan.image(images, py, nil, env("org/all:2")))
        assert.equal("python:3.12-slim", plan.image(images, py, nil, env(nil)))
        assert.equal("python:3.12-slim", plan.image(images, py, nil, env("")))
        -- a session without a language runs the shell recipe's image
        assert.equal("debian:bookworm-slim", plan.image(images, nil, nil, env(nil)))
        -- every shipped recipe names one
        local all = recipes.all().list
        assert.is_true(#all >= 8)
        for _, r in ipairs(all) do assert.is_string(r.image, r.name) end
    end)

    it("is none on native, unless the caller names one (which native then refuses)", function()
        local py = assert(recipes.get("python"))
        assert.is_nil(plan.image(native, py, nil, env("org/all:2")))
        assert.equal("x:1", plan.image(native, py, "x:1", env(nil)))
    end)
end)

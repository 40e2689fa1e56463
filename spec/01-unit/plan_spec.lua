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
        assert.same({ src = "/srv/wheels", dst = "/srv/wheels", optional = false }, found)
        for _, m in ipairs(plan.sandbox(with_libraries(false), nil).mounts) do
            assert.is_not.equal("/srv/wheels", m.dst)
        end
    end)

    it("is all the native driver needs, and it refuses what the jail cannot honour", function()
        local spec = plan.sandbox(assert(policy.load("default")), nil)
        spec.network.mode = "egress"
        local h, err = native.open(spec)
        assert.is_nil(h)
        assert.equal('policy "default" asks for network mode "egress"; the native backend only provides '
            .. '"none" (loopback only)', err)
        spec.network.mode = "none"
        spec.image = "python:3.12-slim"
        h, err = native.open(spec)
        assert.is_nil(h)
        assert.matches("asks for an image", err, 1, true)
        spec.image = nil
        h = assert(native.open(spec)) -- the control
        assert.equal("hi\n", assert(h:run({ argv = { "/bin/echo", "hi" }, env = {} })).stdout)
        h:close()
    end)
end)

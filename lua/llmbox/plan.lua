-- The plan stage of a run (admit -> plan -> execute -> collect -> render): the neutral sandbox
-- spec, built once in Lua from a validated policy and a recipe, and handed to any driver, which
-- translates it into its own terms (the native jail's config; an engine's HostConfig, a pod spec
-- or a bwrap command line later). No driver reads a policy itself.
--
--   plan.sandbox(policy, recipe) -> {
--     policy   = { name =, path = }        for messages that name the policy
--     network  = { mode = "none" | ... }   what the policy asks for; a driver refuses what it lacks
--     mounts   = { { src =, dst =, optional = }, ... }   read-only paths from the host
--     image    = nil                        (images: a later issue)
--     limits   = { workspace =, tmp =, cgroup = "require" | ..., cpus = }   the sandbox's own
--     syscalls = { default =, action =, deny =, allow =, deny_namespace_clone =, deny_ioctls = }
--     hostname = "llmbox",
--   }
-- Per-run parts (argv, environment, files, limits of one run, what to collect) are planned by the
-- session from the recipe and the backend's layout (session.lua, recipes/init.lua).
local ipairs, pairs = ipairs, pairs

local _M = { _VERSION = "0.1.0" }

-- The host paths a sandbox sees read-only: the policy's, the recipe's toolchain files, and the
-- offline sources the package managers read when the policy allows installs.
local function mounts(policy, recipe)
    local ro = {}
    for _, m in ipairs(policy.filesystem.ro) do
        ro[#ro + 1] = { src = m.src, dst = m.dst or m.src, optional = m.optional }
    end
    for _, p in ipairs(recipe and recipe.mounts or {}) do
        -- a toolchain that is not installed simply lacks its files: optional
        ro[#ro + 1] = { src = p, dst = p, optional = true }
    end
    local lib = policy.libraries
    if lib and lib.allow then
        -- offline sources the package managers read, at the same paths inside
        for _, d in ipairs(lib.sources.python and lib.sources.python.find_links or {}) do
            ro[#ro + 1] = { src = d, dst = d, optional = false }
        end
        local r, ruby = lib.sources.r, lib.sources.ruby
        for _, local_dir in pairs({ r = r and r.repos, ruby = ruby and ruby.source }) do
            if local_dir:sub(1, 1) == "/" then ro[#ro + 1] = { src = local_dir, dst = local_dir } end
        end
        if lib.network then
            -- name resolution for the install step (the only run that gets a network)
            ro[#ro + 1] = { src = "/etc/resolv.conf", dst = "/etc/resolv.conf", optional = true }
        end
    end
    return ro
end

--- plan.sandbox(policy, recipe) -> the neutral sandbox spec (see above)
function _M.sandbox(policy, recipe)
    local sc, lim = policy.syscalls, policy.limits
    return {
        policy = { name = policy.name, path = policy.path },
        network = { mode = policy.network.mode },
        mounts = mounts(policy, recipe),
        limits = { workspace = lim.workspace, tmp = lim.tmp, cgroup = lim.cgroup, cpus = lim.cpus },
        syscalls = {
            default = sc.default,
            action = sc.action,
            deny = sc.deny,
            allow = sc.allow,
            deny_namespace_clone = sc.deny_namespace_clone,
            deny_ioctls = sc.deny_ioctls,
        },
        hostname = "llmbox",
    }
end

return _M

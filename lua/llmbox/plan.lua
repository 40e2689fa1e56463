-- The plan stage of a run (admit -> plan -> execute -> collect -> render): the neutral sandbox
-- spec, built once in Lua from a validated policy and a recipe, and handed to any driver, which
-- translates it into its own terms (the native jail's config; an engine's HostConfig, a pod spec
-- or a bwrap command line later). No driver reads a policy itself.
--
--   plan.sandbox(policy, recipe [, { image = }]) -> {
--     policy   = { name =, path = }        for messages that name the policy
--     network  = { mode = "none" | ... }   what the policy asks for; a driver refuses what it lacks
--     mounts   = { { src =, dst =, optional =, install_source = }, ... }   read-only paths from
--                the host (install_source: a package manager's offline source)
--     image    = "name:tag" | nil           the caller's; native refuses one
--     limits   = { workspace =, tmp =, cgroup = "require" | ..., cpus =,   the sandbox's own, and
--                  memory =, processes =, open_files = }                   its runs' ceilings
--     syscalls = { default =, action =, deny =, allow =, deny_namespace_clone =, deny_ioctls =,
--                  socket_families = }
--     hostname = "llmbox",
--   }
--
-- The per-run parts, built from the same policy and recipe, the backend's layout and the request:
--
--   plan.run(policy, recipe, layout, code, opts, session_env) -> run | nil, err
--     { path, files = { {path, data, mode} }, env = { "K=V" } (sorted), cwd, limits,
--       compile = argv | nil, argv, probe = dir | nil, clean = { dir } | nil,
--       collect = { plots = { dir, max } | nil, artifacts = { dir, max } | nil } }
--   plan.warm(policy, recipe, layout, session_env) -> the spec of a prestarted program
--   plan.install(policy, recipe, packages, layout, session_env, opts) -> spec | nil, err
--   plan.exec(policy, layout, session_env, argv, opts) -> spec | nil, err
--   plan.env(policy, recipe, layout, session_env, extra) -> { "K=V", ... }
--   plan.limits(policy, opts) -> limits | nil, err
--
-- A spec here is what a driver's run takes ({ argv, env, cwd, files, clean, probe,
-- install_network, limits }); the session adds the caller's stdin and callbacks. Recipe knowledge
-- (plots, compile steps, package managers) stays in recipes and here, out of the session.
local recipes = require "llmbox.recipes"

local ipairs, pairs, type, tostring, sort, format = ipairs, pairs, type, tostring, table.sort, string.format

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
        -- (install_source: the container backends mount these too, where an image has its own /usr)
        for _, d in ipairs(lib.sources.python and lib.sources.python.find_links or {}) do
            ro[#ro + 1] = { src = d, dst = d, optional = false, install_source = true }
        end
        local r, ruby = lib.sources.r, lib.sources.ruby
        for _, local_dir in pairs({ r = r and r.repos, ruby = ruby and ruby.source }) do
            if local_dir:sub(1, 1) == "/" then
                ro[#ro + 1] = { src = local_dir, dst = local_dir, install_source = true }
            end
        end
    end
    return ro
end

--- plan.image(driver, recipe, requested [, getenv]) -> image | nil: the image a sandbox runs.
--- The caller's first; on backends that run images, then $LLMBOX_IMAGE (one image for every
--- language, e.g. an organisation's own), then the recipe's default (the shell recipe's for a
--- session without a language). Native runs no image: nil unless the caller named one, which
--- the driver then refuses.
function _M.image(driver, recipe, requested, getenv)
    if requested then return requested end
    if not (driver.capabilities and driver.capabilities.images) then return nil end
    local env = (getenv or os.getenv)("LLMBOX_IMAGE")
    if env and env ~= "" then return env end
    return (recipe or recipes.get("shell") or {}).image
end

-- { allow = list, derived = bool } when a policy's installs may use a network
local function install_network(lib)
    if not (lib.allow and lib.network) then return nil end
    local allow, derived = require("llmbox.egress").install_allow(lib)
    return { allow = allow, derived = derived }
end

--- plan.sandbox(policy, recipe) -> the neutral sandbox spec (see above)
function _M.sandbox(policy, recipe, request)
    local sc, lim = policy.syscalls, policy.limits
    return {
        -- the image the caller named (backends that run images need one; native refuses one)
        image = request and request.image or nil,
        -- how the backend gets that image: { policy = "missing" | "never" | "always", keep,
        -- on_progress } (llmbox.backends.images)
        pull = request and request.pull or nil,
        -- or how it is built: { dockerfile = path }, the Dockerfile's directory the context
        build = request and request.build or nil,
        policy = { name = policy.name, path = policy.path },
        network = { mode = policy.network.mode, allow = policy.network.allow },
        -- where library installs may go (libraries.network: through egress of their own), and
        -- whether that list was derived (its names may not all resolve)
        install_network = install_network(policy.libraries),
        mounts = mounts(policy, recipe),
        -- the sandbox's sizes, and the ceilings of its runs (a container's cgroup holds them all)
        limits = { workspace = lim.workspace, tmp = lim.tmp, cgroup = lim.cgroup, cpus = lim.cpus,
            memory = lim.memory, processes = lim.processes, open_files = lim.open_files },
        syscalls = {
            default = sc.default,
            action = sc.action,
            deny = sc.deny,
            allow = sc.allow,
            deny_namespace_clone = sc.deny_namespace_clone,
            deny_ioctls = sc.deny_ioctls,
            socket_families = sc.socket_families,
        },
        hostname = "llmbox",
        -- the kubernetes backend's pod settings (namespace, labels, isolation...); others ignore it
        kubernetes = policy.kubernetes,
    }
end

-- The limits a run may set; the policy's value is each one's ceiling.
_M.LIMIT_KEYS = { "timeout", "cpu", "memory", "processes", "open_files", "file_size", "output", "cpus" }

-- Per-run limits: the policy's, lowered by the caller where asked (opts.max_timeout replaces
-- the policy's timeout as the ceiling, for installs). A request above the ceiling is refused,
-- never silently granted.
function _M.limits(policy, opts)
    local lim = {}
    for _, k in ipairs(_M.LIMIT_KEYS) do lim[k] = policy.limits[k] end
    if opts.max_timeout then lim.timeout = opts.max_timeout end
    for _, k in ipairs(_M.LIMIT_KEYS) do
        local v = opts[k]
        if v ~= nil then
            if type(v) ~= "number" or not (v > 0) or v == math.huge then -- NaN fails v > 0
                return nil, format("%s: expected a positive number, got %s", k, tostring(v))
            end
            -- a limit the policy leaves out (cpus) has no ceiling: a run may still ask for one
            if lim[k] ~= nil and v > lim[k] then
                return nil, format("%s %s exceeds the limit of policy %q (%s); use a policy that allows more",
                    k, tostring(v), policy.name, tostring(lim[k]))
            end
            lim[k] = v
        end
    end
    return lim
end

-- The program's environment: the policy's fixed values, host variables it lets through, the
-- recipe's, the session's, then the run's. Sorted so runs are reproducible.
function _M.env(policy, recipe, layout, session_env, extra)
    local env = {}
    for k, v in pairs(policy.env.set) do env[k] = v end
    for _, name in ipairs(policy.env.pass) do
        local v = os.getenv(name)
        if v then env[name] = v end
    end
    if recipe then for k, v in pairs(recipes.env(recipe, layout)) do env[k] = v end end
    for k, v in pairs(session_env or {}) do env[k] = v end
    for k, v in pairs(extra or {}) do env[k] = v end
    local list = {}
    for k, v in pairs(env) do
        if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
            return nil, format("env: invalid variable name %q", tostring(k))
        end
        list[#list + 1] = k .. "=" .. tostring(v)
    end
    sort(list)
    return list
end

-- The run's own additions to the environment: where plots go (recipes that draw), then the
-- caller's.
local function run_env(recipe, layout, opts)
    local extra = {}
    if recipe and recipe.plots then extra.LLMBOX_PLOTS_DIR = layout.plots end
    for k, v in pairs(opts.env or {}) do extra[k] = v end
    return extra
end

-- The default directory of artifacts, and their default bound.
local ARTIFACTS_MAX = 10 * 1024 * 1024

--- plan.run(policy, recipe, layout, code, opts, session_env) -> run | nil, err (see above)
function _M.run(policy, recipe, layout, code, opts, session_env)
    local limits, err = _M.limits(policy, opts)
    if not limits then return nil, err end
    local env
    env, err = _M.env(policy, recipe, layout, session_env, run_env(recipe, layout, opts))
    if not env then return nil, err end
    -- the code goes outside the workspace, so the workspace holds only the program's files
    local path = layout.code .. "/" .. recipe.file
    local files = recipes.files(recipe, path, code, layout)
    for _, f in ipairs(opts.files or {}) do files[#files + 1] = f end
    local run = {
        path = path,
        files = files,
        env = env,
        cwd = opts.cwd or layout.workspace,
        limits = limits,
        compile = recipe.compile and recipes.argv(recipe, path, nil, recipe.compile, layout) or nil,
        argv = recipes.argv(recipe, path, opts.args, nil, layout),
        collect = {},
    }
    if recipe.plots then
        run.probe = layout.plots -- collecting plots costs a process: only when there are some
        if not opts.keep_plots then run.clean = { layout.plots } end
        run.collect.plots = { dir = layout.plots, max = policy.limits.tmp }
    end
    if opts.artifacts then
        run.collect.artifacts = {
            dir = opts.artifacts == true and layout.workspace .. "/output" or opts.artifacts,
            max = opts.artifacts_max or ARTIFACTS_MAX,
        }
    end
    return run
end

--- plan.warm(policy, recipe, layout, session_env [, program [, preload]]) -> the spec of the recipe's
--- prestarted program (recipe.warm, or `program`: recipe.interactive) with the environment and
--- limits a cold run with no options would get, or nil when it has none
function _M.warm(policy, recipe, layout, session_env, program, preload)
    program = program or (recipe and recipe.warm)
    if not program then return nil end
    local env, err = _M.env(policy, recipe, layout, session_env, run_env(recipe, layout, {}))
    if not env then return nil, err end
    local argv = recipes.argv(recipe, layout.code .. "/" .. recipe.file, nil, program.run, layout)
    if preload and #preload > 0 then
        if not program.preload then return nil, format("recipe %q cannot preload modules", recipe.name) end
        for _, a in ipairs(program.preload.args) do argv[#argv + 1] = a end
        for _, m in ipairs(preload) do argv[#argv + 1] = m end
    end
    return {
        argv = argv,
        env = env,
        cwd = layout.workspace,
        limits = assert(_M.limits(policy, {})),
        probe = recipe.plots and layout.plots or nil,
        files = recipes.warm_files(recipe, layout, program),
    }
end

local CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

--- plan.install(policy, recipe, packages, layout, session_env, opts) -> spec | nil, err: the
--- package manager's run (packages already admitted), bounded by the policy's libraries.timeout
function _M.install(policy, recipe, packages, layout, session_env, opts)
    local lib = policy.libraries
    local limits, err = _M.limits(policy, {
        timeout = math.min(lib.timeout, opts.timeout or lib.timeout),
        max_timeout = lib.timeout, -- installs may take longer than a run
    })
    if not limits then return nil, err end
    -- package managers trust the host's CA store (mounted read-only with /etc/ssl/certs), so an
    -- operator's TLS-inspecting proxy or private registry works as on the host
    local env
    env, err = _M.env(policy, recipe, layout, session_env, { SSL_CERT_FILE = CA_BUNDLE,
        NODE_EXTRA_CA_CERTS = CA_BUNDLE, PIP_CERT = CA_BUNDLE, REQUESTS_CA_BUNDLE = CA_BUNDLE })
    if not env then return nil, err end
    return {
        argv = recipes.install_argv(recipe, packages, lib.sources[recipe.name] or {}, layout),
        env = env,
        cwd = layout.workspace,
        limits = limits,
        install_network = lib.network,
        files = {},
    }
end

--- plan.exec(policy, layout, session_env, argv, opts) -> spec | nil, err: a command of the
--- caller's (no recipe)
function _M.exec(policy, layout, session_env, argv, opts)
    local limits, err = _M.limits(policy, opts)
    if not limits then return nil, err end
    local env
    env, err = _M.env(policy, nil, layout, session_env, opts.env)
    if not env then return nil, err end
    return {
        argv = argv,
        env = env,
        cwd = opts.cwd or layout.workspace,
        limits = limits,
        files = opts.files or {},
    }
end

return _M

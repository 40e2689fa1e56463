-- Sessions: one live sandbox (a jail on the native backend, a container elsewhere). Each run or
-- exec starts a fresh process tree inside it, and the whole tree is gone when the call returns;
-- the workspace (/sandbox) is kept until close().
local policy_mod = require "llmbox.policy"
local checks = require "llmbox.checks"
local admit = require "llmbox.admit"
local recipes = require "llmbox.recipes"
local core = require "llmbox.core"
local backends = require "llmbox.backends"
local artifacts = require "llmbox.artifacts"
local warm = require "llmbox.warm"
local plan = require "llmbox.plan"
local interactive = require "llmbox.interactive"
local images = require "llmbox.backends.images"
local images_pull = images.PULL

local type, pairs, ipairs, tostring, setmetatable = type, pairs, ipairs, tostring, setmetatable
local sort, format = table.sort, string.format

local util = require "llmbox.util"
local now_ms = util.now_ms

local _M = { _VERSION = "0.1.0" }
local Session = {}
Session.__index = Session


local function load_policy(p)
    if p == nil then p = os.getenv("LLMBOX_POLICY") or "default" end
    if type(p) == "table" and p.limits and p.syscalls and p.name then return p end
    if type(p) ~= "string" then error("policy: expected a policy name or path, got " .. type(p), 3) end
    return policy_mod.load(p)
end

_M.load_policy = load_policy

-- Environment variables a caller hands in: names a shell could export.
local function check_env(env, level)
    if env == nil then return end
    if type(env) ~= "table" then error("env must be a table of NAME = value", level + 1) end
    for k in pairs(env) do
        if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
            error(format("env: invalid variable name %q", tostring(k)), level + 1)
        end
    end
end

-- The options of a session's image, for backends that run images (docker, podman).
local IMAGE_OPTS = { image = 1, pull = 1, keep_image = 1, on_progress = 1, runtime = 1, dockerfile = 1 }

--- checks the image options of a session or pool (what = "session" | "pool"); caller mistakes raise
function _M.check_image_opts(opts, what, level)
    if opts.image ~= nil and (type(opts.image) ~= "string" or opts.image == "") then
        error(what .. ": image must be an image name (\"python:3.12-slim\")", level + 1)
    end
    if opts.pull ~= nil and not images_pull[opts.pull] then
        error(format("%s: pull must be \"missing\" (the default), \"never\" or \"always\", got %s", what,
            tostring(opts.pull)), level + 1)
    end
    if opts.keep_image ~= nil and type(opts.keep_image) ~= "boolean" then
        error(what .. ": keep_image must be a boolean", level + 1)
    end
    if opts.on_progress ~= nil and type(opts.on_progress) ~= "function" then
        error(what .. ": on_progress must be a function", level + 1)
    end
    if opts.dockerfile ~= nil and (type(opts.dockerfile) ~= "string" or opts.dockerfile == "") then
        error(what .. ": dockerfile must be the path of a Dockerfile", level + 1)
    end
    if opts.runtime ~= nil and type(opts.runtime) ~= "table" then
        error(what .. ": runtime must be a table of engine options ({ mem_limit = \"256m\" })", level + 1)
    end
end

-- The transports of images that backends with the rootfs capability take instead of an image
-- name (the names skopeo and podman use; llmbox.backends.unpack).
local TRANSPORTS = require("llmbox.backends.unpack").TRANSPORTS

--- session.rootfs(driver, recipe, opts) -> host path | nil [, err]: the root filesystem a session
--- runs (opts.rootfs, or opts.image = "dir:DIR"), checked: a directory with a /usr, that holds
--- the recipe's interpreter (resolved inside it, as the jail will); nil when none was asked for
function _M.rootfs(driver, recipe, opts)
    local dir = opts.rootfs
    local t, path = (opts.image or ""):match("^([%w%-]+):(.+)$")
    if t and TRANSPORTS[t] then
        if dir then return nil, "rootfs and an image transport (dir:, docker-archive:...): name the root filesystem once" end
        dir = path
    end
    if not dir then return nil end
    if not driver.capabilities.rootfs then
        return nil, format("backend %q runs no root filesystem of the caller's (rootfs, dir:): native does; docker "
            .. "and podman run images from their own store", driver.name)
    end
    if t and TRANSPORTS[t] and t ~= "dir" then
        -- an image archive: unpacked into the cache (once), then a root filesystem like any
        local err
        dir, err = require("llmbox.backends.unpack").rootfs(opts.image)
        if not dir then return nil, err end
    end
    local real = core.resolve_in_root("/", dir)
    if not real or not core.resolve_in_root(real, "/usr") then
        return nil, format("root filesystem %s: not a directory with a /usr (a Debian, Alpine... root, as "
            .. "debootstrap or an unpacked image leaves it)", dir)
    end
    if recipe then
        local bin = recipes.argv(recipe, driver.layout.code .. "/" .. recipe.file, nil, nil, driver.layout)[1]
        if bin:sub(1, 1) == "/" and not core.resolve_in_root(real, bin) then
            return nil, format("root filesystem %s has no %s, the %s recipe's interpreter: use an image with %s",
                dir, bin, recipe.name, recipe.name)
        end
    end
    return real
end

--- the sandbox spec (plan.sandbox's) for a session's or pool's options: the image and how to
--- get it, and the engine options (runtime = { ... }, llmbox.backends.runtime) folded in; nil, err
--- when the backend runs no images but image options were given, or an option is refused
function _M.sandbox_spec(driver, policy, recipe, opts)
    local rootfs, rerr = _M.rootfs(driver, recipe, opts)
    if rerr then return nil, rerr end
    if rootfs then
        -- the image was a directory's name (dir:DIR): it is the root filesystem, not an image
        local o = {}
        for k, v in pairs(opts) do o[k] = v end
        o.image, o.rootfs = nil, nil
        local spec, err = _M.sandbox_spec(driver, policy, recipe, o)
        if spec then spec.rootfs = rootfs end
        return spec, err
    end
    if not driver.capabilities.images then
        for _, k in ipairs({ "pull", "keep_image", "on_progress", "runtime", "dockerfile" }) do
            if opts[k] ~= nil then
                return nil, format("backend %q runs no images: %s applies to backends that do (docker, podman)",
                    driver.name, k)
            end
        end
    end
    if (opts.keep or opts.container) and not driver.capabilities.existing_sandbox then
        return nil, format("backend %q cannot keep a sandbox past its session or attach to one (%s): docker and "
            .. "podman can", driver.name, opts.keep and "keep" or "container")
    end
    if opts.container then
        -- the container's image is its own
        for _, k in ipairs({ "pull", "keep_image", "dockerfile", "keep" }) do
            if opts[k] ~= nil then
                return nil, format("container and %s: an attached container was made already, with its image", k)
            end
        end
        local spec = plan.sandbox(policy, recipe, { image = opts.image })
        spec.attach = opts.container
        if opts.runtime ~= nil then
            local err
            spec, err = require("llmbox.backends.runtime").apply(spec, opts.runtime)
            if not spec then return nil, err end
        end
        return spec
    end
    local request = { image = plan.image(driver, recipe, opts.image),
        pull = { policy = opts.pull, keep = opts.keep_image, on_progress = opts.on_progress } }
    if opts.dockerfile then
        if opts.pull then return nil, "pull and dockerfile: an image is either pulled or built, not both" end
        -- built under the caller's name, else under one of llmbox's that goes with the session
        -- (unless keep_image = true)
        request.image = opts.image or ("localhost/llmbox-build:" .. util.random_hex(8))
        request.build = { dockerfile = opts.dockerfile }
        if opts.keep_image == nil then request.pull.keep = opts.image ~= nil end
    end
    local spec = plan.sandbox(policy, recipe, request)
    spec.keep = opts.keep
    if opts.runtime == nil then return spec end
    return require("llmbox.backends.runtime").apply(spec, opts.runtime)
end

--- llmbox.session{ lang = "python", policy = "default", backend = "native", env = {} [, image = "...",
---   pull = "missing" | "never" | "always", keep_image = true, on_progress = function(doc),
---   runtime = { engine options }, dockerfile = "path/Dockerfile", keep = true, container = "id"] }
--- keep: the sandbox outlives close() and this process (s:id() names it); container: attach to
--- one kept so (under the policy and options it was made with)
--- llmbox.session{ pool = p [, env = {}] }: a lease from a pool (llmbox.pool); close() returns it
function _M.new(opts)
    opts = opts or {}
    if type(opts) ~= "table" then error("session options must be a table", 2) end
    for k in pairs(opts) do
        if not ({ lang = 1, policy = 1, backend = 1, env = 1, pool = 1, keep = 1, container = 1, interactive = 1,
            rootfs = 1 })[k] and not IMAGE_OPTS[k] then
            error(format("session: unknown option %q (known: lang, policy, backend, env, pool, image, pull, "
                .. "keep_image, on_progress, runtime, dockerfile, keep, container, interactive, rootfs)", tostring(k)), 2)
        end
    end
    check_env(opts.env, 2)
    _M.check_image_opts(opts, "session", 2)
    if opts.keep ~= nil and type(opts.keep) ~= "boolean" then error("session: keep must be a boolean", 2) end
    if opts.rootfs ~= nil and (type(opts.rootfs) ~= "string" or opts.rootfs == "") then
        error("session: rootfs must be the path of a root filesystem (a directory)", 2)
    end
    if opts.interactive ~= nil and type(opts.interactive) ~= "boolean" then
        error("session: interactive must be a boolean", 2)
    end
    if opts.container ~= nil and (type(opts.container) ~= "string" or opts.container == "") then
        error("session: container must be a container's id or name", 2)
    end
    if opts.pool ~= nil then
        if type(opts.pool) ~= "table" or type(opts.pool.acquire) ~= "function" then
            error("session: pool must be a pool made by llmbox.pool{...}", 2)
        end
        if opts.lang or opts.policy or opts.backend or opts.image or opts.pull or opts.keep_image ~= nil
            or opts.on_progress or opts.runtime or opts.dockerfile or opts.keep ~= nil or opts.container then
            error("session: lang, policy, backend and the image come from the pool; give only pool (and env)", 2)
        end
        return opts.pool:acquire({ env = opts.env })
    end
    local recipe, err
    if opts.lang then
        recipe, err = recipes.get(opts.lang)
        if not recipe then return nil, err end
    end
    local policy
    policy, err = load_policy(opts.policy)
    if not policy then return nil, err end
    local driver
    driver, err = backends.get(opts.backend or backends.default())
    if not driver then return nil, err end
    if opts.interactive then
        local ok, ierr = interactive.check(driver, recipe)
        if not ok then return nil, ierr end
    end
    local spec
    spec, err = _M.sandbox_spec(driver, policy, recipe, opts)
    if not spec then return nil, err end
    local handle
    handle, err = driver.open(spec)
    if not handle then return nil, "cannot create the sandbox: " .. tostring(err) end
    local s = _M.wrap(driver, policy, recipe, handle, opts.env)
    s.interactive = opts.interactive or nil
    return s
end

-- A session around a handle a driver already opened (pools build theirs ahead of time).
function _M.wrap(driver, policy, recipe, handle, env)
    return setmetatable({
        recipe = recipe,
        policy = policy,
        backend = driver.name,
        driver = driver,
        -- where the workspace, the code and the plots are in this backend's sandboxes
        layout = driver.layout,
        env = env or {},
        handle = handle,
        runs = 0,
    }, Session)
end

local RUN_OPTS = { -- probe is internal (set by run)
    timeout = 1, cpu = 1, memory = 1, processes = 1, open_files = 1, file_size = 1, output = 1, cpus = 1,
    stdin = 1, args = 1, env = 1, on_stdout = 1, on_stderr = 1, cwd = 1, files = 1,
    libraries = 1, keep_plots = 1, artifacts = 1, artifacts_max = 1, on_phase = 1,
}

-- Copies and artifacts reach the workspace only, as the README promises. The native backend's C
-- side also takes the jail's /tmp, which holds llmbox's own files (the code, a run's plots): run()
-- collects those itself through the handle, never through these public doors.
local function outside_workspace(workspace, path)
    if path:sub(1, 1) == "/" and path:sub(1, #workspace + 1) ~= workspace .. "/" then
        return format("path %s is outside the workspace: use a path under %s/ or one relative to it", path, workspace)
    end
end

local function check_opts(opts, level, workspace)
    if opts == nil then return {} end
    if type(opts) ~= "table" then error("run options must be a table", level + 1) end
    for k in pairs(opts) do
        if not RUN_OPTS[k] then error(format("run: unknown option %q", tostring(k)), level + 1) end
    end
    local a = opts.artifacts
    if a ~= nil and a ~= true and a ~= false then
        if type(a) ~= "string" then error("artifacts must be true or a directory under " .. workspace .. "/", level + 1) end
        if outside_workspace(workspace, a) then error("artifacts: " .. outside_workspace(workspace, a), level + 1) end
    end
    for _, k in ipairs({ "on_stdout", "on_stderr", "on_phase" }) do
        if opts[k] ~= nil and type(opts[k]) ~= "function" then error(k .. " must be a function", level + 1) end
    end
    check_env(opts.env, level + 1)
    return opts
end

-- The execute stage: one planned spec (llmbox.plan) run by the driver, with the caller's stdin
-- and callbacks.
function Session:_execute(spec, opts)
    if not self.handle then return nil, "session is closed" end
    spec.stdin, spec.on_stdout, spec.on_stderr = opts.stdin, opts.on_stdout, opts.on_stderr
    self.runs = self.runs + 1
    local res, err = self.handle:run(spec)
    if not res then return nil, err end
    res.limit_value = res.limit and spec.limits[res.limit] or nil
    self:_network(res)
    return res
end

-- Egress's refusals during the run (native sessions with network mode "egress").
function Session:_network(res)
    if self.handle and self.handle.network_denied then
        res.network_denied = self.handle:network_denied()
    end
end

-- Pooled sessions may hold a prestarted program (see pool.lua and warm.lua): an interpreter that
-- started with this session's environment and limits and waits for its code. It serves the first
-- run only if that run needs nothing it was not started with; otherwise it is dropped and the run
-- starts cold.
function Session:_take_warm(recipe, run, opts)
    local w = self._warm
    if not w then return nil end
    self._warm = nil
    if warm.serves(w, recipe, run.env, opts.cwd, self.layout.workspace, opts)
        and (not w.pending.serves or w.pending:serves(opts))
        and w.pending:wait(w.wait_ms) == "ready" then
        return w
    end
    w.pending:abandon()
    return nil
end

--- s:prestart([preload]) -> true | false (the recipe or the backend has no warm start) | nil, err
--- (preload: module names the warm program imports before it waits; pools' `preload`)
--- Starts the recipe's warm program in this sandbox, for its next run (pools call it on sandboxes
--- nobody has used yet).
function Session:prestart(preload)
    local recipe = self.recipe
    if not (recipe and recipe.warm and self.handle and self.handle.prestart) then return false end
    if self._warm then return true end
    local spec, err = plan.warm(self.policy, recipe, self.layout, self.env, nil, preload)
    if not spec then return nil, err end
    local pending
    pending, err = self.handle:prestart(spec)
    if not pending then return nil, err end
    self._warm = warm.new(pending, recipe, spec.env)
    return true
end

--- s:warm_state() -> "ready" | "starting" | "dead" | nil (no warm program)
function Session:warm_state()
    return self._warm and warm.state(self._warm) or nil
end

--- s:healthy() -> true when the sandbox (and its warm program, if any) can still serve a run
function Session:healthy()
    if not self.handle or self.handle:closed() then return false end
    if self._kernel and interactive.dead(self._kernel) then return false end
    return self:warm_state() ~= "dead"
end

--- s:prestart_interactive([preload]) -> true | nil, err: starts an interactive session's interpreter
--- ahead of its first cell, without waiting for it (interactive pools; preload: module names)
function Session:prestart_interactive(preload)
    if self._kernel then return true end
    local k, err = interactive.prestart(self, preload)
    if not k then return nil, err end
    self._kernel = k
    return true
end

--- s:reset() -> true | nil, err: empties the workspace and /tmp for the sandbox's next user and
--- drops the warm program (pools reuse sandboxes this way when max_uses > 1).
function Session:reset()
    if not self.handle then return nil, "session is closed" end
    self:_drop_warm()
    self:_drop_kernel()
    return self.handle:reset()
end

function Session:_drop_warm()
    if self._warm then
        self._warm.pending:abandon()
        self._warm = nil
    end
end

-- An interactive session's interpreter, and with it the cells' state.
function Session:_drop_kernel()
    if self._kernel then
        self._kernel.pending:abandon()
        self._kernel = nil
    end
end

--- s:handoff([env] [, on_close]) -> a new session on the same sandbox, with this one's warm
--- program; this session is closed without closing the sandbox. Pools lease sandboxes this way:
--- each lease is a new object, dead once closed, so a stale reference never reaches the next
--- user. on_close(lease), when given, is called by the new session's close() instead of closing
--- the sandbox.
function Session:handoff(env, on_close)
    if not self.handle then return nil, "session is closed" end
    local s = _M.wrap(self.driver, self.policy, self.recipe, self.handle, env or self.env)
    s._warm, self._warm = self._warm, nil
    s._kernel, self._kernel = self._kernel, nil
    s.interactive = self.interactive
    if s._warm then s._warm.wait_ms = warm.LEASE_WAIT_MS end
    s._on_close = on_close
    self.handle = nil
    return s
end

function Session:_exec_warm(w, run, code, opts)
    local limits = run.limits
    local request, err = warm.request(run.path, self.layout.workspace, opts.args or {}, code)
    if not request then
        w.pending:abandon()
        return nil, err
    end
    self.runs = self.runs + 1
    local res, rerr = w.pending:finish({
        request = request,
        stdin = opts.stdin,
        timeout = limits.timeout,
        output = limits.output,
        on_stdout = opts.on_stdout,
        on_stderr = opts.on_stderr,
    })
    if not res then return nil, rerr end
    res.warm = true
    res.limit_value = res.limit and limits[res.limit] or nil
    self:_network(res)
    return res
end

--- s:is_safe(code [, lang]) -> safe, report
function Session:is_safe(code, lang)
    if type(code) ~= "string" then error("code must be a string", 2) end
    local recipe = self.recipe
    if lang then recipe = assert(recipes.get(lang)) end
    local report = checks.check(code, recipe and (recipe.checks or recipe.name) or "*", self.policy.checks)
    return report.safe, report
end

_M.describe_violations = admit.describe_violations

--- s:run(code, opts [, admission]) -> result | nil, err [, report]
--- The run's pipeline: admit (llmbox.admit: the policy's checks; skipped when `admission` is one
--- admit.run made for this code, recipe and policy before the sandbox existed), install the
--- libraries, place the files and run (the driver), collect plots and artifacts. Rendering is the
--- door's (llmbox.render). With on_phase, the install's output streams to on_stdout/on_stderr
--- and on_phase("install") / on_phase("run") mark where each step starts.
function Session:run(code, opts, admission)
    if type(code) ~= "string" then error("code must be a string", 2) end
    opts = check_opts(opts, 2, self.layout.workspace)
    local recipe = self.recipe
    if not recipe then return nil, "this session has no language: create it with llmbox.session{ lang = ... }" end
    if self.interactive then
        -- a cell's %pip install lines: installed first, like opts.libraries
        local libs
        code, libs = interactive.magics(recipe, code)
        if not code then return nil, libs end
        if libs then
            local copy = {} -- (the caller's table stays as it was)
            for k, v in pairs(opts) do copy[k] = v end
            opts = copy
            local all = {}
            for _, l in ipairs(opts.libraries or {}) do all[#all + 1] = l end
            for _, l in ipairs(libs) do all[#all + 1] = l end
            opts.libraries = all
        end
    end
    if not admit.covers(admission, code, recipe, self.policy) then
        local err, report
        admission, err, report = admit.run(code, recipe, self.policy, opts.libraries)
        if not admission then return nil, err, report end
    end
    local report = admission.report
    if self.interactive then
        local ok, cerr = interactive.cell_opts(opts)
        if not ok then return nil, cerr end
    end
    if opts.libraries and #opts.libraries > 0 then
        if opts.on_phase then opts.on_phase("install") end
        local inst, ierr = self:install(opts.libraries, opts.on_phase
            and { on_stdout = opts.on_stdout, on_stderr = opts.on_stderr } or nil)
        if not inst then return nil, ierr end
        if inst.exit_code ~= 0 or inst.limit then
            inst.phase = "install"
            return inst
        end
        if opts.on_phase then opts.on_phase("run") end
    end
    if self.interactive then return self:_cell(code, opts, report) end
    local run, err = plan.run(self.policy, recipe, self.layout, code, opts, self.env)
    if not run then return nil, err end
    local res
    if run.compile then
        -- Compiled languages: the compile step shares the run's wall clock; a failed compile is
        -- the program's failure (its errors on stderr), not the sandbox's.
        local started = now_ms()
        res, err = self:_execute({ argv = run.compile, env = run.env, cwd = run.cwd, files = run.files,
            clean = run.clean, probe = run.probe, limits = run.limits }, opts)
        if not res then return nil, err end
        res.phase = "compile"
        if res.exit_code ~= 0 or res.limit then return res end
        local compile = { exit_code = res.exit_code, stdout = res.stdout, stderr = res.stderr,
            duration_ms = res.duration_ms }
        local limits = {} -- a copy: the core reads tables raw
        for k, v in pairs(run.limits) do limits[k] = v end
        limits.timeout = math.max(0.001, run.limits.timeout - (now_ms() - started) / 1000)
        res, err = self:_execute({ argv = run.argv, env = run.env, cwd = run.cwd, files = {},
            probe = run.probe, limits = limits }, opts)
        if res then
            res.compile = compile
            res.duration_ms = res.duration_ms + compile.duration_ms
        end
    else
        local w = self:_take_warm(recipe, run, opts)
        if w then
            res, err = self:_exec_warm(w, run, code, opts)
        else
            res, err = self:_execute({ argv = run.argv, env = run.env, cwd = run.cwd, files = run.files,
                clean = run.clean, probe = run.probe, limits = run.limits }, opts)
        end
    end
    if not res then return nil, err end
    if #report.violations > 0 then res.warnings = report.violations end
    local want = run.collect
    if want.plots then
        local plots, perr = {}, nil
        if res.probe_found ~= false then plots, perr = self:_collect(want.plots.dir, want.plots.max) end
        if not plots then return nil, perr end
        res.plots = artifacts.plots(plots)
    end
    if want.artifacts then
        local files_out, ferr = self:_collect(want.artifacts.dir, want.artifacts.max)
        if not files_out then return nil, ferr end
        res.files = files_out
    end
    return res
end

-- An interactive session's run: a cell of its interpreter, started first if there is none (the
-- session's first cell, or the one after a cell that ended it).
function Session:_cell(code, opts, report)
    if not self.handle then return nil, "session is closed" end
    local limits, err = plan.limits(self.policy, opts)
    if not limits then return nil, err end
    if self._kernel and not interactive.ready(self._kernel) then self:_drop_kernel() end
    if not self._kernel then
        self._kernel, err = interactive.start(self)
        if not self._kernel then return nil, err end
    end
    self.runs = self.runs + 1
    local res
    res, err = interactive.cell(self._kernel, code, limits, opts)
    if not res or res.state_lost then self._kernel = nil end
    if not res then return nil, err end
    self:_network(res)
    if #report.violations > 0 then res.warnings = report.violations end
    if self.recipe.plots then
        local plots, perr = {}, nil
        if res.probe_found then plots, perr = self:_collect(self.layout.plots, self.policy.limits.tmp) end
        if not plots then return nil, perr end
        res.plots = artifacts.plots(plots)
    end
    return res
end

-- The collect stage: a directory of results (plots, artifacts) read out of the sandbox as
-- { {name, size, data}, ... } sorted by name ({} when the directory does not exist), bounded by
-- `max` bytes in all. The driver hands the files over in memory (a tar stream from its side,
-- checked like any untrusted archive); nothing is written on the host.
function Session:_collect(dir, max)
    local files, err, code = self.handle:collect(dir, max)
    if not files then
        if code == "ENOENT" then return {} end
        return nil, "collecting " .. dir .. ": " .. tostring(err)
    end
    for _, f in ipairs(files) do
        if f.name == "" then f.name = dir:match("[^/]+$") end -- dir was a single file
    end
    sort(files, function(a, b) return a.name < b.name end)
    return files
end

--- s:install{ "pkg", ... } -> result (the package manager's run) | nil, err
function Session:install(packages, opts)
    if type(packages) ~= "table" then error("install: expected a list of package names", 2) end
    opts = opts or {}
    local recipe = self.recipe
    local ok, aerr = admit.libraries(packages, recipe, self.policy)
    if not ok then return nil, aerr end
    -- a prestarted interpreter looked for the install directory before it existed (and cached
    -- that): the next run starts cold instead
    self:_drop_warm()
    local spec, err = plan.install(self.policy, recipe, packages, self.layout, self.env, opts)
    if not spec then return nil, err end
    if spec.install_network and self.handle and self.handle.install_network then
        -- its own egress (native), never the host's network
        local hosts, nerr = self.handle:install_network()
        if not hosts then return nil, nerr end
        spec.hosts = hosts
    end
    local res
    res, err = self:_execute(spec, opts)
    if res then
        res.phase = "install"
        if spec.install_network and self.handle.network_denied then
            res.network_denied = self.handle:network_denied(true)
        end
    end
    return res, err
end

--- s:exec(argv | "shell string", opts) -> result | nil, err
function Session:exec(cmd, opts)
    opts = check_opts(opts, 2, self.layout.workspace)
    local argv
    if type(cmd) == "string" then
        argv = { "/bin/sh", "-c", cmd }
    elseif type(cmd) == "table" and #cmd > 0 then
        argv = {}
        for i, a in ipairs(cmd) do
            if type(a) ~= "string" then error(format("exec: argv[%d] must be a string", i), 2) end
            argv[i] = a
        end
    else
        error("exec: expected an argv array or a shell command string", 2)
    end
    local spec, err = plan.exec(self.policy, self.layout, self.env, argv, opts)
    if not spec then return nil, err end
    return self:_execute(spec, opts)
end

--- s:copy_to(host_path, "/sandbox/path") and s:copy_from("/sandbox/path", host_path [, max_bytes])
function Session:copy_to(src, dst)
    if type(src) ~= "string" or type(dst) ~= "string" then error("copy_to(host_path, sandbox_path)", 2) end
    if not self.handle then return nil, "session is closed" end
    local why = outside_workspace(self.layout.workspace, dst)
    if why then return nil, why end
    return self.handle:copy_in(src, dst)
end

function Session:copy_from(src, dst, max)
    if type(src) ~= "string" or type(dst) ~= "string" then error("copy_from(sandbox_path, host_path)", 2) end
    if not self.handle then return nil, "session is closed" end
    local why = outside_workspace(self.layout.workspace, src)
    if why then return nil, why end
    return self.handle:copy_out(src, dst, max or self.policy.limits.workspace)
end

--- s:commit(image) -> image | nil, err: saves the session as a new image (name[:tag]): its image
--- with the workspace as it is now. A session opened from that image starts with those files,
--- and a reset goes back to them. Backends that run images only (capabilities.commit).
function Session:commit(image)
    if type(image) ~= "string" or image == "" then error("commit(image): expected an image name (\"name:tag\")", 2) end
    if not self.handle then return nil, "session is closed" end
    local ok, err, code = self:can_commit(image)
    if not ok then return nil, err, code end
    return self.handle:commit(image)
end

--- s:can_commit(image) -> true | nil, err: would commit(image) be taken (a one-shot run asks
--- before it runs, so that a commit it cannot make costs no run)
function Session:can_commit(image)
    if not self.driver.capabilities.commit then
        return nil, format("backend %q cannot commit a sandbox to an image: it runs no images (use docker or podman)",
            self.backend), "EOPNOTSUPP"
    end
    local ok, err = images.commit_target(image)
    if not ok then return nil, err, "EINVAL" end
    return true
end

--- s:id() -> the sandbox's id on its backend (a container's), or nil (native's have none)
function Session:id()
    return self.handle and self.handle.id or nil
end

--- s:close([{ remove = true }]): ends the session; a kept or attached container stays, as it is,
--- unless remove = true
function Session:close(opts)
    if opts ~= nil and type(opts) ~= "table" then error("close([{ remove = true }])", 2) end
    self:_drop_warm()
    self:_drop_kernel()
    if self._on_close then
        -- a lease goes back to its pool, which decides to reset or destroy the sandbox
        local on_close = self._on_close
        self._on_close = nil
        on_close(self)
        self.handle = nil
        return true
    end
    if self.handle then
        self.handle:close(opts)
        self.handle = nil
    end
    return true
end

function Session:closed()
    return self.handle == nil
end

--- session.one_shot(opts) -> session | nil, err: a one-shot run's session (llmbox.run, `llmbox
--- exec`), refused up front when opts.commit could not be made
function _M.one_shot(opts, commit)
    local s, err = _M.new(opts)
    if not s then return nil, err end
    if commit then
        local ok, cerr = s:can_commit(commit)
        if not ok then
            s:close()
            return nil, cerr
        end
    end
    return s
end

--- session.conclude(s, r, opts): what a one-shot run (llmbox.run, `llmbox exec`) does with its
--- session after the run r (which may be nil): r.container names a kept or attached container
--- that stays; opts.commit = "image" saves it (r.committed, or r.commit_error: the run's output
--- is not lost over a failed commit); then it closes (opts.remove removes an attached one).
function _M.conclude(s, r, opts)
    if r and (opts.keep or opts.container) and not opts.remove then r.container = s:id() end
    if r and opts.commit then
        local image, err = s:commit(opts.commit)
        r.committed, r.commit_error = image, not image and err or nil
    end
    s:close({ remove = opts.remove and true or nil })
end

_M.Session = Session
return _M

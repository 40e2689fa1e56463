-- Pools of ready sandboxes, for any backend that declares the `pool` capability.
--
--   local p = assert(llmbox.pool{ lang = "python", min = 2, max = 10 })
--   local s = assert(llmbox.session{ pool = p })   -- or p:acquire()
--   s:run("print(1)"); s:close()                     -- back to the pool: destroyed or reset
--   p:stats(); p:close()
--
-- A slot is one sandbox the pool owns (a session of the pool's own). Callers never get it:
-- each lease is a new session object handed off from it (Session:handoff), dead once closed, so
-- a stale reference cannot reach the next user's sandbox. With max_uses = 1 (the default) a slot
-- serves one lease and is destroyed; with more, it is emptied (Session:reset) before its next.
-- The pool uses only the sessions' public methods and the driver's open and maintain.
--
-- Warm start: where the recipe has a `warm` program and the backend can prestart runs, each
-- slot holds an interpreter that already started inside it and waits for its code (warm.lua,
-- Session:prestart); the lease's first run uses it.
--
-- Why prestarted jails and not a fork server (zygote): a zygote forks one pre-initialised
-- interpreter for every run, so every sandbox would inherit the same memory image: the same
-- address layout, stack canary and string-hash seed, and whatever the zygote's imports left in
-- memory, shared by all users, plus a privileged process outside any jail that must be able to
-- create namespaces. A prestarted program is an ordinary run that began early: exec'd fresh in its
-- own never-used jail (own user, mount, pid, ipc, uts and network namespaces, workspace, seccomp
-- filter, rlimits and cgroup), then left waiting on fd 3 for its code. Nothing is shared between
-- leases, and it works for any recipe with a warm program. The price: an idle sandbox holds a
-- whole interpreter's memory, and refilling costs one interpreter start, which bounds the rate of
-- fresh sandboxes (the benchmark in bench/ measures both).
--
-- Settings come from a pool policy (policies/pools/NAME.lua, validated like security
-- policies) overridden by the options given here. No event loop is assumed, and nothing costly
-- happens on a caller's path but a miss: giving a lease back (close()) never opens, resets or
-- prestarts a sandbox. That work waits for maintain(), which a long-lived process calls on a
-- timer or when it is idle (it also runs health checks, idle and lifetime expiry and
-- acquisition timeouts, and wakes waiters); an acquire that finds nothing ready does it for the
-- slots it needs.
--
-- Waiting callers are coroutines (exhaustion = "wait"): acquire yields pool.WAITING. When a
-- sandbox is ready for the first of them, the pool calls the `resume` option (`resume(co,
-- session)` or `resume(co, nil, err)`), which should hand the coroutine back to the caller's
-- scheduler (e.g. a luv idle or timer callback) so that it resumes there, and what it yields
-- next goes to that scheduler. Without `resume`, maintain() resumes it itself; a value the
-- coroutine yields then has nobody to go to and is reported on stderr.
local policy_mod = require "llmbox.policy"
local schema = require "llmbox.schema"
local recipes = require "llmbox.recipes"
local backends = require "llmbox.backends"
local session = require "llmbox.session"
local util = require "llmbox.util"

local now_ms = util.now_ms
local type, pairs, ipairs, tostring, format = type, pairs, ipairs, tostring, string.format
local co_running, co_yield, co_resume, co_status = coroutine.running, coroutine.yield, coroutine.resume,
    coroutine.status
local select, unpack, pcall = select, unpack, pcall
local remove = table.remove

local _M = { _VERSION = "0.1.0" }
local Pool = {}
Pool.__index = Pool

_M.schema = {
    type = "record",
    fields = {
        description = { type = "string", default = "" },
        -- sandboxes kept ready (idle); the target() hook may ask for more, up to max
        min = { type = "integer", min = 0, max = 10000, default = 2 },
        -- ceiling on ready plus leased sandboxes; `temporary` ones are outside it
        max = { type = "integer", min = 1, max = 10000, default = 10 },
        idle_timeout = { type = "duration", default = 300 },
        acquisition_timeout = { type = "duration", default = 30 },
        max_uses = { type = "integer", min = 1, default = 1 },
        max_lifetime = { type = "duration", default = 3600 },
        health_check_interval = { type = "duration", default = 60 },
        exhaustion = { type = "enum", values = { "wait", "fail_fast", "temporary" }, default = "wait",
            hint = "wait queues callers in arrival order; fail_fast errors at once; temporary makes "
                .. "a sandbox outside the pool and destroys it after use" },
        prewarm = { type = "boolean", default = true },
        -- start the recipe's warm program in each ready sandbox (when it has one)
        warm = { type = "boolean", default = true },
        -- modules the warm program imports before it waits (Python: "numpy", "matplotlib.pyplot"),
        -- so that a lease's code finds them imported; checked once when the pool is made
        preload = { type = "array", default = {}, of = { type = "string", pattern = "^[%a_][%w_.]*$",
            pattern_desc = 'a module name such as "numpy" or "matplotlib.pyplot"',
            finish = function(m)
                if m:find("..", 1, true) or m:sub(-1) == "." then return nil, "not a module name" end
                return m
            end } },
        libraries = { type = "array", of = "string", default = {} },
        hooks = { type = "record", fields = {
            -- target(ctx) -> how many ready sandboxes to keep now (clamped to min..max);
            -- ctx = { hour, weekday, now, demand (leases in the last minute), idle, busy, min, max }
            target = "function",
        } },
    },
}

local HOOK_TIMEOUT = 0.1 -- seconds a pool policy's hook may take

local OPTION_KEYS = { lang = 1, backend = 1, policy = 1, pool_policy = 1, env = 1, resume = 1, image = 1, pull = 1,
    runtime = 1, interactive = 1 }

-- policies/pools/NAME.lua in the policy directories, or a path
local function find_pool_policy(what)
    if what:find("/", 1, true) or what:sub(-4) == ".lua" then return what end
    local tried = {}
    for _, d in ipairs(policy_mod.dirs()) do
        local p = d .. "/pools/" .. what .. ".lua"
        local f = io.open(p, "rb")
        if f then
            f:close()
            return p
        end
        tried[#tried + 1] = p
    end
    return nil, format("pool policy %q not found (looked for %s)", what, table.concat(tried, ", "))
end

--- load_policy(name_or_path [, overrides]) -> settings | nil, err
function _M.load_policy(what, overrides)
    local raw = {}
    if what then
        local path, err = find_pool_policy(what)
        if not path then return nil, err end
        local t, ferr = policy_mod.run_file(path)
        if not t then return nil, format("pool policy %s: %s", path, ferr) end
        raw = t
    end
    for k, v in pairs(overrides or {}) do raw[k] = v end
    local settings, err = schema.check(raw, _M.schema)
    if not settings then return nil, format("pool policy %s: %s", tostring(what or "(options)"), err) end
    if settings.min > settings.max then
        return nil, format("pool policy %s: min (%d) is above max (%d)", tostring(what or "(options)"),
            settings.min, settings.max)
    end
    settings.name = what
    return settings
end

-- preload: only where a prestarted interpreter runs the leases' code (the warm program, or an
-- interactive pool's), and every module imported once, cold, in a sandbox of its own (closed
-- after), so a misspelt name fails here and not silently in every prestarted interpreter
local function check_preload(settings, recipe, driver, policy, spec, opts)
    local names = table.concat(settings.preload, ", ")
    local program = opts.interactive and recipe.interactive or recipe.warm
    if not opts.interactive and not settings.warm then
        return nil, "pool: preload needs warm = true (it loads modules into the warm program)"
    end
    if not (program and program.preload) then
        return nil, format("pool: recipe %q cannot preload modules (%s)", recipe.name, names)
    end
    local handle, err = driver.open(spec)
    if not handle then return nil, "pool: checking preload: " .. tostring(err) end
    if not handle.prestart then
        handle:close()
        return nil, format("pool: backend %q starts no warm programs, so it cannot preload (%s)", driver.name, names)
    end
    local s = session.wrap(driver, policy, recipe, handle, opts.env)
    local argv = {}
    for _, a in ipairs(program.preload.check) do argv[#argv + 1] = a end
    for _, m in ipairs(settings.preload) do argv[#argv + 1] = m end
    local r, rerr = s:exec(argv)
    s:close()
    if not r then return nil, "pool: checking preload: " .. tostring(rerr) end
    if r.exit_code ~= 0 or r.limit then
        local last = (r.stderr or ""):gsub("%s+$", ""):match("([^\n]*)$")
        return nil, format("pool: preload: importing %s in a sandbox failed (exit %d): %s", names, r.exit_code,
            last ~= "" and last or (r.limit and ("the " .. r.limit .. " limit was reached") or "no message"))
    end
    return true
end

--- llmbox.pool{ lang =, backend = "native", policy = "default", pool_policy = "default", ...settings }
function _M.new(opts)
    if type(opts) ~= "table" then error("pool: expected an options table", 2) end
    local overrides = {}
    for k, v in pairs(opts) do
        if not OPTION_KEYS[k] then
            if not _M.schema.fields[k] then
                error(format("pool: unknown option %q (see llmbox.pool in the README)", tostring(k)), 2)
            end
            overrides[k] = v
        end
    end
    if type(opts.lang) ~= "string" then error("pool: lang is required (e.g. lang = \"python\")", 2) end
    session.check_image_opts(opts, "pool", 2)
    if opts.resume ~= nil and type(opts.resume) ~= "function" then
        error("pool: resume must be a function(co, ...) that hands the coroutine to your scheduler", 2)
    end
    local recipe, err = recipes.get(opts.lang)
    if not recipe then return nil, err end
    local settings
    settings, err = _M.load_policy(opts.pool_policy or "default", overrides)
    if not settings then return nil, err end
    local driver
    driver, err = backends.get(opts.backend or backends.default())
    if not driver then return nil, err end
    if not (driver.capabilities and driver.capabilities.pool) then
        return nil, format("backend %q does not support pools", driver.name)
    end
    if opts.interactive ~= nil and type(opts.interactive) ~= "boolean" then
        error("pool: interactive must be a boolean", 2)
    end
    if opts.interactive then
        local ok, ierr = require("llmbox.interactive").check(driver, recipe)
        if not ok then return nil, ierr end
    end
    if opts.image and not driver.capabilities.images then
        return nil, format("backend %q runs no images (image %q): leave image out, or use a backend that "
            .. "runs them", driver.name, opts.image)
    end

    local sec
    sec, err = session.load_policy(opts.policy)
    if not sec then return nil, err end
    if #settings.libraries > 0 and not sec.libraries.allow then
        return nil, format("pool: libraries are listed but policy %q does not allow installs", sec.name)
    end
    -- every sandbox of the pool is opened from one spec (the image, pulled when missing by the
    -- first open, and the engine options folded in)
    local spec
    spec, err = session.sandbox_spec(driver, sec, recipe, { image = opts.image, pull = opts.pull,
        runtime = opts.runtime })
    if not spec then return nil, err end
    if #settings.preload > 0 then
        local ok, perr = check_preload(settings, recipe, driver, sec, spec, opts)
        if not ok then return nil, perr end
    end
    local self = setmetatable({
        settings = settings, recipe = recipe, driver = driver, policy = sec, env = opts.env,
        spec = spec, interactive = opts.interactive or nil,
        resume = opts.resume,
        idle = {},     -- ready slots, oldest first
        dirty = {},    -- slots given back for reuse, emptied by maintain() (or a miss)
        busy = {},     -- slot -> true
        n_busy = 0,
        waiters = {},  -- FIFO of { co =, deadline = }
        wakeups = {},  -- waiters whose answer is in, for maintain() to resume (no resume hook)
        demand = {},   -- times (ms) of recent acquisitions, for the target hook
        counters = { created = 0, recycled = 0, unhealthy = 0, waits = 0, failures = 0,
            temporary = 0, acquired = 0, hits = 0, misses = 0 },
        closed = false,
    }, Pool)
    if settings.prewarm then
        local ok, ferr = self:_fill()
        if not ok then
            self:close()
            return nil, ferr
        end
    end
    return self
end

-- ---- slots ----

function Pool:_new_slot(temporary)
    local handle, err = self.driver.open(self.spec)
    if not handle then
        self.counters.failures = self.counters.failures + 1
        return nil, "cannot create a pooled sandbox: " .. tostring(err)
    end
    local slot = { session = session.wrap(self.driver, self.policy, self.recipe, handle, self.env),
        created = now_ms(), uses = 0, temporary = temporary }
    slot.session.interactive = self.interactive
    local ok, perr = self:_ready(slot)
    if not ok then
        slot.session:close()
        self.counters.failures = self.counters.failures + 1
        return nil, perr
    end
    self.counters.created = self.counters.created + 1
    return slot
end

-- Makes a new or just-emptied slot ready for its next lease: libraries, then the warm program.
function Pool:_ready(slot)
    slot.idle_since, slot.checked = now_ms(), now_ms()
    local s = slot.session
    local libs = self.settings.libraries
    if #libs > 0 then
        local r, err = s:install(libs)
        if not r then return nil, "pool: installing libraries: " .. tostring(err) end
        if r.exit_code ~= 0 or r.limit then
            return nil, format("pool: installing libraries failed (exit %d): %s", r.exit_code, r.stderr)
        end
    end
    if self.interactive then
        -- an interactive pool's sandboxes hold their interpreter, started and waiting for cells
        local ok, err = s:prestart_interactive(self.settings.preload)
        if not ok then return nil, "pool: starting the interactive interpreter: " .. tostring(err) end
    elseif self.settings.warm then
        local ok, err = s:prestart(self.settings.preload)
        if ok == nil then return nil, "pool: starting the warm program: " .. tostring(err) end
    end
    return true
end

function Pool:_destroy(slot, why)
    slot.session:close()
    if why == "recycled" then self.counters.recycled = self.counters.recycled + 1 end
    if why == "unhealthy" then self.counters.unhealthy = self.counters.unhealthy + 1 end
end

function Pool:_healthy(slot)
    return slot.session:healthy()
end

-- Empties one slot that came back for reuse; true when it is ready again.
function Pool:_clean_one()
    local slot = remove(self.dirty, 1)
    if not slot then return false end
    local ok, err = slot.session:reset()
    if ok then ok, err = self:_ready(slot) end
    if ok then
        self.idle[#self.idle + 1] = slot
        return true
    end
    io.stderr:write("llmbox: pool: a sandbox could not be reset, destroyed it: ", tostring(err), "\n")
    self:_destroy(slot, "unhealthy")
    return false
end

local function clamp(n, lo, hi)
    return n < lo and lo or n > hi and hi or n
end

-- How many ready sandboxes to keep now: min, or what the policy's target hook says.
function Pool:target()
    local s = self.settings
    local hook = s.hooks.target
    if not hook then return s.min end
    local t = now_ms()
    while self.demand[1] and self.demand[1] < t - 60000 do remove(self.demand, 1) end
    local date = os.date("*t")
    -- an operator's function: bounded in time like the policy file it came from (which runs
    -- with the JIT off, so the count hook fires)
    local started, old_hook, old_mask, old_count = os.clock(), debug.gethook()
    debug.sethook(function()
        if os.clock() - started > HOOK_TIMEOUT then error("took longer than " .. HOOK_TIMEOUT .. " s", 0) end
    end, "", 1000)
    local ok, n = pcall(hook, { hour = date.hour, weekday = date.wday, now = os.time(),
        demand = #self.demand, idle = #self.idle, busy = self.n_busy, min = s.min, max = s.max })
    if old_hook then debug.sethook(old_hook, old_mask, old_count) else debug.sethook() end
    if not ok or type(n) ~= "number" or n ~= n then
        io.stderr:write("llmbox: pool policy ", tostring(s.name), ": target hook failed: ",
            tostring(ok and ("returned " .. tostring(n)) or n), "; using min\n")
        return s.min
    end
    return clamp(math.floor(n), s.min, s.max)
end

-- Creates ready sandboxes up to the target, never past max (emptied ones first).
function Pool:_fill()
    while #self.dirty > 0 and not self.closed do self:_clean_one() end
    local target = self:target()
    while not self.closed and #self.idle < target and #self.idle + self.n_busy < self.settings.max do
        local slot, err = self:_new_slot(false)
        if not slot then return nil, err end
        self.idle[#self.idle + 1] = slot
    end
    return true
end

-- ---- leases ----

function Pool:_lease(slot, env)
    self.busy[slot] = true
    if not slot.temporary then self.n_busy = self.n_busy + 1 end
    local s = assert(slot.session:handoff(env or self.env, function(lease) self:_release(slot, lease) end))
    slot.session = nil
    slot.uses = slot.uses + 1
    return s
end

-- The oldest healthy ready slot, dropping broken ones.
function Pool:_take_idle()
    while #self.idle > 0 do
        local slot = remove(self.idle, 1)
        if self:_healthy(slot) then return slot end
        self:_destroy(slot, "unhealthy")
    end
end

--- p:acquire([{ env = {} }]) -> session | nil, err
function Pool:acquire(opts)
    opts = opts or {}
    if type(opts) ~= "table" then error("acquire: expected an options table", 2) end
    if self.closed then return nil, "pool is closed" end
    self.counters.acquired = self.counters.acquired + 1
    self.demand[#self.demand + 1] = now_ms()
    -- callers already waiting go first: a newcomer never takes a sandbox ahead of them
    local slot = #self.waiters == 0 and self:_take_idle() or nil
    if not slot and #self.waiters == 0 and #self.dirty > 0 then
        -- emptying a sandbox that came back beats making one
        while not slot and self:_clean_one() do slot = self:_take_idle() end
    end
    if slot then
        self.counters.hits = self.counters.hits + 1
    elseif self.n_busy < self.settings.max and #self.waiters == 0 then
        local err
        slot, err = self:_new_slot(false)
        if not slot then return nil, err end
        self.counters.misses = self.counters.misses + 1
    else
        return self:_exhausted(opts)
    end
    return self:_lease(slot, opts.env)
end

function Pool:_exhausted(opts)
    local s = self.settings
    local what = format("pool exhausted: all %d sandboxes are leased", s.max)
    if s.exhaustion == "fail_fast" then
        self.counters.failures = self.counters.failures + 1
        return nil, what .. " (exhaustion = \"fail_fast\")"
    elseif s.exhaustion == "temporary" then
        local slot, err = self:_new_slot(true)
        if not slot then return nil, err end
        self.counters.temporary = self.counters.temporary + 1
        return self:_lease(slot, opts.env)
    end
    local co, is_main = co_running()
    if not co or is_main then
        self.counters.failures = self.counters.failures + 1
        return nil, what .. ", and this caller cannot wait: call acquire from a coroutine, or set "
            .. "exhaustion = \"fail_fast\" or \"temporary\""
    end
    self.counters.waits = self.counters.waits + 1
    self.waiters[#self.waiters + 1] = { co = co, env = opts.env,
        deadline = now_ms() + s.acquisition_timeout * 1000 }
    -- resumed by _handoff (a lease) or _expire_waiters / close (nil, err), in arrival order
    return co_yield(_M.WAITING)
end

-- A value the waiting coroutine yields, so a scheduler can tell a pool wait from other yields.
_M.WAITING = setmetatable({}, { __tostring = function() return "llmbox.pool: waiting" end })

-- Hands a waiter its answer: through the caller's scheduler when the pool has a resume hook;
-- else queued for maintain() to resume, never inside another caller's close().
function Pool:_wake(w, ...)
    if self.resume then
        local ok, err = pcall(self.resume, w.co, ...)
        if not ok then io.stderr:write("llmbox: pool: the resume hook failed: ", tostring(err), "\n") end
        return
    end
    self.wakeups[#self.wakeups + 1] = { co = w.co, n = select("#", ...), ... }
end

-- Resumes the waiters whose answer is in (no resume hook); what they yield has nobody to go to.
function Pool:_run_wakeups()
    while #self.wakeups > 0 do
        local w = remove(self.wakeups, 1)
        local ok, what = co_resume(w.co, unpack(w, 1, w.n))
        if not ok then
            io.stderr:write("llmbox: pool waiter failed: ", tostring(what), "\n")
        elseif co_status(w.co) == "suspended" and what ~= _M.WAITING then
            io.stderr:write("llmbox: pool: a waiter resumed by maintain() yielded ", tostring(what),
                ", which nobody receives; give llmbox.pool a resume hook to resume waiters in your scheduler\n")
        end
    end
end

function Pool:_expire_waiters()
    local t = now_ms()
    local i = 1
    while i <= #self.waiters do
        local w = self.waiters[i]
        if t >= w.deadline then
            remove(self.waiters, i)
            self.counters.failures = self.counters.failures + 1
            self:_wake(w, nil, format("pool exhausted: no sandbox came free within acquisition_timeout (%gs)",
                self.settings.acquisition_timeout))
        else
            i = i + 1
        end
    end
end

-- Gives ready slots to waiting callers, first come first served; with `make`, also makes the
-- slots they need (maintain()), else only hands out what is ready (a lease coming back).
function Pool:_handoff(make)
    self:_expire_waiters()
    while #self.waiters > 0 do
        local slot = self:_take_idle()
        if not slot and make then
            while not slot and self:_clean_one() do slot = self:_take_idle() end
            if not slot and self.n_busy < self.settings.max then
                -- a failed start leaves the waiter queued: its acquisition_timeout reports it
                slot = self:_new_slot(false)
            end
        end
        if not slot then return end
        local w = remove(self.waiters, 1)
        self:_wake(w, self:_lease(slot, w.env))
    end
end

-- A lease's close() lands here: the sandbox is taken back and kept for reuse (emptied later, by
-- maintain) or destroyed. Nothing is made or started here, and no waiter runs here.
function Pool:_release(slot, lease)
    if not self.busy[slot] then return end
    slot.session = assert(lease:handoff(self.env))
    self.busy[slot] = nil
    if not slot.temporary then self.n_busy = self.n_busy - 1 end
    local st = self.settings
    local reuse = not slot.temporary and not self.closed and slot.uses < st.max_uses
        and now_ms() - slot.created < st.max_lifetime * 1000 and self:_healthy(slot)
    if reuse then
        self.dirty[#self.dirty + 1] = slot
    else
        self:_destroy(slot, slot.temporary and "temporary" or "recycled")
    end
    if not self.closed then self:_handoff(false) end
end

--- p:maintain() -> true: health checks, idle and lifetime expiry, waiter timeouts, refill.
function Pool:maintain()
    self.driver.maintain(false)
    if self.closed then return true end
    local st, t = self.settings, now_ms()
    local target = self:target()
    local keep = {}
    for _, slot in ipairs(self.idle) do
        local why
        if t - slot.created >= st.max_lifetime * 1000 then
            why = "recycled"
        elseif #keep >= target and t - slot.idle_since >= st.idle_timeout * 1000 then
            why = "recycled"
        elseif t - slot.checked >= st.health_check_interval * 1000 then
            slot.checked = t
            if not self:_healthy(slot) then why = "unhealthy" end
        end
        if why then self:_destroy(slot, why) else keep[#keep + 1] = slot end
    end
    self.idle = keep
    self:_handoff(true)
    local ok, err = self:_fill()
    self:_run_wakeups()
    if not ok then return nil, err end
    return true
end

--- p:stats() -> { total, idle, busy, starting, unhealthy, created, recycled, waits, failures, ... }
function Pool:stats()
    local starting = 0
    for _, slot in ipairs(self.idle) do
        if slot.session:warm_state() == "starting" then starting = starting + 1 end
    end
    local c = self.counters
    return {
        total = #self.idle + #self.dirty + self.n_busy, idle = #self.idle - starting, busy = self.n_busy,
        dirty = #self.dirty,
        starting = starting, waiting = #self.waiters,
        unhealthy = c.unhealthy, created = c.created, recycled = c.recycled, waits = c.waits,
        failures = c.failures, temporary = c.temporary, acquired = c.acquired, hits = c.hits,
        misses = c.misses, closed = self.closed,
    }
end

--- p:close(): destroys the ready sandboxes now and leased ones when they come back.
function Pool:close()
    if self.closed then return true end
    self.closed = true
    for _, slot in ipairs(self.idle) do self:_destroy(slot) end
    for _, slot in ipairs(self.dirty) do self:_destroy(slot) end
    self.idle, self.dirty = {}, {}
    local waiters = self.waiters
    self.waiters = {}
    for _, w in ipairs(waiters) do self:_wake(w, nil, "pool is closed") end
    self:_run_wakeups()
    self.driver.maintain(true)
    return true
end

_M.Pool = Pool
return _M

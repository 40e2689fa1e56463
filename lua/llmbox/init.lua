-- llmbox: run code that language models write, in a sandbox the operator controls with Lua.
--
--   local llmbox = require "llmbox"
--   local s = assert(llmbox.session{ lang = "python", policy = "default" })
--   local r = assert(s:run("print(6*7)", { timeout = 5 }))
--   print(r.exit_code, r.stdout)
--   s:close()
local core = require "llmbox.core"
local session = require "llmbox.session"
local recipes = require "llmbox.recipes"
local policy = require "llmbox.policy"
local checks = require "llmbox.checks"
local admit = require "llmbox.admit"

local _M = { _VERSION = core.VERSION, VERSION = core.VERSION }

_M.session = session.new
--- llmbox.pool{ lang = "python", min = 2, max = 10, ... } -> pool | nil, err (see llmbox/pool.lua)
_M.pool = function(opts) return require("llmbox.pool").new(opts) end
_M.describe_violations = admit.describe_violations

--- One-shot: a session with one run. Returns the result, or nil, err [, report]. The code is
--- admitted (the policy's checks, the libraries it asks for) before the sandbox is created, so
--- refused code never costs one.
-- llmbox.run's options that go to its session; the others are the run's
local SESSION_KEYS = { lang = 1, policy = 1, backend = 1, image = 1, pull = 1, keep_image = 1, on_progress = 1,
    runtime = 1, dockerfile = 1, keep = 1, container = 1, rootfs = 1 }
-- and what is done with the session after the run: commit = "image" (s:commit), remove = true
-- (an attached container goes too); timings = {} is filled with each stage's milliseconds
local AFTER_KEYS = { commit = 1, remove = 1, timings = 1 }
local now_ms = require("llmbox.util").now_ms

-- the stages of a one-shot run, in order, as `timings` names them (README, "Where the time goes")
_M.RUN_STAGES = { "recipe", "policy", "admit", "open", "run", "close" }

function _M.run(code, opts)
    if type(code) ~= "string" then error("code must be a string", 2) end
    opts = opts or {}
    if opts.commit ~= nil and (type(opts.commit) ~= "string" or opts.commit == "") then
        error("run: commit must be an image name (\"name:tag\")", 2)
    end
    if opts.timings ~= nil and type(opts.timings) ~= "table" then
        error("run: timings must be a table to fill, got " .. type(opts.timings), 2)
    end
    local timings, last = opts.timings, now_ms()
    local function lap(stage)
        if timings then
            local t = now_ms()
            timings[stage], last = t - last, t
        end
    end
    local recipe, err = recipes.get(opts.lang or "python")
    if not recipe then return nil, err end
    lap("recipe")
    local p
    p, err = session.load_policy(opts.policy)
    if not p then return nil, err end
    lap("policy")
    local libraries = type(opts.libraries) == "table" and opts.libraries or nil
    local admission, aerr, report = admit.run(code, recipe, p, libraries)
    if not admission then return nil, aerr, report end
    lap("admit")
    local s
    local session_opts = { lang = recipe.name, policy = p }
    for k in pairs(SESSION_KEYS) do
        if k ~= "lang" and k ~= "policy" then session_opts[k] = opts[k] end
    end
    s, err = session.one_shot(session_opts, opts.commit)
    if not s then return nil, err end
    lap("open")
    local run_opts = {}
    for k, v in pairs(opts) do
        if not SESSION_KEYS[k] and not AFTER_KEYS[k] then run_opts[k] = v end
    end
    local r, rerr, rreport = s:run(code, run_opts, admission)
    lap("run")
    session.conclude(s, r, opts)
    lap("close")
    return r, rerr, rreport
end

--- Code checks without a sandbox: check(code, { lang = "python", policy = "default" }) -> report.
--- Without a policy, the one a session would get ($LLMBOX_POLICY, else "default"): checking code
--- under another policy than the one that would run it answers the wrong question.
function _M.check(code, opts)
    opts = opts or {}
    local p, err = session.load_policy(opts.policy)
    if not p then return nil, err end
    local recipe = opts.lang and recipes.get(opts.lang)
    if opts.lang and not recipe then return nil, select(2, recipes.get(opts.lang)) end
    return checks.check(code, recipe and (recipe.checks or recipe.name) or "*", p.checks)
end

function _M.langs()
    return recipes.all().list
end

function _M.policies()
    return policy.list()
end

-- Every backend llmbox knows: status, usable here or why not, capabilities, layout (the same
-- list `llmbox backends` prints).
function _M.backends()
    return require("llmbox.backends").list()
end

return _M

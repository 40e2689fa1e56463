-- llmbox.interactive: the cells of interactive sessions (llmbox.session{ interactive = true }).
-- One interpreter, the recipe's `interactive` program, lives in the session's sandbox and runs
-- each cell in the namespace the cells before it left. It is started like a pool's prestarted
-- program, under the same jail, seccomp filter and limits as any run; each cell is handed over on
-- its control socket and supervised by the C core (runtime/cell.c, supervise.c): its own output
-- cap and wall clock, an interrupt when either is reached, and the whole interpreter ended when
-- the interrupt is not honoured within GRACE seconds (the result then says state_lost, and the
-- next cell starts a fresh interpreter). Memory and processes are the sandbox's cgroup limits:
-- a cell that exceeds them ends the interpreter the same way.
local plan = require "llmbox.plan"
local util = require "llmbox.util"
local recipes = require "llmbox.recipes"

local format, ipairs, concat = string.format, ipairs, table.concat

local _M = { _VERSION = "0.1.0" }

-- Seconds a cell has to honour an interrupt (a timeout, the output cap) before its interpreter is
-- ended; and how long the interpreter may take to start.
_M.GRACE = 2
_M.START_WAIT_MS = 15000

--- interactive.languages() -> { "python", ... }: the recipes with an interactive program
function _M.languages()
    local out = {}
    for _, r in ipairs(recipes.all().list) do
        if r.interactive then out[#out + 1] = r.name end
    end
    return out
end

--- interactive.check(driver, recipe) -> true | nil, err: can this session be interactive?
function _M.check(driver, recipe)
    if not recipe then return nil, "interactive sessions need a language: llmbox.session{ lang = \"python\", ... }" end
    if not recipe.interactive then
        return nil, format("language %q has no interactive mode (interactive languages: %s)", recipe.name,
            concat(_M.languages(), ", "))
    end
    if not driver.capabilities.interactive then
        return nil, format("backend %q cannot keep an interpreter alive between runs (interactive sessions run "
            .. "on: %s)", driver.name, concat(require("llmbox.backends").with_capability("interactive"), ", "))
    end
    return true
end

--- interactive.prestart(session [, preload]) -> kernel | nil, err: the session's interpreter,
--- started (not waited for: pools start it ahead of the first cell); preload: module names it
--- imports before it is ready (interactive pools' `preload`)
function _M.prestart(s, preload)
    local spec, err = plan.warm(s.policy, s.recipe, s.layout, s.env, s.recipe.interactive, preload)
    if not spec then return nil, err end
    local pending
    pending, err = s.handle:prestart(spec, "interactive")
    if not pending then return nil, "cannot start the interactive interpreter: " .. tostring(err) end
    return { pending = pending, cells = 0 }
end

--- interactive.ready(kernel) -> true when it can take a cell (waiting for one still starting).
--- Asked only until it said ready once: afterwards its control socket carries answers, which a
--- readiness check must not read; an interpreter that ended between cells is found by the cell.
function _M.ready(k)
    if not k.ready then k.ready = k.pending:wait(_M.START_WAIT_MS) == "ready" end
    return k.ready
end

--- interactive.dead(kernel) -> true when a kernel that has not said ready yet is gone
function _M.dead(k)
    return not k.ready and k.pending:wait(0) == "dead"
end

--- interactive.start(session) -> kernel | nil, err: the session's interpreter, started and ready
function _M.start(s)
    local k, err = _M.prestart(s)
    if not k then return nil, err end
    local state = k.pending:wait(_M.START_WAIT_MS)
    if state ~= "ready" then
        k.pending:abandon()
        return nil, format("the interactive interpreter did not start (%s)", state)
    end
    k.ready = true
    return k
end

-- Options a cell cannot honour: it runs in the interpreter that is already there.
local NOT_FOR_CELLS = { args = "arguments", stdin = "stdin", env = "an environment", files = "files",
    cwd = "a working directory", cpu = "a CPU time limit", memory = "a memory limit",
    processes = "a process limit", open_files = "an open-files limit", file_size = "a file-size limit",
    cpus = "a CPU quota" }

--- interactive.cell_opts(opts) -> true | nil, err
function _M.cell_opts(opts)
    for k, what in pairs(NOT_FOR_CELLS) do
        if opts[k] ~= nil then
            return nil, format("a cell of an interactive session cannot take %s (option %q): its interpreter "
                .. "is already running with the session's; run it with s:exec or in a session that is not "
                .. "interactive", what, k)
        end
    end
    return true
end

--- interactive.magics(recipe, code) -> code, libraries | nil, err: a Python cell's own
--- `%pip install NAME...` lines (as in a notebook; `!pip install` too), taken out of the code: the
--- session installs those libraries (under its policy) before the rest of the cell runs
function _M.magics(recipe, code)
    if recipe.name ~= "python" then return code, nil end
    local libs, kept, found = {}, {}, false
    for line in (code .. "\n"):gmatch("(.-)\n") do
        local rest = line:match("^[%%!]pip3?%s+install%s+(.-)%s*$")
        if rest then
            found = true
            for word in rest:gmatch("%S+") do
                -- (-q: pip's own chatter, which is never shown anyway)
                local quiet = word == "-q" or word == "--quiet"
                if not quiet and word:sub(1, 1) == "-" then
                    return nil, format("%%pip install %s: only package names (and -q) are taken here; the policy "
                        .. "says where packages come from", word)
                elseif not quiet then
                    libs[#libs + 1] = word
                end
            end
            kept[#kept + 1] = ""
        else
            kept[#kept + 1] = line
        end
    end
    if not found then return code, nil end
    return concat(kept, "\n"), libs
end

--- interactive.cell(kernel, code, limits, opts) -> result | nil, err: one cell, supervised with
--- the run's timeout and output limits
function _M.cell(k, code, limits, opts)
    k.cells = k.cells + 1
    local res, err, code_ = k.pending:run_cell({ request = code, tag = util.random_hex(8), timeout = limits.timeout,
        output = limits.output, grace = _M.GRACE, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr })
    if not res then
        if k.cells == 1 then return nil, err, code_ end
        return nil, format("the interactive interpreter had ended since the last cell (its state is gone; the next "
            .. "cell starts a fresh one): %s", tostring(err)), code_
    end
    res.cell = k.cells
    res.limit_value = res.limit and limits[res.limit] or nil
    return res
end

return _M

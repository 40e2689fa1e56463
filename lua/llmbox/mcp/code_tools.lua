-- llmbox.mcp.code_tools: the tools that need no session: execute_code, check_code and the
-- language tools. Everything that looks at the code (the policy's checks, the run) happens in a
-- worker process, never in the server's event loop.
local json = require "llmbox.json"
local ctx = require "llmbox.mcp.context"
local results = require "llmbox.mcp.results"
local workers = require "llmbox.mcp.workers"
local progress = require "llmbox.mcp.progress"

local ipairs, tostring = ipairs, tostring
local S, log = ctx.state, ctx.log

local _M = { _VERSION = "0.1.0" }

-- A check is linear in the code's size; this bounds a worker that still takes too long.
local CHECK_TIMEOUT = 120

local handlers = {}
_M.handlers = handlers

function handlers.execute_code(args, call)
    -- (the server's policy, or the tenant's default over HTTP)
    local policy = ctx.policies(call)
    return workers.with_slot(call, function()
        progress.send(call, "starting the sandbox")
        local lang = args.language or "python"
        -- the warm workers hold sandboxes of the server's own policy
        local warm_lang = policy == S.cfg.policy and workers.warm_capable(lang)
        local w = warm_lang and (workers.take_warm(warm_lang) or workers.start_warm(warm_lang))
        local err
        if w then
            call.worker = w
        else
            w, err = workers.open(call, lang, policy, true)
            if not w then return results.error(err) end
        end
        local res, rerr = w:request({ op = "run", code = args.code, libraries = args.libraries,
            timeout = args.timeout, stream = call.token ~= nil }, progress.output(call))
        if w.warm_lang then workers.give_back(w) else w:close() end
        if not res then return results.error(rerr) end
        return results.run(res)
    end)
end

-- The policy's verdict on the code, from a worker: a large input is checked there while the
-- server goes on answering.
function handlers.check_code(args, call)
    return workers.with_slot(call, function()
        local w, err = workers.spawn()
        if not w then return results.error(err) end
        call.worker = w
        local report, cerr = w:request({ op = "check", code = args.code, lang = args.language or "python",
            policy = (ctx.policies(call)), memory = S.cfg.memory }, nil, CHECK_TIMEOUT)
        w:close()
        if not report then return results.error(cerr) end
        report.violations = json.array(report.violations or {})
        return results.json(report)
    end)
end

local function language_info(r)
    return {
        name = r.name, description = r.description,
        aliases = json.array(r.aliases), extensions = json.array(r.extensions),
        plots = r.plots, libraries = r.install ~= nil, interactive = r.interactive ~= false,
    }
end

--- languages() -> what get_supported_languages and the sandbox://languages resource list
function _M.languages()
    local out = json.array()
    for i, r in ipairs(require("llmbox.recipes").all().list) do out[i] = language_info(r) end
    return out
end

function handlers.get_supported_languages()
    return results.json({ languages = _M.languages() })
end

function handlers.get_language_details(args, call)
    local r, err = require("llmbox.recipes").get(args.language)
    if not r then return results.error(err) end
    local info = language_info(r)
    info.example = r.example or json.null
    info.package_manager = r.details.package_manager or json.null
    info.preinstalled = json.array(r.details.preinstalled or {})
    -- the version as the sandbox sees it, probed in a worker like any run
    local w, werr = workers.open(call, r.name, (ctx.policies(call)))
    if w then
        local v = w:request({ op = "version" })
        w:close()
        info.version = v and v.version or json.null
    else
        log("get_language_details: %s", tostring(werr))
        info.version = json.null
    end
    return results.json(info)
end

return _M

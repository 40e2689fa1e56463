-- llmbox.policy.sandbox: runs an operator's Lua file (a policy, a pool policy) and returns the
-- table it returns.
--
--   sandbox.run_file(path, time_limit) -> table | nil, err
--
-- The file runs in an empty environment (no io, os.execute, require, load, debug, pcall,
-- coroutine, setmetatable) under an instruction-count hook, so a typo cannot touch the host and
-- an endless loop fails after time_limit seconds instead of hanging the caller. A file written
-- in YAML or JSON gets an error that says so (llmbox.policy.foreign).

local schema = require "llmbox.schema"
local foreign = require "llmbox.policy.foreign"

local type = type
local pairs = pairs
local ipairs = ipairs
local tostring = tostring
local tonumber = tonumber
local select = select
local next = next
local error = error
local assert = assert
local unpack = unpack
local pcall = pcall
local setfenv = setfenv
local loadfile = loadfile
local os_getenv = os.getenv
local os_clock = os.clock
local debug_sethook = debug.sethook
local debug_gethook = debug.gethook
local debug_getinfo = debug.getinfo
local jit_off = jit and jit.off
local string_format = string.format

local _M = {}

local function shallow_copy(t, drop)
    local c = {}
    for k, v in pairs(t) do
        if not (drop and drop[k]) then
            c[k] = v
        end
    end
    return c
end

-- what a policy file can see. Enough to compute values (string formatting, math, reading an
-- environment variable the operator set); nothing that writes files, runs programs, loads code,
-- escapes the hook (coroutines run without it, pcall could swallow it) or changes metatables.
local function sandbox_env()
    return {
        string = shallow_copy(string, { dump = true }),
        table = shallow_copy(table),
        math = shallow_copy(math),
        os = { getenv = os_getenv, time = os.time, date = os.date },
        tostring = tostring, tonumber = tonumber, type = type,
        ipairs = ipairs, pairs = pairs, next = next, select = select, unpack = unpack,
        error = error, assert = assert,
    }
end

-- raised by the hook; a string, so that it reads well should it ever surface
local TIMEOUT = "llmbox.policy: policy file timed out"

function _M.run_file(path, limit)
    local refused = foreign.by_name(path)
    if refused then
        return nil, refused
    end
    local chunk, err = loadfile(path)
    if not chunk then
        return nil, foreign.by_content(path) or ("syntax error: " .. tostring(err))
    end
    setfenv(chunk, sandbox_env())
    -- compiled traces do not call hooks; with the JIT off for this chunk (and every function
    -- defined in it) the count hook always fires
    if jit_off then
        jit_off(chunk, true)
    end
    local source = "@" .. path
    local start = os_clock()
    local old_hook, old_mask, old_count = debug_gethook()
    -- The hook may also fire in our own code just before it is removed: it only raises while
    -- the policy file's own code is running (the file has no pcall, so the error unwinds
    -- straight to ours).
    debug_sethook(function()
        if os_clock() - start > limit then
            local info = debug_getinfo(2, "S")
            if info and info.source == source then
                error(TIMEOUT, 0)
            end
        end
    end, "", 1000)
    local ok, ret = pcall(chunk)
    if old_hook then
        debug_sethook(old_hook, old_mask, old_count)
    else
        debug_sethook()
    end
    if not ok then
        if ret == TIMEOUT then
            return nil, string_format("the file did not finish within %gs (an endless loop?)", limit)
        end
        return nil, "the file raised an error: " .. tostring(ret)
    end
    if type(ret) ~= "table" then
        return nil, "the file must return a table such as "
            .. "return { description = \"...\", limits = { memory = \"512M\" } }, got "
            .. schema.describe_value(ret)
    end
    return ret
end


return _M

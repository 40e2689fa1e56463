-- llmbox.policy: loads security policies — Lua files that return a table — checks them against a
-- schema and returns the normalised table the C core and the session code consume.
--
--   local policy = require "llmbox.policy"
--   local p, err = policy.load("default")          -- a name, looked up in policy.dirs()
--   local p, err = policy.load("./mine.lua")       -- or a path (contains "/" or ends in ".lua")
--
-- Inheritance: `extends = "default"` starts from that policy (fully loaded and normalised) and
-- merges this file over it; a file without `extends` starts from the built-in defaults (the
-- limits, mounts, environment and syscall rules of policies/default.lua, no code-check rules).
-- Inheriting never loosens by accident: a plain list of security rules may not drop or weaken
-- an inherited rule, and { append = }, { remove = } and { replace = } say what is meant (see
-- llmbox.policy.merge). `description` is never inherited. An `extends` name is looked up like
-- policy.load() does, skipping the extending file itself (so a `default.lua` early in
-- LLMBOX_POLICY_PATH may extend the shipped "default"); a relative path is relative to the
-- extending file's directory.
--
-- The parts: files (where policies are), sandbox (running a file: empty environment, time
-- limit), foreign (YAML or JSON instead of Lua), schema (what a policy may say), merge.

local schema = require "llmbox.schema"
local files = require "llmbox.policy.files"
local sandbox = require "llmbox.policy.sandbox"
local policy_schema = require "llmbox.policy.schema"
local merge = require "llmbox.policy.merge"

local type = type
local pairs = pairs
local ipairs = ipairs
local error = error
local assert = assert
local pcall = pcall
local io_open = io.open
local table_concat = table.concat
local table_sort = table.sort

local quote = schema.quote
local resolve, dirname = files.resolve, files.dirname
local list_dir, is_file = files.list_dir, files.is_file
local POLICY = policy_schema.policy

local _M = { _VERSION = "0.1.0" }

-- how long a policy file may run; policies are a few dozen lines, a second is generous
_M.load_timeout = 1

-- how deep `extends` chains may go before we call it a mistake
local MAX_EXTENDS_DEPTH = 16

_M.schema = POLICY
_M.defaults = policy_schema.defaults
_M.lua_pattern_error = policy_schema.lua_pattern_error
_M.dirs = files.dirs

-- run_file(path) -> table | nil, err. Other operator files (pool policies) are run the same way:
-- no io, no os.execute, the same time limit.
function _M.run_file(path)
    return sandbox.run_file(path, _M.load_timeout)
end

-- merge(parent, child) -> merged | nil, err: a child policy table over a normalised parent
function _M.merge(parent, child)
    return merge.over(parent, child, POLICY, "the parent policy")
end

-- ---------------------------------------------------------------------------------------------
-- loading

local function label(name, path)
    return "policy " .. quote(name) .. " (" .. path .. ")"
end

-- the built-in defaults, normalised: what a policy without `extends` starts from
local BUILT_IN = assert(schema.check({}, POLICY))

local load_resolved -- forward

local function normalise(raw, name, path, stack)
    local parent, parent_label = BUILT_IN, "the built-in defaults"
    if raw.extends ~= nil then
        local ext = raw.extends
        if type(ext) ~= "string" then
            return nil, "extends: expected the name or path of a policy, such as \"default\", got "
                .. schema.describe_value(ext)
        end
        if #stack >= MAX_EXTENDS_DEPTH then
            return nil, "extends: chain is deeper than " .. MAX_EXTENDS_DEPTH .. " policies"
        end
        local ppath, pname_or_err = resolve(ext, dirname(path), path)
        if not ppath then
            return nil, "extends " .. quote(ext) .. ": " .. pname_or_err
        end
        local cycle = (ppath == path)
        for _, s in ipairs(stack) do
            cycle = cycle or s.path == ppath
        end
        if cycle then
            local chain = {}
            for i, x in ipairs(stack) do chain[i] = x.name end
            chain[#chain + 1] = name
            chain[#chain + 1] = pname_or_err
            return nil, "extends " .. quote(ext) .. " makes a cycle: " .. table_concat(chain, " -> ")
                .. "; one of these files must stop extending the other"
        end
        stack[#stack + 1] = { name = name, path = path }
        local perr
        parent, perr = load_resolved(pname_or_err, ppath, stack)
        stack[#stack] = nil
        if not parent then
            return nil, "extends " .. quote(ext) .. ": " .. perr
        end
        parent_label = "policy " .. quote(pname_or_err)
        parent.name, parent.path = nil, nil
    end
    local child = {}
    for k, v in pairs(raw) do
        if k ~= "extends" then child[k] = v end
    end
    local merged, err = merge.over(parent, child, POLICY, parent_label)
    if not merged then
        return nil, err
    end
    if raw.description == nil then
        merged.description = nil -- never inherited
    end
    local p
    p, err = schema.check(merged, POLICY)
    if not p then
        return nil, err
    end
    p.name, p.path = name, path
    return p
end

-- Loaded policies are kept per file, with the text of every file of the `extends` chain: a
-- later load that finds the same texts returns a copy instead of running and checking them again
-- (milliseconds per session). An edited file is read afresh. (A policy that reads environment
-- variables sees them as they were at its first load in this process.)
local cache = {}
local reading -- the chain's { path, text } while a load runs

local function read_text(path)
    local f = io_open(path, "rb")
    if not f then return nil end
    local t = f:read("*a")
    f:close()
    return t
end

local function unchanged(read)
    for _, f in ipairs(read) do
        if read_text(f[1]) ~= f[2] then return false end
    end
    return true
end

load_resolved = function(name, path, stack)
    if reading then reading[#reading + 1] = { path, read_text(path) } end
    local raw, err = _M.run_file(path)
    if raw then
        raw, err = normalise(raw, name, path, stack)
    end
    if not raw then
        return nil, label(name, path) .. ": " .. err
    end
    return raw
end

-- load(name_or_path) -> policy | nil, err
function _M.load(what)
    if type(what) ~= "string" then
        error("policy.load: expected a policy name or path (string), got " .. type(what), 2)
    end
    local path, name_or_err = resolve(what, nil, nil)
    if not path then
        return nil, name_or_err
    end
    local hit = cache[path]
    if hit and hit.name == name_or_err and unchanged(hit.files) then
        return schema.deep_copy(hit.policy)
    end
    reading = {}
    local ok, p, err = pcall(load_resolved, name_or_err, path, {})
    local read = reading
    reading = nil
    if not ok then error(p, 0) end
    if p then cache[path] = { name = name_or_err, files = read, policy = schema.deep_copy(p) } end
    return p, err
end

-- from_table(t [, name]) -> policy | nil, err: check a policy built in code rather than a file
-- (`extends` names are looked up in policy.dirs(), relative paths against the current directory)
function _M.from_table(t, name)
    if type(t) ~= "table" then
        error("policy.from_table: expected a table, got " .. type(t), 2)
    end
    name = name or "(table)"
    local p, err = normalise(t, name, "(table)", {})
    if not p then
        return nil, "policy " .. quote(name) .. ": " .. err
    end
    return p
end

-- list() -> array of { name =, path =, description = [, error =] }, sorted by name; the first
-- directory wins when two define the same name (as policy.load would pick it)
function _M.list()
    local out, seen = {}, {}
    for _, d in ipairs(_M.dirs()) do
        for _, f in ipairs(list_dir(d)) do
            local n = f:match("^(.+)%.lua$")
            local p = d .. "/" .. f
            if n and not seen[n] and is_file(p) then
                seen[n] = true
                local raw, err = _M.run_file(p)
                local entry = { name = n, path = p }
                if raw then
                    entry.description = type(raw.description) == "string" and raw.description or ""
                else
                    entry.description = ""
                    entry.error = label(n, p) .. ": " .. err
                end
                out[#out + 1] = entry
            end
        end
    end
    table_sort(out, function(a, b) return a.name < b.name end)
    return out
end


return _M

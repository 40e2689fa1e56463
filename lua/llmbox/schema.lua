-- llmbox.schema: a small declarative validator and normaliser for operator-written Lua tables
-- (security policies today; recipes and pool policies later).
--
--   local v, err = schema.check(value, spec, path)
--
-- returns a *new* normalised value (defaults filled, sizes in bytes, durations in seconds) or
-- nil plus one error such as
--   limits.memory: expected a size (bytes, or a string such as "512M"), got boolean
-- The caller prefixes the file name. Checking a normalised value again returns an equal value.
--
-- Spec notation
--   spec := TYPE                        -- shorthand for { type = TYPE }
--         | { type = TYPE, <options> }
--   TYPE := "string" | "number" | "integer" | "boolean" | "function" | "any"
--         | "size"      -- bytes: an integer >= 0, or "512M", "64K", "1.5G", "100" (K = 1024)
--         | "duration"  -- seconds: a number > 0, or "500ms", "30s", "5m", "1h"
--         | "enum"      -- { type = "enum", values = { "a", "b" } }
--         | "array"     -- { type = "array", of = spec }            a list 1..n
--         | "map"       -- { type = "map", of = spec, key = spec }  string keys (key spec optional)
--         | "record"    -- { type = "record", fields = { name = spec, ... } }  unknown keys are errors
--   options, for any TYPE:
--     default = v      used when the value is nil (tables are copied). A record field that is nil
--                      and has no default is checked as {} so its own defaults fill in.
--     required = true  nil is an error
--     min, max         bounds for number, integer, size, duration (after conversion)
--     pattern = "^..$" a Lua pattern a string must match; pattern_desc says what it means
--     coerce = fn(v)   runs before the type check, returns the value to check (e.g. "x" -> {src="x"})
--     finish = fn(v)   runs after the check; returns v (possibly changed) or nil, "message"
--     hint = "..."     appended to a type or enum error: how to fix it
--     describe = "..." replaces the generic "expected ..." wording

local type = type
local pairs = pairs
local ipairs = ipairs
local tostring = tostring
local tonumber = tonumber
local error = error
local math_floor = math.floor
local math_huge = math.huge
local math_min = math.min
local math_max = math.max
local string_format = string.format
local string_byte = string.byte
local string_lower = string.lower
local string_sub = string.sub
local table_concat = table.concat
local table_sort = table.sort

local _M = { _VERSION = "0.1.0" }

-- doubles hold integers exactly up to 2^53; anything larger is surely a mistake
local MAX_EXACT = 2 ^ 53

local SIZE_UNITS = {
    [""] = 1, b = 1,
    k = 1024, kb = 1024, kib = 1024,
    m = 1024 ^ 2, mb = 1024 ^ 2, mib = 1024 ^ 2,
    g = 1024 ^ 3, gb = 1024 ^ 3, gib = 1024 ^ 3,
    t = 1024 ^ 4, tb = 1024 ^ 4, tib = 1024 ^ 4,
}

local DURATION_UNITS = {
    [""] = 1, s = 1, sec = 1, secs = 1,
    ms = 0.001,
    m = 60, min = 60, mins = 60,
    h = 3600,
}

local DESCRIBE = {
    string = "a string",
    number = "a number",
    integer = "a whole number",
    boolean = "true or false",
    ["function"] = "a function",
    any = "any value",
    size = 'a size (bytes, or a string such as "512M")',
    duration = 'a duration (seconds, or a string such as "30s", "500ms" or "5m")',
    array = "a list (a table such as { \"a\", \"b\" })",
    map = "a table of names to values",
    record = "a table",
}

-- ---------------------------------------------------------------------------------------------
-- formatting helpers (exported: llmbox.policy and llmbox.checks reuse them in their messages)

local function quote(s)
    if #s > 60 then
        s = string_sub(s, 1, 57) .. "..."
    end
    -- escape what would garble a one-line message; keep everything else as the operator wrote it
    s = s:gsub('[%c"\\]', function(c)
        if c == "\n" then return "\\n" end
        if c == "\t" then return "\\t" end
        if c == '"' then return '\\"' end
        if c == "\\" then return "\\\\" end
        return string_format("\\%d", string_byte(c))
    end)
    return '"' .. s .. '"'
end
_M.quote = quote

local function describe_value(v)
    local t = type(v)
    if t == "string" then
        return "string " .. quote(v)
    elseif t == "number" then
        return "number " .. tostring(v)
    end
    return t
end
_M.describe_value = describe_value

local function is_identifier(k)
    return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

-- A check runs first without paths (path == false: nothing to build for the thousands of values a
-- policy has), and again with them only when it fails, so the error still names where.
local function join(path, key)
    if path == false then
        return false
    end
    if type(key) == "number" then
        return (path or "") .. "[" .. tostring(key) .. "]"
    end
    if is_identifier(key) then
        if path == nil or path == "" then
            return key
        end
        return path .. "." .. key
    end
    return (path or "") .. "[" .. (type(key) == "string" and quote(key) or tostring(key)) .. "]"
end
_M.join = join

local function fail(path, msg)
    if not path or path == "" then
        return nil, msg
    end
    return nil, path .. ": " .. msg
end

function _M.format_size(n)
    local units = { { "G", 1024 ^ 3 }, { "M", 1024 ^ 2 }, { "K", 1024 } }
    for _, u in ipairs(units) do
        if n >= u[2] and n % u[2] == 0 then
            return string_format("%d%s", n / u[2], u[1])
        end
    end
    return string_format("%d bytes", n)
end

local function edit_distance(a, b)
    local la, lb = #a, #b
    if la == 0 then return lb end
    if lb == 0 then return la end
    local prev, cur = {}, {}
    for j = 0, lb do prev[j] = j end
    for i = 1, la do
        cur[0] = i
        local ca = string_byte(a, i)
        for j = 1, lb do
            local cost = (ca == string_byte(b, j)) and 0 or 1
            cur[j] = math_min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        end
        prev, cur = cur, prev
    end
    return prev[lb]
end

-- the closest candidate, if it is close enough to be a plausible typo
function _M.suggest(word, candidates)
    if type(word) ~= "string" then
        return nil
    end
    local lw = string_lower(word)
    local best, best_d
    for _, c in ipairs(candidates) do
        local d = edit_distance(lw, string_lower(c))
        if best_d == nil or d < best_d or (d == best_d and c < best) then
            best, best_d = c, d
        end
    end
    if best and best_d <= math_max(1, math_min(3, math_floor(#word / 3))) then
        return best
    end
    return nil
end

local function sorted_keys(t)
    local keys = {}
    for k in pairs(t) do
        keys[#keys + 1] = k
    end
    table_sort(keys, function(a, b)
        local ta, tb = type(a), type(b)
        if ta ~= tb then
            return ta < tb
        end
        if ta == "string" or ta == "number" then
            return a < b
        end
        return tostring(a) < tostring(b)
    end)
    return keys
end
_M.sorted_keys = sorted_keys

local function deep_copy(v)
    if type(v) ~= "table" then
        return v
    end
    local t = {}
    for k, x in pairs(v) do
        t[k] = deep_copy(x)
    end
    return t
end
_M.deep_copy = deep_copy

-- ---------------------------------------------------------------------------------------------
-- scalar parsers

local function is_finite(n)
    return n == n and n ~= math_huge and n ~= -math_huge
end

local function parse_size(v)
    if type(v) == "number" then
        if not is_finite(v) or v < 0 or v ~= math_floor(v) or v > MAX_EXACT then
            return nil
        end
        return v
    end
    if type(v) ~= "string" then
        return nil
    end
    local num, unit = v:match("^%s*(%d*%.?%d+)%s*(%a*)%s*$")
    local mult = unit and SIZE_UNITS[string_lower(unit)]
    local n = num and tonumber(num)
    if not n or not mult then
        return nil
    end
    n = math_floor(n * mult)
    if n > MAX_EXACT then
        return nil
    end
    return n
end
_M.parse_size = parse_size

local function parse_duration(v)
    if type(v) == "number" then
        if not is_finite(v) or v <= 0 then
            return nil
        end
        return v
    end
    if type(v) ~= "string" then
        return nil
    end
    local num, unit = v:match("^%s*(%d*%.?%d+)%s*(%a*)%s*$")
    local mult = unit and DURATION_UNITS[string_lower(unit)]
    local n = num and tonumber(num)
    if not n or not mult or n <= 0 then
        return nil
    end
    return n * mult
end
_M.parse_duration = parse_duration

-- ---------------------------------------------------------------------------------------------
-- the checker

local check -- forward

local function normalise_spec(spec)
    if type(spec) == "string" then
        return { type = spec }
    end
    if type(spec) ~= "table" or type(spec.type) ~= "string" then
        error("schema: a spec must be a type name or a table with a 'type' field, got "
            .. describe_value(spec), 3)
    end
    return spec
end

local function expected(spec, v, path)
    local what = spec.describe or DESCRIBE[spec.type] or spec.type
    local msg = "expected " .. what .. ", got " .. describe_value(v)
    if spec.hint then
        msg = msg .. "; " .. spec.hint
    end
    return fail(path, msg)
end

local function bound_text(spec, n)
    if spec.type == "size" then
        return _M.format_size(n)
    elseif spec.type == "duration" then
        return tostring(n) .. "s"
    end
    return tostring(n)
end

local function check_bounds(spec, n, orig, path)
    if spec.min ~= nil and n < spec.min then
        return fail(path, "must be at least " .. bound_text(spec, spec.min) .. ", got "
            .. describe_value(orig))
    end
    if spec.max ~= nil and n > spec.max then
        return fail(path, "must be at most " .. bound_text(spec, spec.max) .. ", got "
            .. describe_value(orig))
    end
    return n
end

local checkers = {}

checkers["any"] = function(_, v)
    return deep_copy(v)
end

checkers["string"] = function(spec, v, path)
    if type(v) ~= "string" then
        return expected(spec, v, path)
    end
    if spec.pattern and not v:match(spec.pattern) then
        return fail(path, "expected " .. (spec.pattern_desc or ("a string matching " .. quote(spec.pattern)))
            .. ", got " .. describe_value(v))
    end
    return v
end

checkers["number"] = function(spec, v, path)
    if type(v) ~= "number" or v ~= v then
        return expected(spec, v, path)
    end
    return check_bounds(spec, v, v, path)
end

checkers["integer"] = function(spec, v, path)
    if type(v) ~= "number" or not is_finite(v) or v ~= math_floor(v) then
        return expected(spec, v, path)
    end
    return check_bounds(spec, v, v, path)
end

checkers["boolean"] = function(spec, v, path)
    if type(v) ~= "boolean" then
        return expected(spec, v, path)
    end
    return v
end

checkers["function"] = function(spec, v, path)
    if type(v) ~= "function" then
        return expected(spec, v, path)
    end
    return v
end

checkers["size"] = function(spec, v, path)
    local n = parse_size(v)
    if n == nil then
        return expected(spec, v, path)
    end
    return check_bounds(spec, n, v, path)
end

checkers["duration"] = function(spec, v, path)
    local n = parse_duration(v)
    if n == nil then
        return expected(spec, v, path)
    end
    return check_bounds(spec, n, v, path)
end

checkers["enum"] = function(spec, v, path)
    local values = spec.values
    for _, x in ipairs(values) do
        if v == x then
            return v
        end
    end
    local quoted = {}
    for i, x in ipairs(values) do
        quoted[i] = type(x) == "string" and quote(x) or tostring(x)
    end
    local what = #quoted == 1 and quoted[1] or ("one of " .. table_concat(quoted, ", "))
    local msg = "expected " .. what .. ", got " .. describe_value(v)
    local strings = {}
    for _, x in ipairs(values) do
        if type(x) == "string" then strings[#strings + 1] = x end
    end
    local near = _M.suggest(v, strings)
    if near then
        msg = msg .. " (did you mean " .. quote(near) .. "?)"
    end
    if spec.hint then
        msg = msg .. "; " .. spec.hint
    end
    return fail(path, msg)
end

checkers["array"] = function(spec, v, path)
    if type(v) ~= "table" then
        return expected(spec, v, path)
    end
    local n = #v
    for k in pairs(v) do
        if type(k) ~= "number" or k < 1 or k > n or k ~= math_floor(k) then
            return fail(path, "expected " .. (spec.describe or DESCRIBE.array) .. ", got a table with key "
                .. (type(k) == "string" and quote(k) or tostring(k))
                .. (spec.hint and ("; " .. spec.hint) or ""))
        end
    end
    local out = {}
    for i = 1, n do
        local x, err = check(v[i], spec.of, join(path, i))
        if err then
            return nil, err
        end
        out[i] = x
    end
    return out
end

checkers["map"] = function(spec, v, path)
    if type(v) ~= "table" then
        return expected(spec, v, path)
    end
    local out = {}
    if path == false then -- any order will do: a failure is checked again in order
        for k, x in pairs(v) do
            if type(k) ~= "string" or (spec.key and select(2, check(k, spec.key, false))) then
                return nil, "invalid key"
            end
            local y, err = check(x, spec.of, false)
            if err then
                return nil, err
            end
            out[k] = y
        end
        return out
    end
    for _, k in ipairs(sorted_keys(v)) do
        local kpath = join(path, k)
        if type(k) ~= "string" then
            return fail(kpath, "keys must be strings, got " .. describe_value(k))
        end
        if spec.key then
            local _, kerr = check(k, spec.key, nil)
            if kerr then
                return fail(kpath, "invalid key: " .. kerr)
            end
        end
        local x, err = check(v[k], spec.of, kpath)
        if err then
            return nil, err
        end
        out[k] = x
    end
    return out
end

-- a record spec's field names in order, computed once per spec (specs are not edited once used)
local field_order = setmetatable({}, { __mode = "k" })

checkers["record"] = function(spec, v, path)
    if type(v) ~= "table" then
        return expected(spec, v, path)
    end
    local fields = spec.fields
    local allowed = field_order[fields]
    if not allowed then
        allowed = sorted_keys(fields)
        field_order[fields] = allowed
    end
    if path == false then
        for k in pairs(v) do
            if fields[k] == nil then
                return nil, "unknown key" -- (checked again in order, for the message)
            end
        end
    else
        for _, k in ipairs(sorted_keys(v)) do
            if fields[k] == nil then
                local msg = "unknown key"
                local near = _M.suggest(k, allowed)
                if near then
                    msg = msg .. " (did you mean " .. quote(near) .. "?)"
                end
                msg = msg .. "; allowed keys"
                    .. ((path and path ~= "") and (" in " .. path) or "")
                    .. ": " .. table_concat(allowed, ", ")
                return fail(join(path, k), msg)
            end
        end
    end
    local out = {}
    for _, k in ipairs(allowed) do
        local x, err = check(v[k], fields[k], join(path, k))
        if err then
            return nil, err
        end
        out[k] = x
    end
    return out
end

check = function(value, spec, path)
    spec = normalise_spec(spec)
    local checker = checkers[spec.type]
    if not checker then
        error("schema: unknown spec type " .. quote(spec.type), 2)
    end
    if value == nil then
        if spec.default ~= nil then
            value = deep_copy(spec.default)
        elseif spec.required then
            local what = spec.describe or DESCRIBE[spec.type] or spec.type
            if spec.type == "enum" then
                local q = {}
                for i, x in ipairs(spec.values) do q[i] = quote(tostring(x)) end
                what = "one of " .. table_concat(q, ", ")
            end
            return fail(path, "is required (" .. what .. ")")
        elseif spec.type == "record" then
            value = {}
        else
            return nil
        end
    end
    if spec.coerce then
        value = spec.coerce(value)
    end
    local out, err = checker(spec, value, path)
    if err then
        return nil, err
    end
    if spec.finish then
        local msg
        out, msg = spec.finish(out)
        if out == nil then
            return fail(path, msg or "is invalid")
        end
    end
    return out
end

function _M.check(value, spec, path)
    if type(spec) ~= "string" and type(spec) ~= "table" then
        error("schema.check: spec must be a string or a table, got " .. type(spec), 2)
    end
    if path ~= nil and type(path) ~= "string" then
        error("schema.check: path must be a string or nil, got " .. type(path), 2)
    end
    local out, err = check(value, spec, false)
    if err == nil then
        return out
    end
    return check(value, spec, path)
end

return _M

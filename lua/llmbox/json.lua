-- llmbox.json: JSON for the MCP server and its workers. Decoding is lua-cjson's; encoding is
-- our own because Debian's lua-cjson (2.1.0) has no array marker: an empty Lua table always
-- becomes {}, and MCP needs [] for empty lists (content, tools, violations, required) and {} for
-- empty objects (ping's result, a schema's properties). Here a table is an array when it is a
-- non-empty sequence or carries json.array_mt; an empty table without the marker is an object.
local cjson = require("cjson.safe").new()

local type, pairs, ipairs, next, tostring, tonumber, getmetatable, setmetatable = type, pairs, ipairs, next,
    tostring, tonumber, getmetatable, setmetatable
local format, byte, gsub, concat, sort = string.format, string.byte, string.gsub, table.concat, table.sort
local floor, huge = math.floor, math.huge

local _M = { _VERSION = "0.1.0" }

_M.null = cjson.null
_M.array_mt = { __name = "llmbox.json.array" }

-- deep enough for any MCP message; cjson's default (1000) lets one line eat the C stack budget
cjson.decode_max_depth(128)

--- decode(text) -> value | nil, err
function _M.decode(text)
    return cjson.decode(text)
end

--- array(t) -> t, marked to encode as a JSON array even when empty
function _M.array(t)
    return setmetatable(t or {}, _M.array_mt)
end

local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
    ["\r"] = "\\r", ["\t"] = "\\t" }

local function escape_char(c)
    return ESC[c] or format("\\u%04x", byte(c))
end

local function encode_string(s)
    return '"' .. gsub(s, '[%c"\\]', escape_char) .. '"'
end

local function is_array(t)
    if getmetatable(t) == _M.array_mt then return true end
    if t[1] == nil then return false end
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n == #t
end

local encode_value

local function encode_table(t, out, depth)
    if depth > 128 then error("json: nesting deeper than 128 (a cycle?)", 0) end
    if is_array(t) then
        out[#out + 1] = "["
        for i, v in ipairs(t) do
            if i > 1 then out[#out + 1] = "," end
            encode_value(v, out, depth + 1)
        end
        out[#out + 1] = "]"
        return
    end
    local keys = {}
    for k in pairs(t) do
        if type(k) ~= "string" and type(k) ~= "number" then
            error("json: cannot encode a key of type " .. type(k), 0)
        end
        keys[#keys + 1] = tostring(k)
    end
    sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(k)
        out[#out + 1] = ":"
        local v = t[k]
        if v == nil then v = t[tonumber(k)] end
        encode_value(v, out, depth + 1)
    end
    out[#out + 1] = "}"
end

encode_value = function(v, out, depth)
    local t = type(v)
    if t == "string" then
        out[#out + 1] = encode_string(v)
    elseif t == "number" then
        if v ~= v or v == huge or v == -huge then
            out[#out + 1] = "null"
        elseif v == floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then
            out[#out + 1] = format("%d", v)
        else
            -- the shortest of the usual precisions that reads back as the same number
            local text = format("%.14g", v)
            if tonumber(text) ~= v then text = format("%.17g", v) end
            out[#out + 1] = text
        end
    elseif t == "boolean" then
        out[#out + 1] = v and "true" or "false"
    elseif v == nil or v == _M.null then
        out[#out + 1] = "null"
    elseif t == "table" then
        encode_table(v, out, depth)
    else
        error("json: cannot encode a value of type " .. t, 0)
    end
end

--- encode(value) -> text (one line: control characters in strings are escaped)
-- Raises on values JSON cannot hold (functions, cycles): those are bugs in the caller.
function _M.encode(v)
    local out = {}
    encode_value(v, out, 0)
    return concat(out)
end

--- is_object(v): a decoded JSON object (or an empty table, which may have been either)
function _M.is_object(v)
    return type(v) == "table" and (next(v) == nil or not is_array(v))
end

return _M

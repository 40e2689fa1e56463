-- llmbox.policy.foreign: policy files are Lua. One written in YAML or JSON (by its name, or by
-- what a Lua syntax error turns out to be) gets an error that says so and shows the same policy
-- as one line of Lua, so the fix is a copy and paste away.
--
--   foreign.by_name(path)    -> message when the name ends in .yaml, .yml or .json, else nil
--   foreign.by_content(path) -> message when the (non-Lua) text looks like YAML or JSON, else nil

local json = require "llmbox.json"

local type = type
local pairs = pairs
local ipairs = ipairs
local tonumber = tonumber
local tostring = tostring
local io_open = io.open
local string_format = string.format
local table_concat = table.concat
local table_sort = table.sort

local _M = {}

-- the example shown when the file's own content cannot be turned into Lua
local GENERIC = 'return { extends = "default", limits = { memory = "512M", timeout = "30s" } }'

-- an example longer than this shows only the first keys
local MAX_EXAMPLE = 160

local function read(path)
    local f = io_open(path, "rb")
    if not f then
        return nil
    end
    local t = f:read(64 * 1024) -- a policy is a few KB; more is not a policy
    f:close()
    return t
end

-- ---------------------------------------------------------------------------------------------
-- a value as one line of Lua

local function lua_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
        if c == "\n" then return "\\n" end
        if c == "\t" then return "\\t" end
        if c == '"' or c == "\\" then return "\\" .. c end
        return string_format("\\%d", c:byte())
    end) .. '"'
end

local function is_list(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n == #t
end

local to_lua -- forward

local function fields(t, max_keys)
    if is_list(t) then
        local out = {}
        for i, v in ipairs(t) do out[i] = to_lua(v) end
        return out
    end
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = tostring(k) end
    table_sort(keys)
    local out = {}
    for i, k in ipairs(keys) do
        if max_keys and i > max_keys then
            out[#out + 1] = "..."
            break
        end
        local name = k:match("^[%a_][%w_]*$") and k or ("[" .. lua_string(k) .. "]")
        out[#out + 1] = name .. " = " .. to_lua(t[k])
    end
    return out
end

to_lua = function(v)
    if type(v) == "table" then
        local f = fields(v)
        return #f == 0 and "{}" or ("{ " .. table_concat(f, ", ") .. " }")
    elseif type(v) == "string" then
        return lua_string(v)
    elseif v == json.null then
        return "nil"
    end
    return tostring(v)
end

local function example(t)
    if type(t) ~= "table" then
        return GENERIC
    end
    for max_keys = 100, 1, -1 do
        local line = "return { " .. table_concat(fields(t, max_keys), ", ") .. " }"
        if #line <= MAX_EXAMPLE or max_keys == 1 then
            return line
        end
    end
end

-- ---------------------------------------------------------------------------------------------
-- reading the foreign text, as far as an example needs

local function yaml_scalar(s)
    s = s:gsub("%s+#.*$", ""):match("^%s*(.-)%s*$")
    local q = s:match('^"(.*)"$') or s:match("^'(.*)'$")
    if q then return q end
    if s == "true" or s == "false" then return s == "true" end
    return tonumber(s) or s
end

-- Block mappings and lists of plain values, nested by indentation: what policy-like YAML is
-- made of. Anything else (flow style, anchors, multi-line strings) gives nil.
local function yaml_decode(text)
    local lines = {}
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        line = line:gsub("\r$", "")
        if not line:match("^%s*$") and not line:match("^%s*#") and not line:match("^%-%-%-") then
            lines[#lines + 1] = { indent = #line:match("^ *"), text = line:match("^ *(.-)%s*$") }
        end
    end
    local i = 1
    local function block(indent)
        local out, list = {}, nil
        while i <= #lines and lines[i].indent == indent do
            local l = lines[i].text
            local item = l:match("^%- (.*)$") or (l == "-" and "")
            if item then
                if list == false or item == "" or item:find(":%s") or item:find(":$") then
                    return nil
                end
                list = true
                out[#out + 1] = yaml_scalar(item)
                i = i + 1
            else
                local key, rest = l:match("^([%w_%-%.]+):%s*(.-)$")
                if not key or list then
                    return nil
                end
                list = false
                i = i + 1
                if rest == "" then
                    if i <= #lines and lines[i].indent > indent then
                        local v = block(lines[i].indent)
                        if v == nil then return nil end
                        out[key] = v
                    elseif i <= #lines and lines[i].indent == indent and lines[i].text:match("^%-") then
                        local v = block(indent) -- a list at the key's own indentation
                        if v == nil then return nil end
                        out[key] = v
                    else
                        out[key] = {}
                    end
                elseif rest:match("^[%[{|>&*!]") then
                    return nil
                else
                    out[key] = yaml_scalar(rest)
                end
            end
        end
        return out
    end
    if #lines == 0 then
        return nil
    end
    local t = block(lines[1].indent)
    if i <= #lines then
        return nil
    end
    return t
end

local function message(kind, value)
    return string_format("policies are Lua files, not %s, so this file cannot be read. The same "
        .. "policy in Lua (save it as a .lua file): %s", kind, example(value))
end

local function looks_like_json(text)
    return text:match("^%s*[{%[]") and text:find('"[^"\n]*"%s*:') ~= nil
end

-- by its first line that is not blank or a comment
local function looks_like_yaml(text)
    for line in text:gsub("^\239\187\191", ""):gmatch("[^\n]+") do
        line = line:gsub("%s+$", "")
        if line ~= "" and not line:match("^%s*#") then
            return (line:match("^%-%-%-") or line:match("^[%w_%-%.]+:%s") or line:match("^[%w_%-%.]+:$")
                or line:match("^%- ")) ~= nil
        end
    end
    return false
end

function _M.by_name(path)
    local ext = path:lower():match("%.(%a+)$")
    if ext == "json" then
        return message("JSON", json.decode(read(path) or ""))
    elseif ext == "yaml" or ext == "yml" then
        return message("YAML", yaml_decode(read(path) or ""))
    end
    return nil
end

function _M.by_content(path)
    local text = read(path)
    if not text then
        return nil
    end
    if looks_like_json(text) then
        return message("JSON", json.decode(text))
    elseif looks_like_yaml(text) then
        return message("YAML", yaml_decode(text))
    end
    return nil
end

return _M

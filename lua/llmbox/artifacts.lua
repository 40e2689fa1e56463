-- Results a run leaves behind: plots (their format and size) from the files the collect stage
-- read out of the sandbox; plus the checks on library names and base64 for JSON output (and
-- back, for uploads).
local byte, sub, concat = string.byte, string.sub, table.concat
local floor = math.floor

local _M = { _VERSION = "0.1.0" }

-- Width and height from a PNG's IHDR chunk (nil when the bytes are not a PNG).
function _M.png_size(data)
    if #data < 24 or sub(data, 1, 8) ~= "\137PNG\r\n\26\n" or sub(data, 13, 16) ~= "IHDR" then return nil end
    local function u32(i)
        local a, b, c, d = byte(data, i, i + 3)
        return ((a * 256 + b) * 256 + c) * 256 + d
    end
    return u32(17), u32(21)
end

-- Plot files -> { {format = "png", data, width, height, name}, {format = "html", ...} }
function _M.plots(files)
    local plots = {}
    for _, f in ipairs(files) do
        local ext = f.name:match("%.(%w+)$")
        if ext == "png" then
            local w, h = _M.png_size(f.data)
            if w then plots[#plots + 1] = { format = "png", data = f.data, width = w, height = h, name = f.name } end
        elseif ext == "html" or ext == "svg" then
            plots[#plots + 1] = { format = ext, data = f.data, name = f.name }
        end
    end
    return plots
end

-- A package name for a package manager's argv: no option (leading "-"), no path or URL, no
-- whitespace or control characters. Version specifiers (pkg==1.2, pkg@1.2, @scope/pkg) pass.
function _M.valid_package_name(name)
    if type(name) ~= "string" or name == "" then return false, "is not a non-empty string" end
    if #name > 200 then return false, "is longer than 200 characters" end
    if name:sub(1, 1) == "-" then return false, "starts with '-' (options cannot be passed as packages)" end
    if name:find("[%s%c]") then return false, "contains whitespace or control characters" end
    if name:find("://", 1, true) or name:find("..", 1, true) or name:find("\\", 1, true) then
        return false, "looks like a URL or a path; give a package name"
    end
    if not name:match("^@?[%w][%w@/._+~<>=!^*,:-]*$") then
        return false, "contains characters a package name cannot have"
    end
    local slashes = select(2, name:gsub("/", ""))
    if slashes > 1 or (slashes == 1 and name:sub(1, 1) ~= "@") then
        return false, "looks like a path; only npm scopes (@scope/name) may contain '/'"
    end
    return true
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
function _M.base64(data)
    local out, n = {}, 0
    for i = 1, #data, 3 do
        local a, b, c = byte(data, i, i + 2)
        local v = a * 65536 + (b or 0) * 256 + (c or 0)
        local c1, c2 = floor(v / 262144) % 64, floor(v / 4096) % 64
        local c3, c4 = floor(v / 64) % 64, v % 64
        n = n + 1
        out[n] = sub(B64, c1 + 1, c1 + 1) .. sub(B64, c2 + 1, c2 + 1)
            .. (b and sub(B64, c3 + 1, c3 + 1) or "=") .. (c and sub(B64, c4 + 1, c4 + 1) or "=")
    end
    return concat(out)
end

local B64_VALUE = {}
for i = 1, 64 do B64_VALUE[byte(B64, i)] = i - 1 end

-- base64 text -> bytes | nil, err. Whitespace (line breaks) is ignored; padding is optional.
function _M.unbase64(text)
    local s = text:gsub("[%s]", "")
    local pad = s:match("(=*)$")
    if #pad > 2 then return nil, "not valid base64 (too much = padding)" end
    s = s:sub(1, #s - #pad)
    if #s % 4 == 1 then return nil, "not valid base64 (wrong length)" end
    local out, n = {}, 0
    for i = 1, #s, 4 do
        local a, b, c, d = byte(s, i, i + 3)
        local va, vb = B64_VALUE[a], B64_VALUE[b]
        local vc, vd = c and B64_VALUE[c] or 0, d and B64_VALUE[d] or 0
        if not va or not vb or (c and not B64_VALUE[c]) or (d and not B64_VALUE[d]) then
            return nil, "not valid base64 (a character outside A-Z a-z 0-9 + / near offset " .. i .. ")"
        end
        local v = ((va * 64 + vb) * 64 + vc) * 64 + vd
        local x, y, z = floor(v / 65536), floor(v / 256) % 256, v % 256
        n = n + 1
        out[n] = d and string.char(x, y, z) or c and string.char(x, y) or string.char(x)
    end
    return concat(out)
end

return _M

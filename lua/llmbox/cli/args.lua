-- The command line's arguments: options, the code to run (-c CODE, FILE or -), -t and
-- --libraries. Every function returns nil, err with a message that says what was wrong and how
-- to write it instead.
local util = require "llmbox.util"

local io, ipairs, type, tonumber, unpack = io, ipairs, type, tonumber, unpack
local format = string.format

local _M = { _VERSION = "0.1.0" }

-- As many as the MCP tools accept (llmbox.mcp.tools, LIBRARIES.maxItems).
_M.MAX_LIBRARIES = 50

--- args.parse(args, spec) -> opts, positional | nil, err
--- spec: { ["-l"] = "lang" (takes a value), ["--json"] = { flag = "json" },
--- ["--libraries"] = { list = "libraries" } (repeatable: values collect in a list),
--- _stop_at_positional = true (everything after FILE belongs to the program) }.
--- "--" ends the options; its remainder is opts.rest. "--name=value" works for long options.
function _M.parse(args, spec)
    local opts, pos, i = {}, {}, 1
    while i <= #args do
        local a = args[i]
        if a == "--" then
            opts.rest = { unpack(args, i + 1) }
            break
        end
        local key, inline = a, nil
        if a:sub(1, 2) == "--" and a:find("=", 3, true) then
            key, inline = a:match("^(%-%-[^=]+)=(.*)$")
        end
        local s = spec[key]
        if type(s) == "table" and s.flag then
            if inline then return nil, key .. " takes no value" end
            opts[s.flag] = true
        elseif type(s) == "string" or (type(s) == "table" and s.list) then
            local v = inline
            if v == nil then
                i = i + 1
                v = args[i]
            end
            if v == nil then return nil, key .. " needs a value" end
            if type(s) == "string" then
                opts[s] = v
            else
                opts[s.list] = opts[s.list] or {}
                opts[s.list][#opts[s.list] + 1] = v
            end
        elseif a ~= "-" and a:sub(1, 1) == "-" and #pos == 0 then
            return nil, "unknown option " .. a
        else
            pos[#pos + 1] = a
            if spec._stop_at_positional then
                if args[i + 1] == "--" then i = i + 1 end
                opts.rest = { unpack(args, i + 1) }
                break
            end
        end
        i = i + 1
    end
    return opts, pos
end

local function read_file(path)
    local f, err = io.open(path, "rb")
    if not f then
        -- io.open's message starts with the path, which the caller names already
        if err:sub(1, #path + 2) == path .. ": " then err = err:sub(#path + 3) end
        return nil, err
    end
    local data, rerr = f:read("*a")
    f:close()
    if data then return data end
    if util.is_dir(path) then return nil, "it is a directory; give a file, -c CODE, or - for standard input" end
    return nil, rerr
end

--- args.code(opts, positional) -> code | nil, err: from -c CODE, FILE, or - (standard input).
--- Empty code from -c or - is refused: it is almost always a mistake (an unset shell variable, a
--- pipe that produced nothing), and the MCP tools refuse it too. An empty FILE is a program.
function _M.code(opts, pos)
    local file = pos[1]
    if opts.code then
        if file then return nil, "give either -c CODE or FILE, not both" end
        if opts.code == "" then return nil, "-c: the code is empty; give the code to run" end
        return opts.code
    end
    if file == "-" then
        if opts.stdin then return nil, "-i cannot be combined with code from standard input (-)" end
        local code = io.stdin:read("*a")
        if not code or code == "" then return nil, "-: standard input held no code" end
        return code
    end
    if not file then return nil, "no code: give -c CODE, a FILE, or - for standard input (see llmbox --help)" end
    local code, err = read_file(file)
    if not code then return nil, format("cannot read %s: %s", file, err) end
    return code
end

--- args.timeout(text) -> seconds | nil (not given) | nil, err. Plain decimal only: tonumber would
--- also take 0x10, 1e3, inf and nan.
function _M.timeout(text)
    if text == nil then return nil end
    local t = (text:match("^%d+%.?%d*$") or text:match("^%.%d+$")) and tonumber(text)
    if not t or t <= 0 then
        return nil, format("-t: expected a positive number of seconds in decimal, like 5 or 0.5; got %q", text)
    end
    return t
end

--- args.libraries({ "a,b", "c" }) -> { "a", "b", "c" } | nil | nil, err. A comma separates names
--- unless a version operator follows it: "pkg>=1,<2" is one requirement (pip's syntax). The names
--- themselves are checked where they are installed (Session:install), as for Lua and MCP.
function _M.libraries(values)
    if not values then return nil end
    local out = {}
    for _, v in ipairs(values) do
        local parts = {}
        for piece in (v .. ","):gmatch("([^,]*),") do
            if #parts > 0 and piece:match("^[<>=!~]") then
                parts[#parts] = parts[#parts] .. "," .. piece
            else
                parts[#parts + 1] = piece
            end
        end
        for _, name in ipairs(parts) do
            if name == "" then return nil, format("--libraries: an empty name in %q", v) end
            out[#out + 1] = name
        end
    end
    if #out > _M.MAX_LIBRARIES then
        return nil, format("--libraries: at most %d libraries, got %d", _M.MAX_LIBRARIES, #out)
    end
    return out
end

return _M

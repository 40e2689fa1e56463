-- Shared spec helpers: run the real CLI, make temporary files, plant host secrets.
local _M = {}

_M.root = os.getenv("PWD") or "."
_M.bin = _M.root .. "/build/bin/llmbox"

local function shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
_M.shell_quote = shell_quote

function _M.tmpname()
    local p = os.tmpname()
    return p
end

function _M.write(path, data)
    local f = assert(io.open(path, "wb"))
    f:write(data)
    f:close()
    return path
end

function _M.read(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local d = f:read("*a")
    f:close()
    return d
end

-- Monotonic seconds (busted's os.clock is CPU time).
function _M.now()
    return require("llmbox.util").now_ms() / 1000
end

function _M.uid()
    local p = io.popen("id -u")
    local u = p:read("*l")
    p:close()
    return u
end

function _M.is_root()
    return _M.uid() == "0"
end

-- Runs `llmbox ARGS...`; returns exit status, stdout, stderr. `opts.stdin` feeds standard input.
function _M.cli(args, opts)
    opts = opts or {}
    local out, err = os.tmpname(), os.tmpname()
    local parts = {}
    for i, a in ipairs(args) do parts[i] = shell_quote(a) end
    local cmd = shell_quote(_M.bin) .. " " .. table.concat(parts, " ")
    if opts.stdin then
        local inp = _M.write(os.tmpname(), opts.stdin)
        cmd = cmd .. " <" .. shell_quote(inp)
    else
        cmd = cmd .. " </dev/null"
    end
    if opts.env then cmd = opts.env .. " " .. cmd end
    local ok, how, code = os.execute(cmd .. " >" .. out .. " 2>" .. err)
    -- LuaJIT (5.1 semantics): os.execute returns the raw wait status.
    local status = type(ok) == "number" and math.floor(ok / 256) or code
    local o, e = _M.read(out), _M.read(err)
    os.remove(out); os.remove(err)
    return status, o, e
end

-- A Python snippet's result in a fresh one-run session.
function _M.py(code, opts)
    local llmbox = require "llmbox"
    local s = assert(llmbox.session({ lang = "python", policy = opts and opts.policy }))
    local r, err = s:run(code, opts and opts.run)
    s:close()
    return r, err
end

return _M

-- Small helpers shared by the library: UTF-8 repair for JSON output, module-relative paths.
local byte, sub, concat = string.byte, string.sub, table.concat
local floor = math.floor

local ffi = require "ffi"

local _M = { _VERSION = "0.1.0" }

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } llmbox_timespec;
int clock_gettime(int clk, llmbox_timespec *ts);
int nanosleep(const llmbox_timespec *req, llmbox_timespec *rem);
]]
local timespec = ffi.typeof("llmbox_timespec")
-- (declared apart: another module may have declared them already)
pcall(ffi.cdef, "char *realpath(const char *path, char *resolved);")
pcall(ffi.cdef, "void free(void *p);")

--- util.realpath(path) -> the path with every symlink, "." and ".." resolved | nil (it does not exist)
function _M.realpath(path)
    local p = ffi.C.realpath(path, nil)
    if p == nil then return nil end
    local out = ffi.string(p)
    ffi.C.free(p)
    return out
end

-- Milliseconds of CLOCK_MONOTONIC (os.clock is CPU time, os.time has whole seconds).
--- util.random_hex(n) -> n random bytes from the kernel, as hex
function _M.random_hex(n)
    local f = assert(io.open("/dev/urandom", "rb"))
    local bytes = f:read(n)
    f:close()
    return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

--- util.url_encode(s) -> s with every byte but RFC 3986's unreserved ones percent-encoded
function _M.url_encode(s)
    return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

function _M.now_ms()
    local ts = timespec()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end

-- Sleeps ms milliseconds (for short waits on someone else's bookkeeping, such as an engine's).
function _M.sleep_ms(ms)
    -- inside a stepped task (llmbox.task, loaded only where tasks exist) the task yields instead
    local task = package.loaded["llmbox.task"]
    if task then
        local deadline = _M.now_ms() + ms
        local yielded = false
        while _M.now_ms() < deadline and task.await({ deadline = deadline }) do yielded = true end
        if yielded then return end
    end
    local ts = timespec()
    ts.tv_sec = floor(ms / 1000)
    ts.tv_nsec = (ms % 1000) * 1e6
    ffi.C.nanosleep(ts, nil)
end

-- Replaces every byte that is not part of a well-formed UTF-8 sequence with U+FFFD, so program
-- output of any kind can go into JSON without breaking the encoder or the reader.
function _M.utf8_repair(s)
    if not s:find("[\128-\255]") then return s end
    local out, n, i, len = {}, 0, 1, #s
    while i <= len do
        local c = byte(s, i)
        local need, min
        if c < 0x80 then need = 0
        elseif c >= 0xC2 and c <= 0xDF then need, min = 1, 0x80
        elseif c >= 0xE0 and c <= 0xEF then need, min = 2, 0x800
        elseif c >= 0xF0 and c <= 0xF4 then need, min = 3, 0x10000
        else need = -1 end
        local ok = need >= 0 and i + need <= len
        if ok and need > 0 then
            local cp = c % (2 ^ (6 - need))
            for k = 1, need do
                local b = byte(s, i + k)
                if b < 0x80 or b > 0xBF then ok = false break end
                cp = cp * 64 + (b - 0x80)
            end
            if ok and (cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF)) then ok = false end
        end
        n = n + 1
        if ok then
            out[n] = sub(s, i, i + need)
            i = i + need + 1
        else
            out[n] = "\239\191\189"
            i = i + 1
        end
    end
    return concat(out)
end

-- "512 MiB" style, for messages.
function _M.human_size(bytes)
    local units = { "B", "KiB", "MiB", "GiB", "TiB" }
    local u = 1
    while bytes >= 1024 and u < #units do bytes = bytes / 1024; u = u + 1 end
    if bytes == floor(bytes) then return string.format("%d %s", bytes, units[u]) end
    return string.format("%.1f %s", bytes, units[u])
end

-- Directory of the calling module's file (for finding shipped data next to the code).
function _M.module_dir(level)
    local src = debug.getinfo((level or 1) + 1, "S").source
    if sub(src, 1, 1) ~= "@" then return "." end
    return (src:sub(2):match("^(.*)/[^/]*$")) or "."
end

function _M.is_dir(path)
    local f = io.open(path .. "/.", "r")
    if f then f:close() return true end
    return false
end

function _M.file_exists(path)
    local f = io.open(path, "r")
    if f then f:close() return true end
    return false
end

function _M.read_file(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local d = f:read("*a")
    f:close()
    return d
end

-- A snapshot of the host's processes from /proc: pid -> { ppid =, state = } (state "Z": zombie).
function _M.processes()
    local out = {}
    for _, name in ipairs(require("llmbox.core").listdir("/proc") or {}) do
        local stat = name:match("^%d+$") and _M.read_file("/proc/" .. name .. "/stat") or ""
        -- the command name may contain spaces and parentheses: the fields follow the last ')'
        local state, ppid = stat:match("^.*%) (%S+) (%d+)")
        if ppid then out[tonumber(name)] = { ppid = tonumber(ppid), state = state } end
    end
    return out
end

-- Live (not zombie) descendants of `pid`, parents before children.
function _M.descendants(pid)
    local children = {}
    for p, info in pairs(_M.processes()) do
        if info.state ~= "Z" then
            children[info.ppid] = children[info.ppid] or {}
            children[info.ppid][#children[info.ppid] + 1] = p
        end
    end
    local out, i = { pid }, 1
    while out[i] do
        for _, c in ipairs(children[out[i]] or {}) do out[#out + 1] = c end
        i = i + 1
    end
    table.remove(out, 1)
    return out
end

-- Private temporary directories. A daemon running as root must never write where another local
-- user can race it, so nothing is staged under a guessable name in a shared directory: mkdtemp
-- makes a fresh 0700 directory with a random name that only we can enter, under $TMPDIR (else
-- $XDG_RUNTIME_DIR, else /tmp). luv is loaded only here: runs without plots never pay for it.
local function temp_base()
    for _, name in ipairs({ "TMPDIR", "XDG_RUNTIME_DIR" }) do
        local v = os.getenv(name)
        if v and v ~= "" then return v, name end
    end
    return "/tmp"
end

--- util.private_dir(prefix) -> path | nil, err: a new directory (mode 0700) the caller removes
function _M.private_dir(prefix)
    local base, from = temp_base()
    local dir, err = require("luv").fs_mkdtemp(base .. "/" .. (prefix or "llmbox") .. "-XXXXXX")
    if not dir then
        return nil, ("cannot create a private temporary directory under %s%s: %s"):format(base,
            from and " ($" .. from .. ")" or "", tostring(err))
    end
    return dir
end

--- util.entries(dir) -> sorted names of everything in dir, dot files included ({} when it is not
--- a readable directory)
function _M.entries(dir)
    local uv = require "luv"
    local names, h = {}, uv.fs_scandir(dir)
    while h do
        local name = uv.fs_scandir_next(h)
        if not name then break end
        names[#names + 1] = name
    end
    table.sort(names)
    return names
end

--- util.remove_tree(path): removes a file or a directory and everything below it, dot files
--- included. Symbolic links are removed, never followed.
function _M.remove_tree(path)
    local uv = require "luv"
    local st = uv.fs_lstat(path)
    if not st then return end
    if st.type == "directory" then
        for _, name in ipairs(_M.entries(path)) do _M.remove_tree(path .. "/" .. name) end
        uv.fs_rmdir(path)
    else
        uv.fs_unlink(path)
    end
end

-- Files ending in `suffix` in a directory, sorted ({} when the directory does not exist).
function _M.list_dir(dir, suffix)
    local names = {}
    for _, name in ipairs(require("llmbox.core").listdir(dir) or {}) do
        if not suffix or name:sub(-#suffix) == suffix then names[#names + 1] = name end
    end
    return names
end

return _M

-- llmbox.policy.files: where policy files live and how a name or path finds one.
--
--   files.dirs([env])                       -> existing directories, in search order
--   files.resolve(name_or_path [, base_dir [, skip_path]]) -> path, name | nil, err
--   files.names_in(dirs), files.list_dir(dir), files.is_file(path), files.dirname(path)
--
-- A few libc calls through the FFI (opendir, realpath): loading a policy needs nothing beyond
-- LuaJIT, not even the C module.

local ffi = require "ffi"
local schema = require "llmbox.schema"

local type = type
local ipairs = ipairs
local pcall = pcall
local error = error
local io_open = io.open
local os_getenv = os.getenv
local debug_getinfo = debug.getinfo
local table_concat = table.concat
local table_sort = table.sort

local quote = schema.quote

local _M = {}

-- pcall: another module may already have declared these; redeclaring raises
pcall(ffi.cdef, "void *opendir(const char *name);")
pcall(ffi.cdef, "void *readdir(void *dirp);")
pcall(ffi.cdef, "int closedir(void *dirp);")
pcall(ffi.cdef, "char *realpath(const char *path, char *resolved_path);")
pcall(ffi.cdef, "void free(void *ptr);")
-- glibc's struct dirent on LP64 Linux (x86_64, aarch64): only the name's offset matters to us
pcall(ffi.cdef, [[
struct llmbox_dirent {
    uint64_t d_ino; int64_t d_off; unsigned short d_reclen; unsigned char d_type; char d_name[256];
};
]])
local C = ffi.C
local dirent_ptr = ffi.typeof("struct llmbox_dirent *")

local function realpath(p)
    local r = C.realpath(p, nil)
    if r == nil then
        return nil
    end
    local s = ffi.string(r)
    C.free(r)
    return s
end

local function is_dir(p)
    local d = C.opendir(p)
    if d == nil then
        return false
    end
    C.closedir(d)
    return true
end

local function is_file(p)
    local f = io_open(p, "r")
    if not f then
        return false
    end
    f:close()
    -- io.open succeeds on directories too
    return not is_dir(p)
end

local function list_dir(p)
    local d = C.opendir(p)
    if d == nil then
        return {}
    end
    local names = {}
    while true do
        local e = C.readdir(d)
        if e == nil then
            break
        end
        names[#names + 1] = ffi.string(ffi.cast(dirent_ptr, e).d_name)
    end
    C.closedir(d)
    table_sort(names)
    return names
end

local function dirname(p)
    return p:match("^(.*)/[^/]*$") or "."
end

local function basename(p)
    return p:match("([^/]*)$")
end

_M.realpath, _M.is_dir, _M.is_file, _M.list_dir, _M.dirname = realpath, is_dir, is_file, list_dir, dirname

-- ---------------------------------------------------------------------------------------------
-- where policies live

-- resolved once, at require time: package.path entries are often relative ("lua/?.lua") and
-- would point elsewhere after a chdir. This file is lua/llmbox/policy/files.lua; the candidates
-- below are relative to lua/llmbox.
local MODULE_DIR
do
    local src = debug_getinfo(1, "S").source
    if src:sub(1, 1) == "@" then
        local d = dirname(dirname(src:sub(2)))
        MODULE_DIR = realpath(d) or d
    end
end

local function env_lookup(env)
    if env == nil then
        return os_getenv
    elseif type(env) == "function" then
        return env
    elseif type(env) == "table" then
        return function(k) return env[k] end
    end
    error("policy.dirs: env must be nil, a function or a table, got " .. type(env), 3)
end

-- dirs([env]) -> array of existing directories, in search order, without duplicates
function _M.dirs(env)
    local getenv = env_lookup(env)
    local candidates = {}
    local p = getenv("LLMBOX_POLICY_PATH")
    if type(p) == "string" then
        for entry in p:gmatch("[^:]+") do
            candidates[#candidates + 1] = entry
        end
    end
    local mdir = MODULE_DIR
    if mdir then
        candidates[#candidates + 1] = mdir .. "/../../policies"         -- repository layout
        candidates[#candidates + 1] = mdir .. "/../../../llmbox/policies" -- $PREFIX/share/llmbox
        candidates[#candidates + 1] = mdir .. "/policies"                 -- a LuaRocks tree
    end
    local out, seen = {}, {}
    for _, c in ipairs(candidates) do
        local r = realpath(c)
        if r and not seen[r] and is_dir(r) then
            seen[r] = true
            out[#out + 1] = r
        end
    end
    return out
end

-- a file name rather than a policy name (.yaml and .json too: they get their own error)
local function is_path(s)
    local lower = s:lower()
    return s:find("/", 1, true) ~= nil or lower:match("%.lua$") ~= nil
        or lower:match("%.ya?ml$") ~= nil or lower:match("%.json$") ~= nil
end

local function names_in(dirs)
    local names, seen = {}, {}
    for _, d in ipairs(dirs) do
        for _, f in ipairs(list_dir(d)) do
            local n = f:match("^(.+)%.lua$")
            if n and not seen[n] and is_file(d .. "/" .. f) then
                seen[n] = true
                names[#names + 1] = n
            end
        end
    end
    table_sort(names)
    return names
end

local function not_found(name, dirs)
    local names = names_in(dirs)
    local msg = "no policy named " .. quote(name)
    local near = schema.suggest(name, names)
    if near then
        msg = msg .. " (did you mean " .. quote(near) .. "?)"
    end
    if #dirs == 0 then
        msg = msg .. "; no policy directory exists (set LLMBOX_POLICY_PATH to a directory of .lua files)"
    else
        msg = msg .. "; searched " .. table_concat(dirs, ", ")
    end
    if #names > 0 then
        msg = msg .. "; available: " .. table_concat(names, ", ")
    end
    return nil, msg
end

-- resolve(name_or_path [, relative_to_dir [, skip_path]]) -> path, name | nil, err
local function resolve(what, base_dir, skip)
    if is_path(what) then
        local p = what
        if p:sub(1, 1) ~= "/" and base_dir then
            p = base_dir .. "/" .. p
        end
        local r = realpath(p)
        if not r or not is_file(r) then
            return nil, "policy file not found: " .. p
        end
        return r, (basename(r):gsub("%.lua$", ""))
    end
    if what == "" then
        return nil, "policy name is empty; give a name such as \"default\" or a path to a .lua file"
    end
    local dirs = _M.dirs()
    for _, d in ipairs(dirs) do
        local p = d .. "/" .. what .. ".lua"
        if is_file(p) then
            local r = realpath(p) or p
            if r ~= skip then
                return r, what
            end
        end
    end
    return not_found(what, dirs)
end
_M.names_in = names_in
_M.resolve = resolve

return _M

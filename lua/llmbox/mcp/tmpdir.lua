-- llmbox.mcp.tmpdir: the server's private temporary directory, where uploads and downloads are
-- staged. The server may run as root: it must never write where another local user can race it.
--
--   local dir, err = tmpdir.create()   -- $TMPDIR (or $XDG_RUNTIME_DIR, or /tmp)/llmbox-mcp-XXXXXX
--   tmpdir.remove(dir)                 -- at exit
--
-- The directory is made by mkdtemp (mode 0700, a fresh name) and holds a record of its owner (pid,
-- start time, boot and pid namespace), so that the next start can remove the directories of servers
-- that were killed with SIGKILL and cannot have cleaned up, and keep those of live ones. Only a
-- directory that is exactly one of ours is removed (a real directory, owned by us, mode 0700,
-- with a well-formed record); nothing is followed: a symbolic link inside is removed, never
-- walked into, and a link in place of the directory is left alone.
local ffi = require "ffi"
local uv = require "luv"
local read = require("llmbox.util").read_file

local ipairs, tostring, os = ipairs, tostring, os
local format, concat = string.format, table.concat

local _M = { _VERSION = "0.1.0" }

_M.PREFIX = "llmbox-mcp-"
local OWNER = "owner"

pcall(ffi.cdef, "unsigned geteuid(void);")

-- where the directory goes: TMPDIR as usual, else the user's private runtime directory
function _M.base(getenv)
    getenv = getenv or os.getenv
    for _, name in ipairs({ "TMPDIR", "XDG_RUNTIME_DIR" }) do
        local v = getenv(name)
        if v and v ~= "" then return v, name end
    end
    return "/tmp", nil
end

-- A process's start time (clock ticks since boot, field 22 of /proc/PID/stat): with the pid, it
-- names one process, even after the pid is reused.
local function start_time(pid)
    local stat = read("/proc/" .. pid .. "/stat")
    -- the command name may contain spaces and parentheses: the fields follow the last ')'
    local rest = stat and stat:match("^.*%) (.*)$")
    if not rest then return nil end
    local i = 2 -- the state is field 3
    for field in rest:gmatch("%S+") do
        i = i + 1
        if i == 22 then return field end
    end
end

local function identity()
    return {
        pid = tostring(uv.os_getpid()),
        start = start_time("self"),
        boot = (read("/proc/sys/kernel/random/boot_id") or ""):match("[%x%-]+") or "unknown",
        pidns = uv.fs_readlink("/proc/self/ns/pid") or "unknown",
    }
end

local function format_record(id)
    return format("pid=%s start=%s boot=%s pidns=%s\n", id.pid, id.start or "unknown", id.boot, id.pidns)
end

local function parse_record(text)
    local pid, start, boot, pidns = (text or ""):match("^pid=(%d+) start=(%d+) boot=([%x%-]+) pidns=(%S+)\n$")
    if not pid then return nil end
    return { pid = pid, start = start, boot = boot, pidns = pidns }
end

--- remove(path): removes a file, a symbolic link or a directory tree, without following links
-- (every entry is looked at with lstat). Returns true, or nil and what could not be removed.
function _M.remove(path)
    local st = uv.fs_lstat(path)
    if not st then return true end
    if st.type ~= "directory" then
        local ok, err = uv.fs_unlink(path)
        if not ok and not tostring(err):find("^ENOENT") then return nil, err end
        return true
    end
    local problems = {}
    local req = uv.fs_scandir(path)
    while req do
        local name = uv.fs_scandir_next(req)
        if not name then break end
        local ok, err = _M.remove(path .. "/" .. name)
        if not ok then problems[#problems + 1] = err end
    end
    local ok, err = uv.fs_rmdir(path)
    if not ok and not tostring(err):find("^ENOENT") then problems[#problems + 1] = err end
    if #problems > 0 then return nil, concat(problems, "; ") end
    return true
end

-- Whether `path` is a directory one of our servers made and whose server is gone.
local function stale(path, me)
    local st = uv.fs_lstat(path)
    -- ours: a real directory (not a link), our user's, private; anything else is not touched
    if not st or st.type ~= "directory" or st.uid ~= ffi.C.geteuid() or st.mode % 64 ~= 0 then
        return false
    end
    local rst = uv.fs_lstat(path .. "/" .. OWNER)
    local owner = rst and rst.type == "file" and rst.size < 4096 and parse_record(read(path .. "/" .. OWNER))
    if not owner then return false end
    if owner.boot ~= me.boot then return true end      -- from before a reboot: nobody is left
    if owner.pidns ~= me.pidns then return false end   -- another pid namespace: we cannot tell
    return start_time(owner.pid) ~= owner.start        -- gone, or its pid is someone else's now
end

--- remove_stale([base]) -> names removed: the directories of servers that no longer run
function _M.remove_stale(base, me)
    base = base or _M.base()
    me = me or identity()
    local removed = {}
    local req = uv.fs_scandir(base)
    while req do
        local name = uv.fs_scandir_next(req)
        if not name then break end
        local ours = name:sub(1, #_M.PREFIX) == _M.PREFIX and #name == #_M.PREFIX + 6
        if ours and stale(base .. "/" .. name, me) and _M.remove(base .. "/" .. name) then
            removed[#removed + 1] = name
        end
    end
    return removed
end

--- create([base]) -> path, removed | nil, err. Removes stale directories first (`removed`
-- lists their names).
function _M.create(base)
    base = base or _M.base()
    local me = identity()
    local removed = _M.remove_stale(base, me)
    local dir, err = uv.fs_mkdtemp(base .. "/" .. _M.PREFIX .. "XXXXXX")
    if not dir then return nil, format("cannot create a temporary directory in %s: %s", base, tostring(err)) end
    -- O_EXCL: a fresh file in a directory only we can write to
    local fd, oerr = uv.fs_open(dir .. "/" .. OWNER, "wx", 384)
    local ok, werr = fd, oerr
    if fd then
        local record = format_record(me)
        local n
        n, werr = uv.fs_write(fd, record, 0)
        ok = n == #record
        if n and not ok then werr = format("wrote %d of %d bytes", n, #record) end
        local closed, cerr = uv.fs_close(fd)
        if ok and not closed then ok, werr = false, cerr end
    end
    if not ok then
        _M.remove(dir)
        return nil, format("cannot write %s/%s: %s", dir, OWNER, tostring(werr))
    end
    return dir, removed
end

return _M

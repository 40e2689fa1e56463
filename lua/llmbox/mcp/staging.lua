-- llmbox.mcp.staging: files on their way into or out of a sandbox, staged in the server's private
-- temporary directory. User data must never be lost quietly: every open, write, close and read is
-- checked, and the size that arrived is compared with the size that was sent; a failure is an
-- error that says which step failed on which file, never a success.
--
-- The file operations run in libuv's thread pool and the handler waits for each in its coroutine,
-- so a 24 MB upload does not hold up the event loop.
--
--   local path = staging.path()                        -- a fresh name in the directory
--   local ok, err = staging.write(path, data)          -- from a handler
--   local data, err, is_dir = staging.read(path, max)
--   staging.discard(path)
local uv = require "luv"
local ctx = require "llmbox.mcp.context"
local tmpdir = require "llmbox.mcp.tmpdir"

local select, unpack, tostring = select, unpack, tostring
local format = string.format
local await = ctx.await

local _M = { _VERSION = "0.1.0" }

-- fs(uv.fs_xxx, args...) -> result | nil, err: one libuv file operation, waited for
local function fs(fn, ...)
    local args = { n = select("#", ...) + 1, ... }
    return await(function(resume)
        args[args.n] = function(err, result)
            if err then return resume(nil, err) end
            resume(result)
        end
        fn(unpack(args, 1, args.n))
    end)
end

local seq = 0
function _M.path()
    seq = seq + 1
    return format("%s/f%d", ctx.state.tmpdir, seq)
end

function _M.discard(path)
    local ok, err = tmpdir.remove(path)
    if not ok then ctx.log("cannot remove the staged %s: %s", path, tostring(err)) end
end

--- write(path, data) -> true | nil, err: a new file (never an existing one or a link) holding
-- exactly `data`; on failure nothing is left at `path`
function _M.write(path, data)
    local fd, err = fs(uv.fs_open, path, "wx", 384)
    if not fd then return nil, format("creating %s: %s", path, tostring(err)) end
    local done = 0
    while done < #data do
        local n, werr = fs(uv.fs_write, fd, done == 0 and data or data:sub(done + 1), done)
        if not n or n <= 0 then
            err = format("writing %s (%d of %d bytes written): %s", path, done, #data,
                tostring(werr or "nothing was written"))
            break
        end
        done = done + n
    end
    local closed, cerr = fs(uv.fs_close, fd)
    if not err and not closed then err = format("closing %s: %s", path, tostring(cerr)) end
    if not err then
        local st, serr = fs(uv.fs_stat, path)
        if not st then
            err = format("checking %s: %s", path, tostring(serr))
        elseif st.size ~= #data then
            err = format("%s holds %d bytes, not the %d written", path, st.size, #data)
        end
    end
    if err then
        _M.discard(path)
        return nil, err
    end
    return true
end

--- read(path, max) -> data | nil, err, is_directory: the whole file, checked against its size
function _M.read(path, max)
    local st, err = fs(uv.fs_lstat, path)
    if not st then return nil, format("reading %s: %s", path, tostring(err)) end
    if st.type == "directory" then return nil, path .. " is a directory", true end
    if st.type ~= "file" then return nil, format("%s is not a regular file (%s)", path, st.type) end
    if max and st.size > max then
        return nil, format("%s holds %d bytes, more than the %d allowed", path, st.size, max)
    end
    local fd, oerr = fs(uv.fs_open, path, "r", 0)
    if not fd then return nil, format("opening %s: %s", path, tostring(oerr)) end
    local parts, got, rerr = {}, 0, nil
    while got < st.size do
        local chunk
        chunk, rerr = fs(uv.fs_read, fd, math.min(st.size - got, 4 * 1024 * 1024), got)
        if not chunk or chunk == "" then break end
        parts[#parts + 1] = chunk
        got = got + #chunk
    end
    fs(uv.fs_close, fd) -- read-only: closing cannot lose data
    if got ~= st.size then
        return nil, format("reading %s: got %d of %d bytes%s", path, got, st.size,
            rerr and (": " .. tostring(rerr)) or "")
    end
    return table.concat(parts)
end

return _M

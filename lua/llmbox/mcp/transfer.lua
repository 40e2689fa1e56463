-- llmbox.mcp.transfer: upload_file and download_file, files into and out of a session's /sandbox.
-- Each file is staged in the server's private temporary directory (llmbox.mcp.staging) and copied
-- by the session's worker; the copy itself never leaves /sandbox (openat2 beneath, no symlinks).
local artifacts = require "llmbox.artifacts"
local util = require "llmbox.util"
local ctx = require "llmbox.mcp.context"
local results = require "llmbox.mcp.results"
local sessions = require "llmbox.mcp.sessions"
local staging = require "llmbox.mcp.staging"

local tostring = tostring
local format = string.format

local _M = { _VERSION = "0.1.0" }

local MAX_DOWNLOAD = 10 * 1024 * 1024

--- workspace_path(p) -> path | nil, err: "x.txt" and "/sandbox/x.txt" both mean the workspace's
--- x.txt; anything else is refused here (the daemon's file routes take paths the same way)
function _M.workspace_path(p)
    if p:sub(1, 1) ~= "/" then p = "/sandbox/" .. p end
    if p:sub(1, 9) ~= "/sandbox/" or #p == 9 then
        return nil, format("path %q is outside the workspace: give a path under /sandbox/ or relative to it", p)
    end
    if ("/" .. p .. "/"):find("/%.%.?/") then
        return nil, format("path %q must not contain . or .. components", p)
    end
    return p
end

-- what to do when the staging directory is the problem
local function staging_hint(err)
    local e = tostring(err):lower()
    if e:find("no space left", 1, true) or e:find("quota", 1, true) then
        return format(" (files are staged in the server's temporary directory %s on their way; free space "
            .. "there or start the server with TMPDIR pointing at a directory with more room)", ctx.state.tmpdir)
    end
    return ""
end

local handlers = {}
_M.handlers = handlers

function handlers.upload_file(args, call)
    local path, perr = _M.workspace_path(args.path)
    if not path then return results.error(perr) end
    local data = args.content
    if args.encoding == "base64" then
        local d, derr = artifacts.unbase64(data)
        if not d then return results.error("content: " .. derr) end
        data = d
    end
    return sessions.with_session(call, args.session_id, function(sess)
        local tmp = staging.path()
        local ok, err = staging.write(tmp, data)
        if not ok then
            return results.error(format("cannot upload %s: staging it failed: %s%s; nothing was written to the "
                .. "sandbox", path, err, staging_hint(err)))
        end
        local res, cerr = sess.worker:request({ op = "copy_in", src = tmp, dst = path, size = #data })
        staging.discard(tmp)
        if not res then return results.error(format("cannot write %s: %s", path, tostring(cerr))) end
        return results.json({ path = path, size = #data })
    end)
end

local function is_text(data)
    return not data:find("%z") and util.utf8_repair(data) == data
end

function handlers.download_file(args, call)
    local path, perr = _M.workspace_path(args.path)
    if not path then return results.error(perr) end
    return sessions.with_session(call, args.session_id, function(sess)
        local tmp = staging.path()
        local res, err = sess.worker:request({ op = "copy_out", src = path, dst = tmp, max = MAX_DOWNLOAD })
        if not res then
            staging.discard(tmp)
            return results.error(format("cannot download %s: %s%s", path, tostring(err), staging_hint(err)))
        end
        local data, rerr, is_dir = staging.read(tmp, MAX_DOWNLOAD)
        staging.discard(tmp)
        if is_dir then return results.error(format("%s is a directory: download files one at a time", path)) end
        if not data then return results.error(format("cannot download %s: %s", path, rerr)) end
        local text = is_text(data)
        return results.json({ path = path, size = #data, encoding = text and "text" or "base64",
            content = text and data or artifacts.base64(data) })
    end)
end

return _M

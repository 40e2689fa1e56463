-- llmbox.serve.snapshot: the policies the daemon runs, as they were when it started or last
-- reloaded. Workers are fresh processes that load their policy by name; without a snapshot, an
-- operator's half-edited policy file would take effect on the next run, and a reload that
-- refuses a broken file could not keep the old one. So the daemon copies every policy directory
-- (in search order, pool policies included) into its private directory, checks that every policy
-- a client may pick loads from the copy, and only then points LLMBOX_POLICY_PATH (which its
-- workers inherit) at it.
--
--   local dirs, err = snapshot.take(S.tmpdir, gen, check)  -- check() -> true | nil, err
local uv = require "luv"
local files = require "llmbox.policy.files"
local util = require "llmbox.util"

local ipairs, tostring, format, concat = ipairs, tostring, string.format, table.concat

local _M = { _VERSION = "0.1.0" }

local function copy_tree(from, to)
    local ok, err = uv.fs_mkdir(to, 448)
    if not ok and not tostring(err):find("EEXIST", 1, true) then return nil, err end
    for _, name in ipairs(util.entries(from)) do
        local src, dst = from .. "/" .. name, to .. "/" .. name
        if util.is_dir(src) then
            local cok, cerr = copy_tree(src, dst)
            if not cok then return nil, cerr end
        else
            local data = util.read_file(src)
            -- (an unreadable file is left out: loading it fails the same way from the copy)
            if data then
                local f, ferr = io.open(dst, "wb")
                if not f then return nil, ferr end
                f:write(data)
                f:close()
            end
        end
    end
    return true
end

--- take(base, gen, check) -> path list (for LLMBOX_POLICY_PATH) | nil, err. Copies the current
--- policy directories under base/policies.<gen>/ and runs check() with LLMBOX_POLICY_PATH set to
--- the copy; when it fails, the environment and the previous snapshot are left as they were.
function _M.take(base, gen, check)
    -- the directories as they are searched now, the previous snapshot left out
    local previous = os.getenv("LLMBOX_POLICY_PATH")
    local original = os.getenv("LLMBOX_SERVE_POLICY_PATH_ORIGINAL")
    if original == nil then
        original = previous or ""
        uv.os_setenv("LLMBOX_SERVE_POLICY_PATH_ORIGINAL", original)
    end
    local dirs = files.dirs(function(k)
        if k == "LLMBOX_POLICY_PATH" then return original ~= "" and original or nil end
        return os.getenv(k)
    end)
    local root = format("%s/policies.%d", base, gen)
    util.remove_tree(root)
    local ok, err = uv.fs_mkdir(root, 448)
    if not ok then return nil, format("cannot make %s: %s", root, tostring(err)) end
    local copies = {}
    for n, d in ipairs(dirs) do
        copies[n] = format("%s/%d", root, n)
        local cok, cerr = copy_tree(d, copies[n])
        if not cok then
            util.remove_tree(root)
            return nil, format("cannot copy the policies of %s: %s", d, tostring(cerr))
        end
    end
    local path = concat(copies, ":")
    uv.os_setenv("LLMBOX_POLICY_PATH", path)
    local cok, cerr = check()
    if not cok then
        if previous then uv.os_setenv("LLMBOX_POLICY_PATH", previous) else uv.os_unsetenv("LLMBOX_POLICY_PATH") end
        util.remove_tree(root)
        return nil, cerr
    end
    return root
end

return _M

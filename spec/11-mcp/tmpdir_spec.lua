-- The server's temporary directory (where uploads and downloads are staged) is private (0700,
-- made with mkdtemp), removed at exit, and a later start removes the ones that servers killed
-- with SIGKILL left behind, but never a live server's, nor anything that is not a server's.
local uv = require "luv"
local raw = require "support.mcp.raw"
local helpers = require "spec.helpers"

local function start(tmp)
    local c = raw.start({ TMPDIR = tmp, LLMBOX_MCP_WARM = "0" })
    c:init()
    return c
end

-- names in `dir` that start with llmbox-mcp-
local function server_dirs(dir)
    local out = {}
    for _, n in ipairs(require("llmbox.core").listdir(dir) or {}) do
        if n:find("^llmbox%-mcp%-") then out[n] = true end
    end
    return out
end

local function only_new(before, after)
    local new
    for n in pairs(after) do
        if not before[n] then
            assert.is_nil(new, "more than one new directory")
            new = n
        end
    end
    return assert(new, "the server made no directory")
end

local function kill9(c)
    c.handle:kill("sigkill")
    c:close(5)
end

describe("mcp temporary directory #unpriv", function()
    local tmp
    before_each(function() tmp = assert(uv.fs_mkdtemp("/tmp/llmbox-spec-tmpdir-XXXXXX")) end)
    after_each(function() os.execute("rm -rf " .. helpers.shell_quote(tmp)) end)

    it("is private, removed at exit, and a later start removes what a killed server left", function()
        local a = start(tmp)
        local a_dir = only_new({}, server_dirs(tmp))
        local st = assert(uv.fs_lstat(tmp .. "/" .. a_dir))
        assert.equal("directory", st.type)
        assert.equal(tonumber("700", 8), st.mode % 512)
        kill9(a)
        assert.is_true(server_dirs(tmp)[a_dir], "SIGKILL did not leave the directory (the spec proves nothing)")

        -- things that are not a server's: kept as they are, and nothing is followed
        local outside = assert(uv.fs_mkdtemp("/tmp/llmbox-spec-outside-XXXXXX"))
        finally(function() os.execute("rm -rf " .. helpers.shell_quote(outside)) end)
        helpers.write(outside .. "/precious", "keep me")
        assert(uv.fs_symlink(outside, tmp .. "/llmbox-mcp-link00"))
        assert(uv.fs_mkdir(tmp .. "/llmbox-mcp-nobody", 448))
        helpers.write(tmp .. "/llmbox-mcp-nobody/data", "not a server's")
        -- the killed server's directory holds a link out: removing it must not follow the link
        assert(uv.fs_symlink(outside, tmp .. "/" .. a_dir .. "/escape"))

        local b = start(tmp)
        local dirs = server_dirs(tmp)
        assert.is_nil(dirs[a_dir], "the killed server's directory is still there")
        assert.equal("keep me", helpers.read(outside .. "/precious"))
        assert.is_true(dirs["llmbox-mcp-link00"])
        assert.equal("not a server's", helpers.read(tmp .. "/llmbox-mcp-nobody/data"))
        local b_dir = only_new({ ["llmbox-mcp-link00"] = true, ["llmbox-mcp-nobody"] = true }, dirs)

        -- a live server's directory is kept by the next start
        local c = start(tmp)
        assert.is_true(server_dirs(tmp)[b_dir], "a live server's directory was removed")
        local status = c:close()
        assert.equal(0, status)
        status = b:close()
        assert.equal(0, status)
        assert.same({ ["llmbox-mcp-link00"] = true, ["llmbox-mcp-nobody"] = true }, server_dirs(tmp))
    end)

    it("does not mistake a reused pid for the server that left the directory", function()
        local a = start(tmp)
        local a_dir = only_new({}, server_dirs(tmp))
        kill9(a)
        -- the directory names its owner; make it name a live process (this spec's) instead, as if
        -- the killed server's pid had been reused: its start time still gives it away
        local owner = tmp .. "/" .. a_dir .. "/owner"
        local record = assert(helpers.read(owner), "no owner record in the server's directory")
        local mine = tostring(uv.os_getpid())
        local forged = record:gsub("pid=%d+", "pid=" .. mine)
        assert.are_not.equal(record, forged)
        helpers.write(owner, forged)
        local b = start(tmp)
        assert.is_nil(server_dirs(tmp)[a_dir], "a directory whose owner's pid was reused was kept")
        b:close()
    end)
end)

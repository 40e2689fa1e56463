-- upload_file and download_file stage the data in the server's temporary directory: when that
-- directory is too small, the call is a tool error that says what failed, never a success with a
-- truncated file; what fits arrives whole. (Root: the small directory is a tmpfs mounted in a
-- private mount namespace, so it vanishes with the server.)
local cjson = require "cjson"
local raw = require "support.mcp.raw"
local helpers = require "spec.helpers"
local artifacts = require "llmbox.artifacts"

-- `llmbox mcp` with TMPDIR on a tmpfs of `size`, mounted where only the server sees it
local function server_with_small_tmpdir(size)
    local dir = assert(require("luv").fs_mkdtemp("/tmp/llmbox-spec-tmpfs-XXXXXX"))
    local c = raw.start({ TMPDIR = dir, LLMBOX_MCP_WARM = "0" }, { argv = { "unshare", "--mount", "sh", "-c",
        'mount -t tmpfs -o size=' .. size .. ' tmpfs "$TMPDIR" && exec "$0" "$@"', helpers.bin, "mcp" } })
    c:init()
    c.tmpfs = dir
    return c
end

local next_id = 10
local function call(c, name, args)
    next_id = next_id + 1
    c:send(cjson.encode({ jsonrpc = "2.0", id = next_id, method = "tools/call",
        params = { name = name, arguments = args } }))
    local r = assert(c:response(next_id, 60), "no answer to " .. name)
    return assert(r.result, cjson.encode(r))
end

-- bytes that are not text, so the download comes back base64 and compares byte for byte
local function blob(n)
    local t = {}
    for i = 1, n do t[i] = string.char((i * 7919) % 256) end
    return table.concat(t)
end

describe("mcp file transfer with a small TMPDIR", function()
    it("refuses an upload that does not fit, naming what failed; one that fits arrives whole", function()
        local c = server_with_small_tmpdir("512k")
        finally(function()
            c:close()
            os.remove(c.tmpfs)
        end)
        local sid = call(c, "create_session", { language = "shell" }).structuredContent.session_id
        local big = blob(2 * 1024 * 1024)
        local r = call(c, "upload_file", { session_id = sid, path = "big.bin", content = artifacts.base64(big),
            encoding = "base64" })
        assert.is_true(r.isError, "a 2 MiB upload through a 512k TMPDIR reported success: " .. cjson.encode(r))
        local msg = r.content[1].text
        assert.matches("big.bin", msg, 1, true)
        assert.matches("[Nn]o space left on device", msg)
        assert.matches("TMPDIR", msg, 1, true)
        -- nothing half-written was left in the workspace
        r = call(c, "run_in_session", { session_id = sid, code = "ls -A /sandbox" })
        assert.equal("", r.structuredContent.stdout)

        local small = blob(100 * 1000)
        r = call(c, "upload_file", { session_id = sid, path = "small.bin", content = artifacts.base64(small),
            encoding = "base64" })
        assert.is_nil(r.isError, r.content[1].text)
        assert.equal(#small, r.structuredContent.size)
        r = call(c, "download_file", { session_id = sid, path = "small.bin" })
        assert.is_nil(r.isError, r.content[1].text)
        assert.equal("base64", r.structuredContent.encoding)
        assert.equal(small, artifacts.unbase64(r.structuredContent.content))

        -- a download that does not fit is an error too, not a short file
        r = call(c, "run_in_session", { session_id = sid, code = "head -c 1048576 /dev/zero | tr '\\0' x > /sandbox/out.txt" })
        assert.equal(0, r.structuredContent.exit_code)
        r = call(c, "download_file", { session_id = sid, path = "out.txt" })
        assert.is_true(r.isError, "a 1 MiB download through a 512k TMPDIR reported success")
        assert.matches("out.txt", r.content[1].text, 1, true)
        assert.matches("[Nn]o space left on device", r.content[1].text)

        local status, stderr = c:close()
        assert.equal(0, status, stderr)
    end)
end)

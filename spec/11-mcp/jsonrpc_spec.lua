-- The stdio framing: lines split wherever the reads fall, long lines refused without losing the
-- next one, and the last unterminated line flushed at the end of input.
local rpc = require "llmbox.mcp.jsonrpc"

local function splitter(max)
    local got, too_long = {}, 0
    local feed = rpc.lines(function(line) got[#got + 1] = line end, max, function() too_long = too_long + 1 end)
    return feed, got, function() return too_long end
end

describe("mcp JSON-RPC framing #unpriv", function()
    it("splits lines wherever the reads fall", function()
        local feed, got = splitter()
        for _, chunk in ipairs({ "a", "b\ncd", "\n\n", "e\nf" }) do feed(chunk) end
        assert.same({ "ab", "cd", "", "e" }, got)
        feed(nil)
        assert.same({ "ab", "cd", "", "e", "f" }, got)
    end)

    it("drops a line longer than the limit up to its newline, once, and goes on", function()
        local feed, got, too_long = splitter(10)
        feed("short\n" .. ("x"):rep(8))
        feed(("x"):rep(8))
        feed(("x"):rep(8) .. "\nnext\n")
        assert.same({ "short", "next" }, got)
        assert.equal(1, too_long())
        feed(("y"):rep(11) .. "\n")
        assert.equal(2, too_long())
        feed(("z"):rep(10) .. "\n")
        assert.same({ "short", "next", ("z"):rep(10) }, got)
    end)

    it("joins a long line from many reads in time linear in its length", function()
        local feed, got = splitter(rpc.MAX_LINE)
        local chunk = ("q"):rep(65536)
        local t = os.clock()
        for _ = 1, 500 do feed(chunk) end -- 31 MiB
        feed("\n")
        assert.equal(500 * 65536, #got[1])
        -- copying the line once per read (the old way) took ~8 s here, this ~0.05 s
        assert.is_true(os.clock() - t < 1, "joining took " .. (os.clock() - t) .. " s")
    end)
end)

-- execute_code's fast path: workers holding a small pool of ready, warm-started sandboxes, kept
-- from call to call. Every call still gets a fresh sandbox, and cancelling kills the worker.
local cjson = require "cjson"
local raw = require "support.mcp.raw"
local helpers = require "spec.helpers"

local INIT = { protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "raw", version = "1" } }

local function init(c)
    assert(c:request(1, "initialize", INIT), "no answer to initialize")
    c:send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
end

-- live `llmbox worker` children of the server
local function workers(server)
    local out = {}
    for pid, info in pairs(require("llmbox.util").processes()) do
        local cmd = info.ppid == server and info.state ~= "Z" and helpers.read("/proc/" .. pid .. "/cmdline") or ""
        if cmd:find("worker", 1, true) then out[#out + 1] = pid end
    end
    return out
end

local function call(c, id, code, lang)
    c:send(cjson.encode({ jsonrpc = "2.0", id = id, method = "tools/call",
        params = { name = "execute_code", arguments = { code = code, language = lang or "python" } } }))
end

local function result(c, id, timeout)
    while true do
        local msg = c:recv(timeout or 30)
        assert(msg, "no answer to request " .. id)
        if msg.id == id then return msg end
    end
end

local LIST = "import os\nopen('/sandbox/mine-%d', 'w').write('x')\nprint(sorted(os.listdir('/sandbox')))"

describe("mcp execute_code fast path #unpriv", function()
    it("keeps a warm worker, and gives every call a fresh sandbox", function()
        local c = raw.start()
        init(c)
        for id = 2, 4 do
            call(c, id, LIST:format(id))
            local r = result(c, id)
            assert.is_nil(r.result.isError)
            assert.equal(("['mine-%d']\n"):format(id), r.result.structuredContent.stdout)
        end
        local kept = workers(c.pid)
        assert.is_true(#kept >= 1, "no warm worker is kept between calls")
        call(c, 5, LIST:format(5))
        assert.equal("['mine-5']\n", result(c, 5).result.structuredContent.stdout)
        local status, stderr = c:close()
        assert.equal(0, status, stderr)
        for _, pid in ipairs(kept) do
            assert.is_nil(helpers.read("/proc/" .. pid .. "/cmdline"), "a warm worker outlived the server")
        end
    end)

    it("cancelling a warm run kills its worker, and the next call gets another", function()
        local c = raw.start()
        init(c)
        call(c, 2, "print('warm')")
        assert.equal("warm\n", result(c, 2).result.structuredContent.stdout)
        local before = workers(c.pid)
        call(c, 3, "import time\nprint('started', flush=True)\ntime.sleep(30)")
        os.execute("sleep 1")
        c:send(cjson.encode({ jsonrpc = "2.0", method = "notifications/cancelled",
            params = { requestId = 3, reason = "the spec cancels" } }))
        -- (the prewarmed worker may still have been starting at the first call, so there may
        -- be two: the one that ran the cancelled call must go)
        local gone = false
        for _ = 1, 50 do
            local alive = {}
            for _, pid in ipairs(workers(c.pid)) do alive[pid] = true end
            local still = 0
            for _, pid in ipairs(before) do if alive[pid] then still = still + 1 end end
            gone = still == #before - 1
            if gone then break end
            c:recv(0.1)
        end
        assert.is_true(gone, "the cancelled run's worker is still alive")
        call(c, 4, "print('after')")
        local r = result(c, 4)
        assert.equal("after\n", r.result.structuredContent.stdout)
        local _, stderr = c:close()
        assert.matches("request 3 cancelled", stderr)
    end)

    it("LLMBOX_MCP_WARM=0 turns it off: no worker outlives its call", function()
        local c = raw.start({ LLMBOX_MCP_WARM = "0" })
        init(c)
        call(c, 2, "print('cold')")
        assert.equal("cold\n", result(c, 2).result.structuredContent.stdout)
        local left
        for _ = 1, 50 do
            left = #workers(c.pid)
            if left == 0 then break end
            c:recv(0.1)
        end
        assert.equal(0, left)
        c:close()
    end)
end)

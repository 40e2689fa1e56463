-- `llmbox mcp` as pid 1 (a container started without --init): every process that ends up its
-- child, its own workers and the orphans of killed ones, is reaped, so zombies do not pile up
-- until pids run out. (Root: a pid namespace of our own, with unshare.)
local cjson = require "cjson"
local raw = require "support.mcp.raw"
local helpers = require "spec.helpers"
local util = require "llmbox.util"

-- every process under `root` (zombies too): pid -> state
local function tree(root)
    local procs, out = util.processes(), {}
    local children = {}
    for pid, info in pairs(procs) do
        children[info.ppid] = children[info.ppid] or {}
        table.insert(children[info.ppid], pid)
    end
    local queue = { root }
    while #queue > 0 do
        local p = table.remove(queue)
        for _, c in ipairs(children[p] or {}) do
            out[c] = procs[c].state
            queue[#queue + 1] = c
        end
    end
    return out
end

local function zombies(root)
    local n = 0
    for _, state in pairs(tree(root)) do if state == "Z" then n = n + 1 end end
    return n
end

local function execute(c, id, code, timeout)
    c:send(cjson.encode({ jsonrpc = "2.0", id = id, method = "tools/call", params = { name = "execute_code",
        arguments = { code = code, language = "shell", timeout = timeout } } }))
end

describe("mcp server as pid 1", function()
    it("reaps every process it inherits: no zombies after timed-out and cancelled calls", function()
        local c = raw.start({}, { argv = { "unshare", "--pid", "--fork", "--mount-proc", helpers.bin, "mcp" } })
        c:init()
        -- 20 calls that time out (8 run at once, the rest wait for a slot)
        for id = 100, 119 do execute(c, id, "sleep 30", 1) end
        for id = 100, 119 do
            local r = assert(c:response(id, 60), "no answer to call " .. id)
            assert.is_true(r.result.structuredContent.timed_out, cjson.encode(r))
        end
        -- calls cancelled while running: their workers are killed with their whole tree
        for id = 200, 203 do execute(c, id, "sleep 30." .. id) end
        local running = false
        for _ = 1, 100 do
            running = 0
            for pid in pairs(tree(c.pid)) do
                if (helpers.read("/proc/" .. pid .. "/cmdline") or ""):find("^sleep%z30%.2") then
                    running = running + 1
                end
            end
            if running == 4 then break end
            c:recv(0.1)
        end
        assert.equal(4, running, "the calls to cancel did not start")
        for id = 200, 203 do
            c:send(cjson.encode({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = id } }))
        end
        assert.equal(7, c:request(7, "ping").id)
        -- reaping may take a moment: poll, with a bound
        local left
        for _ = 1, 100 do
            left = zombies(c.pid)
            if left == 0 then break end
            c:recv(0.1)
        end
        assert.equal(0, left, "zombies in the server's pid namespace")
        local status, stderr = c:close()
        assert.equal(0, status, stderr)
    end)
end)

-- llmbox reaps every process it creates. The script below runs as pid 1 of a new pid namespace,
-- the way `llmbox mcp` runs as pid 1 of a container started without --init: every orphan of the
-- namespace is then its child, and nothing else would ever reap them. It stops runs in every way
-- the supervisor can (timeout, output cap, a fork bomb at the process limit), has runs fail in
-- setup, and destroys a pool whose prestarted sandboxes were never used; then it counts the
-- zombies in its namespace.
local helpers = require "spec.helpers"
local cjson = require "cjson"
local q = helpers.shell_quote

local SCRIPT = [==[
local llmbox = require "llmbox"
local cjson = require "cjson"

local function zombies()
    local list = {}
    for pid, info in pairs(require("llmbox.util").processes()) do
        if info.state == "Z" then
            local f = io.open("/proc/" .. pid .. "/comm")
            list[#list + 1] = pid .. " " .. (f and f:read("*l") or "?")
            if f then f:close() end
        end
    end
    table.sort(list)
    return list
end

local out = { pid = tonumber(require("llmbox.util").read_file("/proc/self/stat"):match("^%d+")) }
local policy = arg[1]
local s = assert(llmbox.session({ lang = "shell", policy = policy }))
local limits = {}
for _ = 1, 3 do
    limits[#limits + 1] = assert(s:exec("sleep 30 & sleep 30", { timeout = 0.3 })).limit
    limits[#limits + 1] = assert(s:exec("yes", { output = 1000 })).limit
    limits[#limits + 1] = assert(s:exec("b() { b | b & }; b; sleep 2", { processes = 16, timeout = 10 })).limit
end
-- runs that fail in setup: the program cannot start, its working directory is missing
limits[#limits + 1] = assert(s:exec({ "/no/such/program" })).exit_code
limits[#limits + 1] = select(2, s:exec("true", { cwd = "/sandbox/missing" })) and "error"
s:close()
out.limits = limits
out.after_runs = zombies()
-- a pool whose prestarted sandboxes are destroyed unused, and one whose warm run was used
local p = assert(llmbox.pool({ lang = "python", min = 2, max = 2, policy = policy }))
p:close()
p = assert(llmbox.pool({ lang = "python", min = 2, max = 2, policy = policy }))
local ps = assert(p:acquire())
out.warm = assert(ps:run("print(6 * 7)")).stdout
ps:close()
p:close()
out.after_pools = zombies()
-- control: an orphan this script does not reap is seen as a zombie
os.execute("sh -c '(true &) ; sleep 0.1'")
os.execute("sleep 0.2")
out.control = zombies()
io.write(cjson.encode(out), "\n")
]==]

describe("reaping", function()
    it("leaves no zombie when llmbox is pid 1 and runs are stopped, fail or are pooled", function()
        local script = helpers.write(helpers.tmppath(".lua"), SCRIPT)
        local policy = helpers.root .. "/spec/fixtures/policies/default-nochecks.lua"
        local p = io.popen(("unshare --pid --fork --mount-proc %s script %s %s 2>&1"):format(
            q(helpers.bin), q(script), q(policy)))
        local text = p:read("*a")
        p:close()
        os.remove(script)
        local out = cjson.decode(text:match("({.*})%s*$") or error("no result: " .. text))
        assert.equal(1, out.pid) -- the script really was pid 1
        assert.same({}, out.after_runs)
        assert.same({ "timeout", "output", "processes", "timeout", "output", "processes",
            "timeout", "output", "processes", 127, "error" }, out.limits)
        assert.equal("42\n", out.warm)
        assert.same({}, out.after_pools)
        assert.equal(1, #out.control, text) -- the count would have seen one
    end)
end)

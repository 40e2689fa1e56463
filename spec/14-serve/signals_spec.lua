-- `llmbox serve` and signals. On SIGHUP, the config file and the policies are loaded again; what does not
-- load is refused with the file and the key named, and the running ones stay. Between reloads,
-- the daemon runs the policies as they were (an edit takes effect at the next SIGHUP).
local helpers = require "spec.helpers"
local json = require "llmbox.json"
local serve = require "spec.support.serve"

local q = helpers.shell_quote

describe("llmbox serve reloads on SIGHUP #unpriv", function()
    local d, dir, conf, mine
    local ALICE, BOB = string.rep("a3", 16), string.rep("b4", 16)

    local function as(token, method, path, body)
        return serve.curl({ sock = d.sock, method = method, path = path, token = token, body = body, max_time = 30 })
    end

    local function write_conf(tokens, extra)
        local lines = {}
        for token, tenant in pairs(tokens) do
            lines[#lines + 1] = ('["%s"] = { tenant = "%s", policies = { "mine" } },'):format(token, tenant)
        end
        helpers.write(conf, ("return { listen = { 'unix:%s/llmbox.sock' }, tokens = { %s }, %s }"):format(dir,
            table.concat(lines, " "), extra or ""))
    end

    -- SIGHUP, then the log's answer to it (a reload is logged as taken or refused)
    local function hup()
        local before = #(helpers.read(dir .. "/log") or "")
        os.execute("kill -HUP " .. d.pid)
        for _ = 1, 200 do
            local tail = (helpers.read(dir .. "/log") or ""):sub(before + 1)
            local line = tail:match("llmbox serve: reloaded[^\n]*") or tail:match("llmbox serve: reload refused[^\n]*")
            if line then return line end
            os.execute("sleep 0.05")
        end
        error("no reload in the log: " .. tostring(helpers.read(dir .. "/log")))
    end

    setup(function()
        dir = helpers.tmpdir()
        conf = dir .. "/serve.lua"
        assert(os.execute("mkdir -p " .. q(dir .. "/pol")) == 0)
        -- sockets are medium findings: refused by this threshold
        mine = helpers.write(dir .. "/pol/mine.lua", 'return { extends = "default", checks = { threshold = "medium" } }')
        write_conf({ [ALICE] = "alice" })
        d = serve.start(dir, "--config " .. q(conf), nil, "LLMBOX_POLICY_PATH=" .. q(dir .. "/pol"))
    end)
    teardown(function()
        if d then serve.stop(d) end
    end)

    it("takes new tokens, and refuses a config that does not validate, keeping the running one", function()
        assert.equal(401, (as(BOB, "GET", "/v1/policies")))
        write_conf({ [ALICE] = "alice", [BOB] = "bob" })
        assert.matches("reloaded " .. conf, hup(), 1, true)
        assert.equal(200, (as(BOB, "GET", "/v1/policies")))
        -- a wrong key: refused, named, and bob's token still works
        write_conf({ [ALICE] = "alice" }, "limitz = {}")
        local line = hup()
        assert.matches("reload refused", line, 1, true)
        assert.matches(conf, line, 1, true)
        assert.matches("limitz", line, 1, true)
        assert.equal(200, (as(BOB, "GET", "/v1/policies")))
        local _, text = as(ALICE, "GET", "/metrics")
        assert.matches('llmbox_reloads_total{result="refused"} 1', text, 1, true)
        assert.matches('llmbox_reloads_total{result="ok"} 1', text, 1, true)
    end)

    it("runs the policies as of the last reload: an edit waits for SIGHUP, a broken one is refused", function()
        write_conf({ [ALICE] = "alice" })
        local code = json.encode({ code = "import socket; print('ran')" })
        local status, text = as(ALICE, "POST", "/v1/run", code)
        assert.equal(422, status, text)
        -- the edit that allows sockets is not taken yet
        helpers.write(mine, 'return { extends = "default", checks = { threshold = "high" } }')
        status = as(ALICE, "POST", "/v1/run", code)
        assert.equal(422, status)
        assert.matches("reloaded", hup(), 1, true)
        local r
        status, text, r = as(ALICE, "POST", "/v1/run", code)
        assert.equal(200, status, text)
        assert.equal("ran\n", r.stdout)
        -- a policy that no longer loads: the reload is refused, and the last good one runs on
        helpers.write(mine, 'return { extends = "default", checks = { threshold = "loud" } }')
        local line = hup()
        assert.matches("reload refused", line, 1, true)
        assert.matches("mine", line, 1, true)
        status, text, r = as(ALICE, "POST", "/v1/run", code)
        assert.equal(200, status, text)
        assert.equal("ran\n", r.stdout)
    end)
end)

describe("llmbox serve's pools and run limit from the config file #unpriv", function()
    local d, dir

    local function metrics()
        local p = io.popen(("curl -s --max-time 10 --unix-socket %s http://d/metrics"):format(q(d.sock)))
        local text = p:read("*a")
        p:close()
        return text
    end

    local function idle_warm()
        return tonumber(metrics():match('llmbox_warm_workers_idle{language="python"} (%d+)')) or 0
    end

    setup(function()
        dir = helpers.tmpdir()
        local conf = helpers.write(dir .. "/serve.lua", ("return { listen = { 'unix:%s/llmbox.sock' }, "
            .. "pools = { py = 3 }, limits = { max_runs = 2 } }"):format(dir))
        d = serve.start(dir, "--config " .. q(conf))
    end)
    teardown(function()
        if d then serve.stop(d) end
    end)

    it("keeps the pool's warm workers ready, and refills it off the request path", function()
        for _ = 1, 200 do
            if idle_warm() == 3 then break end
            os.execute("sleep 0.05")
        end
        assert.equal(3, idle_warm())
        -- a run takes one, and the pool is back to 3 without another request
        local p = io.popen(("curl -s --max-time 30 --unix-socket %s http://d/v1/run -d '{\"code\":\"print(5)\"}'"):format(
            q(d.sock)))
        local r = json.decode(p:read("*a"))
        p:close()
        assert.equal("5\n", r.stdout)
        for _ = 1, 200 do
            if idle_warm() == 3 then break end
            os.execute("sleep 0.05")
        end
        assert.equal(3, idle_warm())
        assert.matches('llmbox_warm_leases_total{result="hit"} 1', metrics(), 1, true)
    end)

    it("runs at most limits.max_runs at once; the others wait for a slot", function()
        local outs = {}
        for i = 1, 3 do
            outs[i] = dir .. "/slow" .. i
            os.execute(("curl -s --max-time 30 -o %s --unix-socket %s http://d/v1/run "
                .. "-d '{\"code\":\"import time; time.sleep(1.5); print(1)\"}' &"):format(q(outs[i]), q(d.sock)))
        end
        -- watched until every answer is in (however slow the machine), never more than 2 at once
        local most, done = 0, 0
        for _ = 1, 400 do
            local n = tonumber(metrics():match("llmbox_runs_in_progress (%d+)")) or 0
            most = math.max(most, n)
            done = 0
            for i = 1, 3 do
                local text = helpers.read(outs[i])
                if text and text ~= "" then done = done + 1 end
            end
            if done == 3 then break end
            os.execute("sleep 0.05")
        end
        assert.equal(3, done, "not every run answered within 20 s")
        assert.equal(2, most)
        for i = 1, 3 do
            assert.equal("1\n", json.decode(assert(helpers.read(outs[i]))).stdout)
        end
    end)

    it("refuses a pool for a language without warm workers, naming it", function()
        local conf = helpers.write(dir .. "/bad.lua", "return { pools = { java = 2 } }")
        local status, _, err = helpers.cli({ "serve", "--config", conf, "--listen", "unix:" .. dir .. "/b.sock" })
        assert.equal(125, status)
        assert.matches("pools: \"java\" has no warm workers", err, 1, true)
    end)
end)

describe("llmbox serve on SIGTERM #unpriv", function()
    it("stops accepting, lets a short run finish, stops a long one after the grace, and leaves nothing", function()
        local dir = helpers.tmpdir()
        local d = serve.start(dir)
        local short, long = dir .. "/short", dir .. "/long"
        for _, job in ipairs({ { short, 1 }, { long, 60 } }) do
            os.execute(("curl -s --max-time 60 -o %s -w '%%{http_code}' --unix-socket %s http://d/v1/run "
                .. "-d '{\"code\":\"import time; time.sleep(%d); print(1)\"}' > %s.status &"):format(q(job[1]), q(d.sock),
                job[2], q(job[1])))
        end
        -- both runs are in their sandboxes: the workers' processes are the daemon's descendants
        local kids
        for _ = 1, 100 do
            local p = io.popen("pgrep -P " .. d.pid)
            kids = {}
            for pid in p:read("*a"):gmatch("%d+") do kids[#kids + 1] = pid end
            p:close()
            if #kids >= 2 then break end
            os.execute("sleep 0.05")
        end
        os.execute("sleep 0.3")
        os.execute("kill -TERM " .. d.pid)
        local gone
        for _ = 1, 200 do
            if os.execute("kill -0 " .. d.pid .. " 2>/dev/null") ~= 0 then gone = true break end
            os.execute("sleep 0.05")
        end
        assert.is_true(gone, "the daemon did not stop within 10 s")
        -- the socket file is removed: nobody can connect any more
        assert.is_nil(helpers.read(d.sock))
        -- curl writes what it got as it exits: wait for both
        for _ = 1, 200 do
            if (helpers.read(short .. ".status") or "") ~= "" and (helpers.read(long .. ".status") or "") ~= "" then break end
            os.execute("sleep 0.05")
        end
        assert.equal("200", helpers.read(short .. ".status"))
        assert.equal("1\n", json.decode(helpers.read(short)).stdout)
        assert.equal("503", helpers.read(long .. ".status"))
        assert.equal("shutting_down", json.decode(helpers.read(long)).error.code)
        for _, pid in ipairs(kids) do
            assert.are_not.equal(0, os.execute("kill -0 " .. pid .. " 2>/dev/null"), "worker " .. pid .. " is still alive")
        end
    end)
end)

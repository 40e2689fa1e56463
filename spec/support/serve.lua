-- A real `llmbox serve` for the specs: started in the background on a unix socket (and whatever
-- its arguments add), waited for on /healthz, stopped with SIGTERM.
local helpers = require "spec.helpers"
local json = require "llmbox.json"

local q = helpers.shell_quote

local _M = {}

--- start(dir [, args [, sock [, env]]]) -> { pid, sock, dir }; the daemon's stderr (its log) is
--- dir/log; env: more environment, as shell words ("A=1 B=2")
function _M.start(dir, args, sock, env)
    sock = sock or dir .. "/llmbox.sock"
    -- (strict may be picked by clients: LLMBOX_MCP_POLICIES, as for the MCP server)
    local cmd = ("LLMBOX_MCP_POLICIES=strict %s %s serve %s 2>%s & echo $!"):format(env or "", q(helpers.bin),
        args or ("--listen unix:" .. q(sock)), q(dir .. "/log"))
    local p = io.popen(cmd)
    local pid = tonumber(p:read("*l"))
    p:close()
    for _ = 1, 200 do
        if os.execute(("curl -sf --max-time 1 --unix-socket %s http://d/healthz >/dev/null 2>&1"):format(q(sock))) == 0 then
            return { pid = pid, sock = sock, dir = dir }
        end
        os.execute("sleep 0.05")
    end
    os.execute("kill -KILL " .. pid .. " 2>/dev/null")
    error("the daemon did not answer: " .. tostring(helpers.read(dir .. "/log")))
end

--- stop(d): SIGTERM, then SIGKILL after 5 s
function _M.stop(d)
    os.execute("kill -TERM " .. d.pid .. " 2>/dev/null")
    for _ = 1, 100 do
        if os.execute("kill -0 " .. d.pid .. " 2>/dev/null") ~= 0 then return end
        os.execute("sleep 0.05")
    end
    os.execute("kill -KILL " .. d.pid .. " 2>/dev/null")
end

--- curl{ sock = PATH | port = N, method?, path, token?, body?, json? (a JSON body's
--- Content-Type), curl? (more arguments), max_time? } -> status, body text, decoded body (or nil)
function _M.curl(o)
    local out = helpers.tmpname()
    local cmd = ("curl -s --max-time %d -o %s -w '%%{http_code}' -X %s %s %s %s"):format(o.max_time or 60, q(out),
        o.method or "GET", o.token and ("-H 'Authorization: Bearer " .. o.token .. "'") or "", o.curl or "",
        o.sock and ("--unix-socket " .. q(o.sock) .. " 'http://d" .. o.path .. "'")
            or ("'http://127.0.0.1:" .. o.port .. o.path .. "'"))
    if o.body then
        cmd = cmd .. (o.json and " -H 'Content-Type: application/json'" or "") .. " --data-binary @"
            .. q(helpers.write(helpers.tmpname(), o.body))
    end
    local p = io.popen(cmd)
    local status = tonumber(p:read("*a"))
    p:close()
    local text = helpers.read(out) or ""
    os.remove(out)
    local ok, doc = pcall(json.decode, text)
    return status, text, ok and doc or nil
end

--- free_port() -> a free TCP port on the loopback (the kernel's pick, released at once)
function _M.free_port()
    local p = io.popen([[python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])']])
    local port = tonumber(p:read("*l"))
    p:close()
    return port
end

return _M

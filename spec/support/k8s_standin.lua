-- The Kubernetes stand-in (spec/support/k8s_standin.py) for a spec file: started in a directory
-- of its own, stopped at the end.
--   local standin = require "spec.support.k8s_standin"
--   local s = standin.start()   -- s.dir, s.kubeconfig, s.ca (its CA's PEM file); s:stop()
local helpers = require "spec.helpers"
local uv = require "luv"

local _M = {}

--- start([env]) -> stand-in; env: a prefix of VAR=value for its command line
function _M.start(env)
    local dir = helpers.tmpdir()
    local q = helpers.shell_quote
    local pidfile = dir .. "/pid"
    assert(os.execute(("%s setsid /usr/bin/python3 %s %s >%s 2>&1 & echo $! > %s"):format(env or "",
        q(helpers.root .. "/spec/support/k8s_standin.py"), q(dir), q(dir .. "/log"), q(pidfile))))
    for _ = 1, 400 do
        if uv.fs_stat(dir .. "/kubeconfig") then break end
        uv.sleep(25)
    end
    assert(uv.fs_stat(dir .. "/kubeconfig"), "the stand-in did not start: " .. tostring(helpers.read(dir .. "/log")))
    local s = { dir = dir, kubeconfig = dir .. "/kubeconfig", ca = dir .. "/ca.pem",
        pid = tonumber(helpers.read(pidfile)) }
    function s.stop()
        if s.pid then os.execute("kill " .. s.pid) end
        s.pid = nil
    end
    return s
end

return _M

-- llmbox.mcp.worker: the child process (`llmbox worker`, not listed in --help) that holds one
-- sandbox session for the MCP server. The server never builds a jail itself (DESIGN.md: jail setup
-- happens in a fresh child, never in a long-lived process); it starts one worker per execute_code
-- call and one per stateful session, and cancelling a run means killing its worker: an llmbox
-- process killed with SIGKILL leaves no sandbox process behind.
--
-- Protocol: one JSON object per line on stdin, answered in order on stdout.
--   {"id":1,"op":"open","lang":"python","policy":"default","memory":N,"cpus":N[,"interactive":true]}
--     -> {"id":1,"result":{...}}
--        ("deferred":true: for one run; the sandbox is made when the run's code has been admitted)
--        ("pool":true: instead of one session, a pool of two ready sandboxes; each run then gets a
--        fresh sandbox, warm-started where the language can, and the pool refills after answering)
--   {"id":2,"op":"run","code":"...","libraries":[...],"timeout":5,"stream":true,"args":[...],"stdin":"..."}
--        -> {"id":2,"event":"phase","phase":"install"}, {"id":2,"event":"stdout","data":"..."}, ...
--        -> {"id":2,"result":{exit_code, stdout, ..., plots = [{format, data (base64), ...}]}}
--   {"id":3,"op":"copy_in","src":"/host/tmp","dst":"/sandbox/x"}      -> {"id":3,"result":{}}
--   {"id":4,"op":"copy_out","src":"/sandbox/x","dst":"/host/tmp","max":N}
--   {"id":5,"op":"version"}                                           -> {"id":5,"result":{"version":...}}
--   {"id":7,"op":"exec","cmd":["ls","-la"] | "ls | wc -l","timeout":5,"stdin":"..."} -> {"id":7,"result":{...}}
--   {"id":8,"op":"install","libraries":["pkg"],"timeout":60}        -> {"id":8,"result":{...}}
--   {"id":6,"op":"check","code":"...","lang":"python","policy":"default"}
--        -> {"id":6,"result":{"safe":false,"blocked":true,"mode":"enforce","violations":[...]}}
--        (no session needed: the policy's code checks, run here so the server's loop never does)
-- Failures are {"id":N,"error":"message"} (plus "refused":true and "violations" for code an
-- enforcing policy refused). End of input closes the session and exits 0.
local ffi = require "ffi"
local json = require "llmbox.json"
local util = require "llmbox.util"

local io, type, pairs, tostring, tonumber, pcall = io, type, pairs, tostring, tonumber, pcall

local _M = { _VERSION = "0.1.0" }

pcall(ffi.cdef, "int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);")
pcall(ffi.cdef, "int getppid(void);")
local PR_SET_PDEATHSIG, SIGKILL = 1, 9

-- A failed write means the server is gone (it reads every line): stop serving.
local function send(msg)
    local ok, err = io.stdout:write(json.encode(msg), "\n")
    if ok then ok, err = io.stdout:flush() end
    if not ok then error({ server_gone = tostring(err) }) end
end

local result_out = require("llmbox.render").result

local Worker = {}
Worker.__index = Worker

function Worker:open(req)
    if self.session or self.pool or self.deferred then return nil, "a session is already open in this worker" end
    local llmbox = require "llmbox"
    local config = require "llmbox.mcp.config"
    local p, err = config.load_policy({ memory = req.memory, cpus = req.cpus }, req.policy or "default")
    if not p then return nil, err end
    if req.pool then
        local pool
        -- two ready sandboxes: back-to-back calls find one while the other refills
        pool, err = llmbox.pool({ lang = req.lang, policy = p, backend = req.backend or "native",
            min = 2, max = 2 })
        if not pool then return nil, err end
        self.pool = pool
        return { language = pool.recipe.name, policy = p.name, pooled = true }
    end
    if req.deferred then
        -- one run (execute_code): the sandbox is made after the code is admitted, so refused
        -- code costs none; what can be told now (language, backend) is told now
        local recipe
        recipe, err = require("llmbox.recipes").get(req.lang or "python")
        if not recipe then return nil, err end
        local _, berr = require("llmbox.backends").get(req.backend or "native")
        if berr then return nil, berr end
        self.deferred = { lang = recipe.name, policy = p, backend = req.backend or "native", recipe = recipe }
        return { language = recipe.name, policy = p.name }
    end
    local s
    s, err = llmbox.session({ lang = req.lang, policy = p, backend = req.backend or "native",
        interactive = req.interactive or nil })
    if not s then return nil, err end
    self.session = s
    return { language = s.recipe and s.recipe.name or json.null, policy = p.name, interactive = req.interactive }
end

-- What runs will be held to: the open session's, the pool's or the deferred session's.
function Worker:_target()
    if self.session then return self.session.recipe, self.session.policy end
    if self.pool then return self.pool.recipe, self.pool.policy end
    if self.deferred then return self.deferred.recipe, self.deferred.policy end
end

function Worker:run(req)
    local recipe, policy = self:_target()
    if not policy then return nil, "no session: send open first" end
    if type(req.code) ~= "string" then return nil, "run: code must be a string" end
    if not recipe then return nil, "this session has no language: open it with a language" end
    local libs = type(req.libraries) == "table" and req.libraries or nil
    -- admitted first (the policy's checks, the libraries), so refused code installs nothing and,
    -- in a deferred or pooled worker, takes no sandbox
    local admit = require "llmbox.admit"
    local admission, aerr, report = admit.run(req.code, recipe, policy, libs)
    if not admission then
        return nil, aerr, report and { refused = true, violations = json.array(report.violations) } or nil
    end
    local s, err = self.session
    if not s and self.pool then
        -- a fresh sandbox for this run; given back (and the pool refilled) after the answer
        s, err = self.pool:acquire()
        if not s then return nil, err end
        self.lease = s
    elseif not s then
        local d = self.deferred
        s, err = require("llmbox").session({ lang = d.lang, policy = d.policy, backend = d.backend })
        if not s then return nil, err end
        self.session, self.deferred = s, nil
    end
    local stream = req.stream
    local function emitter(kind)
        if not stream then return nil end
        return function(chunk) send({ id = req.id, event = kind, data = util.utf8_repair(chunk) }) end
    end
    -- with streaming, an install's output is shown as it comes (the slow part an agent wants to
    -- see progress on), after a phase event
    local r, rerr, rep = s:run(req.code, {
        timeout = req.timeout, libraries = libs, on_stdout = emitter("stdout"), on_stderr = emitter("stderr"),
        args = req.args, stdin = req.stdin,
        on_phase = stream and function(phase) send({ id = req.id, event = "phase", phase = phase }) end or nil,
    }, admission)
    if not r then
        return nil, rerr, rep and { refused = true, violations = json.array(rep.violations) } or nil
    end
    return result_out(r)
end

-- The size of a host file (nil, err when it cannot be opened).
local function file_size(path)
    local f, err = io.open(path, "rb")
    if not f then return nil, err end
    local size, serr = f:seek("end")
    f:close()
    return size, serr
end

function Worker:copy_in(req)
    if not self.session then return nil, "no session: send open first" end
    if req.size then
        -- the staged copy must be whole before it goes in
        local size, err = file_size(req.src)
        if size ~= req.size then
            return nil, ("the staged copy %s holds %s bytes, not %d%s"):format(req.src, tostring(size), req.size,
                err and (": " .. tostring(err)) or "")
        end
    end
    local ok, err = self.session:copy_to(req.src, req.dst)
    if not ok then return nil, err end
    return {}
end

function Worker:copy_out(req)
    if not self.session then return nil, "no session: send open first" end
    local ok, err = self.session:copy_from(req.src, req.dst, req.max)
    if not ok then return nil, err end
    return {}
end

-- A command in the session's sandbox (argv, or a shell string), as Session:exec runs it.
function Worker:exec(req)
    if not self.session then return nil, "no session: send open first" end
    local r, err = self.session:exec(req.cmd, { timeout = req.timeout, stdin = req.stdin })
    if not r then return nil, err end
    return result_out(r)
end

-- Packages into the session's workspace, as Session:install does (the policy must allow it).
function Worker:install(req)
    if not self.session then return nil, "no session: send open first" end
    local r, err = self.session:install(req.libraries, { timeout = req.timeout })
    if not r then return nil, err end
    return result_out(r)
end

-- The language's version as the sandbox sees it (first line of the probe's output).
function Worker:version()
    local s = self.session
    if not s then return nil, "no session: send open first" end
    local recipe = s.recipe
    if not recipe or not recipe.version then return { version = json.null } end
    local r = s:exec(recipe.version, { timeout = 20 })
    if not r or r.exit_code ~= 0 then return { version = json.null } end
    local text = r.stdout ~= "" and r.stdout or r.stderr
    return { version = util.utf8_repair(text:match("^%s*([^\n]-)%s*\n") or text:gsub("%s+$", "")) }
end

function Worker:check(req)
    if type(req.code) ~= "string" then return nil, "check: code must be a string" end
    local r, err = require("llmbox.recipes").get(req.lang or "python")
    if not r then return nil, err end
    local p
    p, err = require("llmbox.mcp.config").load_policy({ memory = req.memory }, req.policy or "default")
    if not p then return nil, err end
    local report = require("llmbox.checks").check(req.code, r.checks or r.name, p.checks)
    return { safe = report.safe, blocked = report.blocked and true or false, mode = report.mode,
        violations = json.array(report.violations) }
end

local OPS = { open = Worker.open, run = Worker.run, copy_in = Worker.copy_in, copy_out = Worker.copy_out,
    version = Worker.version, check = Worker.check, exec = Worker.exec, install = Worker.install }

local function serve(self)
    for line in io.stdin:lines() do
        local req = json.decode(line)
        if type(req) ~= "table" or req.id == nil then
            send({ id = json.null, error = "worker: expected a JSON object with an id, got " .. line:sub(1, 80) })
        else
            local op = OPS[req.op]
            if not op then
                send({ id = req.id, error = "worker: unknown op " .. tostring(req.op) })
            else
                local ok, res, err, extra = pcall(op, self, req)
                if not ok then
                    if type(res) == "table" and res.server_gone then error(res, 0) end
                    send({ id = req.id, error = "worker: " .. tostring(res) })
                elseif res == nil then
                    local msg = { id = req.id, error = tostring(err) }
                    for k, v in pairs(extra or {}) do msg[k] = v end
                    send(msg)
                else
                    send({ id = req.id, result = res })
                end
            end
            if self.lease then
                -- after the answer: the pool makes the next sandbox while the server reads it
                self.lease:close()
                self.lease = nil
                local ok, merr = self.pool:maintain()
                if not ok then io.stderr:write("llmbox worker: pool refill failed: ", tostring(merr), "\n") end
            end
        end
    end
end

--- main(args) -> exit status. Serves requests until end of input. args: [--parent PID]
function _M.main(args)
    -- Die with the server: a worker must not outlive it and keep a sandbox running. The parent
    -- pid check closes the race where the server died before prctl took effect.
    ffi.C.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    local parent = args and args[1] == "--parent" and tonumber(args[2])
    if parent and ffi.C.getppid() ~= parent then return 125 end
    local self = setmetatable({}, Worker)
    local ok, err = pcall(serve, self)
    if not ok and not (type(err) == "table" and err.server_gone) then error(err, 0) end
    if self.session then self.session:close() end
    if self.pool then self.pool:close() end
    return 0
end

return _M

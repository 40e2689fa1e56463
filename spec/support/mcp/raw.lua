-- Talks to `llmbox mcp` byte for byte (no client library): for what a well-behaved client never
-- sends (malformed JSON, invalid requests) and for checking every line the server writes.
--
--   local raw = require "support.mcp.raw"
--   local c = raw.start({ SANDBOX_MEMORY = "256m" })
--   local c = raw.start(env, { argv = { "unshare", "--pid", "--fork", helpers.bin, "mcp" } })
--   c:send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
--   local msg, line = c:recv(5)        -- decoded message and the raw line; nil on timeout
--   local status, stderr = c:close()
local uv = require "luv"
local cjson = require "cjson"
local helpers = require "spec.helpers"

local _M = {}
local Conn = {}
Conn.__index = Conn

-- start([env [, opts]]): env adds variables; opts.argv replaces the command (default: llmbox mcp),
-- for running the server under a wrapper such as unshare.
function _M.start(env, opts)
    local argv = opts and opts.argv or { helpers.bin, "mcp" }
    local vars = uv.os_environ()
    for k, v in pairs(env or {}) do vars[k] = v end
    local list = {}
    for k, v in pairs(vars) do list[#list + 1] = k .. "=" .. v end
    local c = setmetatable({ lines = {}, buf = "", stderr = "", out_eof = false }, Conn)
    c.stdin, c.stdout, c.errpipe = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
    c.handle, c.pid = uv.spawn(argv[1], { args = { unpack(argv, 2) }, env = list,
        stdio = { c.stdin, c.stdout, c.errpipe } }, function(code, signal)
        c.status, c.signal = code, signal
    end)
    assert(c.handle, c.pid)
    c.stdout:read_start(function(_, data)
        if not data then c.out_eof = true return end
        -- look for newlines in the new data only: a long line arrives in many reads
        local start = 1
        while true do
            local nl = data:find("\n", start, true)
            if not nl then break end
            c.lines[#c.lines + 1] = c.buf .. data:sub(start, nl - 1)
            c.buf = ""
            start = nl + 1
        end
        c.buf = c.buf .. data:sub(start)
    end)
    c.errpipe:read_start(function(_, data)
        if data then c.stderr = c.stderr .. data end
    end)
    return c
end

_M.INIT = { protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "raw", version = "1" } }

--- init() -> the initialize response; then sends notifications/initialized
function Conn:init()
    local r = assert(self:request(1, "initialize", _M.INIT), "no answer to initialize")
    self:send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return r
end

function Conn:send(line)
    self.stdin:write(line .. "\n")
end

function Conn:request(id, method, params)
    self:send(cjson.encode({ jsonrpc = "2.0", id = id, method = method, params = params }))
    return self:recv()
end

-- Runs the loop until `pred()` or `timeout` seconds.
local function run_until(pred, timeout)
    -- uv.now() is the loop's cached time: stale by however long the caller ran without the loop
    uv.update_time()
    local deadline = uv.now() + (timeout or 10) * 1000
    local t = uv.new_timer()
    t:start(20, 20, function() end) -- wakes the loop so the deadline is checked
    while not pred() and uv.now() < deadline do uv.run("once") end
    t:close()
    uv.run("nowait")
    return pred()
end

--- recv([timeout]) -> decoded message, raw line | nil when nothing came in time
function Conn:recv(timeout)
    run_until(function() return #self.lines > 0 end, timeout)
    local line = table.remove(self.lines, 1)
    if not line then return nil end
    return cjson.decode(line), line
end

--- response(id [, timeout]) -> the response to request `id`, whenever it came; notifications and
-- other responses read meanwhile are kept (self.skipped, in order of arrival) for later calls
function Conn:response(id, timeout)
    self.skipped = self.skipped or {}
    for i, msg in ipairs(self.skipped) do
        if msg.id == id then return table.remove(self.skipped, i) end
    end
    uv.update_time()
    local deadline = uv.now() + (timeout or 10) * 1000
    while uv.now() < deadline do
        local msg = self:recv((deadline - uv.now()) / 1000)
        if not msg then return nil end
        if msg.id == id then return msg end
        self.skipped[#self.skipped + 1] = msg
    end
end

--- close([timeout]) -> exit status, stderr (closes stdin and waits for the exit)
function Conn:close(timeout)
    if self.closed then return self.status, self.stderr end
    self.closed = true
    if not self.stdin:is_closing() then self.stdin:close() end
    run_until(function() return self.status ~= nil and self.out_eof end, timeout or 10)
    if self.status == nil then self.handle:kill("sigkill") end
    run_until(function() return self.status ~= nil end, 2)
    for _, h in ipairs({ self.stdout, self.errpipe, self.handle }) do
        if not h:is_closing() then h:close() end
    end
    uv.run("nowait")
    return self.status, self.stderr
end

return _M

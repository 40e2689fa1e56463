-- The cells of interactive sessions on docker and podman (llmbox.interactive): the interpreter
-- is one exec of the run wrapper in its interactive mode, kept open for the session. An exec has
-- only stdin, stdout and stderr, so llmbox's helper in the container (container-exec --cells)
-- carries the interpreter's control channel (runtime/cell.c has its words): cells and
-- interrupts go down the exec's stdin as they are; the interpreter's answers come back as frames
-- on stderr, "\0llmbox-cell:NONCE SEQ LEN\n" + LEN bytes, each after a "\0llmbox-sync:NONCE
-- SEQ\n" on stdout, so that a cell is over only once the output it wrote before its answer has
-- arrived on both streams (the engine forwards them independently). The nonce is the wrapper's,
-- which the program never sees: it cannot forge a frame, and answers with another cell's tag
-- are dropped, as native drops them.
--
-- The client holds each cell's wall clock and output cap: either sends an interrupt, and a cell
-- that does not answer within the grace has its interpreter ended (every process of the
-- container's user, by the keeper), which the result says (state_lost). Memory and processes are
-- the container's ceilings; an interpreter they end ends the same way, with the limit named from
-- the wrapper's trailer.
local core = require "llmbox.core"
local util = require "llmbox.util"

local setmetatable, format, concat, max, floor = setmetatable, string.format, table.concat, math.max, math.floor

local _M = {}

local CELL, SYNC = "\0llmbox-cell:", "\0llmbox-sync:"

-- How long the sync marker behind an answer, or the end of a stopped interpreter, may take.
local FOLLOW_MS = 10000

--- frames(marker, with_len) -> filter: takes the frames that begin with marker out of a stream.
--- filter.feed(chunk) -> the stream's own bytes | nil, err; the frames found go to filter.got as
--- { seq, data }. A NUL that may be a marker's start is held until it is known not to be one.
local function frames(marker, with_len)
    local buf = ""
    local f = { got = {} }
    function f.feed(chunk)
        buf = buf .. chunk
        local out = {}
        while #buf > 0 do
            local i = buf:find("\0", 1, true)
            if not i then
                out[#out + 1], buf = buf, ""
                break
            end
            out[#out + 1], buf = buf:sub(1, i - 1), buf:sub(i)
            local head = buf:sub(1, #marker)
            if head ~= marker then
                if #buf < #marker and marker:sub(1, #buf) == buf then break end -- maybe: wait
                out[#out + 1], buf = "\0", buf:sub(2)
            else
                local nl = buf:find("\n", #marker + 1, true)
                if not nl then
                    if #buf > #marker + 48 then return nil, "a malformed frame from llmbox's helper" end
                    break
                end
                local line = buf:sub(#marker + 1, nl - 1)
                local seq, len
                if with_len then
                    seq, len = line:match("^(%d+) (%d+)$")
                else
                    seq, len = line:match("^(%d+)$"), "0"
                end
                if not seq then return nil, "a malformed frame from llmbox's helper" end
                len = tonumber(len)
                if #buf < nl + len then break end
                f.got[#f.got + 1] = { seq = tonumber(seq), data = buf:sub(nl + 1, nl + len) }
                buf = buf:sub(nl + len + 1)
            end
        end
        return concat(out)
    end
    --- filter.rest() -> what was held back, which is output after all (at the stream's end)
    function f.rest()
        local r = buf
        buf = ""
        return r
    end
    return f
end

_M.frames = frames

local Kernel = {}
Kernel.__index = Kernel

--- engine_cells.new(handle, exec, nonce, limits, trailer) -> kernel: the contract of native's
--- prestarted interactive program (wait, abandon, run_cell); trailer is the filter that takes
--- the wrapper's trailer off stderr (engines.lua)
function _M.new(h, x, nonce, limits, trailer)
    return setmetatable({ h = h, x = x, nonce = nonce, limits = limits, state = "starting",
        out = frames(SYNC .. nonce .. " ", false), err = frames(CELL .. nonce .. " ", true), trailer = trailer,
        ctl = "", ctl_seq = 0, synced = 0, early = { stdout = {}, stderr = {} } }, Kernel)
end

-- What arrived within ms: the program's stdout and stderr (frames taken off, answers kept in
-- self.ctl) | nil, "eof" | nil, err
function Kernel:pump(ms)
    local o, e = self.x:peek(ms)
    if not o then return nil, e end
    local so, err = self.out.feed(o)
    if not so then return nil, err end
    for _, fr in ipairs(self.out.got) do self.synced = max(self.synced, fr.seq) end
    self.out.got = {}
    local se
    se, err = self.err.feed(e)
    if not se then return nil, err end
    for _, fr in ipairs(self.err.got) do
        self.ctl = self.ctl .. fr.data
        self.ctl_seq = fr.seq
    end
    self.err.got = {}
    return so, self.trailer.feed(se)
end

--- kernel:wait(ms) -> "ready" | "starting" | "dead"
function Kernel:wait(ms)
    if self.state ~= "starting" then return self.state end
    local deadline = util.now_ms() + max(0, ms or 0)
    repeat
        local o, e = self:pump(max(0, floor(deadline - util.now_ms())))
        if not o then
            self:abandon()
            return self.state
        end
        -- what the interpreter wrote while starting goes to the first cell's output
        if #o > 0 then self.early.stdout[#self.early.stdout + 1] = o end
        if #e > 0 then self.early.stderr[#self.early.stderr + 1] = e end
        if #self.ctl > 0 then
            if self.ctl:sub(1, 1) ~= "R" then
                self:abandon()
                return self.state
            end
            self.ctl = self.ctl:sub(2)
            self.state = "ready"
        end
    until self.state ~= "starting" or util.now_ms() >= deadline
    return self.state
end

-- Ends the interpreter and every process it left (the keeper's sweep), and waits for its exec
-- to end, so that nothing of it is alive when the next exec starts.
function Kernel:stop()
    if not self.x then return end
    self.h:sweep(true)
    local give_up = util.now_ms() + FOLLOW_MS
    while util.now_ms() < give_up do
        local o = self:pump(max(0, floor(give_up - util.now_ms())))
        if not o then break end
    end
    self.x:abandon()
    self.x = nil
end

--- kernel:abandon(): the interpreter goes, with its state
function Kernel:abandon()
    if self.state ~= "dead" then
        self.state = "dead"
        self:stop()
    end
end

--- kernel:run_cell{ request, tag, timeout, output, grace, on_stdout, on_stderr } -> result |
--- nil, err, errno_name: one cell, as native's pending:cell runs it
function Kernel:run_cell(io)
    if self:wait(0) ~= "ready" then return nil, "the interactive interpreter is not running" end
    -- an interpreter that ended between cells has its exec's end waiting here: said as native
    -- says it (no cell was run), not as a cell that lost its state
    repeat
        local o, e = self:pump(0)
        -- (the wrapper's trailer: the interpreter has ended, its exec is about to)
        if not o or self.trailer.peek() then
            self.state = "dead"
            self:stop()
            local _, text = self.trailer.finish()
            local rc = text and text:match(" rc=(%d+)\n?$")
            if o or e == "eof" then return nil, "it ended" .. (rc and " with status " .. rc or "") end
            return nil, tostring(e)
        end
        if #o > 0 then self.early.stdout[#self.early.stdout + 1] = o end
        if #e > 0 then self.early.stderr[#self.early.stderr + 1] = e end
    until #o == 0 and #e == 0
    local started = util.now_ms()
    local ok, err, code = self.x:send(format("cell %s %d\n", io.tag, #io.request) .. io.request)
    if not ok then
        self:abandon()
        return nil, err, code
    end
    local cap, seen, truncated = io.output, 0, false
    local kept = { stdout = {}, stderr = {} }
    local limit, interrupted
    local deadline = io.timeout and started + io.timeout * 1000
    local function interrupt(why)
        if interrupted then return end
        interrupted, limit = true, limit or why
        deadline = util.now_ms() + (io.grace or 2) * 1000
        local sent = self.x:send("I\n")
        if not sent then deadline = util.now_ms() end
    end
    local function deliver(stream, text)
        if #text == 0 or truncated then return end
        if cap and seen + #text > cap then
            text = text:sub(1, cap - seen)
            truncated = true
        end
        seen = seen + #text
        kept[stream][#kept[stream] + 1] = text
        local fn = stream == "stdout" and io.on_stdout or io.on_stderr
        if fn and #text > 0 then fn(text) end
        if truncated then interrupt("output") end
    end
    for _, stream in ipairs({ "stdout", "stderr" }) do
        deliver(stream, concat(self.early[stream]))
        self.early[stream] = {}
    end
    local function result(exit_code, extra)
        local r = { exit_code = exit_code, stdout = concat(kept.stdout), stderr = concat(kept.stderr), limit = limit,
            timed_out = limit == "timeout", truncated = truncated, duration_ms = util.now_ms() - started,
            interrupted = interrupted or nil, max_rss = 0 }
        for k, v in pairs(extra or {}) do r[k] = v end
        return r
    end
    -- the interpreter is gone with its state: the verdict from the wrapper's trailer
    local function lost(exit_code)
        self.state = "dead"
        self:stop()
        local _, text = self.trailer.finish()
        local verdict, rusage = self.h:verdict(text, self.limits, exit_code, limit)
        limit = verdict
        if text and exit_code == nil then exit_code = tonumber(text:match(" rc=(%d+)\n?$")) end
        exit_code = exit_code or 137
        return result(exit_code, { state_lost = true, signal = exit_code > 128 and exit_code < 160 and exit_code - 128
            or nil, max_rss = rusage and rusage.max_rss or 0 })
    end
    local answer, answer_seq, answered_at
    while not (answer and self.synced >= answer_seq) do
        local now = util.now_ms()
        -- the answer came, its sync marker did not (stdout may lag behind: the engine forwards
        -- the streams apart, and a flood fills stdout's pipe): the helper is gone
        if answer and now - answered_at > FOLLOW_MS then return lost(137) end
        if deadline and now >= deadline and not answer then
            if not interrupted then
                interrupt("timeout")
            else
                -- the interrupt was not honoured within the grace
                return lost(137)
            end
        end
        local wait = deadline and max(0, floor(deadline - util.now_ms())) or -1
        if answer then wait = max(0, floor(answered_at + FOLLOW_MS - util.now_ms())) end
        local so, se = self:pump(wait)
        if not so then
            if se == "eof" then return lost(nil) end
            self:abandon()
            return nil, "reading the interactive interpreter: " .. tostring(se)
        end
        deliver("stdout", so)
        deliver("stderr", se)
        while not answer and #self.ctl > 0 do
            local n, a = core.cell_parse(self.ctl, io.tag)
            if n < 0 then
                self:abandon()
                return nil, "the interactive program broke its protocol", "EPROTO"
            elseif n == 0 then
                break
            end
            self.ctl = self.ctl:sub(n + 1)
            -- (another tag: a late answer, or one the program wrote itself; dropped)
            if a.matches then answer, answer_seq, answered_at = a, self.ctl_seq, util.now_ms() end
        end
    end
    return result(answer.status, { cpu_ms = answer.cpu_us / 1000, probe_found = answer.plots,
        value = #answer.value > 0 and answer.value or nil })
end

return _M

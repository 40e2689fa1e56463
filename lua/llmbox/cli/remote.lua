-- `llmbox run --server ADDR` (or $LLMBOX_SERVER): the run goes to a daemon (`llmbox serve`) over
-- its unix socket or TCP, with $LLMBOX_TOKEN as the bearer token; the output streams back as
-- server-sent events and is shown as a local run's, and the result is the same object, so the
-- exit status and `--json` are the same as well.
local http = require "llmbox.http"
local json = require "llmbox.json"
local artifacts = require "llmbox.artifacts"

local format, tostring, type, ipairs = string.format, tostring, type, ipairs

local _M = { _VERSION = "0.1.0" }

-- The flags that choose where and how the sandbox is made: the daemon's business, not a client's.
_M.LOCAL_ONLY = { "backend", "image", "pull", "dockerfile", "keep", "container", "remove", "commit" }

--- remote.target(addr) -> { url, unix_socket } | nil, err: "unix:/path" or "HOST:PORT"
function _M.target(addr)
    local path = addr:match("^unix:(/.+)$")
    if path then return { base = "http://llmbox", unix_socket = path } end
    if addr:match("^%[?[%w%.%-:]+%]?:%d+$") then return { base = "http://" .. addr } end
    return nil, format("--server %s: expected unix:/path or HOST:PORT", addr)
end

-- Server-sent events out of the pieces of a body: on_event(name, data) for each whole one.
local function sse_reader(on_event)
    local pending = ""
    return function(chunk)
        pending = pending .. chunk
        while true do
            local block, rest = pending:match("^(.-)\n\n(.*)$")
            if not block then break end
            pending = rest
            local name, data = block:match("^event: ([%w_]+)\ndata: (.*)$")
            if name then on_event(name, data) end
        end
    end
end

--- remote.run(addr, body, opts) -> result | nil, err, kind ("refused" with the error object, or
--- "failed"); opts: token, stream (on_stdout, on_stderr), timeout (seconds, for the wait)
function _M.run(addr, body, opts)
    local t, err = _M.target(addr)
    if not t then return nil, err, "failed" end
    local headers = { ["Content-Type"] = "application/json" }
    if opts.token and opts.token ~= "" then headers.Authorization = "Bearer " .. opts.token end
    local result, failure
    local on_data, raw = nil, {}
    if opts.stream then
        headers.Accept = "text/event-stream"
        local feed = sse_reader(function(name, data)
            local ok, doc = pcall(json.decode, data)
            if not ok or type(doc) ~= "table" then return end
            if name == "stdout" and opts.stream.on_stdout then opts.stream.on_stdout(doc.data or "")
            elseif name == "stderr" and opts.stream.on_stderr then opts.stream.on_stderr(doc.data or "")
            elseif name == "result" then result = doc
            elseif name == "error" then failure = doc.error
            end
        end)
        -- (an answer that is not a stream, an error's, is read whole below)
        on_data = function(chunk)
            raw[#raw + 1] = chunk
            feed(chunk)
        end
    end
    local res, rerr = http.request({ url = t.base .. "/v1/run", method = "POST", unix_socket = t.unix_socket,
        headers = headers, body = json.encode(body), on_data = on_data,
        timeout_ms = math.floor(((opts.timeout or 3600) + 60) * 1000) })
    if not res then return nil, format("cannot reach the llmbox server at %s: %s", addr, tostring(rerr)), "failed" end
    if not on_data or res.status ~= 200 then
        local ok, doc = pcall(json.decode, on_data and table.concat(raw) or res.body or "")
        doc = ok and type(doc) == "table" and doc or nil
        if res.status == 200 and doc then
            result = doc
        else
            failure = doc and doc.error or { message = format("HTTP %d from %s", res.status, addr) }
        end
    end
    if failure then
        return nil, tostring(failure.message or failure.code), failure.code == "refused" and "refused" or "failed", failure
    end
    if not result then return nil, format("the llmbox server at %s ended the run without a result", addr), "failed" end
    -- plots come base64-encoded: back to bytes, as a local run's
    for _, p in ipairs(result.plots or {}) do p.data = artifacts.unbase64(p.data) or p.data end
    if result.limit == json.null then result.limit = nil end
    if result.signal == json.null then result.signal = nil end
    if result.phase == json.null then result.phase = nil end
    return result
end

return _M

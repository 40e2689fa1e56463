-- `llmbox run --server ADDR` (or $LLMBOX_SERVER): the run goes to a daemon (`llmbox serve`) over
-- its unix socket or TCP, with $LLMBOX_TOKEN as the bearer token; the output streams back as
-- server-sent events and is shown as a local run's, and the result is the same object, so the
-- exit status and `--json` are the same as well.
--
-- The request goes over luv (libuv, which the daemon runs on too) with Node's http-parser reading
-- the answer (core.http_response_parser), not over libcurl: loading libcurl and its TLS stack
-- costs this short-lived client more than the rest of its run (the daemon speaks plain HTTP on
-- its unix socket and TCP port).
local uv = require "luv"
local core = require "llmbox.core"
local json = require "llmbox.json"

local format, tostring, type, ipairs, pairs, concat = string.format, tostring, type, ipairs, pairs, table.concat

local _M = { _VERSION = "0.1.0" }

-- The flags that choose where and how the sandbox is made: the daemon's business, not a client's.
_M.LOCAL_ONLY = { "backend", "image", "pull", "dockerfile", "keep", "container", "remove", "commit" }

--- remote.target(addr) -> { url, unix_socket } | nil, err: "unix:/path" or "HOST:PORT"
function _M.target(addr)
    local path = addr:match("^unix:(/.+)$")
    if path then return { base = "http://llmbox", unix_socket = path } end
    local host, port = addr:match("^%[?([%w%.%-:]-)%]?:(%d+)$")
    if host and host ~= "" then return { base = "http://" .. addr, host = host, port = tonumber(port) } end
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

-- The first IPv4 or IPv6 address of host (a name or an address).
local function resolve(host, port)
    local list = uv.getaddrinfo(host, tostring(port), { socktype = "stream" })
    return list and list[1] and list[1].addr
end

--- remote.post(t, path, headers, body, on_data, timeout_ms) -> { status, body } | nil, err: one
--- POST to the daemon, its answer's body handed to on_data as it comes (when given)
function _M.post(t, path, headers, body, on_data, timeout_ms)
    local parser = core.http_response_parser()
    local res, err, over = { body = {} }, nil, false
    local sock, timer
    local function finish(why)
        if over then return end
        over, err = true, why
        timer:stop()
        timer:close()
        if not sock:is_closing() then sock:close() end
    end
    local function on_read(rerr, data)
        if rerr then return finish(rerr) end
        local events, ferr = parser:feed(data or "")
        if not events then return finish("its answer is not HTTP (" .. tostring(ferr) .. ")") end
        for _, ev in ipairs(events) do
            if ev[1] == "head" then
                res.status = ev[2]
            elseif ev[1] == "body" then
                if on_data and res.status == 200 then on_data(ev[2]) else res.body[#res.body + 1] = ev[2] end
            else
                return finish(nil)
            end
        end
        if not data then finish(res.status and nil or "it closed the connection without an answer") end
    end
    local function on_connect(cerr)
        if cerr then return finish(cerr) end
        local lines = { "POST " .. path .. " HTTP/1.1", "Host: " .. (t.host or "llmbox"), "Connection: close",
            "Content-Length: " .. #body }
        for k, v in pairs(headers) do lines[#lines + 1] = k .. ": " .. v end
        sock:write(concat(lines, "\r\n") .. "\r\n\r\n" .. body)
        sock:read_start(on_read)
    end
    timer = uv.new_timer()
    if t.unix_socket then
        sock = uv.new_pipe(false)
        sock:connect(t.unix_socket, on_connect)
    else
        local addr = resolve(t.host, t.port)
        if not addr then
            timer:close()
            return nil, "cannot resolve " .. t.host
        end
        sock = uv.new_tcp()
        sock:connect(addr, t.port, on_connect)
    end
    timer:start(timeout_ms, 0, function() finish(format("no answer within %g s", timeout_ms / 1000)) end)
    uv.run()
    if err then return nil, err end
    res.body = concat(res.body)
    return res
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
    local res, rerr = _M.post(t, "/v1/run", headers, json.encode(body), on_data,
        math.floor(((opts.timeout or 3600) + 60) * 1000))
    if not res then return nil, format("cannot reach the llmbox server at %s: %s", addr, tostring(rerr)), "failed" end
    if not on_data or res.status ~= 200 then
        -- (a stream's chunks went to on_data; any other answer's body is in res.body)
        local ok, doc = pcall(json.decode, (on_data and res.status == 200) and concat(raw) or res.body or "")
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
    for _, p in ipairs(result.plots or {}) do p.data = require("llmbox.artifacts").unbase64(p.data) or p.data end
    if result.limit == json.null then result.limit = nil end
    if result.signal == json.null then result.signal = nil end
    if result.phase == json.null then result.phase = nil end
    return result
end

return _M

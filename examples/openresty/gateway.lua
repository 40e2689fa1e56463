-- gateway: the Lua of examples/openresty/nginx.conf. It authenticates its callers by API key,
-- picks the llmbox policy of each caller's tenant (a caller never picks one), rate-limits each
-- key per minute, and runs the code through `llmbox serve` with resty.llmbox — cosockets only, so
-- the nginx worker keeps answering other requests while runs are in progress.
local llmbox = require "resty.llmbox"
local cjson = require "cjson.safe"

local _M = {}

local KEYS

--- init(): loads the keys file once, in nginx's master (init_by_lua)
function _M.init()
    local file = os.getenv("GATEWAY_KEYS") or (ngx.config.prefix() .. "keys.lua")
    local chunk, err = loadfile(file)
    if not chunk then error("gateway: cannot load the keys file: " .. tostring(err)) end
    KEYS = chunk()
    if type(KEYS) ~= "table" then error("gateway: " .. file .. " must return a table of keys") end
end

local function reply(status, doc)
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.say(cjson.encode(doc))
    return ngx.exit(status)
end

local function refuse(status, code, message)
    return reply(status, { error = { code = code, message = message } })
end

-- Each key's runs this minute, in a dictionary all workers share.
local function over_rate(key, per_minute)
    local window = math.floor(ngx.now() / 60)
    local n = ngx.shared.gateway_rate:incr(key .. ":" .. window, 1, 0, 120)
    return n and n > per_minute
end

local RUN_FIELDS = { lang = "string", code = "string", args = "table", stdin = "string", timeout = "number" }

-- The daemon's error as the gateway's answer: its own status, or 502/504 when it is unreachable.
local function daemon_status(e)
    if e and e.status then return e.status end
    return e and e.code == "timeout" and 504 or 502
end

--- run(): POST /run { lang?, code, args?, stdin?, timeout? } -> the run's result (JSON), or
--- server-sent events (stdout, stderr, result) with Accept: text/event-stream
function _M.run()
    if ngx.req.get_method() ~= "POST" then
        ngx.header["Allow"] = "POST"
        return refuse(405, "method_not_allowed", "use POST")
    end
    local key = (ngx.var.http_authorization or ""):match("^Bearer%s+(%S+)$")
    local caller = key and KEYS[key]
    if not caller then return refuse(401, "unauthorized", "send Authorization: Bearer <your API key>") end
    if over_rate(key, caller.per_minute or 60) then
        ngx.header["Retry-After"] = tostring(60 - math.floor(ngx.now()) % 60)
        return refuse(429, "rate_limited", ("at most %d runs a minute"):format(caller.per_minute or 60))
    end
    ngx.req.read_body()
    local doc = cjson.decode(ngx.req.get_body_data() or "")
    if type(doc) ~= "table" then return refuse(400, "bad_request", "expected a JSON object") end
    local run = {}
    for k, v in pairs(doc) do
        if RUN_FIELDS[k] ~= type(v) then
            return refuse(400, "bad_request", ("field %q: not accepted here, or of the wrong type"):format(k))
        end
        run[k] = v
    end
    if not run.code then return refuse(400, "bad_request", "code is required") end
    run.policy = caller.policy
    local client, cerr = llmbox.new{ server = os.getenv("LLMBOX_SERVER"), token = os.getenv("LLMBOX_TOKEN"),
        timeout = (run.timeout or 30) + 10 }
    if not client then return refuse(500, "gateway", cerr) end
    if (ngx.var.http_accept or ""):find("text/event-stream", 1, true) then
        ngx.header["Content-Type"] = "text/event-stream"
        run.on_output = function(stream, data)
            ngx.print("event: ", stream, "\ndata: ", cjson.encode({ data = data }), "\n\n")
            ngx.flush(true)
        end
        local res, err, e = client:run(run)
        ngx.print("event: ", res and "result" or "error", "\ndata: ",
            cjson.encode(res or { error = { code = e and e.code, message = err } }), "\n\n")
        return ngx.exit(ngx.HTTP_OK)
    end
    local res, err, e = client:run(run)
    if not res then
        ngx.log(ngx.WARN, "tenant ", caller.tenant, ": ", err)
        return refuse(daemon_status(e), e and e.code or "gateway", err)
    end
    return reply(200, res)
end

return _M

-- Kubernetes' exec channel protocol (issue 17), the payload of each websocket message: one byte
-- naming the stream, then its data. v4.channel.k8s.io: 0 stdin, 1 stdout, 2 stderr, 3 the
-- error channel (a metav1.Status saying how the command ended), 4 terminal resizes.
-- v5.channel.k8s.io adds 255: "close", whose one data byte names a stream the sender has
-- finished writing (stdin's end, which v4 cannot say). The driver offers v5 and falls back to v4.
local json = require "llmbox.json"

local type, tostring, tonumber, char, byte, format = type, tostring, tonumber, string.char, string.byte, string.format

local _M = {}

_M.PROTOCOLS = { "v5.channel.k8s.io", "v4.channel.k8s.io" }
_M.STDIN, _M.STDOUT, _M.STDERR, _M.ERROR, _M.RESIZE, _M.CLOSE = 0, 1, 2, 3, 4, 255
local NAMES = { [0] = "stdin", "stdout", "stderr", "error", "resize", [255] = "close" }

--- channel.frame(stream, data) -> payload: a message for one stream
function _M.frame(stream, data)
    return char(stream) .. (data or "")
end

--- channel.close_stdin(protocol) -> payload | nil, err: "stdin is finished" (v5 only)
function _M.close_stdin(protocol)
    if protocol ~= "v5.channel.k8s.io" then
        return nil, "the API server speaks " .. tostring(protocol) .. ", which cannot end stdin without ending the exec"
    end
    return char(_M.CLOSE, _M.STDIN)
end

--- channel.parse(payload) -> stream name, data | nil, err: a message the API server sent
function _M.parse(payload)
    if type(payload) ~= "string" or #payload == 0 then return nil, "an empty exec message" end
    local name = NAMES[byte(payload, 1)]
    if not name then return nil, format("an exec message on unknown channel %d", byte(payload, 1)) end
    return name, payload:sub(2)
end

--- channel.exit_status(data) -> exit code | nil, err: the error channel's Status, read as the
--- command's end. Success is 0; a command that exited non-zero carries its code in
--- details.causes (reason ExitCode); anything else is a failure of the exec itself.
function _M.exit_status(data)
    local st = json.decode(data or "")
    if type(st) ~= "table" then return nil, "the exec's status is not JSON: " .. tostring(data) end
    if st.status == "Success" then return 0 end
    if st.reason == "NonZeroExitCode" then
        for _, cause in ipairs(st.details and st.details.causes or {}) do
            if cause.reason == "ExitCode" and tonumber(cause.message) then return tonumber(cause.message) end
        end
        return nil, "the exec ended non-zero without saying its exit code: " .. tostring(st.message)
    end
    return nil, "the exec failed: " .. tostring(st.message or st.reason or data)
end

return _M

-- llmbox.mcp.results: tool results as MCP content: text blocks, structuredContent for clients
-- that know output schemas, images and embedded resources for plots, and tool errors.
local json = require "llmbox.json"
local ctx = require "llmbox.mcp.context"

local ipairs, tostring = ipairs, tostring
local format = string.format

local _M = { _VERSION = "0.1.0" }

-- output schemas, structuredContent and tool titles exist from this version on
_M.MODERN = "2025-06-18"

function _M.modern()
    local p = ctx.state.protocol
    return p == nil or p >= _M.MODERN
end

function _M.text(text, is_error, structured)
    local r = { content = json.array({ { type = "text", text = text } }) }
    if is_error then r.isError = true end
    if structured and _M.modern() then r.structuredContent = structured end
    return r
end

-- The tool could not do its job (the sandbox failed, the policy refused the code, an argument or
-- a session is wrong): the model reads why.
function _M.error(msg)
    return _M.text(tostring(msg), true)
end

function _M.json(t)
    return _M.text(json.encode(t), false, t)
end

local MIME = { png = "image/png", svg = "image/svg+xml", html = "text/html" }

--- run(res): a run's JSON summary as text (and structuredContent), then one image block per
-- PNG/SVG plot and an embedded resource per HTML plot (Plotly).
function _M.run(res)
    local plots = res.plots or {}
    res.plots = #plots
    res.cpu_ms = nil
    local r = _M.text(json.encode(res), false, res)
    for i, p in ipairs(plots) do
        if p.format == "html" then
            r.content[#r.content + 1] = { type = "resource", resource = {
                uri = format("sandbox://plots/%d.html", i), mimeType = MIME.html, blob = p.data } }
        else
            r.content[#r.content + 1] = { type = "image", data = p.data, mimeType = MIME[p.format] or "image/png" }
        end
    end
    return r
end

return _M

-- The last stage of a run (admit -> plan -> execute -> collect -> render): the result object every
-- door shows, built in one place. `llmbox run --json` prints it, the MCP worker sends it to the
-- server (which wraps it in MCP content: mcp/results.lua), and the HTTP API will answer with it.
-- Output is valid UTF-8 (invalid bytes become U+FFFD), times are rounded to the microsecond, and
-- plots are base64 text.
local json = require "llmbox.json"
local util = require "llmbox.util"
local artifacts = require "llmbox.artifacts"

local ipairs, floor = ipairs, math.floor

local _M = { _VERSION = "0.1.0" }

local function round_us(ms)
    return ms and floor(ms * 1000 + 0.5) / 1000
end

--- render.plots(plots) -> JSON array of { format, width, height, data = base64 }; width and height
--- are null where the format has none (SVG, HTML).
function _M.plots(plots)
    local out = json.array()
    for i, p in ipairs(plots or {}) do
        out[i] = { format = p.format, width = p.width or json.null, height = p.height or json.null,
            data = artifacts.base64(p.data) }
    end
    return out
end

--- render.result(r) -> the result object: exit_code, stdout, stderr, timed_out, limit, duration_ms,
--- truncated, signal, phase, cpu_ms (absent when unknown), plots, warnings (when there are any);
--- container (a kept or attached one's id), committed and commit_error (a commit's), when set;
--- an interactive cell's: cell (its number), value (the repr of its last expression, when it had
--- one), state_lost (true when the cell ended the interpreter), interrupted; timings (`llmbox run
--- --timings`: milliseconds per stage).
function _M.result(r)
    local out = {
        exit_code = r.exit_code,
        stdout = util.utf8_repair(r.stdout or ""),
        stderr = util.utf8_repair(r.stderr or ""),
        timed_out = r.timed_out and true or false,
        limit = r.limit or json.null,
        duration_ms = round_us(r.duration_ms or 0),
        truncated = r.truncated and true or false,
        signal = r.signal or json.null,
        phase = r.phase or json.null,
        cpu_ms = round_us(r.cpu_ms),
        plots = _M.plots(r.plots),
        warnings = r.warnings and json.array(r.warnings) or nil,
        container = r.container, committed = r.committed, commit_error = r.commit_error,
        cell = r.cell, value = r.value and util.utf8_repair(r.value) or nil,
        timings = r.timings,
    }
    if r.cell then
        out.state_lost, out.interrupted = r.state_lost == true, r.interrupted == true
    end
    return out
end

--- render.json(r) -> the result object as one line of JSON text.
function _M.json(r)
    return json.encode(_M.result(r))
end

return _M

-- llmbox.mcp.tools: one definition per tool the sandbox offers to agents, and the three shapes
-- frameworks want it in:
--
--   local tools = require "llmbox.mcp.tools"
--   tools.list("mcp")        -- { {name, title, description, inputSchema, outputSchema, annotations}, ... }
--   tools.list("openai")     -- { {type = "function", ["function"] = {name, description, parameters}}, ... }
--   tools.list("anthropic")  -- { {name, description, input_schema}, ... }
--   local ok, err = tools.validate("execute_code", args)   -- arguments against the input schema
--
-- The definitions are data (JSON Schema written as Lua tables); what each tool does lives in
-- llmbox.mcp.code_tools, llmbox.mcp.sessions and llmbox.mcp.transfer. Lists are marked with
-- json.array so they encode as [] even when empty.
local json = require "llmbox.json"

local type, pairs, ipairs, tostring, error = type, pairs, ipairs, tostring, error
local format, concat, floor = string.format, table.concat, math.floor
local array = json.array

local _M = { _VERSION = "0.1.0" }

local function object(props, required)
    local s = { type = "object", properties = props, additionalProperties = false }
    if required and #required > 0 then s.required = array(required) end
    return s
end

local CODE = { type = "string", minLength = 1, description = "The source code to run." }
local LANGUAGE = { type = "string", default = "python",
    description = "The language: python, javascript, shell, java, cpp, go, r or ruby "
        .. "(get_supported_languages lists them). Default: python." }
local LIBRARIES = { type = "array", items = { type = "string", minLength = 1 }, maxItems = 50,
    description = "Packages to install into the sandbox first (pip, npm, ...), where the policy "
        .. "allows installs." }
local TIMEOUT = { type = "number", exclusiveMinimum = 0,
    description = "Wall-clock limit in seconds; at most the policy's limit (the default)." }
local SESSION_ID = { type = "string", minLength = 1, description = "The id create_session returned." }
local PATH = { type = "string", minLength = 1,
    description = "A path in the session's workspace: relative to /sandbox, or absolute under /sandbox/." }

-- What a run returns, in the text block (JSON) and as structuredContent.
local RUN_RESULT = object({
    exit_code = { type = "integer", description = "The program's exit status (128 + N when killed by signal N)." },
    stdout = { type = "string" },
    stderr = { type = "string" },
    timed_out = { type = "boolean", description = "The wall-clock limit stopped the program." },
    limit = { type = { "string", "null" },
        description = "Which limit stopped the program: timeout, cpu, memory, processes, output, file_size; or null." },
    duration_ms = { type = "number" },
    truncated = { type = "boolean", description = "Output was cut at the policy's output limit." },
    signal = { type = { "integer", "null" } },
    phase = { type = { "string", "null" },
        description = "install or compile when that step failed; null for the program's own run." },
    plots = { type = "integer", description = "How many plots came back (each as an image content block)." },
    warnings = { type = "array", items = { type = "object" },
        description = "Code-check findings the policy reports without refusing." },
    cell = { type = "integer", description = "Interactive sessions: the cell's number in its interpreter." },
    value = { type = "string",
        description = "Interactive sessions: the repr of the cell's last expression, when it was one (not None)." },
    state_lost = { type = "boolean",
        description = "Interactive sessions: the cell ended the interpreter (a limit); the next cell starts afresh." },
    interrupted = { type = "boolean", description = "Interactive sessions: a limit interrupted the cell." },
}, { "exit_code", "stdout", "stderr", "timed_out", "limit", "duration_ms" })
RUN_RESULT.additionalProperties = nil

local LANGUAGE_INFO = {
    type = "object",
    properties = {
        name = { type = "string" }, description = { type = "string" },
        aliases = { type = "array", items = { type = "string" } },
        extensions = { type = "array", items = { type = "string" } },
        plots = { type = "boolean" }, libraries = { type = "boolean" },
        interactive = { type = "boolean", description = "create_session can keep its interpreter (interactive: true)." },
    },
    required = array({ "name" }),
}

-- The tools, in the order clients list them. `run = true` marks tools that start sandboxes.
_M.definitions = {
    {
        name = "execute_code",
        title = "Run code in a sandbox",
        description = "Runs code in a fresh, isolated sandbox (no network, bounded time and memory) and "
            .. "returns exit_code, stdout, stderr and which limit fired, as JSON; each plot the program "
            .. "shows (matplotlib, seaborn) comes back as a PNG image. Nothing persists between calls: "
            .. "use create_session for work in steps. A non-zero exit_code is the program's failure, "
            .. "not the tool's.",
        input = object({ code = CODE, language = LANGUAGE, libraries = LIBRARIES, timeout = TIMEOUT }, { "code" }),
        output = RUN_RESULT,
        annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = false },
    },
    {
        name = "get_supported_languages",
        title = "List languages",
        description = "Lists the languages the sandbox runs, with their aliases and file extensions.",
        input = object({}),
        output = object({ languages = { type = "array", items = LANGUAGE_INFO } }, { "languages" }),
        annotations = { readOnlyHint = true, openWorldHint = false },
    },
    {
        name = "get_language_details",
        title = "Describe a language",
        description = "Details of one language: its version inside the sandbox, package manager, "
            .. "preinstalled libraries, plot support and an example program.",
        input = object({ language = { type = "string", minLength = 1, description = "A language name or alias." } },
            { "language" }),
        annotations = { readOnlyHint = true, openWorldHint = false },
    },
    {
        name = "check_code",
        title = "Check code against the policy",
        description = "Applies the security policy's code checks without running anything: returns "
            .. "safe, whether the policy would refuse it (blocked), and each violation with its rule, "
            .. "severity and line.",
        input = object({ code = CODE, language = LANGUAGE }, { "code" }),
        output = object({
            safe = { type = "boolean" }, blocked = { type = "boolean" }, mode = { type = "string" },
            violations = { type = "array", items = { type = "object" } },
        }, { "safe", "blocked", "violations" }),
        annotations = { readOnlyHint = true, openWorldHint = false },
    },
    {
        name = "create_session",
        title = "Open a sandbox session",
        description = "Opens a sandbox whose workspace (/sandbox) persists across run_in_session, "
            .. "upload_file and download_file calls, until close_session or an idle timeout. "
            .. "Returns session_id.",
        input = object({
            language = LANGUAGE,
            policy = { type = "string", minLength = 1,
                description = "A security policy the server allows (default: the server's)." },
            interactive = { type = "boolean", description = "Keep one interpreter alive (Python): each "
                .. "run_in_session is a cell that sees the variables, imports and functions of the cells before "
                .. "it, and returns the repr of its last expression as value." },
        }),
        output = object({
            session_id = { type = "string" }, language = { type = "string" }, policy = { type = "string" },
            idle_timeout = { type = "number", description = "Seconds of inactivity before the session is closed." },
            interactive = { type = "boolean" },
        }, { "session_id" }),
        annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = false },
    },
    {
        name = "run_in_session",
        title = "Run code in a session",
        description = "Runs code in an open session: files in /sandbox persist between runs, "
            .. "processes do not. Returns the same JSON (and plot images) as execute_code.",
        input = object({ session_id = SESSION_ID, code = CODE, libraries = LIBRARIES, timeout = TIMEOUT },
            { "session_id", "code" }),
        output = RUN_RESULT,
        annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = false },
    },
    {
        name = "upload_file",
        title = "Write a file into a session",
        description = "Writes a file into the session's workspace (/sandbox), replacing one that is there.",
        input = object({
            session_id = SESSION_ID, path = PATH,
            content = { type = "string", description = "The file's content: text, or base64 with encoding = base64." },
            encoding = { type = "string", enum = array({ "text", "base64" }), default = "text" },
        }, { "session_id", "path", "content" }),
        output = object({ path = { type = "string" }, size = { type = "integer" } }, { "path", "size" }),
        annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
    },
    {
        name = "download_file",
        title = "Read a file from a session",
        description = "Reads a file from the session's workspace (/sandbox): text as is, other bytes as base64.",
        input = object({ session_id = SESSION_ID, path = PATH }, { "session_id", "path" }),
        output = object({
            path = { type = "string" }, size = { type = "integer" },
            encoding = { type = "string", enum = array({ "text", "base64" }) }, content = { type = "string" },
        }, { "path", "size", "encoding", "content" }),
        annotations = { readOnlyHint = true, openWorldHint = false },
    },
    {
        name = "close_session",
        title = "Close a session",
        description = "Closes a session and destroys its workspace.",
        input = object({ session_id = SESSION_ID }, { "session_id" }),
        output = object({ closed = { type = "boolean" } }, { "closed" }),
        annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
    },
}

local by_name = {}
for _, d in ipairs(_M.definitions) do by_name[d.name] = d end

function _M.get(name)
    return by_name[name]
end

local FORMATS = {
    -- `modern`: the client negotiated 2025-06-18 or later (titles and output schemas exist)
    mcp = function(d, modern)
        local t = { name = d.name, description = d.description, inputSchema = d.input, annotations = d.annotations }
        if modern ~= false then
            t.title = d.title
            t.outputSchema = d.output
        end
        return t
    end,
    openai = function(d)
        return { type = "function", ["function"] = { name = d.name, description = d.description, parameters = d.input } }
    end,
    anthropic = function(d)
        return { name = d.name, description = d.description, input_schema = d.input }
    end,
}

_M.formats = { "mcp", "openai", "anthropic" }

--- list(format [, modern]) -> array of tool descriptions in that format
function _M.list(fmt, modern)
    local f = FORMATS[fmt]
    if not f then
        error(format("tools.list: unknown format %q (known: %s)", tostring(fmt), concat(_M.formats, ", ")), 2)
    end
    local out = array()
    for i, d in ipairs(_M.definitions) do out[i] = f(d, modern) end
    return out
end

-- ---------------------------------------------------------------------------------------------
-- argument validation: the subset of JSON Schema the definitions above use

local function type_ok(want, v)
    if want == "string" then return type(v) == "string" end
    if want == "number" then return type(v) == "number" and v == v end
    if want == "integer" then return type(v) == "number" and v == floor(v) end
    if want == "boolean" then return type(v) == "boolean" end
    if want == "null" then return v == json.null end
    if want == "array" then return type(v) == "table" and (next(v) == nil or not json.is_object(v)) end
    if want == "object" then return json.is_object(v) end
    return false
end

local function check(schema, v, path)
    local want = schema.type
    if want then
        local ok = false
        if type(want) == "table" then
            for _, w in ipairs(want) do ok = ok or type_ok(w, v) end
            want = concat(want, " or ")
        else
            ok = type_ok(want, v)
        end
        if not ok then
            local got = v == json.null and "null" or type(v) == "table" and (json.is_object(v) and "an object" or "an array")
                or type(v)
            return nil, format("%s: expected %s, got %s", path, want, got)
        end
    end
    if schema.enum then
        local found = false
        for _, e in ipairs(schema.enum) do found = found or e == v end
        if not found then
            return nil, format("%s: expected one of %s, got %q", path, concat(schema.enum, ", "), tostring(v))
        end
    end
    if schema.minLength and type(v) == "string" and #v < schema.minLength then
        return nil, format("%s: must not be empty", path)
    end
    if schema.exclusiveMinimum and type(v) == "number" and not (v > schema.exclusiveMinimum) then
        return nil, format("%s: must be greater than %s, got %s", path, tostring(schema.exclusiveMinimum), tostring(v))
    end
    if schema.maxItems and type(v) == "table" and #v > schema.maxItems then
        return nil, format("%s: at most %d items", path, schema.maxItems)
    end
    if schema.items and type(v) == "table" then
        for i, x in ipairs(v) do
            local ok, err = check(schema.items, x, format("%s[%d]", path, i - 1))
            if not ok then return nil, err end
        end
    end
    if schema.properties and type(v) == "table" then
        for _, k in ipairs(schema.required or {}) do
            if v[k] == nil then return nil, format("%s: missing required property %q", path, k) end
        end
        for k, x in pairs(v) do
            local ps = schema.properties[k]
            if ps then
                local ok, err = check(ps, x, path == "arguments" and k or path .. "." .. k)
                if not ok then return nil, err end
            elseif schema.additionalProperties == false then
                local known = {}
                for name in pairs(schema.properties) do known[#known + 1] = name end
                table.sort(known)
                return nil, format("%s: unknown property %q (known: %s)", path, tostring(k),
                    #known > 0 and concat(known, ", ") or "none")
            end
        end
    end
    return true
end

--- validate(name, args) -> true | nil, err naming the property and what was expected
function _M.validate(name, args)
    local d = by_name[name]
    if not d then error("tools.validate: unknown tool " .. tostring(name), 2) end
    return check(d.input, args, "arguments")
end

return _M

-- llmbox.serve.config: the daemon's configuration file (`llmbox serve --config FILE`), Lua that
-- returns a table, validated like policies (llmbox.schema): what is wrong stops the start with
-- the file and the key named.
--
--   return {
--     listen = { "unix:/run/llmbox/llmbox.sock", "127.0.0.1:8080" },
--     tokens = {
--       ["a-long-random-token"] = { tenant = "alice", policies = { "default", "strict" },
--                                   default_policy = "default" },
--     },
--     limits = { max_body = "16M", max_head = "64K", idle = "30s", max_runs = 8 },
--     pools = { python = 4 },
--   }
--
-- With tokens, every request but GET /healthz carries `Authorization: Bearer <token>`; a TCP
-- listener refuses to start without tokens. A tenant picks only its token's policies and sees
-- only its own sessions.
local schema = require "llmbox.schema"

local format, pairs, ipairs, type, tostring = string.format, pairs, ipairs, type, tostring

local _M = { _VERSION = "0.1.0" }

-- Tokens shorter than this are guessable: refused.
_M.MIN_TOKEN = 16

local NAME = { type = "string", pattern = "^[%w][%w_.%-]*$", pattern_desc = "a name of letters, digits, _ . -" }

local SPEC = {
    type = "record",
    fields = {
        listen = { type = "array", of = { type = "string" }, default = {} },
        tokens = {
            type = "map",
            key = { type = "string", pattern = "^[%w%-._~+/=]+$", pattern_desc = "a token of letters, digits and -._~+/=" },
            of = {
                type = "record",
                fields = {
                    tenant = { type = "string", required = true, pattern = NAME.pattern, pattern_desc = NAME.pattern_desc },
                    policies = { type = "array", of = { type = "string" }, required = true },
                    default_policy = { type = "string" },
                },
            },
            default = {},
        },
        limits = {
            type = "record",
            fields = {
                max_body = { type = "size", default = 16 * 1024 * 1024, min = 1024 },
                max_head = { type = "size", default = 64 * 1024, min = 1024, max = 16 * 1024 * 1024 },
                idle = { type = "duration", default = 30 },
                -- runs (one-shot and session calls) at once; more wait for a slot
                max_runs = { type = "integer", min = 1, max = 1024 },
            },
        },
        -- warm workers kept ready per language (the fast path), refilled off the request path
        pools = { type = "map", key = { type = "string" }, of = { type = "integer", min = 0, max = 64 }, default = {} },
    },
}

--- config.check(t, where) -> config | nil, err: a table as the file returns it
function _M.check(t, where)
    local cfg, err = schema.check(t, SPEC)
    if not cfg then return nil, format("%s: %s", where, err) end
    for token, entry in pairs(cfg.tokens) do
        -- (the token itself is never repeated in a message)
        local who = format("the token of tenant %q", entry.tenant)
        if #token < _M.MIN_TOKEN then
            return nil, format("%s: %s is shorter than %d characters: use a long random one (`openssl rand -hex 32`)",
                where, who, _M.MIN_TOKEN)
        end
        if #entry.policies == 0 then return nil, format("%s: %s lists no policies", where, who) end
        local policy = require "llmbox.policy"
        for _, name in ipairs(entry.policies) do
            local p, perr = policy.load(name)
            if not p then return nil, format("%s: %s: policies: %s", where, who, tostring(perr)) end
        end
        entry.default_policy = entry.default_policy or entry.policies[1]
        local listed = false
        for _, name in ipairs(entry.policies) do listed = listed or name == entry.default_policy end
        if not listed then
            return nil, format("%s: %s: default_policy %q is not one of its policies", where, who, entry.default_policy)
        end
    end
    for lang in pairs(cfg.pools) do
        local r = require("llmbox.recipes").get(lang)
        if not (r and r.warm) then
            return nil, format("%s: pools: %q has no warm workers (languages with them: python)", where, tostring(lang))
        end
    end
    return cfg
end

--- config.load(path) -> config | nil, err
function _M.load(path)
    local chunk, err = loadfile(path)
    if not chunk then return nil, format("--config %s: %s", path, tostring(err)) end
    -- data, not a program: no globals to reach
    setfenv(chunk, {})
    local ok, t = pcall(chunk)
    if not ok then return nil, format("--config %s: %s", path, tostring(t)) end
    if type(t) ~= "table" then return nil, format("--config %s: the file must return a table", path) end
    return _M.check(t, "--config " .. path)
end

return _M

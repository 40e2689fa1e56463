-- llmbox.mcp.config: the MCP server's configuration, read from the environment once at startup.
--
--   local config = require "llmbox.mcp.config"
--   local cfg, err = config.from_env()          -- or config.from_env({ SANDBOX_MEMORY = "1g" })
--   local p = assert(config.policy(cfg))        -- the derived policy table, as sessions take it
--
-- The variable names follow the conventions of the container-based code-execution MCP servers
-- (BACKEND, SANDBOX_*), so an existing client configuration can point at llmbox. Each setting is
-- either honoured or refused with a message saying why and what to do; nothing is silently
-- ignored (a SANDBOX_ or LLMBOX_MCP_ variable we do not know is warned about, with the nearest
-- known name), and nothing is discovered mid-call: every invalid value is reported before serving.
local schema = require "llmbox.schema"
local policy_mod = require "llmbox.policy"
local backends = require "llmbox.backends"

local type, pairs, ipairs, tostring, tonumber = type, pairs, ipairs, tostring, tonumber
local format, concat = string.format, table.concat

local _M = { _VERSION = "0.1.0" }

-- Every variable the server reads, for the README and for "unknown SANDBOX_ variable" hints.
_M.VARIABLES = {
    "BACKEND", "SANDBOX_NETWORK_MODE", "SANDBOX_READ_ONLY", "SANDBOX_MEMORY", "SANDBOX_MEM_LIMIT",
    "SANDBOX_CPUS", "SANDBOX_CPU_COUNT", "SANDBOX_CAP_DROP", "SANDBOX_SECURITY_OPT",
    "SANDBOX_PRIVILEGED", "LLMBOX_POLICY", "LLMBOX_MCP_POLICIES", "LLMBOX_MCP_SESSION_IDLE",
    "LLMBOX_MCP_MAX_SESSIONS", "LLMBOX_MCP_MAX_RUNS", "LLMBOX_MCP_WARM",
}

local TRUE = { ["true"] = true, ["1"] = true, yes = true, on = true }
local FALSE = { ["false"] = true, ["0"] = true, no = true, off = true }

local function boolean(name, v)
    local l = v:lower()
    if TRUE[l] then return true end
    if FALSE[l] then return false end
    return nil, format("%s=%q is not a boolean: use true or false", name, v)
end

local function split(v)
    local out = {}
    for item in v:gmatch("[^,%s]+") do out[#out + 1] = item end
    return out
end

-- Linux capability names as docker spells them (with or without CAP_), or ALL.
local function valid_cap(c)
    local u = c:upper():gsub("^CAP_", "")
    return u == "ALL" or u:match("^[A-Z][A-Z_]*$") ~= nil
end

local function positive_number(name, v, integer)
    local n = tonumber(v)
    if not n or n ~= n or n <= 0 or n == math.huge or (integer and n ~= math.floor(n)) then
        return nil, format("%s=%q: expected a positive %s", name, v, integer and "integer" or "number of seconds")
    end
    return n
end

-- Each check takes the value (a non-empty string) and the config being built; returns true or
-- nil, err. `notes` collects what was honoured differently from a container, for the log.
local checks = {}

function checks.BACKEND(v, cfg)
    local entry, err = backends.entry(v)
    if not entry then return nil, format("BACKEND=%q: %s", v, tostring(err)) end
    local _, gerr = backends.get(entry.name)
    if gerr then
        return nil, format("BACKEND=%s: %s; set BACKEND=native or unset BACKEND: the native jail needs no "
            .. "daemon and no image (it runs the host's interpreters, read-only), and honours the SANDBOX_* "
            .. "settings", v, gerr)
    end
    cfg.backend = entry.name
    return true
end

function checks.SANDBOX_NETWORK_MODE(v, cfg)
    local m = v:lower()
    if m == "none" or m == "disabled" then
        cfg.network, cfg.network_set = "none", true
        return true
    end
    if m == "bridge" then
        -- the seed's open network: llmbox's egress, where the policy allows it (load_policy)
        cfg.network, cfg.network_set = "egress", true
        return true
    end
    if m == "host" then
        return nil, format("SANDBOX_NETWORK_MODE=%s is refused: a sandbox never shares the host's network; "
            .. "use bridge (network mode \"egress\", where the policy allows it) or none", v)
    end
    return nil, format("SANDBOX_NETWORK_MODE=%q is not a network mode: use none or bridge", v)
end

function checks.SANDBOX_READ_ONLY(v, cfg)
    local b, err = boolean("SANDBOX_READ_ONLY", v)
    if b == nil then return nil, err end
    -- The jail's root is always read-only; only /sandbox and /tmp (size-limited tmpfs) are
    -- writable, as with a read-only container and its tmpfs volumes. `false` asks for less
    -- than we give, which is harmless, but say so rather than pretend.
    if not b then
        cfg.notes[#cfg.notes + 1] = "SANDBOX_READ_ONLY=false: the jail's root stays read-only; "
            .. "/sandbox and /tmp are writable"
    end
    return true
end

local function memory(name)
    return function(v, cfg)
        local n = schema.parse_size(v)
        if not n or n <= 0 then
            return nil, format("%s=%q is not a size: use bytes or a number with k, m or g (e.g. 512m, 1g)", name, v)
        end
        if cfg.memory and cfg.memory ~= n then
            return nil, format("SANDBOX_MEMORY and SANDBOX_MEM_LIMIT disagree (%s vs %s): set one of them",
                schema.format_size(cfg.memory), schema.format_size(n))
        end
        if n < 16 * 1024 * 1024 then
            return nil, format("%s=%s is below 16m, where no interpreter starts: give at least 16m", name, v)
        end
        cfg.memory = n
        return true
    end
end
checks.SANDBOX_MEMORY = memory("SANDBOX_MEMORY")
checks.SANDBOX_MEM_LIMIT = memory("SANDBOX_MEM_LIMIT")

-- A CPU count, as docker's --cpus takes it (fractions allowed): the run's cpu cgroup quota.
local function cpus(name)
    return function(v, cfg)
        local n = tonumber(v)
        if not n or n ~= n or n < 0.01 or n > 1024 then
            return nil, format("%s=%q is not a CPU count: use a number of CPUs from 0.01 to 1024 (e.g. 1 or 0.5)", name, v)
        end
        if cfg.cpus and cfg.cpus ~= n then
            return nil, format("SANDBOX_CPUS and SANDBOX_CPU_COUNT disagree (%s vs %s): set one of them",
                tostring(cfg.cpus), tostring(n))
        end
        -- a quota nothing can enforce is refused now, not at the first call
        local _, _, _, note, cpu_cgroup = require("llmbox.core").cgroup()
        if not cpu_cgroup then
            return nil, format("%s=%s cannot be honoured on this host: no cpu cgroup to hold the quota "
                .. "(%s); unset %s, or see `llmbox doctor`", name, v, note, name)
        end
        cfg.cpus = n
        return true
    end
end
checks.SANDBOX_CPUS = cpus("SANDBOX_CPUS")
checks.SANDBOX_CPU_COUNT = cpus("SANDBOX_CPU_COUNT")

function checks.SANDBOX_CAP_DROP(v)
    -- every capability is dropped from every set in the jail, so any list is already honoured
    for _, c in ipairs(split(v)) do
        if not valid_cap(c) then
            return nil, format("SANDBOX_CAP_DROP: %q is not a capability name (e.g. ALL, NET_RAW, CAP_SYS_ADMIN)", c)
        end
    end
    return true
end

function checks.SANDBOX_SECURITY_OPT(v)
    for _, opt in ipairs(split(v)) do
        local key, val = opt:match("^([%w%-_]+)[:=]?(.*)$")
        key = key and key:lower()
        if key == "no-new-privileges" then
            -- always set in the jail (prctl PR_SET_NO_NEW_PRIVS)
            if val ~= "" and not TRUE[val:lower()] then
                return nil, format("SANDBOX_SECURITY_OPT: %q is refused: no_new_privs is always on "
                    .. "in the jail and cannot be turned off", opt)
            end
        elseif key == "seccomp" or key == "apparmor" or key == "label" or key == "systempaths" then
            return nil, format("SANDBOX_SECURITY_OPT: %q is refused: the native jail's seccomp filter "
                .. "and mount layout come from the llmbox policy (LLMBOX_POLICY), not from security options; "
                .. "remove it", opt)
        else
            return nil, format("SANDBOX_SECURITY_OPT: unknown option %q (only no-new-privileges is accepted)", opt)
        end
    end
    return true
end

function checks.SANDBOX_PRIVILEGED(v)
    local b, err = boolean("SANDBOX_PRIVILEGED", v)
    if b == nil then return nil, err end
    if b then
        return nil, "SANDBOX_PRIVILEGED=true is refused: llmbox never runs code with privileges; "
            .. "unset it or set it to false"
    end
    return true
end

function checks.LLMBOX_MCP_SESSION_IDLE(v, cfg)
    local n, err = positive_number("LLMBOX_MCP_SESSION_IDLE", v)
    if not n then return nil, err end
    cfg.session_idle = n
    return true
end

function checks.LLMBOX_MCP_MAX_SESSIONS(v, cfg)
    local n, err = positive_number("LLMBOX_MCP_MAX_SESSIONS", v, true)
    if not n then return nil, err end
    cfg.max_sessions = n
    return true
end

function checks.LLMBOX_MCP_MAX_RUNS(v, cfg)
    local n, err = positive_number("LLMBOX_MCP_MAX_RUNS", v, true)
    if not n then return nil, err end
    cfg.max_runs = n
    return true
end

-- Workers kept per language with a pool of ready, warm sandboxes (the fast path); 0 turns it off.
function checks.LLMBOX_MCP_WARM(v, cfg)
    local n = tonumber(v)
    if not n or n ~= math.floor(n) or n < 0 or n > 64 then
        return nil, format("LLMBOX_MCP_WARM=%q: expected a whole number from 0 (off) to 64", v)
    end
    cfg.warm = n
    return true
end

-- The policies that would allow `bytes` of memory, by name, with their limit: "LLMBOX_POLICY=permissive (2G)".
local function policies_allowing(bytes)
    local out = {}
    for _, entry in ipairs(policy_mod.list()) do
        local p = not entry.error and policy_mod.load(entry.name)
        if p and p.limits.memory >= bytes then
            out[#out + 1] = format("LLMBOX_POLICY=%s (%s)", entry.name, schema.format_size(p.limits.memory))
        end
    end
    return out
end

-- SANDBOX_MEMORY above a policy's limit: which policy to choose instead, or how to write one.
local function memory_refusal(bytes, p, name)
    local size = schema.format_size(bytes)
    local msg = format("SANDBOX_MEMORY %s exceeds the memory limit of policy %q (%s); lower it, or ", size,
        p.name, schema.format_size(p.limits.memory))
    local allowing = policies_allowing(bytes)
    if #allowing > 0 then
        return msg .. format("choose a policy that allows %s: %s", size, concat(allowing, ", "))
    end
    return msg .. format("write a policy that allows it (no shipped policy allows %s): a file with "
        .. "return { extends = %q, limits = { memory = %q } }, then LLMBOX_POLICY=/path/to/that-file.lua",
        size, name, size)
end

-- The policy as sessions get it: loaded by name or path, with the environment's overrides. An
-- override may only lower a limit: the policy is the operator's ceiling.
function _M.load_policy(cfg, name)
    local p, err = policy_mod.load(name)
    if not p then return nil, err end
    if cfg.network == "egress" and p.network.mode ~= "egress" then
        return nil, format("SANDBOX_NETWORK_MODE=bridge is network mode \"egress\", which policy %q does not "
            .. "allow (its network.mode is %q): choose a policy with network = { mode = \"egress\" } "
            .. "(LLMBOX_POLICY), or set SANDBOX_NETWORK_MODE=none", p.name, p.network.mode)
    end
    if cfg.network_set and cfg.network == "none" then
        -- an override may only lower: none is always allowed
        p.network.mode, p.network.allow = "none", {}
    end
    if cfg.memory then
        if cfg.memory > p.limits.memory then return nil, memory_refusal(cfg.memory, p, name) end
        p.limits.memory = cfg.memory
    end
    if cfg.cpus then
        if p.limits.cpus and cfg.cpus > p.limits.cpus then
            return nil, format("SANDBOX_CPUS %s exceeds the cpus limit of policy %q (%s); "
                .. "lower it or choose a policy that allows more (LLMBOX_POLICY)",
                tostring(cfg.cpus), p.name, tostring(p.limits.cpus))
        end
        p.limits.cpus = cfg.cpus
    end
    return p
end

-- Levenshtein distance, for "did you mean" (names are short).
local function distance(a, b)
    local prev = {}
    for j = 0, #b do prev[j] = j end
    for i = 1, #a do
        local cur = { [0] = i }
        for j = 1, #b do
            local cost = a:byte(i) == b:byte(j) and 0 or 1
            cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        end
        prev = cur
    end
    return prev[#b]
end

-- Prefixes whose variables are all ours: any other name with them is a typo or a setting of
-- another server, and is ignored, so say so.
local OUR_PREFIXES = { "SANDBOX_", "LLMBOX_MCP_" }

local function unknown_variable_warnings(names)
    local known, by_prefix = {}, {}
    for _, n in ipairs(_M.VARIABLES) do known[n] = true end
    local warnings = {}
    table.sort(names)
    for _, name in ipairs(names) do
        for _, prefix in ipairs(OUR_PREFIXES) do
            if name:upper():sub(1, #prefix) == prefix and not known[name] then
                if not by_prefix[prefix] then
                    by_prefix[prefix] = {}
                    for _, n in ipairs(_M.VARIABLES) do
                        if n:sub(1, #prefix) == prefix then by_prefix[prefix][#by_prefix[prefix] + 1] = n end
                    end
                end
                local best, best_d
                for _, n in ipairs(by_prefix[prefix]) do
                    local d = distance(name:upper(), n)
                    if not best_d or d < best_d then best, best_d = n, d end
                end
                local hint = best_d and best_d <= 3 and format("did you mean %s? ", best) or ""
                warnings[#warnings + 1] = format("%s is not a variable llmbox knows, and is ignored; %sthe known "
                    .. "ones are %s", name, hint, concat(by_prefix[prefix], ", "))
            end
        end
    end
    return warnings
end

--- from_env([env]) -> config | nil, err (all the problems found, one per line), warnings
-- config.warnings (or the third value) lists the variables that look like ours but are not.
-- `env` is a table of variables (for tests) or nil for the process environment.
function _M.from_env(env)
    if env ~= nil and type(env) ~= "table" then error("config.from_env: env must be a table or nil", 2) end
    local getenv = env and function(k) return env[k] end or os.getenv
    local cfg = {
        backend = "native", network = "none", memory = nil,
        policy = "default", policies = nil,
        session_idle = 600, max_sessions = 16, max_runs = 8, warm = 2,
        notes = {}, warnings = {},
    }
    local errors = {}
    for _, name in ipairs(_M.VARIABLES) do
        local v = getenv(name)
        if v ~= nil and v ~= "" and checks[name] then
            local ok, err = checks[name](v, cfg)
            if not ok then errors[#errors + 1] = err end
        end
    end
    local p = getenv("LLMBOX_POLICY")
    if p and p ~= "" then cfg.policy = p end
    -- The policies a client may pick in create_session: the operator's choice only, unless
    -- LLMBOX_MCP_POLICIES lists more (an agent must not be able to pick a looser one on its own).
    cfg.policies = { cfg.policy }
    local extra = getenv("LLMBOX_MCP_POLICIES")
    if extra and extra ~= "" then
        local seen = { [cfg.policy] = true }
        for _, n in ipairs(split(extra)) do
            if not seen[n] then
                seen[n] = true
                cfg.policies[#cfg.policies + 1] = n
            end
        end
    end
    -- load each allowed policy now: a typo or an override above a policy's ceiling is a startup
    -- error, not a failed tool call an hour later
    for _, name in ipairs(cfg.policies) do
        local _, err = _M.load_policy(cfg, name)
        if err then
            errors[#errors + 1] = (name == cfg.policy and "LLMBOX_POLICY" or "LLMBOX_MCP_POLICIES")
                .. ": " .. err
        end
    end
    local names = {}
    for name in pairs(env or require("luv").os_environ()) do names[#names + 1] = name end
    cfg.warnings = unknown_variable_warnings(names)
    if #errors > 0 then return nil, concat(errors, "\n"), cfg.warnings end
    return cfg
end

-- The sandbox's environment-derived settings, for get_language_details and the log.
function _M.describe(cfg)
    return format("backend=%s network=%s policy=%s%s session_idle=%gs", cfg.backend, cfg.network,
        cfg.policy, (cfg.memory and (" memory=" .. schema.format_size(cfg.memory)) or "")
        .. (cfg.cpus and (" cpus=" .. tostring(cfg.cpus)) or ""), cfg.session_idle)
end

return _M

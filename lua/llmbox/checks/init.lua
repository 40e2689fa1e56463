-- llmbox.checks: static checks of code before it runs, driven by a policy's `checks` table.
--
--   checks.strip_comments(code, lang)    -> code with comments removed (newlines kept)
--   checks.modules(code, lang)           -> { { name = "os", full = "os.path", line = 1 }, ... }
--   checks.check(code, lang, policy.checks)
--     -> { safe = bool, mode = "enforce"|"warn"|"off", blocked = bool,
--          violations = { { rule =, severity =, message =, line = }, ... } }   (sorted by line)
--
-- These checks read intent ("this code runs shell commands") and give a clear refusal. They are
-- not the security boundary — the kernel jail is — so they aim to be hard to fool by accident or
-- by cheap tricks (a "#" inside a string, `import a, os`, a module name in a comment, Unicode
-- look-alike identifiers that Python folds to ASCII, a lone "\r" ending a comment), not to be an
-- interpreter. Two findings are built in rather than taken from the policy, both "critical":
--   * "source-encoding": Python code declaring a source encoding these checks cannot read
--     (e.g. utf-7) — the checks cannot vouch for what they cannot read;
--   * "code-size": code longer than checks.max_code_size is not checked at all.
--
-- Languages: python, shell, javascript, java, cpp, go, ruby, r (aliases such as "py", "bash",
-- "node", "c" are accepted). Any other language is checked with its code as written.
--
-- Cost: linear in the code's length (scanners, module finders and the pattern search all move
-- forward; see llmbox.checks.lexer and llmbox.checks.patterns), and bounded by max_code_size.
-- The parts: lexer + scan_<language> (comments and literals), fold (Python's identifier
-- folding), source (the prepared views), modules (imports per language), patterns (the search).

local type = type
local ipairs = ipairs
local error = error
local tostring = tostring
local string_sub = string.sub
local string_find = string.find
local string_lower = string.lower
local string_format = string.format
local table_sort = table.sort

local source = require "llmbox.checks.source"
local modules = require "llmbox.checks.modules"
local patterns = require "llmbox.checks.patterns"
local fold_identifiers = require "llmbox.checks.fold"

local _M = { _VERSION = "0.1.0" }

-- what a checks table without max_code_size gets (the policy schema's default is the same)
_M.max_code_size = 4 * 1024 * 1024

-- how many findings one pattern may report
local MAX_MATCHES = 1000

local ALIASES = {
    python3 = "python", py = "python",
    sh = "shell", bash = "shell", dash = "shell", zsh = "shell",
    js = "javascript", node = "javascript", nodejs = "javascript", typescript = "javascript",
    ts = "javascript",
    c = "cpp", ["c++"] = "cpp", cc = "cpp", cxx = "cpp",
    golang = "go",
    rb = "ruby",
    R = "r", rscript = "r",
}

local function canonical(lang)
    if type(lang) ~= "string" then
        return lang
    end
    return ALIASES[lang] or ALIASES[string_lower(lang)] or string_lower(lang)
end
_M.canonical = canonical

_M.fold_identifiers = fold_identifiers

-- strip_comments(code, lang) -> code without comments; newlines are kept so line numbers hold
function _M.strip_comments(code, lang)
    if type(code) ~= "string" then
        error("checks.strip_comments: code must be a string, got " .. type(code), 2)
    end
    return source.strip(code, canonical(lang))
end

-- modules(code, lang) -> array of { name = top-level package, full = name as imported, line = N }
function _M.modules(code, lang)
    if type(code) ~= "string" then
        error("checks.modules: code must be a string, got " .. type(code), 2)
    end
    local list = modules.find(source.prepare(code, canonical(lang)))
    for _, m in ipairs(list) do
        m.imports = nil
    end
    return list
end

local SEVERITY_RANK = { low = 1, medium = 2, high = 3, critical = 4 }
_M.severity_rank = SEVERITY_RANK

-- calls found(name) for each name a restricted entry could have to cover module m: "os.path"
-- is covered by "os" and "os.path"; `from urllib import request` also by "urllib.request".
-- Looking names up this way costs the depth of each module, not the number of rules.
-- found(p) for each prefix of str that ends before a separator at or after `from`, then str
local function each_prefix(str, sep, from, found)
    while true do
        local s = string_find(str, sep, from, true)
        if not s then
            break
        end
        found(string_sub(str, 1, s - 1))
        from = s + 1
    end
    found(str)
end

local function each_cover(m, sep, found)
    local full = m.full
    each_prefix(full, sep, 1, found)
    if m.name ~= full and string_sub(full, 1, #m.name + 1) ~= m.name .. sep then
        found(m.name) -- "@scope/pkg" for "@scope/pkg/x" is covered above; anything else here
    end
    for _, x in ipairs(m.imports or {}) do
        each_prefix(full .. sep .. x, sep, #full + 2, found)
    end
end

local function mib(n)
    return string_format("%.1f MiB", n / (1024 * 1024))
end

-- check(code, lang, checks_policy) -> report (see the top of this file)
function _M.check(code, lang, cp)
    if type(code) ~= "string" then
        error("checks.check: code must be a string, got " .. type(code), 2)
    end
    if type(lang) ~= "string" then
        error("checks.check: lang must be a string such as \"python\", got " .. type(lang), 2)
    end
    if type(cp) ~= "table" then
        error("checks.check: expected the policy's checks table (policy.checks), got " .. type(cp), 2)
    end
    local mode = cp.mode or "enforce"
    if mode == "off" then
        return { safe = true, mode = "off", blocked = false, violations = {} }
    end
    local threshold = SEVERITY_RANK[cp.threshold or "high"]
    if not threshold then
        error("checks.check: unknown threshold " .. tostring(cp.threshold), 2)
    end
    local max_size = cp.max_code_size or _M.max_code_size
    if #code > max_size then
        -- not a policy rule: code this long is not read at all, so it cannot be called safe
        local v = { rule = "code-size", severity = "critical", line = 1,
            message = string_format("the code is %s (%d bytes), more than the %s (%d bytes) that "
                .. "checks.max_code_size allows, so it was not checked; send less code or raise "
                .. "checks.max_code_size in the policy", mib(#code), #code, mib(max_size), max_size) }
        return { safe = false, mode = mode, blocked = mode == "enforce", violations = { v } }
    end
    local canon = canonical(lang)
    local rules = cp.rules or {}
    local sets, used = {}, {}
    for _, key in ipairs({ lang, canon, "*" }) do
        local r = rules[key]
        if r and not used[r] then
            used[r] = true
            sets[#sets + 1] = r
        end
    end

    local violations, seen = {}, {}
    local function add(rule, severity, message, line)
        local key = rule .. "\0" .. line
        if seen[key] then
            return
        end
        seen[key] = true
        violations[#violations + 1] = { rule = rule, severity = severity or "high",
            message = message, line = line }
    end

    local p = source.prepare(code, canon)
    if p.encoding then
        -- not a policy rule: the checks cannot read this file, so they cannot call it safe
        add("source-encoding", "critical", "declares source encoding " .. p.encoding
            .. ", which these checks cannot read; save the code as UTF-8", 1)
    end
    local mods
    local sep = modules.separator(canon)
    for _, set in ipairs(sets) do
        local restricted = set.restricted_modules
        if restricted and #restricted > 0 then
            mods = mods or modules.find(p)
            local by_name = {}
            for _, r in ipairs(restricted) do
                local name = type(r) == "string" and r or r.name
                by_name[name] = by_name[name] or (type(r) == "string" and { name = r } or r)
            end
            for _, m in ipairs(mods) do
                each_cover(m, sep, function(name)
                    local r = by_name[name]
                    if r then
                        add("module:" .. name, r.severity, r.message or ("imports " .. m.full), m.line)
                    end
                end)
            end
        end
        for _, rule in ipairs(set.patterns or {}) do
            local message = rule.message or ("matches rule " .. rule.id)
            local view = rule.strings == false and p.code or p.text
            for _, pat in ipairs(rule.patterns or { rule.pattern }) do
                patterns.each_match(view, pat, MAX_MATCHES, function(s)
                    add(rule.id, rule.severity, message, p.line_at(s))
                end)
            end
        end
    end

    table_sort(violations, function(a, b)
        if a.line ~= b.line then
            return a.line < b.line
        end
        return a.rule < b.rule
    end)
    local safe = true
    for _, v in ipairs(violations) do
        if (SEVERITY_RANK[v.severity] or 3) >= threshold then
            safe = false
            break
        end
    end
    return { safe = safe, mode = mode, blocked = (not safe) and mode == "enforce",
        violations = violations }
end

return _M

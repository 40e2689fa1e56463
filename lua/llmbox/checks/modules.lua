-- llmbox.checks.modules: the modules, packages and headers a program imports, per language.
--
--   modules.find(prepared) -> { { name = top-level name, full = name as written, line = N,
--                                 imports = { "x", ... } or nil }, ... }   sorted by line
--   modules.separator(lang) -> "." (python, java) or "/" (paths: go, cpp, javascript, ruby) or ":"
--
-- Each finder reads the prepared views (llmbox.checks.source): statements from `code` (so an
-- import inside a string or a comment is not one), names from `text`. Every search moves
-- forward, and a literal is read at most MAX_LITERAL bytes far, so finding modules costs time
-- linear in the code's length.

local ipairs = ipairs
local string_byte = string.byte
local string_sub = string.sub
local string_find = string.find
local string_rep = string.rep
local table_sort = table.sort

local finder = require("llmbox.checks.patterns").finder

local _M = {}

local B_LPAR, B_RPAR, B_LBRK, B_RBRK, B_LBRACE, B_RBRACE, B_NL, B_SEMI = 40, 41, 91, 93, 123, 125, 10, 59

-- no module name is longer; reading further for a closing quote would read the rest of the file
-- once per unclosed literal
local MAX_LITERAL = 256

local SEPARATORS = { python = ".", java = ".", r = ":" }

function _M.separator(lang)
    return SEPARATORS[lang] or "/"
end

local function add_module(list, seen, full, line, sep, imports)
    if full == nil or full == "" then
        return
    end
    local top = full:match("^@[^/]+/[^/]+") or full:match("^[^" .. sep .. "]+") or full
    local key = full .. "\0" .. line
    if seen[key] then
        return
    end
    seen[key] = true
    list[#list + 1] = { name = top, full = full, line = line, imports = imports }
end

-- a string literal starting at position p of `text` (after optional spaces), or nil when it is
-- computed ("a" + b, `${x}`), escaped or too long to be a name
local function literal_at(text, p, prefixes)
    local q, body = text:match("^%s*" .. (prefixes or "") .. "([\"'`])()", p)
    if not q then
        return nil
    end
    local close = string_find(string_sub(text, body, body + MAX_LITERAL), q, 1, true)
    if not close then
        return nil
    end
    local lit = string_sub(text, body, body + close - 2)
    if lit:find("[%s\\]") or lit:find("${", 1, true) then
        return nil
    end
    return lit
end
_M.literal_at = literal_at

-- ---------------------------------------------------------------------------------------------
-- Python: import a, b.c as d; from x import (y, z); __import__("m"); importlib.import_module("m")

local NAME_START = "^[%a_\128-\255]"

-- One logical statement st (starting at byte a of the code): its words are read once, left to
-- right, so a statement of any length (a 5 MB line of "import import ...") costs linear time.
local function python_statement(st, a, line_at, list, seen)
    if not string_find(st, "import", 1, true) then
        return
    end
    local words, starts, gaps, n = {}, {}, {}, 0
    local last_end = 0
    for s, w, e in st:gmatch("()([%w_%.\128-\255]+)()") do
        n = n + 1
        words[n], starts[n] = w, s
        gaps[n] = string_sub(st, last_end + 1, s - 1) -- the text before word n
        last_end = e - 1
    end
    local k = 1
    while k <= n do
        if words[k] == "import" then
            if k >= 3 and words[k - 2] == "from" and gaps[k - 1]:match("^%s+$")
                and gaps[k]:match("^%s+$") then
                -- from x import a, b as c, (d, e): the names may be submodules (from urllib
                -- import request), so the rule matcher sees them too; "as" aliases are dropped
                local names, j = {}, k + 1
                while j <= n do
                    if words[j] == "as" then
                        j = j + 1
                    elseif words[j]:match(NAME_START) then
                        names[#names + 1] = words[j]
                    end
                    j = j + 1
                end
                local from = words[k - 1]
                if string_sub(from, 1, 1) ~= "." then -- relative imports are the program's own files
                    add_module(list, seen, from, line_at(a + starts[k - 1] - 1), ".", names)
                end
                return
            end
            -- import a, b.c as d, e
            local j = k + 1
            while j <= n and words[j]:match(NAME_START)
                and gaps[j]:match(j == k + 1 and "^%s*$" or "^%s*,%s*$") do
                add_module(list, seen, words[j], line_at(a + starts[j] - 1), ".", nil)
                j = j + 1
                if words[j] == "as" and words[j + 1] and gaps[j]:match("^%s+$") then
                    j = j + 2
                end
            end
            k = j
        else
            k = k + 1
        end
    end
end

local function python_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    -- line continuations join lines; keep the length so positions stay valid
    local flat = code:gsub("\\\r?\n", function(m) return string_rep(" ", #m) end)
    -- logical statements: split on newlines and ';' outside brackets
    local n = #flat
    local stmt_start, depth = 1, 0
    for i = 1, n do
        local c = string_byte(flat, i)
        if c == B_LPAR or c == B_LBRK or c == B_LBRACE then
            depth = depth + 1
        elseif (c == B_RPAR or c == B_RBRK or c == B_RBRACE) and depth > 0 then
            depth = depth - 1
        elseif (c == B_NL and depth == 0) or c == B_SEMI then
            if i > stmt_start then
                python_statement(string_sub(flat, stmt_start, i - 1), stmt_start, line_at, list, seen)
            end
            stmt_start = i + 1
            depth = c == B_SEMI and depth or 0
        end
    end
    python_statement(string_sub(flat, stmt_start, n), stmt_start, line_at, list, seen)
    -- __import__("os"), importlib.import_module("os"), import_module(name="os")
    for _, fn in ipairs({ "__import__", "import_module" }) do
        local init = 1
        while true do
            local s, e = string_find(code, "%f[%w_]" .. fn .. "%s*%(", init)
            if not s then
                break
            end
            init = e + 1
            local p2 = text:match("^%s*name%s*=()", e + 1) or e + 1
            local lit = literal_at(text, p2, "[rRuU]?")
            if lit and lit:sub(1, 1) ~= "." then
                add_module(list, seen, lit, line_at(s), ".", nil)
            end
        end
    end
end

-- ---------------------------------------------------------------------------------------------
-- the others: a call or keyword followed by a literal, found with one forward search each

-- calls found(s, e, at) for every match of pat in `code`
local function each(code, pat, found)
    local find = finder(pat)
    local init = 1
    while true do
        local s, e, at = find(code, init)
        if not s then
            return
        end
        init = e + 1
        found(s, e, at)
    end
end

local function js_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    local function add(s, _, at)
        local lit = literal_at(text, at)
        if not lit or lit:match("^[%./]") then
            return -- computed, or the program's own files
        end
        add_module(list, seen, (lit:gsub("^node:", "")), line_at(s), "/", nil)
    end
    for _, pat in ipairs({ "%f[%w_$]require%s*%(()", "%f[%w_$]import%s*%(()",
        "%f[%w_$]from%s*()[\"']", "%f[%w_$]import%s*()[\"']" }) do
        each(code, pat, add)
    end
end

local function ruby_modules(p, list, seen)
    local text, line_at = p.text, p.line_at
    each(p.code, "%f[%w_]require%s*%(?%s*()[\"']", function(s, _, at)
        local lit = literal_at(text, at)
        if lit and not lit:match("^[%./]") then
            add_module(list, seen, lit, line_at(s), "/", nil)
        end
    end)
end

-- [%w_.]: the bytes of an R name
local function is_name_byte(c)
    return c ~= nil and (c >= 48 and c <= 57 or c >= 65 and c <= 90 or c >= 97 and c <= 122
        or c == 95 or c == 46)
end

local function r_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    for _, fn in ipairs({ "library", "require", "requireNamespace", "loadNamespace" }) do
        each(code, "%f[%w_.]" .. fn .. "%s*%(", function(s, e)
            local name = literal_at(text, e + 1)
                or code:match("^%s*package%s*=%s*([%a][%w%._]*)", e + 1)
                or code:match("^%s*([%a][%w%._]*)", e + 1)
            if name and name ~= "package" then
                add_module(list, seen, name, line_at(s), ":", nil)
            end
        end)
    end
    -- pkg::fn and pkg:::fn use a package without library(): found from each "::", reading the
    -- name before it (at most MAX_LITERAL bytes back)
    local init = 1
    while true do
        local c = string_find(code, "::", init, true)
        if not c then
            break
        end
        init = c + 2
        if string_byte(code, init) == 58 then
            init = init + 1 -- ":::"
        end
        local s = c
        while s > 1 and c - s < MAX_LITERAL and is_name_byte(string_byte(code, s - 1)) do
            s = s - 1
        end
        local first = string_byte(code, s)
        if s < c and not is_name_byte(string_byte(code, s - 1))
            and (first >= 65 and first <= 90 or first >= 97 and first <= 122) then
            add_module(list, seen, string_sub(code, s, c - 1), line_at(s), ":", nil)
        end
    end
end

-- Java: import a.b.C; import a.b.*; import static a.b.C.m; (spaces may surround the dots)
local function java_modules(p, list, seen)
    local code, line_at = p.code, p.line_at
    -- where the run of name characters from x ends; remembered, as runs are shared by every
    -- "import" inside one (a line of "import import ..." is one run)
    local from, stop
    local function run_end(x)
        if from == nil or x < from or x > stop then
            from = x
            stop = string_find(code, "[^%w_$%.%s%*]", x) or #code + 1
        end
        return stop
    end
    each(code, "%f[%w_$]import%s+()", function(s, _, at)
        local e = run_end(at)
        if string_byte(code, e) == B_SEMI then
            local name = string_sub(code, at, e - 1):gsub("^static%s+", ""):gsub("%s+", "")
            add_module(list, seen, name, line_at(s), ".", nil)
        end
    end)
end

-- Go: import "os/exec"; import ex "os/exec"; import ( "fmt"; _ "net/http" ); import "C" (cgo)
local function go_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    -- a path literal at byte q of the code view (its quote): its contents from the text view
    local function path_at(q)
        local quote = string_sub(code, q, q)
        local close = string_find(string_sub(code, q + 1, q + MAX_LITERAL), quote, 1, true)
        if close then
            add_module(list, seen, string_sub(text, q + 1, q + close - 1), line_at(q), "/", nil)
        end
        return close and q + close + 1 or q + 1
    end
    local init = 1
    while true do
        local s, e = string_find(code, "%f[%w_]import%f[^%w_]%s*", init)
        if not s then
            break
        end
        init = e + 1
        if string_byte(code, e + 1) == B_LPAR then
            -- a block: every path literal up to the closing parenthesis
            local close = string_find(code, ")", e + 2, true) or #code + 1
            local pos = e + 2
            while true do
                local q = string_find(code, "[\"`]", pos)
                if not q or q > close then
                    break
                end
                pos = path_at(q)
            end
            init = close + 1
        else
            local q = code:match("^[%w_%.]*%s*()[\"`]", e + 1)
            if q then
                init = path_at(q)
            end
        end
    end
end

-- C and C++: #include <sys/socket.h> and #include "local.h" (a header is a module here)
local function cpp_modules(p, list, seen)
    local text, line_at = p.text, p.line_at
    each(p.code, "#%s*include%s*()[<\"]", function(s, _, at)
        local name = string_sub(text, at, at + MAX_LITERAL):match("^[<\"]%s*([^>\"\n]-)%s*[>\"]")
        if name and name ~= "" then
            add_module(list, seen, name, line_at(s), "/", nil)
        end
    end)
end

local FINDERS = {
    python = python_modules,
    javascript = js_modules,
    ruby = ruby_modules,
    r = r_modules,
    java = java_modules,
    go = go_modules,
    cpp = cpp_modules,
}

function _M.find(p)
    local list, seen = {}, {}
    local find_lang = FINDERS[p.lang]
    if find_lang then
        find_lang(p, list, seen)
    end
    table_sort(list, function(a, b)
        if a.line ~= b.line then
            return a.line < b.line
        end
        return a.full < b.full
    end)
    return list
end

return _M

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
-- look-alike identifiers that Python folds to ASCII, a lone "\r" ending a comment), not to be a
-- Python interpreter. One finding is built in rather than taken from the policy: Python code
-- that declares a source encoding these checks cannot read (e.g. utf-7) is reported as rule
-- "source-encoding", severity "critical" — the checks cannot vouch for what they cannot read.
--
-- Languages: python, shell, javascript, java, cpp, go, ruby, r (aliases such as "py", "bash",
-- "node", "c" are accepted). Any other language is checked with its code as written.
--
-- Internally the scanners mark comment and string-literal byte ranges; from those come two views
-- of the same length as the code: comments blanked (patterns run on it, so strings still match)
-- and comments plus string contents blanked (import statements are parsed from it, so an
-- "import os" inside a string is not an import). Equal lengths keep every position, and so every
-- line number, the same across views.

local type = type
local ipairs = ipairs
local error = error
local select = select
local tostring = tostring
local string_byte = string.byte
local string_char = string.char
local string_sub = string.sub
local string_find = string.find
local string_rep = string.rep
local string_lower = string.lower
local table_concat = table.concat
local table_sort = table.sort
local math_floor = math.floor
local math_min = math.min

local _M = { _VERSION = "0.1.0" }

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

-- byte values used by the scanners
local B_NL, B_HASH, B_SQ, B_DQ, B_BT = 10, 35, 39, 34, 96
local B_BSL, B_SLASH, B_STAR = 92, 47, 42
local B_LBRACE, B_RBRACE, B_LPAR, B_RPAR, B_LBRK, B_RBRK = 123, 125, 40, 41, 91, 93
local B_DOLLAR, B_COLON, B_LT, B_EQ, B_PCT = 36, 58, 60, 61, 37

local function is_word_byte(c)
    return c and (c >= 48 and c <= 57 or c >= 65 and c <= 90 or c >= 97 and c <= 122 or c == 95
        or c >= 128)
end

-- A segment collector: kinds[k] is "line" / "block" (comments) or "str" (string contents),
-- covering bytes starts[k]..stops[k]. Scanners emit in increasing order.
local function new_segs()
    return { n = 0, kinds = {}, starts = {}, stops = {} }
end

local function emit(segs, kind, i, j)
    if j < i then
        return
    end
    local n = segs.n + 1
    segs.n = n
    segs.kinds[n], segs.starts[n], segs.stops[n] = kind, i, j
end

-- Nested fields (f"{f'{...}'}", `${`${...}`}`) recurse. Real code nests a few levels; past
-- MAX_NEST the rest of the input is left unmarked, i.e. treated as code, which hides nothing.
local MAX_NEST = 100
local nest = 0

local function nested(fn, s, i, segs, a, b)
    if nest >= MAX_NEST then
        return #s + 1
    end
    nest = nest + 1
    local r = fn(s, i, segs, a, b)
    nest = nest - 1
    return r
end

-- where a line comment starting at i ends. Python reads a lone "\r" as a line break, and
-- JavaScript also U+2028 and U+2029: "# x\rimport subprocess" runs the import. Ending comments
-- there in every language can only show more code, never hide any.
local function line_end(s, i)
    local j = string_find(s, "[\r\n]", i) or #s + 1
    local k = string_find(s, "\226\128[\168\169]", i)
    if k and k < j then
        j = k
    end
    return j - 1
end

-- Here-document bodies (shell <<WORD, ruby <<~WORD) start after the line that opened them and
-- are data, recorded as string segments. `strip` is a pattern removed from a body line before it
-- is compared with the terminator (<<- strips tabs, <<~ and <<- in ruby any indentation).
local function skip_heredoc_bodies(s, i, n, heredocs, segs)
    for _, h in ipairs(heredocs) do
        local body_start, body_end = i, n
        while i <= n do
            local e = line_end(s, i)
            local line = string_sub(s, i, e)
            if h.strip then
                line = line:gsub(h.strip, "")
            end
            if line == h.word then
                body_end = i - 1
                i = e + 2
                break
            end
            i = e + 2
        end
        emit(segs, "str", body_start, math_min(body_end, n))
    end
    return i
end

-- ---------------------------------------------------------------------------------------------
-- Python

local py_code -- forward

-- string prefixes; "f" marks those with {replacement fields} (t-strings are Python 3.14's)
local PY_PREFIXES = { r = "s", u = "s", b = "s", br = "s", rb = "s",
    f = "f", fr = "f", rf = "f", t = "f", tr = "f", rt = "f" }

-- i is just after the opening quote(s). Returns the position after the closing quote(s).
local function py_string(s, i, segs, q, triple, fstring)
    local n = #s
    local start = i
    while i <= n do
        local c = string_byte(s, i)
        if c == B_BSL then
            i = i + 2 -- also in raw strings: a backslash keeps the next quote from closing
        elseif c == q then
            if not triple then
                emit(segs, "str", start, i - 1)
                return i + 1
            elseif string_byte(s, i + 1) == q and string_byte(s, i + 2) == q then
                emit(segs, "str", start, i - 1)
                return i + 3
            end
            i = i + 1
        elseif c == B_NL and not triple then
            -- unterminated: Python refuses the file, stop the string here
            emit(segs, "str", start, i - 1)
            return i
        elseif fstring and c == B_LBRACE then
            if string_byte(s, i + 1) == B_LBRACE then
                i = i + 2
            else
                -- a replacement field is code: since Python 3.12 it may even hold strings with
                -- the same quote, e.g. f"{d["k"]}"
                emit(segs, "str", start, i)
                i = nested(py_code, s, i + 1, segs, { q = q, triple = triple })
                start = i
            end
        else
            i = i + 1
        end
    end
    emit(segs, "str", start, n)
    return n + 1
end

-- the format spec after ':' in a replacement field: literal text with nested fields
local function py_format_spec(s, i, segs, field)
    local n = #s
    local start = i
    while i <= n do
        local c = string_byte(s, i)
        if c == B_RBRACE then
            emit(segs, "str", start, i - 1)
            return i
        elseif c == B_LBRACE then
            emit(segs, "str", start, i)
            i = nested(py_code, s, i + 1, segs, field)
            if string_byte(s, i) == B_RBRACE then i = i + 1 end
            start = i
        elseif c == field.q or (c == B_NL and not field.triple) then
            emit(segs, "str", start, i - 1)
            return i
        else
            i = i + 1
        end
    end
    emit(segs, "str", start, n)
    return n + 1
end

-- Scans code from i. With `field` (inside an f-string replacement field) it stops at the
-- closing '}' and returns its position; otherwise it runs to the end.
py_code = function(s, i, segs, field)
    local n = #s
    local depth = 0
    while i <= n do
        local c = string_byte(s, i)
        if c == B_HASH then
            local j = line_end(s, i)
            emit(segs, "line", i, j)
            i = j + 1
        elseif c == B_SQ or c == B_DQ then
            local triple = string_byte(s, i + 1) == c and string_byte(s, i + 2) == c
            i = py_string(s, i + (triple and 3 or 1), segs, c, triple, false)
        elseif is_word_byte(c) then
            local j = (string_find(s, "[^%w_\128-\255]", i)) or n + 1
            local q = string_byte(s, j)
            local prefix = (q == B_SQ or q == B_DQ) and j - i <= 2
                and PY_PREFIXES[string_lower(string_sub(s, i, j - 1))]
            if prefix then
                local triple = string_byte(s, j + 1) == q and string_byte(s, j + 2) == q
                i = py_string(s, j + (triple and 3 or 1), segs, q, triple, prefix == "f")
            else
                i = j
            end
        elseif c == B_BSL then
            i = i + 2
        elseif field then
            if c == B_LBRACE or c == B_LPAR or c == B_LBRK then
                depth = depth + 1
            elseif c == B_RBRACE and depth == 0 then
                return i
            elseif c == B_RBRACE or c == B_RPAR or c == B_RBRK then
                depth = depth - 1
            elseif c == B_COLON and depth == 0 then
                -- "{x:#x}": the '#' there is a format flag, not a comment
                return py_format_spec(s, i + 1, segs, field)
            elseif c == B_NL and not field.triple then
                return i -- unterminated field: Python refuses the file
            end
            i = i + 1
        else
            i = i + 1
        end
    end
    return n + 1
end

local function scan_python(s, segs)
    py_code(s, 1, segs, nil)
end

-- ---------------------------------------------------------------------------------------------
-- shell (POSIX sh, dash, bash)

-- characters after which a '#' starts a word, and so a comment
local SH_WORD_BREAK = { [32] = true, [9] = true, [10] = true, [59] = true, [38] = true,
    [124] = true, [40] = true, [41] = true, [60] = true, [62] = true }

local function scan_shell(s, segs)
    local n = #s
    local i = 1
    local heredocs = {} -- pending here-documents, read after the current line ends
    while i <= n do
        local c = string_byte(s, i)
        if c == B_BSL then
            i = i + 2
        elseif c == B_SQ then
            local j = string_find(s, "'", i + 1, true) or n + 1
            emit(segs, "str", i + 1, j - 1)
            i = j + 1
        elseif c == B_DOLLAR and string_byte(s, i + 1) == B_SQ then
            -- $'...' (bash ANSI-C quoting): backslash escapes apply
            local j = i + 2
            while j <= n and string_byte(s, j) ~= B_SQ do
                j = j + (string_byte(s, j) == B_BSL and 2 or 1)
            end
            emit(segs, "str", i + 2, j - 1)
            i = j + 1
        elseif c == B_DQ then
            local j = i + 1
            while j <= n and string_byte(s, j) ~= B_DQ do
                j = j + (string_byte(s, j) == B_BSL and 2 or 1)
            end
            emit(segs, "str", i + 1, j - 1)
            i = j + 1
        elseif c == B_HASH and (i == 1 or SH_WORD_BREAK[string_byte(s, i - 1)]) then
            local j = line_end(s, i)
            emit(segs, "line", i, j)
            i = j + 1
        elseif c == B_LT and string_byte(s, i + 1) == B_LT and string_byte(s, i + 2) ~= B_LT then
            -- here-document: <<WORD, <<-WORD, <<'WORD', <<"WORD", <<\WORD
            local dash, word, after = s:match("^<<(%-?)[ \t]*([^%s;&|<>()]+)()", i)
            if word then
                local quoted = word:find("[\"'\\]") ~= nil
                word = word:gsub("[\"'\\]", "")
                heredocs[#heredocs + 1] = { word = word, strip = dash == "-" and "^\t+" or nil, quoted = quoted }
                i = after
            else
                i = i + 2
            end
        elseif c == B_NL and #heredocs > 0 then
            -- the bodies follow this line, one after another; they are data, not commands
            -- (unquoted ones still expand $(...), which stays visible to the patterns)
            i = skip_heredoc_bodies(s, i + 1, n, heredocs, segs)
            heredocs = {}
        else
            i = i + 1
        end
    end
end

-- ---------------------------------------------------------------------------------------------
-- C-like languages: javascript, java, cpp, go

-- after these, a '/' starts a regular expression literal rather than a division
local JS_REGEX_AFTER_CHAR = {}
for ch in ("(,=:[!&|?{};+-*%<>~^"):gmatch(".") do
    JS_REGEX_AFTER_CHAR[string_byte(ch)] = true
end
local JS_REGEX_AFTER_WORD = { ["return"] = true, ["typeof"] = true, ["case"] = true, ["do"] = true,
    ["else"] = true, ["in"] = true, ["of"] = true, ["new"] = true, ["delete"] = true,
    ["void"] = true, ["throw"] = true, ["instanceof"] = true, ["yield"] = true, ["await"] = true }

local c_code -- forward

local function c_quoted(s, i, segs, q)
    -- i is just after the quote; backslash escapes; a newline ends an unterminated literal
    local n = #s
    local j = i
    while j <= n do
        local c = string_byte(s, j)
        if c == B_BSL then
            j = j + 2
        elseif c == q or c == B_NL then
            break
        else
            j = j + 1
        end
    end
    emit(segs, "str", i, math_min(j - 1, n))
    if string_byte(s, j) == q then
        return j + 1
    end
    return j
end

local function js_template(s, i, segs)
    local n = #s
    local start = i
    while i <= n do
        local c = string_byte(s, i)
        if c == B_BSL then
            i = i + 2
        elseif c == B_BT then
            emit(segs, "str", start, i - 1)
            return i + 1
        elseif c == B_DOLLAR and string_byte(s, i + 1) == B_LBRACE then
            emit(segs, "str", start, i + 1)
            i = nested(c_code, s, i + 2, segs, "javascript", true)
            start = i
        else
            i = i + 1
        end
    end
    emit(segs, "str", start, n)
    return n + 1
end

local function js_regex(s, i, segs)
    -- i is on the opening '/'. Returns the end position, or nil when this is not a regex.
    local n = #s
    local j = i + 1
    local in_class = false
    while j <= n do
        local c = string_byte(s, j)
        if c == B_BSL then
            j = j + 2
        elseif c == B_NL then
            return nil
        elseif c == B_LBRK then
            in_class = true
            j = j + 1
        elseif c == B_RBRK then
            in_class = false
            j = j + 1
        elseif c == B_SLASH and not in_class then
            emit(segs, "str", i + 1, j - 1)
            return j + 1
        else
            j = j + 1
        end
    end
    return nil
end

-- Scans C-like code from i. With `in_field` (inside a template literal's ${...}) it returns the
-- position after the closing '}'.
c_code = function(s, i, segs, lang, in_field)
    local n = #s
    local depth = 0
    local last_char, last_word
    while i <= n do
        local c = string_byte(s, i)
        local c2 = string_byte(s, i + 1)
        if c == B_SLASH and c2 == B_SLASH then
            local j = line_end(s, i)
            -- C and C++: a backslash at the end of a // comment continues it on the next line
            while lang == "cpp" and string_byte(s, j) == B_BSL and j < n do
                j = line_end(s, j + 2)
            end
            emit(segs, "line", i, j)
            i = j + 1
        elseif c == B_SLASH and c2 == B_STAR then
            local _, e = string_find(s, "*/", i + 2, true)
            e = e or n
            emit(segs, "block", i, e)
            i = e + 1
        elseif c == B_DQ and lang == "java" and c2 == B_DQ and string_byte(s, i + 2) == B_DQ then
            -- Java text block """ ... """
            local j = i + 3
            while j <= n and not (string_byte(s, j) == B_DQ and string_byte(s, j + 1) == B_DQ
                and string_byte(s, j + 2) == B_DQ) do
                j = j + (string_byte(s, j) == B_BSL and 2 or 1)
            end
            emit(segs, "str", i + 3, math_min(j - 1, n))
            i = j + 3
            last_char = B_DQ
        elseif c == B_DQ then
            i = c_quoted(s, i + 1, segs, B_DQ)
            last_char = B_DQ
        elseif c == B_SQ then
            i = c_quoted(s, i + 1, segs, B_SQ)
            last_char = B_SQ
        elseif c == B_BT and lang == "javascript" then
            i = js_template(s, i + 1, segs)
            last_char = B_BT
        elseif c == B_BT and lang == "go" then
            -- Go raw string: no escapes, may span lines
            local j = string_find(s, "`", i + 1, true) or n + 1
            emit(segs, "str", i + 1, j - 1)
            i = j + 1
            last_char = B_BT
        elseif c == B_SLASH and lang == "javascript"
            and (last_char == nil or JS_REGEX_AFTER_CHAR[last_char]
                or (last_word and is_word_byte(last_char) and JS_REGEX_AFTER_WORD[last_word])) then
            local e = js_regex(s, i, segs)
            if e then
                i = e
                last_char = B_SLASH
            else
                last_char = c
                i = i + 1
            end
        elseif is_word_byte(c) then
            local j = (string_find(s, "[^%w_$\128-\255]", i)) or n + 1
            local word = string_sub(s, i, j - 1)
            local q = string_byte(s, j)
            if lang == "cpp" and q == B_DQ and word:match("^[uUL]?8?R$") then
                -- C++ raw string R"delim( ... )delim"
                local delim, open_end = s:match('^"([^%s()\\]*)%(()', j)
                if delim then
                    local close = ")" .. delim .. '"'
                    local cs, ce = string_find(s, close, open_end, true)
                    emit(segs, "str", open_end, (cs or n + 1) - 1)
                    i = (ce or n) + 1
                else
                    i = j
                end
            elseif lang == "cpp" and q == B_SQ and word:match("^%d") then
                -- digit separator: 1'000'000
                i = j + 1
            else
                i = j
            end
            last_word = word
            last_char = string_byte(s, j - 1)
        else
            if in_field then
                if c == B_LBRACE then
                    depth = depth + 1
                elseif c == B_RBRACE then
                    if depth == 0 then
                        return i + 1
                    end
                    depth = depth - 1
                end
            end
            if c ~= 32 and c ~= 9 and c ~= B_NL and c ~= 13 then
                last_char = c
            end
            i = i + 1
        end
    end
    return n + 1
end

local function scan_c_like(lang)
    return function(s, segs)
        c_code(s, 1, segs, lang, false)
    end
end

-- ---------------------------------------------------------------------------------------------
-- Ruby

local rb_code -- forward

local function rb_dstring(s, i, segs, close, open)
    -- double-quoted-like: escapes, #{...} interpolation. `open`/`close` allow %Q(...) nesting.
    local n = #s
    local start = i
    local depth = 0
    while i <= n do
        local c = string_byte(s, i)
        if c == B_BSL then
            i = i + 2
        elseif open and c == open and open ~= close then
            depth = depth + 1
            i = i + 1
        elseif c == close then
            if depth == 0 then
                emit(segs, "str", start, i - 1)
                return i + 1
            end
            depth = depth - 1
            i = i + 1
        elseif c == B_HASH and string_byte(s, i + 1) == B_LBRACE then
            emit(segs, "str", start, i + 1)
            i = nested(rb_code, s, i + 2, segs, true)
            start = i
        else
            i = i + 1
        end
    end
    emit(segs, "str", start, n)
    return n + 1
end

local PAIRS = { [B_LPAR] = B_RPAR, [B_LBRK] = B_RBRK, [B_LBRACE] = B_RBRACE, [B_LT] = 62 }

rb_code = function(s, i, segs, in_field)
    local n = #s
    local depth = 0
    local heredocs = {}
    local last_char
    while i <= n do
        local c = string_byte(s, i)
        local at_line_start = i == 1 or string_byte(s, i - 1) == B_NL
        if at_line_start and c == B_EQ and string_sub(s, i, i + 5) == "=begin" then
            local _, e = string_find(s, "\n=end[^\n]*", i)
            e = e or n
            emit(segs, "block", i, e)
            i = e + 1
        elseif c == B_HASH then
            local j = line_end(s, i)
            emit(segs, "line", i, j)
            i = j + 1
        elseif c == B_SQ then
            local j = i + 1
            while j <= n and string_byte(s, j) ~= B_SQ do
                j = j + (string_byte(s, j) == B_BSL and 2 or 1)
            end
            emit(segs, "str", i + 1, math_min(j - 1, n))
            i = j + 1
            last_char = B_SQ
        elseif c == B_DQ or c == B_BT then
            i = rb_dstring(s, i + 1, segs, c, nil)
            last_char = c
        elseif c == B_PCT and (last_char == nil or JS_REGEX_AFTER_CHAR[last_char]
            or string_byte(s, i - 1) == 32) and s:match("^%%[qQwWiIxrs]?[^%w%s]", i) then
            -- %q(...), %w[...], %(...) and friends
            local kind = s:match("^%%([qQwWiIxrs]?)", i)
            local j = i + 1 + #kind
            local open = string_byte(s, j)
            local close = PAIRS[open] or open
            i = rb_dstring(s, j + 1, segs, close, open)
            last_char = close
        elseif c == B_SLASH and (last_char == nil or JS_REGEX_AFTER_CHAR[last_char]) then
            local e = js_regex(s, i, segs)
            if e then
                i = e
            else
                i = i + 1
            end
            last_char = B_SLASH
        elseif c == B_LT and string_byte(s, i + 1) == B_LT
            and s:match("^<<[~%-]?[%u_\"'`]", i) then
            local indent, word, after = s:match("^<<([~%-]?)[\"'`]?([%w_]+)[\"'`]?()", i)
            if word then
                heredocs[#heredocs + 1] = { word = word, strip = indent ~= "" and "^%s+" or nil }
                i = after
            else
                i = i + 2
            end
            last_char = B_LT
        elseif c == B_NL and #heredocs > 0 then
            i = skip_heredoc_bodies(s, i + 1, n, heredocs, segs)
            heredocs = {}
        elseif is_word_byte(c) then
            local j = (string_find(s, "[^%w_?!\128-\255]", i)) or n + 1
            i = j
            last_char = string_byte(s, j - 1)
        else
            if in_field then
                if c == B_LBRACE then
                    depth = depth + 1
                elseif c == B_RBRACE then
                    if depth == 0 then
                        return i + 1
                    end
                    depth = depth - 1
                end
            end
            if c ~= 32 and c ~= 9 and c ~= B_NL and c ~= 13 then
                last_char = c
            end
            i = i + 1
        end
    end
    return n + 1
end

local function scan_ruby(s, segs)
    rb_code(s, 1, segs, false)
end

-- ---------------------------------------------------------------------------------------------
-- R

local function scan_r(s, segs)
    local n = #s
    local i = 1
    while i <= n do
        local c = string_byte(s, i)
        if c == B_HASH then
            local j = line_end(s, i)
            emit(segs, "line", i, j)
            i = j + 1
        elseif (c == 114 or c == 82) and not is_word_byte(string_byte(s, i - 1))
            and s:match("^[rR][\"']%-*[%(%[{]", i) then
            -- raw string r"(...)", r"[...]", r"{...}", with optional dashes: r"--(...)--"
            local q, dashes, open, body = s:match("^[rR]([\"'])(%-*)([%(%[{])()", i)
            local close = ({ ["("] = ")", ["["] = "]", ["{"] = "}" })[open] .. dashes .. q
            local cs, ce = string_find(s, close, body, true)
            emit(segs, "str", body, (cs or n + 1) - 1)
            i = (ce or n) + 1
        elseif c == B_SQ or c == B_DQ or c == B_BT then
            local j = i + 1
            while j <= n and string_byte(s, j) ~= c do
                j = j + (string_byte(s, j) == B_BSL and 2 or 1)
            end
            emit(segs, "str", i + 1, math_min(j - 1, n))
            i = j + 1
        elseif is_word_byte(c) then
            i = (string_find(s, "[^%w_.\128-\255]", i)) or n + 1
        else
            i = i + 1
        end
    end
end

local SCANNERS = {
    python = scan_python,
    shell = scan_shell,
    javascript = scan_c_like("javascript"),
    java = scan_c_like("java"),
    cpp = scan_c_like("cpp"),
    go = scan_c_like("go"),
    ruby = scan_ruby,
    r = scan_r,
}

local function blank(s)
    return (s:gsub("[^\n]", " "))
end

-- segments -> the requested view of s
local function render(s, segs, how)
    local out, k = {}, 0
    local pos = 1
    for x = 1, segs.n do
        local kind, a, b = segs.kinds[x], segs.starts[x], segs.stops[x]
        if a > pos then
            k = k + 1
            out[k] = string_sub(s, pos, a - 1)
        end
        local text = string_sub(s, a, b)
        if kind == "str" then
            -- "code" view: string contents become spaces, newlines included, so a statement
            -- splitter never ends a statement inside a triple-quoted string
            k = k + 1
            out[k] = how == "code" and string_rep(" ", #text) or text
        elseif how == "strip" then
            local nl = select(2, text:gsub("\n", ""))
            k = k + 1
            out[k] = nl > 0 and string_rep("\n", nl) or (kind == "block" and " " or "")
        else
            k = k + 1
            out[k] = blank(text)
        end
        pos = b + 1
    end
    if pos <= #s then
        k = k + 1
        out[k] = string_sub(s, pos)
    end
    return table_concat(out)
end

local function scan(s, lang)
    local scanner = SCANNERS[lang]
    local segs = new_segs()
    nest = 0
    if scanner then
        scanner(s, segs)
    end
    return segs
end

-- ---------------------------------------------------------------------------------------------
-- Python folds identifiers with NFKC, so `import ｓｕｂｐｒｏｃｅｓｓ` (full-width letters) or
-- `os.𝐬𝐲𝐬𝐭𝐞𝐦(...)` (mathematical bold) are the real thing. Fold the look-alikes that NFKC maps
-- to ASCII letters, digits and '_' before checking; anything else is left as it is.

local FOLD = {
    [0x017F] = "s", [0x212A] = "K", [0x00AA] = "a", [0x00BA] = "o",
    [0x2102] = "C", [0x210A] = "g", [0x210B] = "H", [0x210C] = "H", [0x210D] = "H", [0x210E] = "h",
    [0x2110] = "I", [0x2111] = "I", [0x2112] = "L", [0x2113] = "l", [0x2115] = "N", [0x2119] = "P",
    [0x211A] = "Q", [0x211B] = "R", [0x211C] = "R", [0x211D] = "R", [0x2124] = "Z", [0x2128] = "Z",
    [0x212C] = "B", [0x212D] = "C", [0x212F] = "e", [0x2130] = "E", [0x2131] = "F", [0x2133] = "M",
    [0x2134] = "o", [0x2139] = "i", [0x2145] = "D", [0x2146] = "d", [0x2147] = "e", [0x2148] = "i",
    [0x2149] = "j",
    [0xFB00] = "ff", [0xFB01] = "fi", [0xFB02] = "fl", [0xFB03] = "ffi", [0xFB04] = "ffl",
    [0xFB05] = "st", [0xFB06] = "st",
    [0x2071] = "i", [0x207F] = "n",
    [0x2090] = "a", [0x2091] = "e", [0x2092] = "o", [0x2093] = "x", [0x2095] = "h", [0x2096] = "k",
    [0x2097] = "l", [0x2098] = "m", [0x2099] = "n", [0x209A] = "p", [0x209B] = "s", [0x209C] = "t",
    [0x02B0] = "h", [0x02B2] = "j", [0x02B3] = "r", [0x02B7] = "w", [0x02B8] = "y", [0x02E1] = "l",
    [0x02E2] = "s", [0x02E3] = "x",
    [0x1D2C] = "A", [0x1D2E] = "B", [0x1D30] = "D", [0x1D31] = "E", [0x1D33] = "G", [0x1D34] = "H",
    [0x1D35] = "I", [0x1D36] = "J", [0x1D37] = "K", [0x1D38] = "L", [0x1D39] = "M", [0x1D3A] = "N",
    [0x1D3C] = "O", [0x1D3E] = "P", [0x1D3F] = "R", [0x1D40] = "T", [0x1D41] = "U", [0x1D42] = "W",
    [0x1D43] = "a", [0x1D47] = "b", [0x1D48] = "d", [0x1D49] = "e", [0x1D4D] = "g", [0x1D4F] = "k",
    [0x1D50] = "m", [0x1D52] = "o", [0x1D56] = "p", [0x1D57] = "t", [0x1D58] = "u", [0x1D5B] = "v",
    [0x1D62] = "i", [0x1D63] = "r", [0x1D64] = "u", [0x1D65] = "v", [0x1D9C] = "c", [0x1DA0] = "f",
    [0x1DBB] = "z", [0x2C7C] = "j", [0x2C7D] = "V", [0x107A5] = "q",
    [0x0132] = "IJ", [0x0133] = "ij", [0x01C7] = "LJ", [0x01C8] = "Lj", [0x01C9] = "lj",
    [0x01CA] = "NJ", [0x01CB] = "Nj", [0x01CC] = "nj", [0x01F1] = "DZ", [0x01F2] = "Dz",
    [0x01F3] = "dz", [0xA7F2] = "C", [0xA7F3] = "F", [0xA7F4] = "Q",
    [0xFE33] = "_", [0xFE34] = "_", [0xFE4D] = "_", [0xFE4E] = "_", [0xFE4F] = "_",
}
do
    local roman = { "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
        "L", "C", "D", "M" }
    for k, r in ipairs(roman) do
        FOLD[0x2160 + k - 1] = r
        FOLD[0x2170 + k - 1] = string_lower(r)
    end
end

local function fold_codepoint(cp)
    local f = FOLD[cp]
    if f then
        return f
    end
    if cp >= 0xFF10 and cp <= 0xFF19 then
        return string_char(48 + cp - 0xFF10)
    elseif cp >= 0xFF21 and cp <= 0xFF3A then
        return string_char(65 + cp - 0xFF21)
    elseif cp >= 0xFF41 and cp <= 0xFF5A then
        return string_char(97 + cp - 0xFF41)
    elseif cp == 0xFF3F then
        return "_"
    elseif cp >= 0x1D400 and cp <= 0x1D6A3 then
        local k = (cp - 0x1D400) % 52
        return k < 26 and string_char(65 + k) or string_char(97 + k - 26)
    elseif cp >= 0x1D7CE and cp <= 0x1D7FF then
        return string_char(48 + (cp - 0x1D7CE) % 10)
    elseif cp >= 0x1FBF0 and cp <= 0x1FBF9 then
        return string_char(48 + cp - 0x1FBF0)
    end
    return nil
end

local function fold_sequence(seq)
    local c = string_byte(seq, 1)
    local len = c >= 0xF0 and 4 or c >= 0xE0 and 3 or 2
    if #seq ~= len then
        return nil -- invalid UTF-8: leave it alone (Python refuses such a file anyway)
    end
    local cp = c % (len == 2 and 32 or len == 3 and 16 or 8)
    for k = 2, len do
        cp = cp * 64 + string_byte(seq, k) % 64
    end
    return fold_codepoint(cp)
end

local function fold_identifiers(s)
    if not string_find(s, "[\128-\255]") then
        return s
    end
    return (s:gsub("[\194-\244][\128-\191]*", fold_sequence))
end
_M.fold_identifiers = fold_identifiers

-- ---------------------------------------------------------------------------------------------
-- preparing code once for modules() and check()

local function new_line_index(s)
    local nls, k = {}, 0
    local pos = 0
    while true do
        pos = string_find(s, "\n", pos + 1, true)
        if not pos then
            break
        end
        k = k + 1
        nls[k] = pos
    end
    -- line of byte position p: 1 + number of newlines before p
    return function(p)
        local lo, hi = 1, k
        local count = 0
        while lo <= hi do
            local mid = math_floor((lo + hi) / 2)
            if nls[mid] < p then
                count = mid
                lo = mid + 1
            else
                hi = mid - 1
            end
        end
        return count + 1
    end
end

-- Python decodes a file with the codec its first two lines name (PEP 263). Single-byte codecs
-- that keep ASCII as ASCII read the same as UTF-8 here; others can turn a comment into code
-- ("# coding: utf-7" then "# +AAo-import subprocess" runs the import), so they are refused.
local function python_encoding_problem(code)
    local l1, l2 = code:match("^([^\r\n]*)\r?\n?([^\r\n]*)")
    for _, line in ipairs({ l1, l2 }) do
        local enc = line:match("^[ \t\f]*#.-coding[:=][ \t]*([%-_%.%w]+)")
        if enc then
            local e = string_lower(enc):gsub("_", "-")
            if e:match("^utf%-?8") or e == "u8" or e:match("ascii$") or e == "646"
                or e:match("^latin") or e:match("^l%d+$") or e:match("^iso%-?8859")
                or e:match("^8859") or e:match("^cp125%d$") or e:match("^windows%-125%d$")
                or e == "cp819" then
                return nil
            end
            return enc
        end
    end
    return nil
end

local function prepare(code, lang)
    local encoding
    if lang == "python" then
        encoding = python_encoding_problem(code)
        code = fold_identifiers(code)
    end
    local segs = scan(code, lang)
    return {
        lang = lang,
        text = render(code, segs, "blank"), -- comments blanked, strings kept
        code = render(code, segs, "code"),  -- comments and string contents blanked
        line_at = new_line_index(code),
        encoding = encoding,
    }
end

-- ---------------------------------------------------------------------------------------------
-- modules

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

-- a string literal starting at position p of `text` (after optional spaces)
local function literal_at(text, p, prefixes)
    local q, body = text:match("^%s*" .. (prefixes or "") .. "([\"'`])()", p)
    if not q then
        return nil
    end
    local close = string_find(text, q, body, true)
    if not close then
        return nil
    end
    local lit = string_sub(text, body, close - 1)
    if lit:find("[%s\\]") or lit:find("${", 1, true) then
        return nil -- computed or escaped: not a plain name
    end
    return lit
end

local PY_NAME = "[%a_\128-\255][%w_\128-\255]*"
local PY_DOTTED = "[%a_\128-\255][%w_%.\128-\255]*"

local function python_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    -- line continuations join lines; keep the length so positions stay valid
    local flat = code:gsub("\\\r?\n", function(m) return string_rep(" ", #m) end)
    -- logical statements: split on newlines and ';' outside brackets
    local n = #flat
    local stmt_start, depth = 1, 0
    local function statement(a, b)
        local st = string_sub(flat, a, b)
        local init = 1
        while true do
            local s, e = string_find(st, "%f[%w_]import%f[^%w_]", init)
            if not s then
                break
            end
            init = e + 1
            local before = string_sub(st, 1, s - 1)
            local fpos, from_mod = before:match("%f[%w_]from%s+()([%.%w_\128-\255]+)%s*$")
            if from_mod then
                -- from x import a, b as c, (d, e): the names may be submodules (from urllib
                -- import request), so the rule matcher sees them too; "as" aliases are dropped
                local rest = string_sub(st, e + 1)
                local clean, skip = {}, false
                for word in rest:gmatch(PY_NAME) do
                    if skip then
                        skip = false
                    elseif word == "as" then
                        skip = true
                    else
                        clean[#clean + 1] = word
                    end
                end
                if from_mod:sub(1, 1) ~= "." then -- relative imports are the program's own files
                    add_module(list, seen, from_mod, line_at(a + fpos - 1), ".", clean)
                end
            else
                -- import a, b.c as d, e
                local pos = e + 1
                while true do
                    local ns, name, ne = st:match("^%s*()(" .. PY_DOTTED .. ")()", pos)
                    if not ns then
                        break
                    end
                    add_module(list, seen, name, line_at(a + ns - 1), ".", nil)
                    pos = ne
                    local after_as = st:match("^%s+as%s+" .. PY_NAME .. "()", pos)
                    if after_as then
                        pos = after_as
                    end
                    local comma = st:match("^%s*,()", pos)
                    if not comma then
                        break
                    end
                    pos = comma
                end
            end
        end
    end
    for i = 1, n do
        local c = string_byte(flat, i)
        if c == B_LPAR or c == B_LBRK or c == B_LBRACE then
            depth = depth + 1
        elseif (c == B_RPAR or c == B_RBRK or c == B_RBRACE) and depth > 0 then
            depth = depth - 1
        elseif (c == B_NL and depth == 0) or c == 59 then
            statement(stmt_start, i - 1)
            stmt_start = i + 1
            depth = c == 59 and depth or 0
        end
    end
    statement(stmt_start, n)
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

local function js_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    local function add(lit, pos)
        if not lit or lit:match("^[%./]") then
            return -- relative and absolute paths are the program's own files
        end
        lit = lit:gsub("^node:", "")
        add_module(list, seen, lit, line_at(pos), "/", nil)
    end
    for _, pat in ipairs({ "%f[%w_$]require%s*%(()", "%f[%w_$]import%s*%(()",
        "%f[%w_$]from%s*()[\"']", "%f[%w_$]import%s*()[\"']" }) do
        local init = 1
        while true do
            local s, e, at = string_find(code, pat, init)
            if not s then
                break
            end
            init = e + 1
            add(literal_at(text, at), s)
        end
    end
end

local function ruby_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    local init = 1
    while true do
        local s, e, at = string_find(code, "%f[%w_]require%s*%(?%s*()[\"']", init)
        if not s then
            break
        end
        init = e + 1
        local lit = literal_at(text, at)
        if lit and not lit:match("^[%./]") then
            add_module(list, seen, lit, line_at(s), "/", nil)
        end
    end
end

local function r_modules(p, list, seen)
    local code, text, line_at = p.code, p.text, p.line_at
    for _, fn in ipairs({ "library", "require", "requireNamespace", "loadNamespace" }) do
        local init = 1
        while true do
            local s, e = string_find(code, "%f[%w_.]" .. fn .. "%s*%(", init)
            if not s then
                break
            end
            init = e + 1
            local name = literal_at(text, e + 1)
                or code:match("^%s*package%s*=%s*([%a][%w%._]*)", e + 1)
                or code:match("^%s*([%a][%w%._]*)", e + 1)
            if name and name ~= "package" then
                add_module(list, seen, name, line_at(s), ":", nil)
            end
        end
    end
    -- pkg::fn and pkg:::fn use a package without library()
    local init = 1
    while true do
        local s, e, name = string_find(code, "%f[%w_.]([%a][%w%._]*):::?", init)
        if not s then
            break
        end
        init = e + 1
        add_module(list, seen, name, line_at(s), ":", nil)
    end
end

local MODULE_FINDERS = {
    python = python_modules,
    javascript = js_modules,
    ruby = ruby_modules,
    r = r_modules,
}

local function find_modules(p)
    local list, seen = {}, {}
    local finder = MODULE_FINDERS[p.lang]
    if finder then
        finder(p, list, seen)
    end
    table_sort(list, function(a, b)
        if a.line ~= b.line then
            return a.line < b.line
        end
        return a.full < b.full
    end)
    return list
end

-- ---------------------------------------------------------------------------------------------
-- public API

-- strip_comments(code, lang) -> code without comments; newlines are kept so line numbers hold
function _M.strip_comments(code, lang)
    if type(code) ~= "string" then
        error("checks.strip_comments: code must be a string, got " .. type(code), 2)
    end
    lang = canonical(lang)
    if not SCANNERS[lang] then
        return code
    end
    return render(code, scan(code, lang), "strip")
end

-- modules(code, lang) -> array of { name = top-level package, full = name as imported, line = N }
function _M.modules(code, lang)
    if type(code) ~= "string" then
        error("checks.modules: code must be a string, got " .. type(code), 2)
    end
    local list = find_modules(prepare(code, canonical(lang)))
    for _, m in ipairs(list) do
        m.imports = nil
    end
    return list
end

local SEVERITY_RANK = { low = 1, medium = 2, high = 3, critical = 4 }
_M.severity_rank = SEVERITY_RANK

local function module_matches(m, name, sep)
    if m.full == name or m.name == name then
        return true
    end
    if string_sub(m.full, 1, #name + 1) == name .. sep then
        return true
    end
    -- from urllib import request  ~  urllib.request
    if m.imports then
        for _, x in ipairs(m.imports) do
            local full = m.full .. sep .. x
            if full == name or string_sub(full, 1, #name + 1) == name .. sep then
                return true
            end
        end
    end
    return false
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

    local p = prepare(code, canon)
    if p.encoding then
        -- not a policy rule: the checks cannot read this file, so they cannot call it safe
        add("source-encoding", "critical", "declares source encoding " .. p.encoding
            .. ", which these checks cannot read; save the code as UTF-8", 1)
    end
    local mods
    local sep = canon == "python" and "." or "/"
    for _, set in ipairs(sets) do
        local restricted = set.restricted_modules
        if restricted and #restricted > 0 then
            mods = mods or find_modules(p)
            for _, r in ipairs(restricted) do
                local name = type(r) == "string" and r or r.name
                for _, m in ipairs(mods) do
                    if module_matches(m, name, sep) then
                        add("module:" .. name, r.severity, r.message or ("imports " .. m.full), m.line)
                    end
                end
            end
        end
        for _, rule in ipairs(set.patterns or {}) do
            local pats = rule.patterns or { rule.pattern }
            for _, pat in ipairs(pats) do
                local init, count = 1, 0
                while count < 1000 do
                    local s, e = string_find(p.text, pat, init)
                    if not s then
                        break
                    end
                    add(rule.id, rule.severity, rule.message or ("matches rule " .. rule.id), p.line_at(s))
                    count = count + 1
                    if string_sub(pat, 1, 1) == "^" then
                        break -- anchored: it can only match at the start
                    end
                    init = (e >= s and e or s) + 1
                end
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

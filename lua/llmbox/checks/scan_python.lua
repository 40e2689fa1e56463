-- llmbox.checks.scan_python: marks the comments and string literals of Python code, f-strings
-- included (their {replacement fields} are code, and may nest strings and fields).

local lexer = require "llmbox.checks.lexer"

local string_byte = string.byte
local string_sub = string.sub
local string_find = string.find
local string_lower = string.lower

local B = lexer.B
local B_NL, B_HASH, B_SQ, B_DQ, B_BSL, B_LBRACE = B.NL, B.HASH, B.SQ, B.DQ, B.BSL, B.LBRACE
local B_RBRACE, B_LPAR, B_RPAR, B_LBRK, B_RBRK, B_COLON = B.RBRACE, B.LPAR, B.RPAR, B.LBRK, B.RBRK, B.COLON
local emit, nested, line_end, is_word_byte = lexer.emit, lexer.nested, lexer.line_end, lexer.is_word_byte

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
return scan_python

-- llmbox.checks.scan_clike: marks the comments and literals of the C-like languages: JavaScript
-- (template literals, regular expressions), Java (text blocks), C and C++ (raw strings, digit
-- separators, continued // comments) and Go (raw strings). Returns scanner(lang).

local lexer = require "llmbox.checks.lexer"

local string_byte = string.byte
local string_sub = string.sub
local string_find = string.find
local math_min = math.min

local B = lexer.B
local B_NL, B_SQ, B_DQ, B_BT, B_BSL, B_SLASH = B.NL, B.SQ, B.DQ, B.BT, B.BSL, B.SLASH
local B_STAR, B_LBRACE, B_DOLLAR = B.STAR, B.LBRACE, B.DOLLAR
local emit, nested, line_end, is_word_byte = lexer.emit, lexer.nested, lexer.line_end, lexer.is_word_byte
local field_depth, is_blank, js_regex = lexer.field_depth, lexer.is_blank, lexer.regex_literal
local JS_REGEX_AFTER_CHAR, JS_REGEX_AFTER_WORD = lexer.REGEX_AFTER_CHAR, lexer.REGEX_AFTER_WORD

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
                -- the delimiter is at most 16 characters: looking further could read a whole
                -- line of R"R"R"... once per R
                local delim, open_end = string_sub(s, j, j + 17):match('^"([^%s()\\]*)%(()')
                if open_end then
                    open_end = j + open_end - 1
                end
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
                depth = field_depth(c, depth)
                if not depth then
                    return i + 1
                end
            end
            if not is_blank(c) then
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
return scan_c_like

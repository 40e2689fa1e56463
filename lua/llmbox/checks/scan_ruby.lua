-- llmbox.checks.scan_ruby: marks the comments and literals of Ruby code: =begin blocks, #{}
-- interpolation, %q()/%w[] literals, regular expressions and here-documents.

local lexer = require "llmbox.checks.lexer"

local string_byte = string.byte
local string_sub = string.sub
local string_find = string.find
local math_min = math.min

local B = lexer.B
local B_NL, B_HASH, B_SQ, B_DQ, B_BT, B_BSL = B.NL, B.HASH, B.SQ, B.DQ, B.BT, B.BSL
local B_SLASH, B_LBRACE, B_RBRACE, B_LPAR, B_RPAR, B_LBRK = B.SLASH, B.LBRACE, B.RBRACE, B.LPAR, B.RPAR, B.LBRK
local B_RBRK, B_LT, B_EQ, B_PCT = B.RBRK, B.LT, B.EQ, B.PCT
local emit, nested, line_end, is_word_byte = lexer.emit, lexer.nested, lexer.line_end, lexer.is_word_byte
local skip_heredoc_bodies, field_depth, is_blank = lexer.skip_heredoc_bodies, lexer.field_depth, lexer.is_blank
local js_regex, JS_REGEX_AFTER_CHAR = lexer.regex_literal, lexer.REGEX_AFTER_CHAR

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

local function scan_ruby(s, segs)
    rb_code(s, 1, segs, false)
end
return scan_ruby

-- llmbox.checks.scan_r: marks the comments and string literals (raw strings included) of R code.

local lexer = require "llmbox.checks.lexer"

local string_byte = string.byte
local string_find = string.find
local math_min = math.min

local B = lexer.B
local B_HASH, B_SQ, B_DQ, B_BT, B_BSL = B.HASH, B.SQ, B.DQ, B.BT, B.BSL
local emit, line_end, is_word_byte = lexer.emit, lexer.line_end, lexer.is_word_byte

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
return scan_r

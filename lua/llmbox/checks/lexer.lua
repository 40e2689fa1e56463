-- llmbox.checks.lexer: what the per-language scanners share. A scanner walks the code once and
-- records the byte ranges of comments and string contents as segments; render() turns them into
-- the views the rules read (see llmbox.checks).
--
-- Every helper here moves forward through the code and never scans the same bytes again for the
-- same question, so a scan costs time linear in the code's length whatever the input (one huge
-- line, thousands of comments, unterminated literals). The few searches that could restart from
-- many places (the next U+2028 after a comment, a regular expression that never closes) remember
-- what they found.

local ffi = require "ffi"

local ipairs = ipairs
local select = select
local string_byte = string.byte
local string_sub = string.sub
local string_find = string.find
local string_rep = string.rep
local table_concat = table.concat
local math_min = math.min
local ffi_new, ffi_copy, ffi_fill, ffi_string = ffi.new, ffi.copy, ffi.fill, ffi.string
local bit_band, bit_bor = bit.band, bit.bor

local _M = {}

-- byte values used by the scanners
_M.B = {
    NL = 10, CR = 13, HASH = 35, SQ = 39, DQ = 34, BT = 96, BSL = 92, SLASH = 47, STAR = 42,
    LBRACE = 123, RBRACE = 125, LPAR = 40, RPAR = 41, LBRK = 91, RBRK = 93,
    DOLLAR = 36, COLON = 58, LT = 60, GT = 62, EQ = 61, PCT = 37, SPACE = 32, TAB = 9,
}
local B = _M.B

function _M.is_word_byte(c)
    return c and (c >= 48 and c <= 57 or c >= 65 and c <= 90 or c >= 97 and c <= 122 or c == 95
        or c >= 128)
end

-- A segment collector: kinds[k] is "line" / "block" (comments) or "str" (string contents),
-- covering bytes starts[k]..stops[k]. Scanners emit in increasing order.
function _M.new_segs()
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
_M.emit = emit

-- per-scan state, reset by begin()
local nest = 0
local ls_subject, ls_from, ls_at -- the last search for U+2028/U+2029: from where, found where
local dead_regex                 -- regex scan states known to run into a line end (2 bits a byte)

-- begin(s): called once before scanning s
function _M.begin(s)
    nest = 0
    ls_subject, ls_from, ls_at = s, nil, nil
    dead_regex = nil
end

-- Inside an interpolated field (`${ ... }`, #{ ... }): the brace depth after byte c, or nil
-- when c is the '}' that closes the field.
function _M.field_depth(c, depth)
    if c == B.LBRACE then
        return depth + 1
    elseif c == B.RBRACE then
        return depth > 0 and depth - 1 or nil
    end
    return depth
end

-- space, tab, newline, carriage return: bytes that do not change what a '/' after them means
function _M.is_blank(c)
    return c == 32 or c == 9 or c == 10 or c == 13
end

-- Nested fields (f"{f'{...}'}", `${`${...}`}`) recurse. Real code nests a few levels; past
-- MAX_NEST the rest of the input is left unmarked, i.e. treated as code, which hides nothing.
local MAX_NEST = 100

function _M.nested(fn, s, i, segs, a, b)
    if nest >= MAX_NEST then
        return #s + 1
    end
    nest = nest + 1
    local r = fn(s, i, segs, a, b)
    nest = nest - 1
    return r
end

-- Where a line comment starting at i ends. Python reads a lone "\r" as a line break, and
-- JavaScript also U+2028 and U+2029: "# x\rimport subprocess" runs the import. Ending comments
-- there in every language can only show more code, never hide any. The U+2028 search result is
-- kept while it is still ahead: searching afresh for each comment of a file without one would
-- read the rest of the file each time.
local function line_end(s, i)
    local j = string_find(s, "[\r\n]", i) or #s + 1
    if s ~= ls_subject or ls_from == nil or i < ls_from or i > ls_at then
        ls_subject, ls_from = s, i
        ls_at = string_find(s, "\226\128[\168\169]", i) or #s + 1
    end
    if ls_at < j then
        j = ls_at
    end
    return j - 1
end
_M.line_end = line_end

-- Here-document bodies (shell <<WORD, ruby <<~WORD) start after the line that opened them and
-- are data, recorded as string segments. `strip` is a pattern removed from a body line before it
-- is compared with the terminator (<<- strips tabs, <<~ and <<- in ruby any indentation).
function _M.skip_heredoc_bodies(s, i, n, heredocs, segs)
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

-- after these, a '/' starts a regular expression literal rather than a division
_M.REGEX_AFTER_CHAR = {}
for ch in ("(,=:[!&|?{};+-*%<>~^"):gmatch(".") do
    _M.REGEX_AFTER_CHAR[string_byte(ch)] = true
end
_M.REGEX_AFTER_WORD = { ["return"] = true, ["typeof"] = true, ["case"] = true, ["do"] = true,
    ["else"] = true, ["in"] = true, ["of"] = true, ["new"] = true, ["delete"] = true,
    ["void"] = true, ["throw"] = true, ["instanceof"] = true, ["yield"] = true, ["await"] = true }

-- A regular expression literal /.../ (JavaScript, Ruby). i is on the opening '/'. Returns the
-- position after the closing '/', or nil when the line ends first (then it was a division).
-- The scan's state at a byte is (position, inside [...]); a scan that reaches a state an earlier
-- failed scan passed through fails the same way, so it stops there: every state is walked at
-- most twice (once to fail, once to mark), and a line such as "(/[(/[(/[..." costs linear time,
-- not quadratic. The marks are two bits per byte of the code.
local function regex_walk(s, i, mark)
    local n = #s
    local j = i + 1
    local in_class = false
    while j <= n do
        local bit = in_class and 2 or 1
        if dead_regex and bit_band(dead_regex[j], bit) ~= 0 then
            return nil
        end
        if mark then
            dead_regex[j] = bit_bor(dead_regex[j], bit)
        end
        local c = string_byte(s, j)
        if c == B.BSL then
            j = j + 2
        elseif c == B.NL then
            return nil
        elseif c == B.LBRK then
            in_class = true
            j = j + 1
        elseif c == B.RBRK then
            in_class = false
            j = j + 1
        elseif c == B.SLASH and not in_class then
            return j
        else
            j = j + 1
        end
    end
    return nil
end

function _M.regex_literal(s, i, segs)
    local close = regex_walk(s, i, false)
    if close then
        emit(segs, "str", i + 1, close - 1)
        return close + 1
    end
    if not dead_regex then
        dead_regex = ffi_new("uint8_t[?]", #s + 2)
    end
    regex_walk(s, i, true)
    return nil
end

-- the "strip" view: comments removed, their newlines kept (a different length, so built piece by
-- piece; only strip_comments asks for it)
local function strip(s, segs)
    local out, k = {}, 0
    local pos = 1
    for x = 1, segs.n do
        local kind, a, b = segs.kinds[x], segs.starts[x], segs.stops[x]
        if a > pos then
            k = k + 1
            out[k] = string_sub(s, pos, a - 1)
        end
        local text = string_sub(s, a, b)
        k = k + 1
        if kind == "str" then
            out[k] = text
        else
            local nl = select(2, text:gsub("\n", ""))
            out[k] = nl > 0 and string_rep("\n", nl) or (kind == "block" and " " or "")
        end
        pos = b + 1
    end
    if pos <= #s then
        k = k + 1
        out[k] = string_sub(s, pos)
    end
    return table_concat(out)
end

-- render(s, segs, how) -> the view of s: "blank" (comments become spaces, newlines kept),
-- "code" (comments and string contents become spaces; newlines in strings too, so a statement
-- splitter never ends a statement inside a triple-quoted string) or "strip" (see above).
-- "blank" and "code" keep every position: they are written over a copy of the code in one
-- buffer. (Cutting the code into one Lua string per piece would intern thousands of long,
-- nearly equal strings, which LuaJIT's string table can make quadratic.)
function _M.render(s, segs, how)
    if how == "strip" then
        return strip(s, segs)
    end
    local n = #s
    local buf = ffi_new("uint8_t[?]", n + 1)
    ffi_copy(buf, s, n)
    local kinds, starts, stops = segs.kinds, segs.starts, segs.stops
    for x = 1, segs.n do
        local kind, a, b = kinds[x], starts[x], stops[x]
        if b > n then b = n end
        if kind == "str" then
            if how == "code" and b >= a then
                ffi_fill(buf + a - 1, b - a + 1, 32)
            end
        else
            for i = a - 1, b - 1 do
                if buf[i] ~= 10 then
                    buf[i] = 32
                end
            end
        end
    end
    return ffi_string(buf, n)
end

return _M

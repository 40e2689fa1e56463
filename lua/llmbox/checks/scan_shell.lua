-- llmbox.checks.scan_shell: marks the comments, quoted strings and here-document bodies of
-- POSIX sh, dash and bash code.

local lexer = require "llmbox.checks.lexer"

local string_byte = string.byte
local string_find = string.find

local B = lexer.B
local B_NL, B_HASH, B_SQ, B_DQ, B_BSL, B_DOLLAR = B.NL, B.HASH, B.SQ, B.DQ, B.BSL, B.DOLLAR
local B_LT = B.LT
local emit, line_end, skip_heredoc_bodies = lexer.emit, lexer.line_end, lexer.skip_heredoc_bodies

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
return scan_shell

-- llmbox.checks.fold: Python folds identifiers with NFKC, so `import ｓｕｂｐｒｏｃｅｓｓ` (full-width
-- letters) or `os.𝐬𝐲𝐬𝐭𝐞𝐦(...)` (mathematical bold) are the real thing. fold(s) folds the
-- look-alikes that NFKC maps to ASCII letters, digits and '_'; anything else is left as it is.
-- Newlines are never touched, so line numbers hold.

local ipairs = ipairs
local string_byte = string.byte
local string_char = string.char
local string_find = string.find
local string_lower = string.lower

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

return fold_identifiers

-- llmbox.checks.source: code prepared once for the module finders and the rules.
--
--   source.prepare(code, lang) -> { lang =, text =, code =, line_at = fn(pos), encoding = }
--   source.strip(code, lang)   -> code without comments (newlines kept)
--
-- The scanners mark comment and string-literal byte ranges; from those come two views of the
-- same length as the code: `text`, comments blanked (patterns run on it, so strings still
-- match), and `code`, comments plus string contents blanked (imports are parsed from it, so an
-- "import os" inside a string is not an import). Equal lengths keep every position, and so every
-- line number, the same across views. Python code is first folded (llmbox.checks.fold).

local ipairs = ipairs
local string_find = string.find
local string_lower = string.lower
local math_floor = math.floor

local lexer = require "llmbox.checks.lexer"
local fold_identifiers = require "llmbox.checks.fold"

local _M = {}

local SCANNERS = {
    python = require "llmbox.checks.scan_python",
    shell = require "llmbox.checks.scan_shell",
    ruby = require "llmbox.checks.scan_ruby",
    r = require "llmbox.checks.scan_r",
}
do
    local scan_c_like = require "llmbox.checks.scan_clike"
    for _, lang in ipairs({ "javascript", "java", "cpp", "go" }) do
        SCANNERS[lang] = scan_c_like(lang)
    end
end
_M.scanners = SCANNERS

local function scan(s, lang)
    local segs = lexer.new_segs()
    local scanner = SCANNERS[lang]
    if scanner then
        lexer.begin(s)
        scanner(s, segs)
        lexer.begin(nil) -- drop the memos: they hold positions of this code only
    end
    return segs
end

-- line_at(p): the line of byte position p, by binary search over the newline positions
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

function _M.prepare(code, lang)
    local encoding
    if lang == "python" then
        encoding = python_encoding_problem(code)
        code = fold_identifiers(code)
    end
    local segs = scan(code, lang)
    return {
        lang = lang,
        text = lexer.render(code, segs, "blank"), -- comments blanked, strings kept
        code = lexer.render(code, segs, "code"),  -- comments and string contents blanked
        line_at = new_line_index(code),
        encoding = encoding,
    }
end

function _M.strip(code, lang)
    if not SCANNERS[lang] then
        return code
    end
    return lexer.render(code, scan(code, lang), "strip")
end

return _M

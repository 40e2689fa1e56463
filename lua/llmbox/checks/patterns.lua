-- llmbox.checks.patterns: finding a rule's Lua pattern in the code in time linear in its length.
--
--   patterns.each_match(text, pattern, max, found)   calls found(start) for up to `max` matches
--
-- Lua's matcher backtracks. A pattern such as "curl[^\n]*|%s*sh" retried from every "curl" of a
-- long line without a match reads the rest of the line each time: quadratic. So a pattern is cut
-- at its top-level "bridges" — `[^...]*`, `[^...]-`, `.*` and `.-` — into steps, and the steps
-- are searched forward with memos: step k+1 is the next match at or after step k's end, and it
-- must start before the first byte the bridge cannot cross. Every memo only moves forward while
-- the search does, so each step reads the code about once. (What a step itself costs is up to
-- its author: the shipped rules keep their repetitions from running over their own start.)

local ipairs = ipairs
local string_find = string.find
local string_sub = string.sub
local string_char = string.char
local string_byte = string.byte
local string_format = string.format
local table_concat = table.concat

local _M = {}

local function quote(s)
    return '"' .. s .. '"'
end

-- ---------------------------------------------------------------------------------------------
-- cutting a pattern into steps and bridges

-- the end of the single-character class starting at i ("%a", "[...]", ".", "x"), or nil
local function class_end(p, i)
    local c = string_sub(p, i, i)
    if c == "%" then
        return i + 1
    elseif c == "[" then
        local j = i + 1
        if string_sub(p, j, j) == "^" then j = j + 1 end
        if string_sub(p, j, j) == "]" then j = j + 1 end
        while j <= #p do
            local d = string_sub(p, j, j)
            if d == "%" then
                j = j + 2
            elseif d == "]" then
                return j
            else
                j = j + 1
            end
        end
        return nil
    end
    return i
end

-- split(p) -> { steps = { "p1", "p2", ... }, stops = { nil, "[\n]", ... } } or nil when p has
-- no bridge (or anchors, captures or back-references, which a cut would change). stops[k] is a
-- class of the bytes that may not lie between step k-1 and step k (nil: anything may).
local function split(p)
    if string_sub(p, 1, 1) == "^" then
        return nil
    end
    local steps, stops = {}, {}
    local start, i, n = 1, 1, #p
    while i <= n do
        local c = string_sub(p, i, i)
        local d = string_sub(p, i + 1, i + 1)
        if c == "(" or c == ")" or (c == "%" and (d == "b" or d:match("%d"))) then
            return nil
        end
        local e
        if c == "%" and d == "f" then
            e = class_end(p, i + 2)
        else
            e = class_end(p, i)
        end
        if not e then
            return nil
        end
        local q = string_sub(p, e + 1, e + 1)
        local item = string_sub(p, i, e)
        local bridge = (q == "*" or q == "-") and c ~= "%"
            and (item == "." or (c == "[" and string_sub(item, 2, 2) == "^"))
        if bridge and i > start and e + 1 < n then
            steps[#steps + 1] = string_sub(p, start, i - 1)
            -- what may not be crossed: the bytes the bridge's class leaves out
            stops[#steps + 1] = item ~= "." and ("[" .. string_sub(item, 3)) or nil
            start = e + 2
            i = e + 2
        else
            i = e + 1
            if q == "*" or q == "+" or q == "-" or q == "?" then
                i = i + 1
            end
        end
    end
    if #steps == 0 then
        return nil
    end
    steps[#steps + 1] = string_sub(p, start)
    return { steps = steps, stops = stops }
end
_M.split = split

-- ---------------------------------------------------------------------------------------------
-- what a step may cost: policies are refused at load when a pattern could make checking
-- quadratic, rather than found out on the first long line

-- the items of a pattern without bridges: { text =, quant = "" | "*" | "+" | "-" | "?",
-- frontier = true } (nil for patterns this analysis does not read: captures, %b)
local function items(p)
    local out, i = {}, 1
    while i <= #p do
        local c = string_sub(p, i, i)
        local d = string_sub(p, i + 1, i + 1)
        if c == "(" or c == ")" or (c == "%" and d == "b") then
            return nil
        end
        if (c == "^" and i == 1) or (c == "$" and i == #p) then
            i = i + 1
        else
            local frontier = c == "%" and d == "f"
            local e = class_end(p, frontier and i + 2 or i)
            if not e then
                return nil
            end
            local q = string_sub(p, e + 1, e + 1)
            local quant = (not frontier and (q == "*" or q == "+" or q == "-" or q == "?")) and q or ""
            out[#out + 1] = { text = string_sub(p, frontier and i + 2 or i, e), quant = quant,
                frontier = frontier }
            i = e + 1 + #quant
        end
    end
    return out
end

-- the bytes a single-byte item ("%a", "[^\n]", "x") matches, as a list and a set; remembered,
-- as the shipped rules repeat their classes
local member_cache = {}
local ALL_BYTES = {}
for b = 0, 255 do
    ALL_BYTES[b + 1] = string_char(b)
end
ALL_BYTES = table_concat(ALL_BYTES)

local function members(item)
    local m = member_cache[item]
    if not m then
        local list, set = {}, {}
        -- a lone "$" or "^" is a literal byte here, not an anchor
        for ch in ALL_BYTES:gmatch((item == "$" or item == "^") and "%" .. item or item) do
            local b = string_byte(ch)
            list[#list + 1] = b
            set[b] = true
        end
        m = { list = list, set = set }
        member_cache[item] = m
    end
    return m
end

local function matches(item, byte)
    return members(item).set[byte] == true
end

local SHOWN = { [9] = "\\t", [10] = "\\n", [13] = "\\r", [32] = "a space" }

local function shown(byte)
    if SHOWN[byte] then
        return SHOWN[byte]
    end
    return byte > 32 and byte < 127 and ('"' .. string_char(byte) .. '"') or string_format("byte %d", byte)
end

-- nil, or why searching for step p could read a long run of bytes again from many starts
local function step_problem(p)
    local list = items(p)
    if not list then
        return nil
    end
    local frontier, start = nil, {}
    local k = 1
    while list[k] and list[k].frontier do
        frontier = frontier or list[k].text
        k = k + 1
    end
    -- the bytes a match can start with: the leading items up to the first one that must match
    while list[k] do
        for _, b in ipairs(members(list[k].text).list) do
            start[#start + 1] = b
        end
        if list[k].quant == "" or list[k].quant == "+" then
            break
        end
        k = k + 1
    end
    local last = #list
    while last > 0 and list[last].frontier do
        last = last - 1
    end
    for j = 1, last - 1 do
        local it = list[j]
        if it.quant == "*" or it.quant == "+" or it.quant == "-" then
            local x = it.text .. it.quant
            for _, b in ipairs(start) do
                if matches(it.text, b) then
                    -- inside a run of bytes the leading frontier excludes, no match can start
                    local covered = frontier ~= nil
                    if covered then
                        for _, m in ipairs(members(it.text).list) do
                            if not matches(frontier, m) then
                                covered = false
                                break
                            end
                        end
                    end
                    if not covered then
                        return string_format("%s can also match %s, which starts the pattern, so a "
                            .. "long run of it is read again from every start", quote(x), shown(b))
                    end
                end
            end
            local nx = list[j + 1]
            if nx and not nx.frontier and nx.quant ~= "" and nx.quant ~= "?" then
                for _, b in ipairs(members(nx.text).list) do
                    if matches(it.text, b) then
                        return string_format("%s is followed by %s, and both can match %s, so a long "
                            .. "run of it is split every possible way", quote(x), quote(nx.text .. nx.quant),
                            shown(b))
                    end
                end
            end
        end
    end
    return nil
end

-- cost_problem(p) -> nil, or a sentence saying why p could make checking quadratic and how to fix it
local cost_cache = {}

function _M.cost_problem(p)
    local known = cost_cache[p]
    if known ~= nil then
        return known or nil
    end
    local why = false
    local chain = split(p)
    for _, step in ipairs(chain and chain.steps or { p }) do
        local step_why = step_problem(step)
        if step_why then
            why = "could take time quadratic in the code's length: " .. step_why .. "; narrow the "
                .. "class, start the pattern with a frontier such as %f[%w_] that the class stays "
                .. "inside, or bridge the parts with [^...]* (searched part by part)"
            break
        end
    end
    cost_cache[p] = why
    return why or nil
end

-- ---------------------------------------------------------------------------------------------
-- a fast first look: most patterns start with a literal word ("%f[%w_]system%s*%(" with
-- "system"), and a plain search for it runs at memchr speed while Lua's matcher tries its
-- frontier and classes at every byte. Every match starts with that literal, so checking the
-- pattern, anchored, at each place the literal occurs finds the same leftmost match.

local MAGIC = { ["^"] = true, ["$"] = true, ["*"] = true, ["+"] = true, ["-"] = true, ["?"] = true,
    ["."] = true, ["("] = true, [")"] = true, ["["] = true, ["]"] = true, ["%"] = true }

-- the literal every match of p starts with (after zero-width frontiers), or nil
local function leading_literal(p)
    if string_sub(p, 1, 1) == "^" then
        return nil
    end
    local i = 1
    while string_sub(p, i, i + 1) == "%f" do
        local e = class_end(p, i + 2)
        if not e then
            return nil
        end
        i = e + 1
    end
    local lit = {}
    while i <= #p do
        local c = string_sub(p, i, i)
        local width = 1
        if c == "%" then
            c = string_sub(p, i + 1, i + 1)
            if c == "" or c:match("%w") then
                break -- a class such as %a, or a back-reference
            end
            width = 2
        elseif MAGIC[c] then
            break
        end
        local q = string_sub(p, i + width, i + width)
        if q == "*" or q == "-" or q == "?" then
            break -- optional: not part of every match
        end
        lit[#lit + 1] = c
        if q == "+" then
            break
        end
        i = i + width
    end
    if #lit == 0 then
        return nil
    end
    return table_concat(lit)
end
_M.leading_literal = leading_literal

-- finder(pat) -> find(text, init): the same answer as string.find(text, pat, init) (two
-- captures at most)
local function finder(pat)
    local lit = leading_literal(pat)
    if not lit then
        return function(text, init)
            return string_find(text, pat, init)
        end
    end
    local anchored = "^" .. pat
    return function(text, init)
        while true do
            local c = string_find(text, lit, init, true)
            if not c then
                return nil
            end
            local s, e, c1, c2 = string_find(text, anchored, c)
            if s then
                return s, e, c1, c2
            end
            init = c + 1
        end
    end
end
_M.finder = finder

-- ---------------------------------------------------------------------------------------------
-- searching

-- next(x) -> s, e of the first match of pat starting at or after x; remembered while the
-- question stays between the last start and the match found (the answer is then the same)
local function forward_search(text, pat)
    local find = finder(pat)
    local from, s, e
    return function(x)
        if from == nil or x < from or (s and x > s) then
            from = x
            s, e = find(text, x)
        end
        return s, e
    end
end

-- each_match(text, pattern, max, found): found(start) for each match, left to right, at most max
function _M.each_match(text, pat, max, found)
    local count = 0
    local chain = split(pat)
    if not chain then
        local find = finder(pat)
        local init = 1
        while count < max do
            local s, e = find(text, init)
            if not s then
                return
            end
            found(s)
            count = count + 1
            if string_sub(pat, 1, 1) == "^" then
                return -- anchored: it can only match at the start
            end
            init = (e >= s and e or s) + 1
        end
        return
    end
    local steps, stops = chain.steps, chain.stops
    local nexts, walls = {}, {}
    for k = 1, #steps do
        nexts[k] = forward_search(text, steps[k])
        walls[k] = stops[k] and forward_search(text, stops[k])
    end
    local init = 1
    while count < max do
        local s1, e = nexts[1](init)
        if not s1 then
            return
        end
        local ok = true
        for k = 2, #steps do
            local sk, ek = nexts[k](e + 1)
            local wall = walls[k] and walls[k](e + 1)
            if not sk or (wall and sk > wall) then
                ok = false
                break
            end
            e = ek
        end
        if ok then
            found(s1)
            count = count + 1
            init = e + 1
        else
            init = s1 + 1
        end
    end
end

return _M

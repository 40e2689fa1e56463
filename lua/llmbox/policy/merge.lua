-- llmbox.policy.merge: a child policy over its parent, so that inheriting never loosens by
-- accident.
--
--   merge.over(parent, child, spec, parent_label) -> merged | nil, err
--
-- `parent` is a normalised policy (the one named by `extends`, or the built-in defaults for a
-- file without `extends`); `child` is the file's table as written; `spec` the policy schema
-- (llmbox.policy.schema), which says what each list means. The rules:
--   * records and maps merge key by key; any other value in the child replaces the parent's;
--   * a plain list in the child is exactly the list it reads as. For a list of security rules
--     (spec `inherit = "keep"`: syscalls.deny, syscalls.deny_ioctls, checks patterns and
--     restricted_modules) it must keep every entry of the parent's, as strict as it was: a plain
--     list that leaves one out or weakens it is refused. Other lists grant things (mounts,
--     variables let through, allowed syscalls), so a plain list there may leave entries out: that
--     only tightens, and whatever it adds is written in the child;
--   * explicit forms, for any list:
--       { append = { ... } }                   the parent's entries, then these
--       { remove = { "name", ... } }           the parent's entries without these
--       { remove = { ... }, append = { ... } } both (remove first): e.g. to restate a rule
--       { replace = { ... } }                  exactly these, whatever the parent had
--     Entries are named by their `id` (pattern rules), `name` (modules), path inside (mounts) or
--     themselves (syscall, ioctl and variable names). In a list of rules, an appended entry
--     whose name the list already has replaces that entry, if it is not weaker.

local schema = require "llmbox.schema"

local type = type
local pairs = pairs
local ipairs = ipairs
local next = next
local error = error
local table_concat = table.concat
local math_min = math.min

local quote = schema.quote
local deep_copy = schema.deep_copy
local join = schema.join

local _M = {}

local FORM_KEYS = { append = true, remove = true, replace = true }

-- an entry's name: its id (pattern rules), name (modules), path inside (mounts), or itself
local function entry_key(v)
    if type(v) == "string" then
        return v
    elseif type(v) == "table" then
        local k = v.id or v.name or v.dst or v.src
        return type(k) == "string" and k or nil
    end
    return nil
end

-- a table with string keys only: an explicit form (or a mistake the caller reports)
local function is_form(t)
    return type(t) == "table" and next(t) ~= nil and t[1] == nil and type(next(t)) == "string"
end

-- the last field name of a path, for examples: "checks.rules.python.patterns" -> "patterns"
local function field(path)
    return path:match("([%a_][%w_]*)$") or path
end

local function names(list, max)
    local q = {}
    for i = 1, math_min(#list, max) do
        q[i] = quote(list[i])
    end
    local more = #list > max and (" and " .. (#list - max) .. " more") or ""
    return table_concat(q, ", ") .. more
end

local function example_entry(entries)
    local first = entries and entries[1]
    return type(first) == "string" and quote(first) or "..."
end

local HOW = "to add to them write %s = { append = { %s } }; to drop some on "
    .. "purpose write %s = { remove = { %s } }; to state the whole list write %s = { replace = { ... } }"

local function how(path, added, dropped)
    local f = field(path)
    return HOW:format(f, added, f, dropped, f)
end

-- the parent's entries, as { keys = { k, ... }, by = { k = entry } }
local function index(list)
    local keys, by = {}, {}
    for _, v in ipairs(type(list) == "table" and list or {}) do
        local k = entry_key(v)
        if k and by[k] == nil then
            keys[#keys + 1] = k
            by[k] = v
        end
    end
    return { keys = keys, by = by }
end

-- nil, or why `child` would loosen the inherited rule `parent` (same name)
local function weakened(spec, parent, child)
    if spec.weaker then
        return spec.weaker(parent, child)
    end
    return nil
end

-- a plain list for a list of rules: refused when it drops or weakens an inherited entry
local function check_kept(spec, base, child, path, parent_label)
    local have = index(base)
    if #have.keys == 0 then
        return true
    end
    local mine = index(child)
    local dropped = {}
    for _, k in ipairs(have.keys) do
        if mine.by[k] == nil then
            dropped[#dropped + 1] = k
        end
    end
    if #dropped > 0 then
        return nil, path .. ": this list leaves out " .. names(dropped, 5) .. ", inherited from "
            .. parent_label .. ", and a plain list may not drop inherited rules; "
            .. how(path, example_entry(child), quote(dropped[1]))
    end
    for _, k in ipairs(have.keys) do
        local why = weakened(spec, have.by[k], mine.by[k])
        if why then
            return nil, path .. ": " .. quote(k) .. " " .. why .. " than in " .. parent_label
                .. ", and a plain list may not weaken inherited rules; to change it on "
                .. "purpose write " .. field(path) .. " = { remove = { " .. quote(k)
                .. " }, append = { ... } } or " .. field(path) .. " = { replace = { ... } }"
        end
    end
    return true
end

-- the child's own entries are checked where it wrote them, so an error points at its text
-- ("syscalls.deny.append[2]") rather than at a position in the merged list
local function check_entries(spec, list, path)
    if spec.of == nil then
        return true
    end
    for i, v in ipairs(list) do
        local _, err = schema.check(v, spec.of, join(path, i))
        if err then
            return nil, err
        end
    end
    return true
end

local function apply_form(spec, base, form, path, parent_label)
    for k, v in pairs(form) do
        if not FORM_KEYS[k] then
            local near = schema.suggest(k, { "append", "remove", "replace" })
            return nil, join(path, k) .. ": unknown key" .. (near and (" (did you mean " .. quote(near) .. "?)") or "")
                .. "; a list is written { ... }, or as { append = { ... } }, { remove = { ... } } "
                .. "or { replace = { ... } }"
        end
        if type(v) ~= "table" or (next(v) ~= nil and v[1] == nil) then
            return nil, join(path, k) .. ": expected a list (a table such as { \"a\", \"b\" }), got "
                .. schema.describe_value(v)
        end
    end
    for _, k in ipairs({ "append", "replace" }) do
        local ok, err = check_entries(spec, form[k] or {}, join(path, k))
        if not ok then
            return nil, err
        end
    end
    if form.replace then
        if form.append or form.remove then
            return nil, path .. ": replace states the whole list, so it cannot be combined with "
                .. "append or remove"
        end
        return deep_copy(form.replace)
    end
    local out = {}
    for _, v in ipairs(type(base) == "table" and base or {}) do
        out[#out + 1] = deep_copy(v)
    end
    if form.remove then
        local have = index(out)
        local gone = {}
        for i, r in ipairs(form.remove) do
            local k = entry_key(r)
            if k == nil or have.by[k] == nil then
                local near = k and schema.suggest(k, have.keys)
                return nil, join(join(path, "remove"), i) .. ": " .. (k and quote(k) or schema.describe_value(r))
                    .. " is not in the list inherited from " .. parent_label
                    .. (near and (" (did you mean " .. quote(near) .. "?)") or "")
            end
            gone[k] = true
        end
        local kept = {}
        for _, v in ipairs(out) do
            if not gone[entry_key(v)] then
                kept[#kept + 1] = v
            end
        end
        out = kept
    end
    for _, v in ipairs(form.append or {}) do
        local k = spec.inherit == "keep" and entry_key(v)
        local at
        if k then
            for i, x in ipairs(out) do
                if entry_key(x) == k then
                    at = i
                    break
                end
            end
        end
        if at then
            local why = weakened(spec, out[at], v)
            if why then
                return nil, join(path, "append") .. ": " .. quote(k) .. " " .. why .. " than in "
                    .. parent_label .. "; to weaken it on purpose remove it first: "
                    .. field(path) .. " = { remove = { " .. quote(k) .. " }, append = { ... } }"
            end
            out[at] = deep_copy(v)
        else
            out[#out + 1] = deep_copy(v)
        end
    end
    return out
end

local function normalise_spec(spec)
    if type(spec) == "string" then
        return { type = spec }
    end
    return spec
end

local function merge(base, child, spec, path, parent_label)
    spec = normalise_spec(spec)
    if child == nil then
        return deep_copy(base)
    end
    if type(child) ~= "table" or spec == nil then
        return deep_copy(child) -- the schema check that follows reports what is wrong
    end
    local t = spec.type
    if t == "record" or t == "map" then
        -- the parent's keys the child leaves alone are copied once; the others are merged from
        -- the parent's own value, which merge only reads (copying it first cost every level a
        -- copy of everything below it)
        base = type(base) == "table" and base or nil
        local out = {}
        for k, v in pairs(base or {}) do
            if child[k] == nil then out[k] = deep_copy(v) end
        end
        for k, v in pairs(child) do
            local sub = t == "record" and spec.fields[k] or (t == "map" and spec.of) or nil
            local m, err = merge(base and base[k], v, sub, join(path, k), parent_label)
            if err then
                return nil, err
            end
            out[k] = m
        end
        return out
    elseif t == "array" then
        if is_form(child) then
            return apply_form(spec, base, child, path, parent_label)
        end
        local ok, err = check_entries(spec, child, path)
        if not ok then
            return nil, err
        end
        if spec.inherit == "keep" then
            ok, err = check_kept(spec, base, child, path, parent_label)
            if not ok then
                return nil, err
            end
        end
        return deep_copy(child)
    end
    return deep_copy(child)
end

function _M.over(parent, child, spec, parent_label)
    if type(child) ~= "table" then
        error("merge.over: child must be a table, got " .. type(child), 2)
    end
    return merge(parent, child, spec, "", parent_label or "the parent policy")
end


return _M

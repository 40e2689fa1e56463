-- llmbox.policy: loads security policies — Lua files that return a table — checks them against a
-- schema and returns the normalised table the C core and the session code consume.
--
--   local policy = require "llmbox.policy"
--   local p, err = policy.load("default")          -- a name, looked up in policy.dirs()
--   local p, err = policy.load("./mine.lua")       -- or a path (contains "/" or ends in ".lua")
--
-- Inheritance: `extends = "default"` starts from that policy (fully loaded and normalised), then
-- merges this file over it:
--   * records and maps (tables with string keys) merge key by key, recursively;
--   * a list in the child replaces the parent's list, unless the child writes
--     `{ append = { ... } }`, which adds to the end of the parent's list;
--   * any other value replaces the parent's; `description` is never inherited.
-- An `extends` name is looked up like policy.load() does, skipping the extending file itself (so a
-- `default.lua` early in LLMBOX_POLICY_PATH may extend the shipped "default"); a relative path is
-- relative to the extending file's directory.
--
-- Policy files run in an empty environment (no io, os.execute, require, load, debug, pcall,
-- coroutine, setmetatable) under an instruction-count hook, so a typo cannot touch the host and an
-- endless loop fails after _M.load_timeout seconds instead of hanging the caller.

local ffi = require "ffi"
local schema = require "llmbox.schema"

local type = type
local pairs = pairs
local ipairs = ipairs
local tostring = tostring
local select = select
local next = next
local error = error
local assert = assert
local unpack = unpack
local pcall = pcall
local setfenv = setfenv
local loadfile = loadfile
local io_open = io.open
local os_getenv = os.getenv
local os_clock = os.clock
local debug_sethook = debug.sethook
local debug_gethook = debug.gethook
local debug_getinfo = debug.getinfo
local jit_off = jit and jit.off
local table_concat = table.concat
local table_sort = table.sort
local string_format = string.format
local string_find = string.find

local quote = schema.quote
local deep_copy = schema.deep_copy

local _M = { _VERSION = "0.1.0" }

-- how long a policy file may run; policies are a few dozen lines, a second is generous
_M.load_timeout = 1

-- how deep `extends` chains may go before we call it a mistake
local MAX_EXTENDS_DEPTH = 16

-- ---------------------------------------------------------------------------------------------
-- tiny filesystem helpers (libc through the FFI: no rocks beyond lua-cjson are allowed)

-- pcall: another module may already have declared these; redeclaring raises
pcall(ffi.cdef, "void *opendir(const char *name);")
pcall(ffi.cdef, "void *readdir(void *dirp);")
pcall(ffi.cdef, "int closedir(void *dirp);")
pcall(ffi.cdef, "char *realpath(const char *path, char *resolved_path);")
pcall(ffi.cdef, "void free(void *ptr);")
-- glibc's struct dirent on LP64 Linux (x86_64, aarch64): only the name's offset matters to us
pcall(ffi.cdef, [[
struct llmbox_dirent {
    uint64_t d_ino; int64_t d_off; unsigned short d_reclen; unsigned char d_type; char d_name[256];
};
]])
local C = ffi.C
local dirent_ptr = ffi.typeof("struct llmbox_dirent *")

local function realpath(p)
    local r = C.realpath(p, nil)
    if r == nil then
        return nil
    end
    local s = ffi.string(r)
    C.free(r)
    return s
end

local function is_dir(p)
    local d = C.opendir(p)
    if d == nil then
        return false
    end
    C.closedir(d)
    return true
end

local function is_file(p)
    local f = io_open(p, "r")
    if not f then
        return false
    end
    f:close()
    -- io.open succeeds on directories too
    return not is_dir(p)
end

local function list_dir(p)
    local d = C.opendir(p)
    if d == nil then
        return {}
    end
    local names = {}
    while true do
        local e = C.readdir(d)
        if e == nil then
            break
        end
        names[#names + 1] = ffi.string(ffi.cast(dirent_ptr, e).d_name)
    end
    C.closedir(d)
    table_sort(names)
    return names
end

local function dirname(p)
    return p:match("^(.*)/[^/]*$") or "."
end

local function basename(p)
    return p:match("([^/]*)$")
end

-- ---------------------------------------------------------------------------------------------
-- the schema: this is the contract with the C core and the session code

local DEFAULT_LIMITS = {
    timeout = 30,
    cpu = 30,
    memory = 512 * 1024 * 1024,
    processes = 64,
    open_files = 256,
    file_size = 64 * 1024 * 1024,
    output = 1024 * 1024,
    workspace = 256 * 1024 * 1024,
    tmp = 64 * 1024 * 1024,
}

-- what a policy that says nothing gets: the same as policies/default.lua (a spec checks that),
-- so forgetting `extends` never silently weakens the jail
local DEFAULT_RO = {
    { src = "/usr", dst = "/usr", optional = false },
    { src = "/etc/ld.so.cache", dst = "/etc/ld.so.cache", optional = true },
    { src = "/etc/localtime", dst = "/etc/localtime", optional = true },
    { src = "/etc/alternatives", dst = "/etc/alternatives", optional = true },
    { src = "/etc/ssl/certs", dst = "/etc/ssl/certs", optional = true },
}

local DEFAULT_DENY = {
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "open_by_handle_at", "name_to_handle_at", "quotactl", "fanotify_init",
    "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "personality",
}

local DEFAULT_ENV_SET = { PATH = "/usr/local/bin:/usr/bin:/bin", HOME = "/sandbox", LANG = "C.UTF-8" }

_M.defaults = {
    limits = DEFAULT_LIMITS,
    ro = DEFAULT_RO,
    deny = DEFAULT_DENY,
    env_set = DEFAULT_ENV_SET,
}

local ABS_PATH = {
    type = "string",
    pattern = "^/[^%z]*$",
    pattern_desc = 'an absolute path such as "/usr"',
    finish = function(p)
        if ("/" .. p .. "/"):find("/%.%.?/") then
            return nil, 'must not contain "." or ".." components, got ' .. quote(p)
        end
        return p
    end,
}

local MOUNT = {
    type = "record",
    describe = 'a path such as "/usr" or a table { src = "/host/path", dst = "/path/inside", optional = true }',
    coerce = function(v)
        if type(v) == "string" then
            return { src = v }
        end
        return v
    end,
    fields = {
        src = { type = "string", required = true, pattern = ABS_PATH.pattern,
            pattern_desc = ABS_PATH.pattern_desc, finish = ABS_PATH.finish },
        dst = ABS_PATH,
        optional = { type = "boolean", default = false },
    },
    finish = function(m)
        if m.dst == nil then
            m.dst = m.src
        end
        if m.src == "/" or m.dst == "/" then
            return nil, 'binding "/" would expose or hide the whole filesystem; '
                .. "list only the directories programs need, such as /usr"
        end
        return m
    end,
}

local ENV_NAME = { type = "string", pattern = "^[%a_][%w_]*$",
    pattern_desc = 'an environment variable name such as "PATH" (letters, digits and _)' }

local SYSCALL = { type = "string", pattern = "^[a-z0-9_]+$",
    pattern_desc = 'a syscall name such as "mount" (lower-case letters, digits and _)' }

local SEVERITY = { type = "enum", values = { "low", "medium", "high", "critical" } }

-- Lua reports a malformed pattern only when matching reaches the bad part, so check the syntax
-- up front: a policy must not load fine and then blow up on the first piece of code it checks
local function lua_pattern_error(p)
    local i, n, depth = 1, #p, 0
    while i <= n do
        local c = p:sub(i, i)
        if c == "%" then
            local d = p:sub(i + 1, i + 1)
            if d == "" then
                return "ends with '%'"
            elseif d == "b" then
                if i + 3 > n then
                    return "missing arguments to '%b'"
                end
                i = i + 4
            elseif d == "f" then
                if p:sub(i + 2, i + 2) ~= "[" then
                    return "missing '[' after '%f'"
                end
                i = i + 2
            else
                i = i + 2
            end
        elseif c == "[" then
            local j = i + 1
            if p:sub(j, j) == "^" then j = j + 1 end
            if p:sub(j, j) == "]" then j = j + 1 end -- a leading ']' is literal
            while true do
                local e = p:sub(j, j)
                if e == "" then
                    return "missing ']'"
                elseif e == "%" then
                    if j + 1 > n then
                        return "ends with '%'"
                    end
                    j = j + 2
                elseif e == "]" then
                    break
                else
                    j = j + 1
                end
            end
            i = j + 1
        elseif c == "(" then
            depth = depth + 1
            i = i + 1
        elseif c == ")" then
            depth = depth - 1
            if depth < 0 then
                return "unmatched ')'"
            end
            i = i + 1
        else
            i = i + 1
        end
    end
    if depth > 0 then
        return "unfinished capture"
    end
    local ok, err = pcall(string_find, "", p)
    if not ok then
        return err
    end
    return nil
end
_M.lua_pattern_error = lua_pattern_error

local LUA_PATTERN = {
    type = "string",
    describe = 'a Lua pattern such as "os%.system%s*%("',
    finish = function(p)
        local err = lua_pattern_error(p)
        if err then
            return nil, "invalid Lua pattern " .. quote(p) .. ": " .. err
                .. " (escape magic characters ( ) . % + - * ? [ ] ^ $ with %)"
        end
        return p
    end,
}

local PATTERN_RULE = {
    type = "record",
    fields = {
        id = { type = "string", required = true, pattern = "^[%w_%-%.:]+$",
            pattern_desc = 'a rule id such as "os-system" (letters, digits, - _ . :)' },
        pattern = LUA_PATTERN,
        patterns = { type = "array", of = LUA_PATTERN },
        severity = { type = "enum", values = SEVERITY.values, default = "high" },
        message = { type = "string" },
    },
    finish = function(r)
        if (r.pattern == nil) == (r.patterns == nil) then
            return nil, 'needs exactly one of "pattern" (a Lua pattern) or "patterns" (a list of them)'
        end
        if r.patterns and #r.patterns == 0 then
            return nil, '"patterns" is empty: give at least one Lua pattern'
        end
        if r.message == nil then
            r.message = "matches rule " .. r.id
        end
        return r
    end,
}

local RESTRICTED_MODULE = {
    type = "record",
    describe = 'a module name such as "subprocess" or a table { name = "subprocess", severity = "high" }',
    coerce = function(v)
        if type(v) == "string" then
            return { name = v }
        end
        return v
    end,
    fields = {
        name = { type = "string", required = true, pattern = "^[%w_%.%-@/:]+$",
            pattern_desc = 'a module name such as "subprocess" or "os.path"' },
        severity = { type = "enum", values = SEVERITY.values, default = "high" },
        message = { type = "string" },
    },
}

local LANG_RULES = {
    type = "record",
    fields = {
        patterns = { type = "array", of = PATTERN_RULE, default = {} },
        restricted_modules = { type = "array", of = RESTRICTED_MODULE, default = {} },
    },
}

local POLICY = {
    type = "record",
    fields = {
        description = { type = "string", default = "" },
        extends = { type = "string", describe = 'the name or path of a policy, such as "default"' },
        limits = {
            type = "record",
            fields = {
                timeout = { type = "duration", default = DEFAULT_LIMITS.timeout },
                cpu = { type = "duration", default = DEFAULT_LIMITS.cpu },
                -- below ~16M no interpreter starts; say so now rather than at the first run
                memory = { type = "size", default = DEFAULT_LIMITS.memory, min = 16 * 1024 * 1024 },
                processes = { type = "integer", default = DEFAULT_LIMITS.processes, min = 1 },
                -- stdin/stdout/stderr plus what a dynamic loader and an interpreter open at start
                open_files = { type = "integer", default = DEFAULT_LIMITS.open_files, min = 16 },
                file_size = { type = "size", default = DEFAULT_LIMITS.file_size },
                output = { type = "size", default = DEFAULT_LIMITS.output },
                -- a tmpfs with size=0 is *unlimited*, so zero must never reach the C core
                workspace = { type = "size", default = DEFAULT_LIMITS.workspace, min = 64 * 1024 },
                tmp = { type = "size", default = DEFAULT_LIMITS.tmp, min = 64 * 1024 },
                -- a CPU quota in CPUs (0.5: half of one CPU's time); absent: none. Enforced by
                -- the run's cpu cgroup; where none can be had, runs are refused, never unbounded
                cpus = { type = "number", min = 0.01, max = 1024 },
                -- "require": refuse to run where no cgroup can enforce memory and processes
                -- (rlimits would still bound them, but less exactly and without reporting)
                cgroup = { type = "enum", values = { "auto", "require" }, default = "auto" },
            },
        },
        filesystem = {
            type = "record",
            fields = {
                ro = { type = "array", of = MOUNT, default = DEFAULT_RO },
            },
        },
        network = {
            type = "record",
            fields = {
                mode = { type = "enum", values = { "none" }, default = "none",
                    hint = 'only "none" (loopback only) is supported by this version' },
            },
        },
        -- Library installs (run{libraries=}, s:install{}): off unless a policy allows them.
        -- An install runs the package manager in the session's jail as the sandbox user, with
        -- the host's network when `network` is true (and only for the install), writing only to
        -- the workspace. Offline sources are host directories (mounted read-only) or URLs.
        libraries = {
            type = "record",
            fields = {
                allow = { type = "boolean", default = false },
                network = { type = "boolean", default = false },
                timeout = { type = "duration", default = 300 },
                sources = {
                    type = "record",
                    fields = {
                        -- pip: directories of wheels (--no-index --find-links) or an index URL
                        python = { type = "record", fields = {
                            find_links = { type = "array", of = "string", default = {} },
                            index_url = "string",
                        } },
                        -- npm: a registry URL
                        javascript = { type = "record", fields = { registry = "string" } },
                        -- gem: a source URL
                        ruby = { type = "record", fields = { source = "string" } },
                        -- install.packages: a CRAN mirror URL or a local repository directory
                        r = { type = "record", fields = { repos = "string" } },
                    },
                },
            },
        },
        env = {
            type = "record",
            fields = {
                set = { type = "map", key = ENV_NAME, of = "string", default = DEFAULT_ENV_SET },
                pass = { type = "array", of = ENV_NAME, default = { "TZ" } },
            },
        },
        syscalls = {
            type = "record",
            fields = {
                default = { type = "enum", values = { "allow", "deny" }, default = "allow" },
                action = { type = "enum", values = { "errno", "kill" }, default = "errno" },
                deny = { type = "array", of = SYSCALL, default = DEFAULT_DENY },
                allow = { type = "array", of = SYSCALL, default = {} },
                deny_namespace_clone = { type = "boolean", default = true },
                deny_ioctls = { type = "array", default = { "TIOCSTI", "TIOCLINUX" },
                    of = { type = "enum", values = { "TIOCSTI", "TIOCLINUX", "TIOCSETD", "TIOCCONS" } } },
            },
            finish = function(s)
                if s.default == "deny" and #s.allow == 0 then
                    return nil, 'default is "deny" but allow is empty, so no program could start; '
                        .. 'list the syscalls programs need in allow, or set default = "allow"'
                end
                return s
            end,
        },
        checks = {
            type = "record",
            fields = {
                mode = { type = "enum", values = { "enforce", "warn", "off" }, default = "enforce" },
                threshold = { type = "enum", values = SEVERITY.values, default = "high" },
                rules = { type = "map", of = LANG_RULES, default = {} },
            },
        },
    },
}
_M.schema = POLICY

-- ---------------------------------------------------------------------------------------------
-- where policies live

-- resolved once, at require time: package.path entries are often relative ("lua/?.lua") and
-- would point elsewhere after a chdir
local MODULE_DIR
do
    local src = debug_getinfo(1, "S").source
    if src:sub(1, 1) == "@" then
        local d = dirname(src:sub(2))
        MODULE_DIR = realpath(d) or d
    end
end

local function env_lookup(env)
    if env == nil then
        return os_getenv
    elseif type(env) == "function" then
        return env
    elseif type(env) == "table" then
        return function(k) return env[k] end
    end
    error("policy.dirs: env must be nil, a function or a table, got " .. type(env), 3)
end

-- dirs([env]) -> array of existing directories, in search order, without duplicates
function _M.dirs(env)
    local getenv = env_lookup(env)
    local candidates = {}
    local p = getenv("LLMBOX_POLICY_PATH")
    if type(p) == "string" then
        for entry in p:gmatch("[^:]+") do
            candidates[#candidates + 1] = entry
        end
    end
    local mdir = MODULE_DIR
    if mdir then
        candidates[#candidates + 1] = mdir .. "/../../policies"         -- repository layout
        candidates[#candidates + 1] = mdir .. "/../../../llmbox/policies" -- $PREFIX/share/llmbox
        candidates[#candidates + 1] = mdir .. "/policies"                 -- a LuaRocks tree
    end
    local out, seen = {}, {}
    for _, c in ipairs(candidates) do
        local r = realpath(c)
        if r and not seen[r] and is_dir(r) then
            seen[r] = true
            out[#out + 1] = r
        end
    end
    return out
end

local function is_path(s)
    return s:find("/", 1, true) ~= nil or s:sub(-4) == ".lua"
end

local function names_in(dirs)
    local names, seen = {}, {}
    for _, d in ipairs(dirs) do
        for _, f in ipairs(list_dir(d)) do
            local n = f:match("^(.+)%.lua$")
            if n and not seen[n] and is_file(d .. "/" .. f) then
                seen[n] = true
                names[#names + 1] = n
            end
        end
    end
    table_sort(names)
    return names
end

local function not_found(name, dirs)
    local names = names_in(dirs)
    local msg = "no policy named " .. quote(name)
    local near = schema.suggest(name, names)
    if near then
        msg = msg .. " (did you mean " .. quote(near) .. "?)"
    end
    if #dirs == 0 then
        msg = msg .. "; no policy directory exists (set LLMBOX_POLICY_PATH to a directory of .lua files)"
    else
        msg = msg .. "; searched " .. table_concat(dirs, ", ")
    end
    if #names > 0 then
        msg = msg .. "; available: " .. table_concat(names, ", ")
    end
    return nil, msg
end

-- resolve(name_or_path [, relative_to_dir [, skip_path]]) -> path, name | nil, err
local function resolve(what, base_dir, skip)
    if is_path(what) then
        local p = what
        if p:sub(1, 1) ~= "/" and base_dir then
            p = base_dir .. "/" .. p
        end
        local r = realpath(p)
        if not r or not is_file(r) then
            return nil, "policy file not found: " .. p
        end
        return r, (basename(r):gsub("%.lua$", ""))
    end
    if what == "" then
        return nil, "policy name is empty; give a name such as \"default\" or a path to a .lua file"
    end
    local dirs = _M.dirs()
    for _, d in ipairs(dirs) do
        local p = d .. "/" .. what .. ".lua"
        if is_file(p) then
            local r = realpath(p) or p
            if r ~= skip then
                return r, what
            end
        end
    end
    return not_found(what, dirs)
end

-- ---------------------------------------------------------------------------------------------
-- running a policy file

local function shallow_copy(t, drop)
    local c = {}
    for k, v in pairs(t) do
        if not (drop and drop[k]) then
            c[k] = v
        end
    end
    return c
end

-- what a policy file can see. Enough to compute values (string formatting, math, reading an
-- environment variable the operator set); nothing that writes files, runs programs, loads code,
-- escapes the hook (coroutines run without it, pcall could swallow it) or changes metatables.
local function sandbox_env()
    return {
        string = shallow_copy(string, { dump = true }),
        table = shallow_copy(table),
        math = shallow_copy(math),
        os = { getenv = os_getenv, time = os.time, date = os.date },
        tostring = tostring, tonumber = tonumber, type = type,
        ipairs = ipairs, pairs = pairs, next = next, select = select, unpack = unpack,
        error = error, assert = assert,
    }
end

-- raised by the hook; a string, so that it reads well should it ever surface
local TIMEOUT = "llmbox.policy: policy file timed out"

local function run_file(path)
    local chunk, err = loadfile(path)
    if not chunk then
        return nil, "syntax error: " .. tostring(err)
    end
    setfenv(chunk, sandbox_env())
    -- compiled traces do not call hooks; with the JIT off for this chunk (and every function
    -- defined in it) the count hook always fires
    if jit_off then
        jit_off(chunk, true)
    end
    local source = "@" .. path
    local limit = _M.load_timeout
    local start = os_clock()
    local old_hook, old_mask, old_count = debug_gethook()
    -- The hook may also fire in our own code just before it is removed: it only raises while
    -- the policy file's own code is running (the file has no pcall, so the error unwinds
    -- straight to ours).
    debug_sethook(function()
        if os_clock() - start > limit then
            local info = debug_getinfo(2, "S")
            if info and info.source == source then
                error(TIMEOUT, 0)
            end
        end
    end, "", 1000)
    local ok, ret = pcall(chunk)
    if old_hook then
        debug_sethook(old_hook, old_mask, old_count)
    else
        debug_sethook()
    end
    if not ok then
        if ret == TIMEOUT then
            return nil, string_format("the file did not finish within %gs (an endless loop?)", limit)
        end
        return nil, "the file raised an error: " .. tostring(ret)
    end
    if type(ret) ~= "table" then
        return nil, "the file must return a table such as "
            .. "return { description = \"...\", limits = { memory = \"512M\" } }, got "
            .. schema.describe_value(ret)
    end
    return ret
end

-- Other operator files (pool policies) are run the same way: no io, no os.execute, a time limit.
_M.run_file = run_file

-- ---------------------------------------------------------------------------------------------
-- merging a child over its parent

local function is_append(t)
    return type(t) == "table" and type(t.append) == "table" and next(t, next(t)) == nil
        and next(t) == "append"
end

local function is_list(t)
    return type(t) == "table" and next(t) ~= nil and t[1] ~= nil
end

local function merge(base, child)
    if type(child) ~= "table" then
        return deep_copy(child)
    end
    if is_append(child) then
        local out = {}
        if is_list(base) then
            for _, v in ipairs(base) do out[#out + 1] = deep_copy(v) end
        elseif type(base) == "table" and next(base) ~= nil then
            return deep_copy(child) -- not a list: leave "append" for the schema to report
        end
        for _, v in ipairs(child.append) do out[#out + 1] = merge(nil, v) end
        return out
    end
    if type(base) ~= "table" or is_list(base) then
        base = nil -- lists and scalars are replaced
    end
    local out = base and deep_copy(base) or {}
    for k, v in pairs(child) do
        out[k] = merge(out[k], v)
    end
    return out
end
_M.merge = merge

-- ---------------------------------------------------------------------------------------------
-- loading

local function label(name, path)
    return "policy " .. quote(name) .. " (" .. path .. ")"
end

local load_resolved -- forward

local function normalise(raw, name, path, stack)
    local merged
    if raw.extends ~= nil then
        local ext = raw.extends
        if type(ext) ~= "string" then
            return nil, "extends: expected the name or path of a policy, such as \"default\", got "
                .. schema.describe_value(ext)
        end
        if #stack >= MAX_EXTENDS_DEPTH then
            return nil, "extends: chain is deeper than " .. MAX_EXTENDS_DEPTH .. " policies"
        end
        local ppath, pname_or_err = resolve(ext, dirname(path), path)
        if not ppath then
            return nil, "extends " .. quote(ext) .. ": " .. pname_or_err
        end
        local cycle = (ppath == path)
        for _, s in ipairs(stack) do
            cycle = cycle or s.path == ppath
        end
        if cycle then
            local chain = {}
            for i, x in ipairs(stack) do chain[i] = x.name end
            chain[#chain + 1] = name
            chain[#chain + 1] = pname_or_err
            return nil, "extends " .. quote(ext) .. " makes a cycle: " .. table_concat(chain, " -> ")
                .. "; one of these files must stop extending the other"
        end
        stack[#stack + 1] = { name = name, path = path }
        local parent, perr = load_resolved(pname_or_err, ppath, stack)
        stack[#stack] = nil
        if not parent then
            return nil, "extends " .. quote(ext) .. ": " .. perr
        end
        parent.name, parent.path, parent.description = nil, nil, nil
        local child = shallow_copy(raw, { extends = true })
        merged = merge(parent, child)
    else
        merged = merge(nil, raw)
    end
    local p, err = schema.check(merged, POLICY)
    if not p then
        return nil, err
    end
    p.extends = nil
    p.name, p.path = name, path
    return p
end

-- Loaded policies are kept per file, with the text of every file of the `extends` chain: a
-- later load that finds the same texts returns a copy instead of running and checking them again
-- (milliseconds per session). An edited file is read afresh. (A policy that reads environment
-- variables sees them as they were at its first load in this process.)
local cache = {}
local reading -- the chain's { path, text } while a load runs

local function read_text(path)
    local f = io_open(path, "rb")
    if not f then return nil end
    local t = f:read("*a")
    f:close()
    return t
end

local function unchanged(files)
    for _, f in ipairs(files) do
        if read_text(f[1]) ~= f[2] then return false end
    end
    return true
end

load_resolved = function(name, path, stack)
    if reading then reading[#reading + 1] = { path, read_text(path) } end
    local raw, err = run_file(path)
    if raw then
        raw, err = normalise(raw, name, path, stack)
    end
    if not raw then
        return nil, label(name, path) .. ": " .. err
    end
    return raw
end

-- load(name_or_path) -> policy | nil, err
function _M.load(what)
    if type(what) ~= "string" then
        error("policy.load: expected a policy name or path (string), got " .. type(what), 2)
    end
    local path, name_or_err = resolve(what, nil, nil)
    if not path then
        return nil, name_or_err
    end
    local hit = cache[path]
    if hit and hit.name == name_or_err and unchanged(hit.files) then
        return schema.deep_copy(hit.policy)
    end
    reading = {}
    local ok, p, err = pcall(load_resolved, name_or_err, path, {})
    local files = reading
    reading = nil
    if not ok then error(p, 0) end
    if p then cache[path] = { name = name_or_err, files = files, policy = schema.deep_copy(p) } end
    return p, err
end

-- from_table(t [, name]) -> policy | nil, err: check a policy built in code rather than a file
-- (`extends` names are looked up in policy.dirs(), relative paths against the current directory)
function _M.from_table(t, name)
    if type(t) ~= "table" then
        error("policy.from_table: expected a table, got " .. type(t), 2)
    end
    name = name or "(table)"
    local p, err = normalise(t, name, "(table)", {})
    if not p then
        return nil, "policy " .. quote(name) .. ": " .. err
    end
    return p
end

-- list() -> array of { name =, path =, description = [, error =] }, sorted by name; the first
-- directory wins when two define the same name (as policy.load would pick it)
function _M.list()
    local out, seen = {}, {}
    for _, d in ipairs(_M.dirs()) do
        for _, f in ipairs(list_dir(d)) do
            local n = f:match("^(.+)%.lua$")
            local p = d .. "/" .. f
            if n and not seen[n] and is_file(p) then
                seen[n] = true
                local raw, err = run_file(p)
                local entry = { name = n, path = p }
                if raw then
                    entry.description = type(raw.description) == "string" and raw.description or ""
                else
                    entry.description = ""
                    entry.error = label(n, p) .. ": " .. err
                end
                out[#out + 1] = entry
            end
        end
    end
    table_sort(out, function(a, b) return a.name < b.name end)
    return out
end


return _M

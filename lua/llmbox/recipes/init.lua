-- Language recipes: Lua data that turns (code, args) into files and argv. One file per language
-- in this directory (or in a directory listed in LLMBOX_RECIPE_PATH), validated when loaded.
--
-- Recipes live next to the library, not in policies/: they describe how a toolchain is driven,
-- which ships with the code; operators change *whether* and *with what limits* code runs in
-- policies/, and can still add or override a language through LLMBOX_RECIPE_PATH.
local schema = require "llmbox.schema"
local util = require "llmbox.util"

local _M = { _VERSION = "0.1.0" }

local string_list = { type = "array", of = "string" }
local hook_file = { type = "record", fields = {
    src = { type = "string", required = true, pattern = "^[%w_.-]+$",
        pattern_desc = "a file name in the recipe's directory" },
    dst = { type = "string", required = true, pattern = "^{code}/",
        pattern_desc = "a path under {code}/ (the backend's code directory)" },
} }

-- A program the recipe starts ahead of its code (warm, interactive): its argv, and the files it
-- needs besides the hooks; false when the recipe has none.
local program_spec = { type = "record", fields = {
    run = { type = "array", of = "string" },
    files = { type = "array", default = {}, of = hook_file },
    -- a warm program that can import modules before it waits (pools' `preload`): `args` go
    -- after its argv, then the module names; `check` (argv, then the names) imports them once,
    -- in a sandbox of its own, when a pool is made, so a misspelt name is an error there
    preload = { type = "record", fields = {
        args = { type = "array", of = "string", default = {} },
        check = { type = "array", of = "string", default = {} },
    }, finish = function(p)
        if #p.check > 0 then return p end
        if #p.args > 0 then return nil, "args given without check" end
        return false
    end },
}, finish = function(w)
    if w.run then return w end
    if #w.files > 0 then return nil, "files given without run" end
    return false
end }

_M.schema = {
    type = "record",
    fields = {
        name = { type = "string", required = true, pattern = "^[%l%d_-]+$",
            pattern_desc = "lower-case letters, digits, - and _" },
        aliases = { type = "array", of = "string", default = {} },
        extensions = { type = "array", of = "string", default = {} },
        description = { type = "string", default = "" },
        -- the default image on backends that run images (docker, podman): an official image
        -- with the toolchain; argv[0] is looked up on the image's PATH when the recipe's
        -- absolute path is not there (python:3.12-slim keeps python3 in /usr/local/bin)
        image = { type = "string", pattern = "^[%w][%w%._/:@%-]*$", pattern_desc = "an image reference (name[:tag])" },
        file = { type = "string", required = true, pattern = "^[%w_.-]+$",
            pattern_desc = "a plain file name such as main.py" },
        run = { type = "array", of = "string", required = true },
        -- compiled languages: this argv runs first; the run starts only if it exits 0
        compile = string_list,
        -- files shipped next to the recipe (recipes/<name>/<src>) written into the jail for
        -- each run, e.g. startup hooks: { { src = "sitecustomize.py", dst = "{code}/hooks/..." } }
        hooks = { type = "array", default = {}, of = hook_file },
        -- pools: a program started ahead of time that waits for its code (see pool.lua and
        -- python/llmbox_warm.py): its argv, and the files it needs besides the hooks
        -- (false when the recipe has none)
        warm = program_spec,
        -- interactive sessions: a program that stays alive and runs cells in one namespace (see
        -- python/llmbox_kernel.py and runtime/cell.c for the protocol); false: none
        interactive = program_spec,
        -- the recipe's programs leave plots in $LLMBOX_PLOTS_DIR (collected after each run)
        plots = { type = "boolean", default = false },
        -- install(packages, sources) -> argv of the package manager (see python.lua)
        install = "function",
        -- for get_language_details-style questions
        details = { type = "record", default = {}, fields = {
            package_manager = "string",
            preinstalled = { type = "array", of = "string", default = {} },
            plots = { type = "boolean", default = false },
        } },
        env = { type = "map", of = "string", default = {} },
        version = string_list,
        checks = "string",
        mounts = { type = "array", of = "string", default = {} },
        example = "string",
    },
}

local cache

function _M.dirs()
    local dirs = {}
    for d in (os.getenv("LLMBOX_RECIPE_PATH") or ""):gmatch("[^:]+") do dirs[#dirs + 1] = d end
    dirs[#dirs + 1] = util.module_dir()
    return dirs
end

local function load_file(path)
    local chunk, err = loadfile(path)
    if not chunk then return nil, "recipe " .. path .. ": " .. err end
    -- data plus small helper functions (install argv builders): no io, os or require
    setfenv(chunk, { ipairs = ipairs, pairs = pairs, type = type, tostring = tostring,
        string = string, table = table })
    local ok, t = pcall(chunk)
    if not ok then return nil, "recipe " .. path .. ": " .. tostring(t) end
    if type(t) ~= "table" then return nil, "recipe " .. path .. ": must return a table" end
    local r, verr = schema.check(t, _M.schema)
    if not r then return nil, "recipe " .. path .. ": " .. verr end
    r.path = path
    return r
end

-- Loads every recipe once; the first directory that defines a name wins.
function _M.all()
    if cache then return cache end
    local by_name, list = {}, {}
    for _, dir in ipairs(_M.dirs()) do
        for _, f in ipairs(util.list_dir(dir, ".lua")) do
            if f ~= "init.lua" then
                local r, err = load_file(dir .. "/" .. f)
                if not r then error(err, 0) end
                if not by_name[r.name] then
                    by_name[r.name] = r
                    list[#list + 1] = r
                end
            end
        end
    end
    table.sort(list, function(a, b) return a.name < b.name end)
    cache = { by_name = by_name, list = list }
    return cache
end

-- Finds a recipe by name or alias.
function _M.get(lang)
    if type(lang) ~= "string" then error("language name expected, got " .. type(lang), 2) end
    local ok, all = pcall(_M.all)
    if not ok then return nil, all end
    local l = lang:lower()
    if all.by_name[l] then return all.by_name[l] end
    for _, r in ipairs(all.list) do
        for _, a in ipairs(r.aliases) do
            if a == l then return r end
        end
    end
    local names = {}
    for _, r in ipairs(all.list) do names[#names + 1] = r.name end
    return nil, ("unknown language %q (available: %s)"):format(lang, table.concat(names, ", "))
end

-- Finds a recipe by a file's extension.
function _M.for_file(path)
    local ext = path:match("%.([%w]+)$")
    if not ext then return nil, "cannot tell the language of " .. path .. ": use -l LANG" end
    local ok, all = pcall(_M.all)
    if not ok then return nil, all end
    for _, r in ipairs(all.list) do
        for _, e in ipairs(r.extensions) do
            if e == ext:lower() then return r end
        end
    end
    return nil, ("no language handles .%s files: use -l LANG"):format(ext)
end

-- Recipes never name the backend's paths: "{code}" (where llmbox puts the code and the hooks) and
-- "{workspace}" (the program's working directory) in argv, env values, hook destinations and the
-- install argv are filled in from the layout of the session's backend (backends/init.lua).
local function expand(s, layout)
    return (s:gsub("{code}", layout.code):gsub("{workspace}", layout.workspace))
end

_M.expand = expand

-- An argv template with {file} (the code's path), {dir} (its directory) and the layout's paths
-- filled in, then the program's arguments.
function _M.argv(recipe, file, args, template, layout)
    local dir = file:match("^(.*)/[^/]*$") or "."
    local argv = {}
    for _, a in ipairs(template or recipe.run) do
        argv[#argv + 1] = expand((a:gsub("{file}", file):gsub("{dir}", dir)), layout)
    end
    for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
    return argv
end

-- The recipe's environment with the layout's paths filled in.
function _M.env(recipe, layout)
    local env = {}
    for k, v in pairs(recipe.env) do env[k] = expand(v, layout) end
    return env
end

-- The package manager's argv (recipe.install) with the layout's paths filled in.
function _M.install_argv(recipe, packages, sources, layout)
    local argv = recipe.install(packages, sources)
    for i, a in ipairs(argv) do argv[i] = expand(a, layout) end
    return argv
end

-- Shipped files are read once per process: every run writes them, and they do not change
-- under a running program (an operator edits them between deployments).
local shipped = {}

local function read_shipped(src)
    local data = shipped[src]
    if not data then
        local f = assert(io.open(src, "rb"))
        data = f:read("*a")
        f:close()
        shipped[src] = data
    end
    return data
end

-- A Python file's bytecode, which `make` compiles beside it (__pycache__/NAME.TAG.pyc, checked
-- against the source's hash): written beside the file in the jail, so the interpreter there
-- loads it instead of compiling the source at each start. One of another Python version (TAG)
-- or of another source is ignored by the interpreter. { { name, data } }, read once per process.
local pycs = {}
local function bytecode_of(src)
    if pycs[src] == nil then
        local dir, stem = src:match("^(.*)/([^/]+)%.py$")
        local found = {}
        for _, name in ipairs(dir and require("llmbox.core").listdir(dir .. "/__pycache__") or {}) do
            if name:sub(1, #stem + 1) == stem .. "." and name:match("%.pyc$") then
                found[#found + 1] = { name, read_shipped(dir .. "/__pycache__/" .. name) }
            end
        end
        pycs[src] = found
    end
    return pycs[src]
end

-- `run`: the program's argv, whose script runs as __main__, which Python never loads from a pyc
-- (its pyc would be written for nothing)
local function add_shipped(files, recipe, list, layout, run)
    local main = {}
    for _, a in ipairs(run or {}) do main[expand(a, layout)] = true end
    for _, h in ipairs(list) do
        local src = recipe.path:match("^(.*)/[^/]*$") .. "/" .. recipe.name .. "/" .. h.src
        local dst = expand(h.dst, layout)
        files[#files + 1] = { path = dst, data = read_shipped(src), mode = 420 }
        local dir = not main[dst] and dst:match("^(.*)/")
        for _, pyc in ipairs(dir and bytecode_of(src) or {}) do
            files[#files + 1] = { path = dir .. "/__pycache__/" .. pyc[1], data = pyc[2], mode = 420 }
        end
    end
    return files
end

-- The files a run needs inside the jail: the code, then the recipe's hooks.
function _M.files(recipe, path, code, layout)
    return add_shipped({ { path = path, data = code, mode = 420 } }, recipe, recipe.hooks, layout)
end

-- The files a prestarted (warm) program needs: the hooks and its own; the code comes later.
function _M.warm_files(recipe, layout, program)
    program = program or recipe.warm
    return add_shipped(add_shipped({}, recipe, recipe.hooks, layout), recipe, program.files, layout, program.run)
end

return _M

-- `make test` installs what the specs use. For every language recipe, each program it calls (its
-- run, compile, version and install commands, and the programs its hook scripts exec) must belong
-- to a Debian package that `make test` installs, directly or as a dependency, or to Debian's base
-- system; the same for the Python and R packages the plot specs import and the recipes say are
-- preinstalled. Otherwise a new machine fails where this one, which has the package for some other
-- reason, passes (the Makefile once expanded its toolchain list before defining it, and CI stayed
-- green). `make test-fresh` proves the same on a fresh root; this spec says which package is missing.
local helpers = require "spec.helpers"
local recipes = require "llmbox.recipes"
local q = helpers.shell_quote

local function lines(cmd)
    local p = assert(io.popen(cmd .. " 2>/dev/null"))
    local out = {}
    for l in p:lines() do out[#out + 1] = l end
    p:close()
    return out
end

-- The names in a Depends-style field: "a (>= 1) | b, c:any" -> { {"a","b"}, {"c"} }
local function dep_groups(field)
    local groups = {}
    for group in (field or ""):gmatch("[^,]+") do
        local alts = {}
        for alt in group:gmatch("[^|]+") do
            local name = alt:match("^%s*([%w%.%+%-]+)")
            if name then alts[#alts + 1] = name end
        end
        if #alts > 0 then groups[#groups + 1] = alts end
    end
    return groups
end

-- The installed packages: name -> { depends = groups, base = bool }, and virtual name -> providers.
local function installed_packages()
    local pkgs, provides = {}, {}
    for _, l in ipairs(lines("dpkg-query -W -f='${Package}\\t${Status}\\t${Essential}\\t${Priority}\\t"
        .. "${Provides}\\t${Pre-Depends}, ${Depends}\\n'")) do
        local name, status, essential, priority, prov, deps = l:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
        if name and status:find("install ok installed", 1, true) then
            pkgs[name] = { depends = dep_groups(deps), base = essential == "yes" or priority == "required" }
            for _, g in ipairs(dep_groups(prov)) do
                provides[g[1]] = provides[g[1]] or {}
                table.insert(provides[g[1]], name)
            end
        end
    end
    return pkgs, provides
end

-- Everything installing `roots` brings, plus Debian's base system (what debootstrap's minbase has).
local function closure(roots, pkgs, provides)
    local seen, queue = {}, {}
    local function add(name)
        local real = pkgs[name] and { name } or provides[name] or {}
        for _, r in ipairs(real) do
            if not seen[r] then
                seen[r] = true
                queue[#queue + 1] = r
            end
        end
        return #real > 0
    end
    for _, r in ipairs(roots) do add(r) end
    for name, p in pairs(pkgs) do if p.base then add(name) end end
    while #queue > 0 do
        local name = table.remove(queue)
        for _, alts in ipairs(pkgs[name].depends) do
            -- apt takes the first alternative it can; any installed one satisfies the group here
            for _, a in ipairs(alts) do if add(a) then break end end
        end
    end
    return seen
end

-- The packages owning each path: { [path] = { owners = {...}, real = resolved path } }. One
-- dpkg-query for all of them (each call reads the whole database). usrmerge moved /bin to
-- /usr/bin, and dpkg's database still names some files by their old path.
local function owners_of(paths)
    local out, quoted = {}, {}
    for i, p in ipairs(paths) do quoted[i] = q(p) end
    local reals = lines("readlink -f " .. table.concat(quoted, " "))
    local candidates, seen = {}, {}
    for i, p in ipairs(paths) do
        local real = reals[i] or p
        out[p] = { real = real, owners = {}, try = { real, p, (real:gsub("^/usr/", "/")) } }
        for _, c in ipairs(out[p].try) do
            if not seen[c] then
                seen[c] = true
                candidates[#candidates + 1] = q(c)
            end
        end
    end
    local by_path = {}
    for _, l in ipairs(lines("dpkg-query -S " .. table.concat(candidates, " "))) do
        local names, path = l:match("^(.-): (/.*)$")
        if names and not l:match("^diversion") then
            local list = {}
            for name in names:gmatch("[^,%s]+") do list[#list + 1] = name:gsub(":.*$", "") end
            by_path[path] = list
        end
    end
    for _, o in pairs(out) do
        for _, c in ipairs(o.try) do
            if by_path[c] then
                o.owners = by_path[c]
                break
            end
        end
    end
    return out
end

local function add_paths(set, text)
    text = " " .. text
    for p in text:gmatch("[%s\"'=](/usr/bin/[%w%._+%-]+)") do set[p] = true end
    for p in text:gmatch("[%s\"'=](/bin/[%w%._+%-]+)") do set[p] = true end
end

-- Programs a recipe calls: absolute paths in its commands and in the files it ships.
local function recipe_programs(r)
    local set, modules = {}, {}
    local argvs = {}
    for _, argv in ipairs({ r.run, r.compile or false, r.version or false, r.warm and r.warm.run or false,
        r.install and r.install({ "pkg" }, { find_links = {} }) or false }) do
        if argv then argvs[#argvs + 1] = argv end
    end
    for _, argv in ipairs(argvs) do
        for i, a in ipairs(argv) do
            if i == 1 and a:sub(1, 1) == "/" then set[a] = true end
            add_paths(set, a)
            if a == "-m" and argv[i + 1] then modules[argv[i + 1]] = true end
        end
    end
    local dir = r.path:match("^(.*)/[^/]*$") .. "/" .. r.name
    local files = {}
    for _, h in ipairs(r.hooks) do files[#files + 1] = h end
    for _, h in ipairs(r.warm and r.warm.files or {}) do files[#files + 1] = h end
    for _, h in ipairs(files) do add_paths(set, assert(helpers.read(dir .. "/" .. h.src))) end
    return set, modules
end

-- Python modules and R packages named in the plot specs and in the recipes' preinstalled lists.
local function plot_imports()
    local py, rpkgs = {}, {}
    for _, f in ipairs(lines("ls spec/09-plots/*.lua")) do
        local text = assert(helpers.read(f))
        for m in text:gmatch("%f[%w]import%s+([%a_][%w_]*)") do py[m] = true end
        for m in text:gmatch("%f[%w]from%s+([%a_][%w_]*)[%w_.]*%s+import") do py[m] = true end
        for m in text:gmatch("library%(([%w.]+)%)") do rpkgs[m] = true end
        for m in text:gmatch("require%(([%w.]+)%)") do rpkgs[m] = true end
    end
    local python, r = assert(recipes.get("python")), assert(recipes.get("r"))
    for _, m in ipairs(python.details.preinstalled) do if m:match("^[%w_]+$") then py[m] = true end end
    for _, m in ipairs(r.details.preinstalled) do if m:match("^[%w.]+$") then rpkgs[m] = true end end
    return py, rpkgs
end

describe("make test installs what the specs use", function()
    local installs = lines("make -s --no-print-directory print-deps-test")[1] or ""
    local roots = {}
    for name in installs:gmatch("%S+") do roots[#roots + 1] = name end
    local pkgs, provides = installed_packages()
    local brought = closure(roots, pkgs, provides)

    -- wanted: { {what, path}, ... } -> the messages for those no installed package brings
    local function unbrought(wanted)
        local paths = {}
        for i, w in ipairs(wanted) do paths[i] = w[2] end
        local owned = owners_of(paths)
        local missing = {}
        for _, w in ipairs(wanted) do
            local o = owned[w[2]]
            local ok = false
            for _, name in ipairs(o.owners) do ok = ok or brought[name] ~= nil end
            if #o.owners == 0 then
                missing[#missing + 1] = ("%s: %s is not installed or belongs to no Debian package"):format(w[1], o.real)
            elseif not ok then
                missing[#missing + 1] = ("%s: %s comes from %s, which `make test` does not install: add it to "
                    .. "DEPS_LANGS in the Makefile"):format(w[1], o.real, table.concat(o.owners, ", "))
            end
        end
        table.sort(missing)
        return missing
    end

    local function python_origin(m)
        return lines("/usr/bin/python3 -c " .. q("import importlib.util, sys; "
            .. "s = importlib.util.find_spec(sys.argv[1]); print(s.origin if s and s.origin else '')") .. " " .. q(m))[1]
    end

    it("reads the install list and the package database", function()
        assert.is_true(#roots > 10, "make print-deps-test gave: " .. installs)
        assert.is_truthy(pkgs.dpkg and brought.dpkg, "dpkg-query gave no base system")
    end)

    it("every language recipe's programs", function()
        local wanted, missing = {}, {}
        for _, r in ipairs(recipes.all().list) do
            local programs, modules = recipe_programs(r)
            for path in pairs(programs) do wanted[#wanted + 1] = { "recipe " .. r.name .. " calls " .. path, path } end
            for m in pairs(modules) do
                local origin = python_origin(m)
                if origin and origin:sub(1, 1) == "/" then
                    wanted[#wanted + 1] = { "recipe " .. r.name .. " runs python3 -m " .. m, origin }
                else
                    missing[#missing + 1] = "recipe " .. r.name .. " runs python3 -m " .. m .. ", which /usr/bin/python3 cannot import"
                end
            end
        end
        assert.is_true(#wanted >= 8, "found only " .. #wanted .. " programs in the recipes")
        for _, m in ipairs(unbrought(wanted)) do missing[#missing + 1] = m end
        assert.same({}, missing)
    end)

    it("the host commands the specs and make targets call", function()
        -- a fresh Debian root lacks some of them (minbase has no procps): `make test-fresh` finds
        -- a missing one, this list says which package brings it
        local wanted = {}
        for _, cmd in ipairs({ "pgrep", "ps", "ipcs", "setpriv", "unshare", "awk", "node", "npm", "luajit",
            "busted", "luarocks", "clang-format", "cc", "pkg-config" }) do
            local path = lines("command -v " .. q(cmd))[1]
            wanted[#wanted + 1] = { "command " .. cmd, path or ("/nonexistent/" .. cmd) }
        end
        assert.same({}, unbrought(wanted))
    end)

    it("the Python and R packages the plot specs import", function()
        local py, rpkgs = plot_imports()
        assert.is_truthy(py.matplotlib and py.seaborn and py.plotly and rpkgs.ggplot2,
            "the plot specs' imports were not found")
        local wanted, missing = {}, {}
        for m in pairs(py) do
            local origin = python_origin(m)
            if not origin or origin == "" then
                missing[#missing + 1] = "python module " .. m .. " cannot be imported by /usr/bin/python3"
            elseif origin:sub(1, 1) == "/" then -- "built-in" and "frozen" modules come with python3
                wanted[#wanted + 1] = { "python module " .. m, origin }
            end
        end
        for p in pairs(rpkgs) do
            local dir = lines("Rscript -e " .. q("cat(system.file(package = commandArgs(TRUE)[1]))") .. " " .. q(p))[1]
            if not dir or dir == "" then
                missing[#missing + 1] = "R package " .. p .. " is not installed"
            else
                wanted[#wanted + 1] = { "R package " .. p, dir .. "/DESCRIPTION" }
            end
        end
        for _, m in ipairs(unbrought(wanted)) do missing[#missing + 1] = m end
        assert.same({}, missing)
    end)
end)

-- Plots and artifacts reach the caller in memory, as a tar stream from the jail side (the collect
-- stage): nothing is written on the host, so nothing is staged under a name another local user
-- could take over, and $TMPDIR plays no part.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local uv = require "luv"
local ffi = require "ffi"

pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name);")

local PLOT = "import matplotlib.pyplot as plt; plt.plot([1, 2])"

local entries = require("llmbox.util").entries

-- Counts how the session reaches its results: copies to host paths, or collections in memory.
local function watch(s)
    local real, seen = s.handle, { copy_out = 0, collect = 0 }
    s.handle = setmetatable({}, { __index = function(_, k)
        local v = real[k]
        if type(v) ~= "function" then return v end
        return function(_, ...)
            if seen[k] then seen[k] = seen[k] + 1 end
            return v(real, ...)
        end
    end })
    return seen, function() s.handle = real end
end

describe("collecting plots and artifacts #unpriv", function()
    local base, saved
    before_each(function()
        saved = os.getenv("TMPDIR")
        base = helpers.tmpdir()
        ffi.C.setenv("TMPDIR", base, 1)
    end)
    after_each(function()
        if saved then ffi.C.setenv("TMPDIR", saved, 1) else ffi.C.unsetenv("TMPDIR") end
        require("llmbox.util").remove_tree(base)
    end)

    it("collects plots and artifacts in memory, writing nothing on the host", function()
        local s = assert(llmbox.session({ lang = "python", policy = "permissive" }))
        local seen, restore = watch(s)
        local r = assert(s:run(PLOT .. "\nimport os; os.makedirs('/sandbox/output', exist_ok=True)\n"
            .. "open('/sandbox/output/.hidden', 'w').write('dot'); open('/sandbox/output/a.txt', 'w').write('a')",
            { artifacts = true }))
        restore()
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(1, #r.plots)
        assert.same({ ".hidden", "a.txt" }, { r.files[1].name, r.files[2].name })
        assert.same({ "dot", "a" }, { r.files[1].data, r.files[2].data })
        assert.same({ copy_out = 0, collect = 2 }, seen) -- the plots, then the output folder
        assert.same({}, entries(base))
    end)

    it("leaves nothing behind when a collection fails", function()
        local s = assert(llmbox.session({ lang = "python", policy = "permissive" }))
        local r, err = s:run("import os; os.makedirs('/sandbox/output', exist_ok=True)\n"
            .. "open('/sandbox/output/big', 'wb').write(bytes(100000)); open('/sandbox/output/.x', 'w').write('x')",
            { artifacts = true, artifacts_max = 1000 })
        s:close()
        assert.is_nil(r)
        assert.matches("larger than the limit", err)
        assert.same({}, entries(base))
    end)

    it("needs no $TMPDIR", function()
        ffi.C.setenv("TMPDIR", base .. "/missing", 1)
        local s = assert(llmbox.session({ lang = "python", policy = "permissive" }))
        local r = assert(s:run(PLOT))
        s:close()
        assert.equal(1, #r.plots)
        assert.is_nil(uv.fs_stat(base .. "/missing"))
    end)

    it("cannot be redirected by a symlink planted at a name it uses", function()
        -- The race os.tmpname() loses: it picks a name in a shared directory, removes the file,
        -- and another user plants a symlink there before the name is used. Played here without
        -- the timing: every name os.tmpname() hands out is taken over right after its removal.
        local victim = base .. "/victim"
        assert(uv.fs_mkdir(victim, tonumber("700", 8)))
        helpers.write(victim .. "/keep", "the victim's own file")
        local tmpname, remove = os.tmpname, os.remove
        local planted = {}
        -- luacheck: push ignore 122 (the race is played by replacing os.tmpname and os.remove)
        os.tmpname = function()
            local p = tmpname()
            planted[p] = true
            return p
        end
        os.remove = function(p)
            local ok, e = remove(p)
            if planted[p] == true then
                planted[p] = "taken"
                uv.fs_symlink(victim, p)
            end
            return ok, e
        end
        local s = assert(llmbox.session({ lang = "python", policy = "permissive" }))
        local ok, r = pcall(s.run, s, PLOT, { artifacts = true })
        s:close()
        os.tmpname, os.remove = tmpname, remove
        -- luacheck: pop
        for p in pairs(planted) do remove(p) end
        assert.is_true(ok, r)
        assert.equal(1, #r.plots)
        assert.same({ "keep" }, entries(victim)) -- nothing written there, nothing removed
    end)
end)

describe("llmbox run's temporary files #unpriv", function()
    it("are none: $TMPDIR stays empty, and a missing one does not matter", function()
        local base = helpers.tmpdir()
        local q = helpers.shell_quote
        local st, out = helpers.cli({ "run", "-p", "permissive", "--json", "-c", PLOT }, { env = "TMPDIR=" .. q(base) })
        assert.equal(0, st)
        assert.equal(1, #require("cjson").decode(out).plots)
        assert.same({}, entries(base))
        st, out = helpers.cli({ "run", "-p", "permissive", "--json", "-c", PLOT },
            { env = "TMPDIR=" .. q(base .. "/missing") })
        assert.equal(0, st)
        assert.equal(1, #require("cjson").decode(out).plots)
        uv.fs_rmdir(base)
    end)
end)

-- llmbox.schema: the validator behind policies. Assertions are on the messages operators read.
local schema = require "llmbox.schema"
local _ -- the placeholder for values a spec ignores

local check = schema.check

describe("schema scalars", function()
    it("accepts and returns plain values", function()
        assert.equal("x", check("x", "string"))
        assert.equal(1.5, check(1.5, "number"))
        assert.equal(3, check(3, "integer"))
        assert.equal(false, check(false, "boolean"))
        local f = function() end
        assert.equal(f, check(f, "function"))
    end)

    it("names the path, what was expected and what it got", function()
        local v, err = check(true, "string", "env.set.PATH")
        assert.is_nil(v)
        assert.equal("env.set.PATH: expected a string, got boolean", err)
        _, err = check("3", "integer", "limits.processes")
        assert.equal('limits.processes: expected a whole number, got string "3"', err)
        _, err = check(2.5, "integer", "limits.processes")
        assert.equal("limits.processes: expected a whole number, got number 2.5", err)
        _, err = check(0 / 0, "number", "x")
        assert.matches("x: expected a number, got number", err, 1, true)
        _, err = check(1, "boolean", "a.b")
        assert.equal("a.b: expected true or false, got number 1", err)
    end)

    it("without a path the message has no prefix", function()
        local _, err = check(1, "string")
        assert.equal("expected a string, got number 1", err)
    end)

    it("applies min and max", function()
        local spec = { type = "integer", min = 1, max = 10 }
        assert.equal(1, check(1, spec))
        local _, err = check(0, spec, "limits.processes")
        assert.equal("limits.processes: must be at least 1, got number 0", err)
        _, err = check(11, spec, "n")
        assert.equal("n: must be at most 10, got number 11", err)
    end)

    it("checks string patterns with a readable description", function()
        local spec = { type = "string", pattern = "^[a-z0-9_]+$", pattern_desc = "a syscall name" }
        assert.equal("mount", check("mount", spec))
        local _, err = check("Mount!", spec, "syscalls.deny[1]")
        assert.equal('syscalls.deny[1]: expected a syscall name, got string "Mount!"', err)
    end)

    it("quotes strings in messages on one line", function()
        local _, err = check("a\nb\"c", "integer", "k")
        assert.equal('k: expected a whole number, got string "a\\nb\\"c"', err)
        _, err = check(string.rep("x", 200), "integer", "k")
        assert.is_true(#err < 120)
    end)

    it("rejects an unknown spec type as a programming mistake", function()
        assert.has_error(function() check(1, "sizes") end, 'schema: unknown spec type "sizes"')
        assert.has_error(function() check(1, 42) end)
    end)
end)

describe("schema sizes", function()
    local cases = {
        { 0, 0 }, { 1024, 1024 }, { "100", 100 }, { "100B", 100 }, { "64K", 65536 },
        { "64k", 65536 }, { "512M", 536870912 }, { "512MB", 536870912 }, { "512MiB", 536870912 },
        { "1G", 1073741824 }, { "1.5M", 1572864 }, { " 2 G ", 2147483648 }, { "1T", 1099511627776 },
        { ".5K", 512 },
    }
    for _, c in ipairs(cases) do
        it("reads " .. tostring(c[1]) .. " as " .. c[2] .. " bytes", function()
            assert.equal(c[2], check(c[1], "size"))
        end)
    end

    it("refuses what is not a size", function()
        local expected = 'expected a size (bytes, or a string such as "512M")'
        for _, bad in ipairs({ "512X", "M", "", "-1M", "1e3", "12 34", "0x10" }) do
            local v, err = check(bad, "size", "limits.memory")
            assert.is_nil(v, bad)
            assert.equal("limits.memory: " .. expected .. ", got string " .. schema.quote(bad), err)
        end
        local _, err = check(true, "size", "limits.memory")
        assert.equal("limits.memory: " .. expected .. ", got boolean", err)
        _, err = check(-1, "size", "limits.memory")
        assert.equal("limits.memory: " .. expected .. ", got number -1", err)
        _, err = check(1.5, "size", "limits.memory")
        assert.equal("limits.memory: " .. expected .. ", got number 1.5", err)
        assert.is_nil((check(math.huge, "size")))
        assert.is_nil((check("99999999T", "size")))
    end)

    it("reports bounds in the operator's units", function()
        local _, err = check("1M", { type = "size", min = 16 * 1024 * 1024 }, "limits.memory")
        assert.equal('limits.memory: must be at least 16M, got string "1M"', err)
    end)
end)

describe("schema durations", function()
    local cases = {
        { 30, 30 }, { 0.5, 0.5 }, { "30", 30 }, { "30s", 30 }, { "500ms", 0.5 }, { "5m", 300 },
        { "1h", 3600 }, { "1.5s", 1.5 }, { "2min", 120 },
    }
    for _, c in ipairs(cases) do
        it("reads " .. tostring(c[1]) .. " as " .. c[2] .. " seconds", function()
            assert.equal(c[2], check(c[1], "duration"))
        end)
    end

    it("refuses zero, negatives and nonsense", function()
        for _, bad in ipairs({ 0, -1, "0s", "5 parsecs", "s", {}, false }) do
            local v, err = check(bad, "duration", "limits.timeout")
            assert.is_nil(v)
            assert.matches('^limits%.timeout: expected a duration %(seconds, or a string such as "30s", '
                .. '"500ms" or "5m"%), got ', err)
        end
    end)
end)

describe("schema enums", function()
    local spec = { type = "enum", values = { "enforce", "warn", "off" } }

    it("accepts a listed value", function()
        assert.equal("warn", check("warn", spec))
    end)

    it("lists the choices and suggests a near miss", function()
        local _, err = check("enforse", spec, "checks.mode")
        assert.equal('checks.mode: expected one of "enforce", "warn", "off", got string "enforse" '
            .. '(did you mean "enforce"?)', err)
        _, err = check("Warn", spec, "checks.mode")
        assert.matches('(did you mean "warn"?)', err, 1, true)
        _, err = check("nothing-like-it", spec, "checks.mode")
        assert.not_matches("did you mean", err, 1, true)
    end)

    it("adds the spec's hint", function()
        local s = { type = "enum", values = { "none" }, hint = 'only "none" is supported' }
        local _, err = check("host", s, "network.mode")
        assert.equal('network.mode: expected "none", got string "host"; only "none" is supported', err)
    end)
end)

describe("schema arrays and maps", function()
    it("checks each element and names its index", function()
        assert.same({ "a", "b" }, check({ "a", "b" }, { type = "array", of = "string" }))
        local _, err = check({ "a", 2 }, { type = "array", of = "string" }, "env.pass")
        assert.equal("env.pass[2]: expected a string, got number 2", err)
    end)

    it("refuses a table that is not a list", function()
        local _, err = check({ src = "/usr" }, { type = "array", of = "string" }, "filesystem.ro")
        assert.equal('filesystem.ro: expected a list (a table such as { "a", "b" }), got a table with key "src"', err)
        _, err = check({ [1] = "a", [3] = "c" }, { type = "array", of = "string" }, "l")
        assert.matches("^l: expected a list", err)
    end)

    it("checks map keys and values", function()
        local spec = { type = "map", of = "string",
            key = { type = "string", pattern = "^[%a_][%w_]*$", pattern_desc = "a variable name" } }
        assert.same({ A = "1" }, check({ A = "1" }, spec))
        local _, err = check({ A = 1 }, spec, "env.set")
        assert.equal("env.set.A: expected a string, got number 1", err)
        _, err = check({ ["1X"] = "v" }, spec, "env.set")
        assert.equal('env.set["1X"]: invalid key: expected a variable name, got string "1X"', err)
        _, err = check({ "v" }, spec, "env.set")
        assert.equal("env.set[1]: keys must be strings, got number 1", err)
    end)

    it("returns copies, not the caller's tables", function()
        local input = { "a" }
        local out = check(input, { type = "array", of = "string" })
        out[1] = "changed"
        assert.equal("a", input[1])
    end)
end)

describe("schema records", function()
    local spec = {
        type = "record",
        fields = {
            memory = { type = "size", default = "512M" },
            cpu = { type = "duration", default = 30 },
            name = { type = "string", required = true },
            nested = { type = "record", fields = { flag = { type = "boolean", default = true } } },
            list = { type = "array", of = "string", default = { "a" } },
            opt = "string",
        },
    }

    it("fills defaults, converting them too, and fills nested records", function()
        local v = assert(check({ name = "x" }, spec))
        assert.same({ memory = 536870912, cpu = 30, name = "x", nested = { flag = true }, list = { "a" } }, v)
    end)

    it("does not share default tables between results", function()
        local a = check({ name = "x" }, spec)
        a.list[1] = "changed"
        local b = check({ name = "y" }, spec)
        assert.equal("a", b.list[1])
    end)

    it("reports a missing required field", function()
        local _, err = check({}, spec, "p")
        assert.equal("p.name: is required (a string)", err)
    end)

    it("refuses unknown keys, lists the allowed ones and suggests the closest", function()
        local _, err = check({ name = "x", memroy = "1G" }, spec, "limits")
        assert.equal('limits.memroy: unknown key (did you mean "memory"?); allowed keys in limits: '
            .. "cpu, list, memory, name, nested, opt", err)
        _, err = check({ name = "x", zzzzzz = 1 }, spec)
        assert.equal("zzzzzz: unknown key; allowed keys: cpu, list, memory, name, nested, opt", err)
        _, err = check({ name = "x", [1] = "positional" }, spec, "limits")
        assert.matches("^limits%[1%]: unknown key", err)
    end)

    it("names the full path of a nested error", function()
        local _, err = check({ name = "x", nested = { flag = "yes" } }, spec, "a")
        assert.equal('a.nested.flag: expected true or false, got string "yes"', err)
    end)

    it("refuses a non-table", function()
        local _, err = check("x", spec, "limits")
        assert.equal('limits: expected a table, got string "x"', err)
    end)

    it("runs coerce before and finish after the check", function()
        local mount = {
            type = "record",
            coerce = function(v) if type(v) == "string" then return { src = v } end return v end,
            fields = { src = { type = "string", required = true }, dst = "string" },
            finish = function(m)
                if m.src == "/" then return nil, "refusing /" end
                m.dst = m.dst or m.src
                return m
            end,
        }
        assert.same({ src = "/usr", dst = "/usr" }, check("/usr", mount))
        local _, err = check("/", mount, "ro[1]")
        assert.equal("ro[1]: refusing /", err)
    end)

    it("gives the same result when checking its own output again", function()
        local once = assert(check({ name = "x", memory = "1.5G", cpu = "500ms" }, spec))
        assert.same(once, check(once, spec))
    end)
end)

describe("schema helpers", function()
    it("suggests only plausible typos", function()
        assert.equal("timeout", schema.suggest("timout", { "timeout", "cpu" }))
        assert.equal("open_files", schema.suggest("open_file", { "open_files", "file_size" }))
        assert.is_nil(schema.suggest("banana", { "timeout", "cpu" }))
    end)

    it("formats sizes for messages", function()
        assert.equal("512M", schema.format_size(536870912))
        assert.equal("64K", schema.format_size(65536))
        assert.equal("1000 bytes", schema.format_size(1000))
    end)

    it("raises on caller mistakes", function()
        assert.has_error(function() check(1, nil) end,
            "schema.check: spec must be a string or a table, got nil")
        assert.has_error(function() check(1, "string", 5) end,
            "schema.check: path must be a string or nil, got number")
    end)
end)

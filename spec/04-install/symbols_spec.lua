-- What the built C code exports: core.so is a Lua module, so its one public symbol is the
-- module's entry point. Everything else is built with -fvisibility=hidden and stays internal:
-- another library loaded into the same process (an nginx worker, a daemon) can neither call
-- into the jail's internals nor have its own symbols of the same name bound in their place.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

-- the names of the defined symbols in a file's dynamic symbol table
local function exported(file)
    local p = assert(io.popen("nm -D --defined-only " .. q(file) .. " 2>&1"))
    local names = {}
    for line in p:lines() do
        local name = line:match("^%x*%s+%a%s+(%S+)$")
        assert(name, "unexpected nm output: " .. line)
        names[#names + 1] = name
    end
    p:close()
    table.sort(names)
    return names
end

describe("exported symbols #unpriv", function()
    it("core.so exports luaopen_llmbox_core and nothing else", function()
        assert.same({ "luaopen_llmbox_core" }, exported(helpers.root .. "/build/lib/llmbox/core.so"))
    end)

    it("http_core.so exports luaopen_llmbox_http_core and nothing else", function()
        assert.same({ "luaopen_llmbox_http_core" }, exported(helpers.root .. "/build/lib/llmbox/http_core.so"))
    end)

    it("ws_core.so exports luaopen_llmbox_ws_core and nothing else", function()
        assert.same({ "luaopen_llmbox_ws_core" }, exported(helpers.root .. "/build/lib/llmbox/ws_core.so"))
    end)

    it("neither the binary nor llmbox.core loads libcurl, libarchive or libcrypto at start", function()
        -- (their start-up cost is for their users: libarchive and libcrypto are loaded by the
        -- first copy, archive or digest, runtime/lazy.c; the specs of those use them)
        for _, file in ipairs({ helpers.bin, helpers.root .. "/build/lib/llmbox/core.so" }) do
            local p = assert(io.popen("ldd " .. q(file)))
            local libs = p:read("*a")
            p:close()
            for _, lib in ipairs({ "libcurl", "libarchive", "libcrypto" }) do
                assert.is_nil(libs:find(lib, 1, true), file .. " links " .. lib)
            end
        end
        -- and a digest still works, through the library loaded then
        local out = assert(io.popen(q(helpers.bin) .. [[ script /dev/stdin <<'EOF'
io.write(require("llmbox.core").sha256("abc"))
EOF]]))
        local text = out:read("*a")
        out:close()
        assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", text)
    end)

    it("the llmbox binary exports none of the core's internals", function()
        local leaked = {}
        for _, name in ipairs(exported(helpers.bin)) do
            if name:match("^lb_") or name:match("^native_") then leaked[#leaked + 1] = name end
        end
        assert.same({}, leaked)
    end)
end)

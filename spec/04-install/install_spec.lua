-- make install and luarocks make produce a working CLI and a module plain LuaJIT can load.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local function sh(cmd)
    local out = helpers.tmpname()
    local ok = os.execute("(" .. cmd .. ") >" .. out .. " 2>&1 </dev/null")
    local text = helpers.read(out)
    os.remove(out)
    return ok == 0 or ok == true, text
end

describe("installation", function()
    it("make install PREFIX DESTDIR: CLI, C module, Lua tree and policies", function()
        local dest = helpers.tmppath()
        local ok, out = sh("make -s install PREFIX=/opt/llmbox DESTDIR=" .. q(dest))
        assert.is_true(ok, out)
        local root = dest .. "/opt/llmbox"
        for _, f in ipairs({ "/bin/llmbox", "/lib/lua/5.1/llmbox/core.so", "/lib/lua/5.1/llmbox/http_core.so", "/lib/lua/5.1/llmbox/ws_core.so",
            "/lib/lua/5.1/llmbox/llmbox-run",
            "/share/lua/5.1/llmbox/init.lua", "/share/lua/5.1/resty/llmbox.lua",
            "/share/lua/5.1/llmbox/recipes/python.lua", "/share/llmbox/policies/default.lua" }) do
            assert.is_truthy(helpers.read(root .. f), "missing " .. f)
        end
        -- the installed binary finds its Lua tree and policies next to itself
        ok, out = sh(q(root .. "/bin/llmbox") .. " run -p strict -c 'print(6*7)'")
        assert.is_true(ok, out)
        assert.equal("42\n", out)
        -- pools find the installed pool policies and the warm start's files
        local script = helpers.write(helpers.tmppath(".lua"), [[
local p = assert(llmbox.pool({ lang = "python", min = 1, max = 1 }))
local s = assert(llmbox.session({ pool = p }))
local r = assert(s:run("print(7)"))
io.write(r.stdout, tostring(r.warm), "\n")
s:close()
p:close()
]])
        ok, out = sh(q(root .. "/bin/llmbox") .. " script " .. q(script))
        os.remove(script)
        assert.is_true(ok, out)
        assert.equal("7\ntrue\n", out)
        -- the installed binary finds the HTTP module beside its own library directory
        script = helpers.write(helpers.tmppath(".lua"), [[
local _, err, code = require("llmbox.http").request{ url = "http://x/", unix_socket = "/nonexistent.sock" }
io.write(code, "\n")
]])
        ok, out = sh(q(root .. "/bin/llmbox") .. " script " .. q(script))
        os.remove(script)
        assert.is_true(ok, out)
        assert.equal("ENOENT\n", out)
        -- and the MCP tools are there
        ok, out = sh(q(root .. "/bin/llmbox") .. " tools --format anthropic")
        assert.is_true(ok, out)
        assert.matches('"name":"execute_code"', out, 1, true)
        -- plain LuaJIT loads the installed module
        ok, out = sh("cd / && LUA_PATH=" .. q(root .. "/share/lua/5.1/?.lua;" .. root .. "/share/lua/5.1/?/init.lua;;")
            .. " LUA_CPATH=" .. q(root .. "/lib/lua/5.1/?.so;;")
            .. [[ luajit -e 'local llmbox = require "llmbox"; local r = assert(llmbox.run("print(1+1)")); io.write(r.stdout)']])
        assert.is_true(ok, out)
        assert.equal("2\n", out)
        sh("rm -rf " .. q(dest))
    end)

    it("a C module without its run helper beside it: sessions fail and say how to fix it", function()
        local dir = helpers.tmppath()
        assert.is_true(sh("mkdir -p " .. q(dir .. "/llmbox") .. " && cp build/lib/llmbox/core.so " .. q(dir .. "/llmbox/")))
        local ok, out = sh("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH=" .. q(dir .. "/?.so;;")
            .. [[ luajit -e 'local s, err = require("llmbox").session({ lang = "python" })
io.write(tostring(s), " ", tostring(err))']])
        sh("rm -rf " .. q(dir))
        assert.is_true(ok, out)
        assert.matches("^nil cannot create the sandbox: llmbox's run helper .*/llmbox/llmbox%-run: "
            .. "No such file or directory %(run make, or reinstall llmbox%)$", out)
    end)

    it("a run helper from another build refuses the C module's jobs, and says so", function()
        -- helpers built here from the sources with a job format id: the C module's (the control:
        -- it works), then another
        local id = helpers.read("build/lib/llmbox/core.so"):match("llmbox%-run%-job (%x+)")
        assert.is_truthy(id, "no job format id in core.so")
        local objs = {}
        for _, o in ipairs({ "util", "fds", "caps", "filter", "jail", "limits", "cgroup", "chain", "chain_child" }) do
            objs[#objs + 1] = "build/obj/runtime/" .. o .. ".o"
        end
        local function with_helper(wire_id)
            local dir = helpers.tmppath()
            local built, log = sh("mkdir -p " .. q(dir .. "/llmbox") .. " && cp build/lib/llmbox/core.so " .. q(dir .. "/llmbox/")
                .. " && cc -std=c11 -O2 -DLB_WIRE_ID='\"" .. wire_id .. "\"' -static -o " .. q(dir .. "/llmbox/llmbox-run")
                .. " runtime/run_helper.c runtime/chain_wire.c " .. table.concat(objs, " "))
            assert.is_true(built, log)
            local ok, out = sh("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH=" .. q(dir .. "/?.so;;")
                .. [[ luajit -e 'local s, err = require("llmbox").session({ lang = "python" })
local r = s and s:run("print(6 * 7)"); io.write(tostring(r and r.stdout), " ", tostring(err))']])
            sh("rm -rf " .. q(dir))
            assert.is_true(ok, out)
            return out
        end
        assert.equal("42\n nil", with_helper(id))
        assert.matches("^nil cannot create the sandbox: llmbox%-run is from another build than the library "
            .. "that started it: reinstall llmbox", with_helper(id:reverse()))
    end)

    it("luarocks make with the rockspec", function()
        local tree = helpers.tmppath()
        local ok, out = sh("luarocks --lua-version=5.1 make --deps-mode=none --tree=" .. q(tree) .. " llmbox-scm-1.rockspec")
        assert.is_true(ok, out)
        ok, out = sh(q(tree .. "/bin/llmbox") .. " run -c 'print(\"rock\")'")
        assert.is_true(ok, out)
        assert.equal("rock\n", out)
        local script = helpers.write(helpers.tmppath(".lua"),
            'local p = assert(llmbox.pool({ lang = "python", min = 1, max = 1 }))\n'
            .. 'local s = assert(llmbox.session({ pool = p }))\n'
            .. 'io.write(assert(s:run("print(8)")).stdout)\ns:close()\np:close()\n')
        ok, out = sh(q(tree .. "/bin/llmbox") .. " script " .. q(script))
        os.remove(script)
        assert.is_true(ok, out)
        assert.equal("8\n", out)
        ok, out = sh("cd / && LUA_PATH=" .. q(tree .. "/share/lua/5.1/?.lua;" .. tree .. "/share/lua/5.1/?/init.lua;;")
            .. " LUA_CPATH=" .. q(tree .. "/lib/lua/5.1/?.so;;")
            .. [[ luajit -e 'print(require("llmbox").VERSION)']])
        assert.is_true(ok, out)
        assert.matches("^%d+%.%d+%.%d+", out)
        sh("rm -rf " .. q(tree))
    end)

    it("the binary loads its Lua from make's bytecode, and from a source edited since", function()
        local root = helpers.tmppath()
        local ok, out = sh("make -s install PREFIX=" .. q(root))
        assert.is_true(ok, out)
        local src = root .. "/share/lua/5.1/llmbox/cli.lua"
        local bc = root .. "/lib/lua/5.1/llmbox/bc/llmbox/cli.lua"
        local text = helpers.read(src)
        assert.is_truthy(helpers.read(bc), "no bytecode installed at " .. bc)
        -- bytecode that names the source and prints something else: the binary runs it
        local edited = text:gsub('io.stdout:write%("llmbox ", ', 'io.stdout:write("bytecode llmbox ", ', 1)
        local tmp = helpers.write(helpers.tmppath(".lua"), edited)
        ok, out = sh("luajit -bg -F " .. q(src) .. " " .. q(tmp) .. " " .. q(bc))
        assert.is_true(ok, out)
        ok, out = sh(q(root .. "/bin/llmbox") .. " --version")
        assert.is_true(ok, out)
        assert.matches("^bytecode llmbox ", out)
        -- a source edited after the bytecode was made wins over it
        os.execute("sleep 0.02")
        helpers.write(src, (text:gsub('io.stdout:write%("llmbox ", ', 'io.stdout:write("source llmbox ", ', 1)))
        ok, out = sh(q(root .. "/bin/llmbox") .. " --version")
        assert.is_true(ok, out)
        assert.matches("^source llmbox ", out)
        -- bytecode that names another file (a tree moved, or a DESTDIR) is not used
        ok, out = sh("luajit -bg -F /elsewhere/cli.lua " .. q(tmp) .. " " .. q(bc))
        assert.is_true(ok, out)
        ok, out = sh(q(root .. "/bin/llmbox") .. " --version")
        assert.is_true(ok, out)
        assert.matches("^source llmbox ", out)
        os.remove(tmp)
        sh("rm -rf " .. q(root))
    end)
end)

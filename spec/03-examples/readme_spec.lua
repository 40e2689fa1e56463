-- The README's code blocks are tested from the README itself, so what it shows cannot drift from
-- what works: its shell blocks run from the checkout, its Lua blocks run with plain LuaJIT, its
-- JSON blocks parse, and a block marked as a copy of a file says what the file says. Blocks that
-- install system-wide (`make demo`, `make test`, luarocks) are marked "fresh" and run by
-- `make test-fresh` inside a fresh Debian root (.ci/fresh-inside.sh). .ci/readme-blocks.awk
-- extracts them for both.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local root = helpers.root

local function sh(cmd)
    local out = helpers.tmpname()
    local ok = os.execute("(" .. cmd .. ") >" .. q(out) .. " 2>&1 </dev/null")
    local text = helpers.read(out) or ""
    os.remove(out)
    return ok == 0 or ok == true, text
end

local dir = helpers.tmppath()
assert(os.execute("mkdir -m 700 " .. q(dir)) == 0)
local ok, out = sh("awk -v dir=" .. q(dir) .. " -f .ci/readme-blocks.awk README.md")
assert(ok, "extracting the README's blocks: " .. out)

local blocks = {}
local p = io.popen("ls " .. q(dir))
for name in p:lines() do
    local n, kind, lang = name:match("^(%d+)%.([%w-]+)%.([%w-]+)$")
    if n then blocks[#blocks + 1] = { n = n, kind = kind, lang = lang, path = dir .. "/" .. name,
        arg = (helpers.read(dir .. "/" .. n .. ".arg") or ""):gsub("%s+$", "") } end
end
p:close()

-- Lua blocks run as a user would run them: plain LuaJIT with the paths `make` prints, from a
-- scratch directory of their own (they may write files, e.g. local.txt).
local lua_env = "LUA_PATH=" .. q(root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;;")
    .. " LUA_CPATH=" .. q(root .. "/build/lib/?.so;;")

describe("README", function()
    it("has its blocks found", function()
        local langs = {}
        for _, b in ipairs(blocks) do langs[b.lang] = (langs[b.lang] or 0) + 1 end
        assert.is_true((langs.sh or 0) >= 3 and (langs.lua or 0) >= 3 and (langs.json or 0) >= 1,
            "blocks found in README.md: " .. require("llmbox.json").encode(langs))
    end)

    for _, b in ipairs(blocks) do
        local text = helpers.read(b.path)
        local first = text:match("^%s*([^\n]*)") or ""
        local title = ("block %s (%s, %s): %s"):format(b.n, b.lang, b.kind, first:sub(1, 60))
        if b.kind == "fresh" and b.lang == "sh" then
            it(title .. " is run by make test-fresh", function()
                -- a fresh block must still be plain shell that parses
                local parsed, perr = sh("bash -n " .. q(b.path))
                assert.is_true(parsed, perr)
            end)
        elseif b.kind == "run" and b.lang == "sh" then
            it(title, function()
                local ran, output = sh("cd " .. q(root) .. " && bash -e -o pipefail " .. q(b.path))
                assert.is_true(ran, output)
            end)
        elseif b.kind == "run" and b.lang == "lua" then
            it(title, function()
                local scratch = dir .. "/lua-" .. b.n
                assert(os.execute("mkdir " .. q(scratch)) == 0)
                local ran, output = sh("cd " .. q(scratch) .. " && " .. lua_env .. " luajit " .. q(b.path))
                assert.is_true(ran, output)
                -- `--> text` comments show what the block prints: they must be what it printed
                local function squash(l) return (l:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end
                local shown, printed = {}, {}
                for l in text:gmatch("%-%->([^\n]*)") do shown[#shown + 1] = squash(l) end
                for l in output:gmatch("[^\n]+") do printed[#printed + 1] = squash(l) end
                assert.same(shown, printed)
            end)
        elseif b.kind == "run" and b.lang == "json" then
            it(title, function()
                local decoded, jerr = pcall(require("cjson").decode, text)
                assert.is_true(decoded, tostring(jerr))
            end)
        elseif b.kind == "policy" and b.lang == "lua" then
            it(title .. " is a policy that loads", function()
                local path = dir .. "/policy-" .. b.n .. ".lua"
                helpers.write(path, text)
                local loaded, perr = require("llmbox.policy").load(path)
                assert.is_truthy(loaded, perr)
            end)
        elseif b.kind == "file" then
            it(title .. " is " .. b.arg, function()
                local file = helpers.read(root .. "/" .. b.arg)
                assert.is_truthy(file, b.arg .. " does not exist")
                assert.equal(file, text)
            end)
        else
            it(title, function()
                error(("README block %s has no test: mark it with <!-- readme-test: fresh --> (shell that "
                    .. "installs system-wide) or <!-- readme-test: file PATH --> (a copy of a file), or "
                    .. "teach spec/03-examples/readme_spec.lua to run %s blocks"):format(b.n, b.lang))
            end)
        end
    end

    teardown(function() os.execute("rm -rf " .. q(dir)) end)
end)

-- luacheck settings for `make lint` (Debian's lua-check).
std = "luajit"
max_line_length = 130
ignore = {
    "212/self", -- a method need not use self
    "213",      -- unused loop variables: `for i = 1, n do` repeats n times
    "581",      -- `not (x > y)` is deliberate where NaN must fail the test too
}
files["spec"] = { std = "+busted" }
-- run by `llmbox script`, which hands them the llmbox module as a global
for _, dir in ipairs({ "bench", "examples", "spec/support/soak_worker.lua" }) do
    files[dir] = { read_globals = { "llmbox" } }
end
-- specs and benchmarks quote whole commands and expected outputs on one line
files["spec"].max_line_length = 180
files["bench"].max_line_length = 180
-- OpenResty code: nginx's Lua module provides the ngx global
files["lua/resty"] = { std = "+ngx_lua" }
files["examples/openresty"] = { std = "+ngx_lua" }

-- `luajit spec/support/backend_usable.lua NAME`: exit 0 when the backend can run sandboxes here;
-- else prints why (spec/run.sh skips its conformance run with that reason).
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local backends = require "llmbox.backends"
local name = arg[1] or ""
local driver, err = backends.get(name)
if not driver then
    io.stdout:write(err, "\n")
    os.exit(1)
end
local ok, why = driver.usable()
if not ok then
    io.stdout:write(("backend %q is not usable here: %s\n"):format(driver.name, tostring(why)))
    os.exit(1)
end
os.exit(0)

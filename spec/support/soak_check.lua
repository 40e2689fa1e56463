-- Runs soak workers in parallel and checks what they leave behind. Used by the soak spec and by
-- `make soak`. Prints a summary and exits non-zero on any leak or unexpected result.
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local soak = require "support.soak_lib"

local workers, runs = tonumber(arg[1]) or 8, tonumber(arg[2]) or 500
local report = soak.run(workers, runs)
io.write(soak.describe(report), "\n")
os.exit(#report.problems == 0 and 0 or 1)

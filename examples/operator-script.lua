-- An operator's script: run with `llmbox script examples/operator-script.lua N [POLICY]`.
-- Runs the same snippet in one session N times, shows the workspace persisting between runs,
-- and prints a summary. `llmbox` and `arg` are set by `llmbox script`.
local n = tonumber(arg[1]) or 3
local policy = arg[2] or "default"

local s = assert(llmbox.session{ lang = "python", policy = policy })
for i = 1, n do
    local r = assert(s:run([[
import os
path = "/sandbox/count.txt"
count = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(count + 1))
print("run", count + 1)
]]))
    io.write(r.stdout)
end

local safe, report = s:is_safe("import subprocess; subprocess.run(['id'])")
print(("is_safe(subprocess): %s (%d violation%s)"):format(tostring(safe), #report.violations,
    #report.violations == 1 and "" or "s"))
s:close()
print("done with policy " .. policy)

-- The libFuzzer targets (fuzz/fuzz.mk): built with clang, each run briefly the way `make fuzz`
-- runs it (reported bugs skipped, two targets at a time), which must end without a crash after
-- thousands of inputs.
-- Control case: the reproducer of each reported bug still fails its target with nothing skipped,
-- so the checks that would catch it are live (delete the reproducer when the bug is fixed).
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local SECONDS = 5
-- how many inputs prove that a target really ran: not a speed (CI runs the specs beside other
-- runs on 2 cores, where the seccomp target once managed 1573 in 5 s)
local MIN_RUNS = 500
local TARGETS = { "seccomp", "lua_core", "paths", "tar", "resolve", "report", "http", "cell", "layer", "job" }

local function sh(cmd)
    local out = helpers.tmpname()
    local ok = os.execute("(" .. cmd .. ") >" .. out .. " 2>&1 </dev/null")
    local text = helpers.read(out) or ""
    os.remove(out)
    return ok == 0 or ok == true, text
end

-- paths and tar create files for real: on a tmpfs they run about 5 times faster than on ext4.
local function scratch_dir()
    local dir = "/dev/shm/llmbox-fuzz-spec-" .. helpers.uid()
    local ok = os.execute("mkdir -p " .. q(dir) .. " 2>/dev/null && [ -w " .. q(dir) .. " ]")
    if ok == 0 or ok == true then return dir end
    return helpers.root .. "/build/fuzz-tmp"
end

describe("fuzz targets", function()
    local built, build_out, run_ok, run_out

    setup(function()
        built, build_out = sh("make -s fuzz-build")
        if built then
            run_ok, run_out = sh("make -s -j2 fuzz-run FUZZ_SECONDS=" .. SECONDS
                .. " FUZZ_TMP=" .. q(scratch_dir()))
        end
    end)

    it("build with clang, ASan and UBSan, warnings as errors", function()
        assert.is_true(built, build_out)
    end)

    for _, t in ipairs(TARGETS) do
        it(t .. ": " .. SECONDS .. " s without a crash, more than " .. MIN_RUNS .. " inputs", function()
            assert.is_true(built, build_out)
            local log = helpers.read("build/fuzz/" .. t .. ".log") or ""
            assert.is_truthy(run_out:find("fuzz " .. t .. ": ok", 1, true), run_out .. "\n" .. log:sub(-3000))
            local runs = tonumber(log:match("\nDone (%d+) runs"))
            assert.is_truthy(runs, "no \"Done N runs\" line:\n" .. log:sub(-3000))
            assert.is_true(runs > MIN_RUNS, t .. " ran only " .. tostring(runs) .. " inputs")
        end)
    end

    it("make fuzz-run exits 0", function()
        assert.is_true(built, build_out)
        assert.is_true(run_ok, run_out)
    end)

    it("every crash the fuzzers ever found stays fixed: its reproducer passes its target", function()
        assert.is_true(built, build_out)
        local p = io.popen("ls fuzz/crashes/*/* 2>/dev/null")
        local files = {}
        for f in p:lines() do files[#files + 1] = f end
        p:close()
        assert.is_true(#files > 0, "no reproducers found")
        local tmp = helpers.root .. "/build/fuzz-tmp"
        os.execute("mkdir -p " .. q(tmp))
        for _, f in ipairs(files) do
            local t = f:match("^fuzz/crashes/([^/]+)/")
            local passes, out = sh("LB_FUZZ_TMP=" .. q(tmp) .. " build/fuzz/fuzz_" .. t .. " " .. q(f))
            assert.is_true(passes, f .. " crashes again:\n" .. tostring(out):sub(-2000))
        end
        os.execute("rm -rf " .. q(helpers.root .. "/build/fuzz-tmp"))
    end)
end)

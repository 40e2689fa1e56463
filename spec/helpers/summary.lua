-- busted output handler: busted's plain terminal output, plus the counts written to the file
-- named by $LLMBOX_SPEC_COUNTS, so spec/run.sh can print one "N passed, N failed" line for all
-- suites (root and unprivileged). Each failure and error is also appended, one line each, to the
-- file named by $LLMBOX_SPEC_FAILURES, so that the closing lines of a long CI log say which specs
-- failed (busted prints them far above, before its pending list).
return function(options)
    local busted = require "busted"
    local handler = require("busted.outputHandlers.plainTerminal")(options)
    -- each spec file's wall time, so a long run's log says where its time went
    local uv = require "luv"
    local started, took = {}, {}
    busted.subscribe({ "file", "start" }, function(file)
        started[file.name] = uv.hrtime()
        return nil, true
    end)
    busted.subscribe({ "file", "end" }, function(file)
        if started[file.name] then took[#took + 1] = { file.name, (uv.hrtime() - started[file.name]) / 1e9 } end
        return nil, true
    end)
    busted.subscribe({ "suite", "end" }, function()
        table.sort(took, function(a, b) return a[2] > b[2] end)
        local total = 0
        for _, t in ipairs(took) do total = total + t[2] end
        io.write(("\nslowest spec files (of %d, %.0f s in all):\n"):format(#took, total))
        for i = 1, math.min(12, #took) do io.write(("  %6.1f s  %s\n"):format(took[i][2], took[i][1])) end
        local path = os.getenv("LLMBOX_SPEC_COUNTS")
        if path then
            local f = io.open(path, "w")
            if f then
                f:write(string.format("%d %d %d %d\n", handler.successesCount, handler.failuresCount,
                    handler.errorsCount, handler.pendingsCount))
                f:close()
            end
        end
        local fpath = os.getenv("LLMBOX_SPEC_FAILURES")
        local f = fpath and io.open(fpath, "a")
        if f then
            for kind, list in pairs({ FAILED = handler.failures, ERROR = handler.errors }) do
                for _, e in ipairs(list) do
                    local where = e.trace and e.trace.short_src and
                        (e.trace.short_src .. ":" .. tostring(e.trace.currentline)) or "?"
                    local msg = tostring(e.message or ""):gsub("\n.*", "")
                    f:write(string.format("%s %s %s: %s\n", kind, where, e.name or "?", msg:sub(1, 300)))
                end
            end
            f:close()
        end
        return nil, true
    end)
    return handler
end

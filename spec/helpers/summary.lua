-- busted output handler: busted's plain terminal output, plus the counts written to the file
-- named by $LLMBOX_SPEC_COUNTS, so spec/run.sh can print one "N passed, N failed" line for all
-- suites (root and unprivileged). Each failure and error is also appended, one line each, to the
-- file named by $LLMBOX_SPEC_FAILURES, so that the closing lines of a long CI log say which specs
-- failed (busted prints them far above, before its pending list).
return function(options)
    local busted = require "busted"
    local handler = require("busted.outputHandlers.plainTerminal")(options)
    busted.subscribe({ "suite", "end" }, function()
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

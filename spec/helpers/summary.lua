-- busted output handler: busted's plain terminal output, plus the counts written to the file
-- named by $LLMBOX_SPEC_COUNTS, so spec/run.sh can print one "N passed, N failed" line for all
-- suites (root and unprivileged).
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
        return nil, true
    end)
    return handler
end

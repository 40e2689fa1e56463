# llmbox's interactive R, the R half (llmbox_kernel_r.py is the other): cells run in the global
# environment of one R process. The relay writes each cell's code to a file and its number on
# standard input; this loop evaluates it, prints the last visible value into DIR/N.value (as R's
# console would print it), closes the plot devices (each cell's plots are its own), and answers
# "N STATUS PLOTS" on fd 4. SIGINT from the relay interrupts the cell (status 130).
local({
    dir <- Sys.getenv("LLMBOX_CELL_DIR")
    plots <- Sys.getenv("LLMBOX_PLOTS_DIR")
    input <- file("stdin", open = "r")
    answer <- file("/proc/self/fd/4", open = "w", raw = TRUE)
    repeat {
        line <- readLines(input, n = 1, warn = FALSE)
        if (length(line) == 0) quit(save = "no", status = 0)
        n <- as.integer(line)
        path <- file.path(dir, paste0(n, ".R"))
        status <- tryCatch({
            exprs <- parse(file = path, keep.source = TRUE,
                           srcfile = srcfilecopy(sprintf("<cell %d>", n), readLines(path, warn = FALSE)))
            shown <- NULL
            for (e in exprs) shown <- withVisible(eval(e, envir = globalenv()))
            if (!is.null(shown) && shown$visible) {
                writeLines(utils::capture.output(print(shown$value)), file.path(dir, paste0(n, ".value")))
            }
            0L
        }, interrupt = function(e) {
            cat("Interrupted\n", file = stderr())
            130L
        }, error = function(e) {
            # as R prints it: "Error in f(x): ..." or, from the cell's own top level, "Error: ..."
            call <- conditionCall(e)
            top <- is.null(call) || identical(call[[1]], quote(eval))
            cat("Error", if (!top) paste0(" in ", deparse(call)[1]), ": ", conditionMessage(e), "\n",
                sep = "", file = stderr())
            1L
        })
        while (grDevices::dev.cur() > 1) grDevices::dev.off()
        made <- nzchar(plots) && length(list.files(plots)) > 0
        flush(stdout())
        flush(stderr())
        writeLines(sprintf("%d %d %d", n, status, as.integer(made)), answer)
        flush(answer)
    }
})

-- R: the host's Rscript runs the code as a script file. Plots from ggplot2 or base graphics are
-- captured as PNGs by the startup file r/Rprofile (unless the code opens a device itself).
return {
    name = "r",
    aliases = { "rscript" }, -- "R" works too: names are looked up in lower case
    extensions = { "r" },    -- matched case-insensitively: .R and .r
    description = "R (the host's Rscript)",
    image = "r-base:4.4.1",
    file = "main.R",
    run = { "/usr/bin/Rscript", "--no-save", "--no-restore", "{file}" },
    -- Debian keeps R's Renviron, Rprofile.site, ldpaths and Makeconf in /etc/R (/usr/lib/R/etc
    -- links there): without them R starts without its default packages. /etc/fonts is
    -- fontconfig's configuration, for text in png()/ggsave() plots. Config only, nothing secret.
    mounts = { "/etc/R", "/etc/fonts" },
    hooks = { { src = "Rprofile", dst = "{code}/hooks/Rprofile" } },
    -- interactive sessions: one R process keeps the cells' state; a small relay in the host's
    -- Python speaks llmbox's cell protocol for it (R has no threads to read a socket with)
    interactive = {
        run = { "/usr/bin/python3", "-u", "{code}/hooks/llmbox_kernel_r.py" },
        files = { { src = "llmbox_kernel_r.py", dst = "{code}/hooks/llmbox_kernel_r.py" },
            { src = "llmbox_kernel.R", dst = "{code}/hooks/llmbox_kernel.R" } },
    },
    plots = true,
    env = {
        R_PROFILE_USER = "{code}/hooks/Rprofile",
        TMPDIR = "/tmp",                       -- R's tempdir(), writable
        R_LIBS_USER = "{workspace}/.R/library",   -- packages the program installs itself (offline:
                                               -- from files it was given), kept for the session
        R_PAPERSIZE = "a4",
        R_HISTFILE = "/tmp/.Rhistory",
        XDG_CACHE_HOME = "/tmp/.cache",        -- fontconfig's cache, built once per session:
                                               -- not in the workspace
    },
    version = { "/usr/bin/Rscript", "--version" },
    checks = "r",
    example = 'x <- c(1, 2, 3)\ncat("hello from R, mean =", mean(x), "\\n")',
    -- install.packages into R_LIBS_USER (in the workspace) from the policy's repository: a CRAN
    -- mirror URL or a local repository directory (src/contrib with a PACKAGES index). Package
    -- names travel as arguments, never inside R code.
    install = function(packages, sources)
        local repos = sources.repos or "https://cloud.r-project.org"
        if repos:sub(1, 1) == "/" then repos = "file://" .. repos end
        local argv = { "/usr/bin/Rscript", "--no-save", "--no-restore", "-e", table.concat({
            "a <- commandArgs(TRUE); lib <- Sys.getenv('R_LIBS_USER')",
            "dir.create(lib, recursive = TRUE, showWarnings = FALSE)",
            "install.packages(a[-1], lib = lib, repos = a[1])",
            "if (!all(a[-1] %in% rownames(installed.packages(lib.loc = lib)))) quit(status = 1)",
        }, "; "), repos }
        for _, p in ipairs(packages) do argv[#argv + 1] = p end
        return argv
    end,
    details = {
        package_manager = "install.packages (into /sandbox/.R/library when the policy allows it)",
        preinstalled = { "base R (stats, utils, graphics, grDevices, methods, ...)", "ggplot2" },
        plots = true,
    },
}

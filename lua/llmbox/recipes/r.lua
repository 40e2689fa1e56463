-- R: the host's Rscript runs the code as a script file. Plots from ggplot2 or base graphics are
-- captured as PNGs by the startup file r/Rprofile (unless the code opens a device itself).
return {
    name = "r",
    aliases = { "rscript" }, -- "R" works too: names are looked up in lower case
    extensions = { "r" },    -- matched case-insensitively: .R and .r
    description = "R (the host's Rscript)",
    file = "main.R",
    run = { "/usr/bin/Rscript", "--no-save", "--no-restore", "{file}" },
    -- Debian keeps R's Renviron, Rprofile.site, ldpaths and Makeconf in /etc/R (/usr/lib/R/etc
    -- links there): without them R starts without its default packages. /etc/fonts is
    -- fontconfig's configuration, for text in png()/ggsave() plots. Config only, nothing secret.
    mounts = { "/etc/R", "/etc/fonts" },
    hooks = { { src = "Rprofile", dst = "/tmp/llmbox/hooks/Rprofile" } },
    plots = true,
    env = {
        R_PROFILE_USER = "/tmp/llmbox/hooks/Rprofile",
        TMPDIR = "/tmp",                       -- R's tempdir(), writable
        R_LIBS_USER = "/sandbox/.R/library",   -- packages the program installs itself (offline:
                                               -- from files it was given), kept for the session
        R_PAPERSIZE = "a4",
        R_HISTFILE = "/tmp/.Rhistory",
        XDG_CACHE_HOME = "/tmp/.cache",        -- fontconfig's cache, built once per session:
                                               -- not in the workspace
    },
    version = { "/usr/bin/Rscript", "--version" },
    checks = "r",
    example = 'x <- c(1, 2, 3)\ncat("hello from R, mean =", mean(x), "\\n")',
    details = {
        package_manager = "install.packages (no network in the sandbox: CRAN is not reachable)",
        preinstalled = { "base R (stats, utils, graphics, grDevices, methods, ...)", "ggplot2" },
        plots = true,
    },
}

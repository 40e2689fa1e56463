-- The permissive llmbox policy: for long or heavy jobs from code you mostly trust (your own
-- agent doing data analysis, builds, test suites).
--
-- Permissive is not "unsandboxed": it extends default.lua, so the jail is the same — read-only
-- host mounts, loopback-only network, the same refused syscalls and ioctls, no capabilities.
-- Only the resource limits grow, library installs are allowed (with the network for the install
-- step only), and code checks report instead of refusing.

return {
    extends = "default",
    description = "Bigger limits (5 min, 2G memory) and code checks that warn instead of refusing; "
        .. "same jail, network and syscall rules as default.",

    limits = {
        timeout = "5m",
        cpu = "5m",
        memory = "2G",
        processes = 256,
        output = "16M",
        workspace = "1G",
        -- open_files, file_size and tmp stay as in default
    },

    -- Library installs are allowed, with a network for the install step only: the package
    -- manager (and whatever install-time code a package runs) gets egress of its own to the
    -- registries (never the host, its loopback, link-local or private addresses) and writes to
    -- the workspace; the program itself still runs with loopback only.
    libraries = {
        allow = true,
        network = true,
    },

    checks = {
        -- "warn": unsafe findings are returned with the result (as warnings) but the code runs
        mode = "warn",
    },
}

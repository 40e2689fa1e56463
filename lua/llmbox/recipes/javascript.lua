-- JavaScript: Node.js from the host's /usr, run as a script file so stack traces name real lines.
-- The code may be CommonJS (require) or an ES module (import/export, top-level await): the hook
-- esm.cjs, preloaded with -r, tells Node which one before main.js loads.
return {
    name = "javascript",
    aliases = { "js", "node", "nodejs" },
    extensions = { "js", "cjs", "mjs" },
    description = "JavaScript on Node.js (the host's /usr/bin/node)",
    image = "node:20-slim",
    file = "main.js",
    -- node.sh execs /usr/bin/node, adding --jitless when an address-space limit leaves V8 no
    -- room for its JIT (see there)
    run = { "/bin/sh", "{code}/hooks/node.sh", "-r", "{code}/hooks/esm.cjs", "{file}" },
    hooks = {
        { src = "node.sh", dst = "{code}/hooks/node.sh" },
        { src = "esm.cjs", dst = "{code}/hooks/esm.cjs" },
    },
    -- interactive sessions: one node process whose global scope the cells share (llmbox_kernel.cjs)
    interactive = {
        run = { "/bin/sh", "{code}/hooks/node.sh", "{code}/hooks/llmbox_kernel.cjs" },
        files = { { src = "llmbox_kernel.cjs", dst = "{code}/hooks/llmbox_kernel.cjs" } },
    },
    env = {
        NODE_OPTIONS = "",             -- nothing from the policy's environment changes node's flags
        NODE_DISABLE_COLORS = "1",     -- plain text in captured output
        NO_UPDATE_NOTIFIER = "1",      -- npm (if present) must not try the network
        NODE_REPL_HISTORY = "",
    },
    version = { "/usr/bin/node", "--version" },
    checks = "javascript",
    example = 'console.log("hello from node")',
    -- npm into the workspace (/sandbox/node_modules, linked next to main.js by esm.cjs); the
    -- registry from the policy's libraries.sources.javascript, else npm's default
    install = function(packages, sources)
        local argv = { "/usr/bin/npm", "install", "--prefix", "{workspace}", "--no-audit", "--no-fund",
            "--no-update-notifier", "--no-package-lock", "--loglevel", "error",
            "--cache", "{code}/npm-cache" }
        if sources.registry then
            argv[#argv + 1] = "--registry"
            argv[#argv + 1] = sources.registry
        end
        argv[#argv + 1] = "--"
        for _, p in ipairs(packages) do argv[#argv + 1] = p end
        return argv
    end,
    details = {
        package_manager = "npm (installs into /sandbox/node_modules when the policy allows it)",
        preinstalled = { "Node.js built-in modules (fs, path, crypto, zlib, util, ...)" },
        plots = false,
    },
}

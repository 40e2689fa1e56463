-- JavaScript: Node.js from the host's /usr, run as a script file so stack traces name real lines.
-- The code may be CommonJS (require) or an ES module (import/export, top-level await): the hook
-- esm.cjs, preloaded with -r, tells Node which one before main.js loads.
return {
    name = "javascript",
    aliases = { "js", "node", "nodejs" },
    extensions = { "js", "cjs", "mjs" },
    description = "JavaScript on Node.js (the host's /usr/bin/node)",
    file = "main.js",
    -- node.sh execs /usr/bin/node, adding --jitless when an address-space limit leaves V8 no
    -- room for its JIT (see there)
    run = { "/bin/sh", "/tmp/llmbox/hooks/node.sh", "-r", "/tmp/llmbox/hooks/esm.cjs", "{file}" },
    hooks = {
        { src = "node.sh", dst = "/tmp/llmbox/hooks/node.sh" },
        { src = "esm.cjs", dst = "/tmp/llmbox/hooks/esm.cjs" },
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
    details = {
        package_manager = "npm (no network in the sandbox: only built-in modules are available)",
        preinstalled = { "Node.js built-in modules (fs, path, crypto, zlib, util, ...)" },
        plots = false,
    },
}

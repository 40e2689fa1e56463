// Preloaded (node -r) before /tmp/llmbox/main.js: lets the program be an ES module (import,
// export, top-level await) or CommonJS (require), whichever it is written as, on any Node >= 12.
// Node picks the main file's format from the nearest package.json; this writes one saying
// "module" next to main.js only when the code does not compile as CommonJS for an ES-module
// reason (the same test as Node 22's automatic detection).
"use strict";
(function () {
    const fs = require("fs"), path = require("path"), vm = require("vm"), Module = require("module");
    const main = process.argv[1];
    if (!main) return;
    const pkg = path.join(path.dirname(main), "package.json");
    let esm = false;
    try {
        new vm.Script(Module.wrap(fs.readFileSync(main, "utf8")), { filename: main });
    } catch (e) {
        esm = e instanceof SyntaxError && /Cannot use import statement|Unexpected token 'export'|import\.meta|await is only valid|Cannot use 'import\.meta'/.test(e.message);
    }
    try {
        if (esm) fs.writeFileSync(pkg, '{"type":"module"}\n');
        else fs.rmSync(pkg, { force: true });
    } catch (e) { /* read-only location: Node reports the syntax error itself */ }
})();

// Packages installed for the session (npm install --prefix /sandbox) live in
// /sandbox/node_modules; a link next to main.js lets both require() and import find them.
(function () {
    const fs = require("fs"), path = require("path");
    const main = process.argv[1];
    if (!main) return;
    const link = path.join(path.dirname(main), "node_modules");
    try {
        if (fs.existsSync("/sandbox/node_modules") && !fs.existsSync(link)) {
            fs.symlinkSync("/sandbox/node_modules", link);
        }
    } catch (e) { /* nothing to link: plain built-in modules still work */ }
})();

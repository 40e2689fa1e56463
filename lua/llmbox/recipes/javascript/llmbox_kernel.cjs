// llmbox's interactive JavaScript: one Node.js process that stays alive in the sandbox and runs
// cells in one global scope, as Node's REPL does (variables, functions and required modules
// persist; `let` and `const` too, as in a REPL).
//
// Protocol (fd 3, a socket to llmbox's supervisor; runtime/cell.c has the words): write "R" once
// ready; for each "cell TAG LEN\n" + LEN bytes of code, run it and answer
// "done TAG STATUS CPU_US PLOTS LEN\n" + LEN bytes: util.inspect of the cell's completion value
// (when it is not undefined). A cell whose value is a promise is awaited. "I\n" interrupts the
// cell in progress. The socket is read by a worker thread, because the main thread is busy with
// the user's code while a cell runs; the interrupt is a real SIGINT, which vm's breakOnSigint
// turns into an exception in the running code.
"use strict";
const fs = require("fs");
const vm = require("vm");
const util = require("util");
const { Worker } = require("worker_threads");

const CTL = 3;
const VALUE_MAX = 64 * 1024;
// [0]: 1 while a cell runs, so that the reader interrupts only then
const running = new Int32Array(new SharedArrayBuffer(4));

const reader = new Worker(`
const fs = require("fs");
const { parentPort, workerData } = require("worker_threads");
const running = workerData.running;
let buf = Buffer.alloc(0);
const chunk = Buffer.alloc(65536);
for (;;) {
    let n;
    try { n = fs.readSync(${CTL}, chunk, 0, chunk.length, null); } catch (e) { n = 0; }
    if (n <= 0) { parentPort.postMessage({ closed: true }); break; }
    buf = Buffer.concat([buf, chunk.subarray(0, n)]);
    for (;;) {
        const nl = buf.indexOf(10);
        if (nl < 0) break;
        const head = buf.subarray(0, nl).toString("latin1").split(" ");
        if (head.length === 1 && head[0] === "I") {
            buf = buf.subarray(nl + 1);
            if (Atomics.load(running, 0) === 1) process.kill(process.pid, "SIGINT");
            continue;
        }
        if (head.length !== 3 || head[0] !== "cell") process.exit(70);
        const size = Number(head[2]);
        if (buf.length < nl + 1 + size) break;
        const code = buf.subarray(nl + 1, nl + 1 + size).toString("utf8");
        buf = buf.subarray(nl + 1 + size);
        parentPort.postMessage({ tag: head[1], code });
    }
}
`, { eval: true, workerData: { running } });

// SIGINT outside a cell (an interrupt that came as the cell ended) is ignored; inside one, vm's
// breakOnSigint takes it over, and while a promise is awaited, it rejects the wait.
let interruptWait = null;
process.on("SIGINT", () => { if (interruptWait) interruptWait(); });

// require() resolves from the workspace, as a script's there would: /sandbox/node_modules (which
// s:install fills) is found, also when it appears after the first cell
globalThis.require = require("module").createRequire(process.cwd() + "/");

function cpuMicros() {
    const u = process.cpuUsage();
    return u.user + u.system;
}

function answer(tag, status, cpu, value) {
    const v = Buffer.from(value, "utf8");
    const msg = Buffer.concat([Buffer.from(`done ${tag} ${status} ${cpu} 0 ${v.length}\n`, "latin1"), v]);
    let off = 0;
    while (off < msg.length) off += fs.writeSync(CTL, msg, off);
}

function show(v) {
    let s = typeof v === "string" ? util.inspect(v) : util.inspect(v, { depth: 4 });
    if (s.length > VALUE_MAX) s = s.slice(0, VALUE_MAX) + "...";
    return s;
}

const INTERRUPTED = "Script execution interrupted.";
function interrupted(e) {
    return e instanceof Error && e.message === INTERRUPTED;
}

function report(e) {
    // the error as Node prints an uncaught one, without the kernel's frames
    let text = e && e.stack ? String(e.stack) : "Uncaught " + util.inspect(e);
    text = text.split("\n").filter((l) => !(/^\s+at /.test(l) && /llmbox_kernel\.cjs|\(node:|at node:|\[nodejs\./.test(l)))
        .join("\n");
    process.stderr.write(text + "\n");
}

let number = 0;
const queue = [];
let busy = false;

async function runCell(tag, code) {
    number += 1;
    const t0 = cpuMicros();
    let status = 0;
    let value = "";
    Atomics.store(running, 0, 1);
    try {
        let v = vm.runInThisContext(code, { filename: `<cell ${number}>`, breakOnSigint: true });
        if (v && typeof v.then === "function") {
            v = await new Promise((resolve, reject) => {
                interruptWait = () => reject(new Error(INTERRUPTED));
                v.then(resolve, reject);
            });
        }
        if (v !== undefined) {
            globalThis._ = v;
            value = show(v);
        }
    } catch (e) {
        report(e);
        status = e && (e.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED" || interrupted(e)) ? 130 : 1;
    } finally {
        interruptWait = null;
        Atomics.store(running, 0, 0);
    }
    answer(tag, status, Math.max(0, cpuMicros() - t0), value);
}

async function drain() {
    if (busy) return;
    busy = true;
    while (queue.length > 0) {
        const { tag, code } = queue.shift();
        await runCell(tag, code);
    }
    busy = false;
}

reader.on("message", (m) => {
    if (m.closed) process.exit(0);
    queue.push(m);
    drain();
});

fs.writeSync(CTL, "R");

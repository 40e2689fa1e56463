// Drives `llmbox mcp` with the official MCP TypeScript SDK client, for spec/11-mcp.
//
//   node client.mjs SCENARIO 'JSON-OPTIONS'
//
// Starts the server (LLMBOX_BIN, default build/bin/llmbox) over stdio with the SDK's
// StdioClientTransport, plays a scenario and prints one JSON object on stdout for the spec to
// check. Options common to all scenarios: env (extra variables for the server; the SDK passes
// only a few of the client's own), timeout (ms per request).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { readdirSync, readFileSync } from "node:fs";

const [scenario, raw] = process.argv.slice(2);
const opts = raw ? JSON.parse(raw) : {};
const bin = process.env.LLMBOX_BIN || "build/bin/llmbox";

async function connect() {
    const transport = new StdioClientTransport({
        command: bin,
        args: ["mcp"],
        env: { ...getDefaultEnvironment(), ...(opts.env || {}) },
        stderr: "pipe",
    });
    let stderr = "";
    transport.stderr.on("data", (d) => { stderr += d; });
    const client = new Client({ name: "llmbox-spec", version: "1.0.0" });
    await client.connect(transport);
    return { client, transport, stderr: () => stderr };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Processes whose argv is exactly `argv` (all users' processes we may read).
function processes(argv) {
    const want = argv.join("\0") + "\0";
    const found = [];
    for (const pid of readdirSync("/proc")) {
        if (!/^\d+$/.test(pid)) continue;
        try {
            if (readFileSync(`/proc/${pid}/cmdline`, "latin1") === want) found.push(Number(pid));
        } catch { /* gone meanwhile */ }
    }
    return found;
}

// Children of `pid` whose argv starts with `prefix` (the server's workers).
function children(pid, prefix) {
    const found = [];
    for (const p of readdirSync("/proc")) {
        if (!/^\d+$/.test(p)) continue;
        try {
            const stat = readFileSync(`/proc/${p}/stat`, "latin1");
            const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
            const cmd = readFileSync(`/proc/${p}/cmdline`, "latin1").split("\0");
            if (ppid === pid && prefix.every((a, i) => cmd[i + 1] === a)) found.push(Number(p));
        } catch { /* gone meanwhile */ }
    }
    return found;
}

async function waitFor(pred, ms) {
    const start = Date.now();
    while (Date.now() - start < ms) {
        if (pred()) return Date.now() - start;
        await sleep(20);
    }
    return null;
}

function errorOf(e) {
    return { error: String(e && e.message || e), code: e && e.code };
}

const scenarios = {
    // Lists tools and resources, then makes each call in turn. "$session" in an argument is
    // replaced by the session_id of the last create_session.
    async calls(c) {
        const out = {
            server: c.client.getServerVersion(),
            capabilities: c.client.getServerCapabilities(),
            tools: (await c.client.listTools()).tools,
            results: [],
        };
        if (opts.resources) {
            out.resources = (await c.client.listResources()).resources;
            out.languages = await c.client.readResource({ uri: "sandbox://languages" });
        }
        let session = null;
        for (const call of Array.isArray(opts.calls) ? opts.calls : []) {
            if (call.sleep) { await sleep(call.sleep); out.results.push({ slept: call.sleep }); continue; }
            const args = JSON.parse(JSON.stringify(call.arguments || {}).replaceAll("$session", session));
            try {
                const r = await c.client.callTool({ name: call.name, arguments: args }, undefined,
                    { timeout: opts.timeout || 60000 });
                if (call.name === "create_session" && r.structuredContent) session = r.structuredContent.session_id;
                out.results.push(r);
            } catch (e) {
                out.results.push(errorOf(e));
            }
        }
        return out;
    },

    // A long run cancelled through the SDK's AbortSignal: the run's process must go away, no
    // response may arrive for it, and the server must go on answering.
    async cancel(c) {
        const marker = opts.argv; // e.g. ["sleep", "25.4321"]
        let args = opts.arguments, session = null;
        if (opts.session) { // run in a session opened first
            session = (await c.client.callTool({ name: "create_session", arguments: opts.session }))
                .structuredContent.session_id;
            args = { ...args, session_id: session };
        }
        const ac = new AbortController();
        const call = c.client.callTool({ name: opts.tool || "execute_code", arguments: args },
            undefined, { signal: ac.signal, timeout: 60000 });
        const settled = call.then(() => "resolved", (e) => "rejected: " + e.message);
        const server = c.transport.pid;
        const seen = await waitFor(() => processes(marker).length > 0, 15000);
        const workersBefore = children(server, ["worker"]).length;
        const t0 = Date.now();
        ac.abort("the spec cancels");
        const outcome = await settled;
        const gone = await waitFor(() => processes(marker).length === 0, 5000);
        const workersGone = await waitFor(() => children(server, ["worker"]).length === 0, 5000);
        const ping = await c.client.ping().then(() => true, () => false);
        const after = await c.client.callTool({ name: "execute_code",
            arguments: { code: "echo still serving", language: "shell" } });
        const sessionAfter = session && await c.client.callTool({ name: "run_in_session",
            arguments: { session_id: session, code: args.code } });
        return { seen_ms: seen, workers_before: workersBefore, outcome, gone_ms: gone === null ? null : Date.now() - t0,
            workers_gone: workersGone !== null, ping, after, session_after: sessionAfter };
    },

    // Requests answered while a run is in progress, and runs that overlap.
    async concurrent(c) {
        const t0 = Date.now();
        const slow = c.client.callTool({ name: "execute_code",
            arguments: { code: "sleep 2; echo slow done", language: "shell" } }).then((r) => ({ r, at: Date.now() - t0 }));
        await sleep(300);
        await c.client.ping();
        const pingAt = Date.now() - t0;
        const tools = (await c.client.listTools()).tools.length;
        const listAt = Date.now() - t0;
        const slowDone = await slow;
        const t1 = Date.now();
        const both = await Promise.all([1, 2].map((i) => c.client.callTool({ name: "execute_code",
            arguments: { code: `sleep 1.5; echo run ${i}`, language: "shell" } })));
        return { ping_at: pingAt, list_at: listAt, tools, slow_at: slowDone.at, slow: slowDone.r,
            both_ms: Date.now() - t1, both };
    },

    // Progress notifications for a call that carries a progress token.
    async progress(c) {
        const notes = [];
        const r = await c.client.callTool({ name: opts.tool || "execute_code", arguments: opts.arguments }, undefined,
            { onprogress: (p) => notes.push(p), timeout: opts.timeout || 120000 });
        return { result: r, progress: notes };
    },
};

const c = await connect();
let out;
try {
    out = await scenarios[scenario](c);
} catch (e) {
    out = errorOf(e);
}
await c.client.close();
out.stderr = c.stderr();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);

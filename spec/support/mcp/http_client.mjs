// Drives `llmbox serve`'s MCP endpoint (/mcp) with the official MCP TypeScript SDK's Client over
// its StreamableHTTPClientTransport, for spec/14-serve/mcp_http_spec.lua.
//
//   node http_client.mjs SCENARIO 'JSON-OPTIONS'
//
// Options: url (http://127.0.0.1:PORT/mcp), token (sent as Authorization: Bearer), and each
// scenario's own. Prints one JSON object on stdout for the spec to check; an error the SDK threw
// is { error, code } (code: the HTTP status, for the transport's errors).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readdirSync, readFileSync } from "node:fs";

const [scenario, raw] = process.argv.slice(2);
const opts = raw ? JSON.parse(raw) : {};

function errorOf(e) {
    return { error: String(e && e.message || e), code: e && e.code };
}

async function connect() {
    const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
    const transport = new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
    const errors = [];
    const client = new Client({ name: "llmbox-spec-http", version: "1.0.0" });
    client.onerror = (e) => errors.push(String(e && e.message || e));
    await client.connect(transport);
    return { client, transport, errors };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, ms) {
    const start = Date.now();
    while (Date.now() - start < ms) {
        if (pred()) return Date.now() - start;
        await sleep(20);
    }
    return null;
}

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

const call = (c, name, args, options) => c.client.callTool({ name, arguments: args || {} }, undefined,
    { timeout: 60000, ...options });

const scenarios = {
    // What an agent does: tools, a run, a run with progress (an event stream), a session whose
    // files persist between runs. The MCP session and the tool session stay open for the spec.
    async main(c) {
        const out = {
            session_id: c.transport.sessionId,
            protocol: c.transport.protocolVersion,
            server: c.client.getServerVersion(),
            tools: (await c.client.listTools()).tools.map((t) => t.name),
        };
        out.run = await call(c, "execute_code", { code: "print(6 * 7)" });
        const progress = [];
        out.streamed = await call(c, "execute_code",
            { code: "import time\nprint('first', flush=True)\ntime.sleep(0.3)\nprint('second')" },
            { onprogress: (p) => progress.push(p) });
        out.progress = progress;
        const opened = await call(c, "create_session", { language: "python" });
        out.opened = opened.structuredContent;
        const sid = opened.structuredContent.session_id;
        out.write = await call(c, "run_in_session", { session_id: sid, code: "open('n.txt', 'w').write('41')" });
        out.read = await call(c, "run_in_session", { session_id: sid, code: "print(int(open('n.txt').read()) + 1)" });
        out.strict = await call(c, "create_session", { policy: "permissive" });
        await c.client.close(); // the transport only: the MCP session stays (no DELETE)
        out.errors = c.errors;
        return out;
    },

    // A call cancelled through the SDK's AbortSignal (notifications/cancelled in a POST of its
    // own), then one that still works; then the session ended with DELETE (terminateSession):
    // what comes after is 404.
    async cancel_and_end(c) {
        const out = { session_id: c.transport.sessionId };
        const marker = ["sleep", "25.4321"];
        const ac = new AbortController();
        const slow = call(c, "execute_code", { code: marker.join(" "), language: "shell" }, { signal: ac.signal })
            .then(() => "resolved", (e) => "rejected: " + e.message);
        out.seen_ms = await waitFor(() => processes(marker).length > 0, 15000);
        const t0 = Date.now();
        ac.abort("the spec cancels");
        out.outcome = await slow;
        out.gone_ms = await waitFor(() => processes(marker).length === 0, 5000);
        out.cancelled_ms = Date.now() - t0;
        out.after = await call(c, "execute_code", { code: "print('still serving')" });
        await c.transport.terminateSession();
        out.terminated = c.transport.sessionId === undefined;
        // the transport forgot the id: put it back, as a client that kept it would send it
        c.transport._sessionId = out.session_id;
        out.later = await c.client.listTools().then(() => "answered", errorOf);
        await c.client.close();
        return out;
    },

    // connect() alone, for the refusals (a wrong token)
    async connect(c) {
        const out = { session_id: c.transport.sessionId };
        await c.client.close();
        return out;
    },
};

let out;
try {
    out = await scenarios[scenario](await connect());
} catch (e) {
    out = errorOf(e);
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);

// OpenAI Agents SDK for JavaScript (@openai/agents) with llmbox's tools over MCP (stdio).
//   node openai-agents.mjs --list-tools      the tools the agent gets (no model call)
//   node openai-agents.mjs --try-tool        execute_code through the agent's tool object (no model)
//   OPENAI_API_KEY=... node openai-agents.mjs "What is 2**100? Use Python."
import { Agent, MCPServerStdio, RunContext, run } from "@openai/agents";
import { llmbox, listOnly, prompt, tryTool, TRY_ARGS } from "./llmbox.mjs";

const sandbox = new MCPServerStdio({ name: "llmbox", command: llmbox, args: ["mcp"] });
await sandbox.connect();
try {
    const agent = new Agent({
        name: "Coder",
        instructions: "Answer by running code with execute_code; the sandbox has no network.",
        mcpServers: [sandbox],
    });
    if (listOnly) {
        const tools = await agent.getAllTools(new RunContext());
        console.log(JSON.stringify(tools.map((t) => t.name)));
    } else if (tryTool) {
        const tools = await agent.getAllTools(new RunContext());
        const exec = tools.find((t) => t.name === "execute_code");
        console.log(JSON.stringify(await exec.invoke(new RunContext(), JSON.stringify(TRY_ARGS))));
    } else {
        const result = await run(agent, prompt);
        console.log(result.finalOutput);
    }
} finally {
    await sandbox.close();
}

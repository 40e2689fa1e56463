// Vercel AI SDK (ai + @ai-sdk/mcp) with llmbox's tools over MCP (stdio).
//   node vercel-ai.mjs --list-tools          the tools generateText gets (no model call)
//   node vercel-ai.mjs --try-tool            execute_code through the SDK's tool object (no model)
//   node vercel-ai.mjs "..."                 with a model: set AI_MODEL (e.g. openai/gpt-4.1-mini) and
//                                            the AI Gateway's key (AI_GATEWAY_API_KEY)
import { generateText, stepCountIs } from "ai";
import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";
import { llmbox, listOnly, prompt, tryTool, TRY_ARGS } from "./llmbox.mjs";

const client = await createMCPClient({
    transport: new Experimental_StdioMCPTransport({ command: llmbox, args: ["mcp"] }),
});
try {
    const tools = await client.tools();
    if (listOnly) {
        console.log(JSON.stringify(Object.keys(tools)));
    } else if (tryTool) {
        const r = await tools.execute_code.execute(TRY_ARGS, { toolCallId: "try", messages: [] });
        console.log(JSON.stringify(r));
    } else {
        const { text } = await generateText({
            model: process.env.AI_MODEL || "openai/gpt-4.1-mini",
            tools,
            stopWhen: stepCountIs(5),
            prompt,
        });
        console.log(text);
    }
} finally {
    await client.close();
}

// LangChain.js (@langchain/mcp-adapters + LangGraph) with llmbox's tools over MCP (stdio).
//   node langchain.mjs --list-tools          the tools the agent gets (no model call)
//   node langchain.mjs --try-tool            execute_code through LangChain's tool object (no model)
//   node langchain.mjs "..."                 with a model: install a chat model package
//                                            (e.g. @langchain/openai) and pass it to createReactAgent
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { llmbox, listOnly, prompt, tryTool, TRY_ARGS } from "./llmbox.mjs";

const client = new MultiServerMCPClient({
    mcpServers: { llmbox: { transport: "stdio", command: llmbox, args: ["mcp"] } },
});
try {
    const tools = await client.getTools();
    if (listOnly) {
        console.log(JSON.stringify(tools.map((t) => t.name)));
    } else if (tryTool) {
        const exec = tools.find((t) => t.name === "execute_code");
        console.log(JSON.stringify(await exec.invoke(TRY_ARGS)));
    } else {
        const { ChatOpenAI } = await import("@langchain/openai"); // npm install @langchain/openai
        const agent = createReactAgent({ llm: new ChatOpenAI({ model: "gpt-4.1-mini" }), tools });
        const result = await agent.invoke({ messages: [{ role: "user", content: prompt }] });
        console.log(result.messages.at(-1).content);
    }
} finally {
    await client.close();
}

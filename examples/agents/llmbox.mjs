// Where the examples find llmbox: $LLMBOX_BIN, else this repository's build, else `llmbox` on PATH.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = fileURLToPath(new URL("../../build/bin/llmbox", import.meta.url));
export const llmbox = process.env.LLMBOX_BIN || (existsSync(built) ? built : "llmbox");

// `--list-tools` prints the tool names the framework sees, as JSON, without calling a model.
export const listOnly = process.argv.includes("--list-tools");
// `--try-tool` calls execute_code through the framework's own tool object, also without a model.
export const tryTool = process.argv.includes("--try-tool");
export const TRY_ARGS = { code: "print(6 * 7)" };
export const prompt = process.argv.slice(2).filter((a) => !a.startsWith("--")).join(" ")
    || "Plot y = x^2 for x from -5 to 5 with matplotlib and tell me the value at x = 3.";

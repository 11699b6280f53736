// Drive an AG-UI endpoint with the official TypeScript client (@ag-ui/client HttpAgent) and
// print what it ends with, as JSON on stdout:
// { runs: [{ result, runError? } | { error }], messages, state }; runError is a RUN_ERROR event.
//
// Usage: node run_http_agent.mjs URL SCRIPT_JSON
//   SCRIPT_JSON: { threadId, messages, state, tools, answerFrontendTool?: string,
//                  runId?: string, headers?: object }
// runId (default "run-1") and headers let a test follow a run already in progress (a late
// joiner: Last-Event-ID and X-AGUI-Join, see docs/resume.md).
// With answerFrontendTool, a tool call the agent left without a result (a frontend tool)
// is answered with that content and the agent is run a second time, as a UI would.
import { HttpAgent } from "@ag-ui/client";

const [url, scriptText] = process.argv.slice(2);
const script = JSON.parse(scriptText);
const agent = new HttpAgent({
  url,
  threadId: script.threadId,
  initialMessages: script.messages ?? [],
  initialState: script.state ?? {},
  headers: script.headers ?? {},
});
const runs = [];

async function run(runId) {
  let runError;
  const subscriber = { onRunErrorEvent: ({ event }) => void (runError = event) };
  try {
    const parameters = { runId, tools: script.tools ?? [], context: [] };
    const { result } = await agent.runAgent(parameters, subscriber);
    runs.push(runError ? { result: result ?? null, runError } : { result: result ?? null });
    return runError === undefined;
  } catch (error) {
    runs.push({ error: String(error?.message ?? error) });
    return false;
  }
}

if ((await run(script.runId ?? "run-1")) && script.answerFrontendTool) {
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  const pending = agent.messages
    .flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []))
    .filter((call) => !answered.has(call.id));
  for (const call of pending) {
    agent.addMessage({
      id: `answer-${call.id}`,
      role: "tool",
      toolCallId: call.id,
      content: script.answerFrontendTool,
    });
  }
  await run("run-2");
}
console.log(JSON.stringify({ runs, messages: agent.messages, state: agent.state }));

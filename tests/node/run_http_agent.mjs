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
// With abortAfterEvents: N, the run is stopped with HttpAgent.abortRun() once N events
// arrived (a user pressing Stop); the output then has abortedAt (Date.now() just before
// abortRun()).  With cancelOnAbort too, the same request is then sent again with
// X-AGUI-Cancel: 1 (docs/resume.md: what an application adds for a resumable server,
// since abortRun() only hangs up); the output has cancelStatus.
import { HttpAgent } from "@ag-ui/client";

const [url, scriptText] = process.argv.slice(2);
const script = JSON.parse(scriptText);
let sent; // the last run request's init, for the cancel request
const agent = new HttpAgent({
  url,
  threadId: script.threadId,
  initialMessages: script.messages ?? [],
  initialState: script.state ?? {},
  headers: script.headers ?? {},
  fetch: (target, init) => {
    sent = init;
    return fetch(target, init);
  },
});
const runs = [];
const stopped = {};

async function stop() {
  stopped.abortedAt = Date.now();
  agent.abortRun();
  if (script.cancelOnAbort) {
    const headers = { ...sent.headers, "X-AGUI-Cancel": "1" };
    const answer = await fetch(url, { method: "POST", headers, body: sent.body });
    stopped.cancelStatus = answer.status;
  }
}

async function run(runId) {
  let runError;
  let seen = 0;
  let stopping;
  const subscriber = {
    onRunErrorEvent: ({ event }) => void (runError = event),
    onEvent: () => {
      seen += 1;
      if (seen === script.abortAfterEvents) stopping = stop();
    },
  };
  try {
    const parameters = { runId, tools: script.tools ?? [], context: [] };
    const { result } = await agent.runAgent(parameters, subscriber);
    await stopping;
    runs.push(runError ? { result: result ?? null, runError } : { result: result ?? null });
    return runError === undefined;
  } catch (error) {
    await stopping;
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
console.log(JSON.stringify({ runs, messages: agent.messages, state: agent.state, ...stopped }));

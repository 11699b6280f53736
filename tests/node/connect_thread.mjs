// Reload a page: a fresh ThreadAgent (tests/node/thread_agent.mjs) connects to a thread
// and prints what it holds, then optionally runs once more on it, as JSON on stdout:
// { messages, state, pendingInterrupts, error?, after? }.
// Usage: node connect_thread.mjs URL SCRIPT_JSON
//   SCRIPT_JSON: { threadId, headers?, runAfter?: { message } }
import { ThreadAgent } from "./thread_agent.mjs";

const [url, scriptText] = process.argv.slice(2);
const script = JSON.parse(scriptText);
const agent = new ThreadAgent({ url, threadId: script.threadId, headers: script.headers ?? {} });
const out = {};
try {
  await agent.connectAgent({ runId: "connect-1" });
} catch (error) {
  out.error = String(error?.message ?? error);
}
out.messages = structuredClone(agent.messages);
out.state = structuredClone(agent.state);
out.pendingInterrupts = agent.pendingInterrupts ?? [];
if (script.runAfter && !out.error) {
  agent.addMessage({ id: "u-after", role: "user", content: script.runAfter.message });
  await agent.runAgent({ runId: "after-1" });
  out.after = { messages: agent.messages, state: agent.state };
}
console.log(JSON.stringify(out));

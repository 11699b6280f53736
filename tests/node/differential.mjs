// Judge many AG-UI event streams with the official TypeScript client (@ag-ui/client), each
// exactly as an application receives it, for the differential test (tests/test_differential.py).
//
// Usage: node differential.mjs STREAMS_JSONL
//   STREAMS_JSONL: one stream per line, a JSON array of wire events.
// Prints one JSON line per stream, in order: {"verdict": "accepted"} or
// {"verdict": "rejected", "error": "<the client's error message>"}.
//
// Each stream is the answer of one agent run: an AbstractAgent subclass whose run() returns
// the events as an rxjs Observable, driven by runAgent(), which is what HttpAgent does once
// the bytes are decoded. runAgent() runs the client's whole processing model on it: the
// compatibility boundary, enforcement (its zod schemas), chunk expansion (transformChunks),
// verification (verifyEvents) and application (defaultApplyEvents with its subscribers).
// Sequential runs inside one stream (RUN_STARTED ... RUN_FINISHED RUN_STARTED ...) go through
// that one pipeline, which resets its per-run state at each new RUN_STARTED, as for an
// HTTP answer that carries several runs. A fresh agent per stream, so nothing leaks across.
import { readFileSync } from "node:fs";
import { AbstractAgent } from "@ag-ui/client";
import { from } from "rxjs";

// The client reports what it tolerates on the console (stripped members, patches that did
// not apply, "Agent execution failed"); a verdict is the run's outcome, not its chatter.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
for (const name of ["log", "info", "warn", "error", "debug"]) console[name] = () => {};

class ReplayAgent extends AbstractAgent {
  constructor(events) {
    const started = events.find((event) => event?.type === "RUN_STARTED");
    super({ threadId: typeof started?.threadId === "string" ? started.threadId : "thread" });
    this.events = events;
    this.runId = typeof started?.runId === "string" ? started.runId : "run";
  }

  run() {
    // runAgent() calls this once, and the events were parsed for this agent alone.
    return from(this.events);
  }
}

const lines = readFileSync(process.argv[2], "utf-8").split("\n").filter((line) => line !== "");
const out = [];
for (const line of lines) {
  const agent = new ReplayAgent(JSON.parse(line));
  try {
    await agent.runAgent({ runId: agent.runId });
    out.push(JSON.stringify({ verdict: "accepted" }));
  } catch (error) {
    out.push(JSON.stringify({ verdict: "rejected", error: String(error?.message ?? error) }));
  }
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));

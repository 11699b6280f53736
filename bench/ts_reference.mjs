// The TypeScript reference column of bench_pipeline.py: the same corpus through the official
// client's chunk expansion and default reducer (@ag-ui/client transformChunks +
// defaultApplyEvents), on Node.  Usage: node ts_reference.mjs corpus.json, with NODE_PATH
// pointing at a node_modules that holds @ag-ui/client (and its rxjs).  Prints one line of
// microseconds per event; never asserts.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const modules = (process.env.NODE_PATH || "").split(path.delimiter)[0];
const require = createRequire(path.join(modules, "noop.js"));
const { transformChunks, defaultApplyEvents } = require("@ag-ui/client");
const { from, lastValueFrom, toArray } = require("rxjs");

const corpus = JSON.parse(readFileSync(process.argv[2], "utf8"));
const input = { threadId: "t", runId: "r", messages: [], tools: [], context: [], state: {} };

async function once() {
  const agent = { messages: [], state: {}, pendingInterrupts: [] };
  const start = process.hrtime.bigint();
  const expanded = from(corpus).pipe(transformChunks(false));
  await lastValueFrom(defaultApplyEvents(input, expanded, agent, []).pipe(toArray()));
  return Number(process.hrtime.bigint() - start) / 1e3;
}

let best = Infinity;
for (let i = 0; i < 5; i++) best = Math.min(best, await once());
console.log(
  `transformChunks + defaultApplyEvents (objects in)  ${(best / corpus.length).toFixed(2)} µs/event  (${corpus.length} events)`,
);

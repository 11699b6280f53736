// @ag-ui/proto 1.0.0 as a batch oracle for tests/test_proto_official.py.
// Usage: node agui_proto.mjs requests.json  →  one JSON array of results on stdout.
// A request is {"encode": event} (result: base64 bytes) or {"decode": base64} (result: event);
// a failure is {"error": message}.  Warnings go to stderr and are ignored.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { encode, decode } = require("@ag-ui/proto");

const requests = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = requests.map((request) => {
  try {
    if ("encode" in request) return { ok: Buffer.from(encode(request.encode)).toString("base64") };
    return { ok: decode(new Uint8Array(Buffer.from(request.decode, "base64"))) };
  } catch (error) {
    return { error: String(error && error.message ? error.message : error) };
  }
});
process.stdout.write(JSON.stringify(results));

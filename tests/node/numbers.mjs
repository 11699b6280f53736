// Print the field numbers @ag-ui/proto compiled into its encoders, one `Message.field = N` a line,
// in the ledger's format, so tests/test_proto_official.py can compare them with schema/proto-ledger.txt.
// ts-proto writes each field as `writer.uint32(tag)` with tag = number << 3 | wire type.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.argv[2] ?? import.meta.url);
const source = readFileSync(require.resolve("@ag-ui/proto"), "utf8");
const snake = (s) => s.replace(/([A-Z])/g, "_$1").toLowerCase();
const oneofs = {
  Event: "event",
  InputContent: "part",
  InputContentSource: "source",
};
const skip = new Set(["Struct", "Struct_FieldsEntry", "Value", "ListValue"]);
const lines = [];
let name = null;
let encoding = false;
for (const line of source.split("\n")) {
  const start = line.match(/^const ([A-Za-z_]+) = \{/);
  if (start) name = start[1];
  if (/^\tencode\(message, writer/.test(line)) encoding = true;
  if (/^\tdecode\(/.test(line)) encoding = false;
  const field = line.match(/message\.([A-Za-z]+)[ )].*writer\.uint32\((\d+)\)/);
  if (encoding && field && name && !skip.has(name)) {
    const proto = name.replace("_", ".");
    const slot = oneofs[proto] ? `${proto}.${oneofs[proto]}` : proto;
    lines.push(`${slot}.${snake(field[1])} = ${Number(field[2]) >> 3}`);
  }
}
for (const [enumName, pattern] of [
  ["EventType", /EventType\["([A-Z_]+)"\] = (\d+)/g],
  ["JsonPatchOperationType", /JsonPatchOperationType\["([A-Z_]+)"\] = (\d+)/g],
]) {
  for (const match of source.matchAll(pattern)) lines.push(`${enumName}.${match[1]} = ${match[2]}`);
}
console.log([...new Set(lines)].sort().join("\n"));

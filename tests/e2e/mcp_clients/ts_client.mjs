// The TypeScript MCP SDK's StreamableHTTPClientTransport (what VS Code and Cursor embed) doing
// the room's whole loop; driven by tests/e2e/test_mcp_clients.py.
//
//   node ts_client.mjs URL BEARER REGION
//
// Prints one JSON line per step on stdout; waits for a line on stdin where the loop needs a
// person (the host's approval) or another agent (a commit in REGION).
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, bearer, region] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (step, fields = {}) => process.stdout.write(JSON.stringify({ step, ...fields }) + "\n");
const waitFor = async (word) => {
  const { value } = await lines.next();
  if (value?.trim() !== word) throw new Error(`expected ${word} on stdin, got ${value}`);
};
const structured = (result) => {
  if (result.isError) throw new Error(`tool error: ${result.content?.[0]?.text}`);
  return result.structuredContent;
};

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
});
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
const uri = `commonroom://workspace/region/${region}`;
let notified;
const updated = new Promise((resolve) => { notified = resolve; });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (note) => {
  if (note.params.uri === uri) notified(note.params.uri);
});

await client.connect(transport);
say("initialized", { protocolVersion: transport.protocolVersion, sessionId: transport.sessionId });
const { tools } = await client.listTools();
say("tools", { count: tools.length, first: tools[0].name });
const read = structured(await client.callTool({ name: "workspace_read", arguments: { region } }));
say("read", { version: read.version });
const lease = structured(await client.callTool({ name: "workspace_checkout", arguments: { region } }));
const proposal = structured(await client.callTool({
  name: "workspace_propose",
  arguments: { region, base_version: read.version, summary: "from the TypeScript SDK",
               content: read.content.trimEnd() + "\n\nThe TypeScript SDK was here.\n" },
}));
say("proposed", { proposal_id: proposal.proposal_id });
await waitFor("approved");
const committed = structured(await client.callTool({
  name: "workspace_commit", arguments: { proposal_id: proposal.proposal_id } }));
structured(await client.callTool({ name: "workspace_release", arguments: { lease_id: lease.lease_id } }));
say("committed", { version: committed.version });
await client.subscribeResource({ uri });
say("subscribed", { uri });
say("notified", { uri: await updated });
await transport.terminateSession();
await client.close();
say("closed");
process.exit(0);

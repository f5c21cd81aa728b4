// The TypeScript MCP SDK (what VS Code and Cursor embed) doing the room's whole loop; driven by
// tests/e2e/test_mcp_clients.py.
//
//   node ts_client.mjs MODE REGION
//
// MODE `url`: its StreamableHTTPClientTransport (the initialize eras) to MCP_TEST_URL with the
// bearer MCP_TEST_BEARER; `stdio`: its StdioClientTransport running MCP_TEST_CE `mcp`, which reads
// the room from CE_INVITATION and CE_SESSION (an env block, as `ce mcp config` prints it).
// The loop: list tools, read, check out, propose, hold `workspace_proposal_wait` until a person
// approves, commit, release, subscribe to the region and see another agent's commit there.
// Prints one JSON line per step on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, region] = process.argv.slice(2);
const say = (step, fields = {}) => process.stdout.write(JSON.stringify({ step, ...fields }) + "\n");
const structured = (result) => {
  if (result.isError) throw new Error(`tool error: ${result.content?.[0]?.text}`);
  return result.structuredContent;
};

let transport;
if (mode === "stdio") {
  const env = {};
  for (const key of ["CE_INVITATION", "CE_SESSION", "PATH", "HOME", "XDG_CONFIG_HOME"]) {
    if (process.env[key] !== undefined) env[key] = process.env[key];
  }
  transport = new StdioClientTransport({ command: process.env.MCP_TEST_CE, args: ["mcp", "--name", "ts-sdk"], env });
} else {
  transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_TEST_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TEST_BEARER}` } },
  });
}
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
const uri = `commonroom://workspace/region/${region}`;
let notified;
const updated = new Promise((resolve) => { notified = resolve; });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (note) => {
  if (note.params.uri === uri) notified(note.params.uri);
});

await client.connect(transport);
say("initialized", { protocolVersion: transport.protocolVersion ?? null, sessionId: transport.sessionId ?? null });
const { tools } = await client.listTools();
say("tools", { count: tools.length, names: tools.map((tool) => tool.name) });
const read = structured(await client.callTool({ name: "workspace_read", arguments: { region } }));
say("read", { version: read.version });
const lease = structured(await client.callTool({ name: "workspace_checkout", arguments: { region } }));
const proposal = structured(await client.callTool({
  name: "workspace_propose",
  arguments: { region, base_version: read.version, summary: "from the TypeScript SDK",
               content: read.content.trimEnd() + "\n\nThe TypeScript SDK was here.\n" },
}));
say("proposed", { proposal_id: proposal.proposal_id });
let waited;
let calls = 0;
do {
  calls += 1;
  waited = structured(await client.callTool({
    name: "workspace_proposal_wait", arguments: { proposal_id: proposal.proposal_id, timeout_seconds: 25 } },
    undefined, { timeout: 60000 }));
} while (waited.waiting);
say("reviewed", { status: waited.proposal.status, calls });
const committed = structured(await client.callTool({
  name: "workspace_commit", arguments: { proposal_id: proposal.proposal_id } }));
structured(await client.callTool({ name: "workspace_release", arguments: { lease_id: lease.lease_id } }));
say("committed", { version: committed.version });
await client.subscribeResource({ uri });
say("subscribed", { uri });
say("notified", { uri: await updated });
if (mode !== "stdio") await transport.terminateSession();
await client.close();
say("closed");
process.exit(0);

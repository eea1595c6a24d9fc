// The MCP SDK's own stdio client (Client + StdioClientTransport) driving a
// stdio MCP server given on the command line: what tests/integration/
// test_cli.py runs against `sbx mcp ID NAME` (the CLI's relay to a
// sandbox's MCP server). Lists the tools, calls "echo" (whose server logs a
// notification first), waits for the server's own "ready" log, closes; prints one JSON line of what it saw and
// exits 0, or prints the failure and exits 1. It lives here so that its
// imports resolve in this folder's node_modules.
//
//   node stdio_client.mjs COMMAND ARGS...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [command, ...args] = process.argv.slice(2);
const logs = [];
try {
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  const client = new Client({ name: "sbx-stdio-test", version: "1.0.0" }, { capabilities: {} });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params.data); });
  await client.connect(transport);
  const server = client.getServerVersion();
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const result = await client.callTool({ name: "echo", arguments: { text: "over stdio" } });
  // The server's own notification comes on the session's GET stream, in
  // its own time: wait for it (10 s at most) before closing.
  for (let i = 0; i < 100 && !logs.includes("ready"); i++) await new Promise((r) => setTimeout(r, 100));
  await client.close();
  console.log(JSON.stringify({ server, tools, content: result.content, logs }));
  process.exit(0);
} catch (e) {
  console.log(`stdio client failed: ${e.stack || e}`);
  process.exit(1);
}

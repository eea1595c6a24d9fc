// The MCP SDK's own client (Client + StreamableHTTPClientTransport) on sbx's
// /v1/mcp, driven line by line by tests/integration/test_mcp_api.py: one
// JSON request per stdin line, one JSON answer per stdout line. It lives
// here so that its imports resolve in this folder's node_modules (installed
// by scripts/install-mcp-servers).
//
//   node sbx_mcp_bridge.mjs URL TOKEN
//   {"op": "list"}                      -> {"ok": <tools/list result>}
//   {"op": "call", "name", "args"}      -> {"ok": <CallToolResult>}
//   {"op": "check", "name", "value"}    -> {"ok": {"valid", "message"}}: value
//                                          through the SDK's validator of the
//                                          tool's outputSchema (null: none)
//   {"op": "session"}                   -> {"ok": {"id", "version"}}
//   {"op": "close"}                     -> {"ok": true}, and the process ends
// A failure of the SDK (a transport or JSON-RPC error) is {"error", "code"}.
// Tools are listed once connected, as a client does before calling them:
// the SDK then checks every call's structuredContent against the tool's
// outputSchema (a mismatch is an error here, not a result).
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "sbx-test", version: "1.0.0" }, { capabilities: {} });

function out(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

try {
  await client.connect(transport);
} catch (e) {
  out({ error: String(e), code: e.code ?? null });
  process.exit(1);
}
try {
  await client.listTools();
} catch (e) {
  out({ error: String(e), code: e.code ?? null });
  process.exit(1);
}
out({ ok: "connected" });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const req = JSON.parse(line);
  try {
    if (req.op === "list") {
      out({ ok: await client.listTools() });
    } else if (req.op === "call") {
      out({ ok: await client.callTool({ name: req.name, arguments: req.args }, undefined, { timeout: 120000 }) });
    } else if (req.op === "check") {
      const v = client.getToolOutputValidator(req.name);
      const r = v ? v(req.value) : null;
      out({ ok: r && { valid: r.valid, message: r.errorMessage ?? null } });
    } else if (req.op === "session") {
      out({ ok: { id: transport.sessionId, version: transport.protocolVersion } });
    } else if (req.op === "close") {
      await transport.terminateSession();
      await client.close();
      out({ ok: true });
      break;
    } else {
      out({ error: `unknown op ${req.op}` });
    }
  } catch (e) {
    out({ error: String(e), code: e.code ?? null });
  }
}
process.exit(0);

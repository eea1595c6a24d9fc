// The MCP SDK's own client (Client + StreamableHTTPClientTransport) against
// a server behind sbx's /v1/sandboxes/{id}/mcp/{name}: what
// tests/integration/test_mcp_http.py drives. One scenario per run; prints
// one JSON line of what it saw and exits 0, or prints the failure and
// exits 1. It lives here so that its imports resolve in this folder's
// node_modules (installed by scripts/install-mcp-servers).
//
//   node sdk_client.mjs URL TOKEN SCENARIO [ARG]
//     everything   every tool of server-everything; sampling, elicitation and
//                  roots answered by this client; progress; a cancelled call
//     isolation    two sessions: one's log notifications never reach the other
//     deleted      DELETE ends the session: the next call is 404
//     open         initialize, then leave without DELETE; prints the session id
//     gone SID     a call in session SID must be 404 (it ended)
//     call NAME JSON  one tool call; prints the result (or the error)
//     roots DIR    server-filesystem with root DIR: list and read inside, and
//                  reads outside it and of /proc/1/root refused
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token, scenario, arg, arg2] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const seen = { sampling: 0, elicitation: 0, roots: 0 };
let rootDir = "/workspace";

function transport(sessionId) {
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, sessionId });
}

async function connect(sessionId) {
  const client = new Client(
    { name: "sbx-test", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.sampling++;
    return {
      role: "assistant",
      model: "sbx-test-model",
      stopReason: "endTurn",
      content: { type: "text", text: `sampled: ${req.params.messages[0].content.text}` },
    };
  });
  client.setRequestHandler(ElicitRequestSchema, async () => {
    seen.elicitation++;
    return { action: "decline" };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [{ uri: `file://${rootDir}`, name: "sandbox" }] };
  });
  const t = transport(sessionId);
  await client.connect(t);
  return { client, t };
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const text = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

// Arguments for every tool server-everything lists to a client with
// sampling, elicitation and roots (no tasks). A new tool fails the run.
const ARGS = {
  echo: { message: "hello sbx" },
  "get-annotated-message": { messageType: "success", includeImage: true },
  "get-env": {},
  "get-resource-links": { count: 2 },
  "get-resource-reference": { resourceType: "Text", resourceId: 1 },
  "get-structured-content": { location: "Chicago" },
  "get-sum": { a: 2, b: 40 },
  "get-tiny-image": {},
  // No network in the sandbox: a data: URI (the tool allows it).
  "gzip-file-as-resource": { name: "x.gz", data: "data:text/plain;base64,aGVsbG8gc2J4", outputType: "resource" },
  "toggle-simulated-logging": {},
  "toggle-subscriber-updates": {},
  "trigger-long-running-operation": { duration: 1, steps: 4 },
  "get-roots-list": {},
  "trigger-elicitation-request": {},
  "trigger-sampling-request": { prompt: "ping from sbx", maxTokens: 10 },
};
// Need a client feature this one does not offer (tasks, URL elicitation).
const SKIP = new Set([
  "simulate-research-query",
  "trigger-sampling-request-async",
  "trigger-elicitation-request-async",
  "trigger-url-elicitation",
]);

async function everything() {
  const { client, t } = await connect();
  const out = { session: t.sessionId, called: [], progress: 0 };
  const { tools } = await client.listTools();
  for (const tool of tools) {
    if (SKIP.has(tool.name)) continue;
    check(tool.name in ARGS, `arguments for new tool ${tool.name}`);
    const opts = tool.name === "trigger-long-running-operation" ? { onprogress: () => out.progress++ } : {};
    const r = await client.callTool({ name: tool.name, arguments: ARGS[tool.name] }, undefined, opts);
    check(!r.isError, `${tool.name}: ${JSON.stringify(r).slice(0, 300)}`);
    out.called.push(tool.name);
    if (tool.name === "echo") check(text(r) === "Echo: hello sbx", `echo: ${text(r)}`);
    if (tool.name === "get-sum") check(text(r).includes("42"), `get-sum: ${text(r)}`);
    if (tool.name === "trigger-sampling-request") check(text(r).includes("sbx-test-model") && text(r).includes("ping from sbx"), "sampling answer reached the server");
    if (tool.name === "get-roots-list") check(JSON.stringify(r).includes(rootDir), "roots answer reached the server");
    if (tool.name === "trigger-elicitation-request") check(JSON.stringify(r).includes("decline"), "elicitation answer reached the server");
  }
  check(out.progress >= 4, `progress notifications: ${out.progress}`);
  check(seen.sampling === 1 && seen.elicitation === 1 && seen.roots >= 1, `server requests: ${JSON.stringify(seen)}`);
  // Resources and prompts pass as well.
  const res = await client.listResources();
  check(res.resources.length > 0, "resources");
  const rd = await client.readResource({ uri: res.resources[0].uri });
  check(rd.contents.length === 1, "resource read");
  const pr = await client.listPrompts();
  check(pr.prompts.length > 0, "prompts");
  await client.ping();
  // A long call cancelled by the client: notifications/cancelled goes to
  // the server, the call ends at once, and the session still serves.
  const ac = new AbortController();
  const started = Date.now();
  setTimeout(() => ac.abort("test cancels"), 500);
  let cancelled = false;
  try {
    await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 30, steps: 30 } }, undefined,
      { signal: ac.signal, timeout: 60000 });
  } catch (e) {
    cancelled = true;
  }
  out.cancel_ms = Date.now() - started;
  check(cancelled && out.cancel_ms < 5000, `cancelled in ${out.cancel_ms} ms`);
  const after = await client.callTool({ name: "echo", arguments: { message: "after" } });
  check(text(after) === "Echo: after", "session serves after a cancellation");
  out.seen = seen;
  await t.terminateSession();
  await client.close();
  return out;
}

async function isolation() {
  const a = await connect();
  const b = await connect();
  check(a.t.sessionId !== b.t.sessionId, "two session ids");
  const logs = { a: 0, b: 0 };
  // Only the simulated logging counts (a server also logs its roots).
  const simulated = (n) => /-level message|level-message/.test(String(n.params.data));
  a.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { if (simulated(n)) logs.a++; });
  b.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { if (simulated(n)) logs.b++; });
  await a.client.setLoggingLevel("debug");
  await b.client.setLoggingLevel("debug");
  // What each server says at start (its roots) is not the point.
  await new Promise((r) => setTimeout(r, 500));
  logs.a = logs.b = 0;
  await a.client.callTool({ name: "toggle-simulated-logging", arguments: {} });
  await new Promise((r) => setTimeout(r, 2500));
  // A's server has its own state: B's never logs, and B's calls are its own.
  const r = await b.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  check(text(r).includes("3"), "B serves");
  check(logs.a > 0 && logs.b === 0, `logs ${JSON.stringify(logs)}`);
  const out = { a: a.t.sessionId, b: b.t.sessionId, logs };
  await a.t.terminateSession();
  // B lives on when A ended.
  const r2 = await b.client.callTool({ name: "echo", arguments: { message: "b" } });
  check(text(r2) === "Echo: b", "B after A ended");
  await b.t.terminateSession();
  await a.client.close();
  await b.client.close();
  return out;
}

async function expect404(sessionId) {
  // A client that knows its session id; its next call must be 404.
  const t = transport(sessionId);
  let status = null;
  t.setProtocolVersion("2025-11-25");
  t.onerror = () => {};
  await t.start();
  try {
    await t.send({ jsonrpc: "2.0", id: 1, method: "tools/list" });
  } catch (e) {
    status = e instanceof StreamableHTTPError ? e.code : String(e);
  }
  await t.close();
  check(status === 404, `status after the end: ${status}`);
  return { session: sessionId, status };
}

async function deleted() {
  const { client, t } = await connect();
  const sid = t.sessionId;
  await client.callTool({ name: "echo", arguments: { message: "x" } });
  await t.terminateSession();
  await client.close();
  return expect404(sid);
}

async function open() {
  const { client, t } = await connect();
  await client.callTool({ name: "echo", arguments: { message: "x" } });
  const sid = t.sessionId;
  await client.close(); // no DELETE: the session is abandoned
  return { session: sid };
}

async function call(name, json) {
  const { client, t } = await connect();
  let out;
  try {
    const r = await client.callTool({ name, arguments: JSON.parse(json || "{}") }, undefined, { timeout: 20000 });
    out = { ok: true, isError: !!r.isError, text: text(r) };
  } catch (e) {
    out = { ok: false, error: String(e && e.message ? e.message : e), code: e.code ?? null };
  }
  await t.terminateSession().catch(() => {});
  await client.close();
  return out;
}

async function roots(dir) {
  rootDir = dir;
  const { client, t } = await connect();
  const tryRead = async (path) => {
    try {
      const r = await client.callTool({ name: "read_text_file", arguments: { path } });
      return { isError: !!r.isError, text: text(r) };
    } catch (e) {
      return { isError: true, text: String(e.message || e) };
    }
  };
  const allowed = await client.callTool({ name: "list_allowed_directories", arguments: {} });
  const inside = await tryRead(`${dir}/hello.txt`);
  const outside = await tryRead("/etc/hostname");
  const proc1 = await tryRead("/proc/1/root/etc/shadow");
  const escape = await tryRead(`${dir}/../../etc/passwd`);
  const link = await tryRead(`${dir}/link/hostname`);
  await t.terminateSession();
  await client.close();
  return { allowed: text(allowed), inside, outside, proc1, escape, link, roots_asked: seen.roots };
}

const scenarios = {
  everything,
  isolation,
  deleted,
  open,
  gone: () => expect404(arg),
  call: () => call(arg, arg2),
  roots: () => roots(arg),
};

try {
  check(scenario in scenarios, `scenario ${scenario}`);
  const out = await scenarios[scenario]();
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }) + "\n");
  process.exit(1);
}

// MCP Streamable HTTP load for bench/bench_mcp.py: raw JSON-RPC over node's
// fetch (no SDK: the client's own cost stays small and the same for every
// server measured). Each session initializes as a client does (Accept: JSON
// and SSE), then calls tools/call echo; an answer may come as JSON or as
// one SSE event.
//   node mcp_load.mjs URL TOKEN SESSIONS CALLS
// SESSIONS sessions side by side, CALLS calls each, one at a time per
// session. Prints {"lat_ms": [...per call...], "secs": wall time of the
// calls, "calls": n}.
const [url, token, sessions = "1", calls = "1000"] = process.argv.slice(2);
const base = {
  "Content-Type": "application/json",
  Accept: "application/json, text/event-stream",
};
if (token && token !== "-") base.Authorization = `Bearer ${token}`;

async function rpc(headers, msg) {
  const r = await fetch(url, { method: "POST", headers, body: JSON.stringify(msg) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${r.status} ${text.slice(0, 200)}`);
  if (!text) return { r, m: null };
  if ((r.headers.get("content-type") || "").startsWith("text/event-stream")) {
    const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    return { r, m: JSON.parse(data[data.length - 1]) };
  }
  return { r, m: JSON.parse(text) };
}

async function session(n, lat) {
  const { r } = await rpc(base, {
    jsonrpc: "2.0", id: 0, method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "load", version: "1" } },
  });
  const h = { ...base, "Mcp-Session-Id": r.headers.get("mcp-session-id"), "MCP-Protocol-Version": "2025-06-18" };
  await rpc(h, { jsonrpc: "2.0", method: "notifications/initialized" });
  return async () => {
    for (let i = 1; i <= n; i++) {
      const t0 = process.hrtime.bigint();
      const { m } = await rpc(h, {
        jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "echo", arguments: { message: "hi" } },
      });
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (m.result.content[0].text !== "Echo: hi") throw new Error("bad echo");
    }
    await fetch(url, { method: "DELETE", headers: h });
  };
}

const lat = [];
const runs = [];
for (let s = 0; s < Number(sessions); s++) runs.push(await session(Number(calls), lat));
const t0 = process.hrtime.bigint();
await Promise.all(runs.map((f) => f()));
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
process.stdout.write(JSON.stringify({ lat_ms: lat, secs, calls: lat.length }) + "\n");

// The 20-session rows of bench_mcp.py: many MCP sessions driven side by
// side from one Node event loop, so that the client costs the same for
// every transport measured and little beside the servers (Python threads
// under one GIL spent more CPU than the supervisor on these rows).
//
//   node mcp_load.mjs http PORT PATH HEADERS_JSON SESSION_IDS_JSON CALLS
//     tools/call echo CALLS times on each already initialized session (one
//     keep-alive connection each), all sessions at once.
//   node mcp_load.mjs stdio SERVER_JS SESSIONS CALLS
//     the floor: SESSIONS servers on their own pipes, same calls.
//
// Prints {"lat_ms": [...], "secs": S, "calls": N, "client_cpu_s": C} on
// stdout (C: this process's CPU, every thread, while the calls ran; in stdio
// mode also "servers_cpu_s", the servers' likewise); exits 1 with the first
// failure on stderr.
import http from "node:http";
import fs from "node:fs";
import { spawn } from "node:child_process";

// CPU seconds of a process, every thread (schedstat: ns on a CPU, exact,
// where /proc/PID/stat counts 10 ms ticks).
function cpuSecs(pid) {
  let ns = 0;
  try {
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
      } catch { /* the thread ended */ }
    }
  } catch { /* the process ended */ }
  return ns / 1e9;
}

const echo = (id) => JSON.stringify({
  jsonrpc: "2.0", id, method: "tools/call",
  params: { name: "echo", arguments: { message: "hi" } },
});

function post(agent, port, path, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, method: "POST", agent, headers },
      (res) => {
        const parts = [];
        res.on("data", (d) => parts.push(d));
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }));
        res.on("error", reject);
      });
    req.on("error", reject);
    req.end(body);
  });
}

async function httpSession(port, path, headers, sid, calls, lat) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const hd = { ...headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18" };
  try {
    for (let i = 1; i <= calls; i++) {
      const t0 = process.hrtime.bigint();
      const r = await post(agent, port, path, hd, echo(i));
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (r.status !== 200 || !r.body.includes("Echo: hi"))
        throw new Error(`bad echo ${r.status} ${r.body.slice(0, 200)}`);
    }
  } finally {
    agent.destroy();
  }
}

// One server on its own pipes: requests written as lines, answers matched
// by id.
function stdioServer(js) {
  const p = spawn("node", [js], { stdio: ["pipe", "pipe", "ignore"] });
  const waiting = new Map();
  let buf = "";
  p.stdout.setEncoding("utf8");
  p.stdout.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let m;
      try { m = JSON.parse(line); } catch { continue; }
      const w = waiting.get(m.id);
      if (w) { waiting.delete(m.id); w(m); }
    }
  });
  const call = (id, text) => new Promise((resolve) => {
    waiting.set(id, resolve);
    p.stdin.write(text + "\n");
  });
  return { p, call };
}

async function stdioSession(js, calls, lat) {
  const s = stdioServer(js);
  stdioSession.all.push(s);
  await s.call(0, JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: {
    protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1" } } }));
  s.p.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  return async () => {
    for (let i = 1; i <= calls; i++) {
      const t0 = process.hrtime.bigint();
      const m = await s.call(i, echo(i));
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (!JSON.stringify(m).includes("Echo: hi"))
        throw new Error(`bad echo ${JSON.stringify(m).slice(0, 200)}`);
    }
  };
}
stdioSession.all = [];

async function main() {
  const [mode, ...a] = process.argv.slice(2);
  const lat = [];
  let runs;
  if (mode === "http") {
    const [port, path, headers, sids, calls] = [Number(a[0]), a[1], JSON.parse(a[2]), JSON.parse(a[3]), Number(a[4])];
    runs = sids.map((sid) => () => httpSession(port, path, headers, sid, calls, lat));
  } else if (mode === "stdio") {
    const [js, sessions, calls] = [a[0], Number(a[1]), Number(a[2])];
    runs = [];
    for (let i = 0; i < sessions; i++)
      runs.push(await stdioSession(js, calls, lat));
  } else {
    throw new Error("mode: http or stdio");
  }
  const servers = () => stdioSession.all.reduce((sum, s) => sum + cpuSecs(s.p.pid), 0);
  const srv0 = servers(), me0 = cpuSecs(process.pid);
  const t0 = process.hrtime.bigint();
  let srv1, me1;
  try {
    await Promise.all(runs.map((r) => r()));
  } finally {
    me1 = cpuSecs(process.pid);
    srv1 = servers();
    for (const s of stdioSession.all)
      s.p.kill();
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const out = { lat_ms: lat, secs, calls: lat.length, client_cpu_s: me1 - me0 };
  if (mode === "stdio")
    out.servers_cpu_s = srv1 - srv0;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`mcp_load: ${e.stack || e}\n`);
  for (const s of stdioSession.all)
    s.p.kill();
  process.exit(1);
});

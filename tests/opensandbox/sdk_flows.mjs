// What it_opensandbox runs: OpenSandbox's own npm SDK, unchanged, against
// sbx's /opensandbox layer, through the SDK's public API only. Env:
// SBX_DOMAIN (host:port/opensandbox), SBX_TOKEN, SBX_IMAGE. Each check
// prints one line; the first failure exits non-zero with what was seen.
// Every sandbox made here is killed before the exit, also on failure.
import { createHash, randomBytes } from "node:crypto";
import {
  Sandbox,
  SandboxManager,
  SandboxApiException,
} from "@alibaba-group/opensandbox";

const domain = process.env.SBX_DOMAIN;
// SBX_DOMAIN may carry its scheme (https://, with NODE_EXTRA_CA_CERTS):
// the URLs fetched here directly take it too
const scheme = domain.startsWith("https://") ? "https" : "http";
const apiKey = process.env.SBX_TOKEN;
const image = process.env.SBX_IMAGE || "host";
const conn = { domain, apiKey, requestTimeoutSeconds: 60 };
const made = [];
const run = randomBytes(4).toString("hex");

function check(cond, what, seen) {
  if (!cond) {
    const e = new Error(`FAIL ${what}: ${JSON.stringify(seen)}`);
    e.check = true;
    throw e;
  }
  console.log(`ok ${what}`);
}

// The call must fail with the SDK's typed API error of that status.
async function rejects(p, status, what) {
  try {
    await p;
  } catch (e) {
    check(e instanceof SandboxApiException && e.statusCode === status,
      `${what}: SandboxApiException ${status}`,
      { name: e?.name, status: e?.statusCode, code: e?.error?.code, message: e?.message });
    check(typeof e.error.code === "string" && e.error.code !== "UNEXPECTED_RESPONSE" ||
      e.message.startsWith("Upload") || e.message.startsWith("Download"),
      `${what}: a server error code`, e.error);
    return e;
  }
  check(false, `${what}: rejected`, "it succeeded");
}

async function lifecycle(sbx) {
  const info = await sbx.getInfo();
  check(info.status.state === "Running", "getInfo: Running", info.status);
  check(info.metadata.run === run && info.metadata.suite === "it_opensandbox",
    "getInfo: metadata", info.metadata);
  const left = (info.expiresAt - Date.now()) / 1000;
  check(left > 250 && left <= 301, "getInfo: expiresAt from timeoutSeconds 300", left);
  check(info.image?.uri === image, "getInfo: image.uri", info.image);

  const mgr = SandboxManager.create({ connectionConfig: conn });
  const mine = await mgr.listSandboxInfos({ metadata: { run }, states: ["Running"] });
  check(mine.items.length === 1 && mine.items[0].id === sbx.id, "list: by metadata and state",
    mine.items.map((i) => i.id));
  const none = await mgr.listSandboxInfos({ metadata: { run: "other" } });
  check(none.items.length === 0, "list: another metadata finds none", none.items.length);
  const page = await mgr.listSandboxInfos({ pageSize: 1, page: 1 });
  check(page.pagination.pageSize === 1 && page.items.length === 1 &&
    page.pagination.totalItems >= 1, "list: pagination", page.pagination);

  const patched = await mgr.patchSandboxMetadata(sbx.id, { stage: "two", suite: null });
  check(patched.metadata.stage === "two" && !("suite" in patched.metadata),
    "patchMetadata: merge patch", patched.metadata);

  const renewed = await sbx.renew(900);
  const ahead = (renewed.expiresAt - Date.now()) / 1000;
  check(ahead > 850 && ahead <= 901, "renew: expiresAt 900 s ahead", ahead);
  const after = await sbx.getInfo();
  check(Math.abs(after.expiresAt - renewed.expiresAt) < 2000, "renew: getInfo agrees",
    [after.expiresAt, renewed.expiresAt]);

  const ep = await sbx.getEndpoint(44772);
  check(ep.endpoint.endsWith(`/opensandbox/execd/${sbx.id}`) && ep.headers,
    "endpoint 44772: the execd prefix with a credential", ep);
  const web = await sbx.getEndpoint(8080);
  check(web.endpoint.endsWith(`/v1/sandboxes/${sbx.id}/ports/8080`), "endpoint 8080: the port proxy", web);
  check(await sbx.isHealthy(), "ping", true);

  // Pause: the cgroup freezer; a paused sandbox's commands are refused
  // (409 paused) until resume, which works through either entry point.
  await sbx.pause();
  const paused = await sbx.getInfo();
  check(paused.status.state === "Paused", "pause: getInfo Paused", paused.status);
  await rejects(sbx.commands.run("true"), 409, "a command on a paused sandbox");
  await sbx.pause();
  check((await sbx.getInfo()).status.state === "Paused", "pause again: still Paused", null);
  const resumed = await sbx.resume();
  check(resumed.id === sbx.id && (await sbx.getInfo()).status.state === "Running",
    "resume: Running again", resumed.id);
  await mgr.pauseSandbox(sbx.id);
  await mgr.resumeSandbox(sbx.id);

  // Metrics: sbx's limits and cgroup figures; CPU as the share of the
  // limit used since the previous call.
  const m0 = await sbx.getMetrics();
  check(m0.cpuCount === 0.5 && m0.memoryTotalMiB === 512 && m0.memoryUsedMiB > 0 &&
    m0.memoryUsedMiB < 512 && Math.abs(m0.timestamp - Date.now()) < 5000,
    "getMetrics: the limits and memory in use", m0);
  await sbx.commands.run("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done");
  const m1 = await sbx.getMetrics();
  check(m1.cpuUsedPercentage > 1 && m1.cpuUsedPercentage <= 100 && m1.timestamp >= m0.timestamp,
    "getMetrics: CPU used by a busy loop since the last call", m1);
  const ran = await sbx.commands.run("echo back");
  check(ran.exitCode === 0, "a command after pause and resume", ran.exitCode);
  await mgr.close();
}

// Signed endpoints (their getSignedEndpoint, OSEP-0011): sbx's signed
// path form on the port proxy, fetched with no credential header; a
// tampered one is refused, as is one for execd. Returns the check of an
// expired one, made later so that its wait overlaps the other flows.
async function signedEndpoints(sbx) {
  const now = () => Math.floor(Date.now() / 1000);
  const short = now() + 2;
  const soon = await sbx.getSignedEndpoint(8080, short);
  await sbx.commands.run("mkdir -p /tmp/www && printf signed-ok > /tmp/www/hello.txt");
  const srv = await sbx.commands.run(
    "exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /tmp/www", { background: true });
  const exp = now() + 120;
  const ep = await sbx.getSignedEndpoint(8080, exp);
  const sig = ep.endpoint.split("/").pop();
  check(ep.endpoint.endsWith(`/v1/signed/${sbx.id}/8080/${exp}/${sig}`) && /^[0-9a-f]{64}$/.test(sig) &&
    ep.headers === undefined, "signed endpoint 8080: sbx's signed path, no headers", ep);
  const url = `${scheme}://${ep.endpoint}/hello.txt`;
  let res;
  for (let i = 0; i < 100; i++) {
    res = await fetch(url);
    if (res.status !== 502) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(res.status === 200 && (await res.text()) === "signed-ok",
    "signed endpoint: fetched with no credential header", res.status);
  const flip = sig.slice(0, -1) + (sig.endsWith("0") ? "1" : "0");
  const forged = [
    url.replace(`/${sig}/`, `/${flip}/`),
    url.replace(`/8080/${exp}/`, `/8081/${exp}/`),
    url.replace(`/8080/${exp}/`, `/8080/${exp + 1}/`),
  ];
  for (const f of forged) {
    const r = await fetch(f);
    const body = await r.json();
    check(r.status === 403 && body.error?.code === "forbidden", "signed endpoint: a tampered one is 403",
      [f, r.status, body]);
  }
  await rejects(sbx.getSignedEndpoint(44772, exp), 400, "signed endpoint for execd");
  await rejects(sbx.getSignedEndpoint(8080, now() - 10), 400, "signed endpoint already expired");
  await sbx.commands.interrupt(srv.id);
  return async () => {
    const wait = (short + 1) * 1000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const r = await fetch(`${scheme}://${soon.endpoint}/hello.txt`);
    const body = await r.json();
    check(r.status === 403 && /expired/.test(body.error?.message), "signed endpoint: refused once expired",
      [r.status, body]);
  };
}

// Snapshots: their manager's calls onto sbx's snapshots; a sandbox
// restored from one has its files.
async function snapshots(sbx) {
  await sbx.files.writeFiles([{ path: "/tmp/snap.txt", data: `kept ${run}` }]);
  const mgr = SandboxManager.create({ connectionConfig: conn });
  const snap = await mgr.createSnapshot(sbx.id, { name: `it-${run}` });
  check(snap.status.state === "Ready" && snap.sandboxId === sbx.id && snap.name === `it-${run}` &&
    snap.createdAt instanceof Date, "createSnapshot: Ready, of the sandbox, named", snap);
  const got = await mgr.getSnapshot(snap.id);
  check(got.id === snap.id && got.status.state === "Ready", "getSnapshot", got);
  const listed = await mgr.listSnapshots({ sandboxId: sbx.id, states: ["Ready"] });
  check(listed.items.length === 1 && listed.items[0].id === snap.id &&
    listed.pagination.totalItems === 1, "listSnapshots: by sandbox and state", listed);
  const byName = await mgr.listSnapshots({ name: "no-such-name" });
  check(byName.items.length === 0, "listSnapshots: another name finds none", byName.items.length);
  await sbx.files.writeFiles([{ path: "/tmp/snap.txt", data: "changed later" }]);
  const restored = await Sandbox.create({ connectionConfig: conn, snapshotId: snap.id,
    timeoutSeconds: 120, metadata: { suite: "it_opensandbox-restored", run } });
  made.push(restored);
  const text = await restored.files.readFile("/tmp/snap.txt");
  check(text === `kept ${run}`, "Sandbox.create({snapshotId}): the snapshot's files", text);
  const rinfo = await restored.getInfo();
  check(rinfo.snapshotId === snap.id, "getInfo: snapshotId", rinfo.snapshotId);
  await restored.kill();
  made.pop();
  await mgr.deleteSnapshot(snap.id);
  await rejects(mgr.getSnapshot(snap.id), 404, "getSnapshot after delete");
  await rejects(mgr.createSnapshot("sb-000000000000", {}), 404, "createSnapshot of an unknown sandbox");
  await mgr.close();
}

async function commands(sbx) {
  const seen = { init: null, out: [], err: [], complete: 0 };
  const ex = await sbx.commands.run("echo hello; echo $GREETING; echo oops >&2; printf tail", {}, {
    onInit: (i) => { seen.init = i.id; },
    onStdout: (m) => { seen.out.push(m.text); },
    onStderr: (m) => { seen.err.push(m.text); },
    onExecutionComplete: () => { seen.complete++; },
  });
  check(ex.exitCode === 0, "run: exit 0", ex.exitCode);
  check(JSON.stringify(ex.logs.stdout.map((m) => m.text)) === JSON.stringify(["hello", "hi", "tail"]),
    "run: stdout one event per line (env from create)", ex.logs.stdout);
  check(JSON.stringify(seen.out) === JSON.stringify(["hello", "hi", "tail"]) &&
    JSON.stringify(seen.err) === JSON.stringify(["oops"]), "run: onStdout/onStderr callbacks", seen);
  check(seen.init && seen.init === ex.id && seen.complete === 1, "run: init id and complete", seen);

  const bad = await sbx.commands.run("echo before; exit 3");
  check(bad.exitCode === 3 && bad.error?.value === "3", "run: exit 3 as an error event", bad.error);

  // Streaming: the first line arrives while the command still runs.
  const t0 = Date.now();
  const at = [];
  await sbx.commands.run("for i in 1 2 3; do echo $i; sleep 0.4; done", {}, {
    onStdout: () => { at.push(Date.now() - t0); },
  });
  check(at.length === 3 && at[2] - at[0] >= 600, "run: lines streamed as they come", at);

  const who = await sbx.commands.run("id -u");
  check(who.logs.stdout[0]?.text === "1000", "run: as the sandbox user (uid 1000)", who.logs);
  const cwd = await sbx.commands.run("pwd", { workingDirectory: "/tmp", envs: { X: "y" } });
  check(cwd.logs.stdout[0]?.text === "/tmp", "run: workingDirectory", cwd.logs);
  const slow = await sbx.commands.run("sleep 5", { timeoutSeconds: 0.5 });
  check(slow.exitCode !== 0 && slow.error, "run: timeoutSeconds ends it", slow.error);

  // Background: id, status, logs with a cursor, interrupt.
  const bg = await sbx.commands.run("echo one; echo two >&2; sleep 0.3; echo three", { background: true });
  check(/^[0-9]+$/.test(bg.id ?? ""), "background: an id", bg.id);
  let st;
  for (let i = 0; i < 50; i++) {
    st = await sbx.commands.getCommandStatus(bg.id);
    if (!st.running) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(st.running === false && st.exitCode === 0 && st.finishedAt instanceof Date,
    "background: status after it ended", st);
  const logs = await sbx.commands.getBackgroundCommandLogs(bg.id);
  check(logs.content === "one\ntwo\nthree\n" && logs.cursor === 14, "background: logs and cursor", logs);
  const rest = await sbx.commands.getBackgroundCommandLogs(bg.id, logs.cursor);
  check(rest.content === "" && rest.cursor === 14, "background: logs from the cursor", rest);

  const long = await sbx.commands.run("sleep 60", { background: true });
  const st1 = await sbx.commands.getCommandStatus(long.id);
  check(st1.running === true, "background: running", st1);
  await sbx.commands.interrupt(long.id);
  const st2 = await sbx.commands.getCommandStatus(long.id);
  check(st2.running === false, "interrupt: it ended", st2);
  await rejects(sbx.commands.getCommandStatus("999999"), 404, "status of an unknown command");
}

// Bash sessions: one shell kept per session, so a cd and an export hold
// for the next run; a failing command is an error event with its exit
// code; one run at a time; a deleted session is the SDK's typed 404.
async function sessions(sbx) {
  const c = sbx.commands;
  const id = await c.createSession({ workingDirectory: "/tmp" });
  check(/^sess-[0-9a-f]+$/.test(id), "createSession: an id", id);
  const seen = { init: null, out: [] };
  const first = await c.runInSession(id, "pwd; mkdir -p /tmp/s1 && cd /tmp/s1; export SESS_VAR=kept; echo set",
    {}, { onInit: (i) => { seen.init = i.id; }, onStdout: (m) => { seen.out.push(m.text); } });
  check(first.exitCode === 0 && first.complete && seen.init === id &&
    JSON.stringify(seen.out) === JSON.stringify(["/tmp", "set"]),
    "runInSession: output per line, init with the session id, complete", { first, seen });
  const second = await c.runInSession(id, "pwd; echo $SESS_VAR; echo err >&2");
  check(second.exitCode === 0 &&
    JSON.stringify(second.logs.stdout.map((m) => m.text)) === JSON.stringify(["/tmp/s1", "kept"]) &&
    second.logs.stderr[0]?.text === "err", "runInSession: the first run's cd and export hold", second.logs);
  const fails = await c.runInSession(id, "echo before; (exit 7)");
  check(fails.exitCode === 7 && fails.error?.name === "CommandExecError" && fails.error.value === "7" &&
    fails.logs.stdout[0]?.text === "before", "runInSession: a failing command's error event", fails.error);
  const there = await c.runInSession(id, "pwd", { workingDirectory: "/" });
  check(there.logs.stdout[0]?.text === "/", "runInSession: workingDirectory", there.logs);
  // A second run while the first still runs (its init came) is refused.
  let begun;
  const init = new Promise((r) => { begun = r; });
  const slow = c.runInSession(id, "sleep 5; echo late", { timeoutSeconds: 1.5 }, { onInit: () => begun() });
  await init;
  await rejects(c.runInSession(id, "true"), 409, "runInSession: a second run at once");
  const timed = await slow;
  check(timed.error?.name === "CommandTimeout" && timed.logs.stdout.length === 0,
    "runInSession: timeoutSeconds interrupts the command", timed.error);
  const alive = await c.runInSession(id, "echo $SESS_VAR");
  check(alive.logs.stdout[0]?.text === "kept", "runInSession: the shell outlives the timeout", alive.logs);
  await c.deleteSession(id);
  await rejects(c.runInSession(id, "true"), 404, "runInSession on a deleted session");
  await rejects(c.deleteSession(id), 404, "deleteSession of an unknown session");
}

const sha = (b) => createHash("sha256").update(b).digest("hex");

async function files(sbx) {
  const f = sbx.files;
  await f.writeFiles([{ path: "/workspace/a.txt", data: "hello\nworld\n", mode: 644 }]);
  check(await f.readFile("/workspace/a.txt") === "hello\nworld\n", "files: write and read text", null);
  check(await f.readFile("/workspace/a.txt", { range: "bytes=6-10" }) === "world", "files: Range", null);

  // 10 MiB both ways: a Blob (FormData) and a stream (the SDK's own
  // multipart writer), each checked by sha256 read whole and streamed.
  const big = randomBytes(10 << 20);
  await f.writeFiles([{ path: "/workspace/big.bin", data: big, mode: 600 }]);
  const back = await f.readBytes("/workspace/big.bin");
  check(back.length === big.length && sha(back) === sha(big), "files: 10 MiB written and read (sha256)", back.length);
  async function* chunks() { for (let o = 0; o < big.length; o += 1 << 20) yield big.subarray(o, o + (1 << 20)); }
  await f.writeFiles([{ path: "/workspace/big2.bin", data: chunks() }]);
  const h = createHash("sha256");
  let n = 0, parts = 0;
  for await (const c of f.readBytesStream("/workspace/big2.bin")) { h.update(c); n += c.length; parts++; }
  check(n === big.length && h.digest("hex") === sha(big) && parts > 1,
    "files: 10 MiB streamed up and down (sha256)", { n, parts });

  const info = await f.getFileInfo(["/workspace/a.txt", "/workspace/big.bin"]);
  check(info["/workspace/a.txt"]?.size === 12 && info["/workspace/a.txt"].type === "file" &&
    info["/workspace/a.txt"].mode === 644 && info["/workspace/big.bin"].mode === 600 &&
    info["/workspace/a.txt"].modifiedAt instanceof Date, "files: info (mode as octal digits)", info);
  await f.setPermissions([{ path: "/workspace/a.txt", mode: 640 }]);
  const i2 = await f.getFileInfo(["/workspace/a.txt"]);
  check(i2["/workspace/a.txt"].mode === 640, "files: permissions", i2);
  await f.moveFiles([{ src: "/workspace/a.txt", dest: "/workspace/b.txt" }]);
  check(await f.readFile("/workspace/b.txt") === "hello\nworld\n", "files: move", null);
  await rejects(f.getFileInfo(["/workspace/a.txt"]), 404, "files: the moved-away path");
  const found = await f.search({ path: "/workspace", pattern: "*.txt" });
  check(found.length === 1 && found[0].path === "/workspace/b.txt", "files: search", found);

  // Replace: every occurrence, the mode kept; the counts when asked.
  await f.replaceContents([{ path: "/workspace/b.txt", oldContent: "o", newContent: "0" }]);
  check(await f.readFile("/workspace/b.txt") === "hell0\nw0rld\n", "files: replace", null);
  const counts = await f.replaceContentsDetailed([
    { path: "/workspace/b.txt", oldContent: "l", newContent: "LL" },
    { path: "/workspace/big.bin", oldContent: "no such text in random bytes? ", newContent: "x" }]);
  const byPath = Object.fromEntries(counts.map((c) => [c.path, c.replacedCount]));
  check(byPath["/workspace/b.txt"] === 3 && byPath["/workspace/big.bin"] === 0,
    "files: replace with counts", counts);
  check(await f.readFile("/workspace/b.txt") === "heLLLL0\nw0rLLd\n" &&
    (await f.getFileInfo(["/workspace/b.txt"]))["/workspace/b.txt"].mode === 640,
    "files: replaced, its mode kept", null);
  await rejects(f.replaceContents([{ path: "/etc/hostname", oldContent: "a", newContent: "b" }]), 403,
    "files: replace outside the policy");
  await rejects(f.replaceContents([{ path: "/workspace/none", oldContent: "a", newContent: "b" }]), 404,
    "files: replace in a missing file");

  await f.createDirectories([{ path: "/workspace/d1/d2", mode: 755 }]);
  await f.writeFiles([{ path: "/workspace/d1/d2/x", data: "x" }]);
  const ls = await f.listDirectory({ path: "/workspace/d1", depth: 2 });
  check(JSON.stringify(ls.map((e) => [e.path, e.type])) ===
    JSON.stringify([["/workspace/d1/d2", "directory"], ["/workspace/d1/d2/x", "file"]]), "directories: create and list", ls);
  await f.deleteDirectories(["/workspace/d1"]);
  await rejects(f.listDirectory({ path: "/workspace/d1" }), 404, "directories: deleted");
  await f.deleteFiles(["/workspace/b.txt", "/workspace/big.bin", "/workspace/big2.bin"]);
  const left = await f.listDirectory({ path: "/workspace" });
  check(left.length === 0, "files: deleted", left);

  // sbx's path policy stays: outside it is 403, as the SDK's typed error.
  await rejects(f.writeFiles([{ path: "/etc/evil", data: "x" }]), 403, "files: upload outside the policy");
  await rejects(f.readFile("/etc/passwd"), 403, "files: download outside the policy");
  await rejects(f.getFileInfo(["/etc/passwd"]), 403, "files: info outside the policy");
  await rejects(f.readFile("/workspace/none"), 404, "files: download of a missing file");
}

async function main() {
  // A wrong key: the SDK's typed 401.
  await rejects(Sandbox.create({ connectionConfig: { domain, apiKey: "wrong" }, image,
    skipHealthCheck: true }), 401, "create with a wrong key");

  const sbx = await Sandbox.create({
    connectionConfig: conn,
    image,
    resource: { cpu: "500m", memory: "512Mi" },
    timeoutSeconds: 300,
    env: { GREETING: "hi" },
    metadata: { suite: "it_opensandbox", run },
  });
  made.push(sbx);
  check(typeof sbx.id === "string" && sbx.id.length > 0, "create: Running and healthy", sbx.id);
  await lifecycle(sbx);
  const expired = await signedEndpoints(sbx);
  await snapshots(sbx);
  await commands(sbx);
  await sessions(sbx);
  await files(sbx);
  await expired();

  // Unknown sandbox: typed 404 (the SDK asks for its endpoint first).
  await rejects(Sandbox.connect({ connectionConfig: conn, sandboxId: "sb-000000000000" }), 404,
    "connect to an unknown sandbox");
  await rejects(Sandbox.create({ connectionConfig: conn, image, resource: { cpu: "1", gpu: "1" } }),
    400, "create with a limit sbx has not");

  await sbx.kill();
  made.length = 0;
  const mgr = SandboxManager.create({ connectionConfig: conn });
  await rejects(mgr.getSandboxInfo(sbx.id), 404, "getInfo after kill");
  await mgr.close();
  await sbx.close();
}

try {
  await main();
  console.log("all passed");
} catch (e) {
  console.error(e.check ? e.message : e);
  process.exitCode = 1;
} finally {
  for (const s of made) {
    try { await s.kill(); } catch { /* the wrapper removes what is left */ }
  }
}

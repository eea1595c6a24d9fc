// A bounded property-based fuzz run of a live supervisor from its OpenAPI
// document (fast-check): requests drawn from each operation's parameters
// and request schema (and, a third of the time, bodies and values that
// ignore them), sent over real HTTP. The property: no answer is a 5xx, and
// every answer the API gives as an error has the error body shape.
//   node fuzz.mjs DOCUMENT  with SBX_URL, SBX_TOKEN, SBX_SANDBOX (a live
//   sandbox's id for {id}), SBX_VICTIM (a second one, for the draws that
//   end or freeze a sandbox), SBX_FUZZ_SECONDS (default 5), SBX_FUZZ_SEED.
// Prints the counterexample fast-check shrank to and exits 1 when the
// property fails; 0 with the count of requests when it held.
import { readFileSync } from "node:fs";
import fc from "fast-check";

const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));
const base = process.env.SBX_URL;
const token = process.env.SBX_TOKEN;
const sandbox = process.env.SBX_SANDBOX;
const victim = process.env.SBX_VICTIM;
const seconds = Number(process.env.SBX_FUZZ_SECONDS || "5");
if (!sandbox || !victim) {
  console.log("fuzz: SBX_SANDBOX and SBX_VICTIM name two live sandboxes");
  process.exit(2);
}
const seed = process.env.SBX_FUZZ_SEED ? Number(process.env.SBX_FUZZ_SEED) : Date.now() ^ 0x5bd1e995;

// Left out, each for a reason of its own (API.md has their 5xx and their
// effects): what would reach off the machine or change the node for every
// later request, answers documented as 5xx, and streams that stay open.
const SKIP = {
  "POST /v1/images": "a pull reaches a registry (nothing may leave the machine); uploads: it_images_api",
  "POST /v1/sandboxes": "every valid draw is a cold create kept until the end",
  "PUT /v1/pools/{ref}": "would size pools: sandboxes made in the background",
  "POST /v1/volumes": "every valid draw makes a file system (mkfs, up to 1 TiB) kept until the end; it_volumes",
  "GET /v1/sandboxes/{id}/fs/watch": "a stream that stays open",
  "GET /v1/sandboxes/{id}/processes/{pid}/ws": "a WebSocket upgrade",
  "GET /v1/sandboxes/{id}/processes/{pid}/output": "a followed stream stays open",
  "GET /v1/sandboxes/{id}/browser": "answers 502 port_closed in a sandbox of another image (documented); it_browser",
  // The OpenSandbox layer: the same reason as sbx's own create; a command
  // is arbitrary shell text whose stream may stay open; a snapshot stores
  // an archive per draw (it_opensandbox checks them).
  "POST /opensandbox/v1/sandboxes": "every valid draw is a cold create kept until the end",
  "POST /opensandbox/execd/{id}/command": "runs drawn shell text; a foreground stream may stay open",
  "POST /opensandbox/v1/sandboxes/{id}/snapshots": "every valid draw stores an archive of the sandbox kept until the end (it_opensandbox checks it)",
  "GET /opensandbox/execd/{id}/metrics/watch": "a stream that stays open",
  "POST /opensandbox/execd/{id}/session/{pid}/run": "runs drawn shell text in a session; its stream may stay open",
  // The E2B layer: the same reason as sbx's own create; a command's
  // stream follows it, and a followed one stays open (it_e2b checks them).
  "POST /e2b/sandboxes": "every valid draw is a cold create kept until the end",
  "POST /e2b/v2/sandboxes": "every valid draw is a cold create kept until the end",
  "POST /e2b/sandboxes/{id}/envd/process.Process/Start": "runs a drawn command; its stream follows it",
  "POST /e2b/sandboxes/{id}/envd/process.Process/Connect": "a followed stream stays open",
  "POST /e2b/sandboxes/{id}/envd/filesystem.Filesystem/WatchDir": "a stream that stays open (it_e2b_files checks it)",
  "POST /e2b/sandboxes/{id}/code/execute": "runs drawn code; its stream follows the cell (it_e2b_code)",
};
// Drawn against the second sandbox, not the one every other draw runs
// against: each can end it (a delete; a timeout or an expiry a second
// away, which fast-check draws often, as it favours a range's ends) or
// freeze it (the rest would be 409).
const VICTIM = new Set([
  "DELETE /v1/sandboxes/{id}", "POST /v1/sandboxes/{id}/timeout", "POST /v1/sandboxes/{id}/pause",
  "POST /v1/sandboxes/{id}/resume", "DELETE /opensandbox/v1/sandboxes/{id}",
  "POST /opensandbox/v1/sandboxes/{id}/renew-expiration", "POST /opensandbox/v1/sandboxes/{id}/pause",
  "POST /opensandbox/v1/sandboxes/{id}/resume", "DELETE /e2b/sandboxes/{id}",
  "POST /e2b/sandboxes/{id}/timeout", "POST /e2b/sandboxes/{id}/pause",
  "POST /e2b/sandboxes/{id}/connect", "POST /e2b/v2/sandboxes/{id}/connect",
]);
const SKIP_PREFIX = ["/v1/sandboxes/{id}/ports/{port}", "/v1/sandboxes/{id}/mcp/"];

function resolve(s) {
  while (s && s.$ref) {
    s = s.$ref.slice(2).split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
      .reduce((o, k) => o[k], doc);
  }
  return s;
}

// A value of schema s (depth-bounded): what the document says is valid,
// give or take what it says only with oneOf/not.
function arb(s, depth = 0) {
  s = resolve(s) || {};
  if ("const" in s) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...s.enum);
  const alts = s.oneOf || s.anyOf;
  if (alts && !s.type) return fc.oneof(...alts.map((a) => arb(a, depth)));
  switch (s.type) {
    case "string":
      return s.pattern ? fc.stringMatching(new RegExp(s.pattern))
        : fc.string({ minLength: s.minLength || 0, maxLength: Math.min(s.maxLength ?? 40, 40), unit: "grapheme-ascii" });
    case "integer":
      return fc.integer({ min: s.minimum ?? -(2 ** 31), max: s.maximum ?? 2 ** 31 });
    case "number":
      return fc.double({ min: s.exclusiveMinimum ?? s.minimum ?? -1e9, max: s.maximum ?? 1e9,
                         noNaN: true, noDefaultInfinity: true, minExcluded: "exclusiveMinimum" in s });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array":
      return depth > 3 ? fc.constant([]) : fc.array(arb(s.items, depth + 1), { minLength: s.minItems || 0, maxLength: Math.min(s.maxItems ?? 3, 3) });
    case "object": {
      if (depth > 3) return fc.constant({});
      const props = s.properties || {};
      const keys = Object.keys(props);
      if (!keys.length && s.additionalProperties && typeof s.additionalProperties === "object")
        return fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), arb(s.additionalProperties, depth + 1), { maxKeys: 3 });
      const rec = {};
      for (const k of keys) rec[k] = arb(props[k], depth + 1);
      return fc.record(rec, { requiredKeys: s.required || [] });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

// Anything: the body or value a careless or hostile client sends.
const junk = fc.oneof(fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)), fc.string({ maxLength: 64 }),
                      fc.constantFrom("", "{", "null", "[]", "{\"a\":", "\u0000", "%00", "../..", "9".repeat(30)));

const ops = [];
for (const [path, item] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
    const key = method.toUpperCase() + " " + path;
    if (SKIP[key] || SKIP_PREFIX.some((p) => path.startsWith(p))) continue;
    const params = [...(item.parameters || []), ...(op.parameters || [])].map(resolve);
    const json = op.requestBody?.content?.["application/json"]?.schema;
    const raw = op.requestBody && !json;
    const values = {};
    for (const p of params) {
      let a = arb(p.schema);
      if (p.in === "path" && p.name === "id")
        a = fc.oneof({ weight: 9, arbitrary: fc.constant(VICTIM.has(key) ? victim : sandbox) }, { weight: 1, arbitrary: a });
      const any = fc.oneof({ weight: 2, arbitrary: a.map(String) }, { weight: 1, arbitrary: fc.string({ maxLength: 16 }) });
      values[p.in + ":" + p.name] = p.required ? any : fc.option(any, { nil: undefined });
    }
    const body = json ? fc.oneof({ weight: 2, arbitrary: arb(json).map((v) => JSON.stringify(v)) }, { weight: 1, arbitrary: junk })
      : raw ? fc.option(fc.string({ maxLength: 256 }), { nil: undefined }) : fc.constant(undefined);
    ops.push(fc.record({ method: fc.constant(method.toUpperCase()), path: fc.constant(path), values: fc.record(values), body }));
  }
}

let sent = 0;
async function send(req) {
  let path = req.path;
  const q = new URLSearchParams();
  const headers = { Authorization: "Bearer " + token };
  for (const [k, v] of Object.entries(req.values)) {
    if (v === undefined) continue;
    const [where, name] = k.split(":");
    if (where === "path") path = path.replace("{" + name + "}", encodeURIComponent(v));
    else if (where === "query") q.append(name, v);
    else if (where === "header") headers[name] = v.replace(/[^\x20-\x7e]/g, "");
  }
  if (req.body !== undefined) headers["Content-Type"] = "application/json";
  const url = base + path + (q.size ? "?" + q : "");
  const r = await fetch(url, { method: req.method, headers, body: req.body, signal: AbortSignal.timeout(15000) });
  const text = await r.text();
  sent++;
  return { url, status: r.status, type: r.headers.get("content-type") || "", text,
           retryAfter: r.headers.get("retry-after") };
}

const started = Date.now();
const statuses = {};
try {
  await fc.assert(
    fc.asyncProperty(fc.oneof(...ops), async (req) => {
      const a = await send(req);
      statuses[a.status] = (statuses[a.status] || 0) + 1;
      // 503 with Retry-After is "not now" (the node at its limit: a fork
      // drawn with a large count fills it), an answer API.md promises
      if (a.status >= 500 && !(a.status === 503 && a.retryAfter)) throw new Error(`${req.method} ${a.url} -> ${a.status} ${a.text.slice(0, 300)}`);
      if (a.status >= 400 && a.type.startsWith("application/json")) {
        // errors under /opensandbox and /e2b are flat, as their SDKs read
        // them; E2B's control plane and plain envd routes say the status
        // as the code (a number), its Connect calls a Connect code
        const j = JSON.parse(a.text);
        const flat = req.path.startsWith("/opensandbox/") || req.path.startsWith("/e2b/");
        const e = flat ? j : j.error;
        if (req.path.startsWith("/e2b/") && !/\/envd\/[a-z]+\.[A-Z]/.test(req.path) && e &&
            e.code === a.status && typeof e.message === "string")
          return;
        // /v1/mcp is an MCP transport: its refusals of a message are
        // JSON-RPC errors (an integer code), as the MCP spec has them
        const rpc = req.path === "/v1/mcp" && j.jsonrpc === "2.0" && e && Number.isInteger(e.code) &&
          typeof e.message === "string";
        if (!rpc && (!e || typeof e.code !== "string" || typeof e.message !== "string"))
          throw new Error(`${req.method} ${a.url} -> ${a.status} without the error shape: ${a.text.slice(0, 300)}`);
      }
    }),
    { seed, numRuns: 1e9, interruptAfterTimeLimit: seconds * 1000, markInterruptAsFailure: false, endOnFailure: false },
  );
} catch (e) {
  console.log(`fuzz: FAILED (seed ${seed}, ${sent} requests): ${e.message.slice(0, 3000)}`);
  process.exit(1);
}
console.log(`fuzz: ${sent} requests over ${ops.length} operations in ${((Date.now() - started) / 1000).toFixed(1)} s, ` +
            `seed ${seed}, no 5xx; statuses ${JSON.stringify(statuses)}`);

// Offline schema check of Kubernetes objects with kubernetes-models (pinned
// in package-lock.json): node check.mjs FILE.yaml (kustomize's output, many
// documents). Every object is validated against its kind's schema; so is
// every object a ConfigMap carries as a *.yaml key (the sandbox pod
// templates; not the supervisors' config file, which is no object). An
// object whose apiVersion/kind has no model fails: nothing passes unchecked.
// Prints one line per object, exits 1 if any failed.
// kubernetes-models does not refuse unknown fields; the server-side dry-run
// of test_k8s_manifests does.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);

function model(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z]+$/.test(kind))
    return null;
  // kubernetes-models/<group>/<version>/<Kind>; the core group is v1 alone.
  try {
    const m = require(`kubernetes-models/${apiVersion}/${kind}`);
    return m[kind] || null;
  } catch {
    return null;
  }
}

function check(obj, where, out) {
  const name = where + `${obj?.kind}/${obj?.metadata?.name ?? obj?.metadata?.generateName ?? "?"}`;
  const M = model(obj?.apiVersion, obj?.kind);
  if (!M) {
    out.push({ ok: false, line: `FAIL ${name}: no model for ${obj?.apiVersion} ${obj?.kind}` });
    return;
  }
  try {
    new M(obj).validate();
    out.push({ ok: true, line: `ok   ${name}` });
  } catch (e) {
    out.push({ ok: false, line: `FAIL ${name}: ${e.message}` });
  }
  // The supervisors' config file (sbx-supervisor-config) is no Kubernetes
  // object: the supervisor itself checks it (test_k8s_manifests runs
  // --check-config on it).
  const supervisorConfig = String(obj.metadata?.name ?? "").startsWith("sbx-supervisor-config");
  if (obj.kind === "ConfigMap" && obj.data && !supervisorConfig) {
    for (const [key, text] of Object.entries(obj.data)) {
      if (!/\.ya?ml$/.test(key)) continue;
      for (const d of parseAllDocuments(text)) {
        if (d.errors.length) {
          out.push({ ok: false, line: `FAIL ${name}[${key}]: ${d.errors[0].message}` });
          continue;
        }
        const inner = d.toJS();
        if (inner) check(inner, `${name}[${key}] `, out);
      }
    }
  }
}

const file = process.argv[2];
if (!file) {
  console.error("usage: node check.mjs FILE.yaml");
  process.exit(2);
}
const out = [];
let n = 0;
for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
  if (d.errors.length) {
    out.push({ ok: false, line: `FAIL yaml: ${d.errors[0].message}` });
    continue;
  }
  const obj = d.toJS();
  if (obj === null) continue;
  n++;
  check(obj, "", out);
}
for (const o of out) console.log(o.line);
if (n === 0) {
  console.log("FAIL no objects");
  process.exit(1);
}
process.exit(out.every((o) => o.ok) ? 0 : 1);

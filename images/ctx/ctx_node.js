// sbx's javascript context: cells run in one vm context whose globals
// last, with top-level await as Node's own REPL does it (its
// processTopLevelAwait, hence --expose-internals). Run by sbx-ctx, which
// reads our stdout and stderr as the cell's streams: cells come as JSON
// lines on stdin; results, displays, errors and each cell's end go as JSON
// lines on fd 3. SIGINT stops a running cell (breakOnSigint for a busy
// loop, a rejected wait for an await) and keeps the context.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const readline = require('readline');
const { processTopLevelAwait } = require('internal/repl/await');

const ctlFd = Number(process.env.SBX_CTX_FD);
delete process.env.SBX_CTX_FD;
const out = (o) => fs.writeSync(ctlFd, JSON.stringify(o) + '\n');

const bundle = (v) => {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length && keys.every((k) => /^[a-z]+\/[-+.\w]+$/.test(k)))
      return Object.fromEntries(keys.map((k) => [k, typeof v[k] === 'string' ? v[k] : JSON.stringify(v[k])]));
  }
  const b = { 'text/plain': util.inspect(v, { depth: 4, colors: false }) };
  if (v !== null && typeof v === 'object') {
    try { b['application/json'] = JSON.stringify(v); } catch (e) { /* cyclic: text only */ }
  }
  return b;
};

const sandbox = {
  console, process, require, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, fetch: globalThis.fetch,
  // display(value) or display({"text/html": "..."}): a display, not the result.
  display: (v) => { out({ display: bundle(v), main: false }); },
};
const context = vm.createContext(sandbox);

let interrupted = null;
process.on('SIGINT', () => { if (interrupted) interrupted(); });

const errorOf = (e) => {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    const ours = /ctx_node\.js|\(node:|node:vm|node:internal|node:events|node:domain/;
    const sigint = /interrupted by `SIGINT`/.test(String(e.message));
    return { name: sigint ? 'Interrupted' : String(e.name || 'Error'), value: String(e.message || ''),
      traceback: String(e.stack || '').split('\n').filter((l) => !ours.test(l)) };
  }
  return { name: 'Error', value: util.inspect(e), traceback: [] };
};

async function run(code) {
  const wrapped = processTopLevelAwait(code);
  let value;
  if (wrapped === null) {
    value = new vm.Script(code, { filename: 'cell.js' }).runInContext(context, { breakOnSigint: true });
  } else {
    const p = new vm.Script(wrapped, { filename: 'cell.js' }).runInContext(context, { breakOnSigint: true });
    const stop = new Promise((_, reject) => {
      interrupted = () => reject(Object.assign(new Error('Script execution interrupted.'), { name: 'Interrupted' }));
    });
    try {
      value = (await Promise.race([p, stop])).value;
    } finally {
      interrupted = null;
    }
  }
  if (value && typeof value.then === 'function' && wrapped === null) value = await value;
  return value;
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
const queue = [];
let busy = false;

async function next() {
  if (busy || !queue.length) return;
  busy = true;
  const m = queue.shift();
  if (m.init) {
    try {
      if (m.init.cwd) process.chdir(m.init.cwd);
      Object.assign(process.env, m.init.env || {});
      out({ done: true, status: 'ok' });
    } catch (e) {
      out({ done: true, status: 'error', message: String(e.message) });
    }
  } else {
    try {
      const v = await run(String(m.code));
      if (v !== undefined) out({ display: bundle(v), main: true });
      out({ done: true, status: 'ok' });
    } catch (e) {
      out({ error: errorOf(e) });
      out({ done: true, status: 'error' });
    }
  }
  busy = false;
  setImmediate(next);
}

lines.on('line', (l) => {
  if (!l.trim()) return;
  try { queue.push(JSON.parse(l)); } catch (e) { return; }
  next();
});
lines.on('close', () => process.exit(0));
out({ done: true, version: process.version });

// E2B's code interpreter SDK (npm @e2b/code-interpreter, pinned), unchanged,
// against sbx's /e2b layer and its sbx/code-interpreter image (the
// template code-interpreter-v1, mapped by --e2b-template). Configured by
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY only. Prints "all passed".
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const sbx = await Sandbox.create({ timeoutMs: 300_000 })
let failed = 0
async function flow(name, fn) {
  const t0 = Date.now()
  try {
    await fn()
    console.log(`ok   ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    failed++
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`)
  }
}

try {
  await flow('runCode: the main result, state, stdout', async () => {
    const one = await sbx.runCode('1+1')
    assert.equal(one.text, '2')
    await sbx.runCode('x = 40')
    const out = []
    const ex = await sbx.runCode('print("hello", x)\nx + 2', { onStdout: (m) => out.push(m.line) })
    assert.equal(ex.text, '42')
    assert.deepEqual(ex.logs.stdout, ['hello 40\n'])
    assert.equal(out.join(''), 'hello 40\n')
    assert.ok(ex.executionCount >= 3, String(ex.executionCount))
  })
  await flow('runCode: an error, a table, a plot', async () => {
    const bad = await sbx.runCode('raise ValueError("boom")')
    assert.equal(bad.error.name, 'ValueError')
    assert.equal(bad.error.value, 'boom')
    assert.match(bad.error.traceback, /ValueError/)
    const t = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})')
    assert.match(t.results[0].html, /<table/)
    const p = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
    const png = p.results.find((r) => r.png)
    assert.ok(png, JSON.stringify(p.results.map((r) => r.formats())))
    assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
  })
  await flow('contexts: create, run in it, javascript, list, remove', async () => {
    const c = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
    assert.equal(c.language, 'python')
    const r = await sbx.runCode('import os\nos.getcwd() == "/tmp"', { context: c })
    assert.equal(r.text, 'True')
    const js = await sbx.runCode('const v = await Promise.resolve(21); v * 2', { language: 'js' })
    assert.equal(js.text, '42')
    const all = await sbx.listCodeContexts()
    assert.ok(all.some((x) => x.id === c.id), JSON.stringify(all))
    await sbx.restartCodeContext(c)
    await sbx.removeCodeContext(c)
    assert.ok(!(await sbx.listCodeContexts()).some((x) => x.id === c.id))
  })
} finally {
  await sbx.kill().catch(() => {})
}
if (failed) {
  console.log(`${failed} failed`)
  process.exit(1)
}
console.log('all passed')

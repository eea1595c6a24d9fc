// E2B's JS SDK (npm e2b, pinned in package.json), unchanged, through its
// public API against sbx's /e2b layer. Configured only as an E2B user
// would: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the environment
// (it_e2b sets them). Each flow checks what the SDK returns; the first
// failure exits non-zero naming it. Prints "all passed" at the end.
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, SandboxNotFoundError, NotFoundError } from 'e2b'

const only = process.env.E2B_FLOWS ? process.env.E2B_FLOWS.split(',') : null
const made = []
const flows = []
const flow = (name, fn) => flows.push([name, fn])
const dec = new TextDecoder()

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms
  for (;;) {
    if (await fn()) return
    if (Date.now() > end) throw new Error('timed out waiting for ' + what)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function sandbox(opts = {}) {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, ...opts })
  made.push(sbx)
  return sbx
}

flow('create, getInfo, list by metadata', async () => {
  const sbx = await sandbox({ metadata: { flow: 'info', who: 'a b&c' } })
  assert.match(sbx.sandboxId, /^[a-z0-9-]+$/)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.deepEqual(info.metadata, { flow: 'info', who: 'a b&c' })
  assert.equal(info.state, 'running')
  assert.ok(info.endAt > info.startedAt)
  const page = Sandbox.list({ query: { metadata: { who: 'a b&c' } } })
  const items = await page.nextItems()
  assert.deepEqual(items.map((i) => i.sandboxId), [sbx.sandboxId])
  assert.equal(page.hasNext, false)
  assert.equal(await sbx.isRunning(), true)
})

flow('commands: output, env, exit codes, callbacks', async () => {
  const sbx = await sandbox({ envs: { FROM_CREATE: 'c1' } })
  const r = await sbx.commands.run('echo hi; echo $FROM_CREATE $FROM_RUN; echo oops >&2',
    { envs: { FROM_RUN: 'r1' } })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hi\nc1 r1\n')
  assert.equal(r.stderr, 'oops\n')
  const out = []
  await sbx.commands.run('for i in 1 2 3; do echo $i; done', { onStdout: (d) => out.push(d) })
  assert.equal(out.join(''), '1\n2\n3\n')
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, String(e))
    assert.equal(e.exitCode, 3)
    assert.equal(e.stderr, 'bad\n')
    return true
  })
  const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' })
  assert.equal(cwd.stdout, '/tmp\n')
})

flow('background: list, kill, reconnect, stdin', async () => {
  const sbx = await sandbox()
  const h = await sbx.commands.run('sleep 100', { background: true })
  const listed = await sbx.commands.list()
  const mine = listed.find((p) => p.pid === h.pid)
  assert.ok(mine, JSON.stringify(listed))
  assert.equal(mine.cmd, '/bin/bash')
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1)
  assert.equal(await sbx.commands.kill(h.pid), false)
  // output that outlives its client: disconnect, then connect by pid
  const t = await sbx.commands.run('for i in 1 2 3 4 5; do echo tick$i; sleep 0.3; done',
    { background: true })
  await t.disconnect()
  const seen = []
  const again = await sbx.commands.connect(t.pid, { onStdout: (d) => seen.push(d) })
  const res = await again.wait()
  assert.equal(res.exitCode, 0)
  assert.match(seen.join(''), /tick5\n$/)
  // stdin kept open, written, closed
  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(cat.pid, 'abc\n')
  await sbx.commands.sendStdin(cat.pid, new TextEncoder().encode('def\n'))
  await sbx.commands.closeStdin(cat.pid)
  const c = await cat.wait()
  assert.equal(c.stdout, 'abc\ndef\n')
  await assert.rejects(sbx.commands.connect(999999), (e) => e instanceof NotFoundError || /not.?found/i.test(String(e)))
})

flow('pty: create, type, resize, kill', async () => {
  const sbx = await sandbox()
  let data = ''
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { data += dec.decode(d) } })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo pty-$((40+2))\n'))
  await until('the terminal echo', () => data.includes('pty-42'))
  assert.match(data, /24 80/)
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'))
  await until('the new size', () => data.includes('30 100'))
  assert.equal(await sbx.pty.kill(term.pid), true)
  await assert.rejects(term.wait(), (e) => e instanceof CommandExitError)
})

flow('timeout, pause and connect-to-resume, kill', async () => {
  const sbx = await sandbox()
  await sbx.setTimeout(60_000)
  const info = await sbx.getInfo()
  const left = (new Date(info.endAt) - Date.now()) / 1000
  assert.ok(left > 50 && left <= 61, 'timeout left ' + left)
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)
  const back = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await back.getInfo()).state, 'running')
  assert.equal((await back.commands.run('echo back')).stdout, 'back\n')
  assert.equal(await back.kill(), true)
  made.splice(made.indexOf(sbx), 1)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), (e) => e instanceof SandboxNotFoundError)
})

let failed = 0
try {
  for (const [name, fn] of flows) {
    if (only && !only.some((o) => name.startsWith(o))) continue
    const t0 = Date.now()
    try {
      await fn()
      console.log(`ok   ${name} (${Date.now() - t0} ms)`)
    } catch (e) {
      failed++
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`)
    }
  }
} finally {
  for (const s of made) await s.kill().catch(() => {})
}
if (failed) {
  console.log(`${failed} failed`)
  process.exit(1)
}
console.log('all passed')

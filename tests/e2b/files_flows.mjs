// E2B's JS SDK (npm e2b, pinned in package.json), unchanged: every call of
// sandbox.files against sbx's /e2b layer (envd's filesystem.Filesystem and
// /files). Configured only as an E2B user would: E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY (it_e2b_files sets them). The first
// failure exits non-zero naming it; "all passed" at the end.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox, FileNotFoundError, InvalidArgumentError, SandboxError, FilesystemEventType } from 'e2b'

const flows = []
const flow = (name, fn) => flows.push([name, fn])
const sha = (b) => createHash('sha256').update(b).digest('hex')
const D = '/tmp/e2bfs'

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms
  for (;;) {
    if (await fn()) return
    if (Date.now() > end) throw new Error('timed out waiting for ' + what)
    await new Promise((r) => setTimeout(r, 50))
  }
}

flow('write and read text and bytes', async (sbx) => {
  const w = await sbx.files.write(`${D}/deep/er/a.txt`, 'hello, sbx\n')
  assert.deepEqual({ name: w.name, type: w.type, path: w.path }, { name: 'a.txt', type: 'file', path: `${D}/deep/er/a.txt` })
  assert.equal(await sbx.files.read(`${D}/deep/er/a.txt`), 'hello, sbx\n')
  // every byte value, and what looks like a multipart delimiter
  const bytes = new Uint8Array([...Array(256).keys(), ...new TextEncoder().encode('\r\n--boundary--\r\n')])
  await sbx.files.write(`${D}/bytes.bin`, bytes.buffer)
  assert.deepEqual(await sbx.files.read(`${D}/bytes.bin`, { format: 'bytes' }), bytes)
  // an empty file, overwritten files
  await sbx.files.write(`${D}/empty`, '')
  assert.equal(await sbx.files.read(`${D}/empty`), '')
  await sbx.files.write(`${D}/deep/er/a.txt`, 'second')
  assert.equal(await sbx.files.read(`${D}/deep/er/a.txt`), 'second')
  const blob = await sbx.files.read(`${D}/bytes.bin`, { format: 'blob' })
  assert.equal(blob.size, bytes.length)
})

flow('a 10 MiB file, sha256 both ways, read whole and streamed', async (sbx) => {
  const big = randomBytes(10 << 20)
  await sbx.files.write(`${D}/big.bin`, new Uint8Array(big).buffer)
  const back = await sbx.files.read(`${D}/big.bin`, { format: 'bytes' })
  assert.equal(back.length, big.length)
  assert.equal(sha(back), sha(big))
  const h = createHash('sha256')
  let n = 0
  for await (const chunk of await sbx.files.read(`${D}/big.bin`, { format: 'stream' })) {
    h.update(chunk)
    n += chunk.length
  }
  assert.equal(n, big.length)
  assert.equal(h.digest('hex'), sha(big))
  const r = await sbx.commands.run(`sha256sum ${D}/big.bin`)
  assert.equal(r.stdout.split(' ')[0], sha(big))
})

flow('several files in one write; ~ and relative paths', async (sbx) => {
  const ws = await sbx.files.write([
    { path: `${D}/multi/one.txt`, data: 'one' },
    { path: `${D}/multi/two.bin`, data: new Uint8Array([0, 13, 10, 45, 45]).buffer },
    { path: 'rel.txt', data: 'relative' },
    { path: '~/tilde/t.txt', data: 'tilde' },
  ])
  assert.deepEqual(ws.map((w) => w.path), [`${D}/multi/one.txt`, `${D}/multi/two.bin`,
    '/home/sandbox/rel.txt', '/home/sandbox/tilde/t.txt'])
  assert.equal(await sbx.files.read(`${D}/multi/one.txt`), 'one')
  assert.deepEqual(await sbx.files.read(`${D}/multi/two.bin`, { format: 'bytes' }), new Uint8Array([0, 13, 10, 45, 45]))
  assert.equal(await sbx.files.read('/home/sandbox/rel.txt'), 'relative')
  assert.equal(await sbx.files.read('~/tilde/t.txt'), 'tilde')
  assert.equal((await sbx.files.getInfo('tilde')).path, '/home/sandbox/tilde')
})

flow('list, exists, getInfo', async (sbx) => {
  await sbx.files.write(`${D}/l/f.txt`, '12345')
  await sbx.files.makeDir(`${D}/l/sub`)
  await sbx.files.write(`${D}/l/sub/inner.txt`, 'x')
  await sbx.commands.run(`ln -s f.txt ${D}/l/link && ln -s sub ${D}/l/dlink && ln -s nowhere ${D}/l/dangling`)
  const names = (await sbx.files.list(`${D}/l`)).map((e) => `${e.name}:${e.type}`).sort()
  // a symlink has its target's type; a dangling one is left out by the SDK
  assert.deepEqual(names, ['dlink:dir', 'f.txt:file', 'link:file', 'sub:dir'])
  const deep = (await sbx.files.list(`${D}/l`, { depth: 2 })).map((e) => e.path).sort()
  assert.ok(deep.includes(`${D}/l/sub/inner.txt`), deep.join(','))
  assert.equal(await sbx.files.exists(`${D}/l/f.txt`), true)
  assert.equal(await sbx.files.exists(`${D}/l/nope`), false)
  const info = await sbx.files.getInfo(`${D}/l/f.txt`)
  assert.equal(info.name, 'f.txt')
  assert.equal(info.type, 'file')
  assert.equal(info.path, `${D}/l/f.txt`)
  assert.equal(info.size, 5)
  assert.equal(info.mode, 0o644)
  assert.equal(info.permissions, '-rw-r--r--')
  assert.equal(info.owner, 'user')
  assert.ok(info.modifiedTime instanceof Date && Math.abs(Date.now() - info.modifiedTime) < 600_000)
  const dir = await sbx.files.getInfo(`${D}/l/sub`)
  assert.equal(dir.type, 'dir')
  assert.equal(dir.permissions, 'drwxr-xr-x')
  const link = await sbx.files.getInfo(`${D}/l/link`)
  assert.equal(link.type, 'file')
  assert.equal(link.symlinkTarget, 'f.txt')
  assert.equal(link.permissions, 'Lrwxrwxrwx')
})

flow('makeDir twice, rename, remove', async (sbx) => {
  assert.equal(await sbx.files.makeDir(`${D}/mk/a/b`), true)
  assert.equal(await sbx.files.makeDir(`${D}/mk/a/b`), false)
  assert.equal((await sbx.files.getInfo(`${D}/mk/a/b`)).type, 'dir')
  await sbx.files.write(`${D}/mk/a/b/f`, 'moved')
  const e = await sbx.files.rename(`${D}/mk/a/b/f`, `${D}/mk/g`)
  assert.equal(e.path, `${D}/mk/g`)
  assert.equal(e.name, 'g')
  assert.equal(e.type, 'file')
  assert.equal(await sbx.files.exists(`${D}/mk/a/b/f`), false)
  assert.equal(await sbx.files.read(`${D}/mk/g`), 'moved')
  const d = await sbx.files.rename(`${D}/mk/a`, `${D}/mk/c`)
  assert.equal(d.type, 'dir')
  await sbx.files.remove(`${D}/mk`)
  assert.equal(await sbx.files.exists(`${D}/mk`), false)
})

flow('watchDir: create, write, rename, remove', async (sbx) => {
  await sbx.files.makeDir(`${D}/w`)
  const seen = []
  const h = await sbx.files.watchDir(`${D}/w`, (ev) => seen.push(`${ev.type}:${ev.name}`), { recursive: true })
  await sbx.files.write(`${D}/w/new.txt`, 'x')
  await sbx.commands.run(`echo more >> ${D}/w/new.txt; mv ${D}/w/new.txt ${D}/w/moved.txt; rm ${D}/w/moved.txt`)
  await until('the watch events', () => seen.includes(`${FilesystemEventType.REMOVE}:moved.txt`))
  await h.stop()
  for (const want of [`${FilesystemEventType.CREATE}:new.txt`, `${FilesystemEventType.WRITE}:new.txt`,
    `${FilesystemEventType.RENAME}:new.txt`, `${FilesystemEventType.CREATE}:moved.txt`])
    assert.ok(seen.includes(want), `${want} not in ${seen.join(',')}`)
})

flow('errors in E2B\'s shapes', async (sbx) => {
  await assert.rejects(sbx.files.read(`${D}/missing`), (e) => e instanceof FileNotFoundError || (console.log(e), false))
  await assert.rejects(sbx.files.getInfo(`${D}/missing`), (e) => e instanceof FileNotFoundError || (console.log(e), false))
  await assert.rejects(sbx.files.remove(`${D}/missing`), (e) => e instanceof FileNotFoundError || (console.log(e), false))
  await assert.rejects(sbx.files.list(`${D}/missing`), (e) => e instanceof FileNotFoundError || (console.log(e), false))
  await sbx.files.write(`${D}/plain`, 'x')
  await assert.rejects(sbx.files.list(`${D}/plain`), (e) => e instanceof InvalidArgumentError || (console.log(e), false))
  await assert.rejects(sbx.files.read(D), (e) => e instanceof InvalidArgumentError || (console.log(e), false))
  await assert.rejects(sbx.files.watchDir(`${D}/plain`, () => {}), (e) => e instanceof InvalidArgumentError || (console.log(e), false))
  await assert.rejects(sbx.files.watchDir(`${D}/missing`, () => {}), (e) => e instanceof FileNotFoundError || (console.log(e), false))
  // outside the tenant's path policy: refused, nothing written
  await assert.rejects(sbx.files.write('/etc/e2bfs', 'x'), (e) => e instanceof SandboxError || (console.log(e), false))
  await assert.rejects(sbx.files.read('/etc/hostname'), (e) => e instanceof SandboxError || (console.log(e), false))
  await assert.rejects(sbx.files.makeDir('/etc/e2bfs'), (e) => e instanceof SandboxError || (console.log(e), false))
  await assert.rejects(sbx.files.list('~nobody/x'), (e) => e instanceof InvalidArgumentError || (console.log(e), false))
  assert.equal((await sbx.commands.run('ls /etc/e2bfs || echo absent')).stdout, 'absent\n')
})

const only = process.env.E2B_FLOWS ? process.env.E2B_FLOWS.split(',') : null
const sbx = await Sandbox.create({ timeoutMs: 300_000 })
let failed = false
try {
  for (const [name, fn] of flows) {
    if (only && !only.some((o) => name.startsWith(o))) continue
    const t0 = Date.now()
    try {
      await fn(sbx)
      console.log(`ok ${name} (${Date.now() - t0} ms)`)
    } catch (e) {
      failed = true
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`)
      break
    }
  }
} finally {
  await sbx.kill().catch(() => {})
}
if (failed) process.exit(1)
console.log('all passed')

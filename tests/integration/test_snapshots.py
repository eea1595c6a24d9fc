"""Snapshots, restores and forks of real runc sandboxes through the HTTP API.

A tree with every file kind (files of several modes and owners, folders, a
symlink, a hard link, a user.x xattr, a sparse file, a fifo, a setuid file,
a 50 MiB file, an image file deleted and an image folder replaced) is made
inside a sandbox as root, snapshotted and restored into a new sandbox; a
manifest taken inside both (sha256, stat, xattrs, allocated blocks) must
match, but for the setuid bit (stripped on restore). The source keeps
running through a snapshot (a command writing ticks across it ends whole).
A hostile-archive corpus (made here with Python's tarfile and the zstd CLI,
put into the store with a catalog row as a store would hold it) is each
refused with a clear error (422 bad_archive, 507 no_space for a layer over
the disk) and writes nothing outside the refused sandbox's own layer. A
fork of 3: each starts with the source's files and is independent of the
source and of the others. Everything made is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, containers_under, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
# The round trip's big file: 50 MiB under make test; make bench runs the
# round trip again with SBX_SNAP_BIG_MIB=1024 (the 1 GiB file).
BIG_MIB = int(os.environ.get("SBX_SNAP_BIG_MIB", "50"))
DISK = max(256 << 20, (2 * BIG_MIB + 128) << 20)

MAKE_TREE = r'''
import os
t = "/workspace/t"
os.makedirs(t + "/d/e", exist_ok=True)
open(t + "/plain", "w").write("plain\n")
os.chmod(t + "/plain", 0o640)
open(t + "/exe", "w").write("#!/bin/sh\necho hi\n")
os.chmod(t + "/exe", 0o755)
open(t + "/d/e/deep", "w").write("deep\n")
os.chown(t + "/d", 1000, 1000)
os.chown(t + "/plain", 1000, 1000)
os.symlink("plain", t + "/link")
os.symlink("/etc/passwd", t + "/abslink")
os.link(t + "/plain", t + "/hard")
open(t + "/x", "w").write("with an xattr\n")
os.setxattr(t + "/x", "user.x", b"value-of-x")
with open(t + "/sparse", "wb") as f:
    f.truncate(64 << 20)
    f.seek(32 << 20)
    f.write(b"middle")
os.mkfifo(t + "/fifo", 0o600)
open(t + "/suid", "w").write("setuid\n")
os.chmod(t + "/suid", 0o4755)
with open(t + "/big", "wb") as f:
    for i in range(BIG_MIB):
        f.write(os.urandom(1 << 20))
os.utime(t + "/exe", ns=(1600000000123456789, 1600000000123456789))
# an image file deleted, an image folder replaced (opaque)
os.remove("/etc/nsswitch.conf")
import shutil
shutil.rmtree("/home/sandbox")
os.mkdir("/home/sandbox")
open("/home/sandbox/mine", "w").write("mine\n")
print("ok")
'''.replace("range(BIG_MIB)", "range(%d)" % BIG_MIB)

MANIFEST = r'''
import hashlib, json, os, stat
out = {}
def one(p):
    st = os.lstat(p)
    e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        e.update(sha256=h.hexdigest(), size=st.st_size, mtime_ns=st.st_mtime_ns,
                 nlink=st.st_nlink, sparse=st.st_blocks * 512 < st.st_size // 2)
        try:
            e["user.x"] = os.getxattr(p, "user.x").decode()
        except OSError:
            pass
    elif stat.S_ISLNK(st.st_mode):
        e["target"] = os.readlink(p)
    out[p] = e
for root, dirs, files in os.walk("/workspace/t"):
    for n in sorted(dirs + files):
        one(os.path.join(root, n))
out["/etc/nsswitch.conf exists"] = os.path.exists("/etc/nsswitch.conf")
out["/home/sandbox"] = sorted(os.listdir("/home/sandbox"))
out["/etc/passwd exists"] = os.path.exists("/etc/passwd")
print(json.dumps(out, sort_keys=True))
'''


def tar_zst(members):
    """members: [(TarInfo, bytes or None)] -> zstd-compressed tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True,
                          check=True).stdout


def reg(name, data=b"x", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    return ti, data


def special(name, kind, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti, None


class ZeroReader(io.RawIOBase):
    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


class SnapshotsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SUP or not AGENT:
            raise unittest.SkipTest("SBX_SUPERVISOR and SBX_AGENT must be set")
        cls.sup = Supervisor(SUP, AGENT, pool_size=1,
                             extra=["--allow-root", "--default-resources",
                                    "disk=%d" % DISK])
        try:
            cls.sup.start()
        except Exception:
            cls.sup.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.sup.alive():
                stop_clean(cls.sup)
        finally:
            cls.sup.cleanup()

    # ---- helpers ----
    def run_in(self, sid, script, user="root", timeout=120):
        st, _, r = self.sup.request("POST", "/v1/sandboxes/%s/exec" % sid,
                                    {"argv": ["python3", "-c", script], "user": user,
                                     "timeout": timeout}, timeout=timeout + 30)
        self.assertEqual(st, 200, r)
        self.assertEqual(r["exit_code"], 0, r)
        return r["stdout"]

    def make(self, **kw):
        sb = self.sup.create(**kw)
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sb["id"])
        return sb["id"]

    def snapshot(self, sid, name="s"):
        st, _, snap = self.sup.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name},
                                       timeout=120)
        self.assertEqual(st, 201, snap)
        self.addCleanup(self.sup.request, "DELETE", "/v1/snapshots/" + snap["id"])
        return snap

    def restore(self, snap_id):
        st, _, body = self.sup.request("POST", "/v1/sandboxes", {"snapshot": snap_id}, timeout=120)
        if st == 201:
            self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + body["id"])
        return st, body

    def manifest(self, sid):
        return json.loads(self.run_in(sid, MANIFEST))

    # ---- round trip ----
    def test_round_trip(self):
        src = self.make()
        self.assertEqual(self.run_in(src, MAKE_TREE, timeout=600).strip(),
                         "ok")
        want = self.manifest(src)
        self.assertEqual(want["/workspace/t/big"]["size"], BIG_MIB << 20)
        self.assertFalse(want["/etc/nsswitch.conf exists"])
        self.assertEqual(want["/home/sandbox"], ["mine"])
        self.assertTrue(want["/workspace/t/sparse"]["sparse"])
        self.assertEqual(want["/workspace/t/x"]["user.x"], "value-of-x")
        self.assertEqual(want["/workspace/t/hard"]["nlink"], 2)

        # the source goes on through the snapshot: a command writing ticks
        # across it ends whole
        ticks = {}

        def tick():
            ticks["r"] = self.sup.request(
                "POST", "/v1/sandboxes/%s/exec" % src,
                {"argv": ["sh", "-c", "for i in $(seq 1 40); do echo $i >> /tmp/ticks; "
                          "sleep 0.05; done; wc -l < /tmp/ticks"]}, timeout=60)
        th = threading.Thread(target=tick)
        th.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        snap = self.snapshot(src, "tree")
        took = time.monotonic() - t0
        th.join(60)
        self.assertEqual(ticks["r"][0], 200, ticks)
        self.assertEqual(ticks["r"][2]["stdout"].strip(), "40", ticks)
        self.assertEqual(snap["sandbox"], src)
        self.assertEqual(snap["image"], "host")
        self.assertGreater(snap["size"], BIG_MIB << 20)  # random bytes do not compress
        print("snapshot of a %d MiB file's layer: %.2f s, %d bytes" % (BIG_MIB, took, snap["size"]))

        st, _, got = self.sup.request("GET", "/v1/snapshots/" + snap["id"])
        self.assertEqual((st, got), (200, snap))
        st, _, lst = self.sup.request("GET", "/v1/snapshots")
        self.assertIn(snap["id"], [s["id"] for s in lst["snapshots"]])
        self.assertTrue(os.path.isfile(os.path.join(self.sup.state_dir, "snapshots",
                                                    snap["id"] + ".tar.zst")))

        t0 = time.monotonic()
        st, body = self.restore(snap["id"])
        self.assertEqual(st, 201, body)
        print("restore into a new sandbox: %.2f s" % (time.monotonic() - t0))
        got = self.manifest(body["id"])
        # setuid and setgid bits are stripped on restore
        want["/workspace/t/suid"]["mode"] &= ~0o6000
        self.maxDiff = None
        self.assertEqual(got, want)
        # the restored sandbox is its own: the source's files unchanged by it
        self.run_in(body["id"], "open('/workspace/t/plain','w').write('changed')")
        self.assertEqual(self.run_in(src, "print(open('/workspace/t/plain').read(), end='')"),
                         "plain\n")

    def test_errors(self):
        s = self.sup
        self.assertEqual(s.request("GET", "/v1/snapshots/sn-000000000000")[0], 404)
        self.assertEqual(s.request("GET", "/v1/snapshots/../../etc")[0] in (400, 404), True)
        self.assertEqual(s.request("DELETE", "/v1/snapshots/sn-000000000000")[0], 404)
        st, _, b = s.request("POST", "/v1/sandboxes", {"snapshot": "sn-000000000000"})
        self.assertEqual(st, 404, b)
        st, _, b = s.request("POST", "/v1/sandboxes/sb-nope/snapshots", {"name": "x"})
        self.assertEqual(st, 404, b)
        src = self.make()
        st, _, b = s.request("POST", "/v1/sandboxes/%s/snapshots" % src, {"nme": "x"})
        self.assertEqual(st, 400, b)
        st, _, b = s.request("POST", "/v1/sandboxes/%s/fork" % src, {"count": 0})
        self.assertEqual(st, 400, b)
        st, _, b = s.request("POST", "/v1/sandboxes/%s/fork" % src, {"count": 33})
        self.assertEqual(st, 400, b)
        snap = self.snapshot(src)
        st, _, b = s.request("POST", "/v1/sandboxes", {"snapshot": snap["id"], "image": "/nope"})
        self.assertEqual(st, 400, b)
        self.assertEqual(s.request("DELETE", "/v1/snapshots/" + snap["id"])[0], 204)
        self.assertEqual(s.request("GET", "/v1/snapshots/" + snap["id"])[0], 404)
        self.assertFalse(os.path.exists(os.path.join(s.state_dir, "snapshots",
                                                     snap["id"] + ".tar.zst")))

    # ---- hostile archives ----
    def plant(self, blob):
        """Put an archive into the store as a store holds one: the file and
        its catalog row."""
        sid = "sn-" + uuid.uuid4().hex[:12]
        path = os.path.join(self.sup.state_dir, "snapshots", sid + ".tar.zst")
        with open(path, "wb") as f:
            f.write(blob)
        db = sqlite3.connect(os.path.join(self.sup.state_dir, "catalog.db"), timeout=10)
        with db:
            db.execute("INSERT INTO snapshots (id, name, tenant, source, image, digest, isolation,"
                       " size, created_at) VALUES (?, 'hostile', 'default', 'sb-x', 'host', '', 0,"
                       " ?, 0)", (sid, len(blob)))
        db.close()
        self.addCleanup(self.sup.request, "DELETE", "/v1/snapshots/" + sid)
        return sid

    def test_hostile_archives(self):
        mark = "sbx-evil-" + uuid.uuid4().hex[:8]
        outside = ["/tmp/" + mark, "/etc/" + mark, "/" + mark,
                   os.path.join(self.sup.state_dir, mark),
                   os.path.join(self.sup.state_dir, "sandboxes", mark)]
        sym = tarfile.SYMTYPE
        cases = {
            "absolute": [reg("/tmp/" + mark)],
            "dotdot": [reg("../../../../../../tmp/" + mark)],
            "dotdot inside": [reg("a/../../" + mark)],
            "symlink out then through": [special("esc", sym, linkname="/tmp"),
                                         reg("esc/" + mark)],
            "relative symlink climbing": [special("up", sym, linkname="../../../../../.."),
                                          reg("up/tmp/" + mark)],
            "char device": [special("dev-" + mark, tarfile.CHRTYPE, devmajor=1, devminor=3)],
            "block device": [special("blk-" + mark, tarfile.BLKTYPE, devmajor=7, devminor=0)],
            "whiteout as a device": [special("w-" + mark, tarfile.CHRTYPE, devmajor=0,
                                             devminor=0)],
            "hard link out (absolute)": [special(mark, tarfile.LNKTYPE, linkname="/etc/passwd")],
            "hard link out (dotdot)": [special(mark, tarfile.LNKTYPE,
                                               linkname="../../../../etc/passwd")],
            "hard link through a symlink": [special("s", sym, linkname="/etc"),
                                            special(mark, tarfile.LNKTYPE,
                                                    linkname="s/passwd")],
        }
        good = tar_zst([reg("fine", b"fine")])
        corrupt = bytearray(tar_zst([reg("f%d" % i, os.urandom(4096)) for i in range(8)]))
        corrupt[len(corrupt) // 2] ^= 0xFF
        corrupt[len(corrupt) // 2 + 1] ^= 0xFF
        blobs = {name: tar_zst(m) for name, m in cases.items()}
        blobs["corrupt zstd"] = bytes(corrupt)
        blobs["truncated"] = good[:len(good) // 2]
        blobs["not an archive"] = b"this is no tar and no zstd\n" * 40
        before = {sb["id"] for sb in self.sup.request("GET", "/v1/sandboxes")[2]["sandboxes"]}
        for name, blob in blobs.items():
            with self.subTest(name):
                sid = self.plant(blob)
                st, body = self.restore(sid)
                self.assertEqual(st, 422, (name, body))
                self.assertEqual(body["error"]["code"], "bad_archive", body)
                self.assertIn("snapshot", body["error"]["message"])
                for p in outside:
                    self.assertFalse(os.path.lexists(p), (name, p))
        # a layer over the sandbox's disk
        big = io.BytesIO()
        with tarfile.open(fileobj=big, mode="w", format=tarfile.PAX_FORMAT) as tf:
            ti = tarfile.TarInfo("zeros")
            ti.size = DISK + (64 << 20)
            tf.addfile(ti, io.BufferedReader(ZeroReader(ti.size), 1 << 20))
        blob = subprocess.run(["zstd", "-q", "-c"], input=big.getvalue(), capture_output=True,
                              check=True).stdout
        st, body = self.restore(self.plant(blob))
        self.assertEqual(st, 507, body)
        self.assertEqual(body["error"]["code"], "no_space", body)
        # nothing of them is left: no sandbox, no container, no layer folder
        after = {sb["id"] for sb in self.sup.request("GET", "/v1/sandboxes")[2]["sandboxes"]}
        self.assertEqual(after, before)
        left = [d for d in os.listdir(os.path.join(self.sup.state_dir, "sandboxes"))]
        live = {c[0].split("-", 2)[-1] for c in containers_under(self.sup.state_dir)}
        self.assertTrue(set(left) <= live, (left, live))
        # and a good archive restores in the same store
        st, body = self.restore(self.plant(good))
        self.assertEqual(st, 201, body)
        self.assertEqual(self.run_in(body["id"], "print(open('/fine').read())").strip(), "fine")

    def test_restore_disk(self):
        """A restore's disk is the one asked for: a layer over it is 507,
        one under it restores with that room."""
        src = self.make()
        digest = self.run_in(src, "import hashlib, os\nb = os.urandom(48 << 20)\n"
                                  "open('/workspace/big', 'wb').write(b)\n"
                                  "print(hashlib.sha256(b).hexdigest())").strip()
        snap = self.snapshot(src)
        before = set(os.listdir(os.path.join(self.sup.state_dir, "sandboxes")))
        st, _, body = self.sup.request("POST", "/v1/sandboxes", {
            "snapshot": snap["id"], "resources": {"disk": "32M"}}, timeout=120)
        self.assertEqual(st, 507, body)
        self.assertEqual(body["error"]["code"], "no_space", body)
        self.assertEqual(set(os.listdir(os.path.join(self.sup.state_dir, "sandboxes"))), before)
        st, _, body = self.sup.request("POST", "/v1/sandboxes", {
            "snapshot": snap["id"], "resources": {"disk": "96M"}}, timeout=120)
        self.assertEqual(st, 201, body)
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + body["id"])
        self.assertEqual(body["resources"]["disk"], 96 << 20)
        out = self.run_in(body["id"], "import hashlib, os\n"
                                      "print(hashlib.sha256(open('/workspace/big','rb').read())"
                                      ".hexdigest())\n"
                                      "v = os.statvfs('/workspace')\n"
                                      "print((v.f_blocks - v.f_bfree + v.f_bavail) * v.f_frsize)")
        got, room = out.split()
        self.assertEqual(got, digest)
        # df inside: what is used and the figure's room, about 96 MiB
        self.assertLess(abs(int(room) - (96 << 20)), 16 << 20, room)

    # ---- fork ----
    def fork(self, src, count):
        st, _, body = self.sup.request("POST", "/v1/sandboxes/%s/fork" % src, {"count": count},
                                       timeout=120)
        self.assertEqual(st, 201, body)
        forks = [sb["id"] for sb in body["sandboxes"]]
        for f in forks:
            self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + f)
        self.assertEqual(len(set(forks)), count)
        self.assertNotIn(src, forks)
        return forks

    def fork_log(self, src):
        with open(self.sup.log_path, errors="replace") as f:
            return [l for l in f if ("fork of %s:" % src) in l]

    def layers_gone(self):
        layers = os.path.join(self.sup.state_dir, "layers")
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and os.listdir(layers):
            time.sleep(0.2)
        self.assertEqual(os.listdir(layers), [])

    @staticmethod
    def without_nlink(m):
        # a fork's unwritten files are hard links of one layer's: their
        # link count counts the other forks' links
        return {k: ({a: b for a, b in v.items() if a != "nlink"} if isinstance(v, dict) else v)
                for k, v in m.items()}

    def test_fork(self):
        src = self.make()
        self.run_in(src, "open('/workspace/f','w').write('source')\n"
                         "open('/workspace/keep','w').write('k' * 100000)", user="sandbox")
        # the tree, but for the deleted image file: the pooled sandboxes'
        # start looked at /etc/nsswitch.conf already (test_fork_fill_checked)
        self.assertEqual(self.run_in(src, MAKE_TREE.replace('os.remove("/etc/nsswitch.conf")',
                                                            'os.rmdir("/var/tmp")')).strip(), "ok")
        want = self.without_nlink(self.manifest(src))
        self.sup.wait_ready()
        forks = self.fork(src, 3)
        # made in made sandboxes (the pooled one, then cold ones), filled
        self.assertIn("3 filled", self.fork_log(src)[-1])
        # each starts with the source's files (every kind, the image file
        # deleted and the folder replaced), then goes its own way
        for i, f in enumerate(forks):
            self.assertEqual(self.without_nlink(self.manifest(f)), want)
            self.assertEqual(self.run_in(f, "import os; print(os.path.exists('/var/tmp'))").strip(),
                             "False")
            self.assertEqual(self.run_in(f, "print(open('/workspace/f').read())").strip(), "source")
            self.run_in(f, "open('/workspace/f','w').write('fork%d')" % i, user="sandbox")
        self.run_in(src, "open('/workspace/f','w').write('source2')\n"
                         "open('/workspace/new','w').write('n')", user="sandbox")
        for i, f in enumerate(forks):
            self.assertEqual(self.run_in(f, "print(open('/workspace/f').read())").strip(),
                             "fork%d" % i)
            self.assertEqual(self.run_in(f, "import os; print(os.path.exists('/workspace/new'))")
                             .strip(), "False")
            self.assertEqual(self.run_in(f, "print(len(open('/workspace/keep').read()))").strip(),
                             "100000")
            # a file written in place is the fork's own copy
            self.run_in(f, "open('/workspace/t/plain','r+').write('F%d')" % i)
        self.assertEqual(self.run_in(src, "print(open('/workspace/f').read())").strip(), "source2")
        self.assertEqual(self.run_in(src, "print(open('/workspace/t/plain').read())"), "plain\n\n")
        for i, f in enumerate(forks):
            self.assertEqual(self.run_in(f, "print(open('/workspace/t/plain').read()[:2])").strip(),
                             "F%d" % i)
        # the filled forks hold links of their own: the layer goes at once
        self.layers_gone()
        self.assertEqual(self.manifest(forks[0])["/workspace/t/big"]["sha256"],
                         want["/workspace/t/big"]["sha256"])
        for f in forks:
            self.assertEqual(self.sup.request("DELETE", "/v1/sandboxes/" + f)[0], 204)

    def test_fork_fill_checked(self):
        """A ready sandbox whose tree looked at a path the fork changes
        (here: the test holds the image file the source deleted open
        through it) is not used: the fork is made cold, stacking the
        layer, and shows the deletion all the same."""
        src = self.make()
        self.run_in(src, "import os; os.remove('/etc/nsswitch.conf')\n"
                         "open('/workspace/g','w').write('g')")
        self.sup.wait_ready()
        held = []
        try:
            for sb in os.listdir(os.path.join(self.sup.state_dir, "sandboxes")):
                p = os.path.join(self.sup.state_dir, "sandboxes", sb, "bundle/rootfs/etc/nsswitch.conf")
                if sb != src and os.path.exists(p):
                    held.append(open(p))
            self.assertTrue(held)
            forks = self.fork(src, 1)
        finally:
            for f in held:
                f.close()
        log = self.fork_log(src)
        self.assertTrue(any("not filled, made cold instead" in l for l in log), log)
        self.assertIn("0 filled", log[-1])
        self.assertEqual(self.run_in(forks[0], "import os; print(os.path.exists('/etc/nsswitch.conf'),"
                                               " open('/workspace/g').read())").strip(), "False g")
        # the cold fork's overlay names the layer: it stays until that goes
        layers = os.path.join(self.sup.state_dir, "layers")
        self.assertEqual(len(os.listdir(layers)), 1)
        self.assertEqual(self.sup.request("DELETE", "/v1/sandboxes/" + forks[0])[0], 204)
        st, _, body = self.sup.request("POST", "/v1/sandboxes/%s/fork" % src, {}, timeout=120)
        self.assertEqual(st, 201, body)
        self.assertEqual(self.sup.request("DELETE", "/v1/sandboxes/" + body["sandboxes"][0]["id"])[0],
                         204)
        self.layers_gone()


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Snapshots kept in an S3-compatible store (--snapshot-store s3://...),
shared by two supervisors of their own state folders (two nodes), against a
real S3 server: s3rver behind AWS's own SigV4 check (tests/s3/server.mjs,
as it_s3_store runs it), on a free loopback port and a temporary folder.

- a snapshot taken on node A (its layer holds a 24 MiB file of random
  bytes: a multipart upload) is listed and read on node B, restored there
  into a new sandbox with identical files (sha256, modes, a symlink), and
  the store holds its archive and manifest; bob (another tenant) gets 404
  for it on both nodes, the admin sees it;
- deleted on B: A answers 404 for it (get, restore, delete) and lists it no
  more; the store holds neither object;
- an archive corrupted in the store (a truncated object put over it) is a
  422 bad_archive on restore, the node unharmed;
- the store's secret changed under the running nodes: 502 store_error;
  the store stopped: a snapshot, a list and a restore answer 503
  store_unavailable with a JSON error, nothing is recorded, and once the
  store is back everything works again;
- the store killed during a snapshot's upload: a 5xx store error, and no
  snapshot recorded on either node nor any archive without its manifest;
- a snapshot with include_volumes: its volume's archive beside the
  layer's, restored on the other node into a new volume there;
- the orphan sweep (both nodes, every 2 s, archives older than 6 s): an
  archive and a volume's archive no manifest names (an upload cut by a
  crash) are left while young and removed once old, counted in /metrics;
  a key that names no snapshot and every real snapshot's objects stay.
Every supervisor, sandbox, s3rver and folder is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT, SBX_S3_TOOL.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, end_all  # noqa: E402
from s3_harness import BUCKET, CREDS, TOOL, S3Server, environ, skip_unless  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
PREFIX = "it-snaps"
TOK = {"admin": "tok-admin-s3", "alice": "tok-alice-s3", "bob": "tok-bob-s3"}
DISK = 256 << 20
ORPHAN_AGE = 6  # seconds: an archive without a manifest this old is swept

MAKE_FILES = r'''
import os
os.makedirs("/workspace/s3/d", exist_ok=True)
with open("/workspace/s3/big", "wb") as f:
    f.write(os.urandom(24 << 20))
open("/workspace/s3/d/small", "w").write("small\n")
os.chmod("/workspace/s3/d/small", 0o600)
os.symlink("d/small", "/workspace/s3/link")
print("ok")
'''

LIST_FILES = r'''
import hashlib, json, os, stat
out = {}
for root, dirs, files in os.walk("/workspace/s3"):
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        st = os.lstat(p)
        e = {"mode": st.st_mode}
        if stat.S_ISREG(st.st_mode):
            e["sha256"] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        elif stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(p)
        out[p] = e
print(json.dumps(out, sort_keys=True))
'''


def tenants_doc():
    def h(t):
        return "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    return {"tenants": {
        "admin": {"tokens": [h(TOK["admin"])], "allow_root": True},
        "alice": {"tokens": [h(TOK["alice"])], "allow_root": True},
        "bob": {"tokens": [h(TOK["bob"])], "allow_root": True},
    }}


class SnapshotsS3(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        skip_unless(store=True)
        cls.root = tempfile.mkdtemp(prefix="sbx-it-snaps3-")
        cls.srv = None
        cls.nodes = []
        try:
            cls.srv = S3Server(os.path.join(cls.root, "s3")).start()
            cls.tenants = os.path.join(cls.root, "tenants.json")
            with open(cls.tenants, "w") as f:
                json.dump(tenants_doc(), f)
            with environ(**CREDS):
                for name in ("a", "b"):
                    s = Supervisor(SUP, AGENT, state_dir=os.path.join(cls.root, name, "state"),
                                   pool_size=1, token=TOK["admin"],
                                   extra=["--tenants", cls.tenants, "--default-resources",
                                          "disk=%d" % DISK, "--snapshot-store",
                                          "s3://%s/%s" % (BUCKET, PREFIX),
                                          "--s3-endpoint", cls.srv.endpoint(),
                                          "--snapshot-orphan-age", str(ORPHAN_AGE),
                                          "--snapshot-sweep-every", "2"])
                    os.makedirs(os.path.dirname(s.state_dir), exist_ok=True)
                    cls.nodes.append(s)
                    s.start()
            cls.a, cls.b = cls.nodes
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        end_all(cls.nodes, [cls.srv], cls.root)

    # ---- helpers ----
    def req(self, node, method, path, body=None, who="alice", timeout=120):
        return node.request(method, path, body, token="Bearer " + TOK[who], timeout=timeout)

    def assert_error(self, resp, status, code):
        st, _, b = resp
        self.assertEqual(st, status, b)
        self.assertEqual(b["error"]["code"], code, b)
        self.assertTrue(b["error"]["message"], b)
        self.assertNotIn(CREDS["AWS_SECRET_ACCESS_KEY"] + "x", b["error"]["message"])
        return b

    def sandbox(self, node, body=None, who="alice"):
        st, _, b = self.req(node, "POST", "/v1/sandboxes", body or {}, who)
        self.assertEqual(st, 201, b)
        self.addCleanup(self.req, node, "DELETE", "/v1/sandboxes/" + b["id"], None, who)
        return b["id"]

    def run_in(self, node, sid, script, who="alice"):
        st, _, r = self.req(node, "POST", "/v1/sandboxes/%s/exec" % sid,
                            {"argv": ["python3", "-c", script], "user": "root", "timeout": 120},
                            who, timeout=150)
        self.assertEqual(st, 200, r)
        self.assertEqual(r["exit_code"], 0, r)
        return r["stdout"]

    def snapshot(self, node, sid, who="alice"):
        st, _, snap = self.req(node, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "n"}, who)
        self.assertEqual(st, 201, snap)
        self.addCleanup(self.req, self.a, "DELETE", "/v1/snapshots/" + snap["id"], None, "admin")
        return snap

    def keys(self):
        """The store's keys under the prefix, by sup-s3-tool."""
        env = dict(os.environ, **CREDS)
        r = subprocess.run([TOOL, "--endpoint", self.srv.endpoint(), "s3://%s/%s" % (BUCKET, PREFIX),
                            "list"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(line.split()[0] for line in r.stdout.splitlines() if line.strip())

    def ids(self, node, who="alice"):
        st, _, b = self.req(node, "GET", "/v1/snapshots", None, who)
        self.assertEqual(st, 200, b)
        return [s["id"] for s in b["snapshots"]]

    def restart_store(self, secret=None):
        """The same port and folder; secret: the one it takes from now."""
        port = self.srv.port
        self.srv.stop()
        with environ(S3_SECRET=secret):
            self.srv = type(self).srv = S3Server(self.srv.folder, port).start()

    # ---- tests ----
    def test_a_round_trip_across_nodes(self):
        a, b = self.a, self.b
        src = self.sandbox(a)
        self.assertEqual(self.run_in(a, src, MAKE_FILES).strip(), "ok")
        want = json.loads(self.run_in(a, src, LIST_FILES))
        t0 = time.monotonic()
        snap = self.snapshot(a, src)
        print("snapshot of a 24 MiB layer into s3rver: %.2f s, %d bytes"
              % (time.monotonic() - t0, snap["size"]))
        self.assertGreater(snap["size"], 24 << 20)
        sid = snap["id"]
        self.assertIn("archives/%s.tar.zst" % sid, self.keys())
        self.assertIn("manifests/%s.json" % sid, self.keys())
        # nothing kept in A's state folder: the store has it
        self.assertFalse(os.path.exists(os.path.join(a.state_dir, "snapshots", sid + ".tar.zst")))

        # B reads it from the store
        st, _, got = self.req(b, "GET", "/v1/snapshots/" + sid)
        self.assertEqual((st, got), (200, snap))
        self.assertIn(sid, self.ids(b))
        self.assertIn(sid, self.ids(b, "admin"))
        # another tenant's: 404 on both nodes, also for a restore
        self.assert_error(self.req(b, "GET", "/v1/snapshots/" + sid, None, "bob"), 404, "not_found")
        self.assert_error(self.req(a, "GET", "/v1/snapshots/" + sid, None, "bob"), 404, "not_found")
        self.assertNotIn(sid, self.ids(b, "bob"))
        self.assert_error(self.req(b, "POST", "/v1/sandboxes", {"snapshot": sid}, "bob"), 404,
                          "not_found")
        self.assert_error(self.req(b, "DELETE", "/v1/snapshots/" + sid, None, "bob"), 404,
                          "not_found")

        t0 = time.monotonic()
        st, _, sb = self.req(b, "POST", "/v1/sandboxes", {"snapshot": sid})
        self.assertEqual(st, 201, sb)
        self.addCleanup(self.req, b, "DELETE", "/v1/sandboxes/" + sb["id"])
        print("restore on the other node: %.2f s" % (time.monotonic() - t0))
        self.assertEqual(json.loads(self.run_in(b, sb["id"], LIST_FILES)), want)
        # the download is gone once the restore is over
        self.assertEqual(os.listdir(os.path.join(b.state_dir, "snapshots", "tmp")), [])

        # deleted on B: gone from the store, and A answers 404 for it
        self.assertEqual(self.req(b, "DELETE", "/v1/snapshots/" + sid)[0], 204)
        self.assertNotIn("manifests/%s.json" % sid, self.keys())
        self.assertNotIn("archives/%s.tar.zst" % sid, self.keys())
        self.assert_error(self.req(a, "GET", "/v1/snapshots/" + sid), 404, "not_found")
        self.assert_error(self.req(a, "POST", "/v1/sandboxes", {"snapshot": sid}), 404, "not_found")
        self.assertNotIn(sid, self.ids(a))
        self.assertNotIn(sid, self.ids(b))
        self.assert_error(self.req(a, "DELETE", "/v1/snapshots/" + sid), 404, "not_found")

    def test_b_corrupt_archive_in_the_store(self):
        a, b = self.a, self.b
        src = self.sandbox(a)
        self.run_in(a, src, "open('/workspace/c','w').write('c' * 100000)")
        snap = self.snapshot(a, src)
        # a truncated object over the archive
        cut = os.path.join(self.root, "cut")
        with open(cut, "wb") as f:
            f.write(b"\x28\xb5\x2f\xfd" + b"\0" * 100)
        env = dict(os.environ, **CREDS)
        r = subprocess.run([TOOL, "--endpoint", self.srv.endpoint(), "s3://%s/%s" % (BUCKET, PREFIX),
                            "put", "archives/%s.tar.zst" % snap["id"], cut],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for node in (a, b):
            e = self.assert_error(self.req(node, "POST", "/v1/sandboxes", {"snapshot": snap["id"]}),
                                  422, "bad_archive")
            self.assertIn("sha256", e["error"]["message"])
        self.assertTrue(a.alive() and b.alive())
        self.assertEqual(os.listdir(os.path.join(b.state_dir, "snapshots", "tmp")), [])

    def test_c_store_refusing_and_away(self):
        a, b = self.a, self.b
        src = self.sandbox(a)
        before = self.ids(a)
        snap = self.snapshot(a, src)
        # the store's secret changed under the running nodes: 502
        self.restart_store(secret="another-secret")
        try:
            e = self.assert_error(self.req(a, "GET", "/v1/snapshots"), 502, "store_error")
            self.assertIn("SignatureDoesNotMatch", e["error"]["message"])
            self.assert_error(self.req(b, "POST", "/v1/sandboxes", {"snapshot": snap["id"]}), 502,
                              "store_error")
            self.assert_error(self.req(a, "POST", "/v1/sandboxes/%s/snapshots" % src, {}), 502,
                              "store_error")
        finally:
            self.restart_store()
        # the store away: 503, the nodes answer everything else meanwhile
        port = self.srv.port
        self.srv.stop()
        try:
            t0 = time.monotonic()
            self.assert_error(self.req(a, "GET", "/v1/snapshots"), 503, "store_unavailable")
            self.assert_error(self.req(b, "GET", "/v1/snapshots/" + snap["id"]), 503,
                              "store_unavailable")
            self.assert_error(self.req(b, "POST", "/v1/sandboxes", {"snapshot": snap["id"]}), 503,
                              "store_unavailable")
            self.assert_error(self.req(a, "POST", "/v1/sandboxes/%s/snapshots" % src, {}), 503,
                              "store_unavailable")
            self.assert_error(self.req(b, "DELETE", "/v1/snapshots/" + snap["id"]), 503,
                              "store_unavailable")
            print("four store calls with the store away: %.2f s" % (time.monotonic() - t0))
            self.assertEqual(self.req(a, "GET", "/v1/sandboxes/" + src)[0], 200)
        finally:
            self.srv = type(self).srv = S3Server(self.srv.folder, port).start()
        # nothing half-recorded: only the one snapshot made, whole
        self.assertEqual(sorted(self.ids(a)), sorted(before + [snap["id"]]))
        self.assertEqual(sorted(self.ids(b)), sorted(before + [snap["id"]]))
        st, _, sb = self.req(b, "POST", "/v1/sandboxes", {"snapshot": snap["id"]})
        self.assertEqual(st, 201, sb)
        self.addCleanup(self.req, b, "DELETE", "/v1/sandboxes/" + sb["id"])

    def test_d_store_killed_mid_upload(self):
        a = self.a
        src = self.sandbox(a)
        self.run_in(a, src, "import os; open('/workspace/r','wb').write(os.urandom(120 << 20))")
        before = self.ids(a)
        keys_before = self.keys()
        out = {}

        def take():
            out["r"] = self.req(a, "POST", "/v1/sandboxes/%s/snapshots" % src, {"name": "cut"})
        old = self._uploads()
        th = threading.Thread(target=take)
        th.start()
        # the upload under way: its first part is in the store's folder
        port = self.srv.port
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self._uploads() - old:
            time.sleep(0.02)
        seen = bool(self._uploads() - old)
        self.srv.signal(signal.SIGKILL)
        th.join(120)
        self.srv.stop()
        self.srv = type(self).srv = S3Server(self.srv.folder, port).start()
        self.assertTrue(seen, "no multipart upload seen in the store")
        st, _, body = out["r"]
        self.assertIn(st, (502, 503), body)
        self.assertIn(body["error"]["code"], ("store_error", "store_unavailable"), body)
        self.assertEqual(sorted(self.ids(a)), sorted(before))
        self.assertEqual(sorted(self.ids(self.b)), sorted(before))
        self.assertEqual(self.keys(), keys_before)
        self.assertEqual(os.listdir(os.path.join(a.state_dir, "snapshots", "tmp")), [])

    def test_e_volumes_across_nodes(self):
        """include_volumes: each volume's archive beside the layer's in the
        store, named by the manifest; restored on the other node into a
        new volume of that node, mounted where the source had it."""
        a, b = self.a, self.b
        st, _, v = self.req(a, "POST", "/v1/volumes", {"name": "vol", "size": "48M"})
        self.assertEqual(st, 201, v)
        self.addCleanup(self.req, a, "DELETE", "/v1/volumes/vol")
        src = self.sandbox(a, {"volumes": [{"name": "vol", "mount": "/workspace/s3"}]})
        self.assertEqual(self.run_in(a, src, MAKE_FILES.replace("24 << 20", "3 << 20")).strip(), "ok")
        want = json.loads(self.run_in(a, src, LIST_FILES))
        st, _, snap = self.req(a, "POST", "/v1/sandboxes/%s/snapshots" % src,
                               {"name": "v", "include_volumes": True})
        self.assertEqual(st, 201, snap)
        self.addCleanup(self.req, self.a, "DELETE", "/v1/snapshots/" + snap["id"], None, "admin")
        sid = snap["id"]
        self.assertEqual([(x["name"], x["mount"], x["size"]) for x in snap["volumes"]],
                         [("vol", "/workspace/s3", 48 << 20)])
        self.assertIn("archives/%s.v0.tar.zst" % sid, self.keys())
        # B knows the volumes from the manifest alone
        st, _, got = self.req(b, "GET", "/v1/snapshots/" + sid)
        self.assertEqual((st, got), (200, snap))
        st, _, sb = self.req(b, "POST", "/v1/sandboxes", {"snapshot": sid})
        self.assertEqual(st, 201, sb)
        [nv] = sb["volumes"]
        self.addCleanup(self.req, b, "DELETE", "/v1/volumes/" + nv["name"])
        self.addCleanup(self.req, b, "DELETE", "/v1/sandboxes/" + sb["id"])
        self.assertTrue(nv["name"].startswith("vol-"), nv)
        self.assertEqual((nv["mount"], nv["read_only"]), ("/workspace/s3", False))
        self.assertEqual(json.loads(self.run_in(b, sb["id"], LIST_FILES)), want)
        self.assertEqual(os.listdir(os.path.join(b.state_dir, "snapshots", "tmp")), [])
        # deleted: the volume's archive goes with the rest
        self.assertEqual(self.req(b, "DELETE", "/v1/snapshots/" + sid)[0], 204)
        self.assertEqual([k for k in self.keys() if sid in k], [])

    def put_key(self, key, data):
        path = os.path.join(self.root, "obj")
        with open(path, "wb") as f:
            f.write(data)
        env = dict(os.environ, **CREDS)
        r = subprocess.run([TOOL, "--endpoint", self.srv.endpoint(), "s3://%s/%s" % (BUCKET, PREFIX),
                            "put", key, path], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def removed_total(self):
        """sbx_snapshot_store_orphans_removed_total of both nodes."""
        n = 0
        for node in (self.a, self.b):
            st, _, text = self.req(node, "GET", "/metrics", None, "admin")
            self.assertEqual(st, 200, text)
            for line in text.decode().splitlines():
                if line.startswith("sbx_snapshot_store_orphans_removed_total "):
                    n += float(line.split()[1])
        return n

    def test_f_orphan_sweep(self):
        a = self.a
        src = self.sandbox(a)
        snap = self.snapshot(a, src)
        removed0 = self.removed_total()
        orphans = ["archives/sn-0123456789ab.tar.zst", "archives/sn-0123456789ab.v0.tar.zst"]
        other = "archives/notes.txt"  # names no snapshot: not the sweep's
        t0 = time.monotonic()
        for k in orphans:
            self.put_key(k, b"cut by a crash")
        self.put_key(other, b"someone else's")
        # young: left (a snapshot's archive waits for its manifest this long)
        keys = self.keys()
        if time.monotonic() - t0 < ORPHAN_AGE - 2:
            for k in orphans:
                self.assertIn(k, keys)
        deadline = time.monotonic() + ORPHAN_AGE + 30
        while time.monotonic() < deadline and any(k in self.keys() for k in orphans):
            time.sleep(0.5)
        keys = self.keys()
        print("orphans swept %.1f s after their upload (age %d s)" % (time.monotonic() - t0, ORPHAN_AGE))
        for k in orphans:
            self.assertNotIn(k, keys)
        self.assertGreaterEqual(time.monotonic() - t0, ORPHAN_AGE - 1)
        self.assertIn(other, keys)
        self.assertIn("archives/%s.tar.zst" % snap["id"], keys)
        self.assertIn("manifests/%s.json" % snap["id"], keys)
        # each node counts what it removed; two passes at the same moment
        # may both delete (S3's DELETE of a gone key answers as well)
        self.assertIn(self.removed_total() - removed0, (2, 3, 4))
        st, _, sb = self.req(self.b, "POST", "/v1/sandboxes", {"snapshot": snap["id"]})
        self.assertEqual(st, 201, sb)
        self.addCleanup(self.req, self.b, "DELETE", "/v1/sandboxes/" + sb["id"])
        env = dict(os.environ, **CREDS)
        subprocess.run([TOOL, "--endpoint", self.srv.endpoint(), "s3://%s/%s" % (BUCKET, PREFIX),
                        "delete", other], capture_output=True, env=env, timeout=60)

    def _uploads(self):
        """s3rver keeps a multipart upload's parts in a folder of its own
        (under ..._uploads/<upload id>/: 1, 1.md5, ...): those with a part."""
        return {root for root, _, files in os.walk(self.srv.folder)
                if "uploads" in root and "1.md5" in files}


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Snapshots and forks that carry the sandbox's volumes ("include_volumes"),
against a real supervisor, real runc sandboxes, real loop-mounted volumes
and real HTTP.

A sandbox mounts two volumes of alice's (one read-write with a tree of
files: a 6 MiB random file, a folder, a symlink, a hard link, an xattr; one
read-only); a snapshot with include_volumes records both (name, mount,
mode, size) and stores an archive of each beside the layer's. A restore
makes two new volumes of the restoring tenant (new names, the source's
sizes), their files byte-identical to the source's, mounted at the same
paths in the same modes; they are recorded (listed, mounted by it, the
one-writer rule holds), and writes to them leave the source's volumes
untouched. A fork of 2 with include_volumes gives each fork copies of its
own, independent of the source and of each other. Without the flag a
snapshot carries none. A restore whose volumes do not fit the tenant's
disk quota is 429 quota_exceeded, a volume's archive larger than its
volume 507 no_space, a bad flag 400; none of them leaves a volume behind.
Every container, mount and loop device is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import sqlite3
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import end_clean, tenants_supervisor  # noqa: E402

from test_restart import TOK, as_  # noqa: E402  (admin, alice, bob)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20

FILL = r'''
import os
p = "/workspace/proj"
os.makedirs(p + "/d/e", exist_ok=True)
with open(p + "/big", "wb") as f:
    f.write(os.urandom(6 << 20))
open(p + "/d/e/deep", "w").write("deep\n")
os.symlink("d/e/deep", p + "/link")
os.link(p + "/big", p + "/hard")
open(p + "/x", "w").write("x\n")
os.setxattr(p + "/x", "user.v", b"vol-xattr")
os.chmod(p + "/x", 0o600)
print("ok")
'''

LIST = r'''
import hashlib, json, os, stat, sys
out = {}
for top in sys.argv[1:]:
    for root, dirs, files in os.walk(top):
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            st = os.lstat(p)
            e = {"mode": st.st_mode, "uid": st.st_uid}
            if stat.S_ISREG(st.st_mode):
                e["sha256"] = hashlib.sha256(open(p, "rb").read()).hexdigest()
                e["nlink"] = st.st_nlink
                try:
                    e["user.v"] = os.getxattr(p, "user.v").decode()
                except OSError:
                    pass
            elif stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            out[p] = e
print(json.dumps(out, sort_keys=True))
'''


class SnapshotVolumes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SUP or not AGENT:
            raise unittest.SkipTest("SBX_SUPERVISOR and SBX_AGENT must be set")
        cls.sup = tenants_supervisor(SUP, AGENT, {
            "admin": {"token": TOK["admin"]},
            "alice": {"token": TOK["alice"]},
            # a 256M volume and a 128M sandbox fit; a restore of both does not
            "bob": {"token": TOK["bob"], "quota": {"disk": "600M"}},
        }, TOK["admin"], extra=["--allow-root", "--default-resources", "disk=128M"])
        cls.state = cls.sup.state_dir

    @classmethod
    def tearDownClass(cls):
        end_clean(cls.sup)

    # ---- helpers ----
    def req(self, method, path, body=None, who="alice", timeout=120):
        return self.sup.request(method, path, body, token=as_(who), timeout=timeout)

    def ok(self, resp, status):
        st, _, b = resp
        self.assertEqual(st, status, b)
        return b

    def error(self, resp, status, code):
        st, _, b = resp
        self.assertEqual(st, status, b)
        self.assertEqual(b["error"]["code"], code, b)
        self.assertTrue(b["error"]["message"], b)
        return b["error"]["message"]

    def volume(self, name, size="64M", who="alice"):
        self.ok(self.req("POST", "/v1/volumes", {"name": name, "size": size}, who), 201)
        self.addCleanup(self.req, "DELETE", "/v1/volumes/" + name, None, who)

    def sandbox(self, body, who="alice"):
        sb = self.ok(self.req("POST", "/v1/sandboxes", body, who), 201)
        self.addCleanup(self.drop_sandbox, sb["id"], who)
        return sb

    def drop_sandbox(self, sid, who):
        """The sandbox, then the volumes a restore or fork made for it."""
        st, _, sb = self.req("GET", "/v1/sandboxes/" + sid, None, who)
        if st != 200:
            return
        self.req("DELETE", "/v1/sandboxes/" + sid, None, who)
        for v in sb.get("volumes", []):
            if "-" in v["name"]:  # made here: the source's name and -<8 hex>
                self.req("DELETE", "/v1/volumes/" + v["name"], None, who)

    def run_in(self, sid, script, *args, user="sandbox", who="alice"):
        r = self.ok(self.req("POST", "/v1/sandboxes/%s/exec" % sid,
                             {"argv": ["python3", "-c", script] + list(args), "user": user,
                              "timeout": 60}, who), 200)
        self.assertEqual(r["exit_code"], 0, r)
        return r["stdout"]

    def listing(self, sid, *tops, who="alice"):
        return json.loads(self.run_in(sid, LIST, *tops, who=who))

    def snapshot(self, sid, who="alice", **body):
        snap = self.ok(self.req("POST", "/v1/sandboxes/%s/snapshots" % sid, body, who), 201)
        self.addCleanup(self.req, "DELETE", "/v1/snapshots/" + snap["id"], None, who)
        return snap

    def wait_names(self, want, who="alice", timeout=20):
        deadline = time.monotonic() + timeout
        while self.names(who) != want and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.names(who), want)

    def names(self, who="alice"):
        return sorted(v["name"] for v in self.ok(self.req("GET", "/v1/volumes", None, who), 200)["volumes"])

    # ---- tests ----
    def test_snapshot_restore_fork(self):
        self.volume("proj", "64M")
        self.volume("ref", "48M")
        # ref holds a file written by another sandbox first
        w = self.sandbox({"volumes": [{"name": "ref", "mount": "/ref"}]})
        self.run_in(w["id"], "open('/ref/r', 'w').write('reference\\n')")
        self.drop_sandbox(w["id"], "alice")

        src = self.sandbox({"volumes": [{"name": "proj", "mount": "/workspace/proj"},
                                        {"name": "ref", "mount": "/data/ref", "read_only": True}]})
        self.assertEqual(self.run_in(src["id"], FILL).strip(), "ok")
        want = self.listing(src["id"], "/workspace/proj", "/data/ref")
        self.assertEqual(want["/workspace/proj/big"]["nlink"], 2)
        self.assertEqual(want["/workspace/proj/x"]["user.v"], "vol-xattr")

        # a bad flag is 400; without it no volume is carried
        self.error(self.req("POST", "/v1/sandboxes/%s/snapshots" % src["id"],
                            {"include_volumes": "yes"}), 400, "bad_request")
        plain = self.snapshot(src["id"], name="plain")
        self.assertEqual(plain["volumes"], [])

        snap = self.snapshot(src["id"], name="with", include_volumes=True)
        self.assertEqual([(v["name"], v["mount"], v["read_only"], v["size"]) for v in snap["volumes"]],
                         [("proj", "/workspace/proj", False, 64 * MB), ("ref", "/data/ref", True, 48 * MB)])
        self.assertGreater(snap["volumes"][0]["archive_size"], 6 * MB)
        self.assertEqual(self.ok(self.req("GET", "/v1/snapshots/" + snap["id"]), 200), snap)
        kept = os.path.join(self.state, "snapshots")
        for k in (0, 1):
            self.assertTrue(os.path.isfile(os.path.join(kept, "%s.v%d.tar.zst" % (snap["id"], k))))
        before = self.names()

        # a restore: new volumes (new names, same sizes), the same files at
        # the same paths and modes
        r = self.sandbox({"snapshot": snap["id"]})
        got = {v["mount"]: v for v in r["volumes"]}
        self.assertEqual(sorted(got), ["/data/ref", "/workspace/proj"])
        self.assertTrue(got["/workspace/proj"]["name"].startswith("proj-"))
        self.assertTrue(got["/data/ref"]["name"].startswith("ref-"))
        self.assertEqual((got["/workspace/proj"]["read_only"], got["/data/ref"]["read_only"]), (False, True))
        self.assertEqual(self.listing(r["id"], "/workspace/proj", "/data/ref"), want)
        new = sorted(v["name"] for v in r["volumes"])
        self.assertEqual(self.names(), sorted(before + new))
        for v in r["volumes"]:
            info = self.ok(self.req("GET", "/v1/volumes/" + v["name"]), 200)
            self.assertEqual(info["size"], {"proj": 64 * MB, "ref": 48 * MB}[v["name"].split("-")[0]])
            if v["read_only"]:
                self.assertEqual(info["mounted"], {"readers": 1, "writer": None})
            else:
                self.assertEqual(info["mounted"], {"readers": 0, "writer": r["id"]})
                # the one-writer rule holds for the new volume too
                self.error(self.req("POST", "/v1/sandboxes",
                                    {"volumes": [{"name": v["name"], "mount": "/w"}]}),
                           409, "volume_busy")
        # the restored volumes are its own: the source's stay as they were
        self.run_in(r["id"], "open('/workspace/proj/d/e/deep', 'w').write('changed\\n')")
        self.assertEqual(self.listing(src["id"], "/workspace/proj", "/data/ref"), want)
        # a restore of the snapshot without volumes makes none
        r0 = self.sandbox({"snapshot": plain["id"]})
        self.assertNotIn("volumes", r0)

        # a fork of 2 with volumes: each its own copies
        forks = self.ok(self.req("POST", "/v1/sandboxes/%s/fork" % src["id"],
                                 {"count": 2, "include_volumes": True}), 201)["sandboxes"]
        for f in forks:
            self.addCleanup(self.drop_sandbox, f["id"], "alice")
        self.assertEqual(len(forks), 2)
        names = set()
        for f in forks:
            self.assertEqual(sorted(v["mount"] for v in f["volumes"]), ["/data/ref", "/workspace/proj"])
            names.update(v["name"] for v in f["volumes"])
            self.assertEqual(self.listing(f["id"], "/workspace/proj", "/data/ref"), want)
        self.assertEqual(len(names), 4)
        self.assertFalse(names & set(before + new))
        self.run_in(forks[0]["id"], "open('/workspace/proj/mine', 'w').write('0')")
        self.assertEqual(self.listing(forks[1]["id"], "/workspace/proj", "/data/ref"), want)
        self.assertEqual(self.listing(src["id"], "/workspace/proj", "/data/ref"), want)
        # a fork without the flag mounts no volume
        bare = self.ok(self.req("POST", "/v1/sandboxes/%s/fork" % src["id"], {"count": 1}), 201)["sandboxes"]
        self.addCleanup(self.drop_sandbox, bare[0]["id"], "alice")
        self.assertNotIn("volumes", bare[0])

        # a volume's archive larger than its volume (its row says 32M, the
        # archive holds 46 MiB): 507, nothing left
        self.run_in(src["id"], "import os; open('/workspace/proj/more', 'wb').write(os.urandom(40 << 20))")
        snap2 = self.snapshot(src["id"], name="over", include_volumes=True)
        db = sqlite3.connect(os.path.join(self.state, "catalog.db"))
        try:
            with db:
                db.execute("UPDATE snapshot_volumes SET vol_size = ?1 WHERE snapshot = ?2",
                           (32 * MB, snap2["id"]))
        finally:
            db.close()
        names_before = self.names()
        msg = self.error(self.req("POST", "/v1/sandboxes", {"snapshot": snap2["id"]}), 507, "no_space")
        self.assertIn("volume", msg)
        # the other volume, made meanwhile, is deleted after the answer
        self.wait_names(names_before)
        self.assertEqual(sorted(os.listdir(os.path.join(self.state, "volumes", "alice"))), names_before)

        # its delete takes the volumes' archives with it
        self.assertEqual(self.req("DELETE", "/v1/snapshots/" + snap2["id"])[0], 204)
        self.assertFalse(os.path.exists(os.path.join(kept, snap2["id"] + ".v0.tar.zst")))

    def test_quota(self):
        self.volume("data", "256M", who="bob")
        src = self.sandbox({"volumes": [{"name": "data", "mount": "/workspace/data"}]}, who="bob")
        self.run_in(src["id"], "open('/workspace/data/f', 'w').write('bob\\n')", who="bob")
        snap = self.snapshot(src["id"], who="bob", include_volumes=True)
        before = self.names("bob")
        # 256M + 128M more would be 768M of bob's 600M
        msg = self.error(self.req("POST", "/v1/sandboxes", {"snapshot": snap["id"]}, "bob"),
                         429, "quota_exceeded")
        self.assertIn("disk", msg)
        self.error(self.req("POST", "/v1/sandboxes/%s/fork" % src["id"], {"include_volumes": True}, "bob"),
                   429, "quota_exceeded")
        self.wait_names(before, "bob")
        # alice cannot restore bob's snapshot (not found), nor fork his sandbox
        self.error(self.req("POST", "/v1/sandboxes", {"snapshot": snap["id"]}), 404, "not_found")


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Volumes against a real supervisor, real runc sandboxes and real HTTP: a
volume outlives the sandbox that wrote it (written by the sandbox user in A,
read back in B), is held to its size (ENOSPC inside), is mounted read-write
by one sandbox or read-only by many (409 volume_busy otherwise; EROFS on a
write through a read-only mount), cannot be deleted while mounted, is
another tenant's 404, takes bad names, sizes and mount paths as 400, lets
the file routes through its mount path, and survives a SIGKILL of the
supervisor with the mount of the sandbox using it. Every container, mount
and loop device is removed at the end, also when a test fails (the
harness's sweep of the state folder takes the volumes' too).

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (Supervisor, loops_under, mounts_under, remove_everything_under,  # noqa: E402
                         stop_clean)

from test_restart import TOK, as_  # noqa: E402  (admin, alice, bob)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20


def tenants_doc():
    def h(t):
        return "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    return {"tenants": {
        "admin": {"tokens": [h(TOK["admin"])]},
        "alice": {"tokens": [h(TOK["alice"])]},
        "bob": {"tokens": [h(TOK["bob"])], "quota": {"disk": "20G"}},
    }}


def loops_of(image):
    """Loop devices attached to image."""
    def backing(dev):
        with open("/sys/block/%s/loop/backing_file" % dev[len("/dev/"):]) as f:
            return f.read().strip()
    return [d for d in loops_under(os.path.dirname(os.path.dirname(image))) if backing(d) == image]


class Volumes(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sbx-it-volumes-")
        self.state = os.path.join(self.root, "state")
        self.tenants = os.path.join(self.root, "tenants.json")
        with open(self.tenants, "w") as f:
            json.dump(tenants_doc(), f)
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(remove_everything_under, self.state)

    def new(self, pool_size=2):
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=pool_size, token=TOK["admin"],
                       extra=["--tenants", self.tenants])
        self.addCleanup(s.cleanup)
        return s.start()

    # ---- helpers ----
    def req(self, s, method, path, body=None, who="alice"):
        return s.request(method, path, body, token=as_(who))

    def volume(self, s, name, size="64M", who="alice"):
        st, _, b = self.req(s, "POST", "/v1/volumes", {"name": name, "size": size}, who)
        self.assertEqual(st, 201, b)
        return b

    def sandbox(self, s, vols, who="alice", want=201):
        st, _, b = self.req(s, "POST", "/v1/sandboxes", {"volumes": vols}, who)
        self.assertEqual(st, want, b)
        return b

    def sh(self, s, sid, cmd, who="alice"):
        st, _, b = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd}, who)
        self.assertEqual(st, 200, b)
        return b

    def delete(self, s, sid, who="alice"):
        self.assertEqual(self.req(s, "DELETE", "/v1/sandboxes/" + sid, None, who)[0], 204)

    def assert_error(self, resp, status, code):
        st, _, b = resp
        self.assertEqual(st, status, b)
        self.assertEqual(b["error"]["code"], code, b)
        self.assertTrue(b["error"]["message"], b)

    # ---- tests ----
    def test_volumes(self):
        s = self.new()
        s.wait_ready()
        v = self.volume(s, "proj", "64M")
        self.assertEqual((v["name"], v["tenant"], v["size"], v["state"]), ("proj", "alice", 64 * MB, "ready"))
        # the house errors: a second of the name, bad names and sizes, unknown fields
        self.assert_error(self.req(s, "POST", "/v1/volumes", {"name": "proj", "size": "64M"}), 409, "exists")
        for body in ({"name": "../x", "size": "64M"}, {"name": "", "size": "64M"}, {"name": "A", "size": "64M"},
                     {"name": "x" * 64, "size": "64M"}, {"name": "ok", "size": "1M"},
                     {"name": "ok", "size": "junk"}, {"name": "ok", "size": "2T"}, {"name": "ok"},
                     {"name": "ok", "size": "64M", "extra": 1}, [1]):
            self.assert_error(self.req(s, "POST", "/v1/volumes", body), 400, "bad_request")
        # another tenant's is not found; the admin lists every tenant's
        self.volume(s, "proj", "64M", who="bob")
        self.assert_error(self.req(s, "GET", "/v1/volumes/nope"), 404, "not_found")
        st, _, lst = self.req(s, "GET", "/v1/volumes")
        self.assertEqual([(x["tenant"], x["name"]) for x in lst["volumes"]], [("alice", "proj")])
        st, _, lst = self.req(s, "GET", "/v1/volumes", who="admin")
        self.assertEqual(sorted((x["tenant"], x["name"]) for x in lst["volumes"]),
                         [("alice", "proj"), ("bob", "proj")])
        self.assertEqual(self.req(s, "GET", "/v1/volumes/proj?tenant=bob", who="admin")[2]["tenant"], "bob")
        self.assert_error(self.req(s, "GET", "/v1/volumes/proj?tenant=bob"), 403, "forbidden")
        # bob's quota of disk counts his volumes: 20G in all
        self.assert_error(self.req(s, "POST", "/v1/volumes", {"name": "big", "size": "30G"}, "bob"),
                          429, "quota_exceeded")
        self.assertEqual(self.req(s, "DELETE", "/v1/volumes/proj", who="bob")[0], 204)
        self.assert_error(self.req(s, "GET", "/v1/volumes/proj", who="bob"), 404, "not_found")

        # bad mounts
        for vols, code in (([{"name": "proj", "mount": "/"}], 400), ([{"name": "proj", "mount": "rel"}], 400),
                           ([{"name": "proj", "mount": "/proc/x"}], 400), ([{"name": "proj", "mount": "/dev"}], 400),
                           ([{"name": "proj", "mount": "/a/../b"}], 400), ([{"name": "proj", "mount": "/a/"}], 400),
                           ([{"name": "proj", "mount": "/a"}, {"name": "proj", "mount": "/b"}], 400),
                           ([{"name": "proj", "mount": "/a", "read_only": 1}], 400),
                           ([{"name": "proj", "mount": "/a", "x": 1}], 400),
                           ([{"name": "nope", "mount": "/a"}], 404)):
            self.assertEqual(self.req(s, "POST", "/v1/sandboxes", {"volumes": vols})[0], code, vols)
        # a path through a file of the image is the client's mistake too,
        # found only at the bind (the snapshot's symlinks: test_volumes_restore)
        st, _, b = self.req(s, "POST", "/v1/sandboxes", {"volumes": [{"name": "proj", "mount": "/etc/hostname/x"}]})
        self.assertEqual((st, b["error"]["code"]), (400, "bad_request"), b)
        self.assertIn("/etc/hostname is a file", b["error"]["message"])
        self.assertEqual(self.req(s, "GET", "/v1/volumes/proj")[2]["mounted"], {"readers": 0, "writer": None})
        # bob cannot mount alice's
        self.assert_error(self.req(s, "POST", "/v1/sandboxes", {"volumes": [{"name": "proj", "mount": "/a"}]}, "bob"),
                          404, "not_found")

        # written by the sandbox user in A, read back in B after A is gone
        a = self.sandbox(s, [{"name": "proj", "mount": "/workspace/proj"}])
        self.assertEqual(a["volumes"], [{"name": "proj", "mount": "/workspace/proj", "read_only": False}])
        r = self.sh(s, a["id"], "id -u; echo kept > /workspace/proj/f && mkdir /workspace/proj/d && stat -c %u /workspace/proj/f")
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"].split(), ["1000", "1000"])
        got = self.req(s, "GET", "/v1/volumes/proj")[2]
        self.assertEqual(got["mounted"], {"readers": 0, "writer": a["id"]})
        self.assertGreater(got["used"], 0)
        # one writer: a second is refused, so is a reader while it writes
        self.assert_error(self.req(s, "POST", "/v1/sandboxes", {"volumes": [{"name": "proj", "mount": "/w"}]}),
                          409, "volume_busy")
        self.assert_error(self.req(s, "POST", "/v1/sandboxes",
                                   {"volumes": [{"name": "proj", "mount": "/w", "read_only": True}]}),
                          409, "volume_busy")
        self.assert_error(self.req(s, "DELETE", "/v1/volumes/proj"), 409, "volume_busy")
        # the size holds inside: writing past 64M is ENOSPC
        r = self.sh(s, a["id"], "dd if=/dev/zero of=/workspace/proj/big bs=1M count=100 2>&1; echo rc=$?")
        self.assertIn("No space left on device", r["stdout"])
        self.assertIn("rc=1", r["stdout"])
        used = self.req(s, "GET", "/v1/volumes/proj")[2]["used"]
        self.assertLessEqual(used, 64 * MB)
        self.assertGreater(used, 60 * MB)
        self.sh(s, a["id"], "rm /workspace/proj/big")
        # and through the API: an upload past the size is 507 no_space (as
        # on a full sandbox disk), the old file stays, no temporary is left
        st, _, body = self.req(s, "PUT", "/v1/sandboxes/%s/files?path=/workspace/proj/f" % a["id"],
                               b"y" * (80 * MB))
        self.assertEqual(st, 507, body)
        self.assertEqual(body["error"]["code"], "no_space", body)
        r = self.sh(s, a["id"], "cat /workspace/proj/f; ls -A /workspace/proj")
        self.assertEqual(r["stdout"].split(), ["kept", "d", "f", "lost+found"])
        # the file routes reach the mount path (outside the policy's roots)
        b0 = self.sandbox(s, [])
        self.delete(s, b0["id"])
        self.delete(s, a["id"])

        b = self.sandbox(s, [{"name": "proj", "mount": "/data"}])
        st, _, body = self.req(s, "GET", "/v1/sandboxes/%s/files?path=/data/f" % b["id"])
        self.assertEqual((st, body), (200, b"kept\n"))
        self.assertEqual(self.req(s, "GET", "/v1/sandboxes/%s/files?path=/datax/f" % b["id"])[0], 403)
        self.delete(s, b["id"])

        # read-only by many: both read, neither writes (EROFS), no writer meanwhile
        r1 = self.sandbox(s, [{"name": "proj", "mount": "/ro", "read_only": True}])
        r2 = self.sandbox(s, [{"name": "proj", "mount": "/ro", "read_only": True}])
        for sb in (r1, r2):
            r = self.sh(s, sb["id"], "cat /ro/f; touch /ro/g 2>&1; echo rc=$?")
            self.assertIn("kept", r["stdout"])
            self.assertIn("Read-only file system", r["stdout"])
        self.assertEqual(self.req(s, "GET", "/v1/volumes/proj")[2]["mounted"], {"readers": 2, "writer": None})
        self.assert_error(self.req(s, "POST", "/v1/sandboxes", {"volumes": [{"name": "proj", "mount": "/w"}]}),
                          409, "volume_busy")
        st, _, b = self.req(s, "PUT", "/v1/sandboxes/%s/files?path=/ro/g" % r1["id"], "x")
        self.assertEqual(st, 403, b)
        self.assert_error(self.req(s, "DELETE", "/v1/volumes/proj"), 409, "volume_busy")
        self.delete(s, r1["id"])
        self.delete(s, r2["id"])
        self.assertEqual(self.req(s, "DELETE", "/v1/volumes/proj")[0], 204)
        self.assert_error(self.req(s, "GET", "/v1/volumes/proj"), 404, "not_found")
        self.assertFalse(os.path.exists(os.path.join(self.state, "volumes", "alice", "proj")))
        stop_clean(s)
        self.assertEqual(mounts_under(self.state), [])
        self.assertEqual(loops_under(self.state), [])

    def test_survives_sigkill(self):
        s1 = self.new(pool_size=1)
        s1.wait_ready()
        self.volume(s1, "keep", "64M")
        self.volume(s1, "idle", "64M")
        a = self.sandbox(s1, [{"name": "keep", "mount": "/workspace/keep"}])
        self.sh(s1, a["id"], "echo before > /workspace/keep/f")
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        # the host's mount of the volume gone too (an operator's umount):
        # the sandbox's bind still holds its loop device, and the next start
        # must mount that device again, not attach a second one to the image
        keep = os.path.join(os.path.realpath(self.state), "volumes", "alice", "keep")
        subprocess.run(["umount", os.path.join(keep, "disk")], check=True)
        self.assertEqual(len(loops_of(os.path.join(keep, "disk.img"))), 1)
        s2 = self.new(pool_size=1)
        s2.wait_ready()
        names = sorted(x["name"] for x in self.req(s2, "GET", "/v1/volumes")[2]["volumes"])
        self.assertEqual(names, ["idle", "keep"])
        st, _, got = self.req(s2, "GET", "/v1/sandboxes/" + a["id"])
        self.assertEqual(st, 200, got)
        self.assertEqual(got["volumes"], a["volumes"])
        # its mount is still there and still the one writer
        r = self.sh(s2, a["id"], "cat /workspace/keep/f; echo after >> /workspace/keep/f; sync")
        self.assertEqual(r["stdout"], "before\n")
        self.assertEqual(len(loops_of(os.path.join(keep, "disk.img"))), 1)
        with open(os.path.join(keep, "disk", "f")) as f:
            self.assertEqual(f.read(), "before\nafter\n")
        self.assertEqual(self.req(s2, "GET", "/v1/volumes/keep")[2]["mounted"]["writer"], a["id"])
        self.assert_error(self.req(s2, "POST", "/v1/sandboxes", {"volumes": [{"name": "keep", "mount": "/k"}]}),
                          409, "volume_busy")
        self.assert_error(self.req(s2, "DELETE", "/v1/volumes/keep"), 409, "volume_busy")
        # the idle one mounts, its image was not swept
        b = self.sandbox(s2, [{"name": "idle", "mount": "/i"}])
        self.delete(s2, b["id"])
        self.delete(s2, a["id"])
        c = self.sandbox(s2, [{"name": "keep", "mount": "/k", "read_only": True}])
        self.assertEqual(self.sh(s2, c["id"], "cat /k/f")["stdout"], "before\nafter\n")
        self.delete(s2, c["id"])
        stop_clean(s2)
        self.assertEqual(mounts_under(self.state), [])
        self.assertEqual(loops_under(self.state), [])
        # and a third start finds both again, mounted from their images
        s3 = self.new(pool_size=0)
        self.assertEqual(sorted(x["name"] for x in self.req(s3, "GET", "/v1/volumes")[2]["volumes"]),
                         ["idle", "keep"])
        self.assertEqual(self.req(s3, "DELETE", "/v1/volumes/keep")[0], 204)
        self.assertEqual(self.req(s3, "DELETE", "/v1/volumes/idle")[0], 204)
        stop_clean(s3)
        self.assertEqual(loops_under(self.state), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)

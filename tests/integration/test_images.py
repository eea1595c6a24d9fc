"""OCI images as sandbox templates, against a real supervisor and real runc.

The test images are built offline by tests/images/make-test-images (Debian's
busybox-static, umoci, skopeo); the hostile layers are made here with
tarfile, as OCI layouts written by hand (umoci would not write them).
Here images come in with --import-image at start and leave with
--remove-image; test_images_api.py does it over HTTP.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402

SUPERVISOR = os.environ["SBX_SUPERVISOR"]
AGENT = os.environ["SBX_AGENT"]
MAKE_IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "images",
                           "make-test-images")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tar_of(members):
    """members: (TarInfo fields dict, data bytes or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for fields, data in members:
            ti = tarfile.TarInfo(fields.pop("name"))
            for k, v in fields.items():
                setattr(ti, k, v)
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def oci_layout(path, layers, config_extra=None, ref="hostile", corrupt_blob=False,
               wrong_diff=False, zstd=False):
    """Write an OCI layout of gzip'd (or zstd's) layers (tar bytes, bottom
    first)."""
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs)

    def put(b):
        with open(os.path.join(blobs, sha(b)), "wb") as f:
            f.write(b)
        return sha(b)

    descs, diffs = [], []
    for tb in layers:
        gz = gzip.compress(tb, mtime=0) if not zstd else subprocess.run(
            ["zstd", "-q", "-c"], input=tb, capture_output=True, check=True).stdout
        d = put(gz)
        if corrupt_blob:
            with open(os.path.join(blobs, d), "r+b") as f:
                f.seek(len(gz) // 2)
                f.write(b"\xff\xff\xff\xff")
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+" + ("zstd" if zstd else "gzip"),
                      "digest": "sha256:" + d, "size": len(gz)})
        diffs.append("sha256:" + (sha(b"x") if wrong_diff else sha(tb)))
    cfg = {"architecture": "amd64", "os": "linux", "config": dict(config_extra or {}),
           "rootfs": {"type": "layers", "diff_ids": diffs}}
    cb = json.dumps(cfg).encode()
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                      "digest": "sha256:" + put(cb), "size": len(cb)},
           "layers": descs}
    mb = json.dumps(man).encode()
    idx = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + put(mb), "size": len(mb),
         "annotations": {"org.opencontainers.image.ref.name": ref}}]}
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump(idx, f)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


BUSYBOX = open("/bin/busybox", "rb").read()


def base_members():
    return [({"name": "bin", "type": tarfile.DIRTYPE, "mode": 0o755}, None),
            ({"name": "bin/busybox", "mode": 0o755}, BUSYBOX),
            ({"name": "bin/sh", "type": tarfile.SYMTYPE, "linkname": "busybox"}, None),
            ({"name": "bin/stat", "type": tarfile.SYMTYPE, "linkname": "busybox"}, None),
            ({"name": "bin/ls", "type": tarfile.SYMTYPE, "linkname": "busybox"}, None)]


def base_layer():
    return tar_of(base_members())


def tree(path):
    out = set()
    for dirpath, dirs, files in os.walk(path):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(dirpath, n), path))
    return out


class Images(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-it-img-")
        cls.ti = os.path.join(cls.tmp, "images")
        subprocess.run([MAKE_IMAGES, cls.ti, AGENT], check=True, stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, *extra, state_dir=None):
        sup = h.Supervisor(SUPERVISOR, AGENT, state_dir=state_dir, pool_size=0,
                           extra=list(extra))
        self.addCleanup(sup.cleanup)
        sup.start()
        return sup

    def sh(self, sup, sid, cmd, **kw):
        st, _, r = sup.exec(sid, cmd=cmd, **kw)
        self.assertEqual(st, 200, r)
        return r

    def test_oci_archive_env_workdir_user(self):
        sup = self.start("--import-image", self.ti + "/tiny.oci.tar",
                         "--pool-images", "host=0,tiny=2")
        sup.wait_ready("tiny", 2)
        sb = sup.create(image="tiny", env={"FROM_REQUEST": "1"})
        self.assertEqual(sb["image"], "tiny")
        r = self.sh(sup, sb["id"], "id -u; id -g; pwd; echo $GREETING $FROM_REQUEST; echo $PATH")
        self.assertEqual(r["stdout"].split("\n")[:5],
                         ["1234", "1234", "/srv/app", "hello-from-image 1", "/bin"], r)
        # the request's env over the image's; an explicit user and cwd win
        st, _, r = sup.exec(sb["id"], cmd="echo $GREETING; id -u; pwd",
                            env={"GREETING": "mine"}, user="sandbox", cwd="/tmp")
        self.assertEqual(r["stdout"], "mine\n1000\n/tmp\n", r)
        # root stays behind --allow-root
        st, _, r = sup.exec(sb["id"], cmd="id -u", user="root")
        self.assertEqual(st, 403, r)
        # the pool of the image refills
        sup.wait_ready("tiny", 2)
        self.assertEqual(sup.pools()["tiny"]["size"], 2)

    def test_multi_layer_whiteouts_opaque_cold(self):
        sup = self.start("--import-image", self.ti + "/multi",
                         "--import-image", "dmulti=" + self.ti + "/multi.docker.tar")
        # the docker save of the same image is the same image: both names
        # lead to it, and its layers were unpacked once
        self.assertIn("0 layer(s) unpacked, 4 shared", sup.log())
        for name in ("multi", "dmulti"):
            sb = sup.create(image=name)  # no pool: a cold create
            r = self.sh(sup, sb["id"], "ls /data; echo --; ls -a /opq; echo $LAYERS; id -u; pwd")
            self.assertEqual(r["stdout"], "kept\ntop\n--\n.\n..\nnew\n3\n1000\n/workspace\n", r)
        self.assertEqual(sup.pools()["multi"]["size"], 0)
        layers = os.path.join(sup.state_dir, "store", "layers")
        self.assertEqual(len(os.listdir(layers)), 4)
        self.assertEqual(os.listdir(os.path.join(sup.state_dir, "store", "tmp")), [])

    def test_image_with_its_own_agent(self):
        sup = self.start("--import-image", self.ti + "/withagent",
                         "--import-image", self.ti + "/oldagent", "--acquire-timeout", "20")
        sb = sup.create(image="withagent")
        # the image's agent runs: no bind of the host's over it
        with open(os.path.join(sup.state_dir, "sandboxes", sb["id"], "bundle",
                               "config.json")) as f:
            mounts = [m["destination"] for m in json.load(f)["mounts"]]
        self.assertNotIn("/.sbx/sandbox-agent", mounts)
        self.assertIn("sandbox-agent/0.1.0", sup.log())
        r = self.sh(sup, sb["id"], "id -u; echo $GREETING")
        self.assertEqual(r["stdout"], "1234\nhello-from-image\n")
        # an agent older than the supervisor serves: refused at handshake
        st, _, r = sup.request("POST", "/v1/sandboxes", {"image": "oldagent"}, timeout=60)
        self.assertEqual(st // 100, 5, r)
        self.assertIn("sandbox-agent/0.0.1", r["error"]["message"])
        self.assertIn("needs sandbox-agent/0.1.0 or newer", r["error"]["message"])
        # its container goes (the destroy runs after the answer)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(h.containers_under(sup.state_dir)) > 1:
            time.sleep(0.1)
        self.assertEqual(len(h.containers_under(sup.state_dir)), 1)

    @unittest.skipUnless(shutil.which("runsc"), "runsc is not installed")
    def test_gvisor_isolation(self):
        sup = self.start("--import-image", self.ti + "/multi")
        st, _, sb = sup.request("POST", "/v1/sandboxes", {"image": "multi", "isolation": "gvisor"},
                                timeout=120)
        self.assertEqual(st, 201, sb)
        r = self.sh(sup, sb["id"], "ls /data; echo --; ls -a /opq")
        self.assertEqual(r["stdout"], "kept\ntop\n--\n.\n..\nnew\n", r)
        st, _, _ = sup.request("DELETE", "/v1/sandboxes/" + sb["id"], timeout=60)
        self.assertEqual(st // 100, 2)

    def test_unknown_image(self):
        sup = self.start()
        st, _, r = sup.request("POST", "/v1/sandboxes", {"image": "nope:latest"})
        self.assertEqual(st, 400, r)
        self.assertIn("nope:latest", r["error"]["message"])

    def test_gc_and_remove(self):
        state = os.path.join(self.tmp, "gcstate")
        sup = self.start("--import-image", self.ti + "/tiny.oci.tar",
                         "--import-image", self.ti + "/multi", state_dir=state)
        layers = os.path.join(state, "store", "layers")
        self.assertEqual(len(os.listdir(layers)), 5)
        h.stop_clean(sup)
        sup = h.Supervisor(SUPERVISOR, AGENT, state_dir=state, pool_size=0,
                           extra=["--remove-image", "multi"])
        self.addCleanup(sup.cleanup)
        sup.start()
        self.assertEqual(len(os.listdir(layers)), 1)
        self.assertIn("image GC: 4 layer(s) no image uses removed", sup.log())
        sb = sup.create(image="tiny")
        self.assertEqual(self.sh(sup, sb["id"], "id -u")["stdout"], "1234\n")
        st, _, r = sup.request("POST", "/v1/sandboxes", {"image": "multi"})
        self.assertEqual(st, 400, r)


class Hostile(unittest.TestCase):
    """Each layer is imported at start; a refused one stops the start with
    the reason, and leaves nothing outside its temporary folder."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-it-hostile-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)

    def import_layout(self, layers, expect_ok, **kw):
        layout = os.path.join(self.tmp, "layout")
        shutil.rmtree(layout, ignore_errors=True)
        oci_layout(layout, layers, **kw)
        state = os.path.join(self.tmp, "state")
        self.addCleanup(h.remove_everything_under, state)
        sup = h.Supervisor(SUPERVISOR, AGENT, state_dir=state, pool_size=0,
                           extra=["--import-image", layout, "--image-max-layer", "4M"])
        self.addCleanup(sup.cleanup)
        if expect_ok:
            sup.start()
            return sup
        with self.assertRaises(RuntimeError) as cm:
            sup.start()
        msg = str(cm.exception)
        # nothing outside, nothing half made in the store
        self.assertEqual(os.listdir(self.outside), [])
        self.assertEqual(os.listdir(os.path.join(state, "store", "tmp")), [])
        self.assertEqual(os.listdir(os.path.join(state, "store", "layers")), [])
        self.assertEqual(os.listdir(os.path.join(state, "store", "images")), [])
        return msg

    def test_absolute_name(self):
        msg = self.import_layout([tar_of([({"name": self.outside + "/abs"}, b"x")])], False)
        self.assertIn("absolute name", msg)

    def test_dotdot(self):
        msg = self.import_layout([tar_of([({"name": "a/../../outside/x"}, b"x")])], False)
        self.assertIn("'..' in the name", msg)

    def test_symlink_climbing_out(self):
        for target in (self.outside, "../../../../../../../../" + self.outside):
            layer = tar_of([({"name": "esc", "type": tarfile.SYMTYPE, "linkname": target}, None),
                            ({"name": "esc/pwned"}, b"x")])
            msg = self.import_layout([layer], False)
            self.assertIn("goes through a symlink", msg)
            h.remove_everything_under(os.path.join(self.tmp, "state"))

    def test_symlink_in_a_lower_layer(self):
        # a later layer writing through an earlier layer's symlink: each
        # layer is its own folder, so the name lands in the layer
        l1 = tar_of([({"name": "esc", "type": tarfile.SYMTYPE, "linkname": self.outside}, None)])
        l2 = tar_of([({"name": "esc", "type": tarfile.DIRTYPE, "mode": 0o755}, None),
                     ({"name": "esc/pwned"}, b"x")])
        self.import_layout([l1, l2], True)
        self.assertEqual(os.listdir(self.outside), [])

    def test_hardlink_out(self):
        for target in ("../../../etc/passwd", "/etc/passwd", "nothere"):
            layer = tar_of([({"name": "hl", "type": tarfile.LNKTYPE, "linkname": target}, None)])
            msg = self.import_layout([layer], False)
            self.assertIn("hl", msg)
            h.remove_everything_under(os.path.join(self.tmp, "state"))
        # to a symlink of the layer: not a regular file
        layer = tar_of([({"name": "s", "type": tarfile.SYMTYPE, "linkname": "/etc/shadow"}, None),
                        ({"name": "hl", "type": tarfile.LNKTYPE, "linkname": "s"}, None)])
        msg = self.import_layout([layer], False)
        self.assertIn("not a regular file", msg)

    def test_tar_bomb(self):
        # 8 MiB of zeros, a few KiB gzip'd, past --image-max-layer 4M
        layer = tar_of([({"name": "bomb"}, bytes(8 << 20))])
        msg = self.import_layout([layer], False)
        self.assertIn("larger than", msg)

    def test_digests(self):
        msg = self.import_layout([base_layer()], False, corrupt_blob=True)
        self.assertIn("layer", msg)
        h.remove_everything_under(os.path.join(self.tmp, "state"))
        msg = self.import_layout([base_layer()], False, wrong_diff=True)
        self.assertIn("the config says", msg)

    def test_devices_setid_contained(self):
        layer = tar_of(base_members() + [
            ({"name": "dev/sda", "type": tarfile.CHRTYPE, "devmajor": 8, "devminor": 0}, None),
            ({"name": "suid", "mode": 0o4755}, b"#!/bin/sh\n"),
            ({"name": "sgid", "mode": 0o2755}, b"#!/bin/sh\n"),
            ({"name": "fifo", "type": tarfile.FIFOTYPE, "mode": 0o644}, None)])
        sup = self.import_layout([layer], True)
        sb = sup.create(image="hostile")
        st, _, r = sup.exec(sb["id"], cmd="stat -c '%a %n' /suid /sgid; ls /dev/sda")
        self.assertEqual(r["stdout"], "755 /suid\n755 /sgid\n", r)
        self.assertIn("No such file", r["stderr"])
        lay = os.path.join(sup.state_dir, "store", "layers")
        (hexd,) = os.listdir(lay)
        self.assertNotIn("dev/sda", tree(os.path.join(lay, hexd, "root")))


if __name__ == "__main__":
    unittest.main(verbosity=2)

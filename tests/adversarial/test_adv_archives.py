"""Hostile image archives the other tests leave out (SECURITY.md, "Node
from sandbox"): test_images.py's Hostile holds "..", absolute names,
symlinks climbing out, hard links out, devices, set-id bits and a gzip
bomb; test_images_api.py the same over HTTP; test_snapshots.py's
test_hostile_archives a snapshot's. Here, through POST /v1/images as a
tenant's admin would send them: a zstd bomb (a zstd layer whose tar is
far past --image-max-layer), a pax header of 32 MiB, a name of 64 KiB and
a path 200 folders deep. Each is refused naming why (400 bad_image; 413
too_large for the bomb); nothing is left in the store; the supervisor's
memory stays bounded and a good image still imports after them. No
sandbox: a pool of 0.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from sbx_harness import Supervisor, rss_kb, small_asan_quarantine, stop_clean  # noqa: E402
from test_images import base_layer, oci_layout, tar_of  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


def pax_member(name, pax, data=b"x"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.pax_headers = pax
        t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class HostileImages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        small_asan_quarantine(SUP)
        cls.tmp = tempfile.mkdtemp(prefix="sbx-adv-archives-")
        cls.sup = Supervisor(SUP, AGENT, pool_size=0, extra=["--image-max-layer", "4M"])
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.rss0 = rss_kb(cls.sup.proc.pid)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def upload(self, layers, name, **kw):
        lay = os.path.join(self.tmp, name)
        oci_layout(lay, layers, **kw)
        arch = lay + ".tar"
        subprocess.run(["tar", "-C", lay, "-cf", arch, "."], check=True)
        with open(arch, "rb") as f:
            body = f.read()
        st, _, r = self.sup.request("POST", "/v1/images?name=adv-" + name, body,
                                    headers={"Content-Type": "application/x-tar"}, timeout=120)
        return st, r

    def refused(self, layers, name, words, want=(400, "bad_image"), **kw):
        st, r = self.upload(layers, name, **kw)
        print("\n%s: %d %s" % (name, st, r["error"]["message"]), file=sys.stderr)
        self.assertEqual((st, r["error"]["code"]), want, r)
        self.assertIn(words, r["error"]["message"])
        st, _, imgs = self.sup.request("GET", "/v1/images")
        self.assertEqual([i for i in imgs["images"] if "adv-" in json.dumps(i)], [], imgs)
        store = os.path.join(self.sup.state_dir, "store")
        self.assertEqual(os.listdir(os.path.join(store, "layers")), [])
        self.assertEqual(os.listdir(os.path.join(store, "tmp")), [])
        self.assertTrue(self.sup.alive())

    def test_zstd_bomb(self):
        # 64 MiB of zeros in a few KiB of zstd, past --image-max-layer 4M
        self.refused([tar_of([({"name": "bomb"}, bytes(64 << 20))])], "zbomb", "larger than",
                     want=(413, "too_large"), zstd=True)

    def test_huge_pax_header(self):
        self.refused([pax_member("a", {"comment": "c" * (32 << 20)})], "paxhuge", "")

    def test_long_name_and_deep_path(self):
        self.refused([pax_member("n" * 65536, {})], "longname", "")
        self.refused([tar_of([({"name": "/".join(["d"] * 200) + "/f"}, b"x")])], "deep", "deeper")

    def test_zz_good_image_still_imports_memory_bounded(self):
        st, r = self.upload([base_layer()], "good")
        self.assertEqual(st, 201, r)
        grown = (rss_kb(self.sup.proc.pid) - self.rss0) / 1024
        print("\nsupervisor RSS grew %.1f MiB over the hostile images" % grown, file=sys.stderr)
        self.assertLess(grown, 96)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

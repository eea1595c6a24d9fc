"""The images routes against a real supervisor, real runc and Debian's skopeo:
POST /v1/images (an oci-archive and a docker save streamed, plain and
chunked; {"ref"} pulled from an oci: layout, a failing pull 502, a pull past
its deadline 504), GET /v1/images[/{ref}], DELETE /v1/images/{ref} (409
while in use, then the GC frees the disk), PUT /v1/pools/{image} (refilled,
drained), who may (the admin changes, a tenant reads what it may use) and
the store in /metrics.

The test images are tests/images/make-test-images' (busybox-static, umoci,
skopeo), built offline. Nothing leaves the machine: the registry that never
answers is a socket of this test on loopback.
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402
from test_images import oci_layout, tar_of  # noqa: E402  (the hostile layers' writer)

SUPERVISOR = os.environ["SBX_SUPERVISOR"]
AGENT = os.environ["SBX_AGENT"]
MAKE_IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "images",
                           "make-test-images")
TAR = {"Content-Type": "application/x-tar"}


def hash_token(tok):
    out = subprocess.run([SUPERVISOR, "hash-token"], input=tok + "\n", capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def du(path):
    """Bytes the files below path take on disk."""
    total = 0
    for dirpath, dirs, files in os.walk(path):
        for n in files:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class ImagesApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-it-imgapi-")
        cls.ti = os.path.join(cls.tmp, "images")
        subprocess.run([MAKE_IMAGES, cls.ti, AGENT], check=True, stdout=subprocess.DEVNULL)
        # what pulls may name: below --image-pull-dir only
        cls.pulls = os.path.join(cls.tmp, "pulls")
        os.makedirs(cls.pulls)
        shutil.copytree(os.path.join(cls.ti, "multi"), os.path.join(cls.pulls, "multi"))
        shutil.copy(os.path.join(cls.ti, "tiny.oci.tar"), cls.pulls)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, *extra):
        sup = h.Supervisor(SUPERVISOR, AGENT, pool_size=0,
                           extra=["--image-pull-dir", self.pulls] + list(extra))
        self.addCleanup(sup.cleanup)
        sup.start()
        return sup

    def upload(self, sup, path, query="", chunked=False, headers=None, timeout=60):
        hdrs = dict(TAR if headers is None else headers)
        hdrs["Authorization"] = "Bearer " + sup.token
        c = sup.conn(timeout)
        try:
            with open(path, "rb") as f:
                if chunked:
                    def pieces():
                        while True:
                            b = f.read(100000)
                            if not b:
                                return
                            yield b
                    c.request("POST", "/v1/images" + query, body=pieces(), headers=hdrs,
                              encode_chunked=True)
                else:
                    c.request("POST", "/v1/images" + query, body=f.read(), headers=hdrs)
            resp = c.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            c.close()

    def partial_upload(self, sup, path, n):
        """A connection that announced 900000 bytes of path and sent n."""
        c = sup.conn(30)
        c.putrequest("POST", "/v1/images")
        c.putheader("Authorization", "Bearer " + sup.token)
        c.putheader("Content-Type", "application/x-tar")
        c.putheader("Content-Length", "900000")
        c.endheaders()
        with open(path, "rb") as f:
            c.send(f.read(n))
        return c

    def pull(self, sup, body, timeout=60):
        st, _, r = sup.request("POST", "/v1/images", body,
                               headers={"Content-Type": "application/json"}, timeout=timeout)
        return st, r

    def layers(self, sup):
        return sorted(os.listdir(os.path.join(sup.state_dir, "store", "layers")))

    def test_upload_both_kinds_list_get_exec(self):
        sup = self.start()
        st, r = self.upload(sup, os.path.join(self.ti, "tiny.oci.tar"))
        self.assertEqual(st, 201, r)
        (tiny,) = r["images"]
        self.assertEqual(tiny["refs"], ["tiny"])
        self.assertEqual(tiny["workdir"], "/srv/app")
        self.assertEqual(r["layers"], {"unpacked": 1, "shared": 0})
        # the docker save, chunked, with a name of ours that holds '/' and ':'
        st, r = self.upload(sup, os.path.join(self.ti, "multi.docker.tar"),
                            query="?name=team/multi:v1", chunked=True)
        self.assertEqual(st, 201, r)
        (multi,) = r["images"]
        self.assertEqual(multi["refs"], ["team/multi:v1"])
        self.assertEqual(len(multi["layers"]), 4)
        self.assertEqual(len(self.layers(sup)), 5)
        self.assertEqual(os.listdir(os.path.join(sup.state_dir, "store", "tmp")), [])
        # the list, with the store's figures
        st, _, r = sup.request("GET", "/v1/images")
        self.assertEqual(st, 200, r)
        self.assertEqual(sorted(i["digest"] for i in r["images"]),
                         sorted([tiny["digest"], multi["digest"]]))
        self.assertEqual(r["store"]["images"], 2)
        self.assertEqual(r["store"]["layers"], 5)
        self.assertEqual(r["store"]["bytes"], tiny["size"] + multi["size"])
        # one image by ref ('/' as %2F), by digest; unknown 404; a bad escape 400
        st, _, g = sup.request("GET", "/v1/images/team%2Fmulti:v1")
        self.assertEqual((st, g["digest"]), (200, multi["digest"]), g)
        st, _, g = sup.request("GET", "/v1/images/" + tiny["digest"])
        self.assertEqual((st, g["refs"]), (200, ["tiny"]), g)
        st, _, g = sup.request("GET", "/v1/images/team%2Fnope:v1")
        self.assertEqual(st, 404, g)
        self.assertIn("team/nope:v1", g["error"]["message"])
        st, _, g = sup.request("GET", "/v1/images/bad%2")
        self.assertEqual(st, 400, g)
        # not an archive, larger than the pipe: refused while the body still
        # comes (the import stops reading); nothing is left of it
        junk = os.path.join(self.tmp, "junk4m.tar")
        with open(junk, "wb") as f:
            f.write(os.urandom(4 << 20))
        st, r = self.upload(sup, junk)
        self.assertEqual((st, r["error"]["code"]), (400, "bad_image"), r)
        self.assertEqual(os.listdir(os.path.join(sup.state_dir, "store", "tmp")), [])
        # sandboxes of both, cold
        sb = sup.create(image="tiny")
        st, _, x = sup.exec(sb["id"], cmd="id -u; pwd; echo $GREETING")
        self.assertEqual(x["stdout"], "1234\n/srv/app\nhello-from-image\n", x)
        sb = sup.create(image="team/multi:v1")
        st, _, x = sup.exec(sb["id"], cmd="ls /data; ls -a /opq")
        self.assertEqual(x["stdout"], "kept\ntop\n.\n..\nnew\n", x)
        h.stop_clean(sup)

    def test_refused_uploads(self):
        sup = self.start("--image-max-import", "1M", "--drain-timeout", "1")
        tiny = os.path.join(self.ti, "tiny.oci.tar")  # about 1.05 MiB
        # no or another Content-Type: 415, the body unread
        st, r = self.upload(sup, tiny, headers={})
        self.assertEqual((st, r["error"]["code"]), (415, "unsupported_media_type"), r)
        st, r = self.upload(sup, tiny, headers={"Content-Type": "text/plain"})
        self.assertEqual(st, 415, r)
        # over --image-max-import: as announced, and as a chunked body grows
        st, r = self.upload(sup, tiny)
        self.assertEqual((st, r["error"]["code"]), (413, "too_large"), r)
        st, r = self.upload(sup, tiny, chunked=True)
        self.assertEqual(st, 413, r)
        # not an archive: 400 saying so; a bad name: 400
        junk = os.path.join(self.tmp, "junk.tar")
        with open(junk, "wb") as f:
            f.write(os.urandom(50000))
        st, r = self.upload(sup, junk)
        self.assertEqual((st, r["error"]["code"]), (400, "bad_image"), r)
        st, r = self.upload(sup, junk, query="?name=sha256:00")
        self.assertEqual(st, 400, r)
        st, r = self.upload(sup, junk, query="?nope=1")
        self.assertEqual(st, 400, r)
        # a hostile layer over HTTP as at start: refused naming the member,
        # nothing outside, nothing in the store
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside, exist_ok=True)
        for i, member in enumerate(("a/../../outside/x", outside + "/abs")):
            lay = os.path.join(self.tmp, "hostile%d" % i)
            oci_layout(lay, [tar_of([({"name": member}, b"x")])])
            arch = lay + ".tar"
            subprocess.run(["tar", "-C", lay, "-cf", arch, "."], check=True)
            st, r = self.upload(sup, arch)
            self.assertEqual((st, r["error"]["code"]), (400, "bad_image"), r)
            self.assertIn("'..' in the name" if i == 0 else "absolute name", r["error"]["message"])
        self.assertEqual(os.listdir(outside), [])
        self.assertEqual(self.layers(sup), [])
        # an archive cut short by its client: nothing committed, nothing left
        self.partial_upload(sup, tiny, 400000).close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "client went away" not in sup.log():
            time.sleep(0.1)
        self.assertIn("client went away after", sup.log())
        st, _, r = sup.request("GET", "/v1/images")
        self.assertEqual(r["images"], [], r)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.listdir(
                os.path.join(sup.state_dir, "store", "tmp")):
            time.sleep(0.1)
        self.assertEqual(os.listdir(os.path.join(sup.state_dir, "store", "tmp")), [])
        self.assertEqual(self.layers(sup), [])
        # SIGTERM while an upload waits for its body: its import is
        # cancelled, and the supervisor ends cleanly (no leak, exit 0)
        self.addCleanup(self.partial_upload(sup, tiny, 300000).close)
        time.sleep(0.5)
        h.stop_clean(sup)

    def test_pull(self):
        sup = self.start()
        # an oci: layout below --image-pull-dir, its tag naming it
        src = "oci:%s/multi:multi" % self.pulls
        st, r = self.pull(sup, {"ref": src})
        self.assertEqual(st, 201, r)
        self.assertEqual(r["images"][0]["refs"], ["multi"])
        self.assertEqual(len(r["images"][0]["layers"]), 4)
        # an oci-archive, named by the body
        st, r = self.pull(sup, {"ref": "oci-archive:%s/tiny.oci.tar" % self.pulls,
                                "name": "pulled/tiny:1"})
        self.assertEqual(st, 201, r)
        self.assertEqual(r["images"][0]["refs"], ["pulled/tiny:1"])
        sb = sup.create(image="pulled/tiny:1")
        st, _, x = sup.exec(sb["id"], cmd="cat /srv/app/hello.txt")
        self.assertEqual(x["stdout"], "image file\n", x)
        # a failing pull: 502 naming the ref, what skopeo said
        for ref in ("oci:%s/nothere:x" % self.pulls, "127.0.0.1:1/nothing:latest"):
            st, r = self.pull(sup, {"ref": ref})
            self.assertEqual((st, r["error"]["code"]), (502, "pull_failed"), r)
            self.assertIn(ref, r["error"]["message"])
        # a path outside --image-pull-dir: 403; bad bodies: 400
        st, r = self.pull(sup, {"ref": "oci:%s/multi:multi" % self.ti})
        self.assertEqual(st, 403, r)
        for body in ({}, {"ref": 3}, {"ref": "a b"}, {"ref": "x:1", "tag": "y"},
                     {"ref": "oci:relative/path"}):
            st, r = self.pull(sup, body)
            self.assertEqual(st, 400, (body, r))
        self.assertEqual(os.listdir(os.path.join(sup.state_dir, "store", "tmp")), [])

    def test_pull_deadline(self):
        # a "registry" that takes the connection and never answers
        lis = socket.socket()
        lis.bind(("127.0.0.1", 0))
        lis.listen(8)
        self.addCleanup(lis.close)
        held = []
        stop = threading.Event()

        def accept():
            lis.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(lis.accept()[0])
                except OSError:
                    pass
        t = threading.Thread(target=accept, daemon=True)
        t.start()
        self.addCleanup(lambda: [s.close() for s in held])
        self.addCleanup(stop.set)
        sup = self.start("--image-pull-timeout", "2", "--drain-timeout", "1")
        ref = "127.0.0.1:%d/slow:latest" % lis.getsockname()[1]
        t0 = time.monotonic()
        st, r = self.pull(sup, {"ref": ref})
        self.assertEqual((st, r["error"]["code"]), (504, "timeout"), r)
        self.assertIn(ref, r["error"]["message"])
        self.assertLess(time.monotonic() - t0, 15)
        self.assertTrue(held, "skopeo never connected")
        # the loop went on meanwhile, and goes on
        st, _, r = sup.request("GET", "/v1/images")
        self.assertEqual(st, 200, r)
        # a pull in flight at SIGTERM: its skopeo is killed, the supervisor
        # ends cleanly soon after the drain
        got = []
        t = threading.Thread(target=lambda: got.append(self.pull(sup, {"ref": ref}, timeout=60)),
                             daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(held) < 2:
            time.sleep(0.05)
        t0 = time.monotonic()
        h.stop_clean(sup)
        self.assertLess(time.monotonic() - t0, 10)
        t.join(30)

    def test_delete_in_use_then_gc(self):
        sup = self.start()
        st, r = self.upload(sup, os.path.join(self.ti, "multi.docker.tar"), query="?name=multi")
        self.assertEqual(st, 201, r)
        st, r = self.upload(sup, os.path.join(self.ti, "tiny.oci.tar"))
        self.assertEqual(st, 201, r)
        store = os.path.join(sup.state_dir, "store")
        before = du(store)
        sb = sup.create(image="multi")
        st, _, r = sup.request("DELETE", "/v1/images/multi")
        self.assertEqual((st, r["error"]["code"]), (409, "conflict"), r)
        self.assertIn("in use", r["error"]["message"])
        st, _, g = sup.request("GET", "/v1/images/multi")
        self.assertEqual(g["in_use"], 1, g)
        st, _, _ = sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
        self.assertEqual(st, 204)
        st, _, r = sup.request("DELETE", "/v1/images/multi")
        self.assertEqual(st, 200, r)
        self.assertEqual(r["gc"]["layers"], 4, r)
        self.assertEqual(r["store"]["layers"], 1, r)
        self.assertEqual(len(self.layers(sup)), 1)
        # the disk is given back: the multi layers' busybox and the rest
        self.assertLess(du(store), before - 1500000, (before, du(store)))
        st, _, r = sup.request("GET", "/v1/images/multi")
        self.assertEqual(st, 404, r)
        st, _, r = sup.request("DELETE", "/v1/images/multi")
        self.assertEqual(st, 404, r)
        # the one left still serves
        sb = sup.create(image="tiny")
        st, _, x = sup.exec(sb["id"], cmd="echo $GREETING")
        self.assertEqual(x["stdout"], "hello-from-image\n", x)

    def test_put_pool(self):
        sup = self.start()
        st, r = self.upload(sup, os.path.join(self.ti, "tiny.oci.tar"))
        self.assertEqual(st, 201, r)
        st, _, p = sup.request("PUT", "/v1/pools/tiny", {"size": 2})
        self.assertEqual(st, 200, p)
        self.assertEqual((p["image"], p["size"]), ("tiny", 2))
        sup.wait_ready("tiny", 2)
        # pooled: the image is in use, and a create takes a warm one
        st, _, r = sup.request("DELETE", "/v1/images/tiny")
        self.assertEqual(st, 409, r)
        sb = sup.create(image="tiny")
        sup.wait_ready("tiny", 2)  # refilled
        self.assertEqual(len(h.containers_under(sup.state_dir)), 3)
        st, _, _ = sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
        self.assertEqual(st, 204)
        # drained: its sandboxes go
        st, _, p = sup.request("PUT", "/v1/pools/tiny", {"size": 0})
        self.assertEqual((st, p["size"], p["ready"]), (200, 0, 0), p)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and h.containers_under(sup.state_dir):
            time.sleep(0.1)
        self.assertEqual(h.containers_under(sup.state_dir), [])
        self.assertEqual(sup.pools()["tiny"]["ready"], 0)
        # the host pool too; errors name what is wrong
        st, _, p = sup.request("PUT", "/v1/pools/host", {"size": 1})
        self.assertEqual(st, 200, p)
        sup.wait_ready("host", 1)
        for path, body, want in (("/v1/pools/tiny", {"size": 257}, 400),
                                 ("/v1/pools/tiny", {"size": 1, "isolation": "xen"}, 400),
                                 ("/v1/pools/tiny", {"sise": 1}, 400),
                                 ("/v1/pools/nope:1", {"size": 1}, 400)):
            st, _, r = sup.request("PUT", path, body)
            self.assertEqual(st, want, (path, body, r))
        # and now it can go
        st, _, r = sup.request("DELETE", "/v1/images/tiny")
        self.assertEqual(st, 200, r)
        h.stop_clean(sup)

    def test_tenants_and_metrics(self):
        admin, alice = "admin-token-" + "a" * 20, "alice-token-" + "b" * 20
        tfile = os.path.join(self.tmp, "tenants.json")
        with open(tfile, "w") as f:
            json.dump({"tenants": {
                "admin": {"tokens": [hash_token(admin)]},
                "alice": {"tokens": [hash_token(alice)], "images": ["host", "tiny"]}}}, f)
        sup = h.Supervisor(SUPERVISOR, AGENT, pool_size=0, token=admin,
                           extra=["--tenants", tfile])
        self.addCleanup(sup.cleanup)
        sup.start()
        st, r = self.upload(sup, os.path.join(self.ti, "tiny.oci.tar"))
        self.assertEqual(st, 201, r)
        st, r = self.upload(sup, os.path.join(self.ti, "multi.docker.tar"), query="?name=multi")
        self.assertEqual(st, 201, r)
        as_alice = "Bearer " + alice
        # alice reads what she may use, changes nothing
        st, _, r = sup.request("GET", "/v1/images", token=as_alice)
        self.assertEqual([i["refs"] for i in r["images"]], [["tiny"]], r)
        st, _, r = sup.request("GET", "/v1/images/multi", token=as_alice)
        self.assertEqual(st, 404, r)
        st, _, r = sup.request("DELETE", "/v1/images/tiny", token=as_alice)
        self.assertEqual((st, r["error"]["code"]), (403, "forbidden"), r)
        st, _, r = sup.request("PUT", "/v1/pools/tiny", {"size": 1}, token=as_alice)
        self.assertEqual(st, 403, r)
        st, _, r = sup.request("POST", "/v1/images", {"ref": "x:1"}, token=as_alice,
                               headers={"Content-Type": "application/json"})
        self.assertEqual(st, 403, r)
        # the store in /metrics, as GET /v1/images says it
        st, _, r = sup.request("GET", "/v1/images")
        st, _, text = sup.request("GET", "/metrics")
        self.assertEqual(st, 200)
        text = text.decode()
        self.assertIn("sbx_images %d\n" % r["store"]["images"], text)
        self.assertIn("sbx_image_layers %d\n" % r["store"]["layers"], text)
        self.assertIn("sbx_image_store_bytes %d\n" % r["store"]["bytes"], text)
        if shutil.which("promtool"):
            out = subprocess.run(["promtool", "check", "metrics"], input=text,
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

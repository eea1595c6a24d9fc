"""Images: acquire from a pool of a store image beside host's, cold creates
of each, import time of a 100 MB image over POST /v1/images beside skopeo
and umoci on the same archive, and the disk 20 sandboxes of one image take.
Release build, real runc; the test images from tests/images/make-test-images,
the 100 MB one made here (one layer of 100,000,000 random bytes: gzip cannot
shrink it). The machine's load average is printed with the figures.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_images.py
(make bench runs it.)
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import emit, timed  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
MAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "images",
                    "make-test-images")


def timed_creates(sup, image, n, pooled):
    out = []
    for _ in range(n):
        if pooled:
            sup.wait_ready(image, 4)
        t0 = time.monotonic()
        sb = sup.create(image=image)
        out.append((time.monotonic() - t0) * 1000)
        sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
    return out


def row(what, v, key, role):
    v = sorted(v)
    print("| %s | %d | %.3f | %.3f |" % (what, len(v), h.percentile(v, 50), h.percentile(v, 99)))
    emit(key, what, role, n=len(v), p50_ms=h.percentile(v, 50), p99_ms=h.percentile(v, 99))


def big_image(tmp):
    """An oci-archive of about 100 MB: one layer holding 100,000,000 random
    bytes, made with umoci as the test images are."""
    lay = os.path.join(tmp, "big")
    blob = os.path.join(tmp, "random.bin")
    with open(blob, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(1000000))
    for cmd in (["umoci", "init", "--layout", lay], ["umoci", "new", "--image", lay + ":big"],
                ["umoci", "insert", "--image", lay + ":big", blob, "/data/random.bin"]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    os.unlink(blob)
    arch = os.path.join(tmp, "big.oci.tar")
    subprocess.run(["tar", "-C", lay, "-cf", arch, "."], check=True)
    return lay, arch


def upload(sup, path):
    c = sup.conn(300)
    try:
        with open(path, "rb") as f:
            c.request("POST", "/v1/images", body=f, headers={
                "Authorization": "Bearer " + sup.token, "Content-Type": "application/x-tar",
                "Content-Length": str(os.path.getsize(path))})
        resp = c.getresponse()
        body = resp.read()
        assert resp.status == 201, body
    finally:
        c.close()


def imports(sup, tmp):
    """Import of the 100 MB archive over HTTP (the image deleted, its layer
    collected, between runs) beside skopeo copying it into a layout
    (digests checked, nothing unpacked) and umoci unpacking its layout."""
    lay, arch = big_image(tmp)
    print("archive: %d bytes" % os.path.getsize(arch))

    def once():
        upload(sup, arch)
        st, _, r = sup.request("DELETE", "/v1/images/big", timeout=120)
        assert st == 200, r
    ours = timed(once, 3)
    # the DELETE's GC is inside the figure above: time it apart
    gc = []
    for _ in range(3):
        upload(sup, arch)
        gc += timed(lambda: sup.request("DELETE", "/v1/images/big", timeout=120), 1)
    dst = os.path.join(tmp, "copy")

    def skopeo():
        subprocess.run(["skopeo", "copy", "--quiet", "oci-archive:" + arch, "oci:" + dst + ":big"],
                       check=True)
        subprocess.run(["rm", "-rf", dst], check=True)
    rootfs = os.path.join(tmp, "unpacked")

    def umoci():
        subprocess.run(["umoci", "unpack", "--image", lay + ":big", rootfs], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", rootfs], check=True)
    print("| what | n | p50 ms | p99 ms |\n|---|---|---|---|")
    row("POST /v1/images, 100 MB oci-archive, + DELETE and its GC", ours, "images.import", "sbx")
    row("DELETE of it alone (GC of its 100 MB layer)", gc, "images.gc", "sbx")
    row("peer: skopeo copy oci-archive: -> oci: (digests, no unpack)", timed(skopeo, 3),
        "images.skopeo", "peer")
    row("peer: umoci unpack of its layout", timed(umoci, 3), "images.umoci", "peer")


def du(path):
    out = subprocess.run(["du", "-sk", path], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else 0


def main():
    tmp = tempfile.mkdtemp(prefix="sbx-bench-img-")
    subprocess.run([MAKE, tmp + "/img"], check=True, stdout=subprocess.DEVNULL)
    sup = h.Supervisor(SUP, AGENT, pool_size=4,
                       extra=["--import-image", tmp + "/img/tiny.oci.tar",
                              "--pool-images", "host=4,tiny=4"])
    try:
        sup.start()
        print("load average at start: %.1f %.1f %.1f" % os.getloadavg())
        print("| what | n | p50 ms | p99 ms |\n|---|---|---|---|")
        row("acquire, pool of host", timed_creates(sup, "host", 50, True), "images.acquire_host",
            "peer")
        row("acquire, pool of tiny (store image)", timed_creates(sup, "tiny", 50, True),
            "images.acquire_tiny", "sbx")
        h.stop_clean(sup)
        sup.cleanup()
        sup = h.Supervisor(SUP, AGENT, pool_size=0,
                           extra=["--import-image", tmp + "/img/tiny.oci.tar",
                                  "--import-image", tmp + "/img/multi",
                                  "--pool-images", "host=0"])
        sup.start()
        row("cold create, host (pool 0)", timed_creates(sup, "host", 20, False),
            "images.cold_host", "peer")
        row("cold create, tiny (store image, 1 layer, no pool)",
            timed_creates(sup, "tiny", 20, False), "images.cold_tiny", "sbx")
        row("cold create, multi (store image, 4 layers, no pool)",
            timed_creates(sup, "multi", 20, False), "images.cold_multi", "sbx")
        for line in sup.log().splitlines():
            if "imported from" in line:
                print("import:", line.split("info  ")[1])
        store = du(os.path.join(sup.state_dir, "store"))
        ids = [sup.create(image="tiny")["id"] for _ in range(20)]
        disks = sum(du(os.path.join(sup.state_dir, "sandboxes", i)) for i in ids)
        print("disk: store %d KiB; 20 sandboxes of tiny: %d KiB (writable layers, disk images sparse)"
              % (store, disks))
        emit("images.disk", "disk of 20 sandboxes of tiny (writable layers)", "sbx", n=20,
             kib=disks, store_kib=store)
        for i in ids:
            sup.request("DELETE", "/v1/sandboxes/" + i)
        imports(sup, tmp)
        print("load average at end: %.1f %.1f %.1f" % os.getloadavg())
    finally:
        sup.cleanup()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()

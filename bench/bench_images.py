"""Images: acquire from a pool of a store image beside host's, cold creates
of each, import time and the disk 20 sandboxes of one image take. Release
build, real runc; the test images from tests/images/make-test-images.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_images.py
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import sbx_harness as h  # noqa: E402

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


def row(what, v):
    v = sorted(v)
    print("| %s | %d | %.3f | %.3f |" % (what, len(v), h.percentile(v, 50), h.percentile(v, 99)))


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
        print("| what | n | p50 ms | p99 ms |\n|---|---|---|---|")
        row("acquire, pool of host", timed_creates(sup, "host", 50, True))
        row("acquire, pool of tiny (store image)", timed_creates(sup, "tiny", 50, True))
        h.stop_clean(sup)
        sup.cleanup()
        sup = h.Supervisor(SUP, AGENT, pool_size=0,
                           extra=["--import-image", tmp + "/img/tiny.oci.tar",
                                  "--import-image", tmp + "/img/multi",
                                  "--pool-images", "host=0"])
        sup.start()
        row("cold create, host (pool 0)", timed_creates(sup, "host", 20, False))
        row("cold create, tiny (store image, 1 layer, no pool)", timed_creates(sup, "tiny", 20, False))
        row("cold create, multi (store image, 4 layers, no pool)", timed_creates(sup, "multi", 20, False))
        for line in sup.log().splitlines():
            if "imported from" in line:
                print("import:", line.split("info  ")[1])
        store = du(os.path.join(sup.state_dir, "store"))
        ids = [sup.create(image="tiny")["id"] for _ in range(20)]
        disks = sum(du(os.path.join(sup.state_dir, "sandboxes", i)) for i in ids)
        print("disk: store %d KiB; 20 sandboxes of tiny: %d KiB (writable layers, disk images sparse)"
              % (store, disks))
    finally:
        sup.cleanup()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()

"""The Kubernetes backend's rows (issue 15), each beside its peer from the
same run: one real kube-apiserver + etcd (tests/k8s/apiserver.py), one
node played by the kubelet harness (tests/k8s/kubelet.py: real runc
containers from the pod specs; why not a real kubelet: DESIGN.md, "the
kubelet in the tests"), and supervisors run one after the other on it:

  1. --backend kubernetes, pool of 2 (the repository's default template):
     rounds of acquire (POST /v1/sandboxes, timed), a tenant's work (files
     in /workspace, /tmp and /dev/shm, a setsid double fork, a nohup
     leftover, a background process of the API), DELETE; the release's
     figure is the supervisor's own (its log: "reset and checked in N us":
     the agent's reset and the host's check until the pod is in its pool
     again);
  2. the local runc backend (--pool-reuse), pool of 2, the same rounds: the
     acquire's and the release's peers on this machine;
  3. --backend kubernetes, pool of 0: what resetting is meant to beat, a
     pod deleted and a new one made: the DELETE (timed at the client; the
     supervisor deletes the pod in the API), the pod's deletion until the
     API server no longer has it (the kubelet harness stopped its
     container, removed its folders and finalized it), and a create with
     no ready pod (POST /v1/sandboxes until answered: the pod POSTed,
     started by the harness, its agent's socket found by inotify, its
     identity checked with the API server, the agent's hello).

  /usr/bin/python3 bench/bench_k8s.py --build-dir build/release [--rounds 20]

Needs scripts/install-k8s's cache. Stdlib only; it removes everything it
made (the harnesses' cleanup), also when it fails.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver  # noqa: E402
import sandbox_image  # noqa: E402
from bench_reset import WORK, released  # noqa: E402
from bench_table import table  # noqa: E402
from kubelet_node import Node  # noqa: E402
from sbx_harness import Supervisor, stop_clean  # noqa: E402

NODE = "bench-k8s"
IMAGE = "sbx/sandbox-base:latest"
TEMPLATE = os.path.join(TOP, "daemonset", "templates", "default.yaml")
PODS = "/api/v1/namespaces/sbx-sandboxes/pods"


def lease_rounds(s, image, n, pool):
    """n rounds of acquire, work, DELETE: (acquire ms, release ms)."""
    acq, rel = [], []
    for _ in range(n):
        s.wait_ready(image=image, n=pool, timeout=120)
        t0 = time.perf_counter()
        st, _, b = s.request("POST", "/v1/sandboxes", {"image": image, "timeout": 600})
        acq.append((time.perf_counter() - t0) * 1000)
        assert st == 201, b
        rel.append(released(s, b["id"], True))
    return acq, rel


def pod_gone(cp, name, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st, _ = cp.api("GET", "%s/%s" % (PODS, name))
        if st == 404:
            return
        time.sleep(0.01)
    raise AssertionError("pod %s still there after %d s" % (name, timeout))


def recreate_rounds(s, cp, n):
    """n rounds of a create with no ready pod, then DELETE and the pod's
    end: (create ms, DELETE ms, deletion ms)."""
    made, dele, gone = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        st, _, b = s.request("POST", "/v1/sandboxes", {"image": "default", "timeout": 600},
                             timeout=180)
        made.append((time.perf_counter() - t0) * 1000)
        assert st == 201, b
        sid = b["id"]
        st, _, r = s.exec(sid, cmd=WORK)
        assert st == 200 and r["exit_code"] == 0, r
        t0 = time.perf_counter()
        assert s.request("DELETE", "/v1/sandboxes/%s" % sid)[0] == 204
        t1 = time.perf_counter()
        pod_gone(cp, sid)  # a pod is named after its sandbox id
        t2 = time.perf_counter()
        dele.append((t1 - t0) * 1000)
        gone.append((t2 - t1) * 1000)
    return made, dele, gone


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--recreate-rounds", type=int, default=10)
    a = ap.parse_args()
    sup_bin = os.path.abspath(os.path.join(a.build_dir, "node-supervisor", "sandbox-supervisor"))
    agent = os.path.abspath(os.path.join(a.build_dir, "guest-agent", "sandbox-agent"))
    apiserver.require_binaries()
    root = tempfile.mkdtemp(prefix="sbx-bench-k8s-")
    cp = node = None
    live = []
    try:
        cp = apiserver.ControlPlane().start()
        kc, _ = cp.supervisor_kubeconfig(root)
        layout, tag = sandbox_image.build(os.path.join(root, "image"), agent)
        host_root = os.path.join(root, "node")
        agents = os.path.join(host_root, "run", "sbx", "agents")
        os.makedirs(agents)
        node = Node(cp.kubeconfig, NODE, host_root, {IMAGE: (layout, tag)}, log_dir=root)
        node.start()

        def kube(pool):
            s = Supervisor(sup_bin, agent, state_dir=os.path.join(root, "state-%d" % pool),
                           pool_size=pool, extra=[
                               "--node-name", NODE, "--kubeconfig", kc, "--backend",
                               "kubernetes", "--agent-dir", agents, "--pod-template", TEMPLATE])
            live.append(s)
            return s.start()

        s = kube(2)
        lease_rounds(s, "default", 2, 2)  # warm-up
        k_acq, k_rel = lease_rounds(s, "default", a.rounds, 2)
        stop_clean(s)
        s = Supervisor(sup_bin, agent, pool_size=2, extra=["--pool-reuse"])
        live.append(s)
        s.start()
        lease_rounds(s, "host", 2, 2)
        l_acq, l_rel = lease_rounds(s, "host", a.rounds, 2)
        stop_clean(s)
        s = kube(0)
        made, dele, gone = recreate_rounds(s, cp, a.recreate_rounds)
        stop_clean(s)
        table([("acquire, pool of 2 pods (k8s)", k_acq, "sbx", "k8s.acquire"),
               ("acquire, pool of 2 runc sandboxes (local)", l_acq, "peer", "k8s.acquire_local"),
               ("release until pooled again: reset + check (k8s)", k_rel, "sbx", "k8s.reset"),
               ("release until pooled again: reset + check (local)", l_rel, "floor",
                "k8s.reset_local"),
               ("pod deleted: DELETE /v1/sandboxes/{id}", dele, "peer", "k8s.delete"),
               ("pod deleted: until the API server has it no more", gone, "peer", "k8s.gone"),
               ("pod made: a create with no ready pod", made, "peer", "k8s.made")])
    finally:
        for s in live:
            s.cleanup()
        if node:
            node.cleanup()
        if cp:
            cp.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""One node's kubelet harness (kubelet.py) as a process of a test: start()
waits for its "ready" line, stop() ends it with SIGTERM and checks that it
removed everything (exit 0), cleanup() makes sure of that whatever happened
(kills it, then sweeps its root). Joins sbx_harness's set of live things,
so ctest's timeout or ^C still cleans up, and records the harness process
and its root (runc's root in it) as a run of the root's (register_run): the
next harness start after a SIGKILL of the test kills the harness, its
containers and mounts and removes the root. A test harness, never part of
the product.
"""
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import kubelet  # noqa: E402
import sbx_harness  # noqa: E402


class Node:
    def __init__(self, kubeconfig, name, host_root, images, kubectl=None, log_dir=None,
                 extra=()):
        """images: {REF: (LAYOUT, TAG)}."""
        self.name = name
        self.host_root = os.path.realpath(host_root)
        self.root = os.path.join(self.host_root, "var", "lib", "sbx-kubelet")
        self.runc_root = os.path.join(self.root, "runc")
        self.argv = ["/usr/bin/python3", os.path.join(HERE, "kubelet.py"),
                     "--kubeconfig", kubeconfig, "--node-name", name,
                     "--host-root", self.host_root] + list(extra)
        for ref, (layout, tag) in images.items():
            self.argv += ["--image", "%s=%s:%s" % (ref, layout, tag)]
        if kubectl:
            self.argv += ["--kubectl", kubectl]
        self.log_path = os.path.join(log_dir or os.path.dirname(self.host_root),
                                     "kubelet-%s.log" % name)
        self.proc = None

    def start(self, timeout=60):
        os.makedirs(self.host_root, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=log)
        sbx_harness._live.add(self)
        sbx_harness.register_run(self.root, runc=["runc", "--root", self.runc_root],
                                 procs=[self.proc.pid])
        line = b"node %s ready" % self.name.encode()
        buf, ready = sbx_harness.read_until(self.proc, lambda b: line in b, timeout)
        if ready:
            return self
        raise RuntimeError("kubelet harness %s did not start: %r\n%s"
                           % (self.name, buf, self.log()))

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=60):
        """SIGTERM; its exit status (0: it removed everything it made)."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            return None

    def cleanup(self):
        sbx_harness._live.discard(self)
        if self.alive():
            self.stop(timeout=30)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        kubelet.sweep(self.root)
        sbx_harness.remove_run(self.root)

"""A real Kubernetes control plane for one test: etcd and kube-apiserver.

The binaries are the ones scripts/install-k8s cached (Debian's etcd and
kubectl, a kube-apiserver built from Debian's source; SBX_K8S_CACHE, default
/var/cache/sbx-k8s). start() makes a temporary folder with a CA, a serving
certificate for 127.0.0.1, a service-account key pair and an admin token,
starts etcd and kube-apiserver on free loopback ports, waits for /readyz and
the "default" namespace, and writes a kubeconfig there. stop() stops both and
removes the folder, whether the test passed or not (also on SIGTERM/SIGINT,
and both processes die with the test process: PR_SET_PDEATHSIG). The folder
and both processes are recorded as a run of the folder's (sbx_harness's
register_run): a SIGKILLed test's folder goes at the next harness start.

kubectl() runs the cached kubectl with that kubeconfig and a HOME inside the
folder: never the machine's kubectl, never its default config or cache.

supervisor_kubeconfig() is what every test that runs supervisors against it
does first: the DaemonSet's namespace and RBAC applied, a TokenRequest token
of its ServiceAccount, a kubeconfig in YAML as kubectl writes it. So the
supervisors run with the rights daemonset/rbac.yaml grants, and a narrowing
of it fails in those tests.

Shortcuts, and why:
- ServiceAccount admission is off: without a controller-manager no token
  is ever made for a ServiceAccount and every pod create would be refused.
- --endpoint-reconciler-type none: the "kubernetes" Endpoints object may not
  hold a loopback address.
- etcd --unsafe-no-fsync: the store lives as long as one test.
This is a test harness, never part of the product. Stdlib only.
"""
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The integration tests' harness owns the signal handlers that clean up
# what is live when ctest's timeout or ^C ends a test: a control plane
# joins its set (cleanup()).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import sbx_harness  # noqa: E402

CACHE = os.environ.get("SBX_K8S_CACHE", "/var/cache/sbx-k8s")
BIN = os.path.join(CACHE, "bin")
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def missing_binaries():
    """The cached binaries that are not there (empty when install-k8s ran)."""
    return [b for b in ("etcd", "kubectl", "kube-apiserver")
            if not os.access(os.path.join(BIN, b), os.X_OK)]


def require_binaries():
    """Exit 1 with a clear message when install-k8s has not run: a clear
    failure, not a skip (make test installs them)."""
    missing = missing_binaries()
    if missing:
        print("%s missing under %s: run scripts/install-k8s (make test does)"
              % (", ".join(missing), BIN))
        sys.exit(1)


def _end(p):
    """SIGTERM, then SIGKILL after 10 s; reaped."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def _free_ports(n):
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class ControlPlane:
    def __init__(self, cache_bin=BIN):
        self.bin = cache_bin
        self.root = None
        self.procs = {}
        self.url = None
        self.port = None
        self.token = None
        self.kubeconfig = None
        self.ca = None
        self.start_seconds = None

    # ---- start ----
    def start(self, timeout=90):
        missing = missing_binaries()
        if missing:
            raise RuntimeError("%s missing under %s: run scripts/install-k8s (make test does)"
                               % (", ".join(missing), self.bin))
        self.make_folder()
        try:
            self._pki()
            t0 = time.monotonic()
            etcd_port, peer_port, self.port = _free_ports(3)
            self._etcd(etcd_port, peer_port, t0 + timeout)
            self._apiserver(etcd_port, t0 + timeout)
            self.start_seconds = time.monotonic() - t0
            self._kubeconfig()
        except BaseException:
            self.stop()
            raise
        return self

    def make_folder(self):
        """The control plane's folder, recorded as a run's with what
        spawn starts (it_harness_sweep checks their sweep with a stand-in
        process: a real start takes some 12 s of CPU, more than that whole
        test)."""
        self.root = tempfile.mkdtemp(prefix="sbx-k8s-")
        sbx_harness._live.add(self)
        sbx_harness.register_run(self.root, runc=())

    def _pki(self):
        p = os.path.join(self.root, "pki")
        os.mkdir(p)
        # EC keys: a few ms each where RSA 2048 takes a few hundred.
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=sbx-test-k8s-ca",
                 "-keyout", "ca.key", "-out", "ca.crt", cwd=p)
        _openssl("req", *ec, "-subj", "/CN=kube-apiserver",
                 "-keyout", "apiserver.key", "-out", "apiserver.csr", cwd=p)
        with open(os.path.join(p, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "apiserver.crt",
                 cwd=p)
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=p)
        _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=p)
        self.token = os.urandom(24).hex()
        # token,user,uid,"groups": system:masters is cluster-admin under RBAC.
        with open(os.path.join(p, "tokens.csv"), "w") as f:
            f.write('%s,sbx-test-admin,sbx-test-admin,"system:masters"\n' % self.token)
        os.chmod(os.path.join(p, "tokens.csv"), 0o600)
        self.ca = os.path.join(p, "ca.crt")

    def spawn(self, name, argv):
        log = open(os.path.join(self.root, name + ".log"), "ab")
        try:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=log, preexec_fn=_die_with_parent)
        finally:
            log.close()
        sbx_harness.register_run(self.root, runc=(), procs=[self.procs[name].pid])

    def _died(self, name):
        if self.procs[name].poll() is None:
            return
        raise RuntimeError("%s exited %s:\n%s" % (name, self.procs[name].returncode,
                                                 self.log(name)))

    def _etcd(self, port, peer, deadline):
        client = "http://127.0.0.1:%d" % port
        peer_url = "http://127.0.0.1:%d" % peer
        self.spawn("etcd", [
            os.path.join(self.bin, "etcd"), "--name", "sbx-test",
            "--data-dir", os.path.join(self.root, "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", "sbx-test=" + peer_url,
            "--unsafe-no-fsync", "--quota-backend-bytes", str(256 << 20)])
        while time.monotonic() < deadline:
            self._died("etcd")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                r = c.getresponse()
                ok = r.status == 200 and json.loads(r.read()).get("health") == "true"
                c.close()
                if ok:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError("etcd not healthy in time:\n" + self.log("etcd"))

    def _apiserver(self, etcd_port, deadline):
        p = os.path.join(self.root, "pki")
        self._etcd_port = etcd_port
        self.spawn("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", "http://127.0.0.1:%d" % etcd_port,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--insecure-port", "0",
            "--cert-dir", p, "--tls-cert-file", os.path.join(p, "apiserver.crt"),
            "--tls-private-key-file", os.path.join(p, "apiserver.key"),
            "--client-ca-file", os.path.join(p, "ca.crt"),
            "--token-auth-file", os.path.join(p, "tokens.csv"),
            "--authorization-mode", "RBAC", "--anonymous-auth=false",
            "--service-account-key-file", os.path.join(p, "sa.pub"),
            "--service-account-signing-key-file", os.path.join(p, "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", "10.96.0.0/16", "--endpoint-reconciler-type", "none",
            "--allow-privileged=true", "--disable-admission-plugins", "ServiceAccount",
            "--profiling=false", "--v=1"])
        self.url = "https://127.0.0.1:%d" % self.port
        while time.monotonic() < deadline:
            self._died("kube-apiserver")
            try:
                st, body = self.api("GET", "/readyz", timeout=2)
                if st == 200 and body == b"ok":
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("kube-apiserver not ready in time:\n" + self.log("kube-apiserver"))
        # The "default" namespace comes just after /readyz turns ok.
        while time.monotonic() < deadline:
            st, _ = self.api("GET", "/api/v1/namespaces/default")
            if st == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("namespace default never made:\n" + self.log("kube-apiserver"))

    def _kubeconfig(self):
        self.kubeconfig = os.path.join(self.root, "kubeconfig")
        cfg = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "sbx-test", "cluster": {
                "server": self.url, "certificate-authority": self.ca}}],
            "users": [{"name": "sbx-test-admin", "user": {"token": self.token}}],
            "contexts": [{"name": "sbx-test", "context": {
                "cluster": "sbx-test", "user": "sbx-test-admin"}}],
            "current-context": "sbx-test",
        }
        # JSON is YAML: kubectl reads it as is.
        fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(cfg, f)

    # ---- an outage ----
    def stop_apiserver(self):
        """Stops kube-apiserver alone (etcd and its store stay): clients
        see connections refused until start_apiserver()."""
        _end(self.procs.pop("kube-apiserver"))

    def start_apiserver(self, timeout=60):
        """The same API server again, on the same port, over the same store."""
        self._apiserver(self._etcd_port, time.monotonic() + timeout)

    # ---- use ----
    def api(self, method, path, body=None, timeout=30):
        """One HTTPS request with the admin token; (status, raw bytes)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        c = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=ctx)
        h = {"Authorization": "Bearer " + self.token}
        if body is not None:
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def kubectl(self, *args, stdin=None, timeout=60):
        """The cached kubectl against this control plane only: its own
        kubeconfig, HOME (kubectl's discovery cache) inside the folder, no
        KUBECONFIG from the caller. A CompletedProcess (text)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env["HOME"] = os.path.join(self.root, "home")
        return subprocess.run([os.path.join(self.bin, "kubectl"), "--kubeconfig", self.kubeconfig]
                              + list(args), input=stdin, env=env, capture_output=True,
                              text=True, timeout=timeout)

    # ---- the supervisors' account ----
    def apply(self, *names):
        """kubectl apply of daemonset/<name> for each name."""
        for name in names:
            p = self.kubectl("apply", "-f", os.path.join(TOP, "daemonset", name))
            if p.returncode != 0:
                raise RuntimeError("kubectl apply %s: %s" % (name, p.stderr))

    def sa_token(self, account="sbx-supervisor", seconds=3600, ns="sbx-system"):
        """A TokenRequest token of ServiceAccount ns/account (tokens of one
        account differ by their expiry)."""
        st, body = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token"
                            % (ns, account),
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": seconds}})
        if st != 201:
            raise RuntimeError("TokenRequest for %s/%s: %s %r" % (ns, account, st, body))
        return json.loads(body)["status"]["token"]

    def write_kubeconfig(self, path, token):
        """The kubeconfig kubectl would write (YAML) for this server and
        token, with the CA as a file beside it, named relatively."""
        shutil.copy(self.ca, os.path.join(os.path.dirname(path), "ca.crt"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: sbx\n"
                    "clusters:\n- name: test\n  cluster:\n    server: %s\n"
                    "    certificate-authority: ca.crt\n"
                    "contexts:\n- name: sbx\n  context:\n    cluster: test\n    user: supervisor\n"
                    "users:\n- name: supervisor\n  user:\n    token: %s\n" % (self.url, token))
        return path

    def supervisor_kubeconfig(self, folder):
        """The DaemonSet's namespace and RBAC applied, and
        <folder>/kubeconfig for its ServiceAccount sbx-supervisor (a
        TokenRequest token, an hour): (path, token)."""
        self.apply("namespace.yaml", "rbac.yaml")
        token = self.sa_token()
        return self.write_kubeconfig(os.path.join(folder, "kubeconfig"), token), token

    def log(self, name):
        try:
            with open(os.path.join(self.root, name + ".log"), errors="replace") as f:
                return f.read()[-6000:]
        except (OSError, TypeError):
            return ""

    # ---- stop ----
    def stop(self):
        """Stops the API server, then etcd, and removes the folder (and
        its run's record)."""
        sbx_harness._live.discard(self)
        for name in ("kube-apiserver", "etcd"):
            p = self.procs.pop(name, None)
            if p is not None:
                _end(p)
        if self.root is not None:
            sbx_harness.remove_run(self.root)
            self.root = None

    cleanup = stop  # what sbx_harness's signal handler calls

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

"""daemonset/ (the kustomize manifests) against what reads them:
- Debian's kubectl 1.20 (`kubectl kustomize`, scripts/install-k8s's cache)
  renders them;
- the tenants Secret's example is a file the supervisor starts with;
- offline, kubernetes-models (pinned in tests/k8s/package-lock.json, run by
  tests/k8s/check.mjs) validates every object, the sandbox pod template the
  ConfigMap carries included, and refuses a wrong type;
- a real kube-apiserver with etcd (tests/k8s/apiserver.py, started for this
  test on loopback and removed after) takes them all in a server-side
  dry-run (`kubectl apply --dry-run=server -k`: kubectl checks each object
  against the server's OpenAPI document, so an unknown field fails, then the
  server runs validation and admission without storing), the template's Pod
  too. A copy with a misspelt field and one whose DaemonSet selector misses
  its pods are refused (kubernetes-models passes both: why both checks run);
- the supervisors' config file, as the rendered ConfigMap carries it and the
  DaemonSet's args name it, is taken by the real binary
  (`--config FILE --check-config` with the pod's args, `--print-config`),
  and a copy with a misspelt key is refused naming its line;
- applied for real, the supervisors' ServiceAccount may do what the
  Kubernetes backend will need (pods and events of sbx-sandboxes, leases of
  sbx-system) and nothing else it was checked for (`kubectl auth can-i`
  as the ServiceAccount); the supervisors' own use of them is
  test_k8s_nodes's, which runs three of them as that ServiceAccount.

Env: SBX_SUPERVISOR, SBX_AGENT. Needs scripts/install-k8s's cache (make test installs it) and
tests/k8s/node_modules (scripts/install-deps). Never the machine's kubectl
or its config: the cached kubectl with the test's own kubeconfig.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver  # noqa: E402
from sbx_harness import Supervisor, stop_clean  # noqa: E402

MANIFESTS = os.path.join(TOP, "daemonset")
TOOLS = os.path.join(TOP, "tests", "k8s")
KUBECTL = os.path.join(apiserver.BIN, "kubectl")
SA = "system:serviceaccount:sbx-system:sbx-supervisor"

# What the rendered set must hold (kind, name; generated names by prefix).
EXPECTED = [
    ("Namespace", "sbx-system"), ("Namespace", "sbx-sandboxes"),
    ("ServiceAccount", "sbx-supervisor"), ("Role", "sbx-supervisor-sandboxes"),
    ("RoleBinding", "sbx-supervisor-sandboxes"), ("Role", "sbx-supervisor-leases"),
    ("RoleBinding", "sbx-supervisor-leases"), ("DaemonSet", "sbx-supervisor"),
    ("Service", "sbx-api"), ("NetworkPolicy", "sbx-sandboxes-default"),
    ("RuntimeClass", "gvisor"), ("RuntimeClass", "kata"),
    ("ConfigMap", "sbx-sandbox-templates-"), ("ConfigMap", "sbx-supervisor-config-"),
    ("Secret", "sbx-tenants-"),
]


def render(folder):
    """kubectl kustomize FOLDER: (returncode, YAML text, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = tempfile.gettempdir()
    p = subprocess.run([KUBECTL, "kustomize", folder], capture_output=True, text=True, env=env,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def offline_check(yaml_text):
    """tests/k8s/check.mjs over a rendered set: (returncode, output)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(yaml_text)
    try:
        p = subprocess.run(["node", os.path.join(TOOLS, "check.mjs"), f.name],
                           capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    return p.returncode, p.stdout + p.stderr


def objects(cp, yaml_text):
    """The rendered objects as JSON, read by kubectl itself (client dry-run,
    no server call): a list of dicts."""
    p = cp.kubectl("create", "--dry-run=client", "-o", "json", "-f", "-", stdin=yaml_text)
    if p.returncode != 0:
        raise AssertionError("kubectl could not read the set: " + p.stderr)
    # kubectl 1.20 writes one JSON document per object, one after another
    # (a List only when the input was one).
    found, dec, at = [], json.JSONDecoder(), 0
    while True:
        while at < len(p.stdout) and p.stdout[at].isspace():
            at += 1
        if at >= len(p.stdout):
            return found
        out, at = dec.raw_decode(p.stdout, at)
        found += out["items"] if out.get("kind") == "List" else [out]


def mutated(edit):
    """A copy of daemonset/ with edit(folder) applied; the caller removes it."""
    d = tempfile.mkdtemp(prefix="sbx-k8s-manifests-")
    shutil.copytree(MANIFESTS, os.path.join(d, "m"))
    edit(os.path.join(d, "m"))
    return d


def replace_in(path, old, new):
    with open(path) as f:
        s = f.read()
    if old not in s:
        raise AssertionError("%r not in %s" % (old, path))
    with open(path, "w") as f:
        f.write(s.replace(old, new, 1))


class Offline(unittest.TestCase):
    def test_install_is_cached(self):
        """A second run of scripts/install-k8s (make test's, each time)
        checks the cache and returns: nothing fetched, nothing built."""
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(TOP, "scripts", "install-k8s")], capture_output=True,
                           text=True, timeout=60)
        took = time.monotonic() - t0
        print("install-k8s on a filled cache: %.3f s" % took)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        self.assertLess(took, 1.0)

    def test_renders_and_validates(self):
        rc, text, err = render(MANIFESTS)
        self.assertEqual(rc, 0, err)
        rc, out = offline_check(text)
        print(out, end="")
        self.assertEqual(rc, 0, out)
        lines = out.splitlines()
        for kind, name in EXPECTED:
            self.assertTrue(any(l.startswith("ok   %s/%s" % (kind, name)) for l in lines),
                            "%s/%s missing from the rendered set:\n%s" % (kind, name, out))
        # The sandbox pod template inside its ConfigMap was checked as a Pod.
        self.assertTrue(any("[default.yaml] Pod/sbx-default-" in l for l in lines), out)

    def test_tenants_example_accepted(self):
        """The tenants Secret's example is a file the supervisor takes (its
        strict parser: an unknown key or a bad hash stops the start)."""
        sup = os.environ.get("SBX_SUPERVISOR")
        agent = os.environ.get("SBX_AGENT")
        self.assertTrue(sup and agent, "SBX_SUPERVISOR and SBX_AGENT must name the binaries")
        s = Supervisor(sup, agent, pool_size=0, token="unused-the-file-has-hashes",
                       extra=["--tenants", os.path.join(MANIFESTS, "tenants.example.json")])
        try:
            s.start()
            st, _, body = s.request("GET", "/v1/pools", token="Bearer not-a-token-of-the-file")
            self.assertEqual(st, 401, body)
            stop_clean(s)
        finally:
            s.cleanup()

    def test_tls_by_default(self):
        """The DaemonSet serves HTTPS and relays over it: the three files of
        the Secret sbx-tls (cert-manager's key names) given to the
        supervisor in its ConfigMap, its Lease URL https://, probes over
        HTTPS, the Service on 443; and scripts/tls-certs makes files a
        supervisor serves with, verified by a client that trusts only their
        CA."""
        rc, text, err = render(MANIFESTS)
        self.assertEqual(rc, 0, err)
        for want in ("tls-cert: /etc/sbx/tls/tls.crt", "tls-key: /etc/sbx/tls/tls.key",
                     "tls-ca: /etc/sbx/tls/ca.crt",
                     "https://$(POD_IP):7070", "mountPath: /etc/sbx/tls",
                     "secretName: sbx-tls", "port: 443"):
            self.assertIn(want, text)
        self.assertEqual(text.count("scheme: HTTPS"), 2, "both probes over HTTPS")
        self.assertNotIn("http://", text)
        sup = os.environ.get("SBX_SUPERVISOR")
        agent = os.environ.get("SBX_AGENT")
        self.assertTrue(sup and agent, "SBX_SUPERVISOR and SBX_AGENT must name the binaries")
        d = tempfile.mkdtemp(prefix="sbx-k8s-tls-")
        s = None
        try:
            p = subprocess.run([os.path.join(TOP, "scripts", "tls-certs"), d], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("create secret generic sbx-tls", p.stdout)
            s = Supervisor(sup, agent, pool_size=0, ca_file=os.path.join(d, "ca.crt"),
                           extra=["--tls-cert", os.path.join(d, "tls.crt"),
                                  "--tls-key", os.path.join(d, "tls.key"),
                                  "--tls-ca", os.path.join(d, "ca.crt")])
            s.start()
            st, _, body = s.request("GET", "/healthz", token=None)
            self.assertEqual(st, 200, body)
            stop_clean(s)
        finally:
            if s:
                s.cleanup()
            shutil.rmtree(d)

    def test_wrong_type_refused_offline(self):
        rc, text, err = render(MANIFESTS)
        self.assertEqual(rc, 0, err)
        bad = text.replace("containerPort: 7070", "containerPort: seven-thousand", 1)
        self.assertNotEqual(bad, text)
        rc, out = offline_check(bad)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("FAIL DaemonSet/sbx-supervisor", out)
        self.assertIn("containerPort", out)


class Server(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = apiserver.ControlPlane()
        cls.cp.start()
        print("control plane ready in %.2f s (etcd + kube-apiserver, %s)"
              % (cls.cp.start_seconds, cls.cp.url))

    @classmethod
    def tearDownClass(cls):
        cls.cp.stop()

    def kubectl(self, *args, stdin=None):
        return self.cp.kubectl(*args, stdin=stdin)

    def namespaces(self):
        # A dry-run stores nothing, so a namespace it "creates" cannot hold
        # the next object: the namespaces are made for real first.
        p = self.kubectl("apply", "-f", os.path.join(MANIFESTS, "namespace.yaml"))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_1_server_dry_run(self):
        self.namespaces()
        t0 = time.monotonic()
        p = self.kubectl("apply", "--dry-run=server", "-k", MANIFESTS)
        print("server dry-run %.2f s:\n%s" % (time.monotonic() - t0, p.stdout), end="")
        self.assertEqual(p.returncode, 0, p.stderr)
        for kind, name in EXPECTED:
            self.assertRegex(p.stdout, r"(?m)^%s(\.[a-z0-9.]+)?/%s\S* (created|configured|unchanged)"
                             r" \(server dry run\)$" % (kind.lower(), re.escape(name)))
        # Nothing but the namespaces was stored.
        st, body = self.cp.api("GET", "/apis/apps/v1/namespaces/sbx-system/daemonsets")
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["items"], [])

    def test_2_template_pod_dry_run(self):
        self.namespaces()
        rc, text, err = render(MANIFESTS)
        self.assertEqual(rc, 0, err)
        cms = [o for o in objects(self.cp, text) if o["kind"] == "ConfigMap"
               and o["metadata"]["name"].startswith("sbx-sandbox-templates-")]
        self.assertEqual(len(cms), 1)
        templates = cms[0]["data"]
        self.assertIn("default.yaml", templates)
        for key, tmpl in templates.items():
            p = self.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=tmpl)
            self.assertEqual(p.returncode, 0, "%s: %s" % (key, p.stderr))
            pod = json.loads(p.stdout)
            self.assertEqual(pod["kind"], "Pod")
            self.assertEqual(pod["metadata"]["namespace"], "sbx-sandboxes")
            # The server filled it in (defaults): it went through the API.
            self.assertEqual(pod["spec"]["containers"][0]["terminationMessagePath"],
                             "/dev/termination-log")

    def supervisor_config(self):
        """The rendered DaemonSet's container args and the config file they
        name, read from the rendered ConfigMap through its volume."""
        rc, text, err = render(MANIFESTS)
        self.assertEqual(rc, 0, err)
        objs = objects(self.cp, text)
        ds = [o for o in objs if o["kind"] == "DaemonSet"][0]["spec"]["template"]["spec"]
        c = ds["containers"][0]
        args = c["args"]
        path = args[args.index("--config") + 1]
        mount = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        self.assertEqual(len(mount), 1, "no volume mounted at %s" % path)
        vol = [v for v in ds["volumes"] if v["name"] == mount[0]["name"]][0]
        cm = [o for o in objs if o["kind"] == "ConfigMap"
              and o["metadata"]["name"] == vol["configMap"]["name"]]
        self.assertEqual(len(cm), 1, "the ConfigMap %s is not in the set" % vol["configMap"]["name"])
        key = path[len(mount[0]["mountPath"]) + 1:]
        self.assertIn(key, cm[0]["data"])
        return args, path, cm[0]["data"][key]

    def run_supervisor(self, args, path, text):
        """The binary with the pod's args (its downward API values filled
        in) and the config file at a path of ours."""
        sup = os.environ.get("SBX_SUPERVISOR")
        self.assertTrue(sup, "SBX_SUPERVISOR must name the binary")
        d = tempfile.mkdtemp(prefix="sbx-k8s-config-")
        try:
            mine = os.path.join(d, os.path.basename(path))
            with open(mine, "w") as f:
                f.write(text)
            argv = [mine if a == path else
                    a.replace("$(NODE_NAME)", "node-a").replace("$(POD_IP)", "10.0.0.5")
                    for a in args]
            return subprocess.run([sup] + argv, capture_output=True, text=True, timeout=60)
        finally:
            shutil.rmtree(d)

    def test_6_supervisor_config_accepted(self):
        args, path, text = self.supervisor_config()
        p = self.run_supervisor(args + ["--check-config"], path, text)
        print(p.stdout, end="")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("are valid", p.stdout)
        # What it runs with: the file's options, the args' per-pod ones.
        p = self.run_supervisor(args + ["--print-config"], path, text)
        self.assertEqual(p.returncode, 0, p.stderr)
        for line in ("backend: kubernetes", "kube-in-cluster: true", "listen: 0.0.0.0:7070",
                     "tenants: /etc/sbx/tenants/tenants.json", "node-name: node-a",
                     "advertise-url: https://10.0.0.5:7070", "- /etc/sbx/templates/default.yaml",
                     "tls-cert: /etc/sbx/tls/tls.crt", "tls-key: /etc/sbx/tls/tls.key",
                     "tls-ca: /etc/sbx/tls/ca.crt"):
            self.assertIn(line + "\n", p.stdout)
        # A misspelt key stops the start, naming the file's line.
        bad = text.replace("\nbackend:", "\nbackendd:", 1)
        self.assertNotEqual(bad, text)
        line = bad[:bad.index("backendd:")].count("\n") + 1
        p = self.run_supervisor(args + ["--check-config"], path, bad)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("%s:%d: backendd: not an option" % (os.path.basename(path), line), p.stderr)

    def refused(self, edit, offline_passes, want):
        d = mutated(edit)
        try:
            rc, text, err = render(os.path.join(d, "m"))
            self.assertEqual(rc, 0, err)
            rc, out = offline_check(text)
            # kubernetes-models lets these through: the reason for the
            # server-side check.
            self.assertEqual(rc == 0, offline_passes, out)
            p = self.kubectl("apply", "--dry-run=server", "-k", os.path.join(d, "m"))
            self.assertNotEqual(p.returncode, 0, p.stdout)
            self.assertIn(want, p.stderr)
            return p.stderr
        finally:
            shutil.rmtree(d)

    def test_3_misspelt_field_refused(self):
        self.namespaces()
        err = self.refused(lambda m: replace_in(os.path.join(m, "supervisor.yaml"),
                                                "mountPropagation:", "mountPropagaton:"),
                           offline_passes=True, want="mountPropagaton")
        print("misspelt field: " + err.strip().splitlines()[0])

    def test_4_selector_mismatch_refused(self):
        self.namespaces()
        err = self.refused(lambda m: replace_in(os.path.join(m, "supervisor.yaml"),
                                                "      labels:\n        app.kubernetes.io/name: sbx-supervisor",
                                                "      labels:\n        app.kubernetes.io/name: sbx-other"),
                           offline_passes=True, want="selector")
        print("selector mismatch: " + err.strip().splitlines()[-1])

    def test_5_rbac_least_privilege(self):
        p = self.kubectl("apply", "-k", MANIFESTS)
        self.assertEqual(p.returncode, 0, p.stderr)
        allowed = [
            ("create", "pods", "sbx-sandboxes"), ("watch", "pods", "sbx-sandboxes"),
            ("patch", "pods", "sbx-sandboxes"), ("delete", "pods", "sbx-sandboxes"),
            ("create", "events", "sbx-sandboxes"),
            ("patch", "leases.coordination.k8s.io", "sbx-system"),
            ("create", "leases.coordination.k8s.io", "sbx-system"),
            ("watch", "leases.coordination.k8s.io", "sbx-system"),
            ("create", "events", "sbx-system"),
            ("create", "tokenreviews.authentication.k8s.io", ""),
        ]
        denied = [
            ("create", "pods", "sbx-system"), ("list", "pods", "default"),
            ("create", "pods/exec", "sbx-sandboxes"), ("get", "secrets", "sbx-sandboxes"),
            ("get", "secrets", "sbx-system"), ("get", "configmaps", "sbx-system"),
            ("update", "daemonsets.apps", "sbx-system"), ("list", "nodes", ""),
            ("update", "leases.coordination.k8s.io", "kube-system"),
            ("update", "leases.coordination.k8s.io", "sbx-system"),
            ("delete", "leases.coordination.k8s.io", "sbx-system"),
            ("patch", "events", "sbx-system"),
            ("create", "events", "default"), ("delete", "namespaces", ""),
            ("update", "roles.rbac.authorization.k8s.io", "sbx-sandboxes"),
            ("create", "subjectaccessreviews.authorization.k8s.io", ""),
            ("create", "serviceaccounts/token", "sbx-system"),
        ]
        for verb, res, ns in allowed + denied:
            # a subresource goes as --subresource: kubectl 1.20 reads
            # "pods/exec" as the resource pods alone
            sub = res.split("/", 1)
            args = ["auth", "can-i", verb, sub[0], "--as", SA]
            args += ["--subresource", sub[1]] if len(sub) > 1 else []
            args += ["-n", ns] if ns else []
            p = self.kubectl(*args)
            got = p.stdout.strip()
            want = "yes" if (verb, res, ns) in allowed else "no"
            self.assertEqual(got, want, "%s %s in %r: %r %s" % (verb, res, ns, got, p.stderr))


if __name__ == "__main__":
    apiserver.require_binaries()
    unittest.main()

"""The relay in a Kubernetes cluster, the control plane and the supervisors'
rights as it_k8s_nodes has them (test_k8s_nodes.py): two supervisors as two
nodes with the names a cloud gives its nodes (a dotted DNS name, and one of
the longest, 253 bytes), no cluster key: node-to-node calls carry the
relaying supervisor's service-account token, which the receiver has the API
server review (TokenReview).

- sandbox ids stay short and URL-safe: they carry the tag of their node's
  name, which both directories (the Leases) resolve; the longest name's
  Lease is named by its tag;
- a sandbox made on one node is used through the other (exec), and a create
  on the node with no pool lands on the other: the token passes its review;
- a relayed request with another ServiceAccount's token is 403, with a
  garbage token or none 401 (JSON bodies);
- the API server stopped: a token reviewed a moment before still passes (the
  bounded cache), a token not yet reviewed is 503, never served; the API
  server back: that token passes.

Env: SBX_SUPERVISOR, SBX_AGENT. Needs scripts/install-k8s's cache.
"""
import json
import os
import secrets
import sys
import time
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver  # noqa: E402
from sbx_harness import Supervisor  # noqa: E402
from test_k8s_nodes import LEASES, NS, ClusterTest, binaries, wait_for  # noqa: E402

SA_API = "/api/v1/namespaces/%s/serviceaccounts" % NS
TOKEN = secrets.token_hex(32)  # the tenant's, on both nodes
# A cloud's node name, and one of 253 bytes (63.63.63.61).
N1 = "ip-10-0-1-23.eu-west-1.compute.internal"
N2 = ".".join(["n2" + "x" * 61, "y" * 63, "z" * 63, "w" * 61])
POOLS = {N1: 1, N2: 0}
RELAYED = {"Sbx-Relay-Hops": "1"}


class K8sRelay(ClusterTest):
    @classmethod
    def setUpClass(cls):
        assert len(N2) == 253

        def make():
            cls.cp.apply("namespace.yaml", "rbac.yaml")
            st, body = cls.cp.api("POST", SA_API, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                   "metadata": {"name": "intruder"}})
            assert st == 201, body
            # Tokens of one account differ by their expiry (no two alike).
            cls.sa_token = cls.cp.sa_token("sbx-supervisor", 3600)
            cls.spare = cls.cp.sa_token("sbx-supervisor", 3601)   # reviewed first while the server is away
            cls.warm = cls.cp.sa_token("sbx-supervisor", 3602)    # reviewed just before it goes
            cls.other = cls.cp.sa_token("intruder", 3600)
            kc = cls.cp.write_kubeconfig(os.path.join(cls.tmp, "kubeconfig"), cls.sa_token)
            sup, agent = binaries()
            for name, pool in POOLS.items():
                s = Supervisor(sup, agent, pool_size=pool, token=TOKEN, extra=[
                    "--token", TOKEN, "--node-name", name, "--kubeconfig", kc,
                    "--lease-duration", "8"])
                cls.sups[name] = s.start()
            cls.sups[N1].wait_ready(n=1)
        cls.start_cluster("sbx-k8s-relay-", make)

    def nodes(self, name):
        """The live nodes in name's directory, by name."""
        return {n["name"]: n for n in self.directory(name)["nodes"] if n["live"]}

    def both_listed(self):
        for name in POOLS:
            wait_for("directory of %s" % name[:20], lambda: set(self.nodes(name)) == set(POOLS), 20)

    def peer_get(self, node, sid, node_token):
        """A request as a peer relays it, straight to node."""
        h = dict(RELAYED)
        if node_token is not None:
            h["Sbx-Node-Token"] = node_token
        return self.sups[node].request("GET", "/v1/sandboxes/" + sid, headers=h, timeout=20)

    # ---- tests (in name order) ----
    def test_1_ids_carry_a_tag_the_directory_resolves(self):
        self.both_listed()
        d = self.nodes(N2)
        tag1, tag2 = d[N1]["tag"], d[N2]["tag"]
        self.assertRegex(tag1, r"^ip-10-0-1-2-[a-z2-7]{8}$")
        self.assertRegex(tag2, r"^n2xxxxxxxxx-[a-z2-7]{8}$")
        self.assertEqual(self.nodes(N1)[N2]["tag"], tag2)
        sb = self.sups[N1].create(image="host", timeout=300)
        type(self).sid = sb["id"]
        self.assertRegex(sb["id"], r"^sb-%s-[0-9a-f]{12}$" % tag1)
        self.assertLessEqual(len(sb["id"]), 40)
        # a name too long for "sbx-node-<name>": the Lease goes by the tag
        st, body = self.cp.api("GET", "%s/sbx-node-%s" % (LEASES, tag2))
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["metadata"]["annotations"]["sbx.dev/node"], N2)
        st, _ = self.cp.api("GET", "%s/sbx-node-%s" % (LEASES, N1))
        self.assertEqual(st, 200)
        print("ids: %s (node %s), tag of the 253-byte name: %s" % (sb["id"], N1, tag2))

    def test_2_relayed_with_the_service_account_token(self):
        n2 = self.sups[N2]
        t0 = time.monotonic()
        st, _, r = n2.exec(self.sid, cmd="echo relayed-$((6*7))")
        self.assertEqual((st, r.get("stdout")), (200, "relayed-42\n"), r)
        first = time.monotonic() - t0
        t0 = time.monotonic()
        st, _, r = n2.exec(self.sid, cmd="echo again")
        self.assertEqual((st, r.get("stdout")), (200, "again\n"), r)
        print("relayed exec: first %.0f ms (with its TokenReview), then %.0f ms (cached)"
              % (first * 1000, (time.monotonic() - t0) * 1000))
        # N2 keeps none ready: its create lands on N1, relayed with its token,
        # once N1's Lease says its pool has refilled since test 1 took its one
        wait_for("N1's refill in N2's directory",
                 lambda: self.nodes(N2).get(N1, {}).get("ready", {}).get("host", 0) >= 1, 60)
        st, _, b = n2.request("POST", "/v1/sandboxes", {"image": "host", "timeout": 120}, timeout=120)
        self.assertEqual(st, 201, b)
        try:
            self.assertTrue(b["id"].startswith("sb-ip-10-0-1-2-"), b["id"])
        finally:
            st, _, _ = n2.request("DELETE", "/v1/sandboxes/" + b["id"])
            self.assertEqual(st, 204)

    def test_3_other_tokens_refused(self):
        st, _, b = self.peer_get(N1, self.sid, self.other)
        self.assertEqual((st, b["error"]["code"]), (403, "permission_denied"), b)
        self.assertIn("system:serviceaccount:sbx-system:intruder", b["error"]["message"])
        for bad in ("garbage." + secrets.token_hex(40), None):
            st, _, b = self.peer_get(N1, self.sid, bad)
            self.assertEqual((st, b["error"]["code"]), (401, "unauthorized"), b)
        # the right token, straight: the sandbox itself
        st, _, b = self.peer_get(N1, self.sid, self.sa_token)
        self.assertEqual((st, b.get("id")), (200, self.sid), b)

    def test_4_api_server_away_is_503(self):
        st, _, b = self.peer_get(N1, self.sid, self.warm)
        self.assertEqual(st, 200, b)
        self.cp.stop_apiserver()
        try:
            st, _, b = self.peer_get(N1, self.sid, self.spare)
            self.assertEqual((st, b["error"]["code"]), (503, "unavailable"), b)
            # reviewed a moment ago: the cache answers (for at most a minute)
            st, _, b = self.peer_get(N1, self.sid, self.warm)
            self.assertEqual(st, 200, b)
        finally:
            self.cp.start_apiserver()
        st, _, b = self.peer_get(N1, self.sid, self.spare)
        self.assertEqual((st, b.get("id")), (200, self.sid), b)


if __name__ == "__main__":
    apiserver.require_binaries()
    unittest.main()

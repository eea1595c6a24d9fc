"""Tenants through a real sandbox-supervisor started with --tenants, real
runc containers and the real agent: hashed tokens (the helper's output
against Python's own SHA-256), ids and lists isolated (another tenant's
sandbox is 404 on every route, as an unknown id), the admin tenant, quotas
(429 quota_exceeded naming the figure and by how much; a waiting create
counts for its own tenant only), what a tenant leaves out is the
supervisor's, allow_root and max_timeout per tenant, SIGHUP reload (a
removed tenant's sandbox keeps running; a bad file is refused and the old
one kept), and /metrics (admin only, promtool, the node-local listener).
The pool is empty (--pool-size 0), so every create waits for a cold create:
that is what makes "waiting" observable. Everything made is removed at the
end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import hashlib
import http.client
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20


def hash_token(tok):
    """The helper's form of tok, checked against hashlib (an independent
    SHA-256)."""
    out = subprocess.run([SUP, "hash-token"], input=tok + "\n", capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    h = out.stdout.strip()
    assert h == "sha256:" + hashlib.sha256(tok.encode()).hexdigest(), (h, tok)
    return h


TOK = {name: secrets.token_hex(32) for name in ("admin", "alice", "bob", "carol")}


def tenants_doc(quota_alice_sandboxes=2, with_bob=True, with_carol=False):
    t = {
        "admin": {"tokens": [hash_token(TOK["admin"])]},
        "alice": {
            "tokens": [hash_token(TOK["alice"])],
            "quota": {"sandboxes": quota_alice_sandboxes, "memory": "600M"},
            "images": ["host"],
            "max_timeout": 600,
            "default_resources": {"memory": "128M"},
            "paths": [{"root": "/workspace", "mode": "ro"}],
        },
    }
    if with_bob:
        t["bob"] = {"tokens": [hash_token(TOK["bob"])], "allow_root": True,
                    "quota": {"sandboxes": 3}}
    if with_carol:
        t["carol"] = {"tokens": [hash_token(TOK["carol"])]}
    return {"tenants": t}


class Tenants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sbx-it-tenants-")
        cls.file = os.path.join(cls.dir, "tenants.json")
        cls.write(tenants_doc())
        cls.sup = Supervisor(SUP, AGENT, pool_size=0, token=TOK["admin"], extra=[
            "--tenants", cls.file, "--metrics-listen", "127.0.0.1:0",
            "--default-resources", "cpus=0.5,memory=256M,pids=256,disk=256M",
            "--max-resources", "cpus=1,memory=1G,pids=1024,disk=1G"])
        cls.addClassCleanup(cls.cleanup_dir)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    @classmethod
    def cleanup_dir(cls):
        for f in os.listdir(cls.dir):
            os.unlink(os.path.join(cls.dir, f))
        os.rmdir(cls.dir)

    @classmethod
    def write(cls, doc):
        tmp = cls.file + ".new"
        with open(tmp, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        os.rename(tmp, cls.file)

    # ---- helpers ----
    def req(self, who, method, path, body=None, headers=None):
        return self.sup.request(method, path, body, token="Bearer " + TOK[who], headers=headers)

    def create(self, who, **kw):
        st, _, body = self.req(who, "POST", "/v1/sandboxes", kw)
        if st == 201:
            self.addCleanup(self.delete_quietly, body["id"])
        return st, body

    def delete_quietly(self, sid):
        st, _, body = self.req("admin", "DELETE", "/v1/sandboxes/%s" % sid)
        self.assertIn(st, (204, 404), body)

    def ids(self, who):
        st, _, body = self.req(who, "GET", "/v1/sandboxes")
        self.assertEqual(st, 200, body)
        return {s["id"] for s in body["sandboxes"]}

    def reload(self, doc):
        self.write(doc)
        before = self.sup.log().count("tenants: re")
        self.sup.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.sup.log().count("tenants: re") == before:
            time.sleep(0.05)
        return self.sup.log()

    # ---- tests ----
    def test_tokens_are_hashes(self):
        with open(self.file) as f:
            text = f.read()
        for tok in TOK.values():
            self.assertNotIn(tok, text)
        # The stored hash is not a token, a wrong one is 401 and names no tenant.
        h = hash_token(TOK["alice"])
        for bad in (h, h[7:], TOK["alice"][:-1], TOK["alice"] + "0"):
            st, hdrs, body = self.sup.request("GET", "/v1/sandboxes", token="Bearer " + bad)
            self.assertEqual(st, 401, body)
            self.assertEqual(body["error"]["code"], "unauthorized")
            self.assertIn("Bearer", hdrs.get("www-authenticate", ""))
        st, _, _ = self.sup.request("GET", "/v1/sandboxes", token=False)
        self.assertEqual(st, 401)

    def test_isolation_of_ids_and_lists(self):
        st, a = self.create("alice")
        self.assertEqual(st, 201, a)
        st, b = self.create("bob")
        self.assertEqual(st, 201, b)
        self.assertIn(a["id"], self.ids("alice"))
        self.assertNotIn(b["id"], self.ids("alice"))
        self.assertIn(b["id"], self.ids("bob"))
        self.assertNotIn(a["id"], self.ids("bob"))
        self.assertTrue({a["id"], b["id"]} <= self.ids("admin"))
        # Bob on alice's sandbox: exactly what an unknown id gets.
        unknown = "sb-000000000000"
        for method, suffix, body in (("GET", "", None), ("DELETE", "", None),
                                     ("POST", "/exec", {"argv": ["true"]}),
                                     ("GET", "/files?path=/tmp/x", None),
                                     ("GET", "/processes", None)):
            got = self.req("bob", method, "/v1/sandboxes/%s%s" % (a["id"], suffix), body)
            ref = self.req("bob", method, "/v1/sandboxes/%s%s" % (unknown, suffix), body)
            self.assertEqual(got[0], 404, (method, suffix, got))
            self.assertEqual(ref[0], 404, (method, suffix, ref))
            self.assertEqual(got[2]["error"]["code"], ref[2]["error"]["code"])
            self.assertEqual(got[2]["error"]["message"].replace(a["id"], unknown),
                             ref[2]["error"]["message"], (method, suffix))
        # Still alice's, still running.
        st, _, v = self.req("alice", "GET", "/v1/sandboxes/%s" % a["id"])
        self.assertEqual((st, v["state"]), (200, "running"))
        st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % a["id"],
                            {"argv": ["echo", "mine"]})
        self.assertEqual((st, r["stdout"]), (200, "mine\n"))
        # The admin sees and deletes anyone's.
        st, _, v = self.req("admin", "GET", "/v1/sandboxes/%s" % b["id"])
        self.assertEqual(st, 200, v)
        st, _, _ = self.req("admin", "DELETE", "/v1/sandboxes/%s" % b["id"])
        self.assertEqual(st, 204)
        self.assertNotIn(b["id"], self.ids("bob"))

    def test_tenant_settings(self):
        # alice: default memory 128M (hers), the rest the supervisor's;
        # a timeout over her 600 s is 400, none is clamped to it.
        st, a = self.create("alice")
        self.assertEqual(st, 201, a)
        self.assertEqual(a["resources"]["memory"], 128 * MB)
        self.assertEqual(a["resources"]["disk"], 256 * MB)
        self.assertEqual(a["resources"]["cpus"], 0.5)
        c = time.strptime(a["created_at"], "%Y-%m-%dT%H:%M:%SZ")
        e = time.strptime(a["expires_at"], "%Y-%m-%dT%H:%M:%SZ")
        self.assertEqual(time.mktime(e) - time.mktime(c), 600)
        st, body = self.create("alice", timeout=601)
        self.assertEqual(st, 400, body)
        self.assertIn("600", body["error"]["message"])
        st, body = self.create("alice", image="/srv/other")
        self.assertEqual(st, 403, body)
        self.assertIn("image", body["error"]["message"])
        # Files: alice's own paths (/workspace read-only), bob the node's.
        st, _, body = self.req("alice", "PUT", "/v1/sandboxes/%s/files?path=/workspace/x" % a["id"],
                               b"data")
        self.assertEqual(st, 403, body)
        self.assertIn("read-only", body["error"]["message"])
        st, _, body = self.req("alice", "GET", "/v1/sandboxes/%s/fs/stat?path=/tmp" % a["id"])
        self.assertEqual(st, 403, body)
        st, _, body = self.req("alice", "GET", "/v1/sandboxes/%s/fs/stat?path=/workspace" % a["id"])
        self.assertEqual(st, 200, body)
        # Root: bob may, alice may not.
        st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % a["id"],
                            {"argv": ["id", "-u"], "user": "root"})
        self.assertEqual(st, 403, r)
        st, b = self.create("bob")
        self.assertEqual(st, 201, b)
        self.assertEqual(b["resources"]["memory"], 256 * MB)
        st, _, body = self.req("bob", "PUT", "/v1/sandboxes/%s/files?path=/workspace/x" % b["id"],
                               b"data")
        self.assertIn(st, (200, 201), body)
        st, _, r = self.req("bob", "POST", "/v1/sandboxes/%s/exec" % b["id"],
                            {"argv": ["id", "-u"], "user": "root"})
        self.assertEqual((st, r.get("stdout")), (200, "0\n"), r)

    def test_quota(self):
        # alice: 2 sandboxes, 600M of memory.
        st, a = self.create("alice", resources={"memory": "256M"})
        self.assertEqual(st, 201, a)
        st, body = self.create("alice", resources={"memory": "512M"})
        self.assertEqual(st, 429, body)
        self.assertEqual(body["error"]["code"], "quota_exceeded")
        self.assertEqual(body["error"]["message"],
                         "tenant alice is over its quota of memory: it holds 256M, asks 512M "
                         "more, 168M over its 600M")
        st, b = self.create("alice", resources={"memory": "256M"})
        self.assertEqual(st, 201, b)
        st, body = self.create("alice", resources={"memory": "64M"})
        self.assertEqual(st, 429, body)
        self.assertIn("quota of sandboxes: it holds 2, asks 1 more, 1 over its 2",
                      body["error"]["message"])
        # Bob is not bound by alice's.
        st, c = self.create("bob")
        self.assertEqual(st, 201, c)
        # A deleted sandbox gives its share back.
        st, _, _ = self.req("alice", "DELETE", "/v1/sandboxes/%s" % b["id"])
        self.assertEqual(st, 204)
        st, d = self.create("alice", resources={"memory": "256M"})
        self.assertEqual(st, 201, d)

    def create_waiting(self, who):
        """A create of who's in a thread, and whether it was seen waiting
        for a cold create; join the thread, then its answer is res[0]."""
        res = []
        t = threading.Thread(target=lambda: res.append(self.create(who)))
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and t.is_alive():
            st, _, p = self.req("admin", "GET", "/v1/pools")
            if sum(x["waiting"] for x in p["pools"]):
                return t, res, True
            time.sleep(0.005)
        return t, res, False

    def test_waiting_create_counts_for_its_tenant_only(self):
        # alice holds 1 of her 2; bob's create waits: alice's second is
        # hers to have (bob's waiting one is not counted against her).
        st, a1 = self.create("alice")
        self.assertEqual(st, 201, a1)
        t, res, seen = self.create_waiting("bob")
        st, a2 = self.create("alice")
        t.join()
        self.assertEqual(res[0][0], 201, res)
        if not seen:
            self.skipTest("the cold create ended before a waiting one could be seen")
        self.assertEqual(st, 201, a2)

    def test_waiting_create_is_counted(self):
        # alice's quota of 2: with one of hers listed and one waiting, a
        # third is refused while the second still waits.
        st, a1 = self.create("alice")
        self.assertEqual(st, 201, a1)
        t, res, seen = self.create_waiting("alice")
        third = self.create("alice") if seen else None
        t.join()
        self.assertEqual(res[0][0], 201, res)
        if third is None:
            self.skipTest("the cold create ended before a waiting one could be seen")
        self.assertEqual(third[0], 429, third)
        self.assertIn("quota of sandboxes: it holds 2", third[1]["error"]["message"])

    def test_zz_reload(self):
        st, b = self.create("bob")
        self.assertEqual(st, 201, b)
        st, _, _ = self.req("carol", "GET", "/v1/sandboxes")
        self.assertEqual(st, 401)
        # bob removed, carol added, alice's quota down to 1.
        log = self.reload(tenants_doc(quota_alice_sandboxes=1, with_bob=False, with_carol=True))
        self.assertIn("tenants: reloaded %s: 3 tenants" % self.file, log)
        st, _, _ = self.req("carol", "GET", "/v1/sandboxes")
        self.assertEqual(st, 200)
        st, _, _ = self.req("bob", "GET", "/v1/sandboxes")
        self.assertEqual(st, 401)
        # bob's sandbox runs on; the admin sees it, carol does not.
        st, _, v = self.req("admin", "GET", "/v1/sandboxes/%s" % b["id"])
        self.assertEqual((st, v.get("state")), (200, "running"), v)
        st, _, r = self.req("admin", "POST", "/v1/sandboxes/%s/exec" % b["id"],
                            {"argv": ["echo", "still"]})
        self.assertEqual((st, r.get("stdout")), (200, "still\n"), r)
        self.assertNotIn(b["id"], self.ids("carol"))
        st, a = self.create("alice")
        self.assertEqual(st, 201, a)
        st, body = self.create("alice")
        self.assertEqual(st, 429, body)
        # A bad file: refused, logged, the tenants in force stay.
        for bad in ("{\"tenants\": ", json.dumps({"tenants": {"x": {"tokens": ["plain"]}}})):
            log = self.reload(bad)
            self.assertIn("tenants: reload refused, the 3 tenants in force stay", log)
            st, _, _ = self.req("carol", "GET", "/v1/sandboxes")
            self.assertEqual(st, 200)
        self.assertIn("tenants.x.tokens[0]", log)
        self.assertTrue(self.sup.alive())
        self.reload(tenants_doc())

    def test_metrics(self):
        st, a = self.create("alice", resources={"memory": "256M"})
        self.assertEqual(st, 201, a)
        st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % a["id"],
                            {"argv": ["echo", "hi"]})
        self.assertEqual(st, 200, r)
        self.create("alice", resources={"memory": "1G"})  # over: a refusal
        st, hdrs, body = self.req("alice", "GET", "/metrics")
        self.assertEqual(st, 403, body)
        st, hdrs, text = self.req("admin", "GET", "/metrics")
        self.assertEqual(st, 200, text)
        self.assertTrue(hdrs["content-type"].startswith("text/plain; version=0.0.4"), hdrs)
        text = text.decode()
        check = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        series = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                series[k] = float(v)
        self.assertGreaterEqual(series['sbx_tenant_sandboxes{tenant="alice"}'], 1)
        self.assertEqual(series['sbx_tenant_quota_sandboxes{tenant="alice"}'], 2)
        self.assertGreaterEqual(series['sbx_tenant_memory_limit_bytes{tenant="alice"}'], 256 * MB)
        self.assertGreater(series['sbx_tenant_memory_bytes{tenant="alice"}'], 0)
        self.assertGreaterEqual(series['sbx_quota_refusals_total{tenant="alice",resource="memory"}'], 1)
        self.assertGreaterEqual(series['sbx_execs_total{result="exited"}'], 1)
        self.assertGreaterEqual(series['sbx_exec_duration_seconds_count'], 1)
        self.assertGreaterEqual(series['sbx_cold_create_seconds_count{image="host",isolation="runc"}'], 1)
        self.assertGreaterEqual(series['sbx_sandboxes{state="running",image="host",isolation="runc"}'], 1)
        self.assertGreaterEqual(series['sbx_agent_bytes_total{direction="from_agent"}'], 3)
        self.assertGreaterEqual(series['sbx_http_requests_total{route="POST sandboxes",status="201"}'], 1)
        self.assertGreaterEqual(series['sbx_http_requests_total{route="POST sandboxes",status="429"}'], 1)
        # The Grafana dashboard asks only for series this supervisor has.
        families = {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")}
        dash = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                            "node-supervisor", "grafana", "sbx-node.json")
        with open(dash) as f:
            exprs = [t["expr"] for p in json.load(f)["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 20)
        for e in exprs:
            for name in re.findall(r"\bsbx_[a-z_]+", e):
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                self.assertIn(base, families, e)
        # The node-local listener: no token, only /metrics.
        c = http.client.HTTPConnection("127.0.0.1", self.sup.metrics_port, timeout=30)
        c.request("GET", "/metrics")
        resp = c.getresponse()
        body = resp.read().decode()
        c.close()
        self.assertEqual(resp.status, 200)
        self.assertIn('sbx_tenant_sandboxes{tenant="alice"}', body)
        c = http.client.HTTPConnection("127.0.0.1", self.sup.metrics_port, timeout=30)
        c.request("GET", "/v1/sandboxes")
        resp = c.getresponse()
        resp.read()
        c.close()
        self.assertEqual(resp.status, 404)


if __name__ == "__main__":
    unittest.main(verbosity=2)

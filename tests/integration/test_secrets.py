"""Secrets against a real supervisor, real runc sandboxes and real HTTP:
a tenant's secrets are set, listed (names, sizes, dates) and deleted, and
no answer of any route, the log, /metrics or the catalog's files ever
holds a value; bad names, bodies and sizes are 400/413 whose messages do
not quote what was sent; a sandbox created with "secrets" has the values
as variables of its commands while its views show names only; a snapshot's
restore and a fork have the env without them; the secrets come back after
a SIGKILL of the supervisor (the catalog keeps the names, the key file the
key); a deleted secret is refused to the next create; another tenant
neither sees nor uses them; a snapshot's archive holds no value; a sandbox
handed to the next tenant after a reset (--pool-reuse) holds none, in its
commands' environment or any process's; secrets given as files
("secret_files") are read-only files of /run/secrets for the sandbox user
that no path of the host, no snapshot, restore, fork or next tenant holds,
and that outlive a supervisor's SIGKILL; a supervisor without
--secrets-key refuses them clearly, and one whose key is inside its state
folder does not start.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import glob
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, remove_everything_under, stop_clean  # noqa: E402

from test_restart import TOK, as_  # noqa: E402  (admin, alice, bob)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

# values no other text of a run could hold by chance
V1 = "sk-live-" + hashlib.sha256(b"first" + os.urandom(8)).hexdigest()[:32]
V2 = "ghp_" + hashlib.sha256(b"second" + os.urandom(8)).hexdigest()[:36]
V3 = "rotated-" + hashlib.sha256(b"third" + os.urandom(8)).hexdigest()[:24]
VALUES = (V1, V2, V3)


def tenants_doc():
    def h(t):
        return "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    return {"tenants": {name: {"tokens": [h(TOK[name])]} for name in ("admin", "alice", "bob")}}


class Secrets(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sbx-it-secrets-")
        self.state = os.path.join(self.root, "state")
        self.key = os.path.join(self.root, "keys", "secrets.key")
        os.makedirs(os.path.dirname(self.key))
        self.tenants = os.path.join(self.root, "tenants.json")
        with open(self.tenants, "w") as f:
            json.dump(tenants_doc(), f)
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(remove_everything_under, self.state)
        self.answers = []  # every answer's bytes, searched for values at the end

    def new(self, key=True, pool_size=1, extra=()):
        # debug: the most the supervisor ever writes to its log
        extra = ["--tenants", self.tenants, "--log-level", "debug"] + list(extra) + (
            ["--secrets-key", self.key] if key else [])
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=pool_size, token=TOK["admin"],
                       extra=extra)
        self.addCleanup(s.cleanup)
        return s.start()

    def req(self, s, method, path, body=None, who="alice", expect=None):
        st, h, b = s.request(method, path, body, token=as_(who))
        # an exec's output is what the sandbox printed: its own echo of a
        # value it was given is no leak; every other answer is searched
        if not path.endswith("/exec"):
            self.answers.append(json.dumps(b) if isinstance(b, (dict, list)) else repr(b))
        if expect is not None:
            self.assertEqual(st, expect, b)
        return st, b

    def no_value_in(self, what, text):
        for v in VALUES:
            self.assertNotIn(v, text, "a secret's value in %s" % what)

    def no_value_in_log(self, s):
        with open(s.log_path, errors="replace") as f:
            self.no_value_in("the log", f.read())

    def catalog_bytes(self):
        data = b""
        for p in glob.glob(os.path.join(self.state, "catalog.db*")):
            with open(p, "rb") as f:
                data += f.read()
        return data

    def test_secrets(self):
        s = self.new()
        # the key: made at the first start, 0600, 64 hex characters
        st_key = os.stat(self.key)
        self.assertEqual(stat.S_IMODE(st_key.st_mode), 0o600)
        with open(self.key) as f:
            self.assertRegex(f.read(), r"^[0-9a-f]{64}\n?$")

        # ---- set, list, replace ----
        st, b = self.req(s, "PUT", "/v1/secrets/openai", {"value": V1}, expect=201)
        self.assertEqual(set(b), {"name", "size", "created_at", "updated_at"})
        self.assertEqual((b["name"], b["size"]), ("openai", len(V1)))
        made = b["created_at"]
        time.sleep(1.1)
        st, b = self.req(s, "PUT", "/v1/secrets/openai", {"value": V2}, expect=200)
        self.assertEqual((b["size"], b["created_at"]), (len(V2), made))
        self.assertGreater(b["updated_at"], made)
        self.req(s, "PUT", "/v1/secrets/gh.token-2", {"value": V3}, expect=201)
        self.req(s, "PUT", "/v1/secrets/openai", {"value": "bob's own"}, who="bob", expect=201)
        st, b = self.req(s, "GET", "/v1/secrets", expect=200)
        self.assertEqual([(x["name"], x["size"]) for x in b["secrets"]],
                         [("gh.token-2", len(V3)), ("openai", len(V2))])
        st, b = self.req(s, "GET", "/v1/secrets", who="bob", expect=200)
        self.assertEqual([x["name"] for x in b["secrets"]], ["openai"])
        st, b = self.req(s, "GET", "/v1/secrets", who="admin", expect=200)
        self.assertEqual(sorted((x["tenant"], x["name"]) for x in b["secrets"]),
                         [("alice", "gh.token-2"), ("alice", "openai"), ("bob", "openai")])

        # ---- bad input: never quoted back ----
        for path, body, status in [
            ("/v1/secrets/-bad", {"value": V1}, 400),
            ("/v1/secrets/a%2Fb", {"value": V1}, 400),
            ("/v1/secrets/" + "a" * 65, {"value": V1}, 400),
            ("/v1/secrets/x", {"value": V1, "other": 1}, 400),
            ("/v1/secrets/x", {"value": 7}, 400),
            ("/v1/secrets/x", {"value": ""}, 400),
            ("/v1/secrets/x", {"value": V1 + "\u0000"}, 400),
            ("/v1/secrets/x", '{"value":"%s' % V1, 400),      # cut short
            ("/v1/secrets/x", '{"value":%s}' % V1, 400),      # not a string
            ("/v1/secrets/x", {"value": "x" * 16385}, 413),
        ]:
            st, b = self.req(s, "PUT", path, body)
            self.assertEqual(st, status, (path, b))
            self.assertIn("message", b["error"])
            self.no_value_in("an error", json.dumps(b))
        self.req(s, "PUT", "/v1/secrets/x", {"value": "x" * 16384}, expect=201)
        self.req(s, "DELETE", "/v1/secrets/x", expect=204)
        self.req(s, "DELETE", "/v1/secrets/x", expect=404)

        # ---- a sandbox given secrets ----
        s.wait_ready()
        st, sb = self.req(s, "POST", "/v1/sandboxes", {
            "env": {"PLAIN": "p"}, "secrets": {"OPENAI_API_KEY": "openai", "GH": "gh.token-2"}},
            expect=201)
        sid = sb["id"]
        self.assertEqual(sorted((x["env"], x["name"]) for x in sb["secrets"]),
                         [("GH", "gh.token-2"), ("OPENAI_API_KEY", "openai")])
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid,
                         {"cmd": "echo $OPENAI_API_KEY; echo $GH; echo $PLAIN"}, expect=200)
        self.assertEqual(r["stdout"].split(), [V2, V3, "p"])
        # an exec's own env wins, as over "env"
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid,
                         {"cmd": "echo $GH", "env": {"GH": "mine"}}, expect=200)
        self.assertEqual(r["stdout"], "mine\n")
        # the views: names only
        for path in ("/v1/sandboxes/" + sid, "/v1/sandboxes"):
            st, b = self.req(s, "GET", path, expect=200)
            self.assertIn("gh.token-2", json.dumps(b))
        self.req(s, "GET", "/v1/sandboxes/" + sid, who="admin", expect=200)
        # the rules of a create's "secrets"
        for body in [{"secrets": {"K": "nope"}},
                     {"secrets": {"OPENAI": "openai"}, "env": {"OPENAI": "x"}},
                     {"secrets": {"1BAD": "openai"}},
                     {"secrets": {"A-B": "openai"}},
                     {"secrets": {"K": "bad name"}},
                     {"secrets": ["openai"]},
                     {"secrets": {"K": 1}}]:
            st, b = self.req(s, "POST", "/v1/sandboxes", body)
            self.assertEqual(st, 400, (body, b))
        st, b = self.req(s, "POST", "/v1/sandboxes", {"secrets": {"K": "nope"}})
        self.assertIn("nope", b["error"]["message"])
        # another tenant's secret is not bob's: his own of that name is used
        st, sbb = self.req(s, "POST", "/v1/sandboxes", {"secrets": {"K": "gh.token-2"}}, who="bob")
        self.assertEqual(st, 400, sbb)
        st, sbb = self.req(s, "POST", "/v1/sandboxes", {"secrets": {"K": "openai"}}, who="bob",
                           expect=201)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sbb["id"], {"cmd": "echo $K"},
                         who="bob", expect=200)
        self.assertEqual(r["stdout"], "bob's own\n")
        self.req(s, "DELETE", "/v1/sandboxes/" + sbb["id"], who="bob", expect=204)

        # ---- snapshot, restore and fork: the env without the secrets ----
        st, snap = self.req(s, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "s"},
                            expect=201)
        # its archive, unpacked: no value (the sandbox wrote none to its files)
        arc = os.path.join(self.state, "snapshots", snap["id"] + ".tar.zst")
        tar = subprocess.run(["zstd", "-q", "-d", "-c", arc], capture_output=True, check=True,
                             timeout=60).stdout
        self.assertGreater(len(tar), 0)
        for v in VALUES:
            self.assertNotIn(v.encode(), tar)
        st, rs = self.req(s, "POST", "/v1/sandboxes", {"snapshot": snap["id"]}, expect=201)
        self.assertNotIn("secrets", rs)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % rs["id"],
                         {"cmd": "echo [$OPENAI_API_KEY$GH]"}, expect=200)
        self.assertEqual(r["stdout"], "[]\n")
        self.req(s, "DELETE", "/v1/sandboxes/" + rs["id"], expect=204)
        st, fk = self.req(s, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, expect=201)
        fid = fk["sandboxes"][0]["id"]
        self.assertNotIn("secrets", fk["sandboxes"][0])
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % fid,
                         {"cmd": "echo [$OPENAI_API_KEY$GH] $PLAIN"}, expect=200)
        self.assertEqual(r["stdout"], "[] p\n")
        self.req(s, "DELETE", "/v1/sandboxes/" + fid, expect=204)
        self.req(s, "DELETE", "/v1/snapshots/" + snap["id"], expect=204)

        # ---- nowhere else: metrics, the catalog's files ----
        st, _, m = s.request("GET", "/metrics")
        self.assertEqual(st, 200)
        self.no_value_in("/metrics", m.decode(errors="replace"))
        cat = self.catalog_bytes()
        self.assertIn(b"gh.token-2", cat)
        for v in VALUES:
            self.assertNotIn(v.encode(), cat)

        # ---- a SIGKILL: the sandbox keeps its secrets (names in the
        # catalog, values opened again with the key) ----
        s.signal(signal.SIGKILL)
        s.wait(30)
        self.no_value_in_log(s)
        s2 = self.new()
        deadline = time.monotonic() + 20
        while self.req(s2, "GET", "/v1/sandboxes/" + sid)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        st, b = self.req(s2, "GET", "/v1/sandboxes/" + sid, expect=200)
        self.assertEqual(len(b["secrets"]), 2)
        st, r = self.req(s2, "POST", "/v1/sandboxes/%s/exec" % sid,
                         {"cmd": "echo $OPENAI_API_KEY $GH $PLAIN"}, expect=200)
        self.assertEqual(r["stdout"].split(), [V2, V3, "p"])

        # ---- deleted: the next create is refused; the running one keeps it ----
        self.req(s2, "DELETE", "/v1/secrets/gh.token-2", expect=204)
        st, b = self.req(s2, "POST", "/v1/sandboxes", {"secrets": {"GH": "gh.token-2"}})
        self.assertEqual(st, 400, b)
        st, r = self.req(s2, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "echo $GH"}, expect=200)
        self.assertEqual(r["stdout"], V3 + "\n")
        self.req(s2, "DELETE", "/v1/sandboxes/" + sid, expect=204)
        st, _, m = s2.request("GET", "/metrics")
        self.no_value_in("/metrics", m.decode(errors="replace"))
        stop_clean(s2)
        self.no_value_in_log(s2)
        for a in self.answers:
            self.no_value_in("an answer", a)

        # ---- without --secrets-key: refused, saying how ----
        s3 = self.new(key=False)
        st, b = self.req(s3, "GET", "/v1/secrets")
        self.assertEqual((st, b["error"]["code"]), (501, "not_implemented"), b)
        self.assertIn("--secrets-key", b["error"]["message"])
        self.assertEqual(self.req(s3, "PUT", "/v1/secrets/openai", {"value": "v"})[0], 501)
        st, b = self.req(s3, "POST", "/v1/sandboxes", {"secrets": {"K": "openai"}})
        self.assertEqual(st, 400, b)
        self.assertIn("--secrets-key", b["error"]["message"])
        stop_clean(s3)

    def test_reused_sandbox_holds_none(self):
        # --pool-reuse: alice's sandbox, given a secret and a process that
        # outlives its exec, is reset and handed to bob; he finds no value
        s = self.new(extra=["--pool-reuse"])
        s.wait_ready()
        self.req(s, "PUT", "/v1/secrets/openai", {"value": V1}, expect=201)
        st, sb = self.req(s, "POST", "/v1/sandboxes", {"secrets": {"KEY": "openai"}, "timeout": 600},
                          expect=201)
        sid = sb["id"]
        self.req(s, "POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 1007"}, expect=201)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid,
                         {"cmd": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' |"
                                 " grep -c '^KEY='"}, expect=200)
        self.assertNotEqual(r["stdout"].strip(), "0", r)
        self.req(s, "DELETE", "/v1/sandboxes/" + sid, expect=204)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(s.log_path, errors="replace") as f:
                if "sandbox %s: reset and checked" % sid in f.read():
                    break
            time.sleep(0.1)
        got = []
        for _ in range(3):
            st, b = self.req(s, "POST", "/v1/sandboxes", {"timeout": 600}, who="bob", expect=201)
            got.append(b["id"])
            if b["id"] == sid:
                break
        self.assertEqual(got[-1], sid, "sandbox %s never handed out again: %r" % (sid, got))
        st, b = self.req(s, "GET", "/v1/sandboxes/" + sid, who="bob", expect=200)
        self.assertNotIn("secrets", b)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid, {
            "cmd": "env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'"},
            who="bob", expect=200)
        self.assertNotIn("KEY=", r["stdout"])
        self.no_value_in("the next tenant's sandbox", r["stdout"] + r["stderr"])
        for x in got:
            self.req(s, "DELETE", "/v1/sandboxes/" + x, who="bob", expect=204)
        stop_clean(s)
        self.no_value_in_log(s)
        for a in self.answers:
            self.no_value_in("an answer", a)

    def test_secret_files(self):
        # "secret_files": read-only files of /run/secrets on a tmpfs of the
        # container's own; no path of the host, no snapshot, fork or next
        # tenant holds them; gVisor refused clearly
        s = self.new(extra=["--pool-reuse"])
        s.wait_ready()
        self.req(s, "PUT", "/v1/secrets/openai", {"value": V1}, expect=201)
        self.req(s, "PUT", "/v1/secrets/gh", {"value": V3}, expect=201)
        for bad, why in [({"../x": "openai"}, "file"), ({"a/b": "openai"}, "file"),
                         ({"..": "openai"}, "file"), ({"k": "no-such"}, "no-such"),
                         ({"k": 7}, "secret's name")]:
            st, b = self.req(s, "POST", "/v1/sandboxes", {"secret_files": bad})
            self.assertEqual(st, 400, (bad, b))
            self.assertIn(why, b["error"]["message"])
        st, b = self.req(s, "POST", "/v1/sandboxes", {"secret_files": {"k": "openai"},
                                                        "isolation": "gvisor"})
        self.assertEqual(st, 400, b)
        st, sb = self.req(s, "POST", "/v1/sandboxes", {
            "secret_files": {"openai.key": "openai", "gh": "gh"}, "secrets": {"GH": "gh"},
            "timeout": 600}, expect=201)
        sid = sb["id"]
        self.assertEqual(sorted((x["name"], x.get("file") or x.get("env")) for x in sb["secrets"]),
                         [("gh", "/run/secrets/gh"), ("gh", "GH"), ("openai", "/run/secrets/openai.key")])
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid, {
            "cmd": "cat /run/secrets/openai.key; echo; stat -c '%a %U' /run/secrets/openai.key;"
                   " echo $GH; echo x > /run/secrets/openai.key 2>/dev/null || echo ro;"
                   " rm /run/secrets/gh 2>/dev/null || echo kept; id -un"}, expect=200)
        self.assertEqual(r["stdout"].split("\n")[:6], [V1, "400 sandbox", V3, "ro", "kept", "sandbox"],
                         r)
        # nothing of the host holds a value: no mount, no file below the
        # state folder
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn("/run/secrets", f.read())
        for root, _, names in os.walk(self.state):
            for n in names:
                p = os.path.join(root, n)
                if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) < (64 << 20):
                    with open(p, "rb") as f:
                        data = f.read()
                    self.assertNotIn(V1.encode(), data, p)
        # a snapshot, its restore, a fork: no file, no value
        st, snap = self.req(s, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "f"},
                            expect=201)
        arc = os.path.join(self.state, "snapshots", snap["id"] + ".tar.zst")
        tar = subprocess.run(["zstd", "-q", "-d", "-c", arc], capture_output=True, check=True,
                             timeout=60).stdout
        self.assertNotIn(V1.encode(), tar)
        st, rs = self.req(s, "POST", "/v1/sandboxes", {"snapshot": snap["id"]}, expect=201)
        st, fk = self.req(s, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, expect=201)
        for other in (rs["id"], fk["sandboxes"][0]["id"]):
            st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % other,
                             {"cmd": "cat /run/secrets/* 2>/dev/null; echo end"}, expect=200)
            self.assertEqual(r["stdout"], "end\n", other)
            self.req(s, "DELETE", "/v1/sandboxes/" + other, expect=204)
        self.req(s, "DELETE", "/v1/snapshots/" + snap["id"], expect=204)
        # a SIGKILL: the files stay (the container's own mount), the view
        # names them
        s.signal(signal.SIGKILL)
        s.wait(30)
        s = self.new(extra=["--pool-reuse"])
        deadline = time.monotonic() + 20
        while self.req(s, "GET", "/v1/sandboxes/" + sid)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        st, b = self.req(s, "GET", "/v1/sandboxes/" + sid, expect=200)
        self.assertEqual(len(b["secrets"]), 3, b)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % sid,
                         {"cmd": "cat /run/secrets/gh"}, expect=200)
        self.assertEqual(r["stdout"], V3)
        # deleted: never reused (it had files), so bob cannot get it
        self.req(s, "DELETE", "/v1/sandboxes/" + sid, expect=204)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(s.log_path, errors="replace") as f:
                log = f.read()
            if "sandbox %s: destroyed" % sid in log or "sandbox %s: reset" % sid in log:
                break
            time.sleep(0.1)
        self.assertNotIn("sandbox %s: reset" % sid, log)
        st, b = self.req(s, "POST", "/v1/sandboxes", {"timeout": 600}, who="bob", expect=201)
        self.assertNotEqual(b["id"], sid)
        st, r = self.req(s, "POST", "/v1/sandboxes/%s/exec" % b["id"],
                         {"cmd": "cat /run/secrets/* 2>/dev/null; echo end"}, who="bob", expect=200)
        self.assertEqual(r["stdout"], "end\n")
        self.req(s, "DELETE", "/v1/sandboxes/" + b["id"], who="bob", expect=204)
        stop_clean(s)
        self.no_value_in_log(s)
        for a in self.answers:
            self.no_value_in("an answer", a)

    def test_key_refused(self):
        # inside the state folder: no start
        os.makedirs(self.state, exist_ok=True)
        inside = os.path.join(self.state, "k")
        p = subprocess.run([SUP, "--state-dir", self.state, "--listen", "127.0.0.1:0",
                            "--agent", AGENT, "--pool-size", "0", "--secrets-key", inside],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("inside --state-dir", p.stderr + p.stdout)
        self.assertFalse(os.path.exists(inside))
        # readable by others: no start, naming the fix
        with open(self.key, "w") as f:
            f.write("ab" * 32 + "\n")
        os.chmod(self.key, 0o644)
        p = subprocess.run([SUP, "--state-dir", self.state, "--listen", "127.0.0.1:0",
                            "--agent", AGENT, "--pool-size", "0", "--secrets-key", self.key],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("chmod 600", p.stderr + p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The OpenSandbox compatibility layer (/opensandbox/...) through a real
sandbox-supervisor and real runc sandboxes: OpenSandbox's own npm SDK
(@alibaba-group/opensandbox, pinned in tests/opensandbox/, installed by
scripts/install-npm-pinned) runs its flows through its public API
(tests/opensandbox/sdk_flows.mjs), unchanged but for its domain; and the
wire format it parses is checked byte for byte here with Python's stdlib
client: the OPEN-SANDBOX-API-KEY header as the token, flat {"code",
"message"} errors, the command stream as one bare JSON object per event
followed by a blank line, their snapshot calls onto sbx's snapshots,
files/replace and metrics onto sbx's own operations and figures, their
signed endpoints as sbx's signed port path (fetched with no credential
header; tampered, expired and execd's refused), and their metadata kept
across a restart of the supervisor (SIGKILL: the catalog's row), also
when the state folder is one a schema-8 supervisor left (its osbx_kept
rows upgraded to kept records). Every sandbox is removed at the end, also when a test
fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, remove_everything_under, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
HERE = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.normpath(os.path.join(HERE, "..", "opensandbox"))


class OpenSandbox(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=2)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def tearDown(self):
        st, _, body = self.sup.request("GET", "/v1/sandboxes")
        for sb in body.get("sandboxes", []):
            self.sup.request("DELETE", "/v1/sandboxes/" + sb["id"])

    def key(self):
        return {"OPEN-SANDBOX-API-KEY": self.sup.token}

    def create(self, **kw):
        body = {"image": {"uri": "host"}, "entrypoint": ["tail", "-f", "/dev/null"],
                "resourceLimits": {"cpu": "250m", "memory": "256Mi"}, "timeout": 120}
        body.update(kw)
        return self.sup.request("POST", "/opensandbox/v1/sandboxes", body, token=False,
                                headers=self.key())

    def test_sdk_flows(self):
        if not shutil.which("node") or not os.path.isdir(os.path.join(SDK_DIR, "node_modules")):
            self.fail("node or the pinned SDK is missing: run scripts/install-deps")
        env = dict(os.environ, SBX_DOMAIN="127.0.0.1:%d/opensandbox" % self.sup.port,
                   SBX_TOKEN=self.sup.token, SBX_IMAGE="host")
        p = subprocess.run(["node", os.path.join(SDK_DIR, "sdk_flows.mjs")], cwd=SDK_DIR, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        out = p.stdout.decode(errors="replace")
        print(out)
        self.assertEqual(p.returncode, 0, out + "\n" + self.sup.log())
        self.assertIn("all passed", out)

    def test_create_shape_and_limits(self):
        st, hdrs, sb = self.create(metadata={"a": "b"}, env={"K": "V"})
        self.assertEqual(st, 202, sb)
        self.assertEqual(sb["status"]["state"], "Running")
        self.assertEqual(sb["metadata"], {"a": "b"})
        self.assertEqual(sb["entrypoint"], ["tail", "-f", "/dev/null"])
        self.assertTrue(hdrs["location"].endswith("/opensandbox/v1/sandboxes/" + sb["id"]))
        # the limits asked for are sbx's limits in force
        st, _, own = self.sup.request("GET", "/v1/sandboxes/" + sb["id"])
        self.assertEqual(own["resources"]["cpus"], 0.25)
        self.assertEqual(own["resources"]["memory"], 256 << 20)

    def test_flat_errors_and_key_header(self):
        st, _, body = self.sup.request("GET", "/opensandbox/v1/sandboxes/sb-000000000000",
                                       token=False, headers=self.key())
        self.assertEqual(st, 404)
        self.assertEqual(sorted(body), ["code", "message"], body)
        st, _, body = self.sup.request("GET", "/opensandbox/v1/sandboxes", token=False,
                                       headers={"OPEN-SANDBOX-API-KEY": "wrong"})
        self.assertEqual(st, 401)
        self.assertEqual(sorted(body), ["code", "message"], body)
        st, _, body = self.sup.request("GET", "/opensandbox/v1/sandboxes", token=False)
        self.assertEqual(st, 401, body)
        # sbx's own API keeps its shape
        st, _, body = self.sup.request("GET", "/v1/sandboxes/sb-000000000000")
        self.assertEqual(st, 404)
        self.assertIn("error", body)
        for bad, why in (({"entrypoint": []}, 400),
                         ({"resourceLimits": {"cpu": "lots"}}, 400),
                         ({"resourceLimits": {"memory": "1Ti"}}, 400),
                         ({"snapshotId": "sn-000000000000"}, 400),  # and an image
                         ({"volumes": [{"name": "v", "host": {"path": "/"}, "mountPath": "/m"}]}, 400),
                         ({"nonsense": 1}, 400)):
            st, _, body = self.create(**bad)
            self.assertEqual(st, why, (bad, body))
            self.assertEqual(sorted(body), ["code", "message"], body)

    def test_signed_endpoint_wire(self):
        # The SDK's flows fetch one (test_sdk_flows); here what they cannot
        # send: expires out of shape or range, and the path form's proof
        # checked even beside a token.
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        ep = "/opensandbox/v1/sandboxes/%s/endpoints/8080?" % sb["id"]
        now = int(time.time())
        for q in ("expires=", "expires=abc", "expires=%2B60", "expires=0", "expires=%d" % (now - 1),
                  "expires=%d" % (now + 8 * 86400), "expires=99999999999999999999",
                  "use_server_proxy=true&expires=%d" % (now + 60)):
            st, _, body = self.sup.request("GET", ep + q, token=False, headers=self.key())
            self.assertEqual(st, 400, (q, body))
            self.assertEqual(sorted(body), ["code", "message"], body)
        st, _, body = self.sup.request("GET", ep + "expires=%d" % (now + 60), token=False,
                                       headers=self.key())
        self.assertEqual(st, 200, body)
        self.assertEqual(sorted(body), ["endpoint"], body)
        path = body["endpoint"][body["endpoint"].index("/"):]
        self.assertEqual(path.split("/")[:6], ["", "v1", "signed", sb["id"], "8080", str(now + 60)])
        # no credential: through to the port (nothing listens there), no cookie
        st, hdrs, body = self.sup.request("GET", path + "/x?a=1", token=False)
        self.assertEqual(st, 502, body)
        self.assertEqual(body["error"]["code"], "port_closed", body)
        self.assertNotIn("set-cookie", hdrs)
        # with the owner's key beside it: judged by the key, routed the same
        st, _, body = self.sup.request("GET", path + "/x", token=False, headers=self.key())
        self.assertEqual(st, 502, body)
        # a token beside a forged proof does not carry it
        forged = path[:-1] + ("1" if path.endswith("0") else "0")
        for token in (False, True):
            st, _, body = self.sup.request("GET", forged + "/x", token=token)
            self.assertEqual(st, 403, body)
            self.assertEqual(body["error"]["code"], "forbidden", body)

    def test_entrypoint_runs_in_the_background(self):
        st, _, sb = self.create(entrypoint=["/bin/sh", "-c", "echo started > /tmp/entry; exec sleep 300"])
        self.assertEqual(st, 202, sb)
        self.assertEqual(sb["entrypoint"][0], "/bin/sh")
        st, _, procs = self.sup.request("GET", "/v1/sandboxes/%s/processes?tag=entrypoint" % sb["id"])
        self.assertEqual(st, 200, procs)
        self.assertEqual(len(procs["processes"]), 1, procs)
        # started in the background: its first line may come a little later
        deadline = time.monotonic() + 10
        while True:
            st, _, out = self.sup.exec(sb["id"], argv=["cat", "/tmp/entry"])
            if out["stdout"] == "started\n" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(out["stdout"], "started\n", out)
        # the sandbox lives by its expiry, not by the process: one that
        # fails after it started leaves it Running, its exit code to see
        st, _, sb2 = self.create(entrypoint=["/no/such/binary"])
        self.assertEqual(st, 202, sb2)
        deadline = time.monotonic() + 10
        while True:
            st, _, procs = self.sup.request("GET", "/v1/sandboxes/%s/processes?tag=entrypoint" % sb2["id"])
            if procs["processes"][0]["state"] == "exited" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(procs["processes"][0].get("exit_code"), 127, procs)

    def osbx(self, method, path, body=None):
        return self.sup.request(method, "/opensandbox/v1" + path, body, token=False,
                                headers=self.key())

    def test_snapshots_onto_sbx_snapshots(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        st, _, r = self.sup.exec(sb["id"], cmd="echo one > /workspace/f")
        self.assertEqual(st, 200, r)
        st, _, snap = self.osbx("POST", "/sandboxes/%s/snapshots" % sb["id"], {"name": "wire"})
        self.assertEqual(st, 202, snap)
        self.assertEqual((snap["sandboxId"], snap["name"], snap["status"]["state"]),
                         (sb["id"], "wire", "Ready"))
        # the same snapshot as sbx's own routes show it
        st, _, own = self.sup.request("GET", "/v1/snapshots/" + snap["id"])
        self.assertEqual((st, own["sandbox"], own["name"]), (200, sb["id"], "wire"), own)
        st, _, anon = self.osbx("POST", "/sandboxes/%s/snapshots" % sb["id"])  # no body
        self.assertEqual(st, 202, anon)
        self.assertNotIn("name", anon)
        st, _, page = self.osbx("GET", "/snapshots?sandboxId=%s&pageSize=1&page=2" % sb["id"])
        self.assertEqual(st, 200, page)
        self.assertEqual([i["id"] for i in page["items"]], [anon["id"]])
        self.assertEqual((page["pagination"]["totalItems"], page["pagination"]["hasNextPage"]), (2, False))
        st, _, page = self.osbx("GET", "/snapshots?name=wire&state=Ready&state=Creating")
        self.assertEqual([i["id"] for i in page["items"]], [snap["id"]], page)
        st, _, page = self.osbx("GET", "/snapshots?state=Failed")
        self.assertEqual(page["items"], [], page)
        st, _, body = self.osbx("GET", "/snapshots?metadata=a%3Db")
        self.assertEqual((st, sorted(body)), (400, ["code", "message"]), body)
        # restore: a create with snapshotId alone
        st, _, r2 = self.osbx("POST", "/sandboxes", {"snapshotId": snap["id"], "timeout": 60,
                                                     "entrypoint": ["tail", "-f", "/dev/null"]})
        self.assertEqual(st, 202, r2)
        self.assertEqual(r2["snapshotId"], snap["id"])
        st, _, out = self.sup.exec(r2["id"], argv=["cat", "/workspace/f"])
        self.assertEqual(out["stdout"], "one\n", out)
        for sid in (snap["id"], anon["id"]):
            st, _, _ = self.osbx("DELETE", "/snapshots/" + sid)
            self.assertEqual(st, 204)
        st, _, body = self.osbx("GET", "/snapshots/" + snap["id"])
        self.assertEqual((st, sorted(body)), (404, ["code", "message"]), body)
        st, _, body = self.osbx("POST", "/sandboxes", {"snapshotId": snap["id"]})
        self.assertEqual(st, 404, body)
        st, _, body = self.osbx("POST", "/sandboxes/%s/snapshots" % sb["id"], {"name": 5})
        self.assertEqual(st, 400, body)

    def test_files_replace(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        sid = sb["id"]
        st, _, r = self.sup.exec(sid, cmd="printf 'a.b.a.b' > /workspace/r; chmod 600 /workspace/r; "
                                           "head -c 17000000 /dev/zero > /workspace/huge; mkdir /workspace/dir")
        self.assertEqual(st, 200, r)

        def replace(body, query=""):
            return self.sup.request("POST", "/opensandbox/execd/%s/files/replace%s" % (sid, query), body,
                                    token=False, headers=self.key())
        st, _, out = replace({"/workspace/r": {"old": "a.", "new": "XYZ"}}, "?verbose=true")
        self.assertEqual((st, out), (200, {"/workspace/r": {"replacedCount": 2}}), out)
        st, _, out = self.sup.exec(sid, cmd="cat /workspace/r; stat -c ' %a' /workspace/r")
        self.assertEqual(out["stdout"], "XYZb.XYZb 600\n", out)
        st, _, out = replace({"/workspace/r": {"old": "b", "new": ""}})
        self.assertEqual(st, 200, out)
        st, _, out = self.sup.exec(sid, argv=["cat", "/workspace/r"])
        self.assertEqual(out["stdout"], "XYZ.XYZ", out)
        for body, want in (({"/workspace/r": {"old": "", "new": "x"}}, 400),
                           ({"/workspace/r": {"old": "a"}}, 400),
                           ({}, 400),
                           ({"/workspace/dir": {"old": "a", "new": "b"}}, 400),
                           ({"/workspace/huge": {"old": "a", "new": "b"}}, 413),
                           ({"/workspace/nope": {"old": "a", "new": "b"}}, 404),
                           ({"/etc/passwd": {"old": "root", "new": "toor"}}, 403)):
            st, _, out = replace(body)
            self.assertEqual(st, want, (body, out))
            self.assertEqual(sorted(out), ["code", "message"], out)

    def test_metrics_from_sbx_usage(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        path = "/opensandbox/execd/%s/metrics" % sb["id"]
        st, _, m = self.sup.request("GET", path, token=False, headers=self.key())
        self.assertEqual(st, 200, m)
        self.assertEqual(sorted(m), ["cpu_count", "cpu_used_pct", "mem_total_mib", "mem_used_mib",
                                     "timestamp"])
        self.assertEqual((m["cpu_count"], m["mem_total_mib"]), (0.25, 256.0))
        self.assertTrue(0 < m["mem_used_mib"] < 256, m)
        self.assertLess(abs(m["timestamp"] - time.time() * 1000), 5000, m)
        st, _, own = self.sup.request("GET", "/v1/sandboxes/" + sb["id"])
        self.assertLess(abs(own["usage"]["memory_bytes"] / 1048576.0 - m["mem_used_mib"]), 16, (own, m))
        # a paused sandbox answers too (the agent is not asked)
        self.assertEqual(self.sup.request("POST", "/v1/sandboxes/%s/pause" % sb["id"])[0], 200)
        st, _, m2 = self.sup.request("GET", path, token=False, headers=self.key())
        self.assertEqual(st, 200, m2)
        # frozen: no CPU between two calls made while it stands (the first
        # call's figure still counts what ran before the pause)
        time.sleep(0.5)
        st, _, m2 = self.sup.request("GET", path, token=False, headers=self.key())
        self.assertEqual(st, 200, m2)
        self.assertLess(m2["cpu_used_pct"], 5, m2)
        st, _, body = self.sup.request("GET", "/opensandbox/execd/sb-000000000000/metrics",
                                       token=False, headers=self.key())
        self.assertEqual((st, sorted(body)), (404, ["code", "message"]), body)

    def test_metadata_kept_across_a_restart(self):
        self.metadata_across_a_restart(None)

    def test_metadata_kept_from_a_schema_8_state_dir(self):
        # what a supervisor before the catalog's step 9 left: the layer's
        # rows in osbx_kept (step 6's table), no kept table, user_version 8
        # (nor step 10's secrets)
        def as_schema_8(db):
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 10)
            db.executescript(
                "DROP TABLE secrets; ALTER TABLE sandboxes DROP COLUMN secrets;"
                "CREATE TABLE osbx_kept (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                " id TEXT NOT NULL UNIQUE REFERENCES sandboxes(id) ON DELETE CASCADE,"
                " tenant TEXT NOT NULL, kept TEXT NOT NULL);"
                "INSERT INTO osbx_kept (id, tenant, kept) SELECT key, tenant, CAST(value AS TEXT)"
                " FROM kept WHERE kind = 'opensandbox' ORDER BY seq;"
                "DROP TABLE kept; PRAGMA user_version = 8;")
            self.assertEqual(db.execute("SELECT COUNT(*) FROM osbx_kept").fetchone()[0], 1)
        self.metadata_across_a_restart(as_schema_8)

    def metadata_across_a_restart(self, rewrite):
        """An OpenSandbox sandbox's metadata, extensions and entrypoint back
        after a SIGKILL; rewrite(db), when given, changes the catalog's file
        between the two runs."""
        import sqlite3
        root = tempfile.mkdtemp(prefix="sbx-it-osbx-")
        state = os.path.join(root, "state")
        self.addCleanup(shutil.rmtree, root, True)
        self.addCleanup(remove_everything_under, state)

        def start():
            s = Supervisor(SUP, AGENT, state_dir=state, pool_size=0)
            self.addCleanup(s.cleanup)
            return s.start()
        s1 = start()
        key = {"OPEN-SANDBOX-API-KEY": s1.token}
        body = {"image": {"uri": "host"}, "timeout": 300, "metadata": {"team": "a", "gone": "x"},
                "extensions": {"e": "1"}, "entrypoint": ["/bin/sh", "-c", "exec sleep 600"]}
        st, _, sb = s1.request("POST", "/opensandbox/v1/sandboxes", body, token=False, headers=key)
        self.assertEqual(st, 202, sb)
        st, _, p = s1.request("PATCH", "/opensandbox/v1/sandboxes/%s/metadata" % sb["id"],
                              {"stage": "two", "gone": None}, token=False, headers=key)
        self.assertEqual((st, p["metadata"]), (200, {"team": "a", "stage": "two"}), p)
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        if rewrite:
            db = sqlite3.connect(os.path.join(state, "catalog.db"))
            try:
                rewrite(db)
                db.commit()
            finally:
                db.close()
        s2 = start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st, _, got = s2.request("GET", "/opensandbox/v1/sandboxes/" + sb["id"], token=False,
                                    headers=key)
            if st == 200:
                break
            time.sleep(0.05)
        self.assertEqual(st, 200, got)
        self.assertEqual(got["metadata"], {"team": "a", "stage": "two"})
        self.assertEqual(got["extensions"], {"e": "1"})
        self.assertEqual(got["entrypoint"], body["entrypoint"])
        if rewrite:  # upgraded: the row a kept record, step 6's table gone
            db = sqlite3.connect(os.path.join(state, "catalog.db"))
            try:
                self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 10)
                self.assertEqual(db.execute("SELECT key, sandbox FROM kept WHERE kind = 'opensandbox'")
                                 .fetchall(), [(sb["id"], sb["id"])])
                self.assertIsNone(db.execute("SELECT name FROM sqlite_master WHERE name = 'osbx_kept'")
                                  .fetchone())
            finally:
                db.close()
        st, _, lst = s2.request("GET", "/opensandbox/v1/sandboxes?metadata=stage%3Dtwo", token=False,
                                headers=key)
        self.assertEqual([i["id"] for i in lst["items"]], [sb["id"]], lst)
        # deleted: its row goes with it (a third start has nothing of it)
        st, _, _ = s2.request("DELETE", "/opensandbox/v1/sandboxes/" + sb["id"], token=False, headers=key)
        self.assertEqual(st, 204)
        stop_clean(s2)
        db = sqlite3.connect(os.path.join(state, "catalog.db"))
        try:
            self.assertEqual(db.execute("SELECT COUNT(*) FROM kept WHERE kind = 'opensandbox'").fetchone()[0], 0)
        finally:
            db.close()

    def test_command_stream_wire_format(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        c = self.sup.conn()
        c.request("POST", "/opensandbox/execd/%s/command" % sb["id"],
                  body=json.dumps({"command": "echo a; echo b >&2; exit 7"}),
                  headers=dict(self.key(), Accept="text/event-stream"))
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        raw = r.read().decode()
        c.close()
        self.assertTrue(raw.endswith("\n\n"), raw)
        events = [json.loads(chunk) for chunk in raw.split("\n\n") if chunk]
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "init", events)
        self.assertTrue(events[0]["text"], events)
        self.assertEqual(sorted(types[1:3]), ["stderr", "stdout"], events)
        self.assertEqual(events[-1]["type"], "error", events)
        self.assertEqual(events[-1]["error"]["evalue"], "7", events)
        for e in events:
            self.assertIsInstance(e["timestamp"], int)

    def events_of(self, r, until=None):
        """Bare JSON events ({...} and a blank line) read from response r
        until one of type until (None: the end of the body)."""
        buf, out = b"", []
        while True:
            while b"\n\n" in buf:
                chunk, buf = buf.split(b"\n\n", 1)
                out.append(json.loads(chunk))
                if until and out[-1].get("type") == until:
                    return out
            got = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not got:
                return out
            buf += got

    def session_run(self, sid, sess, command, conn=None, **kw):
        c = conn or self.sup.conn()
        c.request("POST", "/opensandbox/execd/%s/session/%s/run" % (sid, sess),
                  body=json.dumps(dict(kw, command=command)),
                  headers=dict(self.key(), Accept="text/event-stream"))
        return c, c.getresponse()

    def test_sessions_wire_and_bounds(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        sid = sb["id"]
        path = "/opensandbox/execd/%s/session" % sid
        st, _, body = self.sup.request("POST", path, token=False, headers=self.key())  # no body
        self.assertEqual(st, 200, body)
        sess = body["session_id"]
        c, r = self.session_run(sid, sess, "cd /tmp; X=1; printf 'a\\n\\nb'")
        self.assertEqual((r.status, r.getheader("content-type")), (200, "text/event-stream"))
        raw = r.read().decode()
        c.close()
        self.assertTrue(raw.endswith("\n\n"), raw)
        events = [json.loads(chunk) for chunk in raw.split("\n\n") if chunk]
        self.assertEqual([e["type"] for e in events], ["init", "stdout", "stdout", "execution_complete"], events)
        self.assertEqual((events[0]["text"], events[1]["text"], events[2]["text"]), (sess, "a", "b"))
        # the client goes mid-run: the command is interrupted (SIGINT), the
        # shell and its state stay, the session takes the next run
        c, r = self.session_run(sid, sess, "sleep 30; echo late")
        self.assertEqual(self.events_of(r, "init")[0]["text"], sess)
        c.close()
        deadline = time.monotonic() + 5
        while True:
            c, r = self.session_run(sid, sess, "echo $X $PWD")
            if r.status != 409 or time.monotonic() > deadline:
                break
            r.read()
            c.close()
            time.sleep(0.1)
        if r.status != 200:
            self.fail(r.read())
        events = self.events_of(r)
        c.close()
        self.assertEqual([e.get("text") for e in events if e["type"] == "stdout"], ["1 /tmp"], events)
        # at most 8 sessions per sandbox, each one shell (a tagged process)
        for _ in range(7):
            self.assertEqual(self.sup.request("POST", path, {}, token=False, headers=self.key())[0], 200)
        st, _, body = self.sup.request("POST", path, {"cwd": "/tmp"}, token=False, headers=self.key())
        self.assertEqual((st, sorted(body)), (409, ["code", "message"]), body)
        st, _, procs = self.sup.request("GET", "/v1/sandboxes/%s/processes?tag=opensandbox-session" % sid)
        self.assertEqual(len([p for p in procs["processes"] if p["state"] == "running"]), 8, procs)
        # an exit ends the shell, and so the session
        c, r = self.session_run(sid, sess, "exit 3")
        events = self.events_of(r)
        c.close()
        self.assertEqual((events[-1]["type"], events[-1]["error"]["evalue"]), ("error", "3"), events)
        c, r = self.session_run(sid, sess, "true")
        self.assertEqual(r.status, 404)
        self.assertEqual(sorted(json.loads(r.read())), ["code", "message"])
        c.close()
        for bad in ({}, {"command": ""}, {"command": "x", "timeout": -1}, {"command": "x", "nope": 1}):
            c, r = self.session_run(sid, sess, **bad) if "command" in bad else (None, None)
            if r is None:
                st, _, body = self.sup.request("POST", path + "/%s/run" % sess, bad, token=False,
                                               headers=self.key())
            else:
                st, body = r.status, json.loads(r.read())
                c.close()
            self.assertEqual(st, 400, (bad, body))
        st, _, body = self.sup.request("POST", path, {"cwd": 5}, token=False, headers=self.key())
        self.assertEqual(st, 400, body)

    def test_metrics_watch(self):
        st, _, sb = self.create()
        self.assertEqual(st, 202, sb)
        c = self.sup.conn()
        c.request("GET", "/opensandbox/execd/%s/metrics/watch" % sb["id"], headers=self.key())
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        t0 = time.monotonic()
        got = []
        buf = b""
        while len(got) < 3:
            buf += r.read1(65536)
            while b"\n\n" in buf:
                chunk, buf = buf.split(b"\n\n", 1)
                got.append((time.monotonic() - t0, json.loads(chunk)))
        c.close()
        for _, m in got:
            self.assertEqual(sorted(m), ["cpu_count", "cpu_used_pct", "mem_total_mib", "mem_used_mib",
                                         "timestamp"], m)
            self.assertEqual((m["cpu_count"], m["mem_total_mib"]), (0.25, 256.0))
        # the first at once, then one a second (the rate is bounded)
        self.assertLess(got[0][0], 0.5, got)
        self.assertGreater(got[2][1]["timestamp"] - got[0][1]["timestamp"], 1800, got)
        st, _, body = self.sup.request("GET", "/opensandbox/execd/sb-000000000000/metrics/watch",
                                       token=False, headers=self.key())
        self.assertEqual((st, sorted(body)), (404, ["code", "message"]), body)


if __name__ == "__main__":
    unittest.main(verbosity=2)

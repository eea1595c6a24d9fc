"""A guest that lies (SECURITY.md, "Node from sandbox"): a stand-in agent
the test writes in place of sandbox-agent (as test_agent_distrust.py does)
answers with a lie in one answer field at a time, each a field a route
reads outside the exec path that test_agent_distrust covers: a listing
entry climbing out of its folder (sbx's route and the OpenSandbox layer's
directories/list and files/search), a watch event naming "../" paths, a
process of a negative pid, a port list whose address has bytes no address
has (and one whose last byte ends the frame, for the bounds of its check),
a download longer than the length it announced, an exit code over 255.
Each lie is refused: the client gets 502 agent_error naming what the agent
did (or, once a download's head went out, a cut connection that never
carries more than announced), the sandbox is failed with the reason, no
path outside the folder reaches the client, and another sandbox still
answers. One supervisor, a pool of stand-ins; everything removed at the
end, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from sbx_harness import Supervisor, containers_under, rss_kb, small_asan_quarantine, stop_clean  # noqa: E402
from standin_agent import LISTEN, PRELUDE, launcher  # noqa: E402
from test_files_watch import Watch  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

# The stand-in (standin_agent.py's framing). It behaves until an exec of
# ["lie", MODE]; from then on the operation that MODE names answers with
# the lie.
STANDIN = PRELUDE + r'''
HELLO = pack({"t": "hello", "v": 1, "max_frame": 1 << 20, "max_streams": 1024,
              "window": 1 << 20, "caps": ["exec", "file", "fs", "fs.watch", "port", "proc"],
              "agent": "sandbox-agent/0.1.0-liar"})
STAT = {"type": "file", "size": 5, "mode": 0o644, "mtime_ns": 1700000000 * 10**9, "uid": 1000,
        "gid": 1000, "nlink": 1, "ino": 7}

def entry(path):
    return dict(STAT, path=path, name=path.rsplit("/", 1)[-1] or "x")

def end(s, sid, r):
    s.sendall(pack({"t": "end", "id": sid, "r": r}))

def serve(s):
    s.sendall(HELLO)
    mode = None
    for f in frames(s):
        t, sid, op, a = f.get("t"), f.get("id"), f.get("op"), f.get("a") or {}
        if t != "req":
            continue
        if op == "ping":
            end(s, sid, {})
        elif op == "exec":
            argv = a.get("argv") or []
            if argv[:1] == ["lie"]:
                mode = argv[1]
            elif argv[:1] == ["echo"]:
                s.sendall(pack({"t": "data", "id": sid, "ch": "stdout",
                                "d": (" ".join(argv[1:]) + "\n").encode()}))
            code = 300 if mode == "exit-300" and argv[:1] != ["lie"] else 0
            end(s, sid, {"exit_code": code, "signal": None, "timed_out": False, "duration_us": 5})
        elif op in ("fs.list", "fs.search"):
            rel = {"list-dotdot": "../../etc/shadow", "list-inner": "a/../../etc/shadow",
                   "list-abs": "/etc/passwd"}.get(mode, "ok.txt")
            end(s, sid, {"entries": [entry(rel)], "count": 1, "truncated": False})
        elif op == "fs.stat":
            end(s, sid, STAT)
        elif op == "fs.watch":
            s.sendall(pack({"t": "event", "id": sid, "a": {"type": "ready", "path": "", "dir": True}}))
            if mode == "watch-dotdot":
                s.sendall(pack({"t": "event", "id": sid,
                                "a": {"type": "create", "path": "../../etc/cron.d/x", "dir": False}}))
        elif op == "proc.list":
            pid = -5 if mode == "proc-neg" else 42
            end(s, sid, {"processes": [{"pid": pid, "tag": None, "state": "running",
                                         "started_ms": 1700000000000}]})
        elif op == "port.list":
            if mode == "port-bytes":
                end(s, sid, {"ports": [{"port": 8000, "addr": "1.2.3.4;x"}], "truncated": False})
            else:
                # the address is the frame's last bytes: a check that reads
                # past its length reads past the frame
                body = msgpack.packb({"t": "end", "id": sid, "r": {"truncated": False, "ports": [
                    {"port": 8000, "addr": "1111"}]}}, use_bin_type=True)
                s.sendall(struct.pack(">I", len(body)) + body)
        elif op == "file.read":
            s.sendall(pack({"t": "event", "id": sid, "a": dict(STAT, offset=0, length=5)}))
            n = 5 if mode != "read-long" else 300000
            for i in range(0, n, 65536):
                s.sendall(pack({"t": "data", "id": sid, "ch": "file", "d": b"x" * min(65536, n - i)}))
            s.sendall(pack({"t": "data", "id": sid, "ch": "file", "d": b"", "eof": True}))
            end(s, sid, {"bytes": n})
        else:
            s.sendall(pack({"t": "err", "id": sid, "code": "unknown_op", "msg": "liar"}))

''' + LISTEN


class GuestLies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, "/nonexistent", pool_size=2)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.agent = os.path.join(cls.sup.root, "liar-agent")
        with open(cls.sup.agent, "w") as f:
            f.write(launcher(STANDIN))
        os.chmod(cls.sup.agent, 0o755)
        cls.sup.extra += ["--agent-grace", "1"]
        cls.sup.start()
        cls.sup.wait_ready()
        cls.other = cls.sup.create(timeout=600)["id"]
        cls.rss0 = rss_kb(cls.sup.proc.pid)

    @classmethod
    def tearDownClass(cls):
        grown = (rss_kb(cls.sup.proc.pid) - cls.rss0) / 1024
        assert grown < 48, "supervisor RSS grew %.1f MiB" % grown
        stop_clean(cls.sup)

    def liar(self, mode):
        sid = self.sup.create(timeout=600)["id"]
        st, _, r = self.sup.exec(sid, argv=["lie", mode])
        self.assertEqual(st, 200, r)
        return sid

    def others_answer(self):
        st, _, r = self.sup.exec(self.other, argv=["echo", "still", "here"], timeout=5)
        self.assertEqual((st, r.get("stdout")), (200, "still here\n"), r)
        st, _, body = self.sup.request("GET", "/healthz", token=False)
        self.assertEqual(st, 200, body)

    def failed_with(self, sid, words):
        deadline = time.monotonic() + 15  # a loaded machine's room
        while True:
            st, _, v = self.sup.request("GET", "/v1/sandboxes/" + sid)
            if v.get("state") == "failed":
                self.assertIn(words, v["reason"])
                break
            self.assertLess(time.monotonic(), deadline, v)
            time.sleep(0.05)
        self.others_answer()
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 204, body)
        self.assertEqual([c for c, _ in containers_under(self.sup.state_dir) if c.endswith(sid)], [])

    def assert_agent_error(self, got, words):
        st, _, body = got
        self.assertEqual(st, 502, body)
        self.assertEqual(body["error"]["code"], "agent_error", body)
        self.assertIn(words, body["error"]["message"])
        self.assertNotIn("etc", json.dumps(body).replace(words, ""))

    def osbx(self, method, path):
        return self.sup.request(method, path, token=False,
                                headers={"OPEN-SANDBOX-API-KEY": self.sup.token})

    def osbx_error(self, got, words):
        """The OpenSandbox layer's flat error ({"code", "message"})."""
        st, _, body = got
        self.assertEqual(st, 502, body)
        self.assertIn(words, json.dumps(body))
        self.assertNotIn("/etc", json.dumps(body))

    # ---- listings ----

    def test_listing_entries_climbing_out(self):
        for mode in ("list-dotdot", "list-inner", "list-abs"):
            with self.subTest(mode, layer="sbx"):
                sid = self.liar(mode)
                self.assert_agent_error(self.sup.request(
                    "GET", "/v1/sandboxes/%s/fs/list?path=/workspace" % sid),
                    "a listing entry without a valid path")
                self.failed_with(sid, "a listing entry")
            for route in ("directories/list?path=/workspace", "files/search?path=/workspace&pattern=*"):
                with self.subTest(mode, layer="opensandbox", route=route):
                    sid = self.liar(mode)
                    self.osbx_error(self.osbx("GET", "/opensandbox/execd/%s/%s" % (sid, route)),
                                    "a listing entry without a valid path")
                    self.failed_with(sid, "a listing entry")
        # an honest answer renders below the folder
        sid = self.liar("none")
        st, _, body = self.osbx("GET", "/opensandbox/execd/%s/directories/list?path=/workspace" % sid)
        self.assertEqual((st, [e["path"] for e in body]), (200, ["/workspace/ok.txt"]), body)
        self.sup.request("DELETE", "/v1/sandboxes/" + sid)

    def test_watch_event_climbing_out(self):
        sid = self.liar("watch-dotdot")
        w = Watch(self.sup, sid, "/workspace")
        try:
            self.assertEqual(w.status, 200)
            seen = []
            while True:
                ev = w.next(10)
                if ev is None:
                    break
                seen.append(ev)
        finally:
            w.close()
        self.assertEqual(seen[0][0], "ready", seen)
        self.assertEqual(seen[-1][1]["error"]["code"], "agent_error", seen)
        self.assertIn("bad path", seen[-1][1]["error"]["message"])
        self.assertNotIn("cron", json.dumps(seen))
        self.failed_with(sid, "fs.watch")

    # ---- processes, ports, exec ----

    def test_process_of_a_negative_pid(self):
        sid = self.liar("proc-neg")
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s/processes" % sid)
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.failed_with(sid, "pid")

    def test_port_list_addresses(self):
        # the address at the very end of the frame: read within its length
        sid = self.liar("port-tail")
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s/ports" % sid)
        self.assertEqual((st, body), (200, {"ports": [{"port": 8000, "address": "1111"}]}))
        self.sup.request("DELETE", "/v1/sandboxes/" + sid)
        sid = self.liar("port-bytes")
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s/ports" % sid)
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.assertIn("is not {port, addr}", body["error"]["message"])
        self.failed_with(sid, "port.list")

    def test_exit_code_over_255(self):
        sid = self.liar("exit-300")
        st, _, body = self.sup.exec(sid, argv=["true"])
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.failed_with(sid, "exit_code")

    # ---- a download longer than announced ----

    def test_download_longer_than_announced(self):
        sid = self.liar("read-long")
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=10)
        try:
            s.sendall(("GET /v1/sandboxes/%s/files?path=/workspace/f HTTP/1.1\r\nHost: t\r\n"
                       "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" % (sid, self.sup.token)).encode())
            got = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        finally:
            s.close()
        head, _, body = got.partition(b"\r\n\r\n")
        status = int(head.split()[1])
        if status == 200:
            # the head went out with the length announced: never more than it
            self.assertIn(b"content-length: 5", head.lower())
            self.assertLessEqual(len(body), 5, (head, len(body)))
        else:
            self.assertEqual(status, 502, got[:300])
        self.failed_with(sid, "")


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

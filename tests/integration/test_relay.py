"""Every supervisor answers for every sandbox: three real supervisors as
three nodes on this machine (three state folders, three ports, --peer each
other, one cluster key, one tenants file), real runc sandboxes, real HTTP.
A sandbox made on n1 is used through n2: exec (captured and streamed as
SSE), a 64 MiB file up and down (sha256 checked, also by the sandbox), a
background process's output, a WebSocket terminal; the tenant's token is
checked by the owner. A create on n3 (pool size 0) lands on a node with
ready sandboxes. The relay door refuses a wrong or missing cluster key, a
relayed request is never relayed again, an id of an unknown node is 404.
Connections are kept alive: relayed requests on one client connection
stay on it, and n2 reuses its connection to n1 (its log says so). A kept
connection the owner drops when the next request comes (n4, whose way to
n1 passes a TCP forwarder that resets such a connection, as a restarted
peer does): an idempotent GET goes again on a new connection and is
answered, a POST is 502 and not sent twice.
GET /v1/sandboxes?scope=cluster through any node lists every node's.
n1 killed (SIGKILL): its sandboxes are 502 through n2 at once, and the
cluster-wide list names n1 as unanswered within its deadline; restarted
on the same state folder, they are served through n2 again. Everything
made is removed, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import asyncio
import base64
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from test_exec_stream import Stream  # noqa: E402
from test_processes import Output  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20
BIG_MB = 64
NODES = ("n1", "n2", "n3")
POOL = {"n1": 2, "n2": 1, "n3": 0}
TOKEN = secrets.token_hex(32)
OTHER = secrets.token_hex(32)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class StaleForwarder:
    """TCP to 127.0.0.1:port, byte for byte. Armed (stale), a connection
    that has carried an answer already and gets more from its client is
    reset (SO_LINGER 0) instead of passing it on: a kept-alive connection
    whose peer went away while it was idle."""

    def __init__(self, port):
        self.port = port
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.url = "http://127.0.0.1:%d" % self.ls.getsockname()[1]
        self.stale = threading.Event()
        self.accepted = self.reset = 0
        self.socks = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self.lock:
                self.accepted += 1
                self.socks += [c, u]
            carried = threading.Event()
            threading.Thread(target=self._up, args=(c, u, carried), daemon=True).start()
            threading.Thread(target=self._down, args=(u, c, carried), daemon=True).start()

    def _up(self, c, u, carried):
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    u.shutdown(socket.SHUT_WR)
                    return
                if carried.is_set() and self.stale.is_set():
                    with self.lock:
                        self.reset += 1
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    c.close()
                    u.close()
                    return
                u.sendall(data)
        except OSError:
            pass

    def _down(self, u, c, carried):
        try:
            while True:
                data = u.recv(65536)
                if not data:
                    c.shutdown(socket.SHUT_WR)
                    return
                carried.set()  # before: the client may ask again once it has them
                c.sendall(data)
        except OSError:
            pass

    def close(self):
        self.ls.close()
        with self.lock:
            for s in self.socks:
                s.close()


class Relay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="sbx-it-relay-")
        cls.addClassCleanup(shutil.rmtree, cls.root, True)
        cls.key = secrets.token_hex(32)
        cls.key_file = os.path.join(cls.root, "cluster-key")
        with open(cls.key_file, "w") as f:
            f.write(cls.key + "\n")  # as a Secret's file may hold it
        cls.tenants = os.path.join(cls.root, "tenants.json")
        h = lambda t: "sha256:" + hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
        with open(cls.tenants, "w") as f:
            json.dump({"tenants": {"alice": {"tokens": [h(TOKEN)], "max_timeout": 3600},
                                   "bob": {"tokens": [h(OTHER)]}}}, f)
        cls.ports = dict(zip(NODES, free_ports(3)))
        cls.sups = {}
        for n in NODES:
            cls.sups[n] = cls.node(n)
            cls.addClassCleanup(cls.sups[n].cleanup)
            cls.sups[n].start()
        for n in NODES:
            if POOL[n]:
                cls.sups[n].wait_ready()
        cls.sb = cls.sups["n1"].create(timeout=900)

    @classmethod
    def node(cls, name):
        peers = []
        for p in NODES:
            if p != name:
                peers += ["--peer", "%s=http://127.0.0.1:%d" % (p, cls.ports[p])]
        return Supervisor(SUP, AGENT, state_dir=os.path.join(cls.root, name), pool_size=POOL[name],
                          token=TOKEN,
                          extra=["--listen", "127.0.0.1:%d" % cls.ports[name], "--node-name", name,
                                 "--cluster-key-file", cls.key_file, "--tenants", cls.tenants]
                          + peers)

    @classmethod
    def tearDownClass(cls):
        for n in NODES:
            if cls.sups[n].alive():
                stop_clean(cls.sups[n])

    def via(self, node, method, path, body=None, **kw):
        return self.sups[node].request(method, path, body, **kw)

    def sid(self):
        return self.sb["id"]

    # ---- ids ----
    def test_ids_name_their_node(self):
        self.assertRegex(self.sid(), r"^sb-n1-[0-9a-f]{12}$")
        st, _, b = self.via("n3", "GET", "/v1/sandboxes/" + self.sid())
        self.assertEqual((st, b["id"], b["state"]), (200, self.sid(), "running"), b)
        st, _, b = self.via("n2", "GET", "/v1/sandboxes/sb-nowhere-0123456789ab")
        self.assertEqual((st, b["error"]["code"]), (404, "not_found"), b)
        # An id of no node (an earlier version's) is this node's own.
        st, _, b = self.via("n2", "GET", "/v1/sandboxes/sb-000000000000")
        self.assertEqual(st, 404, b)

    # ---- requests relayed ----
    def test_exec_relayed(self):
        st, _, b = self.via("n2", "POST", "/v1/sandboxes/%s/exec" % self.sid(),
                            {"cmd": "echo relayed-$((6*7)); hostname >&2; exit 3"})
        self.assertEqual((st, b["stdout"], b["exit_code"]), (200, "relayed-42\n", 3), b)
        # The tenant's token is the owner's to check.
        st, _, b = self.via("n2", "POST", "/v1/sandboxes/%s/exec" % self.sid(), {"cmd": "true"},
                            token="Bearer " + "0" * 64)
        self.assertEqual((st, b["error"]["code"]), (401, "unauthorized"), b)
        st, _, b = self.via("n2", "GET", "/v1/sandboxes/" + self.sid(), token="Bearer " + OTHER)
        self.assertEqual(st, 404, b)  # bob does not see alice's sandbox

    def test_exec_streamed_relayed(self):
        s = Stream(self.sups["n2"], self.sid(),
                   {"cmd": "for i in 1 2 3; do echo line-$i; sleep 0.2; done; exit 5"})
        try:
            self.assertEqual(s.resp.status, 200)
            self.assertEqual(s.resp.getheader("Content-Type"), "text/event-stream")
            out, exit_code, t = b"", None, []
            for ev, data in s.events():
                if ev == "stdout":
                    out += base64.b64decode(data, validate=True)
                    t.append(time.monotonic())
                elif ev == "exit":
                    exit_code = json.loads(data)["exit_code"]
        finally:
            s.close()
        self.assertEqual((out, exit_code), (b"line-1\nline-2\nline-3\n", 5))
        # Event by event, not held until the end.
        self.assertGreater(t[-1] - t[0], 0.3, t)

    def test_files_large_relayed(self):
        size = BIG_MB * MB
        path = "/v1/sandboxes/%s/files?path=/workspace/big.bin" % self.sid()
        block = os.urandom(MB)
        up = hashlib.sha256()
        c = self.sups["n2"].conn(600)
        try:
            c.putrequest("PUT", path)
            c.putheader("Authorization", "Bearer " + TOKEN)
            c.putheader("Content-Length", str(size))
            c.endheaders()
            for i in range(BIG_MB):
                piece = i.to_bytes(8, "little") + block[8:]
                up.update(piece)
                c.send(piece)
            r = c.getresponse()
            b = json.loads(r.read())
            self.assertEqual((r.status, b.get("size")), (200, size), b)
        finally:
            c.close()
        try:
            # Down through n3, hashed as it comes.
            c = self.sups["n3"].conn(600)
            try:
                c.request("GET", path, headers={"Authorization": "Bearer " + TOKEN})
                r = c.getresponse()
                self.assertEqual(r.status, 200)
                down, got = hashlib.sha256(), 0
                while True:
                    chunk = r.read(MB)
                    if not chunk:
                        break
                    down.update(chunk)
                    got += len(chunk)
            finally:
                c.close()
            self.assertEqual((got, down.hexdigest()), (size, up.hexdigest()))
            st, _, b = self.via("n2", "POST", "/v1/sandboxes/%s/exec" % self.sid(),
                                {"cmd": "sha256sum /workspace/big.bin", "timeout": 300},
                                timeout=300)
            self.assertEqual(b["stdout"].split()[0], up.hexdigest(), b)
        finally:
            self.via("n1", "POST", "/v1/sandboxes/%s/exec" % self.sid(),
                     {"cmd": "rm -f /workspace/big.bin"})

    def test_background_output_relayed(self):
        base = "/v1/sandboxes/%s/processes" % self.sid()
        st, _, b = self.via("n2", "POST", base,
                            {"argv": ["sh", "-c", "echo bg-one; sleep 0.3; echo bg-two"]})
        self.assertEqual(st, 201, b)
        o = Output(self.sups["n2"], "%s/%d/output?offset=0&follow=1" % (base, b["pid"]))
        data, ended = b"", False
        try:
            self.assertEqual(o.resp.status, 200)
            for ev, d in o.events():
                if ev in ("stdout", "stderr"):
                    data += base64.b64decode(d["data"])
                elif ev == "end":
                    ended = d["state"] == "exited"
                    break
        finally:
            o.close()
        self.assertTrue(ended)
        self.assertEqual(data, b"bg-one\nbg-two\n")

    def test_terminal_relayed(self):
        base = "/v1/sandboxes/%s/processes" % self.sid()
        st, _, b = self.via("n2", "POST", base,
                            {"argv": ["/bin/sh", "-i"], "pty": {"cols": 80, "rows": 24}})
        self.assertEqual(st, 201, b)
        url = "ws://127.0.0.1:%d%s/%d/ws" % (self.ports["n2"], base, b["pid"])

        async def session():
            async with websockets.connect(url, extra_headers={"Authorization": "Bearer " + TOKEN},
                                          max_size=1 << 22) as ws:
                await ws.send(b"echo term-$((6*7))\n")
                out, deadline = b"", time.monotonic() + 20
                while b"term-42" not in out:
                    m = await asyncio.wait_for(ws.recv(), deadline - time.monotonic())
                    if isinstance(m, bytes):
                        out += m
                await ws.send(b"exit 4\n")
                last = None
                try:
                    while True:
                        m = await asyncio.wait_for(ws.recv(), 20)
                        if isinstance(m, str):
                            last = json.loads(m)
                except websockets.exceptions.ConnectionClosedOK:
                    pass
                return last

        last = asyncio.run(session())
        self.assertEqual(last["exit"]["exit_code"], 4, last)

    # ---- kept alive ----
    def test_kept_alive_both_ways(self):
        path = "/v1/sandboxes/%s/exec" % self.sid()
        hdrs = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
        c = self.sups["n2"].conn(60)
        try:
            for i in range(4):
                c.request("POST", path, body=json.dumps({"cmd": "echo kept-%d" % i}),
                          headers=hdrs)
                r = c.getresponse()
                b = json.loads(r.read())
                self.assertEqual((r.status, b.get("stdout")), (200, "kept-%d\n" % i), b)
                self.assertNotEqual((r.getheader("Connection") or "").lower(), "close")
            # a GET without a body and a HEAD-less 404 from the owner on it too
            c.request("GET", "/v1/sandboxes/" + self.sid(), headers=hdrs)
            r = c.getresponse()
            self.assertEqual(json.loads(r.read())["id"], self.sid())
        finally:
            c.close()
        with open(self.sups["n2"].log_path, errors="replace") as f:
            kept = f.read().count("via node n1 (kept)")
        self.assertGreaterEqual(kept, 3, "n2 reused its connection to n1 %d times" % kept)

    def test_stale_kept_connection_sent_again(self):
        fwd = StaleForwarder(self.ports["n1"])
        self.addCleanup(fwd.close)
        n4 = Supervisor(SUP, AGENT, state_dir=os.path.join(self.root, "n4"), pool_size=0,
                        token=TOKEN, extra=["--node-name", "n4", "--peer", "n1=" + fwd.url,
                                            "--cluster-key-file", self.key_file,
                                            "--tenants", self.tenants])
        self.addCleanup(n4.cleanup)
        n4.start()
        path = "/v1/sandboxes/" + self.sid()
        st, _, b = n4.request("GET", path)
        self.assertEqual((st, b.get("id")), (200, self.sid()), b)
        fwd.stale.set()
        # n4 takes its kept connection; n1's side resets it at the request
        st, _, b = n4.request("GET", path)
        self.assertEqual((st, b.get("id")), (200, self.sid()), b)
        self.assertEqual(fwd.reset, 1)
        with open(n4.log_path, errors="replace") as f:
            self.assertIn("was stale (", f.read())
        # not idempotent: never sent twice, the client hears 502
        marker = "/workspace/stale-%s" % secrets.token_hex(4)
        st, _, b = n4.request("POST", path + "/exec", {"cmd": "echo x >> " + marker})
        self.assertEqual((st, b["error"]["code"]), (502, "node_unreachable"), b)
        self.assertEqual(fwd.reset, 2)
        fwd.stale.clear()
        st, _, b = self.via("n1", "POST", path + "/exec", {"cmd": "cat %s; true" % marker})
        self.assertEqual((st, b["stdout"]), (200, ""), b)
        stop_clean(n4)

    def test_expect_continue_then_more_on_one_connection(self):
        # The owner's 100 Continue passes through, then its 200; then a
        # HEAD-less GET and a 404 on the same client connection.
        path = "/v1/sandboxes/%s/files?path=/workspace/cont.txt" % self.sid()
        s = socket.create_connection(("127.0.0.1", self.ports["n2"]), timeout=30)
        try:
            s.sendall(("PUT %s HTTP/1.1\r\nHost: n2\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n"
                       % (path, TOKEN)).encode())
            got = b""
            while b"\r\n\r\n" not in got:
                got += s.recv(4096)
            self.assertTrue(got.startswith(b"HTTP/1.1 100 "), got)
            s.sendall(b"hello")
            f = s.makefile("rb")
            got = got[got.index(b"\r\n\r\n") + 4:]
            s.sendall(("GET %s HTTP/1.1\r\nHost: n2\r\nAuthorization: Bearer %s\r\n\r\n"
                       "GET /v1/sandboxes/sb-n1-000000000000 HTTP/1.1\r\nHost: n2\r\n"
                       "Authorization: Bearer %s\r\nConnection: close\r\n\r\n"
                       % (path, TOKEN, TOKEN)).encode())
            data = got + f.read()
        finally:
            s.close()
        self.assertEqual(data.count(b"HTTP/1.1 200 "), 2, data)
        self.assertIn(b"\r\n\r\nhello", data)
        self.assertEqual(data.count(b"HTTP/1.1 404 "), 1, data)
        self.assertTrue(data.rstrip().endswith(b"}"), data[-200:])

    # ---- every node's list ----
    def test_list_cluster_wide(self):
        for via in NODES:
            st, _, b = self.via(via, "GET", "/v1/sandboxes?scope=cluster")
            self.assertEqual(st, 200, b)
            self.assertIn(self.sid(), [x["id"] for x in b["sandboxes"]], b)
            self.assertEqual(sorted(b["nodes"]["answered"]), list(NODES), b)
            self.assertEqual(b["nodes"]["unanswered"], [], b)
            self.assertEqual(b["nodes"]["answered"][0], via)
        # another tenant's list holds none of alice's, on any node
        st, _, b = self.via("n3", "GET", "/v1/sandboxes?scope=cluster", token="Bearer " + OTHER)
        self.assertEqual(st, 200, b)
        self.assertNotIn(self.sid(), [x["id"] for x in b["sandboxes"]])
        # this node's alone, as before; a scope it does not know is 400
        st, _, b = self.via("n3", "GET", "/v1/sandboxes?scope=node")
        self.assertEqual((st, "nodes" in b), (200, False), b)
        self.assertNotIn(self.sid(), [x["id"] for x in b["sandboxes"]])
        st, _, b = self.via("n3", "GET", "/v1/sandboxes?scope=everywhere")
        self.assertEqual((st, b["error"]["code"]), (400, "bad_request"), b)

    # ---- create sent elsewhere ----
    def test_create_on_an_empty_node(self):
        # n3 keeps no sandbox ready; its directory polls the others each second.
        time.sleep(1.5)
        st, _, b = self.via("n3", "POST", "/v1/sandboxes", {"timeout": 120})
        self.assertEqual(st, 201, b)
        try:
            self.assertRegex(b["id"], r"^sb-n[12]-[0-9a-f]{12}$")
            st, _, e = self.via("n3", "POST", "/v1/sandboxes/%s/exec" % b["id"], {"cmd": "echo ok"})
            self.assertEqual((st, e.get("stdout")), (200, "ok\n"), e)
        finally:
            st, _, _ = self.via("n3", "DELETE", "/v1/sandboxes/" + b["id"])
            self.assertEqual(st, 204)

    # ---- the door ----
    def test_door_refuses_without_the_key(self):
        path = "/v1/sandboxes/%s" % self.sid()
        for hdrs in ({"Sbx-Relay-Hops": "1"},
                     {"Sbx-Relay-Hops": "1", "Sbx-Cluster-Key": "x" * 64},
                     {"Sbx-Cluster-Key": self.key[:-1]}):
            st, _, b = self.via("n1", "GET", path, headers=hdrs)
            self.assertEqual((st, b["error"]["code"]), (403, "permission_denied"), (hdrs, b))
        st, _, b = self.via("n1", "GET", "/relay/v1/capacity", token=False)
        self.assertEqual(st, 403, b)
        st, _, b = self.via("n1", "GET", "/relay/v1/capacity", token=False,
                            headers={"Sbx-Cluster-Key": self.key})
        self.assertEqual((st, b["node"]), (200, "n1"), b)
        # With the key, still the tenant's token is asked.
        st, _, b = self.via("n1", "GET", path, token=False,
                            headers={"Sbx-Relay-Hops": "1", "Sbx-Cluster-Key": self.key})
        self.assertEqual(st, 401, b)
        # A relayed request for a sandbox of another node: a loop, refused.
        st, _, b = self.via("n2", "GET", path,
                            headers={"Sbx-Relay-Hops": "1", "Sbx-Cluster-Key": self.key})
        self.assertEqual((st, b["error"]["code"]), (508, "loop_detected"), b)

    # ---- a node down and back (last: it restarts n1) ----
    def test_zz_node_killed_and_back(self):
        sid = self.sid()
        n1 = self.sups["n1"]
        n1.signal(signal.SIGKILL)
        n1.wait(30)
        t0 = time.monotonic()
        st, _, b = self.via("n2", "GET", "/v1/sandboxes/" + sid)
        dt = time.monotonic() - t0
        self.assertEqual((st, b["error"]["code"]), (502, "node_unreachable"), b)
        self.assertLess(dt, 2.0)
        # the cluster-wide list: n1 named, the others' still given
        t0 = time.monotonic()
        st, _, b = self.via("n2", "GET", "/v1/sandboxes?scope=cluster")
        dt = time.monotonic() - t0
        self.assertEqual(st, 200, b)
        self.assertEqual(sorted(b["nodes"]["answered"]), ["n2", "n3"], b)
        self.assertEqual([u["name"] for u in b["nodes"]["unanswered"]], ["n1"], b)
        self.assertLess(dt, 3.0)
        again = Supervisor(SUP, AGENT, state_dir=n1.state_dir, pool_size=POOL["n1"], token=TOKEN,
                           extra=n1.extra)
        self.sups["n1"] = again
        type(self).addClassCleanup(again.cleanup)
        again.start()
        deadline = time.monotonic() + 60
        while True:
            st, _, b = self.via("n2", "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "echo back"})
            if st == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual((st, b.get("stdout")), (200, "back\n"), b)


if __name__ == "__main__":
    unittest.main()

"""The HTTP edge of a real sandbox-supervisor (real runc sandboxes, the real
agent) over raw loopback sockets: pipelining (ten requests in one write,
answered in order), request smuggling refused (CL+TE, two Content-Length,
obs-fold, bare LF, NUL: 400, the connection closed, the hidden request never
run), a slowloris client cut at --head-timeout while others are served,
limits answered in JSON (413 at any size, 431), --max-connections refused at
accept without a busy loop, 10,000 idle keep-alive connections held while
execs go on (each usable after, the supervisor's memory per connection
bounded; how much they slow an exec is sbx-bench's row), a graceful stop (idle
connections closed at once, a request in flight answered), and clients
that reset (SO_LINGER 0) mid-request: a cold create cancelled (nothing
listed, the tenant's quota free again), a streaming download freed at
once. Everything made is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_IDLE_CONNS (default 10000).
"""
import hashlib
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, containers_under, percentile, stop_clean  # noqa: E402
from test_exec_stream import rss_kb  # noqa: E402
from test_files_upload import read_response  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
IDLE_CONNS = int(os.environ.get("SBX_IDLE_CONNS", "10000"))


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_all(sock, timeout=10):
    """Everything until the server closes (or timeout)."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while True:
            c = sock.recv(65536)
            if not c:
                break
            buf += c
    except socket.timeout:
        pass
    return buf


class Edge(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        cls.sup = Supervisor(SUP, AGENT, pool_size=1,
                             extra=["--head-timeout", "3", "--max-connections",
                                    str(IDLE_CONNS + 100)])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)
        cls.base = "/v1/sandboxes/%s" % cls.sb["id"]
        cls.auth = "Authorization: Bearer %s\r\n" % cls.sup.token

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def raw(self, data, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=timeout)
        try:
            s.sendall(data)
            return read_all(s, timeout)
        finally:
            s.close()

    def exec_req(self, cmd, close=False):
        body = json.dumps({"cmd": cmd}).encode()
        return ("POST %s/exec HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n%s\r\n" %
                (self.base, self.auth, len(body), "Connection: close\r\n" if close else "")
                ).encode() + body

    def test_pipelining_in_order(self):
        # Ten requests in one write; the answers come in the order asked,
        # whatever each takes (the slow exec is the third).
        reqs = b""
        for i in range(10):
            if i % 3 == 1:
                reqs += ("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (self.base, self.auth)).encode()
            else:
                reqs += self.exec_req("sleep %s; echo %d" % ("0.3" if i == 2 else "0", i),
                                      close=(i == 9))
        out = self.raw(reqs, 30)
        answers = []
        while out:
            head, rest = out.split(b"\r\n\r\n", 1)
            n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0]
                    .split(b":")[1])
            answers.append((int(head.split()[1]), json.loads(rest[:n])))
            out = rest[n:]
        self.assertEqual(len(answers), 10)
        for i, (st, b) in enumerate(answers):
            self.assertEqual(st, 200, b)
            if i % 3 == 1:
                self.assertEqual(b["id"], self.sb["id"])
            else:
                self.assertEqual(b["stdout"], "%d\n" % i)

    def test_smuggling_refused(self):
        # Each head could be read two ways; behind its body hides a DELETE
        # of the sandbox. 400, closed, and the sandbox lives on.
        hidden = "DELETE %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (self.base, self.auth)
        heads = [
            "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: %d\r\nContent-Length: 0\r\n",
            "Content-Length: 0\r\nX-Fold: a\r\n Content-Length: %d\r\n",
            "Content-Length: %d\nX: y\r\n",
            "X: a\0b\r\nContent-Length: %d\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\nX-Len: %d\r\n",
            "Transfer-Encoding: xchunked\r\nX-Len: %d\r\n",
        ]
        body = b"0\r\n\r\n"
        for h in heads:
            head = h % (len(body) + len(hidden))
            req = ("POST %s/exec HTTP/1.1\r\nHost: x\r\n%s%s\r\n" % (self.base, self.auth, head)
                   ).encode() + body + hidden.encode()
            out = self.raw(req)
            self.assertTrue(out.startswith(b"HTTP/1.1 400 "), (h, out))
            self.assertIn(b'"code":"bad_request"', out)
            self.assertIn(b"Connection: close", out)
            self.assertEqual(out.count(b"HTTP/1.1 "), 1, out)
        st, _, b = self.sup.request("GET", self.base)
        self.assertEqual((st, b["state"]), (200, "running"))

    def test_slowloris_cut_while_others_served(self):
        # One byte a second: cut at --head-timeout (3 s) with a 408, while
        # another client is served meanwhile.
        slow = socket.create_connection(("127.0.0.1", self.sup.port), timeout=10)
        head = ("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (self.base, self.auth)).encode()
        t0 = time.monotonic()
        got = b""
        try:
            for i in range(len(head)):
                try:
                    slow.sendall(head[i:i + 1])
                except OSError:
                    break
                st, _, _ = self.sup.request("GET", self.base)
                self.assertEqual(st, 200)
                slow.settimeout(1.0)
                try:
                    got += slow.recv(4096)
                except socket.timeout:
                    pass
                if got:
                    break
            got += read_all(slow, 5)
        finally:
            slow.close()
        took = time.monotonic() - t0
        self.assertTrue(got.startswith(b"HTTP/1.1 408 "), got)
        self.assertIn(b'"code":"request_timeout"', got)
        self.assertTrue(2.5 < took < 6, took)

    def test_refused_body_says_close(self):
        # A request with a body refused before a route takes it (an unknown
        # sandbox, no token) ends its connection, and its head says so; one
        # without a body keeps the connection for the next request.
        body = b'{"cmd":"true"}'
        for auth in (self.auth, ""):
            req = ("POST /v1/sandboxes/nosuchsandbox/exec HTTP/1.1\r\nHost: x\r\n%s"
                   "Content-Length: %d\r\n\r\n" % (auth, len(body))).encode() + body
            s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=10)
            try:
                s.sendall(req + ("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (self.base, self.auth)).encode())
                st, hd, b, _ = read_response(s)
                self.assertIn(st, (401, 404), b)
                self.assertEqual(hd.get("connection"), "close", (st, hd))
            finally:
                s.close()
        get = ("GET /v1/sandboxes/nosuchsandbox HTTP/1.1\r\nHost: x\r\n%s\r\n" % self.auth).encode()
        out = self.raw(get + ("GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n" %
                              (self.base, self.auth)).encode())
        self.assertEqual(out.count(b"HTTP/1.1 "), 2, out[:300])
        self.assertIn(b"HTTP/1.1 200 ", out)

    def test_limits_are_json(self):
        # 413 whatever the size (no HTML from a library), 431, a bad
        # request line: each the API's one error shape.
        big = 100 << 20
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
        try:
            s.sendall(("POST %s/exec HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" %
                       (self.base, self.auth, big)).encode())
            try:
                s.sendall(b"x" * (4 << 20))  # the server may close meanwhile
            except OSError:
                pass
            st, hd, b, _ = read_response(s)
        finally:
            s.close()
        self.assertEqual((st, b["error"]["code"]), (413, "too_large"), b)
        self.assertEqual(hd.get("connection"), "close")
        out = self.raw(("GET /healthz HTTP/1.1\r\nHost: x\r\nX: %s\r\n\r\n" % ("a" * 70000)).encode())
        self.assertTrue(out.startswith(b"HTTP/1.1 431 "), out[:100])
        self.assertIn(b'"error":{"code":"too_large"', out)
        out = self.raw(b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 400 "), out[:100])
        self.assertIn(b'"code":"bad_request"', out)

    def test_head_and_http10(self):
        out = self.raw(("HEAD %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n" %
                        (self.base, self.auth)).encode())
        head, body = out.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        self.assertIn(b"Content-Length: ", head)
        self.assertEqual(body, b"")
        out = self.raw(b"GET /healthz HTTP/1.0\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 200 ") and out.endswith(b'{"status":"ok"}\n'), out)
        # A streamed exec to an HTTP/1.0 client: no chunks, the end of the
        # connection ends the body.
        body = json.dumps({"cmd": "echo ten"}).encode()
        out = self.raw(("POST %s/exec HTTP/1.0\r\n%sAccept: text/event-stream\r\n"
                        "Content-Length: %d\r\n\r\n" % (self.base, self.auth, len(body))).encode()
                       + body)
        self.assertNotIn(b"chunked", out)
        self.assertIn(b"event: stdout\ndata: dGVuCg==\n\n", out)
        self.assertIn(b"event: exit\n", out)

    def hold_idle(self, n, sel, req, socks):
        """n keep-alive connections, each answered once, into socks (the
        caller closes them, also when this fails)."""
        while len(socks) < n:
            batch = []
            for _ in range(min(500, n - len(socks))):
                s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
                socks.append(s)
                s.sendall(req)
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ, b"")
                batch.append(s)
            left = set(batch)
            deadline = time.monotonic() + 60
            while left and time.monotonic() < deadline:
                for key, _ in sel.select(1):
                    data = key.data + key.fileobj.recv(4096)
                    if data.endswith(b'{"status":"ok"}\n'):
                        sel.unregister(key.fileobj)
                        left.discard(key.fileobj)
                    else:
                        self.assertTrue(data, "a connection was closed")
                        sel.modify(key.fileobj, selectors.EVENT_READ, data)
            self.assertFalse(left, "answers missing")

    def test_idle_connections_held(self):
        # IDLE_CONNS keep-alive connections, each after one request, held
        # while execs go on: every exec answers, every held connection is
        # still usable, each costs the supervisor a bounded amount of memory,
        # and once closed the supervisor lets go of them. How much the held
        # connections slow an exec is a timing figure: sbx-bench's "exec
        # `true` beside N idle keep-alive connections" row, not a test (a
        # latency ratio here failed beside other work).
        pid = self.sup.proc.pid
        c = self.sup.conn()

        def fds():
            return len(os.listdir("/proc/%d/fd" % pid))

        req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(5):
            st, _, r = self.sup.exec(self.sb["id"], conn=c, argv=["true"])
            self.assertEqual(st, 200, r)
        fds0 = fds()
        try:
            rss0 = rss_kb(pid)
            sel = selectors.DefaultSelector()
            socks = []
            try:
                self.hold_idle(IDLE_CONNS, sel, req, socks)
                for _ in range(20):
                    st, _, r = self.sup.exec(self.sb["id"], conn=c, argv=["true"])
                    self.assertEqual(st, 200, r)
                rss = rss_kb(pid)
                # Every one of them still open and usable.
                for s in socks[:: max(1, len(socks) // 50)]:
                    s.setblocking(True)
                    s.sendall(req)
                    self.assertIn(b'{"status":"ok"}', s.recv(4096))
            finally:
                for s in socks:
                    s.close()
                sel.close()
            per = (rss - rss0) / max(1, len(socks))
            print("\nsupervisor RSS %d -> %d KiB with %d idle keep-alive connections "
                  "(%.2f KiB each)" % (rss0, rss, len(socks), per), file=sys.stderr)
            # 1.2-3.6 KiB each measured; 16 catches a per-connection buffer
            # kept for an idle client.
            self.assertLess(per, 16, "KiB of supervisor memory per idle connection")
            # With none of them left, the supervisor has closed its ends.
            deadline = time.monotonic() + 60
            while fds() > fds0 + 100 and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertLessEqual(fds(), fds0 + 100, "the closed connections are still held")
        finally:
            c.close()

    def test_reset_while_streaming(self):
        # A client that resets (SO_LINGER 0) while a few MiB of a file
        # stream to it, reading nothing: freed at once, logged 499.
        path = "/workspace/reset-%d.bin" % os.getpid()
        st, _, b = self.sup.exec(self.sb["id"], cmd="head -c %d /dev/zero > %s" % (8 << 20, path))
        self.assertEqual((st, b["exit_code"]), (200, 0), b)
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(("GET %s/files?path=%s HTTP/1.1\r\nHost: x\r\n%s\r\n"
                   % (self.base, path, self.auth)).encode())
        s.recv(1)  # the answer started
        time.sleep(0.3)  # the supervisor's buffers fill
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        t0 = time.monotonic()
        want = "http GET files sandbox %s: client went away (reset) 499" % self.sb["id"]
        while want not in self.sup.log() and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        took = time.monotonic() - t0
        print("\nreset while streaming: freed after %.0f ms" % (took * 1e3), file=sys.stderr)
        self.assertIn(want, self.sup.log())
        self.assertLess(took, 1.0)


class Reset(unittest.TestCase):
    def test_reset_during_cold_create(self):
        # No pool: a create starts its sandbox. Its client resets while it
        # does (at once, or after a half-close whose interim 100 it took,
        # so known to be there): the create is cancelled (499), its tenant
        # holds nothing after (its quota of one sandbox takes the next
        # create) and no sandbox is listed.
        root = tempfile.mkdtemp(prefix="sbx-it-edge-")
        self.addCleanup(shutil.rmtree, root, True)
        tenants = os.path.join(root, "tenants.json")
        token = "edge-reset-token-%d" % os.getpid()
        with open(tenants, "w") as f:
            json.dump({"tenants": {"alice": {
                "tokens": ["sha256:" + hashlib.sha256(token.encode()).hexdigest()],
                "quota": {"sandboxes": 1}}}}, f)
        sup = Supervisor(SUP, AGENT, pool_size=0, token=token, extra=["--tenants", tenants])
        self.addCleanup(sup.cleanup)
        sup.start()
        body = json.dumps({}).encode()
        gone = "http POST sandboxes: client went away (reset) 499"
        for half in (False, True):
            # A cold create can finish (about 100 ms) before the reset
            # reaches the supervisor; that round shows nothing and is run
            # again. An edge that misses resets answers 201 every round.
            for attempt in range(5):
                if self.reset_round(sup, token, body, half, gone):
                    break
            else:
                self.fail("half-closed %s: every create was answered before the reset was "
                          "seen:\n%s" % (half, sup.log()))
            # what the cancelled create started, once it is up, is nobody's
            deadline = time.monotonic() + 60
            while sup.pools()["host"]["creating"]:
                self.assertLess(time.monotonic(), deadline, sup.pools())
                time.sleep(0.05)
            st, _, b = sup.request("GET", "/v1/sandboxes")
            self.assertEqual((st, b["sandboxes"]), (200, []), b)
            sb = sup.create()  # within the quota of one: the first holds nothing
            st, _, b = sup.request("DELETE", "/v1/sandboxes/%s" % sb["id"])
            self.assertEqual(st, 204, b)
        stop_clean(sup)

    def reset_round(self, sup, token, body, half, gone):
        """One create whose client resets while it runs: True when it was
        cancelled (499 within 1 s), False when it was answered first (its
        sandbox is deleted, for the quota of one)."""
        cancelled = sup.log().count(gone)
        answered = sup.log().count("http POST sandboxes 201")
        c = socket.create_connection(("127.0.0.1", sup.port), timeout=30)
        c.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  token.encode() + b"\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if half:
            c.shutdown(socket.SHUT_WR)
            self.assertEqual(c.recv(64), b"HTTP/1.1 100 Continue\r\n\r\n")
        deadline = time.monotonic() + 30
        while not sup.pools()["host"]["creating"]:  # the sandbox under way
            self.assertLess(time.monotonic(), deadline, "the cold create never started")
            time.sleep(0.005)
        time.sleep(0.01)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        t0 = time.monotonic()
        while sup.log().count(gone) == cancelled:
            if sup.log().count("http POST sandboxes 201") > answered:
                st, _, b = sup.request("GET", "/v1/sandboxes")
                for sb in b.get("sandboxes", []):
                    sup.request("DELETE", "/v1/sandboxes/%s" % sb["id"])
                return False
            self.assertLess(time.monotonic() - t0, 1.0, "half-closed %s:\n%s" % (half, sup.log()))
            time.sleep(0.005)
        return True


class Limits(unittest.TestCase):
    def test_max_connections_refused_at_accept(self):
        sup = Supervisor(SUP, AGENT, pool_size=0, extra=["--max-connections", "20"])
        self.addCleanup(sup.cleanup)
        sup.start()
        held = [socket.create_connection(("127.0.0.1", sup.port), timeout=10) for _ in range(20)]
        try:
            for s in held:  # each was accepted and answers
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertIn(b'{"status":"ok"}', s.recv(4096))
            cpu0 = cpu_s(sup.proc.pid)
            refused = 0
            t0 = time.monotonic()
            while time.monotonic() - t0 < 2.5:
                s = socket.create_connection(("127.0.0.1", sup.port), timeout=10)
                s.settimeout(5)
                try:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    refused += s.recv(4096) == b""
                except ConnectionResetError:
                    refused += 1
                finally:
                    s.close()
            time.sleep(1)
            cpu = cpu_s(sup.proc.pid) - cpu0
        finally:
            for s in held:
                s.close()
        log = sup.log()
        lines = log.count("refused")
        print("\n%d connections refused in 2.5 s, %d log lines, supervisor CPU %.2f s"
              % (refused, lines, cpu), file=sys.stderr)
        self.assertGreater(refused, 10)
        self.assertTrue(1 <= lines <= 5, lines)
        self.assertLess(cpu, 1.5)
        # One is free again: served.
        st, _, b = sup.request("GET", "/healthz", token=False)
        self.assertEqual(st, 200, b)
        stop_clean(sup)

    def test_graceful_stop(self):
        # SIGINT: an idle keep-alive connection is closed at once, an exec
        # in flight is answered, new connections are refused, then the
        # sandboxes go (SIGTERM drains the same way and leaves them).
        sup = Supervisor(SUP, AGENT, pool_size=1, extra=["--drain-timeout", "20"])
        self.addCleanup(sup.cleanup)
        sup.start()
        sup.wait_ready()
        sb = sup.create()
        idle = socket.create_connection(("127.0.0.1", sup.port), timeout=10)
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"ok", idle.recv(4096))
        busy = socket.create_connection(("127.0.0.1", sup.port), timeout=30)
        body = json.dumps({"cmd": "sleep 1.5; echo drained"}).encode()
        busy.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                      "Content-Length: %d\r\n\r\n" % (sb["id"], sup.token, len(body))).encode()
                     + body)
        time.sleep(0.3)
        sup.signal(signal.SIGINT)
        idle.settimeout(2)
        self.assertEqual(idle.recv(4096), b"")  # closed at once
        st, hd, b, _ = read_response(busy)
        self.assertEqual((st, b["stdout"]), (200, "drained\n"), b)
        self.assertEqual(hd.get("connection"), "close")
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", sup.port), timeout=2).recv(1)
        self.assertEqual(sup.wait(60), 0, sup.log())
        self.assertEqual(containers_under(sup.state_dir), [])
        idle.close()
        busy.close()


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

"""Ports of servers inside a sandbox through the supervisor: the agent's
port.open stream (a TCP connection made inside the sandbox's own network
namespace, which has loopback only) under /v1/sandboxes/{id}/ports/{port}/...
Real servers run inside a real runc sandbox as background processes:
python3 -m http.server (a large file fetched with its sha256 checked), a
server of our own (SSE, echo of bodies plain and chunked, the headers it
got, HEAD, 204), a WebSocket echo server (Debian's python3-websockets)
reached with a real WebSocket client, a raw TCP echo reached through the
Upgrade: tcp tunnel; GET /ports lists them; 400 and 502 for bad or closed
ports; a client that stops reading and a server that never reads hold the
supervisor's memory bounded; routing by Host (--ports-domain) and signed
URLs (tampered, another port's, expired: 403). Everything made is
removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_PORTS_BIG_MIB (default 64) the size of
the download.
"""
import asyncio
import fcntl
import hashlib
import http.client
import json
import os
import socket
import sys
import termios
import time
import unittest
import urllib.parse

import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, rss_kb, small_asan_quarantine, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
BIG_MIB = int(os.environ.get("SBX_PORTS_BIG_MIB", "64"))
ANSWER_S = 3  # --ports-answer-timeout
DOMAIN = "ports.sbx.test"  # never resolved: requests go to 127.0.0.1 with this Host

# The server of our own, on port 8001 (HTTP/1.1, keep-alive).
APP = r'''
import http.server, json, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def body(self):
        if self.headers.get("Transfer-Encoding", "") == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))
    def send(self, code, data, ctype="application/octet-stream"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-App", "yes")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
    def do_GET(self):
        if self.path.startswith("/headers"):
            h = [[k, v] for k, v in self.headers.items()]
            self.send(200, json.dumps({"path": self.path, "headers": h}).encode(),
                      "application/json")
        elif self.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: tick %d\n\n" % i)
                self.wfile.flush()
                time.sleep(0.4)
            self.close_connection = True
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one,", b"two,", b"three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/empty":
            self.send_response(204)
            self.end_headers()
        else:
            self.send(404, b"no such thing")
    do_HEAD = do_GET
    def do_POST(self):
        self.send(200, self.body())
    do_PUT = do_POST
http.server.ThreadingHTTPServer(("127.0.0.1", 8001), H).serve_forever()
'''

# A server that takes connections and never reads them (port 9001).
SINK = r'''
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9001))
s.listen(16)
held = []
while True:
    held.append(s.accept()[0])
'''

# Reads to the client's end of writing, then answers with what it got
# (its sha256 and length) and closes: a half-close (port 9002).
HALF = r'''
import hashlib, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9002))
s.listen(16)
while True:
    c, _ = s.accept()
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d)
        n += len(d)
    c.sendall(("%s %d\n" % (h.hexdigest(), n)).encode())
    c.close()
'''

WS = r'''
import asyncio, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m)
async def main():
    async with websockets.serve(echo, "127.0.0.1", 8765, max_size=1 << 22):
        await asyncio.Future()
asyncio.run(main())
'''

ECHO = r'''
import socket, threading
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::1", 9000))
s.listen(16)
def serve(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def sha256_of(read, first=b"", until=None):
    """sha256 and length of first and what read(n) gives until it gives
    nothing (or until bytes came)."""
    h, n = hashlib.sha256(first), len(first)
    while until is None or n < until:
        d = read(1 << 20)
        if not d:
            break
        h.update(d)
        n += len(d)
    return h.hexdigest(), n


class Ports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The two memory tests bound what the supervisor holds by its RSS.
        small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1,
                             extra=["--ports-domain", DOMAIN, "--ports-answer-timeout",
                                    str(ANSWER_S)])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=600)
        cls.sid = cls.sb["id"]
        cls.base = "/v1/sandboxes/%s/ports" % cls.sid
        st, _, b = cls.sup.exec(cls.sid, cmd="mkdir -p /tmp/www && head -c %d /dev/urandom "
                                "> /tmp/www/big.bin && echo hello > /tmp/www/hello.txt && "
                                "sha256sum /tmp/www/big.bin" % (BIG_MIB << 20), timeout=120)
        assert st == 200 and b["exit_code"] == 0, b
        cls.big_sha = b["stdout"].split()[0]
        for argv in (["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                      "/tmp/www", "8000"],
                     ["python3", "-c", APP], ["python3", "-c", WS], ["python3", "-c", ECHO],
                     ["python3", "-c", SINK], ["python3", "-c", HALF]):
            st, _, b = cls.sup.request("POST", "/v1/sandboxes/%s/processes" % cls.sid,
                                       {"argv": argv})
            assert st == 201, b
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, _, b = cls.sup.request("GET", cls.base)
            assert st == 200, b
            have = {p["port"] for p in b["ports"]}
            if {8000, 8001, 8765, 9000, 9001, 9002} <= have:
                cls.listed = b["ports"]
                return
            time.sleep(0.1)
        raise AssertionError("servers never listened: %r" % b)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def get(self, port, path, **kw):
        return self.sup.request(kw.pop("method", "GET"), "%s/%d%s" % (self.base, port, path), **kw)

    def test_list(self):
        addrs = {(p["port"], p["address"]) for p in self.listed}
        self.assertIn((8000, "127.0.0.1"), addrs)
        self.assertIn((9000, "::1"), addrs)

    def test_download_sha256(self):
        c = self.sup.conn(timeout=120)
        c.request("GET", self.base + "/8000/big.bin",
                  headers={"Authorization": "Bearer " + self.sup.token})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(int(r.getheader("Content-Length")), BIG_MIB << 20)
        digest, n = sha256_of(r.read)
        c.close()
        self.assertEqual(n, BIG_MIB << 20)
        self.assertEqual(digest, self.big_sha)

    def test_root_and_query(self):
        st, _, b = self.get(8000, "/hello.txt?x=1")
        self.assertEqual((st, b), (200, b"hello\n"))
        st, _, b = self.get(8000, "")  # the port's root without a slash
        self.assertEqual(st, 200)
        self.assertIn(b"big.bin", b)
        st, _, b = self.get(8001, "/headers/a%20b?q=1&r=2")
        self.assertEqual(b["path"], "/headers/a%20b?q=1&r=2")

    def test_headers_forwarded(self):
        st, h, b = self.get(8001, "/headers", headers={
            "Connection": "X-Gone, keep-alive", "X-Gone": "1", "Keep-Alive": "timeout=5",
            "X-Kept": "2", "Proxy-Authorization": "Basic eA=="})
        self.assertEqual(st, 200)
        self.assertEqual(h.get("x-app"), "yes")
        got = {k.lower(): v for k, v in b["headers"]}
        self.assertNotIn("authorization", got)  # the supervisor's token stays outside
        for k in ("x-gone", "keep-alive", "proxy-authorization"):
            self.assertNotIn(k, got)
        self.assertEqual(got["x-kept"], "2")
        self.assertEqual(got["connection"], "close")
        self.assertEqual(got["x-forwarded-host"], "127.0.0.1:%d" % self.sup.port)

    def test_bodies_both_ways(self):
        data = os.urandom(3 << 20)
        st, _, b = self.get(8001, "/echo", method="POST", body=data)
        self.assertEqual(st, 200)
        self.assertEqual(hashlib.sha256(b).hexdigest(), hashlib.sha256(data).hexdigest())
        # A chunked request body goes on chunked.
        c = self.sup.conn()
        c.request("PUT", self.base + "/8001/echo", body=iter([b"ab", b"cd" * 5000, b"ef"]),
                  headers={"Authorization": "Bearer " + self.sup.token},
                  encode_chunked=True)
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ab" + b"cd" * 5000 + b"ef"))
        c.close()

    def test_keepalive_and_framings(self):
        c = self.sup.conn()
        auth = {"Authorization": "Bearer " + self.sup.token}
        for path, status, want in (("/chunked", 200, b"one,two,three"), ("/empty", 204, b""),
                                   ("/nope", 404, b"no such thing"),
                                   ("/chunked", 200, b"one,two,three")):
            c.request("GET", self.base + "/8001" + path, headers=auth)
            r = c.getresponse()
            self.assertEqual((r.status, r.read()), (status, want), path)
        c.request("HEAD", self.base + "/8000/big.bin", headers=auth)
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (200, b""))
        self.assertEqual(int(r.getheader("Content-Length")), BIG_MIB << 20)
        c.request("GET", self.base + "/8000/hello.txt", headers=auth)
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"hello\n"))
        c.close()

    def test_sse_streamed(self):
        c = self.sup.conn()
        c.request("GET", self.base + "/8001/sse",
                  headers={"Authorization": "Bearer " + self.sup.token})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
        # Chunked towards us: a chunk size line, the event (two lines), the
        # chunk's end; each event's arrival is taken as it comes.
        t0 = time.monotonic()
        body, at = b"", []
        while len(at) < 3:
            line = r.readline()
            self.assertTrue(line, body)
            body += line
            if line.startswith(b"data: tick"):
                at.append(time.monotonic() - t0)
        body += r.read()
        t_all = time.monotonic() - t0
        c.close()
        for i in range(3):
            self.assertIn(b"data: tick %d\n\n" % i, body)
        # Each event came when it was sent, 0.4 s apart, not held for the
        # next one (they would come together) or the end.
        self.assertLess(at[0], t_all - 0.5)
        self.assertGreater(at[1] - at[0], 0.2, at)
        self.assertGreater(at[2] - at[1], 0.2, at)

    def test_websocket_echo(self):
        url = "ws://127.0.0.1:%d%s/8765/" % (self.sup.port, self.base)

        async def run():
            async with websockets.connect(
                    url, max_size=1 << 22,
                    extra_headers={"Authorization": "Bearer " + self.sup.token}) as ws:
                await ws.send("hello ws")
                self.assertEqual(await asyncio.wait_for(ws.recv(), 10), "hello ws")
                blob = os.urandom(1 << 20)
                await ws.send(blob)
                self.assertEqual(await asyncio.wait_for(ws.recv(), 20), blob)
                # A small message right behind a large one goes at once
                # too (the agent reads larger turns while bulk flows,
                # DESIGN.md "Ports"): its echo takes about as long as one
                # after a quiet pause. Medians of five rounds each; the
                # room (250 ms) is a loaded machine's, far below what a
                # piece held for the low-water mark waits (608 ms in
                # guest_agent_port with the timer off, or until the 10 s
                # wait_for gives up).
                async def echo_ms(msg):
                    t = time.monotonic()
                    await ws.send(msg)
                    self.assertEqual(await asyncio.wait_for(ws.recv(), 10), msg)
                    return (time.monotonic() - t) * 1000
                quiet, behind = [], []
                for i in range(5):
                    await asyncio.sleep(0.05)
                    quiet.append(await echo_ms("quiet %d" % i))
                    await ws.send(blob)
                    self.assertEqual(await asyncio.wait_for(ws.recv(), 20), blob)
                    behind.append(await echo_ms("behind %d" % i))
                quiet.sort()
                behind.sort()
                self.assertLess(behind[2], quiet[2] + 250, (quiet, behind))
        asyncio.run(run())

    def tunnel(self, port):
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=20)
        s.sendall(("GET %s/%d/tcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
                   % (self.base, port, self.sup.token)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        return s, head

    def test_tcp_tunnel(self):
        s, head = self.tunnel(9000)
        try:
            self.assertTrue(head.startswith(b"HTTP/1.1 101 "), head)
            self.assertIn(b"Upgrade: tcp", head)
            rest = head.split(b"\r\n\r\n", 1)[1]
            data = os.urandom(2 << 20)
            got = [rest]

            async def pump():
                loop = asyncio.get_running_loop()
                s.setblocking(False)
                send = loop.sock_sendall(s, data)
                n = len(rest)

                async def recv():
                    nonlocal n
                    while n < len(data):
                        d = await loop.sock_recv(s, 1 << 16)
                        if not d:
                            break
                        got.append(d)
                        n += len(d)
                await asyncio.wait_for(asyncio.gather(send, recv()), 30)
            asyncio.run(pump())
            self.assertEqual(b"".join(got), data)
        finally:
            s.close()
        s, head = self.tunnel(8999)
        s.close()
        self.assertTrue(head.startswith(b"HTTP/1.1 502 "), head)
        self.assertIn(b"port_closed", head)

    def test_tcp_tunnel_half_close(self):
        """The client shuts its writing: the server inside reads its end,
        and its answer after that still arrives."""
        s, head = self.tunnel(9002)
        try:
            self.assertTrue(head.startswith(b"HTTP/1.1 101 "), head)
            data = os.urandom(3 << 20)
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            got = head.split(b"\r\n\r\n", 1)[1]
            s.settimeout(30)
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        finally:
            s.close()
        self.assertEqual(got.decode().split(), [hashlib.sha256(data).hexdigest(), str(len(data))])

    def test_server_that_never_answers(self):
        """A server inside that takes the request and sends nothing: 504
        after --ports-answer-timeout, not a request held for ever."""
        t0 = time.monotonic()
        st, _, b = self.get(9001, "/")
        took = time.monotonic() - t0
        self.assertEqual(st, 504, b)
        self.assertEqual(b["error"]["code"], "timeout")
        self.assertGreaterEqual(took, ANSWER_S - 0.1)
        self.assertLess(took, ANSWER_S + 10)
        # The same supervisor still serves the port's neighbours.
        st, _, b = self.get(8000, "/hello.txt")
        self.assertEqual((st, b), (200, b"hello\n"))

    def test_slow_client_holds_no_memory(self):
        """A client that stops reading stalls the stream: the server inside
        blocks, the supervisor holds no more than its bounds."""
        pid = self.sup.proc.pid
        before = rss_kb(pid)
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=60)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(("GET %s/8000/big.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (self.base, self.sup.token)).encode())
        # Stalled: for a second nothing more waits in our socket and the
        # supervisor's RSS made no new peak (at most 20 s).
        peak, queued, still = before, None, 0
        deadline = time.monotonic() + 20
        while still < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
            q = fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0")
            rss = rss_kb(pid)
            still = still + 1 if q == queued and rss <= peak else 0
            peak, queued = max(peak, rss), q
        grown = peak - before
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        head, data = data.split(b"\r\n\r\n", 1)
        digest, n = sha256_of(s.recv, data, BIG_MIB << 20)
        s.close()
        self.assertIn(b"200 OK", head)
        self.assertEqual(digest, self.big_sha)
        self.assertLess(grown, 16 * 1024, "supervisor grew %d KiB for a stalled download" % grown)

    def test_stalled_server_holds_no_memory(self):
        """A server inside that never reads: what the client may push is
        bounded by socket buffers, the agent's window and our staging."""
        before = rss_kb(self.sup.proc.pid)
        s, head = self.tunnel(9001)
        self.assertTrue(head.startswith(b"HTTP/1.1 101 "), head)
        s.setblocking(False)
        sent, chunk, deadline = 0, b"x" * 65536, time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                sent += s.send(chunk)
            except BlockingIOError:
                time.sleep(0.05)
        grown = rss_kb(self.sup.proc.pid) - before
        s.close()
        self.assertLess(sent, 32 << 20, "the client pushed %d bytes into a stalled stream" % sent)
        self.assertLess(grown, 16 * 1024, "supervisor grew %d KiB for a stalled server" % grown)

    def host(self, port):
        return "%d-%s.%s:%d" % (port, self.sid, DOMAIN, self.sup.port)

    def test_host_routing(self):
        st, _, b = self.sup.request("GET", "/headers?x=1", headers={"Host": self.host(8001)})
        self.assertEqual(st, 200, b)
        self.assertEqual(b["path"], "/headers?x=1")
        # Every path of that host is the port's, the supervisor's own too.
        st, _, b = self.sup.request("GET", "/v1/sandboxes", headers={"Host": self.host(8001)})
        self.assertEqual((st, b), (404, b"no such thing"))
        st, _, b = self.sup.request("GET", "/url", headers={"Host": self.host(8001)})
        self.assertEqual((st, b), (404, b"no such thing"))
        st, _, b = self.sup.request("GET", "/hello.txt", headers={"Host": self.host(8000)})
        self.assertEqual((st, b), (200, b"hello\n"))
        st, _, b = self.sup.request("GET", "/", headers={"Host": self.host(8001)}, token=False)
        self.assertEqual(st, 401, b)
        st, _, b = self.sup.request("GET", "/", headers={"Host": self.host(8999)})
        self.assertEqual(st, 502, b)

    def signed(self, port, expires):
        st, _, b = self.get(port, "/url?expires=%d" % expires)
        self.assertEqual(st, 200, b)
        u = urllib.parse.urlsplit(b["url"])
        self.assertEqual(u.netloc, self.host(port))
        self.assertLessEqual(abs(b["expires_at"] - time.time() - expires), 2)
        return u.query

    def test_signed_url(self):
        q = self.signed(8001, 600)
        h = {"Host": self.host(8001)}
        st, hd, b = self.sup.request("GET", "/headers?" + q + "&k=v", headers=h, token=False)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["path"], "/headers?k=v")  # the proof is not passed inside
        cookie = hd["set-cookie"].split(";")[0]
        self.assertTrue(cookie.startswith("sbx_port="), hd)
        # The cookie alone gets in, as a browser's next requests would; the
        # server inside never sees it, only the page's own cookies.
        st, _, b = self.sup.request("GET", "/headers",
                                    headers=dict(h, Cookie="a=1; %s; b=2" % cookie), token=False)
        self.assertEqual(st, 200, b)
        inside = [v for k, v in b["headers"] if k.lower() == "cookie"]
        self.assertEqual(inside, ["a=1; b=2"])
        # The same proof by path.
        st, _, b = self.sup.request("GET", "%s/8001/headers?%s" % (self.base, q), token=False)
        self.assertEqual(st, 200, b)
        # The cookie keeps the proof that was checked, never an expiry
        # named beside it: a second sbx_exp, or a query beside the path
        # form's proof (whose signature the path carries).
        exp, sig = (v.split("=")[1] for v in q.split("&"))
        far = str(int(exp) + 10 ** 8)
        st, hd, b = self.sup.request("GET", "/headers?%s&sbx_exp=%s" % (q, far), headers=h,
                                     token=False)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["path"], "/headers")
        self.assertTrue(hd["set-cookie"].startswith("sbx_port=%s.%s;" % (exp, sig)), hd)
        signed = "/v1/signed/%s/8001/%s/%s" % (self.sid, exp, sig)
        st, hd, b = self.sup.request("GET", "%s/headers?sbx_exp=%s&sbx_sig=%s" % (signed, far, sig),
                                     token=False)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["path"], "/headers")
        self.assertNotIn("set-cookie", hd)
        # Tampered, another port's, or minting more with it: 403.
        bad = q[:-1] + ("0" if q[-1] != "0" else "1")
        st, hd, b = self.sup.request("GET", "/headers?" + bad, headers=h, token=False)
        self.assertEqual(st, 403, b)
        self.assertEqual(b["error"]["code"], "forbidden")
        st, _, b = self.sup.request("GET", "/?" + q, headers={"Host": self.host(8000)}, token=False)
        self.assertEqual(st, 403, b)
        st, _, b = self.sup.request("GET", "%s/8001/url?%s" % (self.base, q), token=False)
        self.assertEqual(st, 403, b)
        st, _, b = self.get(8001, "/url?expires=0")
        self.assertEqual(st, 400, b)

    def test_signed_url_expires(self):
        q = self.signed(8000, 1)
        h = {"Host": self.host(8000)}
        st, _, b = self.sup.request("GET", "/hello.txt?" + q, headers=h, token=False)
        self.assertEqual((st, b), (200, b"hello\n"))
        time.sleep(2.2)
        st, _, b = self.sup.request("GET", "/hello.txt?" + q, headers=h, token=False)
        self.assertEqual(st, 403, b)
        self.assertIn("expired", b["error"]["message"])

    def test_bad_and_closed_ports(self):
        for p in ("0", "65536", "99999", "abc", "-1"):
            st, _, b = self.sup.request("GET", "%s/%s/" % (self.base, p))
            self.assertEqual(st, 400, (p, b))
        st, _, b = self.get(8999, "/")
        self.assertEqual(st, 502, b)
        self.assertEqual(b["error"]["code"], "port_closed")
        st, _, b = self.sup.request("GET", "/v1/sandboxes/nosuch/ports/8000/")
        self.assertEqual(st, 404, b)
        st, _, b = self.get(8000, "/", token=False)
        self.assertEqual(st, 401, b)


if __name__ == "__main__":
    unittest.main(verbosity=2)

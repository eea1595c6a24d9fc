"""Desktop sandboxes: the real sbx/desktop image (images/build: Xvfb,
openbox, xterm, Chromium, x11vnc, noVNC behind websockify, started by its
service sbx-desktop as each sandbox of the image comes up), pooled, and
reached as a person's web browser reaches it: the noVNC page through the
port proxy (by path with the token, and by Host with a signed URL, each
port an origin of its own), and its WebSocket carrying the VNC server's
RFB handshake through the proxy, whose ServerInit says the display's size;
the display's programs running as the sandbox's user.

The image's Debian part is built once per machine (make sandbox-images, or
here on first use: minutes) and cached; here it is only assembled
(seconds) into a temporary folder and imported at start.
"""
import base64
import http.client
import os
import secrets
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "sdk", "python"))
from sbx._http import Client  # noqa: E402
from sbx.ws import WebSocket  # noqa: E402

IMAGE = "sbx/desktop"
NOVNC = 6080
DOMAIN = "sbx.test"
TOK = {n: secrets.token_hex(32) for n in ("admin", "alice", "bob")}
SLOW = 120


class RfbStream:
    """The bytes of a WebSocket's binary messages as one stream."""

    def __init__(self, ws):
        self.ws = ws
        self.buf = b""

    def read(self, n):
        while len(self.buf) < n:
            kind, data = self.ws.recv()
            self.buf += data if isinstance(data, bytes) else data.encode()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class Desktop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup, sb = h.pooled_image_supervisor(cls, "desktop", TOK, timeout=SLOW,
                                                extra=["--ports-domain", DOMAIN])
        cls.sid = sb["id"]
        cls.ports = "/v1/sandboxes/%s/ports" % cls.sid
        deadline = time.monotonic() + SLOW
        while time.monotonic() < deadline:
            st, _, b = cls.req("GET", cls.ports)
            if st == 200 and {5900, NOVNC} <= {p["port"] for p in b["ports"]}:
                return
            time.sleep(0.2)
        raise AssertionError("the desktop never listened: %r" % (b,))

    @classmethod
    def req(cls, method, path, body=None, who="alice", **kw):
        return cls.sup.request(method, path, body, token="Bearer " + TOK[who] if who else None,
                               timeout=SLOW, **kw)

    def rfb_handshake(self, ws):
        """RFB 3.8 with security None: the framebuffer's (width, height)."""
        s = RfbStream(ws)
        self.assertEqual(s.read(12), b"RFB 003.008\n")
        ws.send_binary(b"RFB 003.008\n")
        n = s.read(1)[0]
        self.assertGreater(n, 0)
        types = s.read(n)
        self.assertIn(1, types)  # None: only the proxy reaches it
        ws.send_binary(b"\x01")
        self.assertEqual(struct.unpack(">I", s.read(4))[0], 0)
        ws.send_binary(b"\x01")  # ClientInit: shared
        return struct.unpack(">HH", s.read(4))

    def test_service_as_sandbox_user(self):
        st, _, b = self.req("GET", "/v1/sandboxes/%s/processes?tag=sbx-service" % self.sid)
        self.assertEqual(st, 200, b)
        self.assertEqual([p["state"] for p in b["processes"]], ["running"], b)
        st, _, b = self.req("POST", "/v1/sandboxes/%s/exec" % self.sid,
                            {"cmd": "ps -eo user:16,comm | grep -E 'Xvfb|x11vnc|websockify|openbox|xterm'"})
        self.assertEqual(st, 200, b)
        rows = [ln.split() for ln in b["stdout"].splitlines() if ln.strip()]
        self.assertEqual({r[1] for r in rows} >= {"Xvfb", "x11vnc", "openbox", "xterm"}, True, rows)
        self.assertEqual({r[0] for r in rows}, {"sandbox"}, rows)

    def test_novnc_page_by_path(self):
        st, hd, body = self.req("GET", "%s/%d/vnc.html" % (self.ports, NOVNC))
        self.assertEqual(st, 200)
        self.assertIn(b"noVNC", body)
        st, _, _ = self.req("GET", "%s/%d/vnc.html" % (self.ports, NOVNC), who=None)
        self.assertEqual(st, 401)
        st, _, _ = self.req("GET", "%s/%d/vnc.html" % (self.ports, NOVNC), who="bob")
        self.assertEqual(st, 404)

    def test_rfb_through_the_proxy(self):
        c = Client("http://127.0.0.1:%d" % self.sup.port, TOK["alice"])
        ws = WebSocket.connect(c, "%s/%d/websockify" % (self.ports, NOVNC), timeout=SLOW)
        try:
            self.assertEqual(self.rfb_handshake(ws), (1280, 800))
        finally:
            ws.sock.close()

    def test_signed_url_by_host(self):
        # a person's browser: a signed URL on a host of its own (a clean
        # origin per port), no token; the cookie it leaves opens the
        # page's WebSocket
        st, _, u = self.req("GET", "%s/%d/url?expires=120" % (self.ports, NOVNC))
        self.assertEqual(st, 200, u)
        host = "%d-%s.%s:%d" % (NOVNC, self.sid, DOMAIN, self.sup.port)
        self.assertTrue(u["url"].startswith("http://%s/?" % host), u)
        query = u["url"].split("?", 1)[1]
        conn = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=SLOW)
        try:
            conn.request("GET", "/vnc.html?" + query, headers={"Host": host})
            r = conn.getresponse()
            body = r.read()
            self.assertEqual(r.status, 200)
            self.assertIn(b"noVNC", body)
            cookie = r.getheader("Set-Cookie").split(";")[0]
        finally:
            conn.close()
        ws = self.ws_by_host(host, cookie)
        try:
            self.assertEqual(self.rfb_handshake(ws), (1280, 800))
        finally:
            ws.sock.close()

    def ws_by_host(self, host, cookie):
        """A WebSocket to /websockify on host with the cookie only, as the
        noVNC page's script opens it."""
        raw = socket.create_connection(("127.0.0.1", self.sup.port), SLOW)
        key = base64.b64encode(os.urandom(16)).decode()
        raw.sendall(("GET /websockify HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n"
                     "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
                     "Cookie: %s\r\n\r\n" % (host, key, cookie)).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            piece = raw.recv(4096)
            self.assertTrue(piece, data)
            data += piece
        end = data.index(b"\r\n\r\n") + 4
        self.assertTrue(data.startswith(b"HTTP/1.1 101"), data[:200])
        ws = WebSocket(raw)
        ws.buf += data[end:]
        raw.settimeout(SLOW)
        return ws


if __name__ == "__main__":
    unittest.main(verbosity=2)

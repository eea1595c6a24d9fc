"""HTTPS end to end: a real sandbox-supervisor serving TLS (--tls-cert,
--tls-key, --tls-ca) with certificates scripts/tls-certs makes (a cluster
CA, the node's certificate with the names clients use and a wildcard for
--ports-domain; another CA for the refusals), real runc sandboxes and real
clients that verify it: Python's ssl (http.client), the SDK and its
WebSocket client (sdk/python, ca_file=), the CLI (--ca-file), Debian's
python3-websockets (wss://) and OpenSandbox's npm SDK (Node, with the CA
in NODE_EXTRA_CA_CERTS).

Over TLS, as in clear: exec on a kept-alive connection and pipelined,
a request whose client half-closed after it (a FIN, no close_notify), an
SSE stream, 64 MiB up and down with sha256 both ways, the terminal
through the SDK and through python3-websockets, the port proxy (HTTP by
path, by Host with the wildcard certificate, a signed https:// URL, a
WebSocket through it), MCP over Streamable HTTP (/v1/mcp), the
OpenSandbox flows, /metrics on --metrics-listen. Plain HTTP to the TLS
port is answered 400 in clear and closed; a broken or stalled handshake
costs one connection for at most --head-timeout while others are served;
a client trusting another CA refuses the node. SIGHUP swaps the
certificate for new connections while a stream made before it runs to its
end; broken files on SIGHUP are refused and the certificate in force
stays. Three nodes relay over HTTPS with the cluster key: n2 (signed by
the cluster CA) reaches n1's sandbox; n3 (its certificate from another
CA) is refused by n1, which says why, and n1 cannot reach n3 (its
certificate does not verify), which its 502 says. A plain supervisor on a
non-loopback address warns once; one on loopback does not. Everything
made is removed, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import asyncio
import base64
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(TOP, "sdk", "python"))
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from test_exec_stream import Stream  # noqa: E402

import sbx  # noqa: E402
from sbx.ws import WebSocket  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20
BIG_MB = 64
DOMAIN = "ports.sbx.test"  # never resolved: connections go to 127.0.0.1 with this name
HEAD_S = 2  # --head-timeout: a handshake's deadline too
SDK_DIR = os.path.join(TOP, "tests", "opensandbox")
TOKEN = secrets.token_hex(32)  # every node's: the owner checks the token of a relayed request

WS_ECHO = r'''
import asyncio, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m)
async def main():
    async with websockets.serve(echo, "127.0.0.1", 8765):
        await asyncio.Future()
asyncio.run(main())
'''


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def certs(folder, name, *sans, out="tls"):
    p = subprocess.run([os.path.join(TOP, "scripts", "tls-certs"), folder, "--name", name,
                        "--out", out] + [a for s in sans for a in ("--san", s)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return os.path.join(folder, out + ".crt"), os.path.join(folder, out + ".key")


def peer_cn(sock):
    subject = dict(x[0] for x in sock.getpeercert()["subject"])
    return subject["commonName"]


def read_to_end(sock):
    """Everything the server sends until its end (close_notify, or its FIN)."""
    data = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            return data
        data += piece


class Named(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 under another name: the name sent (SNI) and
    checked against the certificate, as a client that resolved it would."""

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="sbx-it-tls-")
        cls.addClassCleanup(shutil.rmtree, cls.root, True)
        cls.ca_dir = os.path.join(cls.root, "ca")
        cls.other_dir = os.path.join(cls.root, "other")
        names = ("127.0.0.1", "localhost", "*." + DOMAIN)
        cert, key = certs(cls.ca_dir, "n1", *names)
        cls.ca = os.path.join(cls.ca_dir, "ca.crt")
        # what the supervisor reads: a rotation copies over it
        cls.live_crt = os.path.join(cls.root, "live.crt")
        cls.live_key = os.path.join(cls.root, "live.key")
        shutil.copy(cert, cls.live_crt)
        shutil.copy(key, cls.live_key)
        cls.next_crt, cls.next_key = certs(cls.ca_dir, "n1-rotated", *names, out="next")
        cls.n2_crt, cls.n2_key = certs(cls.ca_dir, "n2", *names, out="n2")
        cls.n3_crt, cls.n3_key = certs(cls.other_dir, "n3", *names)
        cls.other_ca = os.path.join(cls.other_dir, "ca.crt")
        cls.key_file = os.path.join(cls.root, "cluster-key")
        with open(cls.key_file, "w") as f:
            f.write(secrets.token_hex(32))
        cls.ports = dict(zip(("n1", "n2", "n3"), free_ports(3)))
        cls.sup = cls.node("n1", cls.live_crt, cls.live_key, pool=1,
                           more=["--ports-domain", DOMAIN, "--metrics-listen", "127.0.0.1:0",
                                 "--head-timeout", str(HEAD_S)])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)
        cls.sid = cls.sb["id"]
        cls.client = sbx.Client(cls.sup.url, cls.sup.token, ca_file=cls.ca)
        st, _, b = cls.sup.request("POST", "/v1/sandboxes/%s/processes" % cls.sid, {"argv": [
            "sh", "-c", "mkdir -p /tmp/www && echo hello > /tmp/www/hello.txt && exec python3 -m "
            "http.server --bind 127.0.0.1 --directory /tmp/www 8000"]})
        assert st == 201, b
        st, _, b = cls.sup.request("POST", "/v1/sandboxes/%s/processes" % cls.sid,
                                   {"argv": ["python3", "-c", WS_ECHO]})
        assert st == 201, b
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, _, b = cls.sup.request("GET", "/v1/sandboxes/%s/ports" % cls.sid)
            if {8000, 8765} <= {p["port"] for p in b["ports"]}:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("servers never listened: %r" % b)

    @classmethod
    def node(cls, name, cert, key, pool=0, more=()):
        peers = []
        for p in ("n1", "n2", "n3"):
            if p != name:
                peers += ["--peer", "%s=https://127.0.0.1:%d" % (p, cls.ports[p])]
        return Supervisor(SUP, AGENT, state_dir=os.path.join(cls.root, name), pool_size=pool,
                          ca_file=cls.ca, token=TOKEN,
                          extra=["--listen", "127.0.0.1:%d" % cls.ports[name], "--node-name", name,
                                 "--token", TOKEN,
                                 "--tls-cert", cert, "--tls-key", key, "--tls-ca", cls.ca,
                                 "--cluster-key-file", cls.key_file] + peers + list(more))

    @classmethod
    def tearDownClass(cls):
        if cls.sup.alive():
            stop_clean(cls.sup)

    def path(self, rest=""):
        return "/v1/sandboxes/%s%s" % (self.sid, rest)

    # ---- requests as in clear ----
    def test_exec_kept_alive_and_pipelined(self):
        c = self.sup.conn(60)
        try:
            for i in range(3):
                c.request("POST", self.path("/exec"), body=json.dumps({"cmd": "echo tls-%d" % i}),
                          headers={"Authorization": "Bearer " + self.sup.token})
                r = c.getresponse()
                b = json.loads(r.read())
                self.assertEqual((r.status, b["stdout"]), (200, "tls-%d\n" % i), b)
            self.assertEqual(c.sock.version() in ("TLSv1.2", "TLSv1.3"), True)
            self.assertEqual(c.sock.selected_alpn_protocol(), None)  # not asked
        finally:
            c.close()
        # two requests in one write, two answers in order
        raw = socket.create_connection(("127.0.0.1", self.sup.port), 30)
        ctx = self.sup.ssl_context()
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        try:
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
            body = json.dumps({"cmd": "echo piped"}).encode()
            one = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (self.path("/exec"), self.sup.token, len(body))
                   ).encode() + body
            last = ("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                    "Connection: close\r\n\r\n" % (self.path(), self.sup.token)).encode()
            s.sendall(one + last)
            data = read_to_end(s)
        finally:
            s.close()
        self.assertEqual(data.count(b"HTTP/1.1 200 "), 2, data)
        self.assertLess(data.index(b'"stdout":"piped\\n"'), data.index(b'"state":"running"'))

    def test_half_close_answered(self):
        """A client that ends its sending side (TCP FIN, no close_notify)
        once its request is out still reads the answer, as in clear."""
        raw = socket.create_connection(("127.0.0.1", self.sup.port), 30)
        s = self.sup.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
        try:
            body = json.dumps({"cmd": "sleep 0.3; echo late"}).encode()
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (self.path("/exec"), self.sup.token,
                                                        len(body))).encode() + body)
            # the socket's own shutdown: SSLSocket.shutdown drops TLS first
            socket.socket.shutdown(s, socket.SHUT_WR)
            data = read_to_end(s)
        finally:
            s.close()
        self.assertIn(b"HTTP/1.1 200 ", data)
        self.assertIn(b'"stdout":"late\\n"', data)

    def test_sse_stream(self):
        s = Stream(self.sup, self.sid, {"cmd": "for i in 1 2 3; do echo ev-$i; sleep 0.1; done; exit 4"})
        try:
            self.assertEqual(s.resp.getheader("Content-Type"), "text/event-stream")
            out, code = b"", None
            for ev, data in s.events():
                if ev == "stdout":
                    out += base64.b64decode(data)
                elif ev == "exit":
                    code = json.loads(data)["exit_code"]
        finally:
            s.close()
        self.assertEqual((out, code), (b"ev-1\nev-2\nev-3\n", 4))

    def test_large_up_and_down(self):
        size = BIG_MB * MB
        path = self.path("/files?path=/workspace/big.bin")
        block = os.urandom(MB)
        up = hashlib.sha256()
        c = self.sup.conn(600)
        try:
            c.putrequest("PUT", path)
            c.putheader("Authorization", "Bearer " + self.sup.token)
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
            st, _, b = self.sup.exec(self.sid, cmd="sha256sum /workspace/big.bin", timeout=300)
            self.assertEqual(b["stdout"].split()[0], up.hexdigest(), b)
            c = self.sup.conn(600)
            try:
                c.request("GET", path, headers={"Authorization": "Bearer " + self.sup.token})
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
        finally:
            self.sup.exec(self.sid, cmd="rm -f /workspace/big.bin")

    def test_terminal_sdk_and_websockets(self):
        sb = sbx.Sandbox.connect(self.sid, client=self.client)
        with sb.terminal("exec sh -i", cols=80, rows=24) as t:
            t.write("echo sdk-$((6*7))\n")
            self.assertIn(b"sdk-42", t.read_until(b"sdk-42"))
            t.write("exit 3\n")
            while t.recv() is not None:
                pass
            self.assertEqual(t.exit["exit_code"], 3)
        st, _, b = self.sup.request("POST", self.path("/processes"),
                                    {"argv": ["/bin/sh", "-i"], "pty": {"cols": 80, "rows": 24}})
        self.assertEqual(st, 201, b)
        url = "wss://127.0.0.1:%d%s/%d/ws" % (self.sup.port, self.path("/processes"), b["pid"])

        async def session():
            async with websockets.connect(url, ssl=self.sup.ssl_context(),
                                          extra_headers={"Authorization": "Bearer " + self.sup.token}
                                          ) as ws:
                await ws.send(b"echo wss-$((6*7))\nexit 5\n")
                out, last = b"", None
                try:
                    while True:
                        m = await asyncio.wait_for(ws.recv(), 20)
                        if isinstance(m, bytes):
                            out += m
                        else:
                            last = json.loads(m)
                except websockets.exceptions.ConnectionClosedOK:
                    pass
                return out, last

        out, last = asyncio.run(session())
        self.assertIn(b"wss-42", out)
        self.assertEqual(last["exit"]["exit_code"], 5, last)

    # ---- the port proxy ----
    def test_port_proxy(self):
        st, _, b = self.sup.request("GET", self.path("/ports/8000/hello.txt"))
        self.assertEqual((st, b), (200, b"hello\n"))
        # by Host: the wildcard certificate names 8000-<id>.<domain>
        name = "8000-%s.%s" % (self.sid, DOMAIN)
        c = Named(name, self.sup.port, timeout=30, context=self.sup.ssl_context())
        try:
            c.request("GET", "/hello.txt", headers={"Authorization": "Bearer " + self.sup.token})
            r = c.getresponse()
            self.assertEqual((r.status, r.read()), (200, b"hello\n"))
        finally:
            c.close()
        # a signed URL says https://, and works without a token
        st, _, b = self.sup.request("GET", self.path("/ports/8000/url?expires=600"))
        self.assertEqual(st, 200, b)
        self.assertTrue(b["url"].startswith("https://8000-%s.%s:%d/?" % (self.sid, DOMAIN,
                                                                          self.sup.port)), b)
        c = Named(name, self.sup.port, timeout=30, context=self.sup.ssl_context())
        try:
            c.request("GET", b["url"].split(":%d" % self.sup.port, 1)[1])
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
            cookie = r.getheader("Set-Cookie") or ""
            self.assertIn("Secure", cookie)
        finally:
            c.close()
        # a WebSocket through the proxy
        url = "wss://127.0.0.1:%d%s/" % (self.sup.port, self.path("/ports/8765"))

        async def echo():
            async with websockets.connect(url, ssl=self.sup.ssl_context(),
                                          extra_headers={"Authorization": "Bearer " + self.sup.token}
                                          ) as ws:
                await ws.send("through-tls")
                return await asyncio.wait_for(ws.recv(), 20)

        self.assertEqual(asyncio.run(echo()), "through-tls")

    # ---- MCP, OpenSandbox, metrics ----
    def test_mcp_streamable_http(self):
        c = self.sup.conn(60)
        try:
            c.request("POST", "/v1/mcp", body=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "tls", "version": "1"}}}).encode(),
                headers={"Authorization": "Bearer " + self.sup.token,
                         "Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream"})
            r = c.getresponse()
            data = r.read()
            self.assertEqual(r.status, 200, data)
            if r.getheader("Content-Type", "").startswith("text/event-stream"):
                data = [ln[5:] for ln in data.decode().splitlines() if ln.startswith("data:")][-1]
            self.assertIn("serverInfo", json.loads(data)["result"])
            self.assertTrue(r.getheader("Mcp-Session-Id"))
        finally:
            c.close()

    def test_opensandbox_sdk(self):
        if not shutil.which("node") or not os.path.isdir(os.path.join(SDK_DIR, "node_modules")):
            self.fail("node or the pinned SDK is missing: run scripts/install-deps")
        env = dict(os.environ, SBX_DOMAIN="https://127.0.0.1:%d/opensandbox" % self.sup.port,
                   SBX_TOKEN=self.sup.token, SBX_IMAGE="host", NODE_EXTRA_CA_CERTS=self.ca)
        p = subprocess.run(["node", os.path.join(SDK_DIR, "sdk_flows.mjs")], cwd=SDK_DIR, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        out = p.stdout.decode(errors="replace")
        self.assertEqual(p.returncode, 0, out + "\n" + self.sup.log())
        self.assertIn("all passed", out)

    def test_metrics_listener(self):
        c = http.client.HTTPSConnection("127.0.0.1", self.sup.metrics_port, timeout=30,
                                        context=self.sup.ssl_context())
        try:
            c.request("GET", "/metrics")
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            self.assertIn(b"# TYPE", r.read())
        finally:
            c.close()

    # ---- what is refused ----
    def test_plain_http_refused(self):
        held = self.sup.conn(30)  # an HTTPS connection kept across
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=30)
            c.request("GET", "/v1/sandboxes", headers={"Authorization": "Bearer " + self.sup.token})
            r = c.getresponse()
            b = json.loads(r.read())
            self.assertEqual((r.status, b["error"]["code"]), (400, "tls_required"), b)
            self.assertIn("https://", b["error"]["message"])
            c.close()
            # bytes that are no handshake: closed, nothing answered
            s = socket.create_connection(("127.0.0.1", self.sup.port), 30)
            s.sendall(b"\x16\x03\x01\x00\x05hello" + os.urandom(64))
            self.assertEqual(s.recv(4096)[:1] in (b"", b"\x15"), True)  # nothing, or an alert
            s.close()
            # a stalled handshake: dropped at --head-timeout, others served meanwhile
            stalled = socket.create_connection(("127.0.0.1", self.sup.port), 30)
            t0 = time.monotonic()
            st, _, b = self.sup.request("GET", self.path(), conn=held)
            self.assertEqual(st, 200, b)
            stalled.settimeout(HEAD_S * 10)
            self.assertEqual(stalled.recv(1), b"")
            self.assertGreaterEqual(time.monotonic() - t0, HEAD_S - 0.5)
            stalled.close()
        finally:
            held.close()
        self.assertIn("plain HTTP to the TLS port", self.sup.log())

    def test_wrong_ca_refused_by_clients(self):
        other = sbx.Client(self.sup.url, self.sup.token, ca_file=self.other_ca)
        with self.assertRaises(ssl.SSLCertVerificationError):
            other.call("GET", "/v1/sandboxes")
        with self.assertRaises(ssl.SSLCertVerificationError):
            WebSocket.connect(other, self.path("/processes/1/ws"))
        # the system's CAs know nothing of the cluster's
        saved = os.environ.pop("SBX_CA_FILE", None)
        try:
            plain = sbx.Client(self.sup.url, self.sup.token)
            with self.assertRaises(ssl.SSLCertVerificationError):
                plain.call("GET", "/v1/sandboxes")
        finally:
            if saved is not None:
                os.environ["SBX_CA_FILE"] = saved
        self.assertEqual(self.client.call("GET", self.path())["id"], self.sid)
        # a name the certificate does not hold
        c = Named("elsewhere.example", self.sup.port, timeout=30, context=self.sup.ssl_context())
        with self.assertRaises(ssl.SSLCertVerificationError):
            c.request("GET", "/healthz")
        c.close()
        with self.assertRaises(ValueError):
            sbx.Client(self.sup.url, self.sup.token, ca_file=os.path.join(self.root, "nowhere"))
        # the CLI: --ca-file, and SBX_CA_FILE
        cli = [sys.executable, os.path.join(TOP, "cli", "sbx"), "--url", self.sup.url,
               "--token", self.sup.token]
        env = {k: v for k, v in os.environ.items() if k != "SBX_CA_FILE"}
        env["SBX_CONFIG"] = os.path.join(self.root, "no-config.json")
        p = subprocess.run(cli + ["--ca-file", self.ca, "--json", "ls"], capture_output=True,
                           text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(self.sid, p.stdout)
        p = subprocess.run(cli + ["ls"], capture_output=True, text=True, timeout=60,
                           env=dict(env, SBX_CA_FILE=self.other_ca))
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", p.stderr)

    # ---- rotation ----
    def test_sighup_rotation(self):
        s = Stream(self.sup, self.sid, {"cmd": "for i in $(seq 1 20); do echo tick-$i; sleep 0.1; done"})
        try:
            self.assertEqual(peer_cn(s.conn.sock), "n1")
            events = s.events()
            for ev, _ in events:
                if ev == "stdout":
                    break
            shutil.copy(self.next_crt, self.live_crt)
            shutil.copy(self.next_key, self.live_key)
            self.sup.signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while "SIGHUP: TLS reloaded" not in self.sup.log():
                self.assertLess(time.monotonic(), deadline, self.sup.log())
                time.sleep(0.05)
            c = self.sup.conn(30)
            c.request("GET", "/healthz")
            c.getresponse().read()
            self.assertEqual(peer_cn(c.sock), "n1-rotated")
            c.close()
            # the stream made before runs to its end on the old certificate
            rest = list(events)
            self.assertEqual(rest[-1][0], "exit", rest[-3:])
            self.assertEqual(peer_cn(s.conn.sock), "n1")
        finally:
            s.close()
        # files that do not load: refused, the certificate in force stays
        with open(self.live_crt, "w") as f:
            f.write("not a certificate\n")
        self.sup.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while "TLS not reloaded" not in self.sup.log():
            self.assertLess(time.monotonic(), deadline, self.sup.log())
            time.sleep(0.05)
        self.assertIn("live.crt: not a PEM certificate", self.sup.log())
        c = self.sup.conn(30)
        c.request("GET", "/healthz")
        self.assertEqual(c.getresponse().status, 200)
        self.assertEqual(peer_cn(c.sock), "n1-rotated")
        c.close()
        shutil.copy(self.next_crt, self.live_crt)

    # ---- between nodes ----
    def test_relay_over_https(self):
        n2 = self.node("n2", self.n2_crt, self.n2_key)
        self.addCleanup(n2.cleanup)
        n3 = self.node("n3", self.n3_crt, self.n3_key)
        n3.ca_file = self.other_ca  # its clients trust the CA that signed it
        self.addCleanup(n3.cleanup)
        n2.start()
        n3.start()
        # n3 warned at start: its peers refuse it
        self.assertIn("does not verify against --tls-ca", n3.log())
        st, _, b = n2.request("POST", self.path("/exec"), {"cmd": "echo via-$((6*7))"})
        self.assertEqual((st, b.get("stdout")), (200, "via-42\n"), b)
        # n1 refuses n3: its certificate is not the cluster CA's
        st, _, b = n3.request("POST", self.path("/exec"), {"cmd": "echo never"})
        self.assertEqual(st, 403, b)
        self.assertIn("did not prove itself", b["error"]["message"])
        self.assertIn("does not verify against the cluster CA", b["error"]["message"])
        # n1 cannot reach n3: the certificate n3 shows does not verify
        st, _, b = self.sup.request("GET", "/v1/sandboxes/sb-n3-0123456789ab")
        self.assertEqual((st, b["error"]["code"]), (502, "node_unreachable"), b)
        self.assertIn("does not verify against the cluster CA", b["error"]["message"])
        # every node's list through n2: n1 answered, n3 not, and why
        st, _, b = n2.request("GET", "/v1/sandboxes?scope=cluster")
        self.assertEqual(st, 200, b)
        self.assertIn("n1", b["nodes"]["answered"])
        bad = {u["name"]: u["error"] for u in b["nodes"]["unanswered"]}
        self.assertIn("n3", bad, b)
        self.assertIn("verify", bad["n3"])
        self.assertIn(self.sid, [x["id"] for x in b["sandboxes"]])
        stop_clean(n2)
        stop_clean(n3)

    # ---- the warning in clear ----
    def test_clear_warning(self):
        warn = "speaks plain HTTP"
        self.assertNotIn(warn, self.sup.log())
        for host, warned in (("127.0.0.1", False), ("0.0.0.0", True)):
            # a network namespace of its own: 0.0.0.0 reaches nothing
            s = Supervisor(SUP, AGENT, pool_size=0, host=host,
                           wrap=["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"',
                                 "sh"], extra=["--node-name", "plain"])
            try:
                s.start()
                self.assertEqual(warn in s.log(), warned, s.log())
                s.signal(signal.SIGINT)
                self.assertEqual(s.wait(30), 0, s.log())
            finally:
                s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)

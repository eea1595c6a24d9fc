"""Streaming uploads, PUT /v1/sandboxes/{id}/files, through a real
sandbox-supervisor, real runc containers and the real agent, over raw
loopback sockets (so framing, Expect: 100-continue and cut connections are
exactly what the test says): round trips with sha256 (empty, small, chunked,
100-continue, a big file up with PUT and back with GET /files with the RSS
of the supervisor and of the agent sampled both ways and MB/s printed), a
cut upload leaving the old file and no temporary file, a half-closed
connection (answered; short of the body: 400), parents
and mode, 409/403/404/400/413, a body evhttp read whole, keep-alive
connections through the input filter, and the hostile path corpus.
Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_UPLOAD_MB (the big round trip, default
512; `make bench` runs 4096 against the release build).
"""
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, read_head, small_asan_quarantine, stop_clean  # noqa: E402
from test_exec_options import agent_pid  # noqa: E402
from test_exec_stream import rss_kb, sanitized  # noqa: E402
from test_files_api import load_corpus, q, unescape  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
UPLOAD_MB = int(os.environ.get("SBX_UPLOAD_MB", "512"))
RSS_LIMIT_KB = 64 * 1024
# Room beyond the big file itself on the state dir's filesystem.
DISK_MARGIN = 256 << 20


def read_response(sock, timeout=120):
    """(status, headers with lowercase keys, body) of one response; a
    100 Continue is returned as it is (body b"")."""
    status, hdrs, rest = read_head(sock, timeout)
    n = int(hdrs.get("content-length", "0"))
    while len(rest) < n:
        c = sock.recv(65536)
        if not c:
            break
        rest += c
    body = rest[:n]
    if hdrs.get("content-type", "").startswith("application/json") and body:
        body = json.loads(body)
    return status, hdrs, body, rest[n:]


class PeakRss:
    """VmRSS of some processes sampled every 20 ms while inside `with`:
    the first value seen (before) and the highest (peak) per name, over
    every `with` block."""

    def __init__(self, pids):
        self.pids = pids
        self.before = {k: rss_kb(p) for k, p in pids.items()}
        self.peak = dict(self.before)
        self.done = threading.Event()
        self.th = None

    def sample(self):
        for k, p in self.pids.items():
            self.peak[k] = max(self.peak[k], rss_kb(p))

    def run(self):
        while not self.done.wait(0.02):
            self.sample()

    def __enter__(self):
        self.done.clear()
        self.th = threading.Thread(target=self.run)
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.th.join()
        self.sample()

    def report(self):
        return ", ".join("%s %d/%d" % (k, self.before[k], self.peak[k]) for k in self.pids)


class Upload:
    """One PUT on its own connection: head, then body pieces, then the answer."""

    def __init__(self, sup, url, length=None, chunked=False, expect=False, extra=""):
        self.sock = socket.create_connection(("127.0.0.1", sup.port), timeout=120)
        self.chunked = chunked
        h = "PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s" % (url, sup.token, extra)
        if chunked:
            h += "Transfer-Encoding: chunked\r\n"
        if length is not None:
            h += "Content-Length: %d\r\n" % length
        if expect:
            h += "Expect: 100-continue\r\n"
        self.sock.sendall((h + "\r\n").encode())

    def send(self, data):
        if self.chunked:
            if data:
                self.sock.sendall(b"%x\r\n" % len(data) + data + b"\r\n")
        else:
            self.sock.sendall(data)

    def finish(self):
        if self.chunked:
            self.sock.sendall(b"0\r\n\r\n")
        return self.answer()

    def answer(self, timeout=120):
        try:
            st, hd, b, _ = read_response(self.sock, timeout)
        finally:
            self.sock.close()
        return st, hd, b

    def close(self):
        self.sock.close()


class UploadBase(unittest.TestCase):
    EXTRA = ["--allow-root"]

    @classmethod
    def setUpClass(cls):
        cls.asan = small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1, extra=cls.EXTRA)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)
        cls.base = "/v1/sandboxes/%s" % cls.sb["id"]

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def sh(self, cmd, timeout=300):
        st, _, b = self.sup.exec(self.sb["id"], cmd=cmd, timeout=timeout)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["exit_code"], 0, b)
        return b["stdout"]

    def url(self, path, **params):
        qs = "path=" + q(path.encode() if isinstance(path, str) else path)
        for k, v in params.items():
            qs += "&%s=%s" % (k, v)
        return "%s/files?%s" % (self.base, qs)

    def put(self, path, data, **params):
        up = Upload(self.sup, self.url(path, **params), length=len(data))
        up.send(data)
        return up.answer()

    def download(self, path):
        st, _, b = self.sup.request("GET", self.url(path), timeout=300)
        self.assertEqual(st, 200, b)
        return b

    def stat(self, path):
        return self.sup.request("GET", "%s/fs/stat?path=%s" % (self.base, q(path.encode())))

    def assert_err(self, res, status, code=None, path=None):
        st, _, b = res
        self.assertEqual(st, status, b)
        self.assertIn("error", b)
        if code:
            self.assertEqual(b["error"]["code"], code, b)
        if path is not None:
            self.assertEqual(b["error"].get("path"), path, b)

    def listing(self, folder):
        return sorted(self.sh("ls -A %s" % folder).split())


class Uploads(UploadBase):
    def test_round_trips(self):
        self.sh("mkdir -p /workspace/rt")
        # Empty, small, a 1 MiB chunked upload in uneven pieces.
        st, hd, b = self.put("/workspace/rt/empty", b"", overwrite=0)
        self.assertEqual((st, b), (201, {"path": "/workspace/rt/empty", "size": 0}))
        self.assertNotEqual(hd.get("connection"), "close")  # its body was read: keep-alive
        self.assertEqual(self.download("/workspace/rt/empty"), b"")
        st, _, b = self.put("/workspace/rt/small", b"hello\n")
        self.assertEqual((st, b), (200, {"path": "/workspace/rt/small", "size": 6}))
        self.assertEqual(self.download("/workspace/rt/small"), b"hello\n")
        data = os.urandom(1 << 20)
        up = Upload(self.sup, self.url("/workspace/rt/chunked"), chunked=True)
        off, step = 0, 1
        while off < len(data):
            up.send(data[off:off + step])
            off += step
            step = step * 7 + 13
        st, _, b = up.finish()
        self.assertEqual((st, b["size"]), (200, len(data)), b)
        self.assertEqual(hashlib.sha256(self.download("/workspace/rt/chunked")).digest(),
                         hashlib.sha256(data).digest())
        # Replacing keeps nothing of the old content; the owner is the
        # sandbox user, the mode the default 0644.
        st, _, b = self.put("/workspace/rt/chunked", b"short")
        self.assertEqual(st, 200, b)
        self.assertEqual(self.download("/workspace/rt/chunked"), b"short")
        st, _, s = self.stat("/workspace/rt/chunked")
        self.assertEqual((s["uid"], s["gid"], s["mode"]), (1000, 1000, 0o644), s)
        self.assertEqual(self.listing("/workspace/rt"), ["chunked", "empty", "small"])
        self.sh("rm -r /workspace/rt")

    def test_half_closed_clients_answered(self):
        """A client that shuts its sending side with its request still gets
        the answer, then the close (the edge once dropped an answer that met
        the client's end in one loop pass): uploads of many sizes, and a
        plain exec, whose answer may come after an interim 100."""
        self.sh("mkdir -p /workspace/hc")
        for i in range(24):
            data = os.urandom(0 if i % 6 == 0 else (i * 104729) % (3 << 20))
            up = Upload(self.sup, self.url("/workspace/hc/f%d" % (i % 3)), length=len(data))
            up.send(data)
            up.sock.shutdown(socket.SHUT_WR)
            st, _, b = up.answer(60)
            self.assertEqual((st, b.get("size") if isinstance(b, dict) else b), (200, len(data)), i)
        body = b'{"argv":["echo","half"]}'
        head = (b"POST %s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                b"Content-Length: %d\r\n\r\n" % (self.base.encode(), self.sup.token.encode(), len(body)))
        for i in range(10):
            s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=60)
            try:
                s.sendall(head + body)
                s.shutdown(socket.SHUT_WR)
                got = b""
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    got += c
            finally:
                s.close()
            while got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"):
                got = got[25:]
            hd, _, rest = got.partition(b"\r\n\r\n")
            self.assertTrue(hd.startswith(b"HTTP/1.1 200 "), (i, got))
            n = int(re.search(rb"(?i)content-length: (\d+)", hd).group(1))
            self.assertEqual(len(rest), n, (i, got))
            self.assertEqual(json.loads(rest)["stdout"], "half\n")
        self.sh("rm -r /workspace/hc")

    def test_expect_continue(self):
        data = os.urandom(300000)
        up = Upload(self.sup, self.url("/workspace/cont.bin"), length=len(data), expect=True)
        st, _, _, rest = read_response(up.sock, 30)
        self.assertEqual((st, rest), (100, b""))
        up.send(data)
        st, _, b = up.answer()
        self.assertEqual((st, b["size"]), (200, len(data)), b)
        self.assertEqual(self.download("/workspace/cont.bin"), data)
        # Refused before the body: the final status comes instead of 100.
        up = Upload(self.sup, self.url("/etc/cont.bin"), length=len(data), expect=True)
        self.assert_err(up.answer(30), 403, "forbidden", "/etc/cont.bin")
        self.sh("rm /workspace/cont.bin")

    def test_big_upload_bounded_memory(self):
        # Issue 4: the file goes up and comes back with its sha256 intact
        # while supervisor and agent each stay under 64 MiB RSS, both ways.
        size = UPLOAD_MB << 20
        fs = os.statvfs(self.sup.state_dir)
        free = fs.f_bavail * fs.f_frsize
        if free < size + DISK_MARGIN:
            self.skipTest("%d MiB upload needs %d MiB free for the sandbox's writable layer "
                          "under %s, %d MiB free" % (UPLOAD_MB, (size + DISK_MARGIN) >> 20,
                                                     self.sup.state_dir, free >> 20))
        block = os.urandom(1 << 20)
        rss = PeakRss({"supervisor": self.sup.proc.pid,
                       "agent": agent_pid(self.sup.state_dir, self.sb["id"])})
        up_hash = hashlib.sha256()
        try:
            with rss:
                up = Upload(self.sup, self.url("/workspace/big.bin"), length=size)
                t0 = time.monotonic()
                for i in range(UPLOAD_MB):
                    # Every MiB differs: a counter in front of the random block.
                    piece = i.to_bytes(8, "little") + block[8:]
                    up_hash.update(piece)
                    up.send(piece)
                st, _, b = up.answer(300)
                up_dt = time.monotonic() - t0
            self.assertEqual((st, b.get("size")), (200, size), b)
            with rss:
                t0 = time.monotonic()
                got, down_hash = self.download_hashed("/workspace/big.bin")
                down_dt = time.monotonic() - t0
            self.assertEqual(got, size, "short download\n" + self.sup.log()[-3000:])
            self.assertEqual(down_hash, up_hash.hexdigest(), "the file came back changed")
            # The bytes on the sandbox's disk, hashed by the sandbox: the
            # upload did not only look right through the download path.
            c = self.sup.conn(600)
            try:
                st, _, b = self.sup.exec(self.sb["id"], conn=c,
                                         cmd="sha256sum /workspace/big.bin", timeout=600)
            finally:
                c.close()
            self.assertEqual((st, b.get("exit_code")), (200, 0), b)
            self.assertEqual(b["stdout"].split()[0], up_hash.hexdigest())
        finally:
            self.sup.exec(self.sb["id"], cmd="rm -f /workspace/big.bin")
        print("round trip %d MiB: up %.0f MB/s, down %.0f MB/s; RSS KiB before/peak: %s%s" %
              (UPLOAD_MB, size / up_dt / 1e6, size / down_dt / 1e6, rss.report(),
               " (supervisor with ASan)" if self.asan else ""), file=sys.stderr)
        # Bounded by the socket's high-water mark and one protocol window,
        # not by the file. ASan's shadow memory and quarantine make the
        # absolute figure meaningless there: its growth is bounded instead.
        for name, binary in (("supervisor", SUP), ("agent", AGENT)):
            rss0, peak = rss.before[name], rss.peak[name]
            if sanitized(binary):
                self.assertLess(peak - rss0, 24 << 10, "%s RSS grew to %d KiB" % (name, peak))
            else:
                self.assertLess(peak, RSS_LIMIT_KB, "%s RSS peaked at %d KiB" % (name, peak))

    def download_hashed(self, path):
        """(bytes, sha256 hex) of GET /files, hashed as it arrives: the
        test never holds the file."""
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=120)
        try:
            # Keep-alive, as curl and http.client ask; a slow reader with
            # "Connection: close" is it_files_api's subject (c67ab50).
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" %
                       (self.url(path), self.sup.token)).encode())
            st, hdrs, rest = read_head(s)
            self.assertEqual(st, 200, hdrs)
            n = int(hdrs["content-length"])
            h = hashlib.sha256(rest)
            got = len(rest)
            mem = memoryview(bytearray(1 << 20))
            while got < n:
                k = s.recv_into(mem, min(len(mem), n - got))
                if not k:
                    break
                h.update(mem[:k])
                got += k
            return got, h.hexdigest()
        finally:
            s.close()

    def test_cut_upload_keeps_old_file(self):
        self.sh("mkdir -p /workspace/cut && printf old-content > /workspace/cut/f")
        before = self.listing("/workspace/cut")
        up = Upload(self.sup, self.url("/workspace/cut/f"), length=10 << 20)
        up.send(os.urandom(3 << 20))
        time.sleep(0.3)
        up.close()
        deadline = time.monotonic() + 10
        while "client went away" not in self.sup.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("PUT files sandbox %s: client went away" % self.sb["id"], self.sup.log())
        # The agent drops its temporary file once the cancel arrives.
        deadline = time.monotonic() + 10
        while self.listing("/workspace/cut") != before and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.listing("/workspace/cut"), before)
        self.assertEqual(self.download("/workspace/cut/f"), b"old-content")
        # Bad chunked framing mid-body: 400, and again nothing changed.
        up = Upload(self.sup, self.url("/workspace/cut/f"), chunked=True)
        up.send(b"x" * 5000)
        up.sock.sendall(b"zz\r\n")
        self.assert_err(up.answer(30), 400, "bad_request", "/workspace/cut/f")
        time.sleep(0.3)
        self.assertEqual(self.listing("/workspace/cut"), before)
        self.assertEqual(self.download("/workspace/cut/f"), b"old-content")
        # A client that half-closes after its body still gets the answer;
        # one that half-closes short of it gets 400, and nothing changes.
        data = os.urandom(3 << 20)
        up = Upload(self.sup, self.url("/workspace/cut/g"), length=len(data))
        up.send(data)
        up.sock.shutdown(socket.SHUT_WR)
        st, _, b = up.answer(60)
        self.assertEqual((st, b.get("size")), (200, len(data)), b)
        self.assertEqual(self.download("/workspace/cut/g"), data)
        up = Upload(self.sup, self.url("/workspace/cut/f"), length=len(data))
        up.send(data[:1 << 20])
        up.sock.shutdown(socket.SHUT_WR)
        self.assert_err(up.answer(60), 400, "bad_request", "/workspace/cut/f")
        time.sleep(0.3)
        self.assertEqual(self.listing("/workspace/cut"), before + ["g"])
        self.assertEqual(self.download("/workspace/cut/f"), b"old-content")
        self.sh("rm -r /workspace/cut")

    def test_parents_mode_and_errors(self):
        st, _, b = self.put("/workspace/pm/a/b/f", b"x", parents=1, mode="0600")
        self.assertEqual(st, 200, b)
        st, _, s = self.stat("/workspace/pm/a/b/f")
        self.assertEqual((s["mode"], s["uid"]), (0o600, 1000), s)
        st, _, s = self.stat("/workspace/pm/a")
        self.assertEqual((s["type"], s["uid"]), ("dir", 1000), s)
        self.assert_err(self.put("/workspace/pm/none/f", b"x"), 404, "not_found",
                        "/workspace/pm/none/f")
        self.assert_err(self.put("/workspace/pm/a/b/f", b"y", overwrite=0), 409, "exists",
                        "/workspace/pm/a/b/f")
        self.assertEqual(self.download("/workspace/pm/a/b/f"), b"x")
        self.assert_err(self.put("/etc/passwd", b"x"), 403, "forbidden", "/etc/passwd")
        self.assert_err(self.put("/workspace/pm/a", b"x"), 400)          # a folder
        self.assert_err(self.put("/workspace/pm/", b"x"), 400)
        self.assert_err(self.put("/workspace", b"x"), 400)
        for bad in ("8", "01000", "4755", "x", ""):
            self.assert_err(self.put("/workspace/pm/m", b"x", mode=bad), 400)
        self.assert_err(self.put("/workspace/pm/m", b"x", bogus=1), 400)
        self.assert_err(self.put("/workspace/pm/m", b"x", parents=2), 400)
        st, _, b = self.sup.request("PUT", "/v1/sandboxes/sb-nope/files?path=/workspace/x",
                                    body=b"abc")
        self.assertEqual(st, 404, b)
        st, _, b = self.sup.request("PUT", self.url("/workspace/pm/m"), body=b"abc",
                                    token="Bearer wrong-token-000000000")
        self.assertEqual(st, 401, b)
        # Framing that could be read two ways: refused, the connection closed.
        for extra in ("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                      "Content-Length: 3\r\nContent-Length: 3\r\n",
                      "Content-Length: -3\r\n", "Transfer-Encoding: gzip\r\n",
                      "Expect: something\r\n"):
            up = Upload(self.sup, self.url("/workspace/pm/m"), extra=extra)
            up.send(b"abc")
            self.assert_err(up.answer(30), 400, "bad_request")
        self.assertNotIn("m", self.listing("/workspace/pm"))
        self.sh("rm -r /workspace/pm")

    def test_connections_keep_alive(self):
        # An upload's answer keeps its connection: the next request on it
        # is answered.
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
        auth = "Authorization: Bearer %s\r\n" % self.sup.token
        try:
            s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 3\r\n\r\nabc"
                       "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" %
                       (self.url("/workspace/nc"), auth, self.base, auth)).encode())
            st, hd, b, rest = read_response(s)
            self.assertEqual((st, hd.get("connection")), (200, None), b)
            if not rest:
                st, _, b, rest = read_response(s)
            else:
                st = int(rest.split(b" ")[1])
            self.assertEqual(st, 200, b)
        finally:
            s.close()
        # One keep-alive connection, GETs and POSTs with bodies; the same
        # socket all along.
        c = self.sup.conn(60)
        try:
            auth = {"Authorization": "Bearer " + self.sup.token}
            sock = None
            for i in range(3):
                c.request("GET", "/healthz")
                r = c.getresponse()
                self.assertEqual((r.status, json.loads(r.read())), (200, {"status": "ok"}))
                body = json.dumps({"cmd": "echo k%d" % i, "timeout": 30}).encode()
                c.request("POST", self.base + "/exec", body=body,
                          headers=dict(auth, **{"Content-Type": "application/json"}))
                r = c.getresponse()
                res = json.loads(r.read())
                self.assertEqual((r.status, res["stdout"]), (200, "k%d\n" % i), res)
                c.request("POST", self.base + "/fs/mkdir",
                          body=json.dumps({"path": "/workspace/ka%d" % i}), headers=auth)
                r = c.getresponse()
                self.assertEqual(r.status, 200, r.read())
                r.read()
                sock = sock or c.sock
                self.assertIs(c.sock, sock)
        finally:
            c.close()
        # Pipelined on one socket: a POST with a body, then a GET.
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
        try:
            body = json.dumps({"path": "/workspace/ka0"}).encode()
            s.sendall(("POST %s/fs/chmod HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (self.base, self.sup.token, len(body) + 13))
                      .encode() + body[:-1] + b', "mode": 448}' +
                      ("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" %
                       (self.base, self.sup.token)).encode())
            st, _, b, rest = read_response(s)
            self.assertEqual(st, 200, b)
            if not rest:
                st, _, b, rest = read_response(s)
            else:
                st = int(rest.split(b" ")[1])
            self.assertEqual(st, 200)
        finally:
            s.close()
        st, _, s2 = self.stat("/workspace/ka0")
        self.assertEqual(s2["mode"], 0o700, s2)
        self.sh("rm -r /workspace/nc /workspace/ka0 /workspace/ka1 /workspace/ka2")

    def test_upload_after_chunked_request(self):
        # A chunked body on another route first: a PUT after it on the same
        # connection is streamed as well, whatever --max-body says.
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
        auth = "Authorization: Bearer %s\r\n" % self.sup.token
        try:
            body = json.dumps({"path": "/workspace/tw"}).encode()
            s.sendall(("POST %s/fs/mkdir HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n"
                       "\r\n%x\r\n" % (self.base, auth, len(body))).encode() + body + b"\r\n0\r\n\r\n")
            st, _, b, _ = read_response(s)
            self.assertEqual(st, 200, b)
            data = os.urandom(5000)
            s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" %
                       (self.url("/workspace/tw/f"), auth, len(data))).encode() + data)
            st, _, b, _ = read_response(s)
            self.assertEqual((st, b.get("size")), (200, 5000), b)
            big = os.urandom((1 << 20) + 10)  # over --max-body
            s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" %
                       (self.url("/workspace/tw/g"), auth, len(big))).encode() + big)
            st, _, b, _ = read_response(s)
            self.assertEqual((st, b.get("size")), (200, len(big)), b)
        finally:
            s.close()
        self.assertEqual(self.download("/workspace/tw/f"), data)
        self.assertEqual(self.download("/workspace/tw/g"), big)
        self.sh("rm -r /workspace/tw")

    def test_hostile_paths_refused(self):
        _, cases, _ = load_corpus()
        n = 0
        for c in cases:
            want = {"deny": 403, "bad": 400, "long": 400}.get(c["policy"])
            if not want:
                continue
            raw = unescape(c["path"])
            query = raw.decode("latin-1") if c["enc"] == "url" else q(raw)
            with self.subTest(case=c["name"]):
                up = Upload(self.sup, "%s/files?path=%s" % (self.base, query), length=4)
                up.send(b"evil")
                st, _, b = up.answer(30)
                self.assertEqual(st, want, (c["name"], b))
                n += 1
        self.assertGreaterEqual(n, 20)
        self.assertEqual(self.sh("cat /etc/hostname 2>/dev/null | head -c 0; echo ok"), "ok\n")


class UploadQuota(UploadBase):
    EXTRA = ["--allow-root", "--max-upload", "1M"]

    def test_quota(self):
        self.sh("mkdir -p /workspace/q && printf keep > /workspace/q/f")
        before = self.listing("/workspace/q")
        # Content-Length over the limit: refused up front, body unsent.
        up = Upload(self.sup, self.url("/workspace/q/f"), length=(1 << 20) + 1)
        self.assert_err(up.answer(30), 413, "too_large", "/workspace/q/f")
        # Chunked: refused once the limit is passed.
        up = Upload(self.sup, self.url("/workspace/q/f"), chunked=True)
        try:
            for _ in range(8):
                up.send(b"q" * (256 << 10))
        except OSError:
            pass
        self.assert_err(up.answer(30), 413, "too_large", "/workspace/q/f")
        time.sleep(0.3)
        self.assertEqual(self.listing("/workspace/q"), before)
        self.assertEqual(self.download("/workspace/q/f"), b"keep")
        # Exactly the limit goes.
        st, _, b = self.put("/workspace/q/f", b"k" * (1 << 20))
        self.assertEqual((st, b.get("size")), (200, 1 << 20), b)
        self.sh("rm -r /workspace/q")


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must name the built binaries", file=sys.stderr)
        sys.exit(2)
    unittest.main(verbosity=2)

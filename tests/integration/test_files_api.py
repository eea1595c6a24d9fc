"""The file API (GET/DELETE /files, /fs/stat, list, mkdir, move, chmod,
search) through a real sandbox-supervisor, real runc containers and the real
agent: a large download with sha256 and Range, every operation and its error
statuses, the hostile path corpus (tests/corpus/hostile_paths.txt) against
every endpoint (refused, or inside the root, and never a byte from outside),
and names with any byte but NUL and "/" round-tripping through URL encoding.
Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_IT_FILE_MB (size of the large download,
default 64).
"""
import base64
import hashlib
import json
import os
import re
import socket
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from test_exec_stream import rss_kb  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
FILE_MB = int(os.environ.get("SBX_IT_FILE_MB", "64"))
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus",
                      "hostile_paths.txt")

# Outside the root: what no answer may ever contain.
SECRET = "outside-secret-5f1c"
OUT = "/outside"


def unescape(text):
    """The corpus's text escapes: \\\\ \\t \\n \\r \\xHH and \\*N{text}."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8", "surrogateescape")
    while i < len(raw):
        c = raw[i:i + 1]
        if c != b"\\":
            out += c
            i += 1
            continue
        n = raw[i + 1:i + 2]
        if n == b"\\":
            out += b"\\"
            i += 2
        elif n == b"t":
            out += b"\t"
            i += 2
        elif n == b"n":
            out += b"\n"
            i += 2
        elif n == b"r":
            out += b"\r"
            i += 2
        elif n == b"x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
        elif n == b"*":
            m = re.match(rb"\\\*(\d+)\{([^}]*)\}", raw[i:])
            out += m.group(2) * int(m.group(1))
            i += m.end()
        else:
            raise ValueError("bad escape in %r" % text)
    return bytes(out)


def load_corpus():
    tree, cases, names = [], [], []
    with open(CORPUS, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            p = line.split("\t")
            if p[0] == "tree":
                tree.append((p[1], p[2], p[3] if len(p) > 3 else ""))
            elif p[0] == "case":
                cases.append({"name": p[1], "enc": p[2], "path": p[3], "policy": p[4],
                              "read": p[5], "write": p[6]})
            elif p[0] == "name":
                names.append(unescape(p[1]))
    return tree, cases, names


# Run inside the sandbox as root (one process per case: a Python start is the
# cost, 0.7 s under gVisor's ptrace platform). argv[1] "snap": print the state
# of everything outside the root that a confused request could change (names,
# modes, sizes, times, contents); "build" (JSON spec in argv[2], base64):
# rebuild the tree below /workspace and, once, the outside folder;
# "snap+build": both, in that order (the state a case left, then the next
# case's tree).
STEP = r"""
import base64, hashlib, json, os, shutil, sys


def snapshot(tops):
    for top in tops:
        for dp, dns, fns in os.walk(top):
            # not into the image's read-only binds (/etc/ssl, ...): they
            # cannot change, and hashing them costs seconds under gVisor
            dns[:] = [d for d in dns if not os.path.ismount(os.path.join(dp, d))]
            for n in sorted(dns + fns):
                p = os.path.join(dp, n)
                st = os.lstat(p)
                h = ""
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "rb") as f:
                        h = hashlib.sha256(f.read()).hexdigest()
                print(p, oct(st.st_mode), st.st_size, st.st_mtime_ns, h)
    for p in ("/etc/passwd", "/etc/shadow", "/etc/hostname", "/run/sandbox"):
        try:
            st = os.lstat(p)
            print(p, oct(st.st_mode), st.st_size, st.st_mtime_ns)
        except OSError as e:
            print(p, e.errno)


def build(spec):
    root, out = "/workspace", spec["out"]
    for p in (os.path.join(root, n) for n in os.listdir(root)):
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    if not os.path.isdir(out):  # once: a case that changed it must be seen
        os.mkdir(out)
        for name, content in spec["outside"].items():
            with open(os.path.join(out, name), "w") as f:
                f.write(content)
    for kind, path, arg in spec["tree"]:
        arg = arg.replace("@ROOT@", root).replace("@OUT@", out)
        p = os.path.join(root, path)
        if kind == "dir":
            os.mkdir(p)
        elif kind == "file":
            with open(p, "w") as f:
                f.write(arg)
        elif kind == "symlink":
            os.symlink(arg, p)
        elif kind == "hardlink":
            try:
                os.link(arg, p)
            except OSError:
                pass
        elif kind == "fifo":
            os.mkfifo(p)
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            os.lchown(os.path.join(dp, n), 1000, 1000)


if "snap" in sys.argv[1]:
    snapshot([json.loads(base64.b64decode(sys.argv[2]))["out"], "/etc"])
if "build" in sys.argv[1]:
    build(json.loads(base64.b64decode(sys.argv[2])))
"""


def q(path_bytes):
    """A path as a query value: every byte that is not plain percent-encoded."""
    return urllib.parse.quote_from_bytes(path_bytes, safe="/")


class FilesApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=1, extra=["--allow-root"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)
        cls.base = "/v1/sandboxes/%s" % cls.sb["id"]

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    # ---- helpers ----
    def sh(self, cmd, root=False, timeout=300):
        kw = {"cmd": cmd, "timeout": timeout}
        if root:
            kw["user"] = "root"
        st, _, b = self.sup.exec(self.sb["id"], **kw)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["exit_code"], 0, b)
        return b["stdout"]

    def py(self, script, *args, root=True):
        argv = ["python3", "-c", script] + list(args)
        kw = {"argv": argv, "timeout": 120}
        if root:
            kw["user"] = "root"
        st, _, b = self.sup.exec(self.sb["id"], **kw)
        self.assertEqual(st, 200, b)
        self.assertEqual(b.get("exit_code"), 0, b)
        return b["stdout"]

    def mode_owner(self, path):
        """"mode:uid" of path, read inside with Python's stat (coreutils'
        stat asks statx for AT_NO_AUTOMOUNT, which gVisor 2022-12 refuses)."""
        return self.py("import os,sys; s=os.lstat(sys.argv[1]); "
                       "print('%o:%d' % (s.st_mode & 0o7777, s.st_uid))", path).strip()

    def get(self, route, query="", headers=None):
        return self.sup.request("GET", "%s/%s%s" % (self.base, route, query), headers=headers,
                                timeout=120)

    def post(self, route, body):
        return self.sup.request("POST", "%s/fs/%s" % (self.base, route), body)

    def delete(self, query):
        return self.sup.request("DELETE", "%s/files%s" % (self.base, query))

    def assert_err(self, res, status, code=None, path=None):
        st, _, b = res
        self.assertEqual(st, status, b)
        self.assertIn("error", b)
        if code:
            self.assertEqual(b["error"]["code"], code, b)
        if path is not None:
            self.assertEqual(b["error"].get("path"), path, b)

    # ---- download ----
    def test_download_large_with_range(self):
        size = FILE_MB << 20
        self.sh("head -c %d /dev/urandom > /workspace/big.bin" % size)
        want = self.sh("sha256sum /workspace/big.bin").split()[0]
        conn = self.sup.conn(120)
        try:
            conn.request("GET", self.base + "/files?path=/workspace/big.bin",
                          headers={"Authorization": "Bearer " + self.sup.token})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("Content-Type"), "application/octet-stream")
            self.assertEqual(int(resp.getheader("Content-Length")), size)
            etag = resp.getheader("ETag")
            self.assertTrue(etag and etag.startswith('"'), etag)
            self.assertTrue(resp.getheader("Last-Modified", "").endswith("GMT"))
            h = hashlib.sha256()
            got = 0
            t0 = time.monotonic()
            head = b""
            while True:
                chunk = resp.read(1 << 20)
                if not chunk:
                    break
                if len(head) < 8192:
                    head += chunk[:8192 - len(head)]
                h.update(chunk)
                got += len(chunk)
            dt = time.monotonic() - t0
        finally:
            conn.close()
        self.assertEqual(got, size)
        self.assertEqual(h.hexdigest(), want)
        print("download %d MiB: %.0f MB/s" % (FILE_MB, size / dt / 1e6), file=sys.stderr)
        # Ranges: inside, to the end, one byte, the last byte.
        tail_hex = self.sh("tail -c 5 /workspace/big.bin | od -An -tx1 | tr -d ' \\n'")
        st, hd, b = self.get("files", "?path=/workspace/big.bin",
                             headers={"Range": "bytes=100-4195"})
        self.assertEqual((st, b), (206, head[100:4196]))
        self.assertEqual(hd["content-range"], "bytes 100-4195/%d" % size)
        self.assertEqual(hd["etag"], etag)
        st, hd, b = self.get("files", "?path=/workspace/big.bin",
                             headers={"Range": "bytes=%d-" % (size - 5)})
        self.assertEqual((st, b.hex()), (206, tail_hex))
        self.assertEqual(hd["content-length"], "5")
        st, hd, b = self.get("files", "?path=/workspace/big.bin",
                             headers={"Range": "bytes=%d-%d" % (size - 1, size + 100)})
        self.assertEqual((st, b.hex()), (206, tail_hex[-2:]))
        # Suffix ranges: the last bytes, or the whole file when longer.
        st, hd, b = self.get("files", "?path=/workspace/big.bin", headers={"Range": "bytes=-5"})
        self.assertEqual((st, b.hex()), (206, tail_hex))
        self.assertEqual(hd["content-range"], "bytes %d-%d/%d" % (size - 5, size - 1, size))
        self.sh("printf abc > /workspace/small")
        st, hd, b = self.get("files", "?path=/workspace/small", headers={"Range": "bytes=-10"})
        self.assertEqual((st, b, hd["content-range"]), (206, b"abc", "bytes 0-2/3"))
        self.sh("rm /workspace/small")
        # Not satisfiable, malformed, several ranges: 416.
        for rng in ("bytes=%d-" % size, "bytes=%d-%d" % (size + 10, size + 20), "bytes=5-1",
                    "bytes=abc", "items=0-1", "bytes=0-1,4-5", "bytes=-", "bytes=-0"):
            st, hd, b = self.get("files", "?path=/workspace/big.bin", headers={"Range": rng})
            self.assertEqual(st, 416, (rng, b))
        st, hd, _ = self.get("files", "?path=/workspace/big.bin",
                             headers={"Range": "bytes=%d-" % size})
        self.assertEqual(hd.get("content-range"), "bytes */%d" % size)
        self.sh("rm /workspace/big.bin")

    def test_download_slow_reader_and_hang_up(self):
        size = FILE_MB << 20
        self.sh("head -c %d /dev/zero > /workspace/slow.bin" % size)
        rss0 = rss_kb(self.sup.proc.pid)
        conn = self.sup.conn(60)
        conn.request("GET", self.base + "/files?path=/workspace/slow.bin",
                     headers={"Authorization": "Bearer " + self.sup.token})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(len(resp.read(1 << 20)), 1 << 20)
        time.sleep(1.5)  # not reading: the agent must be held back
        grown = rss_kb(self.sup.proc.pid) - rss0
        # Bounded by the socket buffers, the 1 MiB high watermark and one
        # protocol window, not by the file (64 MiB).
        self.assertLess(grown, 24 * 1024, "supervisor RSS grew %d KiB" % grown)
        conn.close()  # hang up mid-download
        deadline = time.monotonic() + 10
        while "client went away" not in self.sup.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("client went away", self.sup.log())
        st, _, b = self.get("fs/stat", "?path=/workspace/slow.bin")
        self.assertEqual((st, b["size"]), (200, size))
        self.sh("rm /workspace/slow.bin")

    def slow_raw(self, head, body=b""):
        """Send a raw request, read the answer slowly to its EOF; (head, body)."""
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=60)
        try:
            s.sendall(head.encode() + body)
            data = bytearray()
            while True:
                got = s.recv(64 << 10)
                if not got:
                    break
                data += got
                time.sleep(0.002)  # about 30 MB/s: slower than the server
        finally:
            s.close()
        h, _, rest = bytes(data).partition(b"\r\n\r\n")
        return h.decode("latin-1"), rest

    def test_connection_close_slow_reader_gets_every_byte(self):
        # With "Connection: close" (and for HTTP/1.0) evhttp frees the
        # connection once a reply ends; the last bytes still waiting below
        # the HTTP filter must reach the client first.
        size = 16 << 20
        self.sh("head -c %d /dev/urandom > /workspace/cc.bin" % size)
        want = self.sh("sha256sum /workspace/cc.bin").split()[0]
        auth = "Authorization: Bearer %s\r\n" % self.sup.token
        for i in range(3):
            h, body = self.slow_raw("GET %s/files?path=/workspace/cc.bin HTTP/1.1\r\nHost: t\r\n"
                                    "%sConnection: close\r\n\r\n" % (self.base, auth))
            self.assertIn(" 200 ", h.split("\r\n")[0])
            self.assertIn("Content-Length: %d" % size, h)
            self.assertEqual(len(body), size, "run %d" % i)
            self.assertEqual(hashlib.sha256(body).hexdigest(), want)
        # A streamed exec to an HTTP/1.0 client: no chunks, ended by the close.
        n = 6 << 20
        req = json.dumps({"argv": ["head", "-c", str(n), "/workspace/cc.bin"]}).encode()
        h, body = self.slow_raw("POST %s/exec HTTP/1.0\r\n%sAccept: text/event-stream\r\n"
                                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                % (self.base, auth, len(req)), req)
        self.assertIn(" 200 ", h.split("\r\n")[0])
        out, last = bytearray(), None
        for ev in body.decode().split("\n\n"):
            lines = dict(l.split(": ", 1) for l in ev.split("\n") if ": " in l)
            if lines.get("event") == "stdout":
                out += base64.b64decode(lines["data"], validate=True)
            if "event" in lines:
                last = lines["event"]
        self.assertEqual(last, "exit")
        self.assertEqual(len(out), n)
        self.sh("rm /workspace/cc.bin")

    def test_download_errors(self):
        self.sh("mkdir -p /workspace/dl && printf '' > /workspace/dl/empty")
        st, hd, b = self.get("files", "?path=/workspace/dl/empty")
        self.assertEqual((st, b, hd["content-length"]), (200, b"", "0"))
        self.assert_err(self.get("files", "?path=/workspace/dl/none"), 404, "not_found",
                        "/workspace/dl/none")
        self.assert_err(self.get("files", "?path=/workspace/dl"), 400, "bad_request")
        self.assert_err(self.get("files", "?path=/workspace/dl/"), 400, "bad_request")
        self.assert_err(self.get("files", "?path=/etc/passwd"), 403, "forbidden", "/etc/passwd")
        self.assert_err(self.get("files", ""), 400, "bad_request")
        self.assert_err(self.get("files", "?path=/workspace/a&path=/workspace/b"), 400)
        self.assert_err(self.get("files", "?path=/workspace/a&bogus=1"), 400)
        self.assert_err(self.get("files", "?path=/workspace/top%00/../../etc/passwd"), 400)
        self.assert_err(self.get("files", "?path=workspace/x"), 400)
        self.assert_err(self.get("files", "?path=/workspace/%2e%2e/etc/shadow"), 403)
        st, _, b = self.sup.request("GET", "/v1/sandboxes/sb-nope/files?path=/workspace/x")
        self.assertEqual(st, 404, b)
        self.sh("rm -r /workspace/dl")

    # ---- fs operations ----
    def test_fs_operations(self):
        self.sh("rm -rf /workspace/ops && mkdir -p /workspace/ops/a/b && echo hello > /workspace/ops/a/f.txt"
                " && echo x > /workspace/ops/a/b/g.md && ln -s f.txt /workspace/ops/a/link")
        st, _, b = self.get("fs/stat", "?path=/workspace/ops/a/f.txt")
        self.assertEqual(st, 200, b)
        self.assertEqual((b["path"], b["type"], b["size"], b["mode"]),
                         ("/workspace/ops/a/f.txt", "file", 6, 0o644))
        for k in ("mtime", "mtime_ns", "uid", "gid", "nlink", "ino"):
            self.assertIn(k, b)
        st, _, b = self.get("fs/stat", "?path=/workspace/ops/a/link")
        self.assertEqual((st, b["type"], b["target"]), (200, "symlink", "f.txt"))
        self.assert_err(self.get("fs/stat", "?path=/workspace/ops/none"), 404, "not_found",
                        "/workspace/ops/none")
        self.assert_err(self.get("fs/stat", "?path=/etc"), 403, "forbidden", "/etc")

        st, _, b = self.get("fs/list", "?path=/workspace/ops/a")
        self.assertEqual(st, 200, b)
        self.assertEqual(sorted(e["name"] for e in b["entries"]), ["b", "f.txt", "link"])
        self.assertEqual(b["count"], 3)
        self.assertFalse(b["truncated"])
        st, _, b = self.get("fs/list", "?path=/workspace/ops&depth=3")
        self.assertEqual(st, 200, b)
        self.assertIn("/workspace/ops/a/b/g.md", [e["path"] for e in b["entries"]])
        self.assert_err(self.get("fs/list", "?path=/workspace/ops&depth=0"), 400)
        self.assert_err(self.get("fs/list", "?path=/workspace/ops&depth=33"), 400)
        self.assert_err(self.get("fs/list", "?path=/workspace/ops/none"), 404)
        # A file is a bad request; a file on the way is a missing folder.
        self.assert_err(self.get("fs/list", "?path=/workspace/ops/a/f.txt"), 400)
        self.assert_err(self.get("fs/list", "?path=/workspace/ops/a/f.txt/x"), 404)
        st, _, b = self.post("search", {"path": "/workspace/ops/a/f.txt", "glob": "*"})
        self.assertEqual(st, 400, b)

        st, _, b = self.post("mkdir", {"path": "/workspace/ops/m/n", "parents": True,
                                       "mode": 0o750})
        self.assertEqual((st, b), (200, {"path": "/workspace/ops/m/n"}))
        self.assertEqual(self.mode_owner("/workspace/ops/m/n"), "750:1000")
        self.assert_err(self.post("mkdir", {"path": "/workspace/ops/m/n"}), 409, "exists")
        self.assert_err(self.post("mkdir", {"path": "/workspace/ops/x/y"}), 404)
        self.assert_err(self.post("mkdir", {"path": "/workspace/ops/q", "mode": "0755"}), 400)
        self.assert_err(self.post("mkdir", {"path": "/workspace/ops/q", "bogus": 1}), 400)
        self.assert_err(self.post("mkdir", {"path": "/etc/evil"}), 403, "forbidden")
        self.assertEqual(self.sh("test -e /etc/evil || echo absent").strip(), "absent")

        st, _, b = self.post("move", {"from": "/workspace/ops/a/f.txt",
                                      "to": "/workspace/ops/m/f2.txt"})
        self.assertEqual(st, 200, b)
        self.assertEqual(self.sh("cat /workspace/ops/m/f2.txt", root=True), "hello\n")
        self.sh("echo other > /workspace/ops/m/o.txt", root=True)
        self.assert_err(self.post("move", {"from": "/workspace/ops/m/f2.txt",
                                           "to": "/workspace/ops/m/o.txt"}), 409, "exists")
        st, _, b = self.post("move", {"from": "/workspace/ops/m/f2.txt",
                                      "to": "/workspace/ops/m/o.txt", "overwrite": True})
        self.assertEqual(st, 200, b)
        self.assertEqual(self.sh("cat /workspace/ops/m/o.txt", root=True), "hello\n")
        self.assert_err(self.post("move", {"from": "/workspace/ops/none", "to": "/workspace/ops/z"}),
                        404)
        self.assert_err(self.post("move", {"from": "/workspace", "to": "/tmp/ws"}), 403)
        self.assert_err(self.post("move", {"from": "/workspace/ops/m/o.txt", "to": "/etc/o"}), 403)
        self.assert_err(self.post("move", {"from": "/workspace/ops/m/o.txt", "to": "/tmp"}), 403)

        st, _, b = self.post("chmod", {"path": "/workspace/ops/m/o.txt", "mode": 0o600})
        self.assertEqual(st, 200, b)
        self.assertEqual(self.mode_owner("/workspace/ops/m/o.txt").split(":")[0], "600")
        self.assert_err(self.post("chmod", {"path": "/workspace/ops/m/o.txt", "mode": 0o4755}), 400)
        self.assert_err(self.post("chmod", {"path": "/workspace/ops/m/o.txt"}), 400)
        self.assert_err(self.post("chmod", {"path": "/workspace/ops/none", "mode": 0o600}), 404)

        st, _, b = self.post("search", {"path": "/workspace/ops", "glob": "*.md"})
        self.assertEqual(st, 200, b)
        self.assertEqual([e["path"] for e in b["entries"]], ["/workspace/ops/a/b/g.md"])
        st, _, b = self.post("search", {"path": "/workspace/ops", "glob": "*", "max": 2})
        self.assertEqual((st, b["count"], b["truncated"]), (200, 2, True))
        self.assert_err(self.post("search", {"path": "/workspace/ops", "glob": ""}), 400)
        self.assert_err(self.post("search", {"path": "/", "glob": "*"}), 403)

        self.assert_err(self.delete("?path=/workspace/ops/m"), 409, "exists")
        st, _, _ = self.delete("?path=/workspace/ops/m/o.txt")
        self.assertEqual(st, 204)
        st, _, _ = self.delete("?path=/workspace/ops&recursive=1")
        self.assertEqual(st, 204)
        self.assert_err(self.delete("?path=/workspace/ops"), 404)
        self.assert_err(self.delete("?path=/workspace"), 403, "forbidden", "/workspace")
        self.assert_err(self.delete("?path=/workspace/..&recursive=1"), 403)
        self.assert_err(self.delete("?path=/tmp/&recursive=1"), 403)
        self.assert_err(self.delete("?path=/workspace/x&recursive=2"), 400)
        self.assertEqual(self.sh("test -d /workspace && test -d /tmp && echo ok").strip(), "ok")

    # ---- names ----
    def test_names_round_trip(self):
        _, _, names = load_corpus()
        self.assertGreater(len(names), 20)
        spec = [base64.b64encode(n).decode() for n in names]
        self.py(r"""
import base64, os, sys
os.makedirs("/workspace/names", exist_ok=True)
for i, n in enumerate(sys.argv[1:]):
    with open(b"/workspace/names/" + base64.b64decode(n), "wb") as f:
        f.write(b"content-%d" % i)
    os.lchown(b"/workspace/names/" + base64.b64decode(n), 1000, 1000)
os.lchown("/workspace/names", 1000, 1000)
""", *spec)
        st, _, b = self.get("fs/list", "?path=/workspace/names")
        self.assertEqual(st, 200, b)
        listed = set()
        for e in b["entries"]:
            raw = base64.b64decode(e["name_b64"]) if "name_b64" in e else e["name"].encode()
            listed.add(raw)
        self.assertEqual(listed, set(names))
        for i, n in enumerate(names):
            p = b"/workspace/names/" + n
            st, _, body = self.get("files", "?path=" + q(p))
            self.assertEqual((st, body), (200, b"content-%d" % i), n)
            st, _, sb = self.get("fs/stat", "?path=" + q(p))
            self.assertEqual(st, 200, (n, sb))
            raw = base64.b64decode(sb["path_b64"]) if "path_b64" in sb else sb["path"].encode()
            self.assertEqual(raw, os.path.normpath(p) if n not in (b"...",) else p)
            try:
                text = n.decode("utf-8")
            except UnicodeDecodeError:
                continue  # JSON carries only UTF-8: query routes cover these
            st, _, mb = self.post("move", {"from": "/workspace/names/" + text,
                                           "to": "/workspace/names/" + text + ".moved"})
            self.assertEqual(st, 200, (n, mb))
            st, _, body = self.get("files", "?path=" + q(p + b".moved"))
            self.assertEqual((st, body), (200, b"content-%d" % i), n)
        st, _, _ = self.delete("?path=/workspace/names&recursive=1")
        self.assertEqual(st, 204)

    # ---- hostile corpus ----
    def test_hostile_corpus(self):
        tree, cases, _ = load_corpus()
        self.assertGreaterEqual(len(cases), 40)
        shadow = self.sh("head -c 64 /etc/shadow 2>/dev/null || true", root=True)
        forbidden = [SECRET.encode(), b"root:x:0:0:"]
        if len(shadow) > 16:
            forbidden.append(shadow.encode()[:40])
        inside = {"inside-top", "inside-dir-file", "inside-deep", "outside-shared"}
        spec = {"out": OUT,
                "outside": {"secret": SECRET, "passwd": SECRET + "-passwd",
                            "shared": "outside-shared"},
                # what "move to" moves onto each case's path
                "tree": [[k, p, a] for k, p, a in tree if k != "procfs"] + [["file", "mvsrc", "mv"]]}
        b64 = base64.b64encode(json.dumps(spec).encode()).decode()
        self.py(STEP, "build", b64)
        before = self.py(STEP, "snap", b64)
        checked = 0
        for c in cases:
            with self.subTest(case=c["name"]):
                checked += self.run_case(c, forbidden, inside)
                # what the case left outside, then the next case's tree
                after = self.py(STEP, "snap+build", b64)
                self.assertEqual(after, before, "case %s changed something outside" % c["name"])
        self.assertGreater(checked, 40 * 8)
        self.py("import shutil; shutil.rmtree('%s')" % OUT)

    def run_case(self, c, forbidden, inside):
        raw = unescape(c["path"])
        if c["enc"] == "url":
            query = raw.decode("latin-1")  # the raw query value, sent as is
            decoded = urllib.parse.unquote_to_bytes(raw.replace(b"+", b" "))
        else:
            query = q(raw)
            decoded = raw
        pol = c["policy"]
        want = {"deny": 403, "bad": 400, "long": 400}.get(pol)
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        n = 0

        def look(res, what, json_route, exact=True):
            st, _, body = res
            blob = body if isinstance(body, bytes) else json.dumps(body).encode()
            for f in forbidden:
                self.assertNotIn(f, blob, "%s %s leaked %r" % (c["name"], what, f))
            if want and exact and (not json_route or text is not None):
                self.assertEqual(st, want, (c["name"], what, body))
            self.assertLess(st, 500, (c["name"], what, body))
            if what == "GET files" and st == 200:
                self.assertIn(body.decode("latin-1"), inside, c["name"])
            return st

        look(self.get("files", "?path=" + query), "GET files", False)
        look(self.get("fs/stat", "?path=" + query), "stat", False)
        look(self.get("fs/list", "?path=" + query + "&depth=3"), "list", False)
        n += 3
        if text is not None:
            look(self.post("search", {"path": text, "glob": "*"}), "search", True)
            look(self.post("chmod", {"path": text, "mode": 0o777}), "chmod", True)
            look(self.post("mkdir", {"path": text + "/made", "parents": True}), "mkdir", True,
                 exact=False)
            look(self.post("move", {"from": text, "to": "/workspace/moved"}), "move from", True)
            look(self.post("move", {"from": "/workspace/mvsrc", "to": text,
                                    "overwrite": True}), "move to", True)
            n += 5
        look(self.delete("?path=" + query + "&recursive=1"), "DELETE", False)
        return n + 1


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must name the built binaries", file=sys.stderr)
        sys.exit(2)
    unittest.main(verbosity=2)

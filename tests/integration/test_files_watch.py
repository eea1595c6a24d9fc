"""GET /fs/watch through a real sandbox-supervisor, a real runc container and
the real agent: SSE events with absolute paths in order for changes made by
commands (as the sandbox user) and through the file API, a folder made later
watched too, the end when the watched folder goes, JSON errors before the
stream starts, NDJSON, a reader that stops (overflow later, bounded
supervisor memory), clients that disconnect (the agent's watch goes with
them), the keepalive comment while idle; and the owner and modes of what
POST /fs/mkdir and PUT /files make with parents (issue 4).

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_IT_WATCH_FILES (files the stopped
reader's command makes and removes, default 30000).
"""
import base64
import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import RUNTIME, Supervisor, containers_under, stop_clean  # noqa: E402
from test_exec_stream import rss_kb, sanitized  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
KEEPALIVE_S = 15
# Files the stopped-reader test makes and removes (two events each). The
# events must be more than the whole path can hold, or none is lost: the
# kernel's queue (16,384) and the agent's (1,024), the credit and buffers
# of the supervisor and the sockets' buffers (about 46,000 events here,
# mostly TCP's send buffer): 120,000.
FILES = int(os.environ.get("SBX_IT_WATCH_FILES", "60000"))


class Watch:
    """One GET /fs/watch; next() gives (event, payload) with a deadline.
    SSE comments (": ...") are kept in self.comments."""

    def __init__(self, sup, sid, path, recursive=True, accept="text/event-stream",
                 rcvbuf=None):
        self.accept = accept
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connect, so the advertised window stays small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", sup.port))
        q = "?path=" + urllib.parse.quote(path) + ("&recursive=1" if recursive else "")
        req = ("GET /v1/sandboxes/%s/fs/watch%s HTTP/1.1\r\nHost: t\r\n"
               "Authorization: Bearer %s\r\nAccept: %s\r\n\r\n" % (sid, q, sup.token, accept))
        self.sock.sendall(req.encode())
        self.raw = b""      # undecoded bytes (chunked framing)
        self.body = b""     # decoded body not yet parsed
        self.eof = False
        self.ended = False  # the last chunk came
        self.comments = []
        self.status, self.headers = self._head()

    def _recv(self, timeout):
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            return False
        if not chunk:
            self.eof = True
            return False
        self.raw += chunk
        return True

    def _head(self):
        deadline = time.monotonic() + 30
        while b"\r\n\r\n" not in self.raw:
            if not self._recv(max(0.01, deadline - time.monotonic())) and \
                    (self.eof or time.monotonic() > deadline):
                raise AssertionError("no response head: %r" % self.raw[:200])
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return int(lines[0].split()[1]), hdrs

    def json_body(self):
        """A non-streamed answer (Content-Length)."""
        n = int(self.headers["content-length"])
        deadline = time.monotonic() + 30
        while len(self.raw) < n and time.monotonic() < deadline:
            self._recv(1)
        return json.loads(self.raw[:n])

    def _dechunk(self):
        """Move complete chunks from raw to body; True once the last came."""
        while not self.ended:
            i = self.raw.find(b"\r\n")
            if i < 0:
                break
            size = int(self.raw[:i].split(b";")[0], 16)
            if len(self.raw) < i + 2 + size + 2:
                break
            self.body += self.raw[i + 2:i + 2 + size]
            self.raw = self.raw[i + 2 + size + 2:]
            self.ended = size == 0
        return self.ended

    def next(self, timeout=10):
        """(event, payload dict) or None at the stream's end; raises after
        timeout without an event."""
        deadline = time.monotonic() + timeout
        sep = b"\n\n" if self.accept == "text/event-stream" else b"\n"
        while True:
            ended = self._dechunk()
            i = self.body.find(sep)
            if i >= 0:
                raw, self.body = self.body[:i], self.body[i + len(sep):]
                if sep == b"\n":
                    o = json.loads(raw)
                    return o.pop("event"), o
                ev, data = None, None
                for line in raw.split(b"\n"):
                    if line.startswith(b":"):
                        self.comments.append(line)
                    elif line.startswith(b"event: "):
                        ev = line[7:].decode()
                    elif line.startswith(b"data: "):
                        data = json.loads(line[6:])
                if ev is None:
                    continue  # a comment only
                return ev, data
            if ended:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no event within %ss (have %r)" % (timeout, self.body[-200:]))
            if not self._recv(left) and self.eof:
                if self.body or self.raw:
                    raise AssertionError("connection closed mid-stream: %r" % self.raw[-200:])
                return None

    def close(self):
        self.sock.close()


class FilesWatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.asan = sanitized(SUP)
        if cls.asan:  # keep ASan's quarantine from hiding what is measured
            opts = os.environ.get("ASAN_OPTIONS", "")
            os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "quarantine_size_mb=8"
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)
        cls.base = "/v1/sandboxes/%s" % cls.sb["id"]
        cid = [c for c, _ in containers_under(cls.sup.state_dir) if cls.sb["id"] in c][0]
        cls.agent_pid = json.loads(subprocess.run([RUNTIME, "state", cid], capture_output=True,
                                                  text=True).stdout)["pid"]
        # A watch on a quiet folder from the start: the last test reads its
        # keepalive comments.
        cls.mkdir_cls("/tmp/quiet")
        cls.quiet = Watch(cls.sup, cls.sb["id"], "/tmp/quiet", recursive=False)
        cls.quiet_t0 = time.monotonic()

    @classmethod
    def tearDownClass(cls):
        cls.quiet.close()
        stop_clean(cls.sup)

    @classmethod
    def mkdir_cls(cls, path, **kw):
        body = dict(path=path, parents=True, **kw)
        st, _, b = cls.sup.request("POST", cls.base + "/fs/mkdir", body)
        assert st == 200, (st, b)

    # ---- helpers ----
    def sh(self, cmd, root=False):
        kw = {"cmd": cmd, "timeout": 120}
        if root:
            kw["user"] = "root"
        st, _, b = self.sup.exec(self.sb["id"], **kw)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["exit_code"], 0, b)
        return b["stdout"]

    def api(self, method, route, body=None):
        return self.sup.request(method, self.base + route, body)

    def watch(self, path, **kw):
        w = Watch(self.sup, self.sb["id"], path, **kw)
        self.addCleanup(w.close)
        return w

    def ready(self, w, path):
        self.assertEqual(w.status, 200, w.headers)
        ev = w.next()
        self.assertEqual(ev, ("ready", {"type": "ready", "path": path, "dir": True}))

    def expect(self, w, want, skip=("modify",)):
        """Events in want ((type, path[, from, to])) in this order; events
        whose type is in skip and not expected next are passed over."""
        seen = []
        for item in want:
            while True:
                ev = w.next()
                self.assertIsNotNone(ev, "stream ended; seen %r, want %r" % (seen, item))
                name, d = ev
                seen.append(ev)
                self.assertEqual(name, d["type"])
                got = (name, d["path"]) + ((d["from"], d["to"]) if name == "move" else ())
                if got == item:
                    break
                if name in skip:
                    continue
                self.fail("got %r, want %r (seen %r)" % (got, item, seen))
        return seen

    def inotify_fds(self):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.agent_pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (self.agent_pid, fd)) == "anon_inode:inotify"
            except OSError:
                pass
        return n

    # ---- tests ----
    def test_changes_in_order_with_absolute_paths(self):
        d = "/workspace/w"
        self.mkdir_cls(d)
        w = self.watch(d)
        self.ready(w, d)
        # A command as the sandbox user.
        self.sh("echo hi > %s/a.txt" % d)
        seen = self.expect(w, [("create", d + "/a.txt"), ("modify", d + "/a.txt")], skip=())
        self.assertFalse(seen[0][1]["dir"])
        self.sh("mv %s/a.txt %s/b.txt" % (d, d))
        self.expect(w, [("move", d + "/b.txt", d + "/a.txt", d + "/b.txt")])
        # A folder made later is watched: a file made in it reports.
        self.sh("mkdir %s/sub && sleep 0.3 && echo x > %s/sub/in.txt" % (d, d))
        seen = self.expect(w, [("create", d + "/sub"), ("create", d + "/sub/in.txt")])
        self.assertTrue(seen[0][1]["dir"])
        # The file API.
        st, _, b = self.api("DELETE", "/files?path=" + d + "/b.txt")
        self.assertEqual(st, 204, b)
        self.expect(w, [("delete", d + "/b.txt")])
        st, _, b = self.api("POST", "/fs/move", {"from": d + "/sub/in.txt", "to": d + "/m.txt"})
        self.assertEqual(st, 200, b)
        self.expect(w, [("move", d + "/m.txt", d + "/sub/in.txt", d + "/m.txt")])
        st, _, b = self.api("POST", "/fs/mkdir", {"path": d + "/api"})
        self.assertEqual(st, 200, b)
        seen = self.expect(w, [("create", d + "/api")])
        self.assertTrue(seen[-1][1]["dir"])
        # Moved out of the tree: "to" is null.
        self.sh("mv %s/m.txt /tmp/m.txt" % d)
        seen = self.expect(w, [("move", d + "/m.txt", d + "/m.txt", None)])

    def test_non_utf8_names_have_b64(self):
        d = "/workspace/bytes"
        self.mkdir_cls(d)
        w = self.watch(d, recursive=False)
        self.ready(w, d)
        self.sh("touch %s/$(printf 'x\\377y')" % d)
        name, ev = w.next()
        self.assertEqual(name, "create")
        self.assertEqual(base64.b64decode(ev["path_b64"]), (d + "/x\xffy").encode("latin-1"))

    def test_deleting_the_folder_ends_the_stream(self):
        d = "/workspace/gone"
        self.mkdir_cls(d + "/inner")
        w = self.watch(d)
        self.ready(w, d)
        st, _, b = self.api("DELETE", "/files?path=%s&recursive=1" % d)
        self.assertEqual(st, 204, b)
        events = []
        while True:
            ev = w.next()
            if ev is None:
                break
            events.append(ev)
        self.assertTrue(events, "no events")
        self.assertEqual(events[-1], ("end", {"reason": "deleted", "path": d}))
        self.assertIn(("delete", d + "/inner"), [(n, e.get("path")) for n, e in events[:-1]])

    def test_errors_before_the_stream_are_json(self):
        self.sh("echo f > /workspace/afile")
        for path, status, code in (("/etc", 403, "forbidden"),
                                   ("/workspace/missing", 404, "not_found"),
                                   ("/workspace/afile", 400, "bad_request")):
            w = self.watch(path)
            self.assertEqual(w.status, status, path)
            self.assertTrue(w.headers["content-type"].startswith("application/json"))
            self.assertEqual(w.json_body()["error"]["code"], code, path)
        for q in ("?path=/workspace&recursive=maybe", "?recursive=1", "?path=/workspace&x=1"):
            st, h, b = self.api("GET", "/fs/watch" + q)
            self.assertEqual(st, 400, q)
            self.assertEqual(b["error"]["code"], "bad_request", q)

    def test_ndjson(self):
        d = "/workspace/nd"
        self.mkdir_cls(d)
        w = self.watch(d, accept="application/x-ndjson")
        self.assertEqual(w.headers["content-type"], "application/x-ndjson")
        self.assertEqual(w.next(), ("ready", {"type": "ready", "path": d, "dir": True}))
        self.sh("mkdir %s/x" % d)
        self.assertEqual(w.next(), ("create", {"type": "create", "path": d + "/x", "dir": True}))

    def test_reader_that_stops_gets_overflow_with_bounded_memory(self):
        d = "/workspace/many"
        n = FILES
        self.mkdir_cls(d)
        # A small receive window, so what waits is in our buffers, not the
        # kernel's: the agent must stop and lose events as "overflow".
        w = self.watch(d, recursive=False, rcvbuf=4096)
        self.ready(w, d)
        rss0 = rss_kb(self.sup.proc.pid)
        peak = rss0
        t0 = time.monotonic()
        # 2n events (create, delete); nobody reads meanwhile.
        prog = ("import os\nd=%r\nfor i in range(%d):\n"
                "    p=os.path.join(d,'f%%06d'%%i); open(p,'w').close(); os.unlink(p)\n" % (d, n))
        st, _, b = self.sup.exec(self.sb["id"], argv=["python3", "-c", prog], timeout=120)
        self.assertEqual((st, b.get("exit_code")), (200, 0), b)
        for _ in range(10):
            peak = max(peak, rss_kb(self.sup.proc.pid))
            time.sleep(0.1)
        stalled = peak
        counts = {}
        overflow_at = None
        while True:
            name, ev = w.next(timeout=20)
            counts[name] = counts.get(name, 0) + 1
            if name == "overflow":
                overflow_at = sum(counts.values())
                self.assertEqual(ev, {"type": "overflow", "path": d, "dir": True})
                break
            self.assertIn(name, ("create", "delete"))
            peak = max(peak, rss_kb(self.sup.proc.pid))
        # After an overflow, changes are reported again: a change made once
        # the overflow came is seen. The agent reads only what its queue has
        # room for, so the backlog the kernel still held drains without a
        # loss; a loss of its own would be a further overflow. One more
        # touch after such an overflow is allowed (a change made while the
        # kernel's queue is full again is lost there, and said so), no more:
        # an agent that read more than it could queue lost events on every
        # read of that backlog (ASan: 25 overflows, no create).
        touched = []

        def touch():
            touched.append("%s/after%d" % (d, len(touched)))
            self.sh("touch %s" % touched[-1])

        touch()
        while True:
            name, ev = w.next(timeout=20)
            if name == "create" and ev["path"] in touched:
                break
            if name == "overflow":
                self.assertLess(len(touched), 2, "a second overflow after the first: %s" % ev)
                touch()
        peak = max(peak, rss_kb(self.sup.proc.pid))
        print("\nstopped reader: %d events made, %d delivered before overflow, supervisor RSS "
              "%d KiB -> %d KiB while stopped, peak %d KiB%s, %.1fs; reported again after %d "
              "touch(es)" % (2 * n, overflow_at - 1, rss0, stalled, peak,
                             " (ASan build)" if self.asan else "", time.monotonic() - t0,
                             len(touched)), file=sys.stderr)
        self.assertLess(overflow_at, 2 * n)
        if self.asan:
            # ASan's allocator keeps freed blocks (quarantine, per-size
            # caches): only a sanity bound here, the figure is release's.
            self.assertLess(peak - rss0, 48 << 10, "supervisor memory grew with a stopped reader")
        else:
            self.assertLess(peak - rss0, 16 << 10, "supervisor memory grew with a stopped reader")
            self.assertLess(peak, 64 << 10, "supervisor RSS over 64 MiB")

    def test_disconnects_cancel_the_agent_watch(self):
        d = "/workspace/cycles"
        self.mkdir_cls(d + "/a/b")
        base = self.inotify_fds()
        for i in range(50):
            w = Watch(self.sup, self.sb["id"], d)
            try:
                self.ready(w, d)
            finally:
                w.close()
        deadline = time.monotonic() + 10
        while self.inotify_fds() > base:
            self.assertLess(time.monotonic(), deadline,
                            "inotify instances left in the agent: %d, before %d"
                            % (self.inotify_fds(), base))
            time.sleep(0.05)
        w = self.watch(d)
        self.ready(w, d)
        self.sh("touch %s/a/b/still" % d)
        self.expect(w, [("create", d + "/a/b/still")])

    def test_parents_made_by_the_api_belong_to_the_sandbox_user(self):
        d = "/workspace/own"
        st, _, b = self.api("POST", "/fs/mkdir", {"path": d + "/a/b", "parents": True,
                                                  "mode": 0o750})
        self.assertEqual(st, 200, b)
        for p, mode in ((d, 0o755), (d + "/a", 0o755), (d + "/a/b", 0o750)):
            st, _, s = self.api("GET", "/fs/stat?path=" + p)
            self.assertEqual(st, 200, s)
            self.assertEqual((s["uid"], s["gid"], s["mode"]), (1000, 1000, mode), p)
        # The default user reads and writes inside.
        self.sh("touch %s/a/b/t && ls %s/a/b" % (d, d))
        st, _, s = self.api("GET", "/fs/stat?path=" + d + "/a/b/t")
        self.assertEqual((s["uid"], s["gid"]), (1000, 1000))
        # An upload with parents: the file and the folders it made.
        st, _, b = self.sup.request("PUT", self.base + "/files?path=%s/up/x/f.txt&parents=1" % d,
                                    b"content")
        self.assertIn(st, (200, 201), b)
        for p, mode in ((d + "/up", 0o755), (d + "/up/x", 0o755), (d + "/up/x/f.txt", 0o644)):
            st, _, s = self.api("GET", "/fs/stat?path=" + p)
            self.assertEqual(st, 200, s)
            self.assertEqual((s["uid"], s["gid"], s["mode"]), (1000, 1000, mode), p)

    def test_z_keepalive_while_idle(self):
        # Runs last: the quiet watch has been open since setUpClass.
        w = self.quiet
        self.ready(w, "/tmp/quiet")
        left = KEEPALIVE_S + 2 - (time.monotonic() - self.quiet_t0)
        if left > 0:
            time.sleep(left)
        self.sh("touch /tmp/quiet/now")
        self.assertEqual(w.next(), ("create", {"type": "create", "path": "/tmp/quiet/now",
                                               "dir": False}))
        self.assertIn(b": keepalive", w.comments)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("SBX_SUPERVISOR and SBX_AGENT must be set")
    unittest.main(verbosity=2)

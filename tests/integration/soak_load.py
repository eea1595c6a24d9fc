"""The soak's load (test_soak.py): client threads, each with a sandbox of
its own (made again when it fails or is recycled) and a seeded random
choice among what users do: execs (their output and exit checked),
streamed uploads (chunked) and downloads with sha256, background
processes whose output is read on by offset, a web server inside reached
through the port proxy, snapshots restored at once or at the end, MCP
calls to @modelcontextprotocol/server-everything (tests/mcp-servers), and
two client faults: a slow reader (a small receive buffer read a piece at a
time) and a reset mid-stream (SO_LINGER 0 halfway through an upload or a
download). Every write the supervisor acknowledges goes into the ledger
with its checksum; every check of an answer's content that fails is a
problem. Stdlib only; a test's helper, never the product.
"""
import base64
import hashlib
import json
import os
import random
import socket
import threading
import time
from urllib.parse import quote

from soak_clients import Client, reset, sse_events

TICKER = "i=0; while [ $i -lt 1000000 ]; do echo t$i; i=$((i+1)); sleep 0.05; done"
WEB = ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/workspace/www"]


def files_path(sid, path, extra=""):
    return "/v1/sandboxes/%s/files?path=%s%s" % (sid, quote(path), extra)


def pieces(data, size=65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]


class Worker(threading.Thread):
    def __init__(self, idx, seed, node, ledger, stop, mcp=None):
        super().__init__(daemon=True, name="soak-client-%d" % idx)
        self.idx, self.rng = idx, random.Random("%s:client:%d" % (seed, idx))
        self.node, self.ledger, self.stop = node, ledger, stop
        self.c = Client(node, ledger, self.name)
        self.sid = None
        self.procs = {}  # pid -> next line number expected, offset
        self.web = False
        self.n = 0
        self.mcp = mcp  # a sandbox id running server-everything (the MCP client's)

    # ---- the sandbox ----
    def create(self, body=None, route="POST sandboxes"):
        ans = self.c.call(route, "POST", "/v1/sandboxes", body or {"timeout": 3600}, ok=(201,),
                          deadline=90)
        return ans.json["id"] if ans.ok else None

    def delete(self, sid):
        """DELETE until the answer says it is gone (a cut one is asked again)."""
        with self.ledger.lock:
            if sid in self.ledger.sandboxes:
                self.ledger.sandboxes[sid]["deleted"] = True
        for _ in range(20):
            ans = self.c.call("DELETE sandbox", "DELETE", "/v1/sandboxes/" + sid, ok=(200, 204, 404))
            if ans.ok:
                return
            time.sleep(0.5)
        self.ledger.problem("%s: DELETE %s never succeeded" % (self.name, sid))

    def state(self, sid):
        """The sandbox as GET shows it: "running", "failed", "gone" (404),
        or None (no answer to go by: the supervisor was killed)."""
        ans = self.c.call("GET sandbox", "GET", "/v1/sandboxes/" + sid, ok=(200, 404))
        if not ans.ok:
            return None
        return "gone" if ans.status == 404 else ans.json.get("state")

    def gone(self, ans, what):
        """An answer that is neither ok nor cut: a busy or full node's 503
        or 507 is a clear refusal; else the sandbox is looked at. Running:
        a 504 (a deadline kept) is fine, anything else a problem. Failed or
        gone: fine when the soak killed its agent (the sandbox is deleted
        and a new one made), else a problem (and the same)."""
        if ans.outcome in ("cut", "hang", "dropped", "bad") or ans.status in (503, 507):
            return
        sid = self.sid
        st = self.state(sid)
        if st is None:
            return
        if st == "running":
            if ans.status != 504:
                self.ledger.problem("%s: %s on %s (running): %s %s" % (
                    self.name, what, sid, ans.status, ans.body[:300]))
            return
        with self.ledger.lock:
            sb = self.ledger.sandboxes[sid]
            if sb["failed"] is None:
                sb["failed"] = "not by the soak: %s" % st
                self.ledger.problem("%s: sandbox %s is %s with no fault of the soak's (%s: %s %s)" % (
                    self.name, sid, st, what, ans.status, ans.body[:300]))
        self.sid, self.procs, self.web = None, {}, False
        self.delete(sid)

    # ---- actions ----
    def act_exec(self):
        token = "x%08x" % self.rng.getrandbits(32)
        code = self.rng.randrange(3)
        ans = self.c.call("POST exec", "POST", "/v1/sandboxes/%s/exec" % self.sid,
                          {"cmd": "echo %s; exit %d" % (token, code), "timeout": 20}, deadline=60)
        if not ans.ok:
            return self.gone(ans, "exec")
        if ans.json.get("stdout") != token + "\n" or ans.json.get("exit_code") != code:
            self.ledger.problem("%s: exec on %s answered %r" % (self.name, self.sid, ans.json))

    def act_exec_timeout(self):
        ans = self.c.call("POST exec", "POST", "/v1/sandboxes/%s/exec" % self.sid,
                          {"cmd": "sleep 30", "timeout": 1}, deadline=60)
        if not ans.ok:
            return self.gone(ans, "exec with a timeout")
        if not ans.json.get("timed_out"):
            self.ledger.problem("%s: exec past its timeout answered %r" % (self.name, ans.json))

    def act_upload(self, path=None, data=None):
        self.n += 1
        path = path or "/workspace/soak/f%d-%d" % (self.idx, self.n)
        data = data if data is not None else os.urandom(self.rng.choice((4096, 65536, 1 << 20, 3 << 20)))
        sha = hashlib.sha256(data).hexdigest()
        chunked = self.rng.random() < 0.5
        headers = {"Content-Type": "application/octet-stream"}
        if not chunked:
            headers["Content-Length"] = str(len(data))
        sb = self.ledger.sandboxes[self.sid]
        t0 = time.monotonic()
        ans = self.c.call("PUT files", "PUT", files_path(self.sid, path, "&parents=1"),
                          pieces(data), headers=headers, chunked=chunked, deadline=60)
        with self.ledger.lock:
            if ans.ok:
                sb["files"][path] = sha
                if self.ledger.exposed(t0, time.monotonic()):
                    sb["exposed"].add(path)
            elif ans.outcome == "refused" and ans.status != 504:
                sb["absent"].add(path)
            else:
                sb["unknown"].add(path)
        if not ans.ok:
            self.gone(ans, "upload")
        return ans.ok

    def pick_file(self):
        files = self.ledger.sandboxes[self.sid]["files"]
        if not files:
            return None, None
        path = self.rng.choice(sorted(files))
        return path, files[path]

    def act_download(self, slow=False):
        path, sha = self.pick_file()
        if path is None:
            return self.act_upload()
        reader = None
        if slow:
            self.ledger.fault("slow reader")

            def reader(resp):
                h = hashlib.sha256()
                while True:
                    piece = resp.read(8192)
                    if not piece:
                        return h.hexdigest().encode()
                    h.update(piece)
                    time.sleep(0.01)
        # (a receive buffer of at least loopback's segment, 64 KiB: under
        # it TCP stalls on its own, a receiver that never offers a whole
        # segment, probed with back-off, up to 80 s a file)
        ans = self.c.call("GET files", "GET", files_path(self.sid, path), deadline=60, reader=reader,
                          rcvbuf=131072 if slow else None)
        if not ans.ok:
            return self.gone(ans, "download")
        got = ans.body.decode() if slow else hashlib.sha256(ans.body).hexdigest()
        if got != sha:
            self.ledger.problem("%s: %s in %s: sha256 %s, was written as %s" % (
                self.name, path, self.sid, got, sha))

    def act_slow_download(self):
        self.act_download(slow=True)

    def raw(self):
        cur = self.node.current()
        if cur is None:
            return None, None
        s = socket.create_connection(("127.0.0.1", cur[1]), timeout=30)
        return s, cur[2]

    def act_reset_upload(self):
        """An upload cut by a reset halfway: the file must never appear."""
        self.ledger.fault("client reset")
        self.n += 1
        path = "/workspace/soak/cut%d-%d" % (self.idx, self.n)
        with self.ledger.lock:
            self.ledger.sandboxes[self.sid]["absent"].add(path)
        t0 = time.monotonic()
        try:
            s, token = self.raw()
            if s is None:
                return
            s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (files_path(self.sid, path, "&parents=1"), token,
                                                       4 << 20)).encode())
            s.sendall(os.urandom(self.rng.choice((1, 512 << 10, 2 << 20))))
            time.sleep(self.rng.random() * 0.2)
            reset(s)
        except OSError:
            pass
        self.c.abandoned("PUT files", t0)

    def act_reset_download(self):
        path, _ = self.pick_file()
        if path is None:
            return self.act_upload()
        self.ledger.fault("client reset")
        t0 = time.monotonic()
        try:
            s, token = self.raw()
            if s is None:
                return
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                       % (files_path(self.sid, path), token)).encode())
            s.recv(self.rng.choice((1, 4096, 65536)))
            reset(s)
        except OSError:
            pass
        self.c.abandoned("GET files", t0)

    def act_process(self):
        if len(self.procs) < 2 and (not self.procs or self.rng.random() < 0.3):
            ans = self.c.call("POST processes", "POST", "/v1/sandboxes/%s/processes" % self.sid,
                              {"cmd": TICKER, "tag": "ticker"}, ok=(201,))
            if not ans.ok:
                return self.gone(ans, "process start")
            self.procs[ans.json["pid"]] = [0, 0]
            return
        pid = self.rng.choice(sorted(self.procs))
        line, off = self.procs[pid]
        ans = self.c.call("GET process output", "GET", "/v1/sandboxes/%s/processes/%d/output?offset=%d"
                          % (self.sid, pid, off))
        if not ans.ok:
            return self.gone(ans, "process output")
        text = b""
        for ev, data in sse_events(ans.body):
            d = json.loads(data)
            if ev == "stdout":
                if d["offset"] != off + len(text):
                    self.ledger.problem("%s: process %d in %s: output at %d, expected %d" % (
                        self.name, pid, self.sid, d["offset"], off + len(text)))
                text += base64.b64decode(d["data"])
            elif ev == "gap":
                off, text = d["to"], b""
                line = None  # resynchronised below
            elif ev == "error":
                return self.gone(ans, "process output (error event %s)" % data[:200])
        whole = text[:text.rfind(b"\n") + 1]
        for got in whole.decode().split("\n")[:-1]:
            n = int(got[1:])
            if line is not None and n != line:
                self.ledger.problem("%s: process %d in %s: line %s after t%d" % (
                    self.name, pid, self.sid, got, line - 1))
            line = n + 1
        self.procs[pid] = [line if line is not None else 0, off + len(whole)]

    def act_ports(self):
        if not self.web:
            data = os.urandom(65536)
            if not self.act_upload("/workspace/www/index.bin", data):
                return
            ans = self.c.call("POST processes", "POST", "/v1/sandboxes/%s/processes" % self.sid,
                              {"argv": WEB, "tag": "web"}, ok=(201,))
            if not ans.ok:
                return self.gone(ans, "web server start")
            self.web = True
            return
        sha = self.ledger.sandboxes[self.sid]["files"].get("/workspace/www/index.bin")
        ans = self.c.call("ports proxy", "GET", "/v1/sandboxes/%s/ports/8000/index.bin" % self.sid)
        if ans.ok and hashlib.sha256(ans.body).hexdigest() != sha:
            self.ledger.problem("%s: index.bin through the port proxy of %s differs" % (self.name, self.sid))
        elif not ans.ok and ans.code not in ("port_closed", "bad_gateway"):
            self.gone(ans, "port proxy")

    def act_snapshot(self):
        with self.ledger.lock:
            files = dict(self.ledger.sandboxes[self.sid]["files"])
            exposed = set(self.ledger.sandboxes[self.sid]["exposed"])
            live = [k for k, v in self.ledger.snapshots.items() if not v["deleted"]]
        if len(live) >= 4:
            return self.delete_snapshot(self.rng.choice(sorted(live)))
        ans = self.c.call("POST snapshot", "POST", "/v1/sandboxes/%s/snapshots" % self.sid,
                          {"name": "soak-%d" % self.idx}, ok=(201,), deadline=120)
        if not ans.ok:
            if ans.status in (409, 507):
                return  # one under way, or the store is full: clear refusals
            return self.gone(ans, "snapshot")
        snap = ans.json["id"]
        with self.ledger.lock:
            self.ledger.snapshots[snap] = {"sandbox": self.sid, "files": files, "exposed": exposed,
                                           "deleted": False}
        if self.rng.random() < 0.5:
            self.restore(snap)

    def delete_snapshot(self, snap):
        with self.ledger.lock:
            self.ledger.snapshots[snap]["deleted"] = True
        self.c.call("DELETE snapshot", "DELETE", "/v1/snapshots/" + snap, ok=(204, 404))

    def restore(self, snap, sample=2):
        """A sandbox from snap, some of its files checked, deleted again:
        whether it restored (a clear refusal is no failure to restore)."""
        files = self.ledger.snapshots[snap]["files"]
        exposed = self.ledger.snapshots[snap].get("exposed", set())
        sid = self.create({"snapshot": snap, "timeout": 600})
        if sid is None:
            return False
        sb = self.ledger.sandbox(sid, self.name, restored_from=snap)
        sb["files"], sb["exposed"] = dict(files), set(exposed)
        for path in self.rng.sample(sorted(files), min(sample, len(files))):
            ans = self.c.call("GET files", "GET", files_path(sid, path))
            if ans.ok and hashlib.sha256(ans.body).hexdigest() != files[path]:
                if path in exposed:
                    with self.ledger.lock:
                        self.ledger.lost_exposed.append("%s restored from %s" % (path, snap))
                else:
                    self.ledger.problem("%s: %s restored from %s differs" % (self.name, path, snap))
            elif not ans.ok and ans.outcome == "refused" and not self.ledger.failed(sid):
                self.ledger.problem("%s: %s restored from %s: %s %s" % (
                    self.name, path, snap, ans.status, ans.body[:200]))
        self.delete(sid)
        return True

    def act_mcp(self):
        if not self.mcp or self.ledger.failed(self.mcp):
            return self.act_exec()
        path = "/v1/sandboxes/%s/mcp/everything" % self.mcp
        acc = {"Accept": "application/json, text/event-stream"}
        ans = self.c.call("POST mcp", "POST", path, {
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "soak", "version": "1"}}}, headers=acc, deadline=90)
        if not ans.ok:
            return self.gone(ans, "MCP initialize")
        h = dict(acc, **{"Mcp-Session-Id": ans.headers.get("mcp-session-id", "")})
        ans = self.c.call("POST mcp", "POST", path, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                          headers=h, ok=(202,))
        text = "soak-%08x" % self.rng.getrandbits(32)
        if ans.ok:
            ans = self.c.call("POST mcp", "POST", path, {
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": text}}}, headers=h)
        if ans.ok:
            msgs = [json.loads(d) for _, d in sse_events(ans.body)] if \
                ans.headers.get("content-type", "").startswith("text/event-stream") else [ans.json]
            res = [m for m in msgs if isinstance(m, dict) and m.get("id") == 1]
            if not res or text not in json.dumps(res[0].get("result")):
                self.ledger.problem("%s: MCP echo answered %r" % (self.name, msgs))
            self.c.call("DELETE mcp", "DELETE", path, headers=h, ok=(204, 404))
        elif ans.status != 404:  # a session ended by a restart is 404
            self.gone(ans, "MCP call")

    def act_recycle(self):
        sid, self.sid, self.procs, self.web = self.sid, None, {}, False
        self.delete(sid)

    ACTIONS = [("exec", 30), ("exec_timeout", 2), ("upload", 16), ("download", 12),
               ("slow_download", 3), ("reset_upload", 3), ("reset_download", 3), ("process", 8),
               ("ports", 6), ("snapshot", 4), ("mcp", 6), ("recycle", 2)]

    def run(self):
        names = [a for a, _ in self.ACTIONS]
        weights = [w for _, w in self.ACTIONS]
        while not self.stop.is_set():
            try:
                if self.sid is None:
                    sid = self.create()
                    if sid is None:
                        time.sleep(0.5)
                        continue
                    self.ledger.sandbox(sid, self.name)
                    self.sid = sid
                    continue
                action = self.rng.choices(names, weights)[0]
                if action == "recycle" and len(self.ledger.sandboxes[self.sid]["files"]) < 8:
                    action = "exec"
                getattr(self, "act_" + action)()
            except Exception as e:  # noqa: BLE001 - a client's own bug is a problem too
                self.ledger.problem("%s: %r" % (self.name, e))
                time.sleep(0.5)

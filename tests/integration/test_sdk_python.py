"""The Python SDK (sdk/python, package `sbx`) against a real
sandbox-supervisor with real runc sandboxes: every SDK call (create as a
context manager, connect, list, renew, run with streaming callbacks and
exit codes, files with a 20 MiB round trip by sha256, watch, background
processes, the WebSocket terminal, ports, MCP, snapshots and restore,
fork, pause/resume, volumes with their reader/writer rule, images imported
from an OCI archive and deleted, the async wrappers), the
SDK's RFC 6455 client against python3-websockets' server (fragments, ping,
masking, the size bound), the typed exceptions
(unknown sandbox NotFound, bad token Unauthorized, a path outside the
policy Forbidden, QuotaExceeded from a tenant's quota, Paused, VolumeBusy,
BadArchive from a snapshot archive damaged on disk, ...), and that
`pip install ./sdk/python` works offline (into a temporary folder, from a
copy of the tree). Everything made is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import asyncio
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_clients import MCP_CONFIG, MCP_ECHO, SDK, SupervisorCase, random_file, sha256_file  # noqa: E402
from sbx_harness import Supervisor, stop_clean  # noqa: E402 (a second one, for a quota)

import sbx  # noqa: E402  (from the source tree, see sbx_clients)
from sbx import Image, Sandbox, Secret, Snapshot, Volume  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MAKE_IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "images",
                           "make-test-images")


class SdkTest(SupervisorCase):
    @classmethod
    def prepare(cls):
        os.environ.update(SBX_URL=cls.url, SBX_TOKEN=cls.sup.token, SBX_CONFIG=cls.env["SBX_CONFIG"])
        cls.sb = Sandbox.create(timeout=600, env={"GREETING": "hello"}, mcp=MCP_CONFIG)

    @classmethod
    def release(cls):
        cls.sb.delete()

    def test_create_as_context_manager(self):
        with Sandbox.create(timeout=300, resources={"cpus": 0.5, "memory": "256M"},
                            env={"K": "v"}) as sb:
            self.assertEqual(sb.info["state"], "running")
            self.assertEqual(sb.info["resources"]["memory"], 256 << 20)
            self.assertIn(sb.id, [b["id"] for b in Sandbox.list()])
            again = Sandbox.connect(sb.id)
            self.assertEqual(again.info["id"], sb.id)
            self.assertEqual(again.run("echo $K").stdout, "v\n")
            before = sb.info["expires_at"]
            info = sb.renew(3000)
            self.assertGreater(info["expires_at"], before)
            self.assertIn("usage", sb.refresh())
        # Deleted on leaving the block.
        with self.assertRaises(sbx.NotFound):
            Sandbox.connect(sb.id)
        sb.delete()  # a second delete is no error

    def test_run(self):
        r = self.sb.run("echo $GREETING; echo oops >&2; exit 3")
        self.assertEqual((r.exit_code, r.stdout, r.stderr, r.ok), (3, "hello\n", "oops\n", False))
        r = self.sb.run(["printf", "\\377\\000x"])
        self.assertEqual(r.stdout_bytes, b"\xff\x00x")
        r = self.sb.run("tr a-z A-Z", stdin="abc")
        self.assertEqual(r.stdout, "ABC")
        r = self.sb.run(["cat"], stdin=b"\x00\x01")
        self.assertEqual(r.stdout_bytes, b"\x00\x01")
        r = self.sb.run("pwd; id -un", cwd="/tmp", env={"X": "1"})
        self.assertEqual(r.stdout, "/tmp\nsandbox\n")
        r = self.sb.run("sleep 10", timeout=0.5)
        self.assertTrue(r.timed_out)
        self.assertEqual((r.exit_code, r.signal), (None, "KILL"))

    def test_run_streams_as_it_comes(self):
        seen = []
        t0 = time.monotonic()
        r = self.sb.run("echo one; sleep 1.5; echo two >&2",
                        on_stdout=lambda b: seen.append(("out", b, time.monotonic() - t0)),
                        on_stderr=lambda b: seen.append(("err", b, time.monotonic() - t0)))
        self.assertEqual([(k, b) for k, b, _ in seen], [("out", b"one\n"), ("err", b"two\n")])
        # The first line came while the command still ran.
        self.assertGreater(seen[1][2] - seen[0][2], 1.0, seen)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "one\n", "two\n"))

    def test_run_cancelled_by_the_caller(self):
        # An exception in a callback (as KeyboardInterrupt would) closes the
        # stream; the server kills the command.
        class Stop(Exception):
            pass

        def stop(_):
            raise Stop()
        with self.assertRaises(Stop):
            self.sb.run("echo go; exec sleep 77.5", on_stdout=stop)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "77.5" not in self.sb.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout:
                break
            time.sleep(0.2)
        else:
            self.fail("the cancelled command still runs")

    def test_files(self):
        f = self.sb.files
        src = os.path.join(self.tmp, "big")
        want = random_file(src, 20)
        seen = []
        with open(src, "rb") as fh:
            res = f.write("/workspace/big.bin", fh, progress=lambda d, t: seen.append((d, t)))
        self.assertEqual(res["size"], 20 << 20)
        self.assertEqual(seen[-1], (20 << 20, 20 << 20))
        self.assertGreater(len(seen), 10)  # streamed in pieces
        self.assertEqual(self.sb.run("sha256sum /workspace/big.bin").stdout.split()[0], want)
        dst = os.path.join(self.tmp, "back")
        n = f.download("/workspace/big.bin", dst)
        self.assertEqual((n, sha256_file(dst)), (20 << 20, want))
        h = hashlib.sha256()
        for piece in f.iter_read("/workspace/big.bin"):
            self.assertLessEqual(len(piece), 256 * 1024)
            h.update(piece)
        self.assertEqual(h.hexdigest(), want)
        # A chunked upload (a pipe has no size).
        r, w = os.pipe()
        threading.Thread(target=lambda: (os.write(w, b"piped\n" * 1000), os.close(w))).start()
        with os.fdopen(r, "rb") as pipe:
            self.assertEqual(f.write("/workspace/piped", pipe)["size"], 6000)
        # Small files, folders, stat, list, move, chmod, search, remove.
        f.mkdir("/workspace/d/e", parents=True)
        f.write("/workspace/d/e/a.txt", "alpha", mode=0o600)
        self.assertEqual(f.read("/workspace/d/e/a.txt"), b"alpha")
        st = f.stat("/workspace/d/e/a.txt")
        self.assertEqual((st["type"], st["size"], st["mode"]), ("file", 5, 0o600))
        names = [e["name"] for e in f.list("/workspace/d", depth=2)]
        self.assertEqual(names, ["e", "a.txt"])
        f.move("/workspace/d/e/a.txt", "/workspace/d/b.txt")
        self.assertFalse(f.exists("/workspace/d/e/a.txt"))
        f.chmod("/workspace/d/b.txt", 0o755)
        self.assertEqual(f.stat("/workspace/d/b.txt")["mode"], 0o755)
        self.assertEqual([e["path"] for e in f.search("/workspace", "*.txt")], ["/workspace/d/b.txt"])
        with self.assertRaises(sbx.Exists):
            f.mkdir("/workspace/d")
        with self.assertRaises(sbx.Exists):
            f.write("/workspace/d/b.txt", "x", overwrite=False)
        with self.assertRaises(sbx.Conflict):  # not empty
            f.remove("/workspace/d")
        f.remove("/workspace/d", recursive=True)
        self.assertFalse(f.exists("/workspace/d"))
        f.remove("/workspace/big.bin")

    def test_watch(self):
        self.sb.files.mkdir("/workspace/w", parents=True)
        events = self.sb.files.watch("/workspace/w")
        try:
            self.assertEqual(next(events)["event"], "ready")
            self.sb.files.write("/workspace/w/new.txt", "x")
            kinds = set()
            for ev in events:
                kinds.add(ev["event"])
                if ev["event"] in ("create", "move") and ev.get("to", ev["path"]) == "/workspace/w/new.txt":
                    break
            self.assertTrue(kinds & {"create", "move"}, kinds)
        finally:
            events.close()

    def test_processes(self):
        p = self.sb.processes
        d = p.start("for i in 1 2 3; do echo line$i; sleep 0.2; done; echo err >&2; exit 4", tag="sdk")
        pid = d["pid"]
        self.assertIn(pid, [x["pid"] for x in p.list(tag="sdk")])
        out, end = b"", None
        for ev in p.output(pid, follow=True):
            if ev["event"] in ("stdout", "stderr"):
                out += ev["data"]
            elif ev["event"] == "end":
                end = ev
        self.assertEqual(out, b"line1\nline2\nline3\nerr\n")
        self.assertEqual((end["state"], end["exit_code"], end["next_offset"]), ("exited", 4, len(out)))
        # Resume from an offset.
        tail = b"".join(ev["data"] for ev in p.output(pid, offset=6) if ev["event"] == "stdout")
        self.assertEqual(tail, b"line2\nline3\n")
        self.assertEqual(p.get(pid)["exit_code"], 4)
        # stdin, a signal, a kill.
        c = p.start(["cat"], stdin=True)
        p.write(c["pid"], b"typed\n", eof=True)
        got = b"".join(ev["data"] for ev in p.output(c["pid"], follow=True) if ev["event"] == "stdout")
        self.assertEqual(got, b"typed\n")
        s = p.start(["sleep", "60"])
        p.signal(s["pid"], "TERM")
        list(p.output(s["pid"], follow=True))
        self.assertEqual(p.get(s["pid"])["signal"], "TERM")
        k = p.start("sleep 60 & sleep 60")
        p.kill(k["pid"])
        self.assertEqual(p.get(k["pid"])["state"], "exited")

    def test_terminal(self):
        with self.sb.terminal("exec sh -i", cols=80, rows=24) as t:
            t.write("echo hi-$((6*7))\n")
            self.assertIn(b"hi-42", t.read_until(b"hi-42"))
            t.resize(100, 40)
            time.sleep(0.3)
            t.write("stty size\n")
            self.assertIn(b"40 100", t.read_until(b"40 100"))
            t.write("exit 3\n")
            while t.recv() is not None:
                pass
            self.assertEqual(t.exit["exit_code"], 3)

    def test_websocket_client(self):
        # The SDK's RFC 6455 client against another implementation (Debian's
        # python3-websockets as the server): a fragmented message
        # reassembled, a ping answered (the server waits for its pong),
        # masked frames taken by a server that refuses unmasked ones, a
        # 64-bit length, and a message over the bound closed with 1009.
        import websockets
        from sbx.ws import WebSocket
        seen = {}
        ready = threading.Event()
        loop = asyncio.new_event_loop()

        async def handler(ws, path=None):
            seen["auth"] = ws.request_headers.get("Authorization")
            await ws.send([b"frag1-", b"frag2"])
            await asyncio.wait_for(await ws.ping(b"hi"), 5)
            seen["pong"] = True
            await ws.send("text msg")
            await ws.send(await ws.recv())
            try:
                await ws.send(b"x" * (2 << 20))
            except websockets.exceptions.ConnectionClosed:
                pass  # the client closed before all of it went out
            await ws.wait_closed()
            seen["close"] = ws.close_code

        async def serve():
            async with websockets.serve(handler, "127.0.0.1", 0, max_size=4 << 20) as srv:
                seen["port"] = srv.sockets[0].getsockname()[1]
                ready.set()
                while "close" not in seen:
                    await asyncio.sleep(0.05)

        th = threading.Thread(target=lambda: loop.run_until_complete(serve()))
        th.start()
        try:
            self.assertTrue(ready.wait(10))
            c = sbx.Client("http://127.0.0.1:%d" % seen["port"], "tok")
            ws = WebSocket.connect(c, "/ws")
            self.assertEqual(ws.recv(), ("binary", b"frag1-frag2"))
            self.assertEqual(ws.recv(), ("text", "text msg"))
            self.assertTrue(seen.get("pong"))
            big = os.urandom(70000)
            ws.send_binary(big)
            self.assertEqual(ws.recv(), ("binary", big))
            with self.assertRaises(sbx.ProtocolError):
                ws.recv()
        finally:
            th.join(15)
            loop.close()
        self.assertEqual((seen["auth"], seen["close"]), ("Bearer tok", 1009))

    def test_websocket_error_keeps_received(self):
        # A whole message and an over-bound frame's head in one recv: the
        # message is delivered, then the protocol error (a fresh machine
        # lost the message when both came in one read). A socketpair makes
        # the one read certain rather than a matter of timing.
        import socket
        import struct
        from sbx.ws import WebSocket
        a, b = socket.socketpair()
        try:
            ws = WebSocket(a, max_message=1 << 20)
            msg = os.urandom(70000)
            b.sendall(bytes([0x82, 127]) + struct.pack("!Q", len(msg)) + msg +
                      bytes([0x82, 127]) + struct.pack("!Q", 2 << 20) + b"x" * 100)
            while len(ws.buf) < len(msg) + 10 + 10 + 100:
                ws.buf += a.recv(1 << 20)
            self.assertEqual(ws.recv(), ("binary", msg))
            with self.assertRaises(sbx.ProtocolError):
                ws.recv()
            with self.assertRaises(sbx.ProtocolError):
                ws.recv()  # the error stays; it is not a second message
            hdr = b.recv(16)
            self.assertEqual(hdr[0], 0x88)  # the client's close frame, 1009
            mask = hdr[2:6]
            code = bytes(x ^ mask[i] for i, x in enumerate(hdr[6:8]))
            self.assertEqual(struct.unpack("!H", code)[0], 1009)
        finally:
            a.close()
            b.close()

    def test_ports(self):
        self.sb.files.write("/workspace/www/hello.txt", "hello port\n", parents=True)
        srv = self.sb.processes.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"],
                                      cwd="/workspace/www")
        try:
            deadline = time.monotonic() + 20
            while 8000 not in [p["port"] for p in self.sb.ports.list()]:
                self.assertLess(time.monotonic(), deadline, "the server never listened")
                time.sleep(0.1)
            u = urllib.parse.urlsplit(self.sb.ports.url(8000, "/hello.txt"))
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            c.request("GET", u.path, headers={"Authorization": "Bearer " + self.sup.token})
            resp = c.getresponse()
            self.assertEqual((resp.status, resp.read()), (200, b"hello port\n"))
            c.close()
            signed = self.sb.ports.signed_url(8000, expires=60)
            self.assertIn("sbx_sig=", signed["url"])
        finally:
            self.sb.processes.kill(srv["pid"])

    def test_mcp(self):
        self.sb.files.write("/workspace/mcp_echo.py", MCP_ECHO)
        url = self.sb.mcp_url("echo")
        self.assertEqual(url, "%s/v1/sandboxes/%s/mcp/echo" % (self.url, self.sb.id))
        self.assertIn("echo", [s["name"] for s in self.sb.mcp_servers()])
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}
        c.request("POST", u.path, json.dumps(init), {"Authorization": "Bearer " + self.sup.token,
                                                     "Content-Type": "application/json",
                                                     "Accept": "application/json"})
        resp = c.getresponse()
        body = json.loads(resp.read())
        self.assertEqual(body["result"]["serverInfo"]["name"], "echo")
        sid = resp.getheader("Mcp-Session-Id")
        c.request("DELETE", u.path, headers={"Authorization": "Bearer " + self.sup.token,
                                             "Mcp-Session-Id": sid})
        self.assertEqual(c.getresponse().status, 204)
        c.close()

    def test_errors(self):
        with self.assertRaises(sbx.NotFound) as cm:
            Sandbox.connect("sb-nosuch")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(sbx.Unauthorized) as cm:
            Sandbox.list(token="0" * 64)
        self.assertEqual(cm.exception.status, 401)
        with self.assertRaises(sbx.Forbidden) as cm:
            self.sb.files.read("/etc/passwd")
        self.assertEqual((cm.exception.code, cm.exception.path), ("forbidden", "/etc/passwd"))
        with self.assertRaises(sbx.Forbidden):
            self.sb.files.write("/etc/evil", b"x")
        with self.assertRaises(sbx.Forbidden):
            self.sb.run("id", user="root")
        with self.assertRaises(sbx.NotFound) as cm:
            self.sb.files.read("/workspace/missing")
        self.assertEqual(cm.exception.path, "/workspace/missing")
        with self.assertRaises(sbx.BadRequest):
            Sandbox.create(timeout=0)
        with self.assertRaises(sbx.BadRequest):
            self.sb.files.read("relative")
        with self.assertRaises(sbx.BadRequest) as cm:  # this supervisor has no --uplink
            self.sb.set_network({"default_action": "allow"})
        self.assertIn("uplink", cm.exception.message)
        with self.assertRaises(sbx.NotFound):
            self.sb.processes.get(999999)
        with self.assertRaises(sbx.NotFound):
            self.sb.files.stat("/tmp/nope")
        # Every error is an ApiError and an SbxError.
        self.assertTrue(issubclass(sbx.QuotaExceeded, sbx.ApiError))
        self.assertTrue(issubclass(sbx.ApiError, sbx.SbxError))

    def test_snapshot_restore_fork(self):
        with Sandbox.create(timeout=300, env={"K": "v"}) as sb:
            sb.files.write("/workspace/a.txt", "state\n")
            sb.run("mkdir -p /tmp/d && echo x > /tmp/d/y && rm -f /workspace/gone")
            snap = sb.snapshot(name="sdk-test")
            self.assertTrue(snap.id.startswith("sn-"), snap.info)
            self.assertEqual((snap.name, snap["sandbox"]), ("sdk-test", sb.id))
            self.assertGreater(snap["size"], 0)
            self.assertIn(snap, Snapshot.list())
            self.assertEqual(Snapshot.get(snap.id).info, snap.info)
            sb.files.write("/workspace/a.txt", "changed after\n")
            try:
                with Sandbox.create(snapshot=snap, timeout=120) as r:
                    self.assertNotEqual(r.id, sb.id)
                    self.assertEqual(r.files.read("/workspace/a.txt"), b"state\n")
                    self.assertEqual(r.run("cat /tmp/d/y").stdout, "x\n")
                with Sandbox.create(snapshot=snap.id, timeout=120) as r:  # by id too
                    self.assertEqual(r.files.read("/workspace/a.txt"), b"state\n")
                forks = sb.fork(2)
                try:
                    self.assertEqual(len(forks), 2)
                    for f in forks:
                        self.assertEqual(f.files.read("/workspace/a.txt"), b"changed after\n")
                        self.assertEqual(f.run("echo $K").stdout, "v\n")
                    forks[0].files.write("/workspace/a.txt", "fork 0\n")
                    self.assertEqual(forks[1].files.read("/workspace/a.txt"), b"changed after\n")
                finally:
                    for f in forks:
                        f.delete()
                # An archive damaged on disk: the restore is refused, typed.
                bad = sb.snapshot()
                path = os.path.join(self.sup.state_dir, "snapshots", bad.id + ".tar.zst")
                with open(path, "r+b") as fh:
                    fh.seek(0)
                    fh.write(b"\0" * 64)
                with self.assertRaises(sbx.BadArchive) as cm:
                    Sandbox.create(snapshot=bad, timeout=60)
                self.assertEqual((cm.exception.status, cm.exception.code), (422, "bad_archive"))
                bad.delete()
            finally:
                snap.delete()
            with self.assertRaises(sbx.NotFound):
                Snapshot.get(snap.id)
            with self.assertRaises(sbx.NotFound):
                Sandbox.create(snapshot=snap, timeout=60)
            self.assertNotIn(snap, Snapshot.list())

    def test_pause_resume(self):
        with Sandbox.create(timeout=120) as sb:
            p = sb.processes.start("while :; do date +%s%N >> /tmp/ticks; sleep 0.05; done")
            deadline = time.monotonic() + 20
            while not sb.files.exists("/tmp/ticks") and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(sb.pause()["state"], "paused")
            self.assertEqual((sb.state, sb.pause()["state"]), ("paused", "paused"))  # idempotent
            with self.assertRaises(sbx.Paused) as cm:
                sb.run("true")
            self.assertEqual((cm.exception.status, cm.exception.code), (409, "paused"))
            self.assertIsInstance(cm.exception, sbx.Conflict)
            with self.assertRaises(sbx.Paused):
                sb.files.read("/tmp/ticks")
            self.assertEqual(Sandbox.connect(sb.id).state, "paused")
            self.assertEqual(sb.resume()["state"], "running")
            n = len(sb.files.read("/tmp/ticks").split())
            deadline = time.monotonic() + 20
            while len(sb.files.read("/tmp/ticks").split()) <= n and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertGreater(len(sb.files.read("/tmp/ticks").split()), n)  # it goes on
            sb.processes.kill(p["pid"])

    def test_volumes(self):
        vol = Volume.create("sdkvol", "64M")
        try:
            self.assertEqual((vol.name, vol["size"], vol["state"]), ("sdkvol", 64 << 20, "ready"))
            self.assertIn(vol, Volume.list())
            with self.assertRaises(sbx.Exists):
                Volume.create("sdkvol", "64M")
            with self.assertRaises(sbx.BadRequest):
                Volume.create("Bad Name", "64M")
            mount = [{"name": "sdkvol", "mount": "/workspace/v"}]
            with Sandbox.create(timeout=120, volumes=mount) as w:
                w.files.write("/workspace/v/kept", "across sandboxes")
                self.assertEqual(Volume.get("sdkvol")["mounted"]["writer"], w.id)
                with self.assertRaises(sbx.VolumeBusy) as cm:
                    Sandbox.create(timeout=60, volumes=mount)
                self.assertEqual((cm.exception.status, cm.exception.code), (409, "volume_busy"))
                with self.assertRaises(sbx.VolumeBusy):
                    vol.delete()
            ro = [{"name": "sdkvol", "mount": "/data/v", "read_only": True}]
            with Sandbox.create(timeout=120, volumes=ro) as r:
                self.assertEqual(r.files.read("/data/v/kept"), b"across sandboxes")
                self.assertNotEqual(r.run("echo x > /data/v/new").exit_code, 0)
            self.assertGreater(vol.refresh()["used"], 0)
        finally:
            vol.delete()
        with self.assertRaises(sbx.NotFound):
            Volume.get("sdkvol")

    def test_secrets(self):
        value = "sk-sdk-" + os.urandom(12).hex()
        sec = Secret.put("sdk-key", value)
        try:
            self.assertEqual((sec.name, sec["size"]), ("sdk-key", len(value)))
            self.assertNotIn(value, json.dumps(sec.info))
            self.assertIn(sec, Secret.list())
            self.assertEqual(Secret.get("sdk-key")["size"], len(value))
            self.assertEqual(Secret.put("sdk-key", value + "2")["created_at"], sec["created_at"])
            with self.assertRaises(sbx.BadRequest):
                Secret.put("bad name", "v")
            with self.assertRaises(sbx.TooLarge):
                Secret.put("big", "x" * 16385)
            with Sandbox.create(timeout=120, secrets={"API_KEY": "sdk-key"},
                                secret_files={"api.key": "sdk-key"}) as sb:
                self.assertEqual(sb.run("echo $API_KEY").stdout, value + "2\n")
                self.assertEqual(sb.run("cat /run/secrets/api.key").stdout, value + "2")
                self.assertEqual(sorted(sb.refresh()["secrets"], key=lambda x: sorted(x)),
                                 sorted([{"name": "sdk-key", "env": "API_KEY"},
                                         {"name": "sdk-key", "file": "/run/secrets/api.key"}],
                                        key=lambda x: sorted(x)))
            with self.assertRaises(sbx.BadRequest):
                Sandbox.create(timeout=60, secrets={"API_KEY": "nope"})
        finally:
            sec.delete()
        with self.assertRaises(sbx.NotFound):
            Secret.get("sdk-key")
        with self.assertRaises(sbx.NotFound):
            sec.delete()

    def test_images(self):
        out = os.path.join(self.tmp, "images")
        subprocess.run([MAKE_IMAGES, out], check=True, stdout=subprocess.DEVNULL, timeout=120)
        seen = []
        (tiny,) = Image.import_archive(os.path.join(out, "tiny.oci.tar"),
                                       progress=lambda d, t: seen.append((d, t)))
        try:
            self.assertEqual(tiny.refs, ["tiny"])
            self.assertTrue(tiny.digest.startswith("sha256:"))
            self.assertEqual(seen[-1][0], os.path.getsize(os.path.join(out, "tiny.oci.tar")))
            self.assertIn(tiny, Image.list())
            self.assertEqual(Image.get("tiny").digest, tiny.digest)
            self.assertEqual(Image.get(tiny.digest).refs, ["tiny"])
            self.assertGreaterEqual(Image.store()["images"], 1)
            # a docker save, under a name of ours holding '/' and ':'
            with open(os.path.join(out, "multi.docker.tar"), "rb") as fh:
                (multi,) = Image.import_archive(fh, name="team/multi:v1")
            self.assertEqual(Image.get("team/multi:v1").digest, multi.digest)
            self.assertEqual(Image.remove("team/multi:v1")["deleted"], "team/multi:v1")
            with Sandbox.create(image="tiny", timeout=60) as sb:
                self.assertEqual(sb.run("echo $GREETING").stdout, "hello-from-image\n")
                self.assertIn("tiny", [p["image"] for p in sbx.pools()])
                with self.assertRaises(sbx.Conflict):
                    tiny.delete()
            with self.assertRaises(sbx.BadRequest):
                Image.import_archive(os.path.join(out, "tiny", "index.json"))
        finally:
            try:
                tiny.delete()
            except sbx.NotFound:
                pass
        with self.assertRaises(sbx.NotFound):
            Image.get("tiny")

    def test_readme_seed_example(self):
        # sdk/python/README.md's seed article example, the block exactly as
        # written, run by a fresh Python against this supervisor; what it
        # prints must be what the README says it prints, and it leaves no
        # sandbox or snapshot behind.
        with open(os.path.join(SDK, "README.md"), encoding="utf-8") as fh:
            text = fh.read()
        section = text[text.index("## The seed article's example"):]
        code = section.split("```python\n", 1)[1].split("```", 1)[0]
        shown = section.split("```text\n", 1)[1].split("```", 1)[0]
        before_sb = {b["id"] for b in Sandbox.list()}
        before_sn = {s.id for s in Snapshot.list()}
        env = dict(self.env, PYTHONPATH=SDK)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120, cwd=self.tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, shown)
        self.assertEqual({b["id"] for b in Sandbox.list()}, before_sb)
        self.assertEqual({s.id for s in Snapshot.list()}, before_sn)

    def test_quota_exceeded(self):
        # A supervisor of its own whose one tenant may hold 1 sandbox.
        token = "t" * 64
        tenants = os.path.join(self.tmp, "tenants.json")
        with open(tenants, "w") as fh:
            json.dump({"tenants": {"solo": {"tokens": ["sha256:" + hashlib.sha256(token.encode()).hexdigest()],
                                            "quota": {"sandboxes": 1}}}}, fh)
        sup = Supervisor(SUP, AGENT, pool_size=0, extra=["--tenants", tenants], token=token)
        try:
            sup.start()
            url = "http://127.0.0.1:%d" % sup.port
            with Sandbox.create(url=url, token=token, timeout=60):
                with self.assertRaises(sbx.QuotaExceeded) as cm:
                    Sandbox.create(url=url, token=token, timeout=60)
                self.assertEqual((cm.exception.status, cm.exception.code), (429, "quota_exceeded"))
                self.assertIn("solo", cm.exception.message)
            stop_clean(sup)
        finally:
            sup.cleanup()

    def test_async(self):
        from sbx import aio
        from sbx.aio import AsyncSandbox

        async def main():
            async with await AsyncSandbox.create(timeout=120) as sb:
                # the two ran at once: each one's run (its start and end,
                # taken inside the sandbox) overlaps the other's, however
                # long a busy machine takes to start them
                cmd = "date +%s%N; sleep 1; date +%s%N; echo "
                r1, r2 = await asyncio.gather(sb.run(cmd + "a"), sb.run(cmd + "b"))
                (a0, a1, a), (b0, b1, b) = r1.stdout.split(), r2.stdout.split()
                self.assertEqual((a, b), ("a", "b"))
                self.assertTrue(int(a0) < int(b1) and int(b0) < int(a1), (r1.stdout, r2.stdout))
                await sb.files.write("/workspace/x", "async")
                self.assertEqual(await sb.files.read("/workspace/x"), b"async")
                p = await sb.processes.start("echo bg; exit 2")
                evs = [ev async for ev in sb.processes.output(p["pid"], follow=True)]
                self.assertEqual((evs[0]["data"], evs[-1]["exit_code"]), (b"bg\n", 2))
                self.assertEqual((await sb.pause())["state"], "paused")
                with self.assertRaises(sbx.Paused):
                    await sb.run("true")
                await sb.resume()
                snap = await sb.snapshot(name="async")
                self.assertIn(snap.info["id"], [s.info["id"] for s in await aio.Snapshots.list()])
                try:
                    async with await AsyncSandbox.create(snapshot=snap, timeout=60) as r:
                        self.assertEqual(await r.files.read("/workspace/x"), b"async")
                    (f,) = await sb.fork(1)
                    async with f:
                        self.assertEqual(await f.files.read("/workspace/x"), b"async")
                finally:
                    await snap.delete()
                return sb.id
        sid = asyncio.run(main())
        with self.assertRaises(sbx.NotFound):
            Sandbox.connect(sid)

    def test_config_file(self):
        cfg = os.path.join(self.tmp, "config.json")
        with open(cfg, "w") as fh:
            json.dump({"url": self.url, "token": self.sup.token}, fh)
        env = {k: v for k, v in os.environ.items() if k not in ("SBX_URL", "SBX_TOKEN")}
        env["SBX_CONFIG"] = cfg
        env["PYTHONPATH"] = SDK
        out = subprocess.run([sys.executable, "-c", "import sbx; print(len(sbx.Sandbox.list()))"],
                             env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertGreaterEqual(int(out.stdout), 1)

    def test_pip_install(self):
        # pip install ./sdk/python, offline (Debian's setuptools, no build
        # isolation), from a copy so the tree gets no build files.
        src = os.path.join(self.tmp, "src")
        shutil.copytree(SDK, src)
        target = os.path.join(self.tmp, "site")
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                              "--no-deps", "--no-index", "--target", target, src],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        env = dict(os.environ, PYTHONPATH=target)
        out = subprocess.run([sys.executable, "-c", "import sbx; print(sbx.__file__); "
                              "print(sbx.Sandbox.connect(%r).id)" % self.sb.id],
                             env=env, capture_output=True, text=True, timeout=30, cwd=self.tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith(target), out.stdout)
        self.assertIn(self.sb.id, out.stdout)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

"""Streaming exec (SSE and NDJSON) through a real sandbox-supervisor, real
runc containers and the real agent: lossless large output (sha256), a slow
reader holding the producer back with the supervisor's memory bounded, and
a client that goes away cancelling the command. Everything made is removed
at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT; SBX_IT_STREAM_MB (size of the large stream,
default 256; the bench uses 1024).
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (RUNTIME, Supervisor, containers_under, rss_kb, sanitized,  # noqa: E402
                         small_asan_quarantine, stop_clean)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
STREAM_MB = int(os.environ.get("SBX_IT_STREAM_MB", "256"))


class Stream:
    """One streamed exec: yields (event, payload) pairs as they arrive.
    SSE payloads are the data line; NDJSON payloads the parsed object."""

    def __init__(self, sup, sid, body, accept="text/event-stream", timeout=120):
        self.sup = sup
        self.accept = accept
        self.conn = sup.conn(timeout)
        self.conn.request("POST", "/v1/sandboxes/%s/exec" % sid, body=json.dumps(body).encode(),
                          headers={"Authorization": "Bearer " + sup.token, "Accept": accept})
        self.resp = self.conn.getresponse()
        self.buf = b""
        self.received = 0  # body bytes read so far

    def close(self):
        self.conn.close()

    def read_some(self, n=65536):
        chunk = self.resp.read1(n) if hasattr(self.resp, "read1") else self.resp.read(n)
        self.received += len(chunk)
        self.buf += chunk
        return len(chunk)

    def events(self, read_size=1 << 20):
        sep = b"\n\n" if self.accept == "text/event-stream" else b"\n"
        while True:
            i = self.buf.find(sep)
            if i < 0:
                if not self.read_some(read_size):
                    if self.buf:
                        raise AssertionError("stream ended inside an event: %r" % self.buf[:200])
                    return
                continue
            raw, self.buf = self.buf[:i], self.buf[i + len(sep):]
            if sep == b"\n\n":
                ev, data = None, None
                for line in raw.split(b"\n"):
                    if line.startswith(b"event: "):
                        ev = line[7:].decode()
                    elif line.startswith(b"data: "):
                        data = line[6:]
                yield ev, data
            else:
                o = json.loads(raw)
                yield o["event"], o


class ExecStream(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.asan = small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def exec(self, **kw):
        st, _, body = self.sup.exec(self.sb["id"], **kw)
        self.assertEqual(st, 200, body)
        return body

    def stream(self, body, **kw):
        s = Stream(self.sup, self.sb["id"], body, **kw)
        self.addCleanup(s.close)
        return s

    def collect(self, s):
        out, err, exit_ev, first = bytearray(), bytearray(), None, None
        for ev, data in s.events():
            if first is None:
                first = (ev, data)
                continue
            self.assertIsNone(exit_ev, "event after exit: %s" % ev)
            if s.accept != "text/event-stream" and ev in ("stdout", "stderr"):
                data = data["data"].encode()
            if ev == "stdout":
                out += base64.b64decode(data, validate=True)
            elif ev == "stderr":
                err += base64.b64decode(data, validate=True)
            elif ev == "exit":
                exit_ev = json.loads(data) if isinstance(data, bytes) else data
            else:
                self.fail("unexpected event %r %r" % (ev, data))
        return first, bytes(out), bytes(err), exit_ev

    def test_sse_events_and_exit(self):
        s = self.stream({"cmd": "printf 'out\\377'; echo err >&2; exit 3"})
        self.assertEqual(s.resp.status, 200)
        self.assertEqual(s.resp.getheader("Content-Type"), "text/event-stream")
        first, out, err, ex = self.collect(s)
        self.assertEqual(first[0], "start")
        self.assertEqual(json.loads(first[1]), {"encoding": "base64"})
        self.assertEqual(out, b"out\xff")  # not UTF-8: still exact
        self.assertEqual(err, b"err\n")
        self.assertEqual(ex["exit_code"], 3)
        self.assertIsNone(ex["signal"])
        self.assertFalse(ex["timed_out"])
        self.assertEqual((ex["stdout_bytes"], ex["stderr_bytes"]), (4, 4))

    def test_ndjson_and_timeout(self):
        s = self.stream({"cmd": "echo hi; sleep 30", "timeout": 0.5},
                        accept="application/x-ndjson")
        self.assertEqual(s.resp.getheader("Content-Type"), "application/x-ndjson")
        first, out, err, ex = self.collect(s)
        self.assertEqual(first, ("start", {"event": "start", "encoding": "base64"}))
        self.assertEqual(out, b"hi\n")
        self.assertEqual(ex["signal"], "KILL")
        self.assertTrue(ex["timed_out"])

    def test_errors_before_the_stream_are_json(self):
        st, hdrs, body = self.sup.request("POST", "/v1/sandboxes/sb-000000000000/exec",
                                          {"argv": ["true"]},
                                          headers={"Accept": "text/event-stream"})
        self.assertEqual((st, body["error"]["code"]), (404, "not_found"))
        st, hdrs, body = self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.sb["id"],
                                          {"argv": []}, headers={"Accept": "text/event-stream"})
        self.assertEqual((st, body["error"]["code"]), (400, "bad_request"))

    def test_large_output_is_lossless(self):
        # The producer hashes what it writes through a fifo; the hash comes
        # on stderr, the bytes on stdout.
        n = STREAM_MB << 20
        cmd = ("rm -f /tmp/h.fifo; mkfifo /tmp/h.fifo; sha256sum < /tmp/h.fifo >&2 & "
               "head -c %d /dev/urandom | tee /tmp/h.fifo; wait" % n)
        t0 = time.monotonic()
        s = self.stream({"cmd": cmd}, timeout=600)
        first, out, err, ex = self.collect(s)
        secs = time.monotonic() - t0
        self.assertEqual(ex["exit_code"], 0, err)
        self.assertEqual(len(out), n)
        self.assertEqual(ex["stdout_bytes"], n)
        self.assertEqual(hashlib.sha256(out).hexdigest(), err.split()[0].decode())
        print("\nstreamed %d MiB through SSE in %.2fs: %.0f MB/s (incl. base64 decode in python)"
              % (STREAM_MB, secs, n / secs / 1e6), file=sys.stderr)

    def test_slow_reader_holds_the_producer_back(self):
        # A producer that records how far it got; the client reads a little,
        # stops, and the producer must stop too (its pipe blocks), with the
        # supervisor's memory flat.
        total = 64 << 20
        prog = ("import os,sys\n"
                "b=bytes(range(256))*256\n"
                "n=0\n"
                "while n<%d:\n"
                "    sys.stdout.buffer.write(b); sys.stdout.buffer.flush(); n+=len(b)\n"
                "    open('/tmp/progress.tmp','w').write(str(n)); os.rename('/tmp/progress.tmp','/tmp/progress')\n"
                % total)
        self.exec(cmd="rm -f /tmp/progress")
        cid = [c for c, _ in containers_under(self.sup.state_dir) if self.sb["id"] in c][0]
        apid = json.loads(subprocess.run([RUNTIME, "state", cid], capture_output=True,
                                         text=True).stdout)["pid"]
        rss0 = rss_kb(self.sup.proc.pid)
        s = self.stream({"argv": ["python3", "-c", prog]}, timeout=120)
        peak = rss0
        agent_peak = rss_kb(apid)
        # 1: read 4 MiB slowly (about 8 MiB/s).
        while s.received < (4 << 20):
            s.read_some(64 << 10)
            time.sleep(0.008)
            peak = max(peak, rss_kb(self.sup.proc.pid))
        # 2: stop reading; the producer must stall.
        time.sleep(1.5)
        p1 = int(self.exec(cmd="cat /tmp/progress")["stdout"])
        time.sleep(1.0)
        p2 = int(self.exec(cmd="cat /tmp/progress")["stdout"])
        peak = max(peak, rss_kb(self.sup.proc.pid))
        agent_peak = max(agent_peak, rss_kb(apid))
        self.assertEqual(p1, p2, "the producer went on while nobody read")
        read_at_stall = s.received * 3 // 4
        # What the producer is ahead of the reader: agent window, our high
        # watermark, socket buffers; never the whole output.
        self.assertLess(p1 - read_at_stall, 24 << 20, (p1, read_at_stall))
        # 3: read the rest at full speed; nothing lost, in order.
        first, out, err, ex = self.collect(s)
        peak = max(peak, rss_kb(self.sup.proc.pid))
        self.assertEqual(ex["exit_code"], 0, err)
        self.assertEqual(ex["stdout_bytes"], total)
        agent_peak = max(agent_peak, rss_kb(apid))
        print("\nslow reader: producer stalled at %.1f MiB with %.1f MiB read; supervisor RSS "
              "%d KiB -> peak %d KiB%s; agent RSS peak %d KiB"
              % (p1 / 1048576, read_at_stall / 1048576, rss0, peak,
                 " (ASan build)" if self.asan else "", agent_peak), file=sys.stderr)
        self.assertLess(agent_peak, 64 << 10, "agent RSS over 64 MiB")
        self.assertLess(peak - rss0, 24 << 10, "supervisor memory grew with a slow reader")
        if not self.asan:
            self.assertLess(peak, 64 << 10, "supervisor RSS over 64 MiB")

    def test_client_gone_cancels_the_command(self):
        marker = "62.%d" % (os.getpid() % 100000)
        s = self.stream({"cmd": "sleep %s & yes; wait" % marker})
        for ev, _ in s.events(read_size=65536):
            if ev == "stdout":
                break
        probe = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
        self.assertIn(marker, self.exec(cmd=probe)["stdout"])
        s.resp.close()
        s.close()
        deadline = time.monotonic() + 10
        while marker in self.exec(cmd=probe)["stdout"]:
            self.assertLess(time.monotonic(), deadline, "the command outlived its client")
            time.sleep(0.05)
        # The connection is usable afresh: another stream works.
        first, out, err, ex = self.collect(self.stream({"argv": ["echo", "again"]}))
        self.assertEqual(out, b"again\n")


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("SBX_SUPERVISOR and SBX_AGENT must be set")
    unittest.main(verbosity=2)

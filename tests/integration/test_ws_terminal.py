"""GET /v1/sandboxes/{id}/processes/{pid}/ws, an interactive terminal over
WebSocket, driven by a real client (Debian's python3-websockets) against a
real sandbox-supervisor, a real runc sandbox and the real agent: type a
command and read its output, resize (stty sees it), a bad message answered
with an error message, the client closing (the shell lives on), exit (the
last message, then close 1000), input and output through their backpressure
(600 KB typed at once arrive whole; a client that stops reading holds the
supervisor's memory bounded); and the refusals before the upgrade (no
terminal, unknown pid, not an upgrade) as plain JSON errors. Everything made
is removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import asyncio
import json
import os
import sys
import time
import unittest

import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, small_asan_quarantine, stop_clean  # noqa: E402
from test_exec_stream import rss_kb  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


class Terminal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # test_output_backpressure bounds what the supervisor holds by its RSS.
        small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=600)
        cls.base = "/v1/sandboxes/%s/processes" % cls.sb["id"]

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def start(self, **kw):
        st, _, b = self.sup.request("POST", self.base, kw)
        self.assertEqual(st, 201, b)
        return b["pid"]

    def url(self, pid, query=""):
        return "ws://127.0.0.1:%d%s/%d/ws%s" % (self.sup.port, self.base, pid, query)

    def connect(self, pid, query="", **kw):
        return websockets.connect(self.url(pid, query), max_size=1 << 22,
                                  extra_headers={"Authorization": "Bearer " + self.sup.token}, **kw)

    @staticmethod
    async def read_until(ws, needle, timeout=20):
        """Binary output until needle shows up; text messages aside."""
        out, texts = b"", []
        deadline = time.monotonic() + timeout
        while needle not in out:
            m = await asyncio.wait_for(ws.recv(), deadline - time.monotonic())
            if isinstance(m, bytes):
                out += m
            else:
                texts.append(json.loads(m))
        return out, texts

    def test_session(self):
        pid = self.start(argv=["/bin/sh", "-i"], pty={"cols": 80, "rows": 24}, tag="term")

        async def session():
            async with self.connect(pid) as ws:
                await ws.send(b"echo hi-$((6*7))\n")
                out, _ = await self.read_until(ws, b"hi-42")
                await ws.send(json.dumps({"resize": {"cols": 100, "rows": 40}}))
                await asyncio.sleep(0.3)
                await ws.send(b"stty size\n")
                out, _ = await self.read_until(ws, b"40 100")
                await ws.send("not json")
                m = await asyncio.wait_for(ws.recv(), 10)
                while isinstance(m, bytes):  # the prompt may come first
                    m = await asyncio.wait_for(ws.recv(), 10)
                self.assertEqual(json.loads(m)["error"]["code"], "bad_request", m)
            # The client closed; the shell lives on. A second session sees
            # the output again from offset 0 (the ring), then exits.
            async with self.connect(pid) as ws:
                out, _ = await self.read_until(ws, b"hi-42")
                await ws.send(b"exit 3\n")
                texts = []
                try:
                    while True:
                        m = await asyncio.wait_for(ws.recv(), 20)
                        if isinstance(m, str):
                            texts.append(json.loads(m))
                except websockets.exceptions.ConnectionClosedOK as e:
                    self.assertEqual(e.rcvd.code, 1000)
                self.assertEqual(texts[-1]["exit"]["exit_code"], 3, texts)
                self.assertEqual(texts[-1]["exit"]["pid"], pid)

        asyncio.run(session())
        st, _, b = self.sup.request("GET", "%s/%d" % (self.base, pid))
        self.assertEqual((st, b["state"], b["exit_code"]), (200, "exited", 3), b)

    def test_input_waits_for_the_terminal(self):
        # More input than the agent's window, typed at once into a reader
        # that takes it all: every byte arrives (backpressure, no loss).
        pid = self.start(cmd="stty -echo -icanon; head -c 600000 | wc -c", pty={})

        async def session():
            async with self.connect(pid) as ws:
                for _ in range(6):
                    await ws.send(b"y" * 100000)
                out, _ = await self.read_until(ws, b"600000", 60)

        asyncio.run(session())

    def test_output_backpressure(self):
        # A process that writes 40 MB while the client reads nothing for a
        # while: the supervisor holds a bounded backlog (the process goes on:
        # what the agent's ring dropped comes as gaps), and bytes plus gaps
        # add up to where the output ended.
        pid = self.start(cmd="head -c 40000000 /dev/zero | tr '\\0' y", pty={}, buffer=1 << 20)
        sup_pid = self.sup.proc.pid

        async def session():
            before = rss_kb(sup_pid)
            # A client that reads nothing: the library's own reader stops at
            # one message waiting (its default takes 32, up to 4 MiB each,
            # and the supervisor streams on until they are taken).
            async with self.connect(pid, max_queue=1) as ws:
                peak = 0
                for _ in range(20):
                    await asyncio.sleep(0.1)
                    peak = max(peak, rss_kb(sup_pid))
                got, gaps, last = 0, 0, None
                while last is None:
                    m = await asyncio.wait_for(ws.recv(), 60)
                    if isinstance(m, bytes):
                        got += len(m)
                        continue
                    m = json.loads(m)
                    if "gap" in m:
                        gaps += m["gap"]["to"] - m["gap"]["from"]
                    elif "exit" in m:
                        last = m["exit"]
                return peak - before, got, gaps, last

        # growth, not the whole RSS: the supervisor's own size (the
        # sanitizer build's above all) grows with every module it links
        peak, got, gaps, last = asyncio.run(session())
        print("\nterminal: %d bytes, %d dropped by the ring, supervisor RSS grew %d KiB at most"
              % (got, gaps, peak), file=sys.stderr)
        self.assertEqual(got + gaps, last["next_offset"])
        self.assertGreater(got, 0)
        self.assertLess(peak, 32 * 1024)

    def test_refusals_before_the_upgrade(self):
        plain = self.start(argv=["sleep", "60"])

        async def refused(pid):
            with self.assertRaises(websockets.exceptions.InvalidStatusCode) as cm:
                async with self.connect(pid):
                    pass
            return cm.exception.status_code

        self.assertEqual(asyncio.run(refused(plain)), 400)   # no terminal
        self.assertEqual(asyncio.run(refused(999999)), 404)
        st, _, b = self.sup.request("GET", "%s/%d/ws" % (self.base, plain))
        self.assertEqual((st, b["error"]["code"]), (400, "bad_request"), b)
        st, _, b = self.sup.request("GET", "%s/%d/ws" % (self.base, plain), token=False)
        self.assertEqual(st, 401, b)
        self.sup.request("DELETE", "%s/%d" % (self.base, plain))


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

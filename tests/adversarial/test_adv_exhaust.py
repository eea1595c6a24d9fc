"""One tenant exhausting what the node shares (SECURITY.md, "Tenant from
tenant"), through the API: alice holds streaming execs and terminal
WebSockets up to her share of requests in flight (--tenant-max-requests)
and asks for more; she starts background processes until her sandbox's
agent refuses. Each refusal is a clear JSON error (429 with Retry-After
for her share, 503 for the agent's bound), bob is served at once
meanwhile, and what she let go comes back to her (the share counts no
stream, WebSocket or refused request twice). A real sandbox-supervisor,
real runc sandboxes, the real agent and real HTTP over loopback;
everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import json
import os
import secrets
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from adv_tenants_pair import start_pair  # noqa: E402
from sbx_harness import read_head, rss_kb  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
TOK = {n: secrets.token_hex(24) for n in ("admin", "alice", "bob")}
SHARE = 12           # --tenant-max-requests of this test's supervisor
STREAMS, TERMINALS = 8, 4
BG_MAX_RUNNING = 256  # guest-agent/src/proc/bg.h


def read_json_error(s, hdrs, rest):
    n = int(hdrs["content-length"])
    while len(rest) < n:
        chunk = s.recv(4096)
        if not chunk:
            break
        rest += chunk
    return json.loads(rest[:n])


class TenantShare(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_pair(cls, SUP, AGENT, TOK, extra=["--tenant-max-requests", str(SHARE)])

    @classmethod
    def req(cls, who, method, path, body=None, timeout=30):
        return cls.sup.request(method, path, body, token="Bearer " + TOK[who], timeout=timeout)

    def send(self, who, method, path, body=None, headers=()):
        """A request on a connection of its own, left open: (socket, status,
        headers, what followed the head)."""
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
        data = json.dumps(body).encode() if body is not None else b""
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: t", "Authorization: Bearer " + TOK[who]]
        lines += list(headers)
        if body is not None:
            lines += ["Content-Type: application/json", "Content-Length: %d" % len(data)]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        return (s,) + read_head(s, 30)

    def stream(self, who, sid):
        """A streaming exec that runs for minutes: held open until closed."""
        return self.send(who, "POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["sleep", "300"]},
                         ["Accept: text/event-stream"])

    def terminal(self, who, sid, pid):
        key = base64.b64encode(os.urandom(16)).decode()
        return self.send(who, "GET", "/v1/sandboxes/%s/processes/%d/ws" % (sid, pid), None,
                         ["Connection: Upgrade", "Upgrade: websocket",
                          "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: " + key])

    def assert_over_share(self, got):
        s, status, hdrs, rest = got
        try:
            self.assertEqual(status, 429, hdrs)
            self.assertRegex(hdrs.get("retry-after", ""), r"^\d+$")
            err = read_json_error(s, hdrs, rest)["error"]
            self.assertEqual(err["code"], "quota_exceeded", err)
            self.assertIn("in flight", err["message"])
        finally:
            s.close()

    def bob_served(self):
        t0 = time.monotonic()
        st, _, r = self.req("bob", "POST", "/v1/sandboxes/%s/exec" % self.b,
                            {"argv": ["echo", "bob"]})
        self.assertEqual((st, r.get("stdout")), (200, "bob\n"), r)
        self.assertLess(time.monotonic() - t0, 15)  # not behind hers; a loaded machine's room

    def alice_served_again(self):
        """Her share comes back as the supervisor sees her connections end."""
        deadline = time.monotonic() + 20
        while True:
            st, _, v = self.req("alice", "GET", "/v1/sandboxes/" + self.a)
            if st == 200:
                return
            self.assertEqual(st, 429, v)
            self.assertLess(time.monotonic(), deadline, "her share never came back")
            time.sleep(0.1)

    def test_streams_and_terminals_of_one_tenant(self):
        pids = []
        for _ in range(TERMINALS):
            st, _, p = self.req("alice", "POST", "/v1/sandboxes/%s/processes" % self.a,
                                {"cmd": "sleep 600", "pty": {"cols": 80, "rows": 24}})
            self.assertEqual(st, 201, p)
            pids.append(p["pid"])
        rss0 = rss_kb(self.sup.proc.pid)
        held = []
        try:
            for _ in range(STREAMS):
                held.append(self.stream("alice", self.a))
                self.assertEqual(held[-1][1], 200, held[-1][2])
            for pid in pids:
                held.append(self.terminal("alice", self.a, pid))
                self.assertEqual(held[-1][1], 101, held[-1][2])
            # her share is held: anything more of hers is refused at once,
            # a plain request, a stream, a terminal, on any sandbox of hers
            self.assert_over_share(self.send("alice", "GET", "/v1/sandboxes/" + self.a))
            self.assert_over_share(self.stream("alice", self.a))
            self.assert_over_share(self.terminal("alice", self.a, pids[0]))
            # bob is served, streams of his own included
            self.bob_served()
            his = self.stream("bob", self.b)
            his[0].close()
            self.assertEqual(his[1], 200, his[2])
            # one of hers ends: one more is hers again
            held.pop(0)[0].close()
            self.alice_served_again()
            held.append(self.stream("alice", self.a))
            self.assertEqual(held[-1][1], 200, held[-1][2])
            self.assert_over_share(self.send("alice", "GET", "/v1/sandboxes/" + self.a))
        finally:
            for h in held:
                h[0].close()
        grown = (rss_kb(self.sup.proc.pid) - rss0) / 1024
        self.assertLess(grown, 64, "supervisor RSS grew %.1f MiB" % grown)
        # all of it came back: a whole share again, and not one more
        self.alice_served_again()
        try:
            for _ in range(SHARE):
                held.append(self.stream("alice", self.a))
                self.assertEqual(held[-1][1], 200, held[-1][2])
            self.assert_over_share(self.stream("alice", self.a))
        finally:
            for h in held:
                h[0].close()
        self.alice_served_again()

    def test_background_processes_of_one_sandbox(self):
        st, _, c = self.req("alice", "POST", "/v1/sandboxes", {"timeout": 900})
        self.assertEqual(st, 201, c)
        try:
            started, refused = 0, None
            for _ in range(BG_MAX_RUNNING + 20):
                st, hdrs, p = self.req("alice", "POST", "/v1/sandboxes/%s/processes" % c["id"],
                                       {"cmd": "sleep 600"})
                if st != 201:
                    refused = (st, p, hdrs.get("retry-after"))
                    break
                started += 1
            # the agent's bound, refused as "try later", not as a fault
            self.assertEqual(started, BG_MAX_RUNNING, refused)
            self.assertIsNotNone(refused)
            self.assertEqual(refused[0], 503, refused)
            self.assertEqual(refused[1]["error"]["code"], "unavailable", refused)
            self.assertEqual(refused[2], "1", refused)  # "not now": a retry waits a second
            self.bob_served()
            st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % c["id"],
                                {"argv": ["echo", "still"]})
            self.assertEqual((st, r.get("stdout")), (200, "still\n"), r)
        finally:
            st, _, body = self.req("alice", "DELETE", "/v1/sandboxes/" + c["id"])
            self.assertEqual(st, 204, body)


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must be set")
        sys.exit(2)
    unittest.main(verbosity=2)

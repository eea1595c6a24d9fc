"""Relay: exec `true` on a sandbox of node n1 through n1 itself and
relayed through n2 (two supervisors as two nodes on this machine, --peer
each other, one cluster key), serial, p50 and p99 of each from the same
run: the client on one kept-alive connection (n2 then keeps its
connection to n1 too), and with a connection per request (n2 connects to
n1 again only when none is kept). Release build, real runc.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_relay.py [N]
"""
import http.client
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import emit  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
N = int(sys.argv[1]) if len(sys.argv) > 1 else 500


def ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    out = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return out


def timed(sup, sid, n, keep):
    body = json.dumps({"argv": ["true"]}).encode()
    hdrs = {"Authorization": "Bearer " + sup.token, "Content-Type": "application/json"}
    c, out = None, []
    for _ in range(n):
        if c is None:
            c = http.client.HTTPConnection("127.0.0.1", sup.port, timeout=30)
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandboxes/%s/exec" % sid, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        out.append((time.perf_counter() - t0) * 1e3)
        assert r.status == 200 and json.loads(data)["exit_code"] == 0, data
        if not keep or r.getheader("Connection", "").lower() == "close":
            c.close()
            c = None
    if c:
        c.close()
    return out


def main():
    root = tempfile.mkdtemp(prefix="sbx-bench-relay-")
    key = os.path.join(root, "key")
    with open(key, "w") as f:
        f.write(secrets.token_hex(32))
    p1, p2 = ports(2)
    token = secrets.token_hex(32)
    common = ["--cluster-key-file", key, "--token", token]
    n1 = h.Supervisor(SUP, AGENT, state_dir=os.path.join(root, "n1"), pool_size=1, token=token,
                      extra=["--listen", "127.0.0.1:%d" % p1, "--node-name", "n1",
                             "--peer", "n2=http://127.0.0.1:%d" % p2] + common)
    n2 = h.Supervisor(SUP, AGENT, state_dir=os.path.join(root, "n2"), pool_size=0, token=token,
                      extra=["--listen", "127.0.0.1:%d" % p2, "--node-name", "n2",
                             "--peer", "n1=http://127.0.0.1:%d" % p1] + common)
    try:
        n1.start()
        n2.start()
        n1.wait_ready()
        sid = n1.create(timeout=600)["id"]
        timed(n1, sid, 50, True)  # warm up both paths
        timed(n2, sid, 50, False)
        timed(n2, sid, 50, True)
        # interleaved in rounds, so that the machine's load falls on every row alike
        names = ["exec `true` on n1 through n1, kept-alive connection",
                 "exec `true` on n1 relayed through n2, kept-alive connection",
                 "exec `true` on n1 through n1, a connection per request",
                 "exec `true` on n1 relayed through n2, a connection per request"]
        keys = dict(zip(names, (("relay.local_kept", "floor"), ("relay.relayed_kept", "sbx"),
                                ("relay.local_conn", "peer"), ("relay.relayed_conn", "sbx"))))
        ms = {k: [] for k in names}
        rounds = 10
        for _ in range(rounds):
            ms[names[0]] += timed(n1, sid, N // rounds, True)
            ms[names[1]] += timed(n2, sid, N // rounds, True)
            ms[names[2]] += timed(n1, sid, N // rounds, False)
            ms[names[3]] += timed(n2, sid, N // rounds, False)
        rows = [(k, ms[k]) for k in names]
        print("load average at the end: %.2f %.2f %.2f" % os.getloadavg())
        for what, ms in rows:
            print("| %-66s | %5d | %8.3f | %8.3f |" % (what, len(ms), h.percentile(ms, 50),
                                                     h.percentile(ms, 99)))
            emit(keys[what][0], what, keys[what][1], n=len(ms), p50_ms=h.percentile(ms, 50),
                 p99_ms=h.percentile(ms, 99))
    finally:
        for s in (n2, n1):
            if s.alive():
                h.stop_clean(s)
            s.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""TLS beside clear, same run: two supervisors on this machine, one plain
HTTP and one serving HTTPS (--tls-cert/--tls-key, an EC P-256 certificate
scripts/tls-certs makes; TLS 1.3, the client Python's ssl verifying it),
each with a sandbox, measured in alternating rounds so the machine's load
falls on both alike:
- exec `true`, kept-alive connection: p50, p99;
- a command's output through SSE (`head -c` of zeros, SBX_TLS_SSE_MIB,
  default 256 MiB): MB/s of output;
- a file up (`PUT /files`) and down (`GET /files`), SBX_TLS_MIB (default
  1024 MiB): MB/s;
- new connections with a full handshake each (`openssl s_time -new`, a C
  client, for SBX_TLS_HANDSHAKE_S seconds, default 5), each sending `GET
  /healthz` (HTTP/1.0): connections/s of sbx, beside `openssl s_server
  -www` with the same certificate (one process, one connection at a time:
  a server that does nothing else).
Release build, real runc.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_tls.py
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import emit, pct  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
MB = 1 << 20
FILE_MIB = int(os.environ.get("SBX_TLS_MIB", "1024"))
SSE_MIB = int(os.environ.get("SBX_TLS_SSE_MIB", "256"))
HS_S = int(os.environ.get("SBX_TLS_HANDSHAKE_S", "5"))
ROUNDS = int(os.environ.get("SBX_TLS_ROUNDS", "3"))
EXECS = int(os.environ.get("SBX_TLS_EXECS", "300"))


def auth(sup):
    return {"Authorization": "Bearer " + sup.token}


def execs(sup, sid, n):
    body = json.dumps({"argv": ["true"]}).encode()
    c, out = sup.conn(30), []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            c.request("POST", "/v1/sandboxes/%s/exec" % sid, body=body, headers=auth(sup))
            r = c.getresponse()
            data = r.read()
            out.append((time.perf_counter() - t0) * 1e3)
            assert r.status == 200, data
    finally:
        c.close()
    return out


def sse(sup, sid):
    """MB/s of a command's output through SSE (bytes of output, base64
    decoded length counted from the events' size)."""
    c = sup.conn(600)
    try:
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandboxes/%s/exec" % sid, headers=dict(
            auth(sup), Accept="text/event-stream"), body=json.dumps(
                {"cmd": "head -c %d /dev/zero" % (SSE_MIB * MB), "timeout": 600}).encode())
        r = c.getresponse()
        assert r.status == 200
        got = 0
        while True:
            piece = r.read1(1 << 20)
            if not piece:
                break
            got += len(piece)
        took = time.perf_counter() - t0
    finally:
        c.close()
    assert got > SSE_MIB * MB, got  # base64 makes it 4/3 of the output
    return SSE_MIB * MB / took / 1e6


def up(sup, sid, block):
    path = "/v1/sandboxes/%s/files?path=/workspace/big.bin" % sid
    c = sup.conn(900)
    try:
        t0 = time.perf_counter()
        c.putrequest("PUT", path)
        for k, v in auth(sup).items():
            c.putheader(k, v)
        c.putheader("Content-Length", str(FILE_MIB * MB))
        c.endheaders()
        for _ in range(FILE_MIB):
            c.send(block)
        r = c.getresponse()
        r.read()
        took = time.perf_counter() - t0
        assert r.status == 200
    finally:
        c.close()
    return FILE_MIB * MB / took / 1e6


def down(sup, sid, want):
    path = "/v1/sandboxes/%s/files?path=/workspace/big.bin" % sid
    c = sup.conn(900)
    try:
        t0 = time.perf_counter()
        c.request("GET", path, headers=auth(sup))
        r = c.getresponse()
        assert r.status == 200
        d = hashlib.sha256() if want else None
        got = 0
        while True:
            piece = r.read1(1 << 20)
            if not piece:
                break
            got += len(piece)
            if d:
                d.update(piece)
        took = time.perf_counter() - t0
    finally:
        c.close()
    assert got == FILE_MIB * MB, got
    if d:
        assert d.hexdigest() == want
    return FILE_MIB * MB / took / 1e6


def s_time(port, seconds):
    """openssl s_time -new against 127.0.0.1:port: connections/s."""
    p = subprocess.run(["openssl", "s_time", "-connect", "127.0.0.1:%d" % port, "-new",
                        "-time", str(seconds), "-www", "/healthz"], capture_output=True,
                       text=True, timeout=seconds * 4 + 30)
    m = re.search(r"(\d+) connections in ([\d.]+)s", p.stdout)
    assert m, p.stdout + p.stderr
    return int(m.group(1)) / float(m.group(2))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    root = tempfile.mkdtemp(prefix="sbx-bench-tls-")
    subprocess.run([os.path.join(TOP, "scripts", "tls-certs"), root, "--name", "bench"],
                   check=True, capture_output=True)
    crt, key, ca = (os.path.join(root, f) for f in ("tls.crt", "tls.key", "ca.crt"))
    clear = h.Supervisor(SUP, AGENT, state_dir=os.path.join(root, "clear"), pool_size=1)
    tls = h.Supervisor(SUP, AGENT, state_dir=os.path.join(root, "tls"), pool_size=1, ca_file=ca,
                       extra=["--tls-cert", crt, "--tls-key", key])
    server = None
    try:
        clear.start()
        tls.start()
        clear.wait_ready()
        tls.wait_ready()
        sid = {s: s.create(timeout=3600)["id"] for s in (clear, tls)}
        both = (("clear", clear), ("tls", tls))
        ex = {n: [] for n, _ in both}
        rate = {k: [] for k in ("sse.clear", "sse.tls", "up.clear", "up.tls", "down.clear",
                                "down.tls")}
        block = os.urandom(MB)
        d = hashlib.sha256()  # the file: the block FILE_MIB times
        for _ in range(FILE_MIB):
            d.update(block)
        want = d.hexdigest()
        for n, s in both:
            execs(s, sid[s], 50)  # warm up
        for r in range(ROUNDS):
            for n, s in both:
                ex[n] += execs(s, sid[s], EXECS // ROUNDS)
                rate["sse." + n].append(sse(s, sid[s]))
                rate["up." + n].append(up(s, sid[s], block))
                rate["down." + n].append(down(s, sid[s], want if r == 0 else None))
        hs_sbx = s_time(tls.port, HS_S)
        port = free_port()
        server = subprocess.Popen(["openssl", "s_server", "-accept", "127.0.0.1:%d" % port,
                                   "-cert", crt, "-key", key, "-www", "-quiet"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.05)
        hs_floor = s_time(port, HS_S)
        print("load average at the end: %.2f %.2f %.2f" % os.getloadavg())
        rows = [
            ("exec `true`, kept-alive, plain HTTP", "tls.exec.clear", "peer", ex["clear"]),
            ("exec `true`, kept-alive, HTTPS", "tls.exec.tls", "sbx", ex["tls"]),
        ]
        for what, k, role, v in rows:
            print("| %-52s | %5d | %8.3f | %8.3f |" % (what, len(v), pct(v, 50), pct(v, 99)))
            emit(k, what, role, n=len(v), p50_ms=pct(v, 50), p99_ms=pct(v, 99))
        words = {"sse": "output through SSE (%d MiB)" % SSE_MIB,
                 "up": "PUT /files (%d MiB)" % FILE_MIB, "down": "GET /files (%d MiB)" % FILE_MIB}
        for k in ("sse", "up", "down"):
            for n, role in (("clear", "peer"), ("tls", "sbx")):
                v = sorted(rate["%s.%s" % (k, n)])
                what = "%s, %s (median of %d)" % (words[k], "HTTPS" if n == "tls" else "plain HTTP",
                                                   len(v))
                print("| %-52s | %8.0f MB/s |" % (what, v[len(v) // 2]))
                emit("tls.%s.%s" % (k, n), what, role, n=len(v), mbps=v[len(v) // 2])
        for what, k, role, v in (("new TLS connections/s (s_time -new), sbx", "tls.handshake.sbx",
                                  "sbx", hs_sbx),
                                 ("new TLS connections/s (s_time -new), openssl s_server",
                                  "tls.handshake.s_server", "peer", hs_floor)):
            print("| %-52s | %8.0f /s |" % (what, v))
            emit(k, what, role, rps=v)
    finally:
        if server:
            server.kill()
            server.wait()
        for s in (tls, clear):
            if s.alive():
                h.stop_clean(s)
            s.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

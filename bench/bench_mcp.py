"""MCP over Streamable HTTP: sbx (server-everything in a runc sandbox, one
process per session, at /v1/sandboxes/{id}/mcp/everything) beside
supergateway 4.0.0 (--stateful, one child per session, on the host) over
the same server-everything, and the server's own stdio as the floor, in
the same run. Release build, real runc; npm parts from tests/mcp-servers
(scripts/install-mcp-servers).
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_mcp.py [CALLS]
Rows: tools/call echo p50/p99 (one session, a Python client), calls/s
with 20 sessions side by side (one Node client for all: mcp_load.mjs),
beside the floor: 20 servers on their own pipes driven by that client at
the same concurrency (no transport: what the host can do at all),
initialize p50 (sbx: with a spare ready), memory per session beyond the
server process (sbx: supervisor + agent; supergateway: its own process).
Then the CPU each process spent per call in the 20-session rows (every
thread's schedstat, the sandbox's cgroup for its servers), so the
transport's own cost is read apart from the servers' and the client's.
The sandbox gets the machine's CPUs (SBX_MCP_CPUS, default all), as the
peer's and the floor's servers have them; SBX_MCP_QUICK=1 runs only the
20-session rows.
"""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import emit  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
EVERYTHING = h.mcp_npm("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
GATEWAY = h.mcp_npm("node_modules", "supergateway", "dist", "index.js")
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
CPUS = float(os.environ.get("SBX_MCP_CPUS") or os.cpu_count())
QUICK = os.environ.get("SBX_MCP_QUICK") == "1"
SESSIONS = 20
INITS = 10
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def pct(v, p):
    return h.percentile(v, p)


def side_by_side(run, each):
    """run(x) for every x of each, a thread each, started together: the
    seconds until the last one ended."""
    import threading
    threads = [threading.Thread(target=run, args=(x,)) for x in each]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0


def load(port, path, headers, sessions, calls, settle=None, meters=None):
    """sessions sessions (initialized one after the other, then settle()),
    then calls tools/call echo each, the sessions side by side (a thread
    each, one keep-alive connection each). Answers come as JSON or as one
    SSE event (Accept takes both, as clients send). meters: {name: fn()
    -> a counter}, read around the side-by-side calls; their differences
    in the result's "meters"."""
    import http.client
    conns = []
    for _ in range(sessions):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", path, json.dumps(INIT), headers=headers)
        r = c.getresponse()
        r.read()
        hd = dict(headers, **{"Mcp-Session-Id": r.getheader("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-06-18"})
        c.request("POST", path, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers=hd)
        c.getresponse().read()
        conns.append((c, hd))
    if settle:
        settle()
    if sessions > 1:
        # Side by side: one Node event loop drives every session (mcp_load.mjs).
        for c, _ in conns:
            c.close()
        sids = [hd["Mcp-Session-Id"] for _, hd in conns]
        try:
            m0 = {k: f() for k, f in (meters or {}).items()}
            res = node_load(["http", str(port), path, json.dumps(headers), json.dumps(sids), str(calls)])
            res["meters"] = {k: f() - m0[k] for k, f in (meters or {}).items()}
            return res
        finally:
            for _, hd in conns:
                delete("127.0.0.1", port, path, hd)
    lat, errors = [], []

    def run(ch):
        c, hd = ch
        # A fresh connection: node's server closes one idle for 5 s, as
        # the first sessions' are while the others start.
        c.close()
        c.connect()
        mine = []
        try:
            for i in range(1, calls + 1):
                body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                   "params": {"name": "echo", "arguments": {"message": "hi"}}})
                t0 = time.monotonic()
                c.request("POST", path, body, headers=hd)
                r = c.getresponse()
                data = r.read()
                mine.append((time.monotonic() - t0) * 1000)
                if b"Echo: hi" not in data:
                    raise RuntimeError("bad echo %r" % data[:200])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
        lat.extend(mine)
    secs = side_by_side(run, conns)
    for c, hd in conns:
        c.close()
        delete("127.0.0.1", port, path, hd)
    if errors:
        raise RuntimeError("%d of %d sessions failed, the first: %r" % (len(errors), sessions, errors[0]))
    return {"lat_ms": lat, "secs": secs, "calls": len(lat)}


def post(host, port, path, headers, body):
    """(status, headers, body) of one POST on a fresh connection."""
    import http.client
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("POST", path, json.dumps(body), headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def delete(host, port, path, headers):
    import http.client
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("DELETE", path, headers=headers)
    c.getresponse().read()
    c.close()


def cpu_s(pid):
    """CPU seconds of a process, every thread (schedstat's ns: exact where
    /proc/PID/stat counts 10 ms ticks); 0 once it ended."""
    ns = 0
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0.0
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                ns += int(f.read().split()[0])
        except OSError:
            pass
    return ns / 1e9


def descendants(pid):
    """The pids below pid (children of every thread, and theirs)."""
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                for c in f.read().split():
                    out += [int(c)] + descendants(int(c))
    except OSError:
        pass
    return out


def cgroup_value(ctrl, cid, name, key=None):
    """A cgroup v1 figure of container cid (key: a line of a flat file)."""
    with open("/sys/fs/cgroup/%s/sbx/%s/%s" % (ctrl, cid, name)) as f:
        text = f.read()
    if key is None:
        return int(text)
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def stdio_floor(n):
    """tools/call echo over the server's own pipes: the floor."""
    p = subprocess.Popen(["node", EVERYTHING], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def call(m):
        p.stdin.write(json.dumps(m) + "\n")
        while True:
            got = json.loads(p.stdout.readline())
            if got.get("id") == m.get("id"):
                return got
    try:
        call(INIT)
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        lat = []
        for i in range(1, n + 1):
            t0 = time.monotonic()
            call({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"message": "hi"}}})
            lat.append((time.monotonic() - t0) * 1000)
        return lat
    finally:
        p.kill()
        p.wait()


def node_load(args):
    """mcp_load.mjs's {"lat_ms", "secs", "calls"} for args."""
    out = subprocess.run(["node", os.path.join(HERE, "mcp_load.mjs")] + args, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("mcp_load.mjs: %s" % out.stderr.strip()[-2000:])
    return json.loads(out.stdout)


def stdio_floor_side_by_side(sessions, calls):
    """calls/s of sessions servers on their own pipes, driven by the same
    client as the 20-session rows: what the host gives with no transport
    at all (the ceiling of those rows)."""
    return node_load(["stdio", EVERYTHING, str(sessions), str(calls)])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def row(what, n, p50, p99, role):
    print("| %-46s | %6s | %9s | %9s | %s |" % (what, n, p50, p99, role))


def main():
    la0 = os.getloadavg()
    results = {}
    # ---- sbx ----
    sup = h.Supervisor(SUP, AGENT, pool_size=1, extra=["--log-level", "warn"])
    gw = None
    try:
        sup.start()
        sup.wait_ready()
        sid = sup.create(resources={"cpus": CPUS})["id"]
        cid = "sbx-%s-%s" % (h.state_tag(sup.state_dir), sid)
        apid = json.loads(subprocess.run([h.RUNTIME, "state", cid], capture_output=True, text=True,
                                         check=True).stdout)["pid"]
        h.mcp_modules_into(sup, sid)
        path = "/v1/sandboxes/%s/mcp/everything" % sid
        st, _, b = sup.request("PUT", path, {"command": "node", "args": [
            h.MCP_SANDBOX_MODULES + "server-everything/dist/index.js"]})
        assert st == 200, b
        auth = {"Authorization": "Bearer " + sup.token, "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"}

        def spare_ready():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                _, _, b = sup.request("GET", "/v1/sandboxes/%s/mcp" % sid)
                s = b["servers"][0]
                if s["state"] == "ready" and s["spare_pid"]:
                    return
                time.sleep(0.1)
            raise RuntimeError("no spare")

        # initialize with a spare ready (before each, spare_ready waits
        # for the agent to have started the next one) (and given 1 s to settle)
        inits = []
        for _ in range(0 if QUICK else INITS):
            spare_ready()
            time.sleep(1)
            t0 = time.monotonic()
            st, hd, _ = post("127.0.0.1", sup.port, path, auth, INIT)
            inits.append((time.monotonic() - t0) * 1000)
            assert st == 200
            delete("127.0.0.1", sup.port, path, dict(auth, **{"Mcp-Session-Id": hd["mcp-session-id"]}))
        results["sbx_init"] = inits
        spare_ready()
        if not QUICK:
            results["sbx_echo"] = load(sup.port, path, auth, 1, CALLS, spare_ready)
        # memory per session: 20 open, supervisor + agent (PID 1 inside)
        def agent_rss():
            _, _, b = sup.exec(sid, cmd="grep VmRSS /proc/1/status")
            return int(b["stdout"].split()[1])
        sup_rss0, ag_rss0 = h.rss_kb(sup.proc.pid), agent_rss()
        sids = []
        for _ in range(0 if QUICK else SESSIONS):
            spare_ready()
            st, hd, _ = post("127.0.0.1", sup.port, path, auth, INIT)
            assert st == 200
            sids.append(hd["mcp-session-id"])
        sup_rss1, ag_rss1 = h.rss_kb(sup.proc.pid), agent_rss()
        results["sbx_mem_kib"] = ((sup_rss1 - sup_rss0) + (ag_rss1 - ag_rss0)) / SESSIONS
        results["sbx_mem_parts"] = (sup_rss1 - sup_rss0, ag_rss1 - ag_rss0)
        for s in sids:
            delete("127.0.0.1", sup.port, path, dict(auth, **{"Mcp-Session-Id": s}))
        results["sbx_conc"] = load(sup.port, path, auth, SESSIONS, CALLS // 5, spare_ready, meters={
            "supervisor": lambda: cpu_s(sup.proc.pid),
            "agent": lambda: cpu_s(apid),
            "sandbox": lambda: cgroup_value("cpuacct", cid, "cpuacct.usage") / 1e9,
            "throttled": lambda: cgroup_value("cpu", cid, "cpu.stat", "nr_throttled"),
            "throttled_s": lambda: cgroup_value("cpu", cid, "cpu.stat", "throttled_time") / 1e9,
        })

        # ---- supergateway over the same server, on the host ----
        port = free_port()
        gw = subprocess.Popen(["node", GATEWAY, "--stdio", "node " + EVERYTHING, "--outputTransport",
                               "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        gpath = "/mcp"
        plain = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        inits = []
        for _ in range(0 if QUICK else INITS):
            time.sleep(1)
            t0 = time.monotonic()
            st, hd, _ = post("127.0.0.1", port, gpath, plain, INIT)
            inits.append((time.monotonic() - t0) * 1000)
            assert st == 200, st
            delete("127.0.0.1", port, gpath, dict(plain, **{"Mcp-Session-Id": hd["mcp-session-id"]}))
        results["gw_init"] = inits
        if not QUICK:
            results["gw_echo"] = load(port, gpath, plain, 1, CALLS)
        rss0 = h.rss_kb(gw.pid)
        sids = []
        for _ in range(0 if QUICK else SESSIONS):
            st, hd, _ = post("127.0.0.1", port, gpath, plain, INIT)
            sids.append(hd["mcp-session-id"])
        results["gw_mem_kib"] = (h.rss_kb(gw.pid) - rss0) / SESSIONS
        for s in sids:
            delete("127.0.0.1", port, gpath, dict(plain, **{"Mcp-Session-Id": s}))
        results["gw_conc"] = load(port, gpath, plain, SESSIONS, CALLS // 5, meters={
            "gateway": lambda: cpu_s(gw.pid),
            "servers": lambda: sum(cpu_s(p) for p in descendants(gw.pid)),
        })
        if not QUICK:
            results["floor"] = stdio_floor(CALLS)
        results["floor_conc"] = stdio_floor_side_by_side(SESSIONS, CALLS // 5)
    finally:
        if gw:
            gw.kill()
            gw.wait()
        try:
            h.stop_clean(sup)
        finally:
            sup.cleanup()
    la1 = os.getloadavg()

    print("load average at start %.1f %.1f %.1f, at end %.1f %.1f %.1f (%d vCPUs); the sandbox's cpus: %g"
          % (la0 + la1 + (os.cpu_count(), CPUS)))
    print("| what | n | p50 ms | p99 ms | role |")
    print("|---|---|---|---|---|")
    if not QUICK:
        f = results["floor"]
        row("tools/call echo: the server's own stdio", len(f), "%.3f" % pct(f, 50), "%.3f" % pct(f, 99), "floor")
        emit("mcp.echo.stdio", "tools/call echo: the server's own stdio", "floor", n=len(f),
             p50_ms=pct(f, 50), p99_ms=pct(f, 99))
        for key, name, role in (("gw", "supergateway 4.0.0 (host)", "peer"), ("sbx", "sbx (runc sandbox)", "sbx")):
            e = results[key + "_echo"]["lat_ms"]
            row("tools/call echo, one session: " + name, len(e), "%.3f" % pct(e, 50), "%.3f" % pct(e, 99),
                role + (", target p50 <= floor + 1 ms" if key == "sbx" else ""))
            emit("mcp.echo." + key, "tools/call echo, one session: " + name, role, n=len(e),
                 p50_ms=pct(e, 50), p99_ms=pct(e, 99))
    for key, name, role in (("floor", "the servers' own stdio", "floor (no transport)"),
                            ("gw", "supergateway", "peer"), ("sbx", "sbx", "sbx, target >= 2000")):
        c = results[key + "_conc"]
        row("calls/s, %d sessions side by side: %s" % (SESSIONS, name), c["calls"],
            "%.0f/s" % (c["calls"] / c["secs"]), "p99 %.3f" % pct(c["lat_ms"], 99), role)
        emit("mcp.rate." + key, "calls/s, %d sessions side by side: %s" % (SESSIONS, name),
             role, n=c["calls"], calls_s=c["calls"] / c["secs"], p99_ms=pct(c["lat_ms"], 99),
             sessions=SESSIONS)
    if not QUICK:
        for key, name, role in (("gw", "supergateway (spawns the server)", "peer"),
                                ("sbx", "sbx, a spare ready", "sbx, target p50 <= 20 ms")):
            i = results[key + "_init"]
            row("initialize: " + name, len(i), "%.3f" % pct(i, 50), "%.3f" % pct(i, 99), role)
            emit("mcp.init." + key, "initialize: " + name, role, n=len(i), p50_ms=pct(i, 50),
                 p99_ms=pct(i, 99))
        row("memory per session beyond the server: supergateway", SESSIONS, "%.0f KiB" % results["gw_mem_kib"],
            "", "peer")
        for key, role in (("gw", "peer"), ("sbx", "sbx")):
            emit("mcp.mem." + key, "memory per session beyond the server: " +
                 ("supergateway" if key == "gw" else "sbx"), role, n=SESSIONS,
                 kib=results[key + "_mem_kib"])
        row("memory per session beyond the server: sbx", SESSIONS, "%.0f KiB" % results["sbx_mem_kib"], "",
            "sbx (supervisor +%d KiB, agent +%d KiB for %d), target <= 1 MiB" % (results["sbx_mem_parts"] +
                                                                                 (SESSIONS,)))
    print()
    print("CPU per call in the %d-session rows, microseconds (every thread; sbx's servers: the sandbox's"
          " cgroup less its agent)" % SESSIONS)
    print("| row | client | transport | agent | servers | all | calls/s |")
    print("|---|---|---|---|---|---|---|")
    f, g, x = results["floor_conc"], results["gw_conc"], results["sbx_conc"]
    us = lambda sec, c: sec * 1e6 / c["calls"]  # noqa: E731
    per = (("the servers' own stdio", f, f["client_cpu_s"], None, None, f["servers_cpu_s"]),
           ("supergateway", g, g["client_cpu_s"], g["meters"]["gateway"], None, g["meters"]["servers"]),
           ("sbx", x, x["client_cpu_s"], x["meters"]["supervisor"], x["meters"]["agent"],
            x["meters"]["sandbox"] - x["meters"]["agent"]))
    for name, c, cl, tr, ag, sv in per:
        parts = [v for v in (cl, tr, ag, sv) if v is not None]
        print("| %s | %s | %s | %s | %s | %.0f | %.0f/s |" % tuple(
            [name] + ["%.0f" % us(v, c) if v is not None else "-" for v in (cl, tr, ag, sv)] +
            [us(sum(parts), c), c["calls"] / c["secs"]]))
    print("the sandbox's cgroup was throttled %d times (%.2f s) during the sbx row"
          % (x["meters"]["throttled"], x["meters"]["throttled_s"]))

if __name__ == "__main__":
    main()

"""Ports: small GETs through the port proxy beside the same server reached
directly in the sandbox's network namespace from the host (wrk, serial for
p50/p99 and 16 connections for requests/s), and a large download through
the proxy beside the same download direct (curl). Release build, real
runc; python3 -m http.server inside (HTTP/1.0: a connection per request
both ways), sending file bodies by socket.sendfile, so the rows measure
the path rather than Python's copy loop, which shares the sandbox's CPU.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_ports.py
Env: SBX_PORTS_BIG_MIB (default 1024), SBX_PORTS_SECS (default 5),
SBX_PORTS_SMALL=0 to leave out the small GETs' rows, SBX_PORTS_ROUNDS
(default 1): the large downloads' rows that many times, SBX_PORTS_SERVER:
sendfile (default), copy (http.server's own copyfile: 64 KiB read + send
in Python, the server of the rows before 2026-12-02 16:00), paced (64 KiB
writes 0.1 ms apart: a server slower than the proxy, which the agent reads
in larger turns only while bulk flows) or both (copy and sendfile side by
side on ports 8000 and 8001, their rows in turn).
"""
import resource
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import emit  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
BIG_MIB = int(os.environ.get("SBX_PORTS_BIG_MIB", "1024"))
SECS = int(os.environ.get("SBX_PORTS_SECS", "5"))
SMALL = os.environ.get("SBX_PORTS_SMALL", "1") != "0"
ROUNDS = int(os.environ.get("SBX_PORTS_ROUNDS", "1"))
SERVERS = {"sendfile": ["sendfile"], "copy": ["copy"], "paced": ["paced"],
           "both": ["copy", "sendfile"]}[os.environ.get("SBX_PORTS_SERVER", "sendfile")]
PORT = 8000  # the first server's; the second's is PORT + 1
# http.server's handler and threading server, with a backlog for 16
# connections at once (its default of 5 drops SYNs: 1 s retries). sendfile:
# the heads by http.server, the body by socket.sendfile (the page cache to
# the socket in the kernel); copy: http.server's shutil.copyfileobj.
SERVER = ("import functools, sys, time, http.server as s\n"
          "s.ThreadingHTTPServer.request_queue_size = 128\n"
          "s.SimpleHTTPRequestHandler.log_message = lambda *a: None\n"
          "class H(s.SimpleHTTPRequestHandler):\n"
          "    def copyfile(self, source, outputfile):\n"
          "        while sys.argv[2] == 'paced':\n"
          "            b = source.read(65536)\n"
          "            if not b:\n"
          "                return\n"
          "            outputfile.write(b)\n"
          "            time.sleep(0.0001)\n"
          "        if sys.argv[2] != 'sendfile':\n"
          "            return super().copyfile(source, outputfile)\n"
          "        outputfile.flush()\n"
          "        self.connection.sendfile(source)\n"
          "h = functools.partial(H, directory='/tmp/www')\n"
          "s.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), h).serve_forever()\n")


def netns_pid(sup):
    """The host pid of a container of sup's whose namespace listens on PORT."""
    want = ":%04X" % PORT
    for cid, _, rt in h.containers_under(sup.state_dir, with_runtime=True):
        out = subprocess.run(rt + ["state", cid], capture_output=True, text=True)
        m = re.search(r'"pid":\s*(\d+)', out.stdout)
        if not m:
            continue
        pid = m.group(1)
        with open("/proc/%s/net/tcp" % pid) as f:
            if any(want in line.split()[1] and line.split()[3] == "0A" for line in f.readlines()[1:]):
                return pid
    raise AssertionError("no container listens on %d" % PORT)


def wrk(url, conns, headers=(), prefix=()):
    cmd = list(prefix) + ["wrk", "-t1" if conns == 1 else "-t2", "-c%d" % conns, "-d%ds" % SECS,
                          "--latency"]
    for hd in headers:
        cmd += ["-H", hd]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout

    def ms(label):
        m = re.search(r"^\s+%s\s+([\d.]+)(us|ms|s)\s*$" % label, out, re.M)
        assert m, out
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    assert not re.search(r"Non-2xx or 3xx responses", out), out
    errs = re.search(r"Socket errors: (.*)", out)
    if errs:
        print("(%s: socket errors %s)" % (url, errs.group(1)))
    return ms("50%"), ms("99%"), rps


def server_pids(agent):
    """{port: host pid} of the servers in agent's network namespace."""
    ns = os.readlink("/proc/%s/ns/net" % agent)
    found = {}
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and d != agent and os.readlink("/proc/%s/ns/net" % d) == ns:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
                if len(argv) > 3 and b"ThreadingHTTPServer" in argv[2]:
                    found[int(argv[3])] = d
        except OSError:
            pass  # gone meanwhile, or not ours to read
    return found


def curl(url, headers=(), prefix=()):
    cmd = list(prefix) + ["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}"]
    for hd in headers:
        cmd += ["-H", hd]
    n, t = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout.split()
    assert int(n) == BIG_MIB << 20, n
    return int(n) / float(t) / 1e9


def cpu_s(pid):
    """user + system CPU seconds of one process so far."""
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid):
    """Context switches of one process so far (voluntary: it waited for
    something, a wake-up each; involuntary: it was preempted)."""
    n = 0
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                n += int(line.split()[1])
    return n


def cpu_stat(pid):
    """The cpu.stat of pid's cgroup (v1's cpu controller, else v2's)."""
    with open("/proc/%s/cgroup" % pid) as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, ctl, path in lines:
        if "cpu" in ctl.split(","):
            return "/sys/fs/cgroup/%s%s/cpu.stat" % (ctl, path)
    for _, ctl, path in lines:
        for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
            if ctl == "" and os.path.exists("%s%s/cpu.stat" % (root, path)):
                return "%s%s/cpu.stat" % (root, path)
    return None


def throttled_ms(stat):
    """How long the cgroup was held back by its CPU quota so far, ms (0
    where no cpu.stat was found)."""
    if not stat:
        return 0.0
    with open(stat) as f:
        kv = dict(line.split() for line in f if line.strip())
    if "throttled_time" in kv:
        return int(kv["throttled_time"]) / 1e6
    return int(kv.get("throttled_usec", 0)) / 1e3


def children_cpu_s():
    """user + system CPU seconds of this process's waited-for children (curl)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def costed(fn, pids, server, stat):
    """fn()'s result, the CPU seconds per GiB moved of each of pids, of the
    server and of curl, the context switches per GiB of each of pids, then
    the ms per GiB the sandbox (the agent, the server: one cgroup, one CPU
    quota) was throttled."""
    before = [(cpu_s(p), switches(p)) for p in pids]
    srv0, cli0 = cpu_s(server), children_cpu_s()
    t0 = throttled_ms(stat)
    r = fn()
    gib = BIG_MIB / 1024
    return r, (["%.2f" % ((cpu_s(p) - b[0]) / gib) for p, b in zip(pids, before)] +
               ["%.2f" % ((cpu_s(server) - srv0) / gib),
                "%.2f" % ((children_cpu_s() - cli0) / gib)] +
               ["%.0f" % ((switches(p) - b[1]) / gib) for p, b in zip(pids, before)] +
               ["%.0f" % ((throttled_ms(stat) - t0) / gib)])


def main():
    sup = h.Supervisor(SUP, AGENT, pool_size=1)
    try:
        sup.start()
        sup.wait_ready()
        sid = sup.create(timeout=3600)["id"]
        st, _, b = sup.exec(sid, cmd="mkdir -p /tmp/www && head -c 100 /dev/zero > /tmp/www/small "
                            "&& head -c %d /dev/zero > /tmp/www/big" % (BIG_MIB << 20), timeout=600)
        assert st == 200 and b["exit_code"] == 0, b
        ports = {}
        for i, kind in enumerate(SERVERS):
            ports[kind] = PORT + i
            st, _, b = sup.request("POST", "/v1/sandboxes/%s/processes" % sid,
                                   {"argv": ["python3", "-c", SERVER, str(PORT + i), kind]})
            assert st == 201, b
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, _, b = sup.request("GET", "/v1/sandboxes/%s/ports" % sid)
            if set(ports.values()) <= {p["port"] for p in b.get("ports", [])}:
                break
            time.sleep(0.1)
        pid = netns_pid(sup)
        servers = server_pids(pid)
        assert set(ports.values()) <= set(servers), servers
        ns = ["nsenter", "-t", pid, "-n"]
        auth = ["Authorization: Bearer " + sup.token]
        proxy = "http://127.0.0.1:%d/v1/sandboxes/%s/ports/%d" % (sup.port, sid, PORT)
        direct = "http://127.0.0.1:%d" % PORT
        print("servers: %s" % ", ".join("%s on %d" % kv for kv in ports.items()))
        print("load before: %s" % open("/proc/loadavg").read().strip())
        if SMALL:
            print("| what | p50 ms | p99 ms | req/s |")
            print("|---|---|---|---|")
        for name, url, hd, pre in (("direct in the sandbox's netns", direct, (), ns),
                                   ("through the proxy", proxy, auth, ())):
            if not SMALL:
                break
            p50, p99, _ = wrk(url + "/small", 1, hd, pre)
            _, _, rps = wrk(url + "/small", 16, hd, pre)
            print("| GET 100 B, %s (1 conn for p50/p99, 16 for req/s) | %.3f | %.3f | %.0f |"
                  % (name, p50, p99, rps))
            emit("ports.small." + ("direct" if url == direct else "proxy"), "GET 100 B, " + name,
                 "floor" if url == direct else "sbx", p50_ms=p50, p99_ms=p99, rps=rps)
        # CPU and context switches per GiB: the supervisor, and the agent
        # (PID 1 of the sandbox); and how long the sandbox's CPU quota
        # (--default-resources cpus=1) held back the agent and the server,
        # which share it.
        pids = (sup.proc.pid, pid)
        stat = cpu_stat(pid)
        # The server's CPU is its process's (the /files row does not use it:
        # ~0); curl's is this process's children's.
        print("| what | GB/s | CPU s per GiB: supervisor | agent | server | curl | context "
              "switches per GiB: supervisor | agent | sandbox throttled ms per GiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        files = "http://127.0.0.1:%d/v1/sandboxes/%s/files?path=/tmp/www/big" % (sup.port, sid)
        gbps = {}  # a row's GB/s, round by round
        for _ in range(ROUNDS):
            rows = []
            for kind, port in ports.items():
                prx = "http://127.0.0.1:%d/v1/sandboxes/%s/ports/%d" % (sup.port, sid, port)
                rows += [("%s server, direct in the sandbox's netns" % kind,
                          "http://127.0.0.1:%d/big" % port, (), ns, servers[port]),
                         ("%s server, through the proxy" % kind, prx + "/big", auth, (),
                          servers[port])]
            rows.append(("the same file with GET /files (the agent's file.read)", files, auth, (),
                         servers[PORT]))
            for name, url, hd, pre, srv in rows:
                gbs, cost = costed(lambda: curl(url, hd, pre), pids, srv, stat)
                print("| GET %d MiB, %s | %.2f | %s |" % (BIG_MIB, name, gbs, " | ".join(cost)))
                gbps.setdefault(name, []).append(gbs)
        for name, v in gbps.items():
            kind = "direct" if "direct" in name else "files" if "/files" in name else "proxy"
            # the first direct round reads the file from disk: the floor is
            # the page cache's, the rounds after it (when there are any)
            warm = v[1:] if kind == "direct" and len(v) > 1 else v
            server = name.split()[0]
            emit("ports.big." + kind + ("" if kind == "files" or server == SERVERS[0] else "." + server),
                 "GET %d MiB, %s" % (BIG_MIB, name), {"direct": "floor", "files": "peer"}.get(kind, "sbx"),
                 n=len(warm), gbps=statistics.median(warm), rounds=v)
        print("load after: %s" % open("/proc/loadavg").read().strip())
        h.stop_clean(sup)
    finally:
        sup.cleanup()


if __name__ == "__main__":
    main()

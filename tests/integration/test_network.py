"""Egress by policy, end to end: a real supervisor with --uplink, real runc
sandboxes, and an "internet" the test makes: a network namespace holding
test hosts (addresses on its loopback only), an HTTP server on every one of
them and a DNS server answering for the test names. Nothing leaves the
machine: the sandboxes' router has no way out but into that namespace, and
the namespace has no way out at all (but a link back to the host for the
test of the supervisor's own address, masqueraded so the host answers on
that link). Everything the test makes (namespaces, links, processes) is
removed also when it fails, and recorded as its run's (sbx_harness's
register_run): the next harness start removes it should the test be
SIGKILLed.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness  # noqa: E402
from sbx_harness import (Supervisor, containers_under, register_run,  # noqa: E402
                         remove_everything_under, remove_router_of, remove_run, state_tag,
                         stop_clean, wait_runtime_calls)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
HERE = os.path.dirname(os.path.abspath(__file__))

WEB = "198.18.0.10"          # web.test.example (and its IPv6)
WEB6 = "2001:db8:18::10"
WEB_NEIGHBOUR = "198.18.0.11"
FILES = "198.18.0.12"        # *.files.test.example
OTHER = "198.18.0.13"        # other.test.example: never allowed by name
NET = "198.18.0.32"          # 198.18.0.32/30 allowed, .33 denied
DENIED_CIDR = "198.18.0.40"  # on --deny-cidrs
METADATA = "169.254.169.254"
METADATA6 = "fd00:ec2::254"
DNS = "198.18.0.53"
HOST_SIDE, INET_SIDE = "198.18.255.1", "198.18.255.2"  # a link host <-> internet

NAMES = {
    "web.test.example": [WEB, WEB6],
    "*.files.test.example": [FILES],
    "other.test.example": [OTHER],
    "net.test.example": [NET],
}
HOSTS = [WEB, WEB_NEIGHBOUR, FILES, OTHER, NET, "198.18.0.33", DENIED_CIDR, METADATA, DNS]
HOSTS6 = [WEB6, METADATA6]


def run(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s: %s %s" % (" ".join(cmd), r.stdout, r.stderr))
    return r


class Internet:
    """The test's internet: a namespace, its hosts and servers, each
    recorded as a run of its folder's as it is made (own()). cleanup() kills
    what runs in it and deletes it (and the links into it): remove_run."""

    def __init__(self, tag):
        self.ns = "sbxt%d%s" % (os.getpid(), tag)
        self.host_link = "sbxt%d%sh" % (os.getpid() % 100000, tag)
        self.dir = tempfile.mkdtemp(prefix="sbx-net-")
        self.dns_log = os.path.join(self.dir, "dns.log")
        self.procs = []

    def ip(self, *args, check=True):
        return run("ip", "-n", self.ns, *args, check=check)

    def exec(self, *cmd, check=True, timeout=30):
        return run("ip", "netns", "exec", self.ns, *cmd, check=check, timeout=timeout)

    def own(self, **things):
        """Record things (register_run's procs, netns, links) as the test's:
        the next harness start removes them should it be SIGKILLed."""
        register_run(self.dir, runc=(), **things)

    def start(self):
        sbx_harness._live.add(self)
        self.own(netns=[self.ns])
        run("ip", "netns", "add", self.ns)
        self.ip("link", "set", "lo", "up")
        for a in HOSTS:
            self.ip("addr", "add", a + "/32", "dev", "lo")
        for a in HOSTS6:
            self.ip("addr", "add", a + "/128", "dev", "lo")
        with open(os.path.join(self.dir, "index.html"), "w") as f:
            f.write("hello from the test internet\n")
        with open(os.path.join(self.dir, "names.json"), "w") as f:
            json.dump(NAMES, f)
        open(self.dns_log, "w").close()
        self.spawn("python3", os.path.join(HERE, "dns_server.py"), DNS, "53",
                   os.path.join(self.dir, "names.json"), self.dns_log, "60")
        for port in ("80", "8080"):
            self.spawn("python3", "-m", "http.server", "--bind", "::", "--directory", self.dir, port)
        self.wait_port(WEB, 80)
        self.wait_port(WEB, 8080)
        return self

    def spawn(self, *cmd):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns] + list(cmd),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        self.own(procs=[p.pid])
        return p

    def wait_port(self, addr, port, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.exec("python3", "-c",
                          "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)",
                          addr, str(port), check=False)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError("nothing listens on %s:%d in the test internet" % (addr, port))

    def wait_udp_bound(self, addr, port, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.exec("ss", "-Hnul", "src", "%s:%d" % (addr, port), check=False)
            if r.stdout.strip():
                return
            time.sleep(0.1)
        raise AssertionError("nothing bound %s:%d/udp in the test internet" % (addr, port))

    def link_to_host(self):
        """A link from the host into the internet, the internet routing
        through it and masquerading what it forwards (so the host answers on
        the link, never through its own uplink)."""
        self.own(links=[self.host_link])
        run("ip", "link", "add", self.host_link, "type", "veth", "peer", "name", "tohost",
            "netns", self.ns)
        run("ip", "addr", "add", HOST_SIDE + "/30", "dev", self.host_link)
        run("ip", "link", "set", self.host_link, "up")
        self.ip("addr", "add", INET_SIDE + "/30", "dev", "tohost")
        self.ip("link", "set", "tohost", "up")
        self.exec("sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.exec("nft", "add table ip t; add chain ip t post { type nat hook postrouting "
                  "priority srcnat; }; add rule ip t post oifname tohost masquerade")

    def dns_questions(self):
        """The names the DNS server was asked for."""
        with open(self.dns_log) as f:
            return {line.split()[1] for line in f if line.strip()}

    def cleanup(self):
        sbx_harness._live.discard(self)
        for p in self.procs:
            p.kill()
            p.wait()
        remove_run(self.dir)


# What a sandbox runs to try its way out: one line of JSON per probe.
PROBE = r"""
import json, socket, sys, time
out = []
for kind, a, b in json.loads(sys.argv[1]):
    t0 = time.monotonic()
    try:
        if kind == "tcp":
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect((a, b))
            s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
            data = s.recv(4096)
            r = "ok" if data.startswith(b"HTTP/") else "bad %r" % data[:40]
        elif kind == "name":
            r = "ok " + ",".join(sorted({i[4][0] for i in socket.getaddrinfo(a, b, proto=socket.IPPROTO_TCP)}))
        elif kind == "dns":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2)
            q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
            q += b"".join(bytes([len(l)]) + l.encode() for l in b.split(".")) + b"\0\x00\x01\x00\x01"
            s.sendto(q, (a, 53))
            s.recv(512)
            r = "ok"
        elif kind == "short":
            # datagrams shorter than a DNS header: libevent 2.1's server
            # crashed on them (sup_dns filters them out)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for n in (0, 1, 11):
                s.sendto(b"\x01" * n, (a, b))
            r = "ok"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = "refused %s" % (e.__class__.__name__ if not e.errno else e.errno)
    out.append([kind, a, b, r, round(time.monotonic() - t0, 3)])
print(json.dumps(out))
"""


class Network(unittest.TestCase):
    """One supervisor for most tests: its pool of 2 serves them in turn."""

    @classmethod
    def setUpClass(cls):
        cls.inet = Internet("i")
        try:
            cls.inet.start()
            cls.inet.link_to_host()
            cls.sup = Supervisor(SUP, AGENT, pool_size=2, host=HOST_SIDE,
                                 extra=["--uplink", "netns:" + cls.inet.ns, "--uplink-dns", DNS,
                                        "--deny-cidrs", DENIED_CIDR + "/32,2001:db8:dead::/48",
                                        "--allow-root"])
            cls.sup.start()
            cls.sup.wait_ready()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "sup", None):
            cls.sup.cleanup()
        cls.inet.cleanup()

    def create(self, network=None, **kw):
        body = dict(kw)
        if network is not None:
            body["network"] = network
        sb = self.sup.create(**body)
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sb["id"])
        return sb

    def sh(self, sid, cmd, user=None, timeout=60):
        body = {"cmd": cmd, "timeout": timeout}
        if user:
            body["user"] = user
        st, _, r = self.sup.exec(sid, **body)
        self.assertEqual(st, 200, r)
        return r

    def background(self, sid, cmd):
        st, _, r = self.sup.request("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": cmd})
        self.assertEqual(st, 201, r)
        return r

    def probe(self, sid, probes, user=None):
        r = self.sh(sid, "python3 -c '%s' '%s'" % (PROBE.replace("'", "'\\''"), json.dumps(probes)),
                    user=user)
        self.assertEqual(r["exit_code"], 0, r)
        return {(k, a, str(b)): (res, secs) for k, a, b, res, secs in json.loads(r["stdout"])}

    def assert_refused(self, res, what):
        r, secs = res
        self.assertTrue(r.startswith("refused"), "%s: %s" % (what, r))
        # refused at once (ICMP administratively prohibited), not a timeout
        self.assertLess(secs, 1.5, "%s took %.2f s" % (what, secs))

    # ---- the tests ----

    def test_allowed_name_and_cidr_reachable_the_rest_not(self):
        pol = {"default_action": "deny", "egress": [
            {"action": "allow", "target": "web.test.example"},
            {"action": "allow", "target": "*.files.test.example:80"},
            {"action": "allow", "target": "198.18.0.32/30"},
            {"action": "deny", "target": "198.18.0.33"},
        ]}
        sb = self.create(pol)
        self.assertEqual(sb["network"], pol)
        st, _, got = self.sup.request("GET", "/v1/sandboxes/" + sb["id"])
        self.assertEqual((st, got["network"]), (200, pol))
        self.assertEqual(len(got["addresses"]), 2)
        res = self.probe(sb["id"], [
            ["short", "100.96.0.1", 53],  # the resolver lives on after them
            ["name", "web.test.example", 80], ["tcp", "web.test.example", 80],
            ["tcp", WEB, 8080], ["tcp", WEB6, 80],
            ["name", "a.files.test.example", 80], ["tcp", "a.files.test.example", 80],
            ["tcp", "a.files.test.example", 8080],
            ["tcp", NET, 80], ["tcp", "198.18.0.33", 80],
            ["tcp", WEB_NEIGHBOUR, 80], ["tcp", OTHER, 80],
            ["name", "other.test.example", 80], ["name", "files.test.example", 80],
            ["dns", DNS, "smuggled.test.example"],
        ])
        self.assertEqual(res[("name", "web.test.example", "80")][0], "ok %s,%s" % (WEB, WEB6))
        for k in [("tcp", "web.test.example", "80"), ("tcp", WEB, "8080"), ("tcp", WEB6, "80"),
                  ("tcp", "a.files.test.example", "80"), ("tcp", NET, "80")]:
            self.assertEqual(res[k][0], "ok", k)
        # the wildcard's port only; the /32 deny inside the allowed /30; an
        # allowed name's neighbour; an address of a name not allowed
        for k in [("tcp", "a.files.test.example", "8080"), ("tcp", "198.18.0.33", "80"),
                  ("tcp", WEB_NEIGHBOUR, "80"), ("tcp", OTHER, "80")]:
            self.assert_refused(res[k], k)
        # names not allowed do not resolve, and never reach the internet's
        # DNS; nor does a query sent straight to it
        for k in [("name", "other.test.example", "80"), ("name", "files.test.example", "80")]:
            self.assertTrue(res[k][0].startswith("refused"), res[k])
        self.assertIn(res[("dns", DNS, "smuggled.test.example")][0], ("timeout",) + tuple(
            "refused %d" % e for e in (111, 113)))
        asked = self.inet.dns_questions()
        self.assertIn("web.test.example", asked)
        for name in ("other.test.example", "files.test.example", "smuggled.test.example"):
            self.assertNotIn(name, asked)

    def test_always_refused_whatever_the_policy(self):
        allow_all = {"default_action": "allow"}
        a = self.create(allow_all)
        b = self.create(allow_all)
        # b serves on its address; a tries it
        self.background(b["id"], "python3 -m http.server --bind :: 8000")
        b4, b6 = b["addresses"]
        self.sh(b["id"], "for i in $(seq 100); do python3 -c 'import socket; "
                "socket.create_connection((\"%s\", 8000), 1)' 2>/dev/null && exit 0; sleep 0.1; "
                "done; exit 1" % b4)
        api = (HOST_SIDE, self.sup.port)
        res = self.probe(a["id"], [
            ["tcp", OTHER, 80], ["tcp", METADATA, 80], ["tcp", METADATA6, 80],
            ["tcp", DENIED_CIDR, 80], ["tcp", b4, 8000], ["tcp", b6, 8000],
            ["tcp", api[0], api[1]], ["tcp", "100.96.0.1", 80],
        ])
        self.assertEqual(res[("tcp", OTHER, "80")][0], "ok")  # allow-all works
        for k in [("tcp", METADATA, "80"), ("tcp", METADATA6, "80"), ("tcp", DENIED_CIDR, "80"),
                  ("tcp", b4, "8000"), ("tcp", b6, "8000"), ("tcp", api[0], str(api[1])),
                  ("tcp", "100.96.0.1", "80")]:
            self.assert_refused(res[k], k)
        # what is refused is there: the internet reaches its own hosts and
        # the supervisor's API, b reaches its own server
        for addr, port in [(METADATA, 80), (DENIED_CIDR, 80), (api[0], api[1])]:
            self.inet.wait_port(addr, port, timeout=5)
        own = self.probe(b["id"], [["tcp", b4, 8000]])
        self.assertEqual(own[("tcp", b4, "8000")][0], "ok")

    def test_loopback_only_without_network(self):
        sb = self.create()
        self.assertNotIn("network", sb)
        r = self.sh(sb["id"], "cat /sys/class/net/eth0/operstate; ip -4 route | wc -l")
        self.assertEqual(r["stdout"].split(), ["down", "0"])
        res = self.probe(sb["id"], [["tcp", WEB, 80], ["name", "web.test.example", 80]])
        self.assertEqual(res[("tcp", WEB, "80")][0], "refused 101")  # ENETUNREACH
        self.assertTrue(res[("name", "web.test.example", "80")][0].startswith("refused"))

    def test_root_inside_cannot_lift_the_policy(self):
        pol = {"default_action": "deny", "egress": [{"action": "allow", "target": FILES},
                                                     {"action": "allow", "target": OTHER + ":9999"}]}
        sb = self.create(pol)
        other_sb = self.create({"default_action": "allow"})
        attempts = ["ip route flush table main", "ip route add default dev eth0",
                    "ip addr add %s/32 dev eth0" % other_sb["addresses"][0], "ip link set eth0 down",
                    "nft flush ruleset", "echo 1 > /proc/sys/net/ipv4/ip_forward",
                    "ip netns add x"]
        r = self.sh(sb["id"], "; ".join("(%s) 2>/dev/null; echo $?" % a for a in attempts),
                    user="root")
        rcs = r["stdout"].split()
        self.assertEqual(len(rcs), len(attempts), r)
        self.assertNotIn("0", rcs, list(zip(attempts, rcs)))
        # root has CAP_NET_RAW: a packet its policy lets out, but forged
        # with another sandbox's address, does not get out; the same
        # packet with its own address does
        log = os.path.join(self.inet.dir, "udp.log")
        listener = self.inet.spawn("python3", "-c", (
            "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            "s.bind(('%s', 9999)); f=open(sys.argv[1], 'a')\n"
            "while True: d, a = s.recvfrom(100); f.write(repr((d, a)) + chr(10)); f.flush()") % OTHER,
            log)
        self.addCleanup(listener.kill)
        self.inet.wait_udp_bound(OTHER, 9999)
        send = r"""
import socket, struct, sys
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for tag, a in ((b"forged", src), (b"honest", sys.argv[3])):
    udp = struct.pack("!HHHH", 4444, 9999, 8 + len(tag), 0) + tag
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(a), socket.inet_aton(dst))
    for _ in range(5):
        s.sendto(ip + udp, (dst, 0))
"""
        r = self.sh(sb["id"], "python3 -c '%s' %s %s %s" % (send, other_sb["addresses"][0], OTHER,
                                                          sb["addresses"][0]), user="root")
        self.assertEqual(r["exit_code"], 0, r)
        deadline = time.monotonic() + 5
        got = ""
        while "honest" not in got and time.monotonic() < deadline:
            time.sleep(0.1)
            if os.path.exists(log):
                with open(log) as f:
                    got = f.read()
        self.assertIn("honest", got)
        self.assertNotIn("forged", got)
        # and the policy holds as it was
        res = self.probe(sb["id"], [["tcp", FILES, 80], ["tcp", OTHER, 80]], user="root")
        self.assertEqual(res[("tcp", FILES, "80")][0], "ok")
        self.assert_refused(res[("tcp", OTHER, "80")], "other as root")

    def test_policy_changed_on_a_running_sandbox(self):
        sb = self.create({"default_action": "deny", "egress": [
            {"action": "allow", "target": "other.test.example"}]})
        sid = sb["id"]
        # a connection made under the first policy, to see it outlive the change
        self.background(sid, "python3 -c 'import socket,time\n"
                        "s=socket.create_connection((\"other.test.example\", 80), 3)\n"
                        "open(\"/tmp/ready\", \"w\").close()\n"
                        "time.sleep(4)\n"
                        "s.sendall(b\"GET /index.html HTTP/1.0\\r\\n\\r\\n\")\n"
                        "print(s.recv(100).split(b\"\\r\\n\")[0].decode())' > /tmp/kept 2>&1")
        self.sh(sid, "for i in $(seq 50); do [ -e /tmp/ready ] && exit 0; sleep 0.1; done; exit 1")
        res = self.probe(sid, [["tcp", "other.test.example", 80], ["tcp", FILES, 80]])
        self.assertEqual(res[("tcp", "other.test.example", "80")][0], "ok")
        self.assert_refused(res[("tcp", FILES, "80")], "files before")
        new = {"default_action": "deny", "egress": [{"action": "allow", "target": FILES + ":80"}]}
        st, _, v = self.sup.request("PATCH", "/v1/sandboxes/%s/network" % sid, new)
        self.assertEqual((st, v["network"]), (200, new), v)
        res = self.probe(sid, [["tcp", FILES, 80], ["tcp", OTHER, 80],
                               ["name", "other.test.example", 80]])
        self.assertEqual(res[("tcp", FILES, "80")][0], "ok")
        # the name's answer under the old policy is forgotten, and the name
        # no longer resolves
        self.assert_refused(res[("tcp", OTHER, "80")], "other after")
        self.assertTrue(res[("name", "other.test.example", "80")][0].startswith("refused"))
        # the established connection went on
        r = self.sh(sid, "for i in $(seq 80); do [ -s /tmp/kept ] && break; sleep 0.1; done; cat /tmp/kept")
        self.assertEqual(r["stdout"].strip(), "HTTP/1.0 200 OK", r)
        # bad PATCHes
        for body, want in [("{", 400), ({"default_action": "maybe"}, 400),
                           ({"egress": [{"action": "allow", "target": "10.0.0.1/8"}]}, 400)]:
            st, _, e = self.sup.request("PATCH", "/v1/sandboxes/%s/network" % sid, body)
            self.assertEqual(st, want, e)
            self.assertEqual(e["error"]["code"], "bad_request")
        self.assertEqual(self.sup.request("PATCH", "/v1/sandboxes/sb-nope/network", new)[0], 404)
        self.assertEqual(self.sup.request("POST", "/v1/sandboxes/%s/network" % sid, new)[0], 405)
        st, _, got = self.sup.request("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(got["network"], new)

    def test_gvisor_sandboxes_have_loopback_only(self):
        """runsc runs with --network none: a policy for a gvisor sandbox is
        refused at create and at PATCH, and none of them takes a slot."""
        st, _, pools = self.sup.request("GET", "/v1/pools")
        self.assertEqual(st, 200, pools)
        if not any(p["isolation"] == "gvisor" for p in pools["pools"]):
            self.skipTest("runsc did not answer: no gvisor sandboxes on this node")
        allow_all = {"default_action": "allow"}
        st, _, e = self.sup.request("POST", "/v1/sandboxes",
                                    {"isolation": "gvisor", "network": allow_all})
        self.assertEqual(st, 400, e)
        self.assertIn("gvisor sandboxes have loopback only", e["error"]["message"])
        tag = state_tag(self.sup.state_dir)
        links = run("ip", "-n", "sbx-" + tag, "-br", "link").stdout.count("\n")
        sb = self.create(isolation="gvisor")
        self.assertNotIn("network", sb)
        st, _, e = self.sup.request("PATCH", "/v1/sandboxes/%s/network" % sb["id"], allow_all)
        self.assertEqual(st, 400, e)
        self.assertIn("loopback only", e["error"]["message"])
        self.assertEqual(run("ip", "-n", "sbx-" + tag, "-br", "link").stdout.count("\n"), links)

    def test_bad_policies_at_create(self):
        for net, needle in [({"default_action": "deny", "egress": [{"action": "allow"}]}, "network.egress[0]"),
                            ({"egress": [{"action": "allow", "target": "*"}]}, "not an address"),
                            ([], "want an object")]:
            st, _, e = self.sup.request("POST", "/v1/sandboxes", {"network": net})
            self.assertEqual(st, 400, e)
            self.assertIn(needle, e["error"]["message"])


class NetworkLifecycle(unittest.TestCase):
    def setUp(self):
        self.inet = Internet("l")
        self.addCleanup(self.inet.cleanup)
        self.inet.start()

    def new(self, **kw):
        s = Supervisor(SUP, AGENT, **kw)
        self.addCleanup(s.cleanup)
        return s

    def router_links(self, tag):
        r = run("ip", "-n", "sbx-" + tag, "-br", "link", check=False)
        return sorted(line.split()[0].split("@")[0] for line in r.stdout.splitlines())

    def reach(self, s, sid, addr):
        st, _, r = s.exec(sid, cmd="python3 -c 'import socket; socket.create_connection((\"%s\", 80), 3)'" % addr)
        self.assertEqual(st, 200, r)
        return r["exit_code"] == 0

    def test_kept_after_kill_and_stop_removed_at_the_end(self):
        """Egress sandboxes survive the supervisor (SIGKILL, then a plain
        SIGTERM): the router is made anew, each kept sandbox gets its slot
        (its addresses) and its policy back; what the old router held goes."""
        root = tempfile.mkdtemp(prefix="sbx-it-")
        state = os.path.join(root, "state")
        self.addCleanup(shutil.rmtree, root, True)
        self.addCleanup(remove_router_of, state)
        self.addCleanup(remove_everything_under, state)
        tag = state_tag(state)
        extra = ["--uplink", "netns:" + self.inet.ns, "--uplink-dns", DNS]
        s1 = self.new(state_dir=state, pool_size=2, extra=extra).start()
        s1.wait_ready()
        pol = {"default_action": "deny", "egress": [{"action": "allow", "target": WEB},
                                                    {"action": "allow", "target": "web.test.example"}]}
        sb = s1.create(network=pol)
        s1.wait_ready()
        self.assertTrue(self.reach(s1, sb["id"], WEB))
        self.assertFalse(self.reach(s1, sb["id"], OTHER))
        before = s1.request("GET", "/v1/sandboxes/" + sb["id"])[2]
        ns1 = os.stat("/run/netns/sbx-" + tag).st_ino
        links1 = self.router_links(tag)
        self.assertEqual(links1, ["lo", "s1", "s2", "s3", "up"])
        peer1 = self.inet.ip("-o", "link", "show", "sbx-" + tag).stdout.split(":")[0]
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        wait_runtime_calls(state)
        # left behind: the router (its links, the uplink's end) and the containers
        self.assertTrue(os.path.exists("/run/netns/sbx-" + tag))
        self.assertTrue(containers_under(state))
        s = s1
        for sig in (None, signal.SIGTERM):
            if sig:
                s.signal(sig)
                self.assertEqual(s.wait(60), 0, s.log())
                self.assertFalse(os.path.exists("/run/netns/sbx-" + tag))  # SIGTERM's router goes
            s = self.new(state_dir=state, pool_size=2, extra=extra).start()
            s.wait_ready()
            deadline = time.monotonic() + 20
            while s.request("GET", "/v1/sandboxes/" + sb["id"])[0] != 200:
                self.assertLess(time.monotonic(), deadline, s.log())
                time.sleep(0.05)
            if not sig:  # (after SIGTERM's removal the kernel may give the inode again)
                self.assertNotEqual(os.stat("/run/netns/sbx-" + tag).st_ino, ns1)
            # the same slots, no more: the pool was not made anew
            self.assertEqual(self.router_links(tag), links1)
            peer2 = self.inet.ip("-o", "link", "show", "sbx-" + tag).stdout.split(":")[0]
            self.assertNotEqual(peer1, peer2)  # the old one went, a new one came
            links = self.inet.ip("-br", "link").stdout
            self.assertEqual(links.count("sbx-"), 1, links)
            got = s.request("GET", "/v1/sandboxes/" + sb["id"])[2]
            self.assertEqual(got["network"], before["network"])
            self.assertEqual(got["addresses"], before["addresses"])
            # its policy is in force again: allowed by address and by name, the rest not
            self.assertTrue(self.reach(s, sb["id"], WEB))
            self.assertTrue(self.reach(s, sb["id"], "web.test.example"))
            self.assertFalse(self.reach(s, sb["id"], OTHER))
            self.assertRegex(s.log(), r"earlier run: 3 sandbox\(es\) kept, 0 removed")
        # a new sandbox of the new run has its way out
        sb2 = s.create(network={"default_action": "allow"})
        self.assertTrue(self.reach(s, sb2["id"], OTHER))
        # a deleted sandbox's link goes with it, and its chain is back to
        # rejecting everything
        s.wait_ready()
        links = self.router_links(tag)
        self.assertEqual(len(links), 6, links)
        got2 = s.request("GET", "/v1/sandboxes/" + sb2["id"])[2]
        slot2 = int(got2["addresses"][0].split(".")[-1]) - 1
        self.assertIn("s%d" % slot2, links)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + sb2["id"])[0], 204)
        self.assertNotIn("s%d" % slot2, self.router_links(tag))
        chain = run("ip", "netns", "exec", "sbx-" + tag, "nft", "list", "chain", "inet", "sbx",
                    "p%d" % slot2).stdout
        self.assertIn("reject", chain)
        self.assertNotIn("accept", chain)
        stop_clean(s)
        self.assertFalse(os.path.exists("/run/netns/sbx-" + tag))
        self.assertNotIn("sbx-", self.inet.ip("-br", "link").stdout)

    def test_interface_uplink(self):
        """The supervisor in a namespace of the test's (as in a pod of its
        own) with an interface for uplink: the router's link is forwarded
        out of that interface only and masqueraded; the node keeps its own
        addresses and its other networks."""
        node = "sbxt%dn" % os.getpid()
        hostlink = "sbxt%dnh" % (os.getpid() % 100000)
        self.inet.own(netns=[node], links=[hostlink])  # removed with the internet
        run("ip", "netns", "add", node)
        nip = lambda *a: run("ip", "-n", node, *a)  # noqa: E731
        nip("link", "set", "lo", "up")
        run("ip", "link", "add", hostlink, "type", "veth", "peer", "name", "tohost", "netns", node)
        run("ip", "addr", "add", "198.18.254.1/30", "dev", hostlink)
        run("ip", "link", "set", hostlink, "up")
        nip("addr", "add", "198.18.254.2/30", "dev", "tohost")
        nip("link", "set", "tohost", "up")
        nip("link", "add", "tup", "type", "veth", "peer", "name", "tonode", "netns", self.inet.ns)
        nip("addr", "add", "198.18.253.1/30", "dev", "tup")
        nip("addr", "add", "2001:db8:253::1/64", "dev", "tup", "nodad")
        nip("link", "set", "tup", "up")
        nip("route", "add", "default", "via", "198.18.253.2")
        nip("-6", "route", "add", "default", "via", "2001:db8:253::2")
        self.inet.ip("addr", "add", "198.18.253.2/30", "dev", "tonode")
        self.inet.ip("addr", "add", "2001:db8:253::2/64", "dev", "tonode", "nodad")
        self.inet.ip("link", "set", "tonode", "up")
        root = tempfile.mkdtemp(prefix="sbx-it-")
        self.addCleanup(shutil.rmtree, root, True)
        state = os.path.join(root, "state")
        s = self.new(state_dir=state, pool_size=1, host="198.18.254.2",
                     wrap=["nsenter", "--net=/run/netns/" + node],
                     extra=["--uplink", "tup", "--uplink-dns", DNS]).start()
        s.wait_ready()
        tag = state_tag(state)
        tables = run("ip", "netns", "exec", node, "nft", "list", "tables").stdout
        self.assertIn("table inet sbx-" + tag, tables)
        sb = s.create(network={"default_action": "deny", "egress": [
            {"action": "allow", "target": "web.test.example"},
            {"action": "allow", "target": "198.18.254.0/24"}]})
        # (the name is resolved for both families first: its addresses are
        # allowed once answered)
        probe = self.probe_in(s, sb["id"], [["name", "web.test.example", 80], ["tcp", WEB, 80],
                                            ["tcp", WEB6, 80], ["tcp", "198.18.254.1", 22],
                                            ["tcp", "198.18.254.2", s.port]])
        self.assertEqual(probe[1][3], "ok", probe)
        self.assertEqual(probe[2][3], "ok", probe)   # IPv6 out of the interface too
        # the node's other network and its own address (the API's): refused
        self.assertTrue(probe[3][3].startswith("refused"), probe)
        self.assertTrue(probe[4][3].startswith("refused"), probe)
        stop_clean(s)
        tables = run("ip", "netns", "exec", node, "nft", "list", "tables").stdout
        self.assertNotIn("sbx-" + tag, tables)
        self.assertNotIn("sbx-" + tag, nip("-br", "link").stdout)

    def probe_in(self, s, sid, probes):
        st, _, r = s.exec(sid, cmd="python3 -c '%s' '%s'" % (PROBE.replace("'", "'\\''"),
                                                              json.dumps(probes)), timeout=60)
        self.assertEqual((st, r.get("exit_code")), (200, 0), r)
        return json.loads(r["stdout"])

    def test_network_refused_without_uplink(self):
        s = self.new(pool_size=0).start()
        st, _, e = s.request("POST", "/v1/sandboxes", {"network": {"default_action": "allow"}})
        self.assertEqual(st, 400, e)
        self.assertIn("--uplink", e["error"]["message"])
        sb = s.create()
        st, _, e = s.request("PATCH", "/v1/sandboxes/%s/network" % sb["id"], {"default_action": "allow"})
        self.assertEqual(st, 400, e)


if __name__ == "__main__":
    unittest.main()

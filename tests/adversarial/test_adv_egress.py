"""Egress bypasses beyond test_network.py's (SECURITY.md, "Sandbox from the
network"): a sandbox whose policy allows one name tries the addresses it
must never reach by the roads around the rules: an allowed name whose
answer holds the metadata address (IPv4 and IPv6), a --deny-cidrs address
and the node's API (a rebinding resolver: the name is allowed, what it
points at is not); the metadata address written as an IPv4-mapped IPv6
address and as one decimal number; DNS over TCP, to the sandboxes'
resolver and to the outside resolver (which listens on TCP here, so a
refusal is the policy's and not an empty port). Each is refused (ICMP
administratively prohibited or the resolver's refusal, never a timeout),
the allowed address of the same name still answers, and the outside
resolver never sees a question the policy did not allow. An allowed name
of several addresses resolves to each of them (sup_dns wrote them as one
record, which the sandbox's resolver refused). The "internet" is
test_network.py's: namespaces on this machine, nothing leaves it.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import test_network as net  # noqa: E402
from sbx_harness import Supervisor, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
REBIND = "rebind.test.example"
MULTI = "multi.test.example"

# A TCP listener on the outside resolver's address and port 53 that
# answers as the probe's HTTP server would: reached means not refused.
TCP53 = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 53))
s.listen(16)
while True:
    c, _ = s.accept()
    try:
        c.recv(100)
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
    except OSError:
        pass
    c.close()
"""


class EgressBypass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # the rebinding name: an allowed one answering what is never allowed
        net.NAMES[REBIND] = [net.WEB, net.METADATA, net.DENIED_CIDR, net.HOST_SIDE, net.METADATA6]
        net.NAMES[MULTI] = [net.WEB, net.WEB_NEIGHBOUR]
        cls.inet = net.Internet("a")
        cls.sup = None
        try:
            cls.inet.start()
            cls.inet.link_to_host()
            cls.inet.spawn("python3", "-c", TCP53, net.DNS)
            cls.inet.wait_port(net.DNS, 53)
            cls.sup = Supervisor(SUP, AGENT, pool_size=1, host=net.HOST_SIDE,
                                 extra=["--uplink", "netns:" + cls.inet.ns, "--uplink-dns", net.DNS,
                                        "--deny-cidrs", net.DENIED_CIDR + "/32"])
            cls.sup.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.sup and cls.sup.alive():
                stop_clean(cls.sup)
        finally:
            if cls.sup:
                cls.sup.cleanup()
            cls.inet.cleanup()
            net.NAMES.pop(REBIND, None)
            net.NAMES.pop(MULTI, None)

    def probe(self, sid, probes):
        st, _, r = self.sup.exec(sid, cmd="python3 -c '%s' '%s'" % (
            net.PROBE.replace("'", "'\\''"), json.dumps(probes)), timeout=60)
        self.assertEqual((st, r.get("exit_code")), (200, 0), r)
        return {(k, a, str(b)): (res, secs) for k, a, b, res, secs in json.loads(r["stdout"])}

    def assert_refused(self, res, what):
        # refused, not dropped (a drop is the probe's 3 s "timeout"); no
        # bound on the time: the kernel rate-limits its ICMP errors to one
        # peer, so after a few refusals one comes on the SYN's retry
        r, _ = res
        self.assertTrue(r.startswith("refused"), "%s: %s" % (what, r))

    def test_roads_around_the_policy(self):
        sb = self.sup.create(network={"default_action": "deny", "egress": [
            {"action": "allow", "target": REBIND}, {"action": "allow", "target": MULTI}]})
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sb["id"])
        api = (net.HOST_SIDE, self.sup.port)
        res = self.probe(sb["id"], [
            ["name", REBIND, 80], ["name", MULTI, 80],
            ["tcp", net.WEB, 80],
            ["tcp", net.METADATA, 80], ["tcp", net.METADATA6, 80], ["tcp", net.DENIED_CIDR, 80],
            ["tcp", api[0], api[1]],
            ["tcp", "::ffff:" + net.METADATA, 80], ["tcp", "2852039166", 80],
            ["tcp", "::ffff:" + net.OTHER, 80],
            ["tcp", net.DNS, 53], ["tcp", "100.96.0.1", 53],
            ["dns", net.DNS, "smuggled.test.example"],
        ])
        print("\n" + "\n".join("%s %s %s: %s (%.2f s)" % (k + v) for k, v in sorted(res.items())),
              file=sys.stderr)
        # the allowed names resolve, to each of their addresses, and the
        # allowed address answers
        self.assertEqual(res[("name", REBIND, "80")][0], "ok " + ",".join(sorted(net.NAMES[REBIND])), res)
        self.assertEqual(res[("name", MULTI, "80")][0], "ok %s,%s" % (net.WEB, net.WEB_NEIGHBOUR), res)
        self.assertEqual(res[("tcp", net.WEB, "80")][0], "ok")
        for k in [("tcp", net.METADATA, "80"), ("tcp", net.METADATA6, "80"),
                  ("tcp", net.DENIED_CIDR, "80"), ("tcp", api[0], str(api[1])),
                  ("tcp", "::ffff:" + net.METADATA, "80"), ("tcp", "2852039166", "80"),
                  ("tcp", "::ffff:" + net.OTHER, "80"), ("tcp", net.DNS, "53"),
                  ("tcp", "100.96.0.1", "53")]:
            self.assert_refused(res[k], k)
        self.assertIn(res[("dns", net.DNS, "smuggled.test.example")][0],
                      ("timeout",) + tuple("refused %d" % e for e in (111, 113)))
        # what is refused is there: the internet reaches it
        for addr, port in [(net.METADATA, 80), (net.DNS, 53), (net.DENIED_CIDR, 80)]:
            self.inet.wait_port(addr, port, timeout=5)
        self.assertNotIn("smuggled.test.example", self.inet.dns_questions())


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

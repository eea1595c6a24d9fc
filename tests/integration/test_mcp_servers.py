"""MCP servers named on create, through a real sandbox-supervisor, real runc
containers and the real agent: the create body's "mcp" is checked strictly
(400 naming what is wrong), and each server's spare process is started as
the sandbox is handed out, in the jail every command gets (uid 1000, no
capabilities, no_new_privs, seccomp, nice 10, oom_score_adj 1000, its env
and cwd), seen from inside the sandbox. The MCP routes themselves are not
built yet. Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

# A stdio server small enough to pass in args: every line back.
ECHO = "import sys\nfor l in sys.stdin:\n    sys.stdout.write(l); sys.stdout.flush()\n"

# What the sandbox's /proc says of the processes carrying SBX_MARK=$1.
PROBE = r"""
for p in /proc/[0-9]*; do
  if tr '\0' '\n' < $p/environ 2>/dev/null | grep -qx "SBX_MARK=$1"; then
    echo "pid ${p#/proc/}"
    grep -E '^(Uid|Gid|NoNewPrivs|Seccomp|CapEff|CapBnd):' $p/status
    echo "nice $(cut -d' ' -f19 $p/stat)"
    echo "oom $(cat $p/oom_score_adj)"
    echo "cwd $(readlink $p/cwd)"
  fi
done
"""


class McpServers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=2)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def probe(self, sid, mark, want, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            st, _, body = self.sup.exec(sid, argv=["/bin/sh", "-c", PROBE, "probe", mark])
            self.assertEqual(st, 200, body)
            out = body["stdout"]
            if out.count("pid ") >= want or time.monotonic() > deadline:
                return out
            time.sleep(0.2)

    def test_spares_start_jailed_at_hand_out(self):
        sb = self.sup.create(mcp={"servers": {
            "echo": {"command": "/usr/bin/python3", "args": ["-c", ECHO],
                     "env": {"SBX_MARK": "mcp-echo"}, "cwd": "/workspace"},
            "other": {"command": "/usr/bin/python3", "args": ["-c", ECHO],
                      "env": {"SBX_MARK": "mcp-other"}},
        }})
        try:
            out = self.probe(sb["id"], "mcp-echo", 1)
            self.assertEqual(out.count("pid "), 1, out)  # one spare, no more
            self.assertRegex(out, r"Uid:\s+1000\s+1000\s+1000\s+1000")
            self.assertRegex(out, r"NoNewPrivs:\s+1")
            self.assertRegex(out, r"Seccomp:\s+2")
            self.assertRegex(out, r"CapEff:\s+0000000000000000")
            self.assertRegex(out, r"CapBnd:\s+0000000000000000")
            self.assertIn("nice 10", out)
            self.assertIn("oom 1000", out)
            self.assertIn("cwd /workspace", out)
            out = self.probe(sb["id"], "mcp-other", 1)
            self.assertEqual(out.count("pid "), 1, out)
            self.assertIn("cwd /workspace", out)  # exec's default
        finally:
            st, _, body = self.sup.request("DELETE", "/v1/sandboxes/%s" % sb["id"])
            self.assertIn(st, (200, 204), body)

    def test_bad_mcp_is_400_naming_it(self):
        cases = [
            ({"servers": {"a": {"args": ["x"]}}}, 'field \\"command\\" is required'),
            ({"servers": {"a": {"command": "x", "transport": "sse"}}}, "unknown field"),
            ({"servers": {"../a": {"command": "x"}}}, "name"),
            ({"servers": {"a": {"command": "x", "args": "y"}}}, "args"),
            ({"servers": {"a": {"command": "x", "env": {"A=B": "1"}}}}, "env"),
            ({"servers": {}, "other": 1}, "mcp"),
            ([], "mcp"),
        ]
        for mcp, part in cases:
            st, _, body = self.sup.request("POST", "/v1/sandboxes", {"mcp": mcp})
            self.assertEqual(st, 400, (mcp, body))
            self.assertIn(part, json.dumps(body), (mcp, body))


if __name__ == "__main__":
    unittest.main(verbosity=2)

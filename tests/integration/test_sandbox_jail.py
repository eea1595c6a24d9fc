"""The jail as a user meets it: inside a real runc sandbox (or gVisor's, with
SBX_IT_ISOLATION=gvisor), through the HTTP
API, commands run as the unprivileged sandbox user with no capabilities,
no_new_privs and the seccomp filter; each refused system call returns EPERM
there, and the programs a sandbox is for still work under it (sh, python3,
node, gcc, pip install --user, git). Everything made is removed at the end,
also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import GVISOR, Supervisor, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
HERE = os.path.dirname(os.path.abspath(__file__))


class SandboxJail(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=600)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def run_ok(self, cmd, stdin=None, timeout=120):
        body = {"cmd": cmd, "timeout": timeout}
        if stdin is not None:
            body["stdin"] = stdin
        st, _, res = self.sup.exec(self.sb["id"], **body)
        self.assertEqual(st, 200, res)
        self.assertEqual(res["exit_code"], 0, "%s\nstdout: %s\nstderr: %s"
                         % (cmd, res["stdout"], res["stderr"]))
        return res["stdout"]

    def test_identity_and_privileges(self):
        out = self.run_ok("id -u; id -g; echo $HOME; grep -E "
                          "'^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "
                          "/proc/self/status; python3 -c 'import ctypes; "
                          "p = ctypes.CDLL(None).prctl; print(p(39, 0, 0, 0, 0), p(21, 0, 0, 0, 0))'")
        lines = out.split("\n")
        self.assertEqual(lines[:3], ["1000", "1000", "/home/sandbox"])
        status = dict(l.split(":\t") for l in lines[3:] if ":\t" in l)
        # gVisor shows neither CapAmb (it has no ambient capabilities) nor
        # NoNewPrivs (always set there): what is shown must be empty/set.
        want = ("CapInh", "CapPrm", "CapEff", "CapBnd") + (() if GVISOR else ("CapAmb",))
        for cap in want:
            self.assertEqual(int(status[cap], 16), 0, (cap, status))
        self.assertEqual(int(status.get("CapAmb", "0"), 16), 0, status)
        self.assertEqual(status.get("NoNewPrivs", "1"), "1")
        self.assertEqual(status["Seccomp"], "2")
        # prctl: PR_GET_NO_NEW_PRIVS 1, PR_GET_SECCOMP 2 (filter), everywhere.
        self.assertEqual(lines[-2], "1 2", out)

    def test_refused_syscalls_are_eperm_inside(self):
        with open(os.path.join(HERE, "data", "refused_syscalls.py")) as f:
            prog = f.read()
        out = self.run_ok("python3 -", stdin=prog)
        got = json.loads(out)
        for name, err in got.items():
            if name in ("socket(AF_UNIX)", "socket(AF_INET)"):
                self.assertEqual(err, 0, (name, got))
            else:
                self.assertEqual(err, "EPERM", (name, got))
        self.assertGreaterEqual(len(got), 20)

    def test_programs_work(self):
        self.assertEqual(self.run_ok("sh -c 'echo ok | tr a-z A-Z'"), "OK\n")
        self.assertEqual(self.run_ok(
            "python3 -c 'import json,ssl,subprocess,sqlite3;"
            "print(subprocess.run([\"true\"]).returncode)'"), "0\n")
        self.assertEqual(self.run_ok("node -e 'console.log(6*7)'"), "42\n")
        self.assertEqual(self.run_ok(
            "cd /tmp && printf '#include <stdio.h>\\nint main(void){puts(\"hello\");return 0;}\\n'"
            " > h.c && gcc -O1 -o h h.c && ./h"), "hello\n")
        self.run_ok(
            "cd /workspace && rm -rf repo && mkdir repo && cd repo && git init -q && "
            "git config user.email t@e.invalid && git config user.name t && "
            "echo a > a && git add a && git commit -qm one && git log --oneline | wc -l")

    def test_pip_install_user(self):
        out = self.run_ok(
            "set -e; rm -rf /tmp/pkg && mkdir -p /tmp/pkg/sbxdemo && cd /tmp/pkg && "
            "echo 'VALUE = 42' > sbxdemo/__init__.py && "
            "printf 'from setuptools import setup\\nsetup(name=\"sbxdemo\", version=\"1.0\", "
            "packages=[\"sbxdemo\"])\\n' > setup.py && "
            "python3 -m pip install -q --user --no-index --no-build-isolation "
            "--break-system-packages . 2>&1 | grep -v -i warning || true; "
            "cd / && python3 -c 'import sbxdemo; print(sbxdemo.VALUE)'")
        self.assertTrue(out.endswith("42\n"), out)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("SBX_SUPERVISOR and SBX_AGENT must be set")
    unittest.main(verbosity=2)

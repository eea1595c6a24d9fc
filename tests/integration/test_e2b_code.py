"""E2B's code interpreter SDK (npm @e2b/code-interpreter, pinned in
tests/e2b/) against sbx's /e2b layer and the real sbx/code-interpreter
image (images/build: Debian's python3-ipykernel, pandas, matplotlib,
Node): its default template code-interpreter-v1 mapped to the image by
--e2b-template, runCode's main result, state across cells, stdout, an
error, a DataFrame's HTML, a matplotlib PNG, contexts made, run in, listed,
restarted and removed, and JavaScript with top-level await
(tests/e2b/ci_flows.mjs). The image's Debian part is built once per
machine (make sandbox-images) and cached; here it is only assembled.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
SDK_DIR = os.path.join(TOP, "tests", "e2b")


class E2BCode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-it-e2bci-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        out = subprocess.run([os.path.join(TOP, "images", "build"), "code-interpreter", cls.tmp],
                             check=True, capture_output=True, text=True, timeout=3600)
        print(out.stdout.strip(), file=sys.stderr)
        cls.sup = h.Supervisor(os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"], pool_size=0,
                               extra=["--import-image", "%s/sbx-code-interpreter" % cls.tmp,
                                      "--e2b-template", "code-interpreter-v1=sbx/code-interpreter"])
        cls.addClassCleanup(h.end_clean, cls.sup)
        cls.sup.start()

    def test_sdk_flows(self):
        if not shutil.which("node") or not os.path.isdir(os.path.join(SDK_DIR, "node_modules")):
            self.fail("node or the pinned SDK is missing: run scripts/install-deps")
        base = "http://127.0.0.1:%d" % self.sup.port
        env = dict(os.environ, E2B_API_URL=base + "/e2b", E2B_SANDBOX_URL=base + "/e2b/envd",
                   E2B_API_KEY=self.sup.token)
        p = subprocess.run(["node", os.path.join(SDK_DIR, "ci_flows.mjs")], cwd=SDK_DIR, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=400)
        out = p.stdout.decode(errors="replace")
        print(out)
        self.assertEqual(p.returncode, 0, out + "\n" + self.sup.log())
        self.assertIn("all passed", out)


if __name__ == "__main__":
    unittest.main()

"""Code contexts (sup_ctx.h, routes/contexts) against the real sbx/code-interpreter
image (images/build: Debian's python3-ipykernel, pandas, matplotlib, Node),
through the HTTP API and the Python SDK: state kept across cells, a
DataFrame as HTML and text, a matplotlib figure as a PNG that decodes, an
exception's traceback, an endless loop interrupted with the state kept, a
cell past its timeout, a kernel killed by its sandbox's memory limit and
reported, restart, javascript with await, bash, two contexts apart, the
streamed events, another tenant refused, an image without the driver.

The image's Debian part is built once per machine (make sandbox-images, or
here on first use: minutes) and cached; here it is only assembled (seconds)
into a temporary folder and imported at start.
"""
import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "sdk", "python"))
import sbx  # noqa: E402

SUPERVISOR = os.environ["SBX_SUPERVISOR"]
AGENT = os.environ["SBX_AGENT"]
IMAGE = "sbx/code-interpreter"
TOK = {n: secrets.token_hex(32) for n in ("admin", "alice", "bob")}
SLOW = 180  # an HTTP wait that may start a kernel on a loaded machine


class Contexts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-it-ctx-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        out = subprocess.run([os.path.join(TOP, "images", "build"), "code-interpreter", cls.tmp],
                             check=True, capture_output=True, text=True, timeout=3600)
        print(out.stdout.strip(), file=sys.stderr)
        tenants = {"admin": {"token": TOK["admin"]}, "alice": {"token": TOK["alice"]},
                   "bob": {"token": TOK["bob"]}}
        cls.sup = h.tenants_supervisor(SUPERVISOR, AGENT, tenants, TOK["alice"], pool_size=0, extra=[
            "--import-image", "%s/sbx-code-interpreter" % cls.tmp,
            "--max-resources", "cpus=2,memory=2G,pids=1024,disk=10G"])
        cls.addClassCleanup(h.end_clean, cls.sup)
        cls.sb = cls.sup.create(image=IMAGE, resources={"memory": "1G"})

    def req(self, method, path, body=None, who="alice", **kw):
        return self.sup.request(method, path, body, token="Bearer " + TOK[who], timeout=SLOW, **kw)

    def run_cell(self, ctx, code, sid=None, timeout=None, who="alice"):
        body = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        st, _, r = self.req("POST", "/v1/sandboxes/%s/contexts/%s/run" % (sid or self.sb["id"], ctx),
                            body, who=who)
        return st, r

    def ok(self, ctx, code, **kw):
        st, r = self.run_cell(ctx, code, **kw)
        self.assertEqual(st, 200, r)
        return r

    def create(self, sid=None, **body):
        st, _, c = self.req("POST", "/v1/sandboxes/%s/contexts" % (sid or self.sb["id"]), body)
        self.assertEqual(st, 200, c)
        self.assertEqual(c["state"], "ready", c)
        self.addCleanup(self.req, "DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid or self.sb["id"], c["id"]))
        return c

    # ---- python ----

    def test_python_state_dataframe_figure(self):
        c = self.create(language="python", cwd="/tmp", env={"GREETING": "hi"})
        r = self.ok(c["id"], "import os\nx = 41\nprint(os.getcwd(), os.environ['GREETING'])\nx + 1")
        self.assertEqual(r["stdout"], "/tmp hi\n", r)
        self.assertEqual(r["error"], None, r)
        main = [x for x in r["results"] if x["main"]]
        self.assertEqual(main[0]["data"]["text/plain"], "42", r)
        # state kept; a magic works
        r = self.ok(c["id"], "%time y = x * 2\ny")
        self.assertEqual([x["data"]["text/plain"] for x in r["results"] if x["main"]], ["82"], r)
        # a DataFrame: HTML and text
        r = self.ok(c["id"], "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4.5, 5.5, 6.5]})\ndf")
        (res,) = r["results"]
        self.assertTrue(res["main"])
        self.assertIn("<table", res["data"]["text/html"])
        self.assertIn("<td>5.5</td>", res["data"]["text/html"])
        self.assertIn("a    b", res["data"]["text/plain"])
        # a matplotlib figure: a PNG that decodes, and display() beside the result
        r = self.ok(c["id"], "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3), dpi=50)\n"
                    "ax.plot([1, 2, 3], [3, 1, 2])\nfrom IPython.display import display, Markdown\n"
                    "display(Markdown('**bold**'))\nplt.show()\n'done'")
        pngs = [x for x in r["results"] if "image/png" in x["data"]]
        self.assertEqual(len(pngs), 1, r)
        self.assertFalse(pngs[0]["main"])
        # 4 x 3 inches at 50 dpi, less the margin the inline backend's tight box crops
        w, ht = h.png_size(base64.b64decode(pngs[0]["data"]["image/png"]))
        self.assertTrue(150 <= w <= 200 and 100 <= ht <= 150, (w, ht))
        self.assertIn({"main": False, "data": {"text/markdown": "**bold**", "text/plain": "<IPython.core.display.Markdown object>"}},
                      r["results"])
        self.assertEqual(r["results"][-1]["data"]["text/plain"], "'done'")
        self.assertGreaterEqual(r["execution_count"], 4)

    def test_python_error_interrupt_timeout(self):
        c = self.create(language="python")
        self.ok(c["id"], "keep = 'kept'")
        r = self.ok(c["id"], "def f():\n    return 1 / 0\nf()")
        self.assertEqual(r["error"]["name"], "ZeroDivisionError", r)
        self.assertEqual(r["error"]["value"], "division by zero")
        self.assertTrue(any("return 1 / 0" in line for line in r["error"]["traceback"]), r)
        # an endless loop, interrupted from the side; the state stays
        got = {}
        t = threading.Thread(target=lambda: got.update(r=self.run_cell(c["id"], "while True:\n    pass")))
        t.start()
        deadline = time.monotonic() + SLOW
        while time.monotonic() < deadline:
            st, _, one = self.req("GET", "/v1/sandboxes/%s/contexts/%s" % (self.sb["id"], c["id"]))
            if one["state"] == "running":
                break
            time.sleep(0.05)
        st, _, again = self.req("POST", "/v1/sandboxes/%s/contexts/%s/run" % (self.sb["id"], c["id"]),
                                {"code": "1"})
        self.assertEqual((st, again["error"]["code"]), (409, "conflict"), again)
        st, _, ir = self.req("POST", "/v1/sandboxes/%s/contexts/%s/interrupt" % (self.sb["id"], c["id"]))
        self.assertEqual((st, ir), (200, {"interrupted": True}))
        t.join(SLOW)
        st, r = got["r"]
        self.assertEqual(st, 200, r)
        self.assertEqual(r["error"]["name"], "KeyboardInterrupt", r)
        r = self.ok(c["id"], "keep")
        self.assertEqual(r["results"][0]["data"]["text/plain"], "'kept'")
        # past its timeout: interrupted, state kept
        r = self.ok(c["id"], "import time\ntime.sleep(60)", timeout=1)
        self.assertTrue(r["timed_out"], r)
        self.assertEqual(r["error"]["name"], "TimeoutError", r)
        self.assertNotIn("restarted", r)
        self.assertLess(r["duration_ms"], 30000, r)
        self.assertEqual(self.ok(c["id"], "keep")["results"][0]["data"]["text/plain"], "'kept'")
        # one that ignores the interrupt: its kernel is restarted
        r = self.ok(c["id"], "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
                    timeout=1)
        self.assertTrue(r["timed_out"] and r["restarted"], r)
        r = self.ok(c["id"], "'keep' in dir()")
        self.assertEqual(r["results"][0]["data"]["text/plain"], "False", r)

    def test_kernel_killed_for_memory(self):
        sb = self.sup.create(image=IMAGE, resources={"memory": "300M"})
        self.addCleanup(self.req, "DELETE", "/v1/sandboxes/%s" % sb["id"])
        c = self.create(sid=sb["id"], language="python")
        self.ok(c["id"], "a = 1", sid=sb["id"])
        st, r = self.run_cell(c["id"], "b = bytearray(2 << 30)", sid=sb["id"])
        self.assertEqual(st, 409, r)
        self.assertEqual(r["error"]["code"], "context_died", r)
        self.assertIn("out of memory", r["error"]["message"])
        st, _, one = self.req("GET", "/v1/sandboxes/%s/contexts/%s" % (sb["id"], c["id"]))
        self.assertEqual(one["state"], "dead", one)
        self.assertTrue(one["error"]["oom"], one)
        st, r = self.run_cell(c["id"], "1", sid=sb["id"])
        self.assertEqual((st, r["error"]["code"]), (409, "context_died"), r)
        # restart: a new kernel, the old state gone
        st, _, again = self.req("POST", "/v1/sandboxes/%s/contexts/%s/restart" % (sb["id"], c["id"]))
        self.assertEqual((st, again["state"]), (200, "ready"), again)
        r = self.ok(c["id"], "'a' in dir()", sid=sb["id"])
        self.assertEqual(r["results"][0]["data"]["text/plain"], "False", r)

    # ---- the other languages, the default contexts, isolation ----

    def test_javascript_bash_defaults(self):
        r = self.ok("javascript", "const sleep = (ms) => new Promise((r) => setTimeout(r, ms));\n"
                    "let v = await Promise.resolve(20); await sleep(10); console.log('js', v); v + 1")
        self.assertEqual(r["stdout"], "js 20\n", r)
        self.assertEqual(r["results"][0]["data"]["text/plain"], "21", r)
        r = self.ok("javascript", "({sum: v * 2})")
        self.assertEqual(json.loads(r["results"][0]["data"]["application/json"]), {"sum": 40})
        r = self.ok("javascript", "null.x")
        self.assertEqual(r["error"]["name"], "TypeError", r)
        r = self.ok("bash", "cd /tmp; N=7; echo out; echo err >&2")
        self.assertEqual((r["stdout"], r["stderr"]), ("out\n", "err\n"), r)
        r = self.ok("bash", "pwd; echo $N; false")
        self.assertEqual(r["stdout"], "/tmp\n7\n", r)
        self.assertEqual(r["error"]["name"], "ExitCode", r)
        st, _, lst = self.req("GET", "/v1/sandboxes/%s/contexts" % self.sb["id"])
        ids = {x["id"]: x for x in lst["contexts"]}
        self.assertTrue(ids["javascript"]["default"] and ids["bash"]["default"], lst)
        for d in ("javascript", "bash"):
            st, _, _ = self.req("DELETE", "/v1/sandboxes/%s/contexts/%s" % (self.sb["id"], d))
            self.assertEqual(st, 204)

    def test_contexts_apart_and_streamed(self):
        a = self.create(language="python")
        b = self.create(language="python")
        self.ok(a["id"], "z = 'a'")
        r = self.ok(b["id"], "z")
        self.assertEqual(r["error"]["name"], "NameError", r)
        # the events as they come (NDJSON): stdout, the result, the end
        conn = self.sup.conn(SLOW)
        conn.request("POST", "/v1/sandboxes/%s/contexts/%s/run" % (self.sb["id"], a["id"]),
                     body=json.dumps({"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n"
                                      "    time.sleep(0.05)\nz"}),
                     headers={"Authorization": "Bearer " + TOK["alice"], "Accept": "application/x-ndjson"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
        conn.close()
        kinds = [e["event"] for e in events if e["event"] != "keepalive"]
        self.assertEqual(kinds[0], "start")
        self.assertEqual(kinds[-1], "end")
        self.assertEqual("".join(e["text"] for e in events if e["event"] == "stdout"), "0\n1\n2\n")
        res = [e for e in events if e["event"] == "result"]
        self.assertEqual((res[0]["main"], res[0]["data"]["text/plain"]), (True, "'a'"), events)
        self.assertNotIn("results", events[-1])

    def test_tenant_and_image_refusals(self):
        c = self.create(language="python")
        for method, suffix, body in (("GET", "", None), ("POST", "/run", {"code": "1"}),
                                     ("POST", "/interrupt", None), ("DELETE", "", None)):
            st, _, r = self.req(method, "/v1/sandboxes/%s/contexts/%s%s" % (self.sb["id"], c["id"], suffix),
                                body, who="bob")
            self.assertEqual(st, 404, r)
        st, _, r = self.req("GET", "/v1/sandboxes/%s/contexts" % self.sb["id"], who="bob")
        self.assertEqual(st, 404, r)
        # bob's own sandbox does not have alice's context either
        bsb = self.sup.request("POST", "/v1/sandboxes", {"image": IMAGE}, token="Bearer " + TOK["bob"])[2]
        self.addCleanup(self.req, "DELETE", "/v1/sandboxes/%s" % bsb["id"], who="bob")
        st, _, r = self.req("POST", "/v1/sandboxes/%s/contexts/%s/run" % (bsb["id"], c["id"]), {"code": "1"},
                            who="bob")
        self.assertEqual((st, r["error"]["code"]), (404, "not_found"), r)
        # bad bodies
        for body in ({"language": "cobol"}, {"cwd": "rel"}, {"env": {"1x": "y"}}, {"other": 1}):
            st, _, r = self.req("POST", "/v1/sandboxes/%s/contexts" % self.sb["id"], body)
            self.assertEqual(st, 400, (body, r))
        st, r = self.run_cell(c["id"], "1", timeout=0)
        self.assertEqual(st, 400, r)
        # a folder that is not there: refused inside, the context not kept
        st, _, r = self.req("POST", "/v1/sandboxes/%s/contexts" % self.sb["id"], {"cwd": "/nowhere"})
        self.assertEqual(st, 400, r)
        self.assertIn("/nowhere", r["error"]["message"])
        # an image without the context driver (the host's root)
        hsb = self.sup.create(image="host")
        self.addCleanup(self.req, "DELETE", "/v1/sandboxes/%s" % hsb["id"])
        st, _, r = self.req("POST", "/v1/sandboxes/%s/contexts" % hsb["id"], {"language": "python"})
        self.assertEqual((st, r["error"]["code"]), (422, "unsupported_image"), r)
        self.assertIn("sbx/code-interpreter", r["error"]["message"])

    # ---- MCP: the run_code tool of /v1/mcp ----

    def mcp(self, body, sid=None):
        hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": "Bearer " + TOK["alice"]}
        if sid:
            hdr.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        conn = self.sup.conn(SLOW)
        try:
            conn.request("POST", "/v1/mcp", body=json.dumps(body), headers=hdr)
            resp = conn.getresponse()
            data = resp.read().decode()
            sid = resp.getheader("Mcp-Session-Id") or sid
        finally:
            conn.close()
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            data = [x[5:].strip() for x in data.splitlines() if x.startswith("data:")][-1]
        return resp.status, sid, json.loads(data) if data else None

    def test_mcp_run_code(self):
        st, sid, r = self.mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        self.assertEqual(st, 200, r)
        self.mcp({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)

        def call(n, code):
            st, _, r = self.mcp({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": "run_code", "arguments": {"id": self.sb["id"], "ctx": "python", "code": code}}}, sid)
            self.assertEqual(st, 200, r)
            return r["result"]
        call(2, "mcp_v = 20")
        r = call(3, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nmcp_v + 1")
        self.assertFalse(r.get("isError"), r)
        out = r["structuredContent"]
        self.assertEqual([x["data"]["text/plain"] for x in out["results"] if x["main"]], ["21"], out)
        png = [x for x in out["results"] if "image/png" in x["data"]]
        h.png_size(base64.b64decode(png[0]["data"]["image/png"]))
        text = r["content"][0]["text"]
        self.assertIn("--- result ---\n21\n", text)
        self.assertIn("[display image/png:", text)
        r = call(4, "undefined_name")
        self.assertIn("NameError", r["content"][0]["text"])
        self.assertEqual(r["structuredContent"]["error"]["name"], "NameError")

    # ---- the Python SDK ----

    def test_sdk(self):
        client = sbx.Client("http://127.0.0.1:%d" % self.sup.port, token=TOK["alice"], timeout=SLOW)
        sb = sbx.Sandbox.connect(self.sb["id"], client=client)
        ex = sb.run_code("import pandas as pd\ndf = pd.DataFrame({'n': [1, 2, 3]})\ndf.describe()")
        self.assertIsNone(ex.error)
        self.assertIn("<table", ex.result.html)
        self.assertIn("mean", ex.result.text)
        ctx = sb.contexts.create(language="javascript")
        try:
            self.assertEqual(ctx.run("let q = await Promise.resolve(5); q * 3").result.text, "15")
            self.assertEqual(ctx.run("q").result.text, "5")
            self.assertIn(ctx.id, [c.id for c in sb.contexts.list()])
            got = []
            ex = ctx.run("console.log('a'); 2", on_stdout=got.append)
            self.assertEqual((got, ex.result.text), (["a\n"], "2"))
            ctx.restart()
            ex = ctx.run("typeof q")
            self.assertEqual(ex.result.text, "'undefined'")
        finally:
            ctx.delete()
        with self.assertRaises(sbx.ContextDied):
            sb.run_code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", context="python")
        sb.contexts.restart("python")
        self.assertEqual(sb.run_code("1 + 1").result.text, "2")

    def test_cli(self):
        cell = os.path.join(self.tmp, "cell.py")
        with open(cell, "w") as f:
            f.write("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nprint('out')\ncli_v = 6\ncli_v * 7\n")
        env = dict(os.environ, SBX_URL="http://127.0.0.1:%d" % self.sup.port, SBX_TOKEN=TOK["alice"])
        sbx_cli = os.path.join(TOP, "cli", "sbx")
        p = subprocess.run([sbx_cli, "run-code", self.sb["id"], "-f", cell, "--save-images", self.tmp],
                           env=env, capture_output=True, text=True, timeout=SLOW)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "out\n42\n", p)
        self.assertIn("image/png saved as", p.stderr)
        with open(os.path.join(self.tmp, "result-1.png"), "rb") as f:
            h.png_size(f.read())
        p = subprocess.run([sbx_cli, "run-code", self.sb["id"], "--json", "--", "cli_v", "+", "1"],
                           env=env, capture_output=True, text=True, timeout=SLOW)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["results"][0]["data"]["text/plain"], "7")
        p = subprocess.run([sbx_cli, "run-code", self.sb["id"], "--", "raise", "ValueError('no')"],
                           env=env, capture_output=True, text=True, timeout=SLOW)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("ValueError: no", p.stderr)


if __name__ == "__main__":
    unittest.main()

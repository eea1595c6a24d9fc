"""Browser sandboxes: the real sbx/browser image (images/build: Debian's
Chromium, its service sbx-browser started by the supervisor as each
sandbox of the image comes up), pooled, driven from outside through the
port proxy by Playwright's chromium.connectOverCDP (npm playwright-core,
pinned in tests/browser; no browser of its own): a page served inside the
sandbox (nothing leaves the machine) opened, its title, a click, a
screenshot that decodes; the DevTools discovery answers rewritten to the
proxy's address and path (also for a Host Chromium itself would refuse);
GET /v1/sandboxes/{id}/browser and its signed URL for a client without
headers; Chromium running as the sandbox's user; a wrong token, another
tenant's and a tampered signature refused; a sandbox reset for reuse
(--pool-reuse) handed out again with its Chromium started anew; and the
egress policy holding
for the browser (a sandbox without a policy has loopback only: a server
on the host's own address is not reached).

The image's Debian part is built once per machine (make sandbox-images, or
here on first use: about 5 minutes) and cached; here it is only assembled
(seconds) into a temporary folder and imported at start.
"""
import base64
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbx_harness as h  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "sdk", "python"))
import sbx  # noqa: E402

IMAGE = "sbx/browser"
CDP = 9222
DOMAIN = "sbx.test"
CLIENT = os.path.join(TOP, "tests", "browser", "cdp.mjs")
TOK = {n: secrets.token_hex(32) for n in ("admin", "alice", "bob")}
SLOW = 120  # a browser's first page on a loaded 2-core machine

PAGE = """<!doctype html><html><head><title>sbx inside</title></head>
<body style="background:#fff"><h1>served in the sandbox</h1>
<button id="go" onclick="document.title='clicked ' + location.port">go</button></body></html>"""


class HostServer:
    """An HTTP server on the host's own (non-loopback) address, for the
    egress check: a sandbox without a policy must not reach it."""

    def __init__(self):
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            # no packet is sent: the kernel only picks the source address
            probe.connect(("192.0.2.1", 9))
            self.addr = probe.getsockname()[0]
        except OSError:
            self.addr = None
        finally:
            probe.close()
        self.hits = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits.append(self.path)
                body = b"<title>host</title>"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def drive(endpoint, token, steps):
    """cdp.mjs on endpoint: its JSON line."""
    out = subprocess.run(["node", CLIENT, endpoint] + ([token] if token else []),
                         input=json.dumps(steps), capture_output=True, text=True,
                         timeout=SLOW + 60, cwd=os.path.dirname(CLIENT))
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = HostServer()
        cls.addClassCleanup(cls.host.stop)
        cls.sup, cls.sb = h.pooled_image_supervisor(cls, "browser", TOK, timeout=SLOW, extra=[
            "--pool-reuse", "--ports-domain", DOMAIN])
        cls.sid = cls.sb["id"]
        cls.ports = "/v1/sandboxes/%s/ports" % cls.sid
        # the page, served by a tiny server inside the sandbox
        st, _, b = cls.req("PUT", "/v1/sandboxes/%s/files?path=/workspace/site/index.html&parents=1"
                           % cls.sid, PAGE)
        assert st in (200, 201), (st, b)
        st, _, b = cls.req("POST", "/v1/sandboxes/%s/processes" % cls.sid, {
            "argv": ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                     "/workspace/site", "8000"], "tag": "site"})
        assert st == 201, b
        cls.version = cls.wait_listening()

    @classmethod
    def req(cls, method, path, body=None, who="alice", **kw):
        token = "Bearer " + TOK[who] if who else None
        return cls.sup.request(method, path, body, token=token, timeout=SLOW, **kw)

    @classmethod
    def wait_listening(cls):
        """Chromium and the page's server listen (a handed-out pooled
        sandbox's Chromium is already up; the page's server was just
        started): /json/version through the proxy."""
        deadline = time.monotonic() + SLOW
        while time.monotonic() < deadline:
            st, _, b = cls.req("GET", "%s/%d/json/version" % (cls.ports, CDP))
            st2, _, _ = cls.req("GET", "%s/8000/" % cls.ports)
            if st == 200 and st2 == 200:
                return b
            time.sleep(0.2)
        raise AssertionError("not listening: %r %r\n%s" % (st, b, cls.sup.log()[-4000:]))

    def base_url(self):
        return "http://127.0.0.1:%d" % self.sup.port

    def test_pooled_service_as_sandbox_user(self):
        # handed out from the pool with its service already started
        st, _, b = self.req("GET", "/v1/sandboxes/%s/processes?tag=sbx-service" % self.sid)
        self.assertEqual(st, 200, b)
        self.assertEqual(len(b["processes"]), 1, b)
        self.assertEqual(b["processes"][0]["state"], "running", b)
        # every Chromium process is the sandbox's user, none root
        st, _, b = self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.sid,
                                    {"cmd": "ps -eo user:16,args | grep -i '[c]hromium'"},
                                    token="Bearer " + TOK["alice"], timeout=SLOW)
        self.assertEqual(st, 200, b)
        lines = [ln for ln in b["stdout"].splitlines() if ln.strip()]
        self.assertTrue(lines, b)
        self.assertEqual({ln.split()[0] for ln in lines}, {"sandbox"}, lines)
        self.assertTrue(any("--remote-debugging-port=9222" in ln for ln in lines), lines)
        print("chromium: %s; %s" % (self.version.get("Browser"),
                                    "no Chromium sandbox" if any("--no-sandbox" in ln for ln in lines)
                                    else "Chromium's own sandbox on"), file=sys.stderr)

    def test_discovery_rewritten(self):
        prefix = "/v1/sandboxes/%s/ports/%d" % (self.sid, CDP)
        ws = self.version["webSocketDebuggerUrl"]
        self.assertTrue(ws.startswith("ws://127.0.0.1:%d%s/devtools/browser/" % (self.sup.port, prefix)),
                        ws)
        # a Host Chromium would refuse (not an IP, not localhost) is the
        # client's own, in the URLs it gets
        st, _, b = self.req("GET", prefix + "/json/list",
                            headers={"Host": "sbx.example:%d" % self.sup.port})
        self.assertEqual(st, 200, b)
        self.assertTrue(b, b)
        for t in b:
            self.assertTrue(t["webSocketDebuggerUrl"].startswith(
                "ws://sbx.example:%d%s/devtools/page/" % (self.sup.port, prefix)), t)
            if "devtoolsFrontendUrl" in t:
                self.assertIn("ws=sbx.example:%d%s/devtools/page/" % (self.sup.port, prefix),
                              t["devtoolsFrontendUrl"])
        # routed by Host (--ports-domain): the port's root is the host's
        host = "%d-%s.%s:%d" % (CDP, self.sid, DOMAIN, self.sup.port)
        st, _, b = self.req("GET", "/json/version", headers={"Host": host})
        self.assertEqual(st, 200, b)
        self.assertTrue(b["webSocketDebuggerUrl"].startswith("ws://%s/devtools/browser/" % host), b)
        # a query's proof (a signed URL of the port) goes on in the URLs
        st, _, u = self.req("GET", prefix + "/url?expires=120")
        self.assertEqual(st, 200, u)
        q = u["url"].split("?", 1)[1]
        st, _, b = self.sup.request("GET", prefix + "/json/version?" + q, token=None)
        self.assertEqual(st, 200, b)
        ws = b["webSocketDebuggerUrl"]
        self.assertTrue(ws.startswith("ws://127.0.0.1:%d%s/devtools/browser/" % (self.sup.port, prefix)), ws)
        self.assertTrue(ws.endswith("?" + q), (ws, q))

    def test_browser_endpoint_and_signed(self):
        st, _, b = self.req("GET", "/v1/sandboxes/%s/browser?expires=300" % self.sid)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["port"], CDP)
        self.assertEqual(b["cdp_url"], "%s/v1/sandboxes/%s/ports/%d" % (self.base_url(), self.sid, CDP))
        self.assertTrue(b["ws_url"].startswith("ws://127.0.0.1:%d/v1/sandboxes/%s/ports/%d/devtools/browser/"
                                               % (self.sup.port, self.sid, CDP)), b)
        signed = b["signed"]
        now = time.time()
        self.assertTrue(now + 200 < signed["expires_at"] <= now + 310, signed)
        self.assertTrue(signed["cdp_url"].startswith("%s/v1/signed/%s/%d/" % (self.base_url(), self.sid, CDP)))
        self.assertEqual(signed["ws_url"].split("/devtools/")[0].replace("ws://", "http://"),
                         signed["cdp_url"])
        # the signed URL, without any header, drives the browser
        r = drive(signed["cdp_url"], None, {"page": "http://127.0.0.1:8000/"})
        self.assertNotIn("error", r)
        self.assertEqual(r["title"], "sbx inside")
        # tampered: refused
        bad = signed["cdp_url"][:-1] + ("0" if signed["cdp_url"][-1] != "0" else "1")
        st, _, _ = self.sup.request("GET", bad[len(self.base_url()):] + "/json/version", token=None)
        self.assertEqual(st, 403)

    def test_playwright_page_click_screenshot_egress(self):
        steps = {"page": "http://127.0.0.1:8000/", "click": "#go", "blocked": []}
        if self.host.addr:
            steps["blocked"].append("http://%s:%d/" % (self.host.addr, self.host.port))
        r = drive("%s/v1/sandboxes/%s/ports/%d" % (self.base_url(), self.sid, CDP), TOK["alice"], steps)
        self.assertNotIn("error", r)
        self.assertEqual(r["title"], "sbx inside")
        self.assertEqual(r["clicked"], "clicked 8000")
        w, ht = h.png_size(base64.b64decode(r["screenshot"]))
        self.assertTrue(w >= 100 and ht >= 100, (w, ht))
        self.assertTrue(r["version"], r)
        # no policy: loopback only, the host's own address is not reached
        for url, err in r["blocked"].items():
            self.assertIsNotNone(err, url)
        self.assertEqual(self.host.hits, [])

    def test_refusals(self):
        path = "%s/%d/json/version" % (self.ports, CDP)
        st, _, _ = self.sup.request("GET", path, token="Bearer " + "0" * 64)
        self.assertEqual(st, 401)
        st, _, _ = self.sup.request("GET", path, token=None)
        self.assertEqual(st, 401)
        st, _, _ = self.req("GET", path, who="bob")
        self.assertEqual(st, 404)
        st, _, _ = self.sup.request("GET", "/v1/sandboxes/%s/browser" % self.sid,
                                    token="Bearer " + "0" * 64)
        self.assertEqual(st, 401)
        st, _, _ = self.req("GET", "/v1/sandboxes/%s/browser" % self.sid, who="bob")
        self.assertEqual(st, 404)
        # Playwright with a wrong token gets nowhere
        r = drive("%s/v1/sandboxes/%s/ports/%d" % (self.base_url(), self.sid, CDP), "0" * 64,
                  {"page": "http://127.0.0.1:8000/"})
        self.assertIn("error", r)
        self.assertIn("401", r["error"])

    def test_browser_without_chromium(self):
        # a sandbox of another image: nothing listens on 9222
        st, _, b = self.req("POST", "/v1/sandboxes", {"image": "host", "isolation": "runc"})
        self.assertEqual(st, 201, b)
        try:
            st, _, e = self.req("GET", "/v1/sandboxes/%s/browser" % b["id"])
            self.assertEqual(st, 502, e)
            self.assertEqual(e["error"]["code"], "port_closed", e)
        finally:
            self.req("DELETE", "/v1/sandboxes/%s" % b["id"])

    def test_reused_with_its_service_again(self):
        # a released browser sandbox is reset (its processes killed) and
        # pooled again with its service started again
        st, _, b = self.req("POST", "/v1/sandboxes", {"image": IMAGE, "isolation": "runc"})
        self.assertEqual(st, 201, b)
        rid = b["id"]
        st, _, _ = self.req("DELETE", "/v1/sandboxes/%s" % rid)
        self.assertEqual(st, 204)
        deadline = time.monotonic() + SLOW
        while self.sup.pools()[IMAGE]["ready"] < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        got = []
        try:
            for _ in range(2):
                st, _, b = self.req("POST", "/v1/sandboxes", {"image": IMAGE, "isolation": "runc"})
                self.assertEqual(st, 201, b)
                got.append(b["id"])
            self.assertIn(rid, got, "not reused: %r\n%s" % (got, self.sup.log()[-3000:]))
            st, _, b = self.req("GET", "/v1/sandboxes/%s/processes?tag=sbx-service" % rid)
            self.assertEqual(st, 200, b)
            self.assertEqual([p["state"] for p in b["processes"]], ["running"], b)
            deadline = time.monotonic() + SLOW
            while time.monotonic() < deadline:
                st, _, v = self.req("GET", "/v1/sandboxes/%s/ports/%d/json/version" % (rid, CDP))
                if st == 200:
                    break
                time.sleep(0.2)
            self.assertEqual(st, 200, v)
            self.assertIn("/v1/sandboxes/%s/ports/%d/devtools/browser/" % (rid, CDP),
                          v["webSocketDebuggerUrl"])
        finally:
            for sid in got:
                self.req("DELETE", "/v1/sandboxes/%s" % sid)

    def test_sdk(self):
        sb = sbx.Sandbox.connect(self.sid, url=self.base_url(), token=TOK["alice"])
        b = sb.browser(expires=120)
        self.assertEqual(b["port"], CDP)
        self.assertIn("/devtools/browser/", b["ws_url"])
        self.assertIn("/v1/signed/%s/%d/" % (self.sid, CDP), b["signed"]["cdp_url"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

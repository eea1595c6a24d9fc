"""A small Kubernetes API client for the test harnesses (stdlib only).

Reads a kubeconfig (JSON; YAML through the cached kubectl's `config view`,
so no YAML parser is needed here), makes one HTTPS request per call with
the kubeconfig's CA and bearer token, and follows a watch: list, then watch
from the list's resourceVersion, resuming from the last one seen after the
connection drops (the API server restarted or away), and listing again
only when the server says that version is gone (410).

It owns no state of a node and starts nothing; kubelet.py is its user.
This is a test harness, never part of the product.
"""
import http.client
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.parse


class ApiError(Exception):
    def __init__(self, status, body, what):
        self.status = status
        self.body = body
        super().__init__("%s: HTTP %s %s" % (what, status, body[:300]))


def _kubectl_json(kubeconfig, kubectl):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = os.path.dirname(os.path.abspath(kubeconfig))
    p = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "config", "view", "--raw",
                        "--minify", "-o", "json"], capture_output=True, text=True, env=env,
                       timeout=60)
    if p.returncode != 0:
        raise ValueError("%s: kubectl config view: %s" % (kubeconfig, p.stderr.strip()))
    return json.loads(p.stdout)


def load_kubeconfig(path, kubectl=None):
    """(server URL, CA file or None, token) of the current context."""
    with open(path) as f:
        text = f.read()
    try:
        cfg = json.loads(text)
    except ValueError:
        if not kubectl:
            raise ValueError("%s is not JSON and no kubectl was given to read its YAML" % path)
        cfg = _kubectl_json(path, kubectl)
    ctx_name = cfg.get("current-context")
    ctx = next((c["context"] for c in cfg.get("contexts", []) if c["name"] == ctx_name), None)
    if ctx is None:
        raise ValueError("%s: no current context" % path)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    ca = cluster.get("certificate-authority")
    if ca and not os.path.isabs(ca):
        ca = os.path.join(os.path.dirname(os.path.abspath(path)), ca)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(user["tokenFile"]) as f:
            token = f.read().strip()
    if not token:
        raise ValueError("%s: the user has no token" % path)
    return cluster["server"], ca, token


class Client:
    def __init__(self, kubeconfig, kubectl=None):
        self.server, self.ca, self.token = load_kubeconfig(kubeconfig, kubectl)
        u = urllib.parse.urlsplit(self.server)
        if u.scheme != "https":
            raise ValueError("%s: only https servers" % self.server)
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=self.ca)

    def _conn(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                           context=self.ctx)

    def request(self, method, path, body=None, content_type="application/json", timeout=20):
        """(status, parsed JSON or None). OSError when the server is away."""
        c = self._conn(timeout)
        h = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = content_type
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            raw = r.read()
        except http.client.HTTPException as e:
            raise OSError("%s %s: %s" % (method, path, e)) from e
        finally:
            c.close()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, {"raw": raw.decode(errors="replace")}

    def must(self, method, path, body=None, ok=(200, 201), **kw):
        st, obj = self.request(method, path, body, **kw)
        if st not in ok:
            raise ApiError(st, json.dumps(obj), "%s %s" % (method, path))
        return obj

    def watch(self, path, query, on_event, stopped, on_list=None, timeout_s=240):
        """List path?query, hand each item to on_event("ADDED", obj) (after
        on_list(items), if given), then watch from the list's
        resourceVersion for ever: each event to on_event(type, obj). A
        dropped connection resumes from the last resourceVersion seen, with
        a backoff of 0.2 s doubling to 2 s while the server is away; a 410
        (that version compacted away) lists again. Returns once stopped()
        is true; interrupt() ends a watch that waits for its next event."""
        rv = None
        backoff = 0.2
        while not stopped():
            try:
                if rv is None:
                    lst = self.must("GET", "%s?%s" % (path, query))
                    rv = lst["metadata"]["resourceVersion"]
                    if on_list:
                        on_list(lst.get("items") or [])
                    for item in lst.get("items") or []:
                        on_event("ADDED", item)
                rv = self._watch_once(path, query, rv, on_event, stopped, timeout_s)
                backoff = 0.2
            except ApiError as e:
                if e.status == 410:
                    rv = None
                    continue
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            except (OSError, ValueError):
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        return rv

    def _watch_once(self, path, query, rv, on_event, stopped, timeout_s):
        """One watch connection; returns the last resourceVersion seen
        (None after a 410 inside the stream: list again)."""
        q = "%s&watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d" % (
            query, urllib.parse.quote(rv), timeout_s)
        # The server ends the watch after timeout_s: a read that waits
        # longer means a dead connection.
        c = self._conn(timeout_s + 30)
        try:
            c.connect()
            self._watching = c.sock  # kept: the connection may drop its own
            c.request("GET", "%s?%s" % (path, q),
                      headers={"Authorization": "Bearer " + self.token,
                               "Accept": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise ApiError(r.status, r.read().decode(errors="replace"), "watch " + path)
            buf = b""
            while not stopped():
                try:
                    line = r.readline()
                except http.client.HTTPException as e:
                    raise OSError("watch %s: %s" % (path, e)) from e
                if not line:
                    return rv  # the server ended the watch: resume
                buf += line
                if not buf.endswith(b"\n"):
                    continue
                ev = json.loads(buf)
                buf = b""
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise ApiError(obj.get("code"), json.dumps(obj), "watch " + path)
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if ev.get("type") != "BOOKMARK":
                    on_event(ev["type"], obj)
            return rv
        finally:
            self._watching = None
            c.close()

    def interrupt(self):
        """Ends the current watch's wait (from another thread)."""
        sock = getattr(self, "_watching", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

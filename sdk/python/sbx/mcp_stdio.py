"""A stdio MCP server on the local side relaying to a sandbox's MCP server
over Streamable HTTP (`/v1/sandboxes/{id}/mcp/{name}`), so stdio-only MCP
clients can use it: newline-delimited JSON-RPC from stdin, each message
POSTed (the Mcp-Session-Id that `initialize` answered sent back on every
later one), answers read as JSON or as an SSE stream and written to
stdout one per line; a GET stream carries the server's own requests and
notifications once the session is open; DELETE ends the session at exit.
One thread per request in flight, so a long tool call never holds back a
cancellation; stdout writes are serialised. Nothing of the token goes to
stdout."""
import json
import sys
import threading

from ._http import MAX_LINE

ACCEPT = "application/json, text/event-stream"


class Relay:
    def __init__(self, client, path, stdin=None, stdout=None, log=None):
        self.c = client
        self.path = path
        self.stdin = stdin or sys.stdin.buffer
        self.stdout = stdout or sys.stdout.buffer
        self.log = log or (lambda msg: sys.stderr.write("sbx mcp: %s\n" % msg))
        self.lock = threading.Lock()
        self.session = None
        self.version = None
        # Set but while an initialize is in flight: later messages wait for
        # the session id it brings.
        self.ready = threading.Event()
        self.ready.set()
        self.threads = []
        self.get_conn = None
        self.stopping = False

    # ---- out to the local client ----
    def emit(self, msg):
        line = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        with self.lock:
            self.stdout.write(line.strip() + b"\n")
            self.stdout.flush()

    def fail(self, mid, why):
        if mid is not None:
            self.emit({"jsonrpc": "2.0", "id": mid, "error": {"code": -32603, "message": why}})
        else:
            self.log(why)

    # ---- HTTP ----
    def headers(self):
        h = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        if self.version:
            h["MCP-Protocol-Version"] = self.version
        return h

    def read_sse(self, resp):
        """Each SSE event's data (a JSON-RPC message) to stdout."""
        data = []
        while True:
            line = resp.readline(MAX_LINE + 1)
            if not line:
                return
            line = line.rstrip(b"\r\n")
            if line == b"":
                if data:
                    self.emit(b"\n".join(data))
                    data = []
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))

    def post(self, raw, msg):
        mid = msg.get("id") if isinstance(msg, dict) and "method" in msg else None
        is_init = isinstance(msg, dict) and msg.get("method") == "initialize"
        if not is_init:
            self.ready.wait()
        conn = self.c.connection(None)
        try:
            conn.request("POST", self.c.target(self.path), body=raw,
                         headers=self.c.headers(self.headers()))
            resp = conn.getresponse()
            if is_init:
                self.session = resp.getheader("Mcp-Session-Id")
            ctype = resp.getheader("Content-Type", "")
            if resp.status == 202:
                resp.read()
            elif ctype.startswith("text/event-stream"):
                if is_init:
                    self.ready.set()
                self.read_sse(resp)
            else:
                body = resp.read(MAX_LINE)
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = None
                if is_init and resp.status == 200 and isinstance(parsed, dict):
                    self.version = (parsed.get("result") or {}).get("protocolVersion")
                if isinstance(parsed, dict) and parsed.get("jsonrpc") == "2.0":
                    if "id" in parsed and (parsed["id"] is not None or mid is None):
                        self.emit(body)
                    else:
                        self.fail(mid, (parsed.get("error") or {}).get("message", "HTTP %d" % resp.status))
                elif resp.status >= 400:
                    err = parsed.get("error") if isinstance(parsed, dict) else None
                    self.fail(mid, "HTTP %d: %s" % (resp.status, err.get("message") if isinstance(err, dict)
                                                    else body[:200].decode("utf-8", "replace")))
        except OSError as e:
            self.fail(mid, "the sandbox's MCP endpoint: %s" % e)
        finally:
            conn.close()
            if is_init:
                self.ready.set()
                if self.session and not self.stopping:
                    threading.Thread(target=self.listen, daemon=True).start()

    def listen(self):
        """The session's GET stream: the server's own messages."""
        conn = self.c.connection(None)
        self.get_conn = conn
        try:
            h = {"Accept": "text/event-stream", "Mcp-Session-Id": self.session}
            if self.version:
                h["MCP-Protocol-Version"] = self.version
            conn.request("GET", self.c.target(self.path), headers=self.c.headers(h))
            resp = conn.getresponse()
            if resp.status == 200:
                self.read_sse(resp)
            else:
                resp.read()
        except (OSError, ValueError, AttributeError):
            pass  # closed at exit, or the server ended the session
        finally:
            conn.close()

    def spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def end(self):
        """DELETE the session (its server process is killed)."""
        self.stopping = True
        if self.session:
            try:
                self.c.call("DELETE", self.path, headers={"Mcp-Session-Id": self.session},
                            ok=(204, 404), timeout=10)
            except Exception as e:  # noqa: BLE001 - exiting anyway
                self.log("ending the session: %s" % e)
        if self.get_conn is not None:
            try:
                self.get_conn.sock and self.get_conn.sock.shutdown(2)
            except OSError:
                pass

    def run(self):
        """Relay until stdin ends; requests in flight are answered first."""
        try:
            while True:
                raw = self.stdin.readline(MAX_LINE + 1)
                if not raw:
                    break
                if len(raw) > MAX_LINE:
                    self.log("a line over %d bytes dropped" % MAX_LINE)
                    continue
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    msg = json.loads(raw)
                except ValueError:
                    self.emit({"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32700, "message": "not JSON"}})
                    continue
                self.threads = [t for t in self.threads if t.is_alive()]
                if isinstance(msg, dict) and msg.get("method") == "initialize":
                    self.ready.clear()
                self.spawn(self.post, raw, msg)
            for t in list(self.threads):
                t.join()
        finally:
            self.end()


def relay(sandbox, name, stdin=None, stdout=None):
    """Run the relay for `sandbox`'s MCP server `name` until stdin ends."""
    Relay(sandbox.client, "%s/mcp/%s" % (sandbox.base, name), stdin, stdout).run()

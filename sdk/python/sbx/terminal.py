"""A terminal session: a background process started with a pty, attached
over `GET /v1/sandboxes/{id}/processes/{pid}/ws` (API.md). Turns the
WebSocket's messages into events: ("output", bytes), ("gap", {"from","to"}),
("error", {"code","message"}), ("exit", description). Local terminal
handling (raw mode, SIGWINCH) is the CLI's, not this module's."""
import json

from .ws import Closed, WebSocket


class Terminal:
    def __init__(self, sandbox, pid, offset=0):
        self.sandbox = sandbox
        self.pid = pid
        self.exit = None
        path = "%s/processes/%d/ws" % (sandbox.base, pid)
        self.ws = WebSocket.connect(sandbox.client, path + ("?offset=%d" % offset if offset else ""))

    def fileno(self):
        return self.ws.fileno()

    def write(self, data):
        """Type bytes (or str) into the terminal."""
        self.ws.send_binary(data.encode() if isinstance(data, str) else data)

    def resize(self, cols, rows):
        self.ws.send_text(json.dumps({"resize": {"cols": cols, "rows": rows}}))

    def _events(self, msgs):
        out = []
        for kind, data in msgs:
            if kind == "binary":
                out.append(("output", data))
                continue
            try:
                m = json.loads(data)
            except ValueError:
                continue
            for key in ("gap", "error", "exit"):
                if key in m:
                    if key == "exit":
                        self.exit = m["exit"]
                    out.append((key, m[key]))
        return out

    def read_available(self):
        """Events from one read of the socket (for a select loop); [] may
        mean a partial frame. Raises ws.Closed once the session ended."""
        return self._events(self.ws.read_available())

    def recv(self):
        """The next event, blocking; None once the session has ended."""
        while True:
            try:
                evs = self._events([self.ws.recv()])
            except Closed:
                return None
            if evs:
                return evs[0]

    def read_until(self, needle, limit=1 << 20):
        """Output until `needle` (bytes) shows up; returns what came."""
        got = b""
        while needle not in got:
            ev = self.recv()
            if ev is None:
                break
            if ev[0] == "output":
                got = (got + ev[1])[-limit:]
        return got

    def close(self, kill=False):
        """End the session (the process goes on unless `kill`)."""
        self.ws.close()
        if kill and self.exit is None:
            try:
                self.sandbox.processes.kill(self.pid)
            except Exception:  # noqa: BLE001 - it may have ended meanwhile
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close(kill=True)
        return False

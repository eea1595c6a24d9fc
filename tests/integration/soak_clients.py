"""What the soak's clients share: the supervisor they call (Node: one
state folder, a supervisor started again after each SIGKILL, its
incarnations counted as epochs), the ledger of everything they saw
(every request's route, epoch, times and outcome; the writes the
supervisor acknowledged; snapshots; the sandboxes whose failure the soak
caused), and call(): one HTTP request with a deadline, its answer judged.

A request's outcome is one of:
  ok         the status it expects;
  refused    another status with the error shape of API.md
             ({"error":{"code","message"}}): a clear refusal;
  cut        the connection failed while a SIGKILL of the supervisor fell
             within the request (its answer is unknown), or the request's
             sandbox had its agent killed by the soak (an answer whose
             head went cannot change its status: its body stops short of
             its length, which the client sees);
  abandoned  the client reset it on purpose (a fault of its own);
and anything else is a problem that fails the soak: a request with no
answer within its deadline (a hang, named with its route and path), a
connection that ended with no kill to explain it, an error without the
error shape, a status no route gives.
Stdlib only; a test's helper, never the product.
"""
import collections
import http.client
import json
import re
import socket
import struct
import threading
import time


class Node:
    """The supervisor of one state folder across its restarts. make() gives
    a started Supervisor (sbx_harness) on that folder."""

    def __init__(self, make):
        self.make = make
        self.cond = threading.Condition()
        self.sup = None
        self.epoch = 0
        self.up = False
        self.kills = []  # time.monotonic() of each SIGKILL
        self.sups = []  # every incarnation, oldest first (their logs)

    def start(self):
        sup = self.make()
        with self.cond:
            self.sup = sup
            self.epoch += 1
            self.up = True
            self.sups.append(sup)
            self.cond.notify_all()
        return sup

    def current(self, timeout=240):
        """(epoch, port, token) of the running supervisor, waiting while it
        restarts; None when it is not back within timeout."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.up, timeout):
                return None
            return self.epoch, self.sup.port, self.sup.token

    def kill(self):
        """SIGKILL the supervisor (clients wait for the next start)."""
        with self.cond:
            self.up = False
            sup = self.sup
            self.kills.append(time.monotonic())
        sup.proc.kill()
        sup.wait(60)
        if sup.proc.stdout:
            sup.proc.stdout.close()

    def killed_within(self, t0, t1):
        with self.cond:
            return any(t0 <= k <= t1 for k in self.kills)


# Why a sandbox failed when the soak killed its agent (test_soak.py).
AGENT_KILLED = "its agent killed by the soak"


class Ledger:
    """Everything the clients saw, under one lock."""

    def __init__(self):
        self.lock = threading.RLock()
        self.requests = []  # (route, epoch, t0, t1, status or None, code, outcome, who, path)
        self.problems = []
        self.faults = collections.Counter()
        self.lost_exposed = []  # writes answered while the state folder was full, found lost
        # sid -> {"owner", "files": {path: sha}, "unknown": set, "absent": set,
        #         "exposed": set (answered while the state folder was full),
        #         "failed": why or None, "deleted": bool, "restored_from": snapshot or None}
        self.sandboxes = {}
        # snapshot id -> {"sandbox", "files": {path: sha}, "exposed": set, "deleted": bool}
        self.snapshots = {}
        # [start, end) of each time the state folder was full (end None:
        # still); a write answered within one may be lost with no report
        # (see test_soak.py, "What a full state folder costs")
        self.full = []

    def record(self, route, epoch, t0, t1, status, code, outcome, who="", path=""):
        with self.lock:
            self.requests.append((route, epoch, t0, t1, status, code, outcome, who, path))

    def problem(self, text):
        with self.lock:
            self.problems.append("%.1f s: %s" % (time.monotonic() - START, text))
            print("soak problem: %s" % text, flush=True)

    def agent_killed(self, path):
        """Whether path names a sandbox whose agent the soak killed."""
        m = re.match(r"/v1/sandboxes/([^/?]+)", path or "")
        with self.lock:
            sb = self.sandboxes.get(m.group(1)) if m else None
            return bool(sb and sb["failed"] == AGENT_KILLED)

    def fault(self, kind, n=1):
        with self.lock:
            self.faults[kind] += n

    def sandbox(self, sid, owner, restored_from=None):
        with self.lock:
            self.sandboxes[sid] = {"owner": owner, "files": {}, "unknown": set(), "absent": set(),
                                   "exposed": set(),
                                   "failed": None, "deleted": False,
                                   "restored_from": restored_from}
            return self.sandboxes[sid]

    def exposed(self, t0, t1):
        """Whether a write whose request ran over [t0, t1] may have reached
        its sandbox's disk while the state folder was full."""
        with self.lock:
            return any(t1 >= a and (b is None or t0 < b) for a, b in self.full)

    def failed(self, sid):
        with self.lock:
            sb = self.sandboxes.get(sid)
            return sb is None or sb["failed"] is not None


START = time.monotonic()


class Answer:
    def __init__(self, status=None, headers=None, body=b"", outcome="ok", code=None):
        self.status, self.headers, self.body = status, headers or {}, body
        self.outcome, self.code = outcome, code
        self.t0 = self.t1 = None
        self.json = None
        if self.headers.get("content-type", "").startswith("application/json") and body:
            try:
                self.json = json.loads(body)
            except ValueError:
                self.json = None

    @property
    def ok(self):
        return self.outcome == "ok"


def error_code(ans):
    """The error shape's code, or None when the answer lacks the shape."""
    err = (ans.json or {}).get("error") if isinstance(ans.json, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str) and \
            isinstance(err.get("message"), str) and err["message"]:
        return err["code"]
    return None


def reset(sock):
    """Close with SO_LINGER 0: the peer sees a TCP RST."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Client:
    """One client thread's way to call the node; every call is recorded."""

    def __init__(self, node, ledger, name):
        self.node, self.ledger, self.name = node, ledger, name

    def call(self, route, method, path, body=None, headers=None, ok=(200,), deadline=60,
             reader=None, chunked=False, rcvbuf=None):
        """One request: body bytes, a dict (JSON), or an iterable of bytes
        (sent chunked when chunked, else with Content-Length=len(body)
        given as headers). reader(resp) reads the answer's body instead of
        resp.read() (a slow reader). Returns an Answer; a hang, an
        unexplained drop or an unclear error is recorded as a problem."""
        cur = self.node.current()
        if cur is None:
            self.ledger.problem("%s: the supervisor did not come back within 240 s" % self.name)
            return Answer(outcome="cut")
        epoch, port, token = cur
        h = {"Authorization": "Bearer " + token}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        t0 = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=deadline)
        status, code = None, None
        try:
            if rcvbuf:
                # before the connect: the window it offers is set then
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                conn.sock = s
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                s.settimeout(deadline)
                s.connect(("127.0.0.1", port))
            conn.request(method, path, body=body, headers=h, encode_chunked=chunked)
            resp = conn.getresponse()
            status = resp.status
            data = reader(resp) if reader else resp.read()
            ans = Answer(status, {k.lower(): v for k, v in resp.getheaders()}, data)
        except socket.timeout:
            t1 = time.monotonic()
            self.ledger.record(route, epoch, t0, t1, status, None, "hang", self.name, path)
            self.ledger.problem("hang: %s %s (%s) had no answer%s within its %d s deadline" % (
                method, path, self.name, "'s body" if status else "", deadline))
            return Answer(status, outcome="hang")
        except (OSError, http.client.HTTPException) as e:
            t1 = time.monotonic()
            if self.node.killed_within(t0, t1 + 0.5) or self.ledger.agent_killed(path):
                self.ledger.record(route, epoch, t0, t1, status, None, "cut", self.name, path)
                return Answer(status, outcome="cut")
            self.ledger.record(route, epoch, t0, t1, status, None, "dropped", self.name, path)
            self.ledger.problem("%s %s (%s): connection failed with no kill to explain it "
                                "after %.1f s: %r" % (method, path, self.name, t1 - t0, e))
            return Answer(status, outcome="dropped")
        finally:
            conn.close()
        t1 = time.monotonic()
        if status in ok:
            ans.outcome = "ok"
        elif status >= 400 and error_code(ans):
            ans.outcome, ans.code = "refused", error_code(ans)
        else:
            ans.outcome = "bad"
            self.ledger.problem("%s %s (%s): status %d without the error shape: %r" % (
                method, path, self.name, status, ans.body[:300]))
        ans.t0, ans.t1 = t0, t1
        self.ledger.record(route, epoch, t0, t1, status, ans.code, ans.outcome, self.name, path)
        return ans

    def abandoned(self, route, t0, status=None):
        """A request this client reset on purpose."""
        cur = self.node.current(0) or (self.node.epoch, 0, "")
        self.ledger.record(route, cur[0], t0, time.monotonic(), status, None, "abandoned", self.name)


def sse_events(data):
    """[(event, data)] of an SSE body."""
    out, ev, lines = [], "message", []
    for line in data.decode(errors="replace").split("\n"):
        if line.startswith("event:"):
            ev = line[6:].strip()
        elif line.startswith("data:"):
            lines.append(line[5:].lstrip(" "))
        elif line == "" and lines:
            out.append((ev, "\n".join(lines)))
            ev, lines = "message", []
    return out

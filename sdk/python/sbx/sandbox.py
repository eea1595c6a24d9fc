"""The SDK's object model over the HTTP API (node-supervisor/API.md):
Sandbox (create, from a snapshot too, connect, list, renew, pause, resume,
snapshot, fork, delete, run, run_code), and per sandbox its files, background processes, ports, code contexts, terminal and MCP URLs. Calls map
one to one onto routes that exist; streamed routes (exec, process output,
file bodies, watch) are read as they come, never whole unless asked."""
import base64
import os
import stat
import urllib.parse

from ._http import CHUNK, Client
from .contexts import Contexts
from .errors import ApiError, ProtocolError, error_from


def _b64(s):
    return base64.b64decode(s) if s else b""


def _command(cmd):
    """A command as the API takes it: a string runs under /bin/sh -c
    (`cmd`), a list is an argv."""
    if isinstance(cmd, str):
        return {"cmd": cmd}
    if isinstance(cmd, (list, tuple)) and cmd and all(isinstance(a, str) for a in cmd):
        return {"argv": list(cmd)}
    raise TypeError("cmd: a string (run by /bin/sh -c) or a non-empty list of strings")


def _opts(**kw):
    return {k: v for k, v in kw.items() if v is not None}


class ExecResult:
    """What a command did: `exit_code` (or None when it ended by a signal),
    `signal`, `timed_out`, `oom_killed`, `duration_ms`, and its output as
    `stdout`/`stderr` (text, invalid UTF-8 replaced) and
    `stdout_bytes`/`stderr_bytes` (exact). `info` the whole exit event."""

    def __init__(self, info, out, err):
        self.info = info
        self.exit_code = info.get("exit_code")
        self.signal = info.get("signal")
        self.timed_out = bool(info.get("timed_out"))
        self.oom_killed = bool(info.get("oom_killed"))
        self.duration_ms = info.get("duration_ms")
        self.stdout_bytes = out
        self.stderr_bytes = err
        self.stdout = out.decode("utf-8", "replace")
        self.stderr = err.decode("utf-8", "replace")

    @property
    def ok(self):
        return self.exit_code == 0

    def __repr__(self):
        return "ExecResult(exit_code=%r, signal=%r, stdout=%r, stderr=%r)" % (
            self.exit_code, self.signal, self.stdout[:80], self.stderr[:80])


class Sandbox:
    """A sandbox of the supervisor at `url` (or SBX_URL, or the config
    file). Use `Sandbox.create(...)` or `Sandbox.connect(id)`; as a context
    manager the sandbox is deleted when the block ends, however it ends."""

    def __init__(self, info, client):
        self.client = client
        self.info = info
        self.id = info["id"]
        self.base = "/v1/sandboxes/" + urllib.parse.quote(self.id, safe="")
        self.files = Files(self)
        self.processes = Processes(self)
        self.ports = Ports(self)
        self.contexts = Contexts(self)

    # ---- life ----
    @classmethod
    def create(cls, image=None, timeout=None, resources=None, env=None, network=None,
               isolation=None, mcp=None, volumes=None, snapshot=None, secrets=None,
               secret_files=None, url=None, token=None, client=None, ca_file=None):
        """POST /v1/sandboxes. `resources` {"cpus","memory","pids","disk"},
        `network` an egress policy, `mcp` {"servers": {...}}, `volumes`
        [{"name","mount","read_only"}], `snapshot` a Snapshot (or its id)
        to restore: the new sandbox starts with its files; `secrets`
        {"VAR": "secret-name"}: the tenant's secrets as its commands'
        variables; `secret_files` {"FILE": "secret-name"}: as read-only files
        /run/secrets/FILE (runc sandboxes). `ca_file`: the CA of an https:// API's certificate
        (default $SBX_CA_FILE, else the system's)."""
        c = client or Client(url, token, ca_file=ca_file)
        if snapshot is not None and not isinstance(snapshot, str):
            snapshot = snapshot.id
        body = _opts(image=image, timeout=timeout, resources=resources, env=env,
                     network=network, isolation=isolation, mcp=mcp, volumes=volumes,
                     snapshot=snapshot, secrets=secrets, secret_files=secret_files)
        # A restore is a cold create that unpacks the layer first.
        return cls(c.call("POST", "/v1/sandboxes", json_body=body, ok=(201,),
                          timeout=-1 if snapshot is None else 300), c)

    @classmethod
    def connect(cls, sandbox_id, url=None, token=None, client=None, ca_file=None):
        """An existing sandbox by id (NotFound if there is none)."""
        c = client or Client(url, token, ca_file=ca_file)
        return cls(c.call("GET", "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe="")), c)

    @classmethod
    def list(cls, url=None, token=None, client=None, cluster=False):
        """Every sandbox of the token's tenant, oldest first (dicts): this
        node's, or with cluster=True every node's (GET ?scope=cluster; the
        nodes that did not answer are left out, see Sandbox.list_cluster)."""
        if cluster:
            return cls.list_cluster(url, token, client)["sandboxes"]
        c = client or Client(url, token)
        return c.call("GET", "/v1/sandboxes")["sandboxes"]

    @classmethod
    def list_cluster(cls, url=None, token=None, client=None):
        """GET /v1/sandboxes?scope=cluster whole: {"sandboxes": [...],
        "nodes": {"answered": [names], "unanswered": [{"name", "error"}]}}."""
        c = client or Client(url, token)
        return c.call("GET", "/v1/sandboxes?scope=cluster")

    def refresh(self):
        """GET the sandbox again (with `usage`); returns and keeps the dict."""
        self.info = self.client.call("GET", self.base)
        return self.info

    def renew(self, timeout):
        """A new lifetime: expire `timeout` seconds from now."""
        self.info = self.client.call("POST", self.base + "/timeout", json_body={"timeout": timeout})
        return self.info

    @property
    def state(self):
        """`running`, `paused`, `failed` or `destroying`, as last seen."""
        return self.info.get("state")

    def pause(self):
        """Freeze every process of the sandbox (its cgroup's freezer);
        calls that need its agent answer Paused until resume(). Idempotent."""
        self.info = self.client.call("POST", self.base + "/pause")
        return self.info

    def resume(self):
        """Thaw it; everything goes on where it stood. Idempotent."""
        self.info = self.client.call("POST", self.base + "/resume")
        return self.info

    def snapshot(self, name=None):
        """Its writable layer (every file it changed) as a Snapshot; the
        sandbox is frozen while the layer is read, then goes on."""
        from .resources import Snapshot
        info = self.client.call("POST", self.base + "/snapshots", json_body=_opts(name=name),
                                ok=(201,), timeout=600)
        return Snapshot(info, self.client)

    def fork(self, count=1):
        """`count` (1..32) new sandboxes whose files start as a copy of
        this one's now (same image, limits, env, remaining lifetime);
        returns them as Sandbox objects (delete each, or use each as a
        context manager)."""
        res = self.client.call("POST", self.base + "/fork", json_body={"count": count},
                               ok=(201,), timeout=600)
        return [type(self)(i, self.client) for i in res["sandboxes"]]

    def set_network(self, policy):
        """Replace the sandbox's egress policy (PATCH .../network; needs a
        supervisor started with --uplink, else BadRequest)."""
        self.info = self.client.call("PATCH", self.base + "/network", json_body=policy)
        return self.info

    def delete(self, missing_ok=True):
        """DELETE, answered once the container is gone; a sandbox already
        gone is not an error (unless missing_ok=False: NotFound)."""
        try:
            self.client.call("DELETE", self.base, ok=(204,), timeout=120)
        except ApiError as e:
            if e.status != 404 or not missing_ok:
                raise

    kill = delete

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.delete()
        return False

    def __repr__(self):
        return "Sandbox(%r)" % self.id

    # ---- commands ----
    def run(self, cmd, on_stdout=None, on_stderr=None, timeout=None, env=None, cwd=None,
            user=None, stdin=None, rlimits=None, capture=True):
        """Run a command to its end, its output streamed (NDJSON) as it comes:
        `on_stdout(bytes)` / `on_stderr(bytes)` called per chunk. `cmd` a
        string (sh -c) or an argv list; `timeout` seconds (the server kills
        the command's tree past it); `stdin` str or bytes. Returns an
        ExecResult (output kept unless capture=False). Interrupting the call
        (KeyboardInterrupt, any exception in a callback) closes the
        connection, and the server kills the command."""
        body = _command(cmd)
        body.update(_opts(timeout=timeout, env=env, cwd=cwd, user=user, rlimits=rlimits))
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_b64"] = base64.b64encode(stdin).decode()
        out, err = bytearray(), bytearray()
        events = self.client.events("POST", self.base + "/exec", json_body=body)
        try:
            for ev in events:
                kind = ev.get("event")
                if kind in ("stdout", "stderr"):
                    data = _b64(ev.get("data"))
                    if capture:
                        (out if kind == "stdout" else err).extend(data)
                    cb = on_stdout if kind == "stdout" else on_stderr
                    if cb is not None:
                        cb(data)
                elif kind == "exit":
                    return ExecResult(ev, bytes(out), bytes(err))
                elif kind == "error":
                    raise error_from(504 if ev["error"].get("code") == "agent_timeout" else 502, ev)
            raise ProtocolError("the exec stream ended without its exit event")
        finally:
            events.close()  # at once, not when collected: the server kills the command

    # ---- code ----
    def run_code(self, code, language="python", context=None, timeout=None, on_stdout=None,
                 on_stderr=None, on_result=None):
        """Run a cell in a code context (contexts.py): `context` a Context
        or its id, else `language`'s default context (made on first use).
        Returns an Execution: `.result.html`, `.result.text`, `.stdout`,
        `.error`."""
        return self.contexts.run(context or language, code, timeout, on_stdout, on_stderr, on_result)

    # ---- terminal ----
    def terminal(self, cmd=None, cols=80, rows=24, env=None, cwd=None):
        """Start `cmd` (default: bash if the sandbox has it, else sh) on a
        terminal of cols x rows and attach to it over the WebSocket
        (`/processes/{pid}/ws`). Returns a Terminal (see terminal.py)."""
        from .terminal import Terminal
        if cmd is None:
            cmd = "if command -v bash >/dev/null; then exec bash -i; else exec sh -i; fi"
        p = self.processes.start(cmd, pty={"cols": cols, "rows": rows}, env=env, cwd=cwd,
                                 tag="sbx-terminal")
        return Terminal(self, p["pid"])

    # ---- browser ----
    def browser(self, expires=None):
        """GET /browser: the endpoint of the sandbox's Chromium (sbx/browser)
        through the port proxy: {"port", "cdp_url", "ws_url", "browser",
        "protocol_version", "signed": {"cdp_url", "ws_url", "expires_at"}}.
        `cdp_url` is for Playwright's chromium.connectOverCDP (or
        Puppeteer's browserURL) with the token as `Authorization: Bearer
        ...`; `signed` needs no token for `expires` seconds (default 600).
        BadGateway (502 `port_closed`) while Chromium is not listening."""
        return self.client.call("GET", self.base + "/browser", {"expires": expires})

    # ---- MCP ----
    def mcp_url(self, name):
        """The Streamable HTTP URL of the sandbox's MCP server `name` (send
        the token as `Authorization: Bearer ...`)."""
        return "%s%s/mcp/%s" % (self.client.url, self.base, urllib.parse.quote(name, safe=""))

    def mcp_servers(self):
        """GET /mcp: the servers the sandbox runs and their state."""
        return self.client.call("GET", self.base + "/mcp")["servers"]


class Files:
    """Files inside the sandbox: absolute paths, checked by the tenant's
    path policy (Forbidden) and the agent (PermissionDenied)."""

    def __init__(self, sb):
        self.sb = sb
        self.c = sb.client

    def write(self, path, data, mode=None, parents=False, overwrite=True, progress=None):
        """PUT the file. `data`: bytes, str (UTF-8), or a binary file object
        (streamed in 256 KiB pieces, never read whole; its size is taken
        from the file, else it is sent chunked). `mode` an int (0o644);
        `progress(done, total)` after each piece. Returns {"path","size"}."""
        q = {"path": path, "mode": None if mode is None else "%o" % mode,
             "parents": "1" if parents else None, "overwrite": None if overwrite else "0"}
        if isinstance(data, str):
            data = data.encode()
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, (bytes, bytearray, memoryview)):
            total = len(data)
            body = _pieces_of_bytes(data, progress)
        else:
            total = _remaining(data)
            body = _pieces_of_file(data, total, progress)
        if total is None:
            headers["Transfer-Encoding"] = "chunked"
            conn, resp = self.c.open("PUT", self.sb.base + "/files", q, body=_chunked(body),
                                     headers=headers, ok=(200, 201))
        else:
            headers["Content-Length"] = str(total)
            conn, resp = self.c.open("PUT", self.sb.base + "/files", q, body=body,
                                     headers=headers, ok=(200, 201))
        try:
            import json
            return json.loads(resp.read())
        finally:
            conn.close()

    def upload(self, local_path, path, progress=None, **kw):
        """write() from a local file."""
        with open(local_path, "rb") as f:
            return self.write(path, f, progress=progress, **kw)

    def read(self, path):
        """The whole file as bytes (for big files use read_into/download)."""
        return b"".join(self.iter_read(path))

    def iter_read(self, path, chunk_size=CHUNK, progress=None, offset=None):
        """The file's bytes in pieces as they come (GET /files, streamed);
        `offset` reads from there on (a Range request)."""
        headers = {"Range": "bytes=%d-" % offset} if offset else None
        conn, resp = self.c.open("GET", self.sb.base + "/files", {"path": path},
                                 headers=headers, ok=(200, 206))
        try:
            total = resp.getheader("Content-Length")
            total = int(total) if total is not None else None
            done = 0
            while True:
                piece = resp.read(chunk_size)
                if not piece:
                    break
                done += len(piece)
                if progress:
                    progress(done, total)
                yield piece
            if total is not None and done != total:
                raise ProtocolError("%s: %d of %d bytes came" % (path, done, total))
        finally:
            conn.close()

    def read_into(self, path, fileobj, progress=None):
        """Stream the file into a binary file object; returns the byte count."""
        n = 0
        for piece in self.iter_read(path, progress=progress):
            fileobj.write(piece)
            n += len(piece)
        return n

    def download(self, path, local_path, progress=None):
        """read_into() a local file (written whole or not at all: to a
        temporary name first, renamed once complete)."""
        tmp = "%s.sbx-part-%d" % (local_path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                n = self.read_into(path, f, progress)
            os.replace(tmp, local_path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return n

    def list(self, path, depth=None):
        """The folder's entries (dicts: path, name, type, size, mode,
        mtime, ...), `depth` levels (1..32)."""
        return self.c.call("GET", self.sb.base + "/fs/list", {"path": path, "depth": depth})["entries"]

    def stat(self, path):
        return self.c.call("GET", self.sb.base + "/fs/stat", {"path": path})

    def exists(self, path):
        from .errors import NotFound
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path, parents=False, mode=None):
        return self.c.call("POST", self.sb.base + "/fs/mkdir",
                           json_body=_opts(path=path, parents=parents, mode=mode))

    def remove(self, path, recursive=False):
        self.c.call("DELETE", self.sb.base + "/files",
                    {"path": path, "recursive": "1" if recursive else None}, ok=(204,))

    def move(self, src, dst, overwrite=False):
        return self.c.call("POST", self.sb.base + "/fs/move",
                           json_body={"from": src, "to": dst, "overwrite": overwrite})

    def chmod(self, path, mode):
        return self.c.call("POST", self.sb.base + "/fs/chmod", json_body={"path": path, "mode": mode})

    def search(self, path, glob, max=None):  # noqa: A002 - the API's name
        return self.c.call("POST", self.sb.base + "/fs/search",
                           json_body=_opts(path=path, glob=glob, max=max))["entries"]

    def watch(self, path, recursive=False):
        """Changes below a folder as they happen: a generator of event
        dicts ({"event": "ready"|"create"|"modify"|"delete"|"move"|
        "overflow"|"end", "path", "dir", ...}); keepalives are skipped.
        Close the generator (or leave a `with contextlib.closing(...)`) to
        end the watch."""
        events = self.c.events("GET", self.sb.base + "/fs/watch",
                               {"path": path, "recursive": "1" if recursive else None})
        try:
            for ev in events:
                if ev.get("event") != "keepalive":
                    yield ev
        finally:
            events.close()


class Processes:
    """Background processes: they outlive the request that started them,
    addressed by pid; their output is kept in a ring by offset."""

    def __init__(self, sb):
        self.sb = sb
        self.c = sb.client
        self.base = sb.base + "/processes"

    def start(self, cmd, tag=None, env=None, cwd=None, timeout=None, user=None, stdin=False,
              pty=None, buffer=None, rlimits=None):
        """Start `cmd` (string: sh -c; list: argv); returns its description
        (a dict with `pid`). `stdin=True` keeps stdin open for write()."""
        body = _command(cmd)
        body.update(_opts(tag=tag, env=env, cwd=cwd, timeout=timeout, user=user, pty=pty,
                          buffer=buffer, rlimits=rlimits))
        if stdin:
            body["stdin"] = True
        return self.c.call("POST", self.base, json_body=body, ok=(201,))

    def list(self, tag=None):
        return self.c.call("GET", self.base, {"tag": tag})["processes"]

    def get(self, pid):
        return self.c.call("GET", "%s/%d" % (self.base, pid))

    def output(self, pid, offset=0, follow=False):
        """A generator of the output's events from `offset`:
        {"event": "stdout"|"stderr", "offset", "data": bytes},
        {"event": "gap", "from", "to"}, and last {"event": "end", ...the
        description..., "next_offset"}. With `follow` it ends once the
        process has exited and all was sent."""
        events = self.c.events("GET", "%s/%d/output" % (self.base, pid),
                               {"offset": offset, "follow": "1" if follow else None})
        try:
            for ev in events:
                kind = ev.get("event")
                if kind in ("stdout", "stderr"):
                    ev["data"] = _b64(ev.get("data"))
                elif kind == "error":
                    raise error_from(502, ev)
                yield ev
        finally:
            events.close()

    def signal(self, pid, sig="TERM"):
        self.c.call("POST", "%s/%d/signal" % (self.base, pid), json_body={"signal": sig})

    def kill(self, pid):
        """SIGKILL to the whole tree; True once it has exited (204), False
        if it was still going when the agent answered (202)."""
        conn, resp = self.c.open("DELETE", "%s/%d" % (self.base, pid), ok=(202, 204))
        try:
            resp.read()
            return resp.status == 204
        finally:
            conn.close()

    def write(self, pid, data, eof=False):
        """Write bytes (or str) to the process's stdin; `eof` closes it after."""
        if isinstance(data, str):
            data = data.encode()
        return self.c.call("POST", "%s/%d/stdin" % (self.base, pid), {"eof": "1" if eof else None},
                           body=bytes(data), headers={"Content-Type": "application/octet-stream"})

    def resize(self, pid, cols, rows):
        self.c.call("POST", "%s/%d/resize" % (self.base, pid), json_body={"cols": cols, "rows": rows})


class Ports:
    """Servers listening inside the sandbox, reached through the supervisor."""

    def __init__(self, sb):
        self.sb = sb
        self.c = sb.client

    def list(self):
        return self.c.call("GET", self.sb.base + "/ports")["ports"]

    def url(self, port, path="/"):
        """The proxy URL of `port` (send the token as a Bearer header)."""
        return "%s%s/ports/%d%s" % (self.c.url, self.sb.base, port,
                                    path if path.startswith("/") else "/" + path)

    def signed_url(self, port, expires=None):
        """A URL a browser can open without the token, for `expires` seconds:
        {"url", "expires_at"}."""
        return self.c.call("GET", "%s/ports/%d/url" % (self.sb.base, port), {"expires": expires})


def _pieces_of_bytes(data, progress):
    view = memoryview(data)
    total = len(view)
    for i in range(0, total, CHUNK):
        piece = view[i:i + CHUNK]
        yield piece
        if progress:
            progress(min(i + CHUNK, total), total)
    if total == 0 and progress:
        progress(0, 0)


def _remaining(f):
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size - f.tell()
    except (AttributeError, OSError, ValueError):
        return None


def _pieces_of_file(f, total, progress):
    done = 0
    while True:
        piece = f.read(CHUNK)
        if not piece:
            break
        if total is not None and done + len(piece) > total:
            raise ProtocolError("the file grew while it was sent")
        done += len(piece)
        yield piece
        if progress:
            progress(done, total)
    if total is not None and done != total:
        raise ProtocolError("the file shrank while it was sent (%d of %d bytes)" % (done, total))


def _chunked(pieces):
    for p in pieces:
        if len(p):
            yield b"%x\r\n" % len(p) + bytes(p) + b"\r\n"
    yield b"0\r\n\r\n"

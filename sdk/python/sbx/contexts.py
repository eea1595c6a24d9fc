"""Code contexts (API.md, "Code contexts"): live python (an IPython kernel),
javascript (Node) and bash interpreters in a sandbox whose state lasts from
one cell to the next, and the cells' outputs by MIME type.

    ex = sb.run_code("df.describe()")          # the default python context
    ex.result.html, ex.result.text, ex.stdout, ex.error
    ctx = sb.contexts.create(language="javascript", cwd="/workspace")
    ctx.run("await fetchSomething()")

A cell runs streamed (NDJSON): `on_stdout(text)`, `on_stderr(text)`,
`on_result(Result)` as they come; the Execution is returned at its end."""
import base64
import urllib.parse

from .errors import ProtocolError, error_from

_SHORT = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
          "image/png": "png", "image/jpeg": "jpeg", "image/svg+xml": "svg",
          "application/json": "json", "application/pdf": "pdf", "text/latex": "latex",
          "application/javascript": "javascript"}


class Result:
    """One display, or the cell's value (`main`): `data` {mime: text}, and
    each known type as an attribute (`text`, `html`, `markdown`, `png`,
    `jpeg`, `svg`, `json`, `pdf`, `latex`: None when absent; images and PDF
    are base64 text, `png_bytes()` decodes)."""

    def __init__(self, main, data):
        self.main = bool(main)
        self.data = dict(data)
        for mime, short in _SHORT.items():
            setattr(self, short, self.data.get(mime))

    def png_bytes(self):
        return base64.b64decode(self.png) if self.png else None

    def formats(self):
        return sorted(self.data)

    def __repr__(self):
        return "Result(main=%r, formats=%r)" % (self.main, self.formats())


class Execution:
    """A cell's end: `results` (Result, in order), `result` (the main one,
    or None), `stdout`, `stderr`, `error` ({"name","value","traceback"} or
    None), `execution_count`, `duration_ms`, `timed_out`, `restarted` (its
    context was restarted: the cell did not stop after its interrupt)."""

    def __init__(self, end, results, out, err, error):
        self.info = end
        self.results = results
        self.result = next((r for r in results if r.main), None)
        self.stdout = out
        self.stderr = err
        self.error = error
        self.execution_count = end.get("execution_count")
        self.duration_ms = end.get("duration_ms")
        self.timed_out = bool(end.get("timed_out"))
        self.restarted = bool(end.get("restarted"))

    def __repr__(self):
        return "Execution(result=%r, stdout=%r, error=%r)" % (self.result, self.stdout[:80],
                                                               self.error and self.error.get("name"))


class Context:
    """One context (`info` as the API shows it). `run(code)` runs a cell."""

    def __init__(self, contexts, info):
        self.contexts = contexts
        self.info = info
        self.id = info["id"]
        self.language = info.get("language")

    def run(self, code, timeout=None, on_stdout=None, on_stderr=None, on_result=None):
        return self.contexts.run(self.id, code, timeout, on_stdout, on_stderr, on_result)

    def interrupt(self):
        return self.contexts.interrupt(self.id)

    def restart(self):
        self.info = self.contexts.restart(self.id).info
        return self

    def delete(self):
        self.contexts.delete(self.id)

    def __repr__(self):
        return "Context(%r, %r, %r)" % (self.id, self.language, self.info.get("state"))


class Contexts:
    """A sandbox's code contexts: POST/GET .../contexts, GET/DELETE
    .../contexts/{ctx}, POST .../run, .../interrupt, .../restart. A context
    is named by its id, or by a language (its default context, made by its
    first run)."""

    def __init__(self, sb):
        self.sb = sb
        self.client = sb.client

    def _path(self, ctx=None, what=""):
        p = self.sb.base + "/contexts"
        if ctx is not None:
            p += "/" + urllib.parse.quote(ctx if isinstance(ctx, str) else ctx.id, safe="")
        return p + what

    def create(self, language="python", cwd=None, env=None):
        body = {"language": language}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = env
        return Context(self, self.client.call("POST", self._path(), json_body=body, timeout=None))

    def list(self):
        return [Context(self, c) for c in self.client.call("GET", self._path())["contexts"]]

    def get(self, ctx):
        return Context(self, self.client.call("GET", self._path(ctx)))

    def delete(self, ctx):
        self.client.call("DELETE", self._path(ctx), ok=(204,))

    def restart(self, ctx):
        return Context(self, self.client.call("POST", self._path(ctx, "/restart"), timeout=None))

    def interrupt(self, ctx):
        return self.client.call("POST", self._path(ctx, "/interrupt"))["interrupted"]

    def run(self, ctx, code, timeout=None, on_stdout=None, on_stderr=None, on_result=None):
        """Run a cell, its events read as they come. Raises ContextDied when
        the interpreter ends during it (restart the context); closing the
        connection early (an exception in a callback) interrupts the cell."""
        body = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        results, out, err, error = [], [], [], None
        events = self.client.events("POST", self._path(ctx, "/run"), json_body=body)
        try:
            for ev in events:
                kind = ev.get("event")
                if kind in ("stdout", "stderr"):
                    (out if kind == "stdout" else err).append(ev["text"])
                    cb = on_stdout if kind == "stdout" else on_stderr
                    if cb is not None:
                        cb(ev["text"])
                elif kind == "result":
                    r = Result(ev.get("main"), ev.get("data") or {})
                    results.append(r)
                    if on_result is not None:
                        on_result(r)
                elif kind == "error":
                    error = {k: ev.get(k) for k in ("name", "value", "traceback")}
                elif kind == "end":
                    if isinstance(ev.get("error"), dict) and "code" in ev["error"]:
                        raise error_from(409 if ev["error"]["code"] == "context_died" else 502, ev)
                    return Execution(ev, results, "".join(out), "".join(err), error)
            raise ProtocolError("the cell's stream ended without its end event")
        finally:
            events.close()

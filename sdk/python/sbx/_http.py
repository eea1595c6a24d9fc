"""The HTTP client under the SDK: one connection per call (http.client,
HTTP or HTTPS: the certificate verified against the system's CAs or a
given CA file, and its name against the URL's host), the Bearer token on
every request, JSON in and out, error
answers raised as the typed exceptions of errors.py, and streamed answers
(NDJSON lines, raw bytes) handed out as they come, never read whole.
Knows the API's wire shapes, not its meaning: that is sandbox.py's."""
import http.client
import json
import ssl
import urllib.parse

from . import config
from .errors import ProtocolError, error_from

CHUNK = 256 * 1024
MAX_LINE = 16 * 1024 * 1024  # one NDJSON event (4 MiB MCP lines, base64'd output frames)


class Client:
    def __init__(self, url=None, token=None, timeout=60.0, ca_file=None):
        """ca_file: a PEM file of the CA that signed an https:// API's
        certificate (a cluster's own; default $SBX_CA_FILE, the config
        file's "ca_file", else the system's CAs)."""
        self.url, self.token = config.resolve(url, token)
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("sbx URL %r: want http://HOST[:PORT] or https://..." % self.url)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        self.ca_file = config.resolve_ca_file(ca_file)
        self._ssl = None
        if self.scheme == "https":
            self.ssl_context()  # a CA file that cannot be read fails here, not mid-call

    def ssl_context(self):
        """The TLS context of an https:// API (also the WebSocket's): the
        server's certificate verified and its name checked, always."""
        if self._ssl is None:
            try:
                self._ssl = ssl.create_default_context(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise ValueError("sbx CA file %r: %s" % (self.ca_file, e)) from None
        return self._ssl

    def connection(self, timeout=None):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.ssl_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, extra=None):
        h = {}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(extra or {})
        return h

    def target(self, path, query=None):
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return self.prefix + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def open(self, method, path, query=None, json_body=None, body=None, headers=None,
             timeout=-1, ok=(200,)):
        """Send a request and return (conn, resp) with the answer's body
        unread; an answer whose status is not in `ok` is raised. The caller
        closes conn (closing it cancels what the request started: an exec,
        a watch, an output stream)."""
        h = self.headers(headers)
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        conn = self.connection(self.timeout if timeout == -1 else timeout)
        try:
            try:
                conn.request(method, self.target(path, query), body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError):
                # Refused before the body was all sent (a policy, a quota):
                # the answer is waiting; read it rather than the send error.
                if body is None or isinstance(body, (bytes, bytearray)):
                    raise
            resp = conn.getresponse()
            if resp.status not in ok:
                raise error_from(resp.status, _parse(resp, resp.read(1 << 20)))
        except BaseException:
            conn.close()
            raise
        return conn, resp

    def call(self, method, path, query=None, json_body=None, body=None, headers=None,
             timeout=-1, ok=(200,)):
        """A request whose answer is read whole: parsed JSON, None for an
        empty body, raw bytes otherwise."""
        conn, resp = self.open(method, path, query, json_body, body, headers, timeout, ok)
        try:
            return _parse(resp, resp.read())
        finally:
            conn.close()

    def events(self, method, path, query=None, json_body=None, timeout=None, ok=(200,)):
        """An NDJSON stream, one dict per line as it comes; the generator's
        close (or garbage collection) closes the connection."""
        conn, resp = self.open(method, path, query, json_body,
                               headers={"Accept": "application/x-ndjson"}, timeout=timeout, ok=ok)
        try:
            while True:
                line = resp.readline(MAX_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_LINE:
                    raise ProtocolError("an event line over %d bytes" % MAX_LINE)
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        raise ProtocolError("not JSON in the event stream: %r" % line[:100]) from None
        finally:
            conn.close()


def _parse(resp, data):
    ctype = resp.getheader("Content-Type", "")
    if ctype.startswith("application/json") and data:
        try:
            return json.loads(data)
        except ValueError:
            return data
    if not data:
        return None
    return data

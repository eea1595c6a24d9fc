"""A small, bounded WebSocket client (RFC 6455) for the terminal route:
the opening handshake with the Bearer token (Sec-WebSocket-Accept checked),
masked frames out, fragmented messages reassembled in, ping answered with
pong, the close handshake, and a bound on every message (1 MiB by
default: a larger one is a protocol error, close 1009). Stdlib only, so the
CLI needs nothing beyond Python; no extensions, no subprotocols. Blocking
use (`recv`) or non-blocking-ish use from a select loop (`fileno` +
`read_available`)."""
import base64
import hashlib
import os
import socket
import struct

from .errors import ProtocolError, error_from

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
MAX_HEAD = 64 * 1024


class Closed(Exception):
    """The WebSocket is closed: `code` and `reason` of the close frame (or
    1006 when the connection ended without one)."""

    def __init__(self, code, reason=""):
        self.code = code
        self.reason = reason
        super().__init__("websocket closed: %d %s" % (code, reason))


class WebSocket:
    def __init__(self, sock, max_message=1 << 20):
        self.sock = sock
        self.max_message = max_message
        self.buf = bytearray()
        self.parts = []
        self.parts_len = 0
        self.part_op = None
        self.closed = None  # the Closed once the close handshake happened
        self._pending = []
        # A protocol error found after whole messages of the same read: held
        # until those messages are handed out, so none is lost to it.
        self._error = None

    @classmethod
    def connect(cls, client, path, timeout=30, max_message=1 << 20):
        """Open `path` of the API (a sbx._http.Client) as a WebSocket."""
        raw = socket.create_connection((client.host, client.port or
                                        (443 if client.scheme == "https" else 80)), timeout)
        try:
            if client.scheme == "https":
                raw = client.ssl_context().wrap_socket(raw, server_hostname=client.host)
            key = base64.b64encode(os.urandom(16))
            host = client.host if client.port is None else "%s:%d" % (client.host, client.port)
            head = ["GET %s HTTP/1.1" % client.target(path), "Host: " + host,
                    "Connection: Upgrade", "Upgrade: websocket",
                    "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: " + key.decode()]
            head += ["%s: %s" % kv for kv in client.headers().items()]
            raw.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            data = bytearray()
            while b"\r\n\r\n" not in data:
                if len(data) > MAX_HEAD:
                    raise ProtocolError("the WebSocket answer's head is over 64 KiB")
                piece = raw.recv(4096)
                if not piece:
                    raise ProtocolError("the connection closed during the WebSocket handshake")
                data += piece
            end = data.index(b"\r\n\r\n") + 4
            lines = bytes(data[:end]).decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            hdrs = {}
            for ln in lines[1:]:
                if ":" in ln:
                    k, v = ln.split(":", 1)
                    hdrs[k.strip().lower()] = v.strip()
            if status != 101:
                body = bytes(data[end:])
                n = int(hdrs.get("content-length", "0") or 0)
                while len(body) < min(n, 1 << 20):
                    piece = raw.recv(65536)
                    if not piece:
                        break
                    body += piece
                import json
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = body
                raise error_from(status, parsed)
            want = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
            if hdrs.get("sec-websocket-accept") != want:
                raise ProtocolError("bad Sec-WebSocket-Accept in the upgrade answer")
            ws = cls(raw, max_message)
            ws.buf += data[end:]
            raw.settimeout(None)
            return ws
        except BaseException:
            raw.close()
            raise

    def fileno(self):
        return self.sock.fileno()

    # ---- out ----
    def _send_frame(self, op, payload):
        payload = bytes(payload)
        n = len(payload)
        head = bytearray([0x80 | op])
        if n < 126:
            head.append(0x80 | n)
        elif n < 65536:
            head.append(0x80 | 126)
            head += struct.pack("!H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack("!Q", n)
        mask = os.urandom(4)
        head += mask
        # XOR with the mask repeated: one big-integer operation, not a loop.
        m = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big") \
            if n else b""
        self.sock.sendall(bytes(head) + masked)

    def send_binary(self, data):
        self._send_frame(OP_BIN, data)

    def send_text(self, text):
        self._send_frame(OP_TEXT, text.encode())

    def close(self, code=1000, reason=""):
        """Send a close frame (once) and shut the socket."""
        if self.closed is None:
            try:
                self._send_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode()[:120])
            except OSError:
                pass
            self.closed = Closed(code, reason)
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- in ----
    def read_available(self):
        """One recv() from the socket (call when select says it is
        readable); returns the whole messages it completed as a list of
        ("text", str) / ("binary", bytes). Raises Closed at the end."""
        if self._error is not None:
            raise self._error
        if self.closed is not None:
            raise self.closed
        piece = self.sock.recv(65536)
        if not piece:
            if self.closed is None:
                self.closed = Closed(1006, "connection ended without a close frame")
            raise self.closed
        self.buf += piece
        return self._parse()

    def recv(self):
        """The next whole message, blocking: ("text", str) or
        ("binary", bytes); raises Closed at the end."""
        while True:
            if self._pending:
                return self._pending.pop(0)
            if self._error is not None:
                raise self._error
            msgs = self._parse() if self.closed is None else []
            if not msgs:
                msgs = self.read_available()
            if msgs:
                self._pending = msgs[1:]
                return msgs[0]

    def _parse(self):
        """The whole messages in the buffer. A protocol error after some of
        them is kept for the next call, which raises it: what was already
        received is delivered first."""
        out = []
        try:
            self._parse_into(out)
        except ProtocolError as e:
            if not out:
                raise
            self._error = e
        return out

    def _parse_into(self, out):
        while True:
            b = self.buf
            if len(b) < 2:
                return out
            fin, op, masked, n = b[0] & 0x80, b[0] & 0x0F, b[1] & 0x80, b[1] & 0x7F
            if b[0] & 0x70:
                self._fail(1002, "reserved bits set")
            if masked:
                self._fail(1002, "a masked frame from the server")
            off = 2
            if n == 126:
                if len(b) < 4:
                    return out
                n, off = struct.unpack("!H", b[2:4])[0], 4
            elif n == 127:
                if len(b) < 10:
                    return out
                n, off = struct.unpack("!Q", b[2:10])[0], 10
            if n > self.max_message:
                self._fail(1009, "a frame of %d bytes" % n)
            if len(b) < off + n:
                return out
            payload = bytes(b[off:off + n])
            del b[:off + n]
            if op >= 8:  # control frames: whole, at most 125 bytes
                if not fin or n > 125:
                    self._fail(1002, "a fragmented or long control frame")
                if op == OP_PING:
                    self._send_frame(OP_PONG, payload)
                elif op == OP_CLOSE:
                    code = struct.unpack("!H", payload[:2])[0] if n >= 2 else 1005
                    reason = payload[2:].decode("utf-8", "replace")
                    if self.closed is None:
                        try:
                            self._send_frame(OP_CLOSE, payload[:2])
                        except OSError:
                            pass
                    self.closed = Closed(code, reason)
                    if out:
                        return out
                    raise self.closed
                elif op != OP_PONG:
                    self._fail(1002, "unknown opcode %d" % op)
                continue
            if op == OP_CONT:
                if self.part_op is None:
                    self._fail(1002, "a continuation with nothing to continue")
            elif op in (OP_TEXT, OP_BIN):
                if self.part_op is not None:
                    self._fail(1002, "a new message inside a fragmented one")
                self.part_op = op
            else:
                self._fail(1002, "unknown opcode %d" % op)
            self.parts.append(payload)
            self.parts_len += n
            if self.parts_len > self.max_message:
                self._fail(1009, "a message over %d bytes" % self.max_message)
            if fin:
                data = b"".join(self.parts)
                kind = self.part_op
                self.parts, self.parts_len, self.part_op = [], 0, None
                if kind == OP_TEXT:
                    try:
                        out.append(("text", data.decode("utf-8")))
                    except UnicodeDecodeError:
                        self._fail(1007, "a text message that is not UTF-8")
                else:
                    out.append(("binary", data))

    def _fail(self, code, why):
        self.close(code, why[:100])
        raise ProtocolError("websocket: " + why)

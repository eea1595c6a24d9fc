"""The agent's protocol (protocol/PROTOCOL.md) from the test's side, for
the k8s tests that talk to an agent's socket on the node directly: frames
with Debian's python3-msgpack (an independent decoder), the hello both ways
and one request answered by its `end` (or `err`). Nothing beyond that: the
supervisor is the agent's real client. A test harness, never part of the
product.
"""
import socket
import struct

import msgpack

HELLO = {"t": "hello", "v": 1, "max_frame": 1 << 20, "max_streams": 16, "window": 1 << 18,
         "caps": [], "agent": "sbx-k8s-test"}


class Conn:
    def __init__(self, path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.next_id = 1
        self.send(HELLO)
        self.hello = self.recv()
        if self.hello.get("t") != "hello":
            raise AssertionError("first frame not a hello: %r" % (self.hello,))

    def send(self, frame):
        b = msgpack.packb(frame, use_bin_type=True)
        self.s.sendall(struct.pack(">I", len(b)) + b)

    def recv(self):
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise EOFError("the agent closed the connection")
            self.buf += chunk
        n = struct.unpack(">I", self.buf[:4])[0]
        frame = msgpack.unpackb(self.buf[4:4 + n], raw=False)
        self.buf = self.buf[4 + n:]
        return frame

    def call(self, op, args=None):
        """The `end` frame's result of one request (AssertionError on `err`)."""
        sid = self.next_id
        self.next_id += 2
        req = {"t": "req", "id": sid, "op": op}
        if args is not None:
            req["a"] = args
        self.send(req)
        while True:
            f = self.recv()
            if f.get("id") != sid:
                continue
            if f["t"] == "end":
                return f.get("r") or {}
            if f["t"] == "err":
                raise AssertionError("%s: err %s %s" % (op, f.get("code"), f.get("msg")))

    def close(self):
        self.s.close()

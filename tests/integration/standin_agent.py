"""What the tests' stand-in agents share (test_agent_distrust.py,
tests/adversarial/test_adv_guest.py): a program run in place of
sandbox-agent (--agent) that speaks the protocol (PROTOCOL.md) in a few
lines of Python with Debian's python3-msgpack, as the "host" image has it.
A stand-in is PRELUDE (pack, frames), its own serve(s) and LISTEN (the
socket the supervisor named, one connection at a time); launcher() makes
the script the supervisor runs."""

PRELUDE = r'''
import msgpack, socket, struct, sys

def pack(d):
    b = msgpack.packb(d, use_bin_type=True)
    return struct.pack(">I", len(b)) + b

def frames(s):
    buf = b""
    while True:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            chunk = s.recv(1 << 16)
            if not chunk:
                return
            buf += chunk
        n = struct.unpack(">I", buf[:4])[0]
        yield msgpack.unpackb(buf[4:4 + n], raw=False)
        buf = buf[4 + n:]
'''

LISTEN = r'''
path = sys.argv[sys.argv.index("--listen") + 1].split(":", 1)[1]
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(path)
ls.listen(8)
while True:
    c, _ = ls.accept()
    try:
        serve(c)
    except OSError:
        pass
    c.close()
'''


def launcher(program, real=None):
    """The --agent script: python3 running program; first the real agent
    at real (a path inside the image) where the image has one."""
    first = 'if [ -x %s ]; then exec %s "$@"; fi\n' % (real, real) if real else ""
    return ("#!/bin/sh\n# sbx test: a stand-in agent\n%sexec /usr/bin/python3 - \"$@\" <<'STANDIN_EOF'\n"
            "%s\nSTANDIN_EOF\n" % (first, program))

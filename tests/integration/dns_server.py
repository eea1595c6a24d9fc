"""A small authoritative DNS server for the network tests' "internet".

Answers A and AAAA queries over UDP for the names of a JSON table
({"name": ["198.18.0.10", "2001:db8::10"], ...}; "*.suffix" entries match
every name below suffix), NXDOMAIN for anything else, and appends every
question it gets ("<type> <name>") to a log file, so a test can tell that a
name never left the node. Stdlib only; run inside the test's namespace:

    python3 dns_server.py ADDR PORT TABLE.json LOG [TTL]
"""
import ipaddress
import json
import socket
import struct
import sys


def parse_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels), off
        if n & 0xC0:
            raise ValueError("compressed question name")
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def lookup(table, name):
    name = name.lower().rstrip(".")
    if name in table:
        return table[name]
    parts = name.split(".")
    for i in range(1, len(parts)):
        key = "*." + ".".join(parts[i:])
        if key in table:
            return table[key]
    return None


def answer(msg, table, ttl, log):
    ident, flags, qd, _, _, _ = struct.unpack("!HHHHHH", msg[:12])
    name, off = parse_name(msg, 12)
    qtype, qclass = struct.unpack("!HH", msg[off:off + 4])
    question = msg[12:off + 4]
    with open(log, "a") as f:
        f.write("%d %s\n" % (qtype, name.lower()))
    addrs = lookup(table, name)
    rd = flags & 0x0100
    if addrs is None:
        return struct.pack("!HHHHHH", ident, 0x8400 | rd | 3, 1, 0, 0, 0) + question
    rrs = []
    for a in addrs:
        ip = ipaddress.ip_address(a)
        if (qtype == 1 and ip.version == 4) or (qtype == 28 and ip.version == 6):
            rrs.append(encode_name(name) + struct.pack("!HHIH", qtype, 1, ttl, len(ip.packed))
                       + ip.packed)
    head = struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, len(rrs), 0, 0)
    return head + question + b"".join(rrs)


def main():
    addr, port, table_path, log = sys.argv[1:5]
    ttl = int(sys.argv[5]) if len(sys.argv) > 5 else 300
    with open(table_path) as f:
        table = {k.lower(): v for k, v in json.load(f).items()}
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, int(port)))
    print("ready", flush=True)
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            s.sendto(answer(msg, table, ttl, log), peer)
        except (ValueError, IndexError, struct.error):
            pass


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets added after the HTTP edge's
(corpus_dns, ...); run with /usr/bin/python3, the output is committed."""
import pathlib
import struct

here = pathlib.Path(__file__).resolve().parent


def write(folder, seeds):
    d = here / folder
    d.mkdir(exist_ok=True)
    for name, data in seeds.items():
        (d / name).write_bytes(data)


# ---- corpus_dns: flags, the query's length (2 bytes), query, upstream answer
F_STRANGER, F_ADMIT_FAIL, F_TWICE, F_SILENT, F_REPEAT, F_SPLICE = 1, 2, 4, 8, 16, 32


def qname(name):
    out = b""
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def query(name, qtype=1, qid=0x1234, qd=1):
    return struct.pack(">HHHHHH", qid, 0x0100, qd, 0, 0, 0) + qname(name) + struct.pack(">HH", qtype, 1)


def rr(name_ptr, rtype, ttl, rdata):
    return struct.pack(">HHHIH", name_ptr, rtype, 1, ttl, len(rdata)) + rdata


def answer_header(an, rcode=0, qd=1):
    return struct.pack(">HHHHHH", 0, 0x8180 | rcode, qd, an, 0, 0)


def dns_seed(flags, q, a):
    return bytes([flags]) + len(q).to_bytes(2, "big") + q + a


a_rec = rr(0xC00C, 1, 60, bytes([93, 184, 216, 34]))
aaaa_rec = rr(0xC00C, 28, 3600, bytes(15) + b"\1")
cname = rr(0xC00C, 5, 60, qname("b.example.com")) + rr(0xC02B, 1, 1, bytes([10, 1, 2, 3]))
write("corpus_dns", {
    "a_allowed": dns_seed(F_SPLICE, query("a.example.com"), answer_header(1) + a_rec),
    "aaaa_allowed": dns_seed(F_SPLICE, query("A.Example.COM.", 28), answer_header(1) + aaaa_rec),
    "a_whole": dns_seed(0, query("a.example.com"), answer_header(1)[:12] + qname("a.example.com")
                        + struct.pack(">HH", 1, 1) + a_rec),
    "cname_chain": dns_seed(F_SPLICE, query("a.example.com"), answer_header(2) + cname),
    "wrong_family": dns_seed(F_SPLICE, query("a.example.com", 28), answer_header(1) + a_rec),
    "nxdomain_up": dns_seed(F_SPLICE, query("x.example.com"), answer_header(0, 3)),
    "nodata": dns_seed(F_SPLICE, query("x.example.com"), answer_header(0)),
    "admit_fails": dns_seed(F_SPLICE | F_ADMIT_FAIL, query("a.example.com"), answer_header(1) + a_rec),
    "twice": dns_seed(F_SPLICE | F_TWICE, query("a.example.com"), answer_header(1) + a_rec),
    "repeat": dns_seed(F_SPLICE | F_REPEAT, query("a.example.com"), answer_header(1) + a_rec),
    "silent": dns_seed(F_SILENT, query("a.example.com"), b""),
    "denied": dns_seed(0, query("bad.example.com"), answer_header(1) + a_rec),
    "not_in_policy": dns_seed(0, query("evil.org"), answer_header(1) + a_rec),
    "stranger": dns_seed(F_STRANGER, query("a.example.com"), answer_header(1) + a_rec),
    "txt_type": dns_seed(0, query("a.example.com", 16), b""),
    "any_type": dns_seed(0, query("api.test", 255), b""),
    "two_questions": dns_seed(0, query("a.example.com", qd=2) + qname("b.example.com") + b"\0\1\0\1", b""),
    "compressed_q": dns_seed(0, struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\1a\xc0\x0c\0\1\0\1", b""),
    "bad_label": dns_seed(0, query("a_b!.example.com"), b""),
    "long_name": dns_seed(0, query(".".join(["x" * 63] * 4) + ".example.com"), b""),
    "ttl_big": dns_seed(F_SPLICE, query("api.test"), answer_header(1) + rr(0xC00C, 1, 0xFFFFFFFF, bytes(4))),
    "many_a": dns_seed(F_SPLICE, query("a.example.com"),
                       answer_header(40) + b"".join(rr(0xC00C, 1, 30, bytes([1, 2, 3, i])) for i in range(40))),
    # libevent 2.1 crashed on a query shorter than a header (sup_dns filters them)
    "short_1": dns_seed(0, b"\1", b""),
    "short_11": dns_seed(F_TWICE, bytes(11), b""),
    "header_only": dns_seed(0, bytes(12), b""),
    "truncated_up": dns_seed(F_SPLICE, query("a.example.com"), answer_header(1) + a_rec[:7]),
})

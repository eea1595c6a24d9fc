#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets added after the HTTP edge's
(corpus_dns, ...); run with /usr/bin/python3, the output is committed."""
import pathlib
import json
import struct

import msgpack

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


# ---- corpus_path: flags (1 decode, 2 write, 4 tenant "ops", >> 3 the quote's room), path
F_DECODE, F_WRITE, F_OPS = 1, 2, 4


def path_seed(flags, p):
    return bytes([flags]) + (p.encode() if isinstance(p, str) else p)


write("corpus_path", {
    "plain": path_seed(0xF8, "/workspace/src/main.c"),
    "dots": path_seed(F_WRITE, "/workspace/./a/../b/./"),
    "escape": path_seed(F_WRITE, "/workspace/../../etc/passwd"),
    "sibling": path_seed(0, "/workspace2/x"),
    "ro_write": path_seed(F_WRITE, "/workspace/ref/x"),
    "rw_in_ro": path_seed(F_WRITE, "/workspace/ref/scratch/y"),
    "root_ops": path_seed(F_OPS, "/"),
    "ops_log": path_seed(F_OPS | F_WRITE, "//var//log/../log/x"),
    "relative": path_seed(0, "workspace/x"),
    "nul": path_seed(0, b"/workspace/a\0b"),
    "url_nul": path_seed(F_DECODE, "/workspace/a%00b"),
    "url_dots": path_seed(F_DECODE | F_WRITE, "%2Fworkspace%2F%2E%2E%2Ftmp%2Fx+y"),
    "url_bad_pct": path_seed(F_DECODE, "/tmp/%zz%4"),
    "long_component": path_seed(0, "/tmp/" + "n" * 256),
    "long_path": path_seed(0, "/tmp" + "/abc" * 1100),
    "control": path_seed(0x50, b"/tmp/\x1b[31m\n\r\xff\"q"),
    "only_slashes": path_seed(0, "////"),
    "dotdot_root": path_seed(F_OPS, "/../.."),
})


# ---- corpus_agent: a selector byte (% 8: 0 exec, 1 stat, 2 listing of
# /workspace, 3 of /, 4 process (16 end of output, 32 full, 64 pid 42),
# 5 mcp (16 opened event, else list), 6 reset), then the result map
def mp(o):
    return msgpack.packb(o, use_bin_type=True)


stat = {"type": "file", "size": 5, "mode": 0o644, "mtime_ns": 1700000000 * 10**9, "uid": 1000,
        "gid": 1000, "nlink": 1, "ino": 77}
proc_run = {"pid": 42, "started_ms": 1000, "state": "running", "tag": "job"}
proc_done = dict(proc_run, state="exited", ended_ms=2000, duration_us=5000, timed_out=False,
                 exit_code=0, signal=None, oom_killed=False)
full = dict(proc_done, pty=False, stdin=True, output={"start": 0, "end": 10, "buffer": 65536},
            argv=["sh", "-c", "echo hi"])
mcp_status = {"name": "fs", "state": "ready", "max_line": 1 << 20, "spare_pid": 9, "sessions": 1,
              "opened": 2, "started": 3, "crashes": 0, "bad_output": 0, "msgs_in": 5, "msgs_out": 6,
              "last_exit": {"exit_code": 1, "signal": None}, "stderr": "boom\n"}
write("corpus_agent", {
    "exec_exit": b"\0" + mp({"exit_code": 0, "timed_out": False, "duration_us": 1234,
                            "rusage": {"max_rss_kb": 1, "user_ms": 2, "sys_ms": 3}}),
    "exec_oom": b"\0" + mp({"signal": 9, "oom_killed": True}),
    "exec_both": b"\0" + mp({"exit_code": 1, "signal": 9}),
    "exec_neg": b"\0" + mp({"exit_code": -1}),
    "stat": b"\1" + mp(stat),
    "stat_link": b"\1" + mp(dict(stat, type="symlink", target=b"\xff../etc")),
    "stat_mode": b"\1" + mp(dict(stat, mode=0o170777)),
    "list": b"\2" + mp({"entries": [dict(stat, path="a/b", name="b"), dict(stat, path="c", name="c")],
                        "truncated": True}),
    "list_root": b"\3" + mp({"entries": [dict(stat, path="etc", name="etc")]}),
    "list_dotdot": b"\2" + mp({"entries": [dict(stat, path="../../etc/shadow", name="shadow")]}),
    "list_abs": b"\2" + mp({"entries": [dict(stat, path="/etc", name="etc")]}),
    "list_bytes": b"\2" + mp({"entries": [dict(stat, path=b"\xfe\xff", name=b"\xfe\xff")]}),
    "proc_run": b"\4" + mp(proc_run),
    "proc_full": bytes([4 | 32]) + mp(full),
    "proc_end": bytes([4 | 16]) + mp(dict(proc_done, next_offset=1000)),
    "proc_other_pid": bytes([4 | 64]) + mp(dict(proc_run, pid=7)),
    "mcp_opened": bytes([5 | 16]) + mp({"pid": 10, "spare": True}),
    "mcp_list": b"\5" + mp({"servers": [mcp_status, dict(mcp_status, name="x" * 80)]}),
    "reset": b"\6" + mp({"killed": 1, "removed": 2, "ipc_removed": 0, "duration_us": 9}),
    "not_a_map": b"\0" + mp([1, 2, 3]),
    "deep": b"\1" + b"\x91" * 200 + b"\xc0",
    "huge_array": b"\2" + b"\x81\xa7entries\xdd\xff\xff\xff\xff",
})


# ---- corpus_mcp: records of type (0 client POST, 1 in a session, 2 server
# output, 3 Last-Event-ID, 4 headers), two bytes of length, the bytes
def rec(t, b):
    b = b.encode() if isinstance(b, str) else b
    return bytes([t]) + len(b).to_bytes(2, "big") + b


init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}'
call = '{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}'
ans_init = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}\n'
ans_call = '{"jsonrpc":"2.0","id":"a","result":{"content":[]}}\n'
write("corpus_mcp", {
    "session": rec(0, init) + rec(2, ans_init) + rec(1, call) + rec(2, '{"jsonrpc":"2.0","method":"notifications/progress"}\n')
    + rec(2, ans_call) + rec(3, "1-2") + rec(3, "0-1"),
    "split_lines": rec(1, call) + rec(2, ans_call[:10]) + rec(2, ans_call[10:] + "\n \r\n" + ans_call),
    "cancel": rec(1, call) + rec(1, '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}')
    + rec(2, ans_call),
    "dup_id": rec(1, call) + rec(1, call) + rec(2, ans_call + ans_call),
    "newline_in_string": rec(1, '{"jsonrpc":"2.0","id":2,"method":"x",\n"params":{"s":"a\\nb"}}'),
    "batch": rec(1, '[{"jsonrpc":"2.0","id":1,"method":"x"}]'),
    "null_id": rec(1, '{"jsonrpc":"2.0","id":null,"method":"x"}') + rec(2, '{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}\n'),
    "bad_json": rec(1, '{"jsonrpc":"2.0",') + rec(0, "\xff\xfe"),
    "long_line": rec(2, "x" * 3000 + "\n") + rec(2, ans_call),
    "server_request": rec(2, '{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}\n'),
    "big_id": rec(1, '{"jsonrpc":"2.0","id":"' + "i" * 200 + '","method":"x"}'),
    "int_ids": rec(1, '{"jsonrpc":"2.0","id":-9223372036854775808,"method":"x"}')
    + rec(2, '{"jsonrpc":"2.0","id":-9223372036854775808,"result":{}}\n'),
    "resume_bad": rec(3, "9999999999999999999-1") + rec(3, "-") + rec(3, "1-") + rec(3, "0-18446744073709551615"),
    "headers": rec(4, "https://APP.example") + rec(4, "text/event-stream, application/json")
    + rec(4, "2025-11-25") + rec(4, ""),
})


# ---- corpus_urlsign: a path as the port proxy's gate sees it
sig = "0123456789abcdef" * 4
write("corpus_urlsign", {
    "plain": ("/v1/signed/sbx-abc123/8080/1900000000/" + sig).encode(),
    "rest": ("/v1/signed/sbx-abc123/80/1900000000/" + sig + "/index.html?x=1").encode(),
    "zeros": ("/v1/signed/a/00080/0000000000000000001/" + sig).encode(),
    "expired": ("/v1/signed/a/1/1/" + sig).encode(),
    "port_0": ("/v1/signed/a/0/1900000000/" + sig).encode(),
    "port_big": ("/v1/signed/a/65536/1900000000/" + sig).encode(),
    "exp_big": ("/v1/signed/a/1/99999999999999999999/" + sig).encode(),
    "upper_sig": ("/v1/signed/a/1/1900000000/" + sig.upper()).encode(),
    "short_sig": ("/v1/signed/a/1/1900000000/" + sig[:63]).encode(),
    "long_id": ("/v1/signed/" + "a" * 41 + "/1/1900000000/" + sig).encode(),
    "bad_id": ("/v1/signed/A_b/1/1900000000/" + sig).encode(),
    "traversal": ("/v1/signed/a/1/1900000000/" + sig + "/../../v1/sandboxes").encode(),
})


# ---- corpus_img: a byte (% 5: 0 index.json, 1 index of platforms,
# 2 manifest, 3 docker save's manifest.json, 4 config), then the document
H = ["a" * 64, "b" * 64, "c" * 64, "d" * 64]
MT_M = "application/vnd.oci.image.manifest.v1+json"
MT_I = "application/vnd.oci.image.index.v1+json"


def desc(mt, h, size=100, **kw):
    return dict(mediaType=mt, digest="sha256:" + h, size=size, **kw)


def img(kind, doc):
    return bytes([kind]) + (doc if isinstance(doc, bytes) else json.dumps(doc).encode())


write("corpus_img", {
    "index": img(0, {"schemaVersion": 2, "manifests": [
        desc(MT_M, H[0], annotations={"org.opencontainers.image.ref.name": "busybox:latest"}),
        desc(MT_M, H[1], annotations={"org.opencontainers.image.ref.name": "../evil"})]}),
    "index_nested": img(0, {"schemaVersion": 2, "manifests": [desc(MT_I, H[2])]}),
    "platforms": img(1, {"schemaVersion": 2, "manifests": [
        desc(MT_M, H[0], platform={"os": "linux", "architecture": "arm64"}),
        desc(MT_M, H[1], platform={"os": "linux", "architecture": "amd64"})]}),
    "manifest": img(2, {"schemaVersion": 2, "mediaType": MT_M,
                        "config": desc("application/vnd.oci.image.config.v1+json", H[3]),
                        "layers": [desc("application/vnd.oci.image.layer.v1.tar+gzip", H[1]),
                                   desc("application/vnd.oci.image.layer.v1.tar+zstd", H[2], size=-5)]}),
    "manifest_docker": img(2, {"schemaVersion": 2,
                               "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                               "config": desc("application/vnd.docker.container.image.v1+json", H[0]),
                               "layers": [desc("application/vnd.docker.image.rootfs.diff.tar.gzip", "A" * 64)]}),
    "docker_save": img(3, [{"Config": "cfg.json", "RepoTags": ["app:1", "bad tag"],
                            "Layers": ["l1/layer.tar", "../../etc/passwd", "/abs"]}]),
    "config": img(4, {"rootfs": {"type": "layers", "diff_ids": ["sha256:" + H[0]]},
                      "config": {"Env": ["PATH=/bin", "=x", "NOEQ"], "WorkingDir": "rel",
                                 "User": "1000", "Entrypoint": ["/bin/sh"]}}),
    "config_ok": img(4, {"rootfs": {"type": "layers", "diff_ids": ["sha256:" + H[0], "sha256:" + H[1]]},
                         "config": {"Env": ["A=1"], "WorkingDir": "/w", "Entrypoint": None}}),
    "env_nul": img(4, b'{"rootfs":{"type":"layers","diff_ids":[]},"config":{"Env":["A=\\u0000b"]}}'),
    "deep": img(2, b"[" * 3000),
    "not_json": img(0, b"\xff\xfe{"),
})


# ---- corpus_snap: a snapshot's manifest as an object store holds it
snap = {"version": 1, "id": "snap-0123456789abcdef", "name": "before-upgrade", "tenant": "default",
        "source": "sbx-1", "image": "busybox", "digest": "", "isolation": "runc", "size": 4096,
        "sha256": "e" * 64, "created_at": 1764633600}
vol = {"name": "data", "mount": "/data", "read_only": False, "vol_size": 1 << 30, "size": 512,
       "sha256": "f" * 64}
write("corpus_snap", {
    "v1": json.dumps(snap).encode(),
    "v2": json.dumps(dict(snap, version=2, isolation="gvisor", volumes=[vol, dict(vol, name="ro", mount="/ro",
                                                                               read_only=True)])).encode(),
    "v2_empty": json.dumps(dict(snap, version=2, volumes=[])).encode(),
    "v1_with_volumes": json.dumps(dict(snap, volumes=[vol])).encode(),
    "other_id": json.dumps(dict(snap, id="snap-other")).encode(),
    "mount_dots": json.dumps(dict(snap, version=2, volumes=[dict(vol, mount="/data/../etc")])).encode(),
    "nested_mounts": json.dumps(dict(snap, version=2, volumes=[vol, dict(vol, name="b", mount="/data/x")])).encode(),
    "negative": json.dumps(dict(snap, size=-1, created_at=-5)).encode(),
    "nul_name": json.dumps(dict(snap, name="a\u0000b")).encode().replace(b"\\\\u", b"\\u"),
    "dup_key": b'{"version":1,"version":2}',
    "v3": json.dumps(dict(snap, version=3)).encode(),
})


# ---- corpus_osbx: a selector byte (% 4: 0 a stat as FileInfo, 1 a listing
# of /workspace, 2 of /, 3 of "/home/sandbox/a b"), then the result map
write("corpus_osbx", {
    "info": b"\0" + mp(stat),
    "info_dir": b"\0" + mp(dict(stat, type="dir", mode=0o40755 & 0o7777, uid=0, gid=0)),
    "info_mode": b"\0" + mp(dict(stat, mode=0o170777)),
    "info_missing": b"\0" + mp({"type": "file"}),
    "list": b"\1" + mp({"entries": [dict(stat, path="a/b", name="b"), dict(stat, path="c", name="c")]}),
    "list_root": b"\2" + mp({"entries": [dict(stat, path="etc", name="etc")]}),
    "list_space": b"\3" + mp({"entries": [dict(stat, path="x y", name="x y")]}),
    "list_dotdot": b"\1" + mp({"entries": [dict(stat, path="../../etc/shadow", name="shadow")]}),
    "list_inner_dotdot": b"\1" + mp({"entries": [dict(stat, path="a/../../etc", name="etc")]}),
    "list_dot": b"\1" + mp({"entries": [dict(stat, path="./a", name="a")]}),
    "list_slashes": b"\1" + mp({"entries": [dict(stat, path="a//b/", name="b")]}),
    "list_abs": b"\1" + mp({"entries": [dict(stat, path="/etc", name="etc")]}),
    "list_nul": b"\1" + mp({"entries": [dict(stat, path="a\0b", name="a")]}),
    "list_bytes": b"\1" + mp({"entries": [dict(stat, path=b"\xfe\xff", name=b"\xfe\xff")]}),
    "list_long": b"\1" + mp({"entries": [dict(stat, path="a/" * 2100, name="a")]}),
    "not_a_map": b"\1" + mp([1, 2, 3]),
    "huge_array": b"\1" + b"\x81\xa7entries\xdd\xff\xff\xff\xff",
})


# ---- corpus_multipart: a flags byte (1 pause at a part, 2 at its end, the
# rest the pieces' first size), the request's Content-Type, "\n", the body
def mpart(name, data, filename=None, ctype=None, boundary="XyZ", extra=""):
    cd = 'form-data; name="%s"' % name
    if filename is not None:
        cd += '; filename="%s"' % filename
    h = "--%s\r\nContent-Disposition: %s\r\n" % (boundary, cd)
    if ctype:
        h += "Content-Type: %s\r\n" % ctype
    return (h + extra + "\r\n").encode() + data + b"\r\n"


CTX = b"multipart/form-data; boundary=XyZ\n"
UNDICI = "----formdata-undici-027929226137"
e2b_files = (mpart("file", b"hello", "/home/user/a.txt", "application/octet-stream", UNDICI)
             + mpart("file", b"\0\1\r\n\xff", "/tmp/dir/b.bin", "application/octet-stream", UNDICI)
             + ("--%s--\r\n" % UNDICI).encode())
write("corpus_multipart", {
    "e2b_two": b"\x00multipart/form-data; boundary=" + UNDICI.encode() + b"\n" + e2b_files,
    "e2b_two_paused": b"\x1bmultipart/form-data; boundary=" + UNDICI.encode() + b"\n" + e2b_files,
    "osbx": b"\x02" + CTX + mpart("metadata", b'{"path":"/workspace/x","mode":644}')
            + mpart("file", b"bytes", "x") + b"--XyZ--",
    "quoted": b"\x08multipart/form-data; charset=utf-8; boundary=\"a b:c\"\n"
              + mpart("f", b"d", boundary="a b:c") + b"--a b:c--",
    "delim_like": b"\x11" + CTX + mpart("a", b"\r\n-x\r\n--x\r\n--Xy\r\n--XyZa\r\n--XyZ-a\r\n--XyZ-\r\r\n--XyZ\n")
                  + b"--XyZ--",
    "crs": b"\x21" + CTX + mpart("a", b"\r\r\r\n\n\r") + b"--XyZ--",
    "preamble": b"\x03" + CTX + b"preamble\r\n" + mpart("a", b"d") + b"--XyZ--\r\nepilogue",
    "padding": b"\x00multipart/form-data; boundary=XyZ\n--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\nd"
               b"\r\n--XyZ--",
    "filename_ext": b"\x01" + CTX + mpart("file", b"d", extra="X-Other: 1\r\n").replace(
        b'name="file"', b"name=file; filename*=UTF-8''%E2%82%AC%20x.txt; filename=\"fb\"") + b"--XyZ--",
    "escapes": b"\x00" + CTX + mpart("file", b"d", 'a \\"q\\" \\\\.txt') + b"--XyZ--",
    "empty": b"\x00" + CTX + b"--XyZ--",
    "many": b"\x05" + CTX + b"".join(mpart("p%d" % i, b"") for i in range(9)) + b"--XyZ--",
    # hostile: no headers, folded, bare LF, unterminated quote, junk after a
    # delimiter, a head over the bound, a boundary over 70, no end
    "no_headers": b"\x00" + CTX + b"--XyZ\r\n\r\nd\r\n--XyZ--",
    "folded": b"\x00" + CTX + b"--XyZ\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nd\r\n--XyZ--",
    "bare_lf": b"\x00" + CTX + b"--XyZ\r\nContent-Disposition: form-data; name=a\n\r\n\r\nd\r\n--XyZ--",
    "open_quote": b"\x00" + CTX + b"--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nd\r\n--XyZ--",
    "junk_after": b"\x00" + CTX + mpart("a", b"d") + b"--XyZ x\r\n",
    "long_head": b"\x00" + CTX + mpart("a", b"d", extra="X: " + "p" * 9000 + "\r\n") + b"--XyZ--",
    "long_boundary": b"\x00multipart/form-data; boundary=" + b"b" * 71 + b"\n--" + b"b" * 71 + b"--",
    "unended": b"\x00" + CTX + mpart("a", b"d" * 100),
    "not_multipart": b"\x00text/plain\nhello",
})


# ---- corpus_cdp: what a server on a sandbox's port 9222 answers to
# /json/version, /json/list (Chromium's shapes), and hostile ones
ver = {"Browser": "Chrome/156.0.8078.129", "Protocol-Version": "1.3",
       "User-Agent": "Mozilla/5.0", "V8-Version": "15.6", "WebKit-Version": "537.36",
       "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/browser/3f0c"}
page = {"description": "", "id": "P1", "title": "t", "type": "page", "url": "about:blank",
        "devtoolsFrontendUrl": "https://chrome-devtools-frontend.appspot.com/serve_rev/@x/inspector.html?ws=127.0.0.1:9222/devtools/page/P1",
        "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/page/P1"}
write("corpus_cdp", {
    "version": json.dumps(ver).encode(),
    "list": json.dumps([page, dict(page, id="P2", webSocketDebuggerUrl="ws://127.0.0.1:9222/devtools/page/P2")]).encode(),
    "list_empty": b"[]",
    "wss": json.dumps(dict(ver, webSocketDebuggerUrl="wss://x/devtools/browser/b?a=1")).encode(),
    "no_path": json.dumps(dict(ver, webSocketDebuggerUrl="ws://127.0.0.1:9222")).encode(),
    "not_ws": json.dumps(dict(ver, webSocketDebuggerUrl="http://127.0.0.1:9222/x")).encode(),
    "ws_number": json.dumps(dict(ver, webSocketDebuggerUrl=7)).encode(),
    "frontend_no_ws": json.dumps([dict(page, devtoolsFrontendUrl="/devtools/inspector.html")]).encode(),
    "frontend_no_path": json.dumps([dict(page, devtoolsFrontendUrl="/x?ws=host")]).encode(),
    "nul": b'{"webSocketDebuggerUrl":"ws://a\\u0000b/c"}',
    "long": json.dumps(dict(ver, webSocketDebuggerUrl="ws://h/" + "a" * 5000)).encode(),
    "nested": b"[" * 3000,
    "array_of_numbers": b"[1,2,3]",
    "string": b'"ws://x/y"',
    "garbage": b"HTTP/1.1 200 OK\r\n\r\n{}",
})

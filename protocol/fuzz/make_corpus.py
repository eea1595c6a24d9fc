#!/usr/bin/python3
"""Writes the fuzz seed corpus (protocol/fuzz/corpus): the golden frames,
whole conversations for the conn target, and hostile frames. Run with
/usr/bin/python3 (python3-msgpack); the output is committed."""
import pathlib
import shutil
import sys

import msgpack

here = pathlib.Path(__file__).resolve().parent
out = here / "corpus"
golden = here.parent / "testdata"


def frame(obj):
    body = msgpack.packb(obj, use_bin_type=True)
    return len(body).to_bytes(4, "big") + body


def raw(body):
    return len(body).to_bytes(4, "big") + body


hello = frame({"t": "hello", "v": 1, "max_frame": 65536, "max_streams": 8, "window": 4096,
               "caps": ["exec"], "agent": "seed"})
seeds = {
    # conversations a client sends a server
    "conv_exec_stdin": hello + frame({"t": "req", "id": 1, "op": "exec", "a": {"cmd": "cat", "stdin": True}})
    + frame({"t": "data", "id": 1, "ch": "stdin", "d": b"x" * 1000})
    + frame({"t": "data", "id": 1, "ch": "stdin", "d": b"", "eof": True})
    + frame({"t": "credit", "id": 1, "n": 2048}) + frame({"t": "ctl", "id": 1, "a": {"signal": 15}}),
    "conv_many_reqs": hello + b"".join(frame({"t": "req", "id": i, "op": "ping"}) for i in range(1, 14, 2)),
    "conv_cancel": hello + frame({"t": "req", "id": 5, "op": "exec", "a": {}})
    + frame({"t": "cancel", "id": 5}) + frame({"t": "data", "id": 5, "ch": "stdin", "d": b"late"}),
    "conv_over_credit": hello + frame({"t": "req", "id": 1, "op": "exec"})
    + frame({"t": "data", "id": 1, "ch": "stdin", "d": b"y" * 2000})
    + frame({"t": "data", "id": 1, "ch": "stdin", "d": b"y" * 2000}),
    "conv_conn_err": hello + frame({"t": "err", "id": 0, "code": "shutting_down", "msg": "bye"}),
    # conversations a server sends a client with streams 1, 3, 5 open
    "conv_answers": hello + frame({"t": "data", "id": 1, "ch": "stdout", "d": b"hi\n"})
    + frame({"t": "event", "id": 3, "a": {"type": "exit"}}) + frame({"t": "credit", "id": 1, "n": 100})
    + frame({"t": "end", "id": 1, "r": {"exit_code": 0, "signal": None}})
    + frame({"t": "err", "id": 3, "code": "not_found", "msg": "nope"})
    + frame({"t": "data", "id": 1, "ch": "stdout", "d": b"crossed"}),
    # hostile single frames
    "bad_huge_length": b"\x7f\xff\xff\xff" + b"\x80",
    "bad_empty_body": b"\x00\x00\x00\x00",
    "bad_array_count": raw(b"\xdd\xff\xff\xff\xff"),
    "bad_map_count": raw(b"\xdf\xff\xff\xff\xff\xa1t"),
    "bad_str_len": raw(b"\x81\xa1t\xdb\xff\xff\xff\xff"),
    "bad_reserved": raw(b"\x81\xa1t\xc1"),
    "bad_deep": raw(b"\x82\xa1t\xa6cancel\xa2id" + b"\x81\xa1k" * 40 + b"\x01"),
    "bad_not_map": raw(b"\x93\x01\x02\x03"),
    "bad_unknown_kind": frame({"t": "teleport", "id": 1}),
    "bad_dup_key": raw(b"\x83\xa1t\xa6cancel\xa2id\x01\xa2id\x03"),
    "bad_wrong_type": frame({"t": "credit", "id": "1", "n": -5}),
    "bad_trailing": raw(b"\x82\xa1t\xa6cancel\xa2id\x01\xc0"),
    "bad_truncated": frame({"t": "req", "id": 1, "op": "exec", "a": {"argv": ["ls", "-l"]}})[:-3],
    "bad_ext_float": frame({"t": "event", "id": 2, "a": {"x": msgpack.ExtType(5, b"abc"), "f": 1.5}}),
}


def main():
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    for f in sorted(golden.glob("*.bin")):
        (out / f"golden_{f.stem}").write_bytes(f.read_bytes())
    for name, data in seeds.items():
        (out / name).write_bytes(data)
    print(f"{len(list(out.iterdir()))} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

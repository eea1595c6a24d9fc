#!/usr/bin/python3
"""Golden frames through an independent msgpack implementation.

Decodes every protocol/testdata/*.bin with Debian's python3-msgpack and
re-encodes it; the bytes must match exactly. That holds only if the C
encoder writes the canonical forms PROTOCOL.md describes (smallest int, str,
bin, array and map headers; str for text, bin for bytes; float64).
Run with /usr/bin/python3: that is where python3-msgpack lives."""
import pathlib
import sys

import msgpack

KINDS = {"hello", "req", "data", "event", "credit", "ctl", "cancel", "end", "err"}


def check(path):
    raw = path.read_bytes()
    if len(raw) < 5:
        return "shorter than a frame"
    body_len = int.from_bytes(raw[:4], "big")
    if body_len != len(raw) - 4:
        return f"length header {body_len}, body {len(raw) - 4}"
    body = raw[4:]
    obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
    if not isinstance(obj, dict) or obj.get("t") not in KINDS:
        return f"not a frame map: {obj!r}"
    again = msgpack.packb(obj, use_bin_type=True)
    if again != body:
        return f"re-encoded differs:\n  file {body.hex()}\n  python {again.hex()}"
    return None


def main():
    files = sorted(pathlib.Path(sys.argv[1]).glob("*.bin"))
    if len(files) < 9:
        print(f"only {len(files)} golden frames in {sys.argv[1]}")
        return 1
    failed = 0
    for f in files:
        problem = check(f)
        print(f"{f.name}: {problem or 'ok'}")
        failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

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


# What the MCP and reset goldens must say, read by this independent decoder: the keys
# PROTOCOL.md's "MCP servers" names, with their values.
MCP = {
    "req_mcp_configure.bin": lambda o: o["op"] == "mcp.configure" and o["a"] == {
        "name": "files",
        "argv": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/workspace"],
        "env": {"NODE_OPTIONS": "--max-old-space-size=256"}, "cwd": "/workspace"},
    "end_mcp_list.bin": lambda o: [(s["name"], s["state"], s["spare_pid"], s["sessions"],
                                    s.get("last_exit"), s["stderr"]) for s in o["r"]["servers"]] == [
        ("files", "ready", 4242, 2, None, []),
        ("lint", "crashed", 0, 0, {"exit_code": 1, "signal": 0},
         ["Error: Cannot find module 'x'", "    at node:internal"])],
    "err_mcp_crashed.bin": lambda o: o["code"] == "crashed" and o["msg"].endswith("\nboom"),
    # reset (PROTOCOL.md "reset")
    "req_reset.bin": lambda o: o["op"] == "reset" and o["id"] == 13 and o["a"] == {
        "paths": ["/workspace", "/tmp", "/home/sandbox", "/dev/shm"], "timeout_ms": 3000},
    "end_reset.bin": lambda o: o["r"] == {"killed": 7, "removed": 70000, "ipc_removed": 1,
                                          "duration_us": 4321},
}


def check_mcp(path):
    want = MCP.get(path.name)
    if want is None:
        return None
    obj = msgpack.unpackb(path.read_bytes()[4:], raw=False)
    return None if want(obj) else f"unexpected content: {obj!r}"


def main():
    files = sorted(pathlib.Path(sys.argv[1]).glob("*.bin"))
    missing = [n for n in MCP if not (pathlib.Path(sys.argv[1]) / n).exists()]
    if missing:
        print(f"missing golden frames: {missing}")
        return 1
    if len(files) < 9:
        print(f"only {len(files)} golden frames in {sys.argv[1]}")
        return 1
    failed = 0
    for f in files:
        problem = check(f) or check_mcp(f)
        print(f"{f.name}: {problem or 'ok'}")
        failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

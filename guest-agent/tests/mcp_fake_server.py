#!/usr/bin/python3
"""A stdio MCP server that misbehaves on request, for the agent's MCP tests.

mcp_fake_server.py MODE: echo (every line back, with the server's pid,
uid, NoNewPrivs and Seccomp state and nice value in "_meta"), crash (dies
with exit 3 after the first line, saying why on stderr), garbage (answers
the first line with text that is not JSON), long N (answers with a line of
N bytes), flood (writes small notifications for ever), silent (reads, never
answers), blank (blank lines, then an answer without its newline, then
exits once stdin ends), slow SECS (sleeps SECS before reading, like a
server still loading, then echo), noping (echo, but never answers the
agent's warm-up ping). Every other mode answers the agent's warm-up ping
(an id starting "sbx-agent-warmup-") as a server would, and misbehaves on
the session's lines only.
"""
import json
import os
import sys
import time

WARMUP_PREFIX = "sbx-agent-warmup-"


def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def main():
    mode = sys.argv[1]
    out = sys.stdout
    print("fake server %s starting" % mode, file=sys.stderr, flush=True)
    if mode == "flood":
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"data": "x" * 100}}) + "\n"
        while True:
            out.write(line)
    if mode == "slow":
        time.sleep(float(sys.argv[2]))
    for raw in sys.stdin:
        msg = json.loads(raw)
        warmup = str(msg.get("id", "")).startswith(WARMUP_PREFIX)
        if warmup and mode == "noping":
            continue
        if warmup:
            out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}) + "\n")
        elif mode in ("echo", "slow", "noping"):
            res = {"echo": msg, "_meta": {"pid": os.getpid(), "uid": os.getuid(),
                                          "nnp": status("NoNewPrivs"),
                                          "seccomp": status("Seccomp"),
                                          "nice": os.nice(0)}}
            out.write(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": res}) + "\n")
        elif mode == "crash":
            sys.stderr.buffer.write(b"not utf-8: \xff\xfe, a control byte: \x01\n")
            print("fatal: cannot handle %s" % msg.get("method"), file=sys.stderr, flush=True)
            sys.exit(3)
        elif mode == "garbage":
            out.flush()
            sys.stdout.buffer.write(b"Server ready on stdio! \xff\n")
        elif mode == "long":
            n = int(sys.argv[2])
            out.write('{"jsonrpc":"2.0","id":1,"result":{"pad":"' + "a" * n + '"}}\n')
        elif mode == "blank":
            out.write("\n  \n\r\n")
            out.write(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {}}))
        out.flush()


if __name__ == "__main__":
    main()

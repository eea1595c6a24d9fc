"""The S3 tests' store: s3rver behind AWS's own SigV4 check
(tests/s3/server.mjs, pinned in tests/s3/package-lock.json) on a free
loopback port over a folder, and sup-s3-tool ($SBX_S3_TOOL) to call it.

Each S3Server is recorded as a run of its folder's (sbx_harness's
register_run: the node process, with its start time) and joins the
harness's set of live things: ctest's timeout or ^C still stops it, and
the next harness start kills it should its test be SIGKILLed. stop() keeps
the folder (a test restarts the store on it); the test removes it. Used by
it_s3_store, it_snapshots_s3, it_snapshots_sweep and it_harness_sweep.
Stdlib only.
"""
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import sbx_harness

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER_DIR = os.path.join(TOP, "tests", "s3")
TOOL = os.environ.get("SBX_S3_TOOL")
BUCKET = "snaps"
CREDS = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER"}


def skip_unless(store=True):
    """unittest.SkipTest unless a supervisor test can run (SBX_SUPERVISOR,
    SBX_AGENT) and, with store, one against an s3rver (SBX_S3_TOOL, node;
    tests/s3's modules missing is a failure)."""
    if not os.environ.get("SBX_SUPERVISOR") or not os.environ.get("SBX_AGENT"):
        raise unittest.SkipTest("SBX_SUPERVISOR and SBX_AGENT must be set")
    if store and not TOOL:
        raise unittest.SkipTest("SBX_S3_TOOL must be set")
    if store and not shutil.which("node"):
        raise unittest.SkipTest("node is not installed (scripts/install-deps)")
    if store:
        require_s3rver()


def require_s3rver():
    """A clear failure, not a skip, when tests/s3's modules are missing
    (make test installs them)."""
    if not os.path.isdir(os.path.join(SERVER_DIR, "node_modules", "s3rver")):
        raise AssertionError("tests/s3/node_modules missing: run scripts/install-deps (make test does)")


def _set_environ(values):
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextlib.contextmanager
def environ(**values):
    """os.environ with values set (None: unset) for the block, then as it was:
    the supervisors and servers started inside inherit them."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_environ(values)
        yield
    finally:
        _set_environ(saved)


class S3Server:
    """One s3rver (behind the signature check) on 127.0.0.1 over a folder."""

    def __init__(self, folder, port=0):
        self.folder = folder
        self.port = port
        self.proc = None

    def start(self):
        os.makedirs(self.folder, exist_ok=True)
        self.proc = subprocess.Popen(
            ["node", "--openssl-legacy-provider", os.path.join(SERVER_DIR, "server.mjs"), "--dir", self.folder,
             "--port", str(self.port), "--bucket", BUCKET],
            cwd=SERVER_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)
        sbx_harness._live.add(self)
        sbx_harness.register_run(self.folder, runc=(), procs=[self.proc.pid])
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            err = self.proc.stderr.read1(4096) if self.proc.poll() is not None else b""
            self.stop()
            raise RuntimeError("s3rver did not start: %r" % err)
        self.port = json.loads(line)["port"]
        return self

    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def signal(self, sig):
        os.killpg(self.proc.pid, sig)

    def stop(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc = None
        sbx_harness._live.discard(self)

    cleanup = stop  # what sbx_harness's signal handler calls


class Result:
    def __init__(self, rc, out, err, seconds):
        self.rc, self.out, self.err, self.seconds = rc, out, err, seconds
        m = re.search(r"^peak_rss_kib (\d+)$", err, re.M)
        self.peak_kib = int(m.group(1)) if m else None


def tool(server, url, *args, opts=(), env=None, feed=None):
    """Run sup-s3-tool; feed(proc): a generator of byte chunks written to
    its stdin from a thread."""
    full_env = dict(os.environ, **CREDS)
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_REGION"):
        full_env.pop(k, None)
    full_env.update(env or {})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen([TOOL, "--endpoint", server.endpoint(), *opts, url, *args],
                             stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                             stdout=out, stderr=err, env=full_env)
        writer = None
        if feed:
            def write():
                try:
                    for chunk in feed(p):
                        p.stdin.write(chunk)
                except BrokenPipeError:
                    pass
                finally:
                    try:
                        p.stdin.close()
                    except BrokenPipeError:
                        pass
            writer = threading.Thread(target=write)
            writer.start()
        p.wait()
        seconds = time.monotonic() - start
        if writer:
            writer.join()
        out.seek(0)
        err.seek(0)
        return Result(p.returncode, out.read(), err.read().decode(errors="replace"), seconds)

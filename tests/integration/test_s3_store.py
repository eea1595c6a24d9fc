"""sup_s3, the S3 client the snapshot store writes through, against a real
S3 server: s3rver, with every request's SigV4 signature checked by AWS's own
signer first (tests/s3/server.mjs, pinned in tests/s3/package-lock.json),
on a free loopback port and a temporary folder; sup_s3 driven through
sup-s3-tool ($SBX_S3_TOOL), each call a process of its own so its peak
memory (VmHWM, which the tool prints) is its own.

- objects of 0 bytes, a few bytes (keys with spaces, '+', '=', UTF-8) and
  23 MiB (multipart, 5 MiB parts; from a file and from a pipe) go up and
  come back byte for byte (sha256); HEAD gives their sizes;
- a 23 MiB put peaks at most one part (plus slack) above a HEAD's peak: the
  object is never held whole;
- a listing of more keys than a page (pages of 7) comes back whole, in order,
  and a sub-prefix lists only its own;
- delete, then HEAD and GET -> -ENOENT (exit 2) naming NoSuchKey; a second
  delete is fine; a missing bucket -> -ENOENT;
- a wrong secret -> -EACCES naming SignatureDoesNotMatch and the step and
  key; an unknown key id -> InvalidAccessKeyId;
- the store killed during a multipart put, and frozen (SIGSTOP) during one:
  the put fails within its timeouts with the step, key and cause, and once
  the store is back the key still holds the object it held before (none
  half-written).
- ListMultipartUploads and AbortMultipartUpload reach s3rver signed as
  AWS checks them (a wrong secret is 403), and s3rver answers what it
  offers: 501 NotImplemented and 405 MethodNotAllowed;
- a supervisor started with --snapshot-store checks the bucket: a missing
  bucket or a wrong secret fails the start naming the flag, the status and
  S3's code; the right one starts (pool of 0: no sandbox is made).
Every s3rver and supervisor is killed and its folder removed, also when a
test fails.

Env: SBX_S3_TOOL; SBX_SUPERVISOR and SBX_AGENT for the start check.
"""
import hashlib
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from s3_harness import BUCKET, CREDS, TOOL, S3Server, environ, require_s3rver, tool  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MIB = 1 << 20
PART = 5 * MIB
BIG = 23 * MIB + 4321

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


class S3Store(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not TOOL:
            raise unittest.SkipTest("SBX_S3_TOOL not set")
        require_s3rver()
        cls.tmp = tempfile.mkdtemp(prefix="sbx-s3-")
        cls.srv = None
        try:
            cls.srv = S3Server(os.path.join(cls.tmp, "store")).start()
            cls.big = os.path.join(cls.tmp, "big")
            with open(cls.big, "wb") as f:
                f.write(os.urandom(BIG))
            cls.big_sha = sha256_file(cls.big)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.srv:
            cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_ok(self, *args, url="s3://%s/node-1" % BUCKET, srv=None, **kw):
        r = tool(srv or self.srv, url, *args, **kw)
        self.assertEqual(r.rc, 0, "%s: %s" % (args, r.err))
        return r

    def listing(self, prefix="", url="s3://%s/node-1" % BUCKET, srv=None):
        out = self.run_ok("list", prefix, url=url, srv=srv, opts=("--list-page", "7")).out.decode()
        rows = [line.rsplit(" ", 2) for line in out.splitlines()]
        # each object's LastModified read as seconds since the epoch: put
        # during this run (the store's clock is this machine's)
        for _, _, mtime in rows:
            self.assertLessEqual(abs(int(mtime) - time.time()), 600, out)
        return [(k, int(n)) for k, n, _ in rows]

    def test_small_objects_round_trip(self):
        for key, data in (("tiny/empty", b""), ("tiny/a b+c=d/\u00e9t\u00e9.txt", b"hello, store\n"),
                          ("tiny/part-sized-less-one", os.urandom(PART - 1))):
            src = os.path.join(self.tmp, "src")
            with open(src, "wb") as f:
                f.write(data)
            self.run_ok("put", key, src, opts=("--part-size", str(PART)))
            self.assertEqual(self.run_ok("head", key).out.decode().strip(), str(len(data)))
            self.assertEqual(self.run_ok("get", key, "-").out, data, key)

    def test_multipart_round_trip_in_bounded_memory(self):
        opts = ("--part-size", str(PART))
        put = self.run_ok("put", "big/from-file", self.big, opts=opts)

        def chunks(_p):
            with open(self.big, "rb") as f:
                for chunk in iter(lambda: f.read(256 << 10), b""):
                    yield chunk
        self.run_ok("put", "big/from-pipe", "-", opts=opts, feed=chunks)
        for key in ("big/from-file", "big/from-pipe"):
            self.assertEqual(self.run_ok("head", key).out.decode().strip(), str(BIG))
            back = os.path.join(self.tmp, "back")
            self.run_ok("get", key, back)
            self.assertEqual(sha256_file(back), self.big_sha, key)
            os.unlink(back)
        head = self.run_ok("head", "big/from-file")
        above = put.peak_kib - head.peak_kib
        print("put of %d bytes in %d-byte parts: peak RSS %d KiB, %d KiB above a HEAD's (%.2f s)"
              % (BIG, PART, put.peak_kib, above, put.seconds), file=sys.stderr)
        self.assertLess(above * 1024, PART + 4 * MIB, "a put holds more than one part")

    def test_list_pages_and_prefixes(self):
        keys = ["list/k%02d" % i for i in range(25)] + ["list/sub/x1", "list/sub/x2"]
        src = os.path.join(self.tmp, "one")
        with open(src, "wb") as f:
            f.write(b"1")
        for k in keys:
            self.run_ok("put", k, src)
        got = self.listing("list/")
        self.assertEqual([k for k, _ in got], sorted(keys))
        self.assertTrue(all(n == 1 for _, n in got))
        self.assertEqual([k for k, _ in self.listing("list/sub/")], ["list/sub/x1", "list/sub/x2"])
        self.assertEqual(self.listing("list/none"), [])
        # The store's prefix bounds what a listing sees: another node's keys
        # under the same bucket are not this store's.
        self.run_ok("put", "list/k00", src, url="s3://%s/node-2" % BUCKET)
        self.assertEqual([k for k, _ in self.listing("", url="s3://%s/node-2" % BUCKET)], ["list/k00"])

    def test_delete_and_missing(self):
        src = os.path.join(self.tmp, "del")
        with open(src, "wb") as f:
            f.write(b"gone soon")
        self.run_ok("put", "del/me", src)
        self.run_ok("delete", "del/me")
        for args in (("head", "del/me"), ("get", "del/me", "-")):
            r = tool(self.srv, "s3://%s/node-1" % BUCKET, *args)
            self.assertEqual(r.rc, 2, r.err)
            self.assertIn("error -2: %s del/me: HTTP 404" % args[0], r.err)
        self.assertIn("NoSuchKey", tool(self.srv, "s3://%s/node-1" % BUCKET, "get", "del/me", "-").err)
        self.run_ok("delete", "del/me")
        r = tool(self.srv, "s3://no-such-bucket", "check")
        self.assertEqual(r.rc, 2, r.err)
        self.assertIn("s3://no-such-bucket: check bucket: HTTP 404 NoSuchBucket", r.err)
        self.run_ok("check", url="s3://%s" % BUCKET)

    def test_bad_credentials(self):
        src = os.path.join(self.tmp, "cred")
        with open(src, "wb") as f:
            f.write(b"secret")
        r = tool(self.srv, "s3://%s/node-1" % BUCKET, "put", "cred/x", src,
                 env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
        self.assertEqual(r.rc, 1)
        self.assertIn("error -13: put cred/x: HTTP 403 SignatureDoesNotMatch", r.err)
        r = tool(self.srv, "s3://%s/node-1" % BUCKET, "get", "cred/x", "-",
                 env={"AWS_ACCESS_KEY_ID": "NOBODY"})
        self.assertIn("error -13: get cred/x: HTTP 403 InvalidAccessKeyId", r.err)
        r = tool(self.srv, "s3://%s/node-1" % BUCKET, "check", env={"AWS_SECRET_ACCESS_KEY": ""})
        self.assertIn("AWS_SECRET_ACCESS_KEY must be set", r.err)
        # Nothing was written by the refused put.
        self.assertEqual(tool(self.srv, "s3://%s/node-1" % BUCKET, "head", "cred/x").rc, 2)

    def test_unfinished_uploads_calls(self):
        # ListMultipartUploads and AbortMultipartUpload, signed as AWS's
        # signer checks them (a wrong signature is 403 before s3rver sees
        # the request); s3rver offers neither: 501 NotImplemented for the
        # listing (-EOPNOTSUPP, which the snapshot sweep takes as "this store
        # lists no uploads"), 405 MethodNotAllowed for the abort.
        url = "s3://%s/node-1" % BUCKET
        r = tool(self.srv, url, "uploads", "archives/")
        self.assertEqual(r.rc, 1, r.err)
        self.assertIn("error -95: ", r.err)
        self.assertIn("list uploads page 1: HTTP 501 NotImplemented", r.err)
        self.assertNotIn("attempts", r.err)  # not retried: it will not be there later
        r = tool(self.srv, url, "abort", "archives/x.tar.zst", "an-upload id/+=")
        self.assertEqual(r.rc, 1, r.err)
        self.assertIn("abort upload of archives/x.tar.zst: HTTP 405 MethodNotAllowed", r.err)
        for args in (("uploads", "archives/"), ("abort", "archives/x.tar.zst", "id")):
            r = tool(self.srv, url, *args, env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
            self.assertIn("HTTP 403 SignatureDoesNotMatch", r.err, args)

    def dies_mid_upload(self, name, hurt, opts, deadline):
        """A multipart put fed from a pipe: after two parts went up, hurt(srv)
        (kill or freeze it), then the rest. The put must fail by deadline
        seconds; back up, the key holds its old object."""
        srv = S3Server(os.path.join(self.tmp, "store-" + name)).start()
        try:
            url = "s3://%s/node-1" % BUCKET
            old = os.path.join(self.tmp, "old")
            with open(old, "wb") as f:
                f.write(b"the object before")
            self.run_ok("put", "cut/obj", old, srv=srv)
            t_hurt = []

            def chunks(_p):
                with open(self.big, "rb") as f:
                    yield f.read(12 * MIB)  # returns once parts 1-2 went up
                    hurt(srv)
                    t_hurt.append(time.monotonic())
                    for chunk in iter(lambda: f.read(256 << 10), b""):
                        yield chunk
            r = tool(srv, url, "put", "cut/obj", "-", opts=("--part-size", str(PART), *opts), feed=chunks)
            failed_after = time.monotonic() - t_hurt[0] if t_hurt else None
            print("store %s mid-upload: put failed %.1f s later: %s"
                  % (name, failed_after or -1, r.err.strip()), file=sys.stderr)
            self.assertEqual(r.rc, 1, r.err)
            self.assertIn("upload part", r.err)
            self.assertIn("cut/obj", r.err)
            self.assertLess(failed_after, deadline)
            srv.stop()
            srv.start()  # the same folder and port
            back = self.run_ok("get", "cut/obj", "-", srv=srv)
            self.assertEqual(back.out, b"the object before")
            self.assertEqual(self.listing("cut/", url=url, srv=srv), [("cut/obj", len(b"the object before"))])
        finally:
            srv.stop()

    def test_store_killed_mid_upload(self):
        # Connections refused: 3 retries backing off 0.25+0.5+1 s, then the
        # abort's, well under 15 s.
        self.dies_mid_upload("killed", lambda s: s.signal(signal.SIGKILL), (), 15)

    def test_store_frozen_mid_upload(self):
        # A store that accepts and then says nothing: the low-speed timeout
        # (2 s here, 1 retry) ends each attempt, the abort's too. curl
        # averages its speed over the last 5 s, so an attempt that first
        # filled the socket buffers (~3 MB on loopback) ends about 9 s in:
        # 2 x 9 s for the part, 2 x 2 s for the abort, measured 23 s.
        self.dies_mid_upload("frozen", lambda s: s.signal(signal.SIGSTOP),
                             ("--low-speed", "2", "--retries", "1"), 40)

    def start_supervisor(self, store, secret="S3RVER"):
        """A supervisor of no pool with --snapshot-store store; the AWS_*
        variables are the environment it inherits."""
        sup = Supervisor(SUP, AGENT, pool_size=0,
                         extra=["--snapshot-store", store, "--s3-endpoint", self.srv.endpoint()])
        with environ(**dict(CREDS, AWS_SECRET_ACCESS_KEY=secret)):
            try:
                sup.start()
                return sup, None
            except RuntimeError:
                sup.wait(10)
                return sup, sup.log()

    def test_supervisor_checks_the_store_at_start(self):
        if not SUP or not AGENT:
            self.skipTest("SBX_SUPERVISOR and SBX_AGENT not set")
        for store, secret, want in (("s3://no-such-bucket/p", "S3RVER", "HTTP 404 NoSuchBucket"),
                                    ("s3://%s/p" % BUCKET, "wrong", "HTTP 403 SignatureDoesNotMatch")):
            sup, log = self.start_supervisor(store, secret)
            try:
                self.assertIsNotNone(log, "started with a store it cannot use")
                self.assertNotEqual(sup.proc.returncode, 0)
                self.assertIn("--snapshot-store %s" % store, log)
                self.assertIn(want, log)
            finally:
                sup.cleanup()
        sup, log = self.start_supervisor("s3://%s/p" % BUCKET)
        try:
            self.assertIsNone(log, log)
            self.assertIn("snapshot store s3://%s/p: the bucket answers" % BUCKET, sup.log())
            stop_clean(sup)
        finally:
            sup.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Reuse after reset (--pool-reuse) with real runc sandboxes, the real agent
and real HTTP: tenant A plants the persistence tricks a next tenant must not
find (hidden files and folders, a modified shell rc file, an exported
variable in ~/.profile, files in /tmp, /var/tmp and /dev/shm, a detached
double-forked process, a setsid daemon, a nohup leftover, a background
process of the API, an abstract unix socket listener, a TCP listener, a
System V shared memory segment) and deletes its sandbox; tenant B gets the
same sandbox (same id, same container, no new one made) and finds none of
them, from inside and from the host. A sandbox whose reset cannot finish (a
process the host froze, so the agent cannot kill it) or whose tenant wrote
outside the folders a reset empties is destroyed and replaced instead, and
one whose id went out in a signed URL is destroyed.
Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (Supervisor, containers_under, remove_everything_under,  # noqa: E402
                         state_tag, stop_clean)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

PLANT = r"""
set -e
cd /workspace
echo secret > .secret
mkdir -p .git/objects/ab && echo obj > .git/objects/ab/cd
echo 'export LEAK_RC=1' >> ~/.bashrc
echo 'export TENANT_SECRET=a-tenant' >> ~/.profile
echo t > /tmp/.t; mkdir /tmp/.hidden-dir; echo v > /var/tmp/v; echo shm > /dev/shm/seg
ipcmk -M 4096 >/dev/null
(setsid sleep 1001 </dev/null >/dev/null 2>&1 &) &
setsid nohup sleep 1002 </dev/null >/dev/null 2>&1 &
nohup sleep 1003 </dev/null >/dev/null 2>&1 &
python3 -c 'import socket,time
s=socket.socket(socket.AF_UNIX); s.bind("\0sbx-tenant-a"); s.listen(); time.sleep(1004)' </dev/null >/dev/null 2>&1 &
python3 -c 'import socket,time
s=socket.socket(); s.bind(("127.0.0.1", 8765)); s.listen(); time.sleep(1005)' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do
  grep -q sbx-tenant-a /proc/net/unix && grep -q ':223D 00000000:0000 0A' /proc/net/tcp && break
  sleep 0.05
done
echo planted
"""

# What B looks for, from inside: each line "name: what was found" (empty
# when nothing).
LOOK = r"""
echo "files: $(ls -A /workspace /tmp /var/tmp /dev/shm /dev/mqueue ~ 2>&1 | grep -v ':$' | grep -v '^$' | tr '\n' ' ')"
echo "procs: $(for p in /proc/[0-9]*; do n=${p#/proc/}; [ $n = 1 ] || [ $n = $$ ] || tr '\0' ' ' < $p/cmdline; echo; done | grep -v '^$' | grep -v 'tr ' | tr '\n' '|')"
echo "unix: $(grep -c sbx-tenant-a /proc/net/unix)"
echo "tcp: $(grep -c ' 0A ' /proc/net/tcp)"
echo "shm: $(ipcs -m | grep -c '^0x')"
echo "env: $(sh -lc 'echo $TENANT_SECRET$LEAK_RC')$(bash -ic 'echo $LEAK_RC' 2>/dev/null)"
"""


class Reuse(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sbx-it-reuse-")
        self.state = os.path.join(self.root, "state")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(remove_everything_under, self.state)

    def new(self, extra=()):
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=1,
                       extra=["--pool-reuse"] + list(extra))
        self.addCleanup(s.cleanup)
        s.start()
        s.wait_ready()
        return s

    def cid(self, sid):
        return "sbx-%s-%s" % (state_tag(self.state), sid)

    def sh(self, s, sid, cmd, user=None):
        body = {"cmd": cmd, "timeout": 30}
        if user:
            body["user"] = user
        st, _, r = s.exec(sid, **body)
        self.assertEqual(st, 200, r)
        return r

    @staticmethod
    def full_log(s):
        """The whole log (Supervisor.log() is its tail)."""
        with open(s.log_path, errors="replace") as f:
            return f.read()

    def log_wait(self, s, needle, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.full_log(s):
                return
            time.sleep(0.05)
        self.fail("no %r in the log:\n%s" % (needle, s.log()[-3000:]))

    def take(self, s, sid):
        """Creates until the pool hands out sid (it keeps up to twice its
        size ready: the refill made while sid was out comes first)."""
        got = []
        for _ in range(3):
            b = s.create(timeout=600)
            got.append(b["id"])
            if b["id"] == sid:
                return got
        self.fail("sandbox %s never handed out again: %r" % (sid, got))

    def host_pid_of(self, cmdline):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    c = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if c == cmdline:
                return int(d)
        return None

    def test_next_tenant_finds_nothing(self):
        s = self.new()
        a = s.create(timeout=600)["id"]
        r = self.sh(s, a, PLANT)
        self.assertEqual(r["exit_code"], 0, r)
        self.assertIn("planted", r["stdout"])
        st, _, p = s.request("POST", "/v1/sandboxes/%s/processes" % a, {"cmd": "sleep 1006"})
        self.assertEqual(st, 201, p)
        before = self.sh(s, a, LOOK)["stdout"]
        self.assertIn("unix: 1", before)
        self.assertIn("shm: 1", before)
        self.assertIn("a-tenant", before)
        containers = {c for c, _ in containers_under(self.state)}

        t0 = time.monotonic()
        st, _, _ = s.request("DELETE", "/v1/sandboxes/%s" % a)
        self.assertEqual(st, 204)
        self.log_wait(s, "sandbox %s: reset and checked" % a)
        print("\nreset of a planted sandbox, DELETE until pooled again: %.0f ms"
              % ((time.monotonic() - t0) * 1000))
        got = self.take(s, a)
        # the same container: none made, none destroyed since
        self.assertEqual({c for c, _ in containers_under(self.state)}, containers)
        self.assertNotIn("%s: destroyed" % a, self.full_log(s))

        look = self.sh(s, a, LOOK)
        lines = dict(l.split(": ", 1) if ": " in l else (l.rstrip(":"), "")
                     for l in look["stdout"].splitlines())
        self.assertEqual(lines.get("files", "").strip(), "", look)
        # only this shell's own pipeline may show (sh, ls, grep...): no sleep, no python
        self.assertNotIn("sleep", lines.get("procs", ""), look)
        self.assertNotIn("python3", lines.get("procs", ""), look)
        self.assertEqual(lines.get("unix"), "0", look)
        self.assertEqual(lines.get("tcp"), "0", look)
        self.assertEqual(lines.get("shm"), "0", look)
        self.assertEqual(lines.get("env", "").strip(), "", look)
        st, _, p = s.request("GET", "/v1/sandboxes/%s/processes" % a)
        self.assertEqual(st, 200, p)
        self.assertEqual(p["processes"], [], p)
        # from the host: the agent alone in the container's cgroup
        with open("/sys/fs/cgroup/pids/sbx/%s/cgroup.procs" % self.cid(a)) as f:
            procs = f.read().split()
        self.assertEqual(len(procs), 1, procs)
        # the other sandboxes handed out meanwhile, and this one, go
        for sid in got:
            self.assertEqual(s.request("DELETE", "/v1/sandboxes/%s" % sid)[0], 204)
        stop_clean(s)

    def test_unkillable_process_means_replaced(self):
        s = self.new()
        a = s.create(timeout=600)["id"]
        r = self.sh(s, a, "nohup sleep 2001 </dev/null >/dev/null 2>&1 & echo ok")
        self.assertEqual(r["exit_code"], 0, r)
        pid = None
        for _ in range(100):
            pid = self.host_pid_of("sleep 2001")
            if pid:
                break
            time.sleep(0.05)
        self.assertIsNotNone(pid)
        # the host freezes it in a v1 freezer cgroup of the test's own: no
        # SIGKILL can end it until it is thawed
        cg = "/sys/fs/cgroup/freezer/sbx-it-reuse-%d" % os.getpid()
        os.mkdir(cg)

        def unfreeze():
            try:
                with open(cg + "/freezer.state", "w") as f:
                    f.write("THAWED")
            except OSError:
                pass
            for _ in range(200):
                try:
                    os.rmdir(cg)
                    return
                except OSError:
                    time.sleep(0.05)
        self.addCleanup(unfreeze)
        with open(cg + "/cgroup.procs", "w") as f:
            f.write(str(pid))
        with open(cg + "/freezer.state", "w") as f:
            f.write("FROZEN")
        st, _, _ = s.request("DELETE", "/v1/sandboxes/%s" % a)
        self.assertEqual(st, 204)
        self.log_wait(s, "sandbox %s: not reused, destroyed and replaced" % a, timeout=60)
        self.assertIn("outlived SIGKILL", self.full_log(s))
        unfreeze()
        self.log_wait(s, "sandbox %s: destroyed" % a, timeout=60)
        self.assertNotIn(self.cid(a), {c for c, _ in containers_under(self.state)})
        s.wait_ready()
        b = s.create(timeout=600)["id"]
        self.assertNotEqual(b, a)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/%s" % b)[0], 204)
        stop_clean(s)

    def test_written_outside_the_reset_folders_means_replaced(self):
        # /var/tmp is writable but not among the folders reset empties: the
        # host's look at the writable layer finds it
        s = self.new(["--reuse-paths", "/workspace,/tmp,/home/sandbox,/dev/shm,/dev/mqueue"])
        a = s.create(timeout=600)["id"]
        self.assertEqual(self.sh(s, a, "echo x > /var/tmp/.left")["exit_code"], 0)
        st, _, _ = s.request("DELETE", "/v1/sandboxes/%s" % a)
        self.assertEqual(st, 204)
        self.log_wait(s, "sandbox %s: not reused, destroyed and replaced" % a, timeout=60)
        self.assertIn("was written to the writable layer", self.full_log(s))
        self.log_wait(s, "sandbox %s: destroyed" % a, timeout=60)
        stop_clean(s)

    def test_signed_url_means_destroyed(self):
        # a signed URL names the id until it expires: the sandbox is never
        # another tenant's, so it is destroyed as without --pool-reuse
        s = self.new()
        a = s.create(timeout=600)["id"]
        st, _, u = s.request("GET", "/v1/sandboxes/%s/ports/8000/url" % a)
        self.assertEqual(st, 200, u)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/%s" % a)[0], 204)
        self.log_wait(s, "sandbox %s: destroyed" % a, timeout=60)
        self.assertNotIn("sandbox %s: reset" % a, self.full_log(s))
        stop_clean(s)

    def test_fork_filled_means_destroyed(self):
        # a fork's files sit in its own lower layer (the fork slot of a
        # filled one, the stacked layer of a cold one) that no reset can
        # empty: the fork is destroyed, never reused
        s = self.new()
        a = s.create(timeout=600)["id"]
        self.assertEqual(self.sh(s, a, "echo secret > /workspace/a.txt")["exit_code"], 0)
        s.wait_ready()
        st, _, f = s.request("POST", "/v1/sandboxes/%s/fork" % a, {"count": 1})
        self.assertEqual(st, 201, f)
        fid = f["sandboxes"][0]["id"]
        self.assertEqual(self.sh(s, fid, "cat /workspace/a.txt")["stdout"], "secret\n")
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/%s" % fid)[0], 204)
        self.log_wait(s, "sandbox %s: destroyed" % fid, timeout=60)
        self.assertNotIn("sandbox %s: reset" % fid, self.full_log(s))
        stop_clean(s)


if __name__ == "__main__":
    unittest.main(verbosity=2)

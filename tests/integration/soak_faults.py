"""The faults the soak (test_soak.py) injects beside its load, each a small
object the fault thread drives and counts:

- RuntimeFaults: a wrapper around runc, given to the supervisor as its
  --runtime, that fails a share of the calls that make or enter a
  container (`run`, which the supervisor uses for every sandbox, and
  `create`, `start`, `exec` should it ever use them) before runc sees them;
  the share is a file the soak rewrites (0 between the fault's windows),
  each failure decided by the soak's seed and the call's number, and logged;
- StateDisk: the state folder on a tmpfs of its own size (the mount is
  the state folder itself, so the harness's cleanup and the sweep of a
  killed run unmount it with the rest), and a file that fills it until
  ENOSPC and is removed again;
- kill_agent: a sandbox's agent (its container's PID 1, from the
  supervisor's init.pid) SIGKILLed from the host.

A test's helpers, never the product. Stdlib only.
"""
import errno
import os
import signal
import stat
import subprocess

# The wrapper: its configuration baked in at write time, the share read
# at each call. -S: no site import, it runs on every runtime call.
_WRAPPER = r'''#!/usr/bin/python3 -S
import fcntl, os, random, sys
REAL, CONTROL, COUNTER, LOG, SEED = %(real)r, %(control)r, %(counter)r, %(log)r, %(seed)r
TARGETS = ("run", "create", "start", "exec")
WITH_VALUE = ("--root", "--log", "--log-format", "--criu", "--rootless")
args = sys.argv[1:]
i, sub = 0, None
while i < len(args):
    a = args[i]
    if not a.startswith("-"):
        sub = a
        break
    i += 2 if a in WITH_VALUE else 1
try:
    with open(CONTROL) as f:
        pct = float(f.read().strip() or 0)
except (OSError, ValueError):
    pct = 0.0
if sub in TARGETS and pct > 0:
    with open(COUNTER, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read().strip() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(n))
    if random.Random("%%s:%%d" %% (SEED, n)).random() * 100 < pct:
        with open(LOG, "a") as f:
            f.write("%%s %%d\n" %% (sub, n))
        sys.stderr.write("soak: injected failure of runtime call %%d (%%s)\n" %% (n, sub))
        sys.exit(1)
os.execv(REAL, [REAL] + args)
'''


class RuntimeFaults:
    """The runtime wrapper in folder (its path: .path, for --runtime)."""

    def __init__(self, folder, seed, real="runc"):
        self.path = os.path.join(folder, "soak-runtime")
        self.control = os.path.join(folder, "soak-runtime.pct")
        self.log = os.path.join(folder, "soak-runtime.failed")
        real = real if os.path.isabs(real) else subprocess.run(
            ["sh", "-c", 'command -v "$0"', real], capture_output=True, text=True).stdout.strip()
        with open(self.path, "w") as f:
            f.write(_WRAPPER % {"real": real, "control": self.control,
                                "counter": os.path.join(folder, "soak-runtime.n"),
                                "log": self.log, "seed": seed})
        os.chmod(self.path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        self.share(0)

    def share(self, pct):
        """From now on pct % of the targeted calls fail."""
        tmp = self.control + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(pct))
        os.rename(tmp, self.control)

    def failed(self):
        """The calls failed so far: {subcommand: count}."""
        out = {}
        try:
            with open(self.log) as f:
                for line in f:
                    sub = line.split()[0]
                    out[sub] = out.get(sub, 0) + 1
        except OSError:
            pass
        return out


class StateDisk:
    """state_dir as a tmpfs of size_mib; fill() takes what is left of it."""

    def __init__(self, state_dir, size_mib):
        self.state_dir = state_dir
        self.fill_path = os.path.join(state_dir, "soak-fill")
        os.makedirs(state_dir, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0755" % size_mib, "soak-state",
                        state_dir], check=True)

    def free_mib(self):
        st = os.statvfs(self.state_dir)
        return st.f_bavail * st.f_frsize / float(1 << 20)

    def fill(self):
        """Write until the file system says ENOSPC: the MiB written."""
        chunk = b"\0" * (1 << 20)
        written = 0
        fd = os.open(self.fill_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            while True:
                try:
                    n = os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
                written += n
                if n < len(chunk):
                    break
        finally:
            os.close(fd)
        return written / float(1 << 20)

    def unfill(self):
        try:
            os.unlink(self.fill_path)
        except FileNotFoundError:
            pass


def agent_pid(state_dir, sid):
    """The host pid of sandbox sid's agent, or None."""
    try:
        with open(os.path.join(state_dir, "sandboxes", sid, "init.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def kill_agent(state_dir, sid):
    """SIGKILL sandbox sid's agent (its container ends with it): whether
    there was one to kill."""
    pid = agent_pid(state_dir, sid)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return False
    return True

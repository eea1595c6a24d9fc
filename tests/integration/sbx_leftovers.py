"""What a test's run leaves on the machine, found, removed and checked gone:
the containers in a runtime's root (runc's, runsc's), the processes left in
a run's container cgroups (agents whose container the runtime no longer
lists, a `runc init` of a create that never ended), mounts in every mount
namespace, loop devices.

Shared by sbx_harness (a test's cleanup, the sweep of a killed test's runs)
and the kubelet harness (tests/k8s/kubelet.py: its stop and sweep()), so
that both keep one rule: what names a run (sbx_harness's run record; the
kubelet's root, which holds runc's state) goes only once what it names is
confirmed gone; a removal that fails leaves it for the next sweep.
Stdlib only, nothing done at import; a test harness, never the product.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

CGROUP_ROOT = "/sys/fs/cgroup"


def list_containers(rt, prefix=None):
    """[(id, status)] of the containers runtime rt (an argv prefix: runc
    --root R) lists, those whose bundle lies below prefix when given; None
    when it cannot list (not knowing is not "none")."""
    try:
        out = subprocess.run(rt + ["list", "--format", "json"], capture_output=True, text=True,
                             timeout=60)
        items = json.loads(out.stdout or "null") if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if items is not None and not isinstance(items, list):
        return None
    return [(c["id"], c.get("status")) for c in items or []
            if isinstance(c, dict) and "id" in c
            and (prefix is None or (c.get("bundle") or "").startswith(prefix))]


def remove_containers(rts, prefix=None, thaw=None, confirm=True):
    """Kill and delete each container the runtimes rts list (below prefix
    when given; thaw(id) first when given: a frozen one dies of no KILL),
    then (confirm) list again: what is left, [(runtime, id or None: it
    cannot list)], [] when all are confirmed gone. confirm=False: a caller
    that confirms by itself (sbx_harness, after its check of runtime calls
    still under way)."""
    left = []
    for rt in rts:
        for cid, _ in list_containers(rt, prefix) or []:
            if thaw:
                thaw(cid)
            subprocess.run(rt + ["kill", cid, "KILL"], capture_output=True)
            subprocess.run(rt + ["delete", "--force", cid], capture_output=True)
        after = list_containers(rt, prefix) if confirm else []
        left += [(rt, None)] if after is None else [(rt, cid) for cid, _ in after]
    return left


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:][:1] in ("Z", "X")


def cgroup_procs(marker):
    """Pids of the live processes whose cgroup path (any hierarchy) holds
    marker ("/sbx/sbx-<tag>-": the containers of one state folder). Not the
    zombies: they hold nothing, and the orphans among them wait for this
    machine's PID 1, which can take a second to reap them."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % d) as f:
                if marker in f.read() and not _zombie(int(d)):
                    pids.append(int(d))
        except OSError:
            continue
    return pids


def kill_cgroups(name_prefix):
    """SIGKILL what is left in the container cgroups sbx/<name_prefix>*
    (thawed first) and remove those cgroups, in every hierarchy (a cgroup
    still holding a zombie of what was killed here is tried again for a
    while; one the runtime left holding its own zombie is left)."""
    dirs = []
    for hier in os.listdir(CGROUP_ROOT) if os.path.isdir(CGROUP_ROOT) else []:
        parent = os.path.join(CGROUP_ROOT, hier, "sbx")
        try:
            dirs += [os.path.join(parent, n) for n in os.listdir(parent)
                     if n.startswith(name_prefix)]
        except OSError:
            continue
    for d in dirs:
        for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
            try:
                with open(os.path.join(d, name), "w") as f:
                    f.write(value)
            except OSError:
                pass
    killed = cgroup_procs("/sbx/" + name_prefix)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    while cgroup_procs("/sbx/" + name_prefix) and time.monotonic() < deadline:
        time.sleep(0.02)
    deadline = time.monotonic() + (3 if killed else 0)
    while True:
        for d in list(dirs):
            try:
                os.rmdir(d)
                dirs.remove(d)
            except FileNotFoundError:
                dirs.remove(d)
            except OSError:
                pass
        if not dirs or time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def _unescape(s):
    return s.encode().decode("unicode_escape")


def _mounts_in(mountinfo, prefix):
    res = []
    try:
        with open(mountinfo) as f:
            for line in f:
                mp = _unescape(line.split()[4])
                if mp.startswith(prefix) or mp == prefix[:-1]:
                    res.append(mp)
    except OSError:
        pass
    return res


def mounts_under(path):
    """Mount points at or below path in this process's mount namespace."""
    return _mounts_in("/proc/self/mountinfo", os.path.realpath(path) + "/")


def mounts_elsewhere(path):
    """[(pid, mount point)] at or below path in the other mount namespaces
    (one process's for each): copies of a run's mounts that a process made
    with its namespace while they were mounted (unshare -m, `ip netns exec`)
    keep its disk's loop device attached after the host's unmount, as this
    machine's mounts propagate nothing (private)."""
    try:
        mine = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return []
    prefix = os.path.realpath(path) + "/"
    seen, res = {mine}, []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ns = os.readlink("/proc/%s/ns/mnt" % d)
        except OSError:
            continue
        if ns in seen:
            continue
        seen.add(ns)
        res += [(int(d), mp) for mp in _mounts_in("/proc/%s/mountinfo" % d, prefix)]
    return res


_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNS = 0x00020000
_MNT_DETACH = 2


def _umount_in(pid, mp):
    """mp (as pid's mountinfo names it: from pid's root) detached in pid's
    mount namespace by a process of ours (this file, run: a fresh process
    with one thread, as setns needs) that joins it and takes pid's root: no
    program of that namespace's is run (a runtime's namespace, pivoted into
    a root of its own, may have no umount). True when it went."""
    return subprocess.run([sys.executable, os.path.abspath(__file__), "umount-in", str(pid), mp],
                          capture_output=True).returncode == 0


def _umount_here_in(pid, mp):
    ns = os.open("/proc/%d/ns/mnt" % pid, os.O_RDONLY | os.O_CLOEXEC)
    root = os.open("/proc/%d/root" % pid, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return (_LIBC.setns(ns, _CLONE_NEWNS) == 0 and _LIBC.fchdir(root) == 0
            and _LIBC.chroot(b".") == 0 and _LIBC.umount2(os.fsencode(mp), _MNT_DETACH) == 0)


def unmount_under(path):
    """Every mount at or below path detached (lazily), deepest first: in
    this namespace, then in any other that holds a copy. (A copy that a
    mount on top of it hides, or one a user namespace's lock holds, cannot
    be reached this way: the namespace of a test that covers /tmp or /run
    starts with detach_below, below.)"""
    for mp in sorted(mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    for pid, mp in sorted(mounts_elsewhere(path), key=lambda x: len(x[1]), reverse=True):
        _umount_in(pid, mp)


def detach_below(paths, keep=()):
    """In a mount namespace just made (unshare -m: a copy of every mount
    there was, other tests' sandboxes' disks included), every mount strictly
    below each of paths detached, deepest first, but those holding a path of
    keep. Run by a test inside a namespace that then covers those paths
    with a tmpfs: a copy under the tmpfs would hold another test's mount
    and loop device for this namespace's whole life, and no other process
    could reach it to unmount it (unmount_under needs its path)."""
    keep = [os.path.realpath(k) + "/" for k in keep]
    below = [os.path.realpath(p).rstrip("/") + "/" for p in paths]
    mps = _mounts_in("/proc/self/mountinfo", "/")
    for mp in sorted(set(mps), key=len, reverse=True):
        if any(mp.startswith(b) for b in below) and \
                not any(k.startswith(mp + "/") for k in keep):
            _LIBC.umount2(os.fsencode(mp), _MNT_DETACH)


def detach_below_cmd(paths, keep=()):
    """detach_below as a shell command, for a test's `unshare -m sh -c`."""
    args = [sys.executable, os.path.abspath(__file__), "detach-below"]
    args += ["--keep=" + k for k in keep] + list(paths)
    return " ".join("'%s'" % a.replace("'", "'\\''") for a in args)


def loops_under(path):
    """Loop devices whose backing file (a sandbox's disk image) lies below path."""
    prefix = os.path.realpath(path) + "/"
    res = []
    for name in os.listdir("/sys/block"):
        if not name.startswith("loop"):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % name) as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.startswith(prefix):
            res.append("/dev/" + name)
    return res


def loops_left(path, wait=15.0):
    """Loop devices below path that a run left once it stopped: the copies
    of its mounts that other processes' namespaces took meanwhile (another
    test's `unshare -m`, an agent test's namespace: not the run's doing, and
    each keeps its disk's device attached) detached first, and each device
    given wait seconds for its last close (a namespace that pivoted away
    from the copy's path holds it until its processes end). Call it once the
    run's own mounts are gone from this namespace, so that no new copy can
    be taken."""
    deadline = time.monotonic() + wait
    while True:
        for pid, mp in sorted(mounts_elsewhere(path), key=lambda x: len(x[1]), reverse=True):
            _umount_in(pid, mp)
        left = loops_under(path)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def detach_loops_under(path):
    """Unmounted, they detach themselves (autoclear); any still attached is
    told to (a busy one goes at its last close)."""
    for dev in loops_under(path):
        subprocess.run(["losetup", "-d", dev], capture_output=True)


if __name__ == "__main__":
    # sbx_leftovers.py detach-below [--keep=PATH]... PATH...
    # sbx_leftovers.py umount-in PID MOUNTPOINT
    if sys.argv[1:2] == ["detach-below"]:
        detach_below([a for a in sys.argv[2:] if not a.startswith("--keep=")],
                     [a[len("--keep="):] for a in sys.argv[2:] if a.startswith("--keep=")])
    elif sys.argv[1:2] == ["umount-in"] and len(sys.argv) == 4:
        try:
            sys.exit(0 if _umount_here_in(int(sys.argv[2]), sys.argv[3]) else 1)
        except (OSError, ValueError):
            sys.exit(1)
    else:
        sys.exit("usage: %s detach-below [--keep=PATH]... PATH... | umount-in PID MOUNTPOINT"
                 % sys.argv[0])

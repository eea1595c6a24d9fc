#!/usr/bin/python3
"""Run one command as PID 1 of a gVisor sandbox (runsc, ptrace platform) and
exit with its status: how the agent's own tests run under gVisor, where
openat2, pidfd_open, /proc/<pid>/task/<tid>/children and others are missing.

    runsc_exec.py [--env K=V ...] -- COMMAND [ARGS...]

The sandbox sees the host's file system read-only (so the build tree and
its libraries are there), a fresh /tmp (tmpfs, writable; the repository
and the command's folder bound again read-only when they lie below /tmp), its own /proc and
/dev, no network but loopback. Inside, the command is root with every
capability: they are gVisor's, not the host's (the test makes PID and mount
namespaces and mounts of its own, as on the host). The bundle, the runsc
state and the container are removed when the command ends, also when this
script is interrupted. Exit 77 (skipped) when runsc is not installed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

RUNSC = os.environ.get("SBX_RUNSC", "runsc")
CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN",
    "CAP_SYS_RESOURCE", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
]


def main():
    args = sys.argv[1:]
    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"]
    while args and args[0] == "--env":
        env.append(args[1])
        args = args[2:]
    if not args or args[0] != "--":
        sys.exit(__doc__)
    cmd = args[1:]
    if shutil.which(RUNSC) is None:
        print(f"runsc_exec: {RUNSC} not installed: skipped", file=sys.stderr)
        sys.exit(77)
    given = {e.split("=", 1)[0] for e in env}
    for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if name in os.environ and name not in given:
            env.append(f"{name}={os.environ[name]}")
    top = tempfile.mkdtemp(prefix="sbx-runsc-")
    cid = f"sbx-test-{os.getpid()}"
    bundle = os.path.join(top, "bundle")
    root = os.path.join(top, "state")
    os.makedirs(bundle)
    os.makedirs(root)
    config = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": cmd,
            "env": env,
            "cwd": "/",
            "capabilities": {k: CAPS for k in ("bounding", "effective", "permitted")},
        },
        "root": {"path": "/", "readonly": True},
        "hostname": "sbx-test",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "mode=755"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777"]},
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
        },
    }
    # What the fresh /tmp hides must still be seen: the build tree and the
    # sources live under /tmp when the repository was cloned there (CI's
    # clean clone), so they are bound again, read-only, over the tmpfs.
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    seen = []
    for path in (here, os.path.dirname(os.path.realpath(cmd[0]))):
        if (path == "/tmp" or path.startswith("/tmp/")) and \
                not any(path == p or path.startswith(p + "/") for p in seen):
            seen.append(path)
            config["mounts"].append({"destination": path, "type": "bind", "source": path,
                                     "options": ["rbind", "ro"]})
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(config, f)
    base = [RUNSC, "--root", root, "--platform=ptrace", "--network=none", "--ignore-cgroups"]
    proc = None

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    status = 1
    try:
        proc = subprocess.Popen(base + ["run", "--bundle", bundle, cid])
        status = proc.wait()
    except KeyboardInterrupt:
        status = 130
    finally:
        subprocess.run(base + ["delete", "--force", cid], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(top, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()

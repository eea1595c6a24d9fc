"""The sandbox image the k8s tests run (daemonset/templates/default.yaml's
sbx/sandbox-base:latest), made offline as an OCI layout with Debian's
umoci: a base layer (Debian's static busybox with its applets, /etc/passwd
naming root and sandbox (1000), and, with python=True, the machine's own
python3.11 with the shared libraries it needs and its standard library
without tests, tkinter, idle, ensurepip and the like), then the agent layer
exactly as scripts/agent-image makes it (`make agent-image`), added as a
layer the way a Dockerfile's COPY --from would (tests/images/make-test-images
does the same for its "withagent" image); Entrypoint the agent.

build(out, agent, python) -> (layout, tag). A few seconds; umoci, busybox
and the agent are all it needs. A test harness, never part of the product.
"""
import gzip
import json
import os
import shutil
import subprocess
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUSYBOX = "/bin/busybox"
PYTHON = "/usr/bin/python3.11"
PYLIB = "/usr/lib/python3.11"
PYLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
              "__pycache__", "dist-packages", "site-packages", "config-3.11-x86_64-linux-gnu",
              "distutils", "unittest"}
TAG = "latest"


def _run(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _libs(binary):
    """The shared objects ldd names for binary (absolute paths), or None
    when ldd says it is static."""
    p = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    out = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            out.append(parts[2])
        elif parts and parts[0].startswith("/"):
            out.append(parts[0])
    return out


def _copy(src, root, dest=None):
    dst = os.path.join(root, (dest or src).lstrip("/"))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


def _base(root, python):
    for d in ("bin", "etc", "tmp", "workspace", "home/sandbox", "run", "root", "var/tmp"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    os.chmod(os.path.join(root, "var/tmp"), 0o1777)
    shutil.copy2(BUSYBOX, os.path.join(root, "bin", "busybox"))
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        if a != "busybox" and "/" not in a:
            os.symlink("busybox", os.path.join(root, "bin", a))
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n"
                "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n")
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write("root:x:0:\nsandbox:x:1000:\n")
    os.chown(os.path.join(root, "home/sandbox"), 1000, 1000)
    if not python:
        return
    _copy(PYTHON, root)
    os.symlink("python3.11", os.path.join(root, "usr/bin/python3"))
    plain = set(_libs(PYTHON))
    dst_lib = os.path.join(root, PYLIB.lstrip("/"))
    for dirpath, dirnames, filenames in os.walk(PYLIB):
        dirnames[:] = [d for d in dirnames if d not in PYLIB_SKIP]
        rel = os.path.relpath(dirpath, PYLIB)
        os.makedirs(os.path.join(dst_lib, rel), exist_ok=True)
        for fn in filenames:
            src = os.path.join(dirpath, fn)
            if fn.endswith(".so"):
                # Extension modules whose libraries python's own closure
                # does not hold are left out (ssl, sqlite, curses...).
                if not set(_libs(src) or []) <= plain:
                    continue
            if os.path.isfile(src) and not os.path.islink(src):
                shutil.copy2(src, os.path.join(dst_lib, rel, fn))
    for lib in plain:
        _copy(lib, root)


def _agent_layer(agent, work):
    """The one layer of scripts/agent-image's image, uncompressed."""
    _run(os.path.join(TOP, "scripts", "agent-image"), agent, work)
    lay = os.path.join(work, "sbx-agent")
    with open(os.path.join(lay, "index.json")) as f:
        idx = json.load(f)

    def blob(d):
        return os.path.join(lay, "blobs", "sha256", d.split(":", 1)[1])
    with open(blob(idx["manifests"][0]["digest"])) as f:
        (layer,) = json.load(f)["layers"]
    out = os.path.join(work, "agent-layer.tar")
    with gzip.open(blob(layer["digest"])) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def build(out, agent, python=False):
    """The image at out (an OCI layout, made anew), tag TAG."""
    shutil.rmtree(out, ignore_errors=True)
    work = tempfile.mkdtemp(prefix="sbx-sandbox-image-")
    try:
        img = "%s:%s" % (out, TAG)
        _run("umoci", "init", "--layout", out)
        _run("umoci", "new", "--image", img)
        _run("umoci", "unpack", "--image", img, os.path.join(work, "b"))
        _base(os.path.join(work, "b", "rootfs"), python)
        _run("umoci", "repack", "--image", img, os.path.join(work, "b"))
        layer = _agent_layer(agent, os.path.join(work, "agent"))
        _run("umoci", "raw", "add-layer", "--image", img, layer)
        _run("umoci", "config", "--image", img, "--config.entrypoint", "/.sbx/sandbox-agent",
             "--config.cmd", "--listen", "--config.cmd", "unix:/run/sandbox/agent.sock",
             "--config.env", "PATH=/usr/bin:/bin", "--config.workingdir", "/workspace")
        _run("umoci", "gc", "--layout", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out, TAG

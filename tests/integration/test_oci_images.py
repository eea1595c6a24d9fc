"""What `make images` builds, unpacked by umoci as a runtime would:
- the supervisor's image (scripts/supervisor-image): exactly the supervisor,
  the agent, runc, mkfs.ext4, the shared libraries the dynamic ones load
  and the loader, nothing else (no shell); each of its programs runs from
  the unpacked root alone (chroot, with a /proc of its own), so no library is missing; its config
  (entrypoint, command, port, stop signal SIGUSR2 for the handover) as
  daemonset/supervisor.yaml expects; the oci-archive holds the same index;
- the agent layer (scripts/agent-image): /.sbx/sandbox-agent alone, static.
Everything is built and unpacked in a temporary folder removed after.

Env: SBX_SUPERVISOR, SBX_AGENT (the binaries to put inside).
"""
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
LIB_DIRS = ("lib/", "lib64/", "usr/lib/", "usr/lib64/")
PROGRAMS = {"usr/local/bin/sandbox-supervisor", "usr/local/bin/sandbox-agent",
            "usr/sbin/runc", "usr/sbin/mkfs.ext4"}
DIRS = {"tmp", "run", "var/lib/sbx", "etc/sbx"}


def run(*argv, **kw):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=120, **kw)
    if p.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(argv), p.returncode, p.stdout,
                                                    p.stderr))
    return p.stdout


def in_root(root):
    """The command prefix that runs a program from root alone, as chroot
    would, with a /proc of its own (a private mount and pid namespace, gone
    with the process): the sanitizer build's leak checker reads
    /proc/self/task at exit and dies without it. Call after the file set
    was checked: it adds root/proc."""
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    return ["unshare", "--mount", "--pid", "--fork", "--root=" + root, "--mount-proc"]


def files_under(root):
    """Every non-directory below root, relative; and every directory."""
    files, dirs = set(), set()
    for d, subdirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != ".":
            dirs.add(rel)
        for n in names:
            files.add(os.path.normpath(os.path.join(rel, n)))
    return files, dirs


def blob(layout, digest):
    algo, hexd = digest.split(":", 1)
    with open(os.path.join(layout, "blobs", algo, hexd), "rb") as f:
        return json.load(f)


def image_config(layout):
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    self_manifests = index["manifests"]
    assert len(self_manifests) == 1, index
    manifest = blob(layout, self_manifests[0]["digest"])
    return self_manifests[0]["annotations"]["org.opencontainers.image.ref.name"], \
        blob(layout, manifest["config"]["digest"])


class Images(unittest.TestCase):
    def setUp(self):
        if not SUP or not AGENT:
            self.fail("SBX_SUPERVISOR and SBX_AGENT must name the binaries")
        self.tmp = tempfile.mkdtemp(prefix="sbx-it-images-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def unpack(self, layout, tag, name):
        bundle = os.path.join(self.tmp, "bundle-" + name)
        run("umoci", "unpack", "--image", "%s:%s" % (layout, tag), bundle)
        return bundle

    def test_supervisor_image(self):
        out = os.path.join(self.tmp, "out")
        print(run(os.path.join(TOP, "scripts", "supervisor-image"), SUP, AGENT, out, "test"),
              end="")
        layout = os.path.join(out, "sbx-supervisor")
        tag, cfg = image_config(layout)
        self.assertEqual(tag, "test")
        bundle = self.unpack(layout, tag, "supervisor")
        root = os.path.join(bundle, "rootfs")
        files, dirs = files_under(root)
        self.assertTrue(PROGRAMS <= files, PROGRAMS - files)
        libs = files - PROGRAMS
        self.assertTrue(libs, "no shared library inside")
        for f in sorted(libs):
            self.assertTrue(f.startswith(LIB_DIRS) and ".so" in f,
                            "%s: neither a program of the image nor a shared library" % f)
        self.assertTrue(DIRS <= dirs, DIRS - dirs)
        self.assertFalse(os.path.lexists(os.path.join(root, "bin", "sh")))
        # The agent: the very binary, static (it runs in images that have
        # no libc of ours).
        with open(AGENT, "rb") as a, open(os.path.join(root, "usr/local/bin/sandbox-agent"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        # Each program runs from the unpacked root alone: every library it
        # loads is inside.
        inside = in_root(root)
        self.assertIn("sandbox-supervisor", run(*inside, "/usr/local/bin/sandbox-supervisor",
                                                "--version"))
        self.assertIn("sandbox-agent", run(*inside, "/usr/local/bin/sandbox-agent", "--version"))
        self.assertIn("runc version", run(*inside, "/usr/sbin/runc", "--version"))
        p = subprocess.run(inside + ["/usr/sbin/mkfs.ext4", "-V"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mke2fs", p.stderr)
        # What the DaemonSet relies on.
        c = cfg["config"]
        self.assertEqual(c["Entrypoint"], ["/usr/local/bin/sandbox-supervisor"])
        self.assertEqual(c["Cmd"], ["--listen", "0.0.0.0:7070", "--state-dir", "/var/lib/sbx"])
        self.assertIn("7070/tcp", c["ExposedPorts"])
        self.assertEqual(c["StopSignal"], "SIGUSR2")
        with open(os.path.join(bundle, "config.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["process"]["args"][0], "/usr/local/bin/sandbox-supervisor")
        # The oci-archive is the same layout.
        with tarfile.open(os.path.join(out, "sbx-supervisor.oci.tar")) as t:
            with open(os.path.join(layout, "index.json"), "rb") as f:
                self.assertEqual(t.extractfile("./index.json").read(), f.read())
        size = sum(os.path.getsize(os.path.join(root, f)) for f in files)
        print("supervisor image: %d files, %.1f MiB unpacked (%d libraries)"
              % (len(files), size / 1048576, len(libs)))

    def test_agent_layer(self):
        out = os.path.join(self.tmp, "out")
        run(os.path.join(TOP, "scripts", "agent-image"), AGENT, out, "test")
        bundle = self.unpack(os.path.join(out, "sbx-agent"), "test", "agent")
        files, dirs = files_under(os.path.join(bundle, "rootfs"))
        self.assertEqual(files, {".sbx/sandbox-agent"})
        self.assertEqual(dirs, {".sbx"})


if __name__ == "__main__":
    unittest.main()

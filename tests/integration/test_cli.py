"""The `sbx` CLI (cli/sbx) as a subprocess against a real sandbox-supervisor
with real runc sandboxes: create / ls / info / renew / rm with --json
parsed, exec with live output, exit codes passed through and Ctrl-C
killing the command in the sandbox, cp both ways with sha256 checked (a
progress bar seen on a real terminal), background processes with logs -f,
`sbx shell` driven through a real terminal (Debian's tmux: a command
typed, its output read from the pane, the window resized and `stty size`
changed inside, Ctrl-C going to the sandbox, the local terminal's modes
restored at exit), `sbx mcp` driven by the MCP SDK's own stdio client
(tests/mcp-servers/stdio_client.mjs), snapshot / create --snapshot / fork /
pause / resume, volumes with create --volume (volume_busy), images imported
and removed, config from a file, --help on every command and action. Everything made (sandboxes, the supervisor, tmux servers) is
removed, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_clients import (CLI, MCP_CONFIG, MCP_ECHO, ROOT, SupervisorCase, random_file,  # noqa: E402
                         sha256_file)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
PY = "/usr/bin/python3"
STDIO_CLIENT = os.path.join(ROOT, "tests", "mcp-servers", "stdio_client.mjs")
COMMANDS = ["create", "ls", "info", "rm", "renew", "exec", "shell", "ps", "kill", "logs", "cp",
            "ports", "mcp", "pause", "resume", "fork", "network", "snapshot", "volume", "secret",
            "image"]
ACTIONS = {"snapshot": ["create", "ls", "info", "rm"], "volume": ["create", "ls", "info", "rm"],
           "secret": ["set", "ls", "rm"],
           "image": ["import", "pull", "ls", "info", "rm"]}
MAKE_IMAGES = os.path.join(ROOT, "tests", "images", "make-test-images")


class CliTest(SupervisorCase):
    @classmethod
    def prepare(cls):
        cls.tmux_sock = "sbx-it-%d" % os.getpid()
        rc, out, err = cls.sbx("create", "--timeout", "600", "--json")
        assert rc == 0, err
        cls.sid = json.loads(out)["id"]

    @classmethod
    def release(cls):
        subprocess.run(["tmux", "-L", cls.tmux_sock, "kill-server"], capture_output=True)
        cls.sbx("rm", cls.sid)

    @classmethod
    def sbx(cls, *args, env=None, timeout=60, stdin=None):
        p = subprocess.run([PY, CLI] + list(args), env=env or cls.env, capture_output=True,
                           timeout=timeout, input=stdin)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    # ---- lifecycle ----
    def test_create_ls_info_renew_rm(self):
        rc, out, err = self.sbx("create", "--cpus", "0.5", "--memory", "256M", "--env", "A=1",
                                "--env", "B=x=y", "--timeout", "300")
        self.assertEqual(rc, 0, err)
        sid = out.strip()
        try:
            rc, out, _ = self.sbx("ls", "--json")
            self.assertIn(sid, [b["id"] for b in json.loads(out)])
            rc, out, _ = self.sbx("ls")
            self.assertIn(sid, out)
            self.assertTrue(out.startswith("ID"), out)
            rc, out, _ = self.sbx("info", sid)
            info = json.loads(out)
            self.assertEqual((info["resources"]["cpus"], info["resources"]["memory"]), (0.5, 256 << 20))
            rc, out, _ = self.sbx("exec", sid, "--", "sh", "-c", "echo $A $B")
            self.assertEqual((rc, out), (0, "1 x=y\n"))
            rc, out, _ = self.sbx("renew", sid, "5000", "--json")
            self.assertGreater(json.loads(out)["expires_at"], info["expires_at"])
        finally:
            rc, out, err = self.sbx("rm", "--json", sid)
        self.assertEqual((rc, json.loads(out)), (0, {"deleted": [sid]}), err)
        rc, out, _ = self.sbx("ls", "--json")
        self.assertNotIn(sid, [b["id"] for b in json.loads(out)])
        rc, _, err = self.sbx("rm", sid)
        self.assertEqual(rc, 1)
        self.assertIn("not_found", err)

    def test_errors(self):
        rc, _, err = self.sbx("info", "sb-nosuch")
        self.assertEqual(rc, 1)
        self.assertIn("404 not_found", err)
        rc, _, err = self.sbx("ls", "--token", "0" * 64)
        self.assertEqual(rc, 1)
        self.assertIn("401", err)
        rc, _, err = self.sbx("cp", "%s:/etc/passwd" % self.sid, os.path.join(self.tmp, "pw"), "--json")
        self.assertEqual(rc, 1)
        e = json.loads(err.strip().splitlines()[-1])["error"]
        self.assertEqual((e["status"], e["code"], e["path"]), (403, "forbidden", "/etc/passwd"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "pw")))
        # --allow makes a policy; this supervisor (no --uplink) refuses it.
        rc, _, err = self.sbx("create", "--allow", "pypi.org:443")
        self.assertEqual(rc, 1)
        self.assertIn("400 bad_request", err)
        self.assertIn("uplink", err)
        rc, _, err = self.sbx("network", self.sid, "--allow", "pypi.org:443")
        self.assertEqual(rc, 1)
        self.assertIn("uplink", err)
        rc, _, err = self.sbx("network", self.sid, "--policy", os.path.join(self.tmp, "none.json"))
        self.assertEqual(rc, 1)
        self.assertIn("none.json", err)
        rc, out, err = self.sbx("rm", "--json", "sb-nosuch1")
        self.assertEqual((rc, json.loads(out)), (1, {"deleted": []}))

    def test_help_everywhere(self):
        rc, out, _ = self.sbx("--help")
        self.assertEqual(rc, 0)
        for c in COMMANDS:
            self.assertIn(c, out)
            rc, out2, err = self.sbx(c, "--help")
            self.assertEqual(rc, 0, (c, err))
            self.assertIn("usage: sbx " + c, out2)
            for act in ACTIONS.get(c, []):
                self.assertIn(act, out2)
                rc, out3, err = self.sbx(c, act, "--help")
                self.assertEqual(rc, 0, (c, act, err))
                self.assertIn("usage: sbx %s %s" % (c, act), out3)
        rc, _, err = self.sbx("snapshot")
        self.assertEqual(rc, 2)
        self.assertIn("ACTION", err)

    # ---- snapshots, fork, pause ----
    def test_snapshot_restore_fork_pause(self):
        rc, out, err = self.sbx("create", "--timeout", "300")
        self.assertEqual(rc, 0, err)
        sid, made = out.strip(), []
        try:
            made.append(sid)
            self.assertEqual(self.sbx("exec", sid, "-c", "--", "echo kept > /workspace/f")[0], 0)
            rc, out, err = self.sbx("snapshot", "create", sid, "--name", "cli-snap", "--json")
            self.assertEqual(rc, 0, err)
            snap = json.loads(out)
            self.assertEqual((snap["name"], snap["sandbox"]), ("cli-snap", sid))
            rc, out, _ = self.sbx("snapshot", "ls", "--json")
            self.assertIn(snap["id"], [s["id"] for s in json.loads(out)])
            rc, out, _ = self.sbx("snapshot", "ls")
            self.assertTrue(out.startswith("ID"), out)
            self.assertIn("cli-snap", out)
            self.assertEqual(json.loads(self.sbx("snapshot", "info", snap["id"])[1])["id"], snap["id"])
            self.sbx("exec", sid, "-c", "--", "echo later > /workspace/f")
            rc, out, err = self.sbx("create", "--snapshot", snap["id"], "--timeout", "120")
            self.assertEqual(rc, 0, err)
            made.append(out.strip())
            self.assertEqual(self.sbx("exec", made[-1], "--", "cat", "/workspace/f")[:2], (0, "kept\n"))
            rc, out, err = self.sbx("fork", sid, "-n", "2")
            self.assertEqual(rc, 0, err)
            forks = out.split()
            made += forks
            self.assertEqual(len(forks), 2)
            for f in forks:
                self.assertEqual(self.sbx("exec", f, "--", "cat", "/workspace/f")[:2], (0, "later\n"))
            rc, out, err = self.sbx("pause", sid)
            self.assertEqual((rc, out), (0, "%s paused\n" % sid), err)
            rc, _, err = self.sbx("exec", sid, "--", "true")
            self.assertEqual(rc, 1)
            self.assertIn("409 paused", err)
            rc, out, err = self.sbx("resume", sid, "--json")
            self.assertEqual((rc, json.loads(out)["state"]), (0, "running"), err)
            self.assertEqual(self.sbx("exec", sid, "--", "true")[0], 0)
            rc, out, err = self.sbx("snapshot", "rm", snap["id"], "sn-000000000000", "--json")
            self.assertEqual((rc, json.loads(out)), (1, {"deleted": [snap["id"]]}))
            self.assertIn("sbx snapshot rm sn-000000000000: 404", err)
            rc, _, err = self.sbx("create", "--snapshot", snap["id"])
            self.assertEqual(rc, 1)
            self.assertIn("404", err)
        finally:
            self.sbx("rm", *made)

    def test_secrets(self):
        value = "sk-cli-" + os.urandom(12).hex()
        # the value from stdin (one trailing newline dropped), never argv
        rc, out, err = self.sbx("secret", "set", "clikey", stdin=(value + "\n").encode())
        self.assertEqual((rc, out), (0, "clikey\n"), err)
        try:
            rc, out, err = self.sbx("secret", "ls")
            self.assertEqual(rc, 0, err)
            self.assertTrue(out.startswith("NAME"), out)
            self.assertIn("clikey", out)
            self.assertNotIn(value, out)
            rows = json.loads(self.sbx("secret", "ls", "--json")[1])
            self.assertEqual([(r["name"], r["size"]) for r in rows], [("clikey", len(value))])
            rc, out, err = self.sbx("create", "--secret", "TOKEN=clikey", "--secret-file",
                                    "key.txt=clikey", "--timeout", "120")
            self.assertEqual(rc, 0, err)
            sid = out.strip()
            try:
                rc, out, _ = self.sbx("exec", sid, "--", "sh", "-c", "echo $TOKEN")
                self.assertEqual((rc, out), (0, value + "\n"))
                rc, out, _ = self.sbx("exec", sid, "--", "cat", "/run/secrets/key.txt")
                self.assertEqual((rc, out), (0, value))
                self.assertNotIn(value, self.sbx("info", sid)[1])
            finally:
                self.sbx("rm", sid)
            rc, _, err = self.sbx("create", "--secret", "TOKEN")
            self.assertEqual(rc, 2)
            self.assertIn("VAR=NAME", err)
            rc, _, err = self.sbx("create", "--secret-file", "key.txt")
            self.assertEqual(rc, 2)
            self.assertIn("FILE=NAME", err)
            rc, _, err = self.sbx("create", "--secret", "TOKEN=nope")
            self.assertEqual(rc, 1)
            self.assertIn("400", err)
        finally:
            rc, out, err = self.sbx("secret", "rm", "clikey")
        self.assertEqual((rc, out), (0, "clikey\n"), err)
        rc, _, err = self.sbx("secret", "rm", "clikey")
        self.assertEqual(rc, 1)
        self.assertIn("404", err)

    def test_volumes_and_images(self):
        rc, out, err = self.sbx("volume", "create", "clivol", "64M", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["size"], 64 << 20)
        sid = None
        try:
            rc, out, _ = self.sbx("volume", "ls")
            self.assertIn("clivol", out)
            self.assertEqual(self.sbx("volume", "create", "clivol", "64M")[0], 1)
            rc, out, err = self.sbx("create", "--volume", "clivol:/workspace/v", "--timeout", "120")
            self.assertEqual(rc, 0, err)
            sid = out.strip()
            self.assertEqual(self.sbx("exec", sid, "-c", "--", "echo v > /workspace/v/x")[0], 0)
            rc, _, err = self.sbx("create", "--volume", "clivol:/data/v:ro")
            self.assertEqual(rc, 1)
            self.assertIn("409 volume_busy", err)
            rc, _, err = self.sbx("volume", "rm", "clivol")
            self.assertEqual(rc, 1)
            self.assertIn("volume_busy", err)
            rc, _, err = self.sbx("create", "--volume", "clivol")
            self.assertEqual(rc, 2)  # no mount path: usage
            info = json.loads(self.sbx("volume", "info", "clivol")[1])
            self.assertEqual(info["mounted"]["writer"], sid)
        finally:
            if sid:
                self.sbx("rm", sid)
            rc, out, err = self.sbx("volume", "rm", "clivol")
        self.assertEqual((rc, out), (0, "clivol\n"), err)
        # images: import (an oci-archive), ls, info, a sandbox of it, rm
        imgs = os.path.join(self.tmp, "images")
        subprocess.run([MAKE_IMAGES, imgs], check=True, stdout=subprocess.DEVNULL, timeout=120)
        rc, out, err = self.sbx("image", "import", os.path.join(imgs, "tiny.oci.tar"), "--json")
        self.assertEqual(rc, 0, err)
        (tiny,) = json.loads(out)
        self.assertEqual(tiny["refs"], ["tiny"])
        rc, out, _ = self.sbx("image", "ls")
        self.assertIn("tiny", out)
        self.assertEqual(json.loads(self.sbx("image", "info", "tiny")[1])["digest"], tiny["digest"])
        rc, out, err = self.sbx("create", "--image", "tiny", "--timeout", "60")
        self.assertEqual(rc, 0, err)
        try:
            self.assertEqual(self.sbx("exec", out.strip(), "-c", "--", "echo $GREETING")[:2],
                             (0, "hello-from-image\n"))
        finally:
            self.sbx("rm", out.strip())
        rc, out, err = self.sbx("image", "rm", "tiny")
        self.assertEqual((rc, out), (0, "tiny\n"), err)
        self.assertEqual(self.sbx("image", "info", "tiny")[0], 1)

    def test_config_file(self):
        cfg = os.path.join(self.tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump({"url": self.env["SBX_URL"], "token": self.env["SBX_TOKEN"]}, f)
        env = {k: v for k, v in self.env.items() if k not in ("SBX_URL", "SBX_TOKEN")}
        env["SBX_CONFIG"] = cfg
        rc, out, err = self.sbx("ls", "--json", env=env)
        self.assertEqual(rc, 0, err)
        self.assertIn(self.sid, out)
        env["SBX_CONFIG"] = os.path.join(self.tmp, "none.json")
        rc, out, err = self.sbx("ls", env=env)
        self.assertEqual(rc, 1)  # the default URL, nobody there or no token

    # ---- exec ----
    def test_exec_exit_codes_and_json(self):
        rc, out, err = self.sbx("exec", self.sid, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
        self.assertEqual((rc, out, err), (7, "out\n", "err\n"))
        rc, out, _ = self.sbx("exec", self.sid, "-c", "--", "kill -9 $$")
        self.assertEqual(rc, 128 + 9)
        rc, out, _ = self.sbx("exec", "--json", self.sid, "--", "sh", "-c", "echo j; exit 2")
        r = json.loads(out)
        self.assertEqual((rc, r["exit_code"], r["stdout"]), (2, 2, "j\n"))
        rc, out, _ = self.sbx("exec", self.sid, "--", "ls", "-la", "/workspace")
        self.assertEqual(rc, 0)
        self.assertIn("..", out)
        rc, _, err = self.sbx("exec", self.sid, "--timeout", "0.5", "--", "sleep", "5")
        self.assertEqual(rc, 128 + 9)
        self.assertIn("timed out", err)

    def test_exec_streams_live(self):
        p = subprocess.Popen([PY, CLI, "exec", self.sid, "--", "sh", "-c", "echo first; sleep 2; echo second"],
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            t0 = time.monotonic()
            first = p.stdout.readline()
            t1 = time.monotonic()
            second = p.stdout.readline()
            t2 = time.monotonic()
            self.assertEqual((first, second), (b"first\n", b"second\n"))
            self.assertGreater(t2 - t1, 1.5, (t1 - t0, t2 - t1))  # the first came before the sleep
            self.assertEqual(p.wait(30), 0)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()

    def test_exec_ctrl_c_kills_the_command(self):
        p = subprocess.Popen([PY, CLI, "exec", self.sid, "-c", "--", "echo started; exec sleep 88.5"],
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self.assertEqual(p.stdout.readline(), b"started\n")
            self.assertTrue(self.running("88.5"))
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(20), 130)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()
        deadline = time.monotonic() + 10
        while self.running("88.5"):
            self.assertLess(time.monotonic(), deadline, "the command outlived its Ctrl-C")
            time.sleep(0.2)

    def running(self, needle):
        rc, out, _ = self.sbx("exec", self.sid, "-c", "--",
                              "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
        return needle in out

    # ---- files ----
    def test_cp_both_ways(self):
        src = os.path.join(self.tmp, "in.bin")
        want = random_file(src, 8)
        rc, out, err = self.sbx("cp", "--json", src, "%s:/workspace/sub/in.bin" % self.sid, "-p")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["size"], 8 << 20)
        self.assertEqual(err, "")  # no progress bar when stderr is not a terminal
        rc, out, _ = self.sbx("exec", self.sid, "--", "sha256sum", "/workspace/sub/in.bin")
        self.assertEqual(out.split()[0], want)
        back = os.path.join(self.tmp, "out.bin")
        rc, out, err = self.sbx("cp", "%s:/workspace/sub/in.bin" % self.sid, back)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sha256_file(back), want)
        # From stdin, into a folder, to stdout.
        rc, out, err = self.sbx("cp", "-", "%s:/workspace/piped.txt" % self.sid, stdin=b"from stdin\n")
        self.assertEqual(rc, 0, err)
        rc, _, err = self.sbx("cp", "%s:/workspace/piped.txt" % self.sid, self.tmp + "/")
        self.assertEqual(rc, 0, err)
        with open(os.path.join(self.tmp, "piped.txt"), "rb") as f:
            self.assertEqual(f.read(), b"from stdin\n")
        p = subprocess.run([PY, CLI, "cp", "%s:/workspace/piped.txt" % self.sid, "-"], env=self.env,
                           capture_output=True, timeout=30)
        self.assertEqual(p.stdout, b"from stdin\n")

    # ---- background processes ----
    def test_background_and_logs_follow(self):
        rc, out, err = self.sbx("exec", "-d", "--tag", "cli", self.sid, "-c", "--",
                                "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo bad >&2; exit 4")
        self.assertEqual(rc, 0, err)
        pid = int(out)
        rc, out, err = self.sbx("logs", self.sid, str(pid), "-f")
        self.assertEqual((rc, out, err), (4, "line1\nline2\nline3\n", "bad\n"))
        rc, out, _ = self.sbx("logs", self.sid, str(pid), "--offset", "6")
        self.assertEqual(out, "line2\nline3\n")
        rc, out, _ = self.sbx("logs", self.sid, str(pid), "--json")
        evs = [json.loads(x) for x in out.splitlines()]
        self.assertEqual(evs[-1]["event"], "end")
        rc, out, _ = self.sbx("ps", self.sid, "--tag", "cli", "--json")
        self.assertEqual([(p["pid"], p["exit_code"]) for p in json.loads(out)], [(pid, 4)])
        rc, out, _ = self.sbx("exec", "-d", self.sid, "--", "sleep", "60")
        sleeper = int(out)
        rc, _, err = self.sbx("kill", self.sid, str(sleeper))
        self.assertEqual(rc, 0, err)
        rc, out, _ = self.sbx("ps", self.sid, "--json")
        self.assertEqual([p["state"] for p in json.loads(out) if p["pid"] == sleeper], ["exited"])

    # ---- a real terminal ----
    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.tmux_sock] + list(args), capture_output=True,
                              text=True, env=self.env, timeout=20)

    def pane_until(self, target, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            text = self.tmux("capture-pane", "-p", "-J", "-t", target).stdout
            if needle in text:
                return text
            if time.monotonic() > deadline:
                self.fail("%r never showed in the pane:\n%s" % (needle, text))
            time.sleep(0.1)

    def test_shell_in_tmux(self):
        st = [os.path.join(self.tmp, "stty.%d" % i) for i in range(3)]
        script = ("stty -g > {0}; {3} {4} shell {5}; echo \"rc=$?\"; stty -g > {1}; "
                  "{3} {4} shell {5}; echo \"rc2=$?\"; stty -g > {2}; sleep 600"
                  .format(st[0], st[1], st[2], PY, CLI, self.sid))
        r = self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "sh1", "-x", "80", "-y", "24",
                      "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.pane_until("sh1", "$ ")  # the shell's prompt: typing before it may be lost
            self.tmux("send-keys", "-t", "sh1", "echo hi-$((6*7))", "Enter")
            self.pane_until("sh1", "hi-42")
            self.tmux("send-keys", "-t", "sh1", "stty size", "Enter")
            self.pane_until("sh1", "24 80")
            r = self.tmux("resize-window", "-t", "sh1", "-x", "100", "-y", "30")
            self.assertEqual(r.returncode, 0, r.stderr)
            time.sleep(0.5)
            self.tmux("send-keys", "-t", "sh1", "clear; stty size", "Enter")
            self.pane_until("sh1", "30 100")
            # Ctrl-C goes to the sandbox's terminal, not to sbx.
            self.tmux("send-keys", "-t", "sh1", "sleep 30", "Enter")
            time.sleep(0.5)
            self.tmux("send-keys", "-t", "sh1", "C-c")
            self.tmux("send-keys", "-t", "sh1", "echo after-$((1+1))", "Enter")
            self.pane_until("sh1", "after-2", timeout=10)
            self.tmux("send-keys", "-t", "sh1", "clear; exit 5", "Enter")
            self.pane_until("sh1", "rc=5")
            # The second session ends by a SIGTERM to sbx: the terminal's
            # modes come back all the same, and its shell is killed.
            text = self.pane_until("sh1", "$ ")
            self.assertIn("rc=5", text)
            shell_sh = int(self.tmux("display", "-p", "-t", "sh1", "#{pane_pid}").stdout)
            kid = [p for p in os.listdir("/proc") if p.isdigit() and self.ppid(p) == shell_sh]
            self.assertEqual(len(kid), 1, kid)
            os.kill(int(kid[0]), signal.SIGTERM)
            self.pane_until("sh1", "rc2=143")
            deadline = time.monotonic() + 5
            while not os.path.exists(st[2]) or os.path.getsize(st[2]) == 0:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
            modes = []
            for path in st:
                with open(path) as f:
                    modes.append(f.read())
            self.assertEqual(modes, [modes[0]] * 3)  # the terminal's modes restored both times
            rc, out, _ = self.sbx("ps", self.sid, "--tag", "sbx-terminal", "--json")
            procs = json.loads(out)
            self.assertEqual([p["state"] for p in procs], ["exited", "exited"], procs)
            self.assertEqual(sorted(str(p["exit_code"] or p["signal"]) for p in procs), ["5", "KILL"])
        finally:
            self.tmux("kill-session", "-t", "sh1")

    @staticmethod
    def ppid(pid):
        try:
            with open("/proc/%s/stat" % pid) as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def test_cp_progress_on_a_terminal(self):
        src = os.path.join(self.tmp, "prog.bin")
        random_file(src, 4)
        script = "%s %s cp %s %s:/workspace/prog.bin; echo \"cp-rc=$?\"; sleep 600" % (PY, CLI, src, self.sid)
        r = self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "cp1", "-x", "160", "-y", "10",
                      "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            text = self.pane_until("cp1", "cp-rc=")
            self.assertIn("cp-rc=0", text)
            self.assertIn("100%", text)
            self.assertIn("4.0 MiB/4.0 MiB", text)
        finally:
            self.tmux("kill-session", "-t", "cp1")

    # ---- MCP over stdio ----
    def test_mcp_relay_with_the_sdk_stdio_client(self):
        if not os.path.isdir(os.path.join(ROOT, "tests", "mcp-servers", "node_modules")):
            self.fail("tests/mcp-servers/node_modules missing: run scripts/install-mcp-servers")
        sid = self.sid
        rc, _, err = self.sbx("cp", "-", "%s:/workspace/mcp_echo.py" % sid, stdin=MCP_ECHO.encode())
        self.assertEqual(rc, 0, err)
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=30)
        h = {"Authorization": "Bearer " + self.sup.token, "Content-Type": "application/json"}
        c.request("PUT", "/v1/sandboxes/%s/mcp/echo" % sid, json.dumps(MCP_CONFIG["servers"]["echo"]), h)
        resp = c.getresponse()
        self.assertEqual(resp.status, 200, resp.read())
        resp.read()
        try:
            p = subprocess.run(["node", STDIO_CLIENT, PY, CLI, "mcp", sid, "echo"], env=self.env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            seen = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertEqual(seen["server"]["name"], "echo")
            self.assertEqual(seen["tools"], ["echo"])
            self.assertEqual(seen["content"], [{"type": "text", "text": "echo: over stdio"}])
            self.assertEqual(sorted(seen["logs"]), ["echoing over stdio", "ready"])
            # The relay ended its session at exit (DELETE): none stays open.
            deadline = time.monotonic() + 10
            while True:
                c.request("GET", "/v1/sandboxes/%s/mcp" % sid, headers={"Authorization": "Bearer " + self.sup.token})
                srv = json.loads(c.getresponse().read())["servers"][0]
                if srv["sessions"] == 0:
                    break
                self.assertLess(time.monotonic(), deadline, srv)
                time.sleep(0.2)
            self.assertGreaterEqual(srv["sessions_opened"], 1)
        finally:
            c.request("DELETE", "/v1/sandboxes/%s/mcp/echo" % sid, headers=h)
            c.getresponse().read()
            c.close()


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)

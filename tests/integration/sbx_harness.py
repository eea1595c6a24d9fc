"""Start a real sandbox-supervisor and clean up everything it made.

Used by the integration tests: the supervisor runs with a temporary state
folder and a free loopback port; cleanup() kills it if it still runs,
removes every runc (and runsc) container whose bundle lies in that folder,
unmounts whatever is mounted below it, detaches the loop devices of the disk
images below it and deletes it, whether the test passed or not.
Stdlib only (http.client), run with Debian's /usr/bin/python3.

SBX_IT_ISOLATION=gvisor runs a suite's sandboxes under gVisor (runsc): the
supervisor keeps its pool of gvisor sandboxes (--pool gvisor:host=N, no runc
pool), create() asks for "isolation": "gvisor", and pools() shows that
isolation's pools. What a test checks on the host's processes (a runc
sandbox's processes are the host's) it checks inside under gVisor
(sandbox_procs), where they live.
"""
import atexit
import fcntl
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from sbx_leftovers import (cgroup_procs, detach_loops_under, kill_cgroups, list_containers,
                           loops_left, loops_under, mounts_elsewhere, mounts_under,
                           remove_containers, unmount_under)

RUNTIME = os.environ.get("SBX_RUNTIME", "runc")
RUNSC = os.environ.get("SBX_RUNSC", "runsc")
ISOLATION = os.environ.get("SBX_IT_ISOLATION", "runc")
if ISOLATION not in ("runc", "gvisor"):
    raise SystemExit("SBX_IT_ISOLATION=%s: want runc or gvisor" % ISOLATION)
GVISOR = ISOLATION == "gvisor"
if GVISOR and shutil.which(RUNSC) is None:
    print("%s not installed: the gvisor suites are skipped" % RUNSC)
    raise SystemExit(77)

# Supervisors not cleaned up yet: a signal to the test process (ctest's
# timeout, ^C) still removes what they made before it dies.
_live = set()


def _on_signal(signum, frame):
    for s in list(_live):
        try:
            s.cleanup()
        except Exception:  # noqa: BLE001 - best effort while dying
            pass
    os._exit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


class Supervisor:
    def __init__(self, binary, agent, state_dir=None, pool_size=2, extra=(), host="127.0.0.1",
                 wrap=(), token=None, ca_file=None):
        """host: the address to listen on (port 0); wrap: a command the
        supervisor runs under (nsenter --net=... to run it in a network
        namespace of the test's); token: the one to call with when
        --tenants is in extra (the supervisor then has no token file), else
        the state folder's; ca_file: it serves HTTPS (--tls-cert in extra)
        and its certificate is verified against this CA."""
        self.ca_file = ca_file
        self.binary = binary
        self.host = host
        self.wrap = list(wrap)
        self.agent = agent
        self.owns_dir = state_dir is None
        self.root = tempfile.mkdtemp(prefix="sbx-it-") if state_dir is None else None
        self.state_dir = state_dir or os.path.join(self.root, "state")
        self.pool_size = pool_size
        self.extra = list(extra)
        self.proc = None
        self.port = None
        self.token = token
        self.metrics_port = None
        self.log_path = None

    # ---- process ----
    def start(self, timeout=30):
        log_dir = self.root or os.path.dirname(self.state_dir)
        self.log_path = os.path.join(log_dir, "supervisor-%d.log" % int(time.time() * 1000))
        log = open(self.log_path, "wb")
        pools = ["--pool-size", str(self.pool_size)]
        if GVISOR:
            pools = ["--pool-size", "0", "--runsc", RUNSC,
                     "--pool", "gvisor:host=%d" % self.pool_size]
        cmd = self.wrap + [self.binary, "--listen", self.host + ":0", "--state-dir", self.state_dir,
                           "--agent", self.agent, "--runtime", RUNTIME] + pools + self.extra
        register_run(self.state_dir, self.root, self.extra)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log,
                                     stdin=subprocess.DEVNULL)
        _live.add(self)
        log.close()
        listening = rb"listening on https?://" + re.escape(self.host.encode()) + rb":(\d+)"
        buf, ready = read_until(self.proc, lambda b: re.search(listening, b) and (
            b"token" in b or b"tenants from" in b), timeout)
        if not ready:
            raise RuntimeError("supervisor did not start: %r\n%s" % (buf, self.log()))
        self.port = int(re.search(listening, buf).group(1))
        mm = re.search(rb"metrics on https?://127\.0\.0\.1:(\d+)", buf)
        if mm:
            self.metrics_port = int(mm.group(1))
        if self.token is None:
            with open(os.path.join(self.state_dir, "token")) as f:
                self.token = f.read().strip()
        return self

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # ---- HTTP ----
    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.ca_file else "http", self.host, self.port)

    def ssl_context(self):
        """The client's side of an HTTPS supervisor: its CA, the name
        checked."""
        return ssl.create_default_context(cafile=self.ca_file)

    def conn(self, timeout=30):
        if self.ca_file:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.ssl_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, token=True, headers=None, conn=None,
                timeout=30):
        """Returns (status, headers dict (lowercase keys), parsed JSON or raw bytes)."""
        h = dict(headers or {})
        if token is True:
            h["Authorization"] = "Bearer " + self.token
        elif token:
            h["Authorization"] = token
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        own = conn is None
        c = conn or self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            resp = c.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            if own:
                c.close()
        if hdrs.get("content-type", "").startswith("application/json"):
            return resp.status, hdrs, json.loads(data)
        return resp.status, hdrs, data

    def create(self, **kw):
        kw.setdefault("isolation", ISOLATION)
        st, _, body = self.request("POST", "/v1/sandboxes", kw)
        if st != 201:
            raise AssertionError("create: %d %r" % (st, body))
        return body

    def exec(self, sid, conn=None, **kw):
        return self.request("POST", "/v1/sandboxes/%s/exec" % sid, kw, conn=conn)

    def pools(self):
        st, _, body = self.request("GET", "/v1/pools")
        assert st == 200, body
        return {p["image"]: p for p in body["pools"] if p["isolation"] == ISOLATION}

    def wait_ready(self, image="host", n=None, timeout=60):
        n = self.pool_size if n is None else n
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pools()[image]["ready"] >= n:
                return
            time.sleep(0.05)
        raise AssertionError("pool %s never reached %d ready: %r" % (image, n, self.pools()))

    # ---- cleanup ----
    def cleanup(self):
        _live.discard(self)
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=30)
        wait_runtime_calls(self.state_dir)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        left = remove_run(self.state_dir, self.root)
        if left:
            # A copy of a mount in another process's namespace is
            # unmounted there too (unmount_under); the namespaces of the
            # tests that hide /tmp or /run start without copies
            # (sbx_leftovers.detach_below), so what is left is a leak.
            raise RuntimeError("cleanup of %s left %s (its run's record stays for the next sweep)"
                               % (self.state_dir, left))


def read_head(sock, timeout=120):
    """(status, headers with lowercase keys, what came after the head) of
    one response."""
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = sock.recv(65536)
        if not c:
            raise ConnectionError("closed before a response head: %r" % buf)
        buf += c
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, rest


def read_until(proc, found, timeout):
    """What proc wrote on stdout, read until found(what) is true: (what,
    True); or until its stdout ends, it exits or timeout passes: (what,
    False). How a test waits for the line a process it started prints
    once ready (a supervisor's, a kubelet harness's)."""
    deadline = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            if found(buf):
                return buf, True
        if proc.poll() is not None:
            break
    return buf, False


def stop_clean(sup):
    """SIGINT (the stop that destroys every sandbox; SIGTERM leaves them to
    the next start) and check a clean end: exit 0 (in a sanitizer build that
    also means no leak or error report), no sanitizer output, no container
    left."""
    sup.signal(signal.SIGINT)
    rc = sup.wait(60)
    log = sup.log()
    if rc is None:
        log += stuck_report(sup.proc.pid)
    assert rc == 0, "supervisor exit %r\n%s" % (rc, log)
    assert "Sanitizer" not in log and "runtime error" not in log, log
    left = containers_under(sup.state_dir)
    assert not left, left
    # (a copy of its disks' mounts that another test's namespace took is
    # not the supervisor's leak, and holds the device until detached)
    loops = loops_left(sup.state_dir)
    assert not loops, loops


def tenants_supervisor(binary, agent, tenants, admin, extra=(), pool_size=1):
    """A started supervisor on a folder of its own with a --tenants file of
    tenants ({name: {"token": T, ...}}: each token kept as its SHA-256,
    the other fields as they are), called with the token admin; all it
    made removed again if the start fails. End it with end_clean."""
    sup = Supervisor(binary, agent, pool_size=pool_size, token=admin)
    path = os.path.join(sup.root, "tenants.json")
    doc = {name: dict({k: v for k, v in t.items() if k != "token"},
                      tokens=["sha256:" + hashlib.sha256(t["token"].encode()).hexdigest()])
           for name, t in tenants.items()}
    with open(path, "w") as f:
        json.dump({"tenants": doc}, f)
    sup.extra = ["--tenants", path] + list(extra)
    try:
        return sup.start()
    except BaseException:
        sup.cleanup()
        raise


def pooled_image_supervisor(test_cls, recipe, tokens, extra=(), timeout=120):
    """For a test class: sbx's image `recipe` assembled by images/build
    (its Debian part cached per machine, made here on first use) into a
    temporary folder, a supervisor with the tenants of tokens ({name:
    token}; it calls with "alice"'s) importing it with a runc pool of 1
    (limits of 1 CPU and 1G by default, up to 2 CPUs and 2G), its pool
    ready, a sandbox of it created; all removed at the class's end.
    Returns (supervisor, the sandbox's view)."""
    top = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    tmp = tempfile.mkdtemp(prefix="sbx-it-%s-" % recipe)
    test_cls.addClassCleanup(shutil.rmtree, tmp, ignore_errors=True)
    t0 = time.monotonic()
    out = subprocess.run([os.path.join(top, "images", "build"), recipe, tmp],
                         check=True, capture_output=True, text=True, timeout=3600)
    print(out.stdout.strip(), "(%.1f s)" % (time.monotonic() - t0), file=sys.stderr)
    image = "sbx/" + recipe
    tenants = {n: {"token": t} for n, t in tokens.items()}
    sup = tenants_supervisor(os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"], tenants,
                             tokens["alice"], pool_size=0, extra=[
                                 "--import-image", "%s/sbx-%s" % (tmp, recipe),
                                 "--pool", "runc:%s=1" % image,
                                 "--default-resources", "cpus=1,memory=1G,pids=512,disk=1G",
                                 "--max-resources", "cpus=2,memory=2G,pids=1024,disk=4G"]
                             + list(extra))
    test_cls.addClassCleanup(end_clean, sup)
    sup.wait_ready(image, 1, timeout=timeout)
    return sup, sup.create(image=image, isolation="runc", timeout=900)


def end_clean(sup):
    """A test class's supervisor at its end: stop_clean while it runs, and
    no mount or loop device left below its state folder; then all it made
    removed, whatever happened."""
    try:
        if sup.alive():
            stop_clean(sup)
            assert mounts_under(sup.state_dir) == [], mounts_under(sup.state_dir)
            assert loops_left(sup.state_dir) == [], loops_under(sup.state_dir)
    finally:
        sup.cleanup()


def end_all(sups, helpers=(), root=None, clean=True):
    """A test's end with several supervisors (some on one folder, started
    again) and helpers (anything with a stop(): an s3rver, a control
    plane): each supervisor, newest first, end_clean'd (clean) or cleaned
    up, every one of them even when one fails; then the helpers stopped and
    root removed; then the first failure raised."""
    failed = None
    for s in reversed(list(sups)):
        try:
            if clean:
                end_clean(s)
            else:
                s.cleanup()
        except BaseException as e:  # noqa: BLE001 - raised once all is ended
            failed = failed or e
    for x in helpers:
        if x is not None:
            x.stop()
    if root:
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        raise failed


def stuck_report(pid):
    """What a supervisor that did not stop is waiting for: its threads'
    stacks and the processes below it (a runtime call that hangs shows
    there), for the failure message."""
    out = ["\n---- the supervisor (pid %d) did not stop; its threads and children ----" % pid]
    for argv in (["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                 ["ps", "-o", "pid,ppid,etime,stat,args", "--forest", "--ppid", str(pid)]):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            out.append(p.stdout[-20000:])
        except (OSError, subprocess.SubprocessError) as e:
            out.append("%s: %s" % (argv[0], e))
    return "\n".join(out)


def runtimes(state_dir):
    """The runtime commands (argv prefixes) a supervisor of state_dir runs
    containers with: runc, and runsc with its state in <state>/runsc (or
    the --runsc-root it was given, as its run's record says: a sweep after
    the harness died knows no Supervisor object)."""
    run = read_run(run_record(state_dir)) or {}
    rts = [rt for rt in [run.get("runc", [RUNTIME])] if rt]
    root = run.get("runsc_root") or os.path.join(state_dir, "runsc")
    # (an empty root holds no container's state: no call to list it)
    if os.path.isdir(root) and os.listdir(root):
        rts.append([run.get("runsc") or RUNSC, "--root", root])
    return rts


def containers_under(state_dir, with_runtime=False):
    """Containers (runc's and runsc's) whose bundle lies below state_dir:
    [(id, status)], or [(id, status, runtime argv prefix)]."""
    prefix = os.path.realpath(state_dir) + "/"
    res = []
    for rt in runtimes(state_dir):
        for cid, status in list_containers(rt, prefix) or []:
            res.append((cid, status, rt) if with_runtime else (cid, status))
    return res


SANDBOX_PROCS = ("import os\n"
                 "me, up = os.getpid(), os.getppid()\n"
                 "for d in os.listdir('/proc'):\n"
                 "    if d.isdigit() and int(d) not in (1, me, up):\n"
                 "        try:\n"
                 "            c = open('/proc/%s/cmdline' % d, 'rb').read()\n"
                 "        except OSError:\n"
                 "            continue\n"
                 "        print(d, c.replace(b'\\0', b' ').decode(errors='replace').strip())\n")


def sandbox_procs(sup, sid):
    """[(pid, command line)] of every process in the sandbox but its agent
    (PID 1), read inside: how a test sees processes under gVisor, whose
    processes are not the host's. The probe leaves itself and its holder
    out."""
    st, _, b = sup.exec(sid, argv=["python3", "-c", SANDBOX_PROCS])
    assert st == 200 and b.get("exit_code") == 0, b
    out = []
    for line in b["stdout"].splitlines():
        pid, _, cmd = line.partition(" ")
        out.append((int(pid), cmd))
    return out


def runtime_calls(state_dir):
    """Pids of processes (runc invocations) whose command line names state_dir;
    not a gVisor sandbox's own processes (runsc-sandbox, runsc-gofer), which
    live as long as it does."""
    needle = os.path.realpath(state_dir).encode()
    me = os.getpid()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle in cmd and cmd.split(b"\0")[0] not in (b"runsc-sandbox", b"runsc-gofer"):
            pids.append(int(d))
    return pids


# How long a removal waits for a run's runtime calls to end (a test of the
# sweep makes it short); one still running then keeps the run's record.
RUNTIME_CALL_WAIT_S = 30


def wait_runtime_calls(state_dir, timeout=None):
    """A killed supervisor can leave a runtime call running that still makes
    a container; sweeping before it ends would miss that container."""
    deadline = time.monotonic() + (RUNTIME_CALL_WAIT_S if timeout is None else timeout)
    while runtime_calls(state_dir) and time.monotonic() < deadline:
        time.sleep(0.05)


def thaw(cid):
    """Thaw a container's cgroup (a paused sandbox): its frozen processes
    die of a KILL only once thawed. cgroup v1's freezer, the hybrid
    unified mount's or v2's."""
    for path, value in (("/sys/fs/cgroup/freezer/sbx/%s/freezer.state" % cid, "THAWED"),
                        ("/sys/fs/cgroup/unified/sbx/%s/cgroup.freeze" % cid, "0"),
                        ("/sys/fs/cgroup/sbx/%s/cgroup.freeze" % cid, "0")):
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError:
            pass


def thaw_all_under(state_dir):
    """Thaw every container cgroup of state_dir's tag before asking the
    runtimes anything: runsc's list asks each sandbox's Sentry, which
    cannot answer frozen."""
    prefix = "sbx-%s-" % state_tag(state_dir)
    for parent in ("/sys/fs/cgroup/freezer/sbx", "/sys/fs/cgroup/unified/sbx", "/sys/fs/cgroup/sbx"):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix):
                thaw(name)


def remove_everything_under(state_dir):
    """The containers of state_dir's run (in every runtime root it has),
    what is left in their cgroups, its mounts (in every mount namespace)
    and loop devices removed, and then state_dir once all of that is
    confirmed gone (what_is_left), tried again a few times (a loop device
    detaches at its last close; a runtime call of a killed supervisor can
    still make a container after a listing). What is left ([]: all gone)."""
    rts = runtimes(state_dir)
    # (a helper's run has no runtime: no call to wait for, and a process
    # that names its folder, a kubelet harness given the control plane's
    # kubeconfig, is no runtime call)
    if rts:
        wait_runtime_calls(state_dir)
    prefix = os.path.realpath(state_dir) + "/"
    for attempt in range(5):
        thaw_all_under(state_dir)
        remove_containers(rts, prefix, thaw, confirm=False)
        if rts:
            kill_cgroups("sbx-%s-" % state_tag(state_dir))
        unmount_under(state_dir)
        detach_loops_under(state_dir)
        left = what_is_left(state_dir, rts)
        if all(x.startswith("runtime call") for x in left):
            break  # all gone, or a call waited for already: no retry ends it
        time.sleep(0.1 * (attempt + 1))
    if not left:
        shutil.rmtree(state_dir, ignore_errors=True)
    return left


def what_is_left(state_dir, rts):
    """What of state_dir's run is on the machine, as words for a message:
    containers (or a runtime that cannot list them), processes in its
    container cgroups (agents), runtime calls still running, mounts (in
    any mount namespace), loop devices."""
    # the calls first: one that ends after the listing may have made a
    # container it did not see
    left = ["runtime call %d" % p for p in runtime_calls(state_dir)] if rts else []
    prefix = os.path.realpath(state_dir) + "/"
    for rt in rts:
        found = list_containers(rt, prefix)
        left += ["%s cannot list" % rt[0]] if found is None else ["container " + c for c, _ in found]
    if rts:
        left += ["process %d in a container cgroup" % p
                 for p in cgroup_procs("/sbx/sbx-%s-" % state_tag(state_dir))]
    left += ["mount " + mp for mp in mounts_under(state_dir)]
    left += ["mount %s (of process %d)" % (mp, pid) for pid, mp in mounts_elsewhere(state_dir)]
    left += ["loop device " + dev for dev in loops_under(state_dir)]
    return left


def remove_run(state_dir, root=None):
    """Everything a run of state_dir made: the processes, network
    namespaces and links its record names (killed, deleted), then the
    containers, mounts and loop devices below state_dir, a supervisor's
    router, the folder, and root (the folder made for it) when given; then
    its record, only once all of that is confirmed gone: a removal that
    fails keeps the record for the next sweep. The one cleanup path of a
    test's end (Supervisor.cleanup, the helpers' cleanup) and of the sweep
    of a dead test's runs. What is left ([]: all gone, the record too)."""
    run = read_run(run_record(state_dir)) or {}
    end_procs(run.get("procs", []))
    for ns in run.get("netns", []):
        remove_netns(ns)
    for link in run.get("links", []):
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    left = remove_everything_under(state_dir)
    remove_router_of(state_dir)
    left += ["process %d" % pid for pid, start in run.get("procs", [])
             if start is not None and proc_start(pid) == start]
    left += ["netns " + ns for ns in run.get("netns", []) + ["sbx-" + state_tag(state_dir)]
             if os.path.exists("/run/netns/" + ns)]
    left += ["link " + link for link in run.get("links", [])
             if subprocess.run(["ip", "link", "show", link], capture_output=True).returncode == 0]
    if left:
        return left
    if root and not mounts_under(root):
        shutil.rmtree(root, ignore_errors=True)
    forget_run(state_dir)
    return []


# ---- what a killed test left ----
# A test killed with SIGKILL (ctest's timeout, an engineer's `timeout`)
# runs neither cleanup() nor _on_signal, and its supervisor, containers,
# overlays, mounts and loop devices stay, and so do the helpers it started
# (an s3rver, a control plane, a kubelet harness, the network test's
# "internet": its namespaces, links, DNS and HTTP servers). So every
# start() records its run in RUNS (one file per folder, named by its tag:
# the test process that owns it, with the start time /proc gives it,
# against a reused pid), a helper its folder and what it made beyond it
# (register_run's procs, netns, links), and every register_run first
# sweeps the runs whose owner is gone. Whether a supervisor runs on the
# folder says nothing: a restart test stops its supervisor and starts
# another on the same folder, and other engineers' tests and a ctest -j
# run beside this one. A folder whose owner lives is never touched, nor
# one without a record, nor a recorded process whose start time is not
# the recorded one (its pid reused). A record goes last, once what it
# names is confirmed gone (remove_run): a folder without a record is never
# looked at again, so a record removed first (or by a sweep killed
# halfway, or after a removal that failed, or before a killed
# supervisor's runtime call made its container) left containers, their
# agents and loop devices on the machine for good.
RUNS = os.path.join(tempfile.gettempdir(), "sbx-it-runs")


def proc_start(pid):
    """The start time (clock ticks since boot, /proc/PID/stat's 22nd
    field) of a live process, or None when pid is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def run_record(state_dir):
    return os.path.join(RUNS, state_tag(state_dir) + ".json")


def read_run(path):
    """A run's record, or None (gone, or half-written: never swept)."""
    try:
        with open(path) as f:
            run = json.load(f)
        return run if isinstance(run, dict) and "pid" in run and "state_dir" in run else None
    except (OSError, ValueError):
        return None


def run_top(state_dir, root):
    """The folder a run's sweep removes: the one made for it (root), else
    the test's own temporary folder holding state_dir (the one right below
    the temp dir), else state_dir itself."""
    if root:
        return os.path.realpath(root)
    real = os.path.realpath(state_dir)
    tmp = os.path.realpath(tempfile.gettempdir()) + "/"
    if real.startswith(tmp):
        return tmp + real[len(tmp):].split("/")[0]
    return real


def register_run(state_dir, root=None, extra=(), pid=None, runc=None, procs=(), netns=(),
                 links=()):
    """Sweep the runs of dead owners, then record this process (or pid) as
    the owner of state_dir's run: a supervisor's state folder (extra: its
    flags), or a helper's folder, with what the helper makes beyond it:
    procs (pids of processes it started, kept with their start time),
    netns (network namespaces, the processes in them killed with them) and
    links (host links), each recorded as soon as its name is known (a
    process right after its start, a name before it is made), and added to
    what the same owner recorded for state_dir already. runc: the runtime
    command that lists the run's containers (default RUNTIME; () for a
    helper that makes none)."""
    sweep_dead_runs()
    os.makedirs(RUNS, exist_ok=True)
    pid = pid or os.getpid()
    extra = list(extra)
    run = {"pid": pid, "start": proc_start(pid), "state_dir": os.path.realpath(state_dir),
           "top": run_top(state_dir, root), "runc": list(runc if runc is not None else [RUNTIME]),
           "runsc": RUNSC,
           "runsc_root": (extra[extra.index("--runsc-root") + 1] if "--runsc-root" in extra
                          else os.path.join(os.path.realpath(state_dir), "runsc"))}
    path = run_record(state_dir)
    had = read_run(path)
    same = had and (had["pid"], had.get("start")) == (run["pid"], run["start"])
    for key, new in (("procs", [[p, proc_start(p)] for p in procs]), ("netns", list(netns)),
                     ("links", list(links))):
        old = (had.get(key) or []) if same else []
        run[key] = old + [x for x in new if x not in old]
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(run, f)
    os.rename(tmp, path)


def end_procs(procs):
    """SIGKILL each [pid, start] still that process (its group too when it
    leads one: an s3rver's node), woken first should it be stopped; then
    wait until they are gone."""
    live = [(pid, start) for pid, start in procs if start is not None and proc_start(pid) == start]
    for pid, _ in live:
        try:
            leader = os.getpgid(pid) == pid
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            if leader:
                os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while (any(proc_start(pid) == start for pid, start in live)
           and time.monotonic() < deadline):
        time.sleep(0.02)


def remove_netns(name):
    """A network namespace of a test's: the processes in it killed, then
    its name deleted (its veth links, addresses, routes and nft tables go
    with it)."""
    r = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    # its name's copies in other mount namespaces (an `ip netns exec` of a
    # test beside, made while it existed) would keep it alive unnamed
    unmount_under("/run/netns/" + name)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def forget_run(state_dir):
    try:
        os.unlink(run_record(state_dir))
    except OSError:
        pass


def run_alive(run):
    """Whether a run's owner may live: it is dead only when its recorded
    start time is known and its pid no longer has it (gone, a zombie, or
    the pid reused); a record without one is not judged, as a half-written
    one is not. The same rule is in C in guest-agent/tests/agent_ns.c
    (sweep_dead_folders), for the agent's C tests, which run without
    Python: a change to one is a change to both."""
    return not run.get("start") or proc_start(run["pid"]) == run["start"]


def supervisors_of(state_dir):
    """Pids of the processes started with --state-dir state_dir (a dead
    test's supervisor may outlive it)."""
    real = os.path.realpath(state_dir)
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        for i, a in enumerate(argv[:-1]):
            if a == "--state-dir" and os.path.realpath(argv[i + 1]) == real:
                pids.append(int(d))
    return pids


def records():
    """[(path, run)] of every run record (run None: half-written)."""
    try:
        names = [n for n in os.listdir(RUNS) if n.endswith(".json")]
    except OSError:
        return []
    return [(os.path.join(RUNS, n), read_run(os.path.join(RUNS, n))) for n in names]


def sweep_dead_runs():
    """Remove what the runs of dead owners left (their supervisors killed
    first, then remove_run), with their folder once no other run (live or
    not swept yet) is below it. Each record is taken under an exclusive
    lock, so two tests starting at once do not sweep one run twice; it goes
    only once what it names is gone (a sweep killed halfway, or one that
    could not remove something, leaves it for the next). The state
    folders swept."""
    swept = []
    for path, run in records():
        if run is None or run_alive(run):
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # still the record read (no other sweep removed it meanwhile)
            if os.fstat(fd).st_nlink == 0 or read_run(path) != run:
                continue
            for pid in supervisors_of(run["state_dir"]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            deadline = time.monotonic() + 10
            while supervisors_of(run["state_dir"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            if supervisors_of(run["state_dir"]):
                continue  # a supervisor still makes things: the next sweep's
            # its folder too when it is the last run below it (a relay
            # test's nodes share one); never through a mount
            top = run.get("top")
            shared = any(r and r.get("top") == top for p, r in records() if p != path)
            if not remove_run(run["state_dir"], None if shared else top):
                swept.append(run)
        except OSError:
            continue
        finally:
            os.close(fd)
    return [r["state_dir"] for r in swept]


def _forget_gone_runs():
    """At a normal exit: the records of this process's runs whose folder is
    gone (cleaned up by the test itself) go too, with any process,
    namespace or link they still name; any other is the next sweep's."""
    try:
        names = os.listdir(RUNS)
    except OSError:
        return
    for n in names:
        run = read_run(os.path.join(RUNS, n))
        if run and run["pid"] == os.getpid() and not os.path.exists(run["state_dir"]):
            remove_run(run["state_dir"])


atexit.register(_forget_gone_runs)


def state_tag(state_dir):
    """The tag of a state folder in container ids and the router's names
    (sup_runc's FNV-1a of the resolved path)."""
    h = 2166136261
    for b in os.path.realpath(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return "%08x" % h


def remove_router_of(state_dir):
    """A killed supervisor with --uplink leaves its router's namespace (and
    its link to the uplink, which goes with it) and, with an interface for
    uplink, its table: the next start sweeps them, a test's cleanup too."""
    name = "sbx-" + state_tag(state_dir)
    if os.path.exists("/run/netns/" + name):
        unmount_under("/run/netns/" + name)  # as remove_netns
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    subprocess.run(["ip", "link", "del", name], capture_output=True)
    subprocess.run(["nft", "delete", "table", "inet", name], capture_output=True)


def sanitized(binary):
    """Whether binary is an ASan build (its RSS keeps freed memory in
    quarantine: no figure to bound)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def small_asan_quarantine(binary, mb=8):
    """For a test that bounds a process's memory by its RSS: ASan keeps freed
    memory in quarantine (256 MiB by default), and RSS counts it, so that
    what grows is what went through, not what is held. Make it mb for the
    sanitized processes started from here on. Whether binary is sanitized."""
    if not sanitized(binary):
        return False
    opts = os.environ.get("ASAN_OPTIONS", "")
    if "quarantine_size_mb" not in opts:
        os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "quarantine_size_mb=%d" % mb
    return True


def rss_kb(pid):
    """VmRSS of pid in KiB (0 when it has none)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def percentile(values, p):
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


# ---- the MCP parts from npm ----
# The MCP SDK's client scripts, @modelcontextprotocol/inspector-cli, the
# servers (server-everything, server-filesystem) and supergateway, pinned in
# tests/mcp-servers/package-lock.json and installed there by
# scripts/install-mcp-servers; used by test_mcp_api, test_mcp_http and
# bench/bench_mcp.py.
MCP_NPM = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mcp-servers"))
# Where mcp_modules_into() puts the servers' packages in a sandbox.
MCP_SANDBOX_MODULES = "/workspace/node_modules/@modelcontextprotocol/"


def png_size(data):
    """(width, height) of a PNG whose chunks all check out, else raise."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    off, size, end = 8, None, False
    while off < len(data):
        n, kind = struct.unpack(">I4s", data[off:off + 8])
        body = data[off + 8:off + 8 + n]
        crc, = struct.unpack(">I", data[off + 8 + n:off + 12 + n])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        end = kind == b"IEND"
        off += 12 + n
    assert end and size, "no IEND or IHDR"
    return size


def mcp_npm(*parts):
    """A path in tests/mcp-servers: ours (sdk_client.mjs, ...) or, below
    node_modules, a package's."""
    return os.path.join(MCP_NPM, *parts)


def mcp_inspector(url, token, *args, timeout=120):
    """The inspector's command-line client against url (Streamable HTTP,
    the bearer token), args its own (--method ...): the CompletedProcess."""
    return subprocess.run(["node", "index.js", url, "--transport", "http", "--header",
                           "Authorization: Bearer " + token] + list(args),
                          cwd=mcp_npm("node_modules", "@modelcontextprotocol", "inspector-cli", "build"),
                          capture_output=True, text=True, timeout=timeout)


def mcp_modules_tar():
    """The servers' node_modules (not the bridges', not needed inside) as
    one uncompressed tar."""
    import io
    import tarfile
    buf = io.BytesIO()
    skip = ("node_modules/supergateway", "node_modules/rxjs", "node_modules/.bin")
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(mcp_npm("node_modules"), arcname="node_modules",
               filter=lambda ti: None if ti.name.startswith(skip) else ti)
    return buf.getvalue()


def mcp_modules_into(sup, sid, then=None):
    """The servers' node_modules into sandbox sid's /workspace (one tar over
    the files API, unpacked there), then the shell command then if given."""
    st, _, body = sup.request("PUT", "/v1/sandboxes/%s/files?path=/workspace/nm.tar" % sid,
                              mcp_modules_tar(), timeout=120)
    assert st in (200, 201), body
    cmd = "cd /workspace && tar xf nm.tar && rm nm.tar" + (" && " + then if then else "")
    st, _, body = sup.exec(sid, cmd=cmd)
    assert st == 200 and body["exit_code"] == 0, body

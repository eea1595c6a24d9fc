#!/usr/bin/python3
"""The test harness that plays the kubelet for one node (never part of the
product; why not a real kubelet: node-supervisor/DESIGN.md, "Kubernetes:
sandbox pods").

    kubelet.py --kubeconfig FILE --node-name NODE --host-root DIR
               [--image REF=LAYOUT:TAG ...] [--root-dir DIR] [--cpu N]
               [--memory QTY] [--runc runc] [--kubectl PATH]

What it does, as a kubelet with containerd and runc would:
- makes the Node object NODE (or takes the one there) and writes its
  status: Ready, capacity and allocatable (--cpu, --memory, 110 pods),
  renewed every 20 s;
- lists and watches the pods whose spec.nodeName is NODE (the watch resumes
  from the last resourceVersion when the API server goes away and lists
  again on a 410);
- for each pod (one container; init containers are refused), makes a runc
  bundle from its spec (kubelet_spec.py): the image is one of --image's
  local OCI layouts, unpacked once per manifest digest with umoci and used
  as the lower layer of an overlay per container; emptyDirs are folders
  below the pod's folder (medium Memory: a tmpfs of sizeLimit), hostPaths
  are below --host-root (type Directory must exist, DirectoryOrCreate is
  made), a subPath or subPathExpr folder is made inside its volume; its
  own network namespace with lo up (what CNI's loopback plugin does);
  cgroup /sbxk-<pod uid> with the pod's limits; runc's state in
  <root-dir>/runc; its output in <root-dir>/pods/<uid>/container.log;
- writes the pod's status through the status subresource: Running with
  Ready and a containerStatus (containerID runc://<id>, started) once the
  process runs; on its exit Succeeded or Failed (restartPolicy Never;
  OnFailure and Always start it again, restartCount counted), or a waiting
  reason (ErrImageNeverPull, CreateContainerConfigError, ...) when it
  cannot be made, tried again every 5 s;
- a pod given a deletionTimestamp: SIGTERM, SIGKILL after its grace period
  (at most 10 s here), the container deleted, its mounts and folders (the
  subPath folders it made included) removed, then the pod deleted with
  gracePeriodSeconds 0; a pod deleted outright: the same without the call;
- on SIGTERM/SIGINT: every container killed and deleted, every mount
  unmounted, every folder it made removed; then it exits 0. sweep() does
  the same from outside for a harness that was SIGKILLed.

It prints "sbx-kubelet: node NODE ready" on stdout once the Node is Ready
and the first list is done; its log goes to stderr.
Not done (a real kubelet does): probes, init and multiple containers,
configMap/secret/projected volumes, image pulls, a pause container
(the container holds the pod's namespaces), /etc/resolv.conf, emptyDir
sizeLimit on disk (kubelet evicts; only Memory's tmpfs has a size),
seccompProfile RuntimeDefault (containerd's allow list; the agent loads its
own filter for every command), QoS oom_score_adj.
"""
import argparse
import ctypes
import datetime
import heapq
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import kube_client  # noqa: E402
import kubelet_spec  # noqa: E402
import sbx_leftovers  # noqa: E402
from kubelet_spec import SpecError  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36
RETRY_S = 5
MAX_GRACE_S = 10
HEARTBEAT_S = 20
WORKERS = 4  # pods set up or torn down at once
HOST_IP = "127.0.0.1"


def log(msg):
    sys.stderr.write("%s sbx-kubelet: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(argv, check=True, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv[:4]), p.returncode,
                                               (p.stderr or p.stdout).strip()[:500]))
    return p


# ---- mounts and folders ----
def _unescape(s):
    return s.encode().decode("unicode_escape")


def mounts_below(path):
    """Mount points at or below path, deepest first."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = _unescape(line.split()[4])
            if mp.startswith(prefix) or mp + "/" == prefix:
                out.append(mp)
    return sorted(set(out), key=len, reverse=True)


def unmount_below(path):
    for mp in mounts_below(path):
        if run(["umount", mp], check=False).returncode != 0:
            run(["umount", "-l", mp], check=False)


def remove_tree(path):
    """rm -rf, never across a mount: what is mounted below is unmounted
    first, and if anything stays mounted the folder is left (and said)."""
    if not os.path.lexists(path):
        return
    unmount_below(path)
    left = mounts_below(path)
    if left:
        log("not removing %s: still mounted below it: %s" % (path, left))
        return
    shutil.rmtree(path, ignore_errors=True)


# ---- images ----
class Images:
    """REF -> (OCI layout, tag), unpacked once per manifest digest into
    <root>/images/<digest>/rootfs (umoci), the lower layer of every
    container of that image."""

    def __init__(self, root, mapping):
        self.root = root
        self.map = mapping
        self.lock = threading.Lock()

    @staticmethod
    def _blob(layout, digest):
        algo, _, hexd = digest.partition(":")
        with open(os.path.join(layout, "blobs", algo, hexd)) as f:
            return json.load(f)

    def get(self, ref):
        """(rootfs, image config's "config" map, image id)."""
        if ref not in self.map:
            raise SpecError("ErrImageNeverPull",
                            "image %r is not one of this node's (--image) and no registry is "
                            "reachable" % ref)
        layout, tag = self.map[ref]
        with open(os.path.join(layout, "index.json")) as f:
            index = json.load(f)
        desc = next((m for m in index.get("manifests", [])
                     if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name")
                     == tag), None)
        if desc is None:
            raise SpecError("ErrImageNeverPull", "tag %r not in %s" % (tag, layout))
        manifest = self._blob(layout, desc["digest"])
        config = self._blob(layout, manifest["config"]["digest"])
        dest = os.path.join(self.root, desc["digest"].replace(":", "-"))
        with self.lock:
            if not os.path.isdir(os.path.join(dest, "rootfs")):
                tmp = dest + ".tmp"
                remove_tree(tmp)
                t0 = time.monotonic()
                run(["umoci", "unpack", "--image", "%s:%s" % (layout, tag), tmp])
                os.rename(tmp, dest)
                log("image %s unpacked in %.1f s" % (ref, time.monotonic() - t0))
        return os.path.join(dest, "rootfs"), config.get("config") or {}, \
            manifest["config"]["digest"]


# ---- one pod ----
class PodRuntime:
    """What this node made for one pod: its folders, mounts, container."""

    def __init__(self, uid):
        self.uid = uid
        self.cid = "sbxk-" + uid
        self.pid = None           # the container's init, a child of ours once runc exits
        self.exit_code = None     # set by the reaper
        self.started_at = None
        self.finished_at = None
        self.restarts = 0
        self.made = []            # folders outside the pod's own folder, to remove
        self.image = None
        self.image_id = None
        self.container_name = None
        self.terminal = False     # a final status was written
        self.deleting = False
        self.torn_down = False
        self.next_start = 0.0


class Kubelet:
    def __init__(self, args):
        self.args = args
        self.node = args.node_name
        self.host_root = os.path.realpath(args.host_root)
        self.root = os.path.realpath(args.root_dir or os.path.join(
            self.host_root, "var", "lib", "sbx-kubelet"))
        self.runc_root = os.path.join(self.root, "runc")
        self.api = kube_client.Client(args.kubeconfig, args.kubectl)
        images = {}
        for spec in args.image:
            ref, _, loc = spec.partition("=")
            layout, _, tag = loc.rpartition(":")
            if not ref or not layout or not tag:
                raise SystemExit("--image %r: want REF=LAYOUT:TAG" % spec)
            images[ref] = (os.path.realpath(layout), tag)
        self.images = Images(os.path.join(self.root, "images"), images)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.objs = {}            # uid -> latest pod object (None: deleted)
        self.pods = {}            # uid -> PodRuntime
        self.queue = []           # heap of (due, uid)
        self.queued = set()
        self.busy = set()
        self.dirty = set()
        self.cv = threading.Condition(self.lock)
        self.status_q = {}        # uid -> ("status", ns, name, body) | ("delete", ns, name)
        self.status_cv = threading.Condition()
        self.listed = threading.Event()

    # ---- paths ----
    def pod_dir(self, uid):
        return os.path.join(self.root, "pods", uid)

    def made_list(self):
        return os.path.join(self.root, "made.list")

    def note_made(self, rt, path):
        """A folder made outside the pod's folder, written down first so
        that sweep() finds it after a SIGKILL."""
        rt.made.append(path)
        with open(self.made_list(), "a") as f:
            f.write(path + "\n")

    # ---- the queue of pods to look at ----
    def enqueue(self, uid, delay=0.0):
        with self.cv:
            if uid in self.busy:
                self.dirty.add(uid)
                return
            heapq.heappush(self.queue, (time.monotonic() + delay, uid))
            self.queued.add(uid)
            self.cv.notify()

    def worker(self):
        while not self.stop.is_set():
            with self.cv:
                uid = None
                while uid is None and not self.stop.is_set():
                    now = time.monotonic()
                    if self.queue and self.queue[0][0] <= now:
                        _, u = heapq.heappop(self.queue)
                        if u in self.busy or u not in self.queued:
                            continue
                        self.queued.discard(u)
                        self.busy.add(u)
                        uid = u
                    else:
                        wait = self.queue[0][0] - now if self.queue else 1.0
                        self.cv.wait(min(wait, 1.0))
                if uid is None:
                    return
            try:
                self.reconcile(uid)
            except Exception as e:  # noqa: BLE001 - one pod's failure is logged, not fatal
                log("pod %s: %s: %s" % (uid, type(e).__name__, e))
                self.enqueue(uid, RETRY_S)
            finally:
                with self.cv:
                    self.busy.discard(uid)
                    if uid in self.dirty:
                        self.dirty.discard(uid)
                        heapq.heappush(self.queue, (time.monotonic(), uid))
                        self.queued.add(uid)
                        self.cv.notify()

    # ---- watch ----
    def on_event(self, typ, obj):
        uid = obj["metadata"]["uid"]
        with self.lock:
            self.objs[uid] = None if typ == "DELETED" else obj
        self.enqueue(uid)

    def on_list(self, items):
        """A fresh list: pods that vanished while no watch ran are deleted."""
        seen = {i["metadata"]["uid"] for i in items}
        with self.lock:
            gone = [u for u in self.objs if u not in seen]
            for u in gone:
                self.objs[u] = None
        for u in gone:
            self.enqueue(u)
        self.listed.set()

    def watch(self):
        self.api.watch("/api/v1/pods", "fieldSelector=spec.nodeName%3D" + self.node,
                       self.on_event, self.stop.is_set, on_list=self.on_list)

    # ---- reconcile one pod ----
    def reconcile(self, uid):
        with self.lock:
            obj = self.objs.get(uid)
            rt = self.pods.get(uid)
        if obj is None:
            if rt is not None and not rt.torn_down:
                self.teardown(rt, 0)
                with self.lock:
                    self.pods.pop(uid, None)
            with self.lock:
                self.objs.pop(uid, None)
            return
        md = obj["metadata"]
        if md.get("deletionTimestamp"):
            if rt is not None and not rt.torn_down:
                rt.deleting = True
                grace = min(md.get("deletionGracePeriodSeconds") or 0, MAX_GRACE_S)
                self.teardown(rt, grace)
            self.post("delete", obj, None)
            return
        phase = (obj.get("status") or {}).get("phase")
        if rt is None:
            if phase in ("Succeeded", "Failed"):
                return
            rt = PodRuntime(uid)
            with self.lock:
                self.pods[uid] = rt
            if any(cs.get("containerID") for cs in
                   (obj.get("status") or {}).get("containerStatuses") or []):
                # Started by an earlier harness of this node, which removed
                # its container when it stopped: gone, as kubelet says.
                self.lost(rt, obj)
                return
        if rt.terminal:
            return
        if rt.pid is None and rt.exit_code is None:
            if time.monotonic() < rt.next_start:
                self.enqueue(uid, rt.next_start - time.monotonic())
                return
            self.start(rt, obj)
        elif rt.exit_code is not None:
            self.exited(rt, obj)

    def start(self, rt, obj):
        spec = obj["spec"]
        try:
            if spec.get("initContainers") or len(spec.get("containers") or []) != 1:
                raise SpecError("CreateContainerConfigError",
                                "this harness runs pods of one container and no init containers")
            c = spec["containers"][0]
            rt.container_name = c["name"]
            rt.image = c["image"]
            rootfs, image_cfg, rt.image_id = self.images.get(c["image"])
            self.make_container(rt, obj, c, rootfs, image_cfg)
        except (SpecError, RuntimeError, OSError) as e:
            reason = getattr(e, "reason", "CreateContainerError")
            log("pod %s/%s: %s: %s" % (obj["metadata"]["namespace"], obj["metadata"]["name"],
                                       reason, e))
            # Our own status write comes back as an event: the next try
            # waits for its time all the same.
            rt.next_start = time.monotonic() + RETRY_S
            self.post("status", obj, self.waiting_status(obj, rt, reason, str(e)))
            self.enqueue(rt.uid, RETRY_S)
            return
        rt.started_at = now_rfc3339()
        log("pod %s/%s: container %s runs (pid %d)" % (obj["metadata"]["namespace"],
                                                      obj["metadata"]["name"], rt.cid, rt.pid))
        self.post("status", obj, self.running_status(obj, rt))

    def volumes(self, rt, obj):
        """{volume name: host folder}, made as kubelet makes them."""
        pdir = self.pod_dir(rt.uid)
        psc = obj["spec"].get("securityContext") or {}
        fs_group = psc.get("fsGroup")
        out = {}
        for v in obj["spec"].get("volumes") or []:
            name = v["name"]
            if "emptyDir" in v:
                d = os.path.join(pdir, "volumes", "kubernetes.io~empty-dir", name)
                os.makedirs(d, exist_ok=True)
                ed = v["emptyDir"] or {}
                if ed.get("medium") == "Memory" and not os.path.ismount(d):
                    opts = "mode=0777"
                    if ed.get("sizeLimit"):
                        opts += ",size=%d" % int(kubelet_spec.quantity(ed["sizeLimit"]))
                    run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev," + opts, "tmpfs", d])
                os.chmod(d, 0o777)
                if fs_group is not None:
                    # kubelet's SetVolumeOwnership: the group, and set-gid.
                    os.chown(d, -1, int(fs_group))
                    os.chmod(d, 0o2777)
                out[name] = d
            elif "hostPath" in v:
                hp = v["hostPath"]
                rel = os.path.normpath(hp["path"]).lstrip("/")
                d = os.path.join(self.host_root, rel)
                typ = hp.get("type") or ""
                if typ == "DirectoryOrCreate" and not os.path.isdir(d):
                    os.makedirs(d, 0o755)
                    self.note_made(rt, d)
                elif typ == "Directory" and not os.path.isdir(d):
                    raise SpecError("CreateContainerConfigError",
                                    "hostPath type check failed: %s is not a directory"
                                    % hp["path"])
                elif typ not in ("", "Directory", "DirectoryOrCreate"):
                    raise SpecError("CreateContainerConfigError",
                                    "hostPath type %s is not supported here" % typ)
                out[name] = d
            else:
                kind = sorted(k for k in v if k != "name")
                raise SpecError("CreateContainerConfigError",
                                "volume %s: only emptyDir and hostPath here, not %s" % (name, kind))
        return out

    def make_container(self, rt, obj, c, rootfs, image_cfg):
        pdir = self.pod_dir(rt.uid)
        os.makedirs(pdir, exist_ok=True)
        env = kubelet_spec.container_env(obj, c, image_cfg.get("Env"), HOST_IP)
        vols = self.volumes(rt, obj)
        mounts = kubelet_spec.volume_mounts(c, env, vols)
        for _, src, _, sub in mounts:
            if sub and not os.path.isdir(src):
                vol_root = src[:-len(sub)].rstrip("/")
                top = os.path.join(vol_root, sub.split("/")[0])
                existed = os.path.lexists(top)
                os.makedirs(src, 0o755, exist_ok=True)
                if not os.path.realpath(src).startswith(os.path.realpath(vol_root) + "/"):
                    raise SpecError("CreateContainerConfigError",
                                    "subPath %s leaves its volume" % sub)
                if not existed and not top.startswith(pdir + "/"):
                    self.note_made(rt, top)
        # /etc/hosts and /etc/hostname, as kubelet and containerd write them.
        hostname = (obj["spec"].get("hostname") or obj["metadata"]["name"])[:63]
        etc = {}
        for name, text in (("hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
                            "127.0.1.1\t%s\n" % hostname), ("hostname", hostname + "\n")):
            p = os.path.join(pdir, "etc-" + name)
            with open(p, "w") as f:
                f.write(text)
            os.chmod(p, 0o644)
            etc["/etc/" + name] = p
        # The container's root: the image's folder under an overlay of its own.
        cdir = os.path.join(pdir, "containers", c["name"])
        merged = os.path.join(cdir, "rootfs")
        for d in ("upper", "work", "rootfs"):
            os.makedirs(os.path.join(cdir, d), exist_ok=True)
        if not os.path.ismount(merged):
            run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s"
                 % (rootfs, os.path.join(cdir, "upper"), os.path.join(cdir, "work")), merged])
        cfg = kubelet_spec.runtime_spec(obj, c, image_cfg, merged, env, mounts, etc,
                                        "/" + rt.cid)
        with open(os.path.join(cdir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        # A container of an earlier start (restartPolicy) goes first.
        run(["runc", "--root", self.runc_root, "delete", "--force", rt.cid], check=False)
        pidfile = os.path.join(cdir, "pid")
        runc_log = os.path.join(cdir, "runc.log")
        # The container keeps runc's stdio: both go to the pod's log file
        # (a pipe would be held open by the container).
        with open(os.path.join(pdir, "container.log"), "ab") as out:
            p = subprocess.run(["runc", "--root", self.runc_root, "--log", runc_log, "create",
                                "--bundle", cdir, "--pid-file", pidfile, rt.cid],
                               stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        if p.returncode != 0:
            try:
                with open(runc_log, errors="replace") as f:
                    why = f.read().strip().splitlines()[-1]
            except (OSError, IndexError):
                why = "exit %d" % p.returncode
            raise SpecError("RunContainerError", "runc create: " + why[-500:])
        with open(pidfile) as f:
            rt.pid = int(f.read())
        rt.exit_code = None
        try:
            if not obj["spec"].get("hostNetwork"):
                # What CNI's loopback plugin does in the pod's namespace.
                run(["nsenter", "--net=/proc/%d/ns/net" % rt.pid, "ip", "link", "set", "lo",
                     "up"])
            run(["runc", "--root", self.runc_root, "start", rt.cid])
        except RuntimeError as e:
            self.kill_container(rt, 0)
            rt.pid = rt.exit_code = None
            raise SpecError("RunContainerError", str(e))

    # ---- exits ----
    def reap(self):
        """Every 0.1 s: the exit of each container init (ours to wait for:
        the harness is a child subreaper and runc has exited)."""
        while not self.stop.is_set():
            with self.lock:
                live = [rt for rt in self.pods.values() if rt.pid and rt.exit_code is None]
            for rt in live:
                try:
                    pid, status = os.waitpid(rt.pid, os.WNOHANG)
                except ChildProcessError:
                    # Not ours (runc still running) or already reaped.
                    if os.path.exists("/proc/%d" % rt.pid):
                        continue
                    pid, status = rt.pid, 255 << 8
                if pid == 0:
                    continue
                rt.exit_code = os.waitstatus_to_exitcode(status)
                if rt.exit_code < 0:
                    rt.exit_code = 128 - rt.exit_code
                rt.finished_at = now_rfc3339()
                log("container %s exited %d" % (rt.cid, rt.exit_code))
                self.enqueue(rt.uid)
            self.stop.wait(0.1)

    def exited(self, rt, obj):
        policy = obj["spec"].get("restartPolicy") or "Always"
        if rt.deleting:
            return
        if policy == "Always" or (policy == "OnFailure" and rt.exit_code != 0):
            self.post("status", obj, self.running_status(obj, rt, waiting="CrashLoopBackOff"))
            run(["runc", "--root", self.runc_root, "delete", "--force", rt.cid], check=False)
            rt.pid = None
            rt.exit_code = None
            rt.restarts += 1
            rt.next_start = time.monotonic() + min(10 * 2 ** (rt.restarts - 1), 300) / 10.0
            self.enqueue(rt.uid, rt.next_start - time.monotonic())
            return
        rt.terminal = True
        self.post("status", obj, self.final_status(obj, rt))

    def lost(self, rt, obj):
        rt.terminal = True
        rt.exit_code = 137
        rt.finished_at = now_rfc3339()
        c = obj["spec"]["containers"][0]
        rt.container_name, rt.image = c["name"], c["image"]
        st = self.final_status(obj, rt)
        st["containerStatuses"][0]["state"]["terminated"].update(
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was terminated")
        st["phase"] = "Failed"
        self.post("status", obj, st)

    # ---- status bodies ----
    def _conditions(self, ready):
        t = now_rfc3339()
        return [{"type": k, "status": v, "lastProbeTime": None, "lastTransitionTime": t}
                for k, v in (("Initialized", "True"), ("Ready", ready),
                             ("ContainersReady", ready), ("PodScheduled", "True"))]

    def _cs(self, rt, state, ready):
        cs = {"name": rt.container_name, "image": rt.image, "imageID": rt.image_id or "",
              "ready": ready, "started": "running" in state, "restartCount": rt.restarts,
              "state": state}
        if rt.pid is not None or "terminated" in state:
            cs["containerID"] = "runc://" + rt.cid
        return cs

    def _status(self, obj, phase, ready, cs):
        return {"metadata": {"uid": obj["metadata"]["uid"]},
                "status": {"phase": phase, "conditions": self._conditions(ready),
                           "hostIP": HOST_IP, "startTime": (obj.get("status") or {}).get(
                               "startTime") or now_rfc3339(),
                           "containerStatuses": [cs]}}

    def running_status(self, obj, rt, waiting=None):
        if waiting:
            state = {"waiting": {"reason": waiting,
                                 "message": "back-off restarting the failed container"}}
            return self._status(obj, "Running", "False", self._cs(rt, state, False))
        state = {"running": {"startedAt": rt.started_at}}
        return self._status(obj, "Running", "True", self._cs(rt, state, True))

    def waiting_status(self, obj, rt, reason, message):
        state = {"waiting": {"reason": reason, "message": message}}
        cs = self._cs(rt, state, False)
        cs["name"] = rt.container_name or obj["spec"]["containers"][0]["name"]
        cs["image"] = rt.image or obj["spec"]["containers"][0]["image"]
        return self._status(obj, "Pending", "False", cs)

    def final_status(self, obj, rt):
        code = rt.exit_code
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                "startedAt": rt.started_at, "finishedAt": rt.finished_at,
                                "containerID": "runc://" + rt.cid}}
        return self._status(obj, "Succeeded" if code == 0 else "Failed", "False",
                            self._cs(rt, state, False))

    # ---- writes to the API server: latest per pod, retried ----
    def post(self, kind, obj, body):
        md = obj["metadata"]
        with self.status_cv:
            prev = self.status_q.get(md["uid"])
            if prev and prev[0] == "delete":
                return
            self.status_q[md["uid"]] = (kind, md["namespace"], md["name"], body)
            self.status_cv.notify()

    def writer(self):
        backoff = 0.2
        while True:
            with self.status_cv:
                while not self.status_q and not self.stop.is_set():
                    self.status_cv.wait(1.0)
                if not self.status_q:
                    return
                uid, (kind, ns, name, body) = next(iter(self.status_q.items()))
            path = "/api/v1/namespaces/%s/pods/%s" % (ns, name)
            try:
                if kind == "status":
                    st, res = self.api.request("PATCH", path + "/status", body,
                                               content_type="application/merge-patch+json")
                else:
                    st, res = self.api.request("DELETE", path, {
                        "kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                        "preconditions": {"uid": uid}})
            except OSError as e:
                if self.stop.is_set():
                    return
                log("API server away (%s): retrying in %.1f s" % (e, backoff))
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if st >= 500 or st == 429:
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.2
            if st >= 300 and st not in (404, 409):
                log("%s %s/%s: HTTP %d %s" % (kind, ns, name, st, json.dumps(res)[:300]))
            with self.status_cv:
                if self.status_q.get(uid) == (kind, ns, name, body):
                    del self.status_q[uid]

    # ---- the node ----
    def node_status(self):
        mem = self.args.memory
        if mem is None:
            with open("/proc/meminfo") as f:
                mem = "%sKi" % next(l.split()[1] for l in f if l.startswith("MemTotal:"))
        res = {"cpu": str(self.args.cpu or os.cpu_count()), "memory": mem, "pods": "110",
               "ephemeral-storage": "%dKi" % (shutil.disk_usage(self.root).total // 1024)}
        t = now_rfc3339()
        return {"status": {
            "capacity": res, "allocatable": res,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "sbx test harness playing the kubelet",
                            "lastHeartbeatTime": t, "lastTransitionTime": t}],
            "addresses": [{"type": "InternalIP", "address": HOST_IP},
                          {"type": "Hostname", "address": self.node}],
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                         "kernelVersion": os.uname().release, "osImage": "Debian 12",
                         "containerRuntimeVersion": "runc://1", "kubeletVersion": "sbx-harness",
                         "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"}}}

    def register(self):
        st, res = self.api.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.node, "labels": {
                "kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "sbx.dev/test-harness": "kubelet"}}})
        if st not in (201, 409):
            raise kube_client.ApiError(st, json.dumps(res), "POST node " + self.node)
        self.api.must("PATCH", "/api/v1/nodes/%s/status" % self.node, self.node_status(),
                      content_type="application/merge-patch+json")

    def heartbeat(self):
        while not self.stop.wait(HEARTBEAT_S):
            try:
                self.api.request("PATCH", "/api/v1/nodes/%s/status" % self.node,
                                 self.node_status(),
                                 content_type="application/merge-patch+json")
            except OSError:
                pass

    # ---- teardown ----
    def kill_container(self, rt, grace):
        rc = ["runc", "--root", self.runc_root]
        if rt.pid is not None and rt.exit_code is None:
            if grace > 0:
                run(rc + ["kill", rt.cid, "TERM"], check=False)
                deadline = time.monotonic() + grace
                while rt.exit_code is None and time.monotonic() < deadline \
                        and not self.stop.is_set():
                    time.sleep(0.05)
            run(rc + ["kill", rt.cid, "KILL"], check=False)
            deadline = time.monotonic() + 10
            while rt.exit_code is None and time.monotonic() < deadline:
                if self.stop.is_set():
                    # The reaper has stopped: wait here.
                    try:
                        os.waitpid(rt.pid, 0)
                    except ChildProcessError:
                        pass
                    break
                time.sleep(0.02)
        run(rc + ["delete", "--force", rt.cid], check=False)

    def teardown(self, rt, grace):
        """The container killed and deleted, mounts and folders gone."""
        self.kill_container(rt, grace)
        remove_tree(self.pod_dir(rt.uid))
        for d in rt.made:
            remove_tree(d)
        rt.made = []
        rt.torn_down = True
        log("pod %s: container %s and its folders removed" % (rt.uid, rt.cid))

    def shutdown(self):
        """Everything stopped and removed: whether all is gone."""
        self.stop.set()
        self.api.interrupt()
        with self.cv:
            self.cv.notify_all()
        with self.status_cv:
            self.status_cv.notify_all()
        for t in self.threads:
            t.join(timeout=30)
        with self.lock:
            pods = list(self.pods.values())
        for rt in pods:
            self.teardown(rt, 0)
        gone = sweep(self.root)
        # The parents it made for its root, if nothing else is in them.
        d = os.path.dirname(self.root)
        while d.startswith(self.host_root + "/"):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
        return gone

    # ---- main ----
    def main(self):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        os.makedirs(self.runc_root, exist_ok=True)
        os.makedirs(os.path.join(self.root, "pods"), exist_ok=True)
        self.register()
        self.threads = [threading.Thread(target=f, name=n, daemon=True) for f, n in (
            (self.watch, "watch"), (self.reap, "reap"), (self.writer, "writer"),
            (self.heartbeat, "heartbeat")) + tuple(
                (self.worker, "worker-%d" % i) for i in range(WORKERS))]
        for t in self.threads:
            t.start()
        while not self.listed.wait(0.2):
            if self.stop.is_set():
                return
        print("sbx-kubelet: node %s ready" % self.node, flush=True)
        log("node %s ready: root %s, host root %s" % (self.node, self.root, self.host_root))
        self.stop.wait()


def sweep(root):
    """Everything a harness with this --root-dir made, removed: runc's
    containers in root/runc, mounts below root, the folders in its
    made.list, root itself; but root (which holds runc's state: without it
    nothing lists those containers again) only once runc lists none of
    them, as sbx_harness removes a run's record (sbx_leftovers). For the
    harness's own stop, and for a test whose harness was killed. Whether
    all is gone (else what is left is logged and root stays for the next
    sweep)."""
    runc_root = os.path.join(root, "runc")
    if os.path.isdir(runc_root):
        left = sbx_leftovers.remove_containers([["runc", "--root", runc_root]])
        if left:
            log("not removing %s: runc still has containers (or cannot list): %s"
                % (root, [cid for _, cid in left]))
            return False
    try:
        with open(os.path.join(root, "made.list")) as f:
            made = [l.strip() for l in f if l.strip()]
    except OSError:
        made = []
    for d in made:
        remove_tree(d)
    remove_tree(root)
    return not os.path.lexists(root)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node-name", required=True)
    ap.add_argument("--host-root", required=True)
    ap.add_argument("--root-dir", help="default HOST_ROOT/var/lib/sbx-kubelet")
    ap.add_argument("--image", action="append", default=[], metavar="REF=LAYOUT:TAG")
    ap.add_argument("--cpu", type=int)
    ap.add_argument("--memory", help="the Node's memory (a quantity); default the machine's")
    ap.add_argument("--kubectl", help="to read a YAML kubeconfig")
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    k = Kubelet(args)
    done = threading.Event()

    def on_signal(signum, frame):
        k.stop.set()
        done.set()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    k.threads = []
    try:
        k.main()
    except BaseException as e:  # noqa: BLE001 - clean up, then say why
        if not isinstance(e, SystemExit):
            log("stopping on %s: %s" % (type(e).__name__, e))
        k.shutdown()
        return 1
    if not k.shutdown():
        return 1
    log("stopped: containers, mounts and folders removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A pod's container as an OCI runtime spec (runc's config.json), the way
Kubernetes' kubelet with containerd's CRI makes it, for the test harness
kubelet.py. Pure functions: nothing here touches the host.

What is taken from the pod (the rest is refused with SpecError, a message a
kubelet would show as the container's waiting reason, or left out where
kubelet.py's docstring says so):
- command/args over the image's Entrypoint/Cmd (Kubernetes' rules: a
  command drops the image's Cmd), $(VAR) expanded; workingDir;
- env: the image's, then the container's (value, or valueFrom.fieldRef
  metadata.uid/name/namespace/labels/annotations, spec.nodeName,
  spec.serviceAccountName, status.hostIP), $(VAR) of earlier ones expanded;
- the user: runAsUser/runAsGroup (container over pod), else the image's
  User (a number or a name in the image's /etc/passwd); fsGroup and
  supplementalGroups as supplementary groups;
- readOnlyRootFilesystem, allowPrivilegeEscalation (no_new_privs),
  capabilities add/drop over containerd's default set, sysctls;
- resources: limits.memory as the memory limit, limits.cpu as the CFS
  quota, requests.cpu (else the limit) as cpu shares;
- volumeMounts with subPath or subPathExpr ($(VAR) of the container's env),
  readOnly; the host side of each volume is the caller's (volume_paths).
This is a test harness, never part of the product.
"""
import os
import re

# containerd 1.6's default capabilities (oci.WithDefaultSpec).
DEFAULT_CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]
MASKED = [
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
    "/sys/firmware",
]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
CPU_PERIOD = 100000


class SpecError(Exception):
    """What keeps a container from being made: (reason, message), as a
    kubelet reports it in the container's waiting state."""

    def __init__(self, reason, message):
        self.reason = reason
        super().__init__(message)


_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60, "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6,
           "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$")


def quantity(q):
    """A Kubernetes quantity ("500m", "512Mi", "1", "1e3") as a float."""
    m = _QTY.match(str(q).strip())
    if not m:
        raise SpecError("CreateContainerConfigError", "bad quantity %r" % (q,))
    return float(m.group(1)) * _SUFFIX[m.group(2)]


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(s, env):
    """Kubernetes' $(VAR) expansion: a defined VAR is replaced, an undefined
    one left as written, $$ is a literal $."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return _VAR.sub(sub, s)


def field_ref(pod, path, host_ip):
    md = pod["metadata"]
    simple = {"metadata.name": md.get("name"), "metadata.namespace": md.get("namespace"),
              "metadata.uid": md.get("uid"), "spec.nodeName": pod["spec"].get("nodeName"),
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
              "status.hostIP": host_ip}
    if path in simple:
        return simple[path] or ""
    m = re.match(r"^metadata\.(labels|annotations)\['([^']+)'\]$", path)
    if m:
        return (md.get(m.group(1)) or {}).get(m.group(2), "")
    raise SpecError("CreateContainerConfigError", "unsupported fieldPath %r" % path)


def container_env(pod, container, image_env, host_ip):
    """[(name, value)] in order, the image's first, the container's over it."""
    env = {}
    for kv in image_env or []:
        k, _, v = kv.partition("=")
        env[k] = v
    for e in container.get("env") or []:
        name = e["name"]
        if "valueFrom" in e:
            vf = e["valueFrom"]
            if "fieldRef" not in vf:
                raise SpecError("CreateContainerConfigError",
                                "env %s: only fieldRef is supported (%s)" % (name, sorted(vf)))
            env.pop(name, None)
            env[name] = field_ref(pod, vf["fieldRef"]["fieldPath"], host_ip)
        else:
            value = expand(e.get("value", ""), env)
            env.pop(name, None)
            env[name] = value
    if container.get("envFrom"):
        raise SpecError("CreateContainerConfigError", "envFrom is not supported")
    return list(env.items())


def argv(container, image_cfg, env):
    """Kubernetes' rule: command replaces Entrypoint and drops Cmd; args
    replace Cmd."""
    envd = dict(env)
    command = container.get("command")
    args = container.get("args")
    if command:
        out = list(command) + list(args or [])
    else:
        out = list(image_cfg.get("Entrypoint") or []) + list(
            args if args is not None else image_cfg.get("Cmd") or [])
    out = [expand(a, envd) for a in out]
    if not out:
        raise SpecError("CreateContainerError", "no command: neither the pod nor the image has one")
    return out


def _lookup(rootfs, file, name):
    """The fields of name's line in the image's /etc/passwd or /etc/group."""
    try:
        with open(os.path.join(rootfs, "etc", file)) as f:
            for line in f:
                parts = line.rstrip("\n").split(":")
                if parts and parts[0] == name:
                    return parts
    except OSError:
        pass
    return None


def user(pod, container, image_cfg, rootfs):
    """{"uid", "gid", "additionalGids"}."""
    psc = pod["spec"].get("securityContext") or {}
    csc = container.get("securityContext") or {}
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup"))
    if uid is None:
        spec = image_cfg.get("User") or "0"
        u, _, g = spec.partition(":")
        if u.isdigit():
            uid = int(u)
        else:
            pw = _lookup(rootfs, "passwd", u)
            if pw is None or len(pw) < 4:
                raise SpecError("CreateContainerConfigError",
                                "the image's user %r is not in its /etc/passwd" % u)
            uid = int(pw[2])
            if not g and gid is None:
                gid = int(pw[3])
        if g and gid is None:
            if g.isdigit():
                gid = int(g)
            else:
                gr = _lookup(rootfs, "group", g)
                if gr is None:
                    raise SpecError("CreateContainerConfigError",
                                    "the image's group %r is not in its /etc/group" % g)
                gid = int(gr[2])
    if gid is None:
        gid = 0
    if (csc.get("runAsNonRoot", psc.get("runAsNonRoot"))) and uid == 0:
        raise SpecError("CreateContainerConfigError",
                        "container has runAsNonRoot and image will run as root")
    extra = list(psc.get("supplementalGroups") or [])
    if psc.get("fsGroup") is not None:
        extra.append(psc["fsGroup"])
    return {"uid": int(uid), "gid": int(gid), "additionalGids": sorted(set(int(g) for g in extra))}


def capabilities(container):
    caps = (container.get("securityContext") or {}).get("capabilities") or {}

    def norm(c):
        return c if c.startswith("CAP_") else "CAP_" + c
    drop = [norm(c) for c in caps.get("drop") or []]
    out = [] if "CAP_ALL" in drop else [c for c in DEFAULT_CAPS if c not in drop]
    for c in caps.get("add") or []:
        if norm(c) not in out:
            out.append(norm(c))
    return out


def resources(container):
    res = container.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    out = {"devices": [{"allow": False, "access": "rwm"}]}
    if "memory" in limits:
        out["memory"] = {"limit": int(quantity(limits["memory"]))}
    cpu_req = requests.get("cpu", limits.get("cpu"))
    cpu = {}
    if cpu_req is not None:
        cpu["shares"] = max(2, int(quantity(cpu_req) * 1024))
    if "cpu" in limits:
        cpu["quota"] = max(1000, int(quantity(limits["cpu"]) * CPU_PERIOD))
        cpu["period"] = CPU_PERIOD
    if cpu:
        out["cpu"] = cpu
    return out


def _clean_subpath(p, what):
    if os.path.isabs(p) or ".." in p.split("/"):
        raise SpecError("CreateContainerConfigError",
                        "%s %r must be a relative path without '..'" % (what, p))
    return os.path.normpath(p)


def volume_mounts(container, env, volume_paths):
    """[(mountPath, host source, readOnly, subpath made relative to the
    volume or None)]: the source folders a subPath names are for the caller
    to make (kubelet makes them), inside its volume."""
    envd = dict(env)
    out = []
    for vm in container.get("volumeMounts") or []:
        name = vm["name"]
        if name not in volume_paths:
            raise SpecError("CreateContainerConfigError", "volume %r not found" % name)
        src = volume_paths[name]
        sub = None
        if vm.get("subPathExpr"):
            sub = _clean_subpath(expand(vm["subPathExpr"], envd), "subPathExpr")
            if "$(" in sub:
                raise SpecError("CreateContainerConfigError",
                                "subPathExpr %r names an undefined variable" % vm["subPathExpr"])
        elif vm.get("subPath"):
            sub = _clean_subpath(vm["subPath"], "subPath")
        if sub:
            src = os.path.join(src, sub)
        out.append((vm["mountPath"], src, bool(vm.get("readOnly")), sub))
    return out


def _mount(dst, typ, src, opts):
    return {"destination": dst, "type": typ, "source": src, "options": opts}


def runtime_spec(pod, container, image_cfg, rootfs, env, mounts, etc_files, cgroups_path):
    """config.json for runc. mounts: volume_mounts()' list; etc_files:
    {"/etc/hosts": host file, ...} bound read-only as kubelet does."""
    spec = pod["spec"]
    csc = container.get("securityContext") or {}
    if csc.get("privileged"):
        raise SpecError("CreateContainerConfigError", "privileged containers are not run here")
    taken = {m[0] for m in mounts}
    base = [
        _mount("/proc", "proc", "proc", ["nosuid", "noexec", "nodev"]),
        _mount("/dev", "tmpfs", "tmpfs", ["nosuid", "strictatime", "mode=755", "size=65536k"]),
        _mount("/dev/pts", "devpts", "devpts",
               ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]),
        _mount("/dev/shm", "tmpfs", "shm", ["nosuid", "noexec", "nodev", "mode=1777",
                                              "size=65536k"]),
        _mount("/dev/mqueue", "mqueue", "mqueue", ["nosuid", "noexec", "nodev"]),
        _mount("/sys", "sysfs", "sysfs", ["nosuid", "noexec", "nodev", "ro"]),
        _mount("/sys/fs/cgroup", "cgroup", "cgroup",
               ["nosuid", "noexec", "nodev", "relatime", "ro"]),
    ]
    ms = [m for m in base if m["destination"] not in taken]
    for dst, src in sorted(etc_files.items()):
        if dst not in taken:
            ms.append(_mount(dst, "bind", src, ["rbind", "rprivate", "ro"]))
    for dst, src, ro, _ in mounts:
        ms.append(_mount(dst, "bind", src, ["rbind", "rprivate", "ro" if ro else "rw"]))
    namespaces = [{"type": "mount"}]
    if not spec.get("hostPID"):
        namespaces.append({"type": "pid"})
    if not spec.get("hostIPC"):
        namespaces.append({"type": "ipc"})
    if not spec.get("hostNetwork"):
        namespaces += [{"type": "network"}, {"type": "uts"}]
    caps = capabilities(container)
    hostname = (spec.get("hostname") or pod["metadata"]["name"])[:63]
    sysctls = {s["name"]: s["value"]
               for s in (spec.get("securityContext") or {}).get("sysctls") or []}
    cfg = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": user(pod, container, image_cfg, rootfs),
            "args": argv(container, image_cfg, env),
            "env": ["%s=%s" % kv for kv in env],
            "cwd": container.get("workingDir") or image_cfg.get("WorkingDir") or "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "noNewPrivileges": csc.get("allowPrivilegeEscalation") is False,
        },
        "root": {"path": os.path.abspath(rootfs),
                 "readonly": bool(csc.get("readOnlyRootFilesystem"))},
        "mounts": ms,
        "linux": {
            "cgroupsPath": cgroups_path,
            "namespaces": namespaces,
            "resources": resources(container),
            "sysctl": sysctls,
            "maskedPaths": MASKED,
            "readonlyPaths": READONLY,
        },
    }
    if not spec.get("hostNetwork"):
        cfg["hostname"] = hostname
    return cfg

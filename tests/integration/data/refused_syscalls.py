"""Run inside a sandbox as the default user: try each system call the
seccomp profile must refuse and print one JSON line {name: errno}.

Arguments are harmless (NULL pointers, invalid fds): what matters is which
errno comes back, and EPERM is what the filter returns before the kernel
looks at them. x86_64 system call numbers."""
import ctypes
import errno
import json
import socket

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

NR = {
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
    "userfaultfd": 323, "kexec_load": 246, "kexec_file_load": 320,
    "mount": 165, "umount2": 166, "pivot_root": 155, "unshare": 272,
    "setns": 308, "ptrace": 101, "perf_event_open": 298,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
}
ARGS = {
    "unshare": (0x00020000,),          # CLONE_NEWNS
    "setns": (0, 0),
    "ptrace": (16, 1),                 # PTRACE_ATTACH to pid 1
    "io_uring_setup": (1, 0),
    "umount2": (0, 0),
}

out = {}
for name, nr in NR.items():
    args = [ctypes.c_long(a) for a in ARGS.get(name, (0, 0, 0, 0, 0))]
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *args)
    out[name] = 0 if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

try:
    socket.socket(40, socket.SOCK_STREAM)  # AF_VSOCK
    out["socket(AF_VSOCK)"] = 0
except OSError as e:
    out["socket(AF_VSOCK)"] = errno.errorcode.get(e.errno, str(e.errno))

# Families that must keep working.
for fam, name in ((socket.AF_UNIX, "socket(AF_UNIX)"), (socket.AF_INET, "socket(AF_INET)")):
    try:
        socket.socket(fam, socket.SOCK_STREAM).close()
        out[name] = 0
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))

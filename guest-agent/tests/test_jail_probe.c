/* agent_jail_probe: run by the jail tests inside the jail. It makes the calls
 * the jail must refuse (and some it must allow) and prints one line per call,
 * "<name> <errno>" (0 on success), or reports credentials and limits.
 *
 *   agent_jail_probe refused      calls the default profile must refuse
 *   agent_jail_probe socket       socket(2) per address family
 *   agent_jail_probe status       ids, groups, /proc/self/status capabilities,
 *                                 NoNewPrivs, Seccomp
 *   agent_jail_probe limits FILE  rlimits; writes 2x RLIMIT_FSIZE into FILE
 *   agent_jail_probe uname        uname(2)
 *
 * Raw syscall() everywhere: a libc wrapper could answer without asking the
 * kernel. Arguments are chosen so that, unfiltered, most calls fail in a way
 * other than EPERM or succeed harmlessly. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <sys/mount.h>
#include <sys/utsname.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define KEY_SPEC_PROCESS_KEYRING (-2)
#define KEY_SPEC_SESSION_KEYRING (-3)
#define KEYCTL_GET_KEYRING_ID 0
#define UFFD_USER_MODE_ONLY 1

static void report(const char *name, long rc)
{
	int e = rc < 0 ? errno : 0;

	printf("%s %d\n", name, e);
	if (rc >= 0 && rc < 1024 && strncmp(name, "socket", 6) == 0)
		close((int)rc);
}

static int refused(void)
{
	report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
	report("add_key", syscall(SYS_add_key, "user", "sbx-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
	report("request_key", syscall(SYS_request_key, "user", "sbx-probe-none", NULL, 0));
	report("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, (void *)8, 64));
	report("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
	report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	report("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0));
	report("mount", syscall(SYS_mount, "none", "/nonexistent-sbx-probe", "tmpfs", 0, NULL));
	report("umount2", syscall(SYS_umount2, "/nonexistent-sbx-probe", 0x80000000u));
	report("pivot_root", syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"));
	report("unshare", syscall(SYS_unshare, 0x80000000u));
	report("setns", syscall(SYS_setns, -1, 0));
	report("ptrace", syscall(SYS_ptrace, PTRACE_PEEKDATA, getpid(), NULL, NULL));
	report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	report("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	report("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
	report("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
	report("socket_vsock", syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
	/* The kernel truncates socket's domain to int: garbage in the upper
	 * half must not get AF_VSOCK past the filter. */
	report("socket_vsock_hi", syscall(SYS_socket, 0xffffffff00000000UL | AF_VSOCK, SOCK_STREAM, 0));
	report("process_vm_readv", syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0));
	return 0;
}

static int sockets(void)
{
	report("socket_unix", syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0));
	report("socket_inet", syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
	report("socket_inet6", syscall(SYS_socket, AF_INET6, SOCK_DGRAM, 0));
	report("socket_netlink", syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 0));
	report("socket_vsock", syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
	return 0;
}

static int status(void)
{
	static const char *const keys[] = { "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:",
					    "NoNewPrivs:", "Seccomp:" };
	uid_t r, e, s;
	gid_t gr, ge, gs, groups[128];
	int n = getgroups(128, groups);
	char line[512];
	FILE *f;

	getresuid(&r, &e, &s);
	getresgid(&gr, &ge, &gs);
	printf("uids %u %u %u\ngids %u %u %u\ngroups", r, e, s, gr, ge, gs);
	for (int i = 0; i < n; i++)
		printf(" %u", groups[i]);
	printf("\n");
	f = fopen("/proc/self/status", "r");
	if (!f) {
		printf("status-error %d\n", errno);
		return 1;
	}
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strncmp(line, keys[i], strlen(keys[i])) == 0)
				fputs(line, stdout);
	fclose(f);
	return 0;
}

static int limits(const char *file)
{
	static const struct {
		const char *name;
		int resource;
	} res[] = { { "nofile", RLIMIT_NOFILE }, { "nproc", RLIMIT_NPROC },
		    { "fsize", RLIMIT_FSIZE },	 { "cpu", RLIMIT_CPU } };
	struct rlimit fs;
	static char buf[65536];
	size_t total = 0;
	ssize_t w = 0;
	int fd;

	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		struct rlimit l;

		getrlimit(res[i].resource, &l);
		printf("%s %llu %llu\n", res[i].name, (unsigned long long)l.rlim_cur,
		       (unsigned long long)l.rlim_max);
	}
	/* Past RLIMIT_FSIZE a write fails with EFBIG once SIGXFSZ is ignored. */
	getrlimit(RLIMIT_FSIZE, &fs);
	signal(SIGXFSZ, SIG_IGN);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		printf("fsize_write -1 %d\n", errno);
		return 1;
	}
	memset(buf, 'x', sizeof(buf));
	while (fs.rlim_cur != RLIM_INFINITY && total < 2 * fs.rlim_cur) {
		w = write(fd, buf, sizeof(buf));
		if (w <= 0)
			break;
		total += (size_t)w;
	}
	printf("fsize_write %zu %d\n", total, w < 0 ? errno : 0);
	close(fd);
	return 0;
}

static int probe_uname(void)
{
	struct utsname u;

	report("uname", syscall(SYS_uname, &u));
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "refused") == 0)
		rc = refused();
	else if (argc == 2 && strcmp(argv[1], "socket") == 0)
		rc = sockets();
	else if (argc == 2 && strcmp(argv[1], "status") == 0)
		rc = status();
	else if (argc == 3 && strcmp(argv[1], "limits") == 0)
		rc = limits(argv[2]);
	else if (argc == 2 && strcmp(argv[1], "uname") == 0)
		rc = probe_uname();
	else
		fprintf(stderr, "usage: %s refused|socket|status|limits FILE|uname\n", argv[0]);
	return rc;
}

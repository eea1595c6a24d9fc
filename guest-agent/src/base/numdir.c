/* numdir: see numdir.h. */
#include "numdir.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

void agent_numdir_each(const char *path, void (*fn)(unsigned n, void *arg), void *arg)
{
	char buf[2048];
	long n;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
			unsigned v = 0;
			bool num = d->d_name[0] != '\0';

			for (const char *c = d->d_name; *c && num; c++) {
				num = *c >= '0' && *c <= '9';
				v = v * 10 + (unsigned)(*c - '0');
			}
			if (num)
				fn(v, arg);
			off += d->d_reclen;
		}
	}
	close(fd);
}

#include "pty.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "sbx/cleanup.h"

/* The slave without a path lookup where the kernel has it (4.13+): no race
 * with whatever owns /dev/pts. */
static int open_slave(int master)
{
	char name[64];
	int fd;

#ifdef TIOCGPTPEER
	fd = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 || (errno != EINVAL && errno != ENOTTY))
		return fd;
#endif
	if (ptsname_r(master, name, sizeof(name)) != 0)
		return -1;
	return open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
}

int agent_pty_open(uint16_t cols, uint16_t rows, int *master, int *slave, sbx_err *err)
{
	SBX_AUTO_CLOSE int m = -1, s = -1;
	int ret;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return sbx_err_sys(err, -errno, "open a pseudo-terminal");
	if (grantpt(m) < 0 || unlockpt(m) < 0)
		return sbx_err_sys(err, -errno, "unlock the pseudo-terminal");
	s = open_slave(m);
	if (s < 0)
		return sbx_err_sys(err, -errno, "open the pseudo-terminal's slave");
	ret = agent_pty_resize(m, cols, rows, err);
	if (ret < 0)
		return ret;
	if (fcntl(m, F_SETFL, O_NONBLOCK) < 0)
		return sbx_err_sys(err, -errno, "pseudo-terminal: set non-blocking");
	*master = sbx_steal_fd(&m);
	*slave = sbx_steal_fd(&s);
	return 0;
}

int agent_pty_resize(int master, uint16_t cols, uint16_t rows, sbx_err *err)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };

	if (ioctl(master, TIOCSWINSZ, &ws) < 0)
		return sbx_err_sys(err, -errno, "set the terminal size to %ux%u", (unsigned)cols, (unsigned)rows);
	return 0;
}

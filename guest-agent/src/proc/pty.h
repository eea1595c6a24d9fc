/* Pseudo-terminals for commands that asked for one ("pty" of exec and
 * proc.start).
 *
 * Owns opening the pair and the window size; the agent keeps the master
 * (non-blocking, close-on-exec), the child makes the slave its controlling
 * terminal and stdio (spawn.c). This module must not fork or read/write the
 * terminal's data (proc.c does). */
#ifndef AGENT_PTY_H
#define AGENT_PTY_H

#include <stdint.h>

#include "sbx/err.h"

#define AGENT_PTY_DEFAULT_COLS 80
#define AGENT_PTY_DEFAULT_ROWS 24

/* Open a master/slave pair of the given size. Both fds are close-on-exec,
 * the master non-blocking. */
int agent_pty_open(uint16_t cols, uint16_t rows, int *master, int *slave, sbx_err *err);
/* TIOCSWINSZ on the master: the kernel sends SIGWINCH to the foreground
 * process group of the terminal. */
int agent_pty_resize(int master, uint16_t cols, uint16_t rows, sbx_err *err);

#endif

/* fdstore.h - the service manager's file descriptor store (systemd's
 * FDSTORE=1, sd_pid_notify_with_fds(3)): the daemon keeps its /dev/fuse fd
 * ("fuse") and a sealed memfd with its state record ("fuse-state",
 * fstate.h) there, so that a run after a crash gets them back through
 * LISTEN_FDS/LISTEN_FDNAMES and serves the same mount.
 *
 * systemd keeps stored fds across restarts of the service (a new run gets
 * copies, the store keeps its own), drops a stored fd that is the same open
 * file as one it holds already, drops one that reports POLLHUP/POLLERR, and
 * empties the store when the unit stops (its default).
 * Without NOTIFY_SOCKET every call does nothing (said once in the log).
 * Prefix fdstore_.
 */
#ifndef NVMEFS_FDSTORE_H
#define NVMEFS_FDSTORE_H

#include <stddef.h>

#define FDSTORE_FUSE "fuse"
#define FDSTORE_STATE "fuse-state"

/* True when there is a service manager to store fds with. */
int fdstore_available(void);
/* A sealed memfd (shrink, grow, write, seal) holding buf[0..len). */
int fdstore_memfd(const void *buf, size_t len, int *out);
/* buf[0..*len) := the contents of a memfd made by fdstore_memfd: -EPERM
 * when it lacks a seal, -EMSGSIZE when larger than cap. */
int fdstore_memfd_read(int fd, void *buf, size_t cap, size_t *len);
/* Store the two fds under their names (idempotent for the same open files:
 * systemd keeps one of each).  0 also without a service manager. */
int fdstore_save(int fuse_fd, int state_fd);
/* Remove both names from the store (FDSTOREREMOVE=1). */
void fdstore_forget(void);
/* The fds the service manager handed this run (sd_listen_fds_with_names,
 * which checks LISTEN_PID and unsets the variables): *fuse_fd and
 * *state_fd, -1 when absent; any other fd is logged and closed.  Returns
 * how many fds were handed (0: none). */
int fdstore_take(int *fuse_fd, int *state_fd);

#endif

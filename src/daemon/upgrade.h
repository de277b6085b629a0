/* upgrade.h - replacing the running daemon with the installed binary in
 * place (nvmefsctl restart, SIGUSR2), keeping its FUSE connection.
 *
 * Before anything stops, the installed binary is asked whether it would
 * adopt the connection (upg_precheck runs `BIN --check-adopt -c CONF
 * --state-fd N --ns-table T`): it loads the config with its own code,
 * computes the digest over the namespace table the running daemon passes
 * (the devices are the running daemon's: the child cannot identify them)
 * and runs the checks of adoption that need no live fd (fstate_adoptable).
 * Once the running daemon has drained and shut its controllers down,
 * upg_exec hands the /dev/fuse fd and the state record to the same binary
 * as fds 3 and 4 with LISTEN_FDS=2, LISTEN_PID=getpid() and
 * LISTEN_FDNAMES=fuse:fuse-state, and execs it with the original argv: the
 * pid stays, and the new image adopts the connection as after a crash.
 * Prefix upg_.  Every function returns 0 or a negative errno unless it says
 * otherwise.
 */
#ifndef NVMEFS_UPGRADE_H
#define NVMEFS_UPGRADE_H

#include <stddef.h>

#include "fuse_fs.h"

/* The binary to re-execute, from argv0 as the daemon was started (not
 * /proc/self/exe, the image running now, perhaps deleted by an upgrade):
 * argv0 itself when it holds a '/' (made absolute against the working
 * directory), else the first executable of that name on PATH. */
int upg_resolve_binary(const char *argv0, char *out, size_t len);

/* The namespace table as --ns-table takes it: name/size/lba entries joined
 * by commas.  -ENOSPC when it does not fit. */
int upg_ns_table_format(const struct fusefs_ns_desc *ns, unsigned nr, char *buf, size_t len);

/* `nvmefsd --check-adopt`: whether this binary would adopt the connection
 * the record on state_fd describes, serving config with the namespaces of
 * ns_table.  Prints "ok" or the reason on stdout; an exit status, 0 when it
 * would adopt. */
int upg_check_adopt_main(const char *config, int state_fd, const char *ns_table);

/* Run `bin --check-adopt` on the record state_fd: 0 when it would adopt,
 * else -EPROTO (refused) or another errno, with the reason in why[len]. */
int upg_precheck(const char *bin, const char *config, int state_fd,
		 const struct fusefs_ns_desc *ns, unsigned nr, char *why, size_t len);

/* Exec bin with argv, fuse_fd and state_fd handed over as the service
 * manager would hand them.  Returns only on failure. */
int upg_exec(const char *bin, char *const argv[], int fuse_fd, int state_fd);

#endif

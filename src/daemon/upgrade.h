/* upgrade.h - replacing the running daemon with the installed binary in
 * place (nvmefsctl restart, SIGUSR2), keeping its FUSE connection.
 *
 * Before anything stops, the installed binary is asked whether it would
 * adopt the connection (upg_check_* run `BIN --check-adopt -c CONF
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

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fuse_fs.h"

/* The binary to re-execute: the path the kernel ran this process from
 * (/proc/self/exe, read once at start, before an upgrade replaces the file:
 * absolute, every symbolic link resolved), never argv[0] or PATH, which the
 * caller chose.  An upgrade installs the new binary at that path.  0, or a
 * negative errno with the reason in why. */
int upg_resolve_binary(char *out, size_t len, char *why, size_t whylen);

/* Whether the file at path is no longer the image this process runs (an
 * upgrade installed another one there since it started): its device and
 * inode differ from /proc/self/exe's, or it is gone.  False for an empty
 * path (none resolved at start) and when the running image cannot be
 * asked. */
bool upg_binary_replaced(const char *path);

/* Whether path may be executed as root for a restart: a regular
 * executable file owned by root (or the effective user) and writable by
 * its owner only, reached from / by directories that are root's, none
 * writable by others unless sticky and its own writable by its owner only,
 * with no symbolic link (safepath.h's rules).  0, or a negative errno with
 * the reason in why. */
int upg_binary_check(const char *path, char *why, size_t len);

/* The namespace table as --ns-table takes it: name/size/lba entries joined
 * by commas.  -ENOSPC when it does not fit. */
int upg_ns_table_format(const struct fusefs_ns_desc *ns, unsigned nr, char *buf, size_t len);

/* `nvmefsd --check-adopt`: whether this binary would adopt the connection
 * the record on state_fd describes, serving config with the namespaces of
 * ns_table.  Prints "ok" or the reason on stdout; an exit status, 0 when it
 * would adopt. */
int upg_check_adopt_main(const char *config, int state_fd, const char *ns_table);

/* ---- the pre-check, driven by the caller's loop (upg_check_*) ----
 * upg_check_start runs `bin --check-adopt` on the record state_fd with its
 * standard output and error on a pipe, and returns at once.  The caller
 * waits for upg_check_fd to be readable and calls upg_check_read, which
 * drains the pipe without blocking (however much the child prints: the
 * first 4 KiB, the last line and the number of lines are kept); once it
 * says the output ended and the child is gone (upg_check_reaped, or
 * upg_check_exited without waiting), upg_check_end gives the verdict and
 * frees the check; a child still running then (past UPG_CHECK_MAX_MS, the
 * caller's bound, or a cancelled check) is killed (SIGKILL) and reaped
 * within a short bound.  The reason a refusal gives is "BIN would not adopt the
 * connection: LAST LINE", then up to UPG_REASON_LINES of the lines before
 * it (the config's errors, say), each on a line of its own, and "(and N
 * more lines)". */
#define UPG_CHECK_MAX_MS 8000 /* below nvmefsctl's 10 s: the caller sees the verdict */
#define UPG_REASON_LINES 5
#define UPG_LINE_MAX 300      /* bytes of one line shown */
struct upg_check;

/* 0 with *out, or a negative errno with the reason in why (nothing runs). */
int upg_check_start(const char *bin, const char *config, int state_fd,
		    const struct fusefs_ns_desc *ns, unsigned nr, struct upg_check **out, char *why,
		    size_t len);
int upg_check_fd(const struct upg_check *c);
/* Drain the pipe: 0 when more may come, 1 at its end (or a negative errno:
 * the end as well). */
int upg_check_read(struct upg_check *c);
/* The child's pid, for a caller whose loop reaps every child (libev's
 * default loop does, on SIGCHLD: an ev_child watcher gets the status),
 * which then hands its wait status to upg_check_reaped. */
pid_t upg_check_pid(const struct upg_check *c);
void upg_check_reaped(struct upg_check *c, int status);
/* Whether the child has exited: reaped by upg_check_reaped, or now
 * (waitpid, never waiting).  One reaped by someone else without
 * upg_check_reaped counts as exited, its verdict a refusal. */
bool upg_check_exited(struct upg_check *c);
/* The verdict, c freed: 0 when it would adopt; else -EPROTO (refused, or
 * killed by a signal), -ENOTSUP (it does not know --check-adopt), -ENOEXEC
 * (it cannot run), -ETIMEDOUT (timed_out: still running at the caller's
 * bound, killed) or -ECANCELED (still running, not timed out: the caller
 * gave up), with the reason in why. */
int upg_check_end(struct upg_check *c, bool timed_out, char *why, size_t len);

/* Append to the string out (len bytes in all) up to max of the lines of
 * text, each as "\n  LINE" (at most UPG_LINE_MAX bytes of it), and
 * "\n  (and N more lines)" when total (the lines there are, text holding
 * the first of them) is more than it showed. */
void upg_excerpt(char *out, size_t len, const char *text, unsigned total, unsigned max);

/* Exec bin with argv, fuse_fd and state_fd handed over as the service
 * manager would hand them.  Returns only on failure. */
int upg_exec(const char *bin, char *const argv[], int fuse_fd, int state_fd);

#endif

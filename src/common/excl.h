/* excl.h - one server per backing file or device: an exclusive lock on an
 * open file, and who holds a file open, to name them in a refusal.
 *
 * Two daemons serving one backing file would each cache and write it
 * without the other: silent corruption.  excl_lock takes a flock(2)
 * exclusive lock on an open file description: it lasts as long as that
 * description is open (across fork and exec, which a restart in place
 * does not rely on: it closes and re-opens its files), and the kernel
 * drops it when the process dies, so a crash never leaves it behind.  It
 * is advisory: only other lockers are kept out (two nvmefsd, or any tool
 * that asks), never a reader such as cp or cmp.
 *
 * Who holds it is read from /proc/locks (the pid that took a flock lock)
 * and, failing that, from /proc/PID/fd (any process with the file open):
 * for a message only, never trusted for anything else (the pid may have
 * gone, or been given to another process, since).
 *
 * Threads: any; nothing is kept between calls.  Errors: 0 or a negative
 * errno.  Prefix excl_.
 */
#ifndef NVMEFS_EXCL_H
#define NVMEFS_EXCL_H

#include <stddef.h>
#include <sys/types.h>

/* Lock fd's file for this open file description alone, without waiting.
 * 0; -EWOULDBLOCK when another description holds it (then who is "pid N
 * (COMM)", "this process" or "another process", the best /proc can say);
 * another negative errno when locks are not to be had there. */
int excl_lock(int fd, char *who, size_t len);

/* The processes other than this one that have path open (compared by
 * device and inode, so any name of it counts), as "pid N (COMM)", at most
 * 4 and how many more, into who (len bytes).  0 when none was found
 * (who: ""), else how many. */
int excl_users(const char *path, char *who, size_t len);

#endif

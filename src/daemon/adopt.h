/* adopt.h - the mount outlives the daemon: storing the FUSE connection with
 * the service manager (fdstore.h) and adopting the one a previous run left
 * there, after a crash or a restart in place (upgrade.h).
 *
 * Once INIT is answered, the /dev/fuse fd and a sealed state record
 * (fstate.h) go to the fd store (adopt_store, from the loop once a reactor
 * told adopt_on_init).  A run started with a connection handed over checks
 * it (adopt_check) and, instead of mounting, serves the same connection:
 * it has the kernel resend what the dead run had taken but not answered
 * (adopt_resend, before the reactors read) and stores the fds again
 * (adopt_finish, once they do).  When the namespace table changes at run
 * time, adopt_restamp puts a new digest into the stored record.
 *
 * Threads: the main thread (start-up and the loop), except adopt_on_init,
 * which a reactor calls.  The fds and the record are the daemon's fields
 * (daemon.h: fuse_fd_in, state_fd_in, state_fd, stored, conn, adopted).
 * Errors are logged: storing failing only means the mount will not outlive
 * a crash; a refused adoption means mounting afresh.
 * Prefix adopt_.
 */
#ifndef NVMEFS_ADOPT_H
#define NVMEFS_ADOPT_H

#include <stdbool.h>
#include <stdint.h>

#include "fuse_fs.h"

struct daemon;

/* fusefs_opts.on_init: INIT answered (a reactor thread); the loop stores
 * the connection (adopt_store) through d->init_done. */
void adopt_on_init(void *arg, const struct fusefs_init_params *p);
/* The loop's side of adopt_on_init: start watching d->init_done. */
void adopt_watch_init(struct daemon *d);

/* Whether to serve the connection the service manager handed over (true:
 * d->fo says adopt, d->adopted) or to mount afresh (every refusal is logged
 * and the handed fds closed).  Before fusefs_create. */
bool adopt_check(struct daemon *d);
/* Adopted, before the reactors read the connection: have the kernel put
 * back what the previous run had taken and not answered. */
void adopt_resend(struct daemon *d);
/* Adopted, the reactors serve the connection: keep the fds in the store. */
void adopt_finish(struct daemon *d);

/* Put digest into the stored state record in place of the one there (the
 * namespace table changed at run time: the digest of the table a later run
 * would have to build, or one no run computes to make it mount afresh).
 * 0, or a negative errno with the old record left in the store. */
int adopt_restamp(struct daemon *d, uint64_t digest);
/* The digest in the stored record (-ENOENT when nothing is stored). */
int adopt_stored_digest(struct daemon *d, uint64_t *digest);

#endif

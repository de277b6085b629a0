/* channel.h - the /dev/fuse channel: INIT negotiation and reading requests.
 *
 * The session fd is non-blocking and watched by an ev_io in each reading
 * reactor's loop; the callback takes up to a batch of requests per pass and
 * dispatches each on that reactor (fusefs_tl_rx set around
 * fuse_session_process_buf).  Before each read it asks the reactor's
 * scheduler whether it may take one more request (sched_accepting): when not,
 * the reactor stops reading until the scheduler has room again
 * (chan_room, its on_room hook), which bounds what a reactor holds.
 * Prefix chan_.
 */
#ifndef NVMEFS_FUSE_CHANNEL_H
#define NVMEFS_FUSE_CHANNEL_H

#include "fusefs_priv.h"

/* The INIT handler (in fsops_ll): request sizes, background queue, no splice. */
void chan_ll_init(void *userdata, struct fuse_conn_info *conn);
/* Start reading on rx (before the reactors start). */
void chan_start(struct fusefs_rx *rx, int fd);
/* The scheduler's on_room hook: resume reading (rx's thread). */
void chan_room(void *arg);
/* Stop rx reading for good (any thread; done on rx's thread soon). */
void chan_stop(struct fusefs_rx *rx);
/* The reactor pass hook: retry what waits. */
void chan_pass_hook(void *arg);

#endif

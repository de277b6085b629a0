/* channel.h - the /dev/fuse transport ("classic"): reading requests, sending
 * answers, and what INIT decides.
 *
 * The session fd is non-blocking; each reading reactor waits for it in a
 * wait of its own (EPOLLEXCLUSIVE: one reactor woken per request) or, with
 * an io_uring, with an ev_io in its loop.  It reads up to a batch of
 * requests per pass, decodes each (fwire.h) and serves it on that reactor
 * (fsops_dispatch).
 * Answers go out with one writev(2) each, from the DMA buffer a read's data
 * was read into.  A write's data is read into DMA memory too, a landing
 * buffer of the reactor's pool, and written to the device from there
 * (channel.c).  Before each read it asks the reactor's scheduler whether
 * it may take one more request (sched_accepting): when not, the reactor
 * stops reading until the scheduler has room again (chan_room, its on_room
 * hook), which bounds what a reactor holds.
 *
 * The channel stays open with the io_uring transport: INIT, FORGET and
 * INTERRUPT always come this way, and so does every request until each
 * FUSE queue has its entries.  Prefix chan_.
 */
#ifndef NVMEFS_FUSE_CHANNEL_H
#define NVMEFS_FUSE_CHANNEL_H

#include "fuse_proto.h"
#include "fusefs_priv.h"

/* The read buffer each reader needs: the largest write and its headers. */
size_t chan_buf_size(void);
/* Give rx's landing buffers back to its reactor's pool (the reactors have
 * stopped, nothing is in flight). */
void chan_lands_free(struct fusefs_rx *rx);
/* Start reading on rx, on its own fd (before the reactors start): in a
 * wait of its reactor's own when rx has no ring (nvme_reactor_wait_fd: one
 * reactor woken per request), else with an ev_io. */
void chan_start(struct fusefs_rx *rx);
/* rx's ring is gone (INIT left it unused): wait for the channel in the
 * reactor's own wait from now on (rx's thread). */
void chan_own_wait(struct fusefs_rx *rx);
/* The scheduler's on_room hook: resume reading (rx's thread). */
void chan_room(void *arg);
/* Stop rx taking requests for good, on both transports (any thread; done
 * on rx's thread soon). */
void chan_stop(struct fusefs_rx *rx);
/* Let go of rx's own fd of the channel (rx->fd) on rx's thread soon (any
 * thread; at once when the loop has ended): from then on nothing of rx
 * reads, answers or submits on the connection; an answer is dropped and
 * counted in late_answers.  The number stays rx's (/dev/null) until
 * chan_close_stopped closes it, from the caller's thread: only with rx's
 * reactor stopped and joined, or never started. */
void chan_close(struct fusefs_rx *rx);
void chan_close_stopped(struct fusefs_rx *rx);
/* The reactor pass hook: retry what waits, take the ring's requests. */
void chan_pass_hook(void *arg);
/* INIT has been answered with out: tell the owner (on_init), start the
 * io_uring transport if it was agreed, else say why not (rx's thread). */
void chan_init_done(struct fusefs_rx *rx, uint64_t offered, const struct fuse_init_out *out);
/* The session is gone (unmounted or aborted from outside): stop reading
 * and tell the owner once (rx's thread). */
void chan_session_ended(struct fusefs_rx *rx);

#endif

/* uring.h - the io_uring transport: FUSE queues served by the reactors.
 *
 * The kernel keeps one FUSE queue per possible CPU and puts a request on the
 * queue of the CPU its caller runs on.  Reactor r serves the queues of the
 * CPUs that fusefs_opts.cpu_map gives it, all on one io_uring of its own
 * (SQE128, IORING_OP_URING_CMD on /dev/fuse).  Each queue of an online CPU
 * has queue_depth entries, each queue of an offline CPU one (its callers
 * send nothing, and the kernel serves the ring once every queue has an
 * entry); when such a CPU comes online (looked at once a second) its queue
 * gets the rest of its depth, in ordinary memory, with the copy that costs.
 * An entry is a header buffer and a payload buffer of
 * FUSEFS_MAX_IO bytes from the reactor's DMA pool, so that a write's data
 * arrives in memory the device reads, and an aligned read's data is DMAed
 * into the buffer the kernel copies to the caller: no copy in user space.
 * Under dma_isolation with several controllers on the reactor no buffer is
 * reachable by every controller: the payloads are then ordinary memory and
 * the data is copied between a payload and its request's DMA buffer (from
 * its controller's pool), one copy per read or write.
 *
 * An entry is registered (REGISTER), comes back with a request (CQE, res 0),
 * and is answered and re-armed in one command (COMMIT_AND_FETCH); the
 * answers of one loop pass are submitted together by the reactor's flush
 * hook, the ring's completions are reaped by its pass hook and, while the
 * loop sleeps (interrupt and hybrid modes), wake it through the ring's fd,
 * which polls readable while the CQ holds entries (no eventfd to read); a
 * poll-mode loop does not watch the fd and reaps every pass.
 * Entries come back with -ENOTCONN when the connection ends.  Prefix fur_.
 */
#ifndef NVMEFS_FUSE_URING_H
#define NVMEFS_FUSE_URING_H

#include "fusefs_priv.h"

/* After the mount, before the reactors start (main thread): the rings of
 * the reactors that serve at least one CPU's queue, and their entries'
 * memory.  -ENOMEM when a reactor's pool cannot hold its entries, -errno
 * when io_uring cannot be set up; nothing is left allocated then. */
int fur_setup(struct fusefs *fs);
/* True when fur_setup has set up a ring for every FUSE queue: INIT may ask
 * for io_uring. */
bool fur_ready(const struct fusefs *fs);
/* INIT agreed on io_uring (any reactor's thread): every ring registers its
 * entries on its own reactor. */
void fur_start(struct fusefs *fs);
/* INIT did not agree: give the entries' memory back (any reactor's thread). */
void fur_abandon(struct fusefs *fs);
/* Take the ring's requests (rx's thread, each pass). */
void fur_reap(struct fusefs_rx *rx);
/* Take no new requests (rx's thread): those that arrive are held unanswered
 * until the connection ends. */
void fur_stop(struct fusefs_rx *rx);
/* Reactors stopped: close the rings, free the entries. */
void fur_destroy(struct fusefs *fs);

#endif

/* fusefs_priv.h - what the front end's modules share: the mount (struct
 * fusefs) and one reactor's part of it (struct fusefs_rx).
 *
 *   fuse_fs.c  set-up, stop, statistics (the public API, fuse_fs.h)
 *   fsns.c     the namespace table (fsns.h)
 *   fwire.c    FUSE requests as bytes: decoding, answers (fwire.h)
 *   channel.c  the /dev/fuse transport: reading requests, INIT's outcome
 *              (channel.h)
 *   uring.c    the io_uring transport: FUSE queues on the reactors (uring.h)
 *   fsops.c    the FUSE operations: attributes, directory, checks (fsops.h)
 *   fsio.c     requests that reach the device: read, write, fsync,
 *              fallocate (fsio.h)
 *   rqsched.c  per-reactor request scheduler (rqsched.h)
 *   rlock.c    block range lock (rlock.h)
 *
 * A request is served on the reactor that took it, from either transport:
 * the operations use that reactor's scheduler and qpairs.
 */
#ifndef NVMEFS_FUSEFS_PRIV_H
#define NVMEFS_FUSEFS_PRIV_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <ev.h>
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "fuse_fs.h"
#include "fsns.h"
#include "rqsched.h"

struct fur_ring;

struct fusefs_rx {
	struct fusefs *fs;
	unsigned idx;
	struct nvme_reactor *r;
	struct nvme_qpair **qp;  /* one per controller */
	struct sched *sched;
	/* the channel's */
	/* this reactor's own duplicate of the session's /dev/fuse (-1: none
	 * or closed): what it reads, watches, answers and submits its ring
	 * commands on.  Only this reactor's thread uses and closes it while
	 * the reactor runs (chan_close), so no other thread's close can make
	 * its number name another file under it (fusefs_unmount). */
	int fd;
	bool fd_dead;            /* fd is /dev/null now, or closed: send nothing */
	bool reader;
	bool paused;             /* not reading until the scheduler has room */
	bool own_wait;           /* fd is in the reactor's own wait, not in io */
	ev_io io;
	atomic_bool stopped;     /* not reading the channel (any more) */
	char *dbuf;              /* /dev/fuse read buffer */
	size_t dbuf_len;
	/* /dev/fuse: DMA buffers a write's data is read into (channel.c) */
	struct chan_land *lands;
	struct chan_land *land_free;
	unsigned nlands;
	bool lands_tried;        /* allocated once, on the reactor's thread */
	/* answers the kernel refused for a request it no longer had while
	 * the connection lived (dev_send): logged at most once a second */
	uint64_t dup_log_ns;
	unsigned dup_unlogged;
	struct fur_ring *ring;   /* this reactor's FUSE queues (uring), or NULL */
};

struct fusefs {
	struct fusefs_opts o;
	struct fuse_session *se; /* libfuse: the mount only */
	int fd;                  /* /dev/fuse of the session (-1 once closed) */
	int null_fd;             /* /dev/null: what a reactor's fd becomes (chan_close) */
	bool mounted;
	bool adopted;            /* fd came from an earlier run: no libfuse session */
	atomic_int transport;    /* enum fusefs_transport serving now */
	atomic_uint rings_pending; /* reactors still registering their entries */
	atomic_bool ring_failed;
	struct fsns_table ns;     /* changes while the reactors serve: fsns.h */
	unsigned nr_desc;         /* the table at start, for fusefs_namespaces */
	struct fusefs_ns_desc *desc;
	uint32_t max_lba;         /* the largest LBA size at start: the memory bounds' */
	unsigned nr_rx;
	struct fusefs_rx *rx;
	struct timespec t0;
	atomic_bool exit_reported;
};

#endif

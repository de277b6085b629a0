/* fusefs_priv.h - what the front end's modules share: the mount (struct
 * fusefs) and one reactor's part of it (struct fusefs_rx).
 *
 *   fuse_fs.c  set-up, stop, statistics (the public API, fuse_fs.h)
 *   fsns.c     the namespace table (fsns.h)
 *   channel.c  the /dev/fuse channel: INIT, reading requests (channel.h)
 *   fsops.c    the FUSE operations: attributes, directory, checks (fsops.h)
 *   fsio.c     requests that reach the device: read, write, fsync,
 *              fallocate (fsio.h)
 *   rqsched.c  per-reactor request scheduler (rqsched.h)
 *   rlock.c    block range lock (rlock.h)
 *
 * A request is served on the reactor that read it: the channel sets
 * fusefs_tl_rx around each dispatch, and the operations use that reactor's
 * scheduler and qpairs.
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

struct fusefs_rx {
	struct fusefs *fs;
	unsigned idx;
	struct nvme_reactor *r;
	struct nvme_qpair **qp;  /* one per controller */
	struct sched *sched;
	/* the channel's */
	bool reader;
	bool paused;             /* not reading until the scheduler has room */
	ev_io io;
	atomic_bool stopped;     /* not reading the channel (any more) */
	struct fuse_buf fbuf;    /* the session buffer */
};

struct fusefs {
	struct fusefs_opts o;
	struct fuse_session *se;
	bool mounted;
	unsigned nr_ns;
	struct fusefs_ns *ns;
	struct fusefs_ns_desc *desc;
	unsigned nr_rx;
	struct fusefs_rx *rx;
	struct timespec t0;
	atomic_bool exit_reported;
};

/* The reactor dispatching the current request (set by the channel). */
extern __thread struct fusefs_rx *fusefs_tl_rx;

#endif

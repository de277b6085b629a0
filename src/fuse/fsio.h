/* fsio.h - the requests that reach the device: read, write (read-modify-write
 * of partial blocks), fsync (Flush) and fallocate (Write Zeroes, with DEAC for
 * a punch).
 *
 * fsops.c checks a request (inode, offset, length, mode) and answers what needs
 * no device; whatever reaches the device is started here, on the reactor
 * rx, and answered from a completion callback on the same reactor.  Each
 * request states what it needs (DMA bytes, a block range lock) and the
 * scheduler (rqsched.h) runs it once it has them; what it submits goes to
 * rx's own qpair on the namespace's controller.
 *
 * Every function answers r itself (a copy of it), at once or later.  Where
 * the transport lends memory of the reactor's DMA pool (the io_uring entry's
 * payload buffer: r->rbuf, r->data_dma), whole-block reads are DMAed into it
 * and whole-block writes DMAed from it, without a copy.  Prefix fsio_.
 */
#ifndef NVMEFS_FUSE_IO_H
#define NVMEFS_FUSE_IO_H

#include "fusefs_priv.h"
#include "fsns.h"
#include "fwire.h"

#define FUSEFS_ZBUF_MAX (1u << 20) /* zero buffer when Write Zeroes is missing */

/* Largest DMA buffer one request takes on namespaces of at most max_lba
 * bytes per block: fusefs_create checks that every pool can give it. */
size_t fsio_max_mem(uint32_t max_lba);

/* Bytes of one request, for the scheduler's sched_opts.rq_size. */
size_t fsio_rq_size(void);

/* [off, off + size) lies within the namespace, size in 1..FUSEFS_MAX_IO. */
void fsio_read(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, uint64_t off,
	       size_t size);
/* The first size bytes of data; unless r->data_dma, they are copied before
 * this returns.  dsync: answered only once durable (the namespace has a
 * volatile write cache): FUA on every command, read-modify-write included,
 * or for a write larger than the mount's dsync_fua_max a Flush after it. */
void fsio_write(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, uint64_t off,
		const void *data, size_t size, bool dsync);
/* Flush (the namespace has a volatile write cache). */
void fsio_fsync(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns);
/* mode: PUNCH_HOLE|KEEP_SIZE or ZERO_RANGE(|KEEP_SIZE); off < end <= size. */
void fsio_fallocate(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, int mode,
		    uint64_t off, uint64_t end);

/* The figures rx keeps of ns, or NULL when the table keeps none. */
static inline struct sched_ns_stats *fsio_ns_stats(const struct fusefs_rx *rx,
						   const struct fusefs_ns *ns)
{
	return ns && ns->st ? &ns->st[rx->idx] : NULL;
}

/* Engine errno -> what a caller of read(2)/write(2) understands. */
int fsio_map_err(int err);

#endif

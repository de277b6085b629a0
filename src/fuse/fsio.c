/* fsio.c - requests that reach the device.
 *
 * A request (struct rq) moves through a few stages.  The scheduler gives it
 * its DMA buffer and, for writes and fallocate, the block range lock before
 * its first stage runs; a stage that finds no free queue slot returns
 * SCHED_STALL and is run again later.  Writes hold the lock so that a
 * read-modify-write never races with another write to the same blocks (the
 * lock covers aligned writes too: a read-modify-write of a block would
 * otherwise write back stale bytes of a concurrent write to it).
 */
#include "fsio.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "nvme.h"

#define ZBLOCKS_MAX 65536u /* NLB is 16 bits, 0-based */

enum rq_op { OP_READ, OP_WRITE, OP_FSYNC, OP_FALLOC };
enum rq_stage { RS_START, RS_EDGES, RS_WRITE, RS_IO, RS_FA_PART, RS_DFLUSH };

struct rq {
	struct sched_rq sq;       /* first: the scheduler's part */
	struct fw_req r;          /* the transport's request, answered once */
	struct fusefs_rx *rx;
	struct fusefs_ns *ns;
	uint8_t op, stage;
	int mode;                 /* fallocate */
	uint64_t off, len;        /* bytes, clamped to the namespace */
	uint64_t lb0, lb1;        /* blocks touched: [lb0, lb1) */
	/* One DMA allocation (sq.dma, sq.mem bytes): [buf, buf + buf_len) the
	 * blocks (or a zero buffer), then the partial blocks read for a
	 * read-modify-write at edge. */
	uint8_t *buf;
	size_t buf_len;
	uint8_t *edge;
	unsigned outstanding;     /* commands in flight */
	unsigned submitted;       /* edge reads submitted (bit mask) */
	int err;
	/* read-modify-write edges: block and [z0, z1) bytes in it to replace */
	unsigned nedge, part;
	uint64_t eblk[2];
	uint32_t ez0[2], ez1[2];
	bool part_read;           /* fallocate: edge read done, write next */
	uint64_t cur, mid1;       /* fallocate: next block of the middle, end */
	uint64_t step;            /* blocks of the command in flight */
	bool fua;                 /* O_DSYNC write: FUA on its commands */
	bool dflush;              /* O_DSYNC write: a Flush after it */
	/* the failure, for its log line: the engine's error and NVMe status */
	int cause;
	uint16_t status;
};

#define RQ(sqp) ((struct rq *)((char *)(sqp) - offsetof(struct rq, sq)))

static enum sched_res rq_run(struct sched_rq *sq);

int fsio_map_err(int err)
{
	switch (err) {
	case 0:
		return 0;
	case -ENOSPC:
		return ENOSPC;
	case -ENOMEM:
		return ENOMEM;
	case -EACCES:
		return EROFS; /* the device refused the write: write protected */
	case -ENODEV:
		return EIO; /* the controller is gone: fail at once, never wait */
	default:
		return EIO; /* media/data errors, timeouts, aborts, a dead controller */
	}
}

size_t fsio_max_mem(uint32_t max_lba)
{
	/* an unaligned write of FUSEFS_MAX_IO: one block more than its
	 * length, plus its two partial blocks read separately */
	size_t w = FUSEFS_MAX_IO + 3 * (size_t)max_lba;
	size_t z = FUSEFS_ZBUF_MAX + (size_t)max_lba;

	return w > z ? w : z;
}

size_t fsio_rq_size(void)
{
	return sizeof(struct rq);
}

static struct nvme_qpair *rq_qp(struct rq *q)
{
	return q->rx->qp[q->ns->d.ctrl];
}

static void rq_abort(struct sched_rq *sq, int errnum)
{
	struct rq *q = RQ(sq);

	if (errnum)
		fw_reply_err(&q->r, errnum);
	else
		fw_reply_none(&q->r); /* the channel is gone: just free it */
}

static struct rq *rq_new(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, int op,
			 uint8_t stat_op)
{
	struct sched_rq *sq = sched_rq_new(rx->sched, stat_op);
	struct rq *q;

	if (!sq) {
		sched_count(rx->sched, fsio_ns_stats(rx, ns), stat_op, 0, ENOMEM);
		fw_reply_err(r, ENOMEM);
		return NULL;
	}
	if (ns->st)
		sched_rq_ns(sq, &ns->st[rx->idx]);
	q = RQ(sq);
	q->r = *r;
	q->rx = rx;
	q->ns = ns;
	q->op = (uint8_t)op;
	/* it waits for trackers of this controller's qpair only */
	sq->dom = (uint16_t)ns->d.ctrl;
	sq->run = rq_run;
	sq->abort = rq_abort;
	return q;
}

static size_t edge_bytes(const struct rq *q)
{
	return (q->op == OP_WRITE ? q->nedge : q->nedge ? 1 : 0) << q->ns->shift;
}

/* What the scheduler must get before the first stage runs. */
static void rq_needs(struct rq *q, bool lock)
{
	q->sq.mem = q->buf_len + edge_bytes(q);
	if (lock) {
		q->sq.lock = &q->ns->lock;
		q->sq.lb0 = q->lb0;
		q->sq.lb1 = q->lb1;
	}
	q->sq.bytes = q->len;
}

/* Stage RS_START: the buffer has come. */
static void rq_take_buf(struct rq *q)
{
	q->buf = q->sq.dma;
	q->edge = q->buf ? q->buf + q->buf_len : NULL;
}

/* An error returned to an application gets a log line (rate-limited per
 * namespace: a removed controller fails every request): the file, what was
 * asked, the errno and what the device said.  Off the success path. */
static void rq_log_err(const struct rq *q, int errnum)
{
	const char *name = strerrorname_np(errnum);
	char what[96], why[128] = "", more[96] = "";
	unsigned sup;

	if (!log_rl_take(&q->ns->err_rl, &sup))
		return;
	if (q->op == OP_FSYNC)
		snprintf(what, sizeof(what), "fsync (NVMe Flush)");
	else
		snprintf(what, sizeof(what), "%s of %llu bytes at offset %llu",
			 q->op == OP_READ    ? "read"
			 : q->op == OP_WRITE ? "write"
			 : (q->mode & FALLOC_FL_PUNCH_HOLE) ? "punch"
							     : "zeroing",
			 (unsigned long long)q->len, (unsigned long long)q->off);
	if (q->status == NVME_STATUS_TIMEOUT)
		snprintf(why, sizeof(why), ": the command timed out, its retries used up");
	else if (q->status)
		snprintf(why, sizeof(why), ": NVMe status 0x%04x (%s)", q->status,
			 nvme_status_str(q->status));
	else if (q->cause)
		snprintf(why, sizeof(why), ": %s", strerror(-q->cause));
	if (sup)
		snprintf(more, sizeof(more), " (and %u more I/O errors of this file not logged "
			 "since the previous one)", sup);
	log_warn("%s: %s failed with %s%s%s", q->ns->name, what, name ? name : "an error", why,
		 more);
}

static void rq_fail(struct rq *q, int errnum)
{
	rq_log_err(q, errnum);
	fw_reply_err(&q->r, errnum);
	sched_finish(&q->sq, errnum);
}

/* What a submission's return means for the request: a stall until a tracker
 * frees (-EAGAIN), failed, or one more command in flight (and, with to_io,
 * the request now waits for it). */
static enum sched_res rq_issued(struct rq *q, int err, bool to_io)
{
	if (err == -EAGAIN)
		return SCHED_STALL;
	if (err) {
		q->cause = err;
		rq_fail(q, fsio_map_err(err));
		return SCHED_ASYNC;
	}
	q->outstanding++;
	if (to_io)
		q->stage = RS_IO;
	return SCHED_ASYNC;
}

/* A command of q failed: q fails, saying why (kept out of line: the
 * completions that succeed pay nothing for it). */
static __attribute__((noinline, cold)) void cmd_failed(struct rq *q, int err, uint16_t status)
{
	q->cause = err;
	q->status = status;
	rq_fail(q, fsio_map_err(err));
}

/* One command of q completed: false (and q failed) on an error. */
static inline bool cmd_ok(struct rq *q, int err, uint16_t status)
{
	q->outstanding--;
	if (__builtin_expect(err != 0, 0)) {
		cmd_failed(q, err, status);
		return false;
	}
	return true;
}

/* ---- read ---- */

static void read_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;
	uint8_t *data = q->buf + (q->off - (q->lb0 << q->ns->shift));
	size_t len = q->len;

	if (!cmd_ok(q, err, status))
		return;
	/* the audit build's own faults (audit.h); nothing in other builds */
	if (aud_inject(q->rx, AUD_INJ_SHORT))
		len = 0;
	if (aud_inject(q->rx, AUD_INJ_CORRUPT))
		data[0] ^= 0x01;
	fw_reply_buf(&q->r, data, len);
	if (aud_inject(q->rx, AUD_INJ_TWICE))
		fw_reply_buf(&q->r, data, len);
	sched_finish(&q->sq, 0);
}

static enum sched_res read_run(struct rq *q)
{
	int err;

	if (!q->buf)
		rq_take_buf(q);
	err = aud_qpair_read(q->rx, q->r.unique, q->ns, rq_qp(q), q->lb0, q->buf, q->buf_len,
			     read_done, q);
	return rq_issued(q, err, true);
}

/* Whole blocks, at most what the transport's answer buffer holds: the device
 * can DMA straight into it. */
static bool in_place(const struct rq *q, const struct fw_req *r)
{
	uint64_t mask = (1ull << q->ns->shift) - 1;

	return r->rbuf && !(q->off & mask) && !(q->len & mask) && q->len <= r->rbuf_len;
}

void fsio_read(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, uint64_t off,
	       size_t size)
{
	struct rq *q = rq_new(rx, r, ns, OP_READ, FUSEFS_OP_READ);

	if (!q)
		return;
	SCHED_STAT_ADD(rx->sched, reads, 1);
	q->off = off;
	q->len = size;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (q->off + q->len + (1u << ns->shift) - 1) >> ns->shift;
	q->buf_len = (q->lb1 - q->lb0) << ns->shift;
	if (in_place(q, r)) {
		q->buf = r->rbuf; /* no DMA memory of the pool, no copy */
		q->sq.bytes = q->len;
	} else {
		rq_needs(q, false);
	}
	sched_start(&q->sq);
}

/* ---- write, with read-modify-write of partial blocks ---- */

/* Partial blocks of [off, off+len) and which bytes of them come from the
 * device (the rest is new data or zeroes). */
static void plan_edges(struct rq *q)
{
	uint64_t lsz = 1ull << q->ns->shift;
	uint64_t end = q->off + q->len;

	q->nedge = 0;
	if (q->off & (lsz - 1)) {
		uint64_t b = q->off >> q->ns->shift;
		q->eblk[0] = b;
		q->ez0[0] = (uint32_t)(q->off - (b << q->ns->shift));
		q->ez1[0] = (uint32_t)((end < (b + 1) * lsz ? end : (b + 1) * lsz) - (b << q->ns->shift));
		q->nedge = 1;
	}
	if ((end & (lsz - 1)) && (q->nedge == 0 || (end >> q->ns->shift) != q->eblk[0])) {
		uint64_t b = end >> q->ns->shift;
		uint64_t s = q->off > (b << q->ns->shift) ? q->off : (b << q->ns->shift);
		q->eblk[q->nedge] = b;
		q->ez0[q->nedge] = (uint32_t)(s - (b << q->ns->shift));
		q->ez1[q->nedge] = (uint32_t)(end - (b << q->ns->shift));
		q->nedge++;
	}
}

static void write_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	/* before the answer (a failed write may have written blocks too): a
	 * stat after it sees the change */
	fsns_touch(q->ns);
	if (!cmd_ok(q, err, status))
		return;
	if (q->dflush && q->stage != RS_DFLUSH) {
		/* durable only once the Flush after it completed */
		q->stage = RS_DFLUSH;
		sched_resume(&q->sq);
		return;
	}
	fw_reply_write(&q->r, (uint32_t)q->len);
	sched_finish(&q->sq, 0);
}

static void edge_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	q->outstanding--;
	if (err && !q->err) {
		q->err = err;
		q->status = status;
	}
	if (q->outstanding || q->submitted != (1u << q->nedge) - 1)
		return; /* the other edge read is still to come */
	if (q->err) {
		q->cause = q->err;
		rq_fail(q, fsio_map_err(q->err));
		return;
	}
	/* keep the device's bytes around the new data */
	uint32_t lsz = 1u << q->ns->shift;
	for (unsigned i = 0; i < q->nedge; i++) {
		uint8_t *blk = q->buf + ((q->eblk[i] - q->lb0) << q->ns->shift);
		const uint8_t *old = q->edge + (size_t)i * lsz;
		memcpy(blk, old, q->ez0[i]);
		memcpy(blk + q->ez1[i], old + q->ez1[i], lsz - q->ez1[i]);
	}
	q->stage = RS_WRITE;
	sched_resume(&q->sq);
}

static enum sched_res write_run(struct rq *q)
{
	struct nvme_qpair *qp = rq_qp(q);
	uint32_t lsz = 1u << q->ns->shift;
	int err;

	switch (q->stage) {
	case RS_START:
		if (!q->buf)
			rq_take_buf(q);
		q->stage = q->nedge ? RS_EDGES : RS_WRITE;
		return write_run(q);
	case RS_EDGES:
		for (unsigned i = 0; i < q->nedge; i++) {
			if (q->submitted & (1u << i))
				continue;
			err = aud_qpair_read(q->rx, q->r.unique, q->ns, qp, q->eblk[i],
					     q->edge + (size_t)i * lsz, lsz, edge_done, q);
			if (err == -EAGAIN)
				return SCHED_STALL;
			if (err) {
				if (!q->err)
					q->err = err;
				q->submitted = (1u << q->nedge) - 1;
				if (!q->outstanding) {
					q->cause = err;
					rq_fail(q, fsio_map_err(err));
				}
				return SCHED_ASYNC;
			}
			q->submitted |= 1u << i;
			q->outstanding++;
		}
		return SCHED_ASYNC;
	case RS_WRITE:
		err = aud_qpair_write(q->rx, q->r.unique, q->ns, qp, q->lb0, q->buf, q->buf_len,
				      q->fua, write_done, q);
		return rq_issued(q, err, true);
	case RS_DFLUSH:
		err = nvme_qpair_flush(qp, q->ns->d.nsid, write_done, q);
		if (!err) {
			SCHED_STAT_ADD(q->rx->sched, flushes_sent, 1);
			SCHED_STAT_ADD(q->rx->sched, dsync_flushes, 1);
		}
		return rq_issued(q, err, false);
	default:
		return SCHED_ASYNC;
	}
}

void fsio_write(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, uint64_t off,
		const void *data, size_t size, bool dsync)
{
	struct rq *q = rq_new(rx, r, ns, OP_WRITE, FUSEFS_OP_WRITE);
	uint8_t *to;

	if (!q)
		return;
	if (dsync && ns->vwc) {
		/* without a volatile cache a completed write is durable already */
		SCHED_STAT_ADD(rx->sched, dsync_writes, 1);
		if (size <= rx->fs->o.dsync_fua_max) {
			q->fua = true;
			SCHED_STAT_ADD(rx->sched, fua_writes, 1);
		} else {
			q->dflush = true;
		}
	}
	q->off = off;
	q->len = size;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (q->off + q->len + (1u << ns->shift) - 1) >> ns->shift;
	q->buf_len = (q->lb1 - q->lb0) << ns->shift;
	plan_edges(q);
	SCHED_STAT_ADD(rx->sched, writes, 1);
	if (q->nedge)
		SCHED_STAT_ADD(rx->sched, rmw_writes, 1);
	if (!q->nedge && r->data_dma) {
		/* whole blocks already in DMA memory that stays ours until
		 * the answer (the ring's payload buffer): write from there */
		rq_needs(q, true);
		q->sq.mem = 0;
		q->buf = (uint8_t *)data;
		sched_start(&q->sq);
		return;
	}
	rq_needs(q, true);
	if (r->data_dma) {
		/* the ring's buffer stays ours until the answer: the data
		 * goes into the DMA buffer when there is one, never into a
		 * bounce buffer */
		sched_payload_lent(&q->sq, q->off - (q->lb0 << ns->shift), data, size);
		sched_start(&q->sq);
		return;
	}
	/* /dev/fuse's buffer is reused once we return: take the data
	 * now, straight into the DMA buffer when one is free, else into a
	 * bounce buffer the scheduler has budgeted for */
	to = sched_payload(&q->sq, q->off - (q->lb0 << ns->shift), size);
	if (!to) {
		rq_fail(q, ENOMEM);
		return;
	}
	memcpy(to, data, size);
	SCHED_STAT_ADD(rx->sched, copy_bytes, size);
	sched_start(&q->sq);
}

/* ---- fsync ---- */

static void fsync_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	if (!cmd_ok(q, err, status))
		return;
	fw_reply_err(&q->r, 0);
	sched_finish(&q->sq, 0);
}

static enum sched_res fsync_run(struct rq *q)
{
	int err = nvme_qpair_flush(rq_qp(q), q->ns->d.nsid, fsync_done, q);

	if (!err)
		SCHED_STAT_ADD(q->rx->sched, flushes_sent, 1);
	return rq_issued(q, err, true);
}

void fsio_fsync(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns)
{
	struct rq *q = rq_new(rx, r, ns, OP_FSYNC, FUSEFS_OP_FLUSH);

	if (!q)
		return;
	rq_needs(q, false);
	sched_start(&q->sq);
}

/* ---- fallocate: partial edge blocks, then the aligned middle ---- */

static void fa_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	fsns_touch(q->ns); /* as write_done (an edge's read marks it too: harmless) */
	if (!cmd_ok(q, err, status))
		return;
	if (q->part < q->nedge) {
		if (!q->part_read) {
			q->part_read = true;
			memset(q->edge + q->ez0[q->part], 0, q->ez1[q->part] - q->ez0[q->part]);
		} else {
			q->part_read = false;
			q->part++;
		}
	} else {
		q->cur += q->step;
	}
	if (q->part >= q->nedge && q->cur >= q->mid1) {
		fw_reply_err(&q->r, 0);
		sched_finish(&q->sq, 0);
		return;
	}
	sched_resume(&q->sq);
}

static enum sched_res fa_run(struct rq *q)
{
	struct nvme_qpair *qp = rq_qp(q);
	uint32_t lsz = 1u << q->ns->shift;
	int err;

	if (q->stage == RS_START) {
		rq_take_buf(q);
		if (q->buf_len)
			memset(q->buf, 0, q->buf_len);
		q->stage = RS_FA_PART;
	}
	if (q->part >= q->nedge && q->cur >= q->mid1) {
		/* nothing at all to do (an empty range) */
		fw_reply_err(&q->r, 0);
		sched_finish(&q->sq, 0);
		return SCHED_ASYNC;
	}
	if (q->part < q->nedge) {
		if (!q->part_read)
			err = aud_qpair_read(q->rx, q->r.unique, q->ns, qp, q->eblk[q->part], q->edge,
					     lsz, fa_done, q);
		else
			err = aud_qpair_write(q->rx, q->r.unique, q->ns, qp, q->eblk[q->part],
					      q->edge, lsz, false, fa_done, q);
	} else {
		uint64_t n = q->mid1 - q->cur;
		bool punch = q->mode & FALLOC_FL_PUNCH_HOLE;

		if (q->buf_len) {
			/* no Write Zeroes: write a buffer of zeroes */
			if (n > q->buf_len >> q->ns->shift)
				n = q->buf_len >> q->ns->shift;
			q->step = n;
			err = aud_qpair_write(q->rx, q->r.unique, q->ns, qp, q->cur, q->buf,
					      n << q->ns->shift, false, fa_done, q);
		} else {
			/* Write Zeroes for punch too: deallocation alone (DSM)
			 * is advisory, a hole must read back as zeroes.  Punch
			 * lets the device deallocate (DEAC) where deallocated
			 * blocks read as zeroes; the engine splits at WZSL. */
			if (n > ZBLOCKS_MAX)
				n = ZBLOCKS_MAX;
			q->step = n;
			err = aud_qpair_write_zeroes(q->rx, q->r.unique, q->ns, qp, q->cur, n,
						     punch && q->ns->dealloc_zeroes, fa_done, q);
		}
	}
	return rq_issued(q, err, false);
}

void fsio_fallocate(struct fusefs_rx *rx, struct fw_req *r, struct fusefs_ns *ns, int mode,
		    uint64_t off, uint64_t end)
{
	struct rq *q = rq_new(rx, r, ns, OP_FALLOC,
			      mode & FALLOC_FL_PUNCH_HOLE ? FUSEFS_OP_PUNCH : FUSEFS_OP_ZERO);
	uint64_t lsz = 1ull << ns->shift;

	if (!q)
		return;
	SCHED_STAT_ADD(rx->sched, fallocs, 1);
	q->mode = mode;
	q->off = off;
	q->len = end - q->off;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (end + lsz - 1) >> ns->shift;
	plan_edges(q);
	/* the aligned middle: [ceil(off), floor(end)) */
	q->cur = (q->off + lsz - 1) >> ns->shift;
	q->mid1 = end >> ns->shift;
	if (q->mid1 < q->cur)
		q->mid1 = q->cur;
	if (q->mid1 > q->cur && !ns->wzeroes) {
		uint64_t bytes = (q->mid1 - q->cur) << ns->shift;
		q->buf_len = bytes < FUSEFS_ZBUF_MAX ? bytes : FUSEFS_ZBUF_MAX;
	}
	rq_needs(q, true);
	sched_start(&q->sq);
}

static enum sched_res rq_run(struct sched_rq *sq)
{
	struct rq *q = RQ(sq);

	switch (q->op) {
	case OP_READ:
		return read_run(q);
	case OP_WRITE:
		return write_run(q);
	case OP_FSYNC:
		return fsync_run(q);
	default:
		return fa_run(q);
	}
}

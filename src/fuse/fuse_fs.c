/* fuse_fs.c - the FUSE front end: session, namespace files, request translation.
 *
 * A request (struct rq) lives on the reactor that read it from the channel.
 * It moves through a few stages; a stage that cannot get a DMA buffer or a
 * queue slot parks the request on its reactor's pending list (FIFO), which is
 * retried at every loop pass and after every completion.  Writes take a block
 * range lock on their namespace so that a read-modify-write never races with
 * another write to the same blocks; a writer that conflicts is queued on the
 * lock and restarted, on its own reactor, when the range is free.
 */
#define FUSE_USE_VERSION 312
#include "fuse_fs.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nvme.h"

#define FUSEFS_NAME_MAX 64
#define ATTR_TIMEOUT 10.0            /* sizes never change while mounted */
#define RECV_BATCH 32                /* requests taken per watcher callback */
#define ZBLOCKS_MAX 65536u           /* NLB is 16 bits, 0-based */
#define ZBUF_MAX (1u << 20)          /* zero buffer when Write Zeroes is missing */
#define OPT_BLKSIZE (128u * 1024)    /* st_blksize: what cp and cat use per call */
#define RQ_CACHE 256

struct rq;
struct rq_list {
	struct rq *head, *tail;
};

struct fusefs_ns {
	struct fusefs_ns_desc d;
	char name[FUSEFS_NAME_MAX];
	uint8_t shift;
	bool vwc, dsm, wzeroes, dealloc_zeroes;
	pthread_mutex_t lock;   /* held and waiting only */
	struct rq *held;        /* writers holding a block range, via lnext */
	struct rq_list waiting; /* writers waiting, arrival order, via lnext */
};

struct fusefs_rx {
	struct fusefs *fs;
	unsigned idx;
	struct nvme_reactor *r;
	struct nvme_qpair **qp; /* one per controller */
	bool reader;
	ev_io io;
	atomic_bool stopped;    /* not reading the channel (any more) */
	struct fuse_buf fbuf;
	struct rq_list pending; /* waiting for a buffer or a queue slot */
	bool kicking;
	unsigned nr_cache;
	struct rq *cache;
	unsigned inflight;      /* owner writes, others read atomically */
	unsigned holders;       /* requests holding a DMA buffer */
	struct fusefs_stats st; /* the same */
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

enum rq_op { OP_READ, OP_WRITE, OP_FSYNC, OP_FALLOC };
enum rq_stage { RS_START, RS_LOCKED, RS_EDGES, RS_WRITE, RS_IO, RS_FA_PART };
enum run_res { RUN_ASYNC, RUN_STALL };

struct rq {
	struct rq *next;  /* pending list */
	struct rq *lnext; /* range lock lists */
	fuse_req_t req;
	struct fusefs_rx *rx;
	struct fusefs_ns *ns;
	uint8_t op, stage;
	bool locked;
	bool stall_counted;
	int mode;                 /* fallocate */
	uint64_t off, len;        /* bytes, clamped to the namespace */
	uint64_t lb0, lb1;        /* blocks touched: [lb0, lb1) */
	/* One DMA allocation, so that a request waiting for memory holds none:
	 * [buf, buf + buf_len) the blocks (or a zero buffer), then the partial
	 * blocks read for a read-modify-write at edge. */
	uint8_t *dma;
	size_t dma_len;
	uint8_t *buf;
	size_t buf_len;
	uint8_t *edge;
	uint8_t *bounce;          /* write data that arrived before a buffer */
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
};

static __thread struct fusefs_rx *tl_rx;

#define STAT_ADD(rx, f, n) __atomic_store_n(&(rx)->st.f, (rx)->st.f + (n), __ATOMIC_RELAXED)

static enum run_res rq_run(struct rq *q);
static void rx_kick(struct fusefs_rx *rx);

/* ---- small helpers ---- */

static void list_push(struct rq_list *l, struct rq *q)
{
	q->next = NULL;
	if (l->tail)
		l->tail->next = q;
	else
		l->head = q;
	l->tail = q;
}

static void list_push_front(struct rq_list *l, struct rq *q)
{
	q->next = l->head;
	l->head = q;
	if (!l->tail)
		l->tail = q;
}

static struct rq *list_pop(struct rq_list *l)
{
	struct rq *q = l->head;

	if (q) {
		l->head = q->next;
		if (!l->head)
			l->tail = NULL;
		q->next = NULL;
	}
	return q;
}

/* Engine errno -> what a caller of read(2)/write(2) understands. */
static int map_err(int err)
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
	default:
		return EIO; /* media/data errors, timeouts, aborts, a dead controller */
	}
}

static struct fusefs_ns *ino_ns(struct fusefs *fs, fuse_ino_t ino)
{
	if (ino < 2 || ino - 2 >= fs->nr_ns)
		return NULL;
	return &fs->ns[ino - 2];
}

static struct nvme_qpair *rq_qp(struct rq *q)
{
	return q->rx->qp[q->ns->d.ctrl];
}

static struct rq *rq_new(struct fusefs_rx *rx, fuse_req_t req, struct fusefs_ns *ns, int op)
{
	struct rq *q = rx->cache;

	if (q) {
		rx->cache = q->next;
		rx->nr_cache--;
	} else {
		q = malloc(sizeof(*q));
		if (!q)
			return NULL;
	}
	memset(q, 0, sizeof(*q));
	q->req = req;
	q->rx = rx;
	q->ns = ns;
	q->op = (uint8_t)op;
	__atomic_store_n(&rx->inflight, rx->inflight + 1, __ATOMIC_RELAXED);
	return q;
}

static size_t edge_bytes(const struct rq *q)
{
	return (q->op == OP_WRITE ? q->nedge : q->nedge ? 1 : 0) << q->ns->shift;
}

/* The request's DMA buffer, all at once; false when the pool has none. */
static bool dma_get(struct rq *q)
{
	if (q->dma)
		return true;
	q->dma_len = q->buf_len + edge_bytes(q);
	if (!q->dma_len)
		return true;
	q->dma = nvme_reactor_buf_alloc(q->rx->r, q->dma_len);
	if (!q->dma)
		return false;
	q->rx->holders++;
	q->buf = q->dma;
	q->edge = q->dma + q->buf_len;
	return true;
}

static void dma_put(struct rq *q)
{
	if (q->dma) {
		nvme_reactor_buf_free(q->rx->r, q->dma, q->dma_len);
		q->dma = q->buf = q->edge = NULL;
		q->rx->holders--;
	}
}

/* ---- block range lock ---- */

static bool overlaps(const struct rq *a, const struct rq *b)
{
	return a->lb0 < b->lb1 && b->lb0 < a->lb1;
}

/* Take [lb0, lb1) now, or queue behind every earlier conflicting writer. */
static bool range_lock(struct rq *q)
{
	struct fusefs_ns *ns = q->ns;
	bool busy = false;

	pthread_mutex_lock(&ns->lock);
	for (struct rq *h = ns->held; h && !busy; h = h->lnext)
		busy = overlaps(h, q);
	for (struct rq *w = ns->waiting.head; w && !busy; w = w->lnext)
		busy = overlaps(w, q);
	q->lnext = NULL;
	if (busy) {
		if (ns->waiting.tail)
			ns->waiting.tail->lnext = q;
		else
			ns->waiting.head = q;
		ns->waiting.tail = q;
	} else {
		q->lnext = ns->held;
		ns->held = q;
		q->locked = true;
	}
	pthread_mutex_unlock(&ns->lock);
	return !busy;
}

static void resume_cb(void *arg)
{
	struct rq *q = arg;

	list_push(&q->rx->pending, q);
	rx_kick(q->rx);
}

/* Release q's range and grant, in order, every waiter that conflicts with
 * neither a holder nor an earlier waiter.  Granted waiters resume on their
 * own reactor. */
static void range_unlock(struct rq *q)
{
	struct fusefs_ns *ns = q->ns;
	struct rq *granted = NULL, **pp;

	pthread_mutex_lock(&ns->lock);
	for (pp = &ns->held; *pp; pp = &(*pp)->lnext) {
		if (*pp == q) {
			*pp = q->lnext;
			break;
		}
	}
	q->locked = false;
	struct rq *prev = NULL, *w = ns->waiting.head;
	while (w) {
		struct rq *nx = w->lnext;
		bool busy = false;

		for (struct rq *h = ns->held; h && !busy; h = h->lnext)
			busy = overlaps(h, w);
		for (struct rq *e = ns->waiting.head; e != w && !busy; e = e->lnext)
			busy = overlaps(e, w);
		if (busy) {
			prev = w;
		} else {
			if (prev)
				prev->lnext = nx;
			else
				ns->waiting.head = nx;
			if (ns->waiting.tail == w)
				ns->waiting.tail = prev;
			w->lnext = ns->held;
			ns->held = w;
			w->locked = true;
			w->next = granted;
			granted = w;
		}
		w = nx;
	}
	pthread_mutex_unlock(&ns->lock);

	while (granted) {
		struct rq *g = granted;

		granted = g->next;
		g->next = NULL;
		if (g->rx == q->rx) {
			list_push(&g->rx->pending, g);
		} else if (nvme_reactor_call(g->rx->r, resume_cb, g) < 0) {
			/* cannot happen short of ENOMEM: the waiter would hang */
			log_err("fuse: cannot hand a write back to reactor %u", g->rx->idx);
			abort();
		}
	}
}

/* ---- completion of a request ---- */

static void rq_free(struct rq *q)
{
	struct fusefs_rx *rx = q->rx;

	if (q->locked)
		range_unlock(q);
	dma_put(q);
	free(q->bounce);
	if (rx->nr_cache < RQ_CACHE) {
		q->next = rx->cache;
		rx->cache = q;
		rx->nr_cache++;
	} else {
		free(q);
	}
	__atomic_store_n(&rx->inflight, rx->inflight - 1, __ATOMIC_RELAXED);
	/* buffers and maybe a queue slot came free */
	if (rx->pending.head)
		rx_kick(rx);
}

static void rq_fail(struct rq *q, int errnum)
{
	STAT_ADD(q->rx, errors, 1);
	fuse_reply_err(q->req, errnum);
	rq_free(q);
}

/* A parked request: resumed from rx_kick. */
static enum run_res rq_stall(struct rq *q)
{
	if (!q->stall_counted) {
		q->stall_counted = true;
		STAT_ADD(q->rx, resource_waits, 1);
	}
	return RUN_STALL;
}

/* What a submission's return means for the request: parked until a tracker
 * frees (-EAGAIN), failed, or one more command in flight (and, with to_io,
 * the request now waits for it). */
static enum run_res rq_issued(struct rq *q, int err, bool to_io)
{
	if (err == -EAGAIN)
		return rq_stall(q);
	if (err) {
		rq_fail(q, map_err(err));
		return RUN_ASYNC;
	}
	q->outstanding++;
	if (to_io)
		q->stage = RS_IO;
	return RUN_ASYNC;
}

/* Buffers come back when requests holding them finish; when none holds
 * one, this request wants more than the pool can ever give: fail it. */
static enum run_res rq_nobuf(struct rq *q)
{
	if (q->rx->holders == 0) {
		log_err("fuse: no DMA buffer of %zu bytes on reactor %u", q->dma_len, q->rx->idx);
		rq_fail(q, ENOMEM);
		return RUN_ASYNC;
	}
	return rq_stall(q);
}

/* One command of q completed: false (and q failed) on an error. */
static bool cmd_ok(struct rq *q, int err)
{
	q->outstanding--;
	if (err) {
		rq_fail(q, map_err(err));
		return false;
	}
	return true;
}

/* ---- read ---- */

static void read_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	(void)status;
	if (!cmd_ok(q, err))
		return;
	fuse_reply_buf(q->req, (const char *)q->buf + (q->off - (q->lb0 << q->ns->shift)), q->len);
	rq_free(q);
}

static enum run_res read_run(struct rq *q)
{
	int err;

	if (!dma_get(q))
		return rq_nobuf(q);
	err = nvme_qpair_read(rq_qp(q), q->ns->d.nsid, q->lb0, q->buf, q->buf_len, read_done, q);
	return rq_issued(q, err, true);
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

	(void)status;
	if (!cmd_ok(q, err))
		return;
	fuse_reply_write(q->req, q->len);
	rq_free(q);
}

static void edge_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	(void)status;
	q->outstanding--;
	if (err && !q->err)
		q->err = err;
	if (q->outstanding || q->submitted != (1u << q->nedge) - 1)
		return; /* the other edge read is still to come */
	if (q->err) {
		rq_fail(q, map_err(q->err));
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
	if (rq_run(q) == RUN_STALL)
		list_push(&q->rx->pending, q);
}

static enum run_res write_run(struct rq *q)
{
	struct nvme_qpair *qp = rq_qp(q);
	uint32_t lsz = 1u << q->ns->shift;
	int err;

	switch (q->stage) {
	case RS_START:
		if (!q->dma) {
			if (!dma_get(q))
				return rq_nobuf(q);
			memcpy(q->buf + (q->off - (q->lb0 << q->ns->shift)), q->bounce, q->len);
			free(q->bounce);
			q->bounce = NULL;
		}
		/* memory before the lock: a holder never waits for memory */
		q->stage = RS_LOCKED;
		if (!range_lock(q)) {
			STAT_ADD(q->rx, lock_waits, 1);
			return RUN_ASYNC; /* range_unlock resumes us */
		}
		/* fall through */
	case RS_LOCKED:
		q->stage = q->nedge ? RS_EDGES : RS_WRITE;
		return write_run(q);
	case RS_EDGES:
		for (unsigned i = 0; i < q->nedge; i++) {
			if (q->submitted & (1u << i))
				continue;
			err = nvme_qpair_read(qp, q->ns->d.nsid, q->eblk[i], q->edge + (size_t)i * lsz,
					      lsz, edge_done, q);
			if (err == -EAGAIN)
				return rq_stall(q);
			if (err) {
				if (!q->err)
					q->err = err;
				q->submitted = (1u << q->nedge) - 1;
				if (!q->outstanding)
					rq_fail(q, map_err(err));
				return RUN_ASYNC;
			}
			q->submitted |= 1u << i;
			q->outstanding++;
		}
		return RUN_ASYNC;
	case RS_WRITE:
		err = nvme_qpair_write(qp, q->ns->d.nsid, q->lb0, q->buf, q->buf_len, false, write_done,
				       q);
		return rq_issued(q, err, true);
	default:
		return RUN_ASYNC;
	}
}

/* ---- fsync ---- */

static void fsync_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	(void)status;
	if (!cmd_ok(q, err))
		return;
	fuse_reply_err(q->req, 0);
	rq_free(q);
}

static enum run_res fsync_run(struct rq *q)
{
	int err = nvme_qpair_flush(rq_qp(q), q->ns->d.nsid, fsync_done, q);

	if (!err)
		STAT_ADD(q->rx, flushes_sent, 1);
	return rq_issued(q, err, true);
}

/* ---- fallocate: partial edge blocks, then the aligned middle ---- */

static void fa_done(void *arg, int err, uint16_t status)
{
	struct rq *q = arg;

	(void)status;
	if (!cmd_ok(q, err))
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
		fuse_reply_err(q->req, 0);
		rq_free(q);
		return;
	}
	if (rq_run(q) == RUN_STALL)
		list_push(&q->rx->pending, q);
}

static enum run_res fa_run(struct rq *q)
{
	struct nvme_qpair *qp = rq_qp(q);
	uint32_t nsid = q->ns->d.nsid;
	uint32_t lsz = 1u << q->ns->shift;
	int err;

	if (q->stage == RS_START) {
		if (!q->dma) {
			if (!dma_get(q))
				return rq_nobuf(q);
			if (q->buf_len)
				memset(q->buf, 0, q->buf_len);
		}
		q->stage = RS_FA_PART;
		if (!range_lock(q)) {
			STAT_ADD(q->rx, lock_waits, 1);
			return RUN_ASYNC;
		}
	}
	if (q->part >= q->nedge && q->cur >= q->mid1) {
		/* nothing at all to do (an empty range) */
		fuse_reply_err(q->req, 0);
		rq_free(q);
		return RUN_ASYNC;
	}
	if (q->part < q->nedge) {
		if (!q->part_read)
			err = nvme_qpair_read(qp, nsid, q->eblk[q->part], q->edge, lsz, fa_done, q);
		else
			err = nvme_qpair_write(qp, nsid, q->eblk[q->part], q->edge, lsz, false, fa_done,
					       q);
	} else {
		uint64_t n = q->mid1 - q->cur;
		bool punch = q->mode & FALLOC_FL_PUNCH_HOLE;

		if (q->buf_len) {
			/* no Write Zeroes: write a buffer of zeroes */
			if (n > q->buf_len >> q->ns->shift)
				n = q->buf_len >> q->ns->shift;
			q->step = n;
			err = nvme_qpair_write(qp, nsid, q->cur, q->buf, n << q->ns->shift, false,
					       fa_done, q);
		} else {
			if (n > ZBLOCKS_MAX)
				n = ZBLOCKS_MAX;
			q->step = n;
			if (punch && q->ns->dsm && q->ns->dealloc_zeroes)
				err = nvme_qpair_deallocate(qp, nsid, q->cur, n, fa_done, q);
			else
				err = nvme_qpair_write_zeroes(qp, nsid, q->cur, n, false, fa_done, q);
		}
	}
	return rq_issued(q, err, false);
}

static enum run_res rq_run(struct rq *q)
{
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

/* Retry parked requests in order; stop at the first that still cannot go. */
static void rx_kick(struct fusefs_rx *rx)
{
	struct rq *q;

	if (rx->kicking)
		return;
	rx->kicking = true;
	while ((q = list_pop(&rx->pending))) {
		if (rq_run(q) == RUN_STALL) {
			list_push_front(&rx->pending, q);
			break;
		}
	}
	rx->kicking = false;
}

/* New request: behind the parked ones, or at once. */
static void rq_start(struct rq *q)
{
	struct fusefs_rx *rx = q->rx;

	if (rx->pending.head) {
		list_push(&rx->pending, q);
		return;
	}
	if (rq_run(q) == RUN_STALL)
		list_push(&rx->pending, q);
}

static void pass_hook(void *arg)
{
	struct fusefs_rx *rx = arg;

	if (rx->pending.head)
		rx_kick(rx);
}

/* ---- attributes and directory ---- */

static void ns_stat(struct fusefs *fs, const struct fusefs_ns *ns, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | (fs->o.file_mode & 07777);
	st->st_nlink = 1;
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	st->st_size = (off_t)ns->d.size;
	st->st_blksize = ns->d.lba_size > OPT_BLKSIZE ? ns->d.lba_size : OPT_BLKSIZE;
	st->st_blocks = (blkcnt_t)(ns->d.size / 512);
	st->st_atim = st->st_mtim = st->st_ctim = fs->t0;
}

static void root_stat(struct fusefs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_atim = st->st_mtim = st->st_ctim = fs->t0;
}

static int ino_stat(struct fusefs *fs, fuse_ino_t ino, struct stat *st)
{
	struct fusefs_ns *ns;

	if (ino == FUSE_ROOT_ID) {
		root_stat(fs, st);
		return 0;
	}
	ns = ino_ns(fs, ino);
	if (!ns)
		return ENOENT;
	ns_stat(fs, ns, ino, st);
	return 0;
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = FUSEFS_MAX_IO;
	conn->max_read = FUSEFS_MAX_IO;
	/* async direct I/O goes out as background requests: allow a deep queue */
	conn->max_background = 1024;
	conn->congestion_threshold = 768;
	/* splice costs a pipe round trip per request; a read(2) into the
	 * session buffer and one copy into the DMA buffer is cheaper */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	conn->time_gran = 1;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (unsigned i = 0; i < fs->nr_ns; i++) {
		if (strcmp(fs->ns[i].name, name) == 0) {
			memset(&e, 0, sizeof(e));
			e.ino = i + 2;
			e.attr_timeout = e.entry_timeout = ATTR_TIMEOUT;
			ns_stat(fs, &fs->ns[i], e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	}
	fuse_reply_err(req, ENOENT);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct stat st;
	int err;

	(void)fi;
	err = ino_stat(fs, ino, &st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* Sizes, modes and owners are the config's: only requests that change
 * nothing (times, or the value it already has) succeed. */
static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct stat st;
	int err;

	(void)fi;
	err = ino_stat(fs, ino, &st);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != st.st_size) ||
	    ((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & 07777) != (st.st_mode & 07777)) ||
	    ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != st.st_uid) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != st.st_gid)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	char *buf;
	size_t used = 0;
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* entry k: 0 ".", 1 "..", 2.. the namespaces; off is the next entry */
	for (off_t k = off; k < (off_t)fs->nr_ns + 2; k++) {
		const char *name;
		size_t n;

		memset(&st, 0, sizeof(st));
		if (k < 2) {
			name = k == 0 ? "." : "..";
			st.st_ino = FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else {
			name = fs->ns[k - 2].name;
			st.st_ino = (ino_t)k;
			st.st_mode = S_IFREG;
		}
		n = fuse_add_direntry(req, buf + used, size - used, name, &st, k + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ll_release_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);

	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!ino_ns(fs, ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Every request reaches the device: no page cache in between, as
	 * with a block device opened O_DIRECT.  O_TRUNC is ignored, as a
	 * block device ignores it. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	struct fusefs_rx *rx = tl_rx;
	struct rq *q;

	(void)fi;
	if (!ns) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= ns->d.size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short read: the caller asks again */
	if (size > ns->d.size - (uint64_t)off)
		size = ns->d.size - (uint64_t)off; /* crosses the end: short */
	q = rq_new(rx, req, ns, OP_READ);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	STAT_ADD(rx, reads, 1);
	q->off = (uint64_t)off;
	q->len = size;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (q->off + q->len + (1u << ns->shift) - 1) >> ns->shift;
	q->buf_len = (q->lb1 - q->lb0) << ns->shift;
	rq_start(q);
}

static void ll_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
			 struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	struct fusefs_rx *rx = tl_rx;
	size_t size = fuse_buf_size(bufv);
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	ssize_t got;
	struct rq *q;
	uint8_t *to;

	(void)fi;
	if (!ns) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* a write that does not fit writes nothing: the namespace cannot grow */
	if ((uint64_t)off >= ns->d.size || size > ns->d.size - (uint64_t)off) {
		STAT_ADD(rx, errors, 1);
		fuse_reply_err(req, ENOSPC);
		return;
	}
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short write: the caller writes the rest */
	q = rq_new(rx, req, ns, OP_WRITE);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->off = (uint64_t)off;
	q->len = size;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (q->off + q->len + (1u << ns->shift) - 1) >> ns->shift;
	q->buf_len = (q->lb1 - q->lb0) << ns->shift;
	plan_edges(q);
	STAT_ADD(rx, writes, 1);
	if (q->nedge)
		STAT_ADD(rx, rmw_writes, 1);
	/* the session buffer is reused once we return: take the data now,
	 * straight into the DMA buffer when one is free */
	if (!rx->pending.head && dma_get(q)) {
		to = q->buf + (q->off - (q->lb0 << ns->shift));
	} else {
		q->bounce = malloc(size);
		if (!q->bounce) {
			rq_fail(q, ENOMEM);
			return;
		}
		to = q->bounce;
	}
	dst.buf[0].mem = to;
	dst.buf[0].size = size;
	got = fuse_buf_copy(&dst, bufv, 0);
	if (got < 0 || (size_t)got != size) {
		rq_fail(q, got < 0 ? (int)-got : EIO);
		return;
	}
	rq_start(q);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close(2): every write was on the device when it was answered */
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	struct fusefs_rx *rx = tl_rx;
	struct rq *q;

	(void)datasync;
	(void)fi;
	if (!ns) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? 0 : ENOENT);
		return;
	}
	STAT_ADD(rx, fsyncs, 1);
	/* without a volatile write cache a completed write is durable */
	if (!ns->vwc) {
		fuse_reply_err(req, 0);
		return;
	}
	q = rq_new(rx, req, ns, OP_FSYNC);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rq_start(q);
}

static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t length,
			 struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	struct fusefs_rx *rx = tl_rx;
	uint64_t end, lsz;
	struct rq *q;

	(void)fi;
	if (!ns) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	end = (uint64_t)off + (uint64_t)length;
	if (end < (uint64_t)off)
		end = UINT64_MAX;
	if (end > ns->d.size) {
		if (!(mode & FALLOC_FL_KEEP_SIZE)) {
			/* zeroing past the end would grow the file */
			fuse_reply_err(req, ENOSPC);
			return;
		}
		end = ns->d.size;
	}
	if ((uint64_t)off >= end) {
		fuse_reply_err(req, 0);
		return;
	}
	q = rq_new(rx, req, ns, OP_FALLOC);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	STAT_ADD(rx, fallocs, 1);
	lsz = 1ull << ns->shift;
	q->mode = mode;
	q->off = (uint64_t)off;
	q->len = end - q->off;
	q->lb0 = q->off >> ns->shift;
	q->lb1 = (end + lsz - 1) >> ns->shift;
	plan_edges(q);
	/* the aligned middle: [ceil(off), floor(end)) */
	q->cur = (q->off + lsz - 1) >> ns->shift;
	q->mid1 = end >> ns->shift;
	if (q->mid1 < q->cur)
		q->mid1 = q->cur;
	bool need_wz = !((mode & FALLOC_FL_PUNCH_HOLE) && ns->dsm && ns->dealloc_zeroes);
	if (q->mid1 > q->cur && need_wz && !ns->wzeroes) {
		uint64_t bytes = (q->mid1 - q->cur) << ns->shift;
		q->buf_len = bytes < ZBUF_MAX ? bytes : ZBUF_MAX;
	}
	rq_start(q);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct statvfs sv;
	uint64_t total = 0;

	(void)ino;
	for (unsigned i = 0; i < fs->nr_ns; i++)
		total += fs->ns[i].d.size;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = total / 4096;
	sv.f_files = fs->nr_ns + 1;
	sv.f_namemax = FUSEFS_NAME_MAX - 1;
	fuse_reply_statfs(req, &sv);
}

static void ll_eperm_entry(fuse_req_t req)
{
	fuse_reply_err(req, EPERM);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	ll_eperm_entry(req);
}
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	ll_eperm_entry(req);
}
static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	ll_eperm_entry(req);
}
static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	ll_eperm_entry(req);
}
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	ll_eperm_entry(req);
}
static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	ll_eperm_entry(req);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	ll_eperm_entry(req);
}

static const struct fuse_lowlevel_ops ll_ops = {
	.init = ll_init,
	.lookup = ll_lookup,
	.getattr = ll_getattr,
	.setattr = ll_setattr,
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.releasedir = ll_release_ok,
	.open = ll_open,
	.release = ll_release_ok,
	.read = ll_read,
	.write_buf = ll_write_buf,
	.flush = ll_flush,
	.fsync = ll_fsync,
	.fallocate = ll_fallocate,
	.statfs = ll_statfs,
	.create = ll_create,
	.mknod = ll_mknod,
	.mkdir = ll_mkdir,
	.unlink = ll_unlink,
	.rmdir = ll_unlink,
	.symlink = ll_symlink,
	.rename = ll_rename,
	.link = ll_link,
};

/* ---- the channel ---- */

static void rx_stop_reading(struct fusefs_rx *rx)
{
	if (rx->reader && !atomic_load(&rx->stopped))
		ev_io_stop(nvme_reactor_loop(rx->r), &rx->io);
	atomic_store(&rx->stopped, true);
}

static void session_ended(struct fusefs_rx *rx)
{
	struct fusefs *fs = rx->fs;

	rx_stop_reading(rx);
	if (!atomic_exchange(&fs->exit_reported, true)) {
		log_info("fuse: the session ended (unmounted or aborted from outside)");
		if (fs->o.on_exit)
			fs->o.on_exit(fs->o.on_exit_arg);
	}
}

static void channel_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fusefs_rx *rx = w->data;
	struct fuse_session *se = rx->fs->se;

	(void)loop;
	(void)revents;
	for (int i = 0; i < RECV_BATCH; i++) {
		int res = fuse_session_receive_buf(se, &rx->fbuf);

		if (res == -EAGAIN)
			break;
		if (res == -EINTR)
			continue;
		if (res <= 0 || fuse_session_exited(se)) {
			if (res < 0 && res != -ENODEV)
				log_err("fuse: reading the channel: %s", strerror(-res));
			session_ended(rx);
			break;
		}
		tl_rx = rx;
		fuse_session_process_buf(se, &rx->fbuf);
		tl_rx = NULL;
	}
}

static void stop_cb(void *arg)
{
	rx_stop_reading(arg);
}

void fusefs_stop(struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];

		if (atomic_load(&rx->stopped))
			continue;
		if (nvme_reactor_call(rx->r, stop_cb, rx) < 0)
			log_err("fuse: cannot reach reactor %u to stop it reading", i);
	}
}

unsigned fusefs_inflight(const struct fusefs *fs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < fs->nr_rx; i++)
		n += __atomic_load_n(&fs->rx[i].inflight, __ATOMIC_RELAXED);
	return n;
}

bool fusefs_drained(const struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (!atomic_load(&fs->rx[i].stopped))
			return false;
	return fusefs_inflight(fs) == 0;
}

void fusefs_stats_get(const struct fusefs *fs, struct fusefs_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		const struct fusefs_stats *s = &fs->rx[i].st;
#define SUM(f) out->f += __atomic_load_n(&s->f, __ATOMIC_RELAXED)
		SUM(reads);
		SUM(writes);
		SUM(rmw_writes);
		SUM(fsyncs);
		SUM(flushes_sent);
		SUM(fallocs);
		SUM(errors);
		SUM(lock_waits);
		SUM(resource_waits);
#undef SUM
	}
}

const struct fusefs_ns_desc *fusefs_namespaces(const struct fusefs *fs, unsigned *nr)
{
	*nr = fs->nr_ns;
	return fs->desc;
}

/* ---- set-up and tear-down ---- */

static int build_namespaces(struct fusefs *fs)
{
	unsigned n = 0, k = 0;

	for (unsigned c = 0; c < fs->o.nr_ctrls; c++)
		n += nvme_ctrl_get_info(fs->o.ctrls[c])->nr_ns;
	fs->ns = calloc(n ? n : 1, sizeof(*fs->ns));
	fs->desc = calloc(n ? n : 1, sizeof(*fs->desc));
	if (!fs->ns || !fs->desc)
		return -ENOMEM;
	for (unsigned c = 0; c < fs->o.nr_ctrls; c++) {
		const struct nvme_ctrl_info *in = nvme_ctrl_get_info(fs->o.ctrls[c]);

		for (unsigned i = 0; i < in->nr_ns; i++) {
			const struct nvme_ns_info *ni = &in->ns[i];
			struct fusefs_ns *ns = &fs->ns[k];

			if (ni->lba_size < 512 || ni->lba_size > 65536 ||
			    (ni->lba_size & (ni->lba_size - 1)) || ni->nlba == 0) {
				log_warn("fuse: %s namespace %u: LBA size %u, %llu blocks: not shown",
					 fs->o.ctrl_names[c], ni->nsid, ni->lba_size,
					 (unsigned long long)ni->nlba);
				continue;
			}
			snprintf(ns->name, sizeof(ns->name), "%sn%u", fs->o.ctrl_names[c], ni->nsid);
			ns->d.name = ns->name;
			ns->d.ctrl = c;
			ns->d.nsid = ni->nsid;
			ns->d.lba_size = ni->lba_size;
			ns->d.size = ni->nlba * ni->lba_size;
			ns->shift = (uint8_t)__builtin_ctz(ni->lba_size);
			ns->vwc = in->vwc;
			ns->dsm = in->oncs & NVME_ONCS_DSM;
			ns->wzeroes = in->oncs & NVME_ONCS_WRITE_ZEROES;
			ns->dealloc_zeroes = ni->dealloc_zeroes;
			pthread_mutex_init(&ns->lock, NULL);
			fs->desc[k] = ns->d;
			k++;
		}
	}
	fs->nr_ns = k;
	return 0;
}

int fusefs_create(const struct fusefs_opts *o, struct fusefs **out)
{
	struct fusefs *fs;
	char opts[256];
	char *argv[5];
	int argc = 0, err, fd, fl;

	if (!o->mountpoint || !o->nr_reactors || !o->nr_ctrls)
		return -EINVAL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->o = *o;
	clock_gettime(CLOCK_REALTIME, &fs->t0);
	err = build_namespaces(fs);
	if (err)
		goto fail;
	fs->nr_rx = o->nr_reactors;
	fs->rx = calloc(fs->nr_rx, sizeof(*fs->rx));
	if (!fs->rx) {
		err = -ENOMEM;
		goto fail;
	}
	unsigned readers = o->readers && o->readers <= o->nr_reactors ? o->readers : o->nr_reactors;
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];

		rx->fs = fs;
		rx->idx = i;
		rx->r = o->reactors[i];
		rx->qp = &o->qpairs[(size_t)i * o->nr_ctrls];
		rx->reader = i < readers;
		atomic_init(&rx->stopped, !rx->reader);
	}

	err = fusefs_prepare_mountpoint(o->mountpoint);
	if (err)
		goto fail;

	snprintf(opts, sizeof(opts), "default_permissions,max_read=%u,fsname=nvmefs,subtype=nvmefs%s",
		 FUSEFS_MAX_IO, o->allow_other ? ",allow_other" : "");
	argv[argc++] = "nvmefsd";
	argv[argc++] = "-o";
	argv[argc++] = opts;
	if (o->debug)
		argv[argc++] = "-d";
	argv[argc] = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	fs->se = fuse_session_new(&args, &ll_ops, sizeof(ll_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		log_err("fuse: cannot create the session (options %s)", opts);
		err = -EINVAL;
		goto fail;
	}
	if (fuse_session_mount(fs->se, o->mountpoint) != 0) {
		log_err("%s: cannot mount the FUSE file system", o->mountpoint);
		err = -EIO;
		goto fail;
	}
	fs->mounted = true;
	fd = fuse_session_fd(fs->se);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err = -errno;
		log_err("fuse: cannot make the channel non-blocking: %s", strerror(-err));
		goto fail;
	}
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];

		nvme_reactor_set_pass_hook(rx->r, pass_hook, rx);
		if (!rx->reader)
			continue;
		ev_io_init(&rx->io, channel_cb, fd, EV_READ);
		rx->io.data = rx;
		ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
	}
	log_info("fuse: %u namespace file%s at %s, %u reactor%s reading the channel", fs->nr_ns,
		 fs->nr_ns == 1 ? "" : "s", o->mountpoint, readers, readers == 1 ? "" : "s");
	*out = fs;
	return 0;
fail:
	fusefs_destroy(fs);
	return err;
}

void fusefs_unmount(struct fusefs *fs)
{
	if (fs && fs->mounted) {
		fuse_session_unmount(fs->se);
		fs->mounted = false;
	}
}

void fusefs_destroy(struct fusefs *fs)
{
	if (!fs)
		return;
	fusefs_unmount(fs);
	if (fs->se)
		fuse_session_destroy(fs->se);
	for (unsigned i = 0; fs->rx && i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];

		free(rx->fbuf.mem);
		while (rx->cache) {
			struct rq *q = rx->cache;
			rx->cache = q->next;
			free(q);
		}
	}
	for (unsigned i = 0; fs->ns && i < fs->nr_ns; i++)
		pthread_mutex_destroy(&fs->ns[i].lock);
	free(fs->rx);
	free(fs->ns);
	free(fs->desc);
	free(fs);
}

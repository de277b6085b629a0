/* sim_queue.c - the software controller's queues and command execution
 * (see sim_priv.h): the DMA map, PRP walking, completions (with the faults
 * that act on them), I/O commands, doorbells and queue processing, inline or
 * on the device thread, and the counters of sim_get_stats.
 */
#include "sim_priv.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* ------------------------------------------------------------------ DMA map */

/* Host vaddr for [iova, iova+len) if it lies inside one mapping, else NULL:
 * a device behind an IOMMU can reach nothing else. */
void *sim_xlate(struct sim *s, uint64_t iova, uint64_t len)
{
	unsigned n = atomic_load_explicit(&s->nr_maps, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct sim_map *m = &s->maps[i];
		uint64_t mlen = atomic_load_explicit(&m->len, memory_order_acquire);

		if (!mlen)
			continue;
		/* a slot is refilled (under s->lock) only after an unmap: a
		 * device still using a stale IOVA then, as behind an IOMMU,
		 * reaches the new mapping or faults; the fields are atomics so
		 * that the reuse itself is not a data race */
		uint64_t miova = __atomic_load_n(&m->iova, __ATOMIC_RELAXED);
		if (iova >= miova && iova - miova < mlen && len <= mlen - (iova - miova))
			return __atomic_load_n(&m->vaddr, __ATOMIC_RELAXED) + (iova - miova);
	}
	return NULL;
}

bool sim_dma_reaches(struct sim *s, const void *vaddr, size_t len)
{
	const uint8_t *p = vaddr;
	unsigned n = atomic_load_explicit(&s->nr_maps, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct sim_map *m = &s->maps[i];
		uint64_t mlen = atomic_load_explicit(&m->len, memory_order_acquire);
		const uint8_t *mv = __atomic_load_n(&m->vaddr, __ATOMIC_RELAXED);

		if (mlen && p < mv + mlen && mv < p + len)
			return true;
	}
	return false;
}

int sim_dma_map(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t *iova)
{
	struct sim *s = (struct sim *)bus;
	int rc = -ENOSPC;

	if (!len || ((uintptr_t)vaddr | len) & (SIM_PAGE - 1))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	unsigned n = atomic_load(&s->nr_maps);
	for (unsigned i = 0; i <= n && i < SIM_MAX_MAPS; i++) {
		struct sim_map *m = &s->maps[i];

		if (i < n && atomic_load(&m->len))
			continue;
		__atomic_store_n(&m->vaddr, vaddr, __ATOMIC_RELAXED);
		__atomic_store_n(&m->iova, s->next_iova, __ATOMIC_RELAXED);
		/* leave a guard page between mappings so an overrun is a DMA error */
		s->next_iova += len + SIM_PAGE;
		atomic_store_explicit(&m->len, len, memory_order_release);
		if (i == n)
			atomic_store_explicit(&s->nr_maps, n + 1, memory_order_release);
		*iova = m->iova;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sim_dma_unmap(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t iova)
{
	struct sim *s = (struct sim *)bus;
	int rc = -ENOENT;

	pthread_mutex_lock(&s->lock);
	unsigned n = atomic_load(&s->nr_maps);
	for (unsigned i = 0; i < n; i++) {
		struct sim_map *m = &s->maps[i];

		if (atomic_load(&m->len) == len && m->iova == iova && m->vaddr == vaddr) {
			atomic_store(&m->len, 0);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ------------------------------------------------------------- PRP walking */

/* One contiguous host run of a transfer. */
struct sim_seg {
	uint8_t *p;
	size_t len;
};

#define SIM_MAX_SEGS 64

/* Calls fn for each run of host memory covering len bytes described by
 * prp1/prp2, coalescing runs that are contiguous in host memory.  Returns 0
 * or an NVMe status (data transfer error, invalid PRP offset). */
static uint16_t sim_prp_walk(struct sim *s, uint64_t prp1, uint64_t prp2, size_t len, sim_seg_fn fn,
			     void *ctx)
{
	size_t done = 0;
	uint8_t *run = NULL;
	size_t run_len = 0, run_off = 0;
	uint64_t *list = NULL;
	unsigned li = 0, lmax = 0;

#define EMIT(ptr, n)                                                                               \
	do {                                                                                       \
		uint8_t *p_ = (ptr);                                                               \
		size_t n_ = (n);                                                                   \
		if (run && run + run_len == p_) {                                                  \
			run_len += n_;                                                             \
		} else {                                                                           \
			if (run && fn(ctx, run, run_len, run_off))                                 \
				return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);        \
			run = p_;                                                                  \
			run_len = n_;                                                              \
			run_off = done;                                                            \
		}                                                                                  \
		done += n_;                                                                        \
	} while (0)

	size_t first = SIM_PAGE - (prp1 & (SIM_PAGE - 1));
	if (first > len)
		first = len;
	uint8_t *p = sim_xlate(s, prp1, first);
	if (!p)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	EMIT(p, first);
	if (done < len && len - done <= SIM_PAGE) {
		/* PRP2 is the second page itself */
		if (prp2 & (SIM_PAGE - 1))
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
		p = sim_xlate(s, prp2, len - done);
		if (!p)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
		EMIT(p, len - done);
	} else if (done < len) {
		/* PRP2 points to a list; it may start inside a page (qword aligned) */
		uint64_t lp = prp2;
		for (;;) {
			if (lp & 7)
				return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
			lmax = (SIM_PAGE - (lp & (SIM_PAGE - 1))) / 8;
			list = sim_xlate(s, lp, lmax * 8ull);
			if (!list)
				return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
			for (li = 0; li < lmax && done < len; li++) {
				uint64_t e = list[li];
				size_t left = len - done;
				if (li == lmax - 1 && left > SIM_PAGE) {
					lp = e; /* the last entry chains to the next list */
					break;
				}
				if (e & (SIM_PAGE - 1))
					return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
				size_t n = left < SIM_PAGE ? left : SIM_PAGE;
				p = sim_xlate(s, e, n);
				if (!p)
					return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
				EMIT(p, n);
			}
			if (done >= len)
				break;
		}
	}
	if (run && fn(ctx, run, run_len, run_off))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
#undef EMIT
	return 0;
}

static int sim_seg_count(void *ctx, uint8_t *p, size_t len, size_t off)
{
	(void)p, (void)len, (void)off;
	(*(unsigned *)ctx)++;
	return 0;
}

int sim_seg_copy(void *ctx, uint8_t *p, size_t len, size_t off)
{
	struct sim_copy *c = ctx;

	if (c->to_host)
		memcpy(p, c->buf + off, len);
	else
		memcpy(c->buf + off, p, len);
	return 0;
}

static int sim_seg_zero(void *ctx, uint8_t *p, size_t len, size_t off)
{
	(void)ctx, (void)off;
	memset(p, 0, len);
	return 0;
}

struct sim_fileio {
	int fd;
	off_t base;
	bool write;
};

static int sim_seg_file(void *ctx, uint8_t *p, size_t len, size_t off)
{
	struct sim_fileio *f = ctx;

	while (len) {
		ssize_t n = f->write ? pwrite(f->fd, p, len, f->base + (off_t)off)
				     : pread(f->fd, p, len, f->base + (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) { /* past the end of a sparse file: zeroes */
			if (f->write)
				return -EIO;
			memset(p, 0, len);
			return 0;
		}
		p += n, off += (size_t)n, len -= (size_t)n;
	}
	return 0;
}

/* Validate every PRP first so a bad entry fails the command before any data
 * moves (no half-written blocks from a malformed list). */
uint16_t sim_xfer(struct sim *s, const struct nvme_sqe *c, size_t len, sim_seg_fn fn, void *ctx)
{
	unsigned segs = 0;
	uint16_t st;

	if (len > SIM_PAGE) {
		st = sim_prp_walk(s, c->prp1, c->prp2, len, sim_seg_count, &segs);
		if (st)
			return st;
	}
	return sim_prp_walk(s, c->prp1, c->prp2, len, fn, ctx);
}

/* ------------------------------------------------------------- completions */

static void sim_errlog_add(struct sim *s, uint16_t sqid, uint16_t cid, uint16_t status, uint64_t lba,
			   uint32_t nsid)
{
	pthread_mutex_lock(&s->lock);
	struct nvme_error_log *e = &s->errlog[s->error_count % SIM_ERRLOG];
	memset(e, 0, sizeof(*e));
	e->error_count = ++s->error_count;
	e->sqid = sqid;
	e->cmdid = cid;
	e->status_field = (uint16_t)(status << 1);
	e->parm_error_location = 0xffff;
	e->lba = lba;
	e->nsid = nsid;
	pthread_mutex_unlock(&s->lock);
}

/* Post one CQE; the status word (with the phase tag) is stored last with
 * release order so the host never sees a torn entry. */
static void sim_cq_post(struct sim_cq *cq, const struct nvme_cqe *e)
{
	struct nvme_cqe *slot = &cq->ring[cq->tail];

	slot->dw0 = e->dw0;
	slot->dw1 = e->dw1;
	slot->sq_head = e->sq_head;
	slot->sq_id = e->sq_id;
	slot->cid = e->cid;
	atomic_store_explicit((_Atomic uint16_t *)&slot->status, (uint16_t)((e->status & ~1u) | cq->phase),
			      memory_order_release);
	if (++cq->tail == cq->size) {
		cq->tail = 0;
		cq->phase ^= 1;
	}
}

void sim_irq(struct sim *s, struct sim_cq *cq)
{
	int fd;

	if (!cq->ien || cq->vector >= SIM_GET(s->nr_efds) ||
	    (fd = SIM_GET(s->efds[cq->vector])) < 0)
		return;
	uint64_t one = 1;
	if (write(fd, &one, sizeof(one)) == sizeof(one))
		SIM_INC(cq->st.irqs, 1);
}

static void sim_defer(struct sim *s, uint16_t cqid, const struct nvme_cqe *e, unsigned delay_us)
{
	pthread_mutex_lock(&s->lock);
	if (!s->deferred)
		s->deferred = calloc(SIM_MAX_DEFERRED, sizeof(*s->deferred));
	if (s->deferred && s->nr_deferred < SIM_MAX_DEFERRED) {
		struct sim_deferred *d = &s->deferred[s->nr_deferred++];
		d->due_ns = sim_now_ns() + delay_us * 1000ull;
		d->cqid = cqid;
		d->cqe = *e;
		atomic_store(&s->any_deferred, 1);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Post deferred completions whose time has come, in order, while their CQ
 * has room.  Returns how many were posted. */
static int sim_post_deferred(struct sim *s)
{
	int posted = 0;

	/* a device that is gone posts nothing (what it held was dropped), nor
	 * one without bus mastering (it may once it is back on) */
	if (!atomic_load(&s->any_deferred) || atomic_load(&s->gone) || !atomic_load(&s->bme))
		return 0;
	pthread_mutex_lock(&s->lock);
	uint64_t now = sim_now_ns();
	unsigned j = 0;
	for (unsigned i = 0; i < s->nr_deferred; i++) {
		struct sim_deferred *d = &s->deferred[i];
		struct sim_cq *cq = &s->cq[d->cqid];
		if (d->due_ns <= now && cq->valid && !sim_cq_full(cq, 1)) {
			sim_cq_post(cq, &d->cqe);
			sim_irq(s, cq);
			posted++;
		} else if (cq->valid) {
			s->deferred[j++] = *d;
		}
	}
	s->nr_deferred = j;
	if (!j)
		atomic_store(&s->any_deferred, 0);
	pthread_mutex_unlock(&s->lock);
	return posted;
}

bool sim_take(_Atomic unsigned *n)
{
	unsigned v = atomic_load_explicit(n, memory_order_relaxed);

	while (v) {
		if (atomic_compare_exchange_weak(n, &v, v - 1))
			return true;
	}
	return false;
}

/* Complete a command of sq: faults first, then the normal post. */
void sim_complete(struct sim *s, uint16_t sqid, struct sim_sq *sq, uint16_t cid, uint16_t status,
			 uint32_t dw0, bool io)
{
	struct sim_cq *cq = &s->cq[sq->cqid];
	struct nvme_cqe e = {.dw0 = dw0, .sq_head = sq->head, .sq_id = sqid, .cid = cid,
			     .status = (uint16_t)(status << 1)};

	if (io && sim_take(&s->f_lose_n))
		return;
	unsigned delay = atomic_load_explicit(io ? &s->f_delay_us : &s->f_admin_delay_us,
	                                      memory_order_relaxed);
	if (delay) {
		sim_defer(s, sq->cqid, &e, delay);
		return;
	}
	if (io && atomic_load_explicit(&s->f_bogus_n, memory_order_relaxed) && !sim_cq_full(cq, 2) &&
	    sim_take(&s->f_bogus_n)) {
		struct nvme_cqe b = e;
		b.cid = SIM_BOGUS_CID;
		sim_cq_post(cq, &b);
	}
	sim_cq_post(cq, &e);
	if (io && atomic_load_explicit(&s->f_dup_n, memory_order_relaxed) && !sim_cq_full(cq, 1) &&
	    sim_take(&s->f_dup_n))
		sim_cq_post(cq, &e);
}

/* --------------------------------------------------------------- I/O commands */

/* sim_fault_misdirect: where blocks [slba, slba + nlb) of a Read or Write
 * really go (slba when no fault is pending or no place fits). */
static __attribute__((noinline)) uint64_t sim_misdirect(struct sim *s, const struct sim_ns *ns,
                                                         bool write, uint64_t slba, uint64_t nlb)
{
	if (!sim_take(&s->f_mis_n[write]))
		return slba;
	int64_t d = atomic_load(&s->f_mis_off[write]);
	for (int k = 0; k < 2; k++, d = -d) {
		/* both in 64 bits: slba and nlb are within a namespace of < 2^63 bytes */
		int64_t at = (int64_t)slba + d;
		if (d && at >= 0 && (uint64_t)at <= ns->nlba - nlb) {
			SIM_INC(s->misdirected, 1);
			return (uint64_t)at;
		}
	}
	return slba;
}

static uint16_t sim_rw(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, struct sim_ns *ns,
		       bool write, uint16_t xid)
{
	uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
	uint32_t nlb = (c->cdw12 & 0xffff) + 1u;
	size_t len = (size_t)nlb << ns->lba_shift;
	bool fua = write && (c->cdw12 & NVME_RW_FUA), cached = write && sim_cached(s, ns);
	uint16_t st;

	if (slba >= ns->nlba || nlb > ns->nlba - slba)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
	if (s->o.mdts && len > ((size_t)SIM_PAGE << s->o.mdts))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	if (c->flags & 0xc0) /* PSDT: SGLs not offered unless configured */
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	/* where the blocks really go: the command's own, unless misdirected */
	uint64_t at = slba;
	if (__builtin_expect(atomic_load_explicit(&s->f_mis_n[write], memory_order_relaxed) != 0, 0))
		at = sim_misdirect(s, ns, write, slba, nlb);
	/* the null namespace moves no data of its own: nothing to order */
	bool media = ns->backing != SIM_BACKING_NULL;
	if (media) {
		sim_ns_enter(ns, xid, at, nlb, write);
		/* a FUA write is durable when it completes: nothing to keep for
		 * it (its blocks' older entries go when it succeeds) */
		int rc = cached && !fua ? sim_wc_dirty(&ns->wc, at, nlb) : 0;
		sim_wc_unlock(ns);
		if (rc) {
			sim_ns_leave(ns, xid);
			return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		}
	}
	if (__builtin_expect(ns->ms != 0, 0)) {
		st = sim_md_rw(s, c, ns, write, at);
		if (!st && fua && ns->backing == SIM_BACKING_FILE && fdatasync(ns->fd))
			st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	} else switch (ns->backing) {
	case SIM_BACKING_NULL:
		st = write ? sim_xfer(s, c, len, sim_seg_count, &(unsigned){0})
			   : sim_xfer(s, c, len, sim_seg_zero, NULL);
		break;
	case SIM_BACKING_RAM: {
		struct sim_copy cp = {.buf = ns->mem + (at << ns->lba_shift), .to_host = !write};
		st = sim_xfer(s, c, len, sim_seg_copy, &cp);
		break;
	}
	case SIM_BACKING_FILE: {
		struct sim_fileio f = {.fd = ns->fd, .base = (off_t)(at << ns->lba_shift), .write = write};
		st = sim_xfer(s, c, len, sim_seg_file, &f);
		if (st == NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL))
			st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, write ? NVME_SC_WRITE_FAULT : NVME_SC_READ_ERROR);
		if (!st && fua && fdatasync(ns->fd))
			st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		break;
	}
	default:
		st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	}
	if (!st && fua && cached) {
		sim_wc_lock(ns);
		sim_wc_durable(&ns->wc, at, nlb);
		sim_wc_unlock(ns);
	}
	if (media)
		sim_ns_leave(ns, xid);
	if (!st) {
		if (fua)
			SIM_INC(sq->st.fua_writes, 1);
		if (write) {
			SIM_INC(sq->st.writes, 1);
			SIM_INC(sq->st.bytes_written, len);
		} else {
			SIM_INC(sq->st.reads, 1);
			SIM_INC(sq->st.bytes_read, len);
		}
	}
	return st;
}

static uint16_t sim_dsm(struct sim *s, uint16_t qid, const struct nvme_sqe *c, struct sim_ns *ns)
{
	unsigned nr = (c->cdw10 & 0xff) + 1u;
	struct nvme_dsm_range r[NVME_DSM_MAX_RANGES];
	struct sim_copy cp = {.buf = (uint8_t *)r, .to_host = false};
	uint16_t st = sim_xfer(s, c, nr * sizeof(r[0]), sim_seg_copy, &cp);

	if (st)
		return st;
	if (!(c->cdw11 & NVME_DSM_AD))
		return 0; /* attributes only: hints, nothing to do */
	for (unsigned i = 0; i < nr; i++)
		if (r[i].slba >= ns->nlba || r[i].nlb > ns->nlba - r[i].slba)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
	for (unsigned i = 0; i < nr; i++)
		if ((st = sim_ns_zero(s, ns, qid, r[i].slba, r[i].nlb, false, NULL)))
			return st;
	return 0;
}

uint16_t sim_io(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, uint16_t xid)
{
	if (c->opc == NVME_CMD_FLUSH && c->nsid == 0xffffffffu) {
		SIM_INC(sq->st.flushes, 1);
		for (unsigned i = 0; i < s->o.nr_ns; i++) {
			uint16_t st = sim_ns_flush(&s->ns[i]);
			if (st)
				return st;
		}
		return 0;
	}
	if (c->nsid == 0 || c->nsid > s->o.nr_ns || !s->ns[c->nsid - 1].active)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
	struct sim_ns *ns = &s->ns[c->nsid - 1];
	switch (c->opc) {
	case NVME_CMD_READ:
		return sim_rw(s, sq, c, ns, false, xid);
	case NVME_CMD_WRITE:
		return sim_rw(s, sq, c, ns, true, xid);
	case NVME_CMD_FLUSH:
		SIM_INC(sq->st.flushes, 1);
		return sim_ns_flush(ns);
	case NVME_CMD_WRITE_ZEROES: {
		uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
		SIM_INC(sq->st.write_zeroes, 1);
		if (c->cdw12 & NVME_WZ_DEAC)
			SIM_INC(sq->st.write_zeroes_deac, 1);
		/* DEAC or not, the blocks read as zeroes afterwards (DLFEAT 001b) */
		if (s->o.wzsl && ((uint64_t)((c->cdw12 & 0xffff) + 1u) << ns->lba_shift) >
				     ((uint64_t)SIM_PAGE << s->o.wzsl))
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		bool fua = c->cdw12 & NVME_RW_FUA;
		uint16_t st = ns->ms ? sim_md_prinfo_ok(c, ns, true) : 0;
		if (!st)
			st = sim_ns_zero(s, ns, xid, slba, (c->cdw12 & 0xffff) + 1u, fua, c);
		if (!st && fua)
			SIM_INC(sq->st.fua_writes, 1);
		return st;
	}
	case NVME_CMD_DSM:
		SIM_INC(sq->st.dsm, 1);
		return sim_dsm(s, xid, c, ns);
	default:
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
	}
}

/* -------------------------------------------------------- queue processing */

/* sim_fault_stall_next: hold the command (not executed, not completed). */
static bool sim_stall(struct sim *s, uint16_t sqid, const struct nvme_sqe *c)
{
	bool held = false;

	pthread_mutex_lock(&s->lock);
	if (s->nr_stalled < SIM_MAX_STALLED && sim_take(&s->f_stall_n)) {
		s->stalled[s->nr_stalled++] = (struct sim_stalled){.sqid = sqid, .sqe = *c};
		held = true;
	}
	pthread_mutex_unlock(&s->lock);
	return held;
}

/* Abort: a stalled command named by (sqid, cid) completes with Command
 * Abort Requested; dw0 bit 0 = 0 says it was aborted.  Commands that are
 * not stalled executed as soon as they were fetched: nothing to abort. */
uint32_t sim_abort(struct sim *s, uint16_t sqid, uint16_t cid)
{
	if (atomic_load(&s->f_abort_ignore) || sqid == 0 || sqid >= SIM_NQ)
		return 1;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nr_stalled; i++) {
		struct sim_stalled *st = &s->stalled[i];
		if (st->sqid != sqid || st->sqe.cid != cid)
			continue;
		struct sim_sq *sq = &s->sq[sqid];
		uint16_t cqid = sq->cqid;
		s->stalled[i] = s->stalled[--s->nr_stalled];
		pthread_mutex_unlock(&s->lock);
		if (!sq->valid || !s->cq[cqid].valid)
			return 1;
		struct nvme_cqe e = {.sq_head = sq->head, .sq_id = sqid, .cid = cid,
				     .status = (uint16_t)(NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_REQ) << 1)};
		if (sim_cq_full(&s->cq[cqid], 1))
			return 1;
		sim_cq_post(&s->cq[cqid], &e);
		sim_irq(s, &s->cq[cqid]);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	return 1;
}

static void sim_invalid_doorbell(struct sim *s, struct sim_qstats *st, uint8_t info)
{
	SIM_INC(st->invalid_doorbells, 1);
	/* an Error Status async event, pointing at the error log */
	sim_event_add(s, NVME_AER_DW0(NVME_AER_TYPE_ERROR, info, NVME_LOG_ERROR));
}

bool sim_running(struct sim *s)
{
	/* without bus mastering the function can neither fetch a command nor
	 * post a completion: both are DMA */
	return !atomic_load_explicit(&s->gone, memory_order_relaxed) &&
	       atomic_load_explicit(&s->bme, memory_order_relaxed) && SIM_GET(s->enabled) &&
	       (SIM_GET(s->csts) & NVME_CSTS_RDY) &&
	       !atomic_load_explicit(&s->cfs, memory_order_relaxed) &&
	       !atomic_load_explicit(&s->f_hang, memory_order_relaxed);
}

void sim_cmd_failed(struct sim *s, uint16_t qid, struct sim_sq *sq, const struct nvme_sqe *c,
                    uint16_t status)
{
	SIM_INC(sq->st.invalid_cmds, 1);
	if ((status & 0x7ff) == NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR))
		SIM_INC(sq->st.dma_errors, 1);
	if (NVME_STATUS_SCT(status) == NVME_SCT_MEDIA) {
		SIM_INC(s->media_errors, 1);
		unsigned sc = NVME_STATUS_SC(status);
		if (sc >= NVME_SC_GUARD_CHECK && sc <= NVME_SC_REFTAG_CHECK)
			SIM_INC(s->pi_errors[sc - NVME_SC_GUARD_CHECK], 1);
	}
	sim_errlog_add(s, qid, c->cid, status, (uint64_t)c->cdw11 << 32 | c->cdw10, c->nsid);
}

/* Post what the copy thread finished for the queue, then fetch and execute
 * everything between head and the tail doorbell, stopping while the CQ has
 * no room (besides what the copy thread holds).  offload: the caller runs
 * this queue on its own (sim_q_run), so large commands may go to the copy
 * thread; never on an exclusive run, which must leave it idle.  Returns
 * the number of commands fetched, and of finished ones posted. */
static unsigned sim_process_sq(struct sim *s, uint16_t qid, bool offload)
{
	struct sim_sq *sq = &s->sq[qid];
	struct sim_qexec *x = &s->qx[qid];
	unsigned n, handed = 0;

	if (!sq->valid || !sim_running(s))
		return 0;
	struct sim_cq *cq = &s->cq[sq->cqid];
	uint32_t dstrd = NVME_CAP_DSTRD(s->cap);
	uint32_t tail = sim_db_read(s, nvme_sq_tdbl_off(qid, dstrd));
	if (tail >= sq->size) {
		sim_invalid_doorbell(s, &sq->st, 0x01);
		return 0;
	}
	sq->tail = (uint16_t)tail;
	cq->head = (uint16_t)sim_db_read(s, nvme_cq_hdbl_off(sq->cqid, dstrd));
	n = sim_offload_reap(s, qid);
	while (sq->head != sq->tail && !sim_cq_full(cq, 1 + x->inflight)) {
		/* a hang set while this pass runs holds every command not yet
		 * fetched, not only the next pass's (a command submitted after
		 * sim_fault_hang returned is never run) */
		if (atomic_load_explicit(&s->f_hang, memory_order_relaxed))
			break;
		/* a hang a reset does not end: the queues were brought up again
		 * (admin commands answered), and the first I/O command to fetch
		 * finds the controller hung again, before it is fetched */
		if (qid && atomic_load_explicit(&s->f_hang_loop, memory_order_relaxed)) {
			atomic_store(&s->f_hang, true);
			/* an unhang meanwhile (it ends the loop before the hang)
			 * must not be undone by the store above */
			if (!atomic_load(&s->f_hang_loop))
				atomic_store(&s->f_hang, false);
			break;
		}
		struct nvme_sqe c = sq->ring[sq->head];
		uint16_t status = 0;
		uint32_t dw0 = 0;
		bool io = qid != 0;

		if (++sq->head == sq->size)
			sq->head = 0;
		SIM_INC(sq->st.cmds, 1);
		n++;
		if (!io) {
			if (!sim_admin(s, sq, &c, &status, &dw0))
				continue;
		} else if (atomic_load_explicit(&s->f_fail_n, memory_order_relaxed) && sim_take(&s->f_fail_n)) {
			status = atomic_load(&s->f_fail_status);
		} else if (atomic_load_explicit(&s->f_stall_n, memory_order_relaxed) && sim_stall(s, qid, &c)) {
			continue;
		} else if (offload && s->o.offload && sq->head != sq->tail &&
		           sim_offload_take(s, qid, &c)) {
			/* only with a command behind it, which this thread then
			 * executes meanwhile: a lone command gains nothing from
			 * the copy thread but a hand-over and a wake-up */
			x->inflight++;
			handed++;
			continue;
		} else {
			if (s->o.io_hook)
				s->o.io_hook(s->o.hook_arg, qid, &c);
			status = sim_io(s, sq, &c, qid);
		}
		if (status)
			sim_cmd_failed(s, qid, sq, &c, status);
		sim_complete(s, qid, sq, c.cid, status, dw0, io);
	}
	if (handed)
		handed -= sim_offload_back(s, qid);
	if (n > handed) /* the copy thread signals for what it was handed */
		sim_irq(s, cq);
	if (qid == 0)
		sim_aer_flush(s);
	return n;
}

/* Anything for qid's executor: commands to fetch, or finished ones to post. */
static bool sim_q_waiting(struct sim *s, uint16_t qid)
{
	const struct sim_qexec *x = &s->qx[qid];

	return s->sq[qid].head != s->sq[qid].tail || x->held ||
	       atomic_load_explicit(&x->done, memory_order_relaxed);
}

/* The doorbell at BAR0 offset off was written; offload as for
 * sim_process_sq. */
static void sim_doorbell(struct sim *s, uint32_t off, bool offload)
{
	uint32_t idx = (off - NVME_REG_DBS) / s->dstrd_bytes;
	uint16_t qid = (uint16_t)(idx / 2);

	if (qid >= SIM_NQ || (off - NVME_REG_DBS) % s->dstrd_bytes) {
		SIM_INC(s->admin_st.invalid_doorbells, 1);
		return;
	}
	if (!(idx & 1)) {
		if (!s->sq[qid].valid) {
			sim_invalid_doorbell(s, &s->admin_st, 0x00);
			return;
		}
		SIM_INC(s->sq[qid].st.sq_doorbells, 1);
		sim_process_sq(s, qid, offload);
		return;
	}
	struct sim_cq *cq = &s->cq[qid];
	if (!cq->valid) {
		sim_invalid_doorbell(s, &s->admin_st, 0x00);
		return;
	}
	uint32_t head = sim_db_read(s, off);
	if (head >= cq->size) {
		sim_invalid_doorbell(s, &cq->st, 0x01);
		return;
	}
	SIM_INC(cq->st.cq_doorbells, 1);
	cq->head = (uint16_t)head;
	/* room in the CQ may unblock its stalled SQs: SQ n alone on CQ n (as
	 * the engine pairs them) without a look at every queue */
	struct sim_sq *own = &s->sq[qid];
	if (cq->nr_sqs == 1 && own->valid && own->cqid == qid) {
		if (sim_q_waiting(s, qid))
			sim_process_sq(s, qid, offload);
		return;
	}
	for (uint16_t q = 0; q < SIM_NQ; q++)
		if (s->sq[q].valid && s->sq[q].cqid == qid && sim_q_waiting(s, q))
			sim_process_sq(s, q, false);
}

/* Inline mode: a thread that raised exec from 0 waits until no queue runs
 * on its own, then until the copy thread is idle.  None starts while exec
 * is not 0 (sim_q_run); one running finishes what its SQ holds (and what
 * is rung meanwhile) first, and hands the copy thread nothing more. */
static void sim_exec_quiesce(struct sim *s)
{
	for (unsigned q = 1; q < SIM_NQ; q++)
		while (atomic_load(&s->qx[q].inside))
			sched_yield();
	sim_offload_quiesce(s);
}

/* Inline mode, exclusive: post what the copy thread finished, for every
 * queue (its executor may not come back soon). */
static void sim_exec_reap(struct sim *s)
{
	if (!s->o.offload)
		return;
	for (uint16_t q = 1; q < SIM_NQ; q++)
		if (s->qx[q].held || atomic_load_explicit(&s->qx[q].done, memory_order_relaxed))
			sim_process_sq(s, q, false);
}

/* Inline mode: the executing thread runs the marked doorbells (its own
 * and those other threads marked meanwhile), then gives up its c claims;
 * claims that arrived since mean more marks: run again. */
static void sim_exec_run(struct sim *s, unsigned c)
{
	sim_exec_quiesce(s);
	for (;;) {
		if (atomic_load_explicit(&s->any_deferred, memory_order_relaxed))
			sim_post_deferred(s);
		sim_exec_reap(s);
		for (unsigned w = 0; w < sizeof(s->db_pend) / sizeof(s->db_pend[0]); w++) {
			uint64_t bits =
			    atomic_exchange_explicit(&s->db_pend[w], 0, memory_order_acquire);
			while (bits) {
				unsigned b = (unsigned)__builtin_ctzll(bits);
				bits &= bits - 1;
				sim_doorbell(s, NVME_REG_DBS + (w * 64 + b) * s->dstrd_bytes, false);
			}
		}
		unsigned left = atomic_fetch_sub_explicit(&s->exec, c, memory_order_acq_rel) - c;
		if (!left)
			return;
		c = left;
	}
}

/* Inline mode: exclusive use of the queues for a register write, a reset or
 * a poll (not per command): wait until no thread executes. */
static void sim_exec_lock(struct sim *s)
{
	unsigned zero = 0;

	while (!atomic_compare_exchange_weak(&s->exec, &zero, 1)) {
		zero = 0;
		sched_yield();
	}
	sim_exec_quiesce(s);
}

/* ... and release it, running the doorbells marked meanwhile. */
static void sim_exec_unlock(struct sim *s)
{
	sim_exec_run(s, 1);
}

void sim_qlock(struct sim *s)
{
	if (s->o.threaded)
		pthread_mutex_lock(&s->qlock);
	else
		sim_exec_lock(s);
}

void sim_qunlock(struct sim *s)
{
	if (s->o.threaded)
		pthread_mutex_unlock(&s->qlock);
	else
		sim_exec_unlock(s);
}

/* Inline mode: I/O queue qid's SQ tail (bit value 1) or its CQ's head
 * doorbell (bit value 2) was written, or the copy thread finished one of
 * its commands (bit value 4).  When nothing runs exclusively and the queue's CQ
 * serves this SQ alone, the doorbell runs here, beside the other queues:
 * nothing a command of this SQ touches is touched by another queue's
 * unguarded (its CQ is its own; a namespace's write cache model and the
 * blocks being moved are ordered by sim_ns_enter; the error log, the
 * stalled and deferred lists take s->lock).  False: run it exclusively. */
static bool sim_q_run(struct sim *s, uint16_t qid, unsigned bit)
{
	struct sim_qexec *x = &s->qx[qid];
	uint32_t dstrd = NVME_CAP_DSTRD(s->cap);

	/* seq_cst pairs with sim_exec_lock and sim_db_notify's exec claim: a
	 * thread that raised exec from 0 sees inside, or we see exec */
	atomic_fetch_add(&x->inside, 1);
	if (atomic_load(&s->exec))
		goto fallback;
	/* stable until inside drops: only an exclusive runner changes it */
	struct sim_sq *sq = &s->sq[qid];
	if (!sq->valid || sq->cqid != qid || s->cq[qid].nr_sqs != 1 || !s->cq[qid].valid ||
	    atomic_load_explicit(&s->any_deferred, memory_order_relaxed))
		goto fallback;
	/* the queue to ourselves (the usual case: one reactor rings it) runs
	 * our doorbell without a mark; else mark it, and whoever raises claim
	 * from 0 runs the marks until it drops back */
	unsigned c = 1, bits = bit, zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&x->claim, &zero, 1, memory_order_acq_rel,
	                                             memory_order_relaxed)) {
		atomic_fetch_or_explicit(&x->pend, bit, memory_order_release);
		if (atomic_fetch_add_explicit(&x->claim, 1, memory_order_acq_rel) != 0)
			goto out; /* the thread holding the claim runs our mark before it lets go */
		bits = atomic_exchange_explicit(&x->pend, 0, memory_order_acquire);
	}
	for (;;) {
		if (bits & 2) /* room in the CQ first: it may unblock the SQ */
			sim_doorbell(s, nvme_cq_hdbl_off(qid, dstrd), true);
		if (bits & 1)
			sim_doorbell(s, nvme_sq_tdbl_off(qid, dstrd), true);
		else if (bits & 4)
			sim_process_sq(s, qid, true);
		unsigned left = atomic_fetch_sub_explicit(&x->claim, c, memory_order_acq_rel) - c;
		if (!left)
			break;
		c = left;
		bits = atomic_exchange_explicit(&x->pend, 0, memory_order_acquire);
	}
out:
	atomic_fetch_sub_explicit(&x->inside, 1, memory_order_release);
	return true;
fallback:
	atomic_fetch_sub_explicit(&x->inside, 1, memory_order_release);
	return false;
}

void sim_q_done(struct sim *s, uint16_t qid)
{
	if (sim_q_run(s, qid, 4))
		return;
	/* an exclusive runner posts it (sim_exec_reap), or we become one */
	if (atomic_fetch_add(&s->exec, 1) == 0)
		sim_exec_run(s, 1);
}

void sim_db_notify(struct nvme_bus *bus, uint32_t off, uint32_t val)
{
	struct sim *s = (struct sim *)bus;

	(void)val; /* the value is in BAR memory already; read it from there */
	if (atomic_load_explicit(&s->gone, memory_order_relaxed))
		return;
	if (s->o.threaded) {
		atomic_store(&s->kick, 1);
		if (atomic_load(&s->sleeping)) {
			pthread_mutex_lock(&s->lock);
			pthread_cond_signal(&s->cond);
			pthread_mutex_unlock(&s->lock);
		}
		return;
	}
	uint32_t idx = (off - NVME_REG_DBS) / s->dstrd_bytes;
	if (idx >= 2 * SIM_NQ || (off - NVME_REG_DBS) % s->dstrd_bytes) {
		SIM_INC(s->admin_st.invalid_doorbells, 1);
		return;
	}
	if (idx >= 2 && sim_q_run(s, (uint16_t)(idx / 2), 1u << (idx & 1)))
		return;
	atomic_fetch_or_explicit(&s->db_pend[idx / 64], 1ull << (idx % 64), memory_order_release);
	if (atomic_fetch_add(&s->exec, 1) == 0)
		sim_exec_run(s, 1);
}

/* Threaded mode: scan every queue's doorbells. */
static unsigned sim_scan(struct sim *s)
{
	unsigned work = 0;
	uint32_t dstrd = NVME_CAP_DSTRD(s->cap);

	for (uint16_t q = 0; q < SIM_NQ; q++) {
		struct sim_cq *cq = &s->cq[q];
		if (cq->valid) {
			uint32_t h = sim_db_read(s, nvme_cq_hdbl_off(q, dstrd));
			if (h < cq->size && h != cq->head) {
				cq->head = (uint16_t)h;
				SIM_INC(cq->st.cq_doorbells, 1);
			}
		}
	}
	for (uint16_t q = 0; q < SIM_NQ; q++) {
		struct sim_sq *sq = &s->sq[q];
		if (!sq->valid)
			continue;
		uint32_t t = sim_db_read(s, nvme_sq_tdbl_off(q, dstrd));
		if (t != sq->tail && t < sq->size)
			SIM_INC(sq->st.sq_doorbells, 1);
		work += sim_process_sq(s, q, false);
	}
	work += (unsigned)sim_post_deferred(s);
	return work;
}

void *sim_thread(void *arg)
{
	struct sim *s = arg;
	unsigned idle = 0;

	while (!atomic_load(&s->stop)) {
		atomic_store(&s->kick, 0);
		pthread_mutex_lock(&s->qlock);
		unsigned work = sim_scan(s);
		pthread_mutex_unlock(&s->qlock);
		if (work) {
			idle = 0;
			continue;
		}
		if (++idle < 2000) { /* spin a little: completions arrive sooner */
			__builtin_ia32_pause();
			continue;
		}
		pthread_mutex_lock(&s->lock);
		atomic_store(&s->sleeping, 1);
		if (!atomic_load(&s->kick) && !atomic_load(&s->stop)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 1000000; /* at most 1 ms: deferred completions come due */
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
		}
		atomic_store(&s->sleeping, 0);
		pthread_mutex_unlock(&s->lock);
		idle = 0;
	}
	return NULL;
}

/* ---------------------------------------------------------- polling, stats */

int sim_poll(struct sim *s)
{
	int n;

	if (s->o.threaded)
		return 0;
	sim_exec_lock(s);
	n = sim_post_deferred(s);
	for (uint16_t q = 0; q < SIM_NQ; q++)
		if (s->sq[q].valid)
			n += (int)sim_process_sq(s, q, false);
	sim_exec_unlock(s);
	return n;
}

void sim_add_q(struct sim_qstats *t, const struct sim_qstats *q)
{
	const uint64_t *a = (const uint64_t *)q;
	uint64_t *b = (uint64_t *)t;

	for (size_t i = 0; i < sizeof(*q) / sizeof(uint64_t); i++)
		SIM_INC(b[i], SIM_LOAD(a[i]));
}

static void sim_add(struct sim_stats *t, const struct sim_qstats *q)
{
	t->cmds += SIM_LOAD(q->cmds);
	t->reads += SIM_LOAD(q->reads);
	t->writes += SIM_LOAD(q->writes);
	t->flushes += SIM_LOAD(q->flushes);
	t->write_zeroes += SIM_LOAD(q->write_zeroes);
	t->write_zeroes_deac += SIM_LOAD(q->write_zeroes_deac);
	t->dsm += SIM_LOAD(q->dsm);
	t->admin_cmds += SIM_LOAD(q->admin_cmds);
	t->bytes_read += SIM_LOAD(q->bytes_read);
	t->bytes_written += SIM_LOAD(q->bytes_written);
	t->dma_errors += SIM_LOAD(q->dma_errors);
	t->invalid_cmds += SIM_LOAD(q->invalid_cmds);
	t->sq_doorbells += SIM_LOAD(q->sq_doorbells);
	t->cq_doorbells += SIM_LOAD(q->cq_doorbells);
	t->irqs += SIM_LOAD(q->irqs);
	t->invalid_doorbells += SIM_LOAD(q->invalid_doorbells);
	t->fua_writes += SIM_LOAD(q->fua_writes);
	t->offloaded += SIM_LOAD(q->offloaded);
	t->offload_back += SIM_LOAD(q->offload_back);
}

/* Counters are relaxed atomics (SIM_INC): a snapshot may lag by a command.
 * s->lock: a controller reset moves the queues' counters to `retired` and
 * clears the queues under it; without it a snapshot could count them twice
 * or read them while they are cleared. */
void sim_get_stats(struct sim *s, struct sim_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->lock);
	for (unsigned q = 0; q < SIM_NQ; q++) {
		sim_add(st, &s->sq[q].st);
		sim_add(st, &s->cq[q].st);
	}
	sim_add(st, &s->admin_st);
	sim_add(st, &s->retired);
	for (unsigned i = 0; i < s->o.nr_ns; i++) {
		st->wc_dirty_blocks += sim_wc_nr_dirty(&s->ns[i].wc);
		st->wc_destaged += sim_wc_destaged(&s->ns[i].wc);
	}
	st->resets = s->resets;
	st->shutdowns = s->shutdowns;
	st->stalled = s->nr_stalled;
	st->powerfails = s->powerfails;
	st->pf_blocks_lost = s->pf_lost;
	st->pf_blocks_kept = s->pf_kept;
	st->pi_guard_errors = SIM_LOAD(s->pi_errors[0]);
	st->pi_app_errors = SIM_LOAD(s->pi_errors[1]);
	st->pi_ref_errors = SIM_LOAD(s->pi_errors[2]);
	st->misdirected = SIM_LOAD(s->misdirected);
	pthread_mutex_unlock(&s->lock);
}


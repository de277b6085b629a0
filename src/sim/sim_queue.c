/* sim.c - the built-in software NVMe controller (see sim.h).
 *
 * Layout: registers and the controller state machine, the DMA map, queue
 * processing (fetch, execute, post), admin commands, I/O commands, the device
 * thread, fault injection, the bus ops.
 *
 * Concurrency: each submission queue is processed by one thread at a time
 * (inline: the thread that rang its doorbell, which for I/O queues is the
 * owning reactor; threaded: the device thread), so per-queue state and
 * per-queue statistics need no lock.  Register writes, fault settings and
 * deferred completions take s->lock; the inline I/O path never does.
 * The volatile write cache model (sim_wc.c) has no lock either: it is used by
 * the thread executing commands, and by others only under sim_qlock.
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nvme_spec.h"
#include "safepath.h"
#include "sim_wc.h"

#define SIM_PAGE 4096u
#define SIM_MAX_QID 64           /* I/O queues 1..64 besides the admin queue */
#define SIM_NQ (SIM_MAX_QID + 1)
#define SIM_MAX_MAPS 256
#define SIM_IOVA_BASE 0x100000000ull
#define SIM_MAX_AER 4
#define SIM_ERRLOG 16
#define SIM_MAX_DEFERRED 4096
#define SIM_BOGUS_CID 0xfffe     /* never a tracker index: entries <= 4096 */
#define SIM_MAX_STALLED 64

struct sim_map {
	uint8_t *vaddr;
	uint64_t iova;
	_Atomic uint64_t len; /* 0: free slot */
};

/* Counters are bumped by whichever thread executes the queue (the device
 * thread, or a reactor in inline mode) and read by sim_get_stats from any
 * thread: relaxed atomic adds and loads (a lock-free add; the inline path
 * stays free of locks and system calls). */
#define SIM_INC(x, n) __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define SIM_LOAD(x)   __atomic_load_n(&(x), __ATOMIC_RELAXED)
/* Register state (enabled, csts) and the MSI-X table are written under
 * s->lock and read without it on the inline path: release stores, acquire
 * loads (plain moves on x86).  What sim_enable set up is seen with them. */
#define SIM_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define SIM_GET(x)    __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

struct sim_qstats {
	uint64_t cmds, reads, writes, flushes, write_zeroes, write_zeroes_deac, dsm, admin_cmds;
	uint64_t bytes_read, bytes_written, dma_errors, invalid_cmds, fua_writes;
	uint64_t sq_doorbells, cq_doorbells, irqs, invalid_doorbells;
};

struct sim_cq {
	bool valid;
	bool ien;
	uint16_t size;
	uint16_t vector;
	uint16_t head;  /* from the host's head doorbell */
	uint16_t tail;  /* next slot we post into */
	uint8_t phase;
	unsigned nr_sqs;
	struct nvme_cqe *ring;
	struct sim_qstats st; /* irqs, cq_doorbells */
};

struct sim_sq {
	bool valid;
	uint16_t size;
	uint16_t head;
	uint16_t tail;  /* from the host's tail doorbell */
	uint16_t cqid;
	struct nvme_sqe *ring;
	struct sim_qstats st;
};

struct sim_ns {
	uint64_t nlba;
	unsigned lba_size;
	unsigned lba_shift;
	enum sim_backing backing;
	uint8_t *mem;  /* RAM */
	size_t mem_len;
	int fd;        /* FILE */
	char path[4096];
	struct sim_wc wc; /* RAM and FILE with opts.vwc: the volatile write cache (cap 0: none) */
};

struct sim_deferred {
	uint64_t due_ns;
	uint16_t cqid;
	struct nvme_cqe cqe;
};

/* A command held by sim_fault_stall_next: fetched, not executed. */
struct sim_stalled {
	uint16_t sqid;
	struct nvme_sqe sqe;
};

struct sim {
	struct nvme_bus bus; /* first: sim_from_bus checks bus.ops */
	struct sim_opts o;
	char name[48];
	pthread_mutex_t lock;

	/* registers */
	uint64_t cap;
	uint32_t vs, intms, cc, csts, aqa;
	uint64_t asq, acq;
	uint64_t ready_due_ns; /* CC.EN 0->1 pending RDY, 0: none */
	bool enabled;          /* CC.EN seen as 1 and accepted */
	uint32_t dstrd_bytes;
	size_t bar_span;       /* BAR0's reservation: bus.bar0_len accessible, the rest not */

	/* features */
	uint16_t nr_queues_granted; /* 1-based, 0 until Set Features */
	bool wc_enabled;       /* Volatile Write Cache feature WCE: opts.vwc at reset */
	uint32_t irq_coalesce;

	/* MSI-X */
	int efds[128];
	unsigned nr_efds;

	/* DMA */
	struct sim_map maps[SIM_MAX_MAPS];
	_Atomic unsigned nr_maps;
	uint64_t next_iova;

	struct sim_sq sq[SIM_NQ];
	struct sim_cq cq[SIM_NQ];
	struct sim_ns ns[SIM_MAX_NS];

	/* async events and the error log */
	uint16_t aer_cid[SIM_MAX_AER];
	unsigned nr_aer;
	uint32_t pending_event; /* dw0 of an event not yet reported, 0: none */
	struct nvme_error_log errlog[SIM_ERRLOG];
	uint64_t error_count;
	uint64_t host_reads, host_writes, units_read, units_written, media_errors;

	/* faults: counters taken with atomics from the processing thread */
	_Atomic unsigned f_fail_n;
	_Atomic uint16_t f_fail_status;
	_Atomic unsigned f_delay_us;
	_Atomic unsigned f_lose_n;
	_Atomic unsigned f_bogus_n;
	_Atomic unsigned f_dup_n;
	_Atomic bool f_hang;
	_Atomic bool f_never_ready;
	_Atomic bool cfs;
	_Atomic unsigned gone;     /* SIM_GONE_*: registers read all ones, nothing runs */
	_Atomic unsigned f_stall_n;
	_Atomic bool f_abort_ignore;
	_Atomic unsigned f_admin_delay_us; /* sim_fault_admin_delay */
	_Atomic bool f_stuck;      /* sim_fault_stuck: CC writes and FLR ignored */
	_Atomic bool bme;          /* bus mastering (the bus_master op): off, no DMA at all */
	_Atomic unsigned f_irq_fail_n;
	struct sim_stalled stalled[SIM_MAX_STALLED]; /* s->lock */
	unsigned nr_stalled;
	uint64_t resets;           /* CC.EN 1 -> 0 and function resets */
	uint64_t powerfails, pf_lost, pf_kept; /* s->lock */

	/* completions held back by sim_fault_delay (s->lock) */
	struct sim_deferred *deferred;
	unsigned nr_deferred;
	_Atomic unsigned any_deferred;

	/* device thread (threaded mode) */
	pthread_t thread;
	bool thread_started;
	_Atomic bool stop;
	_Atomic int kick;
	_Atomic int sleeping;
	pthread_cond_t cond;

	struct sim_qstats admin_st; /* register-level counters under s->lock */
	struct sim_qstats retired;  /* counters of queues deleted or reset */
	/* threaded mode: held by the device thread while it processes, and by
	 * register writes that reset queues, so a reset never races a fetch */
	pthread_mutex_t qlock;
	/* inline mode: one thread at a time executes device work (queue state
	 * has no lock).  exec counts the threads that asked; the one that
	 * raised it from 0 executes the doorbells marked in db_pend (bit:
	 * doorbell index) for all of them until it drops back to 0. */
	_Atomic unsigned exec;
	_Atomic uint64_t db_pend[(2 * SIM_NQ + 63) / 64];
};

/* Why the device does not answer (s->gone bits); either makes it dead to
 * the host. */
#define SIM_GONE_REMOVED 1u /* sim_fault_remove: the link is gone; the device keeps power */
#define SIM_GONE_OFF     2u /* sim_fault_powerfail: no power until sim_power_on or clear */

static const struct nvme_bus_ops sim_ops;
static uint32_t sim_abort(struct sim *s, uint16_t sqid, uint16_t cid);
static void sim_flush_all(struct sim *s);
static void sim_add_q(struct sim_qstats *t, const struct sim_qstats *q);

static uint64_t sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A doorbell outside BAR0 (opts.bar_len smaller than the queues need)
 * does not exist: it reads 0 and a store to it is dropped. */
static inline bool sim_db_in_bar(const struct sim *s, uint64_t off)
{
	return off + 4 <= s->bus.bar0_len;
}

static inline uint32_t sim_db_read(struct sim *s, uint32_t off)
{
	if (!sim_db_in_bar(s, off))
		return 0;
	return atomic_load_explicit((_Atomic uint32_t *)(s->bus.bar0 + off), memory_order_acquire);
}

static inline void sim_db_zero(struct sim *s, uint32_t off)
{
	if (sim_db_in_bar(s, off))
		*(volatile uint32_t *)(s->bus.bar0 + off) = 0;
}

/* ------------------------------------------------------------------ DMA map */

/* Host vaddr for [iova, iova+len) if it lies inside one mapping, else NULL:
 * a device behind an IOMMU can reach nothing else. */
static void *sim_xlate(struct sim *s, uint64_t iova, uint64_t len)
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

static int sim_dma_map(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t *iova)
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

static int sim_dma_unmap(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t iova)
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
typedef int (*sim_seg_fn)(void *ctx, uint8_t *p, size_t len, size_t off);

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

struct sim_copy {
	uint8_t *buf;
	bool to_host;
};

static int sim_seg_copy(void *ctx, uint8_t *p, size_t len, size_t off)
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
static uint16_t sim_xfer(struct sim *s, const struct nvme_sqe *c, size_t len, sim_seg_fn fn, void *ctx)
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

static inline bool sim_cq_full(const struct sim_cq *cq, unsigned need)
{
	unsigned used = (unsigned)(cq->tail - cq->head + cq->size) % cq->size;
	return used + need > (unsigned)cq->size - 1u;
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

static void sim_irq(struct sim *s, struct sim_cq *cq)
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

static bool sim_take(_Atomic unsigned *n)
{
	unsigned v = atomic_load_explicit(n, memory_order_relaxed);

	while (v) {
		if (atomic_compare_exchange_weak(n, &v, v - 1))
			return true;
	}
	return false;
}

/* Complete a command of sq: faults first, then the normal post. */
static void sim_complete(struct sim *s, uint16_t sqid, struct sim_sq *sq, uint16_t cid, uint16_t status,
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

/* ------------------------------------------------------------ admin commands */

static void sim_pad(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

static uint16_t sim_to_host(struct sim *s, const struct nvme_sqe *c, const void *data, size_t len)
{
	struct sim_copy cp = {.buf = (uint8_t *)data, .to_host = true};

	return sim_xfer(s, c, len, sim_seg_copy, &cp);
}

static uint16_t sim_identify(struct sim *s, const struct nvme_sqe *c)
{
	uint8_t cns = c->cdw10 & 0xff;
	union {
		struct nvme_id_ctrl ctrl;
		struct nvme_id_ns ns;
		uint32_t list[1024];
	} *buf = calloc(1, sizeof(*buf));
	uint16_t st = 0;

	if (!buf)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	switch (cns) {
	case NVME_ID_CNS_CTRL: {
		struct nvme_id_ctrl *id = &buf->ctrl;
		char sn[32];
		id->vid = 0x1de5; /* any: the engine does not depend on it */
		id->ssvid = id->vid;
		snprintf(sn, sizeof(sn), "SIM-%s", s->o.name ? s->o.name : "0");
		sim_pad(id->sn, sizeof(id->sn), sn);
		sim_pad(id->mn, sizeof(id->mn), "nvmefs software controller");
		sim_pad(id->fr, sizeof(id->fr), NVMEFS_VERSION);
		id->rab = 0;
		id->mdts = (uint8_t)s->o.mdts;
		id->cntlid = 1;
		id->ver = s->vs;
		id->oacs = 0;
		id->acl = 3;
		id->aerl = SIM_MAX_AER - 1;
		id->lpa = 0;
		id->elpe = SIM_ERRLOG - 1;
		id->wctemp = 343;
		id->cctemp = 373;
		id->sqes = 0x66;
		id->cqes = 0x44;
		id->maxcmd = 0;
		id->nn = s->o.nr_ns;
		id->oncs = NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES;
		/* bits 2:1 = 11b: Flush with NSID FFFFFFFFh applies to all */
		id->vwc = s->o.vwc ? (NVME_VWC_PRESENT | 0x6) : 0;
		id->sgls = 0; /* SGL data transfer not implemented: opts.sgl is accepted but not advertised */
		snprintf(id->subnqn, sizeof(id->subnqn), "nqn.2026-12.io.nvmefs:sim:%s",
			 s->o.name ? s->o.name : "0");
		break;
	}
	case NVME_ID_CNS_NS: {
		if (c->nsid == 0 || c->nsid > s->o.nr_ns) {
			st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
			break;
		}
		struct sim_ns *ns = &s->ns[c->nsid - 1];
		struct nvme_id_ns *id = &buf->ns;
		id->nsze = id->ncap = id->nuse = ns->nlba;
		id->nlbaf = 0;
		id->flbas = 0;
		id->lbaf[0].lbads = (uint8_t)ns->lba_shift;
		id->dlfeat = 0x1; /* deallocated blocks read as zeroes */
		id->eui64[0] = 0x02;
		id->eui64[7] = (uint8_t)c->nsid;
		break;
	}
	case NVME_ID_CNS_CTRL_NVM: {
		struct nvme_id_ctrl_nvm *id = (struct nvme_id_ctrl_nvm *)buf;
		id->wzsl = (uint8_t)s->o.wzsl;
		id->dmrl = (uint8_t)s->o.dmrl;
		id->dmrsl = s->o.dmrsl;
		break;
	}
	case NVME_ID_CNS_NS_ACTIVE_LIST: {
		unsigned k = 0;
		for (unsigned i = 1; i <= s->o.nr_ns; i++)
			if (i > c->nsid)
				buf->list[k++] = i;
		break;
	}
	default:
		st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	}
	if (s->o.identify_hook)
		st = s->o.identify_hook(s->o.hook_arg, c, buf, st);
	if (!st)
		st = sim_to_host(s, c, buf, 4096);
	free(buf);
	return st;
}

static uint16_t sim_features(struct sim *s, const struct nvme_sqe *c, bool set, uint32_t *dw0)
{
	uint8_t fid = c->cdw10 & 0xff;

	switch (fid) {
	case NVME_FEAT_NUM_QUEUES:
		if (set) {
			unsigned nsq = (c->cdw11 & 0xffff) + 1u, ncq = (c->cdw11 >> 16) + 1u;
			if ((c->cdw11 & 0xffff) == 0xffff || (c->cdw11 >> 16) == 0xffff)
				return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
			unsigned want = nsq > ncq ? nsq : ncq;
			s->nr_queues_granted = (uint16_t)(want < s->o.max_queues ? want : s->o.max_queues);
		}
		{
			unsigned g = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;
			*dw0 = (g - 1) | ((g - 1) << 16);
		}
		return 0;
	case NVME_FEAT_VOLATILE_WC:
		if (!s->o.vwc)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		if (set) {
			/* disabled, a completed write is durable: so is what the cache held */
			if (s->wc_enabled && !(c->cdw11 & 1))
				sim_flush_all(s);
			s->wc_enabled = c->cdw11 & 1;
		}
		*dw0 = s->wc_enabled;
		return 0;
	case NVME_FEAT_IRQ_COALESCE:
		if (set)
			s->irq_coalesce = c->cdw11 & 0xffff;
		*dw0 = s->irq_coalesce;
		return 0;
	case NVME_FEAT_ARBITRATION:
	case NVME_FEAT_POWER_MGMT:
	case NVME_FEAT_ASYNC_EVENT:
		*dw0 = 0;
		return 0;
	default:
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	}
}

static void sim_u128(uint8_t *dst, uint64_t v)
{
	memset(dst, 0, 16);
	memcpy(dst, &v, sizeof(v));
}

static uint16_t sim_get_log(struct sim *s, const struct nvme_sqe *c)
{
	uint8_t lid = c->cdw10 & 0xff;
	size_t len = ((((size_t)(c->cdw11 & 0xffff)) << 16 | (c->cdw10 >> 16)) + 1) * 4;
	uint8_t *buf;
	size_t have;
	uint16_t st;

	if (len > 1u << 20)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	buf = calloc(1, len < 4096 ? 4096 : len);
	if (!buf)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	pthread_mutex_lock(&s->lock);
	switch (lid) {
	case NVME_LOG_ERROR: {
		/* newest first, as the spec orders them */
		unsigned n = s->error_count < SIM_ERRLOG ? (unsigned)s->error_count : SIM_ERRLOG;
		for (unsigned i = 0; i < n && (i + 1) * 64 <= len; i++)
			memcpy(buf + i * 64, &s->errlog[(s->error_count - 1 - i) % SIM_ERRLOG], 64);
		have = len;
		break;
	}
	case NVME_LOG_SMART: {
		struct nvme_smart_log sl = {0};
		sl.temperature[0] = (uint8_t)(313 & 0xff);
		sl.temperature[1] = (uint8_t)(313 >> 8);
		sl.avail_spare = 100;
		sl.spare_thresh = 10;
		sim_u128(sl.data_units_read, s->units_read / 1000);
		sim_u128(sl.data_units_written, s->units_written / 1000);
		sim_u128(sl.host_reads, s->host_reads);
		sim_u128(sl.host_writes, s->host_writes);
		sim_u128(sl.power_cycles, 1);
		sim_u128(sl.media_errors, s->media_errors);
		sim_u128(sl.num_err_log_entries, s->error_count);
		memcpy(buf, &sl, sizeof(sl) < len ? sizeof(sl) : len);
		have = len;
		break;
	}
	case NVME_LOG_FW_SLOT:
		buf[0] = 1;
		memcpy(buf + 8, NVMEFS_VERSION "        ", 8);
		have = len;
		break;
	default:
		pthread_mutex_unlock(&s->lock);
		free(buf);
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE);
	}
	pthread_mutex_unlock(&s->lock);
	st = sim_to_host(s, c, buf, have);
	free(buf);
	return st;
}

static uint16_t sim_create_cq(struct sim *s, const struct nvme_sqe *c)
{
	uint16_t qid = c->cdw10 & 0xffff, qsize = (uint16_t)((c->cdw10 >> 16) + 1);
	uint16_t iv = c->cdw11 >> 16;
	unsigned granted = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;

	if (qid == 0 || qid > granted || s->cq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if ((c->cdw10 >> 16) == 0 || (c->cdw10 >> 16) > NVME_CAP_MQES(s->cap))
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
	if (!(c->cdw11 & NVME_QUEUE_PC)) /* CAP.CQR: contiguous queues required */
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	if ((c->cdw11 & NVME_CQ_IEN) && iv >= s->o.nr_vectors)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_VECTOR);
	if (c->prp1 & (SIM_PAGE - 1))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
	void *ring = sim_xlate(s, c->prp1, (uint64_t)qsize * sizeof(struct nvme_cqe));
	if (!ring)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	struct sim_cq *cq = &s->cq[qid];
	memset(cq, 0, sizeof(*cq));
	cq->ring = ring;
	cq->size = qsize;
	cq->vector = iv;
	cq->ien = c->cdw11 & NVME_CQ_IEN;
	cq->phase = 1;
	sim_db_zero(s, nvme_cq_hdbl_off(qid, NVME_CAP_DSTRD(s->cap)));
	atomic_thread_fence(memory_order_release);
	cq->valid = true;
	return 0;
}

static uint16_t sim_create_sq(struct sim *s, const struct nvme_sqe *c)
{
	uint16_t qid = c->cdw10 & 0xffff, qsize = (uint16_t)((c->cdw10 >> 16) + 1);
	uint16_t cqid = c->cdw11 >> 16;
	unsigned granted = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;

	if (qid == 0 || qid > granted || s->sq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if ((c->cdw10 >> 16) == 0 || (c->cdw10 >> 16) > NVME_CAP_MQES(s->cap))
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
	if (cqid == 0 || cqid >= SIM_NQ || !s->cq[cqid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID);
	if (!(c->cdw11 & NVME_QUEUE_PC))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	if (c->prp1 & (SIM_PAGE - 1))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
	void *ring = sim_xlate(s, c->prp1, (uint64_t)qsize * sizeof(struct nvme_sqe));
	if (!ring)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	struct sim_sq *sq = &s->sq[qid];
	memset(sq, 0, sizeof(*sq));
	sq->ring = ring;
	sq->size = qsize;
	sq->cqid = cqid;
	s->cq[cqid].nr_sqs++;
	sim_db_zero(s, nvme_sq_tdbl_off(qid, NVME_CAP_DSTRD(s->cap)));
	atomic_thread_fence(memory_order_release);
	sq->valid = true;
	return 0;
}

static uint16_t sim_delete_sq(struct sim *s, uint16_t qid)
{
	if (qid == 0 || qid >= SIM_NQ || !s->sq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	s->sq[qid].valid = false;
	s->cq[s->sq[qid].cqid].nr_sqs--;
	sim_add_q(&s->retired, &s->sq[qid].st);
	memset(&s->sq[qid].st, 0, sizeof(s->sq[qid].st));
	return 0;
}

static uint16_t sim_delete_cq(struct sim *s, uint16_t qid)
{
	if (qid == 0 || qid >= SIM_NQ || !s->cq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if (s->cq[qid].nr_sqs)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_QUEUE_DELETION);
	s->cq[qid].valid = false;
	sim_add_q(&s->retired, &s->cq[qid].st);
	memset(&s->cq[qid].st, 0, sizeof(s->cq[qid].st));
	return 0;
}

/* Report a pending event on a held Async Event Request, if any. */
static void sim_aer_flush(struct sim *s)
{
	struct sim_sq *sq = &s->sq[0];

	if (!s->pending_event || !s->nr_aer || !s->cq[0].valid || sim_cq_full(&s->cq[0], 1))
		return;
	sim_complete(s, 0, sq, s->aer_cid[--s->nr_aer], 0, s->pending_event, false);
	s->pending_event = 0;
	sim_irq(s, &s->cq[0]);
}

/* Returns true when the command completes now (false: held, as AER). */
static bool sim_admin(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, uint16_t *status,
		      uint32_t *dw0)
{
	SIM_INC(sq->st.admin_cmds, 1);
	*dw0 = 0;
	switch (c->opc) {
	case NVME_ADM_IDENTIFY:
		*status = sim_identify(s, c);
		break;
	case NVME_ADM_SET_FEATURES:
		*status = sim_features(s, c, true, dw0);
		break;
	case NVME_ADM_GET_FEATURES:
		*status = sim_features(s, c, false, dw0);
		break;
	case NVME_ADM_CREATE_CQ:
		*status = sim_create_cq(s, c);
		break;
	case NVME_ADM_CREATE_SQ:
		*status = sim_create_sq(s, c);
		break;
	case NVME_ADM_DELETE_SQ:
		*status = sim_delete_sq(s, c->cdw10 & 0xffff);
		break;
	case NVME_ADM_DELETE_CQ:
		*status = sim_delete_cq(s, c->cdw10 & 0xffff);
		break;
	case NVME_ADM_GET_LOG_PAGE:
		*status = sim_get_log(s, c);
		break;
	case NVME_ADM_ABORT:
		*status = 0;
		*dw0 = sim_abort(s, (uint16_t)(c->cdw10 & 0xffff), (uint16_t)(c->cdw10 >> 16));
		break;
	case NVME_ADM_ASYNC_EVENT:
		if (s->nr_aer >= SIM_MAX_AER) {
			*status = NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_ASYNC_LIMIT);
			break;
		}
		s->aer_cid[s->nr_aer++] = c->cid;
		return false;
	default:
		*status = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
	}
	if (s->o.admin_hook)
		*status = s->o.admin_hook(s->o.hook_arg, c, *status, dw0);
	return true;
}

/* --------------------------------------------------------------- I/O commands */

/* Writes to ns go through the volatile write cache model: the namespace has
 * one (RAM or FILE, opts.vwc) and the host left it enabled (WCE). */
static inline bool sim_cached(const struct sim *s, const struct sim_ns *ns)
{
	return ns->wc.cap && s->wc_enabled;
}

static uint16_t sim_rw(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, struct sim_ns *ns,
		       bool write)
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
	/* a FUA write is durable when it completes: nothing to keep for it (its
	 * blocks' older entries go when it succeeds) */
	if (cached && !fua && sim_wc_dirty(&ns->wc, slba, nlb))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	switch (ns->backing) {
	case SIM_BACKING_NULL:
		st = write ? sim_xfer(s, c, len, sim_seg_count, &(unsigned){0})
			   : sim_xfer(s, c, len, sim_seg_zero, NULL);
		break;
	case SIM_BACKING_RAM: {
		struct sim_copy cp = {.buf = ns->mem + (slba << ns->lba_shift), .to_host = !write};
		st = sim_xfer(s, c, len, sim_seg_copy, &cp);
		break;
	}
	case SIM_BACKING_FILE: {
		struct sim_fileio f = {.fd = ns->fd, .base = (off_t)(slba << ns->lba_shift), .write = write};
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
	if (!st) {
		if (fua) {
			SIM_INC(sq->st.fua_writes, 1);
			if (cached)
				sim_wc_durable(&ns->wc, slba, nlb);
		}
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

/* Zero (deallocate) blocks; deallocated blocks read as zeroes (DLFEAT).  It
 * goes through the volatile write cache as a write does; fua: durable when
 * done (Write Zeroes with FUA). */
static uint16_t sim_zero(struct sim *s, struct sim_ns *ns, uint64_t slba, uint64_t nlb, bool fua)
{
	bool cached = sim_cached(s, ns);

	if (slba >= ns->nlba || nlb > ns->nlba - slba)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
	if (cached && !fua && sim_wc_dirty(&ns->wc, slba, nlb))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	off_t off = (off_t)(slba << ns->lba_shift);
	size_t len = (size_t)nlb << ns->lba_shift;
	switch (ns->backing) {
	case SIM_BACKING_NULL:
		break;
	case SIM_BACKING_RAM: {
		/* whole pages go back to the kernel (and read as zero); edges memset */
		uint8_t *p = ns->mem + off, *e = p + len;
		uint8_t *a = (uint8_t *)(((uintptr_t)p + SIM_PAGE - 1) & ~(uintptr_t)(SIM_PAGE - 1));
		uint8_t *b = (uint8_t *)((uintptr_t)e & ~(uintptr_t)(SIM_PAGE - 1));
		if (b > a + SIM_PAGE * 16) {
			memset(p, 0, (size_t)(a - p));
			if (madvise(a, (size_t)(b - a), MADV_DONTNEED))
				memset(a, 0, (size_t)(b - a));
			memset(b, 0, (size_t)(e - b));
		} else {
			memset(p, 0, len);
		}
		break;
	}
	case SIM_BACKING_FILE:
		if (fallocate(ns->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)len)) {
			static const uint8_t zero[SIM_PAGE];
			for (size_t done = 0; done < len;) {
				size_t n = len - done < SIM_PAGE ? len - done : SIM_PAGE;
				if (pwrite(ns->fd, zero, n, off + (off_t)done) != (ssize_t)n)
					return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
				done += n;
			}
		}
		if (fua && fdatasync(ns->fd))
			return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		break;
	}
	if (fua && cached)
		sim_wc_durable(&ns->wc, slba, nlb);
	return 0;
}

static uint16_t sim_dsm(struct sim *s, const struct nvme_sqe *c, struct sim_ns *ns)
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
		if ((st = sim_zero(s, ns, r[i].slba, r[i].nlb, false)))
			return st;
	return 0;
}

/* Flush: the host's page cache of a file goes first (on failure nothing is
 * durable), then the model's cache. */
static uint16_t sim_flush_ns(struct sim_ns *ns)
{
	if (ns->backing == SIM_BACKING_FILE && fdatasync(ns->fd))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	sim_wc_flush(&ns->wc);
	return 0;
}

static uint16_t sim_io(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c)
{
	if (c->opc == NVME_CMD_FLUSH && c->nsid == 0xffffffffu) {
		SIM_INC(sq->st.flushes, 1);
		for (unsigned i = 0; i < s->o.nr_ns; i++) {
			uint16_t st = sim_flush_ns(&s->ns[i]);
			if (st)
				return st;
		}
		return 0;
	}
	if (c->nsid == 0 || c->nsid > s->o.nr_ns)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
	struct sim_ns *ns = &s->ns[c->nsid - 1];
	switch (c->opc) {
	case NVME_CMD_READ:
		return sim_rw(s, sq, c, ns, false);
	case NVME_CMD_WRITE:
		return sim_rw(s, sq, c, ns, true);
	case NVME_CMD_FLUSH:
		SIM_INC(sq->st.flushes, 1);
		return sim_flush_ns(ns);
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
		uint16_t st = sim_zero(s, ns, slba, (c->cdw12 & 0xffff) + 1u, fua);
		if (!st && fua)
			SIM_INC(sq->st.fua_writes, 1);
		return st;
	}
	case NVME_CMD_DSM:
		SIM_INC(sq->st.dsm, 1);
		return sim_dsm(s, c, ns);
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
static uint32_t sim_abort(struct sim *s, uint16_t sqid, uint16_t cid)
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
	s->pending_event = 0x00u | ((uint32_t)info << 8) | ((uint32_t)NVME_LOG_ERROR << 16);
}

static bool sim_running(struct sim *s)
{
	/* without bus mastering the function can neither fetch a command nor
	 * post a completion: both are DMA */
	return !atomic_load_explicit(&s->gone, memory_order_relaxed) &&
	       atomic_load_explicit(&s->bme, memory_order_relaxed) && SIM_GET(s->enabled) &&
	       (SIM_GET(s->csts) & NVME_CSTS_RDY) &&
	       !atomic_load_explicit(&s->cfs, memory_order_relaxed) &&
	       !atomic_load_explicit(&s->f_hang, memory_order_relaxed);
}

/* Fetch and execute everything between head and the tail doorbell, stopping
 * while the CQ is full.  Returns the number of commands executed. */
static unsigned sim_process_sq(struct sim *s, uint16_t qid)
{
	struct sim_sq *sq = &s->sq[qid];
	unsigned n = 0;

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
	while (sq->head != sq->tail && !sim_cq_full(cq, 1)) {
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
		} else {
			status = sim_io(s, sq, &c);
		}
		if (status) {
			SIM_INC(sq->st.invalid_cmds, 1);
			if ((status & 0x7ff) == NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR))
				SIM_INC(sq->st.dma_errors, 1);
			if (NVME_STATUS_SCT(status) == NVME_SCT_MEDIA)
				s->media_errors++;
			sim_errlog_add(s, qid, c.cid, status, (uint64_t)c.cdw11 << 32 | c.cdw10, c.nsid);
		}
		sim_complete(s, qid, sq, c.cid, status, dw0, io);
	}
	if (n)
		sim_irq(s, cq);
	if (qid == 0)
		sim_aer_flush(s);
	return n;
}

/* The doorbell at BAR0 offset off was written. */
static void sim_doorbell(struct sim *s, uint32_t off)
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
		sim_process_sq(s, qid);
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
	/* room in the CQ may unblock its stalled SQs */
	for (uint16_t q = 0; q < SIM_NQ; q++)
		if (s->sq[q].valid && s->sq[q].cqid == qid && s->sq[q].head != s->sq[q].tail)
			sim_process_sq(s, q);
}

/* Inline mode: the executing thread runs the marked doorbells (its own
 * and those other threads marked meanwhile), then gives up its c claims;
 * claims that arrived since mean more marks: run again. */
static void sim_exec_run(struct sim *s, unsigned c)
{
	for (;;) {
		if (atomic_load_explicit(&s->any_deferred, memory_order_relaxed))
			sim_post_deferred(s);
		for (unsigned w = 0; w < sizeof(s->db_pend) / sizeof(s->db_pend[0]); w++) {
			uint64_t bits =
			    atomic_exchange_explicit(&s->db_pend[w], 0, memory_order_acquire);
			while (bits) {
				unsigned b = (unsigned)__builtin_ctzll(bits);
				bits &= bits - 1;
				sim_doorbell(s, NVME_REG_DBS + (w * 64 + b) * s->dstrd_bytes);
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

	while (!atomic_compare_exchange_weak_explicit(&s->exec, &zero, 1, memory_order_acquire,
	                                              memory_order_relaxed)) {
		zero = 0;
		sched_yield();
	}
}

/* ... and release it, running the doorbells marked meanwhile. */
static void sim_exec_unlock(struct sim *s)
{
	sim_exec_run(s, 1);
}

static void sim_qlock(struct sim *s)
{
	if (s->o.threaded)
		pthread_mutex_lock(&s->qlock);
	else
		sim_exec_lock(s);
}

static void sim_qunlock(struct sim *s)
{
	if (s->o.threaded)
		pthread_mutex_unlock(&s->qlock);
	else
		sim_exec_unlock(s);
}

static void sim_db_notify(struct nvme_bus *bus, uint32_t off, uint32_t val)
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
	atomic_fetch_or_explicit(&s->db_pend[idx / 64], 1ull << (idx % 64), memory_order_release);
	if (atomic_fetch_add_explicit(&s->exec, 1, memory_order_acq_rel) == 0)
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
		work += sim_process_sq(s, q);
	}
	work += (unsigned)sim_post_deferred(s);
	return work;
}

static void *sim_thread(void *arg)
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

/* ----------------------------------------------------------------- registers */

static void sim_reset_queues(struct sim *s)
{
	for (unsigned q = 0; q < SIM_NQ; q++) {
		sim_add_q(&s->retired, &s->sq[q].st);
		sim_add_q(&s->retired, &s->cq[q].st);
	}
	memset(s->sq, 0, sizeof(s->sq));
	memset(s->cq, 0, sizeof(s->cq));
	s->nr_aer = 0;
	s->pending_event = 0;
	s->nr_queues_granted = 0;
	/* a feature without a saved value is back at its default; a cache
	 * enabled again is empty (disabling it made everything durable) */
	s->wc_enabled = s->o.vwc;
	s->nr_deferred = 0; /* callers hold s->lock */
	atomic_store(&s->any_deferred, 0);
	/* a reset ends transient misbehaviour: completions that were to be
	 * lost, doubled or preceded by a bogus one are not carried over */
	atomic_store(&s->f_lose_n, 0);
	atomic_store(&s->f_bogus_n, 0);
	atomic_store(&s->f_dup_n, 0);
	atomic_store(&s->f_hang, false); /* a hung controller comes back from a reset */
	s->nr_stalled = 0; /* stalled commands are dropped, never executed */
	/* doorbell registers back to 0; the host may store into them at the
	 * same time (its reactors' last doorbells): atomics on both sides */
	for (size_t off = NVME_REG_DBS; off + 4 <= s->bus.bar0_len; off += 4)
		__atomic_store_n((uint32_t *)(s->bus.bar0 + off), 0, __ATOMIC_RELAXED);
}

/* CC.EN 0 -> 1: check the admin queue set-up and CC fields. */
static bool sim_enable(struct sim *s)
{
	uint32_t asqs = (s->aqa & 0xfff) + 1, acqs = ((s->aqa >> 16) & 0xfff) + 1;
	uint32_t mps = (s->cc >> NVME_CC_MPS_SHIFT) & 0xf, css = (s->cc >> NVME_CC_CSS_SHIFT) & 0x7;

	if (asqs < 2 || acqs < 2 || (s->asq | s->acq) & (SIM_PAGE - 1) || mps != 0 || css != 0)
		return false;
	void *sq = sim_xlate(s, s->asq, asqs * 64ull), *cq = sim_xlate(s, s->acq, acqs * 16ull);
	if (!sq || !cq)
		return false;
	sim_reset_queues(s);
	s->sq[0] = (struct sim_sq){.valid = true, .size = (uint16_t)asqs, .cqid = 0, .ring = sq};
	s->cq[0] = (struct sim_cq){.valid = true, .size = (uint16_t)acqs, .phase = 1, .ring = cq,
				   .ien = true, .vector = 0, .nr_sqs = 1};
	return true;
}

static void sim_flush_all(struct sim *s)
{
	for (unsigned i = 0; i < s->o.nr_ns; i++)
		sim_flush_ns(&s->ns[i]);
}

static void sim_write_cc(struct sim *s, uint32_t val)
{
	uint32_t old = s->cc;

	if (atomic_load(&s->f_stuck))
		return; /* wedged: neither a disable nor a shutdown is obeyed */

	s->cc = val;
	if ((val & NVME_CC_SHN_MASK) && !(old & NVME_CC_SHN_MASK)) {
		/* orderly shutdown: make everything durable, then report complete */
		sim_flush_all(s);
		SIM_SET(s->csts, (s->csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT);
	}
	if ((val & NVME_CC_EN) && !(old & NVME_CC_EN)) {
		if (atomic_load(&s->cfs))
			return;
		if (!sim_enable(s)) {
			SIM_SET(s->csts,
			        s->csts | (NVME_CSTS_CFS)); /* a bad admin queue set-up is fatal */
			return;
		}
		SIM_SET(s->enabled, true);
		s->ready_due_ns = sim_now_ns() + s->o.ready_delay_ms * 1000000ull;
		if (!s->ready_due_ns)
			s->ready_due_ns = 1;
	} else if (!(val & NVME_CC_EN) && (old & NVME_CC_EN)) {
		s->resets++;
		SIM_SET(s->enabled, false);
		s->ready_due_ns = 0;
		sim_reset_queues(s);
		atomic_store(&s->cfs, false);
		SIM_SET(s->csts,
		        s->csts & (~(NVME_CSTS_RDY | NVME_CSTS_CFS | NVME_CSTS_SHST_MASK)));
	}
}

static uint32_t sim_csts(struct sim *s)
{
	if (s->ready_due_ns && sim_now_ns() >= s->ready_due_ns && !atomic_load(&s->f_never_ready)) {
		SIM_SET(s->csts, s->csts | (NVME_CSTS_RDY));
		s->ready_due_ns = 0;
	}
	return s->csts | (atomic_load(&s->cfs) ? NVME_CSTS_CFS : 0);
}

static uint32_t sim_read32(struct nvme_bus *bus, uint32_t off)
{
	struct sim *s = (struct sim *)bus;
	uint32_t v;

	if (atomic_load(&s->gone))
		return 0xffffffffu; /* a PCIe read to a function that is gone */
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case NVME_REG_CAP: v = (uint32_t)s->cap; break;
	case NVME_REG_CAP + 4: v = (uint32_t)(s->cap >> 32); break;
	case NVME_REG_VS: v = s->vs; break;
	case NVME_REG_INTMS:
	case NVME_REG_INTMC: v = s->intms; break;
	case NVME_REG_CC: v = s->cc; break;
	case NVME_REG_CSTS: v = sim_csts(s); break;
	case NVME_REG_AQA: v = s->aqa; break;
	case NVME_REG_ASQ: v = (uint32_t)s->asq; break;
	case NVME_REG_ASQ + 4: v = (uint32_t)(s->asq >> 32); break;
	case NVME_REG_ACQ: v = (uint32_t)s->acq; break;
	case NVME_REG_ACQ + 4: v = (uint32_t)(s->acq >> 32); break;
	default:
		/* doorbells are write-only: reads return 0 */
		v = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return v;
}

static uint64_t sim_read64(struct nvme_bus *bus, uint32_t off)
{
	return sim_read32(bus, off) | (uint64_t)sim_read32(bus, off + 4) << 32;
}

static void sim_write32(struct nvme_bus *bus, uint32_t off, uint32_t val)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return;
	if (off >= NVME_REG_DBS && (uint64_t)off + 4 <= bus->bar0_len) {
		nvme_bus_doorbell(bus, (volatile uint32_t *)(bus->bar0 + off), val);
		return;
	}
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case NVME_REG_INTMS: s->intms |= val; break;
	case NVME_REG_INTMC: s->intms &= ~val; break;
	case NVME_REG_CC: sim_write_cc(s, val); break;
	case NVME_REG_AQA: s->aqa = val & 0x0fff0fff; break;
	case NVME_REG_ASQ: s->asq = (s->asq & ~0xffffffffull) | val; break;
	case NVME_REG_ASQ + 4: s->asq = (s->asq & 0xffffffffull) | (uint64_t)val << 32; break;
	case NVME_REG_ACQ: s->acq = (s->acq & ~0xffffffffull) | val; break;
	case NVME_REG_ACQ + 4: s->acq = (s->acq & 0xffffffffull) | (uint64_t)val << 32; break;
	case NVME_REG_NSSR:
		if (val == 0x4e564d65) { /* "NVMe": subsystem reset */
			SIM_SET(s->enabled, false);
			sim_reset_queues(s);
			s->cc = 0;
			SIM_SET(s->csts, NVME_CSTS_NSSRO);
		}
		break;
	default:
		break; /* read-only or reserved: ignored, as hardware does */
	}
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
}

static void sim_write64(struct nvme_bus *bus, uint32_t off, uint64_t val)
{
	sim_write32(bus, off, (uint32_t)val);
	sim_write32(bus, off + 4, (uint32_t)(val >> 32));
}

static int sim_irq_set(struct nvme_bus *bus, unsigned n, const int *efds)
{
	struct sim *s = (struct sim *)bus;

	if (n > s->o.nr_vectors || n > sizeof(s->efds) / sizeof(s->efds[0]))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (sim_take(&s->f_irq_fail_n)) {
		for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
			SIM_SET(s->efds[i], -1);
		SIM_SET(s->nr_efds, 0);
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
		SIM_SET(s->efds[i], i < n ? efds[i] : -1);
	SIM_SET(s->nr_efds, n);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Registers and queues at their reset values: disabled, no queues, no CFS.
 * Callers hold the queues and s->lock. */
static void sim_regs_reset(struct sim *s)
{
	SIM_SET(s->enabled, false);
	s->ready_due_ns = 0;
	sim_reset_queues(s);
	s->cc = 0;
	SIM_SET(s->csts, 0);
	s->aqa = 0;
	s->asq = s->acq = 0;
	atomic_store(&s->cfs, false);
}

/* A function level reset: what CC.EN 1 -> 0 resets, and CC, AQA, ASQ, ACQ. */
static int sim_reset(struct nvme_bus *bus)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return -ENODEV;
	if (atomic_load(&s->f_stuck))
		return -EIO; /* the reset does not take: the function stays as it is */
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	sim_regs_reset(s);
	s->resets++;
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	return 0;
}

static void sim_close(struct nvme_bus *bus)
{
	sim_destroy((struct sim *)bus);
}

static int sim_bus_master(struct nvme_bus *bus, bool on)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return -ENODEV;
	/* the commands being executed finish first: off, nothing more moves */
	if (!on)
		sim_qlock(s);
	atomic_store(&s->bme, on);
	if (!on)
		sim_qunlock(s);
	else if (s->o.threaded)
		atomic_store(&s->kick, 1);
	return 0;
}

static const struct nvme_bus_ops sim_ops = {
	.read32 = sim_read32,
	.read64 = sim_read64,
	.write32 = sim_write32,
	.write64 = sim_write64,
	.dma_map = sim_dma_map,
	.dma_unmap = sim_dma_unmap,
	.irq_set = sim_irq_set,
	.reset = sim_reset,
	.bus_master = sim_bus_master,
	.close = sim_close,
};

/* -------------------------------------------------------------- life cycle */

/* The daemon runs as root: a link or a file planted at the backing path
 * must not make it grow and expose someone else's file, so the path is
 * opened by safepath_open_file's rules (safepath.h). */
static int sim_open_backing(const char *path)
{
	char msg[PATH_MAX + 160];
	bool created;
	int fd = safepath_open_file(path, 0600, &created, msg, sizeof(msg));

	if (fd < 0)
		log_err("sim: backing file %s: %s", path, msg);
	else if (created)
		log_info("sim: created backing file %s", path);
	return fd;
}

static int sim_ns_open(struct sim_ns *ns, const struct sim_ns_opts *o)
{
	ns->nlba = o->nlba;
	ns->lba_size = o->lba_size;
	ns->lba_shift = o->lba_size == 512 ? 9 : 12;
	ns->backing = o->backing;
	ns->fd = -1;
	size_t len = (size_t)(o->nlba << ns->lba_shift);
	switch (o->backing) {
	case SIM_BACKING_NULL:
		return 0;
	case SIM_BACKING_RAM:
		/* lazily zero: untouched pages cost nothing */
		ns->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		if (ns->mem == MAP_FAILED) {
			ns->mem = NULL;
			return -errno;
		}
		ns->mem_len = len;
		return 0;
	case SIM_BACKING_FILE: {
		struct stat st;
		if (!o->path || !*o->path)
			return -EINVAL;
		snprintf(ns->path, sizeof(ns->path), "%s", o->path);
		ns->fd = sim_open_backing(o->path);
		if (ns->fd < 0)
			return ns->fd;
		if (fstat(ns->fd, &st) || ((uint64_t)st.st_size < len && ftruncate(ns->fd, (off_t)len))) {
			int e = -errno;
			log_err("sim: cannot size backing file %s to %zu bytes: %s", o->path, len, strerror(-e));
			return e;
		}
		return 0;
	}
	}
	return -EINVAL;
}

static void sim_ns_close(struct sim_ns *ns)
{
	sim_wc_fini(&ns->wc); /* the media holds the newest data: as after a shutdown */
	if (ns->mem)
		munmap(ns->mem, ns->mem_len);
	if (ns->fd >= 0) {
		fdatasync(ns->fd);
		close(ns->fd);
	}
	ns->mem = NULL;
	ns->fd = -1;
}

int sim_create(const struct sim_opts *o, struct sim **out)
{
	struct sim *s;
	int rc = -EINVAL;

	if (!o || o->nr_ns < 1 || o->nr_ns > SIM_MAX_NS || o->dstrd > 15 || o->mdts > 15)
		return -EINVAL;
	for (unsigned i = 0; i < o->nr_ns; i++)
		if (!o->ns[i].nlba || (o->ns[i].lba_size != 512 && o->ns[i].lba_size != 4096))
			return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	snprintf(s->name, sizeof(s->name), "%s", o->name ? o->name : "sim");
	s->o.name = s->name;
	if (!s->o.max_queues || s->o.max_queues > SIM_MAX_QID)
		s->o.max_queues = s->o.max_queues ? SIM_MAX_QID : 64;
	if (!s->o.mqes || s->o.mqes > 4095)
		s->o.mqes = 4095;
	if (!s->o.nr_vectors)
		s->o.nr_vectors = 65;
	if (s->o.nr_vectors > 128)
		s->o.nr_vectors = 128;
	for (unsigned i = 0; i < 128; i++)
		SIM_SET(s->efds[i], -1);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->cond, NULL);
	atomic_store(&s->bme, true); /* as after the host's PCI set-up */
	for (unsigned i = 0; i < SIM_MAX_NS; i++) {
		s->ns[i].fd = -1;
		s->ns[i].wc.fd = -1;
	}
	s->wc_enabled = s->o.vwc;

	/* CAP: MQES, CQR=1, TO=15 (7.5 s; the engine waits up to that), DSTRD,
	 * CSS = NVM, MPSMIN = MPSMAX = 0 (4 KiB) */
	s->cap = (uint64_t)s->o.mqes | 1ull << 16 | 15ull << 24 | (uint64_t)s->o.dstrd << 32 |
		 (uint64_t)NVME_CAP_CSS_NVM << 37;
	if (o->cap)
		s->cap = o->cap;
	s->vs = o->vs ? o->vs : NVME_VS(1, 4, 0);
	s->dstrd_bytes = 4u << NVME_CAP_DSTRD(s->cap);
	s->next_iova = SIM_IOVA_BASE;
	s->bus.ops = &sim_ops;
	s->bus.db_notify = sim_db_notify;
	s->bus.nr_vectors = s->o.nr_vectors;
	s->bus.numa_node = -1;
	snprintf(s->bus.name, sizeof(s->bus.name), "sim:%s", s->name);
	/* BAR0: the doorbells of every queue, or opts.bar_len of it accessible
	 * and the rest of that span reserved, inaccessible */
	s->bar_span = NVME_REG_DBS + (size_t)2 * SIM_NQ * s->dstrd_bytes;
	s->bar_span = (s->bar_span + SIM_PAGE - 1) & ~(size_t)(SIM_PAGE - 1);
	s->bus.bar0_len = s->bar_span;
	if (o->bar_len)
		s->bus.bar0_len = (o->bar_len + SIM_PAGE - 1) & ~(size_t)(SIM_PAGE - 1);
	if (s->bus.bar0_len > s->bar_span)
		s->bar_span = s->bus.bar0_len;
	void *bar = mmap(NULL, s->bar_span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (bar == MAP_FAILED || mprotect(bar, s->bus.bar0_len, PROT_READ | PROT_WRITE)) {
		rc = -errno;
		if (bar != MAP_FAILED)
			munmap(bar, s->bar_span);
		goto fail;
	}
	s->bus.bar0 = bar; /* zero, as mmap gives it */
	for (unsigned i = 0; i < o->nr_ns; i++) {
		struct sim_ns *ns = &s->ns[i];

		if ((rc = sim_ns_open(ns, &o->ns[i])))
			goto fail;
		/* allocated now: the command path never allocates */
		if (s->o.vwc && ns->backing != SIM_BACKING_NULL &&
		    (rc = sim_wc_init(&ns->wc, ns->nlba, ns->lba_shift, s->o.wc_bytes, ns->mem, ns->fd)))
			goto fail;
	}
	if (s->o.threaded) {
		if ((rc = -pthread_create(&s->thread, NULL, sim_thread, s)))
			goto fail;
		s->thread_started = true;
		pthread_setname_np(s->thread, "nvmefs-sim");
	}
	*out = s;
	return 0;
fail:
	sim_destroy(s);
	return rc;
}

void sim_destroy(struct sim *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		atomic_store(&s->stop, true);
		pthread_mutex_lock(&s->lock);
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	for (unsigned i = 0; i < SIM_MAX_NS; i++)
		sim_ns_close(&s->ns[i]);
	free(s->deferred);
	if (s->bus.bar0)
		munmap((void *)s->bus.bar0, s->bar_span);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->qlock);
	free(s);
}

struct nvme_bus *sim_bus(struct sim *s)
{
	return &s->bus;
}

struct sim *sim_from_bus(struct nvme_bus *bus)
{
	return bus && bus->ops == &sim_ops ? (struct sim *)bus : NULL;
}

/* ---------------------------------------------------------- fault injection */

void sim_fault_fail_next(struct sim *s, unsigned n, uint16_t status)
{
	atomic_store(&s->f_fail_status, status);
	atomic_store(&s->f_fail_n, n);
}

void sim_fault_delay(struct sim *s, unsigned usec)
{
	atomic_store(&s->f_delay_us, usec);
}

void sim_fault_lose_next(struct sim *s, unsigned n)
{
	atomic_store(&s->f_lose_n, n);
}

void sim_fault_bogus_cid(struct sim *s, unsigned n)
{
	atomic_store(&s->f_bogus_n, n);
}

void sim_fault_duplicate(struct sim *s, unsigned n)
{
	atomic_store(&s->f_dup_n, n);
}

void sim_fault_cfs(struct sim *s)
{
	atomic_store(&s->cfs, true);
}

void sim_fault_hang(struct sim *s, bool hang)
{
	atomic_store(&s->f_hang, hang);
	if (!hang && s->o.threaded) {
		atomic_store(&s->kick, 1);
		pthread_mutex_lock(&s->lock);
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

void sim_fault_stall_next(struct sim *s, unsigned n)
{
	atomic_store(&s->f_stall_n, n);
}

void sim_fault_abort_ignore(struct sim *s, bool on)
{
	atomic_store(&s->f_abort_ignore, on);
}

int sim_fault_release_stalled(struct sim *s)
{
	int n = 0;

	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	struct sim_stalled st[SIM_MAX_STALLED];
	unsigned nr = s->nr_stalled;
	memcpy(st, s->stalled, nr * sizeof(st[0]));
	s->nr_stalled = 0;
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < nr; i++) {
		struct sim_sq *sq = &s->sq[st[i].sqid];
		if (!sq->valid || !sim_running(s))
			continue;
		uint16_t status = sim_io(s, sq, &st[i].sqe);
		sim_complete(s, st[i].sqid, sq, st[i].sqe.cid, status, 0, true);
		sim_irq(s, &s->cq[sq->cqid]);
		n++;
	}
	sim_qunlock(s);
	return n;
}

void sim_fault_irq_set(struct sim *s, unsigned n)
{
	atomic_store(&s->f_irq_fail_n, n);
}

int sim_vector_efd(struct sim *s, unsigned v)
{
	pthread_mutex_lock(&s->lock);
	int fd = v < SIM_GET(s->nr_efds) ? SIM_GET(s->efds[v]) : -1;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

/* What a device that stopped answering held back, for the log. */
struct sim_dropped {
	unsigned deferred, stalled, unfetched, aers;
};

/* The device went dark: completions waiting out a delay and stalled commands
 * will never complete, so they are dropped now (nothing is posted after
 * this).  Commands not fetched yet and held Async Event Requests stay until
 * a reset, but are counted.  Callers hold the queues and s->lock. */
static void sim_drop_held(struct sim *s, struct sim_dropped *d)
{
	uint32_t dstrd = NVME_CAP_DSTRD(s->cap);

	*d = (struct sim_dropped){.deferred = s->nr_deferred, .stalled = s->nr_stalled,
				  .aers = s->nr_aer};
	for (uint16_t q = 0; q < SIM_NQ; q++) {
		struct sim_sq *sq = &s->sq[q];
		uint32_t tail;

		if (!sq->valid)
			continue;
		tail = sim_db_read(s, nvme_sq_tdbl_off(q, dstrd));
		if (tail < sq->size)
			d->unfetched += (tail + sq->size - sq->head) % sq->size;
	}
	s->nr_deferred = 0;
	atomic_store(&s->any_deferred, 0);
	s->nr_stalled = 0;
}

/* Registers, queues, features and MSI-X wiring as at power-on.  Callers hold
 * the queues and s->lock. */
static void sim_cold_reset(struct sim *s)
{
	sim_regs_reset(s);
	s->intms = 0;
	s->irq_coalesce = 0;
	for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
		SIM_SET(s->efds[i], -1);
	SIM_SET(s->nr_efds, 0);
}

void sim_fault_remove(struct sim *s)
{
	struct sim_dropped d;

	/* first, so that nothing new starts; then wait for what runs */
	atomic_fetch_or(&s->gone, SIM_GONE_REMOVED);
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	sim_drop_held(s, &d);
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
}

int sim_fault_powerfail(struct sim *s, uint64_t seed)
{
	uint64_t lost = 0, kept = 0;
	struct sim_dropped d;
	int rc = 0, e;

	if (atomic_fetch_or(&s->gone, SIM_GONE_OFF) & SIM_GONE_OFF)
		return 0; /* off already: its cache was lost then */
	/* the commands being executed finish first: they ran before the cut */
	sim_qlock(s);
	for (unsigned i = 0; i < s->o.nr_ns; i++)
		if (s->ns[i].wc.cap &&
		    (e = sim_wc_powerfail(&s->ns[i].wc, seed, i + 1, &lost, &kept)) && !rc)
			rc = e;
	pthread_mutex_lock(&s->lock);
	sim_drop_held(s, &d);
	s->powerfails++;
	s->pf_lost += lost;
	s->pf_kept += kept;
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	log_warn("sim %s: power cut (seed %llu): %llu cached block%s lost, %llu kept; dropped "
		 "%u delayed completion%s, %u stalled command%s, %u command%s not fetched, "
		 "%u async event request%s",
		 s->name, (unsigned long long)seed, (unsigned long long)lost, lost == 1 ? "" : "s",
		 (unsigned long long)kept, d.deferred, d.deferred == 1 ? "" : "s", d.stalled,
		 d.stalled == 1 ? "" : "s", d.unfetched, d.unfetched == 1 ? "" : "s", d.aers,
		 d.aers == 1 ? "" : "s");
	if (rc)
		log_err("sim %s: power cut: restoring a backing file's durable data failed: %s",
			s->name, strerror(-rc));
	return rc;
}

int sim_power_on(struct sim *s)
{
	if (atomic_load(&s->gone) & SIM_GONE_OFF) {
		sim_qlock(s);
		pthread_mutex_lock(&s->lock);
		sim_cold_reset(s);
		atomic_fetch_and(&s->gone, ~SIM_GONE_OFF);
		pthread_mutex_unlock(&s->lock);
		sim_qunlock(s);
		log_info("sim %s: power on: registers at their reset values, only durable data",
			 s->name);
	}
	return atomic_load(&s->gone) & SIM_GONE_REMOVED ? -ENODEV : 0;
}

void sim_fault_clear(struct sim *s)
{
	atomic_store(&s->f_fail_n, 0);
	atomic_store(&s->f_delay_us, 0);
	atomic_store(&s->f_lose_n, 0);
	atomic_store(&s->f_bogus_n, 0);
	atomic_store(&s->f_dup_n, 0);
	atomic_store(&s->f_stall_n, 0);
	atomic_store(&s->f_abort_ignore, false);
	atomic_store(&s->f_never_ready, false);
	atomic_store(&s->f_irq_fail_n, 0);
	atomic_store(&s->f_admin_delay_us, 0);
	atomic_store(&s->f_stuck, false);
	sim_fault_hang(s, false);
	/* re-inserted, or power back: a live controller is left alone (its
	 * CFS, if any, is device state that only a reset clears) */
	if (atomic_load(&s->gone)) {
		sim_qlock(s);
		pthread_mutex_lock(&s->lock);
		sim_cold_reset(s);
		atomic_store(&s->gone, 0);
		pthread_mutex_unlock(&s->lock);
		sim_qunlock(s);
	}
}

void sim_fault_admin_delay(struct sim *s, unsigned usec)
{
	atomic_store(&s->f_admin_delay_us, usec);
}

void sim_fault_stuck(struct sim *s, bool on)
{
	atomic_store(&s->f_stuck, on);
}

bool sim_bus_master_on(struct sim *s)
{
	return atomic_load(&s->bme);
}

void sim_fault_never_ready(struct sim *s, bool on)
{
	atomic_store(&s->f_never_ready, on);
}

int sim_poll(struct sim *s)
{
	int n;

	if (s->o.threaded)
		return 0;
	sim_exec_lock(s);
	n = sim_post_deferred(s);
	for (uint16_t q = 0; q < SIM_NQ; q++)
		if (s->sq[q].valid)
			n += (int)sim_process_sq(s, q);
	sim_exec_unlock(s);
	return n;
}

static void sim_add_q(struct sim_qstats *t, const struct sim_qstats *q)
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
	st->stalled = s->nr_stalled;
	st->powerfails = s->powerfails;
	st->pf_blocks_lost = s->pf_lost;
	st->pf_blocks_kept = s->pf_kept;
	pthread_mutex_unlock(&s->lock);
}

/* qpair.c - one I/O queue pair: submission with deferred doorbells, budgeted
 * reaping, the CID-indexed tracker table, PRP lists, splitting, timeouts and
 * the qpair's part of controller recovery.
 *
 * THE BUFFER INVARIANT.  A tracker, its PRP list page and the caller's data
 * buffer are reused -- and the command completes to its caller, with
 * whatever result -- only when the device can no longer touch them: after
 * the command's CQE was reaped, or after the controller was disabled (CC.EN
 * = 0 and CSTS.RDY = 0), its function reset, or the device found gone.  A
 * timed-out command is never completed by its timeout: it gets an Abort,
 * and if that does not bring its CQE, a controller reset; until then it
 * stays in flight with its buffer.  Commands a reset took off the device are
 * resubmitted from their shadow SQE (up to io_retries times) or failed with
 * -EIO, both after the disable.
 *
 * Owned by one reactor thread: no locks (recovery reaches a qpair only
 * through calls run on its reactor).  The queue invariants:
 *  - trackers <= entries - 1 - cq_budget.  Every tracker has at most one CQE
 *    the device may still post, and at most cq_budget consumed CQEs are not yet
 *    returned by the (once per reap call) head doorbell; so the device never
 *    sees more than entries - 1 occupied CQ slots: a deferred CQ doorbell can
 *    never overflow the CQ.
 *  - SQ occupancy (tail - last reported sq_head) <= trackers in flight, plus
 *    the CQEs consumed by a reap pass still running (sq_head is applied once,
 *    at its end): <= entries - 2 while a tracker is free.  So the SQ is full
 *    only when a device reports a wrong sq_head; the submit path reaps only
 *    in that case.
 *  - A CQE is trusted only if its CID names a tracker in flight with the same
 *    generation; anything else is counted (bogus_cqes) and dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine_internal.h"
#include "log.h"

/* PRP1 = the data address (any dword offset); PRP2 = the second page, or a
 * list of the remaining pages when more than two are touched.  One list page
 * (512 entries) covers NVME_ENGINE_MAX_XFER at any offset: no chaining. */
int nvme_prp_build(uint64_t iova, size_t len, uint64_t *list, uint64_t list_iova, uint64_t *prp1,
                   uint64_t *prp2)
{
	if (iova & 3)
		return -EINVAL;
	*prp1 = iova;
	size_t first = NVME_PAGE_SIZE - (iova & (NVME_PAGE_SIZE - 1));
	if (len <= first) {
		*prp2 = 0;
		return 0;
	}
	uint64_t next = (iova & ~(uint64_t)(NVME_PAGE_SIZE - 1)) + NVME_PAGE_SIZE;
	size_t rest = len - first;
	if (rest <= NVME_PAGE_SIZE) {
		*prp2 = next;
		return 0;
	}
	size_t n = (rest + NVME_PAGE_SIZE - 1) >> NVME_PAGE_SHIFT;
	if (n > NVME_PAGE_SIZE / sizeof(uint64_t) || !list)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		list[i] = next + ((uint64_t)i << NVME_PAGE_SHIFT);
	*prp2 = list_iova;
	return 0;
}

/* ---- trackers ---- */

static inline struct nvme_tracker *trk_get(struct nvme_qpair *qp)
{
	uint16_t i = qp->free_head;
	if (__builtin_expect(i == TRK_NONE, 0))
		return NULL;
	struct nvme_tracker *t = &qp->trk[i];
	qp->free_head = t->next_free;
	/* new generation: a stale CQE naming the old one no longer matches */
	t->cid = (uint16_t)(t->cid + (1u << NVME_CID_IDX_BITS));
	return t;
}

/* A tracker takes one stand-alone command (no parent). */
static inline __attribute__((always_inline)) void trk_arm(struct nvme_tracker *t, uint8_t opc,
                                                          uint32_t len, nvme_io_cb cb, void *arg)
{
	t->opc = opc;
	t->len = len;
	t->cb = cb;
	t->arg = arg;
	t->parent = NULL;
	t->retries = 0;
}

static inline void trk_put(struct nvme_qpair *qp, struct nvme_tracker *t)
{
	t->state = TRK_FREE;
	t->next_free = qp->free_head;
	qp->free_head = (uint16_t)(t->cid & NVME_CID_IDX_MASK);
}

static inline unsigned trk_free_count(const struct nvme_qpair *qp)
{
	return (unsigned)qp->ntrk - qp->inflight;
}

static inline unsigned sq_space(const struct nvme_qpair *qp)
{
	return (unsigned)((qp->sq_head - qp->sq_tail - 1u) & qp->mask);
}

static inline uint64_t qp_iova(const struct nvme_qpair *qp, const void *p)
{
	return qp->pool_iova + ((uintptr_t)p - qp->pool_base);
}

/* Advance the tail in memory only (the doorbell is rung once per pass by
 * nvme_qpair_flush_sq) and account the tracker in flight.  The SQE is
 * already in slot qp->sq_tail; a copy goes to the tracker's shadow (cold,
 * read only by recovery) so a reset can send it again. */
static inline void sq_commit(struct nvme_qpair *qp, struct nvme_tracker *t, uint64_t now)
{
	qp->shadow[t->cid & NVME_CID_IDX_MASK] = qp->sq[qp->sq_tail];
	qp->sq_tail = (uint16_t)((qp->sq_tail + 1u) & qp->mask);
	qp->sq_dirty = 1;
	t->state = TRK_INFLIGHT;
	t->submit_ns = now;
	qp->inflight++;
	STAT_INC(qp->ctr.submitted);
}

/* The slow paths' submit: copy a prepared SQE into the ring, or, while a
 * reset holds the queue, into the tracker's shadow only (TRK_HELD: not on
 * the device; the restart sends it). */
static void sq_push(struct nvme_qpair *qp, struct nvme_tracker *t, const struct nvme_sqe *sqe,
                    uint64_t now)
{
	if (__builtin_expect(qp->held != QP_RUN, 0)) {
		struct nvme_sqe *sh = &qp->shadow[t->cid & NVME_CID_IDX_MASK];
		*sh = *sqe;
		sh->cid = t->cid;
		t->state = TRK_HELD;
		t->submit_ns = now;
		qp->inflight++;
		STAT_INC(qp->ctr.submitted);
		return;
	}
	qp->sq[qp->sq_tail] = *sqe;
	qp->sq[qp->sq_tail].cid = t->cid;
	sq_commit(qp, t, now);
}

/* A read/write SQE written in place, every dword once (no stack copy). */
static inline void sqe_write_rw(struct nvme_sqe *s, uint8_t opc, uint16_t cid, uint32_t nsid,
                                uint64_t prp1, uint64_t prp2, uint64_t slba, uint32_t cdw12,
                                uint32_t cdw14)
{
	s->opc = opc;
	s->flags = 0;
	s->cid = cid;
	s->nsid = nsid;
	s->cdw2 = 0;
	s->cdw3 = 0;
	s->mptr = 0;
	s->prp1 = prp1;
	s->prp2 = prp2;
	s->cdw10 = (uint32_t)slba;
	s->cdw11 = (uint32_t)(slba >> 32);
	s->cdw12 = cdw12;
	s->cdw13 = 0;
	s->cdw14 = cdw14;
	s->cdw15 = 0;
}

static void submit_child(struct nvme_qpair *qp, struct nvme_parent *p, uint64_t now);

/* A split command's child completed: issue more of the range if some is left
 * (the tracker just freed guarantees room), and run the parent's callback
 * after the last child. */
static __attribute__((noinline)) void finish_child(struct nvme_qpair *qp, struct nvme_parent *p,
                                                   int err, uint16_t status)
{
	if (err && !p->err) { /* first error wins, and nothing more is issued */
		p->err = err;
		p->status = status;
		p->left = 0;
	}
	p->children--;
	if (p->left) {
		uint64_t now = nvme_reactor_now(qp->reactor);
		while (p->left && trk_free_count(qp) > 0 && sq_space(qp) > 0)
			submit_child(qp, p, now);
		if (!p->children && p->left) { /* no room at all: give up */
			p->err = -EIO;
			p->left = 0;
		}
	}
	if (p->children)
		return;
	nvme_io_cb cb = p->cb;
	void *arg = p->arg;
	err = p->err;
	status = p->status;
	p->next_free = qp->parent_free;
	qp->parent_free = p;
	if (cb)
		cb(arg, err, status);
}

/* Protection information errors logged per qpair in full before they are
 * only sampled: each means the device refused data that was not what was
 * written there (corrupted, or misplaced). */
#define PI_LOG_FIRST 16u
#define PI_LOG_EVERY 1024u

static __attribute__((noinline)) void count_error(struct nvme_qpair *qp, uint16_t status)
{
	STAT_INC(qp->st.errors[nvme_status_class(status)]);
}

/* The errno of a CQE's error status; a protection information error is
 * logged with its command (rate-limited).  Out of line: the completion
 * path pays only the test for a status. */
static __attribute__((noinline)) int cqe_error(struct nvme_qpair *qp, unsigned idx, uint16_t status)
{
	if (nvme_status_class(status) != NVME_ERRC_PROTECTION)
		return nvme_status_errno(status);
	unsigned n = ++qp->pi_logged;
	/* the shadow holds the command: its CQE is being applied */
	const struct nvme_sqe *sh = &qp->shadow[idx];
	if (n <= PI_LOG_FIRST || n % PI_LOG_EVERY == 0)
		log_err("%s: %s of namespace %u, LBA %llu + %u: %s (status 0x%x): the device refused "
		        "data that is not what was written there (%u such error%s on this queue)",
		        qp->name, sh->opc == NVME_CMD_READ ? "read" : "write", sh->nsid,
		        (unsigned long long)((uint64_t)sh->cdw11 << 32 | sh->cdw10),
		        (sh->cdw12 & 0xffff) + 1, nvme_status_str(status), status, n, n == 1 ? "" : "s");
	return nvme_status_errno(status);
}

/* End a tracker's command: stats, parent accounting, the callback.  The
 * tracker is freed before the callback so it may submit.  Only after its
 * CQE or a disable (the buffer invariant). */
static inline __attribute__((always_inline)) void
finish(struct nvme_qpair *qp, struct nvme_tracker *t, int err, uint16_t status, uint64_t now)
{
	nvme_io_cb cb = t->cb;
	void *arg = t->arg;
	struct nvme_parent *p = t->parent;
	uint64_t lat = now > t->submit_ns ? now - t->submit_ns : 0;
	uint8_t opc = t->opc;
	uint32_t len = t->len;

	qp->inflight--;
	trk_put(qp, t);
	STAT_INC(qp->ctr.completed);
	STAT_INC(qp->st.lat_ns[nvme_lat_bucket_inline(lat)]);
	STAT_ADD(qp->st.lat_sum_ns, lat);
	if (__builtin_expect(status != 0, 0))
		count_error(qp, status);
	else if (opc == NVME_CMD_READ)
		STAT_ADD(qp->ctr.bytes_read, len);
	else if (opc == NVME_CMD_WRITE)
		STAT_ADD(qp->ctr.bytes_written, len);
	if (__builtin_expect(p != NULL, 0)) {
		finish_child(qp, p, err, status);
		return;
	}
	if (cb)
		cb(arg, err, status);
}

/* ---- reaping ---- */

/* Put a tracker's shadow SQE on the ring again (it stays counted in flight). */
static void resend(struct nvme_qpair *qp, struct nvme_tracker *t, uint64_t now)
{
	qp->sq[qp->sq_tail] = qp->shadow[t->cid & NVME_CID_IDX_MASK];
	qp->sq_tail = (uint16_t)((qp->sq_tail + 1u) & qp->mask);
	qp->sq_dirty = 1;
	t->state = TRK_INFLIGHT;
	t->submit_ns = now;
}

/* The CQE of a command we sent an Abort for.  Command Abort Requested: the
 * device let go of it, so it is sent again (one retry) or fails with -EIO
 * when its retries are used up; any other status is its real result. */
static __attribute__((noinline)) void aborted_cqe(struct nvme_qpair *qp, struct nvme_tracker *t,
                                                  uint16_t status, uint64_t now)
{
	if (NVME_STATUS_SCT(status) != NVME_SCT_GENERIC ||
	    NVME_STATUS_SC(status) != NVME_SC_ABORT_REQ) {
		finish(qp, t, status ? nvme_status_errno(status) : 0, status, now);
		return;
	}
	STAT_INC(qp->st.aborts_ok);
	__atomic_add_fetch(&qp->ctrl->rst.aborts_ok, 1, __ATOMIC_RELAXED);
	if (t->retries >= qp->io_retries) {
		STAT_INC(qp->st.failed_after_retries);
		__atomic_add_fetch(&qp->ctrl->rst.failed_after_retries, 1, __ATOMIC_RELAXED);
		finish(qp, t, -EIO, NVME_STATUS_TIMEOUT, now);
		return;
	}
	t->retries++;
	STAT_INC(qp->st.resubmitted);
	__atomic_add_fetch(&qp->ctrl->rst.resubmitted, 1, __ATOMIC_RELAXED);
	if (qp->held != QP_RUN) {
		t->state = TRK_HELD; /* a reset is coming: the restart sends it */
		t->submit_ns = now;
	} else if (sq_space(qp) > 0) {
		/* room: this command's own slot was consumed, see the invariants */
		resend(qp, t, now);
	} else {
		finish(qp, t, -EIO, NVME_STATUS_TIMEOUT, now); /* its CQE is here: safe */
	}
}

unsigned nvme_qpair_reap(struct nvme_qpair *qp, unsigned budget)
{
	/* A completion callback that reaps again would let consumed-but-not-
	 * doorbelled CQEs exceed the budget the tracker count was sized for.
	 * A dead queue's rings may be unmapped from the device: not looked at. */
	if (qp->reaping || qp->held == QP_DEAD)
		return 0;
	if (budget == 0 || budget > qp->cq_budget)
		budget = qp->cq_budget;
	qp->reaping = true;
	uint64_t now = nvme_reactor_now(qp->reactor);
	/* The CQ state lives in registers for the pass: nothing else touches it
	 * while reaping is set (a callback's reap is refused). */
	uint16_t head = qp->cq_head, mask = qp->mask;
	uint8_t phase = qp->cq_phase;
	uint16_t sqh = 0;
	unsigned n = 0;
	while (n < budget) {
		volatile struct nvme_cqe *e = &qp->cq[head];
		/* the phase tag is written last (a release store by the device):
		 * an acquire load of it orders the reads of the rest after it.
		 * On x86 a plain load; on a real controller's DMA into coherent
		 * memory the same holds (the device writes the CQE in order). */
		uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
		if (NVME_CQE_PHASE(st) != phase)
			break;
		uint16_t cid = e->cid;
		sqh = e->sq_head;
		if (++head > mask) {
			head = 0;
			phase ^= 1; /* the device flips its phase on each wrap */
		}
		n++;
		/* the table holds min(entries, 4096) trackers: every index <= mask
		 * is in it, those past ntrk are never used (always TRK_FREE) */
		unsigned idx = cid & NVME_CID_IDX_MASK;
		struct nvme_tracker *t = &qp->trk[idx];
		if (__builtin_expect(idx > mask || t->cid != cid || t->state != TRK_INFLIGHT, 0)) {
			if (idx > mask || t->cid != cid || t->state != TRK_ABORTING) {
				STAT_INC(qp->st.bogus_cqes);
				continue;
			}
			aborted_cqe(qp, t, NVME_CQE_STATUS(st), now);
			continue;
		}
		uint16_t status = NVME_CQE_STATUS(st);
		finish(qp, t, __builtin_expect(status != 0, 0) ? cqe_error(qp, idx, status) : 0,
		       status, now);
	}
	qp->cq_head = head;
	qp->cq_phase = phase;
	/* sq_head from the pass's last CQE (the device's newest view), once per
	 * pass.  It must lie between what we knew and our tail; a wild value
	 * would make the SQ look emptier than it is and overwrite live SQEs.
	 * Until it is applied the SQ looks fuller by at most the CQEs consumed
	 * in this pass (<= cq_budget), so while a tracker is free a slot is
	 * too: occupancy <= (ntrk - 1) + cq_budget = entries - 2. */
	if (n) {
		if (sqh <= mask && ((uint16_t)(sqh - qp->sq_head) & mask) <=
		                       ((uint16_t)(qp->sq_tail - qp->sq_head) & mask))
			qp->sq_head = sqh;
		else
			qp->bad_sq_head++;
	}
	if (n) {
		nvme_bus_doorbell(qp->bus, qp->cq_db, qp->cq_head);
		STAT_INC(qp->ctr.cq_doorbells);
	}
	STAT_INC(qp->ctr.reap_passes);
	STAT_INC(qp->st.cpl_per_pass[n < NVME_CPP_BUCKETS - 1 ? n : NVME_CPP_BUCKETS - 1]);
	if (n == budget)
		STAT_INC(qp->st.budget_exhausted);
	else if (n == 0)
		STAT_INC(qp->ctr.idle_polls);
	qp->reaping = false;
	return n;
}

bool nvme_qpair_flush_sq(struct nvme_qpair *qp)
{
	if (!qp->sq_dirty || qp->held != QP_RUN)
		return false;
	qp->sq_dirty = 0;
	nvme_bus_doorbell(qp->bus, qp->sq_db, qp->sq_tail);
	STAT_INC(qp->ctr.sq_doorbells);
	return true;
}

/* ---- submission ---- */

/* The info's entries are appended (nr_ns published after the entry) and
 * updated in place, never moved (nvme_ctrl_rescan). */
static const struct nvme_ns_info *find_ns(struct nvme_qpair *qp, uint32_t nsid)
{
	const struct nvme_ctrl_info *in = qp->ctrl->info;
	unsigned n = __atomic_load_n(&in->nr_ns, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (in->ns[i].nsid == nsid)
			return &in->ns[i];
	return NULL;
}

/* Submissions on a queue that is not running: dead -ENODEV; held ones go
 * on (sq_push holds them), unless the controller has already failed or been
 * removed: its state changes before the reactors are told to mark their
 * queues dead, and a submission in between must not be held (it would then
 * fail with EIO rather than being refused). */
static inline int qp_gate(struct nvme_qpair *qp)
{
	if (__builtin_expect(qp->held == QP_RUN, 1))
		return 0;
	if (qp->held == QP_DEAD)
		return -ENODEV;
	enum nvme_ctrl_state st = nvme_ctrl_state(qp->ctrl);
	return st == NVME_CTRL_FAILED || st == NVME_CTRL_REMOVED ? -ENODEV : 0;
}

/* Failed (changed across a reset, shrunk, reformatted) or detached: -EIO. */
static inline bool ns_failed(const struct nvme_ns_info *ns)
{
	return __atomic_load_n(&ns->failed, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&ns->removed, __ATOMIC_ACQUIRE);
}

static inline uint64_t ns_nlba(const struct nvme_ns_info *ns)
{
	return __atomic_load_n(&ns->nlba, __ATOMIC_ACQUIRE);
}

void nvme_qpair_ns_invalidate(struct nvme_qpair *qp)
{
	qp->ns_id = NVME_NS_NONE;
}

/* The namespace if [slba, slba + nlb) is a non-empty range inside it. */
static const struct nvme_ns_info *ns_range(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba,
                                           uint64_t nlb)
{
	const struct nvme_ns_info *ns = find_ns(qp, nsid);
	uint64_t nlba = ns ? ns_nlba(ns) : 0;
	if (!ns || nlb == 0 || slba >= nlba || nlb > nlba - slba)
		return NULL;
	return ns;
}

/* The metadata buffer, when a namespace first needs it (see struct
 * nvme_qpair): zeroes for Writes to read, then room for Reads. */
static int md_buf_make(struct nvme_qpair *qp)
{
	uint8_t *b = nvme_pool_alloc(qp->pool, 2 * NVME_MD_HALF);
	if (!b) {
		log_err("%s: no room in the buffer pool for a metadata buffer (%u bytes)", qp->name,
		        2 * NVME_MD_HALF);
		return -ENOMEM;
	}
	memset(b, 0, NVME_MD_HALF);
	qp->md_buf = b;
	return 0;
}

/* MPTR of a Read or Write on the cached namespace: 0 without metadata to move. */
static inline uint64_t md_ptr(const struct nvme_qpair *qp, uint8_t opc)
{
	if (!qp->ns_md)
		return 0;
	return qp_iova(qp, qp->md_buf + (opc == NVME_CMD_WRITE ? 0 : NVME_MD_HALF));
}

/* Make nsid the cached namespace (the controller's namespace entries stay
 * where they are for its life; a reset may mark one failed and empties the
 * cache; a rescan may append, grow, fail or detach one and posts the
 * emptying to the reactor, which runs it before any call posted after the
 * rescan).  -EINVAL: no such one, -EIO: failed or detached. */
static __attribute__((noinline)) int ns_cache(struct nvme_qpair *qp, uint32_t nsid)
{
	const struct nvme_ns_info *ns = find_ns(qp, nsid);
	if (!ns || nsid == NVME_NS_NONE)
		return -EINVAL;
	if (ns_failed(ns))
		return -EIO;
	if (ns->md_buf && !qp->md_buf && md_buf_make(qp) < 0)
		return -ENOMEM;
	qp->ns_id = nsid;
	qp->ns_shift = ns->lba_shift;
	qp->ns_lba_mask = ns->lba_size - 1;
	qp->ns_nlba = ns_nlba(ns);
	qp->ns_chunk = qp->max_xfer >> ns->lba_shift;
	if (ns->md_buf && qp->ns_chunk > NVME_MD_HALF / ns->ms)
		qp->ns_chunk = NVME_MD_HALF / ns->ms;
	qp->ns_prinfo = ns->prinfo;
	/* Types 1 and 2 check the reference tag, the LBA (Type 3 has none) */
	qp->ns_ref_mask = ns->pi_type == 1 || ns->pi_type == 2 ? UINT32_MAX : 0;
	qp->ns_ref48 = qp->ns_ref_mask && ns->pi_guard == 64;
	qp->ns_md = ns->md_buf;
	/* MPTR and cdw3 are the slow path's */
	qp->ns_max_nlb = (uint16_t)(qp->ns_md || qp->ns_ref48 ? 0 : qp->ns_chunk);
	return 0;
}

/* Room for n commands now?  The SQ can only be full if the device reported
 * a stale sq_head: then, and only then, reap in the submit path. */
static __attribute__((noinline)) bool room_for(struct nvme_qpair *qp, unsigned n)
{
	if (trk_free_count(qp) < n)
		return false;
	if (sq_space(qp) < n) {
		nvme_qpair_reap(qp, 0);
		if (sq_space(qp) < n || trk_free_count(qp) < n)
			return false;
	}
	return true;
}


/* Issue the parent's next chunk as one command; the caller made sure a
 * tracker and an SQ slot are free. */
static void submit_child(struct nvme_qpair *qp, struct nvme_parent *p, uint64_t now)
{
	uint64_t n = p->left < p->chunk ? p->left : p->chunk;
	struct nvme_tracker *t = trk_get(qp);
	struct nvme_sqe sqe = {.opc = p->opc, .nsid = p->nsid};
	sqe.cdw10 = (uint32_t)p->lba;
	sqe.cdw11 = (uint32_t)(p->lba >> 32);
	sqe.cdw12 = (uint32_t)(n - 1) | p->cdw12;
	sqe.cdw14 = (uint32_t)p->lba & p->ref_mask; /* each child's first reference tag */
	if (p->ref48)
		sqe.cdw3 = (uint32_t)(p->lba >> 32) & 0xffff;
	sqe.mptr = p->mptr;
	uint32_t bytes = 0;
	if (p->data) {
		bytes = (uint32_t)(n << p->shift);
		/* cannot fail: alignment and size were checked by the caller */
		nvme_prp_build(qp_iova(qp, p->data), bytes, t->prp_list, qp_iova(qp, t->prp_list),
		               &sqe.prp1, &sqe.prp2);
		p->data += bytes;
	}
	t->opc = p->opc;
	t->len = bytes;
	t->cb = p->cb;
	t->arg = p->arg;
	t->parent = p;
	p->lba += n;
	p->left -= n;
	p->children++;
	sq_push(qp, t, &sqe, now);
}

/* What each command of a range carries beyond its blocks: cdw12 bits,
 * its reference tag (the LBA & ref_mask; ref48: bits 47:32 too), MPTR. */
struct range_tags {
	uint32_t cdw12;
	uint32_t ref_mask;
	bool ref48;
	uint64_t mptr;
};

/* One or more commands of opc over [slba, slba + nlb), at most chunk blocks
 * each, data at buf (NULL: no data).  -EAGAIN leaves no command submitted.
 * A range that fits the queue goes out at once; a wider one goes out in
 * waves of half the trackers, each completion issuing the next chunk, so any
 * size works at any queue depth.  The split path; one-command I/O goes
 * through rw. */
static __attribute__((noinline)) int submit_range(struct nvme_qpair *qp, uint8_t opc,
                                                  uint32_t nsid, unsigned lba_shift,
                                                  uint64_t slba, uint64_t nlb, const void *buf,
                                                  uint64_t chunk, const struct range_tags *tg,
                                                  nvme_io_cb cb, void *arg)
{
	uint64_t nchild = (nlb + chunk - 1) / chunk;
	uint64_t wave = nchild;
	if (nchild > qp->ntrk)
		wave = qp->ntrk / 2 ? qp->ntrk / 2 : 1;
	if (!room_for(qp, (unsigned)wave))
		return -EAGAIN;
	uint64_t now = nvme_reactor_now(qp->reactor);
	struct nvme_parent *p = qp->parent_free; /* as many parents as trackers: never exhausted */
	qp->parent_free = p->next_free;
	p->cb = cb;
	p->arg = arg;
	p->children = 0;
	p->err = 0;
	p->status = 0;
	p->opc = opc;
	p->shift = (uint8_t)lba_shift;
	p->nsid = nsid;
	p->cdw12 = tg->cdw12;
	p->ref_mask = tg->ref_mask;
	p->ref48 = tg->ref48;
	p->mptr = tg->mptr;
	p->lba = slba;
	p->left = nlb;
	p->chunk = chunk;
	p->data = buf;
	for (uint64_t i = 0; i < wave; i++)
		submit_child(qp, p, now);
	return 0;
}

/* Read and write, every case: checks, the split path, a full SQ, a PRP
 * list, a clock read outside a reactor pass. */
static __attribute__((noinline)) int rw_slow(struct nvme_qpair *qp, uint8_t opc, uint32_t nsid,
                                             uint64_t slba, const void *buf, size_t len,
                                             uint32_t cdw12, nvme_io_cb cb, void *arg)
{
	int rc = qp_gate(qp);
	if (rc < 0)
		return rc;
	if (nsid != qp->ns_id && (rc = ns_cache(qp, nsid)) < 0)
		return rc;
	unsigned shift = qp->ns_shift;
	if (len == 0 || (len & ((1u << shift) - 1)) || ((uintptr_t)buf & 3))
		return -EINVAL;
	uint64_t nlb = len >> shift;
	uint64_t nlba = qp->ns_nlba;
	if (slba >= nlba || nlb > nlba - slba)
		return -EINVAL;
	/* the device can reach only qp's pool */
	uint64_t off = (uintptr_t)buf - qp->pool_base; /* huge when below the base */
	if (off > qp->pool_len || len > qp->pool_len - off)
		return -EINVAL;
	cdw12 |= qp->ns_prinfo;
	if (nlb > qp->ns_chunk) {
		struct range_tags tg = {.cdw12 = cdw12,
		                        .ref_mask = qp->ns_ref_mask,
		                        .ref48 = qp->ns_ref48,
		                        .mptr = md_ptr(qp, opc)};
		return submit_range(qp, opc, nsid, shift, slba, nlb, buf, qp->ns_chunk, &tg, cb, arg);
	}
	if (!room_for(qp, 1))
		return -EAGAIN;
	struct nvme_tracker *t = trk_get(qp);
	uint64_t prp1, prp2;
	/* cannot fail: dword aligned, len <= max_xfer */
	nvme_prp_build(qp->pool_iova + off, len, t->prp_list, qp_iova(qp, t->prp_list), &prp1, &prp2);
	trk_arm(t, opc, (uint32_t)len, cb, arg);
	struct nvme_sqe sqe;
	sqe_write_rw(&sqe, opc, t->cid, nsid, prp1, prp2, slba, (uint32_t)(nlb - 1) | cdw12,
	             (uint32_t)slba & qp->ns_ref_mask);
	if (qp->ns_ref48)
		sqe.cdw3 = (uint32_t)(slba >> 32) & 0xffff;
	sqe.mptr = md_ptr(qp, opc);
	sq_push(qp, t, &sqe, nvme_reactor_now(qp->reactor));
	return 0;
}

/* The common case in line, calling nothing: the cached namespace, one
 * command (len <= max_xfer), one or two data pages, a free tracker and SQ
 * slot (an empty free list is exactly trk_free_count() == 0), inside a
 * reactor pass (its clock).  Anything else, errors included,
 * goes to rw_slow, which checks everything again.  1: not taken. */
static inline __attribute__((always_inline)) int rw_fast(struct nvme_qpair *qp, uint8_t opc,
                                                         uint32_t nsid, uint64_t slba,
                                                         const void *buf, size_t len,
                                                         uint32_t cdw12, nvme_io_cb cb,
                                                         void *arg)
{
	uint64_t nlb = len >> qp->ns_shift;
	uint64_t nlba = qp->ns_nlba;
	uint64_t off = (uintptr_t)buf - qp->pool_base; /* huge when below the base */
	struct nvme_reactor *r = qp->reactor;
	if (__builtin_expect(nsid != qp->ns_id ||
	                         ((len & qp->ns_lba_mask) | ((uintptr_t)buf & 3)) ||
	                         nlb - 1 >= qp->ns_max_nlb || /* also nlb == 0 */
	                         slba >= nlba || nlb > nlba - slba || off > qp->pool_len ||
	                         len > qp->pool_len - off || qp->free_head == TRK_NONE ||
	                         sq_space(qp) == 0 || qp->held || !r->in_pass,
	                     0))
		return 1;
	uint64_t iova = qp->pool_iova + off;
	uint64_t in_page = iova & (NVME_PAGE_SIZE - 1);
	uint64_t prp2 = 0;
	if (__builtin_expect(len + in_page > NVME_PAGE_SIZE, 0)) {
		if (len + in_page > 2 * NVME_PAGE_SIZE)
			return 1; /* a PRP list */
		prp2 = iova - in_page + NVME_PAGE_SIZE;
	}
	struct nvme_tracker *t = trk_get(qp);
	trk_arm(t, opc, (uint32_t)len, cb, arg);
	sqe_write_rw(&qp->sq[qp->sq_tail], opc, t->cid, nsid, iova, prp2, slba,
	             (uint32_t)(nlb - 1) | cdw12 | qp->ns_prinfo, (uint32_t)slba & qp->ns_ref_mask);
	sq_commit(qp, t, r->now_ns);
	return 0;
}

int nvme_qpair_read(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, void *buf, size_t len,
                    nvme_io_cb cb, void *arg)
{
	if (__builtin_expect(rw_fast(qp, NVME_CMD_READ, nsid, slba, buf, len, 0, cb, arg) == 0, 1))
		return 0;
	return rw_slow(qp, NVME_CMD_READ, nsid, slba, buf, len, 0, cb, arg);
}

int nvme_qpair_write(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, const void *buf,
                     size_t len, bool fua, nvme_io_cb cb, void *arg)
{
	uint32_t cdw12 = fua ? NVME_RW_FUA : 0;
	if (__builtin_expect(rw_fast(qp, NVME_CMD_WRITE, nsid, slba, buf, len, cdw12, cb, arg) == 0,
	                     1))
		return 0;
	return rw_slow(qp, NVME_CMD_WRITE, nsid, slba, buf, len, cdw12, cb, arg);
}

int nvme_qpair_flush(struct nvme_qpair *qp, uint32_t nsid, nvme_io_cb cb, void *arg)
{
	int rc = qp_gate(qp);
	if (rc < 0)
		return rc;
	const struct nvme_ns_info *ns = find_ns(qp, nsid);
	if (!ns)
		return -EINVAL;
	if (ns_failed(ns))
		return -EIO;
	if (!room_for(qp, 1))
		return -EAGAIN;
	struct nvme_tracker *t = trk_get(qp);
	struct nvme_sqe sqe = {.opc = NVME_CMD_FLUSH, .nsid = nsid};
	trk_arm(t, NVME_CMD_FLUSH, 0, cb, arg);
	sq_push(qp, t, &sqe, nvme_reactor_now(qp->reactor));
	return 0;
}

int nvme_qpair_write_zeroes(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, uint64_t nlb,
                            bool deac, nvme_io_cb cb, void *arg)
{
	int rc = qp_gate(qp);
	if (rc < 0)
		return rc;
	const struct nvme_ns_info *ns = ns_range(qp, nsid, slba, nlb);
	if (!ns)
		return -EINVAL;
	if (ns_failed(ns))
		return -EIO;
	const struct nvme_ctrl_info *in = qp->ctrl->info;
	if (!(in->oncs & NVME_ONCS_WRITE_ZEROES))
		return -EOPNOTSUPP;
	/* NLB is a 16-bit 0-based field: 65536 blocks per command; WZSL may
	 * lower that (never below one block: a namespace's block fits MDTS) */
	uint64_t chunk = 65536;
	if (in->max_wz_bytes && (in->max_wz_bytes >> ns->lba_shift) < chunk)
		chunk = in->max_wz_bytes >> ns->lba_shift ? in->max_wz_bytes >> ns->lba_shift : 1;
	/* with PI: the controller writes that of the zeroed blocks (PRACT, no
	 * checks: there is no data), reference tags the LBAs */
	bool ref = ns->pi_type == 1 || ns->pi_type == 2;
	struct range_tags tg = {.cdw12 = (deac ? NVME_WZ_DEAC : 0) | (ns->prinfo & NVME_RW_PRACT),
	                        .ref_mask = ref ? UINT32_MAX : 0,
	                        .ref48 = ref && ns->pi_guard == 64};
	return submit_range(qp, NVME_CMD_WRITE_ZEROES, nsid, ns->lba_shift, slba, nlb, NULL, chunk,
	                    &tg, cb, arg);
}

int nvme_qpair_deallocate(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, uint64_t nlb,
                          nvme_io_cb cb, void *arg)
{
	int rc = qp_gate(qp);
	if (rc < 0)
		return rc;
	const struct nvme_ns_info *ns = ns_range(qp, nsid, slba, nlb);
	if (!ns)
		return -EINVAL;
	if (ns_failed(ns))
		return -EIO;
	if (!(qp->ctrl->info->oncs & NVME_ONCS_DSM))
		return -EOPNOTSUPP;
	const struct nvme_ctrl_info *in = qp->ctrl->info;
	const uint64_t per =
	    in->dsm_max_range_blocks < (1u << 31) ? in->dsm_max_range_blocks : (1u << 31);
	uint64_t nranges = (nlb + per - 1) / per;
	if (nranges > in->dsm_max_ranges || (in->dsm_max_blocks && nlb > in->dsm_max_blocks))
		return -EINVAL;
	if (!room_for(qp, 1))
		return -EAGAIN;
	struct nvme_tracker *t = trk_get(qp);
	/* the range list lives in the tracker's PRP page: already DMA-mapped */
	struct nvme_dsm_range *rg = (struct nvme_dsm_range *)t->prp_list;
	for (uint64_t i = 0; i < nranges; i++) {
		uint64_t n = nlb - i * per < per ? nlb - i * per : per;
		rg[i].cattr = 0;
		rg[i].nlb = (uint32_t)n;
		rg[i].slba = slba + i * per;
	}
	struct nvme_sqe sqe = {.opc = NVME_CMD_DSM,
	                       .nsid = nsid,
	                       .prp1 = qp_iova(qp, t->prp_list),
	                       .cdw10 = (uint32_t)(nranges - 1),
	                       .cdw11 = NVME_DSM_AD};
	trk_arm(t, NVME_CMD_DSM, 0, cb, arg);
	sq_push(qp, t, &sqe, nvme_reactor_now(qp->reactor));
	return 0;
}

/* ---- timeouts ---- */

/* Called from the reactor's periodic timer; never sleeps.  A command past
 * io_timeout_ms gets an Abort (asynchronous: its result comes back on the
 * admin thread, which asks for a reset when it failed); a command still
 * outstanding a grace period after that -- or whose Abort could not be sent
 * -- makes the controller reset.  Its tracker and buffer stay in flight
 * throughout (the buffer invariant).  Held commands (a reset is under way)
 * that waited io_timeout_ms fail with -EIO: they are not on the device. */
void nvme_qpair_check_timeouts(struct nvme_qpair *qp, uint64_t now)
{
	struct nvme_ctrl *c = qp->ctrl;
	uint64_t tmo = (uint64_t)qp->io_timeout_ms * 1000000ull;
	uint64_t grace = tmo / 2;
	if (grace < 10000000ull)
		grace = 10000000ull;
	if (grace > 5000000000ull)
		grace = 5000000000ull;
	bool live = nvme_ctrl_state(c) == NVME_CTRL_LIVE;
	bool escalate = false;
	/* a completion whose interrupt went missing (a vector lost to a reset
	 * of the function, a coalescing bug) is found here, before its command
	 * looks timed out: the first rung of the ladder, as Linux's nvme_timeout
	 * polls the CQ first */
	if (live)
		nvme_qpair_reap(qp, 0);
	/* callbacks below must not reap: that could free trackers under the scan */
	bool was_reaping = qp->reaping;
	qp->reaping = true;
	/* a scan of the tracker table: it runs a few times a second, and saves
	 * every I/O an in-flight list update on submit and on completion */
	for (unsigned i = 0; i < qp->ntrk; i++) {
		struct nvme_tracker *t = &qp->trk[i];
		if (t->state == TRK_INFLIGHT && live && now >= t->submit_ns &&
		    now - t->submit_ns >= tmo) {
			log_warn("%s: qid %u cid 0x%x (opcode 0x%02x) timed out after %u ms",
			         c->name, qp->qid, t->cid, t->opc, qp->io_timeout_ms);
			STAT_INC(qp->st.timeouts);
			__atomic_add_fetch(&c->rst.timeouts, 1, __ATOMIC_RELAXED);
			t->state = TRK_ABORTING;
			t->abort_ns = now;
			if (recov_send_abort(c, qp->qid, t->cid) == 0)
				STAT_INC(qp->st.aborts_sent);
			else
				escalate = true; /* no Abort possible: reset at once */
		} else if (t->state == TRK_ABORTING && live && now - t->abort_ns >= grace) {
			escalate = true;
		} else if (t->state == TRK_HELD && now - t->submit_ns >= tmo) {
			log_warn("%s: qid %u cid 0x%x held %u ms by a reset: failed", c->name,
			         qp->qid, t->cid, qp->io_timeout_ms);
			finish(qp, t, -EIO, NVME_STATUS_TIMEOUT, now);
		}
	}
	qp->reaping = was_reaping;
	if (escalate)
		recov_reset_async(c, "a command was still outstanding after its timeout");
}

/* ---- recovery calls (owning reactor) ---- */

static void ring_zero(struct nvme_qpair *qp)
{
	memset(qp->ring_mem.vaddr, 0, qp->ring_mem.len);
	qp->sq_tail = qp->sq_head = qp->cq_head = 0;
	qp->cq_phase = 1;
	qp->sq_dirty = 0;
}

void nvme_qpair_rec_hold(struct nvme_qpair *qp)
{
	if (qp->held == QP_RUN)
		qp->held = QP_HELD;
}

/* Fail every command (the device can no longer touch them) with err. */
static void fail_outstanding(struct nvme_qpair *qp, int err, uint16_t status)
{
	uint64_t now = nvme_reactor_now(qp->reactor);
	bool was_reaping = qp->reaping;
	qp->reaping = true;
	for (unsigned i = 0; i < qp->ntrk; i++) {
		struct nvme_tracker *t = &qp->trk[i];
		if (t->state != TRK_FREE)
			finish(qp, t, err, status, now);
	}
	qp->reaping = was_reaping;
}

void nvme_qpair_rec_stop(struct nvme_qpair *qp)
{
	struct nvme_ctrl *c = qp->ctrl;
	/* what the device completed before the disable is complete; what the
	 * callbacks submit meanwhile is held.  A retry of a failed controller
	 * comes here from QP_DEAD: from now on its submissions are held too. */
	qp->held = QP_HELD;
	qp->quarantined = false; /* disabled or cut off now: its commands are ours */
	while (nvme_qpair_reap(qp, 0) > 0)
		;
	ring_zero(qp);
	qp->created_on_dev = false;
	uint64_t now = nvme_reactor_now(qp->reactor);
	bool was_reaping = qp->reaping;
	qp->reaping = true;
	for (unsigned i = 0; i < qp->ntrk; i++) {
		struct nvme_tracker *t = &qp->trk[i];
		if (t->state != TRK_INFLIGHT && t->state != TRK_ABORTING)
			continue;
		if (t->retries >= qp->io_retries) {
			STAT_INC(qp->st.failed_after_retries);
			__atomic_add_fetch(&c->rst.failed_after_retries, 1, __ATOMIC_RELAXED);
			finish(qp, t, -EIO, NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_QUEUE),
			       now);
			continue;
		}
		t->retries++;
		t->state = TRK_HELD;
		t->submit_ns = now; /* the reset gets io_timeout_ms to bring it back */
		STAT_INC(qp->st.resubmitted);
		__atomic_add_fetch(&c->rst.resubmitted, 1, __ATOMIC_RELAXED);
	}
	qp->reaping = was_reaping;
}

/* A held command's addresses, built against the pool's old mapping, moved
 * to its new one: every address an I/O command carries lies in the reactor's
 * pool, qp->pool (data, its PRP list page, a DSM range list, the metadata
 * buffer). */
static uint64_t rebase(uint64_t a, uint64_t old, uint64_t new, uint64_t len)
{
	return a - old < len ? a - old + new : a;
}

static void rebase_held(struct nvme_qpair *qp, struct nvme_tracker *t, uint64_t old, uint64_t new)
{
	struct nvme_sqe *sh = &qp->shadow[t->cid & NVME_CID_IDX_MASK];
	uint64_t len = qp->pool_len;
	if (sh->opc != NVME_CMD_READ && sh->opc != NVME_CMD_WRITE && sh->opc != NVME_CMD_DSM)
		return; /* Flush, Write Zeroes: no address */
	bool list = sh->prp2 && t->len &&
	            sh->prp2 == old + ((uintptr_t)t->prp_list - qp->pool_base) &&
	            t->len > 2 * NVME_PAGE_SIZE - (sh->prp1 & (NVME_PAGE_SIZE - 1));
	if (list) {
		size_t first = NVME_PAGE_SIZE - (sh->prp1 & (NVME_PAGE_SIZE - 1));
		size_t n = (t->len - first + NVME_PAGE_SIZE - 1) >> NVME_PAGE_SHIFT;
		for (size_t i = 0; i < n; i++)
			t->prp_list[i] = rebase(t->prp_list[i], old, new, len);
	}
	sh->prp1 = rebase(sh->prp1, old, new, len);
	if (sh->prp2)
		sh->prp2 = rebase(sh->prp2, old, new, len);
	if (sh->mptr) /* the queue's metadata buffer, in the pool too */
		sh->mptr = rebase(sh->mptr, old, new, len);
}

void nvme_qpair_rec_restart(struct nvme_qpair *qp)
{
	struct nvme_ctrl *c = qp->ctrl;
	/* after a re-attach, or a remap after isolation, the bus, its BAR and
	 * the pool's IOVA are new: held commands were built against the old one */
	uint64_t old_iova = qp->pool_iova, new_iova = qp->pool_map_iova;
	if (old_iova != new_iova) {
		for (unsigned i = 0; i < qp->ntrk; i++)
			if (qp->trk[i].state == TRK_HELD)
				rebase_held(qp, &qp->trk[i], old_iova, new_iova);
		qp->pool_iova = new_iova;
	}
	qp->bus = c->bus;
	qp->sq_db = (volatile uint32_t *)(c->bus->bar0 + nvme_sq_tdbl_off(qp->qid, c->dstrd));
	qp->cq_db = (volatile uint32_t *)(c->bus->bar0 + nvme_cq_hdbl_off(qp->qid, c->dstrd));
	ring_zero(qp);
	qp->ns_id = NVME_NS_NONE; /* a namespace may have failed */
	qp->held = QP_RUN;
	uint64_t now = nvme_reactor_now(qp->reactor);
	bool was_reaping = qp->reaping;
	qp->reaping = true;
	for (unsigned i = 0; i < qp->ntrk; i++) {
		struct nvme_tracker *t = &qp->trk[i];
		if (t->state != TRK_HELD)
			continue;
		/* a namespace that changed size or format across the reset: its
		 * command could now reach past its buffer (a larger LBA size) */
		const struct nvme_sqe *sh = &qp->shadow[t->cid & NVME_CID_IDX_MASK];
		const struct nvme_ns_info *ns = find_ns(qp, sh->nsid);
		if (ns && ns_failed(ns)) {
			finish(qp, t, -EIO, NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_QUEUE),
			       now);
			continue;
		}
		resend(qp, t, now); /* at most ntrk < entries: the empty ring has room */
	}
	qp->reaping = was_reaping;
	nvme_qpair_flush_sq(qp);
}

void nvme_qpair_rec_fail(struct nvme_qpair *qp)
{
	qp->held = QP_DEAD;
	qp->quarantined = false;
	qp->created_on_dev = false;
	fail_outstanding(qp, -EIO, NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_QUEUE));
}

void nvme_qpair_rec_quarantine(struct nvme_qpair *qp)
{
	uint64_t now = nvme_reactor_now(qp->reactor);
	qp->held = QP_DEAD;
	bool was_reaping = qp->reaping;
	qp->reaping = true;
	unsigned left = 0;
	for (unsigned i = 0; i < qp->ntrk; i++) {
		if (qp->trk[i].state == TRK_HELD)
			finish(qp, &qp->trk[i], -EIO,
			       NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_QUEUE), now);
		else if (qp->trk[i].state != TRK_FREE)
			left++;
	}
	qp->reaping = was_reaping;
	qp->quarantined = left > 0;
	if (left)
		log_err("%s: %u command(s) left on a device that could not be cut off", qp->name,
		        left);
}

bool nvme_qpair_rec_still_aborting(struct nvme_qpair *qp, uint16_t cid)
{
	const struct nvme_tracker *t = &qp->trk[cid & NVME_CID_IDX_MASK & qp->mask];
	return t->cid == cid && t->state == TRK_ABORTING;
}

/* ---- creation and teardown ---- */

int nvme_qpair_create_on_dev(struct nvme_qpair *qp)
{
	struct nvme_ctrl *c = qp->ctrl;
	size_t sq_bytes = (size_t)qp->entries * sizeof(struct nvme_sqe);
	size_t sq_off = (sq_bytes + NVME_PAGE_SIZE - 1) & ~(size_t)(NVME_PAGE_SIZE - 1);
	uint32_t cdw11 = NVME_QUEUE_PC;
	if (qp->efd >= 0)
		cdw11 |= NVME_CQ_IEN | ((uint32_t)qp->vector << 16);
	struct nvme_sqe cq = {.opc = NVME_ADM_CREATE_CQ,
	                      .prp1 = qp->ring_iova + sq_off,
	                      .cdw10 = ((uint32_t)(qp->entries - 1u) << 16) | qp->qid,
	                      .cdw11 = cdw11};
	int rc = nvme_ctrl_admin_timeout(c, &cq, NULL, 0, NULL, NVME_ADMIN_TIMEOUT_MS);
	if (rc < 0) {
		log_err("%s: Create I/O CQ %u (%u entries) failed: %s", c->name, qp->qid,
		        qp->entries, strerror(-rc));
		return rc;
	}
	struct nvme_sqe sq = {.opc = NVME_ADM_CREATE_SQ,
	                      .prp1 = qp->ring_iova,
	                      .cdw10 = ((uint32_t)(qp->entries - 1u) << 16) | qp->qid,
	                      .cdw11 = ((uint32_t)qp->qid << 16) | NVME_QUEUE_PC};
	rc = nvme_ctrl_admin_timeout(c, &sq, NULL, 0, NULL, NVME_ADMIN_TIMEOUT_MS);
	if (rc < 0) {
		log_err("%s: Create I/O SQ %u failed: %s", c->name, qp->qid, strerror(-rc));
		struct nvme_sqe del = {.opc = NVME_ADM_DELETE_CQ, .cdw10 = qp->qid};
		nvme_ctrl_admin_timeout(c, &del, NULL, 0, NULL, NVME_ADMIN_TIMEOUT_MS);
		return rc;
	}
	qp->created_on_dev = true;
	return 0;
}

static void rings_reset(struct nvme_qpair *qp)
{
	memset(qp->ring_mem.vaddr, 0, qp->ring_mem.len);
	qp->sq_tail = qp->sq_head = qp->cq_head = 0;
	qp->cq_phase = 1;
	qp->sq_dirty = 0;
	qp->free_head = TRK_NONE;
	for (unsigned i = qp->ntrk; i-- > 0;) {
		qp->trk[i].state = TRK_FREE;
		qp->trk[i].next_free = qp->free_head;
		qp->free_head = (uint16_t)i;
	}
	qp->inflight = 0;
	qp->parent_free = NULL;
	for (unsigned i = 0; i < qp->ntrk; i++) {
		qp->parents[i].next_free = qp->parent_free;
		qp->parent_free = &qp->parents[i];
	}
}

/* Complete every command still in flight with err (the device will not:
 * its queues are deleted or it is disabled or gone). */
static void fail_all(struct nvme_qpair *qp, int err, uint16_t status)
{
	uint64_t now = nvme_reactor_now(qp->reactor);
	while (qp->inflight) /* again if a callback submitted */
		for (unsigned i = 0; i < qp->ntrk; i++) {
			struct nvme_tracker *t = &qp->trk[i];
			if (t->state != TRK_FREE)
				finish(qp, t, err, status, now);
		}
}

static void free_qpair(struct nvme_qpair *qp)
{
	struct nvme_buf_pool *pool = qp->pool;
	for (unsigned i = 0; pool && i < qp->ntrk; i++)
		if (qp->trk[i].prp_list)
			nvme_pool_free(pool, qp->trk[i].prp_list, NVME_PAGE_SIZE);
	if (pool && qp->md_buf)
		nvme_pool_free(pool, qp->md_buf, 2 * NVME_MD_HALF);
	nvme_mem_free(qp->parents, qp->ntrk * sizeof(struct nvme_parent));
	nvme_mem_free(qp->shadow, qp->ntrk_alloc * sizeof(struct nvme_sqe));
	struct nvme_bus *bus = qp->ctrl->bus; /* NULL once removed: then nothing is mapped */
	if (qp->pool_mapped && bus)
		nvme_dma_unmap(bus, &pool->region, qp->pool_map_iova);
	if (qp->ring_mem.vaddr) {
		if (qp->ring_mapped && bus)
			nvme_dma_unmap(bus, &qp->ring_mem, qp->ring_iova);
		nvme_dma_free(&qp->ring_mem);
	}
	if (qp->efd >= 0) {
		if (bus)
			nvme_ctrl_wire_vector(qp->ctrl, (unsigned)qp->vector, -1);
		close(qp->efd);
	}
	nvme_mem_free(qp, qp->alloc_len);
}

void *nvme_qpair_buf_alloc(struct nvme_qpair *qp, size_t len)
{
	return nvme_pool_alloc(qp->pool, len);
}

void nvme_qpair_buf_free(struct nvme_qpair *qp, void *buf, size_t len)
{
	nvme_pool_free(qp->pool, buf, len);
}

int nvme_qpair_create(struct nvme_ctrl *c, struct nvme_reactor *r, uint16_t qid,
                      struct nvme_qpair **out)
{
	const struct nvme_ctrl_info *in = c->info;
	if (qid == 0 || qid > in->nr_io_queues) {
		log_err("%s: I/O queue id %u out of range (1..%u granted)", c->name, qid,
		        in->nr_io_queues);
		return -EINVAL;
	}
	unsigned entries = c->opts.queue_depth;
	unsigned ntrk_alloc = entries < NVME_MAX_TRACKERS ? entries : NVME_MAX_TRACKERS;
	size_t alloc_len = sizeof(struct nvme_qpair) + ntrk_alloc * sizeof(struct nvme_tracker);
	struct nvme_qpair *qp = nvme_mem_alloc(alloc_len, r->node);
	if (!qp)
		return -ENOMEM;
	int rc = -ENOMEM;
	qp->alloc_len = alloc_len;
	qp->ntrk_alloc = ntrk_alloc;
	qp->ns_id = NVME_NS_NONE;
	qp->ctrl = c;
	qp->reactor = r;
	qp->bus = c->bus;
	qp->qid = qid;
	qp->efd = -1;
	qp->vector = -1;
	qp->entries = (uint16_t)c->opts.queue_depth;
	qp->mask = (uint16_t)(qp->entries - 1u);
	qp->cq_budget = (uint16_t)c->opts.cq_budget;
	unsigned ntrk = qp->entries - 1u - qp->cq_budget; /* see the invariant at the top */
	if (ntrk > NVME_MAX_TRACKERS)
		ntrk = NVME_MAX_TRACKERS;
	qp->ntrk = (uint16_t)ntrk;
	qp->max_xfer = in->max_xfer;
	qp->io_timeout_ms = c->opts.io_timeout_ms;
	qp->io_retries = (uint8_t)c->opts.io_retries;
	snprintf(qp->name, sizeof(qp->name), "%s/q%u", c->name, qid);

	qp->parents = nvme_mem_alloc(ntrk * sizeof(struct nvme_parent), r->node);
	qp->shadow = nvme_mem_alloc(ntrk_alloc * sizeof(struct nvme_sqe), r->node);
	if (!qp->parents || !qp->shadow)
		goto err;
	if (nvme_ctrl_state(c) != NVME_CTRL_LIVE) {
		rc = -EAGAIN;
		goto err;
	}
	for (unsigned i = 0; i < ntrk_alloc; i++)
		qp->trk[i].cid = (uint16_t)i;

	size_t sq_bytes = (size_t)qp->entries * sizeof(struct nvme_sqe);
	size_t sq_off = (sq_bytes + NVME_PAGE_SIZE - 1) & ~(size_t)(NVME_PAGE_SIZE - 1);
	rc = nvme_dma_alloc(sq_off + (size_t)qp->entries * sizeof(struct nvme_cqe), r->node,
	                    &qp->ring_mem);
	if (rc < 0)
		goto err;
	rc = nvme_dma_map(c->bus, &qp->ring_mem, &qp->ring_iova);
	if (rc < 0)
		goto err;
	qp->ring_mapped = true;
	qp->sq = qp->ring_mem.vaddr;
	qp->cq = (volatile struct nvme_cqe *)((uint8_t *)qp->ring_mem.vaddr + sq_off);

	/* the reactor's pool for this controller (the shared one, or under
	 * isolation the controller's own), mapped into its bus: its own IOVA
	 * base.  PRP list pages come from it too: a device reaches no other
	 * controller's lists. */
	struct nvme_buf_pool *pool;
	rc = nvme_reactor_ctrl_pool(r, c, &pool);
	if (rc < 0)
		goto err;
	qp->pool = pool;
	rc = nvme_dma_map(c->bus, &pool->region, &qp->pool_iova);
	qp->pool_map_iova = qp->pool_iova;
	if (rc < 0)
		goto err;
	qp->pool_mapped = true;
	qp->pool_base = (uintptr_t)pool->base;
	qp->pool_len = pool->region.len;
	for (unsigned i = 0; i < ntrk; i++) {
		void *pg = nvme_pool_alloc(pool, NVME_PAGE_SIZE);
		if (!pg) {
			log_err("%s: reactor %u's buffer pool too small for %u PRP list pages",
			        qp->name, r->opts.id, ntrk);
			rc = -ENOMEM;
			goto err;
		}
		qp->trk[i].prp_list = pg;
	}
	/* made now when a namespace needs it, while the pool has room: later
	 * (a namespace attached) only on its first I/O */
	for (unsigned i = 0; i < __atomic_load_n(&in->nr_ns, __ATOMIC_ACQUIRE); i++)
		if (in->ns[i].md_buf && !qp->md_buf && (rc = md_buf_make(qp)) < 0)
			goto err;
	qp->sq_db = (volatile uint32_t *)(c->bus->bar0 + nvme_sq_tdbl_off(qid, c->dstrd));
	qp->cq_db = (volatile uint32_t *)(c->bus->bar0 + nvme_cq_hdbl_off(qid, c->dstrd));

	/* only interrupt mode sleeps with commands in flight: hybrid polls
	 * whenever one is, so a vector would only cost the device a signal
	 * per completion and the loop a stale wake when it next sleeps */
	if (c->opts.interrupts && r->opts.mode == NVME_MODE_INTERRUPT) {
		if (qid < c->bus->nr_vectors) {
			qp->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			if (qp->efd >= 0 && nvme_ctrl_wire_vector(c, qid, qp->efd) == 0) {
				qp->vector = qid;
			} else {
				if (qp->efd >= 0)
					close(qp->efd);
				qp->efd = -1;
			}
		}
		if (qp->efd < 0)
			log_warn("%s: no MSI-X vector for this queue; it will be polled", qp->name);
	}
	rings_reset(qp);
	rc = nvme_qpair_create_on_dev(qp);
	if (rc < 0)
		goto err;
	rc = nvme_reactor_attach(r, qp);
	if (rc < 0)
		goto err_dev;
	__atomic_add_fetch(&c->nr_qpairs, 1, __ATOMIC_RELAXED);
	nvme_ctrl_add_qpair(c, qp);
	*out = qp;
	return 0;
err_dev : {
	struct nvme_sqe ds = {.opc = NVME_ADM_DELETE_SQ, .cdw10 = qid};
	struct nvme_sqe dc = {.opc = NVME_ADM_DELETE_CQ, .cdw10 = qid};
	nvme_ctrl_admin(c, &ds, NULL, 0, NULL);
	nvme_ctrl_admin(c, &dc, NULL, 0, NULL);
}
err:
	free_qpair(qp);
	return rc;
}

static void delete_io_queues(struct nvme_qpair *qp)
{
	if (!qp->created_on_dev || nvme_ctrl_state(qp->ctrl) != NVME_CTRL_LIVE)
		return;
	struct nvme_sqe ds = {.opc = NVME_ADM_DELETE_SQ, .cdw10 = qp->qid};
	struct nvme_sqe dc = {.opc = NVME_ADM_DELETE_CQ, .cdw10 = qp->qid};
	int rc = nvme_ctrl_admin(qp->ctrl, &ds, NULL, 0, NULL);
	if (rc < 0)
		log_warn("%s: Delete I/O SQ failed: %s", qp->name, strerror(-rc));
	/* commands the deletion aborted may have posted their CQEs */
	while (nvme_qpair_reap(qp, 0) > 0)
		;
	int rc2 = nvme_ctrl_admin(qp->ctrl, &dc, NULL, 0, NULL);
	if (rc2 < 0)
		log_warn("%s: Delete I/O CQ failed: %s", qp->name, strerror(-rc2));
	/* only a queue the device confirmed deleted is gone from it: else its
	 * commands stay the device's (nvme_qpair_destroy leaves them) */
	if (rc == 0 && rc2 == 0)
		qp->created_on_dev = false;
}

void nvme_qpair_destroy(struct nvme_qpair *qp)
{
	if (!qp)
		return;
	struct nvme_ctrl *c = qp->ctrl;
	/* not under a reset, removal or attach: they reach this qpair */
	pthread_mutex_lock(&c->reset_lock);
	nvme_ctrl_del_qpair(c, qp);
	pthread_mutex_unlock(&c->reset_lock);
	nvme_qpair_flush_sq(qp);
	delete_io_queues(qp);
	if (qp->inflight) {
		if (qp->quarantined || (qp->created_on_dev && qp->held != QP_DEAD)) {
			/* the queue could not be deleted: the device may still write into
			 * these buffers, so they are not handed back (the invariant) */
			log_warn(
			    "%s: %u command(s) still on the device at destroy: left outstanding",
			    qp->name, qp->inflight);
			nvme_reactor_detach(qp->reactor, qp);
			__atomic_sub_fetch(&c->nr_qpairs, 1, __ATOMIC_RELAXED);
			return;
		}
		log_warn("%s: %u command(s) still in flight at destroy: failed", qp->name,
		         qp->inflight);
	}
	fail_all(qp, -ECANCELED, NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_QUEUE));
	nvme_reactor_detach(qp->reactor, qp);
	__atomic_sub_fetch(&c->nr_qpairs, 1, __ATOMIC_RELAXED);
	free_qpair(qp);
}

unsigned nvme_qpair_inflight(const struct nvme_qpair *qp)
{
	/* read by the admin thread too: a relaxed load, never torn */
	return __atomic_load_n(&qp->inflight, __ATOMIC_RELAXED);
}

int nvme_qpair_vector(const struct nvme_qpair *qp)
{
	return qp->vector;
}

uint16_t nvme_qpair_id(const struct nvme_qpair *qp)
{
	return qp->qid;
}

struct nvme_ctrl *nvme_qpair_ctrl(struct nvme_qpair *qp)
{
	return qp->ctrl;
}

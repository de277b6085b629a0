/* ctrl.c - controller bring-up, the admin queue (asynchronous, reaped by
 * the recovery thread or a synchronous caller), identify, namespaces, Number
 * of Queues, the register steps (enable, disable, CSTS waits) that
 * recovery.c composes, and freeing.  The state machine and everything that
 * moves it live in recovery.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"

/* admin_mem layout: ASQ (one page), ACQ (one page) */
#define ASQ_OFF   0
#define ACQ_OFF   (NVME_ADMIN_ENTRIES * sizeof(struct nvme_sqe))
#define ADMIN_MEM (ACQ_OFF + 4096)
static_assert(NVME_ADMIN_ENTRIES * sizeof(struct nvme_sqe) == 4096, "ASQ is one page");
static_assert(NVME_ADMIN_ENTRIES <= 64, "admin CID: slot index in 6 bits");
#define ADMIN_CID_SLOT(cid) ((cid)&63u)

static void sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

#define RST_ADD(field, v) __atomic_add_fetch(&c->rst.field, (v), __ATOMIC_RELAXED)

static uint32_t csts(struct nvme_ctrl *c)
{
	return nvme_bus_read32(c->bus, NVME_REG_CSTS);
}

uint32_t nvme_ctrl_csts(struct nvme_ctrl *c)
{
	return csts(c);
}

/* Wait until (CSTS & mask) == want.  A controller reading all ones is gone;
 * one reporting CFS has failed (unless we are disabling it, which clears CFS). */
int nvme_ctrl_wait_csts(struct nvme_ctrl *c, uint32_t mask, uint32_t want, uint32_t timeout_ms,
                        bool cfs_fatal, const char *what)
{
	uint64_t start = nvme_now_ns();
	uint64_t deadline = start + (uint64_t)timeout_ms * 1000000ull;
	unsigned spins = 0;
	for (;;) {
		uint32_t s = csts(c);
		if (s == 0xffffffffu) {
			log_err("%s: device not responding (CSTS reads all ones) while %s", c->name,
			        what);
			return -ENODEV;
		}
		if (cfs_fatal && (s & NVME_CSTS_CFS)) {
			log_err("%s: controller fatal status (CSTS 0x%x) while %s", c->name, s,
			        what);
			return -EIO;
		}
		if ((s & mask) == want)
			return 0;
		/* a stop cuts a wait short, but gives each at least half a second
		 * (a healthy device disables in far less) */
		uint64_t cut = atomic_load_explicit(&c->stop_cut_ns, memory_order_relaxed);
		uint64_t now = nvme_now_ns();
		if (cut && now > cut && now - start > 500000000ull) {
			log_err("%s: %s: cut short by the stop (CSTS 0x%x)", c->name, what, s);
			return -ETIMEDOUT;
		}
		if (nvme_now_ns() > deadline) {
			log_err("%s: timed out after %u ms %s (CSTS 0x%x)", c->name, timeout_ms,
			        what, s);
			return -ETIMEDOUT;
		}
		sleep_us(spins++ < 100 ? 50 : 1000);
	}
}

/* Clear CC.EN (written even when it reads 0: harmless, and a controller
 * that lost its enable under us still gets the request) and wait for RDY to
 * clear.  0: disabled, -ENODEV: gone, -ETIMEDOUT. */
int nvme_ctrl_disable(struct nvme_ctrl *c, uint32_t timeout_ms)
{
	uint32_t cc = nvme_bus_read32(c->bus, NVME_REG_CC);
	if (cc == 0xffffffffu) {
		log_err("%s: device not responding (CC reads all ones)", c->name);
		return -ENODEV;
	}
	nvme_bus_write32(c->bus, NVME_REG_CC, cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK));
	return nvme_ctrl_wait_csts(c, NVME_CSTS_RDY, 0, timeout_ms, false,
	                           "waiting for the controller to disable");
}

/* Program the admin queue and enable.  Rings are zeroed so no stale phase
 * bit is mistaken for a completion.  Callers own admin_lock's state: no
 * slot is busy (the controller was disabled and the slots released). */
int nvme_ctrl_enable(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->admin_lock);
	memset(c->asq, 0, ACQ_OFF);
	memset((void *)c->acq, 0, NVME_ADMIN_ENTRIES * sizeof(struct nvme_cqe));
	c->asq_tail = 0;
	c->asq_head = 0;
	c->acq_head = 0;
	c->acq_phase = 1;
	pthread_mutex_unlock(&c->admin_lock);

	nvme_bus_write32(c->bus, NVME_REG_AQA,
	                 ((NVME_ADMIN_ENTRIES - 1u) << 16) | (NVME_ADMIN_ENTRIES - 1u));
	nvme_bus_write64(c->bus, NVME_REG_ASQ, c->admin_iova + ASQ_OFF);
	nvme_bus_write64(c->bus, NVME_REG_ACQ, c->admin_iova + ACQ_OFF);
	/* CSS NVM, MPS 4 KiB, round robin, 64-byte SQEs, 16-byte CQEs; EN last */
	uint32_t cc = (0u << NVME_CC_CSS_SHIFT) | (0u << NVME_CC_MPS_SHIFT) |
	              (0u << NVME_CC_AMS_SHIFT) | (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) |
	              (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
	nvme_bus_write32(c->bus, NVME_REG_CC, cc);
	nvme_bus_write32(c->bus, NVME_REG_CC, cc | NVME_CC_EN);
	int rc = nvme_ctrl_wait_csts(c, NVME_CSTS_RDY, NVME_CSTS_RDY, c->ready_timeout_ms, true,
	                   "waiting for the controller to become ready");
	if (rc == 0) {
		pthread_mutex_lock(&c->admin_lock);
		__atomic_store_n(&c->admin_ready, true, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&c->admin_lock);
	}
	return rc;
}

/* ---- the asynchronous admin queue ---- */

static void slot_release(struct nvme_ctrl *c, struct nvme_admin_slot *sl)
{
	if (sl->dma.vaddr) {
		if (c->bus)
			nvme_dma_unmap(c->bus, &sl->dma, sl->dma_iova);
		nvme_dma_free(&sl->dma);
	}
	memset(&sl->dma, 0, sizeof(sl->dma));
	sl->busy = false;
	atomic_fetch_sub_explicit(&c->admin_outstanding, 1, memory_order_relaxed);
}

struct admin_done {
	nvme_admin_cb cb;
	void *arg;
	int err;
	struct nvme_cqe cqe;
	bool has_cqe;
};

static void run_done(struct admin_done *d, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (d[i].cb)
			d[i].cb(d[i].arg, d[i].err, d[i].has_cqe ? &d[i].cqe : NULL);
}

/* Every outstanding admin command's callback runs with err (those whose
 * callback has not run yet).  release: the device can no longer touch their
 * buffers (disabled, reset or gone), so the slots are freed too; otherwise
 * they stay busy until their CQE or a disable. */
void nvme_ctrl_admin_abandon(struct nvme_ctrl *c, int err, bool release)
{
	struct admin_done d[NVME_ADMIN_SLOTS];
	unsigned n = 0;
	pthread_mutex_lock(&c->admin_lock);
	if (release)
		__atomic_store_n(&c->admin_ready, false, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < NVME_ADMIN_SLOTS; i++) {
		struct nvme_admin_slot *sl = &c->slots[i];
		if (!sl->busy)
			continue;
		if (!sl->cb_done) {
			d[n++] = (struct admin_done){.cb = sl->cb, .arg = sl->arg, .err = err};
			sl->cb_done = true;
		}
		if (release)
			slot_release(c, sl);
	}
	pthread_mutex_unlock(&c->admin_lock);
	run_done(d, n);
}

/* Reap the admin CQ and expire timed-out commands; callbacks run after the
 * lock is dropped (they may submit again).  Any thread. */
void nvme_ctrl_admin_reap(struct nvme_ctrl *c)
{
	struct admin_done d[NVME_ADMIN_SLOTS * 2];
	unsigned n = 0;
	bool expired = false;
	pthread_mutex_lock(&c->admin_lock);
	if (!c->admin_ready || !c->bus) {
		pthread_mutex_unlock(&c->admin_lock);
		return;
	}
	unsigned consumed = 0;
	for (;;) {
		volatile struct nvme_cqe *e = &c->acq[c->acq_head];
		/* acquire on the phase tag, the device's last (release) store:
		 * see nvme_qpair_reap; status is not read again below */
		uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
		if (NVME_CQE_PHASE(st) != c->acq_phase)
			break;
		struct nvme_cqe cqe = {.dw0 = e->dw0,
		                       .dw1 = e->dw1,
		                       .sq_head = e->sq_head,
		                       .sq_id = e->sq_id,
		                       .cid = e->cid,
		                       .status = NVME_CQE_STATUS(st)};
		if (++c->acq_head == NVME_ADMIN_ENTRIES) {
			c->acq_head = 0;
			c->acq_phase ^= 1;
		}
		consumed++;
		/* the admin SQ's head, as the device reports it */
		if (cqe.sq_head < NVME_ADMIN_ENTRIES)
			c->asq_head = cqe.sq_head;
		struct nvme_admin_slot *sl = &c->slots[ADMIN_CID_SLOT(cqe.cid) % NVME_ADMIN_SLOTS];
		if (ADMIN_CID_SLOT(cqe.cid) >= NVME_ADMIN_SLOTS || !sl->busy ||
		    sl->cid != cqe.cid) {
			c->admin_bogus++;
			log_warn("%s: dropping admin completion for unknown cid 0x%x", c->name,
			         cqe.cid);
			continue;
		}
		if (!sl->cb_done) {
			int err = nvme_status_errno(cqe.status);
			if (err == 0 && sl->len && (sl->opc & 2) && sl->ubuf)
				memcpy(sl->ubuf, sl->dma.vaddr, sl->len);
			if (err < 0)
				log_debug("%s: admin opcode 0x%02x failed: %s (status 0x%x)",
				          c->name, sl->opc, nvme_status_str(cqe.status),
				          cqe.status);
			d[n++] = (struct admin_done){
			    .cb = sl->cb, .arg = sl->arg, .err = err, .cqe = cqe, .has_cqe = true};
		}
		slot_release(c, sl); /* its CQE is here: the device is done with the buffer */
	}
	if (consumed)
		nvme_bus_doorbell(
		    c->bus, (volatile uint32_t *)(c->bus->bar0 + nvme_cq_hdbl_off(0, c->dstrd)),
		    c->acq_head);
	uint64_t now = nvme_now_ns();
	for (unsigned i = 0; i < NVME_ADMIN_SLOTS; i++) {
		struct nvme_admin_slot *sl = &c->slots[i];
		if (sl->busy && !sl->cb_done && now > sl->deadline_ns) {
			log_err("%s: admin command opcode 0x%02x timed out", c->name, sl->opc);
			d[n++] =
			    (struct admin_done){.cb = sl->cb, .arg = sl->arg, .err = -ETIMEDOUT};
			/* the slot and its buffer wait for the CQE or a disable */
			sl->cb_done = true;
			expired = true;
		}
	}
	pthread_mutex_unlock(&c->admin_lock);
	run_done(d, n);
	if (expired)
		recov_reset_async(c, "an admin command timed out");
}

int nvme_ctrl_admin_submit(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
                           nvme_admin_cb cb, void *arg, uint32_t timeout_ms)
{
	if (len > NVME_ENGINE_MAX_XFER)
		return -EINVAL;
	struct nvme_dma_region dma = {0};
	uint64_t iova = 0;
	size_t dlen = (len + NVME_PAGE_SIZE - 1) & ~(size_t)(NVME_PAGE_SIZE - 1);
	if (len) {
		/* the data pages, then one page for a PRP list */
		int rc =
		    nvme_dma_alloc(dlen + NVME_PAGE_SIZE, c->bus ? c->bus->numa_node : -1, &dma);
		if (rc < 0)
			return rc;
		if ((cmd->opc & 1) && buf)
			memcpy(dma.vaddr, buf, len);
	}
	int rc = 0;
	pthread_mutex_lock(&c->admin_lock);
	if (!c->bus) {
		rc = -ENODEV;
		goto unlock;
	}
	if (!c->admin_ready) {
		rc = -EAGAIN;
		goto unlock;
	}
	struct nvme_admin_slot *sl = NULL;
	unsigned idx = 0;
	for (; idx < NVME_ADMIN_SLOTS; idx++)
		if (!c->slots[idx].busy) {
			sl = &c->slots[idx];
			break;
		}
	/* a free slot implies a free SQ entry unless the device's sq_head is stale */
	if (!sl || (uint16_t)((c->asq_tail + 1u) % NVME_ADMIN_ENTRIES) == c->asq_head) {
		rc = -EAGAIN;
		goto unlock;
	}
	struct nvme_sqe sqe = *cmd;
	sqe.flags = 0; /* PRPs */
	sqe.cid = (uint16_t)(((unsigned)++c->admin_gen << 6) | idx);
	if (len) {
		rc = nvme_dma_map(c->bus, &dma, &iova);
		if (rc < 0)
			goto unlock;
		rc = nvme_prp_build(iova, len, (uint64_t *)((uint8_t *)dma.vaddr + dlen),
		                    iova + dlen, &sqe.prp1, &sqe.prp2);
		if (rc < 0) {
			nvme_dma_unmap(c->bus, &dma, iova);
			goto unlock;
		}
	}
	*sl = (struct nvme_admin_slot){.busy = true,
	                               .cid = sqe.cid,
	                               .opc = cmd->opc,
	                               .cb = cb,
	                               .arg = arg,
	                               .ubuf = buf,
	                               .len = len,
	                               .dma = dma,
	                               .dma_iova = iova,
	                               /* 0: none (AERs wait for an event) */
	                               .deadline_ns = timeout_ms ? nvme_now_ns() + timeout_ms * 1000000ull
	                                                         : UINT64_MAX};
	dma.vaddr = NULL; /* the slot's now */
	unsigned before = atomic_fetch_add_explicit(&c->admin_outstanding, 1, memory_order_relaxed);
	c->asq[c->asq_tail] = sqe;
	c->asq_tail = (uint16_t)((c->asq_tail + 1) % NVME_ADMIN_ENTRIES);
	nvme_bus_doorbell(c->bus,
	                  (volatile uint32_t *)(c->bus->bar0 + nvme_sq_tdbl_off(0, c->dstrd)),
	                  c->asq_tail);
	pthread_mutex_unlock(&c->admin_lock);
	/* the recovery thread reaps while anything is outstanding, at once
	 * when it is more than the AERs (which it polls slowly) */
	if (c->thr_started &&
	    (before == 0 || (cmd->opc != NVME_ADM_ASYNC_EVENT &&
	                     before <= atomic_load_explicit(&c->aers_armed, memory_order_relaxed))))
		recov_kick(c);
	return 0;
unlock:
	pthread_mutex_unlock(&c->admin_lock);
	if (dma.vaddr)
		nvme_dma_free(&dma);
	return rc;
}

int nvme_ctrl_admin_async(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
                          nvme_admin_cb cb, void *arg)
{
	int st = atomic_load_explicit(&c->state, memory_order_acquire);
	if (st == NVME_CTRL_REMOVED || st == NVME_CTRL_FAILED)
		return -ENODEV;
	return nvme_ctrl_admin_submit(c, cmd, buf, len, cb, arg, NVME_ADMIN_TIMEOUT_MS);
}

struct sync_wait {
	_Atomic int done;
	int err;
	struct nvme_cqe cqe;
};

static void sync_cb(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct sync_wait *w = arg;
	w->err = err;
	if (cqe)
		w->cqe = *cqe;
	atomic_store_explicit(&w->done, 1, memory_order_release);
}

/* Past its deadline, take the callback of a synchronous command away from
 * the reaper (its slot and buffer stay busy until its CQE or a release: the
 * buffer invariant).  false: the callback has been taken already (it is
 * running or about to), so the caller waits for it a moment longer. */
static bool sync_expire(struct nvme_ctrl *c, struct sync_wait *w)
{
	bool taken = false;
	pthread_mutex_lock(&c->admin_lock);
	for (unsigned i = 0; i < NVME_ADMIN_SLOTS; i++) {
		struct nvme_admin_slot *sl = &c->slots[i];
		if (sl->busy && sl->cb == sync_cb && sl->arg == w && !sl->cb_done) {
			sl->cb_done = true;
			taken = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->admin_lock);
	return taken;
}

/* Submit and poll the admin CQ on this thread until the callback ran (the
 * reaper's timeout runs it, or a reset or removal abandons it).  Bounded on
 * its own: when the admin queue is not being reaped at all (torn down by a
 * reset that could not disable the device), the wait ends a second after
 * the command's timeout with -ETIMEDOUT. */
static int admin_sync(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
                      struct nvme_cqe *cqe_out, uint32_t timeout_ms)
{
	struct sync_wait w = {0};
	int rc = nvme_ctrl_admin_submit(c, cmd, buf, len, sync_cb, &w, timeout_ms);
	if (rc < 0)
		return rc;
	uint64_t deadline = nvme_now_ns() + ((uint64_t)timeout_ms + 1000) * 1000000ull;
	unsigned spins = 0;
	while (!atomic_load_explicit(&w.done, memory_order_acquire)) {
		nvme_ctrl_admin_reap(c);
		if (atomic_load_explicit(&w.done, memory_order_acquire))
			break;
		/* spin briefly (a local or inline device answers in microseconds),
		 * then back off so a device thread on the same core can run */
		if (spins++ < 2000) {
			nvme_cpu_relax();
			continue;
		}
		sleep_us(20);
		uint64_t cut = atomic_load_explicit(&c->stop_cut_ns, memory_order_relaxed);
		if ((nvme_now_ns() > deadline || (cut && nvme_now_ns() > cut)) &&
		    sync_expire(c, &w)) {
			log_err("%s: admin opcode 0x%02x: no answer and no recovery within %u ms",
			        c->name, cmd->opc, timeout_ms + 1000);
			return -ETIMEDOUT;
		}
		/* a failed controller will never answer: say so now, not at the timeout */
		if ((spins & 63) == 0) {
			pthread_mutex_lock(&c->admin_lock);
			uint32_t s = c->bus ? csts(c) : 0xffffffffu;
			pthread_mutex_unlock(&c->admin_lock);
			if (s == 0xffffffffu) {
				log_err("%s: admin opcode 0x%02x: device not responding", c->name,
				        cmd->opc);
				/* gone: nothing can be written any more */
				nvme_ctrl_admin_abandon(c, -ENODEV, true);
			} else if (s & NVME_CSTS_CFS) {
				log_err(
				    "%s: admin opcode 0x%02x: controller fatal status (CSTS 0x%x)",
				    c->name, cmd->opc, s);
				nvme_ctrl_admin_abandon(c, -EIO, false);
			}
		}
	}
	if (cqe_out)
		*cqe_out = w.cqe;
	return w.err;
}

int nvme_ctrl_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                    struct nvme_cqe *cqe_out)
{
	int st = atomic_load_explicit(&c->state, memory_order_acquire);
	if (st == NVME_CTRL_REMOVED || st == NVME_CTRL_FAILED)
		return -ENODEV;
	return admin_sync(c, cmd, buf, len, cqe_out, NVME_ADMIN_TIMEOUT_MS);
}

int nvme_ctrl_admin_timeout(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                            struct nvme_cqe *cqe_out, uint32_t timeout_ms)
{
	return admin_sync(c, cmd, buf, len, cqe_out, timeout_ms);
}

static void trim_copy(char *dst, const char *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)dst[i] < 0x20 || (unsigned char)dst[i] > 0x7e)
			dst[i] = dst[i] ? '?' : ' ';
	while (n > 0 && dst[n - 1] == ' ')
		dst[--n] = 0;
	size_t lead = 0;
	while (dst[lead] == ' ')
		lead++;
	if (lead)
		memmove(dst, dst + lead, n - lead + 1);
}

static int identify(struct nvme_ctrl *c, uint32_t cns, uint32_t nsid, void *buf)
{
	struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .nsid = nsid, .cdw10 = cns};
	return admin_sync(c, &cmd, buf, 4096, NULL, NVME_ADMIN_TIMEOUT_MS);
}

/* Write Zeroes and DSM limits from Identify Controller NVM (CNS 06h); a
 * controller without it (before NVMe 2.0, often) has none. */
static void read_nvm_limits(struct nvme_ctrl *c, struct nvme_ctrl_info *in)
{
	in->max_wz_bytes = 0;
	in->dsm_max_ranges = NVME_DSM_MAX_RANGES;
	in->dsm_max_range_blocks = UINT32_MAX;
	in->dsm_max_blocks = 0;
	struct nvme_id_ctrl_nvm *nvm = calloc(1, sizeof(*nvm));
	if (!nvm)
		return;
	if (identify(c, NVME_ID_CNS_CTRL_NVM, 0, nvm) == 0) {
		if (nvm->wzsl && nvm->wzsl < 32)
			in->max_wz_bytes = (uint64_t)NVME_PAGE_SIZE << nvm->wzsl;
		if (nvm->dmrl)
			in->dsm_max_ranges = nvm->dmrl;
		if (nvm->dmrsl)
			in->dsm_max_range_blocks = nvm->dmrsl;
		in->dsm_max_blocks = nvm->dmsl;
	}
	free(nvm);
}

int nvme_ctrl_set_num_queues(struct nvme_ctrl *c, unsigned want, unsigned *granted)
{
	struct nvme_sqe cmd = {.opc = NVME_ADM_SET_FEATURES,
	                       .cdw10 = NVME_FEAT_NUM_QUEUES,
	                       .cdw11 = ((want - 1u) << 16) | (want - 1u)};
	struct nvme_cqe cqe;
	int rc = admin_sync(c, &cmd, NULL, 0, &cqe, NVME_ADMIN_TIMEOUT_MS);
	if (rc < 0) {
		log_err("%s: Set Features Number of Queues failed: %s", c->name, strerror(-rc));
		return rc;
	}
	unsigned nsq = (cqe.dw0 & 0xffff) + 1u, ncq = (cqe.dw0 >> 16) + 1u;
	unsigned g = want;
	if (nsq < g)
		g = nsq;
	if (ncq < g)
		g = ncq;
	if (g < want)
		log_info("%s: asked for %u I/O queues, the controller granted %u", c->name, want,
		         g);
	*granted = g;
	return 0;
}

/* The active namespace IDs, at most NVME_MAX_NAMESPACES of them (one
 * buffer of that size, whatever NN says): CNS 02h returns up to 1024 IDs
 * greater than the one given, in increasing order, a zero ending the list.
 * A list breaking that order, or naming the broadcast NSID, is cut there. */
static int active_nsids(struct nvme_ctrl *c, uint32_t nn, uint32_t **out, unsigned *cnt)
{
	uint32_t *page = calloc(1024, sizeof(uint32_t));
	uint32_t *ids = calloc(NVME_MAX_NAMESPACES, sizeof(uint32_t));
	unsigned n = 0;
	int rc = -ENOMEM;
	if (!page || !ids)
		goto out;
	uint32_t after = 0;
	for (;;) {
		rc = identify(c, NVME_ID_CNS_NS_ACTIVE_LIST, after, page);
		if (rc < 0) {
			if (rc != -EINVAL) /* a failure, not a controller without the list */
				goto out;
			rc = 0;
			if (after) /* a later page refused: keep what we have */
				break;
			/* pre-1.1 controllers: every NSID up to NN is a candidate */
			uint32_t probe = nn < NVME_MAX_NAMESPACES ? nn : NVME_MAX_NAMESPACES;
			if (nn > NVME_MAX_NAMESPACES)
				log_warn("%s: NN %u: only namespaces 1..%u are probed", c->name, nn,
				         probe);
			log_info("%s: no active namespace list; probing 1..%u", c->name, probe);
			for (n = 0; n < probe; n++)
				ids[n] = n + 1;
			break;
		}
		bool cut = false;
		unsigned k = 0;
		for (; k < 1024 && page[k] && !cut; k++) {
			uint32_t id = page[k];
			if (id == 0xffffffffu) {
				log_warn("%s: active namespace list: 0x%x is not a namespace ID; the "
				         "list is cut there",
				         c->name, id);
				cut = true;
			} else if (id <= after) {
				log_warn("%s: active namespace list: NSID %u after %u is not ascending; "
				         "the list is cut there",
				         c->name, id, after);
				cut = true;
			} else if (n == NVME_MAX_NAMESPACES) {
				log_warn("%s: more than %u active namespaces: only the first %u are used",
				         c->name, NVME_MAX_NAMESPACES, NVME_MAX_NAMESPACES);
				cut = true;
			} else {
				ids[n++] = id;
				after = id;
			}
		}
		/* a full page may have a next one (IDs above its last) */
		if (cut || k < 1024 || after == 0xfffffffeu)
			break;
	}
	*out = ids;
	*cnt = n;
	ids = NULL;
out:
	free(ids);
	free(page);
	return rc;
}

/* The metadata and protection information of namespace nsid's format fmt
 * into ns: what nvmefs serves and how (nvme_ns_info ms .. prinfo).  1: a
 * format nvmefs does not serve (the reason logged), 0: served, < 0: the
 * Identify it needed failed. */
static int probe_md(struct nvme_ctrl *c, uint32_t nsid, const struct nvme_id_ns *id, unsigned fmt,
                    struct nvme_ns_info *ns)
{
	unsigned ms = id->lbaf[fmt].ms, type = NVME_DPS_TYPE(id->dps);
	bool ext = id->flbas & NVME_FLBAS_EXT;
	unsigned pif = NVME_PIF_16, sts = 0;

	if (!ms)
		return 0; /* DPS means nothing without metadata */
	if (type > 3) {
		log_warn("%s: namespace %u: protection information type %u is reserved; skipped",
		         c->name, nsid, type);
		return 1;
	}
	/* the guard format is the NVM command set's (ELBAF), when there is one */
	if (type && (c->info->ctratt & NVME_CTRATT_ELBAS)) {
		struct nvme_id_ns_nvm *nvm = calloc(1, sizeof(*nvm));
		if (!nvm)
			return -ENOMEM;
		struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY,
		                       .nsid = nsid,
		                       .cdw10 = NVME_ID_CNS_NS_CSI,
		                       .cdw11 = (uint32_t)NVME_CSI_NVM << NVME_ID_CSI_SHIFT};
		int rc = admin_sync(c, &cmd, nvm, sizeof(*nvm), NULL, NVME_ADMIN_TIMEOUT_MS);
		if (rc == 0) {
			pif = NVME_ELBAF_PIF(nvm->elbaf[fmt]);
			sts = NVME_ELBAF_STS(nvm->elbaf[fmt]);
		}
		free(nvm);
		if (rc == -EINVAL) {
			log_warn("%s: namespace %u: the controller offers extended LBA formats but "
			         "refused their Identify: its protection information format is "
			         "unknown; skipped",
			         c->name, nsid);
			return 1;
		}
		if (rc < 0)
			return rc;
	}
	unsigned pis = pif == NVME_PIF_64 ? 16 : 8;
	if (type && pif != NVME_PIF_16 && pif != NVME_PIF_64) {
		log_warn("%s: namespace %u: protection information with a %s guard, which nvmefs "
		         "does not serve (16- and 64-bit guards only); skipped",
		         c->name, nsid, pif == NVME_PIF_32 ? "32-bit" : "reserved");
		return 1;
	}
	if (type && sts) {
		log_warn("%s: namespace %u: protection information with %u-bit storage tags, "
		         "which nvmefs does not use; skipped",
		         c->name, nsid, sts);
		return 1;
	}
	if (type && ms < pis) {
		log_warn("%s: namespace %u: %u bytes of metadata cannot hold its %u bytes of "
		         "protection information; skipped",
		         c->name, nsid, ms, pis);
		return 1;
	}
	/* with PRACT, metadata of just the PI never crosses the bus; anything
	 * else does, and extended it is interleaved with the data */
	bool crosses = !type || ms > pis;
	if (crosses && ext) {
		log_warn("%s: namespace %u: %u bytes of metadata per block %s, extended (after each "
		         "block's data): a file cannot show blocks interleaved with metadata without "
		         "copying each; skipped (format it with separate metadata, or metadata of "
		         "just the protection information)",
		         c->name, nsid, ms, type ? "beyond its protection information" : "without protection information");
		return 1;
	}
	if (crosses && ms > NVME_MD_HALF) {
		log_warn("%s: namespace %u: %u bytes of metadata per block, more than nvmefs's "
		         "metadata buffer (%u bytes) holds; skipped",
		         c->name, nsid, ms, NVME_MD_HALF);
		return 1;
	}
	ns->ms = (uint16_t)ms;
	ns->md_ext = ext;
	ns->md_buf = crosses;
	ns->pi_type = (uint8_t)type;
	if (type) {
		ns->pi_guard = pif == NVME_PIF_64 ? 64 : 16;
		ns->pi_first = id->dps & NVME_DPS_FIRST;
		/* insert and strip it; check the guard, and the reference tag
		 * (the LBA) where it has one: Type 3's is not the LBA */
		ns->prinfo = NVME_RW_PRACT | NVME_RW_PRCHK_GUARD | (type != 3 ? NVME_RW_PRCHK_REF : 0);
	}
	return 0;
}

/* Identify namespace nsid into ns.  1: present but not usable (skipped,
 * with a message), 0: usable, < 0: the command failed. */
static int probe_ns(struct nvme_ctrl *c, uint32_t nsid, struct nvme_id_ns *id,
                    struct nvme_ns_info *ns)
{
	int rc = identify(c, NVME_ID_CNS_NS, nsid, id);
	if (rc < 0) {
		log_warn("%s: Identify namespace %u failed: %s", c->name, nsid, strerror(-rc));
		return rc;
	}
	if (id->nsze == 0)
		return 1; /* inactive */
	/* FLBAS bits 3:0 are the format's low bits; with more than 16 formats
	 * bits 6:5 are its high bits */
	unsigned fmt = id->flbas & 0xf;
	if (id->nlbaf >= 16)
		fmt |= ((id->flbas >> 5) & 3u) << 4;
	if (fmt > id->nlbaf || fmt >= 64 || id->lbaf[fmt].lbads < 9 || id->lbaf[fmt].lbads > 16) {
		log_warn("%s: namespace %u has an unusable LBA format (%u, lbads %u); skipped",
		         c->name, nsid, fmt, fmt < 64 ? id->lbaf[fmt].lbads : 0);
		return 1;
	}
	/* its size in bytes is a file's size (an off_t) */
	if (id->nsze > (uint64_t)INT64_MAX >> id->lbaf[fmt].lbads) {
		log_warn("%s: namespace %u reports %llu blocks of %u bytes, more than 2^63 - 1 "
		         "bytes; skipped",
		         c->name, nsid, (unsigned long long)id->nsze, 1u << id->lbaf[fmt].lbads);
		return 1;
	}
	if ((1u << id->lbaf[fmt].lbads) > c->info->max_xfer) {
		log_warn(
		    "%s: namespace %u's block (%u bytes) exceeds the transfer limit (%u bytes); "
		    "skipped",
		    c->name, nsid, 1u << id->lbaf[fmt].lbads, c->info->max_xfer);
		return 1;
	}
	memset(ns, 0, sizeof(*ns));
	rc = probe_md(c, nsid, id, fmt, ns);
	if (rc != 0)
		return rc;
	ns->nsid = nsid;
	ns->nlba = id->nsze;
	ns->lba_shift = id->lbaf[fmt].lbads;
	ns->lba_size = 1u << ns->lba_shift;
	ns->dealloc_zeroes = (id->dlfeat & 7) == 1;
	return 0;
}

/* Read the namespaces into a new info (a copy of c->info's controller part). */
static int read_namespaces(struct nvme_ctrl *c, uint32_t nn, struct nvme_ctrl_info **out)
{
	uint32_t *list = NULL;
	unsigned cnt = 0;
	struct nvme_id_ns *id = calloc(1, sizeof(*id));
	struct nvme_ctrl_info *info = NULL;
	int rc = -ENOMEM;
	if (!id)
		goto out;
	rc = active_nsids(c, nn, &list, &cnt);
	if (rc < 0)
		goto out;
	info = calloc(1, sizeof(*info) + cnt * sizeof(struct nvme_ns_info));
	if (!info) {
		rc = -ENOMEM;
		goto out;
	}
	*info = *c->info;
	info->nr_ns = 0;
	for (unsigned i = 0; i < cnt; i++) {
		/* a command that failed says nothing about the namespace: the
		 * whole read fails (a bring-up then fails and is tried again)
		 * rather than a namespace looking gone for good */
		int prc = probe_ns(c, list[i], id, &info->ns[info->nr_ns]);
		if (prc < 0) {
			rc = prc;
			goto out;
		}
		if (prc == 0)
			info->nr_ns++;
	}
	*out = info;
	info = NULL;
	rc = 0;
out:
	free(info);
	free(list);
	free(id);
	return rc;
}

/* What a namespace with metadata is served as. */
static void log_md(const struct nvme_ctrl *c, const struct nvme_ns_info *ns)
{
	if (!ns->ms)
		return;
	if (!ns->pi_type) {
		log_info("%s: namespace %u: %u bytes of separate metadata per block, no protection "
		         "information: written as zeroes, read and dropped",
		         c->name, ns->nsid, ns->ms);
		return;
	}
	log_info("%s: namespace %u: protection information Type %u, %u-bit guard, in the %s %u of "
	         "%u bytes of %s metadata: the controller inserts it and checks the guard%s",
	         c->name, ns->nsid, ns->pi_type, ns->pi_guard, ns->pi_first ? "first" : "last",
	         ns->pi_guard == 64 ? 16 : 8, ns->ms, ns->md_ext ? "extended" : "separate",
	         ns->pi_type != 3 ? " and the reference tag (the LBA)" : "");
}

/* The same LBA format, metadata and protection information. */
static bool same_format(const struct nvme_ns_info *a, const struct nvme_ns_info *b)
{
	return a->lba_shift == b->lba_shift && a->ms == b->ms && a->md_ext == b->md_ext &&
	       a->pi_type == b->pi_type && a->pi_guard == b->pi_guard && a->pi_first == b->pi_first;
}

/* At bring-up, before anyone else sees c: c->info has room for every
 * namespace (allocated once, it never moves). */
static int load_namespaces(struct nvme_ctrl *c, uint32_t nn)
{
	struct nvme_ctrl_info *info;
	int rc = read_namespaces(c, nn, &info);
	if (rc < 0)
		return rc;
	memcpy(c->info->ns, info->ns, info->nr_ns * sizeof(info->ns[0]));
	__atomic_store_n(&c->info->nr_ns, info->nr_ns, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < info->nr_ns; i++)
		log_md(c, &info->ns[i]);
	free(info);
	return 0;
}

static const struct nvme_ns_info *info_ns(const struct nvme_ctrl_info *in, uint32_t nsid)
{
	for (unsigned i = 0; i < in->nr_ns; i++)
		if (in->ns[i].nsid == nsid)
			return &in->ns[i];
	return NULL;
}

static bool nsid_listed(const uint32_t *l, unsigned n, uint32_t nsid)
{
	for (unsigned i = 0; i < n; i++)
		if (l[i] == nsid)
			return true;
	return false;
}

static void ns_change(struct nvme_ns_change *out, unsigned max, unsigned *nr,
                      enum nvme_ns_change_kind kind, const struct nvme_ns_info *ns,
                      uint64_t old_nlba)
{
	if (*nr < max)
		out[*nr] = (struct nvme_ns_change){.kind = kind, .ns = *ns, .old_nlba = old_nlba};
	(*nr)++;
}

int nvme_ctrl_ns_update(struct nvme_ctrl *c, const uint32_t *changed, unsigned nchanged, bool all,
                        struct nvme_ns_change *out, unsigned max, unsigned *nr)
{
	struct nvme_ctrl_info *in = c->info;
	uint32_t *list = NULL;
	unsigned cnt = 0, n = 0;
	struct nvme_id_ns *id = calloc(1, sizeof(*id));
	int rc = -ENOMEM;
	*nr = 0;
	if (!id)
		goto out;
	rc = active_nsids(c, in->nn, &list, &cnt);
	if (rc < 0)
		goto out;
	/* the entries known: gone, or (re-)identified when named */
	for (unsigned i = 0; i < in->nr_ns; i++) {
		struct nvme_ns_info *e = &in->ns[i];
		bool active = nsid_listed(list, cnt, e->nsid);
		bool removed = __atomic_load_n(&e->removed, __ATOMIC_RELAXED);
		if (!active) {
			if (!removed) {
				__atomic_store_n(&e->removed, true, __ATOMIC_RELEASE);
				log_warn("%s: namespace %u was detached: its I/O fails from now on",
				         c->name, e->nsid);
				ns_change(out, max, &n, NVME_NS_REMOVED, e, e->nlba);
			}
			continue;
		}
		if (!removed && !all && !nsid_listed(changed, nchanged, e->nsid))
			continue;
		struct nvme_ns_info now;
		int prc = probe_ns(c, e->nsid, id, &now);
		if (prc < 0) {
			rc = prc;
			goto out;
		}
		uint64_t old = e->nlba;
		if (removed) {
			/* attached again: the entry comes back when its format is the
			 * same (the fields readers cache do not change in place) */
			if (prc == 0 && same_format(&now, e)) {
				__atomic_store_n(&e->nlba, now.nlba, __ATOMIC_RELAXED);
				__atomic_store_n(&e->failed, false, __ATOMIC_RELAXED);
				__atomic_store_n(&e->removed, false, __ATOMIC_RELEASE);
				log_info("%s: namespace %u attached again (%llu blocks)", c->name,
				         e->nsid, (unsigned long long)now.nlba);
				ns_change(out, max, &n, NVME_NS_ADDED, e, 0);
			} else {
				log_warn("%s: namespace %u attached again with another format: not "
				         "used until a restart",
				         c->name, e->nsid);
			}
			continue;
		}
		if (__atomic_load_n(&e->failed, __ATOMIC_RELAXED))
			continue; /* failed for good: nothing to follow */
		if (prc == 1 || !same_format(&now, e)) {
			log_err("%s: namespace %u changed its format: its I/O fails from now on",
			        c->name, e->nsid);
			__atomic_store_n(&e->failed, true, __ATOMIC_RELEASE);
			ns_change(out, max, &n, NVME_NS_REFORMATTED, e, old);
		} else if (now.nlba > old) {
			__atomic_store_n(&e->nlba, now.nlba, __ATOMIC_RELEASE);
			log_info("%s: namespace %u grew from %llu to %llu blocks", c->name, e->nsid,
			         (unsigned long long)old, (unsigned long long)now.nlba);
			ns_change(out, max, &n, NVME_NS_GROWN, e, old);
		} else if (now.nlba < old) {
			/* the blocks past the new end are gone, and whatever lives
			 * on the namespace may have used them */
			log_err("%s: namespace %u shrank from %llu to %llu blocks: refused, its I/O "
			        "fails from now on",
			        c->name, e->nsid, (unsigned long long)old, (unsigned long long)now.nlba);
			__atomic_store_n(&e->failed, true, __ATOMIC_RELEASE);
			struct nvme_ns_info shown = *e;
			shown.nlba = now.nlba; /* the change says what the device has */
			ns_change(out, max, &n, NVME_NS_SHRUNK, &shown, old);
		}
	}
	/* namespaces new to the list: appended, then published */
	for (unsigned k = 0; k < cnt; k++) {
		if (info_ns(in, list[k]))
			continue;
		if (in->nr_ns >= NVME_MAX_NAMESPACES) {
			log_warn("%s: namespace %u attached: more than %u namespaces, not used",
			         c->name, list[k], NVME_MAX_NAMESPACES);
			continue;
		}
		struct nvme_ns_info *e = &in->ns[in->nr_ns];
		int prc = probe_ns(c, list[k], id, e);
		if (prc < 0) {
			rc = prc;
			goto out;
		}
		if (prc == 1)
			continue;
		__atomic_store_n(&in->nr_ns, in->nr_ns + 1, __ATOMIC_RELEASE);
		log_info("%s: namespace %u attached (%llu blocks of %u bytes)", c->name, e->nsid,
		         (unsigned long long)e->nlba, e->lba_size);
		log_md(c, e);
		ns_change(out, max, &n, NVME_NS_ADDED, e, 0);
	}
	rc = 0;
out:
	*nr = n;
	if (n)
		recov_ns_invalidate(c);
	free(list);
	free(id);
	return rc;
}

/* After a reset: a namespace whose size or format changed, or that is gone,
 * fails its I/O with -EIO from now on (the file system on it may no longer
 * fit); new namespaces are ignored until a restart.  strict (re-attach):
 * any difference is -ESTALE and nothing is marked. */
int nvme_ctrl_recheck_namespaces(struct nvme_ctrl *c, bool strict)
{
	struct nvme_ctrl_info *now;
	int rc = read_namespaces(c, c->info->nn, &now);
	if (rc < 0)
		return rc;
	unsigned changed = 0;
	unsigned present = 0;
	for (unsigned i = 0; i < c->info->nr_ns; i++) {
		struct nvme_ns_info *old = &c->info->ns[i];
		/* one an event saw detached is not expected back */
		if (__atomic_load_n(&old->removed, __ATOMIC_RELAXED))
			continue;
		present++;
		const struct nvme_ns_info *n = info_ns(now, old->nsid);
		if (n && n->nlba == old->nlba && same_format(n, old))
			continue;
		changed++;
		if (strict)
			log_err("%s: namespace %u %s", c->name, old->nsid,
			        n ? "changed size or format" : "is gone");
		else if (!old->failed) {
			log_err("%s: namespace %u %s after the reset: its I/O fails from now on",
			        c->name, old->nsid, n ? "changed size or format" : "is gone");
			__atomic_store_n(&old->failed, true, __ATOMIC_RELEASE);
		}
	}
	if (strict && now->nr_ns != present)
		changed++;
	free(now);
	return strict && changed ? -ESTALE : 0;
}

int nvme_ctrl_db_queues(struct nvme_ctrl *c, const struct nvme_bus *bus, uint32_t dstrd,
                        unsigned want, bool strict)
{
	unsigned long long stride = 4ull << dstrd;
	int64_t max = nvme_db_max_qid(bus->bar0_len, dstrd);
	if (max >= 1 && (unsigned)max >= want)
		return (int)want;
	if (max < 1 || strict) {
		/* the first queue whose doorbells do not fit: its CQ head doorbell */
		unsigned q = max < 0 ? 0 : (unsigned)max + 1;
		log_err("%s: CAP.DSTRD %u (doorbell stride %llu bytes) puts the doorbells of queue %u "
		        "at BAR0 offset 0x%llx, outside a BAR0 of %zu bytes (%u I/O queue%s %s); "
		        "refused",
		        c->name, dstrd, stride, q, NVME_REG_DBS + (2ull * q + 1) * stride,
		        bus->bar0_len, want, want == 1 ? "" : "s", strict ? "in use" : "asked");
		return -EINVAL;
	}
	log_warn("%s: CAP.DSTRD %u (doorbell stride %llu bytes): a BAR0 of %zu bytes holds the "
	         "doorbells of %u of the %u I/O queues asked; using %u",
	         c->name, dstrd, stride, bus->bar0_len, (unsigned)max, want, (unsigned)max);
	return (int)max;
}

static unsigned pow2_floor(unsigned v)
{
	unsigned p = 1;
	while (p * 2 <= v)
		p *= 2;
	return p;
}

int nvme_ctrl_open(struct nvme_bus *bus, const struct nvme_ctrl_opts *o, struct nvme_ctrl **out)
{
	struct nvme_ctrl *c = calloc(1, sizeof(*c));
	struct nvme_id_ctrl *id = NULL;
	int rc = -ENOMEM;
	if (!c)
		return -ENOMEM;
	c->bus = bus;
	c->opts = *o;
	snprintf(c->name, sizeof(c->name), "%s", o->name && *o->name ? o->name : bus->name);
	c->opts.name = c->name;
	if (c->opts.io_retries > 10)
		c->opts.io_retries = 10;
	pthread_mutex_init(&c->admin_lock, NULL);
	pthread_mutex_init(&c->thr_lock, NULL);
	pthread_mutex_init(&c->reset_lock, NULL);
	pthread_mutex_init(&c->qp_lock, NULL);
	pthread_mutex_init(&c->event_lock, NULL);
	pthread_mutex_init(&c->aen_lock, NULL);
	pthread_mutex_init(&c->aen_cb_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits on a monotonic clock */
	pthread_cond_init(&c->thr_cond, &ca);
	pthread_cond_init(&c->done_cond, &ca);
	pthread_condattr_destroy(&ca);
	if (c->opts.retry_ms == 0)
		c->opts.retry_ms = 1000;
	if (c->opts.retry_max_ms == 0)
		c->opts.retry_max_ms = NVME_RETRY_MAX_MS;
	if (c->opts.retry_max_ms < c->opts.retry_ms)
		c->opts.retry_max_ms = c->opts.retry_ms;
	c->retry_ms = c->opts.retry_ms;
	atomic_store(&c->state, NVME_CTRL_LIVE); /* the initial state, before any thread sees c */

	/* the registers (a VFIO bus reads them from the mapping) */
	if (!bus->bar0 || bus->bar0_len < NVME_REG_DBS) {
		log_err("%s: BAR0 of %zu bytes cannot hold the controller's registers (0x%x bytes)",
		        c->name, bus->bar0_len, (unsigned)NVME_REG_DBS);
		rc = -EINVAL;
		goto err;
	}
	if (csts(c) == 0xffffffffu) {
		log_err("%s: device not responding (CSTS reads all ones)", c->name);
		rc = -ENODEV;
		goto err;
	}
	c->cap = nvme_bus_read64(bus, NVME_REG_CAP);
	if (c->cap == ~0ull) {
		log_err("%s: device not responding (CAP reads all ones)", c->name);
		rc = -ENODEV;
		goto err;
	}
	c->dstrd = NVME_CAP_DSTRD(c->cap);
	c->ready_timeout_ms = NVME_CAP_TO(c->cap) * 500u;
	if (c->ready_timeout_ms == 0)
		c->ready_timeout_ms = 500;
	if (!(NVME_CAP_CSS(c->cap) & NVME_CAP_CSS_NVM)) {
		log_err("%s: controller does not support the NVM command set (CAP 0x%llx)", c->name,
		        (unsigned long long)c->cap);
		rc = -ENOTSUP;
		goto err;
	}
	if (NVME_CAP_MPSMIN(c->cap) > 0) {
		log_err(
		    "%s: controller's minimum page size is %u KiB; only 4 KiB pages are supported",
		    c->name, 4u << NVME_CAP_MPSMIN(c->cap));
		rc = -ENOTSUP;
		goto err;
	}

	/* normalise the options the qpairs will use */
	unsigned mqe = NVME_CAP_MQES(c->cap) + 1u;
	unsigned depth = c->opts.queue_depth ? c->opts.queue_depth : 256;
	if (depth > mqe)
		depth = mqe;
	if (depth > NVME_MAX_TRACKERS)
		depth = NVME_MAX_TRACKERS;
	depth = pow2_floor(depth); /* power of two: index arithmetic is a mask */
	if (depth < 4) {
		log_err("%s: queue depth %u too small (MQES %u)", c->name, depth, mqe);
		rc = -EINVAL;
		goto err;
	}
	c->opts.queue_depth = depth;
	if (c->opts.cq_budget == 0)
		c->opts.cq_budget = depth / 4 < 64 ? depth / 4 : 64;
	if (c->opts.cq_budget > depth / 2)
		c->opts.cq_budget = depth / 2;
	if (c->opts.io_timeout_ms == 0)
		c->opts.io_timeout_ms = NVME_DEFAULT_IO_TIMEOUT_MS;
	if (c->opts.io_queues == 0)
		c->opts.io_queues = 1;
	if (c->opts.io_queues > NVME_CTRL_MAX_QPAIRS) {
		log_info("%s: %u I/O queues asked; the engine uses at most %u", c->name,
		         c->opts.io_queues, NVME_CTRL_MAX_QPAIRS);
		c->opts.io_queues = NVME_CTRL_MAX_QPAIRS;
	}
	/* no doorbell outside BAR0: every store the engine makes to one is
	 * checked here, once (a reset keeps the bus; an attach checks its own) */
	rc = nvme_ctrl_db_queues(c, bus, c->dstrd, c->opts.io_queues, false);
	if (rc < 0)
		goto err;
	c->opts.io_queues = (unsigned)rc;

	rc = nvme_dma_alloc(ADMIN_MEM, bus->numa_node, &c->admin_mem);
	if (rc < 0)
		goto err;
	rc = nvme_dma_map(bus, &c->admin_mem, &c->admin_iova);
	if (rc < 0) {
		nvme_dma_free(&c->admin_mem);
		goto err;
	}
	c->admin_mapped = true;
	uint8_t *m = c->admin_mem.vaddr;
	c->asq = (struct nvme_sqe *)(m + ASQ_OFF);
	c->acq = (volatile struct nvme_cqe *)(m + ACQ_OFF);

	rc = nvme_ctrl_disable(c, c->ready_timeout_ms);
	if (rc == 0)
		rc = nvme_ctrl_enable(c);
	if (rc < 0)
		goto err_mem;

	c->info = calloc(1, sizeof(*c->info) + NVME_MAX_NAMESPACES * sizeof(struct nvme_ns_info));
	id = calloc(1, sizeof(*id));
	if (!c->info || !id) {
		rc = -ENOMEM;
		goto err_mem;
	}
	rc = identify(c, NVME_ID_CNS_CTRL, 0, id);
	if (rc < 0) {
		log_err("%s: Identify controller failed: %s", c->name, strerror(-rc));
		goto err_mem;
	}
	struct nvme_ctrl_info *in = c->info;
	trim_copy(in->model, id->mn, sizeof(id->mn));
	trim_copy(in->serial, id->sn, sizeof(id->sn));
	trim_copy(in->firmware, id->fr, sizeof(id->fr));
	in->vid = id->vid;
	in->version = nvme_bus_read32(bus, NVME_REG_VS);
	in->cap = c->cap;
	in->mdts = id->mdts;
	in->max_xfer = NVME_ENGINE_MAX_XFER;
	if (id->mdts && id->mdts < 20 && (4096u << id->mdts) < in->max_xfer)
		in->max_xfer = 4096u << id->mdts;
	in->max_entries = mqe;
	in->vwc = id->vwc & NVME_VWC_PRESENT;
	in->oncs = id->oncs;
	in->oacs = id->oacs;
	in->ctratt = id->ctratt;
	in->sgls = id->sgls;
	in->nn = id->nn;
	in->acl = id->acl;
	in->elpe = id->elpe;
	in->lpa = id->lpa;
	in->frmw = id->frmw;
	c->oaes = id->oaes;
	c->aerl = id->aerl;
	read_nvm_limits(c, in);
	in->nr_vectors = o->interrupts ? bus->nr_vectors : 0;
	c->shutdown_timeout_ms = 5000;
	if (id->rtd3e / 1000u > c->shutdown_timeout_ms)
		c->shutdown_timeout_ms = id->rtd3e / 1000u > 60000 ? 60000 : id->rtd3e / 1000u;

	c->asked_queues = c->opts.io_queues;
	rc = nvme_ctrl_set_num_queues(c, c->asked_queues, &in->nr_io_queues);
	if (rc < 0)
		goto err_mem;
	rc = load_namespaces(c, id->nn);
	if (rc < 0)
		goto err_mem;
	log_info("%s: %s (sn %s, fw %s), NVMe %u.%u, %u namespace(s), %u I/O queue(s), max "
	         "transfer %u KiB",
	         c->name, c->info->model, c->info->serial, c->info->firmware,
	         c->info->version >> 16, (c->info->version >> 8) & 0xff, c->info->nr_ns,
	         c->info->nr_io_queues, c->info->max_xfer >> 10);
	free(id);
	rc = recov_start(c);
	if (rc < 0)
		goto err_mem;
	nvme_aen_start(c);
	*out = c;
	return 0;

err_mem:
	/* leave the device disabled so it no longer touches admin memory */
	if (csts(c) != 0xffffffffu) {
		uint32_t cc = nvme_bus_read32(bus, NVME_REG_CC);
		if (cc & NVME_CC_EN) {
			nvme_bus_write32(bus, NVME_REG_CC, cc & ~NVME_CC_EN);
			nvme_ctrl_wait_csts(c, NVME_CSTS_RDY, 0, c->ready_timeout_ms, false,
			          "disabling after a failed start");
		}
	}
	nvme_ctrl_admin_abandon(c, -EIO, true);
	nvme_dma_unmap(bus, &c->admin_mem, c->admin_iova);
	nvme_dma_free(&c->admin_mem);
err:
	free(id);
	free(c->info);
	pthread_mutex_destroy(&c->admin_lock);
	pthread_mutex_destroy(&c->thr_lock);
	pthread_mutex_destroy(&c->reset_lock);
	pthread_mutex_destroy(&c->qp_lock);
	pthread_mutex_destroy(&c->event_lock);
	pthread_mutex_destroy(&c->aen_lock);
	pthread_mutex_destroy(&c->aen_cb_lock);
	pthread_cond_destroy(&c->thr_cond);
	pthread_cond_destroy(&c->done_cond);
	free(c);
	return rc;
}

const struct nvme_ctrl_info *nvme_ctrl_get_info(const struct nvme_ctrl *c)
{
	return c->info;
}

const char *nvme_ctrl_name(const struct nvme_ctrl *c)
{
	return c->name;
}

struct nvme_bus *nvme_ctrl_bus(struct nvme_ctrl *c)
{
	return c->bus;
}

int nvme_ctrl_wire_vector(struct nvme_ctrl *c, unsigned vector, int efd)
{
	struct nvme_bus *bus = c->bus;
	int rc = 0;
	if (vector >= bus->nr_vectors || !bus->ops->irq_set)
		return -ENOTSUP;
	pthread_mutex_lock(&c->admin_lock);
	if (!c->efds) {
		c->efds = malloc(bus->nr_vectors * sizeof(int));
		if (!c->efds) {
			rc = -ENOMEM;
			goto out;
		}
		for (unsigned i = 0; i < bus->nr_vectors; i++)
			c->efds[i] = -1;
	}
	int old = c->efds[vector];
	c->efds[vector] = efd;
	unsigned n = 0;
	for (unsigned i = 0; i < bus->nr_vectors; i++)
		if (c->efds[i] >= 0)
			n = i + 1;
	c->nr_efds = n;
	rc = bus->ops->irq_set(bus, n, n ? c->efds : NULL);
	if (rc < 0) {
		/* a resize may have torn the old set down (VFIO disables MSI-X to
		 * change the count): wire the previous set again */
		c->efds[vector] = old;
		unsigned m = 0;
		for (unsigned i = 0; i < bus->nr_vectors; i++)
			if (c->efds[i] >= 0)
				m = i + 1;
		c->nr_efds = m;
		int rc2 = bus->ops->irq_set(bus, m, m ? c->efds : NULL);
		log_warn("%s: cannot wire MSI-X vector %u: %s%s", c->name, vector, strerror(-rc),
		         rc2 < 0 ? "; and the previous vectors could not be restored" : "");
	}
out:
	pthread_mutex_unlock(&c->admin_lock);
	return rc;
}

void nvme_ctrl_close(struct nvme_ctrl *c)
{
	if (!c)
		return;
	if (!c->shut_down) {
		nvme_ctrl_shutdown_async(c);
		nvme_ctrl_shutdown_wait(c, NVME_SHUTDOWN_MAX_MS + 5000);
	}
	recov_stop_thread(c);
	struct nvme_bus *bus = c->bus;
	if (c->nr_qpairs)
		log_warn("%s: closing with %u I/O queue pair(s) still open", c->name, c->nr_qpairs);
	if (!bus)
		goto free_all; /* removed: nothing of ours is mapped any more */
	/* disabled, isolated or gone: every admin buffer is free */
	nvme_ctrl_admin_abandon(c, -ENODEV, !c->quarantined);
	if (c->nr_efds && bus->ops->irq_set)
		bus->ops->irq_set(bus, 0, NULL);
	if (c->admin_mapped)
		nvme_dma_unmap(bus, &c->admin_mem, c->admin_iova);
	if (bus->ops->close)
		bus->ops->close(bus);
free_all:
	free(c->efds);
	if (!c->quarantined)
		nvme_dma_free(&c->admin_mem);
	free(c->info);
	pthread_mutex_destroy(&c->admin_lock);
	pthread_mutex_destroy(&c->thr_lock);
	pthread_mutex_destroy(&c->reset_lock);
	pthread_mutex_destroy(&c->qp_lock);
	pthread_mutex_destroy(&c->event_lock);
	pthread_mutex_destroy(&c->aen_lock);
	pthread_mutex_destroy(&c->aen_cb_lock);
	pthread_cond_destroy(&c->thr_cond);
	pthread_cond_destroy(&c->done_cond);
	free(c);
}

/* ---- qpairs of this controller ---- */

void nvme_ctrl_add_qpair(struct nvme_ctrl *c, struct nvme_qpair *qp)
{
	pthread_mutex_lock(&c->qp_lock);
	if (c->nqps < NVME_CTRL_MAX_QPAIRS)
		c->qps[c->nqps++] = qp;
	pthread_mutex_unlock(&c->qp_lock);
}

void nvme_ctrl_del_qpair(struct nvme_ctrl *c, struct nvme_qpair *qp)
{
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps; i++)
		if (c->qps[i] == qp) {
			c->qps[i] = c->qps[--c->nqps];
			break;
		}
	pthread_mutex_unlock(&c->qp_lock);
}

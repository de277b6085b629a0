/* fuzz_completion.c - libFuzzer target: a device that writes arbitrary CQEs.
 *
 * The host (one qpair on the software controller, driven on this thread)
 * submits up to 32 reads and writes, which the device fetches and keeps
 * without completing them (sim_fault_stall_next).  The input then plays the
 * device: each 7-byte record is a CQE (CID, status, SQ head, phase) written
 * into the qpair's CQ at the host's head, optionally followed by a reap.  The
 * CID is taken raw, or made to name a submitted command (right or stale
 * generation).  Finally the qpair is destroyed, which deletes its queues on
 * the device and fails what is left.
 *
 * The engine must never crash, complete a command twice, complete one that
 * was not submitted, or complete one during the reaping phase unless a CQE
 * naming its current CID was written; and after the destroy every submitted
 * command has completed exactly once.  A broken rule aborts (a crash for
 * libFuzzer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

#define MAX_CMDS 32
#define IO_BYTES 4096u

struct slot {
	unsigned completions;
	bool submitted;
	uint16_t cid; /* CID the engine gave it, when known */
};

static struct sim *sim;
static struct nvme_ctrl *ctrl;
static struct nvme_reactor *reactor;
static uint8_t *bufs[MAX_CMDS];
static struct slot slots[MAX_CMDS];
static bool reaping_phase;
static uint16_t written_cids[4096];
static unsigned nr_written;

#define DIE(...)                                      \
	do {                                          \
		fprintf(stderr, "fuzz_completion: " __VA_ARGS__); \
		fprintf(stderr, "\n");                \
		abort();                              \
	} while (0)

static void io_cb(void *arg, int err, uint16_t status)
{
	(void)err;
	(void)status;
	struct slot *s = arg;
	if (s < slots || s >= slots + MAX_CMDS)
		DIE("callback with an argument that was never submitted");
	if (!s->submitted)
		DIE("completion of slot %td, which was not submitted", s - slots);
	if (++s->completions > 1)
		DIE("slot %td completed twice", s - slots);
	if (reaping_phase) {
		bool named = false;
		for (unsigned i = 0; i < nr_written && !named; i++)
			named = written_cids[i] == s->cid;
		if (!named)
			DIE("slot %td (cid 0x%x) completed by a reap with no CQE naming it", s - slots,
			    s->cid);
	}
}

/* The reactor lives in memory LeakSanitizer does not scan (mmap): free it
 * all at exit so that what it points to is not reported as leaked. */
static void teardown(void)
{
	for (unsigned i = 0; i < MAX_CMDS; i++)
		nvme_reactor_buf_free(reactor, bufs[i], IO_BYTES);
	nvme_reactor_destroy(reactor);
	nvme_ctrl_close(ctrl);
}

static void setup(void)
{
	log_set_level(LOG_LVL_ERROR);
	struct sim_opts so = {.name = "fz", .nr_ns = 1};
	so.ns[0] = (struct sim_ns_opts){.nlba = 1u << 12, .lba_size = 512,
	                                .backing = SIM_BACKING_NULL};
	if (sim_create(&so, &sim) < 0)
		DIE("sim_create");
	struct nvme_ctrl_opts co = {.name = "fz", .io_queues = 1, .queue_depth = 64,
	                            .cq_budget = 8, .io_timeout_ms = 60000, .io_retries = 1};
	if (nvme_ctrl_open(sim_bus(sim), &co, &ctrl) < 0)
		DIE("nvme_ctrl_open");
	struct nvme_reactor_opts ro = {.id = 0, .cpu = -1, .mode = NVME_MODE_POLL,
	                               .buf_pool_bytes = 4u << 20};
	if (nvme_reactor_create(&ro, &reactor) < 0)
		DIE("nvme_reactor_create");
	for (unsigned i = 0; i < MAX_CMDS; i++)
		if (!(bufs[i] = nvme_reactor_buf_alloc(reactor, IO_BYTES)))
			DIE("buffer");
	atexit(teardown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctrl)
		setup();
	if (size < 1)
		return 0;
	unsigned k = 1 + data[0] % MAX_CMDS;
	data++;
	size--;

	struct nvme_qpair *qp;
	if (nvme_qpair_create(ctrl, reactor, 1, &qp) < 0)
		DIE("nvme_qpair_create");
	memset(slots, 0, sizeof(slots));
	nr_written = 0;
	sim_fault_stall_next(sim, k);
	for (unsigned i = 0; i < k; i++) {
		int rc = (i & 1) ? nvme_qpair_write(qp, 1, i * 8, bufs[i], IO_BYTES, false, io_cb,
		                                    &slots[i])
		                 : nvme_qpair_read(qp, 1, i * 8, bufs[i], IO_BYTES, io_cb, &slots[i]);
		if (rc < 0)
			DIE("submit %u: %d", i, rc);
		slots[i].submitted = true;
	}
	nvme_qpair_flush_sq(qp);
	/* the CID each command went out with: the tracker that holds it */
	for (unsigned t = 0; t < qp->ntrk; t++)
		if (qp->trk[t].state != TRK_FREE && qp->trk[t].arg >= (void *)slots &&
		    qp->trk[t].arg < (void *)(slots + MAX_CMDS))
			((struct slot *)qp->trk[t].arg)->cid = qp->trk[t].cid;

	/* where the device posts next, and its phase: a CQE with the right phase
	 * is posted (the position advances), one with the wrong phase is a write
	 * the host must ignore (the device may rewrite that slot) */
	uint16_t pos = qp->cq_head;
	uint8_t dphase = qp->cq_phase;
	reaping_phase = true;
	for (; size >= 7; data += 7, size -= 7) {
		uint16_t cid = (uint16_t)(data[0] | data[1] << 8);
		uint16_t status = (uint16_t)(data[2] | data[3] << 8);
		uint16_t sqh = (uint16_t)(data[4] | data[5] << 8);
		uint8_t ctl = data[6];
		const struct slot *s = &slots[cid % k];
		switch ((ctl >> 1) & 3) {
		case 1: /* a submitted command's current CID */
			cid = s->cid;
			break;
		case 2: /* the same tracker, a stale generation */
			cid = (uint16_t)(s->cid + (1u << NVME_CID_IDX_BITS));
			break;
		default:
			break;
		}
		if ((ctl >> 3) & 1)
			sqh &= qp->mask; /* mostly plausible SQ heads */
		bool post = ctl & 1;
		if (post && ((uint16_t)(pos - qp->cq_head) & qp->mask) == qp->mask)
			nvme_qpair_reap(qp, 0); /* the CQ is full: the device waits */
		if (post && ((uint16_t)(pos - qp->cq_head) & qp->mask) == qp->mask)
			continue;
		volatile struct nvme_cqe *e = &qp->cq[pos];
		uint8_t phase = post ? dphase : (uint8_t)!dphase;
		e->dw0 = 0;
		e->dw1 = 0;
		e->sq_head = sqh;
		e->sq_id = qp->qid;
		e->cid = cid;
		__atomic_store_n(&e->status, (uint16_t)((status & ~1u) | phase),
		                 __ATOMIC_RELEASE);
		if (post) {
			if (nr_written < sizeof(written_cids) / sizeof(written_cids[0]))
				written_cids[nr_written++] = cid;
			if (++pos > qp->mask) {
				pos = 0;
				dphase ^= 1;
			}
		}
		if ((ctl >> 4) & 1)
			nvme_qpair_reap(qp, 0);
	}
	nvme_qpair_reap(qp, 0);
	reaping_phase = false;
	/* Resubmitted commands (an Abort status retries) run for real once the
	 * stall count is used up; the destroy deletes the queues and fails the
	 * rest. */
	sim_fault_release_stalled(sim);
	nvme_qpair_destroy(qp);
	for (unsigned i = 0; i < k; i++)
		if (slots[i].completions != 1)
			DIE("slot %u completed %u times after the destroy", i, slots[i].completions);
	return 0;
}

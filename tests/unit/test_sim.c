/* test_sim.c - the software controller driven through its bus, with a tiny
 * hand-rolled host (admin queue, one I/O queue pair) in this file. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "nvme_spec.h"
#include "sim.h"
#include "sim_pi.h"

#define MEM (8u << 20)
#define QD 8

struct host {
	struct sim *s;
	struct nvme_bus *b;
	uint8_t *mem;
	uint64_t iova;
	size_t brk;
	struct q {
		struct nvme_sqe *sq;
		struct nvme_cqe *cq;
		uint16_t qid, size, tail, head, phase;
	} aq, ioq;
	uint16_t cid;
	uint32_t dstrd; /* CAP.DSTRD, read once: a dead device's CAP reads all ones */
};

static uint64_t io(struct host *h, const void *p) { return h->iova + (uint64_t)((const uint8_t *)p - h->mem); }
static void *pg(struct host *h, size_t n)
{
	void *p = h->mem + h->brk;
	h->brk += (n + 4095) & ~(size_t)4095;
	ck_assert_uint_le(h->brk, MEM);
	return p;
}

static int wait_ready(struct host *h, int want)
{
	for (int i = 0; i < 2000; i++) {
		if ((int)(nvme_bus_read32(h->b, NVME_REG_CSTS) & NVME_CSTS_RDY) == want)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static void host_init(struct host *h, struct sim_opts *o)
{
	memset(h, 0, sizeof(*h));
	ck_assert_int_eq(sim_create(o, &h->s), 0);
	h->b = sim_bus(h->s);
	h->dstrd = NVME_CAP_DSTRD(nvme_bus_read64(h->b, NVME_REG_CAP));
	h->mem = aligned_alloc(4096, MEM);
	ck_assert_ptr_nonnull(h->mem);
	memset(h->mem, 0, MEM);
	ck_assert_int_eq(h->b->ops->dma_map(h->b, h->mem, MEM, &h->iova), 0);
	ck_assert(h->iova != (uint64_t)(uintptr_t)h->mem);
	h->aq.size = QD;
	h->aq.sq = pg(h, 4096);
	h->aq.cq = pg(h, 4096);
	h->aq.phase = 1;
}

static int host_enable(struct host *h)
{
	nvme_bus_write32(h->b, NVME_REG_AQA, ((QD - 1u) << 16) | (QD - 1u));
	nvme_bus_write64(h->b, NVME_REG_ASQ, io(h, h->aq.sq));
	nvme_bus_write64(h->b, NVME_REG_ACQ, io(h, h->aq.cq));
	nvme_bus_write32(h->b, NVME_REG_CC, NVME_CC_EN | (6u << NVME_CC_IOSQES_SHIFT) | (4u << NVME_CC_IOCQES_SHIFT));
	return wait_ready(h, 1);
}

static void host_fini(struct host *h)
{
	h->b->ops->dma_unmap(h->b, h->mem, MEM, h->iova);
	h->b->ops->close(h->b);
	free(h->mem);
}

static uint32_t dstrd(struct host *h) { return h->dstrd; }

static void submit(struct host *h, struct q *q, struct nvme_sqe *c)
{
	c->cid = ++h->cid;
	q->sq[q->tail] = *c;
	q->tail = (uint16_t)((q->tail + 1) % q->size);
	nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_sq_tdbl_off(q->qid, dstrd(h))), q->tail);
}

/* The entry at cq[*head] when its phase tag is *phase: taken into out, the
 * head (and phase) moved on and written to CQ cqid's head doorbell. */
static bool cq_take(struct host *h, struct nvme_cqe *cq, uint16_t cqid, uint16_t size,
                    uint16_t *head, uint16_t *phase, struct nvme_cqe *out)
{
	volatile struct nvme_cqe *e = &cq[*head];
	uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);

	if (NVME_CQE_PHASE(st) != *phase)
		return false;
	*out = *(struct nvme_cqe *)e;
	if (++*head == size) {
		*head = 0;
		*phase ^= 1;
	}
	nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_cq_hdbl_off(cqid, dstrd(h))),
	                  *head);
	return true;
}

/* next CQE or -1 status after ~2 s */
static int reap(struct host *h, struct q *q, struct nvme_cqe *out)
{
	for (int i = 0; i < 200000; i++) {
		if (cq_take(h, q->cq, q->qid, q->size, &q->head, &q->phase, out))
			return 0;
		sim_poll(h->s);
		usleep(10);
	}
	return -ETIMEDOUT;
}

static int cmd(struct host *h, struct q *q, struct nvme_sqe *c, uint32_t *dw0)
{
	struct nvme_cqe e;
	submit(h, q, c);
	ck_assert_int_eq(reap(h, q, &e), 0);
	ck_assert_uint_eq(e.cid, h->cid);
	if (dw0)
		*dw0 = e.dw0;
	return NVME_CQE_STATUS(e.status) & ~NVME_STATUS_DNR;
}

static int adm(struct host *h, uint8_t opc, uint32_t nsid, uint64_t prp1, uint32_t c10, uint32_t c11, uint32_t *dw0)
{
	struct nvme_sqe c = { .opc = opc, .nsid = nsid, .prp1 = prp1, .cdw10 = c10, .cdw11 = c11 };
	return cmd(h, &h->aq, &c, dw0);
}

static void host_ioq(struct host *h, uint16_t size)
{
	h->ioq.qid = 1;
	h->ioq.size = size;
	h->ioq.phase = 1;
	h->ioq.cq = pg(h, size * 16u);
	h->ioq.sq = pg(h, size * 64u);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_CQ, 0, io(h, h->ioq.cq), ((size - 1u) << 16) | 1, NVME_QUEUE_PC, NULL), 0);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_SQ, 0, io(h, h->ioq.sq), ((size - 1u) << 16) | 1, (1u << 16) | NVME_QUEUE_PC, NULL), 0);
}

static struct sim_opts opts(unsigned lba, enum sim_backing bk, bool thr)
{
	struct sim_opts o = { .name = "t", .nr_ns = 1, .threaded = thr, .max_queues = 4, .vwc = true };
	o.ns[0] = (struct sim_ns_opts){ .nlba = (64u << 20) / lba, .lba_size = lba, .backing = bk };
	return o;
}

/* PRPs for buf (any dword offset) of len bytes: list pages in host memory */
static void prps(struct host *h, struct nvme_sqe *c, uint8_t *buf, size_t len)
{
	size_t first = 4096 - ((uintptr_t)buf & 4095);
	c->prp1 = io(h, buf);
	if (len <= first)
		return;
	size_t rest = len - first, n = (rest + 4095) / 4096;
	if (n == 1) {
		c->prp2 = io(h, buf + first);
		return;
	}
	uint64_t *l = pg(h, 4096 * ((n / 511) + 1));
	c->prp2 = io(h, l);
	for (size_t i = 0, k = 0; i < n; i++, k++) {
		if (k == 511 && i != n - 1) { /* chain: last slot points to the next list page */
			l[k] = io(h, l + 512);
			l += 512;
			k = 0;
		}
		l[k] = io(h, buf + first + i * 4096);
	}
}

static int rw(struct host *h, uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb, uint8_t *buf, size_t len)
{
	struct nvme_sqe c = { .opc = opc, .nsid = nsid, .cdw10 = (uint32_t)slba, .cdw11 = (uint32_t)(slba >> 32),
			      .cdw12 = nlb - 1 };
	prps(h, &c, buf, len);
	return cmd(h, &h->ioq, &c, NULL);
}

START_TEST(t_registers)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	host_init(&h, &o);
	uint64_t cap = nvme_bus_read64(h.b, NVME_REG_CAP);
	ck_assert_uint_eq(NVME_CAP_MQES(cap), 4095);
	ck_assert_uint_eq(NVME_CAP_CQR(cap), 1);
	ck_assert_uint_gt(NVME_CAP_TO(cap), 0);
	ck_assert_uint_eq(NVME_CAP_CSS(cap) & NVME_CAP_CSS_NVM, 1);
	ck_assert_uint_eq(NVME_CAP_MPSMIN(cap), 0);
	ck_assert_uint_eq(nvme_bus_read32(h.b, NVME_REG_VS), NVME_VS(1, 4, 0));
	ck_assert_uint_eq(nvme_bus_read32(h.b, NVME_REG_CC), 0);
	ck_assert_uint_eq(nvme_bus_read32(h.b, NVME_REG_CSTS), 0);
	ck_assert_int_eq(host_enable(&h), 0);
	/* shutdown completes, disable clears RDY */
	nvme_bus_write32(h.b, NVME_REG_CC, nvme_bus_read32(h.b, NVME_REG_CC) | NVME_CC_SHN_NORMAL);
	ck_assert_uint_eq(nvme_bus_read32(h.b, NVME_REG_CSTS) & NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT);
	nvme_bus_write32(h.b, NVME_REG_CC, 0);
	ck_assert_int_eq(wait_ready(&h, 0), 0);
	/* never ready */
	sim_fault_never_ready(h.s, true);
	h.aq.tail = h.aq.head = 0;
	ck_assert_int_eq(host_enable(&h), -ETIMEDOUT);
	host_fini(&h);
}
END_TEST

/* No completion waiting on q now (the CQE at its head is not new). */
static bool cq_empty(struct host *h, struct q *q)
{
	sim_poll(h->s);
	return NVME_CQE_PHASE(__atomic_load_n(&q->cq[q->head].status, __ATOMIC_ACQUIRE)) != q->phase;
}

static uint16_t aer(struct host *h)
{
	struct nvme_sqe c = {.opc = NVME_ADM_ASYNC_EVENT};
	submit(h, &h->aq, &c);
	return c.cid;
}

#define LOG_DW10(lid, len) NVME_LOG_CDW10(lid, (len) / 4 - 1)

/* Asynchronous events: AEC, held AERs completed by events, masking until
 * the log page is read without RAE, the changed namespace list cleared on
 * read, the AER limit, events not enabled, namespaces added and removed. */
START_TEST(t_async_events)
{
	struct host h;
	struct sim_opts o = opts(4096, SIM_BACKING_RAM, false);
	struct nvme_cqe e;
	uint32_t dw0;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	uint32_t aec = NVME_SMART_CRIT_ALL | NVME_AEC_NS_ATTR | NVME_AEC_FW_ACTIVATE;
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_ASYNC_EVENT, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 0); /* nothing enabled after a reset */
	ck_assert_int_eq(adm(&h, NVME_ADM_SET_FEATURES, 0, 0, NVME_FEAT_ASYNC_EVENT, aec | 0xffff0000u, NULL), 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_ASYNC_EVENT, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, aec); /* what it does not support is not kept */

	/* a warning completes the held AER */
	uint16_t a = aer(&h);
	ck_assert(cq_empty(&h, &h.aq));
	ck_assert_int_eq(sim_inject_warning(h.s, NVME_SMART_CRIT_SPARE, true), 0);
	ck_assert_int_eq(reap(&h, &h.aq, &e), 0);
	ck_assert_uint_eq(e.cid, a);
	ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
	ck_assert_uint_eq(e.dw0, NVME_AER_DW0(NVME_AER_TYPE_SMART, NVME_AER_SMART_SPARE, NVME_LOG_SMART));

	/* another event on the same log is masked until that log is read */
	a = aer(&h);
	ck_assert_int_eq(sim_inject_warning(h.s, NVME_SMART_CRIT_TEMPERATURE, true), 0);
	ck_assert(cq_empty(&h, &h.aq));
	ck_assert_uint_eq(sim_events_pending(h.s), 1);
	struct nvme_smart_log *sl = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_LOG_PAGE, NVME_NSID_ALL, io(&h, sl),
			     LOG_DW10(NVME_LOG_SMART, 512) | NVME_LOG_RAE, 0, NULL), 0);
	ck_assert_uint_eq(sl->critical_warning, NVME_SMART_CRIT_SPARE | NVME_SMART_CRIT_TEMPERATURE);
	ck_assert_uint_eq(sl->avail_spare, 5);
	ck_assert_uint_eq(sl->temperature[0] | sl->temperature[1] << 8, 343 + 5); /* WCTEMP + 5 K */
	ck_assert(cq_empty(&h, &h.aq)); /* RAE: still masked */
	ck_assert_uint_eq(sim_events_pending(h.s), 1);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_LOG_PAGE, NVME_NSID_ALL, io(&h, sl),
			     LOG_DW10(NVME_LOG_SMART, 512), 0, NULL), 0);
	ck_assert_int_eq(reap(&h, &h.aq, &e), 0);
	ck_assert_uint_eq(e.cid, a);
	ck_assert_uint_eq(e.dw0, NVME_AER_DW0(NVME_AER_TYPE_SMART, NVME_AER_SMART_TEMPERATURE, NVME_LOG_SMART));
	ck_assert_uint_eq(sim_events_pending(h.s), 0);

	/* a namespace added: the notice, the list (cleared on read), Identify */
	a = aer(&h);
	ck_assert_int_eq(sim_ns_add(h.s, 2, 1u << 20), 0);
	ck_assert_int_eq(reap(&h, &h.aq, &e), 0);
	ck_assert_uint_eq(e.cid, a);
	ck_assert_uint_eq(e.dw0, NVME_AER_DW0(NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_NS_CHANGED,
					      NVME_LOG_CHANGED_NS));
	uint32_t *list = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_LOG_PAGE, NVME_NSID_ALL, io(&h, list),
			     LOG_DW10(NVME_LOG_CHANGED_NS, 4096), 0, NULL), 0);
	ck_assert_uint_eq(list[0], 2);
	ck_assert_uint_eq(list[1], 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_LOG_PAGE, NVME_NSID_ALL, io(&h, list),
			     LOG_DW10(NVME_LOG_CHANGED_NS, 4096), 0, NULL), 0);
	ck_assert_uint_eq(list[0], 0);
	struct nvme_id_ns *ns = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 2, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(ns->nsze, (1u << 20) / 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 0, io(&h, list), NVME_ID_CNS_NS_ACTIVE_LIST, 0, NULL), 0);
	ck_assert_uint_eq(list[0], 1);
	ck_assert_uint_eq(list[1], 2);
	ck_assert_uint_eq(list[2], 0);

	/* resized, then removed: two changes of one NSID list it once */
	ck_assert_int_eq(sim_ns_resize(h.s, 2, 2u << 20), 0);
	ck_assert_int_eq(sim_ns_remove(h.s, 2), 0);
	ck_assert_int_eq(sim_ns_remove(h.s, 2), -ENOENT);
	a = aer(&h);
	ck_assert_int_eq(reap(&h, &h.aq, &e), 0);
	ck_assert_uint_eq(e.cid, a);
	ck_assert_int_eq(adm(&h, NVME_ADM_GET_LOG_PAGE, NVME_NSID_ALL, io(&h, list),
			     LOG_DW10(NVME_LOG_CHANGED_NS, 4096), 0, NULL), 0);
	ck_assert_uint_eq(list[0], 2);
	ck_assert_uint_eq(list[1], 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 2, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(ns->nsze, 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 0, io(&h, list), NVME_ID_CNS_NS_ACTIVE_LIST, 0, NULL), 0);
	ck_assert_uint_eq(list[1], 0);

	/* four held at most: the fifth is refused at once */
	for (int i = 0; i < 4; i++)
		aer(&h);
	ck_assert(cq_empty(&h, &h.aq));
	ck_assert_int_eq(adm(&h, NVME_ADM_ASYNC_EVENT, 0, 0, 0, 0, NULL),
			 NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_ASYNC_LIMIT));

	/* not enabled: not raised at all */
	ck_assert_int_eq(adm(&h, NVME_ADM_SET_FEATURES, 0, 0, NVME_FEAT_ASYNC_EVENT, 0, NULL), 0);
	ck_assert_int_eq(sim_inject_warning(h.s, NVME_SMART_CRIT_RELIABILITY, true), 0);
	ck_assert_int_eq(sim_ns_add(h.s, 3, 1u << 20), 0);
	ck_assert(cq_empty(&h, &h.aq));
	ck_assert_uint_eq(sim_events_pending(h.s), 0);
	ck_assert_int_eq(sim_inject_warning(h.s, 0x20, true), -EINVAL);
	ck_assert_int_eq(sim_ns_add(h.s, 3, 1u << 20), -EEXIST);
	ck_assert_int_eq(sim_ns_add(h.s, 4, 1000), -EINVAL);
	ck_assert_int_eq(sim_ns_add(h.s, SIM_MAX_NS + 1, 1u << 20), -EINVAL);
	host_fini(&h);
}
END_TEST

START_TEST(t_identify_queues)
{
	struct host h;
	struct sim_opts o = opts(4096, SIM_BACKING_RAM, false);
	uint32_t dw0;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	struct nvme_id_ctrl *id = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 0, io(&h, id), NVME_ID_CNS_CTRL, 0, NULL), 0);
	ck_assert(memcmp(id->mn, "nvmefs software controller", 26) == 0);
	ck_assert_uint_eq(id->sqes, 0x66);
	ck_assert_uint_eq(id->cqes, 0x44);
	/* NN: every NSID a namespace may be added at (sim_ns_add) */
	ck_assert_uint_eq(id->nn, SIM_MAX_NS);
	ck_assert_uint_eq(id->aerl, 3);
	ck_assert_uint_eq(id->oaes & (NVME_OAES_NS_ATTR | NVME_OAES_FW_ACTIVATE), NVME_OAES_NS_ATTR | NVME_OAES_FW_ACTIVATE);
	ck_assert_uint_eq(id->oncs & (NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES), NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES);
	ck_assert_uint_eq(id->vwc & 1, 1);
	struct nvme_id_ns *ns = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 1, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(ns->nsze, (64u << 20) / 4096);
	ck_assert_uint_eq(ns->lbaf[ns->flbas & 0xf].lbads, 12);
	ck_assert_uint_eq(ns->dlfeat & 7, 1);
	/* an inactive NSID up to NN: a zero-filled structure; beyond NN: invalid */
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 2, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(ns->nsze, 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, SIM_MAX_NS + 1, io(&h, ns), NVME_ID_CNS_NS, 0, NULL),
			 NVME_SC_INVALID_NS);
	uint32_t *list = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 0, io(&h, list), NVME_ID_CNS_NS_ACTIVE_LIST, 0, NULL), 0);
	ck_assert_uint_eq(list[0], 1);
	ck_assert_uint_eq(list[1], 0);
	/* Number of Queues: ask 16, get max_queues (4) */
	ck_assert_int_eq(adm(&h, NVME_ADM_SET_FEATURES, 0, 0, NVME_FEAT_NUM_QUEUES, (15u << 16) | 15, &dw0), 0);
	ck_assert_uint_eq(dw0 & 0xffff, 3);
	ck_assert_uint_eq(dw0 >> 16, 3);
	/* create validation */
	void *q = pg(&h, 4096);
	uint64_t a = io(&h, q);
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (7u << 16) | 0, NVME_QUEUE_PC, NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_QID_INVALID));
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (7u << 16) | 5, NVME_QUEUE_PC, NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_QID_INVALID));
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (0u << 16) | 1, NVME_QUEUE_PC, NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_QUEUE_SIZE));
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (4096u << 16) | 1, NVME_QUEUE_PC, NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_QUEUE_SIZE));
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (7u << 16) | 1, 0, NULL), NVME_SC_INVALID_FIELD);
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_CQ, 0, a, (7u << 16) | 1, NVME_QUEUE_PC | NVME_CQ_IEN | (500u << 16), NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_INVALID_VECTOR));
	ck_assert_int_eq(adm(&h, NVME_ADM_CREATE_SQ, 0, a, (7u << 16) | 1, (2u << 16) | NVME_QUEUE_PC, NULL),
			 NVME_STATUS_MAKE(1, NVME_SC_CQ_INVALID));
	host_ioq(&h, QD);
	ck_assert_int_eq(adm(&h, NVME_ADM_DELETE_CQ, 0, 0, 1, 0, NULL), NVME_STATUS_MAKE(1, NVME_SC_INVALID_QUEUE_DELETION));
	ck_assert_int_eq(adm(&h, NVME_ADM_DELETE_SQ, 0, 0, 1, 0, NULL), 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_DELETE_CQ, 0, 0, 1, 0, NULL), 0);
	ck_assert_int_eq(adm(&h, NVME_ADM_DELETE_CQ, 0, 0, 1, 0, NULL), NVME_STATUS_MAKE(1, NVME_SC_QID_INVALID));
	host_fini(&h);
}
END_TEST

static const struct { unsigned lba; size_t len; unsigned off; } rw_cases[] = {
	{ 512, 4096, 0 }, { 512, 8192, 512 }, { 512, 65536, 1028 }, { 512, 2u << 20, 3000 },
	{ 4096, 4096, 4 }, { 4096, 12288, 2048 }, { 4096, 1u << 20, 0 }, { 4096, 2u << 20, 516 },
};

START_TEST(t_rw_roundtrip)
{
	struct host h;
	struct sim_opts o = opts(rw_cases[_i].lba, SIM_BACKING_RAM, _i & 1);
	size_t len = rw_cases[_i].len;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, QD);
	uint8_t *w = (uint8_t *)pg(&h, len + 8192) + rw_cases[_i].off;
	uint8_t *r = (uint8_t *)pg(&h, len + 8192) + rw_cases[_i].off + 4;
	for (size_t i = 0; i < len; i++)
		w[i] = (uint8_t)(i * 7 + _i);
	uint32_t nlb = (uint32_t)(len / rw_cases[_i].lba);
	ck_assert_int_eq(rw(&h, NVME_CMD_WRITE, 1, 100, nlb, w, len), 0);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 100, nlb, r, len), 0);
	ck_assert(memcmp(w, r, len) == 0);
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.bytes_written, len);
	ck_assert_uint_eq(st.bytes_read, len);
	host_fini(&h);
}
END_TEST

/* The kB of the one mapping of kb kB in this process, and whether it may
 * get transparent huge pages (smaps' THPeligible); -1: no such mapping. */
static int thp_eligible(unsigned long kb)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	bool in = false;
	int found = -1;
	unsigned long v;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Size: %lu kB", &v) == 1)
			in = v == kb;
		else if (in && sscanf(line, "THPeligible: %lu", &v) == 1)
			found = (int)v;
	}
	fclose(f);
	return found;
}

/* A RAM namespace asks for transparent huge pages (random I/O over 4 KiB
 * pages misses the TLB at every command); where the system offers them
 * only on request ("madvise"), its memory is then eligible. */
START_TEST(t_ram_hugepages)
{
	char mode[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (!f || !fgets(mode, sizeof(mode), f) || strstr(mode, "[never]")) {
		if (f)
			fclose(f);
		return; /* no THP here: nothing to ask for */
	}
	fclose(f);
	/* a size no other mapping of this process has */
	struct sim_opts o = opts(4096, SIM_BACKING_RAM, false);
	o.ns[0].nlba = 6145;
	struct host h;
	host_init(&h, &o);
	ck_assert_int_eq(thp_eligible(6145 * 4), 1);
	host_fini(&h);
}
END_TEST

START_TEST(t_errors)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, QD);
	uint8_t *buf = pg(&h, 4096);
	uint64_t nlba = o.ns[0].nlba;
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, nlba - 1, 2, buf, 1024), NVME_SC_LBA_RANGE);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 2, 0, 1, buf, 512), NVME_SC_INVALID_NS);
	struct nvme_sqe c = { .opc = 0x7f, .nsid = 1 };
	ck_assert_int_eq(cmd(&h, &h.ioq, &c, NULL), NVME_SC_INVALID_OPCODE);
	/* DMA outside the map: data transfer error, counted, nothing touched */
	struct nvme_sqe d = { .opc = NVME_CMD_READ, .nsid = 1, .prp1 = 0x1000, .cdw12 = 0 };
	ck_assert_int_eq(cmd(&h, &h.ioq, &d, NULL), NVME_SC_DATA_XFER_ERROR);
	d.prp1 = h.iova + MEM; /* just past the mapping */
	ck_assert_int_eq(cmd(&h, &h.ioq, &d, NULL), NVME_SC_DATA_XFER_ERROR);
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.dma_errors, 2);
	host_fini(&h);
}
END_TEST

START_TEST(t_null_and_file)
{
	struct host h;
	/* a backing file directly in /tmp is refused (safepath.h): one in a
	 * 0700 directory of its own */
	char dir[] = "/tmp/test_sim.XXXXXX", path[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ns", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct sim_opts o = opts(4096, SIM_BACKING_NULL, false);
	o.nr_ns = 2;
	o.ns[1] = (struct sim_ns_opts){ .nlba = 256, .lba_size = 4096, .backing = SIM_BACKING_FILE, .path = path };
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, QD);
	uint8_t *buf = pg(&h, 8192);
	memset(buf, 0xab, 8192);
	ck_assert_int_eq(rw(&h, NVME_CMD_WRITE, 1, 0, 2, buf, 8192), 0);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 2, buf, 8192), 0);
	for (int i = 0; i < 8192; i++)
		ck_assert_uint_eq(buf[i], 0);
	memset(buf, 0x5c, 8192);
	ck_assert_int_eq(rw(&h, NVME_CMD_WRITE, 2, 3, 2, buf, 8192), 0);
	struct nvme_sqe f = { .opc = NVME_CMD_FLUSH, .nsid = 2 };
	ck_assert_int_eq(cmd(&h, &h.ioq, &f, NULL), 0);
	FILE *fp = fopen(path, "rb");
	ck_assert_ptr_nonnull(fp);
	uint8_t b2[8192];
	ck_assert_int_eq(fseek(fp, 3 * 4096, SEEK_SET), 0);
	ck_assert_uint_eq(fread(b2, 1, sizeof(b2), fp), sizeof(b2));
	fclose(fp);
	ck_assert(memcmp(b2, buf, 8192) == 0);
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.flushes, 1);
	host_fini(&h);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(t_faults)
{
	struct host h;
	struct nvme_cqe e;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, QD);
	uint8_t *buf = pg(&h, 4096);
	sim_fault_fail_next(h.s, 1, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR) | NVME_STATUS_DNR);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), 0);
	/* duplicate: the same CID twice */
	sim_fault_duplicate(h.s, 1);
	struct nvme_sqe c = { .opc = NVME_CMD_READ, .nsid = 1, .prp1 = io(&h, buf) };
	submit(&h, &h.ioq, &c);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, h.cid);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, h.cid);
	/* bogus CID first, then the real one */
	sim_fault_bogus_cid(h.s, 1);
	submit(&h, &h.ioq, &c);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_ne(e.cid, h.cid);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, h.cid);
	/* lost: executed, never completed */
	sim_fault_lose_next(h.s, 1);
	submit(&h, &h.ioq, &c);
	for (int i = 0; i < 100; i++)
		sim_poll(h.s);
	ck_assert_uint_ne(NVME_CQE_PHASE(h.ioq.cq[h.ioq.head].status), h.ioq.phase);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), 0);
	/* hang: nothing completes until resumed */
	sim_fault_hang(h.s, true);
	submit(&h, &h.ioq, &c);
	sim_poll(h.s);
	ck_assert_uint_ne(NVME_CQE_PHASE(h.ioq.cq[h.ioq.head].status), h.ioq.phase);
	sim_fault_hang(h.s, false);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, h.cid);
	/* delay: completion arrives later, not inline */
	sim_fault_delay(h.s, 20000);
	submit(&h, &h.ioq, &c);
	ck_assert_uint_ne(NVME_CQE_PHASE(h.ioq.cq[h.ioq.head].status), h.ioq.phase);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, h.cid);
	sim_fault_delay(h.s, 0);
	/* CFS */
	sim_fault_cfs(h.s);
	ck_assert_uint_eq(nvme_bus_read32(h.b, NVME_REG_CSTS) & NVME_CSTS_CFS, NVME_CSTS_CFS);
	host_fini(&h);
}
END_TEST

/* Nothing new on q after a generous while of polling (the device thread,
 * or sim_poll inline, had every chance to fetch and answer). */
static bool stays_empty(struct host *h, struct q *q)
{
	for (int i = 0; i < 50; i++) {
		if (!cq_empty(h, q))
			return false;
		usleep(1000);
	}
	return true;
}

/* The controller down (CC.EN 0) and up again, the host's queues empty,
 * its I/O queue pair created again: the admin commands of a bring-up. */
static void host_reset(struct host *h)
{
	nvme_bus_write32(h->b, NVME_REG_CC, 0);
	ck_assert_int_eq(wait_ready(h, 0), 0);
	memset(h->aq.cq, 0, 4096);
	memset(h->ioq.cq, 0, h->ioq.size * 16u);
	h->aq.tail = h->aq.head = h->ioq.tail = h->ioq.head = 0;
	h->aq.phase = h->ioq.phase = 1;
	ck_assert_int_eq(host_enable(h), 0);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_CQ, 0, io(h, h->ioq.cq),
			     ((h->ioq.size - 1u) << 16) | 1, NVME_QUEUE_PC, NULL), 0);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_SQ, 0, io(h, h->ioq.sq),
			     ((h->ioq.size - 1u) << 16) | 1, (1u << 16) | NVME_QUEUE_PC, NULL), 0);
}

/* hang-loop: hung now, and after each reset answers the bring-up's admin
 * commands but hangs again at the first I/O command, which it never runs
 * (nor an admin command after it); unhang ends it and the pending Read
 * completes.  Inline and threaded. */
START_TEST(t_hang_loop)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, _i);
	struct sim_stats st;
	struct nvme_cqe e;
	uint32_t dw0;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, QD);
	uint8_t *buf = pg(&h, 4096);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), 0);
	sim_fault_hang_loop(h.s);
	struct nvme_sqe c = {.opc = NVME_CMD_READ, .nsid = 1, .prp1 = io(&h, buf)};
	submit(&h, &h.ioq, &c);
	ck_assert(stays_empty(&h, &h.ioq));
	struct nvme_sqe gf = {.opc = NVME_ADM_GET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES};
	submit(&h, &h.aq, &gf);
	ck_assert(stays_empty(&h, &h.aq)); /* admin too: an Abort would not be answered */
	for (int round = 0; round < 3; round++) {
		host_reset(&h); /* the bring-up's admin commands are answered */
		ck_assert_int_eq(adm(&h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
		submit(&h, &h.ioq, &c);
		ck_assert(stays_empty(&h, &h.ioq));
		submit(&h, &h.aq, &gf); /* hung again by the I/O command */
		ck_assert(stays_empty(&h, &h.aq));
	}
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.reads, 1); /* the one before the fault */
	ck_assert_uint_eq(st.resets, 3);
	/* unhang: the Get Features and the Read the last reset left behind */
	sim_fault_hang(h.s, false);
	ck_assert_int_eq(reap(&h, &h.aq, &e), 0);
	ck_assert_uint_eq(e.cid, gf.cid);
	ck_assert_int_eq(reap(&h, &h.ioq, &e), 0);
	ck_assert_uint_eq(e.cid, c.cid);
	ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
	/* and a reset no longer brings the hang back */
	host_reset(&h);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), 0);
	/* clear ends it as unhang does */
	sim_fault_hang_loop(h.s);
	sim_fault_clear(h.s);
	host_reset(&h);
	ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, 0, 1, buf, 512), 0);
	host_fini(&h);
}
END_TEST

START_TEST(t_phase_wrap)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_NULL, _i);
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	host_ioq(&h, 4);
	uint8_t *buf = pg(&h, 4096);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(rw(&h, NVME_CMD_READ, 1, (uint64_t)i, 1, buf, 512), 0);
	ck_assert_uint_eq(h.ioq.phase, (50 / 4) % 2 ? 0 : 1);
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.reads, 50);
	/* inline: every CQ head doorbell seen; threaded: the device thread
	 * scans the doorbells, so back-to-back writes may count once */
	if (!_i)
		ck_assert_uint_eq(st.cq_doorbells, 50 + 2);
	else
		ck_assert_uint_gt(st.cq_doorbells, 0);
	host_fini(&h);
}
END_TEST

START_TEST(t_bad_doorbell)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_NULL, false);
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	nvme_bus_doorbell(h.b, (volatile uint32_t *)(h.b->bar0 + nvme_sq_tdbl_off(3, dstrd(&h))), 1);
	nvme_bus_doorbell(h.b, (volatile uint32_t *)(h.b->bar0 + nvme_sq_tdbl_off(0, dstrd(&h))), 4000);
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.invalid_doorbells, 2);
	/* still works */
	uint32_t *list = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 0, io(&h, list), NVME_ID_CNS_NS_ACTIVE_LIST, 0, NULL), 0);
	ck_assert_uint_eq(list[0], 1);
	host_fini(&h);
}
END_TEST

/* ---- the volatile write cache and power cuts ---- */

/* Block lba's content for version tag (0: zeroes, what Write Zeroes and
 * deallocate leave and what never-written blocks hold). */
static void fill(uint8_t *p, unsigned bs, uint64_t lba, uint32_t tag)
{
	uint32_t *w = (uint32_t *)p;
	for (unsigned k = 0; k < bs / 4; k++)
		w[k] = tag ? (tag * 2654435761u) ^ (uint32_t)(lba * 40503u) ^ k : 0;
}

static bool is(const uint8_t *p, unsigned bs, uint64_t lba, uint32_t tag)
{
	uint8_t want[4096];
	fill(want, bs, lba, tag);
	return memcmp(p, want, bs) == 0;
}

struct wc {
	struct host h;
	struct sim_opts o;
	unsigned bs;
	uint8_t *buf; /* 256 KiB of host memory for data */
};

static void wc_open(struct wc *w, unsigned bs, uint64_t nlba, enum sim_backing bk, const char *path,
		    bool thr)
{
	w->bs = bs;
	w->o = opts(bs, bk, thr);
	w->o.ns[0].nlba = nlba;
	w->o.ns[0].path = path;
}

static void wc_start(struct wc *w)
{
	host_init(&w->h, &w->o);
	ck_assert_int_eq(host_enable(&w->h), 0);
	host_ioq(&w->h, QD);
	w->buf = pg(&w->h, 256u << 10);
}

/* After a power-on (or a clear): the host sets the controller up again on
 * the same memory. */
static void wc_restart(struct wc *w)
{
	struct host *h = &w->h;
	memset(h->aq.cq, 0, 4096);
	memset(h->ioq.cq, 0, h->ioq.size * 16u);
	h->aq.tail = h->aq.head = 0;
	h->aq.phase = 1;
	h->ioq.tail = h->ioq.head = 0;
	h->ioq.phase = 1;
	ck_assert_int_eq(host_enable(h), 0);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_CQ, 0, io(h, h->ioq.cq), ((h->ioq.size - 1u) << 16) | 1,
			     NVME_QUEUE_PC, NULL), 0);
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_SQ, 0, io(h, h->ioq.sq), ((h->ioq.size - 1u) << 16) | 1,
			     (1u << 16) | NVME_QUEUE_PC, NULL), 0);
}

static int wc_cmd(struct wc *w, uint8_t opc, uint64_t slba, uint32_t nlb, uint32_t cdw12_flags)
{
	struct nvme_sqe c = { .opc = opc, .nsid = 1, .cdw10 = (uint32_t)slba, .cdw11 = (uint32_t)(slba >> 32),
			      .cdw12 = (nlb - 1) | cdw12_flags };
	if (opc == NVME_CMD_WRITE || opc == NVME_CMD_READ)
		prps(&w->h, &c, w->buf, (size_t)nlb * w->bs);
	return cmd(&w->h, &w->h.ioq, &c, NULL);
}

/* Write version tag to [slba, slba + nlb) (at most 256 KiB), FUA or not. */
static void wc_write(struct wc *w, uint64_t slba, uint32_t nlb, uint32_t tag, bool fua)
{
	for (uint32_t i = 0; i < nlb; i++)
		fill(w->buf + (size_t)i * w->bs, w->bs, slba + i, tag);
	ck_assert_int_eq(wc_cmd(w, NVME_CMD_WRITE, slba, nlb, fua ? NVME_RW_FUA : 0), 0);
}

/* Read [slba, slba + nlb) into w->buf. */
static void wc_read(struct wc *w, uint64_t slba, uint32_t nlb)
{
	ck_assert_int_eq(wc_cmd(w, NVME_CMD_READ, slba, nlb, 0), 0);
}

static void wc_check(struct wc *w, uint64_t slba, uint32_t nlb, uint32_t tag)
{
	wc_read(w, slba, nlb);
	for (uint32_t i = 0; i < nlb; i++)
		ck_assert_msg(is(w->buf + (size_t)i * w->bs, w->bs, slba + i, tag),
			      "block %llu is not version %u", (unsigned long long)(slba + i), tag);
}

static void wc_flush(struct wc *w, uint32_t nsid)
{
	struct nvme_sqe f = { .opc = NVME_CMD_FLUSH, .nsid = nsid };
	ck_assert_int_eq(cmd(&w->h, &w->h.ioq, &f, NULL), 0);
}

static void wc_dsm(struct wc *w, uint64_t slba, uint32_t nlb)
{
	struct nvme_dsm_range *r = (struct nvme_dsm_range *)w->buf;
	memset(r, 0, sizeof(*r));
	r->slba = slba;
	r->nlb = nlb;
	struct nvme_sqe c = { .opc = NVME_CMD_DSM, .nsid = 1, .prp1 = io(&w->h, r), .cdw10 = 0,
			      .cdw11 = NVME_DSM_AD };
	ck_assert_int_eq(cmd(&w->h, &w->h.ioq, &c, NULL), 0);
}

/* The cut, then power back through sim_power_on (or clear) and a new host
 * set-up; checks that the device is dead in between. */
static void wc_cut(struct wc *w, uint64_t seed, bool by_clear)
{
	ck_assert_int_eq(sim_fault_powerfail(w->h.s, seed), 0);
	ck_assert_uint_eq(nvme_bus_read32(w->h.b, NVME_REG_CSTS), 0xffffffffu);
	ck_assert_uint_eq(nvme_bus_read32(w->h.b, NVME_REG_VS), 0xffffffffu);
	ck_assert_int_eq(w->h.b->ops->reset(w->h.b), -ENODEV);
	if (by_clear)
		sim_fault_clear(w->h.s);
	else
		ck_assert_int_eq(sim_power_on(w->h.s), 0);
	/* a power-on reset */
	ck_assert_uint_eq(nvme_bus_read32(w->h.b, NVME_REG_CC), 0);
	ck_assert_uint_eq(nvme_bus_read32(w->h.b, NVME_REG_CSTS), 0);
	ck_assert_uint_eq(nvme_bus_read32(w->h.b, NVME_REG_VS), NVME_VS(1, 4, 0));
	wc_restart(w);
}

static struct sim_stats wc_stats(struct wc *w)
{
	struct sim_stats st;
	sim_get_stats(w->h.s, &st);
	return st;
}

/* Writes not flushed are lost at a cut with seed 0; flushed ones survive.
 * Loop: block size, exec mode, power back by sim_power_on or clear. */
START_TEST(t_wc_lost_and_flushed)
{
	struct wc w;
	unsigned bs = _i & 1 ? 4096 : 512;
	wc_open(&w, bs, 1024, SIM_BACKING_RAM, NULL, _i & 2);
	wc_start(&w);
	wc_write(&w, 0, 32, 1, false);
	wc_flush(&w, _i & 4 ? 0xffffffffu : 1);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 0);
	wc_write(&w, 16, 32, 2, false);  /* 16..31 over flushed data, 32..47 over zeroes */
	wc_write(&w, 100, 4, 3, false);
	wc_check(&w, 16, 32, 2); /* reads see the newest data */
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 36);
	wc_cut(&w, 0, _i & 4);
	wc_check(&w, 0, 32, 1);
	wc_check(&w, 32, 16, 0);
	wc_check(&w, 100, 4, 0);
	struct sim_stats st = wc_stats(&w);
	ck_assert_uint_eq(st.powerfails, 1);
	ck_assert_uint_eq(st.pf_blocks_lost, 36);
	ck_assert_uint_eq(st.pf_blocks_kept, 0);
	ck_assert_uint_eq(st.wc_dirty_blocks, 0);
	/* written and flushed after power-on: survives the next cut */
	wc_write(&w, 200, 8, 4, false);
	wc_flush(&w, 1);
	wc_write(&w, 300, 8, 5, false);
	wc_cut(&w, 0, false);
	wc_check(&w, 200, 8, 4);
	wc_check(&w, 300, 8, 0);
	host_fini(&w.h);
}
END_TEST

/* A FUA write makes its own blocks durable, and only those. */
START_TEST(t_wc_fua)
{
	struct wc w;
	wc_open(&w, 512, 1024, SIM_BACKING_RAM, NULL, _i);
	wc_start(&w);
	wc_write(&w, 0, 16, 1, false);
	wc_write(&w, 8, 4, 2, true);   /* over dirty blocks: those become durable */
	wc_write(&w, 40, 4, 3, true);  /* over clean ones */
	wc_write(&w, 60, 4, 4, false);
	ck_assert_uint_eq(wc_stats(&w).fua_writes, 2);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 12 + 4);
	wc_cut(&w, 0, false);
	wc_check(&w, 0, 8, 0);
	wc_check(&w, 8, 4, 2);
	wc_check(&w, 12, 4, 0);
	wc_check(&w, 40, 4, 3);
	wc_check(&w, 60, 4, 0);
	host_fini(&w.h);
}
END_TEST

/* A shutdown (normal or abrupt) makes everything durable. */
START_TEST(t_wc_shutdown)
{
	struct wc w;
	wc_open(&w, 4096, 256, SIM_BACKING_RAM, NULL, false);
	wc_start(&w);
	wc_write(&w, 0, 64, 7, false);
	wc_write(&w, 100, 3, 8, false);
	nvme_bus_write32(w.h.b, NVME_REG_CC,
			 nvme_bus_read32(w.h.b, NVME_REG_CC) | (_i ? NVME_CC_SHN_ABRUPT : NVME_CC_SHN_NORMAL));
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS) & NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 0);
	ck_assert_int_eq(sim_fault_powerfail(w.h.s, 0), 0);
	ck_assert_uint_eq(wc_stats(&w).pf_blocks_lost, 0);
	ck_assert_int_eq(sim_power_on(w.h.s), 0);
	wc_restart(&w);
	wc_check(&w, 0, 64, 7);
	wc_check(&w, 100, 3, 8);
	host_fini(&w.h);
}
END_TEST

/* Write Zeroes and DSM deallocate are cached as writes are: a punch not
 * followed by Flush is undone by a cut; with FUA it is durable. */
START_TEST(t_wc_zeroes_dsm)
{
	struct wc w;
	wc_open(&w, 512, 4096, SIM_BACKING_RAM, NULL, false);
	wc_start(&w);
	/* 512 blocks: 256 KiB, so the RAM path also gives whole pages back */
	wc_write(&w, 0, 512, 1, false);
	wc_write(&w, 512, 512, 1, false);
	wc_flush(&w, 1);
	ck_assert_int_eq(wc_cmd(&w, NVME_CMD_WRITE_ZEROES, 0, 512, 0), 0);
	wc_dsm(&w, 512, 300);
	ck_assert_int_eq(wc_cmd(&w, NVME_CMD_WRITE_ZEROES, 900, 8, NVME_RW_FUA), 0);
	wc_check(&w, 0, 512, 0);
	wc_check(&w, 512, 300, 0);
	wc_cut(&w, 0, false);
	wc_check(&w, 0, 512, 1);
	wc_check(&w, 512, 300, 1);
	wc_check(&w, 812, 88, 1);
	wc_check(&w, 900, 8, 0);
	wc_check(&w, 908, 116, 1);
	host_fini(&w.h);
}
END_TEST

/* Destaging: at most wc_bytes are dirty; the oldest dirty block becomes
 * durable first; a range longer than the cache caches only its tail. */
START_TEST(t_wc_destage)
{
	struct wc w;
	wc_open(&w, 512, 8192, SIM_BACKING_RAM, NULL, false);
	w.o.wc_bytes = 16 * 512;
	wc_start(&w);
	for (unsigned i = 0; i < 40; i++)
		wc_write(&w, 1000 + 2 * i, 1, 10 + i, false);
	wc_write(&w, 1000 + 2 * 39, 1, 99, false); /* dirty already: no new entry */
	struct sim_stats st = wc_stats(&w);
	ck_assert_uint_eq(st.wc_dirty_blocks, 16);
	ck_assert_uint_eq(st.wc_destaged, 24);
	wc_cut(&w, 0, false);
	for (unsigned i = 0; i < 24; i++)
		wc_check(&w, 1000 + 2 * i, 1, 10 + i);
	for (unsigned i = 24; i < 40; i++)
		wc_check(&w, 1000 + 2 * i, 1, 0);
	/* a FUA write removes entries from the middle: free entries reused */
	for (unsigned i = 0; i < 16; i++)
		wc_write(&w, 2000 + i, 1, 200 + i, false);
	wc_write(&w, 2004, 4, 300, true);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 12);
	for (unsigned i = 0; i < 8; i++)
		wc_write(&w, 3000 + i, 1, 400 + i, false);
	st = wc_stats(&w);
	ck_assert_uint_eq(st.wc_dirty_blocks, 16);
	ck_assert_uint_eq(st.wc_destaged, 24 + 4);
	/* 8192 blocks of zeroes, far more than the cache: the whole cache and
	 * all but the last 16 blocks are durable at once */
	wc_write(&w, 8192 - 16, 16, 500, false);
	wc_flush(&w, 1);
	wc_write(&w, 8, 8, 501, false);
	ck_assert_int_eq(wc_cmd(&w, NVME_CMD_WRITE_ZEROES, 0, 8192, 0), 0);
	st = wc_stats(&w);
	ck_assert_uint_eq(st.wc_dirty_blocks, 16);
	/* 16 for the tail write into a full cache, 8 + 8176 for the zeroes */
	ck_assert_uint_eq(st.wc_destaged, 24 + 4 + 16 + 8 + (8192 - 16));
	wc_cut(&w, 0, false);
	wc_check(&w, 0, 512, 0);
	wc_check(&w, 8192 - 16, 16, 500);
	host_fini(&w.h);
}
END_TEST

/* A seeded cut keeps some blocks and loses others, each whole; the same
 * seed over the same history gives the same result, another seed another. */
static void wc_seeded_run(uint64_t seed, uint8_t *outcome, unsigned n)
{
	struct wc w;
	wc_open(&w, 512, 4096, SIM_BACKING_RAM, NULL, false);
	wc_start(&w);
	wc_write(&w, 0, n, 1, false);
	wc_flush(&w, 1);
	wc_write(&w, 0, n, 2, false);
	wc_cut(&w, seed, false);
	wc_read(&w, 0, n);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *b = w.buf + (size_t)i * 512;
		ck_assert_msg(is(b, 512, i, 1) || is(b, 512, i, 2), "block %u is neither old nor new", i);
		outcome[i] = is(b, 512, i, 2);
	}
	struct sim_stats st = wc_stats(&w);
	ck_assert_uint_eq(st.pf_blocks_lost + st.pf_blocks_kept, n);
	host_fini(&w.h);
}

START_TEST(t_wc_seeded)
{
	enum { N = 256 };
	uint8_t a[N], b[N], c[N];
	unsigned kept = 0;
	wc_seeded_run(12345, a, N);
	wc_seeded_run(12345, b, N);
	wc_seeded_run(777, c, N);
	for (unsigned i = 0; i < N; i++)
		kept += a[i];
	ck_assert_uint_gt(kept, N / 8);
	ck_assert_uint_lt(kept, N - N / 8);
	ck_assert_mem_eq(a, b, N);
	ck_assert(memcmp(a, c, N) != 0);
}
END_TEST

/* A FILE namespace: a cut puts the durable data back into the file itself. */
START_TEST(t_wc_file)
{
	struct wc w;
	/* a backing file directly in /tmp is refused (safepath.h): one in a
	 * 0700 directory of its own */
	char dir[] = "/tmp/test_sim_wc.XXXXXX", path[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ns", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	wc_open(&w, 4096, 64, SIM_BACKING_FILE, path, false);
	w.o.wc_bytes = 8 * 4096;
	wc_start(&w);
	wc_write(&w, 0, 16, 1, false);
	wc_flush(&w, 1);
	wc_write(&w, 4, 4, 2, false);
	wc_write(&w, 20, 2, 3, false);
	wc_write(&w, 30, 2, 4, true);
	uint8_t blk[4096];
	ck_assert_int_eq(pread(fd, blk, 4096, 4 * 4096), 4096);
	ck_assert(is(blk, 4096, 4, 2)); /* the file holds the newest data */
	/* 16 blocks into 8: 8 destaged at once; then 12 zeroes: the 6 dirty
	 * blocks (4..7, 20..21) and 4 of the zeroes */
	ck_assert_int_eq(wc_cmd(&w, NVME_CMD_WRITE_ZEROES, 40, 12, 0), 0);
	ck_assert_uint_eq(wc_stats(&w).wc_destaged, 8 + 6 + 4);
	wc_cut(&w, 0, false);
	for (unsigned i = 0; i < 16; i++) {
		ck_assert_int_eq(pread(fd, blk, 4096, (off_t)i * 4096), 4096);
		ck_assert(is(blk, 4096, i, i >= 4 && i < 8 ? 2 : 1));
	}
	wc_check(&w, 20, 2, 3);
	wc_check(&w, 30, 2, 4);
	wc_check(&w, 40, 12, 0);
	/* and a seeded cut of a file: each block old or new */
	wc_write(&w, 0, 8, 5, false);
	wc_cut(&w, 99, false);
	wc_read(&w, 0, 8);
	for (unsigned i = 0; i < 8; i++)
		ck_assert(is(w.buf + i * 4096, 4096, i, i >= 4 ? 2 : 1) || is(w.buf + i * 4096, 4096, i, 5));
	host_fini(&w.h);
	close(fd);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The promise against a reference model, over thousands of random writes,
 * FUA writes, flushes, Write Zeroes and deallocates, then a cut: a block
 * holds one of the versions written since the reference last knew it
 * durable (a Flush, or a FUA command covering it), and exactly its newest
 * version when it was not written since.  Loop: cache larger than the
 * namespace, seed 0 (exactly the durable version, nothing else), then small
 * caches (destaging) with seeds. */
#define RND_NLBA 256
#define RND_HIST 64
struct rnd_ref {
	uint32_t hist[RND_NLBA][RND_HIST]; /* [0]: known durable; then later versions */
	unsigned n[RND_NLBA];
};

static uint64_t rnd_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void rnd_durable(struct rnd_ref *r, uint64_t lba)
{
	r->hist[lba][0] = r->hist[lba][r->n[lba] - 1];
	r->n[lba] = 1;
}

START_TEST(t_wc_random)
{
	static const struct { uint64_t wc_bytes, seed; } cases[] = {
		{ 0, 0 }, { 0, 0x5eed }, { 32 * 512, 0 }, { 7 * 512, 0xfeed }, { 1 * 512, 3 },
	};
	static struct rnd_ref r;
	struct wc w;
	uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
	uint32_t tag = 1;
	wc_open(&w, 512, RND_NLBA, SIM_BACKING_RAM, NULL, false);
	w.o.wc_bytes = cases[_i].wc_bytes;
	wc_start(&w);
	for (unsigned b = 0; b < RND_NLBA; b++) {
		r.hist[b][0] = 0;
		r.n[b] = 1;
	}
	for (unsigned op = 0; op < 4000; op++) {
		unsigned kind = (unsigned)(rnd_next(&x) % 100);
		uint64_t slba = rnd_next(&x) % RND_NLBA;
		uint32_t nlb = (uint32_t)(1 + rnd_next(&x) % 16);
		bool full = false;
		if (nlb > RND_NLBA - slba)
			nlb = (uint32_t)(RND_NLBA - slba);
		for (uint32_t i = 0; i < nlb; i++)
			full |= r.n[slba + i] == RND_HIST;
		if (kind < 3 || full) {
			wc_flush(&w, kind & 1 ? 1 : 0xffffffffu);
			for (unsigned b = 0; b < RND_NLBA; b++)
				rnd_durable(&r, b);
			continue;
		}
		bool fua = kind < 15, zero = kind >= 85, dsm = kind >= 93 && !fua;
		uint32_t t = zero ? 0 : tag++;
		if (dsm)
			wc_dsm(&w, slba, nlb);
		else if (zero)
			ck_assert_int_eq(wc_cmd(&w, NVME_CMD_WRITE_ZEROES, slba, nlb, fua ? NVME_RW_FUA : 0), 0);
		else
			wc_write(&w, slba, nlb, t, fua);
		for (uint32_t i = 0; i < nlb; i++) {
			uint64_t b = slba + i;
			r.hist[b][r.n[b]++] = t;
			if (fua)
				rnd_durable(&r, b);
		}
	}
	wc_cut(&w, cases[_i].seed, false);
	wc_read(&w, 0, RND_NLBA);
	unsigned old = 0, newest = 0;
	for (unsigned b = 0; b < RND_NLBA; b++) {
		const uint8_t *p = w.buf + (size_t)b * 512;
		unsigned n = r.n[b], k;
		for (k = 0; k < n; k++)
			if (is(p, 512, b, r.hist[b][k]))
				break;
		ck_assert_msg(k < n, "block %u holds none of its %u allowed versions", b, n);
		if (n == 1)
			continue; /* not written since known durable: k == 0 is its newest */
		if (!cases[_i].wc_bytes && !cases[_i].seed)
			ck_assert_msg(k == 0, "block %u: not its durable version", b);
		if (!cases[_i].wc_bytes)
			ck_assert_msg(k == 0 || k == n - 1, "block %u: neither durable nor newest", b);
		old += k == 0 && r.hist[b][0] != r.hist[b][n - 1];
		newest += k == n - 1;
	}
	struct sim_stats st = wc_stats(&w);
	printf("random %d: %u blocks back at their durable version, %u at their newest, "
	       "%llu destaged\n", _i, old, newest, (unsigned long long)st.wc_destaged);
	ck_assert_uint_gt(st.pf_blocks_lost, 0);
	if (!cases[_i].wc_bytes)
		ck_assert_uint_gt(old, 0);
	else
		ck_assert_uint_gt(st.wc_destaged, 0);
	host_fini(&w.h);
}
END_TEST

/* Set Features WCE = 0: what the cache held is durable, and so is each
 * write from then on; WCE is back at 1 after a controller reset. */
START_TEST(t_wc_feature)
{
	struct wc w;
	uint32_t dw0;
	wc_open(&w, 512, 1024, SIM_BACKING_RAM, NULL, false);
	wc_start(&w);
	ck_assert_int_eq(adm(&w.h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_VOLATILE_WC, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 1);
	wc_write(&w, 0, 8, 1, false);
	ck_assert_int_eq(adm(&w.h, NVME_ADM_SET_FEATURES, 0, 0, NVME_FEAT_VOLATILE_WC, 0, &dw0), 0);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 0);
	wc_write(&w, 8, 8, 2, false);
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 0);
	wc_cut(&w, 0, false);
	wc_check(&w, 0, 8, 1);
	wc_check(&w, 8, 8, 2);
	ck_assert_int_eq(adm(&w.h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_VOLATILE_WC, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 1);
	host_fini(&w.h);
	/* without a volatile write cache every completed write is durable */
	wc_open(&w, 512, 1024, SIM_BACKING_RAM, NULL, false);
	w.o.vwc = false;
	wc_start(&w);
	ck_assert_int_eq(adm(&w.h, NVME_ADM_GET_FEATURES, 0, 0, NVME_FEAT_VOLATILE_WC, 0, &dw0),
			 NVME_SC_INVALID_FIELD);
	wc_write(&w, 0, 8, 3, false);
	wc_cut(&w, 0, false);
	wc_check(&w, 0, 8, 3);
	ck_assert_uint_eq(wc_stats(&w).pf_blocks_lost, 0);
	host_fini(&w.h);
}
END_TEST

/* A cut drops what the device held back: a delayed completion never
 * arrives, stalled commands are gone; commands sent while it is off do
 * nothing. */
START_TEST(t_powerfail_drops)
{
	struct wc w;
	wc_open(&w, 512, 1024, SIM_BACKING_RAM, NULL, _i);
	wc_start(&w);
	sim_fault_stall_next(w.h.s, 1);
	struct nvme_sqe c = { .opc = NVME_CMD_READ, .nsid = 1, .prp1 = io(&w.h, w.buf) };
	submit(&w.h, &w.h.ioq, &c);
	for (int i = 0; i < 2000 && wc_stats(&w).stalled != 1; i++)
		usleep(1000);
	ck_assert_uint_eq(wc_stats(&w).stalled, 1);
	sim_fault_delay(w.h.s, 50000);
	submit(&w.h, &w.h.ioq, &c);
	usleep(10000);
	ck_assert_int_eq(sim_fault_powerfail(w.h.s, 0), 0);
	ck_assert_uint_eq(wc_stats(&w).stalled, 0);
	/* past the delay: nothing arrives */
	for (int i = 0; i < 100; i++) {
		sim_poll(w.h.s);
		usleep(1000);
	}
	ck_assert_uint_ne(NVME_CQE_PHASE(w.h.ioq.cq[w.h.ioq.head].status), w.h.ioq.phase);
	/* off: doorbells do nothing, a second cut changes nothing */
	fill(w.buf, 512, 0, 9);
	struct nvme_sqe wr = { .opc = NVME_CMD_WRITE, .nsid = 1, .prp1 = io(&w.h, w.buf) };
	submit(&w.h, &w.h.ioq, &wr);
	sim_poll(w.h.s);
	ck_assert_int_eq(sim_fault_powerfail(w.h.s, 0), 0);
	ck_assert_uint_eq(wc_stats(&w).powerfails, 1);
	sim_fault_clear(w.h.s); /* delay off too */
	wc_restart(&w);
	wc_check(&w, 0, 1, 0);
	host_fini(&w.h);
}
END_TEST

/* clear cancels knobs and leaves a live controller alone; CFS is device
 * state: only a controller reset, a function reset or a power-on clears it. */
START_TEST(t_clear_and_cfs)
{
	struct wc w;
	wc_open(&w, 512, 1024, SIM_BACKING_RAM, NULL, false);
	wc_start(&w);
	sim_fault_delay(w.h.s, 20000);
	sim_fault_fail_next(w.h.s, 5, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	sim_fault_clear(w.h.s);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CC) & NVME_CC_EN, NVME_CC_EN);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS) & NVME_CSTS_RDY, NVME_CSTS_RDY);
	wc_write(&w, 0, 4, 1, false); /* no delay, no failure, same queues */
	wc_check(&w, 0, 4, 1);
	/* cfs survives clear; CC.EN 1 -> 0 clears it */
	sim_fault_cfs(w.h.s);
	sim_fault_clear(w.h.s);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS) & NVME_CSTS_CFS, NVME_CSTS_CFS);
	nvme_bus_write32(w.h.b, NVME_REG_CC, 0);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS) & (NVME_CSTS_CFS | NVME_CSTS_RDY), 0);
	wc_restart(&w);
	wc_check(&w, 0, 4, 1);
	/* cfs with EN = 0 survives EN 0 -> 1 (not ready), not a function reset */
	nvme_bus_write32(w.h.b, NVME_REG_CC, 0);
	sim_fault_cfs(w.h.s);
	nvme_bus_write32(w.h.b, NVME_REG_CC, NVME_CC_EN | (6u << NVME_CC_IOSQES_SHIFT) | (4u << NVME_CC_IOCQES_SHIFT));
	usleep(20000);
	uint32_t csts = nvme_bus_read32(w.h.b, NVME_REG_CSTS);
	ck_assert_uint_eq(csts & (NVME_CSTS_CFS | NVME_CSTS_RDY), NVME_CSTS_CFS);
	ck_assert_int_eq(w.h.b->ops->reset(w.h.b), 0);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS), 0);
	wc_restart(&w);
	wc_check(&w, 0, 4, 1);
	/* a removal keeps power: clear brings the device back, cache and all */
	wc_write(&w, 10, 2, 2, false);
	sim_fault_cfs(w.h.s);
	sim_fault_remove(w.h.s);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS), 0xffffffffu);
	ck_assert_int_eq(sim_power_on(w.h.s), -ENODEV);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS), 0xffffffffu);
	sim_fault_clear(w.h.s);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS), 0); /* no CFS: reset */
	ck_assert_uint_eq(wc_stats(&w).wc_dirty_blocks, 4 + 2); /* never flushed */
	wc_restart(&w);
	wc_check(&w, 10, 2, 2);
	/* removed, then a cut: power_on restores power, but it stays removed */
	sim_fault_remove(w.h.s);
	ck_assert_int_eq(sim_fault_powerfail(w.h.s, 0), 0);
	ck_assert_int_eq(sim_power_on(w.h.s), -ENODEV);
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS), 0xffffffffu);
	sim_fault_clear(w.h.s);
	wc_restart(&w);
	wc_check(&w, 10, 2, 0);
	ck_assert_int_eq(sim_power_on(w.h.s), 0); /* has power: nothing happens */
	ck_assert_uint_eq(nvme_bus_read32(w.h.b, NVME_REG_CSTS) & NVME_CSTS_RDY, NVME_CSTS_RDY);
	host_fini(&w.h);
}
END_TEST

/* ---- queues in parallel: a second and third queue built by hand, each
 * driven by one thread (cids per queue), reaped without sim_poll (which
 * waits for every executing thread) ---- */

struct pq {
	struct nvme_sqe *sq;
	struct nvme_cqe *cq;
	uint16_t sqid, cqid, size, tail, head, phase, cid;
};

static void pq_create(struct host *h, struct pq *q, uint16_t sqid, uint16_t cqid, uint16_t size,
                      bool new_cq)
{
	*q = (struct pq){.sqid = sqid, .cqid = cqid, .size = size, .phase = 1};
	q->sq = pg(h, size * 64u);
	if (new_cq) {
		q->cq = pg(h, size * 16u);
		ck_assert_int_eq(adm(h, NVME_ADM_CREATE_CQ, 0, io(h, q->cq), ((size - 1u) << 16) | cqid,
		                     NVME_QUEUE_PC, NULL), 0);
	}
	ck_assert_int_eq(adm(h, NVME_ADM_CREATE_SQ, 0, io(h, q->sq), ((size - 1u) << 16) | sqid,
	                     ((uint32_t)cqid << 16) | NVME_QUEUE_PC, NULL), 0);
}

static void pq_submit(struct host *h, struct pq *q, struct nvme_sqe *c)
{
	c->cid = ++q->cid;
	q->sq[q->tail] = *c;
	q->tail = (uint16_t)((q->tail + 1) % q->size);
	nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_sq_tdbl_off(q->sqid, dstrd(h))),
	                  q->tail);
}

/* The next CQE of q's CQ (cq, head and phase in q) within 5 s: -ETIMEDOUT. */
static int pq_reap(struct host *h, struct pq *q, struct nvme_cqe *out)
{
	for (long i = 0; i < 5000000; i++) {
		if (cq_take(h, q->cq, q->cqid, q->size, &q->head, &q->phase, out))
			return 0;
		if (i % 64 == 63)
			usleep(1);
	}
	return -ETIMEDOUT;
}

static struct nvme_sqe pq_rw(struct host *h, uint8_t opc, uint64_t slba, uint32_t nlb, uint8_t *buf)
{
	struct nvme_sqe c = {.opc = opc, .nsid = 1, .cdw10 = (uint32_t)slba,
	                     .cdw11 = (uint32_t)(slba >> 32), .cdw12 = nlb - 1};
	prps(h, &c, buf, (size_t)nlb * 512);
	return c;
}

/* The hook holds queue `hold`'s first command until a command of another
 * queue is executed, or the main thread's doorbell returned (rung), or 5 s
 * passed; it records who ran what. */
struct par {
	uint16_t hold;
	_Atomic int held, other_in, saw_other, rung;
	_Atomic uint16_t other_q;
	pthread_t hold_thread, other_thread;
	struct host *h;
	struct pq *q;
	uint8_t *buf;
};

static void par_hook(void *arg, uint16_t sqid, const struct nvme_sqe *c)
{
	struct par *p = arg;

	(void)c;
	if (sqid == p->hold && !atomic_load(&p->held)) {
		p->hold_thread = pthread_self();
		atomic_store(&p->held, 1);
		for (int i = 0; i < 50000 && !atomic_load(&p->other_in) && !atomic_load(&p->rung); i++)
			usleep(100);
		atomic_store(&p->saw_other, atomic_load(&p->other_in));
	} else if (sqid != p->hold) {
		p->other_thread = pthread_self();
		atomic_store(&p->other_q, sqid);
		atomic_store(&p->other_in, 1);
	}
}

static void *par_submit(void *arg)
{
	struct par *p = arg;
	struct nvme_sqe c = pq_rw(p->h, NVME_CMD_WRITE, 0, 1, p->buf);

	pq_submit(p->h, p->q, &c);
	return NULL;
}

/* Inline: SQ 1 and SQ 2, each with its own CQ, execute at once on the
 * threads that ring them (a device's queues run in parallel); SQ 3, which
 * shares CQ 2 with SQ 2, does not: the thread executing SQ 2 runs it. */
START_TEST(t_queues_parallel)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	struct par p = {.hold = 1, .h = &h};
	struct pq q1, q2, q3;
	struct nvme_cqe e;
	pthread_t t;

	o.io_hook = par_hook;
	o.hook_arg = &p;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	pq_create(&h, &q1, 1, 1, QD, true);
	pq_create(&h, &q2, 2, 2, QD, true);
	uint8_t *buf = pg(&h, 4096);
	p.buf = pg(&h, 4096);

	/* SQ 1's write is held in the hook on thread t until SQ 2 runs */
	p.q = &q1;
	ck_assert_int_eq(pthread_create(&t, NULL, par_submit, &p), 0);
	while (!atomic_load(&p.held))
		usleep(100);
	struct nvme_sqe c = pq_rw(&h, NVME_CMD_READ, 8, 1, buf);
	pq_submit(&h, &q2, &c);
	/* run here, beside SQ 1, and completed before the doorbell returned */
	ck_assert_int_eq(atomic_load(&p.other_in), 1);
	ck_assert_uint_eq(atomic_load(&p.other_q), 2);
	ck_assert(pthread_equal(p.other_thread, pthread_self()));
	ck_assert_int_eq(pq_reap(&h, &q2, &e), 0);
	ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(atomic_load(&p.saw_other), 1);
	ck_assert_int_eq(pq_reap(&h, &q1, &e), 0);
	ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);

	/* SQ 3 on CQ 2 beside SQ 2: SQ 3's read waits for SQ 2's write and
	 * runs on the thread that executes SQ 2 */
	pq_create(&h, &q3, 3, 2, QD, false);
	q3.cq = q2.cq;
	atomic_store(&p.held, 0);
	atomic_store(&p.other_in, 0);
	atomic_store(&p.saw_other, 0);
	p.hold = 2;
	p.q = &q2;
	ck_assert_int_eq(pthread_create(&t, NULL, par_submit, &p), 0);
	while (!atomic_load(&p.held))
		usleep(100);
	c = pq_rw(&h, NVME_CMD_READ, 8, 1, buf);
	pq_submit(&h, &q3, &c);
	ck_assert_int_eq(atomic_load(&p.other_in), 0);
	atomic_store(&p.rung, 1);
	pthread_join(t, NULL);
	ck_assert_int_eq(atomic_load(&p.saw_other), 0);
	ck_assert_int_eq(atomic_load(&p.other_in), 1);
	ck_assert_uint_eq(atomic_load(&p.other_q), 3);
	ck_assert(pthread_equal(p.other_thread, p.hold_thread));
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(pq_reap(&h, &q2, &e), 0);
		ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
		ck_assert_uint_eq(e.sq_id, i ? 3 : 2);
	}
	struct sim_stats st;
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.writes, 2);
	ck_assert_uint_eq(st.reads, 2);
	host_fini(&h);
}
END_TEST

/* Two threads, each on its own queue pair, write and read back random
 * ranges of their own half of a namespace with the write cache on, with a
 * Flush now and then (seeded: the same commands every run); both halves
 * hold what was written last, and every command was counted.  Under
 * ThreadSanitizer it checks that two queues' writes into the one write
 * cache model and the counters are guarded. */
#define PS_CMDS  1500
#define PS_HALF  4096u /* blocks of 512 bytes per thread */
#define PS_MAXNB 16u /* 8 KiB from a page-aligned buffer: PRP1 and PRP2, no list to build */

struct ps {
	struct host *h;
	struct pq *q;
	uint64_t base;
	uint8_t *model, *wbuf, *rbuf;
	unsigned seed;
	bool pair; /* each command with a Flush behind it (ps_cmd) */
	int bad;
	uint64_t writes, reads, flushes;
};

/* c on q, waited for: its status, -1 without its completion */
static int pq_cmd(struct host *h, struct pq *q, struct nvme_sqe *c)
{
	struct nvme_cqe e;

	pq_submit(h, q, c);
	if (pq_reap(h, q, &e) || e.cid != q->cid)
		return -1;
	return NVME_CQE_STATUS(e.status) & ~NVME_STATUS_DNR;
}

/* c, and behind it in the same doorbell the command `then`, on q; both
 * waited for (in either order): c's status, -1 when a completion is missing
 * or `then` failed.  A command with another behind it is one the copy
 * thread may take (sim.h, opts.offload). */
static void pq_submit2(struct host *h, struct pq *q, struct nvme_sqe *c, struct nvme_sqe *then)
{
	c->cid = ++q->cid;
	q->sq[q->tail] = *c;
	q->tail = (uint16_t)((q->tail + 1) % q->size);
	then->cid = ++q->cid;
	q->sq[q->tail] = *then;
	q->tail = (uint16_t)((q->tail + 1) % q->size);
	nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_sq_tdbl_off(q->sqid, dstrd(h))),
	                  q->tail);
}

static int pq_cmd2(struct host *h, struct pq *q, struct nvme_sqe *c, struct nvme_sqe *then)
{
	struct nvme_cqe e;
	int st = -1, st2 = -1;

	pq_submit2(h, q, c, then);
	for (int i = 0; i < 2; i++) {
		if (pq_reap(h, q, &e))
			return -1;
		if (e.cid == c->cid)
			st = NVME_CQE_STATUS(e.status) & ~NVME_STATUS_DNR;
		else if (e.cid == then->cid)
			st2 = NVME_CQE_STATUS(e.status) & ~NVME_STATUS_DNR;
	}
	return st2 == 0 ? st : -1;
}

/* The copy thread beside two queues (loop index 1 of the tests below): a
 * write of 8 blocks or more with a command behind it is handed to the copy
 * thread, which the ringing thread takes back at the end of its pass unless
 * the copy thread has started it (sim_offload_back).  With two test threads
 * on two CPUs it has seldom started, so pair_hook lets the command behind
 * wait (up to 2 ms) until the copy thread starts a command: both move data
 * at once, and the take-back still happens when the wait runs out. */
static _Atomic unsigned long pair_copy_in; /* commands started off the test threads */
static __thread bool pair_worker;
static __thread uint16_t pair_then_cid; /* the command behind, 0: none to wait in */
static __thread unsigned long pair_snap;

static void pair_hook(void *arg, uint16_t sqid, const struct nvme_sqe *c)
{
	struct timespec t0, t1;

	(void)arg;
	(void)sqid;
	if (!pair_worker) {
		atomic_fetch_add(&pair_copy_in, 1);
		return;
	}
	if (!pair_then_cid || c->cid != pair_then_cid)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while (atomic_load(&pair_copy_in) == pair_snap &&
	         (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 2000000L);
}

/* c with `then` behind it (pq_cmd2); a write the copy thread may take gets
 * pair_hook's wait */
static int pair_cmd(struct host *h, struct pq *q, struct nvme_sqe *c, struct nvme_sqe *then)
{
	bool big = c->opc == NVME_CMD_WRITE && (c->cdw12 & 0xffff) + 1u >= 8;

	pair_snap = atomic_load(&pair_copy_in);
	pair_then_cid = big ? (uint16_t)(q->cid + 2) : 0;
	int rc = pq_cmd2(h, q, c, then);
	pair_then_cid = 0;
	return rc;
}

/* with the copy thread on, every command has a Flush behind it */
static int ps_cmd(struct ps *t, struct nvme_sqe *c)
{
	struct nvme_sqe fl = {.opc = NVME_CMD_FLUSH, .nsid = 1};

	return t->pair ? pair_cmd(t->h, t->q, c, &fl) : pq_cmd(t->h, t->q, c);
}

static void *ps_run(void *arg)
{
	struct ps *t = arg;
	unsigned r = t->seed;

	pair_worker = true;

	for (int i = 0; i < PS_CMDS && !t->bad; i++) {
		r = r * 1103515245u + 12345u;
		unsigned nb = 1 + (r >> 8) % PS_MAXNB, kind = (r >> 20) % 8;
		uint64_t lba = (r >> 4) % (PS_HALF - nb);
		size_t len = (size_t)nb * 512;
		struct nvme_sqe c;

		if (kind == 0) {
			c = (struct nvme_sqe){.opc = NVME_CMD_FLUSH, .nsid = 1};
			t->bad |= ps_cmd(t, &c) != 0;
			t->flushes++;
		} else if (kind < 5) {
			for (size_t k = 0; k < len; k++)
				t->wbuf[k] = (uint8_t)(r + k * 31 + i);
			memcpy(t->model + lba * 512, t->wbuf, len);
			c = pq_rw(t->h, NVME_CMD_WRITE, t->base + lba, nb, t->wbuf);
			t->bad |= ps_cmd(t, &c) != 0;
			t->writes++;
		} else {
			c = pq_rw(t->h, NVME_CMD_READ, t->base + lba, nb, t->rbuf);
			t->bad |= ps_cmd(t, &c) != 0;
			t->bad |= memcmp(t->rbuf, t->model + lba * 512, len) != 0;
			t->reads++;
		}
	}
	return NULL;
}

START_TEST(t_queues_parallel_stress)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	struct pq q[2];
	struct ps t[2];
	pthread_t th[2];
	struct sim_stats st;

	o.wc_bytes = 256 << 10; /* 512 blocks: both threads destage too */
	o.offload = _i ? 4096 : 0; /* 1: writes of 8 blocks and more on the copy thread */
	o.io_hook = _i ? pair_hook : NULL;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	for (int i = 0; i < 2; i++) {
		pq_create(&h, &q[i], (uint16_t)(i + 1), (uint16_t)(i + 1), QD, true);
		t[i] = (struct ps){.h = &h, .q = &q[i], .base = (uint64_t)i * PS_HALF, .seed = 7u + (unsigned)i,
		                   .pair = _i};
		t[i].model = calloc(PS_HALF, 512);
		ck_assert_ptr_nonnull(t[i].model);
		t[i].wbuf = pg(&h, PS_MAXNB * 512);
		t[i].rbuf = pg(&h, PS_MAXNB * 512);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, ps_run, &t[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].bad, 0);
	}
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.writes, t[0].writes + t[1].writes);
	ck_assert_uint_eq(st.reads, t[0].reads + t[1].reads);
	ck_assert_uint_eq(st.flushes, t[0].flushes + t[1].flushes +
	                                  (_i ? t[0].writes + t[0].reads + t[0].flushes + t[1].writes +
	                                            t[1].reads + t[1].flushes
	                                      : 0));
	ck_assert_uint_gt(t[0].writes, 0);
	ck_assert_uint_gt(t[1].flushes, 0);
	if (_i) {
		/* what was handed over is the workload's; how much of it the copy
		 * thread started before the ringing thread took it back is the
		 * scheduler's (a busy machine takes more back) */
		ck_assert_uint_gt(st.offloaded + st.offload_back, st.writes / 4);
		ck_assert_uint_gt(st.offloaded, 0);
	} else {
		ck_assert_uint_eq(st.offloaded, 0);
		ck_assert_uint_eq(st.offload_back, 0);
	}
	for (int i = 0; i < 2; i++)
		free(t[i].model);
	host_fini(&h);
}
END_TEST

/* Two threads, each on its own queue pair, write, read and flush random
 * overlapping ranges of the same 64 blocks, every block of a command filled
 * with one byte that names the command (seeded).  Each command is atomic to
 * the other queue's: a read never sees a block with two commands' bytes,
 * and after a power cut that loses every cached write, no block holds a
 * pre-image torn by a write of the other queue (sim_ns_enter). */
#define PA_CMDS   10000
#define PA_BLOCKS 64u

struct pa {
	struct host *h;
	struct pq *q;
	uint8_t *wbuf, *rbuf;
	unsigned id;
	bool pair; /* each command with a 1-block read behind it (pa_cmd) */
	int torn, bad;
};

/* Every block of buf (nb blocks of 512) holds one byte value. */
static bool pa_whole(const uint8_t *buf, unsigned nb)
{
	for (unsigned b = 0; b < nb; b++)
		for (unsigned k = 1; k < 512; k++)
			if (buf[b * 512 + k] != buf[b * 512])
				return false;
	return true;
}

/* c on t's queue; with pair, a read of one block (at lba) behind it */
static int pa_cmd(struct pa *t, struct nvme_sqe *c, uint64_t lba)
{
	if (!t->pair)
		return pq_cmd(t->h, t->q, c);
	struct nvme_sqe one = pq_rw(t->h, NVME_CMD_READ, lba, 1, t->rbuf + 8192);
	return pair_cmd(t->h, t->q, c, &one);
}

static void *pa_run(void *arg)
{
	struct pa *t = arg;
	unsigned r = 99u + t->id;

	pair_worker = true;

	for (int i = 0; i < PA_CMDS && !t->bad; i++) {
		r = r * 1103515245u + 12345u;
		unsigned nb = 1 + (r >> 8) % 16, kind = (r >> 20) % 10;
		uint64_t lba = (r >> 4) % (PA_BLOCKS - nb + 1);
		struct nvme_sqe c;

		if (kind == 0) {
			c = (struct nvme_sqe){.opc = NVME_CMD_FLUSH, .nsid = 1};
			t->bad |= pa_cmd(t, &c, lba) != 0;
		} else if (kind < 7) {
			memset(t->wbuf, 1 + (int)(t->id * 127 + (unsigned)i % 127), (size_t)nb * 512);
			c = pq_rw(t->h, NVME_CMD_WRITE, lba, nb, t->wbuf);
			t->bad |= pa_cmd(t, &c, lba) != 0;
		} else {
			c = pq_rw(t->h, NVME_CMD_READ, lba, nb, t->rbuf);
			t->bad |= pa_cmd(t, &c, lba) != 0;
			t->torn += !pa_whole(t->rbuf, nb);
		}
	}
	return NULL;
}

START_TEST(t_queues_atomic)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	struct pq q[2], q1;
	struct pa t[2];
	pthread_t th[2];
	struct nvme_cqe e;

	o.wc_bytes = 16 * 512; /* small: destaging drops entries as a Flush does */
	o.offload = _i ? 4096 : 0; /* 1: the copy thread beside both queues */
	o.io_hook = _i ? pair_hook : NULL;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	for (unsigned i = 0; i < 2; i++) {
		pq_create(&h, &q[i], (uint16_t)(i + 1), (uint16_t)(i + 1), QD, true);
		t[i] = (struct pa){.h = &h, .q = &q[i], .id = i, .pair = _i};
		t[i].wbuf = pg(&h, 8192);
		t[i].rbuf = pg(&h, 8192 + 4096);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, pa_run, &t[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].bad, 0);
		ck_assert_int_eq(t[i].torn, 0);
	}
	if (_i) {
		struct sim_stats st;
		sim_get_stats(h.s, &st);
		ck_assert_uint_gt(st.offloaded, 0);
	}

	/* the power cut puts every cached block's pre-image back */
	ck_assert_int_eq(sim_fault_powerfail(h.s, 0), 0);
	ck_assert_int_eq(sim_power_on(h.s), 0);
	memset(h.aq.cq, 0, 4096);
	h.aq.tail = h.aq.head = 0;
	h.aq.phase = 1;
	ck_assert_int_eq(host_enable(&h), 0);
	pq_create(&h, &q1, 1, 1, QD, true);
	uint8_t *buf = pg(&h, PA_BLOCKS * 512);
	for (unsigned b = 0; b < PA_BLOCKS; b += 8) {
		struct nvme_sqe c = pq_rw(&h, NVME_CMD_READ, b, 8, buf + b * 512);
		pq_submit(&h, &q1, &c);
		ck_assert_int_eq(pq_reap(&h, &q1, &e), 0);
		ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
	}
	for (unsigned b = 0; b < PA_BLOCKS; b++)
		ck_assert_msg(pa_whole(buf + b * 512, 1), "block %u torn after the power cut", b);
	host_fini(&h);
}
END_TEST

/* ---- the copy thread (opts.offload) ---- */

/* Records which threads ran what.  While hold is set, a command of 8
 * blocks or more on the copy thread waits in the hook (at most 5 s), and a
 * small one on the ringing thread waits until the copy thread has started
 * the large one (else the ringing thread would take it back at the end of
 * its pass, sim_offload_back); main counts large ones run on the test's
 * own thread (big_main). */
struct offh {
	_Atomic int hold, in_big, big_out, small_in, big_main;
	pthread_t main, big_thread, small_thread;
};

static void off_hook(void *arg, uint16_t sqid, const struct nvme_sqe *c)
{
	struct offh *p = arg;
	bool on_main = pthread_equal(pthread_self(), p->main);

	(void)sqid;
	if ((c->cdw12 & 0xffff) + 1u >= 8) {
		if (on_main) {
			atomic_fetch_add(&p->big_main, 1);
			return;
		}
		p->big_thread = pthread_self();
		atomic_store(&p->big_out, 0);
		atomic_store(&p->in_big, 1);
		for (int i = 0; i < 50000 && atomic_load(&p->hold); i++)
			usleep(100);
		atomic_store(&p->big_out, 1);
	} else {
		p->small_thread = pthread_self();
		atomic_store(&p->small_in, 1);
		for (int i = 0; i < 50000 && atomic_load(&p->hold) && !atomic_load(&p->in_big); i++)
			usleep(100);
	}
}

/* the next completion on q is cid's, successful */
static void off_expect(struct host *h, struct pq *q, uint16_t cid)
{
	struct nvme_cqe e;

	ck_assert_int_eq(pq_reap(h, q, &e), 0);
	ck_assert_uint_eq(e.cid, cid);
	ck_assert_uint_eq(NVME_CQE_STATUS(e.status), 0);
}

static void *off_release(void *arg)
{
	struct offh *p = arg;

	usleep(100000);
	atomic_store(&p->hold, 0);
	return NULL;
}

/* A large write with another command behind it runs on the copy thread:
 * the doorbell returns while it is held, the small command behind it runs
 * on the ringing thread and completes first; the write completes when let
 * go, with its data.  A large write alone, and a large read, run on the
 * ringing thread.  A
 * controller reset waits until the copy thread is done with a command:
 * after it, nothing moves data into the host's buffer. */
START_TEST(t_offload)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	struct offh p = {.hold = 1, .main = pthread_self()};
	struct pq q;
	struct sim_stats st;
	pthread_t t;

	o.offload = 4096;
	o.io_hook = off_hook;
	o.hook_arg = &p;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	pq_create(&h, &q, 1, 1, QD, true);
	uint8_t *wbuf = pg(&h, 8192), *rbuf = pg(&h, 8192), *small = pg(&h, 4096);
	for (unsigned i = 0; i < 8192; i++)
		wbuf[i] = (uint8_t)(i * 7 + 3);

	struct nvme_sqe big = pq_rw(&h, NVME_CMD_WRITE, 0, 16, wbuf);
	struct nvme_sqe c = pq_rw(&h, NVME_CMD_READ, 100, 1, small);
	pq_submit2(&h, &q, &big, &c); /* returns with the write held on the copy thread */
	while (!atomic_load(&p.in_big))
		usleep(100);
	ck_assert(!pthread_equal(p.big_thread, pthread_self()));
	ck_assert_int_eq(atomic_load(&p.small_in), 1);
	ck_assert(pthread_equal(p.small_thread, pthread_self()));
	off_expect(&h, &q, c.cid); /* the small read first */
	ck_assert_int_eq(atomic_load(&p.big_out), 0);
	atomic_store(&p.hold, 0);
	off_expect(&h, &q, big.cid);

	struct nvme_sqe rd = pq_rw(&h, NVME_CMD_READ, 0, 16, rbuf);
	ck_assert_int_eq(pq_cmd(&h, &q, &rd), 0);
	ck_assert_int_eq(atomic_load(&p.big_main), 1); /* alone: here */
	ck_assert_int_eq(memcmp(rbuf, wbuf, 8192), 0);

	/* a large read stays here even with a command behind it */
	memset(rbuf, 0, 8192);
	rd = pq_rw(&h, NVME_CMD_READ, 0, 16, rbuf);
	c = pq_rw(&h, NVME_CMD_READ, 100, 1, small);
	ck_assert_int_eq(pq_cmd2(&h, &q, &rd, &c), 0);
	ck_assert_int_eq(atomic_load(&p.big_main), 2);
	ck_assert_int_eq(memcmp(rbuf, wbuf, 8192), 0);

	/* a write held on the copy thread, then a reset (CC.EN 0) */
	atomic_store(&p.hold, 1);
	atomic_store(&p.in_big, 0);
	big = pq_rw(&h, NVME_CMD_WRITE, 32, 16, wbuf);
	c = pq_rw(&h, NVME_CMD_READ, 100, 1, small);
	pq_submit2(&h, &q, &big, &c);
	while (!atomic_load(&p.in_big))
		usleep(100);
	ck_assert(!pthread_equal(p.big_thread, pthread_self()));
	ck_assert_int_eq(pthread_create(&t, NULL, off_release, &p), 0);
	nvme_bus_write32(h.b, NVME_REG_CC, 0);
	ck_assert_int_eq(atomic_load(&p.big_out), 1);
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.writes, 2); /* executed before the reset returned */
	pthread_join(t, NULL);
	ck_assert_uint_eq(st.offloaded, 2);
	ck_assert_uint_eq(st.offload_back, 0);
	ck_assert_uint_eq(st.reads, 5);
	host_fini(&h);
}
END_TEST

/* A command handed over that the copy thread has not started when the
 * ringing thread's pass ends is taken back and executed there: here the
 * copy thread is held in queue 1's write while queue 2 hands it another.
 * Both complete with their data; the held one when let go. */
START_TEST(t_offload_back)
{
	struct host h;
	struct sim_opts o = opts(512, SIM_BACKING_RAM, false);
	struct offh p = {.hold = 1, .main = pthread_self()};
	struct pq q1, q2;
	struct sim_stats st;

	o.offload = 4096;
	o.io_hook = off_hook;
	o.hook_arg = &p;
	host_init(&h, &o);
	ck_assert_int_eq(host_enable(&h), 0);
	pq_create(&h, &q1, 1, 1, QD, true);
	pq_create(&h, &q2, 2, 2, QD, true);
	uint8_t *w1 = pg(&h, 8192), *w2 = pg(&h, 8192), *rbuf = pg(&h, 8192), *small = pg(&h, 4096);
	for (unsigned i = 0; i < 8192; i++) {
		w1[i] = (uint8_t)(i * 7 + 3);
		w2[i] = (uint8_t)(i * 13 + 5);
	}

	struct nvme_sqe b1 = pq_rw(&h, NVME_CMD_WRITE, 0, 16, w1);
	struct nvme_sqe c1 = pq_rw(&h, NVME_CMD_READ, 100, 1, small);
	pq_submit2(&h, &q1, &b1, &c1); /* b1 held on the copy thread */
	ck_assert_int_eq(atomic_load(&p.in_big), 1);
	off_expect(&h, &q1, c1.cid);

	struct nvme_sqe b2 = pq_rw(&h, NVME_CMD_WRITE, 64, 16, w2);
	struct nvme_sqe c2 = pq_rw(&h, NVME_CMD_READ, 101, 1, small);
	pq_submit2(&h, &q2, &b2, &c2);
	ck_assert_int_eq(atomic_load(&p.big_main), 1); /* taken back, executed here */
	off_expect(&h, &q2, c2.cid);
	off_expect(&h, &q2, b2.cid);
	ck_assert_int_eq(atomic_load(&p.big_out), 0); /* b1 still held */
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.offload_back, 1);
	ck_assert_uint_eq(st.offloaded, 0);

	atomic_store(&p.hold, 0);
	off_expect(&h, &q1, b1.cid);

	struct nvme_sqe rd = pq_rw(&h, NVME_CMD_READ, 0, 16, rbuf);
	ck_assert_int_eq(pq_cmd(&h, &q1, &rd), 0);
	ck_assert_int_eq(memcmp(rbuf, w1, 8192), 0);
	rd = pq_rw(&h, NVME_CMD_READ, 64, 16, rbuf);
	ck_assert_int_eq(pq_cmd(&h, &q2, &rd), 0);
	ck_assert_int_eq(memcmp(rbuf, w2, 8192), 0);
	sim_get_stats(h.s, &st);
	ck_assert_uint_eq(st.offloaded, 1);
	ck_assert_uint_eq(st.offload_back, 1);
	host_fini(&h);
}
END_TEST

/* ---- metadata and end-to-end protection information ---- */

/* The guards against their published check values ("123456789"), and
 * what an all-zero block gives (the CRC-16 of zeroes is 0; QEMU's NVMe
 * model writes the CRC-64 of a 4 KiB zero block as a constant). */
START_TEST(t_pi_crc)
{
	static const uint8_t zero[4096];
	const char *check = "123456789";
	ck_assert_uint_eq(sim_crc16_t10dif(0, check, 9), 0xd0db);
	ck_assert_uint_eq(sim_crc64_nvme(check, 9), 0xae8b14860a799888ull);
	ck_assert_uint_eq(sim_crc16_t10dif(0, zero, sizeof(zero)), 0);
	ck_assert_uint_eq(sim_crc64_nvme(zero, 4096), 0x6482d367eb22b64eull);
	/* a running CRC over pieces is the CRC of the whole */
	uint8_t b[1000];
	for (unsigned i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 31 + 7);
	uint16_t c16 = sim_crc16_t10dif(sim_crc16_t10dif(0, b, 333), b + 333, sizeof(b) - 333);
	ck_assert_uint_eq(c16, sim_crc16_t10dif(0, b, sizeof(b)));
	uint64_t st = sim_crc64_nvme_update(SIM_CRC64_INIT, b, 17);
	ck_assert_uint_eq(~sim_crc64_nvme_update(st, b + 17, sizeof(b) - 17), sim_crc64_nvme(b, sizeof(b)));
	/* one flipped bit changes both */
	b[500] ^= 4;
	ck_assert_uint_ne(sim_crc16_t10dif(0, b, sizeof(b)), c16);
	/* a tuple round trip, big-endian on the medium */
	struct sim_pi_fmt f16 = {.type = 1, .ms = 16, .first = false}, f64 = {.type = 1, .g64 = true, .ms = 16, .first = true};
	uint8_t md[16] = {0};
	struct sim_pi_tuple t = {.guard = 0xabcd, .app = 0x1234, .ref = 0x89abcdefu}, u;
	sim_pi_put(&f16, md, &t);
	ck_assert_uint_eq(md[8], 0xab);
	ck_assert_uint_eq(md[10], 0x12);
	ck_assert_uint_eq(md[12], 0x89);
	ck_assert_uint_eq(md[15], 0xef);
	sim_pi_get(&f16, md, &u);
	ck_assert(u.guard == t.guard && u.app == t.app && u.ref == t.ref);
	t = (struct sim_pi_tuple){.guard = 0x0102030405060708ull, .app = 0xfffe, .ref = 0xa0b0c0d0e0f0ull};
	sim_pi_put(&f64, md, &t);
	ck_assert_uint_eq(md[0], 0x01);
	ck_assert_uint_eq(md[10], 0xa0);
	ck_assert_uint_eq(md[15], 0xf0);
	sim_pi_get(&f64, md, &u);
	ck_assert(u.guard == t.guard && u.app == t.app && u.ref == t.ref);
}
END_TEST

/* A namespace format with metadata, for the tests below. */
struct pif {
	unsigned bs, ms, type;
	bool g64, first, ext;
};

static const struct pif pi_formats[] = {
	{512, 8, 1, false, false, false},   {4096, 8, 2, false, true, true},
	{4096, 8, 3, false, false, false},  {512, 16, 1, false, false, false},
	{4096, 16, 2, false, true, false},  {4096, 16, 1, true, false, false},
	{512, 16, 3, true, true, true},     {4096, 64, 2, true, false, false},
	{512, 64, 1, false, true, false},   {4096, 64, 3, false, false, true},
	{4096, 8, 0, false, false, false},  {512, 16, 0, false, false, true},
};

static void pi_open(struct wc *w, const struct pif *f, enum sim_backing bk, const char *path)
{
	wc_open(w, f->bs, 256, bk, path, false);
	w->o.ns[0].ms = f->ms;
	w->o.ns[0].pi_type = f->type;
	w->o.ns[0].pi_g64 = f->g64;
	w->o.ns[0].pi_first = f->first;
	w->o.ns[0].md_ext = f->ext;
	wc_start(w);
}

static struct sim_pi_fmt pi_fmt(const struct pif *f)
{
	return (struct sim_pi_fmt){.type = f->type, .g64 = f->g64, .first = f->first, .ms = f->ms};
}

/* A Read or Write of nlb blocks at slba through buf (unit bytes a block),
 * metadata at md (MPTR; NULL: none), the PI fields as given. */
static int pi_cmd(struct wc *w, uint8_t opc, uint64_t slba, uint32_t nlb, uint8_t *buf, size_t unit,
                  uint8_t *md, uint32_t prinfo, uint64_t ref, uint32_t cdw15)
{
	struct nvme_sqe c = {.opc = opc, .nsid = 1, .cdw10 = (uint32_t)slba, .cdw11 = (uint32_t)(slba >> 32),
	                     .cdw12 = (nlb - 1) | prinfo, .cdw14 = (uint32_t)ref,
	                     .cdw3 = (uint32_t)(ref >> 32), .cdw15 = cdw15};
	if (opc == NVME_CMD_WRITE || opc == NVME_CMD_READ)
		prps(&w->h, &c, buf, (size_t)nlb * unit);
	if (md)
		c.mptr = io(&w->h, md);
	return cmd(&w->h, &w->h.ioq, &c, NULL);
}

#define PRACT_CHK (NVME_RW_PRACT | NVME_RW_PRCHK_GUARD | NVME_RW_PRCHK_REF)
#define MEDIA(sc) NVME_STATUS_MAKE(NVME_SCT_MEDIA, sc)

/* Each format: what Identify reports; a Write with PRACT (metadata crossing
 * only when it is larger than the PI) reads back with PRACT and every check;
 * read without PRACT, the stored PI is the guard of the data (and the
 * metadata before the PI), the application tag sent and the reference tag
 * of each block (Type 3: the one sent). */
START_TEST(t_pi_formats)
{
	const struct pif *f = &pi_formats[_i];
	struct sim_pi_fmt pf = pi_fmt(f);
	struct wc w;
	pi_open(&w, f, SIM_BACKING_RAM, NULL);
	struct host *h = &w.h;
	struct nvme_id_ns *id = pg(h, 4096);
	ck_assert_int_eq(adm(h, NVME_ADM_IDENTIFY, 1, io(h, id), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(id->lbaf[0].ms, f->ms);
	ck_assert_uint_eq(!!(id->flbas & NVME_FLBAS_EXT), f->ext);
	ck_assert_uint_eq(NVME_DPS_TYPE(id->dps), f->type);
	ck_assert_uint_eq(!!(id->dps & NVME_DPS_FIRST), f->type && f->first);
	struct nvme_id_ns_nvm *nvm = pg(h, 4096);
	ck_assert_int_eq(adm(h, NVME_ADM_IDENTIFY, 1, io(h, nvm), NVME_ID_CNS_NS_CSI, 0, NULL), 0);
	ck_assert_uint_eq(NVME_ELBAF_PIF(nvm->elbaf[0]), f->g64 ? NVME_PIF_64 : NVME_PIF_16);
	ck_assert_uint_eq(NVME_ELBAF_STS(nvm->elbaf[0]), 0);

	const uint32_t nlb = 8, lba = 40, app = 0x5a5a;
	unsigned pis = f->g64 ? 16 : 8;
	bool md_crosses = !f->type || f->ms > pis;
	size_t unit = f->bs + (f->ext && md_crosses ? f->ms : 0);
	uint8_t *buf = pg(h, nlb * unit), *md = pg(h, nlb * f->ms), *rd = pg(h, nlb * unit);
	for (uint32_t i = 0; i < nlb; i++) {
		fill(buf + i * unit, f->bs, lba + i, 7);
		memset(buf + i * unit + f->bs, (int)(0x40 + i), unit - f->bs);
		memset(md + i * f->ms, (int)(0x60 + i), f->ms);
	}
	uint8_t *mdp = md_crosses && !f->ext ? md : NULL;
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, lba, nlb, buf, unit, mdp, f->type ? NVME_RW_PRACT : 0, lba, app), 0);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, lba, nlb, rd, unit, mdp ? md + 0 : NULL,
	                        f->type ? PRACT_CHK | NVME_RW_PRCHK_APP : 0, lba, 0xffffu << 16 | app), 0);
	for (uint32_t i = 0; i < nlb; i++)
		ck_assert(is(rd + i * unit, f->bs, lba + i, 7));
	if (!f->type) {
		/* metadata without PI: what was written comes back */
		for (uint32_t i = 0; f->ext && i < nlb; i++)
			ck_assert_uint_eq(rd[i * unit + f->bs + f->ms - 1], 0x40 + i);
		host_fini(&h[0]);
		return;
	}
	/* the stored PI, read without PRACT (the metadata crosses) */
	size_t xunit = f->bs + (f->ext ? f->ms : 0);
	uint8_t *x = pg(h, nlb * xunit), *xmd = pg(h, nlb * f->ms);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, lba, nlb, x, xunit, f->ext ? NULL : xmd, 0, 0, 0), 0);
	for (uint32_t i = 0; i < nlb; i++) {
		const uint8_t *bmd = f->ext ? x + i * xunit + f->bs : xmd + i * f->ms;
		struct sim_pi_tuple t;
		sim_pi_get(&pf, bmd, &t);
		ck_assert_uint_eq(t.guard, sim_pi_guard(&pf, x + i * xunit, f->bs, bmd));
		ck_assert_uint_eq(t.app, app);
		ck_assert_uint_eq(t.ref, f->type == 3 ? lba : lba + i);
		/* the host's other metadata bytes are kept */
		if (f->ms > pis) {
			unsigned other = f->first ? f->ms - 1 : 0;
			uint8_t want = (uint8_t)(f->ext ? 0x40 + i : 0x60 + i);
			ck_assert_uint_eq(bmd[other], want);
		}
	}
	struct sim_stats st;
	sim_get_stats(h->s, &st);
	ck_assert_uint_eq(st.pi_guard_errors + st.pi_app_errors + st.pi_ref_errors, 0);
	host_fini(h);
}
END_TEST

/* Each check fails with its own status and is counted; an escaped block
 * (never written) is not checked. */
START_TEST(t_pi_errors)
{
	const struct pif f = {4096, 8, (unsigned)_i + 1, false, false, false};
	struct wc w;
	pi_open(&w, &f, SIM_BACKING_RAM, NULL);
	struct host *h = &w.h;
	uint8_t *buf = pg(h, 4 * 4096);
	for (unsigned i = 0; i < 4; i++)
		fill(buf + i * 4096, 4096, 10 + i, 3);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 10, 4, buf, 4096, NULL, NVME_RW_PRACT, 10, 0x77), 0);
	/* unwritten blocks: escaped, zeroes */
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 100, 1, buf, 4096, NULL, PRACT_CHK | NVME_RW_PRCHK_APP, 100, 0xffff0001u), 0);
	ck_assert(is(buf, 4096, 100, 0));
	/* application tag: checked under its mask */
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 10, 4, buf, 4096, NULL, NVME_RW_PRACT | NVME_RW_PRCHK_APP, 10, 0xffff0078u),
	                 MEDIA(NVME_SC_APPTAG_CHECK));
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 10, 4, buf, 4096, NULL, NVME_RW_PRACT | NVME_RW_PRCHK_APP, 10, 0xfff00078u), 0);
	/* reference tag: the one expected for the block (Type 3 keeps the one given) */
	uint16_t ref_st = pi_cmd(&w, NVME_CMD_READ, 11, 2, buf, 4096, NULL, NVME_RW_PRACT | NVME_RW_PRCHK_REF, 12, 0);
	if (f.type == 1)
		ck_assert_int_eq(ref_st, NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI)); /* Type 1: cdw14 must be the SLBA's */
	else
		ck_assert_int_eq(ref_st, MEDIA(NVME_SC_REFTAG_CHECK));
	if (f.type == 2) /* Type 2: any initial tag, as long as it matches */
		ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 20, 2, buf, 4096, NULL, NVME_RW_PRACT, 0x1000, 0), 0);
	/* guard: one byte of the medium changed under the PI */
	ck_assert_int_eq(sim_fault_corrupt(h->s, 1, 12, 100), 0);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 10, 4, buf, 4096, NULL, PRACT_CHK & ~(f.type == 3 ? NVME_RW_PRCHK_REF : 0), 10, 0),
	                 MEDIA(NVME_SC_GUARD_CHECK));
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 10, 2, buf, 4096, NULL, PRACT_CHK & ~(f.type == 3 ? NVME_RW_PRCHK_REF : 0), 10, 0), 0);
	ck_assert_int_eq(sim_fault_corrupt(h->s, 1, 256, 0), -EINVAL);
	ck_assert_int_eq(sim_fault_corrupt(h->s, 2, 0, 0), -ENOENT);
	/* a Write without PRACT whose guard is wrong writes nothing */
	uint8_t *md = pg(h, 4096);
	struct sim_pi_fmt pf = pi_fmt(&f);
	fill(buf, 4096, 30, 9);
	struct sim_pi_tuple t = {.guard = sim_pi_guard(&pf, buf, 4096, md) ^ 1, .app = 0, .ref = 30};
	sim_pi_put(&pf, md, &t);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 30, 1, buf, 4096, md, NVME_RW_PRCHK_GUARD, 30, 0), MEDIA(NVME_SC_GUARD_CHECK));
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 30, 1, buf, 4096, NULL, PRACT_CHK, 30, 0), 0);
	ck_assert(is(buf, 4096, 30, 0)); /* still unwritten */
	fill(buf, 4096, 30, 9);
	t.guard ^= 1;
	sim_pi_put(&pf, md, &t);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 30, 1, buf, 4096, md, NVME_RW_PRCHK_GUARD, 30, 0), 0);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 30, 1, buf, 4096, NULL, PRACT_CHK & ~(f.type == 3 ? NVME_RW_PRCHK_REF : 0), 30, 0), 0);
	ck_assert(is(buf, 4096, 30, 9));
	struct sim_stats st;
	sim_get_stats(h->s, &st);
	ck_assert_uint_eq(st.pi_guard_errors, 2);
	ck_assert_uint_eq(st.pi_app_errors, 1);
	ck_assert_uint_eq(st.pi_ref_errors, f.type == 1 ? 0 : 1);
	host_fini(h);
}
END_TEST

/* Misplaced data: a misdirected Write leaves its blocks' PI on other
 * blocks, whose reads then fail their reference tag check (Types 1, 2); a
 * misdirected Read gets other blocks and fails the same way.  Type 3 has no
 * reference check: its misplaced data reads back as if right. */
START_TEST(t_pi_misdirect)
{
	const struct pif f = {512, 16, (unsigned)_i + 1, _i == 1, true, false};
	struct wc w;
	pi_open(&w, &f, SIM_BACKING_RAM, NULL);
	struct host *h = &w.h;
	uint32_t chk = PRACT_CHK & ~(f.type == 3 ? NVME_RW_PRCHK_REF : 0);
	uint8_t *buf = pg(h, 8 * 512), *md = pg(h, 8 * 16);
	for (unsigned i = 0; i < 8; i++)
		fill(buf + i * 512, 512, 64 + i, 5);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 64, 8, buf, 512, md, NVME_RW_PRACT, 64, 0), 0);
	sim_fault_misdirect(h->s, true, 1, 16);
	for (unsigned i = 0; i < 8; i++)
		fill(buf + i * 512, 512, 32 + i, 6);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 32, 8, buf, 512, md, NVME_RW_PRACT, 32, 0), 0);
	/* it landed at 48: 32 still unwritten (escaped: zeroes, a lost write no
	 * check can see), 48 carries 32's reference tags */
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 32, 8, buf, 512, md, chk, 32, 0), 0);
	ck_assert(is(buf, 512, 32, 0));
	uint16_t st48 = pi_cmd(&w, NVME_CMD_READ, 48, 8, buf, 512, md, chk, 48, 0);
	if (f.type == 3) {
		ck_assert_int_eq(st48, 0);
		ck_assert(is(buf, 512, 32, 6)); /* wrong data, and the device cannot tell */
	} else {
		ck_assert_int_eq(st48, MEDIA(NVME_SC_REFTAG_CHECK));
	}
	/* a misdirected Read of 64 gets 72..79 (16 blocks on is past the end: back) */
	sim_fault_misdirect(h->s, false, 1, 8);
	for (unsigned i = 0; i < 8; i++)
		fill(buf + i * 512, 512, 72 + i, 5);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 72, 8, buf, 512, md, NVME_RW_PRACT, 72, 0), 0);
	uint16_t st64 = pi_cmd(&w, NVME_CMD_READ, 64, 8, buf, 512, md, chk, 64, 0);
	ck_assert_int_eq(st64, f.type == 3 ? 0 : MEDIA(NVME_SC_REFTAG_CHECK));
	/* the next one is not moved */
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 64, 8, buf, 512, md, chk, 64, 0), 0);
	ck_assert(is(buf, 512, 64, 5));
	struct sim_stats st;
	sim_get_stats(h->s, &st);
	ck_assert_uint_eq(st.misdirected, 2);
	ck_assert_uint_eq(st.pi_ref_errors, f.type == 3 ? 0 : 2);
	/* cleared with the other knobs */
	sim_fault_misdirect(h->s, true, 5, 16);
	sim_fault_clear(h->s);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 0, 8, buf, 512, md, NVME_RW_PRACT, 0, 0), 0);
	sim_get_stats(h->s, &st);
	ck_assert_uint_eq(st.misdirected, 2);
	host_fini(h);
}
END_TEST

/* Write Zeroes with PRACT stores the PI of zero blocks (they check), with
 * PRCHK bits it is refused; deallocated blocks are unchecked zeroes; a
 * power cut takes a block's data and metadata back together. */
START_TEST(t_pi_zeroes_powerfail)
{
	const struct pif f = {4096, 16, 1, _i == 1, false, false};
	struct wc w;
	pi_open(&w, &f, SIM_BACKING_RAM, NULL);
	struct host *h = &w.h;
	uint8_t *buf = pg(h, 4 * 4096), *md = pg(h, 4 * 16);
	for (unsigned i = 0; i < 4; i++)
		fill(buf + i * 4096, 4096, i, 2);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 0, 4, buf, 4096, md, NVME_RW_PRACT, 0, 0), 0);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE_ZEROES, 1, 1, NULL, 0, NULL, NVME_RW_PRACT | NVME_RW_PRCHK_GUARD, 1, 0),
	                 NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI));
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE_ZEROES, 1, 1, NULL, 0, NULL, NVME_RW_PRACT, 1, 0), 0);
	wc_dsm(&w, 2, 1);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 0, 4, buf, 4096, md, PRACT_CHK, 0, 0), 0);
	ck_assert(is(buf, 4096, 0, 2) && is(buf + 4096, 4096, 1, 0) && is(buf + 8192, 4096, 2, 0));
	/* the zeroed block's PI is real: the reference tag of its LBA */
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 1, 1, buf, 4096, md, 0, 0, 0), 0);
	struct sim_pi_fmt pf = pi_fmt(&f);
	struct sim_pi_tuple t;
	sim_pi_get(&pf, md, &t);
	ck_assert_uint_eq(t.ref, 1);
	ck_assert_uint_eq(t.guard, f.g64 ? 0x6482d367eb22b64eull : 0);
	/* durable version 2 of block 3, then version 4 in the cache, then a cut */
	wc_flush(&w, 1);
	fill(buf, 4096, 3, 4);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 3, 1, buf, 4096, md, NVME_RW_PRACT, 3, 0), 0);
	wc_cut(&w, 0, false);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 3, 1, buf, 4096, md, PRACT_CHK, 3, 0), 0);
	ck_assert(is(buf, 4096, 3, 2));
	host_fini(h);
}
END_TEST

/* A FILE namespace keeps its metadata in PATH.md: it survives the sim, and
 * a block changed in the data file underneath fails its guard. */
START_TEST(t_pi_file)
{
	char dir[] = "/tmp/test_sim.XXXXXX", path[64], mdpath[80];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ns", dir);
	snprintf(mdpath, sizeof(mdpath), "%s.md", path);
	const struct pif f = {512, 8, 2, false, false, false};
	struct wc w;
	pi_open(&w, &f, SIM_BACKING_FILE, path);
	uint8_t *buf = pg(&w.h, 4 * 512);
	for (unsigned i = 0; i < 4; i++)
		fill(buf + i * 512, 512, 8 + i, 1);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_WRITE, 8, 4, buf, 512, NULL, NVME_RW_PRACT, 8, 0), 0);
	wc_flush(&w, 1);
	host_fini(&w.h);
	struct stat sb;
	ck_assert_int_eq(stat(mdpath, &sb), 0);
	ck_assert_int_eq(sb.st_size, 256 * 8);
	/* again, on the same files */
	pi_open(&w, &f, SIM_BACKING_FILE, path);
	buf = pg(&w.h, 4 * 512);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 8, 4, buf, 512, NULL, PRACT_CHK, 8, 0), 0);
	ck_assert(is(buf + 3 * 512, 512, 11, 1));
	/* the data file changed underneath */
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t b = 0;
	ck_assert_int_eq(pread(fd, &b, 1, 9 * 512 + 7), 1);
	b ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &b, 1, 9 * 512 + 7), 1);
	close(fd);
	ck_assert_int_eq(pi_cmd(&w, NVME_CMD_READ, 8, 4, buf, 512, NULL, PRACT_CHK, 8, 0), MEDIA(NVME_SC_GUARD_CHECK));
	host_fini(&w.h);
	unlink(mdpath);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* What sim_create refuses: PI larger than the metadata, metadata on the
 * null backing, more metadata than the sim holds. */
START_TEST(t_pi_refused)
{
	struct sim *s;
	struct sim_opts o = opts(4096, SIM_BACKING_RAM, false);
	o.ns[0].ms = 8;
	o.ns[0].pi_type = 1;
	o.ns[0].pi_g64 = true;
	ck_assert_int_eq(sim_create(&o, &s), -EINVAL);
	o.ns[0].pi_g64 = false;
	o.ns[0].pi_type = 4;
	ck_assert_int_eq(sim_create(&o, &s), -EINVAL);
	o.ns[0].pi_type = 1;
	o.ns[0].backing = SIM_BACKING_NULL;
	ck_assert_int_eq(sim_create(&o, &s), -EINVAL);
	o.ns[0].backing = SIM_BACKING_RAM;
	o.ns[0].ms = SIM_MS_MAX + 8;
	ck_assert_int_eq(sim_create(&o, &s), -EINVAL);
	o.ns[0].ms = 8;
	ck_assert_int_eq(sim_create(&o, &s), 0);
	sim_destroy(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim");
	TCase *tc = tcase_create("sim");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_registers);
	tcase_add_test(tc, t_identify_queues);
	tcase_add_test(tc, t_async_events);
	tcase_add_loop_test(tc, t_rw_roundtrip, 0, sizeof(rw_cases) / sizeof(rw_cases[0]));
	tcase_add_test(tc, t_errors);
	tcase_add_test(tc, t_null_and_file);
	tcase_add_test(tc, t_ram_hugepages);
	tcase_add_test(tc, t_faults);
	tcase_add_loop_test(tc, t_hang_loop, 0, 2);
	tcase_add_loop_test(tc, t_phase_wrap, 0, 2);
	tcase_add_test(tc, t_bad_doorbell);
	tcase_add_loop_test(tc, t_wc_lost_and_flushed, 0, 8);
	tcase_add_loop_test(tc, t_wc_fua, 0, 2);
	tcase_add_loop_test(tc, t_wc_shutdown, 0, 2);
	tcase_add_test(tc, t_wc_zeroes_dsm);
	tcase_add_test(tc, t_wc_destage);
	tcase_add_test(tc, t_wc_seeded);
	tcase_add_test(tc, t_wc_file);
	tcase_add_loop_test(tc, t_wc_random, 0, 5);
	tcase_add_test(tc, t_wc_feature);
	tcase_add_loop_test(tc, t_powerfail_drops, 0, 2);
	tcase_add_test(tc, t_clear_and_cfs);
	tcase_add_test(tc, t_queues_parallel);
	tcase_add_loop_test(tc, t_queues_parallel_stress, 0, 2);
	tcase_add_loop_test(tc, t_queues_atomic, 0, 2);
	tcase_add_test(tc, t_offload);
	tcase_add_test(tc, t_offload_back);
	tcase_add_test(tc, t_pi_crc);
	tcase_add_loop_test(tc, t_pi_formats, 0, sizeof(pi_formats) / sizeof(pi_formats[0]));
	tcase_add_loop_test(tc, t_pi_errors, 0, 3);
	tcase_add_loop_test(tc, t_pi_misdirect, 0, 3);
	tcase_add_loop_test(tc, t_pi_zeroes_powerfail, 0, 2);
	tcase_add_test(tc, t_pi_file);
	tcase_add_test(tc, t_pi_refused);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

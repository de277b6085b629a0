/* test_sim.c - the software controller driven through its bus, with a tiny
 * hand-rolled host (admin queue, one I/O queue pair) in this file. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvme_spec.h"
#include "sim.h"

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

static uint32_t dstrd(struct host *h) { return NVME_CAP_DSTRD(nvme_bus_read64(h->b, NVME_REG_CAP)); }

static void submit(struct host *h, struct q *q, struct nvme_sqe *c)
{
	c->cid = ++h->cid;
	q->sq[q->tail] = *c;
	q->tail = (uint16_t)((q->tail + 1) % q->size);
	nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_sq_tdbl_off(q->qid, dstrd(h))), q->tail);
}

/* next CQE or -1 status after ~2 s */
static int reap(struct host *h, struct q *q, struct nvme_cqe *out)
{
	for (int i = 0; i < 200000; i++) {
		volatile struct nvme_cqe *e = &q->cq[q->head];
		uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
		if (NVME_CQE_PHASE(st) == q->phase) {
			*out = *(struct nvme_cqe *)e;
			if (++q->head == q->size) {
				q->head = 0;
				q->phase ^= 1;
			}
			nvme_bus_doorbell(h->b, (volatile uint32_t *)(h->b->bar0 + nvme_cq_hdbl_off(q->qid, dstrd(h))),
					  q->head);
			return 0;
		}
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
	ck_assert_uint_eq(id->nn, 1);
	ck_assert_uint_eq(id->oncs & (NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES), NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES);
	ck_assert_uint_eq(id->vwc & 1, 1);
	struct nvme_id_ns *ns = pg(&h, 4096);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 1, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), 0);
	ck_assert_uint_eq(ns->nsze, (64u << 20) / 4096);
	ck_assert_uint_eq(ns->lbaf[ns->flbas & 0xf].lbads, 12);
	ck_assert_uint_eq(ns->dlfeat & 7, 1);
	ck_assert_int_eq(adm(&h, NVME_ADM_IDENTIFY, 2, io(&h, ns), NVME_ID_CNS_NS, 0, NULL), NVME_SC_INVALID_NS);
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
	char path[] = "/tmp/test_sim.XXXXXX";
	int fd = mkstemp(path);
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

int main(void)
{
	Suite *s = suite_create("sim");
	TCase *tc = tcase_create("sim");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_registers);
	tcase_add_test(tc, t_identify_queues);
	tcase_add_loop_test(tc, t_rw_roundtrip, 0, sizeof(rw_cases) / sizeof(rw_cases[0]));
	tcase_add_test(tc, t_errors);
	tcase_add_test(tc, t_null_and_file);
	tcase_add_test(tc, t_faults);
	tcase_add_loop_test(tc, t_phase_wrap, 0, 2);
	tcase_add_test(tc, t_bad_doorbell);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

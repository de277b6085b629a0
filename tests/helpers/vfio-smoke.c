/* vfio-smoke - drive an NVMe controller through vfio_bus_open() alone.
 *
 *   vfio-smoke [-o] [-b LBA] [-n NSID] BDF
 *
 * Proves the VFIO bus on its own, without the engine: it uses only bus.h,
 * nvme_spec.h and vfio_bus_open().  Steps: CAP/VS, disable, admin queue,
 * enable, Identify controller and namespace, one I/O queue pair on MSI-X
 * vector 1, write blocks with a pattern (PRP1+PRP2 and a PRP list) and read
 * them back, wait for an interrupt on the vector's eventfd, delete the
 * queues, shut down, function reset.  Exit 0 only when every step checked out.
 * -o: open the bus and close it again (for the error-path tests).
 * -b LBA: first block written (default 64).
 * -n NSID: the namespace to write (default: the first active one).
 */
#include "bus.h"
#include "nvme_spec.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define QDEPTH 64u
#define XFER_PAGES 4u /* 16 KiB: needs a PRP list */

static int failures;

#define FAIL(...)                                      \
	do {                                           \
		fprintf(stderr, "vfio-smoke: FAIL: "); \
		fprintf(stderr, __VA_ARGS__);          \
		fputc('\n', stderr);                   \
		failures++;                            \
	} while (0)

struct dma {
	uint8_t *va;
	uint64_t iova;
	size_t len;
};

struct queue {
	uint16_t qid, tail, head, phase, cid;
	struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	uint64_t sq_iova, cq_iova;
	volatile uint32_t *sq_db, *cq_db;
};

static struct nvme_bus *bus;
static uint32_t dstrd;
static uint64_t cap;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dma_get(struct dma *d, size_t len)
{
	int ret;

	d->len = len;
	d->va = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d->va == MAP_FAILED) {
		d->va = NULL;
		return -errno;
	}
	ret = bus->ops->dma_map(bus, d->va, len, &d->iova);
	if (ret < 0) {
		munmap(d->va, len);
		d->va = NULL;
		return ret;
	}
	if (d->iova == (uintptr_t)d->va)
		FAIL("IOVA 0x%" PRIx64 " equals the virtual address", d->iova);
	return 0;
}

static void dma_put(struct dma *d)
{
	int ret;

	if (!d->va)
		return;
	ret = bus->ops->dma_unmap(bus, d->va, d->len, d->iova);
	if (ret < 0)
		FAIL("dma_unmap: %s", strerror(-ret));
	munmap(d->va, d->len);
	d->va = NULL;
}

static void queue_init(struct queue *q, uint16_t qid, struct dma *sq, struct dma *cq)
{
	memset(q, 0, sizeof(*q));
	q->qid = qid;
	q->phase = 1;
	q->sq = (struct nvme_sqe *)sq->va;
	q->cq = (volatile struct nvme_cqe *)cq->va;
	q->sq_iova = sq->iova;
	q->cq_iova = cq->iova;
	q->sq_db = (volatile uint32_t *)(bus->bar0 + nvme_sq_tdbl_off(qid, dstrd));
	q->cq_db = (volatile uint32_t *)(bus->bar0 + nvme_cq_hdbl_off(qid, dstrd));
	memset(sq->va, 0, sq->len);
	memset(cq->va, 0, cq->len);
}

static uint16_t submit(struct queue *q, struct nvme_sqe *cmd)
{
	cmd->cid = ++q->cid;
	q->sq[q->tail] = *cmd;
	q->tail = (uint16_t)((q->tail + 1) % QDEPTH);
	nvme_bus_doorbell(bus, q->sq_db, q->tail);
	return cmd->cid;
}

/* The next CQE if there is one: 1 and *st = status, 0 when none yet. */
static int reap(struct queue *q, uint16_t cid, uint16_t *st)
{
	volatile struct nvme_cqe *e = &q->cq[q->head];
	uint16_t raw = e->status;

	if (NVME_CQE_PHASE(raw) != q->phase)
		return 0;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (e->cid != cid || e->sq_id != q->qid)
		FAIL("queue %u: CQE for cid %u sq %u, expected cid %u", q->qid, e->cid, e->sq_id, cid);
	*st = NVME_CQE_STATUS(raw);
	if (++q->head == QDEPTH) {
		q->head = 0;
		q->phase ^= 1;
	}
	nvme_bus_doorbell(bus, q->cq_db, q->head);
	return 1;
}

/* Poll for the completion of cid (5 s); returns the status or -ETIMEDOUT. */
static int wait_cqe(struct queue *q, uint16_t cid, const char *what)
{
	double t0 = now();
	uint16_t st;

	while (!reap(q, cid, &st)) {
		uint32_t csts = nvme_bus_read32(bus, NVME_REG_CSTS);

		if (csts == 0xffffffffu) {
			FAIL("%s: device gone (CSTS reads all ones)", what);
			return -ENODEV;
		}
		if (csts & NVME_CSTS_CFS) {
			FAIL("%s: controller fatal status", what);
			return -EIO;
		}
		if (now() - t0 > 5) {
			FAIL("%s: no completion within 5 s", what);
			return -ETIMEDOUT;
		}
		usleep(50);
	}
	if (st)
		FAIL("%s: status 0x%x (sct %u sc 0x%x)", what, st, NVME_STATUS_SCT(st), NVME_STATUS_SC(st));
	return st;
}

static int run(struct queue *q, struct nvme_sqe *cmd, const char *what)
{
	return wait_cqe(q, submit(q, cmd), what);
}

static int wait_ready(bool rdy)
{
	double t0 = now(), to = NVME_CAP_TO(cap) * 0.5 + 0.5;

	for (;;) {
		uint32_t csts = nvme_bus_read32(bus, NVME_REG_CSTS);

		if (csts == 0xffffffffu) {
			FAIL("device gone (CSTS reads all ones)");
			return -ENODEV;
		}
		if (!!(csts & NVME_CSTS_RDY) == rdy)
			return 0;
		if (rdy && (csts & NVME_CSTS_CFS)) {
			FAIL("controller fatal status while enabling");
			return -EIO;
		}
		if (now() - t0 > to) {
			FAIL("CSTS.RDY did not become %d within CAP.TO (%.1f s)", rdy, to);
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
}

static void trimmed(char *out, const char *in, size_t n)
{
	memcpy(out, in, n);
	out[n] = '\0';
	while (n && (out[n - 1] == ' ' || out[n - 1] == '\0'))
		out[--n] = '\0';
}

static uint32_t pattern(uint64_t lba, uint32_t word, uint32_t seed)
{
	return (uint32_t)(lba * 0x9e3779b1u) ^ (word * 0x85ebca6bu) ^ seed;
}

static void rw_cmd(struct nvme_sqe *c, uint8_t opc, uint32_t nsid, uint64_t lba, uint32_t nblocks,
		   const struct dma *data, const struct dma *prpl)
{
	memset(c, 0, sizeof(*c));
	c->opc = opc;
	c->nsid = nsid;
	c->prp1 = data->iova;
	if (data->len > 2 * PAGE) {
		uint64_t *list = (uint64_t *)prpl->va;

		for (size_t i = 1; i < data->len / PAGE; i++)
			list[i - 1] = data->iova + i * PAGE;
		c->prp2 = prpl->iova;
	} else if (data->len > PAGE) {
		c->prp2 = data->iova + PAGE;
	}
	c->cdw10 = (uint32_t)lba;
	c->cdw11 = (uint32_t)(lba >> 32);
	c->cdw12 = nblocks - 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: vfio-smoke [-o] [-b LBA] [-n NSID] BDF\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct dma asq = {0}, acq = {0}, idb = {0}, iosq = {0}, iocq = {0}, wbuf = {0}, rbuf = {0},
		   prpl = {0}, bogus = {0};
	struct queue aq, ioq;
	struct nvme_sqe c;
	char model[41], serial[21];
	int efd[2] = {-1, -1}, opt, ret;
	bool open_only = false, ioq_cq = false, ioq_sq = false;
	uint64_t lba0 = 64;
	uint32_t nsid = 0, want_nsid = 0, lba_size = 0, nblocks, seed;
	double t_start = now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "ob:n:")) != -1) {
		if (opt == 'o')
			open_only = true;
		else if (opt == 'b')
			lba0 = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			want_nsid = (uint32_t)strtoul(optarg, NULL, 0);
		else
			return usage();
	}
	if (optind + 1 != argc)
		return usage();

	ret = vfio_bus_open(argv[optind], &bus);
	if (ret < 0) {
		fprintf(stderr, "vfio-smoke: vfio_bus_open %s: %s\n", argv[optind], strerror(-ret));
		return 1;
	}
	printf("bus %s: BAR0 %zu bytes, %u MSI-X vectors, NUMA node %d, db_notify %s\n", bus->name,
	       bus->bar0_len, bus->nr_vectors, bus->numa_node, bus->db_notify ? "set" : "none");
	if (bus->db_notify)
		FAIL("db_notify must be NULL on VFIO");
	cap = nvme_bus_read64(bus, NVME_REG_CAP);
	dstrd = NVME_CAP_DSTRD(cap);
	uint32_t vs = nvme_bus_read32(bus, NVME_REG_VS);

	printf("CAP 0x%016" PRIx64 " (MQES %u, TO %u, DSTRD %u, CSS 0x%x, MPSMIN %u)\n", cap,
	       NVME_CAP_MQES(cap) + 1, NVME_CAP_TO(cap), dstrd, NVME_CAP_CSS(cap), NVME_CAP_MPSMIN(cap));
	printf("VS 0x%08x (NVMe %u.%u.%u)\n", vs, vs >> 16, (vs >> 8) & 0xff, vs & 0xff);
	if (cap == ~0ull || vs == ~0u || vs < NVME_VS(1, 0, 0)) {
		FAIL("registers read as garbage (CAP 0x%" PRIx64 ", VS 0x%x)", cap, vs);
		goto out;
	}
	if (open_only) {
		printf("vfio-smoke: opened and closed %s\n", bus->name);
		goto out;
	}
	if (!(NVME_CAP_CSS(cap) & NVME_CAP_CSS_NVM) || NVME_CAP_MPSMIN(cap) != 0 ||
	    NVME_CAP_MQES(cap) + 1 < QDEPTH) {
		FAIL("controller does not take 4 KiB pages, the NVM command set or %u entries", QDEPTH);
		goto out;
	}
	if (bus->nr_vectors < 2) {
		FAIL("need 2 MSI-X vectors, the device has %u", bus->nr_vectors);
		goto out;
	}

	/* the DMA memory: rings, identify buffer, data buffers, a PRP list */
	if ((ret = dma_get(&asq, PAGE)) || (ret = dma_get(&acq, PAGE)) || (ret = dma_get(&idb, PAGE)) ||
	    (ret = dma_get(&iosq, PAGE)) || (ret = dma_get(&iocq, PAGE)) ||
	    (ret = dma_get(&wbuf, XFER_PAGES * PAGE)) || (ret = dma_get(&rbuf, XFER_PAGES * PAGE)) ||
	    (ret = dma_get(&prpl, PAGE))) {
		FAIL("DMA buffers: %s", strerror(-ret));
		goto out;
	}
	/* the bus must refuse an unmap that does not match a mapping */
	printf("expecting a refusal: dma_unmap of a range never mapped\n");
	bogus = wbuf;
	bogus.iova += PAGE;
	if (bus->ops->dma_unmap(bus, bogus.va, bogus.len, bogus.iova) == 0)
		FAIL("dma_unmap of a range never mapped succeeded");

	/* bring-up by hand: disable, admin queue, enable */
	double t_en = now();

	nvme_bus_write32(bus, NVME_REG_CC, 0);
	if (wait_ready(false) < 0)
		goto out;
	queue_init(&aq, 0, &asq, &acq);
	nvme_bus_write32(bus, NVME_REG_AQA, (QDEPTH - 1) << 16 | (QDEPTH - 1));
	nvme_bus_write64(bus, NVME_REG_ASQ, asq.iova);
	nvme_bus_write64(bus, NVME_REG_ACQ, acq.iova);
	if (nvme_bus_read64(bus, NVME_REG_ASQ) != asq.iova)
		FAIL("ASQ reads back 0x%" PRIx64 ", wrote 0x%" PRIx64, nvme_bus_read64(bus, NVME_REG_ASQ),
		     asq.iova);
	nvme_bus_write32(bus, NVME_REG_CC,
			 NVME_CC_EN | NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT |
				 NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
	if (wait_ready(true) < 0)
		goto out;
	printf("controller enabled in %.3f s (ASQ iova 0x%" PRIx64 ", ACQ iova 0x%" PRIx64 ")\n",
	       now() - t_en, asq.iova, acq.iova);

	/* Identify controller */
	struct nvme_id_ctrl *idc = (struct nvme_id_ctrl *)idb.va;

	memset(&c, 0, sizeof(c));
	c.opc = NVME_ADM_IDENTIFY;
	c.prp1 = idb.iova;
	c.cdw10 = NVME_ID_CNS_CTRL;
	if (run(&aq, &c, "identify controller"))
		goto out;
	trimmed(model, idc->mn, sizeof(idc->mn));
	trimmed(serial, idc->sn, sizeof(idc->sn));
	printf("identify: model \"%s\" serial \"%s\" VID 0x%04x MDTS %u NN %u\n", model, serial, idc->vid,
	       idc->mdts, idc->nn);
	if (!model[0] || idc->nn == 0)
		FAIL("identify controller returned an empty model or NN 0");
	if (idc->mdts && (PAGE << idc->mdts) < XFER_PAGES * PAGE) {
		FAIL("MDTS %u is below the %u KiB this test transfers", idc->mdts, XFER_PAGES * 4);
		goto out;
	}

	/* first active namespace and its block size */
	memset(&c, 0, sizeof(c));
	c.opc = NVME_ADM_IDENTIFY;
	c.prp1 = idb.iova;
	c.cdw10 = NVME_ID_CNS_NS_ACTIVE_LIST;
	if (run(&aq, &c, "active namespace list"))
		goto out;
	for (unsigned i = 0; i < PAGE / 4 && ((uint32_t *)idb.va)[i]; i++) {
		uint32_t id = ((uint32_t *)idb.va)[i];

		if (!want_nsid || id == want_nsid) {
			nsid = id;
			break;
		}
	}
	if (!nsid) {
		FAIL("namespace %u is not active", want_nsid);
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.opc = NVME_ADM_IDENTIFY;
	c.nsid = nsid;
	c.prp1 = idb.iova;
	c.cdw10 = NVME_ID_CNS_NS;
	if (run(&aq, &c, "identify namespace"))
		goto out;
	const struct nvme_id_ns *idn = (const struct nvme_id_ns *)idb.va;
	uint8_t lbads = idn->lbaf[idn->flbas & 0xf].lbads;

	if (lbads < 9 || lbads > 12) {
		FAIL("namespace %u: LBA data size 2^%u not handled", nsid, lbads);
		goto out;
	}
	lba_size = 1u << lbads;
	nblocks = XFER_PAGES * PAGE / lba_size;
	printf("namespace %u: %" PRIu64 " blocks of %u bytes\n", nsid, idn->nsze, lba_size);
	if (lba0 + 2 * nblocks > idn->nsze) {
		FAIL("namespace too small for the test blocks at %" PRIu64, lba0);
		goto out;
	}

	/* MSI-X: vector 0 (admin) and 1 (the I/O queue) into eventfds */
	for (int i = 0; i < 2; i++) {
		efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd[i] < 0) {
			FAIL("eventfd: %s", strerror(errno));
			goto out;
		}
	}
	printf("expecting a refusal: more MSI-X vectors than the device has\n");
	if (bus->ops->irq_set(bus, bus->nr_vectors + 1, efd) != -EINVAL)
		FAIL("irq_set with more vectors than the device has was not refused");
	ret = bus->ops->irq_set(bus, 2, efd);
	if (ret < 0) {
		FAIL("irq_set 2 vectors: %s", strerror(-ret));
		goto out;
	}

	/* one I/O queue pair on vector 1 */
	queue_init(&ioq, 1, &iosq, &iocq);
	memset(&c, 0, sizeof(c));
	c.opc = NVME_ADM_CREATE_CQ;
	c.prp1 = iocq.iova;
	c.cdw10 = (QDEPTH - 1) << 16 | 1;
	c.cdw11 = 1u << 16 | NVME_CQ_IEN | NVME_QUEUE_PC;
	if (run(&aq, &c, "create I/O CQ"))
		goto out;
	ioq_cq = true;
	memset(&c, 0, sizeof(c));
	c.opc = NVME_ADM_CREATE_SQ;
	c.prp1 = iosq.iova;
	c.cdw10 = (QDEPTH - 1) << 16 | 1;
	c.cdw11 = 1u << 16 | NVME_QUEUE_PC;
	if (run(&aq, &c, "create I/O SQ"))
		goto out;
	ioq_sq = true;
	printf("I/O queue pair 1 created (depth %u, MSI-X vector 1)\n", QDEPTH);

	/* write two extents with a fresh pattern, read them back */
	seed = (uint32_t)(now() * 1e6) | 1;
	for (uint64_t ext = 0; ext < 2; ext++) {
		uint64_t lba = lba0 + ext * nblocks;
		uint32_t *w = (uint32_t *)wbuf.va, *r = (uint32_t *)rbuf.va;
		size_t words = wbuf.len / 4, bad = 0;

		for (size_t i = 0; i < words; i++)
			w[i] = pattern(lba + i * 4 / lba_size, (uint32_t)i, seed);
		rw_cmd(&c, NVME_CMD_WRITE, nsid, lba, nblocks, &wbuf, &prpl);
		if (run(&ioq, &c, "write"))
			goto out;
		memset(rbuf.va, 0xa5, rbuf.len);
		rw_cmd(&c, NVME_CMD_READ, nsid, lba, nblocks, &rbuf, &prpl);
		if (run(&ioq, &c, "read"))
			goto out;
		for (size_t i = 0; i < words; i++)
			bad += r[i] != w[i];
		if (bad)
			FAIL("LBA %" PRIu64 "+%u: %zu of %zu words differ after read-back", lba, nblocks, bad,
			     words);
		else
			printf("write+read LBA %" PRIu64 "+%u (%u KiB, PRP list): data OK\n", lba, nblocks,
			       XFER_PAGES * 4);
	}
	/* two pages: PRP1 + PRP2 without a list */
	{
		struct dma two = rbuf;

		two.len = 2 * PAGE;
		memset(rbuf.va, 0, rbuf.len);
		rw_cmd(&c, NVME_CMD_READ, nsid, lba0, 2 * PAGE / lba_size, &two, &prpl);
		if (run(&ioq, &c, "read (PRP1+PRP2)"))
			goto out;
		size_t bad = 0;

		for (size_t i = 0; i < 2 * PAGE / 4; i++)
			bad += ((uint32_t *)rbuf.va)[i] != pattern(lba0 + i * 4 / lba_size, (uint32_t)i, seed);
		if (bad)
			FAIL("PRP1+PRP2 read: %zu words differ", bad);
		else
			printf("read LBA %" PRIu64 " (8 KiB, PRP1+PRP2): data OK\n", lba0);
	}

	/* wait for the interrupt: drain the eventfd, submit, sleep on it */
	{
		uint64_t cnt = 0;
		struct pollfd p = {.fd = efd[1], .events = POLLIN};
		uint16_t cid, st;
		double t0;

		if (read(efd[1], &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			FAIL("eventfd read: %s", strerror(errno));
		rw_cmd(&c, NVME_CMD_READ, nsid, lba0, 1, &rbuf, &prpl);
		cid = submit(&ioq, &c);
		t0 = now();
		/* An interrupt says "look at the CQ", not "one CQE": the vector of
		 * the command before (polled above) may fire after the drain.  Wait
		 * on the eventfd until this command's CQE is there, 5 s at most. */
		bool got = false, irq = false;
		unsigned early = 0;
		while (!got && now() - t0 < 5.0) {
			ret = poll(&p, 1, 5000 - (int)((now() - t0) * 1e3));
			if (ret != 1)
				break;
			cnt = 0;
			if (read(efd[1], &cnt, sizeof(cnt)) != sizeof(cnt) || cnt == 0)
				continue;
			irq = true;
			got = reap(&ioq, cid, &st);
			if (!got)
				early++;
		}
		if (got) {
			printf("MSI-X vector 1: interrupt on the eventfd after %.1f ms", (now() - t0) * 1e3);
			printf(early ? " (%u earlier one(s) for the command before)\n" : "\n", early);
			if (st)
				FAIL("read after interrupt: status 0x%x", st);
		} else {
			FAIL(irq ? "interrupts arrived but no CQE for the command within 5 s"
				 : "no interrupt on vector 1 within 5 s (poll %d)", ret);
			wait_cqe(&ioq, cid, "read (interrupt test)");
		}
	}

out:
	/* tear down in reverse; each step may be reached from a failure above */
	if (ioq_sq) {
		memset(&c, 0, sizeof(c));
		c.opc = NVME_ADM_DELETE_SQ;
		c.cdw10 = 1;
		run(&aq, &c, "delete I/O SQ");
	}
	if (ioq_cq) {
		memset(&c, 0, sizeof(c));
		c.opc = NVME_ADM_DELETE_CQ;
		c.cdw10 = 1;
		run(&aq, &c, "delete I/O CQ");
	}
	if (ioq_sq && ioq_cq && !failures)
		printf("I/O queue pair 1 deleted\n");
	if (efd[0] >= 0 && (ret = bus->ops->irq_set(bus, 0, NULL)) < 0)
		FAIL("irq_set 0 (disable): %s", strerror(-ret));
	if (bus && asq.va) {
		/* orderly shutdown, then disable */
		double t0 = now();
		uint32_t cc = nvme_bus_read32(bus, NVME_REG_CC);

		nvme_bus_write32(bus, NVME_REG_CC, (cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL);
		while ((nvme_bus_read32(bus, NVME_REG_CSTS) & NVME_CSTS_SHST_MASK) != NVME_CSTS_SHST_CMPLT) {
			if (now() - t0 > 5) {
				FAIL("shutdown did not complete within 5 s");
				break;
			}
			usleep(1000);
		}
		nvme_bus_write32(bus, NVME_REG_CC, 0);
		if (wait_ready(false) == 0 && !failures)
			printf("controller shut down and disabled\n");
	}
	if (bus && !open_only && !failures) {
		/* a function reset must leave the controller disabled and CC clear */
		ret = bus->ops->reset(bus);
		if (ret == -ENOTSUP) {
			printf("function reset: not offered by this device\n");
		} else if (ret < 0) {
			FAIL("reset: %s", strerror(-ret));
		} else {
			uint32_t cc = nvme_bus_read32(bus, NVME_REG_CC);

			if (cc != 0 || nvme_bus_read64(bus, NVME_REG_CAP) != cap)
				FAIL("after function reset CC 0x%x, CAP changed", cc);
			else
				printf("function reset: CC 0, CAP unchanged\n");
		}
	}
	dma_put(&prpl);
	dma_put(&rbuf);
	dma_put(&wbuf);
	dma_put(&iocq);
	dma_put(&iosq);
	dma_put(&idb);
	dma_put(&acq);
	dma_put(&asq);
	for (int i = 0; i < 2; i++)
		if (efd[i] >= 0)
			close(efd[i]);
	if (bus)
		bus->ops->close(bus);
	printf("vfio-smoke: %s in %.2f s\n", failures ? "FAIL" : "PASS", now() - t_start);
	return failures ? 1 : 0;
}

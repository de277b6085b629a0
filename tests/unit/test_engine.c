/* test_engine.c - controller bring-up and its failures, Number of Queues,
 * the admin queue, the DMA buddy pool and the statistics helpers. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "dma.h"
#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

static struct sim_opts sim_defaults(bool threaded)
{
	struct sim_opts so = {.name = "te", .nr_ns = 2, .threaded = threaded};
	so.ns[0] =
	    (struct sim_ns_opts){.nlba = 1u << 16, .lba_size = 512, .backing = SIM_BACKING_RAM};
	so.ns[1] =
	    (struct sim_ns_opts){.nlba = 1u << 12, .lba_size = 4096, .backing = SIM_BACKING_NULL};
	return so;
}

/* ---- DMA pool ---- */
START_TEST(t_pool_buddy)
{
	struct nvme_buf_pool *p;
	ck_assert_int_eq(nvme_pool_create(1u << 20, -1, &p), 0);
	ck_assert_uint_eq(p->free_pages, 256);
	void *a = nvme_pool_alloc(p, 4096), *b = nvme_pool_alloc(p, 5000),
	     *c = nvme_pool_alloc(p, 65536);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq((uintptr_t)a % 4096, 0);
	ck_assert_uint_eq((size_t)((uint8_t *)b - p->base) % 8192,
	                  0); /* 2 pages, aligned in the pool */
	ck_assert_uint_eq((size_t)((uint8_t *)c - p->base) % 65536, 0);
	ck_assert_uint_eq(p->free_pages, 256 - 1 - 2 - 16);
	/* what each took, as the block size says (the scheduler's accounting) */
	ck_assert_uint_eq(nvme_pool_block_size(4096) + nvme_pool_block_size(5000) +
	                      nvme_pool_block_size(65536),
	                  (1 + 2 + 16) * 4096);
	ck_assert_uint_eq(nvme_pool_block_size(0), 4096);
	ck_assert_uint_eq(nvme_reactor_buf_size(65537), 128u << 10);
	ck_assert(nvme_pool_contains(p, c, 65536));
	ck_assert(!nvme_pool_contains(p, (uint8_t *)p->base + (1u << 20) - 4096, 8192));
	ck_assert_uint_eq(nvme_pool_iova(p, 0x100000000ull, c),
	                  0x100000000ull + ((uint8_t *)c - p->base));
	memset(c, 0xab, 65536);                           /* writable, pinned */
	ck_assert_ptr_null(nvme_pool_alloc(p, 2u << 20)); /* bigger than the pool */
	nvme_pool_free(p, b, 5000);
	nvme_pool_free(p, a, 4096);
	nvme_pool_free(p, a, 4096); /* double free: refused, counts unchanged */
	nvme_pool_free(p, c, 65536);
	ck_assert_uint_eq(p->free_pages, 256);
	/* everything coalesced back: the whole pool in one block again */
	void *all = nvme_pool_alloc(p, 1u << 20);
	ck_assert_ptr_eq(all, p->base);
	ck_assert_ptr_null(nvme_pool_alloc(p, 4096));
	nvme_pool_free(p, all, 1u << 20);
	/* exhaust in 4 KiB pieces, then free all */
	void *v[256];
	for (int i = 0; i < 256; i++)
		ck_assert_ptr_nonnull(v[i] = nvme_pool_alloc(p, 4096));
	ck_assert_ptr_null(nvme_pool_alloc(p, 4096));
	for (int i = 255; i >= 0; i--)
		nvme_pool_free(p, v[i], 4096);
	ck_assert_ptr_eq(nvme_pool_alloc(p, 1u << 20), p->base);
	nvme_pool_destroy(p);
}
END_TEST

START_TEST(t_dma_region_node)
{
	struct nvme_dma_region r;
	ck_assert_int_eq(nvme_dma_alloc(12345, 0, &r), 0);
	ck_assert_uint_eq(r.len % 4096, 0);
	ck_assert_uint_ge(r.len, 12345);
	ck_assert_ptr_nonnull(r.vaddr);
	ck_assert_uint_eq(((uint8_t *)r.vaddr)[100], 0);
	nvme_dma_free(&r);
	ck_assert_ptr_null(r.vaddr);
	ck_assert_int_eq(nvme_dma_alloc(0, -1, &r), -EINVAL);
}
END_TEST

/* ---- statistics helpers ---- */
START_TEST(t_lat_hist)
{
	/* every value lands in a bucket whose bound covers it, buckets monotonic */
	uint64_t vals[] = {0,   1,    7,    8,    9,         15,         16,
	                   100, 1000, 4095, 4096, 123456789, 1ull << 40, UINT64_MAX};
	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		unsigned b = nvme_lat_bucket(vals[i]);
		ck_assert_uint_lt(b, NVME_LAT_BUCKETS);
		ck_assert_uint_ge(nvme_lat_bucket_ns(b), vals[i]);
		if (b > 0)
			ck_assert_uint_lt(nvme_lat_bucket_ns(b - 1), vals[i]);
	}
	for (unsigned b = 1; b < 496; b++)
		ck_assert_uint_gt(nvme_lat_bucket_ns(b), nvme_lat_bucket_ns(b - 1));
	/* relative error of the log-linear scheme is at most 1/8 */
	ck_assert_uint_le(nvme_lat_bucket_ns(nvme_lat_bucket(1000000)), 1125000);
	uint64_t hist[NVME_LAT_BUCKETS] = {0};
	ck_assert_uint_eq(nvme_lat_percentile(hist, 50), 0);
	for (int i = 0; i < 90; i++)
		hist[nvme_lat_bucket(1000)]++;
	for (int i = 0; i < 10; i++)
		hist[nvme_lat_bucket(1000000)]++;
	uint64_t p50 = nvme_lat_percentile(hist, 50), p99 = nvme_lat_percentile(hist, 99);
	ck_assert_uint_ge(p50, 1000);
	ck_assert_uint_le(p50, 1125);
	ck_assert_uint_ge(p99, 1000000);
	ck_assert_uint_le(p99, 1125000);
	ck_assert_uint_eq(nvme_lat_percentile(hist, 90), p50);
}
END_TEST

START_TEST(t_status_map)
{
	ck_assert_int_eq(nvme_status_errno(0), 0);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_TIMEOUT), -ETIMEDOUT);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(0, NVME_SC_INVALID_OPCODE)), -EINVAL);
	ck_assert_int_eq(
	    nvme_status_errno(NVME_STATUS_MAKE(0, NVME_SC_INVALID_NS) | NVME_STATUS_DNR), -EINVAL);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(0, NVME_SC_CAP_EXCEEDED)), -ENOSPC);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(0, NVME_SC_DATA_XFER_ERROR)), -EIO);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(0, NVME_SC_ABORT_QUEUE)), -ECANCELED);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(2, NVME_SC_WRITE_FAULT)), -EIO);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(2, NVME_SC_ACCESS_DENIED)), -EACCES);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(3, 0x00)), -EIO);
	ck_assert_int_eq(nvme_status_errno(NVME_STATUS_MAKE(7, 0x12)), -EIO);
	ck_assert_int_eq(nvme_status_class(NVME_STATUS_MAKE(2, 0x81)), NVME_ERRC_MEDIA);
	ck_assert_int_eq(nvme_status_class(NVME_STATUS_MAKE(7, 0x81)), NVME_ERRC_OTHER);
	ck_assert_int_eq(nvme_status_class(NVME_STATUS_TIMEOUT), NVME_ERRC_TIMEOUT);
	ck_assert_str_eq(nvme_status_str(NVME_STATUS_MAKE(0, NVME_SC_LBA_RANGE)),
	                 "LBA out of range");
	ck_assert_str_eq(nvme_status_str(NVME_STATUS_MAKE(2, NVME_SC_READ_ERROR)),
	                 "unrecovered read error");
}
END_TEST

/* ---- bring-up ---- */
START_TEST(t_open_identify)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(_i & 1);
	so.max_queues = 2;
	so.vwc = true;
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {
	    .name = "ctl0", .io_queues = 4, .queue_depth = 100, .cq_budget = 0};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_str_eq(nvme_ctrl_name(c), "ctl0");
	ck_assert_ptr_eq(nvme_ctrl_bus(c), sim_bus(s));
	ck_assert_uint_eq(in->nr_io_queues, 2); /* asked 4, granted min(4, 2) */
	ck_assert_uint_gt(strlen(in->model), 0);
	ck_assert(in->model[strlen(in->model) - 1] != ' ');
	ck_assert(in->serial[0] != ' ' && in->serial[0] != 0);
	ck_assert(in->vwc);
	ck_assert_uint_eq(in->nr_ns, 2);
	ck_assert_uint_eq(in->ns[0].nsid, 1);
	ck_assert_uint_eq(in->ns[0].nlba, 1u << 16);
	ck_assert_uint_eq(in->ns[0].lba_size, 512);
	ck_assert_uint_eq(in->ns[0].lba_shift, 9);
	ck_assert_uint_eq(in->ns[1].lba_size, 4096);
	ck_assert_uint_eq(in->ns[1].nlba, 1u << 12);
	ck_assert(in->ns[0].dealloc_zeroes);
	ck_assert_uint_ge(in->version, NVME_VS(1, 0, 0));
	ck_assert_uint_eq(in->max_entries, NVME_CAP_MQES(in->cap) + 1);
	ck_assert_uint_eq(in->max_xfer, 2u << 20);
	/* a queue id beyond the grant is refused clearly */
	struct nvme_reactor *r;
	struct nvme_reactor_opts ro = {
	    .cpu = -1, .mode = NVME_MODE_POLL, .buf_pool_bytes = 8u << 20};
	ck_assert_int_eq(nvme_reactor_create(&ro, &r), 0);
	struct nvme_qpair *qp;
	ck_assert_int_eq(nvme_qpair_create(c, r, 3, &qp), -EINVAL);
	ck_assert_int_eq(nvme_qpair_create(c, r, 0, &qp), -EINVAL);
	ck_assert_int_eq(nvme_qpair_create(c, r, 2, &qp), 0);
	ck_assert_uint_eq(nvme_qpair_id(qp), 2);
	ck_assert_ptr_eq(nvme_qpair_ctrl(qp), c);
	ck_assert_uint_eq(qp->entries, 64); /* 100 rounded down to a power of two */
	ck_assert_uint_eq(qp->ntrk, 64 - 1 - qp->cq_budget);
	nvme_qpair_destroy(qp);
	nvme_reactor_destroy(r);
	nvme_ctrl_close(c);
}
END_TEST

START_TEST(t_admin_get_features)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(_i & 1);
	so.max_queues = 3;
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 8};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	ck_assert_str_eq(nvme_ctrl_name(c), sim_bus(s)->name);
	struct nvme_sqe cmd = {.opc = NVME_ADM_GET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES};
	struct nvme_cqe cqe;
	ck_assert_int_eq(nvme_ctrl_admin(c, &cmd, NULL, 0, &cqe), 0);
	ck_assert_uint_eq(cqe.status, 0);
	ck_assert_uint_eq((cqe.dw0 & 0xffff) + 1, 3);
	/* an invalid admin opcode maps to -EINVAL */
	struct nvme_sqe bad = {.opc = 0x7f};
	ck_assert_int_eq(nvme_ctrl_admin(c, &bad, NULL, 0, &cqe), -EINVAL);
	ck_assert_uint_eq(NVME_STATUS_SC(cqe.status), NVME_SC_INVALID_OPCODE);
	/* an identify bigger than the bounce page still works (temporary map) */
	uint8_t *big = calloc(1, 128u << 10);
	struct nvme_sqe id = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
	ck_assert_int_eq(nvme_ctrl_admin(c, &id, big, 128u << 10, NULL), 0);
	ck_assert_uint_eq(((struct nvme_id_ctrl *)big)->nn, nvme_ctrl_get_info(c)->nn);
	free(big);
	nvme_ctrl_close(c);
}
END_TEST

/* admin commands from several threads at once are serialised */
struct admin_thr {
	struct nvme_ctrl *c;
	int fails;
};
static void *admin_worker(void *a)
{
	struct admin_thr *t = a;
	struct nvme_id_ctrl id;
	for (int i = 0; i < 200; i++) {
		struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
		if (nvme_ctrl_admin(t->c, &cmd, &id, sizeof(id), NULL) != 0 ||
		    id.nn != nvme_ctrl_get_info(t->c)->nn)
			t->fails++;
	}
	return NULL;
}
START_TEST(t_admin_threads)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(_i & 1);
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	pthread_t th[4];
	struct admin_thr t[4];
	for (int i = 0; i < 4; i++) {
		t[i] = (struct admin_thr){.c = c};
		pthread_create(&th[i], NULL, admin_worker, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].fails, 0);
	}
	ck_assert_uint_eq(c->admin_bogus, 0);
	nvme_ctrl_close(c);
}
END_TEST

START_TEST(t_never_ready)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(false);
	ck_assert_int_eq(sim_create(&so, &s), 0);
	sim_fault_never_ready(s, true);
	struct nvme_ctrl *c = NULL;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	uint64_t t0 = nvme_now_ns();
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), -ETIMEDOUT);
	uint64_t cap = nvme_bus_read64(sim_bus(s), NVME_REG_CAP);
	uint64_t ms = (nvme_now_ns() - t0) / 1000000;
	/* it waited CAP.TO, not forever */
	ck_assert_uint_ge(ms + 50, NVME_CAP_TO(cap) * 500u);
	ck_assert_uint_le(ms, NVME_CAP_TO(cap) * 500u + 2000);
	ck_assert_ptr_null(c);
	sim_destroy(s); /* a failed open does not take the bus */
}
END_TEST

struct cfs_thr {
	struct sim *s;
	unsigned delay_ms;
};
static void *cfs_later(void *a)
{
	struct cfs_thr *t = a;
	struct timespec ts = {0, (long)t->delay_ms * 1000000};
	nanosleep(&ts, NULL);
	sim_fault_cfs(t->s);
	return NULL;
}
START_TEST(t_cfs_during_enable)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(false);
	so.ready_delay_ms = 300;
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct cfs_thr t = {s, 50};
	pthread_t th;
	pthread_create(&th, NULL, cfs_later, &t);
	struct nvme_ctrl *c = NULL;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), -EIO);
	pthread_join(th, NULL);
	sim_destroy(s);
}
END_TEST

START_TEST(t_cfs_admin)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(_i & 1);
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	sim_fault_cfs(s);
	uint64_t t0 = nvme_now_ns();
	struct nvme_sqe cmd = {.opc = NVME_ADM_GET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES};
	ck_assert_int_eq(nvme_ctrl_admin(c, &cmd, NULL, 0, NULL), -EIO);
	ck_assert_uint_lt((nvme_now_ns() - t0) / 1000000, NVME_ADMIN_TIMEOUT_MS);
	/* a reset recovers the controller */
	ck_assert_int_eq(nvme_ctrl_reset(c), 0);
	ck_assert_int_eq(nvme_ctrl_admin(c, &cmd, NULL, 0, NULL), 0);
	nvme_ctrl_close(c);
}
END_TEST

/* A bus whose function has gone away: every register reads all ones. */
static uint32_t gone_r32(struct nvme_bus *b, uint32_t off)
{
	(void)b;
	(void)off;
	return 0xffffffffu;
}
static uint64_t gone_r64(struct nvme_bus *b, uint32_t off)
{
	(void)b;
	(void)off;
	return ~0ull;
}
static void gone_w32(struct nvme_bus *b, uint32_t off, uint32_t v)
{
	(void)b;
	(void)off;
	(void)v;
}
static void gone_w64(struct nvme_bus *b, uint32_t off, uint64_t v)
{
	(void)b;
	(void)off;
	(void)v;
}
START_TEST(t_device_gone)
{
	static const struct nvme_bus_ops ops = {
	    .read32 = gone_r32, .read64 = gone_r64, .write32 = gone_w32, .write64 = gone_w64};
	static uint8_t bar[8192]; /* mapped, as any bus's BAR0 is; never touched */
	struct nvme_bus bus = {.ops = &ops, .bar0 = bar, .bar0_len = sizeof(bar), .name = "gone0",
	                       .numa_node = -1};
	struct nvme_ctrl *c = NULL;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(&bus, &co, &c), -ENODEV);
	ck_assert_ptr_null(c);
}
END_TEST

START_TEST(t_shutdown_state)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(_i & 1);
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	uint32_t cc = nvme_bus_read32(sim_bus(s), NVME_REG_CC);
	ck_assert(cc & NVME_CC_EN);
	ck_assert_uint_eq((cc >> NVME_CC_IOSQES_SHIFT) & 0xf, 6);
	ck_assert_uint_eq((cc >> NVME_CC_IOCQES_SHIFT) & 0xf, 4);
	ck_assert_uint_eq((cc >> NVME_CC_MPS_SHIFT) & 0xf, 0);
	ck_assert_uint_eq(nvme_bus_read32(sim_bus(s), NVME_REG_AQA),
	                  ((NVME_ADMIN_ENTRIES - 1u) << 16) | (NVME_ADMIN_ENTRIES - 1u));
	ck_assert(nvme_bus_read32(sim_bus(s), NVME_REG_CSTS) & NVME_CSTS_RDY);
	nvme_ctrl_close(c); /* shutdown must complete without warnings or hangs */
}
END_TEST

/* ---- DMA memory: hugepages that cannot be locked fall back to 4 KiB ---- */
START_TEST(t_dma_huge_fallback)
{
	char path[] = "/tmp/test_engine_log.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	int saved = dup(2);
	ck_assert_int_ge(saved, 0);
	dup2(fd, 2);
	log_set_level(LOG_LVL_WARN);
	nvme_dma_fault_huge_lock(true);
	struct nvme_dma_region a, b;
	int ra = nvme_dma_alloc(4u << 20, -1, &a);
	int rb = nvme_dma_alloc(4u << 20, -1, &b);
	nvme_dma_fault_huge_lock(false);
	log_set_level(LOG_LVL_ERROR);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ck_assert_int_eq(ra, 0);
	ck_assert_int_eq(rb, 0);
	ck_assert(!a.huge && !b.huge);
	ck_assert_uint_ge(a.len, 4u << 20);
	((uint8_t *)a.vaddr)[a.len - 1] = 1; /* usable */
	nvme_dma_free(&a);
	nvme_dma_free(&b);
	char text[4096] = {0};
	ck_assert_int_ge(pread(fd, text, sizeof(text) - 1, 0), 0);
	close(fd);
	unlink(path);
	/* one line for both allocations */
	const char *k = "hugepages cannot be locked";
	char *first = strstr(text, k);
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_null(strstr(first + 1, k));
}
END_TEST

/* ---- namespaces the engine must not expose, and formats it must read ---- */
enum ns_case { NS_EXT_META, NS_TOO_BIG, NS_FLBAS_HIGH, NS_MANY };
#define MANY_NS 1500u

static uint16_t ns_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	enum ns_case k = *(enum ns_case *)arg;
	uint8_t cns = cmd->cdw10 & 0xff;
	if (k == NS_MANY && cns == NVME_ID_CNS_NS_ACTIVE_LIST) {
		/* up to 1024 IDs greater than cmd->nsid, of 1..MANY_NS */
		uint32_t *list = data;
		memset(list, 0, 4096);
		unsigned n = 0;
		for (uint32_t id = cmd->nsid + 1; id <= MANY_NS && n < 1024; id++)
			list[n++] = id;
		return 0;
	}
	if (cns != NVME_ID_CNS_NS)
		return status;
	struct nvme_id_ns *id = data;
	switch (k) {
	case NS_EXT_META: /* namespace 1: 8 bytes of extended metadata per block, no PI */
		if (cmd->nsid == 1) {
			id->lbaf[0].ms = 8;
			id->flbas |= NVME_FLBAS_EXT;
		}
		break;
	case NS_TOO_BIG: /* namespace 1: 64 KiB blocks, beyond MDTS */
		if (cmd->nsid == 1)
			id->lbaf[0].lbads = 16;
		break;
	case NS_FLBAS_HIGH: /* 21 formats; format 17 (0x11) in use: 4 KiB */
		if (cmd->nsid == 1) {
			id->nlbaf = 20;
			for (unsigned i = 0; i <= 20; i++)
				id->lbaf[i].lbads = 9;
			id->lbaf[17].lbads = 12;
			id->flbas = 0x1 | (0x1 << 5);
		}
		break;
	case NS_MANY:
		if (cmd->nsid > 2) { /* beyond the sim's own: small 512-byte ones */
			memset(id, 0, sizeof(*id));
			id->nsze = id->ncap = 8;
			id->lbaf[0].lbads = 9;
			return 0;
		}
		break;
	}
	return status;
}

START_TEST(t_ns_formats)
{
	enum ns_case k = (enum ns_case)_i;
	struct sim *s;
	struct sim_opts so = sim_defaults(false);
	so.identify_hook = ns_hook;
	so.hook_arg = &k;
	if (k == NS_TOO_BIG)
		so.mdts = 1; /* 8 KiB per command */
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	switch (k) {
	case NS_EXT_META:
	case NS_TOO_BIG:
		ck_assert_uint_eq(in->nr_ns, 1); /* namespace 1 skipped */
		ck_assert_uint_eq(in->ns[0].nsid, 2);
		break;
	case NS_FLBAS_HIGH:
		ck_assert_uint_eq(in->nr_ns, 2);
		ck_assert_uint_eq(in->ns[0].lba_size, 4096);
		break;
	case NS_MANY: /* more than the engine uses: the first ones */
		ck_assert_uint_eq(in->nr_ns, NVME_MAX_NAMESPACES);
		ck_assert_uint_eq(in->ns[NVME_MAX_NAMESPACES - 1].nsid, NVME_MAX_NAMESPACES);
		ck_assert_uint_eq(in->ns[NVME_MAX_NAMESPACES - 1].nlba, 8);
		break;
	}
	if (k == NS_TOO_BIG) {
		/* I/O to the refused namespace is refused, not a division by zero */
		struct nvme_reactor *r;
		struct nvme_reactor_opts ro = {
		    .cpu = -1, .mode = NVME_MODE_POLL, .buf_pool_bytes = 8u << 20};
		ck_assert_int_eq(nvme_reactor_create(&ro, &r), 0);
		struct nvme_qpair *qp;
		ck_assert_int_eq(nvme_qpair_create(c, r, 1, &qp), 0);
		void *buf = nvme_reactor_buf_alloc(r, 1u << 17);
		ck_assert_int_eq(nvme_qpair_read(qp, 1, 0, buf, 1u << 17, NULL, NULL), -EINVAL);
		ck_assert_int_eq(nvme_qpair_write_zeroes(qp, 1, 0, 4, false, NULL, NULL), -EINVAL);
		nvme_qpair_destroy(qp);
		nvme_reactor_destroy(r);
	}
	nvme_ctrl_close(c);
}
END_TEST

/* ---- a failed MSI-X resize leaves the earlier vectors wired ---- */
START_TEST(t_wire_vector_restore)
{
	struct sim *s;
	struct sim_opts so = sim_defaults(false);
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.io_queues = 2, .interrupts = true};
	ck_assert_int_eq(nvme_ctrl_open(sim_bus(s), &co, &c), 0);
	int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_eq(nvme_ctrl_wire_vector(c, 1, e1), 0);
	ck_assert_int_eq(sim_vector_efd(s, 1), e1);
	sim_fault_irq_set(s, 1); /* the resize to 3 vectors fails and tears 1 down */
	ck_assert_int_eq(nvme_ctrl_wire_vector(c, 2, e2), -EIO);
	ck_assert_int_eq(sim_vector_efd(s, 1), e1); /* wired again */
	ck_assert_int_eq(sim_vector_efd(s, 2), -1);
	ck_assert_int_eq(nvme_ctrl_wire_vector(c, 1, -1), 0);
	nvme_ctrl_close(c);
	close(e1);
	close(e2);
}
END_TEST

/* ---- Identify Controller NVM limits; Write Zeroes split at WZSL, DEAC ---- */
static void wz_cb(void *arg, int err, uint16_t status)
{
	(void)status;
	ck_assert_int_eq(err, 0);
	(*(unsigned *)arg)++;
}

START_TEST(t_wz_limits)
{
	static struct rig g;
	struct rig_opts o = {.mode = NVME_MODE_POLL};
	o.sim[0] = sim_defaults(false);
	o.sim[0].wzsl = 1; /* 8 KiB per Write Zeroes */
	o.sim[0].dmrl = 4;
	o.sim[0].dmrsl = 1000;
	ck_assert_int_eq(rig_open(&g, &o), 0);
	struct sim *s = g.sim[0];
	struct nvme_qpair *qp = g.qp[0][0];
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(g.c[0]);
	ck_assert_uint_eq(in->max_wz_bytes, 8192);
	ck_assert_uint_eq(in->dsm_max_ranges, 4);
	ck_assert_uint_eq(in->dsm_max_range_blocks, 1000);
	ck_assert_uint_eq(in->dsm_max_blocks, 0);
	unsigned count = 0;
	struct sim_stats st0, st1;
	sim_get_stats(s, &st0);
	/* 64 blocks of 512 bytes = 32 KiB: four commands of 8 KiB */
	ck_assert_int_eq(nvme_qpair_write_zeroes(qp, 1, 0, 64, true, wz_cb, &count), 0);
	nvme_qpair_flush_sq(qp);
	for (int i = 0; i < 1000 && count == 0; i++)
		nvme_qpair_reap(qp, 0);
	ck_assert_uint_eq(count, 1);
	sim_get_stats(s, &st1);
	ck_assert_uint_eq(st1.write_zeroes - st0.write_zeroes, 4);
	ck_assert_uint_eq(st1.write_zeroes_deac - st0.write_zeroes_deac, 4);
	/* a deallocate beyond 4 ranges of 1000 blocks is refused */
	ck_assert_int_eq(nvme_qpair_deallocate(qp, 1, 0, 4001, wz_cb, &count), -EINVAL);
	ck_assert_int_eq(nvme_qpair_deallocate(qp, 1, 0, 4000, wz_cb, &count), 0);
	nvme_qpair_flush_sq(qp);
	for (int i = 0; i < 1000 && count == 1; i++)
		nvme_qpair_reap(qp, 0);
	ck_assert_uint_eq(count, 2);
	rig_close(&g);
}
END_TEST

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("engine");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_pool_buddy);
	tcase_add_test(tc, t_dma_region_node);
	tcase_add_test(tc, t_lat_hist);
	tcase_add_test(tc, t_status_map);
	tcase_add_loop_test(tc, t_open_identify, 0, 2);
	tcase_add_loop_test(tc, t_admin_get_features, 0, 2);
	tcase_add_loop_test(tc, t_admin_threads, 0, 2);
	tcase_add_test(tc, t_never_ready);
	tcase_add_test(tc, t_cfs_during_enable);
	tcase_add_loop_test(tc, t_cfs_admin, 0, 2);
	tcase_add_test(tc, t_device_gone);
	tcase_add_loop_test(tc, t_shutdown_state, 0, 2);
	tcase_add_test(tc, t_dma_huge_fallback);
	tcase_add_loop_test(tc, t_ns_formats, NS_EXT_META, NS_MANY + 1);
	tcase_add_test(tc, t_wire_vector_restore);
	tcase_add_test(tc, t_wz_limits);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

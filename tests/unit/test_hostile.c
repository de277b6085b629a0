/* test_hostile.c - a controller reporting values it should not: the engine
 * refuses it with a message naming the value, or clamps the value and works.
 * Registers (CAP.DSTRD against BAR0's length), Identify Controller (NN,
 * MDTS, strings), the active namespace list, Identify Namespace (NSZE with
 * the LBA data size, LBADS, the format index) and the Number of Queues
 * answer; the re-attach of a controller on a BAR that cannot hold its
 * doorbells.  The software controller reports them through its test knobs
 * (sim_opts cap, bar_len, identify_hook, admin_hook). */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

/* ---- the log of one call, captured from stderr ---- */
struct logcap {
	char path[40];
	int fd, saved;
};

static void cap_begin(struct logcap *lc)
{
	snprintf(lc->path, sizeof(lc->path), "/tmp/test_hostile_log.XXXXXX");
	lc->fd = mkstemp(lc->path);
	ck_assert_int_ge(lc->fd, 0);
	fflush(stderr);
	lc->saved = dup(2);
	ck_assert_int_ge(lc->saved, 0);
	dup2(lc->fd, 2);
	log_set_level(LOG_LVL_WARN);
}

/* The text logged since cap_begin (malloc'd), also echoed to stderr. */
static char *cap_end(struct logcap *lc)
{
	log_set_level(LOG_LVL_ERROR);
	fflush(stderr);
	dup2(lc->saved, 2);
	close(lc->saved);
	char *text = calloc(1, 1u << 16);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_ge(pread(lc->fd, text, (1u << 16) - 1, 0), 0);
	close(lc->fd);
	unlink(lc->path);
	fputs(text, stderr);
	return text;
}

/* ---- what the device reports: one hook for every case ---- */
struct hostile {
	uint32_t nn;              /* Identify Controller NN, 0: the sim's */
	int mdts;                 /* Identify Controller MDTS, -1: the sim's */
	bool bad_strings;         /* model, serial, firmware: control bytes, 0xff, quotes */
	bool no_list;             /* CNS 02h fails with Invalid Field (a pre-1.1 device) */
	const uint32_t *list;     /* CNS 02h answers this, whatever it asks ... */
	unsigned list_len;
	bool endless_list;        /* ... or every NSID above the one asked: 1024 a page */
	bool extra_ns;            /* NSIDs above the sim's 2: 8 blocks of 512 bytes */
	bool ns1_patch;           /* namespace 1 reports: */
	uint64_t ns1_nsze;
	uint8_t ns1_lbads, ns1_nlbaf, ns1_flbas;
	bool rtd3e_patch;         /* Identify Controller RTD3E */
	uint32_t rtd3e;
	bool wzsl_patch;          /* Identify Controller NVM WZSL */
	uint8_t wzsl;
	bool nq_patch;            /* Number of Queues answers nq_dw0 */
	uint32_t nq_dw0;
	_Atomic unsigned id_ns;   /* Identify Namespace commands seen */
	_Atomic unsigned id_list; /* CNS 02h commands seen */
};

static void fill_hostile(char *f, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		f[i] = (char)(i % 5 == 0 ? 0x01 + (seed + i) % 0x1f
		              : i % 5 == 1 ? 0xff
		              : i % 5 == 2 ? '"'
		              : i % 5 == 3 ? 0
		                           : 'a' + i % 26);
}

static uint16_t id_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	struct hostile *h = arg;
	uint8_t cns = cmd->cdw10 & 0xff;
	switch (cns) {
	case NVME_ID_CNS_CTRL: {
		struct nvme_id_ctrl *id = data;
		if (h->nn)
			id->nn = h->nn;
		if (h->mdts >= 0)
			id->mdts = (uint8_t)h->mdts;
		if (h->rtd3e_patch)
			id->rtd3e = h->rtd3e;
		if (h->bad_strings) {
			fill_hostile(id->mn, sizeof(id->mn), 1);
			fill_hostile(id->sn, sizeof(id->sn), 2);
			fill_hostile(id->fr, sizeof(id->fr), 3);
		}
		return status;
	}
	case NVME_ID_CNS_CTRL_NVM:
		if (h->wzsl_patch)
			((struct nvme_id_ctrl_nvm *)data)->wzsl = h->wzsl;
		return status;
	case NVME_ID_CNS_NS_ACTIVE_LIST: {
		atomic_fetch_add(&h->id_list, 1);
		if (h->no_list)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		uint32_t *list = data;
		if (h->list) {
			memset(list, 0, 4096);
			memcpy(list, h->list, h->list_len * sizeof(uint32_t));
		} else if (h->endless_list) {
			for (unsigned i = 0; i < 1024; i++) {
				uint64_t id = (uint64_t)cmd->nsid + 1 + i;
				list[i] = id <= 0xfffffffeu ? (uint32_t)id : 0;
			}
		}
		return status;
	}
	case NVME_ID_CNS_NS: {
		atomic_fetch_add(&h->id_ns, 1);
		struct nvme_id_ns *id = data;
		if (cmd->nsid > 2 && h->extra_ns) {
			memset(id, 0, sizeof(*id));
			id->nsze = id->ncap = 8;
			id->lbaf[0].lbads = 9;
			return 0;
		}
		if (cmd->nsid == 1 && h->ns1_patch) {
			id->nsze = id->ncap = h->ns1_nsze;
			id->nlbaf = h->ns1_nlbaf;
			id->flbas = h->ns1_flbas;
			id->lbaf[h->ns1_flbas & 0xf].lbads = h->ns1_lbads;
		}
		return status;
	}
	default:
		return status;
	}
}

static uint16_t adm_hook(void *arg, const struct nvme_sqe *cmd, uint16_t status, uint32_t *dw0)
{
	struct hostile *h = arg;
	if (h->nq_patch && cmd->opc == NVME_ADM_SET_FEATURES &&
	    (cmd->cdw10 & 0xff) == NVME_FEAT_NUM_QUEUES && status == 0)
		*dw0 = h->nq_dw0;
	return status;
}

static struct sim_opts sim_base(struct hostile *h)
{
	struct sim_opts so = {.name = "th", .nr_ns = 2, .identify_hook = id_hook,
	                      .admin_hook = adm_hook, .hook_arg = h};
	so.ns[0] = (struct sim_ns_opts){.nlba = 1u << 12, .lba_size = 512,
	                                .backing = SIM_BACKING_NULL};
	so.ns[1] = (struct sim_ns_opts){.nlba = 1u << 10, .lba_size = 4096,
	                                .backing = SIM_BACKING_NULL};
	return so;
}

static struct hostile hostile_none(void)
{
	return (struct hostile){.mdts = -1};
}

/* Open a controller on a sim made from so with queues I/O queues asked:
 * rc, the controller (NULL on failure; the sim is then destroyed) and the
 * log of the bring-up. */
static int open_on(const struct sim_opts *so, unsigned queues, struct sim **sp,
                   struct nvme_ctrl **cp, char **log)
{
	struct sim *s;
	ck_assert_int_eq(sim_create(so, &s), 0);
	struct nvme_ctrl_opts co = {.name = "th", .io_queues = queues};
	struct logcap lc;
	cap_begin(&lc);
	int rc = nvme_ctrl_open(sim_bus(s), &co, cp);
	*log = cap_end(&lc);
	if (rc < 0) {
		*cp = NULL;
		sim_destroy(s);
		s = NULL;
	}
	if (sp)
		*sp = s;
	return rc;
}

/* One read of the first block of nsid on qid: 0 or the command's error. */
static void read_cb(void *arg, int err, uint16_t status)
{
	(void)status;
	int *r = arg;
	*r = err;
}

static int read_one(struct nvme_ctrl *c, uint16_t qid, uint32_t nsid, uint32_t len)
{
	struct nvme_reactor *r;
	struct nvme_reactor_opts ro = {.cpu = -1, .mode = NVME_MODE_POLL,
	                               .buf_pool_bytes = 4u << 20};
	ck_assert_int_eq(nvme_reactor_create(&ro, &r), 0);
	struct nvme_qpair *qp;
	ck_assert_int_eq(nvme_qpair_create(c, r, qid, &qp), 0);
	void *buf = nvme_reactor_buf_alloc(r, len);
	ck_assert_ptr_nonnull(buf);
	int res = 1;
	ck_assert_int_eq(nvme_qpair_read(qp, nsid, 0, buf, len, read_cb, &res), 0);
	for (int i = 0; i < 100000 && res == 1; i++)
		nvme_qpair_reap(qp, 0);
	nvme_reactor_buf_free(r, buf, len);
	nvme_qpair_destroy(qp);
	nvme_reactor_destroy(r);
	return res;
}

/* ---- CAP.DSTRD and BAR0's length ---- */

/* DSTRD 15 (a 128 KiB stride) with an 8 KiB BAR: the admin queue's CQ head
 * doorbell would be at 0x21000, far outside it.  Before the check this was
 * a store outside the BAR: SIGSEGV. */
START_TEST(t_dstrd15_bar8k)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.dstrd = 15;
	so.bar_len = 8192;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), -EINVAL);
	ck_assert_ptr_nonnull(strstr(log, "CAP.DSTRD 15"));
	ck_assert_ptr_nonnull(strstr(log, "BAR0 of 8192 bytes"));
	ck_assert_ptr_nonnull(strstr(log, "queue 0"));
	ck_assert_ptr_nonnull(strstr(log, "0x21000"));
	free(log);
}
END_TEST

/* A BAR of 4 KiB holds the registers but not one doorbell. */
START_TEST(t_bar_no_doorbells)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.bar_len = 4096;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), -EINVAL);
	ck_assert_ptr_nonnull(strstr(log, "BAR0 of 4096 bytes"));
	free(log);
}
END_TEST

/* A BAR0 shorter than the register block: refused before any register is
 * read (a VFIO bus reads them from the mapping). */
static _Atomic unsigned reg_reads;
static uint32_t count_r32(struct nvme_bus *b, uint32_t off)
{
	(void)b;
	(void)off;
	atomic_fetch_add(&reg_reads, 1);
	return 0;
}
static uint64_t count_r64(struct nvme_bus *b, uint32_t off)
{
	(void)b;
	(void)off;
	atomic_fetch_add(&reg_reads, 1);
	return 0;
}
static void no_w32(struct nvme_bus *b, uint32_t off, uint32_t v)
{
	(void)b, (void)off, (void)v;
}
static void no_w64(struct nvme_bus *b, uint32_t off, uint64_t v)
{
	(void)b, (void)off, (void)v;
}

START_TEST(t_bar_no_registers)
{
	static const struct nvme_bus_ops ops = {
	    .read32 = count_r32, .read64 = count_r64, .write32 = no_w32, .write64 = no_w64};
	static uint8_t bar[64];
	struct nvme_bus bus = {.ops = &ops, .bar0 = bar, .bar0_len = sizeof(bar), .name = "short0",
	                       .numa_node = -1};
	struct nvme_ctrl *c = NULL;
	struct nvme_ctrl_opts co = {.io_queues = 1};
	struct logcap lc;
	cap_begin(&lc);
	int rc = nvme_ctrl_open(&bus, &co, &c);
	char *log = cap_end(&lc);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_uint_eq(atomic_load(&reg_reads), 0);
	ck_assert_ptr_nonnull(strstr(log, "BAR0 of 64 bytes cannot hold the controller's registers"));
	free(log);
}
END_TEST

/* DSTRD 4 (64-byte stride, 128 bytes a queue) in an 8 KiB BAR: 4 KiB of
 * doorbells hold queues 0..31.  Asked for 40 I/O queues, the engine uses
 * 31, says why, and the last one works (its doorbells are the BAR's last). */
START_TEST(t_bar_fits_fewer_queues)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.dstrd = 4;
	so.bar_len = 8192;
	struct sim *s;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 40, &s, &c, &log), 0);
	ck_assert_ptr_nonnull(strstr(log, "CAP.DSTRD 4"));
	ck_assert_ptr_nonnull(strstr(log, "BAR0 of 8192 bytes"));
	ck_assert_ptr_nonnull(strstr(log, "31 of the 40 I/O queues"));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->nr_io_queues, 31);
	ck_assert_uint_le(nvme_cq_hdbl_off(31, 4) + 4u, 8192);
	ck_assert_int_eq(read_one(c, 31, 1, 512), 0);
	struct sim_stats st;
	sim_get_stats(s, &st);
	ck_assert_uint_eq(st.reads, 1);
	ck_assert_uint_eq(st.invalid_doorbells, 0);
	nvme_ctrl_close(c);
}
END_TEST

/* The largest stride the sim's BAR holds (its own length for DSTRD 15):
 * accepted, and I/O works. */
START_TEST(t_dstrd15_own_bar)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.dstrd = 15;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 2, NULL, &c, &log), 0);
	free(log);
	ck_assert_uint_eq(nvme_ctrl_get_info(c)->nr_io_queues, 2);
	ck_assert_int_eq(read_one(c, 2, 2, 4096), 0);
	nvme_ctrl_close(c);
}
END_TEST

/* Re-attach on a bus whose BAR cannot hold the doorbells of the queues
 * the controller uses: refused (-ESTALE), the controller stays removed, and
 * its own bus still attaches.  DSTRD 8: a 1 KiB stride, 2 KiB a queue; an
 * 8 KiB BAR holds queues 0 and 1 only, a 4 KiB one none.  Before the check:
 * the doorbell stores faulted. */
START_TEST(t_attach_small_bar)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.dstrd = 8;
	struct sim *s;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 4, &s, &c, &log), 0);
	free(log);
	ck_assert_uint_eq(nvme_ctrl_get_info(c)->nr_io_queues, 4);
	struct nvme_bus *bus = NULL;
	ck_assert_int_eq(nvme_ctrl_remove(c, "test", &bus), 0);
	ck_assert_ptr_eq(bus, sim_bus(s));
	static const size_t bars[] = {8192, 4096};
	for (unsigned k = 0; k < 2; k++) {
		struct hostile h2 = hostile_none();
		struct sim_opts so2 = sim_base(&h2);
		so2.dstrd = 8;
		so2.bar_len = bars[k];
		struct sim *small;
		ck_assert_int_eq(sim_create(&so2, &small), 0);
		struct logcap lc;
		cap_begin(&lc);
		int rc = nvme_ctrl_attach(c, sim_bus(small));
		log = cap_end(&lc);
		ck_assert_int_eq(rc, -ESTALE);
		ck_assert_ptr_nonnull(strstr(log, "CAP.DSTRD 8"));
		char want[64];
		snprintf(want, sizeof(want), "BAR0 of %zu bytes", bars[k]);
		ck_assert_ptr_nonnull(strstr(log, want));
		free(log);
		ck_assert_int_eq(nvme_ctrl_state(c), NVME_CTRL_REMOVED);
		sim_destroy(small);
	}
	ck_assert_int_eq(nvme_ctrl_attach(c, bus), 0);
	ck_assert_int_eq(nvme_ctrl_state(c), NVME_CTRL_LIVE);
	nvme_ctrl_close(c);
}
END_TEST

/* More I/O queues asked than the engine keeps track of: capped at
 * NVME_CTRL_MAX_QPAIRS (the Number of Queues field would hold more). */
START_TEST(t_queues_capped)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 100000, NULL, &c, &log), 0);
	free(log);
	ck_assert_uint_eq(c->asked_queues, NVME_CTRL_MAX_QPAIRS);
	ck_assert_uint_eq(nvme_ctrl_get_info(c)->nr_io_queues, 64); /* the sim's grant */
	nvme_ctrl_close(c);
}
END_TEST

/* The doorbell arithmetic at its limits: the 64-bit count agrees with the
 * 32-bit offsets up to the queue it returns, and the next queue's do not
 * fit. */
START_TEST(t_db_max_qid)
{
	static const struct {
		uint64_t bar;
		uint32_t dstrd;
		int64_t want;
	} k[] = {
	    {4096, 0, -1},          {0x1008, 0, 0},         {0x1010, 0, 1},
	    {8192, 15, -1},         {8192, 4, 31},          {8192, 8, 1},
	    {0x21004, 15, 0},       {1ull << 40, 15, 16383}, {1ull << 40, 0, 0xffff},
	    {UINT64_MAX, 15, 16383},
	};
	for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		int64_t q = nvme_db_max_qid(k[i].bar, k[i].dstrd);
		ck_assert_int_eq(q, k[i].want);
		uint64_t lim = k[i].bar > UINT32_MAX ? UINT32_MAX : k[i].bar;
		if (q >= 0) {
			uint64_t end = (uint64_t)nvme_cq_hdbl_off((uint16_t)q, k[i].dstrd) + 4;
			ck_assert_uint_eq(end, NVME_REG_DBS + (2ull * q + 1) * (4ull << k[i].dstrd) + 4);
			ck_assert_uint_le(end, lim);
		}
		if (q < 0xffff)
			ck_assert_uint_gt(NVME_REG_DBS + (2ull * (q + 1) + 1) * (4ull << k[i].dstrd) + 4,
			                  lim);
	}
}
END_TEST

/* CAP: too few queue entries (MQES 2: 3), no NVM command set, pages above
 * 4 KiB: refused, each with its message. */
static const struct {
	uint64_t cap;
	int rc;
	const char *msg;
} cap_cases[] = {
    {2 | 1ull << 16 | 15ull << 24 | 1ull << 37, -EINVAL, "queue depth 2 too small (MQES 3)"},
    {4095 | 1ull << 16 | 15ull << 24 | 1ull << 44, -ENOTSUP, "NVM command set"},
    {4095 | 1ull << 16 | 15ull << 24 | 1ull << 37 | 1ull << 48, -ENOTSUP,
     "minimum page size is 8 KiB"},
};

START_TEST(t_cap_values)
{
	struct hostile h = hostile_none();
	struct sim_opts so = sim_base(&h);
	so.cap = cap_cases[_i].cap;
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), cap_cases[_i].rc);
	ck_assert_ptr_nonnull(strstr(log, cap_cases[_i].msg));
	free(log);
}
END_TEST

/* ---- Identify Controller ---- */

/* RTD3E of 4295 s: the shutdown waits at most 60 s.  WZSL 200: no limit,
 * not a shift by 200. */
START_TEST(t_rtd3e_wzsl)
{
	struct hostile h = hostile_none();
	h.rtd3e_patch = true;
	h.rtd3e = 0xffffffffu;
	h.wzsl_patch = true;
	h.wzsl = 200;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	free(log);
	ck_assert_uint_eq(c->shutdown_timeout_ms, 60000);
	ck_assert_uint_eq(nvme_ctrl_get_info(c)->max_wz_bytes, 0);
	nvme_ctrl_close(c);
}
END_TEST

/* NN = 0xffffffff on a device without the active list: at most
 * NVME_MAX_NAMESPACES NSIDs are probed, nothing is allocated per NN. */
START_TEST(t_nn_huge_probe)
{
	struct hostile h = hostile_none();
	h.nn = 0xffffffffu;
	h.no_list = true;
	h.extra_ns = true;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	ck_assert_ptr_nonnull(strstr(log, "NN 4294967295"));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->nr_ns, NVME_MAX_NAMESPACES);
	ck_assert_uint_eq(in->ns[NVME_MAX_NAMESPACES - 1].nsid, NVME_MAX_NAMESPACES);
	ck_assert_uint_eq(atomic_load(&h.id_ns), NVME_MAX_NAMESPACES);
	nvme_ctrl_close(c);
}
END_TEST

/* MDTS: 0 is no limit, a shift too large for any transfer is no limit
 * either (not an overflowed one), small ones are honoured. */
static const struct {
	int mdts;
	uint32_t max_xfer;
} mdts_cases[] = {
    {0, 2u << 20},  {1, 8192},      {8, 1u << 20},  {9, 2u << 20},
    {20, 2u << 20}, {31, 2u << 20}, {32, 2u << 20}, {255, 2u << 20},
};

START_TEST(t_mdts)
{
	struct hostile h = hostile_none();
	h.mdts = mdts_cases[_i].mdts;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->max_xfer, mdts_cases[_i].max_xfer);
	ck_assert_uint_eq(in->nr_ns, 2); /* 4 KiB blocks fit every limit */
	nvme_ctrl_close(c);
}
END_TEST

/* Model, serial and firmware full of control bytes, 0xff, quotes and NULs:
 * printable ASCII only, NUL-terminated, trimmed. */
START_TEST(t_id_strings)
{
	struct hostile h = hostile_none();
	h.bad_strings = true;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	const char *str[] = {in->model, in->serial, in->firmware};
	const size_t cap[] = {sizeof(in->model), sizeof(in->serial), sizeof(in->firmware)};
	for (unsigned k = 0; k < 3; k++) {
		size_t n = strnlen(str[k], cap[k]);
		ck_assert_uint_lt(n, cap[k]);
		ck_assert_uint_gt(n, 0);
		for (size_t i = 0; i < n; i++)
			ck_assert(str[k][i] >= 0x20 && str[k][i] <= 0x7e);
		ck_assert(str[k][0] != ' ' && str[k][n - 1] != ' ');
	}
	nvme_ctrl_close(c);
}
END_TEST

/* ---- Number of Queues: 0-based counts, possibly more than asked ---- */
static const struct {
	uint32_t dw0;
	unsigned ask, want;
} nq_cases[] = {
    {0xffffffffu, 2, 2}, /* 65536 each: more than asked, the asked count */
    {0x00000000u, 4, 1}, /* one each */
    {0x0000ffffu, 4, 1}, /* 65536 SQs, one CQ */
    {0x00020007u, 8, 3}, /* 8 SQs, 3 CQs */
};

START_TEST(t_num_queues)
{
	struct hostile h = hostile_none();
	h.nq_patch = true;
	h.nq_dw0 = nq_cases[_i].dw0;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, nq_cases[_i].ask, NULL, &c, &log), 0);
	free(log);
	ck_assert_uint_eq(nvme_ctrl_get_info(c)->nr_io_queues, nq_cases[_i].want);
	ck_assert_int_eq(read_one(c, (uint16_t)nq_cases[_i].want, 1, 512), 0);
	nvme_ctrl_close(c);
}
END_TEST

/* ---- the active namespace list ---- */
static const uint32_t list_dups[] = {1, 2, 2, 1};
static const uint32_t list_desc[] = {2, 1};
static const uint32_t list_bcast[] = {1, 0xffffffffu, 2};
static const uint32_t list_zero_mid[] = {1, 0, 2};

static const struct {
	const uint32_t *list;
	unsigned len;
	unsigned nr_ns; /* kept: the ascending prefix */
	const char *msg;
} list_cases[] = {
    {list_dups, 4, 2, "not ascending"},
    {list_desc, 2, 1, "not ascending"},
    {list_bcast, 3, 1, "not a namespace ID"},
    {list_zero_mid, 3, 1, NULL}, /* 0 ends the list, as the spec says */
};

START_TEST(t_ns_list_order)
{
	struct hostile h = hostile_none();
	h.list = list_cases[_i].list;
	h.list_len = list_cases[_i].len;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	if (list_cases[_i].msg)
		ck_assert_ptr_nonnull(strstr(log, list_cases[_i].msg));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->nr_ns, list_cases[_i].nr_ns);
	for (unsigned i = 0; i < in->nr_ns; i++)
		ck_assert_uint_eq(in->ns[i].nsid, list_cases[_i].list[i]);
	nvme_ctrl_close(c);
}
END_TEST

/* A list that never ends (every page full, up to NSID 0xfffffffe): the
 * first NVME_MAX_NAMESPACES are kept, the rest is not read. */
START_TEST(t_ns_list_endless)
{
	struct hostile h = hostile_none();
	h.endless_list = true;
	h.extra_ns = true;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	ck_assert_ptr_nonnull(strstr(log, "more than 1024 active namespaces"));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->nr_ns, NVME_MAX_NAMESPACES);
	ck_assert_uint_eq(in->ns[NVME_MAX_NAMESPACES - 1].nsid, NVME_MAX_NAMESPACES);
	ck_assert_uint_le(atomic_load(&h.id_list), 2);
	ck_assert_uint_eq(atomic_load(&h.id_ns), NVME_MAX_NAMESPACES);
	nvme_ctrl_close(c);
}
END_TEST

/* ---- Identify Namespace: size, LBA data size, format index ---- */
static const struct {
	uint64_t nsze;
	uint8_t lbads, nlbaf, flbas;
	bool usable;
	const char *msg;
} ns_cases[] = {
    /* bytes = nsze << lbads must fit an off_t (a file's st_size) */
    {1ull << 62, 12, 0, 0, false, "more than 2^63 - 1 bytes"},
    {1ull << 54, 9, 0, 0, false, "more than 2^63 - 1 bytes"},
    {UINT64_MAX, 9, 0, 0, false, "more than 2^63 - 1 bytes"},
    {INT64_MAX >> 9, 9, 0, 0, true, NULL}, /* the largest that fits */
    {INT64_MAX >> 16, 16, 0, 0, true, NULL},
    /* LBADS outside 9..16 */
    {1024, 0, 0, 0, false, "unusable LBA format"},
    {1024, 8, 0, 0, false, "unusable LBA format"},
    {1024, 17, 0, 0, false, "unusable LBA format"},
    {1024, 63, 0, 0, false, "unusable LBA format"},
    {1024, 255, 0, 0, false, "unusable LBA format"},
    /* FLBAS naming a format beyond NLBAF */
    {1024, 9, 0, 3, false, "unusable LBA format"},
    {1024, 9, 2, 0x0f, false, "unusable LBA format"},
};

START_TEST(t_ns_values)
{
	struct hostile h = hostile_none();
	h.ns1_patch = true;
	h.ns1_nsze = ns_cases[_i].nsze;
	h.ns1_lbads = ns_cases[_i].lbads;
	h.ns1_nlbaf = ns_cases[_i].nlbaf;
	h.ns1_flbas = ns_cases[_i].flbas;
	struct sim_opts so = sim_base(&h);
	struct nvme_ctrl *c;
	char *log;
	ck_assert_int_eq(open_on(&so, 1, NULL, &c, &log), 0);
	if (ns_cases[_i].msg)
		ck_assert_ptr_nonnull(strstr(log, ns_cases[_i].msg));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	for (unsigned i = 0; i < in->nr_ns; i++)
		ck_assert_uint_le(in->ns[i].nlba, (uint64_t)INT64_MAX >> in->ns[i].lba_shift);
	if (ns_cases[_i].usable) {
		ck_assert_uint_eq(in->nr_ns, 2);
		ck_assert_uint_eq(in->ns[0].nlba, ns_cases[_i].nsze);
		ck_assert_uint_eq(in->ns[0].lba_shift, ns_cases[_i].lbads);
	} else {
		ck_assert_uint_eq(in->nr_ns, 1);
		ck_assert_uint_eq(in->ns[0].nsid, 2);
	}
	nvme_ctrl_close(c);
}
END_TEST

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("hostile");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_dstrd15_bar8k);
	tcase_add_test(tc, t_bar_no_doorbells);
	tcase_add_test(tc, t_bar_no_registers);
	tcase_add_test(tc, t_bar_fits_fewer_queues);
	tcase_add_test(tc, t_dstrd15_own_bar);
	tcase_add_test(tc, t_attach_small_bar);
	tcase_add_test(tc, t_queues_capped);
	tcase_add_test(tc, t_db_max_qid);
	tcase_add_loop_test(tc, t_cap_values, 0, sizeof(cap_cases) / sizeof(cap_cases[0]));
	tcase_add_test(tc, t_rtd3e_wzsl);
	tcase_add_test(tc, t_nn_huge_probe);
	tcase_add_loop_test(tc, t_mdts, 0, sizeof(mdts_cases) / sizeof(mdts_cases[0]));
	tcase_add_test(tc, t_id_strings);
	tcase_add_loop_test(tc, t_num_queues, 0, sizeof(nq_cases) / sizeof(nq_cases[0]));
	tcase_add_loop_test(tc, t_ns_list_order, 0, sizeof(list_cases) / sizeof(list_cases[0]));
	tcase_add_test(tc, t_ns_list_endless);
	tcase_add_loop_test(tc, t_ns_values, 0, sizeof(ns_cases) / sizeof(ns_cases[0]));
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

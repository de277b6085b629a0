/* test_qpair.c - one I/O queue pair against the software controller, driven
 * directly from the test thread (it owns the reactor, which is not started):
 * phase tags across wraps, doorbell batching, bogus/duplicate CIDs, PRP lists,
 * MDTS splitting, data integrity, status mapping, timeouts, bad input. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

/* The shared rig (tests/support/rig.h), not started: the test drives the
 * one reactor's qpair itself. */
struct env {
	struct rig g;
	struct sim *sim;
	struct nvme_ctrl *c;
	struct nvme_reactor *r;
	struct nvme_qpair *qp;
	bool threaded;
};

struct done {
	unsigned count;
	int err;
	uint16_t status;
};

static void done_cb(void *arg, int err, uint16_t status)
{
	struct done *d = arg;
	d->count++;
	if (err && !d->err) {
		d->err = err;
		d->status = status;
	}
}

static struct sim_opts sim_defaults(bool threaded)
{
	struct sim_opts so = {.name = "tq", .nr_ns = 1, .threaded = threaded};
	so.ns[0] =
	    (struct sim_ns_opts){.nlba = 1u << 16, .lba_size = 512, .backing = SIM_BACKING_RAM};
	return so;
}

static void env_open_retries(struct env *e, const struct sim_opts *so, unsigned depth,
                             unsigned budget, unsigned timeout_ms, unsigned retries)
{
	memset(e, 0, sizeof(*e));
	e->threaded = so->threaded;
	struct rig_opts o = {.pool_bytes = 32u << 20};
	o.sim[0] = *so;
	o.ctrl[0] = (struct nvme_ctrl_opts){
	    .queue_depth = depth, .cq_budget = budget, .io_timeout_ms = timeout_ms, .io_retries = retries};
	ck_assert_int_eq(rig_open(&e->g, &o), 0);
	e->sim = e->g.sim[0];
	e->c = e->g.c[0];
	e->r = e->g.r[0];
	e->qp = e->g.qp[0][0];
}

static void env_open(struct env *e, const struct sim_opts *so, unsigned depth, unsigned budget,
                     unsigned timeout_ms)
{
	env_open_retries(e, so, depth, budget, timeout_ms, 3);
}

static void env_close(struct env *e)
{
	rig_close(&e->g); /* the controller closes the bus, which is the sim */
}

/* Ring, then reap until d->count reaches want (10 s at most). */
static void drive(struct env *e, struct done *d, unsigned want)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (d->count < want) {
		nvme_qpair_flush_sq(e->qp);
		if (!e->threaded)
			sim_poll(e->sim);
		nvme_qpair_reap(e->qp, 0);
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		ck_assert_msg(t.tv_sec - t0.tv_sec < 10, "stuck: %u of %u completions", d->count,
		              want);
	}
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = seed ^ (uint32_t)(i * 2654435761u);
		memcpy(p + i, &v, 4);
	}
}

/* ---- phase tag across many wraps ---- */
static void phase_wraps(bool threaded)
{
	struct env e;
	struct sim_opts so = sim_defaults(threaded);
	env_open(&e, &so, 16, 4, 0);
	uint8_t *buf = nvme_reactor_buf_alloc(e.r, 4096);
	ck_assert_ptr_nonnull(buf);
	struct done d = {0};
	unsigned total = 12000, sent = 0;
	while (d.count < total) {
		while (sent < total) {
			int rc = nvme_qpair_read(e.qp, 1, sent % 1024, buf, 512, done_cb, &d);
			if (rc == -EAGAIN)
				break;
			ck_assert_int_eq(rc, 0);
			sent++;
		}
		nvme_qpair_flush_sq(e.qp);
		nvme_qpair_reap(e.qp, 0);
	}
	ck_assert_int_eq(d.err, 0);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	ck_assert_uint_eq(st.completed, total);
	ck_assert_uint_eq(st.bogus_cqes, 0);
	ck_assert_uint_eq(nvme_qpair_inflight(e.qp), 0);
	/* 12000 completions through a 16-entry CQ: ~750 wraps of the phase tag */
	ck_assert_uint_gt(st.completed / 16, 700);
	struct sim_stats ss;
	sim_get_stats(e.sim, &ss);
	ck_assert_uint_eq(ss.invalid_doorbells, 0); /* no head doorbell past what was posted */
	nvme_reactor_buf_free(e.r, buf, 4096);
	env_close(&e);
}
START_TEST(t_phase_inline)
{
	phase_wraps(false);
}
END_TEST
START_TEST(t_phase_threaded)
{
	phase_wraps(true);
}
END_TEST

/* ---- doorbells per pass, not per command ---- */
START_TEST(t_doorbell_batching)
{
	struct env e;
	struct sim_opts so = sim_defaults(false);
	env_open(&e, &so, 64, 8, 0);
	uint8_t *buf = nvme_reactor_buf_alloc(e.r, 4096);
	struct sim_stats s0, s1;
	sim_get_stats(e.sim, &s0);
	struct done d = {0};
	for (unsigned pass = 0; pass < 10; pass++) {
		for (unsigned i = 0; i < 8; i++)
			ck_assert_int_eq(nvme_qpair_read(e.qp, 1, i, buf, 512, done_cb, &d), 0);
		ck_assert(nvme_qpair_flush_sq(e.qp));
		ck_assert(!nvme_qpair_flush_sq(e.qp)); /* nothing new: must not ring again */
		while (d.count < (pass + 1) * 8)
			nvme_qpair_reap(e.qp, 0);
	}
	sim_get_stats(e.sim, &s1);
	ck_assert_uint_eq(s1.cmds - s0.cmds - (s1.admin_cmds - s0.admin_cmds), 80);
	ck_assert_uint_eq(s1.sq_doorbells - s0.sq_doorbells, 10);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	ck_assert_uint_eq(st.sq_doorbells, 10);
	/* one CQ head doorbell per reap call that found something, never per CQE */
	ck_assert_uint_le(st.cq_doorbells, st.reap_passes);
	/* inline: each flush executes all 8, so one reap of budget 8 takes them */
	ck_assert_uint_eq(st.cq_doorbells, 10);
	ck_assert_uint_eq(s1.cq_doorbells - s0.cq_doorbells, 10);
	ck_assert_uint_eq(st.cpl_per_pass[8], 10);
	env_close(&e);
}
END_TEST

/* ---- bogus and duplicate CIDs ---- */
static void bogus_dup(bool threaded)
{
	struct env e;
	struct sim_opts so = sim_defaults(threaded);
	env_open(&e, &so, 32, 4, 0);
	uint8_t *w = nvme_reactor_buf_alloc(e.r, 8192), *r = nvme_reactor_buf_alloc(e.r, 8192);
	fill(w, 8192, 7);
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 100, w, 8192, false, done_cb, &d), 0);
	drive(&e, &d, 1);
	sim_fault_bogus_cid(e.sim, 5);
	sim_fault_duplicate(e.sim, 5);
	struct done d2 = {0};
	for (unsigned i = 0; i < 10; i++) {
		ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 100, r, 8192, done_cb, &d2), 0);
		drive(&e, &d2, i + 1);
	}
	/* let any trailing duplicate arrive, then check nothing completed twice */
	for (int i = 0; i < 100; i++) {
		if (!threaded)
			sim_poll(e.sim);
		nvme_qpair_reap(e.qp, 0);
	}
	ck_assert_uint_eq(d2.count, 10);
	ck_assert_int_eq(d2.err, 0);
	ck_assert_mem_eq(w, r, 8192);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	ck_assert_uint_eq(st.bogus_cqes, 10);
	ck_assert_uint_eq(st.completed, 11);
	ck_assert_uint_eq(nvme_qpair_inflight(e.qp), 0);
	env_close(&e);
}
START_TEST(t_bogus_inline)
{
	bogus_dup(false);
}
END_TEST
START_TEST(t_bogus_threaded)
{
	bogus_dup(true);
}
END_TEST

/* A duplicate CQE that arrives after its tracker was reused by the callback
 * names the old generation: dropped, the new command is not completed by it. */
struct chain {
	struct env *e;
	uint8_t *buf;
	unsigned done, left;
	int err;
};
static void chain_cb(void *arg, int err, uint16_t status)
{
	(void)status;
	struct chain *c = arg;
	c->done++;
	if (err)
		c->err = err;
	if (c->left) {
		c->left--;
		/* the freed tracker is at the head of the free list: reused at once */
		ck_assert_int_eq(nvme_qpair_read(c->e->qp, 1, 0, c->buf, 512, chain_cb, c), 0);
	}
}
START_TEST(t_duplicate_after_reuse)
{
	struct env e;
	struct sim_opts so = sim_defaults(false);
	env_open(&e, &so, 32, 4, 0);
	struct chain c = {.e = &e, .buf = nvme_reactor_buf_alloc(e.r, 4096), .left = 20};
	sim_fault_duplicate(e.sim, 20);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, c.buf, 512, chain_cb, &c), 0);
	for (int i = 0; i < 200 && (c.done < 21 || nvme_qpair_inflight(e.qp)); i++) {
		nvme_qpair_flush_sq(e.qp);
		nvme_qpair_reap(e.qp, 0);
	}
	ck_assert_uint_eq(c.done, 21);
	ck_assert_int_eq(c.err, 0);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	ck_assert_uint_eq(st.completed, 21);
	ck_assert_uint_eq(st.bogus_cqes, 20);
	struct sim_stats ss;
	sim_get_stats(e.sim, &ss);
	ck_assert_uint_eq(ss.reads, 21); /* each completion was for a command really run */
	env_close(&e);
}
END_TEST

/* ---- PRP lists: 4 KiB to 2 MiB at odd offsets ---- */
static void prp_sizes(bool threaded)
{
	struct env e;
	struct sim_opts so = sim_defaults(threaded);
	env_open(&e, &so, 64, 8, 0);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(e.c);
	ck_assert_uint_eq(in->max_xfer, 2u << 20);
	size_t cap = (4u << 20);
	uint8_t *w = nvme_reactor_buf_alloc(e.r, cap), *r = nvme_reactor_buf_alloc(e.r, cap);
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(r);
	static const size_t sizes[] = {4096, 8192, 12288, 65536, 1u << 20, 2u << 20};
	static const size_t offs[] = {0, 4, 512, 4092, 2048 + 512};
	uint32_t seed = 1;
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (unsigned j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
			size_t len = sizes[i], off = offs[j];
			fill(w + off, len, seed++);
			memset(r + off, 0xee, len);
			struct done d = {0};
			ck_assert_int_eq(
			    nvme_qpair_write(e.qp, 1, 2048, w + off, len, false, done_cb, &d), 0);
			drive(&e, &d, 1);
			ck_assert_int_eq(d.err, 0);
			ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 2048, r + off, len, done_cb, &d),
			                 0);
			drive(&e, &d, 2);
			ck_assert_int_eq(d.err, 0);
			ck_assert_msg(memcmp(w + off, r + off, len) == 0,
			              "data mismatch len %zu off %zu", len, off);
		}
	}
	struct sim_stats ss;
	sim_get_stats(e.sim, &ss);
	ck_assert_uint_eq(ss.dma_errors, 0);
	/* none of these exceeded max_xfer: one command each */
	ck_assert_uint_eq(ss.reads, 30);
	ck_assert_uint_eq(ss.writes, 30);
	env_close(&e);
}
START_TEST(t_prp_inline)
{
	prp_sizes(false);
}
END_TEST
START_TEST(t_prp_threaded)
{
	prp_sizes(true);
}
END_TEST

START_TEST(t_prp_build)
{
	uint64_t list[512], p1, p2;
	ck_assert_int_eq(nvme_prp_build(0x10000, 4096, list, 0x9000, &p1, &p2), 0);
	ck_assert_uint_eq(p1, 0x10000);
	ck_assert_uint_eq(p2, 0);
	ck_assert_int_eq(nvme_prp_build(0x10200, 4096, list, 0x9000, &p1, &p2), 0);
	ck_assert_uint_eq(p2, 0x11000); /* two pages touched: PRP2 is the page */
	ck_assert_int_eq(nvme_prp_build(0x10200, 3 * 4096, list, 0x9000, &p1, &p2), 0);
	ck_assert_uint_eq(p2, 0x9000); /* four pages: a list */
	ck_assert_uint_eq(list[0], 0x11000);
	ck_assert_uint_eq(list[2], 0x13000);
	ck_assert_int_eq(nvme_prp_build(0x10004, 2u << 20, list, 0x9000, &p1, &p2), 0);
	ck_assert_uint_eq(list[511], 0x10000 + 512ull * 4096);
	ck_assert_int_eq(nvme_prp_build(0x10002, 4096, list, 0x9000, &p1, &p2), -EINVAL);
	ck_assert_int_eq(nvme_prp_build(0x10004, (2u << 20) + 4096, list, 0x9000, &p1, &p2),
	                 -EINVAL);
}
END_TEST

/* ---- MDTS splitting ---- */
START_TEST(t_mdts_split)
{
	struct env e;
	struct sim_opts so = sim_defaults(_i & 1);
	so.mdts = 1; /* 8 KiB */
	env_open(&e, &so, 64, 8, 0);
	ck_assert_uint_eq(nvme_ctrl_get_info(e.c)->max_xfer, 8192);
	size_t len = 64u << 10;
	uint8_t *w = nvme_reactor_buf_alloc(e.r, len + 4096),
	        *r = nvme_reactor_buf_alloc(e.r, len + 4096);
	fill(w + 512, len, 99);
	struct sim_stats s0, s1;
	sim_get_stats(e.sim, &s0);
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 10, w + 512, len, false, done_cb, &d), 0);
	drive(&e, &d, 1);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 10, r + 512, len, done_cb, &d), 0);
	drive(&e, &d, 2);
	ck_assert_int_eq(d.err, 0);
	ck_assert_mem_eq(w + 512, r + 512, len);
	sim_get_stats(e.sim, &s1);
	ck_assert_uint_eq(s1.writes - s0.writes, 8); /* 64 KiB / 8 KiB */
	ck_assert_uint_eq(s1.reads - s0.reads, 8);
	ck_assert_uint_eq(s1.dma_errors, 0);
	/* one error among the children fails the parent once */
	sim_fault_fail_next(e.sim, 1, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	struct done d3 = {0};
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 10, r + 512, len, done_cb, &d3), 0);
	drive(&e, &d3, 1);
	for (int i = 0; i < 50; i++)
		nvme_qpair_reap(e.qp, 0);
	ck_assert_uint_eq(d3.count, 1);
	ck_assert_int_eq(d3.err, -EIO);
	ck_assert_uint_eq(nvme_qpair_inflight(e.qp), 0);
	env_close(&e);
}
END_TEST

/* ---- a range needing more commands than the queue has trackers ---- */
START_TEST(t_split_waves)
{
	struct env e;
	struct sim_opts so = sim_defaults(_i & 1);
	so.mdts = 1; /* 8 KiB */
	env_open(&e, &so, 16, 4, 0); /* at most 11 trackers */
	size_t len = 1u << 20;       /* 128 commands */
	uint8_t *w = nvme_reactor_buf_alloc(e.r, len), *r = nvme_reactor_buf_alloc(e.r, len);
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(r);
	fill(w, len, 7);
	memset(r, 0, len);
	struct sim_stats s0, s1;
	sim_get_stats(e.sim, &s0);
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 4, w, len, false, done_cb, &d), 0);
	drive(&e, &d, 1);
	ck_assert_int_eq(d.err, 0);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 4, r, len, done_cb, &d), 0);
	drive(&e, &d, 2);
	ck_assert_int_eq(d.err, 0);
	ck_assert_uint_eq(d.count, 2); /* one callback per request, not per command */
	ck_assert_mem_eq(w, r, len);
	sim_get_stats(e.sim, &s1);
	ck_assert_uint_eq(s1.writes - s0.writes, 128);
	ck_assert_uint_eq(s1.reads - s0.reads, 128);
	/* an error stops the waves: the request fails once, nothing stays in flight */
	sim_fault_fail_next(e.sim, 1, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT));
	struct done d3 = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 4, w, len, false, done_cb, &d3), 0);
	drive(&e, &d3, 1);
	for (int i = 0; i < 50; i++)
		nvme_qpair_reap(e.qp, 0);
	ck_assert_uint_eq(d3.count, 1);
	ck_assert_int_eq(d3.err, -EIO);
	ck_assert_uint_eq(nvme_qpair_inflight(e.qp), 0);
	sim_get_stats(e.sim, &s0);
	ck_assert_uint_lt(s0.writes - s1.writes, 128); /* the rest was never issued */
	env_close(&e);
}
END_TEST

/* ---- error statuses mapped to errno and counted by class ---- */
START_TEST(t_status_errno)
{
	struct env e;
	struct sim_opts so = sim_defaults(_i & 1);
	env_open(&e, &so, 32, 4, 0);
	uint8_t *buf = nvme_reactor_buf_alloc(e.r, 4096);
	static const struct {
		uint16_t status;
		int err;
		enum nvme_err_class cls;
	} cases[] = {
	    {NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR), -EIO, NVME_ERRC_MEDIA},
	    {NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE), -ENOSPC, NVME_ERRC_GENERIC},
	    {NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR, -EINVAL,
	     NVME_ERRC_GENERIC},
	    {NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_ACCESS_DENIED), -EACCES, NVME_ERRC_MEDIA},
	    {NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_ABORT_REQ), -ECANCELED, NVME_ERRC_GENERIC},
	    {NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, 0x80), -EIO, NVME_ERRC_CMD},
	};
	uint64_t want[NVME_ERRC_NR] = {0};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sim_fault_fail_next(e.sim, 1, cases[i].status);
		struct done d = {0};
		ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf, 512, done_cb, &d), 0);
		drive(&e, &d, 1);
		ck_assert_int_eq(d.err, cases[i].err);
		ck_assert_uint_eq(d.status, cases[i].status);
		ck_assert_int_eq(nvme_status_errno(cases[i].status), cases[i].err);
		ck_assert_str_ne(nvme_status_str(cases[i].status), "");
		want[cases[i].cls]++;
	}
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	for (unsigned c = 0; c < NVME_ERRC_NR; c++)
		ck_assert_uint_eq(st.errors[c], want[c]);
	/* and the queue still works */
	struct done ok = {0};
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf, 512, done_cb, &ok), 0);
	drive(&e, &ok, 1);
	ck_assert_int_eq(ok.err, 0);
	env_close(&e);
}
END_TEST

/* ---- bad input: clear errors, nothing submitted ---- */
START_TEST(t_bad_input)
{
	struct env e;
	struct sim_opts so = sim_defaults(false);
	env_open(&e, &so, 32, 4, 0);
	uint8_t *buf = nvme_reactor_buf_alloc(e.r, 8192);
	static uint8_t outside[8192] __attribute__((aligned(4096)));
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf, 100, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf, 0, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 2, 0, buf, 512, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, (1u << 16) - 1, buf, 1024, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, UINT64_MAX, buf, 512, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, outside, 512, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf + 2, 512, done_cb, &d), -EINVAL);
	ck_assert_int_eq(nvme_qpair_write_zeroes(e.qp, 1, 1u << 16, 1, false, done_cb, &d),
	                 -EINVAL);
	ck_assert_uint_eq(nvme_qpair_inflight(e.qp), 0);
	/* trackers exhausted: -EAGAIN, and the queue recovers */
	unsigned n = 0;
	int rc;
	while ((rc = nvme_qpair_read(e.qp, 1, 0, buf, 512, done_cb, &d)) == 0)
		n++;
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_uint_eq(n, 32 - 1 - 4);
	drive(&e, &d, n);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, buf, 512, done_cb, &d), 0);
	drive(&e, &d, n + 1);
	ck_assert_int_eq(d.err, 0);
	env_close(&e);
}
END_TEST

/* ---- flush, write zeroes, deallocate ---- */
START_TEST(t_other_cmds)
{
	struct env e;
	struct sim_opts so = sim_defaults(_i & 1);
	env_open(&e, &so, 32, 4, 0);
	uint8_t *w = nvme_reactor_buf_alloc(e.r, 8192), *r = nvme_reactor_buf_alloc(e.r, 8192);
	uint8_t zero[8192] = {0};
	memset(w, 0x5a, 8192);
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 0, w, 8192, true, done_cb, &d), 0);
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 16, w, 8192, false, done_cb, &d), 0);
	drive(&e, &d, 2);
	ck_assert_int_eq(nvme_qpair_flush(e.qp, 1, done_cb, &d), 0);
	drive(&e, &d, 3);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(e.c);
	if (in->oncs & NVME_ONCS_WRITE_ZEROES) {
		ck_assert_int_eq(nvme_qpair_write_zeroes(e.qp, 1, 0, 16, false, done_cb, &d), 0);
		drive(&e, &d, 4);
		ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, r, 8192, done_cb, &d), 0);
		drive(&e, &d, 5);
		ck_assert_mem_eq(r, zero, 8192);
	}
	if (in->oncs & NVME_ONCS_DSM) {
		unsigned base = d.count;
		ck_assert_int_eq(nvme_qpair_deallocate(e.qp, 1, 16, 16, done_cb, &d), 0);
		drive(&e, &d, base + 1);
		ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 16, r, 8192, done_cb, &d), 0);
		drive(&e, &d, base + 2);
		ck_assert_mem_eq(r, zero, 8192);
	}
	ck_assert_int_eq(d.err, 0);
	ck_assert(in->oncs & (NVME_ONCS_WRITE_ZEROES | NVME_ONCS_DSM));
	env_close(&e);
}
END_TEST

/* ---- timeouts: a lost completion or a hung device is recovered by an
 * Abort and a controller reset; the commands are sent again and succeed ---- */
struct tmo_ctx {
	struct env *e;
	uint8_t *buf;
	struct done d;
	bool submitted;
	unsigned want;
	bool hang;
};

static void tmo_hook(void *arg)
{
	struct tmo_ctx *t = arg;
	if (!t->submitted) {
		t->submitted = true;
		if (t->hang)
			sim_fault_hang(t->e->sim, true);
		else
			sim_fault_lose_next(t->e->sim, 1);
		ck_assert_int_eq(nvme_qpair_read(t->e->qp, 1, 0, t->buf, 512, done_cb, &t->d), 0);
		ck_assert_int_eq(
		    nvme_qpair_read(t->e->qp, 1, 8, t->buf + 4096, 512, done_cb, &t->d), 0);
		nvme_reactor_stop(t->e->r); /* ends once nothing is in flight */
	}
	if (!t->e->threaded)
		sim_poll(t->e->sim);
}

static void timeout_case(bool threaded, bool hang)
{
	struct env e;
	struct sim_opts so = sim_defaults(threaded);
	/* a resent command that a busy machine (valgrind, other load) keeps
	 * past the timeout times out again: a second, and enough retries that
	 * only a device that never answers fails it (100 ms and 10 retries
	 * failed under ThreadSanitizer and ASan on a machine loaded 9 times
	 * over) */
	env_open_retries(&e, &so, 32, 4, 1000, 10);
	struct tmo_ctx t = {.e = &e, .buf = nvme_reactor_buf_alloc(e.r, 8192), .hang = hang};
	nvme_reactor_set_pass_hook(e.r, tmo_hook, &t);
	uint64_t t0 = nvme_now_ns();
	ck_assert_int_eq(nvme_reactor_run(e.r), 0);
	uint64_t ms = (nvme_now_ns() - t0) / 1000000;
	ck_assert_uint_eq(t.d.count, 2);
	ck_assert_int_eq(t.d.err, 0); /* recovered: resubmitted after the reset */
	ck_assert_uint_lt(ms, 20000); /* bounded: never a hang */
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(e.qp, &st);
	ck_assert_uint_ge(st.timeouts, 1);
	ck_assert_uint_ge(st.resubmitted, 1);
	/* the admin thread ends the reset after the reactor resent the commands */
	for (int i = 0; i < 20000 && nvme_ctrl_state(e.c) != NVME_CTRL_LIVE; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(nvme_ctrl_state(e.c), NVME_CTRL_LIVE);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(e.c, &rs);
	ck_assert_uint_ge(rs.resets_ok, 1);
	ck_assert_uint_eq(rs.resets_failed, 0);
	/* the queue still serves I/O */
	struct done ok = {0};
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 0, t.buf, 512, done_cb, &ok), 0);
	drive(&e, &ok, 1);
	ck_assert_int_eq(ok.err, 0);
	env_close(&e);
}
START_TEST(t_timeout_lost)
{
	timeout_case(_i & 1, false);
}
END_TEST
START_TEST(t_timeout_hang)
{
	timeout_case(_i & 1, true);
}
END_TEST

/* ---- reset: a command in flight is sent again and completes ---- */
struct rst_ctx {
	struct env *e;
	struct done *lost;
};

static void rst_hook(void *arg)
{
	struct rst_ctx *t = arg;
	if (!t->e->threaded)
		sim_poll(t->e->sim);
	if (t->lost->count == 1 && nvme_ctrl_state(t->e->c) == NVME_CTRL_LIVE)
		nvme_reactor_stop(t->e->r);
}

START_TEST(t_reset_resubmit)
{
	struct env e;
	struct sim_opts so = sim_defaults(_i & 1);
	env_open(&e, &so, 32, 4, 0);
	uint8_t *w = nvme_reactor_buf_alloc(e.r, 4096), *r = nvme_reactor_buf_alloc(e.r, 4096);
	fill(w, 4096, 3);
	struct done d = {0};
	ck_assert_int_eq(nvme_qpair_write(e.qp, 1, 64, w, 4096, false, done_cb, &d), 0);
	drive(&e, &d, 1);
	/* a command lost in flight, then a reset: it is sent again */
	sim_fault_lose_next(e.sim, 1);
	struct done lost = {0};
	memset(r, 0, 4096);
	ck_assert_int_eq(nvme_qpair_read(e.qp, 1, 64, r, 4096, done_cb, &lost), 0);
	nvme_qpair_flush_sq(e.qp);
	ck_assert_int_eq(nvme_ctrl_reset_async(e.c, "test"), 0);
	ck_assert_int_eq(nvme_ctrl_reset_async(e.c, "test"), -EBUSY);
	struct rst_ctx t = {.e = &e, .lost = &lost};
	nvme_reactor_set_pass_hook(e.r, rst_hook, &t);
	ck_assert_int_eq(nvme_reactor_run(e.r), 0);
	ck_assert_uint_eq(lost.count, 1);
	ck_assert_int_eq(lost.err, 0);
	ck_assert_mem_eq(w, r, 4096);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(e.c, &rs);
	ck_assert_uint_eq(rs.resets_started, 1);
	ck_assert_uint_eq(rs.resets_ok, 1);
	ck_assert_uint_eq(rs.resubmitted, 1);
	env_close(&e);
}
END_TEST

/* ---- the hot cache line ---- */
START_TEST(t_layout)
{
	ck_assert_uint_le(offsetof(struct nvme_qpair, qid), 64);
	ck_assert_uint_eq(_Alignof(struct nvme_qpair), 64);
	ck_assert_uint_lt(offsetof(struct nvme_qpair, sq_dirty), 64);
	ck_assert_uint_eq(offsetof(struct nvme_qpair, st) % 64, 0);
}
END_TEST

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	Suite *s = suite_create("qpair");
	TCase *tc = tcase_create("qpair");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_layout);
	tcase_add_test(tc, t_prp_build);
	tcase_add_test(tc, t_phase_inline);
	tcase_add_test(tc, t_phase_threaded);
	tcase_add_test(tc, t_doorbell_batching);
	tcase_add_test(tc, t_bogus_inline);
	tcase_add_test(tc, t_bogus_threaded);
	tcase_add_test(tc, t_duplicate_after_reuse);
	tcase_add_test(tc, t_prp_inline);
	tcase_add_test(tc, t_prp_threaded);
	tcase_add_loop_test(tc, t_mdts_split, 0, 2);
	tcase_add_loop_test(tc, t_split_waves, 0, 2);
	tcase_add_loop_test(tc, t_status_errno, 0, 2);
	tcase_add_test(tc, t_bad_input);
	tcase_add_loop_test(tc, t_other_cmds, 0, 2);
	tcase_add_loop_test(tc, t_timeout_lost, 0, 2);
	tcase_add_loop_test(tc, t_timeout_hang, 0, 2);
	tcase_add_loop_test(tc, t_reset_resubmit, 0, 2);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* test_recovery.c - a slow, failing or vanished controller never hangs the
 * engine and never corrupts data.  Reactors run on their own threads against
 * the software controller; faults are injected in the device model.  Every
 * wait has a generous deadline that only detects a hang; nothing asserts a
 * duration (durations are printed, for the record).  io_timeout_ms is a
 * second or more wherever a command the device does not hold must not time
 * out: a busy machine (a sanitizer, the other lanes of the CI) delays the
 * device thread by a good part of 200 ms. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

#define HANG_MS 30000
#define NBUF    RIG_NBUF
#define BUFSZ   RIG_BUFSZ

struct rec_opts {
	unsigned reactors;
	unsigned timeout_ms;
	unsigned retries;
	bool threaded;
	unsigned ready_delay_ms;
	enum nvme_poll_mode mode; /* poll unless said */
	bool interrupts;
	unsigned retry_ms; /* first retry of a failed bring-up (0: the engine's 1 s) */
	_Atomic bool *shrink_ns1; /* when set: Identify reports namespace 1 smaller */
	bool vwc;                 /* a volatile write cache (sim_opts.vwc) */
	/* namespace 1: 16 bytes of separate metadata with PI Type 1 in 8 of
	 * them, so that its commands carry MPTR (the queue's metadata buffer) */
	bool md;
};

static uint16_t shrink_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	_Atomic bool *on = arg;
	if ((cmd->cdw10 & 0xff) == NVME_ID_CNS_NS && cmd->nsid == 1 && atomic_load(on)) {
		struct nvme_id_ns *id = data;
		id->nsze = id->ncap = id->nuse = id->nsze / 2;
	}
	return status;
}

/* The shared rig (tests/support/rig.h): one software controller "rec" with
 * two RAM namespaces (512 B blocks, 4 KiB blocks), its qpairs on o->reactors
 * started reactors. */
static void rig_open_rec(struct rig *g, const struct rec_opts *o)
{
	struct rig_opts ro = {.nr_reactors = o->reactors, .mode = o->mode, .start = true};
	struct sim_opts *so = &ro.sim[0];
	so->name = "rec";
	so->threaded = o->threaded;
	so->ready_delay_ms = o->ready_delay_ms;
	so->nr_ns = 2;
	so->vwc = o->vwc;
	if (o->shrink_ns1) {
		so->identify_hook = shrink_hook;
		so->hook_arg = o->shrink_ns1;
	}
	so->ns[0] =
	    (struct sim_ns_opts){.nlba = 1u << 16, .lba_size = 512, .backing = SIM_BACKING_RAM};
	if (o->md) {
		so->ns[0].ms = 16;
		so->ns[0].pi_type = 1;
	}
	so->ns[1] =
	    (struct sim_ns_opts){.nlba = 1u << 12, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	ro.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 32,
	                                     .cq_budget = 4,
	                                     .io_timeout_ms = o->timeout_ms,
	                                     .io_retries = o->retries,
	                                     .retry_ms = o->retry_ms,
	                                     .interrupts = o->interrupts};
	ck_assert_int_eq(rig_open(g, &ro), 0);
	/* only interrupt mode wires a vector (hybrid polls while in flight) */
	if (o->interrupts && o->mode == NVME_MODE_INTERRUPT)
		for (unsigned i = 0; i < g->nr_reactors; i++)
			ck_assert_int_ge(nvme_qpair_vector(g->qp[i][0]), 1);
}

static uint64_t ms_since(uint64_t t0)
{
	return (nvme_now_ns() - t0) / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		uint64_t t0_ = nvme_now_ns();                                                      \
		while (!(cond)) {                                                                  \
			ck_assert_msg(ms_since(t0_) < HANG_MS, "hung waiting for " #cond);         \
			sleep_ms(1);                                                               \
		}                                                                                  \
	} while (0)

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = seed * 2246822519u ^ (uint32_t)(i * 2654435761u);
		memcpy(p + i, &v, 4);
	}
}

/* ---- one I/O, submitted on its reactor ---- */
struct io {
	struct rig *g;
	unsigned q;
	bool write;
	uint64_t lba;
	size_t len;
	uint8_t *buf;
	nvme_io_cb cb; /* NULL: io_done */
	int submit_rc;
	int err;
	uint64_t done_ns;
	_Atomic int done;
	_Atomic int submitted;
	enum nvme_ctrl_state state_at_submit;
};

static void io_done(void *arg, int err, uint16_t status)
{
	(void)status;
	struct io *io = arg;
	io->err = err;
	io->done_ns = nvme_now_ns();
	atomic_store(&io->done, 1);
}

static void io_submit_call(void *arg)
{
	struct io *io = arg;
	struct nvme_qpair *qp = io->g->qp[io->q][0];
	nvme_io_cb cb = io->cb ? io->cb : io_done;
	io->state_at_submit = nvme_ctrl_state(io->g->c[0]);
	io->submit_rc = io->write
	                    ? nvme_qpair_write(qp, 1, io->lba, io->buf, io->len, false, cb, io)
	                    : nvme_qpair_read(qp, 1, io->lba, io->buf, io->len, cb, io);
	if (io->submit_rc < 0) {
		io->err = io->submit_rc;
		atomic_store(&io->done, 1);
	}
	atomic_store(&io->submitted, 1);
}

/* Submit on reactor q and wait until submitted; cb NULL: io_done (the
 * callback's arg is io). */
static void io_start_cb(struct rig *g, struct io *io, unsigned q, bool write, uint64_t lba,
                        size_t len, uint8_t *buf, nvme_io_cb cb)
{
	memset(io, 0, sizeof(*io));
	io->cb = cb;
	io->g = g;
	io->q = q;
	io->write = write;
	io->lba = lba;
	io->len = len;
	io->buf = buf;
	ck_assert_int_eq(nvme_reactor_call(g->r[q], io_submit_call, io), 0);
	WAIT_FOR(atomic_load(&io->submitted));
}

static void io_start(struct rig *g, struct io *io, unsigned q, bool write, uint64_t lba, size_t len,
                     uint8_t *buf)
{
	io_start_cb(g, io, q, write, lba, len, buf, NULL);
}

static int io_wait(struct io *io)
{
	WAIT_FOR(atomic_load(&io->done));
	return io->err;
}

static int io_sync(struct rig *g, unsigned q, bool write, uint64_t lba, size_t len, uint8_t *buf)
{
	struct io io;
	io_start(g, &io, q, write, lba, len, buf);
	return io_wait(&io);
}

/* Wait until the device holds n stalled commands (fetched, not executed). */
static void wait_stalled(struct rig *g, uint64_t n)
{
	struct sim_stats ss;
	WAIT_FOR((sim_get_stats(g->sim[0], &ss), ss.stalled == n));
}

/* Write a pattern at lba through queue q (buffer 7 of that reactor). */
static void put_pattern(struct rig *g, unsigned q, uint64_t lba, size_t len, uint32_t seed)
{
	fill(g->buf[q][7], len, seed);
	ck_assert_int_eq(io_sync(g, q, true, lba, len, g->buf[q][7]), 0);
}

static void check_pattern(struct rig *g, unsigned q, uint64_t lba, size_t len, uint32_t seed)
{
	uint8_t *want = malloc(len);
	fill(want, len, seed);
	memset(g->buf[q][6], 0, len);
	ck_assert_int_eq(io_sync(g, q, false, lba, len, g->buf[q][6]), 0);
	ck_assert_mem_eq(g->buf[q][6], want, len);
	free(want);
}

/* ---- abort honoured: the command is sent again, no reset ---- */
START_TEST(t_abort_ok)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = 3,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 100, 4096, 11);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	uint64_t t0 = nvme_now_ns();
	io_start(&g, &io, 0, false, 100, 4096, g.buf[0][0]);
	ck_assert_int_eq(io_wait(&io), 0);
	printf("abort honoured: caller saw success after %llu ms (timeout 200 ms)\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	uint8_t want[4096];
	fill(want, 4096, 11);
	ck_assert_mem_eq(g.buf[0][0], want, 4096);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.timeouts, 1);
	ck_assert_uint_eq(rs.aborts_sent, 1);
	ck_assert_uint_eq(rs.aborts_ok, 1);
	ck_assert_uint_eq(rs.resubmitted, 1);
	ck_assert_uint_eq(rs.resets_started, 0);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(g.qp[0][0], &st);
	ck_assert_uint_eq(st.timeouts, 1);
	ck_assert_uint_eq(st.aborts_sent, 1);
	ck_assert_uint_eq(st.aborts_ok, 1);
	ck_assert_uint_eq(st.resubmitted, 1);
	rig_close(&g);
}
END_TEST

/* ---- a slow device: within the timeout nothing happens; beyond it, a
 * reset and the command sent again (the device is fast again after the
 * reset: success), or it stays slow (EIO after io_retries) ---- */
static void slow_cured(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	struct rig *g = arg;
	rig_state_cb(g->ev[0], c, s);
	if (s == NVME_CTRL_RESETTING)
		sim_fault_delay(g->sim[0], 0);
}

START_TEST(t_slow_device)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = 2,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 600, 4096, 55);
	/* slow but in time (a tenth of the timeout: a busy machine's
	 * scheduling delays fit in the rest) */
	sim_fault_delay(g.sim[0], 100000);
	check_pattern(&g, 0, 600, 4096, 55);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.timeouts, 0);
	/* too slow, cured by the reset */
	nvme_ctrl_set_event_cb(g.c[0], slow_cured, &g);
	sim_fault_delay(g.sim[0], 5000000);
	struct io io;
	uint64_t t0 = nvme_now_ns();
	io_start(&g, &io, 0, false, 600, 4096, g.buf[0][0]);
	ck_assert_int_eq(io_wait(&io), 0);
	printf("slow device (5 s per command, timeout 1 s), fast after a reset: caller saw "
	       "success after %llu ms\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	uint8_t want[4096];
	fill(want, 4096, 55);
	ck_assert_mem_eq(g.buf[0][0], want, 4096);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	/* too slow for good: every try times out */
	nvme_ctrl_set_event_cb(g.c[0], rig_state_cb, g.ev[0]);
	sim_fault_delay(g.sim[0], 5000000);
	t0 = nvme_now_ns();
	io_start(&g, &io, 0, false, 600, 4096, g.buf[0][0]);
	ck_assert_int_eq(io_wait(&io), -EIO);
	printf("slow device for good: caller saw EIO after %llu ms (%u retries)\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000), o.retries);
	sim_fault_delay(g.sim[0], 0);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.failed_after_retries, 1);
	ck_assert_uint_eq(rs.resets_failed, 0);
	put_pattern(&g, 0, 700, 4096, 56);
	check_pattern(&g, 0, 700, 4096, 56);
	rig_close(&g);
}
END_TEST

/* ---- abort ignored: reset, resubmitted, the right data ---- */
START_TEST(t_abort_ignored_reset)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = 3,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 200, 8192, 22);
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	uint64_t t0 = nvme_now_ns();
	io_start(&g, &io, 0, false, 200, 8192, g.buf[0][0]);
	ck_assert_int_eq(io_wait(&io), 0);
	printf("abort ignored: caller saw success after %llu ms (reset, resubmitted)\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	uint8_t want[8192];
	fill(want, 8192, 22);
	ck_assert_mem_eq(g.buf[0][0], want, 8192);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.aborts_ok, 0);
	ck_assert_uint_eq(rs.resets_started, 1);
	ck_assert_uint_eq(rs.resets_ok, 1);
	ck_assert_uint_eq(rs.resubmitted, 1);
	ck_assert_uint_gt(rs.reset_last_ns, 0);
	ck_assert_uint_ge(rs.reset_max_ns, rs.reset_last_ns);
	printf("abort ignored: the reset itself took %.1f ms\n", rs.reset_last_ns / 1e6);
	/* the state is stored before its event is emitted: wait for the event */
	WAIT_FOR(atomic_load(&g.ev[0][NVME_CTRL_LIVE]) >= 1);
	ck_assert_uint_ge(atomic_load(&g.ev[0][NVME_CTRL_RESETTING]), 1);
	/* I/O goes on */
	put_pattern(&g, 0, 300, 4096, 23);
	check_pattern(&g, 0, 300, 4096, 23);
	rig_close(&g);
}
END_TEST

/* ---- the same, in interrupt and hybrid mode: after the reset the queues
 * come back as they were, with their vectors in interrupt mode (the resent
 * commands complete by interrupt), without any in hybrid mode, which polls
 * while a command is in flight */
START_TEST(t_reset_irq_modes)
{
	struct rig g;
	struct rec_opts o = {.reactors = 2,
	                     .timeout_ms = 1000,
	                     .retries = 3,
	                     .threaded = true,
	                     .interrupts = true,
	                     .mode = _i ? NVME_MODE_HYBRID : NVME_MODE_INTERRUPT};
	rig_open_rec(&g, &o);
	for (unsigned q = 0; q < 2; q++)
		put_pattern(&g, q, 4000 + q * 16, 4096, 200 + q);
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io[2];
	io_start(&g, &io[0], 0, false, 4000, 4096, g.buf[0][0]);
	io_start(&g, &io[1], 1, false, 4016, 4096, g.buf[1][0]);
	for (unsigned q = 0; q < 2; q++) {
		ck_assert_int_eq(io_wait(&io[q]), 0);
		uint8_t want[4096];
		fill(want, 4096, 200 + q);
		ck_assert_mem_eq(g.buf[q][0], want, 4096);
	}
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.resets_ok, 1);
	for (unsigned q = 0; q < 2; q++) {
		put_pattern(&g, q, 4100 + q * 16, 4096, 210 + q);
		check_pattern(&g, q, 4100 + q * 16, 4096, 210 + q);
		struct nvme_qpair_stats st;
		nvme_qpair_stats_get(g.qp[q][0], &st);
		if (o.mode == NVME_MODE_INTERRUPT) {
			ck_assert_int_ge(g.qp[q][0]->efd, 0);
			ck_assert_uint_gt(st.interrupts, 0);
		} else {
			ck_assert_int_lt(g.qp[q][0]->efd, 0);
			ck_assert_uint_eq(st.interrupts, 0);
		}
	}
	rig_close(&g);
}
END_TEST

/* ---- a namespace that changed size across a reset fails its I/O ---- */
static void ns2_read_call(void *arg)
{
	struct io *io = arg;
	io->submit_rc = nvme_qpair_read(io->g->qp[0][0], 2, 0, io->buf, 4096, io_done, io);
	if (io->submit_rc < 0) {
		io->err = io->submit_rc;
		atomic_store(&io->done, 1);
	}
	atomic_store(&io->submitted, 1);
}

START_TEST(t_ns_changed)
{
	struct rig g;
	_Atomic bool shrink = false;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = _i & 1,
	                     .shrink_ns1 = &shrink};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 0, 4096, 1);
	atomic_store(&shrink, true);
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
	ck_assert(nvme_ctrl_get_info(g.c[0])->ns[0].failed);
	ck_assert(!nvme_ctrl_get_info(g.c[0])->ns[1].failed);
	ck_assert_int_eq(io_sync(&g, 0, false, 0, 4096, g.buf[0][0]), -EIO);
	/* the other namespace is unaffected */
	struct io io;
	memset(&io, 0, sizeof(io));
	io.g = &g;
	io.buf = g.buf[0][1];
	ck_assert_int_eq(nvme_reactor_call(g.r[0], ns2_read_call, &io), 0);
	ck_assert_int_eq(io_wait(&io), 0);
	rig_close(&g);
}
END_TEST

/* ---- retries used up: -EIO, after the disable ---- */
START_TEST(t_retries_exhausted)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = 1,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_stall_next(g.sim[0], 2); /* the first try and its one retry stall */
	struct io io;
	uint64_t t0 = nvme_now_ns();
	io_start(&g, &io, 0, false, 0, 4096, g.buf[0][0]);
	ck_assert_int_eq(io_wait(&io), -EIO);
	printf("retries used up: caller saw EIO after %llu ms (2 resets)\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.resets_ok, 2);
	ck_assert_uint_eq(rs.resubmitted, 1);
	ck_assert_uint_eq(rs.failed_after_retries, 1);
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(g.qp[0][0], &st);
	ck_assert_uint_eq(st.failed_after_retries, 1);
	/* the controller serves I/O again */
	put_pattern(&g, 0, 64, 4096, 5);
	check_pattern(&g, 0, 64, 4096, 5);
	rig_close(&g);
}
END_TEST

/* ---- CSTS.CFS: reset, the command in flight completes, I/O works ---- */
START_TEST(t_cfs)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 400, 4096, 33);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	io_start(&g, &io, 0, false, 400, 4096, g.buf[0][0]);
	wait_stalled(&g, 1);
	uint64_t t0 = nvme_now_ns();
	sim_fault_cfs(g.sim[0]);
	ck_assert_int_eq(io_wait(&io), 0);
	printf("CFS: in-flight read succeeded %llu ms after the fault (reset, resubmitted)\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	uint8_t want[4096];
	fill(want, 4096, 33);
	ck_assert_mem_eq(g.buf[0][0], want, 4096);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.cfs_events, 1);
	ck_assert_uint_eq(rs.resets_ok, 1);
	ck_assert_uint_eq(rs.timeouts, 0); /* found by the health check, not a timeout */
	put_pattern(&g, 0, 500, 4096, 34);
	check_pattern(&g, 0, 500, 4096, 34);
	rig_close(&g);
}
END_TEST

/* ---- submissions during a reset are held, then complete ---- */
START_TEST(t_held_during_reset)
{
	struct rig g;
	/* enabling takes 400 ms: the reset lasts at least that long */
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true,
	                     .ready_delay_ms = 400};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 0, 4096, 44);
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), 0);
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), -EBUSY);
	fill(g.buf[0][1], 4096, 45);
	struct io w, r;
	io_start(&g, &w, 0, true, 8, 4096, g.buf[0][1]);
	io_start(&g, &r, 0, false, 0, 4096, g.buf[0][2]);
	ck_assert_int_eq(w.submit_rc, 0); /* accepted, not -EAGAIN */
	ck_assert_int_eq(r.submit_rc, 0);
	ck_assert_int_eq(w.state_at_submit, NVME_CTRL_RESETTING);
	ck_assert_int_eq(io_wait(&w), 0);
	ck_assert_int_eq(io_wait(&r), 0);
	uint8_t want[4096];
	fill(want, 4096, 44);
	ck_assert_mem_eq(g.buf[0][2], want, 4096);
	check_pattern(&g, 0, 8, 4096, 45);
	/* held commands are released before the state turns LIVE, as Linux
	 * unquiesces its queues before it does */
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	rig_close(&g);
}
END_TEST

/* ---- a reset that outlasts io_timeout_ms fails held submissions ---- */
START_TEST(t_held_too_long)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = 3,
	                     .threaded = true,
	                     .ready_delay_ms = 5000};
	rig_open_rec(&g, &o);
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), 0);
	/* the state is RESETTING, but the queue is held only once the reset
	 * thread gets to it: a read that reaches the device first stalls there,
	 * is taken off at the disable and held like the others */
	sim_fault_stall_next(g.sim[0], 1);
	struct io r;
	io_start(&g, &r, 0, false, 0, 4096, g.buf[0][2]);
	ck_assert_int_eq(r.submit_rc, 0);
	ck_assert_int_eq(io_wait(&r), -EIO);
	sim_fault_stall_next(g.sim[0], 0);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_RESETTING);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	put_pattern(&g, 0, 0, 4096, 46);
	check_pattern(&g, 0, 0, 4096, 46);
	rig_close(&g);
}
END_TEST

/* ---- the buffer invariant: the stale-read corruption is impossible ----
 * A read of block X stalls on the device.  Its caller reuses the buffer in
 * its completion callback: fills it with new data and writes it to block Y.
 * Before that callback, the device "finishes late" (the stalled read is
 * executed now, if the device still has it).  Had the callback run at the
 * timeout while the read was still on the device (the old behaviour), the
 * late read would overwrite the new data and block Y would get X's stale
 * data.  Now the callback runs only after the disable dropped the read. */
struct inv {
	struct rig *g;
	uint8_t *a;
	int read_err;
	uint64_t resets_at_cb;
	uint64_t stalled_at_cb;
	int released;
	struct io w;
	_Atomic int done;
};

static void inv_write_done(void *arg, int err, uint16_t status)
{
	(void)status;
	struct inv *v = arg;
	v->w.err = err;
	atomic_store(&v->done, 1);
}

static void inv_read_done(void *arg, int err, uint16_t status)
{
	(void)status;
	struct inv *v = arg;
	struct sim_stats ss;
	sim_get_stats(v->g->sim[0], &ss);
	v->read_err = err;
	v->resets_at_cb = ss.resets;
	v->stalled_at_cb = ss.stalled;
	fill(v->a, 4096, 77);                               /* the buffer is ours again: reuse it */
	v->released = sim_fault_release_stalled(v->g->sim[0]); /* the device finishing late */
	int rc = nvme_qpair_write(v->g->qp[0][0], 1, 900, v->a, 4096, false, inv_write_done, v);
	if (rc < 0) {
		v->w.err = rc;
		atomic_store(&v->done, 1);
	}
}

static void inv_submit_call(void *arg)
{
	struct inv *v = arg;
	int rc = nvme_qpair_read(v->g->qp[0][0], 1, 800, v->a, 4096, inv_read_done, v);
	ck_assert_int_eq(rc, 0);
}

START_TEST(t_buffer_invariant)
{
	struct rig g;
	unsigned retries = _i & 1 ? 0 : 3; /* the read fails with EIO, or is resubmitted */
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000,
	                     .retries = retries,
	                     .threaded = (_i & 2) != 0};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 800, 4096, 66); /* X: the stale data */
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_stall_next(g.sim[0], 1);
	struct inv v = {.g = &g, .a = g.buf[0][0]};
	ck_assert_int_eq(nvme_reactor_call(g.r[0], inv_submit_call, &v), 0);
	WAIT_FOR(atomic_load(&v.done));
	ck_assert_int_eq(v.read_err, retries ? 0 : -EIO);
	ck_assert_uint_ge(v.resets_at_cb, 1); /* the callback ran after the disable */
	ck_assert_uint_eq(v.stalled_at_cb, 0);
	ck_assert_int_eq(v.released, 0); /* nothing left on the device to finish late */
	ck_assert_int_eq(v.w.err, 0);
	check_pattern(&g, 0, 900, 4096, 77); /* Y has the new data, not X's */
	rig_close(&g);
}
END_TEST

/* ---- removal: in-flight EIO, new -ENODEV, release, re-attach, data kept ---- */
START_TEST(t_removal_reattach)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 1000, 8192, 88);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	io_start(&g, &io, 0, false, 1000, 4096, g.buf[0][0]);
	wait_stalled(&g, 1);
	uint64_t t0 = nvme_now_ns();
	sim_fault_remove(g.sim[0]);
	ck_assert_int_eq(io_wait(&io), -EIO);
	printf("removal: in-flight read failed with EIO %llu ms after the device vanished\n",
	       (unsigned long long)((io.done_ns - t0) / 1000000));
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_REMOVED);
	WAIT_FOR(atomic_load(&g.ev[0][NVME_CTRL_REMOVED]) == 1);
	struct io late;
	io_start(&g, &late, 0, false, 1000, 4096, g.buf[0][1]);
	ck_assert_int_eq(late.submit_rc, -ENODEV);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.removals, 1);
	struct nvme_bus *bus = NULL;
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &bus), 0);
	ck_assert_ptr_eq(bus, sim_bus(g.sim[0]));
	ck_assert_ptr_null(nvme_ctrl_bus(g.c[0]));
	struct nvme_bus *again = (struct nvme_bus *)1;
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &again), 0);
	ck_assert_ptr_null(again);
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.removals, 1); /* counted once */
	/* the device comes back: same sim, same data */
	sim_fault_clear(g.sim[0]);
	t0 = nvme_now_ns();
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], bus), 0);
	printf("re-attach took %llu ms\n", (unsigned long long)ms_since(t0));
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_LIVE);
	ck_assert_ptr_eq(nvme_ctrl_bus(g.c[0]), bus);
	check_pattern(&g, 0, 1000, 8192, 88);
	put_pattern(&g, 0, 1100, 4096, 89);
	check_pattern(&g, 0, 1100, 4096, 89);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], bus), -EBUSY);
	rig_close(&g);
}
END_TEST

/* ---- removal requested while the device still answers: it is disabled
 * first, then its commands fail; a controller with different namespaces is
 * not re-attached ---- */
START_TEST(t_remove_live)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	io_start(&g, &io, 0, false, 0, 4096, g.buf[0][0]);
	wait_stalled(&g, 1);
	struct nvme_bus *bus = NULL;
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &bus), 0);
	ck_assert_ptr_nonnull(bus);
	ck_assert_int_eq(io_wait(&io), -EIO);
	struct sim_stats ss;
	sim_get_stats(g.sim[0], &ss);
	ck_assert_uint_ge(ss.resets, 1); /* disabled before the command was failed */
	ck_assert_uint_eq(ss.stalled, 0);
	/* a different controller on the bus: refused, the caller keeps the bus */
	struct sim_opts so = {.name = "other", .nr_ns = 1};
	so.ns[0] =
	    (struct sim_ns_opts){.nlba = 1u << 10, .lba_size = 512, .backing = SIM_BACKING_RAM};
	struct sim *other;
	ck_assert_int_eq(sim_create(&so, &other), 0);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], sim_bus(other)), -ESTALE);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_REMOVED);
	sim_destroy(other);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], bus), 0);
	put_pattern(&g, 0, 0, 4096, 90);
	check_pattern(&g, 0, 0, 4096, 90);
	rig_close(&g);
}
END_TEST

/* ---- a detach shuts a live controller down in order (CC.SHN) before it
 * is removed: what sat in its volatile cache survives a power cut while
 * detached; a removal only disables, and the same cut loses it ---- */
START_TEST(t_detach_shutdown)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true,
	                     .vwc = true};
	rig_open_rec(&g, &o);
	struct sim_stats ss;
	put_pattern(&g, 0, 300, 8192, 41); /* written, never flushed */
	sim_get_stats(g.sim[0], &ss);
	ck_assert_uint_gt(ss.wc_dirty_blocks, 0);
	uint64_t shn0 = ss.shutdowns, rst0 = ss.resets;
	struct nvme_bus *bus = NULL;
	ck_assert_int_eq(nvme_ctrl_detach(g.c[0], "test", &bus), 0);
	ck_assert_ptr_eq(bus, sim_bus(g.sim[0]));
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_REMOVED);
	sim_get_stats(g.sim[0], &ss);
	ck_assert_uint_eq(ss.shutdowns, shn0 + 1);
	ck_assert_uint_gt(ss.resets, rst0); /* then disabled */
	ck_assert_uint_eq(ss.wc_dirty_blocks, 0);
	ck_assert_int_eq(sim_fault_powerfail(g.sim[0], 0), 0);
	ck_assert_int_eq(sim_power_on(g.sim[0]), 0);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], bus), 0);
	check_pattern(&g, 0, 300, 8192, 41);

	/* the same with a removal: no shutdown, the cut takes the cache */
	put_pattern(&g, 0, 300, 8192, 42);
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &bus), 0);
	sim_get_stats(g.sim[0], &ss);
	ck_assert_uint_eq(ss.shutdowns, shn0 + 1);
	ck_assert_uint_gt(ss.wc_dirty_blocks, 0);
	ck_assert_int_eq(sim_fault_powerfail(g.sim[0], 0), 0);
	ck_assert_int_eq(sim_power_on(g.sim[0]), 0);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], bus), 0);
	check_pattern(&g, 0, 300, 8192, 41);

	/* a controller that is not LIVE is not told: removed, then detached */
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &bus), 0);
	ck_assert_int_eq(nvme_ctrl_detach(g.c[0], "test", &bus), 0);
	ck_assert_ptr_null(bus);
	sim_get_stats(g.sim[0], &ss);
	ck_assert_uint_eq(ss.shutdowns, shn0 + 1);
	ck_assert_int_eq(nvme_ctrl_attach(g.c[0], sim_bus(g.sim[0])), 0);
	rig_close(&g);
}
END_TEST

/* ---- a reset that fails: FAILED, in-flight EIO, new -ENODEV ---- */
START_TEST(t_reset_fails)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	io_start(&g, &io, 0, false, 0, 4096, g.buf[0][0]);
	wait_stalled(&g, 1);
	sim_fault_never_ready(g.sim[0], true);
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), -EIO);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_FAILED);
	ck_assert_int_eq(io_wait(&io), -EIO);
	struct io late;
	io_start(&g, &late, 0, false, 0, 4096, g.buf[0][1]);
	ck_assert_int_eq(late.submit_rc, -ENODEV);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.resets_failed, 1);
	WAIT_FOR(atomic_load(&g.ev[0][NVME_CTRL_FAILED]) >= 1);
	rig_close(&g);
}
END_TEST

/* ---- two reactors, two queues on one controller, resetting together ---- */
#define TWO_IOS 24
START_TEST(t_two_reactors)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 2,
	                     .timeout_ms = 1000,
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	for (unsigned q = 0; q < 2; q++)
		put_pattern(&g, q, 2000 + q * 100, 4096, 100 + q);
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_stall_next(g.sim[0], 2); /* one stalled read on each queue */
	struct io st[2];
	for (unsigned q = 0; q < 2; q++)
		io_start(&g, &st[q], q, false, 2000 + q * 100, 4096, g.buf[q][0]);
	/* more traffic on both queues while they time out and reset */
	static struct io more[2][TWO_IOS];
	for (unsigned k = 0; k < TWO_IOS; k++)
		for (unsigned q = 0; q < 2; q++) {
			uint8_t *b = g.buf[q][1 + k % 5];
			fill(b, 4096, 1000 + q * TWO_IOS + k);
			io_start(&g, &more[q][k], q, true, 3000 + (q * TWO_IOS + k) * 8, 4096, b);
			io_wait(&more[q][k]);
		}
	for (unsigned q = 0; q < 2; q++) {
		ck_assert_int_eq(io_wait(&st[q]), 0);
		uint8_t want[4096];
		fill(want, 4096, 100 + q);
		ck_assert_mem_eq(g.buf[q][0], want, 4096);
		for (unsigned k = 0; k < TWO_IOS; k++)
			ck_assert_int_eq(more[q][k].err, 0);
	}
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	for (unsigned q = 0; q < 2; q++)
		for (unsigned k = 0; k < TWO_IOS; k++)
			check_pattern(&g, q, 3000 + (q * TWO_IOS + k) * 8, 4096,
			              1000 + q * TWO_IOS + k);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_ge(rs.resets_ok, 1);
	ck_assert_uint_eq(rs.resets_failed, 0);
	ck_assert_uint_ge(rs.resubmitted, 2);
	rig_close(&g);
}
END_TEST

/* ---- asynchronous admin commands ---- */
struct adm {
	_Atomic int done;
	int err;
	pthread_t thread;
	struct nvme_cqe cqe;
};

static void adm_cb(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct adm *a = arg;
	a->err = err;
	a->thread = pthread_self();
	if (cqe)
		a->cqe = *cqe;
	atomic_store(&a->done, 1);
}

START_TEST(t_admin_async)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = _i & 1};
	rig_open_rec(&g, &o);
	struct nvme_id_ctrl *id = calloc(1, sizeof(*id));
	struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
	struct adm a = {0};
	ck_assert_int_eq(nvme_ctrl_admin_async(g.c[0], &cmd, id, sizeof(*id), adm_cb, &a), 0);
	WAIT_FOR(atomic_load(&a.done));
	ck_assert_int_eq(a.err, 0);
	ck_assert(!pthread_equal(a.thread, pthread_self())); /* reaped by the engine */
	ck_assert_int_eq(memcmp(id->mn, "nvmefs software controller", 26), 0);
	/* a command the device never answers: -ETIMEDOUT to the caller, but
	 * its slot (and bounce buffer) stays until the reset's disable */
	sim_fault_hang(g.sim[0], true);
	struct adm b = {0};
	uint64_t t0 = nvme_now_ns();
	ck_assert_int_eq(nvme_ctrl_admin_async(g.c[0], &cmd, id, sizeof(*id), adm_cb, &b), 0);
	WAIT_FOR(atomic_load(&b.done));
	ck_assert_int_eq(b.err, -ETIMEDOUT);
	printf("admin timeout reported after %llu ms\n", (unsigned long long)ms_since(t0));
	/* the admin timeout resets the controller (which ends the sim's hang) */
	/* (the Asynchronous Event Requests armed again stay outstanding) */
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE &&
	         atomic_load(&g.c[0]->admin_outstanding) == atomic_load(&g.c[0]->aers_armed));
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_ge(rs.resets_ok, 1);
	ck_assert_int_eq(nvme_ctrl_admin(g.c[0], &cmd, id, sizeof(*id), NULL), 0);
	free(id);
	rig_close(&g);
}
END_TEST


/* ==== the review items: each of these failed on the engine before its
 * recovery module (recovery.c) ==== */

/* ---- a controller that will not disable (CC.EN = 0 and the function reset
 * both ignored): the commands on it are answered (EIO) only once it is cut
 * off from memory -- bus mastering off, mappings removed --, the reactor
 * can stop, and once the device behaves again a retry brings it back.
 * Before: the commands stayed in flight for good and the join hung. ---- */
struct cut_io {
	struct io io;
	_Atomic int bme_at_cb; /* 1: the device could still do DMA at the callback */
	struct sim *sim;
};

static void cut_done(void *arg, int err, uint16_t status)
{
	struct cut_io *c = arg;
	atomic_store(&c->bme_at_cb, sim_bus_master_on(c->sim) ? 1 : 0);
	io_done(&c->io, err, status);
}

START_TEST(t_stuck_isolated)
{
	struct rig g;
	struct rec_opts o = {.mode = _i ? NVME_MODE_HYBRID : NVME_MODE_POLL,
	                     .reactors = 2,
	                     .timeout_ms = 200,
	                     .retries = 3,
	                     .retry_ms = 50,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 64, 4096, 9);
	sim_fault_stuck(g.sim[0], true);
	sim_fault_hang(g.sim[0], true);
	struct cut_io c[2];
	for (unsigned q = 0; q < 2; q++) {
		memset(&c[q], 0, sizeof(c[q]));
		atomic_store(&c[q].bme_at_cb, -1);
		c[q].sim = g.sim[0];
		/* the callback's arg, &c[q].io, is &c[q] (its first member) */
		io_start_cb(&g, &c[q].io, q, false, 64, 4096, g.buf[q][0], cut_done);
	}
	uint64_t t0 = nvme_now_ns();
	for (unsigned q = 0; q < 2; q++) {
		ck_assert_int_eq(io_wait(&c[q].io), -EIO);
		ck_assert_int_eq(atomic_load(&c[q].bme_at_cb), 0);
	}
	printf("wedged controller: commands answered EIO after %llu ms, with bus mastering off\n",
	       (unsigned long long)ms_since(t0));
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_FAILED);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_ge(rs.isolations, 1);
	/* new I/O fails at once while failed */
	ck_assert_int_eq(io_sync(&g, 1, false, 64, 4096, g.buf[1][1]), -ENODEV);
	/* the device behaves again: the next retry brings it back, data intact */
	sim_fault_clear(g.sim[0]);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	ck_assert(sim_bus_master_on(g.sim[0]));
	check_pattern(&g, 1, 64, 4096, 9);
	put_pattern(&g, 0, 128, 4096, 10);
	check_pattern(&g, 1, 128, 4096, 10);
	rig_close(&g); /* the reactors stop: bounded by the rig */
}
END_TEST

/* ---- a synchronous admin command caught by a reset that cannot disable
 * the device returns (before: it spun for ever, nothing reaped or
 * abandoned it) ---- */
struct sync_call {
	struct nvme_ctrl *c;
	int rc;
	_Atomic int done;
};

static void *sync_admin_thread(void *arg)
{
	struct sync_call *k = arg;
	struct nvme_id_ctrl *id = calloc(1, sizeof(*id));
	struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
	k->rc = nvme_ctrl_admin(k->c, &cmd, id, sizeof(*id), NULL);
	free(id);
	atomic_store(&k->done, 1);
	return NULL;
}

START_TEST(t_admin_sync_bounded)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .retry_ms = 60000,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	sim_fault_stuck(g.sim[0], true);
	sim_fault_hang(g.sim[0], true);
	struct sync_call k = {.c = g.c[0]};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, sync_admin_thread, &k), 0);
	rig_sleep_ms(50);
	uint64_t t0 = nvme_now_ns();
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), 0);
	WAIT_FOR(atomic_load(&k.done));
	pthread_join(th, NULL);
	ck_assert_int_lt(k.rc, 0);
	printf("synchronous admin command under a reset that cannot disable: %d after %llu ms\n",
	       k.rc, (unsigned long long)ms_since(t0));
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_FAILED);
	sim_fault_clear(g.sim[0]);
	rig_close(&g);
}
END_TEST

static uint64_t aborts_sent(struct nvme_ctrl *c)
{
	struct nvme_ctrl_rstats r;
	nvme_ctrl_rstats_get(c, &r);
	return r.aborts_sent;
}

/* ---- an Abort that says "not aborted" for a command that completed
 * meanwhile resets nothing (before: a reset of a healthy controller) ---- */
START_TEST(t_abort_late_no_reset)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 1000, /* the Abort's own timeout: 500 ms */
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	put_pattern(&g, 0, 32, 4096, 21);
	sim_fault_abort_ignore(g.sim[0], true);
	sim_fault_admin_delay(g.sim[0], 150000); /* the Abort's answer comes 150 ms late */
	sim_fault_stall_next(g.sim[0], 1);
	struct io io;
	io_start(&g, &io, 0, false, 32, 4096, g.buf[0][0]);
	WAIT_FOR(aborts_sent(g.c[0]) >= 1);
	/* the device finishes the command before it answers the Abort */
	ck_assert_int_eq(sim_fault_release_stalled(g.sim[0]), 1);
	ck_assert_int_eq(io_wait(&io), 0);
	rig_sleep_ms(700); /* the late "not aborted" arrives and is looked at */
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.resets_started, 0);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_LIVE);
	check_pattern(&g, 0, 32, 4096, 21);
	sim_fault_clear(g.sim[0]);
	rig_close(&g);
}
END_TEST

/* ---- commands held by a reset for a namespace that the reset finds
 * changed fail with EIO; those of an unchanged one are sent again (before:
 * all resent, a read of a grown-LBA namespace could DMA past its buffer) */
START_TEST(t_held_failed_ns)
{
	static _Atomic bool shrink;
	atomic_store(&shrink, false);
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true,
	                     .shrink_ns1 = &shrink};
	rig_open_rec(&g, &o);
	sim_fault_hang(g.sim[0], true);
	struct io a; /* namespace 1: changes across the reset */
	io_start(&g, &a, 0, false, 8, 4096, g.buf[0][0]);
	atomic_store(&shrink, true);
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), 0);
	ck_assert_int_eq(io_wait(&a), -EIO);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	ck_assert(nvme_ctrl_get_info(g.c[0])->ns[0].failed);
	ck_assert(!nvme_ctrl_get_info(g.c[0])->ns[1].failed);
	rig_close(&g);
}
END_TEST

/* ---- every reactor ran its part before nvme_ctrl_remove returns, even
 * when the device was found gone just before and both reactors are busy
 * (before: the acknowledgements of the calls posted when the device was
 * found gone counted for the removal's, which returned while a queue still
 * ran; the caller then closed the bus under it) ---- */
static _Atomic int busy_done[2];
static void busy_call(void *arg)
{
	int r = (int)(intptr_t)arg;
	rig_sleep_ms(r ? 800 : 200);
	atomic_store(&busy_done[r], 1);
}

START_TEST(t_remove_waits_every_reactor)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 2,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	for (int r = 0; r < 2; r++) {
		atomic_store(&busy_done[r], 0);
		ck_assert_int_eq(nvme_reactor_call(g.r[r], busy_call, (void *)(intptr_t)r), 0);
	}
	sim_fault_remove(g.sim[0]);
	/* what a reactor's health check does when it reads all ones */
	recov_dead(g.c[0], "registers read all ones");
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_REMOVED);
	struct nvme_bus *bus = NULL;
	ck_assert_int_eq(nvme_ctrl_remove(g.c[0], "test", &bus), 0);
	ck_assert_ptr_nonnull(bus);
	ck_assert_int_eq(atomic_load(&busy_done[0]), 1);
	ck_assert_int_eq(atomic_load(&busy_done[1]), 1);
	g.kept[0] = bus;
	rig_close(&g);
}
END_TEST

/* ---- once nvme_ctrl_set_event_cb returns, the old callback is neither
 * running nor called again (before: the argument was stored first, and a
 * callback in progress was not waited for) ---- */
static _Atomic int cb_in, cb_forbidden, cb_violations;
static void slow_event_cb(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	(void)c;
	(void)s;
	if (!arg || atomic_load(&cb_forbidden))
		atomic_fetch_add(&cb_violations, 1);
	atomic_fetch_add(&cb_in, 1);
	rig_sleep_ms(20);
	atomic_fetch_sub(&cb_in, 1);
}

START_TEST(t_event_cb_swap)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 5000,
	                     .retries = 3,
	                     .threaded = true};
	rig_open_rec(&g, &o);
	atomic_store(&cb_violations, 0);
	for (int i = 0; i < 48; i++) {
		atomic_store(&cb_forbidden, 0);
		nvme_ctrl_set_event_cb(g.c[0], slow_event_cb, &g);
		/* two state changes: RESETTING from this thread, LIVE from the
		 * recovery thread a few ms later, while this one swaps */
		nvme_ctrl_reset_async(g.c[0], "test");
		rig_sleep_ms((unsigned)(i % 16));
		nvme_ctrl_set_event_cb(g.c[0], NULL, NULL);
		atomic_store(&cb_forbidden, 1);
		ck_assert_int_eq(atomic_load(&cb_in), 0);
		WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	}
	ck_assert_int_eq(atomic_load(&cb_violations), 0);
	rig_close(&g);
}
END_TEST

static uint64_t sim_admin_cmds(struct sim *s)
{
	struct sim_stats st;
	sim_get_stats(s, &st);
	return st.admin_cmds;
}

/* ---- a controller cut off from memory and brought back by a retry gets
 * its mappings at new addresses: a command held during that retry was
 * built against the old ones and must be sent with its addresses moved
 * (before the fix: a DMA error, on VFIO a transfer into whatever the old
 * address was given to).  Loop 1: on a namespace with metadata, whose
 * commands carry MPTR too ---- */
START_TEST(t_retry_rebases_held)
{
	struct rig g;
	struct rec_opts o = {.mode = NVME_MODE_POLL,
	                     .reactors = 1,
	                     .timeout_ms = 3000,
	                     .retries = 3,
	                     .retry_ms = 50,
	                     .threaded = true,
	                     .md = _i == 1};
	rig_open_rec(&g, &o);
	sim_fault_stuck(g.sim[0], true);
	sim_fault_hang(g.sim[0], true);
	ck_assert_int_eq(nvme_ctrl_reset_async(g.c[0], "test"), 0);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_FAILED);
	struct sim_stats s0;
	sim_get_stats(g.sim[0], &s0);
	/* well again, but slow to answer admin commands: the retry's bring-up
	 * takes long enough for a write to be held during it */
	sim_fault_clear(g.sim[0]);
	sim_fault_admin_delay(g.sim[0], 150000);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_RESETTING);
	/* past the retry's hold (until then the failed queues refuse with
	 * ENODEV): its bring-up has sent an admin command, so the write below
	 * is held */
	WAIT_FOR(sim_admin_cmds(g.sim[0]) > s0.admin_cmds);
	fill(g.buf[0][2], 8u << 10, 77); /* two pages: PRP1 and PRP2 */
	fill(g.buf[0][3], 64u << 10, 78); /* sixteen: a PRP list */
	struct io a, b;
	io_start(&g, &a, 0, true, 0, 8u << 10, g.buf[0][2]);
	io_start(&g, &b, 0, true, 64, 64u << 10, g.buf[0][3]);
	ck_assert_int_eq(a.state_at_submit, NVME_CTRL_RESETTING);
	ck_assert_int_eq(io_wait(&a), 0);
	ck_assert_int_eq(io_wait(&b), 0);
	WAIT_FOR(nvme_ctrl_state(g.c[0]) == NVME_CTRL_LIVE);
	sim_fault_admin_delay(g.sim[0], 0);
	struct sim_stats s1;
	sim_get_stats(g.sim[0], &s1);
	ck_assert_uint_eq(s1.dma_errors, s0.dma_errors);
	check_pattern(&g, 0, 0, 8u << 10, 77);
	check_pattern(&g, 0, 64, 64u << 10, 78);
	if (o.md) { /* the commands did carry MPTR, and it was moved with the pool */
		ck_assert(nvme_ctrl_get_info(g.c[0])->ns[0].md_buf);
		struct nvme_qpair_stats qs;
		nvme_qpair_stats_get(g.qp[0][0], &qs);
		ck_assert_uint_eq(qs.errors[NVME_ERRC_PROTECTION], 0);
	}
	rig_close(&g);
}
END_TEST

int main(void)
{
	log_set_level(getenv("TEST_LOG") ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	Suite *s = suite_create("recovery");
	TCase *tc = tcase_create("recovery");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, t_abort_ok, 0, 2);
	tcase_add_loop_test(tc, t_abort_ignored_reset, 0, 2);
	tcase_add_test(tc, t_slow_device);
	tcase_add_loop_test(tc, t_reset_irq_modes, 0, 2);
	tcase_add_loop_test(tc, t_ns_changed, 0, 2);
	tcase_add_loop_test(tc, t_retries_exhausted, 0, 2);
	tcase_add_loop_test(tc, t_cfs, 0, 2);
	tcase_add_test(tc, t_held_during_reset);
	tcase_add_test(tc, t_held_too_long);
	tcase_add_loop_test(tc, t_buffer_invariant, 0, 4);
	tcase_add_loop_test(tc, t_removal_reattach, 0, 2);
	tcase_add_test(tc, t_remove_live);
	tcase_add_test(tc, t_detach_shutdown);
	tcase_add_test(tc, t_reset_fails);
	tcase_add_test(tc, t_two_reactors);
	tcase_add_loop_test(tc, t_admin_async, 0, 2);
	tcase_add_loop_test(tc, t_stuck_isolated, 0, 2);
	tcase_add_test(tc, t_admin_sync_bounded);
	tcase_add_test(tc, t_abort_late_no_reset);
	tcase_add_test(tc, t_held_failed_ns);
	tcase_add_test(tc, t_remove_waits_every_reactor);
	tcase_add_test(tc, t_event_cb_swap);
	tcase_add_loop_test(tc, t_retry_rebases_held, 0, 2);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* test_faultseq.c - random sequences of device faults, not single ones.
 *
 * A workload of 4 KiB reads and writes runs on two reactors against a
 * software controller while a seeded random sequence of faults is injected
 * into it (delay past the timeout, hang and unhang, lost, failed, stalled,
 * doubled and bogus completions, controller fatal status, Abort ignored, a
 * controller that will not become ready, one that ignores a disable and a
 * function reset (stuck), slow admin answers, a surprise removal, a power
 * cut -- in any order, with and without a clear between them).  After each
 * sequence every fault is cleared and the properties are checked:
 *   - the controller is live again within a bounded number of resets (a
 *     removed one after the daemon's remove + attach);
 *   - every I/O submitted completed exactly once (never twice, never not);
 *   - no read returned anything but the last content the model knows for
 *     the block (a write that failed makes the block unknown until the next
 *     successful one, as on any block device);
 *   - new I/O on every queue works and reads back what it wrote.
 * The seed of each loop case makes a run repeatable (NVMEFS_FAULTSEQ_CASE=k
 * runs case k alone, NVMEFS_FAULTSEQ_SEED=s repeats the sequence of seed s
 * on it NVMEFS_FAULTSEQ_N times, NVMEFS_FAULTSEQ_TRACE=1 prints each step);
 * NVMEFS_FAULTSEQ_N sets the sequences per case (default 6; `make soak`
 * runs thousands), and NVMEFS_TEST_SLOW=1 (valgrind, ThreadSanitizer)
 * stretches the timeouts and runs 1.
 * Each case prints, per fault kind, how often it ran, what the callers saw
 * and the time from the clear to a live controller. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rig.h"

#define NBLK   256 /* 4 KiB blocks the workload uses */
#define QD     6   /* I/Os kept in flight per reactor */
#define NR     2   /* reactors */
#define SLOTS  (NR * QD)
#define MAXRES 6   /* resets allowed between the clear and a live controller */

enum fault {
	F_DELAY, F_HANG, F_UNHANG, F_LOSE, F_FAIL, F_CFS, F_ABORT_IGNORE, F_STALL, F_RELEASE,
	F_BOGUS, F_DUP, F_NEVER_READY, F_REMOVE, F_POWERFAIL, F_STUCK, F_ADMIN_DELAY, F_CLEAR, F_NR
};
static const char *const fault_names[F_NR] = {
    "delay", "hang", "unhang", "lose", "fail", "cfs", "abort-ignore", "stall", "release",
    "bogus", "duplicate", "never-ready", "remove", "powerfail", "stuck", "admin-delay", "clear"};

/* splitmix64: the one random source, so that a seed replays */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct wio;

struct fs_test {
	struct rig g;
	pthread_mutex_t m;
	/* the model: what each block holds, when known */
	uint64_t val[NBLK];
	bool known[NBLK], busy[NBLK];
	unsigned epoch; /* power cuts so far: a write from before one may be gone */
	/* the workload */
	struct wio *slot[SLOTS];
	struct wio *done_list; /* finished I/Os, freed at the end of a sequence */
	unsigned timeout_ms;
	uint64_t seq_seed, next_seed;
	/* findings */
	unsigned double_completions, mismatches, submitted, completed;
	unsigned errs_by[F_NR][5]; /* per fault kind: 0, EIO, ENODEV, ENOSPC/EINVAL, other */
	uint64_t recover_ms_max[F_NR], recover_ms_sum[F_NR];
	unsigned runs[F_NR];
	bool in_seq[F_NR]; /* fault kinds of the sequence running now */
	bool trace;        /* NVMEFS_FAULTSEQ_TRACE: print each step */
};

struct wio {
	struct fs_test *t;
	unsigned slot;
	bool write;
	unsigned blk;
	uint64_t seed;
	uint8_t *buf;
	unsigned epoch;
	_Atomic unsigned completions;
	int err;
	struct wio *next;
};

static unsigned err_class(int err)
{
	return err == 0 ? 0 : err == -EIO ? 1 : err == -ENODEV ? 2
	                   : (err == -ENOSPC || err == -EINVAL) ? 3 : 4;
}

static void wio_done(void *arg, int err, uint16_t status)
{
	(void)status;
	struct wio *w = arg;
	struct fs_test *t = w->t;
	if (atomic_fetch_add(&w->completions, 1) != 0) {
		pthread_mutex_lock(&t->m);
		t->double_completions++;
		pthread_mutex_unlock(&t->m);
		return;
	}
	pthread_mutex_lock(&t->m);
	w->err = err;
	for (unsigned f = 0; f < F_NR; f++)
		if (t->in_seq[f])
			t->errs_by[f][err_class(err)]++;
	if (w->write) {
		/* a failed write may have landed or not, whole blocks or some */
		t->known[w->blk] = err == 0 && w->epoch == t->epoch;
		t->val[w->blk] = w->seed;
	} else if (err == 0 && t->known[w->blk] && rig_verify(w->buf, 4096, t->val[w->blk]) != 0) {
		t->mismatches++;
		fprintf(stderr, "faultseq: block %u does not hold what was last written to it\n",
		        w->blk);
	}
	t->busy[w->blk] = false;
	t->slot[w->slot] = NULL;
	t->completed++;
	w->next = t->done_list;
	t->done_list = w;
	pthread_mutex_unlock(&t->m);
}

static void wio_submit(void *arg)
{
	struct wio *w = arg;
	struct fs_test *t = w->t;
	struct nvme_qpair *qp = t->g.qp[w->slot / QD][0];
	int rc = w->write ? nvme_qpair_write(qp, 1, w->blk, w->buf, 4096, false, wio_done, w)
	                  : nvme_qpair_read(qp, 1, w->blk, w->buf, 4096, wio_done, w);
	if (rc == -EAGAIN) { /* not submitted: the slot is free again */
		pthread_mutex_lock(&t->m);
		t->busy[w->blk] = false;
		t->slot[w->slot] = NULL;
		t->submitted--;
		pthread_mutex_unlock(&t->m);
		free(w);
	} else if (rc < 0) {
		wio_done(w, rc, 0);
	}
}

/* Fill every free slot with a new I/O on a block nobody uses. */
static void pump(struct fs_test *t)
{
	for (unsigned s = 0; s < SLOTS; s++) {
		pthread_mutex_lock(&t->m);
		if (t->slot[s]) {
			pthread_mutex_unlock(&t->m);
			continue;
		}
		unsigned blk = (unsigned)(rnd(&t->next_seed) % NBLK);
		if (t->busy[blk]) {
			pthread_mutex_unlock(&t->m);
			continue;
		}
		struct wio *w = calloc(1, sizeof(*w));
		ck_assert_ptr_nonnull(w);
		w->t = t;
		w->slot = s;
		w->blk = blk;
		w->write = rnd(&t->next_seed) & 1;
		w->seed = rnd(&t->next_seed) | 1;
		/* slot s's 4 KiB piece of its reactor's buffers */
		w->buf = t->g.buf[s / QD][0] + (size_t)(s % QD) * 4096;
		if (w->write)
			rig_fill(w->buf, 4096, w->seed);
		t->busy[blk] = true;
		t->slot[s] = w;
		w->epoch = t->epoch;
		t->submitted++;
		pthread_mutex_unlock(&t->m);
		ck_assert_int_eq(nvme_reactor_call(t->g.r[s / QD], wio_submit, w), 0);
	}
}

/* Sleep ms while keeping the workload going. */
static void run_for(struct fs_test *t, unsigned ms)
{
	uint64_t end = rig_now_ms() + ms;
	do {
		pump(t);
		rig_sleep_ms(2);
	} while (rig_now_ms() < end);
}

static unsigned busy_slots(struct fs_test *t)
{
	unsigned n = 0;
	pthread_mutex_lock(&t->m);
	for (unsigned s = 0; s < SLOTS; s++)
		n += t->slot[s] != NULL;
	pthread_mutex_unlock(&t->m);
	return n;
}

static void inject(struct fs_test *t, enum fault f, uint64_t *rs, bool *removed)
{
	struct sim *s = t->g.sim[0];
	switch (f) {
	case F_DELAY: /* past the timeout or just below it */
		sim_fault_delay(s, (unsigned)(rnd(rs) & 1 ? t->timeout_ms * 2 : t->timeout_ms / 2) *
		                       1000u);
		break;
	case F_HANG:
		sim_fault_hang(s, true);
		break;
	case F_UNHANG:
		sim_fault_hang(s, false);
		break;
	case F_LOSE:
		sim_fault_lose_next(s, 1 + (unsigned)(rnd(rs) % 4));
		break;
	case F_FAIL:
		sim_fault_fail_next(s, 1 + (unsigned)(rnd(rs) % 4),
		                    rnd(rs) & 1 ? NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR)
		                                : NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL));
		break;
	case F_CFS:
		sim_fault_cfs(s);
		break;
	case F_ABORT_IGNORE:
		sim_fault_abort_ignore(s, rnd(rs) & 1);
		break;
	case F_STALL:
		sim_fault_stall_next(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_RELEASE:
		sim_fault_release_stalled(s);
		break;
	case F_BOGUS:
		sim_fault_bogus_cid(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_DUP:
		sim_fault_duplicate(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_NEVER_READY:
		sim_fault_never_ready(s, true);
		break;
	case F_REMOVE:
		sim_fault_remove(s);
		*removed = true;
		break;
	case F_POWERFAIL:
		/* cached writes go: the model's blocks may hold older data now */
		pthread_mutex_lock(&t->m);
		t->epoch++;
		memset(t->known, 0, sizeof(t->known));
		pthread_mutex_unlock(&t->m);
		sim_fault_powerfail(s, rnd(rs) & 1 ? 0 : rnd(rs));
		*removed = true;
		break;
	case F_STUCK: /* wedged: disable and function reset ignored */
		sim_fault_stuck(s, true);
		break;
	case F_ADMIN_DELAY:
		sim_fault_admin_delay(s, (unsigned)(rnd(rs) % (t->timeout_ms / 2 + 1)) * 1000u);
		break;
	case F_CLEAR:
		sim_fault_clear(s);
		break;
	default:
		break;
	}
}

static void one_sequence(struct fs_test *t, uint64_t seed, unsigned n)
{
	uint64_t rs = seed;
	unsigned steps = 1 + (unsigned)(rnd(&rs) % 6);
	bool removed = false;
	enum fault kinds[8];
	memset(t->in_seq, 0, sizeof(t->in_seq));
	for (unsigned i = 0; i < steps; i++) {
		enum fault f = (enum fault)(rnd(&rs) % F_NR);
		kinds[i] = f;
		pthread_mutex_lock(&t->m);
		t->in_seq[f] = true;
		pthread_mutex_unlock(&t->m);
		t->runs[f]++;
		if (t->trace)
			fprintf(stderr, "faultseq: seq %u step %u: %s\n", n, i, fault_names[f]);
		inject(t, f, &rs, &removed);
		run_for(t, (unsigned)(rnd(&rs) % (3 * t->timeout_ms + 1)));
	}
	struct nvme_ctrl_rstats r0, r1;
	nvme_ctrl_rstats_get(t->g.c[0], &r0);
	uint64_t t0 = rig_now_ms();
	/* every fault off: the device answers again as the fault left it */
	sim_fault_clear(t->g.sim[0]);
	enum nvme_ctrl_state st = nvme_ctrl_state(t->g.c[0]);
	if (removed || st == NVME_CTRL_REMOVED) {
		/* the engine saw all ones (or not yet: make sure); the daemon's
		 * part: remove, then attach on the kept bus */
		if (nvme_ctrl_state(t->g.c[0]) != NVME_CTRL_REMOVED || t->g.kept[0] == NULL) {
			ck_assert_int_eq(rig_remove(&t->g, 0), 0);
		}
		int rc = rig_attach(&t->g, 0);
		ck_assert_msg(rc == 0, "seq %u (seed %llu): attach after the removal: %d", n,
		              (unsigned long long)seed, rc);
	}
	/* live again, within a bounded number of resets; a bring-up that
	 * caught never-ready waits CAP.TO (7.5 s here) before it fails and is
	 * tried again */
	uint64_t deadline = rig_now_ms() + 20u * t->timeout_ms + 2 * 7500 + 5000;
	while (nvme_ctrl_state(t->g.c[0]) != NVME_CTRL_LIVE) {
		ck_assert_msg(rig_now_ms() < deadline,
		              "seq %u (seed %llu): not live after the clear (state %s)", n,
		              (unsigned long long)seed,
		              nvme_ctrl_state_name(nvme_ctrl_state(t->g.c[0])));
		run_for(t, 2);
	}
	uint64_t dt = rig_now_ms() - t0;
	/* and it stays live: the engine's health check (4 times a second) has
	 * had its look at the device after the clear */
	uint64_t stable = rig_now_ms();
	while (rig_now_ms() - stable < 600) {
		ck_assert_msg(rig_now_ms() < deadline,
		              "seq %u (seed %llu): live, but not for long (state %s)", n,
		              (unsigned long long)seed,
		              nvme_ctrl_state_name(nvme_ctrl_state(t->g.c[0])));
		if (nvme_ctrl_state(t->g.c[0]) != NVME_CTRL_LIVE)
			stable = rig_now_ms();
		run_for(t, 2);
	}
	/* every I/O in flight completes: timeouts, retries and resets end them */
	deadline = rig_now_ms() + 20u * t->timeout_ms + 5000;
	while (busy_slots(t)) {
		if (rig_now_ms() > deadline) {
			pthread_mutex_lock(&t->m);
			for (unsigned s = 0; s < SLOTS; s++)
				if (t->slot[s])
					fprintf(stderr, "faultseq: slot %u block %u (%s) never completed\n",
					        s, t->slot[s]->blk, t->slot[s]->write ? "write" : "read");
			pthread_mutex_unlock(&t->m);
			ck_abort_msg("seq %u (seed %llu): an I/O never completed", n,
			             (unsigned long long)seed);
		}
		rig_sleep_ms(2); /* no new I/O meanwhile */
	}
	nvme_ctrl_rstats_get(t->g.c[0], &r1);
	uint64_t resets = r1.resets_started - r0.resets_started;
	/* a sequence that ends in a reset loop would show here: each fault
	 * kind is over, so only the faults' aftermath may reset */
	ck_assert_msg(resets <= MAXRES, "seq %u (seed %llu): %llu resets after the clear", n,
	              (unsigned long long)seed, (unsigned long long)resets);
	for (unsigned i = 0; i < steps; i++) {
		enum fault f = kinds[i];
		t->recover_ms_sum[f] += dt;
		if (dt > t->recover_ms_max[f])
			t->recover_ms_max[f] = dt;
	}
	ck_assert_uint_eq(t->double_completions, 0);
	ck_assert_uint_eq(t->mismatches, 0);
	/* new I/O works on every queue and reads back -- on a stable controller:
	 * a timeout of this loaded machine (100 ms is short), or the reset it
	 * starts, fails a command whose io_retries are 0, as it should, and the
	 * I/O is tried again (at most 9 times, each such timeout or reset
	 * counted); a failure with neither to blame fails the test */
	for (unsigned r = 0; r < NR; r++) {
		uint8_t *b = t->g.buf[r][1];
		uint64_t pat = seed * 4 + r + 1;
		unsigned blk = (unsigned)(rnd(&rs) % NBLK);
		int rc = -EIO;
		for (unsigned tries = 0; rc != 0 && tries < 10; tries++) {
			struct nvme_ctrl_rstats a, b2;
			nvme_ctrl_rstats_get(t->g.c[0], &a);
			rig_fill(b, 4096, pat);
			rc = rig_io(&t->g, r, 0, RIG_WRITE, 1, blk, b, 4096, 0);
			if (rc == 0) {
				memset(b, 0, 4096);
				rc = rig_io(&t->g, r, 0, RIG_READ, 1, blk, b, 4096, 0);
			}
			nvme_ctrl_rstats_get(t->g.c[0], &b2);
			if (rc != 0 && b2.resets_started == a.resets_started &&
			    b2.timeouts == a.timeouts)
				break; /* failed with no timeout or reset to blame */
			if (rc != 0)
				rig_wait_state(&t->g, 0, NVME_CTRL_LIVE, 0);
		}
		ck_assert_msg(rc == 0, "seq %u (seed %llu): I/O after recovery: %d (namespace %s)", n,
		              (unsigned long long)seed, rc,
		              nvme_ctrl_get_info(t->g.c[0])->ns[0].failed ? "failed" : "ok");
		ck_assert_msg(rig_verify(b, 4096, pat) == 0, "seq %u: read back differs", n);
		pthread_mutex_lock(&t->m);
		t->known[blk] = true;
		t->val[blk] = pat;
		pthread_mutex_unlock(&t->m);
	}
	pthread_mutex_lock(&t->m);
	while (t->done_list) {
		struct wio *w = t->done_list;
		t->done_list = w->next;
		free(w);
	}
	pthread_mutex_unlock(&t->m);
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	return s && *s ? (unsigned)strtoul(s, NULL, 10) : dflt;
}

START_TEST(t_sequences)
{
	static struct fs_test t; /* large: not on the stack */
	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.m, NULL);
	bool slow = env_uint("NVMEFS_TEST_SLOW", 0) != 0;
	unsigned nseq = env_uint("NVMEFS_FAULTSEQ_N", slow ? 1 : 6);
	uint64_t rs = 0x5eed0000ull + (uint64_t)_i;
	t.timeout_ms = slow ? 1500 : 100;
	t.trace = env_uint("NVMEFS_FAULTSEQ_TRACE", 0) != 0;
	t.next_seed = rnd(&rs);
	struct rig_opts o = {.nr_reactors = NR, .start = true};
	o.sim[0].threaded = _i & 1;
	o.sim[0].vwc = true;
	o.mode = (enum nvme_poll_mode)((_i >> 1) % 3);
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 32,
	                                    .cq_budget = 4,
	                                    .io_timeout_ms = t.timeout_ms,
	                                    .io_retries = (unsigned)(rnd(&rs) % 4),
	                                    .retry_ms = 10,
	                                    .retry_max_ms = 200,
	                                    .interrupts = o.mode != NVME_MODE_POLL};
	o.sim[0].nr_ns = 1;
	o.sim[0].ns[0] =
	    (struct sim_ns_opts){.nlba = NBLK, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	ck_assert_int_eq(rig_open(&t.g, &o), 0);
	printf("faultseq case %d: %s sim, %s mode, io_retries %u, %u sequences\n", _i,
	       o.sim[0].threaded ? "threaded" : "inline",
	       o.mode == NVME_MODE_POLL ? "poll" : o.mode == NVME_MODE_HYBRID ? "hybrid" : "interrupt",
	       o.ctrl[0].io_retries, nseq);
	/* NVMEFS_FAULTSEQ_SEED=s: the sequence a failure printed, alone, on this
	 * case's set-up (its steps come from s; the workload's timing does not) */
	const char *one = getenv("NVMEFS_FAULTSEQ_SEED");
	if (one && *one) {
		for (unsigned n = 0; n < nseq; n++)
			one_sequence(&t, strtoull(one, NULL, 10), n);
	} else {
		for (unsigned n = 0; n < nseq; n++)
			one_sequence(&t, rnd(&rs), n);
	}
	struct nvme_ctrl_rstats r;
	nvme_ctrl_rstats_get(t.g.c[0], &r);
	printf("faultseq case %d: %u I/Os completed once each, %llu resets (%llu failed), "
	       "%llu removals, %llu timeouts, %llu aborts\n",
	       _i, t.completed, (unsigned long long)r.resets_started,
	       (unsigned long long)r.resets_failed, (unsigned long long)r.removals,
	       (unsigned long long)r.timeouts, (unsigned long long)r.aborts_sent);
	printf("  %-13s %5s %8s %6s %6s %6s %6s %10s %10s\n", "fault", "runs", "ok", "EIO",
	       "ENODEV", "EINVAL", "other", "live avg", "live max");
	for (unsigned f = 0; f < F_NR; f++)
		if (t.runs[f])
			printf("  %-13s %5u %8u %6u %6u %6u %6u %8llums %8llums\n", fault_names[f],
			       t.runs[f], t.errs_by[f][0], t.errs_by[f][1], t.errs_by[f][2],
			       t.errs_by[f][3], t.errs_by[f][4],
			       (unsigned long long)(t.recover_ms_sum[f] / t.runs[f]),
			       (unsigned long long)t.recover_ms_max[f]);
	rig_close(&t.g);
	pthread_mutex_destroy(&t.m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faultseq");
	TCase *tc = tcase_create("faultseq");
	/* a sequence takes about 2 s (CAP.TO waits make some 10 s) */
	unsigned n = env_uint("NVMEFS_FAULTSEQ_N", 6);
	tcase_set_timeout(tc, 120.0 + 20.0 * n * (env_uint("NVMEFS_TEST_SLOW", 0) ? 4 : 1));
	/* NVMEFS_FAULTSEQ_CASE=k: that case alone (to replay one) */
	const char *one = getenv("NVMEFS_FAULTSEQ_CASE");
	if (one && *one)
		tcase_add_loop_test(tc, t_sequences, atoi(one), atoi(one) + 1);
	else
		tcase_add_loop_test(tc, t_sequences, 0, 6);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}

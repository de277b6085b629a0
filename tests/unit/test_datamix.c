/* test_datamix.c - no data lands at, or is read from, the wrong place: reads
 * and writes of 4 KiB to 64 KiB (one, two pages or a PRP list) run against a
 * software controller while a seeded random sequence of the faults that make
 * the engine wait, abort, reset and resubmit is injected (completions delayed
 * below and past the timeout, a delay cleared while delayed completions are
 * held, lost, stalled, doubled and bogus completions, Abort ignored).
 *
 * Each I/O takes its DMA buffer from its qpair's pool when it is submitted and
 * gives it back in its completion callback, as the FUSE scheduler does, so a
 * buffer is handed to the next I/O as soon as the engine says the device is
 * done with it.  A read's buffer is poisoned before it is submitted.  Every
 * 4 KiB block written carries (block, write id) in its first 8 bytes and a
 * pattern of both after them, so that a mismatch says whose data was found:
 *   - a successful read returns, for every block it covers, the content of
 *     the last successful write to it (a block whose last write failed is
 *     unknown until the next successful one);
 *   - every I/O completes exactly once;
 *   - at the end, with every fault cleared, every known block reads back.
 * I/Os never overlap in flight (as fio's verify jobs).  The seed of each loop
 * case makes the fault sequence repeatable; NVMEFS_DATAMIX_N sets the
 * sequences per case (default 4), NVMEFS_DATAMIX_TRACE=1 prints each step. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rig.h"

#define NBLK  2048 /* 4 KiB blocks the workload uses (8 MiB) */
#define MAXNB 16   /* blocks per I/O: 64 KiB */
#define QD    12   /* I/Os kept in flight */
#define BLK   4096u

enum fault { F_DELAY, F_DELAY_LONG, F_CLEAR, F_LOSE, F_STALL, F_DUP, F_BOGUS, F_ABORT_IGNORE, F_NR };
static const char *const fault_names[F_NR] = {"delay",  "delay-long", "clear",       "lose",
                                              "stall",  "duplicate",  "bogus",
                                              "abort-ignore"};

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct dio;

struct dm_test {
	struct rig g;
	pthread_mutex_t m;
	uint32_t wid[NBLK]; /* the last successful write of each block */
	bool known[NBLK], busy[NBLK];
	struct dio *slot[QD];
	uint32_t next_wid;
	uint64_t next_seed;
	unsigned timeout_ms;
	bool trace; /* NVMEFS_DATAMIX_TRACE: print each step */
	unsigned mismatches, double_completions, submitted, completed, errors, nobuf;
};

struct dio {
	struct dm_test *t;
	unsigned slot;
	bool write;
	unsigned blk, nb;
	uint32_t wid;
	uint8_t *buf;
	_Atomic unsigned completions;
};

static uint64_t blk_seed(unsigned blk, uint32_t wid)
{
	return (uint64_t)wid << 32 | blk;
}

static void blk_fill(uint8_t *p, unsigned blk, uint32_t wid)
{
	uint64_t s = blk_seed(blk, wid);

	memcpy(p, &s, 8);
	rig_fill(p + 8, BLK - 8, s);
}

/* 0, or -EILSEQ with what the block holds in *found (its first 8 bytes) */
static int blk_check(const uint8_t *p, unsigned blk, uint32_t wid, uint64_t *found)
{
	uint64_t s = blk_seed(blk, wid);

	memcpy(found, p, 8);
	return *found == s && rig_verify(p + 8, BLK - 8, s) == 0 ? 0 : -EILSEQ;
}

static struct nvme_qpair *dm_qp(struct dm_test *t)
{
	return t->g.qp[0][0];
}

/* On the reactor: what it found, the model, the buffer back to the pool. */
static void dio_done(void *arg, int err, uint16_t status)
{
	struct dio *w = arg;
	struct dm_test *t = w->t;

	(void)status;
	if (atomic_fetch_add(&w->completions, 1) != 0) {
		pthread_mutex_lock(&t->m);
		t->double_completions++;
		pthread_mutex_unlock(&t->m);
		return; /* w is the first completion's: left alone */
	}
	pthread_mutex_lock(&t->m);
	if (err)
		t->errors++;
	for (unsigned i = 0; i < w->nb; i++) {
		unsigned b = w->blk + i;
		uint64_t found;

		if (w->write) {
			/* a failed write may have landed or not, in part */
			t->known[b] = err == 0;
			t->wid[b] = w->wid;
		} else if (!err && t->known[b] &&
		           blk_check(w->buf + (size_t)i * BLK, b, t->wid[b], &found) != 0) {
			t->mismatches++;
			fprintf(stderr,
			        "datamix: read of blocks %u+%u: block %u holds block %u of write %u "
			        "(first 8 bytes %#llx), want write %u\n",
			        w->blk, w->nb, b, (unsigned)(found & 0xffffffffu),
			        (unsigned)(found >> 32), (unsigned long long)found, t->wid[b]);
		}
		t->busy[b] = false;
	}
	t->slot[w->slot] = NULL;
	t->completed++;
	pthread_mutex_unlock(&t->m);
	nvme_qpair_buf_free(dm_qp(t), w->buf, (size_t)w->nb * BLK);
	free(w);
}

/* Undo a pump that did not submit. */
static void dio_unpump(struct dio *w)
{
	struct dm_test *t = w->t;

	pthread_mutex_lock(&t->m);
	for (unsigned i = 0; i < w->nb; i++)
		t->busy[w->blk + i] = false;
	t->slot[w->slot] = NULL;
	t->submitted--;
	pthread_mutex_unlock(&t->m);
	free(w);
}

/* On the reactor: a buffer from the pool, filled or poisoned, submitted. */
static void dio_submit(void *arg)
{
	struct dio *w = arg;
	struct dm_test *t = w->t;
	struct nvme_qpair *qp = dm_qp(t);
	size_t len = (size_t)w->nb * BLK;
	int rc;

	w->buf = nvme_qpair_buf_alloc(qp, len);
	if (!w->buf) {
		pthread_mutex_lock(&t->m);
		t->nobuf++;
		pthread_mutex_unlock(&t->m);
		dio_unpump(w);
		return;
	}
	if (w->write) {
		for (unsigned i = 0; i < w->nb; i++)
			blk_fill(w->buf + (size_t)i * BLK, w->blk + i, w->wid);
		rc = nvme_qpair_write(qp, 1, w->blk, w->buf, len, false, dio_done, w);
	} else {
		memset(w->buf, 0xa5, len);
		rc = nvme_qpair_read(qp, 1, w->blk, w->buf, len, dio_done, w);
	}
	if (rc == -EAGAIN) {
		nvme_qpair_buf_free(qp, w->buf, len);
		dio_unpump(w);
	} else if (rc < 0) {
		dio_done(w, rc, 0);
	}
}

/* Fill every free slot with an I/O on blocks nobody uses. */
static void pump(struct dm_test *t)
{
	for (unsigned s = 0; s < QD; s++) {
		pthread_mutex_lock(&t->m);
		if (t->slot[s]) {
			pthread_mutex_unlock(&t->m);
			continue;
		}
		unsigned nb = 1 + (unsigned)(rnd(&t->next_seed) % MAXNB);
		unsigned blk = (unsigned)(rnd(&t->next_seed) % (NBLK - nb + 1));
		bool free_range = true;
		for (unsigned i = 0; i < nb; i++)
			free_range = free_range && !t->busy[blk + i];
		if (!free_range) {
			pthread_mutex_unlock(&t->m);
			continue;
		}
		struct dio *w = calloc(1, sizeof(*w));
		ck_assert_ptr_nonnull(w);
		w->t = t;
		w->slot = s;
		w->blk = blk;
		w->nb = nb;
		w->write = rnd(&t->next_seed) % 3 != 0; /* a read in three: most blocks known */
		w->wid = ++t->next_wid;
		for (unsigned i = 0; i < nb; i++)
			t->busy[blk + i] = true;
		t->slot[s] = w;
		t->submitted++;
		pthread_mutex_unlock(&t->m);
		ck_assert_int_eq(nvme_reactor_call(t->g.r[0], dio_submit, w), 0);
	}
}

static void run_for(struct dm_test *t, unsigned ms)
{
	uint64_t end = rig_now_ms() + ms;

	do {
		pump(t);
		rig_sleep_ms(1);
	} while (rig_now_ms() < end);
}

static unsigned busy_slots(struct dm_test *t)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->m);
	for (unsigned s = 0; s < QD; s++)
		n += t->slot[s] != NULL;
	pthread_mutex_unlock(&t->m);
	return n;
}

static void inject(struct dm_test *t, enum fault f, uint64_t *rs)
{
	struct sim *s = t->g.sim[0];

	switch (f) {
	case F_DELAY: /* below the timeout: nothing but waiting */
		sim_fault_delay(s, (unsigned)(1 + rnd(rs) % (t->timeout_ms / 2)) * 1000u);
		break;
	case F_DELAY_LONG: /* past it: aborts (the sim cannot abort these), resets */
		sim_fault_delay(s, t->timeout_ms * 2 * 1000u);
		break;
	case F_CLEAR:
		sim_fault_clear(s);
		break;
	case F_LOSE:
		sim_fault_lose_next(s, 1 + (unsigned)(rnd(rs) % 4));
		break;
	case F_STALL: /* held until an Abort takes it off: resubmitted */
		sim_fault_stall_next(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_DUP:
		sim_fault_duplicate(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_BOGUS:
		sim_fault_bogus_cid(s, 1 + (unsigned)(rnd(rs) % 3));
		break;
	case F_ABORT_IGNORE:
		sim_fault_abort_ignore(s, rnd(rs) & 1);
		break;
	default:
		break;
	}
}

static void one_sequence(struct dm_test *t, uint64_t seed, unsigned n)
{
	uint64_t rs = seed;
	unsigned steps = 1 + (unsigned)(rnd(&rs) % 5);

	for (unsigned i = 0; i < steps; i++) {
		enum fault f = (enum fault)(rnd(&rs) % F_NR);
		if (t->trace)
			fprintf(stderr, "datamix: seq %u step %u: %s\n", n, i, fault_names[f]);
		inject(t, f, &rs);
		run_for(t, 20 + (unsigned)(rnd(&rs) % (2 * t->timeout_ms)));
	}
	sim_fault_clear(t->g.sim[0]);
	uint64_t deadline = rig_now_ms() + 40u * t->timeout_ms + 15000;
	while (nvme_ctrl_state(t->g.c[0]) != NVME_CTRL_LIVE) {
		ck_assert_msg(rig_now_ms() < deadline, "seq %u (seed %llu): not live after the clear",
		              n, (unsigned long long)seed);
		run_for(t, 2);
	}
	while (busy_slots(t)) {
		ck_assert_msg(rig_now_ms() < deadline, "seq %u (seed %llu): an I/O never completed",
		              n, (unsigned long long)seed);
		rig_sleep_ms(2);
	}
	ck_assert_msg(t->double_completions == 0, "seq %u (seed %llu): %u double completions", n,
	              (unsigned long long)seed, t->double_completions);
	ck_assert_msg(t->mismatches == 0, "seq %u (seed %llu): %u blocks read wrong", n,
	              (unsigned long long)seed, t->mismatches);
}

/* With every fault cleared: each known block reads back, 64 KiB at a time. */
static void check_all(struct dm_test *t)
{
	uint8_t *b = t->g.buf[0][0];
	unsigned bad = 0;

	for (unsigned blk = 0; blk < NBLK; blk += MAXNB) {
		int rc = -EIO;
		/* a reset that a timeout of a loaded machine starts (100 ms is
		 * short) may fail a read: try again once the controller is live */
		for (unsigned tries = 0; rc != 0 && tries < 4; tries++) {
			rc = rig_io(&t->g, 0, 0, RIG_READ, 1, blk, b, (size_t)MAXNB * BLK, 0);
			if (rc != 0)
				rig_wait_state(&t->g, 0, NVME_CTRL_LIVE, 0);
		}
		ck_assert_int_eq(rc, 0);
		for (unsigned i = 0; i < MAXNB; i++) {
			uint64_t found;
			if (t->known[blk + i] &&
			    blk_check(b + (size_t)i * BLK, blk + i, t->wid[blk + i], &found) != 0) {
				fprintf(stderr, "datamix: block %u holds %#llx, want write %u\n", blk + i,
				        (unsigned long long)found, t->wid[blk + i]);
				bad++;
			}
		}
	}
	ck_assert_uint_eq(bad, 0);
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	return s && *s ? (unsigned)strtoul(s, NULL, 10) : dflt;
}

START_TEST(t_datamix)
{
	static struct dm_test t;
	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.m, NULL);
	bool slow = env_uint("NVMEFS_TEST_SLOW", 0) != 0;
	unsigned nseq = env_uint("NVMEFS_DATAMIX_N", slow ? 1 : 4);
	uint64_t rs = 0xda7a0000ull + (uint64_t)_i;
	t.timeout_ms = slow ? 1500 : 100;
	t.next_seed = rnd(&rs);
	t.trace = env_uint("NVMEFS_DATAMIX_TRACE", 0) != 0;
	struct rig_opts o = {.nr_reactors = 1, .start = true, .dma_isolation = true};
	o.sim[0].threaded = _i & 1;
	o.mode = (enum nvme_poll_mode)((_i >> 1) % 3);
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 64,
	                                    .io_timeout_ms = t.timeout_ms,
	                                    .io_retries = 1 + (unsigned)(rnd(&rs) % 3),
	                                    .retry_ms = 10,
	                                    .retry_max_ms = 200,
	                                    .interrupts = o.mode != NVME_MODE_POLL};
	o.sim[0].nr_ns = 1;
	o.sim[0].ns[0] =
	    (struct sim_ns_opts){.nlba = NBLK, .lba_size = BLK, .backing = SIM_BACKING_RAM};
	ck_assert_int_eq(rig_open(&t.g, &o), 0);
	for (unsigned n = 0; n < nseq; n++)
		one_sequence(&t, rnd(&rs), n);
	check_all(&t);
	struct nvme_ctrl_rstats r;
	nvme_ctrl_rstats_get(t.g.c[0], &r);
	printf("datamix case %d (%s sim, mode %d): %u I/Os, %u errors, %u without a buffer; "
	       "%llu timeouts, %llu aborts, %llu resets, %llu resubmitted\n",
	       _i, o.sim[0].threaded ? "threaded" : "inline", (int)o.mode, t.completed, t.errors,
	       t.nobuf, (unsigned long long)r.timeouts, (unsigned long long)r.aborts_sent,
	       (unsigned long long)r.resets_started, (unsigned long long)r.resubmitted);
	rig_close(&t.g);
	pthread_mutex_destroy(&t.m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("datamix");
	TCase *tc = tcase_create("datamix");
	unsigned n = env_uint("NVMEFS_DATAMIX_N", 4);
	tcase_set_timeout(tc, 60.0 + 20.0 * n * (env_uint("NVMEFS_TEST_SLOW", 0) ? 4 : 1));
	tcase_add_loop_test(tc, t_datamix, 0, 6);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}

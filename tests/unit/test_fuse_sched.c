/* test_fuse_sched.c - the request scheduler on a fake engine and a fake
 * pool: one deterministic case per wait reason (memory, queue slot, range
 * lock), the cases that deadlocked or starved before, bounce buffers and the
 * channel bound, give-up at destroy, and a randomized run (fixed seeds) of
 * thousands of mixed requests over two schedulers sharing range locks, with
 * a small pool, few queue slots and random completion order: every request
 * completes and the lock's invariants hold at every step. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "rqsched.h"

/* ck_assert records every passing check (a write(2) each): hot loops use
 * this instead */
#define REQUIRE(c, ...)                                  \
	do {                                              \
		if (!(c))                                 \
			ck_abort_msg(__VA_ARGS__);        \
	} while (0)

/* ---- fakes ---- */

#define MAXS 2

struct fake_pool {
	size_t cap, used, peak;
	unsigned allocs;
};

struct call {
	void (*fn)(void *);
	void *arg;
	struct call *next;
};

struct fake_cmd {
	struct trq *q;
	struct fake_cmd *next;
};

/* one fake reactor: a pool, a queue with a few slots, its call queue */
struct fake_rx {
	struct fake_pool pool;
	unsigned slots, busy;
	struct call *calls, **calls_tail;
	unsigned nr_calls;
	struct sched *s;
	unsigned rooms;
};

struct trq {
	struct sched_rq sq; /* first */
	int id;
	struct fake_rx *rx;
	unsigned stages, ran;   /* commands to submit, submitted */
	unsigned inflight;
	int aborted;            /* errnum given to abort, or -1 */
	bool marked;            /* owns its blocks in owner[] */
	uint8_t pattern;        /* payload byte, 0: no payload */
	size_t payload_off, payload_len;
};

static struct fake_rx rxs[MAXS];
static struct fake_cmd *cmds; /* in flight, any reactor */
static unsigned nr_cmds;
static int finished[100000];
static int owner[4][1024];    /* lock, block -> running locked request id + 1 */
static struct rlock *lock_base; /* owner's first index: sq.lock - lock_base */
static unsigned nr_finished, nr_aborted;

static void *pool_alloc(void *ctx, size_t len)
{
	struct fake_rx *rx = ctx;

	if (rx->pool.used + len > rx->pool.cap)
		return NULL;
	rx->pool.used += len;
	if (rx->pool.used > rx->pool.peak)
		rx->pool.peak = rx->pool.used;
	rx->pool.allocs++;
	return malloc(len);
}

static void pool_free(void *ctx, void *buf, size_t len)
{
	struct fake_rx *rx = ctx;

	REQUIRE(rx->pool.used >= len, "pool underflow");
	rx->pool.used -= len;
	free(buf);
}

static int fake_call(void *ctx, void (*fn)(void *), void *arg)
{
	struct fake_rx *rx = ctx;
	struct call *c = malloc(sizeof(*c));

	REQUIRE(c, "malloc");
	c->fn = fn;
	c->arg = arg;
	c->next = NULL;
	*rx->calls_tail = c;
	rx->calls_tail = &c->next;
	rx->nr_calls++;
	return 0;
}

static void on_room(void *arg)
{
	((struct fake_rx *)arg)->rooms++;
}

static bool run_one_call(struct fake_rx *rx)
{
	struct call *c = rx->calls;

	if (!c)
		return false;
	rx->calls = c->next;
	if (!rx->calls)
		rx->calls_tail = &rx->calls;
	rx->nr_calls--;
	c->fn(c->arg);
	free(c);
	return true;
}

static void setup_rx(unsigned i, size_t pool, unsigned slots, size_t bounce_max)
{
	struct fake_rx *rx = &rxs[i];
	struct sched_env env = {pool_alloc, pool_free, fake_call, rx};
	struct sched_opts o = {
		.rq_size = sizeof(struct trq),
		.max_rq = 4096,
		.bounce_max = bounce_max,
		.max_payload = 4096,
		.on_room = on_room,
		.room_arg = rx,
	};

	memset(rx, 0, sizeof(*rx));
	rx->pool.cap = pool;
	rx->slots = slots;
	rx->calls_tail = &rx->calls;
	ck_assert_int_eq(sched_create(&env, &o, &rx->s), 0);
}

static void reset(void)
{
	cmds = NULL;
	nr_cmds = 0;
	nr_finished = nr_aborted = 0;
	memset(finished, 0, sizeof(finished));
	memset(owner, 0, sizeof(owner));
	lock_base = NULL;
}

/* ---- the fake request ---- */

static enum sched_res t_run(struct sched_rq *sq)
{
	struct trq *q = (struct trq *)sq;
	struct fake_rx *rx = q->rx;

	/* the scheduler's promise: memory and grant are held */
	REQUIRE(!sq->mem || sq->dma, "request %d runs without memory", q->id);
	if (sq->lock) {
		REQUIRE(sq->le.granted, "request %d runs without its grant", q->id);
		if (!q->marked) {
			int *ow = owner[lock_base ? sq->lock - lock_base : 0];
			for (uint64_t b = sq->lb0; b < sq->lb1; b++) {
				REQUIRE(ow[b] == 0, "block %llu: %d and %d overlap",
					      (unsigned long long)b, ow[b] - 1, q->id);
				ow[b] = q->id + 1;
			}
			q->marked = true;
		}
	}
	if (q->ran == 0 && q->pattern) {
		const uint8_t *p = (const uint8_t *)sq->dma + q->payload_off;
		for (size_t i = 0; i < q->payload_len; i++)
			REQUIRE(p[i] == q->pattern, "request %d: payload byte %zu", q->id, i);
	}
	if (rx->busy >= rx->slots)
		return SCHED_STALL;
	rx->busy++;
	q->ran++;
	q->inflight++;
	struct fake_cmd *c = malloc(sizeof(*c));
	REQUIRE(c, "malloc");
	c->q = q;
	c->next = cmds;
	cmds = c;
	nr_cmds++;
	return SCHED_ASYNC;
}

static void t_abort(struct sched_rq *sq, int errnum)
{
	struct trq *q = (struct trq *)sq;

	q->aborted = errnum;
	nr_aborted++;
	finished[q->id] = errnum ? -errnum : -1000;
}

/* Complete command k of the in-flight list. */
static void complete(unsigned k)
{
	struct fake_cmd **pp = &cmds, *c;

	while (k--)
		pp = &(*pp)->next;
	c = *pp;
	*pp = c->next;
	nr_cmds--;
	struct trq *q = c->q;
	free(c);
	q->rx->busy--;
	q->inflight--;
	if (q->ran < q->stages) {
		sched_resume(&q->sq);
		return;
	}
	if (q->sq.lock)
		for (uint64_t b = q->sq.lb0; b < q->sq.lb1; b++)
			owner[lock_base ? q->sq.lock - lock_base : 0][b] = 0;
	REQUIRE(finished[q->id] == 0, "request %d finished twice", q->id);
	finished[q->id] = 1;
	nr_finished++;
	sched_finish(&q->sq, 0);
}

static struct trq *mk(unsigned r, int id, size_t mem, struct rlock *lk, uint64_t lb0,
		      uint64_t lb1, unsigned stages)
{
	struct trq *q = (struct trq *)sched_rq_new(rxs[r].s, FUSEFS_OP_WRITE);

	ck_assert_ptr_nonnull(q);
	q->id = id;
	q->rx = &rxs[r];
	q->stages = stages;
	q->aborted = -1;
	q->sq.mem = mem;
	q->sq.lock = lk;
	q->sq.lb0 = lb0;
	q->sq.lb1 = lb1;
	q->sq.run = t_run;
	q->sq.abort = t_abort;
	q->sq.bytes = mem;
	return q;
}

static struct fusefs_stats st(unsigned r)
{
	struct fusefs_stats s;

	memset(&s, 0, sizeof(s));
	sched_stats_add(rxs[r].s, &s);
	return s;
}

/* ---- one case per wait reason ---- */

START_TEST(t_wait_memory)
{
	reset();
	setup_rx(0, 8192, 8, 0);
	struct trq *a = mk(0, 1, 8192, NULL, 0, 0, 1);
	sched_start(&a->sq);
	struct trq *b = mk(0, 2, 4096, NULL, 0, 0, 1);
	sched_start(&b->sq);
	ck_assert_uint_eq(b->ran, 0);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_MEM], 1);
	ck_assert_uint_eq(st(0).waits[FUSEFS_WAIT_MEM], 1);
	complete(0); /* a: its buffer comes back, b gets it */
	ck_assert_uint_eq(b->ran, 1);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_MEM], 0);
	complete(0);
	ck_assert_uint_eq(nr_finished, 2);
	ck_assert_uint_eq(rxs[0].pool.used, 0);
	ck_assert_uint_eq(sched_destroy(rxs[0].s, EIO), 0);
}
END_TEST

/* A large request at the head of the memory queue is not overtaken by small
 * ones (it would starve), and a request that needs no memory does not wait
 * behind it. */
START_TEST(t_memory_fifo_and_bypass)
{
	reset();
	setup_rx(0, 12288, 8, 0);
	struct trq *a = mk(0, 1, 8192, NULL, 0, 0, 1);
	sched_start(&a->sq);
	struct trq *big = mk(0, 2, 12288, NULL, 0, 0, 1);
	sched_start(&big->sq);
	struct trq *small = mk(0, 3, 4096, NULL, 0, 0, 1);
	sched_start(&small->sq);
	ck_assert_uint_eq(small->ran, 0); /* 4 KiB free, but big is first */
	struct trq *nomem = mk(0, 4, 0, NULL, 0, 0, 1);
	sched_start(&nomem->sq);
	ck_assert_uint_eq(nomem->ran, 1);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_MEM], 2);
	/* complete a (the first command in the list is the newest: nomem) */
	complete(1);
	ck_assert_uint_eq(big->ran, 1);
	ck_assert_uint_eq(small->ran, 0);
	complete(0); /* nomem */
	complete(0); /* big */
	ck_assert_uint_eq(small->ran, 1);
	complete(0);
	ck_assert_uint_eq(nr_finished, 4);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

START_TEST(t_wait_slot)
{
	reset();
	setup_rx(0, 1 << 20, 1, 0);
	struct trq *a = mk(0, 1, 4096, NULL, 0, 0, 2);
	struct trq *b = mk(0, 2, 4096, NULL, 0, 0, 1);
	sched_start(&a->sq);
	sched_start(&b->sq);
	ck_assert_uint_eq(a->ran, 1);
	ck_assert_uint_eq(b->ran, 0);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_SLOT], 1);
	/* a's second command: it was in flight first, but b waits already;
	 * a resumes ahead (it holds everything) and stalls, then b */
	complete(0);
	ck_assert_uint_eq(a->ran + b->ran, 2);
	complete(0);
	sched_kick(rxs[0].s);
	complete(0);
	ck_assert_uint_eq(nr_finished, 2);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_SLOT], 0);
	ck_assert_uint_ge(st(0).waits[FUSEFS_WAIT_SLOT], 1);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

START_TEST(t_wait_lock)
{
	struct rlock lk;

	reset();
	rlock_init(&lk);
	setup_rx(0, 1 << 20, 8, 0);
	struct trq *a = mk(0, 1, 4096, &lk, 0, 8, 1);
	struct trq *b = mk(0, 2, 4096, &lk, 4, 12, 1);
	struct trq *c = mk(0, 3, 4096, &lk, 12, 16, 1);
	sched_start(&a->sq);
	sched_start(&b->sq);
	sched_start(&c->sq);
	ck_assert_uint_eq(a->ran, 1);
	ck_assert_uint_eq(b->ran, 0);
	ck_assert_uint_eq(c->ran, 1);
	ck_assert_ptr_nonnull(b->sq.dma); /* memory first, then the lock */
	struct fusefs_stats s = st(0);
	ck_assert_uint_eq(s.parked[FUSEFS_WAIT_LOCK], 1);
	ck_assert_uint_eq(s.lock_waits, 1);
	complete(1); /* a */
	ck_assert_uint_eq(b->ran, 1);
	complete(0);
	complete(0);
	ck_assert_uint_eq(nr_finished, 3);
	s = st(0);
	ck_assert_uint_eq(s.parked[FUSEFS_WAIT_LOCK], 0);
	ck_assert_uint_eq(s.op[FUSEFS_OP_WRITE].count, 3);
	sched_destroy(rxs[0].s, EIO);
	rlock_destroy(&lk);
}
END_TEST

/* The deadlock found with fio: lock waiters hold memory; a large request
 * waits for memory at the head of the memory queue; when the holder
 * finishes, the granted waiter must run although the memory waiter is
 * still stuck (before, the retry stopped at the memory waiter). */
START_TEST(t_grant_not_behind_memory)
{
	struct rlock lk;

	reset();
	rlock_init(&lk);
	setup_rx(0, 16384, 8, 0);
	struct trq *h = mk(0, 1, 4096, &lk, 0, 1, 1);
	struct trq *w1 = mk(0, 2, 4096, &lk, 0, 1, 1);
	struct trq *w2 = mk(0, 3, 4096, &lk, 0, 1, 1);
	struct trq *big = mk(0, 4, 16384, NULL, 0, 0, 1);
	sched_start(&h->sq);
	sched_start(&w1->sq);
	sched_start(&w2->sq);
	sched_start(&big->sq);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_MEM], 1);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_LOCK], 2);
	complete(0); /* h */
	ck_assert_uint_eq(w1->ran, 1);
	complete(0); /* w1 */
	ck_assert_uint_eq(w2->ran, 1);
	ck_assert_uint_eq(big->ran, 0);
	complete(0); /* w2: now the whole pool is free */
	ck_assert_uint_eq(big->ran, 1);
	complete(0);
	ck_assert_uint_eq(nr_finished, 4);
	ck_assert_uint_gt(st(0).lock_wait_ns, 0);
	sched_destroy(rxs[0].s, EIO);
	rlock_destroy(&lk);
}
END_TEST

/* A grant for a request of another reactor goes through that reactor's
 * call queue and runs there. */
START_TEST(t_grant_across_reactors)
{
	struct rlock lk;

	reset();
	rlock_init(&lk);
	setup_rx(0, 1 << 20, 8, 0);
	setup_rx(1, 1 << 20, 8, 0);
	struct trq *a = mk(0, 1, 4096, &lk, 0, 4, 1);
	struct trq *b = mk(1, 2, 4096, &lk, 2, 6, 1);
	sched_start(&a->sq);
	sched_start(&b->sq);
	ck_assert_uint_eq(b->ran, 0);
	complete(0);
	ck_assert_uint_eq(b->ran, 0);
	ck_assert_uint_eq(rxs[1].nr_calls, 1);
	ck_assert(run_one_call(&rxs[1]));
	ck_assert_uint_eq(b->ran, 1);
	complete(0);
	ck_assert_uint_eq(nr_finished, 2);
	sched_destroy(rxs[0].s, EIO);
	sched_destroy(rxs[1].s, EIO);
	rlock_destroy(&lk);
}
END_TEST

/* More than the pool can ever give, with nothing else holding memory. */
START_TEST(t_never_fits)
{
	reset();
	setup_rx(0, 8192, 8, 0);
	struct trq *a = mk(0, 1, 16384, NULL, 0, 0, 1);
	sched_start(&a->sq);
	sched_kick(rxs[0].s);
	ck_assert_int_eq(a->aborted, ENOMEM);
	ck_assert_uint_eq(st(0).op[FUSEFS_OP_WRITE].errors, 1);
	ck_assert_uint_eq(sched_inflight(rxs[0].s), 0);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* Write data waiting for memory is held in bounce buffers within the
 * budget; at the budget the channel is told to stop, and told to go on once
 * a buffer frees; the data reaches the DMA buffer intact. */
START_TEST(t_bounce_budget)
{
	reset();
	setup_rx(0, 8192, 8, 8192);
	struct trq *a = mk(0, 1, 8192, NULL, 0, 0, 1);
	uint8_t *p = sched_payload(&a->sq, 0, 4096);
	memset(p, 0x11, 4096);
	a->pattern = 0x11, a->payload_len = 4096;
	ck_assert_ptr_eq(p, a->sq.dma); /* memory was free: straight in */
	sched_start(&a->sq);
	ck_assert(sched_accepting(rxs[0].s));
	struct trq *b = mk(0, 2, 8192, NULL, 0, 0, 1);
	p = sched_payload(&b->sq, 100, 4096);
	ck_assert_ptr_null(b->sq.dma);
	memset(p, 0x22, 4096);
	b->pattern = 0x22, b->payload_off = 100, b->payload_len = 4096;
	sched_start(&b->sq);
	ck_assert_uint_eq(st(0).bounce_bytes, 4096);
	ck_assert(sched_accepting(rxs[0].s));
	struct trq *c = mk(0, 3, 4096, NULL, 0, 0, 1);
	p = sched_payload(&c->sq, 0, 4096);
	memset(p, 0x33, 4096);
	c->pattern = 0x33, c->payload_len = 4096;
	sched_start(&c->sq);
	ck_assert_uint_eq(st(0).bounce_bytes, 8192);
	ck_assert(!sched_accepting(rxs[0].s)); /* one more payload would not fit */
	ck_assert_uint_eq(st(0).channel_pauses, 1);
	complete(0); /* a: b gets memory, its bounce is freed */
	ck_assert_uint_eq(b->ran, 1);
	ck_assert_uint_eq(rxs[0].rooms, 1);
	ck_assert_uint_eq(st(0).bounce_peak, 8192);
	complete(0);
	complete(0);
	ck_assert_uint_eq(nr_finished, 3);
	ck_assert_uint_eq(st(0).bounce_bytes, 0);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* Destroy gives up on what still waits: aborts each, frees its memory. */
START_TEST(t_destroy_abandons)
{
	struct rlock lk;

	reset();
	rlock_init(&lk);
	setup_rx(0, 8192, 1, 0);
	struct trq *a = mk(0, 1, 4096, &lk, 0, 2, 1);
	struct trq *b = mk(0, 2, 4096, &lk, 0, 2, 1);   /* lock */
	struct trq *c = mk(0, 3, 8192, NULL, 0, 0, 1);  /* memory */
	struct trq *d = mk(0, 4, 0, NULL, 0, 0, 1);     /* slot */
	sched_start(&a->sq);
	sched_start(&b->sq);
	uint8_t *p = sched_payload(&c->sq, 0, 4096);
	memset(p, 1, 4096);
	sched_start(&c->sq);
	sched_start(&d->sq);
	struct fusefs_stats s = st(0);
	ck_assert_uint_eq(s.parked[FUSEFS_WAIT_LOCK], 1);
	ck_assert_uint_eq(s.parked[FUSEFS_WAIT_MEM], 1);
	ck_assert_uint_eq(s.parked[FUSEFS_WAIT_SLOT], 1);
	ck_assert_uint_eq(s.inflight, 4);
	sched_close(rxs[0].s);
	ck_assert_uint_eq(sched_destroy(rxs[0].s, EIO), 4);
	ck_assert_uint_eq(nr_aborted, 4);
	ck_assert_uint_eq(rxs[0].pool.used, 0);
	/* a's command is still "in flight" in the fake: drop it */
	while (cmds) {
		struct fake_cmd *x = cmds;
		cmds = x->next;
		free(x);
	}
	rlock_destroy(&lk);
}
END_TEST

/* ---- randomized ---- */

#define NREQ 4000
#define NLOCK 2
#define BLOCKS 64

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const uint64_t seeds[] = {7, 99, 31337, 0x5eed5eed, 2718281828u, 161803398};

static void check_locks(struct rlock *lk)
{
	for (unsigned i = 0; i < NLOCK; i++) {
		const char *why = NULL;
		REQUIRE(rlock_check(&lk[i], &why) == 0, "lock %u: %s", i, why);
	}
}

START_TEST(t_random)
{
	uint64_t s = seeds[_i];
	struct rlock lk[NLOCK];
	unsigned next = 0, steps = 0, idle = 0;

	reset();
	lock_base = lk;
	for (unsigned i = 0; i < NLOCK; i++)
		rlock_init(&lk[i]);
	/* small pools (the largest request is 64 KiB), two or three slots */
	setup_rx(0, 64 << 10, 2, 128 << 10);
	setup_rx(1, 96 << 10, 3, 128 << 10);
	while (nr_finished < NREQ) {
		unsigned what = (unsigned)(rnd(&s) % 100);
		bool progress = false;

		REQUIRE(++steps < 50u * NREQ, "no end after %u steps", steps);
		if (what < 40 && next < NREQ) {
			unsigned r = (unsigned)(rnd(&s) % MAXS);
			if (sched_accepting(rxs[r].s)) {
				size_t mem = (rnd(&s) % 5 == 0) ? 0 : 512 * (1 + rnd(&s) % 128);
				bool locked = rnd(&s) % 4 != 0;
				uint64_t lb0 = rnd(&s) % BLOCKS;
				uint64_t lb1 = lb0 + 1 + rnd(&s) % (rnd(&s) % 3 ? 4 : 32);
				struct trq *q = mk(r, (int)next, mem,
						   locked ? &lk[rnd(&s) % NLOCK] : NULL, lb0,
						   lb1 > BLOCKS ? BLOCKS : lb1,
						   1 + (unsigned)(rnd(&s) % 3));
				if (mem && rnd(&s) % 2) {
					size_t len = 1 + rnd(&s) % (mem < 4096 ? mem : 4096);
					size_t off = rnd(&s) % (mem - len + 1);
					uint8_t *p = sched_payload(&q->sq, off, len);
					REQUIRE(p, "no bounce buffer within the budget");
					q->pattern = (uint8_t)(1 + next % 250);
					q->payload_off = off;
					q->payload_len = len;
					memset(p, q->pattern, len);
				}
				sched_start(&q->sq);
				next++;
				progress = true;
			}
		} else if (what < 80 && nr_cmds) {
			complete((unsigned)(rnd(&s) % nr_cmds));
			progress = true;
		} else if (what < 90) {
			progress = run_one_call(&rxs[rnd(&s) % MAXS]);
		} else {
			/* a loop pass */
			sched_kick(rxs[rnd(&s) % MAXS].s);
		}
		check_locks(lk);
		idle = progress ? 0 : idle + 1;
		/* nothing in flight, no call pending, every request taken:
		 * whatever still waits must be runnable by a pass */
		if (!nr_cmds && !rxs[0].nr_calls && !rxs[1].nr_calls && next == NREQ &&
		    nr_finished < NREQ) {
			sched_kick(rxs[0].s);
			sched_kick(rxs[1].s);
			REQUIRE(nr_cmds || rxs[0].nr_calls || rxs[1].nr_calls,
				      "stuck: %u of %u finished, nothing in flight", nr_finished,
				      NREQ);
		}
	}
	for (unsigned i = 0; i < NREQ; i++)
		ck_assert_int_eq(finished[i], 1);
	for (unsigned r = 0; r < MAXS; r++) {
		struct fusefs_stats x = st(r);
		ck_assert_uint_eq(x.inflight, 0);
		for (unsigned w = 0; w < FUSEFS_WAIT_NR; w++)
			ck_assert_uint_eq(x.parked[w], 0);
		ck_assert_uint_eq(rxs[r].pool.used, 0);
		ck_assert_uint_le(rxs[r].pool.peak, rxs[r].pool.cap);
		ck_assert_uint_eq(x.bounce_bytes, 0);
		ck_assert_uint_le(x.bounce_peak, 128 << 10);
	}
	/* the mix made every reason happen */
	struct fusefs_stats a = st(0), b = st(1);
	for (unsigned w = 0; w < FUSEFS_WAIT_NR; w++)
		ck_assert_uint_gt(a.waits[w] + b.waits[w], 0);
	ck_assert_uint_eq(a.op[FUSEFS_OP_WRITE].count + b.op[FUSEFS_OP_WRITE].count, NREQ);
	ck_assert_uint_eq(nr_aborted, 0);
	for (unsigned r = 0; r < MAXS; r++)
		ck_assert_uint_eq(sched_destroy(rxs[r].s, EIO), 0);
	for (unsigned i = 0; i < NLOCK; i++)
		rlock_destroy(&lk[i]);
	(void)idle;
}
END_TEST

int main(void)
{
	/* the fake pool mallocs and frees buffers all the time: keep glibc
	 * from trimming and mapping for each */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	Suite *s = suite_create("fuse_sched");
	TCase *tc = tcase_create("sched");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_wait_memory);
	tcase_add_test(tc, t_memory_fifo_and_bypass);
	tcase_add_test(tc, t_wait_slot);
	tcase_add_test(tc, t_wait_lock);
	tcase_add_test(tc, t_grant_not_behind_memory);
	tcase_add_test(tc, t_grant_across_reactors);
	tcase_add_test(tc, t_never_fits);
	tcase_add_test(tc, t_bounce_budget);
	tcase_add_test(tc, t_destroy_abandons);
	tcase_add_loop_test(tc, t_random, 0, sizeof(seeds) / sizeof(seeds[0]));
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

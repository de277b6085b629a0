/* test_fuse_sched.c - the request scheduler on a fake engine and a fake
 * pool: one deterministic case per wait reason (memory, queue slot, range
 * lock), the cases that deadlocked or starved before, bounce buffers and the
 * channel bound, give-up at destroy, and a randomized run (fixed seeds) of
 * thousands of mixed requests over two schedulers sharing range locks, with
 * a small pool, few queue slots and random completion order: every request
 * completes and the lock's invariants hold at every step.
 *
 * Slot domains (one per controller): a domain whose commands never complete
 * (a hung controller) holds up no request of another domain (reads, writes
 * with memory, lock waiters), FIFO order within a domain, the memory queue
 * and the per-domain memory bound, the bounce budget and the request cap
 * (shared by the domains, as documented), and a randomized run over three
 * domains with random hangs checking after every step that no request waits
 * for anything of another domain but free pool memory.  The fake pool
 * counts bytes: it does not model a buddy pool's fragmentation. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#define MAXD 3 /* slot domains */

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

/* one fake reactor: a pool, a queue with a few slots per domain, its call
 * queue */
struct fake_rx {
	struct fake_pool pool;
	unsigned slots[MAXD], busy[MAXD];
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
	unsigned li;            /* index in livev + 1 */
	bool marked;            /* owns its blocks in owner[] */
	uint8_t pattern;        /* payload byte, 0: no payload */
	size_t payload_off, payload_len;
};

static struct fake_rx rxs[MAXS];
static struct fake_cmd *cmds; /* in flight, any reactor */
static unsigned nr_cmds;
static int finished[100000];
static int owner[8][1024];    /* lock, block -> running locked request id + 1 */
static int run_order[100000]; /* ids in the order of their first command */
static unsigned nr_run;
/* live requests, for the randomized runs' checks (li: index + 1, 0: not
 * tracked) */
static struct trq *livev[100000];
static unsigned nr_live;
static bool tracking;
static struct rlock *lock_base; /* owner's first index: sq.lock - lock_base */
static unsigned nr_finished, nr_aborted;

static void *pool_alloc(void *ctx, unsigned dom, size_t len)
{
	(void)dom;
	struct fake_rx *rx = ctx;

	if (rx->pool.used + len > rx->pool.cap)
		return NULL;
	rx->pool.used += len;
	if (rx->pool.used > rx->pool.peak)
		rx->pool.peak = rx->pool.used;
	rx->pool.allocs++;
	return malloc(len);
}

static void pool_free(void *ctx, unsigned dom, void *buf, size_t len)
{
	(void)dom;
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

/* A buddy pool's cost: the length rounded up to a power of two. */
static size_t pow2_cost(void *ctx, size_t len)
{
	size_t c = 512;

	(void)ctx;
	while (c < len)
		c <<= 1;
	return c;
}

/* A reactor's once-per-pass time, set by the test (fake_clock_on: given to
 * the schedulers set up next as their env.now). */
static bool fake_clock_on;
static uint64_t fake_now;
static unsigned fake_now_reads;

static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	fake_now_reads++;
	return fake_now;
}

static void setup_rx_opts(unsigned i, size_t pool, unsigned slots, size_t bounce_max,
			  unsigned nr_dom, size_t dom_mem_max, unsigned max_rq, bool pow2)
{
	struct fake_rx *rx = &rxs[i];
	struct sched_env env = {pool_alloc, pool_free, fake_call, rx, pow2 ? pow2_cost : NULL,
				fake_clock_on ? fake_clock : NULL};
	struct sched_opts o = {
		.rq_size = sizeof(struct trq),
		.max_rq = max_rq,
		.bounce_max = bounce_max,
		.max_payload = 4096,
		.nr_dom = nr_dom,
		.dom_mem_max = dom_mem_max,
		.on_room = on_room,
		.room_arg = rx,
	};

	memset(rx, 0, sizeof(*rx));
	rx->pool.cap = pool;
	for (unsigned d = 0; d < MAXD; d++)
		rx->slots[d] = slots;
	rx->calls_tail = &rx->calls;
	ck_assert_int_eq(sched_create(&env, &o, &rx->s), 0);
}

static void setup_rx(unsigned i, size_t pool, unsigned slots, size_t bounce_max)
{
	setup_rx_opts(i, pool, slots, bounce_max, 1, 0, 4096, false);
}

static void reset(void)
{
	cmds = NULL;
	nr_cmds = 0;
	nr_finished = nr_aborted = 0;
	memset(finished, 0, sizeof(finished));
	memset(owner, 0, sizeof(owner));
	lock_base = NULL;
	nr_run = 0;
	nr_live = 0;
	tracking = false;
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
	if (rx->busy[sq->dom] >= rx->slots[sq->dom])
		return SCHED_STALL;
	rx->busy[sq->dom]++;
	if (q->ran == 0)
		run_order[nr_run++] = q->id;
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
	q->rx->busy[q->sq.dom]--;
	q->inflight--;
	if (q->ran < q->stages) {
		sched_resume(&q->sq);
		return;
	}
	if (q->li) {
		/* untrack before sched_finish recycles it */
		livev[q->li - 1] = livev[--nr_live];
		livev[q->li - 1]->li = q->li;
		q->li = 0;
	}
	if (q->sq.lock)
		for (uint64_t b = q->sq.lb0; b < q->sq.lb1; b++)
			owner[lock_base ? q->sq.lock - lock_base : 0][b] = 0;
	REQUIRE(finished[q->id] == 0, "request %d finished twice", q->id);
	finished[q->id] = 1;
	nr_finished++;
	sched_finish(&q->sq, 0);
}

static struct trq *mkd(unsigned r, unsigned dom, int id, size_t mem, struct rlock *lk,
		       uint64_t lb0, uint64_t lb1, unsigned stages)
{
	struct trq *q = (struct trq *)sched_rq_new(rxs[r].s, FUSEFS_OP_WRITE);

	REQUIRE(q, "no request %d", id);
	q->sq.dom = (uint16_t)dom;
	if (tracking) {
		livev[nr_live++] = q;
		q->li = nr_live;
	}
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

static struct trq *mk(unsigned r, int id, size_t mem, struct rlock *lk, uint64_t lb0,
		      uint64_t lb1, unsigned stages)
{
	return mkd(r, 0, id, mem, lk, lb0, lb1, stages);
}

/* Complete the oldest command in flight of domain dom on reactor r; false
 * if it has none. */
static bool complete_dom(unsigned r, unsigned dom)
{
	struct fake_cmd *c;
	unsigned k = 0, found = 0;
	bool any = false;

	for (c = cmds; c; c = c->next, k++)
		if (c->q->rx == &rxs[r] && c->q->sq.dom == dom) {
			found = k; /* the list is newest first: keep the last */
			any = true;
		}
	if (any)
		complete(found);
	return any;
}

static unsigned waiting(const struct trq *q)
{
	return q->sq.wait ? q->sq.wait - 1u : FUSEFS_WAIT_NR;
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

/* A namespace's figures: in flight from sched_rq_ns to the release (an
 * abort included), counted by kind when answered, queue time only for
 * the one that waited, busy time while any is in flight, answers without a
 * request (sched_count) counted too. */
START_TEST(t_ns_stats)
{
	static struct sched_ns_stats nst;
	struct fusefs_ns_stats out;

	reset();
	memset(&nst, 0, sizeof(nst));
	setup_rx(0, 8192, 8, 0);
	struct trq *a = mk(0, 1, 8192, NULL, 0, 0, 1);
	struct trq *b = mk(0, 2, 4096, NULL, 0, 0, 1);
	sched_rq_ns(&a->sq, &nst);
	sched_rq_ns(&b->sq, &nst);
	sched_start(&a->sq);
	sched_start(&b->sq); /* waits for a's memory */
	memset(&out, 0, sizeof(out));
	sched_ns_stats_add(&nst, &out);
	ck_assert_uint_eq(out.inflight, 2);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].count, 0);
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL); /* b waits at least 2 ms */
	complete(0);          /* a answered; b runs */
	complete(0);          /* b answered */
	memset(&out, 0, sizeof(out));
	sched_ns_stats_add(&nst, &out);
	ck_assert_uint_eq(out.inflight, 0);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].count, 2);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].bytes, 8192 + 4096);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].errors, 0);
	ck_assert_uint_ge(out.op[FUSEFS_OP_WRITE].queue_ns, 2000000);
	ck_assert_uint_ge(out.op[FUSEFS_OP_WRITE].sum_ns, out.op[FUSEFS_OP_WRITE].queue_ns);
	ck_assert_uint_ge(out.busy_ns, 2000000);
	ck_assert_uint_ge(out.op[FUSEFS_OP_WRITE].sum_ns, out.busy_ns);
	uint64_t n = 0;
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++)
		n += out.op[FUSEFS_OP_WRITE].lat_ns[i];
	ck_assert_uint_eq(n, 2);
	/* an answer without a request, with an error */
	sched_count(rxs[0].s, &nst, FUSEFS_OP_READ, 0, EINVAL);
	/* an aborted request leaves flight uncounted as an answer */
	struct trq *c = mk(0, 3, 0, NULL, 0, 0, 1);
	sched_rq_ns(&c->sq, &nst);
	memset(&out, 0, sizeof(out));
	sched_ns_stats_add(&nst, &out);
	ck_assert_uint_eq(out.inflight, 1);
	ck_assert_uint_eq(out.op[FUSEFS_OP_READ].count, 1);
	ck_assert_uint_eq(out.op[FUSEFS_OP_READ].errors, 1);
	sched_close(rxs[0].s);
	ck_assert_uint_eq(sched_destroy(rxs[0].s, EIO), 1);
	memset(&out, 0, sizeof(out));
	sched_ns_stats_add(&nst, &out);
	ck_assert_uint_eq(out.inflight, 0);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].count, 2);
}
END_TEST

/* With env.now (a reactor's pass time) every latency, queue time and busy
 * time the scheduler counts comes from it, to the nanosecond. */
START_TEST(t_env_clock)
{
	static struct sched_ns_stats nst;
	struct fusefs_ns_stats out;

	reset();
	memset(&nst, 0, sizeof(nst));
	fake_clock_on = true;
	fake_now = 1000;
	fake_now_reads = 0;
	setup_rx(0, 8192, 8, 0);
	fake_clock_on = false;
	struct trq *a = mk(0, 1, 8192, NULL, 0, 0, 1);
	struct trq *b = mk(0, 2, 4096, NULL, 0, 0, 1);
	sched_rq_ns(&a->sq, &nst);
	sched_rq_ns(&b->sq, &nst);
	sched_start(&a->sq);
	sched_start(&b->sq); /* waits for a's memory from 1000 */
	fake_now = 4000;
	complete(0); /* a: 3000 ns; b runs after 3000 ns of waiting */
	fake_now = 9000;
	complete(0); /* b: 8000 ns */
	memset(&out, 0, sizeof(out));
	sched_ns_stats_add(&nst, &out);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].count, 2);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].sum_ns, 3000 + 8000);
	ck_assert_uint_eq(out.op[FUSEFS_OP_WRITE].queue_ns, 3000);
	ck_assert_uint_eq(out.busy_ns, 8000);
	ck_assert_uint_eq(st(0).op[FUSEFS_OP_WRITE].sum_ns, 3000 + 8000);
	ck_assert_uint_gt(fake_now_reads, 0);
	sched_close(rxs[0].s);
	ck_assert_uint_eq(sched_destroy(rxs[0].s, EIO), 0);
}
END_TEST

/* ---- slot domains: one controller's trouble ---- */

/* Domain 0's two slots hold commands that never complete (a hung
 * controller) and three more of its requests wait for a slot; domain 1's
 * read without memory, two-command write with memory and lock waiter all run
 * at once or as soon as their own domain lets them.  Then domain 0 comes
 * back and its waiting requests run in arrival order. */
START_TEST(t_dom_slot_isolation)
{
	struct rlock lk;
	struct trq *a[5];

	reset();
	rlock_init(&lk);
	setup_rx_opts(0, 1 << 20, 2, 0, 2, 0, 4096, false);
	for (int i = 0; i < 5; i++) {
		a[i] = mkd(0, 0, i + 1, 4096, NULL, 0, 0, 1);
		sched_start(&a[i]->sq);
	}
	ck_assert_uint_eq(a[1]->ran, 1);
	for (int i = 2; i < 5; i++)
		ck_assert_uint_eq(waiting(a[i]), FUSEFS_WAIT_SLOT);
	struct trq *rd = mkd(0, 1, 10, 0, NULL, 0, 0, 1);
	struct trq *wr = mkd(0, 1, 11, 8192, NULL, 0, 0, 2);
	struct trq *l1 = mkd(0, 1, 12, 4096, &lk, 0, 4, 1);
	struct trq *l2 = mkd(0, 1, 13, 4096, &lk, 2, 6, 1);
	sched_start(&rd->sq);
	ck_assert_uint_eq(rd->ran, 1); /* not behind domain 0's stalled head */
	sched_start(&wr->sq);
	ck_assert_uint_eq(wr->ran, 1);
	sched_start(&l1->sq);
	sched_start(&l2->sq);
	ck_assert_uint_eq(waiting(l1), FUSEFS_WAIT_SLOT); /* its own domain's two slots */
	ck_assert_uint_eq(waiting(l2), FUSEFS_WAIT_LOCK);
	sched_kick(rxs[0].s); /* a loop pass changes nothing */
	ck_assert_uint_eq(a[2]->ran + l1->ran, 0);
	/* only domain 1 completes */
	while (complete_dom(0, 1))
		;
	for (int id = 10; id <= 13; id++)
		ck_assert_int_eq(finished[id], 1);
	for (int i = 2; i < 5; i++)
		ck_assert_uint_eq(waiting(a[i]), FUSEFS_WAIT_SLOT);
	ck_assert_uint_eq(rxs[0].busy[0], 2);
	/* domain 0 is back: the waiting ones run in arrival order */
	while (complete_dom(0, 0))
		;
	ck_assert_uint_eq(nr_finished, 9);
	unsigned k = 0;
	for (unsigned i = 0; i < nr_run; i++)
		if (run_order[i] <= 5)
			ck_assert_int_eq(run_order[i], (int)++k);
	ck_assert_uint_eq(k, 5);
	ck_assert_uint_eq(st(0).parked[FUSEFS_WAIT_SLOT], 0);
	sched_destroy(rxs[0].s, EIO);
	rlock_destroy(&lk);
}
END_TEST

/* FIFO within a domain however the domains' requests interleave and
 * whichever domain completes first; the ready queue of one domain never
 * orders another's. */
START_TEST(t_dom_fifo)
{
	static const unsigned doms[] = {0, 0, 1, 0, 1, 2, 0, 1, 2, 2, 0, 1};
	const unsigned n = sizeof(doms) / sizeof(doms[0]);

	reset();
	setup_rx_opts(0, 1 << 20, 1, 0, 3, 0, 4096, false);
	for (unsigned i = 0; i < n; i++)
		sched_start(&mkd(0, doms[i], (int)i + 1, 512, NULL, 0, 0, 1)->sq);
	/* one slot each: the first of each domain runs */
	ck_assert_uint_eq(nr_run, 3);
	/* complete 2, 1, 0, 2, 2, 1, ... until all are done */
	for (unsigned step = 0; nr_finished < n; step++) {
		static const unsigned pick[] = {2, 1, 0, 2, 2, 1};
		unsigned d = pick[step % 6];

		REQUIRE(step < 100, "no end");
		complete_dom(0, d);
	}
	for (unsigned d = 0; d < 3; d++) {
		int last = 0;

		for (unsigned i = 0; i < nr_run; i++)
			if (doms[run_order[i] - 1] == d) {
				ck_assert_int_gt(run_order[i], last);
				last = run_order[i];
			}
	}
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* Domain 0 stops completing while it has many requests that need memory.
 * With the bound it holds at most dom_mem_max of the pool; the rest of its
 * requests wait in its own memory queue (its head does not allocate
 * although the pool could give it), and domain 1's requests take memory at
 * once, in front of domain 0's waiting head, and finish. */
START_TEST(t_dom_memory_bound)
{
	struct trq *a[8], *b[4];

	reset();
	setup_rx_opts(0, 64 << 10, 2, 0, 2, 32 << 10, 4096, false);
	for (int i = 0; i < 8; i++) {
		a[i] = mkd(0, 0, i + 1, 8192, NULL, 0, 0, 1);
		sched_start(&a[i]->sq);
	}
	/* two in flight, two holding memory for a slot, four for memory */
	ck_assert_uint_eq(waiting(a[2]), FUSEFS_WAIT_SLOT);
	ck_assert_uint_eq(waiting(a[3]), FUSEFS_WAIT_SLOT);
	for (int i = 4; i < 8; i++) {
		ck_assert_uint_eq(waiting(a[i]), FUSEFS_WAIT_MEM);
		ck_assert_ptr_null(a[i]->sq.dma);
	}
	ck_assert_uint_eq(rxs[0].pool.used, 32 << 10);
	for (int i = 0; i < 4; i++) {
		b[i] = mkd(0, 1, 20 + i, 8192, NULL, 0, 0, 1);
		sched_start(&b[i]->sq);
		ck_assert_ptr_nonnull(b[i]->sq.dma); /* not behind domain 0's memory head */
	}
	ck_assert_uint_eq(rxs[0].pool.used, 64 << 10);
	while (complete_dom(0, 1))
		;
	for (int id = 20; id < 24; id++)
		ck_assert_int_eq(finished[id], 1);
	ck_assert_uint_eq(rxs[0].pool.used, 32 << 10);
	ck_assert_uint_eq(waiting(a[4]), FUSEFS_WAIT_MEM); /* its own bound, not the pool */
	while (complete_dom(0, 0))
		;
	ck_assert_uint_eq(nr_finished, 12);
	ck_assert_uint_eq(rxs[0].pool.used, 0);
	ck_assert_uint_le(rxs[0].pool.peak, 64 << 10);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* Why the bound: without it the stuck domain takes the whole pool and the
 * other one waits for memory until the stuck one completes. */
START_TEST(t_dom_memory_unbounded)
{
	reset();
	setup_rx_opts(0, 64 << 10, 2, 0, 2, 0, 4096, false);
	for (int i = 0; i < 8; i++)
		sched_start(&mkd(0, 0, i + 1, 8192, NULL, 0, 0, 1)->sq);
	ck_assert_uint_eq(rxs[0].pool.used, 64 << 10);
	struct trq *b = mkd(0, 1, 20, 8192, NULL, 0, 0, 1);
	sched_start(&b->sq);
	ck_assert_uint_eq(waiting(b), FUSEFS_WAIT_MEM);
	ck_assert(!complete_dom(0, 1));
	complete_dom(0, 0);
	ck_assert_uint_eq(b->ran, 1);
	while (complete_dom(0, 0) || complete_dom(0, 1))
		;
	ck_assert_uint_eq(nr_finished, 9);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* The bound counts what the pool takes (env.buf_cost): 9 KiB costs 16 KiB
 * in a buddy pool, so two fill a 32 KiB bound.  A domain holding nothing
 * may take a request larger than the bound (else it could never run); the
 * next one of that domain waits for it. */
START_TEST(t_dom_memory_cost)
{
	reset();
	setup_rx_opts(0, 256 << 10, 8, 0, 2, 32 << 10, 4096, true);
	struct trq *a = mkd(0, 0, 1, 9 << 10, NULL, 0, 0, 1);
	struct trq *b = mkd(0, 0, 2, 9 << 10, NULL, 0, 0, 1);
	struct trq *c = mkd(0, 0, 3, 9 << 10, NULL, 0, 0, 1);
	sched_start(&a->sq);
	sched_start(&b->sq);
	sched_start(&c->sq);
	ck_assert_uint_eq(a->ran + b->ran, 2);
	ck_assert_uint_eq(waiting(c), FUSEFS_WAIT_MEM); /* 27 KiB asked, 48 KiB taken */
	complete_dom(0, 0);
	ck_assert_uint_eq(c->ran, 1);
	while (complete_dom(0, 0))
		;
	struct trq *big = mkd(0, 1, 4, 64 << 10, NULL, 0, 0, 1);
	struct trq *small = mkd(0, 1, 5, 4096, NULL, 0, 0, 1);
	sched_start(&big->sq);
	sched_start(&small->sq);
	ck_assert_uint_eq(big->ran, 1);
	ck_assert_uint_eq(waiting(small), FUSEFS_WAIT_MEM);
	complete_dom(0, 1);
	ck_assert_uint_eq(small->ran, 1);
	complete_dom(0, 1);
	ck_assert_uint_eq(nr_finished, 5);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* Bounce buffers: a write of a domain whose memory queue is busy bounces;
 * one of another domain goes straight into its DMA buffer.  The bounce
 * budget is the reactor's: the stuck domain's bounced writes fill it and the
 * channel pauses for every domain (documented), until one of them gets its
 * memory. */
START_TEST(t_dom_bounce)
{
	reset();
	setup_rx_opts(0, 16 << 10, 1, 8192, 2, 8192, 4096, false);
	struct trq *a1 = mkd(0, 0, 1, 8192, NULL, 0, 0, 1);
	sched_start(&a1->sq); /* in flight, holding its bound */
	struct trq *a2 = mkd(0, 0, 2, 4096, NULL, 0, 0, 1);
	uint8_t *p = sched_payload(&a2->sq, 0, 4096);
	ck_assert_ptr_null(a2->sq.dma);
	memset(p, 0xa2, 4096);
	a2->pattern = 0xa2, a2->payload_len = 4096;
	sched_start(&a2->sq);
	ck_assert_uint_eq(waiting(a2), FUSEFS_WAIT_MEM);
	struct trq *b1 = mkd(0, 1, 3, 4096, NULL, 0, 0, 1);
	p = sched_payload(&b1->sq, 0, 4096);
	ck_assert_ptr_eq(p, b1->sq.dma); /* no bounce: its domain waits for nothing */
	memset(p, 0xb1, 4096);
	b1->pattern = 0xb1, b1->payload_len = 4096;
	sched_start(&b1->sq);
	ck_assert_uint_eq(st(0).bounce_bytes, 4096);
	ck_assert(sched_accepting(rxs[0].s));
	struct trq *a3 = mkd(0, 0, 4, 4096, NULL, 0, 0, 1);
	p = sched_payload(&a3->sq, 0, 4096);
	memset(p, 0xa3, 4096);
	a3->pattern = 0xa3, a3->payload_len = 4096;
	sched_start(&a3->sq);
	ck_assert(!sched_accepting(rxs[0].s)); /* budget full: paused for both */
	complete_dom(0, 1);
	ck_assert_int_eq(finished[3], 1);
	ck_assert(!sched_accepting(rxs[0].s));
	ck_assert_uint_eq(rxs[0].rooms, 0);
	complete_dom(0, 0); /* a1: a2 gets its memory, its bounce goes */
	ck_assert_uint_eq(rxs[0].rooms, 1);
	ck_assert(sched_accepting(rxs[0].s));
	while (complete_dom(0, 0))
		;
	ck_assert_uint_eq(nr_finished, 4);
	ck_assert_uint_eq(st(0).bounce_bytes, 0);
	sched_destroy(rxs[0].s, EIO);
}
END_TEST

/* The request cap is the reactor's too: the stuck domain's requests count
 * against it; below it the other domain's requests are taken and finish; a
 * stuck domain that reaches it alone pauses the channel until one of its
 * requests finishes (documented: a request's controller is known only once
 * it has been read). */
START_TEST(t_dom_request_cap)
{
	reset();
	setup_rx_opts(0, 1 << 20, 2, 0, 2, 0, 8, false);
	for (int i = 0; i < 6; i++)
		sched_start(&mkd(0, 0, i + 1, 4096, NULL, 0, 0, 1)->sq);
	ck_assert(sched_accepting(rxs[0].s));
	struct trq *b = mkd(0, 1, 10, 4096, NULL, 0, 0, 1);
	sched_start(&b->sq);
	ck_assert_uint_eq(b->ran, 1);
	complete_dom(0, 1);
	ck_assert_int_eq(finished[10], 1);
	sched_start(&mkd(0, 0, 7, 4096, NULL, 0, 0, 1)->sq);
	sched_start(&mkd(0, 0, 8, 4096, NULL, 0, 0, 1)->sq);
	ck_assert(!sched_accepting(rxs[0].s));
	ck_assert_ptr_null(sched_rq_new(rxs[0].s, FUSEFS_OP_READ));
	ck_assert_uint_eq(st(0).channel_pauses, 1);
	complete_dom(0, 0);
	ck_assert_uint_eq(rxs[0].rooms, 1);
	ck_assert(sched_accepting(rxs[0].s));
	while (complete_dom(0, 0))
		;
	ck_assert_uint_eq(nr_finished, 9);
	sched_destroy(rxs[0].s, EIO);
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

static void check_locks(struct rlock *lk, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
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
		check_locks(lk, NLOCK);
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

/* ---- randomized, over slot domains ---- */

#define DREQ 6000
#define DLOCKS 2 /* range locks (namespaces) per domain */
#define DPOOL (192u << 10)
#define DBOUND (DPOOL / 2)

static bool hung[MAXD]; /* the domain's commands do not complete */

/* Complete a random command of a domain that is not hung. */
static bool complete_unhung(uint64_t *seed)
{
	struct fake_cmd *c;
	unsigned n = 0, k = 0;

	for (c = cmds; c; c = c->next)
		n += !hung[c->q->sq.dom];
	if (!n)
		return false;
	unsigned pick = (unsigned)(rnd(seed) % n);
	for (c = cmds; c; c = c->next, k++)
		if (!hung[c->q->sq.dom] && pick-- == 0)
			break;
	complete(k);
	return true;
}

/* After every step, per reactor and domain: a request waits only for its own
 * domain or for free pool memory.  No request waits for a slot while its
 * domain has one free; the memory queue's head (its oldest memory waiter)
 * can allocate neither within its domain's bound nor from the pool; a domain
 * holds at most its bound. */
static void check_domains(void)
{
	size_t held[MAXS][MAXD] = {{0}};
	struct trq *head[MAXS][MAXD] = {{NULL}};
	unsigned slotw[MAXS][MAXD] = {{0}};

	for (unsigned i = 0; i < nr_live; i++) {
		struct trq *q = livev[i];
		unsigned r = (unsigned)(q->rx - rxs), d = q->sq.dom;

		if (q->sq.dma)
			held[r][d] += pow2_cost(NULL, q->sq.mem);
		if (waiting(q) == FUSEFS_WAIT_SLOT)
			slotw[r][d]++;
		else if (waiting(q) == FUSEFS_WAIT_MEM && (!head[r][d] || q->id < head[r][d]->id))
			head[r][d] = q;
	}
	for (unsigned r = 0; r < MAXS; r++)
		for (unsigned d = 0; d < MAXD; d++) {
			struct trq *q = head[r][d];

			REQUIRE(!slotw[r][d] || rxs[r].busy[d] >= rxs[r].slots[d],
				"reactor %u domain %u: %u wait for a slot, %u of %u busy", r, d,
				slotw[r][d], rxs[r].busy[d], rxs[r].slots[d]);
			REQUIRE(held[r][d] <= DBOUND, "reactor %u domain %u holds %zu", r, d,
				held[r][d]);
			if (!q)
				continue;
			bool in_bound = !held[r][d] || held[r][d] + pow2_cost(NULL, q->sq.mem) <= DBOUND;
			bool in_pool = rxs[r].pool.used + q->sq.mem <= rxs[r].pool.cap;
			REQUIRE(!(in_bound && in_pool),
				"reactor %u domain %u: request %d waits for memory it could have", r, d,
				q->id);
		}
}

/* Start request id on a random reactor and domain if that reactor takes
 * requests; false if not. */
static bool issue(uint64_t *s, struct rlock *lk, int id)
{
	unsigned r = (unsigned)(rnd(s) % MAXS), d = (unsigned)(rnd(s) % MAXD);

	if (!sched_accepting(rxs[r].s))
		return false;
	size_t mem = (rnd(s) % 5 == 0) ? 0 : 512 * (1 + rnd(s) % 128);
	bool locked = rnd(s) % 4 != 0;
	uint64_t lb0 = rnd(s) % BLOCKS;
	uint64_t lb1 = lb0 + 1 + rnd(s) % (rnd(s) % 3 ? 4 : 32);
	/* a lock is a namespace's: of one domain */
	struct rlock *l = locked ? &lk[d * DLOCKS + rnd(s) % DLOCKS] : NULL;
	struct trq *q = mkd(r, d, id, mem, l, lb0, lb1 > BLOCKS ? BLOCKS : lb1,
			    1 + (unsigned)(rnd(s) % 3));
	if (mem && rnd(s) % 2) {
		size_t len = 1 + rnd(s) % (mem < 4096 ? mem : 4096);
		size_t off = rnd(s) % (mem - len + 1);
		uint8_t *p = sched_payload(&q->sq, off, len);
		REQUIRE(p, "no bounce buffer within the budget");
		q->pattern = (uint8_t)(1 + id % 250);
		q->payload_off = off;
		q->payload_len = len;
		memset(p, q->pattern, len);
	}
	sched_start(&q->sq);
	return true;
}

/* Complete, hand over and kick until nothing of a domain that is not hung
 * moves. */
static void drain(uint64_t *s)
{
	for (unsigned n = 0;; n++) {
		bool moved = complete_unhung(s);

		REQUIRE(n < 10u * DREQ, "no end to draining");
		for (unsigned r = 0; r < MAXS; r++)
			while (run_one_call(&rxs[r]))
				moved = true;
		check_domains();
		if (!moved) {
			sched_kick(rxs[0].s);
			sched_kick(rxs[1].s);
			check_domains();
			if (!complete_unhung(s))
				return;
		}
	}
}

/* Part 1: domain 0 never completes (hung) while requests of all three
 * domains come and go on two reactors; then what is not of domain 0 must
 * all finish with domain 0 still hung.  Part 2: domains hang and come back
 * at random; at the end every request has finished.  check_domains after
 * every step. */
START_TEST(t_random_domains)
{
	uint64_t s = seeds[_i];
	struct rlock lk[MAXD * DLOCKS];
	unsigned next = 0, steps = 0;

	reset();
	memset(hung, 0, sizeof(hung));
	tracking = true;
	lock_base = lk;
	for (unsigned i = 0; i < MAXD * DLOCKS; i++)
		rlock_init(&lk[i]);
	setup_rx_opts(0, DPOOL, 2, 128 << 10, MAXD, DBOUND, 4096, true);
	setup_rx_opts(1, DPOOL, 3, 128 << 10, MAXD, DBOUND, 4096, true);
	rxs[0].slots[1] = 1;
	rxs[1].slots[2] = 1;

	hung[0] = true;
	for (; steps < 20000 && next < DREQ / 2; steps++) {
		unsigned what = (unsigned)(rnd(&s) % 100);

		if (what < 40)
			next += issue(&s, lk, (int)next);
		else if (what < 80)
			complete_unhung(&s);
		else if (what < 90)
			run_one_call(&rxs[rnd(&s) % MAXS]);
		else
			sched_kick(rxs[rnd(&s) % MAXS].s);
		check_domains();
	}
	drain(&s);
	unsigned others = 0, stuck = 0;
	for (unsigned i = 0; i < nr_live; i++) {
		REQUIRE(livev[i]->sq.dom == 0, "request %d of domain %u waits for domain 0",
			livev[i]->id, livev[i]->sq.dom);
		stuck += waiting(livev[i]) != FUSEFS_WAIT_NR;
	}
	for (unsigned i = 0; i < next; i++)
		others += finished[i] == 1;
	ck_assert_uint_gt(stuck, 0);      /* domain 0's requests did wait */
	ck_assert_uint_gt(others, 200);   /* and the others went on */

	/* part 2 */
	hung[0] = false;
	while (nr_finished < DREQ) {
		unsigned what = (unsigned)(rnd(&s) % 100);

		REQUIRE(++steps < 50u * DREQ, "no end after %u steps", steps);
		if (what < 2 && next < DREQ)
			hung[rnd(&s) % MAXD] ^= true;
		else if (what < 40 && next < DREQ)
			next += issue(&s, lk, (int)next);
		else if (what < 80)
			complete_unhung(&s);
		else if (what < 90)
			run_one_call(&rxs[rnd(&s) % MAXS]);
		else
			sched_kick(rxs[rnd(&s) % MAXS].s);
		check_domains();
		check_locks(lk, MAXD * DLOCKS);
		if (next == DREQ)
			memset(hung, 0, sizeof(hung)); /* all taken: the hung come back */
		if (!nr_cmds && !rxs[0].nr_calls && !rxs[1].nr_calls && next == DREQ &&
		    nr_finished < DREQ) {
			sched_kick(rxs[0].s);
			sched_kick(rxs[1].s);
			REQUIRE(nr_cmds || rxs[0].nr_calls || rxs[1].nr_calls,
				"stuck: %u of %u finished, nothing in flight", nr_finished, DREQ);
		}
	}
	for (unsigned i = 0; i < DREQ; i++)
		ck_assert_int_eq(finished[i], 1);
	for (unsigned r = 0; r < MAXS; r++) {
		struct fusefs_stats x = st(r);
		ck_assert_uint_eq(x.inflight, 0);
		for (unsigned w = 0; w < FUSEFS_WAIT_NR; w++)
			ck_assert_uint_eq(x.parked[w], 0);
		ck_assert_uint_eq(rxs[r].pool.used, 0);
		ck_assert_uint_eq(x.bounce_bytes, 0);
		ck_assert_uint_eq(sched_destroy(rxs[r].s, EIO), 0);
	}
	ck_assert_uint_eq(nr_aborted, 0);
	for (unsigned i = 0; i < MAXD * DLOCKS; i++)
		rlock_destroy(&lk[i]);
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
	tcase_add_test(tc, t_ns_stats);
	tcase_add_test(tc, t_env_clock);
	tcase_add_test(tc, t_dom_slot_isolation);
	tcase_add_test(tc, t_dom_fifo);
	tcase_add_test(tc, t_dom_memory_bound);
	tcase_add_test(tc, t_dom_memory_unbounded);
	tcase_add_test(tc, t_dom_memory_cost);
	tcase_add_test(tc, t_dom_bounce);
	tcase_add_test(tc, t_dom_request_cap);
	tcase_add_loop_test(tc, t_random, 0, sizeof(seeds) / sizeof(seeds[0]));
	tcase_add_loop_test(tc, t_random_domains, 0, sizeof(seeds) / sizeof(seeds[0]));
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

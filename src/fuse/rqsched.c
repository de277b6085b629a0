/* rqsched.c - per-reactor request scheduler: a memory queue and a ready queue
 * per slot domain, range lock hand-over, bounded bounce buffers, statistics.
 * See rqsched.h for the progress argument. */
#include "rqsched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define DEFAULT_BOUNCE_MAX (8u << 20)
#define RQ_CACHE 256

struct rq_list {
	struct sched_rq *head, *tail;
};

/* One slot domain: the requests that submit to one qpair. */
struct sched_dom {
	struct rq_list memq;    /* waiting for memory, FIFO */
	struct rq_list readyq;  /* holding all but a tracker, FIFO */
	size_t held;            /* pool bytes its requests hold (with dom_mem_max) */
	unsigned stalled_kick;  /* kick_nr when a run of it last stalled */
};

struct sched {
	struct sched_env env;
	struct sched_opts o;
	struct sched_dom *dom;  /* o.nr_dom of them */
	unsigned queued;        /* requests on any domain's memory or ready queue */
	unsigned rr;            /* the domain the next kick serves first */
	unsigned kick_nr;       /* kicks so far: a domain stalls for one kick */
	struct sched_rq *all;   /* live requests */
	struct sched_rq *cache;
	unsigned nr_cache;
	unsigned live;          /* owner writes, others read relaxed */
	unsigned holders;       /* requests holding a DMA buffer */
	size_t bounce_used;
	bool kicking;
	bool rekick;            /* asked to kick while kicking: go round again */
	bool closed;            /* any thread writes, owner reads (relaxed) */
	bool want_room;         /* sched_accepting said no: call on_room */
	struct fusefs_stats st; /* owner writes, others read relaxed */
};

#define ST_ADD(s, f, n) sched_stat_add(&(s)->st.f, (n))
#define ST_SET(s, f, v) __atomic_store_n(&(s)->st.f, (v), __ATOMIC_RELAXED)

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* On the scheduler's thread: env.now's time (a reactor's, read once per
 * pass) or the clock's. */
static uint64_t now_ns(const struct sched *s)
{
	return s->env.now ? s->env.now(s->env.ctx) : clock_ns();
}

static void push(struct rq_list *l, struct sched_rq *q)
{
	q->next = NULL;
	if (l->tail)
		l->tail->next = q;
	else
		l->head = q;
	l->tail = q;
}

static void push_front(struct rq_list *l, struct sched_rq *q)
{
	q->next = l->head;
	l->head = q;
	if (!l->tail)
		l->tail = q;
}

static struct sched_rq *pop(struct rq_list *l)
{
	struct sched_rq *q = l->head;

	if (q) {
		l->head = q->next;
		if (!l->head)
			l->tail = NULL;
		q->next = NULL;
	}
	return q;
}

static void enqueue(struct rq_list *l, struct sched_rq *q, bool front)
{
	if (front)
		push_front(l, q);
	else
		push(l, q);
	q->s->queued++;
}

static struct sched_rq *dequeue(struct rq_list *l)
{
	struct sched_rq *q = pop(l);

	q->s->queued--;
	return q;
}

/* The caller's bug: there is no queue to put q in. */
static void __attribute__((noinline, cold, noreturn)) bad_dom(const struct sched_rq *q)
{
	log_err("fuse: request of slot domain %u, the scheduler has %u", q->dom, q->s->o.nr_dom);
	abort();
}

/* q's domain; checked where a request enters (sched_payload, sched_start),
 * trusted after */
static inline struct sched_dom *dom_of(struct sched_rq *q)
{
	return &q->s->dom[q->dom];
}

static inline struct sched_dom *dom_check(struct sched_rq *q)
{
	if (__builtin_expect(q->dom >= q->s->o.nr_dom, 0))
		bad_dom(q);
	return dom_of(q);
}

static void wait_begin(struct sched_rq *q, unsigned why)
{
	struct sched *s = q->s;

	q->wait = (uint8_t)(why + 1);
	q->t_wait = now_ns(s); /* read only by requests that wait */
	ST_ADD(s, parked[why], 1);
	ST_ADD(s, waits[why], 1);
	if (why == FUSEFS_WAIT_LOCK) {
		ST_ADD(s, lock_waits, 1);
	} else if (!q->stall_counted) {
		q->stall_counted = true;
		ST_ADD(s, resource_waits, 1);
	}
}

static void wait_end(struct sched_rq *q)
{
	if (q->wait) {
		ST_ADD(q->s, parked[q->wait - 1], (uint64_t)-1);
		q->wait = 0;
		q->wait_ns += now_ns(q->s) - q->t_wait;
	}
}

int sched_create(const struct sched_env *env, const struct sched_opts *o, struct sched **out)
{
	struct sched *s;

	if (o->rq_size < sizeof(struct sched_rq))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->env = *env;
	s->o = *o;
	if (!s->o.nr_dom)
		s->o.nr_dom = 1;
	if (s->o.nr_dom > SCHED_MAX_DOM) {
		free(s);
		return -EINVAL;
	}
	s->dom = calloc(s->o.nr_dom, sizeof(*s->dom));
	if (!s->dom) {
		free(s);
		return -ENOMEM;
	}
	if (!s->o.max_rq)
		s->o.max_rq = SCHED_MAX_RQ;
	if (!s->o.bounce_max)
		s->o.bounce_max = DEFAULT_BOUNCE_MAX;
	if (s->o.bounce_max < s->o.max_payload)
		s->o.bounce_max = s->o.max_payload;
	*out = s;
	return 0;
}

static void rq_release(struct sched_rq *q, uint64_t now);
static void granted(struct sched_rq *q);
static void granted_cb(void *arg);

unsigned sched_destroy(struct sched *s, int errnum)
{
	unsigned n = 0;

	if (!s)
		return 0;
	s->kicking = true; /* aborts must not run anything */
	s->env.now = NULL; /* not on the scheduler's thread: read the clock */
	while (s->all) {
		struct sched_rq *q = s->all;

		/* the lock goes away with every scheduler: no hand-over */
		q->locked = false;
		wait_end(q);
		q->abort(q, errnum);
		rq_release(q, 0);
		n++;
	}
	while (s->cache) {
		struct sched_rq *q = s->cache;

		s->cache = q->next;
		free(q);
	}
	free(s->dom);
	free(s);
	return n;
}

void sched_close(struct sched *s)
{
	__atomic_store_n(&s->closed, true, __ATOMIC_RELAXED);
}

bool sched_accepting(struct sched *s)
{
	if (s->live < s->o.max_rq && s->bounce_used + s->o.max_payload <= s->o.bounce_max)
		return true;
	if (!s->want_room) {
		s->want_room = true;
		ST_ADD(s, channel_pauses, 1);
	}
	return false;
}

static void room_check(struct sched *s)
{
	if (s->want_room && s->live < s->o.max_rq &&
	    s->bounce_used + s->o.max_payload <= s->o.bounce_max) {
		s->want_room = false;
		if (s->o.on_room)
			s->o.on_room(s->o.room_arg);
	}
}

struct sched_rq *sched_rq_new(struct sched *s, uint8_t op)
{
	struct sched_rq *q = s->cache;

	if (s->live >= s->o.max_rq)
		return NULL;
	if (q) {
		s->cache = q->next;
		s->nr_cache--;
	} else {
		q = malloc(s->o.rq_size);
		if (!q)
			return NULL;
	}
	memset(q, 0, s->o.rq_size);
	q->s = s;
	q->op = op;
	q->t0 = now_ns(s);
	q->anext = s->all;
	if (s->all)
		s->all->aprev = q;
	s->all = q;
	__atomic_store_n(&s->live, s->live + 1, __ATOMIC_RELAXED);
	ST_SET(s, inflight, s->live);
	return q;
}

/* With dom_mem_max: may q's domain take q's buffer, and what it costs. */
static bool __attribute__((noinline)) dom_mem_ok(struct sched_rq *q, size_t *cost)
{
	struct sched *s = q->s;
	size_t held = dom_of(q)->held;

	*cost = s->env.buf_cost ? s->env.buf_cost(s->env.ctx, q->mem) : q->mem;
	/* a domain holding nothing may always try: the bound must not keep a
	 * request larger than it from ever running */
	return !held || held + *cost <= s->o.dom_mem_max;
}

static bool mem_get(struct sched_rq *q)
{
	struct sched *s = q->s;
	size_t cost = 0;

	if (q->dma || !q->mem)
		return true;
	if (s->o.dom_mem_max && !dom_mem_ok(q, &cost))
		return false;
	q->dma = s->env.buf_alloc(s->env.ctx, q->dom, q->mem);
	if (!q->dma)
		return false;
	if (cost) {
		q->cost = (uint32_t)cost; /* the largest request's buffer is 2 MiB */
		dom_of(q)->held += cost;
	}
	s->holders++;
	return true;
}

static void bounce_free(struct sched_rq *q)
{
	struct sched *s = q->s;

	if (!q->bounce)
		return;
	if (q->bounce_lent) {
		q->bounce = NULL;
		q->bounce_lent = false;
		return;
	}
	free(q->bounce);
	q->bounce = NULL;
	s->bounce_used -= q->bounce_len;
	ST_SET(s, bounce_bytes, s->bounce_used);
}

void *sched_payload(struct sched_rq *q, size_t off, size_t len)
{
	struct sched *s = q->s;

	if (!dom_check(q)->memq.head && mem_get(q))
		return (uint8_t *)q->dma + off;
	/* the channel only reads while the budget can hold a largest write */
	if (s->bounce_used + len > s->o.bounce_max)
		return NULL;
	q->bounce = malloc(len ? len : 1);
	if (!q->bounce)
		return NULL;
	q->bounce_len = len;
	q->bounce_off = off;
	s->bounce_used += len;
	ST_SET(s, bounce_bytes, s->bounce_used);
	if (s->bounce_used > s->st.bounce_peak)
		ST_SET(s, bounce_peak, s->bounce_used);
	return q->bounce;
}

void sched_payload_lent(struct sched_rq *q, size_t off, const void *src, size_t len)
{
	q->bounce = (void *)src; /* only read from */
	q->bounce_len = len;
	q->bounce_off = off;
	q->bounce_lent = true;
}

/* The namespace's request count one less; now: the time, 0 if not read
 * yet. */
static void ns_leave(const struct sched *s, struct sched_ns_stats *n, uint64_t now)
{
	sched_stat_add(&n->st.inflight, (uint64_t)-1);
	if (n->st.inflight == 0)
		sched_stat_add(&n->st.busy_ns, (now ? now : now_ns(s)) - n->busy_t0);
}

/* Release everything q holds and recycle it; no statistics, no kick.  now:
 * the time if the caller has it, else 0. */
static void rq_release(struct sched_rq *q, uint64_t now)
{
	struct sched *s = q->s;
	struct rlock_ent *g;

	if (q->nst)
		ns_leave(s, q->nst, now);
	if (q->locked) {
		q->locked = false;
		g = rlock_release(q->lock, &q->le);
		while (g) {
			struct sched_rq *w = (struct sched_rq *)((char *)g - offsetof(struct sched_rq, le));

			g = g->gnext;
			if (w->s == s) {
				granted(w); /* the caller kicks when q is gone */
			} else if (w->s->env.call(w->s->env.ctx, granted_cb, w) < 0) {
				/* cannot happen short of ENOMEM: the waiter would hang */
				log_err("fuse: cannot hand a range lock grant to another reactor");
				abort();
			}
		}
	}
	if (q->dma) {
		s->env.buf_free(s->env.ctx, q->dom, q->dma, q->mem);
		q->dma = NULL;
		if (q->cost)
			dom_of(q)->held -= q->cost;
		s->holders--;
	}
	bounce_free(q);
	if (q->aprev)
		q->aprev->anext = q->anext;
	else
		s->all = q->anext;
	if (q->anext)
		q->anext->aprev = q->aprev;
	if (s->nr_cache < RQ_CACHE) {
		q->next = s->cache;
		s->cache = q;
		s->nr_cache++;
	} else {
		free(q);
	}
	__atomic_store_n(&s->live, s->live - 1, __ATOMIC_RELAXED);
	ST_SET(s, inflight, s->live);
}

static void count_op(struct sched *s, uint8_t op, uint64_t bytes, int errnum, uint64_t ns)
{
	struct fusefs_op_stats *os = &s->st.op[op < FUSEFS_OP_NR ? op : FUSEFS_OP_OTHER];

	sched_stat_add(&os->count, 1);
	sched_stat_add(&os->bytes, bytes);
	sched_stat_add(&os->lat_ns[nvme_lat_bucket(ns)], 1);
	sched_stat_add(&os->sum_ns, ns);
	if (errnum) {
		sched_stat_add(&os->errors, 1);
		ST_ADD(s, errors, 1);
	}
}

static void count_ns(struct sched_ns_stats *n, uint8_t op, uint64_t bytes, int errnum,
		     uint64_t ns, uint64_t queue_ns)
{
	struct fusefs_nsop_stats *os;

	if (op >= FUSEFS_NSOP_NR)
		return;
	os = &n->st.op[op];
	sched_stat_add(&os->count, 1);
	sched_stat_add(&os->bytes, bytes);
	sched_stat_add(&os->errors, errnum != 0);
	sched_stat_add(&os->sum_ns, ns);
	sched_stat_add(&os->queue_ns, queue_ns);
	sched_stat_add(&os->lat_ns[nvme_lat_bucket(ns)], 1);
}

void sched_count(struct sched *s, struct sched_ns_stats *nst, uint8_t op, uint64_t bytes,
		 int errnum)
{
	count_op(s, op, bytes, errnum, 0);
	if (nst)
		count_ns(nst, op, bytes, errnum, 0, 0);
}

void sched_rq_ns(struct sched_rq *q, struct sched_ns_stats *nst)
{
	q->nst = nst;
	if (nst->st.inflight == 0)
		__atomic_store_n(&nst->busy_t0, q->t0, __ATOMIC_RELAXED);
	sched_stat_add(&nst->st.inflight, 1);
}

void sched_ns_stats_add(const struct sched_ns_stats *nst, struct fusefs_ns_stats *out)
{
	const uint64_t *src = (const uint64_t *)&nst->st;
	uint64_t *dst = (uint64_t *)out;
	uint64_t t0, now = clock_ns(); /* any thread */

	static_assert(sizeof(nst->st) % 8 == 0, "namespace figures are u64 words");
	for (size_t i = 0; i < sizeof(nst->st) / 8; i++)
		dst[i] += __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	/* a busy period still running counts up to now */
	t0 = __atomic_load_n(&nst->busy_t0, __ATOMIC_RELAXED);
	if (__atomic_load_n(&nst->st.inflight, __ATOMIC_RELAXED) && t0 && now > t0)
		out->busy_ns += now - t0;
}

void sched_finish(struct sched_rq *q, int errnum)
{
	struct sched *s = q->s;
	uint64_t now = now_ns(s);

	count_op(s, q->op, q->bytes, errnum, now - q->t0);
	wait_end(q);
	if (q->nst)
		count_ns(q->nst, q->op, q->bytes, errnum, now - q->t0, q->wait_ns);
	rq_release(q, now);
	room_check(s);
	sched_kick(s);
}

/* q holds memory and its grant: run it, or queue it behind the ready ones
 * of its domain. */
static void run_or_ready(struct sched_rq *q)
{
	struct sched_dom *d = dom_of(q);

	if (d->readyq.head) {
		enqueue(&d->readyq, q, false);
		wait_begin(q, FUSEFS_WAIT_SLOT);
		return;
	}
	if (q->run(q) == SCHED_STALL) {
		enqueue(&d->readyq, q, false);
		wait_begin(q, FUSEFS_WAIT_SLOT);
		d->stalled_kick = q->s->kick_nr;
	}
}

/* q has its memory: take the bounce data over, then the lock, then run. */
static void after_mem(struct sched_rq *q)
{
	if (q->bounce) {
		memcpy((uint8_t *)q->dma + q->bounce_off, q->bounce, q->bounce_len);
		SCHED_STAT_ADD(q->s, copy_bytes, q->bounce_len);
		bounce_free(q);
		room_check(q->s);
	}
	if (q->lock) {
		if (!rlock_acquire(q->lock, &q->le, q->lb0, q->lb1)) {
			q->t_lock = now_ns(q->s);
			wait_begin(q, FUSEFS_WAIT_LOCK);
			return; /* rlock_release hands it back */
		}
		q->locked = true;
	}
	run_or_ready(q);
}

/* A grant for q, on q's own thread: it runs at the next kick, before
 * anything that waits for memory. */
static void granted(struct sched_rq *q)
{
	struct sched *s = q->s;

	ST_ADD(s, lock_wait_ns, now_ns(s) - q->t_lock);
	wait_end(q);
	q->locked = true;
	enqueue(&dom_of(q)->readyq, q, false);
}

/* The same, handed over from the reactor that released the range. */
static void granted_cb(void *arg)
{
	struct sched_rq *q = arg;

	granted(q);
	sched_kick(q->s);
}

void sched_start(struct sched_rq *q)
{
	struct sched_dom *d = dom_check(q);

	if (q->mem && (q->dma == NULL) && (d->memq.head || !mem_get(q))) {
		enqueue(&d->memq, q, false);
		wait_begin(q, FUSEFS_WAIT_MEM);
		return;
	}
	after_mem(q);
}

void sched_resume(struct sched_rq *q)
{
	struct sched *s = q->s;

	if (__atomic_load_n(&s->closed, __ATOMIC_RELAXED))
		return; /* left for sched_destroy */
	if (q->run(q) == SCHED_STALL) {
		struct sched_dom *d = dom_of(q);

		/* it holds everything but a tracker: first in line for one */
		enqueue(&d->readyq, q, true);
		wait_begin(q, FUSEFS_WAIT_SLOT);
		d->stalled_kick = s->kick_nr;
	}
}

/* Serve one domain: its ready queue until it is empty or a run stalls, then
 * its memory queue's head for as long as that can allocate. */
static void serve(struct sched *s, struct sched_dom *d)
{
	struct sched_rq *q;

	for (;;) {
		q = d->readyq.head;
		if (q && d->stalled_kick != s->kick_nr) {
			dequeue(&d->readyq);
			wait_end(q);
			if (q->run(q) == SCHED_STALL) {
				/* no tracker of this domain: the rest of its
				 * ready queue waits for one of its completions */
				enqueue(&d->readyq, q, true);
				wait_begin(q, FUSEFS_WAIT_SLOT);
				d->stalled_kick = s->kick_nr;
			}
			continue;
		}
		q = d->memq.head;
		if (!q)
			break;
		if (!mem_get(q)) {
			if (s->holders)
				break; /* buffers come back as holders finish */
			/* nothing holds a buffer and still none fits: never will */
			dequeue(&d->memq);
			wait_end(q);
			log_err("fuse: no DMA buffer of %zu bytes can ever be free", q->mem);
			q->abort(q, ENOMEM);
			sched_finish(q, ENOMEM);
			continue;
		}
		dequeue(&d->memq);
		wait_end(q);
		after_mem(q);
	}
}

/* The kick proper, out of line: sched_kick with nothing queued (the common
 * case, at every loop pass and finish) is a few loads. */
static void __attribute__((noinline)) kick(struct sched *s)
{
	unsigned n = s->o.nr_dom;

	s->kicking = true;
	s->kick_nr++;
	do {
		s->rekick = false;
		/* round robin: each domain is served whatever the others do;
		 * the first one rotates so that none always comes first to
		 * the pool */
		for (unsigned i = 0, k = s->rr; i < n; i++, k = k + 1 == n ? 0 : k + 1)
			serve(s, &s->dom[k]);
	} while (s->rekick && s->queued);
	s->rr = s->rr + 1 == n ? 0 : s->rr + 1;
	s->kicking = false;
}

void sched_kick(struct sched *s)
{
	if (__atomic_load_n(&s->closed, __ATOMIC_RELAXED))
		return;
	if (s->kicking) {
		/* a request finished or was granted during this kick: what it
		 * gave back may serve a domain already visited */
		s->rekick = true;
		return;
	}
	if (s->queued)
		kick(s);
}

struct fusefs_stats *sched_stats_raw(struct sched *s)
{
	return &s->st;
}

unsigned sched_inflight(const struct sched *s)
{
	return __atomic_load_n(&s->live, __ATOMIC_RELAXED);
}

void sched_stats_add(const struct sched *s, struct fusefs_stats *out)
{
	const struct fusefs_stats *st = &s->st;
#define SUM(f) out->f += __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	SUM(reads);
	SUM(writes);
	SUM(rmw_writes);
	SUM(fsyncs);
	SUM(flushes_sent);
	SUM(dsync_writes);
	SUM(fua_writes);
	SUM(dsync_flushes);
	SUM(fallocs);
	SUM(errors);
	SUM(lock_waits);
	SUM(resource_waits);
	SUM(inflight);
	for (unsigned i = 0; i < FUSEFS_WAIT_NR; i++) {
		SUM(parked[i]);
		SUM(waits[i]);
	}
	SUM(lock_wait_ns);
	SUM(bounce_bytes);
	SUM(channel_pauses);
	SUM(ring_requests);
	SUM(bad_requests);
	SUM(dup_answers);
	SUM(late_answers);
	SUM(audit_violations);
	SUM(resent_requests);
	SUM(copy_bytes);
	uint64_t pk = __atomic_load_n(&st->bounce_peak, __ATOMIC_RELAXED);
	if (pk > out->bounce_peak)
		out->bounce_peak = pk;
	for (unsigned o = 0; o < FUSEFS_OP_NR; o++) {
		SUM(op[o].count);
		SUM(op[o].bytes);
		SUM(op[o].errors);
		for (unsigned b = 0; b < NVME_LAT_BUCKETS; b++)
			SUM(op[o].lat_ns[b]);
		SUM(op[o].sum_ns);
	}
#undef SUM
}

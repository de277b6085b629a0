/* rlock.c - block range lock: an interval treap of held and waiting entries. */
#include "rlock.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

static bool overlap(const struct rlock_ent *a, uint64_t lb0, uint64_t lb1)
{
	return a->lb0 < lb1 && lb0 < a->lb1;
}

static bool key_lt(const struct rlock_ent *a, const struct rlock_ent *b)
{
	return a->lb0 < b->lb0 || (a->lb0 == b->lb0 && a->seq < b->seq);
}

static void fix(struct rlock_ent *t)
{
	uint64_t m = t->lb1;

	if (t->l && t->l->maxend > m)
		m = t->l->maxend;
	if (t->r && t->r->maxend > m)
		m = t->r->maxend;
	t->maxend = m;
}

static struct rlock_ent *rot_right(struct rlock_ent *t)
{
	struct rlock_ent *l = t->l;

	t->l = l->r;
	l->r = t;
	fix(t);
	fix(l);
	return l;
}

static struct rlock_ent *rot_left(struct rlock_ent *t)
{
	struct rlock_ent *r = t->r;

	t->r = r->l;
	r->l = t;
	fix(t);
	fix(r);
	return r;
}

static struct rlock_ent *ins(struct rlock_ent *t, struct rlock_ent *e)
{
	if (!t)
		return e;
	if (key_lt(e, t)) {
		t->l = ins(t->l, e);
		if (t->l->prio > t->prio)
			return rot_right(t);
	} else {
		t->r = ins(t->r, e);
		if (t->r->prio > t->prio)
			return rot_left(t);
	}
	fix(t);
	return t;
}

/* every key of a is below every key of b */
static struct rlock_ent *merge(struct rlock_ent *a, struct rlock_ent *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->r = merge(a->r, b);
		fix(a);
		return a;
	}
	b->l = merge(a, b->l);
	fix(b);
	return b;
}

static struct rlock_ent *del(struct rlock_ent *t, struct rlock_ent *e)
{
	if (!t)
		return NULL; /* not in the tree: cannot happen */
	if (t == e)
		return merge(t->l, t->r);
	if (key_lt(e, t))
		t->l = del(t->l, e);
	else
		t->r = del(t->r, e);
	fix(t);
	return t;
}

/* Entries overlapping [lb0, lb1): a subtree whose largest end is at or below
 * lb0 holds none; nothing right of a node starting at or after lb1 does. */
static unsigned count_overlaps(const struct rlock_ent *t, uint64_t lb0, uint64_t lb1)
{
	unsigned n = 0;

	while (t && t->maxend > lb0) {
		n += count_overlaps(t->l, lb0, lb1);
		if (t->lb0 >= lb1)
			break;
		if (t->lb1 > lb0)
			n++;
		t = t->r;
	}
	return n;
}

static void release_later(struct rlock_ent *t, const struct rlock_ent *e, struct rlock_ent **out)
{
	while (t && t->maxend > e->lb0) {
		release_later(t->l, e, out);
		if (t->lb0 >= e->lb1)
			break;
		if (t->lb1 > e->lb0 && t->seq > e->seq && --t->blockers == 0) {
			t->granted = true;
			t->gnext = *out;
			*out = t;
		}
		t = t->r;
	}
}

/* The treap stays balanced in expectation only if its priorities cannot be
 * predicted: with a fixed seed, a client that knows the sequence could
 * order its requests to build a list of held ranges and make every lookup
 * linear.  So each lock starts from the kernel's randomness (xorshift32
 * then needs a nonzero state); without it, the clock and the lock's
 * address, which are at least not fixed. */
static uint32_t rlock_seed(void)
{
	uint32_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint32_t)ts.tv_nsec ^ (uint32_t)((uintptr_t)&ts >> 4) ^ (uint32_t)ts.tv_sec;
	}
	return v ? v : 0x9e3779b9u;
}

void rlock_init(struct rlock *lk)
{
	pthread_mutex_init(&lk->mu, NULL);
	lk->root = NULL;
	lk->seq = 0;
	lk->rng = rlock_seed();
	lk->nr_held = lk->nr_waiting = 0;
}

void rlock_destroy(struct rlock *lk)
{
	pthread_mutex_destroy(&lk->mu);
}

bool rlock_acquire(struct rlock *lk, struct rlock_ent *e, uint64_t lb0, uint64_t lb1)
{
	bool granted;

	e->lb0 = lb0;
	e->lb1 = lb1;
	e->maxend = lb1;
	e->l = e->r = e->gnext = NULL;
	pthread_mutex_lock(&lk->mu);
	e->seq = lk->seq++;
	/* xorshift32: the treap's balance needs priorities unrelated to keys */
	lk->rng ^= lk->rng << 13;
	lk->rng ^= lk->rng >> 17;
	lk->rng ^= lk->rng << 5;
	e->prio = lk->rng;
	e->blockers = count_overlaps(lk->root, lb0, lb1);
	e->granted = e->blockers == 0;
	lk->root = ins(lk->root, e);
	if (e->granted)
		lk->nr_held++;
	else
		lk->nr_waiting++;
	granted = e->granted;
	pthread_mutex_unlock(&lk->mu);
	return granted;
}

struct rlock_ent *rlock_release(struct rlock *lk, struct rlock_ent *e)
{
	struct rlock_ent *out = NULL;
	unsigned n = 0;

	pthread_mutex_lock(&lk->mu);
	lk->root = del(lk->root, e);
	e->l = e->r = NULL;
	e->granted = false;
	lk->nr_held--;
	release_later(lk->root, e, &out);
	for (struct rlock_ent *g = out; g; g = g->gnext)
		n++;
	lk->nr_held += n;
	lk->nr_waiting -= n;
	pthread_mutex_unlock(&lk->mu);
	return out;
}

void rlock_counts(struct rlock *lk, unsigned *held, unsigned *waiting)
{
	*held = __atomic_load_n(&lk->nr_held, __ATOMIC_RELAXED);
	*waiting = __atomic_load_n(&lk->nr_waiting, __ATOMIC_RELAXED);
}

/* ---- checking (tests) ---- */

struct chk {
	struct rlock_ent **v;
	unsigned n, cap;
	const char *why;
};

static int walk(struct rlock_ent *t, const struct rlock_ent *lo, struct chk *c,
		const struct rlock_ent **last)
{
	uint64_t m;

	if (!t)
		return 0;
	if (t->l && t->l->prio > t->prio)
		return c->why = "heap order", -EUCLEAN;
	if (t->r && t->r->prio > t->prio)
		return c->why = "heap order", -EUCLEAN;
	if (walk(t->l, lo, c, last))
		return -EUCLEAN;
	if (*last && !key_lt(*last, t))
		return c->why = "key order", -EUCLEAN;
	*last = t;
	m = t->lb1;
	if (t->l && t->l->maxend > m)
		m = t->l->maxend;
	if (t->r && t->r->maxend > m)
		m = t->r->maxend;
	if (m != t->maxend)
		return c->why = "maxend", -EUCLEAN;
	if (t->lb0 >= t->lb1)
		return c->why = "empty range", -EUCLEAN;
	if (c->n < c->cap)
		c->v[c->n] = t;
	c->n++;
	return walk(t->r, lo, c, last);
}

int rlock_check(struct rlock *lk, const char **why)
{
	struct rlock_ent *v[4096];
	struct chk c = {.v = v, .cap = 4096, .why = "ok"};
	const struct rlock_ent *last = NULL;
	unsigned held = 0;
	int rc;

	pthread_mutex_lock(&lk->mu);
	rc = walk(lk->root, NULL, &c, &last);
	if (!rc && c.n > c.cap) {
		c.why = "too many entries to check";
		rc = -EUCLEAN;
	}
	for (unsigned i = 0; !rc && i < c.n; i++) {
		unsigned earlier = 0;

		held += v[i]->granted;
		for (unsigned j = 0; j < c.n; j++) {
			if (j == i || !overlap(v[j], v[i]->lb0, v[i]->lb1))
				continue;
			if (v[j]->seq < v[i]->seq)
				earlier++;
			if (v[i]->granted && v[j]->granted) {
				c.why = "two granted entries overlap";
				rc = -EUCLEAN;
			}
		}
		if (!rc && earlier != v[i]->blockers) {
			c.why = "blocker count";
			rc = -EUCLEAN;
		}
		if (!rc && v[i]->granted != (v[i]->blockers == 0)) {
			c.why = "granted iff no blocker";
			rc = -EUCLEAN;
		}
	}
	if (!rc && (held != lk->nr_held || c.n - held != lk->nr_waiting)) {
		c.why = "counts";
		rc = -EUCLEAN;
	}
	pthread_mutex_unlock(&lk->mu);
	if (why)
		*why = c.why;
	return rc;
}

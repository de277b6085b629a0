/* test_fuse_rlock.c - the block range lock on its own: grants, FIFO among
 * conflicting entries, adjacency, a randomized run against a model at every
 * step (several fixed seeds), and threads sharing one lock. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "rlock.h"

/* ck_assert records every passing check (a write(2) each): loops use this */
#define REQUIRE(c, ...)                           \
	do {                                       \
		if (!(c))                          \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

static void check_ok(struct rlock *lk)
{
	const char *why = NULL;

	REQUIRE(rlock_check(lk, &why) == 0, "rlock invariant: %s", why);
}

static unsigned list_len(struct rlock_ent *g)
{
	unsigned n = 0;

	for (; g; g = g->gnext)
		n++;
	return n;
}

START_TEST(t_disjoint_and_adjacent)
{
	struct rlock lk;
	struct rlock_ent a, b, c;
	unsigned h, w;

	rlock_init(&lk);
	ck_assert(rlock_acquire(&lk, &a, 0, 10));
	ck_assert(rlock_acquire(&lk, &b, 10, 20)); /* adjacent: no conflict */
	ck_assert(rlock_acquire(&lk, &c, 30, 31));
	rlock_counts(&lk, &h, &w);
	ck_assert_uint_eq(h, 3);
	ck_assert_uint_eq(w, 0);
	check_ok(&lk);
	ck_assert_ptr_null(rlock_release(&lk, &b));
	ck_assert_ptr_null(rlock_release(&lk, &a));
	ck_assert_ptr_null(rlock_release(&lk, &c));
	rlock_counts(&lk, &h, &w);
	ck_assert_uint_eq(h, 0);
	rlock_destroy(&lk);
}
END_TEST

START_TEST(t_conflict_waits_and_is_granted)
{
	struct rlock lk;
	struct rlock_ent a, b;
	struct rlock_ent *g;

	rlock_init(&lk);
	ck_assert(rlock_acquire(&lk, &a, 0, 8));
	ck_assert(!rlock_acquire(&lk, &b, 7, 9));
	ck_assert(!b.granted);
	check_ok(&lk);
	g = rlock_release(&lk, &a);
	ck_assert_ptr_eq(g, &b);
	ck_assert_ptr_null(g->gnext);
	ck_assert(b.granted);
	check_ok(&lk);
	ck_assert_ptr_null(rlock_release(&lk, &b));
	rlock_destroy(&lk);
}
END_TEST

/* C overlaps only the waiter B, not the holder A: it must not overtake B. */
START_TEST(t_fifo_no_overtaking)
{
	struct rlock lk;
	struct rlock_ent a, b, c, d;
	struct rlock_ent *g;

	rlock_init(&lk);
	ck_assert(rlock_acquire(&lk, &a, 0, 10));
	ck_assert(!rlock_acquire(&lk, &b, 5, 15));
	ck_assert(!rlock_acquire(&lk, &c, 12, 20));
	ck_assert(rlock_acquire(&lk, &d, 20, 30)); /* overlaps nobody */
	check_ok(&lk);
	g = rlock_release(&lk, &a);
	ck_assert_ptr_eq(g, &b);
	ck_assert_uint_eq(list_len(g), 1);
	ck_assert(!c.granted);
	g = rlock_release(&lk, &b);
	ck_assert_ptr_eq(g, &c);
	check_ok(&lk);
	ck_assert_ptr_null(rlock_release(&lk, &c));
	ck_assert_ptr_null(rlock_release(&lk, &d));
	rlock_destroy(&lk);
}
END_TEST

/* One release grants several waiters at once; a waiter behind two holders
 * waits for both. */
START_TEST(t_multi_grant)
{
	struct rlock lk;
	struct rlock_ent big, w1, w2, both, x;
	struct rlock_ent *g;

	rlock_init(&lk);
	ck_assert(rlock_acquire(&lk, &big, 0, 100));
	ck_assert(!rlock_acquire(&lk, &w1, 0, 10));
	ck_assert(!rlock_acquire(&lk, &w2, 50, 60));
	ck_assert(!rlock_acquire(&lk, &both, 5, 55));
	ck_assert_uint_eq(both.blockers, 3);
	g = rlock_release(&lk, &big);
	ck_assert_uint_eq(list_len(g), 2);
	ck_assert(w1.granted && w2.granted && !both.granted);
	ck_assert_ptr_null(rlock_release(&lk, &w1));
	ck_assert(!both.granted);
	ck_assert(!rlock_acquire(&lk, &x, 54, 56)); /* behind both */
	g = rlock_release(&lk, &w2);
	ck_assert_ptr_eq(g, &both);
	ck_assert(!x.granted);
	g = rlock_release(&lk, &both);
	ck_assert_ptr_eq(g, &x);
	ck_assert_ptr_null(rlock_release(&lk, &x));
	check_ok(&lk);
	rlock_destroy(&lk);
}
END_TEST

/* ---- randomized against a model ---- */

#define NENT 3000
#define REGION 256

struct ment {
	struct rlock_ent e;
	uint64_t lb0, lb1;
	uint64_t order;     /* arrival */
	bool live, granted;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const uint64_t seeds[] = {1, 42, 1234567, 0xdeadbeef, 987654321};

/* Model: an entry is granted iff every earlier overlapping entry is gone. */
static bool model_granted(struct ment *v, const unsigned *lv, unsigned nlv, unsigned i)
{
	for (unsigned k = 0; k < nlv; k++) {
		unsigned j = lv[k];
		if (v[j].order < v[i].order && v[j].lb0 < v[i].lb1 && v[i].lb0 < v[j].lb1)
			return false;
	}
	return true;
}

START_TEST(t_random_model)
{
	uint64_t s = seeds[_i];
	struct ment *v = calloc(NENT, sizeof(*v));
	unsigned *lv = calloc(NENT, sizeof(*lv));
	struct rlock lk;
	unsigned n = 0, live = 0, grants = 0, maxlive = 0;

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_nonnull(lv);
	rlock_init(&lk);
	while (n < NENT || live) {
		bool add = n < NENT && (live == 0 || rnd(&s) % 100 < 50);

		if (add) {
			struct ment *m = &v[n];
			uint64_t len = 1 + rnd(&s) % (rnd(&s) % 4 == 0 ? 64 : 8);

			m->lb0 = rnd(&s) % REGION;
			m->lb1 = m->lb0 + len;
			m->order = n;
			m->live = true;
			m->granted = rlock_acquire(&lk, &m->e, m->lb0, m->lb1);
			REQUIRE(m->granted == model_granted(v, lv, live, n), "entry %u", n);
			lv[live++] = n;
			n++;
			if (live > maxlive)
				maxlive = live;
		} else {
			/* release a random granted entry (there is always one:
			 * the oldest live entry is granted) */
			unsigned x = (unsigned)(rnd(&s) % live), tries = 0;

			while (!v[lv[x]].granted) {
				x = (x + 1) % live;
				REQUIRE(++tries < live + 1, "no granted entry");
			}
			unsigned k = lv[x];
			struct rlock_ent *g = rlock_release(&lk, &v[k].e);
			v[k].live = false;
			lv[x] = lv[--live];
			for (; g; g = g->gnext) {
				struct ment *m = (struct ment *)g;

				REQUIRE(m->live && !m->granted, "granted twice");
				m->granted = true;
				grants++;
			}
		}
		/* the lock agrees with the model for every live entry */
		for (unsigned x = 0; x < live; x++)
			REQUIRE(v[lv[x]].granted == model_granted(v, lv, live, lv[x]),
				"entry %u differs from the model", lv[x]);
		if (n % 64 == 0 || live < 4)
			check_ok(&lk);
	}
	for (unsigned i = 0; i < NENT; i++)
		ck_assert(!v[i].live);
	ck_assert_uint_gt(grants, NENT / 10); /* waits happened and ended */
	ck_assert_uint_gt(maxlive, 16);
	check_ok(&lk);
	rlock_destroy(&lk);
	free(lv);
	free(v);
}
END_TEST

/* ---- threads sharing one lock ---- */

#define TBLOCKS 64
#define TOPS 3000

struct tshared {
	struct rlock lk;
	int owner[TBLOCKS];
	int bad;
};

struct tent {
	struct rlock_ent e;
	int go; /* set by whoever grants it */
};

struct targ {
	struct tshared *sh;
	int id;
	uint64_t seed;
};

/* Hand each grant to its owner.  The next link is read first: once go is
 * set, the owner may finish and reuse the entry (rq_release does the same). */
static void grant_all(struct rlock_ent *g)
{
	while (g) {
		struct rlock_ent *next = g->gnext;
		__atomic_store_n(&((struct tent *)g)->go, 1, __ATOMIC_RELEASE);
		g = next;
	}
}

static void *tworker(void *arg)
{
	struct targ *a = arg;
	struct tshared *sh = a->sh;
	uint64_t s = a->seed;

	for (int i = 0; i < TOPS; i++) {
		struct tent t = {.go = 0};
		uint64_t lb0 = rnd(&s) % TBLOCKS, len = 1 + rnd(&s) % 8;
		uint64_t lb1 = lb0 + len > TBLOCKS ? TBLOCKS : lb0 + len;

		if (rlock_acquire(&sh->lk, &t.e, lb0, lb1))
			t.go = 1;
		while (!__atomic_load_n(&t.go, __ATOMIC_ACQUIRE))
			sched_yield();
		for (uint64_t b = lb0; b < lb1; b++) {
			int prev = 0;
			if (!__atomic_compare_exchange_n(&sh->owner[b], &prev, a->id, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				__atomic_store_n(&sh->bad, 1, __ATOMIC_RELAXED);
		}
		for (uint64_t b = lb0; b < lb1; b++)
			__atomic_store_n(&sh->owner[b], 0, __ATOMIC_RELEASE);
		grant_all(rlock_release(&sh->lk, &t.e));
	}
	return NULL;
}

START_TEST(t_threads)
{
	struct tshared sh;
	struct targ a[2];
	pthread_t th[2];

	memset(&sh, 0, sizeof(sh));
	rlock_init(&sh.lk);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct targ){.sh = &sh, .id = i + 1, .seed = seeds[i]};
		ck_assert_int_eq(pthread_create(&th[i], NULL, tworker, &a[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(sh.bad, 0);
	check_ok(&sh.lk);
	unsigned h, w;
	rlock_counts(&sh.lk, &h, &w);
	ck_assert_uint_eq(h + w, 0);
	rlock_destroy(&sh.lk);
}
END_TEST

/* Each lock's treap priorities start from fresh randomness: not a fixed
 * sequence a client could plan an unbalanced tree against. */
START_TEST(t_seed_unpredictable)
{
	struct rlock lk[8];
	unsigned same = 0;

	for (int i = 0; i < 8; i++) {
		rlock_init(&lk[i]);
		ck_assert_uint_ne(lk[i].rng, 0); /* xorshift would stay at 0 */
	}
	for (int i = 1; i < 8; i++)
		same += lk[i].rng == lk[0].rng;
	ck_assert_uint_lt(same, 7);
	ck_assert_uint_ne(lk[0].rng, 0x9e3779b9u); /* the old fixed seed */
	for (int i = 0; i < 8; i++)
		rlock_destroy(&lk[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_rlock");
	TCase *tc = tcase_create("rlock");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_disjoint_and_adjacent);
	tcase_add_test(tc, t_seed_unpredictable);
	tcase_add_test(tc, t_conflict_waits_and_is_granted);
	tcase_add_test(tc, t_fifo_no_overtaking);
	tcase_add_test(tc, t_multi_grant);
	tcase_add_loop_test(tc, t_random_model, 0, sizeof(seeds) / sizeof(seeds[0]));
	tcase_add_test(tc, t_threads);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

/* test_log.c - the log's rate limiter (log.h, log_rl_*): at most burst
 * lines per window, every occurrence accounted for by a line or by the
 * count the next line carries, also when threads take from one limiter. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "log.h"

/* a window lets burst through; the rest wait for the next one's first
 * line, which carries their count */
START_TEST(t_window)
{
	struct log_rl rl = LOG_RL_INIT(3, 1000);
	unsigned sup = 99, out = 0;

	for (unsigned i = 0; i < 10; i++)
		if (log_rl_take_at(&rl, 5000 + i, &sup)) {
			ck_assert_uint_eq(sup, 0);
			out++;
		}
	ck_assert_uint_eq(out, 3);
	/* still the same window */
	ck_assert(!log_rl_take_at(&rl, 5999, &sup));
	/* the next: its first line tells the 8 not logged */
	ck_assert(log_rl_take_at(&rl, 6000, &sup));
	ck_assert_uint_eq(sup, 8);
	ck_assert(log_rl_take_at(&rl, 6001, &sup));
	ck_assert_uint_eq(sup, 0);
	/* a quiet spell: a window begins with the next message, not on a grid */
	ck_assert(log_rl_take_at(&rl, 60000, &sup));
	ck_assert_uint_eq(sup, 0);
	ck_assert(log_rl_take_at(&rl, 60001, &sup));
	ck_assert(log_rl_take_at(&rl, 60002, &sup));
	ck_assert(!log_rl_take_at(&rl, 60999, &sup));
	ck_assert(log_rl_take_at(&rl, 61002, &sup));
	ck_assert_uint_eq(sup, 1);
}
END_TEST

/* a limiter of burst 0 lets nothing through and keeps counting */
START_TEST(t_burst_zero)
{
	struct log_rl rl = LOG_RL_INIT(0, 10);
	unsigned sup;

	for (unsigned i = 0; i < 100; i++)
		ck_assert(!log_rl_take_at(&rl, 1 + i * 100, &sup));
	ck_assert_uint_eq(atomic_load(&rl.dropped), 100);
}
END_TEST

#define THREADS 4
#define TAKES 100000

static struct log_rl shared = LOG_RL_INIT(5, 3600 * 1000);
static atomic_ulong let_out, told;

static void *taker(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < TAKES; i++) {
		unsigned sup;

		if (log_rl_take(&shared, &sup)) {
			atomic_fetch_add(&let_out, 1);
			atomic_fetch_add(&told, sup);
		}
	}
	return NULL;
}

/* threads on one limiter within one window: exactly burst let out, and
 * what was let out, told and still pending adds up to every take */
START_TEST(t_threads)
{
	pthread_t t[THREADS];
	unsigned sup;

	for (unsigned i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, taker, NULL), 0);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(atomic_load(&let_out), 5);
	ck_assert_uint_eq(atomic_load(&let_out) + atomic_load(&told) + atomic_load(&shared.dropped),
	                  (unsigned long)THREADS * TAKES);
	/* the window's end: the next line tells what is pending */
	ck_assert(log_rl_take_at(&shared, atomic_load(&shared.start) + 3600 * 1000, &sup));
	ck_assert_uint_eq(sup + atomic_load(&told) + 5, (unsigned long)THREADS * TAKES);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_window);
	tcase_add_test(tc, t_burst_zero);
	tcase_add_test(tc, t_threads);
	suite_add_tcase(s, tc);

	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

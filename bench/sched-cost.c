/* sched-cost.c - the request scheduler's own cost on its common path, for
 * counting instructions under callgrind: N requests, each taken
 * (sched_rq_new), given a 4 KiB buffer and run at once (sched_start), a loop
 * pass's kick, and answered (sched_finish); one slot domain, a pool that
 * always has a buffer, an engine that always has a tracker.  Run it with two
 * N and take the difference over their difference, so that start-up and
 * tear-down cancel:
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null build/tools/sched-cost 100000
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null build/tools/sched-cost 200000
 *
 * It uses only what every version of rqsched.h has had, so that it builds
 * against older trees too. */
#include <stdio.h>
#include <stdlib.h>

#include "rqsched.h"

static char pool[4096];

static void *buf_alloc(void *ctx, unsigned dom, size_t len)
{
	(void)ctx;
	(void)dom;
	(void)len;
	return pool;
}

static void buf_free(void *ctx, unsigned dom, void *buf, size_t len)
{
	(void)ctx;
	(void)dom;
	(void)buf;
	(void)len;
}

static int call(void *ctx, void (*fn)(void *), void *arg)
{
	(void)ctx;
	fn(arg);
	return 0;
}

static enum sched_res run(struct sched_rq *q)
{
	(void)q;
	return SCHED_ASYNC;
}

static void give_up(struct sched_rq *q, int errnum)
{
	(void)q;
	(void)errnum;
}

int main(int argc, char **argv)
{
	struct sched_env env = {.buf_alloc = buf_alloc, .buf_free = buf_free, .call = call};
	struct sched_opts o = {.rq_size = sizeof(struct sched_rq), .max_payload = 4096};
	struct sched *s;
	long n = argc == 2 ? atol(argv[1]) : 0;

	if (n <= 0) {
		fprintf(stderr, "usage: sched-cost N (requests, > 0)\n");
		return 2;
	}
	if (sched_create(&env, &o, &s) < 0)
		return 1;
	for (long i = 0; i < n; i++) {
		struct sched_rq *q = sched_rq_new(s, FUSEFS_OP_READ);

		if (!q)
			return 1;
		q->mem = sizeof(pool);
		q->run = run;
		q->abort = give_up;
		sched_start(q);
		sched_kick(s);
		sched_finish(q, 0);
	}
	sched_destroy(s, 0);
	return 0;
}

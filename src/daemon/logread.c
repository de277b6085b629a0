/* logread.c - log pages read for the loop (contract in logread.h). */
#include "logread.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "nvme.h"

struct logrd_q {
	pthread_mutex_t m;
	struct ev_loop *loop;
	ev_async w;
	struct logrd *done; /* completed, not yet seen by the loop */
	unsigned live;      /* reads not yet freed */
	bool stopped;       /* logrd_q_stop ran */
};

struct logrd {
	struct logrd_q *q;
	logrd_fn fn;
	void *arg;
	bool cancelled;
	int err;
	size_t len;
	struct logrd *next;
	uint8_t buf[];
};

static void q_destroy(struct logrd_q *q)
{
	pthread_mutex_destroy(&q->m);
	free(q);
}

/* On an engine thread: hand the read to the loop, or free it when the
 * queue was stopped (the engine is done with the buffer now). */
static void engine_cb(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct logrd *rd = arg;
	struct logrd_q *q = rd->q;
	bool last = false;

	(void)cqe;
	rd->err = err;
	pthread_mutex_lock(&q->m);
	if (q->stopped) {
		last = --q->live == 0;
		pthread_mutex_unlock(&q->m);
		free(rd);
		if (last)
			q_destroy(q);
		return;
	}
	rd->next = q->done;
	q->done = rd;
	ev_async_send(q->loop, &q->w);
	pthread_mutex_unlock(&q->m);
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct logrd_q *q = w->data;
	struct logrd *rd, *list = NULL, *next;

	(void)loop, (void)revents;
	pthread_mutex_lock(&q->m);
	/* reversed back into completion order */
	for (rd = q->done; rd; rd = next) {
		next = rd->next;
		rd->next = list;
		list = rd;
		q->live--;
	}
	q->done = NULL;
	pthread_mutex_unlock(&q->m);
	for (rd = list; rd; rd = next) {
		next = rd->next;
		if (!rd->cancelled)
			rd->fn(rd->arg, rd->err, rd->buf, rd->len);
		free(rd);
	}
}

int logrd_q_create(struct ev_loop *loop, struct logrd_q **out)
{
	struct logrd_q *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->m, NULL);
	q->loop = loop;
	ev_async_init(&q->w, async_cb);
	q->w.data = q;
	ev_async_start(loop, &q->w);
	*out = q;
	return 0;
}

void logrd_q_stop(struct logrd_q *q)
{
	struct logrd *rd, *next;
	bool last;

	if (!q)
		return;
	ev_async_stop(q->loop, &q->w);
	pthread_mutex_lock(&q->m);
	q->stopped = true;
	for (rd = q->done; rd; rd = next) {
		next = rd->next;
		free(rd);
		q->live--;
	}
	q->done = NULL;
	last = q->live == 0;
	pthread_mutex_unlock(&q->m);
	if (last)
		q_destroy(q);
}

int logrd_read(struct logrd_q *q, struct nvme_ctrl *c, uint8_t lid, size_t len, logrd_fn fn,
	       void *arg, struct logrd **out)
{
	struct logrd *rd;
	int ret;

	if (!c || !fn || len > NVME_LOG_MAX_BYTES)
		return -EINVAL;
	rd = calloc(1, sizeof(*rd) + len);
	if (!rd)
		return -ENOMEM;
	rd->q = q;
	rd->fn = fn;
	rd->arg = arg;
	rd->len = len;
	pthread_mutex_lock(&q->m);
	q->live++;
	pthread_mutex_unlock(&q->m);
	ret = nvme_ctrl_get_log_async(c, lid, NVME_NSID_ALL, rd->buf, len, engine_cb, rd);
	if (ret) {
		pthread_mutex_lock(&q->m);
		q->live--;
		pthread_mutex_unlock(&q->m);
		free(rd);
		return ret;
	}
	if (out)
		*out = rd;
	return 0;
}

void logrd_cancel(struct logrd *rd)
{
	if (rd)
		rd->cancelled = true;
}

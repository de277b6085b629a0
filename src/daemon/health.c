/* health.c - the SMART / Health cache (contract in health.h). */
#include "health.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <ev.h>

#include "log.h"
#include "logread.h"

const char *const health_warning_names[HEALTH_WARN_NR] = {
    "spare", "temperature", "reliability", "readonly", "backup",
};

struct health_slot {
	struct health *h;
	unsigned idx;
	struct health_ctrl v;
	struct logrd *rd;       /* the read outstanding, NULL: none */
	bool again;             /* a refresh came during the read */
	atomic_bool want;       /* health_refresh asked (any thread) */
};

struct health {
	struct ev_loop *loop;
	struct logrd_q *q;
	struct nvme_ctrl *const *ctrls; /* the caller's: read at each use */
	ev_timer tick;
	ev_async kick;
	unsigned nr;
	struct health_slot slot[];
};

static void health_read(struct health_slot *s);

/* the last good figures stay; the first failure of a run is logged */
static void health_fail(struct health_slot *s, int err)
{
	if (!s->v.err)
		log_warn("health: %s: SMART log not read: %s",
		         nvme_ctrl_name(s->h->ctrls[s->idx]), strerror(-err));
	s->v.err = err;
	s->v.err_at = time(NULL);
	s->v.failures++;
}

/* One line per change of the critical warning bits, whatever read saw it
 * (an event's or the timer's): set bits as errors, cleared ones as info. */
static void health_warn_log(struct health_slot *s, uint8_t was, uint8_t now)
{
	const char *name = nvme_ctrl_name(s->h->ctrls[s->idx]);
	char set[96] = "", clr[96] = "";

	for (unsigned b = 0; b < HEALTH_WARN_NR; b++) {
		char *to = now & (1u << b) ? set : clr;

		if (!((was ^ now) & (1u << b)))
			continue;
		snprintf(to + strlen(to), sizeof(set) - strlen(to), "%s%s", *to ? ", " : "",
		         health_warning_names[b]);
	}
	if (*set)
		log_err("%s: SMART critical warning: %s (critical_warning 0x%02x)", name, set, now);
	if (*clr)
		log_info("%s: SMART critical warning cleared: %s (critical_warning 0x%02x)", name,
		         clr, now);
}

static void health_done(void *arg, int err, const void *buf, size_t len)
{
	struct health_slot *s = arg;
	struct nvme_health nh;

	s->rd = NULL;
	if (!err)
		err = nvme_health_decode(buf, len, &nh);
	if (err) {
		health_fail(s, err);
	} else {
		uint8_t was = s->v.valid ? s->v.smart.critical_warning : 0;

		if (was != nh.critical_warning)
			health_warn_log(s, was, nh.critical_warning);
		s->v.smart = nh;
		s->v.valid = true;
		s->v.read_at = time(NULL);
		s->v.err = 0;
		s->v.reads++;
	}
	if (s->again) {
		s->again = false;
		health_read(s);
	}
}

static void health_read(struct health_slot *s)
{
	struct nvme_ctrl *c = s->h->ctrls[s->idx];
	int ret;

	if (!c)
		return; /* an empty slot: nothing to read */
	if (s->rd) {
		s->again = true;
		return;
	}
	ret = logrd_read(s->h->q, c, NVME_LOG_SMART, sizeof(struct nvme_smart_log), health_done, s,
	                 &s->rd);
	if (ret) {
		/* not submitted (removed, queue full): the next tick tries again */
		s->rd = NULL;
		health_fail(s, ret);
	}
}

static void health_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct health *h = w->data;

	(void)loop, (void)revents;
	for (unsigned i = 0; i < h->nr; i++)
		health_read(&h->slot[i]);
}

static void health_kick_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct health *h = w->data;

	(void)loop, (void)revents;
	for (unsigned i = 0; i < h->nr; i++)
		if (atomic_exchange(&h->slot[i].want, false))
			health_read(&h->slot[i]);
}

int health_start(struct ev_loop *loop, struct logrd_q *q, struct nvme_ctrl *const *ctrls,
                 unsigned nr, unsigned interval, struct health **out)
{
	struct health *h = calloc(1, sizeof(*h) + nr * sizeof(h->slot[0]));

	if (!h)
		return -ENOMEM;
	h->loop = loop;
	h->q = q;
	h->ctrls = ctrls;
	h->nr = nr;
	for (unsigned i = 0; i < nr; i++) {
		h->slot[i].h = h;
		h->slot[i].idx = i;
		atomic_init(&h->slot[i].want, false);
	}
	ev_async_init(&h->kick, health_kick_cb);
	h->kick.data = h;
	ev_async_start(loop, &h->kick);
	ev_init(&h->tick, health_tick_cb);
	h->tick.data = h;
	if (interval) {
		/* the first read right away, then every interval */
		ev_timer_set(&h->tick, 0.0, (double)interval);
		ev_timer_start(loop, &h->tick);
	}
	*out = h;
	return 0;
}

void health_stop(struct health *h)
{
	if (!h)
		return;
	ev_timer_stop(h->loop, &h->tick);
	ev_async_stop(h->loop, &h->kick);
	for (unsigned i = 0; i < h->nr; i++)
		logrd_cancel(h->slot[i].rd);
	free(h);
}

int health_refresh(struct health *h, unsigned ctrl)
{
	if (!h || ctrl >= h->nr)
		return -EINVAL;
	atomic_store(&h->slot[ctrl].want, true);
	ev_async_send(h->loop, &h->kick);
	return 0;
}

const struct health_ctrl *health_get(const struct health *h, unsigned ctrl)
{
	if (!h || ctrl >= h->nr)
		return NULL;
	return &h->slot[ctrl].v;
}

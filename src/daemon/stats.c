/* stats.c - one snapshot of the daemon's figures (contract in stats.h). */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "admin.h"
#include "health.h"

const char *const stats_errc_names[NVME_ERRC_NR] = {
    [NVME_ERRC_GENERIC] = "generic", [NVME_ERRC_CMD] = "command", [NVME_ERRC_MEDIA] = "media",
    [NVME_ERRC_PATH] = "path",       [NVME_ERRC_OTHER] = "other", [NVME_ERRC_TIMEOUT] = "timeout",
    [NVME_ERRC_PROTECTION] = "protection",
};
const char *const stats_fuse_op_names[FUSEFS_OP_NR] = {
    [FUSEFS_OP_READ] = "read",   [FUSEFS_OP_WRITE] = "write", [FUSEFS_OP_FLUSH] = "flush",
    [FUSEFS_OP_PUNCH] = "punch", [FUSEFS_OP_ZERO] = "zero",   [FUSEFS_OP_OTHER] = "other",
};
const char *const stats_fuse_wait_names[FUSEFS_WAIT_NR] = {
    [FUSEFS_WAIT_MEM] = "memory",
    [FUSEFS_WAIT_SLOT] = "queue_slot",
    [FUSEFS_WAIT_LOCK] = "range_lock",
};
const char *const stats_aen_kind_names[STATS_AEN_KINDS] = {
    [NVME_AEN_ERROR] = "error",
    [NVME_AEN_SMART] = "smart",
    [NVME_AEN_NS_CHANGED] = "ns_changed",
    [NVME_AEN_FW_ACTIVATE] = "fw_activate",
    [NVME_AEN_OTHER] = "other",
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The files shown now: the daemon's view when it gives one (the table
 * changes at run time), else those of the start. */
static const struct admin_ns *ns_view(const struct admin_ctx *ctx, unsigned *nr)
{
	if (ctx->ns_view)
		return ctx->ns_view(ctx->ns_view_arg, nr);
	*nr = ctx->nr_ns;
	return ctx->ns;
}

static void take_ctrl(const struct admin_ctx *ctx, const struct health *h, unsigned i,
		      struct stats_ctrl *sc)
{
	const struct health_ctrl *hc = health_get(h, i);

	sc->c = ctx->ctrls[i];
	if (!sc->c)
		return;
	sc->name = nvme_ctrl_name(sc->c);
	sc->state = nvme_ctrl_state(sc->c);
	sc->detached = ctx->ctrl_away && ctx->ctrl_away(ctx->ctrl_away_arg, i);
	sc->info = nvme_ctrl_get_info(sc->c);
	sc->sim = ctx->sims && ctx->sims[i];
	nvme_ctrl_rstats_get(sc->c, &sc->rs);
	nvme_ctrl_aen_stats_get(sc->c, &sc->aen);
	if (hc) {
		sc->health_known = true;
		sc->health = *hc;
	}
}

int stats_take(const struct admin_ctx *ctx, const struct health *h, double uptime,
	       struct stats_snap **out)
{
	unsigned nc = ctx->nr_ctrls, nr = ctx->nr_reactors;
	struct stats_snap *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->mono = mono();
	s->uptime = uptime;
	s->start_time = ctx->start_time;
	s->nr_ctrls = nc;
	s->nr_reactors = nr;
	s->ctrl = calloc(nc ? nc : 1, sizeof(*s->ctrl));
	s->reactor = calloc(nr ? nr : 1, sizeof(*s->reactor));
	s->qp = calloc((size_t)nr * nc + 1, sizeof(*s->qp));
	if (!s->ctrl || !s->reactor || !s->qp)
		goto nomem;
	for (unsigned i = 0; i < nc; i++)
		take_ctrl(ctx, h, i, &s->ctrl[i]);
	for (unsigned r = 0; r < nr; r++) {
		struct stats_reactor *sr = &s->reactor[r];

		sr->r = ctx->reactors[r];
		sr->id = nvme_reactor_id(sr->r);
		sr->cpu = nvme_reactor_cpu(sr->r);
		sr->node = nvme_reactor_node(sr->r);
		nvme_reactor_stats_get(sr->r, &sr->st);
		for (unsigned c = 0; c < nc; c++) {
			struct stats_qpair *q = &s->qp[(size_t)r * nc + c];

			q->qp = ctx->qpairs && s->ctrl[c].c ? ctx->qpairs[(size_t)r * nc + c] : NULL;
			if (!q->qp)
				continue;
			s->ctrl[c].nr_qpairs++;
			q->qid = nvme_qpair_id(q->qp);
			q->vector = nvme_qpair_vector(q->qp);
			nvme_qpair_stats_get(q->qp, &q->st);
			q->inflight = nvme_qpair_inflight(q->qp);
		}
	}
	if (ctx->fuse_stats) {
		s->has_fuse = true;
		ctx->fuse_stats(ctx->fuse_stats_arg, &s->fuse);
	}
	s->ns = ns_view(ctx, &s->nr_ns);
	if (ctx->fuse_ns_stats && s->nr_ns) {
		s->ns_st = calloc(s->nr_ns, sizeof(*s->ns_st));
		if (!s->ns_st)
			goto nomem;
		/* a file that went between the view and its figures has zeros */
		for (unsigned i = 0; i < s->nr_ns; i++)
			(void)ctx->fuse_ns_stats(ctx->fuse_stats_arg, s->ns[i].name, &s->ns_st[i]);
	}
	*out = s;
	return 0;
nomem:
	stats_free(s);
	return -ENOMEM;
}

void stats_free(struct stats_snap *s)
{
	if (!s)
		return;
	free(s->ctrl);
	free(s->reactor);
	free(s->qp);
	free(s->ns_st);
	free(s);
}

const char *stats_ctrl_state_name(const struct stats_ctrl *sc)
{
	return sc->detached ? "detached" : nvme_ctrl_state_name(sc->state);
}

const struct stats_ctrl *stats_ns_ctrl(const struct stats_snap *s, const struct admin_ns *ns)
{
	return ns->ctrl < s->nr_ctrls && s->ctrl[ns->ctrl].c ? &s->ctrl[ns->ctrl] : NULL;
}

/* admin_cmd.c - the admin server's command handlers and their table (see
 * admin.h for the commands and their replies): status, stats, queues,
 * namespaces, identify, config, metrics, inject, attach, detach, the log
 * pages (one handler over a table of them), list and restart.  Each builds
 * its reply with json-c; those that report figures read one snapshot
 * (stats.h) taken for the request, those that act call the engine, the
 * software controller's fault injection or the daemon's callbacks;
 * admin_server.c decides who may call which.
 */
#include "admin_priv.h"
#include "cpumap.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "health.h"
#include "log.h"
#include "logread.h"
#include "sim.h"
#include "stats.h"

/* ---- small helpers ---- */

static double ratio(uint64_t num, uint64_t den)
{
	return den ? (double)num / (double)den : NAN;
}

static const char *mode_name(const struct admin *a)
{
	return a->ctx.cfg ? cfg_mode_name(a->ctx.cfg->engine.mode) : "unknown";
}

/* Whether the queues take interrupts: interrupt mode only (hybrid polls
 * and wires no vector, engine.md). */
static bool interrupts_on(const struct admin *a)
{
	return a->ctx.cfg && a->ctx.cfg->engine.mode == CFG_MODE_INTERRUPT;
}

/* The config section of controller i (matched by name: the daemon keeps
 * them in config order, but a name is what an operator sees). */
static const struct cfg_controller *ctrl_cfg(const struct admin *a, unsigned i)
{
	const struct cfg *cfg = a->ctx.cfg;
	const char *name = nvme_ctrl_name(a->ctx.ctrls[i]);

	if (!cfg)
		return NULL;
	if (i < cfg->nr_ctrls && name && !strcmp(cfg->ctrls[i].name, name))
		return &cfg->ctrls[i];
	for (unsigned j = 0; j < cfg->nr_ctrls && name; j++)
		if (!strcmp(cfg->ctrls[j].name, name))
			return &cfg->ctrls[j];
	return NULL;
}

/* The snapshot of this request's figures; NULL with err set (out of
 * memory). */
static struct stats_snap *snap_take(struct admin *a, char *err, size_t errlen)
{
	struct stats_snap *st = NULL;

	if (stats_take(&a->ctx, a->health, uptime(a), &st)) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return st;
}

static int recov_find_ctrl(struct admin *a, json_object *req, const char *cmd, unsigned *out,
                           char *err, size_t errlen);
/* recovery views, defined with inject and attach below */
static const char *recov_state(const struct admin *a, unsigned i);
static void recov_status_ctrl(const struct admin *a, const struct stats_snap *st, unsigned i,
                              json_object *c);
static json_object *recov_stats_ctrls(const struct stats_snap *st);
static void recov_qstats_json(json_object *o, const struct nvme_qpair_stats *s);
static void recov_qstats_add(struct nvme_qpair_stats *d, const struct nvme_qpair_stats *s);

/* ---- statistics ---- */

static void stats_add(struct nvme_qpair_stats *d, const struct nvme_qpair_stats *s)
{
	d->submitted += s->submitted;
	d->completed += s->completed;
	for (unsigned i = 0; i < NVME_ERRC_NR; i++)
		d->errors[i] += s->errors[i];
	d->bogus_cqes += s->bogus_cqes;
	d->reap_passes += s->reap_passes;
	d->budget_exhausted += s->budget_exhausted;
	for (unsigned i = 0; i < NVME_CPP_BUCKETS; i++)
		d->cpl_per_pass[i] += s->cpl_per_pass[i];
	d->sq_doorbells += s->sq_doorbells;
	d->cq_doorbells += s->cq_doorbells;
	d->interrupts += s->interrupts;
	d->idle_polls += s->idle_polls;
	d->bytes_read += s->bytes_read;
	d->bytes_written += s->bytes_written;
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++)
		d->lat_ns[i] += s->lat_ns[i];
	recov_qstats_add(d, s);
}

static uint64_t errors_total(const struct nvme_qpair_stats *s)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < NVME_ERRC_NR; i++)
		t += s->errors[i];
	return t;
}

/* Mean CQEs per reaping pass that reaped any: the last bucket (>= 16)
 * counts as 16, so the mean is a lower bound when it is used. */
static double cpl_per_pass_mean(const struct nvme_qpair_stats *s)
{
	uint64_t passes = 0, cpl = 0;

	for (unsigned i = 1; i < NVME_CPP_BUCKETS; i++) {
		passes += s->cpl_per_pass[i];
		cpl += (uint64_t)i * s->cpl_per_pass[i];
	}
	return ratio(cpl, passes);
}

static json_object *stats_json(const struct nvme_qpair_stats *s)
{
	json_object *o = json_object_new_object(), *e = json_object_new_object();
	json_object *cpp = json_object_new_array(), *lat = json_object_new_object();

	jset_u64(o, "submitted", s->submitted);
	jset_u64(o, "completed", s->completed);
	for (unsigned i = 0; i < NVME_ERRC_NR; i++)
		jset_u64(e, stats_errc_names[i], s->errors[i]);
	jset_u64(e, "total", errors_total(s));
	jset(o, "errors", e);
	jset_u64(o, "bogus_cqes", s->bogus_cqes);
	jset_u64(o, "reap_passes", s->reap_passes);
	jset_u64(o, "budget_exhausted", s->budget_exhausted);
	for (unsigned i = 0; i < NVME_CPP_BUCKETS; i++)
		json_object_array_add(cpp, json_object_new_uint64(s->cpl_per_pass[i]));
	jset(o, "cpl_per_pass", cpp);
	jset_dbl(o, "cpl_per_pass_mean", cpl_per_pass_mean(s), 3);
	jset_u64(o, "sq_doorbells", s->sq_doorbells);
	jset_u64(o, "cq_doorbells", s->cq_doorbells);
	jset_dbl(o, "doorbells_per_io", ratio(s->sq_doorbells + s->cq_doorbells, s->completed), 3);
	jset_u64(o, "interrupts", s->interrupts);
	jset_u64(o, "idle_polls", s->idle_polls);
	jset_u64(o, "bytes_read", s->bytes_read);
	jset_u64(o, "bytes_written", s->bytes_written);
	jset_dbl(lat, "p50", nvme_lat_percentile(s->lat_ns, 50.0) / 1e3, 3);
	jset_dbl(lat, "p99", nvme_lat_percentile(s->lat_ns, 99.0) / 1e3, 3);
	jset_dbl(lat, "p99_9", nvme_lat_percentile(s->lat_ns, 99.9) / 1e3, 3);
	jset_dbl(lat, "max", nvme_lat_percentile(s->lat_ns, 100.0) / 1e3, 3);
	jset(o, "latency_us", lat);
	recov_qstats_json(o, s);
	return o;
}

/* ---- commands ---- */

/* "transport": the FUSE transport serving requests now (no front end: none) */
static void jset_transport(const struct stats_snap *st, json_object *rep)
{
	if (st->has_fuse)
		jset_str(rep, "transport", fusefs_transport_name(st->fuse.transport));
}

static void jset_time(json_object *o, const char *k, time_t t)
{
	char when[32] = "";
	struct tm tm;

	if (t && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jset_str(o, k, when[0] ? when : NULL);
}

/* "health": the health cache's last SMART log of a controller */
static json_object *health_json(const struct stats_ctrl *sc)
{
	const struct health_ctrl *hc = sc->health_known ? &sc->health : NULL;
	json_object *o = json_object_new_object(), *w;

	if (!hc) {
		jset_bool(o, "valid", false);
		return o;
	}
	jset_bool(o, "valid", hc->valid);
	if (hc->valid) {
		const struct nvme_health *h = &hc->smart;

		jset_int(o, "critical_warning", h->critical_warning);
		w = json_object_new_array();
		for (unsigned b = 0; b < HEALTH_WARN_NR; b++)
			if (h->critical_warning & (1u << b))
				json_object_array_add(w, json_object_new_string(health_warning_names[b]));
		jset(o, "critical_warnings", w);
		if (h->temperature) /* 0: not reported */
			jset_int(o, "temperature_c", (int)h->temperature - 273);
		else
			jset(o, "temperature_c", NULL);
		jset_int(o, "percentage_used", h->percent_used);
		jset_int(o, "available_spare", h->avail_spare);
		jset_int(o, "available_spare_threshold", h->spare_thresh);
		jset_time(o, "read_at", hc->read_at);
	}
	jset_str(o, "error", hc->err ? strerror(-hc->err) : NULL);
	if (hc->err)
		jset_time(o, "error_at", hc->err_at);
	return o;
}

static int cmd_status(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	const struct cfg *cfg = a->ctx.cfg;
	struct stats_snap *st = snap_take(a, err, errlen);
	json_object *ctrls, *rs;
	char when[32] = "";
	struct tm tm;

	(void)req;
	if (!st)
		return -ENOMEM;
	ctrls = json_object_new_array();
	rs = json_object_new_array();
	if (a->ctx.start_time && gmtime_r(&a->ctx.start_time, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jset_str(rep, "version", NVMEFS_VERSION);
	jset_int(rep, "pid", getpid());
	jset_dbl(rep, "uptime_s", st->uptime, 1);
	jset_str(rep, "started", when[0] ? when : NULL);
	jset_str(rep, "config_file", a->ctx.config_path);
	jset_str(rep, "mountpoint", cfg ? cfg->daemon.mountpoint : NULL);
	jset_str(rep, "admin_socket", a->path);
	jset_str(rep, "mode", mode_name(a));
	jset_transport(st, rep);
	if (cfg) {
		jset_int(rep, "queue_depth", cfg->engine.queue_depth);
		jset_int(rep, "cq_budget", cfg->engine.cq_budget);
	}
	for (unsigned i = 0; i < st->nr_ctrls; i++) {
		const struct stats_ctrl *sc = &st->ctrl[i];
		const struct cfg_controller *cc;
		json_object *c;

		if (!sc->c)
			continue;
		cc = ctrl_cfg(a, i);
		c = json_object_new_object();
		jset_str(c, "name", sc->name);
		jset_str(c, "device", cc ? (cc->sim ? "sim" : cc->device) : NULL);
		jset_str(c, "backend", cc ? (cc->sim ? "sim" : "vfio") : NULL);
		jset_str(c, "mode", mode_name(a));
		jset_bool(c, "interrupts", interrupts_on(a));
		jset_str(c, "model", sc->info->model);
		jset_int(c, "io_queues_granted", sc->info->nr_io_queues);
		jset_int(c, "io_queues", sc->nr_qpairs);
		jset_int(c, "namespaces", sc->info->nr_ns);
		recov_status_ctrl(a, st, i, c);
		jset(c, "health", health_json(sc));
		json_object_array_add(ctrls, c);
	}
	jset(rep, "controllers", ctrls);
	for (unsigned r = 0; r < st->nr_reactors; r++) {
		json_object *o = json_object_new_object();

		jset_int(o, "id", st->reactor[r].id);
		jset_int(o, "cpu", st->reactor[r].cpu);
		jset_int(o, "node", st->reactor[r].node);
		json_object_array_add(rs, o);
	}
	jset(rep, "reactors", rs);
	jset_int(rep, "namespaces", st->nr_ns);
	stats_free(st);
	return 0;
}

/* ---- the FUSE front end's figures (stats) ---- */

static json_object *lat_json(const uint64_t *h)
{
	json_object *lat = json_object_new_object();

	jset_dbl(lat, "p50", nvme_lat_percentile(h, 50.0) / 1e3, 3);
	jset_dbl(lat, "p99", nvme_lat_percentile(h, 99.0) / 1e3, 3);
	jset_dbl(lat, "p99_9", nvme_lat_percentile(h, 99.9) / 1e3, 3);
	jset_dbl(lat, "max", nvme_lat_percentile(h, 100.0) / 1e3, 3);
	return lat;
}

/* The engine's histogram as its non-empty buckets, [upper bound in ns,
 * count] each, in order: two snapshots' difference gives any interval's
 * distribution (nvmefsctl iostat's percentiles). */
static json_object *buckets_json(const uint64_t *h)
{
	json_object *arr = json_object_new_array();

	for (unsigned b = 0; b < NVME_LAT_BUCKETS; b++) {
		json_object *pair;

		if (!h[b])
			continue;
		pair = json_object_new_array();
		json_object_array_add(pair, json_object_new_uint64(nvme_lat_bucket_ns(b)));
		json_object_array_add(pair, json_object_new_uint64(h[b]));
		json_object_array_add(arr, pair);
	}
	return arr;
}

/* The "namespaces" array of the stats reply: each file shown now with its
 * requests by kind; NULL without a front end keeping them. */
static json_object *ns_stats_json(const struct stats_snap *st)
{
	json_object *arr;

	if (!st->ns_st)
		return NULL;
	arr = json_object_new_array();
	for (unsigned i = 0; i < st->nr_ns; i++) {
		const struct stats_ctrl *sc = stats_ns_ctrl(st, &st->ns[i]);
		const struct fusefs_ns_stats *ns = &st->ns_st[i];
		json_object *o = json_object_new_object(), *ops = json_object_new_object();

		jset_str(o, "name", st->ns[i].name);
		jset_str(o, "controller", sc ? sc->name : NULL);
		jset_int(o, "nsid", st->ns[i].nsid);
		jset_u64(o, "inflight", ns->inflight);
		jset_u64(o, "busy_ns", ns->busy_ns);
		for (unsigned k = 0; k < FUSEFS_NSOP_NR; k++) {
			const struct fusefs_nsop_stats *op = &ns->op[k];
			json_object *oo = json_object_new_object();

			jset_u64(oo, "count", op->count);
			jset_u64(oo, "bytes", op->bytes);
			jset_u64(oo, "errors", op->errors);
			jset_u64(oo, "sum_ns", op->sum_ns);
			jset_u64(oo, "queue_ns", op->queue_ns);
			jset(oo, "latency_us", lat_json(op->lat_ns));
			jset(oo, "buckets", buckets_json(op->lat_ns));
			jset(ops, stats_fuse_op_names[k], oo);
		}
		jset(o, "ops", ops);
		json_object_array_add(arr, o);
	}
	return arr;
}

/* The "fuse" object of the stats reply, or NULL without a front end. */
static json_object *fuse_stats_json(const struct stats_snap *snap)
{
	const struct fusefs_stats *st = &snap->fuse;
	json_object *o, *parked, *waits, *ops;

	if (!snap->has_fuse)
		return NULL;
	o = json_object_new_object();
	parked = json_object_new_object();
	waits = json_object_new_object();
	ops = json_object_new_object();
	jset_str(o, "transport", fusefs_transport_name(st->transport));
	jset_u64(o, "inflight", st->inflight);
	for (unsigned i = 0; i < FUSEFS_WAIT_NR; i++) {
		jset_u64(parked, stats_fuse_wait_names[i], st->parked[i]);
		jset_u64(waits, stats_fuse_wait_names[i], st->waits[i]);
	}
	jset(o, "parked", parked);
	jset(o, "waits", waits);
	jset_u64(o, "lock_waits", st->lock_waits);
	jset_dbl(o, "lock_wait_s", st->lock_wait_ns / 1e9, 6);
	jset_u64(o, "bounce_bytes", st->bounce_bytes);
	jset_u64(o, "bounce_peak_bytes", st->bounce_peak);
	jset_u64(o, "channel_pauses", st->channel_pauses);
	jset_u64(o, "rmw_writes", st->rmw_writes);
	jset_u64(o, "flushes_sent", st->flushes_sent);
	jset_u64(o, "dsync_writes", st->dsync_writes);
	jset_u64(o, "fua_writes", st->fua_writes);
	jset_u64(o, "dsync_flushes", st->dsync_flushes);
	jset_u64(o, "ring_requests", st->ring_requests);
	jset_u64(o, "copy_bytes", st->copy_bytes);
	jset_u64(o, "bad_requests", st->bad_requests);
	jset_u64(o, "dup_answers", st->dup_answers);
	jset_u64(o, "late_answers", st->late_answers);
	jset_u64(o, "audit_violations", st->audit_violations);
	for (unsigned i = 0; i < FUSEFS_OP_NR; i++) {
		const struct fusefs_op_stats *op = &st->op[i];
		json_object *oo = json_object_new_object();

		jset_u64(oo, "count", op->count);
		jset_u64(oo, "bytes", op->bytes);
		jset_u64(oo, "errors", op->errors);
		jset(oo, "latency_us", lat_json(op->lat_ns));
		jset(ops, stats_fuse_op_names[i], oo);
	}
	jset(o, "ops", ops);
	return o;
}

static int cmd_stats(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	struct stats_snap *st = snap_take(a, err, errlen);
	struct nvme_qpair_stats *tot = calloc(1, sizeof(*tot));
	struct nvme_reactor_stats rtot = {0};
	json_object *rs;

	(void)req;
	if (!st || !tot) {
		stats_free(st);
		free(tot);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rs = json_object_new_array();
	jset_dbl(rep, "time", st->mono, 6);
	jset_dbl(rep, "uptime_s", st->uptime, 1);
	for (unsigned r = 0; r < st->nr_reactors; r++) {
		const struct stats_reactor *sr = &st->reactor[r];
		const struct nvme_reactor_stats *rst = &sr->st;
		json_object *ro = json_object_new_object(), *qs = json_object_new_array();

		rtot.passes += rst->passes;
		rtot.sleeps += rst->sleeps;
		rtot.wakeups += rst->wakeups;
		rtot.calls += rst->calls;
		rtot.busy_ns += rst->busy_ns;
		rtot.idle_ns += rst->idle_ns;
		rtot.busy_passes += rst->busy_passes;
		jset_int(ro, "id", sr->id);
		jset_int(ro, "cpu", sr->cpu);
		jset_int(ro, "node", sr->node);
		jset_u64(ro, "passes", rst->passes);
		jset_u64(ro, "sleeps", rst->sleeps);
		jset_u64(ro, "wakeups", rst->wakeups);
		jset_u64(ro, "calls", rst->calls);
		jset_u64(ro, "busy_ns", rst->busy_ns);
		jset_u64(ro, "idle_ns", rst->idle_ns);
		jset_u64(ro, "busy_passes", rst->busy_passes);
		for (unsigned c = 0; c < st->nr_ctrls; c++) {
			const struct stats_qpair *sq = stats_qp(st, r, c);
			json_object *q;

			if (!sq->qp)
				continue;
			stats_add(tot, &sq->st);
			q = stats_json(&sq->st);
			/* identity first in the printed object would be nicer,
			 * but json-c keeps insertion order only */
			jset_str(q, "controller", st->ctrl[c].name);
			jset_int(q, "qid", sq->qid);
			jset_int(q, "reactor", sr->id);
			jset_int(q, "inflight", sq->inflight);
			json_object_array_add(qs, q);
		}
		jset(ro, "qpairs", qs);
		json_object_array_add(rs, ro);
	}
	jset(rep, "reactors", rs);
	jset(rep, "controllers", recov_stats_ctrls(st));
	{
		json_object *t = stats_json(tot);

		jset_u64(t, "passes", rtot.passes);
		jset_u64(t, "sleeps", rtot.sleeps);
		jset_u64(t, "wakeups", rtot.wakeups);
		jset_u64(t, "calls", rtot.calls);
		jset_u64(t, "busy_ns", rtot.busy_ns);
		jset_u64(t, "idle_ns", rtot.idle_ns);
		jset_u64(t, "busy_passes", rtot.busy_passes);
		jset(rep, "totals", t);
	}
	{
		json_object *fo = fuse_stats_json(st), *no = ns_stats_json(st);

		if (fo)
			jset(rep, "fuse", fo);
		if (no)
			jset(rep, "namespaces", no);
	}
	free(tot);
	stats_free(st);
	return 0;
}

static int queue_depth(const struct admin *a, const struct nvme_ctrl_info *in)
{
	unsigned d = a->ctx.cfg ? a->ctx.cfg->engine.queue_depth : 0;

	/* the engine caps the configured depth at CAP.MQES + 1 */
	if (in->max_entries && (!d || d > in->max_entries))
		d = in->max_entries;
	return (int)d;
}

static int cmd_queues(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	struct stats_snap *st = snap_take(a, err, errlen);
	json_object *qs, *fq;

	(void)req;
	if (!st)
		return -ENOMEM;
	qs = json_object_new_array();
	jset_str(rep, "mode", mode_name(a));
	jset_bool(rep, "interrupts", interrupts_on(a));
	for (unsigned r = 0; r < st->nr_reactors; r++) {
		const struct stats_reactor *sr = &st->reactor[r];

		for (unsigned c = 0; c < st->nr_ctrls; c++) {
			const struct stats_qpair *sq = stats_qp(st, r, c);
			json_object *q;

			if (!sq->qp)
				continue;
			q = json_object_new_object();
			jset_int(q, "reactor", sr->id);
			jset_int(q, "cpu", sr->cpu);
			jset_int(q, "node", sr->node);
			jset_str(q, "controller", st->ctrl[c].name);
			jset_int(q, "qid", sq->qid);
			/* null: the CQ is polled (poll mode, or no vector for it) */
			jset(q, "vector", sq->vector >= 0 ? json_object_new_int(sq->vector) : NULL);
			jset_int(q, "depth", queue_depth(a, st->ctrl[c].info));
			jset_int(q, "inflight", sq->inflight);
			json_object_array_add(qs, q);
		}
	}
	jset(rep, "queues", qs);
	jset_transport(st, rep);
	/* one FUSE queue per possible CPU, and the reactor that serves it */
	fq = json_object_new_array();
	for (unsigned c = 0; c < a->ctx.nr_fuse_cpus; c++) {
		json_object *q = json_object_new_object();
		unsigned r = a->ctx.fuse_cpu_map[c];

		jset_int(q, "cpu", c);
		jset_int(q, "fuse_queue", c);
		jset_int(q, "node", a->ctx.fuse_cpus[c].node);
		jset_int(q, "reactor", r);
		jset_int(q, "reactor_cpu", r < st->nr_reactors ? st->reactor[r].cpu : -1);
		json_object_array_add(fq, q);
	}
	jset(rep, "fuse_queues", fq);
	stats_free(st);
	return 0;
}

static int cmd_namespaces(struct admin *a, json_object *req, json_object *rep, char *err,
                          size_t errlen)
{
	struct stats_snap *st = snap_take(a, err, errlen);
	json_object *ns;

	(void)req;
	if (!st)
		return -ENOMEM;
	ns = json_object_new_array();
	jset_str(rep, "mountpoint", a->ctx.cfg ? a->ctx.cfg->daemon.mountpoint : NULL);
	for (unsigned i = 0; i < st->nr_ns; i++) {
		const struct admin_ns *n = &st->ns[i];
		const struct stats_ctrl *sc = stats_ns_ctrl(st, n);
		json_object *o = json_object_new_object();

		jset_str(o, "name", n->name);
		jset_str(o, "controller", sc ? sc->name : NULL);
		jset_str(o, "state", sc ? stats_ctrl_state_name(sc) : NULL);
		jset_int(o, "nsid", n->nsid);
		jset_u64(o, "size", n->size);
		jset_int(o, "lba_size", n->lba_size);
		jset_u64(o, "blocks", n->lba_size ? n->size / n->lba_size : 0);
		jset_str(o, "path", n->path);
		json_object_array_add(ns, o);
	}
	jset(rep, "namespaces", ns);
	stats_free(st);
	return 0;
}

struct bitname {
	unsigned bit;
	const char *name;
};

/* NVMe base specification 2.0, Identify Controller ONCS and OACS */
static const struct bitname oncs_bits[] = {
    {0, "compare"},     {1, "write_uncorrectable"}, {2, "dataset_management"}, {3, "write_zeroes"},
    {4, "save_select"}, {5, "reservations"},        {6, "timestamp"},          {7, "verify"},
    {8, "copy"},
};
static const struct bitname oacs_bits[] = {
    {0, "security"},       {1, "format_nvm"},     {2, "firmware"},
    {3, "ns_management"},  {4, "self_test"},      {5, "directives"},
    {6, "nvme_mi"},        {7, "virtualization"}, {8, "doorbell_buffer_config"},
    {9, "get_lba_status"}, {10, "lockdown"},
};

static json_object *bits_json(unsigned v, const struct bitname *b, size_t n)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++)
		if (v & (1u << b[i].bit))
			json_object_array_add(a, json_object_new_string(b[i].name));
	return a;
}

static const char *sgls_support(uint32_t sgls)
{
	switch (sgls & 3) {
	case 0:
		return "none";
	case 1:
		return "any alignment";
	case 2:
		return "dword alignment";
	default:
		return "reserved";
	}
}

static int cmd_identify(struct admin *a, json_object *req, json_object *rep, char *err,
                        size_t errlen)
{
	json_object *ns;
	const char *name;
	const struct nvme_ctrl_info *in;
	char s[32];
	unsigned i;
	int ret;

	ret = recov_find_ctrl(a, req, "identify", &i, err, errlen);
	if (ret)
		return ret;
	name = nvme_ctrl_name(a->ctx.ctrls[i]);
	in = nvme_ctrl_get_info(a->ctx.ctrls[i]);
	jset_str(rep, "controller", name);
	jset_str(rep, "model", in->model);
	jset_str(rep, "serial", in->serial);
	jset_str(rep, "firmware", in->firmware);
	snprintf(s, sizeof(s), "0x%04x", in->vid);
	jset_str(rep, "vid", s);
	snprintf(s, sizeof(s), "%u.%u.%u", in->version >> 16, (in->version >> 8) & 0xff,
	         in->version & 0xff);
	jset_str(rep, "version", s);
	snprintf(s, sizeof(s), "0x%016llx", (unsigned long long)in->cap);
	jset_str(rep, "cap", s);
	jset_int(rep, "mdts", in->mdts);
	jset_u64(rep, "max_transfer", in->max_xfer);
	jset_u64(rep, "max_queue_entries", in->max_entries);
	jset_int(rep, "io_queues_granted", in->nr_io_queues);
	jset_int(rep, "vectors", in->nr_vectors);
	jset_bool(rep, "vwc", in->vwc);
	jset_int(rep, "oncs", in->oncs);
	jset(rep, "oncs_decoded",
	     bits_json(in->oncs, oncs_bits, sizeof(oncs_bits) / sizeof(oncs_bits[0])));
	jset_int(rep, "oacs", in->oacs);
	jset(rep, "oacs_decoded",
	     bits_json(in->oacs, oacs_bits, sizeof(oacs_bits) / sizeof(oacs_bits[0])));
	jset_u64(rep, "sgls", in->sgls);
	jset_str(rep, "sgls_decoded", sgls_support(in->sgls));
	jset_u64(rep, "nn", in->nn);
	ns = json_object_new_array();
	for (unsigned k = 0; k < in->nr_ns; k++) {
		json_object *o = json_object_new_object();

		jset_int(o, "nsid", in->ns[k].nsid);
		jset_u64(o, "blocks", in->ns[k].nlba);
		jset_int(o, "lba_size", in->ns[k].lba_size);
		jset_u64(o, "size", in->ns[k].nlba * in->ns[k].lba_size);
		jset_bool(o, "dealloc_zeroes", in->ns[k].dealloc_zeroes);
		json_object_array_add(ns, o);
	}
	jset(rep, "namespaces", ns);
	return 0;
}

static int cmd_config(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)req;
	if (!a->ctx.cfg) {
		snprintf(err, errlen, "no configuration loaded");
		return -ENOENT;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		snprintf(err, errlen, "open_memstream: %s", strerror(errno));
		return -errno;
	}
	cfg_print(a->ctx.cfg, f);
	if (fclose(f) != 0 || !text) {
		free(text);
		snprintf(err, errlen, "printing the config failed");
		return -EIO;
	}
	jset_str(rep, "path", a->ctx.config_path);
	jset(rep, "text", json_object_new_string_len(text, (int)len));
	free(text);
	return 0;
}

static int cmd_metrics(struct admin *a, json_object *req, json_object *rep, char *err,
                       size_t errlen)
{
	struct stats_snap *st = snap_take(a, err, errlen);
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	(void)req;
	if (!st)
		return -ENOMEM;
	f = open_memstream(&text, &len);
	if (!f) {
		ret = -errno;
		stats_free(st);
		snprintf(err, errlen, "open_memstream: %s", strerror(-ret));
		return ret;
	}
	ret = admin_prom_write(st, f);
	stats_free(st);
	if (fclose(f) != 0 && !ret)
		ret = -EIO;
	if (ret || !text) {
		free(text);
		snprintf(err, errlen, "building the metrics failed: %s",
		         strerror(ret ? -ret : EIO));
		return ret ? ret : -EIO;
	}
	jset_str(rep, "content_type", "text/plain; version=0.0.4");
	jset(rep, "text", json_object_new_string_len(text, (int)len));
	free(text);
	return 0;
}

/* ---- recovery: controller state, fault injection, attach ---- */

/* The controller named by the request's "controller", or -ENOENT/-EINVAL
 * with a message naming those there are. */
static int recov_find_ctrl(struct admin *a, json_object *req, const char *cmd, unsigned *out,
                           char *err, size_t errlen)
{
	json_object *jn;
	const char *name;
	bool have = false;
	size_t off;

	if (!json_object_object_get_ex(req, "controller", &jn) ||
	    !json_object_is_type(jn, json_type_string)) {
		snprintf(err, errlen, "%s needs \"controller\": a controller name", cmd);
		return -EINVAL;
	}
	name = json_object_get_string(jn);
	for (unsigned i = 0; i < a->ctx.nr_ctrls; i++)
		if (a->ctx.ctrls[i] && !strcmp(nvme_ctrl_name(a->ctx.ctrls[i]), name)) {
			*out = i;
			return 0;
		}
	off = (size_t)snprintf(err, errlen, "no controller named \"%.64s\" (have:", name);
	for (unsigned j = 0; j < a->ctx.nr_ctrls && off < errlen; j++)
		if (a->ctx.ctrls[j]) {
			off += (size_t)snprintf(err + off, errlen - off, " %s",
			                        nvme_ctrl_name(a->ctx.ctrls[j]));
			have = true;
		}
	if (off < errlen)
		snprintf(err + off, errlen - off, "%s)", have ? "" : " none");
	return -ENOENT;
}

/* as stats_ctrl_state_name, now */
static const char *recov_state(const struct admin *a, unsigned i)
{
	if (a->ctx.ctrl_away && a->ctx.ctrl_away(a->ctx.ctrl_away_arg, i))
		return "detached";
	return nvme_ctrl_state_name(nvme_ctrl_state(a->ctx.ctrls[i]));
}

static json_object *recov_rstats_json(const struct nvme_ctrl_rstats *r)
{
	json_object *o = json_object_new_object();

	jset_u64(o, "timeouts", r->timeouts);
	jset_u64(o, "aborts_sent", r->aborts_sent);
	jset_u64(o, "aborts_ok", r->aborts_ok);
	jset_u64(o, "resets_started", r->resets_started);
	jset_u64(o, "resets_ok", r->resets_ok);
	jset_u64(o, "resets_failed", r->resets_failed);
	jset_dbl(o, "reset_last_ms", r->reset_last_ns / 1e6, 3);
	jset_dbl(o, "reset_max_ms", r->reset_max_ns / 1e6, 3);
	jset_u64(o, "resubmitted", r->resubmitted);
	jset_u64(o, "failed_after_retries", r->failed_after_retries);
	jset_u64(o, "cfs_events", r->cfs_events);
	jset_u64(o, "removals", r->removals);
	jset_u64(o, "isolations", r->isolations);
	jset_u64(o, "cancelled", r->cancelled);
	return o;
}

/* stats: the asynchronous events of a controller */
static json_object *recov_aen_json(const struct nvme_ctrl_aen_stats *e)
{
	json_object *o = json_object_new_object();

	jset_u64(o, "aers_armed", e->aers_armed);
	for (unsigned k = 0; k < STATS_AEN_KINDS; k++)
		jset_u64(o, stats_aen_kind_names[k], e->events[k]);
	jset_u64(o, "aer_errors", e->aer_errors);
	jset_u64(o, "ns_changes", e->ns_changes);
	jset_int(o, "critical_warning", e->critical_warning);
	return o;
}

/* status: each controller's state, and its last attach */
static void recov_status_ctrl(const struct admin *a, const struct stats_snap *st, unsigned i,
                              json_object *c)
{
	const char *why = NULL, *at = a->ctx.attach_state
					      ? a->ctx.attach_state(a->ctx.attach_arg, i, &why)
					      : NULL;

	jset_str(c, "state", stats_ctrl_state_name(&st->ctrl[i]));
	if (at) {
		jset_str(c, "attach", at);
		if (why)
			jset_str(c, "attach_error", why);
	}
}

/* stats: one object per controller with its state and recovery counters */
static json_object *recov_stats_ctrls(const struct stats_snap *st)
{
	json_object *cs = json_object_new_array();

	for (unsigned i = 0; i < st->nr_ctrls; i++) {
		const struct stats_ctrl *sc = &st->ctrl[i];
		json_object *c;

		if (!sc->c)
			continue;
		c = json_object_new_object();
		jset_str(c, "name", sc->name);
		jset_str(c, "state", stats_ctrl_state_name(sc));
		jset(c, "recovery", recov_rstats_json(&sc->rs));
		jset(c, "events", recov_aen_json(&sc->aen));
		json_object_array_add(cs, c);
	}
	return cs;
}

/* the per-queue recovery counters of nvme_qpair_stats */
static void recov_qstats_json(json_object *o, const struct nvme_qpair_stats *s)
{
	jset_u64(o, "timeouts", s->timeouts);
	jset_u64(o, "aborts_sent", s->aborts_sent);
	jset_u64(o, "aborts_ok", s->aborts_ok);
	jset_u64(o, "resubmitted", s->resubmitted);
	jset_u64(o, "failed_after_retries", s->failed_after_retries);
}

static void recov_qstats_add(struct nvme_qpair_stats *d, const struct nvme_qpair_stats *s)
{
	d->timeouts += s->timeouts;
	d->aborts_sent += s->aborts_sent;
	d->aborts_ok += s->aborts_ok;
	d->resubmitted += s->resubmitted;
	d->failed_after_retries += s->failed_after_retries;
}

/* A non-negative integer member of the request, at most max. */
static int recov_uint(json_object *req, const char *k, uint64_t max, uint64_t *out, char *err,
                      size_t errlen, const char *fault)
{
	json_object *v;
	int64_t n;

	if (!json_object_object_get_ex(req, k, &v) || !json_object_is_type(v, json_type_int)) {
		snprintf(err, errlen, "inject %s needs \"%s\": an integer", fault, k);
		return -EINVAL;
	}
	n = json_object_get_int64(v);
	if (n < 0 || (uint64_t)n > max) {
		snprintf(err, errlen, "inject %s: \"%s\" %lld is outside 0..%llu", fault, k,
		         (long long)n, (unsigned long long)max);
		return -EINVAL;
	}
	*out = (uint64_t)n;
	return 0;
}

static int cmd_inject(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	const struct cfg_controller *cc;
	struct sim *s;
	json_object *jf;
	const char *fault;
	uint64_t n = 0, st = 0;
	unsigned i;
	int ret;

	ret = recov_find_ctrl(a, req, "inject", &i, err, errlen);
	if (ret)
		return ret;
	s = a->ctx.sims ? a->ctx.sims[i] : NULL;
	if (!s) {
		cc = ctrl_cfg(a, i);
		snprintf(err, errlen,
		         "inject: %s is a PCI controller (%s): faults can be injected only into "
		         "the software controller (device = sim)",
		         nvme_ctrl_name(a->ctx.ctrls[i]), cc ? cc->device : "?");
		return -EOPNOTSUPP;
	}
	if (!json_object_object_get_ex(req, "fault", &jf) ||
	    !json_object_is_type(jf, json_type_string)) {
		snprintf(err, errlen,
		         "inject needs \"fault\": delay, hang, hang-loop, unhang, cfs, stuck, remove, "
		         "powerfail, fail, lose, clear, warn, ns-add, ns-remove, ns-resize, "
		         "misdirect-write, misdirect-read or corrupt");
		return -EINVAL;
	}
	fault = json_object_get_string(jf);
	if (!strcmp(fault, "delay")) {
		/* one hour: more is a hang, and there is "hang" for that */
		ret = recov_uint(req, "ms", 3600000, &n, err, errlen, fault);
		if (ret)
			return ret;
		sim_fault_delay(s, (unsigned)(n * 1000));
		jset_u64(rep, "ms", n);
	} else if (!strcmp(fault, "hang") || !strcmp(fault, "unhang")) {
		sim_fault_hang(s, fault[0] == 'h');
	} else if (!strcmp(fault, "hang-loop")) {
		sim_fault_hang_loop(s);
	} else if (!strcmp(fault, "cfs")) {
		sim_fault_cfs(s);
	} else if (!strcmp(fault, "stuck")) {
		sim_fault_stuck(s, true);
	} else if (!strcmp(fault, "remove")) {
		sim_fault_remove(s);
	} else if (!strcmp(fault, "powerfail")) {
		json_object *js;

		/* absent: 0, every write not durable is lost */
		if (json_object_object_get_ex(req, "seed", &js) &&
		    (ret = recov_uint(req, "seed", INT64_MAX, &n, err, errlen, fault)))
			return ret;
		ret = sim_fault_powerfail(s, n);
		if (ret) {
			snprintf(err, errlen,
			         "inject powerfail: %s is off, but writing its durable data back "
			         "to a backing file failed: %s",
			         nvme_ctrl_name(a->ctx.ctrls[i]), strerror(-ret));
			return ret;
		}
		jset_u64(rep, "seed", n);
	} else if (!strcmp(fault, "fail")) {
		ret = recov_uint(req, "count", UINT32_MAX, &n, err, errlen, fault);
		if (!ret)
			ret = recov_uint(req, "status", 0x7fff, &st, err, errlen, fault);
		if (ret)
			return ret;
		if (!st) {
			snprintf(err, errlen, "inject fail: status 0 is success, not a failure");
			return -EINVAL;
		}
		sim_fault_fail_next(s, (unsigned)n, (uint16_t)st);
		jset_u64(rep, "count", n);
		jset_u64(rep, "status", st);
	} else if (!strcmp(fault, "lose")) {
		ret = recov_uint(req, "count", UINT32_MAX, &n, err, errlen, fault);
		if (ret)
			return ret;
		sim_fault_lose_next(s, (unsigned)n);
		jset_u64(rep, "count", n);
	} else if (!strcmp(fault, "clear")) {
		sim_fault_clear(s);
	} else if (!strcmp(fault, "warn")) {
		static const struct {
			const char *name;
			uint8_t bit;
		} warns[] = {{"spare", NVME_SMART_CRIT_SPARE},
		             {"temperature", NVME_SMART_CRIT_TEMPERATURE},
		             {"reliability", NVME_SMART_CRIT_RELIABILITY},
		             {"readonly", NVME_SMART_CRIT_READONLY},
		             {"backup", NVME_SMART_CRIT_VOLATILE_BACKUP},
		             {"clear", NVME_SMART_CRIT_ALL}};
		json_object *jw;
		const char *w = json_object_object_get_ex(req, "warning", &jw) &&
		                        json_object_is_type(jw, json_type_string)
		                    ? json_object_get_string(jw)
		                    : "";
		size_t k = 0;
		while (k < sizeof(warns) / sizeof(warns[0]) && strcmp(w, warns[k].name))
			k++;
		if (k == sizeof(warns) / sizeof(warns[0])) {
			snprintf(err, errlen,
			         "inject warn needs \"warning\": spare, temperature, reliability, "
			         "readonly, backup or clear");
			return -EINVAL;
		}
		/* a bit newly set raises a SMART event; clear takes every bit back */
		sim_inject_warning(s, warns[k].bit, strcmp(w, "clear") != 0);
		jset_str(rep, "warning", w);
	} else if (!strcmp(fault, "ns-add") || !strcmp(fault, "ns-remove") ||
	           !strcmp(fault, "ns-resize")) {
		bool add = !strcmp(fault, "ns-add"), remove = !strcmp(fault, "ns-remove");
		ret = recov_uint(req, "nsid", SIM_MAX_NS, &n, err, errlen, fault);
		if (!ret && !remove)
			ret = recov_uint(req, "bytes", INT64_MAX, &st, err, errlen, fault);
		if (ret)
			return ret;
		ret = add      ? sim_ns_add(s, (uint32_t)n, st)
		      : remove ? sim_ns_remove(s, (uint32_t)n)
		               : sim_ns_resize(s, (uint32_t)n, st);
		if (ret) {
			snprintf(err, errlen, "inject %s: namespace %llu of %s: %s", fault,
			         (unsigned long long)n, nvme_ctrl_name(a->ctx.ctrls[i]),
			         ret == -EEXIST   ? "exists already"
			         : ret == -ENOENT ? "no such namespace"
			         : ret == -EINVAL ? "NSID 1..16, and a size that is a multiple of the "
			                            "block size"
			                          : strerror(-ret));
			return ret;
		}
		jset_u64(rep, "nsid", n);
		if (!remove)
			jset_u64(rep, "bytes", st);
	} else if (!strcmp(fault, "misdirect-write") || !strcmp(fault, "misdirect-read")) {
		/* the next count Writes (Reads) land (read) blocks away */
		ret = recov_uint(req, "count", UINT32_MAX, &n, err, errlen, fault);
		if (!ret)
			ret = recov_uint(req, "blocks", INT32_MAX, &st, err, errlen, fault);
		if (ret)
			return ret;
		sim_fault_misdirect(s, fault[10] == 'w', (unsigned)n, (int64_t)st);
		jset_u64(rep, "count", n);
		jset_u64(rep, "blocks", st);
	} else if (!strcmp(fault, "corrupt")) {
		uint64_t lba = 0, byte = 0;
		ret = recov_uint(req, "nsid", SIM_MAX_NS, &n, err, errlen, fault);
		if (!ret)
			ret = recov_uint(req, "lba", INT64_MAX, &lba, err, errlen, fault);
		if (!ret)
			ret = recov_uint(req, "byte", 65535, &byte, err, errlen, fault);
		if (ret)
			return ret;
		ret = sim_fault_corrupt(s, (uint32_t)n, lba, (unsigned)byte);
		if (ret) {
			snprintf(err, errlen, "inject corrupt: namespace %llu of %s, LBA %llu, byte %llu: %s",
			         (unsigned long long)n, nvme_ctrl_name(a->ctx.ctrls[i]),
			         (unsigned long long)lba, (unsigned long long)byte,
			         ret == -ENOENT   ? "no such namespace (or null)"
			         : ret == -EINVAL ? "the LBA or the byte is outside it"
			                          : strerror(-ret));
			return ret;
		}
		jset_u64(rep, "nsid", n);
		jset_u64(rep, "lba", lba);
	} else {
		snprintf(err, errlen,
		         "inject: unknown fault \"%.32s\" (delay, hang, hang-loop, unhang, cfs, "
		         "stuck, remove, powerfail, fail, lose, clear, warn, ns-add, ns-remove, "
		         "ns-resize, misdirect-write, misdirect-read, corrupt)",
		         fault);
		return -EINVAL;
	}
	log_warn("admin: fault injected into %s: %s", nvme_ctrl_name(a->ctx.ctrls[i]), fault);
	jset_str(rep, "controller", nvme_ctrl_name(a->ctx.ctrls[i]));
	jset_str(rep, "fault", fault);
	jset_str(rep, "state", recov_state(a, i));
	return 0;
}

static int cmd_attach(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	ret = recov_find_ctrl(a, req, "attach", &i, err, errlen);
	if (ret)
		return ret;
	if (!a->ctx.attach) {
		snprintf(err, errlen, "attach: not available in this daemon");
		return -EOPNOTSUPP;
	}
	err[0] = '\0';
	ret = a->ctx.attach(a->ctx.attach_arg, i, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "attach %s: %s", nvme_ctrl_name(a->ctx.ctrls[i]),
			         strerror(-ret));
		return ret;
	}
	/* the work goes on off the loop: status says how it ends */
	jset_str(rep, "controller", nvme_ctrl_name(a->ctx.ctrls[i]));
	jset_str(rep, "state", "attaching");
	return 0;
}

static int cmd_detach(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	ret = recov_find_ctrl(a, req, "detach", &i, err, errlen);
	if (ret)
		return ret;
	if (!a->ctx.detach) {
		snprintf(err, errlen, "detach: not available in this daemon");
		return -EOPNOTSUPP;
	}
	err[0] = '\0';
	ret = a->ctx.detach(a->ctx.attach_arg, i, err, errlen);
	if (ret < 0) {
		if (!err[0])
			snprintf(err, errlen, "detach %s: %s", nvme_ctrl_name(a->ctx.ctrls[i]),
			         strerror(-ret));
		return ret;
	}
	log_warn("admin: controller %s detached (%d file%s gone)", nvme_ctrl_name(a->ctx.ctrls[i]),
	         ret, ret == 1 ? "" : "s");
	jset_str(rep, "controller", nvme_ctrl_name(a->ctx.ctrls[i]));
	jset_int(rep, "files", ret);
	jset_str(rep, "state", recov_state(a, i));
	return 0;
}

/* ---- log pages: smart-log, error-log, fw-log, effects-log; list ---- */

/* A log page command: read the page without waiting on the loop (the
 * reply is deferred until the engine calls back), then decode it into the
 * reply with the command's decode function. */
typedef int (*logpage_decode_fn)(struct admin *a, unsigned i, const void *buf, size_t len,
                                 json_object *rep, char *err, size_t errlen);

struct logcmd {
	struct admin *a;
	struct admin_defer *d;
	unsigned i;
	uint8_t lid;
	const char *cmd;
	logpage_decode_fn decode;
};

/* On the loop's thread, once the engine called back. */
static void logcmd_done(void *arg, int err, const void *buf, size_t len)
{
	struct logcmd *lc = arg;
	struct admin *a = lc->a;
	char msg[512] = "";
	json_object *rep = NULL;

	if (!err) {
		rep = json_object_new_object();
		jset_bool(rep, "ok", true);
		jset_str(rep, "controller", nvme_ctrl_name(a->ctx.ctrls[lc->i]));
		err = lc->decode(a, lc->i, buf, len, rep, msg, sizeof(msg));
		if (err && !msg[0])
			snprintf(msg, sizeof(msg), "%s: the page could not be decoded", lc->cmd);
	} else {
		snprintf(msg, sizeof(msg), "%s %s: Get Log Page %02xh failed: %s (controller %s)",
		         lc->cmd, nvme_ctrl_name(a->ctx.ctrls[lc->i]), lc->lid, strerror(-err),
		         recov_state(a, lc->i));
	}
	admin_defer_reply(lc->d, err, rep, msg); /* frees lc, which d owns */
}

/* Start reading log lid (len bytes) of controller i for the current request
 * and return ADMIN_PENDING, or a negative errno with a message in err. */
static int admin_log_cmd(struct admin *a, unsigned i, const char *cmd, uint8_t lid, size_t len,
                         logpage_decode_fn decode, char *err, size_t errlen)
{
	struct nvme_ctrl *c = a->ctx.ctrls[i];
	struct logcmd *lc = calloc(1, sizeof(*lc));
	char tmo[256];
	int ret = -ENOMEM;

	snprintf(tmo, sizeof(tmo),
	         "%s %s: Get Log Page %02xh failed: timed out after %.1f s (the device has "
	         "not answered)",
	         cmd, nvme_ctrl_name(c), lid, a->log_timeout);
	if (!lc || !(lc->d = admin_defer_begin(a, a->log_timeout, tmo)))
		goto fail;
	lc->a = a;
	lc->i = i;
	lc->lid = lid;
	lc->cmd = cmd;
	lc->decode = decode;
	ret = logrd_read(a->logq, c, lid, len, logcmd_done, lc, NULL);
	if (ret) {
		admin_defer_abort(lc->d);
		goto fail;
	}
	/* the token is ended by logcmd_done, or freed by admin_stop, which
	 * keeps the engine's callback from reaching lc: lc goes with it */
	admin_defer_own(lc->d, lc);
	return ADMIN_PENDING;
fail:
	free(lc);
	snprintf(err, errlen, "%s %s: Get Log Page %02xh failed: %s (controller %s)", cmd,
	         nvme_ctrl_name(c), lid, strerror(-ret), recov_state(a, i));
	return ret;
}

/* units of 1000 x 512 bytes in bytes, saturated */
static uint64_t data_units_bytes(uint64_t u)
{
	return u > UINT64_MAX / 512000 ? UINT64_MAX : u * 512000;
}

static void jset_kelvin(json_object *o, const char *k, const char *kc, uint16_t kelvin)
{
	jset_int(o, k, kelvin);
	jset_int(o, kc, (int)kelvin - 273);
}

static int smart_decode(struct admin *a, unsigned i, const void *buf, size_t len,
                        json_object *rep, char *err, size_t errlen)
{
	struct nvme_health h;
	json_object *ts;
	int ret;

	(void)a, (void)i, (void)err, (void)errlen;
	ret = nvme_health_decode(buf, len, &h);
	if (ret)
		return ret;
	jset_int(rep, "critical_warning", h.critical_warning);
	jset_kelvin(rep, "temperature", "temperature_c", h.temperature);
	jset_int(rep, "avail_spare", h.avail_spare);
	jset_int(rep, "spare_thresh", h.spare_thresh);
	jset_int(rep, "percent_used", h.percent_used);
	jset_int(rep, "endurance_grp_critical_warning_summary", h.endu_grp_crit_warn);
	jset_u64(rep, "data_units_read", h.data_units_read);
	jset_u64(rep, "data_units_read_bytes", data_units_bytes(h.data_units_read));
	jset_u64(rep, "data_units_written", h.data_units_written);
	jset_u64(rep, "data_units_written_bytes", data_units_bytes(h.data_units_written));
	jset_u64(rep, "host_read_commands", h.host_reads);
	jset_u64(rep, "host_write_commands", h.host_writes);
	jset_u64(rep, "controller_busy_time", h.ctrl_busy_time);
	jset_u64(rep, "power_cycles", h.power_cycles);
	jset_u64(rep, "power_on_hours", h.power_on_hours);
	jset_u64(rep, "unsafe_shutdowns", h.unsafe_shutdowns);
	jset_u64(rep, "media_errors", h.media_errors);
	jset_u64(rep, "num_err_log_entries", h.num_err_log_entries);
	jset_u64(rep, "warning_temp_time", h.warning_temp_time);
	jset_u64(rep, "critical_comp_time", h.critical_comp_time);
	ts = json_object_new_array();
	for (unsigned k = 0; k < 8; k++) {
		json_object *t;

		if (!h.temp_sensor[k])
			continue; /* not implemented by the device */
		t = json_object_new_object();
		jset_int(t, "sensor", k + 1);
		jset_kelvin(t, "temperature", "temperature_c", h.temp_sensor[k]);
		json_object_array_add(ts, t);
	}
	jset(rep, "temperature_sensors", ts);
	jset_bool(rep, "saturated", h.saturated);
	return 0;
}

static int errlog_decode(struct admin *a, unsigned i, const void *buf, size_t len,
                         json_object *rep, char *err, size_t errlen)
{
	struct nvme_errlog_entry *e;
	json_object *arr;
	unsigned nr = 0;

	(void)a, (void)i;
	e = calloc(NVME_ERRLOG_MAX, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "error-log: out of memory");
		return -ENOMEM;
	}
	nvme_errlog_decode(buf, len, e, NVME_ERRLOG_MAX, &nr);
	jset_u64(rep, "entries_read", len / sizeof(struct nvme_error_log));
	arr = json_object_new_array();
	for (unsigned k = 0; k < nr; k++) {
		json_object *o = json_object_new_object();

		jset_u64(o, "error_count", e[k].error_count);
		jset_int(o, "sqid", e[k].sqid);
		jset_int(o, "cmdid", e[k].cmdid);
		jset_int(o, "status_field", e[k].status);
		jset_str(o, "status", nvme_status_str(e[k].status));
		jset_int(o, "parm_error_location", e[k].parm_error_location);
		jset_u64(o, "lba", e[k].lba);
		jset_u64(o, "nsid", e[k].nsid);
		jset_int(o, "vs", e[k].vs);
		jset_int(o, "trtype", e[k].trtype);
		jset_u64(o, "cs", e[k].cs);
		jset_int(o, "trtype_spec_info", e[k].trtype_spec_info);
		json_object_array_add(arr, o);
	}
	free(e);
	jset(rep, "errors", arr);
	return 0;
}

static int fw_decode(struct admin *a, unsigned i, const void *buf, size_t len, json_object *rep,
                     char *err, size_t errlen)
{
	struct nvme_fw_slots fw;
	json_object *arr;
	int ret;

	(void)a, (void)i, (void)err, (void)errlen;
	ret = nvme_fw_slots_decode(buf, len, &fw);
	if (ret)
		return ret;
	jset_int(rep, "active_slot", fw.active);
	jset_int(rep, "next_slot", fw.next);
	arr = json_object_new_array();
	for (unsigned k = 0; k < 7; k++) {
		json_object *o;

		if (!fw.frs[k][0])
			continue;
		o = json_object_new_object();
		jset_int(o, "slot", k + 1);
		jset_str(o, "revision", fw.frs[k]);
		json_object_array_add(arr, o);
	}
	jset(rep, "slots", arr);
	return 0;
}

/* Opcode names as nvme-cli prints them (NVMe base 2.0 and NVM command set) */
static const char *const admin_opc_names[256] = {
    [0x00] = "Delete I/O Submission Queue", [0x01] = "Create I/O Submission Queue",
    [0x02] = "Get Log Page",                [0x04] = "Delete I/O Completion Queue",
    [0x05] = "Create I/O Completion Queue", [0x06] = "Identify",
    [0x08] = "Abort",                       [0x09] = "Set Features",
    [0x0a] = "Get Features",                [0x0c] = "Asynchronous Event Request",
    [0x0d] = "Namespace Management",        [0x10] = "Firmware Commit",
    [0x11] = "Firmware Image Download",     [0x14] = "Device Self-test",
    [0x15] = "Namespace Attachment",        [0x18] = "Keep Alive",
    [0x19] = "Directive Send",              [0x1a] = "Directive Receive",
    [0x1c] = "Virtualization Management",   [0x1d] = "NVMe-MI Send",
    [0x1e] = "NVMe-MI Receive",             [0x20] = "Capacity Management",
    [0x24] = "Lockdown",                    [0x7c] = "Doorbell Buffer Config",
    [0x7f] = "Fabrics Commands",            [0x80] = "Format NVM",
    [0x81] = "Security Send",               [0x82] = "Security Receive",
    [0x84] = "Sanitize",                    [0x86] = "Get LBA Status",
};
static const char *const io_opc_names[256] = {
    [0x00] = "Flush",           [0x01] = "Write",
    [0x02] = "Read",            [0x04] = "Write Uncorrectable",
    [0x05] = "Compare",         [0x08] = "Write Zeroes",
    [0x09] = "Dataset Management", [0x0c] = "Verify",
    [0x0d] = "Reservation Register", [0x0e] = "Reservation Report",
    [0x11] = "Reservation Acquire", [0x15] = "Reservation Release",
    [0x19] = "Copy",
};

static json_object *effects_json(const uint32_t *e, const char *const *names)
{
	json_object *arr = json_object_new_array();

	for (unsigned op = 0; op < 256; op++) {
		json_object *o;

		if (!e[op])
			continue; /* as nvme-cli: unsupported opcodes are left out */
		o = json_object_new_object();
		jset_int(o, "opcode", op);
		jset_str(o, "name", names[op] ? names[op] : "Unknown");
		jset_u64(o, "raw", e[op]);
		jset_bool(o, "csupp", e[op] & NVME_CSE_CSUPP);
		jset_bool(o, "lbcc", e[op] & NVME_CSE_LBCC);
		jset_bool(o, "ncc", e[op] & NVME_CSE_NCC);
		jset_bool(o, "nic", e[op] & NVME_CSE_NIC);
		jset_bool(o, "ccc", e[op] & NVME_CSE_CCC);
		jset_int(o, "cse", NVME_CSE_CSE(e[op]));
		jset_bool(o, "uss", e[op] & NVME_CSE_USS);
		json_object_array_add(arr, o);
	}
	return arr;
}

static int effects_decode(struct admin *a, unsigned i, const void *buf, size_t len,
                          json_object *rep, char *err, size_t errlen)
{
	struct nvme_cmd_effects *ce = malloc(sizeof(*ce));
	int ret;

	(void)a, (void)i;
	if (!ce) {
		snprintf(err, errlen, "effects-log: out of memory");
		return -ENOMEM;
	}
	ret = nvme_cmd_effects_decode(buf, len, ce);
	if (ret == 0) {
		jset(rep, "admin", effects_json(ce->acs, admin_opc_names));
		jset(rep, "io", effects_json(ce->iocs, io_opc_names));
	}
	free(ce);
	return ret;
}

/* Bytes of each page: the fixed ones, and the error log's ELPE + 1
 * entries (at most 256). */
static size_t smart_len(const struct nvme_ctrl_info *in)
{
	(void)in;
	return sizeof(struct nvme_smart_log);
}

static size_t errlog_len(const struct nvme_ctrl_info *in)
{
	return nvme_errlog_bytes(in);
}

static size_t fw_len(const struct nvme_ctrl_info *in)
{
	(void)in;
	return sizeof(struct nvme_fw_slot_log);
}

static size_t effects_len(const struct nvme_ctrl_info *in)
{
	(void)in;
	return NVME_CMD_EFFECTS_LOG_BYTES;
}

/* The log pages served, one row each: the command, the page, its length
 * for a controller, how its bytes become the reply, and the Identify LPA
 * bit the controller must set to have it (0: always there). */
static const struct logpage {
	const char *cmd;
	uint8_t lid;
	size_t (*len)(const struct nvme_ctrl_info *in);
	logpage_decode_fn decode;
	uint8_t lpa;
	const char *lpa_what;
} logpages[] = {
    {"smart-log", NVME_LOG_SMART, smart_len, smart_decode, 0, NULL},
    {"error-log", NVME_LOG_ERROR, errlog_len, errlog_decode, 0, NULL},
    {"fw-log", NVME_LOG_FW_SLOT, fw_len, fw_decode, 0, NULL},
    {"effects-log", NVME_LOG_CMD_EFFECTS, effects_len, effects_decode, NVME_LPA_CMD_EFFECTS,
     "the Commands Supported and Effects log (Identify LPA bit 1 is clear)"},
};

/* smart-log, error-log, fw-log, effects-log: the page of the request's
 * "cmd" read from its "controller" (the reply is deferred until the device
 * answers). */
static int cmd_log(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	const struct logpage *lp = NULL;
	const struct nvme_ctrl_info *in;
	json_object *jc;
	unsigned i;
	int ret;

	(void)rep;
	/* the server found this handler by "cmd": it is one of the rows */
	if (json_object_object_get_ex(req, "cmd", &jc))
		for (size_t k = 0; k < sizeof(logpages) / sizeof(logpages[0]); k++)
			if (!strcmp(json_object_get_string(jc), logpages[k].cmd))
				lp = &logpages[k];
	if (!lp) {
		snprintf(err, errlen, "no such log page");
		return -EINVAL;
	}
	ret = recov_find_ctrl(a, req, lp->cmd, &i, err, errlen);
	if (ret)
		return ret;
	in = nvme_ctrl_get_info(a->ctx.ctrls[i]);
	if (lp->lpa && !(in->lpa & lp->lpa)) {
		snprintf(err, errlen, "%s %s: the controller does not support %s", lp->cmd,
		         nvme_ctrl_name(a->ctx.ctrls[i]), lp->lpa_what);
		return -EOPNOTSUPP;
	}
	return admin_log_cmd(a, i, lp->cmd, lp->lid, lp->len(in), lp->decode, err, errlen);
}

/* list: one object per controller, from what bring-up identified */
static int cmd_list(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	struct stats_snap *st = snap_take(a, err, errlen);
	json_object *arr;

	(void)req;
	if (!st)
		return -ENOMEM;
	arr = json_object_new_array();
	for (unsigned i = 0; i < st->nr_ctrls; i++) {
		const struct stats_ctrl *sc = &st->ctrl[i];
		const struct nvme_ctrl_info *in = sc->info;
		const struct cfg_controller *cc;
		json_object *o;

		if (!sc->c)
			continue;
		cc = ctrl_cfg(a, i);
		o = json_object_new_object();
		uint64_t total = 0;
		uint32_t lba = 0;
		bool mixed = false;
		char s[32];

		for (unsigned k = 0; k < in->nr_ns; k++) {
			uint64_t b = in->ns[k].nlba * in->ns[k].lba_size; /* <= INT64_MAX */

			/* 1024 namespaces could add up past 64 bits */
			total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
			if (lba && lba != in->ns[k].lba_size)
				mixed = true;
			lba = in->ns[k].lba_size;
		}
		jset_str(o, "name", sc->name);
		jset_str(o, "model", in->model);
		jset_str(o, "serial", in->serial);
		jset_str(o, "firmware", in->firmware);
		jset_int(o, "namespaces", in->nr_ns);
		jset_u64(o, "size", total);
		if (mixed)
			snprintf(s, sizeof(s), "mixed");
		else if (lba)
			snprintf(s, sizeof(s), "%u B + 0 B", lba);
		else
			snprintf(s, sizeof(s), "-");
		jset_str(o, "lba_format", s);
		jset_str(o, "state", stats_ctrl_state_name(sc));
		jset_str(o, "transport", sc->sim ? "sim" : "pcie");
		jset_str(o, "device", cc ? cc->device : NULL);
		json_object_array_add(arr, o);
	}
	jset(rep, "controllers", arr);
	stats_free(st);
	return 0;
}

/* restart's verdict once the check of the installed binary ended */
static void restart_done(void *tok, int rc, const char *msg, const char *err)
{
	json_object *rep = NULL;

	if (rc == 0) {
		rep = json_object_new_object();
		jset_bool(rep, "ok", true);
		jset_str(rep, "restart", msg);
	}
	admin_defer_reply(tok, rc, rep, err);
}

/* restart: the daemon checks that the installed binary can take over (a
 * child it waits for without blocking the loop: the reply is deferred
 * until it ends), then replies and re-executes it (lifecycle.h); the reply
 * goes out before the exec. */
static int cmd_restart(struct admin *a, json_object *req, json_object *rep, char *err,
                       size_t errlen)
{
	struct admin_defer *d;
	char msg[256] = "";
	int ret;

	(void)req;
	if (!a->ctx.restart) {
		snprintf(err, errlen, "restart: not available in this daemon");
		return -EOPNOTSUPP;
	}
	d = admin_defer_begin(a, ADMIN_RESTART_TIMEOUT,
	                      "restart: the check of the installed binary did not end in time");
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	err[0] = '\0';
	ret = a->ctx.restart(a->ctx.restart_arg, restart_done, d, msg, sizeof(msg), err, errlen);
	if (ret == ADMIN_RESTART_PENDING)
		return ADMIN_PENDING;
	admin_defer_abort(d);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "restart: %s", strerror(-ret));
		return ret;
	}
	jset_str(rep, "restart", msg);
	return 0;
}

const struct admin_cmd admin_cmds[] = {
    {"status", cmd_status, false},     {"stats", cmd_stats, false},
    {"queues", cmd_queues, false},     {"namespaces", cmd_namespaces, false},
    {"identify", cmd_identify, false}, {"config", cmd_config, false},
    {"metrics", cmd_metrics, false},   {"inject", cmd_inject, true},
    {"attach", cmd_attach, true},      {"smart-log", cmd_log, false},
    {"error-log", cmd_log, false},     {"fw-log", cmd_log, false},
    {"effects-log", cmd_log, false},   {"list", cmd_list, false},
    {"restart", cmd_restart, true},    {"detach", cmd_detach, true},
};
const size_t admin_nr_cmds = sizeof(admin_cmds) / sizeof(admin_cmds[0]);

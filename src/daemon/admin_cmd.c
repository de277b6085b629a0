/* admin.c - the admin socket server (see admin.h for the protocol).
 *
 * Runs in the daemon's main-thread libev loop.  Every client socket is
 * non-blocking with its own input buffer (one request line at most
 * ADMIN_LINE_MAX bytes) and output buffer.  A client is served one request
 * at a time: while a reply is still unsent, its further requests wait in its
 * input buffer and its socket is not read, so a client that never reads its
 * replies holds at most one reply in memory, and then its idle timer closes
 * it.  JSON is built and parsed with json-c only.
 */
#include "admin.h"
#include "cpumap.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <libgen.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <json-c/json.h>

#include "config.h"
#include "fuse_fs.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

struct admin_client {
	struct admin *a;
	int fd;
	ev_io rio, wio;
	ev_timer idle;
	ev_timer deadline; /* runs while a request line is incomplete */
	char *in; /* ADMIN_LINE_MAX + 1 bytes */
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
	bool eof;     /* the peer shut down its sending side */
	bool closing; /* close once the output is sent */
	/* the peer's credentials when it connected (SO_PEERCRED,
	 * SO_PEERGROUPS), and what admin_peer_rights made of them */
	uid_t uid;
	pid_t pid;
	bool may_read;   /* root, admin_group or operator_group */
	bool may_change; /* root or operator_group */
	struct admin_client *prev, *next;
};

struct admin {
	struct ev_loop *loop;
	struct admin_ctx ctx;
	int fd;
	ev_io lio;
	ev_timer retry; /* re-arms the listener after EMFILE */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	double mono0; /* monotonic clock at admin_start */
	time_t wall0; /* wall clock at admin_start */
	double idle_timeout;
	double request_timeout;
	size_t reply_max;
	struct admin_client *clients;
	unsigned nr_clients;
};

/* ---- small helpers ---- */

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void jset(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

static void jset_u64(json_object *o, const char *k, uint64_t v)
{
	jset(o, k, json_object_new_uint64(v));
}

static void jset_int(json_object *o, const char *k, int64_t v)
{
	jset(o, k, json_object_new_int64(v));
}

static void jset_str(json_object *o, const char *k, const char *v)
{
	jset(o, k, v ? json_object_new_string(v) : NULL);
}

static void jset_bool(json_object *o, const char *k, bool v)
{
	jset(o, k, json_object_new_boolean(v));
}

/* A double with a fixed number of decimals (json-c would print 17 digits);
 * null when undefined (no division by zero ever reaches a reply). */
static json_object *jdbl(double v, int prec)
{
	char s[64];

	if (!isfinite(v))
		return NULL;
	snprintf(s, sizeof(s), "%.*f", prec, v);
	return json_object_new_double_s(v, s);
}

static void jset_dbl(json_object *o, const char *k, double v, int prec)
{
	jset(o, k, jdbl(v, prec));
}

static double ratio(uint64_t num, uint64_t den)
{
	return den ? (double)num / (double)den : NAN;
}

static const char *mode_name(const struct admin *a)
{
	return a->ctx.cfg ? cfg_mode_name(a->ctx.cfg->engine.mode) : "unknown";
}

static bool interrupts_on(const struct admin *a)
{
	return a->ctx.cfg && a->ctx.cfg->engine.mode != CFG_MODE_POLL;
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

static struct nvme_qpair *qpair_at(const struct admin *a, unsigned r, unsigned c)
{
	if (!a->ctx.qpairs)
		return NULL;
	return a->ctx.qpairs[(size_t)r * a->ctx.nr_ctrls + c];
}

static double uptime(const struct admin *a)
{
	double up = mono_now() - a->mono0;

	/* the daemon started before the admin socket did */
	if (a->ctx.start_time && a->wall0 > a->ctx.start_time)
		up += (double)(a->wall0 - a->ctx.start_time);
	return up;
}

/* recovery views, defined with inject and attach below */
static const char *recov_state(const struct admin *a, unsigned i);
static void recov_status_ctrl(const struct admin *a, unsigned i, json_object *c);
static json_object *recov_stats_ctrls(const struct admin *a);
static void recov_qstats_json(json_object *o, const struct nvme_qpair_stats *s);
static void recov_qstats_add(struct nvme_qpair_stats *d, const struct nvme_qpair_stats *s);
static void recov_prom(const struct admin *a, FILE *f);

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

static const char *const errc_names[NVME_ERRC_NR] = {
    [NVME_ERRC_GENERIC] = "generic", [NVME_ERRC_CMD] = "command", [NVME_ERRC_MEDIA] = "media",
    [NVME_ERRC_PATH] = "path",       [NVME_ERRC_OTHER] = "other", [NVME_ERRC_TIMEOUT] = "timeout",
};

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
		jset_u64(e, errc_names[i], s->errors[i]);
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

typedef int (*admin_cmd_fn)(struct admin *a, json_object *req, json_object *rep, char *err,
                            size_t errlen);

/* "transport": the FUSE transport serving requests now (no front end: none) */
static void jset_transport(struct admin *a, json_object *rep)
{
	struct fusefs_stats *st;

	if (!a->ctx.fuse_stats)
		return;
	st = calloc(1, sizeof(*st));
	if (!st)
		return;
	a->ctx.fuse_stats(a->ctx.fuse_stats_arg, st);
	jset_str(rep, "transport", fusefs_transport_name(st->transport));
	free(st);
}

static int cmd_status(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	const struct cfg *cfg = a->ctx.cfg;
	json_object *ctrls = json_object_new_array(), *rs = json_object_new_array();
	char when[32] = "";
	struct tm tm;

	(void)req, (void)err, (void)errlen;
	if (a->ctx.start_time && gmtime_r(&a->ctx.start_time, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jset_str(rep, "version", NVMEFS_VERSION);
	jset_int(rep, "pid", getpid());
	jset_dbl(rep, "uptime_s", uptime(a), 1);
	jset_str(rep, "started", when[0] ? when : NULL);
	jset_str(rep, "config_file", a->ctx.config_path);
	jset_str(rep, "mountpoint", cfg ? cfg->daemon.mountpoint : NULL);
	jset_str(rep, "admin_socket", a->path);
	jset_str(rep, "mode", mode_name(a));
	jset_transport(a, rep);
	if (cfg) {
		jset_int(rep, "queue_depth", cfg->engine.queue_depth);
		jset_int(rep, "cq_budget", cfg->engine.cq_budget);
	}
	for (unsigned i = 0; i < a->ctx.nr_ctrls; i++) {
		const struct nvme_ctrl_info *in = nvme_ctrl_get_info(a->ctx.ctrls[i]);
		const struct cfg_controller *cc = ctrl_cfg(a, i);
		json_object *c = json_object_new_object();
		unsigned nq = 0;

		for (unsigned r = 0; r < a->ctx.nr_reactors; r++)
			nq += qpair_at(a, r, i) != NULL;
		jset_str(c, "name", nvme_ctrl_name(a->ctx.ctrls[i]));
		jset_str(c, "device", cc ? (cc->sim ? "sim" : cc->device) : NULL);
		jset_str(c, "backend", cc ? (cc->sim ? "sim" : "vfio") : NULL);
		jset_str(c, "mode", mode_name(a));
		jset_bool(c, "interrupts", interrupts_on(a));
		jset_str(c, "model", in->model);
		jset_int(c, "io_queues_granted", in->nr_io_queues);
		jset_int(c, "io_queues", nq);
		jset_int(c, "namespaces", in->nr_ns);
		recov_status_ctrl(a, i, c);
		json_object_array_add(ctrls, c);
	}
	jset(rep, "controllers", ctrls);
	for (unsigned r = 0; r < a->ctx.nr_reactors; r++) {
		json_object *o = json_object_new_object();

		jset_int(o, "id", nvme_reactor_id(a->ctx.reactors[r]));
		jset_int(o, "cpu", nvme_reactor_cpu(a->ctx.reactors[r]));
		jset_int(o, "node", nvme_reactor_node(a->ctx.reactors[r]));
		json_object_array_add(rs, o);
	}
	jset(rep, "reactors", rs);
	jset_int(rep, "namespaces", a->ctx.nr_ns);
	return 0;
}

/* ---- the FUSE front end's figures (stats and metrics) ---- */

static const char *const fuse_op_names[FUSEFS_OP_NR] = {
    [FUSEFS_OP_READ] = "read",   [FUSEFS_OP_WRITE] = "write", [FUSEFS_OP_FLUSH] = "flush",
    [FUSEFS_OP_PUNCH] = "punch", [FUSEFS_OP_ZERO] = "zero",   [FUSEFS_OP_OTHER] = "other",
};
static const char *const fuse_wait_names[FUSEFS_WAIT_NR] = {
    [FUSEFS_WAIT_MEM] = "memory",
    [FUSEFS_WAIT_SLOT] = "queue_slot",
    [FUSEFS_WAIT_LOCK] = "range_lock",
};

static json_object *lat_json(const uint64_t *h)
{
	json_object *lat = json_object_new_object();

	jset_dbl(lat, "p50", nvme_lat_percentile(h, 50.0) / 1e3, 3);
	jset_dbl(lat, "p99", nvme_lat_percentile(h, 99.0) / 1e3, 3);
	jset_dbl(lat, "p99_9", nvme_lat_percentile(h, 99.9) / 1e3, 3);
	jset_dbl(lat, "max", nvme_lat_percentile(h, 100.0) / 1e3, 3);
	return lat;
}

/* The "fuse" object of the stats reply, or NULL without a front end. */
static json_object *fuse_stats_json(struct admin *a)
{
	struct fusefs_stats *st;
	json_object *o, *parked, *waits, *ops;

	if (!a->ctx.fuse_stats)
		return NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	a->ctx.fuse_stats(a->ctx.fuse_stats_arg, st);
	o = json_object_new_object();
	parked = json_object_new_object();
	waits = json_object_new_object();
	ops = json_object_new_object();
	jset_str(o, "transport", fusefs_transport_name(st->transport));
	jset_u64(o, "inflight", st->inflight);
	for (unsigned i = 0; i < FUSEFS_WAIT_NR; i++) {
		jset_u64(parked, fuse_wait_names[i], st->parked[i]);
		jset_u64(waits, fuse_wait_names[i], st->waits[i]);
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
	for (unsigned i = 0; i < FUSEFS_OP_NR; i++) {
		const struct fusefs_op_stats *op = &st->op[i];
		json_object *oo = json_object_new_object();

		jset_u64(oo, "count", op->count);
		jset_u64(oo, "bytes", op->bytes);
		jset_u64(oo, "errors", op->errors);
		jset(oo, "latency_us", lat_json(op->lat_ns));
		jset(ops, fuse_op_names[i], oo);
	}
	jset(o, "ops", ops);
	free(st);
	return o;
}

static int cmd_stats(struct admin *a, json_object *req, json_object *rep, char *err, size_t errlen)
{
	json_object *rs = json_object_new_array();
	struct nvme_qpair_stats *tot = calloc(1, sizeof(*tot)), *s = malloc(sizeof(*s));
	struct nvme_reactor_stats rtot = {0};

	(void)req;
	if (!tot || !s) {
		free(tot);
		free(s);
		json_object_put(rs);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	jset_dbl(rep, "time", mono_now(), 6);
	jset_dbl(rep, "uptime_s", uptime(a), 1);
	for (unsigned r = 0; r < a->ctx.nr_reactors; r++) {
		struct nvme_reactor *re = a->ctx.reactors[r];
		json_object *ro = json_object_new_object(), *qs = json_object_new_array();
		struct nvme_reactor_stats rst;

		nvme_reactor_stats_get(re, &rst);
		rtot.passes += rst.passes;
		rtot.sleeps += rst.sleeps;
		rtot.wakeups += rst.wakeups;
		rtot.calls += rst.calls;
		jset_int(ro, "id", nvme_reactor_id(re));
		jset_int(ro, "cpu", nvme_reactor_cpu(re));
		jset_int(ro, "node", nvme_reactor_node(re));
		jset_u64(ro, "passes", rst.passes);
		jset_u64(ro, "sleeps", rst.sleeps);
		jset_u64(ro, "wakeups", rst.wakeups);
		jset_u64(ro, "calls", rst.calls);
		for (unsigned c = 0; c < a->ctx.nr_ctrls; c++) {
			struct nvme_qpair *qp = qpair_at(a, r, c);
			json_object *q;

			if (!qp)
				continue;
			nvme_qpair_stats_get(qp, s);
			stats_add(tot, s);
			q = stats_json(s);
			/* identity first in the printed object would be nicer,
			 * but json-c keeps insertion order only */
			jset_str(q, "controller", nvme_ctrl_name(a->ctx.ctrls[c]));
			jset_int(q, "qid", nvme_qpair_id(qp));
			jset_int(q, "reactor", nvme_reactor_id(re));
			jset_int(q, "inflight", nvme_qpair_inflight(qp));
			json_object_array_add(qs, q);
		}
		jset(ro, "qpairs", qs);
		json_object_array_add(rs, ro);
	}
	jset(rep, "reactors", rs);
	jset(rep, "controllers", recov_stats_ctrls(a));
	{
		json_object *t = stats_json(tot);

		jset_u64(t, "passes", rtot.passes);
		jset_u64(t, "sleeps", rtot.sleeps);
		jset_u64(t, "wakeups", rtot.wakeups);
		jset_u64(t, "calls", rtot.calls);
		jset(rep, "totals", t);
	}
	{
		json_object *fo = fuse_stats_json(a);

		if (fo)
			jset(rep, "fuse", fo);
	}
	free(tot);
	free(s);
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
	json_object *qs = json_object_new_array();

	(void)req, (void)err, (void)errlen;
	jset_str(rep, "mode", mode_name(a));
	jset_bool(rep, "interrupts", interrupts_on(a));
	for (unsigned r = 0; r < a->ctx.nr_reactors; r++) {
		struct nvme_reactor *re = a->ctx.reactors[r];

		for (unsigned c = 0; c < a->ctx.nr_ctrls; c++) {
			struct nvme_qpair *qp = qpair_at(a, r, c);
			const struct nvme_ctrl_info *in = nvme_ctrl_get_info(a->ctx.ctrls[c]);
			json_object *q;
			uint16_t qid;

			if (!qp)
				continue;
			qid = nvme_qpair_id(qp);
			q = json_object_new_object();
			jset_int(q, "reactor", nvme_reactor_id(re));
			jset_int(q, "cpu", nvme_reactor_cpu(re));
			jset_int(q, "node", nvme_reactor_node(re));
			jset_str(q, "controller", nvme_ctrl_name(a->ctx.ctrls[c]));
			jset_int(q, "qid", qid);
			/* null: the CQ is polled (poll mode, or no vector for it) */
			int vec = nvme_qpair_vector(qp);
			jset(q, "vector", vec >= 0 ? json_object_new_int(vec) : NULL);
			jset_int(q, "depth", queue_depth(a, in));
			jset_int(q, "inflight", nvme_qpair_inflight(qp));
			json_object_array_add(qs, q);
		}
	}
	jset(rep, "queues", qs);
	jset_transport(a, rep);
	/* one FUSE queue per possible CPU, and the reactor that serves it */
	json_object *fq = json_object_new_array();

	for (unsigned c = 0; c < a->ctx.nr_fuse_cpus; c++) {
		json_object *q = json_object_new_object();
		unsigned r = a->ctx.fuse_cpu_map[c];

		jset_int(q, "cpu", c);
		jset_int(q, "fuse_queue", c);
		jset_int(q, "node", a->ctx.fuse_cpus[c].node);
		jset_int(q, "reactor", r);
		jset_int(q, "reactor_cpu",
			 r < a->ctx.nr_reactors ? nvme_reactor_cpu(a->ctx.reactors[r]) : -1);
		json_object_array_add(fq, q);
	}
	jset(rep, "fuse_queues", fq);
	return 0;
}

static int cmd_namespaces(struct admin *a, json_object *req, json_object *rep, char *err,
                          size_t errlen)
{
	json_object *ns = json_object_new_array();

	(void)req, (void)err, (void)errlen;
	jset_str(rep, "mountpoint", a->ctx.cfg ? a->ctx.cfg->daemon.mountpoint : NULL);
	for (unsigned i = 0; i < a->ctx.nr_ns; i++) {
		const struct admin_ns *n = &a->ctx.ns[i];
		json_object *o = json_object_new_object();

		jset_str(o, "name", n->name);
		jset_str(o, "controller",
		         n->ctrl < a->ctx.nr_ctrls ? nvme_ctrl_name(a->ctx.ctrls[n->ctrl]) : NULL);
		jset_str(o, "state", n->ctrl < a->ctx.nr_ctrls ? recov_state(a, n->ctrl) : NULL);
		jset_int(o, "nsid", n->nsid);
		jset_u64(o, "size", n->size);
		jset_int(o, "lba_size", n->lba_size);
		jset_u64(o, "blocks", n->lba_size ? n->size / n->lba_size : 0);
		jset_str(o, "path", n->path);
		json_object_array_add(ns, o);
	}
	jset(rep, "namespaces", ns);
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
	json_object *jn, *ns;
	const char *name;
	const struct nvme_ctrl_info *in;
	char s[32];
	unsigned i;

	if (!json_object_object_get_ex(req, "controller", &jn) ||
	    !json_object_is_type(jn, json_type_string)) {
		snprintf(err, errlen, "identify needs \"controller\": a controller name");
		return -EINVAL;
	}
	name = json_object_get_string(jn);
	for (i = 0; i < a->ctx.nr_ctrls; i++)
		if (!strcmp(nvme_ctrl_name(a->ctx.ctrls[i]), name))
			break;
	if (i == a->ctx.nr_ctrls) {
		size_t off =
		    (size_t)snprintf(err, errlen, "no controller named \"%.64s\" (have:", name);

		for (unsigned j = 0; j < a->ctx.nr_ctrls && off < errlen; j++)
			off += (size_t)snprintf(err + off, errlen - off, " %s",
			                        nvme_ctrl_name(a->ctx.ctrls[j]));
		if (off < errlen)
			snprintf(err + off, errlen - off, "%s)", a->ctx.nr_ctrls ? "" : " none");
		return -ENOENT;
	}
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

/* ---- Prometheus text exposition ---- */

/* label values: backslash, double quote and newline are escaped */
static void prom_label(FILE *f, const char *v)
{
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void prom_qlabels(FILE *f, const struct admin *a, unsigned r, unsigned c)
{
	fputs("controller=\"", f);
	prom_label(f, nvme_ctrl_name(a->ctx.ctrls[c]));
	fprintf(f, "\",qid=\"%u\",reactor=\"%u\"", nvme_qpair_id(qpair_at(a, r, c)),
	        nvme_reactor_id(a->ctx.reactors[r]));
}

struct prom_counter {
	const char *name, *help;
	size_t off;
};

#define QS_FIELD(f) offsetof(struct nvme_qpair_stats, f)
static const struct prom_counter prom_counters[] = {
    {"nvmefs_qpair_submitted_total", "Commands submitted to the I/O submission queue.",
     QS_FIELD(submitted)},
    {"nvmefs_qpair_completed_total", "Commands completed (successfully or not).",
     QS_FIELD(completed)},
    {"nvmefs_qpair_bogus_cqes_total",
     "Completion entries dropped: command identifier out of range or not in flight.",
     QS_FIELD(bogus_cqes)},
    {"nvmefs_qpair_reap_passes_total", "Completion reaping passes over the queue.",
     QS_FIELD(reap_passes)},
    {"nvmefs_qpair_budget_exhausted_total",
     "Reaping passes that reaped a full cq_budget (more may have been waiting).",
     QS_FIELD(budget_exhausted)},
    {"nvmefs_qpair_sq_doorbells_total", "Submission queue tail doorbell writes.",
     QS_FIELD(sq_doorbells)},
    {"nvmefs_qpair_cq_doorbells_total", "Completion queue head doorbell writes.",
     QS_FIELD(cq_doorbells)},
    {"nvmefs_qpair_interrupts_total", "MSI-X interrupts taken for the queue.",
     QS_FIELD(interrupts)},
    {"nvmefs_qpair_idle_polls_total", "Polls of the queue that found no completion.",
     QS_FIELD(idle_polls)},
    {"nvmefs_qpair_read_bytes_total", "Bytes read by completed commands.", QS_FIELD(bytes_read)},
    {"nvmefs_qpair_written_bytes_total", "Bytes written by completed commands.",
     QS_FIELD(bytes_written)},
    {"nvmefs_qpair_timeouts_total", "Commands on the queue that exceeded io_timeout_ms.",
     QS_FIELD(timeouts)},
    {"nvmefs_qpair_aborts_sent_total", "Aborts sent for the queue's timed-out commands.",
     QS_FIELD(aborts_sent)},
    {"nvmefs_qpair_aborts_ok_total", "Aborts of the queue's commands carried out.",
     QS_FIELD(aborts_ok)},
    {"nvmefs_qpair_resubmitted_total", "Commands of the queue sent again after a reset.",
     QS_FIELD(resubmitted)},
    {"nvmefs_qpair_failed_after_retries_total",
     "Commands of the queue failed with EIO after io_retries attempts.",
     QS_FIELD(failed_after_retries)},
};

/* Histogram boundaries in ns (1-2-5 from 1 us to 10 s).  The engine's
 * buckets are finer; a bucket counts under le when its upper bound is <= le,
 * so counts are exact at the engine's resolution (1/8 of a power of two). */
static const uint64_t prom_le_ns[] = {
    1000,       2000,       5000,          10000,          20000,     50000,
    100000,     200000,     500000,        1000000,        2000000,   5000000,
    10000000,   20000000,   50000000,      100000000,      200000000, 500000000,
    1000000000, 2000000000, 5000000000ull, 10000000000ull,
};
#define PROM_NLE (sizeof(prom_le_ns) / sizeof(prom_le_ns[0]))

/* Histogram h (the engine's buckets) as Prometheus series name{labels,le}. */
/* One metric with one value and no labels. */
static void prom_u64(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
	        (unsigned long long)v);
}

static void prom_hist(FILE *f, const char *name, const char *labels, const uint64_t *h)
{
	uint64_t cum[PROM_NLE] = {0}, count = 0, lower = 0;
	double sum = 0;

	for (unsigned b = 0; b < NVME_LAT_BUCKETS; b++) {
		uint64_t upper = nvme_lat_bucket_ns(b);

		if (h[b]) {
			count += h[b];
			sum += (double)h[b] * ((double)lower + (double)upper) / 2e9;
			for (unsigned k = 0; k < PROM_NLE; k++)
				if (upper <= prom_le_ns[k])
					cum[k] += h[b];
		}
		if (upper > lower)
			lower = upper;
	}
	for (unsigned k = 0; k < PROM_NLE; k++)
		fprintf(f, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, prom_le_ns[k] / 1e9,
		        (unsigned long long)cum[k]);
	fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)count);
	fprintf(f, "%s_sum{%s} %.9f\n", name, labels, sum);
	fprintf(f, "%s_count{%s} %llu\n", name, labels, (unsigned long long)count);
}

/* One queue pair's latency histogram, labelled like its counters. */
static void prom_latency(FILE *f, const struct admin *a, unsigned r, unsigned c, const uint64_t *h)
{
	char *labels = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&labels, &len);

	if (!m)
		return;
	prom_qlabels(m, a, r, c);
	if (fclose(m) == 0)
		prom_hist(f, "nvmefs_qpair_latency_seconds", labels, h);
	free(labels);
}

static int prom_write_fuse(struct admin *a, FILE *f)
{
	struct fusefs_stats *st;
	char lab[64];

	if (!a->ctx.fuse_stats)
		return 0;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	a->ctx.fuse_stats(a->ctx.fuse_stats_arg, st);
	fputs("# HELP nvmefs_fuse_inflight FUSE requests taken and not yet answered.\n"
	      "# TYPE nvmefs_fuse_inflight gauge\n",
	      f);
	fprintf(f, "nvmefs_fuse_inflight %llu\n", (unsigned long long)st->inflight);
	fputs("# HELP nvmefs_fuse_parked FUSE requests waiting now, by what they wait for.\n"
	      "# TYPE nvmefs_fuse_parked gauge\n",
	      f);
	for (unsigned i = 0; i < FUSEFS_WAIT_NR; i++)
		fprintf(f, "nvmefs_fuse_parked{reason=\"%s\"} %llu\n", fuse_wait_names[i],
		        (unsigned long long)st->parked[i]);
	fputs("# HELP nvmefs_fuse_waits_total FUSE requests that had to wait, by reason.\n"
	      "# TYPE nvmefs_fuse_waits_total counter\n",
	      f);
	for (unsigned i = 0; i < FUSEFS_WAIT_NR; i++)
		fprintf(f, "nvmefs_fuse_waits_total{reason=\"%s\"} %llu\n", fuse_wait_names[i],
		        (unsigned long long)st->waits[i]);
	fputs(
	    "# HELP nvmefs_fuse_lock_wait_seconds_total Time spent waiting for block range locks.\n"
	    "# TYPE nvmefs_fuse_lock_wait_seconds_total counter\n",
	    f);
	fprintf(f, "nvmefs_fuse_lock_wait_seconds_total %.9f\n", st->lock_wait_ns / 1e9);
	prom_u64(f, "nvmefs_fuse_bounce_bytes", "gauge", "Write data held outside DMA memory now.",
	         st->bounce_bytes);
	prom_u64(f, "nvmefs_fuse_bounce_peak_bytes", "gauge",
	         "Most write data one reactor held outside DMA memory.", st->bounce_peak);
	prom_u64(f, "nvmefs_fuse_channel_pauses_total", "counter",
	         "Times a reactor stopped reading the FUSE channel at a bound.",
	         st->channel_pauses);
	prom_u64(f, "nvmefs_fuse_ring_requests_total", "counter",
	         "FUSE requests that came over io_uring.", st->ring_requests);
	prom_u64(f, "nvmefs_fuse_copy_bytes_total", "counter",
	         "Payload bytes copied in user space between request buffers and DMA memory.",
	         st->copy_bytes);
	prom_u64(f, "nvmefs_fuse_bad_requests_total", "counter",
	         "Malformed FUSE requests, answered EINVAL.", st->bad_requests);
	prom_u64(f, "nvmefs_fuse_flushes_total", "counter",
	         "NVMe Flush commands sent (fsync, and O_DSYNC writes above dsync_fua_max).",
	         st->flushes_sent);
	prom_u64(f, "nvmefs_fuse_dsync_writes_total", "counter",
	         "Writes answered only once durable (O_DSYNC, O_SYNC, RWF_DSYNC).",
	         st->dsync_writes);
	prom_u64(f, "nvmefs_fuse_fua_writes_total", "counter",
	         "O_DSYNC writes sent with Force Unit Access.", st->fua_writes);
	fprintf(f,
	        "# HELP nvmefs_fuse_transport The FUSE transport serving requests (1 on its "
	        "label).\n# TYPE nvmefs_fuse_transport "
	        "gauge\nnvmefs_fuse_transport{transport=\"%s\"} 1\n",
	        fusefs_transport_name(st->transport));
	static const struct {
		const char *name, *help;
		size_t off;
	} oc[] = {
	    {"nvmefs_fuse_requests_total", "FUSE requests answered, by operation.",
	     offsetof(struct fusefs_op_stats, count)},
	    {"nvmefs_fuse_request_bytes_total", "Bytes requested by answered FUSE requests.",
	     offsetof(struct fusefs_op_stats, bytes)},
	    {"nvmefs_fuse_request_errors_total", "FUSE requests answered with an error.",
	     offsetof(struct fusefs_op_stats, errors)},
	};
	for (size_t k = 0; k < sizeof(oc) / sizeof(oc[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", oc[k].name, oc[k].help, oc[k].name);
		for (unsigned i = 0; i < FUSEFS_OP_NR; i++)
			fprintf(f, "%s{op=\"%s\"} %llu\n", oc[k].name, fuse_op_names[i],
			        (unsigned long long)*(const uint64_t *)((const char *)&st->op[i] +
			                                                oc[k].off));
	}
	fputs("# HELP nvmefs_fuse_request_latency_seconds FUSE request latency, taken to answered.\n"
	      "# TYPE nvmefs_fuse_request_latency_seconds histogram\n",
	      f);
	for (unsigned i = 0; i < FUSEFS_OP_NR; i++) {
		snprintf(lab, sizeof(lab), "op=\"%s\"", fuse_op_names[i]);
		prom_hist(f, "nvmefs_fuse_request_latency_seconds", lab, st->op[i].lat_ns);
	}
	free(st);
	return 0;
}

static int prom_write(struct admin *a, FILE *f)
{
	unsigned nr = a->ctx.nr_reactors, nc = a->ctx.nr_ctrls;
	struct nvme_qpair_stats *st = calloc((size_t)nr * nc + 1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++)
			if (qpair_at(a, r, c))
				nvme_qpair_stats_get(qpair_at(a, r, c), &st[r * nc + c]);

	fputs("# HELP nvmefs_build_info nvmefs version.\n# TYPE nvmefs_build_info gauge\n", f);
	fprintf(f, "nvmefs_build_info{version=\"%s\"} 1\n", NVMEFS_VERSION);
	fputs("# HELP nvmefs_uptime_seconds Seconds since the daemon started.\n"
	      "# TYPE nvmefs_uptime_seconds gauge\n",
	      f);
	fprintf(f, "nvmefs_uptime_seconds %.1f\n", uptime(a));

	for (size_t k = 0; k < sizeof(prom_counters) / sizeof(prom_counters[0]); k++) {
		const struct prom_counter *pc = &prom_counters[k];

		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", pc->name, pc->help, pc->name);
		for (unsigned r = 0; r < nr; r++)
			for (unsigned c = 0; c < nc; c++) {
				if (!qpair_at(a, r, c))
					continue;
				fprintf(f, "%s{", pc->name);
				prom_qlabels(f, a, r, c);
				fprintf(
				    f, "} %llu\n",
				    (unsigned long long)*(
				        const uint64_t *)((const char *)&st[r * nc + c] + pc->off));
			}
	}
	fputs(
	    "# HELP nvmefs_qpair_errors_total Commands completed with an error status, by class.\n"
	    "# TYPE nvmefs_qpair_errors_total counter\n",
	    f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++) {
			if (!qpair_at(a, r, c))
				continue;
			for (unsigned e = 0; e < NVME_ERRC_NR; e++) {
				fputs("nvmefs_qpair_errors_total{", f);
				prom_qlabels(f, a, r, c);
				fprintf(f, ",class=\"%s\"} %llu\n", errc_names[e],
				        (unsigned long long)st[r * nc + c].errors[e]);
			}
		}
	fputs("# HELP nvmefs_qpair_inflight Commands in flight on the queue now.\n"
	      "# TYPE nvmefs_qpair_inflight gauge\n",
	      f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++) {
			if (!qpair_at(a, r, c))
				continue;
			fputs("nvmefs_qpair_inflight{", f);
			prom_qlabels(f, a, r, c);
			fprintf(f, "} %u\n", nvme_qpair_inflight(qpair_at(a, r, c)));
		}
	fputs("# HELP nvmefs_qpair_latency_seconds Command latency, submission to completion.\n"
	      "# TYPE nvmefs_qpair_latency_seconds histogram\n",
	      f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++)
			if (qpair_at(a, r, c))
				prom_latency(f, a, r, c, st[r * nc + c].lat_ns);
	recov_prom(a, f);

	static const struct {
		const char *name, *help;
		size_t off;
	} rc[] = {
	    {"nvmefs_reactor_passes_total", "Reactor loop passes.",
	     offsetof(struct nvme_reactor_stats, passes)},
	    {"nvmefs_reactor_sleeps_total", "Times the reactor slept waiting for an event.",
	     offsetof(struct nvme_reactor_stats, sleeps)},
	    {"nvmefs_reactor_wakeups_total", "Times the reactor woke from sleep.",
	     offsetof(struct nvme_reactor_stats, wakeups)},
	    {"nvmefs_reactor_calls_total", "Functions run on the reactor for other threads.",
	     offsetof(struct nvme_reactor_stats, calls)},
	};
	for (size_t k = 0; k < sizeof(rc) / sizeof(rc[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", rc[k].name, rc[k].help, rc[k].name);
		for (unsigned r = 0; r < nr; r++) {
			struct nvme_reactor_stats rs;

			nvme_reactor_stats_get(a->ctx.reactors[r], &rs);
			fprintf(
			    f, "%s{reactor=\"%u\",cpu=\"%d\"} %llu\n", rc[k].name,
			    nvme_reactor_id(a->ctx.reactors[r]),
			    nvme_reactor_cpu(a->ctx.reactors[r]),
			    (unsigned long long)*(const uint64_t *)((const char *)&rs + rc[k].off));
		}
	}
	free(st);
	return prom_write_fuse(a, f);
}

static int cmd_metrics(struct admin *a, json_object *req, json_object *rep, char *err,
                       size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	(void)req;
	f = open_memstream(&text, &len);
	if (!f) {
		snprintf(err, errlen, "open_memstream: %s", strerror(errno));
		return -errno;
	}
	ret = prom_write(a, f);
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
	size_t off;

	if (!json_object_object_get_ex(req, "controller", &jn) ||
	    !json_object_is_type(jn, json_type_string)) {
		snprintf(err, errlen, "%s needs \"controller\": a controller name", cmd);
		return -EINVAL;
	}
	name = json_object_get_string(jn);
	for (unsigned i = 0; i < a->ctx.nr_ctrls; i++)
		if (!strcmp(nvme_ctrl_name(a->ctx.ctrls[i]), name)) {
			*out = i;
			return 0;
		}
	off = (size_t)snprintf(err, errlen, "no controller named \"%.64s\" (have:", name);
	for (unsigned j = 0; j < a->ctx.nr_ctrls && off < errlen; j++)
		off += (size_t)snprintf(err + off, errlen - off, " %s",
		                        nvme_ctrl_name(a->ctx.ctrls[j]));
	if (off < errlen)
		snprintf(err + off, errlen - off, "%s)", a->ctx.nr_ctrls ? "" : " none");
	return -ENOENT;
}

static const char *recov_state(const struct admin *a, unsigned i)
{
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

/* status: each controller's state */
static void recov_status_ctrl(const struct admin *a, unsigned i, json_object *c)
{
	jset_str(c, "state", recov_state(a, i));
}

/* stats: one object per controller with its state and recovery counters */
static json_object *recov_stats_ctrls(const struct admin *a)
{
	json_object *cs = json_object_new_array();

	for (unsigned i = 0; i < a->ctx.nr_ctrls; i++) {
		struct nvme_ctrl_rstats r;
		json_object *c = json_object_new_object();

		nvme_ctrl_rstats_get(a->ctx.ctrls[i], &r);
		jset_str(c, "name", nvme_ctrl_name(a->ctx.ctrls[i]));
		jset_str(c, "state", recov_state(a, i));
		jset(c, "recovery", recov_rstats_json(&r));
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

/* Prometheus: per-controller state and recovery counters */
static void recov_prom(const struct admin *a, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} rc[] = {
#define RS_FIELD(x) offsetof(struct nvme_ctrl_rstats, x)
	    {"nvmefs_ctrl_timeouts_total", "Commands that exceeded io_timeout_ms.",
	     RS_FIELD(timeouts)},
	    {"nvmefs_ctrl_aborts_sent_total", "Abort commands sent for timed-out commands.",
	     RS_FIELD(aborts_sent)},
	    {"nvmefs_ctrl_aborts_ok_total", "Aborts that the controller carried out.",
	     RS_FIELD(aborts_ok)},
	    {"nvmefs_ctrl_resets_started_total", "Controller resets started for recovery.",
	     RS_FIELD(resets_started)},
	    {"nvmefs_ctrl_resets_ok_total", "Controller resets that brought it back.",
	     RS_FIELD(resets_ok)},
	    {"nvmefs_ctrl_resets_failed_total", "Controller resets that failed.",
	     RS_FIELD(resets_failed)},
	    {"nvmefs_ctrl_resubmitted_total", "Commands sent again after a reset.",
	     RS_FIELD(resubmitted)},
	    {"nvmefs_ctrl_failed_after_retries_total",
	     "Commands failed with EIO after io_retries attempts.", RS_FIELD(failed_after_retries)},
	    {"nvmefs_ctrl_cfs_events_total", "Controller fatal status (CSTS.CFS) seen.",
	     RS_FIELD(cfs_events)},
	    {"nvmefs_ctrl_removals_total", "Removal requests or a vanished device seen.",
	     RS_FIELD(removals)},
	    {"nvmefs_ctrl_isolations_total",
	     "Devices cut off from memory (bus mastering off, mappings removed) because they "
	     "would not disable.",
	     RS_FIELD(isolations)},
	    {"nvmefs_ctrl_cancelled_total", "Commands ended by a stop whose drain ran out.",
	     RS_FIELD(cancelled)},
#undef RS_FIELD
	};
	static const char *const states[] = {"live", "resetting", "removed", "failed"};
	static const enum nvme_ctrl_state svals[] = {NVME_CTRL_LIVE, NVME_CTRL_RESETTING,
	                                             NVME_CTRL_REMOVED, NVME_CTRL_FAILED};
	unsigned nc = a->ctx.nr_ctrls;
	struct nvme_ctrl_rstats *rs = calloc(nc ? nc : 1, sizeof(*rs));

	if (!rs)
		return;
	for (unsigned c = 0; c < nc; c++)
		nvme_ctrl_rstats_get(a->ctx.ctrls[c], &rs[c]);
	fputs("# HELP nvmefs_ctrl_state Controller state (1 for the current one).\n"
	      "# TYPE nvmefs_ctrl_state gauge\n",
	      f);
	for (unsigned c = 0; c < nc; c++) {
		enum nvme_ctrl_state st = nvme_ctrl_state(a->ctx.ctrls[c]);

		for (unsigned k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
			fputs("nvmefs_ctrl_state{controller=\"", f);
			prom_label(f, nvme_ctrl_name(a->ctx.ctrls[c]));
			fprintf(f, "\",state=\"%s\"} %d\n", states[k], st == svals[k]);
		}
	}
	for (size_t k = 0; k < sizeof(rc) / sizeof(rc[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", rc[k].name, rc[k].help, rc[k].name);
		for (unsigned c = 0; c < nc; c++) {
			fprintf(f, "%s{controller=\"", rc[k].name);
			prom_label(f, nvme_ctrl_name(a->ctx.ctrls[c]));
			fprintf(f, "\"} %llu\n",
			        (unsigned long long)*(const uint64_t *)((const char *)&rs[c] +
			                                                rc[k].off));
		}
	}
	fputs("# HELP nvmefs_ctrl_reset_max_seconds Duration of the longest reset.\n"
	      "# TYPE nvmefs_ctrl_reset_max_seconds gauge\n",
	      f);
	for (unsigned c = 0; c < nc; c++) {
		fputs("nvmefs_ctrl_reset_max_seconds{controller=\"", f);
		prom_label(f, nvme_ctrl_name(a->ctx.ctrls[c]));
		fprintf(f, "\"} %.6f\n", rs[c].reset_max_ns / 1e9);
	}
	free(rs);
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
		         "inject needs \"fault\": delay, hang, unhang, cfs, stuck, remove, "
		         "powerfail, fail, lose or clear");
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
	} else {
		snprintf(err, errlen,
		         "inject: unknown fault \"%.32s\" (delay, hang, unhang, cfs, "
		         "stuck, remove, powerfail, fail, lose, clear)",
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
	jset_str(rep, "controller", nvme_ctrl_name(a->ctx.ctrls[i]));
	jset_str(rep, "state", recov_state(a, i));
	return 0;
}

/* changes: the command resets, faults or releases a device, so it needs
 * root or operator_group; the others only read and need admin_group too */
static const struct {
	const char *name;
	admin_cmd_fn fn;
	bool changes;
} admin_cmds[] = {
    {"status", cmd_status, false},         {"stats", cmd_stats, false},
    {"queues", cmd_queues, false},         {"namespaces", cmd_namespaces, false},
    {"identify", cmd_identify, false},     {"config", cmd_config, false},
    {"metrics", cmd_metrics, false},       {"inject", cmd_inject, true},
    {"attach", cmd_attach, true},
};

/* ---- clients ---- */

static void client_close(struct admin_client *c)
{
	struct admin *a = c->a;

	ev_io_stop(a->loop, &c->rio);
	ev_io_stop(a->loop, &c->wio);
	ev_timer_stop(a->loop, &c->idle);
	ev_timer_stop(a->loop, &c->deadline);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		a->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	a->nr_clients--;
	free(c->in);
	free(c->out);
	free(c);
}

static size_t client_pending(const struct admin_client *c)
{
	return c->out_len - c->out_off;
}

/* Send what can be sent now.  Returns -1 when the client was closed. */
static int client_flush(struct admin_client *c)
{
	struct admin *a = c->a;

	while (client_pending(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, client_pending(c),
		                 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			c->out_off += (size_t)n;
			ev_timer_again(a->loop, &c->idle);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(a->loop, &c->wio);
			return 0;
		}
		log_debug("admin client: send: %s", n < 0 ? strerror(errno) : "closed");
		client_close(c);
		return -1;
	}
	c->out_off = c->out_len = 0;
	ev_io_stop(a->loop, &c->wio);
	if (c->closing) {
		client_close(c);
		return -1;
	}
	return 0;
}

/* Queue one reply line.  Returns -1 when the client was closed. */
static int client_queue(struct admin_client *c, const char *s, size_t len)
{
	size_t need;

	if (client_pending(c) && client_pending(c) + len + 1 > ADMIN_OUT_MAX) {
		log_warn("admin client not reading its replies (%zu bytes unread): dropped",
		         client_pending(c));
		client_close(c);
		return -1;
	}
	if (c->out_off) { /* compact before growing */
		memmove(c->out, c->out + c->out_off, client_pending(c));
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	need = c->out_len + len + 1;
	if (need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p) {
			log_warn("admin client: out of memory for a %zu byte reply: dropped", len);
			client_close(c);
			return -1;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	return client_flush(c);
}

static int client_reply(struct admin_client *c, json_object *rep)
{
	const char *s = json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN |
	                                                        JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t len = s ? strlen(s) : 0;
	int ret;

	if (!s) {
		static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}";

		ret = client_queue(c, oom, sizeof(oom) - 1);
	} else if (len > c->a->reply_max) {
		char msg[160];
		int n;

		/* not sent: a client may not make the daemon hold more than
		 * reply_max bytes for it (the request was served: its effect,
		 * if any, stays) */
		log_warn("admin client uid %u: a %zu byte reply exceeds %zu bytes: not sent",
		         (unsigned)c->uid, len, c->a->reply_max);
		n = snprintf(msg, sizeof(msg),
		             "{\"ok\":false,\"error\":\"reply of %zu bytes exceeds the limit of "
		             "%zu bytes\"}",
		             len, c->a->reply_max);
		ret = client_queue(c, msg, (size_t)n);
	} else {
		ret = client_queue(c, s, len);
	}
	json_object_put(rep);
	return ret;
}

static int client_error(struct admin_client *c, json_object *id, const char *msg)
{
	json_object *rep = json_object_new_object();

	jset_bool(rep, "ok", false);
	jset_str(rep, "error", msg);
	if (id)
		jset(rep, "id", json_object_get(id));
	return client_reply(c, rep);
}

/* Handle one request line (without its newline). */
static int client_request(struct admin_client *c, const char *line, size_t len)
{
	struct json_tokener *tok;
	json_object *req, *jcmd, *id = NULL, *rep;
	enum json_tokener_error jerr;
	char err[512] = "";
	const char *cmd;
	size_t end;
	int ret;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return 0; /* blank line */
	if (memchr(line, '\0', len))
		return client_error(c, NULL, "malformed request: NUL byte in the line");
	tok = json_tokener_new();
	if (!tok)
		return client_error(c, NULL, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	req = json_tokener_parse_ex(tok, line, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!req || jerr != json_tokener_success) {
		snprintf(err, sizeof(err), "malformed request: %s",
		         jerr == json_tokener_continue ? "incomplete JSON"
		                                       : json_tokener_error_desc(jerr));
		json_object_put(req);
		return client_error(c, NULL, err);
	}
	for (; end < len; end++)
		if (line[end] != ' ' && line[end] != '\t') {
			json_object_put(req);
			return client_error(c, NULL,
			                    "malformed request: text after the JSON object");
		}
	if (!json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		return client_error(c, NULL, "malformed request: not a JSON object");
	}
	json_object_object_get_ex(req, "id", &id);
	if (!json_object_object_get_ex(req, "cmd", &jcmd) ||
	    !json_object_is_type(jcmd, json_type_string)) {
		ret = client_error(c, id, "malformed request: \"cmd\" (a string) is missing");
		json_object_put(req);
		return ret;
	}
	cmd = json_object_get_string(jcmd);
	for (size_t i = 0; i < sizeof(admin_cmds) / sizeof(admin_cmds[0]); i++) {
		if (strcmp(cmd, admin_cmds[i].name))
			continue;
		if (admin_cmds[i].changes ? !c->may_change : !c->may_read) {
			const struct cfg_daemon *d = &c->a->ctx.cfg->daemon;

			log_warn("admin: uid %u (pid %d) refused \"%s\": %s", (unsigned)c->uid,
			         (int)c->pid, admin_cmds[i].name,
			         admin_cmds[i].changes ? "not root or operator_group"
			                               : "not root, admin_group or operator_group");
			if (admin_cmds[i].changes)
				snprintf(err, sizeof(err),
				         "permission denied: \"%s\" changes the daemon's state: root "
				         "or a member of operator_group (%s) only",
				         admin_cmds[i].name,
				         d->operator_group[0] ? d->operator_group : "unset");
			else
				snprintf(err, sizeof(err),
				         "permission denied: root or a member of admin_group (%s) or "
				         "operator_group (%s) only",
				         d->admin_group[0] ? d->admin_group : "unset",
				         d->operator_group[0] ? d->operator_group : "unset");
			ret = client_error(c, id, err);
			json_object_put(req);
			return ret;
		}
		rep = json_object_new_object();
		jset_bool(rep, "ok", true);
		if (admin_cmds[i].fn(c->a, req, rep, err, sizeof(err)) < 0) {
			json_object_put(rep);
			ret = client_error(c, id, err[0] ? err : "failed");
		} else {
			if (id)
				jset(rep, "id", json_object_get(id));
			ret = client_reply(c, rep);
		}
		json_object_put(req);
		return ret;
	}
	snprintf(err, sizeof(err),
	         "unknown command \"%.64s\" (status, stats, queues, namespaces, "
	         "identify, config, metrics, inject, attach)",
	         cmd);
	ret = client_error(c, id, err);
	json_object_put(req);
	return ret;
}

/* The request deadline: absolute, from the first byte of a request line to
 * its newline.  The idle timer restarts with every byte, so on its own it
 * lets a client that trickles one byte a second hold a slot for ever. */
static void client_deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_client *c = w->data;
	char msg[96];

	(void)loop, (void)revents;
	log_debug("admin client: request not complete after %.1f s: closed",
	          c->a->request_timeout);
	snprintf(msg, sizeof(msg), "request not complete within %.1f s: closing",
	         c->a->request_timeout);
	c->closing = true;
	c->in_len = 0;
	ev_io_stop(c->a->loop, &c->rio);
	client_error(c, NULL, msg); /* sends, then closes the client */
}

/* Arm the deadline when an incomplete line starts, re-arm it when a line was
 * consumed and an incomplete one follows, stop it when nothing incomplete is
 * buffered (a complete line waiting for its turn is the server's delay). */
static void client_deadline_update(struct admin_client *c, bool consumed)
{
	struct ev_loop *loop = c->a->loop;
	bool partial = c->in_len && !c->closing && !memchr(c->in, '\n', c->in_len);

	if (!partial) {
		ev_timer_stop(loop, &c->deadline);
		return;
	}
	if (consumed)
		ev_timer_stop(loop, &c->deadline);
	if (!ev_is_active(&c->deadline)) {
		ev_timer_set(&c->deadline, c->a->request_timeout, 0.0);
		ev_timer_start(loop, &c->deadline);
	}
}

/* Serve the complete lines in the input buffer, one reply at a time.
 * Returns -1 when the client was closed. */
static int client_process(struct admin_client *c)
{
	struct admin *a = c->a;
	bool consumed = false;

	while (!c->closing && !client_pending(c)) {
		char *nl = memchr(c->in, '\n', c->in_len);
		size_t n;

		if (!nl) {
			if (c->in_len > ADMIN_LINE_MAX) {
				c->closing = true;
				c->in_len = 0;
				if (client_error(c, NULL,
				                 "request line longer than 65536 bytes: closing") <
				    0)
					return -1;
			} else if (c->eof) {
				/* a last request without its newline still counts */
				c->closing = true;
				n = c->in_len;
				c->in_len = 0;
				if (n && client_request(c, c->in, n) < 0)
					return -1;
				if (client_flush(c) < 0)
					return -1;
			}
			break;
		}
		n = (size_t)(nl - c->in);
		/* the line is handled in place; the buffer moves after */
		if (client_request(c, c->in, n) < 0)
			return -1;
		memmove(c->in, nl + 1, c->in_len - n - 1);
		c->in_len -= n + 1;
		consumed = true;
	}
	client_deadline_update(c, consumed);
	/* read more only when nothing is waiting to be sent */
	if (c->closing || client_pending(c))
		ev_io_stop(a->loop, &c->rio);
	else
		ev_io_start(a->loop, &c->rio);
	return 0;
}

static void client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	for (;;) {
		ssize_t n;

		if (c->in_len > ADMIN_LINE_MAX)
			break; /* full: client_process replies and closes */
		n = read(c->fd, c->in + c->in_len, ADMIN_LINE_MAX + 1 - c->in_len);
		if (n > 0) {
			c->in_len += (size_t)n;
			ev_timer_again(c->a->loop, &c->idle);
			/* serve what is complete before reading on, so a
			 * pipelining client is held back by its own replies */
			if (memchr(c->in + c->in_len - n, '\n', (size_t)n))
				break;
			continue;
		}
		if (n == 0) {
			c->eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		log_debug("admin client: read: %s", strerror(errno));
		client_close(c);
		return;
	}
	client_process(c);
}

static void client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	if (client_flush(c) < 0)
		return;
	client_process(c);
}

static void client_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	log_debug("admin client idle for %.0f s: closed", c->a->idle_timeout);
	client_close(c);
}

/* Is gid one of the peer's groups (primary or supplementary)? */
static bool admin_peer_in(gid_t gid, gid_t primary, const gid_t *groups, size_t n)
{
	if (gid == (gid_t)-1)
		return false;
	if (gid == primary)
		return true;
	for (size_t i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Read the peer's credentials as the kernel recorded them at connect(2):
 * SO_PEERCRED (uid, gid, pid) and SO_PEERGROUPS (supplementary groups), never
 * anything the client says.  Fills c->uid, c->pid, c->may_read, c->may_change;
 * a peer whose groups cannot be read gets only what its uid and primary
 * group give.  0 or a negative errno (then the client must be refused). */
static int admin_peer_rights(struct admin *a, struct admin_client *c)
{
	const struct cfg_daemon *d = &a->ctx.cfg->daemon;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	gid_t small[64], *groups = small;
	socklen_t glen = sizeof(small);
	size_t n = 0;
	bool adm, op;

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	if (len != sizeof(cr))
		return -EIO;
	c->uid = cr.uid;
	c->pid = cr.pid;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
		/* ERANGE: glen now says how much the groups need */
		if (errno == ERANGE && glen > sizeof(small) && (groups = malloc(glen)) &&
		    getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
			;
		else
			glen = 0; /* not read: the primary group only */
	}
	n = glen / sizeof(gid_t);
	adm = admin_peer_in(d->admin_gid, cr.gid, groups, n);
	op = admin_peer_in(d->operator_gid, cr.gid, groups, n);
	if (groups != small)
		free(groups); /* NULL when malloc failed */
	c->may_change = cr.uid == 0 || op;
	c->may_read = c->may_change || adm;
	return 0;
}

/* Clients the uid holds now. */
static unsigned admin_uid_clients(const struct admin *a, uid_t uid)
{
	unsigned n = 0;

	for (const struct admin_client *c = a->clients; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* NULL when the new client may stay, else why not (its one reply line). */
static const char *admin_admit(const struct admin *a, const struct admin_client *c)
{
	if (!c->may_read)
		return "{\"ok\":false,\"error\":\"permission denied: not root, admin_group or "
		       "operator_group\"}\n";
	if (a->nr_clients >= ADMIN_MAX_CLIENTS)
		return "{\"ok\":false,\"error\":\"too many admin clients\"}\n";
	if (c->uid == 0)
		return NULL;
	/* the last ADMIN_ROOT_RESERVE slots are root's, and no other uid may
	 * hold more than ADMIN_MAX_CLIENTS_PER_UID: one user cannot lock the
	 * others, or root, out */
	if (a->nr_clients >= ADMIN_MAX_CLIENTS - ADMIN_ROOT_RESERVE)
		return "{\"ok\":false,\"error\":\"too many admin clients (the rest are kept "
		       "for root)\"}\n";
	if (admin_uid_clients(a, c->uid) >= ADMIN_MAX_CLIENTS_PER_UID)
		return "{\"ok\":false,\"error\":\"too many admin clients of this user\"}\n";
	return NULL;
}

static void admin_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin *a = w->data;

	(void)revents;
	ev_io_start(loop, &a->lio);
}

static void admin_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin *a = w->data;

	(void)revents;
	for (;;) {
		int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_client *c;
		const char *refusal;
		int ret;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* the listener would stay readable: pause it */
				log_warn("admin socket: accept: %s (pausing for 1 s)",
				         strerror(errno));
				ev_io_stop(loop, &a->lio);
				ev_timer_set(&a->retry, 1.0, 0.0);
				ev_timer_start(loop, &a->retry);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_warn("admin socket: accept: %s", strerror(errno));
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			log_warn("admin socket: out of memory for a client");
			close(fd);
			continue;
		}
		c->a = a;
		c->fd = fd;
		ret = admin_peer_rights(a, c);
		if (ret < 0) {
			log_warn("admin socket: peer credentials: %s: refused", strerror(-ret));
			free(c);
			close(fd);
			continue;
		}
		refusal = admin_admit(a, c);
		if (!refusal)
			c->in = malloc(ADMIN_LINE_MAX + 1);
		if (refusal || !c->in) {
			if (refusal) {
				log_warn("admin socket: uid %u (pid %d) refused: %s", (unsigned)c->uid,
				         (int)c->pid, refusal);
				if (send(fd, refusal, strlen(refusal), MSG_NOSIGNAL | MSG_DONTWAIT) <
				    0)
					log_debug("admin socket: refusal: %s", strerror(errno));
			} else {
				log_warn("admin socket: out of memory for a client");
			}
			free(c);
			close(fd);
			continue;
		}
		ev_io_init(&c->rio, client_read_cb, fd, EV_READ);
		ev_io_init(&c->wio, client_write_cb, fd, EV_WRITE);
		ev_init(&c->idle, client_idle_cb);
		c->idle.repeat = a->idle_timeout;
		ev_init(&c->deadline, client_deadline_cb);
		c->rio.data = c->wio.data = c->idle.data = c->deadline.data = c;
		c->next = a->clients;
		if (a->clients)
			a->clients->prev = c;
		a->clients = c;
		a->nr_clients++;
		ev_io_start(loop, &c->rio);
		ev_timer_again(loop, &c->idle);
	}
}

/* ---- the listening socket ---- */

/* Is a daemon listening at sa?  1 yes, 0 no (stale), or a negative errno. */
static int admin_probe(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		ret = 1;
	else if (errno == EAGAIN || errno == EINPROGRESS)
		ret = 1; /* its backlog is full: alive, just busy */
	else if (errno == ECONNREFUSED)
		ret = 0;
	else
		ret = -errno;
	close(fd);
	return ret;
}

/* Create the listening socket at path without ever changing anything
 * through a name another user could replace.  bind(2) creates the socket
 * file with the process umask, so its mode and group must be set
 * afterwards; done by path next to the final name, an attacker who can
 * write that directory could swap the fresh socket for a symlink between
 * bind and chown/chmod and have them applied to a file of their choosing.
 * So: make a private directory (mkdtemp: mode 0700, ours) in the socket's
 * directory, bind, chown, chmod and listen there, where nobody else can
 * create or swap a name, then rename(2) the finished socket onto path: an
 * atomic replacement that never follows a symlink at path.  The private
 * directory goes away.  The umask is not touched: it is per process, and
 * the reactors are already running. */
static int admin_bind_private(struct admin *a, const char *path)
{
	const struct cfg_daemon *d = &a->ctx.cfg->daemon;
	/* connect(2) needs write permission on the socket: its group is the
	 * one allowed to read (operators, when only they are named), and
	 * without either it is root's alone */
	gid_t gid = d->admin_gid != (gid_t)-1 ? d->admin_gid : d->operator_gid;
	const char *group = d->admin_gid != (gid_t)-1 ? d->admin_group : d->operator_group;
	mode_t mode = gid != (gid_t)-1 ? 0660 : 0600;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dirbuf[sizeof(sa.sun_path)], basebuf[sizeof(sa.sun_path)];
	char tmp[sizeof(sa.sun_path) + 16];
	const char *dir, *base;
	int dfd = -1, tfd = -1, ret;
	struct stat st;

	memcpy(dirbuf, path, strlen(path) + 1);
	memcpy(basebuf, path, strlen(path) + 1);
	dir = dirname(dirbuf);
	base = basename(basebuf);
	if (snprintf(tmp, sizeof(tmp), "%s/.nvmefsd-admin.XXXXXX", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (!mkdtemp(tmp)) {
		ret = -errno;
		log_err("admin socket %s: a private directory in %s: %s", path, dir,
		        strerror(errno));
		return ret;
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	tfd = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || tfd < 0) {
		ret = -errno;
		log_err("admin socket %s: opening %s: %s", path, dfd < 0 ? dir : tmp,
		        strerror(errno));
		goto err_rmdir;
	}
	/* bind through the directory fd: the private path may be longer than
	 * sun_path allows, /proc/self/fd/N/s never is */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/s", tfd);
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		ret = -errno;
		log_err("admin socket: socket: %s", strerror(errno));
		goto err_rmdir;
	}
	if (bind(a->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		log_err("admin socket %s: bind in %s: %s", path, tmp, strerror(errno));
		goto err_close;
	}
	if (gid != (gid_t)-1 && fchownat(tfd, "s", (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		log_err("admin socket %s: chown to group %s (%u): %s", path, group, (unsigned)gid,
		        strerror(errno));
		goto err_unlink;
	}
	if (fchmodat(tfd, "s", mode, 0) < 0) {
		ret = -errno;
		log_err("admin socket %s: chmod %04o: %s", path, (unsigned)mode, strerror(errno));
		goto err_unlink;
	}
	if (fstatat(tfd, "s", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		log_err("admin socket %s: stat: %s", path, strerror(errno));
		goto err_unlink;
	}
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	if (listen(a->fd, 16) < 0) {
		ret = -errno;
		log_err("admin socket %s: listen: %s", path, strerror(errno));
		goto err_unlink;
	}
	if (renameat(tfd, "s", dfd, base) < 0) {
		ret = -errno;
		log_err("admin socket %s: rename into place: %s", path, strerror(errno));
		goto err_unlink;
	}
	unlinkat(dfd, tmp + strlen(dir) + 1, AT_REMOVEDIR);
	close(tfd);
	close(dfd);
	return 0;

err_unlink:
	unlinkat(tfd, "s", 0);
err_close:
	close(a->fd);
	a->fd = -1;
err_rmdir:
	if (tfd >= 0)
		close(tfd);
	if (dfd >= 0)
		close(dfd);
	rmdir(tmp);
	return ret;
}

static int admin_listen(struct admin *a)
{
	const struct cfg *cfg = a->ctx.cfg;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = cfg->daemon.admin_socket;
	struct stat st;
	int ret;

	if (!path[0]) {
		log_err("admin socket: the path is empty");
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("admin socket %s: path longer than %zu bytes", path,
		        sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_err("admin socket %s: exists and is not a socket; not replacing it",
			        path);
			return -EEXIST;
		}
		ret = admin_probe(&sa);
		if (ret > 0) {
			log_err("admin socket %s: another daemon is listening there", path);
			return -EADDRINUSE;
		}
		if (ret < 0) {
			log_err("admin socket %s: cannot tell whether it is in use: %s", path,
			        strerror(-ret));
			return ret;
		}
		/* the rename in admin_bind_private replaces it */
		log_info("admin socket %s: replacing a stale socket file", path);
	} else if (errno != ENOENT) {
		ret = -errno;
		log_err("admin socket %s: %s", path, strerror(errno));
		return ret;
	}

	ret = admin_bind_private(a, path);
	if (ret < 0)
		return ret;
	memcpy(a->path, path, strlen(path) + 1);
	return 0;
}

int admin_start(struct ev_loop *loop, const struct admin_ctx *ctx, struct admin **out)
{
	struct admin *a;
	int ret;

	if (!loop || !ctx || !ctx->cfg || !out || (ctx->nr_ctrls && !ctx->ctrls) ||
	    (ctx->nr_reactors && !ctx->reactors) || (ctx->nr_ns && !ctx->ns))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->loop = loop;
	a->ctx = *ctx;
	a->fd = -1;
	a->idle_timeout = ctx->idle_timeout > 0 ? ctx->idle_timeout : ADMIN_IDLE_TIMEOUT;
	a->request_timeout = ctx->request_timeout > 0 ? ctx->request_timeout : ADMIN_REQUEST_TIMEOUT;
	a->reply_max = ctx->reply_max ? ctx->reply_max : ADMIN_REPLY_MAX;
	a->mono0 = mono_now();
	a->wall0 = time(NULL);
	ret = admin_listen(a);
	if (ret < 0) {
		free(a);
		return ret;
	}
	ev_io_init(&a->lio, admin_accept_cb, a->fd, EV_READ);
	a->lio.data = a;
	ev_init(&a->retry, admin_retry_cb);
	a->retry.data = a;
	ev_io_start(loop, &a->lio);
	log_info("admin socket listening on %s", a->path);
	*out = a;
	return 0;
}

void admin_stop(struct admin *a)
{
	struct stat st;

	if (!a)
		return;
	while (a->clients)
		client_close(a->clients);
	ev_io_stop(a->loop, &a->lio);
	ev_timer_stop(a->loop, &a->retry);
	/* a daemon started after us may have taken the path over */
	if (stat(a->path, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino)
		unlink(a->path);
	close(a->fd);
	free(a);
}

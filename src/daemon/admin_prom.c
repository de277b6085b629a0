/* admin_prom.c - the "metrics" command's text: the figures of one
 * snapshot (stats.h) as Prometheus text exposition (format 0.0.4), a pure
 * function of it (admin_prom_write).
 *
 * Every integer counter and integer gauge is a row of a table (struct
 * prom_metric) written by prom_table, for the objects it has a series for:
 * the queue pairs, the controllers, the reactors, the FUSE wait reasons and
 * operations, or the daemon alone.  The nvmefs_namespace_* series (one per
 * file shown, labelled namespace and controller), histograms,
 * floating-point values and one-hot gauges (controller state, FUSE
 * transport) are written by hand.  The nvmefs_controller_* series come from
 * the health cache's part of the snapshot: a controller whose SMART log was
 * never read has none but its info.  A controller slot without a
 * controller has no series.
 */
#include "admin_priv.h"
#include "health.h"
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

static void prom_qlabels(FILE *f, const struct stats_snap *s, unsigned r, unsigned c)
{
	fputs("controller=\"", f);
	prom_label(f, s->ctrl[c].name);
	fprintf(f, "\",qid=\"%u\",reactor=\"%u\"", stats_qp(s, r, c)->qid, s->reactor[r].id);
}

/* One metric of a table: a uint64_t at offset off in each object. */
struct prom_metric {
	const char *name, *help;
	size_t off;
	const char *type; /* "counter" or "gauge" */
};

/* The objects a table has series for: n of them, object i at
 * base + i * stride.  labels writes object i's labels without the braces
 * (NULL: no labels); skip says object i has no series (NULL: none skipped). */
struct prom_objs {
	const void *base;
	size_t stride;
	unsigned n;
	const struct stats_snap *s; /* for labels and skip */
	void (*labels)(FILE *f, const struct stats_snap *s, unsigned i);
	bool (*skip)(const struct stats_snap *s, unsigned i);
};

#define PROM_NT(t) (sizeof(t) / sizeof((t)[0]))

/* Each metric of t: its HELP and TYPE lines, then one series per object. */
static void prom_table(FILE *f, const struct prom_metric *t, size_t nt, const struct prom_objs *o)
{
	for (size_t k = 0; k < nt; k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", t[k].name, t[k].help, t[k].name,
		        t[k].type);
		for (unsigned i = 0; i < o->n; i++) {
			const char *obj = (const char *)o->base + (size_t)i * o->stride;

			if (o->skip && o->skip(o->s, i))
				continue;
			fputs(t[k].name, f);
			if (o->labels) {
				fputc('{', f);
				o->labels(f, o->s, i);
				fputc('}', f);
			}
			fprintf(f, " %llu\n",
			        (unsigned long long)*(const uint64_t *)(obj + t[k].off));
		}
	}
}

/* ---- the series' labels ---- */

/* queue pair i of the snapshot: reactor i / nr_ctrls, controller i % nr_ctrls */
static void prom_qpair_labels(FILE *f, const struct stats_snap *s, unsigned i)
{
	prom_qlabels(f, s, i / s->nr_ctrls, i % s->nr_ctrls);
}

/* a controller that granted fewer queues than there are reactors, or none */
static bool prom_qpair_skip(const struct stats_snap *s, unsigned i)
{
	return !s->qp[i].qp;
}

static void prom_ctrl_labels(FILE *f, const struct stats_snap *s, unsigned i)
{
	fputs("controller=\"", f);
	prom_label(f, s->ctrl[i].name);
	fputc('"', f);
}

/* a slot without a controller */
static bool prom_ctrl_skip(const struct stats_snap *s, unsigned i)
{
	return !s->ctrl[i].c;
}

static void prom_reactor_labels(FILE *f, const struct stats_snap *s, unsigned i)
{
	fprintf(f, "reactor=\"%u\",cpu=\"%d\"", s->reactor[i].id, s->reactor[i].cpu);
}

static void prom_wait_labels(FILE *f, const struct stats_snap *s, unsigned i)
{
	(void)s;
	fprintf(f, "reason=\"%s\"", stats_fuse_wait_names[i]);
}

static void prom_op_labels(FILE *f, const struct stats_snap *s, unsigned i)
{
	(void)s;
	fprintf(f, "op=\"%s\"", stats_fuse_op_names[i]);
}

/* ---- the tables ---- */

#define QS_FIELD(f) offsetof(struct nvme_qpair_stats, f)
static const struct prom_metric prom_qpair[] = {
    {"nvmefs_qpair_submitted_total", "Commands submitted to the I/O submission queue.",
     QS_FIELD(submitted), "counter"},
    {"nvmefs_qpair_completed_total", "Commands completed (successfully or not).",
     QS_FIELD(completed), "counter"},
    {"nvmefs_qpair_bogus_cqes_total",
     "Completion entries dropped: command identifier out of range or not in flight.",
     QS_FIELD(bogus_cqes), "counter"},
    {"nvmefs_qpair_reap_passes_total", "Completion reaping passes over the queue.",
     QS_FIELD(reap_passes), "counter"},
    {"nvmefs_qpair_budget_exhausted_total",
     "Reaping passes that reaped a full cq_budget (more may have been waiting).",
     QS_FIELD(budget_exhausted), "counter"},
    {"nvmefs_qpair_sq_doorbells_total", "Submission queue tail doorbell writes.",
     QS_FIELD(sq_doorbells), "counter"},
    {"nvmefs_qpair_cq_doorbells_total", "Completion queue head doorbell writes.",
     QS_FIELD(cq_doorbells), "counter"},
    {"nvmefs_qpair_interrupts_total", "MSI-X interrupts taken for the queue.", QS_FIELD(interrupts),
     "counter"},
    {"nvmefs_qpair_idle_polls_total", "Polls of the queue that found no completion.",
     QS_FIELD(idle_polls), "counter"},
    {"nvmefs_qpair_read_bytes_total", "Bytes read by completed commands.", QS_FIELD(bytes_read),
     "counter"},
    {"nvmefs_qpair_written_bytes_total", "Bytes written by completed commands.",
     QS_FIELD(bytes_written), "counter"},
    {"nvmefs_qpair_timeouts_total", "Commands on the queue that exceeded io_timeout_ms.",
     QS_FIELD(timeouts), "counter"},
    {"nvmefs_qpair_aborts_sent_total", "Aborts sent for the queue's timed-out commands.",
     QS_FIELD(aborts_sent), "counter"},
    {"nvmefs_qpair_aborts_ok_total", "Aborts of the queue's commands carried out.",
     QS_FIELD(aborts_ok), "counter"},
    {"nvmefs_qpair_resubmitted_total", "Commands of the queue sent again after a reset.",
     QS_FIELD(resubmitted), "counter"},
    {"nvmefs_qpair_failed_after_retries_total",
     "Commands of the queue failed with EIO after io_retries attempts.",
     QS_FIELD(failed_after_retries), "counter"},
};

#define RC_FIELD(x) offsetof(struct nvme_reactor_stats, x)
static const struct prom_metric prom_reactor[] = {
    {"nvmefs_reactor_passes_total", "Reactor loop passes.", RC_FIELD(passes), "counter"},
    {"nvmefs_reactor_sleeps_total", "Times the reactor slept waiting for an event.",
     RC_FIELD(sleeps), "counter"},
    {"nvmefs_reactor_wakeups_total", "Times the reactor woke from sleep.", RC_FIELD(wakeups),
     "counter"},
    {"nvmefs_reactor_calls_total", "Functions run on the reactor for other threads.",
     RC_FIELD(calls), "counter"},
    {"nvmefs_reactor_busy_passes_total", "Reactor passes that did work.", RC_FIELD(busy_passes),
     "counter"},
};

static const struct prom_metric prom_ctrl[] = {
#define RS_FIELD(x) offsetof(struct nvme_ctrl_rstats, x)
    {"nvmefs_controller_timeouts_total", "Commands that exceeded io_timeout_ms.", RS_FIELD(timeouts),
     "counter"},
    {"nvmefs_controller_aborts_sent_total", "Abort commands sent for timed-out commands.",
     RS_FIELD(aborts_sent), "counter"},
    {"nvmefs_controller_aborts_ok_total", "Aborts that the controller carried out.", RS_FIELD(aborts_ok),
     "counter"},
    {"nvmefs_controller_resets_started_total", "Controller resets started for recovery.",
     RS_FIELD(resets_started), "counter"},
    {"nvmefs_controller_resets_ok_total", "Controller resets that brought it back.", RS_FIELD(resets_ok),
     "counter"},
    {"nvmefs_controller_resets_failed_total", "Controller resets that failed.", RS_FIELD(resets_failed),
     "counter"},
    {"nvmefs_controller_resubmitted_total", "Commands sent again after a reset.", RS_FIELD(resubmitted),
     "counter"},
    {"nvmefs_controller_failed_after_retries_total",
     "Commands failed with EIO after io_retries attempts.", RS_FIELD(failed_after_retries),
     "counter"},
    {"nvmefs_controller_cfs_events_total", "Controller fatal status (CSTS.CFS) seen.",
     RS_FIELD(cfs_events), "counter"},
    {"nvmefs_controller_removals_total", "Removal requests or a vanished device seen.",
     RS_FIELD(removals), "counter"},
    {"nvmefs_controller_isolations_total",
     "Devices cut off from memory (bus mastering off, mappings removed) because they "
     "would not disable.",
     RS_FIELD(isolations), "counter"},
    {"nvmefs_controller_cancelled_total", "Commands ended by a stop whose drain ran out.",
     RS_FIELD(cancelled), "counter"},
#undef RS_FIELD
};

#define FS_FIELD(x) offsetof(struct fusefs_stats, x)
static const struct prom_metric prom_fuse_inflight[] = {
    {"nvmefs_fuse_inflight", "FUSE requests taken and not yet answered.", FS_FIELD(inflight),
     "gauge"},
};

/* per wait reason: parked[i] and waits[i] */
static const struct prom_metric prom_fuse_wait[] = {
    {"nvmefs_fuse_parked", "FUSE requests waiting now, by what they wait for.", FS_FIELD(parked),
     "gauge"},
    {"nvmefs_fuse_waits_total", "FUSE requests that had to wait, by reason.", FS_FIELD(waits),
     "counter"},
};

static const struct prom_metric prom_fuse[] = {
    {"nvmefs_fuse_bounce_bytes", "Write data held outside DMA memory now.", FS_FIELD(bounce_bytes),
     "gauge"},
    {"nvmefs_fuse_bounce_peak_bytes", "Most write data one reactor held outside DMA memory.",
     FS_FIELD(bounce_peak), "gauge"},
    {"nvmefs_fuse_channel_pauses_total",
     "Times a reactor stopped reading the FUSE channel at a bound.", FS_FIELD(channel_pauses),
     "counter"},
    {"nvmefs_fuse_ring_requests_total", "FUSE requests that came over io_uring.",
     FS_FIELD(ring_requests), "counter"},
    {"nvmefs_fuse_copy_bytes_total",
     "Payload bytes copied in user space between request buffers and DMA memory.",
     FS_FIELD(copy_bytes), "counter"},
    {"nvmefs_fuse_bad_requests_total", "Malformed FUSE requests, answered EINVAL.",
     FS_FIELD(bad_requests), "counter"},
    {"nvmefs_fuse_dup_answers_total",
     "Answers the kernel had no request for on a live connection: a request answered twice.",
     FS_FIELD(dup_answers), "counter"},
    {"nvmefs_fuse_late_answers_total",
     "Answers dropped because the channel was closed or the connection had ended.",
     FS_FIELD(late_answers), "counter"},
    {"nvmefs_fuse_audit_violations_total",
     "Violations found by an audit build's checks (always 0 in other builds).",
     FS_FIELD(audit_violations), "counter"},
    {"nvmefs_fuse_flushes_total",
     "NVMe Flush commands sent (fsync, and O_DSYNC writes above dsync_fua_max).",
     FS_FIELD(flushes_sent), "counter"},
    {"nvmefs_fuse_dsync_writes_total",
     "Writes answered only once durable (O_DSYNC, O_SYNC, RWF_DSYNC).", FS_FIELD(dsync_writes),
     "counter"},
    {"nvmefs_fuse_fua_writes_total", "O_DSYNC writes sent with Force Unit Access.",
     FS_FIELD(fua_writes), "counter"},
};
#undef FS_FIELD

#define OP_FIELD(x) offsetof(struct fusefs_op_stats, x)
static const struct prom_metric prom_fuse_op[] = {
    {"nvmefs_fuse_requests_total", "FUSE requests answered, by operation.", OP_FIELD(count),
     "counter"},
    {"nvmefs_fuse_request_bytes_total", "Bytes requested by answered FUSE requests.",
     OP_FIELD(bytes), "counter"},
    {"nvmefs_fuse_request_errors_total", "FUSE requests answered with an error.", OP_FIELD(errors),
     "counter"},
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

/* Histogram h (the engine's buckets) as Prometheus series name{labels,le};
 * sum_ns is the exact sum of what h counts (kept beside it). */
static void prom_hist(FILE *f, const char *name, const char *labels, const uint64_t *h,
                      uint64_t sum_ns)
{
	uint64_t cum[PROM_NLE] = {0}, count = 0;
	double sum = (double)sum_ns / 1e9;

	for (unsigned b = 0; b < NVME_LAT_BUCKETS; b++) {
		uint64_t upper = nvme_lat_bucket_ns(b);

		if (h[b]) {
			count += h[b];
			for (unsigned k = 0; k < PROM_NLE; k++)
				if (upper <= prom_le_ns[k])
					cum[k] += h[b];
		}
	}
	for (unsigned k = 0; k < PROM_NLE; k++)
		fprintf(f, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, prom_le_ns[k] / 1e9,
		        (unsigned long long)cum[k]);
	fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)count);
	fprintf(f, "%s_sum{%s} %.9f\n", name, labels, sum);
	fprintf(f, "%s_count{%s} %llu\n", name, labels, (unsigned long long)count);
}

/* One queue pair's latency histogram, labelled like its counters. */
static void prom_latency(FILE *f, const struct stats_snap *s, unsigned r, unsigned c)
{
	const struct nvme_qpair_stats *st = &stats_qp(s, r, c)->st;
	char *labels = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&labels, &len);

	if (!m)
		return;
	prom_qlabels(m, s, r, c);
	if (fclose(m) == 0)
		prom_hist(f, "nvmefs_qpair_latency_seconds", labels, st->lat_ns, st->lat_sum_ns);
	free(labels);
}

/* ---- the writers ---- */

/* asynchronous events: requests armed now, events by kind */
static void prom_write_aen(const struct stats_snap *s, FILE *f)
{
	fputs("# HELP nvmefs_controller_aers_armed Asynchronous Event Requests outstanding on the "
	      "controller.\n# TYPE nvmefs_controller_aers_armed gauge\n",
	      f);
	for (unsigned c = 0; c < s->nr_ctrls; c++) {
		if (prom_ctrl_skip(s, c))
			continue;
		fputs("nvmefs_controller_aers_armed{", f);
		prom_ctrl_labels(f, s, c);
		fprintf(f, "} %" PRIu64 "\n", s->ctrl[c].aen.aers_armed);
	}
	fputs("# HELP nvmefs_controller_async_events_total Asynchronous events the controller "
	      "reported, by kind.\n# TYPE nvmefs_controller_async_events_total counter\n",
	      f);
	for (unsigned c = 0; c < s->nr_ctrls; c++)
		for (unsigned k = 0; !prom_ctrl_skip(s, c) && k < STATS_AEN_KINDS; k++) {
			fputs("nvmefs_controller_async_events_total{", f);
			prom_ctrl_labels(f, s, c);
			fprintf(f, ",kind=\"%s\"} %" PRIu64 "\n", stats_aen_kind_names[k],
			        s->ctrl[c].aen.events[k]);
		}
}

/* per-controller state, recovery counters and longest reset */
static void prom_write_ctrls(const struct stats_snap *s, FILE *f)
{
	/* the engine's states and the daemon's planned one (stats_ctrl_state_name):
	 * a detached controller is 1 on "detached" only, never "removed" */
	static const char *const states[] = {"live", "resetting", "removed", "failed",
	                                     "detached"};
	static const enum nvme_ctrl_state svals[] = {NVME_CTRL_LIVE, NVME_CTRL_RESETTING,
	                                             NVME_CTRL_REMOVED, NVME_CTRL_FAILED};
	const struct prom_objs objs = {.base = (const char *)s->ctrl + offsetof(struct stats_ctrl, rs),
	                               .stride = sizeof(*s->ctrl),
	                               .n = s->nr_ctrls,
	                               .s = s,
	                               .labels = prom_ctrl_labels,
	                               .skip = prom_ctrl_skip};

	fputs("# HELP nvmefs_controller_state Controller state (1 for the current one; "
	      "detached: taken away on purpose).\n"
	      "# TYPE nvmefs_controller_state gauge\n",
	      f);
	for (unsigned c = 0; c < s->nr_ctrls; c++) {
		const struct stats_ctrl *sc = &s->ctrl[c];

		for (unsigned k = 0; !prom_ctrl_skip(s, c) && k < PROM_NT(states); k++) {
			bool on = k < PROM_NT(svals) ? !sc->detached && sc->state == svals[k]
			                             : sc->detached;

			fputs("nvmefs_controller_state{", f);
			prom_ctrl_labels(f, s, c);
			fprintf(f, ",state=\"%s\"} %d\n", states[k], on);
		}
	}
	prom_table(f, prom_ctrl, PROM_NT(prom_ctrl), &objs);
	prom_write_aen(s, f);
	fputs("# HELP nvmefs_controller_reset_max_seconds Duration of the longest reset.\n"
	      "# TYPE nvmefs_controller_reset_max_seconds gauge\n",
	      f);
	for (unsigned c = 0; c < s->nr_ctrls; c++) {
		if (prom_ctrl_skip(s, c))
			continue;
		fputs("nvmefs_controller_reset_max_seconds{", f);
		prom_ctrl_labels(f, s, c);
		fprintf(f, "} %.6f\n", s->ctrl[c].rs.reset_max_ns / 1e9);
	}
}

/* A per-reactor counter kept in ns (the uint64_t at off), as seconds. */
static void prom_reactor_secs(FILE *f, const struct stats_snap *s, const char *name,
                              const char *help, size_t off)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (unsigned r = 0; r < s->nr_reactors; r++) {
		fprintf(f, "%s{", name);
		prom_reactor_labels(f, s, r);
		fprintf(f, "} %.9f\n",
		        *(const uint64_t *)((const char *)&s->reactor[r].st + off) / 1e9);
	}
}

static void prom_write_reactors(const struct stats_snap *s, FILE *f)
{
	const struct prom_objs objs = {
	    .base = (const char *)s->reactor + offsetof(struct stats_reactor, st),
	    .stride = sizeof(*s->reactor),
	    .n = s->nr_reactors,
	    .s = s,
	    .labels = prom_reactor_labels};

	prom_table(f, prom_reactor, PROM_NT(prom_reactor), &objs);
	prom_reactor_secs(f, s, "nvmefs_reactor_busy_seconds_total",
	                  "Time of reactor passes that did work (reaped a completion, ran a call, "
	                  "took a request).",
	                  RC_FIELD(busy_ns));
	prom_reactor_secs(f, s, "nvmefs_reactor_idle_seconds_total",
	                  "Reactor time not busy: passes that found nothing, the loop between "
	                  "passes, sleeping.",
	                  RC_FIELD(idle_ns));
}

/* a namespace's labels: namespace="NAME",controller="CTRL" */
static void prom_ns_labels(FILE *f, const struct stats_snap *s, const struct admin_ns *n)
{
	const struct stats_ctrl *sc = stats_ns_ctrl(s, n);

	fputs("namespace=\"", f);
	prom_label(f, n->name);
	fputs("\",controller=\"", f);
	prom_label(f, sc ? sc->name : "");
	fputc('"', f);
}

/* A per-namespace, per-kind series: the uint64_t at off in each kind's
 * figures, or (secs) that many ns as seconds. */
static void prom_ns_ops(FILE *f, const struct stats_snap *s, const char *name, const char *help,
                        size_t off, bool secs)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (unsigned i = 0; i < s->nr_ns; i++)
		for (unsigned k = 0; k < FUSEFS_NSOP_NR; k++) {
			uint64_t v = *(const uint64_t *)((const char *)&s->ns_st[i].op[k] + off);

			fprintf(f, "%s{", name);
			prom_ns_labels(f, s, &s->ns[i]);
			if (secs)
				fprintf(f, ",op=\"%s\"} %.9f\n", stats_fuse_op_names[k], v / 1e9);
			else
				fprintf(f, ",op=\"%s\"} %" PRIu64 "\n", stats_fuse_op_names[k], v);
		}
}

/* Per namespace: its size; requests, bytes, errors, time waiting in the
 * daemon and latency by kind, requests in flight, busy time
 * (node_exporter's node_disk_* in spirit), which are left out when the
 * front end keeps no figures. */
static void prom_write_ns(const struct stats_snap *s, FILE *f)
{
	fputs("# HELP nvmefs_namespace_size_bytes Size of the namespace file.\n"
	      "# TYPE nvmefs_namespace_size_bytes gauge\n",
	      f);
	for (unsigned i = 0; i < s->nr_ns; i++) {
		fputs("nvmefs_namespace_size_bytes{", f);
		prom_ns_labels(f, s, &s->ns[i]);
		fprintf(f, "} %" PRIu64 "\n", s->ns[i].size);
	}
	if (!s->ns_st)
		return;
#define NO_FIELD(x) offsetof(struct fusefs_nsop_stats, x)
	prom_ns_ops(f, s, "nvmefs_namespace_requests_total",
	            "Requests on the namespace file answered, by kind.", NO_FIELD(count), false);
	prom_ns_ops(f, s, "nvmefs_namespace_request_bytes_total",
	            "Bytes of the answered requests (read, written, or the range of a punch or "
	            "zero).",
	            NO_FIELD(bytes), false);
	prom_ns_ops(f, s, "nvmefs_namespace_request_errors_total",
	            "Requests on the namespace file answered with an error.", NO_FIELD(errors),
	            false);
	prom_ns_ops(f, s, "nvmefs_namespace_queue_seconds_total",
	            "Time requests waited in the daemon (DMA memory, range lock, queue slot) "
	            "before their device commands.",
	            NO_FIELD(queue_ns), true);
#undef NO_FIELD
	fputs("# HELP nvmefs_namespace_inflight Requests on the namespace file taken, not "
	      "answered.\n# TYPE nvmefs_namespace_inflight gauge\n",
	      f);
	for (unsigned i = 0; i < s->nr_ns; i++) {
		fputs("nvmefs_namespace_inflight{", f);
		prom_ns_labels(f, s, &s->ns[i]);
		fprintf(f, "} %" PRIu64 "\n", s->ns_st[i].inflight);
	}
	fputs("# HELP nvmefs_namespace_busy_seconds_total Time a reactor had a request of the "
	      "namespace in flight, summed over the reactors.\n"
	      "# TYPE nvmefs_namespace_busy_seconds_total counter\n",
	      f);
	for (unsigned i = 0; i < s->nr_ns; i++) {
		fputs("nvmefs_namespace_busy_seconds_total{", f);
		prom_ns_labels(f, s, &s->ns[i]);
		fprintf(f, "} %.9f\n", s->ns_st[i].busy_ns / 1e9);
	}
	fputs("# HELP nvmefs_namespace_request_latency_seconds Namespace request latency, taken "
	      "to answered.\n# TYPE nvmefs_namespace_request_latency_seconds histogram\n",
	      f);
	for (unsigned i = 0; i < s->nr_ns; i++)
		for (unsigned k = 0; k < FUSEFS_NSOP_NR; k++) {
			char *lab = NULL;
			size_t len = 0;
			FILE *m = open_memstream(&lab, &len);

			if (!m)
				break;
			prom_ns_labels(m, s, &s->ns[i]);
			fprintf(m, ",op=\"%s\"", stats_fuse_op_names[k]);
			if (fclose(m) == 0)
				prom_hist(f, "nvmefs_namespace_request_latency_seconds", lab,
				          s->ns_st[i].op[k].lat_ns, s->ns_st[i].op[k].sum_ns);
			free(lab);
		}
}

static void prom_write_fuse(const struct stats_snap *s, FILE *f)
{
	const struct fusefs_stats *st = &s->fuse;
	const struct prom_objs one = {.base = st, .n = 1};
	const struct prom_objs waits = {.base = st,
	                                .stride = sizeof(uint64_t),
	                                .n = FUSEFS_WAIT_NR,
	                                .labels = prom_wait_labels};
	const struct prom_objs ops = {.base = st->op,
	                              .stride = sizeof(st->op[0]),
	                              .n = FUSEFS_OP_NR,
	                              .labels = prom_op_labels};
	char lab[64];

	if (!s->has_fuse)
		return;
	prom_table(f, prom_fuse_inflight, PROM_NT(prom_fuse_inflight), &one);
	prom_table(f, prom_fuse_wait, PROM_NT(prom_fuse_wait), &waits);
	fputs(
	    "# HELP nvmefs_fuse_lock_wait_seconds_total Time spent waiting for block range locks.\n"
	    "# TYPE nvmefs_fuse_lock_wait_seconds_total counter\n",
	    f);
	fprintf(f, "nvmefs_fuse_lock_wait_seconds_total %.9f\n", st->lock_wait_ns / 1e9);
	prom_table(f, prom_fuse, PROM_NT(prom_fuse), &one);
	fprintf(f,
	        "# HELP nvmefs_fuse_transport The FUSE transport serving requests (1 on its "
	        "label).\n# TYPE nvmefs_fuse_transport "
	        "gauge\nnvmefs_fuse_transport{transport=\"%s\"} 1\n",
	        fusefs_transport_name(st->transport));
	prom_table(f, prom_fuse_op, PROM_NT(prom_fuse_op), &ops);
	fputs(
	    "# HELP nvmefs_fuse_request_latency_seconds FUSE request latency, taken to answered.\n"
	    "# TYPE nvmefs_fuse_request_latency_seconds histogram\n",
	    f);
	for (unsigned i = 0; i < FUSEFS_OP_NR; i++) {
		snprintf(lab, sizeof(lab), "op=\"%s\"", stats_fuse_op_names[i]);
		prom_hist(f, "nvmefs_fuse_request_latency_seconds", lab, st->op[i].lat_ns,
		          st->op[i].sum_ns);
	}
}

/* ---- the health cache's SMART figures ---- */

struct prom_smart {
	uint64_t media_errors, read_bytes, written_bytes, power_on_s, unsafe_shutdowns;
};

static const struct prom_metric prom_smart_tab[] = {
#define SM_FIELD(x) offsetof(struct prom_smart, x)
    {"nvmefs_controller_media_errors_total",
     "Unrecovered data integrity errors (SMART Media and Data Integrity Errors).",
     SM_FIELD(media_errors), "counter"},
    {"nvmefs_controller_data_read_bytes_total",
     "Bytes read by the host (SMART Data Units Read x 512000).", SM_FIELD(read_bytes),
     "counter"},
    {"nvmefs_controller_data_written_bytes_total",
     "Bytes written by the host (SMART Data Units Written x 512000).", SM_FIELD(written_bytes),
     "counter"},
    {"nvmefs_controller_power_on_seconds_total",
     "Time powered on (SMART Power On Hours x 3600).", SM_FIELD(power_on_s), "counter"},
    {"nvmefs_controller_unsafe_shutdowns_total",
     "Power losses without a shutdown notification (SMART Unsafe Shutdowns).",
     SM_FIELD(unsafe_shutdowns), "counter"},
#undef SM_FIELD
};

static uint64_t prom_mul_sat(uint64_t v, uint64_t m)
{
	return v > UINT64_MAX / m ? UINT64_MAX : v * m;
}

/* no SMART log read (or no controller) */
static bool prom_smart_skip(const struct stats_snap *s, unsigned i)
{
	return !s->ctrl[i].c || !s->ctrl[i].health_known || !s->ctrl[i].health.valid;
}

/* one gauge per controller with a SMART read: v(health), left out when NAN
 * (a figure the device does not report) */
static void prom_smart_gauge(const struct stats_snap *s, FILE *f, const char *name,
                             const char *help, double (*v)(const struct nvme_health *h))
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (unsigned c = 0; c < s->nr_ctrls; c++) {
		double x;

		if (prom_smart_skip(s, c))
			continue;
		x = v(&s->ctrl[c].health.smart);
		if (isnan(x))
			continue;
		fprintf(f, "%s{", name);
		prom_ctrl_labels(f, s, c);
		fprintf(f, "} %.10g\n", x);
	}
}

static double sm_temp(const struct nvme_health *h)
{
	/* 0 K: not reported */
	return h->temperature ? (double)h->temperature - 273.15 : NAN;
}

static double sm_spare(const struct nvme_health *h)
{
	return h->avail_spare / 100.0;
}

static double sm_spare_thresh(const struct nvme_health *h)
{
	return h->spare_thresh / 100.0;
}

static double sm_used(const struct nvme_health *h)
{
	return h->percent_used / 100.0;
}

static int prom_write_health(const struct stats_snap *s, FILE *f)
{
	unsigned nc = s->nr_ctrls;
	struct prom_smart *sm = calloc(nc ? nc : 1, sizeof(*sm));
	const struct prom_objs objs = {.base = sm,
	                               .stride = sizeof(*sm),
	                               .n = nc,
	                               .s = s,
	                               .labels = prom_ctrl_labels,
	                               .skip = prom_smart_skip};

	if (!sm)
		return -ENOMEM;
	fputs("# HELP nvmefs_controller_info The controller's identity (always 1).\n"
	      "# TYPE nvmefs_controller_info gauge\n",
	      f);
	for (unsigned c = 0; c < nc; c++) {
		const struct nvme_ctrl_info *in = s->ctrl[c].info;

		if (prom_ctrl_skip(s, c))
			continue;
		fputs("nvmefs_controller_info{", f);
		prom_ctrl_labels(f, s, c);
		fputs(",model=\"", f);
		prom_label(f, in->model);
		fputs("\",serial=\"", f);
		prom_label(f, in->serial);
		fputs("\",firmware=\"", f);
		prom_label(f, in->firmware);
		fprintf(f, "\",transport=\"%s\"} 1\n", s->ctrl[c].sim ? "sim" : "pcie");
	}
	prom_smart_gauge(s, f, "nvmefs_controller_temperature_celsius",
	                 "Composite temperature (SMART).", sm_temp);
	prom_smart_gauge(s, f, "nvmefs_controller_available_spare_ratio",
	                 "Spare capacity left, 1 = all (SMART Available Spare).", sm_spare);
	prom_smart_gauge(s, f, "nvmefs_controller_available_spare_threshold_ratio",
	                 "Available spare below which the device warns (SMART).", sm_spare_thresh);
	prom_smart_gauge(s, f, "nvmefs_controller_percentage_used_ratio",
	                 "Life used as the vendor estimates it, may exceed 1 (SMART).", sm_used);
	fputs("# HELP nvmefs_controller_critical_warning SMART critical warning bits (1: set).\n"
	      "# TYPE nvmefs_controller_critical_warning gauge\n",
	      f);
	for (unsigned c = 0; c < nc; c++) {
		if (prom_smart_skip(s, c))
			continue;
		for (unsigned b = 0; b < HEALTH_WARN_NR; b++) {
			fputs("nvmefs_controller_critical_warning{", f);
			prom_ctrl_labels(f, s, c);
			fprintf(f, ",warning=\"%s\"} %u\n", health_warning_names[b],
			        (s->ctrl[c].health.smart.critical_warning >> b) & 1u);
		}
	}
	for (unsigned c = 0; c < nc; c++) {
		const struct nvme_health *h = &s->ctrl[c].health.smart;

		if (prom_smart_skip(s, c))
			continue;
		sm[c].media_errors = h->media_errors;
		sm[c].read_bytes = prom_mul_sat(h->data_units_read, 512000);
		sm[c].written_bytes = prom_mul_sat(h->data_units_written, 512000);
		sm[c].power_on_s = prom_mul_sat(h->power_on_hours, 3600);
		sm[c].unsafe_shutdowns = h->unsafe_shutdowns;
	}
	prom_table(f, prom_smart_tab, PROM_NT(prom_smart_tab), &objs);
	free(sm);
	return 0;
}

int admin_prom_write(const struct stats_snap *s, FILE *f)
{
	unsigned nr = s->nr_reactors, nc = s->nr_ctrls;
	const struct prom_objs qpairs = {.base = (const char *)s->qp + offsetof(struct stats_qpair, st),
	                                 .stride = sizeof(*s->qp),
	                                 .n = nr * nc,
	                                 .s = s,
	                                 .labels = prom_qpair_labels,
	                                 .skip = prom_qpair_skip};

	fputs("# HELP nvmefs_build_info nvmefs version.\n# TYPE nvmefs_build_info gauge\n", f);
	fprintf(f, "nvmefs_build_info{version=\"%s\"} 1\n", NVMEFS_VERSION);
	fputs("# HELP nvmefs_uptime_seconds Seconds since the daemon started.\n"
	      "# TYPE nvmefs_uptime_seconds gauge\n",
	      f);
	fprintf(f, "nvmefs_uptime_seconds %.1f\n", s->uptime);
	/* the image's start: its counters begin at zero then (a restart in
	 * place keeps the pid but not the counters), which is what scrapers
	 * read this for.  Named for nvmefs: node_exporter, which serves this
	 * file, has a process_start_time_seconds of its own and drops ours */
	if (s->start_time) {
		fputs("# HELP nvmefs_start_time_seconds Start time of the daemon since the Unix "
		      "epoch, in seconds.\n# TYPE nvmefs_start_time_seconds gauge\n",
		      f);
		fprintf(f, "nvmefs_start_time_seconds %lld\n", (long long)s->start_time);
	}

	prom_table(f, prom_qpair, PROM_NT(prom_qpair), &qpairs);
	fputs(
	    "# HELP nvmefs_qpair_errors_total Commands completed with an error status, by class.\n"
	    "# TYPE nvmefs_qpair_errors_total counter\n",
	    f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++) {
			if (!stats_qp(s, r, c)->qp)
				continue;
			for (unsigned e = 0; e < NVME_ERRC_NR; e++) {
				fputs("nvmefs_qpair_errors_total{", f);
				prom_qlabels(f, s, r, c);
				fprintf(f, ",class=\"%s\"} %llu\n", stats_errc_names[e],
				        (unsigned long long)stats_qp(s, r, c)->st.errors[e]);
			}
		}
	fputs("# HELP nvmefs_qpair_inflight Commands in flight on the queue now.\n"
	      "# TYPE nvmefs_qpair_inflight gauge\n",
	      f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++) {
			if (!stats_qp(s, r, c)->qp)
				continue;
			fputs("nvmefs_qpair_inflight{", f);
			prom_qlabels(f, s, r, c);
			fprintf(f, "} %u\n", stats_qp(s, r, c)->inflight);
		}
	fputs("# HELP nvmefs_qpair_latency_seconds Command latency, submission to completion.\n"
	      "# TYPE nvmefs_qpair_latency_seconds histogram\n",
	      f);
	for (unsigned r = 0; r < nr; r++)
		for (unsigned c = 0; c < nc; c++)
			if (stats_qp(s, r, c)->qp)
				prom_latency(f, s, r, c);
	prom_write_ctrls(s, f);
	if (prom_write_health(s, f))
		return -ENOMEM;
	prom_write_reactors(s, f);
	prom_write_fuse(s, f);
	prom_write_ns(s, f);
	return 0;
}

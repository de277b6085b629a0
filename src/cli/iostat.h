/* iostat.h - per-namespace rates and latencies between two "stats" replies
 * (the daemon's counters and raw latency buckets, src/daemon/admin_cmd.c),
 * and the two views built on them: `nvmefsctl iostat` (iostat -x's columns
 * and units) and `nvmefsctl top` (top.c).  Prefix io_. */
#ifndef NVMEFS_CLI_IOSTAT_H
#define NVMEFS_CLI_IOSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* One namespace over an interval.  Rates per second, sizes in kB (1024 B,
 * as iostat), times in ms; NAN where the interval had no such request. */
struct io_ns_rates {
	char name[64], ctrl[32];
	double rs, ws, fs, ds;         /* reads, writes, flushes, punch+zero per s */
	double rkbs, wkbs, dkbs;       /* kB read, written, punched or zeroed per s */
	double r_await, w_await, f_await, d_await; /* mean latency */
	double r_p50, r_p99, w_p50, w_p99;         /* from the raw buckets */
	double q_await;                /* mean time waiting in the daemon, all kinds */
	double rareq, wareq;           /* mean request size, kB */
	double aqu;                    /* mean requests in flight (latency sum / time) */
	double util;                   /* % of the interval a reactor had one in flight
	                                * (over several reactors: capped at 100) */
	uint64_t inflight;             /* now */
	uint64_t errors;               /* in the interval, all kinds */
};

/* The rates of every namespace in cur (a "stats" reply) since prev (an
 * earlier one; NULL: since the daemon started).  *out: an array of *n
 * (free it); a namespace missing from prev counts from zero.  0, or
 * -ENOMEM. */
int io_ns_rates(json_object *prev, json_object *cur, struct io_ns_rates **out, size_t *n);

/* Seconds between prev and cur (cur's uptime without prev). */
double io_interval(json_object *prev, json_object *cur);

/* What nvmefsctl iostat was asked for. */
struct io_iostat_opts {
	bool extended;             /* -x: the extended columns */
	bool json;                 /* --json: one object per report and line */
	bool skip_first;           /* -y: no report since start (with an interval) */
	bool stamp;                /* -t: each text report opens with the time */
	const char *const *names;  /* namespaces to show, in this order (none: all) */
	size_t nr_names;
};

/* nvmefsctl iostat [-x] [-y] [-t] [--json] [NAME...] [INTERVAL [COUNT]]: a
 * report since start (unless -y with an interval), then one per INTERVAL
 * seconds, COUNT reports in all (0: until a signal).  A NAME the daemon
 * does not serve is an error.  Returns nvmefsctl's exit code. */
int io_iostat(const char *sock, const struct io_iostat_opts *o, double interval,
              unsigned long count);

/* nvmefsctl top [INTERVAL [COUNT]] (top.c): full screen on a terminal,
 * plain reports otherwise. */
int io_top(const char *sock, double interval, unsigned long count);

#endif

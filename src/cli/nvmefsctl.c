/* nvmefsctl - the admin CLI of nvmefsd: status, statistics, queues,
 * namespaces, identify, config, log pages (smart-log, error-log, fw-log,
 * effects-log) and the controller list of a running daemon, detach of a
 * controller and attach of a removed or detached one, and fault injection
 * into a software controller, over its admin
 * socket (newline-delimited JSON, see src/daemon/admin.h).
 *
 * Exit codes: 0 ok, 1 the daemon replied with an error (or an unusable
 * reply), 2 usage, 3 cannot connect.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h"
#include "ctl.h"
#include "iostat.h"
#include "table.h"

#define NCOLS(a) ((unsigned)(sizeof(a) / sizeof((a)[0])))

/* t printed (every column as wide as its content: a long name moves the
 * columns after it, never breaks them) and freed */
static void tab_out(struct tab *t)
{
	tab_print(t);
	tab_free(t);
}

#define CTL_DEFAULT_SOCKET "/run/nvmefsd.sock"

const char *prog = "nvmefsctl";
volatile sig_atomic_t stop_flag;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: %s [-s SOCKET | -c CONF] [--json] COMMAND\n"
	    "Ask a running nvmefsd for its state over its admin socket.\n"
	    "\n"
	    "Commands:\n"
	    "  status               version, uptime, config, controllers, reactors\n"
	    "  stats [-w SECONDS]   counters per queue pair and totals; with -w, rates\n"
	    "                       over every interval until Ctrl-C (like iostat -x)\n"
	    "  stats --prometheus   the counters in Prometheus text format (= metrics)\n"
	    "  iostat [-x] [-y] [-t] [NAME...] [INTERVAL [COUNT]]\n"
	    "                       per namespace file (or only the NAMEs): r/s, w/s,\n"
	    "                       rkB/s, wkB/s, r_await, w_await (ms), aqu-sz, %%util,\n"
	    "                       as iostat; -x adds discards, flushes, request sizes\n"
	    "                       and p99 latencies; the first report since start (-y:\n"
	    "                       left out), then one per INTERVAL; -t: the time before\n"
	    "                       each report (--json: one JSON object per report)\n"
	    "  top [INTERVAL [COUNT]]\n"
	    "                       live view (every 1 s): reactors' busy %%, IOPS, queue\n"
	    "                       depth; namespaces' IOPS, MB/s, p50/p99; controllers'\n"
	    "                       state, resets, temperature.  Keys: q quit, s n i b l\n"
	    "                       sort.  Columns a narrow screen cannot show are named\n"
	    "                       under the table.  Plain reports when stdout is not a\n"
	    "                       terminal (within $COLUMNS when it is set)\n"
	    "  queues               reactor -> CPU -> NUMA node -> controller -> qid -> vector\n"
	    "  namespaces           the namespace files\n"
	    "  identify CONTROLLER  the controller's identify data\n"
	    "  list                 one line per controller: serial, model, namespaces,\n"
	    "                       size, format, firmware, state, transport\n"
	    "  smart-log CONTROLLER the SMART / Health log (temperature, wear, counters)\n"
	    "  error-log CONTROLLER the Error Information log\n"
	    "  fw-log CONTROLLER    the Firmware Slot log\n"
	    "  effects-log CONTROLLER\n"
	    "                       the Commands Supported and Effects log\n"
	    "  detach CONTROLLER    take a controller away while the others serve: its\n"
	    "                       files go (open ones fail with EIO), its device is\n"
	    "                       released (vfio-bind --unbind can take it)\n"
	    "  attach [--wait] CONTROLLER\n"
	    "                       bring a removed, failed or detached controller back;\n"
	    "                       returns at once (\"attaching\"), with --wait when it is\n"
	    "                       live (or failed: exit 1), at most 300 s\n"
	    "  restart              re-execute the installed nvmefsd in place: the mount and\n"
	    "                       open files stay (refused, with the reason, if it cannot)\n"
	    "  inject CONTROLLER FAULT [ARG...]\n"
	    "                       software controller only: delay MS, hang, unhang,\n"
	    "                       hang-loop (hung again after every reset), cfs,\n"
	    "                       stuck, remove, powerfail [SEED], fail N STATUS,\n"
	    "                       lose N, clear,\n"
	    "                       warn spare|temperature|reliability|readonly|backup|clear\n"
	    "                       (SMART critical warning; setting one raises an event),\n"
	    "                       ns-add NSID SIZE (a RAM namespace, null on a null sim),\n"
	    "                       ns-remove NSID, ns-resize NSID SIZE (SIZE in bytes, or\n"
	    "                       with K, M, G, T: powers of 1024),\n"
	    "                       misdirect-write N BLOCKS, misdirect-read N BLOCKS (the\n"
	    "                       next N land BLOCKS further on), corrupt NSID LBA [BYTE]\n"
	    "  config               the daemon's effective configuration\n"
	    "  metrics              the counters in Prometheus text format\n"
	    "\n"
	    "Options:\n"
	    "  -s, --socket SOCKET  admin socket (default %s)\n"
	    "  -c, --config CONF    take the socket from CONF's admin_socket\n"
	    "  -j, --json           print the daemon's reply as JSON\n"
	    "  -w, --watch SECONDS  stats: print rates every SECONDS\n"
	    "  -p, --prometheus     stats: Prometheus text format\n"
	    "  -x, --extended       iostat: the extended columns\n"
	    "  -y                   iostat: no report since start (with an INTERVAL)\n"
	    "  -t                   iostat: the time before each report\n"
	    "  -h, --help           this help\n"
	    "  -V, --version        the version\n"
	    "\n"
	    "Exit status: 0 ok, 1 the daemon replied with an error, 2 usage,\n"
	    "3 cannot connect to the daemon.\n",
	    prog, CTL_DEFAULT_SOCKET);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return EXIT_USAGE;
}

static void put_num(char *b, size_t n, double v, int prec)
{
	if (isfinite(v))
		snprintf(b, n, "%.*f", prec, v);
	else
		snprintf(b, n, "-");
}

static const char *human_size(uint64_t v, char *b, size_t n)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double d = (double)v;
	unsigned u = 0;

	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(b, n, "%llu B", (unsigned long long)v);
	else
		snprintf(b, n, "%.1f %s", d, units[u]);
	return b;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
	                                           JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* ---- human output ---- */

static void show_status(json_object *r)
{
	json_object *cs = jget(r, "controllers"), *rs = jget(r, "reactors");
	uint64_t up = (uint64_t)jdbl(r, "uptime_s");

	printf("nvmefsd %s, pid %s, up %llud %02lluh %02llum %02llus (since %s)\n",
	       jstr(r, "version"), jstr(r, "pid"), (unsigned long long)(up / 86400),
	       (unsigned long long)(up / 3600 % 24), (unsigned long long)(up / 60 % 60),
	       (unsigned long long)(up % 60), jstr(r, "started"));
	printf("config       %s\n", jstr(r, "config_file"));
	printf("mountpoint   %s\n", jstr(r, "mountpoint"));
	printf("admin socket %s\n", jstr(r, "admin_socket"));
	printf("mode         %s, queue depth %s, cq budget %s\n", jstr(r, "mode"),
	       jstr(r, "queue_depth"), jstr(r, "cq_budget"));
	printf("transport    %s\n", jget(r, "transport") ? jstr(r, "transport") : "-");
	printf("namespaces   %s\n", jstr(r, "namespaces"));
	static const struct tab_col ccols[] = {
	    {"CONTROLLER", TAB_LEFT, 0, 0}, {"STATE", TAB_LEFT, 0, 0},   {"DEVICE", TAB_LEFT, 0, 0},
	    {"BACKEND", TAB_LEFT, 0, 0},    {"MODE", TAB_LEFT, 0, 0},    {"QUEUES", TAB_RIGHT, 0, 0},
	    {"NS", TAB_RIGHT, 0, 0},        {"MODEL", TAB_LEFT, 0, 2},
	};
	static const struct tab_col hcols[] = {
	    {"CONTROLLER", TAB_LEFT, 0, 0},  {"TEMP", TAB_RIGHT, 0, 0},     {"SPARE", TAB_RIGHT, 0, 0},
	    {"USED", TAB_RIGHT, 0, 0},       {"HEALTH READ", TAB_LEFT, 0, 2}, {"WARNINGS", TAB_LEFT, 0, 0},
	    {"ERROR", TAB_LEFT, 0, 0},
	};
	static const struct tab_col rcols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0}, {"CPU", TAB_RIGHT, 0, 0}, {"NODE", TAB_RIGHT, 0, 0}};
	struct tab *t = tab_new(ccols, NCOLS(ccols));

	for (size_t i = 0; i < jlen(cs); i++) {
		json_object *c = jidx(cs, i);

		tab_cell(t, "%s", jstr(c, "name"));
		tab_cell(t, "%s", jstr(c, "state"));
		tab_cell(t, "%s", jstr(c, "device"));
		tab_cell(t, "%s", jstr(c, "backend"));
		tab_cell(t, "%s", jstr(c, "mode"));
		tab_cell(t, "%s", jstr(c, "io_queues"));
		tab_cell(t, "%s", jstr(c, "namespaces"));
		tab_cell(t, "%s", jstr(c, "model"));
	}
	putchar('\n');
	tab_out(t);
	t = tab_new(hcols, NCOLS(hcols));
	for (size_t i = 0; i < jlen(cs); i++) {
		json_object *c = jidx(cs, i), *h = jget(c, "health"), *w = jget(h, "critical_warnings");
		char tp[16] = "-", sp[16] = "-", us[16] = "-", warn[128] = "";
		size_t off = 0;

		if (jbool(h, "valid")) {
			snprintf(tp, sizeof(tp), "%s C", jstr(h, "temperature_c"));
			snprintf(sp, sizeof(sp), "%s%%", jstr(h, "available_spare"));
			snprintf(us, sizeof(us), "%s%%", jstr(h, "percentage_used"));
		}
		for (size_t k = 0; k < jlen(w) && off < sizeof(warn); k++)
			off += (size_t)snprintf(warn + off, sizeof(warn) - off, "%s%s", k ? "," : "",
			                        json_object_get_string(jidx(w, k)));
		tab_cell(t, "%s", jstr(c, "name"));
		tab_cell(t, "%s", tp);
		tab_cell(t, "%s", sp);
		tab_cell(t, "%s", us);
		tab_cell(t, "%s", jbool(h, "valid") ? jstr(h, "read_at") : "never");
		tab_cell(t, "%s", jbool(h, "valid") ? (warn[0] ? warn : "none") : "-");
		tab_cell(t, "%s", jget(h, "error") ? jstr(h, "error") : "-");
	}
	putchar('\n');
	tab_out(t);
	t = tab_new(rcols, NCOLS(rcols));
	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *x = jidx(rs, i);

		tab_cell(t, "%s", jstr(x, "id"));
		tab_cell(t, "%s", jstr(x, "cpu"));
		tab_cell(t, "%s", jstr(x, "node"));
	}
	putchar('\n');
	tab_out(t);
}

static const struct tab_col stats_cols[] = {
    {"REACTOR", TAB_LEFT, 0, 0},    {"CONTROLLER", TAB_LEFT, 0, 0}, {"QID", TAB_RIGHT, 0, 0},
    {"SUBMITTED", TAB_RIGHT, 0, 0}, {"COMPLETED", TAB_RIGHT, 0, 0}, {"INFLIGHT", TAB_RIGHT, 0, 0},
    {"READ", TAB_RIGHT, 0, 0},      {"WRITTEN", TAB_RIGHT, 0, 0},   {"CPL/PASS", TAB_RIGHT, 0, 0},
    {"DB/IO", TAB_RIGHT, 0, 0},     {"BUDGET", TAB_RIGHT, 0, 0},    {"ERRORS", TAB_RIGHT, 0, 0},
    {"BOGUS", TAB_RIGHT, 0, 0},     {"P50us", TAB_RIGHT, 0, 0},     {"P99us", TAB_RIGHT, 0, 0},
    {"P99.9us", TAB_RIGHT, 0, 0},   {"MAXus", TAB_RIGHT, 0, 0},
};

static void stats_row(struct tab *t, const char *reactor, const char *ctrl, const char *qid,
                      json_object *q)
{
	json_object *lat = jget(q, "latency_us"), *err = jget(q, "errors");
	char rd[32], wr[32], cpp[16], db[16], p50[16], p99[16], p999[16], mx[16];

	put_num(cpp, sizeof(cpp), jdbl(q, "cpl_per_pass_mean"), 2);
	put_num(db, sizeof(db), jdbl(q, "doorbells_per_io"), 2);
	put_num(p50, sizeof(p50), jdbl(lat, "p50"), 1);
	put_num(p99, sizeof(p99), jdbl(lat, "p99"), 1);
	put_num(p999, sizeof(p999), jdbl(lat, "p99_9"), 1);
	put_num(mx, sizeof(mx), jdbl(lat, "max"), 1);
	tab_cell(t, "%s", reactor);
	tab_cell(t, "%s", ctrl);
	tab_cell(t, "%s", qid);
	tab_cell(t, "%llu", (unsigned long long)ju64(q, "submitted"));
	tab_cell(t, "%llu", (unsigned long long)ju64(q, "completed"));
	tab_cell(t, "%s", jget(q, "inflight") ? jstr(q, "inflight") : "");
	tab_cell(t, "%s", human_size(ju64(q, "bytes_read"), rd, sizeof(rd)));
	tab_cell(t, "%s", human_size(ju64(q, "bytes_written"), wr, sizeof(wr)));
	tab_cell(t, "%s", cpp);
	tab_cell(t, "%s", db);
	tab_cell(t, "%llu", (unsigned long long)ju64(q, "budget_exhausted"));
	tab_cell(t, "%llu", (unsigned long long)ju64(err, "total"));
	tab_cell(t, "%llu", (unsigned long long)ju64(q, "bogus_cqes"));
	tab_cell(t, "%s", p50);
	tab_cell(t, "%s", p99);
	tab_cell(t, "%s", p999);
	tab_cell(t, "%s", mx);
}

/* The FUSE front end's part of a stats reply ("fuse"), when it has one. */
static void show_fuse_stats(json_object *f)
{
	static const char *const ops[] = {"read", "write", "flush", "punch", "zero", "other"};
	static const char *const why[] = {"memory", "queue_slot", "range_lock"};
	json_object *parked = jget(f, "parked"), *waits = jget(f, "waits");
	char b1[32], b2[32], lw[16];

	if (!f)
		return;
	put_num(lw, sizeof(lw), jdbl(f, "lock_wait_s"), 3);
	printf("\nFUSE front end over %s: %llu in flight; parked now:", jstr(f, "transport"),
	       (unsigned long long)ju64(f, "inflight"));
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		printf(" %s %llu", why[i], (unsigned long long)ju64(parked, why[i]));
	printf("; waits since start:");
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		printf(" %s %llu", why[i], (unsigned long long)ju64(waits, why[i]));
	printf("\nrange lock waits %llu (%s s in all); bounce buffers %s (peak %s); channel "
	       "pauses %llu\n",
	       (unsigned long long)ju64(f, "lock_waits"), lw,
	       human_size(ju64(f, "bounce_bytes"), b1, sizeof(b1)),
	       human_size(ju64(f, "bounce_peak_bytes"), b2, sizeof(b2)),
	       (unsigned long long)ju64(f, "channel_pauses"));
	printf("requests over io_uring %llu; payload bytes copied %s; malformed requests %llu\n",
	       (unsigned long long)ju64(f, "ring_requests"),
	       human_size(ju64(f, "copy_bytes"), b1, sizeof(b1)),
	       (unsigned long long)ju64(f, "bad_requests"));
	printf("answers refused by the kernel %llu; answers after the channel closed %llu; "
	       "audit violations %llu\n",
	       (unsigned long long)ju64(f, "dup_answers"), (unsigned long long)ju64(f, "late_answers"),
	       (unsigned long long)ju64(f, "audit_violations"));
	printf("Flush commands sent %llu; O_DSYNC writes %llu (with FUA %llu, followed by a "
	       "Flush %llu)\n",
	       (unsigned long long)ju64(f, "flushes_sent"), (unsigned long long)ju64(f, "dsync_writes"),
	       (unsigned long long)ju64(f, "fua_writes"), (unsigned long long)ju64(f, "dsync_flushes"));
	printf("%-7s %12s %10s %8s %9s %9s %9s %9s\n", "OP", "COUNT", "BYTES", "ERRORS", "P50us",
	       "P99us", "P99.9us", "MAXus");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		json_object *o = jget(jget(f, "ops"), ops[i]), *lat = jget(o, "latency_us");
		char p50[16], p99[16], p999[16], mx[16];

		put_num(p50, sizeof(p50), jdbl(lat, "p50"), 1);
		put_num(p99, sizeof(p99), jdbl(lat, "p99"), 1);
		put_num(p999, sizeof(p999), jdbl(lat, "p99_9"), 1);
		put_num(mx, sizeof(mx), jdbl(lat, "max"), 1);
		printf("%-7s %12llu %10s %8llu %9s %9s %9s %9s\n", ops[i],
		       (unsigned long long)ju64(o, "count"), human_size(ju64(o, "bytes"), b1, sizeof(b1)),
		       (unsigned long long)ju64(o, "errors"), p50, p99, p999, mx);
	}
}

/* stats: the recovery counters per controller and per queue */
static void show_recovery(json_object *r)
{
	static const struct tab_col ccols[] = {
	    {"CONTROLLER", TAB_LEFT, 0, 0}, {"STATE", TAB_LEFT, 0, 0},    {"TIMEOUTS", TAB_RIGHT, 0, 0},
	    {"ABORTS", TAB_RIGHT, 0, 0},    {"ABRT-OK", TAB_RIGHT, 0, 0}, {"RESETS", TAB_RIGHT, 0, 0},
	    {"RST-OK", TAB_RIGHT, 0, 0},    {"RST-ERR", TAB_RIGHT, 0, 0}, {"LASTms", TAB_RIGHT, 0, 0},
	    {"MAXms", TAB_RIGHT, 0, 0},     {"RESUBMIT", TAB_RIGHT, 0, 0}, {"FAILED", TAB_RIGHT, 0, 0},
	    {"CFS", TAB_RIGHT, 0, 0},       {"GONE", TAB_RIGHT, 0, 0},    {"CUT", TAB_RIGHT, 0, 0},
	    {"CANCELED", TAB_RIGHT, 0, 0},
	};
	static const struct tab_col qcols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0},  {"CONTROLLER", TAB_LEFT, 0, 0}, {"QID", TAB_RIGHT, 0, 0},
	    {"TIMEOUTS", TAB_RIGHT, 0, 0}, {"ABORTS", TAB_RIGHT, 0, 0},   {"ABRT-OK", TAB_RIGHT, 0, 0},
	    {"RESUBMIT", TAB_RIGHT, 0, 0}, {"FAILED", TAB_RIGHT, 0, 0},
	};
	json_object *cs = jget(r, "controllers"), *rs = jget(r, "reactors");
	struct tab *t = tab_new(ccols, NCOLS(ccols));
	char last[16], max[16];

	for (size_t i = 0; i < jlen(cs); i++) {
		json_object *c = jidx(cs, i), *x = jget(c, "recovery");
		static const char *const k[] = {"timeouts", "aborts_sent", "aborts_ok",
		                                "resets_started", "resets_ok", "resets_failed"};
		static const char *const k2[] = {"resubmitted", "failed_after_retries", "cfs_events",
		                                 "removals", "isolations", "cancelled"};

		put_num(last, sizeof(last), jdbl(x, "reset_last_ms"), 1);
		put_num(max, sizeof(max), jdbl(x, "reset_max_ms"), 1);
		tab_cell(t, "%s", jstr(c, "name"));
		tab_cell(t, "%s", jstr(c, "state"));
		for (size_t j = 0; j < sizeof(k) / sizeof(k[0]); j++)
			tab_cell(t, "%llu", (unsigned long long)ju64(x, k[j]));
		tab_cell(t, "%s", last);
		tab_cell(t, "%s", max);
		for (size_t j = 0; j < sizeof(k2) / sizeof(k2[0]); j++)
			tab_cell(t, "%llu", (unsigned long long)ju64(x, k2[j]));
	}
	putchar('\n');
	tab_out(t);
	t = tab_new(qcols, NCOLS(qcols));
	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *qs = jget(jidx(rs, i), "qpairs");

		for (size_t k = 0; k < jlen(qs); k++) {
			static const char *const f[] = {"timeouts", "aborts_sent", "aborts_ok",
			                                "resubmitted", "failed_after_retries"};
			json_object *q = jidx(qs, k);

			tab_cell(t, "%s", jstr(q, "reactor"));
			tab_cell(t, "%s", jstr(q, "controller"));
			tab_cell(t, "%s", jstr(q, "qid"));
			for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++)
				tab_cell(t, "%llu", (unsigned long long)ju64(q, f[j]));
		}
	}
	putchar('\n');
	tab_out(t);
}

/* Per namespace file and kind since start: count, bytes, errors, mean and
 * percentile latencies, the share of it spent waiting in the daemon. */
static void show_ns_stats(json_object *ns)
{
	static const char *const kinds[] = {"read", "write", "flush", "punch", "zero"};
	static const struct tab_col cols[] = {
	    {"NAMESPACE", TAB_LEFT, 0, 0}, {"OP", TAB_LEFT, 0, 0},     {"COUNT", TAB_RIGHT, 0, 0},
	    {"BYTES", TAB_RIGHT, 0, 0},    {"ERRORS", TAB_RIGHT, 0, 0}, {"MEANus", TAB_RIGHT, 0, 0},
	    {"P50us", TAB_RIGHT, 0, 0},    {"P99us", TAB_RIGHT, 0, 0},  {"QUEUE%", TAB_RIGHT, 0, 0},
	    {"INFLIGHT", TAB_RIGHT, 0, 0},
	};
	struct tab *t;

	if (!jlen(ns))
		return;
	t = tab_new(cols, NCOLS(cols));
	for (size_t i = 0; i < jlen(ns); i++) {
		json_object *n = jidx(ns, i);

		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			json_object *o = jget(jget(n, "ops"), kinds[k]), *lat = jget(o, "latency_us");
			double cnt = (double)ju64(o, "count"), sum = (double)ju64(o, "sum_ns");
			char by[32], mean[32], q[32];

			put_num(mean, sizeof(mean), cnt > 0 ? sum / cnt / 1e3 : NAN, 1);
			put_num(q, sizeof(q), sum > 0 ? (double)ju64(o, "queue_ns") / sum * 100 : NAN, 1);
			tab_cell(t, "%s", k ? "" : jstr(n, "name"));
			tab_cell(t, "%s", kinds[k]);
			tab_cell(t, "%llu", (unsigned long long)ju64(o, "count"));
			tab_cell(t, "%s", human_size(ju64(o, "bytes"), by, sizeof(by)));
			tab_cell(t, "%llu", (unsigned long long)ju64(o, "errors"));
			tab_cell(t, "%s", mean);
			tab_cell(t, "%.1f", jdbl(lat, "p50"));
			tab_cell(t, "%.1f", jdbl(lat, "p99"));
			tab_cell(t, "%s", q);
			if (k)
				tab_cell(t, "%s", "");
			else
				tab_cell(t, "%llu", (unsigned long long)ju64(n, "inflight"));
		}
	}
	putchar('\n');
	tab_out(t);
}

static void show_stats(json_object *r)
{
	static const struct tab_col rcols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0},  {"CPU", TAB_RIGHT, 0, 0},    {"NODE", TAB_RIGHT, 0, 0},
	    {"PASSES", TAB_RIGHT, 0, 0},  {"SLEEPS", TAB_RIGHT, 0, 0}, {"WAKEUPS", TAB_RIGHT, 0, 0},
	    {"CALLS", TAB_RIGHT, 0, 0},   {"BUSY%", TAB_RIGHT, 0, 0},
	};
	json_object *rs = jget(r, "reactors"), *tot = jget(r, "totals");
	struct tab *t = tab_new(stats_cols, NCOLS(stats_cols));

	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *qs = jget(jidx(rs, i), "qpairs");

		for (size_t k = 0; k < jlen(qs); k++) {
			json_object *q = jidx(qs, k);

			stats_row(t, jstr(q, "reactor"), jstr(q, "controller"), jstr(q, "qid"), q);
		}
	}
	stats_row(t, "total", "", "", tot);
	tab_out(t);
	t = tab_new(rcols, NCOLS(rcols));
	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *x = jidx(rs, i);
		double busy = (double)ju64(x, "busy_ns"), idle = (double)ju64(x, "idle_ns");
		char b[32];

		put_num(b, sizeof(b), busy + idle > 0 ? busy / (busy + idle) * 100 : NAN, 1);
		tab_cell(t, "%s", jstr(x, "id"));
		tab_cell(t, "%s", jstr(x, "cpu"));
		tab_cell(t, "%s", jstr(x, "node"));
		tab_cell(t, "%llu", (unsigned long long)ju64(x, "passes"));
		tab_cell(t, "%llu", (unsigned long long)ju64(x, "sleeps"));
		tab_cell(t, "%llu", (unsigned long long)ju64(x, "wakeups"));
		tab_cell(t, "%llu", (unsigned long long)ju64(x, "calls"));
		tab_cell(t, "%s", b);
	}
	putchar('\n');
	tab_out(t);
	show_fuse_stats(jget(r, "fuse"));
	show_ns_stats(jget(r, "namespaces"));
	show_recovery(r);
}

/* The path of a request over io_uring: the caller's CPU, its FUSE queue,
 * the reactor serving it, and that reactor's NVMe queue on each controller. */
static void show_fuse_queues(json_object *r, json_object *qs)
{
	static const struct tab_col cols[] = {
	    {"CPU", TAB_RIGHT, 0, 0},  {"FUSE-Q", TAB_RIGHT, 0, 0},    {"NODE", TAB_RIGHT, 0, 0},
	    {"REACTOR", TAB_RIGHT, 0, 0}, {"RCPU", TAB_RIGHT, 0, 0}, {"CONTROLLER", TAB_LEFT, 0, 0},
	    {"QID", TAB_RIGHT, 0, 0},  {"VECTOR", TAB_RIGHT, 0, 0},
	};
	json_object *fq = jget(r, "fuse_queues");
	struct tab *t;

	printf("\nFUSE transport %s", jget(r, "transport") ? jstr(r, "transport") : "-");
	if (!jlen(fq)) {
		printf(" (no FUSE queues: requests come over /dev/fuse)\n");
		return;
	}
	t = tab_new(cols, NCOLS(cols));
	putchar('\n');
	for (size_t i = 0; i < jlen(fq); i++) {
		json_object *f = jidx(fq, i);
		int shown = 0;

		for (size_t k = 0; k <= jlen(qs); k++) {
			json_object *q = k < jlen(qs) ? jidx(qs, k) : NULL;

			if (q ? strcmp(jstr(q, "reactor"), jstr(f, "reactor")) != 0 : shown)
				continue;
			tab_cell(t, "%s", jstr(f, "cpu"));
			tab_cell(t, "%s", jstr(f, "fuse_queue"));
			tab_cell(t, "%s", jstr(f, "node"));
			tab_cell(t, "%s", jstr(f, "reactor"));
			tab_cell(t, "%s", jstr(f, "reactor_cpu"));
			tab_cell(t, "%s", q ? jstr(q, "controller") : "-");
			tab_cell(t, "%s", q ? jstr(q, "qid") : "-");
			tab_cell(t, "%s", q && jget(q, "vector") ? jstr(q, "vector") : "-");
			shown = 1;
		}
	}
	tab_out(t);
}

/* How the reactors wait in mode m, for the line above the queues. */
static const char *mode_words(const char *m)
{
	if (!strcmp(m, "poll"))
		return "always polled";
	if (!strcmp(m, "interrupt"))
		return "asleep until a completion's interrupt";
	if (!strcmp(m, "hybrid"))
		return "polled while commands are in flight, asleep when none are (no interrupt "
		       "needed)";
	return "?";
}

static void show_queues(json_object *r)
{
	static const struct tab_col cols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0}, {"CPU", TAB_RIGHT, 0, 0},   {"NODE", TAB_RIGHT, 0, 0},
	    {"CONTROLLER", TAB_LEFT, 0, 0}, {"QID", TAB_RIGHT, 0, 0}, {"VECTOR", TAB_RIGHT, 0, 0},
	    {"DEPTH", TAB_RIGHT, 0, 0},  {"INFLIGHT", TAB_RIGHT, 0, 0},
	};
	json_object *qs = jget(r, "queues");
	struct tab *t = tab_new(cols, NCOLS(cols));
	size_t vec = 0;

	/* the vectors themselves, not the mode's name, say whether a queue
	 * has an interrupt: hybrid mode wires none */
	for (size_t i = 0; i < jlen(qs); i++)
		vec += jget(jidx(qs, i), "vector") != NULL;
	printf("mode %s: %s; interrupt vectors on %zu of %zu I/O queues\n\n", jstr(r, "mode"),
	       mode_words(jstr(r, "mode")), vec, jlen(qs));
	for (size_t i = 0; i < jlen(qs); i++) {
		json_object *q = jidx(qs, i);

		tab_cell(t, "%s", jstr(q, "reactor"));
		tab_cell(t, "%s", jstr(q, "cpu"));
		tab_cell(t, "%s", jstr(q, "node"));
		tab_cell(t, "%s", jstr(q, "controller"));
		tab_cell(t, "%s", jstr(q, "qid"));
		tab_cell(t, "%s", jget(q, "vector") ? jstr(q, "vector") : "-");
		tab_cell(t, "%s", jstr(q, "depth"));
		tab_cell(t, "%s", jstr(q, "inflight"));
	}
	tab_out(t);
	show_fuse_queues(r, qs);
}

static void show_namespaces(json_object *r)
{
	static const struct tab_col cols[] = {
	    {"NAME", TAB_LEFT, 0, 0}, {"CONTROLLER", TAB_LEFT, 0, 0}, {"STATE", TAB_LEFT, 0, 0},
	    {"NSID", TAB_RIGHT, 0, 0}, {"SIZE", TAB_RIGHT, 0, 0},     {"LBA", TAB_RIGHT, 0, 0},
	    {"PATH", TAB_LEFT, 0, 2},
	};
	json_object *ns = jget(r, "namespaces");
	struct tab *t = tab_new(cols, NCOLS(cols));
	char sz[32];

	for (size_t i = 0; i < jlen(ns); i++) {
		json_object *n = jidx(ns, i);

		tab_cell(t, "%s", jstr(n, "name"));
		tab_cell(t, "%s", jstr(n, "controller"));
		tab_cell(t, "%s", jstr(n, "state"));
		tab_cell(t, "%s", jstr(n, "nsid"));
		tab_cell(t, "%s", human_size(ju64(n, "size"), sz, sizeof(sz)));
		tab_cell(t, "%s", jstr(n, "lba_size"));
		tab_cell(t, "%s", jstr(n, "path"));
	}
	tab_out(t);
}

static void show_list(const char *label, json_object *r, const char *key, const char *raw)
{
	json_object *a = jget(r, key);

	printf("%-18s %s (", label, jstr(r, raw));
	for (size_t i = 0; i < jlen(a); i++)
		printf("%s%s", i ? " " : "", json_object_get_string(jidx(a, i)));
	printf(")\n");
}

static void show_identify(json_object *r)
{
	json_object *ns = jget(r, "namespaces");
	uint64_t mdts = ju64(r, "mdts");
	char sz[32];

	printf("%-18s %s\n", "controller", jstr(r, "controller"));
	printf("%-18s %s\n", "model", jstr(r, "model"));
	printf("%-18s %s\n", "serial", jstr(r, "serial"));
	printf("%-18s %s\n", "firmware", jstr(r, "firmware"));
	printf("%-18s %s\n", "vendor id", jstr(r, "vid"));
	printf("%-18s %s\n", "version", jstr(r, "version"));
	printf("%-18s %s\n", "CAP", jstr(r, "cap"));
	if (mdts)
		printf("%-18s %llu (max transfer %s)\n", "MDTS", (unsigned long long)mdts,
		       human_size(ju64(r, "max_transfer"), sz, sizeof(sz)));
	else
		printf("%-18s 0 (no limit; the engine uses %s)\n", "MDTS",
		       human_size(ju64(r, "max_transfer"), sz, sizeof(sz)));
	printf("%-18s %s\n", "max queue entries", jstr(r, "max_queue_entries"));
	printf("%-18s %s\n", "I/O queues granted", jstr(r, "io_queues_granted"));
	printf("%-18s %s\n", "MSI-X vectors", jstr(r, "vectors"));
	printf("%-18s %s\n", "volatile cache",
	       json_object_get_boolean(jget(r, "vwc")) ? "yes (fsync sends Flush)" : "no");
	show_list("ONCS", r, "oncs_decoded", "oncs");
	show_list("OACS", r, "oacs_decoded", "oacs");
	printf("%-18s %s (%s)\n", "SGLS", jstr(r, "sgls"), jstr(r, "sgls_decoded"));
	printf("%-18s %s\n", "NN", jstr(r, "nn"));
	printf("\n%5s %14s %6s %12s  %s\n", "NSID", "BLOCKS", "LBA", "SIZE", "DEALLOC-ZEROES");
	for (size_t i = 0; i < jlen(ns); i++) {
		json_object *n = jidx(ns, i);

		printf("%5s %14s %6s %12s  %s\n", jstr(n, "nsid"), jstr(n, "blocks"),
		       jstr(n, "lba_size"), human_size(ju64(n, "size"), sz, sizeof(sz)),
		       json_object_get_boolean(jget(n, "dealloc_zeroes")) ? "yes" : "no");
	}
}

/* ---- log pages and list, laid out as nvme-cli prints them ---- */

static void show_kv(const char *k, const char *v)
{
	printf("%-40s: %s\n", k, v);
}

static void show_ku(const char *k, json_object *r, const char *f)
{
	char b[32];

	snprintf(b, sizeof(b), "%llu", (unsigned long long)ju64(r, f));
	show_kv(k, b);
}

static void show_kelvin(const char *k, json_object *o)
{
	char b[64];

	snprintf(b, sizeof(b), "%lld \u00b0C (%llu K)",
	         (long long)json_object_get_int64(jget(o, "temperature_c")),
	         (unsigned long long)ju64(o, "temperature"));
	show_kv(k, b);
}

static void show_pct(const char *k, json_object *r, const char *f)
{
	char b[32];

	snprintf(b, sizeof(b), "%llu%%", (unsigned long long)ju64(r, f));
	show_kv(k, b);
}

static void show_units(const char *k, json_object *r, const char *f, const char *fb)
{
	char b[96], sz[32];

	snprintf(b, sizeof(b), "%llu (%s)", (unsigned long long)ju64(r, f),
	         human_size(ju64(r, fb), sz, sizeof(sz)));
	show_kv(k, b);
}

static void show_smart_log(json_object *r)
{
	json_object *ts = jget(r, "temperature_sensors");

	printf("Smart Log for NVME device:%s namespace-id:ffffffff\n", jstr(r, "controller"));
	show_ku("critical_warning", r, "critical_warning");
	show_kelvin("temperature", r);
	show_pct("available_spare", r, "avail_spare");
	show_pct("available_spare_threshold", r, "spare_thresh");
	show_pct("percentage_used", r, "percent_used");
	show_ku("endurance group critical warning summary", r,
	        "endurance_grp_critical_warning_summary");
	show_units("Data Units Read", r, "data_units_read", "data_units_read_bytes");
	show_units("Data Units Written", r, "data_units_written", "data_units_written_bytes");
	show_ku("host_read_commands", r, "host_read_commands");
	show_ku("host_write_commands", r, "host_write_commands");
	show_ku("controller_busy_time", r, "controller_busy_time");
	show_ku("power_cycles", r, "power_cycles");
	show_ku("power_on_hours", r, "power_on_hours");
	show_ku("unsafe_shutdowns", r, "unsafe_shutdowns");
	show_ku("media_errors", r, "media_errors");
	show_ku("num_err_log_entries", r, "num_err_log_entries");
	show_ku("Warning Temperature Time", r, "warning_temp_time");
	show_ku("Critical Composite Temperature Time", r, "critical_comp_time");
	for (size_t i = 0; i < jlen(ts); i++) {
		json_object *t = jidx(ts, i);
		char k[32];

		snprintf(k, sizeof(k), "Temperature Sensor %llu",
		         (unsigned long long)ju64(t, "sensor"));
		show_kelvin(k, t);
	}
	if (json_object_get_boolean(jget(r, "saturated")))
		printf("(a 128-bit counter exceeds 2^64-1: shown as 18446744073709551615)\n");
}

static void show_error_log(json_object *r)
{
	json_object *es = jget(r, "errors");

	printf("Error Log Entries for device:%s entries:%llu\n", jstr(r, "controller"),
	       (unsigned long long)jlen(es));
	printf(".................\n");
	for (size_t i = 0; i < jlen(es); i++) {
		json_object *e = jidx(es, i);
		char b[96];

		printf(" Entry[%2zu]\n", i);
		printf(".................\n");
		show_ku("error_count", e, "error_count");
		show_ku("sqid", e, "sqid");
		snprintf(b, sizeof(b), "%#llx", (unsigned long long)ju64(e, "cmdid"));
		show_kv("cmdid", b);
		snprintf(b, sizeof(b), "%#llx, %s", (unsigned long long)ju64(e, "status_field"),
		         jstr(e, "status"));
		show_kv("status_field", b);
		snprintf(b, sizeof(b), "%#llx", (unsigned long long)ju64(e, "parm_error_location"));
		show_kv("phase_tag parm_err_loc", b);
		show_ku("lba", e, "lba");
		show_ku("nsid", e, "nsid");
		show_ku("vs", e, "vs");
		show_ku("trtype", e, "trtype");
		show_ku("cs", e, "cs");
		show_ku("trtype_spec_info", e, "trtype_spec_info");
		printf(".................\n");
	}
}

static void show_fw_log(json_object *r)
{
	json_object *sl = jget(r, "slots");

	printf("Firmware Log for device:%s\n", jstr(r, "controller"));
	printf("afi  : active slot %llu, next reset slot %llu\n",
	       (unsigned long long)ju64(r, "active_slot"), (unsigned long long)ju64(r, "next_slot"));
	for (size_t i = 0; i < jlen(sl); i++)
		printf("frs%llu : %s\n", (unsigned long long)ju64(jidx(sl, i), "slot"),
		       jstr(jidx(sl, i), "revision"));
}

/* as nvme-cli effects-log -H: one line per supported opcode */
static void show_effects(json_object *arr, const char *tag)
{
	for (size_t i = 0; i < jlen(arr); i++) {
		json_object *e = jidx(arr, i);
		char id[16];

		snprintf(id, sizeof(id), "%s%llu", tag, (unsigned long long)ju64(e, "opcode"));
		printf("%-8s [%-32.32s] %08llx  CSUPP%c LBCC%c NCC%c NIC%c CCC%c CSE=%llu\n", id,
		       jstr(e, "name"), (unsigned long long)ju64(e, "raw"),
		       jbool(e, "csupp") ? '+' : '-', jbool(e, "lbcc") ? '+' : '-',
		       jbool(e, "ncc") ? '+' : '-', jbool(e, "nic") ? '+' : '-',
		       jbool(e, "ccc") ? '+' : '-', (unsigned long long)ju64(e, "cse"));
	}
}

static void show_effects_log(json_object *r)
{
	printf("Commands Supported and Effects Log for device:%s\n", jstr(r, "controller"));
	printf("Admin Command Set\n");
	show_effects(jget(r, "admin"), "ACS");
	printf("\nNVM Command Set I/O Commands\n");
	show_effects(jget(r, "io"), "IOCS");
}

static void show_ctrl_list(json_object *r)
{
	static const struct tab_col cols[] = {
	    {"Node", TAB_LEFT, 0, 0},   {"SN", TAB_LEFT, 0, 0},     {"Model", TAB_LEFT, 0, 0},
	    {"NS", TAB_RIGHT, 0, 0},    {"Usage", TAB_RIGHT, 0, 0}, {"Format", TAB_LEFT, 0, 0},
	    {"FW Rev", TAB_LEFT, 0, 0}, {"State", TAB_LEFT, 0, 0},  {"Transport", TAB_LEFT, 0, 0},
	};
	json_object *cs = jget(r, "controllers");
	struct tab *t = tab_new(cols, NCOLS(cols));
	char sz[32];

	for (size_t i = 0; i < jlen(cs); i++) {
		json_object *c = jidx(cs, i);
		bool pci = jget(c, "device") && strcmp(jstr(c, "transport"), "sim");

		tab_cell(t, "%s", jstr(c, "name"));
		tab_cell(t, "%s", jstr(c, "serial"));
		tab_cell(t, "%s", jstr(c, "model"));
		tab_cell(t, "%s", jstr(c, "namespaces"));
		tab_cell(t, "%s", human_size(ju64(c, "size"), sz, sizeof(sz)));
		tab_cell(t, "%s", jstr(c, "lba_format"));
		tab_cell(t, "%s", jstr(c, "firmware"));
		tab_cell(t, "%s", jstr(c, "state"));
		tab_cell(t, "%s%s%s", jstr(c, "transport"), pci ? " " : "",
		         pci ? jstr(c, "device") : "");
	}
	tab_out(t);
}

static void show_text(json_object *r)
{
	const char *t = jstr(r, "text");

	fputs(t, stdout);
	if (*t && t[strlen(t) - 1] != '\n')
		putchar('\n');
}

/* ---- stats -w: rates over an interval ---- */

/* Completions and passes that reaped any, from the cpl_per_pass histogram
 * (the last bucket, >= 16, counts as 16). */
static void cpp_sums(json_object *q, double *cpl, double *passes)
{
	json_object *h = jget(q, "cpl_per_pass");

	*cpl = *passes = 0;
	for (size_t i = 1; i < jlen(h); i++) {
		double n = (double)json_object_get_uint64(jidx(h, i));

		*passes += n;
		*cpl += n * (double)i;
	}
}

static void rate_row(struct tab *t, const char *reactor, const char *ctrl, const char *qid,
                     json_object *a, json_object *b, double dt)
{
	double dcpl = (double)(ju64(b, "completed") - ju64(a, "completed"));
	double drd = (double)(ju64(b, "bytes_read") - ju64(a, "bytes_read"));
	double dwr = (double)(ju64(b, "bytes_written") - ju64(a, "bytes_written"));
	double ddb = (double)(ju64(b, "sq_doorbells") + ju64(b, "cq_doorbells") -
	                      ju64(a, "sq_doorbells") - ju64(a, "cq_doorbells"));
	uint64_t derr = ju64(jget(b, "errors"), "total") - ju64(jget(a, "errors"), "total");
	uint64_t dbog = ju64(b, "bogus_cqes") - ju64(a, "bogus_cqes");
	uint64_t dbud = ju64(b, "budget_exhausted") - ju64(a, "budget_exhausted");
	double c1, p1, c2, p2;
	char cpp[16], db[16];

	cpp_sums(a, &c1, &p1);
	cpp_sums(b, &c2, &p2);
	put_num(cpp, sizeof(cpp), p2 > p1 ? (c2 - c1) / (p2 - p1) : NAN, 2);
	put_num(db, sizeof(db), dcpl > 0 ? ddb / dcpl : NAN, 2);
	tab_cell(t, "%s", reactor);
	tab_cell(t, "%s", ctrl);
	tab_cell(t, "%s", qid);
	tab_cell(t, "%.0f", dcpl / dt);
	tab_cell(t, "%.2f", drd / dt / 1048576.0);
	tab_cell(t, "%.2f", dwr / dt / 1048576.0);
	tab_cell(t, "%s", cpp);
	tab_cell(t, "%s", db);
	tab_cell(t, "%llu", (unsigned long long)dbud);
	tab_cell(t, "%llu", (unsigned long long)derr);
	tab_cell(t, "%llu", (unsigned long long)dbog);
	tab_cell(t, "%s", jget(b, "inflight") ? jstr(b, "inflight") : "");
}

/* The qpair of b's reactor ri, position k, matched in a by controller and qid. */
static json_object *find_qpair(json_object *snap, const char *ctrl, uint64_t qid)
{
	json_object *rs = jget(snap, "reactors");

	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *qs = jget(jidx(rs, i), "qpairs");

		for (size_t k = 0; k < jlen(qs); k++) {
			json_object *q = jidx(qs, k);

			if (!strcmp(jstr(q, "controller"), ctrl) && ju64(q, "qid") == qid)
				return q;
		}
	}
	return NULL;
}

static void show_rates(json_object *a, json_object *b)
{
	static const struct tab_col cols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0},   {"CONTROLLER", TAB_LEFT, 0, 0}, {"QID", TAB_RIGHT, 0, 0},
	    {"IOPS", TAB_RIGHT, 0, 0},     {"rMiB/s", TAB_RIGHT, 0, 0},    {"wMiB/s", TAB_RIGHT, 0, 0},
	    {"CPL/PASS", TAB_RIGHT, 0, 0}, {"DB/IO", TAB_RIGHT, 0, 0},     {"BUDGET", TAB_RIGHT, 0, 0},
	    {"ERRORS", TAB_RIGHT, 0, 0},   {"BOGUS", TAB_RIGHT, 0, 0},     {"INFLIGHT", TAB_RIGHT, 0, 0},
	};
	struct tab *t = tab_new(cols, NCOLS(cols));
	json_object *rs = jget(b, "reactors");
	double dt = jdbl(b, "time") - jdbl(a, "time");
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	if (!(dt > 0))
		dt = 1e-9;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%s  interval %.3f s\n", when, dt);
	for (size_t i = 0; i < jlen(rs); i++) {
		json_object *qs = jget(jidx(rs, i), "qpairs");

		for (size_t k = 0; k < jlen(qs); k++) {
			json_object *q = jidx(qs, k), *p;

			p = find_qpair(a, jstr(q, "controller"), ju64(q, "qid"));
			if (p)
				rate_row(t, jstr(q, "reactor"), jstr(q, "controller"),
				         jstr(q, "qid"), p, q, dt);
		}
	}
	rate_row(t, "total", "", "", jget(a, "totals"), jget(b, "totals"), dt);
	tab_out(t);
	putchar('\n');
	fflush(stdout);
}

static int watch_stats(const char *sock, double interval, bool json)
{
	json_object *prev = NULL, *cur;
	int ret;

	ctl_catch_signals();
	ret = ctl_call(sock, "stats", NULL, &prev);
	if (ret)
		return ret;
	while (!stop_flag) {
		ctl_nap(interval);
		if (stop_flag)
			break;
		cur = NULL;
		ret = ctl_call(sock, "stats", NULL, &cur);
		if (ret || !cur)
			break;
		if (json)
			print_json(cur);
		else
			show_rates(prev, cur);
		json_object_put(prev);
		prev = cur;
	}
	json_object_put(prev);
	return stop_flag ? EXIT_OK : ret;
}

/* ---- inject and attach ---- */

/* A decimal (or, with base 0, also 0x hex) number <= max; -1 if not one. */
static int parse_num(const char *s, int base, unsigned long long max, unsigned long long *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, base);
	return errno || *end || *out > max ? -1 : 0;
}

/* A size: bytes, or a number with K, M, G or T (powers of 1024), > 0 and
 * <= 2^63 - 1; -1 if not one. */
static int parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (*end) {
		const char *u = strchr("KMGT", *end == 'k' ? 'K' : *end);
		if (!u || !*u || end[1])
			return -1;
		shift = 10u * (unsigned)(u - "KMGT" + 1);
	}
	if (v == 0 || v > (unsigned long long)INT64_MAX >> shift)
		return -1;
	*out = v << shift;
	return 0;
}

/* The inject request for CTRL FAULT ARGS..., or an exit code (usage). */
static int inject_request(const char *ctrl, int argc, char **argv, json_object **out)
{
	static const struct {
		const char *fault;
		int nargs, nopt; /* arguments required, and optional after them */
		const char *args;
	} faults[] = {
	    {"delay", 1, 0, "MS"},       {"hang", 0, 0, ""},   {"unhang", 0, 0, ""},
	    {"hang-loop", 0, 0, ""},
	    {"cfs", 0, 0, ""},           {"stuck", 0, 0, ""},  {"remove", 0, 0, ""},
	    {"powerfail", 0, 1, "[SEED]"},
	    {"fail", 2, 0, "N STATUS"},  {"lose", 1, 0, "N"},  {"clear", 0, 0, ""},
	    {"warn", 1, 0, "spare|temperature|reliability|readonly|backup|clear"},
	    {"ns-add", 2, 0, "NSID SIZE"}, {"ns-remove", 1, 0, "NSID"},
	    {"ns-resize", 2, 0, "NSID SIZE"},
	    {"misdirect-write", 2, 0, "N BLOCKS"}, {"misdirect-read", 2, 0, "N BLOCKS"},
	    {"corrupt", 2, 1, "NSID LBA [BYTE]"},
	};
	const char *fault = argc > 0 ? argv[0] : NULL;
	unsigned long long n, st;
	json_object *req;
	size_t k;

	if (!fault)
		return usage_error("%s", "inject needs a CONTROLLER and a FAULT (delay MS, hang, "
		                         "hang-loop, unhang, cfs, stuck, remove, powerfail [SEED], "
		                         "fail N STATUS, lose N, clear, warn WHAT, ns-add NSID SIZE, "
		                         "ns-remove NSID, ns-resize NSID SIZE, misdirect-write N "
		                         "BLOCKS, misdirect-read N BLOCKS, corrupt NSID LBA [BYTE])");
	for (k = 0; k < sizeof(faults) / sizeof(faults[0]); k++)
		if (!strcmp(fault, faults[k].fault))
			break;
	if (k == sizeof(faults) / sizeof(faults[0]))
		return usage_error("unknown fault '%s' (delay MS, hang, hang-loop, unhang, cfs, stuck, "
		                   "remove, powerfail [SEED], fail N STATUS, lose N, clear, warn WHAT, "
		                   "ns-add NSID SIZE, ns-remove NSID, ns-resize NSID SIZE, "
		                   "misdirect-write N BLOCKS, misdirect-read N BLOCKS, corrupt NSID "
		                   "LBA [BYTE])",
		                   fault);
	if (argc - 1 < faults[k].nargs || argc - 1 > faults[k].nargs + faults[k].nopt) {
		fprintf(stderr, "%s: inject %s takes %s%s\nTry '%s --help'.\n", prog, fault,
		        faults[k].nargs + faults[k].nopt ? "" : "no argument", faults[k].args,
		        prog);
		return EXIT_USAGE;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string("inject"));
	json_object_object_add(req, "controller", json_object_new_string(ctrl));
	json_object_object_add(req, "fault", json_object_new_string(fault));
	if (!strcmp(fault, "delay")) {
		if (parse_num(argv[1], 10, 3600000, &n) < 0) {
			json_object_put(req);
			return usage_error("delay %s: milliseconds from 0 to 3600000", argv[1]);
		}
		json_object_object_add(req, "ms", json_object_new_int64((int64_t)n));
	} else if (!strcmp(fault, "fail") || !strcmp(fault, "lose")) {
		if (parse_num(argv[1], 10, UINT32_MAX, &n) < 0) {
			json_object_put(req);
			return usage_error("%s: N is a count of commands", argv[1]);
		}
		json_object_object_add(req, "count", json_object_new_int64((int64_t)n));
		if (fault[0] == 'f') {
			if (parse_num(argv[2], 0, 0x7fff, &st) < 0 || st == 0) {
				json_object_put(req);
				return usage_error("STATUS %s: an NVMe status (SCT << 8 | SC, "
				                   "| 0x4000 for do-not-retry), 1 to 0x7fff, e.g. "
				                   "0x281 (unrecovered read error)",
				                   argv[2]);
			}
			json_object_object_add(req, "status", json_object_new_int64((int64_t)st));
		}
	} else if (!strcmp(fault, "warn")) {
		json_object_object_add(req, "warning", json_object_new_string(argv[1]));
	} else if (!strncmp(fault, "ns-", 3)) {
		if (parse_num(argv[1], 10, 16, &n) < 0 || n == 0) {
			json_object_put(req);
			return usage_error("NSID %s: a namespace ID, 1 to 16", argv[1]);
		}
		json_object_object_add(req, "nsid", json_object_new_int64((int64_t)n));
		if (argc > 2) {
			if (parse_size(argv[2], &st) < 0) {
				json_object_put(req);
				return usage_error("SIZE %s: bytes, or a number with K, M, G or T "
				                   "(powers of 1024)",
				                   argv[2]);
			}
			json_object_object_add(req, "bytes", json_object_new_int64((int64_t)st));
		}
	} else if (!strncmp(fault, "misdirect-", 10)) {
		if (parse_num(argv[1], 10, UINT32_MAX, &n) < 0 || n == 0) {
			json_object_put(req);
			return usage_error("%s: N is a count of commands, at least 1", argv[1]);
		}
		if (parse_num(argv[2], 10, INT32_MAX, &st) < 0 || st == 0) {
			json_object_put(req);
			return usage_error("BLOCKS %s: how many blocks away the command lands, 1 to "
			                   "2^31-1",
			                   argv[2]);
		}
		json_object_object_add(req, "count", json_object_new_int64((int64_t)n));
		json_object_object_add(req, "blocks", json_object_new_int64((int64_t)st));
	} else if (!strcmp(fault, "corrupt")) {
		if (parse_num(argv[1], 10, 16, &n) < 0 || n == 0) {
			json_object_put(req);
			return usage_error("NSID %s: a namespace ID, 1 to 16", argv[1]);
		}
		if (parse_num(argv[2], 10, INT64_MAX, &st) < 0) {
			json_object_put(req);
			return usage_error("LBA %s: a block number of the namespace", argv[2]);
		}
		json_object_object_add(req, "nsid", json_object_new_int64((int64_t)n));
		json_object_object_add(req, "lba", json_object_new_int64((int64_t)st));
		if (argc > 3) {
			if (parse_num(argv[3], 10, 65535, &n) < 0) {
				json_object_put(req);
				return usage_error("BYTE %s: the byte of the block to change, 0 to "
				                   "65535",
				                   argv[3]);
			}
			json_object_object_add(req, "byte", json_object_new_int64((int64_t)n));
		}
	} else if (!strcmp(fault, "powerfail") && argc > 1) {
		if (parse_num(argv[1], 0, INT64_MAX, &n) < 0) {
			json_object_put(req);
			return usage_error("SEED %s: 0 (every write not durable is lost) or a "
			                   "number up to 2^63-1 that picks which blocks keep "
			                   "their newest data",
			                   argv[1]);
		}
		json_object_object_add(req, "seed", json_object_new_int64((int64_t)n));
	}
	*out = req;
	return EXIT_OK;
}

static void show_inject(json_object *r)
{
	const char *f = jstr(r, "fault");

	printf("%s: %s", jstr(r, "controller"), f);
	if (!strcmp(f, "delay"))
		printf(" %s ms", jstr(r, "ms"));
	else if (!strcmp(f, "fail"))
		printf(" next %s command(s) with status 0x%llx", jstr(r, "count"),
		       (unsigned long long)ju64(r, "status"));
	else if (!strcmp(f, "lose"))
		printf(" next %s completion(s)", jstr(r, "count"));
	else if (!strcmp(f, "warn"))
		printf(" %s", jstr(r, "warning"));
	else if (!strcmp(f, "ns-remove"))
		printf(" namespace %s", jstr(r, "nsid"));
	else if (!strncmp(f, "ns-", 3))
		printf(" namespace %s, %s bytes", jstr(r, "nsid"), jstr(r, "bytes"));
	else if (!strcmp(f, "powerfail"))
		printf(" (seed %s: %s)", jstr(r, "seed"),
		       ju64(r, "seed") ? "each write not durable lost or kept as the seed says"
		                       : "every write not durable lost");
	printf(" injected; controller %s\n", jstr(r, "state"));
}

static void show_attach(json_object *r)
{
	printf("%s: %s\n", jstr(r, "controller"), jstr(r, "state"));
}

static void show_detach(json_object *r)
{
	printf("%s: detached, %s file%s gone, %s\n", jstr(r, "controller"), jstr(r, "files"),
	       ju64(r, "files") == 1 ? "" : "s", jstr(r, "state"));
}

#define ATTACH_WAIT_S 300
#define ATTACH_POLL_MS 200

/* attach --wait: poll status until ctrl's attach is live or failed.  The
 * last status reply in *rep; EXIT_OK when live. */
static int attach_wait(const char *sock, const char *ctrl, json_object **rep)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		json_object *st = NULL, *cs;
		const char *at = NULL;
		int ret = ctl_call(sock, "status", NULL, &st);

		if (ret)
			return ret;
		cs = jget(st, "controllers");
		for (size_t i = 0; cs && i < json_object_array_length(cs); i++) {
			json_object *c = json_object_array_get_idx(cs, i);

			if (!strcmp(jstr(c, "name"), ctrl)) {
				at = jget(c, "attach") ? jstr(c, "attach") : "";
				if (!strcmp(at, "live") || !strcmp(at, "failed")) {
					json_object_get(c);
					json_object_put(st);
					*rep = c;
					if (!strcmp(at, "live"))
						return EXIT_OK;
					fprintf(stderr, "%s: attach %s failed: %s\n", prog, ctrl,
					        jstr(c, "attach_error"));
					return EXIT_DAEMON;
				}
			}
		}
		json_object_put(st);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= ATTACH_WAIT_S || stop_flag) {
			fprintf(stderr, "%s: attach %s: still %s after %d s\n", prog, ctrl,
			        at ? at : "unknown", ATTACH_WAIT_S);
			return EXIT_DAEMON;
		}
		poll(NULL, 0, ATTACH_POLL_MS);
	}
}

/* ---- main ---- */

static int socket_from_config(const char *conf, char *out, size_t len)
{
	struct cfg *cfg = NULL;
	/* the socket's path is all it needs: the text alone, not the paths
	 * the daemon checks at its start (cfg_load) */
	int ret = cfg_load_syntax(conf, &cfg, stderr);

	if (ret < 0) {
		fprintf(stderr, "%s: %s: cannot take admin_socket from it: %s\n", prog, conf,
		        strerror(-ret));
		return -1;
	}
	snprintf(out, len, "%s", cfg->daemon.admin_socket);
	cfg_free(cfg);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"socket", required_argument, NULL, 's'}, {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},         {"watch", required_argument, NULL, 'w'},
	    {"prometheus", no_argument, NULL, 'p'},   {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},      {"wait", no_argument, NULL, 'W'},
	    {"extended", no_argument, NULL, 'x'},     {NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *conf = NULL, *cmd, *wire, *ctrl = NULL;
	char sockbuf[PATH_MAX];
	bool json = false, prom = false, wait = false, ext = false, skip_first = false, stamp = false;
	const char **names = NULL;
	size_t nr_names = 0;
	double watch = 0, interval = 0;
	unsigned long long count = 0;
	json_object *rep = NULL;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "s:c:jw:phVxyt", lopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			sock = optarg;
			break;
		case 'c':
			conf = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'p':
			prom = true;
			break;
		case 'w': {
			char *end;

			errno = 0;
			watch = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(watch >= 0.1 && watch <= 86400))
				return usage_error("-w %s: seconds from 0.1 to 86400", optarg);
			break;
		}
		case 'W':
			wait = true;
			break;
		case 'x':
			ext = true;
			break;
		case 'y':
			skip_first = true;
			break;
		case 't':
			stamp = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("nvmefsctl %s\n", NVMEFS_VERSION);
			return EXIT_OK;
		default:
			fprintf(stderr, "Try '%s --help'.\n", prog);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");
	cmd = argv[optind++];
	if (sock && conf)
		return usage_error("%s", "-s and -c both name the socket: give one");
	if (optind < argc && !strcmp(argv[optind], "--wait")) { /* attach --wait CTRL */
		wait = true;
		optind++;
	}
	if (wait && strcmp(cmd, "attach"))
		return usage_error("%s", "--wait goes with attach only");
	if (!strcmp(cmd, "identify") || !strcmp(cmd, "attach") || !strcmp(cmd, "inject") ||
	    !strcmp(cmd, "detach") || !strcmp(cmd, "smart-log") || !strcmp(cmd, "error-log") ||
	    !strcmp(cmd, "fw-log") || !strcmp(cmd, "effects-log")) {
		if (optind >= argc)
			return usage_error("%s needs a CONTROLLER name", cmd);
		ctrl = argv[optind++];
	}
	if (!strcmp(cmd, "inject")) {
		ret = inject_request(ctrl, argc - optind, argv + optind, &rep);
		if (ret)
			return ret;
		optind = argc;
	}
	if (optind < argc && !strcmp(argv[optind], "--wait") && !strcmp(cmd, "attach")) {
		wait = true; /* attach CTRL --wait */
		optind++;
	}
	if (!strcmp(cmd, "iostat")) {
		/* [NAME...] before [INTERVAL [COUNT]], as iostat's devices: a
		 * namespace's name is never a number (it ends in n<nsid>) */
		names = calloc((size_t)(argc - optind) + 1, sizeof(*names));
		if (!names) {
			fprintf(stderr, "%s: out of memory\n", prog);
			return EXIT_DAEMON;
		}
		while (optind < argc) {
			char *end;

			errno = 0;
			(void)strtod(argv[optind], &end);
			if (end != argv[optind] && !*end)
				break;
			names[nr_names++] = argv[optind++];
		}
	}
	if (!strcmp(cmd, "iostat") || !strcmp(cmd, "top")) {
		/* [INTERVAL [COUNT]], as iostat and top -d -n take them */
		char *end;

		if (optind < argc) {
			errno = 0;
			interval = strtod(argv[optind], &end);
			if (errno || end == argv[optind] || *end ||
			    !(interval >= 0.1 && interval <= 86400))
				return usage_error("INTERVAL %s: seconds from 0.1 to 86400",
				                   argv[optind]);
			optind++;
		}
		if (optind < argc) {
			if (parse_num(argv[optind], 10, 1000000000, &count) || !count)
				return usage_error("COUNT %s: a number from 1", argv[optind]);
			optind++;
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (ext && strcmp(cmd, "iostat"))
		return usage_error("%s", "-x goes with iostat only");
	if ((skip_first || stamp) && strcmp(cmd, "iostat"))
		return usage_error("%s", "-y and -t go with iostat only");
	if ((watch > 0 || prom) && strcmp(cmd, "stats"))
		return usage_error("%s", "-w and --prometheus go with stats only");
	if (watch > 0 && prom)
		return usage_error("%s", "-w and --prometheus do not go together");
	if (strcmp(cmd, "status") && strcmp(cmd, "stats") && strcmp(cmd, "queues") &&
	    strcmp(cmd, "namespaces") && strcmp(cmd, "identify") && strcmp(cmd, "config") &&
	    strcmp(cmd, "metrics") && strcmp(cmd, "attach") && strcmp(cmd, "inject") &&
	    strcmp(cmd, "smart-log") && strcmp(cmd, "error-log") && strcmp(cmd, "fw-log") &&
	    strcmp(cmd, "effects-log") && strcmp(cmd, "list") && strcmp(cmd, "restart") &&
	    strcmp(cmd, "detach") && strcmp(cmd, "iostat") && strcmp(cmd, "top"))
		return usage_error("unknown command '%s'", cmd);
	if (conf) {
		if (socket_from_config(conf, sockbuf, sizeof(sockbuf)) < 0)
			return EXIT_USAGE;
		sock = sockbuf;
	}
	if (!sock)
		sock = CTL_DEFAULT_SOCKET;

	if (watch > 0)
		return watch_stats(sock, watch, json);
	if (!strcmp(cmd, "iostat")) {
		struct io_iostat_opts io = {.extended = ext,
		                            .json = json,
		                            .skip_first = skip_first,
		                            .stamp = stamp,
		                            .names = names,
		                            .nr_names = nr_names};

		ret = io_iostat(sock, &io, interval, count);
		free(names);
		return ret;
	}
	if (!strcmp(cmd, "top"))
		return io_top(sock, interval > 0 ? interval : 1.0, count);
	wire = prom ? "metrics" : cmd;
	if (rep) { /* inject: the request is built */
		json_object *req = rep;

		rep = NULL;
		ret = ctl_exchange(sock, req, &rep);
	} else {
		ret = ctl_call(sock, wire, ctrl, &rep);
	}
	if (ret)
		return ret;
	if (wait) {
		json_object_put(rep);
		rep = NULL;
		ret = attach_wait(sock, ctrl, &rep);
		if (ret) {
			json_object_put(rep);
			return ret;
		}
		wire = "attach-wait";
	}
	if (json)
		print_json(rep);
	else if (!strcmp(wire, "attach-wait"))
		printf("%s: attached, %s\n", jstr(rep, "name"), jstr(rep, "state"));
	else if (!strcmp(wire, "status"))
		show_status(rep);
	else if (!strcmp(wire, "stats"))
		show_stats(rep);
	else if (!strcmp(wire, "queues"))
		show_queues(rep);
	else if (!strcmp(wire, "namespaces"))
		show_namespaces(rep);
	else if (!strcmp(wire, "identify"))
		show_identify(rep);
	else if (!strcmp(wire, "smart-log"))
		show_smart_log(rep);
	else if (!strcmp(wire, "error-log"))
		show_error_log(rep);
	else if (!strcmp(wire, "fw-log"))
		show_fw_log(rep);
	else if (!strcmp(wire, "effects-log"))
		show_effects_log(rep);
	else if (!strcmp(wire, "list"))
		show_ctrl_list(rep);
	else if (!strcmp(wire, "inject"))
		show_inject(rep);
	else if (!strcmp(wire, "attach"))
		show_attach(rep);
	else if (!strcmp(wire, "detach"))
		show_detach(rep);
	else if (!strcmp(wire, "restart"))
		printf("%s\n", jstr(rep, "restart"));
	else
		show_text(rep); /* config, metrics */
	json_object_put(rep);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: writing the output: %s\n", prog, strerror(errno));
		return EXIT_DAEMON;
	}
	return EXIT_OK;
}

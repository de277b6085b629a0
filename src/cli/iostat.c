/* iostat.c - per-namespace rates from two "stats" replies, and
 * `nvmefsctl iostat`. */
#include "iostat.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "table.h"

/* A histogram as the daemon sends it: [[upper bound ns, count], ...] in
 * ascending order, only non-empty buckets. */
struct hist {
	size_t n;
	uint64_t *upper, *count;
};

static void hist_free(struct hist *h)
{
	free(h->upper);
	free(h->count);
	memset(h, 0, sizeof(*h));
}

static int hist_read(json_object *arr, struct hist *h)
{
	size_t n = jlen(arr);

	memset(h, 0, sizeof(*h));
	if (!n)
		return 0;
	h->upper = calloc(n, sizeof(*h->upper));
	h->count = calloc(n, sizeof(*h->count));
	if (!h->upper || !h->count) {
		hist_free(h);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *p = jidx(arr, i);

		h->upper[i] = jlen(p) == 2 ? json_object_get_uint64(jidx(p, 0)) : 0;
		h->count[i] = jlen(p) == 2 ? json_object_get_uint64(jidx(p, 1)) : 0;
	}
	h->n = n;
	return 0;
}

/* cur's count of the bucket with upper bound u minus prev's. */
static uint64_t hist_delta(const struct hist *cur, size_t i, const struct hist *prev)
{
	uint64_t was = 0;

	for (size_t k = 0; prev && k < prev->n; k++)
		if (prev->upper[k] == cur->upper[i]) {
			was = prev->count[k];
			break;
		}
	return cur->count[i] > was ? cur->count[i] - was : 0;
}

/* The p-th percentile (0..100) in ms of what cur counts beyond prev: the
 * upper bound of the bucket that holds it (the engine's buckets are within
 * 12.5%); NAN when the interval counted nothing. */
static double hist_pct(const struct hist *cur, const struct hist *prev, double p)
{
	uint64_t total = 0, want, acc = 0;

	for (size_t i = 0; i < cur->n; i++)
		total += hist_delta(cur, i, prev);
	if (!total)
		return NAN;
	want = (uint64_t)ceil(p / 100.0 * (double)total);
	if (want < 1)
		want = 1;
	for (size_t i = 0; i < cur->n; i++) {
		acc += hist_delta(cur, i, prev);
		if (acc >= want)
			return cur->upper[i] / 1e6;
	}
	return cur->upper[cur->n - 1] / 1e6;
}

static json_object *find_ns(json_object *snap, const char *name)
{
	json_object *arr = jget(snap, "namespaces");

	for (size_t i = 0; i < jlen(arr); i++)
		if (!strcmp(jstr(jidx(arr, i), "name"), name))
			return jidx(arr, i);
	return NULL;
}

double io_interval(json_object *prev, json_object *cur)
{
	if (!prev)
		return jdbl(cur, "uptime_s");
	return jdbl(cur, "time") - jdbl(prev, "time");
}

/* The difference of counter k of op in cur and prev (0 if it went back:
 * a restarted daemon). */
static uint64_t dop(json_object *cur, json_object *prev, const char *op, const char *k)
{
	uint64_t a = ju64(jget(jget(cur, "ops"), op), k);
	uint64_t b = prev ? ju64(jget(jget(prev, "ops"), op), k) : 0;

	return a > b ? a - b : 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

static int pct_pair(json_object *c, json_object *p, const char *op, double *p50, double *p99)
{
	struct hist hc, hp;
	int rc = hist_read(jget(jget(jget(c, "ops"), op), "buckets"), &hc);

	if (rc)
		return rc;
	rc = hist_read(p ? jget(jget(jget(p, "ops"), op), "buckets") : NULL, &hp);
	if (rc) {
		hist_free(&hc);
		return rc;
	}
	*p50 = hist_pct(&hc, p ? &hp : NULL, 50);
	*p99 = hist_pct(&hc, p ? &hp : NULL, 99);
	hist_free(&hc);
	hist_free(&hp);
	return 0;
}

static const char *const kinds[] = {"read", "write", "flush", "punch", "zero"};

int io_ns_rates(json_object *prev, json_object *cur, struct io_ns_rates **out, size_t *n)
{
	json_object *arr = jget(cur, "namespaces");
	size_t nr = jlen(arr);
	double dt = io_interval(prev, cur);
	struct io_ns_rates *v;

	*out = NULL;
	*n = 0;
	v = calloc(nr ? nr : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (!(dt > 0))
		dt = NAN;
	for (size_t i = 0; i < nr; i++) {
		json_object *c = jidx(arr, i), *p = prev ? find_ns(prev, jstr(c, "name")) : NULL;
		struct io_ns_rates *r = &v[i];
		double cnt[5], byt[5], sum[5], all_sum = 0, all_cnt = 0, q = 0;
		uint64_t busy;

		snprintf(r->name, sizeof(r->name), "%s", jstr(c, "name"));
		snprintf(r->ctrl, sizeof(r->ctrl), "%s", jstr(c, "controller"));
		for (unsigned k = 0; k < 5; k++) {
			cnt[k] = (double)dop(c, p, kinds[k], "count");
			byt[k] = (double)dop(c, p, kinds[k], "bytes");
			sum[k] = (double)dop(c, p, kinds[k], "sum_ns");
			q += (double)dop(c, p, kinds[k], "queue_ns");
			r->errors += dop(c, p, kinds[k], "errors");
			all_sum += sum[k];
			all_cnt += cnt[k];
		}
		r->rs = cnt[0] / dt;
		r->ws = cnt[1] / dt;
		r->fs = cnt[2] / dt;
		r->ds = (cnt[3] + cnt[4]) / dt;
		r->rkbs = byt[0] / 1024 / dt;
		r->wkbs = byt[1] / 1024 / dt;
		r->dkbs = (byt[3] + byt[4]) / 1024 / dt;
		r->r_await = ratio(sum[0] / 1e6, cnt[0]);
		r->w_await = ratio(sum[1] / 1e6, cnt[1]);
		r->f_await = ratio(sum[2] / 1e6, cnt[2]);
		r->d_await = ratio((sum[3] + sum[4]) / 1e6, cnt[3] + cnt[4]);
		r->q_await = ratio(q / 1e6, all_cnt);
		r->rareq = ratio(byt[0] / 1024, cnt[0]);
		r->wareq = ratio(byt[1] / 1024, cnt[1]);
		r->aqu = all_sum / 1e9 / dt;
		busy = ju64(c, "busy_ns") - (p ? ju64(p, "busy_ns") : 0);
		r->util = fmin(100.0, (double)busy / 1e9 / dt * 100.0);
		r->inflight = ju64(c, "inflight");
		if (pct_pair(c, p, "read", &r->r_p50, &r->r_p99) ||
		    pct_pair(c, p, "write", &r->w_p50, &r->w_p99)) {
			free(v);
			return -ENOMEM;
		}
	}
	*out = v;
	*n = nr;
	return 0;
}

/* ---- nvmefsctl iostat ---- */

/* iostat prints 0.00 where the interval had no such request */
static void cell(struct tab *t, double v, int prec)
{
	tab_cell(t, "%.*f", prec, isfinite(v) ? v : 0.0);
}

static void print_text(const struct io_ns_rates *v, size_t n, const struct io_iostat_opts *o,
                       time_t when)
{
	static const struct tab_col basic[] = {
	    {"Device", TAB_LEFT, 0, 0},    {"r/s", TAB_RIGHT, 0, 0},     {"w/s", TAB_RIGHT, 0, 0},
	    {"rkB/s", TAB_RIGHT, 0, 0},    {"wkB/s", TAB_RIGHT, 0, 0},   {"r_await", TAB_RIGHT, 0, 0},
	    {"w_await", TAB_RIGHT, 0, 0},  {"aqu-sz", TAB_RIGHT, 0, 0},  {"%util", TAB_RIGHT, 0, 0},
	};
	static const struct tab_col ext[] = {
	    {"Device", TAB_LEFT, 0, 0},    {"r/s", TAB_RIGHT, 0, 0},      {"rkB/s", TAB_RIGHT, 0, 0},
	    {"r_await", TAB_RIGHT, 0, 0},  {"rareq-sz", TAB_RIGHT, 0, 0}, {"w/s", TAB_RIGHT, 0, 0},
	    {"wkB/s", TAB_RIGHT, 0, 0},    {"w_await", TAB_RIGHT, 0, 0},  {"wareq-sz", TAB_RIGHT, 0, 0},
	    {"d/s", TAB_RIGHT, 0, 0},      {"dkB/s", TAB_RIGHT, 0, 0},    {"d_await", TAB_RIGHT, 0, 0},
	    {"f/s", TAB_RIGHT, 0, 0},      {"f_await", TAB_RIGHT, 0, 0},  {"r_p99", TAB_RIGHT, 0, 0},
	    {"w_p99", TAB_RIGHT, 0, 0},    {"aqu-sz", TAB_RIGHT, 0, 0},   {"%util", TAB_RIGHT, 0, 0},
	};
	struct tab *t = o->extended ? tab_new(ext, sizeof(ext) / sizeof(ext[0]))
	                            : tab_new(basic, sizeof(basic) / sizeof(basic[0]));

	if (o->stamp) {
		/* when the figures came, ISO 8601 in local time (iostat -t
		 * with S_TIME_FORMAT=ISO) */
		struct tm tm;
		char b[40];

		if (!localtime_r(&when, &tm) || !strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S%z", &tm))
			snprintf(b, sizeof(b), "-");
		printf("\n%s", b);
	}
	putchar('\n');
	for (size_t i = 0; i < n; i++) {
		const struct io_ns_rates *r = &v[i];

		tab_cell(t, "%s", r->name);
		if (o->extended) {
			cell(t, r->rs, 2), cell(t, r->rkbs, 2), cell(t, r->r_await, 3);
			cell(t, r->rareq, 2), cell(t, r->ws, 2), cell(t, r->wkbs, 2);
			cell(t, r->w_await, 3), cell(t, r->wareq, 2), cell(t, r->ds, 2);
			cell(t, r->dkbs, 2), cell(t, r->d_await, 3), cell(t, r->fs, 2);
			cell(t, r->f_await, 3), cell(t, r->r_p99, 3), cell(t, r->w_p99, 3);
			cell(t, r->aqu, 2), cell(t, r->util, 2);
		} else {
			cell(t, r->rs, 2), cell(t, r->ws, 2), cell(t, r->rkbs, 2);
			cell(t, r->wkbs, 2), cell(t, r->r_await, 3), cell(t, r->w_await, 3);
			cell(t, r->aqu, 2), cell(t, r->util, 2);
		}
	}
	tab_print(t);
	tab_free(t);
}

static void jnum(json_object *o, const char *k, double v)
{
	json_object_object_add(o, k, isfinite(v) ? json_object_new_double(v) : NULL);
}

static void print_jsonl(json_object *prev, json_object *cur, const struct io_ns_rates *v,
                        size_t n)
{
	json_object *o = json_object_new_object(), *arr = json_object_new_array();

	jnum(o, "time", jdbl(cur, "time"));
	jnum(o, "interval_s", io_interval(prev, cur));
	json_object_object_add(o, "since_start", json_object_new_boolean(prev == NULL));
	for (size_t i = 0; i < n; i++) {
		const struct io_ns_rates *r = &v[i];
		json_object *d = json_object_new_object();

		json_object_object_add(d, "name", json_object_new_string(r->name));
		json_object_object_add(d, "controller", json_object_new_string(r->ctrl));
		jnum(d, "r_s", r->rs);
		jnum(d, "w_s", r->ws);
		jnum(d, "f_s", r->fs);
		jnum(d, "d_s", r->ds);
		jnum(d, "rkB_s", r->rkbs);
		jnum(d, "wkB_s", r->wkbs);
		jnum(d, "dkB_s", r->dkbs);
		jnum(d, "r_await_ms", r->r_await);
		jnum(d, "w_await_ms", r->w_await);
		jnum(d, "f_await_ms", r->f_await);
		jnum(d, "d_await_ms", r->d_await);
		jnum(d, "queue_await_ms", r->q_await);
		jnum(d, "r_p50_ms", r->r_p50);
		jnum(d, "r_p99_ms", r->r_p99);
		jnum(d, "w_p50_ms", r->w_p50);
		jnum(d, "w_p99_ms", r->w_p99);
		jnum(d, "rareq_sz_kB", r->rareq);
		jnum(d, "wareq_sz_kB", r->wareq);
		jnum(d, "aqu_sz", r->aqu);
		jnum(d, "util_pct", r->util);
		json_object_object_add(d, "inflight", json_object_new_uint64(r->inflight));
		json_object_object_add(d, "errors", json_object_new_uint64(r->errors));
		json_object_array_add(arr, d);
	}
	json_object_object_add(o, "namespaces", arr);
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

/* v reduced to the names asked for, in their order (n updated). */
static void pick(struct io_ns_rates *v, size_t *n, const struct io_iostat_opts *o)
{
	struct io_ns_rates *all;
	size_t k = 0;

	if (!o->nr_names || !(all = malloc(*n * sizeof(*all) + 1)))
		return;
	memcpy(all, v, *n * sizeof(*all));
	for (size_t i = 0; i < o->nr_names; i++)
		for (size_t j = 0; j < *n; j++)
			if (!strcmp(all[j].name, o->names[i])) {
				v[k++] = all[j];
				break;
			}
	*n = k;
	free(all);
}

/* Every name asked for is a namespace of cur; else an error naming it. */
static int names_known(json_object *cur, const struct io_iostat_opts *o)
{
	json_object *arr = jget(cur, "namespaces");

	for (size_t i = 0; i < o->nr_names; i++) {
		size_t j;

		for (j = 0; j < jlen(arr); j++)
			if (!strcmp(jstr(jidx(arr, j), "name"), o->names[i]))
				break;
		if (j == jlen(arr)) {
			fprintf(stderr, "%s: iostat: no namespace '%s'; the daemon serves:", prog,
			        o->names[i]);
			for (j = 0; j < jlen(arr); j++)
				fprintf(stderr, " %s", jstr(jidx(arr, j), "name"));
			fputc('\n', stderr);
			return EXIT_DAEMON;
		}
	}
	return EXIT_OK;
}

static int report(json_object *prev, json_object *cur, const struct io_iostat_opts *o)
{
	struct io_ns_rates *v;
	size_t n;

	if (!jget(cur, "namespaces")) {
		fprintf(stderr, "%s: the daemon keeps no namespace figures (no FUSE front end)\n",
		        prog);
		return EXIT_DAEMON;
	}
	if (io_ns_rates(prev, cur, &v, &n)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_DAEMON;
	}
	pick(v, &n, o);
	if (o->json)
		print_jsonl(prev, cur, v, n);
	else
		print_text(v, n, o, time(NULL));
	free(v);
	fflush(stdout);
	return EXIT_OK;
}

int io_iostat(const char *sock, const struct io_iostat_opts *o, double interval,
              unsigned long count)
{
	json_object *prev = NULL, *cur = NULL;
	unsigned long done = 0;
	int ret;

	ctl_catch_signals();
	ret = ctl_call(sock, "stats", NULL, &cur);
	if (ret)
		return ret;
	ret = names_known(cur, o);
	if (ret) {
		json_object_put(cur);
		return ret;
	}
	/* as iostat: the first report covers the time since start, unless
	 * -y leaves it out (only with an interval: else there is no other) */
	if (!(o->skip_first && interval > 0)) {
		ret = report(NULL, cur, o);
		done++;
	}
	while (!ret && interval > 0 && (!count || done < count) && !stop_flag) {
		prev = cur;
		cur = NULL;
		ctl_nap(interval);
		if (stop_flag)
			break;
		ret = ctl_call(sock, "stats", NULL, &cur);
		if (!ret)
			ret = report(prev, cur, o);
		json_object_put(prev);
		prev = NULL;
		done++;
	}
	json_object_put(prev);
	json_object_put(cur);
	return ret;
}

/* nvmefs-perf - drive the engine's queue pairs directly, no FUSE.
 *
 * One reactor per configured queue (pinned as the config says), one qpair per
 * controller per reactor, QD commands outstanding on every qpair.  Each
 * completion callback resubmits its slot at once, so the loop measures the
 * engine's own submit / doorbell / reap / complete path.  Figures come from
 * the engine's statistics (latency histograms, completions per pass,
 * doorbells), taken as the difference between a snapshot at the start of the
 * measured phase and one at its end.
 *
 * --verify: every reactor owns a disjoint slice of each namespace, so no
 * other reactor touches its blocks.  A fill pass first writes every block of
 * the slice (generation 1, not part of the figures); the measured phase then
 * keeps a generation per block: a write stores a pattern derived from
 * (controller, nsid, block, generation) and bumps the generation, a read
 * checks the block against its current generation.  A block with a command in
 * flight is never chosen again until it completes, so every read has exactly
 * one expected content.  Every read is verified; mismatches make the exit
 * status 1.
 *
 * Progress: when stderr is a terminal, the main thread rewrites one line on
 * it a few times a second (the fill pass, then the measured phase: how far,
 * the rate, the time left) and erases it before the report.  The reactors
 * only publish their counts with relaxed stores; when stderr is not a
 * terminal the main thread sleeps on the phase semaphore as before and
 * nothing of it is written.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

enum wl { WL_RANDREAD, WL_RANDWRITE, WL_READ, WL_WRITE, WL_RANDRW };
static const char *const wl_names[] = { "randread", "randwrite", "read", "write", "randrw" };

enum phase { PH_FILL, PH_RUN };
enum wstate { WS_INIT, WS_FILL, WS_RUN, WS_DONE };

#define GEN_UNKNOWN UINT32_MAX /* a write failed: content undefined, do not check */
#define MAX_LOGGED 8           /* errors and mismatches printed per job */

struct opts {
	const char *conf;
	enum wl wl;
	size_t bs;
	unsigned qd;
	double secs;
	uint64_t nios; /* 0: run for secs */
	unsigned read_pct;
	bool verify, json;
	uint32_t nsid;
	const char *ctrl_name;
};

struct job;

struct slot {
	struct job *job;
	void *buf;
	uint64_t blk; /* in units of bs, absolute within the namespace */
	uint32_t gen;
	bool write;
};

/* One qpair driven by one reactor. */
struct job {
	struct worker *w;
	struct nvme_qpair *qp;
	unsigned ci;          /* controller index (pattern seed, messages) */
	uint32_t nsid;
	uint64_t lbas_per_io; /* bs / lba size */
	uint64_t blk_lo, nblk; /* the blocks this job may touch */
	uint64_t seq_next;     /* sequential workloads, and the fill pass */
	struct slot *slots;
	struct slot **pending; /* -EAGAIN: retried from the next pass */
	unsigned npending;
	uint32_t *gen;   /* --verify: generation per block of the slice */
	uint8_t *busy;   /* --verify: a command on this block is in flight */
	uint64_t errors, mismatches, verified, eagain;
	unsigned logged;
	struct nvme_qpair_stats base, end;
};

/* One reactor and everything it drives. */
struct worker {
	struct nvme_reactor *r;
	unsigned id;
	int cpu;
	struct job *jobs;
	unsigned njobs;
	uint64_t rng;
	uint64_t issued, quota, ios, inflight;
	uint64_t filled; /* fill pass: blocks written (or failed) */
	/* ios and filled, for the progress line (relaxed: a snapshot) */
	_Atomic uint64_t pub_ios, pub_filled;
	enum phase phase;
	atomic_bool stop;
	atomic_int state;
	int setup_err;
	struct timespec t0, t1;
};

static struct opts o = {
	.wl = WL_RANDREAD, .bs = 4096, .qd = 32, .secs = 0, .read_pct = 50, .nsid = 1,
};
static volatile sig_atomic_t got_signal;
/* posted by a reactor at each phase change: the main thread sleeps on it
 * rather than polling, which would add its own instructions to a count */
static sem_t progress;

/* The progress line (main thread).  CSI K (erase to the end of the line)
 * after each rewrite clears what a longer earlier line left. */
#define PROG_TICK_NS 250000000L
#define PROG_CLEAR "\r\033[K"
static struct {
	bool on;      /* stderr is a terminal: set before the reactors start */
	bool dead;    /* a write failed (the terminal went away): no more lines */
	bool shown;   /* a line is on the screen */
	struct worker *ws;
	unsigned nw;
	uint64_t fill_blocks;       /* of every job of every worker */
	struct timespec t0, run_t0; /* the reactors' start; every one in PH_RUN */
	bool run_started;
	struct timespec next;       /* the next rewrite */
} prog;

static void on_signal(int sig)
{
	(void)sig;
	got_signal = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nvmefs-perf -c CONF [-w randread|randwrite|read|write|randrw] [-s BS]\n"
		"                   [-q QD] [-t SEC | -n IOS] [-M READ%%] [--verify] [--json]\n"
		"                   [--ns NSID] [--controller NAME]\n"
		"  -c CONF          nvmefs config: [engine] keys and the controllers\n"
		"  -w WORKLOAD      access pattern (default randread)\n"
		"  -s BS            bytes per I/O, a multiple of the LBA size (default 4096; k/m suffix)\n"
		"  -q QD            commands outstanding per queue pair (default 32)\n"
		"  -t SEC           run time of the measured phase (default 10)\n"
		"  -n IOS           total I/Os over all reactors instead of a time (k/m suffix)\n"
		"  -M READ%%         reads in percent for randrw (default 50)\n"
		"  --verify         fill, then check every read against a per-block generation\n"
		"  --json           one JSON object on stdout instead of the table\n"
		"  --ns NSID        namespace to drive on every controller (default 1)\n"
		"  --controller N   drive only controller N (default: every one)\n"
		"exit: 0 ok, 1 I/O errors or verify mismatches, 2 usage or set-up failure\n");
}

static int parse_u64(const char *s, uint64_t *out, bool suffix)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	uint64_t mul = 1;
	if (suffix && *end) {
		switch (*end) {
		case 'k': case 'K': mul = 1024; break;
		case 'm': case 'M': mul = 1024 * 1024; break;
		case 'g': case 'G': mul = 1024ULL * 1024 * 1024; break;
		default: return -EINVAL;
		}
		end++;
	}
	if (*end || (v && mul > UINT64_MAX / v))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

/* -n counts in decimal thousands (200k = 200000), sizes in binary. */
static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	uint64_t mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1000, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1000000, end++;
	if (*end || (v && mul > UINT64_MAX / v))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	enum { OPT_VERIFY = 256, OPT_JSON, OPT_NS, OPT_CTRL };
	static const struct option lo[] = {
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "ns", required_argument, NULL, OPT_NS },
		{ "controller", required_argument, NULL, OPT_CTRL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	uint64_t v;
	bool have_t = false;

	while ((c = getopt_long(argc, argv, "c:w:s:q:t:n:M:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.conf = optarg;
			break;
		case 'w': {
			unsigned i;
			for (i = 0; i < sizeof(wl_names) / sizeof(wl_names[0]); i++)
				if (!strcmp(optarg, wl_names[i]))
					break;
			if (i == sizeof(wl_names) / sizeof(wl_names[0])) {
				fprintf(stderr, "nvmefs-perf: -w %s: use randread, randwrite, read, write or randrw\n", optarg);
				return -EINVAL;
			}
			o.wl = (enum wl)i;
			break;
		}
		case 's':
			if (parse_u64(optarg, &v, true) || v == 0 || v > (64u << 20) || v % 512) {
				fprintf(stderr, "nvmefs-perf: -s %s: a multiple of 512 up to 64M\n", optarg);
				return -EINVAL;
			}
			o.bs = v;
			break;
		case 'q':
			if (parse_u64(optarg, &v, false) || v == 0 || v > 65536) {
				fprintf(stderr, "nvmefs-perf: -q %s: 1..65536\n", optarg);
				return -EINVAL;
			}
			o.qd = (unsigned)v;
			break;
		case 't': {
			char *end;
			errno = 0;
			o.secs = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o.secs > 0) || o.secs > 1e6) {
				fprintf(stderr, "nvmefs-perf: -t %s: seconds, > 0\n", optarg);
				return -EINVAL;
			}
			have_t = true;
			break;
		}
		case 'n':
			if (parse_count(optarg, &v) || v == 0) {
				fprintf(stderr, "nvmefs-perf: -n %s: a count > 0 (k, m: thousands, millions)\n", optarg);
				return -EINVAL;
			}
			o.nios = v;
			break;
		case 'M':
			if (parse_u64(optarg, &v, false) || v > 100) {
				fprintf(stderr, "nvmefs-perf: -M %s: 0..100\n", optarg);
				return -EINVAL;
			}
			o.read_pct = (unsigned)v;
			break;
		case OPT_VERIFY:
			o.verify = true;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_NS:
			if (parse_u64(optarg, &v, false) || v == 0 || v >= 0xffffffffu) {
				fprintf(stderr, "nvmefs-perf: --ns %s: a namespace id\n", optarg);
				return -EINVAL;
			}
			o.nsid = (uint32_t)v;
			break;
		case OPT_CTRL:
			o.ctrl_name = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nvmefs-perf: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!o.conf) {
		fprintf(stderr, "nvmefs-perf: -c CONF is required\n");
		return -EINVAL;
	}
	if (have_t && o.nios) {
		fprintf(stderr, "nvmefs-perf: -t and -n exclude each other\n");
		return -EINVAL;
	}
	if (!have_t && !o.nios)
		o.secs = 10;
	return 0;
}

/* ---- the I/O path (reactor thread) ---- */

static inline uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: a few instructions, plenty for picking blocks */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n) without a division. */
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

static inline uint64_t pat_seed(const struct job *j, uint64_t blk, uint32_t gen)
{
	uint64_t z = ((uint64_t)j->ci << 56) ^ ((uint64_t)j->nsid << 40) ^ (blk << 8) ^
		     ((uint64_t)gen * 0x9E3779B97F4A7C15ULL);
	/* splitmix64 finaliser: neighbouring blocks get unrelated patterns */
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static void pat_fill(const struct job *j, uint64_t *p, uint64_t blk, uint32_t gen)
{
	uint64_t s = pat_seed(j, blk, gen);
	for (size_t i = 0; i < o.bs / 8; i++)
		p[i] = s + i * 0xD1B54A32D192ED03ULL;
}

/* Returns the index of the first bad word, or -1. */
static long pat_check(const struct job *j, const uint64_t *p, uint64_t blk, uint32_t gen)
{
	uint64_t s = pat_seed(j, blk, gen);
	for (size_t i = 0; i < o.bs / 8; i++)
		if (p[i] != s + i * 0xD1B54A32D192ED03ULL)
			return (long)i;
	return -1;
}

static void io_done(void *arg, int err, uint16_t status);

static inline bool want_write(struct worker *w)
{
	switch (o.wl) {
	case WL_RANDWRITE:
	case WL_WRITE:
		return true;
	case WL_RANDRW:
		return rng_below(&w->rng, 100) >= o.read_pct;
	default:
		return false;
	}
}

/* Pick the next block for job j; with --verify skip blocks in flight. */
static inline uint64_t pick_block(struct job *j, struct worker *w)
{
	uint64_t b;
	if (o.wl == WL_READ || o.wl == WL_WRITE) {
		b = j->seq_next;
		j->seq_next = b + 1 == j->nblk ? 0 : b + 1;
	} else {
		b = rng_below(&w->rng, j->nblk);
	}
	if (o.verify) {
		/* the slice holds more blocks than slots, so this ends */
		while (j->busy[b])
			b = b + 1 == j->nblk ? 0 : b + 1;
		j->busy[b] = 1;
	}
	return b;
}

static void job_error(struct job *j, const char *what, uint64_t blk, int err, uint16_t status)
{
	if (j->logged++ < MAX_LOGGED)
		fprintf(stderr, "%snvmefs-perf: reactor %u qid %u: %s block %" PRIu64 ": %s (status 0x%04x: %s)\n",
			prog.on ? PROG_CLEAR : "", j->w->id, nvme_qpair_id(j->qp), what, blk, strerror(-err), status,
			nvme_status_str(status));
}

/* Submit slot s of job j.  0, or a negative errno (the slot is then idle). */
static int submit(struct job *j, struct slot *s)
{
	struct worker *w = j->w;
	uint64_t rel;
	bool wr;
	int rc;

	if (__builtin_expect(w->phase == PH_FILL, 0)) {
		if (j->seq_next == j->nblk)
			return -ENODATA;
		rel = j->seq_next++;
		wr = true;
		j->busy[rel] = 1;
	} else {
		wr = want_write(w);
		rel = pick_block(j, w);
	}
	s->blk = j->blk_lo + rel;
	s->write = wr;
	if (o.verify) {
		if (wr) {
			s->gen = j->gen[rel] == GEN_UNKNOWN ? 1 : j->gen[rel] + 1;
			if (s->gen == GEN_UNKNOWN)
				s->gen = 1;
			pat_fill(j, s->buf, s->blk, s->gen);
		} else {
			s->gen = j->gen[rel];
		}
	}
	uint64_t slba = s->blk * j->lbas_per_io;
	if (wr)
		rc = nvme_qpair_write(j->qp, j->nsid, slba, s->buf, o.bs, false, io_done, s);
	else
		rc = nvme_qpair_read(j->qp, j->nsid, slba, s->buf, o.bs, io_done, s);
	if (__builtin_expect(rc != 0, 0)) {
		if (o.verify)
			j->busy[rel] = 0;
		if (w->phase == PH_FILL)
			j->seq_next--;
		if (rc == -EAGAIN) {
			j->eagain++;
			j->pending[j->npending++] = s;
			return 0;
		}
		j->errors++;
		job_error(j, wr ? "submit write" : "submit read", s->blk, rc, 0);
		return rc;
	}
	w->inflight++;
	w->issued++;
	return 0;
}

static void clock_now(struct timespec *t)
{
	clock_gettime(CLOCK_MONOTONIC, t);
}

static void run_start(struct worker *w);

static void worker_finish(struct worker *w)
{
	clock_now(&w->t1);
	atomic_store(&w->state, WS_DONE);
	nvme_reactor_stop(w->r);
	sem_post(&progress);
}

static inline bool may_issue(struct worker *w)
{
	return w->issued < w->quota && !atomic_load_explicit(&w->stop, memory_order_relaxed);
}

static bool pending_any(const struct worker *w)
{
	for (unsigned i = 0; i < w->njobs; i++)
		if (w->jobs[i].npending)
			return true;
	return false;
}

static void io_done(void *arg, int err, uint16_t status)
{
	struct slot *s = arg;
	struct job *j = s->job;
	struct worker *w = j->w;

	w->inflight--;
	if (o.verify) {
		uint64_t rel = s->blk - j->blk_lo;
		j->busy[rel] = 0;
		if (err) {
			if (s->write)
				j->gen[rel] = GEN_UNKNOWN;
		} else if (s->write) {
			j->gen[rel] = s->gen;
		} else if (s->gen != GEN_UNKNOWN) {
			long bad = pat_check(j, s->buf, s->blk, s->gen);
			if (bad >= 0) {
				j->mismatches++;
				if (j->logged++ < MAX_LOGGED)
					fprintf(stderr, "%snvmefs-perf: reactor %u qid %u: verify: block %" PRIu64
						" (generation %u) differs at byte %ld\n", prog.on ? PROG_CLEAR : "", w->id,
						nvme_qpair_id(j->qp), s->blk, s->gen, bad * 8);
			} else {
				j->verified++;
			}
		}
	}
	if (__builtin_expect(err != 0, 0)) {
		j->errors++;
		job_error(j, s->write ? "write" : "read", s->blk, err, status);
	}

	if (__builtin_expect(w->phase == PH_FILL, 0)) {
		w->filled++;
		atomic_store_explicit(&w->pub_filled, w->filled, memory_order_relaxed);
		/* a job with blocks left keeps its slots busy, so nothing in
		 * flight means every slice is written */
		submit(j, s);
		if (w->inflight == 0 && !pending_any(w))
			run_start(w);
		return;
	}
	w->ios++;
	atomic_store_explicit(&w->pub_ios, w->ios, memory_order_relaxed);
	if (__builtin_expect(may_issue(w), 1))
		submit(j, s);
	else if (w->inflight == 0)
		worker_finish(w);
}

/* The measured phase: snapshot the statistics, start QD per qpair. */
static void run_start(struct worker *w)
{
	w->phase = PH_RUN;
	w->issued = 0;
	for (unsigned i = 0; i < w->njobs; i++) {
		struct job *j = &w->jobs[i];
		j->seq_next = 0;
		nvme_qpair_stats_get(j->qp, &j->base);
	}
	atomic_store(&w->state, WS_RUN);
	sem_post(&progress);
	clock_now(&w->t0);
	for (unsigned k = 0; k < o.qd; k++)
		for (unsigned i = 0; i < w->njobs; i++)
			if (may_issue(w))
				submit(&w->jobs[i], &w->jobs[i].slots[k]);
	if (w->inflight == 0)
		worker_finish(w);
}

/* First pass: buffers come from the reactor's own pool, on its thread. */
static void worker_setup(struct worker *w)
{
	for (unsigned i = 0; i < w->njobs; i++) {
		struct job *j = &w->jobs[i];
		for (unsigned k = 0; k < o.qd; k++) {
			struct slot *s = &j->slots[k];
			s->job = j;
			s->buf = nvme_reactor_buf_alloc(w->r, o.bs);
			if (!s->buf) {
				fprintf(stderr, "nvmefs-perf: reactor %u: DMA buffer pool exhausted "
					"(%u x %zu bytes)\n", w->id, o.qd * w->njobs, o.bs);
				w->setup_err = -ENOMEM;
				worker_finish(w);
				return;
			}
		}
	}
	if (!o.verify) {
		run_start(w);
		return;
	}
	w->phase = PH_FILL;
	atomic_store(&w->state, WS_FILL);
	for (unsigned k = 0; k < o.qd; k++)
		for (unsigned i = 0; i < w->njobs; i++)
			submit(&w->jobs[i], &w->jobs[i].slots[k]);
	if (w->inflight == 0 && !pending_any(w))
		run_start(w);
}

static void pass_hook(void *arg)
{
	struct worker *w = arg;
	int st = atomic_load_explicit(&w->state, memory_order_relaxed);

	if (__builtin_expect(st == WS_INIT, 0)) {
		worker_setup(w);
		return;
	}
	if (__builtin_expect(st == WS_DONE, 0))
		return;
	for (unsigned i = 0; i < w->njobs; i++) {
		struct job *j = &w->jobs[i];
		while (j->npending) {
			struct slot *s = j->pending[--j->npending];
			if (w->phase == PH_RUN && !may_issue(w))
				continue;
			unsigned before = j->npending;
			submit(j, s);
			if (j->npending > before)
				break; /* still full: next pass */
		}
	}
	if (w->inflight == 0 && !pending_any(w)) {
		if (w->phase == PH_FILL)
			run_start(w);
		else if (!may_issue(w)) /* stopped while slots sat in the pending list */
			worker_finish(w);
	}
}

/* ---- set-up and report (main thread) ---- */

struct ctl {
	const struct cfg_controller *cc;
	unsigned ci;
	struct nvme_bus *bus; /* until nvme_ctrl_open takes it over */
	struct nvme_ctrl *ctrl;
	const struct nvme_ns_info *ns;
};

struct sum {
	uint64_t ios, errors, bogus, mismatches, verified, eagain, completed, doorbells, passes;
	uint64_t lat[NVME_LAT_BUCKETS];
	uint64_t cpp[NVME_CPP_BUCKETS];
	double secs;
};

static void sum_job(struct sum *s, const struct job *j)
{
	const struct nvme_qpair_stats *a = &j->base, *b = &j->end;
	s->errors += j->errors;
	s->mismatches += j->mismatches;
	s->verified += j->verified;
	s->eagain += j->eagain;
	s->bogus += b->bogus_cqes - a->bogus_cqes;
	s->completed += b->completed - a->completed;
	s->doorbells += (b->sq_doorbells - a->sq_doorbells) + (b->cq_doorbells - a->cq_doorbells);
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++)
		s->lat[i] += b->lat_ns[i] - a->lat_ns[i];
	for (unsigned i = 0; i < NVME_CPP_BUCKETS; i++)
		s->cpp[i] += b->cpl_per_pass[i] - a->cpl_per_pass[i];
}

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

struct fig {
	double iops, mib_s, avg, p50, p99, p999, max, cpp, dbio;
};

static void figures(const struct sum *s, struct fig *f)
{
	uint64_t n = 0;
	double tot = 0;
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++) {
		if (!s->lat[i])
			continue;
		/* a bucket's midpoint: the histogram keeps no exact sum */
		double lo = i ? (double)nvme_lat_bucket_ns(i - 1) : 0;
		double hi = (double)nvme_lat_bucket_ns(i);
		n += s->lat[i];
		tot += (double)s->lat[i] * (lo + hi) / 2;
	}
	f->iops = s->secs > 0 ? (double)s->ios / s->secs : 0;
	f->mib_s = f->iops * (double)o.bs / (1024.0 * 1024.0);
	f->avg = n ? tot / (double)n / 1000.0 : 0;
	f->p50 = (double)nvme_lat_percentile(s->lat, 50) / 1000.0;
	f->p99 = (double)nvme_lat_percentile(s->lat, 99) / 1000.0;
	f->p999 = (double)nvme_lat_percentile(s->lat, 99.9) / 1000.0;
	f->max = (double)nvme_lat_percentile(s->lat, 100) / 1000.0;
	/* completions per reaping pass: the engine's passes that reaped, of
	 * every size (the >= 16 bucket holds the rest of the completions) */
	uint64_t passes = 0;
	for (unsigned i = 0; i < NVME_CPP_BUCKETS; i++)
		passes += s->cpp[i];
	f->cpp = passes ? (double)s->completed / (double)passes : 0;
	f->dbio = s->completed ? (double)s->doorbells / (double)s->completed : 0;
}

static json_object *jfig(const struct sum *s, const struct fig *f)
{
	json_object *x = json_object_new_object(), *l = json_object_new_object();
	json_object_object_add(x, "ios", json_object_new_int64((int64_t)s->ios));
	json_object_object_add(x, "seconds", json_object_new_double(s->secs));
	json_object_object_add(x, "iops", json_object_new_double(f->iops));
	json_object_object_add(x, "mib_s", json_object_new_double(f->mib_s));
	json_object_object_add(l, "avg", json_object_new_double(f->avg));
	json_object_object_add(l, "p50", json_object_new_double(f->p50));
	json_object_object_add(l, "p99", json_object_new_double(f->p99));
	json_object_object_add(l, "p999", json_object_new_double(f->p999));
	json_object_object_add(l, "max", json_object_new_double(f->max));
	json_object_object_add(x, "lat_us", l);
	json_object_object_add(x, "cpl_per_pass", json_object_new_double(f->cpp));
	json_object_object_add(x, "doorbells_per_io", json_object_new_double(f->dbio));
	json_object_object_add(x, "errors", json_object_new_int64((int64_t)s->errors));
	json_object_object_add(x, "bogus_cqes", json_object_new_int64((int64_t)s->bogus));
	json_object_object_add(x, "eagain", json_object_new_int64((int64_t)s->eagain));
	if (o.verify) {
		json_object_object_add(x, "verified", json_object_new_int64((int64_t)s->verified));
		json_object_object_add(x, "mismatches", json_object_new_int64((int64_t)s->mismatches));
	}
	return x;
}

static void print_row(const char *name, int cpu, const struct sum *s, const struct fig *f)
{
	char c[16];
	if (cpu >= 0)
		snprintf(c, sizeof(c), "%d", cpu);
	else
		snprintf(c, sizeof(c), "-");
	printf("%-8s %4s %12" PRIu64 " %12.0f %10.1f %8.2f %8.2f %8.2f %8.2f %9.2f %7.2f %6.3f %7" PRIu64
	       " %6" PRIu64 "\n",
	       name, c, s->ios, f->iops, f->mib_s, f->avg, f->p50, f->p99, f->p999, f->max, f->cpp,
	       f->dbio, s->errors, s->bogus);
}

static const char *mode_name(enum cfg_mode m)
{
	return m == CFG_MODE_POLL ? "poll" : m == CFG_MODE_INTERRUPT ? "interrupt" : "hybrid";
}

static int report(const struct cfg *cfg, struct worker *ws, unsigned nw, struct ctl *cs, unsigned nc)
{
	struct sum tot;
	struct fig tf;
	json_object *root = NULL, *jr = NULL;

	memset(&tot, 0, sizeof(tot));
	if (o.json) {
		json_object *jc = json_object_new_object(), *jl = json_object_new_array();
		root = json_object_new_object();
		json_object_object_add(jc, "file", json_object_new_string(cfg->path));
		json_object_object_add(jc, "workload", json_object_new_string(wl_names[o.wl]));
		json_object_object_add(jc, "bs", json_object_new_int64((int64_t)o.bs));
		json_object_object_add(jc, "qd", json_object_new_int64(o.qd));
		if (o.nios)
			json_object_object_add(jc, "n", json_object_new_int64((int64_t)o.nios));
		else
			json_object_object_add(jc, "time_s", json_object_new_double(o.secs));
		if (o.wl == WL_RANDRW)
			json_object_object_add(jc, "read_pct", json_object_new_int64(o.read_pct));
		json_object_object_add(jc, "verify", json_object_new_boolean(o.verify));
		json_object_object_add(jc, "nsid", json_object_new_int64(o.nsid));
		json_object_object_add(jc, "reactors", json_object_new_int64(nw));
		json_object_object_add(jc, "mode", json_object_new_string(mode_name(cfg->engine.mode)));
		json_object_object_add(jc, "queue_depth", json_object_new_int64(cfg->engine.queue_depth));
		json_object_object_add(jc, "cq_budget", json_object_new_int64(cfg->engine.cq_budget));
		for (unsigned i = 0; i < nc; i++)
			json_object_array_add(jl, json_object_new_string(cs[i].cc->name));
		json_object_object_add(jc, "controllers", jl);
		json_object_object_add(root, "config", jc);
		jr = json_object_new_array();
	} else {
		printf("nvmefs-perf: %s bs=%zu qd=%u", wl_names[o.wl], o.bs, o.qd);
		if (o.wl == WL_RANDRW)
			printf(" read=%u%%", o.read_pct);
		if (o.nios)
			printf(" n=%" PRIu64, o.nios);
		else
			printf(" time=%gs", o.secs);
		printf(" reactors=%u mode=%s nsid=%u controllers=", nw, mode_name(cfg->engine.mode), o.nsid);
		for (unsigned i = 0; i < nc; i++)
			printf("%s%s", i ? "," : "", cs[i].cc->name);
		printf("%s\n", o.verify ? " verify" : "");
		printf("%-8s %4s %12s %12s %10s %8s %8s %8s %8s %9s %7s %6s %7s %6s\n", "reactor", "cpu",
		       "ios", "IOPS", "MiB/s", "avg(us)", "p50", "p99", "p99.9", "max", "cpl/ps", "db/io",
		       "errors", "bogus");
	}
	for (unsigned i = 0; i < nw; i++) {
		struct sum s;
		struct fig f;
		memset(&s, 0, sizeof(s));
		s.ios = ws[i].ios;
		s.secs = ts_diff(&ws[i].t0, &ws[i].t1);
		for (unsigned k = 0; k < ws[i].njobs; k++)
			sum_job(&s, &ws[i].jobs[k]);
		figures(&s, &f);
		tot.ios += s.ios;
		/* total rate: every reactor's I/Os over the longest reactor's run */
		if (s.secs > tot.secs)
			tot.secs = s.secs;
		for (unsigned k = 0; k < ws[i].njobs; k++)
			sum_job(&tot, &ws[i].jobs[k]);
		if (o.json) {
			json_object *x = jfig(&s, &f);
			json_object_object_add(x, "id", json_object_new_int64(ws[i].id));
			json_object_object_add(x, "cpu", json_object_new_int64(ws[i].cpu));
			json_object_array_add(jr, x);
		} else {
			char name[16];
			snprintf(name, sizeof(name), "%u", ws[i].id);
			print_row(name, ws[i].cpu, &s, &f);
		}
	}
	figures(&tot, &tf);
	if (o.json) {
		json_object_object_add(root, "total", jfig(&tot, &tf));
		json_object_object_add(root, "reactors", jr);
		puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
		json_object_put(root);
	} else {
		print_row("total", -1, &tot, &tf);
		if (o.verify)
			printf("verify: %" PRIu64 " reads checked, %" PRIu64 " mismatches\n", tot.verified,
			       tot.mismatches);
		if (tot.eagain)
			printf("note: %" PRIu64 " submissions found the queue full (-q above what "
			       "queue_depth - cq_budget allows)\n", tot.eagain);
	}
	return tot.errors || tot.mismatches || tot.bogus ? 1 : 0;
}

static bool all_state_at_least(struct worker *ws, unsigned nw, int st)
{
	for (unsigned i = 0; i < nw; i++)
		if (atomic_load(&ws[i].state) < st)
			return false;
	return true;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void ts_add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L)
		t->tv_sec++, t->tv_nsec -= 1000000000L;
}

/* "412 MiB", "1.0 GiB": binary units, as the report's MiB/s */
static void fmt_bytes(char *b, size_t n, double v)
{
	if (v >= 1024.0 * 1024 * 1024)
		snprintf(b, n, "%.1f GiB", v / (1024.0 * 1024 * 1024));
	else if (v >= 10.0 * 1024 * 1024)
		snprintf(b, n, "%.0f MiB", v / (1024.0 * 1024));
	else if (v >= 1024.0 * 1024)
		snprintf(b, n, "%.1f MiB", v / (1024.0 * 1024));
	else
		snprintf(b, n, "%.0f KiB", v / 1024.0);
}

static void fmt_eta(char *b, size_t n, double left_s)
{
	if (!(left_s >= 0) || left_s > 1e7)
		snprintf(b, n, "eta -");
	else
		snprintf(b, n, "eta %.0f s", ceil(left_s));
}

static void prog_write(const char *line)
{
	char buf[512];
	size_t len = strlen(line);
	struct winsize wsz;
	/* one line that never wraps, or the carriage return would rewrite
	 * only its last row */
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &wsz) == 0 && wsz.ws_col > 1 && len >= wsz.ws_col)
		len = wsz.ws_col - 1;
	int n = snprintf(buf, sizeof(buf), "\r%.*s\033[K", (int)len, line);
	if (n < 0)
		return;
	if (write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		prog.dead = true;
	else
		prog.shown = true;
}

/* The fill pass's line: how much of it the reactors have written. */
static void prog_draw_fill(const struct timespec *now)
{
	char line[256], a[32], b[32], r[32], eta[32];
	uint64_t bs = o.bs;
	uint64_t done = 0;

	for (unsigned i = 0; i < prog.nw; i++)
		done += atomic_load_explicit(&prog.ws[i].pub_filled, memory_order_relaxed);
	double el = ts_diff(&prog.t0, now);
	double rate = el > 0 ? (double)(done * bs) / el : 0;
	fmt_bytes(a, sizeof(a), (double)(done * bs));
	fmt_bytes(b, sizeof(b), (double)(prog.fill_blocks * bs));
	fmt_bytes(r, sizeof(r), rate);
	fmt_eta(eta, sizeof(eta),
		rate > 0 ? (double)((prog.fill_blocks - done) * bs) / rate : -1);
	snprintf(line, sizeof(line), "fill: %u%% %s/%s, %s/s, %s",
		 (unsigned)(done * 100 / prog.fill_blocks), a, b, r, eta);
	prog_write(line);
}

/* Rewrite the line: the fill pass while a reactor is in it, then the
 * measured phase (by I/Os with -n, by time with -t). */
static void prog_draw(const struct timespec *now)
{
	char line[256], a[32], b[32], r[32], eta[32];
	uint64_t bs = o.bs;

	if (!all_state_at_least(prog.ws, prog.nw, WS_RUN)) {
		if (o.verify && prog.fill_blocks)
			prog_draw_fill(now);
		return;
	}
	if (!prog.run_started)
		return;
	uint64_t ios = 0;
	for (unsigned i = 0; i < prog.nw; i++)
		ios += atomic_load_explicit(&prog.ws[i].pub_ios, memory_order_relaxed);
	double el = ts_diff(&prog.run_t0, now);
	double iops = el > 0 ? (double)ios / el : 0;
	unsigned pct;
	fmt_bytes(r, sizeof(r), iops * (double)bs);
	if (o.nios) {
		if (ios > o.nios)
			ios = o.nios;
		pct = (unsigned)(ios * 100 / o.nios);
		fmt_bytes(a, sizeof(a), (double)(ios * bs));
		fmt_bytes(b, sizeof(b), (double)(o.nios * bs));
		fmt_eta(eta, sizeof(eta), iops > 0 ? (double)(o.nios - ios) / iops : -1);
	} else {
		double f = el / o.secs;
		pct = (unsigned)(f >= 1 ? 100 : f * 100);
		snprintf(a, sizeof(a), "%.1f s", el);
		snprintf(b, sizeof(b), "%g s", o.secs);
		fmt_eta(eta, sizeof(eta), o.secs - el > 0 ? o.secs - el : 0);
	}
	snprintf(line, sizeof(line), "%s%s: %u%% %s/%s, %s/s, %.0f IOPS, %s", wl_names[o.wl],
		 o.verify ? " verify" : "", pct, a, b, r, iops, eta);
	prog_write(line);
}

static void prog_erase(void)
{
	if (prog.shown && !prog.dead && write(STDERR_FILENO, PROG_CLEAR, strlen(PROG_CLEAR)) < 0)
		prog.dead = true;
	prog.shown = false;
}

/* Sleep until a reactor changes phase, a signal, or the deadline (NULL:
 * none).  false once the deadline has passed.  With the progress line on,
 * it also wakes for the line's next rewrite, and makes it. */
static bool wait_progress(const struct timespec *deadline)
{
	if (!prog.on) {
		int rc = deadline ? sem_clockwait(&progress, CLOCK_MONOTONIC, deadline)
				  : sem_wait(&progress);
		return !(rc && errno == ETIMEDOUT);
	}
	struct timespec until = prog.next, now;
	if (deadline && ts_before(deadline, &until))
		until = *deadline;
	int rc = sem_clockwait(&progress, CLOCK_MONOTONIC, &until);
	int e = errno;
	clock_now(&now);
	if (!ts_before(&now, &prog.next)) {
		if (!prog.dead)
			prog_draw(&now);
		prog.next = now;
		ts_add_ns(&prog.next, PROG_TICK_NS);
	}
	if (rc && e == ETIMEDOUT)
		return !(deadline && !ts_before(&now, deadline));
	return true;
}

static void stop_all(struct worker *ws, unsigned nw)
{
	for (unsigned i = 0; i < nw; i++)
		atomic_store(&ws[i].stop, true);
}

int main(int argc, char **argv)
{
	struct cfg *cfg = NULL;
	struct ctl *cs = NULL;
	struct worker *ws = NULL;
	unsigned nc = 0, nw = 0, started = 0;
	int rc, ret = 2;

	sem_init(&progress, 0, 0);
	if (parse_args(argc, argv)) {
		usage(stderr);
		return 2;
	}
	rc = cfg_load(o.conf, &cfg, stderr);
	if (rc) {
		if (rc != -EINVAL)
			fprintf(stderr, "nvmefs-perf: %s: %s\n", o.conf, strerror(-rc));
		return 2;
	}
	log_set_level((enum log_level)cfg->daemon.log_level);
	log_set_ident("nvmefs-perf");

	cs = calloc(cfg->nr_ctrls ? cfg->nr_ctrls : 1, sizeof(*cs));
	if (!cs)
		goto out;
	for (unsigned i = 0; i < cfg->nr_ctrls; i++) {
		const struct cfg_controller *cc = &cfg->ctrls[i];
		if (o.ctrl_name && strcmp(o.ctrl_name, cc->name))
			continue;
		struct ctl *c = &cs[nc];
		struct nvme_bus *bus;
		struct sim *sim;
		c->cc = cc;
		c->ci = i;
		if (cc->sim) {
			rc = sim_create_from_cfg(cc, &sim);
			if (rc) {
				fprintf(stderr, "nvmefs-perf: controller %s: software controller: %s\n",
					cc->name, strerror(-rc));
				goto out;
			}
			bus = sim_bus(sim);
		} else {
			rc = vfio_bus_open(cc->device, &bus);
			if (rc) {
				fprintf(stderr, "nvmefs-perf: controller %s: %s: %s\n", cc->name, cc->device,
					strerror(-rc));
				goto out;
			}
		}
		c->bus = bus;
		nc++;
		struct nvme_ctrl_opts co = {
			.name = cc->name,
			.io_queues = cfg->engine.queues,
			.queue_depth = cfg->engine.queue_depth,
			.cq_budget = cfg->engine.cq_budget,
			.io_timeout_ms = cfg->engine.io_timeout_ms,
			.io_retries = cfg->engine.io_retries,
			.interrupts = cfg->engine.mode != CFG_MODE_POLL,
		};
		rc = nvme_ctrl_open(bus, &co, &c->ctrl);
		if (rc) {
			fprintf(stderr, "nvmefs-perf: controller %s: bring-up failed: %s\n", cc->name,
				strerror(-rc));
			goto out;
		}
		c->bus = NULL; /* closed by nvme_ctrl_close (for the sim: sim_destroy) */
		const struct nvme_ctrl_info *ci = nvme_ctrl_get_info(c->ctrl);
		for (unsigned k = 0; k < ci->nr_ns; k++)
			if (ci->ns[k].nsid == o.nsid)
				c->ns = &ci->ns[k];
		if (!c->ns) {
			fprintf(stderr, "nvmefs-perf: controller %s has no active namespace %u\n", cc->name,
				o.nsid);
			goto out;
		}
		if (o.bs % c->ns->lba_size) {
			fprintf(stderr, "nvmefs-perf: -s %zu is not a multiple of %s namespace %u's "
				"LBA size %u\n", o.bs, cc->name, o.nsid, c->ns->lba_size);
			goto out;
		}
		if (nw == 0 || ci->nr_io_queues < nw)
			nw = ci->nr_io_queues;
	}
	if (nc == 0) {
		if (o.ctrl_name)
			fprintf(stderr, "nvmefs-perf: %s: no controller named %s\n", o.conf, o.ctrl_name);
		else
			fprintf(stderr, "nvmefs-perf: %s: no controller\n", o.conf);
		goto out;
	}
	/* reactors = queues, capped by what every controller granted and by the
	 * CPU list */
	if (cfg->engine.queues < nw)
		nw = cfg->engine.queues;
	if (cfg->engine.nr_cpus && cfg->engine.nr_cpus < nw)
		nw = cfg->engine.nr_cpus;
	if (nw == 0) {
		fprintf(stderr, "nvmefs-perf: no I/O queue granted\n");
		goto out;
	}
	if (o.qd + cfg->engine.cq_budget > cfg->engine.queue_depth)
		fprintf(stderr, "nvmefs-perf: warning: -q %u with cq_budget %u exceeds queue_depth %u: "
			"some submissions will wait for a free slot\n", o.qd, cfg->engine.cq_budget,
			cfg->engine.queue_depth);

	ws = calloc(nw, sizeof(*ws));
	if (!ws)
		goto out;
	size_t bufsz = (o.bs + 4095) & ~(size_t)4095;
	for (unsigned i = 0; i < nw; i++) {
		struct worker *w = &ws[i];
		w->id = i;
		w->cpu = cfg->engine.nr_cpus ? (int)cfg->engine.cpus[i] : -1;
		w->rng = 0x9E3779B97F4A7C15ULL * (i + 1) ^ 0xD6E8FEB86659FD93ULL;
		w->quota = UINT64_MAX;
		if (o.nios)
			w->quota = o.nios / nw + (i < o.nios % nw);
		atomic_init(&w->stop, false);
		atomic_init(&w->state, WS_INIT);
		struct nvme_reactor_opts ro = {
			.id = i,
			.cpu = w->cpu,
			.numa = cfg->engine.numa,
			.mode = cfg->engine.mode == CFG_MODE_POLL ? NVME_MODE_POLL :
				cfg->engine.mode == CFG_MODE_INTERRUPT ? NVME_MODE_INTERRUPT :
				NVME_MODE_HYBRID,
			.buf_pool_bytes = (size_t)nc * o.qd * bufsz + (1u << 20),
		};
		rc = nvme_reactor_create(&ro, &w->r);
		if (rc) {
			fprintf(stderr, "nvmefs-perf: reactor %u (cpu %d): %s\n", i, w->cpu, strerror(-rc));
			goto out;
		}
		w->jobs = calloc(nc, sizeof(*w->jobs));
		if (!w->jobs)
			goto out;
		w->njobs = nc;
		for (unsigned k = 0; k < nc; k++) {
			struct job *j = &w->jobs[k];
			uint64_t total = cs[k].ns->nlba / (o.bs / cs[k].ns->lba_size);
			j->w = w;
			j->ci = cs[k].ci;
			j->nsid = o.nsid;
			j->lbas_per_io = o.bs / cs[k].ns->lba_size;
			if (o.verify) {
				/* disjoint slices: no other reactor writes these blocks */
				j->blk_lo = total * i / nw;
				j->nblk = total * (i + 1) / nw - j->blk_lo;
			} else {
				j->blk_lo = 0;
				j->nblk = total;
			}
			if (j->nblk == 0 || (o.verify && j->nblk <= o.qd)) {
				fprintf(stderr, "nvmefs-perf: %s namespace %u: %" PRIu64 " blocks of %zu bytes "
					"for reactor %u; --verify needs more than -q %u\n", cs[k].cc->name,
					o.nsid, j->nblk, o.bs, i, o.qd);
				goto out;
			}
			j->slots = calloc(o.qd, sizeof(*j->slots));
			j->pending = calloc(o.qd, sizeof(*j->pending));
			if (!j->slots || !j->pending)
				goto out;
			if (o.verify) {
				j->gen = calloc(j->nblk, sizeof(*j->gen));
				j->busy = calloc(j->nblk, 1);
				if (!j->gen || !j->busy)
					goto out;
			}
			rc = nvme_qpair_create(cs[k].ctrl, w->r, (uint16_t)(i + 1), &j->qp);
			if (rc) {
				fprintf(stderr, "nvmefs-perf: %s qid %u: %s\n", cs[k].cc->name, i + 1,
					strerror(-rc));
				goto out;
			}
		}
		nvme_reactor_set_pass_hook(w->r, pass_hook, w);
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	prog.on = isatty(STDERR_FILENO);
	prog.ws = ws;
	prog.nw = nw;
	for (unsigned i = 0; i < nw; i++)
		for (unsigned k = 0; k < ws[i].njobs; k++)
			prog.fill_blocks += ws[i].jobs[k].nblk;
	clock_now(&prog.t0);
	prog.next = prog.t0;
	ts_add_ns(&prog.next, PROG_TICK_NS);
	for (; started < nw; started++) {
		rc = nvme_reactor_start(ws[started].r);
		if (rc) {
			fprintf(stderr, "nvmefs-perf: reactor %u: start: %s\n", started, strerror(-rc));
			stop_all(ws, started);
			break;
		}
	}
	if (started == nw) {
		/* the clock of -t starts when every reactor is in its measured phase */
		while (!got_signal && !all_state_at_least(ws, nw, WS_RUN))
			wait_progress(NULL);
		/* a fill shorter than a tick still shows that it ran, and how
		 * fast */
		if (prog.on && !prog.dead && o.verify && prog.fill_blocks && !got_signal) {
			struct timespec now;
			clock_now(&now);
			prog_draw_fill(&now);
		}
		clock_now(&prog.run_t0);
		prog.run_started = true;
		if (o.nios) {
			while (!got_signal && !all_state_at_least(ws, nw, WS_DONE))
				wait_progress(NULL);
		} else {
			struct timespec dl;
			clock_now(&dl);
			dl.tv_sec += (time_t)o.secs;
			dl.tv_nsec += (long)((o.secs - floor(o.secs)) * 1e9);
			if (dl.tv_nsec >= 1000000000L)
				dl.tv_sec++, dl.tv_nsec -= 1000000000L;
			while (!got_signal && !all_state_at_least(ws, nw, WS_DONE) && wait_progress(&dl))
				;
		}
	}
	/* a run shorter than a tick still shows its line once, at its end */
	if (prog.on && !prog.dead && prog.run_started && !got_signal) {
		struct timespec now;
		clock_now(&now);
		prog_draw(&now);
	}
	prog_erase();
	stop_all(ws, nw);
	for (unsigned i = 0; i < started; i++)
		nvme_reactor_join(ws[i].r);
	/* after the join: the last pass's doorbells and counts are in */
	for (unsigned i = 0; i < started; i++)
		for (unsigned k = 0; k < ws[i].njobs; k++)
			nvme_qpair_stats_get(ws[i].jobs[k].qp, &ws[i].jobs[k].end);
	if (started == nw && !got_signal) {
		int setup_err = 0;
		for (unsigned i = 0; i < nw; i++)
			if (ws[i].setup_err)
				setup_err = ws[i].setup_err;
		ret = setup_err ? 2 : report(cfg, ws, nw, cs, nc);
	} else if (got_signal) {
		fprintf(stderr, "nvmefs-perf: interrupted\n");
		ret = 1;
	}

out:
	for (unsigned i = 0; ws && i < nw; i++) {
		struct worker *w = &ws[i];
		for (unsigned k = 0; w->jobs && k < w->njobs; k++) {
			struct job *j = &w->jobs[k];
			if (j->qp)
				nvme_qpair_destroy(j->qp);
			free(j->slots);
			free(j->pending);
			free(j->gen);
			free(j->busy);
		}
		free(w->jobs);
		if (w->r)
			nvme_reactor_destroy(w->r);
	}
	free(ws);
	for (unsigned i = 0; cs && i < nc; i++) {
		if (cs[i].ctrl)
			nvme_ctrl_close(cs[i].ctrl);
		else if (cs[i].bus && cs[i].bus->ops->close)
			cs[i].bus->ops->close(cs[i].bus); /* sim_destroy for the sim */
	}
	free(cs);
	cfg_free(cfg);
	return ret;
}

/* stats.h - one snapshot of the daemon's figures, built once per admin
 * request: every controller (identity, state, recovery counters,
 * asynchronous events, the health cache's last SMART log), every reactor
 * and queue pair, the FUSE front end and each file it shows.  The command
 * handlers (admin_cmd.c) and the Prometheus writer (admin_prom.c) read it
 * and nothing else of the engine's figures, so that one reply is one
 * moment's figures and the writers are pure functions of it.
 *
 * Taking it reads the engine's and the front end's snapshot functions,
 * which take no lock on the I/O path (nvme.h, fuse_fs.h); the daemon's
 * arrays it points into (controllers, reactors, the view of the files) stay
 * valid while the handler runs, on the loop's thread.
 * Threads: the loop's thread.  Ownership: the caller frees the snapshot
 * with stats_free; what it points to (names, identify data, the files'
 * view) is the daemon's.  Errors: 0 or -ENOMEM.
 * Prefix stats_.
 */
#ifndef NVMEFS_STATS_H
#define NVMEFS_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fuse_fs.h"
#include "health.h"
#include "nvme.h"

struct admin_ctx;
struct admin_ns;
struct health;

/* One controller slot.  c NULL: the slot has no controller; every writer
 * leaves it out. */
struct stats_ctrl {
	struct nvme_ctrl *c;
	const char *name;
	enum nvme_ctrl_state state;  /* the engine's */
	bool detached;               /* taken away on purpose (admin_ctx.ctrl_away) */
	const struct nvme_ctrl_info *info;
	bool sim;                    /* a software controller (admin_ctx.sims) */
	unsigned nr_qpairs;          /* reactors it has a queue pair on */
	struct nvme_ctrl_rstats rs;
	struct nvme_ctrl_aen_stats aen;
	bool health_known;           /* health below is the cache's (health.h) */
	struct health_ctrl health;
};

struct stats_reactor {
	struct nvme_reactor *r;
	unsigned id;
	int cpu, node;
	struct nvme_reactor_stats st;
};

/* Reactor r's queue pair on controller c.  qp NULL: none (the controller
 * granted fewer queues than there are reactors, or an empty slot). */
struct stats_qpair {
	struct nvme_qpair *qp;
	uint16_t qid;
	int vector;                  /* -1: polled */
	unsigned inflight;
	struct nvme_qpair_stats st;
};

struct stats_snap {
	double mono;                 /* CLOCK_MONOTONIC seconds when taken */
	double uptime;               /* seconds since the daemon started */
	time_t start_time;           /* wall clock of the daemon's start (0: not known) */
	unsigned nr_ctrls;
	struct stats_ctrl *ctrl;
	unsigned nr_reactors;
	struct stats_reactor *reactor;
	struct stats_qpair *qp;      /* [r * nr_ctrls + c] */
	bool has_fuse;               /* fuse holds the front end's figures */
	struct fusefs_stats fuse;
	/* the files shown now (admin_ctx's view) and, when the front end keeps
	 * them, each one's figures (ns_st NULL: none kept) */
	const struct admin_ns *ns;
	unsigned nr_ns;
	struct fusefs_ns_stats *ns_st;
};

/* The snapshot of ctx's daemon now; h is the health cache (NULL: none),
 * uptime the seconds since the daemon started. */
int stats_take(const struct admin_ctx *ctx, const struct health *h, double uptime,
	       struct stats_snap **out);
void stats_free(struct stats_snap *s);

static inline const struct stats_qpair *stats_qp(const struct stats_snap *s, unsigned r,
						  unsigned c)
{
	return &s->qp[(size_t)r * s->nr_ctrls + c];
}

/* The state an operator is shown: "detached" for a controller taken away
 * on purpose (nvmefsctl detach, a reload that no longer names it), else
 * the engine's ("live", "resetting", "removed", "failed"), so that a planned
 * detach is never taken for a failure. */
const char *stats_ctrl_state_name(const struct stats_ctrl *sc);

/* The controller of file ns, NULL when it has none in the snapshot. */
const struct stats_ctrl *stats_ns_ctrl(const struct stats_snap *s, const struct admin_ns *ns);

/* Label values shared by "stats" and "metrics": the error classes, the
 * FUSE operations and waits, the asynchronous event kinds. */
extern const char *const stats_errc_names[NVME_ERRC_NR];
extern const char *const stats_fuse_op_names[FUSEFS_OP_NR];
extern const char *const stats_fuse_wait_names[FUSEFS_WAIT_NR];
#define STATS_AEN_KINDS (NVME_AEN_OTHER + 1)
extern const char *const stats_aen_kind_names[STATS_AEN_KINDS];

#endif

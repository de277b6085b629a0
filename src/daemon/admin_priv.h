/* admin_priv.h - what the admin server's files share; admin.h is the
 * contract for the daemon, this one is internal to src/daemon/admin_*.c.
 *
 *   admin_server.c  the socket, clients, framing, peer credentials and
 *                   permissions, per-uid limits, reply caps
 *   admin_cmd.c     the command handlers, found by name with admin_cmd_find
 *   admin_prom.c    the "metrics" command's Prometheus text
 *
 * Everything here runs on the loop's thread.
 */
#ifndef NVMEFS_ADMIN_PRIV_H
#define NVMEFS_ADMIN_PRIV_H

#include "admin.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>

#include <ev.h>
#include <json-c/json.h>

#include "fuse_fs.h"
#include "nvme.h"

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
	/* the request a handler is serving (admin_defer_begin), else NULL */
	struct admin_client *cur;
	json_object *cur_id;
	struct admin_defer *defers;  /* replies owed, for admin_stop */
	struct admin_logq *logq;     /* log page reads coming back to the loop */
	struct health *health;       /* the SMART cache (health.h) */
	double log_timeout;          /* seconds a log page command waits */
};

/* A command handler: fills rep (which already holds "ok": true) and returns
 * 0, or a negative errno with a message for the client in err, or
 * ADMIN_PENDING after admin_defer_begin: the reply comes later through
 * admin_defer_reply (rep is then dropped). */
#define ADMIN_PENDING 1
typedef int (*admin_cmd_fn)(struct admin *a, json_object *req, json_object *rep, char *err,
                            size_t errlen);

struct admin_cmd {
	const char *name;
	admin_cmd_fn fn;
	/* the command resets, faults or releases a device, so it needs root
	 * or operator_group; the others only read and need admin_group too */
	bool changes;
};

/* The command called name, or NULL for an unknown one. */
const struct admin_cmd *admin_cmd_find(const char *name);

/* The Prometheus text of every metric, written to f.  0, or -ENOMEM. */
int admin_prom_write(struct admin *a, FILE *f);

/* ---- deferred replies (admin_server.c) ----
 * A handler that waits for the device defers its reply instead of blocking
 * the loop: the client's further requests wait behind it (replies stay in
 * order) and the other clients are served meanwhile. */
struct admin_defer;

/* Inside a handler only: the reply to the current request will come later.
 * After timeout seconds without admin_defer_reply the client is answered
 * {"ok": false, "error": timeout_msg} and goes on; the token stays valid
 * (and must still be ended) until admin_defer_reply.  NULL: out of memory. */
struct admin_defer *admin_defer_begin(struct admin *a, double timeout, const char *timeout_msg);

/* End d: its client (if still connected and not answered by the deadline)
 * gets rep (ret 0; taken, with the request's "id" added) or the error err
 * (ret < 0; rep may be NULL).  On the loop's thread; d is freed. */
void admin_defer_reply(struct admin_defer *d, int ret, json_object *rep, const char *err);

/* free(p) when d is freed, by admin_defer_reply or by admin_stop (which
 * ends every token still open). */
void admin_defer_own(struct admin_defer *d, void *p);

/* End d without a reply: the handler failed before returning ADMIN_PENDING
 * and reports its error itself. */
void admin_defer_abort(struct admin_defer *d);

/* ---- log pages read for the loop (admin_server.c) ---- */
struct admin_logrd;
/* Runs on the loop's thread with the bytes the device wrote (err 0), or the
 * engine's error; buf is valid during the call only. */
typedef void (*admin_log_fn)(void *arg, int err, const void *buf, size_t len);

/* Read log lid (len bytes, as nvme_ctrl_get_log_async) of controller i with
 * the engine's asynchronous admin command; fn(arg) runs later on the loop's
 * thread unless admin_log_cancel(*out) came first.  The page's buffer is the
 * read's own and is freed only after the engine's callback has run, even
 * when the admin server stopped meanwhile.  0, or a negative errno (fn will
 * not run). */
int admin_log_read(struct admin *a, unsigned i, uint8_t lid, size_t len, admin_log_fn fn,
                   void *arg, struct admin_logrd **out);

/* fn of rd will not run (the buffer stays the engine's until its callback).
 * On the loop's thread, before fn ran. */
void admin_log_cancel(struct admin_logrd *rd);

/* label values of the error classes, FUSE operations and FUSE waits, shared
 * by "stats" and "metrics" */
extern const char *const admin_errc_names[NVME_ERRC_NR];
extern const char *const admin_fuse_op_names[FUSEFS_OP_NR];
extern const char *const admin_fuse_wait_names[FUSEFS_WAIT_NR];

/* The figures of every file shown now, in the view's order: *view and
 * *nr as admin_ns_view gives them, and an array of *nr (the caller frees
 * it).  NULL with *nr 0: no front end or none kept; NULL otherwise: no
 * memory.  A file that went between the view and its figures has zeros. */
struct fusefs_ns_stats *admin_ns_stats_snap(struct admin *a, const struct admin_ns **view,
                                            unsigned *nr);

/* ---- small helpers the three files use ---- */

static inline double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void jset(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

static inline void jset_u64(json_object *o, const char *k, uint64_t v)
{
	jset(o, k, json_object_new_uint64(v));
}

static inline void jset_int(json_object *o, const char *k, int64_t v)
{
	jset(o, k, json_object_new_int64(v));
}

static inline void jset_str(json_object *o, const char *k, const char *v)
{
	jset(o, k, v ? json_object_new_string(v) : NULL);
}

static inline void jset_bool(json_object *o, const char *k, bool v)
{
	jset(o, k, json_object_new_boolean(v));
}

/* A double with a fixed number of decimals (json-c would print 17 digits);
 * null when undefined (no division by zero ever reaches a reply). */
static inline json_object *jdbl(double v, int prec)
{
	char s[64];

	if (!isfinite(v))
		return NULL;
	snprintf(s, sizeof(s), "%.*f", prec, v);
	return json_object_new_double_s(v, s);
}

static inline void jset_dbl(json_object *o, const char *k, double v, int prec)
{
	jset(o, k, jdbl(v, prec));
}

static inline struct nvme_qpair *qpair_at(const struct admin *a, unsigned r, unsigned c)
{
	if (!a->ctx.qpairs)
		return NULL;
	return a->ctx.qpairs[(size_t)r * a->ctx.nr_ctrls + c];
}

static inline double uptime(const struct admin *a)
{
	double up = mono_now() - a->mono0;

	/* the daemon started before the admin socket did */
	if (a->ctx.start_time && a->wall0 > a->ctx.start_time)
		up += (double)(a->wall0 - a->ctx.start_time);
	return up;
}
#endif

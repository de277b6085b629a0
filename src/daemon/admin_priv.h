/* admin_priv.h - what the admin server's files share; admin.h is the
 * contract for the daemon, this one is internal to src/daemon/admin*.c.
 *
 *   admin_start.c   admin_start and admin_stop: the pieces below in order
 *   admin_server.c  the socket, clients, framing, peer credentials and
 *                   permissions, per-uid limits, reply caps, deferred
 *                   replies; it knows no command, only the table it is given
 *   admin_cmd.c     the command handlers and their table (admin_cmds)
 *   admin_prom.c    the "metrics" command's Prometheus text
 * and, used by them: stats.h (the snapshot of the figures a handler reads),
 * logread.h (log pages read for the loop), health.h (the SMART cache).
 * Calls go down that list, never up: the server is handed the table, the
 * Prometheus writer reads a snapshot.
 *
 * A handler gets the parsed request and fills rep, or returns < 0 with err
 * set; it runs on the main loop, never blocks, and reads the daemon's
 * figures through one snapshot (stats_take) per request.
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
#include "log.h"
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
	struct logrd_q *logq;        /* log page reads coming back to the loop */
	const struct admin_cmd *cmds; /* the commands served (admin_cmds) */
	size_t nr_cmds;
	struct health *health;       /* the SMART cache (health.h) */
	double log_timeout;          /* seconds a log page command waits */
	/* the log lines a client can provoke (admin.h): refused requests;
	 * refused and dropped connections */
	struct log_rl rl_request, rl_client;
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

/* The command table (admin_cmd.c), in the order the unknown-command
 * error lists the names. */
extern const struct admin_cmd admin_cmds[];
extern const size_t admin_nr_cmds;

struct stats_snap;
/* The Prometheus text of every metric of s, written to f.  0, or -ENOMEM. */
int admin_prom_write(const struct stats_snap *s, FILE *f);

/* ---- the server (admin_server.c), for admin_start.c ---- */
/* Bind and listen at ctx.cfg's admin_socket (admin.h says how); not yet
 * accepting.  0 or a negative errno, logged. */
int admin_srv_listen(struct admin *a);
/* Start accepting clients. */
void admin_srv_serve(struct admin *a);
/* Close every client (their deferred replies go nowhere). */
void admin_srv_close_clients(struct admin *a);
/* End every deferred reply, stop listening, remove the socket file if it
 * is still ours. */
void admin_srv_stop(struct admin *a);

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

/* ---- small helpers ---- */

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

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
};

/* A command handler: fills rep (which already holds "ok": true) and returns
 * 0, or a negative errno with a message for the client in err. */
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

/* label values of the error classes, FUSE operations and FUSE waits, shared
 * by "stats" and "metrics" */
extern const char *const admin_errc_names[NVME_ERRC_NR];
extern const char *const admin_fuse_op_names[FUSEFS_OP_NR];
extern const char *const admin_fuse_wait_names[FUSEFS_WAIT_NR];

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

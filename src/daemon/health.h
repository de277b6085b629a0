/* health.h - the daemon's health cache: each controller's SMART / Health
 * Information log (02h), read in the background for "status" and "metrics".
 *
 * Reads go through the engine's asynchronous admin command (the admin
 * queue, never an I/O queue) and come back to the daemon's main loop
 * (logread.h), where the results live: every function here runs on the
 * loop's thread, except health_refresh, which any thread may call.  A read is started every
 * interval seconds (the first right after health_start) and on demand by
 * health_refresh; at most one read per controller is outstanding, a refresh
 * asked for meanwhile is done when it ends.  A failed read keeps the last
 * good values and records the error and its time.
 *
 * Started by admin_start (health_interval of [daemon]) and stopped by
 * admin_stop; reach it with admin_health().
 */
#ifndef NVMEFS_HEALTH_H
#define NVMEFS_HEALTH_H

#include <stdbool.h>
#include <time.h>

#include "nvme.h"

struct ev_loop;
struct logrd_q;
struct health;

/* What is known of one controller's health. */
struct health_ctrl {
	bool valid;               /* smart holds a log read (read_at) */
	struct nvme_health smart; /* the last good read */
	time_t read_at;           /* wall clock of it */
	int err;                  /* of the last attempt: 0, or a negative errno */
	time_t err_at;            /* wall clock of that failure */
	unsigned reads, failures; /* attempts that ended well / badly */
};

/* Start the cache for the controllers ctrls[0..nr), read through q; a NULL
 * entry (a slot with no controller yet) is skipped, and ctrls is read at
 * each use, so the caller may fill a slot later.  interval 0: no timer
 * (health_refresh only).  0, or -ENOMEM. */
int health_start(struct ev_loop *loop, struct logrd_q *q, struct nvme_ctrl *const *ctrls,
                 unsigned nr, unsigned interval, struct health **out);

/* Stop: no read result is looked at afterwards (a read the engine still
 * holds keeps its buffer until its callback).  NULL is a no-op. */
void health_stop(struct health *h);

/* Read controller ctrl's SMART log again soon (e.g. after a SMART
 * asynchronous event).  Any thread, until health_stop.  -EINVAL for a bad
 * index. */
int health_refresh(struct health *h, unsigned ctrl);

/* The cache of controller ctrl; NULL for a bad index or h. */
const struct health_ctrl *health_get(const struct health *h, unsigned ctrl);

/* Critical warning bits by name (bit i is health_warning_names[i]): spare,
 * temperature, reliability, readonly, backup; HEALTH_WARN_NR of them. */
#define HEALTH_WARN_NR 5
extern const char *const health_warning_names[HEALTH_WARN_NR];

#endif

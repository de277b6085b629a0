/* logread.h - log pages read for the daemon's main loop: the engine's
 * asynchronous admin command (nvme_ctrl_get_log_async) with its answer
 * brought back to the loop, for the health cache and the log page commands.
 *
 * The engine calls back on its admin thread; the read is put on a
 * mutex-held list and an ev_async wakes the loop, which runs the read's
 * function with the page.  A read's buffer is its own and stays allocated
 * until the engine's callback has run, whatever happened meanwhile (the
 * reader cancelled it, the queue was stopped): the engine may write the
 * page into it until then.  The queue itself outlives logrd_q_stop while
 * the engine still holds reads; the last callback frees it.
 *
 * Threads: everything on the loop's thread; the engine's callback is the
 * only other thread, and touches only the list.
 * Errors: 0 or a negative errno.
 * Prefix logrd_.
 */
#ifndef NVMEFS_LOGREAD_H
#define NVMEFS_LOGREAD_H

#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct nvme_ctrl;
struct logrd_q;
struct logrd;

/* Runs on the loop's thread with the bytes the device wrote (err 0), or the
 * engine's error; buf is valid during the call only. */
typedef void (*logrd_fn)(void *arg, int err, const void *buf, size_t len);

/* A queue whose reads come back to loop.  -ENOMEM. */
int logrd_q_create(struct ev_loop *loop, struct logrd_q **out);
/* No read's function runs from now on; a read the engine still holds keeps
 * its buffer (and the queue) until the engine's callback.  NULL: no-op. */
void logrd_q_stop(struct logrd_q *q);

/* Read log lid (len bytes, at most NVME_LOG_MAX_BYTES, every namespace) of
 * c; fn(arg) runs later on the loop's thread unless logrd_cancel(*out) came
 * first.  0 (and *out, if out), or a negative errno (fn will not run):
 * -EINVAL for a bad length or no fn, the engine's refusal otherwise. */
int logrd_read(struct logrd_q *q, struct nvme_ctrl *c, uint8_t lid, size_t len, logrd_fn fn,
	       void *arg, struct logrd **out);
/* fn of rd will not run (the buffer stays the engine's until its callback).
 * On the loop's thread, before fn ran.  NULL: no-op. */
void logrd_cancel(struct logrd *rd);

#endif

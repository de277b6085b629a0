/* recovery.h - a controller's recovery: the one state machine of struct
 * nvme_ctrl and everything that moves it (reset, abort escalation, health,
 * isolation, removal, re-attach, stop).  Engine-internal: the public
 * contract is nvme.h; this header is what ctrl.c, qpair.c and reactor.c may
 * call.  Prefix recov_ (and the nvme_ctrl_* entry points nvme.h declares).
 *
 * States (enum nvme_ctrl_state; recov_set_state is the only writer):
 *   LIVE       enabled, every queue pair exists on the device, I/O flows.
 *   RESETTING  the recovery thread is taking the device down and up again
 *              (a reset, a retry of a failed one, or an attach).  The qpairs
 *              hold new submissions in their trackers (QP_HELD); commands the
 *              device still had are taken back once it is disabled.
 *   FAILED     the last bring-up did not work.  The device is disabled or,
 *              when it would not disable, isolated (bus mastering off, every
 *              DMA mapping of it removed), so every command has been failed
 *              with -EIO and submissions fail with -ENODEV.  The recovery
 *              thread tries again after a back-off (retry_ms, doubling, at
 *              most opts.retry_max_ms) until the controller is removed or
 *              stopping.  Only if isolation itself failed are the commands
 *              on the device left outstanding (quarantined): their buffers
 *              are never handed back while the device might write them.
 *   REMOVED    gone (all ones read) or released by nvme_ctrl_remove; I/O
 *              fails with -ENODEV; nvme_ctrl_attach brings it back.
 * Edges:
 *   LIVE      -> RESETTING  timeout escalation, CSTS.CFS, RDY or SHST lost,
 *                           an admin timeout, an Abort not honoured, AER, user
 *   LIVE      -> FAILED     a stop whose drain ran out cancelled its commands
 *   RESETTING -> LIVE       bring-up done
 *   RESETTING -> FAILED     bring-up failed
 *   FAILED    -> RESETTING  retry after the back-off
 *   LIVE | RESETTING | FAILED -> REMOVED   the device is gone, or released
 *   REMOVED   -> RESETTING  nvme_ctrl_attach on a new bus
 * Anything else is refused (recov_set_state returns false).
 *
 * Threads.  Every long step (reset, retry, isolation after a removal, stop
 * cancel, shutdown) runs on the controller's recovery thread, one at a time,
 * which also reaps the admin CQ; nvme_ctrl_remove and nvme_ctrl_attach run
 * on their caller's thread.  reset_lock serialises all of them.  What a
 * qpair's I/O path uses is touched only on its reactor, through on_reactors
 * (each call acknowledged per call: a late acknowledgement can never satisfy
 * a later wait), or on the caller's thread once its reactor has exited and
 * run what was queued before; its cold recovery fields (ring_mapped,
 * pool_mapped, pool_map_iova, created_on_dev) are written under reset_lock.
 * Nothing here runs on a reactor except recov_reset_async,
 * recov_check_health, recov_dead and recov_send_abort: they take short locks
 * and never wait for the device or for another step (recov_dead runs the
 * abandoned admin commands' callbacks there, with -ENODEV).
 *
 * The buffer invariant (qpair.c) is kept by ordering: a command is completed
 * (and its buffer handed back) only after the device was disabled, isolated
 * or found gone -- never before the mappings are removed and bus mastering is
 * off when it would not disable.
 */
#ifndef NVMEFS_RECOVERY_H
#define NVMEFS_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme.h"

struct nvme_ctrl;
struct nvme_qpair;

/* Start and stop the recovery thread (nvme_ctrl_open / close). */
int recov_start(struct nvme_ctrl *c);
void recov_stop_thread(struct nvme_ctrl *c);
/* An admin command was posted: the recovery thread reaps while any is out. */
void recov_kick(struct nvme_ctrl *c);
/* AERs completed: the recovery thread processes them (RECOV_W_AEN). */
void recov_aen_kick(struct nvme_ctrl *c);
/* Every qpair of c forgets its cached namespace, on its reactor: posted,
 * not waited for (calls posted to a reactor later run after it).
 * reset_lock held; not on a reactor. */
int recov_ns_invalidate(struct nvme_ctrl *c);

/* The only writer of c->state (with its static sibling that also names the
 * state the edge must start from: a reset only from LIVE, a retry only from
 * FAILED, an attach only from REMOVED): true when the edge from the current
 * state is allowed (and then taken, emitted once to the event callback). */
bool recov_set_state(struct nvme_ctrl *c, enum nvme_ctrl_state to);

/* Reactor or any thread, never blocks: ask for a reset (see
 * nvme_ctrl_reset_async). */
int recov_reset_async(struct nvme_ctrl *c, const char *why);
/* A reactor's periodic look at CSTS (rate limited per controller): all ones
 * -> recov_dead; CFS, RDY clear or SHST set while LIVE -> a reset. */
void recov_check_health(struct nvme_ctrl *c, uint64_t now);
/* The device is gone (all ones read): REMOVED now; the recovery thread
 * isolates it and fails everything outstanding. */
void recov_dead(struct nvme_ctrl *c, const char *why);
/* Abort of qid/cid (a reactor's timeout scan), asynchronous; 0 when sent. */
int recov_send_abort(struct nvme_ctrl *c, uint16_t qid, uint16_t cid);

/* ---- qpair.c: a qpair's part, each run on its reactor (or with the
 * reactor gone) by recov_on_reactors ---- */
/* Hold new submissions (QP_HELD). */
void nvme_qpair_rec_hold(struct nvme_qpair *qp);
/* The device is disabled or isolated: reap what it posted, empty the rings,
 * turn every command still outstanding into a held one (one retry) or fail
 * it with -EIO when its retries are used up. */
void nvme_qpair_rec_stop(struct nvme_qpair *qp);
/* The queues exist again: take the (maybe new) bus and doorbells, put the
 * held commands on the device -- those of a namespace that failed across
 * the reset fail with -EIO instead. */
void nvme_qpair_rec_restart(struct nvme_qpair *qp);
/* Failed or removed, the device can no longer touch memory: every command
 * fails with -EIO, new submissions with -ENODEV. */
void nvme_qpair_rec_fail(struct nvme_qpair *qp);
/* Failed, and the device could be neither disabled nor isolated: held
 * commands fail with -EIO, those on the device stay (quarantined: not
 * counted as in flight, never completed until a later disable), new
 * submissions -ENODEV. */
void nvme_qpair_rec_quarantine(struct nvme_qpair *qp);
/* An Abort of cid came back without aborting it: true if cid is still
 * outstanding (then the caller resets). */
bool nvme_qpair_rec_still_aborting(struct nvme_qpair *qp, uint16_t cid);

#endif

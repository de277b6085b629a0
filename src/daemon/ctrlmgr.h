/* ctrlmgr.h - the controller manager: the set of controllers nvmefsd
 * serves and each one's life after start.  It opens them, watches them
 * (the engine's event and namespace callbacks, a VFIO device's request and
 * error interrupts), takes a vanished one out of the engine, detaches one
 * on purpose (its write cache flushed first) and attaches one again, applies
 * namespace changes to the mount's files, and keeps the view of the files
 * admin shows.
 *
 * States of a controller slot (enum cm_state; cm_set_state is the only
 * writer).  The engine keeps its own state of the device (nvme.h: live,
 * resetting, failed, removed) and recovers it by itself; this one is the
 * daemon's: whether the controller is served, and which of its own steps
 * is under way.
 *   EMPTY      no controller in the slot.
 *   OPENING    its device is being opened and brought up; no files yet.
 *   LIVE       in service: its files are in the mount (whatever the engine
 *              says of the device: a reset or a failed one is the engine's
 *              to handle, and its files then fail with EIO).
 *   REMOVED    gone without being asked: the kernel wanted the device back
 *              (hot removal, unbind) or it stopped answering.  Out of the
 *              engine, a VFIO device released; its files stay and fail
 *              every I/O with EIO until it is attached again.
 *   DETACHING  taken away on purpose (nvmefsctl detach): its files are
 *              gone, its write cache is being flushed and it is shut down.
 *   DETACHED   taken away on purpose, done: no files, device released.
 *   ATTACHING  a thread of its own re-opens the device and brings it up
 *              (nvmefsctl attach); the loop learns how it ended.
 * Edges:
 *   EMPTY     -> OPENING    start-up opens the config's controllers
 *   OPENING   -> LIVE       brought up
 *   OPENING   -> EMPTY      bring-up failed
 *   LIVE      -> REMOVED    the device went away (or, failed, is released
 *                           for an attach)
 *   LIVE | REMOVED -> DETACHING   nvmefsctl detach
 *   DETACHING -> DETACHED   shut down and released (or, if that failed,
 *                           its files gone all the same)
 *   REMOVED | DETACHED -> ATTACHING   nvmefsctl attach
 *   ATTACHING -> LIVE       brought up (a detached one's files come back)
 *   ATTACHING -> REMOVED | DETACHED   it failed: back where it came from
 * Anything else is refused (cm_set_state returns false, nothing changes).
 * A planned detach (DETACHING, DETACHED) is told apart from a failure or a
 * removal (REMOVED) by its state; cm_state_name names each.
 *
 * Threads: everything here runs on the main thread (start-up, the loop,
 * teardown), except the callbacks the engine calls (cm_ctrl.event and
 * .aen are posted to the loop) and a slot's attach thread, which writes
 * only the attach fields of its slot until it posts attach_done.
 * Ownership: the daemon owns the slots (daemon.h); a slot owns its
 * watchers, its eventfds, a removed software controller's kept bus and the
 * copied namespace changes.
 * Errors: functions return 0 or a negative errno; the admin callbacks also
 * write a sentence for the operator into err.
 * Prefix cm_.
 */
#ifndef NVMEFS_CTRLMGR_H
#define NVMEFS_CTRLMGR_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "nvme.h"

struct daemon;
struct admin_ns;
struct sim;

/* Slots a daemon keeps beyond the controllers it starts with, for those a
 * reload adds (at most CFG_MAX_CTRLS in all). */
#define CM_SPARE_SLOTS 8

enum cm_state {
	CM_EMPTY,
	CM_OPENING,
	CM_LIVE,
	CM_REMOVED,
	CM_DETACHING,
	CM_DETACHED,
	CM_ATTACHING,
	CM_NR_STATES
};

/* "empty", "opening", "live", "removed", "detaching", "detached",
 * "attaching"; "?" for a value out of range. */
const char *cm_state_name(enum cm_state s);
/* Whether the edge from -> to is in the table above. */
bool cm_edge_allowed(enum cm_state from, enum cm_state to);

/* What the daemon keeps per controller slot. */
struct cm_ctrl {
	struct daemon *d;
	unsigned idx;
	const char *name;        /* cc.name (NULL while EMPTY) */
	struct cfg_controller cc; /* its config section, as it was opened */
	enum cm_state state;     /* cm_set_state only */
	enum cm_state attach_from; /* REMOVED or DETACHED: where an attach goes back to */
	struct sim *sim;         /* the software controller, NULL for PCI */
	struct nvme_bus *kept;   /* a removed sim's bus, kept for attach */
	bool unconfigured;       /* detached because a reload's config lacks it */
	/* an add (OPENING): what add_thread made, for add_finish */
	struct nvme_ctrl *add_ctrl;
	struct sim *add_sim;
	struct nvme_qpair **add_qp; /* one per reactor */
	bool watched;            /* cm_watch ran, cm_unwatch did not */
	int req_efd, err_efd;    /* VFIO request / error IRQ eventfds (-1: none) */
	ev_io req_w, err_w;
	ev_async event;          /* the engine's event callback, from any thread */
	enum nvme_ctrl_state seen; /* the engine's state last logged */
	/* attach: the thread, its bus and outcome (attach_done tells the
	 * loop); attach_state for status: NULL, "attaching", "live", "failed" */
	pthread_t attach_thr;
	bool attach_running;
	struct nvme_bus *attach_bus;
	int attach_rc;
	char attach_err[512];
	const char *attach_state;
	ev_async attach_done;
	/* namespace events, copied on the engine's thread for the loop */
	pthread_mutex_t aen_mu;
	struct nvme_ns_change *aen_q;
	unsigned aen_n, aen_cap;
	unsigned aen_other;       /* 1 << enum nvme_aen_kind of the other events */
	ev_async aen;
};

/* The only writer of c->state: true when the edge from the current state
 * is allowed (and then taken, logged at debug level), false otherwise
 * (nothing changes). */
bool cm_set_state(struct cm_ctrl *c, enum cm_state to);

/* Start-up: open and bring up every controller of the config, in its
 * order, into slots 0.. (d->nr_ctrls counts them).  The first failure is
 * logged and returned. */
int cm_open_all(struct daemon *d);
/* Watch slot i's controller: the engine's callbacks, and a VFIO device's
 * request and error interrupts.  After the reactors exist, before they run. */
int cm_watch(struct daemon *d, unsigned i);
/* Teardown: an attach still running ends first (bounded by the bring-up). */
void cm_attach_wait(struct daemon *d);
/* Teardown, reactors stopped: stop watching slot i (the loop must still
 * exist); its controller is closed by the caller. */
void cm_unwatch(struct daemon *d, unsigned i);

/* STATUS= for systemctl status: what is served, and every controller that
 * is not live ("serving 3 namespaces at /srv/nvme; nvme1 removed").
 * cm_status_update sends it while d->status_live (the life cycle's: set
 * while serving; a stop or restart writes its own line); the controller
 * manager calls it at each change. */
void cm_status_format(struct daemon *d, char *buf, size_t len);
void cm_status_update(struct daemon *d);

/* The files shown now, for admin (namespaces, status): rebuilt on the
 * loop after every change of the table.  cm_ns_view is admin_ctx.ns_view. */
int cm_ns_view_refresh(struct daemon *d);
const struct admin_ns *cm_ns_view(void *arg, unsigned *nr);

/* True while slot i's files are not in the mount on purpose (detaching,
 * detached, or attaching back from detached). */
bool cm_files_away(const struct daemon *d, unsigned i);

/* admin_ctx.attach, .attach_state and .detach (arg is the daemon):
 * nvmefsctl attach starts re-opening a removed, failed or detached
 * controller (its outcome shows in status); detach takes a live or removed
 * one away on purpose and returns the number of files that went. */
int cm_attach(void *arg, unsigned i, char *err, size_t errlen);
const char *cm_attach_state(void *arg, unsigned i, const char **why);
int cm_detach(void *arg, unsigned i, char *err, size_t errlen);
/* admin_ctx.ctrl_away: cm_files_away of slot i (arg is the daemon). */
bool cm_away(void *arg, unsigned i);

/* A reload with next, the config file read again: the controllers it no
 * longer names are detached (as nvmefsctl detach, flush first: their files
 * go) and stay in their slots, marked unconfigured; those it names anew are
 * opened on a thread each and, once up, get a queue pair on every reactor
 * and their files (OPENING -> LIVE), in a free slot; one removed earlier
 * and named again with the same section is attached in its slot.  The
 * controllers kept are not touched, whatever their sections say now.  The
 * running config's controllers become next's; its other settings stay
 * (they apply at the next restart: msg says so).
 * 0: next names the same controllers (nothing done); 1: applied, with what
 * was done in msg; a negative errno with the reason in err, nothing done:
 * -EBUSY while a controller is being opened, attached or detached,
 * -EOPNOTSUPP for an addition a pool per controller cannot be kept for
 * (dma_isolation = controller, the daemon started with one controller), or
 * a removed one named again with other settings, -ENOSPC with no free
 * slot. */
int cm_reload(struct daemon *d, const struct cfg *next, char *msg, size_t msglen, char *err,
	      size_t errlen);

#endif

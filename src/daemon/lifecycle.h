/* lifecycle.h - the daemon's life cycle: start-up, serving, the restart in
 * place, the bounded stop, and how each is told to systemd.
 *
 * States (enum lc_state; lc_set_state is the only writer):
 *   STARTING    the controllers are opened and brought up (each bounded by
 *               the engine's bring-up timeouts), the reactors made, the
 *               mount made (fusefs_create), the admin socket opened.  No
 *               signal is handled and no admin request answered yet: the
 *               loop does not run.
 *   ADOPTING    as STARTING, serving the connection a previous run left in
 *               the fd store (adopt.h) instead of mounting: nothing is
 *               mounted and no INIT awaited; the kernel is asked to resend
 *               what that run left unanswered before the reactors read.
 *   SERVING     the reactors serve the mount; the loop answers the admin
 *               socket (attach, detach, restart, reload of the controllers:
 *               ctrlmgr.h) and signals (TERM and INT stop, USR2 restarts,
 *               USR1 logs the figures, HUP is ignored).
 *   RESTARTING  replacing the process image in place (upgrade.h): no new
 *               FUSE request is taken, the ones taken are answered, at most
 *               lc_drain_wait(); past it the daemon exits 1 and the service
 *               manager's restart adopts the connection.  A stop asked now
 *               wins (DRAINING, the same drain); another restart is refused.
 *   DRAINING    a stop: no new FUSE request, the ones taken answered, at
 *               most lc_drain_wait(); then, if some are left, every
 *               controller with commands outstanding ends them (the cancel
 *               phase, LC_CANCEL_MAX_S), and the stop goes on regardless.
 *   STOPPING    the loop has ended: unmount (or, to re-execute, keep the
 *               mount and the fd store), end the reactors (LC_JOIN_MAX_S
 *               after a cancel), shut every controller down at once
 *               (LC_SHUTDOWN_MAX_S), free; past a bound, exit without
 *               freeing what a device may still reach.
 * Edges:
 *   STARTING  -> ADOPTING | SERVING    the mount is adopted / made
 *   STARTING | ADOPTING -> STOPPING    start-up failed
 *   ADOPTING  -> SERVING               the reactors serve it
 *   SERVING   -> RESTARTING            nvmefsctl restart, SIGUSR2
 *   SERVING   -> DRAINING              SIGTERM, SIGINT, the mount went away
 *   RESTARTING -> DRAINING             a stop asked during the restart
 *   RESTARTING | DRAINING -> STOPPING  drained (or the cancel phase ended)
 * Anything else is refused (lc_set_state returns false, nothing changes).
 *
 * Each phase of a stop tells systemd its bound as it starts
 * (EXTEND_TIMEOUT_USEC); LC_STOP_MAX_S, their sum, is below the unit's
 * TimeoutStopSec (LC_UNIT_TIMEOUT_STOP_S, a static assertion here;
 * t-install checks the unit says the same).
 *
 * Threads: the main thread, start-up, loop and teardown; nothing here is
 * called from another thread.  Errors: 0 or a negative errno, logged.
 * Prefix lc_.
 */
#ifndef NVMEFS_LIFECYCLE_H
#define NVMEFS_LIFECYCLE_H

#include <assert.h>
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#include "admin.h"
#include "log.h"
#include "nvme.h"

struct daemon;
struct upg_check;

/* The longest a stop waits for requests in flight, whatever io_timeout_ms
 * (up to 600 s) and io_retries say. */
#define LC_DRAIN_MAX_S 30
/* The cancel phase: the engine's bound, and slack for the requests to be
 * answered once their commands ended. */
#define LC_CANCEL_MAX_S (NVME_CANCEL_MAX_MS / 1000 + 10)
/* After a cancel, the reactors are given this long to end. */
#define LC_JOIN_MAX_S 5
/* CC.SHN of every controller at once, and slack. */
#define LC_SHUTDOWN_MAX_S (NVME_SHUTDOWN_MAX_MS / 1000 + 5)
#define LC_STOP_MAX_S (LC_DRAIN_MAX_S + LC_CANCEL_MAX_S + LC_JOIN_MAX_S + LC_SHUTDOWN_MAX_S)
/* systemd/nvmefs.service's TimeoutStopSec */
#define LC_UNIT_TIMEOUT_STOP_S 120
static_assert(LC_STOP_MAX_S < LC_UNIT_TIMEOUT_STOP_S,
	      "the unit's TimeoutStopSec must cover the longest stop");
static_assert(NVME_CANCEL_MAX_MS % 1000 == 0 && NVME_SHUTDOWN_MAX_MS % 1000 == 0,
	      "the engine's bounds are whole seconds here");

enum lc_state {
	LC_STARTING,
	LC_ADOPTING,
	LC_SERVING,
	LC_RESTARTING,
	LC_DRAINING,
	LC_STOPPING,
	LC_NR_STATES
};

/* "starting", "adopting", "serving", "restarting", "draining", "stopping";
 * "?" out of range. */
const char *lc_state_name(enum lc_state s);
/* Whether the edge from -> to is in the table above. */
bool lc_edge_allowed(enum lc_state from, enum lc_state to);

/* The life cycle's part of struct daemon. */
struct lc {
	enum lc_state state;    /* lc_set_state only */
	bool reexec;            /* re-execute once stopped (RESTARTING, then STOPPING) */
	bool reactors_running;  /* started, not yet joined */
	bool cancelling;        /* the drain ran out: the controllers end their commands */
	bool gave_up;           /* requests cancelled, or left unanswered past every bound */
	bool abandoned;         /* reactors or controllers busy past the bound: leave
				 * without freeing */
	ev_timer drain;
	ev_tstamp drain_deadline;
	/* a restart's check of the installed binary while it runs (upgrade.h):
	 * its output and its exit watched, its bound, and whom to tell how it
	 * ended */
	struct upg_check *chk;
	ev_io chk_io;
	ev_child chk_child;     /* the loop reaps every child: its status comes here */
	ev_timer chk_timer;
	admin_restart_done chk_done;
	void *chk_tok;
};

/* The only writer of the state: true when the edge is allowed (and taken,
 * logged at debug level). */
bool lc_set_state(struct lc *lc, enum lc_state to);

/* ---- start-up (STARTING) ---- */
/* Create one reactor per I/O queue (fewer when a controller grants fewer),
 * choose the FUSE transport, make each controller's queue pair on each
 * reactor.  After cm_open_all. */
int lc_start_reactors(struct daemon *d);
/* d->fo for fusefs_create, from the config and the reactors. */
void lc_fuse_opts(struct daemon *d);
/* The admin socket and the view of the files it shows.  After
 * fusefs_create. */
int lc_start_admin(struct daemon *d);
/* Run the reactors (d->lc.reactors_running); the first failure stops those
 * started and is returned. */
int lc_run_reactors(struct daemon *d);

/* ---- serving ---- */
/* The stats lines (SIGUSR1; at debug level when stopping). */
void lc_log_stats(struct daemon *d, enum log_level lvl);
/* admin_ctx.restart (arg is the daemon; SIGUSR2 with done NULL): apply
 * the controllers a reload adds or removes (then done, 0), or check that
 * the installed binary would take the connection over: a child the loop
 * watches (upgrade.h: its output drained, its exit taken from the loop's
 * reaper, at most UPG_CHECK_MAX_MS, killed past it), ADMIN_RESTART_PENDING meanwhile; once it says yes, drain and
 * re-execute it (lc_finish does the exec).  done(tok, ...) gets the
 * verdict; a stop asked meanwhile ends the check (-ECANCELED).  One check
 * at a time (-EBUSY).  A refusal changes nothing, its reason (with the
 * lines the check printed before it) logged and in err. */
int lc_restart(void *arg, admin_restart_done done, void *tok, char *msg, size_t msglen,
	       char *err, size_t errlen);

/* ---- stopping ---- */
/* A stop (why: the signal's name, "mount gone"): DRAINING, or, during a
 * restart, a stop instead of the exec.  Idempotent. */
void lc_begin_stop(struct daemon *d, const char *why);
/* The drain's bound for this config: min(2 io_timeout_ms + 5 s,
 * LC_DRAIN_MAX_S). */
double lc_drain_wait(const struct daemon *d);
/* STOPPING: everything the start made, undone in order, within the bounds
 * above (d->lc.abandoned when one ran out). */
void lc_teardown(struct daemon *d);
/* After lc_teardown, with run's result: exit without freeing when
 * abandoned, re-execute when restarting (returns only if the exec failed),
 * log how the stop ended.  The process's exit status. */
int lc_finish(struct daemon *d, int rc);

#endif

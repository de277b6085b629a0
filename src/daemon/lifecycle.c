/* lifecycle.c - the daemon's life cycle (contract in lifecycle.h): the
 * start-up steps main.c wires, the restart in place, and the bounded stop.
 *
 * Stopping is bounded, in three phases, each told to systemd
 * (EXTEND_TIMEOUT_USEC) as it starts:
 *   drain     stop taking FUSE requests and wait for those taken, at most
 *             min(2 io_timeout_ms + 5 s, LC_DRAIN_MAX_S);
 *   cancel    if some are still unanswered, every controller with commands
 *             outstanding ends them (nvme_ctrl_cancel_async: abrupt
 *             shutdown, disable, or isolation when it will not disable), so
 *             each such request is answered EIO, at most LC_CANCEL_MAX_S;
 *   shutdown  unmount, stop the reactors (after a cancel at most
 *             LC_JOIN_MAX_S), CC.SHN normal on every controller at once (at
 *             most NVME_SHUTDOWN_MAX_MS), delete, free, exit.
 * Exit 0 when every request was answered by the device, 3 when the stop had
 * to cancel (or, past every bound, gave up waiting and left without
 * freeing: the kernel then answers what remains when the mount goes).
 *
 * A planned upgrade replaces the process image in place (upgrade.h):
 * nvmefsctl restart or SIGUSR2 first has the installed binary check that it
 * would adopt the connection (refused, with its reason, and nothing stops
 * if not); then the daemon stops reading requests, drains what it has
 * taken (the drain bound of a stop), shuts the controllers down as a stop
 * does, but neither unmounts nor empties the fd store, and execs the binary
 * with the connection and the state record handed over LISTEN_FDS-style.
 * The new image adopts it as after a crash; the kernel queued what came
 * meanwhile.  A drain that runs out, a shutdown that fails or an exec that
 * fails exits 1 instead: the service manager restarts the daemon, which
 * adopts the connection from the store and has the kernel resend what was
 * left unanswered.
 */
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "cpumap.h"
#include "ctrlmgr.h"
#include "daemon.h"
#include "fdstore.h"
#include "fuse_proto.h"
#include "fuse_fs.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "sim.h"
#include "upgrade.h"

#define POOL_BYTES (32u << 20)  /* DMA buffers per reactor: 32 requests of 1 MiB */
#define POOL_MIB_MAX 4096u
/* dma_isolation = controller: the least request memory of one controller's
 * pool, two of the largest requests (each a 2 MiB buddy block) */
#define ISO_POOL_MIN (4u << 20)
#define DRAIN_POLL 0.01         /* seconds between checks while draining */

/* ---- the states ---- */

static const char *const lc_state_names[LC_NR_STATES] = {
	[LC_STARTING] = "starting",     [LC_ADOPTING] = "adopting", [LC_SERVING] = "serving",
	[LC_RESTARTING] = "restarting", [LC_DRAINING] = "draining", [LC_STOPPING] = "stopping",
};

/* lc_edges[from] has bit 1 << to for each allowed edge (lifecycle.h) */
static const unsigned lc_edges[LC_NR_STATES] = {
	[LC_STARTING] = 1u << LC_ADOPTING | 1u << LC_SERVING | 1u << LC_STOPPING,
	[LC_ADOPTING] = 1u << LC_SERVING | 1u << LC_STOPPING,
	[LC_SERVING] = 1u << LC_RESTARTING | 1u << LC_DRAINING,
	[LC_RESTARTING] = 1u << LC_DRAINING | 1u << LC_STOPPING,
	[LC_DRAINING] = 1u << LC_STOPPING,
	[LC_STOPPING] = 0,
};

const char *lc_state_name(enum lc_state s)
{
	return (unsigned)s < LC_NR_STATES ? lc_state_names[s] : "?";
}

bool lc_edge_allowed(enum lc_state from, enum lc_state to)
{
	return (unsigned)from < LC_NR_STATES && (unsigned)to < LC_NR_STATES &&
	       (lc_edges[from] & 1u << to);
}

bool lc_set_state(struct lc *lc, enum lc_state to)
{
	if (!lc_edge_allowed(lc->state, to)) {
		log_debug("daemon: %s -> %s refused", lc_state_name(lc->state), lc_state_name(to));
		return false;
	}
	log_debug("daemon: %s -> %s", lc_state_name(lc->state), lc_state_name(to));
	lc->state = to;
	return true;
}

/* RESTARTING, DRAINING or STOPPING: no new request is taken */
static bool lc_stopping(const struct lc *lc)
{
	return lc->state >= LC_RESTARTING;
}

void lc_log_stats(struct daemon *d, enum log_level lvl)
{
	struct fusefs_stats fst;

	for (unsigned i = 0; i < d->slots; i++) {
		struct sim *s = d->cm[i].sim;
		struct sim_stats st;

		if (!s)
			continue;
		sim_get_stats(s, &st);
		log_msg(lvl,
			"stats: %s: sim reads=%llu writes=%llu flushes=%llu write_zeroes=%llu dsm=%llu "
			"bytes_read=%llu bytes_written=%llu dma_errors=%llu invalid_cmds=%llu "
			"fua_writes=%llu wc_dirty_blocks=%llu wc_destaged=%llu powerfails=%llu "
			"shutdowns=%llu offloaded=%llu offload_back=%llu",
			d->names[i], (unsigned long long)st.reads, (unsigned long long)st.writes,
			(unsigned long long)st.flushes, (unsigned long long)st.write_zeroes,
			(unsigned long long)st.dsm, (unsigned long long)st.bytes_read,
			(unsigned long long)st.bytes_written, (unsigned long long)st.dma_errors,
			(unsigned long long)st.invalid_cmds, (unsigned long long)st.fua_writes,
			(unsigned long long)st.wc_dirty_blocks, (unsigned long long)st.wc_destaged,
			(unsigned long long)st.powerfails, (unsigned long long)st.shutdowns,
			(unsigned long long)st.offloaded, (unsigned long long)st.offload_back);
	}
	if (d->fs) {
		fusefs_stats_get(d->fs, &fst);
		log_msg(lvl,
			"stats: fuse reads=%llu writes=%llu rmw_writes=%llu fsyncs=%llu flushes_sent=%llu "
			"dsync_writes=%llu fua_writes=%llu dsync_flushes=%llu "
			"fallocs=%llu errors=%llu lock_waits=%llu resource_waits=%llu resent=%llu",
			(unsigned long long)fst.reads, (unsigned long long)fst.writes,
			(unsigned long long)fst.rmw_writes, (unsigned long long)fst.fsyncs,
			(unsigned long long)fst.flushes_sent, (unsigned long long)fst.dsync_writes,
			(unsigned long long)fst.fua_writes, (unsigned long long)fst.dsync_flushes,
			(unsigned long long)fst.fallocs,
			(unsigned long long)fst.errors, (unsigned long long)fst.lock_waits,
			(unsigned long long)fst.resource_waits,
			(unsigned long long)fst.resent_requests);
		log_msg(lvl,
			"stats: sched inflight=%llu parked_mem=%llu parked_slot=%llu parked_lock=%llu "
			"waits_mem=%llu waits_slot=%llu waits_lock=%llu lock_wait_us=%llu "
			"bounce_bytes=%llu bounce_peak=%llu channel_pauses=%llu "
			"read_p99_us=%llu write_p99_us=%llu",
			(unsigned long long)fst.inflight,
			(unsigned long long)fst.parked[FUSEFS_WAIT_MEM],
			(unsigned long long)fst.parked[FUSEFS_WAIT_SLOT],
			(unsigned long long)fst.parked[FUSEFS_WAIT_LOCK],
			(unsigned long long)fst.waits[FUSEFS_WAIT_MEM],
			(unsigned long long)fst.waits[FUSEFS_WAIT_SLOT],
			(unsigned long long)fst.waits[FUSEFS_WAIT_LOCK],
			(unsigned long long)(fst.lock_wait_ns / 1000),
			(unsigned long long)fst.bounce_bytes, (unsigned long long)fst.bounce_peak,
			(unsigned long long)fst.channel_pauses,
			(unsigned long long)(nvme_lat_percentile(fst.op[FUSEFS_OP_READ].lat_ns, 99.0) /
					     1000),
			(unsigned long long)(nvme_lat_percentile(fst.op[FUSEFS_OP_WRITE].lat_ns, 99.0) /
					     1000));
	}
}

/* ---- stopping ---- */

/* End the commands of every controller that still has some (cancel phase). */
static void cancel_outstanding(struct daemon *d)
{
	for (unsigned i = 0; i < d->slots; i++) {
		unsigned out = 0;

		if (!d->ctrls[i])
			continue;
		for (unsigned r = 0; r < d->nr_reactors; r++) {
			struct nvme_qpair *qp = d->qpairs[(size_t)r * d->slots + i];

			if (qp)
				out += nvme_qpair_inflight(qp);
		}
		if (out)
			nvme_ctrl_cancel_async(d->ctrls[i]);
	}
}

static void drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = w->data;
	struct lc *lc = &d->lc;
	(void)revents;

	if (fusefs_drained(d->fs)) {
		log_info("drained: no request in flight");
	} else if (ev_now(loop) < lc->drain_deadline) {
		return;
	} else if (lc->state == LC_RESTARTING) {
		/* cancelling would fail them with EIO; freeing under commands still
		 * outstanding is worse: leave as a crash does, and the store's
		 * connection is adopted by the restarted daemon, which has the
		 * kernel resend what is unanswered */
		log_err("restart: %u request(s) still in flight at the drain deadline: exiting "
			"for the service manager to restart the daemon (the connection stays in "
			"its fd store; they are resent)",
			fusefs_inflight(d->fs));
		_exit(OPT_EXIT_FAILURE);
	} else if (!lc->cancelling) {
		log_warn("%u request(s) still in flight at the drain deadline: ending the commands "
			 "outstanding on the controllers",
			 fusefs_inflight(d->fs));
		lc->cancelling = true;
		lc->gave_up = true;
		cancel_outstanding(d);
		lc->drain_deadline = ev_now(loop) + LC_CANCEL_MAX_S;
		notify_extend((uint64_t)(LC_CANCEL_MAX_S + LC_JOIN_MAX_S + LC_SHUTDOWN_MAX_S) *
				      1000000,
			      "stopping: ending the commands outstanding");
		return;
	} else {
		log_warn("%u request(s) still unanswered after the controllers ended their "
			 "commands: stopping anyway",
			 fusefs_inflight(d->fs));
	}
	ev_timer_stop(loop, w);
	ev_break(loop, EVBREAK_ALL);
}

double lc_drain_wait(const struct daemon *d)
{
	/* the engine fails a stuck command after its timeout (and a reset):
	 * allow for that, then end what is left (capped: a stop must end
	 * within the unit's TimeoutStopSec) */
	double wait = 2.0 * d->cfg->engine.io_timeout_ms / 1000.0 + 5.0;

	return wait > LC_DRAIN_MAX_S ? LC_DRAIN_MAX_S : wait;
}

/* SERVING -> RESTARTING (restart) or DRAINING: stop taking requests and
 * drain; RESTARTING -> DRAINING: a stop wins over the restart. */
static void check_end(struct daemon *d, bool timed_out, bool cancel);

static void begin_stop(struct daemon *d, const char *why, bool restart)
{
	struct lc *lc = &d->lc;
	double wait;

	if (lc_stopping(lc)) {
		if (lc->state == LC_RESTARTING && !restart) {
			/* a stop asked during a restart wins: the same drain goes
			 * on, then the stop's unmount instead of the exec */
			(void)lc_set_state(lc, LC_DRAINING);
			lc->reexec = false;
			log_info("%s: stopping instead of restarting", why);
			notify_stopping("stopping (%s)", why);
			return;
		}
		log_info("%s: already %s", why,
			 lc->state == LC_RESTARTING ? "restarting" : "stopping");
		return;
	}
	if (!lc_set_state(lc, restart ? LC_RESTARTING : LC_DRAINING))
		return;
	/* a stop wins over a restart still being checked (told now, once the
	 * state says stopping: a request that reply lets through is refused) */
	if (lc->chk && !restart)
		check_end(d, false, true);
	d->status_live = false; /* the stop's own lines from now on */
	lc->reexec = restart;
	log_info("%s: %s: no new requests, draining %u in flight", why,
		 restart ? "restarting" : "stopping", fusefs_inflight(d->fs));
	if (restart)
		notify_reloading("restarting (%s): re-executing %s", why, d->binary);
	else
		notify_stopping("stopping (%s)", why);
	fusefs_stop(d->fs);
	wait = lc_drain_wait(d);
	lc->drain_deadline = ev_now(d->loop) + wait;
	notify_extend((uint64_t)((wait + LC_CANCEL_MAX_S + LC_JOIN_MAX_S + LC_SHUTDOWN_MAX_S) * 1e6),
		      "%s (%s): draining", restart ? "restarting" : "stopping", why);
	ev_timer_init(&lc->drain, drain_cb, 0.0, DRAIN_POLL);
	lc->drain.data = d;
	ev_timer_start(d->loop, &lc->drain);
}

void lc_begin_stop(struct daemon *d, const char *why)
{
	begin_stop(d, why, false);
}

/* ---- the installed binary's check (upgrade.h), watched by the loop ---- */

/* The check ended (its output and the child, or its bound, or cancel: a
 * stop came first): the verdict, and the re-exec if it says yes. */
static void check_end(struct daemon *d, bool timed_out, bool cancel)
{
	struct lc *lc = &d->lc;
	admin_restart_done done = lc->chk_done;
	void *tok = lc->chk_tok;
	char msg[PATH_MAX + 64] = "", err[4096] = "";
	int rc;

	ev_io_stop(d->loop, &lc->chk_io);
	ev_timer_stop(d->loop, &lc->chk_timer);
	/* reaped by the loop, its watcher not yet run: the status is there */
	if (ev_is_pending(&lc->chk_child)) {
		upg_check_reaped(lc->chk, lc->chk_child.rstatus);
		ev_clear_pending(d->loop, &lc->chk_child);
	}
	ev_child_stop(d->loop, &lc->chk_child);
	rc = upg_check_end(lc->chk, timed_out, err, sizeof(err));
	lc->chk = NULL;
	lc->chk_done = NULL;
	lc->chk_tok = NULL;
	if (cancel) {
		rc = -ECANCELED;
		snprintf(err, sizeof(err), "the daemon is stopping: the restart was not done");
	}
	if (rc) {
		log_warn("restart refused: %s", err);
	} else {
		log_info("restart: %s would adopt the connection: re-executing it in place (pid %d)",
			 d->binary, (int)getpid());
		snprintf(msg, sizeof(msg), "pid %d re-executes %s", (int)getpid(), d->binary);
		begin_stop(d, "restart", true);
	}
	if (done)
		done(tok, rc, msg, err);
}

/* Its output ended and it exited (in either order): the verdict. */
static void check_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct daemon *d = w->data;
	(void)revents;

	if (upg_check_read(d->lc.chk) == 0)
		return;
	ev_io_stop(loop, w);
	if (!ev_is_active(&d->lc.chk_child))
		check_end(d, false, false);
}

/* The loop's reaper (libev's default loop reaps every child on SIGCHLD)
 * hands the status over: never waitpid here, it would find nothing. */
static void check_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct daemon *d = w->data;
	(void)revents;

	upg_check_reaped(d->lc.chk, w->rstatus);
	ev_child_stop(loop, w);
	if (!ev_is_active(&d->lc.chk_io))
		check_end(d, false, false);
}

static void check_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	check_end(w->data, true, false);
}

/* Whether the running daemon can be replaced in place, and whether the
 * installed binary would take the connection over: 0 once its check runs,
 * or an errno with the reason in err.  Nothing stops here. */
static int restart_check(struct daemon *d, char *err, size_t errlen)
{
	const struct cfg_controller *vc;
	const struct fusefs_ns_desc *ns;
	unsigned nr;
	bool uring;
	int rc;

	if (lc_stopping(&d->lc)) {
		snprintf(err, errlen, "the daemon is %s already",
			 d->lc.state == LC_RESTARTING ? "restarting" : "stopping");
		return -EBUSY;
	}
	/* auto may have been granted either: what INIT agreed decides (an
	 * adopted connection is always /dev/fuse, its init flags unset here) */
	pthread_mutex_lock(&d->init_mu);
	uring = d->init.flags & FUSE_OVER_IO_URING;
	pthread_mutex_unlock(&d->init_mu);
	if (uring || fusefs_transport_active(d->fs) == FUSEFS_TRANSPORT_URING) {
		snprintf(err, errlen,
			 "the connection is served over io_uring, whose queues die with this "
			 "process: a new one cannot adopt it (fuse_transport = classic can; a "
			 "restart of the unit remounts)");
		return -EOPNOTSUPP;
	}
	if ((vc = cfg_volatile_ctrl(d->cfg))) {
		snprintf(err, errlen,
			 "controller %s keeps its namespaces in memory (backing = ram): a new "
			 "image would serve the files over empty memory",
			 vc->name);
		return -EOPNOTSUPP;
	}
	if (d->table_changed[0]) {
		snprintf(err, errlen,
			 "the namespace files changed at run time (%s): a new image builds them "
			 "from the controllers as at a start and could not serve what the kernel "
			 "has cached (a restart of the unit remounts)",
			 d->table_changed);
		return -EOPNOTSUPP;
	}
	if (!d->stored || d->state_fd < 0) {
		snprintf(err, errlen,
			 "the connection is not in the service manager's fd store (no "
			 "NOTIFY_SOCKET, INIT not answered yet, or storing failed): should the "
			 "re-exec fail, nothing could adopt the mount");
		return -EOPNOTSUPP;
	}
	if (!d->binary[0]) {
		snprintf(err, errlen, "the path of the installed binary is not known");
		return -ENOENT;
	}
	/* what is there now is what would run as root */
	rc = upg_binary_check(d->binary, err, errlen);
	if (rc)
		return rc;
	/* the table served now: the start's, or grown as the config builds it
	 * (ctrlmgr.c, table_grown) */
	nr = fusefs_ns_list(d->fs, d->ns_desc, d->ns_cap);
	ns = d->ns_desc;
	rc = upg_check_start(d->binary, d->config_path, d->state_fd, ns, nr, &d->lc.chk, err,
			     errlen);
	if (rc)
		return rc;
	/* started before the loop runs again: its reaper cannot have run yet */
	ev_child_init(&d->lc.chk_child, check_child_cb, upg_check_pid(d->lc.chk), 0);
	d->lc.chk_child.data = d;
	ev_child_start(d->loop, &d->lc.chk_child);
	ev_io_init(&d->lc.chk_io, check_io_cb, upg_check_fd(d->lc.chk), EV_READ);
	d->lc.chk_io.data = d;
	ev_io_start(d->loop, &d->lc.chk_io);
	ev_timer_init(&d->lc.chk_timer, check_timer_cb, UPG_CHECK_MAX_MS / 1000.0, 0.0);
	d->lc.chk_timer.data = d;
	ev_timer_start(d->loop, &d->lc.chk_timer);
	return 0;
}

/* Read the config file again and hand it to the controller manager: 0 when
 * it names the same controllers, 1 when they were applied (msg), or a
 * negative errno with the reason in err (the file does not load: its first
 * error). */
static int reload_ctrls(struct daemon *d, char *msg, size_t msglen, char *err, size_t errlen)
{
	struct cfg *next = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *errs = open_memstream(&text, &len);
	int rc;

	if (!errs)
		return -errno;
	rc = cfg_load(d->config_path, &next, errs);
	fclose(errs);
	if (rc) {
		unsigned lines = 0;

		for (const char *p = text; p && *p; p++)
			lines += *p == '\n' && p > text && p[-1] != '\n';
		snprintf(err, errlen, "the config %s does not load:", d->config_path);
		upg_excerpt(err, errlen, text, lines, UPG_REASON_LINES);
		free(text);
		log_warn("reload refused: %s", err);
		return rc;
	}
	free(text);
	rc = cm_reload(d, next, msg, msglen, err, errlen);
	cfg_free(next);
	if (rc < 0)
		log_warn("reload refused: %s", err);
	return rc;
}

int lc_restart(void *arg, admin_restart_done done, void *tok, char *msg, size_t msglen,
	       char *err, size_t errlen)
{
	struct daemon *d = arg;
	int rc;

	if (d->lc.chk) {
		snprintf(err, errlen, "a restart is being checked already");
		return -EBUSY;
	}
	/* controllers the config adds or removes are applied in place, without
	 * a re-exec (ctrlmgr.h), unless an upgrade installed another binary:
	 * then the new image, started from the config as any start is, takes
	 * them up (or refuses, saying why), else the upgrade would wait for a
	 * reload that changes nothing */
	if (d->lc.state == LC_SERVING && !upg_binary_replaced(d->binary)) {
		rc = reload_ctrls(d, msg, msglen, err, errlen);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	rc = restart_check(d, err, errlen);
	if (rc) {
		log_warn("restart refused: %s", err);
		return rc;
	}
	d->lc.chk_done = done;
	d->lc.chk_tok = tok;
	return ADMIN_RESTART_PENDING;
}

/* ---- start-up ---- */

/* NVMEFS_POOL_MIB: a test and benchmarking knob (small pools exercise the
 * front end's waiting for memory); the front end refuses a pool that cannot
 * hold its largest request. */
static size_t pool_bytes(void)
{
	const char *s = getenv("NVMEFS_POOL_MIB");
	unsigned long mib = s ? strtoul(s, NULL, 10) : 0;

	return mib && mib <= POOL_MIB_MAX ? (size_t)mib << 20 : POOL_BYTES;
}

#define URING_SWITCH "/sys/module/fuse/parameters/enable_uring"

/* The kernel's switch for FUSE over io_uring: 1 on, 0 off, -ENOENT when
 * this kernel has no such parameter. */
static int uring_switch(void)
{
	FILE *f = fopen(URING_SWITCH, "re");
	int c;

	if (!f)
		return -ENOENT;
	c = fgetc(f);
	fclose(f);
	return c == 'Y' || c == 'y' || c == '1';
}

/* Which transport to ask the front end for, and, for io_uring, the CPU map
 * over n reactors whose CPUs are rcpu[]. */
static int plan_transport(struct daemon *d, const int *rcpu, unsigned n)
{
	const struct cfg_daemon *cd = &d->cfg->daemon;
	int sw, rc;

	d->transport = cd->fuse_transport == CFG_FUSE_TRANSPORT_URING	  ? FUSEFS_TRANSPORT_URING
		       : cd->fuse_transport == CFG_FUSE_TRANSPORT_CLASSIC ? FUSEFS_TRANSPORT_CLASSIC
									  : FUSEFS_TRANSPORT_AUTO;
	if (d->transport == FUSEFS_TRANSPORT_CLASSIC)
		return 0;
	sw = uring_switch();
	if (sw != 1) {
		const char *why = sw < 0 ? "this kernel has no FUSE over io_uring ("
					   URING_SWITCH " is missing)"
					 : "the kernel's switch is off (" URING_SWITCH " is N)";

		if (d->transport == FUSEFS_TRANSPORT_URING) {
			log_err("fuse_transport = uring: %s%s", why,
				sw < 0 ? "" : "; write Y to it, or set 'options fuse enable_uring=1' "
					      "in /etc/modprobe.d/, before the daemon starts");
			return -EOPNOTSUPP;
		}
		log_info("fuse: io_uring not used: %s%s", why,
			 sw < 0 ? "" : "; to use io_uring write Y to it, or set 'options fuse "
				       "enable_uring=1' in /etc/modprobe.d/, before the daemon starts");
		d->transport = FUSEFS_TRANSPORT_CLASSIC;
		return 0;
	}
	rc = cpumap_read_topology(&d->cpu_topo, &d->nr_cpu_map);
	if (!rc) {
		d->cpu_map = calloc(d->nr_cpu_map, sizeof(*d->cpu_map));
		rc = d->cpu_map ? cpumap_build(d->cpu_topo, d->nr_cpu_map, rcpu, n, d->cpu_map)
				: -ENOMEM;
	}
	if (rc) {
		log_err("fuse: cannot map the CPUs' FUSE queues onto the reactors: %s",
			strerror(-rc));
		if (d->transport == FUSEFS_TRANSPORT_URING)
			return rc;
		d->transport = FUSEFS_TRANSPORT_CLASSIC;
		d->nr_cpu_map = 0;
	}
	return 0;
}

int lc_start_reactors(struct daemon *d)
{
	const struct cfg_engine *e = &d->cfg->engine;
	unsigned n = e->queues;
	int rc;

	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		unsigned g = nvme_ctrl_get_info(d->ctrls[i])->nr_io_queues;
		if (g < n) {
			log_info("%s grants %u I/O queue%s: %u reactor%s", d->names[i], g,
				 g == 1 ? "" : "s", g, g == 1 ? "" : "s");
			n = g;
		}
	}
	if (n == 0) {
		log_err("no I/O queue granted");
		return -ENODEV;
	}
	d->reactors = calloc(n, sizeof(*d->reactors));
	/* a row of slots per reactor: the empty ones get their queue pairs
	 * when a controller is added (cm_reload) */
	d->qpairs = calloc((size_t)n * d->slots, sizeof(*d->qpairs));
	int *rcpu = calloc(n, sizeof(*rcpu));
	if (!d->reactors || !d->qpairs || !rcpu) {
		free(rcpu);
		return -ENOMEM;
	}
	for (unsigned r = 0; r < n; r++)
		rcpu[r] = e->nr_cpus ? (int)e->cpus[r % e->nr_cpus] : -1;
	rc = plan_transport(d, rcpu, n);
	free(rcpu);
	if (rc)
		return rc;
	/* dma_isolation = controller with several controllers: a pool per
	 * controller on each reactor, of pool_bytes() / controllers plus its
	 * queue's PRP list pages (which the shared pool holds in its
	 * pool_bytes()): a reactor pins about what it pins shared.  Each
	 * controller's requests get pool_bytes() / controllers, at least
	 * ISO_POOL_MIN (shared: at most half of pool_bytes() each, the same
	 * with two controllers).
	 * The io_uring payloads are then ordinary memory (no pool is reachable
	 * by every controller), not in a pool. */
	bool iso = e->dma_isolation == CFG_DMA_ISO_CONTROLLER && d->nr_ctrls > 1;

	d->iso = iso;
	for (unsigned r = 0; r < n; r++) {
		/* io_uring: each FUSE queue entry's payload lives in the pool:
		 * fuse_queue_depth of them for an online CPU's queue, one for
		 * an offline CPU's (cpumap_queue_entries); /dev/fuse (chosen,
		 * fallen back to or adopted): fuse_queue_depth landing buffers
		 * for writes' data (fusefs_opts.lands), in the same room */
		unsigned depth = d->cfg->daemon.fuse_queue_depth;
		unsigned ents = d->transport == FUSEFS_TRANSPORT_CLASSIC
					? 0
					: cpumap_entries(d->cpu_topo, d->cpu_map, d->nr_cpu_map, r,
							 depth);
		size_t ring_bytes = iso ? 0 : (size_t)(ents > depth ? ents : depth) * FUSEFS_MAX_IO;
		size_t share = iso ? pool_bytes() / d->nr_ctrls : 0;
		if (iso && share < ISO_POOL_MIN)
			share = ISO_POOL_MIN;
		size_t pool = iso ? share + (size_t)e->queue_depth * 4096 : pool_bytes() + ring_bytes;
		struct nvme_reactor_opts ro = {
			.id = r,
			.cpu = e->nr_cpus ? (int)e->cpus[r % e->nr_cpus] : -1,
			.numa = e->numa,
			.mode = e->mode == CFG_MODE_POLL        ? NVME_MODE_POLL
				: e->mode == CFG_MODE_INTERRUPT ? NVME_MODE_INTERRUPT
								: NVME_MODE_HYBRID,
			.buf_pool_bytes = pool,
			.dma_isolation = iso,
		};

		rc = nvme_reactor_create(&ro, &d->reactors[r]);
		if (rc) {
			log_err("reactor %u (cpu %d): %s", r, ro.cpu, strerror(-rc));
			return rc;
		}
		d->nr_reactors = r + 1;
		for (unsigned c = 0; c < d->nr_ctrls; c++) {
			rc = nvme_qpair_create(d->ctrls[c], d->reactors[r], (uint16_t)(r + 1),
					       &d->qpairs[(size_t)r * d->slots + c]);
			if (rc) {
				log_err("%s: I/O queue %u: %s", d->names[c], r + 1, strerror(-rc));
				return rc;
			}
		}
	}
	return 0;
}

static void admin_fuse_stats(void *arg, struct fusefs_stats *out)
{
	fusefs_stats_get(arg, out);
}

static int admin_fuse_ns_stats(void *arg, const char *name, struct fusefs_ns_stats *out)
{
	return fusefs_ns_stats_get(arg, name, out);
}

int lc_start_admin(struct daemon *d)
{
	struct admin_ctx ctx;
	int rc;

	/* room for every slot of the table: a change never allocates here */
	d->ns_cap = fusefs_ns_capacity(d->fs);
	d->ans = calloc(d->ns_cap ? d->ns_cap : 1, sizeof(*d->ans));
	d->ns_paths = calloc(d->ns_cap ? d->ns_cap : 1, sizeof(*d->ns_paths));
	d->ns_desc = calloc(d->ns_cap ? d->ns_cap : 1, sizeof(*d->ns_desc));
	if (!d->ans || !d->ns_paths || !d->ns_desc)
		return -ENOMEM;
	rc = cm_ns_view_refresh(d);
	if (rc)
		return rc;
	memset(&ctx, 0, sizeof(ctx));
	ctx.cfg = d->cfg;
	ctx.config_path = d->config_path;
	ctx.start_time = time(NULL);
	ctx.ctrls = d->ctrls;
	ctx.nr_ctrls = d->slots;
	ctx.reactors = d->reactors;
	ctx.nr_reactors = d->nr_reactors;
	ctx.qpairs = d->qpairs;
	ctx.ns = d->ans;
	ctx.nr_ns = d->nr_ns;
	ctx.ns_view = cm_ns_view;
	ctx.ns_view_arg = d;
	if (d->transport != FUSEFS_TRANSPORT_CLASSIC) {
		ctx.fuse_cpu_map = d->cpu_map;
		ctx.fuse_cpus = d->cpu_topo;
		ctx.nr_fuse_cpus = d->nr_cpu_map;
	}
	ctx.fuse_stats = admin_fuse_stats;
	ctx.fuse_ns_stats = admin_fuse_ns_stats;
	ctx.fuse_stats_arg = d->fs;
	ctx.sims = d->sims;
	ctx.attach = cm_attach;
	ctx.attach_arg = d;
	ctx.attach_state = cm_attach_state;
	ctx.detach = cm_detach;
	ctx.ctrl_away = cm_away;
	ctx.ctrl_away_arg = d;
	ctx.restart = lc_restart;
	ctx.restart_arg = d;
	return admin_start(d->loop, &ctx, &d->admin);
}

void lc_teardown(struct daemon *d)
{
	/* a check still running (a start-up that failed cannot have one; a
	 * stop ended it already): its client is told before admin goes */
	if (d->lc.chk)
		check_end(d, false, true);
	admin_stop(d->admin);
	d->admin = NULL;
	/* an attach still running ends first (bounded by the bring-up) */
	cm_attach_wait(d);
	(void)lc_set_state(&d->lc, LC_STOPPING);
	if (d->lc.reexec && d->fs) {
		/* the next image serves this mount: keep it, the store and the
		 * state record; our copy of the connection outlives the front end */
		d->keep_fuse_fd = fcntl(fusefs_fd(d->fs), F_DUPFD_CLOEXEC, 5);
		if (d->keep_fuse_fd < 0)
			log_err("restart: keeping the FUSE connection's fd: %s", strerror(errno));
		fusefs_keep_mount(d->fs);
	} else {
		/* the next start mounts afresh: nothing of ours stays in the store */
		if (d->stored)
			fdstore_forget();
		if (d->fs)
			fusefs_unmount(d->fs);
		/* the store's copy may still hold the connection open for a moment:
		 * what is still open on the detached mount fails now, as without a
		 * store, rather than wait on no one */
		if (d->stored && d->conn && fusefs_conn_alive(d->conn))
			fusefs_conn_abort(d->conn);
		if (d->state_fd >= 0)
			close(d->state_fd);
		d->state_fd = -1;
	}
	if (d->lc.reactors_running) {
		for (unsigned r = 0; r < d->nr_reactors; r++)
			nvme_reactor_stop(d->reactors[r]);
		/* nothing is in flight after the drain and the cancel; a reactor
		 * still waiting past that (a controller that ended nothing) is
		 * left running: freeing its memory under it is worse than exiting */
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (unsigned r = 0; r < d->nr_reactors; r++) {
			unsigned left = 0;

			if (d->lc.gave_up) { /* LC_JOIN_MAX_S for all of them together */
				clock_gettime(CLOCK_MONOTONIC, &t1);
				double used = (t1.tv_sec - t0.tv_sec) * 1e3 +
					      (t1.tv_nsec - t0.tv_nsec) / 1e6;
				left = used < LC_JOIN_MAX_S * 1000 - 1 ? (unsigned)(LC_JOIN_MAX_S * 1000 - used)
								     : 1;
			}
			if (nvme_reactor_join_timeout(d->reactors[r], left) < 0)
				d->lc.abandoned = true;
		}
	}
	if (d->lc.abandoned) {
		log_err("a reactor still waits for commands past the stop's bound: exiting "
			"without shutting the controllers down");
		return;
	}
	if (log_get_level() >= LOG_LVL_DEBUG)
		lc_log_stats(d, LOG_LVL_DEBUG);
	/* every controller shuts down at once: the stop's bound is one
	 * controller's, not their sum */
	if (d->nr_ctrls)
		notify_extend((uint64_t)LC_SHUTDOWN_MAX_S * 1000000, "stopping: shutting down");
	for (unsigned i = 0; i < d->slots; i++)
		if (d->ctrls[i])
			nvme_ctrl_shutdown_async(d->ctrls[i]);
	struct timespec s0, s1;

	clock_gettime(CLOCK_MONOTONIC, &s0);
	for (unsigned i = 0; i < d->slots; i++) {
		if (!d->ctrls[i])
			continue;
		/* one deadline for them all */
		clock_gettime(CLOCK_MONOTONIC, &s1);
		double used = (s1.tv_sec - s0.tv_sec) + (s1.tv_nsec - s0.tv_nsec) / 1e9;
		uint32_t left = used < LC_SHUTDOWN_MAX_S ? (uint32_t)((LC_SHUTDOWN_MAX_S - used) * 1000) : 1;
		int rc = nvme_ctrl_shutdown_wait(d->ctrls[i], left);

		if (rc == -EBUSY) {
			log_err("%s: the controller could be neither disabled nor cut off: its "
				"memory is not freed",
				d->names[i]);
			d->lc.abandoned = true;
		} else if (rc < 0) {
			log_err("%s: shutdown did not end in time", d->names[i]);
			d->lc.abandoned = true;
		}
	}
	if (d->lc.abandoned) {
		/* freeing what a device may still reach, or waiting on a
		 * recovery step that did not end, is worse than exiting: the
		 * kernel resets the functions and unpins their memory */
		log_err("stopping without freeing");
		return;
	}
	for (size_t i = 0; d->qpairs && i < (size_t)d->nr_reactors * d->slots; i++)
		if (d->qpairs[i])
			nvme_qpair_destroy(d->qpairs[i]);
	fusefs_destroy(d->fs);
	d->fs = NULL;
	for (unsigned r = 0; r < d->nr_reactors; r++)
		nvme_reactor_destroy(d->reactors[r]);
	for (unsigned i = 0; i < d->slots; i++) {
		if (!d->ctrls[i])
			continue;
		if (d->loop)
			cm_unwatch(d, i);
		/* a removed controller no longer touches a bus: a kept one is ours */
		nvme_ctrl_close(d->ctrls[i]);
		if (d->cm[i].kept)
			d->cm[i].kept->ops->close(d->cm[i].kept);
	}
	for (unsigned i = 0; d->ns_paths && i < d->nr_ns; i++)
		free(d->ns_paths[i]);
	free(d->ns_paths);
	free(d->ans);
	free(d->ns_desc);
	free(d->qpairs);
	free(d->reactors);
	free(d->cpu_map);
	free(d->cpu_topo);
}

static unsigned readers_wanted(void)
{
	/* every reactor reads the channel (measured in docs/fuse.md); the
	 * variable is a benchmarking knob: 1 = reactor 0 only */
	const char *s = getenv("NVMEFS_FUSE_READERS");

	return s ? (unsigned)strtoul(s, NULL, 10) : 0;
}

/* NVMEFS_DSYNC_FUA_MAX: a benchmarking knob, bytes up to which an O_DSYNC
 * write goes out with FUA rather than followed by a Flush (fusefs_opts). */
static size_t dsync_fua_max(void)
{
	const char *s = getenv("NVMEFS_DSYNC_FUA_MAX");

	return s ? (size_t)strtoull(s, NULL, 10) : 0;
}


void lc_fuse_opts(struct daemon *d)
{
	const struct cfg_daemon *cd = &d->cfg->daemon;

	d->fo = (struct fusefs_opts){
		.mountpoint = cd->mountpoint,
		.file_mode = cd->file_mode,
		.uid = cd->uid,
		.gid = cd->gid,
		.allow_other = cd->allow_other,
		.debug = getenv("NVMEFS_FUSE_DEBUG") != NULL,
		.nr_ctrls = d->slots,
		.ctrls = d->ctrls,
		.ctrl_names = d->names,
		.nr_reactors = d->nr_reactors,
		.reactors = d->reactors,
		.qpairs = d->qpairs,
		.readers = readers_wanted(),
		.dsync_fua_max = dsync_fua_max(),
		.pool_bytes = pool_bytes(),
		.transport = d->transport,
		.queue_depth = cd->fuse_queue_depth,
		.lands = cd->fuse_queue_depth,
		.nr_cpu_map = d->nr_cpu_map,
		.cpu_map = d->cpu_map,
		.cpus = d->cpu_topo,
	};
}

int lc_run_reactors(struct daemon *d)
{
	for (unsigned r = 0; r < d->nr_reactors; r++) {
		int rc = nvme_reactor_start(d->reactors[r]);

		if (rc) {
			log_err("reactor %u: cannot start: %s", r, strerror(-rc));
			for (unsigned k = 0; k < r; k++)
				nvme_reactor_stop(d->reactors[k]);
			for (unsigned k = 0; k < r; k++)
				nvme_reactor_join(d->reactors[k]);
			return rc;
		}
	}
	d->lc.reactors_running = true;
	return 0;
}

int lc_finish(struct daemon *d, int rc)
{
	if (d->lc.abandoned)
		_exit(OPT_EXIT_ABANDONED); /* threads still run: no atexit handler, no freeing */
	if (d->lc.reexec && rc == 0) {
		log_info("restart: controllers shut down, exec %s", d->binary);
		fflush(stderr);
		rc = d->keep_fuse_fd >= 0 && d->state_fd >= 0
			     ? upg_exec(d->binary, d->argv, d->keep_fuse_fd, d->state_fd)
			     : -EBADF;
		/* this image's state is gone: the service manager restarts the
		 * daemon, which adopts the connection from its fd store */
		log_err("restart: exec %s: %s: exiting for the service manager to restart the "
			"daemon (the connection stays in its fd store)",
			d->binary, strerror(-rc));
		return OPT_EXIT_FAILURE;
	}
	if (rc == 0 && d->lc.gave_up)
		log_warn("stopped, after ending with EIO the requests the drain could not wait "
			 "for: exit status %d",
			 OPT_EXIT_ABANDONED);
	else if (rc == 0)
		log_info("stopped");
	if (rc)
		return d->config_refused ? OPT_EXIT_CONFIG : OPT_EXIT_FAILURE;
	return d->lc.gave_up ? OPT_EXIT_ABANDONED : OPT_EXIT_OK;
}

/* main.c - nvmefsd: load the config, bring the controllers up, start one
 * reactor per queue, mount the namespaces, serve until SIGTERM/SIGINT.
 *
 * The main thread runs its own libev loop (signals, the admin socket, the
 * drain at shutdown); the I/O path lives entirely on the reactors.
 *
 * Stopping is bounded, in three phases, each told to systemd
 * (EXTEND_TIMEOUT_USEC) as it starts:
 *   drain     stop taking FUSE requests and wait for those taken, at most
 *             min(2 io_timeout_ms + 5 s, DRAIN_MAX_S);
 *   cancel    if some are still unanswered, every controller with commands
 *             outstanding ends them (nvme_ctrl_cancel_async: abrupt
 *             shutdown, disable, or isolation when it will not disable), so each
 *             such request is answered EIO, at most CANCEL_MAX_S;
 *   shutdown  unmount, stop the reactors (after a cancel at most JOIN_MAX_S),
 *             CC.SHN normal on every controller at once (at most
 *             NVME_SHUTDOWN_MAX_MS), delete, free, exit.
 * Exit 0 when every request was answered by the device, 1 when the stop had
 * to cancel (or, past every bound, gave up waiting and left without
 * freeing: the kernel then answers what remains when the mount goes).
 * STOP_MAX_S, the sum, is what the unit's TimeoutStopSec must cover
 * (t-install checks it).
 *
 * A controller that goes away (the VFIO request IRQ: hot removal or an
 * unbind; or a reactor finding its BAR reading all ones, reported through the
 * engine's event callback) is removed from the engine on the main loop: its
 * files stay and fail every I/O with EIO, the other controllers go on, and a
 * VFIO bus is closed so that the kernel can finish the removal (a software
 * controller's bus is kept, with its data, for a later attach).
 * nvmefsctl attach brings it back (daemon_attach): the work runs on a thread
 * of its own (attach_thread), the loop learns how it ended (attach_done_cb).
 * nvmefsctl detach (daemon_detach) takes a live controller away on purpose:
 * its files go from the mount (open handles fail with EIO), its volatile
 * write cache is flushed, it is shut down (CC.SHN, nvme_ctrl_detach) and
 * removed as above, and its VFIO device is released; attach brings the
 * files back in their inodes.
 *
 * Namespace events (nvme_ctrl_set_aen_cb, on an engine thread) are copied
 * and posted to the loop (ctrl_aen_cb), which adds, removes or grows the
 * files; a namespace that shrank or changed format is refused with a log
 * line (its I/O fails, the engine marks it failed).
 *
 * The mount outlives the daemon (fdstore.h): once INIT is answered, the
 * /dev/fuse fd and a sealed state record go to the service manager's fd
 * store; a run started after a crash gets them back, checks them
 * (adopt_check) and, instead of mounting, serves the same connection and
 * has the kernel resend what the dead run had taken but not answered.  A
 * normal stop takes them out of the store before it unmounts.
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
 *
 * The daemon always stays in the foreground and logs to stderr (systemd's
 * Type=notify runs it that way); -f is accepted for compatibility.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "cpumap.h"
#include "fdstore.h"
#include "fstate.h"
#include "fuse_proto.h"
#include "fuse_fs.h"
#include "health.h"
#include "log.h"
#include "notify.h"
#include "nvme.h"
#include "options.h"
#include "sim.h"
#include "upgrade.h"

#define POOL_BYTES (32u << 20)  /* DMA buffers per reactor: 32 requests of 1 MiB */
#define POOL_MIB_MAX 4096u
/* dma_isolation = controller: the least request memory of one controller's
 * pool, two of the largest requests (each a 2 MiB buddy block) */
#define ISO_POOL_MIN (4u << 20)
#define DRAIN_POLL 0.01         /* seconds between checks while draining */
/* The longest a stop waits for requests in flight, whatever io_timeout_ms
 * (up to 600 s) and io_retries say: the systemd unit's TimeoutStopSec must
 * cover this plus the controllers' shutdown (CC.SHN, at most 60 s), and
 * t-install checks that it does. */
#define DRAIN_MAX_S 30.0
/* The cancel phase: the engine's bound, and slack for the requests to be
 * answered once their commands ended. */
#define CANCEL_MAX_S (NVME_CANCEL_MAX_MS / 1000.0 + 10.0)
#define SHUTDOWN_MAX_S (NVME_SHUTDOWN_MAX_MS / 1000.0 + 5.0)
/* After a cancel, the reactors are given this long to end. */
#define JOIN_MAX_S 5.0
#define STOP_MAX_S (DRAIN_MAX_S + CANCEL_MAX_S + JOIN_MAX_S + SHUTDOWN_MAX_S)

struct daemon;

/* What the main loop keeps per controller for removal and attach. */
struct dctrl {
	struct daemon *d;
	unsigned idx;
	struct sim *sim;         /* the software controller, NULL for PCI */
	struct nvme_bus *kept;   /* a removed sim's bus, kept for attach */
	int req_efd, err_efd;    /* VFIO request / error IRQ eventfds (-1: none) */
	ev_io req_w, err_w;
	ev_async event;          /* the engine's event callback, from any thread */
	enum nvme_ctrl_state seen; /* last state logged */
	bool detached;           /* its files were taken away (daemon_detach) */
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

struct daemon {
	struct cfg *cfg;
	const char *config_path;
	unsigned nr_ctrls;
	struct nvme_ctrl *ctrls[CFG_MAX_CTRLS];
	const char *names[CFG_MAX_CTRLS];
	struct dctrl dc[CFG_MAX_CTRLS];
	struct sim *sims[CFG_MAX_CTRLS]; /* dc[i].sim, in the shape admin wants */
	unsigned nr_reactors;
	struct nvme_reactor **reactors;
	bool started;
	struct nvme_qpair **qpairs;
	struct fusefs *fs;
	struct admin *admin;
	struct admin_ns *ans;    /* the files shown now (ns_view_refresh) */
	char **ns_paths;
	unsigned nr_ns;
	struct fusefs_ns_desc *ns_desc; /* scratch of fusefs_ns_capacity entries */
	unsigned ns_cap;
	/* FUSE over io_uring: the transport asked of the front end, and which
	 * reactor serves each possible CPU's FUSE queue (cpumap.h) */
	enum fusefs_transport transport;
	unsigned nr_cpu_map;
	unsigned *cpu_map;
	struct cpumap_cpu *cpu_topo;

	/* the fd store: the fds handed by the service manager (-1: none),
	 * our state record's memfd, and the connection's number (0: not
	 * known); INIT's outcome comes from a reactor through init_done */
	struct fusefs_opts fo;
	int fuse_fd_in, state_fd_in;
	int state_fd;
	bool adopted, stored;
	unsigned conn;
	pthread_mutex_t init_mu;
	struct fusefs_init_params init;
	ev_async init_done;

	/* planned upgrade: the binary to re-execute (resolved at start), the
	 * original argv, and the connection's fd kept past teardown */
	char binary[PATH_MAX];
	char **argv;
	bool restarting;
	int keep_fuse_fd;
	/* the first change of the namespace table at run time ("" none): the
	 * state record then makes a later run refuse to adopt (table_changed_mark) */
	char table_changed[128];

	struct ev_loop *loop;
	ev_signal sig_term, sig_int, sig_usr1, sig_usr2, sig_hup;
	ev_async session_end;
	ev_timer drain;
	bool stopping;
	bool cancelling;        /* the drain ran out: the controllers end their commands */
	bool gave_up;           /* requests cancelled, or left unanswered past every bound */
	bool abandoned;         /* reactors still busy past the bound: leave without freeing */
	ev_tstamp drain_deadline;
};

static void log_stats(struct daemon *d, enum log_level lvl)
{
	struct fusefs_stats fst;

	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		struct sim *s = d->dc[i].sim;
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
	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		unsigned out = 0;

		for (unsigned r = 0; r < d->nr_reactors; r++) {
			struct nvme_qpair *qp = d->qpairs[(size_t)r * d->nr_ctrls + i];

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
	(void)revents;

	if (fusefs_drained(d->fs)) {
		log_info("drained: no request in flight");
	} else if (ev_now(loop) < d->drain_deadline) {
		return;
	} else if (d->restarting) {
		/* cancelling would fail them with EIO; freeing under commands still
		 * outstanding is worse: leave as a crash does, and the store's
		 * connection is adopted by the restarted daemon, which has the
		 * kernel resend what is unanswered */
		log_err("restart: %u request(s) still in flight at the drain deadline: exiting "
			"for the service manager to restart the daemon (the connection stays in "
			"its fd store; they are resent)",
			fusefs_inflight(d->fs));
		_exit(OPT_EXIT_FAILURE);
	} else if (!d->cancelling) {
		log_warn("%u request(s) still in flight at the drain deadline: ending the commands "
			 "outstanding on the controllers",
			 fusefs_inflight(d->fs));
		d->cancelling = true;
		d->gave_up = true;
		cancel_outstanding(d);
		d->drain_deadline = ev_now(loop) + CANCEL_MAX_S;
		notify_extend((uint64_t)((CANCEL_MAX_S + JOIN_MAX_S + SHUTDOWN_MAX_S) * 1e6),
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

static void begin_stop(struct daemon *d, const char *why)
{
	if (d->stopping) {
		if (d->restarting && strcmp(why, "restart") != 0) {
			/* a stop asked during a restart wins: the same drain goes
			 * on, then the stop's unmount instead of the exec */
			d->restarting = false;
			log_info("%s: stopping instead of restarting", why);
			notify_stopping("stopping (%s)", why);
			return;
		}
		log_info("%s: already %s", why, d->restarting ? "restarting" : "stopping");
		return;
	}
	d->stopping = true;
	log_info("%s: %s: no new requests, draining %u in flight", why,
		 d->restarting ? "restarting" : "stopping", fusefs_inflight(d->fs));
	if (d->restarting)
		notify_reloading("restarting (%s): re-executing %s", why, d->binary);
	else
		notify_stopping("stopping (%s)", why);
	fusefs_stop(d->fs);
	/* the engine fails a stuck command after its timeout (and a reset):
	 * allow for that, then end what is left (capped: a stop must end
	 * within the unit's TimeoutStopSec) */
	double wait = 2.0 * d->cfg->engine.io_timeout_ms / 1000.0 + 5.0;
	if (wait > DRAIN_MAX_S)
		wait = DRAIN_MAX_S;
	d->drain_deadline = ev_now(d->loop) + wait;
	notify_extend((uint64_t)((wait + CANCEL_MAX_S + JOIN_MAX_S + SHUTDOWN_MAX_S) * 1e6),
		      "%s (%s): draining", d->restarting ? "restarting" : "stopping", why);
	ev_timer_init(&d->drain, drain_cb, 0.0, DRAIN_POLL);
	d->drain.data = d;
	ev_timer_start(d->loop, &d->drain);
}

/* Whether the running daemon can be replaced in place, and whether the
 * installed binary would take the connection over: 0, or an errno with the
 * reason in err.  Nothing stops here. */
static int restart_check(struct daemon *d, char *err, size_t errlen)
{
	const struct cfg_controller *vc;
	const struct fusefs_ns_desc *ns;
	unsigned nr;
	bool uring;

	if (d->stopping) {
		snprintf(err, errlen, "the daemon is %s already",
			 d->restarting ? "restarting" : "stopping");
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
	ns = fusefs_namespaces(d->fs, &nr);
	return upg_precheck(d->binary, d->config_path, d->state_fd, ns, nr, err, errlen);
}

/* nvmefsctl restart (admin_ctx.restart) and SIGUSR2: check, then drain and
 * re-exec (main() does the exec once the loop ends). */
static int daemon_restart(void *arg, char *msg, size_t msglen, char *err, size_t errlen)
{
	struct daemon *d = arg;
	int rc = restart_check(d, err, errlen);

	if (rc) {
		log_warn("restart refused: %s", err);
		return rc;
	}
	log_info("restart: %s would adopt the connection: re-executing it in place (pid %d)",
		 d->binary, (int)getpid());
	snprintf(msg, msglen, "pid %d re-executes %s", (int)getpid(), d->binary);
	d->restarting = true;
	begin_stop(d, "restart");
	return 0;
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = w->data;
	(void)loop;
	(void)revents;

	switch (w->signum) {
	case SIGUSR1:
		log_stats(d, LOG_LVL_INFO);
		break;
	case SIGHUP:
		log_info("SIGHUP: ignored (systemctl reload nvmefs, or SIGUSR2, applies a new config in "
			 "place)");
		break;
	case SIGUSR2: {
		char msg[PATH_MAX + 64], err[1024];

		(void)daemon_restart(d, msg, sizeof(msg), err, sizeof(err));
		break;
	}
	default:
		begin_stop(d, strsignal(w->signum));
	}
}

static void session_end_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	begin_stop(w->data, "mount gone");
}

/* from a reactor thread */
static void on_session_exit(void *arg)
{
	struct daemon *d = arg;

	ev_async_send(d->loop, &d->session_end);
}

/* ---- removal and attach ---- */

/* STATUS= for systemctl status: what is served, and every controller that
 * is not live ("serving 3 namespaces at /srv/nvme; nvme1 removed").  Kept
 * current from the main loop while serving; the stop sets its own. */
static void status_format(struct daemon *d, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "serving %u namespace%s at %s", d->nr_ns,
				    d->nr_ns == 1 ? "" : "s", d->cfg->daemon.mountpoint);

	for (unsigned i = 0; i < d->nr_ctrls && n < len; i++) {
		const struct dctrl *dc = &d->dc[i];

		if (dc->detached)
			n += (size_t)snprintf(buf + n, len - n, "; %s detached", d->names[i]);
		else if (dc->seen != NVME_CTRL_LIVE)
			n += (size_t)snprintf(buf + n, len - n, "; %s %s", d->names[i],
					      nvme_ctrl_state_name(dc->seen));
	}
}

static void status_update(struct daemon *d)
{
	char buf[1024];

	if (!d->started || d->stopping)
		return;
	status_format(d, buf, sizeof(buf));
	notify_status("%s", buf);
}

/* Take controller dc out of the engine (idempotent); orderly: a detach,
 * which shuts a live controller down (CC.SHN) first.  A VFIO bus is closed
 * so that the kernel can finish the removal; a sim's bus is kept. */
static void ctrl_remove(struct dctrl *dc, const char *why, bool orderly)
{
	struct daemon *d = dc->d;
	struct nvme_ctrl *c = d->ctrls[dc->idx];
	struct nvme_bus *bus = NULL;
	struct timespec t0, t1;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = orderly ? nvme_ctrl_detach(c, why, &bus) : nvme_ctrl_remove(c, why, &bus);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc) {
		log_err("%s: removal (%s) failed: %s", d->names[dc->idx], why, strerror(-rc));
		return;
	}
	if (!bus)
		return; /* removed already */
	log_warn("%s: removed (%s) in %.1f ms: its files fail every I/O with EIO until "
		 "nvmefsctl attach %s",
		 d->names[dc->idx], why,
		 (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
		 d->names[dc->idx]);
	if (dc->sim) {
		dc->kept = bus;
	} else {
		/* the fds go: the kernel's removal (or unbind) can complete */
		bus->ops->close(bus);
	}
	dc->seen = NVME_CTRL_REMOVED;
	status_update(d);
}

/* Log a state change once, and remove a controller the engine found gone. */
static void ctrl_event_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct dctrl *dc = w->data;
	struct daemon *d = dc->d;
	enum nvme_ctrl_state s = nvme_ctrl_state(d->ctrls[dc->idx]);

	(void)loop;
	(void)revents;
	if (s == NVME_CTRL_REMOVED) {
		ctrl_remove(dc, "the device stopped answering", false);
		return;
	}
	if (s != dc->seen) {
		log_info("%s: %s -> %s", d->names[dc->idx], nvme_ctrl_state_name(dc->seen),
			 nvme_ctrl_state_name(s));
		dc->seen = s;
		status_update(d);
	}
}

/* The engine's event callback: a reactor or any thread; must not block. */
static void ctrl_event(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	struct dctrl *dc = arg;

	(void)c;
	(void)s;
	ev_async_send(dc->d->loop, &dc->event);
}

static void efd_drain(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		;
}

static void req_irq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dctrl *dc = w->data;

	(void)loop;
	(void)revents;
	efd_drain(dc->req_efd);
	log_warn("%s: the kernel asks for the device back (hot removal or unbind)",
		 dc->d->names[dc->idx]);
	ctrl_remove(dc, "device removal requested", false);
}

static void err_irq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dctrl *dc = w->data;
	int rc;

	(void)loop;
	(void)revents;
	efd_drain(dc->err_efd);
	rc = nvme_ctrl_reset_async(dc->d->ctrls[dc->idx], "PCIe error reported (AER)");
	log_warn("%s: PCIe error reported (AER): %s", dc->d->names[dc->idx],
		 rc == 0 ? "resetting the controller" : rc == -EBUSY ? "a reset is running already"
								      : strerror(-rc));
}

/* Wire the bus's request and error IRQs to dc's eventfds (a bus without
 * them, like the software controller's, has none: not an error). */
static void ctrl_wire_irqs(struct dctrl *dc, struct nvme_bus *bus)
{
	int rc;

	if (dc->req_efd >= 0 && (rc = nvme_bus_req_irq_set(bus, dc->req_efd)) && rc != -ENOTSUP)
		log_warn("%s: request IRQ: %s: a hot removal will be noticed only when the "
			 "device stops answering",
			 dc->d->names[dc->idx], strerror(-rc));
	if (dc->err_efd >= 0 && (rc = nvme_bus_err_irq_set(bus, dc->err_efd)) && rc != -ENOTSUP)
		log_warn("%s: error IRQ: %s", dc->d->names[dc->idx], strerror(-rc));
}

static void attach_done_cb(struct ev_loop *loop, ev_async *w, int revents);
static void ctrl_aen_cb(struct ev_loop *loop, ev_async *w, int revents);
static void ctrl_aen(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev);

static int ctrl_watch(struct daemon *d, unsigned i)
{
	struct dctrl *dc = &d->dc[i];

	dc->d = d;
	dc->idx = i;
	dc->seen = NVME_CTRL_LIVE;
	ev_async_init(&dc->event, ctrl_event_cb);
	dc->event.data = dc;
	ev_async_start(d->loop, &dc->event);
	nvme_ctrl_set_event_cb(d->ctrls[i], ctrl_event, dc);
	ev_async_init(&dc->attach_done, attach_done_cb);
	dc->attach_done.data = dc;
	ev_async_start(d->loop, &dc->attach_done);
	pthread_mutex_init(&dc->aen_mu, NULL);
	ev_async_init(&dc->aen, ctrl_aen_cb);
	dc->aen.data = dc;
	ev_async_start(d->loop, &dc->aen);
	nvme_ctrl_set_aen_cb(d->ctrls[i], ctrl_aen, dc);
	if (dc->sim)
		return 0;
	dc->req_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	dc->err_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dc->req_efd < 0 || dc->err_efd < 0) {
		log_err("%s: eventfd: %s", d->names[i], strerror(errno));
		return -errno;
	}
	ev_io_init(&dc->req_w, req_irq_cb, dc->req_efd, EV_READ);
	ev_io_init(&dc->err_w, err_irq_cb, dc->err_efd, EV_READ);
	dc->req_w.data = dc->err_w.data = dc;
	ev_io_start(d->loop, &dc->req_w);
	ev_io_start(d->loop, &dc->err_w);
	ctrl_wire_irqs(dc, nvme_ctrl_bus(d->ctrls[i]));
	return 0;
}

static void ctrl_unwatch(struct daemon *d, unsigned i)
{
	struct dctrl *dc = &d->dc[i];

	if (!dc->d)
		return;
	nvme_ctrl_set_event_cb(d->ctrls[i], NULL, NULL);
	ev_async_stop(d->loop, &dc->event);
	nvme_ctrl_set_aen_cb(d->ctrls[i], NULL, NULL);
	ev_async_stop(d->loop, &dc->aen);
	ev_async_stop(d->loop, &dc->attach_done);
	free(dc->aen_q);
	dc->aen_q = NULL;
	dc->aen_n = dc->aen_cap = 0;
	pthread_mutex_destroy(&dc->aen_mu);
	if (dc->req_efd >= 0) {
		ev_io_stop(d->loop, &dc->req_w);
		close(dc->req_efd);
	}
	if (dc->err_efd >= 0) {
		ev_io_stop(d->loop, &dc->err_w);
		close(dc->err_efd);
	}
	dc->req_efd = dc->err_efd = -1;
}

/* The namespace table changed at run time (why): a later run builds its
 * table from the controllers as at a start, numbering the files anew and
 * with every handle generation at 0, which is not what the kernel has
 * cached.  So the stored state record gets a digest no run computes
 * (adoption after a crash is refused and the next run mounts afresh), and
 * nvmefsctl restart is refused.  Once is enough. */
static void table_changed_mark(struct daemon *d, const char *why)
{
	struct fstate st;
	char *buf = NULL;
	size_t len = 0;
	int fd = -1, rc;

	if (d->table_changed[0])
		return;
	snprintf(d->table_changed, sizeof(d->table_changed), "%s", why);
	if (!d->stored || d->state_fd < 0)
		return;
	buf = malloc(fstate_size() + 1);
	rc = buf ? fdstore_memfd_read(d->state_fd, buf, fstate_size() + 1, &len) : -ENOMEM;
	if (!rc)
		rc = fstate_decode(buf, len, &st);
	if (!rc) {
		/* FNV-1a 64 digests of a config never have all bits flipped
		 * by design; a table changed at run time is not a config's */
		st.digest = ~st.digest;
		rc = fstate_encode(&st, buf, fstate_size());
	}
	if (!rc)
		rc = fdstore_memfd(buf, fstate_size(), &fd);
	free(buf);
	if (!rc) {
		fdstore_forget();
		rc = fdstore_save(fusefs_fd(d->fs), fd);
	}
	if (rc) {
		/* the old record stays: a run after a crash might adopt a table
		 * it does not reproduce; say so */
		log_err("fdstore: the namespace table changed (%s) but the state record could not "
			"be replaced (%s): a run after a crash may adopt the mount with files "
			"numbered differently",
			why, strerror(-rc));
		if (fd >= 0)
			close(fd);
		return;
	}
	close(d->state_fd);
	d->state_fd = fd;
	log_info("fdstore: the namespace table changed at run time (%s): a run after a crash "
		 "will mount afresh instead of adopting the mount",
		 why);
}

/* The files shown now, for admin (namespaces, status): rebuilt on the
 * loop after every change of the table. */
static int ns_view_refresh(struct daemon *d)
{
	unsigned n;

	if (!d->fs || !d->ns_desc)
		return 0;
	for (unsigned i = 0; i < d->nr_ns; i++) {
		free(d->ns_paths[i]);
		d->ns_paths[i] = NULL;
	}
	d->nr_ns = 0;
	n = fusefs_ns_list(d->fs, d->ns_desc, d->ns_cap);
	for (unsigned i = 0; i < n; i++) {
		const struct fusefs_ns_desc *ns = &d->ns_desc[i];

		if (asprintf(&d->ns_paths[i], "%s/%s", d->cfg->daemon.mountpoint, ns->name) < 0) {
			d->ns_paths[i] = NULL;
			return -ENOMEM;
		}
		d->ans[i] = (struct admin_ns){
			.name = ns->name,
			.ctrl = ns->ctrl,
			.nsid = ns->nsid,
			.size = ns->size,
			.lba_size = ns->lba_size,
			.path = d->ns_paths[i],
		};
		d->nr_ns = i + 1;
	}
	return 0;
}

static const struct admin_ns *admin_ns_view(void *arg, unsigned *nr)
{
	struct daemon *d = arg;

	*nr = d->nr_ns;
	return d->ans;
}

/* The run of attach_thread, on the loop once it ended (or at teardown). */
static void attach_finish(struct dctrl *dc)
{
	struct daemon *d = dc->d;
	int n;

	if (!dc->attach_running)
		return;
	pthread_join(dc->attach_thr, NULL);
	dc->attach_running = false;
	if (dc->attach_rc) {
		if (!dc->sim && dc->attach_bus)
			dc->attach_bus->ops->close(dc->attach_bus);
		dc->attach_bus = NULL;
		dc->attach_state = "failed";
		log_err("%s: attach failed: %s", d->names[dc->idx], dc->attach_err);
		status_update(d);
		return;
	}
	if (dc->sim)
		dc->kept = NULL; /* the controller owns it again */
	else
		ctrl_wire_irqs(dc, dc->attach_bus);
	dc->attach_bus = NULL;
	dc->seen = NVME_CTRL_LIVE;
	dc->attach_state = "live";
	if (dc->detached && d->fs) {
		n = fusefs_ctrl_attach(d->fs, dc->idx);
		dc->detached = false;
		(void)ns_view_refresh(d);
		log_info("%s: attached: %d file%s back", d->names[dc->idx], n, n == 1 ? "" : "s");
	} else {
		log_info("%s: attached", d->names[dc->idx]);
	}
	status_update(d);
}

static void attach_done_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	attach_finish(w->data);
}

/* Off the loop: open the device and bring the controller up (bounded by
 * the engine's bring-up timeouts). */
static void *attach_thread(void *arg)
{
	struct dctrl *dc = arg;
	struct daemon *d = dc->d;
	const struct cfg_controller *cc = &d->cfg->ctrls[dc->idx];
	const char *name = d->names[dc->idx];
	struct nvme_bus *bus = dc->attach_bus;
	int rc = 0;

	if (!bus) {
		rc = vfio_bus_open(cc->device, &bus);
		if (rc)
			snprintf(dc->attach_err, sizeof(dc->attach_err),
				 "%s: cannot open %s through VFIO (%s): is the device back and "
				 "bound to vfio-pci (scripts/vfio-bind %s)? the daemon's log says more",
				 name, cc->device, strerror(-rc), cc->device);
	}
	if (!rc) {
		dc->attach_bus = bus;
		rc = nvme_ctrl_attach(d->ctrls[dc->idx], bus);
		if (rc == -ESTALE)
			snprintf(dc->attach_err, sizeof(dc->attach_err),
				 "%s: the namespaces changed (nsid set, size or format differ from "
				 "those the files were made for): not attached; restart the daemon "
				 "to serve the new ones",
				 name);
		else if (rc && dc->sim && rc == -ENODEV)
			snprintf(dc->attach_err, sizeof(dc->attach_err),
				 "%s: the software controller still reads as removed (nvmefsctl "
				 "inject %s clear first)",
				 name, name);
		else if (rc)
			snprintf(dc->attach_err, sizeof(dc->attach_err), "%s: bring-up on %s failed: %s",
				 name, bus->name, strerror(-rc));
	}
	dc->attach_rc = rc;
	ev_async_send(d->loop, &dc->attach_done);
	return NULL;
}

/* nvmefsctl attach (admin_ctx.attach): start re-opening a removed, failed
 * or detached controller's device and handing it to the engine again; the
 * outcome shows in status (daemon_attach_state). */
static int daemon_attach(void *arg, unsigned i, char *err, size_t errlen)
{
	struct daemon *d = arg;
	struct dctrl *dc = &d->dc[i];
	struct nvme_ctrl *c = d->ctrls[i];
	enum nvme_ctrl_state s = nvme_ctrl_state(c);
	int rc;

	if (dc->attach_running) {
		snprintf(err, errlen, "%s: an attach is running already", d->names[i]);
		return -EBUSY;
	}
	if (s == NVME_CTRL_LIVE || s == NVME_CTRL_RESETTING) {
		snprintf(err, errlen, "%s is %s, not removed: nothing to attach", d->names[i],
			 nvme_ctrl_state_name(s));
		return -EBUSY;
	}
	if (s == NVME_CTRL_FAILED) /* still holds its device: release it first */
		ctrl_remove(dc, "attach after a failed reset", false);
	dc->attach_bus = NULL;
	if (dc->sim) {
		if (!dc->kept) {
			snprintf(err, errlen, "%s: the software controller's bus is gone",
				 d->names[i]);
			return -ENODEV;
		}
		dc->attach_bus = dc->kept;
		/* after inject powerfail: power back, with only the durable data; a
		 * removed sim (-ENODEV) still reads as removed and is refused */
		(void)sim_power_on(dc->sim);
	}
	dc->attach_rc = 0;
	dc->attach_err[0] = '\0';
	rc = pthread_create(&dc->attach_thr, NULL, attach_thread, dc);
	if (rc) {
		snprintf(err, errlen, "%s: cannot start the attach: %s", d->names[i], strerror(rc));
		return -rc;
	}
	dc->attach_running = true;
	dc->attach_state = "attaching";
	log_info("%s: attaching", d->names[i]);
	return 0;
}

static const char *daemon_attach_state(void *arg, unsigned i, const char **why)
{
	struct daemon *d = arg;
	struct dctrl *dc = &d->dc[i];

	*why = dc->attach_state && !strcmp(dc->attach_state, "failed") ? dc->attach_err : NULL;
	return dc->attach_state;
}

/* The volatile write cache of controller i written back before it goes
 * (Flush, all namespaces, on reactor 0's queue), waited for at most
 * FLUSH_WAIT_MS.  The engine's shutdown (CC.SHN) ends a controller for
 * good, so a detach, which must allow an attach, flushes instead. */
#define FLUSH_WAIT_MS 5000
struct flush_wait {
	struct nvme_qpair *qp;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int err;
	atomic_int refs; /* the waiter and the command: the last one frees */
};

static void flush_put(struct flush_wait *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}

static void flush_done(void *arg, int err, uint16_t status)
{
	struct flush_wait *f = arg;

	pthread_mutex_lock(&f->mu);
	f->err = err ? err : status ? -EIO : 0;
	f->done = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	flush_put(f);
}

static void flush_submit(void *arg)
{
	struct flush_wait *f = arg;
	int rc = nvme_qpair_flush(f->qp, 0xffffffffu, flush_done, f);

	if (rc)
		flush_done(f, rc, 0);
}

static int ctrl_flush(struct daemon *d, unsigned i)
{
	struct flush_wait *f = calloc(1, sizeof(*f));
	struct timespec ts;
	int rc;

	if (!f)
		return -ENOMEM;
	f->qp = d->qpairs[i]; /* reactor 0's */
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	atomic_init(&f->refs, 2);
	rc = nvme_reactor_call(d->reactors[0], flush_submit, f);
	if (rc) {
		atomic_store(&f->refs, 1);
		flush_put(f);
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += FLUSH_WAIT_MS / 1000;
	pthread_mutex_lock(&f->mu);
	while (!f->done)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &ts))
			break;
	rc = f->done ? f->err : -ETIMEDOUT;
	pthread_mutex_unlock(&f->mu);
	flush_put(f);
	return rc;
}

/* nvmefsctl detach (admin_ctx.detach): controller i's files go (handles
 * fail with EIO from now on), its write cache is flushed, it is shut down
 * and removed and its device released; the others go on.  The number of
 * files gone. */
static int daemon_detach(void *arg, unsigned i, char *err, size_t errlen)
{
	struct daemon *d = arg;
	struct dctrl *dc = &d->dc[i];
	struct nvme_ctrl *c = d->ctrls[i];
	enum nvme_ctrl_state s = nvme_ctrl_state(c);
	int n, rc;

	if (dc->attach_running) {
		snprintf(err, errlen, "%s: an attach is running: detach when it has ended",
			 d->names[i]);
		return -EBUSY;
	}
	if (dc->detached) {
		snprintf(err, errlen, "%s is detached already", d->names[i]);
		return -EALREADY;
	}
	n = d->fs ? fusefs_ctrl_detach(d->fs, i) : 0;
	dc->detached = true;
	table_changed_mark(d, "a controller detached");
	dc->attach_state = NULL;
	(void)ns_view_refresh(d);
	if (s == NVME_CTRL_LIVE && nvme_ctrl_get_info(c)->vwc) {
		rc = ctrl_flush(d, i);
		if (rc)
			log_warn("%s: detach: flushing the write cache: %s", d->names[i],
				 strerror(-rc));
	}
	ctrl_remove(dc, "detached (nvmefsctl detach)", true);
	s = nvme_ctrl_state(c);
	if (s != NVME_CTRL_REMOVED) {
		/* the files are gone; the device is still held (removal failed) */
		snprintf(err, errlen, "%s: its files are gone but the controller could not be "
			 "released (%s): the daemon's log says why", d->names[i],
			 nvme_ctrl_state_name(s));
		return -EBUSY;
	}
	return n;
}

/* ---- namespace events ---- */

/* The engine's event callback, on its admin thread: copy the namespace
 * changes for the loop; note the other kinds for it (a SMART event makes
 * the health cache read the log again, which logs a warning once). */
static void ctrl_aen(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev)
{
	struct dctrl *dc = arg;
	bool post = false;

	(void)c;
	if (ev->kind != NVME_AEN_NS_CHANGED) {
		pthread_mutex_lock(&dc->aen_mu);
		dc->aen_other |= 1u << ev->kind;
		pthread_mutex_unlock(&dc->aen_mu);
		ev_async_send(dc->d->loop, &dc->aen);
		return;
	}
	if (!ev->nr_changes)
		return;
	pthread_mutex_lock(&dc->aen_mu);
	if (dc->aen_n + ev->nr_changes > dc->aen_cap) {
		unsigned cap = dc->aen_n + ev->nr_changes + 16;
		struct nvme_ns_change *q = realloc(dc->aen_q, cap * sizeof(*q));

		if (q) {
			dc->aen_q = q;
			dc->aen_cap = cap;
		}
	}
	for (unsigned k = 0; k < ev->nr_changes && dc->aen_n < dc->aen_cap; k++) {
		dc->aen_q[dc->aen_n++] = ev->changes[k];
		post = true;
	}
	pthread_mutex_unlock(&dc->aen_mu);
	if (post)
		ev_async_send(dc->d->loop, &dc->aen);
}

/* True when the table changed. */
static bool ns_change_apply(struct daemon *d, unsigned i, const struct nvme_ns_change *ch)
{
	const char *name = d->names[i];
	uint32_t nsid = ch->ns.nsid;
	int rc = 0;

	switch (ch->kind) {
	case NVME_NS_ADDED:
		rc = fusefs_ns_add(d->fs, i, &ch->ns);
		if (rc)
			log_warn("%s: namespace %u added: not shown (%s)", name, nsid,
				 rc == -EOPNOTSUPP ? "LBA size larger than any at start"
				 : rc == -ENOSPC  ? "no free slot in the namespace table"
						  : strerror(-rc));
		else
			log_info("%s: namespace %u added: file %sn%u, %llu bytes", name, nsid, name,
				 nsid, (unsigned long long)(ch->ns.nlba * ch->ns.lba_size));
		break;
	case NVME_NS_REMOVED:
		rc = fusefs_ns_remove(d->fs, i, nsid);
		log_info("%s: namespace %u removed%s", name, nsid,
			 rc ? " (its file was not shown)" : ": file gone, open handles fail with EIO");
		break;
	case NVME_NS_GROWN:
		rc = fusefs_ns_resize(d->fs, i, nsid, ch->ns.nlba);
		if (rc)
			log_warn("%s: namespace %u grew to %llu blocks: size not changed (%s)", name,
				 nsid, (unsigned long long)ch->ns.nlba, strerror(-rc));
		else
			log_info("%s: namespace %u grew from %llu to %llu blocks", name, nsid,
				 (unsigned long long)ch->old_nlba, (unsigned long long)ch->ns.nlba);
		break;
	case NVME_NS_SHRUNK:
		log_err("%s: namespace %u shrank from %llu to %llu blocks: refused, its file keeps "
			"its size and fails every I/O with EIO (restart the daemon to serve the new "
			"size)",
			name, nsid, (unsigned long long)ch->old_nlba, (unsigned long long)ch->ns.nlba);
		return false;
	case NVME_NS_REFORMATTED:
		log_err("%s: namespace %u changed format (LBA size now %u): refused, its file fails "
			"every I/O with EIO (restart the daemon to serve the new format)",
			name, nsid, ch->ns.lba_size);
		return false;
	}
	return rc == 0;
}

static void ctrl_aen_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct dctrl *dc = w->data;
	struct daemon *d = dc->d;
	struct nvme_ns_change *q;
	unsigned n, other;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&dc->aen_mu);
	q = dc->aen_q;
	n = dc->aen_n;
	other = dc->aen_other;
	dc->aen_q = NULL;
	dc->aen_n = dc->aen_cap = 0;
	dc->aen_other = 0;
	pthread_mutex_unlock(&dc->aen_mu);
	if (other & (1u << NVME_AEN_FW_ACTIVATE))
		log_warn("%s: firmware activation starting (asynchronous event): I/O may pause "
			 "while the controller switches firmware",
			 d->names[dc->idx]);
	if (other & (1u << NVME_AEN_ERROR))
		log_info("%s: the controller logged an error (asynchronous event): see nvmefsctl "
			 "error-log %s",
			 d->names[dc->idx], d->names[dc->idx]);
	/* the log read with the event cleared it; the cache reads it again for
	 * status and metrics (and logs a change of the warnings once) */
	if (other & (1u << NVME_AEN_SMART | 1u << NVME_AEN_ERROR))
		(void)health_refresh(admin_health(d->admin), dc->idx);
	for (unsigned k = 0; d->fs && k < n; k++)
		if (ns_change_apply(d, dc->idx, &q[k]))
			table_changed_mark(d, "a namespace added, removed or grown");
	free(q);
	if (n)
		(void)ns_view_refresh(d);
}

/* ---- start-up ---- */

static int open_controllers(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;

	for (unsigned i = 0; i < cfg->nr_ctrls; i++) {
		const struct cfg_controller *cc = &cfg->ctrls[i];
		struct nvme_ctrl_opts co = {
			.name = cc->name,
			.io_queues = cfg->engine.queues,
			.queue_depth = cfg->engine.queue_depth,
			.cq_budget = cfg->engine.cq_budget,
			.io_timeout_ms = cfg->engine.io_timeout_ms,
			.io_retries = cfg->engine.io_retries,
			.interrupts = cfg->engine.mode == CFG_MODE_INTERRUPT,
		};
		struct nvme_bus *bus = NULL;
		struct sim *sim = NULL;
		int rc;

		if (cc->sim) {
			rc = sim_create_from_cfg(cc, &sim);
			if (rc) {
				log_err("%s: cannot create the software controller: %s", cc->name,
					strerror(-rc));
				return rc;
			}
			bus = sim_bus(sim);
			d->dc[i].sim = d->sims[i] = sim;
		} else {
			rc = vfio_bus_open(cc->device, &bus);
			if (rc) {
				log_err("%s: cannot open %s through VFIO: %s", cc->name, cc->device,
					strerror(-rc));
				return rc;
			}
		}
		rc = nvme_ctrl_open(bus, &co, &d->ctrls[i]);
		if (rc) {
			log_err("%s: controller bring-up failed: %s", cc->name, strerror(-rc));
			d->dc[i].sim = d->sims[i] = NULL;
			bus->ops->close(bus);
			return rc;
		}
		d->names[i] = cc->name;
		d->nr_ctrls = i + 1;

		const struct nvme_ctrl_info *in = nvme_ctrl_get_info(d->ctrls[i]);
		log_info("%s: %s %s, %u namespace%s, %u I/O queue%s granted, max transfer %u KiB%s",
			 cc->name, in->model, bus->name, in->nr_ns, in->nr_ns == 1 ? "" : "s",
			 in->nr_io_queues, in->nr_io_queues == 1 ? "" : "s", in->max_xfer / 1024,
			 in->vwc ? ", volatile write cache" : "");
	}
	return 0;
}

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

static int start_reactors(struct daemon *d)
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
	d->qpairs = calloc((size_t)n * d->nr_ctrls, sizeof(*d->qpairs));
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
					       &d->qpairs[(size_t)r * d->nr_ctrls + c]);
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

static int start_admin(struct daemon *d)
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
	rc = ns_view_refresh(d);
	if (rc)
		return rc;
	memset(&ctx, 0, sizeof(ctx));
	ctx.cfg = d->cfg;
	ctx.config_path = d->config_path;
	ctx.start_time = time(NULL);
	ctx.ctrls = d->ctrls;
	ctx.nr_ctrls = d->nr_ctrls;
	ctx.reactors = d->reactors;
	ctx.nr_reactors = d->nr_reactors;
	ctx.qpairs = d->qpairs;
	ctx.ns = d->ans;
	ctx.nr_ns = d->nr_ns;
	ctx.ns_view = admin_ns_view;
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
	ctx.attach = daemon_attach;
	ctx.attach_arg = d;
	ctx.attach_state = daemon_attach_state;
	ctx.detach = daemon_detach;
	ctx.restart = daemon_restart;
	ctx.restart_arg = d;
	return admin_start(d->loop, &ctx, &d->admin);
}

static void teardown(struct daemon *d)
{
	admin_stop(d->admin);
	d->admin = NULL;
	/* an attach still running ends first (bounded by the bring-up) */
	for (unsigned i = 0; i < d->nr_ctrls; i++)
		attach_finish(&d->dc[i]);
	if (d->restarting && d->fs) {
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
	if (d->started) {
		for (unsigned r = 0; r < d->nr_reactors; r++)
			nvme_reactor_stop(d->reactors[r]);
		/* nothing is in flight after the drain and the cancel; a reactor
		 * still waiting past that (a controller that ended nothing) is
		 * left running: freeing its memory under it is worse than exiting */
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (unsigned r = 0; r < d->nr_reactors; r++) {
			unsigned left = 0;

			if (d->gave_up) { /* JOIN_MAX_S for all of them together */
				clock_gettime(CLOCK_MONOTONIC, &t1);
				double used = (t1.tv_sec - t0.tv_sec) * 1e3 +
					      (t1.tv_nsec - t0.tv_nsec) / 1e6;
				left = used < JOIN_MAX_S * 1000 - 1 ? (unsigned)(JOIN_MAX_S * 1000 - used)
								     : 1;
			}
			if (nvme_reactor_join_timeout(d->reactors[r], left) < 0)
				d->abandoned = true;
		}
	}
	if (d->abandoned) {
		log_err("a reactor still waits for commands past the stop's bound: exiting "
			"without shutting the controllers down");
		return;
	}
	if (log_get_level() >= LOG_LVL_DEBUG)
		log_stats(d, LOG_LVL_DEBUG);
	/* every controller shuts down at once: the stop's bound is one
	 * controller's, not their sum */
	if (d->nr_ctrls)
		notify_extend((uint64_t)(SHUTDOWN_MAX_S * 1e6), "stopping: shutting down");
	for (unsigned i = 0; i < d->nr_ctrls; i++)
		nvme_ctrl_shutdown_async(d->ctrls[i]);
	struct timespec s0, s1;

	clock_gettime(CLOCK_MONOTONIC, &s0);
	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		/* one deadline for them all */
		clock_gettime(CLOCK_MONOTONIC, &s1);
		double used = (s1.tv_sec - s0.tv_sec) + (s1.tv_nsec - s0.tv_nsec) / 1e9;
		uint32_t left = used < SHUTDOWN_MAX_S ? (uint32_t)((SHUTDOWN_MAX_S - used) * 1000) : 1;
		int rc = nvme_ctrl_shutdown_wait(d->ctrls[i], left);

		if (rc == -EBUSY) {
			log_err("%s: the controller could be neither disabled nor cut off: its "
				"memory is not freed",
				d->names[i]);
			d->abandoned = true;
		} else if (rc < 0) {
			log_err("%s: shutdown did not end in time", d->names[i]);
			d->abandoned = true;
		}
	}
	if (d->abandoned) {
		/* freeing what a device may still reach, or waiting on a
		 * recovery step that did not end, is worse than exiting: the
		 * kernel resets the functions and unpins their memory */
		log_err("stopping without freeing");
		return;
	}
	for (size_t i = 0; d->qpairs && i < (size_t)d->nr_reactors * d->nr_ctrls; i++)
		if (d->qpairs[i])
			nvme_qpair_destroy(d->qpairs[i]);
	fusefs_destroy(d->fs);
	d->fs = NULL;
	for (unsigned r = 0; r < d->nr_reactors; r++)
		nvme_reactor_destroy(d->reactors[r]);
	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		if (d->loop)
			ctrl_unwatch(d, i);
		/* a removed controller no longer touches a bus: a kept one is ours */
		nvme_ctrl_close(d->ctrls[i]);
		if (d->dc[i].kept)
			d->dc[i].kept->ops->close(d->dc[i].kept);
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

static void watch_signal(struct daemon *d, ev_signal *w, int sig)
{
	ev_signal_init(w, signal_cb, sig);
	w->data = d;
	ev_signal_start(d->loop, w);
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

/* ---- the fd store: storing and adopting the connection ---- */

/* Store the connection's fd and a state record of init (fresh: clear
 * whatever the store held under our names first). */
static void store_connection(struct daemon *d, const struct fusefs_init_params *init)
{
	const struct cfg_controller *vc;
	struct fstate st;
	unsigned conn;
	bool nvmefs;
	char *buf = NULL;
	int rc, fd = fusefs_fd(d->fs);

	if (!fdstore_available() || fd < 0)
		return;
	vc = cfg_volatile_ctrl(d->cfg);
	if (vc) {
		/* a later run would serve the same files over empty memory */
		log_info("fdstore: the FUSE connection is not stored: controller %s keeps its "
			 "namespaces in memory (backing = ram), which dies with the daemon, so the "
			 "mount does not outlive a crash",
			 vc->name);
		return;
	}
	memset(&st, 0, sizeof(st));
	st.init = *init;
	st.transport = init->flags & FUSE_OVER_IO_URING ? FUSEFS_TRANSPORT_URING
							 : FUSEFS_TRANSPORT_CLASSIC;
	if (fusefs_conn_of_fd(fd, &conn) == 0 ||
	    fusefs_conn_at(d->cfg->daemon.mountpoint, &conn, &nvmefs) == 0)
		st.conn = d->conn = conn;
	snprintf(st.mountpoint, sizeof(st.mountpoint), "%s", d->cfg->daemon.mountpoint);
	rc = fusefs_digest(&d->fo, &st.digest);
	buf = malloc(fstate_size());
	if (!rc && !buf)
		rc = -ENOMEM;
	if (!rc)
		rc = fstate_encode(&st, buf, fstate_size());
	if (!rc)
		rc = fdstore_memfd(buf, fstate_size(), &d->state_fd);
	free(buf);
	if (rc) {
		log_warn("fdstore: cannot make the state record: %s: the mount will not outlive a "
			 "crash",
			 strerror(-rc));
		return;
	}
	fdstore_forget();
	if (fdstore_save(fd, d->state_fd) == 0) {
		d->stored = true;
		log_info("fdstore: FUSE connection %u (%s) stored with the service manager", d->conn,
			 fusefs_transport_name(st.transport));
	}
}

/* INIT answered (a reactor thread): the main loop stores the connection. */
static void on_fuse_init(void *arg, const struct fusefs_init_params *p)
{
	struct daemon *d = arg;

	pthread_mutex_lock(&d->init_mu);
	d->init = *p;
	pthread_mutex_unlock(&d->init_mu);
	ev_async_send(d->loop, &d->init_done);
}

static void init_done_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct daemon *d = w->data;
	struct fusefs_init_params p;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&d->init_mu);
	p = d->init;
	pthread_mutex_unlock(&d->init_mu);
	if (!d->stored && !d->stopping)
		store_connection(d, &p);
}

/* Not adopting what the store handed over: say why, end the connection if
 * it is ours (conn, 0: not known) so that nothing waits on it, unmount it
 * lazily, close the fds and empty the store.  The start goes on with a
 * fresh mount (fusefs_create; a mountpoint still busy then fails it). */
static void adopt_refuse(struct daemon *d, unsigned conn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void adopt_refuse(struct daemon *d, unsigned conn, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("fuse: not adopting the connection the service manager handed over: %s; "
		 "mounting afresh",
		 why);
	if (conn) {
		bool aborted;
		int n = fusefs_conn_end(conn, &aborted);

		if (aborted)
			log_info("fuse: FUSE connection %u aborted, %d mount%s of it detached", conn,
				 n > 0 ? n : 0, n == 1 ? "" : "s");
		else if (n < 0)
			log_warn("fuse: cannot end FUSE connection %u: %s", conn, strerror(-n));
	}
	if (d->fuse_fd_in >= 0)
		close(d->fuse_fd_in);
	if (d->state_fd_in >= 0)
		close(d->state_fd_in);
	d->fuse_fd_in = d->state_fd_in = -1;
	fdstore_forget();
}

/* Whether to serve the connection the service manager handed over (true:
 * fo says adopt) or to mount afresh.  Nothing here stats the mountpoint:
 * a connection in the store that no one serves would hang it.
 *
 * Why serving it again is safe.  The kernel resends (FUSE_NOTIFY_RESEND)
 * every request the dead run had read and not answered, so a request it
 * had already sent to the device may run twice.  That is harmless for each
 * kind we serve: a read reads again; a write writes the same bytes to the
 * same blocks, and no later write to an overlapping range can have been
 * answered in between, since the kernel answers the application only with
 * our reply and an application that orders its writes waits for that
 * reply; flush, Write Zeroes and deallocate are idempotent.  The range lock
 * died with the process and starts empty, which is right: every resent
 * request is unanswered, so none of them was ordered after another by us,
 * and new ones queue behind them as usual.  No stale DMA can land in the new
 * run's memory: the controllers are reset and brought up by this start (a
 * VFIO device's container closed with the dead process, which reset and
 * unmapped it; the software controller's memory died with it). */
static bool adopt_check(struct daemon *d)
{
	const struct cfg_controller *vc;
	const char *mnt = d->cfg->daemon.mountpoint;
	struct fstate st;
	unsigned conn_fd = 0, conn_mnt = 0, conn;
	bool nvmefs;
	uint64_t digest;
	char *buf, why[256];
	size_t len = 0;
	int rc;

	if (d->fuse_fd_in < 0 && d->state_fd_in < 0)
		return false;
	if (d->fuse_fd_in >= 0) {
		rc = fusefs_conn_of_fd(d->fuse_fd_in, &conn_fd);
		if (rc == -ENOTTY) {
			adopt_refuse(d, 0, "the fd named \"" FDSTORE_FUSE "\" is not /dev/fuse");
			return false;
		}
		if (rc && rc != -ENODATA) {
			adopt_refuse(d, 0, "the fd named \"" FDSTORE_FUSE "\": %s", strerror(-rc));
			return false;
		}
	}
	if (d->fuse_fd_in < 0 || d->state_fd_in < 0) {
		adopt_refuse(d, conn_fd, "only \"%s\" was handed over",
			     d->fuse_fd_in >= 0 ? FDSTORE_FUSE : FDSTORE_STATE);
		return false;
	}
	buf = malloc(fstate_size() + 1);
	if (!buf) {
		adopt_refuse(d, conn_fd, "out of memory");
		return false;
	}
	rc = fdstore_memfd_read(d->state_fd_in, buf, fstate_size() + 1, &len);
	if (!rc)
		rc = fstate_decode(buf, len, &st);
	free(buf);
	if (rc) {
		adopt_refuse(d, conn_fd, "the state record: %s",
			     rc == -EPERM ? "not sealed" : fstate_strerror(rc));
		return false;
	}
	/* without fdinfo's line (kernels before 6.16) the record's number
	 * stands for the fd's; it is ended only if it is what is mounted at
	 * the record's mountpoint (a number can be reused) */
	conn = conn_fd;
	if (!conn && fusefs_conn_at(st.mountpoint, &conn_mnt, &nvmefs) == 0 && nvmefs &&
	    conn_mnt == st.conn)
		conn = st.conn;
	if ((vc = cfg_volatile_ctrl(d->cfg))) {
		adopt_refuse(d, conn,
			     "controller %s keeps its namespaces in memory (backing = ram): what "
			     "the files held died with the previous run",
			     vc->name);
		return false;
	}
	/* the same checks nvmefsd --check-adopt makes before a restart */
	rc = fusefs_digest(&d->fo, &digest);
	if (rc) {
		adopt_refuse(d, conn, "the config's digest: %s", strerror(-rc));
		return false;
	}
	if (fstate_adoptable(&st, mnt, digest, why, sizeof(why))) {
		adopt_refuse(d, conn, "%s", why);
		return false;
	}
	rc = fusefs_conn_at(mnt, &conn_mnt, &nvmefs);
	if (rc || !nvmefs) {
		adopt_refuse(d, conn, "no nvmefs FUSE mount is on %s", mnt);
		return false;
	}
	if (conn_fd && conn_fd != conn_mnt) {
		adopt_refuse(d, conn, "the fd is FUSE connection %u, %s is connection %u", conn_fd,
			     mnt, conn_mnt);
		return false;
	}
	if (!conn_fd) {
		log_info("fuse: /proc's fdinfo names no FUSE connection (a kernel before 6.16): "
			 "matching the stored connection number and the mount's instead");
		if (st.conn != conn_mnt || !fusefs_conn_alive(conn_mnt)) {
			adopt_refuse(d, 0, "the stored connection %u is not %s's live connection %u",
				     st.conn, mnt, conn_mnt);
			return false;
		}
	}
	d->conn = conn_mnt;
	d->fo.adopt = true;
	d->fo.adopt_fd = d->fuse_fd_in;
	d->fo.adopt_init = st.init;
	d->fuse_fd_in = -1; /* the front end's now */
	d->state_fd = d->state_fd_in;
	d->state_fd_in = -1;
	d->adopted = true;
	log_info("fuse: adopting FUSE connection %u at %s from the previous run (protocol %u.%u, "
		 "max_write %u)",
		 conn_mnt, mnt, st.init.major, st.init.minor, st.init.max_write);
	return true;
}

/* Before the reactors read the adopted connection: have the kernel put
 * back in its queue what the previous run had taken and not answered.
 * Before, not after: a request this run had read already when the resend
 * came would be resent too and served twice (harmless, see adopt_check,
 * but a restart in place, which leaves nothing unanswered, would then
 * resend something). */
static void adopt_resend(struct daemon *d)
{
	int rc = fusefs_resend(d->fs);

	if (rc == 0)
		log_info("fuse: the kernel resends the requests the previous run left unanswered");
	else
		log_err("fuse: asking the kernel to resend requests: %s", strerror(-rc));
}

/* The reactors serve the adopted connection: keep the fds in the store. */
static void adopt_finish(struct daemon *d)
{
	/* the same open files as in the store: systemd keeps one of each */
	if (fdstore_available() && fdstore_save(fusefs_fd(d->fs), d->state_fd) == 0)
		d->stored = true;
}

static int run(struct daemon *d)
{
	const struct cfg_daemon *cd = &d->cfg->daemon;
	sigset_t sigs, old;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	/* reactor threads inherit a mask without the signals we handle */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);

	d->loop = ev_default_loop(0);
	if (!d->loop) {
		log_err("cannot create the main event loop");
		return -ENOMEM;
	}
	rc = open_controllers(d);
	if (rc)
		return rc;
	rc = start_reactors(d);
	if (rc)
		return rc;
	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		rc = ctrl_watch(d, i);
		if (rc)
			return rc;
	}

	d->fo = (struct fusefs_opts){
		.mountpoint = cd->mountpoint,
		.file_mode = cd->file_mode,
		.uid = cd->uid,
		.gid = cd->gid,
		.allow_other = cd->allow_other,
		.debug = getenv("NVMEFS_FUSE_DEBUG") != NULL,
		.nr_ctrls = d->nr_ctrls,
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
		.on_init = on_fuse_init,
		.on_init_arg = d,
		.on_exit = on_session_exit,
		.on_exit_arg = d,
	};
	ev_async_init(&d->session_end, session_end_cb);
	d->session_end.data = d;
	ev_async_start(d->loop, &d->session_end);
	ev_async_init(&d->init_done, init_done_cb);
	d->init_done.data = d;
	ev_async_start(d->loop, &d->init_done);
	if (adopt_check(d)) /* served over /dev/fuse whatever the config says */
		d->transport = d->fo.transport = FUSEFS_TRANSPORT_CLASSIC;
	rc = fusefs_create(&d->fo, &d->fs);
	if (rc)
		return rc;
	rc = start_admin(d);
	if (rc) {
		log_err("%s: admin socket: %s", cd->admin_socket, strerror(-rc));
		return rc;
	}
	if (d->adopted)
		adopt_resend(d);
	for (unsigned r = 0; r < d->nr_reactors; r++) {
		rc = nvme_reactor_start(d->reactors[r]);
		if (rc) {
			log_err("reactor %u: cannot start: %s", r, strerror(-rc));
			for (unsigned k = 0; k < r; k++)
				nvme_reactor_stop(d->reactors[k]);
			for (unsigned k = 0; k < r; k++)
				nvme_reactor_join(d->reactors[k]);
			return rc;
		}
	}
	d->started = true;
	if (d->adopted)
		adopt_finish(d);

	watch_signal(d, &d->sig_term, SIGTERM);
	watch_signal(d, &d->sig_int, SIGINT);
	watch_signal(d, &d->sig_usr1, SIGUSR1);
	watch_signal(d, &d->sig_usr2, SIGUSR2);
	watch_signal(d, &d->sig_hup, SIGHUP);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	log_info("ready: %u namespace%s at %s, %u reactor%s, %s mode", d->nr_ns,
		 d->nr_ns == 1 ? "" : "s", cd->mountpoint, d->nr_reactors,
		 d->nr_reactors == 1 ? "" : "s", cfg_mode_name(d->cfg->engine.mode));
	char status[1024];

	status_format(d, status, sizeof(status));
	notify_ready("%s", status);
	ev_run(d->loop, 0);
	return 0;
}

/* The journal's CONTROLLER= field comes from these names (log.h). */
static void log_names(const struct cfg *cfg)
{
	const char *names[CFG_MAX_CTRLS];
	unsigned n = 0;

	for (; n < cfg->nr_ctrls && n < CFG_MAX_CTRLS; n++)
		names[n] = cfg->ctrls[n].name;
	log_set_ctrl_names(names, n);
}

int main(int argc, char **argv)
{
	struct daemon d;
	struct opt o;
	int rc;

	opt_parse(argc, argv, &o);
	switch (o.action) {
	case OPT_EXIT:
		return o.exit_code;
	case OPT_CHECK_CONFIG:
		return opt_check_config(o.config);
	case OPT_CHECK_ADOPT:
		return upg_check_adopt_main(o.config, o.state_fd, o.ns_table);
	case OPT_HAS_CONTROLLERS:
		return opt_has_controllers(o.config);
	case OPT_RUN:
	default:
		break;
	}
	memset(&d, 0, sizeof(d));
	for (unsigned i = 0; i < CFG_MAX_CTRLS; i++)
		d.dc[i].req_efd = d.dc[i].err_efd = -1;
	d.state_fd = d.keep_fuse_fd = -1;
	d.argv = argv;
	/* now, before anything changes directory: the path an upgrade installs
	 * the new binary at (not /proc/self/exe, this image) */
	rc = upg_resolve_binary(argv[0], d.binary, sizeof(d.binary));
	if (rc) {
		d.binary[0] = '\0';
		log_warn("the path of this binary (%s): %s: nvmefsctl restart is refused",
			 argv[0], strerror(-rc));
	}
	pthread_mutex_init(&d.init_mu, NULL);
	/* first: the handed fds become close-on-exec and LISTEN_* is unset */
	fdstore_take(&d.fuse_fd_in, &d.state_fd_in);
	d.config_path = o.config;
	rc = cfg_load(o.config, &d.cfg, stderr);
	if (rc)
		return OPT_EXIT_CONFIG;
	log_set_level((enum log_level)d.cfg->daemon.log_level);
	if (!d.cfg->nr_ctrls) { /* allow_no_controller = yes */
		log_err("no controllers configured in %s: nothing to serve", o.config);
		cfg_free(d.cfg);
		return OPT_EXIT_CONFIG;
	}
	log_names(d.cfg);
	rc = run(&d);
	teardown(&d);
	if (d.abandoned)
		_exit(OPT_EXIT_ABANDONED); /* threads still run: no atexit handler, no freeing */
	if (d.restarting && rc == 0) {
		log_info("restart: controllers shut down, exec %s", d.binary);
		fflush(stderr);
		rc = d.keep_fuse_fd >= 0 && d.state_fd >= 0
			     ? upg_exec(d.binary, d.argv, d.keep_fuse_fd, d.state_fd)
			     : -EBADF;
		/* this image's state is gone: the service manager restarts the
		 * daemon, which adopts the connection from its fd store */
		log_err("restart: exec %s: %s: exiting for the service manager to restart the "
			"daemon (the connection stays in its fd store)",
			d.binary, strerror(-rc));
		cfg_free(d.cfg);
		return OPT_EXIT_FAILURE;
	}
	if (rc == 0 && d.gave_up)
		log_warn("stopped, after ending with EIO the requests the drain could not wait "
			 "for: exit status %d",
			 OPT_EXIT_ABANDONED);
	else if (rc == 0)
		log_info("stopped");
	cfg_free(d.cfg);
	return rc ? OPT_EXIT_FAILURE : d.gave_up ? OPT_EXIT_ABANDONED : OPT_EXIT_OK;
}

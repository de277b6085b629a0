/* main.c - nvmefsd: load the config, bring the controllers up, start one
 * reactor per queue, mount the namespaces, serve until SIGTERM/SIGINT.
 *
 * The main thread runs its own libev loop (signals, the admin socket, the
 * drain at shutdown); the I/O path lives entirely on the reactors.
 *
 * Stopping: stop taking FUSE requests, wait until every request taken has
 * been answered, unmount, stop the reactors, delete the queues, shut the
 * controllers down (CC.SHN) and exit 0; exit 1 if the drain deadline passed
 * with requests unanswered (the front end frees them and logs how many).
 *
 * The daemon always stays in the foreground and logs to stderr (systemd's
 * Type=notify runs it that way); -f is accepted for compatibility.
 */
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "config.h"
#include "fuse_fs.h"
#include "log.h"
#include "notify.h"
#include "nvme.h"
#include "options.h"
#include "sim.h"

#define POOL_BYTES (32u << 20)  /* DMA buffers per reactor: 32 requests of 1 MiB */
#define POOL_MIB_MAX 4096u
#define DRAIN_POLL 0.01         /* seconds between checks while draining */

struct daemon {
	struct cfg *cfg;
	const char *config_path;
	unsigned nr_ctrls;
	struct nvme_ctrl *ctrls[CFG_MAX_CTRLS];
	const char *names[CFG_MAX_CTRLS];
	unsigned nr_reactors;
	struct nvme_reactor **reactors;
	bool started;
	struct nvme_qpair **qpairs;
	struct fusefs *fs;
	struct admin *admin;
	struct admin_ns *ans;
	char **ns_paths;
	unsigned nr_ns;

	struct ev_loop *loop;
	ev_signal sig_term, sig_int, sig_usr1, sig_hup;
	ev_async session_end;
	ev_timer drain;
	bool stopping;
	bool gave_up;           /* requests left unanswered at the drain deadline */
	ev_tstamp drain_deadline;
};

static void log_stats(struct daemon *d, enum log_level lvl)
{
	struct fusefs_stats fst;

	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		struct sim *s = sim_from_bus(nvme_ctrl_bus(d->ctrls[i]));
		struct sim_stats st;

		if (!s)
			continue;
		sim_get_stats(s, &st);
		log_msg(lvl,
			"stats: %s: sim reads=%llu writes=%llu flushes=%llu write_zeroes=%llu dsm=%llu "
			"bytes_read=%llu bytes_written=%llu dma_errors=%llu invalid_cmds=%llu",
			d->names[i], (unsigned long long)st.reads, (unsigned long long)st.writes,
			(unsigned long long)st.flushes, (unsigned long long)st.write_zeroes,
			(unsigned long long)st.dsm, (unsigned long long)st.bytes_read,
			(unsigned long long)st.bytes_written, (unsigned long long)st.dma_errors,
			(unsigned long long)st.invalid_cmds);
	}
	if (d->fs) {
		fusefs_stats_get(d->fs, &fst);
		log_msg(lvl,
			"stats: fuse reads=%llu writes=%llu rmw_writes=%llu fsyncs=%llu flushes_sent=%llu "
			"fallocs=%llu errors=%llu lock_waits=%llu resource_waits=%llu",
			(unsigned long long)fst.reads, (unsigned long long)fst.writes,
			(unsigned long long)fst.rmw_writes, (unsigned long long)fst.fsyncs,
			(unsigned long long)fst.flushes_sent, (unsigned long long)fst.fallocs,
			(unsigned long long)fst.errors, (unsigned long long)fst.lock_waits,
			(unsigned long long)fst.resource_waits);
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

static void drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = w->data;
	(void)revents;

	if (fusefs_drained(d->fs)) {
		log_info("drained: no request in flight");
	} else if (ev_now(loop) < d->drain_deadline) {
		return;
	} else {
		log_warn("%u request(s) still in flight at the drain deadline: stopping anyway",
			 fusefs_inflight(d->fs));
		d->gave_up = true;
	}
	ev_timer_stop(loop, w);
	ev_break(loop, EVBREAK_ALL);
}

static void begin_stop(struct daemon *d, const char *why)
{
	if (d->stopping) {
		log_info("%s: already stopping", why);
		return;
	}
	d->stopping = true;
	log_info("%s: stopping: no new requests, draining %u in flight", why,
		 fusefs_inflight(d->fs));
	notify_stopping("stopping (%s)", why);
	fusefs_stop(d->fs);
	/* the engine fails a stuck command after its timeout (and a reset):
	 * allow for that, then give up waiting */
	d->drain_deadline = ev_now(d->loop) + 2.0 * d->cfg->engine.io_timeout_ms / 1000.0 + 5.0;
	ev_timer_init(&d->drain, drain_cb, 0.0, DRAIN_POLL);
	d->drain.data = d;
	ev_timer_start(d->loop, &d->drain);
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
		log_info("SIGHUP: ignored (restart the daemon to apply a new config)");
		break;
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
			.interrupts = cfg->engine.mode != CFG_MODE_POLL,
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
	if (!d->reactors || !d->qpairs)
		return -ENOMEM;
	for (unsigned r = 0; r < n; r++) {
		struct nvme_reactor_opts ro = {
			.id = r,
			.cpu = e->nr_cpus ? (int)e->cpus[r % e->nr_cpus] : -1,
			.numa = e->numa,
			.mode = e->mode == CFG_MODE_POLL        ? NVME_MODE_POLL
				: e->mode == CFG_MODE_INTERRUPT ? NVME_MODE_INTERRUPT
								: NVME_MODE_HYBRID,
			.buf_pool_bytes = pool_bytes(),
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

static int start_admin(struct daemon *d)
{
	const struct fusefs_ns_desc *ns = fusefs_namespaces(d->fs, &d->nr_ns);
	struct admin_ctx ctx;

	d->ans = calloc(d->nr_ns ? d->nr_ns : 1, sizeof(*d->ans));
	d->ns_paths = calloc(d->nr_ns ? d->nr_ns : 1, sizeof(*d->ns_paths));
	if (!d->ans || !d->ns_paths)
		return -ENOMEM;
	for (unsigned i = 0; i < d->nr_ns; i++) {
		if (asprintf(&d->ns_paths[i], "%s/%s", d->cfg->daemon.mountpoint, ns[i].name) < 0) {
			d->ns_paths[i] = NULL;
			return -ENOMEM;
		}
		d->ans[i] = (struct admin_ns){
			.name = ns[i].name,
			.ctrl = ns[i].ctrl,
			.nsid = ns[i].nsid,
			.size = ns[i].size,
			.lba_size = ns[i].lba_size,
			.path = d->ns_paths[i],
		};
	}
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
	return admin_start(d->loop, &ctx, &d->admin);
}

static void teardown(struct daemon *d)
{
	admin_stop(d->admin);
	d->admin = NULL;
	if (d->fs)
		fusefs_unmount(d->fs);
	if (d->started) {
		for (unsigned r = 0; r < d->nr_reactors; r++)
			nvme_reactor_stop(d->reactors[r]);
		for (unsigned r = 0; r < d->nr_reactors; r++)
			nvme_reactor_join(d->reactors[r]);
	}
	if (log_get_level() >= LOG_LVL_DEBUG)
		log_stats(d, LOG_LVL_DEBUG);
	for (size_t i = 0; d->qpairs && i < (size_t)d->nr_reactors * d->nr_ctrls; i++)
		if (d->qpairs[i])
			nvme_qpair_destroy(d->qpairs[i]);
	fusefs_destroy(d->fs);
	d->fs = NULL;
	for (unsigned r = 0; r < d->nr_reactors; r++)
		nvme_reactor_destroy(d->reactors[r]);
	for (unsigned i = 0; i < d->nr_ctrls; i++)
		nvme_ctrl_close(d->ctrls[i]);
	for (unsigned i = 0; d->ns_paths && i < d->nr_ns; i++)
		free(d->ns_paths[i]);
	free(d->ns_paths);
	free(d->ans);
	free(d->qpairs);
	free(d->reactors);
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

	struct fusefs_opts fo = {
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
		.on_exit = on_session_exit,
		.on_exit_arg = d,
	};
	ev_async_init(&d->session_end, session_end_cb);
	d->session_end.data = d;
	ev_async_start(d->loop, &d->session_end);
	rc = fusefs_create(&fo, &d->fs);
	if (rc)
		return rc;
	rc = start_admin(d);
	if (rc) {
		log_err("%s: admin socket: %s", cd->admin_socket, strerror(-rc));
		return rc;
	}
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

	watch_signal(d, &d->sig_term, SIGTERM);
	watch_signal(d, &d->sig_int, SIGINT);
	watch_signal(d, &d->sig_usr1, SIGUSR1);
	watch_signal(d, &d->sig_hup, SIGHUP);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	log_info("ready: %u namespace%s at %s, %u reactor%s, %s mode", d->nr_ns,
		 d->nr_ns == 1 ? "" : "s", cd->mountpoint, d->nr_reactors,
		 d->nr_reactors == 1 ? "" : "s", cfg_mode_name(d->cfg->engine.mode));
	notify_ready("serving %u namespace%s at %s", d->nr_ns, d->nr_ns == 1 ? "" : "s",
		     cd->mountpoint);
	ev_run(d->loop, 0);
	return 0;
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
	case OPT_RUN:
	default:
		break;
	}
	memset(&d, 0, sizeof(d));
	d.config_path = o.config;
	rc = cfg_load(o.config, &d.cfg, stderr);
	if (rc)
		return 1;
	log_set_level((enum log_level)d.cfg->daemon.log_level);
	rc = run(&d);
	teardown(&d);
	if (rc == 0)
		log_info("stopped");
	cfg_free(d.cfg);
	return rc || d.gave_up ? 1 : 0;
}

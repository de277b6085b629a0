/* main.c - nvmefsd: load the config, bring the controllers up, start one
 * reactor per queue, mount the namespaces, serve until SIGTERM/SIGINT.
 *
 * This file is the options and the wiring; the rooms do the work:
 *   ctrlmgr.c    the controllers served and each one's life after start
 *                (removal, attach, detach, namespace changes);
 *   lifecycle.c  the daemon's states: start-up steps, serving, the restart
 *                in place, the bounded stop;
 *   adopt.c      the fd store: the mount outlives the daemon;
 *   admin*.c     the admin socket; upgrade.c the re-exec.
 * struct daemon (daemon.h) is what they share.
 *
 * The main thread runs its own libev loop (signals, the admin socket,
 * controller events, the drain at shutdown); the I/O path lives entirely on
 * the reactors.
 *
 * The daemon always stays in the foreground and logs to stderr (systemd's
 * Type=notify runs it that way); -f is accepted for compatibility.
 */
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt.h"
#include "config.h"
#include "ctrlmgr.h"
#include "daemon.h"
#include "fdstore.h"
#include "fuse_fs.h"
#include "lifecycle.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "upgrade.h"

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = w->data;
	(void)loop;
	(void)revents;

	switch (w->signum) {
	case SIGUSR1:
		lc_log_stats(d, LOG_LVL_INFO);
		break;
	case SIGHUP:
		log_info("SIGHUP: ignored (systemctl reload nvmefs, or SIGUSR2, applies a new config in "
			 "place)");
		break;
	case SIGUSR2: {
		char msg[PATH_MAX + 64], err[4096];

		/* the verdict is logged (no one to reply to) */
		(void)lc_restart(d, NULL, NULL, msg, sizeof(msg), err, sizeof(err));
		break;
	}
	default:
		lc_begin_stop(d, strsignal(w->signum));
	}
}

static void watch_signal(struct daemon *d, ev_signal *w, int sig)
{
	ev_signal_init(w, signal_cb, sig);
	w->data = d;
	ev_signal_start(d->loop, w);
}

static void session_end_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	lc_begin_stop(w->data, "mount gone");
}

/* from a reactor thread */
static void on_session_exit(void *arg)
{
	struct daemon *d = arg;

	ev_async_send(d->loop, &d->session_end);
}

static int run(struct daemon *d)
{
	const struct cfg_daemon *cd = &d->cfg->daemon;
	sigset_t sigs, old;
	char status[1024];
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
	rc = cm_open_all(d);
	if (rc)
		return rc;
	rc = lc_start_reactors(d);
	if (rc)
		return rc;
	for (unsigned i = 0; i < d->nr_ctrls; i++) {
		rc = cm_watch(d, i);
		if (rc)
			return rc;
	}

	lc_fuse_opts(d);
	d->fo.on_init = adopt_on_init;
	d->fo.on_init_arg = d;
	d->fo.on_exit = on_session_exit;
	d->fo.on_exit_arg = d;
	ev_async_init(&d->session_end, session_end_cb);
	d->session_end.data = d;
	ev_async_start(d->loop, &d->session_end);
	adopt_watch_init(d);
	if (adopt_check(d)) { /* served over /dev/fuse whatever the config says */
		d->transport = d->fo.transport = FUSEFS_TRANSPORT_CLASSIC;
		(void)lc_set_state(&d->lc, LC_ADOPTING);
	}
	rc = fusefs_create(&d->fo, &d->fs);
	if (rc) {
		/* the mountpoint the config names was refused (not empty, a
		 * symbolic link, not a directory; logged): starting again
		 * cannot mend it (nvmefsd(8), exit 78) */
		if (!d->adopted && (rc == -ENOTEMPTY || rc == -ELOOP || rc == -ENOTDIR))
			d->config_refused = true;
		return rc;
	}
	rc = lc_start_admin(d);
	if (rc) {
		log_err("%s: admin socket: %s", cd->admin_socket, strerror(-rc));
		return rc;
	}
	if (d->adopted)
		adopt_resend(d);
	rc = lc_run_reactors(d);
	if (rc)
		return rc;
	if (d->adopted)
		adopt_finish(d);

	watch_signal(d, &d->sig_term, SIGTERM);
	watch_signal(d, &d->sig_int, SIGINT);
	watch_signal(d, &d->sig_usr1, SIGUSR1);
	watch_signal(d, &d->sig_usr2, SIGUSR2);
	watch_signal(d, &d->sig_hup, SIGHUP);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	(void)lc_set_state(&d->lc, LC_SERVING);
	d->status_live = true;
	log_info("ready: %u namespace%s at %s, %u reactor%s, %s mode", d->nr_ns,
		 d->nr_ns == 1 ? "" : "s", cd->mountpoint, d->nr_reactors,
		 d->nr_reactors == 1 ? "" : "s", cfg_mode_name(d->cfg->engine.mode));
	cm_status_format(d, status, sizeof(status));
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
		d.cm[i].req_efd = d.cm[i].err_efd = -1;
	d.state_fd = d.keep_fuse_fd = -1;
	d.argv = argv;
	/* now, before an upgrade replaces the file: the path an upgrade
	 * installs the new binary at, as the kernel ran it (not argv[0] or
	 * PATH, which the caller chose) */
	{
		char why[PATH_MAX + 256];

		rc = upg_resolve_binary(d.binary, sizeof(d.binary), why, sizeof(why));
		if (rc)
			d.binary[0] = '\0';
		else
			rc = upg_binary_check(d.binary, why, sizeof(why));
		if (rc)
			log_warn("%s: nvmefsctl restart is refused", why);
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
	lc_teardown(&d);
	rc = lc_finish(&d, rc);
	cfg_free(d.cfg);
	return rc;
}

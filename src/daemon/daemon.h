/* daemon.h - struct daemon: what nvmefsd's rooms share.  Private to
 * src/daemon (main.c and the rooms it wires); nothing else sees it.
 *
 * Threads.  The main thread owns the struct: it starts the daemon, runs the
 * libev loop (signals, the admin socket, controller events, the drain) and
 * tears everything down, and every field is read and written there unless
 * its comment says otherwise.  The reactors never see it: they get the
 * arrays ctrls, names and qpairs through the front end's and admin's
 * options.  The other threads that touch it, each through the fields named:
 *   - a reactor, once, when INIT is answered: init, under init_mu, then
 *     init_done (adopt.c);
 *   - the engine's threads: a controller's event and aen (ctrlmgr.h);
 *   - a controller's attach (or add) thread: its attach fields while it
 *     runs.
 * Prefix: none (the rooms' functions carry theirs).
 */
#ifndef NVMEFS_DAEMON_H
#define NVMEFS_DAEMON_H

#include <ev.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "admin.h"
#include "config.h"
#include "cpumap.h"
#include "ctrlmgr.h"
#include "fuse_fs.h"
#include "lifecycle.h"
#include "nvme.h"

struct sim;

struct daemon {
	struct cfg *cfg;          /* the running config */
	const char *config_path;

	/* ---- the controllers (ctrlmgr.h): slot i is ctrls[i], names[i], cm[i]
	 * and sims[i].  slots is fixed at start (the config's controllers and
	 * room for more, which a reload may add); a slot without a controller
	 * has ctrls[i] NULL.  nr_ctrls: the controllers the daemon started
	 * with, in slots 0 .. nr_ctrls - 1. ---- */
	unsigned slots;
	unsigned nr_ctrls;
	struct nvme_ctrl *ctrls[CFG_MAX_CTRLS];
	const char *names[CFG_MAX_CTRLS];
	struct cm_ctrl cm[CFG_MAX_CTRLS];
	struct sim *sims[CFG_MAX_CTRLS]; /* cm[i].sim, in the shape admin wants */

	/* ---- reactors and queues (lifecycle.c): qpairs[r * slots + i] is
	 * reactor r's queue pair on slot i's controller (NULL: none) ---- */
	unsigned nr_reactors;
	struct nvme_reactor **reactors;
	struct nvme_qpair **qpairs;
	bool iso;                 /* each reactor keeps a DMA pool per controller */
	/* FUSE over io_uring: the transport asked of the front end, and which
	 * reactor serves each possible CPU's FUSE queue (cpumap.h) */
	enum fusefs_transport transport;
	unsigned nr_cpu_map;
	unsigned *cpu_map;
	struct cpumap_cpu *cpu_topo;

	/* ---- the mount and the admin socket ---- */
	struct fusefs_opts fo;
	struct fusefs *fs;
	struct admin *admin;
	struct admin_ns *ans;    /* the files shown now (cm_ns_view_refresh) */
	char **ns_paths;
	unsigned nr_ns;
	struct fusefs_ns_desc *ns_desc; /* scratch of fusefs_ns_capacity entries */
	unsigned ns_cap;

	/* ---- the fd store (adopt.c): the fds handed by the service manager
	 * (-1: none), our state record's memfd, and the connection's number
	 * (0: not known).  init is written by a reactor under init_mu, which
	 * then sends init_done. ---- */
	int fuse_fd_in, state_fd_in;
	int state_fd;
	bool adopted, stored;
	unsigned conn;
	pthread_mutex_t init_mu;
	struct fusefs_init_params init;
	ev_async init_done;
	/* the first change of the namespace table at run time ("" none): the
	 * state record then makes a later run refuse to adopt (ctrlmgr.c) */
	char table_changed[128];

	/* ---- the life cycle (lifecycle.h) ---- */
	struct lc lc;
	/* start-up failed on a path the config names (the mountpoint): the
	 * exit status is OPT_EXIT_CONFIG, which the unit does not restart */
	bool config_refused;
	bool status_live;         /* STATUS= is the controllers' line (serving) */
	/* planned upgrade: the binary to re-execute (resolved at start), the
	 * original argv, and the connection's fd kept past teardown */
	char binary[PATH_MAX];
	char **argv;
	int keep_fuse_fd;
	struct ev_loop *loop;
	ev_signal sig_term, sig_int, sig_usr1, sig_usr2, sig_hup;
	ev_async session_end;   /* from a reactor: the session ended */
};

#endif

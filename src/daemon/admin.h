/* admin.h - the daemon's admin socket: live status and statistics for nvmefsctl.
 *
 * A UNIX stream socket at cfg->daemon.admin_socket (mode 0600, root only,
 * unless cfg->daemon.admin_gid or operator_gid is set: then 0660 and that
 * group, admin_gid first), served from the daemon's main-thread libev loop, never
 * from a reactor: it is not on the I/O path.  Statistics are read with the
 * engine's snapshot functions, which take no lock on the I/O path.
 *
 * Protocol: newline-delimited JSON.  Each request is one object on one line,
 *   {"cmd": "status"|"stats"|"queues"|"namespaces"|"identify"|"config"|"metrics"|
 *           "inject"|"attach"|"detach"|"list"|"smart-log"|"error-log"|"fw-log"|
 *           "effects-log"|"restart",
 *    "controller": NAME,   (identify, inject, attach, detach, the log pages)
 *    "fault": F, ...       (inject only: see below)
 *    "id": ANY}            (optional: echoed in the reply)
 * and each reply is one object on one line, {"ok": true, ...} or
 * {"ok": false, "error": "..."}, in request order.  Blank lines are ignored.
 * A malformed or unknown request gets an error reply and the client may go
 * on; a line longer than ADMIN_LINE_MAX gets an error reply and the client is
 * closed.  A client never blocks the daemon: all I/O is non-blocking, a
 * client whose unread replies exceed ADMIN_OUT_MAX is dropped, one that is
 * idle for idle_timeout seconds is closed, one whose request line is not
 * complete request_timeout seconds after its first byte arrived is answered
 * with an error and closed (however steadily it trickles bytes), and at most
 * ADMIN_MAX_CLIENTS are served at once, at most ADMIN_MAX_CLIENTS_PER_UID of
 * one uid other than root, and the last ADMIN_ROOT_RESERVE only for root.  A
 * reply longer than reply_max is replaced by an error.
 *
 * Who may do what is decided per request from the peer's credentials as the
 * kernel recorded them at connect (SO_PEERCRED, SO_PEERGROUPS): inject,
 * attach and restart need root or operator_gid (primary or supplementary); the other
 * commands root, admin_gid or operator_gid.  A refused request is answered
 * {"ok": false, "error": "permission denied: ..."} and logged; a peer with
 * no right at all is refused at accept.  What a client can make the daemon
 * log again and again (a refused request; a refused or dropped
 * connection) is rate-limited (log.h, log_rl_*): at most ADMIN_LOG_BURST
 * lines of each kind per ADMIN_LOG_INTERVAL_MS, the next line saying how
 * many were not logged.
 *
 * inject reaches the software controller's fault injection (src/sim/sim.h);
 * it is refused for a PCI controller.  "fault" is one of
 *   "delay" + "ms": N     every command from now on completes N ms late (0: off)
 *   "hang" / "unhang"     stop / resume fetching commands
 *   "cfs"                 controller fatal status
 *   "stuck"               a wedged controller: disable, shutdown and function
 *                         reset ignored (the engine cuts it off from memory)
 *   "remove"              surprise removal: BAR0 reads all ones, DMA stops
 *                         (the device keeps power and its write cache)
 *   "powerfail" [+ "seed": N]   a power cut: every write not yet durable
 *                         (not flushed, not FUA, not destaged) is lost
 *                         (seed 0 or absent) or, with a seed in
 *                         0..2^63-1, lost or kept block by block as the
 *                         seed decides; then the device is off, dead to
 *                         the host as after "remove" (sim_fault_powerfail)
 *   "fail" + "count": N + "status": S   the next N I/O commands fail with S
 *   "lose" + "count": N   the next N I/O commands never complete
 *   "misdirect-write" / "misdirect-read" + "count": N + "blocks": B
 *                         the next N Writes (Reads) of any namespace land
 *                         (read) B blocks away (sim_fault_misdirect)
 *   "corrupt" + "nsid": N + "lba": L + "byte": B   one byte of block L of
 *                         namespace N inverted on the medium
 *   "clear"               the knobs above cancelled (delay, hang, fail,
 *                         lose, misdirect); a controller that answers is otherwise left
 *                         alone (CFS stays until the engine resets it); a
 *                         removed or powered-off one answers again, its
 *                         registers as after a power-on reset, and can then
 *                         be attached
 * The reply echoes "controller", "fault", its arguments ("ms", "count",
 * "status", "seed") and the controller's "state" as the engine sees it then.
 * attach re-attaches a removed, failed or detached controller through the
 * daemon's admin_ctx.attach, which starts the work and returns: its reply's
 * "state" is "attaching", and status shows each controller's last attach
 * as "attach" ("attaching", "live" or "failed") with "attach_error" when it
 * failed.  detach (admin_ctx.detach) takes a live controller away while
 * the others serve: its files go, its device is released; the reply
 * carries the files taken away ("files") and the controller's state.  A software
 * controller cut off by "powerfail" is powered on first and comes back with
 * only its durable data; one removed by "remove" is refused until "clear".
 *
 * smart-log, error-log, fw-log and effects-log read log pages 02h, 01h (ELPE
 * + 1 entries, at most 256), 03h and 05h from the device with the engine's
 * asynchronous admin command and never wait on the loop: the reply is
 * deferred until the engine calls back, the client's further requests wait
 * behind it (replies stay in request order) while other clients are served.
 * A device that has not answered after log_timeout seconds gets the client
 * an error ("... timed out after N s"); the page's buffer stays allocated
 * until the engine's callback has run, whatever happened to the client.
 * effects-log is refused (-EOPNOTSUPP) when Identify LPA bit 1 is clear.
 * list is built from the identify data of bring-up.
 *
 * status and metrics also show each controller's last SMART / Health log as
 * read by the health cache (health.h), which admin_start starts and
 * admin_stop stops.
 *
 * The socket's path is walked as safepath.h says (no symbolic link, every
 * directory root's or the effective user's, none writable by others unless
 * sticky, the socket's own directory writable by its owner only: -ELOOP,
 * -EPERM... logged), since whoever may change it could put a socket of
 * their own there for root's nvmefsctl to trust.
 * The socket path is taken over from a crashed daemon (a socket file that
 * refuses connections is replaced) but never from a live one (-EADDRINUSE)
 * and never when it is not a socket (-EEXIST; a symlink is not followed).
 * The socket is bound, given its group and mode inside a fresh private
 * directory next to the path and then renamed onto it, so nothing is ever
 * changed through a path that another user could swap.
 */
#ifndef NVMEFS_ADMIN_H
#define NVMEFS_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct ev_loop;
struct cfg;
struct nvme_ctrl;
struct nvme_reactor;
struct nvme_qpair;
struct fusefs_stats;
struct fusefs_ns_stats;
struct cpumap_cpu;
struct admin;
struct sim;

#define ADMIN_LINE_MAX     (64 * 1024)   /* longest request line */
#define ADMIN_OUT_MAX      (1024 * 1024) /* unread reply bytes before a client is dropped */
#define ADMIN_MAX_CLIENTS  64
#define ADMIN_ROOT_RESERVE 8 /* of those, kept for root */
#define ADMIN_MAX_CLIENTS_PER_UID 8 /* clients of one uid other than root */
#define ADMIN_REPLY_MAX    (16 * 1024 * 1024) /* longest reply line */
#define ADMIN_IDLE_TIMEOUT 30.0 /* seconds */
#define ADMIN_REQUEST_TIMEOUT 10.0 /* seconds from a request's first byte to its newline */
#define ADMIN_LOG_TIMEOUT  5.0  /* seconds a log page command waits for the device */
#define ADMIN_LOG_BURST    10   /* lines of refusals (of each kind) per interval */
#define ADMIN_LOG_INTERVAL_MS 5000

/* How a restart that returned ADMIN_RESTART_PENDING ended: rc 0 with msg
 * (the re-exec begins), or a negative errno with the reason in err. */
typedef void (*admin_restart_done)(void *tok, int rc, const char *msg, const char *err);
#define ADMIN_RESTART_PENDING 1
/* How long a client waits for a pending restart's verdict: the check's own
 * bound (upgrade.h, UPG_CHECK_MAX_MS) and slack, within nvmefsctl's 10 s. */
#define ADMIN_RESTART_TIMEOUT 9.5

/* One namespace file of the mount. */
struct admin_ns {
	const char *name; /* file name in the mount, e.g. "nvme0n1" */
	unsigned ctrl;    /* index into admin_ctx.ctrls */
	uint32_t nsid;
	uint64_t size;     /* bytes */
	uint32_t lba_size; /* bytes */
	const char *path;  /* full path of the file (mountpoint/name) */
};

/* What the daemon has.  admin_start copies this struct, not what it points
 * to: everything pointed to must stay valid until admin_stop. */
struct admin_ctx {
	const struct cfg *cfg;
	const char *config_path;  /* the file the daemon was started with */
	time_t start_time;        /* wall clock at daemon start (time()) */
	/* The controller slots: ctrls[i] NULL is a slot without a controller
	 * (left out of every reply), which the daemon may fill while admin
	 * runs (a reload adds one); the arrays (ctrls, qpairs, sims) are read
	 * at each request.  A controller's config section is found by its
	 * name in cfg. */
	struct nvme_ctrl **ctrls;
	unsigned nr_ctrls;
	struct nvme_reactor **reactors;
	unsigned nr_reactors;
	/* qpairs[reactor * nr_ctrls + ctrl]; NULL where a controller granted
	 * fewer queues than there are reactors */
	struct nvme_qpair **qpairs;
	const struct admin_ns *ns;
	unsigned nr_ns;
	/* The namespace files now (the table changes at run time): called on
	 * the loop's thread, the array valid until the loop runs again.  NULL:
	 * ns and nr_ns above. */
	const struct admin_ns *(*ns_view)(void *arg, unsigned *nr);
	void *ns_view_arg;
	/* FUSE over io_uring: fuse_cpu_map[c] is the reactor serving CPU c's
	 * FUSE queue, fuse_cpus[c] its topology (cpumap.h); nr_fuse_cpus 0
	 * when the daemon did not set io_uring up */
	const unsigned *fuse_cpu_map;
	const struct cpumap_cpu *fuse_cpus;
	unsigned nr_fuse_cpus;
	double idle_timeout; /* seconds; 0: ADMIN_IDLE_TIMEOUT */
	double request_timeout; /* seconds; 0: ADMIN_REQUEST_TIMEOUT */
	size_t reply_max;       /* bytes; 0: ADMIN_REPLY_MAX */
	double log_timeout;     /* seconds; 0: ADMIN_LOG_TIMEOUT */
	/* The FUSE front end's figures (fusefs_stats_get on the daemon's
	 * session), called on the loop's thread.  NULL: no front end; "stats"
	 * and "metrics" then leave it out. */
	void (*fuse_stats)(void *arg, struct fusefs_stats *out);
	/* One shown file's figures (fusefs_ns_stats_get), same argument;
	 * -ENOENT when it is not shown.  NULL: none kept. */
	int (*fuse_ns_stats)(void *arg, const char *name, struct fusefs_ns_stats *out);
	void *fuse_stats_arg;
	/* sims[i]: the software controller behind ctrls[i], NULL for a PCI
	 * function (sims NULL: none).  It outlives a removal of the
	 * controller (the daemon keeps its bus), so inject reaches it then. */
	struct sim **sims;
	/* nvmefsctl attach: re-attach controller i; 0, or a negative errno
	 * with a message for the operator in err.  NULL: attach refused. */
	int (*attach)(void *arg, unsigned ctrl, char *err, size_t errlen);
	void *attach_arg;
	/* The last attach of controller i: NULL (none since start), or
	 * "attaching", "live", "failed" (*why: the reason). */
	const char *(*attach_state)(void *arg, unsigned ctrl, const char **why);
	/* nvmefsctl detach: take controller i away; the number of files that
	 * went, or a negative errno with a message in err.  NULL: refused. */
	int (*detach)(void *arg, unsigned ctrl, char *err, size_t errlen);
	/* Whether controller i is away on purpose (detached, or attaching
	 * back from that): its state is shown as "detached", not the engine's
	 * "removed".  NULL: never. */
	bool (*ctrl_away)(void *arg, unsigned ctrl);
	void *ctrl_away_arg;
	/* nvmefsctl restart: check the installed binary and, if it may take
	 * over, begin re-executing it (lifecycle.h); 0 with what happens in
	 * msg, a negative errno with the reason in err (nothing stopped), or
	 * ADMIN_RESTART_PENDING: the check runs, and done(tok, ...) tells how
	 * it ended, once, on the loop's thread, before admin_stop.
	 * NULL: restart refused. */
	int (*restart)(void *arg, admin_restart_done done, void *tok, char *msg, size_t msglen,
		       char *err, size_t errlen);
	void *restart_arg;
};

/* Create the socket at ctx->cfg->daemon.admin_socket (mode and group as
 * above) and serve it from loop (the caller runs the loop).  Errors are logged
 * with the path: -EADDRINUSE (a daemon is listening there), -EEXIST (not a
 * socket), -ENAMETOOLONG, or the errno of mkdtemp/socket/bind/chown/listen/
 * rename. */
int admin_start(struct ev_loop *loop, const struct admin_ctx *ctx, struct admin **out);

/* Close every client and the socket, and remove the socket file if it is
 * still ours.  NULL is a no-op.  Call on the loop's thread. */
void admin_stop(struct admin *a);

/* The health cache admin_start started (health.h), NULL for a NULL a. */
struct health *admin_health(struct admin *a);

#endif

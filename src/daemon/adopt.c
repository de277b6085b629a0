/* adopt.c - storing the FUSE connection with the service manager and
 * adopting the one a previous run left there (contract in adopt.h). */
#include "adopt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fdstore.h"
#include "fstate.h"
#include "fuse_proto.h"
#include "log.h"

/* Store the connection's fd and a state record of init (fresh: clear
 * whatever the store held under our names first). */
static void adopt_store(struct daemon *d, const struct fusefs_init_params *init)
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

void adopt_on_init(void *arg, const struct fusefs_init_params *p)
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
	if (!d->stored && d->lc.state <= LC_SERVING) /* not stopping */
		adopt_store(d, &p);
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
bool adopt_check(struct daemon *d)
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
void adopt_resend(struct daemon *d)
{
	int rc = fusefs_resend(d->fs);

	if (rc == 0)
		log_info("fuse: the kernel resends the requests the previous run left unanswered");
	else
		log_err("fuse: asking the kernel to resend requests: %s", strerror(-rc));
}

/* The reactors serve the adopted connection: keep the fds in the store. */
void adopt_finish(struct daemon *d)
{
	/* the same open files as in the store: systemd keeps one of each */
	if (fdstore_available() && fdstore_save(fusefs_fd(d->fs), d->state_fd) == 0)
		d->stored = true;
}

void adopt_watch_init(struct daemon *d)
{
	ev_async_init(&d->init_done, init_done_cb);
	d->init_done.data = d;
	ev_async_start(d->loop, &d->init_done);
}

/* The stored record into *st (buf: fstate_size() + 1 bytes). */
static int record_read(struct daemon *d, struct fstate *st, char *buf)
{
	size_t len = 0;
	int rc;

	if (!d->stored || d->state_fd < 0)
		return -ENOENT;
	rc = fdstore_memfd_read(d->state_fd, buf, fstate_size() + 1, &len);
	return rc ? rc : fstate_decode(buf, len, st);
}

int adopt_stored_digest(struct daemon *d, uint64_t *digest)
{
	struct fstate st;
	char *buf = malloc(fstate_size() + 1);
	int rc = buf ? record_read(d, &st, buf) : -ENOMEM;

	free(buf);
	if (!rc)
		*digest = st.digest;
	return rc;
}

int adopt_restamp(struct daemon *d, uint64_t digest)
{
	struct fstate st;
	char *buf = malloc(fstate_size() + 1);
	int fd = -1, rc = buf ? record_read(d, &st, buf) : -ENOMEM;

	if (!rc) {
		st.digest = digest;
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
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(d->state_fd);
	d->state_fd = fd;
	return 0;
}

/* ctrlmgr.c - the controller manager (contract in ctrlmgr.h). */
#include "ctrlmgr.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "adopt.h"
#include "config.h"
#include "daemon.h"
#include "fuse_fs.h"
#include "health.h"
#include "notify.h"
#include "log.h"
#include "sim.h"

/* ---- the slot's states ---- */

static const char *const cm_state_names[CM_NR_STATES] = {
	[CM_EMPTY] = "empty",         [CM_OPENING] = "opening",     [CM_LIVE] = "live",
	[CM_REMOVED] = "removed",     [CM_DETACHING] = "detaching", [CM_DETACHED] = "detached",
	[CM_ATTACHING] = "attaching",
};

/* cm_edges[from] has bit 1 << to for each allowed edge (ctrlmgr.h) */
static const unsigned cm_edges[CM_NR_STATES] = {
	[CM_EMPTY] = 1u << CM_OPENING,
	[CM_OPENING] = 1u << CM_LIVE | 1u << CM_EMPTY,
	[CM_LIVE] = 1u << CM_REMOVED | 1u << CM_DETACHING,
	[CM_REMOVED] = 1u << CM_DETACHING | 1u << CM_ATTACHING,
	[CM_DETACHING] = 1u << CM_DETACHED,
	[CM_DETACHED] = 1u << CM_ATTACHING,
	[CM_ATTACHING] = 1u << CM_LIVE | 1u << CM_REMOVED | 1u << CM_DETACHED,
};

const char *cm_state_name(enum cm_state s)
{
	return (unsigned)s < CM_NR_STATES ? cm_state_names[s] : "?";
}

bool cm_edge_allowed(enum cm_state from, enum cm_state to)
{
	return (unsigned)from < CM_NR_STATES && (unsigned)to < CM_NR_STATES &&
	       (cm_edges[from] & 1u << to);
}

bool cm_set_state(struct cm_ctrl *c, enum cm_state to)
{
	if (!cm_edge_allowed(c->state, to)) {
		log_debug("%s: slot %u: %s -> %s refused", c->name ? c->name : "?", c->idx,
			  cm_state_name(c->state), cm_state_name(to));
		return false;
	}
	log_debug("%s: slot %u: %s -> %s", c->name ? c->name : "?", c->idx,
		  cm_state_name(c->state), cm_state_name(to));
	c->state = to;
	return true;
}

bool cm_files_away(const struct daemon *d, unsigned i)
{
	const struct cm_ctrl *c = &d->cm[i];

	return c->state == CM_DETACHING || c->state == CM_DETACHED ||
	       (c->state == CM_ATTACHING && c->attach_from == CM_DETACHED);
}

bool cm_away(void *arg, unsigned i)
{
	const struct daemon *d = arg;

	return i < d->slots && cm_files_away(d, i);
}

/* ---- STATUS= ---- */

void cm_status_format(struct daemon *d, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "serving %u namespace%s at %s", d->nr_ns,
				    d->nr_ns == 1 ? "" : "s", d->cfg->daemon.mountpoint);

	for (unsigned i = 0; i < d->slots && n < len; i++) {
		const struct cm_ctrl *dc = &d->cm[i];

		if (!d->ctrls[i])
			continue; /* empty, or being added */
		if (cm_files_away(d, i))
			n += (size_t)snprintf(buf + n, len - n, "; %s detached", d->names[i]);
		else if (dc->seen != NVME_CTRL_LIVE)
			n += (size_t)snprintf(buf + n, len - n, "; %s %s", d->names[i],
					      nvme_ctrl_state_name(dc->seen));
	}
}

void cm_status_update(struct daemon *d)
{
	char buf[1024];

	if (!d->status_live)
		return;
	cm_status_format(d, buf, sizeof(buf));
	notify_status("%s", buf);
}

/* ---- removal, events, interrupts ---- */

/* Take controller dc out of the engine (idempotent); orderly: a detach,
 * which shuts a live controller down (CC.SHN) first.  A VFIO bus is closed
 * so that the kernel can finish the removal; a sim's bus is kept. */
static void ctrl_remove(struct cm_ctrl *dc, const char *why, bool orderly)
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
	/* a detach (DETACHING) or an attach (ATTACHING) under way moves the
	 * slot itself when it ends */
	if (dc->state == CM_LIVE)
		(void)cm_set_state(dc, CM_REMOVED);
	cm_status_update(d);
}

/* Log a state change once, and remove a controller the engine found gone. */
static void ctrl_event_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct cm_ctrl *dc = w->data;
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
		cm_status_update(d);
	}
}

/* The engine's event callback: a reactor or any thread; must not block. */
static void ctrl_event(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	struct cm_ctrl *dc = arg;

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
	struct cm_ctrl *dc = w->data;

	(void)loop;
	(void)revents;
	efd_drain(dc->req_efd);
	log_warn("%s: the kernel asks for the device back (hot removal or unbind)",
		 dc->d->names[dc->idx]);
	ctrl_remove(dc, "device removal requested", false);
}

static void err_irq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct cm_ctrl *dc = w->data;
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
static void ctrl_wire_irqs(struct cm_ctrl *dc, struct nvme_bus *bus)
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

/* attach_done, which an attach or an add thread sends (once per slot: an
 * add arms it before cm_watch runs) */
static void watch_attach_done(struct cm_ctrl *dc)
{
	if (ev_is_active(&dc->attach_done))
		return;
	ev_async_init(&dc->attach_done, attach_done_cb);
	dc->attach_done.data = dc;
	ev_async_start(dc->d->loop, &dc->attach_done);
}

static void ctrl_aen(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev);

int cm_watch(struct daemon *d, unsigned i)
{
	struct cm_ctrl *dc = &d->cm[i];

	dc->seen = NVME_CTRL_LIVE;
	dc->watched = true;
	ev_async_init(&dc->event, ctrl_event_cb);
	dc->event.data = dc;
	ev_async_start(d->loop, &dc->event);
	nvme_ctrl_set_event_cb(d->ctrls[i], ctrl_event, dc);
	/* a change before the callback was set (an added controller that
	 * went away already) is looked at too */
	ev_async_send(d->loop, &dc->event);
	watch_attach_done(dc);
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

void cm_unwatch(struct daemon *d, unsigned i)
{
	struct cm_ctrl *dc = &d->cm[i];

	if (!dc->watched)
		return;
	dc->watched = false;
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
	uint64_t digest;
	int rc;

	if (d->table_changed[0])
		return;
	snprintf(d->table_changed, sizeof(d->table_changed), "%s", why);
	if (!d->stored || d->state_fd < 0)
		return;
	/* FNV-1a 64 digests of a config never have all bits flipped by
	 * design; a table changed at run time is not a config's */
	rc = adopt_stored_digest(d, &digest);
	if (!rc)
		rc = adopt_restamp(d, ~digest);
	if (rc) {
		/* the old record stays: a run after a crash might adopt a table
		 * it does not reproduce; say so */
		log_err("fdstore: the namespace table changed (%s) but the state record could not "
			"be replaced (%s): a run after a crash may adopt the mount with files "
			"numbered differently",
			why, strerror(-rc));
		return;
	}
	log_info("fdstore: the namespace table changed at run time (%s): a run after a crash "
		 "will mount afresh instead of adopting the mount",
		 why);
}

/* The files shown now, for admin (namespaces, status): rebuilt on the
 * loop after every change of the table. */
int cm_ns_view_refresh(struct daemon *d)
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

const struct admin_ns *cm_ns_view(void *arg, unsigned *nr)
{
	struct daemon *d = arg;

	*nr = d->nr_ns;
	return d->ans;
}

static void add_finish(struct cm_ctrl *dc);

/* The end of attach_thread (or add_thread), on the loop once it ended (or
 * at teardown). */
static void attach_finish(struct cm_ctrl *dc)
{
	struct daemon *d = dc->d;
	int n;

	if (!dc->attach_running)
		return;
	pthread_join(dc->attach_thr, NULL);
	dc->attach_running = false;
	if (dc->state == CM_OPENING) {
		add_finish(dc);
		return;
	}
	if (dc->attach_rc) {
		if (!dc->sim && dc->attach_bus)
			dc->attach_bus->ops->close(dc->attach_bus);
		dc->attach_bus = NULL;
		dc->attach_state = "failed";
		(void)cm_set_state(dc, dc->attach_from);
		log_err("%s: attach failed: %s", d->names[dc->idx], dc->attach_err);
		cm_status_update(d);
		return;
	}
	if (dc->sim)
		dc->kept = NULL; /* the controller owns it again */
	else
		ctrl_wire_irqs(dc, dc->attach_bus);
	dc->attach_bus = NULL;
	dc->seen = NVME_CTRL_LIVE;
	dc->attach_state = "live";
	(void)cm_set_state(dc, CM_LIVE);
	if (dc->attach_from == CM_DETACHED && d->fs) {
		n = fusefs_ctrl_attach(d->fs, dc->idx);
		(void)cm_ns_view_refresh(d);
		log_info("%s: attached: %d file%s back", d->names[dc->idx], n, n == 1 ? "" : "s");
	} else {
		log_info("%s: attached", d->names[dc->idx]);
	}
	cm_status_update(d);
}

void cm_attach_wait(struct daemon *d)
{
	for (unsigned i = 0; i < d->slots; i++)
		attach_finish(&d->cm[i]);
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
	struct cm_ctrl *dc = arg;
	struct daemon *d = dc->d;
	const struct cfg_controller *cc = &dc->cc;
	const char *name = d->names[dc->idx];
	struct nvme_bus *bus = dc->attach_bus;
	int rc = 0;

	if (!bus) {
		rc = vfio_bus_open(cc->device, &bus);
		if (rc)
			snprintf(dc->attach_err, sizeof(dc->attach_err),
				 "%s: cannot open %s through VFIO (%s): is the device back and "
				 "bound to vfio-pci (vfio-bind %s)? the daemon's log says more",
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
 * outcome shows in status (cm_attach_state). */
int cm_attach(void *arg, unsigned i, char *err, size_t errlen)
{
	struct daemon *d = arg;
	struct cm_ctrl *dc = &d->cm[i];
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
	if (dc->state == CM_OPENING || dc->state == CM_DETACHING) {
		snprintf(err, errlen, "%s is %s: attach when that has ended", d->names[i],
			 cm_state_name(dc->state));
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
	dc->attach_from = dc->state;
	(void)cm_set_state(dc, CM_ATTACHING);
	log_info("%s: attaching", d->names[i]);
	return 0;
}

const char *cm_attach_state(void *arg, unsigned i, const char **why)
{
	struct daemon *d = arg;
	struct cm_ctrl *dc = &d->cm[i];

	*why = dc->attach_state && !strcmp(dc->attach_state, "failed") ? dc->attach_err : NULL;
	return dc->attach_state;
}

/* ---- work done on a reactor's thread for the loop (or an add thread) ----
 * A call posted with nvme_reactor_call and waited for, with a bound: fn
 * runs on the reactor and ends it with rcall_done, there or later (from a
 * command's completion).  The waiter and the call each hold a reference;
 * the last one frees.  A waiter that gave up leaves the call its undo (run
 * where rcall_done runs: on the reactor for what rcall makes there). */
struct rcall {
	void (*fn)(struct rcall *k);
	void (*undo)(struct rcall *k); /* the waiter gave up first (NULL: nothing) */
	struct nvme_ctrl *c;
	struct nvme_reactor *r;
	struct nvme_qpair *qp;
	uint16_t qid;
	unsigned pending;              /* flush: commands out (the reactor's) */
	int first_err;                 /* flush: the first one's error */
	int rc;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done, gave_up;
	atomic_int refs;
};

static void rcall_put(struct rcall *k)
{
	if (atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}

static void rcall_done(struct rcall *k, int rc)
{
	pthread_mutex_lock(&k->mu);
	k->rc = rc;
	k->done = true;
	if (k->gave_up && k->undo)
		k->undo(k);
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	rcall_put(k);
}

static void rcall_tramp(void *arg)
{
	struct rcall *k = arg;

	k->fn(k);
}

/* Run k->fn on k->r, wait at most wait_ms for rcall_done: its rc, the
 * posting's error, or -ETIMEDOUT (k->undo then runs when it ends).  k was
 * made by rcall_new and is the call's from now on; *qp (qp non-NULL): the
 * queue pair the call left in k->qp, NULL unless it ended. */
static int rcall_run(struct rcall *k, unsigned wait_ms, struct nvme_qpair **qp)
{
	struct timespec ts;
	int rc = nvme_reactor_call(k->r, rcall_tramp, k);

	if (rc) {
		atomic_store(&k->refs, 1);
		rcall_put(k);
		return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += wait_ms / 1000;
	ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&k->mu);
	while (!k->done)
		if (pthread_cond_timedwait(&k->cv, &k->mu, &ts))
			break;
	rc = k->done ? k->rc : -ETIMEDOUT;
	k->gave_up = !k->done;
	if (qp)
		*qp = k->done ? k->qp : NULL;
	pthread_mutex_unlock(&k->mu);
	rcall_put(k);
	return rc;
}

static struct rcall *rcall_new(void (*fn)(struct rcall *k), struct nvme_reactor *r)
{
	struct rcall *k = calloc(1, sizeof(*k));
	pthread_condattr_t ca;

	if (!k)
		return NULL;
	k->fn = fn;
	k->r = r;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&k->refs, 2);
	return k;
}

/* The volatile write cache of controller i written back before it goes
 * (a Flush of each of its namespaces, on reactor 0's queue), waited for at
 * most FLUSH_WAIT_MS, before it is shut down and released.  (The I/O
 * queues take a Flush of one namespace, not of all at once: the engine
 * checks the NSID of every command.) */
#define FLUSH_WAIT_MS 5000

/* on the reactor, as each Flush completes */
static void flush_done(void *arg, int err, uint16_t status)
{
	struct rcall *k = arg;

	if (!k->first_err)
		k->first_err = err ? err : status ? -EIO : 0;
	if (--k->pending == 0)
		rcall_done(k, k->first_err);
}

static void flush_submit(struct rcall *k)
{
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(k->c);
	unsigned nr = __atomic_load_n(&in->nr_ns, __ATOMIC_ACQUIRE);

	k->pending = 1; /* ours, until every Flush is out */
	for (unsigned n = 0; n < nr; n++) {
		int rc;

		if (in->ns[n].removed || in->ns[n].failed)
			continue;
		k->pending++;
		rc = nvme_qpair_flush(k->qp, in->ns[n].nsid, flush_done, k);
		if (rc)
			flush_done(k, rc, 0);
	}
	flush_done(k, 0, 0);
}

static int ctrl_flush(struct daemon *d, unsigned i)
{
	struct rcall *k = rcall_new(flush_submit, d->reactors[0]);

	if (!k)
		return -ENOMEM;
	k->c = d->ctrls[i];
	k->qp = d->qpairs[i]; /* reactor 0's */
	return rcall_run(k, FLUSH_WAIT_MS, NULL);
}

/* nvmefsctl detach (admin_ctx.detach): controller i's files go (handles
 * fail with EIO from now on), its write cache is flushed, it is shut down
 * and removed and its device released; the others go on.  The number of
 * files gone. */
/* Take slot i's controller away on purpose (why: for the log, and the
 * removal's reason), as cm_detach says. */
static int detach_slot(struct daemon *d, unsigned i, const char *why, const char *table_why,
		       char *err, size_t errlen)
{
	struct cm_ctrl *dc = &d->cm[i];
	struct nvme_ctrl *c = d->ctrls[i];
	enum nvme_ctrl_state s = nvme_ctrl_state(c);
	int n, rc;

	if (dc->attach_running) {
		snprintf(err, errlen, "%s: an attach is running: detach when it has ended",
			 d->names[i]);
		return -EBUSY;
	}
	if (dc->state == CM_DETACHED) {
		snprintf(err, errlen, "%s is detached already", d->names[i]);
		return -EALREADY;
	}
	if (!cm_set_state(dc, CM_DETACHING)) {
		snprintf(err, errlen, "%s is %s: detach when that has ended", d->names[i],
			 cm_state_name(dc->state));
		return -EBUSY;
	}
	n = d->fs ? fusefs_ctrl_detach(d->fs, i) : 0;
	table_changed_mark(d, table_why);
	dc->attach_state = NULL;
	(void)cm_ns_view_refresh(d);
	if (s == NVME_CTRL_LIVE && nvme_ctrl_get_info(c)->vwc) {
		rc = ctrl_flush(d, i);
		if (rc)
			log_warn("%s: detach: flushing the write cache: %s", d->names[i],
				 strerror(-rc));
	}
	ctrl_remove(dc, why, true);
	/* its files are gone whatever the removal did */
	(void)cm_set_state(dc, CM_DETACHED);
	cm_status_update(d);
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

int cm_detach(void *arg, unsigned i, char *err, size_t errlen)
{
	return detach_slot(arg, i, "detached (nvmefsctl detach)", "a controller detached", err,
			   errlen);
}

/* ---- namespace events ---- */

/* The engine's event callback, on its admin thread: copy the namespace
 * changes for the loop; note the other kinds for it (a SMART event makes
 * the health cache read the log again, which logs a warning once). */
static void ctrl_aen(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev)
{
	struct cm_ctrl *dc = arg;
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
	struct cm_ctrl *dc = w->data;
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
		(void)cm_ns_view_refresh(d);
}

/* ---- start-up ---- */

/* Open cc's device and bring its controller up with the engine settings of
 * cfg: *simp (NULL for PCI) and *out, or a negative errno with the log's
 * sentence in err.  Touches nothing of the daemon's: a thread may run it. */
static int open_one(const struct cfg *cfg, const struct cfg_controller *cc, struct sim **simp,
		    struct nvme_ctrl **out, char *err, size_t errlen)
{
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

	*simp = NULL;
	if (cc->sim) {
		rc = sim_create_from_cfg(cc, &sim);
		if (rc) {
			snprintf(err, errlen, "%s: cannot create the software controller: %s",
				 cc->name, strerror(-rc));
			return rc;
		}
		bus = sim_bus(sim);
	} else {
		rc = vfio_bus_open(cc->device, &bus);
		if (rc) {
			snprintf(err, errlen, "%s: cannot open %s through VFIO: %s", cc->name,
				 cc->device, strerror(-rc));
			return rc;
		}
	}
	rc = nvme_ctrl_open(bus, &co, out);
	if (rc) {
		snprintf(err, errlen, "%s: controller bring-up failed: %s", cc->name,
			 strerror(-rc));
		bus->ops->close(bus); /* a sim's bus owns the sim */
		return rc;
	}
	*simp = sim;
	return 0;
}

static void log_opened(const struct cfg_controller *cc, struct nvme_ctrl *c)
{
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);

	log_info("%s: %s %s, %u namespace%s, %u I/O queue%s granted, max transfer %u KiB%s",
		 cc->name, in->model, nvme_ctrl_bus(c)->name, in->nr_ns, in->nr_ns == 1 ? "" : "s",
		 in->nr_io_queues, in->nr_io_queues == 1 ? "" : "s", in->max_xfer / 1024,
		 in->vwc ? ", volatile write cache" : "");
}

int cm_open_all(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	char err[512];

	/* room for the controllers a reload may add */
	d->slots = cfg->nr_ctrls + CM_SPARE_SLOTS < CFG_MAX_CTRLS ? cfg->nr_ctrls + CM_SPARE_SLOTS
								  : CFG_MAX_CTRLS;
	for (unsigned i = 0; i < d->slots; i++) {
		d->cm[i].d = d;
		d->cm[i].idx = i;
	}
	for (unsigned i = 0; i < cfg->nr_ctrls; i++) {
		struct cm_ctrl *dc = &d->cm[i];
		int rc;

		dc->cc = cfg->ctrls[i];
		dc->name = dc->cc.name;
		(void)cm_set_state(dc, CM_OPENING);
		rc = open_one(cfg, &dc->cc, &dc->sim, &d->ctrls[i], err, sizeof(err));
		if (rc) {
			log_err("%s", err);
			(void)cm_set_state(dc, CM_EMPTY);
			return rc;
		}
		d->sims[i] = dc->sim;
		d->names[i] = dc->name;
		d->nr_ctrls = i + 1;
		(void)cm_set_state(dc, CM_LIVE);
		log_opened(&dc->cc, d->ctrls[i]);
	}
	return 0;
}

/* ---- controllers added and removed by a reload ---- */

/* Reactor r's queue pair of an added controller: made on r's own thread
 * (nvme_qpair_create, which a running reactor's loop must do itself); the
 * Create I/O CQ and SQ commands are bounded by the engine's admin timeout,
 * so ADD_QP_WAIT_MS is reached only by a reactor that no longer runs its
 * calls. */
#define ADD_QP_WAIT_MS 30000

static void qp_make(struct rcall *k)
{
	int rc = nvme_qpair_create(k->c, k->r, k->qid, &k->qp);

	rcall_done(k, rc);
}

/* the waiter gave up: the queue pair goes again, on its reactor */
static void qp_unmake(struct rcall *k)
{
	if (!k->rc && k->qp)
		nvme_qpair_destroy(k->qp);
}

static void qp_destroy(struct rcall *k)
{
	nvme_qpair_destroy(k->qp);
	rcall_done(k, 0);
}

/* Off the loop: open the added controller's device, bring it up (bounded
 * by the engine's bring-up timeouts) and make its queue pair on every
 * reactor; undo all of it on a failure.  Writes only dc's add and attach
 * fields, then tells the loop (attach_done). */
static void *add_thread(void *arg)
{
	struct cm_ctrl *dc = arg;
	struct daemon *d = dc->d;
	struct nvme_ctrl *c = NULL;
	struct sim *sim = NULL;
	unsigned made = 0;
	int rc;

	/* d->cfg's engine section is not written while a slot is OPENING */
	rc = open_one(d->cfg, &dc->cc, &sim, &c, dc->attach_err, sizeof(dc->attach_err));
	if (!rc && nvme_ctrl_get_info(c)->nr_io_queues < d->nr_reactors) {
		snprintf(dc->attach_err, sizeof(dc->attach_err),
			 "%s: grants %u I/O queue%s, and each of the daemon's %u reactors needs one",
			 dc->name, nvme_ctrl_get_info(c)->nr_io_queues,
			 nvme_ctrl_get_info(c)->nr_io_queues == 1 ? "" : "s", d->nr_reactors);
		rc = -ENOSPC;
	}
	for (; !rc && made < d->nr_reactors; made++) {
		struct rcall *k = rcall_new(qp_make, d->reactors[made]);

		if (!k) {
			rc = -ENOMEM;
			break;
		}
		k->c = c;
		k->qid = (uint16_t)(made + 1);
		k->undo = qp_unmake;
		rc = rcall_run(k, ADD_QP_WAIT_MS, &dc->add_qp[made]);
		if (rc) {
			snprintf(dc->attach_err, sizeof(dc->attach_err), "%s: I/O queue %u on reactor %u: %s",
				 dc->name, made + 1, made, strerror(-rc));
			break;
		}
	}
	if (rc) {
		for (unsigned r = 0; r < made; r++) {
			struct rcall *k = rcall_new(qp_destroy, d->reactors[r]);

			if (k) {
				k->qp = dc->add_qp[r];
				(void)rcall_run(k, ADD_QP_WAIT_MS, NULL);
			}
			dc->add_qp[r] = NULL;
		}
		if (c)
			nvme_ctrl_close(c); /* and its bus: a sim's owns the sim */
		c = NULL;
		sim = NULL;
	}
	dc->add_ctrl = c;
	dc->add_sim = sim;
	dc->attach_rc = rc;
	ev_async_send(d->loop, &dc->attach_done);
	return NULL;
}

/* The namespace table grew by a controller added at run time (why).  A new
 * image builds its table from the config's controllers in the config's
 * order; when that is the table served now (every controller of the
 * running config served, in that order, and nothing removed before), the
 * stored record gets its digest: a run after a crash adopts the mount, and
 * nvmefsctl restart is allowed.  Otherwise it is a change no run can build
 * again (table_changed_mark). */
static void table_grown(struct daemon *d, const char *why)
{
	struct nvme_ctrl *ctrls[CFG_MAX_CTRLS];
	const char *names[CFG_MAX_CTRLS];
	struct fusefs_opts fo = d->fo;
	const struct cfg *cfg = d->cfg;
	uint64_t want, have;
	unsigned n;
	int rc;

	if (d->table_changed[0])
		return; /* a change before was not reproducible: still not */
	for (unsigned k = 0; k < cfg->nr_ctrls; k++) {
		unsigned i = 0;

		while (i < d->slots && !(d->cm[i].state == CM_LIVE &&
					 !strcmp(d->cm[i].name, cfg->ctrls[k].name)))
			i++;
		if (i == d->slots) {
			table_changed_mark(d, why);
			return;
		}
		ctrls[k] = d->ctrls[i];
		names[k] = d->names[i];
	}
	fo.nr_ctrls = cfg->nr_ctrls;
	fo.ctrls = ctrls;
	fo.ctrl_names = names;
	n = fusefs_ns_list(d->fs, d->ns_desc, d->ns_cap);
	fusefs_digest_table(&fo, d->ns_desc, n, &have);
	rc = fusefs_digest(&fo, &want);
	if (rc || want != have) {
		table_changed_mark(d, why);
		return;
	}
	if (!d->stored || d->state_fd < 0)
		return;
	rc = adopt_restamp(d, want);
	if (rc) {
		table_changed_mark(d, why);
		return;
	}
	log_info("fdstore: the namespace table grew at run time (%s) as the config now builds it: "
		 "the stored record follows it, a run after a crash still adopts the mount",
		 why);
}

/* An add that did not happen: the slot is empty again. */
static void add_abandon(struct cm_ctrl *dc)
{
	free(dc->add_qp);
	dc->add_qp = NULL;
	ev_async_stop(dc->d->loop, &dc->attach_done);
	(void)cm_set_state(dc, CM_EMPTY);
	dc->name = NULL;
}

/* The end of add_thread, on the loop: the controller joins the daemon's
 * arrays and its files appear, or the slot is empty again. */
static void add_finish(struct cm_ctrl *dc)
{
	struct daemon *d = dc->d;
	unsigned i = dc->idx;
	int n;

	if (dc->attach_rc) {
		log_err("%s (not added; the next reload tries again)", dc->attach_err);
		add_abandon(dc);
		return;
	}
	for (unsigned r = 0; r < d->nr_reactors; r++)
		d->qpairs[(size_t)r * d->slots + i] = dc->add_qp[r];
	free(dc->add_qp);
	dc->add_qp = NULL;
	d->names[i] = dc->name;
	d->sims[i] = dc->sim = dc->add_sim;
	d->ctrls[i] = dc->add_ctrl;
	dc->add_ctrl = NULL;
	dc->add_sim = NULL;
	log_add_ctrl_name(dc->name);
	log_opened(&dc->cc, d->ctrls[i]);
	if (cm_watch(d, i))
		log_warn("%s: its removal and error interrupts are not watched: a hot removal "
			 "will be noticed only when the device stops answering",
			 dc->name);
	(void)cm_set_state(dc, CM_LIVE);
	n = d->fs ? fusefs_ctrl_add(d->fs, i) : 0;
	(void)cm_ns_view_refresh(d);
	log_info("%s: added: %d file%s", dc->name, n, n == 1 ? "" : "s");
	table_grown(d, "a controller added");
	cm_status_update(d);
}

/* The slot serving name (any state but EMPTY), or d->slots. */
static unsigned slot_of(const struct daemon *d, const char *name)
{
	unsigned i = 0;

	while (i < d->slots && !(d->cm[i].state != CM_EMPTY && !strcmp(d->cm[i].name, name)))
		i++;
	return i;
}

/* The section of name in cfg, NULL when it has none. */
static const struct cfg_controller *section_of(const struct cfg *cfg, const char *name)
{
	for (unsigned k = 0; k < cfg->nr_ctrls; k++)
		if (!strcmp(cfg->ctrls[k].name, name))
			return &cfg->ctrls[k];
	return NULL;
}

/* Whether two sections say the same (cfg_equal of a config of each). */
static bool section_equal(const struct cfg_controller *a, const struct cfg_controller *b)
{
	struct cfg *x = calloc(1, sizeof(*x)), *y = calloc(1, sizeof(*y));
	bool eq = false;

	if (x && y) {
		x->nr_ctrls = y->nr_ctrls = 1;
		x->ctrls[0] = *a;
		y->ctrls[0] = *b;
		eq = cfg_equal(x, y);
	}
	free(x);
	free(y);
	return eq;
}

/* Whether next says the same as the running config but for its
 * controllers. */
static bool others_equal(const struct cfg *run, const struct cfg *next)
{
	struct cfg *x = malloc(sizeof(*x));
	bool eq = false;

	if (x) {
		*x = *run;
		x->nr_ctrls = next->nr_ctrls;
		memcpy(x->ctrls, next->ctrls, sizeof(x->ctrls));
		eq = cfg_equal(x, next);
	}
	free(x);
	return eq;
}

#define MSG_ADD(...)                                                                   \
	do {                                                                           \
		if (off < msglen)                                                      \
			off += (size_t)snprintf(msg + off, msglen - off, __VA_ARGS__); \
	} while (0)

int cm_reload(struct daemon *d, const struct cfg *next, char *msg, size_t msglen, char *err,
	      size_t errlen)
{
	enum { KEEP, REMOVE, READD, ADD } plan[CFG_MAX_CTRLS] = {0};
	unsigned target[CFG_MAX_CTRLS], nr_add = 0, nr_change = 0, free_slots = 0;
	size_t off = 0;

	/* ---- decide, refusing before anything changes ---- */
	for (unsigned i = 0; i < d->slots; i++) {
		struct cm_ctrl *dc = &d->cm[i];
		const struct cfg_controller *cc;

		if (dc->state == CM_EMPTY) {
			free_slots++;
			continue;
		}
		cc = section_of(next, dc->name);
		if (dc->state == CM_OPENING || dc->state == CM_ATTACHING ||
		    dc->state == CM_DETACHING) {
			snprintf(err, errlen, "%s is %s: reload when that has ended", dc->name,
				 cm_state_name(dc->state));
			return -EBUSY;
		}
		if (!cc && dc->state != CM_DETACHED) {
			plan[i] = REMOVE;
			nr_change++;
		} else if (cc && dc->state == CM_DETACHED && dc->unconfigured) {
			if (!section_equal(cc, &dc->cc)) {
				snprintf(err, errlen,
					 "%s was removed from the config at run time and comes back "
					 "with other settings: its slot keeps the old ones (restart "
					 "the unit to serve it anew)",
					 dc->name);
				return -EOPNOTSUPP;
			}
			plan[i] = READD;
			nr_change++;
		} else if (!cc) {
			dc->unconfigured = true; /* detached already: it stays so */
		}
	}
	for (unsigned k = 0; k < next->nr_ctrls; k++)
		if (slot_of(d, next->ctrls[k].name) == d->slots)
			target[nr_add++] = k;
	if (nr_add && d->cfg->engine.dma_isolation == CFG_DMA_ISO_CONTROLLER && !d->iso) {
		snprintf(err, errlen,
			 "%s is new, and dma_isolation = controller: the daemon started with one "
			 "controller, whose buffers its reactors keep in one pool that a controller "
			 "added now would reach (restart the unit to serve them with a pool each)",
			 next->ctrls[target[0]].name);
		return -EOPNOTSUPP;
	}
	if (nr_add > free_slots) {
		snprintf(err, errlen,
			 "%u controller%s to add and room for %u (the daemon keeps %u slots: the "
			 "controllers it started with and %u more): restart the unit",
			 nr_add, nr_add == 1 ? "" : "s", free_slots, d->slots, CM_SPARE_SLOTS);
		return -ENOSPC;
	}
	if (!nr_add && !nr_change)
		return 0; /* the same controllers: a restart in place as before */

	/* ---- apply: the running config's controllers are the file's ---- */
	d->cfg->nr_ctrls = next->nr_ctrls;
	memcpy(d->cfg->ctrls, next->ctrls, sizeof(d->cfg->ctrls));
	for (unsigned i = 0; i < d->slots; i++) {
		struct cm_ctrl *dc = &d->cm[i];
		char e[512];
		int n;

		if (plan[i] == REMOVE) {
			n = detach_slot(d, i, "removed from the config", "a controller removed from "
					"the config", e, sizeof(e));
			dc->unconfigured = true;
			if (n < 0)
				MSG_ADD("%s%s", off ? "; " : "", e);
			else
				MSG_ADD("%s%s: removed, %d file%s gone", off ? "; " : "", dc->name, n,
					n == 1 ? "" : "s");
		} else if (plan[i] == READD) {
			dc->unconfigured = false;
			if (cm_attach(d, i, e, sizeof(e)))
				MSG_ADD("%s%s", off ? "; " : "", e);
			else
				MSG_ADD("%s%s: attaching", off ? "; " : "", dc->name);
		}
	}
	for (unsigned a = 0, i = 0; a < nr_add; a++, i++) {
		const struct cfg_controller *cc = &next->ctrls[target[a]];
		struct cm_ctrl *dc;
		int rc;

		while (d->cm[i].state != CM_EMPTY)
			i++;
		dc = &d->cm[i];
		dc->d = d;
		dc->idx = i;
		dc->cc = *cc;
		dc->name = dc->cc.name;
		dc->unconfigured = false;
		dc->attach_rc = 0;
		dc->attach_err[0] = '\0';
		dc->attach_state = NULL;
		dc->add_qp = calloc(d->nr_reactors, sizeof(*dc->add_qp));
		(void)cm_set_state(dc, CM_OPENING);
		watch_attach_done(dc);
		rc = dc->add_qp ? pthread_create(&dc->attach_thr, NULL, add_thread, dc) : ENOMEM;
		if (rc) {
			log_err("%s: cannot start adding it: %s", dc->name, strerror(rc));
			MSG_ADD("%s%s: not added (%s)", off ? "; " : "", dc->name, strerror(rc));
			add_abandon(dc);
			continue;
		}
		dc->attach_running = true;
		log_info("%s: added to the config: opening %s", dc->name,
			 cc->sim ? "the software controller" : cc->device);
		MSG_ADD("%s%s: adding", off ? "; " : "", dc->name);
	}
	if (!others_equal(d->cfg, next))
		MSG_ADD("; the config's other changes apply at the next restart");
	log_info("reload: %s", msg);
	cm_status_update(d);
	return 1;
}


/* recovery.c - the controller state machine and everything that moves it:
 * resets and their retries, abort escalation, the health check, isolation
 * of a device that will not stop, removal, re-attach, and the bounded stop
 * (cancel, shutdown).  The contract, with the states and edges, is
 * recovery.h; the public entry points are in nvme.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "log.h"

#define RST_ADD(field, v) __atomic_add_fetch(&c->rst.field, (v), __ATOMIC_RELAXED)

/* How long a reactor may take to run one recovery call: a reactor never
 * blocks, so this only detects one that is wedged (then the step fails). */
#define RECOV_REACTOR_MS 10000u
/* With only AERs outstanding the admin CQ is reaped 50 times a second. */
#define AEN_POLL_NS 20000000ull
/* Stop-time caps on the device's own timeouts (CAP.TO may say 127 s,
 * RTD3E a minute): past them isolation follows.  Their sums are within
 * NVME_CANCEL_MAX_MS and NVME_SHUTDOWN_MAX_MS (static_asserts below). */
#define STOP_SHN_ABRUPT_MS 5000u
#define STOP_SHN_NORMAL_MS 30000u
#define STOP_DISABLE_MS    2500u
/* A reset running when a stop is asked has this long before its waits on
 * the device are cut short. */
#define STOP_CUT_MS        2000u
/* The cancel's waits for the reactors (a reactor never blocks: it answers
 * in one pass unless it is wedged, and then the stop goes on without it). */
#define STOP_REACTOR_MS    2000u
/* The stop's sums (no function reset at a stop: the kernel's wait for the
 * function is not ours to bound; a device that will not disable is cut
 * off).  A reset already running gets STOP_CUT_MS, and each of its waits
 * half a second, before its waits on the device end. */
static_assert(STOP_CUT_MS + 500 + STOP_REACTOR_MS + STOP_SHN_ABRUPT_MS + STOP_DISABLE_MS +
                      STOP_REACTOR_MS <= NVME_CANCEL_MAX_MS,
              "cancel bound: a running reset's cut, hold, abrupt shutdown, disable, fail");
static_assert(STOP_SHN_NORMAL_MS + STOP_DISABLE_MS + STOP_REACTOR_MS <= NVME_SHUTDOWN_MAX_MS,
              "shutdown bound: normal shutdown, disable, quarantine");


static struct timespec mono_after(uint64_t ns)
{
	uint64_t t = nvme_now_ns() + ns;
	return (struct timespec){.tv_sec = (time_t)(t / 1000000000ull),
	                         .tv_nsec = (long)(t % 1000000000ull)};
}

/* ---- the state machine ---- */

/* Allowed edges, [from][to] (recovery.h). */
static const bool edges[4][4] = {
    [NVME_CTRL_LIVE] = {[NVME_CTRL_RESETTING] = true,
                        [NVME_CTRL_REMOVED] = true,
                        [NVME_CTRL_FAILED] = true /* a stop cancelled its commands */},
    [NVME_CTRL_RESETTING] = {[NVME_CTRL_LIVE] = true,
                             [NVME_CTRL_FAILED] = true,
                             [NVME_CTRL_REMOVED] = true},
    [NVME_CTRL_FAILED] = {[NVME_CTRL_RESETTING] = true, [NVME_CTRL_REMOVED] = true},
    [NVME_CTRL_REMOVED] = {[NVME_CTRL_RESETTING] = true},
};

static void emit(struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	/* held while calling: once set_event_cb returns, the old callback is
	 * neither running nor called again */
	pthread_mutex_lock(&c->event_lock);
	if (c->event_cb)
		c->event_cb(c->event_arg, c, s);
	pthread_mutex_unlock(&c->event_lock);
}

/* Take edge from -> to (from < 0: from whatever the state is now), if the
 * table allows it; emit it once and wake the waiters. */
static bool set_state(struct nvme_ctrl *c, int from, enum nvme_ctrl_state to)
{
	int cur = atomic_load_explicit(&c->state, memory_order_acquire);
	do {
		if ((from >= 0 && cur != from) || !edges[cur][to])
			return false;
	} while (!atomic_compare_exchange_weak(&c->state, &cur, (int)to));
	log_debug("%s: state %s -> %s", c->name, nvme_ctrl_state_name((enum nvme_ctrl_state)cur),
	          nvme_ctrl_state_name(to));
	emit(c, to);
	/* nvme_ctrl_reset and the stop waits sleep on done_cond; a retry is
	 * due only while FAILED */
	pthread_mutex_lock(&c->thr_lock);
	if (cur == NVME_CTRL_FAILED)
		c->retry_at_ns = 0;
	pthread_cond_broadcast(&c->done_cond);
	pthread_mutex_unlock(&c->thr_lock);
	return true;
}

bool recov_set_state(struct nvme_ctrl *c, enum nvme_ctrl_state to)
{
	return set_state(c, -1, to);
}

enum nvme_ctrl_state nvme_ctrl_state(const struct nvme_ctrl *c)
{
	return (enum nvme_ctrl_state)atomic_load_explicit(&c->state, memory_order_acquire);
}

const char *nvme_ctrl_state_name(enum nvme_ctrl_state s)
{
	switch (s) {
	case NVME_CTRL_LIVE:
		return "live";
	case NVME_CTRL_RESETTING:
		return "resetting";
	case NVME_CTRL_REMOVED:
		return "removed";
	case NVME_CTRL_FAILED:
		return "failed";
	}
	return "?";
}

void nvme_ctrl_set_event_cb(struct nvme_ctrl *c, nvme_ctrl_event_cb cb, void *arg)
{
	pthread_mutex_lock(&c->event_lock);
	c->event_cb = cb;
	c->event_arg = arg;
	pthread_mutex_unlock(&c->event_lock);
}

void nvme_ctrl_rstats_get(const struct nvme_ctrl *c, struct nvme_ctrl_rstats *out)
{
	const uint64_t *src = (const uint64_t *)&c->rst;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* ---- calls on the reactors, acknowledged per call ---- */

/* One wait for a set of calls.  Heap-allocated and counted: a call that
 * runs after its waiter gave up acknowledges into a live object, and a late
 * acknowledgement of an earlier wait can never count for a later one. */
struct recov_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned want, done, refs;
};

struct recov_call {
	struct recov_wait *w; /* NULL: nobody waits */
	void (*fn)(struct nvme_qpair *qp);
	struct nvme_qpair *qp;
};

static void wait_put(struct recov_wait *w, bool ack)
{
	pthread_mutex_lock(&w->m);
	if (ack) {
		w->done++;
		pthread_cond_broadcast(&w->cv);
	}
	bool last = --w->refs == 0;
	pthread_mutex_unlock(&w->m);
	if (last) {
		pthread_mutex_destroy(&w->m);
		pthread_cond_destroy(&w->cv);
		free(w);
	}
}

static void call_tramp(void *arg)
{
	struct recov_call *k = arg;
	k->fn(k->qp);
	if (k->w)
		wait_put(k->w, true);
	free(k);
}

/* Run fn on the reactor of every qpair of c; with wait_ms, wait until every
 * call ran (0, -ETIMEDOUT when a reactor did not answer in time, -ENOMEM
 * when a call could not be posted).  A reactor that has exited cannot run
 * calls any more and cannot touch its qpairs: fn runs here instead.
 * qp_lock is held while posting, so a qpair is not freed under a call;
 * callers hold reset_lock (qpair destruction waits for it). */
static int on_reactors(struct nvme_ctrl *c, void (*fn)(struct nvme_qpair *), uint32_t wait_ms)
{
	struct recov_wait *w = NULL;
	int rc = 0;
	if (wait_ms) {
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		pthread_mutex_init(&w->m, NULL);
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->cv, &ca);
		pthread_condattr_destroy(&ca);
		w->refs = 1;
	}
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps; i++) {
		struct nvme_qpair *qp = c->qps[i];
		struct recov_call *k = malloc(sizeof(*k));
		if (!k) {
			rc = -ENOMEM;
			continue;
		}
		*k = (struct recov_call){.w = w, .fn = fn, .qp = qp};
		if (w) {
			pthread_mutex_lock(&w->m);
			w->want++;
			w->refs++;
			pthread_mutex_unlock(&w->m);
		}
		int prc = nvme_reactor_call(qp->reactor, call_tramp, k);
		if (prc == -ESHUTDOWN) {
			call_tramp(k); /* the reactor thread is gone: the qpair is ours */
		} else if (prc < 0) {
			if (w) {
				pthread_mutex_lock(&w->m);
				w->want--;
				w->refs--;
				pthread_mutex_unlock(&w->m);
			}
			free(k);
			rc = prc;
		}
	}
	pthread_mutex_unlock(&c->qp_lock);
	if (!w)
		return rc;
	struct timespec ts = mono_after((uint64_t)wait_ms * 1000000ull);
	pthread_mutex_lock(&w->m);
	while (w->done < w->want)
		if (pthread_cond_timedwait(&w->cv, &w->m, &ts) != 0) {
			log_err("%s: %u of %u reactors did not answer the recovery in time", c->name,
			        w->want - w->done, w->want);
			rc = -ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&w->m);
	wait_put(w, false);
	return rc;
}

/* ---- the recovery thread ---- */

void recov_kick(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->thr_lock);
	pthread_cond_broadcast(&c->thr_cond);
	pthread_mutex_unlock(&c->thr_lock);
}

static void request(struct nvme_ctrl *c, unsigned what)
{
	pthread_mutex_lock(&c->thr_lock);
	c->work |= what;
	pthread_cond_broadcast(&c->thr_cond);
	pthread_mutex_unlock(&c->thr_lock);
}

void recov_aen_kick(struct nvme_ctrl *c)
{
	request(c, RECOV_W_AEN);
}

/* ---- taking the device's hands off memory ---- */

/* Bus mastering off and every mapping of this controller removed (rings,
 * pools, admin queue; the admin commands' own buffers are unmapped when
 * their slots are released).  0, or -EIO when a mapping could not be
 * removed: then the device may still reach it.  reset_lock held. */
static int isolate(struct nvme_ctrl *c)
{
	struct nvme_bus *bus = c->bus;
	int rc = 0;
	/* every time, even when isolated already: a function reset attempt
	 * since may have turned bus mastering back on */
	int brc = nvme_bus_master(bus, false);
	if (brc < 0 && brc != -ENOTSUP)
		log_warn("%s: cannot turn bus mastering off: %s", c->name, strerror(-brc));
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps; i++) {
		struct nvme_qpair *qp = c->qps[i];
		if (qp->ring_mapped && nvme_dma_unmap(bus, &qp->ring_mem, qp->ring_iova) < 0)
			rc = -EIO;
		else
			qp->ring_mapped = false;
		if (qp->pool_mapped && nvme_dma_unmap(bus, &qp->pool->region, qp->pool_map_iova) < 0)
			rc = -EIO;
		else
			qp->pool_mapped = false;
		qp->created_on_dev = false;
	}
	pthread_mutex_unlock(&c->qp_lock);
	pthread_mutex_lock(&c->admin_lock);
	__atomic_store_n(&c->admin_ready, false, __ATOMIC_RELAXED);
	if (c->admin_mapped && nvme_dma_unmap(bus, &c->admin_mem, c->admin_iova) < 0)
		rc = -EIO;
	else
		c->admin_mapped = false;
	pthread_mutex_unlock(&c->admin_lock);
	if (rc == 0 && !c->isolated) {
		c->isolated = true;
		RST_ADD(isolations, 1);
	}
	return rc;
}

/* Undo isolate on the (same or a new) bus: map everything again, bus
 * mastering on, vectors wired.  reset_lock held. */
static int remap(struct nvme_ctrl *c)
{
	struct nvme_bus *bus = c->bus;
	int rc = 0;
	pthread_mutex_lock(&c->admin_lock);
	if (!c->admin_mapped) {
		rc = nvme_dma_map(bus, &c->admin_mem, &c->admin_iova);
		c->admin_mapped = rc == 0;
	}
	pthread_mutex_unlock(&c->admin_lock);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps && rc == 0; i++) {
		struct nvme_qpair *qp = c->qps[i];
		if (!qp->ring_mapped) {
			rc = nvme_dma_map(bus, &qp->ring_mem, &qp->ring_iova);
			qp->ring_mapped = rc == 0;
		}
		if (rc == 0 && !qp->pool_mapped) {
			/* the reactor takes the new IOVA (and rebases what it
			 * holds) in nvme_qpair_rec_restart, on its own thread.
			 * qp->pool: under isolation this controller's own pool,
			 * never another controller's */
			rc = nvme_dma_map(bus, &qp->pool->region, &qp->pool_map_iova);
			qp->pool_mapped = rc == 0;
		}
	}
	pthread_mutex_unlock(&c->qp_lock);
	if (rc < 0)
		return rc;
	rc = nvme_bus_master(bus, true);
	if (rc < 0 && rc != -ENOTSUP)
		return rc;
	c->isolated = false;
	return 0;
}

enum { DOWN_DISABLED = 0, DOWN_ISOLATED = 1 };

/* Make sure the device can no longer touch host memory: disable it (CC.EN
 * = 0, RDY clear, within wait_ms); with flr, a function reset when it does
 * not disable or keeps CSTS.CFS (only a controller reset clears CFS, and
 * CC.EN that was already 0 cannot make one); isolation when neither works.
 * DOWN_DISABLED, DOWN_ISOLATED, -ENODEV (gone: isolated as well), -EIO
 * (not even isolated: the device may still write).  reset_lock held. */
static int take_down(struct nvme_ctrl *c, uint32_t wait_ms, bool flr)
{
	pthread_mutex_lock(&c->admin_lock);
	__atomic_store_n(&c->admin_ready, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->admin_lock);
	int rc = nvme_ctrl_disable(c, wait_ms);
	/* RDY clear is disabled; one that keeps CFS is reset as well when a
	 * bring-up follows (not at a stop: it is disabled, that is enough) */
	if (rc == 0 && (!flr || !(nvme_ctrl_csts(c) & NVME_CSTS_CFS)))
		return DOWN_DISABLED;
	if (rc != -ENODEV && !flr) {
		rc = -ETIMEDOUT; /* a stop or a removal: no function reset, whose wait
		                    for the function is the kernel's and unbounded here */
	} else if (rc != -ENODEV) {
		if (rc == 0)
			log_warn("%s: CSTS.CFS survives the disable: function level reset", c->name);
		else
			log_warn("%s: the controller does not disable: function level reset",
			         c->name);
		rc = c->bus->ops->reset ? c->bus->ops->reset(c->bus) : -ENOTSUP;
		if (rc == 0) {
			rc = nvme_ctrl_wait_csts(c, NVME_CSTS_RDY, 0, wait_ms, false,
			                         "waiting for the controller after the function reset");
			if (rc == 0 && !(nvme_ctrl_csts(c) & NVME_CSTS_CFS))
				return DOWN_DISABLED; /* bring_up wires the vectors again */
		} else if (rc != -ENODEV) {
			log_err("%s: no function level reset: %s", c->name, strerror(-rc));
		}
	}
	bool gone = rc == -ENODEV;
	if (isolate(c) < 0) {
		log_err("%s: the device could not be cut off from memory: its commands stay "
		        "outstanding and their buffers are never reused",
		        c->name);
		return -EIO;
	}
	if (gone)
		return -ENODEV;
	log_err("%s: the controller could not be disabled: cut off (bus mastering off, "
	        "every DMA mapping removed)",
	        c->name);
	return DOWN_ISOLATED;
}

/* After take_down: the admin commands and the I/O commands outstanding are
 * ended (fail: -EIO; else taken back to be held for resubmission), or, when
 * the device could not be cut off, left on it (quarantined).  Returns the
 * reactors' answer (on_reactors). */
static int end_commands_wait(struct nvme_ctrl *c, int down, bool fail, int admin_err,
                             uint32_t wait_ms)
{
	if (down == -EIO) {
		c->quarantined = true;
		nvme_ctrl_admin_abandon(c, admin_err, false);
		return on_reactors(c, nvme_qpair_rec_quarantine, wait_ms);
	}
	c->quarantined = false;
	nvme_ctrl_admin_abandon(c, admin_err, true);
	return on_reactors(c, fail ? nvme_qpair_rec_fail : nvme_qpair_rec_stop, wait_ms);
}

static int end_commands(struct nvme_ctrl *c, int down, bool fail, int admin_err)
{
	return end_commands_wait(c, down, fail, admin_err, RECOV_REACTOR_MS);
}

/* ---- bring-up ---- */

/* Enable, Number of Queues, namespaces, every I/O queue with its qid and
 * vector.  reset_lock held, device disabled. */
static int bring_up(struct nvme_ctrl *c, bool strict_ns)
{
	/* whatever is not mapped (an isolation, a partial one, a new bus) is
	 * mapped again, and bus mastering is on */
	int rc = remap(c);
	if (rc < 0)
		return rc;
	/* a reset or power cycle of the function may have lost the MSI-X
	 * wiring: wire it again before any queue can raise one */
	pthread_mutex_lock(&c->admin_lock);
	if (c->nr_efds && c->bus->ops->irq_set)
		rc = c->bus->ops->irq_set(c->bus, c->nr_efds, c->efds);
	pthread_mutex_unlock(&c->admin_lock);
	if (rc < 0)
		return rc;
	rc = nvme_ctrl_enable(c);
	if (rc < 0)
		return rc;
	if (atomic_load(&c->stopping))
		return -ESHUTDOWN;
	unsigned granted = 0;
	rc = nvme_ctrl_set_num_queues(c, c->asked_queues, &granted);
	if (rc < 0)
		return rc;
	rc = nvme_ctrl_recheck_namespaces(c, strict_ns);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps && rc == 0; i++) {
		if (c->qps[i]->qid > granted) {
			log_err("%s: only %u I/O queues granted now; queue %u is lost", c->name,
			        granted, c->qps[i]->qid);
			rc = -ENOSPC;
			break;
		}
		rc = nvme_qpair_create_on_dev(c->qps[i]);
	}
	pthread_mutex_unlock(&c->qp_lock);
	if (rc == 0)
		nvme_aen_start(c); /* events enabled and AERs armed again */
	return rc;
}

int recov_ns_invalidate(struct nvme_ctrl *c)
{
	/* posted, not waited for: a reactor not started yet (a test driving
	 * its qpair by hand) must not hold the event up; a call posted after
	 * this one (the FIFO of nvme_reactor_call) sees the cache empty */
	return on_reactors(c, nvme_qpair_ns_invalidate, 0);
}

/* ---- reset ---- */

static void schedule_retry(struct nvme_ctrl *c)
{
	if (atomic_load(&c->stopping) || nvme_ctrl_state(c) != NVME_CTRL_FAILED)
		return; /* removed meanwhile, or stopping: nothing to try */
	pthread_mutex_lock(&c->thr_lock);
	c->retry_at_ns = nvme_now_ns() + (uint64_t)c->retry_ms * 1000000ull;
	log_warn("%s: next attempt to bring the controller back in %u ms", c->name, c->retry_ms);
	c->retry_ms = c->retry_ms * 2 > c->opts.retry_max_ms ? c->opts.retry_max_ms : c->retry_ms * 2;
	pthread_cond_broadcast(&c->thr_cond);
	pthread_mutex_unlock(&c->thr_lock);
}

/* Gone during recovery: REMOVED, everything ended (take_down isolated it). */
static void gone_locked(struct nvme_ctrl *c, const char *why)
{
	if (recov_set_state(c, NVME_CTRL_REMOVED)) {
		RST_ADD(removals, 1);
		log_err("%s: the device is gone (%s): its I/O fails", c->name, why);
	}
	end_commands(c, DOWN_ISOLATED, true, -ENODEV);
}

/* The bring-up failed: take the half-up device down again, fail every
 * command (or quarantine them), FAILED, try again later. */
static void bring_up_failed(struct nvme_ctrl *c)
{
	RST_ADD(resets_failed, 1);
	int down = take_down(c, c->ready_timeout_ms, true);
	if (down == -ENODEV) {
		gone_locked(c, "it stopped answering during a reset");
		return;
	}
	end_commands(c, down, true, -EIO);
	log_err("%s: reset failed: the controller is out of service; its I/O fails", c->name);
	recov_set_state(c, NVME_CTRL_FAILED);
	schedule_retry(c);
}

/* The reset (or a retry of a failed one): state RESETTING already. */
static void do_reset(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->reset_lock);
	if (nvme_ctrl_state(c) != NVME_CTRL_RESETTING || !c->bus) {
		pthread_mutex_unlock(&c->reset_lock);
		return;
	}
	uint64_t t0 = nvme_now_ns();
	/* hold new submissions before the disable; here, under reset_lock and
	 * waited for, so that no hold can land after this reset's restart */
	on_reactors(c, nvme_qpair_rec_hold, RECOV_REACTOR_MS);
	int down = take_down(c, c->ready_timeout_ms, true);
	if (down == -ENODEV) {
		gone_locked(c, "it stopped answering during a reset");
		pthread_mutex_unlock(&c->reset_lock);
		return;
	}
	if (down != DOWN_DISABLED) {
		/* not disabled: cut off (or not even that) -- it must not get its
		 * memory back to be brought up while it may still run its old
		 * queues: everything fails now, and a later try that disables
		 * it brings it back */
		RST_ADD(resets_failed, 1);
		end_commands(c, down, true, -EIO);
		log_err("%s: reset failed: the controller is out of service; its I/O fails",
		        c->name);
		recov_set_state(c, NVME_CTRL_FAILED);
		if (!atomic_load(&c->stopping))
			schedule_retry(c);
		pthread_mutex_unlock(&c->reset_lock);
		return;
	}
	/* Disabled: the device no longer touches any of our memory.  Admin
	 * commands fail; I/O is taken off the rings and held. */
	int rc = end_commands(c, down, false, -EIO);
	if (rc == 0 && !atomic_load(&c->stopping))
		rc = bring_up(c, false);
	else if (rc == 0)
		rc = -ESHUTDOWN;
	if (rc < 0) {
		bring_up_failed(c);
		pthread_mutex_unlock(&c->reset_lock);
		return;
	}
	on_reactors(c, nvme_qpair_rec_restart, RECOV_REACTOR_MS);
	uint64_t dt = nvme_now_ns() - t0;
	__atomic_store_n(&c->rst.reset_last_ns, dt, __ATOMIC_RELAXED);
	if (dt > c->rst.reset_max_ns)
		__atomic_store_n(&c->rst.reset_max_ns, dt, __ATOMIC_RELAXED);
	RST_ADD(resets_ok, 1);
	log_warn("%s: reset done in %llu ms", c->name, (unsigned long long)(dt / 1000000));
	c->retry_ms = c->opts.retry_ms;
	atomic_store(&c->csts_next_ns, 0);
	recov_set_state(c, NVME_CTRL_LIVE);
	pthread_mutex_unlock(&c->reset_lock);
}

int recov_reset_async(struct nvme_ctrl *c, const char *why)
{
	if (!c->thr_started)
		return -EAGAIN;
	if (atomic_load(&c->stopping))
		return -ESHUTDOWN;
	if (!set_state(c, NVME_CTRL_LIVE, NVME_CTRL_RESETTING)) {
		int st = atomic_load(&c->state);
		return st == NVME_CTRL_RESETTING ? -EBUSY : -ENODEV;
	}
	RST_ADD(resets_started, 1);
	log_warn("%s: resetting the controller: %s", c->name, why);
	pthread_mutex_lock(&c->thr_lock);
	snprintf(c->reset_why, sizeof(c->reset_why), "%s", why);
	c->work |= RECOV_W_RESET;
	pthread_cond_broadcast(&c->thr_cond);
	pthread_mutex_unlock(&c->thr_lock);
	return 0;
}

int nvme_ctrl_reset_async(struct nvme_ctrl *c, const char *why)
{
	return recov_reset_async(c, why);
}

int nvme_ctrl_reset(struct nvme_ctrl *c)
{
	int rc = recov_reset_async(c, "requested");
	if (rc < 0 && rc != -EBUSY)
		return rc;
	pthread_mutex_lock(&c->thr_lock);
	for (;;) {
		int st = atomic_load(&c->state);
		if (st != NVME_CTRL_RESETTING) {
			pthread_mutex_unlock(&c->thr_lock);
			return st == NVME_CTRL_LIVE ? 0 : st == NVME_CTRL_FAILED ? -EIO : -ENODEV;
		}
		/* woken by every state change (recov_set_state) */
		struct timespec ts = mono_after(100000000ull);
		pthread_cond_timedwait(&c->done_cond, &c->thr_lock, &ts);
	}
}

/* A failed controller's turn to try again (recovery thread). */
static void do_retry(struct nvme_ctrl *c)
{
	if (atomic_load(&c->stopping) ||
	    !set_state(c, NVME_CTRL_FAILED, NVME_CTRL_RESETTING)) /* removed meanwhile: no */
		return;
	RST_ADD(resets_started, 1);
	log_warn("%s: trying to bring the failed controller back", c->name);
	do_reset(c);
}

/* ---- abort ---- */

/* An Abort in flight names its command by queue id and CID, not by qpair:
 * the qpair may be destroyed before the Abort's answer comes. */
struct abort_check {
	struct nvme_ctrl *c;
	struct nvme_qpair *qp; /* set when the check is posted, under qp_lock */
	uint16_t qid, cid;
};

static void abort_check_call(void *arg)
{
	struct abort_check *k = arg;
	if (nvme_qpair_rec_still_aborting(k->qp, k->cid))
		recov_reset_async(k->c, "an Abort failed or was not honoured");
	free(k);
}

static void abort_done(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct abort_check *k = arg;
	struct nvme_ctrl *c = k->c;
	atomic_fetch_sub(&c->aborts_out, 1);
	/* dw0 bit 0 clear: the command was aborted (its CQE follows on its
	 * queue, where aborts_ok is counted); -ENODEV, or -EIO with no CQE: a
	 * reset or removal abandoned the Abort and takes care of the command */
	if ((err == 0 && cqe && !(cqe->dw0 & 1)) || err == -ENODEV || (err == -EIO && !cqe)) {
		free(k);
		return;
	}
	/* not aborted, or the Abort failed: a reason to reset only if the
	 * command is still out -- it may have completed meanwhile, and the
	 * check is its reactor's.  A qpair still listed is not freed while
	 * qp_lock is held; a call posted now runs before its reactor exits,
	 * and a qpair is destroyed only after that. */
	int rc = -ENOENT;
	pthread_mutex_lock(&c->qp_lock);
	for (unsigned i = 0; i < c->nqps; i++)
		if (c->qps[i]->qid == k->qid) {
			k->qp = c->qps[i];
			rc = nvme_reactor_call(k->qp->reactor, abort_check_call, k);
			break;
		}
	pthread_mutex_unlock(&c->qp_lock);
	if (rc < 0)
		free(k);
}

int recov_send_abort(struct nvme_ctrl *c, uint16_t qid, uint16_t cid)
{
	/* at most ACL + 1 Aborts outstanding */
	unsigned n = atomic_fetch_add(&c->aborts_out, 1);
	if (n > c->info->acl || nvme_ctrl_state(c) != NVME_CTRL_LIVE) {
		atomic_fetch_sub(&c->aborts_out, 1);
		return -EAGAIN;
	}
	struct abort_check *k = malloc(sizeof(*k));
	if (!k) {
		atomic_fetch_sub(&c->aborts_out, 1);
		return -ENOMEM;
	}
	*k = (struct abort_check){.c = c, .qid = qid, .cid = cid};
	struct nvme_sqe cmd = {.opc = NVME_ADM_ABORT, .cdw10 = ((uint32_t)cid << 16) | qid};
	uint32_t tmo = c->opts.io_timeout_ms / 2 < 10 ? 10 : c->opts.io_timeout_ms / 2;
	int rc = nvme_ctrl_admin_submit(c, &cmd, NULL, 0, abort_done, k, tmo);
	if (rc < 0) {
		free(k);
		atomic_fetch_sub(&c->aborts_out, 1);
		return rc;
	}
	RST_ADD(aborts_sent, 1);
	return 0;
}

/* ---- health and a vanished device ---- */

void recov_dead(struct nvme_ctrl *c, const char *why)
{
	if (!recov_set_state(c, NVME_CTRL_REMOVED))
		return; /* counted and logged once */
	RST_ADD(removals, 1);
	log_err("%s: the device is gone (%s): its I/O fails", c->name, why);
	/* waiters on admin commands go on now; the slots are released once
	 * the recovery thread has cut the device off */
	nvme_ctrl_admin_abandon(c, -ENODEV, false);
	request(c, RECOV_W_DEAD);
}

static void do_dead(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->reset_lock);
	if (c->bus && nvme_ctrl_state(c) == NVME_CTRL_REMOVED) {
		/* isolate before anything completes: a device reading all ones
		 * may only be behind a link that comes back */
		int down = isolate(c) == 0 ? DOWN_ISOLATED : -EIO;
		end_commands(c, down, true, -ENODEV);
	}
	pthread_mutex_unlock(&c->reset_lock);
}

void recov_check_health(struct nvme_ctrl *c, uint64_t now)
{
	if (nvme_ctrl_state(c) != NVME_CTRL_LIVE || atomic_load(&c->stopping))
		return;
	uint64_t next = atomic_load_explicit(&c->csts_next_ns, memory_order_relaxed);
	/* one reactor at a time, a few times a second */
	if (now < next ||
	    !atomic_compare_exchange_strong(&c->csts_next_ns, &next, now + NVME_CSTS_INTERVAL_NS))
		return;
	uint32_t s = nvme_ctrl_csts(c);
	if (s == 0xffffffffu) {
		recov_dead(c, "registers read all ones");
	} else if (s & NVME_CSTS_CFS) {
		if (recov_reset_async(c, "controller fatal status (CSTS.CFS)") == 0) {
			RST_ADD(cfs_events, 1);
			log_err("%s: controller fatal status (CSTS 0x%x)", c->name, s);
		}
	} else if (!(s & NVME_CSTS_RDY) || (s & NVME_CSTS_SHST_MASK)) {
		/* reset or shut down under us (a power glitch, a firmware
		 * restart, another agent): its queues are gone */
		if (recov_reset_async(c, !(s & NVME_CSTS_RDY)
		                             ? "the controller is no longer ready (CSTS.RDY = 0)"
		                             : "the controller reports a shutdown (CSTS.SHST)") == 0)
			log_err("%s: CSTS 0x%x while live", c->name, s);
	}
}

/* CC.SHN (normal or abrupt) and wait for SHST complete, at most wait_ms. */
static int shutdown_notify(struct nvme_ctrl *c, uint32_t shn, uint32_t wait_ms)
{
	uint32_t cc = nvme_bus_read32(c->bus, NVME_REG_CC);
	if (cc == 0xffffffffu)
		return -ENODEV;
	if (!(cc & NVME_CC_EN))
		return -EINVAL; /* nothing enabled to shut down */
	nvme_bus_write32(c->bus, NVME_REG_CC, (cc & ~NVME_CC_SHN_MASK) | shn);
	return nvme_ctrl_wait_csts(c, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT, wait_ms, false,
	                           "waiting for shutdown to complete");
}

/* ---- removal and re-attach ---- */

static int remove_ctrl(struct nvme_ctrl *c, const char *why, bool orderly,
                       struct nvme_bus **bus_out)
{
	*bus_out = NULL;
	pthread_mutex_lock(&c->reset_lock); /* a reset in progress finishes first */
	struct nvme_bus *bus = c->bus;
	if (!bus) {
		pthread_mutex_unlock(&c->reset_lock);
		return 0;
	}
	bool live = nvme_ctrl_state(c) == NVME_CTRL_LIVE;
	if (recov_set_state(c, NVME_CTRL_REMOVED)) {
		RST_ADD(removals, 1);
		log_warn("%s: removing the controller: %s", c->name, why ? why : "requested");
	}
	/* still answering: disable it first, so nothing in flight can be
	 * written; then cut it off whatever happened, since the bus is handed
	 * back; and only then end the commands.  A detach tells a live
	 * controller first that it is shut down in order (its cache saved, no
	 * unsafe shutdown counted), as a stop does. */
	int down = DOWN_ISOLATED;
	if (!c->isolated && nvme_ctrl_csts(c) != 0xffffffffu) {
		if (orderly && live) {
			uint32_t wait = c->shutdown_timeout_ms < NVME_DETACH_SHN_MAX_MS
			                    ? c->shutdown_timeout_ms
			                    : NVME_DETACH_SHN_MAX_MS;
			uint64_t t0 = nvme_now_ns();
			int rc = shutdown_notify(c, NVME_CC_SHN_NORMAL, wait);
			if (rc == 0)
				log_info("%s: shut down (CC.SHN normal) in %.1f ms", c->name,
				         (double)(nvme_now_ns() - t0) / 1e6);
			else
				log_warn("%s: shutdown incomplete (%s); disabling anyway", c->name,
				         strerror(-rc));
		}
		down = take_down(c, STOP_DISABLE_MS, false);
	}
	if (down != -EIO && isolate(c) < 0)
		down = -EIO;
	int rc = end_commands(c, down == -EIO ? -EIO : DOWN_ISOLATED, true, -ENODEV);
	if (down == -EIO || rc < 0) {
		/* a mapping the device may still use, or a reactor still using
		 * the BAR: the bus cannot go */
		log_err("%s: the controller cannot be released safely; it stays held", c->name);
		pthread_mutex_unlock(&c->reset_lock);
		return -EBUSY;
	}
	pthread_mutex_lock(&c->admin_lock);
	if (c->nr_efds && bus->ops->irq_set)
		bus->ops->irq_set(bus, 0, NULL); /* the eventfds stay, for a re-attach */
	c->bus = NULL;
	pthread_mutex_unlock(&c->admin_lock);
	c->isolated = false; /* nothing is mapped on any bus now */
	*bus_out = bus;
	pthread_mutex_unlock(&c->reset_lock);
	return 0;
}

int nvme_ctrl_remove(struct nvme_ctrl *c, const char *why, struct nvme_bus **bus_out)
{
	return remove_ctrl(c, why, false, bus_out);
}

int nvme_ctrl_detach(struct nvme_ctrl *c, const char *why, struct nvme_bus **bus_out)
{
	return remove_ctrl(c, why, true, bus_out);
}

int nvme_ctrl_attach(struct nvme_ctrl *c, struct nvme_bus *bus)
{
	pthread_mutex_lock(&c->reset_lock);
	int rc = 0;
	if (c->bus) {
		rc = -EBUSY;
		goto out;
	}
	if (nvme_ctrl_state(c) != NVME_CTRL_REMOVED) {
		rc = -EINVAL;
		goto out;
	}
	uint64_t cap = nvme_bus_read64(bus, NVME_REG_CAP);
	if (cap == ~0ull) {
		log_err("%s: device not responding (CAP reads all ones)", c->name);
		rc = -ENODEV;
		goto out;
	}
	if (NVME_CAP_DSTRD(cap) != c->dstrd || NVME_CAP_MQES(cap) + 1u < c->opts.queue_depth) {
		log_err("%s: the re-attached controller differs (CAP 0x%llx)", c->name,
		        (unsigned long long)cap);
		rc = -ESTALE;
		goto out;
	}
	/* the same DSTRD on a new BAR: the doorbells must fit it too (any
	 * queue granted at the open may exist) */
	if (nvme_ctrl_db_queues(c, bus, c->dstrd, c->info->nr_io_queues, true) < 0) {
		rc = -ESTALE;
		goto out;
	}
	if (!set_state(c, NVME_CTRL_REMOVED, NVME_CTRL_RESETTING)) {
		rc = -EINVAL;
		goto out;
	}
	pthread_mutex_lock(&c->admin_lock);
	c->bus = bus;
	pthread_mutex_unlock(&c->admin_lock);
	/* nothing of ours is mapped on the new bus: bring_up maps it all
	 * (after a disable, so a device left enabled touches none of it; with
	 * a function reset when it keeps CFS, which its EN already 0 cannot
	 * clear) */
	c->isolated = true;
	int down = take_down(c, c->ready_timeout_ms, true);
	rc = down == DOWN_DISABLED ? bring_up(c, true) : down == -ENODEV ? -ENODEV : -EIO;
	if (rc < 0)
		goto undo;
	/* the qpairs take the new bus, doorbells and IOVAs on their reactors */
	on_reactors(c, nvme_qpair_rec_restart, RECOV_REACTOR_MS);
	atomic_store(&c->csts_next_ns, 0);
	c->retry_ms = c->opts.retry_ms;
	log_info("%s: re-attached on %s", c->name, bus->name);
	recov_set_state(c, NVME_CTRL_LIVE);
	pthread_mutex_unlock(&c->reset_lock);
	return 0;
undo:
	if (nvme_ctrl_csts(c) != 0xffffffffu)
		nvme_ctrl_disable(c, c->ready_timeout_ms);
	c->isolated = false; /* so that isolate unmaps what bring_up mapped */
	if (isolate(c) < 0)
		log_err("%s: a failed attach left mappings on %s", c->name, bus->name);
	nvme_ctrl_admin_abandon(c, -ENODEV, true);
	pthread_mutex_lock(&c->admin_lock);
	if (c->nr_efds && bus->ops->irq_set)
		bus->ops->irq_set(bus, 0, NULL);
	c->bus = NULL;
	pthread_mutex_unlock(&c->admin_lock);
	c->isolated = false;
	recov_set_state(c, NVME_CTRL_REMOVED);
out:
	pthread_mutex_unlock(&c->reset_lock);
	return rc;
}

/* ---- the bounded stop ---- */

static void stop_asked(struct nvme_ctrl *c, unsigned what)
{
	atomic_store(&c->stopping, true);
	uint64_t zero = 0;
	atomic_compare_exchange_strong(&c->stop_cut_ns, &zero,
	                               nvme_now_ns() + STOP_CUT_MS * 1000000ull);
	request(c, what);
}

static void do_cancel(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->reset_lock);
	atomic_store(&c->stop_cut_ns, 0); /* this step's own waits are bounded */
	int st = nvme_ctrl_state(c);
	if (c->bus && !c->isolated && st != NVME_CTRL_REMOVED) {
		on_reactors(c, nvme_qpair_rec_hold, STOP_REACTOR_MS);
		unsigned out = 0;
		pthread_mutex_lock(&c->qp_lock);
		for (unsigned i = 0; i < c->nqps; i++)
			out += nvme_qpair_inflight(c->qps[i]);
		pthread_mutex_unlock(&c->qp_lock);
		log_warn("%s: stop: ending %u command(s) still outstanding", c->name, out);
		RST_ADD(cancelled, out);
		/* a device that still answers saves its cache first */
		if (st == NVME_CTRL_LIVE &&
		    shutdown_notify(c, NVME_CC_SHN_ABRUPT, STOP_SHN_ABRUPT_MS) == 0)
			c->shut_down = true;
		int down = take_down(c, STOP_DISABLE_MS, false);
		end_commands_wait(c, down == -ENODEV ? DOWN_ISOLATED : down, true, -EIO,
		                  STOP_REACTOR_MS);
		if (down == -ENODEV)
			c->shut_down = true;
		if (!recov_set_state(c, NVME_CTRL_FAILED) && down == -ENODEV)
			recov_set_state(c, NVME_CTRL_REMOVED);
	}
	pthread_mutex_unlock(&c->reset_lock);
	pthread_mutex_lock(&c->thr_lock);
	c->cancel_done = true;
	pthread_cond_broadcast(&c->done_cond);
	pthread_mutex_unlock(&c->thr_lock);
}

void nvme_ctrl_cancel_async(struct nvme_ctrl *c)
{
	stop_asked(c, RECOV_W_CANCEL);
}

static int wait_done(struct nvme_ctrl *c, const bool *flag, uint32_t timeout_ms)
{
	struct timespec ts = mono_after((uint64_t)timeout_ms * 1000000ull);
	int rc = 0;
	pthread_mutex_lock(&c->thr_lock);
	while (!*flag && rc == 0)
		if (pthread_cond_timedwait(&c->done_cond, &c->thr_lock, &ts) != 0)
			rc = *flag ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&c->thr_lock);
	return rc;
}

int nvme_ctrl_cancel_wait(struct nvme_ctrl *c, uint32_t timeout_ms)
{
	return wait_done(c, &c->cancel_done, timeout_ms);
}

static void do_shutdown(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->reset_lock);
	atomic_store(&c->stop_cut_ns, 0);
	if (!c->shut_down && c->bus && !c->isolated && nvme_ctrl_csts(c) != 0xffffffffu) {
		uint32_t wait = c->shutdown_timeout_ms < STOP_SHN_NORMAL_MS ? c->shutdown_timeout_ms
		                                                            : STOP_SHN_NORMAL_MS;
		if (nvme_ctrl_state(c) == NVME_CTRL_LIVE &&
		    shutdown_notify(c, NVME_CC_SHN_NORMAL, wait) < 0)
			log_warn("%s: shutdown incomplete; disabling anyway", c->name);
		/* disabled, the device stops referencing every queue's memory */
		int down = take_down(c, STOP_DISABLE_MS, false);
		if (down == -EIO) {
			/* neither disabled nor cut off: what it holds stays its own */
			end_commands(c, -EIO, true, -ENODEV);
		} else {
			nvme_ctrl_admin_abandon(c, -ENODEV, true);
		}
	}
	if (!c->quarantined) {
		pthread_mutex_lock(&c->qp_lock);
		for (unsigned i = 0; i < c->nqps; i++)
			c->qps[i]->created_on_dev = false; /* disabled or cut off: no queues */
		pthread_mutex_unlock(&c->qp_lock);
	}
	c->shut_down = true;
	pthread_mutex_unlock(&c->reset_lock);
	pthread_mutex_lock(&c->thr_lock);
	c->shutdown_done = true;
	pthread_cond_broadcast(&c->done_cond);
	pthread_mutex_unlock(&c->thr_lock);
}

void nvme_ctrl_shutdown_async(struct nvme_ctrl *c)
{
	if (!c->thr_started) {
		atomic_store(&c->stopping, true);
		do_shutdown(c);
		return;
	}
	stop_asked(c, RECOV_W_SHUTDOWN);
}

int nvme_ctrl_shutdown_wait(struct nvme_ctrl *c, uint32_t timeout_ms)
{
	int rc = wait_done(c, &c->shutdown_done, timeout_ms);
	return rc < 0 ? rc : c->quarantined ? -EBUSY : 0;
}

/* ---- the thread ---- */

static void *recov_thread(void *arg)
{
	struct nvme_ctrl *c = arg;
	pthread_mutex_lock(&c->thr_lock);
	for (;;) {
		if (c->thr_stop)
			break;
		uint64_t now = nvme_now_ns();
		if (c->retry_at_ns && now >= c->retry_at_ns) {
			c->retry_at_ns = 0;
			c->work |= RECOV_W_RESET;
		}
		unsigned work = c->work;
		if (work) {
			/* the most final request first */
			unsigned w = (work & RECOV_W_DEAD)       ? RECOV_W_DEAD
			             : (work & RECOV_W_CANCEL)   ? RECOV_W_CANCEL
			             : (work & RECOV_W_SHUTDOWN) ? RECOV_W_SHUTDOWN
			             : (work & RECOV_W_RESET)    ? RECOV_W_RESET
			                                         : RECOV_W_AEN;
			c->work &= ~w;
			pthread_mutex_unlock(&c->thr_lock);
			switch (w) {
			case RECOV_W_DEAD:
				do_dead(c);
				break;
			case RECOV_W_CANCEL:
				do_cancel(c);
				break;
			case RECOV_W_SHUTDOWN:
				do_shutdown(c);
				break;
			case RECOV_W_AEN:
				nvme_aen_process(c);
				break;
			default:
				if (nvme_ctrl_state(c) == NVME_CTRL_FAILED)
					do_retry(c);
				else
					do_reset(c);
			}
			pthread_mutex_lock(&c->thr_lock);
			continue;
		}
		unsigned out = atomic_load_explicit(&c->admin_outstanding, memory_order_relaxed);
		if (out && __atomic_load_n(&c->admin_ready, __ATOMIC_RELAXED) &&
		    out <= atomic_load_explicit(&c->aers_armed, memory_order_relaxed)) {
			/* only AERs out: they complete when an event comes, which
			 * needs no hurry; a request or a new command wakes us */
			pthread_mutex_unlock(&c->thr_lock);
			nvme_ctrl_admin_reap(c);
			pthread_mutex_lock(&c->thr_lock);
			if (c->work || c->thr_stop)
				continue;
			struct timespec ts = mono_after(AEN_POLL_NS);
			pthread_cond_timedwait(&c->thr_cond, &c->thr_lock, &ts);
			continue;
		}
		if (out && __atomic_load_n(&c->admin_ready, __ATOMIC_RELAXED)) {
			/* commands outstanding: reap (and expire) at 5 kHz until none
			 * is (slots a quarantine keeps are not reaped: no polling) */
			pthread_mutex_unlock(&c->thr_lock);
			nvme_ctrl_admin_reap(c);
			struct timespec ts = {0, 200000};
			nanosleep(&ts, NULL);
			pthread_mutex_lock(&c->thr_lock);
			continue;
		}
		if (c->retry_at_ns) {
			struct timespec ts = mono_after(c->retry_at_ns - now);
			pthread_cond_timedwait(&c->thr_cond, &c->thr_lock, &ts);
		} else {
			pthread_cond_wait(&c->thr_cond, &c->thr_lock);
		}
	}
	pthread_mutex_unlock(&c->thr_lock);
	return NULL;
}

int recov_start(struct nvme_ctrl *c)
{
	int rc = pthread_create(&c->thr, NULL, recov_thread, c);
	if (rc != 0)
		return -rc;
	c->thr_started = true;
	pthread_setname_np(c->thr, "nvme-recov");
	return 0;
}

void recov_stop_thread(struct nvme_ctrl *c)
{
	if (!c->thr_started)
		return;
	pthread_mutex_lock(&c->thr_lock);
	c->thr_stop = true;
	pthread_cond_broadcast(&c->thr_cond);
	pthread_mutex_unlock(&c->thr_lock);
	pthread_join(c->thr, NULL);
	c->thr_started = false;
}

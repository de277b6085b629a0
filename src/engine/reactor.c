/* reactor.c - one pinned thread per core running a libev loop that owns its
 * qpairs and its DMA buffer pools (one shared by its controllers, or one per
 * controller under dma_isolation).
 *
 * One loop iteration is one pass:
 *   ev_check   (first after the loop wakes) cache the time, run the pass hook,
 *              reap the qpairs due this pass, round robin, cq_budget each
 *   other watchers (FUSE fd, eventfds, timer, calls) may submit more
 *   ev_prepare (last before the loop may block) run the flush hook, ring
 *              every dirty SQ tail doorbell once (with a flush hook, in
 *              poll and hybrid mode: reap once more and flush again, see
 *              reap_rung), decide whether the next iteration may block
 * Modes:
 *   poll       an ev_idle watcher keeps the loop from blocking; every qpair is
 *              reaped every pass.
 *   interrupt  an ev_io per CQ eventfd.  On a wake: read the eventfd, reap
 *              with budget; a qpair that filled its budget stays on the
 *              polling list and is reaped on the following passes until one
 *              reaps less than the budget, then the loop may sleep (NAPI).
 *   hybrid     poll while anything is in flight; block when nothing is.  No
 *              completion can arrive for a queue with nothing in flight, so
 *              its queues have no interrupt (qpair.c wires none): a wake
 *              comes from the FUSE side or a call.  A queue whose device
 *              has neither completed a command nor been given one for
 *              HYBRID_STALL_NS (a hung controller, one being reset) does
 *              not keep the loop polling: while only such queues have
 *              commands in flight it sleeps at most HYBRID_SLOW_NS at a
 *              time and reaps them at every pass (see hybrid_due).
 * Where the loop sleeps: in libev's epoll, or, once a wait fd is set
 * (nvme_reactor_wait_fd), in an epoll of the reactor's own (see "the
 * reactor's own wait" below).
 */
#include <errno.h>
#include <limits.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine_internal.h"
#include "log.h"

#define DEFAULT_POOL_BYTES (64u << 20)

/* ---- MPSC queue of calls (Vyukov, intrusive) ---- */

static void mpsc_push(struct nvme_reactor *r, struct nvme_call *n)
{
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	struct nvme_call *prev = atomic_exchange_explicit(&r->q_head, n, memory_order_acq_rel);
	/* between the exchange and this store the consumer sees a gap and waits
	 * for the next wake-up, which the producer sends after this (wake) */
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

static struct nvme_call *mpsc_pop(struct nvme_reactor *r)
{
	struct nvme_call *tail = r->q_tail;
	struct nvme_call *next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (tail == &r->q_stub) {
		if (!next)
			return NULL;
		r->q_tail = next;
		tail = next;
		next = atomic_load_explicit(&tail->next, memory_order_acquire);
	}
	if (next) {
		r->q_tail = next;
		return tail;
	}
	if (tail != atomic_load_explicit(&r->q_head, memory_order_acquire))
		return NULL; /* a producer is mid-push */
	mpsc_push(r, &r->q_stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next) {
		r->q_tail = next;
		return tail;
	}
	return NULL;
}

/* ---- the pass ---- */

/* Commands this reactor waits for: those left on a device that could not
 * be cut off (quarantined) never complete, so they are not counted: the
 * loop neither polls for them nor keeps a stop waiting. */
static unsigned total_inflight(const struct nvme_reactor *r)
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->nqps; i++)
		if (!r->qps[i]->quarantined)
			n += r->qps[i]->inflight;
	return n;
}

/* Hybrid mode: a queue with commands in flight that has seen no progress
 * (no completion, no SQ doorbell) for this long is stalled: its device is
 * hung, being reset, or slow.  Polling for it would only take the CPU from
 * the threads this reactor's other work needs (the callers, the kernel's
 * FUSE side, a software controller's thread): it is looked at every
 * HYBRID_SLOW_NS instead, which delays a command that took longer than
 * HYBRID_STALL_NS by at most that much. */
#define HYBRID_STALL_NS 10000000ull
#define HYBRID_SLOW_NS 1000000ull

/* Hybrid mode: whether a completion may come soon -- some queue has
 * commands in flight and saw progress within HYBRID_STALL_NS; *stalled:
 * whether some queue has commands in flight that are not (its progress
 * counts from the pass that first saw it). */
static bool hybrid_due(struct nvme_reactor *r, bool *stalled)
{
	bool due = false;

	*stalled = false;
	for (unsigned i = 0; i < r->nqps; i++) {
		struct nvme_qpair *qp = r->qps[i];
		if (!qp->inflight || qp->quarantined)
			continue;
		uint64_t seen = qp->ctr.completed + qp->ctr.sq_doorbells;
		if (seen != qp->hy_seen) {
			qp->hy_seen = seen;
			qp->hy_progress_ns = r->now_ns;
		}
		if (r->now_ns - qp->hy_progress_ns < HYBRID_STALL_NS)
			due = true;
		else
			*stalled = true;
	}
	return due;
}

static void set_slow_poll(struct nvme_reactor *r, bool on)
{
	if (on == r->slow_poll)
		return;
	r->slow_poll = on;
	if (on)
		ev_timer_again(r->loop, &r->slow_w);
	else
		ev_timer_stop(r->loop, &r->slow_w);
}

static void set_polling(struct nvme_reactor *r, bool on)
{
	if (on == r->polling)
		return;
	r->polling = on;
	if (r->wep >= 0)
		return; /* own wait: libev never sleeps, its idle watcher stays on */
	if (on)
		ev_idle_start(r->loop, &r->idle_w);
	else
		ev_idle_stop(r->loop, &r->idle_w);
}

/* Ring the SQ doorbells that have news: whether any was rung. */
static bool flush_all(struct nvme_reactor *r)
{
	bool rung = false;

	for (unsigned i = 0; i < r->nqps; i++)
		rung |= nvme_qpair_flush_sq(r->qps[i]);
	return rung;
}

/* Right after the doorbells, for a transport that sends its answers in the
 * flush hook (FUSE over io_uring): a device that completed at once (the
 * software controller executes inline, on the doorbell) is reaped and its
 * answers go out in this pass, not after one more trip through the loop (a
 * zero-timeout epoll_wait per request at QD1).  Over /dev/fuse, which
 * answers from the completion callback, only in a pass that woke from a
 * sleep in the reactor's own wait (nothing else in flight: QD1's case):
 * reaping after every pass's doorbells cost 5-8% of 4K IOPS at QD32x2
 * there, the shorter passes reading fewer requests per wake.  A real
 * device has rarely answered this soon: the cost is a clock read and a
 * look at each busy CQ's next entry.  Each queue can so be reaped twice in
 * a pass (within its budget each time; both count in reap_passes). */
static bool reap_rung(struct nvme_reactor *r)
{
	unsigned got = 0;

	r->now_ns = nvme_now_ns(); /* completion latencies include the device's time */
	for (unsigned i = 0; i < r->nqps; i++)
		if (r->qps[i]->inflight && !r->qps[i]->quarantined)
			got += nvme_qpair_reap(r->qps[i], 0);
	r->worked |= got != 0;
	return got != 0;
}

/* The time since the mark is busy or idle (see mark_ns); now is the new
 * mark. */
static void account(struct nvme_reactor *r, uint64_t now)
{
	if (r->mark_ns && now > r->mark_ns) {
		if (r->mark_busy)
			STAT_ADD(r->st.busy_ns, now - r->mark_ns);
		else
			STAT_ADD(r->st.idle_ns, now - r->mark_ns);
	}
	r->mark_ns = now;
}

/* The start of a pass (ev_check, or the own wait's loop in prepare_cb). */
static void begin_pass(struct nvme_reactor *r)
{
	r->now_ns = nvme_now_ns(); /* one clock read per pass, shared by every I/O in it */
	account(r, r->now_ns);
	r->in_pass = true;
	r->worked = false;
	STAT_INC(r->st.passes);
	if (r->hook)
		r->hook(r->hook_arg);
	unsigned n = r->nqps;
	if (n == 0)
		return;
	/* round robin: a different qpair goes first each pass, each gets at most
	 * its budget, so a flooded queue cannot starve the others */
	unsigned start = r->rr++ % n;
	for (unsigned k = 0; k < n; k++) {
		struct nvme_qpair *qp = r->qps[(start + k) % n];
		unsigned got = 0;
		if (r->mode == NVME_MODE_INTERRUPT) {
			if (qp->napi_polling && (got = nvme_qpair_reap(qp, 0)) < qp->cq_budget)
				qp->napi_polling = false;
		} else if (r->polling || r->slow_poll) {
			got = nvme_qpair_reap(qp, 0);
		}
		r->worked |= got != 0;
	}
}

/* The wait fd polled readable: its owner reads it, after the reaping. */
static void wait_fd_cb(struct nvme_reactor *r)
{
	r->wfd_ready = false;
	if (r->wfd >= 0)
		r->wfd_fn(r->wfd_arg);
}

static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nvme_reactor *r = w->data;

	begin_pass(r);
	if (r->wfd_ready)
		wait_fd_cb(r);
}

static void drain_calls(struct nvme_reactor *r)
{
	struct nvme_call *c;
	while ((c = mpsc_pop(r)) != NULL) {
		STAT_INC(r->st.calls);
		r->worked = true;
		c->fn(c->arg);
		free(c);
	}
}

/* The end of a pass (ev_prepare, or the own wait's loop): false when the
 * loop ends. */
static bool end_pass(struct nvme_reactor *r)
{
	bool stopping = atomic_load_explicit(&r->stop, memory_order_acquire);
	/* calls queued before the stop request still run (they may submit) */
	if (stopping)
		drain_calls(r);
	if (r->flush_hook)
		r->flush_hook(r->flush_hook_arg);
	/* the one SQ tail doorbell per queue per pass */
	bool rung = flush_all(r);
	unsigned inflight = total_inflight(r);
	if (rung && inflight && (r->flush_hook || r->woke) && r->mode != NVME_MODE_INTERRUPT &&
	    r->in_pass && reap_rung(r)) {
		/* what those completions answered goes out in this pass too */
		if (r->flush_hook)
			r->flush_hook(r->flush_hook_arg);
		flush_all(r);
		inflight = total_inflight(r);
	}
	if (r->st.passes == 0) {
		/* the first pass runs at once (its hook may have work) in every mode */
		set_polling(r, true);
	} else if (r->mode == NVME_MODE_HYBRID) {
		bool stalled, due = hybrid_due(r, &stalled);
		set_polling(r, due);
		set_slow_poll(r, !due && stalled);
	} else if (r->mode == NVME_MODE_INTERRUPT) {
		bool any = false;
		for (unsigned i = 0; i < r->nqps; i++)
			any |= r->qps[i]->napi_polling;
		set_polling(r, any);
	}
	if (stopping && inflight == 0) {
		r->in_pass = false; /* whoever asks for the time now reads the clock */
		ev_break(r->loop, EVBREAK_ALL);
		return false;
	}
	if (!r->polling)
		STAT_INC(r->st.sleeps);
	if (!r->in_pass)
		return true; /* the loop's first prepare comes before any check */
	r->in_pass = false;
	if (r->worked)
		STAT_INC(r->st.busy_passes);
	r->mark_busy = r->worked; /* the mark is this pass's clock (check_cb) */
	if (r->polling)
		return true; /* the next pass's clock read ends this one */
	/* about to sleep: the pass ends now, the sleep is idle */
	account(r, nvme_now_ns());
	r->mark_busy = false;
	return true;
}

/* ---- the reactor's own wait ----
 * libev registers an fd itself and changes it with EPOLL_CTL_MOD, which an
 * EPOLLEXCLUSIVE entry refuses; an epoll watched from libev's epoll loses
 * the exclusivity (the kernel counts an exclusive wake-up only for a thread
 * sleeping in that very epoll); and this libev does not give its epoll's fd
 * out.  So with a wait fd the thread sleeps in an epoll of the reactor's
 * own (wep) that holds the wait fd, EPOLLEXCLUSIVE, and the fds of the
 * reactor's own watchers (the call eventfd, and in interrupt mode each
 * queue's interrupt eventfd), whose callbacks it runs itself (ev_invoke):
 * of the reactors sleeping on the same file (the FUSE session's /dev/fuse)
 * the kernel wakes one per event, as it wakes one of the threads blocked in
 * read(2) on it.  libev then never sleeps (its idle watcher stays on) and
 * runs an iteration only when the reactor's timer is due; every other pass
 * runs right here: end of pass, wait, start of pass, the ready watchers,
 * the fd's callback, end of pass, ...  A pass costs one epoll_wait, as
 * under libev.  What that asks of the loop's other users: no watchers of
 * their own (nvme.h). */

/* When the reactor's timer is due, from libev's view of it (at the start of
 * a libev iteration's prepare, its clock is this pass's). */
static void own_deadline(struct nvme_reactor *r)
{
	uint64_t base = r->now_ns ? r->now_ns : nvme_now_ns();
	double left = ev_is_active(&r->timer_w) ? ev_timer_remaining(r->loop, &r->timer_w) : 1e9;

	r->wdeadline = base + (left > 0 ? (uint64_t)(left * 1e9) : 0);
	if (r->slow_poll && r->wdeadline > base + HYBRID_SLOW_NS)
		r->wdeadline = base + HYBRID_SLOW_NS;
}

/* A wait that took this long slept (a wait that finds an event at once
 * returns in a system call's time, a few us at most): the next pass "woke"
 * (nvme_reactor_woke). */
#define WOKE_NS 20000

/* Sleep in the own wait (polling: look without sleeping).  true: the next
 * pass runs here, with the watchers in wio[] ready and wfd_ready set when
 * the wait fd polled readable, and *slept_from the clock before a wait that
 * could sleep (0: a polling look); false: libev runs an iteration first
 * (the timer is due, or the wait failed). */
static bool own_wait(struct nvme_reactor *r, uint64_t *slept_from)
{
	struct epoll_event ev[NVME_OWN_EVENTS];
	int timeout = 0, n;

	r->nwio = 0;
	*slept_from = 0;
	if (!r->polling) {
		uint64_t now = nvme_now_ns();

		*slept_from = now;
		if (now >= r->wdeadline)
			return false;
		uint64_t ms = (r->wdeadline - now + 999999) / 1000000;
		timeout = ms > INT_MAX ? INT_MAX : (int)ms;
	} else if (r->now_ns >= r->wdeadline) {
		return false;
	}
	n = epoll_wait(r->wep, ev, NVME_OWN_EVENTS, timeout);
	if (n <= 0)
		return n == 0 && r->polling; /* slept to the timer, or EINTR: libev */
	for (int i = 0; i < n; i++) {
		if (ev[i].data.ptr)
			r->wio[r->nwio++] = ev[i].data.ptr;
		else
			r->wfd_ready = true;
	}
	return true;
}

/* Watch w in libev and, with an own wait, in it too. */
static void watch_start(struct nvme_reactor *r, ev_io *w)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = w};

	ev_io_start(r->loop, w);
	if (r->wep >= 0 && epoll_ctl(r->wep, EPOLL_CTL_ADD, w->fd, &e) < 0)
		log_err("reactor %u: watching fd %d in its own wait: %s", r->opts.id, w->fd,
		        strerror(errno));
}

static void watch_stop(struct nvme_reactor *r, ev_io *w)
{
	ev_io_stop(r->loop, w);
	if (r->wep < 0)
		return;
	if (epoll_ctl(r->wep, EPOLL_CTL_DEL, w->fd, NULL) < 0)
		log_err("reactor %u: taking fd %d out of its own wait: %s", r->opts.id, w->fd,
		        strerror(errno));
	/* not invoked later in this pass (its owner may be gone by then) */
	for (unsigned i = 0; i < r->nwio; i++)
		if (r->wio[i] == w)
			r->wio[i] = NULL;
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nvme_reactor *r = w->data;
	uint64_t slept_from;

	r->woke = false;
	if (!end_pass(r) || r->wep < 0)
		return;
	own_deadline(r);
	while (own_wait(r, &slept_from)) {
		begin_pass(r);
		r->woke = slept_from && r->now_ns - slept_from >= WOKE_NS;
		/* in libev's order: the check watcher, then the ready fds */
		for (unsigned i = 0; i < r->nwio; i++)
			if (r->wio[i])
				ev_invoke(r->loop, r->wio[i], EV_READ);
		r->nwio = 0;
		if (r->wfd_ready)
			wait_fd_cb(r);
		if (!end_pass(r))
			return;
		r->woke = false;
	}
}

void nvme_reactor_note_work(struct nvme_reactor *r)
{
	r->worked = true;
}

uint64_t nvme_reactor_clock(struct nvme_reactor *r)
{
	return nvme_reactor_now(r);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	/* its being active is the point: the loop polls instead of blocking */
	(void)loop;
	(void)w;
	(void)revents;
}

static void slow_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	/* it ends libev's sleep: the pass that follows reaps (begin_pass) */
	(void)loop;
	(void)w;
	(void)revents;
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nvme_qpair *qp = w->data;
	struct nvme_reactor *r = qp->reactor;
	uint64_t v;
	if (read(qp->efd, &v, sizeof(v)) != sizeof(v))
		return; /* spurious: another pass already consumed it */
	STAT_INC(qp->st.interrupts);
	STAT_INC(r->st.wakeups);
	r->worked = true;
	if (nvme_qpair_reap(qp, 0) >= qp->cq_budget && r->mode == NVME_MODE_INTERRUPT) {
		/* more may be waiting: keep reaping on the next passes, fairly */
		qp->napi_polling = true;
	}
}

static void call_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nvme_reactor *r = w->data;
	uint64_t v;

	/* consumed, then cleared: a call pushed after the clear writes again;
	 * one pushed before it is drained below (the exchange orders them) */
	if (read(r->call_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("reactor %u: reading its call eventfd: %s", r->opts.id, strerror(errno));
	atomic_exchange_explicit(&r->call_wake, false, memory_order_acq_rel);
	drain_calls(r);
}

/* Wake the loop for a call or the stop request: one eventfd write per
 * wake-up. */
static void wake(struct nvme_reactor *r)
{
	uint64_t one = 1;

	if (atomic_exchange_explicit(&r->call_wake, true, memory_order_acq_rel))
		return;
	if (write(r->call_efd, &one, sizeof(one)) < 0)
		log_err("reactor %u: waking it: %s", r->opts.id, strerror(errno));
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nvme_reactor *r = w->data;
	uint64_t now = nvme_now_ns();
	for (unsigned i = 0; i < r->nqps; i++) {
		struct nvme_qpair *qp = r->qps[i];
		if (qp->inflight)
			nvme_qpair_check_timeouts(qp, now);
		/* CSTS: fatal status or a device gone (rate limited per controller) */
		if (qp->held != QP_DEAD)
			recov_check_health(qp->ctrl, now);
	}
}

static void retune_timer(struct nvme_reactor *r)
{
	double tick = 0.25; /* the health check's CSTS interval */
	for (unsigned i = 0; i < r->nqps; i++) {
		double t = r->qps[i]->io_timeout_ms / 4000.0;
		if (t < tick)
			tick = t;
	}
	if (tick < 0.01)
		tick = 0.01;
	r->timer_w.repeat = tick;
	ev_timer_again(r->loop, &r->timer_w);
}

/* ---- public ---- */

int nvme_reactor_create(const struct nvme_reactor_opts *o, struct nvme_reactor **out)
{
	int node = -1;
	if (o->numa && o->cpu >= 0 && numa_available() >= 0)
		node = numa_node_of_cpu(o->cpu);
	struct nvme_reactor *r = nvme_mem_alloc(sizeof(*r), node);
	if (!r)
		return -ENOMEM;
	int rc;
	r->opts = *o;
	r->node = node;
	r->mode = o->mode;
	r->wep = r->wfd = -1;
	r->call_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->call_efd < 0) {
		rc = -errno;
		log_err("reactor %u: cannot make its call eventfd: %s", o->id, strerror(-rc));
		goto err;
	}
	/* NOSIGMASK: the loop has no signal watchers; signals belong to the
	 * daemon's main thread and stay blocked in reactor threads */
	r->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!r->loop) {
		rc = -ENOMEM;
		goto err;
	}
	/* under isolation each controller's pool is made by its first qpair */
	if (!o->dma_isolation) {
		rc = nvme_pool_create(o->buf_pool_bytes ? o->buf_pool_bytes : DEFAULT_POOL_BYTES,
		                      node, &r->pool);
		if (rc < 0) {
			log_err("reactor %u: cannot allocate its DMA buffer pool: %s", o->id,
			        strerror(-rc));
			goto err_loop;
		}
	}
	atomic_store(&r->q_stub.next, NULL);
	atomic_store(&r->q_head, &r->q_stub);
	r->q_tail = &r->q_stub;

	ev_set_userdata(r->loop, r);
	ev_check_init(&r->check_w, check_cb);
	ev_prepare_init(&r->prepare_w, prepare_cb);
	ev_idle_init(&r->idle_w, idle_cb);
	ev_io_init(&r->call_w, call_cb, r->call_efd, EV_READ);
	ev_init(&r->timer_w, timer_cb);
	ev_init(&r->slow_w, slow_cb);
	r->slow_w.repeat = HYBRID_SLOW_NS / 1e9;
	r->check_w.data = r->prepare_w.data = r->idle_w.data = r->call_w.data = r->timer_w.data = r;
	ev_check_start(r->loop, &r->check_w);
	ev_prepare_start(r->loop, &r->prepare_w);
	watch_start(r, &r->call_w);
	retune_timer(r);
	if (r->mode == NVME_MODE_POLL)
		set_polling(r, true);
	*out = r;
	return 0;
err_loop:
	ev_loop_destroy(r->loop);
err:
	if (r->call_efd >= 0)
		close(r->call_efd);
	nvme_mem_free(r, sizeof(*r));
	return rc;
}

int nvme_reactor_attach(struct nvme_reactor *r, struct nvme_qpair *qp)
{
	if (r->nqps == NVME_REACTOR_MAX_QPAIRS)
		return -ENOSPC;
	r->qps[r->nqps++] = qp;
	if (qp->efd >= 0) {
		ev_io_init(&qp->io_w, io_cb, qp->efd, EV_READ);
		qp->io_w.data = qp;
		if (r->mode == NVME_MODE_INTERRUPT) {
			watch_start(r, &qp->io_w);
			qp->io_active = true;
		}
	} else if (r->mode == NVME_MODE_INTERRUPT) {
		log_warn("reactor %u: %s has no interrupt; the reactor falls back to polling",
		         r->opts.id, qp->name);
		r->mode = NVME_MODE_POLL;
		for (unsigned i = 0; i < r->nqps - 1; i++) {
			struct nvme_qpair *o = r->qps[i];
			if (o->io_active) {
				watch_stop(r, &o->io_w);
				o->io_active = false;
			}
		}
		set_polling(r, true);
	}
	retune_timer(r);
	return 0;
}

void nvme_reactor_detach(struct nvme_reactor *r, struct nvme_qpair *qp)
{
	if (qp->io_active) {
		watch_stop(r, &qp->io_w);
		qp->io_active = false;
	}
	for (unsigned i = 0; i < r->nqps; i++) {
		if (r->qps[i] == qp) {
			r->qps[i] = r->qps[--r->nqps];
			break;
		}
	}
}

int nvme_reactor_ctrl_pool(struct nvme_reactor *r, struct nvme_ctrl *c,
                           struct nvme_buf_pool **out)
{
	if (!r->opts.dma_isolation) {
		*out = r->pool;
		return 0;
	}
	for (unsigned i = 0; i < r->ncpools; i++)
		if (r->cpools[i].ctrl == c) {
			*out = r->cpools[i].pool;
			return 0;
		}
	if (r->ncpools == NVME_REACTOR_MAX_QPAIRS)
		return -ENOSPC;
	size_t bytes = r->opts.buf_pool_bytes ? r->opts.buf_pool_bytes : DEFAULT_POOL_BYTES;
	int rc = nvme_pool_create(bytes, r->node, out);
	if (rc < 0) {
		log_err("reactor %u: cannot allocate the DMA buffer pool of %s (%zu bytes): %s",
		        r->opts.id, nvme_ctrl_name(c), bytes, strerror(-rc));
		return rc;
	}
	r->cpools[r->ncpools].ctrl = c;
	r->cpools[r->ncpools].pool = *out;
	r->ncpools++;
	return 0;
}

/* The pool holding buf (NULL: none of r's). */
static struct nvme_buf_pool *pool_of(struct nvme_reactor *r, const void *buf, size_t len)
{
	if (r->pool)
		return nvme_pool_contains(r->pool, buf, len) ? r->pool : NULL;
	for (unsigned i = 0; i < r->ncpools; i++)
		if (nvme_pool_contains(r->cpools[i].pool, buf, len))
			return r->cpools[i].pool;
	return NULL;
}

struct ev_loop *nvme_reactor_loop(struct nvme_reactor *r)
{
	return r->loop;
}

unsigned nvme_reactor_id(const struct nvme_reactor *r)
{
	return r->opts.id;
}

int nvme_reactor_cpu(const struct nvme_reactor *r)
{
	return r->opts.cpu;
}

int nvme_reactor_node(const struct nvme_reactor *r)
{
	return r->node;
}

enum nvme_poll_mode nvme_reactor_mode(const struct nvme_reactor *r)
{
	return r->mode;
}

void nvme_reactor_set_pass_hook(struct nvme_reactor *r, void (*fn)(void *arg), void *arg)
{
	r->hook = fn;
	r->hook_arg = arg;
}

void nvme_reactor_set_flush_hook(struct nvme_reactor *r, void (*fn)(void *arg), void *arg)
{
	r->flush_hook = fn;
	r->flush_hook_arg = arg;
}

/* The own wait, holding the reactor's own watchers (own_wait). */
static int own_wait_create(struct nvme_reactor *r)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &r->call_w};
	int ep = epoll_create1(EPOLL_CLOEXEC), rc;

	if (ep < 0)
		return -errno;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, r->call_efd, &e) < 0)
		goto err;
	for (unsigned i = 0; i < r->nqps; i++) {
		struct nvme_qpair *qp = r->qps[i];

		e.data.ptr = &qp->io_w;
		if (qp->io_active && epoll_ctl(ep, EPOLL_CTL_ADD, qp->efd, &e) < 0)
			goto err;
	}
	r->wep = ep;
	/* libev must not sleep: the thread sleeps in the own wait */
	if (!ev_is_active(&r->idle_w))
		ev_idle_start(r->loop, &r->idle_w);
	return 0;
err:
	rc = -errno;
	close(ep);
	return rc;
}

int nvme_reactor_wait_fd(struct nvme_reactor *r, int fd, void (*fn)(void *arg), void *arg)
{
	struct epoll_event e = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
	bool made = false;
	int rc;

	if (r->wfd >= 0)
		return -EBUSY;
	if (r->wep < 0) {
		rc = own_wait_create(r);
		if (rc < 0)
			return rc;
		made = true;
	}
	if (epoll_ctl(r->wep, EPOLL_CTL_ADD, fd, &e) < 0) {
		rc = -errno;
		if (made) {
			/* as before: libev sleeps */
			close(r->wep);
			r->wep = -1;
			if (!r->polling)
				ev_idle_stop(r->loop, &r->idle_w);
		}
		return rc;
	}
	r->wfd = fd;
	r->wfd_fn = fn;
	r->wfd_arg = arg;
	return 0;
}

bool nvme_reactor_woke(const struct nvme_reactor *r)
{
	return r->woke;
}

void nvme_reactor_wait_fd_off(struct nvme_reactor *r)
{
	if (r->wfd < 0)
		return;
	if (epoll_ctl(r->wep, EPOLL_CTL_DEL, r->wfd, NULL) < 0)
		log_err("reactor %u: taking fd %d out of its wait: %s", r->opts.id, r->wfd,
		        strerror(errno));
	r->wfd = -1;
	r->wfd_ready = false;
}

static void pin_self(struct nvme_reactor *r)
{
	if (r->opts.cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(r->opts.cpu, &set);
	int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc != 0)
		log_warn("reactor %u: cannot pin to CPU %d: %s", r->opts.id, r->opts.cpu,
		         strerror(rc));
}

/* The loop has ended: from now on nvme_reactor_call refuses (-ESHUTDOWN),
 * and the calls that got in before run here, so none is lost.  A caller
 * between its check of exited and its push is waited for (callers). */
static void reactor_exit(struct nvme_reactor *r)
{
	atomic_store(&r->exited, true);
	while (atomic_load(&r->callers))
		sched_yield();
	drain_calls(r);
	/* a caller refused now may touch the qpairs itself: not before the
	 * calls queued ahead of it have run (order is kept) */
	atomic_store(&r->drained, true);
}

static void *reactor_main(void *arg)
{
	struct nvme_reactor *r = arg;
	pin_self(r);
	ev_run(r->loop, 0);
	reactor_exit(r);
	return NULL;
}

int nvme_reactor_start(struct nvme_reactor *r)
{
	if (r->thread_started)
		return -EALREADY;
	atomic_store(&r->drained, false);
	atomic_store(&r->exited, false);
	sigset_t all, old;
	sigfillset(&all);
	/* the thread inherits a fully blocked mask: no signal lands mid-pass */
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&r->thread, NULL, reactor_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_err("reactor %u: cannot start its thread: %s", r->opts.id, strerror(rc));
		return -rc;
	}
	r->thread_started = true;
	char name[16];
	snprintf(name, sizeof(name), "nvme-r%u", r->opts.id);
	pthread_setname_np(r->thread, name);
	return 0;
}

int nvme_reactor_run(struct nvme_reactor *r)
{
	pin_self(r);
	atomic_store(&r->drained, false);
	atomic_store(&r->exited, false);
	ev_run(r->loop, 0);
	reactor_exit(r);
	return 0;
}

int nvme_reactor_call(struct nvme_reactor *r, void (*fn)(void *arg), void *arg)
{
	atomic_fetch_add(&r->callers, 1);
	if (atomic_load(&r->exited)) {
		atomic_fetch_sub(&r->callers, 1);
		while (!atomic_load(&r->drained))
			sched_yield();
		return -ESHUTDOWN;
	}
	struct nvme_call *c = malloc(sizeof(*c));
	if (!c) {
		atomic_fetch_sub(&r->callers, 1);
		return -ENOMEM;
	}
	c->fn = fn;
	c->arg = arg;
	mpsc_push(r, c);
	wake(r);
	atomic_fetch_sub(&r->callers, 1);
	return 0;
}

void nvme_reactor_stop(struct nvme_reactor *r)
{
	atomic_store_explicit(&r->stop, true, memory_order_release);
	wake(r);
}

void nvme_reactor_join(struct nvme_reactor *r)
{
	if (r->thread_started) {
		pthread_join(r->thread, NULL);
		r->thread_started = false;
	}
}

int nvme_reactor_join_timeout(struct nvme_reactor *r, unsigned timeout_ms)
{
	if (!r->thread_started)
		return 0;
	if (timeout_ms == 0) {
		nvme_reactor_join(r);
		return 0;
	}
	/* pthread_timedjoin_np takes CLOCK_REALTIME: a jump of the wall clock
	 * can only lengthen or shorten this last-resort wait */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	if (pthread_timedjoin_np(r->thread, NULL, &ts) != 0)
		return -ETIMEDOUT;
	r->thread_started = false;
	return 0;
}

void nvme_reactor_destroy(struct nvme_reactor *r)
{
	if (!r)
		return;
	if (r->nqps)
		log_warn("reactor %u: destroyed with %u qpair(s) still attached", r->opts.id,
		         r->nqps);
	struct nvme_call *c;
	while ((c = mpsc_pop(r)) != NULL)
		free(c);
	ev_loop_destroy(r->loop);
	if (r->wep >= 0)
		close(r->wep);
	close(r->call_efd);
	nvme_pool_destroy(r->pool);
	for (unsigned i = 0; i < r->ncpools; i++)
		nvme_pool_destroy(r->cpools[i].pool);
	nvme_mem_free(r, sizeof(*r));
}

bool nvme_reactor_buf_common(const struct nvme_reactor *r)
{
	return r->pool || r->ncpools == 1;
}

void *nvme_reactor_buf_alloc(struct nvme_reactor *r, size_t len)
{
	if (r->pool)
		return nvme_pool_alloc(r->pool, len);
	return r->ncpools == 1 ? nvme_pool_alloc(r->cpools[0].pool, len) : NULL;
}

void nvme_reactor_buf_free(struct nvme_reactor *r, void *buf, size_t len)
{
	if (!buf)
		return;
	struct nvme_buf_pool *p = pool_of(r, buf, nvme_pool_block_size(len));
	if (!p) {
		log_err("reactor %u: freeing %p, which is in none of its pools", r->opts.id, buf);
		return;
	}
	nvme_pool_free(p, buf, len);
}

size_t nvme_reactor_buf_size(size_t len)
{
	return nvme_pool_block_size(len);
}

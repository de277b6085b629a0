/* sim_offload.c - the software controller's copy thread (opts.offload,
 * inline mode; see sim.h and sim_priv.h).
 *
 * Inline, a command executes on the thread that rang its queue's doorbell:
 * for a reactor that is its own CPU, so one stream of large requests from
 * one CPU is copied there while the other CPUs idle.  A device's front end
 * fetches commands while its DMA engine moves the data of earlier ones;
 * this is that engine.  The executor of a queue hands it a large Write
 * (sim_offload_take) and goes on fetching; the copy thread executes the
 * command, pushes it onto the queue's done stack and asks for it to be
 * posted (sim_q_done): by whoever executes that queue then, which may be
 * the copy thread itself.  The CQ keeps room for what was handed over
 * (qx[].inflight), so a finished command never waits for a slot the host
 * could not have freed.
 *
 * The copy thread is useful only while a CPU is free to run it.  So one
 * command waits for it at a time, and the executor takes back what it has
 * not started by the end of the pass (sim_offload_back): with every CPU
 * busy a large write costs a hand-over and a take-back, not a wait for the
 * scheduler.
 *
 * An exclusive runner (register writes, resets, faults, the admin queue)
 * first waits until the copy thread has nothing queued or executing
 * (sim_offload_quiesce); on the copy thread itself, which becomes one when
 * it posts while nobody else runs, it executes what is queued instead of
 * waiting for itself.  A queue deleted or reset drops what was finished for
 * it (sim_offload_drop): the host gave those commands up.
 */
#include "sim_priv.h"

#include <errno.h>
#include <stdlib.h>

#define SIM_OFFLOAD_SPIN_NS 1000000 /* sim.h: spin this long idle, then sleep */

static void sim_offload_free(struct sim_offload *off, struct sim_offload_cmd *first,
                             struct sim_offload_cmd *last);

/* true on the copy thread (sim_offload_quiesce must not wait for itself) */
static __thread bool sim_offload_self;

bool sim_offload_take(struct sim *s, uint16_t qid, const struct nvme_sqe *c)
{
	struct sim_offload *off = &s->off;
	struct sim_offload_cmd *cmd;

	/* writes only: a read's data ends in the buffer the host's kernel
	 * then copies on the reactor's CPU, so copying it on another moves
	 * the same lines twice (reads gained nothing, bench/RESULTS.md); a
	 * write's two copies (data and pre-image) read the buffer once */
	if (!off->started || c->opc != NVME_CMD_WRITE || c->nsid == 0 || c->nsid > s->o.nr_ns)
		return false;
	const struct sim_ns *ns = &s->ns[c->nsid - 1];
	/* the null namespace moves nothing: a hand-over would cost more */
	if (!ns->active || ns->backing == SIM_BACKING_NULL ||
	    ((size_t)(c->cdw12 & 0xffff) + 1u) << ns->lba_shift < s->o.offload)
		return false;
	pthread_mutex_lock(&off->lock);
	/* one command waiting at a time: while the copy thread has not taken
	 * the last one it has no CPU to spare, and this thread would only
	 * take it back (sim_offload_back) */
	cmd = off->head ? NULL : off->free;
	if (cmd) {
		off->free = cmd->next;
		*cmd = (struct sim_offload_cmd){.sqe = *c, .qid = qid};
		if (off->tail)
			off->tail->next = cmd;
		else
			off->head = cmd;
		off->tail = cmd;
		atomic_fetch_add(&off->busy, 1);
		if (off->sleeping)
			pthread_cond_signal(&off->cond);
	}
	pthread_mutex_unlock(&off->lock);
	return cmd != NULL;
}

/* The oldest queued command, NULL when none; wait: sleep until one comes
 * or the thread is to stop. */
static struct sim_offload_cmd *sim_offload_pop(struct sim_offload *off, bool wait)
{
	struct sim_offload_cmd *c;

	pthread_mutex_lock(&off->lock);
	while (wait && !off->head && !off->stop) {
		off->sleeping = true;
		pthread_cond_wait(&off->cond, &off->lock);
		off->sleeping = false;
	}
	c = off->head;
	if (c) {
		off->head = c->next;
		if (!off->head)
			off->tail = NULL;
	}
	pthread_mutex_unlock(&off->lock);
	return c;
}

/* Execute a command handed over, as thread xid of the namespaces' overlap
 * table; its status, failures counted and logged. */
static uint16_t sim_offload_io(struct sim *s, uint16_t qid, const struct nvme_sqe *c, unsigned xid)
{
	struct sim_sq *sq = &s->sq[qid];

	if (s->o.io_hook)
		s->o.io_hook(s->o.hook_arg, qid, c);
	uint16_t status = sim_io(s, sq, c, xid);
	if (status)
		sim_cmd_failed(s, qid, sq, c, status);
	return status;
}

/* Execute c and push it onto its queue's done stack.  c belongs to the
 * queue's executor from the push on: read nothing of it afterwards. */
static void sim_offload_exec(struct sim *s, struct sim_offload_cmd *c)
{
	struct sim_sq *sq = &s->sq[c->qid];
	struct sim_qexec *x = &s->qx[c->qid];

	c->status = sim_offload_io(s, c->qid, &c->sqe, SIM_OFFLOAD_XID);
	SIM_INC(sq->st.offloaded, 1);
	c->next = atomic_load_explicit(&x->done, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&x->done, &c->next, c, memory_order_release,
	                                              memory_order_relaxed))
		;
	/* after the push: an exclusive runner that sees busy 0 finds it */
	atomic_fetch_sub(&s->off.busy, 1);
}

unsigned sim_offload_back(struct sim *s, uint16_t qid)
{
	struct sim_offload *off = &s->off;
	struct sim_offload_cmd *mine = NULL, **tail = &mine, **pp, *c, *last = NULL;
	unsigned n = 0;

	pthread_mutex_lock(&off->lock);
	for (pp = &off->head; (c = *pp);) {
		if (c->qid != qid) {
			last = c;
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		c->next = NULL;
		*tail = c;
		tail = &c->next;
		n++;
	}
	off->tail = last;
	if (n) {
		atomic_fetch_sub(&off->busy, n);
		atomic_fetch_add_explicit(&off->backs, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&off->lock);
	if (!n)
		return 0;

	struct sim_sq *sq = &s->sq[qid];
	struct sim_qexec *x = &s->qx[qid];
	for (c = mine; c; c = c->next) {
		last = c;
		uint16_t status = sim_offload_io(s, qid, &c->sqe, qid);
		/* the CQ kept a slot for it since the hand-over */
		sim_complete(s, qid, sq, c->sqe.cid, status, 0, true);
		x->inflight--;
		SIM_INC(sq->st.offload_back, 1);
	}
	sim_offload_free(off, mine, last);
	return n;
}

static void *sim_offload_thread(void *arg)
{
	struct sim *s = arg;
	struct sim_offload *off = &s->off;
	struct sim_offload_cmd *c;

	sim_offload_self = true;
	for (;;) {
		/* spin a while before sleeping: a stream's next command comes
		 * within microseconds, a wake-up costs tens of them.  Yielding,
		 * and not at all once a command was taken back: then the CPUs
		 * are busy, and the spin would take time from the threads that
		 * hand the commands over */
		unsigned backs = atomic_load_explicit(&off->backs, memory_order_relaxed);
		uint64_t until = sim_now_ns() + SIM_OFFLOAD_SPIN_NS;
		while (!atomic_load_explicit(&off->busy, memory_order_relaxed) &&
		       atomic_load_explicit(&off->backs, memory_order_relaxed) == backs &&
		       sim_now_ns() < until)
			sched_yield();
		if (!(c = sim_offload_pop(off, true)))
			break;
		uint16_t qid = c->qid;
		sim_offload_exec(s, c);
		sim_q_done(s, qid);
	}
	return NULL;
}

void sim_offload_quiesce(struct sim *s)
{
	struct sim_offload *off = &s->off;
	struct sim_offload_cmd *c;

	if (!off->started)
		return;
	if (sim_offload_self) {
		while ((c = sim_offload_pop(off, false)))
			sim_offload_exec(s, c);
		return;
	}
	while (atomic_load(&off->busy))
		sched_yield();
}

/* Give a chain of commands back to the free list. */
static void sim_offload_free(struct sim_offload *off, struct sim_offload_cmd *first,
                             struct sim_offload_cmd *last)
{
	pthread_mutex_lock(&off->lock);
	last->next = off->free;
	off->free = first;
	pthread_mutex_unlock(&off->lock);
}

/* Move qid's done stack (newest first) to the end of its held list. */
static void sim_offload_collect(struct sim_qexec *x)
{
	struct sim_offload_cmd *d, *r = NULL, *last;

	d = atomic_exchange_explicit(&x->done, NULL, memory_order_acquire);
	if (!d)
		return;
	last = d;
	while (d) {
		struct sim_offload_cmd *n = d->next;
		d->next = r;
		r = d;
		d = n;
	}
	if (x->held_tail)
		x->held_tail->next = r;
	else
		x->held = r;
	x->held_tail = last;
}

unsigned sim_offload_reap(struct sim *s, uint16_t qid)
{
	struct sim_qexec *x = &s->qx[qid];
	struct sim_offload_cmd *first = NULL, *last = NULL;
	unsigned n = 0;

	if (!x->held && !atomic_load_explicit(&x->done, memory_order_relaxed))
		return 0;
	sim_offload_collect(x);
	struct sim_sq *sq = &s->sq[qid];
	struct sim_cq *cq = &s->cq[sq->cqid];
	while (x->held && !sim_cq_full(cq, 1)) {
		struct sim_offload_cmd *c = x->held;

		x->held = c->next;
		if (!x->held)
			x->held_tail = NULL;
		sim_complete(s, qid, sq, c->sqe.cid, c->status, 0, true);
		x->inflight--;
		n++;
		c->next = first;
		first = c;
		if (!last)
			last = c;
	}
	if (first)
		sim_offload_free(&s->off, first, last);
	return n;
}

unsigned sim_offload_drop(struct sim *s, uint16_t qid)
{
	struct sim_qexec *x = &s->qx[qid];
	unsigned n = 0;

	sim_offload_collect(x);
	if (x->held) {
		struct sim_offload_cmd *last = x->held;
		for (n = 1; last->next; n++)
			last = last->next;
		sim_offload_free(&s->off, x->held, last);
	}
	x->held = x->held_tail = NULL;
	x->inflight = 0;
	return n;
}

int sim_offload_start(struct sim *s)
{
	struct sim_offload *off = &s->off;
	int rc;

	if (!s->o.offload || s->o.threaded)
		return 0;
	off->ent = calloc(SIM_OFFLOAD_SLOTS, sizeof(*off->ent));
	if (!off->ent)
		return -ENOMEM;
	for (unsigned i = 0; i < SIM_OFFLOAD_SLOTS; i++)
		off->ent[i].next = i + 1 < SIM_OFFLOAD_SLOTS ? &off->ent[i + 1] : NULL;
	off->free = &off->ent[0];
	if ((rc = -pthread_create(&off->thread, NULL, sim_offload_thread, s)))
		return rc;
	pthread_setname_np(off->thread, "nvmefs-copy");
	off->started = true;
	return 0;
}

void sim_offload_stop(struct sim *s)
{
	struct sim_offload *off = &s->off;

	if (off->started) {
		pthread_mutex_lock(&off->lock);
		off->stop = true;
		pthread_cond_signal(&off->cond);
		pthread_mutex_unlock(&off->lock);
		pthread_join(off->thread, NULL);
		off->started = false;
	}
	free(off->ent);
	off->ent = NULL;
}

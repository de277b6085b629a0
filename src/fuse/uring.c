/* uring.c - the io_uring transport (see uring.h). */
#include "uring.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "channel.h"
#include "fsio.h"
#include "fsops.h"
#include "fwire.h"
#include "log.h"
#include "cpumap.h"
#include "nvme.h"

#define RETRY_S 0.01 /* REGISTER before the kernel has taken INIT: again soon */
#define ONLINE_S 1.0 /* how often an offline CPU's queue looks whether it came online */

enum ent_state {
	ENT_UNUSED,  /* no payload: its CPU was offline (cpumap_queue_entries) */
	ENT_IDLE,    /* not with the kernel: to be registered */
	ENT_KERNEL,  /* registered or answered-and-re-armed: waits for a request */
	ENT_SERVING, /* a request is being served */
	ENT_HELD,    /* a request came after stop: never answered */
	ENT_DEAD,    /* the connection ended, or the kernel refused the entry */
};

struct fur_ent {
	/* first: the kernel reads and writes it, keep it on its own lines */
	struct fuse_uring_req_header hdr;
	struct fur_ring *ring;
	void *payload;
	struct iovec iov[2];  /* REGISTER's: read by the kernel when it issues */
	uint64_t commit_id;
	uint64_t unique;      /* of the request being served (ENT_SERVING) */
	uint16_t qid;
	uint8_t state;
	uint8_t op;           /* the command with the kernel: REGISTER or COMMIT */
	/* the payload is DMA memory every controller of the reactor reaches
	 * (its one pool): reads land in it and writes go out of it in place.
	 * Else it is ordinary memory and the data is copied to and from the
	 * request's own DMA buffer: under dma_isolation with several
	 * controllers (no buffer belongs to every controller's pool), and for
	 * the entries of a CPU that came online after the pools were sized */
	bool payload_dma;
} __attribute__((aligned(64)));

struct fur_ring {
	struct fusefs_rx *rx;
	struct io_uring ring;
	bool ring_ok;
	ev_io ring_w;         /* the ring's fd: readable while its CQ holds entries */
	ev_timer retry_w;
	ev_timer online_w;    /* while a queue has ENT_UNUSED entries */
	unsigned nqueues;
	unsigned depth;       /* queue k's entries: ents[k * depth ...] */
	unsigned nent;
	struct fur_ent *ents;
	bool *online;         /* scratch for cpumap_read_online */
	bool started;         /* fur_start ran: new entries are registered at once */
	bool stopped;
	unsigned failed;      /* entries the kernel refused */
};

static const struct fw_transport ring_transport;

/* ---- submission ---- */

static struct io_uring_sqe *get_sqe(struct fur_ring *g)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&g->ring);

	if (!sqe) {
		/* every entry has at most one command with the kernel and the
		 * SQ holds them all: only unsubmitted ones can fill it */
		io_uring_submit(&g->ring);
		sqe = io_uring_get_sqe(&g->ring);
	}
	return sqe;
}

static void prep_cmd(struct fur_ent *e, uint32_t cmd_op)
{
	struct fur_ring *g = e->ring;
	struct io_uring_sqe *sqe;

	if (g->rx->fd_dead) {
		/* the channel was let go of (chan_close): nothing goes to the
		 * kernel on this reactor any more */
		e->state = ENT_DEAD;
		return;
	}
	sqe = get_sqe(g);
	if (!sqe) {
		log_err("fuse: io_uring submission queue full; entry of queue %u lost", e->qid);
		e->state = ENT_DEAD;
		return;
	}
	fw_ring_cmd(sqe, g->rx->fd, cmd_op, e->qid, e->commit_id, e->iov, e);
	e->op = (uint8_t)cmd_op;
	e->state = ENT_KERNEL;
}

static void ring_submit(struct fur_ring *g)
{
	int n;

	/* what the SQ holds, not a count of ours: a submit that stopped early
	 * (an SQE the kernel could not take) leaves the rest there */
	if (!io_uring_sq_ready(&g->ring))
		return;
	n = io_uring_submit(&g->ring);
	if (n < 0 && n != -EAGAIN && n != -EBUSY && n != -EINTR)
		log_err("fuse: io_uring submit: %s", strerror(-n));
	/* -EAGAIN/-EBUSY: the CQ is full; the next pass reaps, then submits */
}

static void flush_hook(void *arg)
{
	struct fusefs_rx *rx = arg;

	if (rx->ring)
		ring_submit(rx->ring);
}

/* ---- answers ---- */

static void ring_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	struct fur_ent *e = r->tctx;
	struct fusefs_rx *rx = e->ring->rx;
	size_t moved = 0;

	aud_answer(rx, r, error, iov, iovcnt);
	if (e->state != ENT_SERVING || e->unique != r->unique) {
		/* the entry answered this request already (it waits for the
		 * kernel again, or serves another request now): answering
		 * again would overwrite what it holds */
		SCHED_STAT_ADD(rx->sched, dup_answers, 1);
		log_err("fuse: request %llu answered again on an io_uring entry of queue %u that "
			"no longer serves it: not sent",
			(unsigned long long)r->unique, e->qid);
		return;
	}
	if (rx->fd_dead) {
		SCHED_STAT_ADD(rx->sched, late_answers, 1);
		e->state = ENT_DEAD;
		return;
	}
	/* out of place: small answers, and reads that were not block-aligned */
	fw_ring_answer(&e->hdr, e->payload, FUSEFS_MAX_IO, e->commit_id, r->unique, error, iov,
		       iovcnt, &moved);
	if (r->opcode == FUSE_READ)
		SCHED_STAT_ADD(rx->sched, copy_bytes, moved);
	prep_cmd(e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
}

/* Over the ring every request expects an answer: one that must not get one
 * (there is none today) is answered ENOSYS so that the entry comes back. */
static void ring_drop(struct fw_req *r)
{
	ring_send(r, -ENOSYS, NULL, 0);
}

static const struct fw_transport ring_transport = {.send = ring_send, .drop = ring_drop};

/* ---- requests ---- */

static void take_request(struct fur_ring *g, struct fur_ent *e)
{
	struct fusefs_rx *rx = g->rx;
	struct fuse_in_header h;
	struct fuse_uring_ent_in_out io;
	struct fw_msg m;
	struct fw_req r = {
		.t = &ring_transport,
		.tctx = e,
		.rbuf = e->payload_dma ? e->payload : NULL,
		.rbuf_len = e->payload_dma ? FUSEFS_MAX_IO : 0,
		.data_dma = e->payload_dma,
	};
	int rc;

	memcpy(&h, e->hdr.in_out, sizeof(h));
	memcpy(&io, &e->hdr.ring_ent_in_out, sizeof(io));
	e->commit_id = io.commit_id;
	e->unique = h.unique;
	e->state = ENT_SERVING;
	if (g->stopped) {
		e->state = ENT_HELD;
		return;
	}
	SCHED_STAT_ADD(rx->sched, ring_requests, 1);
	if (io.payload_sz > FUSEFS_MAX_IO)
		rc = FW_BAD; /* the kernel says more than the buffer holds */
	else
		rc = fw_decode(&h, e->hdr.op_in, sizeof(e->hdr.op_in), e->payload, io.payload_sz,
			       &m);
	if (rc != FW_OK)
		m.h = h;
	fsops_dispatch(rx, &r, rc, &m);
}

static void set_classic(struct fusefs *fs, const char *why, int err)
{
	if (!atomic_exchange(&fs->ring_failed, true)) {
		log_err("fuse: io_uring transport failed (%s: %s): serving over /dev/fuse", why,
			strerror(-err));
		atomic_store(&fs->transport, FUSEFS_TRANSPORT_CLASSIC);
	}
}

static void arm_retry(struct fur_ring *g)
{
	struct ev_loop *loop = nvme_reactor_loop(g->rx->r);

	if (!ev_is_active(&g->retry_w)) {
		ev_timer_set(&g->retry_w, RETRY_S, 0.);
		ev_timer_start(loop, &g->retry_w);
	}
}

static void handle_cqe(struct fur_ring *g, struct fur_ent *e, int res)
{
	if (res == 0) {
		take_request(g, e);
		return;
	}
	if (res == -ENOTCONN || res == -ECONNABORTED || res == -ECANCELED) {
		e->state = ENT_DEAD; /* the connection ended */
		return;
	}
	if (res == -EAGAIN && e->op == FUSE_IO_URING_CMD_REGISTER) {
		/* before the kernel took INIT's answer: again shortly */
		e->state = ENT_IDLE;
		arm_retry(g);
		return;
	}
	if (e->op == FUSE_IO_URING_CMD_REGISTER) {
		/* the kernel turned io_uring off for the connection: what is
		 * not on the ring goes over /dev/fuse */
		e->state = ENT_DEAD;
		g->failed++;
		set_classic(g->rx->fs, "registering an entry", res);
		return;
	}
	/* a commit the kernel did not take (its request is gone): the
	 * entry is no longer armed, register it again */
	log_warn("fuse: io_uring answer on queue %u not taken: %s", e->qid, strerror(-res));
	prep_cmd(e, FUSE_IO_URING_CMD_REGISTER);
}

void fur_reap(struct fusefs_rx *rx)
{
	struct fur_ring *g = rx->ring;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	if (!g || !g->ring_ok)
		return;
	io_uring_for_each_cqe(&g->ring, head, cqe)
	{
		handle_cqe(g, io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	if (n) {
		io_uring_cq_advance(&g->ring, n);
		nvme_reactor_note_work(rx->r); /* the pass counts as busy */
	}
}

/* The ring's fd polls readable while its CQ holds entries, so waking on it
 * costs no read(2) (an eventfd registered with the ring would: one per wake)
 * and reaping is what makes it quiet again. */
static void ring_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fur_ring *g = w->data;

	(void)loop;
	(void)revents;
	fur_reap(g->rx);
}

/* ---- registration ---- */

static void register_idle(struct fur_ring *g)
{
	for (unsigned i = 0; i < g->nent; i++)
		if (g->ents[i].state == ENT_IDLE)
			prep_cmd(&g->ents[i], FUSE_IO_URING_CMD_REGISTER);
	ring_submit(g);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fur_ring *g = w->data;

	(void)loop;
	(void)revents;
	register_idle(g);
}

static void ent_buffers(struct fur_ent *e)
{
	e->iov[0].iov_base = &e->hdr;
	e->iov[0].iov_len = sizeof(e->hdr);
	e->iov[1].iov_base = e->payload;
	e->iov[1].iov_len = FUSEFS_MAX_IO;
	e->state = ENT_IDLE;
}

/* A CPU that was offline when the pools were sized has one entry.  Once it
 * is online its callers send requests, and its queue gets the rest of its
 * depth, in ordinary memory: the DMA pool keeps the room it was sized with
 * for requests (these entries' data is copied, one copy per read or write).
 * Returns whether a queue still waits for its CPU. */
static bool grow_online(struct fur_ring *g)
{
	unsigned ncpu = g->rx->fs->o.nr_cpu_map;
	bool waiting = false;

	if (g->stopped || cpumap_read_online(g->online, ncpu))
		return !g->stopped;
	for (unsigned k = 0; k < g->nqueues; k++) {
		struct fur_ent *q = &g->ents[k * g->depth];
		unsigned added = 0;

		if (q[g->depth - 1].state != ENT_UNUSED)
			continue; /* its whole depth is there */
		if (!g->online[q->qid]) {
			waiting = true;
			continue;
		}
		for (unsigned j = 0; j < g->depth; j++) {
			if (q[j].state != ENT_UNUSED)
				continue;
			q[j].payload = aligned_alloc(4096, FUSEFS_MAX_IO);
			if (!q[j].payload) {
				waiting = true; /* again at the next look */
				break;
			}
			ent_buffers(&q[j]);
			added++;
		}
		if (added)
			log_info("fuse: CPU %u is online: its FUSE queue gets %u more entries "
				 "(ordinary memory)",
				 q->qid, added);
	}
	if (g->started)
		register_idle(g);
	return waiting;
}

static void online_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fur_ring *g = w->data;

	(void)revents;
	if (!grow_online(g))
		ev_timer_stop(loop, w);
}

static void start_cb(void *arg)
{
	struct fusefs_rx *rx = arg;
	struct fur_ring *g = rx->ring;
	struct fusefs *fs = rx->fs;

	if (!g)
		return;
	g->started = true;
	register_idle(g);
	/* a refusal comes back at once: look before saying we are ready */
	fur_reap(rx);
	if (atomic_fetch_sub(&fs->rings_pending, 1) == 1 && !atomic_load(&fs->ring_failed)) {
		unsigned nq = 0, waiting = 0;

		for (unsigned i = 0; i < fs->nr_rx; i++) {
			struct fur_ring *o = fs->rx[i].ring;

			if (!o)
				continue;
			nq += o->nqueues;
			for (unsigned k = 0; k < o->nqueues; k++)
				waiting += o->ents[(k + 1) * o->depth - 1].state == ENT_UNUSED;
		}
		atomic_store(&fs->transport, FUSEFS_TRANSPORT_URING);
		/* a refusal on another reactor meanwhile: set_classic stored
		 * CLASSIC after setting ring_failed, perhaps before us */
		if (atomic_load(&fs->ring_failed))
			atomic_store(&fs->transport, FUSEFS_TRANSPORT_CLASSIC);
		else
			log_info("fuse: serving over io_uring (%u FUSE queues, %u entries each; "
				 "%u of offline CPUs, 1 entry each until the CPU is online)",
				 nq, fs->o.queue_depth ? fs->o.queue_depth : FUSEFS_QUEUE_DEPTH,
				 waiting);
	}
}

bool fur_ready(const struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (fs->rx[i].ring)
			return true; /* fur_setup makes all or none */
	return false;
}

void fur_start(struct fusefs *fs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < fs->nr_rx; i++)
		n += fs->rx[i].ring != NULL;
	atomic_store(&fs->rings_pending, n);
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (fs->rx[i].ring && nvme_reactor_call(fs->rx[i].r, start_cb, &fs->rx[i]) < 0)
			/* the kernel waits for every queue: do not leave it waiting */
			log_err("fuse: cannot reach reactor %u to register its FUSE queues", i);
}

void fur_stop(struct fusefs_rx *rx)
{
	if (rx->ring)
		rx->ring->stopped = true;
}

/* ---- set-up and tear-down ---- */

static void ring_free(struct fusefs_rx *rx)
{
	struct fur_ring *g = rx->ring;

	if (!g)
		return;
	if (ev_is_active(&g->retry_w))
		ev_timer_stop(nvme_reactor_loop(rx->r), &g->retry_w);
	if (ev_is_active(&g->online_w))
		ev_timer_stop(nvme_reactor_loop(rx->r), &g->online_w);
	if (ev_is_active(&g->ring_w))
		ev_io_stop(nvme_reactor_loop(rx->r), &g->ring_w);
	if (g->ring_ok)
		io_uring_queue_exit(&g->ring);
	for (unsigned i = 0; g->ents && i < g->nent; i++) {
		if (!g->ents[i].payload)
			continue;
		if (g->ents[i].payload_dma)
			nvme_reactor_buf_free(rx->r, g->ents[i].payload, FUSEFS_MAX_IO);
		else
			free(g->ents[i].payload);
	}
	free(g->ents);
	free(g->online);
	free(g);
	rx->ring = NULL;
}

static void abandon_cb(void *arg)
{
	struct fusefs_rx *rx = arg;

	nvme_reactor_set_flush_hook(rx->r, NULL, NULL);
	ring_free(rx);
	chan_own_wait(rx);
}

void fur_abandon(struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (fs->rx[i].ring && nvme_reactor_call(fs->rx[i].r, abandon_cb, &fs->rx[i]) < 0)
			log_warn("fuse: reactor %u keeps its unused FUSE queue memory", i);
}

static int ring_create(struct fusefs_rx *rx, unsigned nqueues, const uint16_t *qids)
{
	struct fusefs *fs = rx->fs;
	unsigned depth = fs->o.queue_depth ? fs->o.queue_depth : FUSEFS_QUEUE_DEPTH;
	struct io_uring_params p;
	struct fur_ring *g;
	bool dma, waiting = false;
	int err;

	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	rx->ring = g;
	g->rx = rx;
	g->nqueues = nqueues;
	g->depth = depth;
	g->nent = nqueues * depth;
	g->ents = aligned_alloc(64, sizeof(*g->ents) * g->nent);
	g->online = calloc(fs->o.nr_cpu_map, sizeof(*g->online));
	if (!g->ents || !g->online)
		return -ENOMEM;
	memset(g->ents, 0, sizeof(*g->ents) * g->nent);
	dma = nvme_reactor_buf_common(rx->r);
	/* the entries are held for good: taken with the largest request's
	 * buffer held, so that the pool can still give it beside them
	 * (rqsched.h, progress (d)) */
	size_t need = fsio_max_mem(fs->max_lba);
	void *room = dma ? nvme_reactor_buf_alloc(rx->r, need) : NULL;

	if (dma && !room) {
		log_err("fuse: reactor %u's DMA pool cannot hold the largest request (%zu bytes)",
			rx->idx, need);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < g->nent; i++) {
		struct fur_ent *e = &g->ents[i];

		e->ring = g;
		e->qid = qids[i / depth];
		if (i % depth >= cpumap_queue_entries(fs->o.cpus, e->qid, depth)) {
			e->state = ENT_UNUSED; /* its CPU is offline: grow_online */
			waiting = true;
			continue;
		}
		e->payload_dma = dma;
		if (!dma) {
			e->payload = aligned_alloc(4096, FUSEFS_MAX_IO);
			if (!e->payload)
				return -ENOMEM;
		} else {
			e->payload = nvme_reactor_buf_alloc(rx->r, FUSEFS_MAX_IO);
		}
		if (!e->payload) {
			unsigned want = 0;

			for (unsigned k = 0; k < nqueues; k++)
				want += cpumap_queue_entries(fs->o.cpus, qids[k], depth);
			log_err("fuse: reactor %u's DMA pool cannot hold its %u FUSE queue entries "
				"(%u MiB) beside the largest request (%zu bytes): make it larger or "
				"lower fuse_queue_depth",
				rx->idx, want, want * (FUSEFS_MAX_IO >> 20), need);
			if (room)
				nvme_reactor_buf_free(rx->r, room, need);
			return -ENOMEM;
		}
		ent_buffers(e);
	}
	if (room)
		nvme_reactor_buf_free(rx->r, room, need);
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CLAMP;
	/* room for every entry's command, and twice that for completions */
	err = io_uring_queue_init_params(g->nent, &g->ring, &p);
	if (err < 0) {
		log_err("fuse: io_uring set-up for reactor %u (%u entries): %s", rx->idx, g->nent,
			strerror(-err));
		return err;
	}
	g->ring_ok = true;
	/* a poll-mode loop never sleeps: its pass hook reaps the ring every
	 * pass, and watching the fd would cost a poll of it per pass */
	if (nvme_reactor_mode(rx->r) != NVME_MODE_POLL) {
		ev_io_init(&g->ring_w, ring_cb, g->ring.ring_fd, EV_READ);
		g->ring_w.data = g;
		ev_io_start(nvme_reactor_loop(rx->r), &g->ring_w);
	}
	ev_timer_init(&g->retry_w, retry_cb, RETRY_S, 0.);
	g->retry_w.data = g;
	ev_timer_init(&g->online_w, online_cb, ONLINE_S, ONLINE_S);
	g->online_w.data = g;
	if (waiting)
		ev_timer_start(nvme_reactor_loop(rx->r), &g->online_w);
	nvme_reactor_set_flush_hook(rx->r, flush_hook, rx);
	return 0;
}

int fur_setup(struct fusefs *fs)
{
	unsigned ncpu = fs->o.nr_cpu_map;
	uint16_t *qids;
	int err = 0;

	if (!ncpu || !fs->o.cpu_map)
		return -EINVAL;
	qids = calloc(ncpu, sizeof(*qids));
	if (!qids)
		return -ENOMEM;
	for (unsigned i = 0; i < fs->nr_rx && !err; i++) {
		unsigned n = 0;

		for (unsigned c = 0; c < ncpu; c++)
			if (fs->o.cpu_map[c] == i)
				qids[n++] = (uint16_t)c;
		if (n)
			err = ring_create(&fs->rx[i], n, qids);
	}
	for (unsigned c = 0; c < ncpu && !err; c++)
		if (fs->o.cpu_map[c] >= fs->nr_rx)
			err = -EINVAL;
	free(qids);
	if (err)
		fur_destroy(fs);
	return err;
}

void fur_destroy(struct fusefs *fs)
{
	for (unsigned i = 0; fs->rx && i < fs->nr_rx; i++) {
		if (fs->rx[i].ring) {
			nvme_reactor_set_flush_hook(fs->rx[i].r, NULL, NULL);
			ring_free(&fs->rx[i]);
		}
	}
}

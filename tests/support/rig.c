/* rig.c - the shared engine test rig (rig.h). */
#include "rig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t rig_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rig_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

void rig_state_cb(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s)
{
	(void)c;
	atomic_fetch_add((_Atomic unsigned *)arg + s, 1);
}

int rig_open(struct rig *g, const struct rig_opts *o)
{
	int rc = 0;
	memset(g, 0, sizeof(*g));
	g->nr_ctrls = o->nr_ctrls ? o->nr_ctrls : 1;
	g->nr_reactors = o->nr_reactors ? o->nr_reactors : 1;
	if (g->nr_ctrls > RIG_MAX_CTRLS || g->nr_reactors > RIG_MAX_REACTORS)
		return -EINVAL;
	for (unsigned c = 0; c < g->nr_ctrls; c++) {
		struct sim_opts so = o->sim[c];
		if (so.name)
			snprintf(g->names[c], sizeof(g->names[c]), "%s", so.name);
		else
			snprintf(g->names[c], sizeof(g->names[c]), "r%u", c);
		so.name = g->names[c];
		if (!so.nr_ns) {
			so.nr_ns = 1;
			so.ns[0] = (struct sim_ns_opts){
			    .nlba = 4096, .lba_size = 4096, .backing = SIM_BACKING_RAM};
		}
		if ((rc = sim_create(&so, &g->sim[c]))) {
			fprintf(stderr, "rig: %s: sim_create: %s\n", g->names[c], strerror(-rc));
			goto fail;
		}
		struct nvme_ctrl_opts co = o->ctrl[c];
		co.name = g->names[c];
		co.io_queues = g->nr_reactors;
		if (!co.queue_depth)
			co.queue_depth = 32;
		if ((rc = nvme_ctrl_open(sim_bus(g->sim[c]), &co, &g->c[c]))) {
			fprintf(stderr, "rig: %s: nvme_ctrl_open: %s\n", g->names[c], strerror(-rc));
			sim_destroy(g->sim[c]);
			g->sim[c] = NULL;
			goto fail;
		}
		nvme_ctrl_set_event_cb(g->c[c], rig_state_cb, g->ev[c]);
	}
	for (unsigned r = 0; r < g->nr_reactors; r++) {
		struct nvme_reactor_opts ro = {.id = o->first_id + r,
		                               .cpu = o->pin ? (int)r : -1,
		                               .numa = o->pin,
		                               .mode = o->mode,
		                               .buf_pool_bytes =
		                                   o->pool_bytes ? o->pool_bytes : 8u << 20,
		                               .dma_isolation = o->dma_isolation};
		if ((rc = nvme_reactor_create(&ro, &g->r[r]))) {
			fprintf(stderr, "rig: reactor %u: %s\n", r, strerror(-rc));
			goto fail;
		}
		for (unsigned c = 0; c < g->nr_ctrls; c++)
			if ((rc = nvme_qpair_create(g->c[c], g->r[r], (uint16_t)(r + 1),
			                            &g->qp[r][c]))) {
				fprintf(stderr, "rig: %s: qpair %u: %s\n", g->names[c], r + 1,
				        strerror(-rc));
				goto fail;
			}
		for (unsigned b = 0; b < RIG_NBUF; b++)
			if (!(g->buf[r][b] = nvme_qpair_buf_alloc(g->qp[r][0], RIG_BUFSZ))) {
				rc = -ENOMEM;
				goto fail;
			}
	}
	if (o->start && (rc = rig_start(g)))
		goto fail;
	return 0;
fail:
	rig_close(g);
	return rc;
}

int rig_start(struct rig *g)
{
	for (unsigned r = 0; r < g->nr_reactors; r++) {
		int rc = nvme_reactor_start(g->r[r]);
		if (rc) {
			fprintf(stderr, "rig: reactor %u start: %s\n", r, strerror(-rc));
			return rc;
		}
	}
	g->started = true;
	return 0;
}

int rig_stop(struct rig *g, unsigned timeout_ms)
{
	int rc = 0;
	if (!g->started)
		return 0;
	for (unsigned r = 0; r < g->nr_reactors; r++)
		nvme_reactor_stop(g->r[r]);
	for (unsigned r = 0; r < g->nr_reactors; r++)
		if (nvme_reactor_join_timeout(g->r[r], timeout_ms ? timeout_ms : RIG_HANG_MS) < 0) {
			fprintf(stderr, "rig: reactor %u did not stop\n", r);
			rc = -ETIMEDOUT;
		}
	g->started = rc < 0;
	return rc;
}

void rig_close(struct rig *g)
{
	if (rig_stop(g, 0) < 0)
		return; /* a reactor still runs: freeing under it would be worse */
	for (unsigned r = 0; r < g->nr_reactors; r++)
		for (unsigned c = 0; c < g->nr_ctrls; c++)
			if (g->qp[r][c])
				nvme_qpair_destroy(g->qp[r][c]);
	for (unsigned r = 0; r < g->nr_reactors; r++)
		if (g->r[r])
			nvme_reactor_destroy(g->r[r]);
	for (unsigned c = 0; c < g->nr_ctrls; c++) {
		if (g->c[c])
			nvme_ctrl_close(g->c[c]); /* owns the bus, and so the sim */
		if (g->kept[c])
			g->kept[c]->ops->close(g->kept[c]);
	}
	memset(g, 0, sizeof(*g));
}

/* ---- calls and I/O on a reactor ---- */

struct rig_call {
	void (*fn)(void *);
	void *arg;
	_Atomic int done;
};

static void call_run(void *arg)
{
	struct rig_call *k = arg;
	k->fn(k->arg);
	atomic_store(&k->done, 1);
}

int rig_call(struct rig *g, unsigned r, void (*fn)(void *), void *arg)
{
	if (!g->started) {
		fn(arg);
		return 0;
	}
	struct rig_call *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->fn = fn;
	k->arg = arg;
	int rc = nvme_reactor_call(g->r[r], call_run, k);
	if (rc == -ESHUTDOWN) {
		call_run(k);
		rc = 0;
	}
	if (rc < 0) {
		free(k);
		return rc;
	}
	uint64_t t0 = rig_now_ms();
	while (!atomic_load(&k->done)) {
		if (rig_now_ms() - t0 > RIG_HANG_MS)
			return -ETIMEDOUT; /* k leaked: the reactor may still run it */
		rig_sleep_ms(1);
	}
	free(k);
	return 0;
}

struct rig_io {
	struct rig *g;
	unsigned r, c;
	enum rig_op op;
	uint32_t nsid;
	uint64_t lba;
	void *buf;
	size_t len;
	int err;
	_Atomic int done;
};

static void io_done(void *arg, int err, uint16_t status)
{
	(void)status;
	struct rig_io *io = arg;
	io->err = err;
	atomic_store(&io->done, 1);
}

static void io_submit(void *arg)
{
	struct rig_io *io = arg;
	struct nvme_qpair *qp = io->g->qp[io->r][io->c];
	int rc;
	switch (io->op) {
	case RIG_READ:
		rc = nvme_qpair_read(qp, io->nsid, io->lba, io->buf, io->len, io_done, io);
		break;
	case RIG_WRITE:
	case RIG_WRITE_FUA:
		rc = nvme_qpair_write(qp, io->nsid, io->lba, io->buf, io->len,
		                      io->op == RIG_WRITE_FUA, io_done, io);
		break;
	case RIG_FLUSH:
		rc = nvme_qpair_flush(qp, io->nsid, io_done, io);
		break;
	default:
		rc = nvme_qpair_write_zeroes(qp, io->nsid, io->lba, io->len, false, io_done, io);
	}
	if (rc < 0)
		io_done(io, rc, 0);
}

int rig_io(struct rig *g, unsigned r, unsigned c, enum rig_op op, uint32_t nsid, uint64_t lba,
           void *buf, size_t len, unsigned timeout_ms)
{
	struct rig_io *io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	*io = (struct rig_io){.g = g, .r = r, .c = c, .op = op, .nsid = nsid, .lba = lba,
	                      .buf = buf, .len = len};
	for (;;) {
		int rc = rig_call(g, r, io_submit, io);
		if (rc < 0)
			return rc;
		uint64_t t0 = rig_now_ms();
		while (!atomic_load(&io->done)) {
			if (rig_now_ms() - t0 > (timeout_ms ? timeout_ms : RIG_HANG_MS)) {
				fprintf(stderr, "rig: I/O on reactor %u, %s did not complete\n", r,
				        g->names[c]);
				return -ETIMEDOUT; /* io leaked on purpose */
			}
			if (!g->started) { /* the test drives the reactor */
				nvme_qpair_flush_sq(g->qp[r][c]);
				sim_poll(g->sim[c]);
				nvme_qpair_reap(g->qp[r][c], 0);
			} else {
				rig_sleep_ms(1);
			}
		}
		if (io->err != -EAGAIN)
			break;
		atomic_store(&io->done, 0); /* no tracker free: try again */
		rig_sleep_ms(1);
	}
	int err = io->err;
	free(io);
	return err;
}

/* ---- patterns ---- */

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rig_fill(void *p, size_t len, uint64_t seed)
{
	uint8_t *b = p;
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = mix(seed * 0x9e3779b97f4a7c15ull + i);
		memcpy(b + i, &v, 8);
	}
}

int rig_verify(const void *p, size_t len, uint64_t seed)
{
	const uint8_t *b = p;
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = mix(seed * 0x9e3779b97f4a7c15ull + i);
		if (memcmp(b + i, &v, 8))
			return -EILSEQ;
	}
	return 0;
}

int rig_wait_state(struct rig *g, unsigned c, enum nvme_ctrl_state s, unsigned timeout_ms)
{
	uint64_t t0 = rig_now_ms();
	while (nvme_ctrl_state(g->c[c]) != s) {
		if (rig_now_ms() - t0 > (timeout_ms ? timeout_ms : RIG_HANG_MS))
			return -ETIMEDOUT;
		rig_sleep_ms(1);
	}
	return 0;
}

int rig_remove(struct rig *g, unsigned c)
{
	struct nvme_bus *bus = NULL;
	int rc = nvme_ctrl_remove(g->c[c], "test", &bus);
	if (rc == 0 && bus)
		g->kept[c] = bus;
	return rc;
}

int rig_attach(struct rig *g, unsigned c)
{
	if (!g->kept[c])
		return -ENODEV;
	int rc = nvme_ctrl_attach(g->c[c], g->kept[c]);
	if (rc == 0)
		g->kept[c] = NULL; /* the controller owns it again */
	return rc;
}

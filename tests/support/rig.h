/* rig.h - the test rig shared by the unit tests and test helpers that drive
 * the engine: software controllers, their nvme_ctrl, reactors with one qpair
 * per controller each (as the daemon wires them), I/O submitted on a
 * reactor from the test's thread and waited for, and the daemon's removal
 * and re-attach dance for a software controller.
 *
 * Every wait is bounded (RIG_HANG_MS unless given): a hang is reported as
 * -ETIMEDOUT (or a failed assertion in the caller), never a hung test.
 * Functions return 0 or a negative errno and print what failed on stderr;
 * they do not use check, so that helpers outside check can link them.
 * Prefix rig_.
 */
#ifndef NVMEFS_TEST_RIG_H
#define NVMEFS_TEST_RIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nvme.h"
#include "sim.h"

#define RIG_MAX_CTRLS    4
#define RIG_MAX_REACTORS 4
#define RIG_NBUF         8            /* buffers per reactor */
#define RIG_BUFSZ        (64u << 10)  /* bytes each */
#define RIG_HANG_MS      30000u

struct rig_opts {
	unsigned nr_ctrls;    /* 1 when 0 */
	unsigned nr_reactors; /* 1 when 0 */
	/* each controller's software controller; name defaults to r0, r1...;
	 * nr_ns 0: one RAM namespace of 4096 blocks of 4 KiB */
	struct sim_opts sim[RIG_MAX_CTRLS];
	/* each controller's engine options (name and io_queues are filled in) */
	struct nvme_ctrl_opts ctrl[RIG_MAX_CTRLS];
	enum nvme_poll_mode mode;
	bool pin;          /* reactor r on CPU r, NUMA-aware (else on no CPU) */
	unsigned first_id; /* reactor r's id is first_id + r */
	size_t pool_bytes; /* per reactor (per controller with dma_isolation), 0: 8 MiB */
	bool dma_isolation; /* a pool per controller (nvme_reactor_opts) */
	bool start;        /* start the reactor threads (else the test drives them) */
};

struct rig {
	unsigned nr_ctrls, nr_reactors;
	char names[RIG_MAX_CTRLS][16];
	struct sim *sim[RIG_MAX_CTRLS];
	struct nvme_ctrl *c[RIG_MAX_CTRLS];
	struct nvme_bus *kept[RIG_MAX_CTRLS]; /* a removed sim's bus, for rig_attach */
	struct nvme_reactor *r[RIG_MAX_REACTORS];
	struct nvme_qpair *qp[RIG_MAX_REACTORS][RIG_MAX_CTRLS];
	/* from the reactor's pool; with dma_isolation and several controllers
	 * from controller 0's (others need nvme_qpair_buf_alloc) */
	uint8_t *buf[RIG_MAX_REACTORS][RIG_NBUF];
	bool started;
	/* state changes reported by each controller's event callback */
	_Atomic unsigned ev[RIG_MAX_CTRLS][4];
};

/* The event callback the rig sets on controller c with arg g->ev[c]: counts
 * each state change (a test that sets its own may chain to it). */
void rig_state_cb(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s);

/* Build (and with o->start, start) the rig; on failure everything built so
 * far is torn down again. */
int rig_open(struct rig *g, const struct rig_opts *o);
int rig_start(struct rig *g);
/* Stop and join the reactors (bounded: -ETIMEDOUT if one does not end). */
int rig_stop(struct rig *g, unsigned timeout_ms);
/* rig_stop, then free everything (controllers are shut down). */
void rig_close(struct rig *g);

/* Run fn(arg) on reactor r and wait until it ran (inline when the reactor
 * is not running). */
int rig_call(struct rig *g, unsigned r, void (*fn)(void *), void *arg);

enum rig_op { RIG_READ, RIG_WRITE, RIG_WRITE_FUA, RIG_FLUSH, RIG_ZEROES };

/* One I/O on reactor r's qpair of controller c, submitted on the reactor and
 * waited for (timeout_ms, 0: RIG_HANG_MS).  buf from the pool of that qpair
 * (g->buf, or nvme_qpair_buf_alloc).  Returns the submission's error, else the completion's; 
 * -ETIMEDOUT if it did not complete (its state is then leaked on purpose:
 * the engine may still complete it). */
int rig_io(struct rig *g, unsigned r, unsigned c, enum rig_op op, uint32_t nsid, uint64_t lba,
           void *buf, size_t len, unsigned timeout_ms);

/* Pattern of (seed, position) bytes, and its check (0, or -EILSEQ). */
void rig_fill(void *p, size_t len, uint64_t seed);
int rig_verify(const void *p, size_t len, uint64_t seed);

/* Wait until controller c is in state s (0, -ETIMEDOUT). */
int rig_wait_state(struct rig *g, unsigned c, enum nvme_ctrl_state s, unsigned timeout_ms);

/* The daemon's part of a removal of a software controller: nvme_ctrl_remove,
 * the bus kept for rig_attach; and re-attach on it (the sim must answer:
 * sim_fault_clear first after a removal or a power cut). */
int rig_remove(struct rig *g, unsigned c);
int rig_attach(struct rig *g, unsigned c);

uint64_t rig_now_ms(void);
void rig_sleep_ms(unsigned ms);

/* For programs outside check (the helpers): a condition that does not hold
 * prints "FAIL: " and the message, and counts in the int lvalue fails. */
#define RIG_CHECK(fails, cond, ...)               \
	do {                                      \
		if (!(cond)) {                    \
			printf("FAIL: " __VA_ARGS__); \
			printf("\n");             \
			(fails)++;                \
		}                                 \
	} while (0)

#endif

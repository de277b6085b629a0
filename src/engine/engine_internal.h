/* engine_internal.h - structures shared by ctrl.c, qpair.c, reactor.c and
 * stats.c.  Not part of the public contract (nvme.h). */
#ifndef NVMEFS_ENGINE_INTERNAL_H
#define NVMEFS_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <ev.h>

#include "dma.h"
#include "nvme.h"
#include "recovery.h"

/* The engine's own cap on one command's transfer: one 4 KiB PRP list page
 * holds 512 entries, enough for 2 MiB at any dword-aligned offset. */
#define NVME_ENGINE_MAX_XFER       (2u << 20)
#define NVME_ADMIN_ENTRIES         64
#define NVME_ADMIN_TIMEOUT_MS      5000
#define NVME_DEFAULT_IO_TIMEOUT_MS 30000

/* Relaxed stores by the owner thread only: another thread's relaxed load is
 * then tear-free (aligned 64-bit accesses on x86_64) and defined by C11. */
#define STAT_ADD(field, v) __atomic_store_n(&(field), (field) + (v), __ATOMIC_RELAXED)
#define STAT_INC(field)    STAT_ADD(field, 1)

static inline void nvme_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline uint64_t nvme_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- controller ---- */
#define NVME_ADMIN_SLOTS      (NVME_ADMIN_ENTRIES - 1)
#define NVME_CTRL_MAX_QPAIRS  256
#define NVME_CSTS_INTERVAL_NS 250000000ull /* the reactors read CSTS at most 4 times a second */

/* One asynchronous admin command.  Its bounce buffer (with a PRP list page
 * at its end) is the command's own: freed when the CQE arrives or the
 * controller is disabled, never when the command merely timed out. */
struct nvme_admin_slot {
	bool busy;
	bool cb_done; /* the callback ran (timeout, CFS): only the CQE or a disable frees it */
	uint16_t cid;
	uint8_t opc;
	nvme_admin_cb cb;
	void *arg;
	void *ubuf;
	size_t len;
	struct nvme_dma_region dma;
	uint64_t dma_iova;
	uint64_t deadline_ns;
};

struct nvme_ctrl {
	struct nvme_bus *bus;
	char name[64];
	struct nvme_ctrl_opts opts;
	uint64_t cap;
	uint32_t dstrd;
	uint32_t ready_timeout_ms; /* CAP.TO */
	uint32_t shutdown_timeout_ms;

	/* The admin queue: admin_lock is held only to post a command or reap
	 * CQEs, never across a wait. */
	pthread_mutex_t admin_lock;       /* admin queue, slots, irq wiring, bus pointer */
	struct nvme_dma_region admin_mem; /* ASQ | ACQ */
	uint64_t admin_iova;
	bool admin_mapped;
	bool admin_ready; /* enabled and the admin queue programmed (admin_lock; stored
	                     atomically: the recovery thread peeks without the lock) */
	struct nvme_sqe *asq;
	volatile struct nvme_cqe *acq;
	uint16_t asq_tail, asq_head, acq_head;
	uint8_t acq_phase;
	uint8_t admin_gen;
	_Atomic unsigned admin_outstanding; /* busy slots */
	uint64_t admin_bogus;
	struct nvme_admin_slot slots[NVME_ADMIN_SLOTS];

	/* the recovery thread (recovery.c): reaps the admin CQ while commands
	 * are outstanding, runs resets, retries, isolation, cancel, shutdown */
	pthread_t thr;
	bool thr_started;
	pthread_mutex_t thr_lock; /* thr_cond, work, reset_why, retry */
	pthread_cond_t thr_cond;  /* CLOCK_MONOTONIC */
	pthread_cond_t done_cond; /* a cancel or shutdown finished */
	bool thr_stop;
	unsigned work;                 /* RECOV_W_* requests for the thread */
	char reset_why[96];
	uint64_t retry_at_ns;          /* FAILED: next bring-up attempt, 0: none */
	uint32_t retry_ms;             /* the current back-off */
	bool cancel_done, shutdown_done;
	pthread_mutex_t reset_lock;    /* one reset, removal, attach, cancel, shutdown at a time */
	_Atomic uint64_t csts_next_ns; /* rate limit of the reactors' CSTS reads */
	_Atomic unsigned aborts_out;
	_Atomic bool stopping;         /* cancel or shutdown asked: no more resets */
	/* a stop was asked while a reset may be waiting on the device: every
	 * CSTS or admin wait ends by this time (0: none) */
	_Atomic uint64_t stop_cut_ns;
	bool isolated;                 /* bus mastering off, nothing mapped (reset_lock) */
	bool quarantined;              /* isolation failed: commands left on the device */
	bool shut_down;                /* CC.SHN done (or the device is gone) */

	pthread_mutex_t qp_lock; /* qps[] */
	struct nvme_qpair *qps[NVME_CTRL_MAX_QPAIRS];
	unsigned nqps;

	int *efds; /* per MSI-X vector, -1 when unwired */
	unsigned nr_efds;
	unsigned nr_qpairs; /* live qpairs on this controller */
	unsigned asked_queues;

	/* Room for NVME_MAX_NAMESPACES entries, allocated once: the pointer
	 * never moves.  Written under reset_lock only (bring-up, reset,
	 * rescan): entries appended before nr_ns is published (release);
	 * nlba, failed and removed updated in place with atomic stores. */
	struct nvme_ctrl_info *info;

	/* asynchronous events (aen.c) */
	uint32_t oaes;                 /* Identify Controller OAES */
	uint8_t aerl;                  /* AERL, 0-based */
	_Atomic unsigned aers_armed;   /* AERs posted and not completed */
	pthread_mutex_t aen_lock;      /* aen_done[], aen_nr */
	uint32_t aen_done[2 * NVME_AER_MAX]; /* dw0 of AERs completed, for the recovery thread */
	unsigned aen_nr;
	pthread_mutex_t aen_cb_lock;   /* aen_cb, aen_arg; held while calling it */
	nvme_aen_cb aen_cb;
	void *aen_arg;
	struct nvme_ctrl_aen_stats ast; /* relaxed atomic updates */

	/* recovery */
	_Atomic int state;           /* enum nvme_ctrl_state: recov_set_state only */
	struct nvme_ctrl_rstats rst; /* updated with relaxed atomic adds */
	pthread_mutex_t event_lock;  /* event_cb and event_arg, held while calling it */
	nvme_ctrl_event_cb event_cb;
	void *event_arg;
};

/* Requests for the recovery thread (c->work). */
enum {
	RECOV_W_RESET = 1u << 0,    /* reset now (state RESETTING already) */
	RECOV_W_DEAD = 1u << 1,     /* gone: isolate, fail everything */
	RECOV_W_CANCEL = 1u << 2,   /* stop: end every command now */
	RECOV_W_SHUTDOWN = 1u << 3, /* stop: CC.SHN, disable */
	RECOV_W_AEN = 1u << 4,      /* AERs completed: read their logs, act, re-arm, tell */
};

int nvme_ctrl_wire_vector(struct nvme_ctrl *c, unsigned vector, int efd);
/* qpair.c <-> ctrl.c */
void nvme_ctrl_add_qpair(struct nvme_ctrl *c, struct nvme_qpair *qp);
void nvme_ctrl_del_qpair(struct nvme_ctrl *c, struct nvme_qpair *qp);

/* ---- trackers and qpair ---- */
/* FREE; INFLIGHT (on the device); ABORTING (timed out, Abort sent: still on
 * the device); HELD (in the tracker and its shadow SQE only, never on the
 * device: waiting for a reset to finish). */
enum { TRK_FREE = 0, TRK_INFLIGHT, TRK_ABORTING, TRK_HELD };

/* CID = generation (4 bits) << 12 | tracker index: a CQE that names a tracker
 * by an old generation is a duplicate or stale completion and is dropped,
 * not applied to the tracker's next command (Linux's nvme_cid genctr). */
#define NVME_CID_IDX_BITS 12
#define NVME_CID_IDX_MASK ((1u << NVME_CID_IDX_BITS) - 1)
#define NVME_MAX_TRACKERS (1u << NVME_CID_IDX_BITS)

struct nvme_parent;

/* One line each (static-asserted): a completion touches one tracker line. */
struct nvme_tracker {
	alignas(64) uint16_t cid; /* current, with generation */
	uint8_t state;
	uint8_t opc;
	uint32_t len;
	uint16_t next_free; /* free list link (index) */
	uint8_t retries;    /* resubmissions so far */
	uint64_t submit_ns;
	uint64_t abort_ns;
	nvme_io_cb cb;
	void *arg;
	struct nvme_parent *parent;
	uint64_t *prp_list; /* one 4 KiB page from the reactor pool (qp_iova gives its IOVA) */
};
static_assert(sizeof(struct nvme_tracker) == 64, "a tracker is one cache line");

struct nvme_parent {
	nvme_io_cb cb;
	void *arg;
	uint32_t children; /* still outstanding */
	int err;           /* first error wins */
	uint16_t status;
	struct nvme_parent *next_free;
	/* what is left to issue: a range wider than the queue goes out in
	 * waves, one more child as each completes */
	uint8_t opc;
	uint8_t shift;
	uint32_t nsid;
	uint32_t cdw12;
	uint64_t lba, left, chunk; /* next block, blocks not yet issued, blocks per child */
	const uint8_t *data;       /* next byte of the buffer, NULL: no data */
	/* protection information and metadata of each child: cdw14 = its LBA &
	 * ref_mask (ref48: cdw3 = bits 47:32), MPTR = mptr */
	uint32_t ref_mask;
	bool ref48;
	uint64_t mptr;
};

/* The metadata buffer of a qpair (struct nvme_qpair md_buf): each half
 * holds the metadata of one command, so a command of a namespace with
 * ms-byte metadata moves at most NVME_MD_HALF / ms blocks. */
#define NVME_MD_HALF (16u << 10)

#define TRK_NONE 0xffff

/* Per-I/O and per-pass counters the owner bumps, on a line of their own (the
 * public nvme_qpair_stats spreads them over several lines); nvme_qpair_stats_get
 * merges them into its copy. */
struct nvme_qpair_ctr {
	uint64_t submitted, completed, bytes_read, bytes_written;
	uint64_t reap_passes, sq_doorbells, cq_doorbells, idle_polls;
};

enum { QP_RUN = 0, QP_HELD = 1, QP_DEAD = 2 };

#define NVME_NS_NONE UINT32_MAX /* no namespace cached (the broadcast NSID is never an I/O one) */

struct nvme_qpair {
	/* ---- line 0, hot: read or written by every submit and every completion ---- */
	alignas(64) struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	struct nvme_reactor *reactor; /* the pass's cached clock */
	uintptr_t pool_base;          /* qp->pool's base: all of the pool the device may reach */
	uint64_t pool_len;
	uint64_t pool_iova; /* this bus's mapping of the pool: iova = pool_iova + (p - base) */
	uint16_t sq_tail;
	uint16_t sq_head; /* last sane sq_head the device reported */
	uint16_t cq_head;
	uint16_t mask;      /* entries - 1 (entries a power of two) */
	uint16_t free_head; /* free tracker list */
	uint16_t inflight;  /* INFLIGHT + ABORTING trackers */
	uint8_t cq_phase;
	uint8_t sq_dirty; /* tail advanced, doorbell not yet rung */
	bool reaping;     /* guards against a callback reaping again */
	uint8_t held;     /* QP_RUN, QP_HELD (reset: submissions held), QP_DEAD (-ENODEV) */
	/* ---- cold: set-up, teardown, timeouts, interrupts, messages ---- */
	uint16_t qid;
	uint16_t entries;
	uint32_t io_timeout_ms;
	uint32_t ntrk_alloc; /* trackers allocated: min(entries, NVME_MAX_TRACKERS) */
	struct nvme_ctrl *ctrl;
	/* the pool its buffers and PRP list pages come from and that is mapped
	 * into its controller's bus: the reactor's one pool (shared), or the
	 * reactor's pool for this controller (controller isolation) */
	struct nvme_buf_pool *pool;
	struct nvme_parent *parents;
	struct nvme_parent *parent_free;
	struct nvme_dma_region ring_mem;
	uint64_t ring_iova;
	bool pool_mapped;
	bool created_on_dev;
	int efd;
	int vector;
	ev_io io_w;
	bool io_active;
	bool napi_polling; /* interrupt mode: budget was exhausted */
	char name[80];
	struct nvme_qpair *next_in_reactor;
	size_t alloc_len;
	uint64_t bad_sq_head; /* CQEs whose sq_head was out of range */
	uint8_t io_retries;
	bool ring_mapped;
	bool quarantined; /* on a device that could not be cut off: see recovery.h */
	/* hybrid mode (reactor.c, hybrid_due): completions plus SQ doorbells
	 * when last looked at, and the pass that saw them change */
	uint64_t hy_seen;
	uint64_t hy_progress_ns;
	/* The IOVA of the pool's mapping on the bus now (recovery side: set at
	 * creation and by a remap under reset_lock); pool_iova (line 0) is the
	 * reactor's copy its PRPs are built from, brought up to date -- and the
	 * held commands' PRPs rebased -- only on the reactor, by
	 * nvme_qpair_rec_restart */
	uint64_t pool_map_iova;
	uint32_t max_xfer;
	/* the cached namespace, what only the slow path reads: blocks per
	 * command (max_xfer >> lba_shift, and no more than the metadata buffer
	 * holds), MPTR needed, the 64-bit guard's reference tag (cdw3 15:0 too) */
	uint32_t ns_chunk;
	bool ns_md;
	bool ns_ref48;
	/* the metadata buffer (nvme_ns_info.md_buf), from qp->pool, made when a
	 * namespace first needs it: NVME_MD_HALF bytes of zeroes Writes read,
	 * then NVME_MD_HALF bytes Reads write into and nobody reads.  Freed
	 * with the qpair (the device may write into it while any Read is in
	 * flight). */
	uint8_t *md_buf;
	unsigned pi_logged; /* protection information errors logged (rate limit) */
	/* ---- line "warm": read once per I/O (the cached namespace) or once per
	 * reap or doorbell pass; it does not fit line 0, so it has a line of its
	 * own: an I/O touches line 0, this line, the counters and its histogram
	 * bucket (plus its tracker, SQ slot and CQ slot). ---- */
	alignas(64) uint32_t ns_id; /* the last namespace used, or NVME_NS_NONE */
	uint32_t ns_prinfo;         /* its Reads' and Writes' cdw12 PRINFO bits (0: no PI) */
	uint64_t ns_nlba;
	struct nvme_bus *bus; /* for nvme_bus_doorbell's notify hook */
	volatile uint32_t *sq_db;
	volatile uint32_t *cq_db;
	uint32_t ns_ref_mask; /* cdw14 = the LBA's low 32 bits & this: all ones for PI Types 1, 2 */
	/* blocks per command on the fast path: ns_chunk, or 0 when every
	 * command of the namespace takes the slow path (it carries MPTR or a
	 * 48-bit reference tag) */
	uint16_t ns_max_nlb;
	uint16_t ntrk; /* trackers in use: entries - 1 - cq_budget, capped */
	uint16_t cq_budget;
	uint8_t ns_shift;
	uint32_t ns_lba_mask; /* lba_size - 1 */
	struct nvme_sqe *shadow; /* per tracker index: its command, to resubmit after a reset */
	/* ---- counters, written only by the owner ---- */
	alignas(64) struct nvme_qpair_ctr ctr;
	alignas(64) struct nvme_qpair_stats st; /* the rest: errors, histograms */
	/* CID-indexed, ntrk_alloc of them (only the first ntrk are ever used): a
	 * CID index up to mask lands in the table, so reap checks it by mask */
	struct nvme_tracker trk[];
};
/* The hot set is line 0; the warm set is exactly one other line. */
static_assert(offsetof(struct nvme_qpair, qid) <= 64, "qpair hot fields exceed one cache line");
static_assert(offsetof(struct nvme_qpair, ns_lba_mask) + 4 - offsetof(struct nvme_qpair, ns_id) <= 64,
              "qpair warm fields exceed one cache line");
static_assert(sizeof(struct nvme_qpair_ctr) == 64, "qpair counters are one line");

/* ---- reactor ---- */
struct nvme_call {
	struct nvme_call *_Atomic next;
	void (*fn)(void *);
	void *arg;
};

#define NVME_REACTOR_MAX_QPAIRS 64
#define NVME_OWN_EVENTS         8 /* events taken per wait of a reactor's own */

/* Controller isolation: the reactor's pool for one controller. */
struct nvme_ctrl_pool {
	struct nvme_ctrl *ctrl;
	struct nvme_buf_pool *pool;
};

struct nvme_reactor {
	struct nvme_reactor_opts opts;
	int node;
	struct ev_loop *loop;
	/* shared: the one pool, mapped into every controller's bus it has a
	 * qpair on; controller isolation: NULL, and one pool per controller in
	 * cpools[] (made by the controller's first qpair on this reactor) */
	struct nvme_buf_pool *pool;
	struct nvme_ctrl_pool cpools[NVME_REACTOR_MAX_QPAIRS];
	unsigned ncpools;
	uint64_t now_ns; /* cached at the start of each pass */
	/* Accounting with one clock read per pass while polling: the time
	 * from mark_ns to the next pass's clock read is busy when mark_busy
	 * (a polling pass that worked, with the zero-timeout poll after it),
	 * else idle (a pass that found nothing, or a sleep: the clock is read
	 * once more before sleeping).  0: nothing to account yet. */
	uint64_t mark_ns;
	bool mark_busy;
	bool in_pass;
	bool worked; /* this pass did work: its time is busy */
	enum nvme_poll_mode mode; /* effective (hybrid/interrupt may fall back to poll) */
	struct nvme_qpair *qps[NVME_REACTOR_MAX_QPAIRS];
	unsigned nqps;
	unsigned rr; /* round-robin start */
	void (*hook)(void *);
	void *hook_arg;
	void (*flush_hook)(void *);
	void *flush_hook_arg;

	ev_idle idle_w;
	ev_check check_w;
	ev_prepare prepare_w;
	ev_io call_w; /* call_efd: calls and the stop request wake the loop */
	ev_timer timer_w;
	bool polling; /* the loop does not sleep: idle watcher active (own wait: logical) */
	/* hybrid: commands in flight, none of them due soon (stalled qpairs,
	 * see hybrid_due): the loop sleeps at most HYBRID_SLOW_NS at a time
	 * (slow_w; own wait: its deadline) and reaps at each pass */
	bool slow_poll;
	ev_timer slow_w;

	/* The reactor's own wait (nvme_reactor_wait_fd, reactor.c): an epoll
	 * holding wfd (EPOLLEXCLUSIVE) and the fds of the reactor's own ev_io
	 * watchers; -1: libev sleeps itself. */
	int wep;
	int wfd;        /* in the wait now (-1: none) */
	bool wfd_ready; /* the wait reported wfd readable: wfd_fn runs in this pass */
	bool woke;      /* this pass follows a wait that could sleep (not polling) */
	void (*wfd_fn)(void *);
	void *wfd_arg;
	uint64_t wdeadline;          /* when the loop's timer is due (ns, nvme_now_ns) */
	ev_io *wio[NVME_OWN_EVENTS]; /* this pass's ready watchers (NULL: stopped since) */
	unsigned nwio;

	/* Vyukov intrusive MPSC queue: producers swap head, the consumer walks tail */
	struct nvme_call *_Atomic q_head;
	struct nvme_call *q_tail;
	struct nvme_call q_stub;
	/* an eventfd, written by the producer that finds call_wake clear (one
	 * write per wake-up, however many calls): libev's ev_async writes its
	 * pipe only while libev itself sleeps, never while the reactor sleeps
	 * in its own wait */
	int call_efd;
	atomic_bool call_wake;

	atomic_bool stop;
	/* the exit handshake of nvme_reactor_call: once exited, a call is refused
	 * (-ESHUTDOWN) and its caller may touch the reactor's qpairs itself */
	atomic_bool exited;
	atomic_bool drained; /* exited, and the calls that got in before have run */
	_Atomic unsigned callers;
	pthread_t thread;
	bool thread_started;

	struct nvme_reactor_stats st;
};

static inline uint64_t nvme_reactor_now(struct nvme_reactor *r)
{
	/* Outside a pass (tests, callers driving a qpair directly) the cache is stale. */
	if (!r->in_pass)
		r->now_ns = nvme_now_ns();
	return r->now_ns;
}

/* Log-linear latency bucket (stats.c's nvme_lat_bucket), inline for the
 * completion path: values below 2^SUB_BITS have a bucket each; above, every
 * power of two is split into 2^SUB_BITS equal buckets. */
static inline unsigned nvme_lat_bucket_inline(uint64_t ns)
{
	if (ns < (1u << NVME_LAT_SUB_BITS))
		return (unsigned)ns;
	unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
	unsigned e = msb - NVME_LAT_SUB_BITS + 1;
	unsigned sub = (unsigned)(ns >> (msb - NVME_LAT_SUB_BITS)) & ((1u << NVME_LAT_SUB_BITS) - 1);
	return (e << NVME_LAT_SUB_BITS) | sub;
}

/* ctrl.c: bring-up, the admin queue, identify -- what recovery.c uses */
int nvme_ctrl_admin_timeout(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                            struct nvme_cqe *cqe_out, uint32_t timeout_ms);
/* Post an admin command (any thread) with its own timeout; see
 * nvme_ctrl_admin_async. */
int nvme_ctrl_admin_submit(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
                           nvme_admin_cb cb, void *arg, uint32_t timeout_ms);
/* Reap the admin CQ and expire timed-out admin commands (any thread). */
void nvme_ctrl_admin_reap(struct nvme_ctrl *c);
/* Run every outstanding admin command's callback with err (once each).
 * release: the device can no longer touch their buffers (disabled, isolated
 * or gone): the slots and buffers are freed too; else they stay busy until
 * their CQE or a later release. */
void nvme_ctrl_admin_abandon(struct nvme_ctrl *c, int err, bool release);
uint32_t nvme_ctrl_csts(struct nvme_ctrl *c);
/* Wait until (CSTS & mask) == want: 0, -ENODEV (all ones), -EIO (CFS when
 * cfs_fatal), -ETIMEDOUT (logged with what). */
int nvme_ctrl_wait_csts(struct nvme_ctrl *c, uint32_t mask, uint32_t want, uint32_t timeout_ms,
                        bool cfs_fatal, const char *what);
/* Clear CC.EN (always written) and wait up to timeout_ms for RDY to clear:
 * 0, -ENODEV (all ones), -ETIMEDOUT. */
int nvme_ctrl_disable(struct nvme_ctrl *c, uint32_t timeout_ms);
/* Program the admin queue (rings zeroed) and set CC.EN; wait for RDY. */
int nvme_ctrl_enable(struct nvme_ctrl *c);
/* How many of want I/O queues (IDs 1..want) have both doorbells inside
 * bus's BAR0 at stride 4 << dstrd: want, or fewer (a warning names DSTRD,
 * the BAR's length and both counts); -EINVAL (an error naming them) when
 * not even queue 1's fit, or, strict, when fewer than want do. */
int nvme_ctrl_db_queues(struct nvme_ctrl *c, const struct nvme_bus *bus, uint32_t dstrd,
                        unsigned want, bool strict);
/* Set Features Number of Queues. */
int nvme_ctrl_set_num_queues(struct nvme_ctrl *c, unsigned want, unsigned *granted);
/* Identify the namespaces again after a reset or an attach: a changed or
 * vanished one is marked failed (its I/O fails with -EIO); strict (attach):
 * any difference is -ESTALE and nothing is marked. */
int nvme_ctrl_recheck_namespaces(struct nvme_ctrl *c, bool strict);
/* Re-identify the namespaces and apply the changes to c->info in place (see
 * nvme_ctrl_rescan): every one (all) or those in changed[0..nchanged) plus
 * the ones added or removed.  Changes go to out (at most max, *nr counts
 * them all).  reset_lock held; the qpairs' namespace caches are emptied
 * when anything changed. */
int nvme_ctrl_ns_update(struct nvme_ctrl *c, const uint32_t *changed, unsigned nchanged, bool all,
                        struct nvme_ns_change *out, unsigned max, unsigned *nr);
/* aen.c: at every LIVE transition (reset_lock held or bring-up): Set
 * Features AEC, then arm the AERs */
void nvme_aen_start(struct nvme_ctrl *c);
/* aen.c, on the recovery thread (RECOV_W_AEN) */
void nvme_aen_process(struct nvme_ctrl *c);
/* aen.c: a SMART log was read (critical warning for the statistics) */
void nvme_aen_note_health(struct nvme_ctrl *c, uint8_t critical_warning);
/* qpair.c */
int nvme_prp_build(uint64_t iova, size_t len, uint64_t *list, uint64_t list_iova, uint64_t *prp1,
                   uint64_t *prp2);
/* qpair.c, for the reactor */
void nvme_qpair_check_timeouts(struct nvme_qpair *qp, uint64_t now);
/* qpair.c, on the reactor: forget the cached namespace (the info changed) */
void nvme_qpair_ns_invalidate(struct nvme_qpair *qp);
/* qpair.c: (re)create the queue pair on the device (any thread, sync admin) */
int nvme_qpair_create_on_dev(struct nvme_qpair *qp);
/* reactor.c, for qpair.c */
int nvme_reactor_attach(struct nvme_reactor *r, struct nvme_qpair *qp);
void nvme_reactor_detach(struct nvme_reactor *r, struct nvme_qpair *qp);
/* The pool c's qpairs on r use (shared: the reactor's; controller
 * isolation: c's, made on first use, buf_pool_bytes).  Before the reactor
 * starts, or on its thread. */
int nvme_reactor_ctrl_pool(struct nvme_reactor *r, struct nvme_ctrl *c,
                           struct nvme_buf_pool **out);
/* stats.c */
enum nvme_err_class nvme_status_class(uint16_t status);

#endif

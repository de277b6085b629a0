/* sim_priv.h - what the software controller's files share (internal to
 * src/sim; sim.h is the contract for its users).
 *
 * The controller is one struct sim.  sim_regs.c owns its registers, the
 * controller state machine and the admin commands, and creates and
 * destroys it; sim_queue.c fetches, executes and completes commands (the
 * DMA map, PRP walking, I/O commands, the device thread); sim_offload.c is
 * the copy thread that executes large commands for inline queues; sim_ns.c
 * is the namespace store; sim_fault.c the fault injection of sim.h.
 *
 * Concurrency: each submission queue is processed by one thread at a time
 * (inline: the thread that rang its doorbell, which for I/O queues is the
 * owning reactor; threaded: the device thread), so per-queue state and
 * per-queue statistics need no lock.  Inline, I/O queue pairs with a CQ of
 * their own run at the same time as each other (struct sim_qexec); all else
 * runs one thread at a time with every queue still; it first waits until
 * the copy thread has nothing queued or executing.  Register writes, fault
 * settings, the error log and deferred completions take s->lock, which the
 * I/O path takes only for an error or a fault.  A namespace's write cache
 * model (sim_wc.c) and its table of commands moving data are under its
 * spin lock (sim_wc_lock, struct sim_ns).
 *
 * Functions declared here return what their sim_ counterparts in the file
 * do: an NVMe status (uint16_t, 0: success) for command execution, 0 or a
 * negative errno elsewhere.
 */
#ifndef NVMEFS_SIM_PRIV_H
#define NVMEFS_SIM_PRIV_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "nvme_spec.h"
#include "sim.h"
#include "sim_pi.h"
#include "sim_wc.h"

#define SIM_PAGE 4096u
#define SIM_MAX_QID 64           /* I/O queues 1..64 besides the admin queue */
#define SIM_NQ (SIM_MAX_QID + 1)
/* The copy thread's id in a namespace's table of commands moving data
 * (struct sim_ns), after the I/O queues' 1..SIM_MAX_QID. */
#define SIM_OFFLOAD_XID SIM_NQ
#define SIM_MAX_MAPS 256
#define SIM_IOVA_BASE 0x100000000ull
#define SIM_MAX_AER 4
#define SIM_WCTEMP_K 343         /* Identify WCTEMP: 70 C */
#define SIM_AEC_SUPPORTED (NVME_SMART_CRIT_ALL | NVME_AEC_NS_ATTR | NVME_AEC_FW_ACTIVATE)
#define SIM_MAX_EVENTS 16        /* events waiting for an AER or for their log page to be read */
#define SIM_CHANGED_NS_MAX 1024  /* entries of the Changed Namespace List log (04h) */
#define SIM_ERRLOG 16
#define SIM_MAX_DEFERRED 4096
#define SIM_BOGUS_CID 0xfffe     /* never a tracker index: entries <= 4096 */
#define SIM_MAX_STALLED 64

struct sim_map {
	uint8_t *vaddr;
	uint64_t iova;
	_Atomic uint64_t len; /* 0: free slot */
};

/* Counters are bumped by whichever thread executes the queue (the device
 * thread, or a reactor in inline mode) and read by sim_get_stats from any
 * thread: relaxed atomic adds and loads (a lock-free add; the inline path
 * stays free of locks and system calls). */
#define SIM_INC(x, n) __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define SIM_LOAD(x)   __atomic_load_n(&(x), __ATOMIC_RELAXED)
/* Register state (enabled, csts) and the MSI-X table are written under
 * s->lock and read without it on the inline path: release stores, acquire
 * loads (plain moves on x86).  What sim_enable set up is seen with them. */
#define SIM_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define SIM_GET(x)    __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

struct sim_qstats {
	uint64_t cmds, reads, writes, flushes, write_zeroes, write_zeroes_deac, dsm, admin_cmds;
	uint64_t bytes_read, bytes_written, dma_errors, invalid_cmds, fua_writes;
	uint64_t sq_doorbells, cq_doorbells, irqs, invalid_doorbells, offloaded;
	uint64_t offload_back;
};

struct sim_cq {
	bool valid;
	bool ien;
	uint16_t size;
	uint16_t vector;
	uint16_t head;  /* from the host's head doorbell */
	uint16_t tail;  /* next slot we post into */
	uint8_t phase;
	unsigned nr_sqs;
	struct nvme_cqe *ring;
	struct sim_qstats st; /* irqs, cq_doorbells */
};

struct sim_sq {
	bool valid;
	uint16_t size;
	uint16_t head;
	uint16_t tail;  /* from the host's tail doorbell */
	uint16_t cqid;
	struct nvme_sqe *ring;
	struct sim_qstats st;
};

struct sim_ns {
	uint64_t nlba;
	unsigned lba_size;
	unsigned lba_shift;
	enum sim_backing backing;
	uint8_t *mem;  /* RAM */
	size_t mem_len;
	int fd;        /* FILE */
	char path[4096];
	struct sim_wc wc; /* RAM and FILE with opts.vwc: the volatile write cache (cap 0: none) */
	/* Metadata (ms > 0; see sim.h): ms bytes per block at md (md_len), all
	 * ones until written; a FILE namespace's also in md_fd (PATH.md),
	 * written through.  pi: its PI format (pi.type 0: none). */
	unsigned ms;
	bool md_ext;
	struct sim_pi_fmt pi;
	uint8_t *md;
	size_t md_len;
	int md_fd;
	/* Commands of several queues run at once (struct sim_qexec).  wc_busy
	 * (sim_wc_lock) guards the write cache model, which is not
	 * thread-safe, and the table of commands moving data on ns: bit
	 * qid - 1 of io_busy and io[qid - 1] for I/O queue qid (the copy
	 * thread's: qid SIM_OFFLOAD_XID).  A command
	 * waits for an overlapping one of another queue when either writes
	 * (sim_ns_enter), so each command is atomic to the others, as a
	 * device's atomic write unit makes a block, and a pre-image is never
	 * read from a block another queue is writing.  Bits and ranges are
	 * set under the lock; sim_ns_leave clears a bit without it. */
	_Atomic bool wc_busy;
	_Atomic uint64_t io_busy[(SIM_OFFLOAD_XID + 63) / 64];
	struct sim_ns_io {
		uint64_t slba, nlb;
		bool write;
	} io[SIM_OFFLOAD_XID];
	bool active;      /* attached: listed, identified, I/O accepted (sim_ns_remove clears it) */
};

struct sim_deferred {
	uint64_t due_ns;
	uint16_t cqid;
	struct nvme_cqe cqe;
};

/* A command held by sim_fault_stall_next: fetched, not executed. */
struct sim_stalled {
	uint16_t sqid;
	struct nvme_sqe sqe;
};

/* Inline mode, one per queue id: an I/O SQ whose CQ serves it alone runs
 * its doorbells on the threads that ring them, beside other such queues
 * (sim_db_notify).  inside counts the threads in that path for the queue
 * (an exclusive runner waits until every queue's is 0); claim and pend are
 * the queue's own exec and db_pend (1: its SQ tail doorbell, 2: the head
 * doorbell of its CQ).  A cache line each: two reactors' queues must
 * not share one. */
struct sim_qexec {
	_Alignas(64) _Atomic unsigned inside;
	_Atomic unsigned claim;
	_Atomic unsigned pend;
	/* opts.offload: commands of this queue the copy thread finished (a
	 * stack it pushes onto), and those taken from it that wait for room in
	 * the CQ, oldest first; inflight counts the queue's commands fetched
	 * and handed over but not posted.  All but done belong to whoever
	 * executes the queue (its claim, or an exclusive runner). */
	_Atomic(struct sim_offload_cmd *) done;
	struct sim_offload_cmd *held, *held_tail;
	unsigned inflight;
};

/* A command handed to the copy thread (sim_offload.c); ent[] of struct
 * sim_offload, on its free list, its FIFO or a queue's done stack. */
struct sim_offload_cmd {
	struct sim_offload_cmd *next;
	struct nvme_sqe sqe;
	uint16_t qid;
	uint16_t status;
};

#define SIM_OFFLOAD_SLOTS 256 /* commands handed over at once; more run where fetched */
/* opts.offload (inline mode): the copy thread and its FIFO.  lock guards
 * free, head/tail, stop and sleeping; busy counts the commands queued or
 * executing (an exclusive runner waits until it is 0). */
struct sim_offload {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sim_offload_cmd *free, *head, *tail;
	bool stop, sleeping;
	_Atomic unsigned busy;
	_Atomic unsigned backs; /* sim_offload_back took commands back (a count) */
	struct sim_offload_cmd *ent; /* SIM_OFFLOAD_SLOTS */
};

struct sim {
	struct nvme_bus bus; /* first: sim_from_bus checks bus.ops */
	struct sim_opts o;
	char name[48];
	pthread_mutex_t lock;

	/* registers */
	uint64_t cap;
	uint32_t vs, intms, cc, csts, aqa;
	uint64_t asq, acq;
	uint64_t ready_due_ns; /* CC.EN 0->1 pending RDY, 0: none */
	bool enabled;          /* CC.EN seen as 1 and accepted */
	uint32_t dstrd_bytes;
	size_t bar_span;       /* BAR0's reservation: bus.bar0_len accessible, the rest not */

	/* features */
	uint16_t nr_queues_granted; /* 1-based, 0 until Set Features */
	bool wc_enabled;       /* Volatile Write Cache feature WCE: opts.vwc at reset */
	uint32_t irq_coalesce;

	/* MSI-X */
	int efds[128];
	unsigned nr_efds;

	/* DMA */
	struct sim_map maps[SIM_MAX_MAPS];
	_Atomic unsigned nr_maps;
	uint64_t next_iova;

	struct sim_sq sq[SIM_NQ];
	struct sim_cq cq[SIM_NQ];
	struct sim_ns ns[SIM_MAX_NS];

	/* async events and the error log.  aer_cid/nr_aer belong to the thread
	 * processing the admin queue (or a holder of the queues); the rest is
	 * under s->lock.  An event waits in ev[] until an AER is held and its
	 * log page is not masked: reporting an event masks its log page (bit
	 * lid of ev_masked) until the host reads that page without RAE. */
	uint16_t aer_cid[SIM_MAX_AER];
	unsigned nr_aer;
	uint32_t ev[SIM_MAX_EVENTS]; /* completion dw0 of the events not reported yet */
	unsigned nr_ev;
	uint32_t ev_masked;
	uint32_t aec;                /* Asynchronous Event Configuration (feature 0Bh) */
	uint8_t crit_warn;           /* SMART critical warning bits set by sim_inject_warning */
	uint32_t changed_ns[SIM_CHANGED_NS_MAX]; /* Changed Namespace List, cleared on read */
	unsigned nr_changed;         /* > SIM_CHANGED_NS_MAX: overflowed (reads FFFFFFFFh) */
	struct nvme_error_log errlog[SIM_ERRLOG];
	uint64_t error_count;
	uint64_t media_errors; /* SIM_INC: media status completions, for the SMART log */
	uint64_t born_ns;      /* sim_now_ns at sim_create: power-on hours */

	/* faults: counters taken with atomics from the processing thread */
	_Atomic unsigned f_fail_n;
	_Atomic uint16_t f_fail_status;
	_Atomic unsigned f_delay_us;
	_Atomic unsigned f_lose_n;
	_Atomic unsigned f_bogus_n;
	_Atomic unsigned f_dup_n;
	_Atomic bool f_hang;
	_Atomic bool f_hang_loop;  /* sim_fault_hang_loop: hang again at each first I/O fetch */
	_Atomic bool f_never_ready;
	_Atomic bool cfs;
	_Atomic unsigned gone;     /* SIM_GONE_*: registers read all ones, nothing runs */
	_Atomic unsigned f_stall_n;
	_Atomic bool f_abort_ignore;
	_Atomic unsigned f_admin_delay_us; /* sim_fault_admin_delay */
	_Atomic bool f_stuck;      /* sim_fault_stuck: CC writes and FLR ignored */
	_Atomic bool bme;          /* bus mastering (the bus_master op): off, no DMA at all */
	_Atomic unsigned f_irq_fail_n;
	_Atomic unsigned f_mis_n[2];             /* sim_fault_misdirect: [0] Reads, [1] Writes */
	_Atomic int64_t f_mis_off[2];
	uint64_t misdirected;                    /* SIM_INC */
	uint64_t pi_errors[3];                   /* SIM_INC: guard, application tag, reference tag */
	struct sim_stalled stalled[SIM_MAX_STALLED]; /* s->lock */
	unsigned nr_stalled;
	uint64_t resets;           /* CC.EN 1 -> 0 and function resets */
	uint64_t shutdowns;        /* CC.SHN 00b -> normal or abrupt */
	uint64_t powerfails, pf_lost, pf_kept; /* s->lock */

	/* completions held back by sim_fault_delay (s->lock) */
	struct sim_deferred *deferred;
	unsigned nr_deferred;
	_Atomic unsigned any_deferred;

	/* device thread (threaded mode) */
	pthread_t thread;
	bool thread_started;
	_Atomic bool stop;
	_Atomic int kick;
	_Atomic int sleeping;
	pthread_cond_t cond;

	struct sim_qstats admin_st; /* register-level counters under s->lock */
	struct sim_qstats retired;  /* counters of queues deleted or reset */
	/* threaded mode: held by the device thread while it processes, and by
	 * register writes that reset queues, so a reset never races a fetch */
	pthread_mutex_t qlock;
	/* inline mode, everything but a lone I/O queue's doorbells (the admin
	 * queue, register writes, resets, faults, queues that share a CQ or
	 * while completions are deferred): one thread at a time executes with
	 * every queue still (queue state has no lock).  exec counts the threads
	 * that asked; the one that raised it from 0 waits until no queue runs
	 * on its own (qx[].inside) and then executes the doorbells marked in
	 * db_pend (bit: doorbell index) for all of them until it drops back to
	 * 0. */
	_Atomic unsigned exec;
	_Atomic uint64_t db_pend[(2 * SIM_NQ + 63) / 64];
	struct sim_qexec qx[SIM_NQ];
	struct sim_offload off;
};

/* Why the device does not answer (s->gone bits); either makes it dead to
 * the host. */
#define SIM_GONE_REMOVED 1u /* sim_fault_remove: the link is gone; the device keeps power */
#define SIM_GONE_OFF     2u /* sim_fault_powerfail: no power until sim_power_on or clear */


/* sim_xfer's callback: one run of host memory, off bytes into the transfer;
 * 0, or nonzero to stop the transfer with an internal error. */
typedef int (*sim_seg_fn)(void *ctx, uint8_t *p, size_t len, size_t off);

struct sim_copy {
	uint8_t *buf;
	bool to_host;
};

static inline uint64_t sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A doorbell outside BAR0 (opts.bar_len smaller than the queues need)
 * does not exist: it reads 0 and a store to it is dropped. */
static inline bool sim_db_in_bar(const struct sim *s, uint64_t off)
{
	return off + 4 <= s->bus.bar0_len;
}

static inline uint32_t sim_db_read(struct sim *s, uint32_t off)
{
	if (!sim_db_in_bar(s, off))
		return 0;
	return atomic_load_explicit((_Atomic uint32_t *)(s->bus.bar0 + off), memory_order_acquire);
}

static inline void sim_db_zero(struct sim *s, uint32_t off)
{
	if (sim_db_in_bar(s, off))
		*(volatile uint32_t *)(s->bus.bar0 + off) = 0;
}

static inline bool sim_cq_full(const struct sim_cq *cq, unsigned need)
{
	unsigned used = (unsigned)(cq->tail - cq->head + cq->size) % cq->size;
	return used + need > (unsigned)cq->size - 1u;
}

/* ns's write cache model and command table to this thread.  A spin lock:
 * what it guards is mostly short (a 4 KiB write's pre-image is one 4 KiB
 * copy; a large write's or a FILE namespace's pre-image read is not), and a
 * mutex sleeping in the kernel under two queues' 4 KiB writes cost 10% of
 * their rate; after 64 turns it yields, for a holder that lost its CPU. */
/* One turn of a wait on another thread: a pause, every 64th turn a yield. */
static inline void sim_spin(unsigned *spins)
{
	if (++*spins % 64 == 0)
		sched_yield();
	else
		__builtin_ia32_pause();
}

static inline void sim_wc_lock(struct sim_ns *ns)
{
	unsigned spins = 0;

	while (atomic_exchange_explicit(&ns->wc_busy, true, memory_order_acquire))
		while (atomic_load_explicit(&ns->wc_busy, memory_order_relaxed))
			sim_spin(&spins);
}

static inline void sim_wc_unlock(struct sim_ns *ns)
{
	atomic_store_explicit(&ns->wc_busy, false, memory_order_release);
}

/* Writes to ns go through the volatile write cache model: the namespace has
 * one (RAM or FILE, opts.vwc) and the host left it enabled (WCE). */
static inline bool sim_cached(const struct sim *s, const struct sim_ns *ns)
{
	return ns->wc.cap && s->wc_enabled;
}

/* ---- sim_queue.c: the DMA map, PRP walking, completions, I/O commands,
 * queue processing, the device thread and the counters ---- */

/* host address of [iova, iova + len) inside one mapping, else NULL */
void *sim_xlate(struct sim *s, uint64_t iova, uint64_t len);
/* the bus's dma_map and dma_unmap ops */
int sim_dma_map(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t *iova);
int sim_dma_unmap(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t iova);
/* sim_seg_fn copying between host memory and a struct sim_copy buffer */
int sim_seg_copy(void *ctx, uint8_t *p, size_t len, size_t off);
/* the data of command c (len bytes, PRPs) run through fn; an NVMe status */
uint16_t sim_xfer(struct sim *s, const struct nvme_sqe *c, size_t len, sim_seg_fn fn, void *ctx);
/* signal cq's vector, if it has interrupts on */
void sim_irq(struct sim *s, struct sim_cq *cq);
/* take one from a fault countdown: true when it was not 0 */
bool sim_take(_Atomic unsigned *n);
/* complete command cid of sq: the completion faults first, then the post */
void sim_complete(struct sim *s, uint16_t sqid, struct sim_sq *sq, uint16_t cid, uint16_t status,
		  uint32_t dw0, bool io);
/* execute an I/O command of sq on the thread of table slot xid (sq's id,
 * or SIM_OFFLOAD_XID on the copy thread); an NVMe status */
uint16_t sim_io(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, uint16_t xid);
/* count a failed command's status (status != 0) and log it */
void sim_cmd_failed(struct sim *s, uint16_t qid, struct sim_sq *sq, const struct nvme_sqe *c,
                    uint16_t status);
/* the copy thread finished a command of I/O queue qid (in qx[qid].done):
 * have it posted */
void sim_q_done(struct sim *s, uint16_t qid);
/* the Abort command's dw0 for command cid of queue sqid (0: aborted) */
uint32_t sim_abort(struct sim *s, uint16_t sqid, uint16_t cid);
/* answering, bus mastering on, enabled and ready, no CFS, not hung:
 * commands are fetched */
bool sim_running(struct sim *s);
/* hold every queue still (nothing fetched or executed) until sim_qunlock */
void sim_qlock(struct sim *s);
void sim_qunlock(struct sim *s);
/* the bus's doorbell notification; the device thread (threaded mode) */
void sim_db_notify(struct nvme_bus *bus, uint32_t off, uint32_t val);
void *sim_thread(void *arg);
/* add q's counters to t (relaxed atomics) */
void sim_add_q(struct sim_qstats *t, const struct sim_qstats *q);

/* ---- sim_regs.c: admin commands, registers and the controller state
 * machine ---- */

/* complete held Async Event Requests with the pending events that are not
 * masked (the admin queue's processing thread, or a holder of the queues) */
void sim_aer_flush(struct sim *s);
/* ---- sim_aen.c ---- */
/* queue an event (completion dw0) if AEC enables it; takes s->lock */
void sim_event_add(struct sim *s, uint32_t dw0);
/* Get Log Page lid was read: unmask its events unless rae; the Changed
 * Namespace List is copied into buf (len bytes) and cleared.  s->lock held. */
void sim_event_log_read(struct sim *s, uint8_t lid, bool rae, uint8_t *buf, size_t len);
/* execute an admin command: false when it completes later (AER) */
bool sim_admin(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, uint16_t *status,
	       uint32_t *dw0);
/* registers and queues as after a controller reset; callers hold the
 * queues and s->lock */
void sim_regs_reset(struct sim *s);

/* ---- sim_ns.c: the namespace store (RAM, null or a file, and the
 * volatile write cache model of sim_wc.h) ---- */

/* open the backing o describes; 0 or a negative errno */
int sim_ns_open(struct sim_ns *ns, const struct sim_ns_opts *o);
/* release the backing (a file is synced first); ns may be half open */
void sim_ns_close(struct sim_ns *ns);
/* ns's metadata grown to nlba blocks (all ones past the old end; a FILE's
 * metadata file too); nothing without metadata or when not larger */
int sim_md_grow(struct sim_ns *ns, uint64_t nlba);
/* zero (deallocate) nlb blocks at slba, through the write cache; fua:
 * durable when done; their metadata as sim_md_zeroed says (c: the Write
 * Zeroes, NULL for a deallocation); an NVMe status */
uint16_t sim_ns_zero(struct sim *s, struct sim_ns *ns, uint16_t qid, uint64_t slba, uint64_t nlb,
                     bool fua, const struct nvme_sqe *c);
/* make everything written to ns durable; an NVMe status */
uint16_t sim_ns_flush(struct sim_ns *ns);
/* I/O queue qid's command (qid SIM_OFFLOAD_XID: the copy thread's) is
 * about to move blocks [slba, slba + nlb) of ns (write: into it): waits
 * while a command of another queue or the copy thread on ns overlaps
 * them and either writes, then enters the range in ns->io; returns with
 * sim_wc_lock(ns) held.  sim_ns_leave when its data has moved. */
void sim_ns_enter(struct sim_ns *ns, uint16_t qid, uint64_t slba, uint64_t nlb, bool write);
void sim_ns_leave(struct sim_ns *ns, uint16_t qid);

/* ---- sim_pi.c: Read and Write of a namespace with metadata ---- */

/* Read or Write c of ns (ns->ms > 0) whose blocks lie at media LBA at (the
 * command's own SLBA unless sim_fault_misdirect moved it), on the thread
 * of table slot xid, inside its range (sim_ns_enter done; for a Write the
 * write cache captured it): PRINFO checked first (sim_md_prinfo_ok), then
 * data, metadata and protection information as sim.h says.  An NVMe
 * status. */
uint16_t sim_md_rw(struct sim *s, const struct nvme_sqe *c, struct sim_ns *ns, bool write,
                   uint64_t at);
/* Check a Read's or Write's PRINFO against ns before anything moves:
 * 0 or Invalid Protection Information. */
uint16_t sim_md_prinfo_ok(const struct nvme_sqe *c, const struct sim_ns *ns, bool zeroes);
/* The metadata of blocks [slba, slba + nlb) after they were zeroed: the PI
 * of a zero block when c is a Write Zeroes with PRACT (reference tags from
 * its cdw14), else all ones; written through to a FILE's metadata. */
int sim_md_zeroed(struct sim_ns *ns, uint64_t slba, uint64_t nlb, const struct nvme_sqe *c);
/* make a FILE namespace's metadata durable: 0 or -errno */
int sim_md_sync(struct sim_ns *ns);

/* ---- sim_offload.c: the copy thread (opts.offload, inline mode) ---- */

/* start it (nothing without opts.offload or when threaded) / stop it */
int sim_offload_start(struct sim *s);
void sim_offload_stop(struct sim *s);
/* the executor of I/O queue qid fetched c: true when the copy thread took
 * it (a large Write to a RAM or FILE namespace, a free slot) */
bool sim_offload_take(struct sim *s, uint16_t qid, const struct nvme_sqe *c);
/* the executor of qid, at the end of a pass that handed commands over:
 * take back those of qid the copy thread has not started, execute and post
 * them here (their CQ slots were kept).  The copy thread had no CPU while
 * this one executed the command behind: waiting for it would only add its
 * delay.  Returns how many. */
unsigned sim_offload_back(struct sim *s, uint16_t qid);
/* post what the copy thread finished for qid while its CQ has room; the
 * executor of qid.  Returns how many completed. */
unsigned sim_offload_reap(struct sim *s, uint16_t qid);
/* an exclusive runner: wait until the copy thread has nothing queued or
 * executing (on the copy thread itself: execute what is queued) */
void sim_offload_quiesce(struct sim *s);
/* qid's SQ is gone (deleted, reset) or the device went dark: drop what
 * was finished for it, unposted; the copy thread is idle
 * (sim_offload_quiesce).  Returns how many. */
unsigned sim_offload_drop(struct sim *s, uint16_t qid);

#endif

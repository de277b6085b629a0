/* rqsched.h - the request scheduler of one reactor: life cycle, waiting and
 * retry of front-end requests, with a proof of progress.
 *
 * A request needs up to three things before and while it runs, taken in
 * this order and never given back until it finishes:
 *   1. memory: one DMA buffer of q->mem bytes from the pool its domain's
 *      device reaches (env.buf_alloc is told the domain; 0: none);
 *   2. a range lock grant on q->lock for blocks [lb0, lb1) (NULL: none);
 *   3. queue slots: each command it submits needs a free tracker; run()
 *      returns SCHED_STALL when the engine said -EAGAIN.
 *
 * Domains.  Trackers belong to one qpair, i.e. to one controller of the
 * reactor: the caller names the request's slot domain q->dom
 * (0 <= dom < o.nr_dom), and a request waits only in its own domain's
 * queues, so that a controller with no free tracker (hung, resetting) holds
 * up nothing of another controller.  Where it waits (enum sched_wait):
 *   MEM   its domain's memory queue, FIFO.  Only the head allocates; a later
 *         request of the domain that needs memory queues behind it (so a
 *         large request is not starved by small ones of its domain).  A
 *         request that needs no memory skips it.  With o.dom_mem_max, the
 *         head also waits while its domain holds buffers and one more would
 *         take the domain past dom_mem_max bytes of the pool (as
 *         env.buf_cost counts them); a domain holding none may always try.
 *   LOCK  in the range lock, holding its memory.  A lock is per namespace,
 *         so every entry of it is of one domain.
 *   SLOT  its domain's ready queue, FIFO, holding memory and lock.  Granted
 *         requests (lock waits that ended) enter it too.
 * A kick serves the domains in turn (its first one rotates), each until its
 * ready queue is empty or a run stalls, then its memory queue's head; a
 * domain that stalled is not run again in that kick, and another domain is
 * served whatever it does.  Within a domain the ready queue is served before
 * the memory queue.
 *
 * Progress, for a request q of domain d:
 *   (a) On d's ready queue, q needs only a tracker of d's qpair, which a
 *       completion on d frees (the engine completes or times out every
 *       command); every finish and every loop pass kicks, a kick runs d's
 *       ready queue from its head until a run stalls, and the queue is
 *       FIFO, so q runs once the requests of d ahead of it have.  What
 *       other domains do is not in this chain.
 *   (b) As a lock waiter, q waits for earlier overlapping entries of its
 *       namespace (hence of d), each of which holds its memory already: the
 *       chain ends at a holder, which is on d's ready queue or in flight.
 *   (c) So every request holding memory finishes, whatever the other
 *       domains do, and gives its buffer back.
 *   (d) At the head of d's memory queue, q waits for buffers of d (the
 *       bound), which come back by (c), or for free pool memory, which
 *       comes back from every domain's holders by (c).  Nothing of d
 *       allocates before q (FIFO), so with one domain the pool returns to
 *       its start state, where sched_create's caller checked that the
 *       largest request fits: q gets its buffer.  With several, requests of
 *       other domains may allocate meanwhile (each domain holding at most
 *       dom_mem_max): q gets its buffer once the free part of the pool has
 *       a block for it, at the latest when the other domains have stopped
 *       allocating and their holders have finished; a buddy pool that
 *       another domain's small buffers keep fragmented can delay a large q
 *       for as long as that domain keeps allocating.  q never waits behind
 *       another domain's queues.
 * Isolation: what a request of d waits for is trackers of d, requests of d
 * ahead of it in d's FIFOs, range-lock entries of its namespace, and free
 * pool memory.  Of these only the pool may be shared between domains (when
 * env.buf_alloc serves every domain from one pool), and a domain that
 * stopped completing holds at most dom_mem_max of it; with a pool per
 * domain nothing is shared.  Nothing
 * on this reactor waits for another reactor's memory.
 *
 * Write data that arrives while its request cannot have memory is kept in a
 * bounce buffer (malloc) charged to a per-reactor budget; the channel asks
 * sched_accepting() before it reads a request and stops reading while the
 * budget could not hold one more largest write or the request count is at
 * its cap: what a scheduler allocates is bounded by its options.  These two
 * bounds are per reactor, not per domain: the channel cannot tell a
 * request's controller before it has read it, so a domain's share could be
 * kept only by failing its requests.  A domain that holds the reactor at
 * either bound therefore pauses the channel for every domain (see
 * docs/fuse.md, "One controller's trouble").
 *
 * Threading: one scheduler per reactor, used on that reactor's thread only,
 * except sched_stats (any thread) and the grant hand-over (env.call).
 * No libfuse or engine types: the engine and the pool come in through
 * struct sched_env, so tests/unit/test_fuse_sched.c runs it on fakes.
 * Prefix sched_.
 */
#ifndef NVMEFS_SCHED_H
#define NVMEFS_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse_fs.h"
#include "rlock.h"

enum sched_res { SCHED_ASYNC, SCHED_STALL };

struct sched_env {
	/* DMA memory for a request of domain dom (the pool dom's device
	 * reaches): NULL when nothing fits now */
	void *(*buf_alloc)(void *ctx, unsigned dom, size_t len);
	void (*buf_free)(void *ctx, unsigned dom, void *buf, size_t len);
	/* run fn(arg) on the scheduler's own thread soon, from any thread;
	 * 0 or -ENOMEM */
	int (*call)(void *ctx, void (*fn)(void *arg), void *arg);
	void *ctx;
	/* bytes of the pool a buffer of len takes, for o.dom_mem_max (NULL:
	 * len) */
	size_t (*buf_cost)(void *ctx, size_t len);
	/* CLOCK_MONOTONIC ns on the scheduler's thread, for the latencies and
	 * waits it counts: a reactor's once-per-pass time (NULL: the clock,
	 * read at every use) */
	uint64_t (*now)(void *ctx);
};

#define SCHED_MAX_RQ 2048 /* the default bound of requests at once */
#define SCHED_MAX_DOM 256 /* slot domains of one scheduler */

struct sched_opts {
	size_t rq_size;      /* bytes per request, >= sizeof(struct sched_rq) */
	unsigned max_rq;     /* requests at once (0: SCHED_MAX_RQ) */
	size_t bounce_max;   /* bounce bytes at once (0: 8 MiB) */
	size_t max_payload;  /* largest write payload a request can bring */
	unsigned nr_dom;     /* slot domains, <= SCHED_MAX_DOM (0: 1) */
	size_t dom_mem_max;  /* pool bytes one domain may hold at once (0: no bound) */
	/* called (on the scheduler's thread) when sched_accepting turns true
	 * again after it returned false */
	void (*on_room)(void *arg);
	void *room_arg;
};

struct sched;

/* One namespace's figures on one scheduler: written by the scheduler's
 * thread with plain read-and-store (no atomic read-modify-write), read by
 * any thread with relaxed loads and summed over the schedulers. */
struct sched_ns_stats {
	struct fusefs_ns_stats st;
	uint64_t busy_t0; /* when st.inflight last went from 0 to 1 */
} __attribute__((aligned(64)));

struct sched_rq {
	/* set by the caller between sched_rq_new and sched_start */
	size_t mem;               /* DMA bytes (0: none) */
	struct rlock *lock;       /* NULL: no range lock */
	uint64_t lb0, lb1;
	/* Called with memory and grant held, on the scheduler's thread, first
	 * from sched_start or a kick and again after each SCHED_STALL or
	 * sched_resume.  SCHED_STALL: no tracker of its domain for the next
	 * command (what this call submitted before it stays submitted); call
	 * me again later, in order with the other stalled requests of its
	 * domain. */
	enum sched_res (*run)(struct sched_rq *q);
	/* Give up on the request without running it further: answer errnum
	 * (or nothing when the channel is gone: errnum 0).  The scheduler
	 * frees it afterwards. */
	void (*abort)(struct sched_rq *q, int errnum);
	uint8_t op;               /* enum fusefs_op, for the statistics */
	uint16_t dom;             /* slot domain: whose trackers it submits to */
	uint64_t bytes;           /* for the statistics */
	struct sched_ns_stats *nst; /* the namespace's (sched_rq_ns), or NULL */
	/* the scheduler's */
	void *dma;                /* the DMA buffer once taken */
	struct sched *s;
	struct sched_rq *next;    /* queue link */
	struct sched_rq *anext, *aprev; /* every live request */
	struct rlock_ent le;
	void *bounce;
	size_t bounce_len, bounce_off;
	bool bounce_lent;         /* bounce is the transport's, not ours */
	uint64_t t0, t_lock;
	uint64_t t_wait, wait_ns; /* the current wait's start; all waits' time */
	uint8_t wait;             /* enum fusefs_wait + 1, 0: not waiting */
	bool locked;
	bool stall_counted;
	uint32_t cost;            /* pool bytes charged to its domain for dma */
};

int sched_create(const struct sched_env *env, const struct sched_opts *o, struct sched **out);
/* Abort every request still alive (abort(q, errnum)), free what each holds
 * (buffer, bounce, lock entry: the lock must not be used again by anyone,
 * i.e. every scheduler sharing it is being destroyed), then free the
 * scheduler.  Returns how many requests were aborted. */
unsigned sched_destroy(struct sched *s, int errnum);

/* The channel is gone and the reactors are stopping (any thread): from
 * now on nothing waiting is run again; sched_destroy frees it. */
void sched_close(struct sched *s);

/* May the channel read one more request?  When false, sched will call
 * o.on_room once it is true again. */
bool sched_accepting(struct sched *s);

/* A zeroed request of o.rq_size bytes (NULL: at the cap or no memory). */
struct sched_rq *sched_rq_new(struct sched *s, uint8_t op);
/* q is a request of the namespace whose figures on this scheduler are
 * nst: counted in flight there from now until it is released, and its
 * answer counted there too (op < FUSEFS_NSOP_NR). */
void sched_rq_ns(struct sched_rq *q, struct sched_ns_stats *nst);
/* Where a write's payload of len bytes goes: into the DMA buffer at off if
 * memory could be taken now (and no one of its domain waits for memory),
 * else into a bounce buffer that sched copies to off once the DMA buffer is
 * taken.  Call once, after setting q->mem and q->dom, before sched_start;
 * NULL: no memory for a bounce buffer either (the request must be answered
 * with an error and sched_finish'ed). */
void *sched_payload(struct sched_rq *q, size_t off, size_t len);
/* The same for a payload that stays valid until q is answered (the
 * io_uring entry's buffer): sched copies it from src to off once the DMA
 * buffer is taken, with no bounce buffer and nothing charged to the bounce
 * budget.  Call once, before sched_start. */
void sched_payload_lent(struct sched_rq *q, size_t off, const void *src, size_t len);
/* Start: memory, lock, run, waiting wherever needed. */
void sched_start(struct sched_rq *q);
/* From a completion: run q again now (SCHED_STALL queues it). */
void sched_resume(struct sched_rq *q);
/* q has been answered: release everything, count it (errnum 0: success). */
void sched_finish(struct sched_rq *q, int errnum);
/* Retry waiting requests: each loop pass and after completions. */
void sched_kick(struct sched *s);

/* Count a request that was answered at once, without a sched_rq; also in
 * nst, its namespace's figures, unless NULL. */
void sched_count(struct sched *s, struct sched_ns_stats *nst, uint8_t op, uint64_t bytes,
		 int errnum);
/* Add nst's figures to *out (any thread; relaxed reads; a busy period
 * still running counts up to now). */
void sched_ns_stats_add(const struct sched_ns_stats *nst, struct fusefs_ns_stats *out);
/* Front-end counters of other kinds (fusefs_stats fields by name). */
#define SCHED_STAT_ADD(s, f, n) sched_stat_add(&sched_stats_raw(s)->f, (n))
struct fusefs_stats *sched_stats_raw(struct sched *s);
static inline void sched_stat_add(uint64_t *p, uint64_t n)
{
	__atomic_store_n(p, *p + n, __ATOMIC_RELAXED);
}
/* Add this scheduler's counters to *out (any thread; relaxed reads). */
void sched_stats_add(const struct sched *s, struct fusefs_stats *out);
/* Requests alive (taken and not finished), any thread. */
unsigned sched_inflight(const struct sched *s);

#endif

/* rlock.h - a block range lock per namespace: writers of overlapping block
 * ranges run one at a time, in arrival order.
 *
 * An entry is a half-open block range [lb0, lb1) taken by one request.  It is
 * granted once every EARLIER entry whose range overlaps it has been released
 * (FIFO among conflicting requests: no writer starves; entries that do not
 * overlap never wait for each other).  Every entry, held or waiting, sits in
 * an interval tree (a treap keyed by (lb0, arrival) and augmented with the
 * largest lb1 of each subtree) and counts how many earlier overlapping
 * entries it still waits for.  Acquire visits the k entries overlapping the
 * new one, release the k entries overlapping the released one: O(log n + k)
 * each (expected), no scan of unrelated entries and nothing quadratic.
 *
 * Threading: one lock per namespace, shared by every reactor that serves the
 * namespace; a mutex guards the tree (held for the tree update only, never
 * across I/O).  Grants are returned to the caller of rlock_release, which
 * hands each granted entry to its owner (the owner may be another reactor):
 * the lock itself never calls back.
 *
 * No libfuse or engine types: tests/unit/test_fuse_rlock.c drives it alone.
 * Prefix rlock_.
 */
#ifndef NVMEFS_RLOCK_H
#define NVMEFS_RLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct rlock_ent {
	uint64_t lb0, lb1;        /* blocks [lb0, lb1), lb0 < lb1 */
	/* the lock's */
	uint64_t seq;             /* arrival order */
	uint64_t maxend;          /* largest lb1 in this subtree */
	uint32_t prio;            /* treap heap priority */
	unsigned blockers;        /* earlier overlapping entries not yet released */
	bool granted;
	struct rlock_ent *l, *r;
	struct rlock_ent *gnext;  /* list returned by rlock_release */
};

struct rlock {
	pthread_mutex_t mu;
	struct rlock_ent *root;
	uint64_t seq;
	uint32_t rng;
	unsigned nr_held, nr_waiting;
};

void rlock_init(struct rlock *lk);
/* The tree must be empty (or its entries abandoned with their owners). */
void rlock_destroy(struct rlock *lk);

/* Enter e for [lb0, lb1): true if granted now, false if it waits (it is then
 * returned by the rlock_release that releases its last blocker). */
bool rlock_acquire(struct rlock *lk, struct rlock_ent *e, uint64_t lb0, uint64_t lb1);

/* Remove a granted entry; returns the entries granted by it (linked by
 * gnext, in no particular order), NULL if none. */
struct rlock_ent *rlock_release(struct rlock *lk, struct rlock_ent *e);

/* Held and waiting entries now (any thread). */
void rlock_counts(struct rlock *lk, unsigned *held, unsigned *waiting);

/* For tests: check the tree (order, heap, maxend) and the lock's invariants
 * (no two granted entries overlap; every waiter's blocker count equals the
 * number of earlier overlapping entries; a waiter with no blocker does not
 * exist).  0 or -EUCLEAN, with a reason in *why.  O(n^2). */
int rlock_check(struct rlock *lk, const char **why);

#endif

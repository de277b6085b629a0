/* fsns.h - the namespace table: one file per usable namespace of every
 * controller, its geometry, the controller features the requests depend on,
 * and its block range lock.
 *
 * The table has a fixed number of slots, allocated at start (the namespaces
 * found then and FSNS_SPARE more).  Inode numbers: 1 is the root, slot i is
 * inode i + 2.  A slot is never reused for another namespace while the table
 * lives: a namespace added at run time takes the next free slot (-ENOSPC
 * once none is left), and a removed one keeps its slot, marked removed, so a
 * stale inode or handle never reaches another namespace.  The same namespace
 * of a controller detached and attached again comes back in its own slot.
 *
 * Concurrency: one writer at a time (the table's mutex: add, remove, revive,
 * resize); readers on any thread without a lock.  A slot's fields are
 * written before the slot count is published with a release store; after
 * that only its state, handle generation and size change, each atomically.
 * A slot stays allocated until fsns_free, so a reader (or a request in
 * flight) holding one never sees it freed.
 *
 * Handles: an open gets the slot's generation as its file handle, and each
 * removal bumps the generation, so a handle opened before a removal keeps
 * failing after the namespace comes back (fsns_usable).
 * Prefix fsns_.
 */
#ifndef NVMEFS_FUSE_NS_H
#define NVMEFS_FUSE_NS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuse_fs.h"
#include "log.h"
#include "rlock.h"
#include "rqsched.h"

#define FUSEFS_NAME_MAX 64
#define FSNS_SPARE 256 /* slots for namespaces added at run time */
#define FSNS_ERR_LOG_BURST 10
#define FSNS_ERR_LOG_MS 5000

enum fsns_state {
	FSNS_PRESENT,  /* a file in the root */
	FSNS_REMOVED,  /* gone for good: its slot is never used again */
	FSNS_DETACHED, /* gone with its controller (fsns_detach): fsns_revive brings it back */
};

struct fusefs_ns {
	struct fusefs_ns_desc d; /* d.size: the size when added; fsns_size is the live one */
	char name[FUSEFS_NAME_MAX];
	uint8_t shift;          /* log2 of the LBA size */
	bool vwc, dsm, wzeroes, dealloc_zeroes;
	_Atomic uint64_t size;  /* bytes, grows only */
	atomic_uint state;      /* enum fsns_state */
	atomic_uint gen;        /* handle generation: bumped by each removal */
	/* mtime and ctime, ns since the epoch, even (0: the mount's start);
	 * bit 0 set: changed since, to be stamped by the next stat
	 * (fsns_touch, fsns_mtime) */
	_Atomic uint64_t mtime;
	struct rlock lock;      /* writes and fallocate, shared by the reactors */
	/* the log lines of the I/O errors its requests return (fsio.c),
	 * shared by the reactors: FSNS_ERR_LOG_BURST per FSNS_ERR_LOG_MS */
	struct log_rl err_rl;
	/* its figures, one per reactor (the table's nr_stats), each written by
	 * its reactor only; NULL when the table keeps none */
	struct sched_ns_stats *st;
};

struct fsns_table {
	struct fusefs_ns *slot; /* cap of them */
	unsigned cap;
	unsigned nr_stats;      /* figures kept per namespace: one per reactor */
	atomic_uint nr;         /* slots in use, published with release */
	pthread_mutex_t wlock;  /* writers */
};

/* What fsns_add needs of the controller. */
struct fsns_ctrl_feat {
	bool vwc, dsm, wzeroes;
};

/* An empty table of cap slots whose namespaces keep nr_stats sets of
 * figures each (0: none).  Undone by fsns_free. */
int fsns_init(struct fsns_table *t, unsigned cap, unsigned nr_stats);
/* Every namespace of ctrls[0..nr_ctrls) with an LBA size of 512 B..64 KiB
 * (others are logged and left out; a NULL controller has none), in a table
 * of that many slots plus spare ones, nr_stats sets of figures each.
 * Undone by fsns_free. */
int fsns_build(struct nvme_ctrl *const *ctrls, const char *const *names, unsigned nr_ctrls,
	       unsigned spare, unsigned nr_stats, struct fsns_table *t);
void fsns_free(struct fsns_table *t);

/* Add namespace ni of controller ctrl (named cname) in the next slot, file
 * <cname>n<nsid>; its inode in *ino.  -EEXIST when that namespace is
 * present or detached already, -EINVAL for an LBA size outside 512 B..64 KiB or no
 * blocks, -ENOSPC when every slot was used, -ENOMEM for no memory for its
 * figures. */
int fsns_add(struct fsns_table *t, unsigned ctrl, const char *cname,
	     const struct fsns_ctrl_feat *f, const struct nvme_ns_info *ni, uint64_t *ino);
/* Mark the present namespace of inode ino removed (for good) or detached
 * (to come back with fsns_revive); -ENOENT when it is not present. */
int fsns_remove(struct fsns_table *t, uint64_t ino, enum fsns_state why);
/* A detached namespace present again (same slot, same inode; handles
 * opened before stay stale); -ENOENT when it is not detached. */
int fsns_revive(struct fsns_table *t, uint64_t ino);
/* The size of inode ino becomes bytes: only growing is applied (-ERANGE
 * for less than it is, nothing changed; -ENOENT for no namespace). */
int fsns_resize(struct fsns_table *t, uint64_t ino, uint64_t bytes);
/* The newest slot of namespace nsid of controller ctrl in any state, 0 when
 * there is none. */
uint64_t fsns_find(struct fsns_table *t, unsigned ctrl, uint32_t nsid);
/* The present namespace named name, its inode in *ino; NULL if none. */
struct fusefs_ns *fsns_lookup(struct fsns_table *t, const char *name, uint64_t *ino);

/* Slots in use (any thread). */
static inline unsigned fsns_count(const struct fsns_table *t)
{
	return atomic_load_explicit(&((struct fsns_table *)t)->nr, memory_order_acquire);
}

/* The namespace of inode ino in any state, NULL for the root or an inode no
 * slot has. */
static inline struct fusefs_ns *fsns_by_ino(const struct fsns_table *t, uint64_t ino)
{
	return ino < 2 || ino - 2 >= fsns_count(t) ? NULL : &t->slot[ino - 2];
}

static inline bool fsns_present(const struct fusefs_ns *ns)
{
	return atomic_load_explicit(&((struct fusefs_ns *)ns)->state, memory_order_acquire) ==
	       FSNS_PRESENT;
}

/* Present, and fh was handed out since the last removal. */
static inline bool fsns_usable(const struct fusefs_ns *ns, uint64_t fh)
{
	struct fusefs_ns *n = (struct fusefs_ns *)ns;

	return fsns_present(ns) && fh == atomic_load_explicit(&n->gen, memory_order_acquire);
}

static inline uint64_t fsns_gen(const struct fusefs_ns *ns)
{
	return atomic_load_explicit(&((struct fusefs_ns *)ns)->gen, memory_order_acquire);
}

static inline uint64_t fsns_size(const struct fusefs_ns *ns)
{
	return atomic_load_explicit(&((struct fusefs_ns *)ns)->size, memory_order_acquire);
}

/* The namespace's content may have changed (a write or fallocate ended,
 * failed ones too: they may have written some blocks; a resize; a
 * detached namespace back): the next stat shows a new mtime and ctime.
 * Any thread.  On the write path this is one load of a word beside size;
 * it stores only the first time after a stat took the mark, and reads no
 * clock: fsns_mtime does, once per stat that finds the mark. */
static inline void fsns_touch(struct fusefs_ns *ns)
{
	if (!(atomic_load_explicit(&ns->mtime, memory_order_relaxed) & 1))
		atomic_fetch_or_explicit(&ns->mtime, 1, memory_order_release);
}

/* mtime and ctime for a stat, ns since the epoch: when the namespace was
 * touched since the last stat, the wall clock now (a write that ended
 * before this stat began is never later than that), else the time the
 * last such stat stamped; never before floor (the mount's start) and never
 * going back, whatever the clock does.  Any thread. */
uint64_t fsns_mtime(struct fusefs_ns *ns, uint64_t floor);

#endif

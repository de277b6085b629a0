/* sim_wc.h - the software controller's model of a volatile write cache, one
 * per namespace (internal to src/sim; sim.h says what a host sees of it).
 *
 * The media (a RAM namespace's memory, a FILE namespace's file) always holds
 * the newest data, so reads never look here.  What the model keeps is an undo
 * log: for each block written since it was last durable, its durable content
 * (the pre-image), captured before the first such write: its data and, on a
 * namespace with metadata, its metadata (kept in memory, written through to
 * a FILE namespace's metadata file).  A block without an
 * entry is durable.  Making blocks durable only drops entries; a power cut
 * writes some or all pre-images back.
 *
 * Capacity: cap blocks.  A new entry when the cache is full first makes the
 * oldest entry durable (first-dirtied first): destaging.  Memory: cap
 * pre-images plus cap small entries and a hash table, reserved by
 * sim_wc_init (MAP_NORESERVE: pages cost only once used); nothing is
 * allocated afterwards, and no system call is made for a RAM namespace.
 *
 * Threading: none of its own.  The caller runs one call at a time: on the
 * command path the sim holds the namespace's lock (sim_wc_lock) around each
 * call, since several queues execute at once; anything else runs with the
 * queues held.  sim_wc_nr_dirty and sim_wc_destaged may be called from any
 * thread (relaxed atomics: a snapshot).
 *
 * Functions return 0 or a negative errno; only a FILE namespace's I/O fails.
 * Prefix sim_wc_.
 */
#ifndef NVMEFS_SIM_WC_H
#define NVMEFS_SIM_WC_H

#include <stddef.h>
#include <stdint.h>

#define SIM_WC_DEFAULT_BYTES (64ull << 20)

struct sim_wc_ent;

struct sim_wc {
	uint8_t *mem; /* RAM media, NULL for a file */
	int fd;       /* FILE media, -1 for RAM */
	unsigned lba_shift;
	unsigned hshift;     /* 64 - log2(buckets) */
	uint32_t cap;        /* blocks */
	uint32_t nr;         /* entries now (relaxed atomic: read by stats) */
	uint32_t head, tail; /* oldest and newest entry, index + 1, 0: none */
	uint32_t free;       /* entries given back, chained through next */
	uint32_t unused;     /* entries [unused, cap) not used since the last drop-all */
	uint32_t *bucket;    /* hash chains by LBA, index + 1 */
	struct sim_wc_ent *ent;
	uint8_t *pre;      /* pre-image of entry i at (i - 1) << lba_shift */
	uint8_t *md;       /* the namespace's metadata, ms bytes a block (NULL: none) */
	unsigned ms;
	int md_fd;         /* its file (FILE namespaces), -1: memory only */
	uint8_t *pre_md;   /* metadata pre-image of entry i at (i - 1) * ms */
	uint64_t destaged; /* blocks made durable because the cache was full (relaxed atomic) */
	void *map;
	size_t map_len;
};

/* A cache of bytes (0: SIM_WC_DEFAULT_BYTES) over a namespace of nlba
 * blocks of 1 << lba_shift bytes, clamped to [one block, the namespace]; the
 * media is mem (RAM) or fd (FILE); md (ms bytes a block, NULL: none) its
 * metadata, written through to md_fd when that is not -1.  -ENOMEM if it
 * cannot be reserved. */
int sim_wc_init(struct sim_wc *wc, uint64_t nlba, unsigned lba_shift, uint64_t bytes, uint8_t *mem,
                int fd, uint8_t *md, unsigned ms, int md_fd);
/* Drop the model (the media keeps the newest data).  Safe on a zeroed struct. */
void sim_wc_fini(struct sim_wc *wc);

/* Blocks [slba, slba + nlb) are about to be overwritten: capture the
 * pre-image of each one not dirty yet, destaging the oldest entries when
 * full, in block order -- as if each block were written one after the other.
 * A range longer than the capacity does not copy what would be destaged
 * before the command ends: the whole cache and all but the last cap blocks
 * of the range become durable at once, and those last cap blocks are
 * captured (what one-by-one insertion gives when none of them was dirty).
 * On an error (reading a file) the caller must not write the range; what
 * was captured of it already is harmless (its pre-image is its content). */
int sim_wc_dirty(struct sim_wc *wc, uint64_t slba, uint64_t nlb);

/* Blocks [slba, slba + nlb) are durable now (a FUA write completed). */
void sim_wc_durable(struct sim_wc *wc, uint64_t slba, uint64_t nlb);

/* Everything is durable now (Flush, shutdown). */
void sim_wc_flush(struct sim_wc *wc);

/* A power cut: every dirty block either gets its pre-image back ("lost":
 * always when seed is 0) or keeps its newest content; with seed != 0 a hash
 * of (seed, nsid, LBA) decides, so the same seed over the same history gives
 * the same result (a block's data and metadata together).  A file gets the
 * pre-images with pwrite, then fdatasync.
 * Afterwards the cache is empty.  Adds to *lost and *kept.  A file error is
 * returned after every other block was handled. */
int sim_wc_powerfail(struct sim_wc *wc, uint64_t seed, uint32_t nsid, uint64_t *lost,
                     uint64_t *kept);

uint64_t sim_wc_nr_dirty(const struct sim_wc *wc);
uint64_t sim_wc_destaged(const struct sim_wc *wc);

#endif

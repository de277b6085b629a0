/* fsns.c - the namespace table. */
#include "fsns.h"

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "nvme.h"

int fsns_init(struct fsns_table *t, unsigned cap, unsigned nr_stats)
{
	memset(t, 0, sizeof(*t));
	t->slot = calloc(cap ? cap : 1, sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	t->cap = cap;
	t->nr_stats = nr_stats;
	atomic_init(&t->nr, 0);
	pthread_mutex_init(&t->wlock, NULL);
	return 0;
}

static bool lba_ok(const struct nvme_ns_info *ni)
{
	return ni->lba_size >= 512 && ni->lba_size <= 65536 &&
	       !(ni->lba_size & (ni->lba_size - 1)) && ni->nlba != 0;
}

int fsns_add(struct fsns_table *t, unsigned ctrl, const char *cname,
	     const struct fsns_ctrl_feat *f, const struct nvme_ns_info *ni, uint64_t *ino)
{
	struct fusefs_ns *ns;
	unsigned k;
	int rc = 0;

	if (!lba_ok(ni))
		return -EINVAL;
	pthread_mutex_lock(&t->wlock);
	k = atomic_load_explicit(&t->nr, memory_order_relaxed);
	/* present, or detached (its attach brings it back): not twice */
	for (unsigned i = 0; i < k; i++)
		if (t->slot[i].d.ctrl == ctrl && t->slot[i].d.nsid == ni->nsid &&
		    atomic_load(&t->slot[i].state) != FSNS_REMOVED) {
			rc = -EEXIST;
			goto out;
		}
	if (k >= t->cap) {
		rc = -ENOSPC;
		goto out;
	}
	ns = &t->slot[k];
	if (t->nr_stats) {
		/* a slot's figures live as long as the table: a removed
		 * namespace keeps them, and a late request may still count */
		size_t len = t->nr_stats * sizeof(*ns->st);

		ns->st = aligned_alloc(alignof(struct sched_ns_stats), len);
		if (!ns->st) {
			rc = -ENOMEM;
			goto out;
		}
		memset(ns->st, 0, len);
	}
	snprintf(ns->name, sizeof(ns->name), "%sn%u", cname, ni->nsid);
	ns->d.name = ns->name;
	ns->d.ctrl = ctrl;
	ns->d.nsid = ni->nsid;
	ns->d.lba_size = ni->lba_size;
	ns->d.size = ni->nlba * ni->lba_size;
	ns->shift = (uint8_t)__builtin_ctz(ni->lba_size);
	ns->vwc = f->vwc;
	ns->dsm = f->dsm;
	ns->wzeroes = f->wzeroes;
	ns->dealloc_zeroes = ni->dealloc_zeroes;
	atomic_init(&ns->size, ns->d.size);
	atomic_init(&ns->state, FSNS_PRESENT);
	atomic_init(&ns->gen, 0);
	atomic_init(&ns->mtime, 0);
	rlock_init(&ns->lock);
	ns->err_rl = (struct log_rl)LOG_RL_INIT(FSNS_ERR_LOG_BURST, FSNS_ERR_LOG_MS);
	/* the slot is complete before a reader can count it */
	atomic_store_explicit(&t->nr, k + 1, memory_order_release);
	*ino = (uint64_t)k + 2;
out:
	pthread_mutex_unlock(&t->wlock);
	return rc;
}

int fsns_remove(struct fsns_table *t, uint64_t ino, enum fsns_state why)
{
	struct fusefs_ns *ns;
	int rc = 0;

	if (why == FSNS_PRESENT)
		return -EINVAL;
	pthread_mutex_lock(&t->wlock);
	ns = fsns_by_ino(t, ino);
	if (!ns || !fsns_present(ns)) {
		rc = -ENOENT;
		goto out;
	}
	/* handles opened until now become stale before the name goes */
	atomic_fetch_add_explicit(&ns->gen, 1, memory_order_release);
	atomic_store_explicit(&ns->state, why, memory_order_release);
out:
	pthread_mutex_unlock(&t->wlock);
	return rc;
}

int fsns_revive(struct fsns_table *t, uint64_t ino)
{
	struct fusefs_ns *ns;
	int rc = 0;

	pthread_mutex_lock(&t->wlock);
	ns = fsns_by_ino(t, ino);
	if (!ns || atomic_load(&ns->state) != FSNS_DETACHED)
		rc = -ENOENT;
	else
		atomic_store_explicit(&ns->state, FSNS_PRESENT, memory_order_release);
	if (!rc)
		fsns_touch(ns); /* what it holds now is what the device kept */
	pthread_mutex_unlock(&t->wlock);
	return rc;
}

int fsns_resize(struct fsns_table *t, uint64_t ino, uint64_t bytes)
{
	struct fusefs_ns *ns;
	int rc = 0;

	pthread_mutex_lock(&t->wlock);
	ns = fsns_by_ino(t, ino);
	if (!ns)
		rc = -ENOENT;
	else if (bytes < fsns_size(ns))
		rc = -ERANGE;
	else if (bytes > fsns_size(ns)) {
		atomic_store_explicit(&ns->size, bytes, memory_order_release);
		fsns_touch(ns);
	}
	pthread_mutex_unlock(&t->wlock);
	return rc;
}

uint64_t fsns_mtime(struct fusefs_ns *ns, uint64_t floor)
{
	uint64_t v = atomic_load_explicit(&ns->mtime, memory_order_acquire);

	floor &= ~1ull;
	/* A write that ends while this runs sets the mark again and fails the
	 * exchange: the loop stamps once more, so no stat that begins after
	 * a write ended can return a time taken before it. */
	while (v & 1) {
		struct timespec ts;
		uint64_t now, prev = v & ~1ull;

		clock_gettime(CLOCK_REALTIME, &ts);
		now = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) & ~1ull;
		if (prev < floor)
			prev = floor;
		if (now <= prev)
			now = prev + 2; /* the clock stepped back: still a change */
		if (atomic_compare_exchange_weak_explicit(&ns->mtime, &v, now, memory_order_acq_rel,
							  memory_order_acquire))
			return now;
	}
	return v > floor ? v : floor;
}

uint64_t fsns_find(struct fsns_table *t, unsigned ctrl, uint32_t nsid)
{
	unsigned n = fsns_count(t);

	for (unsigned i = n; i-- > 0;)
		if (t->slot[i].d.ctrl == ctrl && t->slot[i].d.nsid == nsid)
			return (uint64_t)i + 2;
	return 0;
}

struct fusefs_ns *fsns_lookup(struct fsns_table *t, const char *name, uint64_t *ino)
{
	unsigned n = fsns_count(t);

	for (unsigned i = 0; i < n; i++)
		if (fsns_present(&t->slot[i]) && strcmp(t->slot[i].name, name) == 0) {
			*ino = (uint64_t)i + 2;
			return &t->slot[i];
		}
	return NULL;
}

int fsns_build(struct nvme_ctrl *const *ctrls, const char *const *names, unsigned nr_ctrls,
	       unsigned spare, unsigned nr_stats, struct fsns_table *t)
{
	unsigned n = 0;
	int rc;

	for (unsigned c = 0; c < nr_ctrls; c++)
		n += ctrls[c] ? nvme_ctrl_get_info(ctrls[c])->nr_ns : 0;
	rc = fsns_init(t, n + spare, nr_stats);
	if (rc)
		return rc;
	for (unsigned c = 0; c < nr_ctrls; c++) {
		if (!ctrls[c])
			continue; /* a slot with no controller yet */
		const struct nvme_ctrl_info *in = nvme_ctrl_get_info(ctrls[c]);
		struct fsns_ctrl_feat f = {
			.vwc = in->vwc,
			.dsm = in->oncs & NVME_ONCS_DSM,
			.wzeroes = in->oncs & NVME_ONCS_WRITE_ZEROES,
		};

		for (unsigned i = 0; i < in->nr_ns; i++) {
			const struct nvme_ns_info *ni = &in->ns[i];
			uint64_t ino;

			if (ni->removed)
				continue;
			if (!lba_ok(ni)) {
				log_warn("fuse: %s namespace %u: LBA size %u, %llu blocks: not shown",
					 names[c], ni->nsid, ni->lba_size, (unsigned long long)ni->nlba);
				continue;
			}
			rc = fsns_add(t, c, names[c], &f, ni, &ino);
			if (rc) {
				fsns_free(t);
				return rc;
			}
		}
	}
	return 0;
}

void fsns_free(struct fsns_table *t)
{
	unsigned n;

	if (!t->slot)
		return;
	n = fsns_count(t);
	for (unsigned i = 0; i < n; i++) {
		rlock_destroy(&t->slot[i].lock);
		free(t->slot[i].st);
	}
	free(t->slot);
	t->slot = NULL;
	pthread_mutex_destroy(&t->wlock);
}

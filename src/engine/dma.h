/* dma.h - DMA memory for the engine: pinned regions and per-reactor buffer pools.
 *
 * A region is anonymous memory, populated and mlocked (so the pages a device
 * was given never move), on a chosen NUMA node when asked, backed by 2 MiB
 * hugepages when the system has them free and they can be locked (if they
 * cannot, one warning, and 4 KiB pages from then on).  It is made visible to a device by
 * mapping it into that device's bus; one region may be mapped into several
 * buses (a reactor's shared pool is mapped into every controller it has a
 * qpair on; under controller isolation each pool into one controller's bus
 * only), each mapping with its own IOVA base.  Translation inside one region is O(1):
 * iova = base_iova + (p - base).
 *
 * A pool is a region plus a buddy allocator of 4 KiB pages.  It is used by one
 * thread only (the owning reactor): no locks, no atomics.
 */
#ifndef NVMEFS_DMA_H
#define NVMEFS_DMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"

#define NVME_PAGE_SHIFT 12
#define NVME_PAGE_SIZE  (1u << NVME_PAGE_SHIFT)

struct nvme_dma_region {
	void *vaddr;
	size_t len; /* bytes, a multiple of 4 KiB (of 2 MiB when huge) */
	int node;   /* NUMA node it was bound to, -1 for any */
	bool huge;  /* backed by hugetlb pages */
};

/* Allocate len bytes (rounded up to 4 KiB) of zeroed, pinned memory; node >= 0
 * binds it to that NUMA node when libnuma is available. */
int nvme_dma_alloc(size_t len, int node, struct nvme_dma_region *out);
void nvme_dma_free(struct nvme_dma_region *r);
/* Fault injection for tests: hugepages behave as if they could not be
 * locked (the fallback to 4 KiB pages runs).  Also forgets an earlier
 * failure, so the next allocation tries hugepages again. */
void nvme_dma_fault_huge_lock(bool on);

/* Map the whole region into bus; *iova receives its base.  The region must
 * stay allocated until nvme_dma_unmap. */
int nvme_dma_map(struct nvme_bus *bus, struct nvme_dma_region *r, uint64_t *iova);
/* 0, or the bus's error (logged): then the device may still reach r. */
int nvme_dma_unmap(struct nvme_bus *bus, struct nvme_dma_region *r, uint64_t iova);

/* Ordinary (not DMA) memory on a NUMA node, for rings' bookkeeping, trackers
 * and reactor structures: 64-byte aligned, zeroed.  node < 0: anywhere. */
void *nvme_mem_alloc(size_t len, int node);
void nvme_mem_free(void *p, size_t len);

/* ---- buffer pool ---- */
struct nvme_buf_pool {
	struct nvme_dma_region region;
	uint8_t *base;
	uint32_t npages;
	uint8_t max_order; /* largest block: 4 KiB << max_order */
	uint32_t free_pages;
	/* per page: 0 = not the head of a free block, else order + 1 */
	uint8_t *free_order;
	/* intrusive doubly linked free lists by order, page indices, UINT32_MAX = none */
	uint32_t *next, *prev;
	uint32_t head[32];
};

/* A pool of at least bytes (rounded up to a power-of-two number of 4 KiB
 * pages is not required: the region is carved into maximal buddy blocks). */
int nvme_pool_create(size_t bytes, int node, struct nvme_buf_pool **out);
void nvme_pool_destroy(struct nvme_buf_pool *p);
/* 4 KiB-aligned block of at least len bytes (rounded up to a power of two
 * number of pages); NULL when none is free. */
void *nvme_pool_alloc(struct nvme_buf_pool *p, size_t len);
/* The bytes of the pool such a block takes. */
size_t nvme_pool_block_size(size_t len);
/* len must be what was passed to nvme_pool_alloc (or rounds the same). */
void nvme_pool_free(struct nvme_buf_pool *p, void *buf, size_t len);

static inline bool nvme_pool_contains(const struct nvme_buf_pool *p, const void *ptr, size_t len)
{
	const uint8_t *c = ptr;
	return c >= p->base && len <= p->region.len && (size_t)(c - p->base) <= p->region.len - len;
}

/* O(1) translation for one mapping of the pool (base_iova from nvme_dma_map). */
static inline uint64_t nvme_pool_iova(const struct nvme_buf_pool *p, uint64_t base_iova,
                                      const void *ptr)
{
	return base_iova + (uint64_t)((const uint8_t *)ptr - p->base);
}

#endif

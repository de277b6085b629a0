/* dma.c - pinned, NUMA-local DMA regions and the per-reactor buddy pool. */
#include "dma.h"

#include <errno.h>
#include <numa.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"

#define HUGE_SIZE (2u << 20)

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static bool numa_ok(int node)
{
	return node >= 0 && numa_available() >= 0 && node <= numa_max_node();
}

/* Bind before the first touch: pages are placed when they fault in, so the
 * policy must be set before mlock populates them. */
static void bind_node(void *p, size_t len, int node)
{
	if (numa_ok(node))
		numa_tonode_memory(p, len, node);
}

/* Hugepages that cannot be locked (RLIMIT_MEMLOCK below a 2 MiB page, a
 * hugetlb pool the kernel will not pin) are not tried again: every region
 * then uses 4 KiB pages, said once. */
static _Atomic bool huge_unlockable;
static _Atomic bool fault_huge_lock;

void nvme_dma_fault_huge_lock(bool on)
{
	atomic_store(&fault_huge_lock, on);
	atomic_store(&huge_unlockable, false);
}

/* MAP_FAILED when hugepages are not to be had; *why then says which case. */
static void *try_huge(size_t hlen, int node, const char **why)
{
	*why = "hugepages cannot be locked";
	if (atomic_load(&huge_unlockable))
		return MAP_FAILED;
	void *p = MAP_FAILED;
	int e = ENOMEM;
	if (!atomic_load(&fault_huge_lock)) {
		p = mmap(NULL, hlen, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p == MAP_FAILED) {
			/* none free: not an error, and may change */
			*why = "not enough free 2 MiB hugepages";
			return MAP_FAILED;
		}
		bind_node(p, hlen, node);
		if (mlock(p, hlen) == 0)
			return p;
		e = errno;
		munmap(p, hlen);
	}
	if (!atomic_exchange(&huge_unlockable, true))
		log_warn("dma: hugepages cannot be locked (%s); DMA memory uses 4 KiB pages",
		         strerror(e));
	return MAP_FAILED;
}

/* nvme_dma_alloc; *why (when not NULL) is set, on success with 4 KiB pages,
 * to the reason hugepages were not used. */
static int dma_alloc(size_t len, int node, struct nvme_dma_region *out, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	*why = "smaller than a 2 MiB hugepage";
	memset(out, 0, sizeof(*out));
	out->node = numa_ok(node) ? node : -1;
	if (len == 0)
		return -EINVAL;
	len = round_up(len, NVME_PAGE_SIZE);

	/* Hugepages first when the request is big enough: fewer IOMMU entries
	 * and TLB misses.  Without MAP_NORESERVE the mmap itself fails when the
	 * hugetlb pool is short (with it, mlock would fail later instead). */
	void *p = MAP_FAILED;
	if (len >= HUGE_SIZE) {
		size_t hlen = round_up(len, HUGE_SIZE);
		p = try_huge(hlen, out->node, why);
		if (p != MAP_FAILED) {
			out->vaddr = p;
			out->len = hlen;
			out->huge = true;
			return 0;
		}
	}
	if (p == MAP_FAILED) {
		/* MAP_POPULATE only when no node binding is wanted: binding must
		 * precede population. */
		int pop = out->node < 0 ? MAP_POPULATE : 0;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | pop, -1,
		         0);
		if (p == MAP_FAILED) {
			int e = errno;
			log_err("dma: cannot map %zu bytes: %s", len, strerror(e));
			return -e;
		}
	}
	bind_node(p, len, out->node);
	/* Pinned: the device holds these addresses; the kernel must never page
	 * them out or migrate them under it. */
	if (mlock(p, len) != 0) {
		int e = errno;
		log_err("dma: cannot lock %zu bytes in memory: %s (raise RLIMIT_MEMLOCK / "
		        "LimitMEMLOCK)",
		        len, strerror(e));
		munmap(p, len);
		return -e;
	}
	out->vaddr = p;
	out->len = len;
	return 0;
}

int nvme_dma_alloc(size_t len, int node, struct nvme_dma_region *out)
{
	return dma_alloc(len, node, out, NULL);
}

void nvme_dma_free(struct nvme_dma_region *r)
{
	if (!r || !r->vaddr)
		return;
	munlock(r->vaddr, r->len);
	munmap(r->vaddr, r->len);
	r->vaddr = NULL;
	r->len = 0;
}

int nvme_dma_map(struct nvme_bus *bus, struct nvme_dma_region *r, uint64_t *iova)
{
	int rc = bus->ops->dma_map(bus, r->vaddr, r->len, iova);
	if (rc < 0)
		log_err("%s: cannot map %zu bytes of DMA memory: %s", bus->name, r->len,
		        strerror(-rc));
	return rc;
}

int nvme_dma_unmap(struct nvme_bus *bus, struct nvme_dma_region *r, uint64_t iova)
{
	int rc = bus->ops->dma_unmap(bus, r->vaddr, r->len, iova);
	if (rc < 0)
		log_warn("%s: unmapping DMA memory failed: %s", bus->name, strerror(-rc));
	return rc;
}

void *nvme_mem_alloc(size_t len, int node)
{
	len = round_up(len ? len : 1, NVME_PAGE_SIZE);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	bind_node(p, len, node);
	return p;
}

void nvme_mem_free(void *p, size_t len)
{
	if (p)
		munmap(p, round_up(len ? len : 1, NVME_PAGE_SIZE));
}

/* ---- buddy pool ---- */

#define NONE UINT32_MAX

static unsigned order_of(size_t len)
{
	size_t pages = (len + NVME_PAGE_SIZE - 1) >> NVME_PAGE_SHIFT;
	unsigned o = 0;
	while (((size_t)1 << o) < pages)
		o++;
	return o;
}

size_t nvme_pool_block_size(size_t len)
{
	return (size_t)NVME_PAGE_SIZE << order_of(len);
}

static void list_push(struct nvme_buf_pool *p, uint32_t i, unsigned o)
{
	p->prev[i] = NONE;
	p->next[i] = p->head[o];
	if (p->head[o] != NONE)
		p->prev[p->head[o]] = i;
	p->head[o] = i;
	p->free_order[i] = (uint8_t)(o + 1);
}

static void list_del(struct nvme_buf_pool *p, uint32_t i, unsigned o)
{
	if (p->prev[i] != NONE)
		p->next[p->prev[i]] = p->next[i];
	else
		p->head[o] = p->next[i];
	if (p->next[i] != NONE)
		p->prev[p->next[i]] = p->prev[i];
	p->free_order[i] = 0;
}

/* One line per pool, at its creation: the pools are nearly all of the DMA
 * memory, so this says whether the hugepages reserved for the daemon were
 * taken, and on which node they had to be free. */
static void pool_log(const struct nvme_dma_region *r, const char *why)
{
	char size[32], node[32];
	if (r->len % (1u << 20) == 0)
		snprintf(size, sizeof(size), "%zu MiB", r->len >> 20);
	else
		snprintf(size, sizeof(size), "%zu KiB", r->len >> 10);
	if (r->node >= 0)
		snprintf(node, sizeof(node), "NUMA node %d", r->node);
	else
		snprintf(node, sizeof(node), "any NUMA node");
	if (r->huge)
		log_info("dma: buffer pool of %s on %s: %zu 2 MiB hugepages", size, node,
		         r->len / HUGE_SIZE);
	else
		log_info("dma: buffer pool of %s on %s: 4 KiB pages (%s)", size, node, why);
}

int nvme_pool_create(size_t bytes, int node, struct nvme_buf_pool **out)
{
	struct nvme_buf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	const char *why;
	int rc = dma_alloc(bytes, node, &p->region, &why);
	if (rc < 0)
		goto err_free;
	pool_log(&p->region, why);
	p->base = p->region.vaddr;
	p->npages = (uint32_t)(p->region.len >> NVME_PAGE_SHIFT);
	p->free_order = calloc(p->npages, 1);
	p->next = calloc(p->npages, sizeof(uint32_t));
	p->prev = calloc(p->npages, sizeof(uint32_t));
	if (!p->free_order || !p->next || !p->prev) {
		rc = -ENOMEM;
		goto err_region;
	}
	p->max_order = (uint8_t)order_of(p->region.len);
	if (p->max_order > 30)
		p->max_order = 30;
	for (unsigned o = 0; o < 32; o++)
		p->head[o] = NONE;
	/* Carve the region into the largest naturally aligned blocks. */
	for (uint32_t i = 0; i < p->npages;) {
		unsigned o = p->max_order;
		while (o > 0 && ((i & ((1u << o) - 1)) != 0 || i + (1u << o) > p->npages))
			o--;
		list_push(p, i, o);
		i += 1u << o;
	}
	p->free_pages = p->npages;
	*out = p;
	return 0;
err_region:
	free(p->free_order);
	free(p->next);
	free(p->prev);
	nvme_dma_free(&p->region);
err_free:
	free(p);
	return rc;
}

void nvme_pool_destroy(struct nvme_buf_pool *p)
{
	if (!p)
		return;
	nvme_dma_free(&p->region);
	free(p->free_order);
	free(p->next);
	free(p->prev);
	free(p);
}

void *nvme_pool_alloc(struct nvme_buf_pool *p, size_t len)
{
	if (len == 0)
		len = 1;
	unsigned want = order_of(len);
	if (want > p->max_order)
		return NULL;
	unsigned o = want;
	while (o <= p->max_order && p->head[o] == NONE)
		o++;
	if (o > p->max_order)
		return NULL;
	uint32_t i = p->head[o];
	list_del(p, i, o);
	/* split: the upper halves go back on the smaller lists */
	while (o > want) {
		o--;
		list_push(p, i + (1u << o), o);
	}
	p->free_pages -= 1u << want;
	return p->base + ((size_t)i << NVME_PAGE_SHIFT);
}

void nvme_pool_free(struct nvme_buf_pool *p, void *buf, size_t len)
{
	if (!buf)
		return;
	if (len == 0)
		len = 1;
	uint8_t *c = buf;
	unsigned o = order_of(len);
	if (c < p->base || ((size_t)(c - p->base) & (NVME_PAGE_SIZE - 1)) != 0 ||
	    (size_t)(c - p->base) >> NVME_PAGE_SHIFT >= p->npages || o > p->max_order) {
		log_err("dma pool: freeing %p (%zu bytes) that is not from this pool", buf, len);
		return;
	}
	uint32_t i = (uint32_t)((size_t)(c - p->base) >> NVME_PAGE_SHIFT);
	if (p->free_order[i] != 0 || (i & ((1u << o) - 1)) != 0) {
		log_err("dma pool: bad or double free of %p (%zu bytes)", buf, len);
		return;
	}
	p->free_pages += 1u << o;
	while (o < p->max_order) {
		uint32_t b = i ^ (1u << o);
		if (b + (1u << o) > p->npages || p->free_order[b] != o + 1)
			break;
		list_del(p, b, o);
		if (b < i)
			i = b;
		o++;
	}
	list_push(p, i, o);
}

/* bus.h - what the NVMe engine needs from a PCI function.
 *
 * Two implementations: vfio.c (a real controller through VFIO) and the
 * built-in software controller (src/sim).  The engine reaches the device only
 * through this interface: registers and doorbells in BAR0, DMA through
 * mappings it registered here, MSI-X vectors delivered to eventfds.
 *
 * Registers are read and written through ops (not on the I/O path).  Doorbells
 * are on the I/O path: the engine stores straight into bus->bar0 at the
 * doorbell offset with nvme_bus_doorbell(), which is a plain MMIO store on real
 * hardware and additionally calls db_notify when a software device needs to
 * see the write (the simulator's inline mode executes commands right there).
 *
 * All functions return 0 or a negative errno.
 */
#ifndef NVMEFS_BUS_H
#define NVMEFS_BUS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nvme_bus;

struct nvme_bus_ops {
	uint32_t (*read32)(struct nvme_bus *bus, uint32_t off);
	uint64_t (*read64)(struct nvme_bus *bus, uint32_t off);
	void (*write32)(struct nvme_bus *bus, uint32_t off, uint32_t val);
	void (*write64)(struct nvme_bus *bus, uint32_t off, uint64_t val);

	/* Make [vaddr, vaddr+len) reachable by the device; *iova receives the
	 * bus address.  vaddr and len are 4 KiB aligned.  The memory stays
	 * pinned until dma_unmap. */
	int (*dma_map)(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t *iova);
	int (*dma_unmap)(struct nvme_bus *bus, void *vaddr, size_t len, uint64_t iova);

	/* Wire MSI-X vectors 0..n-1 to eventfds efds[0..n-1] (-1: leave that
	 * vector unwired).  n == 0 disables them all.  -ENOTSUP/-EINVAL when
	 * the device has fewer than n vectors (bus->nr_vectors says how many). */
	int (*irq_set)(struct nvme_bus *bus, unsigned n, const int *efds);

	/* Function level reset if the bus offers one; -ENOTSUP otherwise. */
	int (*reset)(struct nvme_bus *bus);

	/* Bus mastering on or off (PCI_COMMAND.BME): off, the function can
	 * start no DMA at all.  NULL when the bus cannot switch it (use
	 * nvme_bus_master). */
	int (*bus_master)(struct nvme_bus *bus, bool on);

	/* Wire the VFIO request IRQ (the kernel asks for the device back: hot
	 * removal, unbind) and the error IRQ (AER) to eventfds; efd -1 unwires.
	 * -ENOTSUP when the function offers none.  NULL in a bus without them
	 * (the software controller): use nvme_bus_req_irq_set/err_irq_set. */
	int (*req_irq_set)(struct nvme_bus *bus, int efd);
	int (*err_irq_set)(struct nvme_bus *bus, int efd);

	void (*close)(struct nvme_bus *bus);
};

struct nvme_bus {
	const struct nvme_bus_ops *ops;
	/* BAR0 mapping; doorbells at NVME_REG_DBS.  For the software controller
	 * this is ordinary memory that the device model watches. */
	volatile uint8_t *bar0;
	size_t bar0_len;
	/* NULL on real hardware; else called after every doorbell store with
	 * the doorbell's BAR0 offset and the value written. */
	void (*db_notify)(struct nvme_bus *bus, uint32_t off, uint32_t val);
	unsigned nr_vectors; /* MSI-X vectors the function has (0: none) */
	int numa_node;       /* device's NUMA node, -1 if unknown */
	char name[64];       /* PCI address or "sim:NAME", for messages */
};

static inline uint32_t nvme_bus_read32(struct nvme_bus *b, uint32_t off)
{
	return b->ops->read32(b, off);
}
static inline uint64_t nvme_bus_read64(struct nvme_bus *b, uint32_t off)
{
	return b->ops->read64(b, off);
}
static inline void nvme_bus_write32(struct nvme_bus *b, uint32_t off, uint32_t val)
{
	b->ops->write32(b, off, val);
}
static inline void nvme_bus_write64(struct nvme_bus *b, uint32_t off, uint64_t val)
{
	b->ops->write64(b, off, val);
}

static inline int nvme_bus_master(struct nvme_bus *b, bool on)
{
	return b->ops->bus_master ? b->ops->bus_master(b, on) : -ENOTSUP;
}
static inline int nvme_bus_req_irq_set(struct nvme_bus *b, int efd)
{
	return b->ops->req_irq_set ? b->ops->req_irq_set(b, efd) : -ENOTSUP;
}
static inline int nvme_bus_err_irq_set(struct nvme_bus *b, int efd)
{
	return b->ops->err_irq_set ? b->ops->err_irq_set(b, efd) : -ENOTSUP;
}

/* The one store per queue per pass that the I/O path makes.  A release store:
 * the SQE (or the consumed CQEs) is ordered before the device sees the new
 * value, and the software device's acquire load of it pairs with it.  On x86
 * it compiles to the same single mov as a volatile store (TSO: stores are not
 * reordered with earlier stores), so it is also the correct MMIO write to a
 * real controller's BAR (uncached memory, the store is not merged or elided
 * since the pointer is volatile). */
static inline void nvme_bus_doorbell(struct nvme_bus *b, volatile uint32_t *db, uint32_t val)
{
	__atomic_store_n(db, val, __ATOMIC_RELEASE);
	if (__builtin_expect(b->db_notify != NULL, 0))
		b->db_notify(b, (uint32_t)((volatile uint8_t *)db - b->bar0), val);
}

/* Open a VFIO-bound PCI function by address ("0000:01:00.0").  Errors are
 * printed to stderr with what to do about them.  (vfio.c) */
int vfio_bus_open(const char *bdf, struct nvme_bus **out);

#endif

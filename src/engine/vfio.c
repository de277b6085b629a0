/* vfio.c - nvme_bus over VFIO (see bus.h).
 *
 * One container per bus holding the device's IOMMU group, type1 IOMMU.
 * BAR0 is mmap()ed and registers are plain volatile loads and stores; PCI
 * config space goes through the device fd's config region.  DMA addresses
 * come from a bump allocator inside the IOVA ranges the IOMMU reports, kept
 * deliberately unlike the process's virtual addresses, so that a driver bug
 * that hands the device a virtual address faults instead of working by luck.
 *
 * Every refusal says what is wrong and what to do about it: the operator
 * meets these messages at start-up, usually without the source at hand.
 */
#include "bus.h"
#include "excl.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define VFIO_PAGE 4096ull
#define VFIO_BIG_ALIGN (2ull << 20)
/* Leave the bottom of the IOVA space unmapped: a PRP left at zero (or
 * nearly) by a bug then faults in the IOMMU instead of hitting a buffer. */
#define VFIO_IOVA_FLOOR (1ull << 20)
#define VFIO_MAX_RANGES 16
/* registers plus the admin queue's doorbells: less is not an NVMe BAR0 */
#define VFIO_MIN_BAR0 0x1008u

struct vfio_range {
	uint64_t start, end; /* inclusive */
};

struct vfio_map {
	uint64_t vaddr, iova, len;
};

struct vfio_bus {
	struct nvme_bus bus; /* first: the engine holds a struct nvme_bus * */
	int container, group, device;
	int group_id;
	uint64_t cfg_off;    /* config space region offset in the device fd */
	bool has_reset;
	bool cmd_set;        /* bus mastering was turned on by us */
	void *bar_map;       /* what to munmap */
	size_t bar_map_len;

	pthread_mutex_t lock; /* DMA bookkeeping: maps may come from several threads */
	struct vfio_range ranges[VFIO_MAX_RANGES];
	unsigned nr_ranges;
	unsigned cur_range;
	uint64_t next_iova;
	struct vfio_map *maps;
	size_t nr_maps, cap_maps;

	unsigned irqs_enabled; /* vectors currently enabled (0: MSI-X off) */
	bool req_wired, err_wired; /* request / error IRQ wired to an eventfd */
};

static struct vfio_bus *to_vb(struct nvme_bus *b)
{
	return (struct vfio_bus *)b;
}

/* ---- registers ---- */

static uint32_t vfio_read32(struct nvme_bus *b, uint32_t off)
{
	return *(volatile uint32_t *)(b->bar0 + off);
}

/* Two 32-bit accesses, low then high: every controller takes those, not all
 * take a 64-bit one.  The 64-bit registers the engine reads (CAP) are
 * constant, so tearing cannot happen. */
static uint64_t vfio_read64(struct nvme_bus *b, uint32_t off)
{
	uint64_t lo = vfio_read32(b, off);
	uint64_t hi = vfio_read32(b, off + 4);

	return lo | hi << 32;
}

static void vfio_write32(struct nvme_bus *b, uint32_t off, uint32_t val)
{
	*(volatile uint32_t *)(b->bar0 + off) = val;
}

static void vfio_write64(struct nvme_bus *b, uint32_t off, uint64_t val)
{
	vfio_write32(b, off, (uint32_t)val);
	vfio_write32(b, off + 4, (uint32_t)(val >> 32));
}

/* ---- sysfs helpers ---- */

static int vfio_read_link_base(const char *path, char *out, size_t len)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	const char *base;

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	if (strlen(base) >= len)
		return -ENAMETOOLONG;
	strcpy(out, base);
	return 0;
}

/* The driver a PCI function is bound to, or "" when none. */
static void vfio_pci_driver(const char *bdf, char *out, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", bdf);
	if (vfio_read_link_base(path, out, len) < 0)
		out[0] = '\0';
}

static int vfio_numa_node(const char *bdf)
{
	char path[PATH_MAX];
	FILE *f;
	int node = -1;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bdf);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node < 0 ? -1 : node;
}

/* Accept "DDDD:BB:DD.F" and the short "BB:DD.F" (domain 0). */
static int vfio_normalize_bdf(const char *in, char *out, size_t len)
{
	unsigned dom = 0, bus, dev, fn;
	char tail;

	if (sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4) {
		/* full form */
	} else if (sscanf(in, "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3) {
		dom = 0;
	} else {
		return -EINVAL;
	}
	if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return -EINVAL;
	snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
}

/* Name every device of the group that keeps it from being viable: bound to
 * a driver other than vfio-pci or pci-stub.  Bridges do not count (VFIO
 * ignores their driver), nor do devices with no driver. */
static void vfio_explain_group(int group_id)
{
	char path[PATH_MAX], drv[64], cls[16];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%d/devices", group_id);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		vfio_pci_driver(de->d_name, drv, sizeof(drv));
		if (!drv[0] || strcmp(drv, "vfio-pci") == 0 || strcmp(drv, "pci-stub") == 0)
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", de->d_name);
		cls[0] = '\0';
		f = fopen(path, "r");
		if (f) {
			if (!fgets(cls, sizeof(cls), f))
				cls[0] = '\0';
			fclose(f);
		}
		if (strncmp(cls, "0x0604", 6) == 0)
			continue;
		log_err("  %s in IOMMU group %d is bound to %s: bind it to vfio-pci too "
			"(vfio-bind %s) or unbind it", de->d_name, group_id, drv, de->d_name);
	}
	closedir(d);
}

/* ---- checks before touching /dev/vfio ---- */

static int vfio_check_device(const char *bdf, int *group_id)
{
	char path[PATH_MAX], drv[64], grp[32];
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
	if (stat(path, &st) < 0) {
		log_err("%s: no such PCI device (see lspci -D or /sys/bus/pci/devices)", bdf);
		return -ENODEV;
	}
	vfio_pci_driver(bdf, drv, sizeof(drv));
	if (strcmp(drv, "vfio-pci") != 0) {
		log_err("%s: bound to %s, not vfio-pci: bind it with: vfio-bind %s", bdf,
			drv[0] ? drv : "no driver", bdf);
		return -ENODEV;
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	ret = vfio_read_link_base(path, grp, sizeof(grp));
	if (ret < 0) {
		log_err("%s: no IOMMU group: is the IOMMU enabled? (kernel command line intel_iommu=on "
			"or amd_iommu=on, and VT-d/AMD-Vi on in the firmware)", bdf);
		return -ENODEV;
	}
	*group_id = atoi(grp);
	return 0;
}

/* The processes holding bdf's VFIO device file (/dev/vfio/devices/vfioN,
 * iommufd's way in, which also keeps the group from being opened), as
 * excl_users says them; 0 when none. */
static int vfio_cdev_users(const char *bdf, char *who, size_t len)
{
	char dir[PATH_MAX], dev[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "/sys/bus/pci/devices/%s/vfio-dev", bdf);
	d = opendir(dir);
	if (!d)
		return 0;
	while (!n && (de = readdir(d)))
		if (!strncmp(de->d_name, "vfio", 4)) {
			snprintf(dev, sizeof(dev), "/dev/vfio/devices/%s", de->d_name);
			n = excl_users(dev, who, len);
		}
	closedir(d);
	return n;
}

/* ---- container, group, device ---- */

static int vfio_open_container(struct vfio_bus *vb)
{
	int api;

	vb->container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	if (vb->container < 0) {
		int e = errno;

		if (e == ENOENT)
			log_err("/dev/vfio/vfio missing: load the VFIO modules (modprobe vfio-pci)");
		else
			log_err("open /dev/vfio/vfio: %s (run as root or with access to /dev/vfio)",
				strerror(e));
		return -e;
	}
	api = ioctl(vb->container, VFIO_GET_API_VERSION);
	if (api != VFIO_API_VERSION) {
		log_err("/dev/vfio/vfio: VFIO API version %d, this program speaks %d", api,
			VFIO_API_VERSION);
		return -EPROTO;
	}
	return 0;
}

static int vfio_open_group(struct vfio_bus *vb)
{
	struct vfio_group_status gs = {.argsz = sizeof(gs)};
	char path[64];
	int e;

	snprintf(path, sizeof(path), "/dev/vfio/%d", vb->group_id);
	vb->group = open(path, O_RDWR | O_CLOEXEC);
	if (vb->group < 0) {
		e = errno;
		if (e == EBUSY) {
			char who[256];

			/* VFIO lets one process hold a group: name it */
			if (excl_users(path, who, sizeof(who)) == 0 &&
			    vfio_cdev_users(vb->bus.name, who, sizeof(who)) == 0)
				snprintf(who, sizeof(who), "another process (none found in /proc)");
			log_err("%s: %s is in use by %s: a device serves one process at a time "
				"(another nvmefsd, or a VM given it?); stop that one first",
				vb->bus.name, path, who);
		}
		else if (e == ENOENT)
			log_err("%s: %s missing although the device is bound to vfio-pci", vb->bus.name,
				path);
		else
			log_err("%s: open %s: %s", vb->bus.name, path, strerror(e));
		return -e;
	}
	if (ioctl(vb->group, VFIO_GROUP_GET_STATUS, &gs) < 0) {
		e = errno;
		log_err("%s: VFIO_GROUP_GET_STATUS: %s", vb->bus.name, strerror(e));
		return -e;
	}
	if (!(gs.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		log_err("%s: IOMMU group %d is not viable: every device in it must be bound to "
			"vfio-pci or to no driver:", vb->bus.name, vb->group_id);
		vfio_explain_group(vb->group_id);
		return -EPERM;
	}
	if (ioctl(vb->group, VFIO_GROUP_SET_CONTAINER, &vb->container) < 0) {
		e = errno;
		log_err("%s: VFIO_GROUP_SET_CONTAINER: %s", vb->bus.name, strerror(e));
		return -e;
	}
	return 0;
}

static int vfio_set_iommu(struct vfio_bus *vb)
{
	static const int types[] = {VFIO_TYPE1v2_IOMMU, VFIO_TYPE1_IOMMU};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (ioctl(vb->container, VFIO_CHECK_EXTENSION, types[i]) != 1)
			continue;
		if (ioctl(vb->container, VFIO_SET_IOMMU, types[i]) == 0)
			return 0;
		log_err("%s: VFIO_SET_IOMMU type %d: %s", vb->bus.name, types[i], strerror(errno));
		return -errno;
	}
	log_err("%s: the kernel offers no type1 IOMMU for VFIO (vfio_iommu_type1 not loaded?)",
		vb->bus.name);
	return -ENOTSUP;
}

/* Capability chains sit at offsets the kernel chose, not necessarily
 * aligned for their structures: read them with memcpy, bounded by argsz. */
static bool vfio_cap_at(const void *buf, uint32_t argsz, uint32_t off, struct vfio_info_cap_header *h)
{
	if (off < sizeof(uint32_t) || off > argsz || argsz - off < sizeof(*h))
		return false;
	memcpy(h, (const char *)buf + off, sizeof(*h));
	return true;
}

/* IOVA ranges the IOMMU accepts (the MSI window and reserved regions are
 * holes).  Without the capability (old kernels) assume the low 4 GiB minus
 * the x86 MSI window, which every IOMMU we know maps. */
static int vfio_read_iova_ranges(struct vfio_bus *vb)
{
	struct vfio_iommu_type1_info probe = {.argsz = sizeof(probe)};
	struct vfio_iommu_type1_info *info = NULL;
	uint32_t off;
	int ret = 0;

	vb->nr_ranges = 0;
	if (ioctl(vb->container, VFIO_IOMMU_GET_INFO, &probe) < 0) {
		ret = -errno;
		log_err("%s: VFIO_IOMMU_GET_INFO: %s", vb->bus.name, strerror(errno));
		return ret;
	}
	if ((probe.flags & VFIO_IOMMU_INFO_CAPS) && probe.argsz > sizeof(probe)) {
		info = calloc(1, probe.argsz);
		if (!info)
			return -ENOMEM;
		info->argsz = probe.argsz;
		if (ioctl(vb->container, VFIO_IOMMU_GET_INFO, info) < 0) {
			ret = -errno;
			log_err("%s: VFIO_IOMMU_GET_INFO (caps): %s", vb->bus.name, strerror(errno));
			goto out;
		}
		for (off = info->cap_offset; off;) {
			struct vfio_info_cap_header h;
			const char *base = (const char *)info;
			const size_t ro = offsetof(struct vfio_iommu_type1_info_cap_iova_range, iova_ranges);
			uint32_t nr;

			if (!vfio_cap_at(info, info->argsz, off, &h))
				break;
			if (h.id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE &&
			    off + ro <= info->argsz) {
				memcpy(&nr, base + off + offsetof(struct vfio_iommu_type1_info_cap_iova_range, nr_iovas),
				       sizeof(nr));
				for (uint32_t i = 0; i < nr && vb->nr_ranges < VFIO_MAX_RANGES; i++) {
					struct vfio_iova_range r;
					size_t at = off + ro + i * sizeof(r);

					if (at + sizeof(r) > info->argsz)
						break;
					memcpy(&r, base + at, sizeof(r));
					vb->ranges[vb->nr_ranges].start = r.start;
					vb->ranges[vb->nr_ranges].end = r.end;
					vb->nr_ranges++;
				}
			}
			if (h.next <= off)
				break; /* end, or a loop in the chain: stop rather than spin */
			off = h.next;
		}
	}
	if (vb->nr_ranges == 0) {
		vb->ranges[0] = (struct vfio_range){0, 0xfedfffffull};
		vb->nr_ranges = 1;
	}
	for (unsigned i = 0; i < vb->nr_ranges; i++)
		log_debug("%s: IOVA range 0x%" PRIx64 "-0x%" PRIx64, vb->bus.name, vb->ranges[i].start,
			  vb->ranges[i].end);
	vb->cur_range = 0;
	vb->next_iova = vb->ranges[0].start;
out:
	free(info);
	return ret;
}

static int vfio_open_device(struct vfio_bus *vb, const char *bdf)
{
	struct vfio_device_info di = {.argsz = sizeof(di)};
	struct vfio_region_info cfg = {.argsz = sizeof(cfg), .index = VFIO_PCI_CONFIG_REGION_INDEX};
	int e;

	vb->device = ioctl(vb->group, VFIO_GROUP_GET_DEVICE_FD, bdf);
	if (vb->device < 0) {
		e = errno;
		if (e == EBUSY)
			log_err("%s: device already opened by another process", bdf);
		else
			log_err("%s: VFIO_GROUP_GET_DEVICE_FD: %s", bdf, strerror(e));
		return -e;
	}
	if (ioctl(vb->device, VFIO_DEVICE_GET_INFO, &di) < 0) {
		e = errno;
		log_err("%s: VFIO_DEVICE_GET_INFO: %s", bdf, strerror(e));
		return -e;
	}
	if (!(di.flags & VFIO_DEVICE_FLAGS_PCI) || di.num_regions <= VFIO_PCI_CONFIG_REGION_INDEX) {
		log_err("%s: not a PCI device as VFIO sees it (flags 0x%x)", bdf, di.flags);
		return -ENODEV;
	}
	vb->has_reset = di.flags & VFIO_DEVICE_FLAGS_RESET;
	if (ioctl(vb->device, VFIO_DEVICE_GET_REGION_INFO, &cfg) < 0) {
		e = errno;
		log_err("%s: config space region: %s", bdf, strerror(e));
		return -e;
	}
	vb->cfg_off = cfg.offset;
	return 0;
}

/* mmap BAR0.  When VFIO reports sparse mmap areas (parts of the BAR it
 * traps, e.g. the MSI-X table on some kernels), reserve the whole length and
 * map the areas into it; the registers and doorbells must lie in an area. */
static int vfio_map_bar0(struct vfio_bus *vb)
{
	struct vfio_region_info ri = {.argsz = sizeof(ri), .index = VFIO_PCI_BAR0_REGION_INDEX};
	struct vfio_region_info *full = NULL;
	uint32_t sparse_off = 0, nr_areas = 0; /* the sparse mmap capability, if any */
	uint8_t *base;
	int ret = 0;

	if (ioctl(vb->device, VFIO_DEVICE_GET_REGION_INFO, &ri) < 0) {
		ret = -errno;
		log_err("%s: BAR0 region info: %s", vb->bus.name, strerror(errno));
		return ret;
	}
	if (ri.size < VFIO_MIN_BAR0 || !(ri.flags & VFIO_REGION_INFO_FLAG_MMAP)) {
		log_err("%s: BAR0 is %s (size 0x%llx): not an NVMe controller?", vb->bus.name,
			ri.flags & VFIO_REGION_INFO_FLAG_MMAP ? "too small" : "not mmap-able",
			(unsigned long long)ri.size);
		return -ENODEV;
	}
	if ((ri.flags & VFIO_REGION_INFO_FLAG_CAPS) && ri.argsz > sizeof(ri)) {
		full = calloc(1, ri.argsz);
		if (!full)
			return -ENOMEM;
		full->argsz = ri.argsz;
		full->index = ri.index;
		if (ioctl(vb->device, VFIO_DEVICE_GET_REGION_INFO, full) < 0) {
			ret = -errno;
			log_err("%s: BAR0 region caps: %s", vb->bus.name, strerror(errno));
			goto out;
		}
		for (uint32_t off = full->cap_offset; off;) {
			struct vfio_info_cap_header h;

			if (!vfio_cap_at(full, full->argsz, off, &h))
				break;
			if (h.id == VFIO_REGION_INFO_CAP_SPARSE_MMAP &&
			    off + offsetof(struct vfio_region_info_cap_sparse_mmap, areas) <= full->argsz) {
				sparse_off = off;
				memcpy(&nr_areas,
				       (char *)full + off + offsetof(struct vfio_region_info_cap_sparse_mmap, nr_areas),
				       sizeof(nr_areas));
			}
			if (h.next <= off)
				break;
			off = h.next;
		}
	}
	vb->bar_map_len = ri.size;
	if (!sparse_off) {
		base = mmap(NULL, ri.size, PROT_READ | PROT_WRITE, MAP_SHARED, vb->device, (off_t)ri.offset);
		if (base == MAP_FAILED) {
			ret = -errno;
			log_err("%s: mmap BAR0: %s", vb->bus.name, strerror(errno));
			goto out;
		}
	} else {
		bool regs_covered = false;

		base = mmap(NULL, ri.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED) {
			ret = -errno;
			goto out;
		}
		for (uint32_t i = 0; i < nr_areas; i++) {
			struct vfio_region_sparse_mmap_area a;
			size_t at = sparse_off + offsetof(struct vfio_region_info_cap_sparse_mmap, areas) +
				    i * sizeof(a);
			uint64_t ao, as;

			if (at + sizeof(a) > full->argsz)
				break;
			memcpy(&a, (char *)full + at, sizeof(a));
			ao = a.offset;
			as = a.size;

			if (!as || ao + as > ri.size)
				continue;
			if (mmap(base + ao, as, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, vb->device,
				 (off_t)(ri.offset + ao)) == MAP_FAILED) {
				ret = -errno;
				log_err("%s: mmap BAR0 area 0x%" PRIx64 "+0x%" PRIx64 ": %s", vb->bus.name, ao,
					as, strerror(errno));
				munmap(base, ri.size);
				goto out;
			}
			if (ao == 0 && as >= VFIO_MIN_BAR0)
				regs_covered = true;
		}
		if (!regs_covered) {
			log_err("%s: VFIO does not let BAR0's registers and doorbells be mapped",
				vb->bus.name);
			munmap(base, ri.size);
			ret = -ENOTSUP;
			goto out;
		}
	}
	vb->bar_map = base;
	vb->bus.bar0 = base;
	vb->bus.bar0_len = ri.size;
out:
	free(full);
	return ret;
}

static int vfio_cfg_rw16(struct vfio_bus *vb, uint32_t off, uint16_t *val, bool write)
{
	ssize_t n = write ? pwrite(vb->device, val, 2, (off_t)(vb->cfg_off + off))
			  : pread(vb->device, val, 2, (off_t)(vb->cfg_off + off));

	if (n != 2)
		return n < 0 ? -errno : -EIO;
	return 0;
}

/* Memory space on so BAR0 decodes; bus mastering on so the device may DMA. */
static int vfio_set_command(struct vfio_bus *vb, bool on)
{
	uint16_t cmd;
	int ret = vfio_cfg_rw16(vb, PCI_COMMAND, &cmd, false);

	if (ret < 0)
		return ret;
	if (on)
		cmd |= PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
	else
		cmd &= (uint16_t)~PCI_COMMAND_MASTER;
	return vfio_cfg_rw16(vb, PCI_COMMAND, &cmd, true);
}

/* ---- DMA ---- */

static uint64_t vfio_align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Next free IOVA block of len bytes (lock held).  Large buffers get 2 MiB
 * alignment so the IOMMU can use large pages for them. */
static int vfio_iova_alloc(struct vfio_bus *vb, uint64_t vaddr, uint64_t len, uint64_t *iova)
{
	uint64_t align = len >= VFIO_BIG_ALIGN ? VFIO_BIG_ALIGN : VFIO_PAGE;

	while (vb->cur_range < vb->nr_ranges) {
		const struct vfio_range *r = &vb->ranges[vb->cur_range];
		uint64_t start = vb->next_iova < r->start ? r->start : vb->next_iova;

		if (start < VFIO_IOVA_FLOOR)
			start = VFIO_IOVA_FLOOR;
		start = vfio_align_up(start, align);
		/* never hand out the virtual address itself: an engine that
		 * confused the two would otherwise work by accident */
		if (start == vaddr)
			start += align;
		if (start >= r->start && start <= r->end && len - 1 <= r->end - start) {
			*iova = start;
			vb->next_iova = start + len;
			return 0;
		}
		vb->cur_range++;
		if (vb->cur_range < vb->nr_ranges)
			vb->next_iova = vb->ranges[vb->cur_range].start;
	}
	return -ENOSPC;
}

static void vfio_explain_map_error(struct vfio_bus *vb, int e, uint64_t len)
{
	struct rlimit rl;

	if (e == ENOMEM || e == EPERM) {
		char lim[32] = "unlimited";

		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			snprintf(lim, sizeof(lim), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
		log_err("%s: cannot pin %" PRIu64 " KiB for DMA: %s; the locked-memory limit "
			"(RLIMIT_MEMLOCK) is %s and must cover every DMA buffer; raise it with "
			"`ulimit -l unlimited` in the shell or LimitMEMLOCK=infinity in the systemd unit",
			vb->bus.name, len / 1024, strerror(e), lim);
	} else if (e == ENOSPC) {
		log_err("%s: VFIO_IOMMU_MAP_DMA: too many DMA mappings (vfio_iommu_type1 "
			"dma_entry_limit); use fewer, larger buffers", vb->bus.name);
	} else {
		log_err("%s: VFIO_IOMMU_MAP_DMA of %" PRIu64 " KiB: %s", vb->bus.name, len / 1024,
			strerror(e));
	}
}

static int vfio_dma_map(struct nvme_bus *b, void *vaddr, size_t len, uint64_t *iova)
{
	struct vfio_bus *vb = to_vb(b);
	struct vfio_iommu_type1_dma_map dm = {.argsz = sizeof(dm)};
	uint64_t va = (uintptr_t)vaddr, saved_next, io;
	unsigned saved_range;
	int ret;

	if (!vaddr || !len || (va & (VFIO_PAGE - 1)) || (len & (VFIO_PAGE - 1)))
		return -EINVAL;
	pthread_mutex_lock(&vb->lock);
	if (vb->nr_maps == vb->cap_maps) {
		size_t ncap = vb->cap_maps ? 2 * vb->cap_maps : 16;
		struct vfio_map *m = realloc(vb->maps, ncap * sizeof(*m));

		if (!m) {
			ret = -ENOMEM;
			goto out;
		}
		vb->maps = m;
		vb->cap_maps = ncap;
	}
	saved_next = vb->next_iova;
	saved_range = vb->cur_range;
	ret = vfio_iova_alloc(vb, va, len, &io);
	if (ret < 0) {
		log_err("%s: out of IOVA space for a %zu KiB DMA buffer", b->name, len / 1024);
		goto out;
	}
	dm.iova = io;
	dm.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
	dm.vaddr = va;
	dm.size = len;
	if (ioctl(vb->container, VFIO_IOMMU_MAP_DMA, &dm) < 0) {
		ret = -errno;
		vfio_explain_map_error(vb, errno, len);
		vb->next_iova = saved_next;
		vb->cur_range = saved_range;
		goto out;
	}
	vb->maps[vb->nr_maps++] = (struct vfio_map){va, dm.iova, len};
	*iova = dm.iova;
out:
	pthread_mutex_unlock(&vb->lock);
	return ret;
}

static int vfio_unmap_one(struct vfio_bus *vb, uint64_t iova, uint64_t len)
{
	struct vfio_iommu_type1_dma_unmap du = {.argsz = sizeof(du), .iova = iova, .size = len};

	if (ioctl(vb->container, VFIO_IOMMU_UNMAP_DMA, &du) < 0) {
		int e = errno;

		log_err("%s: VFIO_IOMMU_UNMAP_DMA iova 0x%" PRIx64 "+%" PRIu64 ": %s", vb->bus.name, iova,
			len, strerror(e));
		return -e;
	}
	return 0;
}

static int vfio_dma_unmap(struct nvme_bus *b, void *vaddr, size_t len, uint64_t iova)
{
	struct vfio_bus *vb = to_vb(b);
	int ret = -ENOENT;

	pthread_mutex_lock(&vb->lock);
	for (size_t i = 0; i < vb->nr_maps; i++) {
		struct vfio_map *m = &vb->maps[i];

		if (m->iova != iova || m->len != len || m->vaddr != (uintptr_t)vaddr)
			continue;
		ret = vfio_unmap_one(vb, iova, len);
		if (ret < 0)
			break;
		/* the most recent block goes back to the bump allocator */
		if (iova + len == vb->next_iova)
			vb->next_iova = iova;
		*m = vb->maps[--vb->nr_maps];
		break;
	}
	pthread_mutex_unlock(&vb->lock);
	if (ret == -ENOENT)
		log_err("%s: dma_unmap of iova 0x%" PRIx64 "+%zu that is not mapped", b->name, iova, len);
	return ret;
}

/* ---- MSI-X ---- */

static int vfio_irq_ioctl(struct vfio_bus *vb, unsigned n, const int *efds)
{
	size_t sz = sizeof(struct vfio_irq_set) + n * sizeof(int);
	struct vfio_irq_set *is = calloc(1, sz);
	int ret = 0;

	if (!is)
		return -ENOMEM;
	is->argsz = (uint32_t)sz;
	is->index = VFIO_PCI_MSIX_IRQ_INDEX;
	is->start = 0;
	is->count = n;
	if (n) {
		is->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
		memcpy(is->data, efds, n * sizeof(int));
	} else {
		is->flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
	}
	if (ioctl(vb->device, VFIO_DEVICE_SET_IRQS, is) < 0)
		ret = -errno;
	free(is);
	return ret;
}

static int vfio_irq_set(struct nvme_bus *b, unsigned n, const int *efds)
{
	struct vfio_bus *vb = to_vb(b);
	int ret;

	if (n > b->nr_vectors) {
		log_err("%s: %u MSI-X vectors wanted, the device has %u", b->name, n, b->nr_vectors);
		return -EINVAL;
	}
	if (n && !efds)
		return -EINVAL;
	/* VFIO can rewire vectors of an enabled block but not resize it:
	 * a different count means disable, then enable anew. */
	if (vb->irqs_enabled && vb->irqs_enabled != n) {
		ret = vfio_irq_ioctl(vb, 0, NULL);
		if (ret < 0) {
			log_err("%s: disabling MSI-X: %s", b->name, strerror(-ret));
			return ret;
		}
		vb->irqs_enabled = 0;
	}
	if (n == 0 && vb->irqs_enabled == 0)
		return 0;
	ret = vfio_irq_ioctl(vb, n, efds);
	if (ret < 0) {
		log_err("%s: VFIO_DEVICE_SET_IRQS (%u MSI-X vectors): %s", b->name, n, strerror(-ret));
		return ret;
	}
	vb->irqs_enabled = n;
	return 0;
}

/* ---- request and error IRQs ---- */

/* Wire (efd >= 0) or unwire (-1) the one interrupt at a VFIO PCI index that
 * has a single one: the request IRQ (the kernel wants the device back) or the
 * error IRQ (AER).  Kernels or devices without it report count 0. */
static int vfio_irq1_set(struct vfio_bus *vb, unsigned index, const char *what, bool *wired,
			 int efd)
{
	struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = index};
	/* the header and one eventfd: vfio_irq_set ends in a flexible array */
	union {
		struct vfio_irq_set s;
		uint8_t raw[sizeof(struct vfio_irq_set) + sizeof(int)];
	} is;

	if (efd < 0 && !*wired)
		return 0;
	if (ioctl(vb->device, VFIO_DEVICE_GET_IRQ_INFO, &ii) < 0) {
		/* an old kernel knows no such index */
		if (errno == EINVAL)
			return -ENOTSUP;
		return -errno;
	}
	if (ii.count < 1 || !(ii.flags & VFIO_IRQ_INFO_EVENTFD))
		return -ENOTSUP;
	memset(&is, 0, sizeof(is));
	is.s.argsz = sizeof(is);
	is.s.index = index;
	is.s.start = 0;
	if (efd >= 0) {
		is.s.count = 1;
		is.s.flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
		memcpy(is.s.data, &efd, sizeof(efd));
	} else {
		/* count 0 with DATA_NONE tears the trigger down */
		is.s.argsz = sizeof(is.s);
		is.s.count = 0;
		is.s.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
	}
	if (ioctl(vb->device, VFIO_DEVICE_SET_IRQS, &is) < 0) {
		int e = errno;

		log_err("%s: VFIO_DEVICE_SET_IRQS (%s IRQ): %s", vb->bus.name, what, strerror(e));
		return -e;
	}
	*wired = efd >= 0;
	return 0;
}

static int vfio_req_irq_set(struct nvme_bus *b, int efd)
{
	struct vfio_bus *vb = to_vb(b);

	return vfio_irq1_set(vb, VFIO_PCI_REQ_IRQ_INDEX, "request", &vb->req_wired, efd);
}

static int vfio_err_irq_set(struct nvme_bus *b, int efd)
{
	struct vfio_bus *vb = to_vb(b);

	return vfio_irq1_set(vb, VFIO_PCI_ERR_IRQ_INDEX, "error", &vb->err_wired, efd);
}

/* ---- reset, close ---- */

static int vfio_reset(struct nvme_bus *b)
{
	struct vfio_bus *vb = to_vb(b);

	if (!vb->has_reset)
		return -ENOTSUP;
	if (ioctl(vb->device, VFIO_DEVICE_RESET) < 0) {
		int e = errno;

		log_err("%s: VFIO_DEVICE_RESET: %s", b->name, strerror(e));
		return -e;
	}
	/* a function reset clears the command register: DMA off until we say */
	return vfio_set_command(vb, true);
}

static int vfio_bus_master(struct nvme_bus *b, bool on)
{
	return vfio_set_command(to_vb(b), on);
}

static void vfio_free(struct vfio_bus *vb)
{
	if (vb->device >= 0) {
		if (vb->irqs_enabled)
			vfio_irq_ioctl(vb, 0, NULL);
		vfio_irq1_set(vb, VFIO_PCI_REQ_IRQ_INDEX, "request", &vb->req_wired, -1);
		vfio_irq1_set(vb, VFIO_PCI_ERR_IRQ_INDEX, "error", &vb->err_wired, -1);
		/* stop the device's DMA before its memory goes away */
		if (vb->cmd_set)
			vfio_set_command(vb, false);
	}
	if (vb->container >= 0) {
		for (size_t i = 0; i < vb->nr_maps; i++)
			vfio_unmap_one(vb, vb->maps[i].iova, vb->maps[i].len);
	}
	free(vb->maps);
	if (vb->bar_map)
		munmap(vb->bar_map, vb->bar_map_len);
	if (vb->device >= 0)
		close(vb->device);
	if (vb->group >= 0)
		close(vb->group);
	if (vb->container >= 0)
		close(vb->container);
	pthread_mutex_destroy(&vb->lock);
	free(vb);
}

static void vfio_close(struct nvme_bus *b)
{
	if (b)
		vfio_free(to_vb(b));
}

static const struct nvme_bus_ops vfio_ops = {
	.read32 = vfio_read32,
	.read64 = vfio_read64,
	.write32 = vfio_write32,
	.write64 = vfio_write64,
	.dma_map = vfio_dma_map,
	.dma_unmap = vfio_dma_unmap,
	.irq_set = vfio_irq_set,
	.reset = vfio_reset,
	.bus_master = vfio_bus_master,
	.req_irq_set = vfio_req_irq_set,
	.err_irq_set = vfio_err_irq_set,
	.close = vfio_close,
};

int vfio_bus_open(const char *bdf_in, struct nvme_bus **out)
{
	struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = VFIO_PCI_MSIX_IRQ_INDEX};
	struct vfio_bus *vb;
	char bdf[32];
	int ret;

	*out = NULL;
	if (!bdf_in || vfio_normalize_bdf(bdf_in, bdf, sizeof(bdf)) < 0) {
		log_err("'%s' is not a PCI address (expected DDDD:BB:DD.F, e.g. 0000:01:00.0)",
			bdf_in ? bdf_in : "");
		return -EINVAL;
	}
	vb = calloc(1, sizeof(*vb));
	if (!vb)
		return -ENOMEM;
	vb->container = vb->group = vb->device = -1;
	pthread_mutex_init(&vb->lock, NULL);
	vb->bus.ops = &vfio_ops;
	vb->bus.db_notify = NULL;
	snprintf(vb->bus.name, sizeof(vb->bus.name), "%s", bdf);

	ret = vfio_check_device(bdf, &vb->group_id);
	if (ret < 0)
		goto fail;
	ret = vfio_open_container(vb);
	if (ret < 0)
		goto fail;
	ret = vfio_open_group(vb);
	if (ret < 0)
		goto fail;
	ret = vfio_set_iommu(vb);
	if (ret < 0)
		goto fail;
	ret = vfio_read_iova_ranges(vb);
	if (ret < 0)
		goto fail;
	ret = vfio_open_device(vb, bdf);
	if (ret < 0)
		goto fail;
	/* start from a clean function: whatever the previous owner left
	 * (queues, interrupts, a half-done command) is gone after this */
	if (vb->has_reset && ioctl(vb->device, VFIO_DEVICE_RESET) < 0)
		log_warn("%s: function reset failed (%s); continuing with a controller reset only",
			 bdf, strerror(errno));
	ret = vfio_set_command(vb, true);
	if (ret < 0) {
		log_err("%s: enabling memory space and bus mastering: %s", bdf, strerror(-ret));
		goto fail;
	}
	vb->cmd_set = true;
	ret = vfio_map_bar0(vb);
	if (ret < 0)
		goto fail;
	if (ioctl(vb->device, VFIO_DEVICE_GET_IRQ_INFO, &ii) == 0 && (ii.flags & VFIO_IRQ_INFO_EVENTFD))
		vb->bus.nr_vectors = ii.count;
	vb->bus.numa_node = vfio_numa_node(bdf);
	log_debug("%s: VFIO group %d, BAR0 0x%zx bytes, %u MSI-X vectors, NUMA node %d%s", bdf,
		  vb->group_id, vb->bus.bar0_len, vb->bus.nr_vectors, vb->bus.numa_node,
		  vb->has_reset ? ", function reset" : "");
	*out = &vb->bus;
	return 0;
fail:
	vfio_free(vb);
	return ret;
}

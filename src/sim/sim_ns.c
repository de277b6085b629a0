/* sim_ns.c - the software controller's namespace store (see sim_priv.h):
 * opening and closing a namespace's backing (RAM, null or a file), zeroing
 * blocks and flushing; the volatile write cache model is sim_wc.c.
 */
#include "sim_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "excl.h"
#include "log.h"
#include "safepath.h"

/* The daemon runs as root: a link or a file planted at the backing path
 * must not make it grow and expose someone else's file, so the path is
 * opened by safepath_open_file's rules (safepath.h).  One server per file:
 * it is locked (excl.h) for as long as it is open, so a second daemon (or
 * a second controller) on it is refused, -EBUSY, naming the holder. */
static int sim_open_backing(const char *path)
{
	char msg[PATH_MAX + 160], who[256];
	bool created;
	int fd = safepath_open_file(path, 0600, &created, msg, sizeof(msg)), rc;

	if (fd < 0) {
		log_err("sim: backing file %s: %s", path, msg);
		return fd;
	}
	rc = excl_lock(fd, who, sizeof(who));
	if (rc == -EWOULDBLOCK) {
		log_err("sim: backing file %s is in use by %s: two servers of one file would "
			"corrupt it; stop the other, or give this namespace another backing file",
			path, who);
		close(fd);
		return -EBUSY;
	}
	if (rc) /* a file system without locks: nothing to enforce it with */
		log_warn("sim: backing file %s: cannot lock it (%s): a second server of it "
			 "would not be refused",
			 path, strerror(-rc));
	if (created)
		log_info("sim: created backing file %s", path);
	return fd;
}

/* pwrite all of it: 0 or -errno (-EIO for a short write making no progress) */
static int sim_pwrite_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n, len -= (size_t)n, off += n;
	}
	return 0;
}

/* Metadata memory for nlba blocks, all ones (an unwritten block's PI is
 * escaped), as a mapping that may grow (sim_md_grow). */
static uint8_t *sim_md_map(size_t len)
{
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	memset(m, 0xff, len);
	return m;
}

/* ns's metadata: in memory, and for a FILE namespace loaded from PATH.md
 * (created, or extended with all ones to the namespace's size). */
static int sim_md_open(struct sim_ns *ns, const struct sim_ns_opts *o)
{
	char path[sizeof(ns->path) + 4];
	struct stat st;
	int rc;

	ns->md_len = (size_t)o->nlba * o->ms;
	ns->md = sim_md_map(ns->md_len);
	if (!ns->md)
		return -ENOMEM;
	if (o->backing != SIM_BACKING_FILE)
		return 0;
	snprintf(path, sizeof(path), "%s.md", o->path);
	ns->md_fd = sim_open_backing(path);
	if (ns->md_fd < 0)
		return ns->md_fd;
	if (fstat(ns->md_fd, &st))
		return -errno;
	size_t have = (uint64_t)st.st_size < ns->md_len ? (size_t)st.st_size : ns->md_len;
	for (size_t done = 0; done < have;) {
		ssize_t n = pread(ns->md_fd, ns->md + done, have - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			log_err("sim: metadata file %s: %s", path, strerror(-rc));
			return rc;
		}
		done += (size_t)n;
	}
	if (have < ns->md_len &&
	    (rc = sim_pwrite_all(ns->md_fd, ns->md + have, ns->md_len - have, (off_t)have))) {
		log_err("sim: cannot size metadata file %s to %zu bytes: %s", path, ns->md_len,
		        strerror(-rc));
		return rc;
	}
	return 0;
}

int sim_md_grow(struct sim_ns *ns, uint64_t nlba)
{
	size_t len = (size_t)nlba * ns->ms;

	if (!ns->md || len <= ns->md_len)
		return 0;
	uint8_t *m = mremap(ns->md, ns->md_len, len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED)
		return -errno;
	memset(m + ns->md_len, 0xff, len - ns->md_len);
	int rc = ns->md_fd >= 0 ? sim_pwrite_all(ns->md_fd, m + ns->md_len, len - ns->md_len,
	                                         (off_t)ns->md_len)
	                        : 0;
	ns->md = m;
	ns->md_len = len;
	return rc;
}

int sim_ns_open(struct sim_ns *ns, const struct sim_ns_opts *o)
{
	ns->nlba = o->nlba;
	ns->lba_size = o->lba_size;
	ns->lba_shift = o->lba_size == 512 ? 9 : 12;
	ns->backing = o->backing;
	ns->fd = -1;
	ns->md_fd = -1;
	ns->ms = o->ms;
	ns->md_ext = o->md_ext;
	ns->pi = (struct sim_pi_fmt){
	    .type = o->pi_type, .g64 = o->pi_g64, .first = o->pi_first, .ms = o->ms};
	if (o->ms > SIM_MS_MAX || o->pi_type > 3 ||
	    (o->pi_type && o->ms < sim_pi_size(&ns->pi)) || (o->ms && o->backing == SIM_BACKING_NULL))
		return -EINVAL;
	size_t len = (size_t)(o->nlba << ns->lba_shift);
	int rc = o->ms ? sim_md_open(ns, o) : 0;
	if (rc)
		return rc;
	switch (o->backing) {
	case SIM_BACKING_NULL:
		return 0;
	case SIM_BACKING_RAM:
		/* lazily zero: untouched pages cost nothing */
		ns->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		if (ns->mem == MAP_FAILED) {
			ns->mem = NULL;
			return -errno;
		}
		ns->mem_len = len;
		/* transparent huge pages where the system allows them: random
		 * I/O over a namespace of 4 KiB pages misses the TLB at every
		 * command (a nested page walk in a guest); advice only, so a
		 * refusal changes nothing */
		(void)madvise(ns->mem, len, MADV_HUGEPAGE);
		return 0;
	case SIM_BACKING_FILE: {
		struct stat st;
		if (!o->path || !*o->path)
			return -EINVAL;
		snprintf(ns->path, sizeof(ns->path), "%s", o->path);
		ns->fd = sim_open_backing(o->path);
		if (ns->fd < 0)
			return ns->fd;
		if (fstat(ns->fd, &st) || ((uint64_t)st.st_size < len && ftruncate(ns->fd, (off_t)len))) {
			int e = -errno;
			log_err("sim: cannot size backing file %s to %zu bytes: %s", o->path, len, strerror(-e));
			return e;
		}
		return 0;
	}
	}
	return -EINVAL;
}

void sim_ns_close(struct sim_ns *ns)
{
	sim_wc_fini(&ns->wc); /* the media holds the newest data: as after a shutdown */
	if (ns->mem)
		munmap(ns->mem, ns->mem_len);
	if (ns->fd >= 0) {
		fdatasync(ns->fd);
		close(ns->fd);
	}
	if (ns->md)
		munmap(ns->md, ns->md_len);
	if (ns->md_fd >= 0) {
		fdatasync(ns->md_fd);
		close(ns->md_fd);
	}
	ns->mem = NULL;
	ns->fd = -1;
	ns->md = NULL;
	ns->md_len = 0;
	ns->md_fd = -1;
	ns->ms = 0;
	ns->pi.type = 0;
}

void sim_ns_enter(struct sim_ns *ns, uint16_t qid, uint64_t slba, uint64_t nlb, bool write)
{
	const unsigned nw = sizeof(ns->io_busy) / sizeof(ns->io_busy[0]);
	unsigned slot = qid - 1u;
	uint64_t self = 1ull << (slot % 64);

	for (;;) {
		int clash = -1;

		sim_wc_lock(ns);
		for (unsigned w = 0; w < nw && clash < 0; w++) {
			uint64_t m = atomic_load_explicit(&ns->io_busy[w], memory_order_acquire);

			if (w == slot / 64)
				m &= ~self;
			while (m) {
				unsigned i = w * 64 + (unsigned)__builtin_ctzll(m);
				const struct sim_ns_io *o = &ns->io[i];

				m &= m - 1;
				if ((write || o->write) && o->slba < slba + nlb && slba < o->slba + o->nlb) {
					clash = (int)i;
					break;
				}
			}
		}
		if (clash < 0) {
			ns->io[slot] = (struct sim_ns_io){.slba = slba, .nlb = nlb, .write = write};
			atomic_fetch_or_explicit(&ns->io_busy[slot / 64], self, memory_order_relaxed);
			return;
		}
		/* the other command holds no lock while it moves its data */
		sim_wc_unlock(ns);
		unsigned spins = 0;
		while (atomic_load_explicit(&ns->io_busy[clash / 64], memory_order_acquire) &
		       (1ull << (clash % 64)))
			sim_spin(&spins);
	}
}

void sim_ns_leave(struct sim_ns *ns, uint16_t qid)
{
	unsigned slot = qid - 1u;

	atomic_fetch_and_explicit(&ns->io_busy[slot / 64], ~(1ull << (slot % 64)),
	                          memory_order_release);
}

/* Zero (deallocate) blocks; deallocated blocks read as zeroes (DLFEAT).  It
 * goes through the volatile write cache as a write does; fua: durable when
 * done (Write Zeroes with FUA). */
uint16_t sim_ns_zero(struct sim *s, struct sim_ns *ns, uint16_t qid, uint64_t slba, uint64_t nlb,
                     bool fua, const struct nvme_sqe *c)
{
	bool cached = sim_cached(s, ns);
	uint16_t st = 0;

	if (slba >= ns->nlba || nlb > ns->nlba - slba)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
	if (ns->backing == SIM_BACKING_NULL)
		return 0;
	sim_ns_enter(ns, qid, slba, nlb, true);
	int rc = cached && !fua ? sim_wc_dirty(&ns->wc, slba, nlb) : 0;
	sim_wc_unlock(ns);
	if (rc) {
		st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		goto out;
	}
	off_t off = (off_t)(slba << ns->lba_shift);
	size_t len = (size_t)nlb << ns->lba_shift;
	if (ns->backing == SIM_BACKING_RAM) {
		/* whole pages go back to the kernel (and read as zero); edges memset */
		uint8_t *p = ns->mem + off, *e = p + len;
		uint8_t *a = (uint8_t *)(((uintptr_t)p + SIM_PAGE - 1) & ~(uintptr_t)(SIM_PAGE - 1));
		uint8_t *b = (uint8_t *)((uintptr_t)e & ~(uintptr_t)(SIM_PAGE - 1));
		if (b > a + SIM_PAGE * 16) {
			memset(p, 0, (size_t)(a - p));
			if (madvise(a, (size_t)(b - a), MADV_DONTNEED))
				memset(a, 0, (size_t)(b - a));
			memset(b, 0, (size_t)(e - b));
		} else {
			memset(p, 0, len);
		}
	} else if (fallocate(ns->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)len)) {
		static const uint8_t zero[SIM_PAGE];
		for (size_t done = 0; done < len;) {
			size_t n = len - done < SIM_PAGE ? len - done : SIM_PAGE;
			if (pwrite(ns->fd, zero, n, off + (off_t)done) != (ssize_t)n) {
				st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
				goto out;
			}
			done += n;
		}
	}
	if (ns->ms && sim_md_zeroed(ns, slba, nlb, c)) {
		st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		goto out;
	}
	if (fua && ns->backing == SIM_BACKING_FILE && (fdatasync(ns->fd) || sim_md_sync(ns))) {
		st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		goto out;
	}
	if (fua && cached) {
		sim_wc_lock(ns);
		sim_wc_durable(&ns->wc, slba, nlb);
		sim_wc_unlock(ns);
	}
out:
	sim_ns_leave(ns, qid);
	return st;
}

/* Flush: the host's page cache of a file goes first (on failure nothing is
 * durable), then the model's cache. */
uint16_t sim_ns_flush(struct sim_ns *ns)
{
	if (ns->backing == SIM_BACKING_FILE && (fdatasync(ns->fd) || sim_md_sync(ns)))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	sim_wc_lock(ns);
	sim_wc_flush(&ns->wc);
	sim_wc_unlock(ns);
	return 0;
}


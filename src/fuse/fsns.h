/* fsns.h - the namespace table: one file per usable namespace of every
 * controller, its geometry, the controller features the requests depend on,
 * and its block range lock.
 *
 * Built once at start, read-only afterwards (except the range lock, which
 * has its own mutex).  Inode numbers: 1 is the root, namespace i is i + 2.
 * Prefix fsns_.
 */
#ifndef NVMEFS_FUSE_NS_H
#define NVMEFS_FUSE_NS_H

#include <stdbool.h>
#include <stdint.h>

#include "fuse_fs.h"
#include "rlock.h"

#define FUSEFS_NAME_MAX 64

struct fusefs_ns {
	struct fusefs_ns_desc d;
	char name[FUSEFS_NAME_MAX];
	uint8_t shift;          /* log2 of the LBA size */
	bool vwc, dsm, wzeroes, dealloc_zeroes;
	struct rlock lock;      /* writes and fallocate, shared by the reactors */
};

/* Every namespace of ctrls[0..nr_ctrls) with an LBA size of 512 B..64 KiB
 * (others are logged and left out).  *out is freed with fsns_free. */
int fsns_build(struct nvme_ctrl *const *ctrls, const char *const *names, unsigned nr_ctrls,
	       struct fusefs_ns **out, unsigned *nr);
void fsns_free(struct fusefs_ns *ns, unsigned nr);

/* The namespace of inode ino, NULL for the root or an unknown inode. */
static inline struct fusefs_ns *fsns_by_ino(struct fusefs_ns *ns, unsigned nr, uint64_t ino)
{
	return ino < 2 || ino - 2 >= nr ? NULL : &ns[ino - 2];
}

#endif

/* fsops.c - the FUSE operations on the namespace files.
 *
 * Semantics follow a block device (the kernel's blkdev file operations) and
 * are checked against one, a loop device, by t-blockdev-compare.sh; where
 * they differ on purpose, docs/fuse.md says so and why. */
#include "fsops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "audit.h"
#include "channel.h"
#include "fsio.h"
#include "log.h"
#include "uring.h"

/* a change is told to the kernel (fusefs_ns_add and the others): this
 * bounds a missed notification only */
#define ATTR_TIMEOUT FUSEFS_ATTR_TIMEOUT
#define OPT_BLKSIZE (128u * 1024) /* st_blksize: what cp and cat use per call */
#define ROOT_ID FUSE_ROOT_ID

static struct fusefs_ns *ino_ns(struct fusefs *fs, uint64_t ino)
{
	return fsns_by_ino(&fs->ns, ino);
}

/* The namespace a request on handle fh of inode ino is for: NULL with
 * *err set when there is none (EISDIR for the root, ENOENT for an inode no
 * slot has) or it went away since the handle was opened (EIO, on every
 * request until the handle is closed). */
static struct fusefs_ns *io_ns(struct fusefs *fs, uint64_t ino, uint64_t fh, int *err)
{
	struct fusefs_ns *ns = ino_ns(fs, ino);

	if (!ns) {
		*err = ino == ROOT_ID ? EISDIR : ENOENT;
		return NULL;
	}
	if (!fsns_usable(ns, fh)) {
		*err = EIO;
		return NULL;
	}
	return ns;
}

/* Answer a counted request at once (ns: its namespace, when known). */
static void reply_ns_err(struct fusefs_rx *rx, struct fusefs_ns *ns, struct fw_req *r,
			 uint8_t op, int errnum)
{
	sched_count(rx->sched, fsio_ns_stats(rx, ns), op, 0, errnum);
	fw_reply_err(r, errnum);
}

static void reply_err(struct fusefs_rx *rx, struct fw_req *r, uint8_t op, int errnum)
{
	reply_ns_err(rx, NULL, r, op, errnum);
}

/* ---- attributes and directory ---- */

static uint64_t ts_ns(struct timespec t)
{
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* mtime and ctime move with the namespace's content (fsns_mtime: the first
 * stat after a write stamps it), so that cp -u, rsync and backup tools see
 * a change; atime stays the mount's start (reads are not recorded). */
static void ns_stat(struct fusefs *fs, struct fusefs_ns *ns, uint64_t ino, struct stat *st)
{
	uint64_t m = fsns_mtime(ns, ts_ns(fs->t0));

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | (fs->o.file_mode & 07777);
	st->st_nlink = 1;
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	st->st_size = (off_t)fsns_size(ns);
	st->st_blksize = ns->d.lba_size > OPT_BLKSIZE ? ns->d.lba_size : OPT_BLKSIZE;
	st->st_blocks = (blkcnt_t)(fsns_size(ns) / 512);
	st->st_atim = fs->t0;
	st->st_mtim.tv_sec = (time_t)(m / 1000000000u);
	st->st_mtim.tv_nsec = (long)(m % 1000000000u);
	st->st_ctim = st->st_mtim;
}

static void root_stat(struct fusefs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_atim = st->st_mtim = st->st_ctim = fs->t0;
}

static int ino_stat(struct fusefs *fs, uint64_t ino, struct stat *st)
{
	struct fusefs_ns *ns;

	if (ino == ROOT_ID) {
		root_stat(fs, st);
		return 0;
	}
	ns = ino_ns(fs, ino);
	if (!ns)
		return ENOENT;
	if (!fsns_present(ns))
		return EIO; /* gone: what still holds it fails */
	ns_stat(fs, ns, ino, st);
	return 0;
}

static void op_lookup(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	struct fusefs_ns *ns;
	struct stat st;
	uint64_t ino;

	if (m->h.nodeid != ROOT_ID) {
		fw_reply_err(r, ENOTDIR);
		return;
	}
	ns = fsns_lookup(&fs->ns, m->name, &ino);
	if (!ns) {
		fw_reply_err(r, ENOENT);
		return;
	}
	ns_stat(fs, ns, ino, &st);
	fw_reply_entry(r, ino, &st, ATTR_TIMEOUT);
}

static void op_getattr(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	struct stat st;
	int err = ino_stat(fs, m->h.nodeid, &st);

	if (err)
		fw_reply_err(r, err);
	else
		fw_reply_attr(r, &st, ATTR_TIMEOUT);
}

/* Sizes, modes and owners are the config's: only requests that change
 * nothing (times, or the value it already has) succeed, and the size as a
 * block device has it: open(O_TRUNC) is accepted and changes nothing (the
 * VFS drops O_TRUNC for a block device); ftruncate(2) and truncate(2) fail
 * with EINVAL (not a regular file).  O_TRUNC arrives as a size of 0 without
 * a file handle (FUSE_ATOMIC_O_TRUNC is not asked for at INIT), and
 * truncate(path, 0) looks the same, so that one succeeds without effect
 * too.  The reply carries the real size, which the kernel writes to its
 * cached size. */
static void op_setattr(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	const struct fuse_setattr_in *a = &m->in.setattr;
	struct stat st;
	int err = ino_stat(fs, m->h.nodeid, &st);

	if (err) {
		fw_reply_err(r, err);
		return;
	}
	if ((a->valid & FATTR_SIZE) && ((a->valid & FATTR_FH) || a->size != 0)) {
		fw_reply_err(r, EINVAL);
		return;
	}
	if (((a->valid & FATTR_MODE) && (a->mode & 07777) != (st.st_mode & 07777)) ||
	    ((a->valid & FATTR_UID) && a->uid != st.st_uid) ||
	    ((a->valid & FATTR_GID) && a->gid != st.st_gid)) {
		fw_reply_err(r, EPERM);
		return;
	}
	fw_reply_attr(r, &st, ATTR_TIMEOUT);
}

static void op_opendir(struct fw_req *r, const struct fw_msg *m)
{
	if (m->h.nodeid != ROOT_ID) {
		fw_reply_err(r, ENOTDIR);
		return;
	}
	fw_reply_open(r, 0, 0);
}

static void op_readdir(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	size_t size = m->in.read.size, used = 0;
	uint64_t off = m->in.read.offset;
	char *buf;

	if (m->h.nodeid != ROOT_ID) {
		fw_reply_err(r, ENOTDIR);
		return;
	}
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO;
	buf = malloc(size ? size : 1);
	if (!buf) {
		fw_reply_err(r, ENOMEM);
		return;
	}
	/* entry k: 0 ".", 1 "..", 2.. the slots (inode k), those shown; off
	 * is the next entry: slots never move, so offsets stay valid while
	 * namespaces come and go */
	for (uint64_t k = off; k < (uint64_t)fsns_count(&fs->ns) + 2; k++) {
		const char *name = k == 0 ? "." : k == 1 ? ".." : fs->ns.slot[k - 2].name;
		uint64_t ino = k < 2 ? ROOT_ID : k;
		size_t n;

		if (k >= 2 && !fsns_present(&fs->ns.slot[k - 2]))
			continue;
		n = fw_add_dirent(buf, size, used, name, ino, k < 2 ? S_IFDIR : S_IFREG, k + 1);

		if (n > size - used)
			break;
		used += n;
	}
	fw_reply_buf(r, buf, used);
	free(buf);
}

/* Every request reaches the device: no page cache in between, as with a
 * block device opened O_DIRECT; and synchronous writers to one file are not
 * serialised by the kernel's inode lock (the range lock orders what
 * overlaps). */
static void op_open(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	if (m->h.nodeid == ROOT_ID) {
		fw_reply_err(r, EISDIR);
		return;
	}
	struct fusefs_ns *ns = ino_ns(fs, m->h.nodeid);

	if (!ns || !fsns_present(ns)) {
		fw_reply_err(r, ENOENT);
		return;
	}
	/* the handle is the generation: a removal makes it stale */
	fw_reply_open(r, fsns_gen(ns), FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES);
}

/* ---- requests that reach the device ---- */

static void op_read(struct fusefs_rx *rx, struct fw_req *r, const struct fw_msg *m)
{
	int err = 0;
	struct fusefs_ns *ns = io_ns(rx->fs, m->h.nodeid, m->in.read.fh, &err);
	uint64_t off = m->in.read.offset;
	size_t size = m->in.read.size, nsz;

	if (!ns) {
		reply_err(rx, r, FUSEFS_OP_READ, err);
		return;
	}
	if (off > INT64_MAX) {
		reply_ns_err(rx, ns, r, FUSEFS_OP_READ, EINVAL);
		return;
	}
	nsz = fsns_size(ns);
	if (off >= nsz || size == 0) {
		sched_count(rx->sched, fsio_ns_stats(rx, ns), FUSEFS_OP_READ, 0, 0);
		fw_reply_buf(r, NULL, 0);
		return;
	}
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short read: the caller asks again */
	if (size > nsz - off)
		size = nsz - off; /* crosses the end: short */
	fsio_read(rx, r, ns, off, size);
}

static void op_write(struct fusefs_rx *rx, struct fw_req *r, const struct fw_msg *m)
{
	int err = 0;
	struct fusefs_ns *ns = io_ns(rx->fs, m->h.nodeid, m->in.write.fh, &err);
	uint64_t off = m->in.write.offset, nsz;
	size_t size = m->data_len;

	if (!ns) {
		reply_err(rx, r, FUSEFS_OP_WRITE, err);
		return;
	}
	nsz = fsns_size(ns);
	if (off > INT64_MAX) {
		reply_ns_err(rx, ns, r, FUSEFS_OP_WRITE, EINVAL);
		return;
	}
	if (size == 0) {
		sched_count(rx->sched, fsio_ns_stats(rx, ns), FUSEFS_OP_WRITE, 0, 0);
		fw_reply_write(r, 0);
		return;
	}
	/* as on a block device (blkdev_write_iter): at or past the end
	 * ENOSPC, across it a short write of what fits */
	if (off >= nsz) {
		reply_ns_err(rx, ns, r, FUSEFS_OP_WRITE, ENOSPC);
		return;
	}
	if (size > nsz - off)
		size = nsz - off;
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short write: the caller writes the rest */
	/* The kernel does not make a direct-I/O write durable itself (no
	 * generic_write_sync with FOPEN_DIRECT_IO): it passes O_DSYNC (O_SYNC
	 * includes it; RWF_DSYNC arrives as O_DSYNC too) in the request's
	 * flags and trusts the answer, as a block device's FUA does. */
	fsio_write(rx, r, ns, off, m->data, size, (m->in.write.flags & O_DSYNC) != 0);
}

static void op_fsync(struct fusefs_rx *rx, struct fw_req *r, const struct fw_msg *m)
{
	int err = 0;
	struct fusefs_ns *ns = io_ns(rx->fs, m->h.nodeid, m->in.fsync.fh, &err);

	if (!ns) {
		reply_err(rx, r, FUSEFS_OP_FLUSH, err == EISDIR ? 0 : err);
		return;
	}
	SCHED_STAT_ADD(rx->sched, fsyncs, 1);
	/* without a volatile write cache a completed write is durable */
	if (!ns->vwc) {
		reply_ns_err(rx, ns, r, FUSEFS_OP_FLUSH, 0);
		return;
	}
	fsio_fsync(rx, r, ns);
}

static void op_fallocate(struct fusefs_rx *rx, struct fw_req *r, const struct fw_msg *m)
{
	int err = 0;
	struct fusefs_ns *ns = io_ns(rx->fs, m->h.nodeid, m->in.fallocate.fh, &err);
	uint32_t mode = m->in.fallocate.mode;
	uint64_t off = m->in.fallocate.offset, length = m->in.fallocate.length, end, nsz;
	uint8_t op = mode & FALLOC_FL_PUNCH_HOLE ? FUSEFS_OP_PUNCH : FUSEFS_OP_ZERO;

	if (!ns) {
		reply_err(rx, r, op, err);
		return;
	}
	nsz = fsns_size(ns);
	/* the checks of blkdev_fallocate, in its order: unknown flags, then
	 * the range (starting at or past the end, or crossing it without
	 * KEEP_SIZE: EINVAL), then the mode.  Unlike a block device, an
	 * unaligned range is not refused: its partial blocks are zeroed by
	 * read-modify-write (docs/fuse.md). */
	if (mode & ~(uint32_t)(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE | FALLOC_FL_ZERO_RANGE)) {
		reply_ns_err(rx, ns, r, op, EOPNOTSUPP);
		return;
	}
	if (off > INT64_MAX || length == 0 || length > INT64_MAX || off >= nsz) {
		reply_ns_err(rx, ns, r, op, EINVAL);
		return;
	}
	end = off + length;
	if (end < off)
		end = UINT64_MAX;
	if (end > nsz) {
		if (!(mode & FALLOC_FL_KEEP_SIZE)) {
			reply_ns_err(rx, ns, r, op, EINVAL);
			return;
		}
		end = nsz;
	}
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
		reply_ns_err(rx, ns, r, op, EOPNOTSUPP);
		return;
	}
	fsio_fallocate(rx, r, ns, (int)mode, off, end);
}

/* The kernel asks only for SEEK_DATA and SEEK_HOLE (SET, CUR and END it
 * answers from its cached size).  A block device refuses both with EINVAL
 * (fixed_size_llseek); so does a namespace file, rather than let the kernel
 * fall back to "data up to the size". */
static void op_lseek(struct fusefs *fs, struct fw_req *r, const struct fw_msg *m)
{
	fw_reply_err(r, ino_ns(fs, m->h.nodeid) ? EINVAL : ENXIO);
}

static void op_statfs(struct fusefs *fs, struct fw_req *r)
{
	struct statvfs sv;
	uint64_t blocks = 0;

	/* in blocks and saturated: each size is below 2^63, but a thousand
	 * namespaces of a few controllers are not */
	unsigned n = fsns_count(&fs->ns), files = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t b = fsns_size(&fs->ns.slot[i]) / 4096;

		if (!fsns_present(&fs->ns.slot[i]))
			continue;
		files++;
		blocks = blocks > UINT64_MAX - b ? UINT64_MAX : blocks + b;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = blocks;
	sv.f_files = files + 1;
	sv.f_namemax = FUSEFS_NAME_MAX - 1;
	fw_reply_statfs(r, &sv);
}

/* ---- INIT ---- */

static void op_init(struct fusefs_rx *rx, struct fw_req *r, const struct fw_msg *m)
{
	struct fusefs *fs = rx->fs;
	struct fuse_init_out out;
	struct fw_init_want want = {
		.max_write = FUSEFS_MAX_IO,
		.page_size = (uint32_t)sysconf(_SC_PAGESIZE),
		/* async direct I/O goes out as background requests: allow a
		 * deep queue */
		.max_background = 1024,
		.congestion_threshold = 768,
		/* only with every ring set up: once agreed, the kernel sends
		 * nothing over /dev/fuse until each FUSE queue has entries */
		.uring = fur_ready(fs),
	};
	int err = fw_init_answer(&m->in.init, &want, &out);

	if (err == -EPROTO && m->in.init.major > FW_PROTO_MAJOR) {
		/* a newer major: tell it ours, it asks again */
		fw_reply_init(r, &out);
		return;
	}
	if (err) {
		log_err("fuse: the kernel speaks FUSE %u.%u; this daemon needs 7.%u or later",
			m->in.init.major, m->in.init.minor, FW_PROTO_MINOR_MIN);
		fw_reply_err(r, EPROTO);
		return;
	}
	fw_reply_init(r, &out);
	chan_init_done(rx, fw_init_flags_in(&m->in.init), &out);
}

/* ---- dispatch ---- */

/* The opcodes the scheduler counts itself; everything else counts as other. */
static bool counted_by_ops(uint32_t opcode)
{
	return opcode == FUSE_READ || opcode == FUSE_WRITE || opcode == FUSE_FSYNC ||
	       opcode == FUSE_FLUSH || opcode == FUSE_FALLOCATE;
}

void fsops_dispatch(struct fusefs_rx *rx, struct fw_req *r, int rc, const struct fw_msg *m)
{
	struct fusefs *fs = rx->fs;
	uint32_t op = m->h.opcode;

	/* a resent request's unique has FUSE_UNIQUE_RESEND set: it is
	 * answered with the unique exactly as received */
	r->unique = m->h.unique;
	r->opcode = op;
	aud_take(rx, r, rc, m);
	SCHED_STAT_ADD(rx->sched, resent_requests, (m->h.unique & FUSE_UNIQUE_RESEND) != 0);
	if (rc != FW_OK || !counted_by_ops(op))
		sched_count(rx->sched, NULL, FUSEFS_OP_OTHER, 0, rc == FW_OK ? 0 : -rc);
	if (rc != FW_OK) {
		SCHED_STAT_ADD(rx->sched, bad_requests, rc == FW_BAD);
		/* no answer to what expects none, nor to a request without id */
		if (op == FUSE_FORGET || op == FUSE_BATCH_FORGET || op == FUSE_INTERRUPT ||
		    m->h.unique == 0)
			fw_reply_none(r);
		else
			fw_reply_err(r, -rc);
		return;
	}
	switch (op) {
	case FUSE_INIT:
		op_init(rx, r, m);
		break;
	case FUSE_DESTROY:
		fw_reply_err(r, 0);
		break;
	case FUSE_LOOKUP:
		op_lookup(fs, r, m);
		break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
		/* inode numbers are fixed (slots never move): nothing to forget */
	case FUSE_INTERRUPT:
		/* a request in flight on the device cannot be called back;
		 * its answer comes when the device is done */
		fw_reply_none(r);
		break;
	case FUSE_GETATTR:
		op_getattr(fs, r, m);
		break;
	case FUSE_SETATTR:
		op_setattr(fs, r, m);
		break;
	case FUSE_OPENDIR:
		op_opendir(r, m);
		break;
	case FUSE_READDIR:
		op_readdir(fs, r, m);
		break;
	case FUSE_RELEASEDIR:
	case FUSE_RELEASE:
	case FUSE_FSYNCDIR:
		fw_reply_err(r, 0);
		break;
	case FUSE_OPEN:
		op_open(fs, r, m);
		break;
	case FUSE_READ:
		op_read(rx, r, m);
		break;
	case FUSE_WRITE:
		op_write(rx, r, m);
		break;
	case FUSE_FLUSH: {
		/* close(2): every write was on the device when it was answered;
		 * a handle of a namespace gone since fails as its other requests */
		struct fusefs_ns *ns = ino_ns(fs, m->h.nodeid);

		reply_err(rx, r, FUSEFS_OP_FLUSH, ns && !fsns_usable(ns, m->in.flush.fh) ? EIO : 0);
		break;
	}
	case FUSE_FSYNC:
		op_fsync(rx, r, m);
		break;
	case FUSE_FALLOCATE:
		op_fallocate(rx, r, m);
		break;
	case FUSE_LSEEK:
		op_lseek(fs, r, m);
		break;
	case FUSE_STATFS:
		op_statfs(fs, r);
		break;
	case FUSE_CREATE:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_SYMLINK:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_LINK:
		/* the namespaces are the files: none is made, removed or renamed */
		fw_reply_err(r, EPERM);
		break;
	default:
		/* ACCESS: default_permissions has the kernel check modes */
		fw_reply_err(r, ENOSYS);
		break;
	}
}

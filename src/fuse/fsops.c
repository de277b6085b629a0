/* fsops.c - the FUSE operations on the namespace files.
 *
 * Semantics follow a block device (the kernel's blkdev file operations) and
 * are checked against one, a loop device, by t-blockdev-compare.sh; where
 * they differ on purpose, docs/fuse.md says so and why. */
#include "fsops.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "channel.h"
#include "fsio.h"

#define ATTR_TIMEOUT 10.0         /* sizes never change while mounted */
#define OPT_BLKSIZE (128u * 1024) /* st_blksize: what cp and cat use per call */

static struct fusefs_ns *ino_ns(struct fusefs *fs, fuse_ino_t ino)
{
	return fsns_by_ino(fs->ns, fs->nr_ns, ino);
}

/* Answer a counted request at once. */
static void reply_err(fuse_req_t req, uint8_t op, int errnum)
{
	sched_count(fusefs_tl_rx->sched, op, 0, errnum);
	fuse_reply_err(req, errnum);
}

/* ---- attributes and directory ---- */

static void ns_stat(struct fusefs *fs, const struct fusefs_ns *ns, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | (fs->o.file_mode & 07777);
	st->st_nlink = 1;
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	st->st_size = (off_t)ns->d.size;
	st->st_blksize = ns->d.lba_size > OPT_BLKSIZE ? ns->d.lba_size : OPT_BLKSIZE;
	st->st_blocks = (blkcnt_t)(ns->d.size / 512);
	st->st_atim = st->st_mtim = st->st_ctim = fs->t0;
}

static void root_stat(struct fusefs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_atim = st->st_mtim = st->st_ctim = fs->t0;
}

static int ino_stat(struct fusefs *fs, fuse_ino_t ino, struct stat *st)
{
	struct fusefs_ns *ns;

	if (ino == FUSE_ROOT_ID) {
		root_stat(fs, st);
		return 0;
	}
	ns = ino_ns(fs, ino);
	if (!ns)
		return ENOENT;
	ns_stat(fs, ns, ino, st);
	return 0;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (unsigned i = 0; i < fs->nr_ns; i++) {
		if (strcmp(fs->ns[i].name, name) == 0) {
			memset(&e, 0, sizeof(e));
			e.ino = i + 2;
			e.attr_timeout = e.entry_timeout = ATTR_TIMEOUT;
			ns_stat(fs, &fs->ns[i], e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	}
	fuse_reply_err(req, ENOENT);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct stat st;
	int err;

	(void)fi;
	err = ino_stat(fs, ino, &st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* The init reply: the channel's settings, and O_TRUNC handled by SETATTR.
 * With FUSE_ATOMIC_O_TRUNC (libfuse's default) the kernel sends O_TRUNC in
 * OPEN and then, whatever the reply, sets the cached size to 0 itself
 * (fuse_finish_open); until the attributes are fetched again, every async
 * direct read past 0 (Linux AIO, io_uring: fuse_direct_IO trims them to the
 * cached size) on any open file reads end of file.  Without it the kernel
 * sends the truncation as SETATTR(size 0) and takes the size from the reply
 * (fuse_do_setattr), where ll_setattr leaves it unchanged. */
static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	chan_ll_init(userdata, conn);
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
}

/* Sizes, modes and owners are the config's: only requests that change
 * nothing (times, or the value it already has) succeed, and the size as a
 * block device has it: open(O_TRUNC) is accepted and changes nothing (the
 * VFS drops O_TRUNC for a block device); ftruncate(2) and truncate(2) fail
 * with EINVAL (not a regular file).  O_TRUNC arrives as a size of 0 without
 * a file handle, and truncate(path, 0) looks the same, so that one succeeds
 * without effect too.  The reply carries the real size, which the kernel
 * writes to its cached size. */
static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct stat st;
	int err;

	err = ino_stat(fs, ino, &st);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && (fi || attr->st_size != 0)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & 07777) != (st.st_mode & 07777)) ||
	    ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != st.st_uid) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != st.st_gid)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	char *buf;
	size_t used = 0;
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* entry k: 0 ".", 1 "..", 2.. the namespaces; off is the next entry */
	for (off_t k = off; k < (off_t)fs->nr_ns + 2; k++) {
		const char *name;
		size_t n;

		memset(&st, 0, sizeof(st));
		if (k < 2) {
			name = k == 0 ? "." : "..";
			st.st_ino = FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else {
			name = fs->ns[k - 2].name;
			st.st_ino = (ino_t)k;
			st.st_mode = S_IFREG;
		}
		n = fuse_add_direntry(req, buf + used, size - used, name, &st, k + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ll_release_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);

	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!ino_ns(fs, ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Every request reaches the device: no page cache in between, as
	 * with a block device opened O_DIRECT.  O_TRUNC comes as a SETATTR
	 * afterwards (see ll_init), which changes nothing. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

/* ---- requests that reach the device ---- */

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);

	(void)fi;
	if (!ns) {
		reply_err(req, FUSEFS_OP_READ, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		reply_err(req, FUSEFS_OP_READ, EINVAL);
		return;
	}
	if ((uint64_t)off >= ns->d.size || size == 0) {
		sched_count(fusefs_tl_rx->sched, FUSEFS_OP_READ, 0, 0);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short read: the caller asks again */
	if (size > ns->d.size - (uint64_t)off)
		size = ns->d.size - (uint64_t)off; /* crosses the end: short */
	fsio_read(fusefs_tl_rx, req, ns, (uint64_t)off, size);
}

static void ll_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
			 struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	size_t size = fuse_buf_size(bufv);

	(void)fi;
	if (!ns) {
		reply_err(req, FUSEFS_OP_WRITE, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		reply_err(req, FUSEFS_OP_WRITE, EINVAL);
		return;
	}
	if (size == 0) {
		sched_count(fusefs_tl_rx->sched, FUSEFS_OP_WRITE, 0, 0);
		fuse_reply_write(req, 0);
		return;
	}
	/* as on a block device (blkdev_write_iter): at or past the end
	 * ENOSPC, across it a short write of what fits */
	if ((uint64_t)off >= ns->d.size) {
		reply_err(req, FUSEFS_OP_WRITE, ENOSPC);
		return;
	}
	if (size > ns->d.size - (uint64_t)off)
		size = ns->d.size - (uint64_t)off;
	if (size > FUSEFS_MAX_IO)
		size = FUSEFS_MAX_IO; /* a short write: the caller writes the rest */
	fsio_write(fusefs_tl_rx, req, ns, (uint64_t)off, bufv, size);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close(2): every write was on the device when it was answered */
	(void)ino;
	(void)fi;
	reply_err(req, FUSEFS_OP_FLUSH, 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);

	(void)datasync;
	(void)fi;
	if (!ns) {
		reply_err(req, FUSEFS_OP_FLUSH, ino == FUSE_ROOT_ID ? 0 : ENOENT);
		return;
	}
	SCHED_STAT_ADD(fusefs_tl_rx->sched, fsyncs, 1);
	/* without a volatile write cache a completed write is durable */
	if (!ns->vwc) {
		reply_err(req, FUSEFS_OP_FLUSH, 0);
		return;
	}
	fsio_fsync(fusefs_tl_rx, req, ns);
}

static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t length,
			 struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fusefs_ns *ns = ino_ns(fs, ino);
	uint8_t op = mode & FALLOC_FL_PUNCH_HOLE ? FUSEFS_OP_PUNCH : FUSEFS_OP_ZERO;
	uint64_t end;

	(void)fi;
	if (!ns) {
		reply_err(req, op, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	/* the checks of blkdev_fallocate, in its order: unknown flags, then
	 * the range (starting at or past the end, or crossing it without
	 * KEEP_SIZE: EINVAL), then the mode.  Unlike a block device, an
	 * unaligned range is not refused: its partial blocks are zeroed by
	 * read-modify-write (docs/fuse.md). */
	if (mode & ~(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE | FALLOC_FL_ZERO_RANGE)) {
		reply_err(req, op, EOPNOTSUPP);
		return;
	}
	if (off < 0 || length <= 0 || (uint64_t)off >= ns->d.size) {
		reply_err(req, op, EINVAL);
		return;
	}
	end = (uint64_t)off + (uint64_t)length;
	if (end < (uint64_t)off)
		end = UINT64_MAX;
	if (end > ns->d.size) {
		if (!(mode & FALLOC_FL_KEEP_SIZE)) {
			reply_err(req, op, EINVAL);
			return;
		}
		end = ns->d.size;
	}
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
		reply_err(req, op, EOPNOTSUPP);
		return;
	}
	fsio_fallocate(fusefs_tl_rx, req, ns, mode, (uint64_t)off, end);
}

/* The kernel asks only for SEEK_DATA and SEEK_HOLE (SET, CUR and END it
 * answers from its cached size).  A block device refuses both with EINVAL
 * (fixed_size_llseek); so does a namespace file, rather than let the kernel
 * fall back to "data up to the size". */
static void ll_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);

	(void)off, (void)whence, (void)fi;
	fuse_reply_err(req, ino_ns(fs, ino) ? EINVAL : ENXIO);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct statvfs sv;
	uint64_t total = 0;

	(void)ino;
	for (unsigned i = 0; i < fs->nr_ns; i++)
		total += fs->ns[i].d.size;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = total / 4096;
	sv.f_files = fs->nr_ns + 1;
	sv.f_namemax = FUSEFS_NAME_MAX - 1;
	fuse_reply_statfs(req, &sv);
}

static void ll_eperm_entry(fuse_req_t req)
{
	fuse_reply_err(req, EPERM);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	ll_eperm_entry(req);
}
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	ll_eperm_entry(req);
}
static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	ll_eperm_entry(req);
}
static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	ll_eperm_entry(req);
}
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	ll_eperm_entry(req);
}
static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	ll_eperm_entry(req);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	ll_eperm_entry(req);
}

const struct fuse_lowlevel_ops fsops_ll = {
	.init = ll_init,
	.lookup = ll_lookup,
	.getattr = ll_getattr,
	.setattr = ll_setattr,
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.releasedir = ll_release_ok,
	.open = ll_open,
	.release = ll_release_ok,
	.read = ll_read,
	.write_buf = ll_write_buf,
	.flush = ll_flush,
	.fsync = ll_fsync,
	.fallocate = ll_fallocate,
	.lseek = ll_lseek,
	.statfs = ll_statfs,
	.create = ll_create,
	.mknod = ll_mknod,
	.mkdir = ll_mkdir,
	.unlink = ll_unlink,
	.rmdir = ll_unlink,
	.symlink = ll_symlink,
	.rename = ll_rename,
	.link = ll_link,
};

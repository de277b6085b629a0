/* mount.c - make a mountpoint usable: create it, clear a stale FUSE mount,
 * refuse a live one, a symbolic link, or a path another user could change
 * (safepath.h).  What is mounted where comes from libmount. */
#include "fuse_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"
#include "safepath.h"

/* The file system type and source of the topmost mount at path, if any.
 * libmount reads /proc/self/mountinfo (and undoes its octal escapes of
 * space, tab, newline and backslash); searching backwards finds the mount
 * stacked last, the one on top. */
static bool mounted_at(const char *path, char *fstype, size_t tlen, char *src, size_t slen)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_fs *fs;
	bool found = false;

	if (!tb) {
		log_warn("%s: cannot read /proc/self/mountinfo", path);
		return false;
	}
	fs = mnt_table_find_target(tb, path, MNT_ITER_BACKWARD);
	if (fs) {
		const char *t = mnt_fs_get_fstype(fs), *s = mnt_fs_get_source(fs);

		found = true;
		snprintf(fstype, tlen, "%s", t ? t : "?");
		snprintf(src, slen, "%s", s ? s : "none");
	}
	mnt_unref_table(tb);
	return found;
}

/* A dead server's mount answers ENOTCONN; a request that was in flight when
 * the kernel aborted the connection (over io_uring, when the rings went
 * away with the process) gets ECONNABORTED. */
static bool dead_server(int err)
{
	return err == ENOTCONN || err == ECONNABORTED;
}

int fusefs_prepare_mountpoint(const char *path)
{
	char real[PATH_MAX], type[64], src[PATH_MAX], msg[PATH_MAX + 160];
	const char *name;
	struct statfs sfs;
	struct stat st;
	int dfd, err;

	/* libfuse mounts on the path and unmounts it by name: no link in it,
	 * and no directory above it that another user could change */
	dfd = safepath_open_parent(path, true, &name, msg, sizeof(msg));
	if (dfd < 0) {
		log_err("%s: mountpoint refused: %s", path, msg);
		return dfd;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		if (dead_server(-err)) {
			/* a crashed server leaves its mount behind, answering
			 * ENOTCONN to everything: detach it */
			log_warn("%s: stale FUSE mount of an earlier run (transport endpoint is not "
				 "connected): unmounting it lazily",
				 path);
			if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
				err = -errno;
				log_err("%s: cannot unmount the stale mount: %s", path, strerror(-err));
				goto out;
			}
			if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				err = -errno;
				log_err("%s: still unusable after unmounting: %s", path, strerror(-err));
				goto out;
			}
		} else if (err == -ENOENT) {
			/* 0755 whatever the umask: the unit's UMask=0077 would
			 * keep everyone but root away from the namespace files */
			if ((mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) ||
			    fchmodat(dfd, name, 0755, 0) < 0) {
				err = -errno;
				log_err("%s: cannot create the mountpoint: %s", path, strerror(-err));
				goto out;
			}
			log_info("%s: created the mountpoint", path);
			if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				err = -errno;
				goto out;
			}
		} else {
			log_err("%s: mountpoint: %s", path, strerror(-err));
			goto out;
		}
	}
	if (S_ISLNK(st.st_mode)) {
		log_err("%s: mountpoint refused: it is a symbolic link (no link is followed in the "
			"mountpoint's path)",
			path);
		err = -ELOOP;
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_err("%s: mountpoint is not a directory", path);
		err = -ENOTDIR;
		goto out;
	}
	if (!realpath(path, real)) {
		err = -errno;
		log_err("%s: mountpoint: %s", path, strerror(-err));
		goto out;
	}
	if (mounted_at(real, type, sizeof(type), src, sizeof(src)) && strncmp(type, "fuse", 4) == 0 &&
	    statfs(real, &sfs) < 0 && dead_server(errno)) {
		/* cached attributes can hide a dead server from stat, never
		 * from statfs, which always asks it */
		log_warn("%s: stale FUSE mount of an earlier run (%s: transport endpoint is not "
			 "connected): unmounting it lazily",
			 path, src);
		if (umount2(real, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
			err = -errno;
			log_err("%s: cannot unmount the stale mount: %s", path, strerror(-err));
			goto out;
		}
	}
	if (mounted_at(real, type, sizeof(type), src, sizeof(src))) {
		log_err("%s: mountpoint is busy: %s (%s) is mounted there; unmount it or choose "
			"another mountpoint",
			path, src, type);
		err = -EBUSY;
		goto out;
	}
	err = 0;
out:
	close(dfd);
	return err;
}

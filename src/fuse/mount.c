/* mount.c - make a mountpoint usable: create it, clear a stale FUSE mount,
 * refuse a live one, a directory that is not empty, a symbolic link, or a
 * path another user could change (safepath.h).  What is mounted where comes
 * from libmount. */
#include "fuse_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <libmount.h>
#include <limits.h>
#include <pthread.h>
#include <sys/sysmacros.h>
#include <time.h>
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

#define FUSE_CONN_DIR "/sys/fs/fuse/connections"
/* How long a FUSE mount of ours on the mountpoint may take to answer a
 * statfs before it is taken for one that no process serves */
#define ORPHAN_PROBE_MS 2000

int fusefs_conn_of_fd(int fd, unsigned *conn)
{
	char path[64], line[128];
	struct stat st;
	FILE *f;
	int err = -ENODATA;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != 10 || minor(st.st_rdev) != 229)
		return -ENOTTY;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "fuse_connection: %u", conn) == 1) {
			err = 0;
			break;
		}
	fclose(f);
	return err;
}

int fusefs_conn_at(const char *path, unsigned *conn, bool *nvmefs)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_fs *fs;
	int err = -ENOENT;

	if (!tb)
		return -EIO;
	/* the path as configured (absolute, no links: safepath), no
	 * canonicalisation, which would stat it */
	fs = mnt_table_find_target(tb, path, MNT_ITER_BACKWARD);
	if (fs) {
		const char *t = mnt_fs_get_fstype(fs);
		dev_t dev = mnt_fs_get_devno(fs);

		if (t && (strcmp(t, "fuse") == 0 || strncmp(t, "fuse.", 5) == 0)) {
			/* the kernel names the connection by its dev_t, major 0 */
			*conn = major(dev) ? (unsigned)dev : minor(dev);
			*nvmefs = strcmp(t, "fuse.nvmefs") == 0;
			err = 0;
		}
	}
	mnt_unref_table(tb);
	return err;
}

bool fusefs_conn_alive(unsigned conn)
{
	char path[64];

	snprintf(path, sizeof(path), FUSE_CONN_DIR "/%u", conn);
	return access(path, F_OK) == 0;
}

int fusefs_conn_abort(unsigned conn)
{
	char path[64];
	int fd, err = 0;

	snprintf(path, sizeof(path), FUSE_CONN_DIR "/%u/abort", conn);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "1", 1) != 1)
		err = -errno;
	close(fd);
	return err;
}

int fusefs_conn_end(unsigned conn, bool *aborted)
{
	struct libmnt_table *tb = NULL;
	struct libmnt_iter *it = NULL;
	struct libmnt_fs *fs;
	int n = 0, err = 0;

	/* a connection no mount shows any more (lazily unmounted, held open
	 * by a fd elsewhere) can only be ended through its control file */
	*aborted = fusefs_conn_alive(conn) && fusefs_conn_abort(conn) == 0;
	tb = mnt_new_table_from_file("/proc/self/mountinfo");
	it = mnt_new_iter(MNT_ITER_BACKWARD);
	if (!tb || !it) {
		err = -EIO;
		goto out;
	}
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_fstype(fs), *target = mnt_fs_get_target(fs);
		dev_t dev = mnt_fs_get_devno(fs);

		/* a FUSE connection's mount (not fuseblk's block device, whose
		 * number is another kind of number), and the one on top there:
		 * the unmount takes whatever is on top */
		if (!t || (strcmp(t, "fuse") != 0 && strncmp(t, "fuse.", 5) != 0) || !target ||
		    major(dev) != 0 || minor(dev) != conn ||
		    mnt_table_find_target(tb, target, MNT_ITER_BACKWARD) != fs)
			continue;
		/* MNT_FORCE: fuse's umount_begin aborts the connection, which
		 * needs no control file: this kernel removes a connection's
		 * directory by name, and one has been seen missing while its
		 * mount was still there */
		if (umount2(target, MNT_FORCE | MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
			err = -errno;
			log_warn("%s: cannot unmount the mount of FUSE connection %u: %s", target,
				 conn, strerror(-err));
			continue;
		}
		*aborted = true;
		n++;
	}
out:
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return n ? n : err;
}

/* ---- a mount of ours that nobody serves ---- */

/* Shared by the prober and the probe thread, which may outlive the prober
 * (left waiting on a connection that could not be ended): whichever of
 * the two lets go last frees it. */
struct probe {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *path;
	bool done;
	unsigned refs;
	int err;
};

static void probe_put(struct probe *p)
{
	pthread_mutex_lock(&p->mu);
	bool last = --p->refs == 0;
	pthread_mutex_unlock(&p->mu);
	if (!last)
		return;
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->path);
	free(p);
}

static void *probe_thread(void *arg)
{
	struct probe *p = arg;
	struct statfs sfs;
	int err = statfs(p->path, &sfs) < 0 ? -errno : 0;

	pthread_mutex_lock(&p->mu);
	p->done = true;
	p->err = err;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	probe_put(p);
	return NULL;
}

/* A FUSE mount of subtype nvmefs at path whose connection still lives is
 * either another daemon's (it answers statfs at once: left alone, the
 * mountpoint is then busy) or one whose server died while something else
 * keeps the connection open (a service manager's fd store that did not
 * hand it over): then every stat of the mountpoint would wait forever.
 * Such a mount is probed with a statfs on a thread of its own, and when no
 * answer comes within ORPHAN_PROBE_MS its connection is ended
 * (fusefs_conn_end: aborted and the mount detached), which also ends the
 * probe.  Whether /sys/fs/fuse/connections still lists the connection does
 * not matter: a mount whose directory is gone can still hang a stat.
 * Other FUSE file systems are not touched. */
static int clear_orphan(const char *path)
{
	struct probe *p;
	struct timespec dl;
	unsigned conn, now;
	bool nvmefs, answered;
	pthread_t t;
	int err;

	if (fusefs_conn_at(path, &conn, &nvmefs) || !nvmefs)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path))) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->refs = 2;
	err = -pthread_create(&t, NULL, probe_thread, p);
	if (err) {
		p->refs = 1;
		probe_put(p);
		return err;
	}
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ORPHAN_PROBE_MS / 1000;
	dl.tv_nsec += (long)(ORPHAN_PROBE_MS % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->mu);
	while (!p->done && pthread_cond_timedwait(&p->cv, &p->mu, &dl) == 0)
		;
	answered = p->done;
	pthread_mutex_unlock(&p->mu);
	if (!answered) {
		bool aborted;
		int n;

		log_warn("%s: FUSE connection %u of an earlier run is open but nobody serves it (no "
			 "answer within %u ms): ending it",
			 path, conn, ORPHAN_PROBE_MS);
		n = fusefs_conn_end(conn, &aborted);
		if (!aborted) {
			/* the probe waits until the holder lets go: leave it
			 * (it frees what it shares); a mount that went away
			 * meanwhile is no obstacle */
			pthread_detach(t);
			probe_put(p);
			if (fusefs_conn_at(path, &now, &nvmefs) || now != conn)
				return 0;
			err = n < 0 ? n : -EBUSY;
			log_err("%s: cannot end FUSE connection %u: %s", path, conn,
				strerror(-err));
			return err;
		}
		log_info("%s: FUSE connection %u aborted, %d mount%s of it detached", path, conn,
			 n > 0 ? n : 0, n == 1 ? "" : "s");
	}
	pthread_join(t, NULL);
	probe_put(p);
	return 0;
}

/* A dead server's mount answers ENOTCONN; a request that was in flight when
 * the kernel aborted the connection (over io_uring, when the rings went
 * away with the process) gets ECONNABORTED. */
static bool dead_server(int err)
{
	return err == ENOTCONN || err == ECONNABORTED;
}

/* The mountpoint (name in dfd) holds nothing: a mount would hide whatever
 * is there (someone's files, or a copy meant to be elsewhere) without a
 * word.  -ENOTEMPTY names up to three of its entries and their count. */
static int check_empty(int dfd, const char *name, const char *path)
{
	char shown[160] = "";
	size_t off = 0;
	unsigned n = 0;
	struct dirent *de;
	DIR *dir;
	int fd, err;

	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		log_err("%s: mountpoint: cannot read the directory: %s", path, strerror(-err));
		return err;
	}
	errno = 0;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n < 3 && off < sizeof(shown))
			off += (size_t)snprintf(shown + off, sizeof(shown) - off, "%s'%s'",
						n ? ", " : "", de->d_name);
		n++;
	}
	err = errno ? -errno : 0;
	closedir(dir);
	if (err) {
		log_err("%s: mountpoint: cannot read the directory: %s", path, strerror(-err));
		return err;
	}
	if (!n)
		return 0;
	log_err("%s: mountpoint is not empty (%u entr%s: %s%s): the mount would hide them; move "
		"them away or choose an empty or missing directory",
		path, n, n == 1 ? "y" : "ies", shown, n > 3 ? ", ..." : "");
	return -ENOTEMPTY;
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
	/* before anything stats the mountpoint */
	err = clear_orphan(path);
	if (err)
		goto out;
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
			 * keep everyone but root away from the namespace files;
			 * made and changed through an fd, never by name */
			int mfd = safepath_mkdir(dfd, name, path, msg, sizeof(msg));

			if (mfd < 0) {
				err = mfd;
				log_err("%s: cannot create the mountpoint: %s", path, msg);
				goto out;
			}
			err = fstat(mfd, &st) < 0 ? -errno : 0;
			close(mfd);
			if (err)
				goto out;
			log_info("%s: created the mountpoint", path);
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
	err = check_empty(dfd, name, path);
out:
	close(dfd);
	return err;
}

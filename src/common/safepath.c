/* safepath.c - a walk from / that follows no symbolic link and trusts only
 * directories others cannot change (see safepath.h). */
#include "safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool trusted_uid(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

static bool dot_or_dotdot(const char *c)
{
	return strcmp(c, ".") == 0 || strcmp(c, "..") == 0;
}

static const char *type_name(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "not a regular file";
}

/* shown: the path up to and including this directory.  holder: it holds
 * the final name, so not even a sticky bit makes group or other write
 * acceptable. */
static int check_dir(const struct stat *st, const char *shown, bool holder, char *msg, size_t len)
{
	mode_t m = st->st_mode;

	if (S_ISLNK(m)) {
		snprintf(msg, len, "%s is a symbolic link (no link is followed in this path)", shown);
		return -ELOOP;
	}
	if (!S_ISDIR(m)) {
		snprintf(msg, len, "%s is not a directory", shown);
		return -ENOTDIR;
	}
	if (!trusted_uid(st->st_uid)) {
		snprintf(msg, len, "directory %s is owned by uid %u, not root", shown,
			 (unsigned)st->st_uid);
		return -EPERM;
	}
	if ((m & (S_IWGRP | S_IWOTH)) && holder) {
		snprintf(msg, len,
			 "directory %s is writable by group or others (mode %04o): the directory "
			 "holding it must be writable by its owner only",
			 shown, (unsigned)(m & 07777));
		return -EPERM;
	}
	if ((m & (S_IWGRP | S_IWOTH)) && !(m & S_ISVTX)) {
		snprintf(msg, len,
			 "directory %s is writable by group or others without the sticky bit "
			 "(mode %04o)",
			 shown, (unsigned)(m & 07777));
		return -EPERM;
	}
	return 0;
}

static int check_file(const struct stat *st, const char *path, char *msg, size_t len)
{
	if (S_ISLNK(st->st_mode)) {
		snprintf(msg, len, "%s is a symbolic link (no link is followed in this path)", path);
		return -ELOOP;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(msg, len, "%s is %s, not a regular file", path, type_name(st->st_mode));
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	}
	if (!trusted_uid(st->st_uid)) {
		snprintf(msg, len, "%s is owned by uid %u, not root", path, (unsigned)st->st_uid);
		return -EPERM;
	}
	return 0;
}

int safepath_mkdir(int dfd, const char *name, const char *shown, char *msg, size_t len)
{
	bool made = true;
	struct stat st;
	int fd, err;

	if (mkdirat(dfd, name, 0755) < 0) {
		if (errno != EEXIST) {
			err = -errno;
			snprintf(msg, len, "cannot create directory %s: %s", shown,
				 strerror(-err));
			return err;
		}
		made = false;
	}
	/* Whatever holds the name now, ours or made meanwhile by someone
	 * else (in a sticky directory another user can plant a link there
	 * between a look-up and the mkdirat): never followed, and changed
	 * only through an fd once it is known to be a trusted directory. */
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)))
			return check_dir(&st, shown, false, msg, len);
		snprintf(msg, len, "cannot open directory %s: %s", shown, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		snprintf(msg, len, "cannot stat %s: %s", shown, strerror(-err));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(msg, len, "%s is not a directory", shown);
		err = -ENOTDIR;
		goto fail;
	}
	if (!trusted_uid(st.st_uid)) {
		snprintf(msg, len, "directory %s is owned by uid %u, not root", shown,
			 (unsigned)st.st_uid);
		err = -EPERM;
		goto fail;
	}
	/* ours: 0755 whatever the umask (UMask=0077 in the unit), as a
	 * 0700 directory would keep everyone but root out.  One made by
	 * someone else keeps its mode, for the caller's checks to judge. */
	if (made && (st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
		err = -errno;
		snprintf(msg, len, "cannot chmod directory %s: %s", shown, strerror(-err));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return err;
}

int safepath_open_parent(const char *path, bool create, const char **name, char *msg, size_t len)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	struct stat st;
	char *p, *last;
	int fd, err;

	if (path[0] != '/') {
		snprintf(msg, len, "%s is not an absolute path", path);
		return -EINVAL;
	}
	if (n >= sizeof(buf)) {
		snprintf(msg, len, "path too long");
		return -ENAMETOOLONG;
	}
	if (path[n - 1] == '/') {
		snprintf(msg, len, "%s ends with a slash: a file or directory name must follow", path);
		return -EINVAL;
	}
	memcpy(buf, path, n + 1);
	last = strrchr(buf, '/');
	*name = path + (last - buf) + 1;
	if (dot_or_dotdot(*name)) {
		snprintf(msg, len, "%s has a . or .. component", path);
		return -EINVAL;
	}
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		err = -errno;
		snprintf(msg, len, "cannot open /: %s", strerror(-err));
		goto fail;
	}
	err = check_dir(&st, "/", last == buf, msg, len);
	if (err)
		goto fail;
	for (p = buf + 1; p < last;) {
		char *slash = strchr(p, '/');
		int next;

		*slash = 0;
		if (!*p) { /* "//" */
			*slash = '/';
			p = slash + 1;
			continue;
		}
		if (dot_or_dotdot(p)) {
			snprintf(msg, len, "%s has a . or .. component", path);
			err = -EINVAL;
			goto fail;
		}
		next = openat(fd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			next = safepath_mkdir(fd, p, buf, msg, len);
			if (next < 0) {
				err = next;
				goto fail;
			}
		}
		if (next < 0) {
			err = -errno;
			if (err == -ENOENT)
				snprintf(msg, len, "directory %s does not exist", buf);
			else
				snprintf(msg, len, "cannot open %s: %s", buf, strerror(-err));
			goto fail;
		}
		close(fd);
		fd = next;
		if (fstat(fd, &st) < 0) {
			err = -errno;
			snprintf(msg, len, "cannot stat %s: %s", buf, strerror(-err));
			goto fail;
		}
		err = check_dir(&st, buf, slash == last, msg, len);
		if (err)
			goto fail;
		*slash = '/';
		p = slash + 1;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return err;
}

int safepath_open_file(const char *path, mode_t mode, bool *created, char *msg, size_t len)
{
	struct stat before, st;
	const char *name;
	int dfd, fd = -1, err, fl;

	*created = false;
	dfd = safepath_open_parent(path, false, &name, msg, len);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, name, &before, AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		if (err != -ENOENT) {
			snprintf(msg, len, "cannot stat %s: %s", path, strerror(-err));
			goto out;
		}
		/* O_EXCL: whatever appeared since is not ours to use */
		fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0) {
			err = -errno;
			snprintf(msg, len, "cannot create %s: %s", path, strerror(-err));
			goto out;
		}
		*created = true;
	} else {
		/* refuse a FIFO or device before opening it: an open alone
		 * can block or act on a device */
		err = check_file(&before, path, msg, len);
		if (err)
			goto out;
		fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			snprintf(msg, len, "cannot open %s: %s", path, strerror(-err));
			goto out;
		}
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		snprintf(msg, len, "cannot stat %s: %s", path, strerror(-err));
		goto out;
	}
	err = check_file(&st, path, msg, len);
	if (err)
		goto out;
	if (!*created && (st.st_dev != before.st_dev || st.st_ino != before.st_ino)) {
		snprintf(msg, len, "%s was replaced while it was being opened", path);
		err = -EAGAIN;
		goto out;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		err = -errno;
		snprintf(msg, len, "%s: fcntl: %s", path, strerror(-err));
		goto out;
	}
	close(dfd);
	return fd;
out:
	if (fd >= 0)
		close(fd);
	if (*created)
		unlinkat(dfd, name, 0);
	*created = false;
	close(dfd);
	return err;
}

int safepath_check_file(const char *path, char *msg, size_t len)
{
	const char *name;
	struct stat st;
	int dfd, err = 0;

	dfd = safepath_open_parent(path, false, &name, msg, len);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT) {
			err = -errno;
			snprintf(msg, len, "cannot stat %s: %s", path, strerror(-err));
		}
	} else {
		err = check_file(&st, path, msg, len);
	}
	close(dfd);
	return err;
}

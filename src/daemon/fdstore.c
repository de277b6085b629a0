/* fdstore.c - FDSTORE=1 / FDSTOREREMOVE=1 and LISTEN_FDS, through
 * libsystemd. */
#include "fdstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

int fdstore_available(void)
{
	static bool said;
	const char *s = getenv("NOTIFY_SOCKET");

	if (s && *s)
		return 1;
	if (!said) {
		said = true;
		log_info("fdstore: no service manager (NOTIFY_SOCKET unset): the mount does not "
			 "outlive a crash of the daemon");
	}
	return 0;
}

int fdstore_memfd(const void *buf, size_t len, int *out)
{
	int fd = memfd_create("nvmefs-fuse-state", MFD_CLOEXEC | MFD_ALLOW_SEALING), err;
	size_t off = 0;

	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0) {
			err = -errno;
			goto fail;
		}
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, SEALS) < 0) {
		err = -errno;
		goto fail;
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	return err;
}

int fdstore_memfd_read(int fd, void *buf, size_t cap, size_t *len)
{
	int seals = fcntl(fd, F_GET_SEALS);
	off_t size;
	size_t off = 0;

	/* only a sealed record is what a run of ours wrote and no one changed */
	if (seals < 0)
		return errno == EINVAL ? -EPERM : -errno;
	if ((seals & SEALS) != SEALS)
		return -EPERM;
	size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return -errno;
	if ((size_t)size > cap)
		return -EMSGSIZE;
	while (off < (size_t)size) {
		ssize_t n = pread(fd, (char *)buf + off, (size_t)size - off, (off_t)off);

		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	*len = off;
	return 0;
}

static int store(int fd, const char *name)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	/* 0: NOTIFY_SOCKET went away; > 0 sent */
	int rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);

	return rc < 0 ? rc : 0;
}

int fdstore_save(int fuse_fd, int state_fd)
{
	int rc;

	if (!fdstore_available())
		return 0;
	rc = store(fuse_fd, FDSTORE_FUSE);
	if (!rc)
		rc = store(state_fd, FDSTORE_STATE);
	if (rc)
		log_warn("fdstore: storing the FUSE connection: %s: the mount will not outlive a "
			 "crash (FileDescriptorStoreMax= too low?)",
			 strerror(-rc));
	return rc;
}

void fdstore_forget(void)
{
	int rc;

	if (!fdstore_available())
		return;
	rc = sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" FDSTORE_FUSE);
	if (rc >= 0)
		rc = sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" FDSTORE_STATE);
	if (rc < 0)
		log_warn("fdstore: removing the stored fds: %s", strerror(-rc));
}

int fdstore_take(int *fuse_fd, int *state_fd)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);

	*fuse_fd = *state_fd = -1;
	if (n <= 0) {
		if (n < 0)
			log_warn("fdstore: LISTEN_FDS: %s", strerror(-n));
		return n < 0 ? 0 : n;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "unknown";

		fcntl(fd, F_SETFD, FD_CLOEXEC);
		if (strcmp(name, FDSTORE_FUSE) == 0 && *fuse_fd < 0) {
			*fuse_fd = fd;
		} else if (strcmp(name, FDSTORE_STATE) == 0 && *state_fd < 0) {
			*state_fd = fd;
		} else {
			log_warn("fdstore: fd %d named \"%s\" handed over: not ours, closed", fd,
				 name);
			close(fd);
		}
	}
	for (int i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
	return n;
}

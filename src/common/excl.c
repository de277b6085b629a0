/* excl.c - see excl.h */
#include "excl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define EXCL_SHOWN 4

/* "pid N (COMM)" of pid, into buf */
static void describe(pid_t pid, char *buf, size_t len)
{
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	if (comm[0])
		snprintf(buf, len, "pid %d (%s)", (int)pid, comm);
	else
		snprintf(buf, len, "pid %d", (int)pid);
}

/* The pid /proc/locks gives for a FLOCK lock on (dev, ino), 0 if none.
 * Its lines: "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE START END", the
 * device's numbers in hex. */
static pid_t flock_holder(dev_t dev, ino_t ino)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	pid_t found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char kind[16], mode[16], rw[16];
		unsigned maj, mnr;
		unsigned long long inode;
		int pid;

		/* a waiting lock's line begins "N: -> FLOCK ...": not a holder */
		if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%llu", kind, mode, rw, &pid, &maj,
			   &mnr, &inode) == 7 &&
		    !strcmp(kind, "FLOCK") && pid > 0 && makedev(maj, mnr) == dev &&
		    (ino_t)inode == ino)
			found = pid;
	}
	fclose(f);
	return found;
}

int excl_users(const char *path, char *who, size_t len)
{
	DIR *procs = opendir("/proc");
	struct dirent *pe;
	struct stat want;
	size_t off = 0;
	int n = 0;

	if (len)
		who[0] = '\0';
	if (!procs || stat(path, &want) < 0) {
		if (procs)
			closedir(procs);
		return 0;
	}
	while ((pe = readdir(procs))) {
		char fdir[64];
		DIR *fds;
		struct dirent *fe;
		pid_t pid;

		if (!isdigit((unsigned char)pe->d_name[0]))
			continue;
		pid = (pid_t)atoi(pe->d_name);
		if (pid == getpid())
			continue;
		snprintf(fdir, sizeof(fdir), "/proc/%d/fd", (int)pid);
		fds = opendir(fdir);
		if (!fds)
			continue; /* gone, or not ours to look at */
		while ((fe = readdir(fds))) {
			struct stat st;

			if (fe->d_name[0] == '.' || fstatat(dirfd(fds), fe->d_name, &st, 0) < 0)
				continue;
			if (st.st_dev != want.st_dev || st.st_ino != want.st_ino ||
			    (st.st_mode & S_IFMT) != (want.st_mode & S_IFMT))
				continue;
			if (n < EXCL_SHOWN && off < len) {
				char d[96];

				describe(pid, d, sizeof(d));
				off += (size_t)snprintf(who + off, len - off, "%s%s", n ? ", " : "", d);
			}
			n++;
			break;
		}
		closedir(fds);
	}
	closedir(procs);
	if (n > EXCL_SHOWN && off < len)
		snprintf(who + off, len - off, " and %d more", n - EXCL_SHOWN);
	return n;
}

int excl_lock(int fd, char *who, size_t len)
{
	struct stat st;
	char path[64];
	pid_t pid;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return -errno;
	snprintf(who, len, "another process");
	if (fstat(fd, &st) < 0)
		return -EWOULDBLOCK;
	pid = flock_holder(st.st_dev, st.st_ino);
	if (pid == getpid()) {
		snprintf(who, len, "this process");
	} else if (pid > 0 && kill(pid, 0) == 0) {
		describe(pid, who, len);
	} else {
		/* the locker is gone (its fd passed on): whoever has it open */
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (excl_users(path, who, len) == 0)
			snprintf(who, len, "another process");
	}
	return -EWOULDBLOCK;
}

/* bdev-ops - run a script of file operations on one path and print every
 * result in a form that can be compared between a block device and a
 * namespace file (tests/integration/t-blockdev-*.sh).
 *
 *   bdev-ops PATH < SCRIPT
 *
 * One command per line; blank lines and lines starting with # are skipped.
 * FD names a descriptor slot (one letter or word).  Numbers are decimal or
 * 0x hex, may be negative.  Each command prints one line: the command as
 * given, " -> ", and its result: the return value, or "-1 ERRNONAME".
 * Data read is shown as "zero" when every byte is 0, else as h=<FNV-1a 64>.
 *
 *   open FD FLAGS          rdonly|wronly|rdwr[,trunc][,direct]
 *   close FD
 *   fstat FD               type=reg|blk|... size=N
 *   size FD                lseek(SEEK_END), position restored
 *   pread FD OFF LEN       N and the data's digest
 *   pwrite FD OFF LEN SEED pattern(SEED) at the file's offsets
 *   pat SEED OFF LEN       digest of pattern(SEED) at [OFF, OFF+LEN): what a
 *                          pwrite with that seed leaves there (no I/O)
 *   aioread FD OFF LEN     one Linux AIO read (io_submit), 4 KiB-aligned buffer
 *   ftruncate FD SIZE
 *   truncate SIZE          truncate(2) on PATH
 *   fallocate FD MODE OFF LEN   MODE: 0 or keep|punch|zero|collapse|insert|nohide
 *   lseek FD OFF set|cur|end|data|hole
 *   statfs FD              bsize, frsize, blocks, bfree, bavail
 *   mmap FD private|shared OFF LEN SEED
 *                          map, digest the mapping; private: store the
 *                          pattern into it and show that pread still sees
 *                          the old data; shared: store the pattern, msync,
 *                          show what pread sees after munmap
 *   waitfor FILE           wait (up to 60 s) until FILE exists
 *   touch FILE             create FILE (to signal a waiting script)
 *
 * Exit 0 when the script ran to its end (whatever the operations returned),
 * 2 on a script error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/aio_abi.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 16
#define MAX_LEN (64u << 20)

static const char *path;
static struct {
	char name[16];
	int fd;
} fds[MAX_FDS];

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The pattern is a function of the seed and the file offset only, so that a
 * digest of any sub-range can be computed without the file. */
static void pattern(uint64_t seed, uint64_t off, uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;

		p[i] = (uint8_t)(splitmix(seed * 0x100000001b3ull + (o >> 3)) >> (8 * (o & 7)));
	}
}

static void digest(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	bool zero = true;

	for (size_t i = 0; i < len; i++) {
		h = (h ^ p[i]) * 0x100000001b3ull;
		if (p[i])
			zero = false;
	}
	if (zero)
		printf(" zero");
	else
		printf(" h=%016" PRIx64, h);
}

static void res_err(long r, int err)
{
	if (r < 0)
		printf("-1 %s", strerrorname_np(err) ? strerrorname_np(err) : "E?");
	else
		printf("%ld", r);
}

static int *slot(const char *name, bool create)
{
	for (int i = 0; i < MAX_FDS; i++)
		if (fds[i].name[0] && strcmp(fds[i].name, name) == 0)
			return &fds[i].fd;
	if (!create)
		return NULL;
	for (int i = 0; i < MAX_FDS; i++)
		if (!fds[i].name[0]) {
			snprintf(fds[i].name, sizeof(fds[i].name), "%s", name);
			fds[i].fd = -1;
			return &fds[i].fd;
		}
	return NULL;
}

static bool num(const char *s, long long *v)
{
	char *end;

	if (!s)
		return false;
	errno = 0;
	*v = strtoll(s, &end, 0);
	return !errno && end != s && !*end;
}

static uint8_t *abuf(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	return p;
}

static int parse_open_flags(const char *s, int *flags)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*flags = O_CLOEXEC;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "rdonly"))
			*flags |= O_RDONLY;
		else if (!strcmp(t, "wronly"))
			*flags |= O_WRONLY;
		else if (!strcmp(t, "rdwr"))
			*flags |= O_RDWR;
		else if (!strcmp(t, "trunc"))
			*flags |= O_TRUNC;
		else if (!strcmp(t, "direct"))
			*flags |= O_DIRECT;
		else
			return -1;
	}
	return 0;
}

static int parse_falloc_mode(const char *s, int *mode)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*mode = 0;
	if (!strcmp(s, "0"))
		return 0;
	for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		if (!strcmp(t, "keep"))
			*mode |= FALLOC_FL_KEEP_SIZE;
		else if (!strcmp(t, "punch"))
			*mode |= FALLOC_FL_PUNCH_HOLE;
		else if (!strcmp(t, "zero"))
			*mode |= FALLOC_FL_ZERO_RANGE;
		else if (!strcmp(t, "collapse"))
			*mode |= FALLOC_FL_COLLAPSE_RANGE;
		else if (!strcmp(t, "insert"))
			*mode |= FALLOC_FL_INSERT_RANGE;
		else if (!strcmp(t, "nohide"))
			*mode |= FALLOC_FL_NO_HIDE_STALE;
		else
			return -1;
	}
	return 0;
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return "reg";
	case S_IFBLK:
		return "blk";
	case S_IFCHR:
		return "chr";
	case S_IFDIR:
		return "dir";
	default:
		return "other";
	}
}

static long aio_read1(int fd, uint8_t *buf, size_t len, long long off)
{
	aio_context_t ctx = 0;
	struct iocb cb, *cbs[1] = {&cb};
	struct io_event ev;
	long r;

	if (syscall(SYS_io_setup, 1, &ctx) < 0)
		return -errno;
	memset(&cb, 0, sizeof(cb));
	cb.aio_fildes = (uint32_t)fd;
	cb.aio_lio_opcode = IOCB_CMD_PREAD;
	cb.aio_buf = (uint64_t)(uintptr_t)buf;
	cb.aio_nbytes = len;
	cb.aio_offset = off;
	r = syscall(SYS_io_submit, ctx, 1, cbs);
	if (r != 1) {
		r = r < 0 ? -errno : -EAGAIN;
		goto out;
	}
	r = syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL);
	r = r == 1 ? (long)ev.res : -errno;
out:
	syscall(SYS_io_destroy, ctx);
	return r;
}

/* Run one command; prints its result.  -1 on a script error. */
static int run(char **a, int n)
{
	const char *c = a[0];
	long long v[4] = {0};
	int *fdp = NULL;
	long r = 0;
	int err = 0;

	/* commands that name a descriptor first */
	if (strcmp(c, "pat") && strcmp(c, "truncate") && strcmp(c, "waitfor") &&
	    strcmp(c, "touch")) {
		if (n < 2)
			return -1;
		fdp = slot(a[1], !strcmp(c, "open"));
		if (!fdp)
			return -1;
	}
	if (!strcmp(c, "open")) {
		int flags;

		if (n != 3 || parse_open_flags(a[2], &flags))
			return -1;
		if (*fdp >= 0)
			close(*fdp);
		*fdp = open(path, flags);
		r = *fdp;
		err = errno;
		res_err(r < 0 ? -1 : 0, err);
	} else if (!strcmp(c, "close")) {
		r = close(*fdp);
		err = errno;
		*fdp = -1;
		res_err(r, err);
	} else if (!strcmp(c, "fstat")) {
		struct stat st;

		r = fstat(*fdp, &st);
		err = errno;
		if (r < 0)
			res_err(r, err);
		else
			printf("type=%s size=%lld", type_name(st.st_mode), (long long)st.st_size);
	} else if (!strcmp(c, "size")) {
		off_t pos = lseek(*fdp, 0, SEEK_CUR);

		r = (long)lseek(*fdp, 0, SEEK_END);
		err = errno;
		res_err(r, err);
		if (pos >= 0)
			lseek(*fdp, pos, SEEK_SET);
	} else if (!strcmp(c, "pread") || !strcmp(c, "aioread")) {
		uint8_t *buf;

		if (n != 4 || !num(a[2], &v[0]) || !num(a[3], &v[1]) || v[1] < 0 ||
		    v[1] > MAX_LEN)
			return -1;
		buf = abuf((size_t)v[1]);
		if (!buf)
			return -1;
		if (!strcmp(c, "pread")) {
			r = pread(*fdp, buf, (size_t)v[1], v[0]);
			err = errno;
		} else {
			r = aio_read1(*fdp, buf, (size_t)v[1], v[0]);
			err = r < 0 ? (int)-r : 0;
		}
		res_err(r, err);
		if (r > 0)
			digest(buf, (size_t)r);
		free(buf);
	} else if (!strcmp(c, "pwrite")) {
		uint8_t *buf;

		if (n != 5 || !num(a[2], &v[0]) || !num(a[3], &v[1]) || !num(a[4], &v[2]) ||
		    v[1] < 0 || v[1] > MAX_LEN)
			return -1;
		buf = abuf((size_t)v[1]);
		if (!buf)
			return -1;
		pattern((uint64_t)v[2], (uint64_t)v[0], buf, (size_t)v[1]);
		r = pwrite(*fdp, buf, (size_t)v[1], v[0]);
		err = errno;
		res_err(r, err);
		free(buf);
	} else if (!strcmp(c, "pat")) {
		uint8_t *buf;

		if (n != 4 || !num(a[1], &v[2]) || !num(a[2], &v[0]) || !num(a[3], &v[1]) ||
		    v[1] <= 0 || v[1] > MAX_LEN || v[0] < 0)
			return -1;
		buf = abuf((size_t)v[1]);
		if (!buf)
			return -1;
		pattern((uint64_t)v[2], (uint64_t)v[0], buf, (size_t)v[1]);
		printf("%lld", v[1]);
		digest(buf, (size_t)v[1]);
		free(buf);
	} else if (!strcmp(c, "ftruncate")) {
		if (n != 3 || !num(a[2], &v[0]))
			return -1;
		r = ftruncate(*fdp, v[0]);
		err = errno;
		res_err(r, err);
	} else if (!strcmp(c, "truncate")) {
		if (n != 2 || !num(a[1], &v[0]))
			return -1;
		r = truncate(path, v[0]);
		err = errno;
		res_err(r, err);
	} else if (!strcmp(c, "fallocate")) {
		int mode;

		if (n != 5 || parse_falloc_mode(a[2], &mode) || !num(a[3], &v[0]) ||
		    !num(a[4], &v[1]))
			return -1;
		r = fallocate(*fdp, mode, v[0], v[1]);
		err = errno;
		res_err(r, err);
	} else if (!strcmp(c, "lseek")) {
		int wh;

		if (n != 4 || !num(a[2], &v[0]))
			return -1;
		if (!strcmp(a[3], "set"))
			wh = SEEK_SET;
		else if (!strcmp(a[3], "cur"))
			wh = SEEK_CUR;
		else if (!strcmp(a[3], "end"))
			wh = SEEK_END;
		else if (!strcmp(a[3], "data"))
			wh = SEEK_DATA;
		else if (!strcmp(a[3], "hole"))
			wh = SEEK_HOLE;
		else
			return -1;
		r = (long)lseek(*fdp, v[0], wh);
		err = errno;
		res_err(r, err);
	} else if (!strcmp(c, "statfs")) {
		struct statfs sf;

		r = fstatfs(*fdp, &sf);
		err = errno;
		if (r < 0)
			res_err(r, err);
		else
			printf("bsize=%ld frsize=%ld blocks=%llu bfree=%llu bavail=%llu",
			       (long)sf.f_bsize, (long)sf.f_frsize, (unsigned long long)sf.f_blocks,
			       (unsigned long long)sf.f_bfree, (unsigned long long)sf.f_bavail);
	} else if (!strcmp(c, "mmap")) {
		bool shared;
		uint8_t *m, *buf;

		if (n != 6 || !num(a[3], &v[0]) || !num(a[4], &v[1]) || !num(a[5], &v[2]) ||
		    v[1] <= 0 || v[1] > MAX_LEN)
			return -1;
		if (!strcmp(a[2], "shared"))
			shared = true;
		else if (!strcmp(a[2], "private"))
			shared = false;
		else
			return -1;
		m = mmap(NULL, (size_t)v[1], PROT_READ | PROT_WRITE,
			 shared ? MAP_SHARED : MAP_PRIVATE, *fdp, v[0]);
		if (m == MAP_FAILED) {
			res_err(-1, errno);
			goto done;
		}
		buf = abuf((size_t)v[1]);
		if (!buf) {
			munmap(m, (size_t)v[1]);
			return -1;
		}
		printf("mapped");
		digest(m, (size_t)v[1]);
		pattern((uint64_t)v[2], (uint64_t)v[0], m, (size_t)v[1]);
		if (shared) {
			r = msync(m, (size_t)v[1], MS_SYNC);
			printf(" msync=");
			res_err(r, errno);
		}
		munmap(m, (size_t)v[1]);
		r = pread(*fdp, buf, (size_t)v[1], v[0]);
		printf(" pread=");
		res_err(r, errno);
		if (r > 0)
			digest(buf, (size_t)r);
		free(buf);
	} else if (!strcmp(c, "waitfor")) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		int i;

		if (n != 2)
			return -1;
		for (i = 0; i < 3000 && access(a[1], F_OK) < 0; i++)
			nanosleep(&ts, NULL);
		printf("%s", i < 3000 ? "0" : "-1 ETIMEDOUT");
	} else if (!strcmp(c, "touch")) {
		int fd;

		if (n != 2)
			return -1;
		fd = open(a[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		res_err(fd < 0 ? -1 : 0, errno);
		if (fd >= 0)
			close(fd);
	} else {
		return -1;
	}
done:
	printf("\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	char line[512];
	unsigned lineno = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH < SCRIPT\n", argv[0]);
		return 2;
	}
	path = argv[1];
	while (fgets(line, sizeof(line), stdin)) {
		char *a[8], *save = NULL, *t;
		int n = 0;

		lineno++;
		line[strcspn(line, "\n")] = 0;
		for (t = strtok_r(line, " \t", &save); t && n < 8; t = strtok_r(NULL, " \t", &save))
			a[n++] = t;
		if (!n || a[0][0] == '#')
			continue;
		for (int i = 0; i < n; i++)
			printf("%s%s", i ? " " : "", a[i]);
		printf(" -> ");
		if (run(a, n) < 0) {
			printf("SCRIPT ERROR\n");
			fprintf(stderr, "bdev-ops: line %u: bad command\n", lineno);
			return 2;
		}
	}
	return 0;
}

/* shortio.so - an LD_PRELOAD logger for the tests' fio runs: every Linux
 * AIO completion whose byte count differs from what its request asked.
 *
 *   LD_PRELOAD=$BUILD/tools/shortio.so NVMEFS_SHORTIO_LOG=FILE fio ...
 *
 * fio's libaio engine reaps with libaio's io_getevents(); this one runs it
 * and then looks at each event: a read or write (IOCB_CMD_PREAD, PWRITE,
 * PREADV, PWRITEV) whose result is a byte count (res >= 0) other than its
 * iocb's length gets one line in FILE ("shortio: pid P: read of N bytes at
 * OFF on fd F completed with M bytes").  fio itself re-issues a short read
 * only when at least one byte arrived, and takes a 0-byte success for a
 * complete one (its verify then reads the buffer's previous contents), so
 * without this a 0-byte read shows as a verify mismatch of another offset.
 * Errors (res < 0) are fio's to report.  tests/integration/lib.sh's
 * fio_env sets it up and shortio_check fails a test on any line.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef int (*getevents_fn)(void *ctx, long min_nr, long nr, struct io_event *ev,
			    struct timespec *timeout);

static void log_short(const struct iocb *cb, unsigned long long asked, long long got)
{
	const char *path = getenv("NVMEFS_SHORTIO_LOG");
	const char *what = cb->aio_lio_opcode == IOCB_CMD_PREAD ||
				   cb->aio_lio_opcode == IOCB_CMD_PREADV
			       ? "read"
			       : "write";
	char line[256];
	int fd, n;

	n = snprintf(line, sizeof(line),
		     "shortio: pid %d: %s of %llu bytes at %lld on fd %u completed with %lld bytes\n",
		     (int)getpid(), what, asked, (long long)cb->aio_offset, cb->aio_fildes, got);
	if (n <= 0)
		return;
	fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : 2;
	if (fd < 0)
		fd = 2;
	/* one write per line: lines of several processes do not interleave */
	if (write(fd, line, (size_t)n) < 0) {
		/* nowhere else to say it */
	}
	if (fd != 2)
		close(fd);
}

static void check(const struct io_event *ev)
{
	const struct iocb *cb = (const struct iocb *)(uintptr_t)ev->obj;
	unsigned long long asked = 0;

	if (!cb || ev->res < 0)
		return;
	switch (cb->aio_lio_opcode) {
	case IOCB_CMD_PREAD:
	case IOCB_CMD_PWRITE:
		asked = cb->aio_nbytes;
		break;
	case IOCB_CMD_PREADV:
	case IOCB_CMD_PWRITEV: {
		const struct iovec *iov = (const struct iovec *)(uintptr_t)cb->aio_buf;

		for (unsigned long long i = 0; i < cb->aio_nbytes; i++)
			asked += iov[i].iov_len;
		break;
	}
	default:
		return;
	}
	if ((unsigned long long)ev->res != asked)
		log_short(cb, asked, ev->res);
}

int io_getevents(void *ctx, long min_nr, long nr, struct io_event *ev, struct timespec *timeout)
{
	static getevents_fn real;
	int n;

	if (!real)
		real = (getevents_fn)dlsym(RTLD_NEXT, "io_getevents");
	if (!real)
		return -38; /* -ENOSYS, as libaio returns errors */
	n = real(ctx, min_nr, nr, ev, timeout);
	for (int i = 0; i < n; i++)
		check(&ev[i]);
	return n;
}

/* fuse-teardown - answers that must not go where they were sent.
 *
 *   fuse-teardown MOUNTPOINT
 *
 * Builds the daemon's stack in one process (software controller, engine, one
 * reactor, the FUSE front end over /dev/fuse) and mounts it, then:
 *
 * 1. A second answer to a request (this program's writev(2) sends an answer
 *    twice, as a daemon bug would) is refused by the kernel with ENOENT: the
 *    front end counts it in dup_answers and logs it; a request answered once
 *    is not counted.
 * 2. A stop that gives up on a request (its read is held by the controller)
 *    unmounts with the request still in flight; the file descriptors freed
 *    by that are taken by files of this program; then the controller
 *    completes the read.  Its answer must go to none of those files (it is
 *    counted in late_answers instead): before the front end kept an fd of
 *    its own per reactor, the answer was written with the closed number,
 *    into whichever file had it now.
 *
 * Exit 0 when all of that holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fuse_fs.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

#define NFILES 16

static int fails;

#define CHECK(cond, ...)                              \
	do {                                          \
		if (!(cond)) {                        \
			printf("FAIL: " __VA_ARGS__); \
			printf("\n");                 \
			fails++;                      \
		}                                     \
	} while (0)

/* Set: the next answer of the front end goes to the kernel twice. */
static atomic_bool send_twice;

/* The front end's writev (it answers with writev): this definition is
 * linked in place of the C library's. */
ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	long n = syscall(SYS_writev, fd, iov, iovcnt);

	if (n >= 0 && atomic_exchange(&send_twice, false))
		n = syscall(SYS_writev, fd, iov, iovcnt);
	return n;
}

struct reader {
	int fd;
	ssize_t n;
	int err;
	char buf[4096];
};

static void *read_one(void *arg)
{
	struct reader *rd = arg;

	rd->n = pread(rd->fd, rd->buf, sizeof(rd->buf), 0);
	rd->err = rd->n < 0 ? errno : 0;
	return NULL;
}

static void stats(struct fusefs *fs, struct fusefs_stats *st)
{
	fusefs_stats_get(fs, st);
}

int main(int argc, char **argv)
{
	struct rig g;
	struct rig_opts o = {.mode = NVME_MODE_POLL};
	struct nvme_ctrl *ctrl;
	struct nvme_reactor *r;
	struct nvme_qpair *qp;
	struct sim *sim;
	struct fusefs *fs;
	struct fusefs_stats st;
	struct reader rd = {0};
	pthread_t th;
	char path[4096], buf[4096];
	const char *name = "t0";
	int rc, fd, files[NFILES];

	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	o.sim[0] = (struct sim_opts){.name = "t0", .nr_ns = 1, .threaded = true};
	o.sim[0].ns[0] =
	    (struct sim_ns_opts){.nlba = 1024, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	/* the held read must not time out while the test holds it */
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 64, .cq_budget = 16,
					    .io_timeout_ms = 600000};
	if ((rc = rig_open(&g, &o))) {
		fprintf(stderr, "set-up: %s\n", strerror(-rc));
		return 1;
	}
	sim = g.sim[0];
	ctrl = g.c[0];
	r = g.r[0];
	qp = g.qp[0][0];
	struct fusefs_opts fo = {.mountpoint = argv[1], .file_mode = 0600, .nr_ctrls = 1,
				 .ctrls = &ctrl, .ctrl_names = &name, .nr_reactors = 1,
				 .reactors = &r, .qpairs = &qp,
				 .transport = FUSEFS_TRANSPORT_CLASSIC};
	if ((rc = fusefs_create(&fo, &fs)) || (rc = rig_start(&g))) {
		fprintf(stderr, "mount: %s\n", strerror(-rc));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/t0n1", argv[1]);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	memset(buf, 0x5a, sizeof(buf));
	CHECK(pwrite(fd, buf, 4096, 0) == 4096, "write");

	/* 1. an answer sent twice */
	stats(fs, &st);
	CHECK(st.dup_answers == 0 && st.late_answers == 0, "before: dup_answers %llu, "
	      "late_answers %llu", (unsigned long long)st.dup_answers,
	      (unsigned long long)st.late_answers);
	atomic_store(&send_twice, true);
	CHECK(pread(fd, buf, 4096, 0) == 4096, "a read answered twice: the first answer counts");
	stats(fs, &st);
	CHECK(st.dup_answers == 1, "a second answer: dup_answers %llu, want 1",
	      (unsigned long long)st.dup_answers);
	CHECK(pread(fd, buf, 4096, 0) == 4096, "read");
	stats(fs, &st);
	CHECK(st.dup_answers == 1 && st.late_answers == 0,
	      "answered once: dup_answers %llu (want 1), late_answers %llu (want 0)",
	      (unsigned long long)st.dup_answers, (unsigned long long)st.late_answers);

	/* 2. a late answer after a stop that gave up on its request */
	sim_fault_stall_next(sim, 1);
	rd.fd = fd;
	if (pthread_create(&th, NULL, read_one, &rd)) {
		fprintf(stderr, "thread\n");
		return 1;
	}
	for (int i = 0; i < 500 && fusefs_inflight(fs) == 0; i++)
		usleep(10000);
	CHECK(fusefs_inflight(fs) == 1, "the held read is not in flight");
	usleep(100000); /* the controller fetches it */
	fusefs_stop(fs);
	fusefs_unmount(fs);
	usleep(100000); /* the reactor lets go of its fd */
	for (int i = 0; i < NFILES; i++) {
		char tmp[] = "/tmp/fuse-teardown.XXXXXX";

		files[i] = mkstemp(tmp);
		if (files[i] < 0) {
			perror("mkstemp");
			return 1;
		}
		unlink(tmp);
	}
	CHECK(sim_fault_release_stalled(sim) == 1, "no read was held by the controller");
	for (int i = 0; i < 500 && fusefs_inflight(fs) != 0; i++)
		usleep(10000);
	CHECK(fusefs_inflight(fs) == 0, "the late read did not finish");
	pthread_join(th, NULL);
	printf("the held read ended with %zd (%s)\n", rd.n, rd.n < 0 ? strerror(rd.err) : "data");
	for (int i = 0; i < NFILES; i++) {
		struct stat sb;

		CHECK(fstat(files[i], &sb) == 0 && sb.st_size == 0,
		      "an answer was written into fd %d, a file opened after the unmount "
		      "(%lld bytes)", files[i], (long long)sb.st_size);
		close(files[i]);
	}
	stats(fs, &st);
	CHECK(st.late_answers == 1, "late_answers %llu, want 1", (unsigned long long)st.late_answers);
	CHECK(st.dup_answers == 1, "dup_answers %llu, want 1 (a late answer is not a second one)",
	      (unsigned long long)st.dup_answers);
	close(fd);
	CHECK(rig_stop(&g, 0) == 0, "reactors did not stop");
	fusefs_destroy(fs);
	rig_close(&g);
	printf("%s\n", fails ? "failures" : "all teardown checks passed");
	return fails ? 1 : 0;
}

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
 * 2. A stop that gives up on a request (the controller holds its read 3 s)
 *    unmounts with the request still in flight; once the connection has
 *    ended (the caller's read fails) the file descriptors freed by that are
 *    taken by files of this program; then the controller completes the
 *    read.  Its answer must go to none of those files (it is
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
#define HOLD_S 3 /* seconds the controller holds the late read */

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
	atomic_bool done;
	char buf[4096];
};

static void *read_one(void *arg)
{
	struct reader *rd = arg;

	rd->n = pread(rd->fd, rd->buf, sizeof(rd->buf), 0);
	rd->err = rd->n < 0 ? errno : 0;
	atomic_store(&rd->done, true);
	return NULL;
}

static void stats(struct fusefs *fs, struct fusefs_stats *st)
{
	fusefs_stats_get(fs, st);
}

/* The reactor counts an answer after the kernel has taken it (and the
 * caller woken): wait (5 s at most) for dup_answers and late_answers to
 * reach dup and late. */
static void stats_wait(struct fusefs *fs, struct fusefs_stats *st, uint64_t dup, uint64_t late)
{
	for (int i = 0; i < 500; i++) {
		stats(fs, st);
		if (st->dup_answers >= dup && st->late_answers >= late)
			return;
		usleep(10000);
	}
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
	stats_wait(fs, &st, 1, 0);
	CHECK(st.dup_answers == 1, "a second answer: dup_answers %llu, want 1",
	      (unsigned long long)st.dup_answers);
	CHECK(pread(fd, buf, 4096, 0) == 4096, "read");
	stats(fs, &st);
	CHECK(st.dup_answers == 1 && st.late_answers == 0,
	      "answered once: dup_answers %llu (want 1), late_answers %llu (want 0)",
	      (unsigned long long)st.dup_answers, (unsigned long long)st.late_answers);

	/* 2. a late answer after a stop that gave up on its request: the
	 * controller completes the read HOLD_S after it took it */
	sim_fault_delay(sim, HOLD_S * 1000000u);
	/* the reads above are released a moment after their answers: only the
	 * held one may count below */
	for (int i = 0; i < 500 && fusefs_inflight(fs) != 0; i++)
		usleep(10000);
	CHECK(fusefs_inflight(fs) == 0, "the earlier reads are still in flight");
	rd.fd = fd;
	if (pthread_create(&th, NULL, read_one, &rd)) {
		fprintf(stderr, "thread\n");
		return 1;
	}
	for (int i = 0; i < 500 && fusefs_inflight(fs) == 0; i++)
		usleep(10000);
	CHECK(fusefs_inflight(fs) == 1, "the held read is not in flight");
	fusefs_stop(fs);
	fusefs_unmount(fs);
	/* the connection ends once the reactor has let go of its fd too: the
	 * held read fails then (ECONNABORTED), and nothing of the reactor
	 * reaches the kernel any more */
	for (int i = 0; i < 1000 && !atomic_load(&rd.done); i++)
		usleep(10000);
	CHECK(atomic_load(&rd.done), "the held read did not end within 10 s of the unmount");
	for (int i = 0; i < NFILES; i++) {
		char tmp[] = "/tmp/fuse-teardown.XXXXXX";

		files[i] = mkstemp(tmp);
		if (files[i] < 0) {
			perror("mkstemp");
			return 1;
		}
		unlink(tmp);
	}
	CHECK(fusefs_inflight(fs) == 1, "the held read completed before the files were open");
	for (int i = 0; i < 1000 && fusefs_inflight(fs) != 0; i++)
		usleep(10000);
	sim_fault_delay(sim, 0);
	CHECK(fusefs_inflight(fs) == 0, "the late read did not finish");
	if (atomic_load(&rd.done))
		pthread_join(th, NULL);
	printf("the held read ended with %zd (%s)\n", rd.n, rd.n < 0 ? strerror(rd.err) : "data");
	for (int i = 0; i < NFILES; i++) {
		struct stat sb;

		CHECK(fstat(files[i], &sb) == 0 && sb.st_size == 0,
		      "an answer was written into fd %d, a file opened after the unmount "
		      "(%lld bytes)", files[i], (long long)sb.st_size);
		close(files[i]);
	}
	stats_wait(fs, &st, 1, 1);
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

/* fuse-faults - engine errors reach FUSE callers as errno, never as a hang.
 *
 *   fuse-faults MOUNTPOINT
 *
 * Builds the daemon's stack in one process (software controller, engine, one
 * reactor, the FUSE front end) and mounts it; then, through the mounted file:
 * a read and a write that the controller fails with a media error get EIO, a
 * command whose completion the controller loses gets EIO within the timeout
 * (abort and reset by the engine) and the namespace works again afterwards,
 * a write past the end gets ENOSPC.  Exit 0 when all of that holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuse_fs.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

static int fails;

#define CHECK(...) RIG_CHECK(fails, __VA_ARGS__)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
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
	char path[4096], buf[8192];
	const char *name = "f0";
	int rc, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	o.sim[0] = (struct sim_opts){.name = "f0", .nr_ns = 1, .threaded = true, .vwc = true};
	o.sim[0].ns[0] =
	    (struct sim_ns_opts){.nlba = 1024, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 64, .cq_budget = 16, .io_timeout_ms = 300};
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
				 .reactors = &r, .qpairs = &qp};
	if ((rc = fusefs_create(&fo, &fs)) || (rc = rig_start(&g))) {
		fprintf(stderr, "mount: %s\n", strerror(-rc));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/f0n1", argv[1]);
	fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	memset(buf, 0xab, sizeof(buf));
	CHECK(pwrite(fd, buf, 8192, 4096) == 8192, "plain write");
	CHECK(pread(fd, buf, 8192, 4096) == 8192, "plain read");

	uint16_t media = (uint16_t)((NVME_SCT_MEDIA << 8) | NVME_SC_READ_ERROR | NVME_STATUS_DNR);
	sim_fault_fail_next(sim, 1, media);
	errno = 0;
	CHECK(pread(fd, buf, 4096, 0) < 0 && errno == EIO, "media error on read: errno %d", errno);
	sim_fault_fail_next(sim, 1, media);
	errno = 0;
	CHECK(pwrite(fd, buf, 4096, 0) < 0 && errno == EIO, "media error on write: errno %d", errno);
	sim_fault_fail_next(sim, 1, media);
	errno = 0;
	CHECK(pwrite(fd, buf, 100, 10) < 0 && errno == EIO, "media error in a read-modify-write: %d",
	      errno);
	CHECK(pread(fd, buf, 4096, 4096) == 4096, "read after media errors");

	double t0 = now();
	sim_fault_lose_next(sim, 1);
	errno = 0;
	ssize_t n = pread(fd, buf, 4096, 8192);
	double dt = now() - t0;
	CHECK(n < 0 && errno == EIO, "lost completion: %zd, errno %d", n, errno);
	CHECK(dt < 10.0, "lost completion took %.1f s", dt);
	printf("lost completion answered after %.2f s\n", dt);
	memset(buf, 0x5c, 4096);
	CHECK(pwrite(fd, buf, 4096, 0) == 4096, "write after the timeout");
	char back[4096];
	CHECK(pread(fd, back, 4096, 0) == 4096 && memcmp(back, buf, 4096) == 0,
	      "read back after the timeout");
	errno = 0;
	CHECK(pwrite(fd, buf, 4096, 1024 * 4096) < 0 && errno == ENOSPC, "past the end: errno %d",
	      errno);
	close(fd);

	fusefs_stop(fs);
	for (int i = 0; i < 500 && !fusefs_drained(fs); i++)
		usleep(10000);
	CHECK(fusefs_drained(fs), "not drained");
	fusefs_unmount(fs);
	CHECK(rig_stop(&g, 0) == 0, "reactors did not stop");
	fusefs_destroy(fs);
	rig_close(&g);
	printf("%s\n", fails ? "failures" : "all fault checks passed");
	return fails ? 1 : 0;
}

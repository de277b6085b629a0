/* fuse-zeroes - punch hole and zero range reach the device as Write Zeroes,
 * split at the controller's limit, with DEAC for a punch where deallocated
 * blocks read as zeroes, and as written zeroes where Write Zeroes is missing;
 * never as Dataset Management.
 *
 *   fuse-zeroes MOUNTPOINT
 *
 * Builds the daemon's stack in one process with three software controllers
 * and mounts it:
 *   z0  WZSL = 8 KiB (Identify Controller NVM), DLFEAT 001b
 *   z1  DLFEAT 000b (deallocated blocks need not read as zeroes)
 *   z2  no Write Zeroes in ONCS
 * On each namespace (4 MiB of 4 KiB blocks, filled with 0xab first) it
 * punches [1 MiB, 2 MiB) and zeroes [2.5 MiB, 3 MiB), checks the controller's
 * command counts for each and that the range reads back as zeroes with the
 * bytes around it intact.  Exit 0 when all of that holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse_fs.h"
#include "nvme.h"
#include "nvme_spec.h"
#include "rig.h"
#include "sim.h"

#define NCTRL 3
#define NSBYTES (4u << 20)
#define MIB (1u << 20)

static int fails;

#define CHECK(...) RIG_CHECK(fails, __VA_ARGS__)

/* z1: namespaces without DLFEAT 001b; z2: a controller without Write Zeroes */
static uint16_t id_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	long which = (long)arg;
	unsigned cns = cmd->cdw10 & 0xff;

	if (which == 1 && cns == 0)
		((struct nvme_id_ns *)data)->dlfeat = 0;
	if (which == 2 && cns == 1)
		((struct nvme_id_ctrl *)data)->oncs &= (uint16_t)~NVME_ONCS_WRITE_ZEROES;
	return status;
}

/* every byte of [off, off+len) is v */
static int all(int fd, uint64_t off, size_t len, unsigned char v)
{
	unsigned char *b = malloc(len);
	int ok;

	if (!b)
		return 0;
	ok = pread(fd, b, len, (off_t)off) == (ssize_t)len;
	for (size_t i = 0; ok && i < len; i++)
		ok = b[i] == v;
	free(b);
	return ok;
}

static void check_ns(const char *path, struct sim *sim, int k)
{
	struct sim_stats s0, s1, s2;
	unsigned char *fill = malloc(NSBYTES);
	int fd = open(path, O_RDWR);

	if (fd < 0 || !fill) {
		CHECK(0, "%s: open: %s", path, strerror(errno));
		free(fill);
		return;
	}
	memset(fill, 0xab, NSBYTES);
	CHECK(pwrite(fd, fill, NSBYTES, 0) == NSBYTES, "%s: fill", path);
	sim_get_stats(sim, &s0);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MIB, MIB) == 0,
	      "%s: punch: %s", path, strerror(errno));
	sim_get_stats(sim, &s1);
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 5 * MIB / 2, MIB / 2) == 0, "%s: zero: %s", path,
	      strerror(errno));
	sim_get_stats(sim, &s2);
	CHECK(all(fd, MIB, MIB, 0), "%s: punched range not zero", path);
	CHECK(all(fd, 5 * MIB / 2, MIB / 2, 0), "%s: zeroed range not zero", path);
	CHECK(all(fd, 0, MIB, 0xab) && all(fd, 2 * MIB, MIB / 2, 0xab) && all(fd, 3 * MIB, MIB, 0xab),
	      "%s: bytes around the ranges changed", path);
	CHECK(s2.dsm == s0.dsm, "%s: Dataset Management sent (%llu)", path,
	      (unsigned long long)(s2.dsm - s0.dsm));
	uint64_t pwz = s1.write_zeroes - s0.write_zeroes, pdeac = s1.write_zeroes_deac -
	                                                          s0.write_zeroes_deac;
	uint64_t zwz = s2.write_zeroes - s1.write_zeroes, zdeac = s2.write_zeroes_deac -
	                                                          s1.write_zeroes_deac;
	uint64_t pw = s1.bytes_written - s0.bytes_written, zw = s2.bytes_written - s1.bytes_written;
	printf("%s: punch: %llu Write Zeroes (%llu with DEAC), %llu bytes written; zero: %llu "
	       "Write Zeroes (%llu with DEAC), %llu bytes written\n",
	       path, (unsigned long long)pwz, (unsigned long long)pdeac, (unsigned long long)pw,
	       (unsigned long long)zwz, (unsigned long long)zdeac, (unsigned long long)zw);
	switch (k) {
	case 0: /* 1 MiB in commands of at most WZSL = 8 KiB */
		CHECK(pwz == 128 && pdeac == 128, "%s: punch: want 128 Write Zeroes with DEAC", path);
		CHECK(zwz == 64 && zdeac == 0, "%s: zero: want 64 Write Zeroes without DEAC", path);
		break;
	case 1: /* deallocation would not read back as zeroes: no DEAC */
		CHECK(pwz >= 1 && pdeac == 0, "%s: punch: want Write Zeroes without DEAC", path);
		CHECK(zwz >= 1 && zdeac == 0, "%s: zero: want Write Zeroes without DEAC", path);
		break;
	default: /* no Write Zeroes: zeroes are written */
		CHECK(pwz == 0 && pw == MIB, "%s: punch: want 1 MiB of zeroes written", path);
		CHECK(zwz == 0 && zw == MIB / 2, "%s: zero: want 512 KiB of zeroes written", path);
		break;
	}
	close(fd);
	free(fill);
}

int main(int argc, char **argv)
{
	const char *names[NCTRL] = {"z0", "z1", "z2"};
	struct rig g;
	struct rig_opts o = {.nr_ctrls = NCTRL, .mode = NVME_MODE_POLL, .pool_bytes = 16u << 20};
	struct sim *sims[NCTRL];
	struct nvme_ctrl *ctrls[NCTRL];
	struct nvme_qpair *qps[NCTRL];
	struct nvme_reactor *r;
	struct fusefs *fs;
	char path[4096];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	for (long i = 0; i < NCTRL; i++) {
		struct sim_opts *so = &o.sim[i];
		*so = (struct sim_opts){.name = names[i], .nr_ns = 1, .threaded = true,
				       .identify_hook = id_hook, .hook_arg = (void *)i};
		so->wzsl = i == 0 ? 1 : 0;
		so->ns[0] = (struct sim_ns_opts){
		    .nlba = NSBYTES / 4096, .lba_size = 4096, .backing = SIM_BACKING_RAM};
		o.ctrl[i] = (struct nvme_ctrl_opts){.queue_depth = 64, .cq_budget = 16,
						    .io_timeout_ms = 5000};
	}
	if ((rc = rig_open(&g, &o))) {
		fprintf(stderr, "set-up: %s\n", strerror(-rc));
		return 1;
	}
	r = g.r[0];
	for (int i = 0; i < NCTRL; i++) {
		sims[i] = g.sim[i];
		ctrls[i] = g.c[i];
		qps[i] = g.qp[0][i];
	}
	CHECK(nvme_ctrl_get_info(ctrls[0])->max_wz_bytes == 8192, "z0: WZSL read as %llu bytes",
	      (unsigned long long)nvme_ctrl_get_info(ctrls[0])->max_wz_bytes);
	struct fusefs_opts fo = {.mountpoint = argv[1], .file_mode = 0600, .nr_ctrls = NCTRL,
				 .ctrls = ctrls, .ctrl_names = names, .nr_reactors = 1,
				 .reactors = &r, .qpairs = qps};
	if ((rc = fusefs_create(&fo, &fs)) || (rc = rig_start(&g))) {
		fprintf(stderr, "mount: %s\n", strerror(-rc));
		return 1;
	}
	for (int i = 0; i < NCTRL; i++) {
		snprintf(path, sizeof(path), "%s/%sn1", argv[1], names[i]);
		check_ns(path, sims[i], i);
	}

	fusefs_stop(fs);
	for (int i = 0; i < 500 && !fusefs_drained(fs); i++)
		usleep(10000);
	CHECK(fusefs_drained(fs), "not drained");
	fusefs_unmount(fs);
	CHECK(rig_stop(&g, 0) == 0, "reactor did not stop");
	fusefs_destroy(fs);
	rig_close(&g);
	printf("%s\n", fails ? "failures" : "all Write Zeroes checks passed");
	return fails ? 1 : 0;
}

/* fuzz_bringup.c - libFuzzer target: the device's side of bring-up.
 *
 * Each input is a software controller (inline, on this thread) that reports
 * what the input says: CAP, VS, the length of BAR0, the Number of Queues
 * answer, Identify Controller, Identify Namespace, the active namespace
 * list and Identify Controller NVM, and possibly fails one admin command.
 * The engine brings it up (nvme_ctrl_open) and must either refuse it with
 * a negative errno or give a controller whose every reported value is sane
 * (below); then one read of the first block of its first namespace on I/O
 * queue 1 completes exactly once (with data or an error), and the
 * controller closes.  A crash, an out-of-bounds access (ASan), a leak or a
 * broken rule (abort) is a finding.
 *
 * Input (missing bytes read as zero):
 *   0..7    CAP, little-endian; unless flags bit 0, CSS.NVM is forced on
 *           and MPSMIN to 4 KiB (else nearly every input is refused there)
 *   8..11   VS
 *   12      BAR0 length: (1 + b % 32) * 4 KiB
 *   13      I/O queues asked: 1 + b % 4
 *   14..17  Set Features Number of Queues dw0 as reported (0-based counts)
 *   18      flags: 0 CAP as is; 1 the sim's own Number of Queues answer;
 *           2 no active namespace list (Invalid Field: NSIDs 1..NN are
 *           probed); 3 the list is full pages of every NSID above the one
 *           asked; 4 Identify Controller NVM fails (Invalid Field); 5 an
 *           NSID up to 32 the sim lacks answers 64 blocks of 512 bytes
 *           (before the patches); 6 read the namespaces again after the
 *           bring-up (what a reset does).  Identify Namespace of an NSID
 *           above 32 fails (Invalid Namespace): a list or NN naming more
 *           ends the bring-up there, so that an input costs at most 32
 *           Identify Namespace commands (test_hostile brings up 1024)
 *   19      admin command to fail (its count from 1, 0: none) ...
 *   20      ... with this generic status code (0 counts as 06h, internal)
 *   21..    patch records, applied to every answer they name:
 *           [target][offset lo][offset hi][len][len bytes]; target & 3: 0
 *           Identify Controller, 1 Identify Namespace (target >> 2: that
 *           NSID, 0: every one), 2 the active namespace list, 3 Identify
 *           Controller NVM; offset & 0xfff, the bytes clipped to the page.
 *
 * Sane: nr_io_queues in 1..asked with queue nr_io_queues' doorbells inside
 * BAR0; max_xfer in 4 KiB..2 MiB; at most NVME_MAX_NAMESPACES namespaces,
 * NSIDs ascending and neither 0 nor FFFFFFFFh; each namespace with LBA
 * shift 9..16, a block no larger than max_xfer, 1..(2^63 - 1) bytes;
 * model, serial and firmware printable and NUL-terminated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

#define HDR      21
#define BUF_LEN  (64u << 10) /* the largest block */
#define FZ_MAX_NSID 32u     /* Identify Namespace fails above it */

enum {
	F_CAP_RAW = 1u << 0,
	F_OWN_NQ = 1u << 1,
	F_NO_LIST = 1u << 2,
	F_FULL_LIST = 1u << 3,
	F_NO_NVM = 1u << 4,
	F_ANY_NS = 1u << 5,
	F_RECHECK = 1u << 6,
};

#define DIE(...)                                           \
	do {                                               \
		fprintf(stderr, "fuzz_bringup: " __VA_ARGS__); \
		fprintf(stderr, "\n");                     \
		abort();                                   \
	} while (0)

/* this input: read by the hooks, which run on this thread */
static struct {
	const uint8_t *patch;
	size_t patch_len;
	uint8_t flags;
	uint32_t nq_dw0;
	unsigned fail_at, admin_seen;
	uint8_t fail_sc;
} in;

static struct nvme_reactor *reactor;
static void *buf;

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void apply_patches(unsigned target, uint32_t nsid, uint8_t *data)
{
	const uint8_t *p = in.patch;
	size_t left = in.patch_len;
	while (left >= 4) {
		unsigned t = p[0], off = (p[1] | p[2] << 8) & 0xfffu, len = p[3];
		p += 4;
		left -= 4;
		if (len > left)
			len = (unsigned)left;
		unsigned n = len < 4096 - off ? len : 4096 - off;
		if ((t & 3) == target && (target != 1 || (t >> 2) == 0 || (t >> 2) == nsid))
			memcpy(data + off, p, n);
		p += len;
		left -= len;
	}
}

static uint16_t id_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	(void)arg;
	unsigned target;
	switch (cmd->cdw10 & 0xff) {
	case NVME_ID_CNS_CTRL:
		target = 0;
		break;
	case NVME_ID_CNS_NS_CSI: /* the NVM command set's: the same patches, other fields */
	case NVME_ID_CNS_NS:
		target = 1;
		/* each namespace costs an Identify: a long list is cut short by
		 * the failure of the first NSID beyond these (an error path
		 * too); test_hostile brings up 1024 */
		if (cmd->nsid > FZ_MAX_NSID)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
		if (status && (in.flags & F_ANY_NS)) {
			struct nvme_id_ns *id = data;
			memset(id, 0, 4096);
			id->nsze = id->ncap = 64;
			id->lbaf[0].lbads = 9;
			status = 0;
		}
		break;
	case NVME_ID_CNS_NS_ACTIVE_LIST:
		target = 2;
		if (in.flags & F_NO_LIST)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		if (in.flags & F_FULL_LIST) {
			uint32_t *list = data;
			for (unsigned i = 0; i < 1024; i++) {
				uint64_t id = (uint64_t)cmd->nsid + 1 + i;
				list[i] = id <= 0xfffffffeu ? (uint32_t)id : 0;
			}
		}
		break;
	case NVME_ID_CNS_CTRL_NVM:
		target = 3;
		if (in.flags & F_NO_NVM)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		break;
	default:
		return status;
	}
	if (status == 0)
		apply_patches(target, cmd->nsid, data);
	return status;
}

static uint16_t admin_hook(void *arg, const struct nvme_sqe *cmd, uint16_t status, uint32_t *dw0)
{
	(void)arg;
	if (cmd->opc == NVME_ADM_SET_FEATURES && (cmd->cdw10 & 0xff) == NVME_FEAT_NUM_QUEUES &&
	    !(in.flags & F_OWN_NQ))
		*dw0 = in.nq_dw0;
	if (++in.admin_seen == in.fail_at)
		status = NVME_STATUS_MAKE(NVME_SCT_GENERIC, in.fail_sc ? in.fail_sc : NVME_SC_INTERNAL);
	return status;
}

static void check_str(const char *s, size_t cap, const char *what)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		DIE("%s is not NUL-terminated", what);
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			DIE("%s has byte 0x%02x", what, (unsigned char)s[i]);
}

static void check_info(struct nvme_ctrl *c, struct nvme_bus *bus, unsigned asked)
{
	const struct nvme_ctrl_info *ci = nvme_ctrl_get_info(c);
	if (ci->nr_io_queues < 1 || ci->nr_io_queues > asked)
		DIE("%u I/O queues granted, %u asked", ci->nr_io_queues, asked);
	uint32_t dstrd = NVME_CAP_DSTRD(ci->cap);
	if ((uint64_t)NVME_REG_DBS + (2ull * ci->nr_io_queues + 1) * (4ull << dstrd) + 4 >
	    bus->bar0_len)
		DIE("queue %u's doorbells (DSTRD %u) outside a BAR0 of %zu bytes", ci->nr_io_queues,
		    dstrd, bus->bar0_len);
	if (ci->max_xfer < 4096 || ci->max_xfer > NVME_ENGINE_MAX_XFER)
		DIE("max_xfer %u", ci->max_xfer);
	if (ci->nr_ns > NVME_MAX_NAMESPACES)
		DIE("%u namespaces", ci->nr_ns);
	for (unsigned i = 0; i < ci->nr_ns; i++) {
		const struct nvme_ns_info *ns = &ci->ns[i];
		if (ns->nsid == 0 || ns->nsid == 0xffffffffu || (i && ns->nsid <= ci->ns[i - 1].nsid))
			DIE("namespace %u: NSID %u after %u", i, ns->nsid, i ? ci->ns[i - 1].nsid : 0);
		if (ns->lba_shift < 9 || ns->lba_shift > 16 || ns->lba_size != 1u << ns->lba_shift ||
		    ns->lba_size > ci->max_xfer)
			DIE("NSID %u: LBA shift %u, size %u", ns->nsid, ns->lba_shift, ns->lba_size);
		if (ns->nlba == 0 || ns->nlba > (uint64_t)INT64_MAX >> ns->lba_shift)
			DIE("NSID %u: %llu blocks of %u bytes", ns->nsid, (unsigned long long)ns->nlba,
			    ns->lba_size);
		/* metadata served only as the engine can: PI of a known type and
		 * guard that fits, a buffer only for separate metadata it holds */
		bool pi_ok = ns->pi_type ? ns->pi_type <= 3 &&
		                               (ns->pi_guard == 16 || ns->pi_guard == 64) &&
		                               ns->ms >= (ns->pi_guard == 64 ? 16 : 8)
		                         : !ns->pi_guard && !ns->prinfo;
		if (!pi_ok || (!ns->ms && (ns->pi_type || ns->md_buf || ns->md_ext)) ||
		    (ns->md_buf && (ns->md_ext || ns->ms > NVME_MD_HALF)))
			DIE("NSID %u: %u bytes of metadata, PI type %u guard %u, buffer %d, extended %d",
			    ns->nsid, ns->ms, ns->pi_type, ns->pi_guard, ns->md_buf, ns->md_ext);
	}
	check_str(ci->model, sizeof(ci->model), "model");
	check_str(ci->serial, sizeof(ci->serial), "serial");
	check_str(ci->firmware, sizeof(ci->firmware), "firmware");
}

static void read_cb(void *arg, int err, uint16_t status)
{
	(void)status;
	int *r = arg;
	if (*r != 1)
		DIE("read completed twice");
	if (err > 0 || err < -4095)
		DIE("read completed with %d", err);
	*r = err;
}

/* One read of the first block of the first namespace on queue 1. */
static void read_first(struct nvme_ctrl *c)
{
	const struct nvme_ctrl_info *ci = nvme_ctrl_get_info(c);
	if (!ci->nr_ns)
		return;
	struct nvme_qpair *qp;
	int rc = nvme_qpair_create(c, reactor, 1, &qp);
	if (rc < 0) {
		if (rc < -4095)
			DIE("nvme_qpair_create: %d", rc);
		return; /* the device failed a Create I/O queue command */
	}
	int res = 1;
	rc = nvme_qpair_read(qp, ci->ns[0].nsid, 0, buf, ci->ns[0].lba_size, read_cb, &res);
	if (rc == 0) {
		nvme_qpair_flush_sq(qp);
		for (unsigned i = 0; i < 64 && res == 1; i++)
			nvme_qpair_reap(qp, 0);
	} else if (rc > 0 || rc < -4095) {
		DIE("nvme_qpair_read: %d", rc);
	} else {
		res = rc; /* refused before the device saw it */
	}
	nvme_qpair_destroy(qp); /* fails what is left */
	if (res == 1)
		DIE("the read never completed");
}

static void teardown(void)
{
	nvme_reactor_buf_free(reactor, buf, BUF_LEN);
	nvme_reactor_destroy(reactor);
}

static void setup(void)
{
	log_set_level(LOG_LVL_ERROR);
	struct nvme_reactor_opts ro = {.id = 0, .cpu = -1, .mode = NVME_MODE_POLL,
	                               .buf_pool_bytes = 2u << 20};
	if (nvme_reactor_create(&ro, &reactor) < 0)
		DIE("nvme_reactor_create");
	if (!(buf = nvme_reactor_buf_alloc(reactor, BUF_LEN)))
		DIE("buffer");
	atexit(teardown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!reactor)
		setup();
	uint8_t h[HDR] = {0};
	memcpy(h, data, size < HDR ? size : HDR);
	in.patch = size > HDR ? data + HDR : NULL;
	in.patch_len = size > HDR ? size - HDR : 0;
	in.flags = h[18];
	in.nq_dw0 = le32(h + 14);
	in.fail_at = h[19];
	in.fail_sc = h[20];
	in.admin_seen = 0;

	uint64_t cap = (uint64_t)le32(h) | (uint64_t)le32(h + 4) << 32;
	if (!(in.flags & F_CAP_RAW)) {
		cap |= (uint64_t)NVME_CAP_CSS_NVM << 37;
		cap &= ~(0xfull << 48);
	}
	struct sim_opts so = {.name = "fz", .nr_ns = 2, .identify_hook = id_hook,
	                      .admin_hook = admin_hook, .cap = cap, .vs = le32(h + 8),
	                      .bar_len = (1u + h[12] % 32u) * 4096u};
	so.ns[0] = (struct sim_ns_opts){.nlba = 1024, .lba_size = 512, .backing = SIM_BACKING_NULL};
	so.ns[1] = (struct sim_ns_opts){.nlba = 256, .lba_size = 4096, .backing = SIM_BACKING_NULL};
	struct sim *s;
	if (sim_create(&so, &s) < 0)
		DIE("sim_create");
	unsigned asked = 1 + h[13] % 4u;
	struct nvme_ctrl_opts co = {.name = "fz", .io_queues = asked, .queue_depth = 16,
	                            .io_timeout_ms = 5000, .io_retries = 0};
	struct nvme_ctrl *c;
	int rc = nvme_ctrl_open(sim_bus(s), &co, &c);
	if (rc < 0) {
		if (rc < -4095)
			DIE("nvme_ctrl_open: %d", rc);
		sim_destroy(s);
		return 0;
	}
	if (rc > 0)
		DIE("nvme_ctrl_open: %d", rc);
	check_info(c, sim_bus(s), asked);
	if (in.flags & F_RECHECK) {
		rc = nvme_ctrl_recheck_namespaces(c, false);
		if (rc > 0 || rc < -4095)
			DIE("nvme_ctrl_recheck_namespaces: %d", rc);
	}
	read_first(c);
	nvme_ctrl_close(c); /* and the sim with it */
	return 0;
}

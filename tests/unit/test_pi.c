/* test_pi.c - the engine on namespaces with metadata and end-to-end
 * protection information, over the software controller: which formats it
 * serves and which it refuses (and why), what every Read, Write and Write
 * Zeroes it sends carries (PRINFO, reference tags, MPTR), data through each
 * served format, and misplaced or corrupted blocks failing with -EIO and
 * counted as protection errors, never returned. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "log.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"
#include "sim_pi.h"

/* ---- the commands the device saw (sim io_hook) ---- */
#define CAP_MAX 512
struct cap {
	pthread_mutex_t mu;
	struct nvme_sqe sqe[CAP_MAX];
	unsigned n;
};

static void cap_hook(void *arg, uint16_t sqid, const struct nvme_sqe *c)
{
	struct cap *k = arg;
	(void)sqid;
	pthread_mutex_lock(&k->mu);
	if (k->n < CAP_MAX)
		k->sqe[k->n++] = *c;
	pthread_mutex_unlock(&k->mu);
}

/* ---- the log of one call, captured from stderr ---- */
struct logcap {
	char path[40];
	int fd, saved;
};

static void cap_begin(struct logcap *lc)
{
	snprintf(lc->path, sizeof(lc->path), "/tmp/test_pi_log.XXXXXX");
	lc->fd = mkstemp(lc->path);
	ck_assert_int_ge(lc->fd, 0);
	fflush(stderr);
	lc->saved = dup(2);
	ck_assert_int_ge(lc->saved, 0);
	dup2(lc->fd, 2);
	log_set_level(LOG_LVL_INFO);
}

/* The text logged since cap_begin (malloc'd), also echoed to stderr. */
static char *cap_end(struct logcap *lc)
{
	log_set_level(LOG_LVL_ERROR);
	fflush(stderr);
	dup2(lc->saved, 2);
	close(lc->saved);
	char *text = calloc(1, 1u << 16);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_ge(pread(lc->fd, text, (1u << 16) - 1, 0), 0);
	close(lc->fd);
	unlink(lc->path);
	fputs(text, stderr);
	return text;
}

/* ---- formats ---- */
struct pif {
	unsigned bs, ms, type;
	bool g64, first, ext;
};

/* every one of these is served: PI of any type either end (the metadata
 * never crosses with PRACT when it is just the PI, extended or not), and
 * separate metadata beyond the PI or without PI (through the queue's
 * metadata buffer) */
static const struct pif served[] = {
    {512, 8, 1, false, false, false},  {4096, 8, 2, false, false, true},
    {4096, 8, 3, false, true, false},  {4096, 16, 1, true, false, false},
    {512, 16, 2, true, true, true},    {4096, 16, 3, true, false, false},
    {512, 16, 1, false, false, false}, {4096, 64, 2, false, true, false},
    {512, 64, 1, true, false, false},  {4096, 8, 0, false, false, false},
    {512, 64, 0, false, false, false},
};

#define NLBA 8192u

static void rig_pi(struct rig *g, struct cap *k, const struct pif *f, unsigned mdts)
{
	pthread_mutex_init(&k->mu, NULL);
	k->n = 0;
	struct rig_opts o = {.mode = NVME_MODE_POLL, .start = true};
	o.sim[0] = (struct sim_opts){.nr_ns = 1, .mdts = mdts, .io_hook = cap_hook, .hook_arg = k};
	o.sim[0].ns[0] = (struct sim_ns_opts){.nlba = NLBA,
	                                      .lba_size = f->bs,
	                                      .backing = SIM_BACKING_RAM,
	                                      .ms = f->ms,
	                                      .md_ext = f->ext,
	                                      .pi_type = f->type,
	                                      .pi_g64 = f->g64,
	                                      .pi_first = f->first};
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 64, .io_timeout_ms = 5000, .io_retries = 1};
	ck_assert_int_eq(rig_open(g, &o), 0);
}

static void cap_reset(struct cap *k)
{
	pthread_mutex_lock(&k->mu);
	k->n = 0;
	pthread_mutex_unlock(&k->mu);
}

static uint64_t qstat(struct rig *g, enum nvme_err_class ec)
{
	struct nvme_qpair_stats st;
	nvme_qpair_stats_get(g->qp[0][0], &st);
	return st.errors[ec];
}

/* What the engine makes of each served format, and what its commands
 * carry: PRINFO (PRACT and the guard check, the reference tag check for
 * Types 1 and 2), the LBA as each command's first reference tag (0 for
 * Type 3), MPTR at the queue's metadata buffer (a half for Writes, another
 * for Reads) exactly when metadata crosses, on the fast path (one page),
 * the slow one (a PRP list) and split commands (MDTS 8 KiB); the data
 * comes back whole. */
START_TEST(t_served)
{
	const struct pif *f = &served[_i];
	struct rig g;
	struct cap k;
	rig_pi(&g, &k, f, 1);
	const struct nvme_ns_info *ns = &nvme_ctrl_get_info(g.c[0])->ns[0];
	unsigned pis = f->g64 ? 16 : 8;
	bool crosses = !f->type || f->ms > pis;
	uint32_t prinfo = f->type ? NVME_RW_PRACT | NVME_RW_PRCHK_GUARD |
	                                (f->type != 3 ? NVME_RW_PRCHK_REF : 0)
	                          : 0;
	ck_assert_uint_eq(nvme_ctrl_get_info(g.c[0])->nr_ns, 1);
	ck_assert_uint_eq(ns->ms, f->ms);
	ck_assert_uint_eq(ns->md_ext, f->ext);
	ck_assert_uint_eq(ns->pi_type, f->type);
	ck_assert_uint_eq(ns->pi_guard, f->type ? (f->g64 ? 64 : 16) : 0);
	ck_assert_uint_eq(ns->pi_first, f->type && f->first);
	ck_assert_uint_eq(ns->md_buf, crosses);
	ck_assert_uint_eq(ns->prinfo, prinfo);

	const size_t sizes[] = {4096, 64u << 10};
	const uint64_t lbas[] = {8, 1000};
	uint8_t *buf = g.buf[0][0], *rd = g.buf[0][1];
	for (unsigned t = 0; t < 2; t++) {
		uint64_t lba = lbas[t] + (f->bs == 512 ? 3 : 0); /* odd, on 512-byte blocks */
		rig_fill(buf, sizes[t], lba);
		ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, lba, buf, sizes[t], 0), 0);
		memset(rd, 0, sizes[t]);
		ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, lba, rd, sizes[t], 0), 0);
		ck_assert_int_eq(rig_verify(rd, sizes[t], lba), 0);
	}
	/* every command the device saw */
	uint64_t mptr_w = 0, mptr_r = 0;
	unsigned rw = 0;
	pthread_mutex_lock(&k.mu);
	for (unsigned i = 0; i < k.n; i++) {
		const struct nvme_sqe *c = &k.sqe[i];
		if (c->opc != NVME_CMD_READ && c->opc != NVME_CMD_WRITE)
			continue;
		rw++;
		uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
		ck_assert_uint_eq(c->cdw12 & NVME_RW_PRINFO_MASK, prinfo);
		ck_assert_uint_eq(c->cdw14, f->type == 1 || f->type == 2 ? (uint32_t)slba : 0);
		ck_assert_uint_eq(c->cdw3, 0);
		if (!crosses) {
			ck_assert_uint_eq(c->mptr, 0);
			continue;
		}
		ck_assert_uint_ne(c->mptr, 0);
		ck_assert_uint_eq(c->mptr & 3, 0);
		/* each command's metadata fits its half of the buffer */
		ck_assert_uint_le(((c->cdw12 & 0xffff) + 1u) * f->ms, NVME_MD_HALF);
		uint64_t *m = c->opc == NVME_CMD_WRITE ? &mptr_w : &mptr_r;
		if (!*m)
			*m = c->mptr;
		ck_assert_uint_eq(c->mptr, *m);
	}
	pthread_mutex_unlock(&k.mu);
	/* 4 KiB and 64 KiB, each way, in commands of at most 8 KiB */
	ck_assert_uint_ge(rw, 2 * (1 + (64u << 10) / 8192));
	if (crosses) {
		ck_assert_uint_ne(mptr_w, mptr_r);
		ck_assert(mptr_w + NVME_MD_HALF == mptr_r);
	}

	/* Write Zeroes: the controller writes the zeroed blocks' PI (PRACT,
	 * no checks) for the LBAs' reference tags; they read back as zeroes */
	cap_reset(&k);
	rig_fill(buf, 8 * f->bs, 77);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 2000, buf, 8 * f->bs, 0), 0);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_ZEROES, 1, 2002, NULL, 4, 0), 0);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 2000, rd, 8 * f->bs, 0), 0);
	ck_assert_int_eq(rig_verify(rd, 2 * f->bs, 77), 0);
	for (unsigned i = 2 * f->bs; i < 6 * f->bs; i++)
		ck_assert_uint_eq(rd[i], 0);
	pthread_mutex_lock(&k.mu);
	bool seen = false;
	for (unsigned i = 0; i < k.n; i++) {
		const struct nvme_sqe *c = &k.sqe[i];
		if (c->opc != NVME_CMD_WRITE_ZEROES)
			continue;
		seen = true;
		ck_assert_uint_eq(c->cdw12 & NVME_RW_PRINFO_MASK, f->type ? NVME_RW_PRACT : 0);
		ck_assert_uint_eq(c->cdw14, f->type == 1 || f->type == 2 ? c->cdw10 : 0);
		ck_assert_uint_eq(c->mptr, 0);
	}
	pthread_mutex_unlock(&k.mu);
	ck_assert(seen);
	ck_assert_uint_eq(qstat(&g, NVME_ERRC_PROTECTION), 0);
	rig_close(&g);
}
END_TEST

/* Misplaced and corrupted blocks: the device refuses them, the caller gets
 * -EIO, the queue counts a protection error per command; never the wrong
 * data.  Type 3 has no reference tag: a misplaced block of it is returned
 * as if right (what its users accept). */
START_TEST(t_caught)
{
	const struct pif f = {_i & 1 ? 4096 : 512, _i & 1 ? 16 : 8, _i / 2 + 1, _i & 1, false, false};
	struct rig g;
	struct cap k;
	rig_pi(&g, &k, &f, 0);
	struct sim *s = g.sim[0];
	uint8_t *buf = g.buf[0][0], *rd = g.buf[0][1];
	size_t len = 8 * f.bs;
	uint64_t want = 0;

	/* a byte of block 102 decays on the medium */
	rig_fill(buf, len, 100);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 100, buf, len, 0), 0);
	ck_assert_int_eq(sim_fault_corrupt(s, 1, 102, 17), 0);
	memset(rd, 0, len);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 100, rd, len, 0), -EIO);
	ck_assert_uint_eq(qstat(&g, NVME_ERRC_PROTECTION), ++want);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 100, rd, 2 * f.bs, 0), 0);
	ck_assert_int_eq(rig_verify(rd, 2 * f.bs, 100), 0);

	/* a Write that lands 16 blocks further: the blocks it overwrote */
	rig_fill(buf, len, 216);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 216, buf, len, 0), 0);
	sim_fault_misdirect(s, true, 1, 16);
	rig_fill(buf, len, 200);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 200, buf, len, 0), 0);
	int rc = rig_io(&g, 0, 0, RIG_READ, 1, 216, rd, len, 0);
	if (f.type == 3) {
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(rig_verify(rd, len, 200), 0); /* 200's data at 216 */
	} else {
		ck_assert_int_eq(rc, -EIO);
		ck_assert_uint_eq(qstat(&g, NVME_ERRC_PROTECTION), ++want);
	}

	/* a Read that fetches blocks 8 further */
	rig_fill(buf, len, 300);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 300, buf, len, 0), 0);
	rig_fill(buf, len, 308);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 308, buf, len, 0), 0);
	sim_fault_misdirect(s, false, 1, 8);
	rc = rig_io(&g, 0, 0, RIG_READ, 1, 300, rd, len, 0);
	if (f.type == 3) {
		ck_assert_int_eq(rc, 0);
	} else {
		ck_assert_int_eq(rc, -EIO);
		ck_assert_uint_eq(qstat(&g, NVME_ERRC_PROTECTION), ++want);
	}
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 300, rd, len, 0), 0);
	ck_assert_int_eq(rig_verify(rd, len, 300), 0);

	struct sim_stats st;
	sim_get_stats(s, &st);
	ck_assert_uint_eq(st.pi_guard_errors + st.pi_ref_errors, want);
	ck_assert_uint_eq(st.misdirected, 2);
	/* only protection errors were counted: no media, no other class */
	struct nvme_qpair_stats qs;
	nvme_qpair_stats_get(g.qp[0][0], &qs);
	uint64_t all = 0;
	for (unsigned e = 0; e < NVME_ERRC_NR; e++)
		all += qs.errors[e];
	ck_assert_uint_eq(all, want);
	rig_close(&g);
}
END_TEST

/* Each protection error is counted; the first 16 of a queue are logged with
 * their LBA, then only every 1024th. */
START_TEST(t_logged)
{
	const struct pif f = {4096, 8, 1, false, false, false};
	struct rig g;
	struct cap k;
	rig_pi(&g, &k, &f, 0);
	rig_fill(g.buf[0][0], 4096, 5);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 5, g.buf[0][0], 4096, 0), 0);
	ck_assert_int_eq(sim_fault_corrupt(g.sim[0], 1, 5, 0), 0);
	struct logcap lc;
	cap_begin(&lc);
	for (unsigned i = 0; i < 20; i++)
		ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 5, g.buf[0][1], 4096, 0), -EIO);
	char *log = cap_end(&lc);
	unsigned lines = 0;
	for (const char *p = log; (p = strstr(p, "LBA 5 + 1: end-to-end guard check error")); p++)
		lines++;
	ck_assert_uint_eq(lines, 16);
	ck_assert_ptr_nonnull(strstr(log, "(16 such errors on this queue)"));
	ck_assert_ptr_null(strstr(log, "(17 such errors"));
	free(log);
	ck_assert_uint_eq(qstat(&g, NVME_ERRC_PROTECTION), 20);
	rig_close(&g);
}
END_TEST

/* ---- formats refused, through Identify answers the sim is made to give ---- */
enum refusal {
	RF_EXT_BEYOND_PI, /* 16 bytes of extended metadata, PI Type 1 in 8 of them */
	RF_EXT_NO_PI,     /* 8 bytes of extended metadata, no PI */
	RF_GUARD32,       /* the 32-bit guard format (ELBAF PIF 1) */
	RF_STORAGE_TAG,   /* a 64-bit guard with 8 storage tag bits */
	RF_PI_TOO_BIG,    /* 8 bytes of metadata, 64-bit guard (16 bytes of PI) */
	RF_TYPE_RESERVED, /* DPS type 5 */
	RF_MD_TOO_BIG,    /* 20000 bytes of separate metadata per block */
	RF_NO_ELBAF,      /* ELBAS, but the NVM Identify Namespace refused */
	RF_NR
};

static const char *const refusal_msg[RF_NR] = {
    [RF_EXT_BEYOND_PI] = "beyond its protection information, extended",
    [RF_EXT_NO_PI] = "without protection information, extended",
    [RF_GUARD32] = "32-bit guard",
    [RF_STORAGE_TAG] = "8-bit storage tags",
    [RF_PI_TOO_BIG] = "cannot hold its 16 bytes of protection information",
    [RF_TYPE_RESERVED] = "type 5 is reserved",
    [RF_MD_TOO_BIG] = "more than nvmefs's metadata buffer",
    [RF_NO_ELBAF] = "refused their Identify",
};

static uint16_t refuse_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	enum refusal r = *(enum refusal *)arg;
	uint8_t cns = cmd->cdw10 & 0xff;
	if (cmd->nsid != 1)
		return status;
	if (cns == NVME_ID_CNS_NS) {
		struct nvme_id_ns *id = data;
		switch (r) {
		case RF_EXT_BEYOND_PI:
			id->lbaf[0].ms = 16, id->dps = 1, id->flbas |= NVME_FLBAS_EXT;
			break;
		case RF_EXT_NO_PI:
			id->lbaf[0].ms = 8, id->dps = 0, id->flbas |= NVME_FLBAS_EXT;
			break;
		case RF_GUARD32:
		case RF_NO_ELBAF:
			id->lbaf[0].ms = 16, id->dps = 1;
			break;
		case RF_STORAGE_TAG:
			id->lbaf[0].ms = 16, id->dps = 2;
			break;
		case RF_PI_TOO_BIG:
			id->lbaf[0].ms = 8, id->dps = 1;
			break;
		case RF_TYPE_RESERVED:
			id->lbaf[0].ms = 8, id->dps = 5;
			break;
		case RF_MD_TOO_BIG:
			id->lbaf[0].ms = 20000, id->dps = 0;
			break;
		default:
			break;
		}
	} else if (cns == NVME_ID_CNS_NS_CSI) {
		struct nvme_id_ns_nvm *nvm = data;
		if (r == RF_NO_ELBAF)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		if (r == RF_GUARD32)
			nvm->elbaf[0] = (uint32_t)NVME_PIF_32 << 7;
		if (r == RF_STORAGE_TAG)
			nvm->elbaf[0] = (uint32_t)NVME_PIF_64 << 7 | 8;
		if (r == RF_PI_TOO_BIG)
			nvm->elbaf[0] = (uint32_t)NVME_PIF_64 << 7;
	}
	return status;
}

/* Each refused format: the namespace is not served (the other one is),
 * and the log says why. */
START_TEST(t_refused)
{
	enum refusal r = (enum refusal)_i;
	struct sim_opts so = {.name = "tr", .nr_ns = 2, .identify_hook = refuse_hook, .hook_arg = &r};
	for (unsigned i = 0; i < 2; i++)
		so.ns[i] = (struct sim_ns_opts){.nlba = 1024, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	struct sim *s;
	ck_assert_int_eq(sim_create(&so, &s), 0);
	struct nvme_ctrl *c;
	struct nvme_ctrl_opts co = {.name = "tr", .io_queues = 1};
	struct logcap lc;
	cap_begin(&lc);
	int rc = nvme_ctrl_open(sim_bus(s), &co, &c);
	char *log = cap_end(&lc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(log, "namespace 1"));
	ck_assert_ptr_nonnull(strstr(log, refusal_msg[r]));
	ck_assert_ptr_nonnull(strstr(log, "skipped"));
	free(log);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(c);
	ck_assert_uint_eq(in->nr_ns, 1);
	ck_assert_uint_eq(in->ns[0].nsid, 2);
	nvme_ctrl_close(c);
}
END_TEST

/* ---- the 64-bit guard's 48-bit reference tag: bits 47:32 in cdw3 ---- */
static uint16_t big_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	(void)arg;
	if ((cmd->cdw10 & 0xff) == NVME_ID_CNS_NS && cmd->nsid == 1) {
		struct nvme_id_ns *id = data;
		id->nsze = id->ncap = id->nuse = 1ull << 34; /* past 2^32 blocks */
	}
	return status;
}

START_TEST(t_ref48)
{
	struct rig g;
	struct cap k;
	pthread_mutex_init(&k.mu, NULL);
	k.n = 0;
	struct rig_opts o = {.mode = NVME_MODE_POLL, .start = true};
	o.sim[0] = (struct sim_opts){.nr_ns = 1, .io_hook = cap_hook, .hook_arg = &k,
	                             .identify_hook = big_hook};
	o.sim[0].ns[0] = (struct sim_ns_opts){.nlba = 64, .lba_size = 4096, .backing = SIM_BACKING_RAM,
	                                      .ms = 16, .pi_type = _i ? 2 : 1, .pi_g64 = true};
	ck_assert_int_eq(rig_open(&g, &o), 0);
	uint64_t lba = (3ull << 32) + 7;
	/* the sim holds 64 blocks: it refuses the range, after the hook saw it */
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, lba, g.buf[0][0], 4096, 0), -ENOSPC);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, lba, g.buf[0][0], 64u << 10, 0), -ENOSPC);
	pthread_mutex_lock(&k.mu);
	unsigned n = 0;
	for (unsigned i = 0; i < k.n; i++) {
		const struct nvme_sqe *c = &k.sqe[i];
		if (c->opc != NVME_CMD_READ && c->opc != NVME_CMD_WRITE)
			continue;
		n++;
		ck_assert_uint_eq(c->cdw14, 7);
		ck_assert_uint_eq(c->cdw3, 3);
	}
	pthread_mutex_unlock(&k.mu);
	ck_assert_uint_eq(n, 2);
	rig_close(&g);
}
END_TEST

/* ---- a namespace whose protection information changed across a reset ---- */
static _Atomic unsigned reformat;

static uint16_t reformat_hook(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status)
{
	(void)arg;
	if ((cmd->cdw10 & 0xff) == NVME_ID_CNS_NS && cmd->nsid == 1 && atomic_load(&reformat))
		((struct nvme_id_ns *)data)->dps = 3; /* Type 3 where it was Type 1 */
	return status;
}

START_TEST(t_reformatted)
{
	struct rig g;
	atomic_store(&reformat, 0);
	struct rig_opts o = {.mode = NVME_MODE_POLL, .start = true};
	o.sim[0] = (struct sim_opts){.nr_ns = 1, .identify_hook = reformat_hook};
	o.sim[0].ns[0] = (struct sim_ns_opts){.nlba = 256, .lba_size = 4096, .backing = SIM_BACKING_RAM,
	                                      .ms = 8, .pi_type = 1};
	ck_assert_int_eq(rig_open(&g, &o), 0);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 0, g.buf[0][0], 4096, 0), 0);
	atomic_store(&reformat, 1);
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
	/* its reference tags would no longer be checked as they were: failed */
	ck_assert(__atomic_load_n(&nvme_ctrl_get_info(g.c[0])->ns[0].failed, __ATOMIC_ACQUIRE));
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 0, g.buf[0][0], 4096, 0), -EIO);
	rig_close(&g);
}
END_TEST

/* ---- status classes ---- */
START_TEST(t_status_class)
{
	for (unsigned sc = NVME_SC_GUARD_CHECK; sc <= NVME_SC_REFTAG_CHECK; sc++) {
		uint16_t st = NVME_STATUS_MAKE(NVME_SCT_MEDIA, sc);
		ck_assert_int_eq(nvme_status_class(st), NVME_ERRC_PROTECTION);
		ck_assert_int_eq(nvme_status_errno(st), -EIO);
	}
	ck_assert_int_eq(nvme_status_class(NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR)),
	                 NVME_ERRC_MEDIA);
	ck_assert_int_eq(nvme_status_class(NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_COMPARE_FAILED)),
	                 NVME_ERRC_MEDIA);
	ck_assert_str_eq(nvme_status_str(NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_REFTAG_CHECK)),
	                 "end-to-end reference tag check error");
	ck_assert_str_eq(nvme_status_str(NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI)),
	                 "invalid protection information");
}
END_TEST

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	Suite *s = suite_create("pi");
	TCase *tc = tcase_create("pi");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, t_served, 0, sizeof(served) / sizeof(served[0]));
	tcase_add_loop_test(tc, t_caught, 0, 6);
	tcase_add_test(tc, t_logged);
	tcase_add_loop_test(tc, t_refused, 0, RF_NR);
	tcase_add_loop_test(tc, t_ref48, 0, 2);
	tcase_add_test(tc, t_reformatted);
	tcase_add_test(tc, t_status_class);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

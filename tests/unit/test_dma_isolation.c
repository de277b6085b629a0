/* test_dma_isolation.c - what one controller's device can reach of another
 * controller's DMA memory on the same reactor, in both pool modes
 * (nvme_reactor_opts.dma_isolation), through the software controller's
 * IOMMU model: a device reaches exactly the host memory of its own bus's
 * mappings (sim_dma_reaches), and DMA to anything else fails.
 *
 * Shared (one pool per reactor): controller A's device reaches B's data
 * buffers and B's PRP list pages, and a read on A's queue lands in B's
 * buffer.  Controller isolation: it reaches none of them, before and after
 * a reset of A and a removal and re-attach of A (which map its own pool
 * again, never B's), and both controllers' I/O works. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "engine_internal.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

#define BS 4096u

/* Does any PRP list page of qp lie in what s's device can reach? */
static bool prp_lists_reached(struct sim *s, const struct nvme_qpair *qp)
{
	for (unsigned i = 0; i < qp->ntrk; i++)
		if (qp->trk[i].prp_list && sim_dma_reaches(s, qp->trk[i].prp_list, NVME_PAGE_SIZE))
			return true;
	return false;
}

/* What A's device reaches of B's memory, and of its own. */
static void check_reach(struct rig *g, bool iso, uint8_t *abuf, uint8_t *bbuf)
{
	struct sim *sa = g->sim[0], *sb = g->sim[1];

	/* each reaches its own buffers and PRP lists (the test can fail) */
	ck_assert(sim_dma_reaches(sa, abuf, BS));
	ck_assert(sim_dma_reaches(sb, bbuf, BS));
	ck_assert(prp_lists_reached(sa, g->qp[0][0]));
	ck_assert(prp_lists_reached(sb, g->qp[0][1]));
	/* and the other's only when the pool is shared */
	ck_assert_msg(sim_dma_reaches(sa, bbuf, BS) == !iso, "A reaches B's buffer: %d (iso %d)",
	              sim_dma_reaches(sa, bbuf, BS), iso);
	ck_assert_msg(sim_dma_reaches(sb, abuf, BS) == !iso, "B reaches A's buffer (iso %d)", iso);
	ck_assert_msg(prp_lists_reached(sa, g->qp[0][1]) == !iso, "A reaches B's PRP lists (iso %d)",
	              iso);
	ck_assert_msg(prp_lists_reached(sb, g->qp[0][0]) == !iso, "B reaches A's PRP lists (iso %d)",
	              iso);
}

static void isolation(bool iso)
{
	struct rig g;
	struct rig_opts o = {.nr_ctrls = 2, .dma_isolation = iso};
	ck_assert_int_eq(rig_open(&g, &o), 0);
	/* the reactor is not started: its buffers are taken on this thread */
	uint8_t *abuf = nvme_qpair_buf_alloc(g.qp[0][0], BS);
	uint8_t *bbuf = nvme_qpair_buf_alloc(g.qp[0][1], BS);
	uint8_t want[BS];
	ck_assert_ptr_nonnull(abuf);
	ck_assert_ptr_nonnull(bbuf);
	ck_assert_int_eq(rig_start(&g), 0);

	check_reach(&g, iso, abuf, bbuf);
	/* one pool for every qpair, or one per controller */
	ck_assert(nvme_reactor_buf_common(g.r[0]) == !iso);

	/* B's data, written through B */
	rig_fill(bbuf, BS, 7);
	memcpy(want, bbuf, BS);
	ck_assert_int_eq(rig_io(&g, 0, 1, RIG_WRITE, 1, 0, bbuf, BS, 0), 0);
	/* A's device told to DMA a read of A's (zero) block into B's buffer */
	int rc = rig_io(&g, 0, 0, RIG_READ, 1, 0, bbuf, BS, 0);
	if (iso) {
		ck_assert_int_eq(rc, -EINVAL); /* no IOVA of A's domain names it */
		ck_assert_mem_eq(bbuf, want, BS);
	} else {
		ck_assert_int_eq(rc, 0);
		ck_assert_int_ne(memcmp(bbuf, want, BS), 0); /* A's device overwrote B's data */
	}

	/* a reset of A, and a removal and re-attach (everything of A unmapped,
	 * then mapped again): in isolation A maps only its own pool */
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
	check_reach(&g, iso, abuf, bbuf);
	ck_assert_int_eq(rig_remove(&g, 0), 0);
	ck_assert(!sim_dma_reaches(g.sim[0], abuf, BS));
	ck_assert(!sim_dma_reaches(g.sim[0], bbuf, BS));
	ck_assert_int_eq(rig_attach(&g, 0), 0);
	check_reach(&g, iso, abuf, bbuf);
	/* both controllers' I/O works from their own buffers */
	rig_fill(abuf, BS, 11);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 3, abuf, BS, 0), 0);
	memset(abuf, 0, BS);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 3, abuf, BS, 0), 0);
	ck_assert_int_eq(rig_verify(abuf, BS, 11), 0);
	memset(bbuf, 0, BS);
	ck_assert_int_eq(rig_io(&g, 0, 1, RIG_READ, 1, 0, bbuf, BS, 0), 0);
	ck_assert_mem_eq(bbuf, want, BS);
	rig_close(&g);
}

START_TEST(t_isolated)
{
	isolation(true);
}
END_TEST

START_TEST(t_shared)
{
	isolation(false);
}
END_TEST

/* One controller: the modes are the same (one pool, every buffer usable). */
START_TEST(t_single_ctrl_same)
{
	struct rig g;
	struct rig_opts o = {.nr_ctrls = 1, .dma_isolation = _i == 1};
	ck_assert_int_eq(rig_open(&g, &o), 0);
	ck_assert(nvme_reactor_buf_common(g.r[0]));
	uint8_t *p = nvme_reactor_buf_alloc(g.r[0], BS);
	ck_assert_ptr_nonnull(p);
	ck_assert(sim_dma_reaches(g.sim[0], p, BS));
	ck_assert_int_eq(rig_start(&g), 0);
	rig_fill(p, BS, 3);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, 1, p, BS, 0), 0);
	memset(p, 0, BS);
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 1, p, BS, 0), 0);
	ck_assert_int_eq(rig_verify(p, BS, 3), 0);
	rig_close(&g);
}
END_TEST

/* Under isolation with two controllers no reactor buffer serves both: the
 * reactor-wide allocation refuses rather than hand out one controller's. */
START_TEST(t_reactor_alloc_refused)
{
	struct rig g;
	struct rig_opts o = {.nr_ctrls = 2, .dma_isolation = true};
	ck_assert_int_eq(rig_open(&g, &o), 0);
	ck_assert(!nvme_reactor_buf_common(g.r[0]));
	ck_assert_ptr_null(nvme_reactor_buf_alloc(g.r[0], BS));
	/* a qpair's buffer is freed back through the reactor too */
	void *p = nvme_qpair_buf_alloc(g.qp[0][1], 1u << 20);
	ck_assert_ptr_nonnull(p);
	nvme_reactor_buf_free(g.r[0], p, 1u << 20);
	void *q = nvme_qpair_buf_alloc(g.qp[0][1], 1u << 20);
	ck_assert_ptr_eq(p, q);
	nvme_qpair_buf_free(g.qp[0][1], q, 1u << 20);
	rig_close(&g);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dma_isolation");
	TCase *tc = tcase_create("dma_isolation");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_isolated);
	tcase_add_test(tc, t_shared);
	tcase_add_loop_test(tc, t_single_ctrl_same, 0, 2);
	tcase_add_test(tc, t_reactor_alloc_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}

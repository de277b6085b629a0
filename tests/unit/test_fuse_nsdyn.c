/* test_fuse_nsdyn.c - the namespace table that changes at run time (fsns.h):
 * add, remove, detach and revive, resize (grow only), stale inodes and
 * handles, slots never reused, the table full, mtime stamped by the first
 * stat after a change, and a reader thread that
 * looks up and reads sizes without a lock while the table changes. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "fsns.h"

#define REQUIRE(c, ...)                           \
	do {                                       \
		if (!(c))                          \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

static const struct fsns_ctrl_feat feat = {.vwc = true, .dsm = true, .wzeroes = false};

static struct nvme_ns_info nsi(uint32_t nsid, uint64_t nlba, uint32_t lba)
{
	return (struct nvme_ns_info){.nsid = nsid, .nlba = nlba, .lba_size = lba,
				     .lba_shift = (uint8_t)__builtin_ctz(lba)};
}

START_TEST(t_add_lookup)
{
	struct fsns_table t;
	struct nvme_ns_info a = nsi(1, 1000, 512), b = nsi(2, 10, 4096);
	struct fusefs_ns *ns;
	uint64_t ino, i2;

	ck_assert_int_eq(fsns_init(&t, 4, 0), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), 0);
	ck_assert_uint_eq(ino, 2);
	ck_assert_int_eq(fsns_add(&t, 1, "nvme1", &feat, &b, &i2), 0);
	ck_assert_uint_eq(i2, 3);
	ck_assert_uint_eq(fsns_count(&t), 2);
	/* the same namespace twice: refused */
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), -EEXIST);
	/* LBA sizes outside 512..64 KiB, or none: refused */
	a = nsi(3, 10, 256);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), -EINVAL);
	a = nsi(3, 0, 512);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), -EINVAL);

	ns = fsns_lookup(&t, "nvme1n2", &ino);
	ck_assert_ptr_nonnull(ns);
	ck_assert_uint_eq(ino, 3);
	ck_assert_uint_eq(fsns_size(ns), 40960);
	ck_assert_uint_eq(ns->shift, 12);
	ck_assert(ns->vwc && ns->dsm && !ns->wzeroes);
	ck_assert_str_eq(ns->d.name, "nvme1n2");
	ck_assert_ptr_null(fsns_lookup(&t, "nvme1n3", &ino));
	ck_assert_ptr_eq(fsns_by_ino(&t, 2), &t.slot[0]);
	ck_assert_ptr_null(fsns_by_ino(&t, 1)); /* the root */
	ck_assert_ptr_null(fsns_by_ino(&t, 4)); /* no slot yet */
	ck_assert_uint_eq(fsns_find(&t, 1, 2), 3);
	ck_assert_uint_eq(fsns_find(&t, 1, 1), 0);
	fsns_free(&t);
}
END_TEST

START_TEST(t_remove_stale)
{
	struct fsns_table t;
	struct nvme_ns_info a = nsi(1, 1000, 512);
	struct fusefs_ns *ns;
	uint64_t ino, again, fh;

	ck_assert_int_eq(fsns_init(&t, 4, 0), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), 0);
	ns = fsns_by_ino(&t, ino);
	fh = fsns_gen(ns); /* an open */
	ck_assert(fsns_usable(ns, fh));
	ck_assert_int_eq(fsns_remove(&t, ino, FSNS_REMOVED), 0);
	ck_assert_int_eq(fsns_remove(&t, ino, FSNS_REMOVED), -ENOENT);
	/* gone from lookup; the inode still names the slot, which is stale */
	ck_assert_ptr_null(fsns_lookup(&t, "nvme0n1", &again));
	ck_assert_ptr_eq(fsns_by_ino(&t, ino), ns);
	ck_assert(!fsns_present(ns));
	ck_assert(!fsns_usable(ns, fh));
	/* removed for good: no revive */
	ck_assert_int_eq(fsns_revive(&t, ino), -ENOENT);

	/* the same nsid added again: a new slot, the old inode stays stale */
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &again), 0);
	ck_assert_uint_ne(again, ino);
	ck_assert_ptr_eq(fsns_lookup(&t, "nvme0n1", &fh), fsns_by_ino(&t, again));
	ck_assert_uint_eq(fh, again);
	ck_assert(!fsns_present(fsns_by_ino(&t, ino)));
	ck_assert_uint_eq(fsns_find(&t, 0, 1), again); /* the newest */
	fsns_free(&t);
}
END_TEST

START_TEST(t_detach_revive)
{
	struct fsns_table t;
	struct nvme_ns_info a = nsi(1, 1000, 512);
	struct fusefs_ns *ns;
	uint64_t ino, back, fh_old;

	ck_assert_int_eq(fsns_init(&t, 2, 0), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), 0);
	ns = fsns_by_ino(&t, ino);
	fh_old = fsns_gen(ns);
	ck_assert_int_eq(fsns_remove(&t, ino, FSNS_DETACHED), 0);
	ck_assert_ptr_null(fsns_lookup(&t, "nvme0n1", &back));
	/* detached, it is not added twice: its attach brings it back */
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &back), -EEXIST);
	ck_assert_int_eq(fsns_revive(&t, ino), 0);
	ck_assert_int_eq(fsns_revive(&t, ino), -ENOENT); /* present already */
	/* back in its own slot; a handle from before stays stale, a new one works */
	ck_assert_ptr_eq(fsns_lookup(&t, "nvme0n1", &back), ns);
	ck_assert_uint_eq(back, ino);
	ck_assert(!fsns_usable(ns, fh_old));
	ck_assert(fsns_usable(ns, fsns_gen(ns)));
	ck_assert_uint_eq(fsns_count(&t), 1);
	fsns_free(&t);
}
END_TEST

START_TEST(t_resize_full)
{
	struct fsns_table t;
	struct nvme_ns_info a = nsi(1, 1000, 512), b = nsi(2, 1, 512);
	uint64_t ino, i2;

	ck_assert_int_eq(fsns_init(&t, 1, 0), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), 0);
	ck_assert_int_eq(fsns_resize(&t, ino, 2000 * 512), 0);
	ck_assert_uint_eq(fsns_size(fsns_by_ino(&t, ino)), 2000 * 512);
	/* shrinking is refused and changes nothing */
	ck_assert_int_eq(fsns_resize(&t, ino, 10 * 512), -ERANGE);
	ck_assert_uint_eq(fsns_size(fsns_by_ino(&t, ino)), 2000 * 512);
	ck_assert_int_eq(fsns_resize(&t, 9, 512), -ENOENT);
	/* one slot: a second namespace does not fit, nor does the first once
	 * removed (slots are never reused) */
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &b, &i2), -ENOSPC);
	ck_assert_int_eq(fsns_remove(&t, ino, FSNS_REMOVED), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &i2), -ENOSPC);
	fsns_free(&t);
}
END_TEST

/* mtime: the floor until a change; a touch makes the next stat stamp a
 * later time, which stays until the next touch (however many stats, and
 * touches before a stat count once); resize and revive touch, a resize to
 * the same size does not; a floor later than the clock (a clock stepped
 * back) still gives a later time */
START_TEST(t_mtime)
{
	struct fsns_table t;
	struct nvme_ns_info a = nsi(1, 1000, 512);
	struct fusefs_ns *ns;
	uint64_t ino, floor = 4000000000ull * 1000000000ull, m0, m1, m2, m3;

	ck_assert_int_eq(fsns_init(&t, 2, 0), 0);
	ck_assert_int_eq(fsns_add(&t, 0, "nvme0", &feat, &a, &ino), 0);
	ns = fsns_by_ino(&t, ino);
	ck_assert_uint_eq(fsns_mtime(ns, 1000), 1000);
	ck_assert_uint_eq(fsns_mtime(ns, 1000), 1000);
	fsns_touch(ns);
	fsns_touch(ns);
	m0 = fsns_mtime(ns, 1000);
	ck_assert_uint_gt(m0, 1000);
	ck_assert_uint_eq(m0 & 1, 0);
	ck_assert_uint_eq(fsns_mtime(ns, 1000), m0);
	fsns_touch(ns);
	m1 = fsns_mtime(ns, 1000);
	ck_assert_uint_gt(m1, m0);
	ck_assert_int_eq(fsns_resize(&t, ino, 1000 * 512), 0); /* the same size */
	ck_assert_uint_eq(fsns_mtime(ns, 1000), m1);
	ck_assert_int_eq(fsns_resize(&t, ino, 1001 * 512), 0);
	m2 = fsns_mtime(ns, 1000);
	ck_assert_uint_gt(m2, m1);
	ck_assert_int_eq(fsns_remove(&t, ino, FSNS_DETACHED), 0);
	ck_assert_uint_eq(fsns_mtime(ns, 1000), m2);
	ck_assert_int_eq(fsns_revive(&t, ino), 0);
	m3 = fsns_mtime(ns, 1000);
	ck_assert_uint_gt(m3, m2);
	/* a floor in the year 2096: after the clock */
	fsns_touch(ns);
	ck_assert_uint_eq(fsns_mtime(ns, floor), floor + 2);
	ck_assert_uint_eq(fsns_mtime(ns, floor), floor + 2);
	fsns_free(&t);
}
END_TEST

/* A reader thread looks names up, reads sizes and walks the slots while
 * the writer adds, removes, revives and grows: every slot it sees is
 * complete, a size never goes down, and a lookup finds only a present
 * namespace of the name asked. */
#define CAP 512
static struct fsns_table ct;
static atomic_bool done;
static atomic_ulong reads;
static char bad[256];

static void *reader(void *arg)
{
	uint64_t last[CAP] = {0};

	(void)arg;
	while (!atomic_load(&done)) {
		unsigned n = fsns_count(&ct);

		for (unsigned i = 0; i < n; i++) {
			struct fusefs_ns *ns = fsns_by_ino(&ct, (uint64_t)i + 2);
			uint64_t sz, ino;
			char name[FUSEFS_NAME_MAX];

			if (!ns) {
				snprintf(bad, sizeof(bad), "slot %u counted, not found", i);
				return NULL;
			}
			sz = fsns_size(ns);
			if (ns->d.name != ns->name || ns->d.lba_size != 512 || sz < last[i] ||
			    sz == 0) {
				snprintf(bad, sizeof(bad), "slot %u: incomplete or size went down", i);
				return NULL;
			}
			last[i] = sz;
			snprintf(name, sizeof(name), "nvme0n%u", ns->d.nsid);
			struct fusefs_ns *f = fsns_lookup(&ct, name, &ino);
			if (f && (f->d.nsid != ns->d.nsid || fsns_by_ino(&ct, ino) != f)) {
				snprintf(bad, sizeof(bad), "lookup %s found nsid %u", name, f->d.nsid);
				return NULL;
			}
			atomic_fetch_add(&reads, 1);
		}
	}
	return NULL;
}

START_TEST(t_concurrent_reader)
{
	pthread_t th;
	uint64_t ino;

	ck_assert_int_eq(fsns_init(&ct, CAP, 0), 0);
	atomic_store(&done, false);
	bad[0] = '\0';
	ck_assert_int_eq(pthread_create(&th, NULL, reader, NULL), 0);
	for (unsigned k = 0; k < CAP; k++) {
		struct nvme_ns_info a = nsi(k % 64 + 1, 8, 512);

		/* the nsid may be present already (k >= 64): remove it first */
		uint64_t old = fsns_find(&ct, 0, a.nsid);
		if (old && fsns_present(fsns_by_ino(&ct, old)))
			REQUIRE(fsns_remove(&ct, old, FSNS_REMOVED) == 0,
				"remove %u", k);
		REQUIRE(fsns_add(&ct, 0, "nvme0", &feat, &a, &ino) == 0, "add %u", k);
		REQUIRE(fsns_resize(&ct, ino, 8 * 512 + (uint64_t)k * 512) == 0, "grow %u", k);
		if (k % 7 == 0) {
			REQUIRE(fsns_remove(&ct, ino, FSNS_DETACHED) == 0, "detach %u", k);
			REQUIRE(fsns_revive(&ct, ino) == 0, "revive %u", k);
		}
	}
	ck_assert_int_eq(fsns_add(&ct, 0, "nvme0", &feat, &(struct nvme_ns_info){.nsid = 999,
			 .nlba = 1, .lba_size = 512, .lba_shift = 9}, &ino), -ENOSPC);
	/* let the reader walk the full table a while */
	while (atomic_load(&reads) < 100000 && !bad[0])
		sched_yield();
	atomic_store(&done, true);
	pthread_join(th, NULL);
	ck_assert_msg(!bad[0], "%s", bad);
	/* 64 present at the end, one per nsid */
	unsigned present = 0;
	for (unsigned i = 0; i < fsns_count(&ct); i++)
		present += fsns_present(&ct.slot[i]);
	ck_assert_uint_eq(present, 64);
	fsns_free(&ct);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_nsdyn");
	TCase *tc = tcase_create("table");
	SRunner *sr;
	int nf;

	tcase_add_test(tc, t_add_lookup);
	tcase_add_test(tc, t_remove_stale);
	tcase_add_test(tc, t_detach_revive);
	tcase_add_test(tc, t_resize_full);
	tcase_add_test(tc, t_mtime);
	tcase_add_test(tc, t_concurrent_reader);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}

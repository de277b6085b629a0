/* test_cpumap.c - the CPU to reactor map of the FUSE queues: own CPU first,
 * then the least loaded reactor on a hyperthread sibling, on the same NUMA
 * node, anywhere (ties: the lowest index), on made-up topologies with every
 * map entry checked; the argument checks; a randomized run against the
 * contract's tier rules; and this machine's topology as sysfs reports it. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpumap.h"

/* ck_assert records every passing check (a write(2) each): loops use this */
#define REQUIRE(c, ...)                           \
	do {                                       \
		if (!(c))                          \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

#define N(a)   (sizeof(a) / sizeof((a)[0]))
#define POISON 0xdeadbeefu

/* Build on heap copies of exactly ncpu CPUs and nr reactors (so that any
 * read or write past them shows under valgrind), then check every entry
 * against want[] and cpumap_count against the entries. */
static void expect_map(const struct cpumap_cpu *cpus, unsigned ncpu, const int *rcpu, unsigned nr,
                       const unsigned *want)
{
	struct cpumap_cpu *hc = malloc(ncpu * sizeof(*hc));
	int *hr = malloc(nr * sizeof(*hr));
	unsigned *map = malloc(ncpu * sizeof(*map));

	ck_assert(hc && hr && map);
	memcpy(hc, cpus, ncpu * sizeof(*hc));
	memcpy(hr, rcpu, nr * sizeof(*hr));
	for (unsigned c = 0; c < ncpu; c++)
		map[c] = POISON;
	ck_assert_int_eq(cpumap_build(hc, ncpu, hr, nr, map), 0);
	for (unsigned c = 0; c < ncpu; c++)
		REQUIRE(map[c] == want[c], "CPU %u: reactor %u, want %u", c, map[c], want[c]);
	for (unsigned r = 0; r < nr; r++) {
		unsigned n = 0;

		for (unsigned c = 0; c < ncpu; c++)
			n += want[c] == r;
		REQUIRE(cpumap_count(map, ncpu, r) == n, "reactor %u: count %u, want %u", r,
		        cpumap_count(map, ncpu, r), n);
	}
	free(hc);
	free(hr);
	free(map);
}

/* every CPU its own core on package 0, node 0 */
static void flat(struct cpumap_cpu *cpus, unsigned n)
{
	for (unsigned c = 0; c < n; c++)
		cpus[c] = (struct cpumap_cpu){.package = 0, .core = (int)c, .node = 0};
}

static void unknown(struct cpumap_cpu *cpus, unsigned n)
{
	for (unsigned c = 0; c < n; c++)
		cpus[c] = (struct cpumap_cpu){.package = -1, .core = -1, .node = -1};
}

START_TEST(t_two_cpus)
{
	struct cpumap_cpu cpus[2];
	const int both[] = {0, 1}, swapped[] = {1, 0}, on0[] = {0}, on1[] = {1};
	const unsigned id[] = {0, 1}, sw[] = {1, 0}, all0[] = {0, 0};

	flat(cpus, 2);
	expect_map(cpus, 2, both, 2, id);
	expect_map(cpus, 2, swapped, 2, sw);
	expect_map(cpus, 2, on0, 1, all0);
	expect_map(cpus, 2, on1, 1, all0);
}
END_TEST

/* 4 cores x 2 hyperthreads: CPUs c and c+4 are core c%4 of package 0 */
static void smt8(struct cpumap_cpu *cpus)
{
	for (unsigned c = 0; c < 8; c++)
		cpus[c] = (struct cpumap_cpu){.package = 0, .core = (int)(c % 4), .node = 0};
}

START_TEST(t_hyperthreads)
{
	struct cpumap_cpu cpus[8];
	const int r4[] = {0, 1, 2, 3};
	const unsigned want4[] = {0, 1, 2, 3, 0, 1, 2, 3};
	/* reactors on cores 0 (CPU 0) and 1 (CPU 5): CPU 1 goes to its sibling
	 * 5's reactor, CPU 4 to its sibling 0's although that reactor
	 * already has 3 CPUs against 2; cores 2 and 3 have none: least loaded */
	const int r2[] = {0, 5};
	const unsigned want2[] = {0, 1, 0, 0, 0, 1, 1, 1};
	/* reactors on the second threads: the first threads follow them */
	const int rhi[] = {7, 6, 5, 4};
	const unsigned wanthi[] = {3, 2, 1, 0, 3, 2, 1, 0};

	smt8(cpus);
	expect_map(cpus, 8, r4, 4, want4);
	expect_map(cpus, 8, r2, 2, want2);
	expect_map(cpus, 8, rhi, 4, wanthi);
}
END_TEST

/* 2 nodes = 2 packages of 4 single-thread cores: CPU c is core c%4 of
 * package and node c/4 (CPUs 0 and 4 share a core id, not a core) */
static void numa8(struct cpumap_cpu *cpus)
{
	for (unsigned c = 0; c < 8; c++)
		cpus[c] = (struct cpumap_cpu){
		    .package = (int)(c / 4), .core = (int)(c % 4), .node = (int)(c / 4)};
}

START_TEST(t_numa_nodes)
{
	struct cpumap_cpu cpus[8];
	const int r[] = {0, 4};
	const unsigned want[] = {0, 0, 0, 0, 1, 1, 1, 1};
	const int rswap[] = {6, 1};
	const unsigned wantswap[] = {1, 1, 1, 1, 0, 0, 0, 0};

	numa8(cpus);
	expect_map(cpus, 8, r, 2, want);
	expect_map(cpus, 8, rswap, 2, wantswap);
}
END_TEST

START_TEST(t_sibling_beats_node)
{
	/* core 0 has three threads (CPUs 0, 1, 3), core 1 one (CPU 2): both
	 * other threads of core 0 go to its reactor, 3 CPUs against 1 */
	const struct cpumap_cpu cpus[] = {
	    {.package = 0, .core = 0, .node = 0},
	    {.package = 0, .core = 0, .node = 0},
	    {.package = 0, .core = 1, .node = 0},
	    {.package = 0, .core = 0, .node = 0},
	};
	const int r[] = {0, 2};
	const unsigned want[] = {0, 0, 1, 0};

	expect_map(cpus, N(cpus), r, N(r), want);
}
END_TEST

START_TEST(t_node_beats_anywhere)
{
	/* node 0 has 3 reactors, node 1 one: node 1's CPUs all go to it
	 * (4 CPUs against 2, 1, 1) and node 0's spare CPU stays on node 0 */
	struct cpumap_cpu cpus[8];
	const int r[] = {0, 1, 2, 4};
	const unsigned want[] = {0, 1, 2, 0, 3, 3, 3, 3};
	/* the same with node 1's reactor first in the list */
	const int r2[] = {5, 0, 1, 2};
	const unsigned want2[] = {1, 2, 3, 1, 0, 0, 0, 0};

	numa8(cpus);
	expect_map(cpus, 8, r, N(r), want);
	expect_map(cpus, 8, r2, N(r2), want2);
}
END_TEST

START_TEST(t_siblings_need_same_package)
{
	/* core id 0 on both packages: CPUs 2 and 3 are threads of package 1's
	 * core 0, so they go to CPU 1's reactor and not to CPU 0's */
	const struct cpumap_cpu cpus[] = {
	    {.package = 0, .core = 0, .node = -1},
	    {.package = 1, .core = 0, .node = -1},
	    {.package = 1, .core = 0, .node = -1},
	    {.package = 1, .core = 0, .node = -1},
	};
	const int r[] = {0, 1};
	const unsigned want[] = {0, 1, 1, 1};

	expect_map(cpus, N(cpus), r, N(r), want);
}
END_TEST

START_TEST(t_unknown_is_no_match)
{
	/* core and package unknown (-1) make no siblings: CPUs 1 and 2 go by
	 * node to reactor 0, not by "sibling" to the least loaded */
	const struct cpumap_cpu nocore[] = {
	    {.package = -1, .core = -1, .node = 0},
	    {.package = -1, .core = -1, .node = 0},
	    {.package = -1, .core = -1, .node = 0},
	    {.package = -1, .core = -1, .node = 1},
	};
	/* node unknown (-1) makes no node: CPU 2 goes to the least loaded
	 * reactor anywhere (reactor 1), not to reactor 0's "node -1" */
	const struct cpumap_cpu nonode[] = {
	    {.package = 0, .core = 0, .node = -1},
	    {.package = 0, .core = 1, .node = -1},
	    {.package = 0, .core = 2, .node = -1},
	    {.package = 0, .core = 3, .node = 0},
	};
	const int r[] = {0, 3};
	const unsigned want_nocore[] = {0, 0, 0, 1}, want_nonode[] = {0, 0, 1, 1};

	expect_map(nocore, N(nocore), r, N(r), want_nocore);
	expect_map(nonode, N(nonode), r, N(r), want_nonode);
}
END_TEST

START_TEST(t_least_loaded_ties_lowest)
{
	struct cpumap_cpu cpus[7];
	const int r2[] = {0, 1};
	const unsigned want2[] = {0, 1, 0, 1, 0, 1};
	const int r3[] = {0, 1, 2};
	const unsigned want3[] = {0, 1, 2, 0, 1, 2, 0};
	/* pinned out of order: the unpinned CPUs still go by index to the
	 * lowest reactor among the least loaded */
	const int rrev[] = {3, 1};
	const unsigned wantrev[] = {0, 1, 1, 0};
	unsigned a[6], b[6];

	unknown(cpus, 7);
	expect_map(cpus, 6, r2, 2, want2);
	expect_map(cpus, 7, r3, 3, want3);
	expect_map(cpus, 4, rrev, 2, wantrev);

	/* deterministic: the same input gives the same map */
	ck_assert_int_eq(cpumap_build(cpus, 6, r2, 2, a), 0);
	ck_assert_int_eq(cpumap_build(cpus, 6, r2, 2, b), 0);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_uint_eq(cpumap_count(a, 6, 0), 3);
	ck_assert_uint_eq(cpumap_count(a, 6, 1), 3);
}
END_TEST

START_TEST(t_unpinned)
{
	struct cpumap_cpu cpus[5];
	const int r3[] = {-1, -1, -1};
	const unsigned want5[] = {0, 1, 2, 0, 1};
	const unsigned want2[] = {0, 1};
	unsigned map[5];

	/* no reactor is on any CPU, so none is a sibling or on a node: the
	 * least loaded anywhere, round robin */
	flat(cpus, 5);
	expect_map(cpus, 5, r3, 3, want5);
	ck_assert_int_eq(cpumap_build(cpus, 5, r3, 3, map), 0);
	for (unsigned r = 0; r < 3; r++)
		ck_assert_uint_ge(cpumap_count(map, 5, r), 1);
	ck_assert_uint_eq(
	    cpumap_count(map, 5, 0) + cpumap_count(map, 5, 1) + cpumap_count(map, 5, 2), 5);
	/* more reactors than CPUs: the last one serves no queue */
	expect_map(cpus, 2, r3, 3, want2);
}
END_TEST

START_TEST(t_same_cpu_twice)
{
	struct cpumap_cpu cpus[4];
	/* CPU 0 goes to reactor 0, the first pinned there; reactor 1 then
	 * takes CPU 1 as the least loaded, and so on */
	const int r[] = {0, 0};
	const unsigned want[] = {0, 1, 0, 1};
	/* the first is by reactor index, not by which CPU comes first */
	const int r3[] = {2, 0, 0};
	const unsigned want3[] = {1, 2, 0};
	/* reactors 0 and 1 both sit on CPU 0, so both are on CPU 1's sibling:
	 * CPU 1 goes to the less loaded of them, reactor 1 */
	const struct cpumap_cpu smt[] = {
	    {.package = 0, .core = 0, .node = 0},
	    {.package = 0, .core = 0, .node = 0},
	    {.package = 0, .core = 1, .node = 0},
	    {.package = 0, .core = 1, .node = 0},
	};
	const int rs[] = {0, 0, 2};
	const unsigned wants[] = {0, 1, 2, 2};

	unknown(cpus, 4);
	expect_map(cpus, 4, r, N(r), want);
	expect_map(cpus, 3, r3, N(r3), want3);
	expect_map(smt, N(smt), rs, N(rs), wants);
}
END_TEST

START_TEST(t_cpu_out_of_range)
{
	struct cpumap_cpu cpus[4];
	/* 4, INT_MAX and -7 are no CPU of a 4-CPU map: those reactors are
	 * treated as unpinned and take CPUs only as the least loaded */
	const int r[] = {0, 4, INT_MAX, -7};
	const unsigned want[] = {0, 1, 2, 3};
	/* with a topology: reactor 0 (CPU 5) is on no node of the map, so
	 * node 0's reactor 1 takes every CPU */
	const int r2[] = {5, 1};
	const unsigned want2[] = {1, 1, 1, 1};
	unsigned map[4];

	unknown(cpus, 4);
	expect_map(cpus, 4, r, N(r), want);
	flat(cpus, 4);
	expect_map(cpus, 4, r2, N(r2), want2);

	ck_assert_int_eq(cpumap_build(cpus, 4, r, 0, map), -EINVAL);
	ck_assert_int_eq(cpumap_build(cpus, 0, r, 2, map), -EINVAL);
	ck_assert_int_eq(cpumap_build(cpus, 0, r, 0, map), -EINVAL);
}
END_TEST

START_TEST(t_count)
{
	const unsigned map[] = {2, 0, 2, 1, 2};

	ck_assert_uint_eq(cpumap_count(map, 5, 0), 1);
	ck_assert_uint_eq(cpumap_count(map, 5, 1), 1);
	ck_assert_uint_eq(cpumap_count(map, 5, 2), 3);
	ck_assert_uint_eq(cpumap_count(map, 5, 3), 0);
	ck_assert_uint_eq(cpumap_count(map, 2, 2), 1); /* only the first 2 */
	ck_assert_uint_eq(cpumap_count(map, 0, 2), 0);
}
END_TEST

/* The contract's tiers, checked on the result of random topologies and
 * pinnings (including unpinned, shared and out-of-range CPUs). */
static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

static int sib(const struct cpumap_cpu *a, const struct cpumap_cpu *b)
{
	return a->core >= 0 && a->package >= 0 && a->core == b->core && a->package == b->package;
}

static int samenode(const struct cpumap_cpu *a, const struct cpumap_cpu *b)
{
	return a->node >= 0 && a->node == b->node;
}

START_TEST(t_random_tiers)
{
	unsigned seed = 0x5eed0000u + (unsigned)_i;

	for (int iter = 0; iter < 200; iter++) {
		unsigned ncpu = 1 + rnd(&seed) % 24, nr = 1 + rnd(&seed) % 10;
		struct cpumap_cpu *cpus = malloc(ncpu * sizeof(*cpus));
		int *rcpu = malloc(nr * sizeof(*rcpu));
		unsigned *map = malloc(ncpu * sizeof(*map));
		unsigned total = 0;

		ck_assert(cpus && rcpu && map);
		for (unsigned c = 0; c < ncpu; c++) {
			cpus[c].package = (int)(rnd(&seed) % 3) - 1;
			cpus[c].core = (int)(rnd(&seed) % 5) - 1;
			cpus[c].node = (int)(rnd(&seed) % 3) - 1;
		}
		for (unsigned r = 0; r < nr; r++)
			rcpu[r] = (int)(rnd(&seed) % (ncpu + 3)) - 1;
		ck_assert_int_eq(cpumap_build(cpus, ncpu, rcpu, nr, map), 0);
		for (unsigned c = 0; c < ncpu; c++) {
			int first = -1, any_sib = 0, any_node = 0;
			unsigned m = map[c];

			REQUIRE(m < nr, "seed %d iter %d: CPU %u -> %u of %u", _i, iter, c, m, nr);
			for (unsigned r = 0; r < nr; r++) {
				int rc = rcpu[r];

				if (rc < 0 || (unsigned)rc >= ncpu)
					continue;
				if ((unsigned)rc == c && first < 0)
					first = (int)r;
				any_sib |= sib(&cpus[c], &cpus[rc]);
				any_node |= samenode(&cpus[c], &cpus[rc]);
			}
			int mc = rcpu[m];
			int in = mc >= 0 && (unsigned)mc < ncpu;

			if (first >= 0)
				REQUIRE(m == (unsigned)first, "iter %d: CPU %u -> %u, first %d",
				        iter, c, m, first);
			else if (any_sib)
				REQUIRE(in && sib(&cpus[c], &cpus[mc]),
				        "iter %d: CPU %u -> %u not on a sibling", iter, c, m);
			else if (any_node)
				REQUIRE(in && samenode(&cpus[c], &cpus[mc]),
				        "iter %d: CPU %u -> %u not on its node", iter, c, m);
		}
		for (unsigned r = 0; r < nr; r++)
			total += cpumap_count(map, ncpu, r);
		REQUIRE(total == ncpu, "iter %d: counts sum to %u of %u", iter, total, ncpu);
		free(cpus);
		free(rcpu);
		free(map);
	}
}
END_TEST

/* "0-3,8" from sysfs: mark each listed CPU below n */
static int parse_list(const char *path, unsigned char *set, unsigned n)
{
	FILE *f = fopen(path, "re");
	unsigned a, b;
	int c, got = 0;

	if (!f)
		return -errno;
	while (fscanf(f, "%u", &a) == 1) {
		b = a;
		c = fgetc(f);
		if (c == '-') {
			if (fscanf(f, "%u", &b) != 1)
				break;
			c = fgetc(f);
		}
		for (unsigned i = a; i <= b && i < n; i++)
			set[i] = 1;
		got++;
		if (c != ',')
			break;
	}
	fclose(f);
	return got ? 0 : -EINVAL;
}

START_TEST(t_this_machine)
{
	struct cpumap_cpu *cpus = NULL;
	unsigned ncpu = 0, online = 0;
	long nonline = sysconf(_SC_NPROCESSORS_ONLN);
	int have_topo = access("/sys/devices/system/cpu/cpu0/topology", F_OK) == 0;
	unsigned char *on;

	ck_assert_int_eq(cpumap_read_topology(&cpus, &ncpu), 0);
	ck_assert_ptr_nonnull(cpus);
	ck_assert_int_gt(nonline, 0);
	ck_assert_uint_ge(ncpu, (unsigned long)nonline);
	on = calloc(ncpu, 1);
	ck_assert_ptr_nonnull(on);
	if (parse_list("/sys/devices/system/cpu/online", on, ncpu) != 0)
		memset(on, 1, ncpu); /* no list: every CPU counts as online */
	for (unsigned c = 0; c < ncpu; c++) {
		REQUIRE(cpus[c].node >= -1, "CPU %u: node %d", c, cpus[c].node);
		if (!on[c])
			continue;
		online++;
		if (have_topo) {
			REQUIRE(cpus[c].package >= 0, "CPU %u: package %d", c, cpus[c].package);
			REQUIRE(cpus[c].core >= 0, "CPU %u: core %d", c, cpus[c].core);
		}
		if (cpus[c].node >= 0) {
			char path[96];

			/* the node lists the CPU too */
			snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpu%u",
			         cpus[c].node, c);
			REQUIRE(access(path, F_OK) == 0, "CPU %u not under node %d", c,
			        cpus[c].node);
		}
	}
	ck_assert_uint_ge(online, 1);
	ck_assert_uint_ge(ncpu, online);

	/* and a map built on it: every online CPU's reactor is its own when
	 * each has one */
	{
		int *rcpu = malloc(ncpu * sizeof(*rcpu));
		unsigned *map = malloc(ncpu * sizeof(*map));

		ck_assert(rcpu && map);
		for (unsigned r = 0; r < ncpu; r++)
			rcpu[r] = (int)r;
		ck_assert_int_eq(cpumap_build(cpus, ncpu, rcpu, ncpu, map), 0);
		for (unsigned c = 0; c < ncpu; c++)
			REQUIRE(map[c] == c, "CPU %u -> %u", c, map[c]);
		free(rcpu);
		free(map);
	}
	free(on);
	free(cpus);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cpumap");
	TCase *tc = tcase_create("cpumap");

	tcase_add_test(tc, t_two_cpus);
	tcase_add_test(tc, t_hyperthreads);
	tcase_add_test(tc, t_numa_nodes);
	tcase_add_test(tc, t_sibling_beats_node);
	tcase_add_test(tc, t_node_beats_anywhere);
	tcase_add_test(tc, t_siblings_need_same_package);
	tcase_add_test(tc, t_unknown_is_no_match);
	tcase_add_test(tc, t_least_loaded_ties_lowest);
	tcase_add_test(tc, t_unpinned);
	tcase_add_test(tc, t_same_cpu_twice);
	tcase_add_test(tc, t_cpu_out_of_range);
	tcase_add_test(tc, t_count);
	tcase_add_loop_test(tc, t_random_tiers, 0, 4);
	tcase_add_test(tc, t_this_machine);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

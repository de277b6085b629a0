/* cpumap.c - CPU to reactor map for the FUSE queues (see cpumap.h). */
#include "cpumap.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define SYS_CPU "/sys/devices/system/cpu"

static int read_int(const char *path, int *v)
{
	FILE *f = fopen(path, "re");
	int rc = 0;

	if (!f)
		return -errno;
	if (fscanf(f, "%d", v) != 1)
		rc = -EINVAL;
	fclose(f);
	return rc;
}

/* A sysfs CPU list ("0-3,8-11") into a malloc'd array: -errno when the
 * file cannot be read, -EINVAL when it does not parse or is empty. */
static int read_cpu_list(const char *path, unsigned **out, unsigned *nr)
{
	char line[4096];
	unsigned *cpus;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	cpus = malloc((CFG_CPU_ID_MAX + 1) * sizeof(*cpus));
	if (!cpus)
		return -ENOMEM;
	if (cfg_parse_cpu_list(line, cpus, CFG_CPU_ID_MAX + 1, nr) != 0 || !*nr) {
		free(cpus);
		return -EINVAL;
	}
	*out = cpus;
	return 0;
}

/* the highest possible CPU number, + 1 */
static int possible_cpus(unsigned *n)
{
	unsigned *cpus, nr = 0, max = 0;
	int rc = read_cpu_list(SYS_CPU "/possible", &cpus, &nr);

	if (rc)
		return rc;
	for (unsigned i = 0; i < nr; i++)
		if (cpus[i] + 1 > max)
			max = cpus[i] + 1;
	*n = max;
	free(cpus);
	return 0;
}

int cpumap_read_online(bool *online, unsigned ncpu)
{
	unsigned *cpus, nr = 0;
	int rc = read_cpu_list(SYS_CPU "/online", &cpus, &nr);

	if (rc == -ENOMEM)
		return rc;
	for (unsigned c = 0; c < ncpu; c++)
		online[c] = rc != 0;
	if (rc)
		return 0;
	for (unsigned i = 0; i < nr; i++)
		if (cpus[i] < ncpu)
			online[cpus[i]] = true;
	free(cpus);
	return 0;
}

/* the node link under cpuN (node0, node1 ...), -1 when none */
static int cpu_node(unsigned c)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int node = -1;

	snprintf(path, sizeof(path), SYS_CPU "/cpu%u", c);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (sscanf(de->d_name, "node%d", &node) == 1)
			break;
	closedir(d);
	return de ? node : -1;
}

int cpumap_read_topology(struct cpumap_cpu **out, unsigned *ncpu)
{
	struct cpumap_cpu *cpus;
	bool *online;
	unsigned n = 0;
	int rc = possible_cpus(&n);

	if (rc)
		return rc;
	cpus = calloc(n, sizeof(*cpus));
	online = calloc(n, sizeof(*online));
	if (!cpus || !online || cpumap_read_online(online, n)) {
		free(cpus);
		free(online);
		return -ENOMEM;
	}
	for (unsigned c = 0; c < n; c++) {
		cpus[c].online = online[c];
		char path[96];

		snprintf(path, sizeof(path), SYS_CPU "/cpu%u/topology/physical_package_id", c);
		if (read_int(path, &cpus[c].package))
			cpus[c].package = -1;
		snprintf(path, sizeof(path), SYS_CPU "/cpu%u/topology/core_id", c);
		if (read_int(path, &cpus[c].core))
			cpus[c].core = -1;
		cpus[c].node = cpu_node(c);
	}
	free(online);
	*out = cpus;
	*ncpu = n;
	return 0;
}

static bool siblings(const struct cpumap_cpu *a, const struct cpumap_cpu *b)
{
	return a->core >= 0 && a->package >= 0 && a->core == b->core && a->package == b->package;
}

static bool same_node(const struct cpumap_cpu *a, const struct cpumap_cpu *b)
{
	return a->node >= 0 && a->node == b->node;
}

enum tier { T_SIBLING, T_NODE, T_ANY };

static bool in_tier(enum tier t, const struct cpumap_cpu *cpus, unsigned ncpu, unsigned c, int rc)
{
	if (t == T_ANY)
		return true;
	if (rc < 0 || (unsigned)rc >= ncpu)
		return false;
	return t == T_SIBLING ? siblings(&cpus[c], &cpus[rc]) : same_node(&cpus[c], &cpus[rc]);
}

unsigned cpumap_count(const unsigned *map, unsigned ncpu, unsigned r)
{
	unsigned n = 0;

	for (unsigned c = 0; c < ncpu; c++)
		n += map[c] == r;
	return n;
}

unsigned cpumap_entries(const struct cpumap_cpu *cpus, const unsigned *map, unsigned ncpu,
			unsigned r, unsigned depth)
{
	unsigned n = 0;

	for (unsigned c = 0; c < ncpu; c++)
		if (map[c] == r)
			n += cpumap_queue_entries(cpus, c, depth);
	return n;
}

int cpumap_build(const struct cpumap_cpu *cpus, unsigned ncpu, const int *rcpu, unsigned nr,
		 unsigned *map)
{
	unsigned *load;
	bool *done;
	int err = 0;

	if (!ncpu || !nr)
		return -EINVAL;
	load = calloc(nr, sizeof(*load));
	done = calloc(ncpu, sizeof(*done));
	if (!load || !done) {
		err = -ENOMEM;
		goto out;
	}
	/* a reactor's own CPU first */
	for (unsigned r = 0; r < nr; r++) {
		int c = rcpu[r];

		if (c >= 0 && (unsigned)c < ncpu && !done[c]) {
			map[c] = r;
			done[c] = true;
			load[r]++;
		}
	}
	for (unsigned c = 0; c < ncpu; c++) {
		if (done[c])
			continue;
		for (enum tier t = T_SIBLING; t <= T_ANY && !done[c]; t++) {
			unsigned best = nr;

			for (unsigned r = 0; r < nr; r++)
				if (in_tier(t, cpus, ncpu, c, rcpu[r]) &&
				    (best == nr || load[r] < load[best]))
					best = r;
			if (best < nr) {
				map[c] = best;
				done[c] = true;
				load[best]++;
			}
		}
	}
out:
	free(load);
	free(done);
	return err;
}

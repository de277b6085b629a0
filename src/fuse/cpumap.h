/* cpumap.h - which reactor serves each CPU's FUSE queue.
 *
 * Over io_uring the kernel keeps one FUSE queue per possible CPU and puts a
 * request on the queue of the CPU its caller runs on.  With one reactor per
 * CPU each reactor serves its own CPU's queue, and an I/O stays on one core
 * from the system call to the NVMe doorbell.  With fewer reactors than CPUs
 * a CPU without a reactor is given, as blk-mq maps CPUs onto hardware
 * queues, to the least loaded reactor on a hyperthread sibling, else on the
 * same NUMA node, else anywhere (ties: the lowest reactor index).  A CPU
 * with several reactors goes to the first of them.  Prefix cpumap_.
 */
#ifndef NVMEFS_FUSE_CPUMAP_H
#define NVMEFS_FUSE_CPUMAP_H

#include <stdbool.h>

/* One possible CPU; -1 where unknown (an offline CPU may have no topology). */
struct cpumap_cpu {
	int package; /* physical package (socket) */
	int core;    /* core id within the package: siblings share it */
	int node;    /* NUMA node */
	bool online; /* when read: only an online CPU's callers send requests */
};

/* The number of possible CPUs as the kernel counts FUSE queues (the highest
 * possible CPU number + 1), and each one's topology and online state from
 * sysfs; *out is malloc'd (free it).  0 or a negative errno. */
int cpumap_read_topology(struct cpumap_cpu **out, unsigned *ncpu);

/* online[c] for every c < ncpu, from sysfs's online list (every CPU when
 * the list cannot be read: the kernel then has no CPU hotplug to speak of).
 * 0, or -ENOMEM. */
int cpumap_read_online(bool *online, unsigned ncpu);

/* The FUSE queue entries a queue of CPU c wants: depth while c is online,
 * else 1 (the kernel starts serving the ring only once every possible
 * CPU's queue has an entry, and an offline CPU sends nothing). */
static inline unsigned cpumap_queue_entries(const struct cpumap_cpu *cpus, unsigned c,
					    unsigned depth)
{
	return !cpus || cpus[c].online ? depth : 1;
}

/* The entries of the queues map gives to reactor r (cpus NULL: all online). */
unsigned cpumap_entries(const struct cpumap_cpu *cpus, const unsigned *map, unsigned ncpu,
			unsigned r, unsigned depth);

/* map[c] for every c < ncpu: the reactor (0..nr-1) serving CPU c's queue.
 * rcpu[r] is the CPU reactor r is pinned to, -1 when it is not pinned.
 * -EINVAL for nr or ncpu 0. */
int cpumap_build(const struct cpumap_cpu *cpus, unsigned ncpu, const int *rcpu, unsigned nr,
		 unsigned *map);

/* How many CPUs map gives to reactor r. */
unsigned cpumap_count(const unsigned *map, unsigned ncpu, unsigned r);

#endif

/* sim_cfg.c - a software controller from a [controller] section (see sim.h). */
#include <errno.h>
#include <limits.h>

#include "config.h"
#include "sim.h"

int sim_create_from_cfg(const struct cfg_controller *c, struct sim **out)
{
	struct sim_opts o = {0};
	char paths[SIM_MAX_NS][PATH_MAX];
	int rc;

	if (!c->sim || c->namespaces < 1 || c->namespaces > SIM_MAX_NS || !c->block_size)
		return -EINVAL;
	o.name = c->name;
	o.nr_ns = c->namespaces;
	o.threaded = c->exec == CFG_EXEC_THREAD;
	o.offload = c->offload;
	o.mdts = c->mdts;
	o.max_queues = c->max_queues;
	/* volatile: fsync (NVMe Flush) and FUA mean something, and a power cut
	 * (sim_fault_powerfail) shows whether the host relied on them */
	o.vwc = c->write_cache == CFG_WC_VOLATILE;
	for (unsigned i = 0; i < c->namespaces; i++) {
		struct sim_ns_opts *ns = &o.ns[i];
		ns->nlba = c->size / c->block_size;
		ns->lba_size = c->block_size;
		ns->ms = c->metadata_size;
		ns->md_ext = c->metadata_layout == CFG_MD_EXTENDED;
		ns->pi_type = (unsigned)c->pi_type; /* the enum counts types 0..3 */
		ns->pi_first = c->pi_location == CFG_PI_FIRST;
		ns->pi_g64 = c->pi_guard == CFG_PI_CRC64;
		switch (c->backing) {
		case CFG_BACKING_RAM:
			ns->backing = SIM_BACKING_RAM;
			break;
		case CFG_BACKING_NULL:
			ns->backing = SIM_BACKING_NULL;
			break;
		case CFG_BACKING_FILE:
			ns->backing = SIM_BACKING_FILE;
			rc = cfg_backing_file(c, i + 1, paths[i], sizeof(paths[i]));
			if (rc < 0)
				return rc;
			ns->path = paths[i];
			break;
		}
	}
	return sim_create(&o, out);
}

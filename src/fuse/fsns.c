/* fsns.c - the namespace table. */
#include "fsns.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "nvme.h"

int fsns_build(struct nvme_ctrl *const *ctrls, const char *const *names, unsigned nr_ctrls,
	       struct fusefs_ns **out, unsigned *nr)
{
	struct fusefs_ns *v;
	unsigned n = 0, k = 0;

	for (unsigned c = 0; c < nr_ctrls; c++)
		n += nvme_ctrl_get_info(ctrls[c])->nr_ns;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (unsigned c = 0; c < nr_ctrls; c++) {
		const struct nvme_ctrl_info *in = nvme_ctrl_get_info(ctrls[c]);

		for (unsigned i = 0; i < in->nr_ns; i++) {
			const struct nvme_ns_info *ni = &in->ns[i];
			struct fusefs_ns *ns = &v[k];

			if (ni->lba_size < 512 || ni->lba_size > 65536 ||
			    (ni->lba_size & (ni->lba_size - 1)) || ni->nlba == 0) {
				log_warn("fuse: %s namespace %u: LBA size %u, %llu blocks: not shown",
					 names[c], ni->nsid, ni->lba_size, (unsigned long long)ni->nlba);
				continue;
			}
			snprintf(ns->name, sizeof(ns->name), "%sn%u", names[c], ni->nsid);
			ns->d.name = ns->name;
			ns->d.ctrl = c;
			ns->d.nsid = ni->nsid;
			ns->d.lba_size = ni->lba_size;
			ns->d.size = ni->nlba * ni->lba_size;
			ns->shift = (uint8_t)__builtin_ctz(ni->lba_size);
			ns->vwc = in->vwc;
			ns->dsm = in->oncs & NVME_ONCS_DSM;
			ns->wzeroes = in->oncs & NVME_ONCS_WRITE_ZEROES;
			ns->dealloc_zeroes = ni->dealloc_zeroes;
			rlock_init(&ns->lock);
			k++;
		}
	}
	*out = v;
	*nr = k;
	return 0;
}

void fsns_free(struct fusefs_ns *ns, unsigned nr)
{
	for (unsigned i = 0; ns && i < nr; i++)
		rlock_destroy(&ns[i].lock);
	free(ns);
}

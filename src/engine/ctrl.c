/* ctrl.c - controller bring-up, the synchronous admin queue, identify,
 * namespaces, Number of Queues, shutdown and reset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"

#define ADMIN_BOUNCE (64u << 10)
/* admin_mem layout, in 4 KiB pages: ASQ, ACQ, PRP list, bounce */
#define ASQ_OFF    0
#define ACQ_OFF    (NVME_ADMIN_ENTRIES * sizeof(struct nvme_sqe))
#define PRPL_OFF   (ACQ_OFF + 4096)
#define BOUNCE_OFF (PRPL_OFF + 4096)
static_assert(NVME_ADMIN_ENTRIES * sizeof(struct nvme_sqe) == 4096, "ASQ is one page");

static void sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static uint32_t csts(struct nvme_ctrl *c)
{
	return nvme_bus_read32(c->bus, NVME_REG_CSTS);
}

/* Wait until (CSTS & mask) == want.  A controller reading all ones is gone;
 * one reporting CFS has failed (unless we are disabling it, which clears CFS). */
static int wait_csts(struct nvme_ctrl *c, uint32_t mask, uint32_t want, uint32_t timeout_ms,
                     bool cfs_fatal, const char *what)
{
	uint64_t deadline = nvme_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	unsigned spins = 0;
	for (;;) {
		uint32_t s = csts(c);
		if (s == 0xffffffffu) {
			log_err("%s: device not responding (CSTS reads all ones) while %s", c->name,
			        what);
			return -ENODEV;
		}
		if (cfs_fatal && (s & NVME_CSTS_CFS)) {
			log_err("%s: controller fatal status (CSTS 0x%x) while %s", c->name, s,
			        what);
			return -EIO;
		}
		if ((s & mask) == want)
			return 0;
		if (nvme_now_ns() > deadline) {
			log_err("%s: timed out after %u ms %s (CSTS 0x%x)", c->name, timeout_ms,
			        what, s);
			return -ETIMEDOUT;
		}
		sleep_us(spins++ < 100 ? 50 : 1000);
	}
}

static int disable_locked(struct nvme_ctrl *c)
{
	uint32_t cc = nvme_bus_read32(c->bus, NVME_REG_CC);
	if (cc == 0xffffffffu) {
		log_err("%s: device not responding (CC reads all ones)", c->name);
		return -ENODEV;
	}
	if (cc & NVME_CC_EN)
		nvme_bus_write32(c->bus, NVME_REG_CC, cc & ~NVME_CC_EN);
	return wait_csts(c, NVME_CSTS_RDY, 0, c->ready_timeout_ms, false,
	                 "waiting for the controller to disable");
}

/* Program the admin queue and enable.  Rings are zeroed so no stale phase
 * bit is mistaken for a completion. */
static int enable_locked(struct nvme_ctrl *c)
{
	memset(c->asq, 0, ACQ_OFF);
	memset((void *)c->acq, 0, NVME_ADMIN_ENTRIES * sizeof(struct nvme_cqe));
	c->asq_tail = 0;
	c->acq_head = 0;
	c->acq_phase = 1;

	nvme_bus_write32(c->bus, NVME_REG_AQA,
	                 ((NVME_ADMIN_ENTRIES - 1u) << 16) | (NVME_ADMIN_ENTRIES - 1u));
	nvme_bus_write64(c->bus, NVME_REG_ASQ, c->admin_iova + ASQ_OFF);
	nvme_bus_write64(c->bus, NVME_REG_ACQ, c->admin_iova + ACQ_OFF);
	/* CSS NVM, MPS 4 KiB, round robin, 64-byte SQEs, 16-byte CQEs; EN last */
	uint32_t cc = (0u << NVME_CC_CSS_SHIFT) | (0u << NVME_CC_MPS_SHIFT) |
	              (0u << NVME_CC_AMS_SHIFT) | (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) |
	              (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
	nvme_bus_write32(c->bus, NVME_REG_CC, cc);
	nvme_bus_write32(c->bus, NVME_REG_CC, cc | NVME_CC_EN);
	return wait_csts(c, NVME_CSTS_RDY, NVME_CSTS_RDY, c->ready_timeout_ms, true,
	                 "waiting for the controller to become ready");
}

static int admin_locked(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                        struct nvme_cqe *cqe_out, uint32_t timeout_ms)
{
	struct nvme_dma_region tmp = {0};
	uint64_t tmp_iova = 0;
	uint8_t *dbuf = NULL;
	uint64_t diova = 0;
	int rc = 0;

	if (len > NVME_ENGINE_MAX_XFER)
		return -EINVAL;
	if (len) {
		if (len <= c->bounce_len) {
			dbuf = c->bounce;
			diova = c->admin_iova + BOUNCE_OFF;
		} else {
			rc = nvme_dma_alloc(len, c->bus->numa_node, &tmp);
			if (rc < 0)
				return rc;
			rc = nvme_dma_map(c->bus, &tmp, &tmp_iova);
			if (rc < 0) {
				nvme_dma_free(&tmp);
				return rc;
			}
			dbuf = tmp.vaddr;
			diova = tmp_iova;
		}
		/* opcode bits 1:0 give the direction: 01 host to device, 10 back */
		if ((cmd->opc & 1) && buf)
			memcpy(dbuf, buf, len);
		else
			memset(dbuf, 0, len);
	}

	struct nvme_sqe sqe = *cmd;
	sqe.flags = 0; /* PRPs */
	sqe.cid = ++c->admin_cid;
	if (len) {
		rc = nvme_prp_build(diova, len, c->admin_prp_list, c->admin_iova + PRPL_OFF,
		                    &sqe.prp1, &sqe.prp2);
		if (rc < 0)
			goto out;
	}
	c->asq[c->asq_tail] = sqe;
	c->asq_tail = (uint16_t)((c->asq_tail + 1) % NVME_ADMIN_ENTRIES);
	nvme_bus_doorbell(c->bus,
	                  (volatile uint32_t *)(c->bus->bar0 + nvme_sq_tdbl_off(0, c->dstrd)),
	                  c->asq_tail);

	uint64_t deadline = nvme_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct nvme_cqe cqe;
	unsigned spins = 0;
	for (;;) {
		volatile struct nvme_cqe *e = &c->acq[c->acq_head];
		uint16_t st = e->status;
		if (NVME_CQE_PHASE(st) == c->acq_phase) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			cqe.dw0 = e->dw0;
			cqe.dw1 = e->dw1;
			cqe.sq_head = e->sq_head;
			cqe.sq_id = e->sq_id;
			cqe.cid = e->cid;
			cqe.status = e->status;
			if (++c->acq_head == NVME_ADMIN_ENTRIES) {
				c->acq_head = 0;
				c->acq_phase ^= 1;
			}
			nvme_bus_doorbell(
			    c->bus,
			    (volatile uint32_t *)(c->bus->bar0 + nvme_cq_hdbl_off(0, c->dstrd)),
			    c->acq_head);
			if (cqe.cid == sqe.cid)
				break;
			/* a late completion of an earlier timed-out command */
			c->admin_bogus++;
			log_warn("%s: dropping admin completion for cid %u (waiting for %u)",
			         c->name, cqe.cid, sqe.cid);
			continue;
		}
		if (nvme_now_ns() > deadline) {
			uint32_t s = csts(c);
			if (s == 0xffffffffu) {
				log_err("%s: device not responding (admin opcode 0x%02x)", c->name,
				        cmd->opc);
				rc = -ENODEV;
			} else {
				log_err("%s: admin command opcode 0x%02x timed out after %u ms "
				        "(CSTS 0x%x)",
				        c->name, cmd->opc, timeout_ms, s);
				rc = -ETIMEDOUT;
			}
			goto out;
		}
		/* spin briefly (a local or inline device answers in microseconds),
		 * then back off so a device thread on the same core can run */
		if (spins++ < 2000) {
			nvme_cpu_relax();
			continue;
		}
		sleep_us(20);
		/* a failed controller will never answer: say so now, not at the timeout */
		if ((spins & 63) == 0) {
			uint32_t s = csts(c);
			if (s == 0xffffffffu || (s & NVME_CSTS_CFS)) {
				log_err("%s: admin opcode 0x%02x: %s (CSTS 0x%x)", c->name,
				        cmd->opc,
				        s == 0xffffffffu ? "device not responding"
				                         : "controller fatal status",
				        s);
				rc = s == 0xffffffffu ? -ENODEV : -EIO;
				goto out;
			}
		}
	}
	if (cqe_out) {
		*cqe_out = cqe;
		cqe_out->status = NVME_CQE_STATUS(cqe.status);
	}
	uint16_t status = NVME_CQE_STATUS(cqe.status);
	rc = nvme_status_errno(status);
	if (rc == 0 && len && (cmd->opc & 2) && buf)
		memcpy(buf, dbuf, len);
	if (rc < 0)
		log_debug("%s: admin opcode 0x%02x failed: %s (status 0x%x)", c->name, cmd->opc,
		          nvme_status_str(status), status);
out:
	if (tmp.vaddr) {
		nvme_dma_unmap(c->bus, &tmp, tmp_iova);
		nvme_dma_free(&tmp);
	}
	return rc;
}

int nvme_ctrl_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                    struct nvme_cqe *cqe_out)
{
	pthread_mutex_lock(&c->admin_lock);
	int rc = admin_locked(c, cmd, buf, len, cqe_out, NVME_ADMIN_TIMEOUT_MS);
	pthread_mutex_unlock(&c->admin_lock);
	return rc;
}

int nvme_ctrl_admin_timeout(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
                            struct nvme_cqe *cqe_out, uint32_t timeout_ms)
{
	pthread_mutex_lock(&c->admin_lock);
	int rc = admin_locked(c, cmd, buf, len, cqe_out, timeout_ms);
	pthread_mutex_unlock(&c->admin_lock);
	return rc;
}

static void trim_copy(char *dst, const char *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)dst[i] < 0x20 || (unsigned char)dst[i] > 0x7e)
			dst[i] = dst[i] ? '?' : ' ';
	while (n > 0 && dst[n - 1] == ' ')
		dst[--n] = 0;
	size_t lead = 0;
	while (dst[lead] == ' ')
		lead++;
	if (lead)
		memmove(dst, dst + lead, n - lead + 1);
}

static int identify(struct nvme_ctrl *c, uint32_t cns, uint32_t nsid, void *buf)
{
	struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .nsid = nsid, .cdw10 = cns};
	return nvme_ctrl_admin(c, &cmd, buf, 4096, NULL);
}

/* Write Zeroes and DSM limits from Identify Controller NVM (CNS 06h); a
 * controller without it (before NVMe 2.0, often) has none. */
static void read_nvm_limits(struct nvme_ctrl *c, struct nvme_ctrl_info *in)
{
	in->max_wz_bytes = 0;
	in->dsm_max_ranges = NVME_DSM_MAX_RANGES;
	in->dsm_max_range_blocks = UINT32_MAX;
	in->dsm_max_blocks = 0;
	struct nvme_id_ctrl_nvm *nvm = calloc(1, sizeof(*nvm));
	if (!nvm)
		return;
	if (identify(c, NVME_ID_CNS_CTRL_NVM, 0, nvm) == 0) {
		if (nvm->wzsl && nvm->wzsl < 32)
			in->max_wz_bytes = (uint64_t)NVME_PAGE_SIZE << nvm->wzsl;
		if (nvm->dmrl)
			in->dsm_max_ranges = nvm->dmrl;
		if (nvm->dmrsl)
			in->dsm_max_range_blocks = nvm->dmrsl;
		in->dsm_max_blocks = nvm->dmsl;
	}
	free(nvm);
}

static int set_num_queues(struct nvme_ctrl *c, unsigned want, unsigned *granted)
{
	struct nvme_sqe cmd = {.opc = NVME_ADM_SET_FEATURES,
	                       .cdw10 = NVME_FEAT_NUM_QUEUES,
	                       .cdw11 = ((want - 1u) << 16) | (want - 1u)};
	struct nvme_cqe cqe;
	int rc = nvme_ctrl_admin(c, &cmd, NULL, 0, &cqe);
	if (rc < 0) {
		log_err("%s: Set Features Number of Queues failed: %s", c->name, strerror(-rc));
		return rc;
	}
	unsigned nsq = (cqe.dw0 & 0xffff) + 1u, ncq = (cqe.dw0 >> 16) + 1u;
	unsigned g = want;
	if (nsq < g)
		g = nsq;
	if (ncq < g)
		g = ncq;
	if (g < want)
		log_info("%s: asked for %u I/O queues, the controller granted %u", c->name, want,
		         g);
	*granted = g;
	return 0;
}

static int load_namespaces(struct nvme_ctrl *c, uint32_t nn)
{
	uint32_t *list = calloc(1024, sizeof(uint32_t));
	struct nvme_id_ns *id = calloc(1, sizeof(*id));
	struct nvme_ctrl_info *info = NULL;
	unsigned cnt = 0;
	int rc = -ENOMEM;
	if (!list || !id)
		goto out;
	rc = identify(c, NVME_ID_CNS_NS_ACTIVE_LIST, 0, list);
	if (rc < 0) {
		/* pre-1.1 controllers: every NSID up to NN is a candidate */
		log_info("%s: no active namespace list (%s); probing 1..%u", c->name, strerror(-rc),
		         nn);
		memset(list, 0, 4096);
		for (uint32_t i = 0; i < nn && i < 1024; i++)
			list[i] = i + 1;
	}
	while (cnt < 1024 && list[cnt])
		cnt++;
	info = calloc(1, sizeof(*info) + cnt * sizeof(struct nvme_ns_info));
	if (!info) {
		rc = -ENOMEM;
		goto out;
	}
	*info = *c->info;
	info->nr_ns = 0;
	for (unsigned i = 0; i < cnt; i++) {
		rc = identify(c, NVME_ID_CNS_NS, list[i], id);
		if (rc < 0) {
			log_warn("%s: Identify namespace %u failed: %s", c->name, list[i],
			         strerror(-rc));
			continue;
		}
		if (id->nsze == 0)
			continue; /* inactive */
		unsigned fmt = id->flbas & 0xf;
		if (fmt > id->nlbaf || id->lbaf[fmt].lbads < 9 || id->lbaf[fmt].lbads > 16) {
			log_warn(
			    "%s: namespace %u has an unusable LBA format (%u, lbads %u); skipped",
			    c->name, list[i], fmt, fmt < 16 ? id->lbaf[fmt].lbads : 0);
			continue;
		}
		if (id->lbaf[fmt].ms && (id->flbas & 0x10)) {
			log_warn("%s: namespace %u uses extended-LBA metadata; skipped", c->name,
			         list[i]);
			continue;
		}
		struct nvme_ns_info *ns = &info->ns[info->nr_ns++];
		ns->nsid = list[i];
		ns->nlba = id->nsze;
		ns->lba_shift = id->lbaf[fmt].lbads;
		ns->lba_size = 1u << ns->lba_shift;
		ns->dealloc_zeroes = (id->dlfeat & 7) == 1;
	}
	free(c->info);
	c->info = info;
	info = NULL;
	rc = 0;
out:
	free(info);
	free(list);
	free(id);
	return rc;
}

static unsigned pow2_floor(unsigned v)
{
	unsigned p = 1;
	while (p * 2 <= v)
		p *= 2;
	return p;
}

int nvme_ctrl_open(struct nvme_bus *bus, const struct nvme_ctrl_opts *o, struct nvme_ctrl **out)
{
	struct nvme_ctrl *c = calloc(1, sizeof(*c));
	struct nvme_id_ctrl *id = NULL;
	int rc = -ENOMEM;
	if (!c)
		return -ENOMEM;
	c->bus = bus;
	c->opts = *o;
	snprintf(c->name, sizeof(c->name), "%s", o->name && *o->name ? o->name : bus->name);
	c->opts.name = c->name;
	pthread_mutex_init(&c->admin_lock, NULL);

	if (csts(c) == 0xffffffffu) {
		log_err("%s: device not responding (CSTS reads all ones)", c->name);
		rc = -ENODEV;
		goto err;
	}
	c->cap = nvme_bus_read64(bus, NVME_REG_CAP);
	if (c->cap == ~0ull) {
		log_err("%s: device not responding (CAP reads all ones)", c->name);
		rc = -ENODEV;
		goto err;
	}
	c->dstrd = NVME_CAP_DSTRD(c->cap);
	c->ready_timeout_ms = NVME_CAP_TO(c->cap) * 500u;
	if (c->ready_timeout_ms == 0)
		c->ready_timeout_ms = 500;
	if (!(NVME_CAP_CSS(c->cap) & NVME_CAP_CSS_NVM)) {
		log_err("%s: controller does not support the NVM command set (CAP 0x%llx)", c->name,
		        (unsigned long long)c->cap);
		rc = -ENOTSUP;
		goto err;
	}
	if (NVME_CAP_MPSMIN(c->cap) > 0) {
		log_err(
		    "%s: controller's minimum page size is %u KiB; only 4 KiB pages are supported",
		    c->name, 4u << NVME_CAP_MPSMIN(c->cap));
		rc = -ENOTSUP;
		goto err;
	}

	/* normalise the options the qpairs will use */
	unsigned mqe = NVME_CAP_MQES(c->cap) + 1u;
	unsigned depth = c->opts.queue_depth ? c->opts.queue_depth : 256;
	if (depth > mqe)
		depth = mqe;
	if (depth > NVME_MAX_TRACKERS)
		depth = NVME_MAX_TRACKERS;
	depth = pow2_floor(depth); /* power of two: index arithmetic is a mask */
	if (depth < 4) {
		log_err("%s: queue depth %u too small (MQES %u)", c->name, depth, mqe);
		rc = -EINVAL;
		goto err;
	}
	c->opts.queue_depth = depth;
	if (c->opts.cq_budget == 0)
		c->opts.cq_budget = depth / 4 < 64 ? depth / 4 : 64;
	if (c->opts.cq_budget > depth / 2)
		c->opts.cq_budget = depth / 2;
	if (c->opts.io_timeout_ms == 0)
		c->opts.io_timeout_ms = NVME_DEFAULT_IO_TIMEOUT_MS;
	if (c->opts.io_queues == 0)
		c->opts.io_queues = 1;

	rc = nvme_dma_alloc(BOUNCE_OFF + ADMIN_BOUNCE, bus->numa_node, &c->admin_mem);
	if (rc < 0)
		goto err;
	rc = nvme_dma_map(bus, &c->admin_mem, &c->admin_iova);
	if (rc < 0) {
		nvme_dma_free(&c->admin_mem);
		goto err;
	}
	uint8_t *m = c->admin_mem.vaddr;
	c->asq = (struct nvme_sqe *)(m + ASQ_OFF);
	c->acq = (volatile struct nvme_cqe *)(m + ACQ_OFF);
	c->admin_prp_list = (uint64_t *)(m + PRPL_OFF);
	c->bounce = m + BOUNCE_OFF;
	c->bounce_len = ADMIN_BOUNCE;

	pthread_mutex_lock(&c->admin_lock);
	rc = disable_locked(c);
	if (rc == 0)
		rc = enable_locked(c);
	pthread_mutex_unlock(&c->admin_lock);
	if (rc < 0)
		goto err_mem;

	c->info = calloc(1, sizeof(*c->info));
	id = calloc(1, sizeof(*id));
	if (!c->info || !id) {
		rc = -ENOMEM;
		goto err_mem;
	}
	rc = identify(c, NVME_ID_CNS_CTRL, 0, id);
	if (rc < 0) {
		log_err("%s: Identify controller failed: %s", c->name, strerror(-rc));
		goto err_mem;
	}
	struct nvme_ctrl_info *in = c->info;
	trim_copy(in->model, id->mn, sizeof(id->mn));
	trim_copy(in->serial, id->sn, sizeof(id->sn));
	trim_copy(in->firmware, id->fr, sizeof(id->fr));
	in->vid = id->vid;
	in->version = nvme_bus_read32(bus, NVME_REG_VS);
	in->cap = c->cap;
	in->mdts = id->mdts;
	in->max_xfer = NVME_ENGINE_MAX_XFER;
	if (id->mdts && id->mdts < 20 && (4096u << id->mdts) < in->max_xfer)
		in->max_xfer = 4096u << id->mdts;
	in->max_entries = mqe;
	in->vwc = id->vwc & NVME_VWC_PRESENT;
	in->oncs = id->oncs;
	in->oacs = id->oacs;
	in->sgls = id->sgls;
	in->nn = id->nn;
	in->acl = id->acl;
	read_nvm_limits(c, in);
	in->nr_vectors = o->interrupts ? bus->nr_vectors : 0;
	c->shutdown_timeout_ms = 5000;
	if (id->rtd3e / 1000u > c->shutdown_timeout_ms)
		c->shutdown_timeout_ms = id->rtd3e / 1000u > 60000 ? 60000 : id->rtd3e / 1000u;

	c->asked_queues = c->opts.io_queues;
	rc = set_num_queues(c, c->asked_queues, &in->nr_io_queues);
	if (rc < 0)
		goto err_mem;
	rc = load_namespaces(c, id->nn);
	if (rc < 0)
		goto err_mem;
	log_info("%s: %s (sn %s, fw %s), NVMe %u.%u, %u namespace(s), %u I/O queue(s), max "
	         "transfer %u KiB",
	         c->name, c->info->model, c->info->serial, c->info->firmware,
	         c->info->version >> 16, (c->info->version >> 8) & 0xff, c->info->nr_ns,
	         c->info->nr_io_queues, c->info->max_xfer >> 10);
	free(id);
	*out = c;
	return 0;

err_mem:
	/* leave the device disabled so it no longer touches admin memory */
	if (csts(c) != 0xffffffffu) {
		uint32_t cc = nvme_bus_read32(bus, NVME_REG_CC);
		if (cc & NVME_CC_EN) {
			nvme_bus_write32(bus, NVME_REG_CC, cc & ~NVME_CC_EN);
			wait_csts(c, NVME_CSTS_RDY, 0, c->ready_timeout_ms, false,
			          "disabling after a failed start");
		}
	}
	nvme_dma_unmap(bus, &c->admin_mem, c->admin_iova);
	nvme_dma_free(&c->admin_mem);
err:
	free(id);
	free(c->info);
	pthread_mutex_destroy(&c->admin_lock);
	free(c);
	return rc;
}

const struct nvme_ctrl_info *nvme_ctrl_get_info(const struct nvme_ctrl *c)
{
	return c->info;
}

const char *nvme_ctrl_name(const struct nvme_ctrl *c)
{
	return c->name;
}

struct nvme_bus *nvme_ctrl_bus(struct nvme_ctrl *c)
{
	return c->bus;
}

int nvme_ctrl_wire_vector(struct nvme_ctrl *c, unsigned vector, int efd)
{
	struct nvme_bus *bus = c->bus;
	int rc = 0;
	if (vector >= bus->nr_vectors || !bus->ops->irq_set)
		return -ENOTSUP;
	pthread_mutex_lock(&c->admin_lock);
	if (!c->efds) {
		c->efds = malloc(bus->nr_vectors * sizeof(int));
		if (!c->efds) {
			rc = -ENOMEM;
			goto out;
		}
		for (unsigned i = 0; i < bus->nr_vectors; i++)
			c->efds[i] = -1;
	}
	int old = c->efds[vector];
	c->efds[vector] = efd;
	unsigned n = 0;
	for (unsigned i = 0; i < bus->nr_vectors; i++)
		if (c->efds[i] >= 0)
			n = i + 1;
	c->nr_efds = n;
	rc = bus->ops->irq_set(bus, n, n ? c->efds : NULL);
	if (rc < 0) {
		c->efds[vector] = old;
		log_warn("%s: cannot wire MSI-X vector %u: %s", c->name, vector, strerror(-rc));
	}
out:
	pthread_mutex_unlock(&c->admin_lock);
	return rc;
}

int nvme_ctrl_reset(struct nvme_ctrl *c)
{
	log_warn("%s: resetting the controller", c->name);
	pthread_mutex_lock(&c->admin_lock);
	int rc = disable_locked(c);
	if (rc == 0)
		rc = enable_locked(c);
	pthread_mutex_unlock(&c->admin_lock);
	if (rc < 0) {
		log_err("%s: reset failed: %s", c->name, strerror(-rc));
		return rc;
	}
	/* Number of Queues must be set again before any I/O queue is created */
	unsigned granted = 0;
	rc = set_num_queues(c, c->asked_queues, &granted);
	if (rc < 0)
		return rc;
	if (granted < c->info->nr_io_queues)
		log_warn("%s: after reset only %u I/O queues granted (was %u)", c->name, granted,
		         c->info->nr_io_queues);
	c->info->nr_io_queues = granted;
	return 0;
}

void nvme_ctrl_close(struct nvme_ctrl *c)
{
	if (!c)
		return;
	struct nvme_bus *bus = c->bus;
	if (c->nr_qpairs)
		log_warn("%s: closing with %u I/O queue pair(s) still open", c->name, c->nr_qpairs);
	if (csts(c) != 0xffffffffu) {
		uint32_t cc = nvme_bus_read32(bus, NVME_REG_CC);
		if (cc & NVME_CC_EN) {
			/* normal shutdown lets the device flush its cache and metadata */
			nvme_bus_write32(bus, NVME_REG_CC,
			                 (cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL);
			if (wait_csts(c, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT,
			              c->shutdown_timeout_ms, false,
			              "waiting for shutdown to complete") < 0)
				log_warn("%s: shutdown incomplete; disabling anyway", c->name);
			/* disabled, the device stops referencing admin queue memory */
			cc = nvme_bus_read32(bus, NVME_REG_CC);
			nvme_bus_write32(bus, NVME_REG_CC, cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK));
			wait_csts(c, NVME_CSTS_RDY, 0, c->ready_timeout_ms, false,
			          "disabling after shutdown");
		}
	}
	if (c->nr_efds && bus->ops->irq_set)
		bus->ops->irq_set(bus, 0, NULL);
	free(c->efds);
	nvme_dma_unmap(bus, &c->admin_mem, c->admin_iova);
	nvme_dma_free(&c->admin_mem);
	if (bus->ops->close)
		bus->ops->close(bus);
	free(c->info);
	pthread_mutex_destroy(&c->admin_lock);
	free(c);
}

/* ---- recovery API ---- */

enum nvme_ctrl_state nvme_ctrl_state(const struct nvme_ctrl *c)
{
	return (enum nvme_ctrl_state)atomic_load_explicit(&c->state, memory_order_acquire);
}

const char *nvme_ctrl_state_name(enum nvme_ctrl_state s)
{
	switch (s) {
	case NVME_CTRL_LIVE: return "live";
	case NVME_CTRL_RESETTING: return "resetting";
	case NVME_CTRL_REMOVED: return "removed";
	case NVME_CTRL_FAILED: return "failed";
	}
	return "?";
}

void nvme_ctrl_rstats_get(const struct nvme_ctrl *c, struct nvme_ctrl_rstats *out)
{
	const uint64_t *src = (const uint64_t *)&c->rst;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void nvme_ctrl_set_event_cb(struct nvme_ctrl *c, nvme_ctrl_event_cb cb, void *arg)
{
	c->event_arg = arg;
	c->event_cb = cb;
}

int nvme_ctrl_remove(struct nvme_ctrl *c, const char *why, struct nvme_bus **bus_out)
{
	(void)c;
	(void)why;
	*bus_out = NULL;
	return -ENOTSUP;
}

int nvme_ctrl_attach(struct nvme_ctrl *c, struct nvme_bus *bus)
{
	(void)c;
	(void)bus;
	return -ENOTSUP;
}

int nvme_ctrl_reset_async(struct nvme_ctrl *c, const char *why)
{
	(void)c;
	(void)why;
	return -ENOTSUP;
}

int nvme_ctrl_admin_async(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
                          nvme_admin_cb cb, void *arg)
{
	(void)c;
	(void)cmd;
	(void)buf;
	(void)len;
	(void)cb;
	(void)arg;
	return -ENOTSUP;
}

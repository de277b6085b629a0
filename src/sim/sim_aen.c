/* sim_aen.c - the software controller's asynchronous events (see sim.h,
 * "asynchronous events and namespace changes"): the queue of events waiting
 * for an Async Event Request, their masking until the host reads the log
 * page they name, the Changed Namespace List, and the injections that raise
 * them (critical warnings, namespaces added, removed and resized).
 */
#include "sim_priv.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* Whether AEC (feature 0Bh) enables the event dw0 names.  Error events
 * cannot be disabled. */
static bool sim_event_enabled(const struct sim *s, uint32_t dw0)
{
	switch (NVME_AER_TYPE(dw0)) {
	case NVME_AER_TYPE_ERROR:
		return true;
	case NVME_AER_TYPE_SMART:
		switch (NVME_AER_INFO(dw0)) {
		case NVME_AER_SMART_SPARE:
			return s->aec & NVME_SMART_CRIT_SPARE;
		case NVME_AER_SMART_TEMPERATURE:
			return s->aec & NVME_SMART_CRIT_TEMPERATURE;
		default:
			return s->aec & (NVME_SMART_CRIT_RELIABILITY | NVME_SMART_CRIT_READONLY |
					 NVME_SMART_CRIT_VOLATILE_BACKUP);
		}
	case NVME_AER_TYPE_NOTICE:
		if (NVME_AER_INFO(dw0) == NVME_AER_NOTICE_NS_CHANGED)
			return s->aec & NVME_AEC_NS_ATTR;
		if (NVME_AER_INFO(dw0) == NVME_AER_NOTICE_FW_ACTIVATE)
			return s->aec & NVME_AEC_FW_ACTIVATE;
		return false;
	default:
		return false;
	}
}

void sim_event_add(struct sim *s, uint32_t dw0)
{
	pthread_mutex_lock(&s->lock);
	bool dup = false;
	for (unsigned i = 0; i < s->nr_ev; i++)
		dup |= s->ev[i] == dw0;
	if (!dup && sim_event_enabled(s, dw0)) {
		if (s->nr_ev < SIM_MAX_EVENTS)
			s->ev[s->nr_ev++] = dw0;
		else
			log_warn("sim %s: event 0x%06x dropped: %u events pending", s->name, dw0,
				 s->nr_ev);
	}
	pthread_mutex_unlock(&s->lock);
}

void sim_event_log_read(struct sim *s, uint8_t lid, bool rae, uint8_t *buf, size_t len)
{
	if (lid == NVME_LOG_CHANGED_NS) {
		uint32_t *l = (uint32_t *)buf;
		size_t max = len / 4;
		if (s->nr_changed > SIM_CHANGED_NS_MAX) {
			if (max)
				l[0] = 0xffffffffu;
		} else {
			for (size_t i = 0; i < s->nr_changed && i < max; i++)
				l[i] = s->changed_ns[i];
		}
		s->nr_changed = 0;
	}
	if (!rae && lid < 32)
		s->ev_masked &= ~(1u << lid);
}

/* Post what can be posted now: hold the queues so that no command runs. */
static void sim_event_kick(struct sim *s)
{
	sim_qlock(s);
	sim_aer_flush(s);
	sim_qunlock(s);
}

int sim_inject_warning(struct sim *s, uint8_t bits, bool set)
{
	if (bits & ~NVME_SMART_CRIT_ALL)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	uint8_t added = (uint8_t)(bits & ~s->crit_warn);
	if (set)
		s->crit_warn |= bits;
	else
		s->crit_warn &= (uint8_t)~bits;
	pthread_mutex_unlock(&s->lock);
	if (!set || !added)
		return 0;
	if (added & NVME_SMART_CRIT_SPARE)
		sim_event_add(s, NVME_AER_DW0(NVME_AER_TYPE_SMART, NVME_AER_SMART_SPARE, NVME_LOG_SMART));
	if (added & NVME_SMART_CRIT_TEMPERATURE)
		sim_event_add(s, NVME_AER_DW0(NVME_AER_TYPE_SMART, NVME_AER_SMART_TEMPERATURE,
					      NVME_LOG_SMART));
	if (added & ~(NVME_SMART_CRIT_SPARE | NVME_SMART_CRIT_TEMPERATURE))
		sim_event_add(s, NVME_AER_DW0(NVME_AER_TYPE_SMART, NVME_AER_SMART_RELIABILITY,
					      NVME_LOG_SMART));
	sim_event_kick(s);
	return 0;
}

/* Record nsid in the Changed Namespace List and raise the notice.  s->lock
 * not held. */
static void sim_ns_changed(struct sim *s, uint32_t nsid)
{
	pthread_mutex_lock(&s->lock);
	bool listed = false;
	for (unsigned i = 0; i < s->nr_changed && i < SIM_CHANGED_NS_MAX; i++)
		listed |= s->changed_ns[i] == nsid;
	if (!listed) {
		if (s->nr_changed < SIM_CHANGED_NS_MAX)
			s->changed_ns[s->nr_changed++] = nsid;
		else
			s->nr_changed = SIM_CHANGED_NS_MAX + 1; /* overflowed */
	}
	pthread_mutex_unlock(&s->lock);
	sim_event_add(s, NVME_AER_DW0(NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_NS_CHANGED,
				      NVME_LOG_CHANGED_NS));
	sim_event_kick(s);
}

/* The write cache of ns for its current size and memory (vwc, not null). */
static int sim_ns_wc(struct sim *s, struct sim_ns *ns)
{
	if (!s->o.vwc || ns->backing == SIM_BACKING_NULL)
		return 0;
	return sim_wc_init(&ns->wc, ns->nlba, ns->lba_shift, s->o.wc_bytes, ns->mem, ns->fd, ns->md,
	                   ns->ms, ns->md_fd);
}

int sim_ns_add(struct sim *s, uint32_t nsid, uint64_t bytes)
{
	unsigned lbs = s->o.ns[0].lba_size;
	int rc = 0;

	if (nsid == 0 || nsid > SIM_MAX_NS || !bytes || bytes % lbs || bytes > (uint64_t)INT64_MAX)
		return -EINVAL;
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	struct sim_ns *ns = &s->ns[nsid - 1];
	if (nsid <= s->o.nr_ns && ns->active) {
		rc = -EEXIST;
		goto out;
	}
	/* namespace 1's format, metadata and protection information too */
	struct sim_ns_opts o = s->o.ns[0];
	o.nlba = bytes / lbs;
	o.path = NULL;
	o.backing = s->o.ns[0].backing == SIM_BACKING_NULL ? SIM_BACKING_NULL : SIM_BACKING_RAM;
	sim_ns_close(ns);
	if ((rc = sim_ns_open(ns, &o)) || (rc = sim_ns_wc(s, ns))) {
		sim_ns_close(ns);
		goto out;
	}
	ns->active = true;
	if (nsid > s->o.nr_ns)
		s->o.nr_ns = nsid;
out:
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	if (rc == 0) {
		log_info("sim %s: namespace %u added (%llu bytes, %s)", s->name, nsid,
			 (unsigned long long)bytes, o.backing == SIM_BACKING_NULL ? "null" : "RAM");
		sim_ns_changed(s, nsid);
	}
	return rc;
}

int sim_ns_remove(struct sim *s, uint32_t nsid)
{
	int rc = 0;

	if (nsid == 0 || nsid > SIM_MAX_NS)
		return -EINVAL;
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	struct sim_ns *ns = &s->ns[nsid - 1];
	if (nsid > s->o.nr_ns || !ns->active) {
		rc = -ENOENT;
	} else {
		ns->active = false;
		sim_ns_flush(ns); /* what it cached is its media's now */
		sim_ns_close(ns);
		ns->nlba = 0;
		ns->backing = SIM_BACKING_NULL;
	}
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	if (rc == 0) {
		log_info("sim %s: namespace %u removed", s->name, nsid);
		sim_ns_changed(s, nsid);
	}
	return rc;
}

int sim_ns_resize(struct sim *s, uint32_t nsid, uint64_t bytes)
{
	int rc = 0;

	if (nsid == 0 || nsid > SIM_MAX_NS || !bytes || bytes > (uint64_t)INT64_MAX)
		return -EINVAL;
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	struct sim_ns *ns = &s->ns[nsid - 1];
	if (nsid > s->o.nr_ns || !ns->active) {
		rc = -ENOENT;
		goto out;
	}
	if (bytes % ns->lba_size) {
		rc = -EINVAL;
		goto out;
	}
	uint64_t nlba = bytes / ns->lba_size;
	if (nlba == ns->nlba)
		goto out;
	/* the cache refers to the memory and the size: make it all durable
	 * and build it again for the new size */
	sim_ns_flush(ns);
	sim_wc_fini(&ns->wc);
	if (ns->backing == SIM_BACKING_RAM) {
		void *m = mremap(ns->mem, ns->mem_len, (size_t)bytes, MREMAP_MAYMOVE);
		if (m == MAP_FAILED) {
			rc = -errno;
			sim_ns_wc(s, ns);
			goto out;
		}
		ns->mem = m;
		ns->mem_len = (size_t)bytes;
	} else if (ns->backing == SIM_BACKING_FILE && nlba > ns->nlba &&
		   ftruncate(ns->fd, (off_t)bytes)) {
		rc = -errno;
		sim_ns_wc(s, ns);
		goto out;
	}
	if ((rc = sim_md_grow(ns, nlba))) {
		sim_ns_wc(s, ns);
		goto out;
	}
	ns->nlba = nlba;
	rc = sim_ns_wc(s, ns);
	if (rc == 0)
		log_info("sim %s: namespace %u resized to %llu bytes", s->name, nsid,
			 (unsigned long long)bytes);
	else
		log_err("sim %s: namespace %u resized, its write cache lost: %d", s->name, nsid, rc);
	rc = 0;
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	sim_ns_changed(s, nsid);
	return 0;
out:
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	return rc;
}

unsigned sim_events_pending(struct sim *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned n = s->nr_ev;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* aen.c - asynchronous events and namespace changes (contract in nvme.h,
 * "asynchronous events and namespace changes").
 *
 * The AERs are admin commands without a timeout.  Their completion
 * callback (on whatever thread reaped the admin CQ) only queues the
 * completion's dw0 and wakes the recovery thread: reading the log page and
 * re-identifying namespaces are synchronous admin commands, which must not
 * run in an admin callback.  The recovery thread (nvme_aen_process) then
 * works under reset_lock, so an event never runs into a reset, removal or
 * attach halfway: it reads the log, applies namespace changes, re-arms one
 * AER when fewer than the target are out, and calls the callback.  A reset
 * or removal ends the AERs with an error and no CQE: they are only
 * uncounted (the next LIVE transition arms them again), so an AER is never
 * armed twice for one completion.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"

#define AST_INC(field) __atomic_add_fetch(&c->ast.field, 1, __ATOMIC_RELAXED)

static unsigned aen_target(const struct nvme_ctrl *c)
{
	unsigned n = (unsigned)c->aerl + 1u;
	return n < NVME_AER_MAX ? n : NVME_AER_MAX;
}

static void aer_done(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct nvme_ctrl *c = arg;
	atomic_fetch_sub_explicit(&c->aers_armed, 1, memory_order_relaxed);
	if (!cqe)
		return; /* ended by a reset, a removal or a stop: armed again at LIVE */
	if (err < 0) {
		/* Invalid Opcode (no events), Limit Exceeded: not armed again */
		if (AST_INC(aer_errors) == 1)
			log_warn("%s: Asynchronous Event Request failed: %s (status 0x%x); "
			         "events are not reported",
			         c->name, nvme_status_str(cqe->status), cqe->status);
		return;
	}
	pthread_mutex_lock(&c->aen_lock);
	bool kept = c->aen_nr < sizeof(c->aen_done) / sizeof(c->aen_done[0]);
	if (kept)
		c->aen_done[c->aen_nr++] = cqe->dw0;
	pthread_mutex_unlock(&c->aen_lock);
	if (!kept)
		log_warn("%s: asynchronous event 0x%06x dropped: too many waiting", c->name, cqe->dw0);
	recov_aen_kick(c);
}

/* Post the AERs missing from the target.  How many is counted once: one
 * that fails while the rest are posted (Invalid Opcode) is not armed again,
 * and a loop on the live count would post it again.  Any thread holding
 * reset_lock (or at bring-up). */
static void aen_arm(struct nvme_ctrl *c)
{
	unsigned target = aen_target(c);
	unsigned armed = atomic_load_explicit(&c->aers_armed, memory_order_relaxed);

	for (unsigned n = armed < target ? target - armed : 0; n > 0; n--) {
		struct nvme_sqe cmd = {.opc = NVME_ADM_ASYNC_EVENT};
		/* counted first: its completion may come before the submit returns */
		atomic_fetch_add_explicit(&c->aers_armed, 1, memory_order_relaxed);
		int rc = nvme_ctrl_admin_submit(c, &cmd, NULL, 0, aer_done, c, 0);
		if (rc < 0) {
			atomic_fetch_sub_explicit(&c->aers_armed, 1, memory_order_relaxed);
			log_warn("%s: cannot post an Asynchronous Event Request: %s", c->name,
			         strerror(-rc));
			break;
		}
	}
}

void nvme_aen_start(struct nvme_ctrl *c)
{
	/* every SMART critical warning the specification had before 1.4 (bit 5,
	 * PMR read-only, is refused by older devices), and the two notices the
	 * engine acts on when the device can send them */
	uint32_t aec = NVME_SMART_CRIT_ALL | (c->oaes & (NVME_AEC_NS_ATTR | NVME_AEC_FW_ACTIVATE));
	struct nvme_sqe cmd = {
	    .opc = NVME_ADM_SET_FEATURES, .cdw10 = NVME_FEAT_ASYNC_EVENT, .cdw11 = aec};
	int rc = nvme_ctrl_admin_timeout(c, &cmd, NULL, 0, NULL, NVME_ADMIN_TIMEOUT_MS);
	if (rc < 0)
		log_warn("%s: Set Features Asynchronous Event Configuration 0x%x failed: %s", c->name,
		         aec, strerror(-rc));
	aen_arm(c);
	/* events that completed before a reset are read now that it is over */
	pthread_mutex_lock(&c->aen_lock);
	bool waiting = c->aen_nr > 0;
	pthread_mutex_unlock(&c->aen_lock);
	if (waiting && c->thr_started)
		recov_aen_kick(c);
}

/* Read log lid into buf (len bytes) on this thread; clears its event. */
static int read_log(struct nvme_ctrl *c, uint8_t lid, void *buf, size_t len)
{
	uint32_t numd = (uint32_t)(len / 4 - 1);
	struct nvme_sqe cmd = {.opc = NVME_ADM_GET_LOG_PAGE,
	                       .nsid = NVME_NSID_ALL,
	                       .cdw10 = NVME_LOG_CDW10(lid, numd),
	                       .cdw11 = NVME_LOG_CDW11(numd)};
	int rc = nvme_ctrl_admin_timeout(c, &cmd, buf, len, NULL, NVME_ADMIN_TIMEOUT_MS);
	if (rc < 0)
		log_warn("%s: reading log page 0x%02x for an event failed: %s", c->name, lid,
		         strerror(-rc));
	return rc;
}

void nvme_aen_note_health(struct nvme_ctrl *c, uint8_t critical_warning)
{
	__atomic_store_n(&c->ast.critical_warning, critical_warning, __ATOMIC_RELAXED);
}

/* One event: its log, what it changes, the callback.  reset_lock held. */
static void aen_one(struct nvme_ctrl *c, uint32_t dw0, uint8_t *page,
                    struct nvme_ns_change *changes)
{
	struct nvme_aen ev = {.kind = NVME_AEN_OTHER,
	                      .type = (uint8_t)NVME_AER_TYPE(dw0),
	                      .info = (uint8_t)NVME_AER_INFO(dw0),
	                      .lid = (uint8_t)NVME_AER_LID(dw0)};
	memset(page, 0, NVME_LOG_MAX_BYTES);
	if (ev.type == NVME_AER_TYPE_ERROR) {
		ev.kind = NVME_AEN_ERROR;
		size_t len = nvme_errlog_bytes(c->info);
		/* the used entries: a non-zero Error Count */
		if (read_log(c, NVME_LOG_ERROR, page, len) == 0)
			for (size_t off = 0; off + 64 <= len; off += 64) {
				uint64_t cnt;
				memcpy(&cnt, page + off, sizeof(cnt));
				ev.nr_errors += cnt != 0;
			}
		log_warn("%s: error event (info 0x%02x): %u error log entries", c->name, ev.info,
		         ev.nr_errors);
	} else if (ev.type == NVME_AER_TYPE_SMART) {
		ev.kind = NVME_AEN_SMART;
		if (read_log(c, NVME_LOG_SMART, page, 512) == 0 &&
		    nvme_health_decode(page, 512, &ev.health) == 0) {
			ev.health_ok = true;
			nvme_aen_note_health(c, ev.health.critical_warning);
		}
		log_warn("%s: SMART/health event (info 0x%02x): critical warning 0x%02x", c->name,
		         ev.info, ev.health_ok ? ev.health.critical_warning : 0);
	} else if (ev.type == NVME_AER_TYPE_NOTICE && ev.info == NVME_AER_NOTICE_NS_CHANGED) {
		ev.kind = NVME_AEN_NS_CHANGED;
		uint32_t *list = (uint32_t *)page;
		unsigned n = 0;
		bool all = true; /* a log that cannot be read: look at every namespace */
		if (read_log(c, NVME_LOG_CHANGED_NS, page, NVME_CHANGED_NS_MAX * 4) == 0 &&
		    list[0] != 0xffffffffu) {
			all = false;
			while (n < NVME_CHANGED_NS_MAX && list[n])
				n++;
		}
		int rc = nvme_ctrl_ns_update(c, list, n, all, changes, NVME_MAX_NAMESPACES,
		                             &ev.nr_changes);
		if (rc < 0)
			log_err("%s: namespaces changed, re-identifying them failed: %s", c->name,
			        strerror(-rc));
		if (ev.nr_changes > NVME_MAX_NAMESPACES)
			ev.nr_changes = NVME_MAX_NAMESPACES;
		ev.changes = changes;
		__atomic_add_fetch(&c->ast.ns_changes, ev.nr_changes, __ATOMIC_RELAXED);
	} else if (ev.type == NVME_AER_TYPE_NOTICE && ev.info == NVME_AER_NOTICE_FW_ACTIVATE) {
		ev.kind = NVME_AEN_FW_ACTIVATE;
		read_log(c, NVME_LOG_FW_SLOT, page, 512);
		log_warn("%s: firmware activation starting", c->name);
	} else {
		/* reading the page it names lets the device report it again */
		if (ev.lid)
			read_log(c, ev.lid, page, 512);
		log_info("%s: asynchronous event type %u info 0x%02x log 0x%02x", c->name, ev.type,
		         ev.info, ev.lid);
	}
	AST_INC(events[ev.kind]);
	if (nvme_ctrl_state(c) == NVME_CTRL_LIVE)
		aen_arm(c);
	pthread_mutex_lock(&c->aen_cb_lock);
	if (c->aen_cb)
		c->aen_cb(c->aen_arg, c, &ev);
	pthread_mutex_unlock(&c->aen_cb_lock);
}

void nvme_aen_process(struct nvme_ctrl *c)
{
	uint8_t *page = malloc(NVME_LOG_MAX_BYTES);
	struct nvme_ns_change *changes = calloc(NVME_MAX_NAMESPACES, sizeof(*changes));
	pthread_mutex_lock(&c->reset_lock);
	for (;;) {
		enum nvme_ctrl_state st = nvme_ctrl_state(c);
		/* a reset asked: the events wait for it (nvme_aen_start kicks
		 * this again at its end) */
		if (st == NVME_CTRL_RESETTING)
			break;
		pthread_mutex_lock(&c->aen_lock);
		uint32_t dw0 = 0;
		bool any = c->aen_nr > 0;
		if (any) {
			dw0 = c->aen_done[0];
			memmove(c->aen_done, c->aen_done + 1, --c->aen_nr * sizeof(c->aen_done[0]));
		}
		pthread_mutex_unlock(&c->aen_lock);
		if (!any)
			break;
		/* removed or failed: nothing can be read */
		if (st != NVME_CTRL_LIVE || !page || !changes) {
			log_info("%s: asynchronous event 0x%06x not processed: %s", c->name, dw0,
			         !page || !changes ? "out of memory" : nvme_ctrl_state_name(st));
			continue;
		}
		aen_one(c, dw0, page, changes);
	}
	pthread_mutex_unlock(&c->reset_lock);
	free(changes);
	free(page);
}

void nvme_ctrl_set_aen_cb(struct nvme_ctrl *c, nvme_aen_cb cb, void *arg)
{
	pthread_mutex_lock(&c->aen_cb_lock);
	c->aen_cb = cb;
	c->aen_arg = arg;
	pthread_mutex_unlock(&c->aen_cb_lock);
}

void nvme_ctrl_aen_stats_get(const struct nvme_ctrl *c, struct nvme_ctrl_aen_stats *out)
{
	out->aers_armed = atomic_load_explicit(&((struct nvme_ctrl *)c)->aers_armed,
	                                       memory_order_relaxed);
	for (unsigned i = 0; i <= NVME_AEN_OTHER; i++)
		out->events[i] = __atomic_load_n(&c->ast.events[i], __ATOMIC_RELAXED);
	out->aer_errors = __atomic_load_n(&c->ast.aer_errors, __ATOMIC_RELAXED);
	out->ns_changes = __atomic_load_n(&c->ast.ns_changes, __ATOMIC_RELAXED);
	out->critical_warning = __atomic_load_n(&c->ast.critical_warning, __ATOMIC_RELAXED);
}

int nvme_ctrl_rescan(struct nvme_ctrl *c, struct nvme_ns_change *out, unsigned max, unsigned *nr)
{
	struct nvme_ns_change *changes = calloc(NVME_MAX_NAMESPACES, sizeof(*changes));
	unsigned n = 0;
	int rc;
	*nr = 0;
	if (!changes)
		return -ENOMEM;
	pthread_mutex_lock(&c->reset_lock);
	enum nvme_ctrl_state st = nvme_ctrl_state(c);
	if (st != NVME_CTRL_LIVE)
		rc = st == NVME_CTRL_RESETTING ? -EAGAIN : -ENODEV;
	else
		rc = nvme_ctrl_ns_update(c, NULL, 0, true, changes, NVME_MAX_NAMESPACES, &n);
	pthread_mutex_unlock(&c->reset_lock);
	if (n > NVME_MAX_NAMESPACES)
		n = NVME_MAX_NAMESPACES;
	for (unsigned i = 0; i < n && i < max && out; i++)
		out[i] = changes[i];
	__atomic_add_fetch(&c->ast.ns_changes, n, __ATOMIC_RELAXED);
	*nr = n;
	free(changes);
	return rc;
}

/* sim_regs.c - the software controller's registers and bring-up (see
 * sim_priv.h): the admin commands (identify, features, log pages, queue
 * creation and deletion, async events, abort), BAR0 and the CC/CSTS state
 * machine, the bus ops, and creating and destroying a controller.
 */
#include "sim_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* every namespace flushed: defined with the registers (shutdown); Set
 * Features (write cache disabled) uses it too */
static void sim_flush_all(struct sim *s);

/* ------------------------------------------------------------ admin commands */

static void sim_pad(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

static uint16_t sim_to_host(struct sim *s, const struct nvme_sqe *c, const void *data, size_t len)
{
	struct sim_copy cp = {.buf = (uint8_t *)data, .to_host = true};

	return sim_xfer(s, c, len, sim_seg_copy, &cp);
}

static uint16_t sim_identify(struct sim *s, const struct nvme_sqe *c)
{
	uint8_t cns = c->cdw10 & 0xff;
	union {
		struct nvme_id_ctrl ctrl;
		struct nvme_id_ns ns;
		uint32_t list[1024];
	} *buf = calloc(1, sizeof(*buf));
	uint16_t st = 0;

	if (!buf)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	switch (cns) {
	case NVME_ID_CNS_CTRL: {
		struct nvme_id_ctrl *id = &buf->ctrl;
		char sn[32];
		id->vid = 0x1de5; /* any: the engine does not depend on it */
		id->ssvid = id->vid;
		snprintf(sn, sizeof(sn), "SIM-%s", s->o.name ? s->o.name : "0");
		sim_pad(id->sn, sizeof(id->sn), sn);
		sim_pad(id->mn, sizeof(id->mn), "nvmefs software controller");
		sim_pad(id->fr, sizeof(id->fr), NVMEFS_VERSION);
		id->rab = 0;
		id->mdts = (uint8_t)s->o.mdts;
		id->cntlid = 1;
		id->ver = s->vs;
		id->ctratt = NVME_CTRATT_ELBAS; /* Identify Namespace NVM gives the guard format */
		id->oacs = 0;
		id->acl = 3;
		id->aerl = SIM_MAX_AER - 1;
		/* Namespace Attribute and Firmware Activation notices */
		id->oaes = NVME_OAES_NS_ATTR | NVME_OAES_FW_ACTIVATE;
		id->lpa = NVME_LPA_CMD_EFFECTS;
		id->elpe = SIM_ERRLOG - 1;
		id->frmw = 1u << 1 | 1u; /* one slot, slot 1 read-only */
		id->wctemp = SIM_WCTEMP_K;
		id->cctemp = 373;
		id->sqes = 0x66;
		id->cqes = 0x44;
		id->maxcmd = 0;
		id->nn = SIM_MAX_NS; /* namespaces may be added up to this (sim_ns_add) */
		id->oncs = NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES;
		/* bits 2:1 = 11b: Flush with NSID FFFFFFFFh applies to all */
		id->vwc = s->o.vwc ? (NVME_VWC_PRESENT | 0x6) : 0;
		id->sgls = 0; /* SGL data transfer not implemented: opts.sgl is accepted but not advertised */
		snprintf(id->subnqn, sizeof(id->subnqn), "nqn.2026-12.io.nvmefs:sim:%s",
			 s->o.name ? s->o.name : "0");
		break;
	}
	case NVME_ID_CNS_NS: {
		if (c->nsid == 0 || c->nsid > SIM_MAX_NS) {
			st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
			break;
		}
		struct sim_ns *ns = &s->ns[c->nsid - 1];
		if (c->nsid > s->o.nr_ns || !ns->active)
			break; /* an inactive NSID: a zero-filled structure */
		struct nvme_id_ns *id = &buf->ns;
		id->nsze = id->ncap = id->nuse = ns->nlba;
		id->nlbaf = 0;
		id->flbas = ns->md_ext ? NVME_FLBAS_EXT : 0;
		id->lbaf[0].lbads = (uint8_t)ns->lba_shift;
		id->lbaf[0].ms = (uint16_t)ns->ms;
		if (ns->ms >= sim_pi_size(&ns->pi)) {
			/* any type, either end: what a Format NVM could choose */
			id->dpc = NVME_DPC_TYPE1 | NVME_DPC_TYPE2 | NVME_DPC_TYPE3 | NVME_DPC_FIRST |
			          NVME_DPC_LAST;
			id->dps = (uint8_t)(ns->pi.type | (ns->pi.first ? NVME_DPS_FIRST : 0));
		}
		id->dlfeat = 0x1; /* deallocated blocks read as zeroes */
		id->eui64[0] = 0x02;
		id->eui64[7] = (uint8_t)c->nsid;
		break;
	}
	case NVME_ID_CNS_NS_CSI: {
		if (c->cdw11 >> NVME_ID_CSI_SHIFT != NVME_CSI_NVM) {
			st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
			break;
		}
		if (c->nsid == 0 || c->nsid > SIM_MAX_NS) {
			st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
			break;
		}
		struct sim_ns *ns = &s->ns[c->nsid - 1];
		if (c->nsid > s->o.nr_ns || !ns->active)
			break;
		/* the guard format of the one LBA format; no storage tag */
		struct nvme_id_ns_nvm *id = (struct nvme_id_ns_nvm *)buf;
		id->elbaf[0] = (uint32_t)(ns->pi.g64 ? NVME_PIF_64 : NVME_PIF_16) << 7;
		break;
	}
	case NVME_ID_CNS_CTRL_NVM: {
		struct nvme_id_ctrl_nvm *id = (struct nvme_id_ctrl_nvm *)buf;
		id->wzsl = (uint8_t)s->o.wzsl;
		id->dmrl = (uint8_t)s->o.dmrl;
		id->dmrsl = s->o.dmrsl;
		break;
	}
	case NVME_ID_CNS_NS_ACTIVE_LIST: {
		unsigned k = 0;
		for (unsigned i = 1; i <= s->o.nr_ns; i++)
			if (i > c->nsid && s->ns[i - 1].active)
				buf->list[k++] = i;
		break;
	}
	default:
		st = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	}
	if (s->o.identify_hook)
		st = s->o.identify_hook(s->o.hook_arg, c, buf, st);
	if (!st)
		st = sim_to_host(s, c, buf, 4096);
	free(buf);
	return st;
}

static uint16_t sim_features(struct sim *s, const struct nvme_sqe *c, bool set, uint32_t *dw0)
{
	uint8_t fid = c->cdw10 & 0xff;

	switch (fid) {
	case NVME_FEAT_NUM_QUEUES:
		if (set) {
			unsigned nsq = (c->cdw11 & 0xffff) + 1u, ncq = (c->cdw11 >> 16) + 1u;
			if ((c->cdw11 & 0xffff) == 0xffff || (c->cdw11 >> 16) == 0xffff)
				return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
			unsigned want = nsq > ncq ? nsq : ncq;
			s->nr_queues_granted = (uint16_t)(want < s->o.max_queues ? want : s->o.max_queues);
		}
		{
			unsigned g = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;
			*dw0 = (g - 1) | ((g - 1) << 16);
		}
		return 0;
	case NVME_FEAT_VOLATILE_WC:
		if (!s->o.vwc)
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
		if (set) {
			/* disabled, a completed write is durable: so is what the cache held */
			if (s->wc_enabled && !(c->cdw11 & 1))
				sim_flush_all(s);
			s->wc_enabled = c->cdw11 & 1;
		}
		*dw0 = s->wc_enabled;
		return 0;
	case NVME_FEAT_IRQ_COALESCE:
		if (set)
			s->irq_coalesce = c->cdw11 & 0xffff;
		*dw0 = s->irq_coalesce;
		return 0;
	case NVME_FEAT_ASYNC_EVENT:
		if (set) {
			pthread_mutex_lock(&s->lock);
			s->aec = c->cdw11 & SIM_AEC_SUPPORTED;
			pthread_mutex_unlock(&s->lock);
		}
		*dw0 = s->aec;
		return 0;
	case NVME_FEAT_ARBITRATION:
	case NVME_FEAT_POWER_MGMT:
		*dw0 = 0;
		return 0;
	default:
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	}
}

static void sim_u128(uint8_t *dst, uint64_t v)
{
	memset(dst, 0, 16);
	memcpy(dst, &v, sizeof(v));
}

/* SMART / Health from the controller's own counters: data units are
 * thousands of 512-byte units rounded up, as the specification counts them;
 * the temperature is 310 K plus 1 K per GiB moved, at most 20 K more, so
 * that it changes with the I/O and stays plausible. */
static void sim_smart(struct sim *s, const struct sim_stats *st, struct nvme_smart_log *sl)
{
	uint64_t moved = (st->bytes_read + st->bytes_written) >> 30;
	uint16_t k = (uint16_t)(310 + (moved < 20 ? moved : 20));

	uint8_t cw = s->crit_warn;

	/* an injected warning shows in the values it is about */
	if (cw & NVME_SMART_CRIT_TEMPERATURE)
		k = (uint16_t)(SIM_WCTEMP_K + 5);
	memset(sl, 0, sizeof(*sl));
	sl->critical_warning = cw;
	sl->temperature[0] = (uint8_t)(k & 0xff);
	sl->temperature[1] = (uint8_t)(k >> 8);
	sl->temp_sensor[0] = k;
	sl->avail_spare = cw & NVME_SMART_CRIT_SPARE ? 5 : 100;
	sl->spare_thresh = 10;
	sl->percent_used = 0;
	sim_u128(sl->data_units_read, (st->bytes_read / 512 + 999) / 1000);
	sim_u128(sl->data_units_written, (st->bytes_written / 512 + 999) / 1000);
	sim_u128(sl->host_reads, st->reads);
	sim_u128(sl->host_writes, st->writes);
	/* every power cut is a power cycle the host did not shut down for */
	sim_u128(sl->power_cycles, 1 + st->powerfails);
	sim_u128(sl->unsafe_shutdowns, st->powerfails);
	sim_u128(sl->power_on_hours, (sim_now_ns() - s->born_ns) / 3600000000000ull);
	sim_u128(sl->media_errors, SIM_GET(s->media_errors));
	sim_u128(sl->num_err_log_entries, s->error_count);
}

/* Commands Supported and Effects (05h): what sim_admin and the I/O path
 * execute; Write, Write Zeroes and Dataset Management change block
 * content. */
static void sim_cmd_effects(uint8_t *buf, size_t len)
{
	static const uint8_t adm[] = {
	    NVME_ADM_DELETE_SQ,    NVME_ADM_CREATE_SQ,    NVME_ADM_GET_LOG_PAGE,
	    NVME_ADM_DELETE_CQ,    NVME_ADM_CREATE_CQ,    NVME_ADM_IDENTIFY,
	    NVME_ADM_ABORT,        NVME_ADM_SET_FEATURES, NVME_ADM_GET_FEATURES,
	    NVME_ADM_ASYNC_EVENT,
	};
	static const struct {
		uint8_t opc;
		uint32_t e;
	} io[] = {
	    {NVME_CMD_FLUSH, NVME_CSE_CSUPP},
	    {NVME_CMD_WRITE, NVME_CSE_CSUPP | NVME_CSE_LBCC},
	    {NVME_CMD_READ, NVME_CSE_CSUPP},
	    {NVME_CMD_WRITE_ZEROES, NVME_CSE_CSUPP | NVME_CSE_LBCC},
	    {NVME_CMD_DSM, NVME_CSE_CSUPP | NVME_CSE_LBCC},
	};
	uint8_t e[NVME_CMD_EFFECTS_LOG_BYTES] = {0};

	for (size_t i = 0; i < sizeof(adm); i++)
		e[4 * adm[i]] = NVME_CSE_CSUPP;
	for (size_t i = 0; i < sizeof(io) / sizeof(io[0]); i++)
		e[1024 + 4 * io[i].opc] = (uint8_t)io[i].e; /* little endian: low byte */
	memcpy(buf, e, len < sizeof(e) ? len : sizeof(e));
}

static uint16_t sim_get_log(struct sim *s, const struct nvme_sqe *c)
{
	uint8_t lid = c->cdw10 & 0xff;
	size_t len = ((((size_t)(c->cdw11 & 0xffff)) << 16 | (c->cdw10 >> 16)) + 1) * 4;
	struct sim_stats st;
	uint8_t *buf;
	uint16_t ret;

	if (len > 1u << 20)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	buf = calloc(1, len < 4096 ? 4096 : len);
	if (!buf)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	if (lid == NVME_LOG_SMART)
		sim_get_stats(s, &st); /* takes s->lock itself */
	pthread_mutex_lock(&s->lock);
	switch (lid) {
	case NVME_LOG_CHANGED_NS:
		break; /* sim_event_log_read fills it */
	case NVME_LOG_ERROR: {
		/* newest first, as the spec orders them */
		unsigned n = s->error_count < SIM_ERRLOG ? (unsigned)s->error_count : SIM_ERRLOG;
		for (unsigned i = 0; i < n && (i + 1) * 64 <= len; i++)
			memcpy(buf + i * 64, &s->errlog[(s->error_count - 1 - i) % SIM_ERRLOG], 64);
		break;
	}
	case NVME_LOG_SMART: {
		struct nvme_smart_log sl;

		sim_smart(s, &st, &sl);
		memcpy(buf, &sl, sizeof(sl) < len ? sizeof(sl) : len);
		break;
	}
	case NVME_LOG_FW_SLOT: {
		struct nvme_fw_slot_log fw = {.afi = 1}; /* slot 1 active, nothing pending */

		sim_pad(fw.frs[0], sizeof(fw.frs[0]), NVMEFS_VERSION);
		memcpy(buf, &fw, sizeof(fw) < len ? sizeof(fw) : len);
		break;
	}
	case NVME_LOG_CMD_EFFECTS:
		sim_cmd_effects(buf, len);
		break;
	default:
		pthread_mutex_unlock(&s->lock);
		free(buf);
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE);
	}
	/* RAE (cdw10 bit 15): the host keeps the event masked */
	sim_event_log_read(s, lid, c->cdw10 & NVME_LOG_RAE, buf, len);
	pthread_mutex_unlock(&s->lock);
	ret = sim_to_host(s, c, buf, len);
	free(buf);
	return ret;
}

static uint16_t sim_create_cq(struct sim *s, const struct nvme_sqe *c)
{
	uint16_t qid = c->cdw10 & 0xffff, qsize = (uint16_t)((c->cdw10 >> 16) + 1);
	uint16_t iv = c->cdw11 >> 16;
	unsigned granted = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;

	if (qid == 0 || qid > granted || s->cq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if ((c->cdw10 >> 16) == 0 || (c->cdw10 >> 16) > NVME_CAP_MQES(s->cap))
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
	if (!(c->cdw11 & NVME_QUEUE_PC)) /* CAP.CQR: contiguous queues required */
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	if ((c->cdw11 & NVME_CQ_IEN) && iv >= s->o.nr_vectors)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_VECTOR);
	if (c->prp1 & (SIM_PAGE - 1))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
	void *ring = sim_xlate(s, c->prp1, (uint64_t)qsize * sizeof(struct nvme_cqe));
	if (!ring)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	struct sim_cq *cq = &s->cq[qid];
	memset(cq, 0, sizeof(*cq));
	cq->ring = ring;
	cq->size = qsize;
	cq->vector = iv;
	cq->ien = c->cdw11 & NVME_CQ_IEN;
	cq->phase = 1;
	sim_db_zero(s, nvme_cq_hdbl_off(qid, NVME_CAP_DSTRD(s->cap)));
	atomic_thread_fence(memory_order_release);
	cq->valid = true;
	return 0;
}

static uint16_t sim_create_sq(struct sim *s, const struct nvme_sqe *c)
{
	uint16_t qid = c->cdw10 & 0xffff, qsize = (uint16_t)((c->cdw10 >> 16) + 1);
	uint16_t cqid = c->cdw11 >> 16;
	unsigned granted = s->nr_queues_granted ? s->nr_queues_granted : s->o.max_queues;

	if (qid == 0 || qid > granted || s->sq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if ((c->cdw10 >> 16) == 0 || (c->cdw10 >> 16) > NVME_CAP_MQES(s->cap))
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
	if (cqid == 0 || cqid >= SIM_NQ || !s->cq[cqid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID);
	if (!(c->cdw11 & NVME_QUEUE_PC))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	if (c->prp1 & (SIM_PAGE - 1))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
	void *ring = sim_xlate(s, c->prp1, (uint64_t)qsize * sizeof(struct nvme_sqe));
	if (!ring)
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	struct sim_sq *sq = &s->sq[qid];
	memset(sq, 0, sizeof(*sq));
	sq->ring = ring;
	sq->size = qsize;
	sq->cqid = cqid;
	s->cq[cqid].nr_sqs++;
	sim_db_zero(s, nvme_sq_tdbl_off(qid, NVME_CAP_DSTRD(s->cap)));
	atomic_thread_fence(memory_order_release);
	sq->valid = true;
	return 0;
}

static uint16_t sim_delete_sq(struct sim *s, uint16_t qid)
{
	if (qid == 0 || qid >= SIM_NQ || !s->sq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	s->sq[qid].valid = false;
	s->cq[s->sq[qid].cqid].nr_sqs--;
	sim_offload_drop(s, qid); /* deleting an SQ aborts its commands */
	sim_add_q(&s->retired, &s->sq[qid].st);
	memset(&s->sq[qid].st, 0, sizeof(s->sq[qid].st));
	return 0;
}

static uint16_t sim_delete_cq(struct sim *s, uint16_t qid)
{
	if (qid == 0 || qid >= SIM_NQ || !s->cq[qid].valid)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
	if (s->cq[qid].nr_sqs)
		return NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_QUEUE_DELETION);
	s->cq[qid].valid = false;
	sim_add_q(&s->retired, &s->cq[qid].st);
	memset(&s->cq[qid].st, 0, sizeof(s->cq[qid].st));
	return 0;
}

/* Report pending events on held Async Event Requests: the oldest event
 * whose log page is not masked first; reporting it masks its page. */
void sim_aer_flush(struct sim *s)
{
	struct sim_sq *sq = &s->sq[0];
	bool posted = false;

	while (s->nr_aer && s->cq[0].valid && sim_running(s) && !sim_cq_full(&s->cq[0], 1)) {
		uint32_t dw0 = 0;
		pthread_mutex_lock(&s->lock);
		for (unsigned i = 0; i < s->nr_ev; i++) {
			uint8_t lid = (uint8_t)(s->ev[i] >> 16);
			if (lid < 32 && (s->ev_masked & (1u << lid)))
				continue;
			dw0 = s->ev[i];
			memmove(&s->ev[i], &s->ev[i + 1], (s->nr_ev - i - 1) * sizeof(s->ev[0]));
			s->nr_ev--;
			if (lid < 32)
				s->ev_masked |= 1u << lid;
			break;
		}
		pthread_mutex_unlock(&s->lock);
		if (!dw0)
			break;
		sim_complete(s, 0, sq, s->aer_cid[--s->nr_aer], 0, dw0, false);
		posted = true;
	}
	if (posted)
		sim_irq(s, &s->cq[0]);
}

/* Returns true when the command completes now (false: held, as AER). */
bool sim_admin(struct sim *s, struct sim_sq *sq, const struct nvme_sqe *c, uint16_t *status,
		      uint32_t *dw0)
{
	SIM_INC(sq->st.admin_cmds, 1);
	*dw0 = 0;
	switch (c->opc) {
	case NVME_ADM_IDENTIFY:
		*status = sim_identify(s, c);
		break;
	case NVME_ADM_SET_FEATURES:
		*status = sim_features(s, c, true, dw0);
		break;
	case NVME_ADM_GET_FEATURES:
		*status = sim_features(s, c, false, dw0);
		break;
	case NVME_ADM_CREATE_CQ:
		*status = sim_create_cq(s, c);
		break;
	case NVME_ADM_CREATE_SQ:
		*status = sim_create_sq(s, c);
		break;
	case NVME_ADM_DELETE_SQ:
		*status = sim_delete_sq(s, c->cdw10 & 0xffff);
		break;
	case NVME_ADM_DELETE_CQ:
		*status = sim_delete_cq(s, c->cdw10 & 0xffff);
		break;
	case NVME_ADM_GET_LOG_PAGE:
		*status = sim_get_log(s, c);
		break;
	case NVME_ADM_ABORT:
		*status = 0;
		*dw0 = sim_abort(s, (uint16_t)(c->cdw10 & 0xffff), (uint16_t)(c->cdw10 >> 16));
		break;
	case NVME_ADM_ASYNC_EVENT:
		if (s->nr_aer >= SIM_MAX_AER) {
			*status = NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_ASYNC_LIMIT);
			break;
		}
		/* the hook sees it before it is held: a status completes it now
		 * (a device answering Invalid Opcode, say) */
		if (s->o.admin_hook && (*status = s->o.admin_hook(s->o.hook_arg, c, 0, dw0)))
			return true;
		s->aer_cid[s->nr_aer++] = c->cid;
		return false;
	default:
		*status = NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
	}
	if (s->o.admin_hook)
		*status = s->o.admin_hook(s->o.hook_arg, c, *status, dw0);
	return true;
}

/* ----------------------------------------------------------------- registers */

static void sim_reset_queues(struct sim *s)
{
	for (unsigned q = 0; q < SIM_NQ; q++) {
		sim_add_q(&s->retired, &s->sq[q].st);
		sim_add_q(&s->retired, &s->cq[q].st);
	}
	memset(s->sq, 0, sizeof(s->sq));
	memset(s->cq, 0, sizeof(s->cq));
	for (uint16_t q = 1; q < SIM_NQ; q++)
		sim_offload_drop(s, q);
	s->nr_aer = 0; /* held AERs end with the queues; events wait for new ones */
	s->ev_masked = 0;
	s->aec = 0;    /* the feature's default: events not enabled */
	s->nr_queues_granted = 0;
	/* a feature without a saved value is back at its default; a cache
	 * enabled again is empty (disabling it made everything durable) */
	s->wc_enabled = s->o.vwc;
	s->nr_deferred = 0; /* callers hold s->lock */
	atomic_store(&s->any_deferred, 0);
	/* a reset ends transient misbehaviour: completions that were to be
	 * lost, doubled or preceded by a bogus one are not carried over */
	atomic_store(&s->f_lose_n, 0);
	atomic_store(&s->f_bogus_n, 0);
	atomic_store(&s->f_dup_n, 0);
	atomic_store(&s->f_hang, false); /* a hung controller comes back from a reset */
	s->nr_stalled = 0; /* stalled commands are dropped, never executed */
	/* doorbell registers back to 0; the host may store into them at the
	 * same time (its reactors' last doorbells): atomics on both sides */
	for (size_t off = NVME_REG_DBS; off + 4 <= s->bus.bar0_len; off += 4)
		__atomic_store_n((uint32_t *)(s->bus.bar0 + off), 0, __ATOMIC_RELAXED);
}

/* CC.EN 0 -> 1: check the admin queue set-up and CC fields. */
static bool sim_enable(struct sim *s)
{
	uint32_t asqs = (s->aqa & 0xfff) + 1, acqs = ((s->aqa >> 16) & 0xfff) + 1;
	uint32_t mps = (s->cc >> NVME_CC_MPS_SHIFT) & 0xf, css = (s->cc >> NVME_CC_CSS_SHIFT) & 0x7;

	if (asqs < 2 || acqs < 2 || (s->asq | s->acq) & (SIM_PAGE - 1) || mps != 0 || css != 0)
		return false;
	void *sq = sim_xlate(s, s->asq, asqs * 64ull), *cq = sim_xlate(s, s->acq, acqs * 16ull);
	if (!sq || !cq)
		return false;
	sim_reset_queues(s);
	s->sq[0] = (struct sim_sq){.valid = true, .size = (uint16_t)asqs, .cqid = 0, .ring = sq};
	s->cq[0] = (struct sim_cq){.valid = true, .size = (uint16_t)acqs, .phase = 1, .ring = cq,
				   .ien = true, .vector = 0, .nr_sqs = 1};
	return true;
}

static void sim_flush_all(struct sim *s)
{
	for (unsigned i = 0; i < s->o.nr_ns; i++)
		sim_ns_flush(&s->ns[i]);
}

static void sim_write_cc(struct sim *s, uint32_t val)
{
	uint32_t old = s->cc;

	if (atomic_load(&s->f_stuck))
		return; /* wedged: neither a disable nor a shutdown is obeyed */

	s->cc = val;
	if ((val & NVME_CC_SHN_MASK) && !(old & NVME_CC_SHN_MASK)) {
		/* orderly shutdown: make everything durable, then report complete */
		s->shutdowns++;
		sim_flush_all(s);
		SIM_SET(s->csts, (s->csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT);
	}
	if ((val & NVME_CC_EN) && !(old & NVME_CC_EN)) {
		if (atomic_load(&s->cfs))
			return;
		if (!sim_enable(s)) {
			SIM_SET(s->csts,
			        s->csts | (NVME_CSTS_CFS)); /* a bad admin queue set-up is fatal */
			return;
		}
		SIM_SET(s->enabled, true);
		s->ready_due_ns = sim_now_ns() + s->o.ready_delay_ms * 1000000ull;
		if (!s->ready_due_ns)
			s->ready_due_ns = 1;
	} else if (!(val & NVME_CC_EN) && (old & NVME_CC_EN)) {
		s->resets++;
		SIM_SET(s->enabled, false);
		s->ready_due_ns = 0;
		sim_reset_queues(s);
		atomic_store(&s->cfs, false);
		SIM_SET(s->csts,
		        s->csts & (~(NVME_CSTS_RDY | NVME_CSTS_CFS | NVME_CSTS_SHST_MASK)));
	}
}

static uint32_t sim_csts(struct sim *s)
{
	if (s->ready_due_ns && sim_now_ns() >= s->ready_due_ns && !atomic_load(&s->f_never_ready)) {
		SIM_SET(s->csts, s->csts | (NVME_CSTS_RDY));
		s->ready_due_ns = 0;
	}
	return s->csts | (atomic_load(&s->cfs) ? NVME_CSTS_CFS : 0);
}

static uint32_t sim_read32(struct nvme_bus *bus, uint32_t off)
{
	struct sim *s = (struct sim *)bus;
	uint32_t v;

	if (atomic_load(&s->gone))
		return 0xffffffffu; /* a PCIe read to a function that is gone */
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case NVME_REG_CAP: v = (uint32_t)s->cap; break;
	case NVME_REG_CAP + 4: v = (uint32_t)(s->cap >> 32); break;
	case NVME_REG_VS: v = s->vs; break;
	case NVME_REG_INTMS:
	case NVME_REG_INTMC: v = s->intms; break;
	case NVME_REG_CC: v = s->cc; break;
	case NVME_REG_CSTS: v = sim_csts(s); break;
	case NVME_REG_AQA: v = s->aqa; break;
	case NVME_REG_ASQ: v = (uint32_t)s->asq; break;
	case NVME_REG_ASQ + 4: v = (uint32_t)(s->asq >> 32); break;
	case NVME_REG_ACQ: v = (uint32_t)s->acq; break;
	case NVME_REG_ACQ + 4: v = (uint32_t)(s->acq >> 32); break;
	default:
		/* doorbells are write-only: reads return 0 */
		v = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return v;
}

static uint64_t sim_read64(struct nvme_bus *bus, uint32_t off)
{
	return sim_read32(bus, off) | (uint64_t)sim_read32(bus, off + 4) << 32;
}

static void sim_write32(struct nvme_bus *bus, uint32_t off, uint32_t val)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return;
	if (off >= NVME_REG_DBS && (uint64_t)off + 4 <= bus->bar0_len) {
		nvme_bus_doorbell(bus, (volatile uint32_t *)(bus->bar0 + off), val);
		return;
	}
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case NVME_REG_INTMS: s->intms |= val; break;
	case NVME_REG_INTMC: s->intms &= ~val; break;
	case NVME_REG_CC: sim_write_cc(s, val); break;
	case NVME_REG_AQA: s->aqa = val & 0x0fff0fff; break;
	case NVME_REG_ASQ: s->asq = (s->asq & ~0xffffffffull) | val; break;
	case NVME_REG_ASQ + 4: s->asq = (s->asq & 0xffffffffull) | (uint64_t)val << 32; break;
	case NVME_REG_ACQ: s->acq = (s->acq & ~0xffffffffull) | val; break;
	case NVME_REG_ACQ + 4: s->acq = (s->acq & 0xffffffffull) | (uint64_t)val << 32; break;
	case NVME_REG_NSSR:
		if (val == 0x4e564d65) { /* "NVMe": subsystem reset */
			SIM_SET(s->enabled, false);
			sim_reset_queues(s);
			s->cc = 0;
			SIM_SET(s->csts, NVME_CSTS_NSSRO);
		}
		break;
	default:
		break; /* read-only or reserved: ignored, as hardware does */
	}
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
}

static void sim_write64(struct nvme_bus *bus, uint32_t off, uint64_t val)
{
	sim_write32(bus, off, (uint32_t)val);
	sim_write32(bus, off + 4, (uint32_t)(val >> 32));
}

static int sim_irq_set(struct nvme_bus *bus, unsigned n, const int *efds)
{
	struct sim *s = (struct sim *)bus;

	if (n > s->o.nr_vectors || n > sizeof(s->efds) / sizeof(s->efds[0]))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (sim_take(&s->f_irq_fail_n)) {
		for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
			SIM_SET(s->efds[i], -1);
		SIM_SET(s->nr_efds, 0);
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
		SIM_SET(s->efds[i], i < n ? efds[i] : -1);
	SIM_SET(s->nr_efds, n);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Registers and queues at their reset values: disabled, no queues, no CFS.
 * Callers hold the queues and s->lock. */
void sim_regs_reset(struct sim *s)
{
	SIM_SET(s->enabled, false);
	s->ready_due_ns = 0;
	sim_reset_queues(s);
	s->cc = 0;
	SIM_SET(s->csts, 0);
	s->aqa = 0;
	s->asq = s->acq = 0;
	atomic_store(&s->cfs, false);
}

/* A function level reset: what CC.EN 1 -> 0 resets, and CC, AQA, ASQ, ACQ. */
static int sim_reset(struct nvme_bus *bus)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return -ENODEV;
	if (atomic_load(&s->f_stuck))
		return -EIO; /* the reset does not take: the function stays as it is */
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	sim_regs_reset(s);
	s->resets++;
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	return 0;
}

static void sim_close(struct nvme_bus *bus)
{
	sim_destroy((struct sim *)bus);
}

static int sim_bus_master(struct nvme_bus *bus, bool on)
{
	struct sim *s = (struct sim *)bus;

	if (atomic_load(&s->gone))
		return -ENODEV;
	/* the commands being executed finish first: off, nothing more moves */
	if (!on)
		sim_qlock(s);
	atomic_store(&s->bme, on);
	if (!on)
		sim_qunlock(s);
	else if (s->o.threaded)
		atomic_store(&s->kick, 1);
	return 0;
}

static const struct nvme_bus_ops sim_ops = {
	.read32 = sim_read32,
	.read64 = sim_read64,
	.write32 = sim_write32,
	.write64 = sim_write64,
	.dma_map = sim_dma_map,
	.dma_unmap = sim_dma_unmap,
	.irq_set = sim_irq_set,
	.reset = sim_reset,
	.bus_master = sim_bus_master,
	.close = sim_close,
};

int sim_vector_efd(struct sim *s, unsigned v)
{
	pthread_mutex_lock(&s->lock);
	int fd = v < SIM_GET(s->nr_efds) ? SIM_GET(s->efds[v]) : -1;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

bool sim_bus_master_on(struct sim *s)
{
	return atomic_load(&s->bme);
}

/* -------------------------------------------------------------- life cycle */

int sim_create(const struct sim_opts *o, struct sim **out)
{
	struct sim *s;
	int rc = -EINVAL;

	if (!o || o->nr_ns < 1 || o->nr_ns > SIM_MAX_NS || o->dstrd > 15 || o->mdts > 15)
		return -EINVAL;
	for (unsigned i = 0; i < o->nr_ns; i++)
		if (!o->ns[i].nlba || (o->ns[i].lba_size != 512 && o->ns[i].lba_size != 4096))
			return -EINVAL;
	/* struct sim_qexec is cache-line aligned */
	s = aligned_alloc(_Alignof(struct sim), (sizeof(*s) + _Alignof(struct sim) - 1) &
	                                            ~(_Alignof(struct sim) - 1));
	if (!s)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	s->o = *o;
	s->born_ns = sim_now_ns();
	snprintf(s->name, sizeof(s->name), "%s", o->name ? o->name : "sim");
	s->o.name = s->name;
	if (!s->o.max_queues || s->o.max_queues > SIM_MAX_QID)
		s->o.max_queues = s->o.max_queues ? SIM_MAX_QID : 64;
	if (!s->o.mqes || s->o.mqes > 4095)
		s->o.mqes = 4095;
	if (!s->o.nr_vectors)
		s->o.nr_vectors = 65;
	if (s->o.nr_vectors > 128)
		s->o.nr_vectors = 128;
	for (unsigned i = 0; i < 128; i++)
		SIM_SET(s->efds[i], -1);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&s->off.lock, NULL);
	pthread_cond_init(&s->off.cond, NULL);
	atomic_store(&s->bme, true); /* as after the host's PCI set-up */
	for (unsigned i = 0; i < SIM_MAX_NS; i++) {
		s->ns[i].fd = -1;
		s->ns[i].md_fd = -1;
		s->ns[i].wc.fd = -1;
		s->ns[i].wc.md_fd = -1;
	}
	s->wc_enabled = s->o.vwc;

	/* CAP: MQES, CQR=1, TO=15 (7.5 s; the engine waits up to that), DSTRD,
	 * CSS = NVM, MPSMIN = MPSMAX = 0 (4 KiB) */
	s->cap = (uint64_t)s->o.mqes | 1ull << 16 | 15ull << 24 | (uint64_t)s->o.dstrd << 32 |
		 (uint64_t)NVME_CAP_CSS_NVM << 37;
	if (o->cap)
		s->cap = o->cap;
	s->vs = o->vs ? o->vs : NVME_VS(1, 4, 0);
	s->dstrd_bytes = 4u << NVME_CAP_DSTRD(s->cap);
	s->next_iova = SIM_IOVA_BASE;
	s->bus.ops = &sim_ops;
	s->bus.db_notify = sim_db_notify;
	s->bus.nr_vectors = s->o.nr_vectors;
	s->bus.numa_node = -1;
	snprintf(s->bus.name, sizeof(s->bus.name), "sim:%s", s->name);
	/* BAR0: the doorbells of every queue, or opts.bar_len of it accessible
	 * and the rest of that span reserved, inaccessible */
	s->bar_span = NVME_REG_DBS + (size_t)2 * SIM_NQ * s->dstrd_bytes;
	s->bar_span = (s->bar_span + SIM_PAGE - 1) & ~(size_t)(SIM_PAGE - 1);
	s->bus.bar0_len = s->bar_span;
	if (o->bar_len)
		s->bus.bar0_len = (o->bar_len + SIM_PAGE - 1) & ~(size_t)(SIM_PAGE - 1);
	if (s->bus.bar0_len > s->bar_span)
		s->bar_span = s->bus.bar0_len;
	void *bar = mmap(NULL, s->bar_span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (bar == MAP_FAILED || mprotect(bar, s->bus.bar0_len, PROT_READ | PROT_WRITE)) {
		rc = -errno;
		if (bar != MAP_FAILED)
			munmap(bar, s->bar_span);
		goto fail;
	}
	s->bus.bar0 = bar; /* zero, as mmap gives it */
	for (unsigned i = 0; i < o->nr_ns; i++) {
		struct sim_ns *ns = &s->ns[i];

		if ((rc = sim_ns_open(ns, &o->ns[i])))
			goto fail;
		ns->active = true;
		/* allocated now: the command path never allocates */
		if (s->o.vwc && ns->backing != SIM_BACKING_NULL &&
		    (rc = sim_wc_init(&ns->wc, ns->nlba, ns->lba_shift, s->o.wc_bytes, ns->mem, ns->fd,
		                      ns->md, ns->ms, ns->md_fd)))
			goto fail;
	}
	if (s->o.threaded) {
		if ((rc = -pthread_create(&s->thread, NULL, sim_thread, s)))
			goto fail;
		s->thread_started = true;
		pthread_setname_np(s->thread, "nvmefs-sim");
	}
	if ((rc = sim_offload_start(s)))
		goto fail;
	*out = s;
	return 0;
fail:
	sim_destroy(s);
	return rc;
}

void sim_destroy(struct sim *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		atomic_store(&s->stop, true);
		pthread_mutex_lock(&s->lock);
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	sim_offload_stop(s);
	for (unsigned i = 0; i < SIM_MAX_NS; i++)
		sim_ns_close(&s->ns[i]);
	free(s->deferred);
	if (s->bus.bar0)
		munmap((void *)s->bus.bar0, s->bar_span);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->off.cond);
	pthread_mutex_destroy(&s->off.lock);
	free(s);
}

struct nvme_bus *sim_bus(struct sim *s)
{
	return &s->bus;
}

struct sim *sim_from_bus(struct nvme_bus *bus)
{
	return bus && bus->ops == &sim_ops ? (struct sim *)bus : NULL;
}


/* stats.c - status codes to errno and text, latency histograms, snapshots. */
#include <errno.h>
#include <string.h>

#include "engine_internal.h"

int nvme_status_errno(uint16_t status)
{
	if (status == 0)
		return 0;
	if (status == NVME_STATUS_TIMEOUT)
		return -ETIMEDOUT;
	unsigned sct = NVME_STATUS_SCT(status), sc = NVME_STATUS_SC(status);
	switch (sct) {
	case NVME_SCT_GENERIC:
		switch (sc) {
		case NVME_SC_SUCCESS:
			return 0;
		case NVME_SC_INVALID_OPCODE:
		case NVME_SC_INVALID_FIELD:
		case NVME_SC_INVALID_NS:
		case NVME_SC_INVALID_PRP_OFFSET:
			return -EINVAL;
		case NVME_SC_LBA_RANGE:
		case NVME_SC_CAP_EXCEEDED:
			return -ENOSPC;
		case NVME_SC_ABORT_REQ:
		case NVME_SC_ABORT_QUEUE:
		case NVME_SC_FUSED_FAIL:
		case NVME_SC_FUSED_MISSING:
			return -ECANCELED;
		default:
			return -EIO;
		}
	case NVME_SCT_CMD_SPECIFIC:
		switch (sc) {
		/* queue creation given fields the device refuses */
		case NVME_SC_CQ_INVALID:
		case NVME_SC_QID_INVALID:
		case NVME_SC_QUEUE_SIZE:
		case NVME_SC_INVALID_VECTOR:
		case NVME_SC_INVALID_LOG_PAGE:
		case NVME_SC_INVALID_QUEUE_DELETION:
			return -EINVAL;
		default:
			return -EIO;
		}
	case NVME_SCT_MEDIA:
		return sc == NVME_SC_ACCESS_DENIED ? -EACCES : -EIO;
	default:
		return -EIO;
	}
}

const char *nvme_status_str(uint16_t status)
{
	if (status == NVME_STATUS_TIMEOUT)
		return "command timed out";
	unsigned sct = NVME_STATUS_SCT(status), sc = NVME_STATUS_SC(status);
	if (sct == NVME_SCT_GENERIC) {
		switch (sc) {
		case NVME_SC_SUCCESS:
			return "success";
		case NVME_SC_INVALID_OPCODE:
			return "invalid opcode";
		case NVME_SC_INVALID_FIELD:
			return "invalid field in command";
		case NVME_SC_CMDID_CONFLICT:
			return "command id conflict";
		case NVME_SC_DATA_XFER_ERROR:
			return "data transfer error";
		case NVME_SC_POWER_LOSS:
			return "aborted due to power loss";
		case NVME_SC_INTERNAL:
			return "internal error";
		case NVME_SC_ABORT_REQ:
			return "aborted by request";
		case NVME_SC_ABORT_QUEUE:
			return "aborted: SQ deleted";
		case NVME_SC_FUSED_FAIL:
			return "aborted: fused command failed";
		case NVME_SC_FUSED_MISSING:
			return "aborted: fused command missing";
		case NVME_SC_INVALID_NS:
			return "invalid namespace or format";
		case NVME_SC_CMD_SEQ_ERROR:
			return "command sequence error";
		case NVME_SC_INVALID_PRP_OFFSET:
			return "invalid PRP offset";
		case NVME_SC_LBA_RANGE:
			return "LBA out of range";
		case NVME_SC_CAP_EXCEEDED:
			return "capacity exceeded";
		case NVME_SC_NS_NOT_READY:
			return "namespace not ready";
		default:
			return "generic error";
		}
	}
	if (sct == NVME_SCT_CMD_SPECIFIC) {
		switch (sc) {
		case NVME_SC_CQ_INVALID:
			return "completion queue invalid";
		case NVME_SC_QID_INVALID:
			return "invalid queue identifier";
		case NVME_SC_QUEUE_SIZE:
			return "invalid queue size";
		case NVME_SC_ABORT_LIMIT:
			return "abort command limit exceeded";
		case NVME_SC_ASYNC_LIMIT:
			return "asynchronous event request limit exceeded";
		case NVME_SC_INVALID_VECTOR:
			return "invalid interrupt vector";
		case NVME_SC_INVALID_LOG_PAGE:
			return "invalid log page";
		case NVME_SC_INVALID_QUEUE_DELETION:
			return "invalid queue deletion";
		case NVME_SC_FEATURE_NOT_SAVEABLE:
			return "feature not saveable";
		case NVME_SC_FEATURE_NOT_CHANGEABLE:
			return "feature not changeable";
		case NVME_SC_INVALID_PI:
			return "invalid protection information";
		default:
			return "command specific error";
		}
	}
	if (sct == NVME_SCT_MEDIA) {
		switch (sc) {
		case NVME_SC_WRITE_FAULT:
			return "write fault";
		case NVME_SC_READ_ERROR:
			return "unrecovered read error";
		case NVME_SC_GUARD_CHECK:
			return "end-to-end guard check error";
		case NVME_SC_APPTAG_CHECK:
			return "end-to-end application tag check error";
		case NVME_SC_REFTAG_CHECK:
			return "end-to-end reference tag check error";
		case NVME_SC_COMPARE_FAILED:
			return "compare failure";
		case NVME_SC_ACCESS_DENIED:
			return "access denied";
		case NVME_SC_UNWRITTEN_BLOCK:
			return "deallocated or unwritten logical block";
		default:
			return "media error";
		}
	}
	if (sct == NVME_SCT_PATH)
		return "path error";
	return "vendor specific error";
}

enum nvme_err_class nvme_status_class(uint16_t status)
{
	if (status == NVME_STATUS_TIMEOUT)
		return NVME_ERRC_TIMEOUT;
	switch (NVME_STATUS_SCT(status)) {
	case NVME_SCT_GENERIC:
		return NVME_ERRC_GENERIC;
	case NVME_SCT_CMD_SPECIFIC:
		return NVME_ERRC_CMD;
	case NVME_SCT_MEDIA:
		if (NVME_STATUS_SC(status) >= NVME_SC_GUARD_CHECK &&
		    NVME_STATUS_SC(status) <= NVME_SC_REFTAG_CHECK)
			return NVME_ERRC_PROTECTION;
		return NVME_ERRC_MEDIA;
	case NVME_SCT_PATH:
		return NVME_ERRC_PATH;
	default:
		return NVME_ERRC_OTHER;
	}
}

/* Log-linear: values below 2^SUB_BITS have a bucket each; above, every power
 * of two is split into 2^SUB_BITS equal buckets (relative error <= 12.5%). */
#define SUB (1u << NVME_LAT_SUB_BITS)

unsigned nvme_lat_bucket(uint64_t ns)
{
	return nvme_lat_bucket_inline(ns);
}

uint64_t nvme_lat_bucket_ns(unsigned bucket)
{
	if (bucket < SUB)
		return bucket;
	unsigned e = bucket >> NVME_LAT_SUB_BITS, sub = bucket & (SUB - 1);
	unsigned shift = e - 1;
	if (shift + NVME_LAT_SUB_BITS + 1 > 64 ||
	    (shift + NVME_LAT_SUB_BITS + 1 == 64 && sub == SUB - 1))
		return UINT64_MAX;
	return ((uint64_t)(SUB + sub + 1) << shift) - 1;
}

uint64_t nvme_lat_percentile(const uint64_t *hist, double p)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++)
		total += hist[i];
	if (total == 0)
		return 0;
	if (p < 0)
		p = 0;
	if (p > 100)
		p = 100;
	uint64_t want = (uint64_t)((p / 100.0) * (double)total + 0.999999);
	if (want == 0)
		want = 1;
	if (want > total)
		want = total;
	uint64_t acc = 0;
	for (unsigned i = 0; i < NVME_LAT_BUCKETS; i++) {
		acc += hist[i];
		if (acc >= want)
			return nvme_lat_bucket_ns(i);
	}
	return nvme_lat_bucket_ns(NVME_LAT_BUCKETS - 1);
}

/* Both stats structures are arrays of uint64_t: copy word by word with
 * relaxed loads (each word tear-free; the whole is consistent enough). */
static void snap(const uint64_t *src, uint64_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
static_assert(sizeof(struct nvme_qpair_stats) % 8 == 0, "qpair stats are u64 words");
static_assert(sizeof(struct nvme_reactor_stats) % 8 == 0, "reactor stats are u64 words");

void nvme_qpair_stats_get(const struct nvme_qpair *qp, struct nvme_qpair_stats *out)
{
	snap((const uint64_t *)&qp->st, (uint64_t *)out, sizeof(*out) / 8);
	const struct nvme_qpair_ctr *c = &qp->ctr;
	out->submitted = __atomic_load_n(&c->submitted, __ATOMIC_RELAXED);
	out->completed = __atomic_load_n(&c->completed, __ATOMIC_RELAXED);
	out->bytes_read = __atomic_load_n(&c->bytes_read, __ATOMIC_RELAXED);
	out->bytes_written = __atomic_load_n(&c->bytes_written, __ATOMIC_RELAXED);
	out->reap_passes = __atomic_load_n(&c->reap_passes, __ATOMIC_RELAXED);
	out->sq_doorbells = __atomic_load_n(&c->sq_doorbells, __ATOMIC_RELAXED);
	out->cq_doorbells = __atomic_load_n(&c->cq_doorbells, __ATOMIC_RELAXED);
	out->idle_polls = __atomic_load_n(&c->idle_polls, __ATOMIC_RELAXED);
}

void nvme_reactor_stats_get(const struct nvme_reactor *r, struct nvme_reactor_stats *out)
{
	snap((const uint64_t *)&r->st, (uint64_t *)out, sizeof(*out) / 8);
}

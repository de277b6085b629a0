/* logpage.c - Get Log Page and the decode of the SMART / Health, Error
 * Information, Firmware Slot and Commands Supported and Effects pages (contract in nvme.h).
 *
 * The layouts are nvme_spec.h's own, not libnvme's (Debian libnvme-dev):
 * three 512/64-byte layouts do not justify a new run-time dependency, and
 * libnvme's structures come with its ioctl transport, which a user-space
 * driver has no use for.  Fields are read byte by byte in little endian,
 * so the decode holds on any host and at any buffer alignment.
 */
#include <errno.h>
#include <string.h>

#include "nvme.h"

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A 128-bit little-endian counter, saturated to UINT64_MAX. */
static uint64_t le128_sat(const uint8_t *p, bool *saturated)
{
	if (le64(p + 8)) {
		*saturated = true;
		return UINT64_MAX;
	}
	return le64(p);
}

int nvme_ctrl_get_log_async(struct nvme_ctrl *c, uint8_t lid, uint32_t nsid, void *buf,
                            size_t len, nvme_admin_cb cb, void *arg)
{
	struct nvme_sqe cmd = {.opc = NVME_ADM_GET_LOG_PAGE, .nsid = nsid};
	uint32_t numd;

	if (!buf || len < 4 || len % 4 || len > NVME_LOG_MAX_BYTES)
		return -EINVAL;
	numd = (uint32_t)(len / 4 - 1);
	cmd.cdw10 = NVME_LOG_CDW10(lid, numd);
	cmd.cdw11 = NVME_LOG_CDW11(numd);
	return nvme_ctrl_admin_async(c, &cmd, buf, len, cb, arg);
}

size_t nvme_errlog_bytes(const struct nvme_ctrl_info *in)
{
	unsigned n = (unsigned)in->elpe + 1; /* uint8_t: at most 256 */

	if (n > NVME_ERRLOG_MAX)
		n = NVME_ERRLOG_MAX;
	return (size_t)n * sizeof(struct nvme_error_log);
}

int nvme_health_decode(const void *buf, size_t len, struct nvme_health *out)
{
	const uint8_t *p = buf;
	bool sat = false;

	if (!buf || len < sizeof(struct nvme_smart_log))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->critical_warning = p[0];
	out->temperature = le16(p + 1);
	out->avail_spare = p[3];
	out->spare_thresh = p[4];
	out->percent_used = p[5];
	out->endu_grp_crit_warn = p[6];
	out->data_units_read = le128_sat(p + 32, &sat);
	out->data_units_written = le128_sat(p + 48, &sat);
	out->host_reads = le128_sat(p + 64, &sat);
	out->host_writes = le128_sat(p + 80, &sat);
	out->ctrl_busy_time = le128_sat(p + 96, &sat);
	out->power_cycles = le128_sat(p + 112, &sat);
	out->power_on_hours = le128_sat(p + 128, &sat);
	out->unsafe_shutdowns = le128_sat(p + 144, &sat);
	out->media_errors = le128_sat(p + 160, &sat);
	out->num_err_log_entries = le128_sat(p + 176, &sat);
	out->warning_temp_time = le32(p + 192);
	out->critical_comp_time = le32(p + 196);
	for (unsigned i = 0; i < 8; i++)
		out->temp_sensor[i] = le16(p + 200 + 2 * i);
	out->saturated = sat;
	return 0;
}

int nvme_errlog_decode(const void *buf, size_t len, struct nvme_errlog_entry *out, unsigned max,
                       unsigned *nr)
{
	const uint8_t *p = buf;
	size_t n = len / sizeof(struct nvme_error_log);
	unsigned k = 0;

	*nr = 0;
	if (!buf && len)
		return -EINVAL;
	for (size_t i = 0; i < n && k < max; i++) {
		const uint8_t *e = p + i * sizeof(struct nvme_error_log);
		struct nvme_errlog_entry *o = &out[k];

		/* an unused entry; a device may leave holes, so go on */
		if (!le64(e))
			continue;
		memset(o, 0, sizeof(*o));
		o->error_count = le64(e);
		o->sqid = le16(e + 8);
		o->cmdid = le16(e + 10);
		o->status = (uint16_t)(le16(e + 12) >> 1); /* bit 0 is the phase tag */
		o->parm_error_location = le16(e + 14);
		o->lba = le64(e + 16);
		o->nsid = le32(e + 24);
		o->vs = e[28];
		o->trtype = e[29];
		o->cs = le64(e + 32);
		o->trtype_spec_info = le16(e + 40);
		k++;
	}
	*nr = k;
	return 0;
}

/* 8 bytes of revision: printable ASCII (others '?', NUL ends it), trimmed */
static void fw_rev(char dst[9], const uint8_t *src)
{
	size_t n = 0;

	for (; n < 8 && src[n]; n++)
		dst[n] = src[n] >= 0x20 && src[n] <= 0x7e ? (char)src[n] : '?';
	while (n && dst[n - 1] == ' ')
		n--;
	dst[n] = '\0';
	size_t lead = 0;
	while (dst[lead] == ' ')
		lead++;
	if (lead)
		memmove(dst, dst + lead, n - lead + 1);
}

int nvme_fw_slots_decode(const void *buf, size_t len, struct nvme_fw_slots *out)
{
	const uint8_t *p = buf;

	if (!buf || len < 64)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->active = p[0] & 0x7;
	out->next = (p[0] >> 4) & 0x7;
	for (unsigned i = 0; i < 7; i++)
		fw_rev(out->frs[i], p + 8 + 8 * i);
	return 0;
}

int nvme_cmd_effects_decode(const void *buf, size_t len, struct nvme_cmd_effects *out)
{
	const uint8_t *p = buf;

	if (!buf || len < NVME_CMD_EFFECTS_LOG_BYTES)
		return -EPROTO;
	/* reserved bits are not the device's to set: dropped, not shown */
	for (unsigned i = 0; i < 256; i++) {
		out->acs[i] = le32(p + 4 * i) & NVME_CSE_DEFINED;
		out->iocs[i] = le32(p + 1024 + 4 * i) & NVME_CSE_DEFINED;
	}
	return 0;
}

/* test_logpage.c - Get Log Page and the decode of the SMART / Health, Error
 * Information and Firmware Slot pages: crafted bytes (hostile lengths,
 * counts, 128-bit counters, strings), the command's NUMDL/NUMDU, and the
 * software controller's answers through the engine.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "nvme.h"
#include "rig.h"
#include "sim.h"

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

START_TEST(t_smart_decode)
{
	uint8_t b[512];
	struct nvme_health h;

	memset(b, 0, sizeof(b));
	b[0] = 0x05;
	put_le(b + 1, 0x013a, 2); /* 314 K, unaligned */
	b[3] = 97;
	b[4] = 10;
	b[5] = 255; /* percentage used may exceed 100 */
	b[6] = 1;
	put_le(b + 32, 123456789, 8);
	put_le(b + 48, 42, 8);
	put_le(b + 64, UINT64_MAX, 8); /* the largest that fits */
	put_le(b + 80, 7, 8);
	put_le(b + 96, 3, 8);
	put_le(b + 112, 9, 8);
	put_le(b + 128, 10000, 8);
	put_le(b + 144, 2, 8);
	put_le(b + 160, 4, 8);
	put_le(b + 176, 5, 8);
	put_le(b + 192, 0x01020304, 4);
	put_le(b + 196, 6, 4);
	put_le(b + 200, 300, 2);
	put_le(b + 214, 350, 2);
	ck_assert_int_eq(nvme_health_decode(b, sizeof(b), &h), 0);
	ck_assert_uint_eq(h.critical_warning, 5);
	ck_assert_uint_eq(h.temperature, 314);
	ck_assert_uint_eq(h.avail_spare, 97);
	ck_assert_uint_eq(h.spare_thresh, 10);
	ck_assert_uint_eq(h.percent_used, 255);
	ck_assert_uint_eq(h.endu_grp_crit_warn, 1);
	ck_assert_uint_eq(h.data_units_read, 123456789);
	ck_assert_uint_eq(h.data_units_written, 42);
	ck_assert_uint_eq(h.host_reads, UINT64_MAX);
	ck_assert_uint_eq(h.host_writes, 7);
	ck_assert_uint_eq(h.ctrl_busy_time, 3);
	ck_assert_uint_eq(h.power_cycles, 9);
	ck_assert_uint_eq(h.power_on_hours, 10000);
	ck_assert_uint_eq(h.unsafe_shutdowns, 2);
	ck_assert_uint_eq(h.media_errors, 4);
	ck_assert_uint_eq(h.num_err_log_entries, 5);
	ck_assert_uint_eq(h.warning_temp_time, 0x01020304);
	ck_assert_uint_eq(h.critical_comp_time, 6);
	ck_assert_uint_eq(h.temp_sensor[0], 300);
	ck_assert_uint_eq(h.temp_sensor[7], 350);
	ck_assert_uint_eq(h.temp_sensor[1], 0);
	ck_assert(!h.saturated);

	/* a counter beyond 64 bits saturates, and says so */
	b[160 + 8] = 1;
	ck_assert_int_eq(nvme_health_decode(b, sizeof(b), &h), 0);
	ck_assert_uint_eq(h.media_errors, UINT64_MAX);
	ck_assert(h.saturated);
	/* all ones everywhere: every counter saturated, nothing overflows */
	memset(b, 0xff, sizeof(b));
	ck_assert_int_eq(nvme_health_decode(b, sizeof(b), &h), 0);
	ck_assert_uint_eq(h.data_units_read, UINT64_MAX);
	ck_assert_uint_eq(h.temperature, 0xffff);
	ck_assert(h.saturated);

	/* short pages are refused, not read past */
	ck_assert_int_eq(nvme_health_decode(b, 511, &h), -EPROTO);
	ck_assert_int_eq(nvme_health_decode(b, 0, &h), -EPROTO);
	ck_assert_int_eq(nvme_health_decode(NULL, 512, &h), -EPROTO);
}
END_TEST

START_TEST(t_errlog_decode)
{
	uint8_t b[4 * 64 + 10];
	struct nvme_errlog_entry e[4];
	unsigned nr = 99;

	memset(b, 0, sizeof(b));
	/* entry 0: used */
	put_le(b + 0, 17, 8);
	put_le(b + 8, 2, 2);
	put_le(b + 10, 0xbeef, 2);
	put_le(b + 12, (0x281u << 1) | 1, 2); /* with the phase tag */
	put_le(b + 14, 0xffff, 2);
	put_le(b + 16, 0x1122334455667788ull, 8);
	put_le(b + 24, 0xfffffffe, 4);
	b[28] = 3;
	b[29] = 1;
	put_le(b + 32, 0xabcdef, 8);
	put_le(b + 40, 0x55, 2);
	/* entry 1: unused (error count 0), entry 2: used, entry 3: used */
	put_le(b + 128, 16, 8);
	put_le(b + 192, 15, 8);
	ck_assert_int_eq(nvme_errlog_decode(b, sizeof(b), e, 4, &nr), 0);
	ck_assert_uint_eq(nr, 3); /* the hole is skipped, the odd 10 bytes ignored */
	ck_assert_uint_eq(e[0].error_count, 17);
	ck_assert_uint_eq(e[0].sqid, 2);
	ck_assert_uint_eq(e[0].cmdid, 0xbeef);
	ck_assert_uint_eq(e[0].status, 0x281);
	ck_assert_uint_eq(e[0].parm_error_location, 0xffff);
	ck_assert_uint_eq(e[0].lba, 0x1122334455667788ull);
	ck_assert_uint_eq(e[0].nsid, 0xfffffffe);
	ck_assert_uint_eq(e[0].vs, 3);
	ck_assert_uint_eq(e[0].trtype, 1);
	ck_assert_uint_eq(e[0].cs, 0xabcdef);
	ck_assert_uint_eq(e[0].trtype_spec_info, 0x55);
	ck_assert_uint_eq(e[1].error_count, 16);
	ck_assert_uint_eq(e[2].error_count, 15);

	/* at most max entries are written, whatever the page holds */
	memset(e, 0x5a, sizeof(e));
	ck_assert_int_eq(nvme_errlog_decode(b, sizeof(b), e, 1, &nr), 0);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(e[1].error_count, 0x5a5a5a5a5a5a5a5aull);
	/* a length shorter than one entry: none */
	ck_assert_int_eq(nvme_errlog_decode(b, 63, e, 4, &nr), 0);
	ck_assert_uint_eq(nr, 0);
	ck_assert_int_eq(nvme_errlog_decode(NULL, 64, e, 4, &nr), -EINVAL);
}
END_TEST

START_TEST(t_errlog_bytes)
{
	struct nvme_ctrl_info in;

	memset(&in, 0, sizeof(in));
	in.elpe = 0;
	ck_assert_uint_eq(nvme_errlog_bytes(&in), 64);
	in.elpe = 15;
	ck_assert_uint_eq(nvme_errlog_bytes(&in), 16 * 64);
	in.elpe = 255; /* the most ELPE can say: 256 entries, the bound */
	ck_assert_uint_eq(nvme_errlog_bytes(&in), NVME_ERRLOG_MAX * 64);
	ck_assert_uint_eq(nvme_errlog_bytes(&in), NVME_LOG_MAX_BYTES);
}
END_TEST

START_TEST(t_fw_decode)
{
	uint8_t b[512];
	struct nvme_fw_slots fw;

	memset(b, 0, sizeof(b));
	b[0] = 0x32; /* active 2, next 3 */
	memcpy(b + 8, "1.0     ", 8);
	memcpy(b + 16, "  2.1b  ", 8);
	memcpy(b + 24, "AB\x01\xff" "CDEF", 8); /* hostile bytes */
	memcpy(b + 56, "XYZXYZXY", 8);         /* slot 7, full width: no NUL in the page */
	ck_assert_int_eq(nvme_fw_slots_decode(b, sizeof(b), &fw), 0);
	ck_assert_uint_eq(fw.active, 2);
	ck_assert_uint_eq(fw.next, 3);
	ck_assert_str_eq(fw.frs[0], "1.0");
	ck_assert_str_eq(fw.frs[1], "2.1b");
	ck_assert_str_eq(fw.frs[2], "AB??CDEF");
	ck_assert_str_eq(fw.frs[3], "");
	ck_assert_str_eq(fw.frs[6], "XYZXYZXY");
	/* reserved bits of AFI do not leak into the slot numbers */
	b[0] = 0xff;
	ck_assert_int_eq(nvme_fw_slots_decode(b, sizeof(b), &fw), 0);
	ck_assert_uint_eq(fw.active, 7);
	ck_assert_uint_eq(fw.next, 7);
	ck_assert_int_eq(nvme_fw_slots_decode(b, 63, &fw), -EPROTO);
}
END_TEST

/* Commands Supported and Effects: both halves at their offsets, reserved
 * bits dropped, a short page refused */
START_TEST(t_effects_decode)
{
	static uint8_t b[NVME_CMD_EFFECTS_LOG_BYTES];
	static struct nvme_cmd_effects ce;

	memset(b, 0, sizeof(b));
	b[4 * 0x06] = 0x01;                            /* Identify: CSUPP */
	b[4 * 0x80] = 0x1f;                            /* Format NVM: all five */
	b[4 * 0x80 + 2] = 0x0a;                        /* CSE 2, USS */
	b[4 * 0xff + 3] = 0xff;                        /* reserved bits only */
	b[1024 + 4 * 0x01] = 0x03;                     /* Write: CSUPP, LBCC */
	b[1024 + 4 * 0x09 + 1] = 0xff;                 /* reserved 15:8 */
	memset(b + 1024 + 4 * 0xfe, 0xff, 4);          /* every bit */
	ck_assert_int_eq(nvme_cmd_effects_decode(b, sizeof(b), &ce), 0);
	ck_assert_uint_eq(ce.acs[0x06], NVME_CSE_CSUPP);
	ck_assert_uint_eq(ce.acs[0x80], 0x1fu | 2u << 16 | NVME_CSE_USS);
	ck_assert_uint_eq(NVME_CSE_CSE(ce.acs[0x80]), 2);
	ck_assert_uint_eq(ce.acs[0xff], 0);
	ck_assert_uint_eq(ce.acs[0x01], 0);
	ck_assert_uint_eq(ce.iocs[0x01], NVME_CSE_CSUPP | NVME_CSE_LBCC);
	ck_assert_uint_eq(ce.iocs[0x09], 0);
	ck_assert_uint_eq(ce.iocs[0xfe], NVME_CSE_DEFINED);
	ck_assert_uint_eq(NVME_CSE_CSE(ce.iocs[0xfe]), 7);
	ck_assert_int_eq(nvme_cmd_effects_decode(b, sizeof(b) - 4, &ce), -EPROTO);
	ck_assert_int_eq(nvme_cmd_effects_decode(NULL, sizeof(b), &ce), -EPROTO);
}
END_TEST

START_TEST(t_cdw)
{
	/* NUMD 0-based dwords: low 16 bits in cdw10 31:16, high in cdw11 15:0 */
	ck_assert_uint_eq(NVME_LOG_CDW10(0x02, 127), 0x007f0002u);
	ck_assert_uint_eq(NVME_LOG_CDW11(127), 0);
	ck_assert_uint_eq(NVME_LOG_CDW10(0x01, 0x12345), 0x23450001u);
	ck_assert_uint_eq(NVME_LOG_CDW11(0x12345), 1);
}
END_TEST

/* ---- through the engine, against the software controller ---- */

struct logwait {
	_Atomic int done;
	int err;
};

static void log_cb(void *arg, int err, const struct nvme_cqe *cqe)
{
	struct logwait *w = arg;

	(void)cqe;
	w->err = err;
	atomic_store(&w->done, 1);
}

static int get_log(struct rig *g, uint8_t lid, void *buf, size_t len)
{
	struct logwait w = {0};
	uint64_t t0 = rig_now_ms();
	int ret = nvme_ctrl_get_log_async(g->c[0], lid, NVME_NSID_ALL, buf, len, log_cb, &w);

	if (ret)
		return ret;
	while (!atomic_load(&w.done)) {
		ck_assert_msg(rig_now_ms() - t0 < 10000, "Get Log Page did not complete");
		rig_sleep_ms(1);
	}
	return w.err;
}

START_TEST(t_sim_pages)
{
	struct rig_opts o = {.start = true};
	struct rig g;
	static uint8_t page[NVME_LOG_MAX_BYTES + 4];
	struct nvme_health h;
	struct nvme_fw_slots fw;
	struct nvme_errlog_entry e[NVME_ERRLOG_MAX];
	unsigned nr;

	setrlimit(RLIMIT_MEMLOCK, &(struct rlimit){RLIM_INFINITY, RLIM_INFINITY});
	ck_assert_int_eq(rig_open(&g, &o), 0);

	/* lengths the engine refuses before the device sees them */
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 0), -EINVAL);
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 510), -EINVAL);
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, NVME_LOG_MAX_BYTES + 4), -EINVAL);
	/* a log the sim does not have: Invalid Log Page, mapped */
	ck_assert_int_lt(get_log(&g, 0x7f, page, 512), 0);

	memset(page, 0xee, sizeof(page));
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 512), 0);
	ck_assert_int_eq(nvme_health_decode(page, 512, &h), 0);
	ck_assert_uint_eq(h.temperature, 310);
	ck_assert_uint_eq(h.avail_spare, 100);
	ck_assert_uint_eq(h.spare_thresh, 10);
	ck_assert_uint_eq(h.data_units_written, 0);
	ck_assert_uint_eq(h.power_cycles, 1);

	/* 1000 blocks of 4 KiB = 8000 units of 512 B: 8 data units */
	for (unsigned i = 0; i < 1000; i += 16) {
		unsigned n = 1000 - i < 16 ? 1000 - i : 16;

		ck_assert_int_eq(rig_io(&g, 0, 0, RIG_WRITE, 1, i, g.buf[0][0], n * 4096, 0), 0);
	}
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 512), 0);
	ck_assert_int_eq(nvme_health_decode(page, 512, &h), 0);
	ck_assert_uint_eq(h.data_units_written, 8);
	ck_assert_uint_eq(h.host_writes, 63);
	ck_assert_uint_eq(h.data_units_read, 0);
	/* a 4-byte read: the engine and the sim keep to it */
	memset(page, 0xee, sizeof(page));
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 4), 0);
	ck_assert_uint_eq(page[1] | page[2] << 8, 310);
	ck_assert_uint_eq(page[4], 0xee);

	/* the error log at the size ELPE gives, with an injected failure */
	sim_fault_fail_next(g.sim[0], 1, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	ck_assert_int_eq(rig_io(&g, 0, 0, RIG_READ, 1, 5, g.buf[0][0], 4096, 0), -EIO);
	ck_assert_int_eq(get_log(&g, NVME_LOG_ERROR, page,
	                         nvme_errlog_bytes(nvme_ctrl_get_info(g.c[0]))), 0);
	ck_assert_int_eq(nvme_errlog_decode(page, nvme_errlog_bytes(nvme_ctrl_get_info(g.c[0])), e,
	                                    NVME_ERRLOG_MAX, &nr), 0);
	/* newest first: the read, then the Get Log Page of log 7fh above */
	ck_assert_uint_eq(nr, 2);
	ck_assert_uint_eq(e[0].error_count, 2);
	ck_assert_uint_eq(e[0].sqid, 1);
	ck_assert_uint_eq(e[0].status & 0x7ff, 0x281);
	ck_assert_uint_eq(e[0].lba, 5);
	ck_assert_uint_eq(e[1].sqid, 0);
	ck_assert_uint_eq(e[1].status & 0x7ff,
	                  NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE));
	ck_assert_int_eq(get_log(&g, NVME_LOG_SMART, page, 512), 0);
	ck_assert_int_eq(nvme_health_decode(page, 512, &h), 0);
	ck_assert_uint_eq(h.media_errors, 1);
	ck_assert_uint_eq(h.num_err_log_entries, 2);

	ck_assert_int_eq(get_log(&g, NVME_LOG_FW_SLOT, page, 512), 0);
	ck_assert_int_eq(nvme_fw_slots_decode(page, 512, &fw), 0);
	ck_assert_uint_eq(fw.active, 1);
	ck_assert_str_eq(fw.frs[0], NVMEFS_VERSION);
	ck_assert_str_eq(fw.frs[1], "");

	/* Commands Supported and Effects, announced by LPA bit 1 */
	ck_assert(nvme_ctrl_get_info(g.c[0])->lpa & NVME_LPA_CMD_EFFECTS);
	{
		static struct nvme_cmd_effects ce;

		ck_assert_int_eq(get_log(&g, NVME_LOG_CMD_EFFECTS, page, NVME_CMD_EFFECTS_LOG_BYTES),
		                 0);
		ck_assert_int_eq(nvme_cmd_effects_decode(page, NVME_CMD_EFFECTS_LOG_BYTES, &ce), 0);
		ck_assert_uint_eq(ce.acs[NVME_ADM_GET_LOG_PAGE], NVME_CSE_CSUPP);
		ck_assert_uint_eq(ce.acs[NVME_ADM_IDENTIFY], NVME_CSE_CSUPP);
		ck_assert_uint_eq(ce.acs[0x80], 0); /* no Format NVM */
		ck_assert_uint_eq(ce.iocs[NVME_CMD_READ], NVME_CSE_CSUPP);
		ck_assert_uint_eq(ce.iocs[NVME_CMD_WRITE], NVME_CSE_CSUPP | NVME_CSE_LBCC);
		ck_assert_uint_eq(ce.iocs[NVME_CMD_DSM], NVME_CSE_CSUPP | NVME_CSE_LBCC);
		ck_assert_uint_eq(ce.iocs[0x05], 0); /* no Compare */
	}
	rig_close(&g);
}
END_TEST

static Suite *logpage_suite(void)
{
	Suite *s = suite_create("logpage");
	TCase *tc = tcase_create("logpage");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_smart_decode);
	tcase_add_test(tc, t_errlog_decode);
	tcase_add_test(tc, t_errlog_bytes);
	tcase_add_test(tc, t_fw_decode);
	tcase_add_test(tc, t_effects_decode);
	tcase_add_test(tc, t_cdw);
	tcase_add_test(tc, t_sim_pages);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(logpage_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

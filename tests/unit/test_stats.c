/* test_stats.c - the Prometheus writer is a pure function of one snapshot
 * (stats.h): a snapshot made by hand, with a controller slot left empty (a
 * daemon keeps room for controllers a reload adds), is written to memory
 * and read back.  Every series of a controller names one that is there;
 * the empty slot has none; the SMART gauges appear only for the controller
 * whose log was read; a queue pair's series carry its labels. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin_priv.h"
#include "daemon/stats.h"

static struct nvme_ctrl_info info_a = {.model = "model a", .serial = "s-a", .firmware = "f1"};
static struct nvme_ctrl_info info_c = {.model = "model c", .serial = "s-c", .firmware = "f2"};

/* slots: "a" (0), empty (1), "c" (2); one reactor with a queue pair on a
 * and on c; one file, of c */
static void make(struct stats_snap *s, struct stats_ctrl *ctrl, struct stats_reactor *r,
		 struct stats_qpair *qp, struct admin_ns *ns)
{
	memset(s, 0, sizeof(*s));
	memset(ctrl, 0, 3 * sizeof(*ctrl));
	memset(r, 0, sizeof(*r));
	memset(qp, 0, 3 * sizeof(*qp));
	s->uptime = 12.5;
	s->start_time = 1700000000;
	s->nr_ctrls = 3;
	s->ctrl = ctrl;
	s->nr_reactors = 1;
	s->reactor = r;
	s->qp = qp;
	ctrl[0] = (struct stats_ctrl){.c = (struct nvme_ctrl *)&info_a, .name = "a",
				      .state = NVME_CTRL_LIVE, .info = &info_a, .sim = true,
				      .nr_qpairs = 1, .health_known = true};
	ctrl[0].health.valid = true;
	ctrl[0].health.smart.temperature = 310;
	ctrl[0].rs.timeouts = 7;
	ctrl[2] = (struct stats_ctrl){.c = (struct nvme_ctrl *)&info_c, .name = "c",
				      .state = NVME_CTRL_REMOVED, .info = &info_c, .nr_qpairs = 1,
				      .health_known = true};
	r->id = 0;
	r->cpu = 3;
	qp[0] = (struct stats_qpair){.qp = (struct nvme_qpair *)&qp[0], .qid = 1, .inflight = 2};
	qp[0].st.submitted = 41;
	qp[2] = (struct stats_qpair){.qp = (struct nvme_qpair *)&qp[2], .qid = 1};
	*ns = (struct admin_ns){.name = "cn1", .ctrl = 2, .nsid = 1, .size = 4096,
				.lba_size = 512};
	s->ns = ns;
	s->nr_ns = 1;
}

static char *write_text(const struct stats_snap *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(admin_prom_write(s, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

static unsigned lines_with(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

START_TEST(t_empty_slot)
{
	struct stats_snap s;
	struct stats_ctrl ctrl[3];
	struct stats_reactor r;
	struct stats_qpair qp[3];
	struct admin_ns ns;
	char *text;

	make(&s, ctrl, &r, qp, &ns);
	text = write_text(&s);
	/* every controller series names a or c; none names the empty slot */
	ck_assert_uint_eq(lines_with(text, "nvmefs_controller_state{controller=\"a\""), 5);
	ck_assert_uint_eq(lines_with(text, "nvmefs_controller_state{controller=\"c\""), 5);
	ck_assert_uint_eq(lines_with(text, "nvmefs_controller_state{"), 10);
	ck_assert_uint_eq(lines_with(text, "controller=\"\""), 0);
	ck_assert_uint_eq(lines_with(text, "(null)"), 0);
	ck_assert_ptr_nonnull(strstr(text, "nvmefs_controller_state{controller=\"c\",state=\"removed\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "nvmefs_controller_timeouts_total{controller=\"a\"} 7\n"));
	ck_assert_uint_eq(lines_with(text, "nvmefs_controller_info{"), 2);
	ck_assert_ptr_nonnull(strstr(text, "transport=\"sim\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "transport=\"pcie\"} 1\n"));
	/* SMART: only a's log was read */
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_controller_temperature_celsius{controller=\"a\"} 36.85\n"));
	ck_assert_uint_eq(lines_with(text, "nvmefs_controller_temperature_celsius{"), 1);
	/* the queue pairs, with their labels */
	ck_assert_ptr_nonnull(strstr(
	    text, "nvmefs_qpair_submitted_total{controller=\"a\",qid=\"1\",reactor=\"0\"} 41\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_qpair_inflight{controller=\"a\",qid=\"1\",reactor=\"0\"} 2\n"));
	ck_assert_uint_eq(lines_with(text, "nvmefs_qpair_inflight{"), 2);
	ck_assert_ptr_nonnull(strstr(text, "nvmefs_reactor_passes_total{reactor=\"0\",cpu=\"3\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "nvmefs_uptime_seconds 12.5\n"));
	/* no front end in the snapshot: no FUSE series; no figures kept: of
	 * the namespace series only the size */
	ck_assert_ptr_null(strstr(text, "nvmefs_fuse_"));
	ck_assert_uint_eq(lines_with(text, "\nnvmefs_namespace_"), 1);
	ck_assert_ptr_nonnull(strstr(
	    text, "\nnvmefs_namespace_size_bytes{namespace=\"cn1\",controller=\"c\"} 4096\n"));
	/* one prefix for the controllers' series */
	ck_assert_ptr_null(strstr(text, "nvmefs_ctrl_"));
	free(text);
}
END_TEST

/* a controller detached on purpose is "detached", never "removed" (whatever
 * the engine says of its device), so that an alert on removed does not
 * fire on maintenance; each controller has exactly one state at 1 */
START_TEST(t_detached_state)
{
	struct stats_snap s;
	struct stats_ctrl ctrl[3];
	struct stats_reactor r;
	struct stats_qpair qp[3];
	struct admin_ns ns;
	char *text;

	make(&s, ctrl, &r, qp, &ns);
	ctrl[2].detached = true; /* the engine: removed */
	text = write_text(&s);
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_controller_state{controller=\"c\",state=\"detached\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_controller_state{controller=\"c\",state=\"removed\"} 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_controller_state{controller=\"a\",state=\"detached\"} 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "nvmefs_controller_state{controller=\"a\",state=\"live\"} 1\n"));
	for (const char *c = "ac"; *c; c++) {
		static const char *const st[] = {"live", "resetting", "removed", "failed", "detached"};
		unsigned on = 0;

		for (unsigned k = 0; k < 5; k++) {
			char line[128];

			snprintf(line, sizeof(line),
			         "nvmefs_controller_state{controller=\"%c\",state=\"%s\"} 1\n", *c,
			         st[k]);
			on += lines_with(text, line);
		}
		ck_assert_uint_eq(on, 1);
	}
	ck_assert_str_eq(stats_ctrl_state_name(&ctrl[2]), "detached");
	ck_assert_str_eq(stats_ctrl_state_name(&ctrl[0]), "live");
	ctrl[2].detached = false;
	ck_assert_str_eq(stats_ctrl_state_name(&ctrl[2]), "removed");
	free(text);
}
END_TEST

/* the same snapshot written twice is the same text: nothing is read but it */
START_TEST(t_pure)
{
	struct stats_snap s;
	struct stats_ctrl ctrl[3];
	struct stats_reactor r;
	struct stats_qpair qp[3];
	struct admin_ns ns;
	struct fusefs_ns_stats nst = {.inflight = 3};
	char *a, *b;

	make(&s, ctrl, &r, qp, &ns);
	s.ns_st = &nst;
	a = write_text(&s);
	b = write_text(&s);
	ck_assert_str_eq(a, b);
	ck_assert_ptr_nonnull(
	    strstr(a, "nvmefs_namespace_inflight{namespace=\"cn1\",controller=\"c\"} 3\n"));
	free(a);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("prom");

	tcase_add_test(tc, t_empty_slot);
	tcase_add_test(tc, t_pure);
	tcase_add_test(tc, t_detached_state);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

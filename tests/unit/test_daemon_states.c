/* test_daemon_states.c - the daemon's two state machines, each edge on its
 * own: a controller slot's (ctrlmgr.h) and the daemon's life cycle
 * (lifecycle.h).  The tables below are the headers' edge lists written out
 * again, independently of the code: every allowed edge is taken by the
 * transition function and every other one refused with the state unchanged. */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/ctrlmgr.h"
#include "daemon/lifecycle.h"

/* ---- the controller slot ---- */

static const char *const cm_names[CM_NR_STATES] = {
	"empty", "opening", "live", "removed", "detaching", "detached", "attaching",
};

/* cm_allowed[from][to], from ctrlmgr.h's edge list */
static const bool cm_allowed[CM_NR_STATES][CM_NR_STATES] = {
	[CM_EMPTY] = {[CM_OPENING] = true},
	[CM_OPENING] = {[CM_LIVE] = true, [CM_EMPTY] = true},
	[CM_LIVE] = {[CM_REMOVED] = true, [CM_DETACHING] = true},
	[CM_REMOVED] = {[CM_DETACHING] = true, [CM_ATTACHING] = true},
	[CM_DETACHING] = {[CM_DETACHED] = true},
	[CM_DETACHED] = {[CM_ATTACHING] = true},
	[CM_ATTACHING] = {[CM_LIVE] = true, [CM_REMOVED] = true, [CM_DETACHED] = true},
};

/* one test per (from, to): _i = from * CM_NR_STATES + to */
START_TEST(t_cm_edge)
{
	enum cm_state from = (enum cm_state)(_i / CM_NR_STATES);
	enum cm_state to = (enum cm_state)(_i % CM_NR_STATES);
	struct cm_ctrl c;
	bool want = cm_allowed[from][to];

	memset(&c, 0, sizeof(c));
	c.name = "nvme0";
	c.state = from;
	ck_assert_msg(cm_edge_allowed(from, to) == want, "%s -> %s: table says %d",
		      cm_state_name(from), cm_state_name(to), !want);
	ck_assert_msg(cm_set_state(&c, to) == want, "%s -> %s %s", cm_state_name(from),
		      cm_state_name(to), want ? "refused" : "taken");
	ck_assert_int_eq(c.state, want ? to : from);
}
END_TEST

START_TEST(t_cm_names)
{
	for (unsigned s = 0; s < CM_NR_STATES; s++)
		ck_assert_str_eq(cm_state_name((enum cm_state)s), cm_names[s]);
	ck_assert_str_eq(cm_state_name(CM_NR_STATES), "?");
	ck_assert(!cm_edge_allowed(CM_NR_STATES, CM_LIVE));
	ck_assert(!cm_edge_allowed(CM_LIVE, CM_NR_STATES));
	/* a planned detach is not a removal */
	ck_assert_str_ne(cm_state_name(CM_DETACHED), cm_state_name(CM_REMOVED));
}
END_TEST

/* ---- the life cycle ---- */

static const char *const lc_names[LC_NR_STATES] = {
	"starting", "adopting", "serving", "restarting", "draining", "stopping",
};

/* lc_allowed[from][to], from lifecycle.h's edge list */
static const bool lc_allowed[LC_NR_STATES][LC_NR_STATES] = {
	[LC_STARTING] = {[LC_ADOPTING] = true, [LC_SERVING] = true, [LC_STOPPING] = true},
	[LC_ADOPTING] = {[LC_SERVING] = true, [LC_STOPPING] = true},
	[LC_SERVING] = {[LC_RESTARTING] = true, [LC_DRAINING] = true},
	[LC_RESTARTING] = {[LC_DRAINING] = true, [LC_STOPPING] = true},
	[LC_DRAINING] = {[LC_STOPPING] = true},
	[LC_STOPPING] = {0},
};

START_TEST(t_lc_edge)
{
	enum lc_state from = (enum lc_state)(_i / LC_NR_STATES);
	enum lc_state to = (enum lc_state)(_i % LC_NR_STATES);
	struct lc lc;
	bool want = lc_allowed[from][to];

	memset(&lc, 0, sizeof(lc));
	lc.state = from;
	ck_assert_msg(lc_edge_allowed(from, to) == want, "%s -> %s: table says %d",
		      lc_state_name(from), lc_state_name(to), !want);
	ck_assert_msg(lc_set_state(&lc, to) == want, "%s -> %s %s", lc_state_name(from),
		      lc_state_name(to), want ? "refused" : "taken");
	ck_assert_int_eq(lc.state, want ? to : from);
}
END_TEST

START_TEST(t_lc_names)
{
	for (unsigned s = 0; s < LC_NR_STATES; s++)
		ck_assert_str_eq(lc_state_name((enum lc_state)s), lc_names[s]);
	ck_assert_str_eq(lc_state_name(LC_NR_STATES), "?");
	ck_assert(!lc_edge_allowed(LC_NR_STATES, LC_SERVING));
	/* a zeroed daemon starts in STARTING */
	ck_assert_int_eq(LC_STARTING, 0);
}
END_TEST

/* the whole life of a restart, then of a stop that wins over one */
START_TEST(t_lc_paths)
{
	struct lc lc = {.state = LC_STARTING};

	ck_assert(lc_set_state(&lc, LC_ADOPTING));
	ck_assert(lc_set_state(&lc, LC_SERVING));
	ck_assert(lc_set_state(&lc, LC_RESTARTING));
	ck_assert(!lc_set_state(&lc, LC_RESTARTING)); /* one restart at a time */
	ck_assert(lc_set_state(&lc, LC_DRAINING));   /* a stop wins */
	ck_assert(!lc_set_state(&lc, LC_RESTARTING)); /* and stays a stop */
	ck_assert(lc_set_state(&lc, LC_STOPPING));
	for (unsigned s = 0; s < LC_NR_STATES; s++)
		ck_assert(!lc_set_state(&lc, (enum lc_state)s));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_states");
	TCase *tc = tcase_create("edges");

	tcase_add_loop_test(tc, t_cm_edge, 0, CM_NR_STATES * CM_NR_STATES);
	tcase_add_test(tc, t_cm_names);
	tcase_add_loop_test(tc, t_lc_edge, 0, LC_NR_STATES * LC_NR_STATES);
	tcase_add_test(tc, t_lc_names);
	tcase_add_test(tc, t_lc_paths);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* test_excl.c - one server per file (excl.h): a second lock of a file is
 * refused and the holder named, this process or another; the lock goes
 * with its open file description, and with the process. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "excl.h"

START_TEST(t_lock)
{
	char path[] = "/tmp/nvmefs-test-excl.XXXXXX", who[256], want[64];
	int a = mkstemp(path), b, p[2];
	pid_t kid;

	ck_assert_int_ge(a, 0);
	b = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(b, 0);
	ck_assert_int_eq(excl_lock(a, who, sizeof(who)), 0);
	/* another open of it, here: refused, "this process" */
	ck_assert_int_eq(excl_lock(b, who, sizeof(who)), -EWOULDBLOCK);
	ck_assert_str_eq(who, "this process");
	close(a);
	ck_assert_int_eq(excl_lock(b, who, sizeof(who)), 0);
	close(b);
	/* another process holds it: named by pid and name */
	ck_assert_int_eq(pipe(p), 0);
	kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		int fd = open(path, O_RDWR);
		char c = excl_lock(fd, who, sizeof(who)) == 0 ? 'y' : 'n';

		prctl(PR_SET_NAME, "excl-holder");
		(void)!write(p[1], &c, 1);
		pause();
		_exit(0);
	}
	{
		char c = 0;

		ck_assert_int_eq(read(p[0], &c, 1), 1);
		ck_assert_int_eq(c, 'y');
	}
	a = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_eq(excl_lock(a, who, sizeof(who)), -EWOULDBLOCK);
	snprintf(want, sizeof(want), "pid %d (excl-holder)", (int)kid);
	ck_assert_str_eq(who, want);
	ck_assert_int_eq(excl_users(path, who, sizeof(who)), 1);
	ck_assert_str_eq(who, want);
	/* the holder dies: the lock with it */
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	ck_assert_int_eq(excl_lock(a, who, sizeof(who)), 0);
	ck_assert_int_eq(excl_users(path, who, sizeof(who)), 0);
	ck_assert_str_eq(who, "");
	close(a);
	close(p[0]);
	close(p[1]);
	unlink(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("excl");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_lock);
	suite_add_tcase(s, tc);

	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

/* test_mount.c - fusefs_prepare_mountpoint against real mounts: a missing
 * mountpoint is created, an empty directory is accepted and one that is not
 * is refused, naming what is in it, a live mount is
 * refused with -EBUSY and named (its source read back through libmount,
 * escapes and all, also for a path with a space, a tab and a backslash), the
 * mount on top is the one named when two are stacked; the directories it
 * makes are 0755 under umask 077 (the unit's UMask=); a symbolic link at the
 * mountpoint or above it, and a parent writable by others, are refused
 * before anything is created there, while a sticky world-writable ancestor
 * (like /tmp) above a private parent is fine.  A name swapped for a
 * symbolic link between the walk's look-up and its mkdirat (the test's own
 * mkdirat below plants the link at that moment) is refused, and the file
 * the link points to keeps its mode: nothing is changed by name.  Needs
 * root (mounts tmpfs); as another user every test fails with that reason.
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse_fs.h"

static char dir[64];
static char mounted[4][192]; /* paths with a mount of ours, for teardown */
static int nr_mounted;

/* The race, made deterministic: this mkdirat takes the place of libc's for
 * the whole program (the daemon's objects call it by name), and when armed
 * for a name it first puts a symbolic link there, as a local user racing
 * the daemon would between its look-up (ENOENT) and its mkdirat, so that
 * the real mkdirat fails with EEXIST. */
static const char *race_name;   /* the last component to race for, or NULL */
static const char *race_target; /* where the planted link points; NULL: plant a
                                 * directory of another user instead */
static int races;               /* links planted */

int mkdirat(int dfd, const char *name, mode_t mode)
{
	static int (*real)(int, const char *, mode_t);

	if (!real)
		real = (int (*)(int, const char *, mode_t))dlsym(RTLD_NEXT, "mkdirat");
	if (race_name && strcmp(name, race_name) == 0) {
		race_name = NULL;
		if (race_target ? symlinkat(race_target, dfd, name) == 0
				: real(dfd, name, 0700) == 0 &&
					  fchownat(dfd, name, 65534, 65534, AT_SYMLINK_NOFOLLOW) == 0)
			races++;
	}
	return real(dfd, name, mode);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_mount.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[256];

	for (int i = 0; i < nr_mounted; i++)
		while (umount2(mounted[i], MNT_DETACH) == 0)
			; /* stacked mounts: every one */
	nr_mounted = 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) < 0)
		perror("system");
}

/* fusefs_prepare_mountpoint(path) with its log lines caught in log[] */
static int prepare(const char *path, char *log, size_t len)
{
	FILE *f = tmpfile();
	int saved = dup(2), ret;
	size_t n;

	ck_assert_ptr_nonnull(f);
	fflush(stderr);
	dup2(fileno(f), 2);
	ret = fusefs_prepare_mountpoint(path);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(log, 1, len - 1, f);
	log[n] = 0;
	fclose(f);
	return ret;
}

static void mount_tmpfs(const char *src, const char *path)
{
	ck_assert_msg(getuid() == 0, "needs root: mounts tmpfs");
	ck_assert_msg(mount(src, path, "tmpfs", 0, "size=64k") == 0, "mount %s: %s", path,
		      strerror(errno));
	if (nr_mounted < 4)
		snprintf(mounted[nr_mounted++], sizeof(mounted[0]), "%s", path);
}

START_TEST(t_create_and_empty)
{
	char path[192], log[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/a/b/mnt", dir);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(prepare(path, log, sizeof(log)), 0);
}
END_TEST

START_TEST(t_created_0755_under_umask)
{
	char path[192], log[4096];
	const char *made[] = {"a", "a/b", "a/b/mnt"};
	struct stat st;
	mode_t old;
	int ret;

	snprintf(path, sizeof(path), "%s/a/b/mnt", dir);
	old = umask(077);
	ret = prepare(path, log, sizeof(log));
	umask(old);
	ck_assert_int_eq(ret, 0);
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, made[i]);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_msg((st.st_mode & 07777) == 0755, "%s: mode %o", made[i], st.st_mode & 07777);
	}
}
END_TEST

START_TEST(t_busy_named)
{
	char path[192], log[4096];

	snprintf(path, sizeof(path), "%s/mnt", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	mount_tmpfs("nvmefs-test-src", path);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EBUSY);
	ck_assert_msg(strstr(log, "nvmefs-test-src (tmpfs) is mounted there"), "log: %s", log);
	ck_assert_int_eq(umount(path), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), 0);
}
END_TEST

START_TEST(t_busy_escaped_path)
{
	char path[192], log[4096];

	/* mountinfo shows these as \040, \011 and \134 */
	snprintf(path, sizeof(path), "%s/a dir\twith\\odd", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	mount_tmpfs("src with space", path);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EBUSY);
	ck_assert_msg(strstr(log, "src with space (tmpfs) is mounted there"), "log: %s", log);
}
END_TEST

START_TEST(t_stacked_top_named)
{
	char path[192], log[4096];

	snprintf(path, sizeof(path), "%s/mnt", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	mount_tmpfs("nvmefs-bottom", path);
	mount_tmpfs("nvmefs-top", path);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EBUSY);
	ck_assert_msg(strstr(log, "nvmefs-top (tmpfs)"), "log: %s", log);
	ck_assert_int_eq(umount(path), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EBUSY);
	ck_assert_msg(strstr(log, "nvmefs-bottom (tmpfs)"), "log: %s", log);
}
END_TEST

START_TEST(t_not_a_directory)
{
	char path[192], log[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ENOTDIR);
}
END_TEST

START_TEST(t_symlink_mountpoint)
{
	char path[192], target[192], log[4096];

	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(path, sizeof(path), "%s/link", dir);
	ck_assert_int_eq(mkdir(target, 0755), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ELOOP);
	ck_assert_msg(strstr(log, "mountpoint refused: it is a symbolic link"), "log: %s", log);
}
END_TEST

START_TEST(t_symlink_parent)
{
	char path[192], real[192], link[192], log[4096];
	struct stat st;

	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(path, sizeof(path), "%s/link/mnt", dir);
	ck_assert_int_eq(mkdir(real, 0755), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ELOOP);
	ck_assert_msg(strstr(log, "/link is a symbolic link"), "log: %s", log);
	snprintf(path, sizeof(path), "%s/real/mnt", dir);
	ck_assert_int_eq(stat(path, &st), -1); /* nothing created behind the link */
}
END_TEST

START_TEST(t_writable_parent)
{
	char path[192], parent[192], log[4096];
	struct stat st;

	snprintf(parent, sizeof(parent), "%s/shared", dir);
	snprintf(path, sizeof(path), "%s/shared/mnt", dir);
	ck_assert_int_eq(mkdir(parent, 0700), 0);
	ck_assert_int_eq(chmod(parent, 01777), 0); /* sticky: still refused as the parent */
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EPERM);
	ck_assert_msg(strstr(log, "/shared is writable by group or others (mode 1777)"), "log: %s",
		      log);
	ck_assert_int_eq(stat(path, &st), -1);
	ck_assert_int_eq(chmod(parent, 0770), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EPERM);
	/* a sticky ancestor above a private parent is fine; a non-sticky one not */
	ck_assert_int_eq(chmod(parent, 01777), 0);
	snprintf(path, sizeof(path), "%s/shared/private/mnt", dir);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), 0);
	ck_assert_int_eq(chmod(parent, 0777), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EPERM);
	ck_assert_msg(strstr(log, "/shared is writable by group or others without the sticky bit"),
		      "log: %s", log);
}
END_TEST

/* path's missing directory "x" sits in a sticky world-writable directory
 * (allowed above the mountpoint's own parent, like /tmp): swapped for a
 * link to a root-owned 0600 file while the walk creates it */
START_TEST(t_race_parent_link)
{
	char sticky[192], secret[192], path[192], log[4096];
	struct stat st;
	int fd;

	snprintf(sticky, sizeof(sticky), "%s/sticky", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(path, sizeof(path), "%s/sticky/x/mnt", dir);
	ck_assert_int_eq(mkdir(sticky, 0700), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	fd = open(secret, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	race_name = "x";
	race_target = secret;
	races = 0;
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ELOOP);
	ck_assert_int_eq(races, 1);
	ck_assert_int_eq(stat(secret, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0600, "the link's target became %o",
		      st.st_mode & 07777);
	ck_assert_msg(strstr(log, "/sticky/x is a symbolic link"), "log: %s", log);
}
END_TEST

/* the same at the mountpoint itself (its parent is root's alone, so only
 * root could race there; still nothing is changed through a link) */
START_TEST(t_race_mountpoint_link)
{
	char parent[192], secret[192], path[192], log[4096];
	struct stat st;
	int fd;

	snprintf(parent, sizeof(parent), "%s/p", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(path, sizeof(path), "%s/p/mnt", dir);
	ck_assert_int_eq(mkdir(parent, 0755), 0);
	fd = open(secret, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	race_name = "mnt";
	race_target = secret;
	races = 0;
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ELOOP);
	ck_assert_int_eq(races, 1);
	ck_assert_int_eq(stat(secret, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0600, "the link's target became %o",
		      st.st_mode & 07777);
	ck_assert_msg(strstr(log, "is a symbolic link"), "log: %s", log);
}
END_TEST

/* a directory of another user made at that moment is not taken, and its
 * mode stays as its owner made it */
START_TEST(t_race_foreign_dir)
{
	char sticky[192], x[192], path[192], log[4096];
	struct stat st;

	snprintf(sticky, sizeof(sticky), "%s/sticky", dir);
	snprintf(x, sizeof(x), "%s/sticky/x", dir);
	snprintf(path, sizeof(path), "%s/sticky/x/mnt", dir);
	ck_assert_int_eq(mkdir(sticky, 0700), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	race_name = "x";
	race_target = NULL;
	races = 0;
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -EPERM);
	ck_assert_int_eq(races, 1);
	ck_assert_msg(strstr(log, "/sticky/x is owned by uid 65534, not root"), "log: %s", log);
	ck_assert_int_eq(lstat(x, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0700, "mode %o", st.st_mode & 07777);
	ck_assert_int_eq(lstat(path, &st), -1);
}
END_TEST

/* a directory with something in it is refused, naming what is there,
 * until it is empty again */
START_TEST(t_not_empty)
{
	char path[192], f[192], log[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/mnt", dir);
	snprintf(f, sizeof(f), "%s/mnt/old-data", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	fd = open(f, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ENOTEMPTY);
	ck_assert_msg(strstr(log, "mountpoint is not empty (1 entry: 'old-data')"), "log: %s", log);
	ck_assert_int_eq(unlink(f), 0);
	snprintf(f, sizeof(f), "%s/mnt/.hidden", dir);
	ck_assert_int_eq(mkdir(f, 0700), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), -ENOTEMPTY);
	ck_assert_int_eq(rmdir(f), 0);
	ck_assert_int_eq(prepare(path, log, sizeof(log)), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mount");
	TCase *tc = tcase_create("mount");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, t_create_and_empty);
	tcase_add_test(tc, t_created_0755_under_umask);
	tcase_add_test(tc, t_busy_named);
	tcase_add_test(tc, t_busy_escaped_path);
	tcase_add_test(tc, t_stacked_top_named);
	tcase_add_test(tc, t_not_a_directory);
	tcase_add_test(tc, t_symlink_mountpoint);
	tcase_add_test(tc, t_symlink_parent);
	tcase_add_test(tc, t_writable_parent);
	tcase_add_test(tc, t_race_parent_link);
	tcase_add_test(tc, t_race_mountpoint_link);
	tcase_add_test(tc, t_race_foreign_dir);
	tcase_add_test(tc, t_not_empty);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* test_upgrade.c - the decision nvmefsd --check-adopt makes before a
 * restart (fstate_adoptable, the digest over a namespace table, the
 * --ns-table text) and how the running daemon reads the child's answer
 * (upg_check_*: drained whatever it prints, bounded, killed past the bound,
 * its reasons shown). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/fdstore.c"
#include "daemon/upgrade.c"
#include "fstate.h"
#include "fuse_fs.h"
#include "fwire.h"

static const struct fusefs_ns_desc NS[] = {
    {.name = "nvme0n1", .ctrl = 0, .nsid = 1, .size = 64ull << 20, .lba_size = 512},
    {.name = "nvme0n2", .ctrl = 0, .nsid = 2, .size = 32ull << 20, .lba_size = 4096},
};

static struct fusefs_opts opts(const char *mnt)
{
	return (struct fusefs_opts){.mountpoint = mnt, .file_mode = 0600, .uid = 0, .gid = 0};
}

static uint64_t digest(const struct fusefs_opts *o, const struct fusefs_ns_desc *ns, unsigned nr)
{
	uint64_t h;

	fusefs_digest_table(o, ns, nr, &h);
	return h;
}

static struct fstate record(const char *mnt, uint64_t dig)
{
	struct fstate s;

	memset(&s, 0, sizeof(s));
	s.init.major = FW_PROTO_MAJOR;
	s.init.minor = FW_PROTO_MINOR_RESEND;
	s.init.max_write = FUSEFS_MAX_IO;
	s.transport = FUSEFS_TRANSPORT_CLASSIC;
	s.conn = 42;
	s.digest = dig;
	snprintf(s.mountpoint, sizeof(s.mountpoint), "%s", mnt);
	return s;
}

/* adoptable as recorded; another mountpoint, another digest, io_uring
 * each refused with its reason */
START_TEST(t_adoptable)
{
	struct fusefs_opts o = opts("/run/nvmefs");
	uint64_t d = digest(&o, NS, 2);
	struct fstate s = record("/run/nvmefs", d);
	char why[512] = "";

	ck_assert_int_eq(fstate_adoptable(&s, "/run/nvmefs", d, why, sizeof(why)), 0);
	ck_assert_int_eq(fstate_adoptable(&s, "/mnt/other", d, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "mounted at /run/nvmefs, the config says /mnt/other"));
	ck_assert_int_eq(fstate_adoptable(&s, "/run/nvmefs", d + 1, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "config digest"));
	s.transport = FUSEFS_TRANSPORT_URING;
	ck_assert_int_eq(fstate_adoptable(&s, "/run/nvmefs", d, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "io_uring"));
}
END_TEST

/* the digest moves with each thing it covers */
START_TEST(t_digest_table)
{
	struct fusefs_opts o = opts("/run/nvmefs"), o2;
	struct fusefs_ns_desc ns[2] = {NS[0], NS[1]};
	uint64_t d = digest(&o, NS, 2);

	ck_assert_uint_eq(digest(&o, NS, 2), d);
	o2 = opts("/run/nvmefs2");
	ck_assert_uint_ne(digest(&o2, NS, 2), d);
	o2 = o;
	o2.file_mode = 0660;
	ck_assert_uint_ne(digest(&o2, NS, 2), d);
	o2 = o;
	o2.allow_other = true;
	ck_assert_uint_ne(digest(&o2, NS, 2), d);
	ck_assert_uint_ne(digest(&o, NS, 1), d);
	ns[1].size += 4096;
	ck_assert_uint_ne(digest(&o, ns, 2), d);
	ns[1] = NS[1];
	ns[1].lba_size = 512;
	ck_assert_uint_ne(digest(&o, ns, 2), d);
	ns[1] = NS[1];
	ns[1].name = "nvme1n2";
	ck_assert_uint_ne(digest(&o, ns, 2), d);
}
END_TEST

/* --ns-table: formatted, parsed back to the same digest; bad text refused */
START_TEST(t_ns_table)
{
	struct fusefs_opts o = opts("/run/nvmefs");
	struct fusefs_ns_desc *ns;
	unsigned nr;
	char buf[256], small[8], *store;

	ck_assert_int_eq(upg_ns_table_format(NS, 2, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "nvme0n1/67108864/512,nvme0n2/33554432/4096");
	ck_assert_int_eq(upg_ns_table_format(NS, 2, small, sizeof(small)), -ENOSPC);
	ck_assert_int_eq(ns_table_parse(buf, &ns, &nr, &store), 0);
	ck_assert_uint_eq(nr, 2);
	ck_assert_uint_eq(digest(&o, ns, nr), digest(&o, NS, 2));
	free(ns);
	free(store);
	ck_assert_int_eq(ns_table_parse("nvme0n1/12", &ns, &nr, &store), -EINVAL);
	ck_assert_int_eq(ns_table_parse("nvme0n1/x/512", &ns, &nr, &store), -EINVAL);
	ck_assert_int_eq(ns_table_parse("/1/512", &ns, &nr, &store), -EINVAL);
}
END_TEST

static char dir[] = "/tmp/nvmefs-test-upgrade.XXXXXX";

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static int record_fd(const char *mnt, uint64_t dig)
{
	struct fstate s = record(mnt, dig);
	char buf[8192];
	int fd;

	ck_assert_uint_le(fstate_size(), sizeof(buf));
	ck_assert_int_eq(fstate_encode(&s, buf, fstate_size()), 0);
	ck_assert_int_eq(fdstore_memfd(buf, fstate_size(), &fd), 0);
	return fd;
}

/* the child's whole decision: config loaded with its code, the digest over
 * the table, the record read from the fd */
START_TEST(t_check_adopt_main)
{
	char conf[256], table[256], mnt[256];
	struct fusefs_opts o;
	int fd, out = dup(1), null = open("/dev/null", O_WRONLY);

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/n.conf", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	{
		char text[512];

		snprintf(text, sizeof(text),
			 "[daemon]\nmountpoint = %s\n[controller nvme0]\ndevice = sim\n"
			 "backing = null\n",
			 mnt);
		write_file(conf, text, 0600);
	}
	ck_assert_int_eq(upg_ns_table_format(NS, 2, table, sizeof(table)), 0);
	struct cfg *cfg;
	ck_assert_int_eq(cfg_load(conf, &cfg, stderr), 0);
	o = (struct fusefs_opts){.mountpoint = cfg->daemon.mountpoint,
				 .file_mode = cfg->daemon.file_mode,
				 .uid = cfg->daemon.uid,
				 .gid = cfg->daemon.gid,
				 .allow_other = cfg->daemon.allow_other};
	uint64_t d = digest(&o, NS, 2);
	cfg_free(cfg);

	dup2(null, 1); /* the answers go to stdout */
	fd = record_fd(mnt, d);
	ck_assert_int_eq(upg_check_adopt_main(conf, fd, table), 0);
	/* another namespace size: another digest */
	ck_assert_int_eq(upg_check_adopt_main(conf, fd, "nvme0n1/4096/512"), 1);
	close(fd);
	fd = record_fd("/elsewhere", d);
	ck_assert_int_eq(upg_check_adopt_main(conf, fd, table), 1);
	close(fd);
	/* the same config but RAM namespaces: their bytes die with the image */
	{
		char text[512];

		snprintf(text, sizeof(text),
			 "[daemon]\nmountpoint = %s\n[controller nvme0]\ndevice = sim\n"
			 "backing = ram\n",
			 mnt);
		write_file(conf, text, 0600);
	}
	fd = record_fd(mnt, d);
	ck_assert_int_eq(upg_check_adopt_main(conf, fd, table), 1);
	close(fd);
	ck_assert_int_eq(upg_check_adopt_main(conf, -1, table), 2);
	ck_assert_int_eq(upg_check_adopt_main("/nonexistent.conf", -1, table), 2);
	dup2(out, 1);
	close(out);
	close(null);
	unlink(conf);
	rmdir(dir);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The daemon's loop in small (lifecycle.c): wait for output, drain it, then
 * poll for the exit; past bound seconds the verdict as timed out. */
static int precheck_within(double bound, const char *bin, const char *config, int state_fd,
			   const struct fusefs_ns_desc *ns, unsigned nr, char *why, size_t len)
{
	struct upg_check *c;
	double t0 = now_s();
	bool end = false;
	int rc = upg_check_start(bin, config, state_fd, ns, nr, &c, why, len);

	if (rc)
		return rc;
	while (now_s() - t0 < bound) {
		if (!end) {
			struct pollfd p = {.fd = upg_check_fd(c), .events = POLLIN};

			poll(&p, 1, 10);
			end = upg_check_read(c) != 0;
		} else if (upg_check_exited(c)) {
			return upg_check_end(c, false, why, len);
		} else {
			usleep(10000);
		}
	}
	return upg_check_end(c, true, why, len);
}

/* a child that ends: a bound only a hang reaches */
static int upg_precheck(const char *bin, const char *config, int state_fd,
			const struct fusefs_ns_desc *ns, unsigned nr, char *why, size_t len)
{
	return precheck_within(60, bin, config, state_fd, ns, nr, why, len);
}

/* how the daemon reads the child: exit 0 adopts; otherwise its last line
 * is the reason; a binary that cannot run or does not know the option is
 * said so */
START_TEST(t_precheck)
{
	char bin[256], args[256], why[512];
	int fd = record_fd("/run/nvmefs", 1);
	char d2[] = "/tmp/nvmefs-test-upgrade.XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(d2));
	snprintf(bin, sizeof(bin), "%s/nvmefsd", d2);
	snprintf(args, sizeof(args), "%s/args", d2);
	{
		char text[512];

		/* it gets the options and can read the record on the fd it is named */
		snprintf(text, sizeof(text),
			 "#!/bin/sh\necho \"$@\" > %s\nfd=$5\n"
			 "head -c 8 /proc/self/fd/$fd | grep -q NVMEFSFS || { echo no record; exit 1; }\n"
			 "echo ok\n",
			 args);
		write_file(bin, text, 0700);
	}
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), 0);
	{
		char got[512] = "", want[512];
		FILE *f = fopen(args, "r");

		ck_assert_ptr_nonnull(f);
		ck_assert_ptr_nonnull(fgets(got, sizeof(got), f));
		fclose(f);
		snprintf(want, sizeof(want),
			 "--check-adopt -c /etc/x.conf --state-fd %d --ns-table "
			 "nvme0n1/67108864/512,nvme0n2/33554432/4096\n",
			 fd);
		ck_assert_str_eq(got, want);
	}
	write_file(bin, "#!/bin/sh\necho loading\necho it is mounted at /a, the config says /b\n"
			"exit 1\n", 0700);
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "would not adopt the connection: it is mounted at /a, "
					  "the config says /b"));
	write_file(bin, "#!/bin/sh\necho usage: nvmefsd >&2\nexit 2\n", 0700);
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(why, "does not know --check-adopt"));
	unlink(bin);
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "No such file"));
	unlink(args);
	rmdir(d2);
	close(fd);
}
END_TEST

/* a child that prints more than a pipe holds (a config with 3000 bad keys)
 * is drained, not waited on: the verdict comes with its last line, the
 * first lines before it and how many more; one that never ends, or ends
 * its output but not itself, is killed at the bound; one killed by a
 * signal is refused saying so */
START_TEST(t_precheck_bounded)
{
	char bin[256], why[4096];
	int fd = record_fd("/run/nvmefs", 1);
	char d2[] = "/tmp/nvmefs-test-upgrade.XXXXXX";
	double t0;

	ck_assert_ptr_nonnull(mkdtemp(d2));
	snprintf(bin, sizeof(bin), "%s/nvmefsd", d2);
	/* 3000 lines of 80 bytes on stderr (240 KB: a pipe holds 64 KiB), then
	 * the verdict on stdout */
	write_file(bin, "#!/bin/sh\nseq 3000 | sed 's/.*/x.conf:&: key& = 1: unknown key in "
			"[daemon]; the keys are listed in nvmefs.conf(5)/' >&2\n"
			"echo the config x.conf does not load\nexit 1\n",
		   0700);
	/* (the old reader took 1023 bytes, then waited for a child blocked
	 * writing: this never ended) */
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -EPROTO);
	ck_assert_msg(strstr(why, "would not adopt the connection: the config x.conf does not load\n"
				  "  x.conf:1: key1 = 1: unknown key"),
		      "why: %s", why);
	ck_assert_msg(strstr(why, "\n  x.conf:5: key5 = 1"), "why: %s", why);
	ck_assert_ptr_null(strstr(why, "x.conf:6:"));
	ck_assert_msg(strstr(why, "\n  (and 2995 more lines)"), "why: %s", why);
	/* the same without a newline at the end */
	write_file(bin, "#!/bin/sh\necho one >&2\nprintf 'no newline'\nexit 1\n", 0700);
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -EPROTO);
	ck_assert_msg(strstr(why, "would not adopt the connection: no newline\n  one") &&
			      !strstr(why, "more line"),
		      "why: %s", why);
	/* says nothing, never ends: killed at the bound */
	write_file(bin, "#!/bin/sh\necho starting\nexec sleep 100\n", 0700);
	t0 = now_s();
	ck_assert_int_eq(precheck_within(1, bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)),
			 -ETIMEDOUT);
	ck_assert_msg(strstr(why, "did not end within") && strstr(why, "killed") &&
			      strstr(why, "starting"),
		      "why: %s", why);
	/* killed and reaped within UPG_REAP_MAX_MS: no wait for its 100 s */
	ck_assert(now_s() - t0 < 30);
	/* its output ends, it does not: killed at the bound too */
	write_file(bin, "#!/bin/sh\necho closing\nexec sleep 100 > /dev/null 2>&1\n", 0700);
	ck_assert_int_eq(precheck_within(1, bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)),
			 -ETIMEDOUT);
	ck_assert_msg(strstr(why, "closing"), "why: %s", why);
	/* killed by a signal */
	write_file(bin, "#!/bin/sh\necho going\nkill -SEGV $$\n", 0700);
	ck_assert_int_eq(upg_precheck(bin, "/etc/x.conf", fd, NS, 2, why, sizeof(why)), -EPROTO);
	ck_assert_msg(strstr(why, "killed by signal 11") && strstr(why, "going"), "why: %s", why);
	unlink(bin);
	rmdir(d2);
	close(fd);
}
END_TEST

/* the excerpt: at most max lines, each indented, then how many more */
START_TEST(t_excerpt)
{
	char out[256] = "head:";

	upg_excerpt(out, sizeof(out), "a\nb\n\nc\nd\n", 4, 2);
	ck_assert_str_eq(out, "head:\n  a\n  b\n  (and 2 more lines)");
	out[0] = '\0';
	upg_excerpt(out, sizeof(out), "a\nb", 2, 5);
	ck_assert_str_eq(out, "\n  a\n  b");
	out[0] = '\0';
	upg_excerpt(out, sizeof(out), "", 7, 5);
	ck_assert_str_eq(out, "\n  (and 7 more lines)");
	/* never past len */
	memset(out, 0, sizeof(out));
	upg_excerpt(out, 12, "abcdefghijklmnop\nq\n", 40, 5);
	ck_assert_uint_eq(strlen(out), 11);
}
END_TEST

/* the binary to re-execute is the path the kernel ran, whatever argv[0] or
 * PATH say (the old way took the first "nvmefsd" on PATH: a relative entry,
 * a directory of that name, or a file another user planted) */
START_TEST(t_resolve_binary)
{
	char out[4096], why[512], want[4096];

	setenv("PATH", ".:relative/bin:/tmp", 1);
	ck_assert_int_eq(upg_resolve_binary(out, sizeof(out), why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(realpath("/proc/self/exe", want));
	ck_assert_str_eq(out, want);
	ck_assert(out[0] == '/');
	ck_assert_int_eq(upg_resolve_binary(out, 4, why, sizeof(why)), -ENAMETOOLONG);
}
END_TEST

/* whether an upgrade installed another file where this process's image
 * was: the image itself is not replaced, a copy renamed over a path is, a
 * missing file is, an empty path (none resolved) is not */
START_TEST(t_binary_replaced)
{
	char d[4200], p[4300], q[4300], self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	ck_assert_int_gt(n, 0);
	self[n] = '\0';
	ck_assert(!upg_binary_replaced(self));
	ck_assert(!upg_binary_replaced(""));
	/* beside the test's own binary: a hard link needs the same file system */
	snprintf(d, sizeof(d), "%.*s/repl.XXXXXX", (int)(strrchr(self, '/') - self), self);
	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(p, sizeof(p), "%s/nvmefsd", d);
	ck_assert(upg_binary_replaced(p)); /* missing */
	ck_assert_int_eq(link(self, p), 0); /* the same inode: not replaced */
	ck_assert(!upg_binary_replaced(p));
	snprintf(q, sizeof(q), "%s/nvmefsd.new", d);
	write_file(q, "#!/bin/sh\nexit 0\n", 0755);
	ck_assert_int_eq(rename(q, p), 0); /* a package's way */
	ck_assert(upg_binary_replaced(p));
	unlink(p);
	rmdir(d);
}
END_TEST

/* what may be run as root for a restart: a regular executable file of
 * root's, writable by root only, in directories nobody else can change */
START_TEST(t_binary_check)
{
	char d[] = "/tmp/nvmefs-test-bin.XXXXXX", p[256], q[256], why[512];

	if (geteuid() != 0)
		return; /* ownership by another uid needs root */
	ck_assert_ptr_nonnull(mkdtemp(d));
	ck_assert_int_eq(chmod(d, 0755), 0);
	snprintf(p, sizeof(p), "%s/nvmefsd", d);
	write_file(p, "#!/bin/sh\nexit 0\n", 0755);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), 0);
	/* writable by others, not executable, another owner */
	ck_assert_int_eq(chmod(p, 0757), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EPERM);
	ck_assert_msg(strstr(why, "writable by group or others (mode 0757)"), "%s", why);
	ck_assert_int_eq(chmod(p, 0644), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EACCES);
	ck_assert_int_eq(chmod(p, 0755), 0);
	ck_assert_int_eq(chown(p, 65534, 65534), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EPERM);
	ck_assert_msg(strstr(why, "owned by uid 65534"), "%s", why);
	ck_assert_int_eq(chown(p, 0, 0), 0);
	/* its directory writable by others: sticky or not */
	ck_assert_int_eq(chmod(d, 0777), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EPERM);
	ck_assert_int_eq(chmod(d, 01777), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EPERM);
	ck_assert_msg(strstr(why, "writable by group or others"), "%s", why);
	ck_assert_int_eq(chmod(d, 0755), 0);
	/* a directory of that name, a link, a missing file, a relative path */
	unlink(p);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -EISDIR);
	rmdir(p);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -ENOENT);
	ck_assert_int_eq(symlink("/bin/sh", p), 0);
	ck_assert_int_eq(upg_binary_check(p, why, sizeof(why)), -ELOOP);
	unlink(p);
	snprintf(q, sizeof(q), "%s/link", d);
	ck_assert_int_eq(symlink(d, q), 0);
	write_file(p, "#!/bin/sh\nexit 0\n", 0755);
	snprintf(q, sizeof(q), "%s/link/nvmefsd", d);
	ck_assert_int_eq(upg_binary_check(q, why, sizeof(why)), -ELOOP);
	ck_assert_int_eq(upg_binary_check("sbin/nvmefsd", why, sizeof(why)), -EINVAL);
	unlink(p);
	snprintf(q, sizeof(q), "%s/link", d);
	unlink(q);
	rmdir(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upgrade");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_adoptable);
	tcase_add_test(tc, t_binary_replaced);
	tcase_add_test(tc, t_digest_table);
	tcase_add_test(tc, t_ns_table);
	tcase_add_test(tc, t_check_adopt_main);
	tcase_add_test(tc, t_precheck);
	/* two checks wait for their bound (1 s) */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_precheck_bounded);
	tcase_add_test(tc, t_excerpt);
	tcase_add_test(tc, t_resolve_binary);
	tcase_add_test(tc, t_binary_check);
	suite_add_tcase(s, tc);

	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

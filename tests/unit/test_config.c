/* test_config.c - the config file: errors, defaults, effective config.
 *
 * Error messages are compared exactly: they are the user's interface.  The
 * example files in tests/config are found through NVMEFS_SRCDIR, this source
 * file's path, or the test binary's location, so the test runs from anywhere;
 * etc/nvmefs.conf and docs/man/nvmefs.conf.5, checked against the key table,
 * are found from there.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define CTRL "[controller nvme0]\ndevice = sim\n"

/* Loads text as "t.conf"; *msgs gets everything written to the error
 * stream (free it). */
static int load(const char *text, struct cfg **cfg, char **msgs)
{
	size_t len;
	FILE *errs = open_memstream(msgs, &len);
	int rc;

	ck_assert_ptr_nonnull(errs);
	rc = cfg_load_string("t.conf", text, cfg, errs);
	fclose(errs);
	return rc;
}

static struct cfg *load_ok(const char *text)
{
	struct cfg *cfg = NULL;
	char *msgs = NULL;
	int rc = load(text, &cfg, &msgs);

	ck_assert_msg(rc == 0, "load failed (%d): %s", rc, msgs);
	ck_assert_str_eq(msgs, "");
	ck_assert_ptr_nonnull(cfg);
	free(msgs);
	return cfg;
}

static void expect_errors(const char *text, const char *want)
{
	struct cfg *cfg = (struct cfg *)1;
	char *msgs = NULL;
	int rc = load(text, &cfg, &msgs);

	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(msgs, want);
	free(msgs);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static const char *online_cpus(void)
{
	static char buf[256];
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* ---- one error class each: the exact message ---- */

struct bad {
	const char *what; /* the error class, for the reader */
	const char *text;
	const char *msg;
};

static const struct bad bad_cases[] = {
    {"unknown section", "[deamon]\n" CTRL,
     "t.conf:1: [deamon]: unknown section; allowed: [daemon], [engine], [controller NAME]\n"},
    {"unknown key", "[daemon]\nmount = /x\n" CTRL,
     "t.conf:2: mount = /x: unknown key in [daemon]; allowed: mountpoint, admin_socket, "
     "file_mode, file_owner, file_group, allow_other, log_level, fuse_transport, "
     "fuse_queue_depth, admin_group, operator_group, health_interval, "
     "allow_no_controller\n"},
    {"admin_group unknown", "[daemon]\nadmin_group = no-such-group-x\n" CTRL,
     "t.conf:2: admin_group = no-such-group-x: must be a group name known to this system or "
     "a numeric gid\n"},
    {"operator_group empty", "[daemon]\noperator_group =\n" CTRL,
     "t.conf:2: operator_group = : must be a group name known to this system or a numeric "
     "gid\n"},
    {"unknown controller key", CTRL "ns = 2\n",
     "t.conf:3: ns = 2: unknown key in [controller]; allowed: device, namespaces, size, "
     "block_size, backing, exec, offload, mdts, max_queues, write_cache, metadata_size, "
     "metadata_layout, pi_type, pi_location, pi_guard\n"},
    {"key outside a section", "queues = 1\n" CTRL,
     "t.conf:1: queues = 1: outside any section; put it under [daemon], [engine] or "
     "[controller NAME]\n"},
    {"bad number", "[engine]\nqueues = two\n" CTRL, "t.conf:2: queues = two: must be 1..64\n"},
    {"trailing junk", "[engine]\nqueue_depth = 12 8\n" CTRL,
     "t.conf:2: queue_depth = 12 8: must be 2..4096\n"},
    {"sign", "[engine]\nqueue_depth = +128\n" CTRL,
     "t.conf:2: queue_depth = +128: must be 2..4096\n"},
    {"hex is not decimal", "[engine]\nqueue_depth = 0x80\n" CTRL,
     "t.conf:2: queue_depth = 0x80: must be 2..4096\n"},
    {"empty value", "[engine]\nqueue_depth =\n" CTRL,
     "t.conf:2: queue_depth = : must be 2..4096\n"},
    {"overflow", "[engine]\nio_timeout_ms = 99999999999999999999999\n" CTRL,
     "t.conf:2: io_timeout_ms = 99999999999999999999999: must be 100..600000\n"},
    {"queues 0", "[engine]\nqueues = 0\n" CTRL, "t.conf:2: queues = 0: must be 1..64\n"},
    {"queues 65", "[engine]\nqueues = 65\n" CTRL, "t.conf:2: queues = 65: must be 1..64\n"},
    {"queue_depth 1", "[engine]\nqueue_depth = 1\n" CTRL,
     "t.conf:2: queue_depth = 1: must be 2..4096\n"},
    {"queue_depth 4097", "[engine]\nqueue_depth = 4097\n" CTRL,
     "t.conf:2: queue_depth = 4097: must be 2..4096\n"},
    {"cq_budget 0", "[engine]\ncq_budget = 0\n" CTRL,
     "t.conf:2: cq_budget = 0: must be 1..255 (below queue_depth)\n"},
    {"cq_budget 256", "[engine]\nqueue_depth = 1024\ncq_budget = 256\n" CTRL,
     "t.conf:3: cq_budget = 256: must be 1..255 (below queue_depth)\n"},
    {"budget equal to depth", "[engine]\ncq_budget = 16\nqueue_depth = 16\n" CTRL,
     "t.conf:2: cq_budget = 16: must be below queue_depth (16)\n"},
    {"budget above depth", "[engine]\nqueue_depth = 8\ncq_budget = 64\n" CTRL,
     "t.conf:3: cq_budget = 64: must be below queue_depth (8)\n"},
    {"io_retries 11", "[engine]\nio_retries = 11\n" CTRL,
     "t.conf:2: io_retries = 11: must be 0..10\n"},
    {"io_retries -1", "[engine]\nio_retries = -1\n" CTRL,
     "t.conf:2: io_retries = -1: must be 0..10\n"},
    {"io_timeout_ms 99", "[engine]\nio_timeout_ms = 99\n" CTRL,
     "t.conf:2: io_timeout_ms = 99: must be 100..600000\n"},
    {"io_timeout_ms 600001", "[engine]\nio_timeout_ms = 600001\n" CTRL,
     "t.conf:2: io_timeout_ms = 600001: must be 100..600000\n"},
    {"bad cpu list", "[engine]\ncpus = 0-\n" CTRL,
     "t.conf:2: cpus = 0-: must be a list of CPU numbers and ranges, e.g. 0-3,8\n"},
    {"reversed cpu range", "[engine]\ncpus = 1-0\n" CTRL,
     "t.conf:2: cpus = 1-0: must be a list of CPU numbers and ranges, e.g. 0-3,8\n"},
    {"cpu list junk", "[engine]\ncpus = 0;1\n" CTRL,
     "t.conf:2: cpus = 0;1: must be a list of CPU numbers and ranges, e.g. 0-3,8\n"},
    {"duplicate cpu", "[engine]\ncpus = 0,0-0\n" CTRL,
     "t.conf:2: cpus = 0,0-0: CPU 0 is listed twice; each CPU at most once\n"},
    {"queues above cpus", "[engine]\ncpus = 0\nqueues = 2\n" CTRL,
     "t.conf:3: queues = 2: must be at most 1, the number of CPUs in cpus (one reactor per "
     "CPU)\n"},
    {"bad mode", "[engine]\nmode = busy\n" CTRL,
     "t.conf:2: mode = busy: must be poll, interrupt or hybrid\n"},
    {"bad bool", "[engine]\nnuma = 2\n" CTRL, "t.conf:2: numa = 2: must be yes or no\n"},
    {"bad dma_isolation", "[engine]\ndma_isolation = device\n" CTRL,
     "t.conf:2: dma_isolation = device: must be controller or shared\n"},
    {"bad log level", "[daemon]\nlog_level = trace\n" CTRL,
     "t.conf:2: log_level = trace: must be error, warn, info or debug\n"},
    {"bad fuse transport", "[daemon]\nfuse_transport = io_uring\n" CTRL,
     "t.conf:2: fuse_transport = io_uring: must be auto, uring or classic\n"},
    {"fuse transport is case-sensitive", "[daemon]\nfuse_transport = Uring\n" CTRL,
     "t.conf:2: fuse_transport = Uring: must be auto, uring or classic\n"},
    {"empty fuse transport", "[daemon]\nfuse_transport =\n" CTRL,
     "t.conf:2: fuse_transport = : must be auto, uring or classic\n"},
    {"fuse_queue_depth 0", "[daemon]\nfuse_queue_depth = 0\n" CTRL,
     "t.conf:2: fuse_queue_depth = 0: must be 1..256\n"},
    {"fuse_queue_depth 257", "[daemon]\nfuse_queue_depth = 257\n" CTRL,
     "t.conf:2: fuse_queue_depth = 257: must be 1..256\n"},
    {"fuse_queue_depth not a number", "[daemon]\nfuse_queue_depth = many\n" CTRL,
     "t.conf:2: fuse_queue_depth = many: must be 1..256\n"},
    {"fuse_queue_depth negative", "[daemon]\nfuse_queue_depth = -1\n" CTRL,
     "t.conf:2: fuse_queue_depth = -1: must be 1..256\n"},
    {"fuse_queue_depth junk", "[daemon]\nfuse_queue_depth = 16k\n" CTRL,
     "t.conf:2: fuse_queue_depth = 16k: must be 1..256\n"},
    {"health_interval too long", "[daemon]\nhealth_interval = 86401\n" CTRL,
     "t.conf:2: health_interval = 86401: must be 0..86400\n"},
    {"health_interval negative", "[daemon]\nhealth_interval = -1\n" CTRL,
     "t.conf:2: health_interval = -1: must be 0..86400\n"},
    {"health_interval junk", "[daemon]\nhealth_interval = 1m\n" CTRL,
     "t.conf:2: health_interval = 1m: must be 0..86400\n"},
    {"health_interval in [engine]", "[engine]\nhealth_interval = 60\n" CTRL,
     "t.conf:2: health_interval = 60: unknown key in [engine]; allowed: queues, "
     "queue_depth, cq_budget, cpus, mode, io_timeout_ms, io_retries, numa, "
     "dma_isolation\n"},
    {"fuse key in [engine]", "[engine]\nfuse_queue_depth = 16\n" CTRL,
     "t.conf:2: fuse_queue_depth = 16: unknown key in [engine]; allowed: queues, "
     "queue_depth, cq_budget, cpus, mode, io_timeout_ms, io_retries, numa, dma_isolation\n"},
    {"duplicate fuse key", "[daemon]\nfuse_transport = auto\nfuse_transport = uring\n" CTRL,
     "t.conf:3: fuse_transport = uring: fuse_transport given twice in this section (first "
     "at line 2)\n"},
    {"relative mountpoint", "[daemon]\nmountpoint = mnt\n" CTRL,
     "t.conf:2: mountpoint = mnt: must be an absolute path\n"},
    {"bad octal mode", "[daemon]\nfile_mode = 0680\n" CTRL,
     "t.conf:2: file_mode = 0680: must be an octal mode 0000..0777\n"},
    {"mode above 0777", "[daemon]\nfile_mode = 04755\n" CTRL,
     "t.conf:2: file_mode = 04755: must be an octal mode 0000..0777\n"},
    {"unknown user", "[daemon]\nfile_owner = nosuchuser-nvmefs\n" CTRL,
     "t.conf:2: file_owner = nosuchuser-nvmefs: must be a user name known to this system or "
     "a numeric uid\n"},
    {"unknown group", "[daemon]\nfile_group = nosuchgroup-nvmefs\n" CTRL,
     "t.conf:2: file_group = nosuchgroup-nvmefs: must be a group name known to this system "
     "or a numeric gid\n"},
    {"duplicate controller", CTRL "[controller nvme0]\ndevice = sim\n",
     "t.conf:3: [controller nvme0]: controller name given twice (first at line 1)\n"},
    {"duplicate device",
     "[controller a]\ndevice = 0000:01:00.0\n[controller b]\ndevice = 01:00.0\n",
     "t.conf:4: device = 01:00.0: 0000:01:00.0 is already the device of [controller a]\n"},
    {"bad pci function", "[controller a]\ndevice = 01:00.8\n",
     "t.conf:2: device = 01:00.8: must be sim or a PCI address DDDD:BB:DD.F or BB:DD.F (e.g. "
     "0000:01:00.0)\n"},
    {"bad pci form", "[controller a]\ndevice = 0:1:0.0\n",
     "t.conf:2: device = 0:1:0.0: must be sim or a PCI address DDDD:BB:DD.F or BB:DD.F (e.g. "
     "0000:01:00.0)\n"},
    {"bad controller name", "[controller this-name-is-too-long]\ndevice = sim\n",
     "t.conf:1: [controller this-name-is-too-long]: must be [controller NAME], NAME 1..16 of "
     "A-Z a-z 0-9 _ -\n"},
    {"controller without name", "[controller]\ndevice = sim\n",
     "t.conf:1: [controller]: must be [controller NAME], NAME 1..16 of A-Z a-z 0-9 _ -\n"},
    {"missing device", "[controller a]\nsize = 1G\n",
     "t.conf:1: [controller a]: device is missing: give device = sim or a PCI address\n"},
    {"namespaces 0", CTRL "namespaces = 0\n", "t.conf:3: namespaces = 0: must be 1..16\n"},
    {"namespaces 17", CTRL "namespaces = 17\n", "t.conf:3: namespaces = 17: must be 1..16\n"},
    {"mdts 11", CTRL "mdts = 11\n", "t.conf:3: mdts = 11: must be 0..10\n"},
    {"max_queues 0", CTRL "max_queues = 0\n", "t.conf:3: max_queues = 0: must be 1..64\n"},
    {"max_queues 65", CTRL "max_queues = 65\n", "t.conf:3: max_queues = 65: must be 1..64\n"},
    {"bad size suffix", CTRL "size = 4P\n",
     "t.conf:3: size = 4P: must be a number of bytes with an optional K, M, G or T suffix "
     "(powers of 1024), e.g. 1G\n"},
    {"size overflow", CTRL "size = 16777216T\n",
     "t.conf:3: size = 16777216T: must be a number of bytes with an optional K, M, G or T "
     "suffix (powers of 1024), e.g. 1G\n"},
    {"size not a multiple", CTRL "block_size = 512\nsize = 1000\n",
     "t.conf:4: size = 1000: must be a multiple of block_size (512)\n"},
    {"size below a block", CTRL "size = 2K\n",
     "t.conf:3: size = 2K: must be at least one block (4096 bytes)\n"},
    {"bad block size", CTRL "block_size = 2048\n",
     "t.conf:3: block_size = 2048: must be 512 or 4096\n"},
    {"bad exec", CTRL "exec = fork\n", "t.conf:3: exec = fork: must be inline or thread\n"},
    {"bad write_cache", CTRL "write_cache = writeback\n",
     "t.conf:3: write_cache = writeback: must be volatile or none\n"},
    {"relative backing", CTRL "backing = disk.img\n",
     "t.conf:3: backing = disk.img: must be ram, null or an absolute file path (%c controller "
     "name, %n nsid, %% a %)\n"},
    {"bad backing escape", CTRL "backing = /srv/%x\n",
     "t.conf:3: backing = /srv/%x: must be ram, null or an absolute file path (%c controller "
     "name, %n nsid, %% a %)\n"},
    {"pattern without %n", CTRL "backing = /srv/%c.img\nnamespaces = 3\n",
     "t.conf:3: backing = /srv/%c.img: must contain %n when namespaces > 1 (one file per "
     "namespace)\n"},
    {"sim key on pci", "[controller a]\ndevice = 0000:01:00.0\nnamespaces = 2\nexec = thread\n",
     "t.conf:3: namespaces = 2: only for device = sim, not for a PCI device (0000:01:00.0)\n"
     "t.conf:4: exec = thread: only for device = sim, not for a PCI device (0000:01:00.0)\n"},
    {"no controller", "[engine]\nmode = poll\n",
     "t.conf: no [controller NAME] section: at least one is required "
     "(unless allow_no_controller = yes)\n"},
    {"empty file", "", "t.conf: no [controller NAME] section: at least one is required "
     "(unless allow_no_controller = yes)\n"},
    {"duplicate key", "[engine]\nmode = poll\nmode = poll\n" CTRL,
     "t.conf:3: mode = poll: mode given twice in this section (first at line 2)\n"},
    {"duplicate section", "[daemon]\n[daemon]\n" CTRL,
     "t.conf:2: [daemon]: section given twice (first at line 1)\n"},
    {"unterminated section", "[engine\n" CTRL,
     "t.conf:1: [engine: a section header must be [NAME]\n"},
    {"junk after section", "[engine] x\n" CTRL,
     "t.conf:1: [engine] x: nothing may follow ] but a comment\n"},
    {"line without =", CTRL "namespaces 2\n",
     "t.conf:3: namespaces 2: expected KEY = VALUE or [SECTION]\n"},
    {"key missing", CTRL "= 2\n", "t.conf:3: = 2: a key name is missing before '='\n"},
};

/* Which controllers keep their namespaces in the daemon's memory: a
 * software controller with backing = ram (the default), not null, not a
 * file, not a PCI device. */
START_TEST(t_volatile_ctrl)
{
	struct cfg *cfg;
	const struct cfg_controller *vc;

	ck_assert_int_eq(cfg_load_string("t.conf",
					 "[controller a]\ndevice = sim\nbacking = null\n"
					 "[controller b]\ndevice = sim\nbacking = /var/lib/nvmefs/%c-%n.img\n"
					 "[controller c]\ndevice = 0000:01:00.0\n",
					 &cfg, stderr),
			 0);
	ck_assert_ptr_null(cfg_volatile_ctrl(cfg));
	cfg_free(cfg);
	ck_assert_int_eq(cfg_load_string("t.conf",
					 "[controller a]\ndevice = sim\nbacking = null\n"
					 "[controller b]\ndevice = sim\n",
					 &cfg, stderr),
			 0);
	vc = cfg_volatile_ctrl(cfg);
	ck_assert_ptr_nonnull(vc);
	ck_assert_str_eq(vc->name, "b");
	cfg_free(cfg);
}
END_TEST

/* allow_no_controller = yes: no [controller] section is valid, nothing to
 * serve; the flag is printed and compared like every key, and it does not
 * stand in for a section named wrong (that stays an error of its own). */
START_TEST(t_no_controller_allowed)
{
	struct cfg *cfg = load_ok("[daemon]\nallow_no_controller = yes\n");
	struct cfg *other = load_ok("[daemon]\nallow_no_controller = yes\n");
	struct cfg *with = load_ok("[daemon]\nallow_no_controller = yes\n"
	                           "[controller a]\ndevice = sim\n");
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	ck_assert_uint_eq(cfg->nr_ctrls, 0);
	ck_assert(cfg->daemon.allow_no_controller);
	ck_assert_uint_eq(with->nr_ctrls, 1);
	ck_assert(cfg_equal(cfg, other));
	other->daemon.allow_no_controller = false;
	ck_assert(!cfg_equal(cfg, other));
	f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	cfg_print(cfg, f);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "\nallow_no_controller = yes\n"));
	ck_assert_ptr_nonnull(strstr(text, "# no [controller NAME] section: nothing to serve"));
	free(text);
	cfg_free(cfg);
	cfg_free(other);
	cfg_free(with);
	expect_errors("[daemon]\nallow_no_controller = no\n",
	              "t.conf: no [controller NAME] section: at least one is required "
	              "(unless allow_no_controller = yes)\n");
	ck_assert_int_eq(load("[daemon]\nallow_no_controller = yes\n[controler a]\n", &cfg, &text),
	                 -EINVAL);
	ck_assert_ptr_nonnull(strstr(text, "unknown section"));
	free(text);
}
END_TEST

START_TEST(test_bad)
{
	expect_errors(bad_cases[_i].text, bad_cases[_i].msg);
}
END_TEST

START_TEST(test_offline_cpu)
{
	char want[512];

	snprintf(want, sizeof(want),
	         "t.conf:2: cpus = 4095: CPU 4095 is not online (online CPUs: %s)\n",
	         online_cpus());
	expect_errors("[engine]\ncpus = 4095\n" CTRL, want);
}
END_TEST

START_TEST(test_all_errors_reported)
{
	/* one error per bad line, in line order, though found in another order */
	expect_errors(
	    "[controller x]\ndevice = sim\nsize = 3\n"
	    "[engine]\nqueues = 0\nfoo = 1\n"
	    "[daemon]\nfile_mode = 9\n"
	    "[bogus]\nqueues = 1\n"
	    "[controller x]\ndevice = sim\n",
	    "t.conf:3: size = 3: must be at least one block (4096 bytes)\n"
	    "t.conf:5: queues = 0: must be 1..64\n"
	    "t.conf:6: foo = 1: unknown key in [engine]; allowed: queues, queue_depth, "
	    "cq_budget, cpus, mode, io_timeout_ms, io_retries, numa, dma_isolation\n"
	    "t.conf:8: file_mode = 9: must be an octal mode 0000..0777\n"
	    "t.conf:9: [bogus]: unknown section; allowed: [daemon], [engine], [controller "
	    "NAME]\n"
	    "t.conf:11: [controller x]: controller name given twice (first at line 1)\n");
}
END_TEST

START_TEST(test_line_numbers)
{
	/* CRLF line ends, a BOM, comments, blank and indented lines all count */
	expect_errors(
	    "\xef\xbb\xbf# comment\r\n\r\n; another\r\n  [engine]\r\n\tqueues = 99\r\n" CTRL,
	    "t.conf:5: queues = 99: must be 1..64\n");
	/* an indented line is a key of its own, never a continuation */
	expect_errors(
	    "[engine]\nmode = poll\n   mode = poll\n" CTRL,
	    "t.conf:3: mode = poll: mode given twice in this section (first at line 2)\n");
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "[engine]\nmode = po\0ll\n" CTRL;
	char *path = strdup("/tmp/nvmefs-cfg-XXXXXX");
	char *msgs = NULL;
	size_t len;
	struct cfg *cfg;
	FILE *errs;
	int fd;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	errs = open_memstream(&msgs, &len);
	ck_assert_int_eq(cfg_load(path, &cfg, errs), -EINVAL);
	fclose(errs);
	ck_assert_ptr_nonnull(strstr(msgs, ":2: line contains a NUL byte\n"));
	unlink(path);
	free(path);
	free(msgs);
}
END_TEST

START_TEST(test_long_lines)
{
	size_t n = PATH_MAX - 1;
	char *text = malloc(2 * PATH_MAX + 256);
	char *want = malloc(256);
	struct cfg *cfg;
	int len;

	/* a PATH_MAX - 1 mountpoint fits on a line (inih's default is 200 bytes) */
	len = sprintf(text, "[daemon]\nmountpoint = /");
	memset(text + len, 'm', n - 1);
	strcpy(text + len + n - 1, "\n" CTRL);
	cfg = load_ok(text);
	ck_assert_uint_eq(strlen(cfg->daemon.mountpoint), n);
	cfg_free(cfg);

	/* a longer line is an error of its own line, and parsing goes on */
	len = sprintf(text, "[daemon]\nmountpoint = /");
	memset(text + len, 'm', 2 * PATH_MAX - 200);
	strcpy(text + len + 2 * PATH_MAX - 200, "\n[engine]\nqueues = 0\n" CTRL);
	snprintf(want, 256,
	         "t.conf:2: line too long: at most %d bytes\n"
	         "t.conf:4: queues = 0: must be 1..64\n",
	         PATH_MAX + 256 - 3);
	expect_errors(text, want);
	free(text);
	free(want);
}
END_TEST

START_TEST(test_values_literal)
{
	/* ';' and '#' inside a value are not comments; inih's settings come back */
	bool inline_comments = ini_allow_inline_comments;
	int max_line = ini_max_line;
	struct cfg *cfg = load_ok("[daemon]\nmountpoint = /mnt/a ;b #c\n" CTRL);

	ck_assert_str_eq(cfg->daemon.mountpoint, "/mnt/a ;b #c");
	ck_assert_int_eq(ini_allow_inline_comments, inline_comments);
	ck_assert_int_eq(ini_max_line, max_line);
	cfg_free(cfg);
}
END_TEST

/* ---- defaults and values ---- */

START_TEST(test_defaults)
{
	struct cfg *cfg = load_ok(CTRL);
	const struct cfg_controller *c = &cfg->ctrls[0];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct group *gr = getgrnam("disk");

	ck_assert_str_eq(cfg->path, "t.conf");
	ck_assert_str_eq(cfg->daemon.mountpoint, "/run/nvmefs");
	ck_assert_str_eq(cfg->daemon.admin_socket, "/run/nvmefsd.sock");
	ck_assert_uint_eq(cfg->daemon.file_mode, 0660);
	ck_assert_str_eq(cfg->daemon.file_owner, "root");
	ck_assert_str_eq(cfg->daemon.file_group, "disk");
	ck_assert_uint_eq(cfg->daemon.uid, 0);
	ck_assert_ptr_nonnull(gr);
	ck_assert_uint_eq(cfg->daemon.gid, gr->gr_gid);
	ck_assert(cfg->daemon.allow_other);
	ck_assert_int_eq(cfg->daemon.log_level, CFG_LOG_INFO);
	ck_assert_int_eq(cfg->daemon.fuse_transport, CFG_FUSE_TRANSPORT_AUTO);
	ck_assert_uint_eq(cfg->daemon.fuse_queue_depth, 16);
	ck_assert_uint_eq(cfg->daemon.health_interval, 60);
	/* the admin socket is root's unless groups are named */
	ck_assert_str_eq(cfg->daemon.admin_group, "");
	ck_assert_str_eq(cfg->daemon.operator_group, "");
	ck_assert_uint_eq(cfg->daemon.admin_gid, (gid_t)-1);
	ck_assert_uint_eq(cfg->daemon.operator_gid, (gid_t)-1);

	ck_assert(!cfg->engine.cpus_set);
	ck_assert_uint_eq(cfg->engine.nr_cpus, (unsigned)ncpu);
	for (unsigned i = 0; i < cfg->engine.nr_cpus; i++)
		ck_assert_uint_eq(cfg->engine.cpus[i], i); /* this machine: 0..n-1 online */
	ck_assert_uint_eq(cfg->engine.queues, ncpu < 64 ? (unsigned)ncpu : 64);
	ck_assert_uint_eq(cfg->engine.queue_depth, 256);
	ck_assert_uint_eq(cfg->engine.cq_budget, 64);
	ck_assert_int_eq(cfg->engine.mode, CFG_MODE_HYBRID);
	ck_assert_uint_eq(cfg->engine.io_timeout_ms, 5000);
	ck_assert_uint_eq(cfg->engine.io_retries, 3);
	ck_assert(cfg->engine.numa);
	ck_assert_int_eq(cfg->engine.dma_isolation, CFG_DMA_ISO_CONTROLLER);

	ck_assert_uint_eq(cfg->nr_ctrls, 1);
	ck_assert_str_eq(c->name, "nvme0");
	ck_assert_int_eq(c->line, 1);
	ck_assert(c->sim);
	ck_assert_uint_eq(c->namespaces, 1);
	ck_assert_uint_eq(c->size, 1ull << 30);
	ck_assert_uint_eq(c->block_size, 4096);
	ck_assert_int_eq(c->backing, CFG_BACKING_RAM);
	ck_assert_int_eq(c->exec, CFG_EXEC_INLINE);
	ck_assert_uint_eq(c->mdts, 7);
	ck_assert_uint_eq(c->max_queues, 64);
	ck_assert_int_eq(c->write_cache, CFG_WC_VOLATILE);
	cfg_free(cfg);
}
END_TEST

START_TEST(test_values)
{
	struct cfg *cfg =
	    load_ok("[daemon]\nfile_mode = 600\nfile_owner = 4242\nfile_group = 0\n"
	            "allow_other = off\nlog_level = warn\n"
	            "admin_group = 4300\noperator_group = root\n"
	            "fuse_transport = classic\nfuse_queue_depth = 100\nhealth_interval = 0\n"
	            "[engine]\ncpus = 1,0\nqueue_depth = 100\nmode = interrupt\n"
	            "numa = false\nio_timeout_ms = 100\nio_retries = 0\n"
	            "dma_isolation = shared\n"
	            "[controller Disk_1-b]\ndevice = sim\nsize = 3M\nblock_size = 512\n"
	            "namespaces = 4\nbacking = /srv/%c/ns%n-100%%\nexec = thread\n"
	            "mdts = 0\nmax_queues = 1\nwrite_cache = none\n"
	            "[controller ssd]\ndevice = 5E:1F.7\n");
	const struct cfg_controller *c = &cfg->ctrls[0];
	char buf[64];

	ck_assert_uint_eq(cfg->daemon.file_mode, 0600);
	ck_assert_uint_eq(cfg->daemon.uid, 4242);
	ck_assert_uint_eq(cfg->daemon.gid, 0);
	ck_assert_str_eq(cfg->daemon.admin_group, "4300");
	ck_assert_uint_eq(cfg->daemon.admin_gid, 4300);
	ck_assert_str_eq(cfg->daemon.operator_group, "root");
	ck_assert_uint_eq(cfg->daemon.operator_gid, 0);
	ck_assert(!cfg->daemon.allow_other);
	ck_assert_int_eq(cfg->daemon.log_level, CFG_LOG_WARN);
	ck_assert_int_eq(cfg->daemon.fuse_transport, CFG_FUSE_TRANSPORT_CLASSIC);
	ck_assert_uint_eq(cfg->daemon.fuse_queue_depth, 100);
	ck_assert_uint_eq(cfg->daemon.health_interval, 0);
	ck_assert(cfg->engine.cpus_set);
	ck_assert_uint_eq(cfg->engine.nr_cpus, 2);
	ck_assert_uint_eq(cfg->engine.cpus[0], 1); /* the order given */
	ck_assert_uint_eq(cfg->engine.cpus[1], 0);
	ck_assert_uint_eq(cfg->engine.queues, 2);
	ck_assert_uint_eq(cfg->engine.queue_depth, 100);
	ck_assert_uint_eq(cfg->engine.cq_budget, 50); /* default below a small depth */
	ck_assert_int_eq(cfg->engine.mode, CFG_MODE_INTERRUPT);
	ck_assert_str_eq(cfg_mode_name(cfg->engine.mode), "interrupt");
	ck_assert(!cfg->engine.numa);
	ck_assert_uint_eq(cfg->engine.io_timeout_ms, 100);
	ck_assert_uint_eq(cfg->engine.io_retries, 0);
	ck_assert_int_eq(cfg->engine.dma_isolation, CFG_DMA_ISO_SHARED);
	ck_assert_str_eq(cfg_dma_isolation_name(cfg->engine.dma_isolation), "shared");

	ck_assert_uint_eq(cfg->nr_ctrls, 2);
	ck_assert_str_eq(c->name, "Disk_1-b");
	ck_assert_uint_eq(c->size, 3ull << 20);
	ck_assert_uint_eq(c->block_size, 512);
	ck_assert_uint_eq(c->namespaces, 4);
	ck_assert_int_eq(c->backing, CFG_BACKING_FILE);
	ck_assert_int_eq(c->exec, CFG_EXEC_THREAD);
	ck_assert_uint_eq(c->mdts, 0);
	ck_assert_uint_eq(c->max_queues, 1);
	ck_assert_int_eq(c->write_cache, CFG_WC_NONE);
	ck_assert_int_eq(cfg_backing_file(c, 3, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/srv/Disk_1-b/ns3-100%");
	ck_assert_int_eq(cfg_backing_file(c, 3, buf, 22), -ENAMETOOLONG);
	ck_assert_int_eq(cfg_backing_file(c, 3, buf, 23), 0);

	c = &cfg->ctrls[1];
	ck_assert(!c->sim);
	ck_assert_str_eq(c->device, "0000:5e:1f.7"); /* normalised */
	ck_assert_int_eq(c->line, 30);
	ck_assert_int_eq(cfg_backing_file(c, 1, buf, sizeof(buf)), -EINVAL);
	cfg_free(cfg);
}
END_TEST

START_TEST(test_sizes)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} sizes[] = {
	    {"4096", 4096},     {"8K", 8192},       {"8k", 8192},
	    {"5M", 5ull << 20}, {"2G", 2ull << 30}, {"3T", 3ull << 40},
	};
	char text[128];

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct cfg *cfg;

		snprintf(text, sizeof(text), CTRL "size = %s\n", sizes[i].text);
		cfg = load_ok(text);
		ck_assert_uint_eq(cfg->ctrls[0].size, sizes[i].bytes);
		cfg_free(cfg);
	}
}
END_TEST

START_TEST(test_fuse_keys)
{
	static const struct {
		const char *word;
		enum cfg_fuse_transport t;
	} transports[] = {
	    {"auto", CFG_FUSE_TRANSPORT_AUTO},
	    {"uring", CFG_FUSE_TRANSPORT_URING},
	    {"classic", CFG_FUSE_TRANSPORT_CLASSIC},
	};
	/* both bounds and a value between; the transport is independent of it */
	static const unsigned depths[] = {1, 2, 64, 255, 256};
	char text[128];

	for (unsigned i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		struct cfg *cfg;

		snprintf(text, sizeof(text), "[daemon]\nfuse_transport = %s\n" CTRL,
		         transports[i].word);
		cfg = load_ok(text);
		ck_assert_int_eq(cfg->daemon.fuse_transport, transports[i].t);
		ck_assert_uint_eq(cfg->daemon.fuse_queue_depth, 16);
		ck_assert_str_eq(cfg_fuse_transport_name(cfg->daemon.fuse_transport),
		                 transports[i].word);
		cfg_free(cfg);
	}
	ck_assert_str_eq(cfg_fuse_transport_name((enum cfg_fuse_transport)3), "unknown");

	for (unsigned i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		struct cfg *cfg;

		snprintf(text, sizeof(text), "[daemon]\nfuse_queue_depth = %u\n" CTRL, depths[i]);
		cfg = load_ok(text);
		ck_assert_uint_eq(cfg->daemon.fuse_queue_depth, depths[i]);
		ck_assert_int_eq(cfg->daemon.fuse_transport, CFG_FUSE_TRANSPORT_AUTO);
		cfg_free(cfg);
	}
}
END_TEST

START_TEST(test_missing_file)
{
	char *msgs = NULL;
	size_t len;
	struct cfg *cfg = (struct cfg *)1;
	FILE *errs = open_memstream(&msgs, &len);

	ck_assert_int_eq(cfg_load("/nonexistent/nvmefs.conf", &cfg, errs), -ENOENT);
	fclose(errs);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(msgs,
	                 "/nonexistent/nvmefs.conf: cannot open: No such file or directory\n");
	free(msgs);
}
END_TEST

/* cfg_load asks the file system about the paths (what would stop the
 * daemon at start); cfg_load_syntax and cfg_load_string read the text
 * alone.  conf is written into a private directory d, @ in it stands for d. */
static int load_paths(const char *d, const char *conf, bool syntax_only, char **msgs)
{
	char path[PATH_MAX], text[4096];
	struct cfg *cfg = NULL;
	size_t len, o = 0;
	FILE *f, *errs;
	int rc;

	for (const char *s = conf; *s && o + 256 < sizeof(text); s++)
		o += (size_t)(*s == '@' ? snprintf(text + o, sizeof(text) - o, "%s", d)
		                        : snprintf(text + o, sizeof(text) - o, "%c", *s));
	snprintf(path, sizeof(path), "%s/t.conf", d);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	errs = open_memstream(msgs, &len);
	ck_assert_ptr_nonnull(errs);
	rc = syntax_only ? cfg_load_syntax(path, &cfg, errs) : cfg_load(path, &cfg, errs);
	fclose(errs);
	ck_assert_int_eq(rc == 0, cfg != NULL);
	cfg_free(cfg);
	return rc;
}

START_TEST(test_paths_checked)
{
	char d[] = "/tmp/test_config.XXXXXX", p[PATH_MAX], *msgs = NULL, *m2 = NULL;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(p, sizeof(p), "%s/real", d);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", d);
	ck_assert_int_eq(symlink("real", p), 0);
	snprintf(p, sizeof(p), "%s/real/fifo.img", d);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/real/ns1.img", d);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	/* missing parents of the mountpoint are made at start: fine; files
	 * that exist and files that do not in a private directory: fine */
	ck_assert_int_eq(load_paths(d, "[daemon]\nmountpoint = @/a/b/mnt\nadmin_socket = @/s\n"
	                               "[controller x]\ndevice = sim\nnamespaces = 2\n"
	                               "backing = @/real/ns%n.img\n",
	                            false, &msgs), 0);
	ck_assert_str_eq(msgs, "");
	free(msgs);

	/* a link above the mountpoint, a missing socket directory, a FIFO at
	 * the backing path: each with its line */
	ck_assert_int_eq(load_paths(d, "[daemon]\nmountpoint = @/link/mnt\n"
	                               "admin_socket = @/nodir/s\n"
	                               "[controller x]\ndevice = sim\nbacking = @/real/fifo.img\n",
	                            false, &msgs), -EINVAL);
	ck_assert_msg(strstr(msgs, "t.conf:2: mountpoint = ") &&
	                  strstr(msgs, "/link is a symbolic link (no link is followed in this path)"),
	              "%s", msgs);
	ck_assert_msg(strstr(msgs, "t.conf:3: admin_socket = ") &&
	                  strstr(msgs, "/nodir does not exist (the daemon makes the socket"),
	              "%s", msgs);
	ck_assert_msg(strstr(msgs, "t.conf:6: backing = ") &&
	                  strstr(msgs, "/real/fifo.img is a FIFO, not a regular file"),
	              "%s", msgs);
	/* the text alone (nvmefsctl -c) passes the same file */
	ck_assert_int_eq(load_paths(d, "[daemon]\nmountpoint = @/link/mnt\n"
	                               "admin_socket = @/nodir/s\n"
	                               "[controller x]\ndevice = sim\nbacking = @/real/fifo.img\n",
	                            true, &m2), 0);
	ck_assert_str_eq(m2, "");
	free(msgs);
	free(m2);

	/* the default socket's directory is checked too: /run exists */
	ck_assert_int_eq(load_paths(d, "[controller x]\ndevice = sim\n", false, &msgs), 0);
	free(msgs);
	snprintf(p, sizeof(p), "rm -rf '%s'", d);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

/* Mountpoints that are system directories, or inside a kernel's or the
 * system's own, are refused by the text alone; directories of their own
 * below those that hold such are fine. */
START_TEST(test_mountpoint_system_dirs)
{
	static const char *const bad[] = {"/",         "/etc",      "/usr",       "/usr/lib",
	                                  "/bin",      "/sbin",     "/lib",       "/lib64",
	                                  "/boot",     "/dev",      "/dev/nvmefs", "/proc",
	                                  "/sys/fs/x", "/var",      "/var/lib",   "/home",
	                                  "/root",     "/run",      "/tmp",       "//etc",
	                                  "/etc/nvmefs", "/mnt",    "/srv",       "/opt"};
	static const char *const good[] = {"/run/nvmefs", "/srv/nvme", "/mnt/nvme", "/var/lib/nvmefs",
	                                   "/home/nvme",  "/data",     "/etcetera", "/proc2"};
	char text[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cfg *cfg = NULL;
		char *msgs = NULL;

		snprintf(text, sizeof(text), "[daemon]\nmountpoint = %s\n" CTRL, bad[i]);
		ck_assert_msg(load(text, &cfg, &msgs) == -EINVAL, "%s accepted", bad[i]);
		ck_assert_msg(strstr(msgs, "system directory"), "%s: %s", bad[i], msgs);
		free(msgs);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[daemon]\nmountpoint = %s\n" CTRL, good[i]);
		cfg_free(load_ok(text));
	}
}
END_TEST

/* ---- effective config ---- */

static char *print(const struct cfg *cfg)
{
	char *out = NULL;
	size_t len;
	FILE *f = open_memstream(&out, &len);

	ck_assert_ptr_nonnull(f);
	cfg_print(cfg, f);
	fclose(f);
	return out;
}

/* load -> print -> load gives an equal cfg, and printing that gives the same text */
static void round_trip(const struct cfg *cfg)
{
	char *text = print(cfg), *again;
	struct cfg *back = load_ok(text);

	ck_assert_msg(cfg_equal(cfg, back), "not equal after round trip:\n%s", text);
	again = print(back);
	ck_assert_str_eq(again + strcspn(again, "\n"), text + strcspn(text, "\n"));
	free(text);
	free(again);
	cfg_free(back);
}

START_TEST(test_round_trip)
{
	static const char *const texts[] = {
	    CTRL,
	    "[daemon]\nfile_mode = 0\nfile_owner = nobody\nfile_group = 65534\n"
	    "mountpoint = /a b/c;d\nlog_level = error\nfuse_transport = uring\n"
	    "fuse_queue_depth = 1\nhealth_interval = 86400\n"
	    "[engine]\ncpus = 1,0\nqueues = 1\nqueue_depth = 2\ncq_budget = 1\nmode = poll\n"
	    "[controller a]\ndevice = sim\nsize = 1536\nblock_size = 512\nnamespaces = 16\n"
	    "backing = /tmp/%%%c%n\n"
	    "[controller b]\ndevice = 00:1f.3\n[controller c]\ndevice = sim\nbacking = null\n",
	};

	for (unsigned i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct cfg *cfg = load_ok(texts[i]);

		round_trip(cfg);
		cfg_free(cfg);
	}
}
END_TEST

START_TEST(test_equal_sees_differences)
{
	/* so that the round trip above could fail */
	static const char *const variants[] = {
	    "[engine]\nqueue_depth = 128\n" CTRL,
	    "[engine]\ncpus = 0\n" CTRL,
	    "[daemon]\nfile_mode = 0666\n" CTRL,
	    "[daemon]\nfile_owner = 0\n" CTRL,
	    "[daemon]\nfuse_transport = uring\n" CTRL,
	    "[daemon]\nfuse_transport = classic\n" CTRL,
	    "[daemon]\nfuse_queue_depth = 17\n" CTRL,
	    "[daemon]\nhealth_interval = 0\n" CTRL,
	    CTRL "size = 2G\n",
	    CTRL "backing = /x\n",
	    "[controller nvme1]\ndevice = sim\n",
	    CTRL "[controller b]\ndevice = sim\n",
	};
	struct cfg *base = load_ok(CTRL), *same = load_ok("# comment\n" CTRL);

	ck_assert(cfg_equal(base, same));
	for (unsigned i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		struct cfg *v = load_ok(variants[i]);

		ck_assert_msg(!cfg_equal(base, v), "equal: %s", variants[i]);
		cfg_free(v);
	}
	cfg_free(base);
	cfg_free(same);
}
END_TEST

/* ---- the example files ---- */

static bool has_examples(const char *dir)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/valid-minimal.conf", dir);
	return access(p, R_OK) == 0;
}

static const char *examples_dir(void)
{
	static char dir[PATH_MAX];
	const char *src = getenv("NVMEFS_SRCDIR");
	char file[PATH_MAX], exe[PATH_MAX];
	ssize_t n;

	if (src) {
		snprintf(dir, sizeof(dir), "%s/tests/config", src);
		if (has_examples(dir))
			return dir;
	}
	snprintf(file, sizeof(file), "%s", __FILE__);
	snprintf(dir, sizeof(dir), "%s/../config", dirname(file));
	if (has_examples(dir))
		return dir;
	/* B/tests/test_config -> B/../tests/config */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		snprintf(dir, sizeof(dir), "%s/../../tests/config", dirname(exe));
		if (has_examples(dir))
			return dir;
	}
	ck_abort_msg("tests/config not found: set NVMEFS_SRCDIR to the source tree");
	return NULL;
}

/* name.expect with each "name.conf" made "dir/name.conf" (cfg_load names the
 * path as given) and @ONLINE@ made this machine's online CPU list */
static char *expected(const char *dir, const char *name)
{
	char path[PATH_MAX], conf[PATH_MAX], full[2 * PATH_MAX];
	char *text, *out = NULL;
	size_t len;
	FILE *f = open_memstream(&out, &len);

	snprintf(path, sizeof(path), "%s/%s.expect", dir, name);
	snprintf(conf, sizeof(conf), "%s.conf", name);
	snprintf(full, sizeof(full), "%s/%s.conf", dir, name);
	text = read_text(path);
	for (const char *p = text; *p;) {
		if (!strncmp(p, conf, strlen(conf))) {
			fputs(full, f);
			p += strlen(conf);
		} else if (!strncmp(p, "@ONLINE@", 8)) {
			fputs(online_cpus(), f);
			p += 8;
		} else {
			fputc(*p++, f);
		}
	}
	fclose(f);
	free(text);
	return out;
}

START_TEST(test_example_files)
{
	const char *dir = examples_dir();
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned nbad = 0, ngood = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char name[256], path[PATH_MAX], expect[PATH_MAX];
		size_t n = strlen(de->d_name), len;
		char *msgs = NULL;
		struct cfg *cfg = NULL;
		FILE *errs;
		int rc;

		if (n < 6 || strcmp(de->d_name + n - 5, ".conf"))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), de->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		snprintf(expect, sizeof(expect), "%s/%s.expect", dir, name);
		errs = open_memstream(&msgs, &len);
		rc = cfg_load(path, &cfg, errs);
		fclose(errs);
		if (!strncmp(name, "valid-", 6)) {
			ck_assert_msg(rc == 0, "%s: %s", path, msgs);
			ck_assert_str_eq(msgs, "");
			round_trip(cfg);
			cfg_free(cfg);
			ngood++;
		} else {
			char *want = expected(dir, name);

			ck_assert_msg(rc == -EINVAL, "%s: %d", path, rc);
			ck_assert_msg(!strcmp(msgs, want), "%s:\ngot:\n%swant:\n%s", path, msgs,
			              want);
			free(want);
			nbad++;
		}
		free(msgs);
	}
	closedir(d);
	ck_assert_uint_ge(nbad, 20);
	ck_assert_uint_ge(ngood, 3);
}
END_TEST

START_TEST(test_shipped_config)
{
	char path[PATH_MAX];
	struct cfg *cfg;
	char *msgs = NULL;
	size_t len;
	FILE *errs = open_memstream(&msgs, &len);

	snprintf(path, sizeof(path), "%s/../../etc/nvmefs.conf", examples_dir());
	ck_assert_int_eq(cfg_load(path, &cfg, errs), 0);
	fclose(errs);
	ck_assert_str_eq(msgs, "");
	ck_assert_uint_eq(cfg->nr_ctrls, 1);
	ck_assert_str_eq(cfg->ctrls[0].name, "nvme0");
	ck_assert(cfg->ctrls[0].sim);
	ck_assert_uint_eq(cfg->ctrls[0].namespaces, 1);
	ck_assert_uint_eq(cfg->ctrls[0].size, 1ull << 30);
	ck_assert_uint_eq(cfg->ctrls[0].block_size, 4096);
	ck_assert_int_eq(cfg->ctrls[0].backing, CFG_BACKING_RAM);
	ck_assert_str_eq(cfg->daemon.mountpoint, "/run/nvmefs");
	round_trip(cfg);
	cfg_free(cfg);
	free(msgs);
}
END_TEST

/* ---- the documents against the key table ---- */

/* One key as a document gives it: its section, its name and, if it says
 * so, its default (def[0] == '\0': none) or its value on a key line. */
struct doc_key {
	enum cfg_section sec;
	char name[32];
	char def[128];
	char value[128]; /* etc/nvmefs.conf's uncommented KEY = VALUE lines */
	bool active;
	int line;
};

struct doc {
	const char *path;
	struct doc_key keys[128];
	unsigned n;
};

static struct doc_key *doc_add(struct doc *d, enum cfg_section sec, const char *name,
                               size_t len, int line)
{
	struct doc_key *k;

	ck_assert_msg(d->n < sizeof(d->keys) / sizeof(d->keys[0]), "%s: too many keys", d->path);
	k = &d->keys[d->n++];
	memset(k, 0, sizeof(*k));
	k->sec = sec;
	snprintf(k->name, sizeof(k->name), "%.*s", (int)len, name);
	k->line = line;
	return k;
}

/* The default in text: what follows "Default:" up to "(", "," or a full
 * stop (a "." before a blank or the end), trimmed; with comma, the commas
 * do not stop it ("Defaults: root, disk").  "" when there is none. */
static void doc_default(const char *text, bool plural, char *out, size_t len)
{
	const char *p = strstr(text, plural ? "Defaults:" : "Default:"), *e;

	out[0] = '\0';
	if (!p)
		return;
	p = strchr(p, ':') + 1;
	while (*p == ' ')
		p++;
	for (e = p; *e && *e != '(' && (plural || *e != ','); e++)
		if (*e == '.' && (e[1] == ' ' || e[1] == '\0'))
			break;
	while (e > p && e[-1] == ' ')
		e--;
	snprintf(out, len, "%.*s", (int)(e - p), p);
}

/* A comment block's default goes to the keys that follow it: "Default: X"
 * to each, "Defaults: X, Y" one by one. */
static void doc_block_done(struct doc *d, const char *text, unsigned first)
{
	char defs[256], *save = NULL, *tok;

	doc_default(text, true, defs, sizeof(defs));
	if (defs[0]) {
		tok = strtok_r(defs, ",", &save);
		for (unsigned i = first; i < d->n && tok; i++, tok = strtok_r(NULL, ",", &save)) {
			while (*tok == ' ')
				tok++;
			snprintf(d->keys[i].def, sizeof(d->keys[i].def), "%s", tok);
		}
		return;
	}
	for (unsigned i = first; i < d->n; i++)
		doc_default(text, false, d->keys[i].def, sizeof(d->keys[i].def));
}

static bool doc_section(const char *s, enum cfg_section *sec)
{
	if (!strncmp(s, "[daemon]", 8))
		*sec = CFG_SEC_DAEMON;
	else if (!strncmp(s, "[engine]", 8))
		*sec = CFG_SEC_ENGINE;
	else if (!strncmp(s, "[controller ", 12))
		*sec = CFG_SEC_CONTROLLER;
	else
		return false;
	return true;
}

/* etc/nvmefs.conf: a comment block documents the KEY = VALUE lines (or
 * #KEY = VALUE examples) right after it; a blank line ends it.  From the
 * comment that names [controller NAME] on, the controller keys are a list of
 * "#   KEY  text" entries, continued by lines indented further. */
static void doc_read_conf(struct doc *d)
{
	char *text = read_text(d->path), *line, *next;
	char *block = calloc(1, strlen(text) + 1), *entry = calloc(1, strlen(text) + 1);
	enum cfg_section sec = CFG_SEC_DAEMON;
	bool in_sec = false, ctl_doc = false, keys_started = false;
	unsigned first = 0;
	int no = 0;
	struct doc_key *cur = NULL; /* the controller list's entry being read */

	ck_assert(block && entry);
	for (line = text; line; line = next) {
		const char *key = line + (line[0] == '#');
		size_t klen = strspn(key, "abcdefghijklmnopqrstuvwxyz_");

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		no++;
		if (cur && strncmp(line, "#    ", 5)) {
			doc_default(entry, false, cur->def, sizeof(cur->def));
			cur = NULL;
		}
		if (!line[0]) {
			block[0] = '\0';
			keys_started = false;
			continue;
		}
		if (line[0] == '[') {
			ck_assert_msg(doc_section(line, &sec), "%s:%d: unknown section", d->path, no);
			in_sec = true;
			ctl_doc = false;
			block[0] = '\0';
			keys_started = false;
			continue;
		}
		if (klen && !strncmp(key + klen, " = ", 3)) {
			struct doc_key *k;

			ck_assert_msg(in_sec, "%s:%d: key before any section", d->path, no);
			if (!keys_started)
				first = d->n;
			keys_started = true;
			k = doc_add(d, sec, key, klen, no);
			k->active = line[0] != '#';
			snprintf(k->value, sizeof(k->value), "%s", key + klen + 3);
			doc_block_done(d, block, first);
			continue;
		}
		if (ctl_doc && !strncmp(line, "#   ", 4) && line[4] >= 'a' && line[4] <= 'z') {
			klen = strspn(line + 4, "abcdefghijklmnopqrstuvwxyz_");
			cur = doc_add(d, CFG_SEC_CONTROLLER, line + 4, klen, no);
			strcpy(entry, line + 4 + klen);
			continue;
		}
		if (cur) {
			strcat(entry, " ");
			strcat(entry, line + 1);
			continue;
		}
		if (keys_started) {
			block[0] = '\0';
			keys_started = false;
		}
		if (strstr(line, "[controller NAME]"))
			ctl_doc = true;
		strcat(block, " ");
		strcat(block, line + 1);
	}
	if (cur)
		doc_default(entry, false, cur->def, sizeof(cur->def));
	free(block);
	free(entry);
	free(text);
}

/* One line of groff as plain text: font macros' arguments (quoted ones
 * whole), joined with blanks for .B and .I and without for the alternating
 * ones (.BR, .IR, ...); \- as -, other escapes dropped. */
static void man_text(const char *line, FILE *out)
{
	bool alt = false, first = true;
	const char *p = line;

	if (line[0] == '.') {
		size_t m = strcspn(line, " ");

		alt = m == 3;
		p = line + m;
	}
	while (*p) {
		bool quoted;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (!first && !alt && line[0] == '.')
			fputc(' ', out);
		first = false;
		quoted = *p == '"';
		p += quoted;
		for (; *p && (quoted ? *p != '"' : line[0] != '.' || *p != ' '); p++) {
			if (*p != '\\') {
				fputc(*p, out);
				continue;
			}
			p++;
			if (*p == '-' || *p == '\\')
				fputc(*p, out);
			else if (*p == 'f')
				p += p[1] != '\0';
			else if (*p == '(')
				p += p[1] && p[2] ? 2 : 0;
			else if (!*p)
				break;
		}
		if (quoted && *p)
			p++;
	}
	fputc(' ', out);
}

/* nvmefs.conf(5): under .SH "[daemon]", "[engine]" and "[controller NAME]",
 * each ".TP" + ".B KEY" is a key; its text runs to the next .TP, .PP or .SH. */
static void doc_read_man(struct doc *d)
{
	char *text = read_text(d->path), *line, *next, *body = NULL;
	enum cfg_section sec = CFG_SEC_DAEMON;
	bool in_sec = false, tag = false;
	struct doc_key *cur = NULL;
	FILE *f = NULL;
	size_t len;
	int no = 0;

	for (line = text; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		no++;
		if (!strncmp(line, ".TP", 3) || !strncmp(line, ".PP", 3) || !strncmp(line, ".SH", 3)) {
			if (cur) {
				fclose(f);
				doc_default(body, false, cur->def, sizeof(cur->def));
				free(body);
				cur = NULL;
			}
			tag = !strncmp(line, ".TP", 3);
			if (!strncmp(line, ".SH ", 4))
				in_sec = doc_section(line + 4 + (line[4] == '"'), &sec);
			continue;
		}
		if (tag && in_sec) {
			size_t klen;

			tag = false;
			ck_assert_msg(!strncmp(line, ".B ", 3), "%s:%d: .TP without .B KEY", d->path,
			              no);
			klen = strspn(line + 3, "abcdefghijklmnopqrstuvwxyz_");
			cur = doc_add(d, sec, line + 3, klen, no);
			f = open_memstream(&body, &len);
			ck_assert_ptr_nonnull(f);
			continue;
		}
		if (cur)
			man_text(line, f);
	}
	if (cur) {
		fclose(f);
		doc_default(body, false, cur->def, sizeof(cur->def));
		free(body);
	}
	free(text);
}

static const char *const sec_names[] = {"[daemon]", "[engine]", "[controller NAME]"};

/* Every key of the table in d, in its section, with the table's default
 * ("unset" for an unset one, none for a required one) wherever d gives one,
 * given at least once; every key of d in the table; an uncommented
 * KEY = VALUE line in etc/nvmefs.conf holds the default.  Problems to out. */
static void doc_check(const struct doc *d, FILE *out)
{
	const struct cfg_key *k;

	for (size_t i = 0; (k = cfg_key(i)); i++) {
		unsigned found = 0, with_def = 0;

		for (unsigned j = 0; j < d->n; j++) {
			const struct doc_key *e = &d->keys[j];

			if (e->sec != k->section || strcmp(e->name, k->name))
				continue;
			found++;
			if (e->active && k->def_kind == CFG_DEF_VALUE && strcmp(e->value, k->def))
				fprintf(out, "%s:%d: %s = %s, not its default %s\n", d->path, e->line,
				        e->name, e->value, k->def);
			if (!e->def[0])
				continue;
			with_def++;
			if (!k->def || strcmp(e->def, k->def))
				fprintf(out, "%s:%d: %s %s: default \"%s\", the table's \"%s\"\n",
				        d->path, e->line, sec_names[k->section], e->name, e->def,
				        k->def ? k->def : "(none: required)");
		}
		if (!found)
			fprintf(out, "%s: %s %s is not documented\n", d->path, sec_names[k->section],
			        k->name);
		else if (k->def && !with_def)
			fprintf(out, "%s: %s %s: no default given (the table's: \"%s\")\n", d->path,
			        sec_names[k->section], k->name, k->def);
	}
	for (unsigned j = 0; j < d->n; j++) {
		const struct doc_key *e = &d->keys[j];

		for (size_t i = 0; (k = cfg_key(i)); i++)
			if (e->sec == k->section && !strcmp(e->name, k->name))
				break;
		if (!k)
			fprintf(out, "%s:%d: %s %s is not a key of the table\n", d->path, e->line,
			        sec_names[e->sec], e->name);
	}
}

START_TEST(test_keys_documented)
{
	static struct doc conf, man;
	char conf_path[PATH_MAX], man_path[PATH_MAX];
	char *problems = NULL;
	size_t len;
	FILE *out = open_memstream(&problems, &len);

	ck_assert_ptr_nonnull(out);
	snprintf(conf_path, sizeof(conf_path), "%s/../../etc/nvmefs.conf", examples_dir());
	snprintf(man_path, sizeof(man_path), "%s/../../docs/man/nvmefs.conf.5", examples_dir());
	conf = (struct doc){.path = conf_path};
	man = (struct doc){.path = man_path};
	doc_read_conf(&conf);
	doc_read_man(&man);
	doc_check(&conf, out);
	doc_check(&man, out);
	fclose(out);
	ck_assert_msg(!problems[0], "the documents and the key table differ:\n%s", problems);
	free(problems);
}
END_TEST

/* The table's own rules: names unique in a section, every row with a range
 * and help, a default unless required, the sections in order. */
START_TEST(test_key_table)
{
	const struct cfg_key *k, *o;
	size_t n = 0;

	for (size_t i = 0; (k = cfg_key(i)); i++, n++) {
		ck_assert_msg(k->name && k->range && k->range[0] && k->help && k->help[0],
		              "row %zu", i);
		ck_assert_msg((k->def == NULL) == (k->def_kind == CFG_DEF_REQUIRED), "%s", k->name);
		ck_assert_msg(k->def_kind != CFG_DEF_UNSET || !strcmp(k->def, "unset"), "%s",
		              k->name);
		if (i)
			ck_assert_msg(cfg_key(i - 1)->section <= k->section, "%s out of order", k->name);
		for (size_t j = 0; j < i; j++) {
			o = cfg_key(j);
			ck_assert_msg(o->section != k->section || strcmp(o->name, k->name),
			              "%s twice", k->name);
		}
	}
	ck_assert_uint_ge(n, 30);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("errors");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])) - 1);
	tcase_add_test(tc, test_offline_cpu);
	tcase_add_test(tc, t_volatile_ctrl);
	tcase_add_test(tc, t_no_controller_allowed);
	tcase_add_test(tc, test_all_errors_reported);
	tcase_add_test(tc, test_line_numbers);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_long_lines);
	tcase_add_test(tc, test_values_literal);
	suite_add_tcase(s, tc);

	tc = tcase_create("values");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_fuse_keys);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_paths_checked);
	tcase_add_test(tc, test_mountpoint_system_dirs);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_equal_sees_differences);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_test(tc, test_example_files);
	tcase_add_test(tc, test_shipped_config);
	tcase_add_test(tc, test_key_table);
	tcase_add_test(tc, test_keys_documented);
	suite_add_tcase(s, tc);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

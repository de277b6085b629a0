/* test_admin.c - the admin socket server over a real engine on the software
 * controller: every command's reply, bad requests, stalled clients, the
 * socket file's life cycle, fault injection into the software controller and
 * attach.
 *
 * The server runs in a private libev loop on the test's own thread; the test
 * is the client and turns the loop (EVRUN_NOWAIT) while it waits for replies,
 * so everything is deterministic and single-threaded.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <json-c/json.h>

#include "config.h"
#include "nvme.h"
#include "rig.h"
#include "sim.h"

#include "daemon/admin_priv.h"
#include "daemon/health.h"
#include "fuse_fs.h"

static char dir[64], sock_path[128];
static struct ev_loop *loop;
static struct cfg *cfg;
static struct sim *sim;
static struct nvme_ctrl *ctrl;
static struct nvme_reactor *reactor;
static struct nvme_qpair *qpair;
static struct nvme_ctrl *ctrls[1];
static struct nvme_reactor *reactors[1];
static struct nvme_qpair *qpairs[1];
static struct sim *sims[1];
static struct admin_ns nss[1];
static char ns_path[160];
static struct admin_ctx ctx;
static struct admin *adm;

/* the engine (tests/support/rig.h): sim, ctrl, reactor and qpair are its
 * parts; a test that starts the reactor does it with rig_start, one that
 * releases the controller's bus keeps it in g.kept[0] */
static struct rig g;

/* extra: more [daemon] lines, "" for none */
static void make_cfg_with(const char *extra)
{
	char text[1024];
	FILE *errs = tmpfile();
	int ret;

	snprintf(text, sizeof(text),
	         "[daemon]\nmountpoint = %s/mnt\nadmin_socket = %s\nfile_group = root\n%s"
	         "[engine]\nqueues = 1\nqueue_depth = 64\ncq_budget = 16\nmode = poll\n"
	         "[controller nvme0]\ndevice = sim\nsize = 4M\nblock_size = 4096\n",
	         dir, sock_path, extra);
	ret = cfg_load_string("test.conf", text, &cfg, errs);
	if (ret) {
		char buf[1024] = "";

		rewind(errs);
		fread(buf, 1, sizeof(buf) - 1, errs);
		ck_abort_msg("config: %s", buf);
	}
	fclose(errs);
}

static void make_cfg(void)
{
	make_cfg_with("");
}

/* Replace the config of ctx (before start()) by one with these [daemon] lines. */
static void use_daemon_lines(const char *extra)
{
	cfg_free(cfg);
	make_cfg_with(extra);
	ctx.cfg = cfg;
}

static void setup(void)
{
	/* a pool below the 2 MiB at which the engine tries hugepages */
	struct rig_opts o = {.mode = NVME_MODE_POLL, .pool_bytes = 1u << 20};

	o.sim[0] = (struct sim_opts){.name = "nvme0", .nr_ns = 1, .mdts = 7, .max_queues = 4};
	o.sim[0].ns[0] =
	    (struct sim_ns_opts){.nlba = 1024, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	o.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 64, .cq_budget = 16, .io_timeout_ms = 5000};

	/* DMA memory is pinned: lift the memlock limit where we may (root) */
	setrlimit(RLIMIT_MEMLOCK, &(struct rlimit){RLIM_INFINITY, RLIM_INFINITY});
	snprintf(dir, sizeof(dir), "/tmp/test_admin.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/admin.sock", dir);
	make_cfg();
	loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(loop);

	ck_assert_int_eq(rig_open(&g, &o), 0);
	sim = g.sim[0];
	ctrl = g.c[0];
	reactor = g.r[0];
	qpair = g.qp[0][0];
	ctrls[0] = ctrl;
	reactors[0] = reactor;
	qpairs[0] = qpair;
	sims[0] = sim;
	snprintf(ns_path, sizeof(ns_path), "%s/mnt/nvme0n1", dir);
	nss[0] = (struct admin_ns){.name = "nvme0n1",
	                           .ctrl = 0,
	                           .nsid = 1,
	                           .size = 1024 * 4096ull,
	                           .lba_size = 4096,
	                           .path = ns_path};
	ctx = (struct admin_ctx){
	    .cfg = cfg,
	    .config_path = "test.conf",
	    .start_time = time(NULL) - 5,
	    .ctrls = ctrls,
	    .nr_ctrls = 1,
	    .reactors = reactors,
	    .nr_reactors = 1,
	    .qpairs = qpairs,
	    .ns = nss,
	    .nr_ns = 1,
	    /* long enough for a client slowed by valgrind on a busy machine;
	     * t_stalled_clients sets its own short one */
	    .idle_timeout = 30,
	    .sims = sims,
	};
	adm = NULL;
}

static void teardown(void)
{
	admin_stop(adm);
	rig_close(&g); /* the controller owns the sim's bus, unless released */
	ev_loop_destroy(loop);
	cfg_free(cfg);
	unlink(sock_path);
	rmdir(dir);
}

/* ---- client side ---- */

static int client(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, sock_path);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
	              strerror(errno));
	return fd;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* set by a test whose software controller holds admin completions back
 * (sim_fault_admin_delay): inline, they are posted only by sim_poll */
static bool poll_sim;

static void turn(void)
{
	if (poll_sim)
		sim_poll(sim);
	ev_run(loop, EVRUN_NOWAIT);
}

static void send_str(int fd, const char *s, size_t len)
{
	double t0 = now();

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n > 0) {
			s += n;
			len -= (size_t)n;
			continue;
		}
		ck_assert_msg(n < 0 && errno == EAGAIN, "send: %s", strerror(errno));
		turn();
		ck_assert_msg(now() - t0 < 30, "send timed out");
	}
}

/* Read one reply line (turning the server's loop meanwhile); NULL at EOF. */
static char *recv_line(int fd)
{
	static char buf[1 << 20];
	size_t len = 0;
	double t0 = now();

	for (;;) {
		ssize_t n = recv(fd, buf + len, 1, 0); /* byte by byte: never eat the next reply */

		if (n == 1) {
			if (buf[len] == '\n') {
				buf[len] = '\0';
				return buf;
			}
			len++;
			ck_assert_uint_lt(len, sizeof(buf) - 1);
			continue;
		}
		/* closed; with unread input of ours, Linux resets instead */
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return NULL;
		ck_assert_msg(errno == EAGAIN, "recv: %s", strerror(errno));
		turn();
		poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 1);
		ck_assert_msg(now() - t0 < 30, "no reply within 30 s");
	}
}

static json_object *reply(int fd)
{
	char *line = recv_line(fd);
	json_object *o;

	ck_assert_msg(line != NULL, "connection closed instead of a reply");
	o = json_tokener_parse(line);
	ck_assert_msg(o && json_object_is_type(o, json_type_object), "not a JSON object: %s", line);
	return o;
}

static json_object *ask_fd(int fd, const char *req)
{
	send_str(fd, req, strlen(req));
	send_str(fd, "\n", 1);
	return reply(fd);
}

static json_object *ask(const char *req)
{
	int fd = client();
	json_object *o = ask_fd(fd, req);

	close(fd);
	return o;
}

static json_object *get(json_object *o, const char *k)
{
	json_object *v;

	ck_assert_msg(json_object_object_get_ex(o, k, &v), "no key \"%s\" in %s", k,
	              json_object_to_json_string(o));
	return v;
}

static void expect_ok(json_object *o)
{
	ck_assert_msg(json_object_get_boolean(get(o, "ok")), "not ok: %s",
	              json_object_to_json_string(o));
}

static void expect_error(json_object *o, const char *what)
{
	ck_assert_msg(!json_object_get_boolean(get(o, "ok")), "ok for a bad request: %s",
	              json_object_to_json_string(o));
	ck_assert_msg(strstr(json_object_get_string(get(o, "error")), what),
	              "error \"%s\" lacks \"%s\"", json_object_get_string(get(o, "error")), what);
}

static void start(void)
{
	ck_assert_int_eq(admin_start(loop, &ctx, &adm), 0);
}

/* ---- I/O through the engine, so the counters have something to count ---- */

static int io_done, io_err;

static void io_cb(void *arg, int err, uint16_t status)
{
	(void)arg, (void)status;
	io_done++;
	io_err = err;
}

static void write_blocks(unsigned n)
{
	void *buf = nvme_reactor_buf_alloc(reactor, 4096);
	double t0 = now();

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0xa5, 4096);
	io_done = 0;
	for (unsigned i = 0; i < n; i++) {
		ck_assert_int_eq(nvme_qpair_write(qpair, 1, i, buf, 4096, false, io_cb, NULL), 0);
		nvme_qpair_flush_sq(qpair);
		while (io_done <= (int)i) {
			nvme_qpair_reap(qpair, 0);
			ck_assert_msg(now() - t0 < 30, "write did not complete");
		}
		ck_assert_int_eq(io_err, 0);
	}
	nvme_reactor_buf_free(reactor, buf, 4096);
}

/* ---- tests ---- */

START_TEST(t_status)
{
	json_object *o, *c;

	start();
	o = ask("{\"cmd\":\"status\",\"id\":7}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "version")), NVMEFS_VERSION);
	ck_assert_int_eq(json_object_get_int(get(o, "pid")), getpid());
	ck_assert_int_eq(json_object_get_int(get(o, "id")), 7);
	ck_assert(json_object_get_double(get(o, "uptime_s")) >= 5.0);
	ck_assert_str_eq(json_object_get_string(get(o, "config_file")), "test.conf");
	ck_assert_str_eq(json_object_get_string(get(o, "admin_socket")), sock_path);
	ck_assert_str_eq(json_object_get_string(get(o, "mode")), "poll");
	ck_assert_ptr_nonnull(strstr(json_object_get_string(get(o, "mountpoint")), "/mnt"));
	ck_assert_int_eq(json_object_array_length(get(o, "controllers")), 1);
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	ck_assert_str_eq(json_object_get_string(get(c, "name")), "nvme0");
	ck_assert_str_eq(json_object_get_string(get(c, "device")), "sim");
	ck_assert_str_eq(json_object_get_string(get(c, "mode")), "poll");
	ck_assert_int_eq(json_object_get_int(get(c, "io_queues")), 1);
	ck_assert_int_eq(json_object_array_length(get(o, "reactors")), 1);
	ck_assert_int_eq(
	    json_object_get_int(get(json_object_array_get_idx(get(o, "reactors"), 0), "cpu")), -1);
	json_object_put(o);
}
END_TEST

START_TEST(t_stats)
{
	json_object *o, *q, *t, *lat;

	start();
	write_blocks(3);
	o = ask("{\"cmd\":\"stats\"}");
	expect_ok(o);
	q = json_object_array_get_idx(
	    get(json_object_array_get_idx(get(o, "reactors"), 0), "qpairs"), 0);
	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(json_object_get_string(get(q, "controller")), "nvme0");
	ck_assert_int_eq(json_object_get_int(get(q, "qid")), 1);
	ck_assert_uint_eq(json_object_get_uint64(get(q, "submitted")), 3);
	ck_assert_uint_eq(json_object_get_uint64(get(q, "completed")), 3);
	ck_assert_uint_eq(json_object_get_uint64(get(q, "bytes_written")), 3 * 4096);
	ck_assert_uint_eq(json_object_get_uint64(get(q, "bytes_read")), 0);
	ck_assert_uint_eq(json_object_get_uint64(get(get(q, "errors"), "total")), 0);
	ck_assert_uint_eq(json_object_get_uint64(get(q, "bogus_cqes")), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "inflight")), 0);
	ck_assert_int_eq(json_object_array_length(get(q, "cpl_per_pass")), NVME_CPP_BUCKETS);
	lat = get(q, "latency_us");
	ck_assert(json_object_get_double(get(lat, "max")) > 0);
	ck_assert(json_object_get_double(get(lat, "p50")) <=
	          json_object_get_double(get(lat, "p99")));
	ck_assert(json_object_get_double(get(lat, "p99")) <=
	          json_object_get_double(get(lat, "max")));
	ck_assert(json_object_get_double(get(q, "doorbells_per_io")) > 0);
	get(q, "cpl_per_pass_mean");
	get(q, "sq_doorbells");
	get(q, "interrupts");
	get(q, "idle_polls");
	get(q, "reap_passes");
	get(q, "budget_exhausted");
	t = get(o, "totals");
	ck_assert_uint_eq(json_object_get_uint64(get(t, "completed")), 3);
	ck_assert_uint_eq(json_object_get_uint64(get(t, "bytes_written")), 3 * 4096);
	get(o, "time");
	json_object_put(o);
}
END_TEST

START_TEST(t_queues_namespaces)
{
	json_object *o, *q, *n;

	start();
	o = ask("{\"cmd\":\"queues\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "queues")), 1);
	q = json_object_array_get_idx(get(o, "queues"), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "reactor")), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "qid")), 1);
	ck_assert_str_eq(json_object_get_string(get(q, "controller")), "nvme0");
	ck_assert_ptr_null(get(q, "vector")); /* poll mode: no interrupts */
	ck_assert_int_eq(json_object_get_int(get(q, "depth")), 64);
	ck_assert_int_eq(json_object_get_int(get(q, "inflight")), 0);
	get(q, "cpu");
	get(q, "node");
	json_object_put(o);

	o = ask("{\"cmd\":\"namespaces\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "namespaces")), 1);
	n = json_object_array_get_idx(get(o, "namespaces"), 0);
	ck_assert_str_eq(json_object_get_string(get(n, "name")), "nvme0n1");
	ck_assert_str_eq(json_object_get_string(get(n, "controller")), "nvme0");
	ck_assert_uint_eq(json_object_get_uint64(get(n, "size")), 4u << 20);
	ck_assert_uint_eq(json_object_get_uint64(get(n, "blocks")), 1024);
	ck_assert_int_eq(json_object_get_int(get(n, "lba_size")), 4096);
	ck_assert_str_eq(json_object_get_string(get(n, "path")), ns_path);
	json_object_put(o);
}
END_TEST

/* "interrupts" in status and queues: on in interrupt mode only; hybrid
 * polls and wires no vector */
START_TEST(t_interrupts_by_mode)
{
	static const struct {
		enum cfg_mode mode;
		bool on;
	} cases[] = {{CFG_MODE_POLL, false}, {CFG_MODE_HYBRID, false}, {CFG_MODE_INTERRUPT, true}};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_object *o;

		cfg->engine.mode = cases[i].mode;
		if (!adm)
			start();
		o = ask("{\"cmd\":\"queues\"}");
		expect_ok(o);
		ck_assert_msg(json_object_get_boolean(get(o, "interrupts")) == cases[i].on,
		              "queues, mode %s: interrupts %d", cfg_mode_name(cases[i].mode),
		              json_object_get_boolean(get(o, "interrupts")));
		json_object_put(o);
		o = ask("{\"cmd\":\"status\"}");
		expect_ok(o);
		ck_assert(json_object_get_boolean(get(json_object_array_get_idx(get(o, "controllers"),
		                                                                  0),
		                                       "interrupts")) == cases[i].on);
		json_object_put(o);
	}
}
END_TEST

START_TEST(t_identify)
{
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(ctrl);
	json_object *o, *ns;

	start();
	o = ask("{\"cmd\":\"identify\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "model")), in->model);
	ck_assert_str_eq(json_object_get_string(get(o, "serial")), in->serial);
	ck_assert_str_eq(json_object_get_string(get(o, "firmware")), in->firmware);
	ck_assert_uint_eq(json_object_get_uint64(get(o, "max_queue_entries")), in->max_entries);
	ck_assert_uint_eq(json_object_get_uint64(get(o, "max_transfer")), in->max_xfer);
	ck_assert_int_eq(json_object_get_int(get(o, "mdts")), 7);
	ck_assert_int_eq(json_object_get_int(get(o, "io_queues_granted")), (int)in->nr_io_queues);
	ck_assert_int_eq(json_object_get_int(get(o, "oncs")), in->oncs);
	/* the decoded list has exactly the names of the set bits */
	ck_assert_int_eq(json_object_array_length(get(o, "oncs_decoded")),
	                 __builtin_popcount(in->oncs & 0x1ff));
	ck_assert_int_eq(json_object_array_length(get(o, "oacs_decoded")),
	                 __builtin_popcount(in->oacs & 0x7ff));
	ck_assert_int_eq(json_object_get_boolean(get(o, "vwc")), in->vwc);
	ck_assert_uint_eq(json_object_get_uint64(get(o, "nn")), in->nn);
	get(o, "version");
	get(o, "sgls");
	get(o, "oacs");
	ns = get(o, "namespaces");
	ck_assert_int_eq(json_object_array_length(ns), 1);
	ck_assert_uint_eq(json_object_get_uint64(get(json_object_array_get_idx(ns, 0), "blocks")),
	                  1024);
	json_object_put(o);

	o = ask("{\"cmd\":\"identify\",\"controller\":\"nope\"}");
	expect_error(o, "no controller named \"nope\" (have: nvme0)");
	json_object_put(o);
	o = ask("{\"cmd\":\"identify\"}");
	expect_error(o, "needs \"controller\"");
	json_object_put(o);
}
END_TEST

START_TEST(t_config_metrics)
{
	json_object *o;
	struct cfg *back = NULL;
	const char *text;
	char line[256];

	start();
	o = ask("{\"cmd\":\"config\"}");
	expect_ok(o);
	text = json_object_get_string(get(o, "text"));
	/* the effective config is a valid config naming our socket */
	ck_assert_int_eq(cfg_load_string("reply", text, &back, stderr), 0);
	ck_assert_str_eq(back->daemon.admin_socket, sock_path);
	ck_assert_uint_eq(back->engine.queue_depth, 64);
	cfg_free(back);
	json_object_put(o);

	write_blocks(2);
	o = ask("{\"cmd\":\"metrics\"}");
	expect_ok(o);
	text = json_object_get_string(get(o, "text"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE nvmefs_qpair_submitted_total counter\n"));
	ck_assert_ptr_nonnull(strstr(text, "# HELP nvmefs_qpair_completed_total "));
	ck_assert_ptr_nonnull(strstr(
	    text,
	    "\nnvmefs_qpair_completed_total{controller=\"nvme0\",qid=\"1\",reactor=\"0\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_qpair_written_bytes_total{controller="
	                                   "\"nvme0\",qid=\"1\",reactor=\"0\"} 8192\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE nvmefs_qpair_latency_seconds histogram\n"));
	snprintf(line, sizeof(line),
	         "\nnvmefs_qpair_latency_seconds_count{controller=\"nvme0\","
	         "qid=\"1\",reactor=\"0\"} 2\n");
	ck_assert_ptr_nonnull(strstr(text, line));
	ck_assert_ptr_nonnull(strstr(text, "le=\"+Inf\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "class=\"media\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE nvmefs_start_time_seconds gauge\n"));
	snprintf(line, sizeof(line), "\nnvmefs_start_time_seconds %lld\n",
	         (long long)ctx.start_time);
	ck_assert_msg(strstr(text, line), "no %s", line + 1);
	/* _sum is the engine's exact sum of the two latencies */
	struct nvme_qpair_stats qs;

	nvme_qpair_stats_get(qpair, &qs);
	ck_assert_uint_gt(qs.lat_sum_ns, 0);
	snprintf(line, sizeof(line),
	         "\nnvmefs_qpair_latency_seconds_sum{controller=\"nvme0\",qid=\"1\",reactor=\"0\"} "
	         "%.9f\n",
	         (double)qs.lat_sum_ns / 1e9);
	ck_assert_msg(strstr(text, line), "no %s", line + 1);
	json_object_put(o);
}
END_TEST

START_TEST(t_bad_requests)
{
	int fd;
	json_object *o;

	start();
	fd = client();
	/* every bad request gets an error, and the same connection goes on */
	o = ask_fd(fd, "{\"cmd\":");
	expect_error(o, "malformed request");
	json_object_put(o);
	o = ask_fd(fd, "this is not json");
	expect_error(o, "malformed request");
	json_object_put(o);
	o = ask_fd(fd, "[\"status\"]");
	expect_error(o, "not a JSON object");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"status\"} trailing");
	expect_error(o, "malformed request");
	json_object_put(o);
	o = ask_fd(fd, "{\"command\":\"status\"}");
	expect_error(o, "\"cmd\"");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":42}");
	expect_error(o, "\"cmd\"");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"reboot\",\"id\":\"x\"}");
	expect_error(o, "unknown command \"reboot\"");
	ck_assert_str_eq(json_object_get_string(get(o, "id")), "x");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	/* pipelined requests are answered in order */
	send_str(fd, "{\"cmd\":\"queues\",\"id\":1}\n\n{\"cmd\":\"status\",\"id\":2}\n", 50);
	o = reply(fd);
	ck_assert_int_eq(json_object_get_int(get(o, "id")), 1);
	get(o, "queues");
	json_object_put(o);
	o = reply(fd);
	ck_assert_int_eq(json_object_get_int(get(o, "id")), 2);
	get(o, "version");
	json_object_put(o);
	close(fd);
}
END_TEST

START_TEST(t_oversize)
{
	size_t n = ADMIN_LINE_MAX + 4096;
	char *big = malloc(n);
	json_object *o;
	int fd;

	start();
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	fd = client();
	send_str(fd, big, n);
	o = reply(fd);
	expect_error(o, "longer than 65536");
	json_object_put(o);
	ck_assert_ptr_null(recv_line(fd)); /* and the client is closed */
	close(fd);
	free(big);
	/* the daemon carries on */
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

START_TEST(t_stalled_clients)
{
	int half, hog, fd;
	json_object *o;
	char req[] = "{\"cmd\":\"stats\"}\n";
	double t0;
	ssize_t n;

	ctx.idle_timeout = 0.5;
	start();
	half = client();
	send_str(half, "{\"cmd\":\"sta", 11); /* half a line, then nothing */
	/* a client that pipelines requests and never reads its replies */
	hog = client();
	for (int i = 0; i < 20000; i++) {
		n = send(hog, req, sizeof(req) - 1, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN)
			break; /* the server stopped reading it: good */
		ck_assert_int_eq(n, sizeof(req) - 1);
		turn();
	}
	for (int i = 0; i < 50; i++)
		turn();
	/* neither holds up another client */
	fd = client();
	o = ask_fd(fd, "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	close(fd);
	/* the idle timeout (0.5 s here) closes the half-line client */
	t0 = now();
	for (;;) {
		char c;

		n = recv(half, &c, 1, 0);
		if (n == 0)
			break;
		ck_assert_msg(n < 0 && errno == EAGAIN, "unexpected data for the half-line client");
		turn();
		poll(NULL, 0, 5);
		ck_assert_msg(now() - t0 < 30, "stalled client not closed by the idle timeout");
	}
	close(half);
	close(hog);
}
END_TEST

/* No admin_group, no operator_group: root's alone, whatever file_group is. */
START_TEST(t_socket_mode)
{
	struct stat st;

	start();
	ck_assert_int_eq(stat(sock_path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_uid, 0);
	admin_stop(adm);
	adm = NULL;
	ck_assert_int_eq(access(sock_path, F_OK), -1); /* removed on stop */
}
END_TEST

START_TEST(t_stale_socket)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	json_object *o;

	/* a socket file nobody listens on, as a crashed daemon leaves it */
	strcpy(sa.sun_path, sock_path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), -1);
	ck_assert_int_eq(errno, ECONNREFUSED);
	close(fd);
	start();
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

START_TEST(t_live_socket)
{
	struct admin *second = NULL;
	json_object *o;

	start();
	ck_assert_int_eq(admin_start(loop, &ctx, &second), -EADDRINUSE);
	ck_assert_ptr_null(second);
	/* the first one keeps its socket */
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

START_TEST(t_not_a_socket)
{
	struct admin *a = NULL;
	int fd = open(sock_path, O_CREAT | O_WRONLY, 0600);
	struct stat st;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "keep", 4), 4);
	close(fd);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), -EEXIST);
	ck_assert_int_eq(stat(sock_path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, 4);
}
END_TEST

START_TEST(t_too_many_clients)
{
	int fds[ADMIN_MAX_CLIENTS + 1];
	char *line;
	json_object *o;

	start();
	for (int i = 0; i < ADMIN_MAX_CLIENTS + 1; i++) {
		fds[i] = client();
		turn(); /* accept it before the backlog fills */
	}
	/* the one over the limit is told so and closed */
	line = recv_line(fds[ADMIN_MAX_CLIENTS]);
	ck_assert_ptr_nonnull(line);
	ck_assert_ptr_nonnull(strstr(line, "too many admin clients"));
	ck_assert_ptr_null(recv_line(fds[ADMIN_MAX_CLIENTS]));
	/* the others are served */
	o = ask_fd(fds[0], "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	for (int i = 0; i < ADMIN_MAX_CLIENTS + 1; i++)
		close(fds[i]);
	for (int i = 0; i < 10; i++)
		turn();
	/* and once they are gone, a new one is too */
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

/* ---- who may do what: SO_PEERCRED and SO_PEERGROUPS ---- */

#define ADM_GID  4242 /* admin_group in these tests */
#define OP_GID   4343 /* operator_group */
#define FILE_GID 4444 /* a group with no rights on the socket (the file group) */

/* Connect as euid/egid with these supplementary groups, as the kernel then
 * records them for the peer, and become root again.  The fd, or -errno of
 * connect. */
static int client_as(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0), ret = 0;

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, sock_path);
	ck_assert_int_eq(setgroups(n, groups), 0);
	ck_assert_int_eq(setegid(gid), 0);
	ck_assert_int_eq(seteuid(uid), 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		ret = -errno;
	ck_assert_int_eq(seteuid(0), 0);
	ck_assert_int_eq(setegid(0), 0);
	ck_assert_int_eq(setgroups(0, NULL), 0);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

static void use_groups(void)
{
	char lines[128];

	snprintf(lines, sizeof(lines), "admin_group = %u\noperator_group = %u\n", ADM_GID,
	         OP_GID);
	use_daemon_lines(lines);
	/* others may pass through the test's directory: only the socket's
	 * own mode decides who connects */
	ck_assert_int_eq(chmod(dir, 0711), 0);
}

START_TEST(t_socket_mode_groups)
{
	struct stat st;
	char lines[64];

	use_groups();
	start();
	ck_assert_int_eq(stat(sock_path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, ADM_GID);
	admin_stop(adm);
	adm = NULL;
	/* operators only: the socket is theirs */
	snprintf(lines, sizeof(lines), "operator_group = %u\n", OP_GID);
	use_daemon_lines(lines);
	start();
	ck_assert_int_eq(stat(sock_path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, OP_GID);
}
END_TEST

/* A member of admin_group reads but changes nothing; an operator changes;
 * the file group cannot even connect. */
START_TEST(t_peer_policy)
{
	static const char *const reads[] = {"status", "stats", "queues", "namespaces", "config",
	                                    "metrics", "list"};
	static const char *const logs[] = {"smart-log", "error-log", "fw-log"};
	const gid_t viewer[] = {ADM_GID}, oper[] = {ADM_GID, OP_GID}, filegrp[] = {FILE_GID};
	json_object *o;
	int fd;

	use_groups();
	start();
	/* the file group (and anyone else): the socket's mode keeps it out */
	ck_assert_int_eq(client_as(60001, FILE_GID, filegrp, 1), -EACCES);
	ck_assert_int_eq(client_as(60001, 60001, NULL, 0), -EACCES);

	fd = client_as(60002, 60002, viewer, 1);
	ck_assert_int_ge(fd, 0);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		char req[64];

		snprintf(req, sizeof(req), "{\"cmd\":\"%s\"}", reads[i]);
		o = ask_fd(fd, req);
		expect_ok(o);
		json_object_put(o);
	}
	o = ask_fd(fd, "{\"cmd\":\"identify\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	json_object_put(o);
	/* the log pages only read: a viewer may */
	for (size_t i = 0; i < sizeof(logs) / sizeof(logs[0]); i++) {
		char req[96];

		snprintf(req, sizeof(req), "{\"cmd\":\"%s\",\"controller\":\"nvme0\"}", logs[i]);
		o = ask_fd(fd, req);
		expect_ok(o);
		json_object_put(o);
	}
	o = ask_fd(fd, "{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"hang\"}");
	expect_error(o, "permission denied");
	expect_error(o, "operator_group");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"attach\",\"controller\":\"nvme0\"}");
	expect_error(o, "permission denied");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"restart\"}");
	expect_error(o, "permission denied");
	json_object_put(o);
	close(fd);
	/* the refused hang did not happen: I/O still completes */
	write_blocks(1);

	/* the primary group counts as much as a supplementary one */
	fd = client_as(60003, ADM_GID, NULL, 0);
	ck_assert_int_ge(fd, 0);
	o = ask_fd(fd, "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	close(fd);

	fd = client_as(60004, 60004, oper, 2);
	ck_assert_int_ge(fd, 0);
	o = ask_fd(fd, "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"delay\",\"ms\":1}");
	expect_ok(o);
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"clear\"}");
	expect_ok(o);
	json_object_put(o);
	/* an operator passes the policy: this rig has no restart to run */
	o = ask_fd(fd, "{\"cmd\":\"restart\"}");
	expect_error(o, "not available");
	json_object_put(o);
	close(fd);
}
END_TEST

/* One user cannot take every slot: ADMIN_MAX_CLIENTS_PER_UID each, and the
 * last ADMIN_ROOT_RESERVE slots are root's. */
START_TEST(t_clients_per_uid)
{
	const gid_t viewer[] = {ADM_GID};
	int fds[ADMIN_MAX_CLIENTS + 2], n = 0, fd;
	unsigned users = (ADMIN_MAX_CLIENTS - ADMIN_ROOT_RESERVE) / ADMIN_MAX_CLIENTS_PER_UID;
	char *line;
	json_object *o;

	use_groups();
	start();
	for (int i = 0; i < ADMIN_MAX_CLIENTS_PER_UID; i++) {
		fds[n] = client_as(60010, 60010, viewer, 1);
		ck_assert_int_ge(fds[n], 0);
		n++;
		turn();
	}
	fd = client_as(60010, 60010, viewer, 1);
	ck_assert_int_ge(fd, 0);
	turn();
	line = recv_line(fd);
	ck_assert_ptr_nonnull(line);
	ck_assert_ptr_nonnull(strstr(line, "too many admin clients of this user"));
	ck_assert_ptr_null(recv_line(fd));
	close(fd);
	/* other users fill what is not kept for root */
	for (unsigned u = 1; u < users; u++)
		for (int i = 0; i < ADMIN_MAX_CLIENTS_PER_UID; i++) {
			fds[n] = client_as(60010 + u, 60010, viewer, 1);
			ck_assert_int_ge(fds[n], 0);
			n++;
			turn();
		}
	ck_assert_int_eq(n, ADMIN_MAX_CLIENTS - ADMIN_ROOT_RESERVE);
	fd = client_as(60100, 60100, viewer, 1);
	ck_assert_int_ge(fd, 0);
	turn();
	line = recv_line(fd);
	ck_assert_ptr_nonnull(line);
	ck_assert_ptr_nonnull(strstr(line, "kept for root"));
	close(fd);
	/* root still gets in, and is served */
	fds[n] = client();
	turn();
	o = ask_fd(fds[n], "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	n++;
	/* and the users' clients are still served too */
	o = ask_fd(fds[0], "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}
END_TEST

/* A reply longer than reply_max is not sent: an error says why, and the
 * client may go on. */
START_TEST(t_reply_cap)
{
	json_object *o;
	int fd;

	ctx.reply_max = 400;
	start();
	fd = client();
	o = ask_fd(fd, "{\"cmd\":\"metrics\"}");
	expect_error(o, "exceeds the limit of 400 bytes");
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"nope\"}");
	expect_error(o, "unknown command");
	json_object_put(o);
	close(fd);
}
END_TEST

/* ---- recovery: state, counters, inject, attach ---- */

static const char *const rkeys[] = {
    "timeouts",   "aborts_sent",   "aborts_ok",   "resets_started",
    "resets_ok",  "resets_failed", "resubmitted", "failed_after_retries",
    "cfs_events", "removals",      "isolations",  "cancelled",
};

START_TEST(t_recovery_views)
{
	json_object *o, *c, *r, *q;
	const char *text;

	start();
	write_blocks(1);
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	ck_assert_str_eq(json_object_get_string(get(c, "state")), "live");
	json_object_put(o);

	o = ask("{\"cmd\":\"namespaces\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(
	                     get(json_object_array_get_idx(get(o, "namespaces"), 0), "state")),
	                 "live");
	json_object_put(o);

	o = ask("{\"cmd\":\"stats\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "controllers")), 1);
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	ck_assert_str_eq(json_object_get_string(get(c, "name")), "nvme0");
	ck_assert_str_eq(json_object_get_string(get(c, "state")), "live");
	r = get(c, "recovery");
	for (size_t k = 0; k < sizeof(rkeys) / sizeof(rkeys[0]); k++)
		ck_assert_msg(json_object_get_uint64(get(r, rkeys[k])) == 0, "%s not 0", rkeys[k]);
	ck_assert(json_object_get_double(get(r, "reset_max_ms")) == 0.0);
	q = json_object_array_get_idx(
	    get(json_object_array_get_idx(get(o, "reactors"), 0), "qpairs"), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "completed")), 1);
	ck_assert_int_eq(json_object_get_int(get(q, "timeouts")), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "resubmitted")), 0);
	ck_assert_int_eq(json_object_get_int(get(q, "failed_after_retries")), 0);
	ck_assert_int_eq(json_object_get_int(get(get(o, "totals"), "aborts_sent")), 0);
	json_object_put(o);

	o = ask("{\"cmd\":\"metrics\"}");
	expect_ok(o);
	text = json_object_get_string(get(o, "text"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_controller_state{controller=\"nvme0\",state=\"live\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_controller_state{controller=\"nvme0\",state=\"removed\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE nvmefs_controller_resets_started_total counter\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_controller_timeouts_total{controller=\"nvme0\"} 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_controller_removals_total{controller=\"nvme0\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(
	    text,
	    "\nnvmefs_qpair_timeouts_total{controller=\"nvme0\",qid=\"1\",reactor=\"0\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_qpair_failed_after_retries_total{controller="
	                                   "\"nvme0\",qid=\"1\",reactor=\"0\"} 0\n"));
	json_object_put(o);
}
END_TEST

/* One 4 KiB write at block 0, reaped until it completes (or 5 s); its error. */
static int write_one(void)
{
	void *buf = nvme_reactor_buf_alloc(reactor, 4096);
	double t0 = now();

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0x5a, 4096);
	io_done = 0;
	ck_assert_int_eq(nvme_qpair_write(qpair, 1, 0, buf, 4096, false, io_cb, NULL), 0);
	nvme_qpair_flush_sq(qpair);
	while (!io_done) {
		nvme_qpair_reap(qpair, 0);
		ck_assert_msg(now() - t0 < 30, "write did not complete");
	}
	nvme_reactor_buf_free(reactor, buf, 4096);
	return io_err;
}

START_TEST(t_inject)
{
	json_object *o;
	void *buf;
	double t0;

	start();
	/* fail: the next command fails with the status given, the one after works */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"fail\",\"count\":1,"
	        "\"status\":641}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "fault")), "fail");
	ck_assert_int_eq(json_object_get_int(get(o, "status")), 641);
	ck_assert_str_eq(json_object_get_string(get(o, "state")), "live");
	json_object_put(o);
	ck_assert_int_eq(write_one(), -EIO);
	ck_assert_int_eq(write_one(), 0);

	/* hang: a command stays on the device; unhang lets it complete */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"hang\"}");
	expect_ok(o);
	json_object_put(o);
	buf = nvme_reactor_buf_alloc(reactor, 4096);
	io_done = 0;
	ck_assert_int_eq(nvme_qpair_write(qpair, 1, 1, buf, 4096, false, io_cb, NULL), 0);
	nvme_qpair_flush_sq(qpair);
	for (int i = 0; i < 100; i++) {
		sim_poll(sim);
		nvme_qpair_reap(qpair, 0);
	}
	ck_assert_int_eq(io_done, 0);
	ck_assert_uint_eq(nvme_qpair_inflight(qpair), 1);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"unhang\"}");
	expect_ok(o);
	json_object_put(o);
	t0 = now();
	while (!io_done) {
		sim_poll(sim);
		nvme_qpair_reap(qpair, 0);
		ck_assert_msg(now() - t0 < 30, "the write did not complete after unhang");
	}
	ck_assert_int_eq(io_err, 0);

	/* hang-loop: hung the same way (a reset would not end it); unhang
	 * ends it too */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"hang-loop\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "fault")), "hang-loop");
	json_object_put(o);
	io_done = 0;
	ck_assert_int_eq(nvme_qpair_write(qpair, 1, 1, buf, 4096, false, io_cb, NULL), 0);
	nvme_qpair_flush_sq(qpair);
	for (int i = 0; i < 100; i++) {
		sim_poll(sim);
		nvme_qpair_reap(qpair, 0);
	}
	ck_assert_int_eq(io_done, 0);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"unhang\"}");
	expect_ok(o);
	json_object_put(o);
	t0 = now();
	while (!io_done) {
		sim_poll(sim);
		nvme_qpair_reap(qpair, 0);
		ck_assert_msg(now() - t0 < 30, "the write did not complete after unhang");
	}
	ck_assert_int_eq(io_err, 0);
	nvme_reactor_buf_free(reactor, buf, 4096);

	/* delay: the reply echoes it; 0 turns it off */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"delay\",\"ms\":0}");
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "ms")), 0);
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"lose\",\"count\":0}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

/* warn and ns-*: SMART critical warnings and namespace changes, which the
 * engine hears of through its asynchronous events */
START_TEST(t_inject_events)
{
	json_object *o;
	double t0;
	struct nvme_ctrl_aen_stats st;

	start();
	/* a namespace change posts a call to the qpair's reactor (emptying its
	 * namespace cache), as in the daemon, whose reactors all run */
	ck_assert_int_eq(rig_start(&g), 0);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"warn\","
	        "\"warning\":\"temperature\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "warning")), "temperature");
	json_object_put(o);
	t0 = now();
	do {
		nvme_ctrl_aen_stats_get(ctrl, &st);
		ck_assert_msg(now() - t0 < 30, "no SMART event");
	} while (st.events[NVME_AEN_SMART] != 1);
	ck_assert_uint_eq(st.critical_warning, NVME_SMART_CRIT_TEMPERATURE);
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_uint_eq((uint64_t)json_object_get_int64(get(o, "critical_warning")), NVME_SMART_CRIT_TEMPERATURE);
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"warn\","
	        "\"warning\":\"clear\"}");
	expect_ok(o);
	json_object_put(o);
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	ck_assert_uint_eq((uint64_t)json_object_get_int64(get(o, "critical_warning")), 0);
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"warn\","
	        "\"warning\":\"hot\"}");
	expect_error(o, "inject warn needs \"warning\": spare, temperature");
	json_object_put(o);

	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-add\","
	        "\"nsid\":2,\"bytes\":4194304}");
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "nsid")), 2);
	ck_assert_int_eq(json_object_get_int64(get(o, "bytes")), 4194304);
	json_object_put(o);
	t0 = now();
	while (__atomic_load_n(&nvme_ctrl_get_info(ctrl)->nr_ns, __ATOMIC_ACQUIRE) != 2)
		ck_assert_msg(now() - t0 < 30, "namespace 2 not seen");
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-add\","
	        "\"nsid\":2,\"bytes\":4194304}");
	expect_error(o, "inject ns-add: namespace 2 of nvme0: exists already");
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-resize\","
	        "\"nsid\":2,\"bytes\":8388608}");
	expect_ok(o);
	json_object_put(o);
	t0 = now();
	while (__atomic_load_n(&nvme_ctrl_get_info(ctrl)->ns[1].nlba, __ATOMIC_ACQUIRE) != 2048)
		ck_assert_msg(now() - t0 < 30, "namespace 2 did not grow");
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-remove\","
	        "\"nsid\":2}");
	expect_ok(o);
	json_object_put(o);
	t0 = now();
	while (!__atomic_load_n(&nvme_ctrl_get_info(ctrl)->ns[1].removed, __ATOMIC_ACQUIRE))
		ck_assert_msg(now() - t0 < 30, "namespace 2 not removed");
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-remove\","
	        "\"nsid\":2}");
	expect_error(o, "no such namespace");
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-add\","
	        "\"nsid\":17,\"bytes\":4096}");
	expect_error(o, "inject ns-add: \"nsid\" 17 is outside 0..16");
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"ns-resize\","
	        "\"nsid\":1}");
	expect_error(o, "inject ns-resize needs \"bytes\"");
	json_object_put(o);

	/* misplaced and corrupted data (their effect: test_pi, t-pi) */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"misdirect-write\","
	        "\"count\":2,\"blocks\":16}");
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "blocks")), 16);
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"misdirect-read\","
	        "\"count\":1}");
	expect_error(o, "inject misdirect-read needs \"blocks\"");
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"corrupt\","
	        "\"nsid\":1,\"lba\":3,\"byte\":100}");
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "lba")), 3);
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"corrupt\","
	        "\"nsid\":1,\"lba\":1000000000,\"byte\":0}");
	expect_error(o, "the LBA or the byte is outside it");
	json_object_put(o);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"corrupt\","
	        "\"nsid\":5,\"lba\":0,\"byte\":0}");
	expect_error(o, "no such namespace");
	json_object_put(o);
}
END_TEST

/* The faults that take the device away, on a controller released from the
 * engine first (so that the engine does not react, and the test owns the
 * bus): the admin socket reaches the sim through ctx.sims all the same. */
START_TEST(t_inject_dead)
{
	struct nvme_bus *bus = NULL;
	json_object *o;

	start();
	/* removal runs a step on the qpair's reactor: let it run */
	ck_assert_int_eq(rig_start(&g), 0);
	ck_assert_int_eq(nvme_ctrl_remove(ctrl, "test", &bus), 0);
	ck_assert_ptr_eq(bus, sim_bus(sim));
	g.kept[0] = bus;
	o = ask("{\"cmd\":\"status\"}");
	ck_assert_str_eq(json_object_get_string(
	                     get(json_object_array_get_idx(get(o, "controllers"), 0), "state")),
	                 "removed");
	json_object_put(o);

	/* cfs shows in CSTS; remove makes BAR0 read all ones; clear undoes both */
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"cfs\"}");
	expect_ok(o);
	json_object_put(o);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_CSTS) & NVME_CSTS_CFS, NVME_CSTS_CFS);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"remove\"}");
	expect_ok(o);
	json_object_put(o);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_CSTS), 0xffffffffu);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_VS), 0xffffffffu);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"clear\"}");
	expect_ok(o);
	json_object_put(o);
	ck_assert_uint_ne(nvme_bus_read32(bus, NVME_REG_VS), 0xffffffffu);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_CSTS) & NVME_CSTS_CFS, 0);

	/* powerfail: the device is off (reads all ones), the reply echoes the
	 * seed (0 when absent), the cut is counted; power-on brings it back */
	struct sim_stats st;
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"powerfail\","
	        "\"seed\":9223372036854775807}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "fault")), "powerfail");
	ck_assert_uint_eq(json_object_get_uint64(get(o, "seed")), INT64_MAX);
	json_object_put(o);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_VS), 0xffffffffu);
	sim_get_stats(sim, &st);
	ck_assert_uint_eq(st.powerfails, 1);
	ck_assert_int_eq(sim_power_on(sim), 0);
	ck_assert_uint_ne(nvme_bus_read32(bus, NVME_REG_VS), 0xffffffffu);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"powerfail\"}");
	expect_ok(o);
	ck_assert_uint_eq(json_object_get_uint64(get(o, "seed")), 0);
	json_object_put(o);
	sim_get_stats(sim, &st);
	ck_assert_uint_eq(st.powerfails, 2);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_CSTS), 0xffffffffu);
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"clear\"}");
	expect_ok(o);
	json_object_put(o);
	ck_assert_uint_eq(nvme_bus_read32(bus, NVME_REG_CSTS), 0);
}
END_TEST

START_TEST(t_inject_refused)
{
	static const struct {
		const char *req, *err;
	} bad[] = {
	    {"{\"cmd\":\"inject\",\"fault\":\"hang\"}", "needs \"controller\""},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme9\",\"fault\":\"hang\"}",
	     "no controller named \"nvme9\" (have: nvme0)"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\"}", "needs \"fault\""},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"melt\"}",
	     "unknown fault \"melt\""},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"delay\"}",
	     "needs \"ms\": an integer"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"delay\",\"ms\":\"5\"}",
	     "needs \"ms\": an integer"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"delay\",\"ms\":-1}",
	     "outside 0..3600000"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"fail\",\"count\":1}",
	     "needs \"status\""},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"fail\",\"count\":1,"
	     "\"status\":0}",
	     "status 0 is success"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"fail\",\"count\":1,"
	     "\"status\":65535}",
	     "outside 0..32767"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"lose\"}", "needs \"count\""},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"powerfail\",\"seed\":\"7\"}",
	     "needs \"seed\": an integer"},
	    {"{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"powerfail\",\"seed\":-1}",
	     "outside 0..9223372036854775807"},
	};
	json_object *o;

	start();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = ask(bad[i].req);
		expect_error(o, bad[i].err);
		json_object_put(o);
	}
	/* nothing was injected by the refused requests */
	ck_assert_int_eq(write_one(), 0);
	admin_stop(adm);
	adm = NULL;

	/* a PCI controller (no sim behind it) is refused */
	ctx.sims = NULL;
	start();
	o = ask("{\"cmd\":\"inject\",\"controller\":\"nvme0\",\"fault\":\"hang\"}");
	expect_error(o, "nvme0 is a PCI controller");
	json_object_put(o);
	ck_assert_int_eq(write_one(), 0);
}
END_TEST

static unsigned attach_calls, attach_idx;
static int attach_ret;

static int fake_attach(void *arg, unsigned i, char *err, size_t errlen)
{
	ck_assert_ptr_eq(arg, &attach_calls);
	attach_calls++;
	attach_idx = i;
	if (attach_ret == -ESTALE)
		snprintf(err, errlen, "nvme0: the namespaces changed");
	return attach_ret;
}

START_TEST(t_attach)
{
	json_object *o;

	/* without the daemon's attach function: refused */
	start();
	o = ask("{\"cmd\":\"attach\",\"controller\":\"nvme0\"}");
	expect_error(o, "attach: not available");
	json_object_put(o);
	admin_stop(adm);
	adm = NULL;

	ctx.attach = fake_attach;
	ctx.attach_arg = &attach_calls;
	start();
	o = ask("{\"cmd\":\"attach\"}");
	expect_error(o, "attach needs \"controller\"");
	json_object_put(o);
	o = ask("{\"cmd\":\"attach\",\"controller\":\"nope\"}");
	expect_error(o, "no controller named \"nope\"");
	json_object_put(o);
	ck_assert_uint_eq(attach_calls, 0);

	attach_ret = -ESTALE; /* the daemon's message reaches the client */
	o = ask("{\"cmd\":\"attach\",\"controller\":\"nvme0\"}");
	expect_error(o, "nvme0: the namespaces changed");
	json_object_put(o);
	attach_ret = -ENODEV; /* no message: the errno's */
	o = ask("{\"cmd\":\"attach\",\"controller\":\"nvme0\"}");
	expect_error(o, "attach nvme0: No such device");
	json_object_put(o);
	attach_ret = 0;
	o = ask("{\"cmd\":\"attach\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "controller")), "nvme0");
	/* the work goes on in the daemon: the reply says it started */
	ck_assert_str_eq(json_object_get_string(get(o, "state")), "attaching");
	json_object_put(o);
	ck_assert_uint_eq(attach_calls, 3);
	ck_assert_uint_eq(attach_idx, 0);
}
END_TEST

static unsigned detach_calls;
static int detach_ret;
static const char *att_state, *att_why;
static struct admin_ns view_ns[2];
static unsigned view_nr;

static bool away; /* what fake_away says of controller 0 */

static bool fake_away(void *arg, unsigned i)
{
	ck_assert_ptr_eq(arg, &away);
	return i == 0 && away;
}

static int fake_detach(void *arg, unsigned i, char *err, size_t errlen)
{
	ck_assert_ptr_eq(arg, &attach_calls);
	ck_assert_uint_eq(i, 0);
	detach_calls++;
	if (detach_ret >= 0)
		away = true;
	if (detach_ret == -EALREADY)
		snprintf(err, errlen, "nvme0 is detached already");
	return detach_ret;
}

static const char *fake_attach_state(void *arg, unsigned i, const char **why)
{
	ck_assert_ptr_eq(arg, &attach_calls);
	ck_assert_uint_eq(i, 0);
	*why = att_why;
	return att_state;
}

static const struct admin_ns *fake_view(void *arg, unsigned *nr)
{
	ck_assert_ptr_eq(arg, &view_nr);
	*nr = view_nr;
	return view_ns;
}

static json_object *status_ctrl0(void)
{
	json_object *o = ask("{\"cmd\":\"status\"}");
	json_object *c = json_object_array_get_idx(get(o, "controllers"), 0);

	json_object_get(c);
	json_object_put(o);
	return c;
}

/* detach through the daemon's function; status shows the last attach;
 * namespaces and status follow the daemon's view of the table */
START_TEST(t_detach_view)
{
	json_object *o, *c, *v;

	start();
	o = ask("{\"cmd\":\"detach\",\"controller\":\"nvme0\"}");
	expect_error(o, "detach: not available");
	json_object_put(o);
	admin_stop(adm);
	adm = NULL;

	ctx.attach = fake_attach;
	ctx.attach_arg = &attach_calls;
	ctx.detach = fake_detach;
	ctx.attach_state = fake_attach_state;
	ctx.ns_view = fake_view;
	ctx.ns_view_arg = &view_nr;
	ctx.ctrl_away = fake_away;
	ctx.ctrl_away_arg = &away;
	away = false;
	start();
	c = status_ctrl0();
	ck_assert_str_eq(json_object_get_string(get(c, "state")), "live");
	json_object_put(c);
	o = ask("{\"cmd\":\"detach\",\"controller\":\"nope\"}");
	expect_error(o, "no controller named \"nope\"");
	json_object_put(o);
	detach_ret = 1;
	o = ask("{\"cmd\":\"detach\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "files")), 1);
	ck_assert_str_eq(json_object_get_string(get(o, "controller")), "nvme0");
	/* a planned detach: "detached" everywhere, never "removed" */
	ck_assert_str_eq(json_object_get_string(get(o, "state")), "detached");
	json_object_put(o);
	c = status_ctrl0();
	ck_assert_str_eq(json_object_get_string(get(c, "state")), "detached");
	json_object_put(c);
	o = ask("{\"cmd\":\"stats\"}");
	ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(
	                     get(o, "controllers"), 0), "state")),
	                 "detached");
	json_object_put(o);
	o = ask("{\"cmd\":\"list\"}");
	ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(
	                     get(o, "controllers"), 0), "state")),
	                 "detached");
	json_object_put(o);
	o = ask("{\"cmd\":\"metrics\"}");
	expect_ok(o);
	ck_assert_ptr_nonnull(strstr(json_object_get_string(get(o, "text")),
	                             "nvmefs_controller_state{controller=\"nvme0\",state=\"detached\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(json_object_get_string(get(o, "text")),
	                             "nvmefs_controller_state{controller=\"nvme0\",state=\"live\"} 0\n"));
	json_object_put(o);
	detach_ret = -EALREADY;
	o = ask("{\"cmd\":\"detach\",\"controller\":\"nvme0\"}");
	expect_error(o, "nvme0 is detached already");
	json_object_put(o);
	ck_assert_uint_eq(detach_calls, 2);

	/* no attach yet: no "attach" key */
	att_state = NULL;
	c = status_ctrl0();
	ck_assert(!json_object_object_get_ex(c, "attach", &v));
	json_object_put(c);
	att_state = "attaching";
	c = status_ctrl0();
	ck_assert_str_eq(json_object_get_string(get(c, "attach")), "attaching");
	ck_assert(!json_object_object_get_ex(c, "attach_error", &v));
	json_object_put(c);
	att_state = "failed";
	att_why = "nvme0: bring-up failed";
	c = status_ctrl0();
	ck_assert_str_eq(json_object_get_string(get(c, "attach")), "failed");
	ck_assert_str_eq(json_object_get_string(get(c, "attach_error")), att_why);
	json_object_put(c);
	att_state = NULL;
	att_why = NULL;

	/* the view, not the start-time array */
	view_nr = 0;
	o = ask("{\"cmd\":\"namespaces\"}");
	ck_assert_int_eq(json_object_array_length(get(o, "namespaces")), 0);
	json_object_put(o);
	o = ask("{\"cmd\":\"status\"}");
	ck_assert_int_eq(json_object_get_int(get(o, "namespaces")), 0);
	json_object_put(o);
	view_ns[0] = nss[0];
	view_ns[1] = nss[0];
	view_ns[1].name = "nvme0n2";
	view_ns[1].nsid = 2;
	view_nr = 2;
	o = ask("{\"cmd\":\"namespaces\"}");
	ck_assert_int_eq(json_object_array_length(get(o, "namespaces")), 2);
	ck_assert_str_eq(json_object_get_string(get(
	                     json_object_array_get_idx(get(o, "namespaces"), 1), "name")),
	                 "nvme0n2");
	json_object_put(o);
	o = ask("{\"cmd\":\"status\"}");
	ck_assert_int_eq(json_object_get_int(get(o, "namespaces")), 2);
	json_object_put(o);
	ctx.ns_view = NULL;
	ctx.detach = NULL;
	ctx.attach_state = NULL;
	ctx.ctrl_away = NULL;
}
END_TEST

/* The socket never exists with the umask's mode or without its group, and
 * the private directory it was made in is gone. */
START_TEST(t_socket_private)
{
	mode_t old = umask(0);
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n = 0;

	start();
	umask(old);
	ck_assert_int_eq(lstat(sock_path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ck_assert_msg(!strcmp(de->d_name, "admin.sock"), "left behind: %s", de->d_name);
		n++;
	}
	closedir(d);
	ck_assert_int_eq(n, 1);
}
END_TEST

/* A symlink at the socket's path is neither followed nor replaced. */
/* The socket's directory: whoever may change it (or one above it) could
 * put a socket of their own at the path.  Writable by others (sticky or
 * not), owned by another user, or reached through a link: refused, and no
 * socket made. */
START_TEST(t_socket_dir)
{
	char sub[160], link[160], path[200];
	struct admin *a = NULL;
	struct stat st;

	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), -EPERM);
	ck_assert_int_eq(chmod(dir, 01777), 0);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), -EPERM);
	ck_assert_int_ne(lstat(sock_path, &st), 0);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		ck_assert_int_eq(admin_start(loop, &ctx, &a), -EPERM);
		ck_assert_int_eq(chown(dir, 0, 0), 0);
	}
	/* a link on the way: the path's own directory or one above */
	snprintf(sub, sizeof(sub), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_int_eq(symlink(sub, link), 0);
	snprintf(path, sizeof(path), "%s/admin.sock", link);
	use_daemon_lines("");
	snprintf(cfg->daemon.admin_socket, sizeof(cfg->daemon.admin_socket), "%s", path);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), -ELOOP);
	snprintf(path, sizeof(path), "%s/admin.sock", sub);
	ck_assert_int_ne(lstat(path, &st), 0);
	/* and it works where it should */
	snprintf(cfg->daemon.admin_socket, sizeof(cfg->daemon.admin_socket), "%s", path);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), 0);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	admin_stop(a);
	unlink(link);
	rmdir(sub);
}
END_TEST

START_TEST(t_socket_symlink)
{
	char target[160];
	struct admin *a = NULL;
	struct stat st;
	int fd;

	snprintf(target, sizeof(target), "%s/target", dir);
	fd = open(target, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(symlink(target, sock_path), 0);
	ck_assert_int_eq(admin_start(loop, &ctx, &a), -EEXIST);
	ck_assert_int_eq(lstat(sock_path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	unlink(sock_path);
	unlink(target);
}
END_TEST

/* A client that trickles a request a byte at a time is answered with an
 * error and closed at the request deadline, although every byte restarts
 * its idle timer. */
START_TEST(t_request_deadline)
{
	const char *req = "{\"cmd\":                                                      ";
	double t0;
	char *line;
	int fd;

	ctx.request_timeout = 0.3;
	start();
	fd = client();
	t0 = now();
	for (size_t i = 0;; i = (i + 1) % strlen(req)) {
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_PEEK);

		if (n == 1 || n == 0 || (n < 0 && errno != EAGAIN))
			break; /* something to read, or closed */
		send(fd, req + i, 1, MSG_NOSIGNAL);
		for (int k = 0; k < 10; k++) {
			turn();
			poll(NULL, 0, 5);
		}
		ck_assert_msg(now() - t0 < 30, "trickling client not closed");
	}
	line = recv_line(fd);
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(strstr(line, "not complete within"), "reply: %s", line);
	ck_assert_ptr_null(recv_line(fd));
	close(fd);
}
END_TEST

/* The deadline is per request: requests that each arrive in two pieces well
 * within it are served, however long the connection lasts in all. */
START_TEST(t_request_deadline_per_request)
{
	const double dl = 0.3;
	double run = 0, t0, span;
	int fd, ok = 0;
	char *line;

	ctx.request_timeout = dl;
	start();
	fd = client();
	/* requests of half a deadline each until one connection has answered
	 * requests for longer than one deadline in all.  The client's span of
	 * a request (first byte sent to reply read) bounds the server's, so a
	 * close within a span shorter than the deadline is a failure; a span
	 * the machine stretched past it proves nothing either way, and the run
	 * starts again on a new connection. */
	for (int i = 0; i < 60 && run <= dl; i++) {
		t0 = now();
		send_str(fd, "{\"cmd\":", 7);
		while (now() - t0 < dl / 2) {
			turn();
			poll(NULL, 0, 5);
		}
		send_str(fd, "\"status\"}\n", 10);
		line = recv_line(fd);
		span = now() - t0;
		if (line && strstr(line, "\"ok\":true")) {
			run += span;
			ok++;
			continue;
		}
		ck_assert_msg(span >= dl, "request %d closed after %.3f s, within its deadline of %.1f s: %s",
		              i, span, dl, line ? line : "(closed)");
		close(fd);
		fd = client();
		run = 0;
	}
	ck_assert_msg(run > dl, "no run of requests longer than the deadline (%d answered)", ok);
	close(fd);
}
END_TEST

/* A front end with known figures: stats shows them under "fuse" and the
 * metrics as nvmefs_fuse_* series; without one, neither mentions it. */
static void fake_fuse_stats(void *arg, struct fusefs_stats *st)
{
	ck_assert_ptr_eq(arg, &ctx);
	memset(st, 0, sizeof(*st));
	st->inflight = 5;
	st->parked[FUSEFS_WAIT_MEM] = 2;
	st->parked[FUSEFS_WAIT_LOCK] = 1;
	st->waits[FUSEFS_WAIT_SLOT] = 7;
	st->lock_waits = 3;
	st->lock_wait_ns = 1500000000;
	st->bounce_bytes = 4096;
	st->bounce_peak = 65536;
	st->op[FUSEFS_OP_READ].count = 10;
	st->op[FUSEFS_OP_READ].bytes = 40960;
	st->op[FUSEFS_OP_READ].errors = 1;
	st->op[FUSEFS_OP_READ].lat_ns[nvme_lat_bucket(10000)] = 9;  /* 10 us */
	st->op[FUSEFS_OP_READ].lat_ns[nvme_lat_bucket(1000000)] = 1; /* 1 ms */
	/* what the sched keeps beside the buckets: the exact sum, not one
	 * the buckets' bounds could give */
	st->op[FUSEFS_OP_READ].sum_ns = 9 * 10123 + 1000456;
	st->op[FUSEFS_OP_PUNCH].count = 4;
	st->op[FUSEFS_OP_PUNCH].bytes = 1 << 20;
}

START_TEST(t_fuse_stats)
{
	json_object *o, *f, *rd, *lat;
	const char *text;

	start();
	o = ask("{\"cmd\":\"stats\"}");
	expect_ok(o);
	ck_assert(!json_object_object_get_ex(o, "fuse", NULL));
	json_object_put(o);
	o = ask("{\"cmd\":\"metrics\"}");
	ck_assert_ptr_null(strstr(json_object_get_string(get(o, "text")), "nvmefs_fuse_"));
	json_object_put(o);
	admin_stop(adm);
	adm = NULL;

	ctx.fuse_stats = fake_fuse_stats;
	ctx.fuse_stats_arg = &ctx;
	start();
	o = ask("{\"cmd\":\"stats\"}");
	expect_ok(o);
	f = get(o, "fuse");
	ck_assert_uint_eq(json_object_get_uint64(get(f, "inflight")), 5);
	ck_assert_uint_eq(json_object_get_uint64(get(get(f, "parked"), "memory")), 2);
	ck_assert_uint_eq(json_object_get_uint64(get(get(f, "parked"), "range_lock")), 1);
	ck_assert_uint_eq(json_object_get_uint64(get(get(f, "parked"), "queue_slot")), 0);
	ck_assert_uint_eq(json_object_get_uint64(get(get(f, "waits"), "queue_slot")), 7);
	ck_assert_uint_eq(json_object_get_uint64(get(f, "lock_waits")), 3);
	ck_assert_double_eq_tol(json_object_get_double(get(f, "lock_wait_s")), 1.5, 1e-9);
	ck_assert_uint_eq(json_object_get_uint64(get(f, "bounce_bytes")), 4096);
	ck_assert_uint_eq(json_object_get_uint64(get(f, "bounce_peak_bytes")), 65536);
	rd = get(get(f, "ops"), "read");
	ck_assert_uint_eq(json_object_get_uint64(get(rd, "count")), 10);
	ck_assert_uint_eq(json_object_get_uint64(get(rd, "bytes")), 40960);
	ck_assert_uint_eq(json_object_get_uint64(get(rd, "errors")), 1);
	lat = get(rd, "latency_us");
	/* 9 of 10 at 10 us, one at 1 ms: the median is near 10 us, the max near 1 ms */
	ck_assert(json_object_get_double(get(lat, "p50")) >= 10 &&
		  json_object_get_double(get(lat, "p50")) < 20);
	ck_assert(json_object_get_double(get(lat, "p99")) >= 1000);
	ck_assert(json_object_get_double(get(lat, "p99_9")) >= 1000);
	ck_assert(json_object_get_double(get(lat, "max")) >= 1000 &&
		  json_object_get_double(get(lat, "max")) < 2000);
	ck_assert_uint_eq(json_object_get_uint64(get(get(get(f, "ops"), "punch"), "count")), 4);
	for (const char *const *n = (const char *const[]){"write", "flush", "zero", "other", NULL};
	     *n; n++)
		ck_assert_uint_eq(json_object_get_uint64(get(get(get(f, "ops"), *n), "count")), 0);
	json_object_put(o);

	o = ask("{\"cmd\":\"metrics\"}");
	expect_ok(o);
	text = json_object_get_string(get(o, "text"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_inflight 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_parked{reason=\"memory\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_waits_total{reason=\"queue_slot\"} 7\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_lock_wait_seconds_total 1.500000000\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_bounce_peak_bytes 65536\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_requests_total{op=\"read\"} 10\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_requests_total{op=\"punch\"} 4\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_fuse_request_bytes_total{op=\"punch\"} 1048576\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nnvmefs_fuse_request_errors_total{op=\"read\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE nvmefs_fuse_request_latency_seconds histogram\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "\nnvmefs_fuse_request_latency_seconds_bucket{op=\"read\",le=\"0.0005\"} 9\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "\nnvmefs_fuse_request_latency_seconds_bucket{op=\"read\",le=\"0.002\"} 10\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_fuse_request_latency_seconds_count{op=\"read\"} 10\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nnvmefs_fuse_request_latency_seconds_sum{op=\"read\"} 0.001091563\n"));
	json_object_put(o);
}
END_TEST

static uint64_t jnum(json_object *o, const char *k)
{
	return json_object_get_uint64(get(o, k));
}

/* smart-log reads the software controller's SMART page: counters that move
 * by exactly the I/O done, temperature and spare as it reports them */
START_TEST(t_smart_log)
{
	json_object *o, *ts;
	uint64_t w0, u0;

	start();
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_str_eq(json_object_get_string(get(o, "controller")), "nvme0");
	ck_assert_uint_eq(jnum(o, "temperature"), 310);
	ck_assert_int_eq(json_object_get_int(get(o, "temperature_c")), 37);
	ck_assert_uint_eq(jnum(o, "avail_spare"), 100);
	ck_assert_uint_eq(jnum(o, "spare_thresh"), 10);
	ck_assert_uint_eq(jnum(o, "percent_used"), 0);
	ck_assert_uint_eq(jnum(o, "power_cycles"), 1);
	ck_assert_uint_eq(jnum(o, "media_errors"), 0);
	ck_assert_int_eq(json_object_get_boolean(get(o, "saturated")), 0);
	ts = get(o, "temperature_sensors");
	ck_assert_int_eq(json_object_array_length(ts), 1);
	w0 = jnum(o, "host_write_commands");
	u0 = jnum(o, "data_units_written");
	json_object_put(o);

	write_blocks(250); /* 250 x 4 KiB = 2000 x 512 B: exactly 2 data units */
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_uint_eq(jnum(o, "host_write_commands"), w0 + 250);
	ck_assert_uint_eq(jnum(o, "data_units_written"), u0 + 2);
	ck_assert_uint_eq(jnum(o, "data_units_written_bytes"), (u0 + 2) * 512000);
	json_object_put(o);

	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nope\"}");
	expect_error(o, "no controller named \"nope\"");
	json_object_put(o);
	o = ask("{\"cmd\":\"smart-log\"}");
	expect_error(o, "smart-log needs \"controller\"");
	json_object_put(o);
}
END_TEST

/* error-log holds an injected media error; fw-log the version in slot 1;
 * list the controller */
START_TEST(t_error_fw_list)
{
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(ctrl);
	json_object *o, *e, *c;
	void *buf;
	double t0;

	start();
	o = ask("{\"cmd\":\"error-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "errors")), 0);
	ck_assert_uint_eq(jnum(o, "entries_read"), (uint64_t)in->elpe + 1);
	json_object_put(o);

	/* a media error (Unrecovered Read Error) on the next I/O */
	sim_fault_fail_next(sim, 1, NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	buf = nvme_reactor_buf_alloc(reactor, 4096);
	ck_assert_ptr_nonnull(buf);
	io_done = 0;
	t0 = now();
	ck_assert_int_eq(nvme_qpair_read(qpair, 1, 7, buf, 4096, io_cb, NULL), 0);
	nvme_qpair_flush_sq(qpair);
	while (!io_done) {
		nvme_qpair_reap(qpair, 0);
		ck_assert_msg(now() - t0 < 30, "read did not complete");
	}
	ck_assert_int_eq(io_err, -EIO);
	nvme_reactor_buf_free(reactor, buf, 4096);

	o = ask("{\"cmd\":\"error-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "errors")), 1);
	e = json_object_array_get_idx(get(o, "errors"), 0);
	ck_assert_uint_eq(jnum(e, "error_count"), 1);
	ck_assert_uint_eq(jnum(e, "sqid"), 1);
	ck_assert_uint_eq(jnum(e, "nsid"), 1);
	ck_assert_uint_eq(jnum(e, "lba"), 7);
	ck_assert_uint_eq(jnum(e, "status_field") & 0x7ff, 0x281);
	ck_assert_str_eq(json_object_get_string(get(e, "status")), "unrecovered read error");
	json_object_put(o);
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_uint_eq(jnum(o, "media_errors"), 1);
	ck_assert_uint_eq(jnum(o, "num_err_log_entries"), 1);
	json_object_put(o);

	o = ask("{\"cmd\":\"fw-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	ck_assert_uint_eq(jnum(o, "active_slot"), 1);
	ck_assert_int_eq(json_object_array_length(get(o, "slots")), 1);
	e = json_object_array_get_idx(get(o, "slots"), 0);
	ck_assert_uint_eq(jnum(e, "slot"), 1);
	ck_assert_str_eq(json_object_get_string(get(e, "revision")), NVMEFS_VERSION);
	json_object_put(o);

	o = ask("{\"cmd\":\"list\"}");
	expect_ok(o);
	ck_assert_int_eq(json_object_array_length(get(o, "controllers")), 1);
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	ck_assert_str_eq(json_object_get_string(get(c, "name")), "nvme0");
	ck_assert_str_eq(json_object_get_string(get(c, "model")), in->model);
	ck_assert_str_eq(json_object_get_string(get(c, "serial")), in->serial);
	ck_assert_str_eq(json_object_get_string(get(c, "firmware")), in->firmware);
	ck_assert_uint_eq(jnum(c, "namespaces"), 1);
	ck_assert_uint_eq(jnum(c, "size"), 1024 * 4096ull);
	ck_assert_str_eq(json_object_get_string(get(c, "lba_format")), "4096 B + 0 B");
	ck_assert_str_eq(json_object_get_string(get(c, "state")), "live");
	ck_assert_str_eq(json_object_get_string(get(c, "transport")), "sim");
	json_object_put(o);
}
END_TEST

/* A controller that does not answer: the request fails at the deadline,
 * the daemon goes on serving. */
START_TEST(t_log_hung)
{
	json_object *o;
	double t0;

	ctx.log_timeout = 1.0;
	start();
	sim_fault_hang(sim, true);
	t0 = now();
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_error(o, "Get Log Page 02h failed");
	expect_error(o, "timed out after 1.0 s");
	/* a hang bound only: the deadline above is the check */
	ck_assert_msg(now() - t0 < 30, "smart-log waited %.1f s", now() - t0);
	json_object_put(o);
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	sim_fault_hang(sim, false);
}
END_TEST


static void send_line(int fd, const char *s)
{
	send_str(fd, s, strlen(s));
}

/* Turn the loop until the server has no client left (they were closed). */
static void wait_no_clients(void)
{
	double t0 = now();

	while (adm->nr_clients) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "%u clients still open", adm->nr_clients);
	}
}

/* A log page read of a slow device does not hold the loop: another client
 * is answered meanwhile, and the pending one gets its page later. */
START_TEST(t_log_deferred)
{
	json_object *o;
	int a, b;
	double t0;

	start();
	poll_sim = true;
	/* 2 s: far longer than a busy machine takes to answer status */
	sim_fault_admin_delay(sim, 2000000);
	a = client();
	t0 = now();
	send_line(a, "{\"cmd\":\"smart-log\",\"controller\":\"nvme0\",\"id\":7}\n");
	turn();
	b = client();
	o = ask_fd(b, "{\"cmd\":\"status\"}");
	expect_ok(o);
	/* answered while smart-log still waits for its page: nothing for a yet */
	ck_assert_msg(recv(a, (char[1]){0}, 1, MSG_PEEK) < 0 && errno == EAGAIN,
	              "status was answered after smart-log (%.2f s)", now() - t0);
	json_object_put(o);
	o = reply(a);
	expect_ok(o);
	ck_assert_int_eq(json_object_get_int(get(o, "id")), 7);
	ck_assert_str_eq(json_object_get_string(get(o, "controller")), "nvme0");
	ck_assert_msg(now() - t0 >= 0.35, "smart-log answered in %.2f s", now() - t0);
	json_object_put(o);
	close(a);
	close(b);
	sim_fault_admin_delay(sim, 0);
	poll_sim = false;
}
END_TEST

/* Pipelined requests behind a deferred one are answered in order. */
START_TEST(t_log_in_order)
{
	static const char req[] = "{\"cmd\":\"fw-log\",\"controller\":\"nvme0\",\"id\":1}\n"
	                          "{\"cmd\":\"status\",\"id\":2}\n"
	                          "{\"cmd\":\"smart-log\",\"controller\":\"nvme0\",\"id\":3}\n"
	                          "{\"cmd\":\"list\",\"id\":4}\n";
	json_object *o;
	int fd;

	start();
	poll_sim = true;
	sim_fault_admin_delay(sim, 100000);
	fd = client();
	send_str(fd, req, sizeof(req) - 1);
	for (int id = 1; id <= 4; id++) {
		o = reply(fd);
		expect_ok(o);
		ck_assert_int_eq(json_object_get_int(get(o, "id")), id);
		json_object_put(o);
	}
	close(fd);
	sim_fault_admin_delay(sim, 0);
	poll_sim = false;
}
END_TEST

/* A client that goes away while its reply is pending is never touched
 * again: the engine's late answer is dropped. */
START_TEST(t_log_disconnect)
{
	json_object *o;
	int fd;

	start();
	poll_sim = true;
	sim_fault_admin_delay(sim, 300000);
	fd = client();
	send_line(fd, "{\"cmd\":\"error-log\",\"controller\":\"nvme0\"}\n");
	turn();
	close(fd);
	o = ask("{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	/* the answer comes, finds the client gone (its send fails) */
	usleep(400000);
	for (int k = 0; k < 50; k++) {
		turn();
		usleep(10000);
	}
	wait_no_clients();
	ck_assert_ptr_null(adm->defers);
	sim_fault_admin_delay(sim, 0);
	poll_sim = false;
	o = ask("{\"cmd\":\"smart-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	json_object_put(o);
}
END_TEST

/* The deadline answers a client whose device is silent; that client goes
 * on with its next request, and the daemon stops cleanly with the read
 * still held by the engine (its buffer is freed by the engine's callback). */
START_TEST(t_log_deadline)
{
	json_object *o;
	int fd;
	double t0;

	ctx.log_timeout = 0.5;
	start();
	sim_fault_hang(sim, true);
	fd = client();
	t0 = now();
	send_line(fd, "{\"cmd\":\"fw-log\",\"controller\":\"nvme0\",\"id\":\"x\"}\n");
	o = reply(fd);
	expect_error(o, "fw-log nvme0: Get Log Page 03h failed: timed out after 0.5 s");
	ck_assert_str_eq(json_object_get_string(get(o, "id")), "x");
	/* not before the deadline; the upper bound only tells a deadline that
	 * fired (late on a busy machine) from none */
	ck_assert_msg(now() - t0 >= 0.45 && now() - t0 < 20, "deadline after %.2f s", now() - t0);
	json_object_put(o);
	o = ask_fd(fd, "{\"cmd\":\"status\"}");
	expect_ok(o);
	json_object_put(o);
	/* the token lives until the engine calls back */
	ck_assert_ptr_nonnull(adm->defers);
	close(fd);
	admin_stop(adm);
	adm = NULL;
	sim_fault_hang(sim, false);
}
END_TEST

/* effects-log: the software controller's Commands Supported and Effects */
START_TEST(t_effects_log)
{
	json_object *o, *arr, *e;
	bool get_log = false, write = false;

	start();
	o = ask("{\"cmd\":\"effects-log\",\"controller\":\"nvme0\"}");
	expect_ok(o);
	arr = get(o, "admin");
	for (size_t k = 0; k < json_object_array_length(arr); k++) {
		e = json_object_array_get_idx(arr, k);
		if (json_object_get_int(get(e, "opcode")) == 2) {
			get_log = true;
			ck_assert_str_eq(json_object_get_string(get(e, "name")), "Get Log Page");
			ck_assert(json_object_get_boolean(get(e, "csupp")));
			ck_assert(!json_object_get_boolean(get(e, "lbcc")));
		}
	}
	arr = get(o, "io");
	for (size_t k = 0; k < json_object_array_length(arr); k++) {
		e = json_object_array_get_idx(arr, k);
		if (json_object_get_int(get(e, "opcode")) == 1) {
			write = true;
			ck_assert_str_eq(json_object_get_string(get(e, "name")), "Write");
			ck_assert(json_object_get_boolean(get(e, "lbcc")));
			ck_assert_int_eq(json_object_get_int(get(e, "raw")), 3);
		}
	}
	ck_assert(get_log && write);
	json_object_put(o);
}
END_TEST

static void *refresh_thread(void *arg)
{
	return (void *)(intptr_t)health_refresh(arg, 0);
}

/* The health cache: read at start, shown in status and metrics; a refresh
 * reads again, also when asked from another thread. */
START_TEST(t_health)
{
	const struct health_ctrl *hc;
	json_object *o, *c, *hh;
	double t0;
	unsigned reads;

	start();
	ck_assert_ptr_nonnull(admin_health(adm));
	t0 = now();
	while (!(hc = health_get(admin_health(adm), 0))->valid) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "no SMART read by the health cache");
	}
	ck_assert_int_eq(hc->err, 0);
	ck_assert_int_eq(hc->smart.avail_spare, 100);
	ck_assert_ptr_null(health_get(admin_health(adm), 1));
	reads = hc->reads;
	ck_assert_int_eq(health_refresh(admin_health(adm), 0), 0);
	ck_assert_int_eq(health_refresh(admin_health(adm), 1), -EINVAL);
	while (hc->reads == reads) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "health_refresh read nothing");
	}
	reads = hc->reads;
	{
		pthread_t t;
		void *rv;

		ck_assert_int_eq(pthread_create(&t, NULL, refresh_thread, admin_health(adm)), 0);
		ck_assert_int_eq(pthread_join(t, &rv), 0);
		ck_assert_int_eq((intptr_t)rv, 0);
	}
	while (hc->reads == reads) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "health_refresh from a thread read nothing");
	}
	o = ask("{\"cmd\":\"status\"}");
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	hh = get(c, "health");
	ck_assert_int_eq(json_object_get_int(get(hh, "available_spare")), 100);
	ck_assert_int_eq(json_object_array_length(get(hh, "critical_warnings")), 0);
	ck_assert_int_eq(json_object_get_int(get(hh, "temperature_c")),
	                 (int)hc->smart.temperature - 273);
	ck_assert_ptr_nonnull(json_object_get_string(get(hh, "read_at")));
	json_object_put(o);
	o = ask("{\"cmd\":\"metrics\"}");
	{
		const char *t = json_object_get_string(get(o, "text"));

		ck_assert_ptr_nonnull(strstr(t, "nvmefs_controller_available_spare_ratio{controller=\"nvme0\"} 1\n"));
		ck_assert_ptr_nonnull(strstr(t, "nvmefs_controller_critical_warning{controller=\"nvme0\",warning=\"spare\"} 0\n"));
		ck_assert_ptr_nonnull(strstr(t, "nvmefs_controller_info{controller=\"nvme0\",model=\"nvmefs software controller\""));
		ck_assert_ptr_nonnull(strstr(t, "nvmefs_controller_temperature_celsius{controller=\"nvme0\"} "));
	}
	json_object_put(o);
}
END_TEST

/* A read that fails keeps the last good figures and records the error;
 * status shows both. */
START_TEST(t_health_error)
{
	const struct health_ctrl *hc;
	struct nvme_bus *bus = NULL;
	json_object *o, *hh;
	double t0 = now();

	start();
	while (!(hc = health_get(admin_health(adm), 0))->valid) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "no SMART read by the health cache");
	}
	ck_assert_int_eq(rig_start(&g), 0);
	ck_assert_int_eq(nvme_ctrl_remove(ctrl, "test", &bus), 0);
	g.kept[0] = bus;
	health_refresh(admin_health(adm), 0);
	while (!hc->failures) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "the read of a removed controller did not fail");
	}
	ck_assert_int_eq(hc->err, -ENODEV);
	ck_assert(hc->valid);
	ck_assert_int_eq(hc->smart.avail_spare, 100);
	o = ask("{\"cmd\":\"status\"}");
	hh = get(json_object_array_get_idx(get(o, "controllers"), 0), "health");
	ck_assert(json_object_get_boolean(get(hh, "valid")));
	ck_assert_int_eq(json_object_get_int(get(hh, "available_spare")), 100);
	ck_assert_str_eq(json_object_get_string(get(hh, "error")), strerror(ENODEV));
	ck_assert_ptr_nonnull(json_object_get_string(get(hh, "error_at")));
	json_object_put(o);
}
END_TEST

/* health_interval = 0: no timer, nothing read until a refresh. */
START_TEST(t_health_off)
{
	const struct health_ctrl *hc;
	json_object *o, *c;
	double t0 = now();

	use_daemon_lines("health_interval = 0\n");
	start();
	for (int k = 0; k < 100; k++) {
		turn();
		usleep(1000);
	}
	hc = health_get(admin_health(adm), 0);
	ck_assert(!hc->valid && !hc->reads && !hc->failures);
	o = ask("{\"cmd\":\"status\"}");
	c = json_object_array_get_idx(get(o, "controllers"), 0);
	ck_assert(json_object_get_boolean(get(get(c, "health"), "valid")) == false);
	json_object_put(o);
	health_refresh(admin_health(adm), 0);
	while (!hc->valid) {
		turn();
		usleep(1000);
		ck_assert_msg(now() - t0 < 30, "health_refresh read nothing");
	}
}
END_TEST

static Suite *admin_suite(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, t_status);
	tcase_add_test(tc, t_stats);
	tcase_add_test(tc, t_queues_namespaces);
	tcase_add_test(tc, t_interrupts_by_mode);
	tcase_add_test(tc, t_identify);
	tcase_add_test(tc, t_config_metrics);
	tcase_add_test(tc, t_bad_requests);
	tcase_add_test(tc, t_oversize);
	tcase_add_test(tc, t_stalled_clients);
	tcase_add_test(tc, t_socket_mode);
	tcase_add_test(tc, t_socket_mode_groups);
	tcase_add_test(tc, t_peer_policy);
	tcase_add_test(tc, t_clients_per_uid);
	tcase_add_test(tc, t_reply_cap);
	tcase_add_test(tc, t_stale_socket);
	tcase_add_test(tc, t_live_socket);
	tcase_add_test(tc, t_not_a_socket);
	tcase_add_test(tc, t_too_many_clients);
	tcase_add_test(tc, t_recovery_views);
	tcase_add_test(tc, t_inject);
	tcase_add_test(tc, t_inject_events);
	tcase_add_test(tc, t_inject_dead);
	tcase_add_test(tc, t_inject_refused);
	tcase_add_test(tc, t_attach);
	tcase_add_test(tc, t_detach_view);
	tcase_add_test(tc, t_socket_private);
	tcase_add_test(tc, t_socket_symlink);
	tcase_add_test(tc, t_socket_dir);
	tcase_add_test(tc, t_request_deadline);
	tcase_add_test(tc, t_request_deadline_per_request);
	tcase_add_test(tc, t_fuse_stats);
	tcase_add_test(tc, t_smart_log);
	tcase_add_test(tc, t_error_fw_list);
	tcase_add_test(tc, t_log_hung);
	tcase_add_test(tc, t_log_deferred);
	tcase_add_test(tc, t_log_in_order);
	tcase_add_test(tc, t_log_disconnect);
	tcase_add_test(tc, t_log_deadline);
	tcase_add_test(tc, t_effects_log);
	tcase_add_test(tc, t_health);
	tcase_add_test(tc, t_health_off);
	tcase_add_test(tc, t_health_error);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(admin_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

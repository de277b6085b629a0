/* fuzz_admin.c - libFuzzer target: the admin protocol, bytes from a client.
 *
 * The admin server runs in this process over a real engine on the software
 * controller, as in test_admin.  Each input is sent as is over a fresh
 * connection to the server's socket (then the client shuts down its sending
 * side) and the server's loop runs until it has closed the connection.
 * Every reply line must be one JSON object with a boolean "ok" and, when
 * "ok" is false, a string "error"; there is at most one reply per request
 * line, plus one for an over-long line.  inject and attach are refused here
 * (no software controller handle, no attach hook), so inputs cannot change
 * the state later inputs see.  A broken rule aborts. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>
#include <json-c/json.h>

#include "config.h"
#include "log.h"
#include "nvme.h"
#include "sim.h"

#include "daemon/admin.h"

#define DIE(...)                                            \
	do {                                                \
		fprintf(stderr, "fuzz_admin: " __VA_ARGS__); \
		fprintf(stderr, "\n");                      \
		abort();                                    \
	} while (0)

static char dir[64], sock_path[128];
static struct ev_loop *loop;
static struct cfg *cfg;
static struct nvme_ctrl *ctrls[1];
static struct nvme_reactor *reactors[1];
static struct nvme_qpair *qpairs[1];
static struct admin_ns nss[1];
static struct admin *adm;

static void teardown(void)
{
	admin_stop(adm);
	nvme_qpair_destroy(qpairs[0]);
	nvme_reactor_destroy(reactors[0]);
	nvme_ctrl_close(ctrls[0]);
	cfg_free(cfg);
	ev_loop_destroy(loop);
	rmdir(dir);
}

static void setup(void)
{
	struct sim *sim;
	struct sim_opts so = {.name = "nvme0", .nr_ns = 1};
	struct nvme_ctrl_opts co = {
	    .name = "nvme0", .io_queues = 1, .queue_depth = 64, .cq_budget = 16, .io_timeout_ms = 5000};
	struct nvme_reactor_opts ro = {
	    .id = 0, .cpu = -1, .mode = NVME_MODE_POLL, .buf_pool_bytes = 1u << 20};
	char text[1024];

	log_set_level(LOG_LVL_ERROR);
	setrlimit(RLIMIT_MEMLOCK, &(struct rlimit){RLIM_INFINITY, RLIM_INFINITY});
	snprintf(dir, sizeof(dir), "/tmp/fuzz_admin.XXXXXX");
	if (!mkdtemp(dir))
		DIE("mkdtemp");
	snprintf(sock_path, sizeof(sock_path), "%s/admin.sock", dir);
	snprintf(text, sizeof(text),
	         "[daemon]\nmountpoint = %s/mnt\nadmin_socket = %s\nfile_group = root\n"
	         "[engine]\nqueues = 1\nqueue_depth = 64\ncq_budget = 16\nmode = poll\n"
	         "[controller nvme0]\ndevice = sim\nsize = 4M\nblock_size = 4096\n",
	         dir, sock_path);
	if (cfg_load_string("fuzz.conf", text, &cfg, stderr))
		DIE("config");
	loop = ev_loop_new(EVFLAG_AUTO);
	so.ns[0] = (struct sim_ns_opts){.nlba = 1024, .lba_size = 4096, .backing = SIM_BACKING_RAM};
	if (sim_create(&so, &sim) || nvme_ctrl_open(sim_bus(sim), &co, &ctrls[0]) ||
	    nvme_reactor_create(&ro, &reactors[0]) ||
	    nvme_qpair_create(ctrls[0], reactors[0], 1, &qpairs[0]))
		DIE("engine set-up");
	nss[0] = (struct admin_ns){.name = "nvme0n1", .ctrl = 0, .nsid = 1,
	                           .size = 1024 * 4096ull, .lba_size = 4096,
	                           .path = "/nonexistent/nvme0n1"};
	struct admin_ctx ctx = {.cfg = cfg, .config_path = "fuzz.conf", .start_time = time(NULL),
	                        .ctrls = ctrls, .nr_ctrls = 1, .reactors = reactors,
	                        .nr_reactors = 1, .qpairs = qpairs, .ns = nss, .nr_ns = 1,
	                        .idle_timeout = 30, .request_timeout = 30};
	if (admin_start(loop, &ctx, &adm))
		DIE("admin_start");
	atexit(teardown);
}

/* One reply line must be a JSON object saying ok or why not. */
static void check_reply(const char *line, size_t len)
{
	json_object *o = json_tokener_parse(line), *ok = NULL, *err = NULL;

	if (!o || !json_object_is_type(o, json_type_object))
		DIE("reply is not a JSON object: %.*s", (int)(len > 200 ? 200 : len), line);
	if (!json_object_object_get_ex(o, "ok", &ok) || !json_object_is_type(ok, json_type_boolean))
		DIE("reply without a boolean \"ok\": %.200s", line);
	if (!json_object_get_boolean(ok) &&
	    (!json_object_object_get_ex(o, "error", &err) ||
	     !json_object_is_type(err, json_type_string)))
		DIE("error reply without an \"error\" string: %.200s", line);
	json_object_put(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!adm)
		setup();
	/* request lines: a reply each at most (blank ones get none), plus one
	 * for a line too long or a deadline */
	size_t lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS))
		DIE("connect: %s", strerror(errno));

	size_t sent = 0, got_len = 0, got_cap = 1 << 16, replies = 0;
	char *got = malloc(got_cap);
	bool shut = false, closed = false;
	for (unsigned spins = 0; !closed; spins++) {
		if (spins > 100000)
			DIE("the server never closed the connection");
		if (sent < size) {
			ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN)
				sent = size; /* the server closed on us (a line too long) */
		}
		if (sent == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		ev_run(loop, EVRUN_NOWAIT);
		for (;;) {
			if (got_len == got_cap && !(got = realloc(got, got_cap *= 2)))
				DIE("memory");
			ssize_t n = recv(fd, got + got_len, got_cap - got_len, 0);
			if (n > 0) {
				got_len += (size_t)n;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				closed = true;
			break;
		}
		/* check whole lines as they arrive */
		char *nl, *p = got;
		while ((nl = memchr(p, '\n', got_len - (size_t)(p - got)))) {
			*nl = 0;
			check_reply(p, (size_t)(nl - p));
			replies++;
			p = nl + 1;
		}
		got_len -= (size_t)(p - got);
		memmove(got, p, got_len);
	}
	if (got_len)
		DIE("a reply without its newline at close: %.*s", (int)(got_len > 200 ? 200 : got_len),
		    got);
	if (replies > lines)
		DIE("%zu replies to %zu request lines", replies, lines);
	free(got);
	close(fd);
	return 0;
}

/* ctl.c - talking to nvmefsd's admin socket, and reading its replies.
 * Before a request leaves, the socket's directory and the process that
 * accepted the connection are checked (check_socket_dir, check_peer): a
 * socket another user could have put at the path gets nothing. */
#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- talking to the daemon ---- */

/* Who may answer: root, which nvmefsd runs as, or the caller itself (a
 * daemon a user started, which can tell that user nothing the user could
 * not make up).  Anyone else listening on the path took it before the
 * daemon did: their "ok" to a restart or a detach would be a lie. */
static bool trusted_peer(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* The socket's directory: whoever may change it may put their own socket
 * at the path.  Writable by group or others only with the sticky bit and
 * root as owner (as /tmp: then nobody else can rename or remove root's
 * socket there, and a socket someone else put there first fails the peer
 * check); owned by root or the caller. */
static int check_socket_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else {
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	}
	if (stat(dir, &st) < 0)
		return 0; /* connect says what is wrong */
	if (!trusted_peer(st.st_uid)) {
		fprintf(stderr,
		        "%s: refusing %s: its directory %s belongs to uid %u, not root, who could "
		        "have put any socket there\n",
		        prog, path, dir, (unsigned)st.st_uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !((st.st_mode & S_ISVTX) && st.st_uid == 0)) {
		fprintf(stderr,
		        "%s: refusing %s: its directory %s is writable by group or others (mode "
		        "%04o) without being a sticky directory of root's: anyone there could have "
		        "put a socket at that name\n",
		        prog, path, dir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* The process at the other end, as the kernel recorded it at connect. */
static int check_peer(int fd, const char *path)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		fprintf(stderr, "%s: %s: cannot tell who listens there (SO_PEERCRED): %s\n", prog,
		        path, strerror(errno));
		return -1;
	}
	if (!trusted_peer(cr.uid)) {
		fprintf(stderr,
		        "%s: refusing %s: the process listening there (pid %d) runs as uid %u, not "
		        "root: it is not nvmefsd, and its answers would not be the daemon's\n",
		        prog, path, (int)cr.pid, (unsigned)cr.uid);
		return -1;
	}
	return 0;
}

static int ctl_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "%s: cannot connect to %s: path too long\n", prog, path);
		return -1;
	}
	if (check_socket_dir(path) < 0)
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		if (check_peer(fd, path) == 0)
			return fd;
		close(fd);
		return -1;
	}
	e = errno;
	close(fd);
	switch (e) {
	case ENOENT:
		fprintf(stderr, "%s: cannot connect to %s: no such socket (is nvmefsd running?)\n",
		        prog, path);
		break;
	case EACCES:
	case EPERM:
		fprintf(stderr,
		        "%s: cannot connect to %s: access denied (the socket is for root "
		        "and the daemon's admin_group and operator_group)\n",
		        prog, path);
		break;
	case ECONNREFUSED:
		fprintf(stderr,
		        "%s: cannot connect to %s: nobody listens (connection refused: "
		        "nvmefsd is not running, the socket file is stale)\n",
		        prog, path);
		break;
	default:
		fprintf(stderr, "%s: cannot connect to %s: %s\n", prog, path, strerror(e));
	}
	return -1;
}

static int send_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read one reply line into a new string, within CTL_TIMEOUT_MS. */
static int recv_line(int fd, char **out)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long left;
		ssize_t n;
		int r;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = CTL_TIMEOUT_MS -
		       ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0) {
			free(buf);
			return -ETIMEDOUT;
		}
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR) {
			if (stop_flag) {
				free(buf);
				return -EINTR;
			}
			continue;
		}
		if (r < 0) {
			free(buf);
			return -errno;
		}
		if (r == 0)
			continue;
		if (cap - len < 4096) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			if (cap > CTL_REPLY_MAX || !(nb = realloc(buf, cap + 1))) {
				free(buf);
				return -E2BIG;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		if (n == 0) {
			free(buf);
			return -ECONNRESET;
		}
		len += (size_t)n;
		if (memchr(buf + len - n, '\n', (size_t)n)) {
			buf[len] = '\0';
			*strchr(buf, '\n') = '\0';
			*out = buf;
			return 0;
		}
	}
}

/* Send the request object req (consumed) and parse the reply.  Returns an
 * exit code; on EXIT_OK *rep is the reply (ok true). */
int ctl_exchange(const char *sock, json_object *req, json_object **rep)
{
	json_object *r, *ok, *err;
	const char *s;
	char *line = NULL;
	int fd, ret;

	s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	fd = ctl_connect(sock);
	if (fd < 0) {
		json_object_put(req);
		return EXIT_CONNECT;
	}
	ret = s ? send_all(fd, s, strlen(s)) : -ENOMEM;
	if (!ret)
		ret = send_all(fd, "\n", 1);
	json_object_put(req);
	if (!ret)
		ret = recv_line(fd, &line);
	close(fd);
	if (ret == -EINTR)
		return EXIT_OK;
	if (ret) {
		fprintf(stderr, "%s: %s: no reply from the daemon: %s\n", prog, sock,
		        ret == -ECONNRESET ? "connection closed" : strerror(-ret));
		return EXIT_DAEMON;
	}
	r = json_tokener_parse(line);
	if (!r || !json_object_is_type(r, json_type_object) ||
	    !json_object_object_get_ex(r, "ok", &ok)) {
		fprintf(stderr, "%s: %s: the daemon's reply is not a JSON object: %.200s\n", prog,
		        sock, line);
		json_object_put(r);
		free(line);
		return EXIT_DAEMON;
	}
	free(line);
	if (!json_object_get_boolean(ok)) {
		fprintf(stderr, "%s: the daemon says: %s\n", prog,
		        json_object_object_get_ex(r, "error", &err) ? json_object_get_string(err)
		                                                    : "error (no message)");
		json_object_put(r);
		return EXIT_DAEMON;
	}
	*rep = r;
	return EXIT_OK;
}

/* Send {"cmd": cmd[, "controller": ctrl]}: see ctl_exchange. */
int ctl_call(const char *sock, const char *cmd, const char *ctrl, json_object **rep)
{
	json_object *req = json_object_new_object();

	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	if (ctrl)
		json_object_object_add(req, "controller", json_object_new_string(ctrl));
	return ctl_exchange(sock, req, rep);
}

/* ---- reading replies ---- */

int ctl_natcmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			size_t na, nb;
			int c;

			while (*a == '0' && isdigit((unsigned char)a[1]))
				a++;
			while (*b == '0' && isdigit((unsigned char)b[1]))
				b++;
			na = strspn(a, "0123456789");
			nb = strspn(b, "0123456789");
			if (na != nb)
				return na < nb ? -1 : 1;
			c = strncmp(a, b, na);
			if (c)
				return c;
			a += na;
			b += nb;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : *b ? -1 : 0;
}

json_object *jget(json_object *o, const char *k)
{
	json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

const char *jstr(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v ? json_object_get_string(v) : "-";
}

uint64_t ju64(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v ? json_object_get_uint64(v) : 0;
}

bool jbool(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v && json_object_get_boolean(v);
}

double jdbl(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v ? json_object_get_double(v) : NAN;
}

size_t jlen(json_object *a)
{
	return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

json_object *jidx(json_object *a, size_t i)
{
	return json_object_array_get_idx(a, i);
}


/* ---- waiting ---- */

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

void ctl_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void ctl_nap(double secs)
{
	struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};

	while (!stop_flag && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* admin_server.c - the admin socket server (see admin.h for the protocol):
 * the listening socket, clients, request framing, peer credentials and
 * permissions, per-uid limits and reply caps.  The commands themselves are
 * in admin_cmd.c.
 *
 * Runs in the daemon's main-thread libev loop.  Every client socket is
 * non-blocking with its own input buffer (one request line at most
 * ADMIN_LINE_MAX bytes) and output buffer.  A client is served one request
 * at a time: while a reply is still unsent, or deferred by its handler (a
 * log page the device has yet to return), its further requests wait in its
 * input buffer and its socket is not read, so a client that never reads its
 * replies holds at most one reply in memory, and then its idle timer closes
 * it; replies leave in request order.  The idle timer does not run while a
 * reply is deferred: the wait is the device's, bounded by the deferral's
 * own deadline.  JSON is built and parsed with json-c only.
 *
 * It knows no command: a request's handler is found by name in the table
 * admin_start gave it (struct admin.cmds).
 */
#include "admin_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "safepath.h"

/* A warning a client can provoke again and again (admin.h): logged under
 * the limiter rl, saying how many were not logged before it. */
__attribute__((format(printf, 2, 3))) static void warn_limited(struct log_rl *rl,
                                                                const char *fmt, ...)
{
	char line[768];
	unsigned sup;
	va_list ap;

	if (!log_rl_take(rl, &sup))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (sup)
		log_warn("%s (and %u more such lines not logged since the previous one)", line,
		         sup);
	else
		log_warn("%s", line);
}

struct admin_client {
	struct admin *a;
	int fd;
	ev_io rio, wio;
	ev_timer idle;
	ev_timer deadline; /* runs while a request line is incomplete */
	char *in;          /* ADMIN_LINE_MAX + 1 bytes */
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
	bool eof;     /* the peer shut down its sending side */
	bool closing; /* close once the output is sent */
	/* the peer's credentials when it connected (SO_PEERCRED,
	 * SO_PEERGROUPS), and what admin_peer_rights made of them */
	uid_t uid;
	pid_t pid;
	bool may_read;   /* root, admin_group or operator_group */
	bool may_change; /* root or operator_group */
	struct admin_defer *waiting; /* its request whose reply is deferred */
	struct admin_client *prev, *next;
};

struct admin_defer {
	struct admin *a;
	struct admin_client *c; /* NULL once it disconnected or was answered */
	json_object *id;
	ev_timer deadline;
	char msg[256];
	void *owned; /* freed with it */
	struct admin_defer *prev, *next;
};

/* ---- clients ---- */

static void client_close(struct admin_client *c)
{
	struct admin *a = c->a;

	ev_io_stop(a->loop, &c->rio);
	ev_io_stop(a->loop, &c->wio);
	ev_timer_stop(a->loop, &c->idle);
	ev_timer_stop(a->loop, &c->deadline);
	if (c->waiting)
		c->waiting->c = NULL; /* its reply goes nowhere */
	if (a->cur == c)
		a->cur = NULL;
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		a->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	a->nr_clients--;
	free(c->in);
	free(c->out);
	free(c);
}

static size_t client_pending(const struct admin_client *c)
{
	return c->out_len - c->out_off;
}

/* Send what can be sent now.  Returns -1 when the client was closed. */
static int client_flush(struct admin_client *c)
{
	struct admin *a = c->a;

	while (client_pending(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, client_pending(c),
		                 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			c->out_off += (size_t)n;
			ev_timer_again(a->loop, &c->idle);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(a->loop, &c->wio);
			return 0;
		}
		log_debug("admin client: send: %s", n < 0 ? strerror(errno) : "closed");
		client_close(c);
		return -1;
	}
	c->out_off = c->out_len = 0;
	ev_io_stop(a->loop, &c->wio);
	if (c->closing) {
		client_close(c);
		return -1;
	}
	return 0;
}

/* Queue one reply line.  Returns -1 when the client was closed. */
static int client_queue(struct admin_client *c, const char *s, size_t len)
{
	size_t need;

	if (client_pending(c) && client_pending(c) + len + 1 > ADMIN_OUT_MAX) {
		warn_limited(&c->a->rl_client,
		             "admin client uid %u (pid %d) not reading its replies (%zu bytes "
		             "unread): dropped",
		             (unsigned)c->uid, (int)c->pid, client_pending(c));
		client_close(c);
		return -1;
	}
	if (c->out_off) { /* compact before growing */
		memmove(c->out, c->out + c->out_off, client_pending(c));
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	need = c->out_len + len + 1;
	if (need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p) {
			log_warn("admin client: out of memory for a %zu byte reply: dropped", len);
			client_close(c);
			return -1;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	return client_flush(c);
}

static int client_reply(struct admin_client *c, json_object *rep)
{
	const char *s = json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN |
	                                                        JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t len = s ? strlen(s) : 0;
	int ret;

	if (!s) {
		static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}";

		ret = client_queue(c, oom, sizeof(oom) - 1);
	} else if (len > c->a->reply_max) {
		char msg[160];
		int n;

		/* not sent: a client may not make the daemon hold more than
		 * reply_max bytes for it (the request was served: its effect,
		 * if any, stays) */
		warn_limited(&c->a->rl_client,
		             "admin client uid %u: a %zu byte reply exceeds %zu bytes: not sent",
		             (unsigned)c->uid, len, c->a->reply_max);
		n = snprintf(msg, sizeof(msg),
		             "{\"ok\":false,\"error\":\"reply of %zu bytes exceeds the limit of "
		             "%zu bytes\"}",
		             len, c->a->reply_max);
		ret = client_queue(c, msg, (size_t)n);
	} else {
		ret = client_queue(c, s, len);
	}
	json_object_put(rep);
	return ret;
}

static int client_error(struct admin_client *c, json_object *id, const char *msg)
{
	json_object *rep = json_object_new_object();

	jset_bool(rep, "ok", false);
	jset_str(rep, "error", msg);
	if (id)
		jset(rep, "id", json_object_get(id));
	return client_reply(c, rep);
}

/* The command called name in a's table, NULL for an unknown one. */
static const struct admin_cmd *cmd_find(const struct admin *a, const char *name)
{
	for (size_t i = 0; i < a->nr_cmds; i++)
		if (!strcmp(name, a->cmds[i].name))
			return &a->cmds[i];
	return NULL;
}

/* Handle one request line (without its newline). */
static int client_request(struct admin_client *c, const char *line, size_t len)
{
	struct json_tokener *tok;
	json_object *req, *jcmd, *id = NULL, *rep;
	const struct admin_cmd *ac;
	enum json_tokener_error jerr;
	char err[4096] = ""; /* a refused restart's reason has a few lines */
	const char *cmd;
	size_t end;
	int ret;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return 0; /* blank line */
	if (memchr(line, '\0', len))
		return client_error(c, NULL, "malformed request: NUL byte in the line");
	tok = json_tokener_new();
	if (!tok)
		return client_error(c, NULL, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	req = json_tokener_parse_ex(tok, line, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!req || jerr != json_tokener_success) {
		snprintf(err, sizeof(err), "malformed request: %s",
		         jerr == json_tokener_continue ? "incomplete JSON"
		                                       : json_tokener_error_desc(jerr));
		json_object_put(req);
		return client_error(c, NULL, err);
	}
	for (; end < len; end++)
		if (line[end] != ' ' && line[end] != '\t') {
			json_object_put(req);
			return client_error(c, NULL,
			                    "malformed request: text after the JSON object");
		}
	if (!json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		return client_error(c, NULL, "malformed request: not a JSON object");
	}
	json_object_object_get_ex(req, "id", &id);
	if (!json_object_object_get_ex(req, "cmd", &jcmd) ||
	    !json_object_is_type(jcmd, json_type_string)) {
		ret = client_error(c, id, "malformed request: \"cmd\" (a string) is missing");
		json_object_put(req);
		return ret;
	}
	cmd = json_object_get_string(jcmd);
	ac = cmd_find(c->a, cmd);
	if (!ac) {
		size_t off = (size_t)snprintf(err, sizeof(err), "unknown command \"%.64s\" (", cmd);

		for (size_t k = 0; k < c->a->nr_cmds && off < sizeof(err); k++)
			off += (size_t)snprintf(err + off, sizeof(err) - off, "%s%s", k ? ", " : "",
			                        c->a->cmds[k].name);
		if (off < sizeof(err))
			snprintf(err + off, sizeof(err) - off, ")");
		ret = client_error(c, id, err);
		goto out;
	}
	if (ac->changes ? !c->may_change : !c->may_read) {
		const struct cfg_daemon *d = &c->a->ctx.cfg->daemon;

		warn_limited(&c->a->rl_request, "admin: uid %u (pid %d) refused \"%s\": %s",
		             (unsigned)c->uid, (int)c->pid, ac->name,
		             ac->changes ? "not root or operator_group"
		                         : "not root, admin_group or operator_group");
		if (ac->changes)
			snprintf(err, sizeof(err),
			         "permission denied: \"%s\" changes the daemon's state: root "
			         "or a member of operator_group (%s) only",
			         ac->name, d->operator_group[0] ? d->operator_group : "unset");
		else
			snprintf(err, sizeof(err),
			         "permission denied: root or a member of admin_group (%s) or "
			         "operator_group (%s) only",
			         d->admin_group[0] ? d->admin_group : "unset",
			         d->operator_group[0] ? d->operator_group : "unset");
		ret = client_error(c, id, err);
		goto out;
	}
	rep = json_object_new_object();
	jset_bool(rep, "ok", true);
	c->a->cur = c;
	c->a->cur_id = id;
	ret = ac->fn(c->a, req, rep, err, sizeof(err));
	c->a->cur = NULL;
	c->a->cur_id = NULL;
	if (ret == ADMIN_PENDING) {
		json_object_put(rep);
		ret = 0;
	} else if (ret < 0) {
		json_object_put(rep);
		ret = client_error(c, id, err[0] ? err : "failed");
	} else {
		if (id)
			jset(rep, "id", json_object_get(id));
		ret = client_reply(c, rep);
	}
out:
	json_object_put(req);
	return ret;
}

/* The request deadline: absolute, from the first byte of a request line to
 * its newline.  The idle timer restarts with every byte, so on its own it
 * lets a client that trickles one byte a second hold a slot for ever. */
static void client_deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_client *c = w->data;
	char msg[96];

	(void)loop, (void)revents;
	log_debug("admin client: request not complete after %.1f s: closed", c->a->request_timeout);
	snprintf(msg, sizeof(msg), "request not complete within %.1f s: closing",
	         c->a->request_timeout);
	c->closing = true;
	c->in_len = 0;
	ev_io_stop(c->a->loop, &c->rio);
	client_error(c, NULL, msg); /* sends, then closes the client */
}

/* Arm the deadline when an incomplete line starts, re-arm it when a line was
 * consumed and an incomplete one follows, stop it when nothing incomplete is
 * buffered (a complete line waiting for its turn is the server's delay). */
static void client_deadline_update(struct admin_client *c, bool consumed)
{
	struct ev_loop *loop = c->a->loop;
	bool partial = c->in_len && !c->closing && !memchr(c->in, '\n', c->in_len);

	if (!partial) {
		ev_timer_stop(loop, &c->deadline);
		return;
	}
	if (consumed)
		ev_timer_stop(loop, &c->deadline);
	if (!ev_is_active(&c->deadline)) {
		ev_timer_set(&c->deadline, c->a->request_timeout, 0.0);
		ev_timer_start(loop, &c->deadline);
	}
}

/* Serve the complete lines in the input buffer, one reply at a time.
 * Returns -1 when the client was closed. */
static int client_process(struct admin_client *c)
{
	struct admin *a = c->a;
	bool consumed = false;

	while (!c->closing && !client_pending(c) && !c->waiting) {
		char *nl = memchr(c->in, '\n', c->in_len);
		size_t n;

		if (!nl) {
			if (c->in_len > ADMIN_LINE_MAX) {
				c->closing = true;
				c->in_len = 0;
				if (client_error(c, NULL,
				                 "request line longer than 65536 bytes: closing") <
				    0)
					return -1;
			} else if (c->eof) {
				/* a last request without its newline still counts */
				c->closing = true;
				n = c->in_len;
				c->in_len = 0;
				if (n && client_request(c, c->in, n) < 0)
					return -1;
				/* a deferred reply closes it once sent */
				if (!c->waiting && client_flush(c) < 0)
					return -1;
			}
			break;
		}
		n = (size_t)(nl - c->in);
		/* the line is handled in place; the buffer moves after */
		if (client_request(c, c->in, n) < 0)
			return -1;
		memmove(c->in, nl + 1, c->in_len - n - 1);
		c->in_len -= n + 1;
		consumed = true;
	}
	client_deadline_update(c, consumed);
	/* read more only when nothing is waiting to be sent or answered */
	if (c->closing || client_pending(c) || c->waiting)
		ev_io_stop(a->loop, &c->rio);
	else
		ev_io_start(a->loop, &c->rio);
	return 0;
}

static void client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	for (;;) {
		ssize_t n;

		if (c->in_len > ADMIN_LINE_MAX)
			break; /* full: client_process replies and closes */
		n = read(c->fd, c->in + c->in_len, ADMIN_LINE_MAX + 1 - c->in_len);
		if (n > 0) {
			c->in_len += (size_t)n;
			ev_timer_again(c->a->loop, &c->idle);
			/* serve what is complete before reading on, so a
			 * pipelining client is held back by its own replies */
			if (memchr(c->in + c->in_len - n, '\n', (size_t)n))
				break;
			continue;
		}
		if (n == 0) {
			c->eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		log_debug("admin client: read: %s", strerror(errno));
		client_close(c);
		return;
	}
	client_process(c);
}

static void client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	if (client_flush(c) < 0)
		return;
	client_process(c);
}

static void client_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_client *c = w->data;

	(void)loop, (void)revents;
	log_debug("admin client idle for %.0f s: closed", c->a->idle_timeout);
	client_close(c);
}


/* ---- deferred replies ---- */

static void defer_free(struct admin_defer *d)
{
	struct admin *a = d->a;

	ev_timer_stop(a->loop, &d->deadline);
	if (d->c)
		d->c->waiting = NULL;
	if (d->prev)
		d->prev->next = d->next;
	else
		a->defers = d->next;
	if (d->next)
		d->next->prev = d->prev;
	json_object_put(d->id);
	free(d->owned);
	free(d);
}

void admin_defer_own(struct admin_defer *d, void *p)
{
	d->owned = p;
}

/* The client's turn again after its deferred reply was queued. */
static void client_resume(struct admin_client *c)
{
	ev_timer_again(c->a->loop, &c->idle);
	client_process(c);
}

static void defer_deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_defer *d = w->data;
	struct admin_client *c = d->c;

	(void)loop, (void)revents;
	if (!c)
		return;
	/* answered now; the token lives on until its owner ends it */
	c->waiting = NULL;
	d->c = NULL;
	log_debug("admin client uid %u: %s", (unsigned)c->uid, d->msg);
	if (client_error(c, d->id, d->msg) == 0)
		client_resume(c);
}

struct admin_defer *admin_defer_begin(struct admin *a, double timeout, const char *timeout_msg)
{
	struct admin_defer *d;

	if (!a->cur || a->cur->waiting)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->a = a;
	d->c = a->cur;
	d->id = a->cur_id ? json_object_get(a->cur_id) : NULL;
	snprintf(d->msg, sizeof(d->msg), "%s", timeout_msg);
	ev_timer_init(&d->deadline, defer_deadline_cb, timeout, 0.0);
	d->deadline.data = d;
	ev_timer_start(a->loop, &d->deadline);
	d->next = a->defers;
	if (a->defers)
		a->defers->prev = d;
	a->defers = d;
	a->cur->waiting = d;
	/* waiting for the device is not the client idling */
	ev_timer_stop(a->loop, &a->cur->idle);
	return d;
}

void admin_defer_abort(struct admin_defer *d)
{
	if (d->c)
		ev_timer_again(d->a->loop, &d->c->idle);
	defer_free(d);
}

void admin_defer_reply(struct admin_defer *d, int ret, json_object *rep, const char *err)
{
	struct admin_client *c = d->c;
	int r;

	if (!c) {
		json_object_put(rep);
		defer_free(d);
		return;
	}
	c->waiting = NULL;
	d->c = NULL;
	if (ret < 0) {
		json_object_put(rep);
		r = client_error(c, d->id, err && err[0] ? err : "failed");
	} else {
		if (d->id)
			jset(rep, "id", json_object_get(d->id));
		r = client_reply(c, rep);
	}
	defer_free(d);
	if (r == 0)
		client_resume(c);
}

/* Is gid one of the peer's groups (primary or supplementary)? */
static bool admin_peer_in(gid_t gid, gid_t primary, const gid_t *groups, size_t n)
{
	if (gid == (gid_t)-1)
		return false;
	if (gid == primary)
		return true;
	for (size_t i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Read the peer's credentials as the kernel recorded them at connect(2):
 * SO_PEERCRED (uid, gid, pid) and SO_PEERGROUPS (supplementary groups), never
 * anything the client says.  Fills c->uid, c->pid, c->may_read, c->may_change;
 * a peer whose groups cannot be read gets only what its uid and primary
 * group give.  0 or a negative errno (then the client must be refused). */
static int admin_peer_rights(struct admin *a, struct admin_client *c)
{
	const struct cfg_daemon *d = &a->ctx.cfg->daemon;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	gid_t small[64], *groups = small;
	socklen_t glen = sizeof(small);
	size_t n = 0;
	bool adm, op;

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	if (len != sizeof(cr))
		return -EIO;
	c->uid = cr.uid;
	c->pid = cr.pid;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
		/* ERANGE: glen now says how much the groups need */
		if (errno == ERANGE && glen > sizeof(small) && (groups = malloc(glen)) &&
		    getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
			;
		else
			glen = 0; /* not read: the primary group only */
	}
	n = glen / sizeof(gid_t);
	adm = admin_peer_in(d->admin_gid, cr.gid, groups, n);
	op = admin_peer_in(d->operator_gid, cr.gid, groups, n);
	if (groups != small)
		free(groups); /* NULL when malloc failed */
	c->may_change = cr.uid == 0 || op;
	c->may_read = c->may_change || adm;
	return 0;
}

/* Clients the uid holds now. */
static unsigned admin_uid_clients(const struct admin *a, uid_t uid)
{
	unsigned n = 0;

	for (const struct admin_client *c = a->clients; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* NULL when the new client may stay, else why not (its reply's error). */
static const char *admin_admit(const struct admin *a, const struct admin_client *c)
{
	if (!c->may_read)
		return "permission denied: not root, admin_group or operator_group";
	if (a->nr_clients >= ADMIN_MAX_CLIENTS)
		return "too many admin clients";
	if (c->uid == 0)
		return NULL;
	/* the last ADMIN_ROOT_RESERVE slots are root's, and no other uid may
	 * hold more than ADMIN_MAX_CLIENTS_PER_UID: one user cannot lock the
	 * others, or root, out */
	if (a->nr_clients >= ADMIN_MAX_CLIENTS - ADMIN_ROOT_RESERVE)
		return "too many admin clients (the rest are kept for root)";
	if (admin_uid_clients(a, c->uid) >= ADMIN_MAX_CLIENTS_PER_UID)
		return "too many admin clients of this user";
	return NULL;
}

static void admin_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin *a = w->data;

	(void)revents;
	ev_io_start(loop, &a->lio);
}

static void admin_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin *a = w->data;

	(void)revents;
	for (;;) {
		int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_client *c;
		const char *refusal;
		int ret;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* the listener would stay readable: pause it */
				log_warn("admin socket: accept: %s (pausing for 1 s)",
				         strerror(errno));
				ev_io_stop(loop, &a->lio);
				ev_timer_set(&a->retry, 1.0, 0.0);
				ev_timer_start(loop, &a->retry);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_warn("admin socket: accept: %s", strerror(errno));
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			log_warn("admin socket: out of memory for a client");
			close(fd);
			continue;
		}
		c->a = a;
		c->fd = fd;
		ret = admin_peer_rights(a, c);
		if (ret < 0) {
			warn_limited(&a->rl_client, "admin socket: peer credentials: %s: refused",
			             strerror(-ret));
			free(c);
			close(fd);
			continue;
		}
		refusal = admin_admit(a, c);
		if (!refusal)
			c->in = malloc(ADMIN_LINE_MAX + 1);
		if (refusal || !c->in) {
			if (refusal) {
				char line[160];
				int n = snprintf(line, sizeof(line), "{\"ok\":false,\"error\":\"%s\"}\n",
				                 refusal);

				warn_limited(&a->rl_client, "admin socket: uid %u (pid %d) refused: %s",
				             (unsigned)c->uid, (int)c->pid, refusal);
				if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
					log_debug("admin socket: refusal: %s", strerror(errno));
			} else {
				log_warn("admin socket: out of memory for a client");
			}
			free(c);
			close(fd);
			continue;
		}
		ev_io_init(&c->rio, client_read_cb, fd, EV_READ);
		ev_io_init(&c->wio, client_write_cb, fd, EV_WRITE);
		ev_init(&c->idle, client_idle_cb);
		c->idle.repeat = a->idle_timeout;
		ev_init(&c->deadline, client_deadline_cb);
		c->rio.data = c->wio.data = c->idle.data = c->deadline.data = c;
		c->next = a->clients;
		if (a->clients)
			a->clients->prev = c;
		a->clients = c;
		a->nr_clients++;
		ev_io_start(loop, &c->rio);
		ev_timer_again(loop, &c->idle);
	}
}

/* ---- the listening socket ---- */

/* Is a daemon listening at sa?  1 yes, 0 no (stale), or a negative errno. */
static int admin_probe(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		ret = 1;
	else if (errno == EAGAIN || errno == EINPROGRESS)
		ret = 1; /* its backlog is full: alive, just busy */
	else if (errno == ECONNREFUSED)
		ret = 0;
	else
		ret = -errno;
	close(fd);
	return ret;
}

/* Create the listening socket at path without ever changing anything
 * through a name another user could replace.  bind(2) creates the socket
 * file with the process umask, so its mode and group must be set
 * afterwards; done by path next to the final name, an attacker who can
 * write that directory could swap the fresh socket for a symlink between
 * bind and chown/chmod and have them applied to a file of their choosing.
 * So: make a private directory (mkdtemp: mode 0700, ours) in the socket's
 * directory, bind, chown, chmod and listen there, where nobody else can
 * create or swap a name, then rename(2) the finished socket onto path: an
 * atomic replacement that never follows a symlink at path.  The private
 * directory goes away.  The umask is not touched: it is per process, and
 * the reactors are already running. */
static int admin_bind_private(struct admin *a, const char *path)
{
	const struct cfg_daemon *d = &a->ctx.cfg->daemon;
	/* connect(2) needs write permission on the socket: its group is the
	 * one allowed to read (operators, when only they are named), and
	 * without either it is root's alone */
	gid_t gid = d->admin_gid != (gid_t)-1 ? d->admin_gid : d->operator_gid;
	const char *group = d->admin_gid != (gid_t)-1 ? d->admin_group : d->operator_group;
	mode_t mode = gid != (gid_t)-1 ? 0660 : 0600;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dirbuf[sizeof(sa.sun_path)], basebuf[sizeof(sa.sun_path)];
	char tmp[sizeof(sa.sun_path) + 16];
	const char *dir, *base;
	int dfd = -1, tfd = -1, ret;
	struct stat st;

	memcpy(dirbuf, path, strlen(path) + 1);
	memcpy(basebuf, path, strlen(path) + 1);
	dir = dirname(dirbuf);
	base = basename(basebuf);
	if (snprintf(tmp, sizeof(tmp), "%s/.nvmefsd-admin.XXXXXX", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (!mkdtemp(tmp)) {
		ret = -errno;
		log_err("admin socket %s: a private directory in %s: %s", path, dir,
		        strerror(errno));
		return ret;
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	tfd = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || tfd < 0) {
		ret = -errno;
		log_err("admin socket %s: opening %s: %s", path, dfd < 0 ? dir : tmp,
		        strerror(errno));
		goto err_rmdir;
	}
	/* bind through the directory fd: the private path may be longer than
	 * sun_path allows, /proc/self/fd/N/s never is */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/s", tfd);
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		ret = -errno;
		log_err("admin socket: socket: %s", strerror(errno));
		goto err_rmdir;
	}
	if (bind(a->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		log_err("admin socket %s: bind in %s: %s", path, tmp, strerror(errno));
		goto err_close;
	}
	if (gid != (gid_t)-1 && fchownat(tfd, "s", (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		log_err("admin socket %s: chown to group %s (%u): %s", path, group, (unsigned)gid,
		        strerror(errno));
		goto err_unlink;
	}
	if (fchmodat(tfd, "s", mode, 0) < 0) {
		ret = -errno;
		log_err("admin socket %s: chmod %04o: %s", path, (unsigned)mode, strerror(errno));
		goto err_unlink;
	}
	if (fstatat(tfd, "s", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		log_err("admin socket %s: stat: %s", path, strerror(errno));
		goto err_unlink;
	}
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	if (listen(a->fd, 16) < 0) {
		ret = -errno;
		log_err("admin socket %s: listen: %s", path, strerror(errno));
		goto err_unlink;
	}
	if (renameat(tfd, "s", dfd, base) < 0) {
		ret = -errno;
		log_err("admin socket %s: rename into place: %s", path, strerror(errno));
		goto err_unlink;
	}
	unlinkat(dfd, tmp + strlen(dir) + 1, AT_REMOVEDIR);
	close(tfd);
	close(dfd);
	return 0;

err_unlink:
	unlinkat(tfd, "s", 0);
err_close:
	close(a->fd);
	a->fd = -1;
err_rmdir:
	if (tfd >= 0)
		close(tfd);
	if (dfd >= 0)
		close(dfd);
	rmdir(tmp);
	return ret;
}

static int admin_listen(struct admin *a)
{
	const struct cfg *cfg = a->ctx.cfg;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = cfg->daemon.admin_socket;
	struct stat st;
	int ret;

	if (!path[0]) {
		log_err("admin socket: the path is empty");
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("admin socket %s: path longer than %zu bytes", path,
		        sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* whoever may change the socket's directory (or one above it) may put
	 * a socket of their own at the path, which root's nvmefsctl would
	 * then talk to: no link on the way, every directory root's, none
	 * writable by others unless sticky, its own by its owner only */
	{
		char msg[PATH_MAX + 160];
		const char *name;
		int dfd = safepath_open_parent(path, false, &name, msg, sizeof(msg));

		if (dfd < 0) {
			log_err("admin socket %s: refused: %s", path, msg);
			return dfd;
		}
		close(dfd);
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_err("admin socket %s: exists and is not a socket; not replacing it",
			        path);
			return -EEXIST;
		}
		ret = admin_probe(&sa);
		if (ret > 0) {
			log_err("admin socket %s: another daemon is listening there", path);
			return -EADDRINUSE;
		}
		if (ret < 0) {
			log_err("admin socket %s: cannot tell whether it is in use: %s", path,
			        strerror(-ret));
			return ret;
		}
		/* the rename in admin_bind_private replaces it */
		log_info("admin socket %s: replacing a stale socket file", path);
	} else if (errno != ENOENT) {
		ret = -errno;
		log_err("admin socket %s: %s", path, strerror(errno));
		return ret;
	}

	ret = admin_bind_private(a, path);
	if (ret < 0)
		return ret;
	memcpy(a->path, path, strlen(path) + 1);
	return 0;
}

int admin_srv_listen(struct admin *a)
{
	int ret = admin_listen(a);

	if (ret < 0)
		return ret;
	ev_io_init(&a->lio, admin_accept_cb, a->fd, EV_READ);
	a->lio.data = a;
	ev_init(&a->retry, admin_retry_cb);
	a->retry.data = a;
	return 0;
}

void admin_srv_serve(struct admin *a)
{
	ev_io_start(a->loop, &a->lio);
	log_info("admin socket listening on %s", a->path);
}

void admin_srv_close_clients(struct admin *a)
{
	while (a->clients)
		client_close(a->clients);
}

void admin_srv_stop(struct admin *a)
{
	struct stat st;

	while (a->defers)
		defer_free(a->defers);
	if (a->fd < 0)
		return;
	ev_io_stop(a->loop, &a->lio);
	ev_timer_stop(a->loop, &a->retry);
	/* a daemon started after us may have taken the path over */
	if (stat(a->path, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino)
		unlink(a->path);
	close(a->fd);
	a->fd = -1;
}

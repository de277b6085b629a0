/* upgrade.c - see upgrade.h */
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "fdstore.h"
#include "fstate.h"
#include "log.h"
#include "safepath.h"

#define UPG_REAP_MAX_MS 500 /* after SIGKILL: the reap is waited for this long */

int upg_resolve_binary(char *out, size_t len, char *why, size_t whylen)
{
	static const char deleted[] = " (deleted)";
	ssize_t n = readlink("/proc/self/exe", out, len);
	size_t dl = sizeof(deleted) - 1;

	if (n < 0) {
		int rc = -errno;

		snprintf(why, whylen, "/proc/self/exe: %s", strerror(-rc));
		return rc;
	}
	if ((size_t)n >= len) {
		snprintf(why, whylen, "/proc/self/exe: the path is too long");
		return -ENAMETOOLONG;
	}
	out[n] = '\0';
	/* replaced between our exec and now: the name is no longer ours */
	if ((size_t)n > dl && !strcmp(out + n - dl, deleted)) {
		snprintf(why, whylen, "%s: replaced since this process started", out);
		return -ESTALE;
	}
	if (out[0] != '/') {
		snprintf(why, whylen, "/proc/self/exe is not an absolute path: %s", out);
		return -EINVAL;
	}
	return 0;
}

bool upg_binary_replaced(const char *path)
{
	struct stat now, running;

	/* no binary resolved at start: nothing was installed over it */
	if (!path[0])
		return false;
	/* through the link the running image is reached even once deleted
	 * (opened, not stat'ed by name: valgrind gives its client's image to
	 * an open of /proc/self/exe only) */
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &running) < 0) {
		close(fd);
		return false;
	}
	close(fd);
	if (stat(path, &now) < 0)
		return errno == ENOENT;
	return now.st_dev != running.st_dev || now.st_ino != running.st_ino;
}

int upg_binary_check(const char *path, char *why, size_t len)
{
	char msg[PATH_MAX + 160];
	struct stat st;
	int rc;

	/* no link on the way, every directory root's and none writable by
	 * others (but a sticky one above the last), the file root's */
	rc = safepath_check_file(path, msg, sizeof(msg));
	if (rc) {
		snprintf(why, len, "the installed binary %s: %s", path, msg);
		return rc;
	}
	/* (a missing file passes the walk: it would be created there) */
	if (lstat(path, &st) < 0) {
		rc = -errno;
		snprintf(why, len, "the installed binary %s: %s", path, strerror(-rc));
		return rc;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "the installed binary %s is writable by group or others (mode %04o)",
			 path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	if (!(st.st_mode & S_IXUSR)) {
		snprintf(why, len, "the installed binary %s is not executable (mode %04o)", path,
			 (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

int upg_ns_table_format(const struct fusefs_ns_desc *ns, unsigned nr, char *buf, size_t len)
{
	size_t off = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned i = 0; i < nr; i++) {
		char item[160];
		int n = snprintf(item, sizeof(item), "%s%s/%" PRIu64 "/%" PRIu32, i ? "," : "",
				 ns[i].name, ns[i].size, ns[i].lba_size);

		if (n < 0 || (size_t)n >= sizeof(item) || off + (size_t)n >= len)
			return -ENOSPC;
		memcpy(buf + off, item, (size_t)n + 1);
		off += (size_t)n;
	}
	return 0;
}

/* Parse --ns-table into ns[] (names point into the copy *store). */
static int ns_table_parse(const char *t, struct fusefs_ns_desc **out, unsigned *nr,
			  char **store)
{
	struct fusefs_ns_desc *ns = NULL;
	unsigned n = 0, cap = 0;
	char *s = strdup(t), *save = NULL, *tok;

	if (!s)
		return -ENOMEM;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *lba = strrchr(tok, '/'), *size, *end;

		if (!lba)
			goto bad;
		*lba++ = '\0';
		size = strrchr(tok, '/');
		if (!size || size == tok)
			goto bad;
		*size++ = '\0';
		if (n == cap) {
			struct fusefs_ns_desc *g = realloc(ns, (cap = cap ? 2 * cap : 8) * sizeof(*ns));

			if (!g) {
				free(ns);
				free(s);
				return -ENOMEM;
			}
			ns = g;
		}
		memset(&ns[n], 0, sizeof(ns[n]));
		ns[n].name = tok;
		errno = 0;
		ns[n].size = strtoull(size, &end, 10);
		if (errno || *end)
			goto bad;
		ns[n].lba_size = (uint32_t)strtoul(lba, &end, 10);
		if (*end)
			goto bad;
		n++;
	}
	*out = ns;
	*nr = n;
	*store = s;
	return 0;
bad:
	free(ns);
	free(s);
	return -EINVAL;
}

int upg_check_adopt_main(const char *config, int state_fd, const char *ns_table)
{
	struct cfg *cfg = NULL;
	struct fusefs_ns_desc *ns = NULL;
	struct fstate st;
	unsigned nr = 0;
	char *store = NULL, *buf = NULL, why[512];
	size_t len = 0;
	uint64_t digest;
	int rc, status = 1;

	if (state_fd < 0 || !ns_table) {
		printf("--check-adopt needs --state-fd and --ns-table\n");
		fflush(stdout);
		return 2;
	}
	if (cfg_load(config, &cfg, stderr)) {
		printf("the config %s does not load\n", config);
		goto cleanup;
	}
	rc = ns_table_parse(ns_table, &ns, &nr, &store);
	if (rc) {
		printf("the namespace table: %s\n", strerror(-rc));
		goto cleanup;
	}
	buf = malloc(fstate_size() + 1);
	if (!buf) {
		printf("out of memory\n");
		goto cleanup;
	}
	rc = fdstore_memfd_read(state_fd, buf, fstate_size() + 1, &len);
	if (!rc)
		rc = fstate_decode(buf, len, &st);
	if (rc) {
		printf("the state record: %s\n",
		       rc == -EPERM ? "not sealed" : fstate_strerror(rc));
		goto cleanup;
	}
	/* the same options main.c gives the front end: what the digest covers */
	struct fusefs_opts fo = {
		.mountpoint = cfg->daemon.mountpoint,
		.file_mode = cfg->daemon.file_mode,
		.uid = cfg->daemon.uid,
		.gid = cfg->daemon.gid,
		.allow_other = cfg->daemon.allow_other,
	};
	const struct cfg_controller *vc = cfg_volatile_ctrl(cfg);

	if (vc) {
		printf("controller %s keeps its namespaces in memory (backing = ram): a new "
		       "image would serve the files over empty memory\n",
		       vc->name);
		goto cleanup;
	}
	fusefs_digest_table(&fo, ns, nr, &digest);
	if (fstate_adoptable(&st, cfg->daemon.mountpoint, digest, why, sizeof(why))) {
		printf("%s\n", why);
		goto cleanup;
	}
	printf("ok\n");
	status = 0;
cleanup:
	fflush(stdout);
	free(buf);
	free(ns);
	free(store);
	cfg_free(cfg);
	return status;
}

void upg_excerpt(char *out, size_t len, const char *text, unsigned total, unsigned max)
{
	size_t off = strlen(out);
	unsigned shown = 0;

	for (const char *p = text; p && *p && shown < max && off < len;) {
		size_t n = strcspn(p, "\n");

		if (n) {
			off += (size_t)snprintf(out + off, len - off, "\n  %.*s%s",
						n > UPG_LINE_MAX ? UPG_LINE_MAX : (int)n, p,
						n > UPG_LINE_MAX ? "..." : "");
			shown++;
		}
		p += n + (p[n] == '\n');
	}
	if (total > shown && off < len)
		snprintf(out + off, len - off, "\n  (and %u more line%s)", total - shown,
			 total - shown == 1 ? "" : "s");
}

/* A running `--check-adopt` child and what it said.  Its output is kept as
 * it comes: the first UPG_OUT_KEEP bytes, the last line whole (up to
 * UPG_LINE_MAX), and the number of lines, however much it prints: the
 * pipe is always drained. */
#define UPG_OUT_KEEP 4096
struct upg_check {
	pid_t pid;
	int fd;                  /* the pipe's read end, non-blocking; -1 once closed */
	int status;              /* waitpid's, once reaped */
	bool reaped;
	bool lost;               /* reaped by someone who did not say how it ended */
	char bin[PATH_MAX];
	char head[UPG_OUT_KEEP + 1];
	size_t head_len;
	char cur[UPG_LINE_MAX + 1], last[UPG_LINE_MAX + 1]; /* the line coming, the last whole */
	size_t cur_len;
	size_t cur_start, last_start; /* where in the output they began */
	unsigned lines;          /* complete non-empty lines */
	bool cur_any;            /* cur holds a byte of a line not yet counted */
	size_t bytes;
};

int upg_check_start(const char *bin, const char *config, int state_fd,
		    const struct fusefs_ns_desc *ns, unsigned nr, struct upg_check **out, char *why,
		    size_t len)
{
	char *table = NULL, fdarg[16];
	size_t tlen = 64 + (size_t)nr * (64 + 48);
	int pfd[2] = {-1, -1}, rc;
	struct upg_check *c = NULL;
	pid_t pid;

	why[0] = '\0';
	if (access(bin, X_OK) != 0) {
		rc = -errno;
		snprintf(why, len, "%s: %s", bin, strerror(errno));
		return rc;
	}
	table = malloc(tlen);
	c = calloc(1, sizeof(*c));
	if (!table || !c) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(c->bin, sizeof(c->bin), "%s", bin);
	rc = upg_ns_table_format(ns, nr, table, tlen);
	if (rc)
		goto fail;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	snprintf(fdarg, sizeof(fdarg), "%d", state_fd);
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0) {
		/* the child: only async-signal-safe calls until the exec */
		char *const argv[] = {(char *)bin, "--check-adopt", "-c", (char *)config,
				      "--state-fd", fdarg, "--ns-table", table, NULL};
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		fcntl(state_fd, F_SETFD, 0);
		execv(bin, argv);
		_exit(127);
	}
	close(pfd[1]);
	/* the loop reads it as it comes: never blocked by a child that says
	 * too much or too little */
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	c->pid = pid;
	c->fd = pfd[0];
	free(table);
	*out = c;
	return 0;
fail:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	free(table);
	free(c);
	if (!why[0])
		snprintf(why, len, "%s --check-adopt: %s", bin, strerror(-rc));
	return rc;
}

int upg_check_fd(const struct upg_check *c)
{
	return c->fd;
}

/* Take n bytes of output: keep the head, follow the lines. */
static void check_take(struct upg_check *c, const char *p, size_t n)
{
	size_t k = UPG_OUT_KEEP - c->head_len < n ? UPG_OUT_KEEP - c->head_len : n;

	memcpy(c->head + c->head_len, p, k);
	c->head_len += k;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			if (c->cur_any) {
				c->cur[c->cur_len] = '\0';
				memcpy(c->last, c->cur, c->cur_len + 1);
				c->last_start = c->cur_start;
				c->lines++;
			}
			c->cur_len = 0;
			c->cur_any = false;
		} else {
			if (!c->cur_any)
				c->cur_start = c->bytes + i;
			if (c->cur_len < UPG_LINE_MAX)
				c->cur[c->cur_len++] = p[i];
			c->cur_any = true;
		}
	}
	c->bytes += n;
}

int upg_check_read(struct upg_check *c)
{
	char buf[4096];

	if (c->fd < 0)
		return 1;
	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof(buf));

		if (n > 0) {
			check_take(c, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		/* the end (or an error, which ends it the same) */
		close(c->fd);
		c->fd = -1;
		return n < 0 ? -errno : 1;
	}
}

pid_t upg_check_pid(const struct upg_check *c)
{
	return c->pid;
}

void upg_check_reaped(struct upg_check *c, int status)
{
	c->status = status;
	c->reaped = true;
}

bool upg_check_exited(struct upg_check *c)
{
	if (!c->reaped) {
		pid_t r;

		do
			r = waitpid(c->pid, &c->status, WNOHANG);
		while (r < 0 && errno == EINTR);
		/* ECHILD: reaped by another (a loop's handler): gone, and how it
		 * ended unknown, which must never pass for a yes */
		c->lost = r < 0 && errno == ECHILD;
		c->reaped = r == c->pid || c->lost;
	}
	return c->reaped;
}

/* What the child said: "BIN WHAT: its last line", then the first of the
 * lines before it and how many more. */
static void check_reason(struct upg_check *c, char *why, size_t len, const char *what)
{
	const char *last = c->last;
	size_t start = c->last_start;
	unsigned before = c->lines ? c->lines - 1 : 0;

	if (c->cur_any) { /* a last line without its newline */
		c->cur[c->cur_len] = '\0';
		last = c->cur;
		start = c->cur_start;
		before = c->lines;
	}
	snprintf(why, len, "%s %s: %s", c->bin, what, *last ? last : "no reason given");
	/* the lines before the last: those of the head that end before it */
	c->head[start < c->head_len ? start : c->head_len] = '\0';
	if (before)
		upg_excerpt(why, len, c->head, before, UPG_REASON_LINES);
}

int upg_check_end(struct upg_check *c, bool timed_out, char *why, size_t len)
{
	int rc;

	if (c->fd >= 0) /* what is already there */
		(void)upg_check_read(c);
	if (!upg_check_exited(c)) {
		/* past its time (or cancelled): killed, and reaped within a short
		 * bound (a process in uninterruptible sleep is left to init) */
		kill(c->pid, SIGKILL);
		for (int i = 0; i < UPG_REAP_MAX_MS && !upg_check_exited(c); i++)
			usleep(1000);
		if (!c->reaped)
			log_warn("restart: %s --check-adopt (pid %d) did not end after SIGKILL",
				 c->bin, (int)c->pid);
		if (c->fd >= 0) {
			(void)upg_check_read(c);
			close(c->fd);
			c->fd = -1;
		}
		if (timed_out) {
			char what[64];

			snprintf(what, sizeof(what), "--check-adopt did not end within %d s: killed; "
				 "its last line", UPG_CHECK_MAX_MS / 1000);
			check_reason(c, why, len, what);
			rc = -ETIMEDOUT;
		} else {
			snprintf(why, len, "%s --check-adopt: cancelled", c->bin);
			rc = -ECANCELED;
		}
		goto out;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (c->lost) {
		snprintf(why, len, "%s --check-adopt: its exit status was lost (reaped by another)",
			 c->bin);
		rc = -EPROTO;
	} else if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0) {
		rc = 0;
	} else if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 127 && !c->bytes) {
		snprintf(why, len, "%s cannot be run", c->bin);
		rc = -ENOEXEC;
	} else if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 2 &&
		   (c->head[c->head_len] = '\0', strstr(c->head, "usage"))) {
		snprintf(why, len, "%s does not know --check-adopt (an older nvmefsd?)", c->bin);
		rc = -ENOTSUP;
	} else if (WIFSIGNALED(c->status)) {
		char what[64];

		snprintf(what, sizeof(what), "--check-adopt was killed by signal %d; its last line",
			 WTERMSIG(c->status));
		check_reason(c, why, len, what);
		rc = -EPROTO;
	} else {
		check_reason(c, why, len, "would not adopt the connection");
		rc = -EPROTO;
	}
out:
	free(c);
	return rc;
}

int upg_exec(const char *bin, char *const argv[], int fuse_fd, int state_fd)
{
	char pid[24];
	int f, s;

	/* above 4 first, so that moving one onto 3 or 4 cannot close the other */
	f = fcntl(fuse_fd, F_DUPFD_CLOEXEC, 5);
	s = fcntl(state_fd, F_DUPFD_CLOEXEC, 5);
	if (f < 0 || s < 0)
		goto fail;
	/* dup2's copies are not close-on-exec: exactly these two go over */
	if (dup2(f, SD_LISTEN_FDS_START) < 0 || dup2(s, SD_LISTEN_FDS_START + 1) < 0)
		goto fail;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (setenv("LISTEN_FDS", "2", 1) || setenv("LISTEN_PID", pid, 1) ||
	    setenv("LISTEN_FDNAMES", FDSTORE_FUSE ":" FDSTORE_STATE, 1))
		goto fail;
	execv(bin, argv);
fail:
	{
		int err = errno ? errno : EIO;

		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		return -err;
	}
}

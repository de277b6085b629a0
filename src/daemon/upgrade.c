/* upgrade.c - see upgrade.h */
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fdstore.h"
#include "fstate.h"
#include "log.h"

#define PRECHECK_MAX_MS 10000 /* a child that says nothing by then is refused */

int upg_resolve_binary(const char *argv0, char *out, size_t len)
{
	char cwd[PATH_MAX];
	const char *path;

	if (!argv0 || !*argv0)
		return -EINVAL;
	if (strchr(argv0, '/')) {
		if (argv0[0] == '/')
			return snprintf(out, len, "%s", argv0) < (int)len ? 0 : -ENAMETOOLONG;
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		return snprintf(out, len, "%s/%s", cwd, argv0) < (int)len ? 0 : -ENAMETOOLONG;
	}
	path = getenv("PATH");
	for (const char *p = path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n && snprintf(out, len, "%.*s/%s", (int)n, p, argv0) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		p += n + (e ? 1 : 0);
	}
	return -ENOENT;
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
		printf("the config %s does not load (the errors are above)\n", config);
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

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

int upg_precheck(const char *bin, const char *config, int state_fd,
		 const struct fusefs_ns_desc *ns, unsigned nr, char *why, size_t len)
{
	char *table = NULL, fdarg[16], out[1024];
	size_t tlen = 64 + (size_t)nr * (64 + 48), got = 0;
	int pfd[2] = {-1, -1}, rc, status;
	struct timespec t0;
	pid_t pid = -1;

	why[0] = '\0';
	if (access(bin, X_OK) != 0) {
		rc = -errno;
		snprintf(why, len, "%s: %s", bin, strerror(errno));
		return rc;
	}
	table = malloc(tlen);
	if (!table)
		return -ENOMEM;
	rc = upg_ns_table_format(ns, nr, table, tlen);
	if (rc)
		goto cleanup;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		goto cleanup;
	}
	snprintf(fdarg, sizeof(fdarg), "%d", state_fd);
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto cleanup;
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
	pfd[1] = -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		long left = PRECHECK_MAX_MS - ms_since(&t0);
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			snprintf(why, len, "%s --check-adopt did not answer in %d ms", bin,
				 PRECHECK_MAX_MS);
			rc = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		n = read(pfd[0], out + got, sizeof(out) - 1 - got);
		if (n > 0) {
			got += (size_t)n;
			if (got < sizeof(out) - 1)
				continue;
		}
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		rc = 0;
		break; /* EOF, or as much as we keep */
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc)
		goto cleanup;
	out[got] = '\0';
	/* the reason is its last line */
	while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
		out[--got] = '\0';
	char *last = strrchr(out, '\n');
	last = last ? last + 1 : out;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rc = 0;
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !*last) {
		snprintf(why, len, "%s cannot be run", bin);
		rc = -ENOEXEC;
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 2 && strstr(out, "usage")) {
		snprintf(why, len, "%s does not know --check-adopt (an older nvmefsd?)", bin);
		rc = -ENOTSUP;
	} else {
		snprintf(why, len, "%s would not adopt the connection: %s", bin,
			 *last ? last : "no reason given");
		rc = -EPROTO;
	}
cleanup:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (rc && !why[0])
		snprintf(why, len, "%s --check-adopt: %s", bin, strerror(-rc));
	free(table);
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

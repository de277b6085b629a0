/* fdstore - a stand-in for systemd's fd store, for the tests.
 *
 *   fdstore [-n RESTARTS] [-a] [-x stale|devnull] [-p PIDFILE] -s SOCKET -- CMD...
 *
 * Runs CMD with NOTIFY_SOCKET=SOCKET (an AF_UNIX datagram socket it binds,
 * SO_PASSCRED on) and speaks the protocol as systemd does for a service
 * with NotifyAccess=main and FileDescriptorStoreMax=4:
 *   - a message counts only when the kernel says it came from the main
 *     process (SCM_CREDENTIALS pid); fds in any other are closed;
 *   - FDSTORE=1 keeps the message's fds (SCM_RIGHTS) under FDNAME= (default
 *     "stored"); with 4 fds kept any more is closed, and then one that is
 *     the same open file as a kept one (kcmp KCMP_FILE, as systemd's
 *     same_fd);
 *   - FDSTOREREMOVE=1 closes every kept fd named FDNAME=;
 *   - a kept fd that polls POLLHUP or POLLERR is closed (unless FDPOLL=0);
 *   - when CMD ends by a signal or with a status other than 0 (or any way
 *     with -a), it is started again, at most RESTARTS times (10), with the
 *     kept fds at 3, 4, ... in the order stored, LISTEN_FDS=n,
 *     LISTEN_PID=its pid (set in the child between fork and exec) and
 *     LISTEN_FDNAMES=a:b; the store keeps its copies.  A status of 0 ends
 *     fdstore with 0; SIGTERM to fdstore is passed to CMD, which is not
 *     restarted after.
 * Test modes: -x stale passes LISTEN_PID of another process (the fds are
 * still at 3, 4, ...: sd_listen_fds must ignore them); -x devnull hands
 * /dev/null in place of the fd named "fuse" (the store keeps the real one).
 * PIDFILE holds CMD's current pid.  Every event is one "fdstore: " line on
 * stderr.  Exit status: CMD's last (128 + signal when killed), 1 when out
 * of restarts.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define STORE_MAX 4
#define MSG_FDS_MAX 16

struct kept {
	int fd;
	char name[256];
	bool poll;
};

static struct kept store[STORE_MAX];
static unsigned nr_kept;
static pid_t child;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("fdstore: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static bool same_fd(int a, int b)
{
	pid_t p = getpid();

	return syscall(SYS_kcmp, p, p, KCMP_FILE, a, b) == 0;
}

static void drop(unsigned i, const char *why)
{
	say("dropped %s (fd %d): %s", store[i].name, store[i].fd, why);
	close(store[i].fd);
	memmove(&store[i], &store[i + 1], (nr_kept - i - 1) * sizeof(store[0]));
	nr_kept--;
}

/* systemd's order: the limit first, then duplicates */
static void keep(int fd, const char *name, bool poll)
{
	if (nr_kept == STORE_MAX) {
		say("store full: %s not kept", name);
		close(fd);
		return;
	}
	for (unsigned i = 0; i < nr_kept; i++)
		if (same_fd(store[i].fd, fd)) {
			say("duplicate of %s not kept", store[i].name);
			close(fd);
			return;
		}
	store[nr_kept].fd = fd;
	store[nr_kept].poll = poll;
	snprintf(store[nr_kept].name, sizeof(store[0].name), "%s", name);
	nr_kept++;
	say("stored %s", name);
}

/* One datagram: its fds and its assignments. */
static void receive(int sock)
{
	char buf[4096], name[256] = "stored";
	union {
		char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(MSG_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
			    .msg_controllen = sizeof(c.b)};
	int fds[MSG_FDS_MAX], nfds = 0;
	pid_t from = 0;
	bool store_it = false, remove = false, poll = true;
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return;
	buf[n] = '\0';
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET)
			continue;
		if (cm->cmsg_type == SCM_CREDENTIALS) {
			struct ucred uc;

			memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
			from = uc.pid;
		} else if (cm->cmsg_type == SCM_RIGHTS) {
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			memcpy(fds + nfds, CMSG_DATA(cm), (size_t)k * sizeof(int));
			nfds += k;
		}
	}
	if (from != child || (mh.msg_flags & MSG_CTRUNC)) {
		say("message from pid %d ignored (main pid %d)%s", (int)from, (int)child,
		    mh.msg_flags & MSG_CTRUNC ? ", truncated" : "");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	for (char *save, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strcmp(l, "FDSTORE=1") == 0)
			store_it = true;
		else if (strcmp(l, "FDSTOREREMOVE=1") == 0)
			remove = true;
		else if (strcmp(l, "FDPOLL=0") == 0)
			poll = false;
		else if (strncmp(l, "FDNAME=", 7) == 0)
			snprintf(name, sizeof(name), "%s", l + 7);
		else
			say("%s", l);
	}
	if (remove)
		for (unsigned i = nr_kept; i-- > 0;)
			if (strcmp(store[i].name, name) == 0)
				drop(i, "FDSTOREREMOVE");
	for (int i = 0; i < nfds; i++) {
		if (store_it)
			keep(fds[i], name, poll);
		else
			close(fds[i]);
	}
}

static pid_t start(char **argv, const char *sock, const char *mode, const sigset_t *old)
{
	char names[STORE_MAX * 257] = "", num[32];
	pid_t pid;

	say("starting with %u fd%s", nr_kept, nr_kept == 1 ? "" : "s");
	pid = fork();
	if (pid != 0)
		return pid;
	/* the child: kept fds to 3, 4, ... (first out of the way of each other) */
	int high[STORE_MAX];

	for (unsigned i = 0; i < nr_kept; i++) {
		int fd = store[i].fd;

		if (mode && strcmp(mode, "devnull") == 0 && strcmp(store[i].name, "fuse") == 0)
			fd = open("/dev/null", O_RDWR);
		high[i] = fcntl(fd, F_DUPFD_CLOEXEC, 64);
		if (high[i] < 0)
			_exit(127);
		strcat(names, i ? ":" : "");
		strcat(names, store[i].name);
	}
	for (unsigned i = 0; i < nr_kept; i++)
		if (dup2(high[i], 3 + (int)i) < 0)
			_exit(127);
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	if (nr_kept) {
		snprintf(num, sizeof(num), "%u", nr_kept);
		setenv("LISTEN_FDS", num, 1);
		/* stale: a pid that is not the one exec'd here */
		snprintf(num, sizeof(num), "%d",
			 (int)(mode && strcmp(mode, "stale") == 0 ? getppid() : getpid()));
		setenv("LISTEN_PID", num, 1);
		setenv("LISTEN_FDNAMES", names, 1);
	}
	setenv("NOTIFY_SOCKET", sock, 1);
	sigprocmask(SIG_SETMASK, old, NULL);
	execvp(argv[0], argv);
	_exit(127);
}

int main(int argc, char **argv)
{
	const char *sock_path = NULL, *mode = NULL, *pidfile = NULL;
	unsigned max_restarts = 10, restarts = 0;
	bool always = false, stopping = false;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	sigset_t sigs, old;
	int opt, sock, sfd, one = 1, status = 0;

	while ((opt = getopt(argc, argv, "+n:ax:p:s:")) != -1) {
		switch (opt) {
		case 'n':
			max_restarts = (unsigned)atoi(optarg);
			break;
		case 'a':
			always = true;
			break;
		case 'x':
			mode = optarg;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 's':
			sock_path = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!sock_path || optind >= argc || strlen(sock_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: fdstore [-n N] [-a] [-x stale|devnull] [-p PIDFILE] -s "
				"SOCKET -- CMD...\n");
		return 2;
	}
	strcpy(sa.sun_path, sock_path);
	unlink(sock_path);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
		perror("fdstore: notify socket");
		return 1;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		perror("fdstore: signalfd");
		return 1;
	}
	argv += optind;
	for (;;) {
		FILE *pf;

		child = start(argv, sock_path, mode, &old);
		if (child < 0) {
			perror("fdstore: fork");
			return 1;
		}
		if (pidfile && (pf = fopen(pidfile, "w"))) {
			fprintf(pf, "%d\n", (int)child);
			fclose(pf);
		}
		bool running = true;

		while (running) {
			struct pollfd p[2 + STORE_MAX] = {{.fd = sock, .events = POLLIN},
							  {.fd = sfd, .events = POLLIN}};

			unsigned polled = nr_kept;

			for (unsigned i = 0; i < polled; i++)
				p[2 + i] = (struct pollfd){.fd = store[i].poll ? store[i].fd : -1};
			if (poll(p, 2 + polled, -1) < 0 && errno != EINTR)
				return 1;
			/* messages first, as systemd orders them: an FDSTOREREMOVE
			 * sent before the connection ended is what removed the fd */
			while (poll(&(struct pollfd){.fd = sock, .events = POLLIN}, 1, 0) == 1)
				receive(sock);
			/* (receive may have removed entries: find each by its fd) */
			for (unsigned k = 0; k < polled; k++) {
				if (!(p[2 + k].revents & (POLLHUP | POLLERR)))
					continue;
				for (unsigned i = 0; i < nr_kept; i++)
					if (store[i].fd == p[2 + k].fd) {
						drop(i, "POLLHUP/POLLERR");
						break;
					}
			}
			if (!(p[1].revents & POLLIN))
				continue;
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo != SIGCHLD) {
				say("signal %u: passed on, no restart after", si.ssi_signo);
				stopping = true;
				kill(child, (int)si.ssi_signo);
				continue;
			}
			if (waitpid(child, &status, WNOHANG) == child)
				running = false;
		}
		/* what it sent just before dying counts, as with systemd */
		while (poll(&(struct pollfd){.fd = sock, .events = POLLIN}, 1, 0) == 1)
			receive(sock);
		if (WIFSIGNALED(status))
			say("pid %d killed by signal %d", (int)child, WTERMSIG(status));
		else
			say("pid %d exited %d", (int)child, WEXITSTATUS(status));
		int rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);

		if (stopping || (rc == 0 && !always))
			return rc;
		if (restarts++ == max_restarts) {
			say("no restart left");
			return 1;
		}
	}
}

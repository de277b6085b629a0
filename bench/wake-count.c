/* wake-count.c - how many of the threads waiting on one file an event
 * wakes, for each way a reactor could wait: the question behind reading
 * /dev/fuse from several reactors, where a wake-up that finds nothing to do
 * costs a CPU that applications want.
 *
 * Two threads each wait on their own fd of the same pipe (dup: one open
 * file, one wait queue, as the reactors' duplicates of the FUSE session's
 * /dev/fuse are one file).  Each event is one byte written while both
 * threads sleep; the count is how many times the threads went to sleep
 * again after it (their voluntary context switches: a thread that wakes
 * sleeps once more), summed over the events.  1 per event: one thread
 * woken; 2: both.  The kernel wakes a pipe's readers and /dev/fuse's the
 * same way (a wake-up of the file's wait queue, where an exclusive waiter
 * counts once), so what a mode does here it does on /dev/fuse.
 *
 * Modes:
 *   epoll                each thread in epoll_wait on an epoll of its own
 *                        holding its fd (libev's way)
 *   epoll-exclusive      the same, the fd registered EPOLLEXCLUSIVE (what a
 *                        reactor's own wait does, nvme_reactor_wait_fd)
 *   epoll-nested         the thread sleeps in an epoll holding a second
 *                        epoll, which holds the fd EPOLLEXCLUSIVE (an
 *                        exclusive entry inside libev's epoll)
 *   uring-read           IORING_OP_READ on the fd through the thread's own
 *                        io_uring, waiting in io_uring_enter
 *   uring-read-defer     the same with IORING_SETUP_DEFER_TASKRUN
 *   uring-poll-exclusive IORING_OP_POLL_ADD with EPOLLEXCLUSIVE, then read(2)
 *   read                 a blocking read(2) (the kernel's exclusive wait:
 *                        the null server's readers)
 *
 * Usage: wake-count [-n EVENTS] [MODE...]   (default: 200 events, every mode)
 * Prints one line per mode: events, sleeps, sleeps per event, and how many
 * of the events each thread read.  Exit 0, or 1 with a message when a mode
 * could not run (e.g. io_uring refused). */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum mode { M_EPOLL, M_EPOLL_EXCL, M_EPOLL_NESTED, M_URING_READ, M_URING_DEFER, M_URING_POLL, M_READ, M_N };
static const char *const mode_names[M_N] = {"epoll",      "epoll-exclusive",  "epoll-nested",
                                            "uring-read", "uring-read-defer", "uring-poll-exclusive",
                                            "read"};

struct waiter {
	enum mode mode;
	int fd;                 /* this thread's dup of the pipe's read end */
	int stop_fd;            /* the pipe's read end itself, for the stop */
	_Atomic pid_t tid;
	_Atomic unsigned got;   /* bytes read */
	_Atomic int err;        /* a failed call: -errno */
	pthread_t thread;
};

static atomic_bool stopping;

static void drain(struct waiter *w)
{
	char b[64];
	ssize_t n;

	while ((n = read(w->fd, b, sizeof(b))) > 0)
		atomic_fetch_add(&w->got, (unsigned)n);
}

static int wait_epoll(struct waiter *w)
{
	struct epoll_event e = {.events = EPOLLIN}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC), inner = -1, rc = 0;

	if (ep < 0)
		return -errno;
	if (w->mode == M_EPOLL_EXCL)
		e.events |= EPOLLEXCLUSIVE;
	if (w->mode == M_EPOLL_NESTED) {
		struct epoll_event x = {.events = EPOLLIN | EPOLLEXCLUSIVE};

		inner = epoll_create1(EPOLL_CLOEXEC);
		if (inner < 0 || epoll_ctl(inner, EPOLL_CTL_ADD, w->fd, &x) < 0 ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, inner, &e) < 0)
			rc = -errno;
	} else if (epoll_ctl(ep, EPOLL_CTL_ADD, w->fd, &e) < 0) {
		rc = -errno;
	}
	while (!rc && !atomic_load(&stopping)) {
		if (inner >= 0) {
			/* the inner one is looked into without waiting, as libev
			 * would look into its fds */
			if (epoll_wait(ep, &out, 1, -1) > 0 && epoll_wait(inner, &out, 1, 0) > 0)
				drain(w);
		} else if (epoll_wait(ep, &out, 1, -1) > 0) {
			drain(w);
		}
	}
	if (inner >= 0)
		close(inner);
	close(ep);
	return rc;
}

static int wait_uring(struct waiter *w)
{
	struct io_uring ring;
	unsigned flags = 0;
	char b[64];
	int rc;

	if (w->mode == M_URING_DEFER)
		flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init(8, &ring, flags);
	if (rc < 0)
		return rc;
	while (!rc && !atomic_load(&stopping)) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;

		if (w->mode == M_URING_POLL)
			io_uring_prep_poll_add(sqe, w->fd, POLLIN | EPOLLEXCLUSIVE);
		else
			io_uring_prep_read(sqe, w->fd, b, sizeof(b), 0);
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc == -EINTR) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		rc = 0;
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			int res = cqe->res;

			io_uring_cqe_seen(&ring, cqe);
			if (res < 0 && res != -EAGAIN) {
				rc = res;
				break;
			}
			if (w->mode == M_URING_POLL)
				drain(w);
			else if (res > 0)
				atomic_fetch_add(&w->got, (unsigned)res);
		}
	}
	io_uring_queue_exit(&ring);
	return rc;
}

static int wait_read(struct waiter *w)
{
	char b[64];

	while (!atomic_load(&stopping)) {
		ssize_t n = read(w->fd, b, sizeof(b));

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			atomic_fetch_add(&w->got, (unsigned)n);
	}
	return 0;
}

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	int rc;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	if (w->mode == M_READ)
		rc = wait_read(w);
	else if (w->mode >= M_URING_READ)
		rc = wait_uring(w);
	else
		rc = wait_epoll(w);
	atomic_store(&w->err, rc);
	return NULL;
}

/* A thread's state letter ('?' when it is gone) and its voluntary context
 * switches. */
static char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] && p[2] ? p[2] : '?';
}

static unsigned long task_sleeps(pid_t tid)
{
	char path[64], line[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %lu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void nap(void)
{
	nanosleep(&(struct timespec){0, 200000}, NULL);
}

/* Both threads asleep, within 10 s: 0, else -ETIMEDOUT. */
static int both_asleep(struct waiter *w)
{
	for (int i = 0; i < 50000; i++) {
		if (task_state(w[0].tid) == 'S' && task_state(w[1].tid) == 'S')
			return 0;
		nap();
	}
	return -ETIMEDOUT;
}

/* One mode: 0 and the line printed, or -errno. */
static int run_mode(enum mode m, unsigned events)
{
	struct waiter w[2];
	unsigned long sleeps = 0;
	unsigned got[2];
	int p[2], rc = 0, started = 0;

	memset(w, 0, sizeof(w));
	atomic_store(&stopping, false);
	if (pipe2(p, O_CLOEXEC | (m == M_READ ? 0 : O_NONBLOCK)) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		w[i].mode = m;
		w[i].fd = fcntl(p[0], F_DUPFD_CLOEXEC, 3);
		if (w[i].fd < 0 || pthread_create(&w[i].thread, NULL, waiter_main, &w[i])) {
			rc = -EAGAIN;
			break;
		}
		started++;
	}
	for (int i = 0; !rc && i < 50000 && (!w[0].tid || !w[1].tid); i++)
		nap();
	for (unsigned e = 1; !rc && e <= events; e++) {
		unsigned long before;

		rc = both_asleep(w);
		if (rc)
			break;
		before = task_sleeps(w[0].tid) + task_sleeps(w[1].tid);
		if (write(p[1], "x", 1) != 1) {
			rc = -errno;
			break;
		}
		for (int i = 0; i < 50000 && atomic_load(&w[0].got) + atomic_load(&w[1].got) < e; i++)
			nap();
		if (atomic_load(&w[0].got) + atomic_load(&w[1].got) < e || (rc = both_asleep(w)))
			rc = rc ? rc : -ETIMEDOUT;
		else
			sleeps += task_sleeps(w[0].tid) + task_sleeps(w[1].tid) - before;
		for (int i = 0; i < 2 && !rc; i++)
			rc = atomic_load(&w[i].err);
	}
	got[0] = atomic_load(&w[0].got);
	got[1] = atomic_load(&w[1].got);
	/* the stop: a byte per thread wakes every way of waiting */
	atomic_store(&stopping, true);
	for (int i = 0; i < started; i++) {
		for (;;) {
			if (write(p[1], "xx", 2) < 0 && errno != EAGAIN)
				break;
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(w[i].thread, NULL, &ts) == 0)
				break;
		}
		if (!rc)
			rc = atomic_load(&w[i].err);
	}
	for (int i = 0; i < 2; i++)
		if (w[i].fd >= 0)
			close(w[i].fd);
	close(p[0]);
	close(p[1]);
	if (rc)
		return rc;
	printf("%-21s %5u events %6lu sleeps %5.2f per event (events read by each thread: %u / %u)\n",
	       mode_names[m], events, sleeps, (double)sleeps / events, got[0], got[1]);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned events = 200;
	int opt, ret = 0;
	bool any = false;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			events = (unsigned)strtoul(optarg, NULL, 10);
			if (!events) {
				fprintf(stderr, "wake-count: -n: a number of events > 0\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: wake-count [-n EVENTS] [MODE...]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	for (int m = 0; m < M_N; m++) {
		bool want = optind == argc;
		int rc;

		for (int i = optind; i < argc; i++)
			want |= !strcmp(argv[i], mode_names[m]);
		if (!want)
			continue;
		any = true;
		rc = run_mode((enum mode)m, events);
		if (rc) {
			fprintf(stderr, "wake-count: %s: %s\n", mode_names[m], strerror(-rc));
			ret = 1;
		}
	}
	if (!any) {
		fprintf(stderr, "wake-count: no such mode\n");
		return 2;
	}
	return ret;
}

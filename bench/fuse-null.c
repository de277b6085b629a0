/* fuse-null - the FUSE transport's ceiling: a file system whose one file,
 * "null", replies at once and stores nothing.
 *
 * Reads return zeroes from a static buffer, writes succeed without touching
 * anything.  The session fd is read non-blocking from a libev loop, and every
 * request is answered from the thread that read it, the shape the nvmefs
 * reactors use; what this reaches is what any server behind the same kernel
 * FUSE channel can reach at best.
 *
 * Usage: fuse-null [-s SIZE] [-t THREADS] MOUNTPOINT
 *   -s SIZE     size of MOUNTPOINT/null, bytes with an optional K/M/G/T suffix
 *               (binary units; default 1G)
 *   -t THREADS  libev loops sharing the session fd (default 1)
 * Runs in the foreground; SIGINT or SIGTERM unmounts and exits 0.
 */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NULL_INO 2
#define NULL_NAME "null"
#define MAX_IO (1u << 20)
#define MAX_THREADS 64

static uint64_t null_size = 1ull << 30;
/* Reads are served from here; zero-initialised, never written. */
static const char zeroes[MAX_IO];

struct loop {
	struct ev_loop *ev;
	ev_io io;
	ev_idle idle; /* -p: keeps the loop polling instead of sleeping in epoll */
	ev_async stop;
	struct fuse_buf buf; /* reused: libfuse allocates it on the first read */
	pthread_t tid;
	int err;
};

static struct fuse_session *se;
static struct loop loops[MAX_THREADS];
static unsigned nr_loops = 1;
static volatile bool signalled;
static bool polling;

static void null_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return;
	}
	st->st_mode = S_IFREG | 0666;
	st->st_nlink = 1;
	st->st_size = (off_t)null_size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(null_size / 512);
}

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* libfuse insists that this matches -o max_read. */
	conn->max_read = MAX_IO;
	conn->max_write = MAX_IO;
	conn->max_readahead = MAX_IO;
	/* A null file has nothing to splice from. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	/* the same channel settings as nvmefsd, or this is no ceiling for it:
	 * the kernel's default of 12 background requests caps queue depth, and
	 * without async direct I/O a direct request waits for the one before */
	conn->max_background = 1024;
	conn->congestion_threshold = 768;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID || strcmp(name, NULL_NAME)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof e);
	e.ino = NULL_INO;
	e.attr_timeout = 3600;
	e.entry_timeout = 3600;
	null_stat(NULL_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != NULL_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	null_stat(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

/* Like /dev/null, the file ignores truncation and attribute changes: its
 * size is fixed on the command line. */
static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	(void)attr;
	(void)to_set;
	null_getattr(req, ino, fi);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != NULL_INO) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	/* Buffered tools (dd, cp) reach the server too, not the page cache. */
	fi->direct_io = 1;
	fuse_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off < 0 || (uint64_t)off >= null_size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > null_size - (uint64_t)off)
		size = null_size - (uint64_t)off;
	if (size > sizeof zeroes)
		size = sizeof zeroes;
	fuse_reply_buf(req, zeroes, size);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)fi;
	if (off < 0 || (uint64_t)off >= null_size) {
		fuse_reply_err(req, size ? ENOSPC : 0);
		return;
	}
	if (size > null_size - (uint64_t)off)
		size = null_size - (uint64_t)off;
	fuse_reply_write(req, size);
}

static void null_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void null_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	null_ok(req, ino, fi);
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	static const struct {
		const char *name;
		fuse_ino_t ino;
	} ents[] = { { ".", FUSE_ROOT_ID }, { "..", FUSE_ROOT_ID }, { NULL_NAME, NULL_INO } };
	char buf[512];
	size_t used = 0;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof buf)
		size = sizeof buf;
	for (size_t i = off < 0 ? 0 : (size_t)off; i < sizeof ents / sizeof ents[0]; i++) {
		struct stat st;
		size_t n;

		null_stat(ents[i].ino, &st);
		n = fuse_add_direntry(req, buf + used, size - used, ents[i].name, &st,
				      (off_t)(i + 1));
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static const struct fuse_lowlevel_ops null_ops = {
	.init = null_init,
	.lookup = null_lookup,
	.getattr = null_getattr,
	.setattr = null_setattr,
	.open = null_open,
	.read = null_read,
	.write = null_write,
	.flush = null_ok,
	.release = null_ok,
	.fsync = null_fsync,
	.readdir = null_readdir,
};

/* Drain the channel: serve requests until the kernel has none left. */
static void on_fuse(struct ev_loop *ev, ev_io *w, int revents)
{
	struct loop *l = w->data;

	(void)revents;
	for (;;) {
		int res = fuse_session_receive_buf(se, &l->buf);

		if (res == -EAGAIN || res == -EINTR)
			return;
		if (res <= 0 || fuse_session_exited(se)) {
			/* 0: unmounted from outside (ENODEV) or the session ended */
			if (res < 0) {
				fprintf(stderr, "fuse-null: reading the FUSE channel: %s\n",
					strerror(-res));
				l->err = res;
			}
			for (unsigned i = 0; i < nr_loops; i++)
				if (&loops[i] != l)
					ev_async_send(loops[i].ev, &loops[i].stop);
			ev_break(ev, EVBREAK_ALL);
			return;
		}
		fuse_session_process_buf(se, &l->buf);
	}
}

/* -p: an active idle watcher makes every loop iteration poll the channel
 * without blocking, as a reactor with requests in flight does: no wake-up
 * from a halted CPU is ever paid. */
static void on_idle(struct ev_loop *ev, ev_idle *w, int revents)
{
	struct loop *l = w->data;

	on_fuse(ev, &l->io, revents);
}

static void on_stop(struct ev_loop *ev, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(ev, EVBREAK_ALL);
}

static void on_signal(struct ev_loop *ev, ev_signal *w, int revents)
{
	(void)w;
	(void)revents;
	signalled = true;
	fuse_session_exit(se);
	for (unsigned i = 1; i < nr_loops; i++)
		ev_async_send(loops[i].ev, &loops[i].stop);
	ev_break(ev, EVBREAK_ALL);
}

static void *loop_thread(void *arg)
{
	struct loop *l = arg;

	ev_run(l->ev, 0);
	return NULL;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end || v == 0 || v > ((uint64_t)INT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: fuse-null [-p] [-s SIZE] [-t THREADS] MOUNTPOINT\n"
		   "  -p          poll the channel (busy loop) instead of sleeping in epoll\n"
		   "  -s SIZE     size of MOUNTPOINT/null (K/M/G/T suffixes; default 1G)\n"
		   "  -t THREADS  event loops sharing the FUSE channel (1-%d; default 1)\n",
		MAX_THREADS);
}

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "max_read=1048576", "-o", "default_permissions", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(5, fargv);
	sigset_t block, old;
	ev_signal sigint, sigterm;
	unsigned started = 1;
	int opt, fd, flags, ret = 1;

	while ((opt = getopt(argc, argv, "ps:t:h")) != -1) {
		switch (opt) {
		case 'p':
			polling = true;
			break;
		case 's':
			if (parse_size(optarg, &null_size)) {
				fprintf(stderr, "fuse-null: -s %s: a positive size in bytes, "
						"optionally with K, M, G or T, is expected\n", optarg);
				return 2;
			}
			break;
		case 't': {
			char *end;
			long t = strtol(optarg, &end, 10);

			if (*end || end == optarg || t < 1 || t > MAX_THREADS) {
				fprintf(stderr, "fuse-null: -t %s: 1 to %d threads\n", optarg,
					MAX_THREADS);
				return 2;
			}
			nr_loops = (unsigned)t;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}

	se = fuse_session_new(&args, &null_ops, sizeof null_ops, NULL);
	if (!se) {
		fprintf(stderr, "fuse-null: cannot create the FUSE session\n");
		goto out_args;
	}
	if (fuse_session_mount(se, argv[optind])) {
		fprintf(stderr, "fuse-null: cannot mount on %s\n", argv[optind]);
		goto out_session;
	}
	fd = fuse_session_fd(se);
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		perror("fuse-null: fcntl O_NONBLOCK on the FUSE channel");
		goto out_unmount;
	}

	/* Loop 0 is the default loop: libev takes signals only there. */
	for (unsigned i = 0; i < nr_loops; i++) {
		struct loop *l = &loops[i];

		l->ev = i ? ev_loop_new(EVFLAG_AUTO) : ev_default_loop(EVFLAG_AUTO);
		if (!l->ev) {
			fprintf(stderr, "fuse-null: cannot create event loop %u\n", i);
			nr_loops = i;
			goto out_loops;
		}
		ev_io_init(&l->io, on_fuse, fd, EV_READ);
		l->io.data = l;
		ev_io_start(l->ev, &l->io);
		if (polling) {
			ev_idle_init(&l->idle, on_idle);
			l->idle.data = l;
			ev_idle_start(l->ev, &l->idle);
		}
		ev_async_init(&l->stop, on_stop);
		ev_async_start(l->ev, &l->stop);
	}
	ev_signal_init(&sigint, on_signal, SIGINT);
	ev_signal_start(loops[0].ev, &sigint);
	ev_signal_init(&sigterm, on_signal, SIGTERM);
	ev_signal_start(loops[0].ev, &sigterm);

	/* The other loops must not take the signals the default loop waits for. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (; started < nr_loops; started++) {
		int err = pthread_create(&loops[started].tid, NULL, loop_thread, &loops[started]);

		if (err) {
			fprintf(stderr, "fuse-null: cannot start thread %u: %s\n", started,
				strerror(err));
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	if (started == nr_loops) {
		ev_run(loops[0].ev, 0);
		ret = 0;
		if (!signalled) {
			/* e.g. INIT refused, or umount from outside: either way unexpected */
			fprintf(stderr, "fuse-null: the FUSE session ended before a signal\n");
			ret = 1;
		}
	} else {
		fuse_session_exit(se);
	}
	for (unsigned i = 1; i < started; i++) {
		ev_async_send(loops[i].ev, &loops[i].stop);
		pthread_join(loops[i].tid, NULL);
	}
	for (unsigned i = 0; i < nr_loops; i++)
		if (loops[i].err)
			ret = 1;
	ev_signal_stop(loops[0].ev, &sigint);
	ev_signal_stop(loops[0].ev, &sigterm);
out_loops:
	for (unsigned i = 0; i < nr_loops; i++) {
		free(loops[i].buf.mem);
		ev_loop_destroy(loops[i].ev);
	}
out_unmount:
	fuse_session_unmount(se);
out_session:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&args);
	return ret;
}

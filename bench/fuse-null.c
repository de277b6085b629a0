/* fuse-null - the FUSE transport's ceiling: a file system whose one file,
 * "null", replies at once and stores nothing.
 *
 * Reads return zeroes, writes succeed without touching anything.  Two
 * transports:
 *   classic (default): libfuse reads the session fd non-blocking from libev
 *     loops, and every request is answered from the thread that read it, the
 *     shape the nvmefs reactors use over /dev/fuse;
 *   raw classic (-r): libfuse only mounts; THREADS readers, each pinned to a
 *     CPU with a clone of the channel (FUSE_DEV_IOC_CLONE: its own list of
 *     requests being processed), read blocking, decode with the project's
 *     fwire and answer with one writev from the thread that read: the
 *     fastest /dev/fuse server this file knows how to write;
 *   io_uring (-u): FUSE over io_uring (kernel 6.14+, fuse's enable_uring
 *     parameter set).  libfuse only mounts; INIT and whatever else comes over
 *     /dev/fuse (before the queues are ready, FORGET, INTERRUPT) are read raw
 *     by the main thread and decoded by the project's fwire, whose INIT answer
 *     asks for io_uring.  Then one thread per possible CPU, pinned to it,
 *     serves that CPU's FUSE queue on a ring of its own: DEPTH entries, each a
 *     header buffer and a 1 MiB payload buffer.  A read is answered from the
 *     entry's payload buffer in place (zero unless an earlier request wrote
 *     into it), a write's data is dropped where the kernel put it, and each
 *     answer re-arms its entry (COMMIT_AND_FETCH).
 * What this reaches is what any server behind the same kernel FUSE channel
 * can reach at best.  Both offer the channel settings nvmefsd asks for
 * (1 MiB requests, async direct I/O, 1024 background requests, parallel
 * direct writes).
 *
 * Usage: fuse-null [-p] [-r | -u [-d DEPTH] [-e]] [-s SIZE] [-t THREADS] MOUNTPOINT
 *   -p          poll instead of sleeping (epoll, read, or the ring's wait)
 *   -e          -u: wait as an event loop does (nvmefsd's reactor): sleep in
 *               epoll_wait on the ring's fd, submit the answers apart, no
 *               deferred task work; what that way of waiting costs
 *   -r          /dev/fuse without libfuse's loop (see above)
 *   -u          serve over io_uring; fails when the kernel does not offer it
 *   -d DEPTH    -u: entries per FUSE queue (default 16)
 *   -s SIZE     size of MOUNTPOINT/null, bytes with an optional K/M/G/T suffix
 *               (binary units; default 1G)
 *   -t THREADS  classic: libev loops (-r: readers) sharing the session fd
 *               (default 1)
 * Runs in the foreground; SIGINT or SIGTERM unmounts and exits 0.  With -u
 * it prints, at exit, how many requests came over /dev/fuse and over each
 * queue's ring.
 */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fwire.h"

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
	/* Buffered tools (dd, cp) reach the server too, not the page cache.
	 * libfuse 3.14 cannot say FOPEN_PARALLEL_DIRECT_WRITES (without it
	 * the kernel serialises direct writes to the file): the answer is
	 * spelled out here instead of fuse_reply_open's. */
	struct fuse_open_out o = {.fh = fi->fh,
				  .open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES};

	fuse_reply_buf(req, (const char *)&o, sizeof o);
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

/* ---- -u: FUSE over io_uring ---- */

#define DEPTH_MAX 1024
#define REGISTER_RETRY_US 10000 /* REGISTER before the kernel took INIT's answer */
#define JOIN_WAIT_S 5           /* after the unmount, for the rings' last entries */

struct counts {
	uint64_t reads, writes, other;
	uint64_t read_bytes, write_bytes;
};

struct uqueue;

/* One registered entry: the kernel writes a request into hdr and payload. */
struct uent {
	struct fuse_uring_req_header hdr; /* first: the kernel's, on its own lines */
	struct uqueue *q;
	char *payload;
	struct iovec iov[2];   /* REGISTER's, read when the kernel takes it */
	uint64_t commit_id;
	size_t dirty;          /* payload bytes that may be non-zero */
	uint8_t op;            /* the command with the kernel */
	bool dead;
} __attribute__((aligned(64)));

/* The FUSE queue of one CPU, served by one thread on a ring of its own. */
struct uqueue {
	unsigned qid;
	pthread_t tid;
	bool running;
	struct io_uring ring;
	struct uent *ents;
	int epfd;             /* -e: the epoll the thread sleeps in */
	unsigned live;        /* entries with the kernel or being served */
	unsigned unsubmitted; /* SQEs prepared, not yet submitted */
	struct counts c;
	int err;
};

static bool uring_mode;
static bool epoll_wait_mode; /* -e */
static unsigned depth = 16;
static struct uqueue *uqueues;
static unsigned nr_uqueues;
static int dev_fd = -1;
static pthread_t main_tid;
static volatile sig_atomic_t stopping;
static atomic_bool ring_broken;
static struct counts dev_counts;
static uint64_t dev_init;

static const struct fw_transport ring_transport;

/* A queue cannot be served: the kernel would wait for it forever, so the
 * connection has to go (the main thread unmounts). */
static void ring_fail(struct uqueue *q, const char *what, int err)
{
	fprintf(stderr, "fuse-null: io_uring queue %u: %s: %s\n", q->qid, what, strerror(-err));
	q->err = err;
	atomic_store(&ring_broken, true);
	pthread_kill(main_tid, SIGTERM);
}

static void prep_cmd(struct uent *e, uint32_t cmd_op)
{
	struct uqueue *q = e->q;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		/* one command per entry and the SQ holds them all: only
		 * unsubmitted ones fill it */
		io_uring_submit(&q->ring);
		q->unsubmitted = 0;
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (!sqe) {
		ring_fail(q, "submission queue full", -ENOSPC);
		e->dead = true;
		q->live--;
		return;
	}
	fw_ring_cmd(sqe, dev_fd, cmd_op, (uint16_t)q->qid, e->commit_id, e->iov, e);
	e->op = (uint8_t)cmd_op;
	q->unsubmitted++;
}

/* The answer goes in the entry: out header in the header buffer, out
 * arguments in the payload (in place when they are there already). */
static void ring_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	struct uent *e = r->tctx;
	size_t moved = 0;

	fw_ring_answer(&e->hdr, e->payload, MAX_IO, e->commit_id, r->unique, error, iov, iovcnt,
		       &moved);
	/* what was moved in lies at the start: the answer's whole payload */
	if (moved) {
		struct fuse_uring_ent_in_out io;

		memcpy(&io, &e->hdr.ring_ent_in_out, sizeof(io));
		if (io.payload_sz > e->dirty)
			e->dirty = io.payload_sz;
	}
	prep_cmd(e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
}

/* Every request over the ring needs an answer, or its entry is lost. */
static void ring_drop(struct fw_req *r)
{
	ring_send(r, -ENOSYS, NULL, 0);
}

static const struct fw_transport ring_transport = {.send = ring_send, .drop = ring_drop};

struct rthread;
static int rthread_fd(const struct rthread *t);

/* r->tctx: the -r reader that read it, on whose clone the answer goes */
static void dev_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	int err = fw_dev_answer(r->tctx ? rthread_fd(r->tctx) : dev_fd, r->unique, error, iov,
				iovcnt);

	/* ENOENT: the request was interrupted meanwhile */
	if (err && err != -ENOENT)
		fprintf(stderr, "fuse-null: answering on /dev/fuse: %s\n", strerror(-err));
}

static void dev_drop(struct fw_req *r)
{
	(void)r;
}

static const struct fw_transport dev_transport = {.send = dev_send, .drop = dev_drop};

static bool known_ino(uint64_t ino)
{
	return ino == FUSE_ROOT_ID || ino == NULL_INO;
}

static void u_readdir(struct fw_req *r, const struct fw_msg *m)
{
	static const struct {
		const char *name;
		uint64_t ino;
		uint32_t mode;
	} ents[] = { { ".", FUSE_ROOT_ID, S_IFDIR },
		     { "..", FUSE_ROOT_ID, S_IFDIR },
		     { NULL_NAME, NULL_INO, S_IFREG } };
	char buf[512];
	size_t used = 0, size = m->in.read.size;

	if (size > sizeof buf)
		size = sizeof buf;
	for (uint64_t i = m->in.read.offset; i < sizeof ents / sizeof ents[0]; i++) {
		size_t n = fw_add_dirent(buf, size, used, ents[i].name, ents[i].ino, ents[i].mode,
					 i + 1);

		if (n > size - used)
			break;
		used += n;
	}
	fw_reply_buf(r, buf, used);
}

static void u_read(struct fw_req *r, const struct fw_msg *m, struct counts *c)
{
	uint64_t off = m->in.read.offset;
	size_t size = m->in.read.size;

	if (off >= null_size)
		size = 0;
	else if (size > null_size - off)
		size = null_size - off;
	if (size > MAX_IO)
		size = MAX_IO;
	c->reads++;
	c->read_bytes += size;
	if (r->t == &ring_transport) {
		struct uent *e = r->tctx;

		/* zero what earlier requests or answers left in the buffer,
		 * once; a read-only load never writes it */
		if (e->dirty) {
			memset(e->payload, 0, e->dirty < size ? e->dirty : size);
			e->dirty = e->dirty > size ? e->dirty : 0;
		}
		fw_reply_buf(r, e->payload, size);
		return;
	}
	fw_reply_buf(r, zeroes, size);
}

static void u_write(struct fw_req *r, const struct fw_msg *m, struct counts *c)
{
	uint64_t off = m->in.write.offset;
	uint32_t size = m->in.write.size;

	c->writes++;
	if (off >= null_size) {
		fw_reply_err(r, size ? ENOSPC : 0);
		return;
	}
	if (size > null_size - off)
		size = (uint32_t)(null_size - off);
	c->write_bytes += size;
	fw_reply_write(r, size);
}

/* One request of either transport, as fw_decode left it. */
static void u_serve(struct fw_req *r, int rc, const struct fw_msg *m, struct counts *c)
{
	uint64_t ino = m->h.nodeid;
	struct stat st;

	if (rc == FW_NOSYS) {
		c->other++;
		fw_reply_err(r, ENOSYS);
		return;
	}
	if (rc != FW_OK) {
		c->other++;
		if (m->h.unique)
			fw_reply_err(r, EINVAL);
		else
			fw_reply_none(r);
		return;
	}
	switch (m->h.opcode) {
	case FUSE_READ:
		u_read(r, m, c);
		return;
	case FUSE_WRITE:
		u_write(r, m, c);
		return;
	default:
		break;
	}
	c->other++;
	switch (m->h.opcode) {
	case FUSE_LOOKUP:
		if (ino != FUSE_ROOT_ID || strcmp(m->name, NULL_NAME)) {
			fw_reply_err(r, ENOENT);
			break;
		}
		null_stat(NULL_INO, &st);
		fw_reply_entry(r, NULL_INO, &st, 3600);
		break;
	case FUSE_GETATTR:
	case FUSE_SETATTR: /* like /dev/null: the size is fixed */
		if (!known_ino(ino)) {
			fw_reply_err(r, ENOENT);
			break;
		}
		null_stat(ino, &st);
		fw_reply_attr(r, &st, 3600);
		break;
	case FUSE_OPEN:
		if (ino != NULL_INO)
			fw_reply_err(r, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		else
			fw_reply_open(r, 0, FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES);
		break;
	case FUSE_OPENDIR:
		if (ino != FUSE_ROOT_ID)
			fw_reply_err(r, ino == NULL_INO ? ENOTDIR : ENOENT);
		else
			fw_reply_open(r, 0, 0);
		break;
	case FUSE_READDIR:
		if (ino != FUSE_ROOT_ID)
			fw_reply_err(r, ENOTDIR);
		else
			u_readdir(r, m);
		break;
	case FUSE_STATFS: {
		struct statvfs sv = {.f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255};

		fw_reply_statfs(r, &sv);
		break;
	}
	case FUSE_FLUSH:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_DESTROY:
		fw_reply_err(r, 0);
		break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT: /* every answer is immediate: nothing to interrupt */
		fw_reply_none(r);
		break;
	case FUSE_INIT: /* only once, and only over /dev/fuse */
		fw_reply_err(r, EIO);
		break;
	default:
		fw_reply_err(r, ENOSYS);
		break;
	}
}

static void take_request(struct uqueue *q, struct uent *e)
{
	struct fuse_in_header h;
	struct fuse_uring_ent_in_out io;
	struct fw_msg m;
	struct fw_req r = {.t = &ring_transport, .tctx = e, .rbuf = e->payload,
			   .rbuf_len = MAX_IO};
	int rc;

	memcpy(&h, e->hdr.in_out, sizeof h);
	memcpy(&io, &e->hdr.ring_ent_in_out, sizeof io);
	e->commit_id = io.commit_id;
	r.unique = h.unique;
	r.opcode = h.opcode;
	if (io.payload_sz > MAX_IO) {
		rc = FW_BAD;
	} else {
		if (io.payload_sz > e->dirty)
			e->dirty = io.payload_sz;
		rc = fw_decode(&h, e->hdr.op_in, sizeof e->hdr.op_in, e->payload, io.payload_sz,
			       &m);
	}
	if (rc != FW_OK)
		m.h = h;
	u_serve(&r, rc, &m, &q->c);
}

static void handle_cqe(struct uqueue *q, struct uent *e, int res)
{
	if (res == 0) {
		take_request(q, e);
		return;
	}
	if (res == -ENOTCONN || res == -ECONNABORTED || res == -ECANCELED) {
		e->dead = true; /* the connection ended */
		q->live--;
		return;
	}
	if (e->op == FUSE_IO_URING_CMD_REGISTER) {
		if (res == -EAGAIN) {
			/* the kernel has not taken INIT's answer yet */
			usleep(REGISTER_RETRY_US);
			prep_cmd(e, FUSE_IO_URING_CMD_REGISTER);
			return;
		}
		e->dead = true;
		q->live--;
		ring_fail(q, "registering an entry (dmesg may say why)", res);
		return;
	}
	/* an answer the kernel did not take: the entry is no longer armed */
	fprintf(stderr, "fuse-null: io_uring queue %u: answer not taken: %s\n", q->qid,
		strerror(-res));
	prep_cmd(e, FUSE_IO_URING_CMD_REGISTER);
}

static int ring_init(struct uqueue *q)
{
	struct io_uring_params p;
	int err;

	memset(&p, 0, sizeof p);
	/* SQE128: the FUSE command does not fit a 64-byte SQE.  Sleeping
	 * for completions, deferred task work runs them in this thread's
	 * wait; polling never enters the kernel, so it takes the default. */
	p.flags = IORING_SETUP_SQE128;
	if (!polling && !epoll_wait_mode)
		p.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	err = io_uring_queue_init_params(depth, &q->ring, &p);
	if (err == -EINVAL && !polling) {
		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_SQE128;
		err = io_uring_queue_init_params(depth, &q->ring, &p);
	}
	return err;
}

static void *ring_thread(void *arg)
{
	struct uqueue *q = arg;
	struct io_uring_cqe *cqe;
	unsigned head, n;
	int err;

	q->epfd = -1;
	/* the ring is made here: with SINGLE_ISSUER its creator submits */
	err = ring_init(q);
	if (err < 0) {
		ring_fail(q, "io_uring set-up", err);
		return NULL;
	}
	q->ents = aligned_alloc(64, sizeof *q->ents * depth);
	if (!q->ents) {
		ring_fail(q, "entries", -ENOMEM);
		goto out_ring;
	}
	memset(q->ents, 0, sizeof *q->ents * depth);
	for (unsigned i = 0; i < depth; i++) {
		struct uent *e = &q->ents[i];

		/* anonymous memory is zero: reads need no memset until a
		 * request writes into it */
		e->payload = mmap(NULL, MAX_IO, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (e->payload == MAP_FAILED) {
			e->payload = NULL;
			ring_fail(q, "payload buffers", -ENOMEM);
			goto out_ents;
		}
		e->q = q;
		e->iov[0].iov_base = &e->hdr;
		e->iov[0].iov_len = sizeof e->hdr;
		e->iov[1].iov_base = e->payload;
		e->iov[1].iov_len = MAX_IO;
	}
	if (epoll_wait_mode) {
		struct epoll_event ev = {.events = EPOLLIN};

		q->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (q->epfd < 0 || epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->ring.ring_fd, &ev) < 0) {
			ring_fail(q, "epoll", -errno);
			goto out_ents;
		}
	}
	for (unsigned i = 0; i < depth; i++) {
		q->live++;
		prep_cmd(&q->ents[i], FUSE_IO_URING_CMD_REGISTER);
	}
	while (q->live) {
		if (polling) {
			err = 0;
			if (q->unsubmitted)
				err = io_uring_submit(&q->ring);
		} else if (epoll_wait_mode) {
			struct epoll_event ev;

			err = io_uring_submit(&q->ring);
			if (!io_uring_cq_ready(&q->ring) && epoll_wait(q->epfd, &ev, 1, -1) < 0 &&
			    errno != EINTR)
				err = -errno;
		} else {
			err = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (err >= 0)
			q->unsubmitted = 0;
		else if (err != -EINTR && err != -EAGAIN && err != -EBUSY) {
			ring_fail(q, "io_uring submit", err);
			break;
		}
		n = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe)
		{
			handle_cqe(q, io_uring_cqe_get_data(cqe), cqe->res);
			n++;
		}
		if (n)
			io_uring_cq_advance(&q->ring, n);
	}
out_ents:
	for (unsigned i = 0; i < depth; i++)
		if (q->ents[i].payload)
			munmap(q->ents[i].payload, MAX_IO);
	free(q->ents);
	q->ents = NULL;
	if (q->epfd >= 0)
		close(q->epfd);
out_ring:
	/* commands still with the kernel are cancelled here */
	io_uring_queue_exit(&q->ring);
	return NULL;
}

/* The kernel keeps one FUSE queue per possible CPU, numbered by CPU. */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	char line[256];
	unsigned max = 0;

	if (f && fgets(line, sizeof line, f)) {
		for (char *p = line; *p && *p != '\n';) {
			char *end;
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (v > max)
				max = (unsigned)v;
			p = *end ? end + 1 : end;
		}
	} else {
		long n = sysconf(_SC_NPROCESSORS_CONF);

		max = n > 0 ? (unsigned)n - 1 : 0;
	}
	if (f)
		fclose(f);
	return max + 1;
}

static int start_rings(void)
{
	nr_uqueues = possible_cpus();
	uqueues = calloc(nr_uqueues, sizeof *uqueues);
	if (!uqueues)
		return -ENOMEM;
	for (unsigned i = 0; i < nr_uqueues; i++) {
		struct uqueue *q = &uqueues[i];
		pthread_attr_t attr;
		cpu_set_t set;
		int err;

		q->qid = i;
		pthread_attr_init(&attr);
		CPU_ZERO(&set);
		CPU_SET(i, &set);
		/* on its CPU, the thread meets that CPU's requests there */
		pthread_attr_setaffinity_np(&attr, sizeof set, &set);
		err = pthread_create(&q->tid, &attr, ring_thread, q);
		if (err == EINVAL) {
			/* a possible CPU that is offline: serve its queue anyway */
			fprintf(stderr, "fuse-null: CPU %u is offline: its queue's thread "
					"runs unpinned\n", i);
			err = pthread_create(&q->tid, NULL, ring_thread, q);
		}
		pthread_attr_destroy(&attr);
		if (err) {
			fprintf(stderr, "fuse-null: cannot start the thread of queue %u: %s\n", i,
				strerror(err));
			return -err;
		}
		q->running = true;
	}
	return 0;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* INIT, over /dev/fuse; uring: io_uring or nothing. */
static int serve_init(struct fw_req *r, const struct fw_msg *m, bool uring)
{
	const struct fw_init_want want = {
		.max_write = MAX_IO,
		.max_background = 1024,
		.congestion_threshold = 768,
		.uring = uring,
	};
	struct fuse_init_out out;
	int rc = fw_init_answer(&m->in.init, &want, &out);

	dev_init++;
	if (rc) {
		fprintf(stderr, "fuse-null: kernel FUSE protocol %u.%u is not served\n",
			m->in.init.major, m->in.init.minor);
		fw_reply_err(r, EPROTO);
		return -EPROTO;
	}
	if (uring && !(fw_init_flags_out(&out) & FUSE_OVER_IO_URING)) {
		fprintf(stderr, "fuse-null: the kernel did not offer FUSE over io_uring: it needs "
				"Linux 6.14+ and /sys/module/fuse/parameters/enable_uring set to Y "
				"before the mount\n");
		fw_reply_err(r, EPROTO);
		return -EOPNOTSUPP;
	}
	fw_reply_init(r, &out);
	return 0;
}

static void print_counts(void)
{
	struct counts t = {0};

	fprintf(stderr,
		"fuse-null: /dev/fuse: %" PRIu64 " requests (%" PRIu64 " INIT, %" PRIu64
		" reads, %" PRIu64 " writes, %" PRIu64 " other)\n",
		dev_init + dev_counts.reads + dev_counts.writes + dev_counts.other, dev_init,
		dev_counts.reads, dev_counts.writes, dev_counts.other);
	for (unsigned i = 0; i < nr_uqueues; i++) {
		const struct counts *c = &uqueues[i].c;

		fprintf(stderr,
			"fuse-null: io_uring queue %u: %" PRIu64 " reads (%" PRIu64 " MiB), %" PRIu64
			" writes (%" PRIu64 " MiB), %" PRIu64 " other\n",
			i, c->reads, c->read_bytes >> 20, c->writes, c->write_bytes >> 20, c->other);
		t.reads += c->reads;
		t.writes += c->writes;
		t.other += c->other;
	}
	fprintf(stderr,
		"fuse-null: io_uring: %" PRIu64 " requests (%" PRIu64 " reads, %" PRIu64
		" writes, %" PRIu64 " other) over %u queues of %u entries\n",
		t.reads + t.writes + t.other, t.reads, t.writes, t.other, nr_uqueues, depth);
}

/* Wait for a ring thread, a bounded time: entries the kernel still holds
 * (a file kept open past a lazy unmount) would keep it forever. */
static int join_ring(struct uqueue *q)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += JOIN_WAIT_S;
	return pthread_timedjoin_np(q->tid, NULL, &ts);
}

/* -u, after the mount: returns the exit status. */
static int run_uring(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal};
	struct pollfd pfd;
	sigset_t block, old;
	size_t bufsize = MAX_IO + 4096; /* the kernel wants room for a write */
	char *buf;
	bool inited = false, stray = false;
	int ret = 1, flags;

	dev_fd = fuse_session_fd(se);
	main_tid = pthread_self();
	flags = fcntl(dev_fd, F_GETFL);
	if (flags < 0 || fcntl(dev_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		perror("fuse-null: fcntl O_NONBLOCK on the FUSE channel");
		return 1;
	}
	buf = malloc(bufsize);
	if (!buf) {
		fprintf(stderr, "fuse-null: no memory for the /dev/fuse buffer\n");
		return 1;
	}
	/* the signals are taken only in ppoll, so none is lost between a
	 * check of stopping and the wait; the ring threads inherit the block */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	sigdelset(&old, SIGINT);
	sigdelset(&old, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pfd.fd = dev_fd;
	pfd.events = POLLIN;

	while (!stopping) {
		struct fw_req r = {.t = &dev_transport};
		struct fw_msg m;
		ssize_t len;
		int rc;

		if (ppoll(&pfd, 1, NULL, &old) < 0) {
			if (errno == EINTR)
				continue;
			perror("fuse-null: waiting on /dev/fuse");
			goto out;
		}
		len = read(dev_fd, buf, bufsize);
		if (len < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ENOENT)
				continue;
			if (errno == ENODEV) {
				/* unmounted from outside */
				stray = true;
				break;
			}
			perror("fuse-null: reading /dev/fuse");
			goto out;
		}
		rc = fw_decode_dev(buf, (size_t)len, &m);
		r.unique = m.h.unique;
		r.opcode = m.h.opcode;
		if (rc == FW_OK && m.h.opcode == FUSE_INIT) {
			if (inited) {
				fw_reply_err(&r, EIO);
				continue;
			}
			if (serve_init(&r, &m, true))
				goto out;
			inited = true;
			/* the kernel took the answer in the write: the rings
			 * can register now */
			if (start_rings())
				goto out;
			continue;
		}
		u_serve(&r, rc, &m, &dev_counts);
	}
	ret = stray || atomic_load(&ring_broken) ? 1 : 0;
	if (stray)
		fprintf(stderr, "fuse-null: the FUSE session ended before a signal\n");
out:
	/* ends the connection: the kernel gives every entry back, and the
	 * ring threads end with their last one */
	fuse_session_unmount(se);
	for (unsigned i = 0; i < nr_uqueues; i++) {
		if (!uqueues[i].running)
			continue;
		if (join_ring(&uqueues[i])) {
			fprintf(stderr, "fuse-null: queue %u's thread did not end\n", i);
			ret = 1;
			continue;
		}
		if (uqueues[i].err)
			ret = 1;
	}
	if (inited)
		print_counts();
	free(buf);
	for (unsigned i = 0; i < nr_uqueues; i++)
		if (uqueues[i].running && uqueues[i].ents)
			return ret; /* a thread that did not end still uses its queue */
	free(uqueues);
	uqueues = NULL;
	return ret;
}

/* ---- -r: /dev/fuse without libfuse's loop ---- */

/* One reader: its own clone of the channel (its own processing list in the
 * kernel, so answers do not contend with the other readers'), pinned to a
 * CPU, reading blocking (or, with -p, spinning on EAGAIN) and answering
 * in place from the buffer it read into. */
struct rthread {
	unsigned idx;
	int fd;
	pthread_t tid;
	bool running;
	char *buf;
	struct counts c;
	int err;
};

static bool raw_mode;
static struct rthread *rthreads;

static int rthread_fd(const struct rthread *t)
{
	return t->fd;
}
static atomic_bool raw_inited;

static void *raw_thread(void *arg)
{
	struct rthread *t = arg;
	size_t bufsize = MAX_IO + 4096; /* the kernel wants room for a write */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (ncpu > 0) {
		CPU_ZERO(&set);
		CPU_SET(t->idx % (unsigned)ncpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	}
	for (;;) {
		struct fw_req r = {.t = &dev_transport, .tctx = t};
		struct fw_msg m;
		ssize_t len = read(t->fd, t->buf, bufsize);
		int rc;

		if (len < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ENOENT)
				continue;
			if (errno != ENODEV) { /* ENODEV: unmounted, the normal end */
				perror("fuse-null: reading /dev/fuse");
				t->err = 1;
			}
			break;
		}
		rc = fw_decode_dev(t->buf, (size_t)len, &m);
		r.unique = m.h.unique;
		r.opcode = m.h.opcode;
		if (rc == FW_OK && m.h.opcode == FUSE_INIT) {
			if (atomic_exchange(&raw_inited, true)) {
				fw_reply_err(&r, EIO);
				continue;
			}
			if (serve_init(&r, &m, false)) {
				t->err = 1;
				break;
			}
			continue;
		}
		u_serve(&r, rc, &m, &t->c);
	}
	return NULL;
}

/* -r, after the mount: returns the exit status. */
static int run_raw(void)
{
	sigset_t block, old;
	struct counts tot = {0};
	int ret = 0, sig;

	dev_fd = fuse_session_fd(se);
	rthreads = calloc(nr_loops, sizeof *rthreads);
	if (!rthreads) {
		fprintf(stderr, "fuse-null: no memory for the readers\n");
		return 1;
	}
	/* signals only for sigwait below; the readers inherit the block */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (unsigned i = 0; i < nr_loops; i++) {
		struct rthread *t = &rthreads[i];
		uint32_t master = (uint32_t)dev_fd;
		int err;

		t->idx = i;
		t->fd = i ? open("/dev/fuse", O_RDWR | O_CLOEXEC) : dev_fd;
		if (t->fd < 0 || (i && ioctl(t->fd, FUSE_DEV_IOC_CLONE, &master) < 0)) {
			perror("fuse-null: cloning the FUSE channel");
			if (t->fd >= 0)
				close(t->fd);
			ret = 1;
			break;
		}
		if (polling) {
			int flags = fcntl(t->fd, F_GETFL);

			if (flags < 0 || fcntl(t->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
				perror("fuse-null: fcntl O_NONBLOCK on the FUSE channel");
				ret = 1;
			}
		}
		t->buf = malloc(MAX_IO + 4096);
		if (!t->buf) {
			fprintf(stderr, "fuse-null: no memory for a reader's buffer\n");
			ret = 1;
		}
		err = ret ? 0 : pthread_create(&t->tid, NULL, raw_thread, t);
		if (err) {
			fprintf(stderr, "fuse-null: cannot start reader %u: %s\n", i, strerror(err));
			ret = 1;
		}
		if (ret) {
			if (i)
				close(t->fd);
			free(t->buf);
			break;
		}
		t->running = true;
	}
	if (!ret && sigwait(&block, &sig) == 0)
		signalled = true;
	/* the readers see ENODEV and end */
	fuse_session_unmount(se);
	for (unsigned i = 0; i < nr_loops; i++) {
		struct rthread *t = &rthreads[i];

		if (!t->running)
			continue;
		pthread_join(t->tid, NULL);
		if (t->err)
			ret = 1;
		if (i)
			close(t->fd);
		free(t->buf);
		tot.reads += t->c.reads;
		tot.writes += t->c.writes;
		tot.other += t->c.other;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fprintf(stderr,
		"fuse-null: /dev/fuse: %" PRIu64 " requests (%" PRIu64 " reads, %" PRIu64
		" writes, %" PRIu64 " other) over %u readers\n",
		tot.reads + tot.writes + tot.other, tot.reads, tot.writes, tot.other, nr_loops);
	free(rthreads);
	rthreads = NULL;
	return ret;
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
	fprintf(f, "usage: fuse-null [-p] [-r | -u [-d DEPTH] [-e]] [-s SIZE] [-t THREADS] MOUNTPOINT\n"
		   "  -p          poll (busy loop) instead of sleeping in epoll, read or the ring\n"
		   "  -e          -u: sleep in epoll on the ring's fd and submit apart, as an\n"
		   "              event loop does (no deferred task work)\n"
		   "  -r          /dev/fuse without libfuse: THREADS pinned readers, each on\n"
		   "              a clone of the channel, answering in place\n"
		   "  -u          serve over io_uring: one pinned thread and queue per CPU\n"
		   "  -d DEPTH    -u: entries per queue, 1 MiB each (1-%d; default 16)\n"
		   "  -s SIZE     size of MOUNTPOINT/null (K/M/G/T suffixes; default 1G)\n"
		   "  -t THREADS  classic: event loops (-r: readers) sharing the FUSE channel\n"
		   "              (1-%d; default 1)\n",
		DEPTH_MAX, MAX_THREADS);
}

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "max_read=1048576", "-o", "default_permissions", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(5, fargv);
	sigset_t block, old;
	ev_signal sigint, sigterm;
	unsigned started = 1;
	int opt, fd, flags, ret = 1;

	while ((opt = getopt(argc, argv, "eprud:s:t:h")) != -1) {
		switch (opt) {
		case 'e':
			epoll_wait_mode = true;
			break;
		case 'p':
			polling = true;
			break;
		case 'r':
			raw_mode = true;
			break;
		case 'u':
			uring_mode = true;
			break;
		case 'd': {
			char *end;
			long d = strtol(optarg, &end, 10);

			if (*end || end == optarg || d < 1 || d > DEPTH_MAX) {
				fprintf(stderr, "fuse-null: -d %s: 1 to %d entries\n", optarg,
					DEPTH_MAX);
				return 2;
			}
			depth = (unsigned)d;
			break;
		}
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
	if (uring_mode && raw_mode) {
		fprintf(stderr, "fuse-null: -r and -u are two transports: one of them\n");
		return 2;
	}
	if (epoll_wait_mode && (!uring_mode || polling)) {
		fprintf(stderr, "fuse-null: -e is a way of sleeping over io_uring: with -u, not -p\n");
		return 2;
	}
	if (uring_mode && nr_loops != 1) {
		fprintf(stderr, "fuse-null: -t is for the classic transport; -u runs one thread "
				"per CPU\n");
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
	if (uring_mode) {
		ret = run_uring();
		goto out_unmount;
	}
	if (raw_mode) {
		ret = run_raw();
		goto out_unmount;
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

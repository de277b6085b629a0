/* channel.c - the /dev/fuse transport, read by the reactors. */
#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "fsio.h"
#include "fsops.h"
#include "fwire.h"
#include "log.h"
#include "nvme.h"
#include "uring.h"

#define RECV_BATCH 32 /* requests taken per watcher callback */

size_t chan_buf_size(void)
{
	/* the kernel refuses a read into less than the largest write plus
	 * its headers, and less than FUSE_MIN_READ_BUFFER (8 KiB) */
	return FUSEFS_MAX_IO + 4096;
}

/* ---- answers ---- */

#define DUP_LOG_NS 1000000000ull /* one line a second at most per reactor */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The kernel refused an answer for unique with ENOENT: it has no such
 * request in flight.  When the connection has ended (the fd polls
 * POLLERR: aborted, unmounted) nobody waits for any answer; otherwise the
 * request was answered already, or never sent: a bug wherever it happens,
 * counted and logged (at most once a second per reactor, with the number
 * not logged since). */
static void answer_refused(struct fusefs_rx *rx, uint64_t unique)
{
	struct pollfd p = {.fd = rx->fd};
	uint64_t now;

	if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) {
		SCHED_STAT_ADD(rx->sched, late_answers, 1);
		return;
	}
	SCHED_STAT_ADD(rx->sched, dup_answers, 1);
	now = mono_ns();
	if (rx->dup_log_ns && now - rx->dup_log_ns < DUP_LOG_NS) {
		rx->dup_unlogged++;
		return;
	}
	log_err("fuse: the kernel has no request %llu for this answer (ENOENT on a live "
		"connection): answered twice, or never sent (%u more since the last such line)",
		(unsigned long long)unique, rx->dup_unlogged);
	rx->dup_log_ns = now;
	rx->dup_unlogged = 0;
}

static void dev_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	struct fusefs_rx *rx = r->tctx;
	int err;

	aud_answer(rx, r, error, iov, iovcnt);
	if (rx->fd_dead) {
		/* the channel is closed (a stop that gave up on this request):
		 * no answer goes anywhere, least of all to whatever file has
		 * the number now */
		SCHED_STAT_ADD(rx->sched, late_answers, 1);
		return;
	}
	err = fw_dev_answer(rx->fd, r->unique, error, iov, iovcnt);
	/* ENODEV: the session is gone, nobody waits for it */
	if (err == -ENOENT)
		answer_refused(rx, r->unique);
	else if (err == -ENODEV)
		SCHED_STAT_ADD(rx->sched, late_answers, 1);
	else if (err)
		log_err("fuse: answering request %llu: %s", (unsigned long long)r->unique,
			strerror(-err));
}

static void dev_drop(struct fw_req *r)
{
	aud_drop(r->tctx, r);
}

static const struct fw_transport dev_transport = {.send = dev_send, .drop = dev_drop};

/* ---- landing buffers ----
 * A reader reads each request with readv into its read buffer's first
 * FW_DEV_HEAD bytes and a landing buffer, DMA memory of the reactor's pool:
 * a write's data lands there, block-aligned, and the write goes to the
 * device from it, as over io_uring, instead of being copied out of the read
 * buffer.  The write holds its landing buffer until its answer; while none
 * is free (or the owner gave none: fusefs_opts.lands) the reader reads into
 * its read buffer alone and a write's data is copied.  Other
 * requests are made whole in the read buffer (fw_decode_dev_split) and
 * leave their landing buffer free.  Not with the io_uring transport (its
 * ring's payloads are the DMA memory) nor without a pool every controller
 * reaches (dma_isolation = controller with several controllers). */

struct chan_land {
	struct fusefs_rx *rx;
	void *buf; /* FUSEFS_MAX_IO bytes */
	struct chan_land *next;
};

static void land_put(struct chan_land *l)
{
	l->next = l->rx->land_free;
	l->rx->land_free = l;
}

static void land_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	struct chan_land *l = r->tctx;
	struct fw_req d = *r;

	d.tctx = l->rx;
	dev_send(&d, error, iov, iovcnt);
	aud_buf_put(l->rx, AUD_BUF_LAND, l->buf, FUSEFS_MAX_IO);
	land_put(l);
}

static void land_drop(struct fw_req *r)
{
	struct chan_land *l = r->tctx;

	aud_drop(l->rx, r);
	aud_buf_put(l->rx, AUD_BUF_LAND, l->buf, FUSEFS_MAX_IO);
	land_put(l);
}

static const struct fw_transport land_transport = {.send = land_send, .drop = land_drop};

/* The landing buffers the owner sized the pool for (fusefs_opts.lands), or
 * as many as it has room for beside the largest request: on rx's thread,
 * at its first read without a ring.  They are held for good, so they are
 * taken with the largest request's buffer held, as the pool check at start
 * (fusefs_create) took it: with every request's memory back the pool can
 * always give that buffer again (rqsched.h, progress (d)).  While requests
 * hold memory (this reactor read over /dev/fuse before INIT gave up on
 * io_uring) that buffer may not be free now: then not yet, at a later read. */
static void lands_alloc(struct fusefs_rx *rx)
{
	unsigned want = rx->fs->o.lands;
	size_t need = fsio_max_mem(rx->fs->max_lba);
	void *room;

	if (!want || !rx->r || !nvme_reactor_buf_common(rx->r)) {
		rx->lands_tried = true;
		return;
	}
	room = nvme_reactor_buf_alloc(rx->r, need);
	if (!room)
		return;
	rx->lands_tried = true;
	rx->lands = calloc(want, sizeof(*rx->lands));
	if (!rx->lands) {
		nvme_reactor_buf_free(rx->r, room, need);
		return;
	}
	for (unsigned i = 0; i < want; i++) {
		struct chan_land *l = &rx->lands[i];

		l->buf = nvme_reactor_buf_alloc(rx->r, FUSEFS_MAX_IO);
		if (!l->buf)
			break;
		l->rx = rx;
		land_put(l);
		rx->nlands++;
	}
	nvme_reactor_buf_free(rx->r, room, need);
	if (rx->nlands < want)
		log_info("fuse: reactor %u reads /dev/fuse writes into %u DMA buffers of %u "
			 "(the pool has no room for more beside the largest request, %zu bytes); "
			 "the others' data is copied",
			 rx->idx, rx->nlands, want, need);
}

void chan_lands_free(struct fusefs_rx *rx)
{
	for (unsigned i = 0; i < rx->nlands; i++)
		nvme_reactor_buf_free(rx->r, rx->lands[i].buf, FUSEFS_MAX_IO);
	free(rx->lands);
	rx->lands = rx->land_free = NULL;
	rx->nlands = 0;
}

/* Read one request; *land: the landing buffer its data may lie in. */
static ssize_t chan_read(struct fusefs_rx *rx, struct chan_land **land)
{
	struct chan_land *l;

	if (!rx->lands_tried && !rx->ring)
		lands_alloc(rx);
	l = rx->ring ? NULL : rx->land_free;
	*land = l;
	if (!l)
		return read(rx->fd, rx->dbuf, rx->dbuf_len);
	struct iovec iov[2] = {{rx->dbuf, FW_DEV_HEAD}, {l->buf, FUSEFS_MAX_IO}};

	return readv(rx->fd, iov, 2);
}

/* ---- reading ----
 * A reactor without a ring waits for requests in a wait of its own, where
 * the channel's fd is registered EPOLLEXCLUSIVE (nvme_reactor_wait_fd): the
 * kernel wakes one sleeping reactor per request, as it wakes one of the
 * threads blocked in read(2) on it, where libev's epoll woke every reading
 * reactor and all but one read EAGAIN.  With a ring (the io_uring
 * transport, whose ring's fd and timers live in the libev loop) the fd is
 * an ev_io of the loop, as it is when the reactor cannot make the wait;
 * once INIT has left the ring unused, the reactor moves to its own wait
 * (chan_own_wait). */

static void ready_cb(void *arg);

static void watch(struct fusefs_rx *rx)
{
	int err;

	if (!rx->own_wait) {
		ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
		return;
	}
	err = nvme_reactor_wait_fd(rx->r, rx->fd, ready_cb, rx);
	if (err) {
		/* not reached short of ENOMEM: libev's loop looks at the fd
		 * when the reactor's timer wakes it, the rest of the time is
		 * spent asleep: slow, but nothing waits for ever */
		log_err("fuse: reactor %u cannot wait for the channel again (%s): it reads it at "
			"its timer only",
			rx->idx, strerror(-err));
		rx->own_wait = false;
		ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
	}
}

static void unwatch(struct fusefs_rx *rx)
{
	if (rx->own_wait)
		nvme_reactor_wait_fd_off(rx->r);
	else
		ev_io_stop(nvme_reactor_loop(rx->r), &rx->io);
}

static void stop_reading(struct fusefs_rx *rx)
{
	if (rx->reader && !atomic_load(&rx->stopped) && !rx->paused)
		unwatch(rx);
	atomic_store(&rx->stopped, true);
}

void chan_session_ended(struct fusefs_rx *rx)
{
	struct fusefs *fs = rx->fs;

	stop_reading(rx);
	if (!atomic_exchange(&fs->exit_reported, true)) {
		log_info("fuse: the session ended (unmounted or aborted from outside)");
		if (fs->o.on_exit)
			fs->o.on_exit(fs->o.on_exit_arg);
	}
}

/* The channel polled readable: take up to max requests, until EAGAIN. */
static void read_batch(struct fusefs_rx *rx, int max)
{
	bool took = false; /* a request of this batch was taken */

	if (rx->fd_dead || rx->paused || atomic_load(&rx->stopped))
		return; /* chan_close stopped the watcher too */
	for (int i = 0; i < max; i++) {
		if (!sched_accepting(rx->sched)) {
			/* at the request or bounce bound: the kernel keeps the
			 * rest until chan_room */
			unwatch(rx);
			rx->paused = true;
			break;
		}
		struct chan_land *land;
		ssize_t n = chan_read(rx, &land);

		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0 && (errno == EINTR || errno == ENOENT))
			continue; /* ENOENT: the request was interrupted before we read it */
		if (n <= 0) {
			if (n < 0 && errno != ENODEV)
				log_err("fuse: reading the channel: %s", strerror(errno));
			chan_session_ended(rx);
			break;
		}

		struct fw_msg m;
		struct fw_req r = {.t = &dev_transport, .tctx = rx};
		bool in_land = false;
		int rc;

		if (land && (size_t)n > FW_DEV_HEAD)
			rc = fw_decode_dev_split(rx->dbuf, FW_DEV_HEAD, rx->dbuf_len, land->buf,
						 (size_t)n - FW_DEV_HEAD, &m, &in_land);
		else
			rc = fw_decode_dev(rx->dbuf, (size_t)n, &m);
		if (in_land) {
			/* the write holds its landing buffer until its answer */
			rx->land_free = land->next;
			aud_buf_get(rx, AUD_BUF_LAND, land->buf, FUSEFS_MAX_IO);
			r.t = &land_transport;
			r.tctx = land;
			r.data_dma = true;
		}

		if (!took && rx->r)
			nvme_reactor_note_work(rx->r); /* the pass counts as busy */
		took = true;
		fsops_dispatch(rx, &r, rc, &m);
		if (atomic_load(&rx->stopped))
			break;
	}
}

static void channel_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	read_batch(w->data, RECV_BATCH);
}

/* In the reactor's own wait.  Woken from a sleep (nothing was in flight),
 * the reactor most often finds one request: it takes that one and looks
 * for more with the wait of its next pass (the fd stays readable while
 * requests wait: level-triggered), which it makes anyway, instead of a
 * read that comes back EAGAIN (one system call of five per request at
 * QD1).  A polling pass takes a batch. */
static void ready_cb(void *arg)
{
	struct fusefs_rx *rx = arg;

	read_batch(rx, nvme_reactor_woke(rx->r) ? 1 : RECV_BATCH);
}

void chan_room(void *arg)
{
	struct fusefs_rx *rx = arg;

	if (rx->paused) {
		rx->paused = false;
		if (!atomic_load(&rx->stopped))
			watch(rx);
	}
}

void chan_start(struct fusefs_rx *rx)
{
	int err = -EBUSY;

	ev_io_init(&rx->io, channel_cb, rx->fd, EV_READ);
	rx->io.data = rx;
	if (!rx->ring)
		err = nvme_reactor_wait_fd(rx->r, rx->fd, ready_cb, rx);
	rx->own_wait = err == 0;
	if (err && !rx->ring)
		log_warn("fuse: reactor %u watches the channel from libev's loop (%s): every "
			 "request wakes every reading reactor",
			 rx->idx, strerror(-err));
	if (!rx->own_wait)
		ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
}

void chan_own_wait(struct fusefs_rx *rx)
{
	bool reading = rx->reader && !atomic_load(&rx->stopped) && !rx->paused;
	int err;

	if (rx->own_wait || rx->ring || !rx->reader)
		return;
	if (reading)
		ev_io_stop(nvme_reactor_loop(rx->r), &rx->io);
	err = reading ? nvme_reactor_wait_fd(rx->r, rx->fd, ready_cb, rx) : 0;
	if (err) {
		ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
		return;
	}
	rx->own_wait = true;
}

static void stop_cb(void *arg)
{
	struct fusefs_rx *rx = arg;

	stop_reading(rx);
	if (rx->ring)
		fur_stop(rx);
}

void chan_stop(struct fusefs_rx *rx)
{
	if (atomic_load(&rx->stopped) && !rx->ring)
		return;
	if (nvme_reactor_call(rx->r, stop_cb, rx) < 0)
		log_err("fuse: cannot reach reactor %u to stop it taking requests", rx->idx);
}

/* On rx's thread: its channel is done with for good.  The fd is not
 * closed here: libev leaves a stopped watcher's fd in its epoll set until
 * an event comes for it, and acts on the number then, which another thread
 * may have been given by then.  /dev/null takes its place instead (dup3:
 * the number stays this reactor's), which drops its hold on the connection;
 * the number itself is closed once the reactor has stopped
 * (chan_close_stopped). */
static void close_cb(void *arg)
{
	struct fusefs_rx *rx = arg;

	stop_reading(rx);
	if (rx->fd < 0 || rx->fd_dead)
		return;
	if (dup3(rx->fs->null_fd, rx->fd, O_CLOEXEC) < 0)
		log_err("fuse: reactor %u cannot let go of the channel: %s", rx->idx,
			strerror(errno));
	rx->fd_dead = true;
}

void chan_close(struct fusefs_rx *rx)
{
	if (rx->fd < 0)
		return;
	/* -ESHUTDOWN: the loop has ended and ran every call posted before;
	 * nothing of it uses the fd any more */
	if (nvme_reactor_call(rx->r, close_cb, rx) == -ESHUTDOWN)
		chan_close_stopped(rx);
}

void chan_close_stopped(struct fusefs_rx *rx)
{
	/* out of the reactor's wait first (it runs no more): an epoll
	 * entry outlives the fd's number while another fd holds the file */
	if (rx->own_wait && rx->r)
		nvme_reactor_wait_fd_off(rx->r);
	if (rx->fd >= 0)
		close(rx->fd);
	rx->fd = -1;
	rx->fd_dead = true;
}

void chan_pass_hook(void *arg)
{
	struct fusefs_rx *rx = arg;

	if (rx->ring)
		fur_reap(rx);
	sched_kick(rx->sched);
}

void chan_init_done(struct fusefs_rx *rx, uint64_t offered, const struct fuse_init_out *out)
{
	struct fusefs *fs = rx->fs;
	uint64_t agreed = fw_init_flags_out(out);
	struct fusefs_init_params p = {
		.major = out->major,
		.minor = out->minor,
		.flags = agreed,
		.max_write = out->max_write,
		.max_pages = out->max_pages,
		.max_background = out->max_background,
		.congestion_threshold = out->congestion_threshold,
		.time_gran = out->time_gran,
	};

	if (fs->o.on_init)
		fs->o.on_init(fs->o.on_init_arg, &p);
	if (agreed & FUSE_OVER_IO_URING) {
		fur_start(fs);
		return;
	}
	fur_abandon(fs);
	if (fs->o.transport == FUSEFS_TRANSPORT_CLASSIC)
		log_info("fuse: serving over /dev/fuse");
	else if (!(offered & FUSE_OVER_IO_URING))
		log_info("fuse: serving over /dev/fuse: the kernel did not offer FUSE over io_uring "
			 "(set fuse's enable_uring parameter before the daemon mounts)");
	else
		log_info("fuse: serving over /dev/fuse");
}

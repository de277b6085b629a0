/* channel.c - the /dev/fuse channel, read by the reactors. */
#include "channel.h"

#include <errno.h>
#include <linux/fuse.h>
#include <string.h>

#include "log.h"
#include "nvme.h"

#define RECV_BATCH 32 /* requests taken per watcher callback */

__thread struct fusefs_rx *fusefs_tl_rx;

void chan_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = FUSEFS_MAX_IO;
	conn->max_read = FUSEFS_MAX_IO;
	/* async direct I/O goes out as background requests: allow a deep queue */
	conn->max_background = 1024;
	conn->congestion_threshold = 768;
	/* splice costs a pipe round trip per request; a read(2) into the
	 * session buffer and one copy into the DMA buffer is cheaper */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	conn->time_gran = 1;
}

static void stop_reading(struct fusefs_rx *rx)
{
	if (rx->reader && !atomic_load(&rx->stopped) && !rx->paused)
		ev_io_stop(nvme_reactor_loop(rx->r), &rx->io);
	atomic_store(&rx->stopped, true);
}

static void session_ended(struct fusefs_rx *rx)
{
	struct fusefs *fs = rx->fs;

	stop_reading(rx);
	if (!atomic_exchange(&fs->exit_reported, true)) {
		log_info("fuse: the session ended (unmounted or aborted from outside)");
		if (fs->o.on_exit)
			fs->o.on_exit(fs->o.on_exit_arg);
	}
}

/* The opcodes the scheduler counts itself; the channel counts the rest. */
static bool counted_by_ops(uint32_t opcode)
{
	return opcode == FUSE_READ || opcode == FUSE_WRITE || opcode == FUSE_FSYNC ||
	       opcode == FUSE_FLUSH || opcode == FUSE_FALLOCATE;
}

static void channel_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fusefs_rx *rx = w->data;
	struct fuse_session *se = rx->fs->se;

	(void)revents;
	for (int i = 0; i < RECV_BATCH; i++) {
		if (!sched_accepting(rx->sched)) {
			/* at the request or bounce bound: the kernel keeps the
			 * rest until chan_room */
			ev_io_stop(loop, &rx->io);
			rx->paused = true;
			break;
		}
		int res = fuse_session_receive_buf(se, &rx->fbuf);

		if (res == -EAGAIN)
			break;
		if (res == -EINTR)
			continue;
		if (res <= 0 || fuse_session_exited(se)) {
			if (res < 0 && res != -ENODEV)
				log_err("fuse: reading the channel: %s", strerror(-res));
			session_ended(rx);
			break;
		}
		if ((size_t)res >= sizeof(struct fuse_in_header) && !(rx->fbuf.flags & FUSE_BUF_IS_FD)) {
			const struct fuse_in_header *in = rx->fbuf.mem;

			if (!counted_by_ops(in->opcode))
				sched_count(rx->sched, FUSEFS_OP_OTHER, 0, 0);
		}
		fusefs_tl_rx = rx;
		fuse_session_process_buf(se, &rx->fbuf);
		fusefs_tl_rx = NULL;
	}
}

void chan_room(void *arg)
{
	struct fusefs_rx *rx = arg;

	if (rx->paused) {
		rx->paused = false;
		if (!atomic_load(&rx->stopped))
			ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
	}
}

void chan_start(struct fusefs_rx *rx, int fd)
{
	ev_io_init(&rx->io, channel_cb, fd, EV_READ);
	rx->io.data = rx;
	ev_io_start(nvme_reactor_loop(rx->r), &rx->io);
}

static void stop_cb(void *arg)
{
	stop_reading(arg);
}

void chan_stop(struct fusefs_rx *rx)
{
	if (atomic_load(&rx->stopped))
		return;
	if (nvme_reactor_call(rx->r, stop_cb, rx) < 0)
		log_err("fuse: cannot reach reactor %u to stop it reading", rx->idx);
}

void chan_pass_hook(void *arg)
{
	struct fusefs_rx *rx = arg;

	sched_kick(rx->sched);
}

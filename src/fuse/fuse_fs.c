/* fuse_fs.c - the front end's set-up, stop and statistics: the namespace
 * table, one scheduler per reactor, the session and the mount.  The modules
 * are listed in fusefs_priv.h. */
#include "fusefs_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "audit.h"
#include "channel.h"
#include "fsio.h"
#include "log.h"
#include "nvme.h"
#include "fwire.h"
#include "uring.h"

/* ---- the engine, as the scheduler sees it ---- */

/* A request's buffer comes from the pool its controller's device reaches
 * (the reactor's shared pool, or under dma_isolation the controller's own):
 * dom is the controller's index. */
static void *env_alloc(void *ctx, unsigned dom, size_t len)
{
	struct fusefs_rx *rx = ctx;
	void *p = nvme_qpair_buf_alloc(rx->qp[dom], len);

	aud_buf_get(rx, AUD_BUF_DMA, p, len);
	return p;
}

static void env_free(void *ctx, unsigned dom, void *buf, size_t len)
{
	struct fusefs_rx *rx = ctx;

	aud_buf_put(rx, AUD_BUF_DMA, buf, len);
	nvme_qpair_buf_free(rx->qp[dom], buf, len);
}

static int env_call(void *ctx, void (*fn)(void *arg), void *arg)
{
	struct fusefs_rx *rx = ctx;

	return nvme_reactor_call(rx->r, fn, arg);
}

static uint64_t env_now(void *ctx)
{
	struct fusefs_rx *rx = ctx;

	return nvme_reactor_clock(rx->r);
}

/* What a buffer of len takes from the reactor's buddy pool. */
static size_t env_cost(void *ctx, size_t len)
{
	(void)ctx;
	return nvme_reactor_buf_size(len);
}

/* ---- running ---- */

void fusefs_stop(struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++)
		chan_stop(&fs->rx[i]);
}

unsigned fusefs_inflight(const struct fusefs *fs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (fs->rx[i].sched)
			n += sched_inflight(fs->rx[i].sched);
	return n;
}

bool fusefs_drained(const struct fusefs *fs)
{
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (!atomic_load(&fs->rx[i].stopped))
			return false;
	return fusefs_inflight(fs) == 0;
}

void fusefs_stats_get(const struct fusefs *fs, struct fusefs_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < fs->nr_rx; i++)
		if (fs->rx[i].sched)
			sched_stats_add(fs->rx[i].sched, out);
	out->transport = fusefs_transport_active(fs);
}

int fusefs_ns_stats_get(struct fusefs *fs, const char *name, struct fusefs_ns_stats *out)
{
	uint64_t ino;
	struct fusefs_ns *ns = fsns_lookup(&fs->ns, name, &ino);

	memset(out, 0, sizeof(*out));
	if (!ns)
		return -ENOENT;
	for (unsigned i = 0; ns->st && i < fs->ns.nr_stats; i++)
		sched_ns_stats_add(&ns->st[i], out);
	return 0;
}

enum fusefs_transport fusefs_transport_active(const struct fusefs *fs)
{
	return atomic_load(&((struct fusefs *)fs)->transport);
}

const char *fusefs_transport_name(enum fusefs_transport t)
{
	switch (t) {
	case FUSEFS_TRANSPORT_AUTO:
		return "auto";
	case FUSEFS_TRANSPORT_URING:
		return "uring";
	default:
		return "classic";
	}
}

int fusefs_resend(struct fusefs *fs)
{
	return fw_dev_notify(fs->fd, FUSE_NOTIFY_RESEND);
}

int fusefs_fd(const struct fusefs *fs)
{
	return fs->fd;
}

static void fnv(uint64_t *h, const char *s)
{
	for (; *s; s++) {
		*h ^= (unsigned char)*s;
		*h *= 0x100000001b3ULL;
	}
}

void fusefs_digest_table(const struct fusefs_opts *o, const struct fusefs_ns_desc *ns,
			 unsigned nr, uint64_t *out)
{
	char line[512];
	uint64_t h = 0xcbf29ce484222325ULL;

	snprintf(line, sizeof(line), "v1 allow_other=%d mode=%o uid=%u gid=%u max_read=%u\n",
		 o->allow_other, (unsigned)(o->file_mode & 07777), (unsigned)o->uid,
		 (unsigned)o->gid, FUSEFS_MAX_IO);
	fnv(&h, "mountpoint=");
	fnv(&h, o->mountpoint);
	fnv(&h, "\n");
	fnv(&h, line);
	for (unsigned i = 0; i < nr; i++) {
		snprintf(line, sizeof(line), "ns ino=%u name=%s size=%llu lba=%u\n", i + 2,
			 ns[i].name, (unsigned long long)ns[i].size, ns[i].lba_size);
		fnv(&h, line);
	}
	*out = h;
}

int fusefs_digest(const struct fusefs_opts *o, uint64_t *out)
{
	struct fsns_table t;
	struct fusefs_ns_desc *d;
	unsigned nr;
	int err = fsns_build(o->ctrls, o->ctrl_names, o->nr_ctrls, 0, 0, &t);

	if (err)
		return err;
	nr = fsns_count(&t);
	d = calloc(nr ? nr : 1, sizeof(*d));
	if (!d) {
		fsns_free(&t);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nr; i++)
		d[i] = t.slot[i].d;
	fusefs_digest_table(o, d, nr, out);
	free(d);
	fsns_free(&t);
	return 0;
}

const struct fusefs_ns_desc *fusefs_namespaces(const struct fusefs *fs, unsigned *nr)
{
	*nr = fs->nr_desc;
	return fs->desc;
}

/* ---- namespaces that change while the mount is served ---- */

static void tell_entry(struct fusefs *fs, const char *name)
{
	int rc = fs->fd >= 0 ? fw_dev_inval_entry(fs->fd, FUSE_ROOT_ID, name) : 0;

	if (rc && rc != -ENOENT)
		log_debug("fuse: FUSE_NOTIFY_INVAL_ENTRY %s: %s", name, strerror(-rc));
}

static void tell_inode(struct fusefs *fs, uint64_t ino)
{
	int rc = fs->fd >= 0 ? fw_dev_inval_inode(fs->fd, ino, -1, 0) : 0;

	if (rc && rc != -ENOENT)
		log_debug("fuse: FUSE_NOTIFY_INVAL_INODE %llu: %s", (unsigned long long)ino,
			  strerror(-rc));
}

static uint64_t shown_ino(struct fusefs *fs, unsigned ci, uint32_t nsid)
{
	uint64_t ino = fsns_find(&fs->ns, ci, nsid);
	struct fusefs_ns *ns = fsns_by_ino(&fs->ns, ino);

	return ns && fsns_present(ns) ? ino : 0;
}

int fusefs_ns_add(struct fusefs *fs, unsigned ci, const struct nvme_ns_info *ni)
{
	const struct nvme_ctrl_info *in;
	struct fsns_ctrl_feat f;
	uint64_t ino;
	int rc;

	if (ci >= fs->o.nr_ctrls || !fs->o.ctrls[ci])
		return -EINVAL;
	if (ni->lba_size > fs->max_lba)
		return -EOPNOTSUPP;
	in = nvme_ctrl_get_info(fs->o.ctrls[ci]);
	f = (struct fsns_ctrl_feat){
		.vwc = in->vwc,
		.dsm = in->oncs & NVME_ONCS_DSM,
		.wzeroes = in->oncs & NVME_ONCS_WRITE_ZEROES,
	};
	rc = fsns_add(&fs->ns, ci, fs->o.ctrl_names[ci], &f, ni, &ino);
	if (rc)
		return rc;
	tell_entry(fs, fsns_by_ino(&fs->ns, ino)->name);
	return 0;
}

int fusefs_ns_remove(struct fusefs *fs, unsigned ci, uint32_t nsid)
{
	uint64_t ino = shown_ino(fs, ci, nsid);
	int rc = ino ? fsns_remove(&fs->ns, ino, FSNS_REMOVED) : -ENOENT;

	if (rc)
		return rc;
	tell_entry(fs, fsns_by_ino(&fs->ns, ino)->name);
	tell_inode(fs, ino);
	return 0;
}

int fusefs_ns_resize(struct fusefs *fs, unsigned ci, uint32_t nsid, uint64_t nlba)
{
	uint64_t ino = shown_ino(fs, ci, nsid);
	struct fusefs_ns *ns = fsns_by_ino(&fs->ns, ino);
	int rc;

	if (!ns)
		return -ENOENT;
	if (nlba > (uint64_t)INT64_MAX >> ns->shift)
		return -EINVAL;
	rc = fsns_resize(&fs->ns, ino, nlba << ns->shift);
	if (rc)
		return rc;
	tell_inode(fs, ino);
	return 0;
}

int fusefs_ctrl_detach(struct fusefs *fs, unsigned ci)
{
	unsigned n = fsns_count(&fs->ns), gone = 0;

	for (unsigned i = 0; i < n; i++) {
		struct fusefs_ns *ns = &fs->ns.slot[i];

		if (ns->d.ctrl != ci || fsns_remove(&fs->ns, (uint64_t)i + 2, FSNS_DETACHED))
			continue;
		tell_entry(fs, ns->name);
		tell_inode(fs, (uint64_t)i + 2);
		gone++;
	}
	return (int)gone;
}

int fusefs_ctrl_add(struct fusefs *fs, unsigned ci)
{
	const struct nvme_ctrl_info *in;
	unsigned nr, shown = 0;

	if (ci >= fs->o.nr_ctrls || !fs->o.ctrls[ci])
		return -EINVAL;
	for (unsigned r = 0; r < fs->nr_rx; r++)
		if (!fs->rx[r].qp[ci])
			return -EINVAL;
	in = nvme_ctrl_get_info(fs->o.ctrls[ci]);
	nr = __atomic_load_n(&in->nr_ns, __ATOMIC_ACQUIRE);
	for (unsigned k = 0; k < nr; k++) {
		const struct nvme_ns_info *ni = &in->ns[k];
		int rc;

		if (ni->removed)
			continue;
		rc = fusefs_ns_add(fs, ci, ni);
		if (rc)
			log_warn("fuse: %s namespace %u: not shown (%s)", fs->o.ctrl_names[ci], ni->nsid,
				 rc == -EOPNOTSUPP ? "LBA size larger than any at start"
				 : rc == -ENOSPC  ? "no free slot in the namespace table"
						  : strerror(-rc));
		else
			shown++;
	}
	return (int)shown;
}

int fusefs_ctrl_attach(struct fusefs *fs, unsigned ci)
{
	const struct nvme_ctrl_info *in;
	unsigned n = fsns_count(&fs->ns), back = 0;

	if (ci >= fs->o.nr_ctrls || !fs->o.ctrls[ci])
		return -EINVAL;
	in = nvme_ctrl_get_info(fs->o.ctrls[ci]);
	for (unsigned i = 0; i < n; i++) {
		struct fusefs_ns *ns = &fs->ns.slot[i];
		const struct nvme_ns_info *ni = NULL;
		unsigned nr = __atomic_load_n(&in->nr_ns, __ATOMIC_ACQUIRE);

		if (ns->d.ctrl != ci || atomic_load(&ns->state) != FSNS_DETACHED)
			continue;
		for (unsigned k = nr; k-- > 0;)
			if (in->ns[k].nsid == ns->d.nsid) {
				ni = &in->ns[k];
				break;
			}
		/* gone or reformatted meanwhile: it stays away */
		if (!ni || ni->removed || ni->failed || ni->lba_size != ns->d.lba_size)
			continue;
		(void)fsns_resize(&fs->ns, (uint64_t)i + 2, ni->nlba << ns->shift);
		if (fsns_revive(&fs->ns, (uint64_t)i + 2))
			continue;
		tell_entry(fs, ns->name);
		tell_inode(fs, (uint64_t)i + 2);
		back++;
	}
	return (int)back;
}

unsigned fusefs_ns_list(const struct fusefs *fs, struct fusefs_ns_desc *out, unsigned max)
{
	unsigned n = fsns_count(&fs->ns), k = 0;

	for (unsigned i = 0; i < n && k < max; i++) {
		const struct fusefs_ns *ns = &fs->ns.slot[i];

		if (!fsns_present(ns))
			continue;
		out[k] = ns->d;
		out[k].size = fsns_size(ns);
		k++;
	}
	return k;
}

unsigned fusefs_ns_capacity(const struct fusefs *fs)
{
	return fs->ns.cap;
}

/* ---- set-up and tear-down ---- */

static int build_namespaces(struct fusefs *fs)
{
	int err = fsns_build(fs->o.ctrls, fs->o.ctrl_names, fs->o.nr_ctrls, FSNS_SPARE,
			     fs->o.nr_reactors, &fs->ns);

	if (err)
		return err;
	fs->nr_desc = fsns_count(&fs->ns);
	fs->desc = calloc(fs->nr_desc ? fs->nr_desc : 1, sizeof(*fs->desc));
	if (!fs->desc)
		return -ENOMEM;
	fs->max_lba = 512;
	for (unsigned i = 0; i < fs->nr_desc; i++) {
		fs->desc[i] = fs->ns.slot[i].d;
		if (fs->desc[i].lba_size > fs->max_lba)
			fs->max_lba = fs->desc[i].lba_size;
	}
	return 0;
}

/* DMA bytes of the largest request on these namespaces. */
static size_t largest_request(const struct fusefs *fs)
{
	uint32_t max_lba = fs->max_lba;

	/* a namespace added later with a larger LBA size is refused
	 * (fusefs_ns_add): the bounds below were sized for these */
	return fsio_max_mem(max_lba);
}

/* Pool bytes one controller's requests may hold on a reactor (0: no
 * bound).  Only where the controllers share the reactor's pool (under
 * dma_isolation each has its own: no bound).  Half of the pool: a controller that stops completing (hung, in
 * a reset) keeps what its requests hold until its commands complete or
 * time out, and the other half stays for the other controllers; a fixed
 * half rather than a 1/n share, so that a busy controller among idle ones
 * still has most of the pool.  At least the largest request, which must
 * always fit. */
static size_t ctrl_mem_max(const struct fusefs *fs, unsigned i)
{
	size_t need = env_cost(NULL, largest_request(fs));
	unsigned ctrls = 0;

	for (unsigned c = 0; c < fs->o.nr_ctrls; c++)
		ctrls += fs->o.ctrls[c] != NULL;
	if (ctrls < 2 || !fs->o.pool_bytes || !nvme_reactor_buf_common(fs->o.reactors[i]))
		return 0;
	return fs->o.pool_bytes / 2 > need ? fs->o.pool_bytes / 2 : need;
}

/* The scheduler's progress needs every pool to hold the largest request
 * once everything else has come back: check it while the pools are as they
 * will be whenever no request holds a buffer (each controller's, under
 * dma_isolation). */
static int check_pools(struct fusefs *fs)
{
	size_t need = largest_request(fs);

	for (unsigned i = 0; i < fs->nr_rx; i++)
		for (unsigned c = 0; c < fs->o.nr_ctrls; c++) {
			void *p;

			if (!fs->rx[i].qp[c])
				continue; /* an empty slot */
			p = nvme_qpair_buf_alloc(fs->rx[i].qp[c], need);

			if (!p) {
				log_err("fuse: reactor %u's DMA pool for %s cannot hold the largest "
					"request (%zu bytes, a buddy block of the next power of "
					"two): make it larger",
					i, fs->o.ctrl_names[c], need);
				return -ENOMEM;
			}
			nvme_qpair_buf_free(fs->rx[i].qp[c], p, need);
		}
	return 0;
}

/* The io_uring entries reactor i will serve: each can bring a request that
 * the kernel has already handed over, so the request bound comes on top. */
static unsigned ring_entries(const struct fusefs_opts *o, unsigned i)
{
	unsigned n = 0;

	if (o->transport == FUSEFS_TRANSPORT_CLASSIC || !o->cpu_map)
		return 0;
	for (unsigned c = 0; c < o->nr_cpu_map; c++)
		n += o->cpu_map[c] == i;
	return n * (o->queue_depth ? o->queue_depth : FUSEFS_QUEUE_DEPTH);
}

int fusefs_create(const struct fusefs_opts *o, struct fusefs **out)
{
	struct fusefs *fs;
	char opts[256];
	char *argv[5];
	int argc = 0, err, fd, fl;

	if (!o->mountpoint || !o->nr_reactors || !o->nr_ctrls) {
		if (o->adopt)
			close(o->adopt_fd);
		return -EINVAL;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs) {
		if (o->adopt)
			close(o->adopt_fd);
		return -ENOMEM;
	}
	fs->o = *o;
	if (o->adopt) {
		/* the connection is over /dev/fuse: no ring is set up, and
		 * everything below reads the options from fs->o */
		fs->o.transport = FUSEFS_TRANSPORT_CLASSIC;
		fs->adopted = true;
		fs->fd = o->adopt_fd;
	}
	o = &fs->o;
	if (!fs->o.dsync_fua_max)
		fs->o.dsync_fua_max = FUSEFS_DSYNC_FUA_MAX;
	if (!o->adopt)
		fs->fd = -1;
	fs->null_fd = -1;
	atomic_init(&fs->transport, FUSEFS_TRANSPORT_CLASSIC);
	clock_gettime(CLOCK_REALTIME, &fs->t0);
	err = build_namespaces(fs);
	if (err)
		goto fail;
	fs->nr_rx = o->nr_reactors;
	fs->rx = calloc(fs->nr_rx, sizeof(*fs->rx));
	if (!fs->rx) {
		err = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < fs->nr_rx; i++)
		fs->rx[i].fd = -1;
	unsigned readers = o->readers && o->readers <= o->nr_reactors ? o->readers : o->nr_reactors;
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];
		struct sched_env env = {
			.buf_alloc = env_alloc,
			.buf_free = env_free,
			.call = env_call,
			.ctx = rx,
			.buf_cost = env_cost,
			.now = o->reactors[i] ? env_now : NULL,
		};
		struct sched_opts so = {
			.rq_size = fsio_rq_size(),
			.max_rq = (o->max_requests ? o->max_requests : SCHED_MAX_RQ) +
				  ring_entries(o, i),
			.bounce_max = o->bounce_max,
			.max_payload = FUSEFS_MAX_IO,
			/* one slot domain per controller: its qpair's trackers */
			.nr_dom = o->nr_ctrls,
			.dom_mem_max = ctrl_mem_max(fs, i),
			.on_room = chan_room,
			.room_arg = rx,
		};

		rx->fs = fs;
		rx->idx = i;
		rx->r = o->reactors[i];
		rx->qp = &o->qpairs[(size_t)i * o->nr_ctrls];
		rx->reader = i < readers;
		/* a reactor serving FUSE queues takes requests without reading
		 * /dev/fuse: it is stopped only by chan_stop too */
		atomic_init(&rx->stopped, !rx->reader && !ring_entries(o, i));
		err = sched_create(&env, &so, &rx->sched);
		if (err)
			goto fail;
		if (rx->reader) {
			rx->dbuf_len = chan_buf_size();
			rx->dbuf = malloc(rx->dbuf_len);
			if (!rx->dbuf) {
				err = -ENOMEM;
				goto fail;
			}
		}
	}
	err = check_pools(fs);
	if (err)
		goto fail;
	err = aud_create(fs);
	if (err)
		goto fail;

	if (fs->adopted) {
		fs->mounted = true;
		fd = fs->fd;
		goto channel;
	}
	err = fusefs_prepare_mountpoint(o->mountpoint);
	if (err)
		goto fail;

	snprintf(opts, sizeof(opts), "default_permissions,max_read=%u,fsname=nvmefs,subtype=nvmefs%s",
		 FUSEFS_MAX_IO, o->allow_other ? ",allow_other" : "");
	argv[argc++] = "nvmefsd";
	argv[argc++] = "-o";
	argv[argc++] = opts;
	if (o->debug)
		argv[argc++] = "-d";
	argv[argc] = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	/* libfuse mounts and unmounts; the requests are read and answered
	 * by the channel and the ring (fwire.h), never by libfuse */
	static const struct fuse_lowlevel_ops no_ops;
	fs->se = fuse_session_new(&args, &no_ops, sizeof(no_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		log_err("fuse: cannot create the session (options %s)", opts);
		err = -EINVAL;
		goto fail;
	}
	if (fuse_session_mount(fs->se, o->mountpoint) != 0) {
		log_err("%s: cannot mount the FUSE file system", o->mountpoint);
		err = -EIO;
		goto fail;
	}
	fs->mounted = true;
	fd = fs->fd = fuse_session_fd(fs->se);
channel:
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err = -errno;
		log_err("fuse: cannot make the channel non-blocking: %s", strerror(-err));
		goto fail;
	}
	/* each reactor reads, answers and submits on a duplicate of its own
	 * (the same open file: one queue of requests), which only its thread
	 * lets go of while it runs (chan_close): fs->fd may be closed on
	 * another thread (libfuse's unmount) without a reactor ever using
	 * that number after it */
	fs->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fs->null_fd < 0) {
		err = -errno;
		log_err("fuse: /dev/null: %s", strerror(-err));
		goto fail;
	}
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		fs->rx[i].fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (fs->rx[i].fd < 0) {
			err = -errno;
			log_err("fuse: duplicating the channel's fd: %s", strerror(-err));
			goto fail;
		}
	}
	if (o->transport != FUSEFS_TRANSPORT_CLASSIC) {
		err = fur_setup(fs);
		if (err && o->transport == FUSEFS_TRANSPORT_URING)
			goto fail;
		if (err)
			log_warn("fuse: no io_uring transport (%s): /dev/fuse only", strerror(-err));
	}
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct fusefs_rx *rx = &fs->rx[i];

		nvme_reactor_set_pass_hook(rx->r, chan_pass_hook, rx);
		if (rx->reader)
			chan_start(rx);
	}
	if (fs->adopted)
		log_info("fuse: serving over /dev/fuse (connection adopted from the previous run, "
			 "protocol %u.%u, max_write %u)",
			 o->adopt_init.major, o->adopt_init.minor, o->adopt_init.max_write);
	log_info("fuse: %u namespace file%s at %s, %u reactor%s reading the channel", fs->nr_desc,
		 fs->nr_desc == 1 ? "" : "s", o->mountpoint, readers, readers == 1 ? "" : "s");
	*out = fs;
	return 0;
fail:
	fusefs_destroy(fs);
	return err;
}

void fusefs_keep_mount(struct fusefs *fs)
{
	/* nothing is in flight (drained): the connection and its mount stay,
	 * the kernel queues new requests for the next process */
	if (fs)
		fs->mounted = false;
}

void fusefs_unmount(struct fusefs *fs)
{
	if (fs && fs->mounted) {
		/* what still waits can no longer be answered: run none of it;
		 * every reactor lets go of its fd on its own thread (an answer
		 * that comes later goes nowhere: late_answers), so the
		 * connection ends once the fd closed below was the last */
		for (unsigned i = 0; i < fs->nr_rx; i++) {
			if (fs->rx[i].sched)
				sched_close(fs->rx[i].sched);
			chan_close(&fs->rx[i]);
		}
		if (fs->adopted) {
			/* as fuse_session_unmount does: close the channel first,
			 * so the unmount cannot wait on a request to ourselves */
			close(fs->fd);
			fs->fd = -1;
			if (umount2(fs->o.mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
				log_warn("%s: unmount: %s", fs->o.mountpoint, strerror(errno));
		} else {
			/* closes fs->fd, then unmounts lazily */
			fuse_session_unmount(fs->se);
			fs->fd = -1;
		}
		fs->mounted = false;
	}
}

void fusefs_destroy(struct fusefs *fs)
{
	unsigned left = 0;

	if (!fs)
		return;
	/* the reactors are stopped and joined, or never ran: no thread but
	 * this one can use their fds now */
	for (unsigned i = 0; fs->rx && i < fs->nr_rx; i++)
		chan_close_stopped(&fs->rx[i]);
	fusefs_unmount(fs);
	/* requests given up at stop: free their buffers, bounce buffers and
	 * libfuse's request (the channel is closed: nothing is sent) */
	for (unsigned i = 0; fs->rx && i < fs->nr_rx; i++)
		left += sched_destroy(fs->rx[i].sched, 0);
	if (left)
		log_warn("fuse: %u request(s) abandoned at stop, never answered: freed what they held",
			 left);
	aud_destroy(fs);
	/* the connection ends once /dev/fuse is closed here and the rings'
	 * parked commands, which hold the file too, are cancelled by closing
	 * the rings (fur_destroy); only then do the entries' buffers go back
	 * to the pools */
	if (fs->se)
		fuse_session_destroy(fs->se);
	if (fs->adopted && fs->fd >= 0)
		close(fs->fd);
	if (fs->null_fd >= 0)
		close(fs->null_fd);
	fur_destroy(fs);
	for (unsigned i = 0; fs->rx && i < fs->nr_rx; i++) {
		chan_lands_free(&fs->rx[i]);
		free(fs->rx[i].dbuf);
	}
	fsns_free(&fs->ns);
	free(fs->rx);
	free(fs->desc);
	free(fs);
}

/* fuse_fs.h - the FUSE front end: every namespace as a file in one mount.
 *
 * The mount's root directory holds one regular file per active namespace,
 * named <controller>n<nsid> (nvme0n1), whose size is the namespace capacity.
 * Reads and writes at any offset and length become NVMe Read/Write commands
 * on the serving reactor's qpair (unaligned writes by read-modify-write,
 * serialised per block range); fsync becomes Flush when the controller has a
 * volatile write cache; fallocate(PUNCH_HOLE|KEEP_SIZE) becomes Write Zeroes
 * with DEAC and fallocate(ZERO_RANGE) Write Zeroes.  Sizes change only when a
 * namespace grows (fusefs_ns_resize), never through the file, as on a block
 * device: O_TRUNC is accepted without effect, ftruncate and
 * truncate fail with EINVAL; create, unlink, chmod and chown with EPERM
 * (docs/fuse.md has the full table).
 *
 * Threading: the FUSE channel is read by reactors, in their own libev loops
 * (the session fd is non-blocking, one ev_io watcher per reading reactor).  A
 * request is served entirely on the reactor that read it: its qpairs, its DMA
 * buffers, and the reply from the completion callback.  Only the per-
 * namespace range lock is shared (a mutex, held for tree updates only); a
 * grant for another reactor's request is handed to that reactor.  What each
 * reactor holds is bounded (max_requests, bounce_max, its DMA pool): see
 * rqsched.h and docs/fuse.md.
 *
 * Prefix fusefs_: libfuse owns fuse_ and exports fuse_fs_* symbols.
 *
 * Every function returns 0 or a negative errno unless it says otherwise.
 */
#ifndef NVMEFS_FUSE_FS_H
#define NVMEFS_FUSE_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpumap.h"
#include "nvme.h"

struct nvme_ctrl;
struct nvme_qpair;
struct nvme_reactor;
struct fusefs;

#define FUSEFS_MAX_IO (1u << 20) /* max_read and max_write */
#define FUSEFS_DSYNC_FUA_MAX FUSEFS_MAX_IO /* FUA for every O_DSYNC write */

/* How requests reach the daemon. */
enum fusefs_transport {
	FUSEFS_TRANSPORT_AUTO,    /* uring when the kernel offers it at INIT, else classic */
	FUSEFS_TRANSPORT_URING,   /* FUSE over io_uring: one FUSE queue per possible CPU */
	FUSEFS_TRANSPORT_CLASSIC, /* read(2)/write(2) on /dev/fuse */
};
#define FUSEFS_QUEUE_DEPTH 16     /* ring entries per FUSE queue, default */
#define FUSEFS_QUEUE_DEPTH_MAX 256

/* What INIT agreed: what the daemon needs to serve the connection again
 * after a restart without a new INIT (fstate.h keeps it). */
struct fusefs_init_params {
	uint32_t major, minor;    /* protocol version agreed */
	uint64_t flags;           /* the 64-bit flags granted */
	uint32_t max_write;
	uint16_t max_pages, max_background, congestion_threshold;
	uint32_t time_gran;
};

struct fusefs_opts {
	const char *mountpoint;
	mode_t file_mode;  /* permission bits of the namespace files */
	uid_t uid;
	gid_t gid;
	bool allow_other;
	bool debug;        /* libfuse's request trace on stderr */

	/* Controllers and their names (files are <name>n<nsid>).  The arrays
	 * are the caller's and read at each use: ctrls[c] NULL is a slot with
	 * no controller yet, which the caller may fill while the mount is
	 * served and then show with fusefs_ctrl_add. */
	unsigned nr_ctrls;
	struct nvme_ctrl **ctrls;
	const char *const *ctrl_names;

	/* Reactors and their qpairs: qpairs[r * nr_ctrls + c] is reactor r's
	 * qpair on controller c (NULL exactly where ctrls[c] is NULL). */
	unsigned nr_reactors;
	struct nvme_reactor **reactors;
	struct nvme_qpair **qpairs;

	/* How many reactors read the channel (reactors 0..readers-1); 0 or
	 * more than nr_reactors means all of them. */
	unsigned readers;

	/* Bounds per reactor (0: defaults): requests taken and not answered
	 * (2048), bytes of write data held in bounce buffers while their
	 * requests wait for DMA memory (8 MiB).  A reactor stops reading the
	 * channel while it is at either bound. */
	unsigned max_requests;
	size_t bounce_max;
	/* Bytes of each reactor's DMA pool for requests, the io_uring
	 * entries' payloads not counted (0: not known).  With several
	 * controllers, one controller's requests hold at most half of it (at
	 * least the largest request): a controller that stops completing
	 * leaves the others the other half.  0: no such bound.  Not applied
	 * where each controller has a pool of its own (dma_isolation). */
	size_t pool_bytes;

	/* A write that must be durable when answered (O_DSYNC, O_SYNC, RWF_DSYNC)
	 * on a namespace with a volatile write cache goes out with FUA on every
	 * command when it is at most this many bytes, else as plain writes and
	 * one Flush after them (0: FUSEFS_DSYNC_FUA_MAX, every write: FUA was
	 * faster in every case measured, bench/RESULTS.md "O_DSYNC writes"). */
	size_t dsync_fua_max;

	enum fusefs_transport transport;
	/* uring: entries per FUSE queue (0: FUSEFS_QUEUE_DEPTH), each with a
	 * payload buffer of FUSEFS_MAX_IO bytes from the serving reactor's DMA
	 * pool; cpu_map[c] (nr_cpu_map entries, one per possible CPU) is the
	 * reactor serving CPU c's queue (cpumap.h builds it).  cpus (NULL: all
	 * online) says which CPUs were online when the pools were sized: an
	 * offline CPU's queue gets one entry until the CPU comes online
	 * (cpumap_queue_entries; uring.h says what follows) */
	unsigned queue_depth;
	/* /dev/fuse: landing buffers of FUSEFS_MAX_IO bytes per reading
	 * reactor, which writes' data is read into (channel.h), taken from its
	 * DMA pool at its first read without a ring: the owner sizes the pools
	 * for them beside pool_bytes (0: none, writes' data is copied) */
	unsigned lands;
	unsigned nr_cpu_map;
	const unsigned *cpu_map;
	const struct cpumap_cpu *cpus;

	/* Adopt a connection instead of mounting: adopt_fd is /dev/fuse of a
	 * connection already mounted at mountpoint, past INIT (whose outcome
	 * is adopt_init), served by an earlier run of the daemon.  Nothing is
	 * mounted and no INIT is awaited; it is served over /dev/fuse, and the
	 * front end owns adopt_fd from fusefs_create on (closed on failure
	 * too). */
	bool adopt;
	int adopt_fd;
	struct fusefs_init_params adopt_init;

	/* Called once, on a reactor thread, right after INIT was answered
	 * (not when adopting). */
	void (*on_init)(void *arg, const struct fusefs_init_params *p);
	void *on_init_arg;

	/* Called once, on a reactor thread, when the session ends by itself
	 * (unmounted from outside, connection aborted). */
	void (*on_exit)(void *arg);
	void *on_exit_arg;
};

/* One namespace file, as shown in the mount. */
struct fusefs_ns_desc {
	const char *name;
	unsigned ctrl;     /* index into opts.ctrls */
	uint32_t nsid;
	uint64_t size;     /* bytes */
	uint32_t lba_size;
};

/* Make the mountpoint usable: create it (and missing parents, mode 0755
 * whatever the umask) if missing; clear a stale FUSE mount left by a crashed daemon (stat fails with
 * ENOTCONN or ECONNABORTED) with a lazy unmount (UMOUNT_NOFOLLOW) and a log
 * line; fail with -EBUSY and a message naming what is mounted there when it is
 * a live mount, and with -ENOTEMPTY naming what is in the directory when it
 * is not empty (a mount would hide it).  The path is walked by safepath_open_parent's rules
 * (safepath.h: no symbolic link anywhere, every parent owned by root, the
 * mountpoint's own parent writable by its owner only); a symbolic link at the
 * mountpoint itself is refused with -ELOOP.  fusefs_create calls it. */
int fusefs_prepare_mountpoint(const char *path);

/* Lock-free views of the mount's connection, from /proc and /sys only:
 * nothing here stats the mountpoint, which hangs while a connection that
 * no one serves is still open somewhere (a service manager's fd store).
 * A connection is named by the device number of its super block, as in
 * /sys/fs/fuse/connections/N. */

/* The connection of fd: -ENOTTY when fd is not /dev/fuse (char 10:229),
 * -ENODATA when /proc/self/fdinfo has no "fuse_connection:" line (kernels
 * before 6.16, or a fd never mounted). */
int fusefs_conn_of_fd(int fd, unsigned *conn);
/* The connection of the FUSE mount on top at path (fstype fuse or fuse.*,
 * from /proc/self/mountinfo); *nvmefs says whether it is of subtype nvmefs.
 * -ENOENT when no FUSE mount is on top there. */
int fusefs_conn_at(const char *path, unsigned *conn, bool *nvmefs);
/* True while /sys/fs/fuse/connections/conn exists (the connection lives). */
bool fusefs_conn_alive(unsigned conn);
/* Abort connection conn (its abort file): every request waiting on it
 * fails, and so does every later one. */
int fusefs_conn_abort(unsigned conn);
/* End connection conn: abort it through its control file while that is
 * there, and unmount each of its mounts with MNT_FORCE | MNT_DETACH
 * (UMOUNT_NOFOLLOW), which aborts it in the kernel without the control
 * file.  *aborted says whether either happened.  The number of mounts
 * detached, or -errno when none was and one could not be. */
int fusefs_conn_end(unsigned conn, bool *aborted);

/* A digest of what must be the same for a restarted daemon to serve the
 * mount the previous run made: the mountpoint, allow_other, file mode,
 * uid and gid, and each namespace file (inode, name, size, LBA size) in
 * order, as the kernel has cached them.  Builds the namespace table from
 * o's controllers; FNV-1a 64 of a canonical text. */
int fusefs_digest(const struct fusefs_opts *o, uint64_t *out);
/* The same digest of o's options (its controllers unused) over the
 * namespace table ns[nr] (in inode order, as fusefs_namespaces gives it):
 * what `nvmefsd --check-adopt` computes without the devices. */
void fusefs_digest_table(const struct fusefs_opts *o, const struct fusefs_ns_desc *ns,
			 unsigned nr, uint64_t *out);

/* Build the namespace table, create the session, mount, and add the channel
 * watcher to the reading reactors' loops and the pass hook to every reactor.
 * Call before the reactors start. */
int fusefs_create(const struct fusefs_opts *o, struct fusefs **out);

/* The namespace table as it was built at start (inode i + 2 is entry i). */
const struct fusefs_ns_desc *fusefs_namespaces(const struct fusefs *fs, unsigned *nr);

/* ---- namespaces that change while the mount is served ----
 * The daemon's thread (one caller at a time; the reactors go on serving).
 * A file that appears or goes is told to the kernel with
 * FUSE_NOTIFY_INVAL_ENTRY on its name in the root, a size that changes with
 * FUSE_NOTIFY_INVAL_INODE (its attributes); a notification the kernel
 * refuses is logged at debug level only (the entry and attribute timeouts,
 * FUSEFS_ATTR_TIMEOUT, bound how long it shows the old view).  Inode numbers
 * never move and a slot is never given to another namespace (fsns.h). */
#define FUSEFS_ATTR_TIMEOUT 10.0/* seconds the kernel keeps entries and attributes */

/* Namespace ni of controller ci becomes the file <ctrl>n<nsid>.  -EEXIST
 * when it is shown already, -EINVAL for an unusable LBA size or no blocks,
 * -EOPNOTSUPP for an LBA size larger than any at start (the memory bounds
 * were sized for those), -ENOSPC when the table is full (FSNS_SPARE
 * additions). */
int fusefs_ns_add(struct fusefs *fs, unsigned ci, const struct nvme_ns_info *ni);
/* The file of namespace nsid of controller ci goes: lookup and readdir no
 * longer show it, every later request on a handle of it fails with EIO;
 * requests already taken finish.  -ENOENT when it is not shown. */
int fusefs_ns_remove(struct fusefs *fs, unsigned ci, uint32_t nsid);
/* The file's size becomes nlba blocks when that is more than it has;
 * -ERANGE (nothing changed: the caller logs) when it is less, -ENOENT when
 * it is not shown. */
int fusefs_ns_resize(struct fusefs *fs, unsigned ci, uint32_t nsid, uint64_t nlba);
/* Controller ci, whose slot was empty at fusefs_create, has been put in
 * place by the caller (ctrls[ci], ctrl_names[ci] and each reactor's qpair
 * written before this call): every namespace of it becomes a file, as
 * fusefs_ns_add.  The number shown, or -EINVAL for a slot out of range or
 * still empty.  Its requests share the reactors' pools with the others, and
 * the bound on one controller's share of a pool (fusefs_opts.pool_bytes)
 * is the one fusefs_create chose from the controllers it had. */
int fusefs_ctrl_add(struct fusefs *fs, unsigned ci);
/* Every file of controller ci goes, as fusefs_ns_remove; the number gone. */
int fusefs_ctrl_detach(struct fusefs *fs, unsigned ci);
/* The files fusefs_ctrl_detach took come back, in their slots, for each
 * namespace the controller still has (with its size now, grown only);
 * handles opened before the detach stay failing.  The number back. */
int fusefs_ctrl_attach(struct fusefs *fs, unsigned ci);
/* The files shown now, in inode order, at most max into out (names point
 * into the table: valid until fusefs_destroy); the number shown. */
unsigned fusefs_ns_list(const struct fusefs *fs, struct fusefs_ns_desc *out, unsigned max);
/* Slots of the table: fusefs_ns_list never shows more. */
unsigned fusefs_ns_capacity(const struct fusefs *fs);

/* Stop taking requests (any thread): each reading reactor stops its watcher
 * soon.  Requests already taken go on to their replies. */
void fusefs_stop(struct fusefs *fs);
/* True once every reader has stopped and no request is in flight (any
 * thread). */
bool fusefs_drained(const struct fusefs *fs);
/* Requests taken and not yet replied to (any thread). */
unsigned fusefs_inflight(const struct fusefs *fs);

/* After adopting, before the reactors read the channel: have the kernel
 * queue again every request the earlier run had read and not answered
 * (FUSE_NOTIFY_RESEND; one this run had read would be resent too).
 * -EINVAL or -ENOSYS from a kernel before 6.9, which cannot.  The fd of
 * the connection, for the fd store: fusefs_fd. */
int fusefs_resend(struct fusefs *fs);
int fusefs_fd(const struct fusefs *fs);

/* Keep the mount (a re-exec of the daemon serves it again): from now on
 * fusefs_unmount and fusefs_destroy leave it mounted and only close this
 * process's fd of the connection.  Call once drained. */
void fusefs_keep_mount(struct fusefs *fs);
/* Unmount (lazily: open files do not keep it) and close the channel; the
 * kernel fails what it had not handed over yet.  Call after fusefs_drained
 * or with the reactors stopped. */
void fusefs_unmount(struct fusefs *fs);
/* Free everything (reactors stopped and joined).  NULL is a no-op. */
void fusefs_destroy(struct fusefs *fs);

/* The transport serving requests now: FUSEFS_TRANSPORT_URING once every
 * FUSE queue's entries are registered, else FUSEFS_TRANSPORT_CLASSIC (any
 * thread). */
enum fusefs_transport fusefs_transport_active(const struct fusefs *fs);
const char *fusefs_transport_name(enum fusefs_transport t); /* "auto", "uring", "classic" */

/* What a request was, for the per-opcode figures. */
enum fusefs_op {
	FUSEFS_OP_READ,
	FUSEFS_OP_WRITE,
	FUSEFS_OP_FLUSH,   /* fsync, fdatasync, flush (close) */
	FUSEFS_OP_PUNCH,   /* fallocate PUNCH_HOLE */
	FUSEFS_OP_ZERO,    /* fallocate ZERO_RANGE */
	FUSEFS_OP_OTHER,   /* everything else the channel delivered: count only */
	FUSEFS_OP_NR
};

/* Why a request waits (see sched.h). */
enum fusefs_wait {
	FUSEFS_WAIT_MEM,   /* for a DMA buffer */
	FUSEFS_WAIT_SLOT,  /* for a free queue slot (tracker) */
	FUSEFS_WAIT_LOCK,  /* for an overlapping write to finish (range lock) */
	FUSEFS_WAIT_NR
};

struct fusefs_op_stats {
	uint64_t count;    /* answered */
	uint64_t bytes;    /* requested bytes of the answered ones */
	uint64_t errors;   /* answered with an errno */
	/* time from taking the request to answering it, in the engine's
	 * buckets: nvme_lat_percentile(lat_ns, 99.0) */
	uint64_t lat_ns[NVME_LAT_BUCKETS];
	uint64_t sum_ns; /* the exact sum of the times lat_ns counts */
};

struct fusefs_stats {
	uint64_t reads, writes, rmw_writes, fsyncs, flushes_sent, fallocs;
	/* writes that carried O_DSYNC/O_SYNC (open flag or RWF_DSYNC) on a
	 * namespace with a volatile write cache; of them, those written with
	 * FUA and those followed by a Flush (larger than dsync_fua_max) */
	uint64_t dsync_writes, fua_writes, dsync_flushes;
	uint64_t errors;      /* requests answered with an errno */
	uint64_t lock_waits;  /* writes that waited for an overlapping write */
	uint64_t resource_waits; /* requests that waited for a buffer or queue slot */

	uint64_t inflight;                   /* requests taken, not answered */
	uint64_t parked[FUSEFS_WAIT_NR];     /* waiting now, by reason */
	uint64_t waits[FUSEFS_WAIT_NR];      /* waits begun since start, by reason */
	uint64_t lock_wait_ns;               /* total time spent waiting for range locks */
	uint64_t bounce_bytes, bounce_peak;  /* write data held outside DMA memory: now, most */
	uint64_t channel_pauses;             /* times a reactor stopped reading (at a bound) */
	uint64_t ring_requests;              /* requests that came over io_uring */
	uint64_t bad_requests;               /* malformed requests, answered EINVAL */
	/* answers the kernel refused (ENOENT over /dev/fuse, a ring entry not
	 * serving that request) while the connection lived: a request
	 * answered twice, or one it never sent; a bug wherever it happens */
	uint64_t dup_answers;
	/* answers given up because this reactor's channel was closed (a stop
	 * that stopped waiting for them) or the connection had ended */
	uint64_t late_answers;
	/* violations the audit build found (always 0 in other builds:
	 * docs/fuse.md, "Audit builds") */
	uint64_t audit_violations;
	/* requests the kernel resent (FUSE_UNIQUE_RESEND in unique) after an
	 * adoption: those the previous run had taken and not answered */
	uint64_t resent_requests;
	/* payload bytes copied in user space (write data into DMA memory,
	 * read data out of it): 0 on the ring's aligned path */
	uint64_t copy_bytes;
	enum fusefs_transport transport;     /* fusefs_transport_active */
	struct fusefs_op_stats op[FUSEFS_OP_NR];
};
/* Summed over reactors (bounce_peak: the largest of one reactor); any
 * thread, approximate while running. */
void fusefs_stats_get(const struct fusefs *fs, struct fusefs_stats *out);

/* One namespace's requests of one kind (read, write, flush, punch, zero),
 * those answered without a device command included (an error found in the
 * request, a flush without a volatile write cache). */
struct fusefs_nsop_stats {
	uint64_t count, bytes, errors;
	uint64_t sum_ns;   /* the exact sum of the times lat_ns counts */
	/* of sum_ns, the time spent waiting in the daemon (for DMA memory, an
	 * overlapping write's range, a submission queue slot); the rest is
	 * service: the device's commands and the copies */
	uint64_t queue_ns;
	uint64_t lat_ns[NVME_LAT_BUCKETS]; /* taking the request to answering it */
};

#define FUSEFS_NSOP_NR FUSEFS_OP_OTHER /* the kinds a namespace counts */

struct fusefs_ns_stats {
	uint64_t inflight; /* requests taken, not answered */
	/* the time each reactor had at least one of its requests in flight,
	 * summed over the reactors (iostat's io_ticks, per reactor) */
	uint64_t busy_ns;
	struct fusefs_nsop_stats op[FUSEFS_NSOP_NR];
};
/* The figures of the file name shows now, summed over the reactors; any
 * thread, approximate while running.  -ENOENT: no such file. */
int fusefs_ns_stats_get(struct fusefs *fs, const char *name, struct fusefs_ns_stats *out);

#endif

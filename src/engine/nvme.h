/* nvme.h - the nvmefs user-space NVMe driver: public contract.
 *
 * Three objects:
 *   nvme_ctrl     one controller behind an nvme_bus: bring-up, admin queue
 *                 (asynchronous, never on the I/O path, reaped by the
 *                 controller's admin thread), identify, namespaces, I/O queue
 *                 creation, shutdown, recovery (abort, reset, removal,
 *                 re-attach).
 *   nvme_reactor  one pinned thread with a libev loop; owns qpairs (one per
 *                 controller) and DMA buffer pools on its CPU's NUMA node:
 *                 one pool mapped into every controller it has a qpair on
 *                 (shared), or one pool per such controller, mapped into
 *                 that controller's bus only (controller isolation, see
 *                 struct nvme_reactor_opts).
 *   nvme_qpair    one I/O SQ+CQ pair, owned by exactly one reactor: no locks.
 *
 * Threading: nvme_qpair_* and nvme_reactor_buf_* are called only on the
 * owning reactor's thread (from its loop: watchers, completion callbacks, or
 * functions passed to nvme_reactor_call).  Completion callbacks run on that
 * thread during reaping; they may submit again.  nvme_ctrl_admin is callable
 * from any thread.  Statistics snapshots are callable from any thread.
 *
 * Doorbells: submission writes the SQE and advances the tail in memory only;
 * the reactor writes each dirty SQ tail doorbell once per loop pass, and each
 * CQ head doorbell once per pass after reaping at most cq_budget CQEs.
 * nvme_qpair_flush_sq() rings at once (for callers outside a reactor loop).
 *
 * Every function returns 0 or a negative errno unless it says otherwise.
 */
#ifndef NVMEFS_NVME_H
#define NVMEFS_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "nvme_spec.h"

struct ev_loop;
struct nvme_ctrl;
struct nvme_qpair;
struct nvme_reactor;

/* ---- controller ---- */

/* The engine uses at most this many namespaces of a controller: the first
 * ones of its active namespace list (or, without the list, NSIDs 1..this). */
#define NVME_MAX_NAMESPACES 1024u

struct nvme_ns_info {
	uint32_t nsid;        /* 1..0xfffffffe, ascending in nvme_ctrl_info.ns at bring-up;
	                         namespaces added later are appended (nvme_ctrl_rescan) */
	uint64_t nlba;        /* capacity in logical blocks; nlba << lba_shift <= INT64_MAX */
	uint32_t lba_size;    /* bytes: 1 << lba_shift, lba_shift 9..16 */
	uint8_t lba_shift;
	bool dealloc_zeroes;  /* DLFEAT: deallocated blocks read as zeroes */
	/* Metadata and end-to-end protection information (docs/engine.md,
	 * "Metadata and protection information"): ms bytes of metadata per
	 * block (0: none), extended (md_ext: after each block's data) or
	 * separate; PI of pi_type (1..3, 0: none) with a guard of pi_guard bits
	 * (16 or 64; 0 without PI) in the first (pi_first) or last bytes of the
	 * metadata.  prinfo: the cdw12 PRINFO bits of every Read and Write (the
	 * controller inserts and strips the PI, and checks the guard, and the
	 * reference tag -- the LBA -- for Types 1 and 2); md_buf: Reads and
	 * Writes carry MPTR, pointing at the queue's metadata buffer (separate
	 * metadata that is more than the PI: written as zeroes, read and
	 * dropped). */
	uint16_t ms;
	uint8_t pi_type;
	uint8_t pi_guard;
	bool pi_first;
	bool md_ext;
	bool md_buf;
	uint32_t prinfo;
	bool failed;          /* changed size or format after a reset, or shrunk: I/O fails with -EIO */
	bool removed;         /* detached from the controller (nvme_ctrl_rescan): I/O fails with -EIO */
};

struct nvme_ctrl_info {
	char model[41], serial[21], firmware[9]; /* printable ASCII, trimmed, NUL-terminated */
	uint16_t vid;
	uint32_t version;      /* VS register */
	uint64_t cap;          /* CAP register */
	uint32_t max_xfer;     /* bytes per command (from MDTS, capped by the engine) */
	uint32_t max_entries;  /* CAP.MQES + 1 */
	uint8_t mdts;
	bool vwc;              /* volatile write cache present: fsync needs Flush */
	uint16_t oncs, oacs;
	uint32_t ctratt;       /* Identify Controller CTRATT (bit 15: extended LBA formats) */
	uint32_t sgls;
	uint32_t nn;
	uint8_t acl;           /* Abort Command Limit, 0-based */
	uint8_t elpe;          /* Error Log Page Entries, 0-based (as reported) */
	uint8_t lpa;           /* Log Page Attributes (bit 1: log 05h supported) */
	uint8_t frmw;          /* Firmware Updates: 3:1 number of slots */
	/* From Identify Controller NVM (CNS 06h), when the controller has it:
	 * max_wz_bytes bytes per Write Zeroes command (WZSL; 0: only the 65536-block
	 * field limits it), dsm_max_ranges ranges per Dataset Management command
	 * (DMRL; 256 when not limited), dsm_max_range_blocks blocks per range
	 * (DMRSL; UINT32_MAX when not limited), dsm_max_blocks blocks per command
	 * (DMSL; 0: not limited). */
	uint64_t max_wz_bytes;
	uint32_t dsm_max_ranges;
	uint32_t dsm_max_range_blocks;
	uint64_t dsm_max_blocks;
	unsigned nr_io_queues; /* granted by Set Features Number of Queues */
	unsigned nr_vectors;   /* MSI-X vectors usable */
	unsigned nr_ns;           /* <= NVME_MAX_NAMESPACES */
	struct nvme_ns_info ns[]; /* active namespaces, nr_ns of them */
};

/* A failed bring-up is tried again after opts.retry_ms, doubling each time
 * up to opts.retry_max_ms (0: this). */
#define NVME_RETRY_MAX_MS 30000u

struct nvme_ctrl_opts {
	const char *name;        /* for messages and file names */
	unsigned io_queues;      /* wanted; granted may be fewer */
	unsigned queue_depth;    /* entries per I/O queue (capped by MQES) */
	unsigned cq_budget;      /* CQEs reaped per queue per pass, < queue_depth */
	unsigned io_timeout_ms;
	unsigned io_retries;     /* resubmissions of a command after a reset or abort (0..10) */
	unsigned retry_ms;       /* first retry of a failed bring-up (0: 1000 ms), doubling */
	unsigned retry_max_ms;   /* ... up to this (0: NVME_RETRY_MAX_MS, 30 s) */
	bool interrupts;         /* wire one MSI-X vector per I/O CQ */
};

/* Bring the controller up: disable (wait RDY=0 within CAP.TO), admin queue,
 * CC, enable (wait RDY=1), Identify controller, Number of Queues, active
 * namespaces and their formats.  Fails with a message naming the controller
 * when it never becomes ready (-ETIMEDOUT), reports CFS (-EIO), or the bus
 * reads all ones (-ENODEV).  On success the ctrl owns the bus (closed by
 * nvme_ctrl_close); on failure the bus stays the caller's.  queue_depth is
 * rounded down to a power of two <= MQES + 1 (and <= 4096); cq_budget 0
 * means min(depth / 4, 64) and is clamped to depth / 2; io_timeout_ms 0
 * means 30 s.  What the device reports is checked, not trusted (see "What a
 * device may report" in docs/engine.md): a BAR0 that cannot hold the
 * doorbells of the admin queue and one I/O queue at CAP.DSTRD's stride is
 * refused (-EINVAL); io_queues is capped at 256 and at what BAR0 holds. */
int nvme_ctrl_open(struct nvme_bus *bus, const struct nvme_ctrl_opts *o, struct nvme_ctrl **out);
const struct nvme_ctrl_info *nvme_ctrl_get_info(const struct nvme_ctrl *c);
const char *nvme_ctrl_name(const struct nvme_ctrl *c);
struct nvme_bus *nvme_ctrl_bus(struct nvme_ctrl *c);

/* Synchronous admin command: nvme_ctrl_admin_async, then the calling thread
 * polls the admin CQ until its completion.  buf/len: data in or out (copied
 * through a DMA bounce buffer).  cqe_out may be NULL.  Returns 0, -EIO etc.
 * mapped from the status (see nvme_status_errno), -ETIMEDOUT, -EAGAIN while a
 * reset rebuilds the admin queue, -ENODEV when removed. */
int nvme_ctrl_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len,
		    struct nvme_cqe *cqe_out);

/* ---- recovery (recovery.c; its states and edges are spelled out in
 * recovery.h) ----
 * The engine recovers on its own: a command past io_timeout_ms gets an Abort
 * (sent asynchronously from the reactor's timeout scan); if the Abort fails
 * or the command is still outstanding a grace period later, or the
 * controller reports CSTS.CFS, loses CSTS.RDY, or an admin command times
 * out, the controller is reset by its recovery thread: submissions are held,
 * the controller disabled (a function level reset when it does not disable
 * or keeps CFS; bus mastering off and every DMA mapping removed when even
 * that fails), re-enabled, every queue re-created with the same qid and
 * vector, and every command that was in flight resubmitted (up to io_retries
 * times, then -EIO).  A bring-up that fails leaves the controller FAILED
 * (its I/O fails at once) and is tried again after a back-off.  A BAR
 * reading all ones is a removal. */

/* Controller state, readable from any thread. */
enum nvme_ctrl_state {
	NVME_CTRL_LIVE,      /* serving I/O */
	NVME_CTRL_RESETTING, /* recovery in progress: submissions are accepted into a
	                        tracker and held (not on the device) until the queue is
	                        back, failed with -EIO if the reset outlasts io_timeout_ms;
	                        -EAGAIN only when no tracker is free, as always */
	NVME_CTRL_REMOVED,   /* device gone or released: every submission fails at once
	                        with -ENODEV */
	NVME_CTRL_FAILED,    /* bring-up failed: like REMOVED for I/O (-ENODEV), the
	                        device still attached, disabled or cut off; retried
	                        after a back-off (opts.retry_ms doubling up to
	                        opts.retry_max_ms) */
};
enum nvme_ctrl_state nvme_ctrl_state(const struct nvme_ctrl *c);
/* "live", "resetting", "removed", "failed" */
const char *nvme_ctrl_state_name(enum nvme_ctrl_state s);

/* Recovery counters, per controller (any thread; relaxed reads). */
struct nvme_ctrl_rstats {
	uint64_t timeouts;             /* commands that exceeded io_timeout_ms */
	uint64_t aborts_sent, aborts_ok;
	uint64_t resets_started, resets_ok, resets_failed;
	uint64_t reset_last_ns, reset_max_ns; /* duration of the last / longest reset */
	uint64_t resubmitted;          /* commands sent again after a reset or abort */
	uint64_t failed_after_retries; /* commands failed with EIO after io_retries */
	uint64_t cfs_events;           /* CSTS.CFS seen */
	uint64_t removals;             /* removal requests or dead BAR seen */
	uint64_t isolations;           /* devices cut off (bus master off, unmapped): no disable */
	uint64_t cancelled;            /* commands ended by a stop (nvme_ctrl_cancel) */
};
void nvme_ctrl_rstats_get(const struct nvme_ctrl *c, struct nvme_ctrl_rstats *out);

/* Event callback: called (from whatever thread noticed: a reactor, the
 * controller's recovery thread or the caller) once per state change.  Must
 * not block, must not call back into the engine's recovery (post to a loop).
 * Once nvme_ctrl_set_event_cb returns, the previous callback is not running
 * and will not be called again. */
typedef void (*nvme_ctrl_event_cb)(void *arg, struct nvme_ctrl *c, enum nvme_ctrl_state s);
void nvme_ctrl_set_event_cb(struct nvme_ctrl *c, nvme_ctrl_event_cb cb, void *arg);

/* Removal (any thread except a reactor's): state REMOVED first (new
 * submissions fail with -ENODEV), disable the controller when it still
 * answers, turn its bus mastering off and unmap every DMA mapping of this
 * controller on its bus (rings, the reactor pools' mappings, admin memory),
 * and only then fail everything in flight with -EIO on the owning reactors;
 * unwire its vectors and hand the bus back in *bus_out: the controller no
 * longer references it.  The nvme_ctrl, its qpairs and namespace list stay.
 * Blocks until done (bounded: CAP.TO, a function reset, the reactors'
 * acknowledgements).  -EBUSY (bus kept) when the mappings could not be
 * removed.  Idempotent: on a controller without a bus *bus_out = NULL. */
int nvme_ctrl_remove(struct nvme_ctrl *c, const char *why, struct nvme_bus **bus_out);

/* nvme_ctrl_remove for a controller taken away on purpose (nvmefsctl
 * detach): a LIVE one that still answers gets CC.SHN normal first and is
 * waited for until CSTS.SHST says complete, at most min(RTD3E, 10 s) (then
 * logged, and disabled anyway); then as a removal: what is still in
 * flight when it is disabled fails with -EIO. */
#define NVME_DETACH_SHN_MAX_MS 10000u
int nvme_ctrl_detach(struct nvme_ctrl *c, const char *why, struct nvme_bus **bus_out);

/* Re-attach a controller that nvme_ctrl_remove released (a FAILED one must be
 * removed first: -EBUSY while it holds a bus) on a freshly opened bus:
 * bring-up, same namespaces required (same nsid set, sizes and formats: else
 * -ESTALE and it stays removed), map the pools again, re-create every qpair
 * with its qid and vector, state LIVE.  Any thread except a reactor's.  On
 * success the ctrl owns the bus; on failure the caller keeps it. */
int nvme_ctrl_attach(struct nvme_ctrl *c, struct nvme_bus *bus);

/* Start a reset now (any thread); returns at once; 0, -EBUSY if one runs
 * already, -ENODEV when the controller is removed or failed, -ESHUTDOWN
 * once it is stopping. */
int nvme_ctrl_reset_async(struct nvme_ctrl *c, const char *why);

/* ---- stopping, bounded ----
 * Cancel: end every command of the controller now, for a stop whose drain
 * ran out: hold submissions, CC.SHN abrupt (so that a device that still
 * answers saves its cache), disable, isolation when it does not, then every
 * command fails with -EIO (counted in rstats.cancelled);
 * the controller stays FAILED and is not retried.  Runs on the recovery
 * thread; returns at once.  nvme_ctrl_cancel_wait waits until it is done
 * (0 or -ETIMEDOUT).  Bounded by NVME_CANCEL_MAX_MS: no function reset (a
 * device that does not disable is cut off), each reactor waited for at most
 * 2 s, and a reset step running when it is asked has its waits on the
 * device cut 2 s later (at least half a second each) -- except a function
 * reset that step already started, whose wait is the kernel's. */
#define NVME_CANCEL_MAX_MS 15000u
void nvme_ctrl_cancel_async(struct nvme_ctrl *c);
int nvme_ctrl_cancel_wait(struct nvme_ctrl *c, uint32_t timeout_ms);
/* Shutdown: no more resets; a controller that still answers gets CC.SHN
 * normal (its volatile cache is saved) and is disabled; its queues are gone
 * from the device afterwards (nvme_qpair_destroy then sends no admin
 * command).  Call with the reactors stopped.  Asynchronous so that every
 * controller of a daemon shuts down at once; bounded by
 * NVME_SHUTDOWN_MAX_MS whatever CAP.TO and RTD3E say (the shutdown waits
 * at most 30 s, the disable 2.5 s, then the device is cut off; no function
 * reset), once the step before it on the recovery thread has ended (see
 * the cancel).  nvme_ctrl_close shuts down first if this was not called. */
#define NVME_SHUTDOWN_MAX_MS 40000u
void nvme_ctrl_shutdown_async(struct nvme_ctrl *c);
/* 0, -ETIMEDOUT, or -EBUSY when the device could be neither disabled nor
 * cut off: commands left on it keep their memory, so the caller must not
 * free the reactors' pools while the process lives on. */
int nvme_ctrl_shutdown_wait(struct nvme_ctrl *c, uint32_t timeout_ms);

/* Asynchronous admin command: any thread, no lock held across the wait.  cb
 * runs on an engine thread (the controller's admin thread, or a thread
 * waiting in nvme_ctrl_admin) and must not block; it may submit again.  buf:
 * data in/out, copied through a DMA bounce buffer owned by the engine for the
 * command's life (never reused before its CQE or a controller disable); buf
 * itself must stay valid until cb.  cqe status is the 15-bit status (phase
 * stripped).  err: 0, a mapped status, -ETIMEDOUT (admin timeout: a reset
 * follows), -EIO (reset), -ENODEV (removed).  Returns 0 (cb will run exactly
 * once), -EAGAIN (admin queue full or being rebuilt), -ENODEV, -EINVAL. */
typedef void (*nvme_admin_cb)(void *arg, int err, const struct nvme_cqe *cqe);
int nvme_ctrl_admin_async(struct nvme_ctrl *c, const struct nvme_sqe *cmd, void *buf, size_t len,
			  nvme_admin_cb cb, void *arg);

/* A reset now, waited for: nvme_ctrl_reset_async and wait until the
 * controller is LIVE again (0) or FAILED/REMOVED (-EIO/-ENODEV).  Any thread
 * but a reactor owning one of its qpairs. */
int nvme_ctrl_reset(struct nvme_ctrl *c);

/* Shut down (as nvme_ctrl_shutdown_async + wait, unless done already),
 * stop the recovery thread, free all. */
void nvme_ctrl_close(struct nvme_ctrl *c);

/* ---- log pages (logpage.c) ----
 * Read with nvme_ctrl_get_log_async, decoded from the bytes the device
 * wrote with the nvme_*_decode functions: every length and count there is
 * the caller's or bounded, never the device's; every string is made
 * printable.  The 128-bit counters of the SMART log are saturated to
 * UINT64_MAX (2^64 units of 512000 bytes is beyond any device), and a
 * saturated one says so in nvme_health.saturated. */

/* Error log entries read at most: ELPE can say 256. */
#define NVME_ERRLOG_MAX 256u
/* Longest log page read (the error log at NVME_ERRLOG_MAX entries). */
#define NVME_LOG_MAX_BYTES (NVME_ERRLOG_MAX * 64u)

/* Get Log Page lid for nsid (NVME_NSID_ALL: the controller's) into buf:
 * len bytes, a multiple of 4 from 4 to NVME_LOG_MAX_BYTES (else -EINVAL),
 * as NUMDL/NUMDU; through nvme_ctrl_admin_async (same callback rules, buf
 * valid until cb). */
int nvme_ctrl_get_log_async(struct nvme_ctrl *c, uint8_t lid, uint32_t nsid, void *buf,
			    size_t len, nvme_admin_cb cb, void *arg);

/* Bytes to read of the error log of a controller with info in: ELPE + 1
 * entries, at most NVME_ERRLOG_MAX. */
size_t nvme_errlog_bytes(const struct nvme_ctrl_info *in);

/* SMART / Health Information (log 02h) in host order. */
struct nvme_health {
	uint8_t critical_warning;
	uint16_t temperature;     /* Kelvin (composite); 0: not reported */
	uint8_t avail_spare, spare_thresh, percent_used; /* percent as reported (may exceed 100) */
	uint8_t endu_grp_crit_warn;
	uint64_t data_units_read, data_units_written; /* units of 1000 x 512 bytes */
	uint64_t host_reads, host_writes;
	uint64_t ctrl_busy_time;  /* minutes */
	uint64_t power_cycles, power_on_hours, unsafe_shutdowns;
	uint64_t media_errors, num_err_log_entries;
	uint32_t warning_temp_time, critical_comp_time; /* minutes */
	uint16_t temp_sensor[8];  /* Kelvin; 0: no such sensor */
	bool saturated;           /* a 128-bit counter exceeded UINT64_MAX */
};
/* len: bytes the device wrote; -EPROTO when shorter than 512. */
int nvme_health_decode(const void *buf, size_t len, struct nvme_health *out);

/* One Error Information entry in host order. */
struct nvme_errlog_entry {
	uint64_t error_count;     /* unique, 0 in an unused entry */
	uint16_t sqid, cmdid;
	uint16_t status;          /* the 15-bit status (phase bit removed) */
	uint16_t parm_error_location;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs, trtype;
	uint64_t cs;
	uint16_t trtype_spec_info;
};
/* The used entries (error_count != 0) of the len bytes in buf, at most max
 * (and at most len / 64) into out, in the device's order; *nr their number. */
int nvme_errlog_decode(const void *buf, size_t len, struct nvme_errlog_entry *out, unsigned max,
		       unsigned *nr);

/* Firmware Slot Information (log 03h). */
struct nvme_fw_slots {
	uint8_t active;    /* slot running now, 1..7 (0: the device said 0) */
	uint8_t next;      /* slot activated at the next reset, 0: none */
	char frs[7][9];    /* revision of slots 1..7: printable, trimmed, "" empty */
};
/* -EPROTO when len < 64. */
int nvme_fw_slots_decode(const void *buf, size_t len, struct nvme_fw_slots *out);

/* Commands Supported and Effects (log 05h, NVME_CMD_EFFECTS_LOG_BYTES): one
 * entry per admin and I/O opcode (bits NVME_CSE_*), reserved bits cleared. */
struct nvme_cmd_effects {
	uint32_t acs[256];  /* admin opcode n */
	uint32_t iocs[256]; /* I/O opcode n */
};
/* -EPROTO when len < NVME_CMD_EFFECTS_LOG_BYTES. */
int nvme_cmd_effects_decode(const void *buf, size_t len, struct nvme_cmd_effects *out);

/* ---- asynchronous events and namespace changes (aen.c) ----
 * Whenever the controller becomes LIVE (bring-up, every reset, attach) the
 * engine enables events with Set Features Asynchronous Event Configuration
 * (every SMART critical warning bit, Namespace Attribute and Firmware
 * Activation notices) and keeps min(AERL + 1, NVME_AER_MAX) Asynchronous
 * Event Request commands outstanding on the admin queue.  They are not
 * commands in the I/O sense: no timeout applies to them, and a reset ends
 * them quietly (no callback).  On a completion the engine, on the
 * controller's admin thread: reads the log page the event names (which
 * clears it, so that it can be reported again: Error 01h, SMART 02h,
 * Changed Namespace List 04h, Firmware Slot 03h), acts on it (a namespace
 * notice re-identifies the namespaces, as nvme_ctrl_rescan), re-arms that
 * request, and then calls the event callback.  An AER completing with an
 * error status (Asynchronous Event Request Limit Exceeded, Invalid Opcode:
 * a device without events) is counted and not re-armed (until the next
 * LIVE transition posts a full set again).  An event that completed before
 * a reset is processed once the reset is over.  The SMART bits enabled are
 * 4:0 (not 5, which devices before 1.4 may refuse); each notice only when
 * Identify Controller OAES has it. */
#define NVME_AER_MAX 4u

enum nvme_aen_kind {
	NVME_AEN_ERROR,       /* type 0: error log read (nr_errors: its used entries) */
	NVME_AEN_SMART,       /* type 1: SMART/health; health holds the log read */
	NVME_AEN_NS_CHANGED,  /* notice 00h: namespaces re-identified, see changes */
	NVME_AEN_FW_ACTIVATE, /* notice 01h: firmware activation starting */
	NVME_AEN_OTHER,       /* anything else (type, info and lid say what) */
};

enum nvme_ns_change_kind {
	NVME_NS_ADDED,        /* a new active namespace: appended to the info's ns[] */
	NVME_NS_REMOVED,      /* gone: its entry stays, marked removed; its I/O fails with -EIO */
	NVME_NS_GROWN,        /* capacity grew: the entry's nlba is the new one, I/O may use it */
	NVME_NS_SHRUNK,       /* capacity shrank: refused, the entry keeps the old nlba and is
	                         marked failed (its I/O fails with -EIO: blocks past the new end
	                         are gone) */
	NVME_NS_REFORMATTED,  /* LBA size changed: marked failed as after a reset */
};

struct nvme_ns_change {
	enum nvme_ns_change_kind kind;
	struct nvme_ns_info ns; /* the entry after the change */
	uint64_t old_nlba;      /* the capacity before (0 for ADDED) */
};

struct nvme_aen {
	enum nvme_aen_kind kind;
	uint8_t type, info, lid;     /* the completion's DW0 fields */
	bool health_ok;              /* SMART: health was read and decoded */
	struct nvme_health health;
	unsigned nr_errors;          /* ERROR: used entries of the error log */
	unsigned nr_changes;         /* NS_CHANGED */
	const struct nvme_ns_change *changes; /* valid during the callback only */
};

/* Called on the controller's admin thread, after the log page was read and
 * the request re-armed; must not block, may post elsewhere (copy what it
 * keeps); it runs under the lock resets and rescans take, so it must not
 * call nvme_ctrl_rescan, nvme_ctrl_reset or nvme_ctrl_remove itself.  Once
 * nvme_ctrl_set_aen_cb returns, the previous callback is not running and
 * will not be called again. */
typedef void (*nvme_aen_cb)(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev);
void nvme_ctrl_set_aen_cb(struct nvme_ctrl *c, nvme_aen_cb cb, void *arg);

/* Event counters (any thread, relaxed reads). */
struct nvme_ctrl_aen_stats {
	uint64_t aers_armed;        /* requests outstanding now */
	uint64_t events[NVME_AEN_OTHER + 1];
	uint64_t aer_errors;        /* requests completed with an error status: not re-armed */
	uint64_t ns_changes;        /* nvme_ns_change entries reported */
	uint8_t critical_warning;   /* of the last SMART log an event read */
};
void nvme_ctrl_aen_stats_get(const struct nvme_ctrl *c, struct nvme_ctrl_aen_stats *out);

/* Re-identify the active namespaces now (any thread but a reactor's;
 * blocks for admin commands, and while a reset, removal or event is
 * processed) and apply the changes as an event would; changes are copied
 * into out (at most max; *nr the number, which may exceed max; out may be
 * NULL with max 0).  -EAGAIN while resetting, -ENODEV removed or failed, or
 * an admin command's error (changes found before it are applied and
 * reported).  The info returned by nvme_ctrl_get_info stays at the same
 * address for the controller's life: entries are appended (nr_ns is
 * published after the entry is written) and updated in place (nlba,
 * failed, removed: atomic stores; read them with atomic loads), never
 * moved, so a reader on any thread may keep pointers into ns[].  The
 * reactors' cached namespace is emptied by a call posted to each before
 * this returns (or the callback runs): I/O submitted from a call posted
 * after that sees the change (a grown range served, a removed namespace
 * -EIO). */
int nvme_ctrl_rescan(struct nvme_ctrl *c, struct nvme_ns_change *out, unsigned max, unsigned *nr);

/* ---- reactor ---- */

enum nvme_poll_mode { NVME_MODE_POLL, NVME_MODE_INTERRUPT, NVME_MODE_HYBRID };

struct nvme_reactor_opts {
	unsigned id;
	int cpu;                /* pin to this CPU; -1: no pinning */
	bool numa;              /* allocate on the CPU's NUMA node */
	enum nvme_poll_mode mode;
	size_t buf_pool_bytes;  /* DMA buffer pool size (0: a default); with
	                           dma_isolation, of each controller's pool */
	/* Controller isolation: one pool per controller the reactor has a qpair
	 * on (made by the first such qpair), mapped into that controller's bus
	 * only, so that a device can reach neither another controller's data
	 * nor its PRP lists.  false (shared): one pool, mapped into every such
	 * controller's bus.  With one controller the two are the same. */
	bool dma_isolation;
};

int nvme_reactor_create(const struct nvme_reactor_opts *o, struct nvme_reactor **out);

/* Create I/O queue pair qid (1-based, < granted + 1) on controller c, owned by
 * reactor r: rings and trackers on r's NUMA node, r's DMA pool for c (the
 * shared one, or c's own under dma_isolation, made here) mapped for c's
 * bus, MSI-X vector qid wired to an eventfd in r's loop when interrupts
 * are on and r runs in interrupt mode (poll and hybrid never sleep with a
 * command in flight).
 * Call before nvme_reactor_start, or, once r runs, on r's own thread (a
 * function passed to nvme_reactor_call): everything r's loop owns is then
 * touched by that loop's thread, and r waits meanwhile for the two admin
 * commands that create the queues (and for its pool for c to be made,
 * under dma_isolation).  -EAGAIN when the controller is not live. */
int nvme_qpair_create(struct nvme_ctrl *c, struct nvme_reactor *r, uint16_t qid,
		      struct nvme_qpair **out);
/* Delete the queues on the device and free (reactor stopped or on its
 * thread).  Waits for a reset, removal or attach of its controller in
 * progress to end: call it after the reactor stopped (a reset waits for the
 * reactor's answer; on the reactor's own thread that wait runs out first).
 * Commands still on a device that could not delete the queue are left
 * outstanding with the qpair's memory rather than freed under the device. */
void nvme_qpair_destroy(struct nvme_qpair *qp);

/* The reactor's loop, for adding watchers (e.g. the FUSE session fd) before
 * start or from the reactor thread (with a wait fd: see
 * nvme_reactor_wait_fd). */
struct ev_loop *nvme_reactor_loop(struct nvme_reactor *r);
unsigned nvme_reactor_id(const struct nvme_reactor *r);
int nvme_reactor_cpu(const struct nvme_reactor *r);
int nvme_reactor_node(const struct nvme_reactor *r);
enum nvme_poll_mode nvme_reactor_mode(const struct nvme_reactor *r);

/* Called at the start of every loop pass on the reactor thread (before
 * reaping); the FUSE front end and nvmefs-perf use it to submit work. */
void nvme_reactor_set_pass_hook(struct nvme_reactor *r, void (*fn)(void *arg), void *arg);
/* Called at the end of every pass, before the NVMe doorbells are rung and
 * the loop may block: the FUSE front end submits the answers of the pass to
 * its io_uring here, in one system call. */
void nvme_reactor_set_flush_hook(struct nvme_reactor *r, void (*fn)(void *arg), void *arg);
/* Sleep in a wait of the reactor's own that holds fd with EPOLLEXCLUSIVE:
 * of several reactors waiting on the same file, the kernel wakes one per
 * event (for /dev/fuse: one reactor per request, as it wakes one of the
 * threads blocked in read(2) on it), where libev's epoll would wake all.
 * fn(arg) runs in each pass in which fd polled readable, after the reaping
 * (a polling pass looks at fd with the same one epoll_wait).  The first
 * call makes the wait, for good: from then on the thread sleeps there and
 * runs libev's loop only when the reactor's timer is due, so the loop must
 * hold no watcher but the reactor's own (no ev_io, no timer: they would
 * not wake it).  Before the reactor starts or on its thread; fd stays the
 * caller's.  -EBUSY: a wait fd is set; else epoll's error (EINVAL for a
 * kernel without EPOLLEXCLUSIVE), and the loop waits as before. */
int nvme_reactor_wait_fd(struct nvme_reactor *r, int fd, void (*fn)(void *arg), void *arg);
/* Take the wait fd out of the wait (fn is not called any more; the fd may
 * be closed or replaced after): reactor thread, or while it does not run
 * (before its start, after its join). */
void nvme_reactor_wait_fd_off(struct nvme_reactor *r);
/* In fn: this pass follows a sleep in the own wait (nothing was in flight
 * and the wait took longer than an event found at once would: 20 us), as
 * opposed to a polling pass's look or a wait that found work waiting: the
 * event that woke it is most likely alone. */
bool nvme_reactor_woke(const struct nvme_reactor *r);
/* On the reactor thread: the pass did useful work (a hook took requests)
 * and counts as busy time; once per pass is enough.  Reaping a completion
 * or running a call counts without it. */
void nvme_reactor_note_work(struct nvme_reactor *r);
/* On the reactor thread: the time (CLOCK_MONOTONIC ns) the current pass
 * began, read once per pass and shared by everything the pass does; outside
 * a pass, the clock read now. */
uint64_t nvme_reactor_clock(struct nvme_reactor *r);

/* Start the pinned thread running the loop.  nvme_reactor_run() runs the loop
 * on the calling thread instead (pinning it) until nvme_reactor_stop. */
int nvme_reactor_start(struct nvme_reactor *r);
int nvme_reactor_run(struct nvme_reactor *r);

/* Run fn(arg) on the reactor thread soon.  Any thread; lock-free MPSC queue
 * plus an eventfd wake-up (one write until the reactor has woken).
 * -ENOMEM, or -ESHUTDOWN once the reactor's loop has ended: calls posted
 * before that still run as the thread exits, and
 * -ESHUTDOWN is returned only after they have.  (Recovery then runs its
 * step on its own thread: completions that step ends, -EIO or -ECANCELED,
 * call back on that thread, since the reactor's is gone.) */
int nvme_reactor_call(struct nvme_reactor *r, void (*fn)(void *arg), void *arg);

/* Ask the loop to end once nothing is in flight (commands quarantined on a
 * device that could not be cut off do not count: they never complete);
 * nvme_reactor_join waits for the thread.  nvme_reactor_destroy frees
 * (after join). */
void nvme_reactor_stop(struct nvme_reactor *r);
void nvme_reactor_join(struct nvme_reactor *r);
/* The same, waiting at most timeout_ms (0: for ever): -ETIMEDOUT and the
 * thread still runs. */
int nvme_reactor_join_timeout(struct nvme_reactor *r, unsigned timeout_ms);
void nvme_reactor_destroy(struct nvme_reactor *r);

/* DMA buffers from the reactor's pool (reactor thread only).  Addresses are
 * 4 KiB aligned; a buffer takes a block of a power-of-two number of 4 KiB
 * pages, nvme_reactor_buf_size(len) bytes of the pool (any thread).  NULL
 * when the pool has no block that large free.  Under dma_isolation the
 * reactor has a pool per controller: nvme_reactor_buf_alloc gives one only
 * while it has a single pool (one controller: the modes are the same), else
 * NULL; take a buffer for a qpair with nvme_qpair_buf_alloc. */
void *nvme_reactor_buf_alloc(struct nvme_reactor *r, size_t len);
/* buf from nvme_reactor_buf_alloc or nvme_qpair_buf_alloc of a qpair of r */
void nvme_reactor_buf_free(struct nvme_reactor *r, void *buf, size_t len);
size_t nvme_reactor_buf_size(size_t len);
/* Whether every qpair of r can use a buffer of nvme_reactor_buf_alloc: r
 * has one pool (shared, or dma_isolation with one controller). */
bool nvme_reactor_buf_common(const struct nvme_reactor *r);
/* A DMA buffer qp's device can reach: from the pool mapped into its
 * controller's bus (the shared pool, or its controller's).  Owning reactor
 * thread only (or before it starts).  NULL when that pool has no block that
 * large free. */
void *nvme_qpair_buf_alloc(struct nvme_qpair *qp, size_t len);
void nvme_qpair_buf_free(struct nvme_qpair *qp, void *buf, size_t len);

/* ---- I/O on a qpair (owning reactor thread only) ---- */

/* err: 0 or a negative errno (nvme_status_errno, or -EIO from recovery);
 * status: the NVMe status ((dnr<<14)|(sct<<8)|sc, 0 on success;
 * NVME_STATUS_TIMEOUT for a command that kept timing out until its retries
 * were used up, Command Aborted due to SQ Deletion for one failed by a failed
 * reset or a removal). */
#define NVME_STATUS_TIMEOUT 0xffff
typedef void (*nvme_io_cb)(void *arg, int err, uint16_t status);

/* buf must come from nvme_qpair_buf_alloc of qp (or nvme_reactor_buf_alloc
 * of the owning reactor while nvme_reactor_buf_common): else -EINVAL.  len in
 * bytes, a multiple of the namespace's LBA size; transfers larger than
 * max_xfer are split into several commands and complete once.  -EAGAIN: no
 * tracker or SQ slot free now (retry from a later pass), -EINVAL: bad range,
 * -ENODEV: the controller is removed or failed, -EIO: the namespace changed
 * across a reset.  While the controller resets, submissions are accepted and
 * held (see enum nvme_ctrl_state).  A command that times out is aborted and,
 * failing that, the controller reset and the command sent again (io_retries
 * times); its callback runs only once the device can no longer touch buf:
 * success, its real status, or -EIO when the retries are used up or the
 * controller failed or vanished. */
int nvme_qpair_read(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, void *buf, size_t len,
		    nvme_io_cb cb, void *arg);
int nvme_qpair_write(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, const void *buf,
		     size_t len, bool fua, nvme_io_cb cb, void *arg);
int nvme_qpair_flush(struct nvme_qpair *qp, uint32_t nsid, nvme_io_cb cb, void *arg);
/* Split at max_wz_bytes (WZSL) and 65536 blocks.  deac: also deallocate
 * (cdw12 DEAC), so a thin device can free the blocks. */
int nvme_qpair_write_zeroes(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, uint64_t nlb,
			    bool deac, nvme_io_cb cb, void *arg);
int nvme_qpair_deallocate(struct nvme_qpair *qp, uint32_t nsid, uint64_t slba, uint64_t nlb,
			  nvme_io_cb cb, void *arg);

/* Ring this SQ's tail doorbell now if it has unsubmitted entries and the
 * queue runs (a held or dead queue is not rung): whether it was rung. */
bool nvme_qpair_flush_sq(struct nvme_qpair *qp);
/* Reap at most budget CQEs (0, or more than the configured budget: the
 * configured budget, which the tracker count is sized for), ring the CQ head
 * doorbell once; returns the number reaped.  The reactor calls this; tests
 * and nvmefs-perf may too. */
unsigned nvme_qpair_reap(struct nvme_qpair *qp, unsigned budget);
unsigned nvme_qpair_inflight(const struct nvme_qpair *qp);
uint16_t nvme_qpair_id(const struct nvme_qpair *qp);
/* The MSI-X vector wired to this qpair's CQ, -1 when it is polled. */
int nvme_qpair_vector(const struct nvme_qpair *qp);
struct nvme_ctrl *nvme_qpair_ctrl(struct nvme_qpair *qp);

/* NVMe status -> errno: media and data errors -EIO, LBA out of range and
 * capacity exceeded -ENOSPC, invalid field/opcode/ns
 * -EINVAL, access denied -EACCES, abort -ECANCELED, timeout -ETIMEDOUT,
 * anything else -EIO. */
int nvme_status_errno(uint16_t status);
const char *nvme_status_str(uint16_t status);

/* ---- statistics ---- */

/* Latency histogram: log-linear buckets (NVME_LAT_SUB per power of two) of
 * nanoseconds. */
#define NVME_LAT_SUB_BITS 3
#define NVME_LAT_BUCKETS (64 << NVME_LAT_SUB_BITS)
#define NVME_CPP_BUCKETS 17 /* completions per pass: 0..15, >=16 */

enum nvme_err_class {
	NVME_ERRC_GENERIC,   /* generic command status other than success */
	NVME_ERRC_CMD,       /* command specific */
	NVME_ERRC_MEDIA,     /* media and data integrity */
	NVME_ERRC_PATH,
	NVME_ERRC_OTHER,     /* vendor specific and anything else */
	NVME_ERRC_TIMEOUT,
	NVME_ERRC_PROTECTION, /* end-to-end protection information check failed: guard,
	                         application tag or reference tag (media 82h-84h): data
	                         the device refused to store or return */
	NVME_ERRC_NR
};

struct nvme_qpair_stats {
	uint64_t submitted, completed;
	uint64_t errors[NVME_ERRC_NR];
	uint64_t bogus_cqes;      /* CID out of range or not in flight: dropped */
	uint64_t reap_passes, budget_exhausted;
	uint64_t cpl_per_pass[NVME_CPP_BUCKETS];
	uint64_t sq_doorbells, cq_doorbells;
	uint64_t interrupts, idle_polls;
	uint64_t bytes_read, bytes_written;
	/* recovery */
	uint64_t timeouts, aborts_sent, aborts_ok, resubmitted, failed_after_retries;
	uint64_t lat_ns[NVME_LAT_BUCKETS];
	uint64_t lat_sum_ns; /* the exact sum of the latencies lat_ns counts */
};

struct nvme_reactor_stats {
	uint64_t passes, sleeps, wakeups, calls;
	/* Load, as spdk_top counts it: the time of passes that did work (reaped
	 * a completion, ran a call, took a request) is busy; passes that found
	 * nothing and sleeping are idle.  The clock is read once per pass (and
	 * once more before sleeping), so the loop's own step from one polling
	 * pass to the next counts with the pass before it.  busy_ns / (busy_ns
	 * + idle_ns) is the load in every mode: a polling reactor with nothing
	 * to do is idle, not 100% busy. */
	uint64_t busy_ns, idle_ns;
	uint64_t busy_passes; /* passes that did work */
};

/* Consistent-enough copies without locking the I/O path. */
void nvme_qpair_stats_get(const struct nvme_qpair *qp, struct nvme_qpair_stats *out);
void nvme_reactor_stats_get(const struct nvme_reactor *r, struct nvme_reactor_stats *out);
/* Percentile p (0..100) in ns from a histogram; 0 if empty. */
uint64_t nvme_lat_percentile(const uint64_t *hist, double p);
/* Bucket index for a latency in ns, and a bucket's upper bound in ns. */
unsigned nvme_lat_bucket(uint64_t ns);
uint64_t nvme_lat_bucket_ns(unsigned bucket);

#endif

/* sim.h - the built-in software NVMe controller.
 *
 * A device model, not a mock: it speaks NVMe over a struct nvme_bus exactly
 * as a PCIe controller does.  BAR0 registers through bus->ops, doorbells as
 * stores into bus->bar0 (+ NVME_REG_DBS) followed by bus->db_notify, DMA only
 * through regions registered with ops->dma_map (IOVAs are assigned by the sim
 * from 0x100000000 up and never equal the virtual address), MSI-X through the
 * eventfds given to ops->irq_set.  An IOVA outside every mapping completes the
 * command with Data Transfer Error (sct 0, sc 04h) and counts dma_errors.
 *
 * Execution modes:
 *   inline   (threaded = false) db_notify executes the newly submitted
 *            commands on the caller's thread, posts their completions and
 *            signals the CQ's vector before returning.  No malloc and no
 *            syscalls per command for null/RAM namespaces (the eventfd
 *            write for an interrupt-enabled CQ excepted), no lock for a
 *            null namespace.  An I/O queue pair whose CQ serves its SQ
 *            alone (SQ n on CQ n, as the engine creates them) runs beside
 *            the other such queues: their copies proceed in parallel, as a
 *            device's queues do.  Within a queue one thread at a time
 *            fetches and executes (besides the copy thread, below): a
 *            doorbell rung while another
 *            thread executes that queue is run by that thread before it
 *            returns, so its completions may be posted shortly after
 *            db_notify returns.  The admin queue, queues that share a CQ,
 *            and every queue while completions are deferred (a fault) run
 *            one thread at a time for the whole controller, likewise.
 *            Register writes, resets and sim_poll wait until nothing
 *            executes (a yield loop).  A RAM or FILE namespace has a spin
 *            lock of its own: a command of one queue waits for an
 *            overlapping command of another when either writes, so each
 *            command is atomic to the others.
 *            With opts.offload, a Write to a RAM or FILE
 *            namespace moving at least that many bytes, fetched with
 *            another command behind it in the SQ, is executed on the
 *            controller's copy thread (one per controller) while the
 *            ringing thread goes on with the next, as a device's DMA
 *            engine moves data while its front end fetches: a stream of
 *            large commands from one thread is copied on two CPUs.  A
 *            command alone runs where it was fetched (a hand-over and a
 *            wake-up would only add to its latency).  One command waits
 *            for the copy thread at a time; one it has not started when
 *            the ringing thread has executed the rest of its pass is
 *            taken back and executed there (no CPU was free to run the
 *            copy thread).  Its
 *            completion is posted by the copy thread, or by the thread
 *            executing its queue at that moment, and signals the CQ's
 *            vector.  A queue's commands then complete out of order, as
 *            NVMe allows.  Anything exclusive waits until the copy thread
 *            has nothing left and posts what it finished first.  Idle, the
 *            copy thread spins for 1 ms, yielding, before it sleeps (a
 *            CPU's worth while a stream runs, nothing at rest), and not
 *            at all after a command was taken back (bench/RESULTS.md,
 *            "copy thread").
 *   threaded (threaded = true) a device thread executes commands; db_notify
 *            only wakes it.  Completions arrive asynchronously.
 * In both modes the sim reads doorbells with acquire ordering and writes each
 * CQE with its phase tag last (release), so a host never sees a torn entry.
 * It never posts into a full CQ: the SQ feeding it stalls until the host
 * moves the CQ head doorbell.
 *
 * Namespaces (nsid 1..nr_ns), 512 or 4096 byte blocks:
 *   SIM_BACKING_RAM   anonymous memory, zero until written (lazily by mmap),
 *                     with transparent huge pages asked for (MADV_HUGEPAGE).
 *   SIM_BACKING_NULL  reads return zeroes, writes are dropped.
 *   SIM_BACKING_FILE  pread/pwrite on path (created and sized if missing).
 *                     Writes land in the host's page cache; Flush (and FUA
 *                     writes) fdatasync the file, against a crash of the host.
 * Deallocated blocks (DSM deallocate, Write Zeroes) read as zeroes
 * (Identify Namespace DLFEAT = 001b).
 *
 * Metadata and protection information (struct sim_ns_opts ms, pi_*): the
 * namespace's one LBA format has ms bytes of metadata per block (FLBAS bit 4
 * for md_ext), and with pi_type the protection information (PI) of that
 * type (DPS; DPC offers Types 1-3, first and last) in the format of sim_pi.h;
 * Identify Controller sets CTRATT.ELBAS and Identify Namespace for the NVM
 * command set (CNS 05h) gives the guard format (ELBAF PIF, no storage tag).
 * The metadata lives in memory (ms bytes per block, all ones until written:
 * an unwritten or deallocated block's PI turns its checks off); a FILE
 * namespace loads it from PATH.md at creation and writes it through (Flush
 * and FUA make it durable with the data, and the write cache model keeps
 * its pre-images with the data's).  Read and Write move it through MPTR (a
 * contiguous buffer, nlb * ms bytes) or interleaved after each block's data
 * (md_ext), except with PRACT and ms equal to the PI's size: then no
 * metadata crosses the bus.  PI, as the NVM command set specifies it:
 *   - Write with PRACT: the controller generates each block's PI (guard of
 *     its data and, PI last, the metadata before it; application tag
 *     cdw15 15:0; reference tag cdw14 (| cdw3 15:0 << 32 with the 64-bit
 *     guard) plus the block's index, not incremented for Type 3) and
 *     stores the host's other metadata bytes; without PRACT it checks the
 *     host's PI as PRCHK says first and writes nothing when a check fails;
 *   - Read: each block's stored PI is checked as PRCHK says (reference tag
 *     against cdw14 plus the index, Type 3 against cdw14), the data (and
 *     metadata, when it crosses) transferred; the first block failing gives
 *     the status: SCT 2h, 82h guard, 83h application tag, 84h reference tag;
 *   - Type 1 with a PRCHK reference check whose cdw14 is not the low bits
 *     of the SLBA: Invalid Protection Information (SCT 1h, SC 81h), nothing
 *     moved;
 *   - Write Zeroes with PRACT stores the PI of zeroed blocks (PRCHK bits:
 *     81h), without it, and DSM deallocate, all ones (unchecked);
 *   - an escaped tuple (application tag FFFFh; Type 3 also reference tag
 *     all ones) is not checked.
 * The null backing has no metadata.  Such a namespace's commands are moved
 * block by block through the metadata, not with one copy.
 *
 * Volatile write cache (opts.vwc; RAM and FILE namespaces, each its own):
 * Identify reports one, the Volatile Write Cache feature (WCE) starts
 * enabled (and is back at enabled after a controller reset), and while it
 * is enabled a completed Write, Write Zeroes or DSM deallocate is not
 * durable yet: a power cut (sim_fault_powerfail) may undo it.  Reads always
 * return the newest data.  A block becomes durable by:
 *   - Flush of its namespace or of NSID FFFFFFFFh (all);
 *   - a Write or Write Zeroes with FUA (cdw12 bit 30): its own blocks;
 *   - a shutdown (CC.SHN normal or abrupt): everything;
 *   - destaging: each namespace caches at most opts.wc_bytes (0: 64 MiB,
 *     clamped to [one block, the namespace]); a block dirtied when it is full
 *     first makes the oldest dirty block durable (first dirtied, first out).
 *     A range longer than that makes the whole cache and all but its last
 *     wc_bytes durable at once (no copy of what would be destaged anyway);
 *   - Set Features WCE = 0: everything, and from then on every write.
 * The model keeps each dirty block's durable content (its pre-image), so its
 * memory is bounded by wc_bytes per namespace plus at most 40 bytes of
 * bookkeeping per cached block, reserved at sim_create and touched as used
 * (the command path neither allocates nor makes a system call for RAM).  A
 * controller reset, a function reset and a removal keep the cache (the
 * device keeps power); sim_destroy keeps the newest data.  Without opts.vwc
 * every completed write is durable (a drive with power-loss protection).
 *
 * All functions return 0 or a negative errno.
 */
#ifndef NVMEFS_SIM_H
#define NVMEFS_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "bus.h"

#define SIM_MAX_NS 16

struct sim;
struct nvme_sqe;
struct cfg_controller;

enum sim_backing { SIM_BACKING_RAM, SIM_BACKING_NULL, SIM_BACKING_FILE };

/* Metadata bytes per block at most (struct sim_ns_opts.ms). */
#define SIM_MS_MAX 256u

struct sim_ns_opts {
	uint64_t nlba;        /* blocks in the namespace (> 0) */
	unsigned lba_size;    /* 512 or 4096 */
	enum sim_backing backing;
	const char *path;     /* SIM_BACKING_FILE only */
	/* Metadata (RAM and FILE only; see "Metadata and protection
	 * information" above): ms bytes per block (0: none, at most
	 * SIM_MS_MAX), transferred at the end of each block's data (md_ext: an
	 * extended LBA) or through MPTR; protection information of pi_type
	 * (1..3, 0: none) in its first (pi_first) or last bytes, with the
	 * 64-bit guard (pi_g64: 16 bytes) or the 16-bit one (8 bytes), ms at
	 * least that. */
	unsigned ms;
	bool md_ext;
	unsigned pi_type;
	bool pi_g64;
	bool pi_first;
};

struct sim_opts {
	const char *name;     /* bus->name becomes "sim:NAME" */
	unsigned nr_ns;       /* 1..SIM_MAX_NS */
	struct sim_ns_opts ns[SIM_MAX_NS];
	bool threaded;
	/* Inline mode: a Write to a RAM or FILE namespace moving at
	 * least this many bytes runs on the controller's copy thread, not on
	 * the ringing thread (0: none; ignored when threaded). */
	size_t offload;
	unsigned mdts;        /* log2 of max transfer in MPSMIN (4 KiB) pages, 0 = none */
	unsigned max_queues;  /* I/O queue pairs granted by Number of Queues (0: 64) */
	unsigned mqes;        /* CAP.MQES, 0-based max queue entries (0: 4095) */
	unsigned dstrd;       /* CAP.DSTRD (0..15): doorbell stride 4 << dstrd */
	unsigned nr_vectors;  /* MSI-X vectors (0: 65) */
	unsigned ready_delay_ms; /* CC.EN 0->1 to CSTS.RDY = 1 */
	bool vwc;             /* a volatile write cache: reported in Identify and modelled */
	uint64_t wc_bytes;    /* its capacity per namespace in bytes (0: 64 MiB); vwc only */
	unsigned wzsl;        /* Identify Controller NVM (CNS 06h): Write Zeroes limit, log2 4 KiB units, 0: none */
	unsigned dmrl;        /* DSM ranges per command, 0: none */
	uint32_t dmrsl;       /* DSM blocks per range, 0: none */
	/* Tests: called for every Identify after the sim built its answer (data,
	 * 4096 bytes) with its status; returns the status to report, and may
	 * rewrite data (formats, metadata, namespace lists the sim lacks). */
	uint16_t (*identify_hook)(void *arg, const struct nvme_sqe *cmd, void *data, uint16_t status);
	/* Tests: called for every admin command that completes as it is
	 * executed, after the sim did, with its status and dw0; returns the
	 * status to report and may rewrite *dw0 (a Number of Queues answer
	 * granting what was not asked, say).  It changes the answer only: the
	 * sim still allows what it executed.  An Async Event Request is shown
	 * to it (status 0) before it is held: a non-zero status completes it
	 * at once with that status instead. */
	uint16_t (*admin_hook)(void *arg, const struct nvme_sqe *cmd, uint16_t status, uint32_t *dw0);
	/* Tests: called on the executing thread just before an I/O command of
	 * queue sqid is executed (which threads run which queues, and when). */
	void (*io_hook)(void *arg, uint16_t sqid, const struct nvme_sqe *cmd);
	void *hook_arg;       /* the hooks' arg */
	/* Tests, a device reporting what it should not.  Each 0: the sim's own.
	 *   cap      CAP as read by the host; the sim then works by its DSTRD and
	 *            MQES too (dstrd and mqes above are ignored)
	 *   vs       VS as read by the host (the sim's own is 1.4)
	 *   bar_len  BAR0's length in bytes, rounded up to 4 KiB (at least 4 KiB).
	 *            Smaller than the doorbells of its 65 queues need, the sim
	 *            ignores the doorbells outside it, and the address space up
	 *            to where they would end stays reserved and inaccessible: a
	 *            host store there faults (SIGSEGV), as one past a real BAR's
	 *            mapping does */
	uint64_t cap;
	uint32_t vs;
	size_t bar_len;
	unsigned sgl;         /* reserved: SGLs are not implemented yet; 0 or 1 accepted, PRPs only */
};

/* Build a controller.  The returned sim owns its bus (sim_bus); the bus is
 * valid until sim_destroy (or bus->ops->close, which is the same). */
int sim_create(const struct sim_opts *o, struct sim **out);
struct nvme_bus *sim_bus(struct sim *s);
void sim_destroy(struct sim *s);

/* The sim owning a bus made by sim_create, NULL for any other bus. */
struct sim *sim_from_bus(struct nvme_bus *bus);

/* A sim from a [controller] section with device = sim: namespaces,
 * size/block_size, backing (file paths from cfg_backing_file), exec,
 * mdts, max_queues, write_cache (vwc; wc_bytes at its default), metadata_size,
 * metadata_layout, pi_type, pi_location, pi_guard.  -EINVAL if
 * c is not a sim controller.  (sim_cfg.c) */
int sim_create_from_cfg(const struct cfg_controller *c, struct sim **out);

/* ---- fault injection: thread-safe, callable at any time ----
 * Counts apply to commands fetched (or completions posted) after the call.
 * sim_fault_remove, sim_fault_powerfail, sim_power_on and sim_fault_clear
 * (of a dead device) take the queues: they wait for the thread executing
 * commands, so an identify_hook must not call them. */

/* The next n I/O commands complete with status ((sct << 8) | sc, optionally
 * | NVME_STATUS_DNR) without being executed.  n = 0 cancels. */
void sim_fault_fail_next(struct sim *s, unsigned n, uint16_t status);

/* Delay every completion by usec (0: off).  Threaded mode sleeps/waits
 * before posting.  Inline mode holds completions in a per-CQ pending list and
 * posts those whose time has come on a later db_notify (any doorbell) or
 * sim_poll call; a host polling in a loop must therefore keep calling
 * sim_poll (or ring a doorbell) to see them. */
void sim_fault_delay(struct sim *s, unsigned usec);

/* Execute the next n I/O commands but never post their completions.
 * A controller reset (CC.EN 1->0, FLR) cancels what is left of this, of the
 * bogus-CID and duplicate faults, of a hang and of stalled commands. */
void sim_fault_lose_next(struct sim *s, unsigned n);

/* For the next n I/O completions, first post an extra CQE whose CID was not
 * submitted (and no command outstanding on that SQ uses), then the real one:
 * the host must drop the bogus one; nothing is lost. */
void sim_fault_bogus_cid(struct sim *s, unsigned n);

/* Post each of the next n I/O completions twice. */
void sim_fault_duplicate(struct sim *s, unsigned n);

/* Controller fatal status: CSTS.CFS = 1, stop processing until a controller
 * reset (CC.EN 1->0), a function reset or a power-on; CC.EN 0->1 with CFS
 * set leaves it set (and the controller not ready). */
void sim_fault_cfs(struct sim *s);

/* Stop (true) / resume (false) fetching commands, admin ones included: no
 * command is fetched after this returns, even by a pass already running.
 * Doorbells are still accepted; resuming processes what was submitted
 * meanwhile.  A controller reset ends the hang (and drops what was queued).
 * Resuming also ends sim_fault_hang_loop. */
void sim_fault_hang(struct sim *s, bool hang);
/* A hang that a controller reset does not end: hung now (as
 * sim_fault_hang(s, true)), and after every reset hung again as soon as an
 * I/O command is to be fetched -- the bring-up's admin commands (enable,
 * queue creation, Identify) are answered, no I/O command ever is, and an
 * Abort sent for one is not answered either.  A device that goes through a
 * reset about every io_timeout_ms, with nothing served between two resets.
 * sim_fault_hang(s, false) (unhang) and sim_fault_clear end it. */
void sim_fault_hang_loop(struct sim *s);

/* Fetch the next n I/O commands but neither execute nor complete them: they
 * stay "on the device" until an Abort names them (then they complete with
 * Command Abort Requested), sim_fault_release_stalled, or a controller reset
 * (which drops them unexecuted). */
void sim_fault_stall_next(struct sim *s, unsigned n);
/* While set, Abort never aborts (dw0 bit 0 = 1). */
void sim_fault_abort_ignore(struct sim *s, bool on);
/* Execute the stalled commands now and post their completions (a device
 * finishing late).  Returns how many. */
int sim_fault_release_stalled(struct sim *s);

/* Misplaced data, what end-to-end protection information catches: the
 * next n Writes (write) or Reads of any namespace move their blocks (data
 * and metadata) blocks away from the LBA they name: to SLBA + blocks, or,
 * when that range leaves the namespace, SLBA - blocks (if it fits, else
 * they are not moved).  A misdirected Write's protection information is
 * generated for the LBA it named, so a later Read of the blocks it
 * overwrote fails its reference tag check (Types 1 and 2); a misdirected
 * Read returns other blocks, whose reference tags then fail.  Without
 * protection information the device notices neither: wrong data.  Counted
 * in sim_stats.misdirected.  n = 0 cancels. */
void sim_fault_misdirect(struct sim *s, bool write, unsigned n, int64_t blocks);
/* Decay of the medium: the byte at offset byte of block lba of namespace
 * nsid is inverted in place (the media's content, whatever the write
 * cache holds), its metadata left as it is: with protection information
 * its guard no longer matches (a Read checking it fails with 82h),
 * without it a Read returns the changed byte.  Takes the queues.  0,
 * -ENOENT (no such namespace, or null), -EINVAL (lba or byte outside), or
 * a FILE namespace's I/O error. */
int sim_fault_corrupt(struct sim *s, uint32_t nsid, uint64_t lba, unsigned byte);

/* The next n MSI-X set-ups (bus irq_set) fail with -EIO after tearing the
 * current wiring down, as a failed VFIO resize leaves it. */
void sim_fault_irq_set(struct sim *s, unsigned n);
/* The eventfd wired to MSI-X vector v now, -1 when none. */
int sim_vector_efd(struct sim *s, unsigned v);

/* Surprise removal of the link (the device keeps power, and its write cache):
 * from now on every BAR0 register read returns all ones, register writes,
 * doorbells and function resets are ignored (ops->reset: -ENODEV) and DMA
 * stops: no command is executed or completed.  Completions held back by a
 * delay and stalled commands are dropped; commands being executed when it
 * is called finish first (it waits for them).  sim_fault_clear brings the
 * device back. */
void sim_fault_remove(struct sim *s);

/* A power cut.  Every block not durable (see "Volatile write cache" above)
 * either gets its durable content back ("lost") or keeps its newest content
 * ("kept"): seed 0 loses them all; otherwise a hash of (seed, nsid, LBA)
 * decides each block, so the same seed over the same history gives the same
 * result.  No block ever holds anything but its durable or its newest
 * content.  Then the device is off, as removed (see sim_fault_remove): dead
 * to the host until sim_power_on or sim_fault_clear.  Counted in sim_stats,
 * logged (log_warn) with what was dropped.  Commands being executed when it
 * is called finish first.  A device off already: nothing happens, 0.
 * Returns 0, or the first error writing a FILE namespace's durable content
 * back (the device is off all the same). */
int sim_fault_powerfail(struct sim *s, uint64_t seed);

/* Power back after sim_fault_powerfail: a power-on reset (registers at their
 * reset values, no queues, no CFS, no MSI-X wiring, features at their
 * defaults), the namespaces holding exactly their durable data; logged
 * (log_info).  Nothing happens to a device that has power.  Returns 0, or -ENODEV while the device
 * is also removed (sim_fault_remove: only sim_fault_clear brings it back). */
int sim_power_on(struct sim *s);

/* Cancel the injected knobs: delay, hang (and hang loop), fail-next, lose-next, bogus,
 * duplicate, stall-next, abort-ignore, never-ready, irq-set failures,
 * admin delay, stuck, misdirected Reads and Writes (a corrupted block stays
 * corrupted)
 * (commands stalled already stay until an Abort, a release or a reset).  A
 * device that answers is otherwise left as it is: CSTS.CFS is device state,
 * cleared only by a controller reset (CC.EN 1 -> 0), a function reset or a
 * power-on.  A removed or powered-off device comes back (re-inserted, or
 * power restored) with a power-on reset of its registers as sim_power_on
 * does; a removed one kept power, so its write cache still holds what it
 * held. */
void sim_fault_clear(struct sim *s);

/* While set, CC.EN = 1 never sets CSTS.RDY. */
void sim_fault_never_ready(struct sim *s, bool on);

/* Delay every admin completion by usec (0: off), as sim_fault_delay does
 * for I/O: a busy firmware answering its admin queue late. */
void sim_fault_admin_delay(struct sim *s, unsigned usec);
/* While set, the controller is wedged: every CC write (a disable, a
 * shutdown) is ignored and a function reset (bus reset) fails with -EIO;
 * it keeps processing what it was processing.  Only bus mastering off (the
 * bus_master op) stops its DMA.  sim_fault_clear ends it. */
void sim_fault_stuck(struct sim *s, bool on);
/* The bus's bus_master op sets it (on at creation): while off the device
 * fetches nothing, moves no data and posts nothing, as PCI_COMMAND.BME = 0
 * makes a real function.  Whether it is on now: */
bool sim_bus_master_on(struct sim *s);

/* Inline mode: post completions held back by sim_fault_delay whose time has
 * come, and process anything pending (after a hang is lifted).  Returns the
 * number of completions posted.  Threaded mode: 0, no effect. */
int sim_poll(struct sim *s);

/* ---- asynchronous events and namespace changes (sim_aen.c) ----
 * Identify Controller reports AERL 3 (four Async Event Requests held; a
 * fifth completes with Asynchronous Event Request Limit Exceeded), OAES
 * Namespace Attribute and Firmware Activation notices, and NN 16 (the
 * namespaces that may exist).  Set/Get Features 0Bh (AEC: SMART critical
 * warning bits 4:0, notices bits 8 and 9; 0 after a controller reset)
 * decides which events are raised at all (error events always are).  A
 * raised event waits (up to 16 of them) until an AER is held and its log
 * page is not masked: reporting an event masks every event naming the same
 * log page until the host reads that page without RAE (cdw10 bit 15).  A
 * controller reset ends the held AERs and clears the masks; events not yet
 * reported wait for the next AERs.  Log 04h (Changed Namespace List) lists
 * the NSIDs changed since it was last read (read clears it), FFFFFFFFh
 * first when more than 1024 changed.  Each function below is thread-safe
 * and holds the queues while it changes the device. */

/* Set (set) or clear critical warning bits (NVME_SMART_CRIT_*, bits 4:0) of
 * the SMART log; the log's values follow (spare: available spare 5% under
 * a 10% threshold; temperature: WCTEMP + 5 K).  Setting a bit not set yet
 * raises a SMART event: info Available Spare, Temperature, or Reliability
 * for the other three.  -EINVAL for other bits. */
int sim_inject_warning(struct sim *s, uint8_t bits, bool set);
/* Attach a new namespace nsid (1..16, not active now) of bytes (a multiple
 * of namespace 1's block size, which it takes, with its metadata and
 * protection information format): backed by anonymous memory
 * (RAM), or null when namespace 1 is null -- a FILE-backed sim gets a RAM
 * namespace, which does not outlive the sim.  Raises Namespace Attribute
 * Changed.  -EEXIST, -EINVAL, -ENOMEM. */
int sim_ns_add(struct sim *s, uint32_t nsid, uint64_t bytes);
/* Detach namespace nsid: its cache flushed, its backing released (a file
 * is kept), I/O to it fails with Invalid Namespace.  -ENOENT. */
int sim_ns_remove(struct sim *s, uint32_t nsid);
/* Change the capacity of namespace nsid to bytes (a multiple of its block
 * size): its write cache is made durable first; RAM is remapped (grown
 * blocks read zero), a file is grown (never truncated).  The same size: 0,
 * no event.  -ENOENT, -EINVAL. */
int sim_ns_resize(struct sim *s, uint32_t nsid, uint64_t bytes);
/* Events raised and not reported yet (tests). */
unsigned sim_events_pending(struct sim *s);

struct sim_stats {
	uint64_t cmds;          /* I/O + admin commands fetched */
	uint64_t reads, writes, flushes, write_zeroes, dsm;
	uint64_t admin_cmds;
	uint64_t bytes_read, bytes_written;
	uint64_t dma_errors;    /* IOVA outside the map */
	uint64_t invalid_cmds;  /* completed with a non-zero status by validation */
	uint64_t sq_doorbells, cq_doorbells;
	uint64_t irqs;          /* eventfd signals */
	uint64_t invalid_doorbells; /* doorbell to a missing queue / bad value */
	uint64_t write_zeroes_deac; /* Write Zeroes with DEAC set */
	uint64_t resets;        /* controller disables (CC.EN 1 -> 0) and function resets */
	uint64_t shutdowns;     /* shutdown notifications (CC.SHN set, normal or abrupt) */
	uint64_t stalled;       /* commands held by sim_fault_stall_next now */
	uint64_t fua_writes;    /* Write and Write Zeroes commands with FUA completed */
	uint64_t offloaded;     /* commands executed on the copy thread (opts.offload) */
	uint64_t offload_back;  /* handed to it, taken back before it started them */
	uint64_t wc_dirty_blocks; /* now: blocks in the volatile write caches, not durable */
	uint64_t wc_destaged;   /* blocks made durable because a cache was full */
	uint64_t powerfails;    /* sim_fault_powerfail cuts (of a device with power) */
	uint64_t pf_blocks_lost, pf_blocks_kept; /* dirty blocks a cut undid / kept */
	/* commands failed by a protection information check: guard (82h),
	 * application tag (83h), reference tag (84h) */
	uint64_t pi_guard_errors, pi_app_errors, pi_ref_errors;
	uint64_t misdirected;   /* Reads and Writes sim_fault_misdirect moved */
};
void sim_get_stats(struct sim *s, struct sim_stats *st);

/* Whether any byte of host memory [vaddr, vaddr+len) lies in one of the
 * device's DMA mappings now: what its IOMMU domain lets it reach (tests). */
bool sim_dma_reaches(struct sim *s, const void *vaddr, size_t len);

#endif

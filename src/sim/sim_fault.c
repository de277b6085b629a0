/* sim_fault.c - the software controller's fault injection (see sim.h):
 * the knobs the processing thread reads (fail, lose, delay, hang, stall,
 * bogus and duplicate completions, misdirected Reads and Writes, ...), a
 * corrupted block, surprise removal, power cut and power on, and clearing
 * them.
 */
#include "sim_priv.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* ---------------------------------------------------------- fault injection */

void sim_fault_fail_next(struct sim *s, unsigned n, uint16_t status)
{
	atomic_store(&s->f_fail_status, status);
	atomic_store(&s->f_fail_n, n);
}

void sim_fault_delay(struct sim *s, unsigned usec)
{
	atomic_store(&s->f_delay_us, usec);
}

void sim_fault_lose_next(struct sim *s, unsigned n)
{
	atomic_store(&s->f_lose_n, n);
}

void sim_fault_bogus_cid(struct sim *s, unsigned n)
{
	atomic_store(&s->f_bogus_n, n);
}

void sim_fault_duplicate(struct sim *s, unsigned n)
{
	atomic_store(&s->f_dup_n, n);
}

void sim_fault_cfs(struct sim *s)
{
	atomic_store(&s->cfs, true);
}

void sim_fault_hang(struct sim *s, bool hang)
{
	/* the loop ends first: a processing thread that hangs the controller
	 * again looks at it after its store (sim_process_sq) */
	if (!hang)
		atomic_store(&s->f_hang_loop, false);
	atomic_store(&s->f_hang, hang);
	if (!hang && s->o.threaded) {
		atomic_store(&s->kick, 1);
		pthread_mutex_lock(&s->lock);
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

void sim_fault_hang_loop(struct sim *s)
{
	/* hung now; a reset between the two stores is hung again at its
	 * first I/O command */
	atomic_store(&s->f_hang_loop, true);
	atomic_store(&s->f_hang, true);
}

void sim_fault_stall_next(struct sim *s, unsigned n)
{
	atomic_store(&s->f_stall_n, n);
}

void sim_fault_abort_ignore(struct sim *s, bool on)
{
	atomic_store(&s->f_abort_ignore, on);
}

int sim_fault_release_stalled(struct sim *s)
{
	int n = 0;

	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	struct sim_stalled st[SIM_MAX_STALLED];
	unsigned nr = s->nr_stalled;
	memcpy(st, s->stalled, nr * sizeof(st[0]));
	s->nr_stalled = 0;
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < nr; i++) {
		struct sim_sq *sq = &s->sq[st[i].sqid];
		if (!sq->valid || !sim_running(s))
			continue;
		uint16_t status = sim_io(s, sq, &st[i].sqe, st[i].sqid);
		sim_complete(s, st[i].sqid, sq, st[i].sqe.cid, status, 0, true);
		sim_irq(s, &s->cq[sq->cqid]);
		n++;
	}
	sim_qunlock(s);
	return n;
}

void sim_fault_misdirect(struct sim *s, bool write, unsigned n, int64_t blocks)
{
	atomic_store(&s->f_mis_off[write], blocks);
	atomic_store(&s->f_mis_n[write], n);
}

int sim_fault_corrupt(struct sim *s, uint32_t nsid, uint64_t lba, unsigned byte)
{
	int rc = 0;

	if (nsid == 0 || nsid > SIM_MAX_NS)
		return -ENOENT;
	/* nothing executes meanwhile: no command sees half of it */
	sim_qlock(s);
	struct sim_ns *ns = &s->ns[nsid - 1];
	if (nsid > s->o.nr_ns || !ns->active || ns->backing == SIM_BACKING_NULL) {
		rc = -ENOENT;
	} else if (lba >= ns->nlba || byte >= ns->lba_size) {
		rc = -EINVAL;
	} else if (ns->backing == SIM_BACKING_RAM) {
		ns->mem[(lba << ns->lba_shift) + byte] ^= 0xff;
	} else {
		off_t off = (off_t)((lba << ns->lba_shift) + byte);
		uint8_t b = 0;
		ssize_t n = pread(ns->fd, &b, 1, off);
		b ^= 0xff;
		if (n < 0 || pwrite(ns->fd, &b, 1, off) != 1)
			rc = errno ? -errno : -EIO;
	}
	sim_qunlock(s);
	if (rc == 0)
		log_warn("sim %s: namespace %u block %llu corrupted at byte %u", s->name, nsid,
		         (unsigned long long)lba, byte);
	return rc;
}

void sim_fault_irq_set(struct sim *s, unsigned n)
{
	atomic_store(&s->f_irq_fail_n, n);
}

/* What a device that stopped answering held back, for the log. */
struct sim_dropped {
	unsigned deferred, stalled, finished, unfetched, aers;
};

/* The device went dark: completions waiting out a delay, stalled commands
 * and commands the copy thread finished but nobody posted yet will never
 * complete, so they are dropped now (nothing is posted after this).
 * Commands not fetched yet and held Async Event Requests stay until a
 * reset, but are counted.  Callers hold the queues and s->lock. */
static void sim_drop_held(struct sim *s, struct sim_dropped *d)
{
	uint32_t dstrd = NVME_CAP_DSTRD(s->cap);

	*d = (struct sim_dropped){.deferred = s->nr_deferred, .stalled = s->nr_stalled,
				  .aers = s->nr_aer};
	for (uint16_t q = 0; q < SIM_NQ; q++) {
		struct sim_sq *sq = &s->sq[q];
		uint32_t tail;

		if (q)
			d->finished += sim_offload_drop(s, q);
		if (!sq->valid)
			continue;
		tail = sim_db_read(s, nvme_sq_tdbl_off(q, dstrd));
		if (tail < sq->size)
			d->unfetched += (tail + sq->size - sq->head) % sq->size;
	}
	s->nr_deferred = 0;
	atomic_store(&s->any_deferred, 0);
	s->nr_stalled = 0;
}

/* Registers, queues, features and MSI-X wiring as at power-on.  Callers hold
 * the queues and s->lock. */
static void sim_cold_reset(struct sim *s)
{
	sim_regs_reset(s);
	s->intms = 0;
	s->irq_coalesce = 0;
	for (unsigned i = 0; i < sizeof(s->efds) / sizeof(s->efds[0]); i++)
		SIM_SET(s->efds[i], -1);
	SIM_SET(s->nr_efds, 0);
}

void sim_fault_remove(struct sim *s)
{
	struct sim_dropped d;

	/* first, so that nothing new starts; then wait for what runs */
	atomic_fetch_or(&s->gone, SIM_GONE_REMOVED);
	sim_qlock(s);
	pthread_mutex_lock(&s->lock);
	sim_drop_held(s, &d);
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
}

int sim_fault_powerfail(struct sim *s, uint64_t seed)
{
	uint64_t lost = 0, kept = 0;
	struct sim_dropped d;
	int rc = 0, e;

	if (atomic_fetch_or(&s->gone, SIM_GONE_OFF) & SIM_GONE_OFF)
		return 0; /* off already: its cache was lost then */
	/* the commands being executed finish first: they ran before the cut */
	sim_qlock(s);
	for (unsigned i = 0; i < s->o.nr_ns; i++)
		if (s->ns[i].wc.cap &&
		    (e = sim_wc_powerfail(&s->ns[i].wc, seed, i + 1, &lost, &kept)) && !rc)
			rc = e;
	pthread_mutex_lock(&s->lock);
	sim_drop_held(s, &d);
	s->powerfails++;
	s->pf_lost += lost;
	s->pf_kept += kept;
	pthread_mutex_unlock(&s->lock);
	sim_qunlock(s);
	log_warn("sim %s: power cut (seed %llu): %llu cached block%s lost, %llu kept; dropped "
		 "%u delayed completion%s, %u stalled command%s, %u executed command%s not "
		 "posted, %u command%s not fetched, %u async event request%s",
		 s->name, (unsigned long long)seed, (unsigned long long)lost, lost == 1 ? "" : "s",
		 (unsigned long long)kept, d.deferred, d.deferred == 1 ? "" : "s", d.stalled,
		 d.stalled == 1 ? "" : "s", d.finished, d.finished == 1 ? "" : "s", d.unfetched,
		 d.unfetched == 1 ? "" : "s", d.aers, d.aers == 1 ? "" : "s");
	if (rc)
		log_err("sim %s: power cut: restoring a backing file's durable data failed: %s",
			s->name, strerror(-rc));
	return rc;
}

int sim_power_on(struct sim *s)
{
	if (atomic_load(&s->gone) & SIM_GONE_OFF) {
		sim_qlock(s);
		pthread_mutex_lock(&s->lock);
		sim_cold_reset(s);
		atomic_fetch_and(&s->gone, ~SIM_GONE_OFF);
		pthread_mutex_unlock(&s->lock);
		sim_qunlock(s);
		log_info("sim %s: power on: registers at their reset values, only durable data",
			 s->name);
	}
	return atomic_load(&s->gone) & SIM_GONE_REMOVED ? -ENODEV : 0;
}

void sim_fault_clear(struct sim *s)
{
	atomic_store(&s->f_fail_n, 0);
	atomic_store(&s->f_delay_us, 0);
	atomic_store(&s->f_lose_n, 0);
	atomic_store(&s->f_bogus_n, 0);
	atomic_store(&s->f_dup_n, 0);
	atomic_store(&s->f_stall_n, 0);
	atomic_store(&s->f_abort_ignore, false);
	atomic_store(&s->f_never_ready, false);
	atomic_store(&s->f_irq_fail_n, 0);
	atomic_store(&s->f_admin_delay_us, 0);
	atomic_store(&s->f_stuck, false);
	atomic_store(&s->f_mis_n[0], 0);
	atomic_store(&s->f_mis_n[1], 0);
	sim_fault_hang(s, false);
	/* re-inserted, or power back: a live controller is left alone (its
	 * CFS, if any, is device state that only a reset clears) */
	if (atomic_load(&s->gone)) {
		sim_qlock(s);
		pthread_mutex_lock(&s->lock);
		sim_cold_reset(s);
		atomic_store(&s->gone, 0);
		pthread_mutex_unlock(&s->lock);
		sim_qunlock(s);
	}
}

void sim_fault_admin_delay(struct sim *s, unsigned usec)
{
	atomic_store(&s->f_admin_delay_us, usec);
}

void sim_fault_stuck(struct sim *s, bool on)
{
	atomic_store(&s->f_stuck, on);
}

void sim_fault_never_ready(struct sim *s, bool on)
{
	atomic_store(&s->f_never_ready, on);
}


/* test_aen.c - asynchronous events and namespace changes (aen.c) driven
 * against the software controller: AERs armed and re-armed (counted on the
 * device's side through its admin hook), SMART warnings, masking, namespaces
 * added, removed, grown and shrunk with the I/O path following, a stable
 * info, and a device without events. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "rig.h"
#include "sim.h"

#define HANG_MS 30000u
#define BS      4096u
#define NS1_NLBA 1024u

#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		uint64_t t0_ = rig_now_ms();                                                       \
		while (!(cond)) {                                                                  \
			ck_assert_msg(rig_now_ms() - t0_ < HANG_MS, "hung waiting for " #cond);    \
			rig_sleep_ms(1);                                                           \
		}                                                                                  \
	} while (0)

/* What the device saw and what the callback got. */
struct seen {
	_Atomic unsigned aers;      /* AERs the device received */
	_Atomic bool aer_invalid;   /* answer them with Invalid Opcode */
	_Atomic bool chlog_fail;    /* fail reads of the Changed Namespace List */
	pthread_mutex_t m;
	unsigned nev;
	struct nvme_aen ev[32];
	struct nvme_ns_change ch[32][4]; /* each event's first changes, copied */
};

static uint16_t count_hook(void *arg, const struct nvme_sqe *cmd, uint16_t status, uint32_t *dw0)
{
	(void)dw0;
	struct seen *s = arg;
	if (cmd->opc == NVME_ADM_ASYNC_EVENT) {
		atomic_fetch_add(&s->aers, 1);
		if (atomic_load(&s->aer_invalid))
			return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
	}
	if (cmd->opc == NVME_ADM_GET_LOG_PAGE && (cmd->cdw10 & 0xff) == NVME_LOG_CHANGED_NS &&
	    atomic_load(&s->chlog_fail))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	return status;
}

static void aen_cb(void *arg, struct nvme_ctrl *c, const struct nvme_aen *ev)
{
	(void)c;
	struct seen *s = arg;
	pthread_mutex_lock(&s->m);
	if (s->nev < 32) {
		s->ev[s->nev] = *ev;
		for (unsigned i = 0; i < ev->nr_changes && i < 4; i++)
			s->ch[s->nev][i] = ev->changes[i];
		s->ev[s->nev].changes = NULL;
		s->nev++;
	}
	pthread_mutex_unlock(&s->m);
}

static unsigned nev(struct seen *s)
{
	pthread_mutex_lock(&s->m);
	unsigned n = s->nev;
	pthread_mutex_unlock(&s->m);
	return n;
}

static struct nvme_ctrl_aen_stats stats(struct rig *g)
{
	struct nvme_ctrl_aen_stats st;
	nvme_ctrl_aen_stats_get(g->c[0], &st);
	return st;
}

static uint64_t armed(struct rig *g)
{
	return stats(g).aers_armed;
}

/* One controller "aen" (namespace 1: RAM, NS1_NLBA blocks of 4 KiB), one
 * started reactor; the callback set. */
static void open_rig(struct rig *g, struct seen *s, bool threaded)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->m, NULL);
	struct rig_opts ro = {.mode = NVME_MODE_POLL, .start = true};
	struct sim_opts *so = &ro.sim[0];
	so->name = "aen";
	so->threaded = threaded;
	so->nr_ns = 1;
	so->ns[0] = (struct sim_ns_opts){.nlba = NS1_NLBA, .lba_size = BS, .backing = SIM_BACKING_RAM};
	so->admin_hook = count_hook;
	so->hook_arg = s;
	ro.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 32, .io_timeout_ms = 5000, .io_retries = 2};
	ck_assert_int_eq(rig_open(g, &ro), 0);
	nvme_ctrl_set_aen_cb(g->c[0], aen_cb, s);
}

static void close_rig(struct rig *g, struct seen *s)
{
	nvme_ctrl_set_aen_cb(g->c[0], NULL, NULL);
	rig_close(g);
	pthread_mutex_destroy(&s->m);
}

static int io(struct rig *g, enum rig_op op, uint32_t nsid, uint64_t lba)
{
	return rig_io(g, 0, 0, op, nsid, lba, g->buf[0][0], BS, 0);
}

/* ---- armed at bring-up, after each event and after each reset ---- */
START_TEST(t_armed)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, _i & 1);
	/* the sim's AERL is 3: four out, none completed */
	/* (a threaded device takes them in a moment after they are posted) */
	WAIT_FOR(armed(&g) == NVME_AER_MAX && atomic_load(&s.aers) == NVME_AER_MAX);
	ck_assert_uint_eq(atomic_load(&g.c[0]->admin_outstanding), NVME_AER_MAX);
	/* ordinary admin commands go on around them */
	struct nvme_id_ctrl *id = calloc(1, sizeof(*id));
	struct nvme_sqe cmd = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
	ck_assert_int_eq(nvme_ctrl_admin(g.c[0], &cmd, id, sizeof(*id), NULL), 0);
	free(id);
	/* an event: exactly one more AER replaces the one it completed */
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_RELIABILITY, true), 0);
	WAIT_FOR(nev(&s) == 1);
	WAIT_FOR(armed(&g) == NVME_AER_MAX && atomic_load(&s.aers) == NVME_AER_MAX + 1);
	rig_sleep_ms(50);
	ck_assert_uint_eq(atomic_load(&s.aers), NVME_AER_MAX + 1);
	/* a reset ends the four quietly (no callback) and arms four new ones */
	for (unsigned k = 1; k <= 2; k++) {
		ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
		WAIT_FOR(armed(&g) == NVME_AER_MAX &&
		         atomic_load(&s.aers) == NVME_AER_MAX + 1 + k * NVME_AER_MAX);
		rig_sleep_ms(50);
		ck_assert_uint_eq(atomic_load(&s.aers), NVME_AER_MAX + 1 + k * NVME_AER_MAX);
		ck_assert_uint_eq(armed(&g), NVME_AER_MAX);
	}
	ck_assert_uint_eq(nev(&s), 1);
	ck_assert_uint_eq(stats(&g).aer_errors, 0);
	/* the admin timeout does not apply to them: still out after it */
	rig_sleep_ms(NVME_ADMIN_TIMEOUT_MS + 500);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(g.c[0], &rs);
	ck_assert_uint_eq(rs.resets_started, 2);
	ck_assert_uint_eq(armed(&g), NVME_AER_MAX);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_LIVE);
	close_rig(&g, &s);
}
END_TEST

/* ---- a warning: one SMART event with its critical warning ---- */
START_TEST(t_warning)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, _i & 1);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, true), 0);
	WAIT_FOR(nev(&s) == 1);
	rig_sleep_ms(200);
	ck_assert_uint_eq(nev(&s), 1); /* exactly one */
	ck_assert_int_eq(s.ev[0].kind, NVME_AEN_SMART);
	ck_assert_uint_eq(s.ev[0].type, NVME_AER_TYPE_SMART);
	ck_assert_uint_eq(s.ev[0].info, NVME_AER_SMART_SPARE);
	ck_assert_uint_eq(s.ev[0].lid, NVME_LOG_SMART);
	ck_assert(s.ev[0].health_ok);
	ck_assert_uint_eq(s.ev[0].health.critical_warning, NVME_SMART_CRIT_SPARE);
	ck_assert_uint_lt(s.ev[0].health.avail_spare, s.ev[0].health.spare_thresh);
	struct nvme_ctrl_aen_stats st = stats(&g);
	ck_assert_uint_eq(st.events[NVME_AEN_SMART], 1);
	ck_assert_uint_eq(st.critical_warning, NVME_SMART_CRIT_SPARE);
	/* set again: nothing new; cleared: no event either */
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, true), 0);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, false), 0);
	rig_sleep_ms(200);
	ck_assert_uint_eq(nev(&s), 1);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], 0x80, true), -EINVAL);
	close_rig(&g, &s);
}
END_TEST

/* ---- two events naming the same log back to back: the second is masked
 * on the device until the first one's log is read, then delivered ---- */
START_TEST(t_masked_then_delivered)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, _i & 1);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, true), 0);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_TEMPERATURE, true), 0);
	WAIT_FOR(nev(&s) == 2);
	ck_assert_uint_eq(sim_events_pending(g.sim[0]), 0);
	ck_assert_int_eq(s.ev[0].kind, NVME_AEN_SMART);
	ck_assert_int_eq(s.ev[1].kind, NVME_AEN_SMART);
	ck_assert_uint_eq(s.ev[1].info, NVME_AER_SMART_TEMPERATURE);
	ck_assert_uint_eq(s.ev[1].health.critical_warning,
	                  NVME_SMART_CRIT_SPARE | NVME_SMART_CRIT_TEMPERATURE);
	ck_assert_uint_gt(s.ev[1].health.temperature, 343);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	close_rig(&g, &s);
}
END_TEST

static const struct nvme_ns_change *last_change(struct seen *s, unsigned ev, unsigned i)
{
	ck_assert_int_eq(s->ev[ev].kind, NVME_AEN_NS_CHANGED);
	ck_assert_uint_gt(s->ev[ev].nr_changes, i);
	return &s->ch[ev][i];
}

/* ---- namespaces added, grown, shrunk, removed: the changes, the I/O
 * path, the info in place, a reset afterwards ---- */
START_TEST(t_ns_changes)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, _i & 1);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(g.c[0]);
	const struct nvme_ns_info *ns1 = &in->ns[0];
	ck_assert_uint_eq(in->nr_ns, 1);
	/* the qpair caches namespace 1; past its end is refused */
	ck_assert_int_eq(io(&g, RIG_WRITE, 1, NS1_NLBA - 1), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 1, NS1_NLBA), -EINVAL);
	ck_assert_int_eq(io(&g, RIG_READ, 2, 0), -EINVAL);

	/* added */
	ck_assert_int_eq(sim_ns_add(g.sim[0], 2, 256 * BS), 0);
	ck_assert_int_eq(sim_ns_add(g.sim[0], 2, 256 * BS), -EEXIST);
	WAIT_FOR(nev(&s) == 1);
	ck_assert_uint_eq(s.ev[0].nr_changes, 1);
	const struct nvme_ns_change *ch = last_change(&s, 0, 0);
	ck_assert_int_eq(ch->kind, NVME_NS_ADDED);
	ck_assert_uint_eq(ch->ns.nsid, 2);
	ck_assert_uint_eq(ch->ns.nlba, 256);
	ck_assert_uint_eq(ch->old_nlba, 0);
	ck_assert_ptr_eq(nvme_ctrl_get_info(g.c[0]), in);
	ck_assert_uint_eq(in->nr_ns, 2);
	ck_assert_uint_eq(in->ns[1].nsid, 2);
	ck_assert_int_eq(io(&g, RIG_WRITE, 2, 255), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 2, 255), 0);

	/* grown: the new range is accepted at once (the cached one too) */
	ck_assert_int_eq(io(&g, RIG_READ, 1, 0), 0);
	ck_assert_int_eq(sim_ns_resize(g.sim[0], 1, 2 * NS1_NLBA * BS), 0);
	WAIT_FOR(nev(&s) == 2);
	ch = last_change(&s, 1, 0);
	ck_assert_int_eq(ch->kind, NVME_NS_GROWN);
	ck_assert_uint_eq(ch->ns.nsid, 1);
	ck_assert_uint_eq(ch->ns.nlba, 2 * NS1_NLBA);
	ck_assert_uint_eq(ch->old_nlba, NS1_NLBA);
	ck_assert_ptr_eq(&in->ns[0], ns1);
	ck_assert_uint_eq(ns1->nlba, 2 * NS1_NLBA);
	ck_assert_int_eq(io(&g, RIG_WRITE, 1, 2 * NS1_NLBA - 1), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 1, NS1_NLBA + 7), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 1, 2 * NS1_NLBA), -EINVAL);

	/* shrunk: refused, the entry keeps its size and fails */
	ck_assert_int_eq(io(&g, RIG_READ, 2, 0), 0);
	ck_assert_int_eq(sim_ns_resize(g.sim[0], 2, 128 * BS), 0);
	WAIT_FOR(nev(&s) == 3);
	ch = last_change(&s, 2, 0);
	ck_assert_int_eq(ch->kind, NVME_NS_SHRUNK);
	ck_assert_uint_eq(ch->ns.nsid, 2);
	ck_assert_uint_eq(ch->ns.nlba, 128);
	ck_assert_uint_eq(ch->old_nlba, 256);
	ck_assert(ch->ns.failed);
	ck_assert_uint_eq(in->ns[1].nlba, 256);
	ck_assert(in->ns[1].failed);
	ck_assert_int_eq(io(&g, RIG_READ, 2, 0), -EIO);

	/* a changed namespace list that cannot be read: every namespace is
	 * looked at (as when the list overflowed) */
	atomic_store(&s.chlog_fail, true);
	ck_assert_int_eq(sim_ns_resize(g.sim[0], 1, 3 * NS1_NLBA * BS), 0);
	WAIT_FOR(nev(&s) == 4);
	atomic_store(&s.chlog_fail, false);
	ch = last_change(&s, 3, 0);
	ck_assert_int_eq(ch->kind, NVME_NS_GROWN);
	ck_assert_uint_eq(ch->ns.nlba, 3 * NS1_NLBA);
	ck_assert_uint_eq(s.ev[3].nr_changes, 1);

	/* removed: its entry stays, marked; its I/O fails with EIO */
	ck_assert_int_eq(io(&g, RIG_READ, 1, 0), 0);
	ck_assert_int_eq(sim_ns_remove(g.sim[0], 1), 0);
	ck_assert_int_eq(sim_ns_remove(g.sim[0], 1), -ENOENT);
	WAIT_FOR(nev(&s) == 5);
	ch = last_change(&s, 4, 0);
	ck_assert_int_eq(ch->kind, NVME_NS_REMOVED);
	ck_assert_uint_eq(ch->ns.nsid, 1);
	ck_assert(ch->ns.removed);
	ck_assert(ns1->removed);
	ck_assert_uint_eq(in->nr_ns, 2);
	ck_assert_int_eq(io(&g, RIG_READ, 1, 0), -EIO);
	ck_assert_int_eq(io(&g, RIG_WRITE, 1, 5), -EIO);
	ck_assert_int_eq(io(&g, RIG_FLUSH, 1, 0), -EIO);

	struct nvme_ctrl_aen_stats st = stats(&g);
	ck_assert_uint_eq(st.events[NVME_AEN_NS_CHANGED], 5);
	ck_assert_uint_eq(st.ns_changes, 5);

	/* nothing changed since: a rescan reports nothing */
	struct nvme_ns_change out[4];
	unsigned nr = 99;
	ck_assert_int_eq(nvme_ctrl_rescan(g.c[0], out, 4, &nr), 0);
	ck_assert_uint_eq(nr, 0);

	/* a reset after those: it succeeds, the info stays where it is, the
	 * removed one stays removed, the others keep working */
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
	ck_assert_ptr_eq(nvme_ctrl_get_info(g.c[0]), in);
	ck_assert(ns1->removed);
	ck_assert_int_eq(io(&g, RIG_READ, 1, 0), -EIO);
	ck_assert_int_eq(io(&g, RIG_READ, 2, 0), -EIO);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);

	/* a namespace added while no event is armed (nvme_ctrl_rescan finds it) */
	atomic_store(&s.aer_invalid, true);
	ck_assert_int_eq(nvme_ctrl_reset(g.c[0]), 0);
	WAIT_FOR(armed(&g) == 0);
	ck_assert_int_eq(sim_ns_add(g.sim[0], 3, 64 * BS), 0);
	ck_assert_int_eq(nvme_ctrl_rescan(g.c[0], out, 4, &nr), 0);
	ck_assert_uint_eq(nr, 1);
	ck_assert_int_eq(out[0].kind, NVME_NS_ADDED);
	ck_assert_uint_eq(out[0].ns.nsid, 3);
	ck_assert_uint_eq(in->nr_ns, 3);
	ck_assert_int_eq(io(&g, RIG_WRITE, 3, 63), 0);
	ck_assert_ptr_eq(nvme_ctrl_get_info(g.c[0]), in);
	close_rig(&g, &s);
}
END_TEST

/* ---- an event that completed as a reset was asked waits for the reset,
 * then is processed once, with no AER armed twice ---- */
static unsigned aen_waiting(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->aen_lock);
	unsigned n = c->aen_nr;
	pthread_mutex_unlock(&c->aen_lock);
	return n;
}

START_TEST(t_event_across_reset)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, _i & 1);
	struct nvme_ctrl *c = g.c[0];
	WAIT_FOR(armed(&g) == NVME_AER_MAX && atomic_load(&s.aers) == NVME_AER_MAX);
	/* the recovery thread is kept out of the event until the reset is asked */
	pthread_mutex_lock(&c->reset_lock);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, true), 0);
	WAIT_FOR(aen_waiting(c) == 1);
	ck_assert_int_eq(nvme_ctrl_reset_async(c, "test"), 0);
	pthread_mutex_unlock(&c->reset_lock);
	WAIT_FOR(nev(&s) == 1);
	struct nvme_ctrl_rstats rs;
	nvme_ctrl_rstats_get(c, &rs);
	ck_assert_uint_eq(rs.resets_ok, 1); /* processed after the reset */
	ck_assert_int_eq(s.ev[0].kind, NVME_AEN_SMART);
	ck_assert(s.ev[0].health_ok);
	ck_assert_uint_eq(s.ev[0].health.critical_warning, NVME_SMART_CRIT_SPARE);
	WAIT_FOR(armed(&g) == NVME_AER_MAX && atomic_load(&s.aers) == 2 * NVME_AER_MAX);
	rig_sleep_ms(100);
	ck_assert_uint_eq(nev(&s), 1);
	ck_assert_uint_eq(atomic_load(&s.aers), 2 * NVME_AER_MAX); /* the reset's four, no fifth */
	ck_assert_uint_eq(armed(&g), NVME_AER_MAX);
	close_rig(&g, &s);
}
END_TEST

/* ---- a re-attach (same namespaces required) after namespaces were added
 * and removed by events: they do not make it fail ---- */
START_TEST(t_attach_after_changes)
{
	struct rig g;
	struct seen s;
	open_rig(&g, &s, false);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	const struct nvme_ctrl_info *in = nvme_ctrl_get_info(g.c[0]);
	ck_assert_int_eq(sim_ns_add(g.sim[0], 2, 256 * BS), 0);
	WAIT_FOR(nev(&s) == 1);
	ck_assert_int_eq(sim_ns_add(g.sim[0], 3, 64 * BS), 0);
	WAIT_FOR(nev(&s) == 2);
	ck_assert_int_eq(sim_ns_remove(g.sim[0], 1), 0);
	WAIT_FOR(nev(&s) == 3);
	ck_assert_uint_eq(in->nr_ns, 3);
	ck_assert_int_eq(rig_remove(&g, 0), 0);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_REMOVED);
	ck_assert_uint_eq(armed(&g), 0);
	ck_assert_int_eq(rig_attach(&g, 0), 0);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_LIVE);
	ck_assert_ptr_eq(nvme_ctrl_get_info(g.c[0]), in);
	ck_assert(in->ns[0].removed);
	ck_assert(!in->ns[1].failed && !in->ns[2].failed);
	ck_assert_int_eq(io(&g, RIG_WRITE, 2, 255), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 3, 63), 0);
	ck_assert_int_eq(io(&g, RIG_READ, 1, 0), -EIO);
	WAIT_FOR(armed(&g) == NVME_AER_MAX);
	/* namespace 1 attached again with its format: served again */
	ck_assert_int_eq(sim_ns_add(g.sim[0], 1, 512 * BS), 0);
	WAIT_FOR(nev(&s) == 4);
	ck_assert_int_eq(last_change(&s, 3, 0)->kind, NVME_NS_ADDED);
	ck_assert_uint_eq(in->nr_ns, 3);
	ck_assert(!in->ns[0].removed);
	ck_assert_uint_eq(in->ns[0].nlba, 512);
	ck_assert_int_eq(io(&g, RIG_READ, 1, 511), 0);
	close_rig(&g, &s);
}
END_TEST

/* ---- a device that answers AER with Invalid Opcode ---- */
START_TEST(t_no_events)
{
	struct rig g;
	struct seen s;
	memset(&s, 0, sizeof(s));
	/* from the start: set before the controller opens (open_rig clears s) */
	pthread_mutex_init(&s.m, NULL);
	struct rig_opts ro = {.mode = NVME_MODE_POLL, .start = true};
	struct sim_opts *so = &ro.sim[0];
	so->name = "noaen";
	so->nr_ns = 1;
	so->ns[0] = (struct sim_ns_opts){.nlba = NS1_NLBA, .lba_size = BS, .backing = SIM_BACKING_RAM};
	so->admin_hook = count_hook;
	so->hook_arg = &s;
	atomic_store(&s.aer_invalid, true);
	ro.ctrl[0] = (struct nvme_ctrl_opts){.queue_depth = 32};
	ck_assert_int_eq(rig_open(&g, &ro), 0);
	nvme_ctrl_set_aen_cb(g.c[0], aen_cb, &s);
	WAIT_FOR(stats(&g).aer_errors == NVME_AER_MAX);
	rig_sleep_ms(200);
	/* counted, not armed again, and the controller carries on */
	ck_assert_uint_eq(stats(&g).aer_errors, NVME_AER_MAX);
	ck_assert_uint_eq(atomic_load(&s.aers), NVME_AER_MAX);
	ck_assert_uint_eq(armed(&g), 0);
	ck_assert_int_eq(nvme_ctrl_state(g.c[0]), NVME_CTRL_LIVE);
	ck_assert_uint_eq(atomic_load(&g.c[0]->admin_outstanding), 0);
	ck_assert_int_eq(io(&g, RIG_WRITE, 1, 0), 0);
	ck_assert_int_eq(sim_inject_warning(g.sim[0], NVME_SMART_CRIT_SPARE, true), 0);
	rig_sleep_ms(100);
	ck_assert_uint_eq(nev(&s), 0);
	close_rig(&g, &s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("aen");
	TCase *tc = tcase_create("aen");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, t_armed, 0, 2);
	tcase_add_loop_test(tc, t_warning, 0, 2);
	tcase_add_loop_test(tc, t_masked_then_delivered, 0, 2);
	tcase_add_loop_test(tc, t_ns_changes, 0, 2);
	tcase_add_loop_test(tc, t_event_across_reset, 0, 2);
	tcase_add_test(tc, t_attach_after_changes);
	tcase_add_test(tc, t_no_events);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

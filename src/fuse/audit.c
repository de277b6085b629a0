/* audit.c - the audit build's checks (audit.h).  Compiled to nothing
 * unless NVMEFS_AUDIT is defined. */
#include "audit.h"

#ifdef NVMEFS_AUDIT

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "log.h"

#define MASK48 ((1ull << 48) - 1)
#define REQ_BUCKETS 4096u
#define BUF_BUCKETS 1024u
#define HISTORY_MAX 24 /* events logged with a violation */

enum ev_kind { EV_TAKE, EV_ANSWER, EV_DROP, EV_SUBMIT, EV_DONE, EV_BUF_GET, EV_BUF_PUT };
static const char *const ev_names[] = {"take", "answer", "drop", "submit", "complete",
				       "buffer taken", "buffer back"};

struct aud_ev {
	uint64_t t_ns;
	uint64_t unique;
	uint64_t off;       /* request: offset; command: first block */
	uint64_t len;       /* bytes */
	const void *buf;
	uint32_t opcode;    /* FUSE opcode; command: 'R', 'W', 'Z'; buffer: enum aud_buf */
	int32_t err;
	uint8_t kind;
};

/* A request taken and not yet answered. */
struct aud_req {
	struct aud_req *next;
	uint64_t unique;
	uint32_t opcode;
	int32_t slot;       /* its namespace's slot, -1: none */
	uint64_t off;
	uint64_t expect;    /* READ: bytes a success answers; WRITE: the size */
	uint64_t gsum;      /* READ: the whole blocks' write counts at take */
	bool checkable;     /* READ/WRITE on a namespace: expect is known */
};

/* A command in flight. */
struct aud_cmd {
	struct aud_cmd *prev, *next;
	struct fusefs_rx *rx;
	struct fusefs_ns *ns;
	uint64_t unique;
	char op;            /* 'R', 'W', 'Z' */
	uint64_t slba, nlb;
	const uint8_t *buf; /* NULL for Write Zeroes */
	size_t len;
	uint64_t hash;      /* W: the buffer at submission */
	uint64_t gsum;      /* R: the blocks' write counts at submission */
	nvme_io_cb cb;
	void *arg;
};

struct aud_bufrec {
	struct aud_bufrec *next;
	const void *buf;
	size_t len;
	uint8_t kind;
};

struct aud_rx {
	struct aud_req *req[REQ_BUCKETS];
	struct aud_bufrec *bufs[BUF_BUCKETS];
	struct aud_cmd *cmds;
	struct aud_ev ev[AUD_EVENTS];
	uint64_t ev_nr;
	/* figures for the summary (this reactor's) */
	uint64_t replies, read_cmds, write_cmds, blocks, learned, unclean;
};

/* The table of one namespace slot. */
struct aud_ns {
	uint64_t nblk;
	uint32_t shift;
	_Atomic uint64_t *hash;  /* (epoch << 48) | hash48, 0: not known */
	_Atomic uint64_t *ws;    /* (writes begun + ended) << 16 | writes in flight */
	size_t map_len;
};

struct aud {
	struct fusefs *fs;
	struct aud_rx **rx;
	_Atomic(struct aud_ns *) *ns;
	unsigned cap;
	enum aud_inject inj;
	unsigned inj_n;
	atomic_uint inj_seen;
	bool abort_first;
	atomic_uint_fast64_t violations;
	uint64_t zero_hash[17]; /* of a zeroed block, by shift (9..16) */
};

static struct aud *g; /* one front end per process */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the hash: four independent multiply-rotate lanes over 8-byte words
 * (each step a bijection of its lane for a given word), folded and mixed;
 * 64 bits, no table, ~4 words per multiply latency ---- */

#define P1 0x9e3779b185ebca87ull
#define P2 0xc2b2ae3d27d4eb4full
#define P3 0x165667b19e3779f9ull
#define P4 0x85ebca77c2b2ae63ull

static inline uint64_t rotl(uint64_t x, unsigned r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t hash_bytes(const uint8_t *p, size_t len)
{
	uint64_t a = P1, b = P2, c = P3, d = P4, w0, w1, w2, w3, h;
	size_t i = 0;

	/* one 8-byte load per word, straight into a register */
	for (; i + 32 <= len; i += 32) {
		memcpy(&w0, p + i, 8);
		memcpy(&w1, p + i + 8, 8);
		memcpy(&w2, p + i + 16, 8);
		memcpy(&w3, p + i + 24, 8);
		a = rotl((a ^ w0) * P1, 31);
		b = rotl((b ^ w1) * P2, 31);
		c = rotl((c ^ w2) * P3, 31);
		d = rotl((d ^ w3) * P4, 31);
	}
	h = rotl(a, 1) ^ rotl(b, 7) ^ rotl(c, 12) ^ rotl(d, 18);
	for (; i < len; i++)
		h = (h ^ p[i]) * P1;
	h ^= len;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

static uint64_t entry_of(uint64_t h, uint16_t epoch)
{
	uint64_t v = h & MASK48;

	return ((uint64_t)epoch << 48) | (v ? v : 1);
}

/* What may have changed a namespace's content besides our writes: a reset
 * (a volatile cache may lose what it held) or a removal (a power cut). */
static uint16_t ns_epoch(const struct fusefs_ns *ns)
{
	struct nvme_ctrl_rstats st;

	nvme_ctrl_rstats_get(g->fs->o.ctrls[ns->d.ctrl], &st);
	return (uint16_t)(st.resets_started + st.removals + st.cfs_events);
}

/* ---- events and violations ---- */

static struct aud_rx *arx(const struct fusefs_rx *rx)
{
	return g->rx[rx->idx];
}

static void event(struct fusefs_rx *rx, uint8_t kind, uint64_t unique, uint32_t opcode,
		  uint64_t off, uint64_t len, const void *buf, int err)
{
	struct aud_rx *a = arx(rx);
	struct aud_ev *e = &a->ev[a->ev_nr++ % AUD_EVENTS];

	*e = (struct aud_ev){.t_ns = now_ns(), .unique = unique, .off = off, .len = len,
			     .buf = buf, .opcode = opcode, .err = err, .kind = kind};
}

static bool overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
	const uint8_t *x = a, *y = b;

	return a && b && alen && blen && x < y + blen && y < x + alen;
}

/* One violation: the line, the recent events of unique and of [buf,
 * buf + len), the count. */
static void __attribute__((format(printf, 5, 6)))
violation(struct fusefs_rx *rx, uint64_t unique, const void *buf, size_t len, const char *fmt, ...)
{
	struct aud_rx *a = arx(rx);
	char msg[512];
	va_list ap;
	uint64_t n, t = now_ns();
	unsigned shown = 0;
	uint64_t pick[HISTORY_MAX];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&g->violations, 1);
	SCHED_STAT_ADD(rx->sched, audit_violations, 1);
	log_err("audit: VIOLATION on reactor %u: %s (request %" PRIu64 ", buffer %p+%zu)", rx->idx,
		msg, unique, buf, len);
	/* newest first while picking, oldest first when logged */
	for (n = a->ev_nr; n > 0 && a->ev_nr - n < AUD_EVENTS && shown < HISTORY_MAX; n--) {
		const struct aud_ev *e = &a->ev[(n - 1) % AUD_EVENTS];

		if ((unique && e->unique == unique) || (buf && e->buf == buf) ||
		    overlaps(e->buf, e->len, buf, len))
			pick[shown++] = n - 1;
	}
	while (shown--) {
		const struct aud_ev *e = &a->ev[pick[shown] % AUD_EVENTS];

		log_err("audit:   %8.3f ms ago: %s: request %" PRIu64 " op %u off %" PRIu64
			" len %" PRIu64 " buf %p err %d",
			(double)(t - e->t_ns) / 1e6, ev_names[e->kind], e->unique, e->opcode, e->off,
			e->len, e->buf, e->err);
	}
	if (g->abort_first) {
		log_err("audit: NVMEFS_AUDIT_ABORT is set: aborting on the first violation");
		abort();
	}
}

/* ---- the per-block table ---- */

static struct aud_ns *ns_table(struct fusefs_ns *ns, bool make)
{
	unsigned slot = (unsigned)(ns - g->fs->ns.slot);
	struct aud_ns *n, *none = NULL;

	if (slot >= g->cap)
		return NULL;
	n = atomic_load(&g->ns[slot]);
	if (n || !make)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->shift = ns->shift;
	n->nblk = fsns_size(ns) >> ns->shift;
	if (n->nblk > AUD_MAX_BLOCKS)
		n->nblk = AUD_MAX_BLOCKS;
	n->map_len = (size_t)n->nblk * 16;
	void *m = n->map_len ? mmap(NULL, n->map_len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
			     : MAP_FAILED;
	if (m == MAP_FAILED) {
		free(n);
		return NULL;
	}
	n->hash = m;
	n->ws = (_Atomic uint64_t *)((char *)m + (size_t)n->nblk * 8);
	if (!atomic_compare_exchange_strong(&g->ns[slot], &none, n)) {
		munmap(m, n->map_len);
		free(n);
		return none;
	}
	return n;
}

/* Blocks [b0, b0 + nb) clamped to what the table covers: false if none. */
static bool clamp(const struct aud_ns *n, uint64_t *b0, uint64_t *nb)
{
	if (!n || *b0 >= n->nblk)
		return false;
	if (*nb > n->nblk - *b0)
		*nb = n->nblk - *b0;
	return *nb != 0;
}

/* The writes begun and ended on the blocks so far; *busy: one in flight. */
static uint64_t wsum(const struct aud_ns *n, uint64_t b0, uint64_t nb, bool *busy)
{
	uint64_t s = 0;

	*busy = false;
	if (!clamp(n, &b0, &nb))
		return 0;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t v = atomic_load(&n->ws[b0 + i]);

		s += v >> 16;
		*busy |= (v & 0xffff) != 0;
	}
	return s;
}

static void ws_add(struct aud_ns *n, uint64_t b0, uint64_t nb, uint64_t d)
{
	if (!clamp(n, &b0, &nb))
		return;
	for (uint64_t i = 0; i < nb; i++)
		atomic_fetch_add(&n->ws[b0 + i], d);
}

/* Data of nb blocks from b0 against the table: no write began or ended on
 * them since gsum0 was taken (else either content is right: nothing to
 * compare).  A block not known (or known before the last reset) is
 * learned. */
static void check_blocks(struct fusefs_rx *rx, struct fusefs_ns *ns, uint64_t b0, uint64_t nb,
			 const uint8_t *data, uint64_t gsum0, uint64_t unique, const char *what)
{
	struct aud_rx *a = arx(rx);
	struct aud_ns *n = ns_table(ns, true);
	size_t lsz = (size_t)1 << ns->shift;
	uint64_t bad = UINT64_MAX, bad_want = 0, bad_got = 0;
	unsigned nbad = 0;
	bool busy;
	uint16_t ep;

	if (!clamp(n, &b0, &nb))
		return;
	if (wsum(n, b0, nb, &busy) != gsum0 || busy) {
		a->unclean++;
		return;
	}
	ep = ns_epoch(ns);
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t h = entry_of(hash_bytes(data + i * lsz, lsz), ep);
		uint64_t e = atomic_load(&n->hash[b0 + i]);

		a->blocks++;
		if (!e || (uint16_t)(e >> 48) != ep) {
			if (atomic_compare_exchange_strong(&n->hash[b0 + i], &e, h))
				a->learned++;
			continue;
		}
		if (e != h) {
			if (!nbad++) {
				bad = b0 + i;
				bad_want = e & MASK48;
				bad_got = h & MASK48;
			}
		}
	}
	/* a write that began after the first look changes the table under the
	 * comparison: only a window still clean says anything */
	if (!nbad || wsum(n, b0, nb, &busy) != gsum0 || busy)
		return;
	violation(rx, unique, data + (bad - b0) * lsz, lsz,
		  "%s: %u of %" PRIu64 " block(s) of %s from block %" PRIu64
		  " are not what was last written there (first: block %" PRIu64
		  ", hash %012" PRIx64 ", the last write's %012" PRIx64 ")",
		  what, nbad, nb, ns->name, b0, bad, bad_got, bad_want);
}

/* The last write to the blocks completed with data (NULL: zeroes), or
 * failed (unknown now). */
static void record_write(struct fusefs_ns *ns, uint64_t b0, uint64_t nb, const uint8_t *data,
			 bool ok)
{
	struct aud_ns *n = ns_table(ns, true);
	size_t lsz = (size_t)1 << ns->shift;
	uint16_t ep = ns_epoch(ns);

	if (!clamp(n, &b0, &nb))
		return;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t h = 0;

		if (ok)
			h = entry_of(data ? hash_bytes(data + i * lsz, lsz) : g->zero_hash[ns->shift],
				     ep);
		atomic_store(&n->hash[b0 + i], h);
	}
}

/* ---- requests ---- */

static struct aud_req **req_slot(struct aud_rx *a, uint64_t unique)
{
	struct aud_req **p = &a->req[(unique ^ (unique >> 12)) % REQ_BUCKETS];

	while (*p && (*p)->unique != unique)
		p = &(*p)->next;
	return p;
}

/* Whole blocks of [off, off + len): [*b0, *b0 + *nb) and where the first
 * begins in the bytes (*skip). */
static void whole_blocks(uint64_t off, uint64_t len, unsigned shift, uint64_t *b0, uint64_t *nb,
			 uint64_t *skip)
{
	uint64_t lsz = 1ull << shift, s = (off + lsz - 1) >> shift, e = (off + len) >> shift;

	*b0 = s;
	*nb = e > s ? e - s : 0;
	*skip = (s << shift) - off;
}

void aud_take(struct fusefs_rx *rx, const struct fw_req *r, int rc, const struct fw_msg *m)
{
	struct aud_rx *a = arx(rx);
	struct aud_req **p = req_slot(a, r->unique), *q;
	uint32_t op = m->h.opcode;

	event(rx, EV_TAKE, r->unique, op,
	      op == FUSE_READ ? m->in.read.offset : op == FUSE_WRITE ? m->in.write.offset : 0,
	      op == FUSE_READ ? m->in.read.size : op == FUSE_WRITE ? m->data_len : 0,
	      op == FUSE_WRITE ? m->data : NULL, rc);
	if (*p) {
		violation(rx, r->unique, NULL, 0, "request taken twice while in flight (opcode %u)",
			  op);
		return;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	q->unique = r->unique;
	q->opcode = op;
	q->slot = -1;
	*p = q;
	if (rc != FW_OK || (op != FUSE_READ && op != FUSE_WRITE))
		return;
	struct fusefs_ns *ns = fsns_by_ino(&rx->fs->ns, m->h.nodeid);

	if (!ns)
		return;
	uint64_t nsz = fsns_size(ns);

	q->slot = (int32_t)(ns - rx->fs->ns.slot);
	if (op == FUSE_READ) {
		uint64_t size = m->in.read.size, off = m->in.read.offset, b0, nb, skip;
		bool busy;

		if (size > FUSEFS_MAX_IO)
			size = FUSEFS_MAX_IO;
		q->off = off;
		q->expect = off >= nsz ? 0 : size < nsz - off ? size : nsz - off;
		whole_blocks(off, q->expect, ns->shift, &b0, &nb, &skip);
		q->gsum = wsum(ns_table(ns, true), b0, nb, &busy);
	} else {
		uint64_t size = m->data_len, off = m->in.write.offset;

		q->off = off;
		if (off < nsz && size > nsz - off)
			size = nsz - off;
		if (size > FUSEFS_MAX_IO)
			size = FUSEFS_MAX_IO;
		q->expect = size;
	}
	q->checkable = true;
}

static struct aud_req *req_end(struct fusefs_rx *rx, const struct fw_req *r, const char *how)
{
	struct aud_rx *a = arx(rx);
	struct aud_req **p = req_slot(a, r->unique), *q = *p;

	if (!q) {
		violation(rx, r->unique, NULL, 0,
			  "request %s without being in flight: answered twice, or never taken "
			  "(opcode %u)",
			  how, r->opcode);
		return NULL;
	}
	*p = q->next;
	return q;
}

void aud_drop(struct fusefs_rx *rx, const struct fw_req *r)
{
	event(rx, EV_DROP, r->unique, r->opcode, 0, 0, NULL, 0);
	free(req_end(rx, r, "dropped"));
}

void aud_answer(struct fusefs_rx *rx, const struct fw_req *r, int error, const struct iovec *iov,
		int iovcnt)
{
	struct aud_rx *a = arx(rx);
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	event(rx, EV_ANSWER, r->unique, r->opcode, 0, total, iovcnt ? iov[0].iov_base : NULL,
	      error);
	struct aud_req *q = req_end(rx, r, "answered");

	if (!q)
		return;
	/* the answer's bytes must not be a buffer a command still uses */
	for (int i = 0; i < iovcnt; i++)
		for (struct aud_cmd *c = a->cmds; c; c = c->next)
			if (overlaps(c->buf, c->len, iov[i].iov_base, iov[i].iov_len))
				violation(rx, r->unique, iov[i].iov_base, iov[i].iov_len,
					  "answer sent from a buffer that command %c of request %" PRIu64
					  " in flight uses",
					  c->op, c->unique);
	if (error || !q->checkable)
		goto out;
	struct fusefs_ns *ns = &rx->fs->ns.slot[q->slot];

	if (q->opcode == FUSE_READ) {
		uint64_t b0, nb, skip;

		a->replies++;
		if (total != q->expect) {
			violation(rx, r->unique, iovcnt ? iov[0].iov_base : NULL, total,
				  "read of %s at %" PRIu64 " answered with %zu bytes, %" PRIu64
				  " expected",
				  ns->name, q->off, total, q->expect);
			goto out;
		}
		if (iovcnt != 1)
			goto out;
		whole_blocks(q->off, q->expect, ns->shift, &b0, &nb, &skip);
		if (nb)
			check_blocks(rx, ns, b0, nb, (const uint8_t *)iov[0].iov_base + skip, q->gsum,
				     r->unique, "read answer");
	} else if (q->opcode == FUSE_WRITE) {
		struct fuse_write_out w = {0};

		if (iovcnt == 1 && iov[0].iov_len == sizeof(w))
			memcpy(&w, iov[0].iov_base, sizeof(w));
		if (iovcnt != 1 || iov[0].iov_len != sizeof(w) || w.size != q->expect)
			violation(rx, r->unique, NULL, 0,
				  "write of %" PRIu64 " bytes of %s at %" PRIu64
				  " answered with size %u",
				  q->expect, ns->name, q->off, w.size);
	}
out:
	free(q);
}

/* ---- buffers ---- */

static struct aud_bufrec **buf_slot(struct aud_rx *a, const void *buf)
{
	uintptr_t k = (uintptr_t)buf >> 12;
	struct aud_bufrec **p = &a->bufs[(k ^ (k >> 10)) % BUF_BUCKETS];

	while (*p && (*p)->buf != buf)
		p = &(*p)->next;
	return p;
}

void aud_buf_get(struct fusefs_rx *rx, enum aud_buf kind, const void *buf, size_t len)
{
	struct aud_rx *a = arx(rx);
	struct aud_bufrec **p, *b;

	if (!buf)
		return;
	event(rx, EV_BUF_GET, 0, kind, 0, len, buf, 0);
	p = buf_slot(a, buf);
	if (*p) {
		violation(rx, 0, buf, len, "%s buffer handed out while held (taken for %zu bytes)",
			  kind == AUD_BUF_LAND ? "landing" : "DMA", (*p)->len);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->buf = buf;
	b->len = len;
	b->kind = (uint8_t)kind;
	*p = b;
}

void aud_buf_put(struct fusefs_rx *rx, enum aud_buf kind, const void *buf, size_t len)
{
	struct aud_rx *a = arx(rx);
	struct aud_bufrec **p, *b;

	if (!buf)
		return;
	event(rx, EV_BUF_PUT, 0, kind, 0, len, buf, 0);
	p = buf_slot(a, buf);
	b = *p;
	if (!b || b->kind != kind) {
		violation(rx, 0, buf, len, "%s buffer given back twice, or never taken",
			  kind == AUD_BUF_LAND ? "landing" : "DMA");
		return;
	}
	*p = b->next;
	free(b);
}

/* ---- commands ---- */

static void cmd_unlink(struct aud_rx *a, struct aud_cmd *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		a->cmds = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

static uint64_t buf_hash(const uint8_t *buf, size_t len)
{
	return buf ? hash_bytes(buf, len) : 0;
}

static void cmd_done(void *arg, int err, uint16_t status)
{
	struct aud_cmd *c = arg;
	struct fusefs_rx *rx = c->rx;
	struct aud_rx *a = arx(rx);

	cmd_unlink(a, c);
	event(rx, EV_DONE, c->unique, (uint32_t)c->op, c->slba, c->len, c->buf, err);
	switch (c->op) {
	case 'R':
		a->read_cmds++;
		if (!err)
			check_blocks(rx, c->ns, c->slba, c->nlb, c->buf, c->gsum, c->unique,
				     "read command");
		break;
	case 'W':
		a->write_cmds++;
		if (buf_hash(c->buf, c->len) != c->hash)
			violation(rx, c->unique, c->buf, c->len,
				  "write buffer changed between the submission and the completion "
				  "(blocks %" PRIu64 "+%" PRIu64 " of %s)",
				  c->slba, c->nlb, c->ns->name);
		record_write(c->ns, c->slba, c->nlb, c->buf, !err);
		ws_add(ns_table(c->ns, true), c->slba, c->nlb, (1ull << 16) - 1);
		break;
	default:
		record_write(c->ns, c->slba, c->nlb, NULL, !err);
		ws_add(ns_table(c->ns, true), c->slba, c->nlb, (1ull << 16) - 1);
		break;
	}
	nvme_io_cb cb = c->cb;
	void *cb_arg = c->arg;

	free(c);
	cb(cb_arg, err, status);
}

static struct aud_cmd *cmd_new(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
			       char op, uint64_t slba, uint64_t nlb, const void *buf, size_t len,
			       nvme_io_cb cb, void *arg)
{
	struct aud_rx *a = arx(rx);
	struct aud_cmd *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	*c = (struct aud_cmd){.rx = rx, .ns = ns, .unique = unique, .op = op, .slba = slba,
			      .nlb = nlb, .buf = buf, .len = len, .cb = cb, .arg = arg};
	for (struct aud_cmd *o = a->cmds; o && buf; o = o->next)
		if (overlaps(o->buf, o->len, buf, len))
			violation(rx, unique, buf, len,
				  "command %c's buffer overlaps that of command %c of request %" PRIu64
				  " in flight (%p+%zu)",
				  op, o->op, o->unique, (const void *)o->buf, o->len);
	event(rx, EV_SUBMIT, unique, (uint32_t)op, slba, len, buf, 0);
	return c;
}

static int cmd_issued(struct fusefs_rx *rx, struct aud_cmd *c, int err)
{
	struct aud_rx *a = arx(rx);

	if (err) {
		if (c->op != 'R')
			ws_add(ns_table(c->ns, true), c->slba, c->nlb, (uint64_t)-((1ll << 16) + 1));
		free(c);
		return err;
	}
	c->next = a->cmds;
	if (a->cmds)
		a->cmds->prev = c;
	a->cmds = c;
	return 0;
}

int aud_qpair_read(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
		   struct nvme_qpair *qp, uint64_t slba, void *buf, size_t len, nvme_io_cb cb,
		   void *arg)
{
	uint64_t nlb = len >> ns->shift;
	struct aud_cmd *c = cmd_new(rx, unique, ns, 'R', slba, nlb, buf, len, cb, arg);
	bool busy;

	if (!c)
		return -ENOMEM;
	c->gsum = wsum(ns_table(ns, true), slba, nlb, &busy);
	return cmd_issued(rx, c, nvme_qpair_read(qp, ns->d.nsid, slba, buf, len, cmd_done, c));
}

int aud_qpair_write(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
		    struct nvme_qpair *qp, uint64_t slba, const void *buf, size_t len, bool fua,
		    nvme_io_cb cb, void *arg)
{
	uint64_t nlb = len >> ns->shift;
	struct aud_cmd *c = cmd_new(rx, unique, ns, 'W', slba, nlb, buf, len, cb, arg);
	int err;

	if (!c)
		return -ENOMEM;
	c->hash = buf_hash(buf, len);
	ws_add(ns_table(ns, true), slba, nlb, (1ull << 16) + 1);
	err = nvme_qpair_write(qp, ns->d.nsid, slba, buf, len, fua, cmd_done, c);
	if (!err && aud_inject(rx, AUD_INJ_SCRIBBLE))
		((uint8_t *)buf)[0] ^= 0x01;
	return cmd_issued(rx, c, err);
}

int aud_qpair_write_zeroes(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
			   struct nvme_qpair *qp, uint64_t slba, uint64_t nlb, bool deac,
			   nvme_io_cb cb, void *arg)
{
	struct aud_cmd *c = cmd_new(rx, unique, ns, 'Z', slba, nlb, NULL, 0, cb, arg);

	if (!c)
		return -ENOMEM;
	ws_add(ns_table(ns, true), slba, nlb, (1ull << 16) + 1);
	return cmd_issued(rx, c,
			  nvme_qpair_write_zeroes(qp, ns->d.nsid, slba, nlb, deac, cmd_done, c));
}

/* ---- injection, set-up ---- */

bool aud_inject(struct fusefs_rx *rx, enum aud_inject kind)
{
	(void)rx;
	if (!g || g->inj != kind)
		return false;
	return atomic_fetch_add(&g->inj_seen, 1) + 1 == g->inj_n;
}

static void parse_inject(struct aud *a)
{
	static const char *const names[] = {[AUD_INJ_TWICE] = "twice", [AUD_INJ_SHORT] = "short",
					    [AUD_INJ_CORRUPT] = "corrupt",
					    [AUD_INJ_SCRIBBLE] = "scribble"};
	const char *s = getenv("NVMEFS_AUDIT_INJECT");

	if (!s || !*s)
		return;
	for (unsigned k = AUD_INJ_TWICE; k <= AUD_INJ_SCRIBBLE; k++) {
		size_t n = strlen(names[k]);

		if (!strncmp(s, names[k], n) && s[n] == ':') {
			a->inj = (enum aud_inject)k;
			a->inj_n = (unsigned)strtoul(s + n + 1, NULL, 10);
			log_warn("audit: injecting '%s' at occurrence %u (NVMEFS_AUDIT_INJECT)",
				 names[k], a->inj_n);
			return;
		}
	}
	log_err("audit: NVMEFS_AUDIT_INJECT=%s not understood (twice, short, corrupt or scribble, "
		":N)",
		s);
}

int aud_create(struct fusefs *fs)
{
	struct aud *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->fs = fs;
	a->cap = fs->ns.cap;
	a->rx = calloc(fs->nr_rx, sizeof(*a->rx));
	a->ns = calloc(a->cap ? a->cap : 1, sizeof(*a->ns));
	if (!a->rx || !a->ns)
		goto nomem;
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		a->rx[i] = calloc(1, sizeof(*a->rx[i]));
		if (!a->rx[i])
			goto nomem;
	}
	for (unsigned s = 9; s <= 16; s++) {
		uint8_t *z = calloc(1, (size_t)1 << s);

		if (!z)
			goto nomem;
		a->zero_hash[s] = hash_bytes(z, (size_t)1 << s);
		free(z);
	}
	a->abort_first = getenv("NVMEFS_AUDIT_ABORT") && !strcmp(getenv("NVMEFS_AUDIT_ABORT"), "1");
	parse_inject(a);
	g = a;
	log_info("audit: on: read answers and read commands checked against the last write of "
		 "each block (the first %llu blocks of each namespace), buffers and answers "
		 "accounted for%s",
		 AUD_MAX_BLOCKS, a->abort_first ? "; aborting on the first violation" : "");
	return 0;
nomem:
	for (unsigned i = 0; a->rx && i < fs->nr_rx; i++)
		free(a->rx[i]);
	free(a->rx);
	free(a->ns);
	free(a);
	return -ENOMEM;
}

void aud_destroy(struct fusefs *fs)
{
	struct aud *a = g;
	uint64_t rep = 0, rc = 0, wc = 0, bl = 0, le = 0, un = 0;

	if (!a || a->fs != fs)
		return;
	for (unsigned i = 0; i < fs->nr_rx; i++) {
		struct aud_rx *x = a->rx[i];

		rep += x->replies;
		rc += x->read_cmds;
		wc += x->write_cmds;
		bl += x->blocks;
		le += x->learned;
		un += x->unclean;
		for (unsigned k = 0; k < REQ_BUCKETS; k++)
			while (x->req[k]) {
				struct aud_req *q = x->req[k];

				x->req[k] = q->next;
				free(q);
			}
		for (unsigned k = 0; k < BUF_BUCKETS; k++)
			while (x->bufs[k]) {
				struct aud_bufrec *b = x->bufs[k];

				x->bufs[k] = b->next;
				free(b);
			}
		while (x->cmds) {
			struct aud_cmd *c = x->cmds;

			x->cmds = c->next;
			free(c);
		}
		free(x);
	}
	log_info("audit: %" PRIuFAST64 " violation(s); %" PRIu64 " read answers and %" PRIu64
		 " read commands checked (%" PRIu64 " blocks compared, %" PRIu64
		 " learned from a first read, %" PRIu64 " checks skipped for a write in flight), "
		 "%" PRIu64 " write commands",
		 atomic_load(&a->violations), rep, rc, bl, le, un, wc);
	for (unsigned s = 0; s < a->cap; s++) {
		struct aud_ns *n = atomic_load(&a->ns[s]);

		if (n) {
			munmap(n->hash, n->map_len);
			free(n);
		}
	}
	free(a->ns);
	free(a->rx);
	free(a);
	g = NULL;
}

#endif

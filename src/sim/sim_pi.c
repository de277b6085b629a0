/* sim_pi.c - end-to-end protection information (see sim_pi.h) and the
 * software controller's Read and Write of a namespace with metadata (see
 * sim_priv.h, sim_md_rw).
 */
#include "sim_priv.h"
#include "sim_pi.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------- CRCs */

#define CRC16_T10DIF_POLY 0x8bb7u                /* x^16 + x^15 + x^11 + ... + 1 */
#define CRC64_NVME_POLY_R 0x9a6c9329ac4bc9b5ull  /* AD93D23594C93659h, bit-reversed */

static uint16_t crc16_tab[256];
static uint64_t crc64_tab[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)(i << 8);
		uint64_t r = i;

		for (unsigned b = 0; b < 8; b++) {
			c = (uint16_t)(c & 0x8000 ? (unsigned)(c << 1) ^ CRC16_T10DIF_POLY : (unsigned)(c << 1));
			r = r & 1 ? (r >> 1) ^ CRC64_NVME_POLY_R : r >> 1;
		}
		crc16_tab[i] = c;
		crc64_tab[i] = r;
	}
}

uint16_t sim_crc16_t10dif(uint16_t crc, const void *p, size_t len)
{
	const uint8_t *b = p;

	pthread_once(&crc_once, crc_tables);
	while (len--)
		crc = (uint16_t)((crc << 8) ^ crc16_tab[((crc >> 8) ^ *b++) & 0xff]);
	return crc;
}

uint64_t sim_crc64_nvme_update(uint64_t state, const void *p, size_t len)
{
	const uint8_t *b = p;

	pthread_once(&crc_once, crc_tables);
	while (len--)
		state = (state >> 8) ^ crc64_tab[(state ^ *b++) & 0xff];
	return state;
}

/* ---------------------------------------------------------------- tuples */

uint64_t sim_pi_guard_add(const struct sim_pi_fmt *f, uint64_t g, const void *p, size_t len)
{
	return f->g64 ? sim_crc64_nvme_update(g, p, len) : sim_crc16_t10dif((uint16_t)g, p, len);
}

uint64_t sim_pi_guard(const struct sim_pi_fmt *f, const void *data, size_t lbs, const uint8_t *md)
{
	uint64_t g = sim_pi_guard_add(f, sim_pi_guard_start(f), data, lbs);

	if (!f->first)
		g = sim_pi_guard_add(f, g, md, sim_pi_off(f));
	return sim_pi_guard_end(f, g);
}

static uint64_t be_get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void be_put(uint8_t *p, unsigned n, uint64_t v)
{
	for (unsigned i = n; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

void sim_pi_get(const struct sim_pi_fmt *f, const uint8_t *md, struct sim_pi_tuple *t)
{
	const uint8_t *p = md + sim_pi_off(f);
	unsigned gs = f->g64 ? 8 : 2;

	t->guard = be_get(p, gs);
	t->app = (uint16_t)be_get(p + gs, 2);
	t->ref = be_get(p + gs + 2, f->g64 ? 6 : 4);
}

void sim_pi_put(const struct sim_pi_fmt *f, uint8_t *md, const struct sim_pi_tuple *t)
{
	uint8_t *p = md + sim_pi_off(f);
	unsigned gs = f->g64 ? 8 : 2;

	be_put(p, gs, t->guard);
	be_put(p + gs, 2, t->app);
	be_put(p + gs + 2, f->g64 ? 6 : 4, t->ref);
}

bool sim_pi_escape(const struct sim_pi_fmt *f, const struct sim_pi_tuple *t)
{
	if (t->app != 0xffff)
		return false;
	return f->type != 3 || t->ref == sim_pi_ref_mask(f);
}

uint16_t sim_pi_check(const struct sim_pi_fmt *f, const struct sim_pi_tuple *t, uint64_t guard,
                      uint32_t prinfo, uint32_t cdw15, uint64_t ref)
{
	uint16_t lbat = (uint16_t)cdw15, lbatm = (uint16_t)(cdw15 >> 16);

	if (sim_pi_escape(f, t))
		return 0;
	if ((prinfo & NVME_RW_PRCHK_GUARD) && t->guard != guard)
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_GUARD_CHECK);
	if ((prinfo & NVME_RW_PRCHK_APP) && (t->app & lbatm) != (lbat & lbatm))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_APPTAG_CHECK);
	if ((prinfo & NVME_RW_PRCHK_REF) && t->ref != (ref & sim_pi_ref_mask(f)))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_REFTAG_CHECK);
	return 0;
}

/* ------------------------------------------------ commands with metadata */

/* The reference tag a command names: cdw14, and with the 64-bit guard
 * cdw3 15:0 above it (no storage tag). */
static uint64_t sim_md_ref(const struct nvme_sqe *c, const struct sim_ns *ns)
{
	uint64_t ref = c->cdw14;

	if (ns->pi.g64)
		ref |= (uint64_t)(c->cdw3 & 0xffff) << 32;
	return ref;
}

uint16_t sim_md_prinfo_ok(const struct nvme_sqe *c, const struct sim_ns *ns, bool zeroes)
{
	uint32_t pr = c->cdw12 & NVME_RW_PRINFO_MASK;
	uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
	const uint16_t bad = NVME_STATUS_MAKE(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI);

	if (!ns->pi.type)
		return 0; /* PRINFO means nothing without PI */
	/* Write Zeroes checks nothing: it has no data */
	if (zeroes && (pr & ~NVME_RW_PRACT))
		return bad;
	/* Type 1: the reference tag is the LBA's low bits */
	if (ns->pi.type == 1 && (pr & NVME_RW_PRCHK_REF) &&
	    sim_md_ref(c, ns) != (slba & sim_pi_ref_mask(&ns->pi)))
		return bad;
	return 0;
}

/* Bytes between host memory and the media of ns at byte offset off. */
static int sim_media_io(struct sim_ns *ns, bool write, uint8_t *p, size_t n, uint64_t off)
{
	if (ns->backing == SIM_BACKING_RAM) {
		if (write)
			memcpy(ns->mem + off, p, n);
		else
			memcpy(p, ns->mem + off, n);
		return 0;
	}
	while (n) {
		ssize_t k = write ? pwrite(ns->fd, p, n, (off_t)off) : pread(ns->fd, p, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0) { /* past the end of a sparse file: zeroes */
			if (write)
				return -EIO;
			memset(p, 0, n);
			return 0;
		}
		p += k, n -= (size_t)k, off += (uint64_t)k;
	}
	return 0;
}

/* A FILE namespace's metadata of blocks [lba, lba + nlb) written through. */
static int sim_md_put(struct sim_ns *ns, uint64_t lba, uint64_t nlb)
{
	const uint8_t *p = ns->md + lba * ns->ms;
	size_t len = (size_t)nlb * ns->ms;
	off_t off = (off_t)(lba * ns->ms);

	if (ns->md_fd < 0)
		return 0;
	while (len) {
		ssize_t k = pwrite(ns->md_fd, p, len, off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		p += k, len -= (size_t)k, off += k;
	}
	return 0;
}

int sim_md_sync(struct sim_ns *ns)
{
	return ns->md_fd >= 0 && fdatasync(ns->md_fd) ? -errno : 0;
}

/* One Read or Write moving through a namespace with metadata.  The data
 * buffer holds unit bytes per block: its data, then with inl its metadata;
 * the PRP walk hands its runs over in order, so blk and in say where the
 * next byte belongs. */
struct sim_mv {
	struct sim_ns *ns;
	const struct nvme_sqe *c;
	bool write;
	bool check;     /* a Write without PRACT, first pass: check the host's PI, move nothing */
	bool pract;
	bool inl;       /* the metadata crosses interleaved after each block's data */
	size_t bs, unit;
	uint64_t at;    /* media LBA of the command's first block */
	uint8_t *hmd;   /* MPTR's buffer when separate metadata crosses, else NULL */
	uint64_t ref;   /* the command's initial reference tag */
	uint64_t blk;   /* block of the command being moved */
	size_t in;      /* bytes of its unit done */
	uint64_t g;     /* its running guard */
	uint16_t status; /* the first PI check that failed */
	int err;         /* a FILE namespace's I/O error */
	uint8_t tmp[SIM_MS_MAX]; /* check pass with inl: the block's metadata as sent */
};

/* The block mv->blk is complete: generate or check its PI. */
static void sim_mv_block(struct sim_mv *m)
{
	struct sim_ns *ns = m->ns;
	const struct sim_pi_fmt *f = &ns->pi;
	uint8_t *md;

	if (!f->type || (m->write && !m->pract && !m->check) || (!m->write && m->status))
		return; /* no PI; a PRACT=0 Write's PI was checked in the first pass */
	if (m->check)
		md = m->inl ? m->tmp : m->hmd + m->blk * ns->ms;
	else
		md = ns->md + (m->at + m->blk) * ns->ms;
	uint64_t g = m->g;
	if (!f->first)
		g = sim_pi_guard_add(f, g, md, sim_pi_off(f));
	g = sim_pi_guard_end(f, g);
	uint64_t ref = (m->ref + (f->type == 3 ? 0 : m->blk)) & sim_pi_ref_mask(f);
	struct sim_pi_tuple t;
	if (m->write && m->pract) {
		t = (struct sim_pi_tuple){.guard = g, .app = (uint16_t)m->c->cdw15, .ref = ref};
		sim_pi_put(f, md, &t);
		return;
	}
	if (m->status)
		return;
	sim_pi_get(f, md, &t);
	m->status = sim_pi_check(f, &t, g, m->c->cdw12, m->c->cdw15, ref);
}

static int sim_mv_seg(void *ctx, uint8_t *p, size_t len, size_t off)
{
	struct sim_mv *m = ctx;
	struct sim_ns *ns = m->ns;

	(void)off; /* runs arrive in order: blk and in track the position */
	while (len) {
		size_t n;

		if (m->in < m->bs) {
			n = len < m->bs - m->in ? len : m->bs - m->in;
			uint64_t mo = ((m->at + m->blk) << ns->lba_shift) + m->in;
			if (m->write && ns->pi.type)
				m->g = sim_pi_guard_add(&ns->pi, m->g, p, n);
			if (!m->check && (m->err = sim_media_io(ns, m->write, p, n, mo)))
				return 1;
			if (!m->write && ns->pi.type)
				m->g = sim_pi_guard_add(&ns->pi, m->g, p, n);
		} else {
			size_t k = m->in - m->bs;
			n = len < ns->ms - k ? len : ns->ms - k;
			uint8_t *md = m->check ? m->tmp : ns->md + (m->at + m->blk) * ns->ms;
			if (m->write)
				memcpy(md + k, p, n);
			else
				memcpy(p, md + k, n);
		}
		p += n, len -= n, m->in += n;
		if (m->in == m->unit) {
			sim_mv_block(m);
			m->blk++;
			m->in = 0;
			m->g = sim_pi_guard_start(&ns->pi);
		}
	}
	return 0;
}

uint16_t sim_md_rw(struct sim *s, const struct nvme_sqe *c, struct sim_ns *ns, bool write,
                   uint64_t at)
{
	uint32_t nlb = (c->cdw12 & 0xffff) + 1u;
	bool pract = ns->pi.type && (c->cdw12 & NVME_RW_PRACT);
	/* PRACT with metadata of just the PI: it never crosses the bus */
	bool xfer = !(pract && ns->ms == sim_pi_size(&ns->pi));
	struct sim_mv m = {
	    .ns = ns,
	    .c = c,
	    .write = write,
	    .pract = pract,
	    .inl = xfer && ns->md_ext,
	    .bs = ns->lba_size,
	    .at = at,
	    .ref = sim_md_ref(c, ns),
	    .g = sim_pi_guard_start(&ns->pi),
	};
	m.unit = m.bs + (m.inl ? ns->ms : 0);
	size_t len = (size_t)nlb * m.unit, mlen = (size_t)nlb * ns->ms;
	uint16_t st = sim_md_prinfo_ok(c, ns, false);

	if (st)
		return st; /* nothing moved: the range's pre-images are its content */
	if (xfer && !m.inl && !(m.hmd = sim_xlate(s, c->mptr, mlen)))
		return NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	if (write && ns->pi.type && !pract) {
		/* the host's PI is checked before anything is written */
		m.check = true;
		st = sim_xfer(s, c, len, sim_mv_seg, &m);
		if (st || m.status)
			return st ? st : m.status;
		m.check = false;
		m.blk = 0;
		m.in = 0;
		m.g = sim_pi_guard_start(&ns->pi);
	}
	if (write && m.hmd)
		memcpy(ns->md + at * ns->ms, m.hmd, mlen);
	st = sim_xfer(s, c, len, sim_mv_seg, &m);
	if (st == NVME_STATUS_MAKE(NVME_SCT_GENERIC, NVME_SC_INTERNAL) && m.err)
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, write ? NVME_SC_WRITE_FAULT : NVME_SC_READ_ERROR);
	if (st)
		return st;
	if (!write && m.hmd)
		memcpy(m.hmd, ns->md + at * ns->ms, mlen);
	if (write && sim_md_put(ns, at, nlb))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	if (write && (c->cdw12 & NVME_RW_FUA) && sim_md_sync(ns))
		return NVME_STATUS_MAKE(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
	return m.status;
}

int sim_md_zeroed(struct sim_ns *ns, uint64_t slba, uint64_t nlb, const struct nvme_sqe *c)
{
	static const uint8_t zero[SIM_PAGE];
	const struct sim_pi_fmt *f = &ns->pi;
	uint8_t *md = ns->md + slba * ns->ms;

	if (f->type && c && (c->cdw12 & NVME_RW_PRACT)) {
		/* zeroed data and metadata, and the PI of that */
		uint8_t zmd[SIM_MS_MAX] = {0};
		uint64_t g = sim_pi_guard(f, zero, ns->lba_size, zmd);
		uint64_t ref = sim_md_ref(c, ns);

		memset(md, 0, (size_t)nlb * ns->ms);
		for (uint64_t i = 0; i < nlb; i++) {
			struct sim_pi_tuple t = {
			    .guard = g,
			    .app = (uint16_t)c->cdw15,
			    .ref = (ref + (f->type == 3 ? 0 : i)) & sim_pi_ref_mask(f)};
			sim_pi_put(f, md + i * ns->ms, &t);
		}
	} else {
		memset(md, 0xff, (size_t)nlb * ns->ms); /* deallocated: PI unchecked */
	}
	return sim_md_put(ns, slba, nlb);
}

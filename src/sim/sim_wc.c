/* sim_wc.c - the volatile write cache model (see sim_wc.h).
 *
 * Entries live in one array, linked twice by index + 1 (0: none): a doubly
 * linked FIFO in first-dirty order (destaging takes the head; FUA removes
 * from the middle) and singly linked hash chains by LBA.  The table has at
 * least twice as many buckets as entries, so chains stay short.  Dropping
 * everything costs O(entries), not O(buckets): each entry's bucket is
 * emptied, which empties every used bucket.
 */
#include "sim_wc.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

struct sim_wc_ent {
	uint64_t lba;
	uint32_t prev, next; /* FIFO; next also chains the free list */
	uint32_t hnext;
	uint32_t pad;
};

#define WC_BATCH      64         /* pre-images read from a file with one preadv */
#define WC_MAX_BLOCKS (1u << 30) /* entries are indexed with 32 bits */

#define WC_GET(x)    __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WC_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static inline struct sim_wc_ent *wc_ent(const struct sim_wc *wc, uint32_t i)
{
	return &wc->ent[i - 1];
}

static inline uint8_t *wc_pre(const struct sim_wc *wc, uint32_t i)
{
	return wc->pre + ((size_t)(i - 1) << wc->lba_shift);
}

static inline uint8_t *wc_pre_md(const struct sim_wc *wc, uint32_t i)
{
	return wc->pre_md + (size_t)(i - 1) * wc->ms;
}

static inline uint32_t *wc_bucket(const struct sim_wc *wc, uint64_t lba)
{
	return &wc->bucket[(lba * 0x9e3779b97f4a7c15ull) >> wc->hshift];
}

static uint32_t wc_find(const struct sim_wc *wc, uint64_t lba)
{
	uint32_t i = *wc_bucket(wc, lba);

	while (i && wc_ent(wc, i)->lba != lba)
		i = wc_ent(wc, i)->hnext;
	return i;
}

static void wc_link(struct sim_wc *wc, uint32_t i, uint64_t lba)
{
	struct sim_wc_ent *e = wc_ent(wc, i);
	uint32_t *b = wc_bucket(wc, lba);

	e->lba = lba;
	e->next = 0;
	e->prev = wc->tail;
	if (wc->tail)
		wc_ent(wc, wc->tail)->next = i;
	else
		wc->head = i;
	wc->tail = i;
	e->hnext = *b;
	*b = i;
	WC_SET(wc->nr, wc->nr + 1);
}

static void wc_put(struct sim_wc *wc, uint32_t i)
{
	wc_ent(wc, i)->next = wc->free;
	wc->free = i;
}

/* Entry i leaves the cache: its block is durable with its current content. */
static void wc_unlink(struct sim_wc *wc, uint32_t i)
{
	struct sim_wc_ent *e = wc_ent(wc, i);
	uint32_t *pp = wc_bucket(wc, e->lba);

	while (*pp != i)
		pp = &wc_ent(wc, *pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		wc_ent(wc, e->prev)->next = e->next;
	else
		wc->head = e->next;
	if (e->next)
		wc_ent(wc, e->next)->prev = e->prev;
	else
		wc->tail = e->prev;
	wc_put(wc, i);
	WC_SET(wc->nr, wc->nr - 1);
}

/* A free entry: only called with nr < cap (the caller destaged first). */
static uint32_t wc_alloc(struct sim_wc *wc)
{
	uint32_t i = wc->free;

	if (i) {
		wc->free = wc_ent(wc, i)->next;
		return i;
	}
	return ++wc->unused;
}

static void wc_drop_all(struct sim_wc *wc)
{
	for (uint32_t i = wc->head; i; i = wc_ent(wc, i)->next)
		*wc_bucket(wc, wc_ent(wc, i)->lba) = 0;
	wc->head = wc->tail = wc->free = wc->unused = 0;
	WC_SET(wc->nr, 0);
}

static void wc_count_destaged(struct sim_wc *wc, uint64_t n)
{
	WC_SET(wc->destaged, wc->destaged + n);
}

/* Pre-images of the k blocks from lba into entries idx[] (not linked yet). */
static int wc_read(struct sim_wc *wc, const uint32_t *idx, unsigned k, uint64_t lba)
{
	size_t bs = (size_t)1 << wc->lba_shift, total = (size_t)k << wc->lba_shift, done = 0;
	off_t off = (off_t)(lba << wc->lba_shift);
	struct iovec iov[WC_BATCH];

	for (unsigned j = 0; wc->md && j < k; j++)
		memcpy(wc_pre_md(wc, idx[j]), wc->md + (lba + j) * wc->ms, wc->ms);
	if (wc->mem) {
		for (unsigned j = 0; j < k; j++)
			memcpy(wc_pre(wc, idx[j]), wc->mem + ((lba + j) << wc->lba_shift), bs);
		return 0;
	}
	for (unsigned j = 0; j < k; j++)
		iov[j] = (struct iovec){.iov_base = wc_pre(wc, idx[j]), .iov_len = bs};
	while (done < total) {
		unsigned j = (unsigned)(done >> wc->lba_shift);
		size_t in = done & (bs - 1);
		ssize_t n;

		iov[j].iov_base = wc_pre(wc, idx[j]) + in;
		iov[j].iov_len = bs - in;
		n = preadv(wc->fd, iov + j, (int)(k - j), off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) { /* past the end of a sparse file: zeroes, as the reads see */
			for (; j < k; j++, in = 0)
				memset(wc_pre(wc, idx[j]) + in, 0, bs - in);
			break;
		}
		done += (size_t)n;
	}
	return 0;
}

int sim_wc_dirty(struct sim_wc *wc, uint64_t slba, uint64_t nlb)
{
	uint64_t end = slba + nlb;
	uint32_t idx[WC_BATCH];
	int rc;

	if (nlb > wc->cap) {
		wc_count_destaged(wc, wc->nr + (nlb - wc->cap));
		wc_drop_all(wc);
		slba = end - wc->cap;
	}
	for (uint64_t lba = slba; lba < end;) {
		unsigned k = 1;

		if (wc_find(wc, lba)) {
			lba++;
			continue;
		}
		while (k < WC_BATCH && k < wc->cap && lba + k < end && !wc_find(wc, lba + k))
			k++;
		/* the k new entries are the newest: only older ones are destaged,
		 * the same ones one-by-one insertion would destage */
		while (wc->cap - wc->nr < k) {
			wc_unlink(wc, wc->head);
			wc_count_destaged(wc, 1);
		}
		for (unsigned j = 0; j < k; j++)
			idx[j] = wc_alloc(wc);
		rc = wc_read(wc, idx, k, lba);
		if (rc) {
			for (unsigned j = 0; j < k; j++)
				wc_put(wc, idx[j]);
			return rc;
		}
		for (unsigned j = 0; j < k; j++)
			wc_link(wc, idx[j], lba + j);
		lba += k;
	}
	return 0;
}

void sim_wc_durable(struct sim_wc *wc, uint64_t slba, uint64_t nlb)
{
	uint32_t i, next;

	if (!wc->nr)
		return;
	if (nlb <= wc->nr) {
		for (uint64_t lba = slba; lba < slba + nlb; lba++)
			if ((i = wc_find(wc, lba)))
				wc_unlink(wc, i);
		return;
	}
	/* fewer entries than blocks: look at the entries instead */
	for (i = wc->head; i; i = next) {
		next = wc_ent(wc, i)->next;
		if (wc_ent(wc, i)->lba - slba < nlb)
			wc_unlink(wc, i);
	}
}

void sim_wc_flush(struct sim_wc *wc)
{
	if (wc->nr)
		wc_drop_all(wc);
}

/* Whether a power cut with seed keeps block lba's newest content. */
static int wc_keeps(uint64_t seed, uint32_t nsid, uint64_t lba)
{
	uint64_t x = seed ^ ((lba + ((uint64_t)nsid << 56)) * 0x9e3779b97f4a7c15ull);

	/* the splitmix64 finaliser: every input bit moves bit 63 */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (int)(x >> 63);
}

static int wc_pwrite(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n, len -= (size_t)n, off += n;
	}
	return 0;
}

int sim_wc_powerfail(struct sim_wc *wc, uint64_t seed, uint32_t nsid, uint64_t *lost,
                     uint64_t *kept)
{
	size_t bs = (size_t)1 << wc->lba_shift;
	uint64_t nlost = 0, nkept = 0;
	int rc = 0, e;

	for (uint32_t i = wc->head; i; i = wc_ent(wc, i)->next) {
		uint64_t lba = wc_ent(wc, i)->lba;

		if (seed && wc_keeps(seed, nsid, lba)) {
			nkept++;
			continue;
		}
		nlost++;
		if (wc->md) {
			memcpy(wc->md + lba * wc->ms, wc_pre_md(wc, i), wc->ms);
			if (wc->md_fd >= 0 &&
			    (e = wc_pwrite(wc->md_fd, wc_pre_md(wc, i), wc->ms, (off_t)(lba * wc->ms))) &&
			    !rc)
				rc = e;
		}
		if (wc->mem) {
			memcpy(wc->mem + (lba << wc->lba_shift), wc_pre(wc, i), bs);
		} else if ((e = wc_pwrite(wc->fd, wc_pre(wc, i), bs,
		                          (off_t)(lba << wc->lba_shift))) &&
		           !rc) {
			rc = e;
		}
	}
	if (wc->fd >= 0 && nlost && fdatasync(wc->fd) && !rc)
		rc = -errno;
	if (wc->md_fd >= 0 && nlost && fdatasync(wc->md_fd) && !rc)
		rc = -errno;
	wc_drop_all(wc);
	*lost += nlost;
	*kept += nkept;
	return rc;
}

uint64_t sim_wc_nr_dirty(const struct sim_wc *wc)
{
	return WC_GET(wc->nr);
}

uint64_t sim_wc_destaged(const struct sim_wc *wc)
{
	return WC_GET(wc->destaged);
}

int sim_wc_init(struct sim_wc *wc, uint64_t nlba, unsigned lba_shift, uint64_t bytes, uint8_t *mem,
                int fd, uint8_t *md, unsigned ms, int md_fd)
{
	uint64_t cap = (bytes ? bytes : SIM_WC_DEFAULT_BYTES) >> lba_shift;
	unsigned hbits = 1;
	size_t pre_len, ent_len, bkt_len, md_len;

	memset(wc, 0, sizeof(*wc));
	wc->fd = -1;
	wc->md_fd = -1;
	if (cap > nlba)
		cap = nlba;
	if (cap > WC_MAX_BLOCKS)
		cap = WC_MAX_BLOCKS;
	if (!cap)
		cap = 1;
	while ((1ull << hbits) < 2 * cap)
		hbits++;
	pre_len = (size_t)cap << lba_shift;
	ent_len = (size_t)cap * sizeof(struct sim_wc_ent);
	bkt_len = ((size_t)1 << hbits) * sizeof(uint32_t);
	md_len = md ? (size_t)cap * ms : 0;
	wc->map_len = pre_len + ent_len + bkt_len + md_len;
	/* lazily zero: an empty bucket is 0, and untouched pages cost nothing */
	wc->map = mmap(NULL, wc->map_len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (wc->map == MAP_FAILED) {
		wc->map = NULL;
		return -ENOMEM;
	}
	wc->pre = wc->map;
	wc->ent = (struct sim_wc_ent *)(wc->pre + pre_len);
	wc->bucket = (uint32_t *)((uint8_t *)wc->ent + ent_len);
	wc->pre_md = (uint8_t *)wc->bucket + bkt_len;
	wc->cap = (uint32_t)cap;
	wc->hshift = 64 - hbits;
	wc->lba_shift = lba_shift;
	wc->mem = mem;
	wc->fd = mem ? -1 : fd;
	wc->md = md;
	wc->ms = md ? ms : 0;
	wc->md_fd = md ? md_fd : -1;
	return 0;
}

void sim_wc_fini(struct sim_wc *wc)
{
	if (wc->map)
		munmap(wc->map, wc->map_len);
	memset(wc, 0, sizeof(*wc));
	wc->fd = -1;
	wc->md_fd = -1;
}

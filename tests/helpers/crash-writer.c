/* crash-writer - durable writes with a journal, for kill -9 and power-cut
 * tests, in every durability mode an application uses.
 *
 *   crash-writer write FILE JOURNAL SEED FIRST BLOCKS [MODES]   (until killed)
 *   crash-writer verify FILE JOURNAL SEED
 *
 * write: forever, pick a block in [FIRST, FIRST + BLOCKS) of BS bytes
 * (CRASH_WRITER_BS, default 4 KiB; a larger one makes each write one large
 * command, or several) and a mode
 * from MODES (a comma-separated list, or "all"; default fdatasync), note the
 * intent in the journal ("W seq block mode off len", fsync'd), make the
 * write durable the way the mode says, then note the acknowledgement ("A
 * seq", fsync'd).  One write is in flight at a time.  Modes:
 *   fdatasync  pwrite (O_DIRECT), then fdatasync
 *   fsync      pwrite (O_DIRECT), then fsync
 *   odsync     pwrite on a descriptor opened O_DIRECT | O_DSYNC, nothing after
 *   osync      pwrite on a descriptor opened O_DIRECT | O_SYNC, nothing after
 *   rwfdsync   pwritev2(RWF_DSYNC) (O_DIRECT), nothing after
 *   unaligned  1 KiB at a 512-byte offset inside the block, O_DSYNC (the
 *              daemon's read-modify-write path), only on a block this journal
 *              has already written whole
 *   zero       fallocate(FALLOC_FL_ZERO_RANGE | KEEP_SIZE), then fsync
 *   punch      fallocate(FALLOC_FL_PUNCH_HOLE | KEEP_SIZE), then fsync
 * A whole-block write writes the pattern of (SEED, seq); a partial one the
 * same pattern's bytes at its range; zero and punch leave zeroes.
 *
 * verify: replays the journal into each block's image after its last
 * acknowledged write, and after the one unacknowledged write that may have
 * landed after it (the write in flight at the cut).  Every block must hold
 * one of the two, each 4 KiB of it (a cut may tear a write in flight
 * between logical blocks, never inside one); a block only ever written by
 * an unacknowledged write may
 * hold anything.  Prints what it checked, by mode; exit 0 when nothing
 * acknowledged is lost, 1 when something is, 2 on a usage or I/O error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* the unit of a write: CRASH_WRITER_BS bytes (a multiple of 4096 up to
 * 4 MiB; default 4096), the same for write and verify */
static unsigned BS = 4096;
#define ATOM 4096u /* what a power cut cannot tear: one logical block */

enum mode { M_FDATASYNC, M_FSYNC, M_ODSYNC, M_OSYNC, M_RWFDSYNC, M_UNALIGNED, M_ZERO, M_PUNCH,
	    M_NR };
static const char *const mode_names[M_NR] = {"fdatasync", "fsync", "odsync", "osync",
					     "rwfdsync", "unaligned", "zero", "punch"};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void pattern(uint64_t seed, uint64_t seq, uint8_t *buf)
{
	uint64_t s = seed * 0x100000001b3ull ^ seq;
	for (unsigned i = 0; i < BS; i += 8) {
		uint64_t v = splitmix(&s);
		memcpy(buf + i, &v, 8);
	}
}

static int mode_of(const char *name)
{
	for (int m = 0; m < M_NR; m++)
		if (strcmp(name, mode_names[m]) == 0)
			return m;
	return -1;
}

/* One journal line, on disk before the caller goes on. */
static int journal_note(FILE *j, const char *line)
{
	if (fputs(line, j) < 0 || fflush(j) != 0 || fsync(fileno(j)) != 0)
		return -1;
	return 0;
}

static int do_write(const char *path, const char *jpath, uint64_t seed, uint64_t first,
		    uint64_t blocks, const char *modes)
{
	bool use[M_NR] = {false};
	int nuse = 0;
	char *list = strdup(modes);
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "all") == 0) {
			for (int m = 0; m < M_NR; m++)
				use[m] = true;
			continue;
		}
		int m = mode_of(t);
		if (m < 0) {
			fprintf(stderr, "crash-writer: unknown mode %s\n", t);
			return 2;
		}
		use[m] = true;
	}
	free(list);
	for (int m = 0; m < M_NR; m++)
		nuse += use[m];
	if (!nuse || !blocks)
		return 2;
	int fd = open(path, O_RDWR | O_DIRECT);
	int fd_dsync = open(path, O_RDWR | O_DIRECT | O_DSYNC);
	int fd_sync = open(path, O_RDWR | O_DIRECT | O_SYNC);
	if (fd < 0 || fd_dsync < 0 || fd_sync < 0) {
		perror(path);
		return 2;
	}
	FILE *j = fopen(jpath, "a");
	if (!j) {
		perror(jpath);
		return 2;
	}
	uint8_t *buf = aligned_alloc(4096, BS);
	bool *whole = calloc(blocks, sizeof(bool)); /* written whole and acknowledged */
	if (!buf || !whole)
		return 2;
	uint64_t rng = seed;
	char line[128];
	for (uint64_t seq = 1;; seq++) {
		uint64_t blk = splitmix(&rng) % blocks;
		int m;
		do
			m = (int)(splitmix(&rng) % M_NR);
		while (!use[m] || (m == M_UNALIGNED && !whole[blk]));
		unsigned off = 0, len = BS;
		if (m == M_UNALIGNED) {
			off = 512u * (unsigned)(1 + splitmix(&rng) % 5); /* 512..2560 */
			len = 1024;
		}
		off_t at = (off_t)((first + blk) * BS);
		snprintf(line, sizeof(line), "W %" PRIu64 " %" PRIu64 " %s %u %u\n", seq, first + blk,
			 mode_names[m], off, len);
		if (journal_note(j, line) < 0) {
			perror("journal");
			return 2;
		}
		pattern(seed, seq, buf);
		ssize_t n = 0;
		int rc = 0;
		switch (m) {
		case M_FDATASYNC:
			n = pwrite(fd, buf, BS, at);
			rc = n == (ssize_t)BS ? fdatasync(fd) : -1;
			break;
		case M_FSYNC:
			n = pwrite(fd, buf, BS, at);
			rc = n == (ssize_t)BS ? fsync(fd) : -1;
			break;
		case M_ODSYNC:
			rc = pwrite(fd_dsync, buf, BS, at) == (ssize_t)BS ? 0 : -1;
			break;
		case M_OSYNC:
			rc = pwrite(fd_sync, buf, BS, at) == (ssize_t)BS ? 0 : -1;
			break;
		case M_RWFDSYNC: {
			struct iovec iov = {.iov_base = buf, .iov_len = BS};
			rc = pwritev2(fd, &iov, 1, at, RWF_DSYNC) == (ssize_t)BS ? 0 : -1;
			break;
		}
		case M_UNALIGNED: {
			/* the same pattern's bytes at the range, from a buffered
			 * descriptor: the FUSE file takes any alignment */
			int ufd = open(path, O_RDWR | O_DSYNC);
			rc = ufd >= 0 && pwrite(ufd, buf + off, len, at + off) == (ssize_t)len ? 0 : -1;
			if (ufd >= 0)
				close(ufd);
			break;
		}
		case M_ZERO:
		case M_PUNCH:
			rc = fallocate(fd,
				       (m == M_ZERO ? FALLOC_FL_ZERO_RANGE : FALLOC_FL_PUNCH_HOLE) |
					   FALLOC_FL_KEEP_SIZE,
				       at, BS);
			if (rc == 0)
				rc = fsync(fd);
			break;
		}
		if (rc != 0) {
			fprintf(stderr, "write seq %" PRIu64 " block %" PRIu64 " (%s): %s\n", seq,
				first + blk, mode_names[m], strerror(errno));
			return 2;
		}
		snprintf(line, sizeof(line), "A %" PRIu64 "\n", seq);
		if (journal_note(j, line) < 0) {
			perror("journal");
			return 2;
		}
		if (m != M_UNALIGNED)
			whole[blk] = true;
	}
}

struct wr {
	uint64_t blk;
	int mode;
	unsigned off, len;
	bool acked;
};

struct blk_state {
	bool have_acked, have_pending;
	uint8_t *acked;   /* image after the last acknowledged write (BS bytes) */
	uint8_t *pending; /* image after the unacknowledged one that followed */
	int pending_mode, acked_mode;
};

static uint8_t *pat_buf; /* BS bytes: apply's scratch */

/* img after write w (seq) on top of base */
static void apply(uint8_t *img, const uint8_t *base, const struct wr *w, uint64_t seed,
		  uint64_t seq)
{
	uint8_t *pat = pat_buf;
	if (base != img)
		memcpy(img, base, BS);
	if (w->mode == M_ZERO || w->mode == M_PUNCH) {
		memset(img, 0, BS);
		return;
	}
	pattern(seed, seq, pat);
	memcpy(img + w->off, pat + w->off, w->len);
}

static int do_verify(const char *path, const char *jpath, uint64_t seed)
{
	FILE *j = fopen(jpath, "r");
	if (!j) {
		perror(jpath);
		return 2;
	}
	struct wr *wr = NULL;
	size_t nwr = 0, cap = 0;
	uint64_t max_blk = 0, writes = 0, acks = 0;
	char line[160], mname[32];
	while (fgets(line, sizeof(line), j)) {
		uint64_t seq, blk;
		unsigned off, len;
		if (sscanf(line, "W %" SCNu64 " %" SCNu64 " %31s %u %u", &seq, &blk, mname, &off,
			   &len) == 5) {
			int m = mode_of(mname);
			if (m < 0 || off + len > BS)
				continue; /* a torn line */
			if (seq >= cap) {
				size_t n = cap ? cap * 2 : 1024;
				while (n <= seq)
					n *= 2;
				struct wr *p = realloc(wr, n * sizeof(*p));
				if (!p)
					return 2;
				memset(p + cap, 0, (n - cap) * sizeof(*p));
				wr = p;
				cap = n;
			}
			wr[seq] = (struct wr){.blk = blk, .mode = m, .off = off, .len = len};
			if (seq + 1 > nwr)
				nwr = seq + 1;
			if (blk + 1 > max_blk)
				max_blk = blk + 1;
			writes++;
		} else if (sscanf(line, "A %" SCNu64, &seq) == 1 && seq < nwr && wr[seq].len) {
			wr[seq].acked = true;
			acks++;
		}
	}
	fclose(j);
	struct blk_state *st = calloc(max_blk ? max_blk : 1, sizeof(*st));
	pat_buf = malloc(BS);
	if (!st || !pat_buf)
		return 2;
	for (uint64_t seq = 1; seq < nwr; seq++) {
		struct blk_state *b = &st[wr[seq].blk];
		if (wr[seq].len && !b->acked) {
			b->acked = calloc(2, BS);
			if (!b->acked)
				return 2;
			b->pending = b->acked + BS;
		}
	}
	/* replay: an acknowledged write's image becomes the block's; a later
	 * unacknowledged one (only the last write can be one) its pending */
	for (uint64_t seq = 1; seq < nwr; seq++) {
		struct wr *w = &wr[seq];
		if (!w->len)
			continue;
		struct blk_state *b = &st[w->blk];
		if (w->acked) {
			if (w->mode == M_UNALIGNED && !b->have_acked)
				continue; /* never written by the writer's rule; skip */
			apply(b->acked, b->acked, w, seed, seq);
			b->have_acked = true;
			b->acked_mode = w->mode;
			b->have_pending = false;
		} else {
			if (w->mode == M_UNALIGNED && !b->have_acked)
				continue;
			apply(b->pending, b->acked, w, seed, seq);
			b->have_pending = true;
			b->pending_mode = w->mode;
		}
	}
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	uint8_t *got = malloc(BS);
	if (!got)
		return 2;
	uint64_t lost = 0, checked = 0, landed = 0, by_mode[M_NR] = {0};
	for (uint64_t blk = 0; blk < max_blk; blk++) {
		struct blk_state *b = &st[blk];
		if (!b->have_acked && !b->have_pending)
			continue;
		if (pread(fd, got, BS, (off_t)(blk * BS)) != (ssize_t)BS) {
			fprintf(stderr, "read block %" PRIu64 ": %s\n", blk, strerror(errno));
			return 2;
		}
		if (b->have_pending && memcmp(got, b->pending, BS) == 0) {
			landed++;
			continue;
		}
		if (!b->have_acked)
			continue; /* only an unacknowledged write: either content is fine */
		checked++;
		by_mode[b->acked_mode]++;
		/* each logical block holds the acknowledged image or, where the
		 * write in flight at the cut reached it, the pending one: a cut
		 * may tear a write of several blocks between them */
		bool ok = true;
		for (unsigned o = 0; o < BS && ok; o += ATOM)
			ok = memcmp(got + o, b->acked + o, ATOM) == 0 ||
			     (b->have_pending && memcmp(got + o, b->pending + o, ATOM) == 0);
		if (!ok) {
			lost++;
			printf("LOST: block %" PRIu64 " does not hold its last acknowledged write (%s)\n",
			       blk, mode_names[b->acked_mode]);
		}
	}
	close(fd);
	free(got);
	for (uint64_t blk = 0; blk < max_blk; blk++)
		free(st[blk].acked);
	free(pat_buf);
	printf("verify: %" PRIu64 " writes journaled, %" PRIu64 " acknowledged, %" PRIu64
	       " blocks checked, %" PRIu64 " unacknowledged writes landed, %" PRIu64 " lost;"
	       " checked by the mode of their last write:",
	       writes, acks, checked, landed, lost);
	for (int m = 0; m < M_NR; m++)
		if (by_mode[m])
			printf(" %s %" PRIu64, mode_names[m], by_mode[m]);
	printf("\n");
	free(st);
	free(wr);
	return lost ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *bs = getenv("CRASH_WRITER_BS");
	if (bs) {
		unsigned long v = strtoul(bs, NULL, 0);
		if (!v || v % 4096 || v > (4ul << 20)) {
			fprintf(stderr, "CRASH_WRITER_BS=%s: a multiple of 4096 up to 4 MiB\n", bs);
			return 2;
		}
		BS = (unsigned)v;
	}
	if ((argc == 7 || argc == 8) && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 0),
				strtoull(argv[5], NULL, 0), strtoull(argv[6], NULL, 0),
				argc == 8 ? argv[7] : "fdatasync");
	if (argc == 5 && strcmp(argv[1], "verify") == 0)
		return do_verify(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	fprintf(stderr, "usage: crash-writer write FILE JOURNAL SEED FIRST BLOCKS [MODES]\n"
			"       crash-writer verify FILE JOURNAL SEED\n"
			"MODES: all, or a comma-separated list of fdatasync, fsync, odsync, osync,\n"
			"       rwfdsync, unaligned, zero, punch\n");
	return 2;
}

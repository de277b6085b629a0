/* crash-writer - fsync'd writes with a journal, for kill -9 tests.
 *
 *   crash-writer write FILE JOURNAL SEED BLOCKS   (runs until killed)
 *   crash-writer verify FILE JOURNAL SEED
 *
 * write: forever, pick a block in [0, BLOCKS) of 4 KiB, note the intent in
 * the journal ("W seq block", fsync'd), pwrite a pattern derived from
 * (SEED, seq) with O_DIRECT, fdatasync the file, then note the
 * acknowledgement ("A seq", fsync'd).  One write is in flight at a time.
 *
 * verify: every block whose last intent was acknowledged must hold that
 * write's pattern, or the pattern of the one unacknowledged write that may
 * have landed after it (the write in flight at the kill).  A block written
 * only by an unacknowledged write may hold it or its previous content.
 * Prints what it checked; exit 0 when nothing acknowledged is lost, 1 when
 * something is, 2 on a usage or I/O error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096u

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

/* One journal line, on disk before the caller goes on. */
static int journal_note(FILE *j, char kind, uint64_t seq, uint64_t blk)
{
	int rc = kind == 'W' ? fprintf(j, "W %" PRIu64 " %" PRIu64 "\n", seq, blk)
	                     : fprintf(j, "A %" PRIu64 "\n", seq);
	if (rc < 0 || fflush(j) != 0 || fsync(fileno(j)) != 0)
		return -1;
	return 0;
}

static int do_write(const char *path, const char *jpath, uint64_t seed, uint64_t blocks)
{
	int fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	FILE *j = fopen(jpath, "a");
	if (!j) {
		perror(jpath);
		close(fd);
		return 2;
	}
	uint8_t *buf = aligned_alloc(BS, BS);
	if (!buf)
		return 2;
	uint64_t rng = seed;
	for (uint64_t seq = 1;; seq++) {
		uint64_t blk = splitmix(&rng) % blocks;
		pattern(seed, seq, buf);
		if (journal_note(j, 'W', seq, blk) < 0) {
			perror("journal");
			return 2;
		}
		if (pwrite(fd, buf, BS, (off_t)(blk * BS)) != (ssize_t)BS || fdatasync(fd) != 0) {
			fprintf(stderr, "write seq %" PRIu64 " block %" PRIu64 ": %s\n", seq, blk,
			        strerror(errno));
			return 2;
		}
		if (journal_note(j, 'A', seq, 0) < 0) {
			perror("journal");
			return 2;
		}
	}
}

struct blk_state {
	uint64_t acked;   /* seq of the last acknowledged write, 0: none */
	uint64_t pending; /* seq of a later unacknowledged write, 0: none */
};

static int do_verify(const char *path, const char *jpath, uint64_t seed)
{
	FILE *j = fopen(jpath, "r");
	if (!j) {
		perror(jpath);
		return 2;
	}
	/* first pass: how many blocks */
	uint64_t max_blk = 0, seq, blk, writes = 0, acks = 0;
	char kind;
	char line[128];
	while (fgets(line, sizeof(line), j))
		if (sscanf(line, "W %" SCNu64 " %" SCNu64, &seq, &blk) == 2 && blk + 1 > max_blk)
			max_blk = blk + 1;
	struct blk_state *st = calloc(max_blk ? max_blk : 1, sizeof(*st));
	uint64_t *seq_blk = NULL;
	size_t nseq = 0;
	if (!st)
		return 2;
	rewind(j);
	while (fgets(line, sizeof(line), j)) {
		if (sscanf(line, "%c %" SCNu64, &kind, &seq) != 2)
			continue; /* a torn last line: the kill hit the journal write */
		if (kind == 'W' && sscanf(line, "W %" SCNu64 " %" SCNu64, &seq, &blk) == 2) {
			if (seq >= nseq) {
				size_t n = nseq ? nseq * 2 : 1024;
				while (n <= seq)
					n *= 2;
				uint64_t *p = realloc(seq_blk, n * sizeof(*p));
				if (!p)
					return 2;
				memset(p + nseq, 0xff, (n - nseq) * sizeof(*p));
				seq_blk = p;
				nseq = n;
			}
			seq_blk[seq] = blk;
			st[blk].pending = seq;
			writes++;
		} else if (kind == 'A' && seq < nseq && seq_blk[seq] != UINT64_MAX) {
			blk = seq_blk[seq];
			st[blk].acked = seq;
			if (st[blk].pending == seq)
				st[blk].pending = 0;
			acks++;
		}
	}
	fclose(j);
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	uint8_t got[BS], want[BS];
	uint64_t lost = 0, checked = 0, landed_unacked = 0;
	for (blk = 0; blk < max_blk; blk++) {
		if (!st[blk].acked && !st[blk].pending)
			continue;
		if (pread(fd, got, BS, (off_t)(blk * BS)) != (ssize_t)BS) {
			fprintf(stderr, "read block %" PRIu64 ": %s\n", blk, strerror(errno));
			return 2;
		}
		if (st[blk].pending) {
			pattern(seed, st[blk].pending, want);
			if (memcmp(got, want, BS) == 0) {
				landed_unacked++;
				continue;
			}
		}
		if (!st[blk].acked)
			continue; /* only an unacknowledged write: either content is fine */
		checked++;
		pattern(seed, st[blk].acked, want);
		if (memcmp(got, want, BS) != 0) {
			lost++;
			printf("LOST: block %" PRIu64 " does not hold acknowledged write %" PRIu64
			       "\n",
			       blk, st[blk].acked);
		}
	}
	close(fd);
	printf("verify: %" PRIu64 " writes journaled, %" PRIu64 " acknowledged, %" PRIu64
	       " blocks checked, %" PRIu64 " unacknowledged writes landed, %" PRIu64 " lost\n",
	       writes, acks, checked, landed_unacked, lost);
	free(st);
	free(seq_blk);
	return lost ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 0),
		                strtoull(argv[5], NULL, 0));
	if (argc == 5 && strcmp(argv[1], "verify") == 0)
		return do_verify(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	fprintf(stderr, "usage: crash-writer write FILE JOURNAL SEED BLOCKS\n"
	                "       crash-writer verify FILE JOURNAL SEED\n");
	return 2;
}

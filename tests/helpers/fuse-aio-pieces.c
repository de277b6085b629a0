/* fuse-aio-pieces - submit many small unaligned O_DIRECT writes at once with
 * Linux AIO (io_submit), so that they are in flight together, then read the
 * range back and check every piece.
 *
 *   fuse-aio-pieces FILE OFFSET PIECE COUNT
 *
 * Piece i (PIECE bytes at OFFSET + i * PIECE) holds the byte (i * 37 + 11).
 * Neighbouring pieces share blocks, so the daemon must serialise their
 * read-modify-writes.  Exit 0 when every piece reads back, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned char val(unsigned i)
{
	return (unsigned char)((i * 37 + 11) & 0xff);
}

int main(int argc, char **argv)
{
	aio_context_t ctx = 0;
	unsigned long long off;
	unsigned piece, count, done = 0, bad = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: %s FILE OFFSET PIECE COUNT\n", argv[0]);
		return 2;
	}
	off = strtoull(argv[2], NULL, 0);
	piece = (unsigned)strtoul(argv[3], NULL, 0);
	count = (unsigned)strtoul(argv[4], NULL, 0);
	if (!piece || !count || count > 4096) {
		fprintf(stderr, "bad PIECE or COUNT\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	unsigned char *data = malloc((size_t)piece * count);
	struct iocb *cbs = calloc(count, sizeof(*cbs));
	struct iocb **ptrs = calloc(count, sizeof(*ptrs));
	struct io_event *ev = calloc(count, sizeof(*ev));
	if (!data || !cbs || !ptrs || !ev)
		return 1;
	if (syscall(SYS_io_setup, count, &ctx) < 0) {
		perror("io_setup");
		return 1;
	}
	/* even pieces first, then odd: neighbours are in flight together */
	for (unsigned k = 0; k < count; k++) {
		unsigned i = k < (count + 1) / 2 ? 2 * k : 2 * (k - (count + 1) / 2) + 1;
		memset(data + (size_t)i * piece, val(i), piece);
		cbs[k].aio_fildes = (uint32_t)fd;
		cbs[k].aio_lio_opcode = IOCB_CMD_PWRITE;
		cbs[k].aio_buf = (uint64_t)(uintptr_t)(data + (size_t)i * piece);
		cbs[k].aio_nbytes = piece;
		cbs[k].aio_offset = (int64_t)(off + (unsigned long long)i * piece);
		ptrs[k] = &cbs[k];
	}
	long n = syscall(SYS_io_submit, ctx, (long)count, ptrs);
	if (n != (long)count) {
		fprintf(stderr, "io_submit: %ld of %u: %s\n", n, count, n < 0 ? strerror(errno) : "");
		return 1;
	}
	while (done < count) {
		long got = syscall(SYS_io_getevents, ctx, 1, (long)(count - done), ev, NULL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			perror("io_getevents");
			return 1;
		}
		for (long j = 0; j < got; j++)
			if (ev[j].res != (int64_t)piece) {
				fprintf(stderr, "a write returned %lld\n", (long long)ev[j].res);
				bad++;
			}
		done += (unsigned)got;
	}
	syscall(SYS_io_destroy, ctx);
	unsigned char *back = malloc((size_t)piece * count);
	if (!back || pread(fd, back, (size_t)piece * count, (off_t)off) != (ssize_t)piece * count) {
		perror("pread");
		return 1;
	}
	for (unsigned i = 0; i < count; i++) {
		for (unsigned b = 0; b < piece; b++) {
			if (back[(size_t)i * piece + b] != val(i)) {
				if (bad < 5)
					fprintf(stderr, "piece %u byte %u: %#x, want %#x\n", i, b,
						back[(size_t)i * piece + b], val(i));
				bad++;
				break;
			}
		}
	}
	printf("%u pieces of %u bytes written together, %u bad\n", count, piece, bad);
	free(back);
	free(data);
	free(cbs);
	free(ptrs);
	free(ev);
	close(fd);
	return bad ? 1 : 0;
}

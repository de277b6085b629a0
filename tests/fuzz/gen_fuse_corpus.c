/* gen_fuse_corpus.c - writes the seed corpus of fuzz_fuse: well-formed
 * requests of the opcodes nvmefs serves, in both transport shapes, in
 * fuzz_fuse's input format (see there).  Not built by the Makefile; run from
 * the top of the tree:
 *
 *   cc -std=gnu11 -D_GNU_SOURCE -Isrc/fuse -o /tmp/gen_fuse_corpus \
 *      tests/fuzz/gen_fuse_corpus.c && /tmp/gen_fuse_corpus tests/fuzz/corpus/fuse
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_proto.h"

#define DEV        0
#define RING       1
#define WANT_URING 2

static const char *dir;
static uint64_t unique = 2;

struct part {
	const void *p;
	size_t n;
};

/* one request: its header, its op header, then the parts of its rest */
static void emit(const char *name, int flags, uint32_t opcode, uint64_t nodeid, uint16_t extlen,
                 const void *op, size_t op_len, const struct part *rest, int nrest)
{
	uint8_t buf[16384];
	size_t len = 0, rest_len = 0;
	struct fuse_in_header h = {
	    .opcode = opcode,
	    .unique = opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET ? 0 : unique++,
	    .nodeid = nodeid,
	    .uid = 1000,
	    .gid = 1000,
	    .pid = 4242,
	    .total_extlen = extlen};
	char path[512];
	FILE *f;

	for (int i = 0; i < nrest; i++)
		rest_len += rest[i].n;
	h.len = (uint32_t)(sizeof(h) + op_len + rest_len);
	buf[len++] = (uint8_t)flags;
	memcpy(buf + len, &h, sizeof(h));
	len += sizeof(h);
	if (flags & RING) {
		/* the kernel's op area: 128 bytes, the op header first */
		buf[len++] = FUSE_URING_OP_IN_OUT_SZ;
		memset(buf + len, 0, FUSE_URING_OP_IN_OUT_SZ);
		memcpy(buf + len, op, op_len);
		len += FUSE_URING_OP_IN_OUT_SZ;
	} else {
		memcpy(buf + len, op, op_len);
		len += op_len;
	}
	for (int i = 0; i < nrest; i++) {
		memcpy(buf + len, rest[i].p, rest[i].n);
		len += rest[i].n;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

#define S(s)                                                                                       \
	{                                                                                          \
		s, sizeof(s)                                                                       \
	} /* a string with its NUL */

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_fuse_corpus DIR\n");
		return 2;
	}
	dir = argv[1];

	struct fuse_init_in init = {.major = 7,
	                            .minor = 42,
	                            .max_readahead = 131072,
	                            .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO |
	                                     FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT |
	                                     FUSE_WRITEBACK_CACHE,
	                            .flags2 = (uint32_t)(FUSE_OVER_IO_URING >> 32)};
	emit("dev-init", DEV | WANT_URING, FUSE_INIT, 0, 0, &init, sizeof(init), NULL, 0);
	struct fuse_init_in old = {.major = 7,
	                           .minor = 31,
	                           .max_readahead = 65536,
	                           .flags = FUSE_ASYNC_READ | FUSE_MAX_PAGES};
	emit("dev-init-7.31", DEV, FUSE_INIT, 0, 0, &old, 16, NULL, 0);

	struct part name[] = {S("nvme0n1")};
	emit("dev-lookup", DEV, FUSE_LOOKUP, 1, 0, NULL, 0, name, 1);
	emit("ring-lookup", RING, FUSE_LOOKUP, 1, 0, NULL, 0, name, 1);
	/* a name followed by an extension (8 bytes, as total_extlen counts) */
	struct part name_ext[] = {S("nvme0n1"), {"\x08\0\0\0\x01\0\0\0", 8}};
	emit("dev-lookup-ext", DEV, FUSE_LOOKUP, 1, 1, NULL, 0, name_ext, 2);

	struct fuse_getattr_in ga = {.getattr_flags = FUSE_GETATTR_FH, .fh = 1};
	emit("dev-getattr", DEV, FUSE_GETATTR, 2, 0, &ga, sizeof(ga), NULL, 0);
	emit("ring-getattr", RING, FUSE_GETATTR, 2, 0, &ga, sizeof(ga), NULL, 0);

	struct fuse_setattr_in sa = {
	    .valid = FATTR_SIZE | FATTR_MODE, .size = 1 << 20, .mode = 0600};
	emit("dev-setattr", DEV, FUSE_SETATTR, 2, 0, &sa, sizeof(sa), NULL, 0);

	struct fuse_open_in oi = {.flags = O_RDWR | O_DIRECT};
	emit("ring-open", RING, FUSE_OPEN, 2, 0, &oi, sizeof(oi), NULL, 0);

	struct fuse_read_in rd = {.fh = 1, .offset = 8192, .size = 4096, .flags = O_RDWR};
	emit("dev-read", DEV, FUSE_READ, 2, 0, &rd, sizeof(rd), NULL, 0);
	emit("ring-read", RING, FUSE_READ, 2, 0, &rd, sizeof(rd), NULL, 0);
	emit("dev-readdir", DEV, FUSE_READDIR, 1, 0, &rd, sizeof(rd), NULL, 0);

	uint8_t data[512];
	for (size_t k = 0; k < sizeof(data); k++)
		data[k] = (uint8_t)k;
	struct fuse_write_in wr = {.fh = 1, .offset = 4096, .size = sizeof(data), .flags = O_RDWR};
	struct part wdata[] = {{data, sizeof(data)}};
	emit("dev-write", DEV, FUSE_WRITE, 2, 0, &wr, sizeof(wr), wdata, 1);
	emit("ring-write", RING, FUSE_WRITE, 2, 0, &wr, sizeof(wr), wdata, 1);

	struct fuse_forget_in fo = {.nlookup = 1};
	emit("dev-forget", DEV, FUSE_FORGET, 2, 0, &fo, sizeof(fo), NULL, 0);
	struct fuse_batch_forget_in bf = {.count = 3};
	struct fuse_forget_one one[3] = {{2, 1}, {3, 2}, {4, 1}};
	struct part forgets[] = {{one, sizeof(one)}};
	emit("dev-batch-forget", DEV, FUSE_BATCH_FORGET, 0, 0, &bf, sizeof(bf), forgets, 1);
	emit("ring-batch-forget", RING, FUSE_BATCH_FORGET, 0, 0, &bf, sizeof(bf), forgets, 1);

	struct fuse_rename2_in r2 = {.newdir = 1, .flags = 1};
	struct part names[] = {S("old"), S("new")};
	emit("dev-rename2", DEV, FUSE_RENAME2, 1, 0, &r2, sizeof(r2), names, 2);
	struct fuse_rename_in rn = {.newdir = 1};
	emit("ring-rename", RING, FUSE_RENAME, 1, 0, &rn, sizeof(rn), names, 2);
	struct part link[] = {S("link"), S("nvme0n1")};
	emit("dev-symlink", DEV, FUSE_SYMLINK, 1, 0, NULL, 0, link, 2);

	struct fuse_create_in cr = {.flags = O_CREAT | O_RDWR, .mode = 0644, .umask = 022};
	emit("dev-create", DEV, FUSE_CREATE, 1, 0, &cr, sizeof(cr), name, 1);
	struct fuse_mknod_in mk = {.mode = S_IFREG | 0644};
	emit("ring-mknod", RING, FUSE_MKNOD, 1, 0, &mk, sizeof(mk), name, 1);

	struct fuse_fallocate_in fa = {.fh = 1, .offset = 0, .length = 1 << 20, .mode = 3};
	emit("ring-fallocate", RING, FUSE_FALLOCATE, 2, 0, &fa, sizeof(fa), NULL, 0);
	struct fuse_fsync_in fs = {.fh = 1};
	emit("ring-fsync", RING, FUSE_FSYNC, 2, 0, &fs, sizeof(fs), NULL, 0);
	struct fuse_interrupt_in it = {.unique = 5};
	emit("dev-interrupt", DEV, FUSE_INTERRUPT, 0, 0, &it, sizeof(it), NULL, 0);
	emit("dev-statfs", DEV, FUSE_STATFS, 1, 0, NULL, 0, NULL, 0);
	emit("ring-statfs", RING, FUSE_STATFS, 1, 0, NULL, 0, NULL, 0);
	/* an opcode not served (COPY_FILE_RANGE's shape does not matter) */
	uint8_t cfr[56] = {0};
	emit("dev-unknown", DEV, FUSE_COPY_FILE_RANGE, 2, 0, cfr, sizeof(cfr), NULL, 0);
	return 0;
}

/* test_fwire.c - the FUSE wire module on bytes a fake kernel sends: every
 * opcode the decoder serves, in both transport shapes (/dev/fuse: one
 * buffer; io_uring: in header, a 128-byte op area with stale bytes after the
 * op header, and a payload), with the decoded fields checked; malformed
 * requests (short, wrong lengths, truncated op headers, names without NUL,
 * write and forget counts beyond the bytes, extensions beyond the message);
 * unknown opcodes; INIT negotiation; and the answers as a fake transport
 * receives them.  Buffers are allocated to their exact size so that a read
 * past one shows under valgrind or ASan. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fwire.h"

/* SPLIT: /dev/fuse read with readv into FW_DEV_HEAD bytes and a tail
 * buffer (fw_decode_dev_split), as a reader with a landing buffer reads */
enum { DEV, RING, SPLIT };
static const char *const shape_name[] = {"dev", "ring", "split"};

#define OP_AREA FUSE_URING_OP_IN_OUT_SZ
#define STALE   0xa5 /* what the ring's op area holds beyond the op header */

/* ---- a request as a fake kernel builds it ---- */

struct wire {
	struct fuse_in_header h;
	uint8_t op[OP_AREA];
	size_t op_len; /* the op header's bytes */
	uint8_t *rest; /* names, data, then extensions */
	size_t rest_len;
	int len_delta;      /* dev: h.len = the bytes + this */
	size_t ring_op_len; /* ring: op area given to fw_decode (default 128) */
	bool ring_null;     /* ring: an empty payload passed as NULL (clang's
	                     * UBSan caught NULL + 0 in the decoder) */
	/* the buffers the decoder saw (exact sizes; split: dev is the head,
	 * with room for the whole request, payload the tail) */
	uint8_t *dev, *ring_op, *payload;
	size_t dev_len;
	bool in_tail; /* split: the data was decoded in the tail */
};

static void w_init(struct wire *w, uint32_t opcode)
{
	memset(w, 0, sizeof(*w));
	w->h.opcode = opcode;
	w->h.unique = 0x1122334455667788ull;
	w->h.nodeid = 42;
	w->h.uid = 1000;
	w->h.gid = 100;
	w->h.pid = 4321;
	w->ring_op_len = OP_AREA;
}

static void w_op(struct wire *w, const void *p, size_t n)
{
	ck_assert_uint_le(n, sizeof(w->op));
	memcpy(w->op, p, n);
	w->op_len = n;
}

static void w_tail(struct wire *w, const void *p, size_t n)
{
	w->rest = realloc(w->rest, w->rest_len + n + 1);
	ck_assert_ptr_nonnull(w->rest);
	memcpy(w->rest + w->rest_len, p, n);
	w->rest_len += n;
}

/* a name as the kernel sends it: with its NUL */
static void w_str(struct wire *w, const char *s)
{
	w_tail(w, s, strlen(s) + 1);
}

static void w_release(struct wire *w)
{
	free(w->dev);
	free(w->ring_op);
	free(w->payload);
	w->dev = w->ring_op = w->payload = NULL;
}

static void w_free(struct wire *w)
{
	w_release(w);
	free(w->rest);
	w->rest = NULL;
}

/* Decode w in the given shape; m is filled with junk first so that what the
 * decoder leaves is seen. */
static int w_decode(struct wire *w, int shape, struct fw_msg *m)
{
	w_release(w);
	memset(m, 0x5a, sizeof(*m));
	if (shape == DEV) {
		w->dev_len = sizeof(w->h) + w->op_len + w->rest_len;
		w->dev = malloc(w->dev_len);
		ck_assert_ptr_nonnull(w->dev);
		w->h.len = (uint32_t)((int)w->dev_len + w->len_delta);
		memcpy(w->dev, &w->h, sizeof(w->h));
		memcpy(w->dev + sizeof(w->h), w->op, w->op_len);
		if (w->rest_len)
			memcpy(w->dev + sizeof(w->h) + w->op_len, w->rest, w->rest_len);
		return fw_decode_dev(w->dev, w->dev_len, m);
	}
	if (shape == SPLIT) {
		size_t all = sizeof(w->h) + w->op_len + w->rest_len;
		size_t head = all < FW_DEV_HEAD ? all : FW_DEV_HEAD;

		w->h.len = (uint32_t)((int)all + w->len_delta);
		w->dev = malloc(all);
		w->payload = malloc(all - head + 1);
		ck_assert_ptr_nonnull(w->dev);
		ck_assert_ptr_nonnull(w->payload);
		memcpy(w->dev, &w->h, sizeof(w->h));
		memcpy(w->dev + sizeof(w->h), w->op, w->op_len);
		if (w->rest_len)
			memcpy(w->dev + sizeof(w->h) + w->op_len, w->rest, w->rest_len);
		/* the tail moves out; what stays in dev past head is junk the
		 * decoder must overwrite when it makes the request whole */
		memcpy(w->payload, w->dev + head, all - head);
		memset(w->dev + head, STALE, all - head);
		w->dev_len = head;
		return fw_decode_dev_split(w->dev, head, all, w->payload, all - head, m,
					   &w->in_tail);
	}
	w->h.len = (uint32_t)(sizeof(w->h) + w->op_len + w->rest_len);
	w->ring_op = malloc(w->ring_op_len ? w->ring_op_len : 1);
	ck_assert_ptr_nonnull(w->ring_op);
	memset(w->ring_op, STALE, w->ring_op_len);
	memcpy(w->ring_op, w->op, w->op_len < w->ring_op_len ? w->op_len : w->ring_op_len);
	if (!(w->ring_null && !w->rest_len)) {
		w->payload = malloc(w->rest_len ? w->rest_len : 1);
		ck_assert_ptr_nonnull(w->payload);
		if (w->rest_len)
			memcpy(w->payload, w->rest, w->rest_len);
	}
	return fw_decode(&w->h, w->ring_op, w->ring_op_len, w->payload, w->rest_len, m);
}

/* where the rest (names, data) starts in the buffers the decoder saw */
static const uint8_t *w_rest(const struct wire *w, int shape)
{
	if (shape == SPLIT && w->in_tail)
		return w->payload;
	return shape != RING ? w->dev + sizeof(w->h) + w->op_len : w->payload;
}

static void check_header(const struct wire *w, const struct fw_msg *m)
{
	ck_assert_uint_eq(m->h.opcode, w->h.opcode);
	ck_assert_uint_eq(m->h.unique, w->h.unique);
	ck_assert_uint_eq(m->h.nodeid, w->h.nodeid);
	ck_assert_uint_eq(m->h.uid, w->h.uid);
	ck_assert_uint_eq(m->h.gid, w->h.gid);
	ck_assert_uint_eq(m->h.pid, w->h.pid);
	ck_assert_uint_eq(m->h.len, w->h.len);
}

static void check_no_tail(const struct fw_msg *m)
{
	ck_assert_ptr_null(m->name);
	ck_assert_ptr_null(m->name2);
	ck_assert_ptr_null(m->data);
	ck_assert_uint_eq(m->data_len, 0);
}

/* decode, expect FW_OK, and check the header and that m->in starts with the
 * op header as sent */
static void decode_ok(struct wire *w, int shape, struct fw_msg *m)
{
	int rc = w_decode(w, shape, m);

	ck_assert_msg(rc == FW_OK, "opcode %u (%s): %d", w->h.opcode, shape_name[shape], rc);
	check_header(w, m);
	ck_assert_mem_eq(&m->in, w->op, w->op_len);
}

static void expect_rc(struct wire *w, int shape, int want)
{
	struct fw_msg m;
	int rc = w_decode(w, shape, &m);

	ck_assert_msg(rc == want, "opcode %u (%s): %d, expected %d", w->h.opcode, shape_name[shape],
	              rc, want);
	/* the header is valid whatever the verdict (the bytes hold one) */
	check_header(w, &m);
}

/* ---- ops with only an op header (or nothing) ---- */

START_TEST(t_getattr)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_getattr_in in = {.getattr_flags = FUSE_GETATTR_FH, .fh = 77};

	w_init(&w, FUSE_GETATTR);
	w_op(&w, &in, sizeof(in));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.getattr.getattr_flags, FUSE_GETATTR_FH);
	ck_assert_uint_eq(m.in.getattr.fh, 77);
	check_no_tail(&m);
	/* only the op header is taken: the ring's stale bytes are not */
	ck_assert_uint_eq(((uint8_t *)&m.in)[sizeof(in)], 0);
	w_free(&w);
}
END_TEST

START_TEST(t_setattr)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_setattr_in in = {.valid = FATTR_SIZE | FATTR_MODE | FATTR_MTIME,
	                             .size = 1ull << 40,
	                             .mode = 0640,
	                             .mtime = 1700000000,
	                             .mtimensec = 123,
	                             .uid = 5,
	                             .gid = 6};

	w_init(&w, FUSE_SETATTR);
	w_op(&w, &in, sizeof(in));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.setattr.valid, FATTR_SIZE | FATTR_MODE | FATTR_MTIME);
	ck_assert_uint_eq(m.in.setattr.size, 1ull << 40);
	ck_assert_uint_eq(m.in.setattr.mode, 0640);
	ck_assert_uint_eq(m.in.setattr.mtime, 1700000000);
	ck_assert_uint_eq(m.in.setattr.mtimensec, 123);
	ck_assert_uint_eq(m.in.setattr.uid, 5);
	ck_assert_uint_eq(m.in.setattr.gid, 6);
	check_no_tail(&m);
	w_free(&w);
}
END_TEST

START_TEST(t_open_opendir)
{
	static const uint32_t ops[] = {FUSE_OPEN, FUSE_OPENDIR};

	for (unsigned k = 0; k < 2; k++) {
		struct wire w;
		struct fw_msg m;
		struct fuse_open_in in = {.flags = O_RDWR | O_DIRECT, .open_flags = 3};

		w_init(&w, ops[k]);
		w_op(&w, &in, sizeof(in));
		decode_ok(&w, _i, &m);
		ck_assert_uint_eq(m.in.open.flags, O_RDWR | O_DIRECT);
		ck_assert_uint_eq(m.in.open.open_flags, 3);
		check_no_tail(&m);
		w_free(&w);
	}
}
END_TEST

START_TEST(t_read_readdir)
{
	static const uint32_t ops[] = {FUSE_READ, FUSE_READDIR};

	for (unsigned k = 0; k < 2; k++) {
		struct wire w;
		struct fw_msg m;
		struct fuse_read_in in = {.fh = 9,
		                          .offset = 0x123456789000ull,
		                          .size = 131072,
		                          .read_flags = FUSE_READ_LOCKOWNER,
		                          .lock_owner = 0xabcdef,
		                          .flags = O_RDONLY};

		w_init(&w, ops[k]);
		w_op(&w, &in, sizeof(in));
		decode_ok(&w, _i, &m);
		ck_assert_uint_eq(m.in.read.fh, 9);
		ck_assert_uint_eq(m.in.read.offset, 0x123456789000ull);
		ck_assert_uint_eq(m.in.read.size, 131072);
		ck_assert_uint_eq(m.in.read.read_flags, FUSE_READ_LOCKOWNER);
		ck_assert_uint_eq(m.in.read.lock_owner, 0xabcdef);
		check_no_tail(&m);
		w_free(&w);
	}
}
END_TEST

START_TEST(t_release_flush_fsync)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_release_in rel = {
	    .fh = 5, .flags = O_WRONLY, .release_flags = FUSE_RELEASE_FLUSH, .lock_owner = 8};
	struct fuse_flush_in fl = {.fh = 6, .lock_owner = 10};
	struct fuse_fsync_in fs = {.fh = 7, .fsync_flags = 1};

	w_init(&w, FUSE_RELEASE);
	w_op(&w, &rel, sizeof(rel));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.release.fh, 5);
	ck_assert_uint_eq(m.in.release.release_flags, FUSE_RELEASE_FLUSH);
	ck_assert_uint_eq(m.in.release.lock_owner, 8);
	check_no_tail(&m);
	w.h.opcode = FUSE_RELEASEDIR;
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.release.fh, 5);
	w_free(&w);

	w_init(&w, FUSE_FLUSH);
	w_op(&w, &fl, sizeof(fl));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.flush.fh, 6);
	ck_assert_uint_eq(m.in.flush.lock_owner, 10);
	w_free(&w);

	w_init(&w, FUSE_FSYNC);
	w_op(&w, &fs, sizeof(fs));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.fsync.fh, 7);
	ck_assert_uint_eq(m.in.fsync.fsync_flags, 1);
	w.h.opcode = FUSE_FSYNCDIR;
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.fsync.fh, 7);
	w_free(&w);
}
END_TEST

START_TEST(t_fallocate_lseek_access_interrupt)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_fallocate_in fa = {.fh = 1, .offset = 4096, .length = 1 << 20, .mode = 3};
	struct fuse_lseek_in ls = {.fh = 2, .offset = 8192, .whence = SEEK_DATA};
	struct fuse_access_in ac = {.mask = 4};
	struct fuse_interrupt_in it = {.unique = 99};

	w_init(&w, FUSE_FALLOCATE);
	w_op(&w, &fa, sizeof(fa));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.fallocate.offset, 4096);
	ck_assert_uint_eq(m.in.fallocate.length, 1 << 20);
	ck_assert_uint_eq(m.in.fallocate.mode, 3);
	check_no_tail(&m);
	w_free(&w);

	w_init(&w, FUSE_LSEEK);
	w_op(&w, &ls, sizeof(ls));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.lseek.offset, 8192);
	ck_assert_uint_eq(m.in.lseek.whence, SEEK_DATA);
	w_free(&w);

	w_init(&w, FUSE_ACCESS);
	w_op(&w, &ac, sizeof(ac));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.access.mask, 4);
	w_free(&w);

	w_init(&w, FUSE_INTERRUPT);
	w.h.unique = 100;
	w_op(&w, &it, sizeof(it));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.interrupt.unique, 99);
	w_free(&w);
}
END_TEST

START_TEST(t_statfs_destroy)
{
	static const uint32_t ops[] = {FUSE_STATFS, FUSE_DESTROY};

	for (unsigned k = 0; k < 2; k++) {
		struct wire w;
		struct fw_msg m;

		w_init(&w, ops[k]);
		decode_ok(&w, _i, &m);
		check_no_tail(&m);
		/* no op header: nothing of the ring's op area is taken */
		ck_assert_uint_eq(m.in.setattr.valid, 0);
		w_free(&w);
	}
}
END_TEST

START_TEST(t_forget)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_forget_in in = {.nlookup = 3};

	w_init(&w, FUSE_FORGET);
	w.h.unique = 0; /* FORGET has no answer */
	w_op(&w, &in, sizeof(in));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.forget.nlookup, 3);
	ck_assert_uint_eq(m.h.unique, 0);
	check_no_tail(&m);
	w_free(&w);
}
END_TEST

START_TEST(t_batch_forget)
{
	for (uint32_t n = 0; n <= 5; n += 5) {
		struct wire w;
		struct fw_msg m;
		struct fuse_batch_forget_in in = {.count = n};
		struct fuse_forget_one one[5];

		for (uint32_t k = 0; k < 5; k++)
			one[k] = (struct fuse_forget_one){.nodeid = 100 + k, .nlookup = k + 1};
		w_init(&w, FUSE_BATCH_FORGET);
		w.h.unique = 0;
		w_op(&w, &in, sizeof(in));
		w_tail(&w, one, n * sizeof(one[0]));
		decode_ok(&w, _i, &m);
		ck_assert_uint_eq(m.in.batch_forget.count, n);
		ck_assert_uint_eq(m.data_len, n * sizeof(struct fuse_forget_one));
		if (n) {
			ck_assert_ptr_eq(m.data, w_rest(&w, _i));
			for (uint32_t k = 0; k < n; k++) {
				struct fuse_forget_one f;

				memcpy(&f, (const uint8_t *)m.data + k * sizeof(f), sizeof(f));
				ck_assert_uint_eq(f.nodeid, 100 + k);
				ck_assert_uint_eq(f.nlookup, k + 1);
			}
		}
		ck_assert_ptr_null(m.name);
		w_free(&w);
	}
}
END_TEST

START_TEST(t_init)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_init_in in = {.major = 7,
	                          .minor = 42,
	                          .max_readahead = 131072,
	                          .flags = FUSE_ASYNC_READ | FUSE_INIT_EXT,
	                          .flags2 = (uint32_t)(FUSE_OVER_IO_URING >> 32)};

	w_init(&w, FUSE_INIT);
	w_op(&w, &in, sizeof(in));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.init.major, 7);
	ck_assert_uint_eq(m.in.init.minor, 42);
	ck_assert_uint_eq(m.in.init.max_readahead, 131072);
	ck_assert_uint_eq(fw_init_flags_in(&m.in.init),
	                  FUSE_ASYNC_READ | FUSE_INIT_EXT | FUSE_OVER_IO_URING);
	check_no_tail(&m);
	w_free(&w);
}
END_TEST

/* before 7.36 the kernel sends the 16-byte fuse_init_in: zero-extended */
START_TEST(t_init_short)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_init_in in = {.major = 7,
	                          .minor = 31,
	                          .max_readahead = 65536,
	                          .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES};

	for (size_t len = 16; len <= sizeof(in); len += 24) {
		w_init(&w, FUSE_INIT);
		w_op(&w, &in, len);
		decode_ok(&w, DEV, &m);
		ck_assert_uint_eq(m.in.init.major, 7);
		ck_assert_uint_eq(m.in.init.minor, 31);
		ck_assert_uint_eq(m.in.init.flags, FUSE_ASYNC_READ | FUSE_BIG_WRITES);
		ck_assert_uint_eq(m.in.init.flags2, 0);
		for (size_t k = 0; k < sizeof(m.in.init.unused) / sizeof(m.in.init.unused[0]); k++)
			ck_assert_uint_eq(m.in.init.unused[k], 0);
		w_free(&w);
	}
	/* shorter than 16: not an INIT */
	w_init(&w, FUSE_INIT);
	w_op(&w, &in, 15);
	expect_rc(&w, DEV, FW_BAD);
	w_free(&w);
}
END_TEST

/* ---- ops with names ---- */

START_TEST(t_lookup)
{
	struct wire w;
	struct fw_msg m;

	w_init(&w, FUSE_LOOKUP);
	w_str(&w, "nvme0n1");
	decode_ok(&w, _i, &m);
	ck_assert_str_eq(m.name, "nvme0n1");
	ck_assert_ptr_eq(m.name, (const char *)w_rest(&w, _i));
	ck_assert_ptr_null(m.name2);
	ck_assert_ptr_null(m.data);
	/* the UNLINK and RMDIR shapes are the same */
	w.h.opcode = FUSE_UNLINK;
	decode_ok(&w, _i, &m);
	ck_assert_str_eq(m.name, "nvme0n1");
	w.h.opcode = FUSE_RMDIR;
	decode_ok(&w, _i, &m);
	ck_assert_str_eq(m.name, "nvme0n1");
	w_free(&w);

	/* a name of FUSE's longest: all of it */
	char big[1025];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	w_init(&w, FUSE_LOOKUP);
	w_str(&w, big);
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(strlen(m.name), 1024);
	w_free(&w);
}
END_TEST

START_TEST(t_name_with_header)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_mknod_in mk = {.mode = S_IFREG | 0600, .rdev = 0x0801, .umask = 022};
	struct fuse_mkdir_in md = {.mode = 0755, .umask = 077};
	struct fuse_create_in cr = {
	    .flags = O_CREAT | O_RDWR, .mode = 0644, .umask = 02, .open_flags = 1};
	struct fuse_link_in ln = {.oldnodeid = 17};

	w_init(&w, FUSE_MKNOD);
	w_op(&w, &mk, sizeof(mk));
	w_str(&w, "dev");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.mknod.mode, S_IFREG | 0600);
	ck_assert_uint_eq(m.in.mknod.rdev, 0x0801);
	ck_assert_uint_eq(m.in.mknod.umask, 022);
	ck_assert_str_eq(m.name, "dev");
	ck_assert_ptr_eq(m.name, (const char *)w_rest(&w, _i));
	ck_assert_ptr_null(m.name2);
	w_free(&w);

	w_init(&w, FUSE_MKDIR);
	w_op(&w, &md, sizeof(md));
	w_str(&w, "d");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.mkdir.mode, 0755);
	ck_assert_uint_eq(m.in.mkdir.umask, 077);
	ck_assert_str_eq(m.name, "d");
	w_free(&w);

	w_init(&w, FUSE_CREATE);
	w_op(&w, &cr, sizeof(cr));
	w_str(&w, "new");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.create.flags, O_CREAT | O_RDWR);
	ck_assert_uint_eq(m.in.create.mode, 0644);
	ck_assert_uint_eq(m.in.create.open_flags, 1);
	ck_assert_str_eq(m.name, "new");
	w_free(&w);

	w_init(&w, FUSE_LINK);
	w_op(&w, &ln, sizeof(ln));
	w_str(&w, "hard");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.link.oldnodeid, 17);
	ck_assert_str_eq(m.name, "hard");
	ck_assert_ptr_null(m.name2);
	w_free(&w);
}
END_TEST

START_TEST(t_symlink)
{
	struct wire w;
	struct fw_msg m;

	w_init(&w, FUSE_SYMLINK);
	w_str(&w, "link");
	w_str(&w, "../target/file");
	decode_ok(&w, _i, &m);
	ck_assert_str_eq(m.name, "link");
	ck_assert_str_eq(m.name2, "../target/file");
	ck_assert_ptr_eq(m.name, (const char *)w_rest(&w, _i));
	ck_assert_ptr_eq(m.name2, (const char *)w_rest(&w, _i) + 5);
	w_free(&w);
}
END_TEST

START_TEST(t_rename)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_rename_in rn = {.newdir = 12};
	struct fuse_rename2_in r2 = {.newdir = 13, .flags = RENAME_NOREPLACE};

	/* RENAME: flags 0 whatever the ring's op area holds after the header */
	w_init(&w, FUSE_RENAME);
	w_op(&w, &rn, sizeof(rn));
	w_str(&w, "old");
	w_str(&w, "new");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.rename2.newdir, 12);
	ck_assert_uint_eq(m.in.rename2.flags, 0);
	ck_assert_str_eq(m.name, "old");
	ck_assert_str_eq(m.name2, "new");
	ck_assert_ptr_eq(m.name2, m.name + 4);
	w_free(&w);

	w_init(&w, FUSE_RENAME2);
	w_op(&w, &r2, sizeof(r2));
	w_str(&w, "a");
	w_str(&w, "bb");
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.rename2.newdir, 13);
	ck_assert_uint_eq(m.in.rename2.flags, RENAME_NOREPLACE);
	ck_assert_str_eq(m.name, "a");
	ck_assert_str_eq(m.name2, "bb");
	w_free(&w);
}
END_TEST

/* an empty name is a well-formed string: the decoder passes it on and the
 * op answers it (ENOENT, EPERM); only a missing name is malformed */
START_TEST(t_name_empty)
{
	struct wire w;
	struct fw_msg m;

	w_init(&w, FUSE_LOOKUP);
	w_str(&w, "");
	decode_ok(&w, _i, &m);
	ck_assert_str_eq(m.name, "");
	w_free(&w);

	w_init(&w, FUSE_LOOKUP); /* no bytes at all where the name goes */
	expect_rc(&w, _i, FW_BAD);
	w.ring_null = true; /* a transport may pass no payload as NULL */
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);

	w_init(&w, FUSE_SYMLINK); /* the link target missing */
	w_str(&w, "name");
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);
}
END_TEST

START_TEST(t_name_no_nul)
{
	static const uint32_t one[] = {FUSE_LOOKUP, FUSE_UNLINK, FUSE_RMDIR};
	struct wire w;

	for (unsigned k = 0; k < 3; k++) {
		w_init(&w, one[k]);
		w_tail(&w, "abc", 3);
		expect_rc(&w, _i, FW_BAD);
		w_free(&w);
	}

	struct fuse_mkdir_in md = {.mode = 0755};
	w_init(&w, FUSE_MKDIR);
	w_op(&w, &md, sizeof(md));
	w_tail(&w, "d", 1);
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);

	/* second name unterminated: the first alone does not do */
	struct fuse_rename2_in r2 = {.newdir = 1};
	w_init(&w, FUSE_RENAME2);
	w_op(&w, &r2, sizeof(r2));
	w_str(&w, "old");
	w_tail(&w, "new", 3);
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);

	w_init(&w, FUSE_SYMLINK);
	w_str(&w, "link");
	w_tail(&w, "target", 6);
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);
}
END_TEST

/* ---- WRITE ---- */

START_TEST(t_write)
{
	struct wire w;
	struct fw_msg m;
	uint8_t buf[8192];

	for (size_t k = 0; k < sizeof(buf); k++)
		buf[k] = (uint8_t)(k * 7 + 1);
	struct fuse_write_in in = {.fh = 3,
	                           .offset = 1 << 20,
	                           .size = sizeof(buf),
	                           .write_flags = FUSE_WRITE_CACHE,
	                           .flags = O_WRONLY};

	w_init(&w, FUSE_WRITE);
	w_op(&w, &in, sizeof(in));
	w_tail(&w, buf, sizeof(buf));
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.in.write.fh, 3);
	ck_assert_uint_eq(m.in.write.offset, 1 << 20);
	ck_assert_uint_eq(m.in.write.size, sizeof(buf));
	ck_assert_uint_eq(m.in.write.write_flags, FUSE_WRITE_CACHE);
	ck_assert_ptr_eq(m.data, w_rest(&w, _i));
	ck_assert_uint_eq(m.data_len, sizeof(buf));
	ck_assert_mem_eq(m.data, buf, sizeof(buf));
	ck_assert_ptr_null(m.name);
	/* split: the data stays where the reader's readv put it */
	ck_assert(w.in_tail == (_i == SPLIT));
	w_free(&w);

	/* the payload holds more than size (the ring's buffer): size counts */
	in.size = 100;
	w_init(&w, FUSE_WRITE);
	w_op(&w, &in, sizeof(in));
	w_tail(&w, buf, 4096);
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.data_len, 100);
	ck_assert_ptr_eq(m.data, w_rest(&w, _i));
	w_free(&w);

	/* a zero-length write */
	in.size = 0;
	w_init(&w, FUSE_WRITE);
	w_op(&w, &in, sizeof(in));
	w.ring_null = true;
	decode_ok(&w, _i, &m);
	ck_assert_uint_eq(m.data_len, 0);
	w_free(&w);
}
END_TEST

START_TEST(t_write_short)
{
	static const uint32_t sizes[] = {4097, 8192, 256u * 4096 + 1, UINT32_MAX};
	struct wire w;
	uint8_t buf[4096] = {1};

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct fuse_write_in in = {.fh = 3, .size = sizes[k]};

		w_init(&w, FUSE_WRITE);
		w_op(&w, &in, sizeof(in));
		w_tail(&w, buf, sizeof(buf));
		expect_rc(&w, _i, FW_BAD);
		w_free(&w);
	}
	/* no data at all */
	struct fuse_write_in in = {.size = 1};
	w_init(&w, FUSE_WRITE);
	w_op(&w, &in, sizeof(in));
	expect_rc(&w, _i, FW_BAD);
	w.ring_null = true;
	expect_rc(&w, _i, FW_BAD);
	w_free(&w);
}
END_TEST

/* ---- malformed ---- */

START_TEST(t_batch_forget_overflow)
{
	/* counts whose byte size is beyond the bytes, including ones that
	 * wrap to a small number in 32 bits */
	static const uint32_t counts[] = {4, 0x10000000u, 0x10000001u, UINT32_MAX};
	struct fuse_forget_one one[3] = {{1, 1}, {2, 1}, {3, 1}};
	struct wire w;

	for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		struct fuse_batch_forget_in in = {.count = counts[k]};

		w_init(&w, FUSE_BATCH_FORGET);
		w.h.unique = 0;
		w_op(&w, &in, sizeof(in));
		w_tail(&w, one, sizeof(one));
		expect_rc(&w, _i, FW_BAD);
		w_free(&w);
	}
}
END_TEST

/* Every served opcode with its op header one byte short. */
START_TEST(t_op_truncated)
{
	static const struct {
		uint32_t op;
		size_t hsize;
	} ops[] = {
	    {FUSE_FORGET, sizeof(struct fuse_forget_in)},
	    {FUSE_GETATTR, sizeof(struct fuse_getattr_in)},
	    {FUSE_SETATTR, sizeof(struct fuse_setattr_in)},
	    {FUSE_MKNOD, sizeof(struct fuse_mknod_in)},
	    {FUSE_MKDIR, sizeof(struct fuse_mkdir_in)},
	    {FUSE_RENAME, sizeof(struct fuse_rename_in)},
	    {FUSE_LINK, sizeof(struct fuse_link_in)},
	    {FUSE_OPEN, sizeof(struct fuse_open_in)},
	    {FUSE_READ, sizeof(struct fuse_read_in)},
	    {FUSE_WRITE, sizeof(struct fuse_write_in)},
	    {FUSE_RELEASE, sizeof(struct fuse_release_in)},
	    {FUSE_FSYNC, sizeof(struct fuse_fsync_in)},
	    {FUSE_FLUSH, sizeof(struct fuse_flush_in)},
	    {FUSE_INIT, 16},
	    {FUSE_OPENDIR, sizeof(struct fuse_open_in)},
	    {FUSE_READDIR, sizeof(struct fuse_read_in)},
	    {FUSE_RELEASEDIR, sizeof(struct fuse_release_in)},
	    {FUSE_FSYNCDIR, sizeof(struct fuse_fsync_in)},
	    {FUSE_ACCESS, sizeof(struct fuse_access_in)},
	    {FUSE_CREATE, sizeof(struct fuse_create_in)},
	    {FUSE_INTERRUPT, sizeof(struct fuse_interrupt_in)},
	    {FUSE_BATCH_FORGET, sizeof(struct fuse_batch_forget_in)},
	    {FUSE_FALLOCATE, sizeof(struct fuse_fallocate_in)},
	    {FUSE_RENAME2, sizeof(struct fuse_rename2_in)},
	    {FUSE_LSEEK, sizeof(struct fuse_lseek_in)},
	};
	uint8_t zero[OP_AREA] = {0};

	for (unsigned k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		struct wire w;
		struct fw_msg m;

		/* whole: decodes (no tail for the ops that need one is tried
		 * separately); one byte short: malformed */
		w_init(&w, ops[k].op);
		w_op(&w, zero, ops[k].hsize - 1);
		w.ring_op_len = ops[k].hsize - 1;
		expect_rc(&w, _i, FW_BAD);
		w.op_len = ops[k].hsize;
		w.ring_op_len = ops[k].hsize;
		w_str(&w, "n"); /* a name or two, for the ops that take names */
		w_str(&w, "m");
		int rc = w_decode(&w, _i, &m);
		ck_assert_msg(rc == FW_OK, "opcode %u whole (%s): %d", ops[k].op, shape_name[_i],
		              rc);
		w_free(&w);
	}
}
END_TEST

/* fw_decode_dev_split beyond the shapes the loop tests share */
START_TEST(t_dev_split)
{
	struct fuse_in_header h = {.opcode = FUSE_WRITE, .unique = 9, .nodeid = 2};
	struct fuse_write_in in = {.fh = 1, .offset = 4096, .size = 4096};
	uint8_t head[FW_DEV_HEAD + 64], tail[4096 + 16];
	struct fw_msg m;
	bool in_tail = true;

	for (size_t k = 0; k < sizeof(tail); k++)
		tail[k] = (uint8_t)(k * 13 + 5);
	/* a WRITE with an extension (8 bytes) after its data: the data in
	 * place, the extension left out */
	h.len = (uint32_t)(FW_DEV_HEAD + 4096 + 8);
	h.total_extlen = 1;
	memcpy(head, &h, sizeof(h));
	memcpy(head + sizeof(h), &in, sizeof(in));
	ck_assert_int_eq(fw_decode_dev_split(head, FW_DEV_HEAD, sizeof(head), tail, 4096 + 8, &m,
					     &in_tail),
			 FW_OK);
	ck_assert(in_tail);
	ck_assert_ptr_eq(m.data, tail);
	ck_assert_uint_eq(m.data_len, 4096);
	ck_assert_uint_eq(m.h.unique, 9);
	/* extensions that leave less data than size: malformed, not taken */
	h.total_extlen = 8;
	memcpy(head, &h, sizeof(h));
	ck_assert_int_eq(fw_decode_dev_split(head, FW_DEV_HEAD, sizeof(head), tail, 4096 + 8, &m,
					     &in_tail),
			 FW_BAD);
	ck_assert(!in_tail);
	/* extensions longer than what came: not a WRITE to take in place,
	 * and the head has no room to make it whole */
	h.total_extlen = 600;
	memcpy(head, &h, sizeof(h));
	ck_assert_int_eq(fw_decode_dev_split(head, FW_DEV_HEAD, sizeof(head), tail, 4096 + 8, &m,
					     &in_tail),
			 FW_BAD);
	ck_assert(!in_tail);
	ck_assert_uint_eq(m.h.unique, 9);
	/* h.len not what was read: not taken in place; made whole it is
	 * malformed (room given here) */
	uint8_t whole[FW_DEV_HEAD + sizeof(tail)];

	h.total_extlen = 0;
	h.len = (uint32_t)(FW_DEV_HEAD + 4096 + 1);
	memcpy(whole, &h, sizeof(h));
	memcpy(whole + sizeof(h), &in, sizeof(in));
	ck_assert_int_eq(fw_decode_dev_split(whole, FW_DEV_HEAD, sizeof(whole), tail, 4096, &m,
					     &in_tail),
			 FW_BAD);
	ck_assert(!in_tail);
	/* a READ's 80 bytes and a tail (the kernel never sends one; bytes of
	 * some other request): made whole, its length says it is cut wrong */
	h.opcode = FUSE_READ;
	h.len = (uint32_t)FW_DEV_HEAD;
	memcpy(whole, &h, sizeof(h));
	ck_assert_int_eq(fw_decode_dev_split(whole, FW_DEV_HEAD, sizeof(whole), tail, 16, &m,
					     &in_tail),
			 FW_BAD);
	/* nothing in the tail: as fw_decode_dev */
	ck_assert_int_eq(fw_decode_dev_split(whole, FW_DEV_HEAD, FW_DEV_HEAD, tail, 0, &m,
					     &in_tail),
			 FW_OK);
	ck_assert_uint_eq(m.h.opcode, FUSE_READ);
}
END_TEST

START_TEST(t_dev_short)
{
	uint8_t buf[sizeof(struct fuse_in_header)];
	struct fw_msg m;
	struct fuse_in_header zero = {0};

	memset(buf, 0, sizeof(buf));
	for (size_t len = 0; len < sizeof(buf); len++) {
		/* the in header's len says what was read, yet it is cut */
		struct fuse_in_header h = {
		    .len = (uint32_t)len, .opcode = FUSE_STATFS, .unique = 1};
		uint8_t *b = malloc(len ? len : 1);

		ck_assert_ptr_nonnull(b);
		memcpy(b, &h, len);
		memset(&m, 0x5a, sizeof(m));
		ck_assert_int_eq(fw_decode_dev(b, len, &m), FW_BAD);
		ck_assert_mem_eq(&m.h, &zero, sizeof(zero)); /* zeroed */
		free(b);
	}
}
END_TEST

START_TEST(t_dev_len_mismatch)
{
	static const int deltas[] = {1, -1, 4096, -40, INT32_MIN / 2};
	struct fuse_getattr_in in = {0};

	for (unsigned k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
		struct wire w;

		w_init(&w, FUSE_GETATTR);
		w_op(&w, &in, sizeof(in));
		w.len_delta = deltas[k];
		expect_rc(&w, DEV, FW_BAD);
		w_free(&w);

		/* whatever the opcode */
		w_init(&w, 9999);
		w.len_delta = deltas[k];
		expect_rc(&w, DEV, FW_BAD);
		w_free(&w);
	}
}
END_TEST

START_TEST(t_dev_extensions)
{
	struct wire w;
	struct fw_msg m;
	uint8_t ext[24];
	uint8_t data[16];

	memset(ext, 'E', sizeof(ext)); /* no NUL: a name must end before them */
	memset(data, 'D', sizeof(data));

	/* a name followed by extensions */
	w_init(&w, FUSE_LOOKUP);
	w_str(&w, "f");
	w_tail(&w, ext, sizeof(ext));
	w.h.total_extlen = sizeof(ext) / 8;
	decode_ok(&w, DEV, &m);
	ck_assert_str_eq(m.name, "f");
	w_free(&w);

	/* the name's NUL would only be in the extensions: malformed */
	w_init(&w, FUSE_LOOKUP);
	w_tail(&w, "f", 1);
	ext[0] = 0;
	w_tail(&w, ext, sizeof(ext));
	w.h.total_extlen = sizeof(ext) / 8;
	expect_rc(&w, DEV, FW_BAD);
	w_free(&w);

	/* a write's data must be there without the extensions */
	struct fuse_write_in wi = {.size = sizeof(data)};
	w_init(&w, FUSE_WRITE);
	w_op(&w, &wi, sizeof(wi));
	w_tail(&w, data, sizeof(data));
	w_tail(&w, ext, sizeof(ext));
	w.h.total_extlen = sizeof(ext) / 8;
	decode_ok(&w, DEV, &m);
	ck_assert_uint_eq(m.data_len, sizeof(data));
	ck_assert_mem_eq(m.data, data, sizeof(data));
	wi.size = sizeof(data) + 8;
	w_op(&w, &wi, sizeof(wi));
	expect_rc(&w, DEV, FW_BAD);
	w_free(&w);

	/* extensions longer than the message, or eating the op header */
	struct fuse_getattr_in gi = {0};
	w_init(&w, FUSE_GETATTR);
	w_op(&w, &gi, sizeof(gi));
	w.h.total_extlen = 1000;
	expect_rc(&w, DEV, FW_BAD);
	w.h.total_extlen = UINT16_MAX;
	expect_rc(&w, DEV, FW_BAD);
	w.h.total_extlen = 1; /* 8 of the op header's 16 bytes */
	expect_rc(&w, DEV, FW_BAD);
	w.h.total_extlen = 2;
	expect_rc(&w, DEV, FW_BAD);
	w_free(&w);
	w_init(&w, FUSE_STATFS);
	w.h.total_extlen = 1;
	expect_rc(&w, DEV, FW_BAD);
	w_free(&w);
}
END_TEST

START_TEST(t_unknown_opcode)
{
	/* not in the protocol, unserved within the table's range, and past
	 * it (COPY_FILE_RANGE, SETUPMAPPING, ..., CUSE_INIT, huge) */
	static const uint32_t ops[] = {
	    0,  FUSE_READLINK, FUSE_SETXATTR, FUSE_GETXATTR, FUSE_GETLK, 41, FUSE_COPY_FILE_RANGE,
	    48, 4096,          UINT32_MAX};
	uint8_t junk[64];

	memset(junk, 0xee, sizeof(junk));
	for (unsigned k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		struct wire w;

		w_init(&w, ops[k]);
		expect_rc(&w, _i, FW_NOSYS);
		/* whatever it carries */
		w_op(&w, junk, 16);
		w_tail(&w, junk, sizeof(junk));
		expect_rc(&w, _i, FW_NOSYS);
		w_free(&w);
	}
}
END_TEST

/* ---- INIT negotiation ---- */

static const struct fw_init_want want_ring = {
    .max_write = 1 << 20, .max_background = 1024, .congestion_threshold = 768, .uring = true};

START_TEST(t_init_answer)
{
	struct fuse_init_in in = {
	    .major = 7,
	    .minor = 42,
	    .max_readahead = 131072,
	    .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES |
	             FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT | FUSE_WRITEBACK_CACHE | FUSE_POSIX_ACL |
	             FUSE_DO_READDIRPLUS,
	    .flags2 = (uint32_t)((FUSE_OVER_IO_URING | FUSE_REQUEST_TIMEOUT) >> 32)};
	struct fuse_init_out out;
	uint64_t base = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES |
	                FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT;

	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(out.major, 7);
	ck_assert_uint_eq(out.minor, 42);
	/* what we serve, of what is offered; nothing else */
	ck_assert_uint_eq(fw_init_flags_out(&out), base | FUSE_OVER_IO_URING);
	ck_assert_uint_eq(out.flags2, (uint32_t)(FUSE_OVER_IO_URING >> 32));
	ck_assert_uint_eq(out.max_readahead, 131072);
	ck_assert_uint_eq(out.max_write, 1 << 20);
	ck_assert_uint_eq(out.max_pages, 256);
	ck_assert_uint_eq(out.max_background, 1024);
	ck_assert_uint_eq(out.congestion_threshold, 768);
	ck_assert_uint_eq(out.time_gran, 1);

	/* the ring only when the caller wants it */
	struct fw_init_want w = want_ring;
	w.uring = false;
	ck_assert_int_eq(fw_init_answer(&in, &w, &out), FW_OK);
	ck_assert_uint_eq(fw_init_flags_out(&out), base);
	ck_assert_uint_eq(out.flags2, 0);

	/* ... and only when the kernel offered it */
	in.flags2 = 0;
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(fw_init_flags_out(&out), base);
	ck_assert_uint_eq(out.flags2, 0);

	/* flags2 means nothing without INIT_EXT */
	in.flags2 = (uint32_t)(FUSE_OVER_IO_URING >> 32);
	in.flags &= ~FUSE_INIT_EXT;
	ck_assert_uint_eq(fw_init_flags_in(&in), in.flags);
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(fw_init_flags_out(&out), base & ~(uint64_t)FUSE_INIT_EXT);
	ck_assert_uint_eq(out.flags2, 0);

	/* a kernel offering little gets little */
	in.flags = FUSE_ASYNC_READ | FUSE_WRITEBACK_CACHE;
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(fw_init_flags_out(&out), FUSE_ASYNC_READ);
	ck_assert_uint_eq(out.max_pages, 0); /* MAX_PAGES not offered */
	in.flags = 0;
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(fw_init_flags_out(&out), 0);
}
END_TEST

/* max_pages counts the kernel's pages: an io_uring entry's payload must hold
 * max_pages of them, so 1 MiB is 16 pages of 64 KiB, not 256 */
START_TEST(t_init_max_pages_page_size)
{
	static const struct {
		uint32_t page_size, max_write;
		uint16_t pages;
	} cases[] = {
	    {0, 1 << 20, 256},     {4096, 1 << 20, 256},   {16384, 1 << 20, 64},
	    {65536, 1 << 20, 16},  {65536, 4096, 1},       {65536, 65536 * 3 + 1, 3},
	};
	struct fuse_init_in in = {.major = 7, .minor = 42, .flags = FUSE_MAX_PAGES};
	struct fuse_init_out out;

	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct fw_init_want w = want_ring;

		w.page_size = cases[k].page_size;
		w.max_write = cases[k].max_write;
		ck_assert_int_eq(fw_init_answer(&in, &w, &out), FW_OK);
		ck_assert_msg(out.max_pages == cases[k].pages, "page %u, max_write %u: max_pages %u, not %u",
		              cases[k].page_size, cases[k].max_write, out.max_pages, cases[k].pages);
	}
}
END_TEST

START_TEST(t_init_max_pages)
{
	static const struct {
		uint32_t max_write;
		uint16_t pages;
	} cases[] = {
	    {4096, 1},
	    {100, 1},
	    {0, 1},
	    {6000, 1},
	    {8192, 2},
	    {1 << 20, 256},
	    {4 << 20, 1024},
	    {65535u * 4096, 65535},
	    /* beyond what the 16-bit field holds: its most, not a
	     * truncated count (65536 pages would be 0, i.e. one page) */
	    {65536u * 4096, 65535},
	    {1u << 30, 65535},
	    {UINT32_MAX, 65535},
	};
	struct fuse_init_in in = {.major = 7, .minor = 42, .flags = FUSE_MAX_PAGES};
	struct fuse_init_out out;

	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct fw_init_want w = want_ring;

		w.max_write = cases[k].max_write;
		ck_assert_int_eq(fw_init_answer(&in, &w, &out), FW_OK);
		ck_assert_msg(out.max_pages == cases[k].pages, "max_write %u: max_pages %u, not %u",
		              cases[k].max_write, out.max_pages, cases[k].pages);
		ck_assert_uint_eq(out.max_write, cases[k].max_write);
	}
}
END_TEST

START_TEST(t_init_version)
{
	struct fuse_init_in in = {.major = 7, .flags = FUSE_ASYNC_READ};
	struct fuse_init_out out;

	/* the smaller minor */
	for (uint32_t minor = FW_PROTO_MINOR_MIN; minor < 60; minor++) {
		in.minor = minor;
		ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
		ck_assert_uint_eq(out.major, 7);
		ck_assert_uint_eq(out.minor, minor < FW_PROTO_MINOR ? minor : FW_PROTO_MINOR);
		ck_assert_uint_eq(out.flags, FUSE_ASYNC_READ);
	}
	/* too old a minor */
	in.minor = FW_PROTO_MINOR_MIN - 1;
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), -EPROTO);
	in.minor = 0;
	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), -EPROTO);
	/* another major: our version in the answer, nothing offered */
	static const uint32_t majors[] = {0, 6, 8, UINT32_MAX};
	for (unsigned k = 0; k < 4; k++) {
		in.major = majors[k];
		in.minor = 42;
		ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), -EPROTO);
		ck_assert_uint_eq(out.major, FW_PROTO_MAJOR);
		ck_assert_uint_eq(out.minor, FW_PROTO_MINOR);
		ck_assert_uint_eq(fw_init_flags_out(&out), 0);
	}
}
END_TEST

/* an INIT as the kernel sends it, through the decoder, to the answer */
START_TEST(t_init_decoded_answer)
{
	struct wire w;
	struct fw_msg m;
	struct fuse_init_out out;
	struct fuse_init_in old = {.major = 7,
	                           .minor = 31,
	                           .max_readahead = 4096,
	                           .flags = FUSE_ASYNC_READ | FUSE_MAX_PAGES};
	struct fuse_init_in six = {.major = 6, .minor = 42};

	w_init(&w, FUSE_INIT);
	w_op(&w, &old, 16);
	decode_ok(&w, DEV, &m);
	ck_assert_int_eq(fw_init_answer(&m.in.init, &want_ring, &out), FW_OK);
	ck_assert_uint_eq(out.minor, 31);
	ck_assert_uint_eq(fw_init_flags_out(&out), FUSE_ASYNC_READ | FUSE_MAX_PAGES);
	ck_assert_uint_eq(out.max_readahead, 4096);
	w_free(&w);

	w_init(&w, FUSE_INIT);
	w_op(&w, &six, sizeof(six));
	decode_ok(&w, DEV, &m);
	ck_assert_int_eq(fw_init_answer(&m.in.init, &want_ring, &out), -EPROTO);
	w_free(&w);
}
END_TEST

/* ---- answers through a fake transport ---- */

struct fake {
	unsigned sends, drops;
	/* the answer as /dev/fuse would get it: out header and arguments */
	uint8_t ans[4096];
	size_t ans_len;
	int iovcnt;
	struct fw_req *last;
};

static struct fake fk;

static void fake_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	struct fuse_out_header oh = {.error = error, .unique = r->unique};
	size_t len = sizeof(oh);

	fk.sends++;
	fk.last = r;
	fk.iovcnt = iovcnt;
	ck_assert_int_ge(iovcnt, 0);
	for (int i = 0; i < iovcnt; i++) {
		ck_assert_uint_le(len + iov[i].iov_len, sizeof(fk.ans));
		memcpy(fk.ans + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	oh.len = (uint32_t)len;
	memcpy(fk.ans, &oh, sizeof(oh));
	fk.ans_len = len;
}

static void fake_drop(struct fw_req *r)
{
	fk.drops++;
	fk.last = r;
}

static const struct fw_transport fake_t = {.send = fake_send, .drop = fake_drop};

static struct fw_req fake_req(uint64_t unique)
{
	memset(&fk, 0, sizeof(fk));
	return (struct fw_req){.t = &fake_t, .tctx = &fk, .unique = unique};
}

/* the answer's out header; its payload follows at fk.ans + 16 */
static struct fuse_out_header answer(size_t payload, int error, uint64_t unique)
{
	struct fuse_out_header oh;

	ck_assert_uint_eq(fk.sends, 1);
	ck_assert_uint_eq(fk.drops, 0);
	memcpy(&oh, fk.ans, sizeof(oh));
	ck_assert_uint_eq(oh.len, sizeof(oh) + payload);
	ck_assert_uint_eq(fk.ans_len, sizeof(oh) + payload);
	ck_assert_int_eq(oh.error, error);
	ck_assert_uint_eq(oh.unique, unique);
	return oh;
}

START_TEST(t_reply_err_none)
{
	struct fw_req r = fake_req(7);

	fw_reply_err(&r, ENOENT);
	answer(0, -ENOENT, 7);
	ck_assert_ptr_eq(fk.last, &r);
	ck_assert_int_eq(fk.iovcnt, 0);

	r = fake_req(8);
	fw_reply_err(&r, 0);
	answer(0, 0, 8);

	r = fake_req(9);
	fw_reply_err(&r, EPROTO);
	answer(0, -EPROTO, 9);

	r = fake_req(10);
	fw_reply_none(&r);
	ck_assert_uint_eq(fk.sends, 0);
	ck_assert_uint_eq(fk.drops, 1);
	ck_assert_ptr_eq(fk.last, &r);
}
END_TEST

START_TEST(t_reply_buf)
{
	uint8_t b[1000];
	struct fw_req r = fake_req(11);

	for (size_t k = 0; k < sizeof(b); k++)
		b[k] = (uint8_t)(k ^ 0x3c);
	fw_reply_buf(&r, b, sizeof(b));
	answer(sizeof(b), 0, 11);
	ck_assert_mem_eq(fk.ans + 16, b, sizeof(b));

	/* an empty read: success, no arguments */
	r = fake_req(12);
	fw_reply_buf(&r, NULL, 0);
	answer(0, 0, 12);
	ck_assert_int_eq(fk.iovcnt, 0);
}
END_TEST

START_TEST(t_reply_init)
{
	struct fuse_init_in in = {.major = 7, .minor = 42, .flags = FUSE_ASYNC_READ};
	struct fuse_init_out out, got;
	struct fw_req r = fake_req(1);

	ck_assert_int_eq(fw_init_answer(&in, &want_ring, &out), FW_OK);
	fw_reply_init(&r, &out);
	answer(sizeof(out), 0, 1);
	ck_assert_uint_eq(sizeof(out), 64);
	memcpy(&got, fk.ans + 16, sizeof(got));
	ck_assert_mem_eq(&got, &out, sizeof(out));
}
END_TEST

static struct stat some_stat(void)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_ino = 5;
	st.st_size = 1ll << 36;
	st.st_blocks = (1ll << 36) / 512;
	st.st_mode = S_IFREG | 0660;
	st.st_nlink = 1;
	st.st_uid = 1001;
	st.st_gid = 6;
	st.st_rdev = 0;
	st.st_blksize = 4096;
	st.st_atim = (struct timespec){1000, 1};
	st.st_mtim = (struct timespec){2000, 2};
	st.st_ctim = (struct timespec){3000, 999999999};
	return st;
}

static void check_attr(const struct fuse_attr *a)
{
	ck_assert_uint_eq(a->ino, 5);
	ck_assert_uint_eq(a->size, 1ull << 36);
	ck_assert_uint_eq(a->blocks, (1ull << 36) / 512);
	ck_assert_uint_eq(a->mode, S_IFREG | 0660);
	ck_assert_uint_eq(a->nlink, 1);
	ck_assert_uint_eq(a->uid, 1001);
	ck_assert_uint_eq(a->gid, 6);
	ck_assert_uint_eq(a->blksize, 4096);
	ck_assert_uint_eq(a->atime, 1000);
	ck_assert_uint_eq(a->atimensec, 1);
	ck_assert_uint_eq(a->mtime, 2000);
	ck_assert_uint_eq(a->mtimensec, 2);
	ck_assert_uint_eq(a->ctime, 3000);
	ck_assert_uint_eq(a->ctimensec, 999999999);
}

START_TEST(t_reply_entry_attr)
{
	struct stat st = some_stat();
	struct fuse_entry_out e;
	struct fuse_attr_out a;
	struct fw_req r = fake_req(21);

	fw_reply_entry(&r, 77, &st, 1.5);
	answer(sizeof(e), 0, 21);
	memcpy(&e, fk.ans + 16, sizeof(e));
	ck_assert_uint_eq(e.nodeid, 77);
	ck_assert_uint_eq(e.generation, 0);
	ck_assert_uint_eq(e.entry_valid, 1);
	ck_assert_uint_eq(e.entry_valid_nsec, 500000000);
	ck_assert_uint_eq(e.attr_valid, 1);
	ck_assert_uint_eq(e.attr_valid_nsec, 500000000);
	check_attr(&e.attr);

	/* a negative timeout is none */
	r = fake_req(22);
	fw_reply_entry(&r, 78, &st, -3.0);
	answer(sizeof(e), 0, 22);
	memcpy(&e, fk.ans + 16, sizeof(e));
	ck_assert_uint_eq(e.entry_valid, 0);
	ck_assert_uint_eq(e.entry_valid_nsec, 0);

	r = fake_req(23);
	fw_reply_attr(&r, &st, 86400.25);
	answer(sizeof(a), 0, 23);
	memcpy(&a, fk.ans + 16, sizeof(a));
	ck_assert_uint_eq(a.attr_valid, 86400);
	ck_assert_uint_eq(a.attr_valid_nsec, 250000000);
	check_attr(&a.attr);
}
END_TEST

START_TEST(t_reply_open_write_statfs)
{
	struct fuse_open_out o;
	struct fuse_write_out wo;
	struct fuse_statfs_out so;
	struct statvfs sv = {.f_bsize = 4096,
	                     .f_frsize = 512,
	                     .f_blocks = 1000,
	                     .f_bfree = 10,
	                     .f_bavail = 9,
	                     .f_files = 3,
	                     .f_ffree = 0,
	                     .f_namemax = 255};
	struct fw_req r = fake_req(31);

	fw_reply_open(&r, 0xfeed, FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES);
	answer(sizeof(o), 0, 31);
	memcpy(&o, fk.ans + 16, sizeof(o));
	ck_assert_uint_eq(o.fh, 0xfeed);
	ck_assert_uint_eq(o.open_flags, FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES);

	r = fake_req(32);
	fw_reply_write(&r, 65536);
	answer(sizeof(wo), 0, 32);
	memcpy(&wo, fk.ans + 16, sizeof(wo));
	ck_assert_uint_eq(wo.size, 65536);
	ck_assert_uint_eq(wo.padding, 0);

	r = fake_req(33);
	fw_reply_statfs(&r, &sv);
	answer(sizeof(so), 0, 33);
	memcpy(&so, fk.ans + 16, sizeof(so));
	ck_assert_uint_eq(so.st.blocks, 1000);
	ck_assert_uint_eq(so.st.bfree, 10);
	ck_assert_uint_eq(so.st.bavail, 9);
	ck_assert_uint_eq(so.st.files, 3);
	ck_assert_uint_eq(so.st.ffree, 0);
	ck_assert_uint_eq(so.st.bsize, 4096);
	ck_assert_uint_eq(so.st.frsize, 512);
	ck_assert_uint_eq(so.st.namelen, 255);
}
END_TEST

START_TEST(t_add_dirent)
{
	char buf[96];
	struct fuse_dirent d;
	size_t used = 0, n;

	memset(buf, 0xee, sizeof(buf));
	/* "." 24 + 1 -> 32; "nvme0n1" 24 + 7 -> 32; "12345678" 24 + 8 = 32 */
	n = fw_add_dirent(buf, sizeof(buf), used, ".", 1, S_IFDIR | 0755, 1);
	ck_assert_uint_eq(n, 32);
	used += n;
	n = fw_add_dirent(buf, sizeof(buf), used, "nvme0n1", 2, S_IFREG | 0600, 2);
	ck_assert_uint_eq(n, 32);
	used += n;
	n = fw_add_dirent(buf, sizeof(buf), used, "12345678", 3, S_IFLNK | 0777, 3);
	ck_assert_uint_eq(n, 32); /* fits exactly */
	used += n;
	ck_assert_uint_eq(used, sizeof(buf));

	/* parse back as the kernel does */
	static const char *const names[] = {".", "nvme0n1", "12345678"};
	static const uint32_t types[] = {DT_DIR, DT_REG, DT_LNK};
	size_t off = 0;
	for (unsigned k = 0; k < 3; k++) {
		memcpy(&d, buf + off, sizeof(d));
		ck_assert_uint_eq(d.ino, k + 1);
		ck_assert_uint_eq(d.off, k + 1);
		ck_assert_uint_eq(d.namelen, strlen(names[k]));
		ck_assert_uint_eq(d.type, types[k]);
		ck_assert_mem_eq(buf + off + FUSE_NAME_OFFSET, names[k], d.namelen);
		/* the padding is zeroes */
		for (size_t p = FUSE_NAME_OFFSET + d.namelen; p < FUSE_DIRENT_SIZE(&d); p++)
			ck_assert_int_eq(buf[off + p], 0);
		off += FUSE_DIRENT_SIZE(&d);
	}
	ck_assert_uint_eq(off, used);
}
END_TEST

START_TEST(t_add_dirent_full)
{
	char buf[64], ref[64];

	memset(buf, 0xee, sizeof(buf));
	memcpy(ref, buf, sizeof(buf));
	/* 40 bytes wanted, 39 left: nothing written, the size told */
	ck_assert_uint_eq(fw_add_dirent(buf, sizeof(buf), 25, "0123456789abcdef", 1, S_IFREG, 1),
	                  40);
	ck_assert_mem_eq(buf, ref, sizeof(buf));
	/* none left */
	ck_assert_uint_eq(fw_add_dirent(buf, sizeof(buf), sizeof(buf), "a", 1, S_IFREG, 1), 32);
	ck_assert_mem_eq(buf, ref, sizeof(buf));
	/* an empty buffer */
	ck_assert_uint_eq(fw_add_dirent(buf, 0, 0, "a", 1, S_IFREG, 1), 32);
	ck_assert_mem_eq(buf, ref, sizeof(buf));
	/* one more byte and it fits */
	ck_assert_uint_eq(fw_add_dirent(buf, sizeof(buf), 24, "0123456789abcdef", 9, S_IFREG, 1),
	                  40);
	ck_assert_mem_ne(buf + 24, ref + 24, 40);
	ck_assert_mem_eq(buf, ref, 24); /* nothing before used touched */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fwire");
	TCase *dec = tcase_create("decode");
	TCase *bad = tcase_create("malformed");
	TCase *init = tcase_create("init");
	TCase *ans = tcase_create("answers");

	/* _i: the shape (0 /dev/fuse, 1 io_uring, 2 /dev/fuse split) */
	tcase_add_loop_test(dec, t_getattr, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_setattr, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_open_opendir, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_read_readdir, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_release_flush_fsync, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_fallocate_lseek_access_interrupt, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_statfs_destroy, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_forget, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_batch_forget, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_init, DEV, SPLIT + 1);
	tcase_add_test(dec, t_init_short);
	tcase_add_loop_test(dec, t_lookup, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_name_with_header, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_symlink, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_rename, DEV, SPLIT + 1);
	tcase_add_loop_test(dec, t_write, DEV, SPLIT + 1);
	suite_add_tcase(s, dec);

	tcase_add_loop_test(bad, t_name_empty, DEV, SPLIT + 1);
	tcase_add_loop_test(bad, t_name_no_nul, DEV, SPLIT + 1);
	tcase_add_loop_test(bad, t_write_short, DEV, SPLIT + 1);
	tcase_add_loop_test(bad, t_batch_forget_overflow, DEV, SPLIT + 1);
	tcase_add_loop_test(bad, t_op_truncated, DEV, SPLIT + 1);
	tcase_add_test(bad, t_dev_short);
	tcase_add_test(bad, t_dev_split);
	tcase_add_test(bad, t_dev_len_mismatch);
	tcase_add_test(bad, t_dev_extensions);
	tcase_add_loop_test(bad, t_unknown_opcode, DEV, SPLIT + 1);
	suite_add_tcase(s, bad);

	tcase_add_test(init, t_init_answer);
	tcase_add_test(init, t_init_max_pages);
	tcase_add_test(init, t_init_max_pages_page_size);
	tcase_add_test(init, t_init_version);
	tcase_add_test(init, t_init_decoded_answer);
	suite_add_tcase(s, init);

	tcase_add_test(ans, t_reply_err_none);
	tcase_add_test(ans, t_reply_buf);
	tcase_add_test(ans, t_reply_init);
	tcase_add_test(ans, t_reply_entry_attr);
	tcase_add_test(ans, t_reply_open_write_statfs);
	tcase_add_test(ans, t_add_dirent);
	tcase_add_test(ans, t_add_dirent_full);
	suite_add_tcase(s, ans);

	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

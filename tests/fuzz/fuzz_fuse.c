/* fuzz_fuse.c - libFuzzer target: FUSE requests as a kernel could send
 * them, through fwire's decoder, for both transports.
 *
 * Input: byte 0 picks the shape (bit 0: 0 /dev/fuse, 1 io_uring) and, for an
 * INIT, whether the answer asks for io_uring (bit 1).  /dev/fuse: the rest is
 * what read(2) returned.  io_uring: 40 bytes of fuse_in_header, one byte
 * giving the op area's length (mod 129; the kernel's is 128), that many bytes
 * of op area, and the rest is the payload (none: passed as NULL).  Short
 * inputs are zero-padded.  Each buffer is a heap block of its exact size so
 * that ASan sees any read past it.
 *
 * A model of the protocol, written apart from fwire.c, says what the verdict
 * must be (FW_OK, FW_BAD, FW_NOSYS); on FW_OK the decoded message must point
 * where the model says: names NUL-terminated within the rest, write data and
 * forget arrays within it and of the sizes announced, op header copied and
 * nothing beyond it.  INIT is answered (fw_init_answer, fw_reply_init through
 * a fake transport) and the answer checked; a LOOKUP's name goes through
 * fw_add_dirent.  A broken rule traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fwire.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

enum tail { T_NONE, T_NAME, T_NAME2, T_DATA, T_FORGETS };

/* the served opcodes: op header size and what follows it (uapi fuse.h) */
static const struct {
	uint32_t op;
	uint32_t hsize;
	enum tail tail;
} model[] = {
    {FUSE_LOOKUP, 0, T_NAME},
    {FUSE_FORGET, sizeof(struct fuse_forget_in), T_NONE},
    {FUSE_GETATTR, sizeof(struct fuse_getattr_in), T_NONE},
    {FUSE_SETATTR, sizeof(struct fuse_setattr_in), T_NONE},
    {FUSE_SYMLINK, 0, T_NAME2},
    {FUSE_MKNOD, sizeof(struct fuse_mknod_in), T_NAME},
    {FUSE_MKDIR, sizeof(struct fuse_mkdir_in), T_NAME},
    {FUSE_UNLINK, 0, T_NAME},
    {FUSE_RMDIR, 0, T_NAME},
    {FUSE_RENAME, sizeof(struct fuse_rename_in), T_NAME2},
    {FUSE_LINK, sizeof(struct fuse_link_in), T_NAME},
    {FUSE_OPEN, sizeof(struct fuse_open_in), T_NONE},
    {FUSE_READ, sizeof(struct fuse_read_in), T_NONE},
    {FUSE_WRITE, sizeof(struct fuse_write_in), T_DATA},
    {FUSE_STATFS, 0, T_NONE},
    {FUSE_RELEASE, sizeof(struct fuse_release_in), T_NONE},
    {FUSE_FSYNC, sizeof(struct fuse_fsync_in), T_NONE},
    {FUSE_FLUSH, sizeof(struct fuse_flush_in), T_NONE},
    {FUSE_INIT, 16, T_NONE}, /* 16 before 7.36, 64 since */
    {FUSE_OPENDIR, sizeof(struct fuse_open_in), T_NONE},
    {FUSE_READDIR, sizeof(struct fuse_read_in), T_NONE},
    {FUSE_RELEASEDIR, sizeof(struct fuse_release_in), T_NONE},
    {FUSE_FSYNCDIR, sizeof(struct fuse_fsync_in), T_NONE},
    {FUSE_ACCESS, sizeof(struct fuse_access_in), T_NONE},
    {FUSE_CREATE, sizeof(struct fuse_create_in), T_NAME},
    {FUSE_INTERRUPT, sizeof(struct fuse_interrupt_in), T_NONE},
    {FUSE_DESTROY, 0, T_NONE},
    {FUSE_BATCH_FORGET, sizeof(struct fuse_batch_forget_in), T_FORGETS},
    {FUSE_FALLOCATE, sizeof(struct fuse_fallocate_in), T_NONE},
    {FUSE_RENAME2, sizeof(struct fuse_rename2_in), T_NAME2},
    {FUSE_LSEEK, sizeof(struct fuse_lseek_in), T_NONE},
};

static int find(uint32_t op)
{
	for (unsigned k = 0; k < sizeof(model) / sizeof(model[0]); k++)
		if (model[k].op == op)
			return (int)k;
	return -1;
}

/* A request's op header (op[0..op_len): what the decoder may copy) and rest
 * rb[0..n), as the model sees them. */
struct view {
	struct fuse_in_header h;
	const uint8_t *op;
	size_t op_len;
	const uint8_t *rb;
	size_t n;
};

/* The verdict the model gives the rest of a served request, and where the
 * decoder's pointers must then be. */
static int model_tail(const struct view *v, int k, const struct fw_msg *m)
{
	size_t n = v->n;
	const uint8_t *z, *z2;
	uint32_t size, count;

	switch (model[k].tail) {
	case T_NAME:
		if (!n || !(z = memchr(v->rb, 0, n)))
			return FW_BAD;
		if (m) {
			CHECK(m->name == (const char *)v->rb && !m->name2 && !m->data);
			CHECK(strlen(m->name) == (size_t)(z - v->rb));
		}
		return FW_OK;
	case T_NAME2:
		if (!n || !(z = memchr(v->rb, 0, n)))
			return FW_BAD;
		z++;
		if (z == v->rb + n || !(z2 = memchr(z, 0, n - (size_t)(z - v->rb))))
			return FW_BAD;
		if (m) {
			CHECK(m->name == (const char *)v->rb && m->name2 == (const char *)z);
			CHECK(m->name2 + strlen(m->name2) == (const char *)z2 && !m->data);
		}
		return FW_OK;
	case T_DATA:
		memcpy(&size, v->op + offsetof(struct fuse_write_in, size), sizeof(size));
		if (size > n)
			return FW_BAD;
		if (m) {
			CHECK(m->data_len == size && m->data_len <= n && !m->name);
			CHECK(m->data == v->rb || (!size && !v->rb));
		}
		return FW_OK;
	case T_FORGETS:
		memcpy(&count, v->op, sizeof(count));
		if ((uint64_t)count * sizeof(struct fuse_forget_one) > n)
			return FW_BAD;
		if (m) {
			CHECK(m->data_len == (size_t)count * sizeof(struct fuse_forget_one));
			CHECK(m->data_len <= n && !m->name);
			CHECK(m->data == v->rb || (!count && !v->rb));
		}
		return FW_OK;
	default:
		if (m)
			CHECK(!m->name && !m->name2 && !m->data && !m->data_len);
		return FW_OK;
	}
}

/* m->in holds the op header's bytes copied and zeroes after them */
static void check_in(const struct view *v, const struct fw_msg *m, size_t copied)
{
	const uint8_t *in = (const uint8_t *)&m->in;

	CHECK(copied <= v->op_len && copied <= sizeof(m->in));
	CHECK(!memcmp(in, v->op, copied));
	for (size_t k = copied; k < sizeof(m->in); k++)
		CHECK(in[k] == 0);
	if (v->h.opcode == FUSE_RENAME)
		CHECK(m->in.rename2.flags == 0);
}

static size_t answer_bytes;
static int answer_error, answer_sends;

static void fake_send(struct fw_req *r, int error, const struct iovec *iov, int iovcnt)
{
	(void)r;
	answer_sends++;
	answer_error = error;
	answer_bytes = 0;
	for (int i = 0; i < iovcnt; i++)
		answer_bytes += iov[i].iov_len;
}

static void fake_drop(struct fw_req *r)
{
	(void)r;
	__builtin_trap(); /* INIT always has an answer */
}

static const struct fw_transport fake_t = {.send = fake_send, .drop = fake_drop};

static void check_init(const struct fuse_init_in *in, bool uring)
{
	const uint64_t served = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO |
	                        FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT |
	                        FUSE_OVER_IO_URING;
	struct fw_init_want want = {.max_write = 1 << 20,
	                            .max_background = 1024,
	                            .congestion_threshold = 768,
	                            .uring = uring};
	struct fuse_init_out out;
	int rc = fw_init_answer(in, &want, &out);
	uint64_t fi = fw_init_flags_in(in), fo = fw_init_flags_out(&out);

	CHECK(out.major == FW_PROTO_MAJOR);
	if (in->major != FW_PROTO_MAJOR || in->minor < FW_PROTO_MINOR_MIN) {
		CHECK(rc == -EPROTO && out.minor == FW_PROTO_MINOR && fo == 0);
	} else {
		CHECK(rc == FW_OK);
		CHECK(out.minor == (in->minor < FW_PROTO_MINOR ? in->minor : FW_PROTO_MINOR));
		CHECK((fo & ~(fi & served)) == 0);
		CHECK(!(fo & FUSE_OVER_IO_URING) || uring);
		CHECK(!!(fo & FUSE_MAX_PAGES) == !!(fi & FUSE_MAX_PAGES));
		CHECK(out.max_pages == ((fo & FUSE_MAX_PAGES) ? 256 : 0));
		CHECK(out.max_write == want.max_write && out.max_readahead == in->max_readahead);
	}
	struct fw_req r = {.t = &fake_t, .unique = 1};
	answer_sends = 0;
	fw_reply_init(&r, &out);
	CHECK(answer_sends == 1 && answer_error == 0);
	CHECK(answer_bytes == sizeof(struct fuse_init_out) && answer_bytes == 64);
}

static void check_ok(const struct view *v, const struct fw_msg *m, bool uring)
{
	volatile uint8_t sink = 0;

	if (m->data) /* every byte claimed is there (ASan) */
		for (size_t k = 0; k < m->data_len; k++)
			sink ^= ((const uint8_t *)m->data)[k];
	(void)sink;
	if (v->h.opcode == FUSE_INIT)
		check_init(&m->in.init, uring);
	if (v->h.opcode == FUSE_LOOKUP) {
		char buf[256];
		size_t nl = strlen(m->name);
		size_t want = (FUSE_NAME_OFFSET + nl + 7) & ~(size_t)7;
		size_t got = fw_add_dirent(buf, sizeof(buf), 0, m->name, 1, S_IFREG, 1);

		CHECK(got == want);
		if (got <= sizeof(buf)) {
			struct fuse_dirent d;

			memcpy(&d, buf, sizeof(d));
			CHECK(d.namelen == nl && !memcmp(buf + FUSE_NAME_OFFSET, m->name, nl));
		}
	}
}

/* The same bytes read as a reader with a landing buffer reads them: split
 * after FW_DEV_HEAD.  The same verdict and the same data as decoded whole;
 * only a WRITE's data is decoded in the tail. */
static void run_split(const uint8_t *in, size_t len, int rc, const struct fw_msg *m)
{
	size_t tl = len - FW_DEV_HEAD;
	uint8_t *head = malloc(len), *tail = malloc(tl);
	struct fw_msg m2;
	bool in_tail;
	int rc2;

	if (!head || !tail)
		goto out;
	memcpy(head, in, FW_DEV_HEAD);
	memcpy(tail, in + FW_DEV_HEAD, tl);
	rc2 = fw_decode_dev_split(head, FW_DEV_HEAD, len, tail, tl, &m2, &in_tail);
	CHECK(rc2 == rc);
	CHECK(!memcmp(&m2.h, &m->h, sizeof(m->h)));
	CHECK(!in_tail || (rc2 == FW_OK && m2.h.opcode == FUSE_WRITE && m2.data == tail));
	if (rc == FW_OK)
		CHECK(m2.data_len == m->data_len &&
		      (!m->data_len || !memcmp(m2.data, m->data, m->data_len)));
out:
	free(head);
	free(tail);
}

static void run_dev(const uint8_t *in, size_t len, bool uring)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct fw_msg m;
	struct view v;
	int rc, want, k;

	if (!buf)
		return;
	memcpy(buf, in, len);
	memset(&m, 0x5a, sizeof(m));
	rc = fw_decode_dev(buf, len, &m);
	CHECK(rc == FW_OK || rc == FW_BAD || rc == FW_NOSYS);
	if (len < sizeof(v.h)) {
		struct fuse_in_header zero = {0};

		CHECK(rc == FW_BAD && !memcmp(&m.h, &zero, sizeof(zero)));
		goto out;
	}
	memcpy(&v.h, buf, sizeof(v.h));
	CHECK(!memcmp(&m.h, &v.h, sizeof(v.h)));
	size_t rest = len - sizeof(v.h), ext = (size_t)v.h.total_extlen * 8;
	k = find(v.h.opcode);
	if (v.h.len != len || ext > rest) {
		want = FW_BAD;
	} else if (k < 0) {
		want = FW_NOSYS;
	} else {
		rest -= ext;
		v.op = buf + sizeof(v.h);
		v.op_len = model[k].hsize;
		if (v.h.opcode == FUSE_INIT)
			v.op_len = rest < 64 ? rest : 64;
		if (v.op_len > rest || v.op_len < model[k].hsize) {
			want = FW_BAD;
		} else {
			v.rb = v.op + v.op_len;
			v.n = rest - v.op_len;
			want = model_tail(&v, k, NULL);
		}
	}
	CHECK(rc == want);
	if (rc == FW_OK) {
		model_tail(&v, k, &m);
		check_in(&v, &m, v.op_len);
		check_ok(&v, &m, uring);
	}
	if (len > FW_DEV_HEAD)
		run_split(in, len, rc, &m);
out:
	free(buf);
}

static void run_ring(const uint8_t *in, size_t len, bool uring)
{
	struct view v;
	struct fw_msg m;
	uint8_t hb[sizeof(v.h)] = {0}, *op, *pay = NULL;
	size_t oplen, plen, t;
	int rc, want, k;

	t = len < sizeof(hb) ? len : sizeof(hb);
	memcpy(hb, in, t);
	in += t;
	len -= t;
	memcpy(&v.h, hb, sizeof(hb));
	oplen = len ? in[0] % (FUSE_URING_OP_IN_OUT_SZ + 1) : FUSE_URING_OP_IN_OUT_SZ;
	if (len) {
		in++;
		len--;
	}
	op = calloc(1, oplen ? oplen : 1);
	if (!op)
		return;
	t = len < oplen ? len : oplen;
	memcpy(op, in, t);
	in += t;
	len -= t;
	plen = len;
	if (plen) {
		pay = malloc(plen);
		if (!pay)
			goto out;
		memcpy(pay, in, plen);
	}
	memset(&m, 0x5a, sizeof(m));
	rc = fw_decode(&v.h, op, oplen, pay, plen, &m);
	CHECK(!memcmp(&m.h, &v.h, sizeof(v.h)));
	k = find(v.h.opcode);
	v.op = op;
	v.op_len = oplen;
	v.rb = pay;
	v.n = plen;
	if (k < 0)
		want = FW_NOSYS;
	else if (oplen < model[k].hsize)
		want = FW_BAD;
	else
		want = model_tail(&v, k, NULL);
	CHECK(rc == want);
	if (rc == FW_OK) {
		size_t copied = model[k].hsize;

		if (v.h.opcode == FUSE_INIT)
			copied = oplen < 64 ? oplen : 64;
		model_tail(&v, k, &m);
		check_in(&v, &m, copied);
		check_ok(&v, &m, uring);
	}
out:
	free(pay);
	free(op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		run_ring(data + 1, size - 1, data[0] & 2);
	else
		run_dev(data + 1, size - 1, data[0] & 2);
	return 0;
}

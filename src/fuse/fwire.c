/* fwire.c - decoding FUSE requests and encoding their answers. */
#include "fwire.h"

#include <liburing.h>
#include <string.h>
#include <unistd.h>

/* The op's own header (the request's first argument) and what follows it. */
enum tail { T_NONE, T_NAME, T_NAME2, T_DATA, T_FORGETS };

struct op_shape {
	uint16_t hsize; /* bytes of the op header, 0: none */
	uint8_t tail;
	uint8_t served;
};

#define OP(o, h, t) [o] = {.hsize = (h), .tail = (t), .served = 1}

static const struct op_shape shapes[] = {
	OP(FUSE_LOOKUP, 0, T_NAME),
	OP(FUSE_FORGET, sizeof(struct fuse_forget_in), T_NONE),
	OP(FUSE_GETATTR, sizeof(struct fuse_getattr_in), T_NONE),
	OP(FUSE_SETATTR, sizeof(struct fuse_setattr_in), T_NONE),
	OP(FUSE_SYMLINK, 0, T_NAME2),
	OP(FUSE_MKNOD, sizeof(struct fuse_mknod_in), T_NAME),
	OP(FUSE_MKDIR, sizeof(struct fuse_mkdir_in), T_NAME),
	OP(FUSE_UNLINK, 0, T_NAME),
	OP(FUSE_RMDIR, 0, T_NAME),
	OP(FUSE_RENAME, sizeof(struct fuse_rename_in), T_NAME2),
	OP(FUSE_LINK, sizeof(struct fuse_link_in), T_NAME),
	OP(FUSE_OPEN, sizeof(struct fuse_open_in), T_NONE),
	OP(FUSE_READ, sizeof(struct fuse_read_in), T_NONE),
	OP(FUSE_WRITE, sizeof(struct fuse_write_in), T_DATA),
	OP(FUSE_STATFS, 0, T_NONE),
	OP(FUSE_RELEASE, sizeof(struct fuse_release_in), T_NONE),
	OP(FUSE_FSYNC, sizeof(struct fuse_fsync_in), T_NONE),
	OP(FUSE_FLUSH, sizeof(struct fuse_flush_in), T_NONE),
	OP(FUSE_INIT, 16, T_NONE), /* 64 since 7.36; older kernels send 16 */
	OP(FUSE_OPENDIR, sizeof(struct fuse_open_in), T_NONE),
	OP(FUSE_READDIR, sizeof(struct fuse_read_in), T_NONE),
	OP(FUSE_RELEASEDIR, sizeof(struct fuse_release_in), T_NONE),
	OP(FUSE_FSYNCDIR, sizeof(struct fuse_fsync_in), T_NONE),
	OP(FUSE_ACCESS, sizeof(struct fuse_access_in), T_NONE),
	OP(FUSE_CREATE, sizeof(struct fuse_create_in), T_NAME),
	OP(FUSE_INTERRUPT, sizeof(struct fuse_interrupt_in), T_NONE),
	OP(FUSE_DESTROY, 0, T_NONE),
	OP(FUSE_BATCH_FORGET, sizeof(struct fuse_batch_forget_in), T_FORGETS),
	OP(FUSE_FALLOCATE, sizeof(struct fuse_fallocate_in), T_NONE),
	OP(FUSE_RENAME2, sizeof(struct fuse_rename2_in), T_NAME2),
	OP(FUSE_LSEEK, sizeof(struct fuse_lseek_in), T_NONE),
};

/* A NUL-terminated string at p within [p, end): its end + 1, or NULL. */
static const char *str_end(const char *p, const char *end)
{
	const char *z = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;

	return z ? z + 1 : NULL;
}

int fw_decode(const struct fuse_in_header *h, const void *op, size_t op_len, const void *data,
	      size_t data_len, struct fw_msg *m)
{
	const struct op_shape *s;
	size_t hs, copy;

	memset(m, 0, sizeof(*m));
	m->h = *h;
	if (h->opcode >= sizeof(shapes) / sizeof(shapes[0]) || !shapes[h->opcode].served)
		return FW_NOSYS;
	s = &shapes[h->opcode];
	hs = s->hsize;
	if (op_len < hs)
		return FW_BAD;
	/* the op header: what the kernel gave, up to our struct (INIT may be
	 * shorter: the rest stays zero) */
	copy = h->opcode == FUSE_INIT ? sizeof(struct fuse_init_in) : hs;
	if (copy > op_len)
		copy = op_len;
	if (copy > sizeof(m->in))
		copy = sizeof(m->in);
	if (copy)
		memcpy(&m->in, op, copy);
	if (h->opcode == FUSE_RENAME)
		m->in.rename2.flags = 0; /* fuse_rename_in is rename2_in without flags */

	/* no arithmetic on a NULL payload (undefined even with 0 added) */
	const char *p = data, *end = data_len ? (const char *)data + data_len : p, *q;

	switch (s->tail) {
	case T_NAME:
		q = str_end(p, end);
		if (!q)
			return FW_BAD;
		m->name = p;
		break;
	case T_NAME2:
		q = str_end(p, end);
		if (!q)
			return FW_BAD;
		m->name = p;
		if (!str_end(q, end))
			return FW_BAD;
		m->name2 = q;
		break;
	case T_DATA:
		if (m->in.write.size > data_len)
			return FW_BAD;
		m->data = data;
		m->data_len = m->in.write.size;
		break;
	case T_FORGETS:
		if ((uint64_t)m->in.batch_forget.count * sizeof(struct fuse_forget_one) > data_len)
			return FW_BAD;
		m->data = data;
		m->data_len = (size_t)m->in.batch_forget.count * sizeof(struct fuse_forget_one);
		break;
	default:
		break;
	}
	return FW_OK;
}

int fw_decode_dev(const void *buf, size_t len, struct fw_msg *m)
{
	const struct fuse_in_header *h = buf;
	const char *b = buf;
	size_t rest, hs = 0, ext;

	if (len < sizeof(*h)) {
		memset(m, 0, sizeof(*m));
		return FW_BAD;
	}
	struct fuse_in_header hc;
	memcpy(&hc, h, sizeof(hc)); /* buf may be unaligned (fuzzers) */
	if (hc.len != len) {
		memset(m, 0, sizeof(*m));
		m->h = hc;
		return FW_BAD;
	}
	rest = len - sizeof(hc);
	/* extensions (security context, groups) trail the arguments; none is
	 * asked for, but a kernel may add them: leave them out */
	ext = (size_t)hc.total_extlen * 8;
	if (ext > rest) {
		memset(m, 0, sizeof(*m));
		m->h = hc;
		return FW_BAD;
	}
	rest -= ext;
	if (hc.opcode < sizeof(shapes) / sizeof(shapes[0]) && shapes[hc.opcode].served) {
		hs = shapes[hc.opcode].hsize;
		/* INIT's header is all that comes: take it whole */
		if (hc.opcode == FUSE_INIT)
			hs = rest < sizeof(struct fuse_init_in) ? rest : sizeof(struct fuse_init_in);
	}
	if (hs > rest) {
		memset(m, 0, sizeof(*m));
		m->h = hc;
		return FW_BAD;
	}
	return fw_decode(&hc, b + sizeof(hc), hs, b + sizeof(hc) + hs, rest - hs, m);
}

int fw_decode_dev_split(void *head, size_t head_len, size_t head_room, const void *tail,
			size_t tail_len, struct fw_msg *m, bool *in_tail)
{
	struct fuse_in_header hc;
	size_t ext;

	*in_tail = false;
	if (!tail_len)
		return fw_decode_dev(head, head_len, m);
	if (head_len == FW_DEV_HEAD) {
		memcpy(&hc, head, sizeof(hc));
		ext = (size_t)hc.total_extlen * 8;
		if (hc.opcode == FUSE_WRITE && hc.len == head_len + tail_len && ext <= tail_len) {
			/* extensions trail the data: leave them out */
			int rc = fw_decode(&hc, (const char *)head + sizeof(hc),
					   sizeof(struct fuse_write_in), tail, tail_len - ext, m);

			*in_tail = rc == FW_OK;
			return rc;
		}
	}
	if (head_len > head_room || tail_len > head_room - head_len) {
		memset(m, 0, sizeof(*m));
		if (head_len >= sizeof(hc))
			memcpy(&m->h, head, sizeof(hc));
		return FW_BAD;
	}
	memcpy((char *)head + head_len, tail, tail_len);
	return fw_decode_dev(head, head_len + tail_len, m);
}

/* ---- INIT ---- */

uint64_t fw_init_flags_in(const struct fuse_init_in *in)
{
	uint64_t f = in->flags;

	if (f & FUSE_INIT_EXT)
		f |= (uint64_t)in->flags2 << 32;
	return f;
}

uint64_t fw_init_flags_out(const struct fuse_init_out *out)
{
	uint64_t f = out->flags;

	if (f & FUSE_INIT_EXT)
		f |= (uint64_t)out->flags2 << 32;
	return f;
}

int fw_init_answer(const struct fuse_init_in *in, const struct fw_init_want *want,
		   struct fuse_init_out *out)
{
	uint64_t offered = fw_init_flags_in(in), f;
	uint64_t wanted = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES |
			  FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT;

	memset(out, 0, sizeof(*out));
	out->major = FW_PROTO_MAJOR;
	out->minor = FW_PROTO_MINOR;
	if (in->major != FW_PROTO_MAJOR)
		return -EPROTO; /* a kernel of another major retries with ours */
	if (in->minor < FW_PROTO_MINOR_MIN)
		return -EPROTO;
	if (in->minor < out->minor)
		out->minor = in->minor;
	if (want->uring)
		wanted |= FUSE_OVER_IO_URING;
	f = offered & wanted;
	out->flags = (uint32_t)f;
	out->flags2 = (uint32_t)(f >> 32);
	if (!(f & FUSE_INIT_EXT))
		out->flags2 = 0;
	out->max_readahead = in->max_readahead;
	out->max_write = want->max_write;
	out->max_background = want->max_background;
	out->congestion_threshold = want->congestion_threshold;
	out->time_gran = 1;
	if (f & FUSE_MAX_PAGES) {
		uint32_t pages = want->max_write / (want->page_size ? want->page_size : 4096);

		/* the field is 16 bits: 65536 pages would wrap to 0 (one page) */
		if (pages > UINT16_MAX)
			pages = UINT16_MAX;
		out->max_pages = (uint16_t)(pages ? pages : 1);
	}
	return FW_OK;
}

/* ---- answers ---- */

static void answer(struct fw_req *r, int errnum, const struct iovec *iov, int n)
{
	r->t->send(r, -errnum, iov, n);
}

void fw_reply_err(struct fw_req *r, int errnum)
{
	answer(r, errnum, NULL, 0);
}

void fw_reply_none(struct fw_req *r)
{
	r->t->drop(r);
}

void fw_reply_buf(struct fw_req *r, const void *buf, size_t len)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	answer(r, 0, &iov, len ? 1 : 0);
}

void fw_reply_init(struct fw_req *r, const struct fuse_init_out *out)
{
	fw_reply_buf(r, out, sizeof(*out));
}

void fw_attr_from_stat(struct fuse_attr *a, const struct stat *st)
{
	memset(a, 0, sizeof(*a));
	a->ino = st->st_ino;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->atime = (uint64_t)st->st_atim.tv_sec;
	a->mtime = (uint64_t)st->st_mtim.tv_sec;
	a->ctime = (uint64_t)st->st_ctim.tv_sec;
	a->atimensec = (uint32_t)st->st_atim.tv_nsec;
	a->mtimensec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctimensec = (uint32_t)st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = (uint32_t)st->st_rdev;
	a->blksize = (uint32_t)st->st_blksize;
}

static void split_time(double t, uint64_t *sec, uint32_t *nsec)
{
	if (t < 0)
		t = 0;
	*sec = (uint64_t)t;
	*nsec = (uint32_t)((t - (double)*sec) * 1e9);
}

void fw_reply_entry(struct fw_req *r, uint64_t nodeid, const struct stat *st, double timeout)
{
	struct fuse_entry_out e;

	memset(&e, 0, sizeof(e));
	e.nodeid = nodeid;
	split_time(timeout, &e.entry_valid, &e.entry_valid_nsec);
	split_time(timeout, &e.attr_valid, &e.attr_valid_nsec);
	fw_attr_from_stat(&e.attr, st);
	fw_reply_buf(r, &e, sizeof(e));
}

void fw_reply_attr(struct fw_req *r, const struct stat *st, double timeout)
{
	struct fuse_attr_out a;

	memset(&a, 0, sizeof(a));
	split_time(timeout, &a.attr_valid, &a.attr_valid_nsec);
	fw_attr_from_stat(&a.attr, st);
	fw_reply_buf(r, &a, sizeof(a));
}

void fw_reply_open(struct fw_req *r, uint64_t fh, uint32_t open_flags)
{
	struct fuse_open_out o;

	memset(&o, 0, sizeof(o));
	o.fh = fh;
	o.open_flags = open_flags;
	fw_reply_buf(r, &o, sizeof(o));
}

void fw_reply_write(struct fw_req *r, uint32_t size)
{
	struct fuse_write_out w = {.size = size};

	fw_reply_buf(r, &w, sizeof(w));
}

void fw_reply_statfs(struct fw_req *r, const struct statvfs *sv)
{
	struct fuse_statfs_out o;

	memset(&o, 0, sizeof(o));
	o.st.blocks = sv->f_blocks;
	o.st.bfree = sv->f_bfree;
	o.st.bavail = sv->f_bavail;
	o.st.files = sv->f_files;
	o.st.ffree = sv->f_ffree;
	o.st.bsize = (uint32_t)sv->f_bsize;
	o.st.namelen = (uint32_t)sv->f_namemax;
	o.st.frsize = (uint32_t)sv->f_frsize;
	fw_reply_buf(r, &o, sizeof(o));
}

size_t fw_add_dirent(char *buf, size_t size, size_t used, const char *name, uint64_t ino,
		     uint32_t mode, uint64_t next_off)
{
	size_t namelen = strlen(name);
	size_t ent = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
	struct fuse_dirent d;

	if (ent > size - used)
		return ent;
	memset(&d, 0, sizeof(d));
	d.ino = ino;
	d.off = next_off;
	d.namelen = (uint32_t)namelen;
	d.type = (mode & S_IFMT) >> 12;
	memcpy(buf + used, &d, sizeof(d));
	memcpy(buf + used + FUSE_NAME_OFFSET, name, namelen);
	memset(buf + used + FUSE_NAME_OFFSET + namelen, 0, ent - FUSE_NAME_OFFSET - namelen);
	return ent;
}

/* ---- the bytes each transport hands the kernel ---- */

int fw_dev_answer(int fd, uint64_t unique, int error, const struct iovec *iov, int iovcnt)
{
	struct fuse_out_header oh = {.error = error, .unique = unique};
	struct iovec v[4] = {{.iov_base = &oh, .iov_len = sizeof(oh)}};
	size_t len = sizeof(oh);

	if (iovcnt > 3) {
		/* no answer has that many parts */
		oh.error = -EIO;
		iovcnt = 0;
	}
	for (int i = 0; i < iovcnt; i++) {
		v[i + 1] = iov[i];
		len += iov[i].iov_len;
	}
	oh.len = (uint32_t)len;
	return writev(fd, v, 1 + iovcnt) < 0 ? -errno : 0;
}

int fw_dev_notify(int fd, int code)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = code, .unique = 0};
	ssize_t n = write(fd, &oh, sizeof(oh));

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(oh) ? 0 : -EIO;
}

int fw_dev_inval_entry(int fd, uint64_t parent, const char *name)
{
	size_t nl = strlen(name);
	struct fuse_notify_inval_entry_out e = {.parent = parent, .namelen = (uint32_t)nl};
	struct fuse_out_header oh = {.len = (uint32_t)(sizeof(oh) + sizeof(e) + nl + 1),
				     .error = FUSE_NOTIFY_INVAL_ENTRY};
	struct iovec v[3] = {{&oh, sizeof(oh)}, {&e, sizeof(e)}, {(void *)name, nl + 1}};
	ssize_t n = writev(fd, v, 3);

	if (n < 0)
		return -errno;
	return n == (ssize_t)oh.len ? 0 : -EIO;
}

int fw_dev_inval_inode(int fd, uint64_t ino, int64_t off, int64_t len)
{
	struct fuse_notify_inval_inode_out e = {.ino = ino, .off = off, .len = len};
	struct fuse_out_header oh = {.len = (uint32_t)(sizeof(oh) + sizeof(e)),
				     .error = FUSE_NOTIFY_INVAL_INODE};
	struct iovec v[2] = {{&oh, sizeof(oh)}, {&e, sizeof(e)}};
	ssize_t n = writev(fd, v, 2);

	if (n < 0)
		return -errno;
	return n == (ssize_t)oh.len ? 0 : -EIO;
}

void fw_ring_answer(struct fuse_uring_req_header *hdr, void *payload, size_t cap,
		    uint64_t commit_id, uint64_t unique, int error, const struct iovec *iov,
		    int iovcnt, size_t *moved)
{
	struct fuse_out_header oh = {.error = error, .unique = unique};
	struct fuse_uring_ent_in_out io = {.commit_id = commit_id};
	char *p = payload;
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++) {
		size_t len = iov[i].iov_len;

		if (len > cap - total) {
			/* no answer is larger than a request */
			oh.error = -EIO;
			total = 0;
			break;
		}
		if ((char *)iov[i].iov_base != p + total) {
			memmove(p + total, iov[i].iov_base, len);
			*moved += len;
		}
		total += len;
	}
	oh.len = (uint32_t)(sizeof(oh) + total);
	io.payload_sz = (uint32_t)total;
	memcpy(hdr->in_out, &oh, sizeof(oh));
	memcpy(&hdr->ring_ent_in_out, &io, sizeof(io));
}

void fw_ring_cmd(struct io_uring_sqe *sqe, int fd, uint32_t cmd_op, uint16_t qid,
		 uint64_t commit_id, const struct iovec *iov, void *data)
{
	struct fuse_uring_cmd_req *req = (struct fuse_uring_cmd_req *)sqe->cmd;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	req->qid = qid;
	if (cmd_op == FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)iov;
		sqe->len = 2;
	} else {
		req->commit_id = commit_id;
	}
	io_uring_sqe_set_data(sqe, data);
}

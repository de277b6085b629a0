/* fwire.h - FUSE requests as bytes: decoding what the kernel delivers and
 * encoding the answers, for both channel transports.
 *
 * A request is an in header, the op's own header (fuse_write_in, ...; empty
 * for some ops) and the rest (names, write data).  Over /dev/fuse they come
 * as one buffer, in that order; over io_uring the in header and op header sit
 * in the entry's fixed header buffer and the rest in its payload buffer.
 * fw_decode checks one request of either shape against the protocol (sizes,
 * NUL-terminated names within the bytes delivered, write sizes) and gives a
 * struct fw_msg whose pointers point into the caller's buffers: the ops never
 * look at raw bytes.  The answers go out through the transport's send hook,
 * as an out header's error and the out arguments, so that each op is written
 * once for both transports.
 *
 * Nothing here knows the file system, the engine or libfuse: the unit tests
 * and the fuzzer run it on bytes of their own.  Prefix fw_.
 */
#ifndef NVMEFS_FUSE_FWIRE_H
#define NVMEFS_FUSE_FWIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include "fuse_proto.h"

struct fw_req;

/* A transport's side of a request. */
struct fw_transport {
	/* Answer r: error 0 or a negative errno, and the out arguments
	 * (iovcnt 0 for none).  The bytes are taken (copied or handed to the
	 * kernel) before it returns, except an iov that lies within r->rbuf,
	 * which the transport may send in place.  r must not be used after. */
	void (*send)(struct fw_req *r, int error, const struct iovec *iov, int iovcnt);
	/* The request needs no answer (FORGET, or the channel is gone):
	 * release what the transport holds for it. */
	void (*drop)(struct fw_req *r);
};

/* One request being served.  The transport fills it before fw_decode;
 * whoever answers it later keeps a copy (it is a few words). */
struct fw_req {
	const struct fw_transport *t;
	void *tctx;             /* the transport's (its entry, its channel) */
	uint64_t unique;
	uint32_t opcode;
	/* memory the answer's data may be placed in directly (NULL: none):
	 * DMA memory of the serving reactor, rbuf_len bytes */
	void *rbuf;
	size_t rbuf_len;
	/* a write's data lies in DMA memory (the ring's payload buffer) and
	 * stays valid until the answer */
	bool data_dma;
};

/* A request, decoded.  Pointers point into the buffers given to fw_decode. */
struct fw_msg {
	struct fuse_in_header h;
	union {
		struct fuse_init_in init;         /* zero-extended when short */
		struct fuse_getattr_in getattr;
		struct fuse_setattr_in setattr;
		struct fuse_open_in open;         /* OPEN, OPENDIR */
		struct fuse_read_in read;         /* READ, READDIR */
		struct fuse_write_in write;
		struct fuse_release_in release;   /* RELEASE, RELEASEDIR */
		struct fuse_flush_in flush;
		struct fuse_fsync_in fsync;       /* FSYNC, FSYNCDIR */
		struct fuse_fallocate_in fallocate;
		struct fuse_lseek_in lseek;
		struct fuse_forget_in forget;
		struct fuse_batch_forget_in batch_forget;
		struct fuse_interrupt_in interrupt;
		struct fuse_create_in create;
		struct fuse_mknod_in mknod;
		struct fuse_mkdir_in mkdir;
		struct fuse_rename2_in rename2;   /* RENAME: flags 0 */
		struct fuse_link_in link;
		struct fuse_access_in access;
	} in;
	/* LOOKUP, CREATE, MKNOD, MKDIR, UNLINK, RMDIR, LINK: name; RENAME,
	 * RENAME2: old name, new name; SYMLINK: name, link target.  Each is
	 * NUL-terminated within the request. */
	const char *name, *name2;
	/* WRITE: in.write.size bytes; BATCH_FORGET: the fuse_forget_one
	 * array (in.batch_forget.count entries) */
	const void *data;
	size_t data_len;
};

/* What fw_decode says of a request. */
enum {
	FW_OK = 0,
	/* the request is malformed: answer it with EINVAL (when unique != 0) */
	FW_BAD = -EINVAL,
	/* an opcode this server does not serve: answer ENOSYS */
	FW_NOSYS = -ENOSYS,
};

/* Decode a request whose op header is op[0..op_len) and the rest
 * data[0..data_len) (the ring's shape; op_len may be larger than the op's
 * header, as the ring's op area is).  Fills m; returns FW_OK, FW_BAD or
 * FW_NOSYS (m->h is valid in every case). */
int fw_decode(const struct fuse_in_header *h, const void *op, size_t op_len, const void *data,
	      size_t data_len, struct fw_msg *m);
/* Decode a request as read(2) from /dev/fuse: buf[0..len) is the whole
 * request (h.len must equal len).  -EINVAL with m->h zeroed when even the
 * in header is short. */
int fw_decode_dev(const void *buf, size_t len, struct fw_msg *m);
/* The in header and a WRITE's op header: what a /dev/fuse reader puts in
 * its head buffer so that a write's data lands at the start of its tail. */
#define FW_DEV_HEAD (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
/* Decode a request read(2)v from /dev/fuse into two buffers: its first
 * head_len bytes into head, which has room for head_room, the rest
 * (tail_len bytes) into tail.  A WRITE whose headers fill head exactly
 * (head_len == FW_DEV_HEAD) is decoded with its data where it lies, in
 * tail, and *in_tail is set when it decodes; any other request is first
 * made whole in head (tail copied after head_len; FW_BAD when head_room is
 * too small).
 * Returns as fw_decode_dev. */
int fw_decode_dev_split(void *head, size_t head_len, size_t head_room, const void *tail,
			size_t tail_len, struct fw_msg *m, bool *in_tail);

/* ---- INIT ---- */

struct fw_init_want {
	uint32_t max_write;       /* bytes; also max_pages, in page_size pages */
	/* the kernel's page size (0: 4096): an io_uring entry's payload must
	 * hold max_pages of them */
	uint32_t page_size;
	uint16_t max_background;
	uint16_t congestion_threshold;
	bool uring;               /* ask for FUSE over io_uring if offered */
};

/* The INIT answer for in (its in.init as decoded): protocol version, flags
 * (the ones offered of: ASYNC_READ, BIG_WRITES, ASYNC_DIO, MAX_PAGES,
 * PARALLEL_DIROPS, INIT_EXT, and OVER_IO_URING when want->uring), sizes.
 * Returns FW_OK, or -EPROTO for a kernel older than FW_PROTO_MINOR_MIN or of
 * another major (out then answers with our version, which is how the kernel
 * learns it). */
int fw_init_answer(const struct fuse_init_in *in, const struct fw_init_want *want,
		   struct fuse_init_out *out);
/* The 64-bit flags of an INIT request or answer. */
uint64_t fw_init_flags_in(const struct fuse_init_in *in);
uint64_t fw_init_flags_out(const struct fuse_init_out *out);

/* ---- answers (each ends r) ---- */

void fw_reply_err(struct fw_req *r, int errnum);          /* errnum >= 0, 0: success */
void fw_reply_none(struct fw_req *r);                     /* no answer at all */
void fw_reply_buf(struct fw_req *r, const void *buf, size_t len);
void fw_reply_init(struct fw_req *r, const struct fuse_init_out *out);
void fw_reply_entry(struct fw_req *r, uint64_t nodeid, const struct stat *st, double timeout);
void fw_reply_attr(struct fw_req *r, const struct stat *st, double timeout);
/* open_flags: FOPEN_* (DIRECT_IO, PARALLEL_DIRECT_WRITES, ...) */
void fw_reply_open(struct fw_req *r, uint64_t fh, uint32_t open_flags);
void fw_reply_write(struct fw_req *r, uint32_t size);
void fw_reply_statfs(struct fw_req *r, const struct statvfs *sv);

/* Append one directory entry (FUSE_READDIR's format) to buf[used..size),
 * used <= size: returns the bytes it takes, which is more than size - used
 * when it does not fit (nothing written then). */
size_t fw_add_dirent(char *buf, size_t size, size_t used, const char *name, uint64_t ino,
		     uint32_t mode, uint64_t next_off);

/* struct stat -> struct fuse_attr, as the kernel reads it. */
void fw_attr_from_stat(struct fuse_attr *a, const struct stat *st);

/* ---- the bytes each transport hands the kernel ---- */

/* /dev/fuse: the out header and iov[0..iovcnt) in one writev (more than
 * 3 iovecs: -EIO answered instead).  0 or -errno of writev. */
int fw_dev_answer(int fd, uint64_t unique, int error, const struct iovec *iov, int iovcnt);

/* /dev/fuse: a notification without payload (an out header of unique 0
 * whose error is the code, e.g. FUSE_NOTIFY_RESEND).  0 or -errno of write
 * (-EINVAL from a kernel that does not know the code). */
int fw_dev_notify(int fd, int code);
/* /dev/fuse: FUSE_NOTIFY_INVAL_ENTRY, the kernel forgets the name in
 * directory parent (a lookup asks again); FUSE_NOTIFY_INVAL_INODE, it
 * forgets the attributes of ino (off < 0) and, for off >= 0, the cached
 * pages from off, len bytes (0: to the end).  0 or -errno of write (-ENOENT
 * when the kernel had nothing cached). */
int fw_dev_inval_entry(int fd, uint64_t parent, const char *name);
int fw_dev_inval_inode(int fd, uint64_t ino, int64_t off, int64_t len);

struct io_uring_sqe;

/* io_uring: an entry's answer.  The iovecs are gathered at the start of
 * payload (cap bytes): one already where it belongs stays, the others are
 * moved and their bytes added to *moved; then the out header and the
 * entry's in/out (commit_id, payload size) go into hdr.  An answer larger
 * than cap becomes -EIO with no payload. */
void fw_ring_answer(struct fuse_uring_req_header *hdr, void *payload, size_t cap,
		    uint64_t commit_id, uint64_t unique, int error, const struct iovec *iov,
		    int iovcnt, size_t *moved);
/* The 128-byte SQE of an entry's command on the /dev/fuse fd, for FUSE
 * queue qid: FUSE_IO_URING_CMD_REGISTER of iov[2] (header and payload
 * buffers, read by the kernel when it issues the SQE) or
 * FUSE_IO_URING_CMD_COMMIT_AND_FETCH of commit_id; user_data is data. */
void fw_ring_cmd(struct io_uring_sqe *sqe, int fd, uint32_t cmd_op, uint16_t qid,
		 uint64_t commit_id, const struct iovec *iov, void *data);

#endif

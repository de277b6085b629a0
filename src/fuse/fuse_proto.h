/* fuse_proto.h - the FUSE kernel protocol as nvmefs speaks it: Debian's
 * <linux/fuse.h> (protocol 7.38) plus what later kernels added and it lacks,
 * each defined here once, as include/uapi/linux/fuse.h of Linux 6.14+ spells
 * it (protocol 7.42).  Every struct the wire carries has its size checked
 * against the kernel's at compile time: a wrong size is a silent protocol
 * error at run time.
 */
#ifndef NVMEFS_FUSE_PROTO_H
#define NVMEFS_FUSE_PROTO_H

#include <linux/fuse.h>
#include <stdint.h>

/* The protocol version this server speaks (the reply to INIT carries the
 * smaller of this and the kernel's minor). */
#define FW_PROTO_MAJOR 7
#define FW_PROTO_MINOR 42
/* The oldest kernel protocol served: the struct sizes below are those of
 * 7.31 and later (fuse_init_in grew to 64 bytes in 7.36; older kernels send
 * 16 bytes and are served, zero-extended). */
#define FW_PROTO_MINOR_MIN 31

/* ---- 7.40: resending what the server had taken (Linux 6.9) ---- */

#define FW_PROTO_MINOR_RESEND 40

/* Notify code: the kernel puts every request it had handed to the server
 * and not seen answered back on its pending list, each with
 * FUSE_UNIQUE_RESEND set in its unique; a kernel without it answers the
 * notify EINVAL. */
#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7
#endif
#ifndef FUSE_UNIQUE_RESEND
#define FUSE_UNIQUE_RESEND (1ULL << 63)
#endif

/* ---- 7.42: FUSE over io_uring ---- */

/* INIT flag (64-bit form, i.e. bit 9 of flags2): the server takes requests
 * over io_uring.  The kernel offers it only when fuse's enable_uring module
 * parameter is set. */
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)
#endif
#ifndef FUSE_REQUEST_TIMEOUT
#define FUSE_REQUEST_TIMEOUT (1ULL << 42)
#endif

#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

/* Per request, between the kernel and the server, in the entry's header
 * buffer (iov[0]). */
struct fuse_uring_ent_in_out {
	uint64_t flags;
	/* kernel → server: the request's id; server → kernel: echoed in the
	 * COMMIT_AND_FETCH command */
	uint64_t commit_id;
	/* bytes of the payload buffer (iov[1]) that carry arguments: the
	 * request's beyond the op header, or the reply's out arguments */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

/* The header buffer of one ring entry. */
struct fuse_uring_req_header {
	/* struct fuse_in_header (request) / fuse_out_header (reply) */
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ];
	/* the op's own header (fuse_write_in, ...): the request's first
	 * argument */
	char op_in[FUSE_URING_OP_IN_OUT_SZ];
	struct fuse_uring_ent_in_out ring_ent_in_out;
};

/* cmd_op of an IORING_OP_URING_CMD on /dev/fuse */
enum fuse_uring_cmd {
	FUSE_IO_URING_CMD_INVALID = 0,
	/* register an entry (iov[0] header, iov[1] payload) on a queue */
	FUSE_IO_URING_CMD_REGISTER = 1,
	/* answer the entry's request and make it available again */
	FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* The command area of the 128-byte SQE (IORING_SETUP_SQE128). */
struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id; /* COMMIT_AND_FETCH: the request answered */
	uint16_t qid;       /* the queue: the CPU whose requests it takes */
	uint8_t padding[6];
};

/* ---- the wire: sizes as the kernel's uapi has them ---- */

_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct fuse_out_header) == 16, "fuse_out_header");
_Static_assert(sizeof(struct fuse_init_in) == 64, "fuse_init_in");
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out");
_Static_assert(sizeof(struct fuse_attr) == 88, "fuse_attr");
_Static_assert(sizeof(struct fuse_entry_out) == 128, "fuse_entry_out");
_Static_assert(sizeof(struct fuse_attr_out) == 104, "fuse_attr_out");
_Static_assert(sizeof(struct fuse_getattr_in) == 16, "fuse_getattr_in");
_Static_assert(sizeof(struct fuse_setattr_in) == 88, "fuse_setattr_in");
_Static_assert(sizeof(struct fuse_open_in) == 8, "fuse_open_in");
_Static_assert(sizeof(struct fuse_open_out) == 16, "fuse_open_out");
_Static_assert(sizeof(struct fuse_create_in) == 16, "fuse_create_in");
_Static_assert(sizeof(struct fuse_mknod_in) == 16, "fuse_mknod_in");
_Static_assert(sizeof(struct fuse_mkdir_in) == 8, "fuse_mkdir_in");
_Static_assert(sizeof(struct fuse_rename_in) == 8, "fuse_rename_in");
_Static_assert(sizeof(struct fuse_rename2_in) == 16, "fuse_rename2_in");
_Static_assert(sizeof(struct fuse_link_in) == 8, "fuse_link_in");
_Static_assert(sizeof(struct fuse_release_in) == 24, "fuse_release_in");
_Static_assert(sizeof(struct fuse_flush_in) == 24, "fuse_flush_in");
_Static_assert(sizeof(struct fuse_read_in) == 40, "fuse_read_in");
_Static_assert(sizeof(struct fuse_write_in) == 40, "fuse_write_in");
_Static_assert(sizeof(struct fuse_write_out) == 8, "fuse_write_out");
_Static_assert(sizeof(struct fuse_statfs_out) == 80, "fuse_statfs_out");
_Static_assert(sizeof(struct fuse_fsync_in) == 16, "fuse_fsync_in");
_Static_assert(sizeof(struct fuse_fallocate_in) == 32, "fuse_fallocate_in");
_Static_assert(sizeof(struct fuse_lseek_in) == 24, "fuse_lseek_in");
_Static_assert(sizeof(struct fuse_forget_in) == 8, "fuse_forget_in");
_Static_assert(sizeof(struct fuse_forget_one) == 16, "fuse_forget_one");
_Static_assert(sizeof(struct fuse_batch_forget_in) == 8, "fuse_batch_forget_in");
_Static_assert(sizeof(struct fuse_interrupt_in) == 8, "fuse_interrupt_in");
_Static_assert(sizeof(struct fuse_access_in) == 8, "fuse_access_in");
_Static_assert(sizeof(struct fuse_getxattr_in) == 8, "fuse_getxattr_in");
_Static_assert(sizeof(struct fuse_dirent) == 24, "fuse_dirent");
_Static_assert(sizeof(struct fuse_uring_ent_in_out) == 32, "fuse_uring_ent_in_out");
_Static_assert(sizeof(struct fuse_uring_req_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct fuse_uring_cmd_req) == 24, "fuse_uring_cmd_req");
_Static_assert(FOPEN_PARALLEL_DIRECT_WRITES == (1 << 6), "FOPEN_PARALLEL_DIRECT_WRITES");

#endif

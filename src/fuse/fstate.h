/* fstate.h - the record a daemon leaves next to its /dev/fuse fd in the
 * service manager's fd store ("fuse-state"), for the next run to adopt the
 * connection: what INIT agreed, the transport, the connection number, the
 * mountpoint and the digest of the config that must not change
 * (fusefs_digest).
 *
 * The record is binary, native byte order (the same host reads it): an
 * 8-byte magic, a version and the record's size, then the fields.  A
 * record of another magic, version or size is refused, never converted.
 * Prefix fstate_.
 */
#ifndef NVMEFS_FUSE_FSTATE_H
#define NVMEFS_FUSE_FSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "fuse_fs.h"

#define FSTATE_MAGIC "NVMEFSFS"
#define FSTATE_VERSION 1u
#define FSTATE_PATH_MAX 4096

struct fstate {
	struct fusefs_init_params init;
	enum fusefs_transport transport; /* CLASSIC or URING: how it was served */
	uint32_t conn;                   /* the connection (0: not known) */
	uint64_t digest;                 /* fusefs_digest */
	char mountpoint[FSTATE_PATH_MAX];
};

/* The bytes of a record: FSTATE_SIZE. */
size_t fstate_size(void);
/* Write s as a record into buf (cap >= fstate_size()): -ENAMETOOLONG for a
 * mountpoint that does not fit, -ENOSPC for a short buf. */
int fstate_encode(const struct fstate *s, void *buf, size_t cap);
/* Read a record: -EBADMSG (magic), -EPROTO (version), -EMSGSIZE (size),
 * -EINVAL (a mountpoint without its NUL, an unknown transport). */
int fstate_decode(const void *buf, size_t len, struct fstate *out);
/* Whether this daemon can serve the connection the record describes: 0, or
 * -EPROTO with why (a sentence for the log) in why[len]: served over
 * io_uring (its queues died with the run that set them up), a protocol this
 * daemon does not speak or a max_write above FUSEFS_MAX_IO, or a kernel
 * that cannot resend what the dead run had taken (before 7.40: those
 * requests would never be answered; refused, a fresh mount fails them
 * at once instead). */
int fstate_servable(const struct fstate *s, char *why, size_t len);
/* The checks of adoption that need no live fd: fstate_servable, the
 * record's mountpoint is mountpoint, and its digest is digest (this
 * config's fusefs_digest).  0, or -EPROTO with the first failure's
 * sentence in why[len].  Adoption and `nvmefsd --check-adopt` both use it. */
int fstate_adoptable(const struct fstate *s, const char *mountpoint, uint64_t digest, char *why,
		     size_t len);
/* What fstate_decode's error means, for a log line. */
const char *fstate_strerror(int err);

#endif

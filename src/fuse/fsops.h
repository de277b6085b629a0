/* fsops.h - the FUSE operations: what each request means for a namespace file.
 *
 * Attributes, the root directory, open, INIT, the checks on read, write,
 * fsync and fallocate (inode, offset, length, mode), and the answers that
 * need no device; what reaches the device goes on to fsio.c on the reactor
 * that took the request.  One implementation serves both channel
 * transports: a request comes in decoded (fwire.h) with its transport's
 * struct fw_req, and every answer goes out through fw_reply_*.
 * Prefix fsops_.
 */
#ifndef NVMEFS_FUSE_OPS_H
#define NVMEFS_FUSE_OPS_H

#include "fusefs_priv.h"
#include "fwire.h"

/* Serve one request taken by reactor rx (on its thread): rc is what
 * fw_decode said of it (a malformed request is answered EINVAL, an unknown
 * opcode ENOSYS, and counted).  r is copied where the answer comes later. */
void fsops_dispatch(struct fusefs_rx *rx, struct fw_req *r, int rc, const struct fw_msg *m);

#endif

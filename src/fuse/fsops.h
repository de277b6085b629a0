/* fsops.h - the FUSE operations: what each request means for a namespace file.
 *
 * Attributes, the root directory, open, the checks on read, write, fsync and
 * fallocate (inode, offset, length, mode), and the answers that need no
 * device; what reaches the device goes on to fsio.c on the reactor that
 * dispatched the request (fusefs_tl_rx).  The table is served by any channel
 * transport: the handlers use the request's userdata (struct fusefs) and the
 * dispatching reactor, nothing of the transport.  Prefix fsops_.
 */
#ifndef NVMEFS_FUSE_OPS_H
#define NVMEFS_FUSE_OPS_H

#include "fusefs_priv.h"

extern const struct fuse_lowlevel_ops fsops_ll;

#endif

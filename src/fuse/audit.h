/* audit.h - the audit build: every byte answered checked against where it
 * belongs, every buffer and every answer accounted for.
 *
 * Built only with NVMEFS_AUDIT defined (`make` builds $(B)/nvmefsd-audit
 * beside nvmefsd: the front end's objects compiled again with it, nothing
 * else changes).  Without it every function below is an empty inline one
 * and the production daemon carries not an instruction of it.  The
 * integration suites and `make soak` run the audit build (tests/integration/
 * lib.sh); docs/fuse.md, "Audit builds", says what it costs.
 *
 * What it keeps and checks:
 *  - per namespace and logical block (the first AUD_MAX_BLOCKS of each), a
 *    64-bit hash of the content of the last write that completed there
 *    (Write Zeroes: of zeroes), tagged with the controller's reset and
 *    removal count at the time (a reset or a power cut may lose what a
 *    volatile cache held: a block written before one is not known again
 *    until read), and a count of the writes in flight on it and of those
 *    begun and ended.  A block never written by this run is learned from its
 *    first clean read;
 *  - every read command's data at its completion, and every READ answer's
 *    data as it is sent, against those hashes, unless a write to the block
 *    began or ended in between (then either content is right): a mismatch
 *    is "data of another place";
 *  - a READ answered with other than the bytes asked (clamped to the
 *    namespace's end and the largest request), a WRITE answered with another
 *    size;
 *  - two commands in flight on one reactor with overlapping buffers, an
 *    answer sent from a buffer a command in flight uses;
 *  - a write's buffer changing between its submission and its completion
 *    (hashed at both);
 *  - a request answered (or dropped) twice, or answered without having been
 *    taken; a landing buffer or DMA buffer given back twice, or handed out
 *    while held.
 * A violation is one log line "audit: VIOLATION ..." followed by the recent
 * events of the request and of the buffers involved (from a ring of the
 * reactor's last AUD_EVENTS events: take, answer, drop, command submitted
 * and completed, buffer taken and given back; each with its request's
 * unique, opcode, offset, length, buffer address and time), counted in
 * fusefs_stats.audit_violations; with NVMEFS_AUDIT_ABORT=1 in the
 * environment the daemon aborts on the first one.  At the front end's
 * destruction one line sums up ("audit: N violations ...").
 *
 * Fault injection for the audit's own tests (audit builds only):
 * NVMEFS_AUDIT_INJECT=KIND:N acts on the N-th (from 1) read answer (KIND
 * twice: answered a second time; short: answered with 0 bytes; corrupt: one
 * byte of the data flipped before the answer) or the N-th write command
 * (scribble: a byte of its buffer changed after the submission).
 *
 * Threading: each reactor's records are its own (the fusefs_rx it hangs
 * off); the per-block table is shared by the reactors, in atomics.
 * Prefix aud_.
 */
#ifndef NVMEFS_FUSE_AUDIT_H
#define NVMEFS_FUSE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fusefs_priv.h"
#include "fwire.h"
#include "nvme.h"

enum aud_inject { AUD_INJ_TWICE = 1, AUD_INJ_SHORT, AUD_INJ_CORRUPT, AUD_INJ_SCRIBBLE };

/* what a buffer is, in the events */
enum aud_buf { AUD_BUF_DMA, AUD_BUF_LAND };

#ifdef NVMEFS_AUDIT

#define AUD_MAX_BLOCKS (1ull << 24) /* blocks of each namespace the table covers */
#define AUD_EVENTS 8192             /* events kept per reactor */

/* After the reactors' schedulers exist (fusefs_create); -ENOMEM. */
int aud_create(struct fusefs *fs);
/* The summary line, and everything freed (reactors stopped). */
void aud_destroy(struct fusefs *fs);

/* A request was decoded (rc: fw_decode's) and is dispatched. */
void aud_take(struct fusefs_rx *rx, const struct fw_req *r, int rc, const struct fw_msg *m);
/* r is answered now with error and iov (before it goes to the kernel). */
void aud_answer(struct fusefs_rx *rx, const struct fw_req *r, int error, const struct iovec *iov,
		int iovcnt);
/* r ends without an answer. */
void aud_drop(struct fusefs_rx *rx, const struct fw_req *r);

/* A buffer of len bytes at buf was taken (by a request, or a landing
 * buffer by a write) or is given back. */
void aud_buf_get(struct fusefs_rx *rx, enum aud_buf kind, const void *buf, size_t len);
void aud_buf_put(struct fusefs_rx *rx, enum aud_buf kind, const void *buf, size_t len);

/* The engine's submissions, for request unique of namespace ns. */
int aud_qpair_read(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
		   struct nvme_qpair *qp, uint64_t slba, void *buf, size_t len, nvme_io_cb cb,
		   void *arg);
int aud_qpair_write(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
		    struct nvme_qpair *qp, uint64_t slba, const void *buf, size_t len, bool fua,
		    nvme_io_cb cb, void *arg);
int aud_qpair_write_zeroes(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
			   struct nvme_qpair *qp, uint64_t slba, uint64_t nlb, bool deac,
			   nvme_io_cb cb, void *arg);

/* Whether this is the configured injection's turn (NVMEFS_AUDIT_INJECT). */
bool aud_inject(struct fusefs_rx *rx, enum aud_inject kind);

#else /* production: nothing at all */

static inline int aud_create(struct fusefs *fs)
{
	(void)fs;
	return 0;
}
static inline void aud_destroy(struct fusefs *fs)
{
	(void)fs;
}
static inline void aud_take(struct fusefs_rx *rx, const struct fw_req *r, int rc,
			    const struct fw_msg *m)
{
	(void)rx, (void)r, (void)rc, (void)m;
}
static inline void aud_answer(struct fusefs_rx *rx, const struct fw_req *r, int error,
			      const struct iovec *iov, int iovcnt)
{
	(void)rx, (void)r, (void)error, (void)iov, (void)iovcnt;
}
static inline void aud_drop(struct fusefs_rx *rx, const struct fw_req *r)
{
	(void)rx, (void)r;
}
static inline void aud_buf_get(struct fusefs_rx *rx, enum aud_buf kind, const void *buf,
			       size_t len)
{
	(void)rx, (void)kind, (void)buf, (void)len;
}
static inline void aud_buf_put(struct fusefs_rx *rx, enum aud_buf kind, const void *buf,
			       size_t len)
{
	(void)rx, (void)kind, (void)buf, (void)len;
}
static inline int aud_qpair_read(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
				 struct nvme_qpair *qp, uint64_t slba, void *buf, size_t len,
				 nvme_io_cb cb, void *arg)
{
	(void)rx, (void)unique;
	return nvme_qpair_read(qp, ns->d.nsid, slba, buf, len, cb, arg);
}
static inline int aud_qpair_write(struct fusefs_rx *rx, uint64_t unique, struct fusefs_ns *ns,
				  struct nvme_qpair *qp, uint64_t slba, const void *buf, size_t len,
				  bool fua, nvme_io_cb cb, void *arg)
{
	(void)rx, (void)unique;
	return nvme_qpair_write(qp, ns->d.nsid, slba, buf, len, fua, cb, arg);
}
static inline int aud_qpair_write_zeroes(struct fusefs_rx *rx, uint64_t unique,
					 struct fusefs_ns *ns, struct nvme_qpair *qp,
					 uint64_t slba, uint64_t nlb, bool deac, nvme_io_cb cb,
					 void *arg)
{
	(void)rx, (void)unique;
	return nvme_qpair_write_zeroes(qp, ns->d.nsid, slba, nlb, deac, cb, arg);
}
static inline bool aud_inject(struct fusefs_rx *rx, enum aud_inject kind)
{
	(void)rx, (void)kind;
	return false;
}

#endif
#endif

/* fstate.c - the fd store's state record, as bytes. */
#include "fstate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuse_proto.h"

/* The record as it lies in the memfd: fixed-size fields, no pointer. */
struct rec {
	char magic[8];
	uint32_t version;
	uint32_t size;
	uint32_t major, minor;
	uint64_t flags;
	uint32_t max_write;
	uint16_t max_pages, max_background, congestion_threshold, pad0;
	uint32_t time_gran;
	uint32_t transport;
	uint32_t conn;
	uint64_t digest;
	char mountpoint[FSTATE_PATH_MAX];
};
_Static_assert(sizeof(struct rec) == 64 + FSTATE_PATH_MAX, "fstate record layout");

size_t fstate_size(void)
{
	return sizeof(struct rec);
}

int fstate_encode(const struct fstate *s, void *buf, size_t cap)
{
	struct rec r;
	size_t n = strnlen(s->mountpoint, sizeof(s->mountpoint));

	if (cap < sizeof(r))
		return -ENOSPC;
	if (n >= sizeof(r.mountpoint))
		return -ENAMETOOLONG;
	memset(&r, 0, sizeof(r));
	memcpy(r.magic, FSTATE_MAGIC, sizeof(r.magic));
	r.version = FSTATE_VERSION;
	r.size = sizeof(r);
	r.major = s->init.major;
	r.minor = s->init.minor;
	r.flags = s->init.flags;
	r.max_write = s->init.max_write;
	r.max_pages = s->init.max_pages;
	r.max_background = s->init.max_background;
	r.congestion_threshold = s->init.congestion_threshold;
	r.time_gran = s->init.time_gran;
	r.transport = (uint32_t)s->transport;
	r.conn = s->conn;
	r.digest = s->digest;
	memcpy(r.mountpoint, s->mountpoint, n);
	memcpy(buf, &r, sizeof(r));
	return 0;
}

int fstate_decode(const void *buf, size_t len, struct fstate *out)
{
	struct rec r;

	if (len < 16)
		return -EMSGSIZE;
	memset(&r, 0, sizeof(r));
	memcpy(&r, buf, len < sizeof(r) ? len : sizeof(r));
	if (memcmp(r.magic, FSTATE_MAGIC, sizeof(r.magic)) != 0)
		return -EBADMSG;
	if (r.version != FSTATE_VERSION)
		return -EPROTO;
	if (r.size != sizeof(r) || len != sizeof(r))
		return -EMSGSIZE;
	if (!memchr(r.mountpoint, '\0', sizeof(r.mountpoint)) ||
	    (r.transport != FUSEFS_TRANSPORT_CLASSIC && r.transport != FUSEFS_TRANSPORT_URING))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->init.major = r.major;
	out->init.minor = r.minor;
	out->init.flags = r.flags;
	out->init.max_write = r.max_write;
	out->init.max_pages = r.max_pages;
	out->init.max_background = r.max_background;
	out->init.congestion_threshold = r.congestion_threshold;
	out->init.time_gran = r.time_gran;
	out->transport = (enum fusefs_transport)r.transport;
	out->conn = r.conn;
	out->digest = r.digest;
	memcpy(out->mountpoint, r.mountpoint, sizeof(out->mountpoint));
	return 0;
}

const char *fstate_strerror(int err)
{
	switch (err) {
	case -EBADMSG:
		return "not a state record (bad magic)";
	case -EPROTO:
		return "a state record of another version";
	case -EMSGSIZE:
		return "a state record of the wrong size";
	case -EINVAL:
		return "a malformed state record";
	default:
		return strerror(-err);
	}
}

int fstate_servable(const struct fstate *s, char *why, size_t len)
{
	const struct fusefs_init_params *in = &s->init;

	if (s->transport == FUSEFS_TRANSPORT_URING)
		snprintf(why, len, "it was served over io_uring, whose queues died with the "
				   "previous run (only /dev/fuse connections are adopted)");
	else if (in->major != FW_PROTO_MAJOR || in->minor < FW_PROTO_MINOR_MIN ||
		 in->max_write > FUSEFS_MAX_IO || in->max_write == 0)
		snprintf(why, len, "its INIT (protocol %u.%u, max_write %u) is not one this "
				   "daemon serves",
			 in->major, in->minor, in->max_write);
	else if (in->minor < FW_PROTO_MINOR_RESEND)
		snprintf(why, len, "the kernel speaks FUSE 7.%u and cannot resend what the "
				   "previous run had taken (7.%u, Linux 6.9): those requests would "
				   "wait for ever, a fresh mount fails them now",
			 in->minor, FW_PROTO_MINOR_RESEND);
	else
		return 0;
	return -EPROTO;
}

int fstate_adoptable(const struct fstate *s, const char *mountpoint, uint64_t digest, char *why,
		     size_t len)
{
	if (fstate_servable(s, why, len))
		return -EPROTO;
	if (strcmp(s->mountpoint, mountpoint) != 0) {
		snprintf(why, len, "it is mounted at %s, the config says %s", s->mountpoint,
			 mountpoint);
		return -EPROTO;
	}
	if (digest != s->digest) {
		snprintf(why, len,
			 "the namespaces or the files' mode, owner or group are not those it was "
			 "mounted with (config digest %016llx, stored %016llx)",
			 (unsigned long long)digest, (unsigned long long)s->digest);
		return -EPROTO;
	}
	return 0;
}

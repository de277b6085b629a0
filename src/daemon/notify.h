/* notify.h - the daemon's state for systemd (Type=notify), through sd_notify.
 * Without NOTIFY_SOCKET (not started by systemd) every call does nothing. */
#ifndef NVMEFS_NOTIFY_H
#define NVMEFS_NOTIFY_H

#include <stdint.h>

/* READY=1 with a STATUS= line (printf format). */
void notify_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* RELOADING=1 and MONOTONIC_USEC=now with a STATUS= line: the daemon is
 * being replaced in place; the new image's READY=1 ends it. */
void notify_reloading(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* STOPPING=1 with a STATUS= line. */
void notify_stopping(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* EXTEND_TIMEOUT_USEC=usec with a STATUS= line: while stopping, systemd
 * waits at least usec more from now before it kills the service. */
void notify_extend(uint64_t usec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* STATUS= only. */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

/* notify.c - sd_notify wrapper: READY=1, STOPPING=1 and STATUS= lines. */
#include "notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-daemon.h>

#include "log.h"

static void notify_send(const char *state, const char *fmt, va_list ap)
{
	char status[256], msg[320];
	int rc;

	vsnprintf(status, sizeof(status), fmt, ap);
	snprintf(msg, sizeof(msg), "%s%sSTATUS=%s", state ? state : "", state ? "\n" : "", status);
	/* 0: no NOTIFY_SOCKET, not under systemd; that is fine */
	rc = sd_notify(0, msg);
	if (rc < 0)
		log_warn("sd_notify: %s", strerror(-rc));
}

void notify_ready(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	notify_send("READY=1", fmt, ap);
	va_end(ap);
}

void notify_reloading(const char *fmt, ...)
{
	char state[96];
	struct timespec t;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &t);
	snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000);
	va_start(ap, fmt);
	notify_send(state, fmt, ap);
	va_end(ap);
}

void notify_stopping(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	notify_send("STOPPING=1", fmt, ap);
	va_end(ap);
}

void notify_extend(uint64_t usec, const char *fmt, ...)
{
	char state[64];
	va_list ap;

	snprintf(state, sizeof(state), "EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)usec);
	va_start(ap, fmt);
	notify_send(state, fmt, ap);
	va_end(ap);
}

void notify_status(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	notify_send(NULL, fmt, ap);
	va_end(ap);
}

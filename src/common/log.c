/* log.c - see log.h */
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#ifndef NVMEFS_LOG_NO_JOURNAL
#include <systemd/sd-journal.h>
#endif
#include <time.h>
#include <unistd.h>

#define LOG_NAMES_MAX 64
#define LOG_NAME_LEN  64

static enum log_level log_level = LOG_LVL_INFO;
static const char *log_ident = "nvmefsd";
static char log_names[LOG_NAMES_MAX][LOG_NAME_LEN];
/* names published by a release store of the count, read with an acquire
 * load: log_add_ctrl_name may run while other threads log */
static unsigned log_nr_names;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static bool log_stream; /* fd 2 is the journal's stream */
static bool log_to_journal; /* ... and its native socket is there */

void log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

enum log_level log_get_level(void)
{
	return log_level;
}

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

void log_set_ctrl_names(const char *const *names, unsigned n)
{
	log_nr_names = 0;
	for (unsigned i = 0; i < n && log_nr_names < LOG_NAMES_MAX; i++)
		if (names[i] && strlen(names[i]) < LOG_NAME_LEN)
			strcpy(log_names[log_nr_names++], names[i]);
}

void log_add_ctrl_name(const char *name)
{
	unsigned n = __atomic_load_n(&log_nr_names, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(log_names[i], name))
			return;
	if (n == LOG_NAMES_MAX || strlen(name) >= LOG_NAME_LEN)
		return;
	strcpy(log_names[n], name);
	__atomic_store_n(&log_nr_names, n + 1, __ATOMIC_RELEASE);
}

/* systemd's own test: JOURNAL_STREAM is "DEV:INODE" of the stream it
 * connected fd 2 to; an inherited variable with fd 2 redirected elsewhere
 * does not count.  The native socket must be there too: sd_journal_send
 * drops a record silently (returns 0) when it is missing. */
#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"
static void log_decide(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	log_stream = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
		     (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
	log_to_journal = log_stream && access(LOG_JOURNAL_SOCKET, W_OK) == 0;
}

#ifndef NVMEFS_LOG_NO_JOURNAL
/* The controller a message is about: the name it begins with, before ':' */
static const char *log_ctrl_of(const char *line)
{
	unsigned nr = __atomic_load_n(&log_nr_names, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < nr; i++) {
		size_t n = strlen(log_names[i]);

		if (strncmp(line, log_names[i], n) == 0 && line[n] == ':')
			return log_names[i];
	}
	return NULL;
}

/* The namespace file a message is about: "CTRL: namespace N ..." names
 * CTRLnN, else a word CTRLnN of a known controller anywhere in it.  Into
 * out (at least LOG_NAME_LEN + 12 bytes); false when it names none. */
static bool log_ns_of(const char *line, const char *ctrl, char *out, size_t len)
{
	if (ctrl) {
		const char *p = line + strlen(ctrl) + 1;
		unsigned long nsid;
		char *end;

		if (strncmp(p, " namespace ", 11) == 0 && p[11] >= '1' && p[11] <= '9') {
			nsid = strtoul(p + 11, &end, 10);
			if (nsid <= UINT32_MAX && !isalnum((unsigned char)*end)) {
				snprintf(out, len, "%sn%lu", ctrl, nsid);
				return true;
			}
		}
	}
	unsigned nr = __atomic_load_n(&log_nr_names, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < nr; i++) {
		size_t n = strlen(log_names[i]);

		for (const char *p = strstr(line, log_names[i]); p; p = strstr(p + 1, log_names[i])) {
			const char *q = p + n;
			size_t k = 1;

			if ((p > line && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) || *q != 'n' ||
			    !isdigit((unsigned char)q[1]))
				continue;
			while (isdigit((unsigned char)q[k]))
				k++;
			if (isalnum((unsigned char)q[k]) || q[k] == '_' || n + k >= len)
				continue;
			memcpy(out, p, n + k);
			out[n + k] = '\0';
			return true;
		}
	}
	return false;
}
#endif

/* NVMEFS_LOG_NO_JOURNAL: a build without libsystemd (the static test
 * programs of the VM guest): stderr only */
static int log_journal(int prio, const char *line)
{
#ifdef NVMEFS_LOG_NO_JOURNAL
	(void)prio;
	(void)line;
	return -ENOSYS;
#else
	const char *ctrl = log_ctrl_of(line);
	char ns[LOG_NAME_LEN + 12];

	if (log_ns_of(line, ctrl, ns, sizeof(ns))) {
		if (ctrl)
			return sd_journal_send("MESSAGE=%s", line, "PRIORITY=%d", prio,
					       "SYSLOG_IDENTIFIER=%s", log_ident, "CONTROLLER=%s",
					       ctrl, "NAMESPACE=%s", ns, NULL);
		return sd_journal_send("MESSAGE=%s", line, "PRIORITY=%d", prio,
				       "SYSLOG_IDENTIFIER=%s", log_ident, "NAMESPACE=%s", ns, NULL);
	}
	if (ctrl)
		return sd_journal_send("MESSAGE=%s", line, "PRIORITY=%d", prio,
				       "SYSLOG_IDENTIFIER=%s", log_ident, "CONTROLLER=%s", ctrl, NULL);
	return sd_journal_send("MESSAGE=%s", line, "PRIORITY=%d", prio, "SYSLOG_IDENTIFIER=%s",
			       log_ident, NULL);
#endif
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int syslog_prio[] = {3, 4, 6, 7};
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	char line[1024], out[1200];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_once(&log_once, log_decide);
	if (log_to_journal && log_journal(syslog_prio[lvl], line) >= 0)
		return;
	if (log_stream) {
		n = snprintf(out, sizeof(out), "<%d>%s\n", syslog_prio[lvl], line);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(out, sizeof(out), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: %s: %s\n",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			     tm.tm_sec, ts.tv_nsec / 1000000, log_ident, tag[lvl], line);
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(out)) {
		n = sizeof(out) - 1;
		out[n - 1] = '\n';
	}
	/* one write per line, so lines from reactors do not interleave */
	if (write(2, out, (size_t)n) < 0)
		return;
}

bool log_rl_take_at(struct log_rl *rl, uint64_t now_ms, unsigned *suppressed)
{
	uint64_t t0 = atomic_load_explicit(&rl->start, memory_order_acquire);

	/* a new window: the thread that moves start on empties it (a take
	 * racing with that may count in either window) */
	if ((t0 == 0 || now_ms - t0 >= rl->interval_ms) &&
	    atomic_compare_exchange_strong(&rl->start, &t0, now_ms))
		atomic_store_explicit(&rl->used, 0, memory_order_release);
	/* (read first: a flood past burst never wraps the count around) */
	if (atomic_load_explicit(&rl->used, memory_order_acquire) < rl->burst &&
	    atomic_fetch_add_explicit(&rl->used, 1, memory_order_acq_rel) < rl->burst) {
		*suppressed = atomic_exchange_explicit(&rl->dropped, 0, memory_order_acq_rel);
		return true;
	}
	atomic_fetch_add_explicit(&rl->dropped, 1, memory_order_acq_rel);
	return false;
}

bool log_rl_take(struct log_rl *rl, unsigned *suppressed)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return log_rl_take_at(rl, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + 1,
			      suppressed);
}

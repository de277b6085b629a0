/* log.h - one-line messages, to the journal under systemd, else to stderr.
 *
 * log_level is process-wide and set once at start-up.  Messages below it are
 * dropped.  Where a message goes is decided at its first use:
 *   - stderr is the journal (JOURNAL_STREAM names the device and inode of
 *     fd 2, as systemd sets it) and journald's native socket is there at
 *     the first message: a record through sd_journal_send with
 *     MESSAGE, PRIORITY (syslog's), SYSLOG_IDENTIFIER (nvmefsd, or the
 *     program named by log_set_ident) and, for a message that begins with a
 *     controller's name and a colon ("nvme1: reset ..."), CONTROLLER=name,
 *     and for one about a namespace ("nvme1: namespace 2 ..." or naming the
 *     file nvme1n2 anywhere), NAMESPACE=nvme1n2;
 *     if the journal refuses it, or its socket was missing, the line goes to
 *     stderr with a <N> priority prefix, which the journal's stream reader
 *     understands;
 *   - otherwise (a terminal, a file, a pipe): "TIME IDENT: LEVEL: message"
 *     on stderr, TIME being UTC in ISO 8601 with milliseconds.
 * Thread-safe: each message is one write (or one journal datagram), so lines
 * from different threads do not interleave.
 */
#ifndef NVMEFS_LOG_H
#define NVMEFS_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* The program name in lines and SYSLOG_IDENTIFIER (default "nvmefsd"); the
 * string must outlive the process's logging.  Call before the first message. */
void log_set_ident(const char *ident);
/* The controllers' names, for CONTROLLER= (copied; at most 64, each
 * shorter than 64 bytes; others are ignored).  Call before threads log. */
void log_set_ctrl_names(const char *const *names, unsigned n);
/* One more name (a controller added at run time), unless it is there
 * already or there is no room: one thread at a time, while others log. */
void log_add_ctrl_name(const char *name);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/* A rate limit for a message that others can make the daemon repeat (a
 * refused client, an I/O error per request): at most burst of them go out
 * per window of interval_ms, a window beginning with the first message
 * after the previous one ended.  The rest are counted, and the next line
 * that goes out says how many were not logged since the one before it
 * (log_rl_take's *suppressed), so lines plus those counts add up to every
 * occurrence; the last ones are told by the next line, if any comes.
 * Lock-free: any thread may take from one limiter (a window may then
 * admit a message or two more than burst, never fewer).  Prefix log_rl_. */
struct log_rl {
	unsigned burst;
	unsigned interval_ms;
	_Atomic uint64_t start; /* ms (CLOCK_MONOTONIC) the window began; 0: none yet */
	atomic_uint used;       /* messages this window let out */
	atomic_uint dropped;    /* not let out since the last that was */
};
#define LOG_RL_INIT(b, ms) {.burst = (b), .interval_ms = (ms)}

/* Whether one more message may go out now; if so, *suppressed is the
 * number not let out since the previous one (to say in it). */
bool log_rl_take(struct log_rl *rl, unsigned *suppressed);
/* The same at a given time (ms on any clock that only goes forward, above
 * 0): for tests. */
bool log_rl_take_at(struct log_rl *rl, uint64_t now_ms, unsigned *suppressed);

#endif

/* log.h - one-line messages to stderr (journald captures it under systemd).
 *
 * log_level is process-wide and set once at start-up.  Messages below it are
 * dropped.  Under systemd (JOURNAL_STREAM set) each line carries a <N> syslog
 * priority prefix so the journal keeps the level.
 */
#ifndef NVMEFS_LOG_H
#define NVMEFS_LOG_H

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif

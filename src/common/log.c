/* log.c - see log.h */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static enum log_level log_level = LOG_LVL_INFO;

void log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

enum log_level log_get_level(void)
{
	return log_level;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int syslog_prio[] = {3, 4, 6, 7};
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	char line[1024];
	va_list ap;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one fputs per line, so lines from reactors do not interleave */
	if (getenv("JOURNAL_STREAM"))
		fprintf(stderr, "<%d>%s\n", syslog_prio[lvl], line);
	else
		fprintf(stderr, "nvmefsd: %s: %s\n", tag[lvl], line);
}

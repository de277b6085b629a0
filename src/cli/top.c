/* top.c - `nvmefsctl top`: reactors, namespaces and controllers of a running
 * daemon, refreshed every interval.  On a terminal a full-screen view
 * (ncurses: keys to sort and to quit); otherwise the same tables printed
 * once per interval, as top -b does.  Columns are as wide as their content
 * (table.h); on a screen too narrow for a table (or in plain mode within
 * $COLUMNS) its least needed columns are left out and a line names them. */
#include <curses.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "iostat.h"
#include "table.h"

enum sort_key { SORT_NAME, SORT_IOPS, SORT_BW, SORT_P99, SORT_NR };
static const char *const sort_names[SORT_NR] = {"name", "iops", "MB/s", "p99"};

/* Where a frame's lines go: the screen (row by row) or stdout; width: the
 * screen's, or in plain mode $COLUMNS when set (as top -b), else none. */
struct out {
	bool curses;
	int row;
	unsigned width;
	unsigned below; /* lines that did not fit under the screen */
};

static void emit(struct out *o, bool bold, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void emit(struct out *o, bool bold, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!o->curses) {
		puts(line);
		return;
	}
	if (o->row >= LINES) {
		o->below++;
		return;
	}
	if (bold)
		attron(A_BOLD | A_REVERSE);
	mvaddnstr(o->row, 0, line, COLS);
	if (bold) {
		/* the header bar spans the screen */
		for (int x = (int)strlen(line); x < COLS; x++)
			mvaddch(o->row, x, ' ');
		attroff(A_BOLD | A_REVERSE);
	}
	o->row++;
}

/* "12.3" or "-" */
static const char *num(char *b, size_t n, double v, int prec)
{
	if (isfinite(v))
		snprintf(b, n, "%.*f", prec, v);
	else
		snprintf(b, n, "-");
	return b;
}

static void emit_line(void *arg, bool head, const char *line)
{
	emit(arg, head, "%s", line);
}

/* A table within the width; the columns left out are named on a line of
 * their own, so that a narrow screen never hides one without a sign. */
static int emit_tab(struct out *o, struct tab *t)
{
	char hidden[256];
	int n = tab_render(t, o->width, emit_line, o, hidden, sizeof(hidden));

	tab_free(t);
	if (n > 0)
		emit(o, false, "(%d column%s hidden at %u columns: %s; widen the %s)", n,
		     n == 1 ? "" : "s", o->width, hidden, o->curses ? "terminal" : "COLUMNS");
	return n < 0 ? n : 0;
}

static json_object *find_by(json_object *arr, const char *k, const char *v)
{
	for (size_t i = 0; i < jlen(arr); i++)
		if (!strcmp(jstr(jidx(arr, i), k), v))
			return jidx(arr, i);
	return NULL;
}

static json_object *find_reactor(json_object *snap, uint64_t id)
{
	json_object *arr = jget(snap, "reactors");

	for (size_t i = 0; i < jlen(arr); i++)
		if (ju64(jidx(arr, i), "id") == id)
			return jidx(arr, i);
	return NULL;
}

/* A counter's growth from p to c (0 without p's). */
static double grow(json_object *c, json_object *p, const char *k)
{
	uint64_t a = ju64(c, k), b = p ? ju64(p, k) : 0;

	return a > b ? (double)(a - b) : 0;
}

static int reactors(struct out *o, json_object *prev, json_object *cur, double dt)
{
	static const struct tab_col cols[] = {
	    {"REACTOR", TAB_LEFT, 0, 0}, {"CPU", TAB_RIGHT, 0, 0},     {"NODE", TAB_RIGHT, 3, 0},
	    {"BUSY%", TAB_RIGHT, 0, 0},  {"IOPS", TAB_RIGHT, 0, 0},    {"QD", TAB_RIGHT, 0, 0},
	    {"PASSES/s", TAB_RIGHT, 2, 0}, {"CPL/PASS", TAB_RIGHT, 1, 0},
	};
	json_object *arr = jget(cur, "reactors");
	struct tab *t = tab_new(cols, sizeof(cols) / sizeof(cols[0]));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < jlen(arr); i++) {
		json_object *r = jidx(arr, i), *pr = prev ? find_reactor(prev, ju64(r, "id")) : NULL;
		json_object *qs = jget(r, "qpairs");
		double busy = grow(r, pr, "busy_ns"), idle = grow(r, pr, "idle_ns"), done = 0;
		double passes = grow(r, pr, "passes"), busy_passes = grow(r, pr, "busy_passes");
		uint64_t qd = 0;
		char b1[32], b2[32], b3[32], b4[32];

		for (size_t k = 0; k < jlen(qs); k++) {
			json_object *q = jidx(qs, k), *pq = NULL;
			json_object *pqs = pr ? jget(pr, "qpairs") : NULL;

			for (size_t m = 0; m < jlen(pqs); m++)
				if (ju64(jidx(pqs, m), "qid") == ju64(q, "qid") &&
				    !strcmp(jstr(jidx(pqs, m), "controller"), jstr(q, "controller")))
					pq = jidx(pqs, m);
			done += grow(q, pq, "completed");
			qd += ju64(q, "inflight");
		}
		tab_cell(t, "%llu", (unsigned long long)ju64(r, "id"));
		tab_cell(t, "%s", jstr(r, "cpu"));
		tab_cell(t, "%s", jstr(r, "node"));
		tab_cell(t, "%s",
		         num(b1, sizeof(b1), busy + idle > 0 ? busy / (busy + idle) * 100 : NAN, 1));
		tab_cell(t, "%s", num(b2, sizeof(b2), done / dt, 0));
		tab_cell(t, "%llu", (unsigned long long)qd);
		tab_cell(t, "%s", num(b3, sizeof(b3), passes / dt, 0));
		tab_cell(t, "%s", num(b4, sizeof(b4), busy_passes > 0 ? done / busy_passes : NAN, 2));
	}
	return emit_tab(o, t);
}

static enum sort_key sort_by;

static double sort_val(const struct io_ns_rates *r)
{
	switch (sort_by) {
	case SORT_IOPS:
		return r->rs + r->ws + r->fs + r->ds;
	case SORT_BW:
		return r->rkbs + r->wkbs;
	case SORT_P99:
		return fmax(isfinite(r->r_p99) ? r->r_p99 : 0, isfinite(r->w_p99) ? r->w_p99 : 0);
	default:
		return 0;
	}
}

static int ns_cmp(const void *a, const void *b)
{
	const struct io_ns_rates *x = a, *y = b;
	double vx, vy;

	if (sort_by == SORT_NAME)
		return ctl_natcmp(x->name, y->name);
	vx = sort_val(x);
	vy = sort_val(y);
	return vx < vy ? 1 : vx > vy ? -1 : ctl_natcmp(x->name, y->name);
}

static int namespaces(struct out *o, json_object *prev, json_object *cur)
{
	struct io_ns_rates *v;
	size_t n;

	/* what goes first on a narrow screen: the controller (the name says
	 * it), then the medians, then aqu-sz */
	static const struct tab_col cols[] = {
	    {"NAMESPACE", TAB_LEFT, 0, 0}, {"CTRL", TAB_LEFT, 5, 0},   {"r/s", TAB_RIGHT, 0, 0},
	    {"w/s", TAB_RIGHT, 0, 0},      {"rMB/s", TAB_RIGHT, 0, 0}, {"wMB/s", TAB_RIGHT, 0, 0},
	    {"r_p50", TAB_RIGHT, 4, 0},    {"r_p99", TAB_RIGHT, 0, 0}, {"w_p50", TAB_RIGHT, 4, 0},
	    {"w_p99", TAB_RIGHT, 0, 0},    {"aqu", TAB_RIGHT, 3, 0},   {"QD", TAB_RIGHT, 0, 0},
	    {"%util", TAB_RIGHT, 0, 0},
	};
	struct tab *t;

	if (io_ns_rates(prev, cur, &v, &n))
		return -ENOMEM;
	qsort(v, n, sizeof(*v), ns_cmp);
	t = tab_new(cols, sizeof(cols) / sizeof(cols[0]));
	if (!t) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct io_ns_rates *r = &v[i];
		char b[10][32];

		tab_cell(t, "%s", r->name);
		tab_cell(t, "%s", r->ctrl);
		tab_cell(t, "%s", num(b[0], 32, r->rs, 0));
		tab_cell(t, "%s", num(b[1], 32, r->ws, 0));
		tab_cell(t, "%s", num(b[2], 32, r->rkbs / 1024, 1));
		tab_cell(t, "%s", num(b[3], 32, r->wkbs / 1024, 1));
		tab_cell(t, "%s", num(b[4], 32, r->r_p50, 3));
		tab_cell(t, "%s", num(b[5], 32, r->r_p99, 3));
		tab_cell(t, "%s", num(b[6], 32, r->w_p50, 3));
		tab_cell(t, "%s", num(b[7], 32, r->w_p99, 3));
		tab_cell(t, "%s", num(b[8], 32, r->aqu, 2));
		tab_cell(t, "%llu", (unsigned long long)r->inflight);
		tab_cell(t, "%s", num(b[9], 32, r->util, 1));
	}
	free(v);
	return emit_tab(o, t);
}

static int controllers(struct out *o, json_object *cur, json_object *status)
{
	static const struct tab_col cols[] = {
	    {"CONTROLLER", TAB_LEFT, 0, 0}, {"STATE", TAB_LEFT, 0, 0},  {"RESETS", TAB_RIGHT, 0, 0},
	    {"TIMEOUTS", TAB_RIGHT, 0, 0},  {"TEMP_C", TAB_RIGHT, 1, 0}, {"WARN", TAB_RIGHT, 0, 0},
	};
	json_object *arr = jget(cur, "controllers");
	struct tab *t = tab_new(cols, sizeof(cols) / sizeof(cols[0]));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < jlen(arr); i++) {
		json_object *c = jidx(arr, i), *rec = jget(c, "recovery");
		json_object *h = jget(find_by(jget(status, "controllers"), "name", jstr(c, "name")),
		                      "health");
		json_object *temp = jget(h, "temperature_c");

		tab_cell(t, "%s", jstr(c, "name"));
		tab_cell(t, "%s", jstr(c, "state"));
		tab_cell(t, "%llu", (unsigned long long)ju64(rec, "resets_started"));
		tab_cell(t, "%llu", (unsigned long long)ju64(rec, "timeouts"));
		tab_cell(t, "%s", temp ? json_object_get_string(temp) : "-");
		tab_cell(t, "%s",
		         h && jbool(h, "valid") ? (ju64(h, "critical_warning") ? "yes" : "no") : "-");
	}
	return emit_tab(o, t);
}

static int frame(struct out *o, json_object *prev, json_object *cur, json_object *status,
                 double interval)
{
	double dt = io_interval(prev, cur);
	json_object *fuse = jget(cur, "fuse");

	emit(o, true, "nvmefs top - up %.0f s, %s over %.1f s, transport %s",
	     jdbl(cur, "uptime_s"), prev ? "rates" : "since start", dt,
	     fuse ? jstr(fuse, "transport") : "-");
	if (o->curses)
		emit(o, false, "keys: q quit, s sort (by %s), n name, i iops, b MB/s, l p99; every %.1f s",
		     sort_names[sort_by], interval);
	emit(o, false, "%s", "");
	if (reactors(o, prev, cur, dt > 0 ? dt : NAN))
		return -ENOMEM;
	emit(o, false, "%s", "");
	if (namespaces(o, prev, cur))
		return -ENOMEM;
	emit(o, false, "%s", "");
	return controllers(o, cur, status);
}

/* Wait for interval seconds on the screen, taking keys; false: quit. */
static bool keys(double interval)
{
	double left = interval;

	while (left > 0 && !stop_flag) {
		double step = left < 0.2 ? left : 0.2;
		int ch;

		timeout((int)(step * 1000));
		ch = getch();
		if (ch == ERR) {
			left -= step;
			continue;
		}
		switch (ch) {
		case 'q':
		case 'Q':
			return false;
		case 's':
			sort_by = (sort_by + 1) % SORT_NR;
			return true;
		case 'n':
			sort_by = SORT_NAME;
			return true;
		case 'i':
			sort_by = SORT_IOPS;
			return true;
		case 'b':
			sort_by = SORT_BW;
			return true;
		case 'l':
			sort_by = SORT_P99;
			return true;
		default:
			break;
		}
	}
	return !stop_flag;
}

int io_top(const char *sock, double interval, unsigned long count)
{
	json_object *prev = NULL, *cur = NULL, *status = NULL;
	struct out o = {.curses = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO)};
	const char *cols = getenv("COLUMNS");
	unsigned long done = 0;
	int ret = EXIT_OK;

	if (!o.curses && cols && *cols) {
		char *end;
		unsigned long w = strtoul(cols, &end, 10);

		if (!*end && w >= 20 && w <= 10000)
			o.width = (unsigned)w;
	}

	ctl_catch_signals();
	if (o.curses && !initscr()) {
		o.curses = false;
	} else if (o.curses) {
		cbreak();
		noecho();
		curs_set(0);
		keypad(stdscr, TRUE);
	}
	while (!stop_flag && (!count || done < count)) {
		/* after a key the rates cover the shorter time since the last */
		json_object_put(prev);
		prev = cur;
		cur = NULL;
		json_object_put(status);
		status = NULL;
		ret = ctl_call(sock, "stats", NULL, &cur);
		if (!ret)
			ret = ctl_call(sock, "status", NULL, &status);
		if (ret)
			break;
		done++;
		o.row = 0;
		o.below = 0;
		if (o.curses) {
			erase();
			o.width = COLS > 0 ? (unsigned)COLS : 0;
		}
		if (frame(&o, prev, cur, status, interval)) {
			ret = EXIT_DAEMON;
			break;
		}
		if (o.curses) {
			if (o.below && LINES > 0) {
				/* the last line says what the screen's height cut */
				char msg[96];

				snprintf(msg, sizeof(msg), "(%u more line%s below: a taller terminal)",
				         o.below + 1, o.below ? "s" : "");
				move(LINES - 1, 0);
				clrtoeol();
				attron(A_BOLD);
				mvaddnstr(LINES - 1, 0, msg, COLS);
				attroff(A_BOLD);
			}
			refresh();
		} else {
			putchar('\n');
			fflush(stdout);
		}
		if (count && done >= count)
			break;
		if (o.curses) {
			if (!keys(interval))
				break;
		} else {
			ctl_nap(interval);
		}
	}
	if (o.curses)
		endwin();
	json_object_put(prev);
	json_object_put(cur);
	json_object_put(status);
	return ret;
}

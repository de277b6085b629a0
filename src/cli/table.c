/* table.c - see table.h. */
#include "table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tab {
	const struct tab_col *cols;
	unsigned ncols;
	char **cells; /* row-major, ncells of cap */
	size_t ncells, cap;
	bool oom;
};

struct tab *tab_new(const struct tab_col *cols, unsigned ncols)
{
	struct tab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->cols = cols;
	t->ncols = ncols;
	return t;
}

void tab_free(struct tab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

void tab_cell(struct tab *t, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	if (!t || t->oom)
		return;
	if (t->ncells == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **c = realloc(t->cells, cap * sizeof(*c));

		if (!c) {
			t->oom = true;
			return;
		}
		t->cells = c;
		t->cap = cap;
	}
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->oom = true;
		return;
	}
	t->cells[t->ncells++] = s;
}

size_t tab_rows(const struct tab *t)
{
	return t && t->ncols ? t->ncells / t->ncols : 0;
}

static const char *cell(const struct tab *t, size_t row, unsigned c)
{
	size_t i = row * t->ncols + c;

	return i < t->ncells ? t->cells[i] : "";
}

static unsigned gap(const struct tab_col *c)
{
	return c->gap ? c->gap : 1;
}

int tab_render(const struct tab *t, unsigned width, void (*out)(void *arg, bool head, const char *line),
               void *arg, char *hidden, size_t len)
{
	size_t rows = tab_rows(t) + (t && t->ncells % t->ncols ? 1 : 0), w[64], total = 0, cap;
	bool shown[64];
	int nhidden = 0;
	char *line;

	if (hidden && len)
		hidden[0] = '\0';
	if (!t || t->oom || t->ncols > 64)
		return -ENOMEM;
	for (unsigned c = 0; c < t->ncols; c++) {
		w[c] = strlen(t->cols[c].head);
		for (size_t r = 0; r < rows; r++) {
			size_t l = strlen(cell(t, r, c));

			if (l > w[c])
				w[c] = l;
		}
		shown[c] = true;
		total += w[c] + (c ? gap(&t->cols[c]) : 0);
	}
	/* too wide: leave out the column of the highest priority number (the
	 * rightmost of equals) until it fits or only priority 0 is left */
	while (width && total > width) {
		int pick = -1;

		for (unsigned c = 0; c < t->ncols; c++)
			if (shown[c] && t->cols[c].prio &&
			    (pick < 0 || t->cols[c].prio >= t->cols[pick].prio))
				pick = (int)c;
		if (pick < 0)
			break;
		shown[pick] = false;
		total -= w[pick] + gap(&t->cols[pick]);
		nhidden++;
		if (hidden && len) {
			size_t o = strlen(hidden);

			snprintf(hidden + o, len - o, "%s%s", o ? " " : "", t->cols[pick].head);
		}
	}
	cap = 1;
	for (unsigned c = 0; c < t->ncols; c++)
		cap += w[c] + gap(&t->cols[c]);
	line = malloc(cap);
	if (!line)
		return -ENOMEM;
	for (size_t r = 0; r <= rows; r++) {
		size_t o = 0;
		bool first = true;

		for (unsigned c = 0; c < t->ncols; c++) {
			const char *s = r ? cell(t, r - 1, c) : t->cols[c].head;
			size_t l = strlen(s), pad = w[c] - l;

			if (!shown[c])
				continue;
			if (!first)
				for (unsigned g = 0; g < gap(&t->cols[c]); g++)
					line[o++] = ' ';
			first = false;
			if (t->cols[c].align == TAB_RIGHT)
				for (; pad; pad--)
					line[o++] = ' ';
			memcpy(line + o, s, l);
			o += l;
			if (t->cols[c].align == TAB_LEFT)
				for (; pad; pad--)
					line[o++] = ' ';
		}
		while (o && line[o - 1] == ' ')
			o--;
		line[o] = '\0';
		out(arg, r == 0, line);
	}
	free(line);
	return nhidden;
}

static void to_stdout(void *arg, bool head, const char *line)
{
	(void)arg, (void)head;
	puts(line);
}

int tab_print(const struct tab *t)
{
	int rc = tab_render(t, 0, to_stdout, NULL, NULL, 0);

	if (rc < 0)
		fprintf(stderr, "nvmefsctl: out of memory\n");
	return rc < 0 ? rc : 0;
}

/* table.h - nvmefsctl's tables: every column as wide as its widest cell
 * (header included), so that a long name moves the columns after it rather
 * than breaking them; under a width limit whole columns are hidden, those
 * of the highest priority number first, and the caller is told which, to
 * say so on the screen.
 *
 * Threading: none (one table, one thread).  Ownership: a table copies its
 * cells; tab_free frees them.  Errors: an allocation that fails makes the
 * table remember it; tab_render then returns -ENOMEM.  Prefix tab_.
 */
#ifndef NVMEFS_CLI_TABLE_H
#define NVMEFS_CLI_TABLE_H

#include <stdbool.h>
#include <stddef.h>

enum tab_align { TAB_LEFT, TAB_RIGHT };

struct tab_col {
	const char *head;
	enum tab_align align;
	unsigned prio; /* 0: never hidden; under a width limit the highest goes first */
	unsigned gap;  /* spaces before the column (0: one); none before the first */
};

struct tab;

/* A table of the ncols columns cols (kept by pointer: static tables), or
 * NULL when there is no memory. */
struct tab *tab_new(const struct tab_col *cols, unsigned ncols);
void tab_free(struct tab *t);

/* The next cell: left to right, a row after ncols cells. */
void tab_cell(struct tab *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The rows so far. */
size_t tab_rows(const struct tab *t);

/* Each line of the table, the header first (head true), no wider than width
 * columns (0: no limit), to out(arg, head, line), without a newline and
 * without trailing blanks.  Columns that do not fit are left out, their
 * headers listed in hidden (len bytes, space-separated; may be NULL).
 * Returns how many were left out, or -ENOMEM. */
int tab_render(const struct tab *t, unsigned width, void (*out)(void *arg, bool head, const char *line),
               void *arg, char *hidden, size_t len);

/* tab_render to stdout, one line each, without a width limit. */
int tab_print(const struct tab *t);

#endif

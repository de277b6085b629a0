/* ctl.h - nvmefsctl's side of the admin socket: one request, one reply
 * (newline-delimited JSON, src/daemon/admin.h), and reading the reply.
 * Prefix ctl_ for the exchange, j* for the JSON readers. */
#ifndef NVMEFS_CLI_CTL_H
#define NVMEFS_CLI_CTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define CTL_TIMEOUT_MS 10000
#define CTL_REPLY_MAX  (64u << 20)

/* nvmefsctl's exit codes */
enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

extern const char *prog;                /* for messages */
extern volatile sig_atomic_t stop_flag; /* SIGINT or SIGTERM came: stop */

/* Send the request object req (consumed) and parse the reply.  Returns an
 * exit code; on EXIT_OK *rep is the reply (ok true).  Errors are printed.
 * Nothing is sent (EXIT_CONNECT) to a socket whose directory another user
 * could change (not root's or the caller's, or writable by group or others
 * unless sticky and root's) or whose listener runs as neither root nor the
 * caller (SO_PEERCRED). */
int ctl_exchange(const char *sock, json_object *req, json_object **rep);
/* Send {"cmd": cmd[, "controller": ctrl]}: see ctl_exchange. */
int ctl_call(const char *sock, const char *cmd, const char *ctrl, json_object **rep);

/* SIGINT and SIGTERM set stop_flag (and interrupt ctl_nap). */
void ctl_catch_signals(void);
/* Sleep for secs unless a signal ends it. */
void ctl_nap(double secs);

/* strcmp, but a run of digits compares as the number it is: nvme0n2
 * before nvme0n10, nvme2 before nvme10 (the order people count in). */
int ctl_natcmp(const char *a, const char *b);

/* member k of object o, or NULL */
json_object *jget(json_object *o, const char *k);
const char *jstr(json_object *o, const char *k); /* "-" when absent */
uint64_t ju64(json_object *o, const char *k);    /* 0 when absent */
bool jbool(json_object *o, const char *k);
double jdbl(json_object *o, const char *k);      /* NAN when absent */
size_t jlen(json_object *a);                     /* 0 for a non-array */
json_object *jidx(json_object *a, size_t i);

#endif

/* options.h - nvmefsd's command line.
 *
 *   -c, --config FILE   config file (default NVMEFS_SYSCONFDIR/nvmefs/nvmefs.conf)
 *   -f, --foreground    accepted and ignored (the daemon never detaches)
 *       --check-config  validate the config, print the effective one, exit
 *       --check-adopt   with --state-fd N and --ns-table T: whether this
 *                       binary would adopt the connection the state record
 *                       on fd N describes (upgrade.h), exit 0 if so
 *       --has-controllers  exit 1, saying so on stderr, when the config loads
 *                       and names no controller (allow_no_controller = yes);
 *                       else 0, a config that does not load included (the
 *                       start reports its errors): nvmefs.service's
 *                       ExecCondition=, which skips the start on 1
 *   -h, --help          usage on stdout, exit 0
 *   -V, --version       version on stdout, exit 0
 * A bad option or a stray argument prints usage on stderr: exit 2.
 * The exit statuses (nvmefsd(8), EXIT STATUS) are distinct per cause, so
 * that a service manager can tell them apart (RestartPreventExitStatus=).
 */
#ifndef NVMEFS_OPTIONS_H
#define NVMEFS_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#define OPT_DEFAULT_CONFIG NVMEFS_SYSCONFDIR "/nvmefs/nvmefs.conf"

enum opt_exit {
	OPT_EXIT_OK = 0,        /* stopped cleanly; --help, --version, a valid --check-config */
	OPT_EXIT_FAILURE = 1,   /* start-up or a restart in place failed; --check-adopt: no */
	OPT_EXIT_USAGE = 2,     /* a bad option or a stray argument */
	OPT_EXIT_ABANDONED = 3, /* a stop ended requests with EIO or left a reactor or a
	                         * controller it could not stop */
	OPT_EXIT_CONFIG = 78,   /* the config is invalid or unreadable, or the mountpoint it
	                         * names refused at start (sysexits' EX_CONFIG) */
};

enum opt_action {
	OPT_RUN,          /* start the daemon */
	OPT_CHECK_CONFIG, /* return opt_check_config(o.config) */
	OPT_CHECK_ADOPT,  /* return upg_check_adopt_main(config, state_fd, ns_table) */
	OPT_HAS_CONTROLLERS, /* return opt_has_controllers(o.config) */
	OPT_EXIT,         /* done already: exit with o.exit_code */
};

struct opt {
	const char *config; /* points into argv, or OPT_DEFAULT_CONFIG */
	bool foreground;
	int state_fd;         /* --state-fd, -1 when not given */
	const char *ns_table; /* --ns-table, NULL when not given */
	enum opt_action action;
	int exit_code; /* for OPT_EXIT: 0 after --help/--version, 2 after a usage error */
};

/* Fills *o from argv.  Prints help or version on stdout, or a usage error on
 * stderr, itself.  Returns 0, or -EINVAL for a usage error (then o->action is
 * OPT_EXIT and o->exit_code 2).  May be called more than once. */
int opt_parse(int argc, char **argv, struct opt *o);

/* Loads path; prints the effective config on stdout and returns 0, or prints
 * every error on stderr and returns OPT_EXIT_CONFIG (OPT_EXIT_FAILURE if
 * stdout cannot be written): an exit status. */
int opt_check_config(const char *path);

/* --has-controllers: OPT_EXIT_FAILURE (1), with a line on stderr, when path
 * loads and names no controller; OPT_EXIT_OK otherwise, also when it does not
 * load (silently: the start reports why).  An exit status. */
int opt_has_controllers(const char *path);

void opt_usage(FILE *out, const char *prog);

#endif

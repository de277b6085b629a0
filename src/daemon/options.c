/* options.c - see options.h */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

enum {
	OPT_LONG_CHECK_CONFIG = 256,
	OPT_LONG_CHECK_ADOPT,
	OPT_LONG_STATE_FD,
	OPT_LONG_NS_TABLE,
	OPT_LONG_HAS_CONTROLLERS,
};

void opt_usage(FILE *out, const char *prog)
{
	fprintf(out,
	        "usage: %s [-f] [-c FILE] [--check-config]\n"
	        "  -c, --config FILE   config file (default %s)\n"
	        "  -f, --foreground    accepted and ignored: the daemon never detaches\n"
	        "      --check-config  check the config file, print the effective configuration\n"
	        "                      (every key, defaults filled in) and exit: 0 valid, 78 not\n"
	        "      --has-controllers  exit 1, saying so, when the config validly names no\n"
	        "                      controller (allow_no_controller = yes), else 0\n"
	        "      --check-adopt --state-fd N --ns-table T\n"
	        "                      whether this binary would take over the FUSE connection\n"
	        "                      the state record on fd N describes, with the namespaces\n"
	        "                      T (what nvmefsctl restart asks before it re-executes)\n"
	        "  -h, --help          print this help and exit\n"
	        "  -V, --version       print the version and exit\n"
	        "\n"
	        "Exit status: 0 stopped cleanly, 1 start-up or a restart in place failed,\n"
	        "2 usage, 3 a stop ended requests with EIO, 78 the config (or a path it\n"
	        "names) refused.\n",
	        prog, OPT_DEFAULT_CONFIG);
}

int opt_parse(int argc, char **argv, struct opt *o)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"check-config", no_argument, NULL, OPT_LONG_CHECK_CONFIG},
	    {"check-adopt", no_argument, NULL, OPT_LONG_CHECK_ADOPT},
	    {"has-controllers", no_argument, NULL, OPT_LONG_HAS_CONTROLLERS},
	    {"state-fd", required_argument, NULL, OPT_LONG_STATE_FD},
	    {"ns-table", required_argument, NULL, OPT_LONG_NS_TABLE},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *prog = argc > 0 && argv[0] ? argv[0] : "nvmefsd";
	const char *slash = strrchr(prog, '/');
	bool help = false, version = false;
	int ch;

	if (slash)
		prog = slash + 1;
	*o = (struct opt){.config = OPT_DEFAULT_CONFIG, .action = OPT_RUN, .state_fd = -1};
	optind = 0; /* glibc: a full reset, so opt_parse can run again */
	while ((ch = getopt_long(argc, argv, "+c:fhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config = optarg;
			break;
		case 'f':
			o->foreground = true;
			break;
		case OPT_LONG_CHECK_CONFIG:
			o->action = OPT_CHECK_CONFIG;
			break;
		case OPT_LONG_CHECK_ADOPT:
			o->action = OPT_CHECK_ADOPT;
			break;
		case OPT_LONG_HAS_CONTROLLERS:
			o->action = OPT_HAS_CONTROLLERS;
			break;
		case OPT_LONG_STATE_FD: {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 0 || v > 65535) {
				fprintf(stderr, "%s: --state-fd: not a file descriptor: '%s'\n", prog,
				        optarg);
				goto usage;
			}
			o->state_fd = (int)v;
			break;
		}
		case OPT_LONG_NS_TABLE:
			o->ns_table = optarg;
			break;
		case 'h':
			help = true;
			break;
		case 'V':
			version = true;
			break;
		default:
			goto usage; /* getopt has said what was wrong */
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		goto usage;
	}
	if (help) {
		opt_usage(stdout, prog);
		o->action = OPT_EXIT;
	} else if (version) {
		printf("nvmefsd %s\n", NVMEFS_VERSION);
		o->action = OPT_EXIT;
	}
	return 0;
usage:
	opt_usage(stderr, prog);
	o->action = OPT_EXIT;
	o->exit_code = OPT_EXIT_USAGE;
	return -EINVAL;
}

int opt_check_config(const char *path)
{
	struct cfg *cfg;

	if (cfg_load(path, &cfg, stderr))
		return OPT_EXIT_CONFIG;
	cfg_print(cfg, stdout);
	cfg_free(cfg);
	return fflush(stdout) ? OPT_EXIT_FAILURE : OPT_EXIT_OK;
}

int opt_has_controllers(const char *path)
{
	FILE *quiet = fopen("/dev/null", "we");
	struct cfg *cfg;
	int rc;

	/* errors are for the start (--check-config) to report: not here */
	if (!quiet)
		return OPT_EXIT_OK;
	rc = cfg_load(path, &cfg, quiet);
	fclose(quiet);
	if (rc)
		return OPT_EXIT_OK;
	rc = cfg->nr_ctrls ? OPT_EXIT_OK : OPT_EXIT_FAILURE;
	if (rc)
		fprintf(stderr,
		        "no controllers configured in %s (allow_no_controller = yes): nothing to "
		        "serve; add a [controller NAME] section (nvmefs.conf(5))\n",
		        path);
	cfg_free(cfg);
	return rc;
}

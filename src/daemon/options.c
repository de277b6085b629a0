/* options.c - see options.h */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "config.h"

enum { OPT_LONG_CHECK_CONFIG = 256 };

void opt_usage(FILE *out, const char *prog)
{
	fprintf(out,
	        "usage: %s [-f] [-c FILE] [--check-config]\n"
	        "  -c, --config FILE   config file (default %s)\n"
	        "  -f, --foreground    stay in the foreground (do not detach)\n"
	        "      --check-config  check the config file, print the effective configuration\n"
	        "                      (every key, defaults filled in) and exit: 0 valid, 1 not\n"
	        "  -h, --help          print this help and exit\n"
	        "  -V, --version       print the version and exit\n",
	        prog, OPT_DEFAULT_CONFIG);
}

int opt_parse(int argc, char **argv, struct opt *o)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"check-config", no_argument, NULL, OPT_LONG_CHECK_CONFIG},
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
	*o = (struct opt){.config = OPT_DEFAULT_CONFIG, .action = OPT_RUN};
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
	o->exit_code = 2;
	return -EINVAL;
}

int opt_check_config(const char *path)
{
	struct cfg *cfg;

	if (cfg_load(path, &cfg, stderr))
		return 1;
	cfg_print(cfg, stdout);
	cfg_free(cfg);
	return fflush(stdout) ? 1 : 0;
}

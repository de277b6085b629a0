/* main.c - nvmefsd: for now only the command line and --check-config. */
#include "options.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	struct opt o;

	opt_parse(argc, argv, &o);
	switch (o.action) {
	case OPT_EXIT:
		return o.exit_code;
	case OPT_CHECK_CONFIG:
		return opt_check_config(o.config);
	case OPT_RUN:
	default:
		fprintf(stderr, "nvmefsd: running the daemon is not implemented yet\n");
		return 1;
	}
}

/* fuzz_config.c - libFuzzer target: a whole config file's text.
 *
 * Any input must either load or be refused with a message; never crash, leak
 * or read out of bounds.  A config that loads must print as a file that loads
 * again to an equal config (cfg_print's contract), so the printer and the
 * parser are checked against each other too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!devnull)
		devnull = fopen("/dev/null", "w");
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0; /* the loader takes a C string: stop at the first NUL */
	struct cfg *cfg = NULL;
	if (cfg_load_string("fuzz.conf", text, &cfg, devnull) == 0) {
		char *out = NULL;
		size_t out_len = 0;
		FILE *m = open_memstream(&out, &out_len);
		if (!m)
			abort();
		cfg_print(cfg, m);
		fclose(m);
		struct cfg *again = NULL;
		if (cfg_load_string("printed.conf", out, &again, stderr) != 0) {
			fprintf(stderr, "printed config does not load:\n%s\n", out);
			abort();
		}
		if (!cfg_equal(cfg, again)) {
			fprintf(stderr, "printed config loads to a different config:\n%s\n", out);
			abort();
		}
		cfg_free(again);
		free(out);
		cfg_free(cfg);
	}
	free(text);
	return 0;
}

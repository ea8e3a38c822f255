/*
 * fuzz_config: the configuration parser (server/config.c): a redis.conf
 * syntax file (quotes, escapes, units, every option's checks) and the
 * command line's --name value form.
 *
 * The first byte picks the form. A file is read from memory
 * (cfg_load_stream). A command line is the rest split at NUL bytes; one
 * that names a file first is skipped, as a fuzzer must not open files.
 * Whatever was accepted must then list itself (CONFIG GET *) and free
 * cleanly. A failure must say why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"

static void visit(void *arg, const char *name, const char *value)
{
	size_t *n = arg;
	*n += strlen(name) + strlen(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct srv_config c;
	char err[1024];
	int rc;

	if (size < 1)
		return 0;
	err[0] = '\0';
	cfg_defaults(&c);
	if (data[0] & 1) {
		FILE *f = fmemopen((void *)(data + 1), size - 1, "r");
		if (!f) {
			cfg_free(&c);
			return 0;
		}
		rc = cfg_load_stream(&c, f, "fuzz.conf", err, sizeof(err));
		fclose(f);
	} else {
		char *buf = malloc(size);
		char *argv[256];
		int argc = 0;
		if (!buf)
			abort();
		memcpy(buf, data + 1, size - 1);
		buf[size - 1] = '\0';
		for (char *p = buf; p < buf + size && argc < 256; p += strlen(p) + 1)
			argv[argc++] = p;
		if (argc > 0 && strncmp(argv[0], "--", 2) != 0) {
			free(buf);
			cfg_free(&c);
			return 0;
		}
		rc = cfg_parse_argv(&c, argc, argv, err, sizeof(err));
		free(buf);
	}
	if (rc != 0 && err[0] == '\0')
		abort(); /* an error with no reason */
	size_t n = 0;
	cfg_get(&c, "*", visit, &n);
	cfg_free(&c);
	return 0;
}

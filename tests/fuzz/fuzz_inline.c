/*
 * fuzz_inline: the inline request splitter (resp/inline.c) on its own.
 *
 * The input is one line (cut at its first NUL or '\n', which request.c
 * never passes). Every call gets an output buffer of exactly the size the
 * contract promises suffices (len - pos + 1), so an argument that grew past
 * its source is an ASan report. Then a round trip: each argument quoted
 * back with \xHH escapes and the line split again must give the same
 * arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp_internal.h"

#define MAX_ARGS (1 << 17) /* more than any line libFuzzer makes has bytes */

struct args {
	int n;
	char *v[MAX_ARGS];
	size_t len[MAX_ARGS];
};

/* 1 if the whole line split, 0 on unbalanced quotes. */
static int split(const char *line, size_t len, struct args *a)
{
	size_t pos = 0;
	a->n = 0;
	for (;;) {
		char *out = malloc(len - pos + 1);
		size_t outlen = 0;
		if (!out)
			abort();
		int r = resp_inline_next(line, len, &pos, out, &outlen);
		if (r <= 0) {
			free(out);
			return r == 0;
		}
		if (pos > len || outlen > len || out[outlen] != '\0')
			abort();
		if (a->n == MAX_ARGS)
			abort(); /* an argument takes at least one byte of the line */
		a->v[a->n] = out;
		a->len[a->n] = outlen;
		a->n++;
	}
}

static void args_free(struct args *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	a->n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct args a, b;
	size_t len = 0;
	while (len < size && data[len] != '\0' && data[len] != '\n')
		len++;
	char *line = malloc(len ? len : 1);
	if (!line)
		abort();
	memcpy(line, data, len);
	int ok = split(line, len, &a);
	free(line);
	if (!ok || a.n == 0) {
		args_free(&a);
		return 0;
	}

	size_t cap = 0;
	for (int i = 0; i < a.n; i++)
		cap += 4 * a.len[i] + 3;
	char *q = malloc(cap), *w = q;
	if (!q)
		abort();
	for (int i = 0; i < a.n; i++) {
		if (i)
			*w++ = ' ';
		*w++ = '"';
		for (size_t k = 0; k < a.len[i]; k++)
			w += sprintf(w, "\\x%02x", (unsigned char)a.v[i][k]);
		*w++ = '"';
	}
	if (!split(q, (size_t)(w - q), &b) || b.n != a.n)
		abort();
	for (int i = 0; i < a.n; i++)
		if (b.len[i] != a.len[i] || memcmp(b.v[i], a.v[i], a.len[i]) != 0)
			abort();
	free(q);
	args_free(&a);
	args_free(&b);
	return 0;
}

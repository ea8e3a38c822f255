/*
 * json.c: streaming JSON writer (json.h).
 */
#include "bench/json.h"

#include <math.h>

void bench_json_init(struct bench_json *j, FILE *f, bool pretty)
{
	j->f = f;
	j->pretty = pretty;
	j->depth = 0;
	j->first[0] = true;
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* Separator, indentation and key before a value. */
static void before(struct bench_json *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (j->pretty && j->depth > 0) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	if (key) {
		put_string(j->f, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void open_(struct bench_json *j, const char *key, char c)
{
	before(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < BENCH_JSON_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_(struct bench_json *j, char c)
{
	bool empty = j->first[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (j->pretty && !empty) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	fputc(c, j->f);
	if (j->depth == 0 && j->pretty)
		fputc('\n', j->f);
}

void bench_json_obj(struct bench_json *j, const char *key)
{
	open_(j, key, '{');
}

void bench_json_arr(struct bench_json *j, const char *key)
{
	open_(j, key, '[');
}

void bench_json_end_obj(struct bench_json *j)
{
	close_(j, '}');
}

void bench_json_end_arr(struct bench_json *j)
{
	close_(j, ']');
}

void bench_json_str(struct bench_json *j, const char *key, const char *v)
{
	before(j, key);
	if (v)
		put_string(j->f, v);
	else
		fputs("null", j->f);
}

void bench_json_num(struct bench_json *j, const char *key, double v)
{
	before(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.12g", v);
	else
		fputs("null", j->f);
}

void bench_json_int(struct bench_json *j, const char *key, int64_t v)
{
	before(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void bench_json_uint(struct bench_json *j, const char *key, uint64_t v)
{
	before(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void bench_json_bool(struct bench_json *j, const char *key, bool v)
{
	before(j, key);
	fputs(v ? "true" : "false", j->f);
}

void bench_json_null(struct bench_json *j, const char *key)
{
	before(j, key);
	fputs("null", j->f);
}

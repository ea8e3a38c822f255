/*
 * json.h: a small streaming JSON writer for the --json output and the
 * sweep's JSON lines. Keys are given with each value inside an object and
 * are NULL inside an array; commas and nesting are tracked here. Numbers
 * that are not finite are written as null.
 *
 * Threads: a writer belongs to one thread.
 */
#ifndef RCKV_BENCH_JSON_H
#define RCKV_BENCH_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_JSON_DEPTH 16

struct bench_json {
	FILE *f;
	bool pretty;   /* newlines and indentation; false: one line */
	int depth;
	bool first[BENCH_JSON_DEPTH];
};

void bench_json_init(struct bench_json *j, FILE *f, bool pretty);
void bench_json_obj(struct bench_json *j, const char *key);   /* { */
void bench_json_arr(struct bench_json *j, const char *key);   /* [ */
void bench_json_end_obj(struct bench_json *j);                /* } */
void bench_json_end_arr(struct bench_json *j);                /* ] */
void bench_json_str(struct bench_json *j, const char *key, const char *v); /* NULL: null */
void bench_json_num(struct bench_json *j, const char *key, double v);
void bench_json_int(struct bench_json *j, const char *key, int64_t v);
void bench_json_uint(struct bench_json *j, const char *key, uint64_t v);
void bench_json_bool(struct bench_json *j, const char *key, bool v);
void bench_json_null(struct bench_json *j, const char *key);

#endif

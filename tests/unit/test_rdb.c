/*
 * test_rdb: server/rdb.c's RESTORE decoding of lengths. A payload whose
 * declared length runs past its own end is malformed (RDB_EFORMAT, Redis's
 * "Bad data format") even when the length is also over the caller's
 * limit; only a string that is really there and too long is RDB_ETOOBIG.
 * LZF's declared plain length is bounded by the most a stream of its
 * compressed length can expand (88 times).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/rdb.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failures++;                                              \
		}                                                                \
	} while (0)

/* body + RDB version 10 + CRC-64: a payload whose footer is right. */
static size_t seal(const unsigned char *body, size_t len, unsigned char *out)
{
	memcpy(out, body, len);
	out[len] = 10;
	out[len + 1] = 0;
	uint64_t crc = rdb_crc64(0, out, len + 2);
	for (int i = 0; i < 8; i++)
		out[len + 2 + i] = (unsigned char)(crc >> (8 * i));
	return len + 10;
}

static int restore(const unsigned char *body, size_t len, size_t max_len)
{
	unsigned char buf[4096];
	size_t n = seal(body, len, buf);
	struct rdb_value v;
	int rc = rdb_restore((const char *)buf, n, max_len, &v);
	if (rc == 0)
		rdb_value_free(&v);
	return rc;
}

static void test_lengths_past_the_end(void)
{
	/* 32-bit and 64-bit lengths of ~4 GB and ~2^64 with no bytes after. */
	static const unsigned char l32[] = { 0x00, 0x80, 0xff, 0xff, 0xff, 0xff };
	static const unsigned char l64[] = { 0x00, 0x81, 0xff, 0xff, 0xff, 0xff,
					     0xff, 0xff, 0xff, 0xff };
	CHECK(restore(l32, sizeof(l32), 1024) == RDB_EFORMAT);
	CHECK(restore(l64, sizeof(l64), 1024) == RDB_EFORMAT);
	CHECK(restore(l32, sizeof(l32), SIZE_MAX) == RDB_EFORMAT);
	/* 10 declared, 5 there. */
	static const unsigned char short_[] = { 0x00, 0x0a, 'a', 'b', 'c', 'd', 'e' };
	CHECK(restore(short_, sizeof(short_), 1024) == RDB_EFORMAT);
}

static void test_too_big_when_there(void)
{
	/* 100 bytes (14-bit length 0x40 0x64), all there. */
	unsigned char b[3 + 100] = { 0x00, 0x40, 100 };
	memset(b + 3, 'x', 100);
	CHECK(restore(b, sizeof(b), 99) == RDB_ETOOBIG);
	CHECK(restore(b, sizeof(b), 100) == 0);
}

static void test_lzf_declared_length(void)
{
	/* LZF (0xc3), 5 compressed bytes, 2^31-1 plain: 5 bytes cannot hold it. */
	static const unsigned char huge[] = { 0x00, 0xc3, 0x05, 0x80, 0x7f, 0xff, 0xff, 0xff,
					      'a', 'b', 'c', 'd', 'e' };
	CHECK(restore(huge, sizeof(huge), 1024) == RDB_EFORMAT);
	CHECK(restore(huge, sizeof(huge), SIZE_MAX) == RDB_EFORMAT);
	/* A real stream: 49 'a's (Redis's DUMP of it, test_keyspace.py's GOLDEN),
	 * decoded; with a limit below 49 it is too big, not malformed. */
	static const unsigned char a49[] = { 0x00, 0xc3, 0x09, 0x31, 0x01, 'a', 'a', 0xe0,
					     0x24, 0x00, 0x01, 'a', 'a' };
	CHECK(restore(a49, sizeof(a49), 1024) == 0);
	CHECK(restore(a49, sizeof(a49), 48) == RDB_ETOOBIG);
}

int main(void)
{
	test_lengths_past_the_end();
	test_too_big_when_there();
	test_lzf_declared_length();
	if (failures) {
		fprintf(stderr, "test_rdb: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_rdb: ok\n");
	return 0;
}

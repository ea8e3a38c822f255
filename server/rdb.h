/*
 * rdb: one value in Redis's RDB encoding, as DUMP writes it and RESTORE
 * reads it (DESIGN.md section 4: commands behave as Redis 7 documents
 * them; `redis-cli --rdb`-style migrations move values between Redis and
 * rckv with DUMP and RESTORE).
 *
 * A DUMP payload is
 *   <type byte> <the value in RDB encoding> <RDB version: 2 bytes, LE>
 *   <CRC-64 of all the bytes before it: 8 bytes, LE>
 * with RDB version 10, the one Redis 7.0 writes, and Redis's CRC-64
 * ("Jones": polynomial 0xad93d23594c935a9, reflected, initial value 0,
 * check value of "123456789" 0xe9c6d914c4b8d9ca).
 *
 * A string value is written as Redis writes it, byte for byte:
 *  - the canonical decimal text of an integer in [-2^31, 2^31) of at most
 *    11 bytes as that integer (1, 2 or 4 bytes, little-endian);
 *  - else, over 20 bytes, LZF-compressed when that saves at least 4 bytes
 *    (liblzf, the library Debian's redis-server links: the same bytes);
 *  - else its length (RDB length encoding) and its bytes.
 *
 * Types are rows of a table in rdb.c (type byte -> name, load, save).
 * Only strings are stored by rckv so far: a payload of another type is
 * recognized and refused with RDB_ETYPE, naming the type. A type that
 * rckv gains later adds its row, its struct rdb_value member, and its
 * load and save functions over the length, string and number codecs
 * rdb.c already has (ziplist and listpack blobs are strings in RDB).
 *
 * Pure functions: no global state, any thread.
 */
#ifndef RCKV_SRV_RDB_H
#define RCKV_SRV_RDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_VERSION 10 /* Redis 7.0's; RESTORE accepts payloads up to it */

/* Type bytes (Redis's RDB_TYPE_*). */
enum {
	RDB_TYPE_STRING = 0,
	RDB_TYPE_LIST = 1,
	RDB_TYPE_SET = 2,
	RDB_TYPE_ZSET = 3,
	RDB_TYPE_HASH = 4,
	RDB_TYPE_ZSET_2 = 5,
	RDB_TYPE_MODULE_2 = 7,
	RDB_TYPE_HASH_ZIPMAP = 9,
	RDB_TYPE_LIST_ZIPLIST = 10,
	RDB_TYPE_SET_INTSET = 11,
	RDB_TYPE_ZSET_ZIPLIST = 12,
	RDB_TYPE_HASH_ZIPLIST = 13,
	RDB_TYPE_LIST_QUICKLIST = 14,
	RDB_TYPE_STREAM_LISTPACKS = 15,
	RDB_TYPE_HASH_LISTPACK = 16,
	RDB_TYPE_ZSET_LISTPACK = 17,
	RDB_TYPE_LIST_QUICKLIST_2 = 18,
	RDB_TYPE_STREAM_LISTPACKS_2 = 19,
};

/* Results (negative, in rdb's own range). */
enum {
	RDB_EVERSION = -3000, /* too short, a newer RDB version, or a wrong CRC:
				 "DUMP payload version or checksum are wrong" */
	RDB_EFORMAT = -3001,  /* the value does not decode: "Bad data format" */
	RDB_ETYPE = -3002,    /* a type rckv does not store (yet) */
	RDB_ETOOBIG = -3003,  /* a string longer than the caller allows */
	RDB_ENOMEM = -3004,
};

/* A decoded value. type says which member holds it. */
struct rdb_value {
	int type;           /* RDB_TYPE_* of the payload (RDB_ETYPE: what it was) */
	char *str;          /* RDB_TYPE_STRING: malloc'd (NULL when len is 0) */
	size_t len;
};

/* A growable output buffer (malloc'd p; free it). */
struct rdb_buf {
	char *p;
	size_t len, cap;
};

/* The type's name as TYPE says it ("string", "hash", ...), "unknown" for a
 * byte that is no type. */
const char *rdb_type_name(int type);

/*
 * rdb_dump_string - the DUMP payload of a string value, appended to out.
 * Returns 0 or RDB_ENOMEM (out then holds a partial payload: free it).
 */
int rdb_dump_string(const char *v, size_t len, struct rdb_buf *out);

/*
 * rdb_restore - decode a DUMP payload. Checks length, version and CRC
 * first (RDB_EVERSION), then decodes the value (RDB_EFORMAT; RDB_ETYPE for
 * a type rckv does not store, with v->type set; RDB_ETOOBIG for a string
 * over max_len). On 0, v holds the value: free it with rdb_value_free.
 * Bytes after the value and before the footer are ignored, as Redis does.
 */
int rdb_restore(const char *p, size_t len, size_t max_len, struct rdb_value *v);
void rdb_value_free(struct rdb_value *v);

/* The length of the value's RDB encoding without the type byte and the
 * footer (DEBUG OBJECT's serializedlength). */
size_t rdb_string_serialized_len(const char *v, size_t len);

/* Redis's CRC-64 (above) of p[0..len), continuing from crc (0 to start). */
uint64_t rdb_crc64(uint64_t crc, const void *p, size_t len);

#endif

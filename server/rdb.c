/*
 * rdb.c: a value in Redis's RDB encoding (rdb.h). Written from the RDB
 * format as documented and as redis-server 7.0.15 writes it (every byte
 * checked against its DUMP); none of Redis's code is used. LZF is
 * liblzf's, as in Debian's redis-server.
 *
 * The codecs, each a pair of functions over a cursor (struct rd) or a
 * buffer (struct rdb_buf):
 *   length    1, 2, 5 or 9 bytes: 00xxxxxx | 01xxxxxx xxxxxxxx (14 bits,
 *             big-endian) | 0x80 + 32 bits BE | 0x81 + 64 bits BE;
 *             11xxxxxx is not a length but a string encoding:
 *   string    a length and bytes; or 0xC0/0xC1/0xC2 + an integer of 1, 2
 *             or 4 bytes LE (its decimal text is the string); or 0xC3 +
 *             compressed length + plain length + LZF data.
 * A type's row (types[] below) loads and saves a value with them.
 */
#include "server/rdb.h"

#include <errno.h>
#include <liblzf/lzf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/strutil.h"

/* ---- CRC-64 (Jones, reflected): one table, built before main ---- */

#define CRC64_POLY_REFLECTED 0x95ac9329ac4bc9b5ull /* 0xad93d23594c935a9 bit-reversed */

static uint64_t crc_table[256]; /* written once by crc_init(), read-only after */

__attribute__((constructor)) static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ ((c & 1) ? CRC64_POLY_REFLECTED : 0);
		crc_table[i] = c;
	}
}

uint64_t rdb_crc64(uint64_t crc, const void *p, size_t len)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < len; i++)
		crc = crc_table[(crc ^ s[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

/* ---- output ---- */

static int put(struct rdb_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return RDB_ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static int put_byte(struct rdb_buf *b, unsigned char c)
{
	return put(b, &c, 1);
}

/* The length encoding; its size in bytes is len_size(). */
static int put_len(struct rdb_buf *b, uint64_t len)
{
	unsigned char h[9];
	size_t n;
	if (len < 64) {
		h[0] = (unsigned char)len;
		n = 1;
	} else if (len < 16384) {
		h[0] = (unsigned char)(0x40 | (len >> 8));
		h[1] = (unsigned char)len;
		n = 2;
	} else if (len <= UINT32_MAX) {
		h[0] = 0x80;
		for (int i = 0; i < 4; i++)
			h[1 + i] = (unsigned char)(len >> (24 - 8 * i));
		n = 5;
	} else {
		h[0] = 0x81;
		for (int i = 0; i < 8; i++)
			h[1 + i] = (unsigned char)(len >> (56 - 8 * i));
		n = 9;
	}
	return put(b, h, n);
}

static size_t len_size(uint64_t len)
{
	return len < 64 ? 1 : len < 16384 ? 2 : len <= UINT32_MAX ? 5 : 9;
}

/* String encodings after the 11 prefix (Redis's RDB_ENC_*). */
enum { ENC_INT8 = 0, ENC_INT16 = 1, ENC_INT32 = 2, ENC_LZF = 3 };
#define ENC_PREFIX 0xC0

/* The integer encoding of s, if s is the canonical text of an integer that
 * fits 32 bits: its bytes into h, returns their count (0: none). */
static size_t int_encoding(const char *s, size_t len, unsigned char h[5])
{
	long long v;
	if (len == 0 || len > 11 || srv_str2ll(s, len, &v) != 0)
		return 0;
	/* srv_str2ll takes only canonical text ("-0", "007", "+1" are not),
	 * which is what Redis's round trip through its decimal text keeps. */
	if (v >= -128 && v <= 127) {
		h[0] = ENC_PREFIX | ENC_INT8;
		h[1] = (unsigned char)v;
		return 2;
	}
	if (v >= -32768 && v <= 32767) {
		h[0] = ENC_PREFIX | ENC_INT16;
		h[1] = (unsigned char)v;
		h[2] = (unsigned char)((unsigned long long)v >> 8);
		return 3;
	}
	if (v >= -2147483648LL && v <= 2147483647LL) {
		h[0] = ENC_PREFIX | ENC_INT32;
		for (int i = 0; i < 4; i++)
			h[1 + i] = (unsigned char)((unsigned long long)v >> (8 * i));
		return 5;
	}
	return 0;
}

/* Redis compresses strings over 20 bytes, and keeps the result only when
 * it saves at least 4 bytes. Returns 0 and *out (malloc'd) with *clen, or
 * 1 when not worth it, or RDB_ENOMEM. */
#define LZF_MIN_LEN 21
static int lzf_try(const char *s, size_t len, char **out, size_t *clen)
{
	*out = NULL;
	if (len < LZF_MIN_LEN || len > UINT32_MAX)
		return 1;
	size_t cap = len - 4;
	char *buf = malloc(cap + 1);
	if (!buf)
		return RDB_ENOMEM;
	unsigned n = lzf_compress(s, (unsigned)len, buf, (unsigned)cap);
	if (n == 0) {
		free(buf);
		return 1;
	}
	*out = buf;
	*clen = n;
	return 0;
}

static int put_string(struct rdb_buf *b, const char *s, size_t len)
{
	unsigned char h[5];
	size_t n = int_encoding(s, len, h);
	if (n)
		return put(b, h, n);
	char *z;
	size_t clen;
	int rc = lzf_try(s, len, &z, &clen);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if ((rc = put_byte(b, ENC_PREFIX | ENC_LZF)) == 0 && (rc = put_len(b, clen)) == 0 &&
		    (rc = put_len(b, len)) == 0)
			rc = put(b, z, clen);
		free(z);
		return rc;
	}
	if ((rc = put_len(b, len)) != 0)
		return rc;
	return put(b, s, len);
}

size_t rdb_string_serialized_len(const char *v, size_t len)
{
	unsigned char h[5];
	size_t n = int_encoding(v, len, h);
	if (n)
		return n;
	char *z;
	size_t clen;
	if (lzf_try(v, len, &z, &clen) == 0) {
		free(z);
		return 1 + len_size(clen) + len_size(len) + clen;
	}
	return len_size(len) + len;
}

/* ---- input ---- */

struct rd {
	const unsigned char *p, *end;
	size_t max_len; /* longest string the caller takes */
};

static int get(struct rd *r, void *out, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return RDB_EFORMAT;
	memcpy(out, r->p, n);
	r->p += n;
	return 0;
}

/* A length, or (*encoded true) a string encoding's number ENC_*. */
static int get_len(struct rd *r, uint64_t *len, bool *encoded)
{
	unsigned char c, h[8];
	int rc = get(r, &c, 1);
	if (rc)
		return rc;
	*encoded = false;
	switch (c >> 6) {
	case 0:
		*len = c & 0x3f;
		return 0;
	case 1:
		if ((rc = get(r, h, 1)))
			return rc;
		*len = ((uint64_t)(c & 0x3f) << 8) | h[0];
		return 0;
	case 3:
		*encoded = true;
		*len = c & 0x3f;
		return 0;
	}
	size_t n = c == 0x80 ? 4 : c == 0x81 ? 8 : 0;
	if (n == 0 || (rc = get(r, h, n)))
		return RDB_EFORMAT;
	*len = 0;
	for (size_t i = 0; i < n; i++)
		*len = (*len << 8) | h[i];
	return 0;
}

static int get_plain_len(struct rd *r, uint64_t *len)
{
	bool enc;
	int rc = get_len(r, len, &enc);
	return rc ? rc : enc ? RDB_EFORMAT : 0;
}

/*
 * The most an LZF stream expands: its best unit is a back reference of
 * 3 bytes (control, length, offset) that copies 264 (7 + 255 + 2), so no
 * valid stream of clen bytes decodes to more than 88 * clen. A declared
 * length beyond that cannot be what the bytes hold.
 */
#define LZF_MAX_RATIO 88u

/* A string, any of its encodings: *out malloc'd (NULL when empty). */
static int get_string(struct rd *r, char **out, size_t *outlen)
{
	uint64_t len;
	bool enc;
	int rc = get_len(r, &len, &enc);
	*out = NULL;
	*outlen = 0;
	if (rc)
		return rc;
	if (enc && len <= ENC_INT32) {
		unsigned char h[4];
		size_t n = (size_t)1 << len; /* 1, 2 or 4 bytes */
		if ((rc = get(r, h, n)))
			return rc;
		uint32_t u = 0;
		for (size_t i = 0; i < n; i++)
			u |= (uint32_t)h[i] << (8 * i);
		long long v = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : (int32_t)u;
		char text[SRV_LL_STR_MAX];
		int tl = srv_ll2str(text, sizeof(text), v);
		if (!(*out = malloc((size_t)tl)))
			return RDB_ENOMEM;
		memcpy(*out, text, (size_t)tl);
		*outlen = (size_t)tl;
		return 0;
	}
	if (enc && len == ENC_LZF) {
		uint64_t clen, plen;
		if ((rc = get_plain_len(r, &clen)) || (rc = get_plain_len(r, &plen)))
			return rc;
		/* What the payload cannot hold is malformed, whatever the
		 * limit (Redis's "Bad data format"): checked before it. */
		if (clen > (uint64_t)(r->end - r->p) || plen == 0 || plen > UINT32_MAX ||
		    clen > UINT32_MAX || plen > clen * LZF_MAX_RATIO)
			return RDB_EFORMAT;
		if (plen > r->max_len)
			return RDB_ETOOBIG;
		char *buf = malloc(plen);
		if (!buf)
			return RDB_ENOMEM;
		unsigned got = lzf_decompress(r->p, (unsigned)clen, buf, (unsigned)plen);
		if (got != plen) {
			free(buf);
			return RDB_EFORMAT;
		}
		r->p += clen;
		*out = buf;
		*outlen = plen;
		return 0;
	}
	if (enc)
		return RDB_EFORMAT;
	if (len > (uint64_t)(r->end - r->p)) /* before the limit: as LZF's above */
		return RDB_EFORMAT;
	if (len > r->max_len)
		return RDB_ETOOBIG;
	if (len) {
		if (!(*out = malloc(len)))
			return RDB_ENOMEM;
		memcpy(*out, r->p, len);
		r->p += len;
	}
	*outlen = len;
	return 0;
}

/* ---- types ---- */

static int load_string(struct rd *r, struct rdb_value *v)
{
	return get_string(r, &v->str, &v->len);
}

static int save_string(const struct rdb_value *v, struct rdb_buf *b)
{
	return put_string(b, v->str, v->len);
}

/* One row per type byte Redis 7.0 writes. load NULL: recognized, not
 * stored by rckv yet (RESTORE refuses it, naming the type). */
static const struct {
	int type;
	const char *name;
	int (*load)(struct rd *r, struct rdb_value *v);
	int (*save)(const struct rdb_value *v, struct rdb_buf *b);
} types[] = {
	{ RDB_TYPE_STRING, "string", load_string, save_string },
	{ RDB_TYPE_LIST, "list", NULL, NULL },
	{ RDB_TYPE_SET, "set", NULL, NULL },
	{ RDB_TYPE_ZSET, "zset", NULL, NULL },
	{ RDB_TYPE_HASH, "hash", NULL, NULL },
	{ RDB_TYPE_ZSET_2, "zset", NULL, NULL },
	{ RDB_TYPE_MODULE_2, "module", NULL, NULL },
	{ RDB_TYPE_HASH_ZIPMAP, "hash", NULL, NULL },
	{ RDB_TYPE_LIST_ZIPLIST, "list", NULL, NULL },
	{ RDB_TYPE_SET_INTSET, "set", NULL, NULL },
	{ RDB_TYPE_ZSET_ZIPLIST, "zset", NULL, NULL },
	{ RDB_TYPE_HASH_ZIPLIST, "hash", NULL, NULL },
	{ RDB_TYPE_LIST_QUICKLIST, "list", NULL, NULL },
	{ RDB_TYPE_STREAM_LISTPACKS, "stream", NULL, NULL },
	{ RDB_TYPE_HASH_LISTPACK, "hash", NULL, NULL },
	{ RDB_TYPE_ZSET_LISTPACK, "zset", NULL, NULL },
	{ RDB_TYPE_LIST_QUICKLIST_2, "list", NULL, NULL },
	{ RDB_TYPE_STREAM_LISTPACKS_2, "stream", NULL, NULL },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static int type_row(int type)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].type == type)
			return (int)i;
	return -1;
}

const char *rdb_type_name(int type)
{
	int i = type_row(type);
	return i < 0 ? "unknown" : types[i].name;
}

/* The footer: version and CRC of everything before it. */
static int put_footer(struct rdb_buf *b)
{
	unsigned char f[10];
	f[0] = RDB_VERSION & 0xff;
	f[1] = (RDB_VERSION >> 8) & 0xff;
	int rc = put(b, f, 2);
	if (rc)
		return rc;
	uint64_t crc = rdb_crc64(0, b->p, b->len);
	for (int i = 0; i < 8; i++)
		f[i] = (unsigned char)(crc >> (8 * i));
	return put(b, f, 8);
}

static int dump_value(const struct rdb_value *v, struct rdb_buf *out)
{
	int i = type_row(v->type);
	if (i < 0 || !types[i].save)
		return RDB_ETYPE;
	int rc = put_byte(out, (unsigned char)v->type);
	if (rc == 0)
		rc = types[i].save(v, out);
	if (rc == 0)
		rc = put_footer(out);
	return rc;
}

int rdb_dump_string(const char *v, size_t len, struct rdb_buf *out)
{
	const struct rdb_value val = { .type = RDB_TYPE_STRING, .str = (char *)v, .len = len };
	return dump_value(&val, out);
}

#define FOOTER_BYTES 10

int rdb_restore(const char *p, size_t len, size_t max_len, struct rdb_value *v)
{
	memset(v, 0, sizeof(*v));
	if (len < FOOTER_BYTES)
		return RDB_EVERSION;
	const unsigned char *f = (const unsigned char *)p + len - FOOTER_BYTES;
	unsigned ver = f[0] | ((unsigned)f[1] << 8);
	if (ver > RDB_VERSION)
		return RDB_EVERSION;
	uint64_t want = 0;
	for (int i = 0; i < 8; i++)
		want |= (uint64_t)f[2 + i] << (8 * i);
	if (rdb_crc64(0, p, len - 8) != want)
		return RDB_EVERSION;
	struct rd r = { .p = (const unsigned char *)p, .end = f, .max_len = max_len };
	unsigned char type;
	if (get(&r, &type, 1))
		return RDB_EFORMAT;
	v->type = type;
	int i = type_row(type);
	if (i < 0)
		return RDB_EFORMAT;
	if (!types[i].load)
		return RDB_ETYPE;
	int rc = types[i].load(&r, v);
	if (rc) {
		int t = v->type;
		rdb_value_free(v);
		v->type = t;
	}
	return rc;
}

void rdb_value_free(struct rdb_value *v)
{
	free(v->str);
	memset(v, 0, sizeof(*v));
}

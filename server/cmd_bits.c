/*
 * cmd_bits: the bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
 * BITFIELD, BITFIELD_RO) and LCS, with Redis 7.0's replies and error texts.
 *
 * A string is a bitmap whose bit 0 is the most significant bit of byte 0;
 * bits past the end read as 0, and a write past the end first pads the
 * value with zero bytes. Every handler runs inside a transaction and keeps
 * cmd_string.c's rules: (1) a txn_* failure ends the handler through
 * cmd_txn_failed(); (2) a value from txn_get dies when its key is written,
 * so nothing is read from it after a write. Three more shape this file:
 *  (3) Offsets are checked as Redis checks them: a bit offset whose byte is
 *      at or past proto-max-bulk-len (512 MB) is "ERR bit offset is not an
 *      integer or out of range", for reads too, before the key is read.
 *  (4) A write that would grow a value past rckv's own max-value-bytes
 *      (1 MB by default, below Redis's 512 MB) is refused with the
 *      max-value-bytes error (cmd_reply_txn_error, as SETRANGE and APPEND
 *      do) before any buffer is allocated, and nothing is written.
 *  (5) SETBIT and BITFIELD write only when the value changes: a bit set to
 *      what it was, on a key that does not grow, writes nothing, so a WATCH
 *      on the key survives, as in Redis. A missing key is created even when
 *      only zeros are written (and even when every BITFIELD operation
 *      fails under OVERFLOW FAIL), as Redis does.
 *
 * Redis checks some arguments only once it found the key: BITCOUNT and
 * BITPOS answer a missing key before parsing their range, so `BITCOUNT
 * nokey a b` is 0, not an error. The handlers keep that order.
 *
 * Keyspace hits/misses are counted for the keys Redis looks up for reading
 * (GETBIT, BITCOUNT, BITPOS, BITOP's sources, a BITFIELD of GETs only,
 * LCS), not for SETBIT or a writing BITFIELD.
 */
#include <ck_pr.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

/* Redis's default proto-max-bulk-len, for a context without a node. */
#define PROTO_MAX_BULK_LEN_DEFAULT (512LL << 20)

static const char ERR_BIT_OFFSET[] = "ERR bit offset is not an integer or out of range";

/* A mutable limit from the node's config (CONFIG SET writes it under
 * cfg_lock; a racing reader sees the old or the new value, both fine). */
static long long cfg_limit(const struct cmd_ctx *c, const long long *field, long long dflt)
{
	if (!c->node)
		return dflt;
	return (long long)ck_pr_load_64((const uint64_t *)(const void *)field);
}

static long long proto_max(const struct cmd_ctx *c)
{
	return cfg_limit(c, c->node ? &c->node->cfg.proto_max_bulk_len : NULL,
			 PROTO_MAX_BULK_LEN_DEFAULT);
}

static bool parse_ll(const struct resp_arg *a, long long *v)
{
	return srv_str2ll(a->p, a->len, v) == 0;
}

/*
 * A bit offset argument (rule (3)). With hash_bits > 0 (BITFIELD), "#N"
 * means N fields of hash_bits bits. Returns 0, or -1 with the error
 * replied.
 */
static int bit_offset(struct cmd_ctx *c, const struct resp_arg *a, int hash_bits,
		      uint64_t *off)
{
	const char *p = a->p;
	size_t len = a->len;
	bool hash = hash_bits > 0 && len > 0 && p[0] == '#';
	long long v;

	if (hash) {
		p++;
		len--;
	}
	if (srv_str2ll(p, len, &v) != 0)
		goto bad;
	if (hash) {
		/* Redis multiplies unchecked; an overflow is out of range. */
		if (v < 0 || v > LLONG_MAX / hash_bits)
			goto bad;
		v *= hash_bits;
	}
	if (v < 0 || (v >> 3) >= proto_max(c))
		goto bad;
	*off = (uint64_t)v;
	return 0;
bad:
	resp_error(c->out, ERR_BIT_OFFSET);
	return -1;
}

/* ---- bit arithmetic on byte strings (bit 0 = MSB of byte 0) ---- */

static int bit_get(const unsigned char *p, size_t len, uint64_t bit)
{
	uint64_t byte = bit >> 3;

	return byte < len ? (p[byte] >> (7 - (bit & 7))) & 1 : 0;
}

static void bit_put(unsigned char *p, uint64_t bit, int on)
{
	unsigned char m = (unsigned char)(0x80u >> (bit & 7));

	if (on)
		p[bit >> 3] |= m;
	else
		p[bit >> 3] &= (unsigned char)~m;
}

/* The bits of a byte from bit `from` (0..7, MSB first) on. */
static unsigned char mask_from(uint64_t from)
{
	return (unsigned char)(0xFFu >> (from & 7));
}

/* The bits of a byte up to bit `to` (0..7), included. */
static unsigned char mask_to(uint64_t to)
{
	return (unsigned char)(0xFFu << (7 - (to & 7)));
}

static long long popcount_bytes(const unsigned char *p, size_t n)
{
	long long bits = 0;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		bits += __builtin_popcountll(w);
	}
	for (; i < n; i++)
		bits += __builtin_popcount(p[i]);
	return bits;
}

/* Set bits in [from, to] (bit positions, inclusive, inside the string). */
static long long count_bits(const unsigned char *p, uint64_t from, uint64_t to)
{
	uint64_t fb = from >> 3, tb = to >> 3;

	if (fb == tb)
		return __builtin_popcount(p[fb] & mask_from(from) & mask_to(to));
	return __builtin_popcount(p[fb] & mask_from(from)) +
	       popcount_bytes(p + fb + 1, (size_t)(tb - fb - 1)) +
	       __builtin_popcount(p[tb] & mask_to(to));
}

/* The first bit equal to `bit` in [from, to] (inside the string), or -1. */
static long long find_bit(const unsigned char *p, uint64_t from, uint64_t to, int bit)
{
	uint64_t b = from >> 3, tb = to >> 3;
	unsigned char flip = bit ? 0x00 : 0xFF; /* look for ones in byte ^ flip */

	while (b <= tb) {
		unsigned char x = (unsigned char)(p[b] ^ flip);

		if (b == from >> 3)
			x &= mask_from(from);
		if (b == tb)
			x &= mask_to(to);
		if (x)
			return (long long)(b * 8) + (__builtin_clz((unsigned)x) - 24);
		b++;
		/* Whole words that hold no such bit (not the last byte). */
		while (b + 8 <= tb) {
			uint64_t w;

			memcpy(&w, p + b, 8);
			if (w != (bit ? 0 : UINT64_MAX))
				break;
			b += 8;
		}
	}
	return -1;
}

/*
 * Redis's range rule for BITCOUNT and BITPOS (and GETRANGE): negative
 * positions count from the end, then both are clamped into [0, total-1].
 * True when the range is not empty.
 */
static bool range_norm(long long *start, long long *end, long long total)
{
	if (*start < 0)
		*start += total;
	if (*end < 0)
		*end += total;
	if (*start < 0)
		*start = 0;
	if (*end < 0)
		*end = 0;
	if (*end >= total)
		*end = total - 1;
	return *start <= *end;
}

/* BYTE or BIT: 0 bytes, 1 bits, -1 syntax error (replied). */
static int range_unit(struct cmd_ctx *c, const struct resp_arg *a)
{
	if (arg_is(a, "bit"))
		return 1;
	if (arg_is(a, "byte"))
		return 0;
	cmd_reply_syntax(c);
	return -1;
}

/* ---- writing ---- */

/*
 * A copy of the key's value, zero-padded so that bit `maxbit` exists, for
 * a command to change and store (rule (4) checked first). Returns 0 with
 * *buf (free it) and *blen, or -1 with the error replied.
 */
static int bits_grow(struct cmd_ctx *c, const char *v, size_t vlen, uint64_t maxbit,
		     unsigned char **buf, size_t *blen)
{
	uint64_t need = (maxbit >> 3) + 1;
	size_t len = need > vlen ? (size_t)need : vlen;

	if (need > vlen &&
	    (long long)need > cfg_limit(c, c->node ? &c->node->cfg.max_value_bytes : NULL,
					LLONG_MAX)) {
		cmd_reply_txn_error(c, CC_ETOOBIG);
		return -1;
	}
	*buf = malloc(len);
	if (!*buf) {
		resp_error(c->out, "ERR out of memory");
		return -1;
	}
	if (vlen)
		memcpy(*buf, v, vlen);
	memset(*buf + vlen, 0, len - vlen);
	*blen = len;
	return 0;
}

/* Store buf as the key's value unless it is what the key holds (rule (5)). */
static int bits_store(struct cmd_ctx *c, bool found, const char *v, size_t vlen,
		      const unsigned char *buf, size_t blen)
{
	if (found && vlen == blen && memcmp(v, buf, blen) == 0)
		return 0;
	return txn_set_keepttl(c->txn, KEY(c, 1), (const char *)buf, blen);
}

/* ---- SETBIT, GETBIT ---- */

int cmd_setbit(struct cmd_ctx *c)
{
	unsigned char *buf;
	const char *v;
	size_t vlen, blen;
	uint64_t off;
	long long on;
	bool found;
	int rc, old;

	if (bit_offset(c, &c->argv[2], 0, &off))
		return 0;
	if (!parse_ll(&c->argv[3], &on) || (on & ~1LL)) {
		resp_error(c->out, "ERR bit is not an integer or out of range");
		return 0;
	}
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (!found) {
		v = NULL;
		vlen = 0;
	}
	old = bit_get((const unsigned char *)v, vlen, off);
	/* Rule (5): the bit is already so, inside the value. */
	if (found && (off >> 3) < vlen && old == on) {
		resp_int(c->out, old);
		return 0;
	}
	if (bits_grow(c, v, vlen, off, &buf, &blen))
		return 0;
	bit_put(buf, off, (int)on);
	rc = bits_store(c, found, v, vlen, buf, blen);
	free(buf);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_int(c->out, old);
	return 0;
}

int cmd_getbit(struct cmd_ctx *c)
{
	const char *v;
	size_t vlen;
	uint64_t off;
	bool found;
	int rc;

	if (bit_offset(c, &c->argv[2], 0, &off))
		return 0;
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	cmd_count_lookup(c, found);
	resp_int(c->out, found ? bit_get((const unsigned char *)v, vlen, off) : 0);
	return 0;
}

/* ---- BITCOUNT, BITPOS ---- */

void cmd_bitcount_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen)
{
	cmd_count_lookup(c, found);
	resp_int(c->out, found ? popcount_bytes((const unsigned char *)v, vlen) : 0);
}

/* BITCOUNT key [start end [BYTE|BIT]] */
int cmd_bitcount(struct cmd_ctx *c)
{
	long long start, end, total;
	const char *v;
	size_t vlen;
	bool found;
	int rc, isbit = 0;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (!found || c->argc == 2) {
		cmd_bitcount_reply(c, found, v, vlen);
		return 0;
	}
	cmd_count_lookup(c, true);
	if (c->argc != 4 && c->argc != 5) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (!parse_ll(&c->argv[2], &start) || !parse_ll(&c->argv[3], &end)) {
		cmd_reply_not_int(c);
		return 0;
	}
	/* Both from the end and reversed: 0 before the unit is even parsed. */
	if (start < 0 && end < 0 && start > end) {
		resp_int(c->out, 0);
		return 0;
	}
	if (c->argc == 5 && (isbit = range_unit(c, &c->argv[4])) < 0)
		return 0;
	total = (long long)vlen << (isbit ? 3 : 0);
	if (!range_norm(&start, &end, total)) {
		resp_int(c->out, 0);
		return 0;
	}
	if (!isbit) {
		start *= 8;
		end = end * 8 + 7;
	}
	resp_int(c->out, count_bits((const unsigned char *)v, (uint64_t)start, (uint64_t)end));
	return 0;
}

/* BITPOS key bit [start [end [BYTE|BIT]]] */
int cmd_bitpos(struct cmd_ctx *c)
{
	long long bit, start = 0, end = -1, total, pos;
	const char *v;
	size_t vlen;
	bool found, end_given = false;
	int rc, isbit = 0;

	if (!parse_ll(&c->argv[2], &bit)) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (bit != 0 && bit != 1) {
		resp_error(c->out, "ERR The bit argument must be 1 or 0.");
		return 0;
	}
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	cmd_count_lookup(c, found);
	/* A missing key is an endless run of zeros. */
	if (!found) {
		resp_int(c->out, bit ? -1 : 0);
		return 0;
	}
	if (c->argc > 6) {
		cmd_reply_syntax(c);
		return 0;
	}
	/* Redis's order: start, then the unit, then end. */
	if (c->argc >= 4 && !parse_ll(&c->argv[3], &start)) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (c->argc == 6 && (isbit = range_unit(c, &c->argv[5])) < 0)
		return 0;
	if (c->argc >= 5) {
		if (!parse_ll(&c->argv[4], &end)) {
			cmd_reply_not_int(c);
			return 0;
		}
		end_given = true;
	}
	total = (long long)vlen << (isbit ? 3 : 0);
	if (!end_given)
		end = total - 1;
	/* An empty range holds neither a 0 nor a 1. */
	if (!range_norm(&start, &end, total)) {
		resp_int(c->out, -1);
		return 0;
	}
	if (!isbit) {
		start *= 8;
		end = end * 8 + 7;
	}
	pos = find_bit((const unsigned char *)v, (uint64_t)start, (uint64_t)end, (int)bit);
	/* Without an explicit end the string continues with zeros: the first
	 * clear bit is then the one just past the range. */
	if (pos < 0 && bit == 0 && !end_given)
		pos = end + 1;
	resp_int(c->out, pos);
	return 0;
}

/* ---- BITOP ---- */

enum { BITOP_AND, BITOP_OR, BITOP_XOR, BITOP_NOT };

/* BITOP op destkey srckey [srckey ...] */
int cmd_bitop(struct cmd_ctx *c)
{
	const struct resp_arg *opname = &c->argv[1];
	const unsigned char **src = NULL;
	unsigned char *res = NULL;
	size_t *len = NULL, maxlen = 0, mark = c->out->len;
	int op, n = c->argc - 3, i, rc = 0;

	if (arg_is(opname, "and"))
		op = BITOP_AND;
	else if (arg_is(opname, "or"))
		op = BITOP_OR;
	else if (arg_is(opname, "xor"))
		op = BITOP_XOR;
	else if (arg_is(opname, "not"))
		op = BITOP_NOT;
	else {
		cmd_reply_syntax(c);
		return 0;
	}
	if (op == BITOP_NOT && n != 1) {
		resp_error(c->out, "ERR BITOP NOT must be called with a single source key.");
		return 0;
	}
	src = malloc((size_t)n * sizeof(*src));
	len = malloc((size_t)n * sizeof(*len));
	if (!src || !len)
		goto oom;
	/* A missing source is an empty string. */
	for (i = 0; i < n; i++) {
		const char *v;
		size_t vlen;
		bool found;

		rc = cmd_get_string(c, KEY(c, 3 + i), &v, &vlen, &found);
		if (rc)
			goto out;
		cmd_count_lookup(c, found);
		src[i] = found ? (const unsigned char *)v : NULL;
		len[i] = found ? vlen : 0;
		if (len[i] > maxlen)
			maxlen = len[i];
	}
	/* Nothing but empty strings: the destination is deleted. */
	if (maxlen == 0) {
		bool existed;

		rc = txn_del(c->txn, KEY(c, 2), &existed);
		if (rc == 0)
			resp_int(c->out, 0);
		goto out;
	}
	res = malloc(maxlen);
	if (!res)
		goto oom;
	/* Shorter sources are padded with zero bytes. */
	for (size_t j = 0; j < maxlen; j++) {
		unsigned char acc = j < len[0] ? src[0][j] : 0;

		if (op == BITOP_NOT)
			acc = (unsigned char)~acc;
		for (i = 1; i < n; i++) {
			unsigned char b = j < len[i] ? src[i][j] : 0;

			if (op == BITOP_AND)
				acc &= b;
			else if (op == BITOP_OR)
				acc |= b;
			else
				acc ^= b;
		}
		res[j] = acc;
	}
	rc = txn_set(c->txn, KEY(c, 2), (const char *)res, maxlen);
	if (rc == 0)
		resp_int(c->out, (long long)maxlen);
out:
	free(res);
	free(len);
	free(src);
	return rc ? cmd_txn_failed(c, mark, rc) : 0;
oom:
	free(res);
	free(len);
	free(src);
	c->out->len = mark;
	resp_error(c->out, "ERR out of memory");
	return 0;
}

/* ---- BITFIELD, BITFIELD_RO ---- */

enum { BF_GET, BF_SET, BF_INCRBY };
enum { BF_WRAP, BF_SAT, BF_FAIL };

struct bf_op {
	uint64_t off;  /* first bit of the field */
	int64_t arg;   /* SET's value, INCRBY's increment */
	uint8_t code;  /* BF_GET, BF_SET, BF_INCRBY */
	uint8_t ow;    /* the OVERFLOW mode in force at this operation */
	uint8_t bits;  /* 1..64 signed, 1..63 unsigned */
	bool sign;
};

/* A field type: i1..i64 or u1..u63. Returns 0, or -1 with the error replied. */
static int bf_type(struct cmd_ctx *c, const struct resp_arg *a, bool *sign, int *bits)
{
	long long n;

	if (a->len < 1 || (a->p[0] != 'i' && a->p[0] != 'u'))
		goto bad;
	*sign = a->p[0] == 'i';
	if (srv_str2ll(a->p + 1, a->len - 1, &n) != 0 || n < 1 || n > (*sign ? 64 : 63))
		goto bad;
	*bits = (int)n;
	return 0;
bad:
	resp_error(c->out, "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 "
			   "is not supported but i64 is.");
	return -1;
}

/* The unsigned value of a field; bits past len read as 0. */
static uint64_t bf_get_u(const unsigned char *p, size_t len, uint64_t off, int bits)
{
	uint64_t v = 0;

	for (int i = 0; i < bits; i++)
		v = (v << 1) | (uint64_t)bit_get(p, len, off + (uint64_t)i);
	return v;
}

/* The low `bits` bits of v as a signed number (the rest of v ignored). */
static int64_t bf_signed(uint64_t v, int bits)
{
	if (bits < 64) {
		v &= (UINT64_C(1) << bits) - 1;
		if ((v >> (bits - 1)) & 1)
			v |= UINT64_MAX << bits;
	}
	return (int64_t)v;
}

static void bf_put(unsigned char *p, uint64_t off, int bits, uint64_t v)
{
	for (int i = 0; i < bits; i++)
		bit_put(p, off + (uint64_t)i, (int)((v >> (bits - 1 - i)) & 1));
}

/*
 * value + incr in an unsigned field of `bits` bits (SET: the new value,
 * incr 0; a negative SET value arrives as its two's complement, so it is
 * over the top). On overflow returns true with *res per the mode: WRAP
 * keeps the low bits, SAT the bound crossed (FAIL: unused).
 */
static bool bf_add_u(uint64_t value, int64_t incr, int bits, int ow, uint64_t *res)
{
	uint64_t max = (UINT64_C(1) << bits) - 1; /* bits <= 63 */
	__int128 sum = (__int128)value + incr;
	bool over = value > max || sum > (__int128)max;

	if (!over && sum >= 0) {
		*res = (uint64_t)sum;
		return false;
	}
	if (ow == BF_SAT)
		*res = over ? max : 0;
	else
		*res = (uint64_t)sum & max;
	return true;
}

/* The same for a signed field (two's complement, sign-extended result). */
static bool bf_add_s(int64_t value, int64_t incr, int bits, int ow, int64_t *res)
{
	int64_t max = bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
	int64_t min = -max - 1;
	__int128 sum = (__int128)value + incr;
	bool over = sum > max, under = sum < min;

	/* Redis 7.0 tests "incr > max - value" in 64-bit arithmetic, which
	 * wraps for a SET value far below a narrow field's minimum: such a
	 * value counts as over the top (SAT then gives max, not min). */
	if (bits < 64 && value < 0 && (uint64_t)max - (uint64_t)value > (uint64_t)INT64_MAX) {
		over = true;
		under = false;
	}
	if (!over && !under) {
		*res = (int64_t)sum;
		return false;
	}
	if (ow == BF_SAT)
		*res = over ? max : min;
	else
		*res = bf_signed((uint64_t)sum, bits);
	return true;
}

/* Run one SET or INCRBY on buf: reply the old (SET) or new (INCRBY) value,
 * or null when it overflows under FAIL (then the field is left as it is). */
static void bf_write(struct cmd_ctx *c, unsigned char *buf, size_t blen, const struct bf_op *o)
{
	uint64_t raw = bf_get_u(buf, blen, o->off, o->bits), nu;
	bool over;

	if (o->sign) {
		int64_t old = bf_signed(raw, o->bits), ns;

		if (o->code == BF_INCRBY)
			over = bf_add_s(old, o->arg, o->bits, o->ow, &ns);
		else
			over = bf_add_s(o->arg, 0, o->bits, o->ow, &ns);
		if (over && o->ow == BF_FAIL) {
			resp_null(c->out);
			return;
		}
		resp_int(c->out, o->code == BF_INCRBY ? ns : old);
		nu = (uint64_t)ns;
	} else {
		if (o->code == BF_INCRBY)
			over = bf_add_u(raw, o->arg, o->bits, o->ow, &nu);
		else
			over = bf_add_u((uint64_t)o->arg, 0, o->bits, o->ow, &nu);
		if (over && o->ow == BF_FAIL) {
			resp_null(c->out);
			return;
		}
		resp_int(c->out, (long long)(o->code == BF_INCRBY ? nu : raw));
	}
	bf_put(buf, o->off, o->bits, nu);
}

static void bf_read(struct cmd_ctx *c, const unsigned char *p, size_t len, const struct bf_op *o)
{
	uint64_t raw = bf_get_u(p, len, o->off, o->bits);

	resp_int(c->out, o->sign ? bf_signed(raw, o->bits) : (long long)raw);
}

/*
 * Parse the operations as Redis does, stopping at the first bad one.
 * Returns the number of operations (0 or more) with *has_write and
 * *maxbit (the last bit a SET or INCRBY reaches), or -1 (replied).
 */
static int bf_parse(struct cmd_ctx *c, struct bf_op *ops, bool *has_write, uint64_t *maxbit)
{
	int n = 0, ow = BF_WRAP;

	*has_write = false;
	*maxbit = 0;
	for (int j = 2; j < c->argc; j++) {
		const struct resp_arg *a = &c->argv[j];
		int rem = c->argc - j - 1, bits, code;
		long long arg = 0;
		uint64_t off;
		bool sign;

		if (arg_is(a, "get") && rem >= 2) {
			code = BF_GET;
		} else if (arg_is(a, "set") && rem >= 3) {
			code = BF_SET;
		} else if (arg_is(a, "incrby") && rem >= 3) {
			code = BF_INCRBY;
		} else if (arg_is(a, "overflow") && rem >= 1) {
			const struct resp_arg *m = &c->argv[++j];

			if (arg_is(m, "wrap")) {
				ow = BF_WRAP;
			} else if (arg_is(m, "sat")) {
				ow = BF_SAT;
			} else if (arg_is(m, "fail")) {
				ow = BF_FAIL;
			} else {
				resp_error(c->out, "ERR Invalid OVERFLOW type specified");
				return -1;
			}
			continue;
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
		if (bf_type(c, &c->argv[j + 1], &sign, &bits))
			return -1;
		if (bit_offset(c, &c->argv[j + 2], bits, &off))
			return -1;
		if (code != BF_GET) {
			*has_write = true;
			if (off + (uint64_t)bits - 1 > *maxbit)
				*maxbit = off + (uint64_t)bits - 1;
			if (!parse_ll(&c->argv[j + 3], &arg)) {
				cmd_reply_not_int(c);
				return -1;
			}
		}
		ops[n++] = (struct bf_op){ .off = off, .arg = arg, .code = (uint8_t)code,
					   .ow = (uint8_t)ow, .bits = (uint8_t)bits, .sign = sign };
		j += code == BF_GET ? 2 : 3;
	}
	return n;
}

/*
 * The key's flags for one BITFIELD request, as Redis 7.0 reports them (and
 * as the transaction declares the key): "RO access" when every operation
 * is a GET (OVERFLOW aside), else "RW access update". Anything malformed
 * counts as a write, as in Redis; such a request fails before it reads.
 */
const char *cmd_bitfield_key_flags(int argc, const struct resp_arg *argv)
{
	for (int j = 2; j < argc; j++) {
		int rem = argc - j - 1;

		if (arg_is(&argv[j], "get") && rem >= 2)
			j += 2;
		else if (arg_is(&argv[j], "overflow") && rem >= 1)
			j += 1;
		else
			return "RW access update";
	}
	return "RO access";
}

static int bitfield(struct cmd_ctx *c, bool readonly)
{
	struct bf_op stack[8], *ops = stack;
	unsigned char *buf = NULL;
	const char *v;
	size_t vlen, blen, mark = c->out->len;
	uint64_t maxbit;
	bool has_write, found;
	int n, rc = 0;

	/* Every operation takes at least three arguments. */
	if ((size_t)(c->argc / 3 + 1) > sizeof(stack) / sizeof(stack[0])) {
		ops = malloc((size_t)(c->argc / 3 + 1) * sizeof(*ops));
		if (!ops) {
			resp_error(c->out, "ERR out of memory");
			return 0;
		}
	}
	n = bf_parse(c, ops, &has_write, &maxbit);
	if (n < 0)
		goto out;
	if (has_write && readonly) {
		resp_error(c->out, "ERR BITFIELD_RO only supports the GET subcommand");
		goto out;
	}
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		goto out;
	if (!found) {
		v = NULL;
		vlen = 0;
	}
	if (!has_write) {
		cmd_count_lookup(c, found);
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			bf_read(c, (const unsigned char *)v, vlen, &ops[i]);
		goto out;
	}
	/* Writes: the value grows first to the last bit written, whatever
	 * each operation then does (rule (5)); GETs see earlier writes. */
	if (bits_grow(c, v, vlen, maxbit, &buf, &blen))
		goto out;
	resp_array(c->out, n);
	for (int i = 0; i < n; i++) {
		if (ops[i].code == BF_GET)
			bf_read(c, buf, blen, &ops[i]);
		else
			bf_write(c, buf, blen, &ops[i]);
	}
	rc = bits_store(c, found, v, vlen, buf, blen);
out:
	free(buf);
	if (ops != stack)
		free(ops);
	return rc ? cmd_txn_failed(c, mark, rc) : 0;
}

int cmd_bitfield(struct cmd_ctx *c)
{
	return bitfield(c, false);
}

int cmd_bitfield_ro(struct cmd_ctx *c)
{
	return bitfield(c, true);
}

/* ---- LCS ---- */

struct lcs_match {
	uint32_t a0, a1, b0, b1; /* inclusive ranges in a and b */
};

struct lcs_opts {
	bool len, idx, withmatchlen;
	long long minmatchlen;
};

static int lcs_parse(struct cmd_ctx *c, struct lcs_opts *o)
{
	*o = (struct lcs_opts){ 0 };
	for (int j = 3; j < c->argc; j++) {
		const struct resp_arg *a = &c->argv[j];

		if (arg_is(a, "idx")) {
			o->idx = true;
		} else if (arg_is(a, "len")) {
			o->len = true;
		} else if (arg_is(a, "withmatchlen")) {
			o->withmatchlen = true;
		} else if (arg_is(a, "minmatchlen") && j + 1 < c->argc) {
			if (!parse_ll(&c->argv[++j], &o->minmatchlen)) {
				cmd_reply_not_int(c);
				return -1;
			}
			if (o->minmatchlen < 0)
				o->minmatchlen = 0;
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
	}
	if (o->len && o->idx) {
		resp_error(c->out, "ERR If you want both the length and indexes, please just use IDX.");
		return -1;
	}
	return 0;
}

/*
 * The dynamic-programming table: T[i][j] is the LCS length of a[0..i) and
 * b[0..j), stored row by row, (alen+1) x (blen+1) uint32s. Redis refuses
 * a table larger than proto-max-bulk-len bytes; so does rckv.
 */
static uint32_t *lcs_table(struct cmd_ctx *c, const unsigned char *a, uint32_t alen,
			   const unsigned char *b, uint32_t blen)
{
	unsigned long long cells = (unsigned long long)(alen + 1) * (blen + 1);
	unsigned long long bytes = cells * sizeof(uint32_t);
	uint32_t *t;
	size_t w = (size_t)blen + 1;

	if (bytes / sizeof(uint32_t) != cells || (long long)bytes > proto_max(c)) {
		resp_error(c->out, "ERR Insufficient memory, transient memory for LCS exceeds "
				   "proto-max-bulk-len");
		return NULL;
	}
	t = malloc(bytes ? bytes : 1);
	if (!t) {
		resp_error(c->out, "ERR Insufficient memory, failed allocating transient memory "
				   "for LCS");
		return NULL;
	}
	for (size_t j = 0; j < w; j++)
		t[j] = 0;
	for (size_t i = 1; i <= alen; i++) {
		uint32_t *row = t + i * w, *up = row - w;

		row[0] = 0;
		for (size_t j = 1; j < w; j++) {
			if (a[i - 1] == b[j - 1])
				row[j] = up[j - 1] + 1;
			else
				row[j] = up[j] > row[j - 1] ? up[j] : row[j - 1];
		}
	}
	return t;
}

/*
 * Walk the table back from the end as Redis does (on a tie, step back in
 * b), filling the LCS into out (its length bytes) and the runs of
 * consecutive matches, last first, into m (when m is not NULL; those
 * shorter than minmatchlen left out). Returns the number of runs kept.
 */
static size_t lcs_walk(const uint32_t *t, const unsigned char *a, uint32_t alen,
		       const unsigned char *b, uint32_t blen, long long minmatchlen,
		       unsigned char *out, struct lcs_match *m)
{
	size_t w = (size_t)blen + 1, nm = 0;
	uint32_t i = alen, j = blen, k = t[(size_t)alen * w + blen];
	struct lcs_match cur = { 0 };
	bool open = false;

	while (i > 0 && j > 0) {
		bool close = false;

		if (a[i - 1] == b[j - 1]) {
			out[--k] = a[i - 1];
			if (!open) {
				cur = (struct lcs_match){ i - 1, i - 1, j - 1, j - 1 };
				open = true;
			} else {
				/* Walking back diagonally: the run grows. */
				cur.a0 = i - 1;
				cur.b0 = j - 1;
			}
			i--;
			j--;
			close = i == 0 || j == 0;
		} else {
			if (t[(size_t)(i - 1) * w + j] > t[(size_t)i * w + j - 1])
				i--;
			else
				j--;
			close = open;
		}
		if (close) {
			if (m && (long long)(cur.a1 - cur.a0 + 1) >= minmatchlen)
				m[nm++] = cur;
			open = false;
		}
	}
	return nm;
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN] */
int cmd_lcs(struct cmd_ctx *c)
{
	const char *va, *vb;
	size_t alen, blen, mark = c->out->len;
	struct lcs_match *m = NULL;
	unsigned char *out = NULL;
	struct lcs_opts o;
	uint32_t *t;
	bool fa, fb;
	int rc;

	/* LCS has its own text for a key of another type (Redis 7.0). */
	rc = cmd_get_string(c, KEY(c, 1), &va, &alen, &fa);
	if (rc == 0)
		rc = cmd_get_string(c, KEY(c, 2), &vb, &blen, &fb);
	if (rc == COLL_EWRONGTYPE) {
		c->out->len = mark;
		resp_error(c->out, "ERR The specified keys must contain string values");
		return 0;
	}
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	cmd_count_lookup(c, fa);
	cmd_count_lookup(c, fb);
	if (!fa)
		alen = 0;
	if (!fb)
		blen = 0;
	if (lcs_parse(c, &o))
		return 0;
	if (alen >= UINT32_MAX - 1 || blen >= UINT32_MAX - 1) {
		resp_error(c->out, "ERR String too long for LCS");
		return 0;
	}
	t = lcs_table(c, (const unsigned char *)va, (uint32_t)alen, (const unsigned char *)vb,
		      (uint32_t)blen);
	if (!t)
		return 0;
	uint32_t total = t[alen * (blen + 1) + blen];

	if (o.len && !o.idx) {
		resp_int(c->out, total);
		goto done;
	}
	out = malloc(total ? total : 1);
	/* At most one run per matched byte. */
	if (o.idx)
		m = malloc((total ? total : 1) * sizeof(*m));
	if (!out || (o.idx && !m)) {
		resp_error(c->out, "ERR out of memory");
		goto done;
	}
	size_t nm = lcs_walk(t, (const unsigned char *)va, (uint32_t)alen,
			     (const unsigned char *)vb, (uint32_t)blen, o.minmatchlen, out,
			     o.idx ? m : NULL);
	if (!o.idx) {
		resp_bulk(c->out, out, total);
		goto done;
	}
	resp_map(c->out, 2);
	resp_bulk_cstr(c->out, "matches");
	resp_array(c->out, (long)nm);
	for (size_t i = 0; i < nm; i++) {
		resp_array(c->out, o.withmatchlen ? 3 : 2);
		resp_array(c->out, 2);
		resp_int(c->out, m[i].a0);
		resp_int(c->out, m[i].a1);
		resp_array(c->out, 2);
		resp_int(c->out, m[i].b0);
		resp_int(c->out, m[i].b1);
		if (o.withmatchlen)
			resp_int(c->out, m[i].a1 - m[i].a0 + 1);
	}
	resp_bulk_cstr(c->out, "len");
	resp_int(c->out, total);
done:
	free(m);
	free(out);
	free(t);
	return 0;
}

/*
 * cmd_string: the string commands (GET, SET and its options, SETNX, GETSET,
 * GETDEL, MGET, MSET, MSETNX, INCR/DECR and friends, INCRBYFLOAT, APPEND,
 * STRLEN, GETRANGE, SETRANGE), with Redis 7.0's replies and error texts.
 *
 * Every handler runs inside a transaction (command.h) and touches keys only
 * through cc/txn.h. Three rules shape the code:
 *  (1) A txn_* result other than 0 ends the handler through cmd_txn_failed():
 *      the reply written so far is cut back to where this command started,
 *      then CC_ABORT is returned as is (the executor reruns everything) or
 *      the error becomes this command's error reply.
 *  (2) A value pointer from txn_get dies when the key is written, so a
 *      reply that quotes the old value (SET GET, GETSET, GETDEL) is written
 *      before the write; rule (1) removes it again if the write fails.
 *  (3) Limits are enforced by txn_set (CC_ETOOBIG). Handlers that build a
 *      value (APPEND, SETRANGE) check the limits first so that a huge
 *      offset never allocates a huge buffer, and MSET/MSETNX check every
 *      pair first so that an oversized pair fails the command before any
 *      key of it is written.
 *
 * Keyspace hits/misses are counted where Redis counts them (reads that
 * look a key up for its value: GET, MGET, SET ... GET, GETSET, GETDEL,
 * STRLEN, GETRANGE), not for writes (SETNX, INCR, APPEND, ...). An attempt
 * that aborts and is retried counts again, as the txn API gives handlers no
 * way to know which attempt commits.
 */
#include <ck_pr.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/expire.h"
#include "server/node.h"
#include "server/strutil.h"
#include "server/worker.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

/* A mutable limit from the node's config (CONFIG SET writes it under
 * cfg_lock; a racing reader sees the old or the new value, both fine). */
static long long cfg_limit(const long long *field)
{
	return (long long)ck_pr_load_64((const uint64_t *)(const void *)field);
}

/* True (reply written) when a key/value pair is over the configured limits. */
static bool over_limits(struct cmd_ctx *c, size_t klen, size_t vlen)
{
	if (!c->node)
		return false;
	if ((long long)klen > cfg_limit(&c->node->cfg.max_key_bytes) ||
	    (long long)vlen > cfg_limit(&c->node->cfg.max_value_bytes)) {
		cmd_reply_txn_error(c, CC_ETOOBIG);
		return true;
	}
	return false;
}

/*
 * Redis refuses to build a string longer than proto-max-bulk-len (APPEND,
 * SETRANGE) with its own text; past that, rckv's max-value-bytes applies.
 * `base + add` may overflow: that is over every limit too. Replies and
 * returns true when the result would be too long.
 */
static bool result_too_long(struct cmd_ctx *c, unsigned long long base, unsigned long long add)
{
	unsigned long long total = base + add;

	if (total < base || total > (unsigned long long)LLONG_MAX) {
		resp_error(c->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
		return true;
	}
	if (!c->node)
		return false;
	if ((long long)total > cfg_limit(&c->node->cfg.proto_max_bulk_len)) {
		resp_error(c->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
		return true;
	}
	if ((long long)total > cfg_limit(&c->node->cfg.max_value_bytes)) {
		cmd_reply_txn_error(c, CC_ETOOBIG);
		return true;
	}
	return false;
}

static bool parse_ll(const struct resp_arg *a, long long *v)
{
	return srv_str2ll(a->p, a->len, v) == 0;
}

/* ---- GET, SET, SETNX, GETSET, GETDEL ---- */

void cmd_get_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen)
{
	cmd_count_lookup(c, found);
	if (cmd_reply_wrongtype(c, found, TXN_T_STRING))
		return;
	if (found)
		resp_bulk(c->out, v, vlen);
	else
		resp_null(c->out);
}

int cmd_get(struct cmd_ctx *c)
{
	return cmd_read_key1(c, cmd_get_reply);
}

enum {
	SET_NX = 1u << 0,
	SET_XX = 1u << 1,
	SET_GET = 1u << 2,
	SET_KEEPTTL = 1u << 3,
	SET_EX = 1u << 4,
	SET_PX = 1u << 5,
	SET_EXAT = 1u << 6,
	SET_PXAT = 1u << 7,
};
#define SET_EXPIRE (SET_EX | SET_PX | SET_EXAT | SET_PXAT)

static unsigned expire_option(const struct resp_arg *a)
{
	if (arg_is(a, "ex"))
		return SET_EX;
	if (arg_is(a, "px"))
		return SET_PX;
	if (arg_is(a, "exat"))
		return SET_EXAT;
	if (arg_is(a, "pxat"))
		return SET_PXAT;
	return 0;
}

/*
 * Parse SET's options as Redis 7.0 does: NX and XX exclude each other,
 * the four expiry forms and KEEPTTL exclude each other (repeating the same
 * one is allowed, the last value wins), anything else is a syntax error.
 * Returns 0, or -1 with the error replied.
 */
static int set_parse(struct cmd_ctx *c, unsigned *flags, const struct resp_arg **expire)
{
	unsigned fl = 0, bit;
	int i;

	*expire = NULL;
	for (i = 3; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		bool has_next = i + 1 < c->argc;

		if (arg_is(a, "nx") && !(fl & SET_XX)) {
			fl |= SET_NX;
		} else if (arg_is(a, "xx") && !(fl & SET_NX)) {
			fl |= SET_XX;
		} else if (arg_is(a, "get")) {
			fl |= SET_GET;
		} else if (arg_is(a, "keepttl") && !(fl & SET_EXPIRE)) {
			fl |= SET_KEEPTTL;
		} else if ((bit = expire_option(a)) != 0 && has_next &&
			   !(fl & SET_KEEPTTL) && !(fl & (SET_EXPIRE & ~bit))) {
			fl |= bit;
			*expire = &c->argv[++i];
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
	}
	*flags = fl;
	return 0;
}

/*
 * Validate an expiry value exactly as Redis would before using it, so a
 * client gets the same error for bad input. Returns 0 or -1 (replied).
 */
static int set_check_expire(struct cmd_ctx *c, unsigned flags, const struct resp_arg *expire)
{
	long long v;
	bool seconds = flags & (SET_EX | SET_EXAT);

	if (!parse_ll(expire, &v)) {
		cmd_reply_not_int(c);
		return -1;
	}
	if (v <= 0 || (seconds && v > LLONG_MAX / 1000))
		goto invalid;
	if (seconds)
		v *= 1000;
	if (flags & (SET_EX | SET_PX)) {
		struct timespec ts;
		long long now;

		clock_gettime(CLOCK_REALTIME, &ts);
		now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		/* A relative time that overflows once made absolute. */
		if (v > LLONG_MAX - now)
			goto invalid;
	}
	return 0;
invalid:
	resp_error(c->out, "ERR invalid expire time in 'set' command");
	return -1;
}

int cmd_set(struct cmd_ctx *c)
{
	const struct resp_arg *expire;
	const char *old = NULL;
	size_t oldlen = 0, mark = c->out->len;
	unsigned fl;
	bool found = false;
	int rc;

	if (set_parse(c, &fl, &expire))
		return 0;
	if (expire && set_check_expire(c, fl, expire))
		return 0;
	/* The new value's expiry: from the option, or (KEEPTTL) the old
	 * one's; none otherwise, as a SET drops a key's TTL in Redis. */
	struct txn_meta m = { .type = TXN_T_STRING }, om;
	if (expire) {
		long long v, when = 0;
		(void)parse_ll(expire, &v); /* checked above */
		(void)expire_at_ms(v, fl & (SET_EX | SET_EXAT),
				   (fl & (SET_EX | SET_PX)) ? txn_now_ms(c->txn) : 0, &when);
		m.expire_ms = when;
	}
	if (fl & (SET_NX | SET_XX | SET_GET | SET_KEEPTTL)) {
		rc = txn_get_meta(c->txn, KEY(c, 1), &old, &oldlen, &found, &om);
		if (rc)
			return cmd_txn_failed(c, mark, rc);
		if (fl & SET_KEEPTTL)
			m.expire_ms = om.expire_ms;
		if ((fl & SET_GET) && found && om.type != TXN_T_STRING)
			return cmd_txn_failed(c, mark, COLL_EWRONGTYPE);
	}
	if (fl & SET_GET) {
		/* Rule (2): quote the old value before overwriting it. */
		cmd_count_lookup(c, found);
		if (found)
			resp_bulk(c->out, old, oldlen);
		else
			resp_null(c->out);
	}
	if (((fl & SET_NX) && found) || ((fl & SET_XX) && !found)) {
		/* Not set: with GET the old value is the reply, else null. */
		if (!(fl & SET_GET))
			resp_null(c->out);
		return 0;
	}
	rc = txn_set_meta(c->txn, KEY(c, 1), KEY(c, 2), &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!(fl & SET_GET))
		resp_status(c->out, "OK");
	return 0;
}

int cmd_setnx(struct cmd_ctx *c)
{
	const char *v;
	size_t vlen;
	bool found;
	int rc;

	rc = txn_get(c->txn, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (found) {
		resp_int(c->out, 0);
		return 0;
	}
	rc = txn_set(c->txn, KEY(c, 1), KEY(c, 2));
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_int(c->out, 1);
	return 0;
}

int cmd_getset(struct cmd_ctx *c)
{
	const char *v;
	size_t vlen, mark = c->out->len;
	bool found;
	int rc;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	cmd_count_lookup(c, found);
	if (found)
		resp_bulk(c->out, v, vlen); /* rule (2) */
	else
		resp_null(c->out);
	rc = txn_set(c->txn, KEY(c, 1), KEY(c, 2));
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	return 0;
}

int cmd_getdel(struct cmd_ctx *c)
{
	const char *v;
	size_t vlen, mark = c->out->len;
	bool found, existed;
	int rc;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	cmd_count_lookup(c, found);
	if (!found) {
		resp_null(c->out);
		return 0;
	}
	resp_bulk(c->out, v, vlen); /* rule (2) */
	rc = txn_del(c->txn, KEY(c, 1), &existed);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	return 0;
}

/* ---- MGET, MSET, MSETNX ---- */

int cmd_mget(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	int i, rc;

	resp_array(c->out, c->argc - 1);
	for (i = 1; i < c->argc; i++) {
		const char *v;
		size_t vlen;
		bool found;

		rc = cmd_get_string(c, KEY(c, i), &v, &vlen, &found);
		if (rc && rc != COLL_EWRONGTYPE)
			return cmd_txn_failed(c, mark, rc);
		cmd_count_lookup(c, found);
		if (found && rc == 0) /* another type: nil, as Redis */
			resp_bulk(c->out, v, vlen);
		else
			resp_null(c->out);
	}
	return 0;
}

/* Shared checks of MSET and MSETNX: pairs, then limits (rule (3)). */
static bool mset_check(struct cmd_ctx *c)
{
	int i;

	if (c->argc % 2 == 0) {
		cmd_reply_wrong_args(c);
		return false;
	}
	for (i = 1; i < c->argc; i += 2)
		if (over_limits(c, c->argv[i].len, c->argv[i + 1].len))
			return false;
	return true;
}

/*
 * Write every pair. Returns 0 when all were written, CC_ABORT, or -1 when
 * a txn error was replied (rule (1)).
 */
static int mset_all(struct cmd_ctx *c, size_t mark)
{
	int i, rc;

	for (i = 1; i < c->argc; i += 2) {
		rc = txn_set(c->txn, KEY(c, i), KEY(c, i + 1));
		if (rc)
			return cmd_txn_failed(c, mark, rc) == CC_ABORT ? CC_ABORT : -1;
	}
	return 0;
}

int cmd_mset(struct cmd_ctx *c)
{
	int rc;

	if (!mset_check(c))
		return 0;
	rc = mset_all(c, c->out->len);
	if (rc == CC_ABORT)
		return CC_ABORT;
	if (rc == 0)
		resp_status(c->out, "OK");
	return 0;
}

int cmd_msetnx(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	int i, rc;

	if (!mset_check(c))
		return 0;
	/* Redis stops at the first key that exists. */
	for (i = 1; i < c->argc; i += 2) {
		const char *v;
		size_t vlen;
		bool found;

		rc = txn_get(c->txn, KEY(c, i), &v, &vlen, &found);
		if (rc)
			return cmd_txn_failed(c, mark, rc);
		if (found) {
			resp_int(c->out, 0);
			return 0;
		}
	}
	rc = mset_all(c, mark);
	if (rc == CC_ABORT)
		return CC_ABORT;
	if (rc == 0)
		resp_int(c->out, 1);
	return 0;
}

/* ---- INCR, INCRBY, DECR, DECRBY, INCRBYFLOAT ---- */

static int incr_by(struct cmd_ctx *c, long long incr)
{
	char buf[SRV_LL_STR_MAX];
	const char *v;
	size_t vlen;
	long long cur = 0;
	bool found;
	int rc, n;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (found && srv_str2ll(v, vlen, &cur) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if ((incr < 0 && cur < 0 && incr < LLONG_MIN - cur) ||
	    (incr > 0 && cur > 0 && incr > LLONG_MAX - cur)) {
		resp_error(c->out, "ERR increment or decrement would overflow");
		return 0;
	}
	cur += incr;
	n = srv_ll2str(buf, sizeof(buf), cur);
	rc = txn_set_keepttl(c->txn, KEY(c, 1), buf, (size_t)n);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_int(c->out, cur);
	return 0;
}

int cmd_incr(struct cmd_ctx *c)
{
	return incr_by(c, 1);
}

int cmd_decr(struct cmd_ctx *c)
{
	return incr_by(c, -1);
}

int cmd_incrby(struct cmd_ctx *c)
{
	long long incr;

	if (!parse_ll(&c->argv[2], &incr)) {
		cmd_reply_not_int(c);
		return 0;
	}
	return incr_by(c, incr);
}

int cmd_decrby(struct cmd_ctx *c)
{
	long long decr;

	if (!parse_ll(&c->argv[2], &decr)) {
		cmd_reply_not_int(c);
		return 0;
	}
	/* -LLONG_MIN does not exist; Redis 7.0 has its own text for it. */
	if (decr == LLONG_MIN) {
		resp_error(c->out, "ERR decrement would overflow");
		return 0;
	}
	return incr_by(c, -decr);
}

int cmd_incrbyfloat(struct cmd_ctx *c)
{
	char buf[SRV_LD_STR_MAX];
	const char *v;
	size_t vlen;
	long double cur = 0, incr;
	bool found;
	int rc, n;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if ((found && srv_str2ld(v, vlen, &cur) != 0) ||
	    srv_str2ld(c->argv[2].p, c->argv[2].len, &incr) != 0) {
		resp_error(c->out, "ERR value is not a valid float");
		return 0;
	}
	cur += incr;
	if (isnan(cur) || isinf(cur)) {
		resp_error(c->out, "ERR increment would produce NaN or Infinity");
		return 0;
	}
	n = srv_ld2str(buf, sizeof(buf), cur);
	if (n < 0)
		n = 0; /* cannot happen for a finite value (strutil.h) */
	rc = txn_set_keepttl(c->txn, KEY(c, 1), buf, (size_t)n);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_bulk(c->out, buf, (size_t)n);
	return 0;
}

/* ---- APPEND, STRLEN, GETRANGE, SETRANGE ---- */

int cmd_append(struct cmd_ctx *c)
{
	const struct resp_arg *add = &c->argv[2];
	const char *v;
	size_t vlen, total;
	bool found;
	char *buf;
	int rc;

	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (!found) {
		rc = txn_set_keepttl(c->txn, KEY(c, 1), add->p, add->len);
		if (rc)
			return cmd_txn_failed(c, c->out->len, rc);
		resp_int(c->out, (long long)add->len);
		return 0;
	}
	if (result_too_long(c, vlen, add->len))
		return 0;
	/* Even an empty append writes the key: Redis counts it as a
	 * modification, so a WATCH on the key fails either way. */
	total = vlen + add->len;
	buf = malloc(total ? total : 1);
	if (!buf) {
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	memcpy(buf, v, vlen);
	memcpy(buf + vlen, add->p, add->len);
	rc = txn_set_keepttl(c->txn, KEY(c, 1), buf, total);
	free(buf);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_int(c->out, (long long)total);
	return 0;
}

void cmd_strlen_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen)
{
	(void)v;
	cmd_count_lookup(c, found);
	if (cmd_reply_wrongtype(c, found, TXN_T_STRING))
		return;
	resp_int(c->out, found ? (long long)vlen : 0);
}

int cmd_strlen(struct cmd_ctx *c)
{
	return cmd_read_key1(c, cmd_strlen_reply);
}

int cmd_getrange(struct cmd_ctx *c)
{
	long long start, end, len;
	const char *v;
	size_t vlen;
	bool found;
	int rc;

	if (!parse_ll(&c->argv[2], &start) || !parse_ll(&c->argv[3], &end)) {
		cmd_reply_not_int(c);
		return 0;
	}
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	cmd_count_lookup(c, found);
	if (!found) {
		resp_bulk(c->out, "", 0);
		return 0;
	}
	len = (long long)vlen;
	/* Both from the end and reversed: empty, before any clamping (so
	 * "-1 -5" is empty even though both clamp to valid positions). */
	if (start < 0 && end < 0 && start > end) {
		resp_bulk(c->out, "", 0);
		return 0;
	}
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= len)
		end = len - 1;
	if (len == 0 || start > end)
		resp_bulk(c->out, "", 0);
	else
		resp_bulk(c->out, v + start, (size_t)(end - start + 1));
	return 0;
}

int cmd_setrange(struct cmd_ctx *c)
{
	const struct resp_arg *add = &c->argv[3];
	long long offset;
	const char *v;
	size_t vlen, newlen, off;
	bool found;
	char *buf;
	int rc;

	if (!parse_ll(&c->argv[2], &offset)) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (offset < 0) {
		resp_error(c->out, "ERR offset is out of range");
		return 0;
	}
	rc = cmd_get_string(c, KEY(c, 1), &v, &vlen, &found);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (!found)
		vlen = 0;
	/* Writing nothing changes nothing: report the current length (and
	 * do not create a missing key), before any size check. */
	if (add->len == 0) {
		resp_int(c->out, (long long)vlen);
		return 0;
	}
	if (result_too_long(c, (unsigned long long)offset, add->len))
		return 0;
	off = (size_t)offset;
	newlen = off + add->len > vlen ? off + add->len : vlen;
	buf = malloc(newlen);
	if (!buf) {
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	/* Old bytes, zero padding up to the offset, then the new bytes. */
	if (vlen)
		memcpy(buf, v, vlen);
	if (off > vlen)
		memset(buf + vlen, 0, off - vlen);
	memcpy(buf + off, add->p, add->len);
	rc = txn_set_keepttl(c->txn, KEY(c, 1), buf, newlen);
	free(buf);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_int(c->out, (long long)newlen);
	return 0;
}

/*
 * SET's key flags for one request, as Redis's getkeys gives them (RW
 * access update with GET, else OW update), with one deviation: an option
 * that makes SET look at the key (NX, XX, KEEPTTL, ...) gives "RW update",
 * because declare.c reads "OW" as a blind write and must declare the read.
 * ACL checks see the same permissions either way (write, and read only
 * with GET).
 */
const char *cmd_set_key_flags(int argc, const struct resp_arg *argv)
{
	for (int i = 3; i < argc; i++)
		if (argv[i].len == 3 && strncasecmp(argv[i].p, "get", 3) == 0)
			return "RW access update";
	return argc == 3 ? "OW update" : "RW update";
}

/*
 * cmd_expire: key expiry (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX, XX,
 * GT, LT; TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST; GETEX, SETEX,
 * PSETEX), with Redis 7.0's replies and error texts.
 *
 * A key's expiry is part of its value (cc/txn.h txn_meta): each command
 * reads and writes it in its transaction like the value, so it is as
 * serializable as the value is, under every protocol and across nodes. A
 * key past its time is absent to every read; "now" is the transaction's
 * clock (txn_now_ms), one time per attempt as Redis takes one per command.
 * Active expiry (server/expire_cycle.c) removes such keys in the
 * background.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/expire.h"
#include "server/strutil.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

void cmd_reply_bad_expire(struct cmd_ctx *c, const char *cmd)
{
	resp_errorf(c->out, "ERR invalid expire time in '%s' command", cmd);
}

int expire_at_ms(long long v, bool seconds, long long base, long long *when)
{
	if (seconds) {
		if (v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000)
			return -1;
		v *= 1000;
	}
	if (base > 0 && v > LLONG_MAX - base)
		return -1;
	*when = v + base;
	return 0;
}

/* ---- EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT ---- */

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* NX | XX | GT | LT after the time: Redis's parse, checks and texts. */
static int expire_flags(struct cmd_ctx *c, int *flags)
{
	int f = 0;
	for (int i = 3; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		if (arg_is(a, "nx"))
			f |= EXP_NX;
		else if (arg_is(a, "xx"))
			f |= EXP_XX;
		else if (arg_is(a, "gt"))
			f |= EXP_GT;
		else if (arg_is(a, "lt"))
			f |= EXP_LT;
		else {
			resp_errorf(c->out, "ERR Unsupported option %.*s", (int)a->len, a->p);
			return -1;
		}
	}
	if ((f & EXP_NX) && (f & (EXP_XX | EXP_GT | EXP_LT))) {
		resp_error(c->out, "ERR NX and XX, GT or LT options at the same time are not "
			   "compatible");
		return -1;
	}
	if ((f & EXP_GT) && (f & EXP_LT)) {
		resp_error(c->out, "ERR GT and LT options at the same time are not compatible");
		return -1;
	}
	*flags = f;
	return 0;
}

/* Does the new expiry `when` pass the flags, against the key's `cur` (0:
 * none, which counts as infinite)? */
static bool expire_allowed(int f, long long when, long long cur)
{
	if ((f & EXP_NX) && cur)
		return false;
	if ((f & EXP_XX) && !cur)
		return false;
	if ((f & EXP_GT) && (!cur || when <= cur))
		return false;
	if ((f & EXP_LT) && cur && when >= cur)
		return false;
	return true;
}

static int expire_generic(struct cmd_ctx *c, const char *name, bool seconds, bool relative)
{
	size_t mark = c->out->len;
	long long v, when;
	int flags, rc;

	if (expire_flags(c, &flags))
		return 0;
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &v) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (expire_at_ms(v, seconds, relative ? txn_now_ms(c->txn) : 0, &when)) {
		cmd_reply_bad_expire(c, name);
		return 0;
	}
	const char *val;
	size_t vlen;
	bool found;
	struct txn_meta m;
	rc = txn_get_meta(c->txn, KEY(c, 1), &val, &vlen, &found, &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!found || !expire_allowed(flags, when, m.expire_ms)) {
		resp_int(c->out, 0);
		return 0;
	}
	/* At or before now, the key goes at once (txn_set_meta): reply 1, as
	 * Redis does. A time of 0 would read as "never": it is past too. */
	m.expire_ms = when > 0 ? when : 1;
	rc = txn_set_meta(c->txn, KEY(c, 1), val, vlen, &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_int(c->out, 1);
	return 0;
}

int cmd_expire(struct cmd_ctx *c)
{
	return expire_generic(c, "expire", true, true);
}

int cmd_pexpire(struct cmd_ctx *c)
{
	return expire_generic(c, "pexpire", false, true);
}

int cmd_expireat(struct cmd_ctx *c)
{
	return expire_generic(c, "expireat", true, false);
}

int cmd_pexpireat(struct cmd_ctx *c)
{
	return expire_generic(c, "pexpireat", false, false);
}

/* ---- TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST ---- */

enum ttl_form { TTL_S, TTL_MS, AT_S, AT_MS };

static int ttl_generic(struct cmd_ctx *c, enum ttl_form form)
{
	const char *val;
	size_t vlen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, KEY(c, 1), &val, &vlen, &found, &m);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	if (!found) {
		resp_int(c->out, -2);
		return 0;
	}
	if (!m.expire_ms) {
		resp_int(c->out, -1);
		return 0;
	}
	long long left = m.expire_ms - txn_now_ms(c->txn);
	if (left < 0)
		left = 0;
	switch (form) {
	case TTL_S:
		resp_int(c->out, (left + 500) / 1000);
		break;
	case TTL_MS:
		resp_int(c->out, left);
		break;
	case AT_S:
		resp_int(c->out, m.expire_ms / 1000);
		break;
	case AT_MS:
		resp_int(c->out, m.expire_ms);
		break;
	}
	return 0;
}

int cmd_ttl(struct cmd_ctx *c)
{
	return ttl_generic(c, TTL_S);
}

int cmd_pttl(struct cmd_ctx *c)
{
	return ttl_generic(c, TTL_MS);
}

int cmd_expiretime(struct cmd_ctx *c)
{
	return ttl_generic(c, AT_S);
}

int cmd_pexpiretime(struct cmd_ctx *c)
{
	return ttl_generic(c, AT_MS);
}

int cmd_persist(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	const char *val;
	size_t vlen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, KEY(c, 1), &val, &vlen, &found, &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!found || !m.expire_ms) {
		resp_int(c->out, 0);
		return 0;
	}
	m.expire_ms = 0;
	rc = txn_set_meta(c->txn, KEY(c, 1), val, vlen, &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_int(c->out, 1);
	return 0;
}

/* ---- GETEX, SETEX, PSETEX ---- */

/*
 * GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the value, and its
 * expiry set or removed. One option at most (the same one repeated: the
 * last wins), anything else a syntax error, as Redis parses it.
 */
int cmd_getex(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	enum { NONE, EX, PX, EXAT, PXAT, PERSIST } opt = NONE;
	const struct resp_arg *tv = NULL;
	for (int i = 2; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		int o = arg_is(a, "ex") ? EX : arg_is(a, "px") ? PX : arg_is(a, "exat") ? EXAT
			: arg_is(a, "pxat") ? PXAT : arg_is(a, "persist") ? PERSIST : NONE;
		if (o == NONE || (opt != NONE && opt != o) || (o != PERSIST && i + 1 >= c->argc)) {
			cmd_reply_syntax(c);
			return 0;
		}
		opt = o;
		if (o != PERSIST)
			tv = &c->argv[++i];
	}
	long long when = 0;
	if (tv) {
		long long v;
		if (srv_str2ll(tv->p, tv->len, &v) != 0) {
			cmd_reply_not_int(c);
			return 0;
		}
		const bool relative = opt == EX || opt == PX;
		if (v <= 0 || expire_at_ms(v, opt == EX || opt == EXAT,
					   relative ? txn_now_ms(c->txn) : 0, &when)) {
			cmd_reply_bad_expire(c, "getex");
			return 0;
		}
	}
	const char *val;
	size_t vlen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, KEY(c, 1), &val, &vlen, &found, &m);
	if (rc == 0 && found && m.type != TXN_T_STRING)
		rc = COLL_EWRONGTYPE;
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	cmd_count_lookup(c, found);
	if (!found) {
		resp_null(c->out);
		return 0;
	}
	resp_bulk(c->out, val, vlen); /* before the write: val dies with it */
	if (opt == NONE || (opt == PERSIST && !m.expire_ms))
		return 0;
	m.expire_ms = opt == PERSIST ? 0 : when;
	rc = txn_set_meta(c->txn, KEY(c, 1), val, vlen, &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	return 0;
}

static int setex_generic(struct cmd_ctx *c, const char *name, bool seconds)
{
	size_t mark = c->out->len;
	long long v, when;
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &v) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (v <= 0 || expire_at_ms(v, seconds, txn_now_ms(c->txn), &when)) {
		cmd_reply_bad_expire(c, name);
		return 0;
	}
	const struct txn_meta m = { .type = TXN_T_STRING, .expire_ms = when };
	int rc = txn_set_meta(c->txn, KEY(c, 1), KEY(c, 3), &m);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_status(c->out, "OK");
	return 0;
}

int cmd_setex(struct cmd_ctx *c)
{
	return setex_generic(c, "setex", true);
}

int cmd_psetex(struct cmd_ctx *c)
{
	return setex_generic(c, "psetex", false);
}

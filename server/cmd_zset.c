/*
 * cmd_zset: the sorted set commands, with Redis 7.0's replies and error
 * texts: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK,
 * ZCOUNT, ZLEXCOUNT, ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and
 * its legacy forms, ZRANGESTORE, ZREMRANGEBYRANK/SCORE/LEX, ZPOPMIN,
 * ZPOPMAX, ZMPOP, ZRANDMEMBER, ZSCAN (cmd_hash.c's scan), and BZPOPMIN,
 * BZPOPMAX, BZMPOP without blocking (below). ZUNION, ZINTER, ZDIFF, their
 * STORE forms and ZINTERCARD are in cmd_zsetop.c.
 *
 * A sorted set is server/zset.h's dict and order. Handlers follow
 * cmd_set.c's shape: arguments parsed and checked first (Redis's order
 * of errors), then the keys opened in the command's transaction, changes
 * through zs_*, zs_save. Scores are replied with resp_double: "%.17g"
 * text in RESP2, a double in RESP3, inf and -inf by name, as Redis 7.0.
 *
 * Blocking: BZPOPMIN, BZPOPMAX and BZMPOP answer as their non-blocking
 * forms when a key has elements. When every key is empty or missing
 * they would block; rckv does not park clients yet, so they reply
 * BLOCK_ERR at once (inside MULTI, where Redis never blocks, the null
 * array Redis gives on a timeout).
 */
#include <ck_pr.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/client.h"
#include "server/cmd_zset.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

#define BLOCK_ERR "ERR rckv does not block: every key given is empty or missing"

int zcmd_open(struct cmd_ctx *c, const char *key, size_t klen, struct zset *z)
{
	uint64_t e = 128, v = 64;
	if (c->node) {
		e = (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.zset_max_entries);
		v = (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.zset_max_value);
	}
	return zs_open(c->txn, key, klen, e, v, z);
}

void zcmd_init(struct cmd_ctx *c, const char *key, size_t klen, struct zset *z)
{
	uint64_t e = 128, v = 64;
	if (c->node) {
		e = (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.zset_max_entries);
		v = (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.zset_max_value);
	}
	zs_init(z, c->txn, key, klen, e, v);
}

static int zfail(struct cmd_ctx *c, struct zset *z, size_t mark, int rc)
{
	zs_free(z);
	return cmd_txn_failed(c, mark, rc);
}

/* Redis's getDoubleFromObject: strtod over the whole text, no leading
 * space, no NaN, no overflow. */
/* strtod over p[0..n), NUL-terminated in a copy (long texts are valid:
 * DBL_MAX written out is 310 digits). *used: the characters it took. */
static int strtod_n(const char *p, size_t n, double *v, size_t *used, int *err)
{
	char stack[128], *end;
	char *buf = n < sizeof(stack) ? stack : malloc(n + 1);
	if (!buf)
		return -1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	*v = strtod(buf, &end);
	*err = errno;
	*used = (size_t)(end - buf);
	if (buf != stack)
		free(buf);
	return 0;
}

int zcmd_parse_score(const struct resp_arg *a, double *out)
{
	double v;
	size_t used;
	int err;
	if (a->len == 0 || a->p[0] == ' ' || (a->p[0] >= '\t' && a->p[0] <= '\r') ||
	    strtod_n(a->p, a->len, &v, &used, &err))
		return -1;
	if (used != a->len || isnan(v) ||
	    (err == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)))
		return -1;
	*out = v;
	return 0;
}

void zcmd_reply_elem(struct cmd_ctx *c, const char *m, size_t ml, double s, bool withscores)
{
	if (withscores && c->out->proto == 3)
		resp_array(c->out, 2);
	resp_bulk(c->out, m, ml);
	if (withscores)
		resp_double(c->out, s);
}

void zcmd_reply_list(struct cmd_ctx *c, const struct zlist *l, bool withscores)
{
	resp_array(c->out, (long)(withscores && c->out->proto != 3 ? 2 * l->n : l->n));
	for (size_t i = 0; i < l->n; i++)
		zcmd_reply_elem(c, l->e[i].m, l->e[i].ml, l->e[i].score, withscores);
}

/* ---- element lists, members copied ---- */

int zlist_add(struct zlist *l, double s, const char *m, size_t ml)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct zs_elem *p = realloc(l->e, cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		l->e = p;
		l->cap = cap;
	}
	char *cp = malloc(ml ? ml : 1);
	if (!cp)
		return CC_EINTERNAL;
	if (ml)
		memcpy(cp, m, ml);
	l->e[l->n++] = (struct zs_elem){ .score = s, .m = cp, .ml = ml };
	return CC_OK;
}

void zlist_free(struct zlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->e[i].m);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

struct take {
	struct zlist *l;
	uint64_t left;
	int rc;
};

static int take_one(void *arg, const struct zs_elem *e)
{
	struct take *t = arg;
	if (!t->left)
		return 1;
	if ((t->rc = zlist_add(t->l, e->score, e->m, e->ml)))
		return 1;
	return --t->left == 0;
}

/* n elements from rank `from` on (down with rev), into l; their chunks
 * read ahead (for a change, with write). */
static int take(struct zset *z, uint64_t from, bool rev, uint64_t n, struct zlist *l, bool write)
{
	if (n == 0)
		return CC_OK;
	struct take t = { .l = l, .left = n };
	uint64_t lo = rev ? (from + 1 >= n ? from + 1 - n : 0) : from;
	int rc = zs_prefetch(z, lo, lo + n, write);
	if (rc == 0)
		rc = zs_walk(z, from, rev, take_one, &t);
	return rc ? rc : t.rc;
}

/* ---- ranges ---- */

struct srange {
	double min, max;
	bool minex, maxex;
};

/* Redis's zslParseRange item: "(" for exclusive, then strtod of the
 * rest (an empty rest is 0, as strtod leaves it), not NaN. */
static int parse_score_item(const struct resp_arg *a, double *v, bool *ex)
{
	const char *p = a->p;
	size_t n = a->len, used;
	int err;
	*ex = false;
	if (n && p[0] == '(') {
		*ex = true;
		p++;
		n--;
	}
	if (strtod_n(p, n, v, &used, &err) || used != n || isnan(*v))
		return -1;
	return 0;
}

static int parse_srange(const struct resp_arg *min, const struct resp_arg *max, struct srange *r)
{
	if (parse_score_item(min, &r->min, &r->minex) || parse_score_item(max, &r->max, &r->maxex))
		return -1;
	return 0;
}

/* A lex bound: -, +, or a member with "(" or "[". */
struct lbound {
	int inf; /* -1: "-", 1: "+", 0: a member */
	bool ex;
	const char *p;
	size_t n;
};

struct lrange {
	struct lbound min, max;
};

static int parse_lbound(const struct resp_arg *a, struct lbound *b)
{
	memset(b, 0, sizeof(*b));
	if (a->len == 0)
		return -1;
	switch (a->p[0]) {
	case '+':
	case '-':
		if (a->len != 1)
			return -1;
		b->inf = a->p[0] == '+' ? 1 : -1;
		b->ex = true;
		return 0;
	case '(':
	case '[':
		b->ex = a->p[0] == '(';
		b->p = a->p + 1;
		b->n = a->len - 1;
		return 0;
	default:
		return -1;
	}
}

static int parse_lrange(const struct resp_arg *min, const struct resp_arg *max, struct lrange *r)
{
	return parse_lbound(min, &r->min) || parse_lbound(max, &r->max) ? -1 : 0;
}

static int mcmp(const char *a, size_t al, const char *b, size_t bl)
{
	size_t l = al < bl ? al : bl;
	int r = l ? memcmp(a, b, l) : 0;
	return r ? r : (al < bl ? -1 : al > bl);
}

/* The predicates of zs_count_prefix: "before the range's start", "not
 * after its end". */
static bool score_below_min(void *arg, double s, const char *m, size_t ml)
{
	const struct srange *r = arg;
	(void)m;
	(void)ml;
	return r->minex ? s <= r->min : s < r->min;
}

static bool score_upto_max(void *arg, double s, const char *m, size_t ml)
{
	const struct srange *r = arg;
	(void)m;
	(void)ml;
	return r->maxex ? s < r->max : s <= r->max;
}

static bool lex_below_min(void *arg, double s, const char *m, size_t ml)
{
	const struct lbound *b = &((const struct lrange *)arg)->min;
	(void)s;
	if (b->inf)
		return b->inf > 0;
	int c = mcmp(m, ml, b->p, b->n);
	return b->ex ? c <= 0 : c < 0;
}

static bool lex_upto_max(void *arg, double s, const char *m, size_t ml)
{
	const struct lbound *b = &((const struct lrange *)arg)->max;
	(void)s;
	if (b->inf)
		return b->inf > 0;
	int c = mcmp(m, ml, b->p, b->n);
	return b->ex ? c < 0 : c <= 0;
}

/* The ranks [*lo, *hi) a score or lex range covers. */
static int range_ranks(struct zset *z, bool lex, void *range, uint64_t *lo, uint64_t *hi)
{
	int rc = zs_count_prefix(z, lex ? lex_below_min : score_below_min, range, lo);
	if (rc == 0)
		rc = zs_count_prefix(z, lex ? lex_upto_max : score_upto_max, range, hi);
	if (rc == 0 && *hi < *lo)
		*hi = *lo;
	return rc;
}

/* Z*RANGE's start and stop, Redis's way: [*from, *from + *n). */
static void rank_window(long long start, long long end, uint64_t llen, uint64_t *from, uint64_t *n)
{
	long long l = (long long)llen;
	if (start < 0)
		start += l;
	if (end < 0)
		end += l;
	if (start < 0)
		start = 0;
	*n = 0;
	*from = 0;
	if (start > end || start >= l)
		return;
	if (end >= l)
		end = l - 1;
	*from = (uint64_t)start;
	*n = (uint64_t)(end - start + 1);
}

/* ---- ZADD, ZINCRBY ---- */

enum { ZA_NX = 1, ZA_XX = 2, ZA_GT = 4, ZA_LT = 8, ZA_CH = 16, ZA_INCR = 32 };

static int zadd_generic(struct cmd_ctx *c, int flags, int first)
{
	size_t mark = c->out->len;
	int i = first;
	for (; i < c->argc; i++) {
		if (arg_is(&c->argv[i], "nx"))
			flags |= ZA_NX;
		else if (arg_is(&c->argv[i], "xx"))
			flags |= ZA_XX;
		else if (arg_is(&c->argv[i], "gt"))
			flags |= ZA_GT;
		else if (arg_is(&c->argv[i], "lt"))
			flags |= ZA_LT;
		else if (arg_is(&c->argv[i], "ch"))
			flags |= ZA_CH;
		else if (arg_is(&c->argv[i], "incr"))
			flags |= ZA_INCR;
		else
			break;
	}
	int elements = c->argc - i;
	if (elements % 2 || elements == 0) {
		cmd_reply_syntax(c);
		return 0;
	}
	elements /= 2;
	if ((flags & ZA_NX) && (flags & ZA_XX)) {
		resp_error(c->out, "ERR XX and NX options at the same time are not compatible");
		return 0;
	}
	if (((flags & ZA_GT) && (flags & ZA_NX)) || ((flags & ZA_LT) && (flags & ZA_NX)) ||
	    ((flags & ZA_GT) && (flags & ZA_LT))) {
		resp_error(c->out, "ERR GT, LT, and/or NX options at the same time are not compatible");
		return 0;
	}
	if ((flags & ZA_INCR) && elements > 1) {
		resp_error(c->out, "ERR INCR option supports a single increment-element pair");
		return 0;
	}
	double *scores = malloc((size_t)elements * sizeof(double));
	if (!scores)
		return cmd_txn_failed(c, mark, CC_EINTERNAL);
	for (int k = 0; k < elements; k++)
		if (zcmd_parse_score(&c->argv[i + 2 * k], &scores[k])) {
			free(scores);
			resp_error(c->out, "ERR value is not a valid float");
			return 0;
		}
	struct zset z;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	long long added = 0, updated = 0, processed = 0;
	double last = 0;
	bool nan = false;
	for (int k = 0; rc == 0 && k < elements && (z.d.exists || !(flags & ZA_XX)); k++) {
		const struct resp_arg *m = &c->argv[i + 2 * k + 1];
		double s = scores[k], cur;
		bool found, add;
		if ((rc = zs_score(&z, m->p, m->len, &cur, &found)))
			break;
		if (found) {
			if (flags & ZA_NX)
				continue;
			if (flags & ZA_INCR) {
				s += cur;
				if (isnan(s)) {
					nan = true;
					break;
				}
			}
			if (((flags & ZA_GT) && s <= cur) || ((flags & ZA_LT) && s >= cur))
				continue;
			last = s;
			processed++;
			if (s != cur) {
				rc = zs_put(&z, m->p, m->len, s, &add);
				updated++;
			}
		} else {
			if (flags & ZA_XX)
				continue;
			last = s;
			processed++;
			rc = zs_put(&z, m->p, m->len, s, &add);
			added++;
		}
	}
	free(scores);
	if (rc == 0)
		rc = zs_save(&z);
	if (rc)
		return zfail(c, &z, mark, rc);
	zs_free(&z);
	if (nan) {
		/* Redis replies the error after the elements before it (INCR has
		 * one element: nothing was written). */
		resp_error(c->out, "ERR resulting score is not a number (NaN)");
		return 0;
	}
	if (flags & ZA_INCR) {
		if (processed)
			resp_double(c->out, last);
		else
			resp_null(c->out);
	} else {
		resp_int(c->out, (flags & ZA_CH) ? added + updated : added);
	}
	return 0;
}

int cmd_zadd(struct cmd_ctx *c)
{
	return zadd_generic(c, 0, 2);
}

int cmd_zincrby(struct cmd_ctx *c)
{
	return zadd_generic(c, ZA_INCR, 2);
}

/* ---- ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK ---- */

int cmd_zrem(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct zset z;
	long long n = 0;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	for (int i = 2; rc == 0 && z.d.exists && i < c->argc; i++) {
		bool removed;
		rc = zs_del(&z, KEY(c, i), &removed);
		n += removed;
	}
	if (rc == 0)
		rc = zs_save(&z);
	if (rc)
		return zfail(c, &z, mark, rc);
	zs_free(&z);
	resp_int(c->out, n);
	return 0;
}

int cmd_zcard(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct zset z;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc)
		return zfail(c, &z, mark, rc);
	resp_int(c->out, (long long)zs_len(&z));
	zs_free(&z);
	return 0;
}

static int score_generic(struct cmd_ctx *c, bool many)
{
	size_t mark = c->out->len;
	struct zset z;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc)
		return zfail(c, &z, mark, rc);
	if (many)
		resp_array(c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		double s;
		bool found;
		if ((rc = zs_score(&z, KEY(c, i), &s, &found)))
			return zfail(c, &z, mark, rc);
		if (found)
			resp_double(c->out, s);
		else
			resp_null(c->out);
	}
	zs_free(&z);
	return 0;
}

int cmd_zscore(struct cmd_ctx *c)
{
	return score_generic(c, false);
}

int cmd_zmscore(struct cmd_ctx *c)
{
	return score_generic(c, true);
}

struct before {
	double s;
	const char *m;
	size_t ml;
};

static bool elem_before(void *arg, double s, const char *m, size_t ml)
{
	const struct before *b = arg;
	if (s != b->s)
		return s < b->s;
	return mcmp(m, ml, b->m, b->ml) < 0;
}

static int rank_generic(struct cmd_ctx *c, bool rev)
{
	size_t mark = c->out->len;
	struct zset z;
	double s;
	bool found;
	uint64_t r;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc == 0)
		rc = zs_score(&z, KEY(c, 2), &s, &found);
	if (rc)
		return zfail(c, &z, mark, rc);
	if (!found) {
		zs_free(&z);
		resp_null(c->out);
		return 0;
	}
	struct before b = { .s = s, .m = c->argv[2].p, .ml = c->argv[2].len };
	if ((rc = zs_count_prefix(&z, elem_before, &b, &r)))
		return zfail(c, &z, mark, rc);
	resp_int(c->out, (long long)(rev ? zs_len(&z) - 1 - r : r));
	zs_free(&z);
	return 0;
}

int cmd_zrank(struct cmd_ctx *c)
{
	return rank_generic(c, false);
}

int cmd_zrevrank(struct cmd_ctx *c)
{
	return rank_generic(c, true);
}

/* ---- ZCOUNT, ZLEXCOUNT ---- */

static int count_generic(struct cmd_ctx *c, bool lex)
{
	size_t mark = c->out->len;
	struct srange sr;
	struct lrange lr;
	if (lex ? parse_lrange(&c->argv[2], &c->argv[3], &lr)
		: parse_srange(&c->argv[2], &c->argv[3], &sr)) {
		resp_error(c->out, lex ? "ERR min or max not valid string range item"
				       : "ERR min or max is not a float");
		return 0;
	}
	struct zset z;
	uint64_t lo = 0, hi = 0;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc == 0 && z.d.exists)
		rc = range_ranks(&z, lex, lex ? (void *)&lr : (void *)&sr, &lo, &hi);
	if (rc)
		return zfail(c, &z, mark, rc);
	zs_free(&z);
	resp_int(c->out, (long long)(hi - lo));
	return 0;
}

int cmd_zcount(struct cmd_ctx *c)
{
	return count_generic(c, false);
}

int cmd_zlexcount(struct cmd_ctx *c)
{
	return count_generic(c, true);
}

/* ---- ZRANGE and its forms ---- */

enum rtype { RT_AUTO, RT_RANK, RT_SCORE, RT_LEX };

struct rspec {
	enum rtype type;
	int dir; /* 0 auto, 1 forward, -1 reverse */
	bool withscores;
	long long offset, limit, start, end;
	struct srange sr;
	struct lrange lr;
};

/*
 * Redis's zrangeGenericCommand's parsing: the options after key min max
 * (argv[first..]), conflicts, then the range. 0, or -1 with the error
 * replied.
 */
static int rspec_parse(struct cmd_ctx *c, int keyidx, bool store, struct rspec *r)
{
	int minidx = keyidx + 1, maxidx = keyidx + 2;
	r->offset = 0;
	r->limit = -1;
	for (int j = keyidx + 3; j < c->argc; j++) {
		int left = c->argc - j - 1;
		if (!store && arg_is(&c->argv[j], "withscores")) {
			r->withscores = true;
		} else if (arg_is(&c->argv[j], "limit") && left >= 2) {
			if (srv_str2ll(KEY(c, j + 1), &r->offset) ||
			    srv_str2ll(KEY(c, j + 2), &r->limit)) {
				cmd_reply_not_int(c);
				return -1;
			}
			j += 2;
		} else if (r->dir == 0 && arg_is(&c->argv[j], "rev")) {
			r->dir = -1;
		} else if (r->type == RT_AUTO && arg_is(&c->argv[j], "bylex")) {
			r->type = RT_LEX;
		} else if (r->type == RT_AUTO && arg_is(&c->argv[j], "byscore")) {
			r->type = RT_SCORE;
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
	}
	if (r->dir == 0)
		r->dir = 1;
	if (r->type == RT_AUTO)
		r->type = RT_RANK;
	if (r->limit != -1 && r->type == RT_RANK) {
		resp_error(c->out, "ERR syntax error, LIMIT is only supported in combination with "
				   "either BYSCORE or BYLEX");
		return -1;
	}
	if (r->withscores && r->type == RT_LEX) {
		resp_error(c->out,
			   "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
		return -1;
	}
	if (r->dir < 0 && r->type != RT_RANK) {
		int t = minidx;
		minidx = maxidx;
		maxidx = t;
	}
	switch (r->type) {
	case RT_SCORE:
		if (parse_srange(&c->argv[minidx], &c->argv[maxidx], &r->sr)) {
			resp_error(c->out, "ERR min or max is not a float");
			return -1;
		}
		break;
	case RT_LEX:
		if (parse_lrange(&c->argv[minidx], &c->argv[maxidx], &r->lr)) {
			resp_error(c->out, "ERR min or max not valid string range item");
			return -1;
		}
		break;
	default:
		if (srv_str2ll(KEY(c, minidx), &r->start) || srv_str2ll(KEY(c, maxidx), &r->end)) {
			cmd_reply_not_int(c);
			return -1;
		}
	}
	return 0;
}

/* The elements a parsed range selects, in reply order. */
static int rspec_run(struct zset *z, struct rspec *r, struct zlist *out, bool write)
{
	uint64_t llen = zs_len(z), from, n;
	bool rev = r->dir < 0;
	if (llen == 0)
		return CC_OK;
	if (r->type == RT_RANK) {
		rank_window(r->start, r->end, llen, &from, &n);
		if (n == 0)
			return CC_OK;
		return take(z, rev ? llen - 1 - from : from, rev, n, out, write);
	}
	if (r->offset < 0 || (r->offset > 0 && (uint64_t)r->offset >= llen))
		return CC_OK;
	uint64_t lo, hi;
	int rc = range_ranks(z, r->type == RT_LEX, r->type == RT_LEX ? (void *)&r->lr
								   : (void *)&r->sr,
			     &lo, &hi);
	if (rc || hi - lo <= (uint64_t)r->offset)
		return rc;
	n = hi - lo - (uint64_t)r->offset;
	if (r->limit >= 0 && (uint64_t)r->limit < n)
		n = (uint64_t)r->limit;
	from = rev ? hi - 1 - (uint64_t)r->offset : lo + (uint64_t)r->offset;
	return take(z, from, rev, n, out, write);
}

static int zrange_generic(struct cmd_ctx *c, enum rtype type, int dir)
{
	size_t mark = c->out->len;
	struct rspec r = { .type = type, .dir = dir };
	if (rspec_parse(c, 1, false, &r))
		return 0;
	struct zset z;
	struct zlist l = { 0 };
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc == 0)
		rc = rspec_run(&z, &r, &l, false);
	if (rc) {
		zlist_free(&l);
		return zfail(c, &z, mark, rc);
	}
	zcmd_reply_list(c, &l, r.withscores);
	zlist_free(&l);
	zs_free(&z);
	return 0;
}

int cmd_zrange(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_AUTO, 0);
}

int cmd_zrevrange(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_RANK, -1);
}

int cmd_zrangebyscore(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_SCORE, 1);
}

int cmd_zrevrangebyscore(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_SCORE, -1);
}

int cmd_zrangebylex(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_LEX, 1);
}

int cmd_zrevrangebylex(struct cmd_ctx *c)
{
	return zrange_generic(c, RT_LEX, -1);
}

int zcmd_store(struct cmd_ctx *c, const char *key, size_t klen, const struct zlist *l)
{
	bool existed, added;
	if (l->n == 0)
		return txn_del(c->txn, key, klen, &existed);
	struct zset d;
	zcmd_init(c, key, klen, &d);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < l->n; i++)
		rc = zs_put(&d, l->e[i].m, l->e[i].ml, l->e[i].score, &added);
	if (rc == 0)
		rc = zs_save(&d);
	zs_free(&d);
	return rc;
}

int cmd_zrangestore(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct rspec r = { .type = RT_AUTO };
	if (rspec_parse(c, 2, true, &r))
		return 0;
	struct zset z;
	struct zlist l = { 0 };
	int rc = zcmd_open(c, KEY(c, 2), &z);
	if (rc == 0)
		rc = rspec_run(&z, &r, &l, false);
	if (rc == 0)
		rc = zcmd_store(c, KEY(c, 1), &l);
	if (rc) {
		zlist_free(&l);
		return zfail(c, &z, mark, rc);
	}
	resp_int(c->out, (long long)l.n);
	zlist_free(&l);
	zs_free(&z);
	return 0;
}

/* ---- ZREMRANGEBYRANK, BYSCORE, BYLEX ---- */

static int remove_all(struct zset *z, const struct zlist *l)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < l->n; i++) {
		bool removed;
		rc = zs_del(z, l->e[i].m, l->e[i].ml, &removed);
	}
	return rc;
}

static int zremrange_generic(struct cmd_ctx *c, enum rtype type)
{
	size_t mark = c->out->len;
	struct rspec r = { .type = type, .dir = 1, .limit = -1 };
	if (type == RT_RANK) {
		if (srv_str2ll(KEY(c, 2), &r.start) || srv_str2ll(KEY(c, 3), &r.end)) {
			cmd_reply_not_int(c);
			return 0;
		}
	} else if (type == RT_SCORE ? parse_srange(&c->argv[2], &c->argv[3], &r.sr)
				    : parse_lrange(&c->argv[2], &c->argv[3], &r.lr)) {
		resp_error(c->out, type == RT_SCORE ? "ERR min or max is not a float"
						    : "ERR min or max not valid string range item");
		return 0;
	}
	struct zset z;
	struct zlist l = { 0 };
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc == 0)
		rc = rspec_run(&z, &r, &l, true);
	if (rc == 0)
		rc = remove_all(&z, &l);
	if (rc == 0)
		rc = zs_save(&z);
	if (rc) {
		zlist_free(&l);
		return zfail(c, &z, mark, rc);
	}
	resp_int(c->out, (long long)l.n);
	zlist_free(&l);
	zs_free(&z);
	return 0;
}

int cmd_zremrangebyrank(struct cmd_ctx *c)
{
	return zremrange_generic(c, RT_RANK);
}

int cmd_zremrangebyscore(struct cmd_ctx *c)
{
	return zremrange_generic(c, RT_SCORE);
}

int cmd_zremrangebylex(struct cmd_ctx *c)
{
	return zremrange_generic(c, RT_LEX);
}

/* ---- ZPOPMIN, ZPOPMAX, ZMPOP and the blocking forms ---- */

enum pop_shape {
	POP_FLAT,   /* ZPOPMIN: [m, s, ...] */
	POP_NESTED, /* ZPOPMIN with COUNT in RESP3: [[m, s], ...] */
	POP_KEYED,  /* BZPOPMIN: [key, m, s] */
	POP_MPOP,   /* ZMPOP: [key, [[m, s], ...]] */
};

/*
 * Redis's genericZpopCommand: the first key (of keys first..first+nkeys)
 * that exists (each type checked up to it), count elements from its min
 * or max end. *popped: a key had elements (else nothing was replied).
 */
static int pop_generic(struct cmd_ctx *c, int first, int nkeys, bool max, long long count,
		       enum pop_shape shape, bool *popped)
{
	struct zset z;
	int rc = 0;
	*popped = false;
	int k = first;
	for (; k < first + nkeys; k++) {
		if ((rc = zcmd_open(c, KEY(c, k), &z)))
			break;
		if (z.d.exists)
			break;
		zs_free(&z);
	}
	if (rc) {
		zs_free(&z);
		return rc;
	}
	if (k == first + nkeys)
		return CC_OK;
	*popped = true;
	if (count == 0) {
		zs_free(&z);
		resp_array(c->out, 0);
		return CC_OK;
	}
	struct zlist l = { 0 };
	uint64_t llen = zs_len(&z), n = (uint64_t)count < llen ? (uint64_t)count : llen;
	rc = take(&z, max ? llen - 1 : 0, max, n, &l, true);
	if (rc == 0)
		rc = remove_all(&z, &l);
	if (rc == 0)
		rc = zs_save(&z);
	if (rc == 0) {
		bool nested = shape == POP_NESTED || shape == POP_MPOP;
		if (shape == POP_FLAT)
			resp_array(c->out, (long)(2 * l.n));
		else if (shape == POP_NESTED)
			resp_array(c->out, (long)l.n);
		else if (shape == POP_KEYED)
			resp_array(c->out, (long)(2 * l.n + 1));
		if (shape == POP_KEYED || shape == POP_MPOP) {
			if (shape == POP_MPOP)
				resp_array(c->out, 2);
			resp_bulk(c->out, KEY(c, k));
			if (shape == POP_MPOP)
				resp_array(c->out, (long)l.n);
		}
		for (size_t i = 0; i < l.n; i++) {
			if (nested)
				resp_array(c->out, 2);
			resp_bulk(c->out, l.e[i].m, l.e[i].ml);
			resp_double(c->out, l.e[i].score);
		}
	}
	zlist_free(&l);
	zs_free(&z);
	return rc;
}

static int zpop_cmd(struct cmd_ctx *c, bool max)
{
	size_t mark = c->out->len;
	long long count = -1;
	if (c->argc > 3) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (c->argc == 3) {
		if (srv_str2ll(KEY(c, 2), &count) || count < 0) {
			resp_error(c->out, "ERR value is out of range, must be positive");
			return 0;
		}
	}
	bool nested = c->out->proto == 3 && count != -1, popped;
	int rc = pop_generic(c, 1, 1, max, count == -1 ? 1 : count,
			     nested ? POP_NESTED : POP_FLAT, &popped);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!popped)
		resp_array(c->out, 0);
	return 0;
}

int cmd_zpopmin(struct cmd_ctx *c)
{
	return zpop_cmd(c, false);
}

int cmd_zpopmax(struct cmd_ctx *c)
{
	return zpop_cmd(c, true);
}

/* Would a blocking command block here? Redis never blocks inside MULTI
 * or a script: it answers as on a timeout. */
static void reply_would_block(struct cmd_ctx *c)
{
	if (!c->cl || (c->cl->flags & CL_MULTI))
		resp_null_array(c->out);
	else
		resp_error(c->out, BLOCK_ERR);
}

/* Redis's getTimeoutFromObjectOrReply, seconds as a float. */
static int parse_timeout(struct cmd_ctx *c, const struct resp_arg *a)
{
	long double v;
	if (srv_str2ld(a->p, a->len, &v) || isinf(v)) {
		resp_error(c->out, "ERR timeout is not a float or out of range");
		return -1;
	}
	if (v < 0) {
		resp_error(c->out, "ERR timeout is negative");
		return -1;
	}
	return 0;
}

static int bzpop_cmd(struct cmd_ctx *c, bool max)
{
	size_t mark = c->out->len;
	if (parse_timeout(c, &c->argv[c->argc - 1]))
		return 0;
	bool popped;
	int rc = pop_generic(c, 1, c->argc - 2, max, 1, POP_KEYED, &popped);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!popped)
		reply_would_block(c);
	return 0;
}

int cmd_bzpopmin(struct cmd_ctx *c)
{
	return bzpop_cmd(c, false);
}

int cmd_bzpopmax(struct cmd_ctx *c)
{
	return bzpop_cmd(c, true);
}

/* ZMPOP numkeys key... MIN|MAX [COUNT n]; BZMPOP timeout numkeys ... */
static int mpop_generic(struct cmd_ctx *c, int nkidx, bool block)
{
	size_t mark = c->out->len;
	long long nk, count = -1;
	bool max;
	if (block && parse_timeout(c, &c->argv[1]))
		return 0;
	if (srv_str2ll(KEY(c, nkidx), &nk) || nk < 1) {
		resp_error(c->out, "ERR numkeys should be greater than 0");
		return 0;
	}
	long long where = nkidx + nk + 1;
	if (where >= c->argc) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (arg_is(&c->argv[where], "min")) {
		max = false;
	} else if (arg_is(&c->argv[where], "max")) {
		max = true;
	} else {
		cmd_reply_syntax(c);
		return 0;
	}
	for (long long j = where + 1; j < c->argc; j++) {
		if (count == -1 && arg_is(&c->argv[j], "count") && j + 1 < c->argc) {
			j++;
			if (srv_str2ll(KEY(c, (int)j), &count) || count < 1) {
				resp_error(c->out, "ERR count should be greater than 0");
				return 0;
			}
		} else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	bool popped;
	int rc = pop_generic(c, nkidx + 1, (int)nk, max, count == -1 ? 1 : count, POP_MPOP,
			     &popped);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!popped) {
		if (block)
			reply_would_block(c);
		else
			resp_null_array(c->out);
	}
	return 0;
}

int cmd_zmpop(struct cmd_ctx *c)
{
	return mpop_generic(c, 1, false);
}

int cmd_bzmpop(struct cmd_ctx *c)
{
	return mpop_generic(c, 2, true);
}

/* numkeys at argv[nk], the keys after it. */
static int numkeys_keys(int argc, const struct resp_arg *argv, int nkidx, int *idx, int max,
			int n)
{
	long long nk;
	if (argc <= nkidx || srv_str2ll(argv[nkidx].p, argv[nkidx].len, &nk) != 0 || nk <= 0 ||
	    nk > argc - nkidx - 1)
		return n;
	for (int i = nkidx + 1; i <= nkidx + nk && n < max; i++)
		idx[n++] = i;
	return n;
}

int cmd_zmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	return numkeys_keys(argc, argv, 1, idx, max, 0);
}

int cmd_bzmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	return numkeys_keys(argc, argv, 2, idx, max, 0);
}

int cmd_zunion_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	return numkeys_keys(argc, argv, 1, idx, max, 0);
}

int cmd_zunionstore_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	if (argc < 2 || max < 1)
		return 0;
	idx[0] = 1;
	return numkeys_keys(argc, argv, 2, idx, max, 1);
}

/* ---- ZRANDMEMBER ---- */

static void shuffle_pick(struct coll_elems *a, size_t k, uint64_t *seed)
{
	for (size_t i = 0; i < k && i + 1 < a->n; i++) {
		size_t j = i + (size_t)(cmd_rnd_next(seed) % (a->n - i));
		struct coll_elem t = a->e[i];
		a->e[i] = a->e[j];
		a->e[j] = t;
	}
}

static void rand_out(struct cmd_ctx *c, const struct coll_elem *e, bool withscores)
{
	zcmd_reply_elem(c, e->f, e->fl, e->vl == 8 ? zs_score_get(e->v) : 0, withscores);
}

int cmd_zrandmember(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long count = 1;
	bool withscores = false, many = c->argc >= 3;
	if (many) {
		if (srv_str2ll(KEY(c, 2), &count)) {
			cmd_reply_not_int(c);
			return 0;
		}
		if (count < -LLONG_MAX) {
			resp_error(c->out, "ERR value is out of range, value must between "
					   "-9223372036854775807 and 9223372036854775807");
			return 0;
		}
		if (c->argc > 4 || (c->argc == 4 && !arg_is(&c->argv[3], "withscores"))) {
			cmd_reply_syntax(c);
			return 0;
		}
		if (c->argc == 4) {
			withscores = true;
			if (count < -LLONG_MAX / 2 || count > LLONG_MAX / 2) {
				resp_error(c->out, "ERR value is out of range");
				return 0;
			}
		}
	}
	struct zset z;
	uint64_t seed = cmd_rnd_seed(c);
	struct coll_elem e;
	int rc = zcmd_open(c, KEY(c, 1), &z);
	if (rc)
		return zfail(c, &z, mark, rc);
	uint64_t len = zs_len(&z);
	if (!many) {
		if (!len) {
			resp_null(c->out);
		} else {
			if ((rc = coll_random(&z.d, cmd_rnd_next(&seed), &e)))
				return zfail(c, &z, mark, rc);
			resp_bulk(c->out, e.f, e.fl);
		}
		zs_free(&z);
		return 0;
	}
	if (!len || count == 0) {
		zs_free(&z);
		resp_array(c->out, 0);
		return 0;
	}
	if (count < 0) {
		unsigned long long k = (unsigned long long)(-count);
		resp_array(c->out, (long)(withscores && c->out->proto != 3 ? 2 * k : k));
		for (unsigned long long i = 0; i < k; i++) {
			if ((rc = coll_random(&z.d, cmd_rnd_next(&seed), &e)))
				return zfail(c, &z, mark, rc);
			rand_out(c, &e, withscores);
		}
		zs_free(&z);
		return 0;
	}
	struct coll_elems a = { 0 };
	if ((rc = coll_collect(&z.d, &a))) {
		free(a.e);
		return zfail(c, &z, mark, rc);
	}
	size_t k = (unsigned long long)count < a.n ? (size_t)count : a.n;
	shuffle_pick(&a, k, &seed);
	resp_array(c->out, (long)(withscores && c->out->proto != 3 ? 2 * k : k));
	for (size_t i = 0; i < k; i++)
		rand_out(c, &a.e[i], withscores);
	free(a.e);
	zs_free(&z);
	return 0;
}

int cmd_zscan(struct cmd_ctx *c)
{
	return cmd_coll_scan(c, TXN_T_ZSET, true);
}

/*
 * cmd_zsetop: ZUNION, ZINTER, ZDIFF, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE
 * and ZINTERCARD (WEIGHTS, AGGREGATE SUM|MIN|MAX, WITHSCORES, LIMIT),
 * with Redis 7.0's replies and errors.
 *
 * As in Redis, a source may be a set (its members score 1) or a sorted
 * set; a missing key is empty. Every source is opened, its type checked,
 * before the options are parsed (Redis's order of errors). The whole
 * command, sources and destination, is one transaction wherever the keys
 * live. A STORE form overwrites the destination without reading it
 * (zcmd_store), and deletes it when the result is empty.
 *
 * Redis orders the sources of a union or intersection by size, smallest
 * first, and aggregates in that order (it decides the last bits of a
 * SUM); so does this file. A weighted score that is NaN (inf * 0) counts
 * as 0, and so does a SUM that becomes NaN (inf + -inf), as in Redis.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/cmd_zset.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/strutil.h"
#include "storage/st.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

enum zop { ZOP_UNION, ZOP_INTER, ZOP_DIFF };
enum aggr { AG_SUM, AG_MIN, AG_MAX };

struct src {
	bool is_zset, opened;
	struct zset z;  /* is_zset */
	struct coll s;  /* a set */
	double w;
	uint64_t len;
	struct coll_elems el; /* its elements, once collected */
};

static void src_free(struct src *s)
{
	if (s->opened) {
		if (s->is_zset)
			zs_free(&s->z);
		else
			coll_free(&s->s);
	}
	free(s->el.e);
}

/* Open key as a sorted set, or else as a set; WRONGTYPE for anything
 * else. */
static int src_open(struct cmd_ctx *c, const struct resp_arg *k, struct src *s)
{
	int rc = zcmd_open(c, k->p, k->len, &s->z);
	s->opened = true;
	s->is_zset = true;
	if (rc != COLL_EWRONGTYPE) {
		s->len = zs_len(&s->z);
		return rc;
	}
	zs_free(&s->z);
	s->is_zset = false;
	rc = coll_open(c->txn, k->p, k->len, TXN_T_SET, false, &s->s);
	s->len = coll_len(&s->s);
	return rc;
}

static int src_collect(struct src *s)
{
	if (s->el.n || !s->len)
		return CC_OK;
	return coll_collect(s->is_zset ? &s->z.d : &s->s, &s->el);
}

static double elem_score(const struct src *s, const struct coll_elem *e)
{
	return s->is_zset && e->vl == 8 ? zs_score_get(e->v) : 1.0;
}

static int src_lookup(struct src *s, const char *m, size_t ml, double *score, bool *found)
{
	*found = false;
	if (!s->len)
		return CC_OK;
	if (s->is_zset)
		return zs_score(&s->z, m, ml, score, found);
	const char *v;
	size_t vl;
	*score = 1.0;
	return coll_get(&s->s, m, ml, &v, &vl, found);
}

/* member -> score, open addressing (pointers kept, not copied). */
struct acc {
	struct aent {
		const char *m;
		size_t ml;
		uint64_t h;
		double s;
		bool used;
	} *t;
	size_t cap, n;
};

static struct aent *acc_find(struct acc *a, const char *m, size_t ml, bool *fresh)
{
	if (2 * (a->n + 1) > a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct aent *t = calloc(cap, sizeof(*t));
		if (!t)
			return NULL;
		for (size_t i = 0; i < a->cap; i++)
			if (a->t[i].used) {
				size_t j = a->t[i].h & (cap - 1);
				while (t[j].used)
					j = (j + 1) & (cap - 1);
				t[j] = a->t[i];
			}
		free(a->t);
		a->t = t;
		a->cap = cap;
	}
	uint64_t h = st_hash(m, ml);
	size_t j = h & (a->cap - 1);
	for (; a->t[j].used; j = (j + 1) & (a->cap - 1))
		if (a->t[j].h == h && a->t[j].ml == ml && memcmp(a->t[j].m, m, ml) == 0) {
			*fresh = false;
			return &a->t[j];
		}
	a->t[j] = (struct aent){ .m = m, .ml = ml, .h = h, .used = true };
	a->n++;
	*fresh = true;
	return &a->t[j];
}

static double weighted(double s, double w)
{
	double v = s * w;
	return isnan(v) ? 0 : v;
}

static void aggregate(double *t, double v, enum aggr ag)
{
	if (ag == AG_SUM) {
		*t += v;
		if (isnan(*t))
			*t = 0;
	} else if (ag == AG_MIN) {
		if (v < *t)
			*t = v;
	} else if (v > *t) {
		*t = v;
	}
}

static int by_len(const void *a, const void *b)
{
	const struct src *const *x = a, *const *y = b;
	if ((*x)->len != (*y)->len)
		return (*x)->len < (*y)->len ? -1 : 1;
	return *x < *y ? -1 : *x > *y;
}

static int by_order(const void *a, const void *b)
{
	const struct zs_elem *x = a, *y = b;
	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	size_t l = x->ml < y->ml ? x->ml : y->ml;
	int r = l ? memcmp(x->m, y->m, l) : 0;
	return r ? r : (x->ml < y->ml ? -1 : x->ml > y->ml);
}

/* The operation over srcs[0..n) into out (unsorted); limit: ZINTERCARD's
 * stop (0: none). */
static int compute(enum zop op, struct src *srcs, int n, enum aggr ag, uint64_t limit,
		   struct zlist *out)
{
	int rc = 0;
	struct src **ord = malloc((size_t)n * sizeof(*ord));
	if (!ord)
		return CC_EINTERNAL;
	for (int i = 0; i < n; i++)
		ord[i] = &srcs[i];
	if (op != ZOP_DIFF)
		qsort(ord, (size_t)n, sizeof(*ord), by_len);
	if (op == ZOP_UNION) {
		struct acc a = { 0 };
		for (int i = 0; rc == 0 && i < n; i++) {
			if ((rc = src_collect(ord[i])))
				break;
			for (size_t k = 0; k < ord[i]->el.n; k++) {
				const struct coll_elem *e = &ord[i]->el.e[k];
				bool fresh;
				double v = weighted(elem_score(ord[i], e), ord[i]->w);
				struct aent *t = acc_find(&a, e->f, e->fl, &fresh);
				if (!t) {
					rc = CC_EINTERNAL;
					break;
				}
				if (fresh)
					t->s = v;
				else
					aggregate(&t->s, v, ag);
			}
		}
		for (size_t j = 0; rc == 0 && j < a.cap; j++)
			if (a.t[j].used)
				rc = zlist_add(out, a.t[j].s, a.t[j].m, a.t[j].ml);
		free(a.t);
		free(ord);
		return rc;
	}
	/* INTER: the smallest source's members found in every other; DIFF:
	 * the first source's members found in no other. */
	struct src *base = ord[0];
	if (base->len == 0 || (rc = src_collect(base))) {
		free(ord);
		return rc;
	}
	for (size_t k = 0; rc == 0 && k < base->el.n; k++) {
		const struct coll_elem *e = &base->el.e[k];
		double t = elem_score(base, e);
		bool keep = true;
		if (op == ZOP_INTER)
			t = weighted(t, base->w);
		for (int i = 1; rc == 0 && i < n && keep; i++) {
			double s;
			bool found;
			if ((rc = src_lookup(ord[i], e->f, e->fl, &s, &found)))
				break;
			if (op == ZOP_DIFF)
				keep = !found;
			else if (!found)
				keep = false;
			else
				aggregate(&t, weighted(s, ord[i]->w), ag);
		}
		if (rc == 0 && keep)
			rc = zlist_add(out, t, e->f, e->fl);
		if (limit && out->n >= limit)
			break;
	}
	free(ord);
	return rc;
}

struct zop_args {
	int nsrc;
	struct src *srcs;
	enum aggr ag;
	bool withscores;
	long long limit;
};

/*
 * Redis's zunionInterDiffGenericCommand up to the computation: numkeys at
 * argv[nkidx], the sources opened and type-checked, the options. 0, -1
 * with the error replied, or a transaction error (returned as rc).
 */
static int zop_parse(struct cmd_ctx *c, int nkidx, enum zop op, bool store, bool card,
		     const char *name, struct zop_args *a, int *rc)
{
	long long nk;
	*rc = 0;
	memset(a, 0, sizeof(*a));
	if (srv_str2ll(KEY(c, nkidx), &nk)) {
		cmd_reply_not_int(c);
		return -1;
	}
	if (nk < 1) {
		resp_errorf(c->out, "ERR at least 1 input key is needed for '%s' command", name);
		return -1;
	}
	if (nk > c->argc - nkidx - 1) {
		cmd_reply_syntax(c);
		return -1;
	}
	a->srcs = calloc((size_t)nk, sizeof(*a->srcs));
	if (!a->srcs) {
		*rc = CC_EINTERNAL;
		return -1;
	}
	for (int i = 0; i < nk; i++) {
		a->nsrc++;
		a->srcs[i].w = 1;
		if ((*rc = src_open(c, &c->argv[nkidx + 1 + i], &a->srcs[i])))
			return -1;
	}
	int j = nkidx + 1 + (int)nk;
	while (j < c->argc) {
		int remaining = c->argc - j;
		if (op != ZOP_DIFF && !card && remaining >= nk + 1 && arg_is(&c->argv[j], "weights")) {
			j++;
			for (int i = 0; i < nk; i++, j++)
				if (zcmd_parse_score(&c->argv[j], &a->srcs[i].w)) {
					resp_error(c->out, "ERR weight value is not a float");
					return -1;
				}
		} else if (op != ZOP_DIFF && !card && remaining >= 2 &&
			   arg_is(&c->argv[j], "aggregate")) {
			j++;
			if (arg_is(&c->argv[j], "sum")) {
				a->ag = AG_SUM;
			} else if (arg_is(&c->argv[j], "min")) {
				a->ag = AG_MIN;
			} else if (arg_is(&c->argv[j], "max")) {
				a->ag = AG_MAX;
			} else {
				cmd_reply_syntax(c);
				return -1;
			}
			j++;
		} else if (!store && !card && arg_is(&c->argv[j], "withscores")) {
			j++;
			a->withscores = true;
		} else if (card && remaining >= 2 && arg_is(&c->argv[j], "limit")) {
			j++;
			if (srv_str2ll(KEY(c, j), &a->limit) || a->limit < 0) {
				resp_error(c->out, "ERR LIMIT can't be negative");
				return -1;
			}
			j++;
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
	}
	return 0;
}

static void zop_free(struct zop_args *a)
{
	for (int i = 0; i < a->nsrc; i++)
		src_free(&a->srcs[i]);
	free(a->srcs);
}

static int zop_cmd(struct cmd_ctx *c, enum zop op, bool store, const char *name)
{
	size_t mark = c->out->len;
	struct zop_args a;
	struct zlist l = { 0 };
	int rc;
	if (zop_parse(c, store ? 2 : 1, op, store, false, name, &a, &rc)) {
		zop_free(&a);
		return rc ? cmd_txn_failed(c, mark, rc) : 0;
	}
	rc = compute(op, a.srcs, a.nsrc, a.ag, 0, &l);
	if (rc == 0)
		qsort(l.e, l.n, sizeof(*l.e), by_order);
	if (rc == 0 && store)
		rc = zcmd_store(c, KEY(c, 1), &l);
	zop_free(&a);
	if (rc) {
		zlist_free(&l);
		return cmd_txn_failed(c, mark, rc);
	}
	if (store)
		resp_int(c->out, (long long)l.n);
	else
		zcmd_reply_list(c, &l, a.withscores);
	zlist_free(&l);
	return 0;
}

int cmd_zunion(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_UNION, false, "zunion");
}

int cmd_zinter(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_INTER, false, "zinter");
}

int cmd_zdiff(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_DIFF, false, "zdiff");
}

int cmd_zunionstore(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_UNION, true, "zunionstore");
}

int cmd_zinterstore(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_INTER, true, "zinterstore");
}

int cmd_zdiffstore(struct cmd_ctx *c)
{
	return zop_cmd(c, ZOP_DIFF, true, "zdiffstore");
}

int cmd_zintercard(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct zop_args a;
	struct zlist l = { 0 };
	int rc;
	if (zop_parse(c, 1, ZOP_INTER, false, true, "zintercard", &a, &rc)) {
		zop_free(&a);
		return rc ? cmd_txn_failed(c, mark, rc) : 0;
	}
	rc = compute(ZOP_INTER, a.srcs, a.nsrc, AG_SUM, (uint64_t)a.limit, &l);
	zop_free(&a);
	if (rc) {
		zlist_free(&l);
		return cmd_txn_failed(c, mark, rc);
	}
	resp_int(c->out, (long long)l.n);
	zlist_free(&l);
	return 0;
}

/*
 * cmd_set: the set commands (SADD, SREM, SCARD, SISMEMBER, SMISMEMBER,
 * SMEMBERS, SPOP, SRANDMEMBER, SMOVE, SINTER, SUNION, SDIFF and their
 * STORE forms, SINTERCARD, SSCAN), with Redis 7.0's replies and error
 * texts.
 *
 * A set is a collection (server/coll.h) whose elements have no value.
 * Handlers follow cmd_hash.c's shape: open every key in the command's
 * transaction (WRONGTYPE checked in Redis's order, before any write),
 * change through coll_*, coll_save. A command over several keys (SMOVE,
 * SUNIONSTORE, ...) is one transaction over all of them, wherever they
 * live. The STORE forms never read the destination's old members: its
 * root is overwritten, and its old parts, if it had any, are left to the
 * expiry scan (coll.h invariant (1)).
 */
#include <ck_pr.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"
#include "storage/st.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

static int sopen(struct cmd_ctx *c, int i, struct coll *s)
{
	int rc = coll_open(c->txn, KEY(c, i), TXN_T_SET, false, s);
	if (c->node)
		coll_set_limits(s, (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.set_max_intset), 0);
	return rc;
}

static int sfail(struct cmd_ctx *c, struct coll *s, size_t mark, int rc)
{
	coll_free(s);
	return cmd_txn_failed(c, mark, rc);
}

/* ---- SADD, SREM ---- */

int cmd_sadd(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll s;
	long long n = 0;
	int rc = sopen(c, 1, &s);
	for (int i = 2; rc == 0 && i < c->argc; i++) {
		bool add;
		rc = coll_put(&s, KEY(c, i), NULL, 0, &add);
		n += add;
	}
	if (rc == 0)
		rc = coll_save(&s);
	if (rc)
		return sfail(c, &s, mark, rc);
	coll_free(&s);
	resp_int(c->out, n);
	return 0;
}

int cmd_srem(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll s;
	long long n = 0;
	int rc = sopen(c, 1, &s);
	for (int i = 2; rc == 0 && s.exists && i < c->argc; i++) {
		bool removed;
		rc = coll_remove(&s, KEY(c, i), &removed);
		n += removed;
	}
	if (rc == 0)
		rc = coll_save(&s);
	if (rc)
		return sfail(c, &s, mark, rc);
	coll_free(&s);
	resp_int(c->out, n);
	return 0;
}

/* ---- SCARD, SISMEMBER, SMISMEMBER, SMEMBERS ---- */

int cmd_scard(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll s;
	int rc = sopen(c, 1, &s);
	if (rc)
		return sfail(c, &s, mark, rc);
	resp_int(c->out, (long long)coll_len(&s));
	coll_free(&s);
	return 0;
}

static int ismember_generic(struct cmd_ctx *c, bool many)
{
	size_t mark = c->out->len;
	struct coll s;
	int rc = sopen(c, 1, &s);
	if (rc)
		return sfail(c, &s, mark, rc);
	if (many)
		resp_array(c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		const char *v;
		size_t vl;
		bool found = false;
		if (s.exists && (rc = coll_get(&s, KEY(c, i), &v, &vl, &found)))
			return sfail(c, &s, mark, rc);
		resp_int(c->out, found);
	}
	coll_free(&s);
	return 0;
}

int cmd_sismember(struct cmd_ctx *c)
{
	return ismember_generic(c, false);
}

int cmd_smismember(struct cmd_ctx *c)
{
	return ismember_generic(c, true);
}

/* Members of a, written as a RESP3 set (an array in RESP2). */
static void members_out(struct cmd_ctx *c, const struct coll_elem *e, size_t n, bool set)
{
	if (set)
		resp_set(c->out, (long)n);
	else
		resp_array(c->out, (long)n);
	for (size_t i = 0; i < n; i++)
		resp_bulk(c->out, e[i].f, e[i].fl);
}

int cmd_smembers(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll s;
	struct coll_elems a = { 0 };
	int rc = sopen(c, 1, &s);
	if (rc == 0)
		rc = coll_collect(&s, &a);
	if (rc) {
		free(a.e);
		return sfail(c, &s, mark, rc);
	}
	members_out(c, a.e, a.n, true);
	free(a.e);
	coll_free(&s);
	return 0;
}

/* ---- SPOP, SRANDMEMBER ---- */

/* Shuffle the first k of a's n elements into a random distinct choice. */
static void pick(struct coll_elems *a, size_t k, uint64_t *seed)
{
	for (size_t i = 0; i < k && i + 1 < a->n; i++) {
		size_t j = i + (size_t)(cmd_rnd_next(seed) % (a->n - i));
		struct coll_elem t = a->e[i];
		a->e[i] = a->e[j];
		a->e[j] = t;
	}
}

int cmd_spop(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long count = 1;
	if (c->argc > 3) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (c->argc == 3) {
		if (srv_str2ll(c->argv[2].p, c->argv[2].len, &count) != 0 || count < 0) {
			resp_error(c->out, "ERR value is out of range, must be positive");
			return 0;
		}
	}
	struct coll s;
	struct coll_elems a = { 0 };
	uint64_t seed = cmd_rnd_seed(c);
	int rc = sopen(c, 1, &s);
	if (rc)
		return sfail(c, &s, mark, rc);
	uint64_t len = coll_len(&s);
	if (c->argc == 2) {
		struct coll_elem e;
		if (!len) {
			coll_free(&s);
			resp_null(c->out);
			return 0;
		}
		bool removed;
		if ((rc = coll_random(&s, cmd_rnd_next(&seed), &e)))
			return sfail(c, &s, mark, rc);
		resp_bulk(c->out, e.f, e.fl); /* before the change: e dies with it */
		char *copy = malloc(e.fl ? e.fl : 1);
		if (!copy)
			return sfail(c, &s, mark, CC_EINTERNAL);
		memcpy(copy, e.f, e.fl);
		rc = coll_remove(&s, copy, e.fl, &removed);
		free(copy);
		if (rc == 0)
			rc = coll_save(&s);
		if (rc)
			return sfail(c, &s, mark, rc);
		coll_free(&s);
		return 0;
	}
	if (!len || count == 0) {
		coll_free(&s);
		resp_set(c->out, 0);
		return 0;
	}
	if ((rc = coll_collect(&s, &a))) {
		free(a.e);
		return sfail(c, &s, mark, rc);
	}
	size_t k = (unsigned long long)count < a.n ? (size_t)count : a.n;
	pick(&a, k, &seed);
	members_out(c, a.e, k, true);
	/* The removals change the coll: the chosen members, copied first. */
	struct resp_arg *gone = malloc(k * sizeof(*gone));
	size_t bytes = 0;
	for (size_t i = 0; i < k; i++)
		bytes += a.e[i].fl;
	char *buf = malloc(bytes ? bytes : 1);
	if (!gone || !buf) {
		free(gone);
		free(buf);
		free(a.e);
		return sfail(c, &s, mark, CC_EINTERNAL);
	}
	char *p = buf;
	for (size_t i = 0; i < k; i++) {
		memcpy(p, a.e[i].f, a.e[i].fl);
		gone[i] = (struct resp_arg){ .p = p, .len = a.e[i].fl };
		p += a.e[i].fl;
	}
	free(a.e);
	for (size_t i = 0; rc == 0 && i < k; i++) {
		bool removed;
		rc = coll_remove(&s, gone[i].p, gone[i].len, &removed);
	}
	free(gone);
	free(buf);
	if (rc == 0)
		rc = coll_save(&s);
	if (rc)
		return sfail(c, &s, mark, rc);
	coll_free(&s);
	return 0;
}

int cmd_srandmember(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long count = 1;
	if (c->argc > 3) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (c->argc == 3) {
		if (srv_str2ll(c->argv[2].p, c->argv[2].len, &count) != 0) {
			cmd_reply_not_int(c);
			return 0;
		}
		if (count < -LLONG_MAX) {
			resp_error(c->out, "ERR value is out of range");
			return 0;
		}
	}
	struct coll s;
	uint64_t seed = cmd_rnd_seed(c);
	struct coll_elem e;
	int rc = sopen(c, 1, &s);
	if (rc)
		return sfail(c, &s, mark, rc);
	uint64_t len = coll_len(&s);
	if (c->argc == 2) {
		if (!len) {
			resp_null(c->out);
		} else {
			if ((rc = coll_random(&s, cmd_rnd_next(&seed), &e)))
				return sfail(c, &s, mark, rc);
			resp_bulk(c->out, e.f, e.fl);
		}
		coll_free(&s);
		return 0;
	}
	if (!len || count == 0) {
		coll_free(&s);
		resp_array(c->out, 0);
		return 0;
	}
	if (count < 0) {
		unsigned long long k = (unsigned long long)(-count);
		resp_array(c->out, (long)k);
		for (unsigned long long i = 0; i < k; i++) {
			if ((rc = coll_random(&s, cmd_rnd_next(&seed), &e)))
				return sfail(c, &s, mark, rc);
			resp_bulk(c->out, e.f, e.fl);
		}
		coll_free(&s);
		return 0;
	}
	struct coll_elems a = { 0 };
	if ((rc = coll_collect(&s, &a))) {
		free(a.e);
		return sfail(c, &s, mark, rc);
	}
	size_t k = (unsigned long long)count < a.n ? (size_t)count : a.n;
	pick(&a, k, &seed);
	members_out(c, a.e, k, false);
	free(a.e);
	coll_free(&s);
	return 0;
}

/* ---- SMOVE ---- */

int cmd_smove(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll src, dst;
	const char *v;
	size_t vl;
	bool found = false, removed, added;
	/* Redis's order: a missing source answers 0 before the
	 * destination's type is checked. */
	int rc = sopen(c, 1, &src);
	if (rc)
		return sfail(c, &src, mark, rc);
	if (!src.exists) {
		coll_free(&src);
		resp_int(c->out, 0);
		return 0;
	}
	rc = sopen(c, 2, &dst);
	if (rc) {
		coll_free(&src);
		return sfail(c, &dst, mark, rc);
	}
	bool same = c->argv[1].len == c->argv[2].len &&
		    memcmp(c->argv[1].p, c->argv[2].p, c->argv[1].len) == 0;
	if (same) {
		rc = coll_get(&src, KEY(c, 3), &v, &vl, &found);
		coll_free(&dst);
		if (rc)
			return sfail(c, &src, mark, rc);
		coll_free(&src);
		resp_int(c->out, found);
		return 0;
	}
	rc = coll_remove(&src, KEY(c, 3), &removed);
	if (rc == 0 && removed)
		rc = coll_put(&dst, KEY(c, 3), NULL, 0, &added);
	if (rc == 0 && removed)
		rc = coll_save(&src); /* the last member gone: the key too */
	if (rc == 0 && removed)
		rc = coll_save(&dst);
	coll_free(&src);
	if (rc)
		return sfail(c, &dst, mark, rc);
	coll_free(&dst);
	resp_int(c->out, removed);
	return 0;
}

/* ---- SINTER, SUNION, SDIFF and the STORE forms, SINTERCARD ---- */

/* A set of byte strings (pointers kept, not copied), open addressing. */
struct sset {
	struct sent {
		const char *p;
		size_t l;
		uint64_t h;
	} *t;
	size_t cap, n;
};

static bool sset_add(struct sset *s, const char *p, size_t l, bool *added)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct sent *t = calloc(cap, sizeof(*t));
		if (!t)
			return false;
		for (size_t i = 0; i < s->cap; i++)
			if (s->t[i].p) {
				size_t j = s->t[i].h & (cap - 1);
				while (t[j].p)
					j = (j + 1) & (cap - 1);
				t[j] = s->t[i];
			}
		free(s->t);
		s->t = t;
		s->cap = cap;
	}
	uint64_t h = st_hash(p, l);
	size_t j = h & (s->cap - 1);
	for (; s->t[j].p; j = (j + 1) & (s->cap - 1))
		if (s->t[j].h == h && s->t[j].l == l && memcmp(s->t[j].p, p, l) == 0) {
			*added = false;
			return true;
		}
	s->t[j] = (struct sent){ .p = p ? p : "", .l = l, .h = h };
	s->n++;
	*added = true;
	return true;
}

enum setop { OP_INTER, OP_UNION, OP_DIFF };

struct setop_run {
	struct coll *sets;
	int nsets;
	struct coll_elems res; /* the result, pointers into sets' buffers */
	bool empty_key;        /* SINTER met a missing key: empty result */
};

static void setop_free(struct setop_run *r)
{
	for (int i = 0; i < r->nsets; i++)
		coll_free(&r->sets[i]);
	free(r->sets);
	free(r->res.e);
}

static bool res_add(struct coll_elems *a, const struct coll_elem *e)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct coll_elem *p = realloc(a->e, cap * sizeof(*p));
		if (!p)
			return false;
		a->e = p;
		a->cap = cap;
	}
	a->e[a->n++] = *e;
	return true;
}

/*
 * Open keys argv[first..first+n) as sets, each type checked (WRONGTYPE
 * for any of another type, as Redis 7.0); a missing key is empty, so
 * SINTER's result is empty when one is missing. Then the operation.
 * `limit` (SINTERCARD): stop after that many (0: no limit).
 */
static int setop(struct cmd_ctx *c, enum setop op, int first, int n, uint64_t limit,
		 struct setop_run *r)
{
	int rc = 0;
	memset(r, 0, sizeof(*r));
	r->sets = calloc((size_t)n, sizeof(*r->sets));
	if (!r->sets)
		return CC_EINTERNAL;
	for (int i = 0; i < n; i++) {
		rc = sopen(c, first + i, &r->sets[r->nsets]);
		r->nsets++;
		if (rc)
			return rc;
		if (op == OP_INTER && !r->sets[i].exists)
			r->empty_key = true;
	}
	if (r->empty_key)
		return CC_OK; /* every key's type checked first, as Redis 7.0 does */
	struct coll_elems a = { 0 };
	if (op == OP_UNION) {
		struct sset seen = { 0 };
		for (int i = 0; rc == 0 && i < n; i++) {
			a.n = 0;
			if ((rc = coll_collect(&r->sets[i], &a)))
				break;
			for (size_t k = 0; k < a.n; k++) {
				bool added;
				if (!sset_add(&seen, a.e[k].f, a.e[k].fl, &added) ||
				    (added && !res_add(&r->res, &a.e[k]))) {
					rc = CC_EINTERNAL;
					break;
				}
			}
		}
		free(seen.t);
		free(a.e);
		return rc;
	}
	/* INTER: the smallest set's members found in every other; DIFF: the
	 * first set's members found in no other. */
	int base = 0;
	if (op == OP_INTER)
		for (int i = 1; i < n; i++)
			if (coll_len(&r->sets[i]) < coll_len(&r->sets[base]))
				base = i;
	if ((rc = coll_collect(&r->sets[base], &a))) {
		free(a.e);
		return rc;
	}
	for (size_t k = 0; k < a.n && rc == 0; k++) {
		bool keep = true;
		for (int i = 0; i < n && rc == 0; i++) {
			if (i == base || !r->sets[i].exists)
				continue;
			const char *v;
			size_t vl;
			bool found;
			rc = coll_get(&r->sets[i], a.e[k].f, a.e[k].fl, &v, &vl, &found);
			if (op == OP_INTER ? !found : found) {
				keep = false;
				break;
			}
		}
		if (rc == 0 && keep && !res_add(&r->res, &a.e[k]))
			rc = CC_EINTERNAL;
		if (limit && r->res.n >= limit)
			break;
	}
	free(a.e);
	return rc;
}

static int setop_cmd(struct cmd_ctx *c, enum setop op)
{
	size_t mark = c->out->len;
	struct setop_run r;
	int rc = setop(c, op, 1, c->argc - 1, 0, &r);
	if (rc) {
		setop_free(&r);
		return cmd_txn_failed(c, mark, rc);
	}
	members_out(c, r.res.e, r.res.n, true);
	setop_free(&r);
	return 0;
}

int cmd_sinter(struct cmd_ctx *c)
{
	return setop_cmd(c, OP_INTER);
}

int cmd_sunion(struct cmd_ctx *c)
{
	return setop_cmd(c, OP_UNION);
}

int cmd_sdiff(struct cmd_ctx *c)
{
	return setop_cmd(c, OP_DIFF);
}

/* The destination, overwritten with the result (deleted when empty),
 * whatever it held: its old parts become orphans (file comment). */
static int store_result(struct cmd_ctx *c, const struct coll_elems *res)
{
	struct coll d;
	bool existed, added;
	int rc = 0;
	if (res->n == 0)
		return txn_del(c->txn, KEY(c, 1), &existed);
	coll_init(&d, c->txn, KEY(c, 1), TXN_T_SET, false);
	if (c->node)
		coll_set_limits(&d, (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.set_max_intset), 0);
	for (size_t i = 0; rc == 0 && i < res->n; i++)
		rc = coll_put(&d, res->e[i].f, res->e[i].fl, NULL, 0, &added);
	if (rc == 0)
		rc = coll_save(&d);
	coll_free(&d);
	return rc;
}

static int setop_store(struct cmd_ctx *c, enum setop op)
{
	size_t mark = c->out->len;
	struct setop_run r;
	int rc = setop(c, op, 2, c->argc - 2, 0, &r);
	if (rc == 0)
		rc = store_result(c, &r.res);
	long long n = (long long)r.res.n;
	setop_free(&r);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_int(c->out, n);
	return 0;
}

int cmd_sinterstore(struct cmd_ctx *c)
{
	return setop_store(c, OP_INTER);
}

int cmd_sunionstore(struct cmd_ctx *c)
{
	return setop_store(c, OP_UNION);
}

int cmd_sdiffstore(struct cmd_ctx *c)
{
	return setop_store(c, OP_DIFF);
}

/* SINTERCARD numkeys key [key ...] [LIMIT limit]: keys 2..2+numkeys. */
int cmd_sintercard_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	long long nk;
	if (argc < 3 || srv_str2ll(argv[1].p, argv[1].len, &nk) != 0 || nk <= 0 || nk > argc - 2)
		return 0;
	int n = 0;
	for (int i = 2; i < 2 + nk && n < max; i++)
		idx[n++] = i;
	return n;
}

int cmd_sintercard(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long nk, limit = 0;
	if (srv_str2ll(c->argv[1].p, c->argv[1].len, &nk) != 0 || nk <= 0) {
		resp_error(c->out, "ERR numkeys should be greater than 0"); /* both, as Redis */
		return 0;
	}
	if (nk > c->argc - 2) {
		resp_error(c->out, "ERR Number of keys can't be greater than number of args");
		return 0;
	}
	for (int i = 2 + (int)nk; i < c->argc; i += 2) {
		if (arg_is(&c->argv[i], "limit") && i + 1 < c->argc) {
			if (srv_str2ll(c->argv[i + 1].p, c->argv[i + 1].len, &limit) != 0) {
				cmd_reply_not_int(c);
				return 0;
			}
			if (limit < 0) {
				resp_error(c->out, "ERR LIMIT can't be negative");
				return 0;
			}
		} else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	struct setop_run r;
	int rc = setop(c, OP_INTER, 2, (int)nk, (uint64_t)limit, &r);
	long long n = (long long)r.res.n;
	setop_free(&r);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_int(c->out, n);
	return 0;
}

int cmd_sscan(struct cmd_ctx *c)
{
	return cmd_coll_scan(c, TXN_T_SET, false);
}

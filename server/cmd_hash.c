/*
 * cmd_hash: the hash commands (HSET, HSETNX, HMSET, HGET, HMGET, HDEL,
 * HLEN, HSTRLEN, HEXISTS, HKEYS, HVALS, HGETALL, HINCRBY, HINCRBYFLOAT,
 * HRANDFIELD, HSCAN), with Redis 7.0's replies and error texts.
 *
 * A hash is a collection (server/coll.h): its root at the key, its fields
 * inline there or in bucket parts. Every handler opens it in the
 * command's transaction (coll_open: WRONGTYPE for another type), reads
 * and changes it through coll_*, and writes what changed with coll_save,
 * so each command is one transaction under every protocol, inside
 * MULTI/EXEC and scripts, across nodes. cmd_string.c's rules hold: a
 * failed call ends the handler through cmd_txn_failed (which also replies
 * WRONGTYPE), and a value pointer from the coll dies at its next change,
 * so replies that quote a value are written before the change.
 */
#include <errno.h>
#include <ck_pr.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/sched.h"
#include "cc/txn.h"
#include "resp/resp.h"
#include "server/client.h"
#include "server/coll.h"
#include "server/zset.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

static int hopen(struct cmd_ctx *c, struct coll *h)
{
	int rc = coll_open(c->txn, KEY(c, 1), TXN_T_HASH, true, h);
	if (c->node)
		coll_set_limits(h, (uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.hash_max_entries),
				(uint64_t)ck_pr_load_64((uint64_t *)&c->node->cfg.hash_max_value));
	return rc;
}

/* End a handler after a coll call failed (rule (1)). */
static int hfail(struct cmd_ctx *c, struct coll *h, size_t mark, int rc)
{
	coll_free(h);
	return cmd_txn_failed(c, mark, rc);
}

/* ---- HSET, HMSET, HSETNX ---- */

static int hset_generic(struct cmd_ctx *c, bool status)
{
	size_t mark = c->out->len;
	if (c->argc % 2) {
		cmd_reply_wrong_args(c);
		return 0;
	}
	struct coll h;
	long long added = 0;
	int rc = hopen(c, &h);
	for (int i = 2; rc == 0 && i < c->argc; i += 2) {
		bool add;
		rc = coll_put(&h, KEY(c, i), KEY(c, i + 1), &add);
		added += add;
	}
	if (rc == 0)
		rc = coll_save(&h);
	if (rc)
		return hfail(c, &h, mark, rc);
	coll_free(&h);
	if (status)
		resp_status(c->out, "OK");
	else
		resp_int(c->out, added);
	return 0;
}

int cmd_hset(struct cmd_ctx *c)
{
	return hset_generic(c, false);
}

int cmd_hmset(struct cmd_ctx *c)
{
	return hset_generic(c, true);
}

int cmd_hsetnx(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll h;
	const char *v;
	size_t vl;
	bool found, add = false;
	int rc = hopen(c, &h);
	if (rc == 0)
		rc = coll_get(&h, KEY(c, 2), &v, &vl, &found);
	if (rc == 0 && !found && (rc = coll_put(&h, KEY(c, 2), KEY(c, 3), &add)) == 0)
		rc = coll_save(&h);
	if (rc)
		return hfail(c, &h, mark, rc);
	coll_free(&h);
	resp_int(c->out, add);
	return 0;
}

/* ---- HGET, HMGET, HSTRLEN, HEXISTS, HLEN ---- */

enum field_reply { F_VALUE, F_STRLEN, F_EXISTS };

static int field_generic(struct cmd_ctx *c, enum field_reply form)
{
	size_t mark = c->out->len;
	struct coll h;
	const char *v = NULL;
	size_t vl = 0;
	bool found = false;
	int rc = hopen(c, &h);
	if (rc == 0 && h.exists)
		rc = coll_get(&h, KEY(c, 2), &v, &vl, &found);
	if (rc)
		return hfail(c, &h, mark, rc);
	cmd_count_lookup(c, h.exists);
	if (form == F_VALUE) {
		if (found)
			resp_bulk(c->out, v, vl);
		else
			resp_null(c->out);
	} else {
		resp_int(c->out, form == F_STRLEN ? (long long)vl : found);
	}
	coll_free(&h);
	return 0;
}

int cmd_hget(struct cmd_ctx *c)
{
	return field_generic(c, F_VALUE);
}

int cmd_hstrlen(struct cmd_ctx *c)
{
	return field_generic(c, F_STRLEN);
}

int cmd_hexists(struct cmd_ctx *c)
{
	return field_generic(c, F_EXISTS);
}

int cmd_hmget(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll h;
	int rc = hopen(c, &h);
	if (rc)
		return hfail(c, &h, mark, rc);
	cmd_count_lookup(c, h.exists);
	resp_array(c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		const char *v;
		size_t vl;
		bool found = false;
		if (h.exists && (rc = coll_get(&h, KEY(c, i), &v, &vl, &found)))
			return hfail(c, &h, mark, rc);
		if (found)
			resp_bulk(c->out, v, vl);
		else
			resp_null(c->out);
	}
	coll_free(&h);
	return 0;
}

int cmd_hlen(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll h;
	int rc = hopen(c, &h);
	if (rc)
		return hfail(c, &h, mark, rc);
	resp_int(c->out, (long long)coll_len(&h));
	coll_free(&h);
	return 0;
}

/* ---- HDEL ---- */

int cmd_hdel(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct coll h;
	long long n = 0;
	int rc = hopen(c, &h);
	for (int i = 2; rc == 0 && h.exists && i < c->argc; i++) {
		bool removed;
		rc = coll_remove(&h, KEY(c, i), &removed);
		n += removed;
	}
	if (rc == 0)
		rc = coll_save(&h); /* the last field gone: the key too */
	if (rc)
		return hfail(c, &h, mark, rc);
	coll_free(&h);
	resp_int(c->out, n);
	return 0;
}

/* ---- HKEYS, HVALS, HGETALL ---- */

enum { ALL_KEYS = 1, ALL_VALS = 2 };

struct all_out {
	struct resp_w *w;
	int what;
	long n; /* elements written */
};

static int all_elem(void *arg, const struct coll_elem *e)
{
	struct all_out *o = arg;
	if (o->what & ALL_KEYS)
		resp_bulk(o->w, e->f, e->fl);
	if (o->what & ALL_VALS)
		resp_bulk(o->w, e->v, e->vl);
	o->n++;
	return 0;
}

static int getall_generic(struct cmd_ctx *c, int what)
{
	size_t mark = c->out->len;
	struct coll h;
	struct resp_w buf;
	int rc = hopen(c, &h);
	if (rc)
		return hfail(c, &h, mark, rc);
	cmd_count_lookup(c, h.exists);
	/* A side buffer: the header needs the count, known at the end. */
	resp_w_init(&buf, c->out->proto);
	struct all_out o = { &buf, what, 0 };
	rc = coll_foreach(&h, all_elem, &o);
	if (rc) {
		resp_w_free(&buf);
		return hfail(c, &h, mark, rc);
	}
	if (what == (ALL_KEYS | ALL_VALS))
		resp_map(c->out, o.n);
	else
		resp_array(c->out, o.n);
	resp_w_append(c->out, &buf);
	resp_w_free(&buf);
	coll_free(&h);
	return 0;
}

int cmd_hkeys(struct cmd_ctx *c)
{
	return getall_generic(c, ALL_KEYS);
}

int cmd_hvals(struct cmd_ctx *c)
{
	return getall_generic(c, ALL_VALS);
}

int cmd_hgetall(struct cmd_ctx *c)
{
	return getall_generic(c, ALL_KEYS | ALL_VALS);
}

/* ---- HINCRBY, HINCRBYFLOAT ---- */

int cmd_hincrby(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long incr, cur = 0;
	if (srv_str2ll(c->argv[3].p, c->argv[3].len, &incr) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	struct coll h;
	const char *v;
	size_t vl;
	bool found = false, add;
	int rc = hopen(c, &h);
	if (rc == 0)
		rc = coll_get(&h, KEY(c, 2), &v, &vl, &found);
	if (rc)
		return hfail(c, &h, mark, rc);
	if (found && srv_str2ll(v, vl, &cur) != 0) {
		coll_free(&h);
		resp_error(c->out, "ERR hash value is not an integer");
		return 0;
	}
	if ((incr < 0 && cur < 0 && incr < LLONG_MIN - cur) ||
	    (incr > 0 && cur > 0 && incr > LLONG_MAX - cur)) {
		coll_free(&h);
		resp_error(c->out, "ERR increment or decrement would overflow");
		return 0;
	}
	cur += incr;
	char buf[SRV_LL_STR_MAX];
	int n = srv_ll2str(buf, sizeof(buf), cur);
	rc = coll_put(&h, KEY(c, 2), buf, (size_t)n, &add);
	if (rc == 0)
		rc = coll_save(&h);
	if (rc)
		return hfail(c, &h, mark, rc);
	coll_free(&h);
	resp_int(c->out, cur);
	return 0;
}

int cmd_hincrbyfloat(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long double incr, cur = 0;
	if (srv_str2ld(c->argv[3].p, c->argv[3].len, &incr) != 0) {
		resp_error(c->out, "ERR value is not a valid float");
		return 0;
	}
	if (isnan(incr) || isinf(incr)) {
		resp_error(c->out, "ERR value is NaN or Infinity");
		return 0;
	}
	struct coll h;
	const char *v;
	size_t vl;
	bool found = false, add;
	int rc = hopen(c, &h);
	if (rc == 0)
		rc = coll_get(&h, KEY(c, 2), &v, &vl, &found);
	if (rc)
		return hfail(c, &h, mark, rc);
	if (found && srv_str2ld(v, vl, &cur) != 0) {
		coll_free(&h);
		resp_error(c->out, "ERR hash value is not a float");
		return 0;
	}
	cur += incr;
	if (isnan(cur) || isinf(cur)) {
		coll_free(&h);
		resp_error(c->out, "ERR increment would produce NaN or Infinity");
		return 0;
	}
	char buf[SRV_LD_STR_MAX];
	int n = srv_ld2str(buf, sizeof(buf), cur);
	if (n < 0)
		n = 0;
	rc = coll_put(&h, KEY(c, 2), buf, (size_t)n, &add);
	if (rc == 0)
		rc = coll_save(&h);
	if (rc)
		return hfail(c, &h, mark, rc);
	coll_free(&h);
	resp_bulk(c->out, buf, (size_t)n);
	return 0;
}

/* ---- HRANDFIELD ---- */

/* Random bits for one command: the clock and the client, stirred. */
static uint64_t rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t cmd_rnd_next(uint64_t *s)
{
	return rnd_next(s);
}

uint64_t cmd_rnd_seed(struct cmd_ctx *c)
{
	return sched_now_ns() ^ (c->cl ? c->cl->id * 0x9e3779b97f4a7c15ull : 0);
}

static void pair_out(struct cmd_ctx *c, const struct coll_elem *e, bool withvalues)
{
	if (withvalues && c->out->proto == 3)
		resp_array(c->out, 2);
	resp_bulk(c->out, e->f, e->fl);
	if (withvalues)
		resp_bulk(c->out, e->v, e->vl);
}

int cmd_hrandfield(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long count = 1;
	bool withvalues = false, many = c->argc >= 3;
	if (c->argc > 4 || (c->argc == 4 && !arg_is(&c->argv[3], "withvalues"))) {
		cmd_reply_syntax(c);
		return 0;
	}
	withvalues = c->argc == 4;
	if (many) {
		if (srv_str2ll(c->argv[2].p, c->argv[2].len, &count) != 0) {
			cmd_reply_not_int(c);
			return 0;
		}
		if (count < -LLONG_MAX || (withvalues && count < -LLONG_MAX / 2)) {
			resp_error(c->out, "ERR value is out of range");
			return 0;
		}
	}
	struct coll h;
	int rc = hopen(c, &h);
	if (rc)
		return hfail(c, &h, mark, rc);
	uint64_t seed = cmd_rnd_seed(c);
	uint64_t len = coll_len(&h);
	struct coll_elem e;
	if (!many) {
		if (!len) {
			resp_null(c->out);
		} else {
			if ((rc = coll_random(&h, rnd_next(&seed), &e)))
				return hfail(c, &h, mark, rc);
			resp_bulk(c->out, e.f, e.fl);
		}
		coll_free(&h);
		return 0;
	}
	if (!len || count == 0) {
		resp_array(c->out, 0);
		coll_free(&h);
		return 0;
	}
	if (count < 0) { /* repeats allowed: independent picks */
		unsigned long long k = (unsigned long long)(-count);
		resp_array(c->out, (long)(withvalues && c->out->proto != 3 ? 2 * k : k));
		for (unsigned long long i = 0; i < k; i++) {
			if ((rc = coll_random(&h, rnd_next(&seed), &e)))
				return hfail(c, &h, mark, rc);
			pair_out(c, &e, withvalues);
		}
		coll_free(&h);
		return 0;
	}
	/* Distinct: all of them when asked for as many, else a partial
	 * Fisher-Yates shuffle of all of them. */
	struct coll_elems a = { 0 };
	if ((rc = coll_collect(&h, &a))) {
		free(a.e);
		return hfail(c, &h, mark, rc);
	}
	size_t k = (unsigned long long)count < a.n ? (size_t)count : a.n;
	if (k < a.n)
		for (size_t i = 0; i < k; i++) {
			size_t j = i + (size_t)(rnd_next(&seed) % (a.n - i));
			struct coll_elem t = a.e[i];
			a.e[i] = a.e[j];
			a.e[j] = t;
		}
	resp_array(c->out, (long)(withvalues && c->out->proto != 3 ? 2 * k : k));
	for (size_t i = 0; i < k; i++)
		pair_out(c, &a.e[i], withvalues);
	free(a.e);
	coll_free(&h);
	return 0;
}

/* ---- HSCAN (and SSCAN: cmd_set.c) ---- */

/* A cursor as Redis's parseScanCursorOrReply reads it (strtoul). */
static int scan_cursor(const struct resp_arg *a, uint64_t *cursor)
{
	char buf[64], *end;
	if (a->len >= sizeof(buf) || a->len == 0) {
		if (a->len == 0) {
			*cursor = 0;
			return 0;
		}
		return -1;
	}
	memcpy(buf, a->p, a->len);
	buf[a->len] = '\0';
	if (buf[0] == ' ' || (buf[0] >= '\t' && buf[0] <= '\r'))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (*end != '\0' || errno == ERANGE)
		return -1;
	*cursor = v;
	return 0;
}

struct scan_out {
	struct resp_w w;
	const struct resp_arg *pat;
	bool vals;
	bool zset; /* values are scores (server/zset.h): replied as text */
	long n;
};

static int scan_elem(void *arg, const struct coll_elem *e)
{
	struct scan_out *o = arg;
	if (o->pat && !srv_strmatch(o->pat->p, o->pat->len, e->f, e->fl, false))
		return 0;
	resp_bulk(&o->w, e->f, e->fl);
	if (o->zset && e->vl == 8) {
		double s = zs_score_get(e->v);
		char buf[64];
		int n = isinf(s) ? snprintf(buf, sizeof(buf), "%s", s > 0 ? "inf" : "-inf")
				 : snprintf(buf, sizeof(buf), "%.17g", s);
		resp_bulk(&o->w, buf, (size_t)n);
	} else if (o->vals) {
		resp_bulk(&o->w, e->v, e->vl);
	}
	o->n += o->vals ? 2 : 1;
	return 0;
}

int cmd_coll_scan(struct cmd_ctx *c, uint8_t type, bool vals)
{
	size_t mark = c->out->len;
	uint64_t cursor;
	long long count = 10;
	const struct resp_arg *pat = NULL;
	if (scan_cursor(&c->argv[2], &cursor)) {
		resp_error(c->out, "ERR invalid cursor");
		return 0;
	}
	struct coll h;
	int rc = coll_open(c->txn, KEY(c, 1), type, vals, &h);
	if (rc)
		return hfail(c, &h, mark, rc);
	for (int i = 3; i < c->argc; i += 2) {
		const struct resp_arg *a = &c->argv[i];
		bool has = i + 1 < c->argc;
		if (has && arg_is(a, "count")) {
			if (srv_str2ll(c->argv[i + 1].p, c->argv[i + 1].len, &count) != 0) {
				coll_free(&h);
				cmd_reply_not_int(c);
				return 0;
			}
			if (count < 1) {
				coll_free(&h);
				cmd_reply_syntax(c);
				return 0;
			}
		} else if (has && arg_is(a, "match")) {
			pat = &c->argv[i + 1];
			if (pat->len == 1 && pat->p[0] == '*')
				pat = NULL;
		} else {
			coll_free(&h);
			cmd_reply_syntax(c);
			return 0;
		}
	}
	struct scan_out o = { .pat = pat, .vals = vals, .zset = type == TXN_T_ZSET };
	resp_w_init(&o.w, c->out->proto);
	if (!h.exists)
		cursor = 0;
	else if ((rc = coll_scan(&h, &cursor, (uint64_t)count, scan_elem, &o))) {
		resp_w_free(&o.w);
		return hfail(c, &h, mark, rc);
	}
	char curtxt[SRV_LL_STR_MAX + 1];
	snprintf(curtxt, sizeof(curtxt), "%llu", (unsigned long long)cursor);
	resp_array(c->out, 2);
	resp_bulk_cstr(c->out, curtxt);
	resp_array(c->out, o.n);
	resp_w_append(c->out, &o.w);
	resp_w_free(&o.w);
	coll_free(&h);
	return 0;
}

int cmd_hscan(struct cmd_ctx *c)
{
	return cmd_coll_scan(c, TXN_T_HASH, true);
}

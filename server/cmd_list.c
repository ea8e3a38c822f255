/*
 * cmd_list: the list commands (LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP,
 * LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH,
 * LMPOP and the blocking forms), with Redis 7.0's replies and error texts
 * and its order of checks (arguments, then the key, then its type).
 *
 * A list is server/list.h's root and chunks. Handlers follow cmd_set.c's
 * shape: open every key in the command's transaction, change through
 * list_*, list_save. LMOVE between lists on two nodes is one transaction
 * over both.
 *
 * Blocking: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH and BLMPOP act as their
 * non-blocking form (with the blocking reply shapes) when an element is
 * there. When none is, inside MULTI they reply what Redis replies when it
 * may not block (a null); otherwise they write their timeout reply and
 * set cmd_ctx.would_block, and srv_dispatch parks the client and runs the
 * command again until an element comes or the timeout passes
 * (server/dispatch.c, "Blocking list commands").
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "resp/resp.h"
#include "server/client.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/list.h"
#include "server/strutil.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

static int lopen(struct cmd_ctx *c, int i, struct list *l)
{
	return list_open(c->txn, KEY(c, i), l);
}

static int lfail(struct cmd_ctx *c, struct list *l, size_t mark, int rc)
{
	list_free(l);
	return cmd_txn_failed(c, mark, rc);
}

/* The argument as a long long, or Redis's error replied (false). */
static bool arg_ll(struct cmd_ctx *c, int i, long long *v)
{
	if (srv_str2ll(c->argv[i].p, c->argv[i].len, v) != 0) {
		cmd_reply_not_int(c);
		return false;
	}
	return true;
}

/* Redis's getRangeLongFromObjectOrReply with a message for both cases. */
static bool arg_range(struct cmd_ctx *c, int i, long long min, long long *v, const char *msg)
{
	if (srv_str2ll(c->argv[i].p, c->argv[i].len, v) != 0 || *v < min) {
		resp_error(c->out, msg);
		return false;
	}
	return true;
}

/* LEFT or RIGHT; a syntax error replied otherwise. */
static bool arg_side(struct cmd_ctx *c, int i, bool *left)
{
	if (arg_is(&c->argv[i], "left"))
		*left = true;
	else if (arg_is(&c->argv[i], "right"))
		*left = false;
	else {
		cmd_reply_syntax(c);
		return false;
	}
	return true;
}

/* Redis's getTimeoutFromObjectOrReply in seconds. */
static bool arg_timeout(struct cmd_ctx *c, int i)
{
	long double t;
	if (srv_str2ld(c->argv[i].p, c->argv[i].len, &t) != 0 || isnan(t) || isinf(t)) {
		resp_error(c->out, "ERR timeout is not a float or out of range");
		return false;
	}
	long double ms = ceill(t * 1000.0L);
	if (ms < 0) {
		resp_error(c->out, "ERR timeout is negative");
		return false;
	}
	c->block_ms = ms > 9e15L ? 0 : (int64_t)ms; /* beyond any wait: forever */
	return true;
}

/* A blocking command found nothing: see the file comment. */
static void would_block(struct cmd_ctx *c, bool array)
{
	if (c->cl && (c->cl->flags & CL_MULTI)) {
		if (array) /* what each replies where Redis may not block */
			resp_null_array(c->out);
		else
			resp_null(c->out);
		return;
	}
	resp_null_array(c->out); /* Redis's timeout reply, for all of them */
	c->would_block = true;
}

/* For notify.c: the event and the key of a pop whose key depends on the
 * data (LMPOP, BLPOP, ...). */
static void pop_event(struct cmd_ctx *c, int keyarg, bool left)
{
	c->ev_key = keyarg;
	c->ev_name = left ? "lpop" : "rpop";
}

/* ---- LPUSH, RPUSH, LPUSHX, RPUSHX ---- */

static int push_generic(struct cmd_ctx *c, bool left, bool xx)
{
	size_t mark = c->out->len;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc == 0 && xx && !l.exists) {
		list_free(&l);
		resp_int(c->out, 0);
		return 0;
	}
	for (int i = 2; rc == 0 && i < c->argc; i++)
		rc = list_push(&l, left, KEY(c, i));
	if (rc == 0)
		rc = list_save(&l, false);
	if (rc)
		return lfail(c, &l, mark, rc);
	resp_int(c->out, (long long)list_len(&l));
	list_free(&l);
	return 0;
}

int cmd_lpush(struct cmd_ctx *c)
{
	return push_generic(c, true, false);
}

int cmd_rpush(struct cmd_ctx *c)
{
	return push_generic(c, false, false);
}

int cmd_lpushx(struct cmd_ctx *c)
{
	return push_generic(c, true, true);
}

int cmd_rpushx(struct cmd_ctx *c)
{
	return push_generic(c, false, true);
}

/* ---- LPOP, RPOP, LMPOP, BLPOP, BRPOP, BLMPOP ---- */

/* Pop up to `count` from l and reply them as an array, in pop order. */
static int pop_many(struct cmd_ctx *c, struct list *l, bool left, uint64_t count)
{
	uint64_t k = count < list_len(l) ? count : list_len(l);
	resp_array(c->out, (long)k);
	for (uint64_t i = 0; i < k; i++) {
		char *v;
		size_t vl;
		int rc = list_pop(l, left, &v, &vl);
		if (rc)
			return rc;
		resp_bulk(c->out, v, vl);
		free(v);
	}
	return list_save(l, false);
}

static int pop_generic(struct cmd_ctx *c, bool left)
{
	size_t mark = c->out->len;
	long long count = 0;
	bool has_count = c->argc == 3;
	if (c->argc > 3) {
		cmd_reply_wrong_args(c);
		return 0;
	}
	if (has_count &&
	    !arg_range(c, 2, 0, &count, "ERR value is out of range, must be positive"))
		return 0;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!l.exists) {
		if (has_count)
			resp_null_array(c->out);
		else
			resp_null(c->out);
		list_free(&l);
		return 0;
	}
	if (has_count) {
		rc = count ? pop_many(c, &l, left, (uint64_t)count) : 0;
		if (!count)
			resp_array(c->out, 0);
	} else {
		char *v;
		size_t vl;
		rc = list_pop(&l, left, &v, &vl);
		if (rc == 0) {
			resp_bulk(c->out, v, vl);
			free(v);
			rc = list_save(&l, false);
		}
	}
	if (rc)
		return lfail(c, &l, mark, rc);
	list_free(&l);
	return 0;
}

int cmd_lpop(struct cmd_ctx *c)
{
	return pop_generic(c, true);
}

int cmd_rpop(struct cmd_ctx *c)
{
	return pop_generic(c, false);
}

/*
 * The pop of LMPOP and the blocking pops over keys argv[first..first+n):
 * the first list that exists. count 0: one element, replied [key, value]
 * (BLPOP); else [key, [values]]. *done: something was popped (or an
 * error replied).
 */
static int mpop(struct cmd_ctx *c, int first, int n, bool left, uint64_t count, bool *done)
{
	size_t mark = c->out->len;
	*done = false;
	for (int i = first; i < first + n; i++) {
		struct list l;
		int rc = lopen(c, i, &l);
		if (rc == 0 && !l.exists) {
			list_free(&l);
			continue;
		}
		*done = true;
		if (rc)
			return lfail(c, &l, mark, rc);
		resp_array(c->out, 2);
		resp_bulk(c->out, KEY(c, i));
		if (count) {
			rc = pop_many(c, &l, left, count);
		} else {
			char *v;
			size_t vl;
			rc = list_pop(&l, left, &v, &vl);
			if (rc == 0) {
				resp_bulk(c->out, v, vl);
				free(v);
				rc = list_save(&l, false);
			}
		}
		if (rc)
			return lfail(c, &l, mark, rc);
		list_free(&l);
		pop_event(c, i, left);
		return 0;
	}
	return 0;
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count], from argv[at]
 * (the numkeys). */
static int lmpop_generic(struct cmd_ctx *c, int at, bool block)
{
	long long nk, count = -1;
	bool left;
	if (!arg_range(c, at, 1, &nk, "ERR numkeys should be greater than 0"))
		return 0;
	long long where = at + nk + 1;
	if (where >= c->argc) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (!arg_side(c, (int)where, &left))
		return 0;
	for (int j = (int)where + 1; j < c->argc; j++) {
		if (count == -1 && arg_is(&c->argv[j], "count") && j + 1 < c->argc) {
			j++;
			if (!arg_range(c, j, 1, &count, "ERR count should be greater than 0"))
				return 0;
		} else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	if (count == -1)
		count = 1;
	if (block && !arg_timeout(c, 1))
		return 0;
	bool done;
	int rc = mpop(c, at + 1, (int)nk, left, (uint64_t)count, &done);
	if (rc || done)
		return rc;
	if (block)
		would_block(c, true);
	else
		resp_null_array(c->out);
	return 0;
}

int cmd_lmpop(struct cmd_ctx *c)
{
	return lmpop_generic(c, 1, false);
}

int cmd_blmpop(struct cmd_ctx *c)
{
	return lmpop_generic(c, 2, true);
}

static int bpop_generic(struct cmd_ctx *c, bool left)
{
	if (!arg_timeout(c, c->argc - 1))
		return 0;
	bool done;
	int rc = mpop(c, 1, c->argc - 2, left, 0, &done);
	if (rc || done)
		return rc;
	would_block(c, true);
	return 0;
}

int cmd_blpop(struct cmd_ctx *c)
{
	return bpop_generic(c, true);
}

int cmd_brpop(struct cmd_ctx *c)
{
	return bpop_generic(c, false);
}

/* LMPOP numkeys key ...: keys 2..2+numkeys; BLMPOP timeout numkeys key
 * ...: 3..3+numkeys. */
static int mpop_keys(int at, int argc, const struct resp_arg *argv, int *idx, int max)
{
	long long nk;
	if (argc <= at || srv_str2ll(argv[at].p, argv[at].len, &nk) != 0 || nk <= 0 ||
	    nk > argc - at - 1)
		return 0;
	int n = 0;
	for (int i = at + 1; i < at + 1 + nk && n < max; i++)
		idx[n++] = i;
	return n;
}

int cmd_lmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	return mpop_keys(1, argc, argv, idx, max);
}

int cmd_blmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	return mpop_keys(2, argc, argv, idx, max);
}

/* ---- LLEN, LINDEX, LRANGE ---- */

int cmd_llen(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	resp_int(c->out, (long long)list_len(&l));
	list_free(&l);
	return 0;
}

int cmd_lindex(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct list l;
	long long i;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!l.exists) {
		list_free(&l);
		resp_null(c->out);
		return 0;
	}
	if (!arg_ll(c, 2, &i)) {
		list_free(&l);
		return 0;
	}
	long long len = (long long)list_len(&l);
	if (i < 0)
		i += len;
	if (i < 0 || i >= len) {
		list_free(&l);
		resp_null(c->out);
		return 0;
	}
	const char *v;
	size_t vl;
	if ((rc = list_get(&l, (uint64_t)i, &v, &vl)))
		return lfail(c, &l, mark, rc);
	resp_bulk(c->out, v, vl);
	list_free(&l);
	return 0;
}

struct range_out {
	struct cmd_ctx *c;
	uint64_t left;
};

static int range_one(void *arg, uint64_t i, const char *v, size_t vl)
{
	struct range_out *r = arg;
	(void)i;
	resp_bulk(r->c->out, v, vl);
	return --r->left == 0;
}

/* Redis's range of [start, end] over len elements: false when empty. */
static bool norm_range(long long len, long long *start, long long *end)
{
	if (*start < 0)
		*start += len;
	if (*end < 0)
		*end += len;
	if (*start < 0)
		*start = 0;
	if (*start > *end || *start >= len)
		return false;
	if (*end >= len)
		*end = len - 1;
	return true;
}

int cmd_lrange(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long start, end;
	if (!arg_ll(c, 2, &start) || !arg_ll(c, 3, &end))
		return 0;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!norm_range((long long)list_len(&l), &start, &end)) {
		list_free(&l);
		resp_array(c->out, 0);
		return 0;
	}
	struct range_out r = { .c = c, .left = (uint64_t)(end - start + 1) };
	resp_array(c->out, (long)r.left);
	if ((rc = list_walk(&l, (uint64_t)start, false, range_one, &r)))
		return lfail(c, &l, mark, rc);
	list_free(&l);
	return 0;
}

/* ---- LSET, LINSERT, LREM, LTRIM ---- */

int cmd_lset(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct list l;
	long long i;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!l.exists) {
		list_free(&l);
		resp_error(c->out, "ERR no such key");
		return 0;
	}
	if (!arg_ll(c, 2, &i)) {
		list_free(&l);
		return 0;
	}
	long long len = (long long)list_len(&l);
	if (i < 0)
		i += len;
	if (i < 0 || i >= len) {
		list_free(&l);
		resp_error(c->out, "ERR index out of range");
		return 0;
	}
	rc = list_set(&l, (uint64_t)i, KEY(c, 3));
	if (rc == 0)
		rc = list_save(&l, false);
	if (rc)
		return lfail(c, &l, mark, rc);
	list_free(&l);
	resp_status(c->out, "OK");
	return 0;
}

struct find {
	const char *v;
	size_t vl;
	bool found;
	uint64_t at;
};

static int find_one(void *arg, uint64_t i, const char *v, size_t vl)
{
	struct find *f = arg;
	if (vl != f->vl || (vl && memcmp(v, f->v, vl)))
		return 0;
	f->found = true;
	f->at = i;
	return 1;
}

int cmd_linsert(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	bool after;
	if (arg_is(&c->argv[2], "after"))
		after = true;
	else if (arg_is(&c->argv[2], "before"))
		after = false;
	else {
		cmd_reply_syntax(c);
		return 0;
	}
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!l.exists) {
		list_free(&l);
		resp_int(c->out, 0);
		return 0;
	}
	struct find f = { .v = c->argv[3].p, .vl = c->argv[3].len };
	if ((rc = list_walk(&l, 0, false, find_one, &f)))
		return lfail(c, &l, mark, rc);
	if (!f.found) {
		list_free(&l);
		resp_int(c->out, -1);
		return 0;
	}
	rc = list_insert(&l, f.at + after, KEY(c, 4));
	if (rc == 0)
		rc = list_save(&l, false);
	if (rc)
		return lfail(c, &l, mark, rc);
	resp_int(c->out, (long long)list_len(&l));
	list_free(&l);
	return 0;
}

int cmd_lrem(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long n;
	if (!arg_ll(c, 2, &n))
		return 0;
	struct list l;
	uint64_t removed = 0;
	int rc = lopen(c, 1, &l);
	if (rc == 0 && l.exists) {
		uint64_t limit = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
		rc = list_rem(&l, KEY(c, 3), limit, n < 0, &removed);
		if (rc == 0)
			rc = list_save(&l, false);
	}
	if (rc)
		return lfail(c, &l, mark, rc);
	list_free(&l);
	resp_int(c->out, (long long)removed);
	return 0;
}

int cmd_ltrim(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long start, end;
	if (!arg_ll(c, 2, &start) || !arg_ll(c, 3, &end))
		return 0;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc == 0 && l.exists) {
		bool keep = norm_range((long long)list_len(&l), &start, &end);
		rc = list_trim(&l, keep ? (uint64_t)start : 0, keep ? (uint64_t)end : 0, !keep);
		/* Redis signals "ltrim" even when nothing went: the root is
		 * written so that the command counts as a change (notify.c) */
		if (rc == 0)
			rc = list_save(&l, true);
	}
	if (rc)
		return lfail(c, &l, mark, rc);
	list_free(&l);
	resp_status(c->out, "OK");
	return 0;
}

/* ---- LPOS ---- */

struct lpos {
	struct cmd_ctx *c;
	const char *v;
	size_t vl;
	long long rank, count, maxlen, matches, scanned, arraylen;
	bool found;
	uint64_t at;
};

static int lpos_one(void *arg, uint64_t i, const char *v, size_t vl)
{
	struct lpos *p = arg;
	if (p->maxlen && p->scanned >= p->maxlen)
		return 1;
	p->scanned++;
	if (vl != p->vl || (vl && memcmp(v, p->v, vl)))
		return 0;
	if (++p->matches < p->rank)
		return 0;
	if (p->count == -1) {
		p->found = true;
		p->at = i;
		return 1;
	}
	resp_int(p->c->out, (long long)i);
	p->arraylen++;
	return p->count && p->matches - p->rank + 1 >= p->count;
}

int cmd_lpos(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct lpos p = { .c = c, .v = c->argv[2].p, .vl = c->argv[2].len, .rank = 1, .count = -1 };
	for (int j = 3; j < c->argc; j++) {
		bool more = j + 1 < c->argc;
		if (arg_is(&c->argv[j], "rank") && more) {
			if (!arg_ll(c, ++j, &p.rank))
				return 0;
			if (p.rank == 0) {
				resp_error(c->out, "ERR RANK can't be zero: use 1 to start from the "
						   "first match, 2 from the second ... or use negative "
						   "to start from the end of the list");
				return 0;
			}
		} else if (arg_is(&c->argv[j], "count") && more) {
			if (!arg_range(c, ++j, 0, &p.count, "ERR COUNT can't be negative"))
				return 0;
		} else if (arg_is(&c->argv[j], "maxlen") && more) {
			if (!arg_range(c, ++j, 0, &p.maxlen, "ERR MAXLEN can't be negative"))
				return 0;
		} else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	bool back = p.rank < 0;
	if (back) /* LLONG_MIN: a rank no list reaches, as any huge one */
		p.rank = p.rank == LLONG_MIN ? LLONG_MAX : -p.rank;
	struct list l;
	int rc = lopen(c, 1, &l);
	if (rc)
		return lfail(c, &l, mark, rc);
	if (!l.exists) {
		list_free(&l);
		if (p.count != -1)
			resp_array(c->out, 0);
		else
			resp_null(c->out);
		return 0;
	}
	/* With COUNT the reply is an array whose length is known at the end:
	 * the matches go to the reply after a placeholder, then move. */
	size_t at = c->out->len;
	uint64_t len = list_len(&l);
	rc = list_walk(&l, back ? len - 1 : 0, back, lpos_one, &p);
	if (rc)
		return lfail(c, &l, mark, rc);
	list_free(&l);
	if (p.count == -1) {
		if (p.found)
			resp_int(c->out, (long long)p.at);
		else
			resp_null(c->out);
		return 0;
	}
	/* the matches were written at `at`: put the header before them */
	size_t body = c->out->len - at;
	char *tmp = malloc(body ? body : 1);
	if (!tmp)
		return cmd_txn_failed(c, mark, CC_EINTERNAL);
	memcpy(tmp, c->out->p + at, body);
	c->out->len = at;
	resp_array(c->out, (long)p.arraylen);
	resp_w_raw(c->out, tmp, body);
	free(tmp);
	return 0;
}

/* ---- LMOVE, RPOPLPUSH, BLMOVE, BRPOPLPUSH ---- */

/* Move one element; *moved false when the source is missing. */
static int lmove_generic(struct cmd_ctx *c, bool from_left, bool to_left, bool *moved)
{
	size_t mark = c->out->len;
	struct list src, dst;
	bool same = c->argv[1].len == c->argv[2].len &&
		    memcmp(c->argv[1].p, c->argv[2].p, c->argv[1].len) == 0;
	*moved = true; /* or an error replied: no other reply */
	int rc = lopen(c, 1, &src);
	if (rc)
		return lfail(c, &src, mark, rc);
	if (!src.exists) {
		*moved = false;
		list_free(&src);
		return 0;
	}
	struct list *d = &src;
	if (!same) {
		if ((rc = lopen(c, 2, &dst))) {
			list_free(&src);
			return lfail(c, &dst, mark, rc);
		}
		d = &dst;
	}
	char *v = NULL;
	size_t vl;
	rc = list_pop(&src, from_left, &v, &vl);
	if (rc == 0)
		rc = list_push(d, to_left, v, vl);
	if (rc == 0)
		rc = list_save(&src, false);
	if (rc == 0 && !same)
		rc = list_save(&dst, false);
	if (!same)
		list_free(&dst);
	if (rc) {
		free(v);
		return lfail(c, &src, mark, rc);
	}
	list_free(&src);
	resp_bulk(c->out, v, vl);
	free(v);
	return 0;
}

int cmd_lmove(struct cmd_ctx *c)
{
	bool from, to, moved;
	if (!arg_side(c, 3, &from) || !arg_side(c, 4, &to))
		return 0;
	int rc = lmove_generic(c, from, to, &moved);
	if (rc == 0 && !moved)
		resp_null(c->out);
	return rc;
}

int cmd_rpoplpush(struct cmd_ctx *c)
{
	bool moved;
	int rc = lmove_generic(c, false, true, &moved);
	if (rc == 0 && !moved)
		resp_null(c->out);
	return rc;
}

int cmd_blmove(struct cmd_ctx *c)
{
	bool from, to, moved;
	if (!arg_side(c, 3, &from) || !arg_side(c, 4, &to) || !arg_timeout(c, 5))
		return 0;
	int rc = lmove_generic(c, from, to, &moved);
	if (rc == 0 && !moved)
		would_block(c, false);
	return rc;
}

int cmd_brpoplpush(struct cmd_ctx *c)
{
	bool moved;
	if (!arg_timeout(c, 3))
		return 0;
	int rc = lmove_generic(c, false, true, &moved);
	if (rc == 0 && !moved)
		would_block(c, false);
	return rc;
}

/*
 * notify.c: keyspace notifications (notify.h).
 *
 * Which events a command makes is a table of rules by command name
 * (rules[] below), with Redis 7.0's event names and classes. A rule fires
 * only for what the command changed in its transaction: the transaction's
 * change count (txn_savepoint().changes) says whether it wrote anything
 * (SET NX that set nothing, INCR of a non-number: no event), and
 * txn_deleted, before and after, which keys it deleted (DEL of an absent
 * key: no event). The events go through the client's queue of deferred
 * PUBLISHes (ps_defer): sent once the transaction committed, on every node
 * (server/pubsub_cluster.c), never for an aborted attempt.
 *
 * Not built: the "new" (n) and key-miss (m) classes are accepted and
 * stored, and make no event.
 */
#include "server/notify.h"

#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "server/client.h"
#include "server/command.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/worker.h"

/* Redis's NOTIFY_* bits. */
enum {
	N_KEYSPACE = 1 << 0, N_KEYEVENT = 1 << 1, N_GENERIC = 1 << 2, N_STRING = 1 << 3,
	N_LIST = 1 << 4, N_SET = 1 << 5, N_HASH = 1 << 6, N_ZSET = 1 << 7, N_EXPIRED = 1 << 8,
	N_EVICTED = 1 << 9, N_STREAM = 1 << 10, N_KEY_MISS = 1 << 11, N_MODULE = 1 << 12,
	N_NEW = 1 << 13,
	N_ALL = N_GENERIC | N_STRING | N_LIST | N_SET | N_HASH | N_ZSET | N_EXPIRED | N_EVICTED |
		N_STREAM | N_MODULE,
};

int notify_parse(const char *s, uint32_t *flags)
{
	uint32_t f = 0;
	for (; *s; s++) {
		switch (*s) {
		case 'A': f |= N_ALL; break;
		case 'g': f |= N_GENERIC; break;
		case '$': f |= N_STRING; break;
		case 'l': f |= N_LIST; break;
		case 's': f |= N_SET; break;
		case 'h': f |= N_HASH; break;
		case 'z': f |= N_ZSET; break;
		case 'x': f |= N_EXPIRED; break;
		case 'e': f |= N_EVICTED; break;
		case 'K': f |= N_KEYSPACE; break;
		case 'E': f |= N_KEYEVENT; break;
		case 't': f |= N_STREAM; break;
		case 'm': f |= N_KEY_MISS; break;
		case 'd': f |= N_MODULE; break;
		case 'n': f |= N_NEW; break;
		default: return -1;
		}
	}
	*flags = f;
	return 0;
}

void notify_format(uint32_t f, char *buf, size_t cap)
{
	static const struct {
		uint32_t bit;
		char ch;
	} order[] = { { N_GENERIC, 'g' }, { N_STRING, '$' }, { N_LIST, 'l' }, { N_SET, 's' },
		      { N_HASH, 'h' },    { N_ZSET, 'z' },   { N_EXPIRED, 'x' }, { N_EVICTED, 'e' },
		      { N_STREAM, 't' },  { N_MODULE, 'd' } };
	size_t n = 0;
	if (cap == 0)
		return;
	if ((f & N_ALL) == N_ALL) {
		if (n + 1 < cap)
			buf[n++] = 'A';
	} else {
		for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
			if ((f & order[i].bit) && n + 1 < cap)
				buf[n++] = order[i].ch;
	}
	/* Redis 7.0 writes these after the classes, in this order. */
	if ((f & N_NEW) && n + 1 < cap)
		buf[n++] = 'n';
	if ((f & N_KEYSPACE) && n + 1 < cap)
		buf[n++] = 'K';
	if ((f & N_KEYEVENT) && n + 1 < cap)
		buf[n++] = 'E';
	if ((f & N_KEY_MISS) && n + 1 < cap)
		buf[n++] = 'm';
	buf[n] = '\0';
}

static uint32_t flags_of(struct node *n)
{
	return ck_pr_load_32(&n->cfg.notify_flags);
}

bool notify_enabled(struct node *n)
{
	uint32_t f = flags_of(n);
	return (f & (N_KEYSPACE | N_KEYEVENT)) && (f & ~(N_KEYSPACE | N_KEYEVENT));
}

/* ---- rules ---- */

enum rule_kind {
	R_KEY1,   /* `event` on the first key, if the command changed anything */
	R_EACH,   /* `event` on each key of the key spec (MSET), if it changed anything */
	R_DEL,    /* "del" on each key it deleted */
	R_SET,    /* SET: "set", and "expire" with EX/PX/EXAT/PXAT */
	R_SETEX,  /* SETEX, PSETEX: "set" then "expire" */
	R_EXPIRE, /* "expire", or "del" when the time was past and the key went */
	R_GETEX,  /* "expire" with EX/PX/EXAT/PXAT, "persist" with PERSIST */
	R_RENAME, /* "rename_from" on the source, "rename_to" on the destination */
	R_COPY,   /* "copy_to" on the destination */
	R_DEST,   /* `event` on the first key, or "del" if it went (BITOP) */
	R_SHRINK, /* `event` on the first key, then "del" if it went (HDEL, SREM) */
	R_SMOVE,  /* "srem" on the source ("del" if it went), "sadd" on the destination */
	R_LMOVE,  /* "lpush"/"rpush" on the destination (argv[4], RPOPLPUSH: left),
		     "lpop"/"rpop" on the source (argv[3], RPOPLPUSH: right), "del"
		     if it went: Redis's order */
	R_POPKEY, /* the event the handler named on the key it popped from
		     (cmd_ctx.ev_key: LMPOP, BLPOP), then "del" if it went */
	R_ZADD,   /* "zincr" with INCR among ZADD's flags, else "zadd" */
	R_POPANY, /* ZMPOP, BZPOP*: "zpopmin"/"zpopmax" on the key popped, then "del"
		     if it went */
};

struct rule {
	const char *cmd;
	enum rule_kind kind;
	const char *event;
	uint32_t cls;
};

static const struct rule rules[] = {
	{ "set", R_SET, "set", N_STRING },
	{ "setnx", R_KEY1, "set", N_STRING },
	{ "getset", R_KEY1, "set", N_STRING },
	{ "setex", R_SETEX, "set", N_STRING },
	{ "psetex", R_SETEX, "set", N_STRING },
	{ "mset", R_EACH, "set", N_STRING },
	{ "msetnx", R_EACH, "set", N_STRING },
	{ "append", R_KEY1, "append", N_STRING },
	{ "incr", R_KEY1, "incrby", N_STRING },
	{ "incrby", R_KEY1, "incrby", N_STRING },
	{ "decr", R_KEY1, "incrby", N_STRING }, /* Redis: "incrby" for all four */
	{ "decrby", R_KEY1, "incrby", N_STRING },
	{ "incrbyfloat", R_KEY1, "incrbyfloat", N_STRING },
	{ "setrange", R_KEY1, "setrange", N_STRING },
	{ "setbit", R_KEY1, "setbit", N_STRING },
	{ "bitfield", R_KEY1, "setbit", N_STRING },
	{ "bitop", R_DEST, "set", N_STRING },
	{ "getdel", R_DEL, "del", N_GENERIC },
	{ "del", R_DEL, "del", N_GENERIC },
	{ "unlink", R_DEL, "del", N_GENERIC },
	{ "expire", R_EXPIRE, "expire", N_GENERIC },
	{ "pexpire", R_EXPIRE, "expire", N_GENERIC },
	{ "expireat", R_EXPIRE, "expire", N_GENERIC },
	{ "pexpireat", R_EXPIRE, "expire", N_GENERIC },
	{ "persist", R_KEY1, "persist", N_GENERIC },
	{ "getex", R_GETEX, "expire", N_GENERIC },
	{ "rename", R_RENAME, "rename_from", N_GENERIC },
	{ "renamenx", R_RENAME, "rename_from", N_GENERIC },
	{ "copy", R_COPY, "copy_to", N_GENERIC },
	{ "restore", R_KEY1, "restore", N_GENERIC },
	{ "hset", R_KEY1, "hset", N_HASH },
	{ "hsetnx", R_KEY1, "hset", N_HASH },
	{ "hmset", R_KEY1, "hset", N_HASH },
	{ "hincrby", R_KEY1, "hincrby", N_HASH },
	{ "hincrbyfloat", R_KEY1, "hincrbyfloat", N_HASH },
	{ "hdel", R_SHRINK, "hdel", N_HASH },
	{ "sadd", R_KEY1, "sadd", N_SET },
	{ "srem", R_SHRINK, "srem", N_SET },
	{ "spop", R_SHRINK, "spop", N_SET },
	{ "smove", R_SMOVE, "srem", N_SET },
	{ "sinterstore", R_DEST, "sinterstore", N_SET },
	{ "sunionstore", R_DEST, "sunionstore", N_SET },
	{ "sdiffstore", R_DEST, "sdiffstore", N_SET },
	{ "lpush", R_KEY1, "lpush", N_LIST },
	{ "lpushx", R_KEY1, "lpush", N_LIST },
	{ "rpush", R_KEY1, "rpush", N_LIST },
	{ "rpushx", R_KEY1, "rpush", N_LIST },
	{ "lpop", R_SHRINK, "lpop", N_LIST },
	{ "rpop", R_SHRINK, "rpop", N_LIST },
	{ "lset", R_KEY1, "lset", N_LIST },
	{ "linsert", R_KEY1, "linsert", N_LIST },
	{ "lrem", R_SHRINK, "lrem", N_LIST },
	{ "ltrim", R_SHRINK, "ltrim", N_LIST },
	{ "lmove", R_LMOVE, NULL, N_LIST },
	{ "blmove", R_LMOVE, NULL, N_LIST },
	{ "rpoplpush", R_LMOVE, NULL, N_LIST },
	{ "brpoplpush", R_LMOVE, NULL, N_LIST },
	{ "lmpop", R_POPKEY, NULL, N_LIST },
	{ "blmpop", R_POPKEY, NULL, N_LIST },
	{ "blpop", R_POPKEY, NULL, N_LIST },
	{ "brpop", R_POPKEY, NULL, N_LIST },
	{ "zadd", R_ZADD, "zadd", N_ZSET },
	{ "zincrby", R_KEY1, "zincr", N_ZSET },
	{ "zrem", R_SHRINK, "zrem", N_ZSET },
	{ "zremrangebyrank", R_SHRINK, "zremrangebyrank", N_ZSET },
	{ "zremrangebyscore", R_SHRINK, "zremrangebyscore", N_ZSET },
	{ "zremrangebylex", R_SHRINK, "zremrangebylex", N_ZSET },
	{ "zpopmin", R_SHRINK, "zpopmin", N_ZSET },
	{ "zpopmax", R_SHRINK, "zpopmax", N_ZSET },
	{ "zunionstore", R_DEST, "zunionstore", N_ZSET },
	{ "zinterstore", R_DEST, "zinterstore", N_ZSET },
	{ "zdiffstore", R_DEST, "zdiffstore", N_ZSET },
	{ "zrangestore", R_DEST, "zrangestore", N_ZSET },
	{ "zmpop", R_POPANY, NULL, N_ZSET },
	{ "bzmpop", R_POPANY, NULL, N_ZSET },
	{ "bzpopmin", R_POPANY, "zpopmin", N_ZSET },
	{ "bzpopmax", R_POPANY, "zpopmax", N_ZSET },
};

static const struct rule *rule_of(const struct cmd_def *def)
{
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (strcmp(rules[i].cmd, def->name) == 0)
			return &rules[i];
	return NULL;
}

#define MAX_TRACKED 64 /* keys whose deletion is compared before and after */

void notify_pre(struct cmd_ctx *c, const struct cmd_def *def, struct notify_pre *p)
{
	p->on = false;
	c->ev_key = 0;
	c->ev_name = NULL;
	if (!c->txn || !c->cl || !(def->flags & CMD_WRITE) || !notify_enabled(c->node))
		return;
	const struct rule *r = rule_of(def);
	if (!r)
		return;
	p->on = true;
	p->changes = txn_savepoint(c->txn).changes;
	p->deleted = 0;
	if (r->kind == R_DEL || r->kind == R_EXPIRE || r->kind == R_DEST || r->kind == R_SHRINK ||
	    r->kind == R_SMOVE || r->kind == R_LMOVE || r->kind == R_POPKEY ||
	    r->kind == R_POPANY) {
		int idx[MAX_TRACKED];
		int k = cmd_get_keys(def, c->argc, c->argv, idx, MAX_TRACKED);
		for (int i = 0; i < k; i++)
			if (txn_deleted(c->txn, c->argv[idx[i]].p, c->argv[idx[i]].len))
				p->deleted |= 1ULL << i;
	}
}

/* Queue one event: keyspace, then keyevent, as Redis sends them. */
static void emit(struct cmd_ctx *c, uint32_t cls, const char *event, const struct resp_arg *key)
{
	uint32_t f = flags_of(c->node);
	if (!(f & cls))
		return;
	size_t elen = strlen(event);
	char stack[256];
	size_t need = 16 + (key->len > elen ? key->len : elen);
	char *ch = need <= sizeof(stack) ? stack : malloc(need);
	if (!ch)
		return;
	if (f & N_KEYSPACE) {
		memcpy(ch, "__keyspace@0__:", 15);
		memcpy(ch + 15, key->p, key->len);
		(void)ps_defer(c->w, c->cl, PS_CHANNEL, ch, 15 + key->len, event, elen);
	}
	if (f & N_KEYEVENT) {
		memcpy(ch, "__keyevent@0__:", 15);
		memcpy(ch + 15, event, elen);
		(void)ps_defer(c->w, c->cl, PS_CHANNEL, ch, 15 + elen, key->p, key->len);
	}
	if (ch != stack)
		free(ch);
}

static bool has_arg(const struct cmd_ctx *c, int from, const char *const *words)
{
	for (int i = from; i < c->argc; i++)
		for (int k = 0; words[k]; k++)
			if (c->argv[i].len == strlen(words[k]) &&
			    strncasecmp(c->argv[i].p, words[k], c->argv[i].len) == 0)
				return true;
	return false;
}

/* Is argv[i] one of words? */
static bool has_arg_at(const struct cmd_ctx *c, int i, const char *const *words)
{
	for (int k = 0; words[k]; k++)
		if (c->argv[i].len == strlen(words[k]) &&
		    strncasecmp(c->argv[i].p, words[k], c->argv[i].len) == 0)
			return true;
	return false;
}

/*
 * The key a ZMPOP or BZPOP* popped: as the command chose it, the first of
 * its keys that holds a sorted set, which is the first that still does or
 * that this command deleted (those before it were absent: reading them
 * again costs nothing). Its event is the rule's, or ZMPOP's MIN or MAX
 * (the word after the keys).
 */
static void pop_any(struct cmd_ctx *c, const struct rule *r, const struct notify_pre *p,
		    const int *idx, int k)
{
	const char *ev = r->event;
	if (!ev) {
		int w = idx[k - 1] + 1;
		const char *const max[] = { "max", NULL };
		ev = w < c->argc && has_arg_at(c, w, max) ? "zpopmax" : "zpopmin";
	}
	for (int i = 0; i < k; i++) {
		const struct resp_arg *a = &c->argv[idx[i]];
		bool gone = !(p->deleted & (1ULL << i)) && txn_deleted(c->txn, a->p, a->len);
		const char *v;
		size_t vl;
		bool found = false;
		struct txn_meta m;
		if (!gone && (txn_get_meta(c->txn, a->p, a->len, &v, &vl, &found, &m) ||
			      !found || m.type != TXN_T_ZSET))
			continue;
		emit(c, N_ZSET, ev, a);
		if (gone)
			emit(c, N_GENERIC, "del", a);
		return;
	}
}

static const char *const expiry_words[] = { "ex", "px", "exat", "pxat", NULL };
static const char *const persist_words[] = { "persist", NULL };

void notify_post(struct cmd_ctx *c, const struct cmd_def *def, const struct notify_pre *p)
{
	if (!p->on)
		return;
	const struct rule *r = rule_of(def);
	bool changed = txn_savepoint(c->txn).changes != p->changes;
	int idx[MAX_TRACKED];
	int k = cmd_get_keys(def, c->argc, c->argv, idx, MAX_TRACKED);
	if (k == 0)
		return;
	const struct resp_arg *key1 = &c->argv[idx[0]];
	switch (r->kind) {
	case R_KEY1:
		if (changed)
			emit(c, r->cls, r->event, key1);
		break;
	case R_EACH:
		for (int i = 0; changed && i < k; i++)
			emit(c, r->cls, r->event, &c->argv[idx[i]]);
		break;
	case R_DEL:
		for (int i = 0; i < k; i++) {
			const struct resp_arg *a = &c->argv[idx[i]];
			if (!(p->deleted & (1ULL << i)) && txn_deleted(c->txn, a->p, a->len))
				emit(c, N_GENERIC, "del", a);
		}
		break;
	case R_SET:
		if (!changed)
			break;
		emit(c, N_STRING, "set", key1);
		if (has_arg(c, 3, expiry_words))
			emit(c, N_GENERIC, "expire", key1);
		break;
	case R_SETEX:
		if (!changed)
			break;
		emit(c, N_STRING, "set", key1);
		emit(c, N_GENERIC, "expire", key1);
		break;
	case R_EXPIRE:
		if (!changed)
			break;
		if (!(p->deleted & 1) && txn_deleted(c->txn, key1->p, key1->len))
			emit(c, N_GENERIC, "del", key1);
		else
			emit(c, N_GENERIC, "expire", key1);
		break;
	case R_GETEX:
		if (!changed)
			break;
		if (has_arg(c, 2, persist_words))
			emit(c, N_GENERIC, "persist", key1);
		else if (has_arg(c, 2, expiry_words))
			emit(c, N_GENERIC, "expire", key1);
		break;
	case R_RENAME:
		if (changed && k >= 2) {
			emit(c, N_GENERIC, "rename_from", key1);
			emit(c, N_GENERIC, "rename_to", &c->argv[idx[1]]);
		}
		break;
	case R_COPY:
		if (changed && k >= 2)
			emit(c, N_GENERIC, "copy_to", &c->argv[idx[1]]);
		break;
	case R_DEST:
		if (!changed)
			break;
		if (!(p->deleted & 1) && txn_deleted(c->txn, key1->p, key1->len))
			emit(c, N_GENERIC, "del", key1);
		else if (!txn_deleted(c->txn, key1->p, key1->len))
			emit(c, r->cls, r->event, key1);
		break;
	case R_SHRINK:
		if (!changed)
			break;
		emit(c, r->cls, r->event, key1);
		if (!(p->deleted & 1) && txn_deleted(c->txn, key1->p, key1->len))
			emit(c, N_GENERIC, "del", key1);
		break;
	case R_SMOVE:
		if (!changed || k < 2)
			break;
		emit(c, N_SET, "srem", key1);
		if (!(p->deleted & 1) && txn_deleted(c->txn, key1->p, key1->len))
			emit(c, N_GENERIC, "del", key1);
		emit(c, N_SET, "sadd", &c->argv[idx[1]]);
		break;
	case R_LMOVE: {
		if (!changed || k < 2)
			break;
		bool rpl = c->argc < 5; /* RPOPLPUSH, BRPOPLPUSH */
		bool to_left = rpl || (c->argv[4].len == 4 && strncasecmp(c->argv[4].p, "left", 4) == 0);
		bool from_left = !rpl && c->argv[3].len == 4 &&
				 strncasecmp(c->argv[3].p, "left", 4) == 0;
		emit(c, N_LIST, to_left ? "lpush" : "rpush", &c->argv[idx[1]]);
		emit(c, N_LIST, from_left ? "lpop" : "rpop", key1);
		if (!(p->deleted & 1) && txn_deleted(c->txn, key1->p, key1->len))
			emit(c, N_GENERIC, "del", key1);
		break;
	}
	case R_POPKEY:
		if (!changed || c->ev_key <= 0 || c->ev_key >= c->argc || !c->ev_name)
			break;
		emit(c, N_LIST, c->ev_name, &c->argv[c->ev_key]);
		for (int i = 0; i < k; i++)
			if (idx[i] == c->ev_key && !(p->deleted & (1ULL << i)) &&
			    txn_deleted(c->txn, c->argv[idx[i]].p, c->argv[idx[i]].len))
				emit(c, N_GENERIC, "del", &c->argv[idx[i]]);
		break;
	case R_ZADD: {
		/* ZADD's flags come before the first score (cmd_zset.c) */
		bool incr = false;
		static const char *const zflags[] = { "nx", "xx", "gt", "lt", "ch", NULL };
		for (int i = 2; i < c->argc; i++) {
			const char *const one[] = { "incr", NULL };
			if (has_arg_at(c, i, one))
				incr = true;
			else if (!has_arg_at(c, i, zflags))
				break;
		}
		if (changed)
			emit(c, N_ZSET, incr ? "zincr" : "zadd", key1);
		break;
	}
	case R_POPANY:
		if (changed)
			pop_any(c, r, p, idx, k);
		break;
	}
}

void notify_expired(struct worker *w, const char *key, size_t klen)
{
	uint32_t f = flags_of(w->node);
	if (!(f & N_EXPIRED))
		return;
	char stack[256];
	char *ch = klen + 16 <= sizeof(stack) ? stack : malloc(klen + 16);
	if (!ch)
		return;
	if (f & N_KEYSPACE) {
		memcpy(ch, "__keyspace@0__:", 15);
		memcpy(ch + 15, key, klen);
		(void)ps_publish(w, PS_CHANNEL, ch, 15 + klen, "expired", 7);
	}
	if (f & N_KEYEVENT)
		(void)ps_publish(w, PS_CHANNEL, "__keyevent@0__:expired", 22, key, klen);
	if (ch != stack)
		free(ch);
}

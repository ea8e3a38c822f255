/*
 * cmd_keyspace: the generic commands that move, copy, serialize and
 * inspect whole keys: RENAME, RENAMENX, COPY, MOVE, RANDOMKEY, DUMP,
 * RESTORE, OBJECT and DEBUG OBJECT, with Redis 7.0's replies and error
 * texts (checked against redis-server 7.0.15).
 *
 * RENAME, RENAMENX, COPY, DUMP and RESTORE run in the command's
 * transaction like every data command (cmd_string.c's rules (1) and (2):
 * a failed txn_* call ends the handler through cmd_txn_failed, and a value
 * from txn_get dies when its key is written). Their keys are declared from
 * the command table, so a RENAME whose two keys live on different nodes
 * is one transaction over both: the destination's write and the source's
 * delete commit together or not at all, under every protocol.
 *
 * What a key holds is moved as a whole by key_copy(): its value, its type
 * and its expiry (cc/txn.h txn_meta); for a bucketed collection
 * (server/coll.h) RENAME moves the root only and renames the parts'
 * owner, COPY copies every part under a new gen.
 *
 * One database: MOVE never moves (db 0 is the source: Redis's "same
 * objects" error; any other db: "DB index is out of range", as SELECT
 * says), and COPY accepts DB 0 only.
 *
 * RANDOMKEY finds a candidate by a lock-free walk of the index from a
 * random place (cluster_random_key: every node's keys), then reads it in
 * a transaction of its own, so the key it replies existed at that
 * transaction's point in the serial order (a key deleted meanwhile makes
 * it try another). Inside MULTI (or a script) the candidate is read in
 * the block's transaction instead, which sees the block's own writes
 * (randomkey_in_txn).
 *
 * OBJECT's subcommands, like every container's, are CMD_NOTXN rows: each
 * reads its key in a transaction of its own that declares it (key_read),
 * or in the block's when queued in MULTI. It answers what a client can
 * rely on: ENCODING as Redis would name
 * the value's encoding after a SET of it (int, embstr, raw: rckv has one
 * representation, so a value grown by APPEND, which Redis turns raw,
 * still says embstr when short), REFCOUNT as Redis's (its shared integers
 * 0..9999 say 2147483647), IDLETIME 0 (rckv does not track access times),
 * FREQ Redis's error for a server without an LFU policy (rckv has only
 * noeviction).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/txn.h"
#include "resp/resp.h"
#include "server/client.h"
#include "server/coll.h"
#include "server/list.h"
#include "server/zset.h"
#include "server/cluster.h"
#include "server/command.h"
#include "server/dispatch.h"
#include "server/memory.h"
#include "server/node.h"
#include "server/sha1.h"
#include "server/rdb.h"
#include "server/strutil.h"
#include "server/worker.h"
#include "storage/st.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

static const char ERR_NO_SUCH_KEY[] = "ERR no such key";
static const char ERR_SAME_OBJECT[] = "ERR source and destination objects are the same";
static const char ERR_DB_RANGE[] = "ERR DB index is out of range";
static const char ERR_DUMP_PAYLOAD[] = "ERR DUMP payload version or checksum are wrong";

static bool same_arg(const struct resp_arg *a, const struct resp_arg *b)
{
	return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

/*
 * A db index argument as Redis's getIntFromObjectOrReply reads it: an
 * integer, then within int. Returns 0, or -1 with the error replied.
 */
static int db_index(struct cmd_ctx *c, const struct resp_arg *a, long long *id)
{
	if (srv_str2ll(a->p, a->len, id) != 0) {
		cmd_reply_not_int(c);
		return -1;
	}
	if (*id < INT_MIN || *id > INT_MAX) {
		resp_error(c->out,
			   "ERR value is out of range, value must between -2147483648 and 2147483647");
		return -1;
	}
	return 0;
}

/* ---- what a key holds, moved whole ---- */

/*
 * Write what key `from` holds (value v, vlen: read in this transaction) as
 * key `to`: its value, its type and its expiry (cc/txn.h txn_meta). The
 * one place that knows what a key carries besides its value.
 */
static int key_copy(struct cmd_ctx *c, const struct resp_arg *from, const struct resp_arg *to,
		    const char *v, size_t vlen, bool rename)
{
	const char *again;
	size_t alen;
	bool found;
	struct txn_meta m;
	uint64_t gen;
	int rc = txn_get_meta(c->txn, from->p, from->len, &again, &alen, &found, &m);
	if (rc)
		return rc;
	if (m.type == TXN_T_STRING || !coll_root_gen(v, vlen, &gen))
		return txn_set_meta(c->txn, to->p, to->len, v, vlen, &m);
	/* A bucketed collection (server/coll.h): RENAME moves the root
	 * (its parts stay where they are, their owner names the new key);
	 * COPY makes a new incarnation with every part copied. */
	if (rename) {
		if ((rc = coll_rename_owner(c->txn, v, vlen, to->p, to->len)))
			return rc;
		return txn_set_meta(c->txn, to->p, to->len, v, vlen, &m);
	}
	char *nv;
	size_t nvl;
	rc = m.type == TXN_T_ZSET ? zs_copy_parts(c->txn, v, vlen, to->p, to->len, &nv, &nvl)
				  : coll_copy_parts(c->txn, v, vlen, to->p, to->len, &nv, &nvl);
	if (rc)
		return rc;
	rc = txn_set_meta(c->txn, to->p, to->len, nv, nvl, &m);
	free(nv);
	return rc;
}

/* ---- RENAME, RENAMENX ---- */

static int rename_cmd(struct cmd_ctx *c, bool nx)
{
	const struct resp_arg *src = &c->argv[1], *dst = &c->argv[2];
	size_t mark = c->out->len;
	const char *v;
	size_t vlen;
	bool found;
	int rc = txn_get(c->txn, KEY(c, 1), &v, &vlen, &found);

	if (rc)
		return cmd_txn_failed(c, mark, rc);
	if (!found) {
		resp_error(c->out, ERR_NO_SUCH_KEY);
		return 0;
	}
	/* The same key: nothing happens, but it must exist (above). */
	if (same_arg(src, dst)) {
		if (nx)
			resp_int(c->out, 0);
		else
			resp_status(c->out, "OK");
		return 0;
	}
	if (nx) {
		const char *dv;
		size_t dvlen;
		bool exists;

		if ((rc = txn_get(c->txn, KEY(c, 2), &dv, &dvlen, &exists)))
			return cmd_txn_failed(c, mark, rc);
		if (exists) {
			resp_int(c->out, 0);
			return 0;
		}
	}
	/* The destination first: v is the source's, alive until the source
	 * is written (rule (2)). */
	bool existed;
	if ((rc = key_copy(c, &c->argv[1], dst, v, vlen, true)) ||
	    (rc = txn_del(c->txn, KEY(c, 1), &existed)))
		return cmd_txn_failed(c, mark, rc);
	if (nx)
		resp_int(c->out, 1);
	else
		resp_status(c->out, "OK");
	return 0;
}

int cmd_rename(struct cmd_ctx *c)
{
	return rename_cmd(c, false);
}

int cmd_renamenx(struct cmd_ctx *c)
{
	return rename_cmd(c, true);
}

/* ---- COPY, MOVE ---- */

/* COPY source destination [DB destination-db] [REPLACE] */
int cmd_copy(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	bool replace = false;
	long long db = 0;
	int i, rc;

	for (i = 3; i < c->argc; i++) {
		if (arg_is(&c->argv[i], "replace")) {
			replace = true;
		} else if (arg_is(&c->argv[i], "db") && i + 1 < c->argc) {
			if (db_index(c, &c->argv[i + 1], &db))
				return 0;
			if (db != 0) {
				resp_error(c->out, ERR_DB_RANGE);
				return 0;
			}
			i++;
		} else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	if (same_arg(&c->argv[1], &c->argv[2])) {
		resp_error(c->out, ERR_SAME_OBJECT);
		return 0;
	}
	const char *v;
	size_t vlen;
	bool found;
	if ((rc = txn_get(c->txn, KEY(c, 1), &v, &vlen, &found)))
		return cmd_txn_failed(c, mark, rc);
	if (!found) {
		resp_int(c->out, 0);
		return 0;
	}
	if (!replace) {
		const char *dv;
		size_t dvlen;
		bool exists;

		if ((rc = txn_get(c->txn, KEY(c, 2), &dv, &dvlen, &exists)))
			return cmd_txn_failed(c, mark, rc);
		if (exists) {
			resp_int(c->out, 0);
			return 0;
		}
	}
	if ((rc = key_copy(c, &c->argv[1], &c->argv[2], v, vlen, false)))
		return cmd_txn_failed(c, mark, rc);
	resp_int(c->out, 1);
	return 0;
}

/* MOVE key db: with one database, never a move (see the file comment). It
 * reads no key, so it needs no transaction (CMD_NOTXN). */
int cmd_move(struct cmd_ctx *c)
{
	long long db;

	if (db_index(c, &c->argv[2], &db))
		return 0;
	resp_error(c->out, db == 0 ? ERR_SAME_OBJECT : ERR_DB_RANGE);
	return 0;
}

/* ---- one key read in a transaction of its own (CMD_NOTXN handlers) ---- */

struct key_read {
	const char *key;
	size_t klen;
	bool found;
	char *val; /* malloc'd copy */
	size_t vlen;
	struct txn_meta m;
};

static int key_read_body(struct txn *t, void *arg)
{
	struct key_read *r = arg;
	const char *v;
	size_t vlen;
	int rc;

	free(r->val);
	r->val = NULL;
	r->found = false;
	if ((rc = txn_get_meta(t, r->key, r->klen, &v, &vlen, &r->found, &r->m)))
		return rc;
	if (r->found) {
		if (!(r->val = malloc(vlen ? vlen : 1)))
			return CC_EINTERNAL;
		memcpy(r->val, v, vlen);
		r->vlen = vlen;
	}
	return CC_OK;
}

/* Read one key: in the block's transaction when queued in MULTI (c->txn),
 * else in a transaction of its own that declares it. 0, CC_ABORT (in a
 * block: the handler returns it), or an error (replied here). */
static int key_read(struct cmd_ctx *c, struct key_read *r)
{
	int rc;

	if (c->txn) {
		rc = key_read_body(c->txn, r);
		if (rc && rc != CC_ABORT)
			cmd_reply_txn_error(c, rc);
		return rc;
	}
	const struct cc_key k = { .p = r->key, .len = (uint32_t)r->klen, .access = CC_KEY_READ };
	const struct cc_txn tx = { .keys = &k, .nkeys = 1, .body = key_read_body, .arg = r };
	rc = cc_run(c->w->ccw, &tx);
	if (rc)
		srv_reply_txn_failed(c->out, c->node, rc);
	return rc;
}

/* ---- RANDOMKEY ---- */

#define RANDOMKEY_TRIES 8

/*
 * In a transaction (MULTI, a script) the reply must be a key of the
 * transaction's own view, as Redis's RANDOMKEY after a DEL or RENAME in
 * the same block sees the block's writes. The walk sees committed keys:
 * it passes over those the block deleted (txn_deleted), and the candidate
 * is read in the transaction (gone meanwhile: another). When no committed
 * key is left, a key the block itself wrote and did not delete is the
 * answer, if any (randomkey_own). So a key the block created is replied
 * only when no committed one is: not Redis's uniform choice, but never a
 * key that is not there. The seeds come from txn_rand, so a rerun (a CC
 * abort, calvin's OLLP round that declares the candidate) reaches the
 * same candidates. 0, or CC_ABORT for the handler to return.
 */
static bool randomkey_skip(void *arg, const char *key, size_t klen)
{
	return txn_deleted(arg, key, klen);
}

/* The n-th key (from 0) the transaction wrote that is present in its
 * view: true with *key malloc'd, or false with *count the number there
 * are (n >= *count). *rc: 0, or what txn_get failed with. */
static bool own_key(struct txn *t, int n, char **key, size_t *klen, int *count, int *rc)
{
	const char *k;
	size_t kl;
	int pos = 0;

	*count = 0;
	*rc = 0;
	while (txn_written_next(t, &pos, &k, &kl)) {
		const char *v;
		size_t vlen;
		bool found;
		char *copy = malloc(kl ? kl : 1);

		if (!copy) {
			*rc = CC_EINTERNAL;
			return false;
		}
		memcpy(copy, k, kl); /* k lives until the next txn_* call */
		*rc = txn_get(t, copy, kl, &v, &vlen, &found);
		if (*rc == 0 && found && (*count)++ == n) {
			*key = copy;
			*klen = kl;
			return true;
		}
		free(copy);
		if (*rc)
			return false;
	}
	return false;
}

static int randomkey_own(struct cmd_ctx *c)
{
	uint64_t pick = txn_rand(c->txn);
	char *key = NULL;
	size_t klen = 0;
	int count, rc;

	own_key(c->txn, -1, &key, &klen, &count, &rc); /* count them */
	if (rc == 0 && count > 0) /* the same view again: the pick is there */
		own_key(c->txn, (int)(pick % (uint64_t)count), &key, &klen, &count, &rc);
	if (rc) {
		if (rc != CC_ABORT)
			cmd_reply_txn_error(c, rc);
		return rc == CC_ABORT ? CC_ABORT : 0;
	}
	if (!key) {
		resp_null(c->out);
		return 0;
	}
	resp_bulk(c->out, key, klen);
	free(key);
	return 0;
}

static int randomkey_in_txn(struct cmd_ctx *c)
{
	char err[256];

	for (int tries = 0; tries < RANDOMKEY_TRIES; tries++) {
		char *key = NULL;
		size_t klen = 0;

		if (cluster_random_key(c->node, c->w, txn_rand(c->txn), randomkey_skip, c->txn,
				       &key, &klen, err, sizeof(err)) != 0) {
			resp_errorf(c->out, "ERR RANDOMKEY: %s", err);
			return 0;
		}
		if (!key) /* no committed key the block left */
			return randomkey_own(c);
		struct key_read r = { .key = key, .klen = klen };
		int rc = key_read(c, &r);
		free(r.val);
		if (rc == 0 && r.found)
			resp_bulk(c->out, key, klen);
		free(key);
		if (rc)
			return rc == CC_ABORT ? CC_ABORT : 0;
		if (r.found)
			return 0;
		/* Deleted since the walk saw it: another. */
	}
	return randomkey_own(c);
}

int cmd_randomkey(struct cmd_ctx *c)
{
	uint64_t seed = sched_now_ns() ^ (c->cl ? c->cl->id * 0x9e3779b97f4a7c15ull : 0);
	char err[256];

	if (c->txn)
		return randomkey_in_txn(c);
	for (int tries = 0; tries < RANDOMKEY_TRIES; tries++) {
		char *key = NULL;
		size_t klen = 0;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if (cluster_random_key(c->node, c->w, seed, NULL, NULL, &key, &klen, err,
				       sizeof(err)) != 0) {
			resp_errorf(c->out, "ERR RANDOMKEY: %s", err);
			return 0;
		}
		if (!key) { /* no key anywhere */
			resp_null(c->out);
			return 0;
		}
		struct key_read r = { .key = key, .klen = klen };
		int rc = key_read(c, &r);
		free(r.val);
		if (rc == 0 && r.found)
			resp_bulk(c->out, key, klen);
		free(key);
		if (rc || r.found)
			return 0;
		/* Deleted since the walk saw it: another. */
	}
	resp_null(c->out); /* keys vanish faster than we find them */
	return 0;
}

/* ---- DUMP, RESTORE ---- */

int cmd_dump(struct cmd_ctx *c)
{
	const char *v;
	size_t vlen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, KEY(c, 1), &v, &vlen, &found, &m);

	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	cmd_count_lookup(c, found);
	if (!found) {
		resp_null(c->out);
		return 0;
	}
	if (m.type != TXN_T_STRING) {
		resp_errorf(c->out, "ERR DUMP of a %s: rckv dumps strings only so far",
			    cmd_type_name(m.type));
		return 0;
	}
	struct rdb_buf b = { 0 };
	if (rdb_dump_string(v, vlen, &b) != 0) {
		free(b.p);
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	resp_bulk(c->out, b.p, b.len);
	free(b.p);
	return 0;
}

struct restore_opts {
	bool replace, absttl;
	long long idle, freq; /* -1: not given */
};

/* RESTORE's options, as Redis parses them (IDLETIME and FREQ exclude each
 * other: the second is a syntax error). 0, or -1 with the error replied. */
static int restore_opts(struct cmd_ctx *c, struct restore_opts *o)
{
	o->replace = o->absttl = false;
	o->idle = o->freq = -1;
	for (int i = 4; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		bool more = i + 1 < c->argc;

		if (arg_is(a, "replace")) {
			o->replace = true;
		} else if (arg_is(a, "absttl")) {
			o->absttl = true;
		} else if (arg_is(a, "idletime") && more && o->freq == -1) {
			if (srv_str2ll(c->argv[i + 1].p, c->argv[i + 1].len, &o->idle) != 0) {
				cmd_reply_not_int(c);
				return -1;
			}
			if (o->idle < 0) {
				resp_error(c->out, "ERR Invalid IDLETIME value, must be >= 0");
				return -1;
			}
			i++;
		} else if (arg_is(a, "freq") && more && o->idle == -1) {
			if (srv_str2ll(c->argv[i + 1].p, c->argv[i + 1].len, &o->freq) != 0) {
				cmd_reply_not_int(c);
				return -1;
			}
			if (o->freq < 0 || o->freq > 255) {
				resp_error(c->out, "ERR Invalid FREQ value, must be >= 0 and <= 255");
				return -1;
			}
			i++;
		} else {
			cmd_reply_syntax(c);
			return -1;
		}
	}
	return 0;
}

/*
 * RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
 * Redis's order of checks: options, BUSYKEY, the TTL, the payload's
 * version and checksum, its decoding. IDLETIME and FREQ are accepted and
 * dropped (rckv keeps no access times); a TTL sets the key's expiry.
 */
int cmd_restore(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	struct restore_opts o;
	long long ttl;
	int rc;

	if (restore_opts(c, &o))
		return 0;
	if (!o.replace) {
		const char *v;
		size_t vlen;
		bool exists;

		if ((rc = txn_get(c->txn, KEY(c, 1), &v, &vlen, &exists)))
			return cmd_txn_failed(c, mark, rc);
		if (exists) {
			resp_error(c->out, "BUSYKEY Target key name already exists.");
			return 0;
		}
	}
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &ttl) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (ttl < 0) {
		resp_error(c->out, "ERR Invalid TTL value, must be >= 0");
		return 0;
	}
	struct rdb_value val;
	size_t max = c->node ? (size_t)c->node->cfg.max_value_bytes : SIZE_MAX;
	rc = rdb_restore(c->argv[3].p, c->argv[3].len, max, &val);
	switch (rc) {
	case 0:
		break;
	case RDB_EVERSION:
		resp_error(c->out, ERR_DUMP_PAYLOAD);
		return 0;
	case RDB_ETYPE:
		resp_errorf(c->out, "ERR RESTORE: the payload holds a %s; rckv restores strings "
			    "only so far", rdb_type_name(val.type));
		return 0;
	case RDB_ETOOBIG:
		cmd_reply_txn_error(c, CC_ETOOBIG);
		return 0;
	case RDB_ENOMEM:
		resp_error(c->out, "ERR out of memory");
		return 0;
	default:
		resp_error(c->out, "ERR Bad data format");
		return 0;
	}
	/* ttl: ms from now, or (ABSTTL) a unix time in ms; 0: none. One
	 * already past deletes the key (txn_set_meta), as Redis does. */
	struct txn_meta m = { .type = TXN_T_STRING };
	if (ttl)
		m.expire_ms = o.absttl ? ttl
			      : (ttl > INT64_MAX - txn_now_ms(c->txn) ? INT64_MAX
								       : txn_now_ms(c->txn) + ttl);
	rc = txn_set_meta(c->txn, KEY(c, 1), val.str ? val.str : "", val.len, &m);
	rdb_value_free(&val);
	if (rc)
		return cmd_txn_failed(c, mark, rc);
	resp_status(c->out, "OK");
	return 0;
}

/* ---- OBJECT, DEBUG OBJECT ---- */

/* Redis keeps integers 0..9999 as shared objects (OBJ_SHARED_INTEGERS)
 * whose refcount reads INT_MAX. */
#define SHARED_INTEGERS 10000
/* Redis stores strings up to 44 bytes in one allocation (embstr). */
#define EMBSTR_MAX 44
/* ... and those that parse as a long of at most 20 characters as integers. */
#define INT_TEXT_MAX 20

static bool value_as_int(const char *v, size_t vlen, long long *n)
{
	return vlen <= INT_TEXT_MAX && srv_str2ll(v, vlen, n) == 0;
}

static const char *encoding_of(const char *v, size_t vlen)
{
	long long n;

	if (value_as_int(v, vlen, &n))
		return "int";
	return vlen <= EMBSTR_MAX ? "embstr" : "raw";
}

static long long refcount_of(const char *v, size_t vlen)
{
	long long n;

	return value_as_int(v, vlen, &n) && n >= 0 && n < SHARED_INTEGERS ? INT_MAX : 1;
}

static const char *const object_help[] = {
	"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ENCODING <key>",
	"    Return the kind of internal representation used in order to store the value",
	"    associated with a <key>.",
	"FREQ <key>",
	"    Return the access frequency index of the <key>. The returned integer is",
	"    proportional to the logarithm of the recent access frequency of the key.",
	"IDLETIME <key>",
	"    Return the idle time of the <key>, that is the approximated number of",
	"    seconds elapsed since the last access to the key.",
	"REFCOUNT <key>",
	"    Return the number of references of the value associated with the specified",
	"    <key>.",
	"HELP",
	"    Prints this help.",
};

int cmd_object(struct cmd_ctx *c)
{
	const struct resp_arg *sub = &c->argv[1];

	if (arg_is(sub, "help")) {
		int n = (int)(sizeof(object_help) / sizeof(object_help[0]));
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			resp_status(c->out, object_help[i]);
		return 0;
	}
	struct key_read r = { .key = c->argv[2].p, .klen = c->argv[2].len };
	int rc = key_read(c, &r);
	const char *v = r.val;
	size_t vlen = r.vlen;

	if (rc) {
		free(r.val);
		return rc == CC_ABORT ? CC_ABORT : 0;
	}
	if (!r.found) {
		resp_null(c->out);
	} else if (arg_is(sub, "encoding")) {
		resp_bulk_cstr(c->out, r.m.type == TXN_T_STRING ? encoding_of(v, vlen)
							       : coll_encoding_of(r.m.type, v, vlen));
	} else if (arg_is(sub, "refcount")) {
		resp_int(c->out, r.m.type == TXN_T_STRING ? refcount_of(v, vlen) : 1);
	} else if (arg_is(sub, "idletime")) {
		resp_int(c->out, 0);
	} else { /* freq: dispatch admits only the subcommands of the table */
		resp_error(c->out, "ERR An LFU maxmemory policy is not selected, access frequency "
				   "not tracked. Please note that when switching between policies at "
				   "runtime LRU and LFU data will take some time to adjust.");
	}
	free(r.val);
	return 0;
}

/* DEBUG OBJECT key (cmd_debug): Redis's line, with what rckv knows. "Value
 * at" is an address in Redis; rckv names no address (0x0). */
int cmd_debug_object(struct cmd_ctx *c)
{
	struct key_read r = { .key = c->argv[2].p, .klen = c->argv[2].len };
	int rc = key_read(c, &r);

	if (rc) {
		free(r.val);
		return rc == CC_ABORT ? CC_ABORT : 0;
	}
	if (!r.found) {
		resp_error(c->out, ERR_NO_SUCH_KEY);
		return 0;
	}
	char line[200];
	snprintf(line, sizeof(line),
		 "Value at:0x0 refcount:%lld encoding:%s serializedlength:%zu lru:0 "
		 "lru_seconds_idle:0",
		 refcount_of(r.val, r.vlen),
		 r.m.type == TXN_T_STRING ? encoding_of(r.val, r.vlen)
					  : coll_encoding_of(r.m.type, r.val, r.vlen),
		 rdb_string_serialized_len(r.val, r.vlen));
	free(r.val);
	resp_status(c->out, line);
	return 0;
}

/*
 * DEBUG DIGEST-VALUE key [key ...]: a 40-hex digest of each value (40
 * zeros for a missing key), equal for equal values, as Redis's test suites
 * compare a copy with its source: SHA-1 of the type and, for a string, its
 * bytes; for a hash or a set, of the XOR of each element's SHA-1, so that
 * the order of the elements does not matter. Not Redis's own digests
 * (those depend on its encodings); the expiry is not part of it, as in
 * Redis. Each key is read in a transaction of its own.
 */
struct digest {
	struct key_read r;
	unsigned char acc[20];
};

static void hex_xor(unsigned char acc[20], const char hex[40])
{
	for (int i = 0; i < 20; i++) {
		unsigned v = 0;
		for (int k = 0; k < 2; k++) {
			char ch = hex[2 * i + k];
			v = v * 16 + (unsigned)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
		}
		acc[i] ^= (unsigned char)v;
	}
}

static int digest_elem(void *arg, const struct coll_elem *e)
{
	struct digest *d = arg;
	char *buf = malloc(e->fl + e->vl + 1), hex[41];
	if (!buf)
		return 1;
	memcpy(buf, e->f, e->fl);
	buf[e->fl] = '\0'; /* field and value apart: ("ab","") is not ("a","b") */
	if (e->vl)
		memcpy(buf + e->fl + 1, e->v, e->vl);
	sha1_hex(buf, e->fl + e->vl + 1, hex);
	free(buf);
	hex_xor(d->acc, hex);
	return 0;
}

static int digest_body(struct txn *t, void *arg)
{
	struct digest *d = arg;
	memset(d->acc, 0, sizeof(d->acc));
	int rc = key_read_body(t, &d->r);
	if (rc || !d->r.found ||
	    (d->r.m.type != TXN_T_HASH && d->r.m.type != TXN_T_SET && d->r.m.type != TXN_T_ZSET))
		return rc;
	struct coll s;
	bool vals = d->r.m.type != TXN_T_SET; /* a zset's: the score's 8 bytes */
	rc = coll_open(t, d->r.key, d->r.klen, d->r.m.type, vals, &s);
	if (rc == 0)
		rc = coll_foreach(&s, digest_elem, d);
	coll_free(&s);
	return rc;
}

int cmd_debug_digest_value(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	resp_array(c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		struct digest d = { .r = { .key = c->argv[i].p, .klen = c->argv[i].len } };
		const struct cc_key k = { .p = d.r.key, .len = (uint32_t)d.r.klen,
					  .access = CC_KEY_READ };
		const struct cc_txn tx = { .keys = &k, .nkeys = 1, .body = digest_body, .arg = &d };
		int rc = c->txn ? digest_body(c->txn, &d) : cc_run(c->w->ccw, &tx);
		char hex[41];
		if (rc) {
			free(d.r.val);
			if (c->txn)
				return cmd_txn_failed(c, mark, rc); /* the error, not the array */
			c->out->len = mark;
			srv_reply_txn_failed(c->out, c->node, rc);
			return 0;
		}
		if (!d.r.found) {
			memset(hex, '0', 40);
		} else {
			size_t n = d.r.m.type == TXN_T_STRING ? d.r.vlen : sizeof(d.acc);
			char *buf = malloc(n + 1);
			if (!buf) {
				free(d.r.val);
				c->out->len = mark;
				resp_error(c->out, "ERR out of memory");
				return 0;
			}
			buf[0] = (char)d.r.m.type;
			memcpy(buf + 1, d.r.m.type == TXN_T_STRING ? (const void *)d.r.val : d.acc, n);
			sha1_hex(buf, n + 1, hex);
			free(buf);
		}
		free(d.r.val);
		resp_bulk(c->out, hex, 40);
	}
	return 0;
}

/* ---- MEMORY ---- */

static const char *const memory_help[] = {
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return memory problems reports.",
	"MALLOC-STATS",
	"    Return internal statistics report from the memory allocator.",
	"PURGE",
	"    Attempt to purge dirty pages for reclamation by the allocator.",
	"STATS",
	"    Return information about the memory usage of the server.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Prints this help.",
};

/*
 * MEMORY USAGE: the bytes the key takes in the MemStore, each item's block
 * at its size class (header, key and value; storage/st.h), which is what
 * INFO's used_memory counts: the key's item, and a bucketed collection's
 * parts (coll_usage), from SAMPLES buckets (default 5, 0: all) scaled up,
 * as Redis samples a big value's elements.
 */
struct usage_read {
	struct key_read r;
	uint64_t samples, parts;
};

static int usage_body(struct txn *t, void *arg)
{
	struct usage_read *u = arg;
	int rc = key_read_body(t, &u->r);
	u->parts = 0;
	if (rc == 0 && u->r.found && u->r.m.type == TXN_T_LIST) {
		struct list l; /* a chunked list's chunks (server/list.h) */
		rc = list_open(t, u->r.key, u->r.klen, &l);
		if (rc == 0)
			rc = list_usage(&l, u->samples, &u->parts);
		list_free(&l);
		return rc;
	}
	if (rc || !u->r.found || (u->r.m.type != TXN_T_HASH && u->r.m.type != TXN_T_SET))
	if (rc || !u->r.found)
		return rc;
	if (u->r.m.type == TXN_T_ZSET) {
		struct zset z;
		rc = zs_open(t, u->r.key, u->r.klen, 128, 64, &z);
		if (rc == 0)
			rc = zs_usage(&z, u->samples, &u->parts);
		zs_free(&z);
		return rc;
	}
	if (u->r.m.type != TXN_T_HASH && u->r.m.type != TXN_T_SET)
		return rc;
	struct coll s;
	rc = coll_open(t, u->r.key, u->r.klen, u->r.m.type, u->r.m.type == TXN_T_HASH, &s);
	if (rc == 0)
		rc = coll_usage(&s, u->samples, &u->parts);
	coll_free(&s);
	return rc;
}

static int memory_usage(struct cmd_ctx *c)
{
	long long samples = 5;
	if (c->argc == 5 && arg_is(&c->argv[3], "samples")) {
		if (srv_str2ll(c->argv[4].p, c->argv[4].len, &samples) != 0) {
			cmd_reply_not_int(c);
			return 0;
		}
		if (samples < 0) {
			cmd_reply_syntax(c); /* as Redis */
			return 0;
		}
	} else if (c->argc != 3) {
		cmd_reply_syntax(c);
		return 0;
	}
	struct usage_read u = { .r = { .key = c->argv[2].p, .klen = c->argv[2].len },
				.samples = (uint64_t)samples };
	int rc;
	if (c->txn) {
		rc = usage_body(c->txn, &u);
		if (rc && rc != CC_ABORT)
			cmd_reply_txn_error(c, rc);
	} else {
		const struct cc_key k = { .p = u.r.key, .len = (uint32_t)u.r.klen,
					  .access = CC_KEY_READ };
		const struct cc_txn tx = { .keys = &k, .nkeys = 1, .body = usage_body, .arg = &u };
		if ((rc = cc_run(c->w->ccw, &tx)))
			srv_reply_txn_failed(c->out, c->node, rc);
	}
	free(u.r.val);
	if (rc)
		return rc == CC_ABORT ? CC_ABORT : 0;
	if (!u.r.found)
		resp_null(c->out);
	else
		resp_int(c->out, (long long)(st_item_bytes((uint32_t)u.r.klen, (uint32_t)u.r.vlen) +
					     u.parts));
	return 0;
}

/*
 * MEMORY STATS: Redis 7.0's fields, in its order, from what rckv counts
 * (server/memory.h): total.allocated is used_memory (MemStore blocks plus
 * the heap), dataset.bytes the blocks, overhead.total the heap, db.0's
 * main hashtable the region's fixed index, keys.count this node's keys
 * (INFO keyspace's count: a walk). Redis's allocator figures are given
 * for the process as one allocator: active and resident are the RSS.
 * What rckv has no counterpart for (replication backlog, AOF buffer,
 * startup allocation, client buffers) is 0.
 */
static void memory_stats(struct cmd_ctx *c)
{
	struct srv_mem m;
	srv_mem_sample(c->node, &m);
	uint64_t keys = cluster_local_count(c->node), rss = srv_mem_rss();
	double used = m.used ? (double)m.used : 1.0;
	const struct { const char *name; uint64_t v; } head[] = {
		{ "peak.allocated", m.peak }, { "total.allocated", m.used },
		{ "startup.allocated", 0 },   { "replication.backlog", 0 },
		{ "clients.slaves", 0 },      { "clients.normal", 0 },
		{ "cluster.links", 0 },       { "aof.buffer", 0 },
		{ "lua.caches", 0 },          { "functions.caches", 0 },
	};
	int nhead = (int)(sizeof(head) / sizeof(head[0]));
	resp_map(c->out, nhead + (keys ? 1 : 0) + 17);
	for (int i = 0; i < nhead; i++) {
		resp_bulk(c->out, head[i].name, strlen(head[i].name));
		resp_int(c->out, (long long)head[i].v);
	}
	if (keys) {
		resp_bulk(c->out, "db.0", 4);
		resp_map(c->out, 3);
		resp_bulk(c->out, "overhead.hashtable.main", 23);
		resp_int(c->out, (long long)m.st.index_bytes);
		resp_bulk(c->out, "overhead.hashtable.expires", 26);
		resp_int(c->out, 0);
		resp_bulk(c->out, "overhead.hashtable.slot-to-keys", 31);
		resp_int(c->out, 0);
	}
#define STAT_INT(name, v) (resp_bulk(c->out, name, strlen(name)), resp_int(c->out, (long long)(v)))
#define STAT_DBL(name, v) (resp_bulk(c->out, name, strlen(name)), resp_double(c->out, (v)))
	STAT_INT("overhead.total", m.heap);
	STAT_INT("keys.count", keys);
	STAT_INT("keys.bytes-per-key", keys ? m.used / keys : 0);
	STAT_INT("dataset.bytes", m.store);
	STAT_DBL("dataset.percentage", (double)m.store * 100.0 / used);
	STAT_DBL("peak.percentage", (double)m.used * 100.0 / (double)(m.peak ? m.peak : 1));
	STAT_INT("allocator.allocated", m.used);
	STAT_INT("allocator.active", rss);
	STAT_INT("allocator.resident", rss);
	STAT_DBL("allocator-fragmentation.ratio", (double)rss / used);
	STAT_INT("allocator-fragmentation.bytes", (long long)rss - (long long)m.used);
	STAT_DBL("allocator-rss.ratio", 1.0);
	STAT_INT("allocator-rss.bytes", 0);
	STAT_DBL("rss-overhead.ratio", 1.0);
	STAT_INT("rss-overhead.bytes", 0);
	STAT_DBL("fragmentation", (double)rss / used);
	STAT_INT("fragmentation.bytes", (long long)rss - (long long)m.used);
#undef STAT_INT
#undef STAT_DBL
}

int cmd_memory(struct cmd_ctx *c)
{
	const struct resp_arg *sub = &c->argv[1];
	if (arg_is(sub, "usage"))
		return memory_usage(c);
	if (arg_is(sub, "stats")) {
		memory_stats(c);
		return 0;
	}
	if (arg_is(sub, "doctor")) {
		/* rckv's memory is its MemStore region, sized up front: none of
		 * Redis's allocator or fragmentation diagnoses apply. */
		resp_verbatim(c->out, "Hi Sam, I can't find any memory issue in your instance. I can "
				      "only account for what occurs on this base.\n",
			      strlen("Hi Sam, I can't find any memory issue in your instance. I "
				     "can only account for what occurs on this base.\n"));
	} else if (arg_is(sub, "malloc-stats")) {
		resp_verbatim(c->out, "Stats not supported for the current allocator",
			      strlen("Stats not supported for the current allocator"));
	} else if (arg_is(sub, "purge")) {
		resp_status(c->out, "OK");
	} else {
		int n = (int)(sizeof(memory_help) / sizeof(memory_help[0]));
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			resp_status(c->out, memory_help[i]);
	}
	return 0;
}

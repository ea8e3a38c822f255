/*
 * cmd_keys: the keyspace commands DEL/UNLINK, EXISTS, TYPE, KEYS, SCAN,
 * DBSIZE, FLUSHDB and FLUSHALL, with Redis 7.0's replies and error texts.
 *
 * DEL, EXISTS and TYPE run in the command's transaction like every data
 * command (see cmd_string.c for the cmd_txn_failed() rule: a failed txn_* call
 * cuts the partial reply back, CC_ABORT is returned as is, other errors
 * become this command's error reply).
 *
 * KEYS, SCAN and DBSIZE read the regions directly with st_scan /
 * st_count (each node's, through cluster.c). That is deliberately not
 * transactional: it is lock-free, may see a concurrent write before or
 * after its commit, and never sees writes still private to another
 * running transaction. Inside MULTI, KEYS and DBSIZE overlay the block's
 * own writes (overlay_walk); SCAN does not. Redis gives SCAN the same "no
 * snapshot" guarantee; KEYS and DBSIZE in Redis are atomic, which a
 * lock-free scan of a shared region cannot be.
 *
 * FLUSHDB/FLUSHALL empty the local region with the node quiesced, or, when
 * queued in MULTI, delete key by key inside the EXEC transaction (see
 * flush_in_txn for why).
 */
#include <ck_pr.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/durable.h"
#include "cc/switch.h"
#include "cc/txn.h"
#include "resp/resp.h"
#include "server/client.h"
#include "server/cluster.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/expire.h"
#include "server/node.h"
#include "server/strutil.h"
#include "server/worker.h"
#include "storage/st.h"

#define KEY(c, i) (c)->argv[i].p, (c)->argv[i].len

/* Buckets st_scan visits per call while KEYS or a flush walks everything. */
#define SCAN_ALL_STEP 4096
/* SCAN's default COUNT, as in Redis. */
#define SCAN_DEFAULT_COUNT 10
/* Fewest index buckets one SCAN call may visit (see cmd_scan). */
#define SCAN_MIN_BUCKETS 16384

/* ---- keys a MULTI block wrote before this command ---- */

struct key_list {
	struct resp_arg *keys;
	size_t n, cap;
	bool oom;
};

static int list_key(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct key_list *kl = arg;
	char *copy;

	(void)it;
	if (kl->n == kl->cap) {
		size_t cap = kl->cap ? kl->cap * 2 : 64;
		struct resp_arg *k = realloc(kl->keys, cap * sizeof(*k));

		if (!k) {
			kl->oom = true;
			return 1;
		}
		kl->keys = k;
		kl->cap = cap;
	}
	copy = malloc(klen ? klen : 1);
	if (!copy) {
		kl->oom = true;
		return 1;
	}
	memcpy(copy, key, klen);
	kl->keys[kl->n].p = copy;
	kl->keys[kl->n].len = klen;
	kl->n++;
	return 0;
}

static int list_key_c(void *arg, const char *key, size_t klen)
{
	return list_key(arg, key, (uint32_t)klen, NULL);
}

static void key_list_free(struct key_list *kl)
{
	size_t i;

	for (i = 0; i < kl->n; i++)
		free(kl->keys[i].p);
	free(kl->keys);
}

static bool flush_args_ok(int argc, const struct resp_arg *argv)
{
	return argc <= 2 && (argc < 2 || arg_is(&argv[1], "sync") || arg_is(&argv[1], "async"));
}

static int cmp_arg(const void *x, const void *y)
{
	const struct resp_arg *a = x, *b = y;
	size_t n = a->len < b->len ? a->len : b->len;
	int d = memcmp(a->p, b->p, n);

	return d ? d : (a->len > b->len) - (a->len < b->len);
}

/*
 * The keys that commands queued before this one in the same MULTI block
 * may have written: their writes are still private to the transaction, so
 * st_scan cannot see them. Sorted, without repeats, for own_wrote. The
 * queue is intact while EXEC runs it (multi.c frees it afterwards); this
 * command is found in it by its argv. *flushed: a FLUSHDB or FLUSHALL came
 * first in the block, so no key committed before the block is left in it.
 * Returns 0, or -1 out of memory.
 */
static int own_writes(struct cmd_ctx *c, struct key_list *kl, bool *flushed)
{
	struct client *cl = c->cl;
	int i, j;

	*flushed = false;
	if (!cl)
		return 0;
	for (i = 0; i < cl->mq_len && cl->mq[i].argv != c->argv; i++) {
		const struct queued_cmd *q = &cl->mq[i];
		int *idx, n;

		if (!(q->def->flags & CMD_WRITE))
			continue;
		if ((q->def->flags & CMD_ALLKEYS) && flush_args_ok(q->argc, q->argv))
			*flushed = true;
		idx = malloc((size_t)q->argc * sizeof(*idx));
		if (!idx)
			return -1;
		n = cmd_get_keys(q->def, q->argc, q->argv, idx, q->argc);
		for (j = 0; j < n && !kl->oom; j++)
			list_key(kl, q->argv[idx[j]].p, (uint32_t)q->argv[idx[j]].len, NULL);
		free(idx);
		if (kl->oom)
			return -1;
	}
	if (kl->n > 1) {
		size_t k = 1;

		qsort(kl->keys, kl->n, sizeof(*kl->keys), cmp_arg);
		for (size_t r = 1; r < kl->n; r++) {
			if (cmp_arg(&kl->keys[r], &kl->keys[k - 1]) == 0)
				free(kl->keys[r].p);
			else
				kl->keys[k++] = kl->keys[r];
		}
		kl->n = k;
	}
	return 0;
}

static bool own_wrote(const struct key_list *kl, const char *key, size_t klen)
{
	struct resp_arg k = { .p = (char *)key, .len = klen };

	return kl->n && bsearch(&k, kl->keys, kl->n, sizeof(*kl->keys), cmp_arg);
}

/* What the transaction sees of a key it may have written: a read through
 * it, which answers from the transaction's own write if there is one. */
static int txn_sees(struct cmd_ctx *c, const struct resp_arg *k, bool *found)
{
	const char *v;
	size_t vl;

	return txn_get(c->txn, k->p, k->len, &v, &vl, found);
}

/* ---- DEL / UNLINK, EXISTS, TYPE ---- */

/* DEL and UNLINK: rckv frees blocks when the transaction retires them, so
 * there is no lazy variant to choose. A repeated key counts once. */
int cmd_del(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long n = 0;
	int i, rc;

	bool dropped = false;
	for (i = 1; i < c->argc; i++) {
		bool existed;
		const char *v;
		size_t vlen;
		struct txn_meta m;
		uint64_t gen;

		rc = txn_get_meta(c->txn, KEY(c, i), &v, &vlen, &existed, &m);
		if (rc == 0 && existed && m.type != TXN_T_STRING && coll_root_gen(v, vlen, &gen))
			dropped = true; /* its parts become orphans (server/coll.h) */
		if (rc == 0)
			rc = txn_del(c->txn, KEY(c, i), &existed);
		if (rc)
			return cmd_txn_failed(c, mark, rc);
		n += existed;
	}
	if (dropped && c->node)
		expire_cycle_poke(c->node); /* collect them soon */
	resp_int(c->out, n);
	return 0;
}

/* EXISTS counts a key as often as it is named, as Redis does. */
/* EXISTS of one key (dispatch's reply1; the handler below counts many). */
void cmd_exists_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen)
{
	(void)v;
	(void)vlen;
	cmd_count_lookup(c, found);
	resp_int(c->out, found);
}

int cmd_exists(struct cmd_ctx *c)
{
	size_t mark = c->out->len;
	long long n = 0;
	int i, rc;

	for (i = 1; i < c->argc; i++) {
		const char *v;
		size_t vlen;
		bool found;

		rc = txn_get(c->txn, KEY(c, i), &v, &vlen, &found);
		if (rc)
			return cmd_txn_failed(c, mark, rc);
		cmd_count_lookup(c, found);
		n += found;
	}
	resp_int(c->out, n);
	return 0;
}

void cmd_type_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen)
{
	(void)v;
	(void)vlen;
	cmd_count_lookup(c, found);
	resp_status(c->out, found ? cmd_type_name(c->ktype) : "none");
}

const char *cmd_type_name(uint8_t type)
{
	switch (type) {
	case TXN_T_STRING: return "string";
	case TXN_T_HASH: return "hash";
	case TXN_T_LIST: return "list";
	case TXN_T_SET: return "set";
	case TXN_T_ZSET: return "zset";
	default: return "none"; /* a part: never a client's key */
	}
}

int cmd_type(struct cmd_ctx *c)
{
	return cmd_read_key1(c, cmd_type_reply);
}

/* ---- KEYS, SCAN, DBSIZE ---- */

/* Collects matching keys into a side buffer: the array header needs the
 * count, known only at the end. */
struct key_collect {
	const char *pat;
	size_t plen;
	bool use_pattern;   /* false: every key matches */
	bool type_ok;       /* SCAN TYPE names the type our keys have */
	uint64_t visited;   /* keys seen, matching or not (SCAN's COUNT) */
	long n;             /* keys written to buf */
	struct resp_w buf;
};

static int collect_key(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct key_collect *kc = arg;

	(void)it;
	kc->visited++;
	if (!kc->type_ok)
		return 0;
	if (kc->use_pattern && !srv_strmatch(kc->pat, kc->plen, key, klen, false))
		return 0;
	resp_bulk(&kc->buf, key, klen);
	kc->n++;
	return 0;
}

static void collect_init(struct key_collect *kc, struct cmd_ctx *c)
{
	memset(kc, 0, sizeof(*kc));
	kc->type_ok = true;
	resp_w_init(&kc->buf, c->out->proto);
}

/* cluster_key_fn adapters over the st_scan-style visitors above */
static int collect_key_c(void *arg, const char *key, size_t klen)
{
	return collect_key(arg, key, (uint32_t)klen, NULL);
}

/*
 * KEYS and DBSIZE inside a MULTI block see the block's own writes, as in
 * Redis: the committed keys the scan lists, except those the block wrote
 * (all of them after a FLUSH* in the block), and then those it wrote as
 * the transaction reads them now.
 */
struct overlay {
	const struct key_list *own;
	cluster_key_fn fn; /* the visitor for a committed key not overlaid */
	void *arg;
	uint64_t n;        /* keys passed on */
};

static int overlay_key(void *arg, const char *key, size_t klen)
{
	struct overlay *o = arg;

	if (own_wrote(o->own, key, klen))
		return 0;
	o->n++;
	return o->fn ? o->fn(o->arg, key, klen) : 0;
}

/* The committed keys the block did not write, then the block's own keys
 * that it holds now (as the transaction reads them), both through fn
 * (NULL: count only); *n counts both. *txn_rc: a read's error, if any. */
static int overlay_walk(struct cmd_ctx *c, const char *pat, size_t plen, cluster_key_fn fn,
			void *arg, uint64_t *n, char *err, size_t errlen, int *txn_rc)
{
	struct key_list own = { 0 };
	bool flushed;
	struct overlay o = { &own, fn, arg, 0 };
	int rc = 0;

	*txn_rc = 0;
	if (own_writes(c, &own, &flushed) != 0) {
		key_list_free(&own);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!fn && !flushed && own.n == 0) { /* a count, and nothing to overlay */
		key_list_free(&own);
		return cluster_count(c->node, c->w, n, err, errlen);
	}
	if (!flushed && cluster_keys(c->node, c->w, pat, plen, overlay_key, &o, err, errlen) != 0)
		rc = -1;
	for (size_t i = 0; i < own.n && rc == 0; i++) {
		bool found;

		if (plen && !srv_strmatch(pat, plen, own.keys[i].p, own.keys[i].len, false))
			continue;
		if ((*txn_rc = txn_sees(c, &own.keys[i], &found)) != 0)
			break;
		if (!found)
			continue;
		o.n++;
		if (fn)
			fn(arg, own.keys[i].p, own.keys[i].len);
	}
	key_list_free(&own);
	*n = o.n;
	return rc;
}

/*
 * A walk of the stores outside a transaction may have seen a key whose
 * commit the log does not hold yet (cc/durable.h, early lock release):
 * like a transaction that only read, its reply waits for the log. False,
 * with an error reply, when the log failed.
 */
static bool walk_durable(struct cmd_ctx *c, const char *cmd)
{
	int rc = durable_wait_seen(&c->node->cc, c->w->ccw);
	if (rc)
		resp_errorf(c->out, "ERR %s: what it read may not be durable: %s", cmd,
			    strerror(-rc));
	return rc == 0;
}

int cmd_keys(struct cmd_ctx *c)
{
	struct key_collect kc;
	char err[256];
	int rc, txn_rc = 0;
	uint64_t n;

	collect_init(&kc, c);
	kc.pat = c->argv[1].p;
	kc.plen = c->argv[1].len;
	/* Redis lists every key, the empty one included, for exactly "*";
	 * any other pattern goes through the matcher, which never matches
	 * the empty key with a non-empty pattern (strutil.h). */
	kc.use_pattern = !(kc.plen == 1 && kc.pat[0] == '*');
	const char *pat = kc.use_pattern ? kc.pat : "";
	size_t plen = kc.use_pattern ? kc.plen : 0;
	/* Every node's keys: this node's region, then each peer's. */
	if (c->txn)
		rc = overlay_walk(c, pat, plen, collect_key_c, &kc, &n, err, sizeof(err), &txn_rc);
	else
		rc = cluster_keys(c->node, c->w, pat, plen, collect_key_c, &kc, err, sizeof(err));
	if (txn_rc) {
		resp_w_free(&kc.buf);
		return cmd_txn_failed(c, c->out->len, txn_rc);
	}
	if (rc != 0) {
		resp_errorf(c->out, "ERR KEYS: %s", err);
		resp_w_free(&kc.buf);
		return 0;
	}
	if (!c->txn && !walk_durable(c, "KEYS")) {
		resp_w_free(&kc.buf);
		return 0;
	}
	resp_array(c->out, kc.n);
	resp_w_append(c->out, &kc.buf);
	resp_w_free(&kc.buf);
	return 0;
}

/*
 * SCAN's cursor is parsed like C's strtoul, as Redis does: an optional
 * sign ("-1" wraps to the largest cursor), any leading zeros, and even the
 * empty string (cursor 0); no leading white space, nothing after the
 * digits, nothing above 2^64-1.
 */
static int parse_cursor(const struct resp_arg *a, uint64_t *cursor)
{
	char small[64], *buf = small, *end;
	unsigned long long v;
	int ret = 0;

	if (a->len >= sizeof(small)) {
		buf = malloc(a->len + 1);
		if (!buf)
			return -ENOMEM;
	}
	memcpy(buf, a->p, a->len);
	buf[a->len] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	/* Checking *end (not end == buf + len) accepts "5\0junk" like Redis,
	 * which sees only the NUL-terminated prefix. */
	if ((buf[0] == ' ' || (buf[0] >= '\t' && buf[0] <= '\r')) || *end != '\0' ||
	    errno == ERANGE)
		ret = -EINVAL;
	else
		*cursor = v;
	if (buf != small)
		free(buf);
	return ret;
}

int cmd_scan(struct cmd_ctx *c)
{
	struct key_collect kc;
	const struct resp_arg *type = NULL;
	char curtxt[SRV_LL_STR_MAX + 1];
	uint64_t cursor;
	long long count = SCAN_DEFAULT_COUNT, maxiter;
	int i;

	if (parse_cursor(&c->argv[1], &cursor) != 0) {
		resp_error(c->out, "ERR invalid cursor");
		return 0;
	}
	collect_init(&kc, c);
	for (i = 2; i < c->argc; i += 2) {
		const struct resp_arg *a = &c->argv[i];
		bool has_value = i + 1 < c->argc;

		if (has_value && arg_is(a, "count")) {
			if (srv_str2ll(c->argv[i + 1].p, c->argv[i + 1].len, &count) != 0) {
				cmd_reply_not_int(c);
				goto out;
			}
			if (count < 1) {
				cmd_reply_syntax(c);
				goto out;
			}
		} else if (has_value && arg_is(a, "match")) {
			kc.pat = c->argv[i + 1].p;
			kc.plen = c->argv[i + 1].len;
			kc.use_pattern = !(kc.plen == 1 && kc.pat[0] == '*');
		} else if (has_value && arg_is(a, "type")) {
			type = &c->argv[i + 1]; /* the last TYPE wins */
		} else {
			cmd_reply_syntax(c);
			goto out;
		}
	}
	/* Redis 7.0 accepts any type name; one it does not know simply
	 * matches no key. */
	int want = -1;
	if (type) {
		static const uint8_t types[] = { TXN_T_STRING, TXN_T_HASH, TXN_T_LIST, TXN_T_SET,
						 TXN_T_ZSET };
		kc.type_ok = false;
		for (size_t t = 0; t < sizeof(types); t++)
			if (arg_is(type, cmd_type_name(types[t]))) {
				want = types[t];
				kc.type_ok = true;
			}
	}
	/*
	 * As Redis does with its dict buckets: visit one bucket at a time
	 * until COUNT keys were seen (before filtering) or the scan is done,
	 * within a budget of buckets so that a sparse index still answers
	 * promptly. Redis's budget is 10 * COUNT; ours has a floor because the
	 * cuckoo index is sized for the whole region, not for the keys in it,
	 * so a small database is mostly empty buckets (64 bytes each; the
	 * floor reads about 1 MiB per call).
	 */
	maxiter = count > LLONG_MAX / 10 ? LLONG_MAX : count * 10;
	if (maxiter < SCAN_MIN_BUCKETS)
		maxiter = SCAN_MIN_BUCKETS;
	/* One step over one node (this one or a peer): its cursor carries the
	 * node in its high bits (cluster.h). */
	char err[256];
	if (cluster_scan(c->node, c->w, &cursor, (uint64_t)maxiter, want, collect_key_c, &kc, err,
			 sizeof(err)) != 0) {
		resp_errorf(c->out, "ERR SCAN: %s", err);
		goto out;
	}
	if (!c->txn && !walk_durable(c, "SCAN"))
		goto out;

	snprintf(curtxt, sizeof(curtxt), "%llu", (unsigned long long)cursor);
	resp_array(c->out, 2);
	resp_bulk_cstr(c->out, curtxt);
	resp_array(c->out, kc.n);
	resp_w_append(c->out, &kc.buf);
out:
	resp_w_free(&kc.buf);
	return 0;
}

int cmd_dbsize(struct cmd_ctx *c)
{
	uint64_t n;
	char err[256];
	int rc, txn_rc = 0;

	/* In a block: every key walked, as KEYS does (the block's own writes
	 * replace what the count has of them); else the stores' counts. */
	if (c->txn)
		rc = overlay_walk(c, "", 0, NULL, NULL, &n, err, sizeof(err), &txn_rc);
	else
		rc = cluster_count(c->node, c->w, &n, err, sizeof(err));
	if (txn_rc)
		return cmd_txn_failed(c, c->out->len, txn_rc);
	if (rc != 0) {
		resp_errorf(c->out, "ERR DBSIZE: %s", err);
		return 0;
	}
	if (!c->txn && !walk_durable(c, "DBSIZE"))
		return 0;
	resp_int(c->out, (long long)n);
	return 0;
}

/* ---- FLUSHDB, FLUSHALL ---- */

static int flush_region(struct cc_node *n, void *arg)
{
	(void)arg;
	st_flush(n->region);
	ck_pr_inc_64(&n->flush_epoch); /* address caches are void */
	return 0;
}

/* Keys copied out of the region, so they outlive the scan. */
/*
 * FLUSH* queued in MULTI runs inside the EXEC transaction, and a
 * transaction cannot wait for the node to quiesce: it is itself one of the
 * in-flight transactions the quiesce waits for. So it deletes every key
 * through the transaction instead, which also keeps the flush atomic with
 * the rest of the MULTI block: the committed keys of the local region
 * (copied first, because txn_del changes the region under the scan) and
 * the keys written earlier in this same transaction.
 */
static int flush_in_txn(struct cmd_ctx *c)
{
	struct key_list kl = { 0 };
	char err[256];
	size_t i;
	int rc;

	if (cluster_keys(c->node, c->w, "", 0, list_key_c, &kl, err, sizeof(err)) != 0) {
		key_list_free(&kl);
		resp_errorf(c->out, "ERR FLUSH: %s", err);
		return 0;
	}
	if (kl.oom) {
		key_list_free(&kl);
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	struct key_list own = { 0 };
	bool flushed;

	if (own_writes(c, &own, &flushed) != 0) {
		key_list_free(&own);
		key_list_free(&kl);
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	rc = 0;
	for (i = 0; i < own.n && rc == 0; i++) {
		bool existed;

		rc = txn_del(c->txn, own.keys[i].p, own.keys[i].len, &existed);
	}
	for (i = 0; i < kl.n && rc == 0; i++) {
		bool existed;

		rc = txn_del(c->txn, kl.keys[i].p, kl.keys[i].len, &existed);
	}
	key_list_free(&own);
	key_list_free(&kl);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	resp_status(c->out, "OK");
	return 0;
}

/*
 * FLUSHDB and FLUSHALL take an optional SYNC or ASYNC; both flush at once
 * (emptying the region is quick, there is nothing to free lazily).
 */
static int flush_cmd(struct cmd_ctx *c)
{
	if (!flush_args_ok(c->argc, c->argv)) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (c->txn)
		return flush_in_txn(c);
	if (c->node->cops) { /* every node of the cluster */
		char err[256] = "";
		if (c->node->cops->flush_all(c->node, c->w, err, sizeof(err)) != 0) {
			resp_errorf(c->out, "ERR FLUSH failed: %s", err);
			return 0;
		}
	} else {
		cc_quiesce_run(&c->node->cc, c->w->ccw, flush_region, NULL);
	}
	resp_status(c->out, "OK");
	return 0;
}

/* rckv has one database per node, so FLUSHDB and FLUSHALL are the same. */
int cmd_flushdb(struct cmd_ctx *c)
{
	return flush_cmd(c);
}

int cmd_flushall(struct cmd_ctx *c)
{
	return flush_cmd(c);
}

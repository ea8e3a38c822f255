/*
 * fetch.c: the fetch stage of a declared transaction (DESIGN.md section 5,
 * RCC's fetch-execute-commit; FORD 4.2's hitchhiked locking; RCBench's
 * doorbell batching and outstanding requests).
 *
 * Before the body runs, every declared key gets its access, resolved and
 * read, in as few round trips as the keys allow, each round one batch
 * that reaches every node at once (fab_exec posts all nodes' parts, then
 * waits for all):
 *
 *   RESOLVE  a key the address cache serves needs nothing. Under a
 *            protocol that batches its reads, the fetch uses the cache for
 *            every node, near ones too: a miss costs the whole batch two
 *            rounds (for one key, txn.c's cache_pays keeps it to nodes a
 *            round trip away, where a bucket read costs what the cache
 *            does); but not when every key is in our own region read as
 *            memory, where the rounds cost no more than the lookups
 *            (caches_near). Under the others it keeps to cache_pays: they read
 *            key by key anyway. Near entries go stale where items move
 *            (mvcc's relocations make room for versions); a stale entry
 *            costs its key a resolution at its read (READ, below), where
 *            it cost the transaction a STALE abort before (11.8% of
 *            mvcc's attempts at ycsb-t zipf 0.2 on shm, measured). The
 *            others:
 *            round 1 READs every key's primary bucket, round 2 READs the
 *            block of every key's one candidate slot (st.h, the probe); a
 *            key the probe does not find (absent, in a later way, several
 *            candidates) is resolved alone with st_create, as the body
 *            would have (its placeholder, if absent).
 *   READ     round 3 posts every key's first read through the protocol's
 *            read_post (silo: the Double-Read; nowait: the lock CAS and
 *            the READ behind it), runs them, and finishes each with
 *            read_done. A read of several steps (timestamp, mvcc: the
 *            Double-Read, then the rts CAS and a READ of lock+ver) asks
 *            for another round (CC_AGAIN, cc.h): round 4 runs every such
 *            key's next step in one batch, and so on until no key asks
 *            again. A key the protocol cannot batch (no hook, a
 *            pessimistic or shared read, an image caught mid-install, a
 *            writer to wait for) is read alone with its `read`; so is
 *            one whose cached address its read found stale (the item
 *            moved since: mvcc's relocations make room for versions),
 *            once resolved again through the index, rather than abort
 *            the whole transaction (cause STALE) for it. Keys
 *            declared for writing only are read (and so locked) under a
 *            protocol that says fetch_locks_writes; under one with
 *            write_post (timestamp, mvcc) the first step of their write,
 *            the lock CAS and the READ behind it, rides in round 3 with
 *            the reads, and they stay unread; elsewhere they are resolved
 *            only and written blind. With `replicas`, the lock CAS and
 *            READ of the backups of every key round 3 locks for writing
 *            ride in it too, where the address cache knows their blocks
 *            (cc/repl.c), so the commit need not lock them first.
 *
 * So a transaction of cached keys fetches in one round trip per step of
 * the protocol's read (silo, the 2PL ones: 1; timestamp, mvcc: 2), and
 * one of uncached existing keys in two more, where reading them key by
 * key took two or three per key. The body then finds every declared
 * access read: txn_get costs no fabric operation.
 *
 * Invariants:
 *  (1) Fetching changes no outcome: each key ends as the body's first
 *      touch would have left it (resolved to the same block, read by the
 *      same protocol read, locked as the protocol's write would before
 *      the value is known, or not touched at all). A key fetch could not
 *      do is left to the body, which reaches it through the usual path.
 *  (2) Every read_post (write_post) is matched by read_done (write_done)
 *      calls until one answers something else than CC_AGAIN, even after
 *      another access aborted, so a lock won in any round is on record
 *      for the abort to release (cc_protocol.read_done). Only an access on a node whose part of a
 *      round failed is dropped: that node is in t->unknown, and the
 *      transaction fails whole.
 *  (3) An access enters t's table only once resolved; t's arrays are
 *      grown for all of them first (txn_acc_reserve), so nothing moves
 *      while batches that point into accesses are in flight.
 */
#include <stdlib.h>
#include <string.h>

#include "cc/cache.h"
#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/exec_internal.h"
#include "cc/node.h"

struct fkey {
	struct cc_access *a;
	uint8_t access;          /* CC_KEY_* of every declaration of the key */
	bool fresh;              /* made by this fetch, not yet in t's table */
	bool cached;             /* resolved by the address cache */
	bool probing;            /* resolution by the probe in progress */
	bool restale;            /* cached, found stale by its read: resolve again */
	bool writing;            /* posted with write_post, not read_post */
	uint8_t cls;             /* the probe's candidate */
	uint64_t off;
	uint64_t bucket[8];      /* the probe's primary bucket */
};

/* The keys listed so far, by hash: a key declared twice (or a hundred
 * thousand keys of one pipeline) finds its entry without a scan. Open
 * addressing over indexes into fk, -1 = empty; at most half full. */
struct listed {
	int *slot;
	uint32_t mask;
};

static int listed_init(struct listed *l, int nkeys)
{
	uint32_t cap = 16;
	while (cap < 2u * (uint32_t)nkeys)
		cap *= 2;
	l->slot = malloc(cap * sizeof(*l->slot));
	if (!l->slot)
		return -1;
	memset(l->slot, 0xff, cap * sizeof(*l->slot));
	l->mask = cap - 1;
	return 0;
}

/* The entry of key (hash h), or where to put it (*at: a free slot). */
static struct fkey *listed_find(const struct listed *l, struct fkey *fk, const char *key,
				size_t klen, uint64_t h, uint32_t *at)
{
	uint32_t i = (uint32_t)h & l->mask;
	for (; l->slot[i] >= 0; i = (i + 1) & l->mask) {
		struct fkey *e = &fk[l->slot[i]];
		if (e->a->hash == h && e->a->klen == klen && memcmp(e->a->key, key, klen) == 0)
			return e;
	}
	*at = i;
	return NULL;
}

/*
 * Does the fetch use the address cache for near nodes too (see the
 * header)? Where the protocol batches its reads, and the batch reaches a
 * node other than our own or our own region is not plain memory: there a
 * near key's miss holds the batch for two more rounds. A transaction whose
 * every key is in our own region read as memory (a standalone node, or a
 * cluster node's local keys) resolves them through the index in memory,
 * which costs no more than a cache lookup (two memory reads: a bucket and a
 * block header, against a table slot and the key it points to; at
 * redis-benchmark INCR -P 16 the cache's lookups took a quarter of a
 * standalone node's CPU), and fills no cache.
 */
static bool caches_near(const struct txn *t, const struct fkey *fk, int n)
{
	if (t->proto->read_post == NULL)
		return false;
	const uint16_t self = prim_self(t);
	if (!fab_node_near(t->node->fab, self))
		return true;
	for (int i = 0; i < n; i++)
		if (fk[i].a->node != self)
			return true;
	return false;
}

/* Accesses for every declared key; cached ones resolved, others probed. */
static int list_keys(struct txn *t, const struct cc_key *keys, int nkeys, struct fkey *fk,
		     int *nfk)
{
	struct listed seen;
	if (listed_init(&seen, nkeys))
		return CC_EINTERNAL; /* out of memory: the body goes key by key */
	int n = 0;
	for (int i = 0; i < nkeys; i++) {
		if (txn_key_too_big(t, keys[i].len))
			continue; /* it cannot exist: the body says so */
		uint64_t h = st_hash(keys[i].p, keys[i].len);
		uint32_t at;
		struct fkey *e = listed_find(&seen, fk, keys[i].p, keys[i].len, h, &at);
		if (e) { /* declared twice */
			e->access |= keys[i].access;
			continue;
		}
		struct cc_access *a = txn_acc_find(t, keys[i].p, keys[i].len, h);
		if (a) { /* accessed before this fetch */
			fk[n] = (struct fkey){ .a = a, .access = keys[i].access };
		} else {
			a = txn_acc_new(t, keys[i].p, keys[i].len, h);
			if (!a)
				break; /* out of memory: the body goes key by key */
			fk[n] = (struct fkey){ .a = a, .access = keys[i].access, .fresh = true };
		}
		seen.slot[at] = n++;
	}
	free(seen.slot);
	*nfk = n;
	/* Resolve the fresh ones: from the cache, or the probe's round 1. */
	const bool cache_all = caches_near(t, fk, n);
	for (int i = 0; i < n; i++) {
		struct cc_access *a = fk[i].a;
		if (!fk[i].fresh)
			continue;
		fk[i].cached = txn_acc_from_cache(t, a, cache_all);
		if (!fk[i].cached) {
			fk[i].probing = true;
			st_probe_post(&t->batch, t->node->layout, a->node, a->hash, fk[i].bucket);
		}
	}
	return CC_OK;
}

/* Rounds 1 and 2: the probe; then st_create for what it missed. */
static int resolve(struct txn *t, struct fkey *fk, int n)
{
	const bool cache_all = caches_near(t, fk, n);
	bool any = false;
	for (int i = 0; i < n; i++)
		any |= fk[i].fresh && !fk[i].cached;
	if (!any)
		return CC_OK;
	int rc = prim_exec(t);
	if (rc)
		return rc;
	any = false;
	for (int i = 0; i < n; i++) {
		struct fkey *e = &fk[i];
		if (!e->probing)
			continue;
		if (st_probe_candidate(t->node->layout, e->a->hash, e->bucket, &e->off, &e->cls) ||
		    txn_acc_img(e->a, e->cls)) {
			e->probing = false; /* st_create's */
			continue;
		}
		fab_read(&t->batch, e->a->node, e->off, e->a->img, st_class_size(e->cls));
		any = true;
	}
	if (any && (rc = prim_exec(t)))
		return rc;
	for (int i = 0; i < n; i++) {
		struct fkey *e = &fk[i];
		if (!e->fresh || e->cached)
			continue;
		struct st_ref ref;
		bool found = e->probing && st_probe_match(e->a->img, e->a->key, e->a->klen,
							  e->a->node, e->cls, e->off, &ref) == 0;
		bool cache = cache_all || !fab_node_near(t->node->fab, e->a->node);
		if (found && cache)
			t->ccw->stats.addr_cache_misses++;
		rc = found ? txn_acc_found(t, e->a, &ref, cache) : txn_acc_create(t, e->a, cache);
		if (rc == CC_EFAB)
			return rc; /* t->fatal: the transaction fails whole */
		if (rc) { /* no room for its placeholder: the body decides */
			txn_acc_drop(t, e->a);
			e->a = NULL;
		}
		e->probing = false;
	}
	return CC_OK;
}

/* Does the fetch take this key's first write step (cc_protocol.write_post)? */
static bool wants_write(const struct txn *t, const struct fkey *e)
{
	return e->a && !e->a->mode && t->proto->write_post && !t->proto->fetch_locks_writes &&
	       (e->access & CC_KEY_WRITE) && !(e->access & CC_KEY_READ);
}

/* Does the fetch read this key? */
static bool wants_read(const struct txn *t, const struct fkey *e)
{
	if (!e->a || e->a->mode)
		return false;
	return (e->access & CC_KEY_READ) ||
	       ((e->access & CC_KEY_WRITE) && t->proto->fetch_locks_writes);
}

/* Did read_done find that the address cache sent a fresh access to a block
 * that is no longer its key's (STALE: the item moved, e.g. mvcc making room
 * for versions, after this worker cached it)? Nothing of the read holds on
 * that block: a batched read's first step takes no mark, and a lock CAS
 * that won there is given back (prim_lock_won). */
static bool stale_entry(const struct txn *t, const struct fkey *e, int r)
{
	return r == CC_ABORT && t->cause == CC_CAUSE_STALE && e->fresh && e->cached;
}

/* Those accesses: the entry dropped, the key resolved through the index
 * as the body would (st_create), and read alone; what the index lookup
 * cannot do (no room for a placeholder) aborts as the stale read did. */
static int reresolve(struct txn *t, struct fkey *fk, int n)
{
	const bool cache_all = caches_near(t, fk, n);
	for (int i = 0; i < n; i++) {
		struct cc_access *a = fk[i].a;
		if (!fk[i].restale)
			continue;
		cc_cache_drop(t->ccw->cache, a->key, a->klen, a->hash);
		bool cache = cache_all || !fab_node_near(t->node->fab, a->node);
		int rc = txn_acc_create(t, a, cache);
		if (rc == CC_EFAB)
			return rc; /* t->fatal: the transaction fails whole */
		if (rc)
			return cc_abort_with(t, CC_CAUSE_STALE);
	}
	return CC_OK;
}

/*
 * Round 3 on: the protocol's first reads, and the first steps of writes
 * where it has write_post, batched where it can. Every access posted
 * rides in each round until its read_done (write_done) answers something
 * else than CC_AGAIN (cc.h); a round runs the next step of every access
 * that asked for one, all nodes together, so a read of k steps costs the
 * fetch k rounds whatever the number of keys. A write step that answers
 * CC_RETRY is left to the body's first write of the key.
 */
static int read_all(struct txn *t, struct fkey *fk, int n)
{
	const struct cc_protocol *p = t->proto;
	bool *pending = calloc((size_t)n, sizeof(*pending));
	if (!pending)
		return CC_EINTERNAL;
	int npend = 0;
	bool backups = false;
	for (int i = 0; i < n; i++) {
		if (wants_read(t, &fk[i])) {
			prim_stage(t, p->read_stage);
			pending[i] = p->read_post && p->read_post(t, fk[i].a);
		} else if (wants_write(t, &fk[i])) {
			prim_stage(t, CC_STAGE_LOCK);
			pending[i] = fk[i].writing = p->write_post(t, fk[i].a);
		}
		npend += pending[i];
		/* A key the first step locks for writing: its backups' locks
		 * ride along (cc/repl.c). */
		if (pending[i] && (fk[i].access & CC_KEY_WRITE) &&
		    (fk[i].writing || p->fetch_locks_writes))
			backups |= repl_post_locks_of(t, fk[i].a);
	}
	int rc = CC_OK, verdict = CC_OK;
	bool restale = false;
	while (npend > 0) {
		int x = prim_exec(t);
		if (x && rc == CC_OK)
			rc = x;
		/* A node that failed: its parts' results mean nothing (and
		 * t->unknown has it release whatever its CASes may have won),
		 * so its accesses are done with; the other nodes' parts ran,
		 * and a lock won there must be recorded (invariant (2)), even
		 * if that takes their reads another round. */
		uint64_t failed = x ? prim_failed_nodes(t) : 0;
		if (backups) { /* the first round's backup locks */
			int r = repl_note_locks(t, failed, false);
			if (verdict == CC_OK)
				verdict = r;
			backups = false;
		}
		for (int i = 0; i < n; i++) {
			if (!pending[i])
				continue;
			struct cc_access *a = fk[i].a;
			prim_stage(t, fk[i].writing ? CC_STAGE_LOCK : p->read_stage);
			int r = (failed & (1ull << (a->node & 63))) ? CC_RETRY
				: fk[i].writing ? p->write_done(t, a) /* (2) */
				: p->read_done(t, a);
			if (r == CC_AGAIN)
				continue; /* its next step is queued: one more round */
			pending[i] = false;
			npend--;
			if (r == CC_OK) {
				if (!fk[i].writing)
					a->mode |= ACC_R; /* a write step leaves it unread */
			} else if (stale_entry(t, &fk[i], r)) {
				restale = fk[i].restale = true;
			} else if (r != CC_RETRY && verdict == CC_OK) {
				verdict = r;
			}
		}
	}
	free(pending);
	if (rc)
		return rc;
	if (restale && verdict == CC_OK && (rc = reresolve(t, fk, n)))
		return rc;
	for (int i = 0; i < n && verdict == CC_OK; i++)
		if (wants_read(t, &fk[i]))
			verdict = txn_acc_read(t, fk[i].a); /* not batched, or CC_RETRY */
	return verdict;
}

int txn_fetch(struct txn *t, const struct cc_key *keys, int nkeys)
{
	/* Invariant (3): room for every key before any is resolved. */
	if (txn_acc_reserve(t, nkeys) != CC_OK)
		return CC_OK; /* out of memory: the body goes key by key */
	struct fkey *fk = malloc((size_t)nkeys * sizeof(*fk));
	if (!fk)
		return CC_OK;
	int n = 0;
	prim_stage(t, CC_STAGE_READ); /* index probes */
	int rc = list_keys(t, keys, nkeys, fk, &n);
	if (rc == CC_OK)
		rc = resolve(t, fk, n);
	/* Resolved accesses join the transaction (its abort path releases
	 * them); the rest go back to the pool. */
	for (int i = 0; i < n; i++) {
		if (!fk[i].fresh || !fk[i].a)
			continue;
		if (rc == CC_OK) {
			txn_acc_add(t, fk[i].a);
		} else {
			txn_acc_drop(t, fk[i].a);
			fk[i].a = NULL;
		}
	}
	if (rc == CC_OK)
		rc = read_all(t, fk, n);
	free(fk);
	return rc == CC_EINTERNAL ? CC_OK : rc;
}

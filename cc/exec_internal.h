/* Private to cc/: executor state shared by exec.c and txn.c. */
#ifndef RCKV_CC_EXEC_INTERNAL_H
#define RCKV_CC_EXEC_INTERNAL_H

#include <stdint.h>

#include <ck_epoch.h>

#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/node.h"

struct cc_worker {
	struct cc_node *node;
	int worker_id;
	struct sched *sched;          /* the worker's coroutines */
	struct fab_worker *fw;        /* the worker's fabric endpoints */
	/* Transactions in flight here: owner stores (ck_pr), the quiescer
	 * sums every worker's (cc/switch.c). */
	uint64_t inflight;
	ck_epoch_record_t *place_rec; /* read sections on node->place */
	struct cc_stats stats;        /* owner writes; see cc/node.h */
	uint64_t ts_clock;          /* last clock part handed out (us) */
	uint64_t clock_us;          /* the clock as last read (cc_ts_next) */
	unsigned clock_reuse;       /* stamps that may reuse it (cc_ts_unique) */
	uint64_t rec_clock[ST_TXN_STATES]; /* last clock part of each record's timestamps */
	int rec_free[ST_TXN_STATES];       /* this worker's free transaction records */
	int nrec_free;
	uint64_t rng;
	struct cc_access *free_acc; /* pool, linked by hnext */
	/* ST_SLAB_BYTES lookup targets: a stack of spares, because several
	 * coroutines of the worker may be resolving keys at once (txn.c). */
	struct cc_cache *cache;      /* address cache (cc/cache.h) */
	uint64_t cache_epoch;        /* node->flush_epoch the cache is valid for */
	void *scratch[64];
	int nscratch;
	/* access arrays lent to each transaction in turn (txn.c) */
	struct cc_access **acc;
	int acc_cap;
	struct cc_access **tab;
	uint32_t tab_mask;
	struct cc_access **bk;       /* backup array lent likewise (cc/repl.c) */
	int bk_cap;
	uint64_t slots_busy;         /* undo log slots in use (cc/undo.c) */
	char *undo_spare[8];         /* record buffers lent to transactions */
	uint32_t undo_spare_cap[8];
	int nundo_spare;
};

/* txn.c: accesses, for the fetch stage (cc/fetch.c). */
/* Room in an access array for `need` entries: CC_OK or CC_EINTERNAL. */
int txn_accs_grow(struct cc_access ***arr, int *cap, int need);
/* Room in t's arrays for `more` accesses (txn_acc_add never grows them). */
int txn_acc_reserve(struct txn *t, int more);
/* A new access of a key that t has not touched: not resolved, not yet in
 * t's table (txn_acc_add, after txn_acc_reserve); NULL if out of memory. */
struct cc_access *txn_acc_new(struct txn *t, const char *key, size_t klen, uint64_t h);
void txn_acc_drop(struct txn *t, struct cc_access *a); /* back to the pool */
void txn_acc_add(struct txn *t, struct cc_access *a);  /* into t's accesses */
struct cc_access *txn_acc_find(struct txn *t, const char *key, size_t klen, uint64_t h);
/* Resolve a from the address cache: true on a hit. With `cached` false
 * (a near node, for one key: txn.c cache_pays) only the ref held for the
 * next transaction (cc_cache_take) is looked at. */
bool txn_acc_from_cache(struct txn *t, struct cc_access *a, bool cached);
/* Make a->img hold a block of class cls: CC_OK or CC_EINTERNAL. */
int txn_acc_img(struct cc_access *a, uint8_t cls);
/* Resolve a to the block at ref (found by a probe): CC_OK or CC_EINTERNAL. */
int txn_acc_found(struct txn *t, struct cc_access *a, const struct st_ref *ref, bool cached);
/* Resolve a through the index, creating its placeholder if absent:
 * CC_OK, CC_EFULL, CC_EFAB (t->fatal set) or CC_EINTERNAL. `cached`: put
 * the address in the cache (and count the miss). */
int txn_acc_create(struct txn *t, struct cc_access *a, bool cached);
/* The protocol's first read of a, unless read already (ACC_R after). */
int txn_acc_read(struct txn *t, struct cc_access *a);
/* A key longer than max-key-bytes (it cannot exist). */
bool txn_key_too_big(struct txn *t, size_t klen);

/* fetch.c: the fetch stage (DESIGN.md section 5). */
int txn_fetch(struct txn *t, const struct cc_key *keys, int nkeys);

/* repl.c: the backup copies of a commit's writes (t->bk), resolved and
 * locked on every other node of each written key's replica set: CC_OK,
 * CC_ABORT, CC_EFULL, CC_EFAB or CC_EINTERNAL. A no-op with `replicas` 1. */
int repl_resolve(struct txn *t);
/* Hitchhiking (FORD 4.2) on the protocol's lock round at commit: with the
 * lock CAS of each written key posted (prim_post_lock_writes, ACC_CASPEND),
 * the lock CAS and READ of its backups whose block the address cache
 * knows; after the exec, repl_note_locks settles them (lost: the nodes
 * whose part failed; busy: the round lost a primary's lock, so no backup
 * lock is kept) and returns CC_OK or CC_ABORT. */
void repl_post_locks(struct txn *t);
/* The same for one key that will be written, whose lock CAS the fetch
 * stage (2PL's read, timestamp's and mvcc's write step) or a protocol's
 * lock step (prim_lock_and_read) posts. True if any was posted. */
bool repl_post_locks_of(struct txn *t, struct cc_access *a);
int repl_note_locks(struct txn *t, uint64_t lost, bool busy);
/* For the abort: a backup lock CAS posted and never settled (its exec
 * failed) is given back by CAS, in t's next batch. */
void repl_release_pending(struct txn *t);
void repl_after_commit(struct txn *t); /* the cache follows relocated backups */
void repl_release(struct txn *t);      /* back to the pool; t->nbk = 0 */

/* txn.c: end-of-transaction work. */
void txn_after_commit(struct txn *t); /* reap tombstones, free spare blocks */
void txn_after_abort(struct txn *t);  /* free blocks reserved for relocation */
void txn_release(struct txn *t);      /* return accesses to the pool */
void txn_forget_addresses(struct txn *t); /* drop its keys from the address cache */

/* Drop the address cache if a flush happened since it was filled. */
void cc_cache_sync(struct cc_worker *ccw);

/* A lookup buffer of ST_SLAB_BYTES for the calling coroutine, and back. */
struct st_item *cc_scratch_get(struct cc_worker *ccw);
void cc_scratch_put(struct cc_worker *ccw, struct st_item *buf);

#endif

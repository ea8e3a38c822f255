/*
 * cache: a worker's address cache, key -> (node, offset, class, gen) of its
 * item block (DESIGN.md section 9), on a Concurrency Kit ck_ht. A hit skips
 * the remote cuckoo index (one to three READs); a stale entry (the block
 * was retired, reused, or relocated) is detected by the protocol's own
 * reads of the block (key bytes, generation, DEAD flag: cc/prim.c) and the
 * entry dropped. Owner worker only (one writer and reader, the _st rule).
 * Only keys of nodes a round trip away use the table: for a node read as
 * memory the index costs no more than the cache (cc/txn.c, cache_pays).
 */
#ifndef RCKV_CC_CACHE_H
#define RCKV_CC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/st.h"

struct cc_cache;

/* The addr-cache-entries option's default: entries per worker. About 100
 * bytes each (entry, key, table slot): 25 MB per worker; enough that
 * bench/protocols.sh's 100k keys stay cached. */
#define CC_ADDR_CACHE_DEFAULT (1u << 18)

/* A cache of at most max_entries keys; a put into a full cache evicts the
 * oldest entry (first in, first out). NULL on OOM. */
struct cc_cache *cc_cache_create(size_t max_entries);
void cc_cache_destroy(struct cc_cache *c);
/* Empty the cache and bound it to max_entries from now on (the
 * addr-cache-entries option). -1 on OOM (the old bound stays). */
int cc_cache_resize(struct cc_cache *c, size_t max_entries);
size_t cc_cache_max(const struct cc_cache *c);

/* `hash` is st_hash(key): the cache reuses it rather than hashing again. */
bool cc_cache_get(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		  struct st_ref *out);
void cc_cache_put(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		  const struct st_ref *ref);
void cc_cache_drop(struct cc_cache *c, const char *key, size_t klen, uint64_t hash);
void cc_cache_clear(struct cc_cache *c);

/*
 * One key's ref held apart from the table, for a key the table is not used
 * for: the ref an index lookup just found, handed to the transaction that
 * follows it (cc_key_absent, then the command's transaction), so that it
 * does not look the key up again. cc_cache_take returns it once, and only
 * for the same key. A later hold replaces it; clear and drop forget it.
 * Keys longer than CC_CACHE_HOLD_KEY bytes are not held.
 */
#define CC_CACHE_HOLD_KEY 64
void cc_cache_hold(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		   const struct st_ref *ref);
bool cc_cache_take(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		   struct st_ref *out);

/* Hits and misses since creation. */
void cc_cache_stats(const struct cc_cache *c, uint64_t *hits, uint64_t *misses);

#endif

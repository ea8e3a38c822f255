/*
 * cache.c: the address cache on ck_ht (CK_HT_MODE_BYTESTRING). Each entry
 * is one allocation holding the ref and the key bytes the table points to.
 * ck_ht keys are at most 65535 bytes; longer keys are simply not cached.
 * The table has one writer and one reader (its worker), so the spmc
 * operations are used without any epoch: nothing is read concurrently,
 * and an evicted entry is freed at once.
 *
 * Eviction is first in, first out: every entry put is also in `ring`, in
 * the order it was put; a put into a full cache evicts the entry of the
 * ring slot it reuses (the oldest). An entry replaced in the table, or
 * dropped from it, stays in the ring until its slot comes round; it is
 * then freed, and removed from the table only if the table still maps
 * its key to it (invariant (1)).
 *
 * Invariants:
 *  (1) Every entry the table points to is in the ring; the ring holds at
 *      most `max` entries, so memory is bounded by max entries.
 *  (2) An eviction removes a key from the table only when the table maps
 *      it to the evicted entry itself: a newer entry for the same key (a
 *      later put) stays.
 *
 * Before FIFO, a full cache started over (cleared itself): at ycsb-t over
 * 100k keys with 64k entries a worker's hit rate fell to about 40%, and
 * each miss costs the fetch stage two round trips (cc/fetch.c).
 */
#include "cc/cache.h"

#include <ck_ht.h>
#include <stdlib.h>
#include <string.h>

struct cache_ent {
	uint64_t hash;
	struct st_ref ref;
	uint16_t klen;
	char key[];
};

struct cc_cache {
	ck_ht_t ht;
	size_t count, max;       /* entries in the ring, its size */
	size_t next;             /* the ring slot the next put into a full ring reuses */
	struct cache_ent **ring;
	uint64_t hits, misses;
	struct {               /* cc_cache_hold */
		bool set;
		uint16_t klen;
		uint64_t hash;
		struct st_ref ref;
		char key[CC_CACHE_HOLD_KEY];
	} held;
};

static void *ht_malloc(size_t n) { return malloc(n); }
static void *ht_realloc(void *p, size_t o, size_t n, bool d)
{
	(void)o;
	(void)d;
	return realloc(p, n);
}
static void ht_free(void *p, size_t n, bool d)
{
	(void)n;
	(void)d;
	free(p);
}
static struct ck_malloc ht_allocator = { ht_malloc, ht_realloc, ht_free };

/* Our st_hash is the table's hash: callers pass it in. ck_ht needs a hash
 * callback for growth only when it rehashes from keys, which it does not
 * (entries carry their hash); still give it one that agrees. */
static void ht_hash(ck_ht_hash_t *h, const void *key, size_t len, uint64_t seed)
{
	(void)seed;
	h->value = st_hash(key, len);
}

struct cc_cache *cc_cache_create(size_t max_entries)
{
	struct cc_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (!ck_ht_init(&c->ht, CK_HT_MODE_BYTESTRING, ht_hash, &ht_allocator, 1024, 0)) {
		free(c);
		return NULL;
	}
	if (cc_cache_resize(c, max_entries) != 0) {
		ck_ht_destroy(&c->ht);
		free(c);
		return NULL;
	}
	return c;
}

void cc_cache_clear(struct cc_cache *c)
{
	ck_ht_reset_spmc(&c->ht);
	for (size_t i = 0; i < c->count; i++)
		free(c->ring[i]);
	c->count = 0;
	c->next = 0;
	c->held.set = false;
}

int cc_cache_resize(struct cc_cache *c, size_t max_entries)
{
	if (max_entries == 0)
		max_entries = 1;
	cc_cache_clear(c);
	struct cache_ent **ring = realloc(c->ring, max_entries * sizeof(*ring));
	if (!ring)
		return -1;
	c->ring = ring;
	c->max = max_entries;
	return 0;
}

size_t cc_cache_max(const struct cc_cache *c)
{
	return c->max;
}

void cc_cache_destroy(struct cc_cache *c)
{
	if (!c)
		return;
	cc_cache_clear(c);
	ck_ht_destroy(&c->ht);
	free(c->ring);
	free(c);
}

bool cc_cache_get(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		  struct st_ref *out)
{
	if (klen > UINT16_MAX)
		return false;
	ck_ht_hash_t h = { .value = hash };
	ck_ht_entry_t ent;
	ck_ht_entry_key_set(&ent, key, (uint16_t)klen);
	if (!ck_ht_get_spmc(&c->ht, h, &ent)) {
		c->misses++;
		return false;
	}
	const struct cache_ent *e = ck_ht_entry_value(&ent);
	*out = e->ref;
	c->hits++;
	return true;
}

void cc_cache_drop(struct cc_cache *c, const char *key, size_t klen, uint64_t hash)
{
	if (c->held.set && c->held.hash == hash)
		c->held.set = false;
	if (klen > UINT16_MAX)
		return;
	ck_ht_hash_t h = { .value = hash };
	ck_ht_entry_t ent;
	ck_ht_entry_key_set(&ent, key, (uint16_t)klen);
	/* The entry's memory stays in the ring until its slot comes round. */
	ck_ht_remove_spmc(&c->ht, h, &ent);
}

/* Free the entry of the ring slot a put reuses; out of the table only if
 * the table still maps its key to it (invariant (2)). */
static void evict(struct cc_cache *c, struct cache_ent *e)
{
	ck_ht_hash_t h = { .value = e->hash };
	ck_ht_entry_t ent;
	ck_ht_entry_key_set(&ent, e->key, e->klen);
	if (ck_ht_get_spmc(&c->ht, h, &ent) && ck_ht_entry_value(&ent) == e) {
		ck_ht_entry_key_set(&ent, e->key, e->klen);
		ck_ht_remove_spmc(&c->ht, h, &ent);
	}
	free(e);
}

void cc_cache_put(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		  const struct st_ref *ref)
{
	if (klen > UINT16_MAX)
		return;
	struct cache_ent *e = malloc(sizeof(*e) + klen);
	if (!e)
		return;
	e->hash = hash;
	e->ref = *ref;
	e->klen = (uint16_t)klen;
	memcpy(e->key, key, klen);
	if (c->count == c->max) { /* full: the oldest goes (invariant (1)) */
		evict(c, c->ring[c->next]);
		c->ring[c->next] = NULL;
	}
	ck_ht_hash_t h = { .value = hash };
	ck_ht_entry_t ent;
	ck_ht_entry_set(&ent, h, e->key, (uint16_t)klen, e);
	/* set = insert or replace; a replaced entry stays in the ring until
	 * its slot comes round. One the table refused (out of memory) is in
	 * the ring all the same, and freed when its slot comes round. */
	(void)ck_ht_set_spmc(&c->ht, h, &ent);
	if (c->count < c->max) {
		c->ring[c->count++] = e;
		return;
	}
	c->ring[c->next] = e;
	c->next = (c->next + 1) % c->max;
}

void cc_cache_hold(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		   const struct st_ref *ref)
{
	c->held.set = klen <= CC_CACHE_HOLD_KEY;
	if (!c->held.set)
		return;
	c->held.klen = (uint16_t)klen;
	c->held.hash = hash;
	c->held.ref = *ref;
	memcpy(c->held.key, key, klen);
}

bool cc_cache_take(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		   struct st_ref *out)
{
	if (!c->held.set || c->held.hash != hash || c->held.klen != klen ||
	    memcmp(c->held.key, key, klen) != 0)
		return false;
	c->held.set = false;
	*out = c->held.ref;
	c->hits++;
	return true;
}

void cc_cache_stats(const struct cc_cache *c, uint64_t *hits, uint64_t *misses)
{
	*hits = c->hits;
	*misses = c->misses;
}

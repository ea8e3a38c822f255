/*
 * cache.c: the address cache on ck_ht (CK_HT_MODE_BYTESTRING). Each entry
 * is one allocation holding the ref and the key bytes the table points to.
 * ck_ht keys are at most 65535 bytes; longer keys are simply not cached.
 * The table has one writer and one reader (its worker), so the spmc
 * operations are used without any epoch: nothing is read concurrently.
 */
#include "cc/cache.h"

#include <ck_ht.h>
#include <stdlib.h>
#include <string.h>

struct cache_ent {
	struct cache_ent *next; /* all entries, to free them */
	struct st_ref ref;
	uint16_t klen;
	char key[];
};

struct cc_cache {
	ck_ht_t ht;
	size_t count, max;
	struct cache_ent *all;
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
	c->max = max_entries;
	if (!ck_ht_init(&c->ht, CK_HT_MODE_BYTESTRING, ht_hash, &ht_allocator, 1024, 0)) {
		free(c);
		return NULL;
	}
	return c;
}

void cc_cache_clear(struct cc_cache *c)
{
	ck_ht_reset_spmc(&c->ht);
	struct cache_ent *e = c->all, *next;
	for (; e; e = next) {
		next = e->next;
		free(e);
	}
	c->all = NULL;
	c->count = 0;
	c->held.set = false;
}

void cc_cache_destroy(struct cc_cache *c)
{
	if (!c)
		return;
	cc_cache_clear(c);
	ck_ht_destroy(&c->ht);
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
	/* The entry's memory stays on the `all` list until the next clear;
	 * dropping is rare (stale entries), so that is cheap enough. */
	ck_ht_remove_spmc(&c->ht, h, &ent);
}

void cc_cache_put(struct cc_cache *c, const char *key, size_t klen, uint64_t hash,
		  const struct st_ref *ref)
{
	if (klen > UINT16_MAX)
		return;
	if (c->count >= c->max)
		cc_cache_clear(c);
	struct cache_ent *e = malloc(sizeof(*e) + klen);
	if (!e)
		return;
	e->ref = *ref;
	e->klen = (uint16_t)klen;
	memcpy(e->key, key, klen);
	ck_ht_hash_t h = { .value = hash };
	ck_ht_entry_t ent;
	ck_ht_entry_set(&ent, h, e->key, (uint16_t)klen, e);
	/* set = insert or replace; the replaced entry's memory stays on the
	 * list until the next clear. */
	if (!ck_ht_set_spmc(&c->ht, h, &ent)) {
		free(e);
		return;
	}
	e->next = c->all;
	c->all = e;
	c->count++;
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

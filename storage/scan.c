/*
 * scan.c: the owner node's local passes over its region (DESIGN.md
 * section 9): SCAN/DBSIZE iteration, FLUSHALL, metadata reset on a
 * protocol switch, and recovery after an unclean stop.
 *
 * These run on the local mapping, not through the fabric. st_scan and
 * st_count run concurrently with one-sided traffic and so read every slot
 * and item word once, atomically, and bounds-check what they read before
 * following it (a slot may be swapped or cleared, a block recycled, at any
 * moment); a key being moved by a kick-out (index.c) is in two slots for
 * a moment and may be visited twice, as Redis's SCAN may return a key
 * twice. st_flush, st_reset_meta and st_recover need the node quiesced:
 * no transaction in flight anywhere in the cluster on this region.
 *
 * Recovery (st_recover) rebuilds the allocator from the index, which is
 * the only source of truth:
 *   1. every bucket lock to 0 (st_recover_stats counts the held ones, and
 *      the item locks of step 3, as released);
 *   2. every bitmap to "all free";
 *   3. for each slot: drop it (slot to 0) unless it points at a sane item
 *      of its class, in a slab assigned to that class, not DEAD, whose key
 *      hashes to this bucket (at the slot's way) and tag, and not
 *      already claimed by another slot (a kick-out cut short leaves a key
 *      in two slots); otherwise reset the item's lock and meta words and
 *      mark its block used;
 *   4. slabs left with no block go back to unassigned.
 * Blocks that were allocated but never published (a relocation or insert
 * cut short) are thereby freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "storage/st_internal.h"

static inline uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void st(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

static uint64_t *bucket_words(struct st_region *r, uint64_t bucket)
{
	return (uint64_t *)(r->base + st_bucket_off(&r->layout, bucket));
}

/*
 * The item a slot word points at, if it is a sane item of the slot's
 * class (never a pointer outside its block); NULL otherwise. *ident
 * receives the ident word as read once.
 */
static struct st_item *slot_item(struct st_region *r, uint64_t s, uint64_t *ident)
{
	uint64_t slab;
	uint32_t idx;
	uint8_t cls = st_slot_cls(s);
	if (st_block_locate(&r->layout, st_slot_off(s), cls, &slab, &idx))
		return NULL;
	struct st_item *it = (struct st_item *)(r->base + st_slot_off(s));
	*ident = ld(&it->ident);
	return st_ident_sane(*ident, cls) ? it : NULL;
}

bool st_block_owned_local(struct st_region *r, const struct st_ref *ref)
{
	uint64_t slab;
	uint32_t idx;
	if (st_block_locate(&r->layout, ref->off, ref->cls, &slab, &idx))
		return false;
	/* The slab's class first: after a FLUSHALL the slab may serve another
	 * class, whose bitmap bit idx is another block's, and the block's
	 * ident stays ours until something is written over it. */
	const uint64_t tab = ld((const uint64_t *)(r->base + r->layout.slabtab_off + slab * 8));
	if (tab != (uint64_t)ref->cls + 1)
		return false;
	const struct st_item *it = (const struct st_item *)(r->base + ref->off);
	const uint64_t ident = ld(&it->ident);
	const uint64_t bw = ld((const uint64_t *)(r->base +
						   st_bitmap_word_off(&r->layout, slab, idx)));
	return st_ident_gen(ident) == ref->gen && st_ident_class(ident) == ref->cls &&
	       (bw & (1ull << (idx % 64)));
}

void st_scan(struct st_region *r, uint64_t *cursor, uint64_t count, st_scan_fn fn, void *arg)
{
	const uint64_t nb = r->layout.index_buckets;
	uint64_t bucket = *cursor / 8;
	unsigned j = (unsigned)(*cursor % 8);
	if (j == 0)
		j = 1;
	if (count == 0)
		count = 1;
	for (uint64_t visited = 0; bucket < nb && visited < count; visited++, bucket++, j = 1) {
		uint64_t *bw = bucket_words(r, bucket);
		for (; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]), ident;
			if (!s)
				continue;
			struct st_item *it = slot_item(r, s, &ident);
			if (!it)
				continue;
			uint8_t flags = st_data_flags(ld(&it->data));
			if (flags & (ST_F_ABSENT | ST_F_DEAD))
				continue;
			if (fn(arg, (const char *)(it + 1), st_ident_klen(ident), it)) {
				/* Resume right after this item. */
				uint64_t next = j < ST_BUCKET_SLOTS ? bucket * 8 + j + 1 : (bucket + 1) * 8;
				*cursor = next / 8 >= nb ? 0 : next;
				return;
			}
		}
	}
	*cursor = bucket >= nb ? 0 : bucket * 8;
}

void st_scan_locks(struct st_region *r, st_lock_visit_fn fn, void *arg)
{
	for (uint64_t bucket = 0; bucket < r->layout.index_buckets; bucket++) {
		uint64_t *bw = bucket_words(r, bucket);
		uint64_t bl = ld(&bw[0]);
		if (bl && fn(arg, NULL, 0, bl, bucket, false))
			return;
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]), ident;
			struct st_item *it = s ? slot_item(r, s, &ident) : NULL;
			uint64_t lk = it ? ld(&it->lock) : 0;
			if (lk && fn(arg, (const char *)(it + 1), st_ident_klen(ident), lk, bucket,
				     (st_data_flags(ld(&it->data)) & ST_F_ABSENT) != 0))
				return;
		}
	}
}

static int count_one(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	(void)key, (void)klen, (void)it;
	(*(uint64_t *)arg)++;
	return 0;
}

uint64_t st_count(struct st_region *r)
{
	uint64_t n = 0, cursor = 0;
	st_scan(r, &cursor, UINT64_MAX, count_one, &n);
	return n;
}

/*
 * Zero [off, off+len) of the region. Whole pages in the middle are punched
 * out of the file, which reads back as zeros and gives the memory back
 * (a 10 GB region has a 640 MB index); the rest, or everything if the file
 * system cannot punch holes, is cleared with memset.
 */
static void zero_range(struct st_region *r, uint64_t off, uint64_t len)
{
	const uint64_t pg = 4096;
	uint64_t a = (off + pg - 1) & ~(pg - 1), e = (off + len) & ~(pg - 1);
	if (r->fd >= 0 && e > a + 16 * pg &&
	    fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a,
		      (off_t)(e - a)) == 0) {
		memset(r->base + off, 0, a - off);
		memset(r->base + e, 0, off + len - e);
	} else {
		memset(r->base + off, 0, len);
	}
	st_region_persist(r, off, len);
}

void st_flush(struct st_region *r)
{
	const struct st_layout *L = &r->layout;
	/* Index, slab table and bitmaps are contiguous: one range. Blocks keep
	 * their ident words, so the next occupant still gets a new generation. */
	zero_range(r, L->index_off, L->slab_off - L->index_off);
	/* The log notes only the fabric's writes: this one reaches it as a
	 * checkpoint (the node is quiesced). A failure shows in INFO. */
	if (r->wal)
		(void)st_wal_checkpoint(r);
}

void st_wipe(struct st_region *r)
{
	const struct st_layout *L = &r->layout;
	for (unsigned coord = 1; coord <= L->log_nodes; coord++)
		for (unsigned slot = 0; slot < ST_LOG_SLOTS; slot++) {
			uint64_t off = st_log_slot_off(L, coord, slot);
			memset(r->base + off, 0, sizeof(struct st_log_hdr));
			st_region_persist(r, off, sizeof(struct st_log_hdr));
		}
	st_flush(r);
}

void st_reset_meta(struct st_region *r)
{
	for (uint64_t bkt = 0; bkt < r->layout.index_buckets; bkt++) {
		uint64_t *bw = bucket_words(r, bkt);
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]), ident;
			struct st_item *it = s ? slot_item(r, s, &ident) : NULL;
			if (!it)
				continue;
			st(&it->lock, 0);
			st(&it->meta[0], 0);
			st(&it->meta[1], 0);
		}
	}
	st_region_persist(r, r->layout.slab_off, r->layout.slab_count * (uint64_t)ST_SLAB_BYTES);
}

uint64_t st_reset_meta_if(struct st_region *r, st_key_pred match, void *arg)
{
	uint64_t n = 0;
	for (uint64_t bkt = 0; bkt < r->layout.index_buckets; bkt++) {
		uint64_t *bw = bucket_words(r, bkt);
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]), ident;
			struct st_item *it = s ? slot_item(r, s, &ident) : NULL;
			if (!it || !match(arg, (const char *)(it + 1), st_ident_klen(ident)))
				continue;
			st(&it->meta[0], 0);
			st(&it->meta[1], 0);
			st_region_persist(r, st_slot_off(s), sizeof(*it));
			n++;
		}
	}
	return n;
}

int st_recover(struct st_region *r, uint64_t *live_keys)
{
	return st_recover_stats(r, live_keys, NULL);
}

int st_recover_stats(struct st_region *r, uint64_t *live_keys, struct st_log_stats *stats)
{
	const struct st_layout *L = &r->layout;
	uint32_t *used = calloc(L->slab_count, sizeof(*used));
	if (!used)
		return -ENOMEM;
	uint64_t *tab = (uint64_t *)(r->base + L->slabtab_off);
	uint64_t live = 0, released = 0;

	zero_range(r, L->bitmap_off, L->slab_count * (uint64_t)ST_SLAB_BITMAP_BYTES);
	for (uint64_t bkt = 0; bkt < L->index_buckets; bkt++) {
		uint64_t *bw = bucket_words(r, bkt);
		if (bw[0]) { /* a bucket lock of an inserter that died */
			bw[0] = 0;
			released++;
		}
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = bw[j], ident, slab;
			uint32_t idx;
			if (!s)
				continue;
			uint8_t cls = st_slot_cls(s);
			struct st_item *it = slot_item(r, s, &ident);
			bool ok = it && st_block_locate(L, st_slot_off(s), cls, &slab, &idx) == 0 &&
				  tab[slab] == (uint64_t)cls + 1;
			uint64_t data = ok ? it->data : 0;
			uint8_t flags = st_data_flags(data);
			if (ok && (flags & ST_F_DEAD))
				ok = false;
			if (ok && !(flags & ST_F_ABSENT) &&
			    sizeof(struct st_item) + (uint64_t)st_ident_klen(ident) +
					    st_data_vlen(data) > st_csize(cls))
				ok = false;
			if (ok) {
				struct st_ways w;
				st_ways_of(L, st_hash(it + 1, st_ident_klen(ident)), &w);
				ok = w.tag == st_slot_tag(s) && st_slot_way(s) < ST_WAYS &&
				     w.b[st_slot_way(s)] == bkt;
			}
			uint64_t *word = NULL, bit = 0;
			if (ok) {
				word = (uint64_t *)(r->base + st_bitmap_word_off(L, slab, idx));
				bit = 1ull << (idx % 64);
				ok = !(*word & bit); /* two slots, one block: keep the first */
			}
			if (!ok) {
				bw[j] = 0;
				continue;
			}
			*word |= bit;
			used[slab]++;
			/* Counted only here, for a kept slot: a block in two slots
			 * (a kick-out cut short) is kept once, so counted once. */
			if (it->lock) {
				it->lock = 0;
				released++;
			}
			it->meta[0] = 0;
			it->meta[1] = 0;
			if (!(flags & ST_F_ABSENT))
				live++;
		}
	}
	/* Every other block is free now, its lock word included: a lock a
	 * dead transaction won on a block that then left the index (a
	 * relocation's old block, through a stale address) would otherwise
	 * stay on the free block, and the allocator, which waits for a held
	 * word (alloc.c (5)), would keep the block from use until the next
	 * recovery. */
	for (uint64_t s = 0; s < L->slab_count; s++) {
		if (tab[s] == 0 || tab[s] > ST_NCLASSES)
			continue;
		unsigned cls = (unsigned)tab[s] - 1;
		uint32_t size = st_csize(cls), nb = st_cblocks(cls);
		const uint64_t *bm = (const uint64_t *)(r->base + st_bitmap_word_off(L, s, 0));
		char *slab = r->base + L->slab_off + s * (uint64_t)ST_SLAB_BYTES;
		for (uint32_t idx = 0; idx < nb; idx++) {
			struct st_item *it = (struct st_item *)(slab + (uint64_t)idx * size);
			if (!(bm[idx / 64] & (1ull << (idx % 64))) && it->lock) {
				it->lock = 0;
				released++;
			}
		}
	}
	for (uint64_t s = 0; s < L->slab_count; s++)
		if (!used[s])
			tab[s] = 0;
	free(used);
	st_region_persist(r, 0, L->size);
	*live_keys = live;
	if (stats)
		stats->locks_released += released;
	return 0;
}

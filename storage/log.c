/*
 * log.c: the owner node's side of the undo log (st.h, "the undo log"):
 * settling the transactions a dead coordinator left in this region, and
 * releasing the locks it held. The coordinator's side, which writes the
 * records, is cc/undo.c.
 *
 * Both run on the node's own mapping while other nodes may be running
 * transactions on it (a shm peer maps this region and never notices that
 * its owner restarted). They stay out of those transactions' way:
 * (1) st_log_resolve touches only the dead coordinator's slots and the
 *     items its records name; those items are locked by the dead
 *     transaction until st_release_locks_of, so nobody else writes them,
 *     and readers refuse them (Double-Read needs the lock free).
 * (2) st_release_locks clears only words the caller names as the dead
 *     node's (or the dead transaction's), by CAS, so a lock taken meanwhile by someone else is never touched.
 * (3) A record is applied only if it is whole (its checksum) and the block
 *     still has the generation it names.
 * (4) Lock words are never logged, so a region rebuilt from its log after
 *     a power cut may have lost the locks of (1). st_log_relock takes them
 *     again, by CAS from 0, for every slot that names a transaction
 *     without its mark: a coordinator marks or retires a slot before it
 *     unlocks the items (cc/prim.c), so such a slot's items are still its,
 *     even while that coordinator runs (a shm peer), as long as the slot
 *     is unchanged after the CAS (else the lock goes back); once the mark
 *     is written its installs stand and need no lock.
 */
#include <stdlib.h>
#include <string.h>

#include "storage/st_internal.h"

static inline uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void st(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline bool cas(uint64_t *p, uint64_t cmp, uint64_t swp)
{
	return __atomic_compare_exchange_n(p, &cmp, swp, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

uint64_t st_log_rec_sum(const struct st_log_rec *r, const void *payload)
{
	uint64_t h = r->txn * 0x9e3779b97f4a7c15ull;
	h ^= r->kind_len + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
	h ^= r->off + 0x8cb92ba72f3d8dd7ull + (h << 6) + (h >> 2);
	h ^= r->aux + 0xbf58476d1ce4e5b9ull + (h << 6) + (h >> 2);
	uint32_t len = (uint32_t)r->kind_len;
	return h ^ st_hash(payload, len) ^ ((uint64_t)len << 17);
}

/* The item block at off of class cls, or NULL if that is not a block. */
static struct st_item *block_at(struct st_region *r, uint64_t off, unsigned cls)
{
	uint64_t slab;
	uint32_t idx;
	if (st_block_locate(&r->layout, off, cls, &slab, &idx) != 0)
		return NULL;
	return (struct st_item *)(r->base + off);
}

/* Mark a block DEAD and give it back to its bitmap, if it still is
 * generation gen (invariant 3), its lock word back to 0 if the dead
 * transaction txn left it there (its owner word, or its installing mark,
 * the owner with bit 0 clear) or its allocator's claim (alloc.c (5)). */
static void free_block(struct st_region *r, uint64_t off, unsigned cls, uint32_t gen, uint64_t txn)
{
	const struct st_layout *L = &r->layout;
	uint64_t slab;
	uint32_t idx;
	if (st_block_locate(L, off, cls, &slab, &idx) != 0)
		return;
	struct st_item *it = (struct st_item *)(r->base + off);
	if (st_ident_gen(ld(&it->ident)) != gen)
		return;
	uint64_t data = ld(&it->data);
	if (!(st_data_flags(data) & ST_F_DEAD))
		st(&it->data, data | ST_F_DEAD);
	uint64_t lk = ld(&it->lock);
	if (lk == ST_LOCK_CLAIMED || (lk && (lk | 1) == txn))
		(void)cas(&it->lock, lk, 0);
	uint64_t *word = (uint64_t *)(r->base + st_bitmap_word_off(L, slab, idx));
	__atomic_fetch_and(word, ~(1ull << (idx % 64)), __ATOMIC_SEQ_CST);
	st_region_persist(r, off, 48);
	st_region_persist(r, (uint64_t)((char *)word - r->base), 8);
}

static void undo_image(struct st_region *r, const struct st_log_rec *rec, const char *payload)
{
	uint32_t len = (uint32_t)rec->kind_len;
	if (len < 40)
		return;
	uint64_t ident;
	memcpy(&ident, payload + 24, 8);
	struct st_item *it = block_at(r, rec->off, st_ident_class(ident));
	uint32_t klen = st_ident_klen(ident);
	if (!it || st_ident_gen(ld(&it->ident)) != (uint32_t)rec->aux ||
	    8u + len + klen > st_csize(st_ident_class(ident)))
		return;
	/* Locked by the dead transaction (invariant 1): words 2..5 and the
	 * value first, ver last, as an install does. The key was rewritten
	 * with its own bytes. */
	memcpy((char *)it + 16, payload + 8, 32);
	memcpy((char *)(it + 1) + klen, payload + 40, len - 40);
	uint64_t ver;
	memcpy(&ver, payload, 8);
	st(&it->ver, ver);
	st_region_persist(r, rec->off, 8u + len + klen);
}

/* The index slot of a key that points at block off, or NULL. */
static uint64_t *find_slot(struct st_region *r, uint64_t hash, uint64_t off, uint64_t *sword,
			   unsigned *way)
{
	struct st_ways w;
	st_ways_of(&r->layout, hash, &w);
	for (unsigned i = 0; i < ST_WAYS; i++) {
		uint64_t *bw = (uint64_t *)(r->base + st_bucket_off(&r->layout, w.b[i]));
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]);
			if (s && st_slot_off(s) == off) {
				*sword = s;
				*way = st_slot_way(s);
				return &bw[j];
			}
		}
	}
	return NULL;
}

static void reloc_rec(struct st_region *r, const struct st_log_rec *rec, const char *payload,
		      bool committed)
{
	if ((uint32_t)rec->kind_len < sizeof(struct st_log_reloc))
		return;
	struct st_log_reloc rl;
	memcpy(&rl, payload, sizeof(rl));
	uint8_t ocls = (uint8_t)rl.old_gen_cls, ncls = (uint8_t)rl.new_gen_cls;
	uint32_t ogen = (uint32_t)(rl.old_gen_cls >> 32), ngen = (uint32_t)(rl.new_gen_cls >> 32);
	if (committed) { /* the old block is garbage once the new one is in */
		free_block(r, rec->off, ocls, ogen, rec->txn);
		return;
	}
	uint64_t s;
	unsigned way;
	uint64_t *slot = find_slot(r, rl.hash, rec->aux, &s, &way);
	if (slot) {
		uint64_t back = st_slot_make(rec->off, ocls, way, st_slot_tag(s));
		if (cas(slot, s, back))
			st_region_persist(r, (uint64_t)((char *)slot - r->base), 8);
	}
	free_block(r, rec->aux, ncls, ngen, rec->txn);
}

/* Offsets of a slot's records, in log order: a growable array. */
struct recs {
	uint64_t *off;
	size_t n, cap;
};

static bool recs_push(struct recs *v, uint64_t off)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 256;
		uint64_t *p = realloc(v->off, cap * sizeof(*p));
		if (!p)
			return false;
		v->off = p;
		v->cap = cap;
	}
	v->off[v->n++] = off;
	return true;
}

/* The whole records of txn in [p, end) of the region, up to the first
 * that is not (the end of them, or torn: its install never happened).
 * The extents a slot chains are written before the slot, so a torn slot
 * means no install at all: undoing their records rewrites old images. */
static void gather(struct st_region *r, uint64_t p, uint64_t end, uint64_t txn, struct recs *v)
{
	while (p + sizeof(struct st_log_rec) <= end) {
		const struct st_log_rec *rec = (const struct st_log_rec *)(r->base + p);
		uint32_t len = (uint32_t)rec->kind_len;
		if (rec->txn != txn || p + st_rec_bytes(len) > end ||
		    st_log_rec_sum(rec, rec + 1) != rec->sum || !recs_push(v, p))
			return;
		p += st_rec_bytes(len);
	}
}

/* The extent at off (gen:32 | class:8 in gc) if it is one of txn's, else
 * NULL (st.h: the chain's words, checked before they are followed). */
static struct st_item *extent_at(struct st_region *r, uint64_t off, uint64_t gc, uint64_t txn)
{
	struct st_item *it = off ? block_at(r, off, (uint8_t)gc) : NULL;
	if (!it || st_ident_gen(ld(&it->ident)) != (uint32_t)(gc >> 32) ||
	    st_ident_class(ld(&it->ident)) != (uint8_t)gc || ld(&it->meta[0]) != txn ||
	    sizeof(*it) + st_data_vlen(ld(&it->data)) > st_csize((uint8_t)gc))
		return NULL;
	return it;
}

/* Free the extents chained from h that belong to txn, a transaction this
 * pass settled (so its coordinator never gives them back), and unchain
 * them. Not the extents of a slot found retired: its coordinator may
 * have freed them already, and a block freed and being taken again by
 * st_alloc (bitmap bit set, generation not yet new) would be freed a
 * second time under its new owner. Those a coordinator died before
 * freeing wait for this node's restart (st_recover). */
static void free_extents(struct st_region *r, struct st_log_hdr *h, uint64_t txn)
{
	uint64_t off = ld(&h->ext), gc = ld(&h->ext_gc);
	struct st_item *it;
	while ((it = extent_at(r, off, gc, txn)) != NULL) {
		uint64_t noff = ld(&it->meta[1]), ngc = ld(&it->ver);
		free_block(r, off, (uint8_t)gc, (uint32_t)(gc >> 32), txn);
		off = noff;
		gc = ngc;
	}
	st(&h->ext, 0);
	st(&h->ext_txn, 0);
}

/* The whole records of txn in the slot at soff and the extents it chains,
 * in log order, into v (emptied first). */
static void slot_records(struct st_region *r, uint64_t soff, uint64_t txn, struct recs *v)
{
	const struct st_log_hdr *h = (const struct st_log_hdr *)(r->base + soff);
	v->n = 0;
	gather(r, soff + sizeof(*h), soff + r->layout.log_slot_bytes, txn, v);
	uint64_t off = ld(&h->ext), gc = ld(&h->ext_gc);
	struct st_item *it;
	while (ld(&h->ext_txn) == txn && (it = extent_at(r, off, gc, txn)) != NULL) {
		gather(r, off + sizeof(*it), off + sizeof(*it) + st_data_vlen(ld(&it->data)), txn, v);
		off = ld(&it->meta[1]);
		gc = ld(&it->ver);
	}
}

/* The lock word of block off (class cls, generation gen) to txn, if it is
 * that block and free and slot h still names txn without its mark. A live
 * coordinator (a shm peer) may have marked or retired the slot and then
 * released the lock since we looked: the word we took is then nobody's,
 * so it goes back. The owner marks or retires before it releases, so a
 * CAS that won after that release sees the slot changed. */
static bool relock_block(struct st_region *r, const struct st_log_hdr *h, uint64_t off,
			 unsigned cls, uint32_t gen, uint64_t txn)
{
	struct st_item *it = block_at(r, off, cls);
	if (!it || st_ident_gen(ld(&it->ident)) != gen || !cas(&it->lock, 0, txn))
		return false;
	if (ld(&h->txn) == txn && ld(&h->mark) != txn)
		return true;
	(void)cas(&it->lock, txn, 0);
	return false;
}

uint64_t st_log_relock(struct st_region *r, unsigned self)
{
	const struct st_layout *L = &r->layout;
	struct recs v = { 0 };
	uint64_t n = 0;
	for (unsigned coord = 1; coord <= L->log_nodes; coord++) {
		if (coord == self)
			continue;
		for (unsigned slot = 0; slot < ST_LOG_SLOTS; slot++) {
			uint64_t soff = st_log_slot_off(L, coord, slot);
			const struct st_log_hdr *h = (const struct st_log_hdr *)(r->base + soff);
			uint64_t txn = ld(&h->txn);
			if (!txn || ld(&h->mark) == txn)
				continue; /* free, or committed: its installs stand */
			slot_records(r, soff, txn, &v);
			for (size_t k = 0; k < v.n; k++) {
				const struct st_log_rec *rec = (const struct st_log_rec *)(r->base + v.off[k]);
				uint8_t kind = (uint8_t)(rec->kind_len >> 32);
				if (kind == ST_REC_IMAGE && (uint32_t)rec->kind_len >= 40) {
					uint64_t ident;
					memcpy(&ident, (const char *)(rec + 1) + 24, 8);
					n += relock_block(r, h, rec->off, st_ident_class(ident),
							  (uint32_t)rec->aux, txn);
				} else if (kind == ST_REC_RELOC) {
					struct st_log_reloc rl;
					memcpy(&rl, rec + 1, sizeof(rl));
					n += relock_block(r, h, rec->off, (uint8_t)rl.old_gen_cls,
							  (uint32_t)(rl.old_gen_cls >> 32), txn);
				}
			}
		}
	}
	free(v.off);
	return n;
}

void st_log_slots(struct st_region *r, unsigned coord, uint64_t txn[ST_LOG_SLOTS],
		  uint64_t mark[ST_LOG_SLOTS])
{
	const struct st_layout *L = &r->layout;
	for (unsigned slot = 0; slot < ST_LOG_SLOTS; slot++) {
		txn[slot] = mark[slot] = 0;
		if (coord < 1 || coord > L->log_nodes)
			continue;
		const struct st_log_hdr *h =
			(const struct st_log_hdr *)(r->base + st_log_slot_off(L, coord, slot));
		txn[slot] = ld(&h->txn);
		mark[slot] = ld(&h->mark);
	}
}

void st_log_resolve(struct st_region *r, unsigned coord, const uint64_t decided[ST_LOG_SLOTS],
		    const uint64_t only[ST_LOG_SLOTS], struct st_log_stats *stats)
{
	const struct st_layout *L = &r->layout;
	if (coord < 1 || coord > L->log_nodes)
		return;
	struct recs v = { 0 };
	for (unsigned slot = 0; slot < ST_LOG_SLOTS; slot++) {
		uint64_t soff = st_log_slot_off(L, coord, slot);
		struct st_log_hdr *h = (struct st_log_hdr *)(r->base + soff);
		uint64_t txn = ld(&h->txn);
		if (!txn || (only && only[slot] != txn))
			continue;
		bool committed = ld(&h->mark) == txn || (decided && decided[slot] == txn);
		slot_records(r, soff, txn, &v);
		for (size_t k = 0; k < v.n; k++) {
			size_t i = committed ? k : v.n - 1 - k; /* undo newest first */
			const struct st_log_rec *rec = (const struct st_log_rec *)(r->base + v.off[i]);
			uint8_t kind = (uint8_t)(rec->kind_len >> 32);
			if (kind == ST_REC_RELOC)
				reloc_rec(r, rec, (const char *)(rec + 1), committed);
			else if (kind == ST_REC_IMAGE && !committed)
				undo_image(r, rec, (const char *)(rec + 1));
			if (!committed && stats)
				stats->records_undone++;
		}
		if (stats) {
			if (committed)
				stats->txns_committed++;
			else
				stats->txns_rolled_back++;
		}
		st(&h->mark, 0);
		st(&h->txn, 0);
		st_region_persist(r, soff, sizeof(*h));
		if (ld(&h->ext_txn) == txn) { /* after the retire (st.h) */
			free_extents(r, h, txn);
			st_region_persist(r, soff, sizeof(*h));
		}
	}
	free(v.off);
}

void st_release_locks(struct st_region *r, st_lock_match_fn match, void *arg, int bucket_node,
		      struct st_log_stats *stats)
{
	const struct st_layout *L = &r->layout;
	for (uint64_t bkt = 0; bkt < L->index_buckets; bkt++) {
		uint64_t *bw = (uint64_t *)(r->base + st_bucket_off(L, bkt));
		/* A bucket lock carries its inserter's node id in its top byte,
		 * and, when a transaction took it, that transaction's owner
		 * word (st_create's lock_owner), which match knows. */
		uint64_t bl = ld(&bw[0]);
		if (bl && ((bucket_node >= 0 && (bl >> 56) == (uint64_t)bucket_node) ||
			   match(arg, bl) == 0) &&
		    cas(&bw[0], bl, 0) && stats)
			stats->locks_released++;
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t s = ld(&bw[j]);
			if (!s)
				continue;
			struct st_item *it = block_at(r, st_slot_off(s), st_slot_cls(s));
			if (!it)
				continue;
			for (int tries = 0; tries < 64; tries++) {
				uint64_t lk = ld(&it->lock);
				uint64_t nw = lk ? match(arg, lk) : lk;
				if (nw == lk)
					break;
				if (cas(&it->lock, lk, nw)) {
					st_region_persist(r, st_slot_off(s), 8);
					if (stats)
						stats->locks_released++;
					break;
				}
			}
		}
	}
}

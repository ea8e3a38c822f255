/*
 * index.c: the one-sided cuckoo index of the MemStore (RCBench 4.1-4.2,
 * after Pilaf; DESIGN.md section 9).
 *
 * The index is an array of 64-byte buckets: one lock word, then 7 slot
 * words (st_internal.h: block offset, size class, way and an 18-bit tag of
 * the key's hash). A key may live in any of its ST_WAYS = 3 buckets, way 0
 * being its primary bucket. Everything is done by coordinators through the
 * fabric:
 *
 *   lookup: READ way 0; for each slot whose tag and way match, READ the
 *           block (its class size, known from the slot) and compare the
 *           key. Not there: READ ways 1 and 2 together, in that order.
 *           Usually 1 bucket READ + 1 block READ; never takes a lock.
 *   insert: READ way 0 (the key may exist); then lock the primary bucket
 *           (CAS 0 -> owner, with the 3 buckets and the allocator's first
 *           bitmap chunk READ behind it); still absent: take a block
 *           (Read-Cas), then in one batch WRITE the placeholder item, CAS
 *           an empty slot 0 -> slot word, CAS the lock back to 0: 4 round
 *           trips. No empty slot among the 21: kick-out.
 *   kick:   move one key V that sits in one of our buckets at its way p to
 *           a free slot of its way q > p: CAS the copy in (V is now in two
 *           slots, both pointing at its block), persist the copy when the
 *           inserting node has a persister (invariant (7)), then CAS V's
 *           old slot straight to our new key's word. Needs V's primary
 *           lock too (taken with a CAS that never waits, so two
 *           inserters cannot deadlock). One level deep: raises the load at
 *           which the index first reports full from ~50% to ~93% (measured
 *           by simulation).
 *   swap:   under the primary lock, CAS the key's slot from the old block
 *           to the new one.
 *   reap:   lock the item, lock the primary bucket, CAS the slot to 0,
 *           unlock the bucket, mark the block DEAD, unlock the item, free.
 *
 * The operations that take bucket locks (insert, swap, reap) are given the
 * calling coordinator's handle (struct st_coord, st.h), not just the
 * layout: its node id goes into the owner word of every bucket lock it
 * takes (bucket_owner), and its persister, if any, makes a kick's copy
 * durable (invariant (7)). Nothing here is per process, so several nodes
 * can run in one process (DESIGN.md principle 5).
 *
 * Invariants:
 * (1) A slot word changes only by CAS, and every change of a key's slots
 *     (insert, move, swap, reap; recovery aside) is made under that key's
 *     primary bucket lock. Lookups take no lock: they read each slot
 *     atomically.
 * (2) So a key has at most one slot, except during a move, when two
 *     slots point at the same block; and under its primary lock a key's
 *     slots are frozen.
 * (3) A key only moves to a later way (p < q), copy first, then the old
 *     slot is overwritten. A lookup reads way 0, 1, 2 in this order, so a
 *     key present during the whole lookup is seen: if the lookup read way
 *     p after the overwrite, the copy in way q was already there and is
 *     read later.
 * (4) A block is fully written (placeholder) before its slot word is
 *     CASed in: the WRITE precedes the CAS on one endpoint, and the CAS
 *     is a release for the WRITE's stores.
 * (5) A block leaves the index before it is marked DEAD (swap, then
 *     retire; reap: slot to 0, then DEAD). A lookup that reads a DEAD
 *     block, or a block that is no longer its key's, through a slot it
 *     read earlier, therefore restarts: the slot has changed. Or it has
 *     come back to the same word (the block was freed, given to the same
 *     key again and swapped in): a slot is swapped to a block only after
 *     the block is written, so the lookup reads the block once more after
 *     re-reading the slot (match_bucket) before it calls the key absent.
 *     (tests/unit/test_storage.c's relocation race missed the key about
 *     once in 30 runs on a loaded machine before that second read.)
 * (6) Bucket locks are held only for a few round trips and never while
 *     waiting for another lock (the kick's second lock is try-only); a
 *     kick also holds them across the flush of invariant (7).
 * (7) Durability follows (3) (persistence power): V's copy is durable
 *     before its old slot is overwritten, by the flush of the persister
 *     the inserting node registered on its own handle (st_coord, set by
 *     st_region_set_persister; cc/durable.c registers one with group
 *     commit). Without that, both writes wait for the transaction's
 *     flush (cc/durable.c), which persists its pages
 *     in no promised order, and any other flush of the old slot's page (a
 *     bucket page is shared by 64 buckets: another worker's commit, the
 *     kernel's writeback) may carry the overwrite alone: a power cut then
 *     loses V, a key committed long ago by someone else. With the copy
 *     durable first, the medium holds V in one slot or in two, never none
 *     (standalone recovery keeps one of two, scan.c; a cluster node keeps
 *     both, as after a kill -9 between the two CASes). Readers see the
 *     same as without the flush, only for longer: V in one slot or two,
 *     both pointing at its block; match_bucket takes the first, and
 *     st_scan may visit V twice, as its contract allows.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "storage/st_internal.h"

static_assert(ST_BUCKET_SLOTS + 1 == 8, "a bucket is 8 words");
static_assert(ST_WAYS == 3, "slot words have 2 way bits; the kick assumes 3 ways");

/* Give up on a bucket lock, or on a key whose slot keeps changing, after
 * this many nanoseconds of requested pauses: a peer that died holding a
 * bucket lock must not hang a worker forever. */
#define GIVE_UP_NS 2000000000ull
#define PAUSE_MIN_NS 500ull
#define PAUSE_MAX_NS 100000ull

/* ---- hashing ---- */

static inline uint64_t load_le64(const unsigned char *p)
{
	/* Byte by byte so every node computes the same hash whatever its
	 * byte order; compilers turn this into one load on little-endian. */
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
	       (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
	       (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint64_t fold(uint64_t x)
{
	/* Multiply-xorshift finalizer: every input bit reaches every output
	 * bit. Odd constants with well-spread bits. */
	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ull;
	x ^= x >> 29;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 32;
	return x;
}

uint64_t st_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x243f6a8885a308d3ull ^ ((uint64_t)len * 0xa0761d6478bd642full);
	while (len >= 8) {
		uint64_t w = load_le64(p) * 0xe7037ed1a0b428dbull;
		h = (h ^ w ^ (w >> 31)) * 0x8ebc6af09c88c6e3ull;
		h ^= h >> 27;
		p += 8;
		len -= 8;
	}
	uint64_t w = 0;
	for (size_t i = 0; i < len; i++)
		w |= (uint64_t)p[i] << (8 * i);
	h = (h ^ (w * 0xe7037ed1a0b428dbull)) * 0x8ebc6af09c88c6e3ull;
	return fold(h);
}

/* x mapped to [0, n) by the high half of a 128-bit product (no division). */
static inline uint64_t range(uint64_t x, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

void st_ways_derive(const struct st_layout *L, uint64_t b0, uint32_t tag, struct st_ways *w)
{
	/* Way 1 lies 1..n/2-1 buckets after the primary, way 2 n/2..n-1
	 * after it, both chosen by the tag alone: distinct, and computable
	 * back from any one of them (st_ways_of_slot). */
	const uint64_t n = L->index_buckets, half = n / 2;
	uint64_t d1 = 1 + range(fold(tag ^ 0x5851f42d4c957f2dull), half - 1);
	uint64_t d2 = half + range(fold(tag + 0x14057b7ef767814full), n - half);
	w->tag = tag;
	w->b[0] = b0;
	w->b[1] = (b0 + d1) % n;
	w->b[2] = (b0 + d2) % n;
}

void st_ways_of(const struct st_layout *L, uint64_t h, struct st_ways *w)
{
	/* The primary bucket takes the high bits of h (range()), the tag its
	 * low bits: independent for any index size. */
	st_ways_derive(L, range(h, L->index_buckets), (uint32_t)h & ST_TAG_MASK, w);
}

void st_ways_of_slot(const struct st_layout *L, uint64_t bucket, uint64_t s, struct st_ways *w)
{
	const uint64_t n = L->index_buckets;
	uint32_t tag = st_slot_tag(s);
	st_ways_derive(L, 0, tag, w); /* offsets of the ways from a primary 0 */
	uint64_t d = w->b[st_slot_way(s) < ST_WAYS ? st_slot_way(s) : 0];
	st_ways_derive(L, (bucket + n - d) % n, tag, w);
}


/* ---- lookup ---- */

/*
 * The owner word a coordinator puts in the bucket locks it takes: bits
 * 56..63 are its node (c->node), so that when a node restarts its peers
 * release the bucket locks its dead inserters held (st_release_locks);
 * bits 0..55 are random per thread, which tells a debugger which thread
 * holds a lock (any nonzero value gives mutual exclusion: a coroutine never
 * CASes a lock it holds). Only the random part is cached per thread (a
 * per-worker cache, STYLE.md): the node comes from the caller's handle at
 * every call, so two nodes of one process, on one thread, each lock with
 * their own id.
 */
static_assert(FAB_MAX_NODES <= 256, "a node id fits the owner word's top byte");
static __thread uint64_t tls_owner_bits;

static uint64_t bucket_owner(const struct st_coord *c)
{
	if (!tls_owner_bits) {
		uint64_t x = (uint64_t)(uintptr_t)&tls_owner_bits ^ ((uint64_t)getpid() << 32);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		x ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull;
		tls_owner_bits = (fold(x) & ((1ull << 56) - 1)) | 1;
	}
	return tls_owner_bits | (uint64_t)c->node << 56;
}

struct backoff {
	uint64_t waited, pause;
};

/* Pause before retrying; ST_EBUSY once GIVE_UP_NS of pauses were spent. */
static int backoff(struct fab_batch *b, struct backoff *bo)
{
	if (bo->waited >= GIVE_UP_NS)
		return ST_EBUSY;
	if (bo->pause < PAUSE_MIN_NS)
		bo->pause = PAUSE_MIN_NS;
	st_pause(b, bo->pause);
	bo->waited += bo->pause;
	bo->pause = bo->pause * 2 < PAUSE_MAX_NS ? bo->pause * 2 : PAUSE_MAX_NS;
	return 0;
}

enum { M_NONE, M_FOUND, M_RESTART };

/*
 * Look for the key among the slots of its way i (bucket already read into
 * bk). Returns M_FOUND (ref, buf filled), M_NONE, M_RESTART (a slot we
 * followed changed under us, invariant (5)), or -errno from the fabric.
 */
/* The block in buf is the key's: M_FOUND with *ref, or M_RESTART if it is
 * retired (DEAD); M_NONE if it holds another key. */
static int match_block(const struct st_item *buf, const void *key, uint32_t klen, uint16_t node,
		       uint8_t cls, uint64_t off, struct st_ref *ref)
{
	uint64_t ident = buf->ident;
	if (!st_ident_sane(ident, cls) || st_ident_klen(ident) != klen ||
	    memcmp(st_item_key(buf), key, klen) != 0)
		return M_NONE;
	if (st_data_flags(buf->data) & ST_F_DEAD)
		return M_RESTART;
	*ref = (struct st_ref){ .node = node, .cls = cls, .gen = st_ident_gen(ident), .off = off };
	return M_FOUND;
}

static int match_bucket(struct fab_batch *b, const struct st_layout *L, uint16_t node,
			const void *key, uint32_t klen, const struct st_ways *w, unsigned i,
			const uint64_t *bk, struct st_ref *ref, struct st_item *buf)
{
	for (int j = 1; j <= ST_BUCKET_SLOTS; j++) {
		uint64_t s = bk[j];
		if (!s || st_slot_tag(s) != w->tag || st_slot_way(s) != i)
			continue;
		uint64_t off = st_slot_off(s), slab;
		uint8_t cls = st_slot_cls(s);
		uint32_t idx;
		if (st_block_locate(L, off, cls, &slab, &idx))
			continue; /* not a block: never follow it */
		int rc = fab_read1(b, node, off, buf, st_csize(cls));
		if (rc)
			return rc;
		int m = match_block(buf, key, klen, node, cls, off, ref);
		if (m != M_NONE)
			return m;
		/* Another key behind our tag: a tag collision, or the block was
		 * recycled after our key moved away. Only the slot tells. */
		uint64_t now = 0;
		if ((rc = fab_read1(b, node, st_bucket_off(L, w->b[i]) + 8u * j, &now, 8)))
			return rc;
		if (now != s)
			return M_RESTART;
		/* The same slot word, but it may have left this block and come
		 * back (ABA: our key moved away, the block was freed, given to
		 * our key again and written, then swapped in), and our block
		 * read may predate that write. A slot is swapped to a block only
		 * after the block is written, so a read after the slot read sees
		 * our key if the slot points at our key's block. */
		if ((rc = fab_read1(b, node, off, buf, st_csize(cls))))
			return rc;
		if ((m = match_block(buf, key, klen, node, cls, off, ref)) != M_NONE)
			return m;
	}
	return M_NONE;
}

/* ---- the probe (st.h): lookups of many keys, batched ---- */

void st_probe_post(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t hash,
		   uint64_t bucket[8])
{
	struct st_ways w;
	st_ways_of(L, hash, &w);
	fab_read(b, node, st_bucket_off(L, w.b[0]), bucket, 64);
}

int st_probe_candidate(const struct st_layout *L, uint64_t hash, const uint64_t bucket[8],
		       uint64_t *off, uint8_t *cls)
{
	struct st_ways w;
	st_ways_of(L, hash, &w);
	int found = 0;
	for (int j = 1; j <= ST_BUCKET_SLOTS; j++) {
		uint64_t s = bucket[j];
		uint64_t slab;
		uint32_t idx;
		if (!s || st_slot_tag(s) != w.tag || st_slot_way(s) != 0 ||
		    st_block_locate(L, st_slot_off(s), st_slot_cls(s), &slab, &idx))
			continue;
		/* Two slots with our tag: a move in progress (both point at one
		 * block) or a tag collision; either way, st_lookup's business. */
		if (found++ && st_slot_off(s) != *off)
			return ST_ENOTFOUND;
		*off = st_slot_off(s);
		*cls = st_slot_cls(s);
	}
	return found ? 0 : ST_ENOTFOUND;
}

int st_probe_match(const struct st_item *buf, const void *key, uint32_t klen, uint16_t node,
		   uint8_t cls, uint64_t off, struct st_ref *ref)
{
	return match_block(buf, key, klen, node, cls, off, ref) == M_FOUND ? 0 : ST_ENOTFOUND;
}

/* Read ways [from, ST_WAYS) of a key, in way order (invariant (3)). */
static void read_ways(struct fab_batch *b, const struct st_layout *L, uint16_t node,
		      const struct st_ways *w, unsigned from, uint64_t bk[ST_WAYS][8])
{
	for (unsigned k = from; k < ST_WAYS; k++)
		fab_read(b, node, st_bucket_off(L, w->b[k]), bk[k], 64);
}

/*
 * Lock-free lookup: way 0 alone, then ways 1 and 2 in one round trip
 * (st_lookup), or way 0 only (st_create's first try: it locks and reads
 * all 3 next anyway). Returns 0, ST_ENOTFOUND, ST_EBUSY (the key's slots
 * kept changing for GIVE_UP_NS), or -errno.
 */
static int find(struct fab_batch *b, const struct st_layout *L, uint16_t node, const void *key,
		uint32_t klen, const struct st_ways *w, bool way0_only, struct st_ref *ref,
		struct st_item *buf)
{
	uint64_t bk[ST_WAYS][8];
	struct backoff bo = { 0, 0 };
	for (int tries = 0;; tries++) {
		int m = M_NONE, rc;
		/* A slot changing again and again: give its writer room. */
		if (tries >= 4 && (rc = backoff(b, &bo)))
			return rc;
		fab_read(b, node, st_bucket_off(L, w->b[0]), bk[0], 64);
		if ((rc = fab_exec(b)))
			return rc;
		m = match_bucket(b, L, node, key, klen, w, 0, bk[0], ref, buf);
		if (m == M_NONE && !way0_only) {
			read_ways(b, L, node, w, 1, bk);
			if ((rc = fab_exec(b)))
				return rc;
			m = match_bucket(b, L, node, key, klen, w, 1, bk[1], ref, buf);
			if (m == M_NONE)
				m = match_bucket(b, L, node, key, klen, w, 2, bk[2], ref, buf);
		}
		if (m < 0)
			return m;
		if (m == M_FOUND)
			return 0;
		if (m == M_NONE)
			return ST_ENOTFOUND;
	}
}

int st_lookup(struct fab_batch *b, const struct st_layout *L, uint16_t node, const void *key,
	      uint32_t klen, uint64_t hash, struct st_ref *ref, struct st_item *buf)
{
	struct st_ways w;
	st_ways_of(L, hash, &w);
	return find(b, L, node, key, klen, &w, false, ref, buf);
}

/* ---- bucket locks ---- */

/*
 * Take the primary bucket lock of a key (CAS 0 -> owner) and read its 3
 * buckets behind the CAS in the same round trip, pausing while another
 * holds it. With pf, also the allocator's first reads for class pf_cls. Returns 0 (locked, bk as of after the lock), ST_EBUSY after
 * GIVE_UP_NS, or -errno.
 */
static int lock_and_read(struct fab_batch *b, const struct st_layout *L, uint16_t node,
			 const struct st_ways *w, uint64_t owner, uint64_t bk[ST_WAYS][8],
			 unsigned pf_cls, struct st_alloc_pf *pf)
{
	struct backoff bo = { 0, 0 };
	for (;;) {
		uint64_t held = ~0ull;
		fab_cas(b, node, st_bucket_off(L, w->b[0]), 0, owner, &held);
		read_ways(b, L, node, w, 0, bk);
		if (pf) /* an insert's first allocator reads ride along */
			st_alloc_prefetch(b, L, node, pf_cls, pf);
		int rc = fab_exec(b);
		if (rc)
			return rc;
		if (held == 0)
			return 0;
		if ((rc = backoff(b, &bo)))
			return rc;
	}
}

/* Release a bucket lock we hold (CAS, not WRITE: NIC atomics are only
 * atomic with other atomics). Queued; the caller's fab_exec posts it. */
static void unlock_q(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t bucket,
		     uint64_t owner)
{
	fab_cas(b, node, st_bucket_off(L, bucket), owner, 0, NULL);
}

static int unlock1(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t bucket,
		   uint64_t owner)
{
	unlock_q(b, L, node, bucket, owner);
	return fab_exec(b);
}

/*
 * Lookup under the key's primary lock, from buckets read by
 * lock_and_read. The key's slots are frozen (invariant (2)); a restart only
 * means a tag collision with a key that moved, so re-read and look again.
 */
static int find_locked(struct fab_batch *b, const struct st_layout *L, uint16_t node,
		       const void *key, uint32_t klen, const struct st_ways *w,
		       uint64_t bk[ST_WAYS][8], struct st_ref *ref, struct st_item *buf)
{
	struct backoff bo = { 0, 0 };
	for (;;) {
		int m = M_NONE, rc;
		for (unsigned i = 0; i < ST_WAYS && m == M_NONE; i++)
			m = match_bucket(b, L, node, key, klen, w, i, bk[i], ref, buf);
		if (m < 0)
			return m;
		if (m == M_FOUND)
			return 0;
		if (m == M_NONE)
			return ST_ENOTFOUND;
		if ((rc = backoff(b, &bo)))
			return rc;
		read_ways(b, L, node, w, 0, bk);
		if ((rc = fab_exec(b)))
			return rc;
	}
}

/* ---- persisting an index write before the next (invariant (7)) ---- */

/* Make [off, off+len) of node durable now if the calling coordinator has a
 * persister (st_region_set_persister): 0 (also when it has none), or its
 * -errno. */
static int persist_now(const struct st_coord *c, struct fab_batch *b, uint16_t node,
		       uint64_t off, uint64_t len)
{
	return c->persist ? c->persist(c->persist_arg, b, node, off, len) : 0;
}

/* ---- insert ---- */

/* Give back a block taken by st_alloc_block that was never published,
 * with our claim on its lock word if we still have it (alloc.c (5)). */
static int free_block(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t off,
		      unsigned cls)
{
	uint64_t slab, bw = 0;
	uint32_t idx;
	if (st_block_locate(L, off, cls, &slab, &idx))
		return -EINVAL;
	int rc = fab_read1(b, node, st_bitmap_word_off(L, slab, idx), &bw, 8);
	if (rc)
		return rc;
	fab_cas(b, node, off + ST_ITEM_LOCK, ST_LOCK_CLAIMED, 0, NULL);
	return st_bit_clear(b, L, node, off, cls, bw);
}

/* Where the new key's slot word goes: slot (wi, sj) of its ways, which
 * holds `expect` (0, or a key moved away by kick()), and a second bucket
 * lock to release with ours (kick), or none. */
struct target {
	unsigned wi, sj;
	uint64_t expect;
	bool vlocked;
	uint64_t vbucket;
};

/*
 * Kick-out, one level (see the file comment): all 21 slots of the key's
 * ways are full (bk, read under its primary lock). Find a key V in them,
 * at its way p < 2, whose way q > p has a free slot; take V's primary lock
 * if it is not ours (try once, never wait: invariant (6)); copy V's slot
 * word into the free slot (way bits q) and persist it (invariant (7)). On
 * 0, t says which slot of ours now holds a copy to overwrite; V's primary
 * lock stays held (t->vlocked) until the caller's overwrite. Returns 0,
 * ST_EFULL, or -errno (from the fabric, or the persister: then the copy
 * is gone again and V's lock released).
 */
static int kick(struct fab_batch *b, const struct st_coord *coord, uint16_t node,
		const struct st_ways *w, uint64_t owner, uint64_t bk[ST_WAYS][8], struct target *t)
{
	const struct st_layout *L = coord->L;
	for (unsigned i = 0; i < ST_WAYS; i++) {
		/* The later ways of the 7 keys in our way i, read at once. */
		uint64_t tb[ST_BUCKET_SLOTS * 2][8];
		struct { unsigned j, q; struct st_ways vw; } c[ST_BUCKET_SLOTS * 2];
		int n = 0, rc;
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++) {
			uint64_t v = bk[i][j];
			if (!v || st_slot_way(v) >= ST_WAYS - 1)
				continue;
			struct st_ways vw;
			st_ways_of_slot(L, w->b[i], v, &vw);
			for (unsigned q = st_slot_way(v) + 1; q < ST_WAYS; q++) {
				c[n].j = j;
				c[n].q = q;
				c[n].vw = vw;
				fab_read(b, node, st_bucket_off(L, vw.b[q]), tb[n], 64);
				n++;
			}
		}
		if ((rc = fab_exec(b)))
			return rc;
		for (int k = 0; k < n; k++) {
			unsigned e = 0;
			for (unsigned x = 1; x <= ST_BUCKET_SLOTS && !e; x++)
				if (tb[k][x] == 0)
					e = x;
			if (!e)
				continue;
			const uint64_t v = bk[i][c[k].j];
			const uint64_t vprim = c[k].vw.b[0];
			const uint64_t orig = st_bucket_off(L, w->b[i]) + 8u * c[k].j;
			bool vlocked = false;
			if (vprim != w->b[0]) {
				/* V's slots are frozen only under V's lock; check that
				 * V is still where we saw it, behind the CAS. */
				uint64_t held = ~0ull, now = 0;
				fab_cas(b, node, st_bucket_off(L, vprim), 0, owner, &held);
				fab_read(b, node, orig, &now, 8);
				if ((rc = fab_exec(b)))
					return rc;
				if (held != 0)
					continue;
				vlocked = true;
				if (now != v) {
					if ((rc = unlock1(b, L, node, vprim, owner)))
						return rc;
					continue;
				}
			}
			/* Copy first (invariant (3)). */
			const uint64_t copy = st_bucket_off(L, c[k].vw.b[c[k].q]) + 8u * e;
			uint64_t was = ~0ull;
			fab_cas(b, node, copy, 0, st_slot_set_way(v, c[k].q), &was);
			if ((rc = fab_exec(b)))
				return rc;
			if (was != 0) { /* someone filled it first */
				if (vlocked && (rc = unlock1(b, L, node, vprim, owner)))
					return rc;
				continue;
			}
			/* The copy durable before the caller overwrites the old
			 * slot (invariant (7)). If that fails, take the copy back:
			 * V's slots are ours to change (we hold its primary lock),
			 * and V in its old slot alone is where we started. */
			if ((rc = persist_now(coord, b, node, copy, 8))) {
				fab_cas(b, node, copy, st_slot_set_way(v, c[k].q), 0, NULL);
				if (vlocked)
					unlock_q(b, L, node, vprim, owner);
				int erc = fab_exec(b);
				return erc ? erc : rc;
			}
			*t = (struct target){ .wi = i, .sj = c[k].j, .expect = v, .vlocked = vlocked,
					      .vbucket = vprim };
			return 0;
		}
	}
	return ST_EFULL;
}

int st_create(struct fab_batch *b, const struct st_coord *c, uint64_t lock_owner, uint16_t node,
	      const void *key, uint32_t klen, uint64_t hash, struct st_ref *ref,
	      struct st_item *buf)
{
	const struct st_layout *L = c->L;
	struct st_ways w;
	uint64_t bk[ST_WAYS][8];
	st_ways_of(L, hash, &w);
	/* Most keys that exist are in way 0: the common SET of an existing
	 * key costs what a lookup does. */
	int rc = find(b, L, node, key, klen, &w, true, ref, buf);
	if (rc != ST_ENOTFOUND)
		return rc;
	int cls = st_class_for(klen, 0);
	if (cls < 0)
		return ST_EFULL;

	const uint64_t owner = lock_owner ? lock_owner : bucket_owner(c);
	uint64_t boff = 0;
	uint32_t gen = 0;
	bool have_block = false;
	struct st_alloc_pf pf;
	for (;;) {
		if ((rc = lock_and_read(b, L, node, &w, owner, bk, (unsigned)cls,
					have_block ? NULL : &pf)))
			goto out;
		/* Someone may have inserted the key since our lookup. */
		rc = find_locked(b, L, node, key, klen, &w, bk, ref, buf);
		if (rc != ST_ENOTFOUND) {
			int urc = unlock1(b, L, node, w.b[0], owner);
			rc = rc ? rc : urc;
			goto out;
		}
		/* We hold the lock and the key is absent (invariant (2)). */
		struct target t = { .wi = ST_WAYS };
		for (unsigned i = 0; i < ST_WAYS && t.wi == ST_WAYS; i++)
			for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++)
				if (bk[i][j] == 0) {
					t = (struct target){ .wi = i, .sj = j };
					break;
				}
		if (!have_block) {
			uint64_t old_ident = 0;
			unsigned got = (unsigned)cls;
			rc = st_alloc_block(b, L, node, &got, &pf, &boff, &old_ident);
			cls = (int)got; /* a coarse class, maybe (alloc.c invariant (6)) */
			if (rc) {
				(void)unlock1(b, L, node, w.b[0], owner);
				return rc;
			}
			/* The bit is ours; the ident still holds the previous
			 * occupant's generation: the placeholder writes the new one. */
			gen = st_next_gen(old_ident);
			have_block = true;
		}
		if (t.wi == ST_WAYS && (rc = kick(b, c, node, &w, owner, bk, &t))) {
			int urc = unlock1(b, L, node, w.b[0], owner);
			rc = rc == ST_EFULL && urc ? urc : rc;
			goto out;
		}
		uint32_t len = (uint32_t)((sizeof(struct st_item) + klen + 7) & ~7ull);
		memset(buf, 0, len);
		buf->ident = st_make_ident(gen, klen, (uint8_t)cls);
		buf->data = st_make_data(0, ST_F_ABSENT);
		memcpy(buf + 1, key, klen);
		uint64_t slot = st_slot_make(boff, (uint8_t)cls, t.wi, w.tag), was = ~0ull;
		/* Invariant (4): item, then slot, then unlocks, in order. The
		 * lock word is not written: it is handed over from our claim
		 * to 0 by CAS, once (alloc.c invariant (5)); a stale holder may
		 * count on it from then on, even if this slot CAS loses and
		 * the item is written again. */
		fab_write(b, node, boff + 8, (char *)buf + 8, len - 8);
		fab_cas(b, node, boff + ST_ITEM_LOCK, ST_LOCK_CLAIMED, 0, NULL);
		fab_cas(b, node, st_bucket_off(L, w.b[t.wi]) + 8u * t.sj, t.expect, slot, &was);
		if (t.vlocked)
			unlock_q(b, L, node, t.vbucket, owner);
		unlock_q(b, L, node, w.b[0], owner);
		if ((rc = fab_exec(b)))
			return rc;
		if (was == t.expect) {
			*ref = (struct st_ref){ .node = node, .cls = (uint8_t)cls, .gen = gen,
						.off = boff };
			return 0;
		}
		/* An empty slot was taken by another key (under its own lock);
		 * a kicked key's slot cannot change (we held its lock). Start
		 * over with the block we have. */
	}
out:
	if (have_block)
		(void)free_block(b, L, node, boff, (unsigned)cls);
	return rc;
}

/* ---- swap and reap ---- */

/* The slot of the key's ways holding block (off, cls) in bk: 0 and its
 * offset and word, or ST_ESTALE. */
static int slot_of(const struct st_layout *L, const struct st_ways *w, uint64_t bk[ST_WAYS][8],
		   uint64_t off, uint8_t cls, uint64_t *so, uint64_t *word)
{
	const uint64_t want = st_slot_make(off, cls, 0, w->tag);
	for (unsigned i = 0; i < ST_WAYS; i++)
		for (unsigned j = 1; j <= ST_BUCKET_SLOTS; j++)
			if (bk[i][j] && st_slot_same(bk[i][j], want) && st_slot_way(bk[i][j]) == i) {
				*so = st_bucket_off(L, w->b[i]) + 8u * j;
				*word = bk[i][j];
				return 0;
			}
	return ST_ESTALE;
}

int st_swap(struct fab_batch *b, const struct st_coord *c, uint64_t lock_owner, uint64_t hash,
	    const struct st_ref *old, const struct st_ref *nw)
{
	const struct st_layout *L = c->L;
	const uint16_t node = old->node;
	uint64_t slab;
	uint32_t idx;
	if (old->node != nw->node || st_block_locate(L, old->off, old->cls, &slab, &idx) ||
	    st_block_locate(L, nw->off, nw->cls, &slab, &idx))
		return -EINVAL;
	struct st_ways w;
	uint64_t bk[ST_WAYS][8], so = 0, cur = 0, was = ~0ull;
	st_ways_of(L, hash, &w);
	const uint64_t owner = lock_owner ? lock_owner : bucket_owner(c);
	int rc = lock_and_read(b, L, node, &w, owner, bk, 0, NULL);
	if (rc)
		return rc;
	rc = slot_of(L, &w, bk, old->off, old->cls, &so, &cur);
	if (rc == 0)
		fab_cas(b, node, so, cur, st_slot_make(nw->off, nw->cls, st_slot_way(cur), w.tag),
			&was);
	unlock_q(b, L, node, w.b[0], owner);
	int erc = fab_exec(b);
	if (erc)
		return erc;
	/* Under the lock the slot cannot have changed (invariant (1)). */
	return rc ? rc : was == cur ? 0 : ST_ESTALE;
}

int st_reap(struct fab_batch *b, const struct st_coord *c, uint64_t hash,
	    const struct st_ref *ref, uint64_t owner)
{
	const struct st_layout *L = c->L;
	const uint16_t node = ref->node;
	uint64_t slab;
	uint32_t idx;
	if (!owner || st_block_locate(L, ref->off, ref->cls, &slab, &idx))
		return -EINVAL;

	/* 1. The item's CC lock, and its ident and data words behind it. */
	uint64_t held = ~0ull, hd[2] = { 0, 0 };
	fab_cas(b, node, ref->off + ST_ITEM_LOCK, 0, owner, &held);
	fab_read(b, node, ref->off + ST_ITEM_IDENT, hd, 16);
	int rc = fab_exec(b);
	if (rc)
		return rc;
	if (held != 0)
		return ST_EBUSY;
	uint8_t flags = st_data_flags(hd[1]);
	if (st_ident_gen(hd[0]) != ref->gen || st_ident_class(hd[0]) != ref->cls ||
	    (flags & ST_F_DEAD))
		rc = ST_ESTALE;
	else if (!(flags & ST_F_ABSENT))
		rc = ST_EBUSY; /* a value was committed since the caller looked */
	if (rc)
		goto unlock_item;

	/* 2. Under the primary lock (excludes inserters, movers and swaps of
	 * the key), the slot to 0. */
	struct st_ways w;
	uint64_t bk[ST_WAYS][8], so = 0, cur = 0, was = ~0ull;
	st_ways_of(L, hash, &w);
	const uint64_t bowner = owner; /* a transaction's word: see st_create */
	if ((rc = lock_and_read(b, L, node, &w, bowner, bk, 0, NULL)))
		goto unlock_item;
	rc = slot_of(L, &w, bk, ref->off, ref->cls, &so, &cur);
	if (rc == 0)
		fab_cas(b, node, so, cur, 0, &was);
	unlock_q(b, L, node, w.b[0], bowner);
	int erc = fab_exec(b);
	if (erc)
		return erc;
	if (rc == 0 && was != cur)
		rc = ST_ESTALE;
	if (rc)
		goto unlock_item;

	/* 3. Out of the index: DEAD, then the item lock back to 0 so that
	 * waiters read DEAD and re-resolve (invariant (5)), then the bit. */
	uint64_t data = hd[1] | ST_F_DEAD, bw = 0;
	fab_write(b, node, ref->off + ST_ITEM_DATA, &data, 8);
	fab_cas(b, node, ref->off + ST_ITEM_LOCK, owner, 0, NULL);
	fab_read(b, node, st_bitmap_word_off(L, slab, idx), &bw, 8);
	if ((rc = fab_exec(b)))
		return rc;
	return st_bit_clear(b, L, node, ref->off, ref->cls, bw);

unlock_item:;
	int urc = fab_cas1(b, node, ref->off + ST_ITEM_LOCK, owner, 0, NULL);
	return rc ? rc : urc;
}

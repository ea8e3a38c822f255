/*
 * alloc.c: size classes and the one-sided slab allocator of the MemStore
 * (DESIGN.md section 9; RCBench 4.2 "free_space_map").
 *
 * Item blocks live in slabs of ST_SLAB_BYTES. A slab is carved into blocks
 * of one size class; its word in the slab table says which (class + 1, 0 =
 * unassigned) and its ST_SLAB_BITMAP_BYTES bitmap has one bit per block
 * (1 = used). Every change goes through the fabric, so any coordinator of
 * the cluster allocates on any node with READ and CAS only:
 *
 *   assign a slab:  CAS slabtab[s] 0 -> class+1
 *   take a block:   READ bitmap words, CAS one word to set a free bit, CAS
 *                   the block's lock word 0 -> ST_LOCK_CLAIMED and READ its
 *                   old ident, in one batch (Read-Cas)
 *   stamp it:       WRITE the ident with generation old+1
 *   give it back:   (retire: WRITE data |= DEAD), then CAS the bit to 0
 *
 * Invariants:
 * (1) A slab's class changes only from 0 by CAS, and back to 0 only by
 *     st_flush or st_recover with the node quiesced. So once an allocator
 *     read class c for slab s, s stays of class c for the whole call.
 * (2) A bitmap bit is set only by the CAS that takes the block and cleared
 *     only by its one owner (st_free, st_retire, st_reap, recovery). Bits
 *     past the last block of a class are never set.
 * (3) A block's ident word is written only by whoever set its bit, before
 *     it is published in the index; each allocation gives a generation
 *     different from the previous occupant's, so a stale st_ref (old gen)
 *     is detected by whoever reads the block.
 * (4) A retired block is marked DEAD before its bit is cleared (ordered on
 *     one endpoint), so a reader that reaches it through a stale slot sees
 *     DEAD until the next owner rewrites it (and then a new generation).
 * (5) A block's lock word is never overwritten while someone else may
 *     hold it. A coordinator with a stale reference (its key's block was
 *     reaped or relocated meanwhile) can still win a lock CAS on the free
 *     block, or add a shared count there, and it takes that back only
 *     after its next READ shows the block is not its key's. If the next
 *     owner's first WRITE cleared the word in between, the count's removal
 *     would then land on the new key's word and leave a lock that nobody
 *     holds (seen: every transaction on a fresh key aborting until
 *     txn-timeout). So the allocator takes the lock word too, by CAS from
 *     0, in the batch of its bitmap CAS, and waits for a stale holder to
 *     leave first (claim); only it writes the word until it hands it over,
 *     once. A claim won on a block whose bit CAS lost is given back. A
 *     word that stays held (a holder that never comes back) costs its
 *     block: it stays allocated, unused, until the node's next recovery
 *     rebuilds the bitmaps.
 * (6) Every class in use holds at least one slab, and a slab keeps its
 *     class until the node is quiesced (invariant (1)), so fine classes
 *     could strand most of a small region in half-empty slabs (117 of them
 *     need 468 MiB). So a slab is assigned to a fine class only while more
 *     than ST_SLAB_RESERVE slabs stay unassigned; below that, new slabs
 *     go to the coarse classes only (the 33 sizes 2^k and 3*2^(k-1) of
 *     layout version 2, all of them classes here too), and an item whose
 *     fine class has no free block takes a block of the smallest coarse
 *     class that holds it. A block is always of the class its slab says,
 *     and the item names that class (ident, slot word), whichever was
 *     asked for. A region of at most ST_SLAB_RESERVE slabs (150 MiB or
 *     so) thus allocates exactly as version 2 did.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "storage/st_internal.h"

#define CHUNK_WORDS ST_CHUNK_WORDS
/* Slab-table words read per round trip when walking for another slab. */
#define TAB_WORDS 64

/*
 * Per-thread allocation hint: for each node and class, the slab and
 * bitmap word where this thread last found a free block, packed as
 * slab << 10 | word (a bitmap has at most 1024 words). Only a hint: it is
 * bounds-checked and the slab's class re-read before use, so a hint left
 * by another region of the same node id, or from before a FLUSHALL, just
 * costs a retry. Per thread (not per worker struct) because st_alloc has no
 * hint parameter; a worker's coroutines share their thread's hints.
 */
static __thread uint32_t alloc_hint[FAB_MAX_NODES][ST_NCLASSES];
static_assert(ST_SLAB_BITMAP_BYTES / 8 <= 1024, "bitmap word index fits 10 bits");

unsigned st_class_count(void) { return ST_NCLASSES; }

bool st_class_coarse(unsigned cls)
{
	uint32_t z = st_csize(cls);
	if (z % 3 == 0)
		z /= 3;
	return (z & (z - 1)) == 0;
}

/* The smallest coarse class at or above cls (the last class is coarse). */
static unsigned coarsen(unsigned cls)
{
	while (!st_class_coarse(cls))
		cls++;
	return cls;
}

uint32_t st_class_size(uint8_t cls) { return cls < ST_NCLASSES ? st_csize(cls) : 0; }

uint64_t st_item_bytes(uint32_t klen, uint32_t vlen)
{
	int cls = st_class_for(klen, vlen);
	return cls < 0 ? sizeof(struct st_item) + (uint64_t)klen + vlen : st_csize((uint8_t)cls);
}

int st_class_for(uint32_t klen, uint32_t vlen)
{
	uint64_t need = (sizeof(struct st_item) + (uint64_t)klen + vlen + 7) & ~7ull;
	if (need <= ST_MIN_BLOCK)
		return 0;
	if (need > ST_SLAB_BYTES)
		return -1;
	if (need <= 256) /* the quantum's classes, up to 256 = class 12 */
		return (int)((need - ST_MIN_BLOCK + ST_CLASS_QUANTUM - 1) / ST_CLASS_QUANTUM);
	/* 2^p < need <= 2^(p+1): the class is the doubling's first plus the
	 * steps (rounded up) need lies above 2^p; 16 steps a doubling up to
	 * 4 KiB, 4 above (st_internal.h). */
	unsigned p = 63 - (unsigned)__builtin_clzll(need - 1);
	uint64_t above = need - (1ull << p);
	if (p < 12) {
		unsigned lg = p - 4; /* the step of this doubling */
		return (int)(ST_CLASS_FINE_FIRST + (p - 8) * 16 + ((above + (1ull << lg) - 1) >> lg));
	}
	unsigned lg = p - 2;
	return (int)(ST_CLASS_WIDE_FIRST + (p - 12) * 4 + ((above + (1ull << lg) - 1) >> lg));
}

void st_pause(struct fab_batch *b, uint64_t ns)
{
	if (b->waiter.wait) {
		b->waiter.wait(b->waiter.ctx, ns);
		return;
	}
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static uint64_t block_off(const struct st_layout *L, uint64_t slab, uint32_t idx, unsigned cls)
{
	return L->slab_off + slab * ST_SLAB_BYTES + (uint64_t)idx * st_csize(cls);
}

/* How long an allocator waits for a stale holder of a block it took to
 * leave (invariant (5)): one fabric round trip and a READ's check, so
 * milliseconds even under load; the pauses yield to other coroutines. */
#define CLAIM_WAIT_NS 50000000ull
#define CLAIM_PAUSE_MIN_NS 1000ull
#define CLAIM_PAUSE_MAX_NS 1000000ull

/*
 * Claim the lock word of a block whose bit we won but whose word was lk,
 * not 0: 0 once claimed, 1 if it stayed held for CLAIM_WAIT_NS, or -errno.
 * A block whose old ident is not one of class cls (never stamped, or
 * stamped in a slab's earlier class: a FLUSHALL or a recovery gives
 * unused slabs back) has never been an item of this class here, so no
 * stale reference reaches its word: it holds whatever bytes the slab had
 * (an earlier class's value), not a lock, and is taken as it is.
 */
static int claim(struct fab_batch *b, uint16_t node, uint64_t boff, unsigned cls, uint64_t ident,
		 uint64_t lk)
{
	if (st_ident_class(ident) != cls || st_ident_gen(ident) == 0) {
		uint64_t was = ~0ull;
		int rc = fab_cas1(b, node, boff + ST_ITEM_LOCK, lk, ST_LOCK_CLAIMED, &was);
		if (rc || was == lk)
			return rc;
	}
	uint64_t waited = 0, pause = CLAIM_PAUSE_MIN_NS;
	while (waited < CLAIM_WAIT_NS) {
		st_pause(b, pause);
		waited += pause;
		pause = pause * 2 < CLAIM_PAUSE_MAX_NS ? pause * 2 : CLAIM_PAUSE_MAX_NS;
		uint64_t now = ~0ull;
		int rc = fab_cas1(b, node, boff + ST_ITEM_LOCK, 0, ST_LOCK_CLAIMED, &now);
		if (rc)
			return rc;
		if (now == 0)
			return 0;
	}
	return 1;
}

/*
 * Look for a free block of class cls in slab s from bitmap word w on.
 * With `verify`, the slab's table word is read along with the first chunk
 * and an unassigned slab is claimed (the hint path; the walk in
 * st_alloc_block already knows the class). pf: the first chunk and table
 * word already read (prefetch), or NULL. Returns 0 with the block, 1 when
 * the slab has no free block or is of another class, or -errno.
 */
static int try_slab(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned cls,
		    uint64_t s, uint32_t w, bool verify, const struct st_alloc_pf *pf,
		    uint64_t *off, uint64_t *old_ident, uint32_t *wpos)
{
	const uint32_t nw = st_cwords(cls);
	const uint32_t tail = st_cblocks(cls) % 64;
	const uint64_t tailmask = tail ? (1ull << tail) - 1 : ~0ull;
	const uint64_t bm = L->bitmap_off + s * ST_SLAB_BITMAP_BYTES;
	uint64_t words[CHUNK_WORDS];
	uint64_t tab = 0;
	int rc;

	while (w < nw) {
		uint32_t n = nw - w < CHUNK_WORDS ? nw - w : CHUNK_WORDS;
		if (pf) {
			memcpy(words, pf->words, n * 8);
			tab = pf->tab;
			pf = NULL;
		} else {
			if (verify)
				fab_read(b, node, L->slabtab_off + s * 8, &tab, 8);
			fab_read(b, node, bm + (uint64_t)w * 8, words, n * 8);
			if ((rc = fab_exec(b)))
				return rc;
		}
		if (verify) {
			verify = false;
			if (tab == 0 && !st_class_coarse(cls))
				return 1; /* a fine class claims only in the walk (invariant (6)) */
			if (tab == 0) {
				/* Unassigned (a fresh region, or after FLUSHALL): claim it;
				 * its bitmap is all free (invariant (1)). */
				if ((rc = fab_cas1(b, node, L->slabtab_off + s * 8, 0, cls + 1, &tab)))
					return rc;
				if (tab != 0 && tab != cls + 1)
					return 1;
			} else if (tab != cls + 1) {
				return 1;
			}
		}
		for (uint32_t j = 0; j < n; j++) {
			uint64_t mask = w + j == nw - 1 ? tailmask : ~0ull;
			uint64_t cur = words[j];
			uint64_t free;
			while ((free = ~cur & mask) != 0) {
				unsigned bit = (unsigned)__builtin_ctzll(free);
				uint32_t idx = (w + j) * 64 + bit;
				uint64_t boff = block_off(L, s, idx, cls);
				uint64_t old = 0, ident = 0, lk = ~0ull;
				/* Read-Cas; the claim and the ident READ run after
				 * the bitmap CAS, so when it won they reach the block
				 * we now own (invariant (5)). */
				fab_cas(b, node, bm + (uint64_t)(w + j) * 8, cur, cur | (1ull << bit),
					&old);
				fab_cas(b, node, boff + ST_ITEM_LOCK, 0, ST_LOCK_CLAIMED, &lk);
				fab_read(b, node, boff + ST_ITEM_IDENT, &ident, 8);
				if ((rc = fab_exec(b)))
					return rc;
				if (old != cur) {
					/* Lost a race for this word: give back a claim on
					 * someone else's block, and look again. */
					if (lk == 0 && (rc = fab_cas1(b, node, boff + ST_ITEM_LOCK,
								      ST_LOCK_CLAIMED, 0, NULL)))
						return rc;
					cur = old;
					continue;
				}
				rc = lk == 0 ? 0 : claim(b, node, boff, cls, ident, lk);
				if (rc < 0)
					return rc;
				if (rc == 0) {
					*off = boff;
					*old_ident = ident;
					*wpos = w + j;
					return 0;
				}
				cur |= 1ull << bit; /* held for good: the block stays taken */
			}
		}
		w += n;
	}
	return 1;
}

/* Where this thread starts looking for a block of class cls on node. */
static void hint_get(const struct st_layout *L, uint16_t node, unsigned cls, uint64_t *s,
		     uint32_t *w)
{
	uint32_t h = alloc_hint[node][cls];
	*s = h >> 10;
	*w = h & 1023;
	if (*s >= L->slab_count)
		*s = 0;
	if (*w >= st_cwords(cls))
		*w = 0;
}

void st_alloc_prefetch(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned cls,
		       struct st_alloc_pf *pf)
{
	if (cls >= ST_NCLASSES || node >= FAB_MAX_NODES || L->slab_count == 0) {
		pf->n = 0; /* st_alloc_block reports the error */
		return;
	}
	hint_get(L, node, cls, &pf->slab, &pf->word);
	uint32_t nw = st_cwords(cls);
	pf->n = nw - pf->word < CHUNK_WORDS ? nw - pf->word : CHUNK_WORDS;
	fab_read(b, node, L->slabtab_off + pf->slab * 8, &pf->tab, 8);
	fab_read(b, node, L->bitmap_off + pf->slab * ST_SLAB_BITMAP_BYTES + (uint64_t)pf->word * 8,
		 pf->words, pf->n * 8);
}

/* Take a block of exactly class cls (see st_alloc_block). */
static int alloc_exact(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned cls,
		       const struct st_alloc_pf *pf, uint64_t *off, uint64_t *old_ident)
{
	const bool coarse = st_class_coarse(cls);
	uint64_t s0;
	uint32_t w0, wpos;
	hint_get(L, node, cls, &s0, &w0);
	if (pf && (pf->n == 0 || pf->slab != s0 || pf->word != w0))
		pf = NULL; /* the hint moved since the prefetch: read afresh */
	int rc = try_slab(b, L, node, cls, s0, w0, true, pf, off, old_ident, &wpos);
	if (rc <= 0)
		goto out;

	/* Walk the slabs after the hint, wrapping, and end with the hint's
	 * slab from its start: first a slab of this class with a free block,
	 * or (a coarse class) an unassigned one, wins. A fine class counts
	 * the unassigned slabs on the way and claims the first one after the
	 * walk if more than ST_SLAB_RESERVE are (invariant (6)). The slab
	 * table is read TAB_WORDS at a time so slabs of other classes cost
	 * nothing more. */
	uint64_t tab[TAB_WORDS];
	uint64_t tab_first = 0, tab_n = 0, unassigned = 0, first_free = UINT64_MAX;
	for (uint64_t i = 1; i <= L->slab_count; i++) {
		uint64_t s = (s0 + i) % L->slab_count;
		if (s < tab_first || s >= tab_first + tab_n) {
			tab_first = s;
			tab_n = L->slab_count - s < TAB_WORDS ? L->slab_count - s : TAB_WORDS;
			if ((rc = fab_read1(b, node, L->slabtab_off + s * 8, tab, tab_n * 8)))
				return rc;
		}
		uint64_t t = tab[s - tab_first];
		if (t == 0 && !coarse) {
			if (unassigned++ == 0)
				first_free = s;
			continue;
		}
		if (t == 0) {
			if ((rc = fab_cas1(b, node, L->slabtab_off + s * 8, 0, cls + 1, &t)))
				return rc;
			if (t == 0)
				t = cls + 1; /* ours now */
			tab[s - tab_first] = t;
		}
		if (t != cls + 1)
			continue;
		rc = try_slab(b, L, node, cls, s, 0, false, NULL, off, old_ident, &wpos);
		if (rc <= 0) {
			s0 = s;
			goto out;
		}
	}
	if (coarse || unassigned <= ST_SLAB_RESERVE)
		return ST_EFULL;
	uint64_t t = 0;
	if ((rc = fab_cas1(b, node, L->slabtab_off + first_free * 8, 0, cls + 1, &t)))
		return rc;
	if (t != 0 && t != cls + 1)
		return ST_EFULL; /* taken meanwhile: the caller goes coarse */
	rc = try_slab(b, L, node, cls, first_free, 0, false, NULL, off, old_ident, &wpos);
	if (rc > 0)
		return ST_EFULL;
	s0 = first_free;
out:
	if (rc == 0)
		alloc_hint[node][cls] = (uint32_t)(s0 << 10) | wpos;
	return rc;
}

int st_alloc_block(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned *cls,
		   const struct st_alloc_pf *pf, uint64_t *off, uint64_t *old_ident)
{
	if (*cls >= ST_NCLASSES || node >= FAB_MAX_NODES || L->slab_count == 0)
		return -EINVAL;
	int rc = alloc_exact(b, L, node, *cls, pf, off, old_ident);
	if (rc != ST_EFULL || st_class_coarse(*cls))
		return rc;
	/* No block of the fine class and no slab to spare for it
	 * (invariant (6)): the smallest coarse class that holds the item. */
	unsigned c = coarsen(*cls);
	rc = alloc_exact(b, L, node, c, NULL, off, old_ident);
	if (rc == 0)
		*cls = c;
	return rc;
}

int st_alloc(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint32_t klen,
	     uint32_t vlen, struct st_ref *out)
{
	int cls = st_class_for(klen, vlen);
	if (cls < 0)
		return ST_EFULL;
	uint64_t off, old_ident;
	unsigned c = (unsigned)cls;
	int rc = st_alloc_block(b, L, node, &c, NULL, &off, &old_ident);
	if (rc)
		return rc;
	cls = (int)c;
	if (rc)
		return rc;
	uint32_t gen = st_next_gen(old_ident);
	uint64_t ident = st_make_ident(gen, klen, (uint8_t)cls);
	if ((rc = fab_write1(b, node, off + ST_ITEM_IDENT, &ident, 8)))
		return rc;
	*out = (struct st_ref){ .node = node, .cls = (uint8_t)cls, .gen = gen, .off = off };
	return 0;
}

int st_bit_clear(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t off,
		 unsigned cls, uint64_t cur)
{
	uint64_t s;
	uint32_t idx;
	if (st_block_locate(L, off, cls, &s, &idx))
		return -EINVAL;
	const uint64_t woff = st_bitmap_word_off(L, s, idx);
	const uint64_t bit = 1ull << (idx % 64);
	for (;;) {
		if (!(cur & bit))
			return -EINVAL; /* already free: a double free (invariant (2)) */
		uint64_t old = 0;
		int rc = fab_cas1(b, node, woff, cur, cur & ~bit, &old);
		if (rc)
			return rc;
		if (old == cur)
			return 0;
		cur = old;
	}
}

/*
 * Read a block's ident and data words and its bitmap word in one round
 * trip, and check the block still is generation ref->gen and allocated.
 */
static int read_owned(struct fab_batch *b, const struct st_layout *L, const struct st_ref *ref,
		      uint64_t hd[2], uint64_t *bw, uint64_t *woff, uint64_t *bit)
{
	uint64_t s;
	uint32_t idx;
	if (st_block_locate(L, ref->off, ref->cls, &s, &idx))
		return -EINVAL;
	*woff = st_bitmap_word_off(L, s, idx);
	*bit = 1ull << (idx % 64);
	fab_read(b, ref->node, ref->off + ST_ITEM_IDENT, hd, 16);
	fab_read(b, ref->node, *woff, bw, 8);
	int rc = fab_exec(b);
	if (rc)
		return rc;
	if (st_ident_gen(hd[0]) != ref->gen || st_ident_class(hd[0]) != ref->cls ||
	    !(*bw & *bit))
		return ST_ESTALE;
	return 0;
}

int st_free(struct fab_batch *b, const struct st_layout *L, const struct st_ref *ref,
	    uint64_t held)
{
	uint64_t hd[2], bw, woff, bit;
	int rc = read_owned(b, L, ref, hd, &bw, &woff, &bit);
	if (rc)
		return rc;
	/* The lock word back to 0 before the bit (invariant (5)), in the
	 * bit clear's batch: ordered on the endpoint. */
	fab_cas(b, ref->node, ref->off + ST_ITEM_LOCK, ST_LOCK_CLAIMED, 0, NULL);
	if (held)
		fab_cas(b, ref->node, ref->off + ST_ITEM_LOCK, held, 0, NULL);
	return st_bit_clear(b, L, ref->node, ref->off, ref->cls, bw);
}

int st_retire(struct fab_batch *b, const struct st_layout *L, const struct st_ref *ref)
{
	uint64_t hd[2], bw, woff, bit;
	int rc = read_owned(b, L, ref, hd, &bw, &woff, &bit);
	if (rc)
		return rc;
	/* DEAD first, then the bit, in one batch: ordered on the endpoint
	 * (invariant (4)). vlen is kept for whoever inspects the block. */
	uint64_t data = hd[1] | ST_F_DEAD, old = 0;
	fab_write(b, ref->node, ref->off + ST_ITEM_DATA, &data, 8);
	fab_cas(b, ref->node, woff, bw, bw & ~bit, &old);
	if ((rc = fab_exec(b)))
		return rc;
	if (old == bw)
		return 0;
	return st_bit_clear(b, L, ref->node, ref->off, ref->cls, old);
}

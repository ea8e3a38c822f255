/*
 * Private to storage/: the region handle, the index slot encoding, block
 * geometry and small helpers shared by region.c, index.c, alloc.c and
 * scan.c. Nothing here is part of the st.h contract.
 */
#ifndef RCKV_ST_INTERNAL_H
#define RCKV_ST_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/st.h"

/*
 * Size classes (layout version 3): ST_NCLASSES block sizes, all multiples
 * of 16, so every block, and so every item word, is 8-aligned (CAS/FAA
 * need it) and a block offset fits a slot word as offset / 16:
 *   classes   0..11   64 to 240 bytes, 16 apart (the quantum);
 *   classes  12..75   256 bytes to 4 KiB, 16 per doubling (step 2^p/16:
 *                     16 bytes at 256, 64 at 1 KiB, 128 at 2 KiB);
 *   classes 76..116   4 KiB to 4 MiB, 4 per doubling (step 2^p/4).
 * So the bytes a block wastes on its item are under one step: at most
 * 1/16 of the block between 256 bytes and 4 KiB, where values of small
 * items mostly are (a 1,064-byte item takes 1,088 bytes; with the 1.5x
 * steps of version 2 it took 1,536), 1/4 above, where out-of-place values
 * and undo extents are and fewer classes keep fewer slabs half used (each
 * class in use holds at least one slab). 117 classes fit the 7 class bits
 * of a slot word and the 8 of an ident word.
 */
#define ST_NCLASSES 117u
#define ST_CLASS_QUANTUM 16u
#define ST_CLASS_FINE_FIRST 12u /* the class of 256 bytes */
#define ST_CLASS_WIDE_FIRST 76u /* the class of 4 KiB */
static inline uint32_t st_csize(unsigned cls)
{
	if (cls < ST_CLASS_FINE_FIRST)
		return ST_MIN_BLOCK + ST_CLASS_QUANTUM * cls;
	if (cls < ST_CLASS_WIDE_FIRST) {
		unsigned i = cls - ST_CLASS_FINE_FIRST, p = 8 + i / 16;
		return (1u << p) + (i % 16) * (1u << (p - 4));
	}
	unsigned i = cls - ST_CLASS_WIDE_FIRST, p = 12 + i / 4;
	return (1u << p) + (i % 4) * (1u << (p - 2));
}
static_assert(ST_MIN_BLOCK == 64, "class 0 is the smallest block");
static_assert(ST_SLAB_BYTES == 1u << 22, "the last class (116) is a whole slab");
static_assert(ST_NCLASSES <= 128, "a class must fit the 7 class bits of a slot word");

/* Is cls one of the coarse classes (2^k or 3*2^(k-1) bytes: layout
 * version 2's), which new slabs go to when few are left (alloc.c
 * invariant (6))? */
bool st_class_coarse(unsigned cls);
/* Unassigned slabs a fine class leaves to the coarse ones (there are 33). */
#define ST_SLAB_RESERVE 33u

/* Blocks of a class in one slab, and 64-bit bitmap words they use. */
static inline uint32_t st_cblocks(unsigned cls) { return ST_SLAB_BYTES / st_csize(cls); }
static inline uint32_t st_cwords(unsigned cls) { return (st_cblocks(cls) + 63) / 64; }

#define ST_HEADER_BYTES 4096u
#define ST_MIN_REGION (16ull << 20)
#define ST_MAX_REGION (2ull << 40) /* 37 bits of offset/16 in a slot word */

/* Byte offsets of an item's words (struct st_item). */
#define ST_ITEM_LOCK 0u
#define ST_ITEM_IDENT 32u
#define ST_ITEM_DATA 40u

/*
 * Index slot word (one of the 7 after a bucket's lock word):
 *   bits  0..36  block offset / 16 (blocks are 16-aligned: slabs are
 *                page-aligned and every class size is a multiple of 16)
 *   bits 37..43  size class
 *   bits 44..45  way: which of its key's 3 buckets this is (0 = primary)
 *   bits 46..63  tag: the low 18 bits of the key's hash
 * 0 is an empty slot; a used slot is never 0 because slabs start after the
 * header. Ways 1 and 2 of a key derive from its primary bucket and tag
 * alone (st_ways_derive), so the kick-out in index.c finds where a key may
 * move from its slot word, without reading its key.
 */
#define ST_SLOT_OFF_SHIFT 4
#define ST_SLOT_OFF_BITS 37
#define ST_SLOT_CLS_SHIFT 37
#define ST_SLOT_CLS_MASK 0x7fu
#define ST_SLOT_WAY_SHIFT 44
#define ST_SLOT_TAG_SHIFT 46
#define ST_TAG_MASK 0x3ffffu
#define ST_SLOT_WAY_MASK (3ull << ST_SLOT_WAY_SHIFT)
static_assert(ST_SLOT_CLS_SHIFT == ST_SLOT_OFF_BITS && ST_SLOT_CLS_SHIFT + 7 == ST_SLOT_WAY_SHIFT,
	      "slot fields are adjacent");
static_assert(ST_MAX_REGION == 1ull << (ST_SLOT_OFF_BITS + ST_SLOT_OFF_SHIFT), "slot offsets reach the end");
static inline uint64_t st_slot_make(uint64_t off, uint8_t cls, unsigned way, uint32_t tag)
{
	return (off >> ST_SLOT_OFF_SHIFT) | ((uint64_t)cls << ST_SLOT_CLS_SHIFT) |
	       ((uint64_t)way << ST_SLOT_WAY_SHIFT) |
	       ((uint64_t)(tag & ST_TAG_MASK) << ST_SLOT_TAG_SHIFT);
}
static inline uint64_t st_slot_off(uint64_t s)
{
	return (s & ((1ull << ST_SLOT_OFF_BITS) - 1)) << ST_SLOT_OFF_SHIFT;
}
static inline uint8_t st_slot_cls(uint64_t s)
{
	return (uint8_t)((s >> ST_SLOT_CLS_SHIFT) & ST_SLOT_CLS_MASK);
}
static inline unsigned st_slot_way(uint64_t s) { return (unsigned)(s >> ST_SLOT_WAY_SHIFT) & 3; }
static inline uint32_t st_slot_tag(uint64_t s) { return (uint32_t)(s >> ST_SLOT_TAG_SHIFT); }
static inline uint64_t st_slot_set_way(uint64_t s, unsigned way)
{
	return (s & ~ST_SLOT_WAY_MASK) | ((uint64_t)way << ST_SLOT_WAY_SHIFT);
}
/* Same block and tag, whichever way the slot is in. */
static inline bool st_slot_same(uint64_t a, uint64_t b) { return ((a ^ b) & ~ST_SLOT_WAY_MASK) == 0; }

/* The 3 buckets of a key (distinct; b[0] is its primary) and its tag. */
struct st_ways {
	uint64_t b[ST_WAYS];
	uint32_t tag;
};
/* From the key's hash. */
void st_ways_of(const struct st_layout *L, uint64_t hash, struct st_ways *w);
/* From the primary bucket and the tag (what a slot word knows). */
void st_ways_derive(const struct st_layout *L, uint64_t b0, uint32_t tag, struct st_ways *w);
/* From a used slot word found in `bucket`. */
void st_ways_of_slot(const struct st_layout *L, uint64_t bucket, uint64_t s, struct st_ways *w);
static inline uint64_t st_bucket_off(const struct st_layout *L, uint64_t bucket)
{
	return L->index_off + bucket * 64;
}

/*
 * Where a block is: slab number and block number in the slab. Returns 0, or
 * -1 when (off, cls) cannot be a block of this layout (a torn or corrupt
 * slot word, a forged ref): callers never touch such an offset.
 */
static inline int st_block_locate(const struct st_layout *L, uint64_t off, unsigned cls,
				  uint64_t *slab, uint32_t *idx)
{
	if (cls >= ST_NCLASSES || off < L->slab_off)
		return -1;
	uint64_t rel = off - L->slab_off;
	uint64_t s = rel / ST_SLAB_BYTES;
	uint32_t in = (uint32_t)(rel % ST_SLAB_BYTES);
	uint32_t size = st_csize(cls);
	if (s >= L->slab_count || in % size != 0 || in / size >= st_cblocks(cls))
		return -1;
	*slab = s;
	*idx = in / size;
	return 0;
}
static inline uint64_t st_bitmap_word_off(const struct st_layout *L, uint64_t slab, uint32_t idx)
{
	return L->bitmap_off + slab * ST_SLAB_BITMAP_BYTES + (uint64_t)(idx / 64) * 8;
}

/*
 * Is `ident` (read from a block at a slot of class cls) a sane item of
 * that class? Bounds the key so that a torn or recycled block can never
 * make a reader run past the block.
 */
static inline int st_ident_sane(uint64_t ident, unsigned cls)
{
	return st_ident_class(ident) == cls &&
	       sizeof(struct st_item) + (uint64_t)st_ident_klen(ident) <= st_csize(cls);
}

/* Fresh generation for a block whose previous ident word was `old`: never
 * equal to the previous occupant's, never 0 (0 = "no generation"). */
static inline uint32_t st_next_gen(uint64_t old)
{
	uint32_t g = st_ident_gen(old) + 1;
	return g ? g : 1;
}

/* Layout of a region of `size` bytes. Returns 0, or ST_ECORRUPT with the
 * reason in err when the size cannot hold a region. */
int st_layout_compute(uint64_t size, unsigned log_nodes, struct st_layout *L, char *err,
		      size_t errlen);

/* Bitmap words the allocator reads per round trip: 512 bytes, 4096
 * blocks of 64 bytes. */
#define ST_CHUNK_WORDS 64

/* The allocator's first reads, queued ahead on someone else's round trip
 * (st_create's lock batch) by st_alloc_prefetch. */
struct st_alloc_pf {
	uint64_t slab;
	uint32_t word, n;
	uint64_t tab;
	uint64_t words[ST_CHUNK_WORDS];
};
/* Queue (not execute) the READs st_alloc_block(cls) would start with. */
void st_alloc_prefetch(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned cls,
		       struct st_alloc_pf *pf);

/*
 * Take a free block of class *cls on a node (alloc.c), or, when that fine
 * class has no free block and no slab to spare (alloc.c invariant (6)), of
 * the smallest coarse class above it: *cls is then that class. Does not
 * write the ident word: *old_ident receives the block's previous ident so
 * the caller picks st_next_gen() and writes the ident itself (st_alloc, or
 * the placeholder WRITE of st_create). pf: reads done by st_alloc_prefetch
 * and executed since, or NULL.
 */
int st_alloc_block(struct fab_batch *b, const struct st_layout *L, uint16_t node, unsigned *cls,
		   const struct st_alloc_pf *pf, uint64_t *off, uint64_t *old_ident);

/* Give back block (off, cls) whose bitmap word was read as `cur`. */
int st_bit_clear(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t off,
		 unsigned cls, uint64_t cur);

/* Suspend the caller at least ns nanoseconds (the batch's waiter, or sleep). */
void st_pause(struct fab_batch *b, uint64_t ns);

/*
 * st.h's handle of a calling coordinator. L and node are set by
 * st_region_open and never change; persist and persist_arg are written by
 * st_region_set_persister on the main thread while no operation uses the
 * handle (workers not started, or stopped: thread start and join order
 * them), and read by the node's own workers.
 */
struct st_coord {
	const struct st_layout *L; /* its region's layout (every node's is the same) */
	uint16_t node;             /* bits 56..63 of the bucket locks it takes */
	st_persist_fn persist;     /* NULL: none */
	void *persist_arg;
};

struct st_region {
	char *base;                /* the mapping (pmem_map_file) */
	size_t mapped_len;
	struct st_layout layout;   /* copy of the header's, fixed after open */
	struct st_coord coord;     /* this node as a coordinator (st_region_coord) */
	enum st_persistence persistence;
	int is_pmem;               /* pmem_is_pmem() of the mapping, asked once */
	int fd;                    /* held open for flock() and hole punching */
	bool reopened;             /* the file held a region at open */
	bool was_clean;            /* its header said clean_shutdown = 1 */
	bool unlink_at_close;      /* persistence none, power-sim: the /dev/shm file */
	char path[PATH_MAX];
	/* power-sim (st.h): base maps the volatile copy at path; fd is the
	 * volatile file (hole punching must change the mapping); the durable
	 * file is sim_fd, at sim_path, and holds the flock (invariant (3)).
	 * sim_lock serializes copies (region.c invariant (4)) and guards
	 * sim_persists. */
	bool sim;
	int sim_fd;
	uint64_t sim_crash_after;
	uint64_t sim_persists;
	char *sim_buf;             /* bounce buffer of the copies, under sim_lock */
	pthread_mutex_t sim_lock;
	char sim_path[PATH_MAX];
	/* The write-ahead log (wal.c): base maps the volatile copy at path;
	 * the checkpoint is wal_path. lock_fd holds <dir>/node-<id>.lock. */
	struct st_wal *wal;
	char wal_path[PATH_MAX];
	int lock_fd;
};

/* wal.c, for region.c: replay dir's segments of node onto base (from its
 * header's wal_gen); the next segment number goes to *next_gen. */
int st_wal_replay_dir(const char *dir, unsigned node, char *base, uint64_t size,
		      uint64_t *next_gen, struct st_wal_stats *st, char *err, size_t errlen);
/* The number the next segment takes after the checkpoint whose log starts
 * at gen (the segments there are kept, not replayed: a taken copy). */
uint64_t st_wal_next_gen(const char *dir, unsigned node, uint64_t gen);
int st_wal_init(struct st_region *r, const struct st_config *cfg, uint64_t next_gen,
		const struct st_wal_stats *replayed, char *err, size_t errlen);
void st_wal_close(struct st_region *r, bool clean);
/* Note [off, off + len) as it is now in the log (st_region_persist on a
 * region with a write-ahead log, once it started). */
void st_wal_note_range(struct st_region *r, uint64_t off, uint64_t len);
/* Remove dir's log segments of node numbered below gen. */
void st_wal_remove_segments_below(const char *dir, unsigned node, uint64_t gen);
/* pwrite all of buf at off (retrying short writes and EINTR): 0 or -errno. */
int st_pwrite_all(int fd, const char *buf, uint64_t len, uint64_t off);

#endif

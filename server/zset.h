/*
 * zset: the storage of a sorted set, on server/coll.h's pieces.
 *
 * A sorted set is two structures kept in step by every change:
 *  - the DICT, a coll (TXN_T_ZSET, elements with values): member -> score,
 *    the score as its 8 IEEE-754 bytes, little-endian. ZSCORE, ZMSCORE,
 *    membership and ZSCAN read only this, as HGET does.
 *  - the ORDER, the elements sorted by (score, member bytes), cut into
 *    CHUNKS, listed by LEAVES, listed by the TOP. While the dict is inline
 *    (128 elements, 4 KiB: coll.h) the order is not stored at all: a
 *    command that needs it sorts the inline root it already read (one
 *    leaf of one chunk, built in memory, never written), as Redis's
 *    listpack is one flat run. When the dict becomes bucketed the order
 *    is written, for good, as parts of the same gen:
 *      chunk part (id ZS_CHUNK_BASE + k): elements in order, each
 *                 f64 score (8 bytes LE) | varint len | member;
 *                 at most ZS_CHUNK_BYTES (a chunk past it splits in two;
 *                 one under a quarter merges into its successor in the
 *                 same leaf when both fit; an empty one is deleted);
 *      leaf part  (id ZS_LEAF_BASE + l): u32 nchunks | per chunk in
 *                 order: u32 k | u32 count | its first element (as in a
 *                 chunk); at most ZS_LEAF_BYTES (then it splits in two;
 *                 an empty one is deleted);
 *      top part   (id ZS_INDEX_ID): u32 nleaves | u32 next k | u32 next
 *                 l | per leaf in order: u32 l | u32 count | its first
 *                 element.
 *
 * Why: a ZADD, ZINCRBY or ZREM on a big zset reads and writes the root
 * (32 bytes), one dict bucket (~16 elements), the top (~25 bytes a leaf),
 * one leaf and one chunk (a few more at a split or merge): each level is
 * a binary search by first element, and a rank is a sum of the counts on
 * the way down. ZRANGE start stop, ZRANK, ZRANGEBYSCORE/BYLEX and ZCOUNT
 * read the top and only the leaves and chunks their ranks fall in (read
 * ahead in one round per level: zs_prefetch). 2 KB chunks and leaves:
 * well under the 4 KiB past which a value goes out of place (storage/st.h),
 * and small enough that an op moves a few KB: at 100,000 members (~1,000
 * chunks, ~15 leaves; the zset ~3.6 MB) a ZADD reads ~11 KB and writes
 * ~8 KB as the fabric counts them (README); 3.5 KB parts cost ~30% more a
 * op, and a scan of the whole zset half as many parts. The top grows by
 * ~25 bytes per ~60 chunks (~6,000 members).
 *
 * Invariants (besides coll.h's, which chunks, leaves and top obey as
 * parts: written only by a transaction that read the root holding their
 * gen; garbage once no root holds it):
 *  (1) The dict and the order hold the same (member, score) pairs.
 *  (2) A bucketed dict has a top part, leaves and chunks (unless the zset
 *      is empty, and then the root is gone too); an inline one has none.
 *  (3) Chunks in leaf order, leaves in top order, are sorted runs, each
 *      before the next; no chunk and no leaf is empty; an entry's count
 *      and first element are its chunk's (leaf's).
 *
 * Threads: a zset belongs to the coroutine running its transaction.
 */
#ifndef RCKV_SRV_ZSET_H
#define RCKV_SRV_ZSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/coll.h"

#define ZS_CHUNK_BASE 0x80000000u /* chunk part ids: above every bucket id */
#define ZS_LEAF_BASE 0xc0000000u  /* leaf part ids: above every chunk id */
#define ZS_INDEX_ID 0xfffffffeu   /* the top */
#define ZS_CHUNK_BYTES 2048 /* a chunk's value at most, before a split */
#define ZS_LEAF_BYTES 2048  /* a leaf's value at most, before a split */

struct zs_leaf;

struct zset {
	struct coll d;   /* member -> score */
	bool chunked;    /* d is bucketed: the order lives in parts */
	bool ordered;    /* lf[] is valid (the top read, or the view built) */
	bool idx_dirty;  /* the top must be written */
	uint32_t next_k, next_leaf; /* ids for new chunks and leaves */
	struct zs_leaf *lf; /* in order; each loaded when first needed */
	int nlf, lfcap;
	uint32_t *gone; /* part ids to delete at zs_save */
	int ngone, gonecap;
};

/* An element handed out by zs_walk (m points into the zset's buffers,
 * valid until its next change). */
struct zs_elem {
	double score;
	const char *m;
	size_t ml;
};

/*
 * zs_open - read key's root in t as a sorted set, with Redis's listpack
 * limits (zset-max-listpack-entries, -value) for OBJECT ENCODING. A
 * missing key opens empty (z->d.exists false); another type gives
 * COLL_EWRONGTYPE. 0, CC_ABORT or an error; zs_free it in every case.
 */
int zs_open(struct txn *t, const char *key, size_t klen, uint64_t entries, uint64_t value,
	    struct zset *z);
/* An empty sorted set at key, not read (a STORE destination). */
void zs_init(struct zset *z, struct txn *t, const char *key, size_t klen, uint64_t entries,
	     uint64_t value);
void zs_free(struct zset *z);
static inline uint64_t zs_len(const struct zset *z)
{
	return coll_len(&z->d);
}
/* A member's score (dict only). */
int zs_score(struct zset *z, const char *m, size_t ml, double *score, bool *found);
/* Insert, or move member to score (same score: nothing written);
 * *added: it was new. */
int zs_put(struct zset *z, const char *m, size_t ml, double score, bool *added);
int zs_del(struct zset *z, const char *m, size_t ml, bool *removed);

/* A monotone predicate over the order: true for a prefix of it. */
typedef bool (*zs_pred)(void *arg, double score, const char *m, size_t ml);
/* How many elements satisfy pred (the length of its prefix). */
int zs_count_prefix(struct zset *z, zs_pred pred, void *arg, uint64_t *n);
/* Elements from rank `from` on (0: the lowest), upwards, or downwards
 * with rev; fn returns non-zero to stop. */
typedef int (*zs_elem_fn)(void *arg, const struct zs_elem *e);
int zs_walk(struct zset *z, uint64_t from, bool rev, zs_elem_fn fn, void *arg);

/* Read ahead the leaves and chunks that ranks [lo, hi) fall in, one fetch
 * round for each level (cc_fetch_more), so that a zs_walk over them costs
 * no round trip per chunk; write: they are about to change. */
int zs_prefetch(struct zset *z, uint64_t lo, uint64_t hi, bool write);
/* Write what changed: coll_save, then chunks, leaves, deleted parts, the top. */
int zs_save(struct zset *z);

/* MEMORY USAGE's part: the dict's parts (coll_usage) and the order's. */
int zs_usage(struct zset *z, uint64_t samples, uint64_t *bytes);
/* COPY of a bucketed zset root: coll_copy_parts, then top, leaves, chunks. */
int zs_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		  char **nv, size_t *nvl);

/* Score bytes in the dict. */
void zs_score_put(char out[8], double s);
double zs_score_get(const char *p);

#endif

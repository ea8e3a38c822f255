/*
 * list: Redis lists stored as a root item and, past a size, chunk parts
 * (storage/st.h's "Collections" section gives the reasons; server/coll.h
 * the part keys, the owner and the garbage collection this reuses).
 *
 * A list is a sequence of SEGMENTS, each a run of elements encoded as
 * coll.h's element lists (LEB128 length, bytes; no values):
 *   inline:  the root's value is  u8 enc=1 | u8 0 | u16 0 | u32 count |
 *            elements  -- one segment, one item, as coll's inline form
 *            (up to COLL_INLINE_MAX elements and COLL_INLINE_BYTES).
 *   chunked: the root's value is  u8 enc=3 | u8 0 | u16 slot |
 *            u32 nchunks | u64 gen | u64 count | u32 next_id | u32 0 |
 *            u32 head_id | u32 head_n | u32 tail_id | u32 tail_n
 *            (48 bytes): the first and last chunk and their counts; the
 *            INDEX part (id LIST_INDEX_ID) holds every chunk, head to tail,
 *            as nchunks x { u32 id, u16 n }. Each chunk is a part item
 *            (coll_part_key(slot, gen, id)) of about LIST_CHUNK_BYTES of
 *            elements. The owner part (COLL_OWNER_ID) names the root, as
 *            for a bucketed hash.
 * Why: a push or a pop reads and writes the root (48 bytes) and the chunk
 * at that end, nothing else, however long the list: the end chunks'
 * counts live in the root, so the index is not touched. Only when a push
 * opens a new chunk or a pop empties one is the index read and written
 * (once every ~LIST_CHUNK_BYTES of pushes). LINDEX, LSET and LRANGE read
 * the root, the index (6 bytes a chunk: ~3.5 KB for 100,000 short
 * elements) and only the chunks they need, found by summing the counts;
 * LTRIM deletes the chunks outside the range unread. README has the
 * measured cost. A list never converts back to inline (as a bucketed
 * coll); chunks emptied by LREM or LTRIM are deleted, small neighbours
 * are not merged.
 *
 * Invariants (besides coll.h's (1) and (2), which chunks keep: they are
 * written only by transactions that read the root, and the owner exists
 * exactly while the root is chunked):
 *  (1) count is the sum of the chunks' counts, and every count > 0 after
 *      list_save. The index's counts are exact for the chunks between
 *      the ends; for the head and the tail the root's head_n and tail_n
 *      are (a push or pop at an end rewrites only the root). With two
 *      chunks or fewer the root alone describes the list and the index
 *      part is not read (it may be stale or absent);
 *  (2) a chunk holds at most LIST_CHUNK_MAX elements after list_save, and
 *      more than LIST_CHUNK_BYTES bytes only when list_save split it into
 *      halves already or it holds a single element;
 *  (3) chunk ids are never reused within a gen: next_id only grows.
 *
 * Threads: a list belongs to the coroutine running its transaction.
 */
#ifndef RCKV_SRV_LIST_H
#define RCKV_SRV_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/coll.h"

struct txn;

#define LIST_ENC_CHUNKED 3
#define LIST_ROOT_HDR 48
#define LIST_INDEX_ID 0xfffffffeu /* the index part's id (the owner's minus one) */
#define LIST_INDEX_ENT 6
#define LIST_CHUNK_BYTES 2048 /* a chunk is closed for pushes past this */
#define LIST_CHUNK_MAX 1024   /* elements a chunk holds at most (fits the u16 n) */

struct list_seg {
	uint32_t id; /* chunk id (0 for the inline segment) */
	uint32_t n;  /* elements */
	int buf;     /* index in list.buf once loaded, -1 before */
};

struct list_buf {
	uint32_t id;
	bool dirty;
	struct coll_ebuf b;
};

struct list {
	struct txn *t;
	const char *key; /* the caller's, alive as long as the list */
	size_t klen;
	bool exists;  /* the key held a list when opened */
	bool dirty;   /* the root must be written */
	int64_t expire_ms;
	uint8_t enc;  /* COLL_ENC_INLINE or LIST_ENC_CHUNKED */
	uint16_t slot;
	uint64_t gen, count;
	uint32_t next_id;
	/* partial: only the ends are known (seg[0] the head, seg[1] the
	 * tail) until ix_load reads the index part; nchunks: the real count
	 * of chunks then */
	bool partial;
	uint32_t nchunks;
	struct list_seg *seg; /* head to tail */
	uint32_t nseg, segcap;
	struct list_buf *buf;
	int nbuf, bufcap;
	uint32_t *gone; /* chunk ids to delete at list_save */
	int ngone, gonecap;
};

/*
 * list_open - read key's root in t. A missing key opens as an empty list
 * (l->exists false); another type gives COLL_EWRONGTYPE. 0, CC_ABORT or an
 * error; list_free in every case.
 */
int list_open(struct txn *t, const char *key, size_t klen, struct list *l);
void list_free(struct list *l);
static inline uint64_t list_len(const struct list *l)
{
	return l->count;
}
/* Push one element at the head (left) or the tail. */
int list_push(struct list *l, bool left, const char *v, size_t vl);
/* Pop one element (the list is not empty) into *v (malloc'd, *vl bytes;
 * NULL when it fails). */
int list_pop(struct list *l, bool left, char **v, size_t *vl);
/* The element at index i (0 <= i < len): *v points into the list's
 * buffers, valid until its next change. */
int list_get(struct list *l, uint64_t i, const char **v, size_t *vl);
/* Replace the element at i (0 <= i < len). */
int list_set(struct list *l, uint64_t i, const char *v, size_t vl);
/* Insert before index i (0 <= i <= len; len appends). */
int list_insert(struct list *l, uint64_t i, const char *v, size_t vl);
/*
 * list_walk - give the elements from index `from` on (backwards towards 0
 * when `back`) to fn(arg, index, v, vl) until it returns non-zero (then 0
 * is returned too) or the end. Reads each chunk as it is reached.
 */
typedef int (*list_elem_fn)(void *arg, uint64_t i, const char *v, size_t vl);
int list_walk(struct list *l, uint64_t from, bool back, list_elem_fn fn, void *arg);
/*
 * list_rem - LREM: remove elements equal to v, at most `limit` (0: all),
 * from the head (or from the tail when `back`). *removed: how many.
 */
int list_rem(struct list *l, const char *v, size_t vl, uint64_t limit, bool back,
	     uint64_t *removed);
/* LTRIM: keep [start, stop] (0 <= start <= stop < len), or nothing when
 * `none`. Chunks wholly outside are deleted without being read. */
int list_trim(struct list *l, uint64_t start, uint64_t stop, bool none);
/*
 * list_save - write what changed: the root (deleted with its owner and
 * every chunk when the list is empty, as Redis deletes an empty list),
 * every changed chunk (split past LIST_CHUNK_BYTES x 2 or LIST_CHUNK_MAX),
 * the deleted ones. An inline list past the inline limits becomes chunked.
 * `touch`: write the root even if nothing changed (LTRIM's event).
 */
int list_save(struct list *l, bool touch);
/* MEMORY USAGE's parts: the chunks' and owner's bytes, from `samples`
 * chunks spread over the index scaled to all (0: every chunk). */
int list_usage(struct list *l, uint64_t samples, uint64_t *bytes);
/* COPY/RESTORE of a chunked root v (see coll_copy_parts). */
int list_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		    char **nv, size_t *nvl);
/* The gen and slot of a chunked root value; false for anything else. */
bool list_root_gen(const char *v, size_t vl, uint64_t *gen, uint16_t *slot);

#endif

/*
 * coll: collections (hashes and sets; lists, server/list.h, reuse layer (a)
 * and the element lists of (b); sorted sets will build on the same pieces)
 * stored as a root item and, past a size, part items.
 * storage/st.h's "Collections" section gives the layout and why; this is
 * the code every collection command goes through.
 *
 * Three layers, each usable alone:
 *  (a) part keys and the owner item (coll_part_key, coll_part_parse,
 *      COLL_OWNER_ID) and the garbage collection of orphaned parts
 *      (coll_gc_gen, run by server/expire.c): any collection type that
 *      keeps parts under a root with a gen gets both for free, provided
 *      (invariant (1) below) it writes parts only in transactions that
 *      read its root;
 *  (b) element lists (struct coll_ebuf): a run of elements, each a field
 *      and, for a hash, a value, length-prefixed (LEB128 varints): the
 *      value of an inline root after its header, and of each bucket part;
 *  (c) the dict (struct coll): a set of fields, with values or without,
 *      inline in the root or bucketed by linear hashing of st_hash(field),
 *      read and changed through the transaction: coll_open, coll_get,
 *      coll_put, coll_remove, coll_foreach, coll_scan, coll_random,
 *      coll_save. Hashes and sets are dicts; a sorted set's member ->
 *      score map can be one too.
 *
 * Root value (after the expiry, which txn_meta keeps):
 *   inline:   u8 enc=1 | u8 flags | u16 0 | u32 count | elements
 *   bucketed: u8 enc=2 | u8 flags | u8 level | u8 0 | u16 slot | u16 0 |
 *             u32 split | u32 0 | u64 gen | u64 count        (32 bytes)
 * flags: COLL_F_BIG, Redis's one-way conversion to a hashtable (OBJECT
 * ENCODING), independent of rckv's own inline/bucketed choice.
 * A bucket part (id b < nbuckets) holds the elements of bucket b; an
 * empty bucket has no item. The owner part (COLL_OWNER_ID) holds the
 * root's key name.
 *
 * Invariants:
 *  (1) A part of gen G is written (created, changed, deleted) only by a
 *      transaction that read a root holding gen G; coll_gc_gen deletes
 *      parts only in a transaction that read the owner and the root named
 *      there and found no root holding G. A gen is never reused (txn_unique:
 *      a new one for every new incarnation: conversion, COPY, RESTORE;
 *      the same in every attempt of one transaction, so calvin's OLLP
 *      learns the part keys). Together: a committed part whose gen no root holds can
 *      never be reached again, and collecting it is safe under any
 *      concurrent writer (serializability orders the two).
 *  (2) The owner exists exactly while the root is bucketed: created with
 *      the conversion, rewritten by RENAME in the same transaction, and
 *      deleted with the last element. A part without an owner is garbage.
 *  (3) count is the number of elements in all buckets; nbuckets =
 *      2^level + split, split < 2^level.
 *
 * Pointers that coll_get, coll_foreach and coll_random give point into the
 * coll's own buffers: valid until the next change to the coll.
 *
 * Threads: a coll belongs to the coroutine running its transaction.
 */
#ifndef RCKV_SRV_COLL_H
#define RCKV_SRV_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement/placement.h"

struct txn;

/* A key holds another type than the command works on: WRONGTYPE. A
 * txn-style error (cmd_reply_txn_error replies Redis's text for it). */
#define COLL_EWRONGTYPE (-3100)
/* A root or part that does not parse (never written by rckv). */
#define COLL_ECORRUPT (-3101)

#define COLL_WRONGTYPE_MSG "WRONGTYPE Operation against a key holding the wrong kind of value"

#define COLL_ENC_INLINE 1
#define COLL_ENC_BUCKETED 2
#define COLL_F_BIG 0x01u /* Redis would hold it as a hashtable by now (its
			    hash-max-listpack-entries and -value,
			    set-max-intset-entries: coll_set_limits) */

#define COLL_OWNER_ID 0xffffffffu
#define COLL_ROOT_BUCKETED_LEN 32

/* rckv's own thresholds (storage/st.h says why these). */
#define COLL_INLINE_MAX 128     /* elements an inline root holds at most */
#define COLL_INLINE_BYTES 4096  /* bytes of an inline root's value at most */
#define COLL_LOAD 16            /* elements per bucket before a split */

/* ---- (a) part keys, owner, garbage ---- */

void coll_part_key(char out[PL_PART_KEYLEN], uint16_t slot, uint64_t gen, uint32_t id);
/* A part key's fields; false when key is not a part key. */
bool coll_part_parse(const char *key, size_t klen, uint16_t *slot, uint64_t *gen, uint32_t *id);
/* The gen of a bucketed root's value (as read, after any expiry); false
 * for an inline root or bytes that are not a root. Pure (the expiry scan
 * calls it on values it reads without a transaction). */
bool coll_root_gen(const char *v, size_t vlen, uint64_t *gen);
/*
 * coll_gc_gen - in transaction t, delete the parts `ids` (n of them) of
 * gen `gen` at slot `slot` if no root holds that gen any more: the owner
 * is absent, or the key it names is absent (or expired), not a
 * collection, or holds another gen. *collected: parts deleted. 0,
 * CC_ABORT or an error.
 */
int coll_gc_gen(struct txn *t, uint16_t slot, uint64_t gen, const uint32_t *ids, int n,
		int *collected);

/* ---- (b) element lists ---- */

struct coll_ebuf {
	char *p;
	size_t len, cap;
	uint32_t n; /* elements */
};

struct coll_elem {
	const char *f, *v;
	size_t fl, vl;
	size_t off, len; /* the element's bytes in its list */
};

/* The element at *off (advanced past it); false at the end. The list
 * was checked when loaded (coll_ebuf_check). */
bool coll_ebuf_next(const struct coll_ebuf *b, bool vals, size_t *off, struct coll_elem *e);
/* Does bytes [p, p+len) parse as a list of elements? *n: how many. */
bool coll_ebuf_check(const char *p, size_t len, bool vals, uint32_t *n);

/* ---- (c) the dict ---- */

struct coll_bucket;

struct coll {
	struct txn *t;
	const char *key; /* the caller's, alive as long as the coll */
	size_t klen;
	uint8_t type;    /* enum txn_type */
	bool vals;       /* elements have values (a hash) */
	bool exists;     /* the key held a collection when opened */
	bool dirty;      /* the root must be written */
	int64_t expire_ms;
	uint8_t enc, flags;
	/* Redis's encoding thresholds (COLL_F_BIG): coll_open sets Redis's
	 * defaults, coll_set_limits the server's. */
	uint64_t big_entries, big_value;
	struct coll_ebuf in; /* inline: the elements */
	/* bucketed */
	uint16_t slot;
	uint8_t level;
	uint32_t split;
	uint64_t gen, count;
	struct coll_bucket *bk; /* buckets read or written in this transaction */
	int nbk, bkcap;
};

/*
 * coll_open - read key's root in t. type: the type the command works on
 * (TXN_T_HASH, TXN_T_SET); vals: its elements have values. A key that
 * does not exist opens as an empty inline collection (c->exists false);
 * one of another type gives COLL_EWRONGTYPE. 0, CC_ABORT or an error;
 * coll_free it in every case.
 */
int coll_open(struct txn *t, const char *key, size_t klen, uint8_t type, bool vals,
	      struct coll *c);
/* An empty inline collection at key, not read: one that replaces whatever
 * the key held (SINTERSTORE's destination). */
void coll_init(struct coll *c, struct txn *t, const char *key, size_t klen, uint8_t type,
	       bool vals);
void coll_free(struct coll *c);
/* Redis's thresholds for COLL_F_BIG: a hash's hash-max-listpack-entries
 * and -value, a set's set-max-intset-entries (value unused). */
void coll_set_limits(struct coll *c, uint64_t entries, uint64_t value);
/* Elements now. */
static inline uint64_t coll_len(const struct coll *c)
{
	return c->enc == COLL_ENC_BUCKETED ? c->count : c->in.n;
}
/* Buckets of a bucketed coll (0 for inline). */
uint64_t coll_nbuckets(const struct coll *c);
int coll_get(struct coll *c, const char *f, size_t fl, const char **v, size_t *vl, bool *found);
/* Insert or replace; *added: it was new. */
int coll_put(struct coll *c, const char *f, size_t fl, const char *v, size_t vl, bool *added);
int coll_remove(struct coll *c, const char *f, size_t fl, bool *removed);
/* Every element, in bucket order; fn returns non-zero to stop (then
 * coll_foreach returns 0). */
typedef int (*coll_elem_fn)(void *arg, const struct coll_elem *e);
int coll_foreach(struct coll *c, coll_elem_fn fn, void *arg);
/*
 * coll_scan - HSCAN/SSCAN's step: from *cursor (0 to start) visit whole
 * buckets until at least `count` elements were given or the end; *cursor
 * becomes the next bucket (0: done). Inline: everything, then 0. An
 * element present throughout a full scan is given at least once (buckets
 * only ever split forward: see coll.c).
 */
int coll_scan(struct coll *c, uint64_t *cursor, uint64_t count, coll_elem_fn fn, void *arg);
/* A random element (the coll is not empty): a random bucket that is not
 * empty, then a random element of it. rnd: the caller's random bits. */
int coll_random(struct coll *c, uint64_t rnd, struct coll_elem *e);
/*
 * coll_usage - MEMORY USAGE's part: *bytes, the MemStore bytes of the
 * collection's parts (its buckets and owner; 0 inline), from the first
 * `samples` buckets scaled to all of them (samples 0: every bucket).
 */
int coll_usage(struct coll *c, uint64_t samples, uint64_t *bytes);
/*
 * coll_save - write what changed: the root (deleted, with its owner, when
 * the last element went, as Redis deletes an empty collection), and every
 * bucket changed (an empty one deleted). Nothing when nothing changed.
 */
int coll_save(struct coll *c);
/*
 * coll_copy_parts - COPY's and RESTORE's second incarnation: write the
 * bucketed root value v of key `from` (read in t) as a new collection at
 * `to` with a new gen, every part copied; *nv, *nvl: the new root value
 * (malloc'd, the caller writes it with its meta and frees it). 0, CC_ABORT
 * or an error.
 */
int coll_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		    char **nv, size_t *nvl);
/* RENAME of a bucketed root: the owner names `to` now. */
int coll_rename_owner(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen);

/* Every element, collected (pointers into the coll's buffers, valid
 * until its next change); free a->e. 0, CC_ABORT or an error. */
struct coll_elems {
	struct coll_elem *e;
	size_t n, cap;
};
int coll_collect(struct coll *c, struct coll_elems *a);

/* The encoding Redis 7.0 would report for this collection. */
const char *coll_redis_encoding(const struct coll *c);
/* The same from a root's stored value (OBJECT ENCODING). */
const char *coll_encoding_of(uint8_t type, const char *v, size_t vl);

#endif

/*
 * placement: which nodes hold a key (DESIGN.md section 7). The one module
 * that knows how keys map to slots and slots to nodes; the server, cc and
 * the client library (client/) all ask it, so they always agree.
 *
 *  - pl_keyslot: Redis Cluster's function: CRC-16/XMODEM (polynomial
 *    0x1021, initial value 0, no reflection) of the key, or of the part
 *    between its first '{' and the next '}' when that part is not empty
 *    (a hash tag), modulo 16384. Users can predict placement with the
 *    usual tools.
 *  - struct pl_map: an immutable map from slot to replica set, the
 *    primary first (`replicas` N: N nodes per set). The rest of rckv asks
 *    for the primary, or for the set, and never assumes the count.
 *  - struct pl_table: the map a node uses now. A new configuration
 *    replaces it whole while workers read it (pl_publish); readers hold a
 *    Concurrency Kit epoch section (one ck_epoch record per reader thread,
 *    pl_reader_get), and the old map is freed through ck_epoch_call once no
 *    section that could have seen it is open (DESIGN.md section 3).
 *
 * Threads: pl_keyslot and the pl_map readers are safe anywhere; a
 * pl_table is published by one thread at a time (pl_publish serializes),
 * read by any thread that holds a section on its own record, or holds
 * pl_table_lock (threads without a record: the control plane).
 */
#ifndef RCKV_PLACEMENT_H
#define RCKV_PLACEMENT_H

#include <ck_epoch.h>
#include <ck_pr.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PL_SLOTS 16384
#define PL_MAX_NODES 64     /* node ids 1..63 */
#define PL_MAX_REPLICAS 8   /* nodes in one replica set */
#define PL_MAX_READERS 128  /* ck_epoch records per table */

uint16_t pl_crc16(const void *buf, size_t len);
/*
 * Part keys: the internal items of a collection too big to live in one
 * item (storage/st.h, "Collections"). A part key is exactly PL_PART_KEYLEN
 * bytes:
 *   PL_PART_PREFIX (6 bytes: 0xff 'r' 'c' 'k' 'v' 0x00) | u16 slot |
 *   u64 gen | u32 part id          (integers little-endian)
 * where slot is the slot of the collection's key when it was created. Its
 * slot is that embedded slot, not a hash of its bytes, so every part lives
 * on the nodes of the collection's key (its root). Clients cannot name
 * keys with the prefix (dispatch refuses them), so no user key is ever
 * taken for a part.
 */
#define PL_PART_PREFIX "\xffrckv\x00"
#define PL_PART_PREFIX_LEN 6
#define PL_PART_KEYLEN 20
/* Does a key start with the reserved prefix (a part key, or a key that
 * clients may not use)? */
static inline bool pl_reserved_key(const char *key, size_t len)
{
	return len >= PL_PART_PREFIX_LEN && __builtin_memcmp(key, PL_PART_PREFIX,
							     PL_PART_PREFIX_LEN) == 0;
}
/* Is it a part key (the prefix, and exactly PL_PART_KEYLEN bytes)? */
static inline bool pl_part_key(const char *key, size_t len)
{
	return len == PL_PART_KEYLEN && pl_reserved_key(key, len);
}
/* The slot of a key, hash tags honoured; a part key's embedded slot. */
unsigned pl_keyslot(const char *key, size_t len);

/* A replica set: n distinct node ids, node[0] the primary. */
struct pl_set {
	uint8_t n;
	uint16_t node[PL_MAX_REPLICAS];
};

/* Immutable once built; replaced whole, never edited in place. */
struct pl_map {
	uint64_t epoch;                  /* configuration epoch it belongs to */
	int replicas;                    /* nodes in the largest set */
	int nnodes;
	uint16_t nodes[PL_MAX_NODES];    /* member ids, ascending */
	int nsets;
	struct pl_set sets[PL_MAX_NODES];
	uint8_t slot_set[PL_SLOTS];      /* index into sets[] */
	ck_epoch_entry_t reclaim;        /* pl_publish frees an old map through it */
};

/*
 * pl_map_spread - a map over `nnodes` member ids (any order; kept
 * ascending), the slots spread evenly in id order, each slot's set made of
 * `replicas` consecutive members starting at its primary (1 <= replicas <=
 * min(nnodes, PL_MAX_REPLICAS)). NULL on a bad argument or no memory.
 */
struct pl_map *pl_map_spread(const uint16_t *ids, int nnodes, int replicas, uint64_t epoch);
void pl_map_free(struct pl_map *m);

/*
 * pl_map_derive - `base` under configuration `epoch` (bit i of a mask:
 * node i): the nodes of `out` leave every set; each set then lists, in
 * base order, its members in no mask, then those in `late` (complete
 * copies, not yet moved back to their place: a rebalance clears it), then
 * those in `joining` (still copying: written by every commit, never the
 * primary). So a dead primary's first live backup takes its place. A set
 * left with no member outside `joining` is kept whole: its slots stay
 * unavailable rather than move to a node without their data. NULL if
 * out of memory.
 */
struct pl_map *pl_map_derive(const struct pl_map *base, uint64_t out, uint64_t late,
			     uint64_t joining, uint64_t epoch);
/* Whether node id holds a copy of some slot in m. */
bool pl_map_holds(const struct pl_map *m, uint16_t id);

static inline const struct pl_set *pl_slot_set(const struct pl_map *m, unsigned slot)
{
	return &m->sets[m->slot_set[slot % PL_SLOTS]];
}
static inline uint16_t pl_slot_primary(const struct pl_map *m, unsigned slot)
{
	return pl_slot_set(m, slot)->node[0];
}
/* The node that holds a key's CC metadata and locks. */
static inline uint16_t pl_primary(const struct pl_map *m, const char *key, size_t len)
{
	return pl_slot_primary(m, pl_keyslot(key, len));
}

/* The published map of a node, and its readers' epoch. */
struct pl_table {
	struct pl_map *cur;              /* ck_pr_load_ptr; replaced by pl_publish */
	ck_epoch_t epoch;
	pthread_mutex_t wlock;           /* publishers, and readers without a record */
	ck_epoch_record_t *writer;       /* the publishers' record (under wlock) */
	ck_epoch_record_t *recs[PL_MAX_READERS]; /* every record made, freed at destroy */
	int nrecs;                       /* under wlock */
};

/* Start with `first` as the current map (the table owns it). 0 or -ENOMEM. */
int pl_table_init(struct pl_table *t, struct pl_map *first);
/* Free the current map and every record. No reader may be left. */
void pl_table_destroy(struct pl_table *t);

/* A record for one reader thread (a worker), and back. NULL if
 * PL_MAX_READERS records are in use or memory ran out. */
ck_epoch_record_t *pl_reader_get(struct pl_table *t);
void pl_reader_put(struct pl_table *t, ck_epoch_record_t *rec);

/* A read section on the caller's own record: the map returned stays valid
 * until the matching pl_read_end. Sections nest. */
static inline const struct pl_map *pl_read_begin(struct pl_table *t, ck_epoch_record_t *rec)
{
	ck_epoch_begin(rec, NULL);
	return ck_pr_load_ptr(&t->cur);
}
static inline void pl_read_end(ck_epoch_record_t *rec)
{
	ck_epoch_end(rec, NULL);
}

/* For threads with no record: hold the lock while using pl_table_current. */
void pl_table_lock(struct pl_table *t);
void pl_table_unlock(struct pl_table *t);
static inline const struct pl_map *pl_table_current(struct pl_table *t)
{
	return ck_pr_load_ptr(&t->cur);
}

/*
 * pl_publish - make `m` the current map (the table owns it), then wait,
 * sleeping, until no read section that may hold the old map is open, and
 * free the old map. Must not be called inside a read section of the same
 * thread (it would wait for itself). Any thread but a worker coroutine
 * that others of its worker may be waiting on.
 */
void pl_publish(struct pl_table *t, struct pl_map *m);

#endif

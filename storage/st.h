/*
 * st: the MemStore (DESIGN.md section 9).
 *
 * One region per node, laid out as
 *   header | txn-record table | cuckoo index | slab table + free bitmaps |
 *   item slabs | log area
 * Nothing in a region holds a pointer: everything is a byte offset, so any
 * process can map it and a restarted node finds it intact.
 *
 * Two kinds of entry points:
 *  - local (st_region_*, st_scan, st_flush, st_recover): the owner node on
 *    its own mapping, with the node quiesced where noted;
 *  - one-sided (st_lookup, st_create, st_swap, st_retire, st_reap): run by any
 *    coordinator on any node through the fabric (struct fab_batch), so they
 *    only use READ, WRITE, CAS and FAA, and tolerate torn reads. Those
 *    that take bucket locks (st_create, st_swap, st_reap) are given the
 *    coordinator's own handle (struct st_coord) to say who calls.
 *
 * Nothing in this module is per process: several nodes, each with its own
 * region and handle, may live in one process (DESIGN.md principle 5).
 *
 * Errors: 0 on success, negative ST_E* or -errno.
 *
 * Collections (hashes, sets and lists; sorted sets build on the same
 * pieces). Storage knows items only; this is the layout the layers above
 * keep in them (server/coll.h has the format and the code, placement.h
 * the part keys), written here because it is a choice about items.
 *
 *  - A collection key K is a ROOT item at K: its type and expiry in
 *    vflags (cc/txn.h txn_meta) like any value. A small collection is
 *    INLINE: the root's value holds every element, as Redis's listpack
 *    does: one item, one READ, one WRITE per command. Past 128 elements
 *    or 4 KiB of root value it becomes BUCKETED, for good: the root holds
 *    32 bytes {enc, flags, linear-hashing level i and split pointer p,
 *    slot, gen, count}, and the elements live in PART items, bucket b of
 *    nbuckets = 2^i + p holding the fields whose st_hash h has
 *    h mod 2^(i+1) == b when h mod 2^i < p, else h mod 2^i == b. When
 *    count passes 16 per bucket, bucket p splits into p and p + 2^i and
 *    p advances (i grows when p reaches 2^i): one bucket rewritten per
 *    split, never the whole collection.
 *  - Why: one item per key with the whole value serialized is simplest,
 *    and right for small values (Redis makes the same choice below its
 *    listpack limits), but a write then moves the whole value over the
 *    fabric: an HSET on a 10,000-field hash would read and write ~200 KB.
 *    Bucketed, it reads and writes the root (tens of bytes) and one
 *    bucket (about 16 fields): ~1.5 KB read and ~1 KB written whatever
 *    the size (README, measured). Every command stays one transaction:
 *    root and buckets are items the protocol reads, locks and validates
 *    like any other. The thresholds: below 128 elements a one-item root
 *    costs one round trip where a bucketed one costs two (the bucket's
 *    address depends on the root), and 4 KiB keeps the root in one block
 *    (values over 4 KiB go out of place and cost another READ).
 *  - Part keys are fixed-size internal keys, "\xffrckv\x00" | u16 slot |
 *    u64 gen | u32 part id (placement.h PL_PART_*); pl_keyslot gives a
 *    part key the slot embedded in it, the root's at creation, so parts
 *    live on the root's node and its replicas. Part id 0xffffffff is the
 *    OWNER, whose value is the root's key name (RENAME rewrites it).
 *    Parts have type TXN_T_PART and never an expiry. Clients never see
 *    them (KEYS, SCAN, DBSIZE, RANDOMKEY leave them out) and cannot name
 *    a key with the prefix (dispatch refuses it).
 *  - gen is unique per incarnation (txn_unique): RENAME moves the root
 *    and its gen (the parts stay where they are, reachable though no
 *    longer co-located when the new name's slot is on another node);
 *    COPY makes a new gen and copies every part. DEL, an overwrite, an
 *    expiry or a flush drop only the root: its parts become ORPHANS,
 *    which the expiry scan (server/expire.c) collects: a transaction
 *    reads the owner, the root it names, and deletes the parts if that
 *    root is gone or holds another gen. A part is only ever written in a
 *    transaction that read its root's gen, so a committed part without a
 *    matching root can never be reached again (server/coll.h, invariant
 *    (1)).
 *  - A LIST is a sequence, not a dict, so it is chunked rather than
 *    bucketed (server/list.h): inline as above up to 128 elements or
 *    4 KiB; then a 48-byte root {enc 3, slot, nchunks, gen, count,
 *    next chunk id, head chunk id and count, tail chunk id and count},
 *    chunk parts of about 2 KB of elements in order, and an index part
 *    (id 0xfffffffe) listing every chunk with its count. Why: a push or a
 *    pop changes only an end, and the ends' counts live in the root, so
 *    it reads and writes the root and one chunk (a few KB) whatever the
 *    length; LINDEX in the middle adds the index (6 bytes a chunk) and
 *    one chunk, never the elements it skips. Chunk ids only grow within
 *    a gen, so a new chunk is written without being read. Gen, owner,
 *    RENAME, COPY and the collection of orphans are the dict's.
 *  - A sorted set is such a collection (member -> score) plus, once
 *    bucketed, its members in score order in more parts of the same gen:
 *    chunks of ~2 KB under leaves under a top part, so that a ZADD or a
 *    ZRANGE on a big zset moves a few KB (server/zset.h says why).
 */
#ifndef RCKV_ST_H
#define RCKV_ST_H

#include <assert.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

#define ST_MAGIC 0x31564b43524b4352ull /* "RCKRCKV1" little-endian */
/* Version 3: finer size classes (st_internal.h), slot words of offset/16
 * and 7 class bits. A region of another version is refused at open. */
#define ST_LAYOUT_VERSION 3

enum {
	ST_ENOTFOUND = -1000, /* key has no item */
	ST_EFULL = -1001,     /* no free block of the needed class, or index full */
	ST_ESTALE = -1002,    /* the block no longer holds this key/generation */
	ST_EBUSY = -1003,     /* a structural lock is held; retry later */
	ST_ECORRUPT = -1004,  /* header check failed (open) */
};
const char *st_strerror(int err);

/* Persistence policy (section 9). */
enum st_persistence { ST_PERSIST_NONE, ST_PERSIST_PROCESS, ST_PERSIST_POWER };

struct st_config {
	const char *dir;          /* directory of the region file */
	uint16_t node_id;
	uint64_t cluster_id;      /* 0 for a standalone node */
	uint64_t size;            /* region bytes ("memory") */
	unsigned log_nodes;       /* coordinators' node ids are 1..log_nodes */
	enum st_persistence persistence;
	/* Power-loss simulation (testing only; persistence power): the
	 * mapping is a volatile copy of the region file, and only what is
	 * persisted reaches the file (st_region_open). */
	bool power_sim;
	uint64_t power_sim_crash_after; /* cut the power at this persist; 0 = never */
	/* ... counting only the persists of checkpoints (their data, their
	 * rename): the write-ahead log's, to cut in the middle of one */
	bool power_sim_crash_in_checkpoint;
	/* persistence power on a medium that is not persistent memory: keep
	 * the region in volatile memory and make it durable through a
	 * write-ahead log and checkpoints (st_region_is_wal). */
	bool wal;
	/* ... a cluster node's (fabric shm): fed through a journal ring that
	 * peers write too, its region copy kept under a stable name so that a
	 * restart after kill -9 takes it whole (st.h, the journal ring). */
	bool wal_ring;
	/* ... even on persistent memory (a tcp cluster: its NIC thread makes
	 * the peers' writes and logs them; in place, nothing would answer a
	 * peer's remote flush by flushing them). */
	bool wal_on_pmem;
	uint64_t checkpoint_bytes;      /* log bytes between checkpoints; 0 = none */
};

/*
 * Layout of a region: fixed at creation, stored in the header, identical
 * for every node of a cluster built with the same configuration, and read
 * by peers once at connect (so they compute remote offsets locally).
 */
struct st_layout {
	uint64_t size;
	uint64_t txn_off, txn_slots;     /* transaction records, ST_TXN_BYTES each */
	uint64_t index_off, index_buckets;
	uint64_t slabtab_off;            /* one 8-byte word per slab: class+1, 0 = unassigned */
	uint64_t bitmap_off;             /* per slab: ST_SLAB_BITMAP_BYTES of free bits (1 = used) */
	uint64_t slab_off, slab_count;   /* slabs of ST_SLAB_BYTES */
	uint64_t log_off, log_size;
	uint64_t log_nodes;              /* coordinator node ids 1..log_nodes */
	uint64_t log_slot_bytes;         /* one coordinator slot (storage/log.h) */
};

#define ST_TXN_BYTES 64
#define ST_SLAB_BYTES (4u << 20)
#define ST_MIN_BLOCK 64u
#define ST_SLAB_BITMAP_BYTES (ST_SLAB_BYTES / ST_MIN_BLOCK / 8) /* 8 KiB */
#define ST_BUCKET_SLOTS 7 /* a bucket: lock word + 7 slot words = 64 bytes */
#define ST_WAYS 3

/* Region header, at offset 0. */
struct st_header {
	uint64_t magic;
	uint64_t layout_version;
	uint64_t node_id;
	uint64_t cluster_id;
	uint64_t protocol_epoch;   /* bumped by every CONFIG SET cc */
	uint64_t clean_shutdown;   /* 1 after a clean close, 0 while open */
	uint64_t incarnation;      /* bumped at every open */
	uint64_t protocol_id;      /* cc protocol whose metadata the items carry */
	struct st_layout layout;
	uint64_t wal_gen;          /* write-ahead log: the first segment after this
				      image (a checkpoint; storage/wal.c), 0: none */
	uint64_t reserved[31];
	/* The incarnation of each peer as this node last saw it at join: a
	 * different one at the next join means the peer restarted, and its
	 * transactions left in this region are resolved (storage/log.h). */
	uint64_t peer_incarnation[FAB_MAX_NODES];
};

/*
 * An item block. The CC metadata words come first (lock word first) so one
 * READ fetches metadata, key and value together. Words are written only as
 * their comments say.
 */
struct st_item {
	uint64_t lock;    /* CC lock word; 0 = free. Owned by the cc protocol. */
	uint64_t ver;     /* commit timestamp of the last committed write (silo's
			     wts); every protocol sets it on commit; WATCH reads it */
	uint64_t meta[2]; /* protocol-specific (rts, owner, ...); 0 when reset */
	uint64_t ident;   /* gen:32 | klen:24 | class:8. Written at allocation only */
	uint64_t data;    /* vlen:32 | vflags:8 (bits 8..15) | flags:8 (ST_F_*).
			     Written with the value */
	/* key bytes, then value bytes */
};
static_assert(sizeof(struct st_item) == 48, "item header is 6 words");

#define ST_F_ABSENT 0x1u /* no value: a placeholder or a deleted key */
#define ST_F_DEAD 0x2u   /* block retired; re-resolve the key */

/*
 * The lock word of a block its allocator holds (alloc.c invariant (5)):
 * taken by CAS from 0 with the block's bitmap bit, so nobody else can lock
 * the block, or count a shared hold on it, until the allocator hands the
 * word over (a placeholder's 0, a relocation's owner word) or gives the
 * block back. Neither 0, nor an owner word (odd, a node id in the top
 * byte), nor a shared word (top byte 0xff).
 */
#define ST_LOCK_CLAIMED 2ull

static inline uint32_t st_ident_gen(uint64_t ident) { return (uint32_t)(ident >> 32); }
static inline uint32_t st_ident_klen(uint64_t ident) { return (uint32_t)(ident >> 8) & 0xffffffu; }
static inline uint8_t st_ident_class(uint64_t ident) { return (uint8_t)ident; }
static inline uint64_t st_make_ident(uint32_t gen, uint32_t klen, uint8_t cls)
{
	return ((uint64_t)gen << 32) | ((uint64_t)(klen & 0xffffffu) << 8) | cls;
}
static inline uint32_t st_data_vlen(uint64_t data) { return (uint32_t)(data >> 32); }
static inline uint8_t st_data_flags(uint64_t data) { return (uint8_t)data; }
static inline uint64_t st_make_data(uint32_t vlen, uint8_t flags)
{
	return ((uint64_t)vlen << 32) | flags;
}
/*
 * vflags: eight bits the layers above keep with a value and storage only
 * carries (what the value is: cc/txn.h's ST_V_*). Written with the value,
 * copied with it wherever the item's image goes (replicas, versions,
 * checkpoints), 0 in every item written before they existed.
 */
static inline uint8_t st_data_vflags(uint64_t data) { return (uint8_t)(data >> 8); }
static inline uint64_t st_make_vdata(uint32_t vlen, uint8_t vflags, uint8_t flags)
{
	return ((uint64_t)vlen << 32) | ((uint64_t)vflags << 8) | flags;
}
static inline const char *st_item_key(const struct st_item *it) { return (const char *)(it + 1); }
static inline const char *st_item_val(const struct st_item *it)
{
	return (const char *)(it + 1) + st_ident_klen(it->ident);
}

/* Size classes: block sizes from ST_MIN_BLOCK up to ST_SLAB_BYTES, each a
 * multiple of 16, 16 bytes apart up to 256 bytes, 16 per doubling up to
 * 4 KiB, 4 per doubling above (storage/st_internal.h has the rule). */
unsigned st_class_count(void);
uint32_t st_class_size(uint8_t cls);
/* Smallest class holding an item with these lengths, or -1 if none does. */
int st_class_for(uint32_t klen, uint32_t vlen);
/* Bytes an item with these lengths takes: its block, or (too big for any
 * class) its exact size. */
uint64_t st_item_bytes(uint32_t klen, uint32_t vlen);

/* 64-bit hash of a key; every node must compute the same. */
uint64_t st_hash(const void *key, size_t len);

/* A resolved item: where it lives and which incarnation of the block. */
struct st_ref {
	uint16_t node;
	uint8_t cls;
	uint32_t gen;
	uint64_t off;
};

/* ---- local: open, close, scan, flush, recover ---- */

struct st_region;

/*
 * st_region_open - map (creating if needed) the region file of a node.
 * Creates `dir/node-<id>.region` (persistence process/power; `dir` itself
 * if missing, one level) or /dev/shm/rckv-<pid>-node-<id>.region (none,
 * removed at close). An existing file is validated (magic, layout version,
 * node id, cluster id, size); a mismatch returns ST_ECORRUPT with the
 * reason in err and never modifies the file. cfg->size is rounded down to
 * 4 KiB; below 16 MiB it is refused (ST_ECORRUPT, "too small").
 * Returns 0, ST_ECORRUPT, ST_EBUSY (another process has it open), or
 * -errno. Main thread, before workers start.
 */
int st_region_open(const struct st_config *cfg, struct st_region **out, char *err, size_t errlen);
/* Unmap; with clean=true, persist and mark the header clean first. */
void st_region_close(struct st_region *r, bool clean);
void *st_region_base(struct st_region *r);
/* The region file's path (absolute when it could be resolved). */
const char *st_region_path(struct st_region *r);
const struct st_layout *st_region_layout(struct st_region *r);
struct st_header *st_region_header(struct st_region *r);
/* True when the file existed and held data at open (a restart). */
bool st_region_reopened(struct st_region *r);
/* True when the region was closed cleanly before this open (or is new):
 * the header's clean_shutdown as read at open, before open cleared it.
 * False means the last process died with it open: run st_recover. */
bool st_region_was_clean(struct st_region *r);
/* Persist a byte range per the policy (power: pmem_persist or pmem_msync;
 * with a write-ahead log: note the range's bytes in the log, durable at the
 * next st_region_sync or flush; ranges over 1 MB are left to checkpoints). */
void st_region_persist(struct st_region *r, uint64_t off, uint64_t len);
/* Make every range persisted so far durable: with a write-ahead log, one
 * synced flush; otherwise nothing (each persist was). 0 or -errno. */
int st_region_sync(struct st_region *r);
/*
 * st_region_persist_checked - st_region_persist that reports failure:
 * 0 (also when the policy is not power: nothing to do), or -errno from
 * msync (or from the copy, power-sim). Any thread; concurrent calls are
 * fine (power-sim serializes its copies).
 */
int st_region_persist_checked(struct st_region *r, uint64_t off, uint64_t len);
/*
 * st_region_persist_ranges - persist several ranges (sorted by offset,
 * page-aligned, not overlapping; fab_range.node is ignored) as one flush:
 * on persistent memory pmem_persist of each; in power-sim a copy of each;
 * otherwise writeback of exactly their pages (sync_file_range), then one
 * msync of the first range, which only waits for the file's metadata and
 * flushes the device's cache once. One pmem_msync per range would flush
 * the device per range; one over their span would also write back every
 * other dirty page in between. Relies on an fsync of any range of a file
 * committing the file's metadata (block allocations of the sparse file):
 * true of ext4 and xfs, whose journal commit covers the whole inode.
 * Returns 0 or the first -errno. Any thread.
 */
int st_region_persist_ranges(struct st_region *r, const struct fab_range *rg, size_t n);
/*
 * st_region_save - SAVE: make every write made to the region before the
 * call durable, in whatever way the persistence mode keeps it:
 *  - write-ahead log: a synced flush, then a checkpoint cut after it,
 *    written while writers go on, and waited for (st_wal_save): the
 *    region file is then the region as of the call, and the log before it
 *    is dropped;
 *  - persistent memory: pmem_persist of the whole mapping;
 *  - power-sim: a persist of the whole mapping;
 *  - otherwise (process, and power without the log): msync of the whole
 *    mapping, which writes back the dirty pages.
 * Returns 0, -ENOTSUP for persistence none (the region is a /dev/shm file
 * removed at exit: no medium to save to), or -errno. Blocks for the
 * writes: never on a worker thread. Any thread once the workers run;
 * concurrent calls are serialized by the caller.
 */
int st_region_save(struct st_region *r);
/* The write-ahead log's part of st_region_save. -EAGAIN before
 * st_wal_start. */
int st_wal_save(struct st_region *r);
/* True when the mapping is real persistent memory (pmem_is_pmem). */
bool st_region_is_pmem(struct st_region *r);

/*
 * Power-loss simulation (cfg->power_sim, with persistence power; FORD's
 * "crash mode that discards unflushed ranges", notes-ford.md 8.1). The
 * region file <dir>/node-<id>.region is the durable medium: it is opened,
 * validated, created and locked as for power, then copied into a fresh
 * volatile file, /dev/shm/rckv-<pid>-node-<id>-sim.region, which is what
 * is mapped (and what shm peers map: st_region_path names it). A persist
 * copies exactly the pages that hold its range from the mapping to the
 * region file (pwrite; pages that are holes in the volatile copy are
 * punched out of the file), so the file holds what a power cut would have
 * left: everything persisted, nothing else. A kill -9 is then the power
 * cut: the next start copies the file again and whatever was not
 * persisted is gone. With power_sim_crash_after = N, the N-th persist
 * copies only the first half of its pages (a cut in the middle of a
 * flush) and the process kills itself with SIGKILL.
 * st_region_sim_persists counts persists (0 when not simulating).
 */
uint64_t st_region_sim_persists(struct st_region *r);
bool st_region_is_sim(struct st_region *r);
/* The durable file's path under power-sim; else st_region_path. */
const char *st_region_durable_path(struct st_region *r);

/*
 * The write-ahead log (cfg->wal, persistence power, and the file system is
 * not persistent memory; storage/wal.c has the design and invariants).
 * The region is mapped from a volatile copy in /dev/shm, rebuilt at open
 * from the last checkpoint (<dir>/node-<id>.region) and the log segments
 * after it (<dir>/node-<id>-<gen>.wal). The fabric feeds the log: it calls
 * st_wal_lock, applies one write, st_wal_note with the bytes the write left,
 * st_wal_unlock (rdma/fab.h, fab_journal). st_wal_flush appends what was
 * noted as one record, and with sync makes it durable (fdatasync).
 * st_region_persist* only note the range in the log there (writes made
 * outside the fabric: the undo log's settling), and st_region_sync makes
 * the notes durable.
 *
 * In every persistent mode, a region file whose dir holds log segments
 * gets them replayed at open (a node started with persistence process
 * after power keeps every commit).
 */
struct st_wal_stats {
	uint64_t records, bytes;      /* appended since open */
	uint64_t log_bytes;           /* in the segments since the last checkpoint cut */
	uint64_t fsyncs;
	uint64_t segment;             /* the current segment's number */
	uint64_t checkpoints;         /* written since open */
	uint64_t checkpoint_at;       /* unix time the last one was durable; 0 = none yet */
	uint64_t checkpoint_us;       /* how long its write took */
	uint64_t checkpoint_bytes;    /* bytes it wrote (its nonzero pages) */
	uint64_t checkpoint_copy_us;  /* how long its copy took (writers go on) */
	bool checkpoint_running;
	int checkpoint_err, flush_err; /* the last failure's -errno, 0 = none */
	uint64_t sim_persists;        /* power-sim: persists so far */
	/* At open: what replay found. */
	uint64_t replayed_segments, replayed_records, replayed_bytes, torn_bytes;
	bool adopted_copy;            /* a cluster node took the copy a kill -9 left */
	char torn[PATH_MAX + 160];    /* the torn record's report, "" = none */
};
bool st_region_is_wal(struct st_region *r);
int st_wal_lock(struct st_region *r); /* always 0 */
void st_wal_note(struct st_region *r, uint64_t off, const void *src, uint32_t len);
void st_wal_unlock(struct st_region *r);
/* Append what was noted as a record; with sync, fdatasync the segment.
 * May cut a checkpoint (checkpoint_bytes). Any thread (serialized).
 * Returns 0 or -errno; after a failure the region is no longer durable. */
int st_wal_flush(struct st_region *r, bool sync);
/* Is a write noted that no finished flush covers yet (written, or synced
 * where the flushes sync)? Any thread; false without a log, and on a
 * cluster node's journal ring (not tracked there). */
bool st_wal_behind(struct st_region *r);
/* st_wal_start - after recovery, before any write: start the log (with
 * checkpoint, first write a checkpoint of the region as it is: recovery
 * wrote it without the log). Main thread. */
int st_wal_start(struct st_region *r, bool checkpoint, char *err, size_t errlen);
/* A checkpoint of the region as it is, now, on the calling thread (no
 * writer may run: FLUSHALL's quiesce). Returns 0 or -errno. */
int st_wal_checkpoint(struct st_region *r);
void st_wal_get_stats(struct st_region *r, struct st_wal_stats *out);

/*
 * The journal ring (storage/jring.c): a cluster node's write-ahead log is
 * fed through a ring in a shared file that every process writing the
 * region maps, the owner's and the shm peers' (cfg->wal_ring). The path is
 * the region copy's with ".journal" for ".region" (st_jring_path), so a
 * peer finds it from the region path its HELLO gives.
 *
 * Writers (the fabric, through a slot's fab_journal): st_jring_lock,
 * apply one op, st_jring_note, st_jring_unlock. Peers: st_jring_tail after
 * their writes, then st_jring_wait until the owner's log holds them
 * (0, -EHOSTDOWN when the owner is gone, -ETIMEDOUT). The owner's log:
 * st_jring_take what was noted, append and sync it, st_jring_publish.
 */
struct st_jring;
void st_jring_path(const char *region_path, char *out, size_t len);
int st_jring_create(const char *path, uint64_t cap, struct st_jring **out);
int st_jring_open(const char *path, struct st_jring **out);
void st_jring_close(struct st_jring *j);
/* True when j maps the file now at path (not an older one of that name). */
bool st_jring_is(const struct st_jring *j, const char *path);
/* 0, or -EHOSTDOWN: the ring's owner is gone (a peer's ring only). */
int st_jring_lock(struct st_jring *j);
bool st_jring_trylock(struct st_jring *j);
void st_jring_note(struct st_jring *j, uint64_t off, const void *src, uint32_t len);
uint64_t st_jring_unlock(struct st_jring *j);
uint64_t st_jring_tail(const struct st_jring *j);
uint64_t st_jring_durable(const struct st_jring *j);
uint32_t st_jring_dropped(const struct st_jring *j);
/* Owner: append [head, tail) to *buf (grown as needed), advance head;
 * *upto is the position taken to. 0 or -ENOMEM. */
int st_jring_take(struct st_jring *j, char **buf, size_t *n, size_t *cap, uint64_t *upto);
void st_jring_publish(struct st_jring *j, uint64_t upto);
/* Owner's flusher: a peer waits for a position not yet durable. */
bool st_jring_wanted(const struct st_jring *j);
uint32_t st_jring_kicks(const struct st_jring *j);
void st_jring_kick(struct st_jring *j);
/* Sleep until kicked (the kick count moved from seen) or ms passed. */
void st_jring_sleep(struct st_jring *j, uint32_t seen, int ms);
int st_jring_wait(struct st_jring *j, uint64_t pos, int timeout_ms);

/* A node's place in the fabric's journals: the ring its writes go to now
 * (NULL: not logged), replaced when the node restarts with a new ring. */
struct st_jring_slot {
	struct st_jring *ring;     /* atomic */
	struct st_jring *retired;  /* replaced rings, unmapped at clear */
};
/* The fabric's journal for a node's writes, through s. */
void st_jring_slot_journal(struct st_jring_slot *s, struct fab_journal *out);
/* Control thread: point the slot at j (the slot takes a peer's ring). */
void st_jring_slot_set(struct st_jring_slot *s, struct st_jring *j);
/* At close, no writer left: unmap the rings (owned: the current one is
 * the own log's, closed by it). */
void st_jring_slot_clear(struct st_jring_slot *s, bool owned);
/* The own log's ring (cfg->wal_ring), or NULL. */
struct st_jring *st_wal_ring(struct st_region *r);

/*
 * st_recover - after an unclean stop: reset every lock word and bucket lock,
 * drop blocks not reachable from the index (rebuild the free bitmaps), and
 * count live keys. Node quiesced. Fills *live_keys.
 */
int st_recover(struct st_region *r, uint64_t *live_keys);
/* st_recover_stats - st_recover that also adds the locks it found held and
 * reset (item lock words of the items it keeps, bucket locks) to
 * stats->locks_released; stats may be NULL. */
struct st_log_stats;
int st_recover_stats(struct st_region *r, uint64_t *live_keys, struct st_log_stats *stats);

/* st_reset_meta - set lock, meta[] to 0 on every item (protocol switch); keeps ver. */
void st_reset_meta(struct st_region *r);
/* st_reset_meta_if - meta[] to 0 on every item whose key `keep` says yes
 * to (a failover promotes a backup: its copies never had the protocol's
 * words, invariant (2) of cc/repl.c); keeps lock and ver. Returns the
 * items reset. */
typedef bool (*st_key_pred)(void *arg, const char *key, uint32_t klen);
uint64_t st_reset_meta_if(struct st_region *r, st_key_pred match, void *arg);

/* st_flush - drop every item (FLUSHALL). Node quiesced. */
void st_flush(struct st_region *r);
/* st_wipe - st_flush, and every coordinator's log slots emptied: a node
 * out of its cluster's configuration, about to rejoin and be copied
 * afresh, whose region nobody else reaches. */
void st_wipe(struct st_region *r);

/*
 * st_scan - visit live (not ABSENT, not DEAD) items of the local region,
 * starting at *cursor (0 to begin). Calls fn for each until it returns
 * non-zero or `count` buckets were visited; stores the next cursor (0 when
 * done). Lock-free and not transactional: a concurrent writer may be seen
 * before or after its commit.
 * The cursor is opaque (bucket * 8 + slot). When fn returns non-zero, that
 * item counts as visited and the cursor resumes right after it, so a
 * caller may stop at any item without losing or repeating any. A key
 * present during the whole iteration is visited exactly once. fn gets
 * pointers into the live region: copy what it keeps.
 */
typedef int (*st_scan_fn)(void *arg, const char *key, uint32_t klen, const struct st_item *it);
void st_scan(struct st_region *r, uint64_t *cursor, uint64_t count, st_scan_fn fn, void *arg);
/*
 * st_scan_locks - every lock word of this region that is held: a bucket's
 * (key NULL) and an item's, absent placeholders included, until fn
 * returns non-zero. Not transactional (a diagnostic: RCKV LOCKS).
 */
typedef int (*st_lock_visit_fn)(void *arg, const char *key, uint32_t klen, uint64_t lock,
				uint64_t bucket, bool absent);
void st_scan_locks(struct st_region *r, st_lock_visit_fn fn, void *arg);
/*
 * What the region spends (storage/usage.c): its size, the bytes of the
 * blocks allocated (each at its class size: what items, placeholders,
 * undo extents and forwarded images take), the bytes still free for
 * blocks (free blocks of assigned slabs and unassigned slabs), and the
 * index's fixed size. A snapshot read without locks; any thread.
 */
struct st_usage {
	uint64_t region_bytes;   /* the whole region (`memory`) */
	uint64_t index_bytes;    /* the cuckoo index, fixed at creation */
	uint64_t slab_bytes;     /* the slabs' area: what blocks can take */
	uint64_t used_bytes;     /* allocated blocks, by class size */
	uint64_t free_bytes;     /* slab_bytes - used_bytes, less the tails of slabs
				    their class does not fill */
	uint64_t blocks_used;
	uint64_t slabs, slabs_assigned;
};
void st_region_usage(struct st_region *r, struct st_usage *u);
/* Bytes of [off, off + len) of the mapping that are resident (mincore),
 * or -errno. Any thread. */
int64_t st_region_resident(struct st_region *r, uint64_t off, uint64_t len);

/* Number of live keys (a full scan). */
uint64_t st_count(struct st_region *r);
/* Is block ref (of this region) still of generation ref->gen and class
 * ref->cls, and allocated (a FLUSHALL frees every block, recovery every
 * one the index does not name)? Reads the region's own mapping: a
 * snapshot, for a block whose owner is the caller (no one else frees it). */
bool st_block_owned_local(struct st_region *r, const struct st_ref *ref);

/* ---- one-sided: any coordinator, through the fabric ---- */

/*
 * st_persist_fn - make [off, off+len) of node's region durable now.
 * Returns 0 once it is, or -errno; may park the coroutine behind b's
 * waiter. Called on the thread of the st_create that needs it.
 */
typedef int (*st_persist_fn)(void *arg, struct fab_batch *b, uint16_t node, uint64_t off,
			     uint64_t len);

/*
 * struct st_coord - the calling coordinator, as the one-sided operations
 * that take bucket locks need it: the layout, the node's id (bits 56..63
 * of every bucket lock it takes, which st_release_locks keys on) and the
 * node's persister (st_region_set_persister). One per node, owned by its
 * region (st_region_coord), so it is set up with the node id the region
 * was opened with and two nodes of one process never share one.
 *
 * Why a handle rather than the layout or the batch: a layout is the
 * cluster's (identical on every node, stored in the header, sent to peers
 * at connect) and is handed out const, so it cannot say which node calls;
 * a fab_batch belongs to the rdma layer, below storage, which has no
 * business carrying a storage persister. The region is the node's one
 * storage object and already knows the node id.
 */
struct st_coord;

/* st_region_coord - r's node as a coordinator (see struct st_coord); valid
 * until st_region_close. Any thread. */
const struct st_coord *st_region_coord(struct st_region *r);

/*
 * st_region_set_persister - give the index a way to make one of the index
 * writes r's node makes as a coordinator (st_create with
 * st_region_coord(r), on any node) durable before its next one, for where
 * the order in which they reach the medium matters (persistence power:
 * st_create's kick-out, which copies a key's slot word to another bucket
 * and then overwrites the old one, must not let the overwrite be durable
 * without the copy). fn NULL removes it. Other nodes' handles, in this
 * process or not, are not affected. Without one, index writes are made
 * durable only by the caller's flushes (cc/durable.c), in no particular
 * order: right for persistence none and process, which survive a process
 * crash, where every write stays in the page cache. Main thread, while no
 * st_create, st_swap or st_reap runs with r's handle (before the workers
 * start, after they stopped).
 */
void st_region_set_persister(struct st_region *r, st_persist_fn fn, void *arg);

/*
 * st_lookup - resolve a key on a node through its cuckoo index (at most
 * ST_WAYS bucket READs, usually 1) and READ its block into buf.
 * buf must hold ST_SLAB_BYTES: a candidate block is read whole (its class
 * size, up to ST_SLAB_BYTES) before its key can be compared, and the
 * class is known only from the index. Untouched pages of a large malloc'd
 * buffer cost no memory.
 * Returns 0 (ref and buf filled; the item may be ABSENT), ST_ENOTFOUND,
 * ST_EBUSY (the key's index slot kept changing for 2 s), or -errno from
 * the fabric. Cost of a hit: 1 bucket READ + 1 block READ, 2 round trips.
 */
int st_lookup(struct fab_batch *b, const struct st_layout *L, uint16_t node, const void *key,
	      uint32_t klen, uint64_t hash, struct st_ref *ref, struct st_item *buf);

/*
 * The probe: st_lookup's two round trips taken for many keys at once, by a
 * coordinator that resolves a transaction's whole key set (cc's fetch
 * stage). For every key, st_probe_post queues the READ of its primary
 * bucket into its own 8 words; after the batch ran, st_probe_candidate
 * names the one slot of that bucket whose tag and way are the key's; the
 * caller queues the READ of that block (its class size) for every key,
 * runs the batch, and st_probe_match says whether the block is the key's
 * live block (ref filled) or not.
 * A probe answers only "found": a key it misses (absent, in way 1 or 2,
 * behind several candidate slots, moving, retired) is left to st_lookup or
 * st_create, which decide absence with the restarts of the index's
 * invariant (5). "Found" needs none: a live block holding the key, read
 * through one of the key's slots, is what st_lookup returns too, and what
 * an address cache holds (a caller checks it again at its own read, as it
 * does a cached address).
 */
void st_probe_post(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint64_t hash,
		   uint64_t bucket[8]);
/* 0 with the candidate's offset and class, or ST_ENOTFOUND (no slot, or
 * several: left to st_lookup). */
int st_probe_candidate(const struct st_layout *L, uint64_t hash, const uint64_t bucket[8],
		       uint64_t *off, uint8_t *cls);
/* 0 with *ref (node, class, generation, offset) if buf, read from the
 * candidate, is the key's live block; ST_ENOTFOUND otherwise. */
int st_probe_match(const struct st_item *buf, const void *key, uint32_t klen, uint16_t node,
		   uint8_t cls, uint64_t off, struct st_ref *ref);

/*
 * st_create - find or create the item of a key. If absent, allocates a
 * block of the smallest class, writes a placeholder (ABSENT, vlen 0,
 * lock/ver/meta = 0) and inserts it in the index under the key's primary
 * bucket lock (RCBench 4.2), moving another key to a later bucket of its
 * own if the key's 21 slots are full. Fills ref and buf as st_lookup
 * (same buf size rule).
 * @c: the calling coordinator (st_region_coord of its own region): its
 *     node id marks the bucket locks taken, its persister orders a
 *     kick-out's writes.
 * @lock_owner: the word the bucket locks taken carry: the calling
 *     transaction's owner word (node:8 | age:55 | 1, cc.h), so that a
 *     lock left by a call whose reply was lost is released when that
 *     transaction is settled (st_release_locks); 0: c's node id and a
 *     per-thread part.
 * Returns 0, ST_EFULL (no memory or index full), ST_EBUSY (a bucket lock
 * stayed held for 2 s: an inserter died), or -errno (from the fabric, or
 * from c's persister).
 * Cost: an existing key in its first bucket 2 round trips; a new key 4;
 * a kick-out at least 2 more, and with a persister one flush of 8 bytes.
 */
int st_create(struct fab_batch *b, const struct st_coord *c, uint64_t lock_owner, uint16_t node,
	      const void *key, uint32_t klen, uint64_t hash, struct st_ref *ref,
	      struct st_item *buf);

/*
 * st_alloc - take a free block able to hold klen+vlen on a node; its ident
 * word is written with a fresh generation (klen and class too), its lock
 * word is ST_LOCK_CLAIMED (the caller writes the value it starts with; the
 * other words are the caller's to write). Returns 0, ST_EFULL (no free block of
 * the class and no unassigned slab, or the item exceeds ST_SLAB_BYTES),
 * or -errno. 3 round trips. A per-thread hint (slab and bitmap word per
 * node and class) avoids rescanning; threads: any.
 */
int st_alloc(struct fab_batch *b, const struct st_layout *L, uint16_t node, uint32_t klen,
	     uint32_t vlen, struct st_ref *out);

/*
 * st_swap - point the key's index slot from `old` to `nw` (a relocation to
 * a bigger block); the caller holds the CC lock of `old`. Takes the key's
 * primary bucket lock for the change (2 round trips), marked with
 * lock_owner (as st_create's). Returns 0, ST_ESTALE (no slot points at `old`), ST_EBUSY,
 * -EINVAL, or -errno.
 * Afterwards st_retire(old); never unlock the old block's lock word after
 * st_retire: the block may already belong to another key.
 */
int st_swap(struct fab_batch *b, const struct st_coord *c, uint64_t lock_owner, uint64_t hash,
	    const struct st_ref *old, const struct st_ref *nw);

/* st_retire - mark a block DEAD and give it back to its free bitmap.
 * Returns 0, ST_ESTALE (not generation ref->gen, or already free),
 * -EINVAL (not a block), or -errno. */
int st_retire(struct fab_batch *b, const struct st_layout *L, const struct st_ref *ref);

/* st_free - give back a block that was never published (st_alloc'ed), its
 * lock word back to 0 if it is ST_LOCK_CLAIMED or `held` (a lock word the
 * caller wrote there, e.g. a relocation's owner word; 0 for none).
 * Returns 0, ST_ESTALE (not generation ref->gen, or already free),
 * -EINVAL, or -errno. */
int st_free(struct fab_batch *b, const struct st_layout *L, const struct st_ref *ref,
	    uint64_t held);

/*
 * st_reap - remove an ABSENT, unlocked item of generation ref->gen from the
 * index and retire it. Lock value `owner` (a transaction's owner word) is
 * CASed into the lock word for the duration; the key's primary bucket
 * lock, taken meanwhile, carries it too. Returns 0 if reaped, ST_EBUSY if locked or no longer
 * ABSENT, ST_ESTALE if the block changed.
 */
int st_reap(struct fab_batch *b, const struct st_coord *c, uint64_t hash,
	    const struct st_ref *ref, uint64_t owner);

/* ---- the undo log (DESIGN.md section 9, FORD 4.3) ----
 *
 * The log area holds ST_LOG_SLOTS slots per coordinator node (ids 1 ..
 * log_nodes), each log_slot_bytes long. A coordinator owns its slots on
 * every node and hands them to its transactions itself (cc/undo.c), so no
 * one else ever writes them. A slot on node N holds, for the transaction
 * using it, the old images of the items it changes on N:
 *
 *   struct st_log_hdr  (64 bytes)  txn, then mark, then the first extent
 *   struct st_log_rec + payload     one per changed item, 8-aligned
 *   ...
 *
 * Records that do not fit the slot continue in extents: blocks the
 * coordinator allocates on that node (st_alloc, key length 0), chained from
 * the header, each holding as many whole records as fit (up to
 * ST_LOG_EXT_BYTES of them), in the words of an item header:
 *   ver     the next extent's gen:32 | class:8 (0: the last)
 *   meta[0] the transaction (the slot's txn)
 *   meta[1] the next extent's offset (0: the last)
 *   data    the records' bytes (ABSENT: not an item; never in the index)
 * then the records from byte 48. A transaction's records on one node take
 * at most ST_LOG_MAX_BYTES in all. Extents are freed once the slot is
 * retired: by the coordinator, or by st_log_resolve for a transaction it
 * settles. Those of a coordinator that died between its retire and the
 * frees stay allocated until the node restarts (st_recover frees every
 * block the index does not name).
 *
 * Written by the coordinator through the fabric, in this order per node
 * (one endpoint, so applied in order): header and records; the in-place
 * installs; then, when this node is the only one written and nothing was
 * relocated, retire (txn := 0) and the lock releases; otherwise the commit
 * mark (mark := txn), the lock releases and retire. A record carries its
 * txn and a checksum: a record torn by a crash fails the checksum, and
 * then its install was never applied either.
 *
 * A transaction is committed iff its records were retired on its one
 * written node, or a node holds mark == txn for it, or the coordinator's
 * decision record (st_txn_rec in the coordinator's own region, slot of the
 * same number) names it. Recovery keeps committed transactions (a retired
 * slot is not looked at) and rolls the others back from their records.
 */
#define ST_LOG_SLOTS 64 /* coordinator slots per coordinator node */
#define ST_LOG_EXT_BYTES (ST_SLAB_BYTES - 64u) /* records per extent, at most */
#define ST_LOG_MAX_BYTES (1ull << 30)         /* a transaction's, per node */

struct st_log_hdr {
	uint64_t txn;     /* the transaction whose records follow; 0 = slot free */
	uint64_t mark;    /* == txn once the transaction committed */
	uint64_t ext;     /* the first extent's offset; 0 = none */
	uint64_t ext_gc;  /* its gen:32 | class:8 */
	uint64_t ext_txn; /* the transaction the extents are of (== txn: the
			     chain is this transaction's to follow) */
	uint64_t pad[3];
};

struct st_log_rec {
	uint64_t txn;      /* the slot's transaction */
	uint64_t kind_len; /* kind:8 | payload bytes:32 */
	uint64_t off;      /* IMAGE: the item block; RELOC: the old block */
	uint64_t aux;      /* IMAGE: block generation; RELOC: the new block */
	uint64_t sum;      /* st_log_rec_sum of all of the above and the payload */
	/* payload, padded to 8 bytes */
};

enum {
	/* payload: item words 1..5 (ver, meta, ident, data), then the old
	 * value bytes the install overwrote (not the key: it is rewritten
	 * with the same bytes).
	 * Undo: write them back if the block still has the generation. */
	ST_REC_IMAGE = 1,
	/* payload: struct st_log_reloc. Undo: point the index slot back at
	 * the old block, free the new one. Redo (committed): retire the old. */
	ST_REC_RELOC = 2,
};

struct st_log_reloc {
	uint64_t hash;
	uint64_t old_gen_cls; /* gen:32 | cls:8 */
	uint64_t new_gen_cls;
};

/* The decision record of a coordinator slot: in the coordinator's own
 * region, at txn_off + slot * ST_TXN_BYTES. */
struct st_txn_rec {
	uint64_t committed; /* txn id of the slot's last committed multi-node txn */
	uint64_t pad[7];
};
static_assert(sizeof(struct st_txn_rec) == ST_TXN_BYTES, "one txn record per slot");

static inline uint64_t st_log_slot_off(const struct st_layout *L, unsigned coord, unsigned slot)
{
	return L->log_off + ((uint64_t)(coord - 1) * ST_LOG_SLOTS + slot) * L->log_slot_bytes;
}
static inline uint64_t st_txn_rec_off(const struct st_layout *L, unsigned slot)
{
	return L->txn_off + (uint64_t)slot * ST_TXN_BYTES;
}

/*
 * Transaction records (RCBench's T^g, DESIGN.md section 9): ST_TXN_STATES
 * of them per node, after the ST_LOG_SLOTS decision records, read and
 * changed remotely by Read^T / Write^T / Atomic^T (cc/cc.h). Word 0 is the
 * status, the rest protocol-defined. A record is free for any use when its
 * status is 0; its owner transaction names it in its timestamps.
 */
#define ST_TXN_STATES 1024u
struct st_txn_state {
	uint64_t status;   /* 0, or state:8 | owner word's low 56 bits */
	uint64_t word[7];
};
static_assert(sizeof(struct st_txn_state) == ST_TXN_BYTES, "one txn record per slot");
static inline uint64_t st_txn_state_off(const struct st_layout *L, unsigned rec)
{
	return L->txn_off + (uint64_t)(ST_LOG_SLOTS + rec) * ST_TXN_BYTES;
}
static inline uint32_t st_rec_bytes(uint32_t payload)
{
	return (uint32_t)sizeof(struct st_log_rec) + ((payload + 7u) & ~7u);
}
uint64_t st_log_rec_sum(const struct st_log_rec *r, const void *payload);

/* What resolving one coordinator's slots did. */
struct st_log_stats {
	uint64_t txns_committed;  /* found with a mark or a decision: kept */
	uint64_t txns_rolled_back;
	uint64_t records_undone;
	uint64_t locks_released;
};

/*
 * st_log_resolve - settle the transactions of coordinator node `coord`
 * left in this region's log area: those committed (a mark, or
 * decided[slot] == txn) are kept, the others rolled back from their
 * records, newest first; then the slots are retired. decided may be NULL
 * (only marks count). With `only` non-NULL, only slots whose txn equals
 * only[slot] are settled (a live coordinator's stuck slots). Safe while
 * other coordinators run transactions on the region: it touches only
 * coord's slots and the items their records name, which the dead
 * transactions still lock. Release the locks afterwards.
 */
void st_log_resolve(struct st_region *r, unsigned coord, const uint64_t decided[ST_LOG_SLOTS],
		    const uint64_t only[ST_LOG_SLOTS], struct st_log_stats *stats);

/*
 * st_log_slots - what coordinator `coord` left in this region's log area:
 * txn[slot] the transaction a slot names (0: none), mark[slot] its mark
 * (== txn: it committed). A failover's takeover (server/recovery.c) reads
 * them on every surviving node to settle a dead coordinator's
 * transactions without its decision records.
 */
void st_log_slots(struct st_region *r, unsigned coord, uint64_t txn[ST_LOG_SLOTS],
		  uint64_t mark[ST_LOG_SLOTS]);

/*
 * st_log_relock - after an unclean stop that may have lost lock words (they are
 * never logged: a write-ahead log replays the installs without them), lock
 * again every item that another coordinator's unsettled records (a slot
 * with txn and no mark) name, with that transaction's owner word, so that
 * no transaction reads or overwrites an install that may be rolled back
 * until st_log_resolve settles it (when that coordinator rejoins). Node
 * `self`'s own slots are settled first by the caller. Local, before the
 * node serves. Returns the lock words set.
 */
uint64_t st_log_relock(struct st_region *r, unsigned self);

/*
 * st_release_locks - replace every item lock word w by match(arg, w) when
 * that differs from w (0 releases it; a shared-lock count can drop one
 * holder's part), and clear every bucket lock held by node `bucket_node`
 * (-1: none): those whose bits 56..63 are that node id, which a bucket
 * lock gets from the st_coord of the coordinator that took it. By CAS, so
 * a lock word changed meanwhile is never touched (a shared one is
 * recomputed). Walks the whole index.
 */
typedef uint64_t (*st_lock_match_fn)(void *arg, uint64_t lockword);
void st_release_locks(struct st_region *r, st_lock_match_fn match, void *arg, int bucket_node,
		      struct st_log_stats *stats);

#endif

/*
 * cc.h: the inside of the CC layer, shared by the executor (cc/txn.c,
 * cc/exec.c), the primitives (cc/prim.c) and the protocols (one file
 * each under cc/protocols). Command handlers use cc/txn.h instead.
 *
 * A transaction keeps one struct cc_access per key it touched. The
 * protocol fills `img` (the item block as this transaction saw it: CC
 * words, key, value) through the primitives; the executor keeps the
 * pending write (`wval`/`wdel`) next to it, so reads see own writes.
 */
#ifndef RCKV_CC_H
#define RCKV_CC_H

#include <stdbool.h>
#include <stdint.h>

#include "cc/txn.h"
#include "rdma/fab.h"
#include "storage/st.h"

struct node;
struct worker;
struct txn;

/* Access modes. */
enum { ACC_R = 1, ACC_W = 2 };

/* Protocol-owned state bits of an access (a->pstate). */
enum {
	ACC_LOCKED = 1u << 0,  /* this txn holds the item's lock word */
	ACC_BLIND = 1u << 1,   /* written without being read (no version to validate) */
	ACC_MOVED = 1u << 2,   /* relocated to a bigger block at commit */
	ACC_CASPEND = 1u << 3, /* silo: lock CAS posted, result not yet noted */
	ACC_SWAPPED = 1u << 4, /* relocation: the index points at nref now */
	ACC_NEEDIMG = 1u << 5, /* silo: blind write, block read with the lock CAS */
};

struct cc_access {
	char *key;
	uint32_t klen, kcap;
	uint64_t hash;
	uint16_t node;            /* owner node of the key */
	uint8_t mode;             /* ACC_R | ACC_W */
	uint8_t pstate;           /* ACC_LOCKED ... (protocol and executor) */
	struct st_ref ref;        /* the block this txn resolved the key to */
	struct st_item *img;      /* image of the block as read; img_cap bytes */
	uint32_t img_cap;
	/* pending write */
	bool wdel;                /* the write deletes the key */
	char *wval;
	uint32_t wvlen, wcap;
	bool has_nref;            /* relocation: value needs a bigger block */
	struct st_ref nref;
	uint64_t p[2];            /* protocol scratch (e.g. silo: ver at read) */
	uint64_t hdr[2][2];       /* Double-Read / validation scratch */
	uint64_t stage[3];        /* values of queued word WRITEs (lock, ver, other) */
	uint64_t vhdr[6];         /* validation READ target */
	/* pending state saved at the first write after savepoint sp_gen */
	uint32_t sp_gen;
	uint8_t s_mode, s_pstate;
	bool s_wdel;
	char *s_val;
	uint32_t s_vlen;
	struct cc_access *hnext;  /* chain in the txn's key table */
};

/*
 * A protocol: one file under cc/protocols, one row in its registry.c.
 * Every hook runs on the transaction's coroutine; it reaches data only through
 * the primitives below (DESIGN.md principle 2). Results: CC_OK, CC_ABORT (with
 * t->cause set), or a negative CC_E* error.
 *  read   - first read of a key: make a->img a consistent image to return.
 *  write  - first write of a key (possibly after a read): prepare to install
 *           (2PL: lock; OCC: make sure a->img is read).
 *  commit - validate and install every write; release everything. On
 *           CC_ABORT the executor then calls abort.
 *  abort  - release whatever the transaction still holds. Must be safe to call
 *           after a partial commit that returned CC_ABORT.
 */
struct cc_protocol {
	const char *name;
	bool testing_only;        /* selectable only with `testing yes` */
	int (*read)(struct txn *t, struct cc_access *a);
	int (*write)(struct txn *t, struct cc_access *a);
	int (*commit)(struct txn *t);
	void (*abort)(struct txn *t);
};

struct cc_worker; /* executor state per worker (cc/exec.c) */

/* A committing transaction's undo log (cc/undo.c, st.h "the undo log"). */
enum undo_phase {
	UNDO_NONE,      /* nothing written in place */
	UNDO_INSTALLED, /* records and installs posted: abort must roll back */
	UNDO_DECIDED,   /* the decision or a mark is out: committed */
	UNDO_UNKNOWN,   /* the one written node failed with its mark in flight */
};
struct txn_undo {
	int slot;                 /* coordinator slot, -1 = none held */
	int phase;                /* enum undo_phase */
	uint64_t nodes;           /* bitmask of nodes written */
	char *buf;                /* per written node: st_log_hdr + records */
	uint32_t cap;
	uint32_t boff[FAB_MAX_NODES], blen[FAB_MAX_NODES];
	uint64_t mark;            /* staged words for WRITEs (txn id, zero) */
	uint64_t zero;
};

struct txn {
	struct node *node;
	struct worker *w;
	struct cc_worker *ccw;
	const struct cc_protocol *proto;
	uint64_t owner;           /* lock-owner word: node:8|worker:8|seq:47|1 */
	uint64_t start_ts;
	uint64_t cts;             /* commit timestamp (protocols that need one) */
	int cause;                /* enum cc_cause of the last abort */
	int attempt;              /* 0 for the first try, then 1, 2, ... (cc_run) */
	bool single_read;         /* txn_hint_single_read */
	int fatal;                /* CC_EFAB once a fabric operation failed: the whole
				     transaction fails, never one command of it */
	struct fab_batch batch;
	struct fab_stats fstats;

	struct cc_access **acc;   /* accesses in first-touch order */
	int nacc, acc_cap;
	uint32_t sp_gen;          /* current savepoint generation, 0 = none */
	struct cc_access **tab;   /* open hash by key hash, tab_mask+1 chains */
	uint32_t tab_mask;

	struct txn_undo undo;     /* the undo log of the commit (cc/undo.c) */
};

/* ---- primitives (cc/prim.c): the only way a protocol touches data ----
 *
 * Item words: 0 = lock, 1 = ver, 2-3 = meta, 4 = ident, 5 = data, then key
 * and value. The write order of an install and the read order of a
 * lock-free read together make torn reads detectable under the fabric's
 * contract (8-byte atomicity, in-order completion per endpoint, no order
 * inside one READ or WRITE):
 *   install:        WRITE words 2.. (meta, data, key, value), then WRITE ver,
 *                   then WRITE lock (three ordered verbs, one round trip);
 *   consistent read: READ lock+ver (H1), READ block (D), READ lock+ver (H2) in
 *                   one batch (Double-Read, RCBench 6.1); D is consistent iff
 *                   H1 == H2 and H1.lock is 0 or the reader's own.
 * Proof sketch: a writer locks before its first data word and writes ver
 * (a fresh, unique timestamp) after its last data word and before unlocking.
 * If D overlapped one of its data writes, H1 was read before the unlock and
 * H2 after the lock, so H1 != H2 unless both saw it locked.
 */

/* Word indexes. */
enum { W_LOCK = 0, W_VER = 1, W_META0 = 2, W_META1 = 3, W_IDENT = 4, W_DATA = 5 };

/* READ the block once into a->img (no consistency check beyond identity):
 * for readers that hold the item's lock. CC_ABORT (STALE) if the block was
 * retired or reused since resolution. */
void prim_post_read_block(struct txn *t, struct cc_access *a);
int prim_check_block(struct txn *t, struct cc_access *a);
/* Double-Read: a consistent image in a->img, with img->lock/ver as seen.
 * CC_ABORT (VALIDATE) if writers kept it inconsistent, (STALE) as above. */
int prim_read_consistent(struct txn *t, struct cc_access *a);
/* READ lock+ver into hdr[2] (the Double-Read halves). */
void prim_post_read_hdr(struct txn *t, struct cc_access *a, uint64_t hdr[2]);
/* READ the six header words into v[6] (validation: lock, ver, ident, data). */
void prim_post_read_header(struct txn *t, struct cc_access *a, uint64_t v[6]);
/* After that READ: is the block still the key's (same gen, not DEAD)? */
static inline bool prim_header_same_block(const struct cc_access *a, const uint64_t v[6])
{
	return st_ident_gen(v[4]) == a->ref.gen && !(st_data_flags(v[5]) & ST_F_DEAD);
}
/* Queue/run an 8-byte CAS on item word `word`. */
void prim_post_cas_item(struct txn *t, struct cc_access *a, int word, uint64_t cmp,
			uint64_t swp, uint64_t *old);
/* Queue an 8-byte WRITE of item word `word`. */
void prim_post_write_word(struct txn *t, struct cc_access *a, int word, uint64_t val);
/* Execute everything queued (doorbell batch, one round trip). CC_EFAB on a
 * fabric failure. */
int prim_exec(struct txn *t);

/*
 * prim_post_install - queue the raw install of a's pending write in place
 * (words 2.., then ver, then the lock word `unlock`), in the order above.
 * No undo record: protocols commit through prim_commit_writes.
 */
void prim_post_install(struct txn *t, struct cc_access *a, uint64_t ver, const uint64_t meta[2],
		       uint64_t unlock);

/*
 * prim_commit_writes - the last step every protocol shares, once every
 * written item is locked by the transaction and a->img holds its current
 * image: write the undo records (st.h, "the undo log"), install each
 * written item with version `ver` (relocating it if it outgrew its block),
 * set the commit mark, release every lock, retire the records. 1 round
 * trip when one node is written, 3 otherwise (prim.c). Returns CC_OK
 * (committed), an error or CC_ABORT before the commit point (the abort
 * hook then rolls back), or CC_EUNKNOWN.
 */
int prim_commit_writes(struct txn *t, uint64_t ver);
/* Abort: roll installs back if any were posted, release every lock word
 * the transaction holds, retire its records. */
void prim_release_locks(struct txn *t);

/* ---- the undo log (cc/undo.c), used by prim_commit_writes ---- */

/* Take a coordinator slot for the commit (waits if the worker has none free). */
void undo_slot_get(struct txn *t);
/* Give it back; with quarantine, keep it out of use (a peer failed before
 * its records there were settled). */
void undo_slot_put(struct txn *t);
/* Keep the slot out of use until the nodes in `failed` rejoined. */
void undo_slot_quarantine(struct txn *t, uint64_t failed);
/* Remember that t's lock releases failed on the nodes in `failed`. */
void undo_locks_pending(struct txn *t, uint64_t failed);
/* Build the records of every written access; CC_ETXNLOG if a node's
 * records exceed a slot. */
int undo_build(struct txn *t);
/* Queue the header and records of every written node. */
void undo_post_records(struct txn *t);
/* Queue the decision record (own region) / one node's mark / retire. */
void undo_post_decision(struct txn *t);
void undo_post_mark(struct txn *t, uint16_t node);
void undo_post_retire(struct txn *t, uint16_t node);
/* Queue the old images of every in-place write back (abort after
 * UNDO_INSTALLED). */
void undo_post_rollback(struct txn *t);
/* Free the worker's slot pool state. */
void undo_txn_release(struct txn *t);

/* The node of a lock word's holder (owner words carry it in bits 56..63). */
int cc_lock_holder_node(uint64_t lockword);

/* ---- helpers for protocols ---- */

static inline bool acc_locked(const struct cc_access *a) { return a->pstate & ACC_LOCKED; }

/*
 * Values longer than this are written out of place (a new block and an
 * index swap) even when they fit: the undo record of an in-place write
 * holds the old bytes it overwrites, and a log slot is bounded; a
 * relocation's record is a few words whatever the value's size.
 */
static inline uint32_t cc_inplace_max(const struct st_layout *L)
{
	uint64_t m = L->log_slot_bytes / 8;
	return m < 4096 ? (uint32_t)m : 4096u;
}

/* The pending write of a goes to its reserved block (else it is installed
 * in place and the reservation is given back after commit). */
static inline bool acc_relocates(const struct cc_access *a, const struct st_layout *L)
{
	return a->has_nref && !a->wdel &&
	       (sizeof(struct st_item) + a->klen + a->wvlen > st_class_size(a->ref.cls) ||
		a->wvlen > cc_inplace_max(L));
}

/* A fresh, cluster-unique timestamp (DESIGN.md section 5). */
uint64_t cc_ts_next(struct txn *t);
/* The transaction's start timestamp, taken at first use. */
uint64_t cc_txn_start_ts(struct txn *t);

/* Record an abort cause and return CC_ABORT. */
int cc_abort_with(struct txn *t, int cause);

/* ---- registry (cc/protocols/registry.c) ---- */

const struct cc_protocol *cc_protocol_find(const char *name);
const struct cc_protocol *const *cc_protocol_all(void);

extern const struct cc_protocol cc_nowait;
extern const struct cc_protocol cc_silo;
extern const struct cc_protocol cc_none;

#endif

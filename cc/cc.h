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

#include "cc/exec.h"
#include "cc/txn.h"
#include "rdma/fab.h"
#include "storage/st.h"

struct cc_node;
struct txn;

/* Access modes. */
enum { ACC_R = 1, ACC_W = 2 };

/* A batched read's "not this way": the executor reads the access alone
 * (cc_protocol.read_done). Private to cc: never returned by cc/txn.h. */
#define CC_RETRY 2
/* A batched read's "one more round": read_done queued the next step of
 * the access's read; run the batch and call read_done again
 * (cc_protocol.read_done). Private to cc, as CC_RETRY. */
#define CC_AGAIN 3

/* Protocol-owned state bits of an access (a->pstate). */
enum {
	ACC_LOCKED = 1u << 0,  /* this txn holds the item's lock word */
	ACC_BLIND = 1u << 1,   /* written without being read (no version to validate) */
	ACC_MOVED = 1u << 2,   /* relocated to a bigger block at commit */
	ACC_CASPEND = 1u << 3, /* lock CAS posted, result not yet noted (prim_post_lock_writes) */
	ACC_SWAPPED = 1u << 4, /* relocation: the index points at nref now */
	ACC_NEEDIMG = 1u << 5, /* block READ posted behind that CAS, into img (same) */
	ACC_SHARED = 1u << 6,  /* holds a shared lock (nowait, cc-lock-mode shared) */
	ACC_PROTO = 1u << 7,   /* free for the protocol's own use */
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
	uint8_t wvflags;          /* the value's vflags (txn.h ST_V_*); wval as stored:
				     with ST_V_EXPIRES, the expiry first */
	char *wval;
	uint32_t wvlen, wcap;
	bool has_nref;            /* relocation: value needs a bigger block */
	bool grow;                /* relocate to nref even though the value fits
				     (room for older versions, cc_protocol.versions) */
	struct st_ref nref;
	uint64_t p[2];            /* protocol scratch (e.g. silo: ver at read) */
	/* What the install writes besides the value (prim_commit_writes):
	 * meta words, and `wtlen` bytes of `wtail` laid right after the value
	 * (mvcc's older versions). `otail`: bytes after the value that the
	 * read image carries (so the undo record keeps them). Zero unless the
	 * protocol sets them. */
	uint64_t wmeta[2];
	const char *wtail;
	uint32_t wtlen, otail;
	uint64_t hdr[2][2];       /* Double-Read / validation scratch */
	uint64_t stage[3];        /* values of queued word WRITEs (lock, ver, other) */
	uint64_t vhdr[6];         /* validation READ target */
	/* Replication (cc/repl.c): a written key's backups are t->bk[bk_first
	 * .. bk_first + bk_n) (bk_n 0: not listed yet); a backup's candidate
	 * block while its lock CAS is in flight. */
	int bk_first;
	uint8_t bk_n;
	uint8_t cand_cls;
	uint64_t cand_off;
	/* pending state saved at the first write after savepoint sp_gen */
	uint32_t sp_gen;
	uint8_t s_mode, s_pstate;
	bool s_wdel;
	uint8_t s_vflags;
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
	const char *name;         /* what CONFIG SET/GET cc says */
	const char *id;           /* unique key of the registry (a variant of a
				     name, e.g. "nowait/shared"); NULL = name */
	bool testing_only;        /* selectable only with `testing yes` */
	/* Reads take shared locks (cc-lock-mode shared): the variant of its
	 * name that CONFIG SET cc picks in that mode (cc_protocol_resolve).
	 * Its lock words count holders per node in 8-bit lanes, so every
	 * node id of the cluster must be at most CC_SHARED_MAX_NODE. */
	bool shared_locks;
	/* Installs first turn the lock word into the "installing" mark
	 * (cc_lock_installing), because the protocol's readers may read an
	 * item while another transaction holds its lock (timestamp, mvcc):
	 * a Double-Read then tells an install in progress (cc.h, below). */
	bool install_mark;
	/* Absent items stay in the index after commit (mvcc: a deleted key's
	 * older versions are still readable by older transactions). */
	bool keep_tombstones;
	/* Reads leave a mark on the item (a read timestamp) that writers of
	 * an older timestamp must respect (timestamp, mvcc). A read of an
	 * absent key then needs an item to carry the mark, so no read may
	 * answer "absent" from a bare index lookup (cc_key_absent,
	 * txn_hint_single_read): an older writer could create the key behind
	 * it, and a reader that finished before that read began would put
	 * the cycle in real time (G2-realtime). */
	bool reads_mark;
	/* Items keep older versions after the value (mvcc): blocks are sized
	 * with room for them (cc/txn.c reserve_block). */
	bool versions;
	/* The fetch stage reads the keys a transaction declares for writing
	 * too, with the batched read below, which under this protocol locks
	 * them (2PL hitchhiking, FORD 4.2: the lock CAS and the READ in one
	 * batch). Without it, a key declared for writing only is resolved at
	 * fetch and written blind. */
	bool fetch_locks_writes;
	/* The stage (enum cc_stage) its reads belong to: 2PL's read takes
	 * the lock (RCC's "lock & read"), so CC_STAGE_LOCK; 0 is
	 * CC_STAGE_READ. The executor sets it before read, read_post and
	 * read_done; CC_STAGE_LOCK before write, write_post and write_done;
	 * CC_STAGE_LOCK before commit, CC_STAGE_RELEASE before abort. The
	 * primitives set their own stage (cc.h, prim_stage), so a hook sets it
	 * only for the word ops it posts itself (prim_post_cas_item ...). */
	uint8_t read_stage;
	/* Bytes a's block needs after the value for the protocol's own use
	 * (maat's reader and writer lists, at the end of the block): a write
	 * reserves a block with that much room (cc/txn.c reserve_block), and
	 * never installs in place over it. NULL = none. */
	uint32_t (*item_room)(const struct txn *t, const struct cc_access *a);
	int (*begin)(struct txn *t); /* optional: at the start of each attempt */
	int (*read)(struct txn *t, struct cc_access *a);
	/* Batched first reads, the fetch stage's (cc/fetch.c); both optional.
	 * read_post queues the first step of what `read` would do for a,
	 * without running it, and says whether it did (false: the executor
	 * calls `read` for a alone). Once the batch of every access ran,
	 * read_done carries a's read on as `read` would, and answers:
	 *   CC_OK     the read is done (a->img as `read` leaves it);
	 *   CC_ABORT  the transaction aborts (t->cause set);
	 *   CC_RETRY  not this way: `read` runs for a alone (an image caught
	 *             mid-install, a writer to wait for, a lost race);
	 *   CC_AGAIN  it queued the next step of a's read (a read that takes
	 *             several rounds: timestamp's and mvcc's rts CAS after
	 *             their Double-Read): the executor runs the next batch,
	 *             with every other access's next step, and calls
	 *             read_done for a again. A protocol answers CC_AGAIN a
	 *             bounded number of times per access, then one of the
	 *             three others.
	 * read_done is called after every round for every access posted and
	 * not finished, even after another's abort, so that a lock or a mark
	 * a CAS in the batch won is recorded (and a lock released). The one
	 * exception is a node whose part of a round failed: its accesses get
	 * no more calls (their results mean nothing; prim_exec put the node
	 * in t->unknown, whose locks the abort releases), and the transaction
	 * fails whole (t->fatal). Protocol state kept between the rounds of
	 * one access lives in the access (p[], stage[], hdr[]), as the
	 * protocol's file says. A read_done that runs a batch itself (a
	 * lock given back: prim_lock_won) also runs the steps other accesses
	 * queued before it: their results are in place when their read_done
	 * comes, and if that batch failed, t->fatal fails the transaction
	 * whole whatever they answer.
	 * An access the address cache sent to a block that is no longer its
	 * key's (read_done: CC_ABORT, cause STALE) is resolved again and read
	 * alone (cc/fetch.c), so a read_done that finds it so holds nothing
	 * on that block. */
	bool (*read_post)(struct txn *t, struct cc_access *a);
	int (*read_done)(struct txn *t, struct cc_access *a);
	/* Batched first writes, the fetch stage's, of keys declared for
	 * writing and not for reading (a plain SET, MSET): both optional, unused
	 * under fetch_locks_writes (those protocols lock such keys with
	 * read_post). write_post queues the first step of what `write` would
	 * do for a (its lock CAS and the READ behind it) and says whether it
	 * did; after the rounds, as for read_done, write_done answers CC_OK
	 * (what `write` does before the value is known is done: the lock is
	 * held and on record, a->img is the block read under it, and `write`
	 * then finds nothing to do), CC_ABORT, CC_AGAIN, or CC_RETRY (the
	 * body's first write of a runs `write` alone). Either way a is not
	 * read: a read of it later in the body is the protocol's `read`.
	 * The rules of read_done above hold for write_done too. */
	bool (*write_post)(struct txn *t, struct cc_access *a);
	int (*write_done)(struct txn *t, struct cc_access *a);
	int (*write)(struct txn *t, struct cc_access *a);
	int (*commit)(struct txn *t);
	void (*abort)(struct txn *t);
	/* Optional: after a commit and the executor's cleanup of it
	 * (txn_after_commit: reaping the items it left absent), the last use
	 * of the transaction's owner word (calvin: its RELEASE, after which
	 * a participant may give back latches held under that word). */
	void (*committed)(struct txn *t);
	/* Optional: node `peer` restarted, so no transaction of its earlier
	 * incarnation runs anymore. Drop what of theirs this node's records
	 * still hold (prim_drop_node_words); returns how many words it
	 * cleared. Called by cc_peer_restarted on the thread that settles
	 * the peer, while workers run, before the peer's new incarnation
	 * reaches this node. */
	unsigned (*peer_restarted)(struct cc_node *n, uint16_t peer);
};

struct cc_worker; /* executor state per worker (cc/exec.c) */

/* A committing transaction's undo log (cc/undo.c, st.h "the undo log"). */
enum undo_phase {
	UNDO_NONE,      /* nothing written in place */
	UNDO_INSTALLED, /* records and installs posted: abort must roll back */
	UNDO_DECIDED,   /* the decision or a mark is out: committed */
	UNDO_UNKNOWN,   /* the one written node failed with its mark in flight */
};
/* An extent of a transaction's undo log on one node (st.h): the block,
 * the records of buf it holds, and its header words as written. */
struct undo_ext {
	struct st_ref ref;
	uint32_t boff, blen;
	uint64_t hdr[4];          /* lock 0, ver (next's gen|class), txn, next's offset */
	uint64_t data;
};

struct txn_undo {
	int slot;                 /* coordinator slot, -1 = none held */
	int phase;                /* enum undo_phase */
	uint64_t nodes;           /* bitmask of nodes written */
	char *buf;                /* per written node: st_log_hdr + records */
	uint32_t cap;
	uint32_t boff[FAB_MAX_NODES], blen[FAB_MAX_NODES]; /* blen: what the slot holds */
	struct undo_ext *ext;     /* extents (st.h), in chain order per node */
	int next, ext_cap;
	uint64_t mark;            /* staged words for WRITEs (txn id, zero) */
	uint64_t zero;
};

/* Keys a transaction reached beyond its declaration, for its next attempt
 * (calvin's OLLP): each p is malloc'd, freed by cc_run. */
struct cc_ollp {
	struct cc_key *keys;
	int n, cap;
};

struct txn {
	struct cc_node *node;
	struct cc_worker *ccw;
	const struct cc_protocol *proto;
	uint64_t owner;           /* lock-owner word (cc_owner_word) */
	uint64_t prio_ts;         /* timestamp of the first attempt: the
				     transaction's age, kept across retries */
	int rec;                  /* its transaction record (0..ST_TXN_STATES-1) */
	uint64_t wait_since;      /* cc_wait: when the current wait began */
	uint64_t txn_stage;       /* value of a queued Write^T */
	uint64_t start_ts;
	/* A fresh stamp (cc_ts_next) taken by a begin hook at the first
	 * attempt, kept across retries (txn_begin leaves it; cc_run zeroes it
	 * once): sundial's lower bound of the commit timestamp. 0 = none. */
	uint64_t first_ts;
	uint64_t cts;             /* commit timestamp (protocols that need one) */
	int cause;                /* enum cc_cause of the last abort */
	int attempt;              /* 0 for the first try, then 1, 2, ... (cc_run) */
	uint32_t rand_n;          /* txn_rand's calls in this attempt */
	uint64_t changes;         /* writes of this attempt that changed a key
				     (cc_txn.changes); a savepoint keeps it */
	uint32_t uniq_seq;        /* txn_unique calls in this attempt (txn_begin zeroes it) */
	bool single_read;         /* txn_hint_single_read */
	bool single_write;        /* txn_hint_single_write */
	int fatal;                /* CC_EFAB once a fabric operation failed: the whole
				     transaction fails, never one command of it */
	int64_t now_ms;           /* txn_now_ms: unix ms of this attempt, 0 until read */
	uint64_t unknown;         /* nodes where an op of this attempt failed after it
				     was sent: it may have taken effect (a lock CAS
				     that won), so the abort has those nodes release
				     whatever this transaction holds there
				     (undo_locks_pending) */
	uint64_t unknown_noted;   /* of those, the ones undo_locks_pending recorded */
	uint64_t reached;         /* nodes this attempt's prim_exec sent ops to */
	uint64_t breaks;          /* fab_worker_breaks when the attempt began */
	struct fab_batch batch;
	struct fab_stats fstats;

	struct cc_access **acc;   /* accesses in first-touch order */
	int nacc, acc_cap;
	/* The copies of its writes on backup replicas, made at commit
	 * (cc/repl.c); no protocol hook sees them. */
	struct cc_access **bk;
	int nbk, bk_cap;
	uint32_t sp_gen;          /* current savepoint generation, 0 = none */
	struct cc_access **tab;   /* open hash by key hash, tab_mask+1 chains */
	uint32_t tab_mask;

	/* The declaration cc_run runs (its keys: calvin's lock set), and the
	 * keys OLLP learned in earlier attempts (cc/protocols/calvin.c), kept
	 * across attempts; pdata is the protocol's for one attempt. */
	const struct cc_txn *decl;
	struct cc_ollp *ollp;
	void *pdata;

	struct txn_undo undo;     /* the undo log of the commit (cc/undo.c) */
	uint64_t ring_epoch;      /* durable_epoch at the commit's start: a peer
				     that restarted since has a new log */
	bool durable_waited;      /* this attempt waited for the log (durable_wait) */
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

/* The stage of the ops queued from now on (enum cc_stage, cc/node.h):
 * the primitives set theirs; a protocol sets it for the word ops it posts
 * itself (prim_post_cas_item ...), and the executor before each hook. */
static inline void prim_stage(struct txn *t, int stage)
{
	t->batch.tag = (uint8_t)stage;
}

/* Word indexes. */
enum { W_LOCK = 0, W_VER = 1, W_META0 = 2, W_META1 = 3, W_IDENT = 4, W_DATA = 5 };

/* READ the block once into a->img (no consistency check beyond identity):
 * for readers that hold the item's lock. CC_ABORT (STALE) if the block was
 * retired or reused since resolution. */
void prim_post_read_block(struct txn *t, struct cc_access *a);
int prim_check_block(struct txn *t, struct cc_access *a);
/* After a won lock CAS and the READ behind it: prim_check_block, and
 * ACC_LOCKED (prim_lock_won) or ACC_SHARED (prim_shared_won, nowait's
 * shared mode) if the block is the key's. If not (STALE), the block may be
 * free and about to be initialized for another key, so the lock word is
 * given back at once and only if still ours (CAS, not WRITE), and the
 * access is not marked locked. */
int prim_lock_won(struct txn *t, struct cc_access *a);
/* The exclusive lock step, one batch: CAS a's lock word from cmp to our
 * owner word (*old: what it held), READ the block behind it; with
 * `replicas`, for a key the transaction writes (written already, or the
 * one key of a writing command: txn_hint_single_write), the backups'
 * lock CAS and READ too. Returns the exec's result; then prim_lock_won. */
int prim_lock_and_read(struct txn *t, struct cc_access *a, uint64_t cmp, uint64_t *old);
int prim_shared_won(struct txn *t, struct cc_access *a);
/*
 * Locking the write set at commit (One-Cas, RCBench 6.1: silo's LOCKING,
 * none's latch), in two calls around the prim_exec that runs it, so that
 * the caller may queue more behind it in the same batch.
 *
 * prim_post_lock_writes - queue CAS lock 0 -> t->owner on every written
 * access not locked yet, its result in a->stage[2] (ACC_CASPEND). Behind
 * each CAS, on the same endpoint and so after it, READ the block into
 * a->img (ACC_NEEDIMG): for every such access if `read_all`, else for
 * blind writes (ACC_BLIND) only, whose image was never read. If the CAS
 * wins, that image is the item as its last writer left it (what the undo
 * record keeps); whether it is still the key's block is the caller's to
 * check (prim_check_block). Returns how many CASes it queued.
 *
 * prim_note_locks - after the exec that ran them, `rc` its result: every
 * access whose CAS won is ACC_LOCKED (the abort releases it), ACC_CASPEND
 * and ACC_NEEDIMG are cleared. A CAS on a node of prim_failed_nodes has no
 * result and its access is not marked: it may have won unseen, and
 * prim_exec put that node in t->unknown, which has the abort release there
 * whatever we hold. Returns rc if the exec failed, else CC_ABORT (cause
 * LOCK) if any lock was busy, else CC_OK.
 */
int prim_post_lock_writes(struct txn *t, bool read_all);
int prim_note_locks(struct txn *t, int rc);
/* Double-Read: a consistent image in a->img, with img->lock/ver as seen.
 * CC_ABORT (VALIDATE) if writers kept it inconsistent, (STALE) as above. */
int prim_read_consistent(struct txn *t, struct cc_access *a);
/* The three READs of a Double-Read in one batch, run: lock+ver into
 * a->hdr[0], the block into a->img, lock+ver into a->hdr[1]. Deciding
 * whether the image is consistent is the caller's (prim_read_consistent:
 * halves equal and unlocked; timestamp and mvcc also accept a foreign
 * lock that is not installing). */
int prim_double_read(struct txn *t, struct cc_access *a);
/* The Double-Read's three READs queued, not run (a batched fetch), and
 * the verdict once they ran: CC_OK (a consistent image, as
 * prim_read_consistent gives), CC_ABORT (STALE), or CC_RETRY (a writer
 * was installing: read again, e.g. with prim_read_consistent). */
void prim_post_double_read(struct txn *t, struct cc_access *a);
int prim_double_read_done(struct txn *t, struct cc_access *a);
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
/* Queue an 8-byte FAA on item word `word`. */
void prim_post_faa_item(struct txn *t, struct cc_access *a, int word, uint64_t add,
			uint64_t *old);
/* Queue an 8-byte WRITE of item word `word`. */
void prim_post_write_word(struct txn *t, struct cc_access *a, int word, uint64_t val);
/* Queue a WRITE of `len` bytes at byte `off` of a's block, from src, which
 * must stay unchanged until the exec (maat's reader and writer lists at
 * the end of the block). off + len must lie within the block's class. */
void prim_post_write_bytes(struct txn *t, struct cc_access *a, uint32_t off, const void *src,
			   uint32_t len);
/* Execute everything queued (doorbell batch, one round trip). CC_EFAB on a
 * fabric failure. */
int prim_exec(struct txn *t);
/* After a prim_exec that returned CC_EFAB: the nodes (bit per node) whose
 * part of that batch failed. Their ops have no result, yet one that was
 * sent may have taken effect (a lock CAS that won unseen: prim_exec added
 * those nodes to t->unknown); every other node's part ran and its results
 * are in place. 0 after an exec that succeeded. */
uint64_t prim_failed_nodes(const struct txn *t);
/* The node this transaction runs on (its coordinator): the node of its
 * transaction record and of t->owner's top byte. A lookup, no verb. */
uint16_t prim_self(const struct txn *t);

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
 * reach the commit point (one node written: retire its records; else the
 * decision record, then the marks), release every lock, retire. 1 round
 * trip when one node is written, 2 otherwise (3 on verbs; prim.c). Returns CC_OK
 * (committed), an error or CC_ABORT before the commit point (the abort
 * hook then rolls back), or CC_EUNKNOWN.
 */
int prim_commit_writes(struct txn *t, uint64_t ver);
/*
 * prim_commit_checked - prim_commit_writes with a verdict between the
 * installs and the commit point, for a protocol that validates in the same
 * round trip as it installs (silo across nodes). Whatever the caller
 * queued before the call runs in the first batch, ahead of the installs;
 * `check` runs once the batch that carried the installs completed, and if
 * it returns CC_ABORT nothing is committed: the installs are rolled back
 * from their undo records by the abort hook (prim_release_locks). Sound
 * only when every written item was locked, and its image in a->img
 * confirmed current under that lock, before the call: the undo record is
 * made from a->img, and readers must not see the installs (the lock word
 * stays ours until the commit point). The single-written-node case then
 * takes 2 round trips instead of 1; the others are unchanged.
 */
int prim_commit_checked(struct txn *t, uint64_t ver, int (*check)(struct txn *t));
/* Abort: roll installs back if any were posted, release every lock word
 * the transaction holds, retire its records. */
void prim_release_locks(struct txn *t);
/* After prim_release_locks: a protocol's own cleanup that ran later and
 * lost a reply (a latch CAS won on a node that then failed) grew
 * t->unknown; those nodes release every lock word naming t when the
 * control plane reaches them (undo_locks_pending). A cluster node's
 * restart keeps its peers' lock words (server/recovery.c): without this,
 * such a latch is held for good. */
void prim_locks_pending(struct txn *t);

/* ---- transaction records (RCBench T^g, DESIGN.md section 9) ----
 *
 * Each node has ST_TXN_STATES records (st.h); a transaction holds record
 * `rec` of its own node from its first attempt to its end, and its
 * timestamps and lock words name it (cc_ts_next), so any node can find the
 * record of a lock's holder. Read^T, Write^T and Atomic^T: */
void prim_post_read_txn(struct txn *t, uint16_t node, int rec, void *buf, uint32_t len);
/* One Write^T may be queued per batch (its value is staged in the txn). */
void prim_post_write_txn(struct txn *t, uint16_t node, int rec, int word, uint64_t val);
/* Write^T of `len` bytes (whole words) from word `word` on, from src, which
 * the caller keeps unchanged until the exec: any number per batch. */
void prim_post_write_txn_buf(struct txn *t, uint16_t node, int rec, int word, const void *src,
			     uint32_t len);
void prim_post_atomic_txn(struct txn *t, uint16_t node, int rec, int word, uint64_t cmp,
			  uint64_t swp, uint64_t *old);
/* Word `word` (0 = status, 1..7 protocol-defined) of the transaction's own
 * record (t->rec on prim_self), by an 8-byte acquire load of the node's own
 * region: no verb, nothing counted. What another node's Atomic^T wrote
 * there (wound-wait's wound) is seen whole: an aligned 8-byte load and a
 * CAS are both atomic. Another transaction's record needs Read^T. */
uint64_t prim_read_own_txn(const struct txn *t, int word);
/* Outside any transaction, on node n's own records: set word `word` to 0
 * in every record where it holds a timestamp or tid of node `peer`
 * (cc_ts_node), by a CAS against the value seen, so a concurrent change
 * wins. For a protocol's peer_restarted. Returns how many it cleared. */
unsigned prim_drop_node_words(struct cc_node *n, int word, uint16_t peer);

/* ---- the undo log (cc/undo.c), used by prim_commit_writes ---- */

/* Take a coordinator slot for the commit (waits if the worker has none free). */
void undo_slot_get(struct txn *t);
/* Give it back; with quarantine, keep it out of use (a peer failed before
 * its records there were settled). */
void undo_slot_put(struct txn *t);
/* Keep the slot out of use until the nodes in `failed` (and t->unknown)
 * settled its records and released its locks. */
void undo_slot_quarantine(struct txn *t, uint64_t failed);
/* Remember that t's lock releases failed on the nodes in `failed`, or may
 * have to be made there (t->unknown): those nodes release every lock word
 * naming t when the control plane reaches them (server/recovery.c). May
 * wait for a free entry. */
void undo_locks_pending(struct txn *t, uint64_t failed);
/* Build the records of every written access; CC_ETXNLOG if a node's
 * records exceed a slot. */
int undo_build(struct txn *t);
/* Queue the header and records of every written node. */
void undo_post_records(struct txn *t);
/* Queue the decision record (own region) / one node's mark / retire. */
void undo_post_decision(struct txn *t);
void undo_post_mark(struct txn *t, uint16_t node);
/* Did the decision record land in the own region (a load, no verb)?
 * Meaningful only where fab_exec applies own-region ops itself
 * (fab_node_direct), since a verbs NIC may write it after the load. */
bool undo_decision_landed(struct txn *t);
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
/* The written accesses of a commit are t's own (those with ACC_W) and
 * then their backup copies: the shared commit and abort paths (prim.c,
 * undo.c) walk both with these. */
static inline int txn_nwrit(const struct txn *t)
{
	return t->nacc + t->nbk;
}
static inline struct cc_access *txn_writ(const struct txn *t, int i)
{
	return i < t->nacc ? t->acc[i] : t->bk[i - t->nacc];
}

static inline bool acc_relocates(const struct cc_access *a, const struct st_layout *L)
{
	return a->has_nref && !a->wdel &&
	       (a->grow || sizeof(struct st_item) + a->klen + a->wvlen > st_class_size(a->ref.cls) ||
		a->wvlen > cc_inplace_max(L));
}

/*
 * Timestamps (DESIGN.md section 5, RCC 4.3): clock:48 | node:6 | rec:10,
 * the clock in microseconds since 2025-01-01, `rec` the transaction record
 * of the caller. Unique: a record is used by one transaction at a time and
 * its clock part strictly grows (cc/exec.c). cc_ts_observe advances the
 * worker's clock past a larger timestamp seen in an item (RCC 4.4), so
 * nodes with skewed clocks still order new transactions after old data.
 */
uint64_t cc_ts_next(struct txn *t);
/* The same, unique and growing per worker, but possibly a few tens of
 * microseconds behind the clock (it reuses the worker's last reading): for
 * stamps that must be unique and never ahead of real time, not fresh
 * (transaction ages, silo's versions). */
uint64_t cc_ts_unique(struct txn *t);
void cc_ts_observe(struct txn *t, uint64_t ts);
static inline int cc_ts_node(uint64_t ts) { return (int)((ts >> 10) & 63u); }
static inline int cc_ts_rec(uint64_t ts) { return (int)(ts & 1023u); }

/*
 * Lock words. Every protocol's exclusive lock word is its holder's owner
 * word: node:8 | ts:55 | 1, where ts is the low 55 bits of the holder's
 * prio_ts (its age; the clock part wraps after 6 days, and ages are
 * compared modulo 2^55, so only transactions alive at once are compared).
 * The node in the top byte is what recovery needs (cc_lock_holder_node),
 * the age is what wait-die and wound-wait decide by, from the CAS result
 * alone (RCC 4.3), and the record is in ts's low 10 bits (wound-wait's
 * Atomic^T target). Bit 0 clear with the rest non-zero is "installing"
 * (cc_protocol.install_mark). nowait's shared mode has its own word
 * (cc/protocols/nowait.c), never mixed: a switch resets every lock word.
 */
static inline uint64_t cc_owner_word(unsigned node, uint64_t prio_ts)
{
	return ((uint64_t)(node & 0xffu) << 56) | ((prio_ts & ((1ull << 55) - 1)) << 1) | 1u;
}
static inline uint64_t cc_lock_age(uint64_t lockword) { return (lockword >> 1) & ((1ull << 55) - 1); }
static inline int cc_lock_rec(uint64_t lockword) { return (int)((lockword >> 1) & 1023u); }
/* Is the holder of lock word a older (smaller timestamp) than b's? */
static inline bool cc_lock_older(uint64_t a, uint64_t b)
{
	uint64_t d = (cc_lock_age(a) - cc_lock_age(b)) & ((1ull << 55) - 1);
	return d != 0 && (d >> 54) != 0; /* a - b < 0 modulo 2^55 */
}
static inline uint64_t cc_lock_installing(uint64_t owner) { return owner & ~1ull; }

/*
 * nowait's shared mode (cc-lock-mode shared, RCBench Algorithm 4): a lock
 * word whose top byte is CC_SHARED_TAG counts shared holders, one 8-bit
 * lane per node 1..7 (bits 8*(node-1)...), so recovery can drop exactly a
 * dead node's holds. Exclusive is an owner word as above; 0 is free.
 */
#define CC_SHARED_TAG 0xffull
#define CC_SHARED_MAX_NODE 7
static inline bool cc_lock_is_shared(uint64_t w) { return (w >> 56) == CC_SHARED_TAG; }
static inline uint64_t cc_shared_unit(unsigned node)
{
	return node >= 1 && node <= CC_SHARED_MAX_NODE ? 1ull << (8 * (node - 1)) : 0;
}
static inline unsigned cc_shared_count(uint64_t w, unsigned node)
{
	return node >= 1 && node <= CC_SHARED_MAX_NODE ? (unsigned)(w >> (8 * (node - 1))) & 0xffu : 0;
}
static inline bool cc_lock_is_installing(uint64_t lockword) { return lockword && !(lockword & 1u); }

/*
 * cc_wait - a protocol waits for a lock's holder (wait-die, wound-wait,
 * timestamp ordering): yields the coroutine for a growing pause, never
 * spins the thread. `round` counts the waits for this one lock, from 0.
 * CC_OK to try again, or CC_ABORT (cause LOCK) once the transaction waited
 * longer than CC_WAIT_MAX_MS for it: a holder on a node that died keeps
 * its locks until that node rejoins.
 */
#define CC_WAIT_MAX_MS 200
int cc_wait(struct txn *t, int round);

/*
 * cc_begin_fresh_ts - a begin hook for protocols that order transactions
 * by a timestamp taken per attempt (timestamp, mvcc): a retry must be
 * newer than what made it abort. start_ts := a fresh timestamp, and the
 * owner word carries that age (and still names t->rec).
 */
int cc_begin_fresh_ts(struct txn *t);

/* A fresh, cluster-unique timestamp (DESIGN.md section 5). */
/* The transaction's start timestamp, taken at first use. */
uint64_t cc_txn_start_ts(struct txn *t);

/* Record an abort cause and return CC_ABORT. */
int cc_abort_with(struct txn *t, int cause);

/* ---- registry (cc/protocols/registry.c) ---- */

const struct cc_protocol *cc_protocol_find(const char *name);
const struct cc_protocol *const *cc_protocol_all(void);

/* The registry entry of a CONFIG SET cc name under the lock mode (nowait
 * has a shared-lock variant), or NULL. */
const struct cc_protocol *cc_protocol_resolve(const char *name, bool shared_locks);
/* Index of a protocol in the registry (per-protocol INFO counters). */
int cc_protocol_index(const struct cc_protocol *p);
static inline const char *cc_protocol_id(const struct cc_protocol *p)
{
	return p->id ? p->id : p->name;
}

extern const struct cc_protocol cc_nowait;
extern const struct cc_protocol cc_nowait_shared;
extern const struct cc_protocol cc_waitdie;
extern const struct cc_protocol cc_woundwait;
extern const struct cc_protocol cc_timestamp;
extern const struct cc_protocol cc_mvcc;
extern const struct cc_protocol cc_silo;
extern const struct cc_protocol cc_occ;
extern const struct cc_protocol cc_sundial;
extern const struct cc_protocol cc_cicada;
extern const struct cc_protocol cc_maat;
extern const struct cc_protocol cc_calvin;
extern const struct cc_protocol cc_none;

#endif

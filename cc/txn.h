/*
 * txn: the transaction API that command handlers use (DESIGN.md sections 5
 * and 6). A transaction reads its own writes, and is serializable under
 * whatever protocol the node runs. Handlers never see locks or versions;
 * they call these functions and, when one returns CC_ABORT, return CC_ABORT
 * themselves at once: the executor rolls the whole transaction back and
 * runs every command of it again (without sending any reply of the aborted
 * attempt).
 *
 * Results: 0 (CC_OK); CC_ABORT (a normal outcome, > 0); or a negative error
 * that the handler turns into an error reply for its own command:
 *   CC_EFULL   the MemStore has no room: reply OOM
 *   CC_ETOOBIG key or value over max-key-bytes / max-value-bytes
 *   CC_EFAB    the fabric failed (a peer is gone)
 * After an error the transaction is still usable; nothing of the failed
 * call is visible.
 *
 * Threads: a txn belongs to the coroutine running it.
 */
#ifndef RCKV_CC_TXN_H
#define RCKV_CC_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CC_OK 0
#define CC_ABORT 1
#define CC_EFULL (-2000)
#define CC_ETOOBIG (-2001)
#define CC_EFAB (-2002)
#define CC_EINTERNAL (-2003)
#define CC_ETIMEOUT (-2004) /* cc_run gave up retrying after txn-timeout */
#define CC_ETXNLOG (-2005)  /* the undo records on one node exceed a log slot */
#define CC_EUNKNOWN (-2006) /* a peer failed while the commit was in flight: it may
			       or may not have committed */
#define CC_ENOTSERVING (-2008) /* no lease, or out of the configuration (cc_node) */
#define CC_EALONE (-2007)   /* a body gave up after an abort: nothing was written,
			       the caller runs its parts as transactions of their own */

struct txn;

/*
 * Abort causes: the one table of them. INFO's cc_aborts_<name> lines and
 * the per-protocol aborts_<name> fields are made from it, in this order,
 * so a protocol that needs a new cause adds one row here and nothing else.
 *   X(enum suffix, INFO name, what happened)
 */
#define CC_CAUSE_TABLE(X)                                                                \
	X(LOCK, "lock", "a lock was held by another transaction")                        \
	X(VALIDATE, "validate", "validation found a changed item")                       \
	X(STALE, "stale", "an item moved or was retired under us")                       \
	X(OTHER, "other", "any other conflict")                                          \
	X(DIE, "die", "wait-die: younger than the lock's holder")                        \
	X(WOUNDED, "wounded", "wound-wait: an older transaction wounded us")             \
	X(TS, "ts", "timestamp order: a read or write came too late")                    \
	X(VERSION, "version", "mvcc, cicada: no version old enough in the item's slots") \
	X(RENEW, "renew", "sundial: a read's lease could not be renewed")                \
	X(NEWER, "newer", "cicada: a version newer than the one read, or a later read")  \
	X(INTERVAL, "interval", "maat: the timestamp interval became empty (lb > ub)")   \
	X(LIST_FULL, "list_full", "maat: an item's reader or writer list was full")     \
	X(OLLP, "ollp", "calvin: a key outside the declared set (rerun with it declared)")

#define CC_CAUSE_ENUM(sym, name, what) CC_CAUSE_##sym,
enum cc_cause { CC_CAUSE_TABLE(CC_CAUSE_ENUM) CC_CAUSES };
#undef CC_CAUSE_ENUM

/* The INFO name of a cause ("lock", ...); "other" for one out of range. */
const char *cc_cause_name(int cause);

/* Protocols in the registry, at most (per-protocol INFO counters). */
/*
 * The stages of a transaction (RCC 4, notes-rcc.md section 4): every fabric
 * op a transaction posts belongs to one (its batch's tag, fab.h), and each
 * stage goes one-sided or two-sided (RPC) by the node's cc-stages
 * (cc_node.rpc_stages; CONFIG SET cc-stages). An RPC stage's handler does
 * on the target what the one-sided verbs do, on the same words of the item
 * and the records (FAB_OP_TWOSIDED), so the stages mix freely: RCC 5.2's
 * three rules hold by construction. The Lock stage carries the READ behind
 * each lock CAS (RCC's "lock & read"), and Validate carries sundial's
 * Renew.
 */
enum cc_stage {
	CC_STAGE_READ,     /* fetch: index lookups, reads, read marks */
	CC_STAGE_LOCK,     /* lock CASes and the READs behind them */
	CC_STAGE_VALIDATE, /* validation reads, lease renewals */
	CC_STAGE_LOG,      /* undo records and the decision record */
	CC_STAGE_COMMIT,   /* installs and commit marks */
	CC_STAGE_RELEASE,  /* unlocks, retires, rollbacks */
	CC_STAGES
};
/* "read", "lock", ... */
const char *cc_stage_name(int stage);
/*
 * cc_stages_parse - a cc-stages value into a mask of RPC stages (bit per
 * enum cc_stage): "onesided", "rpc", or a comma list of
 * <stage>=<onesided|rpc> (case-insensitive; a later item of a stage wins),
 * the stages it does not list one-sided. 0, or -EINVAL with err filled.
 */
int cc_stages_parse(const char *s, uint32_t *mask, char *err, size_t errlen);
/* The mask as CONFIG GET says it: "onesided", "rpc", or the RPC stages as
 * "lock=rpc,commit=rpc". */
void cc_stages_format(uint32_t mask, char *buf, size_t len);
#define CC_STAGES_ALL ((1u << CC_STAGES) - 1)

#define CC_MAX_PROTOCOLS 24

/*
 * txn_get - read a key. On 0, *found says whether it exists; if so *val and
 * *vlen hold its value, valid until the transaction ends or the key is
 * written in it. Returns 0, CC_ABORT or an error.
 */
int txn_get(struct txn *t, const char *key, size_t klen, const char **val, size_t *vlen,
	    bool *found);

/* txn_set - write a key's value (creating the key). 0, CC_ABORT or error. */
int txn_set(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen);

/* txn_del - delete a key; *existed says whether it was there. */
int txn_del(struct txn *t, const char *key, size_t klen, bool *existed);

/*
 * What a key holds besides its bytes: its type and its expiry. Both are
 * part of the value: read and written by the transaction with it, under
 * every protocol, wherever the value goes (replicas, versions, images).
 * The item's vflags (storage/st.h) say which; an expiry is stored as the
 * value's first 8 bytes (unix ms, little-endian), so a key that never
 * expires costs nothing. A key past its expiry is absent to every txn_*
 * read (txn_get, txn_get_meta, txn_del), as of the transaction's clock
 * (txn_now_ms); active expiry removes it (txn_reap_expired).
 */
#define ST_V_EXPIRES 0x01u
#define ST_V_TYPE_SHIFT 1
#define ST_V_TYPE_MASK 0x0eu
/* TXN_T_PART: an internal item of a collection (storage/st.h, "Collections"):
 * never a client's key, never with an expiry. */
enum txn_type { TXN_T_STRING = 0, TXN_T_HASH, TXN_T_LIST, TXN_T_SET, TXN_T_ZSET, TXN_T_PART };
struct txn_meta {
	uint8_t type;      /* enum txn_type */
	int64_t expire_ms; /* unix ms; 0: never */
};

/* txn_get with the key's type and expiry (m zeroed when it is absent). */
int txn_get_meta(struct txn *t, const char *key, size_t klen, const char **val, size_t *vlen,
		 bool *found, struct txn_meta *m);

/* txn_set with a type and an expiry (m NULL: a string that never expires,
 * as txn_set). An expiry at or before txn_now_ms deletes the key. */
int txn_set_meta(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen,
		 const struct txn_meta *m);

/* txn_set that keeps the key's expiry and type, as Redis's commands that
 * change a value in place do (INCR, APPEND, SETRANGE, SETBIT). */
int txn_set_keepttl(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen);

/* The transaction's clock for expiry: unix ms, read at its first use in
 * an attempt and the same for the rest of it (as Redis takes one time per
 * command or script). */
int64_t txn_now_ms(struct txn *t);

/* Active expiry: delete key if it exists and is past its expiry; *reaped
 * says whether it did. */
int txn_reap_expired(struct txn *t, const char *key, size_t klen, bool *reaped);

/*
 * txn_version - the key's commit version (0 if it never existed since the
 * block was created), read as part of the transaction: WATCH records it and
 * EXEC compares it inside its own transaction.
 */
int txn_version(struct txn *t, const char *key, size_t klen, uint64_t *ver);

/*
 * Savepoints: a command that fails with an error after some of its writes
 * (MSET on a full MemStore) is rolled back alone, the rest of the
 * transaction going on, so nothing partial of it is ever visible.
 */
struct txn_savepoint {
	int nacc;
	uint32_t gen;
	uint64_t changes; /* cc_txn.changes at the savepoint */
};
struct txn_savepoint txn_savepoint(struct txn *t);
void txn_rollback(struct txn *t, struct txn_savepoint sp);

/*
 * txn_hint_single_read - the transaction is one read-only command on one key
 * (a plain GET): reading it absent needs no placeholder item, because the
 * index lookup that finds it absent is itself a linearizable read of one
 * key. Call before the first txn_* call.
 */
void txn_hint_single_read(struct txn *t);

/*
 * txn_hint_single_write - the transaction is one command on one key that
 * writes it (INCR, APPEND, SET NX): a protocol may take the key's lock at
 * its read, since the transaction will lock it at commit anyway, and save
 * the validation round trip (silo does). Call before the first txn_* call.
 */
void txn_hint_single_write(struct txn *t);

/*
 * txn_unique - a 64-bit value no other transaction gets (in the cluster,
 * across restarts: a mix of the transaction's cluster-unique first
 * timestamp and a count), never 0, and the same in every attempt: the
 * n-th call of an attempt returns what the n-th call of the attempt
 * before returned. Names made from it (a collection's part keys) are
 * then the same keys when the transaction reruns, which calvin's OLLP
 * needs to converge.
 */
uint64_t txn_unique(struct txn *t);

/* The attempt the body runs in: 0 first, then 1, 2, ... after CC aborts. */
int txn_attempt(const struct txn *t);

/*
 * txn_rand - a random number for a body's random choice (RANDOMKEY) that
 * repeats across the transaction's attempts: the n-th call of every
 * attempt returns the same value, and other transactions draw other
 * sequences (the seed is the first attempt's timestamp, unique in the
 * cluster; a rerun after a failover takes a new one). A rerun that makes
 * the same calls so reaches the same keys, which calvin needs: it declares
 * what an attempt reached beyond its declaration for the next (OLLP), and
 * a rerun that chose anew would reach another key every time.
 */
uint64_t txn_rand(struct txn *t);

/*
 * txn_deleted - does the transaction delete key (DEL, RENAME's source, an
 * expiry set in the past), as its writes stand now? Local, and it takes no
 * access of the key: for a walk of the committed keys that must pass over
 * those the transaction removed (RANDOMKEY in MULTI).
 */
bool txn_deleted(struct txn *t, const char *key, size_t klen);

/*
 * txn_written_next - the keys the transaction wrote and did not delete, so
 * far, one per call: *pos starts at 0; true with the next one (*key valid
 * until the next txn_* call), false after the last. A key whose pending
 * value has expired is among them: txn_get says whether it is present.
 * Local: no fabric operation.
 */
bool txn_written_next(struct txn *t, int *pos, const char **key, size_t *klen);

/* Text for an error code, for logs. */
const char *cc_strerror(int rc);

#endif

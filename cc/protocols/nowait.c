/*
 * nowait.c: RDMA-No-Wait, RCBench Algorithm 4 (section 6.2.1) and RCC 4.2,
 * in two lock modes (`cc-lock-mode`):
 *  exclusive (default): the paper's AcqIMExcLock for reads and writes alike,
 *    one CAS (One-Cas); RCBench 7.6.2 found it 1.3x faster than shared
 *    locks at low contention;
 *  shared: AcqIMShLock for reads (Read-Cas: the count is computed from the
 *    word read), AcqIMExcLock for writes, and an upgrade when a transaction
 *    writes what it read.
 * A lock is never waited for: a busy one aborts the transaction.
 *
 * Item metadata: word 0 (lock) =
 *   0                      free;
 *   owner word             exclusive (cc.h: node:8 | age:55 | 1);
 *   0xff:8 | lanes:56      shared (cc.h, CC_SHARED_TAG): one 8-bit count
 *                          per node 1..7, so recovery can drop exactly a
 *                          dead node's holds; all lanes 0 is free too.
 * meta[] unused (0).
 *
 * States and transitions (function):
 *   RUNNING --read (nowait_read): exclusive: CAS 0 -> owner + READ block in
 *             one batch (RCC's lock-and-fetch). shared: READ lock word and
 *             block; if not exclusive, CAS w -> w + our lane's 1, READ
 *             block again (2 round trips); a CAS lost to another sharer is
 *             retried, an exclusive holder aborts --> RUNNING, locked
 *           For declared keys, the fetch stage batches the same steps
 *             over every key (nowait_read_post / nowait_read_done): exclusive,
 *             one round (the CAS and the READ of every key); shared, the
 *             READs in round 1 and each key's CAS + READ in the next
 *             (shared_read_post / shared_read_done), and the keys declared
 *             for writing only take their exclusive lock in round 1
 *             (shared_write_post / nowait_read_done). Fetching k keys takes
 *             1 round trip (exclusive) or 2 (shared), not 1 or 2 per key.
 *   RUNNING --write (nowait_write): exclusive lock as above; shared mode,
 *             already shared by us: upgrade, CAS (only our 1) -> owner
 *   RUNNING --commit (nowait_commit): prim_commit_writes: undo records,
 *             install (One-Write), commit point, unlock (FAA -1 for shared
 *             holds) --> COMMITTED
 *   ABORTED --abort (nowait_abort): prim_release_locks.
 *
 * Invariants:
 *  (1) An exclusive lock word is set to our owner word only by our CAS from
 *      a free word, and cleared only by us (install or release).
 *  (2) Strict 2PL: every item read or written is locked (shared or
 *      exclusive) from its first access until commit or abort, so reads
 *      need no validation and installs cannot interleave.
 *  (3) A shared hold adds 1 to our node's lane and is dropped by FAA -1;
 *      a writer needs the word free (or only our own 1, to upgrade), so no
 *      item is written while another transaction holds it shared.
 *  (4) Nobody waits for a lock, so there is no deadlock (the executor
 *      retries with backoff).
 */
#include "cc/cc.h"

/* CAS cmp -> owner, then READ the block, one batch (RCC's CAS + READ). */

static int lock_exclusive(struct txn *t, struct cc_access *a)
{
	const uint64_t tag = CC_SHARED_TAG << 56;
	/* An upgrade expects only our own shared hold. */
	uint64_t expect = a->pstate & ACC_SHARED ? tag | cc_shared_unit(prim_self(t)) : 0;
	uint64_t old = 0;
	int rc = prim_lock_and_read(t, a, expect, &old);
	if (rc == 0 && expect == 0 && old == tag && t->proto->shared_locks) {
		/* Free, but still tagged (the last sharer's FAA landed and its
		 * clearing CAS did not yet): one more try from the tag. */
		expect = tag;
		rc = prim_lock_and_read(t, a, expect, &old);
	}
	if (rc)
		return rc;
	if (old != expect)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	a->pstate &= (uint8_t)~ACC_SHARED; /* an upgrade: exclusive now */
	return prim_lock_won(t, a);
}

static int lock_shared(struct txn *t, struct cc_access *a)
{
	uint64_t unit = cc_shared_unit(prim_self(t));
	prim_post_read_block(t, a);
	int rc = prim_exec(t);
	for (int tries = 0; rc == 0; tries++) {
		uint64_t w = a->img->lock;
		if (w && !cc_lock_is_shared(w))
			return cc_abort_with(t, CC_CAUSE_LOCK); /* exclusive holder */
		if (cc_shared_count(w, prim_self(t)) == 0xff || tries == 16)
			return cc_abort_with(t, CC_CAUSE_LOCK); /* lane full, or too busy */
		uint64_t nw = (w ? w : CC_SHARED_TAG << 56) + unit;
		uint64_t old = 0;
		prim_post_cas_item(t, a, W_LOCK, w, nw, &old);
		prim_post_read_block(t, a);
		if ((rc = prim_exec(t)))
			return rc;
		if (old == w)
			return prim_shared_won(t, a);
		a->img->lock = old; /* another sharer came or went: recompute */
	}
	return rc;
}

static int nowait_read(struct txn *t, struct cc_access *a)
{
	if (acc_locked(a) || (a->pstate & ACC_SHARED))
		return CC_OK;
	return t->proto->shared_locks ? lock_shared(t, a) : lock_exclusive(t, a);
}

/* The fetch stage's batched read in exclusive mode: every key's lock CAS
 * and block READ in one batch (FORD's hitchhiking), reads and writes
 * alike. Shared mode, an upgrade, and the free-but-tagged word take
 * nowait_read alone. */
static bool nowait_read_post(struct txn *t, struct cc_access *a)
{
	if (t->proto->shared_locks || acc_locked(a) || (a->pstate & ACC_SHARED))
		return false;
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
	prim_post_read_block(t, a); /* after the CAS: invariant (2) */
	return true;
}

static int nowait_read_done(struct txn *t, struct cc_access *a)
{
	if (a->stage[2] == CC_SHARED_TAG << 56)
		return CC_RETRY; /* free but still tagged: lock_exclusive knows */
	if (a->stage[2] != 0)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	return prim_lock_won(t, a);
}

/* Shared mode's batched read: lock_shared's steps, a round each. Round 1
 * READs the block, lock word included; then, while the word has no
 * exclusive holder, the CAS w -> w + our lane's 1 with a READ behind it.
 * stage[0]: the word the last CAS expected; stage[1]: CASes posted;
 * stage[2]: the last CAS's old value. */
static bool shared_read_post(struct txn *t, struct cc_access *a)
{
	if (acc_locked(a) || (a->pstate & ACC_SHARED))
		return false;
	a->stage[1] = 0;
	prim_post_read_block(t, a);
	return true;
}

static int shared_read_done(struct txn *t, struct cc_access *a)
{
	uint64_t w = a->img->lock;
	if (a->stage[1] > 0) {
		if (a->stage[2] == a->stage[0])
			return prim_shared_won(t, a); /* our 1 is in the word */
		w = a->stage[2]; /* another sharer came or went: recompute */
	} else {
		int rc = prim_check_block(t, a); /* a stale address: no CAS on it */
		if (rc)
			return rc;
	}
	if (w && !cc_lock_is_shared(w))
		return cc_abort_with(t, CC_CAUSE_LOCK); /* exclusive holder */
	if (cc_shared_count(w, prim_self(t)) == 0xff || a->stage[1] == 16)
		return cc_abort_with(t, CC_CAUSE_LOCK); /* lane full, or too busy */
	a->stage[0] = w;
	a->stage[1]++;
	prim_post_cas_item(t, a, W_LOCK, w, (w ? w : CC_SHARED_TAG << 56) + cc_shared_unit(prim_self(t)),
			   &a->stage[2]);
	prim_post_read_block(t, a);
	return CC_AGAIN;
}

/* Shared mode's keys declared for writing only: the exclusive lock CAS
 * and the READ in round 1, answered as the exclusive mode's read. */
static bool shared_write_post(struct txn *t, struct cc_access *a)
{
	if (acc_locked(a) || (a->pstate & ACC_SHARED))
		return false;
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
	prim_post_read_block(t, a); /* after the CAS: invariant (2) */
	return true;
}

static int nowait_write(struct txn *t, struct cc_access *a)
{
	return acc_locked(a) ? CC_OK : lock_exclusive(t, a);
}

static int nowait_commit(struct txn *t)
{
	t->cts = cc_ts_next(t);
	return prim_commit_writes(t, t->cts); /* invariant (2): all are locked */
}

static void nowait_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_nowait = {
	.name = "nowait",
	.fetch_locks_writes = true,
	.read_stage = CC_STAGE_LOCK, /* its read takes the lock */
	.read = nowait_read,
	.read_post = nowait_read_post,
	.read_done = nowait_read_done,
	.write = nowait_write,
	.commit = nowait_commit,
	.abort = nowait_abort,
};

const struct cc_protocol cc_nowait_shared = {
	.name = "nowait",
	.id = "nowait/shared",
	.shared_locks = true,
	.read_stage = CC_STAGE_LOCK, /* its read takes the lock */
	.read = nowait_read,
	.read_post = shared_read_post,
	.read_done = shared_read_done,
	.write_post = shared_write_post,
	.write_done = nowait_read_done,
	.write = nowait_write,
	.commit = nowait_commit,
	.abort = nowait_abort,
};

/*
 * nowait.c: RDMA-No-Wait, RCBench Algorithm 4 (section 6.2.1), in its
 * default single-exclusive-lock mode (the paper's AcqIMExcLock for reads
 * and writes alike: 1.3x faster than shared/exclusive at low contention,
 * section 7.6.2). Shared locks (cc-lock-mode shared) come with the
 * lock-protocol issue.
 *
 * Item metadata: word 0 (lock) = 0 when free, else the holder's owner word
 * (node:8 | worker:8 | seq:47 | 1), so the low bit is the paper's EL bit
 * and the rest says whose lock it is. meta[] unused (0).
 *
 * States and transitions:
 *   RUNNING  --read/write: AcqIMExcLock (One-Cas) + Read^D in one batch-->
 *            RUNNING with the item locked; lock held by another -> ABORTED
 *   RUNNING  --commit: per write, install data, ver, then lock := 0
 *            (One-Write); per read-only item, lock := 0; all in one batch-->
 *            COMMITTED
 *   ABORTED  --abort: lock := 0 on every item we locked--> done
 *
 * Invariants:
 *  (1) An item's lock word is set to our owner word only by our successful
 *      CAS from 0, and cleared only by us (install or release).
 *  (2) Every item read or written by a transaction is locked by it from the
 *      first access until commit or abort (strict 2PL), so reads need no
 *      validation and installs cannot interleave.
 *  (3) A transaction never waits for a lock: a CAS that fails aborts it, so
 *      there is no deadlock (the executor retries with backoff).
 */
#include "cc/cc.h"

static int lock_and_read(struct txn *t, struct cc_access *a)
{
	uint64_t old = 0;
	prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &old);
	/* Ordered after the CAS on the same endpoint: if the CAS won, this
	 * READ sees the item as the previous holder left it (invariant 2). */
	prim_post_read_block(t, a);
	int rc = prim_exec(t);
	if (rc)
		return rc;
	if (old != 0)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	a->pstate |= ACC_LOCKED;
	return prim_check_block(t, a);
}

static int nowait_read(struct txn *t, struct cc_access *a)
{
	return acc_locked(a) ? CC_OK : lock_and_read(t, a);
}

static int nowait_write(struct txn *t, struct cc_access *a)
{
	return acc_locked(a) ? CC_OK : lock_and_read(t, a);
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
	.read = nowait_read,
	.write = nowait_write,
	.commit = nowait_commit,
	.abort = nowait_abort,
};

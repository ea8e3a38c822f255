/*
 * waitdie.c: RDMA-Wait-Die, RCBench 6.2.1 (Algorithm 5 with "<" turned
 * into ">" and the wound into an abort) and RCC 4.3 (one-sided WAITDIE).
 *
 * Item metadata: word 0 (lock) = 0 when free, else the holder's owner word
 * node:8 | age:55 | 1 (cc.h), the age being the low bits of the holder's
 * first-attempt timestamp. RCC 4.3 stores the timestamp in the lock word
 * so that the CAS result alone decides: a failed CAS returns the holder's
 * age. meta[] unused (0).
 *
 * States and transitions (function):
 *   RUNNING --read/write (waitdie_lock): CAS 0 -> owner + READ block, one
 *             batch (lock2pl_acquire). Free: locked --> RUNNING.
 *             Held by a younger transaction: WAITING. Held by an older one:
 *             ABORTED, cause "die" (waitdie_conflict).
 *   WAITING --cc_wait (the coroutine yields, 2 us doubling to 256 us) -->
 *             the CAS again; after CC_WAIT_MAX_MS, ABORTED (cause lock).
 *   RUNNING --commit (waitdie_commit): prim_commit_writes: undo records,
 *             installs, commit point, unlocks --> COMMITTED
 *   ABORTED --abort: prim_release_locks; the executor retries with the
 *             same age (cc_run keeps prio_ts), so a transaction only ever
 *             gets older and eventually wins.
 *
 * Invariants:
 *  (1) As nowait's (1) and (2): strict 2PL with exclusive locks; a lock
 *      word holds our owner word only from our CAS to our release.
 *  (2) A transaction waits only for a younger holder, so every wait-for
 *      edge goes from older to younger: no cycle, no deadlock.
 *  (3) Ages are unique (cc.h: timestamps are), so two transactions never
 *      both wait for each other nor both die against each other.
 */
#include "cc/protocols/lock2pl.h"

static int waitdie_conflict(struct txn *t, uint64_t holder, int round)
{
	if (!cc_lock_older(t->owner, holder))
		return cc_abort_with(t, CC_CAUSE_DIE); /* younger: die */
	return cc_wait(t, round);                     /* older: wait */
}

static int waitdie_lock(struct txn *t, struct cc_access *a)
{
	return acc_locked(a) ? CC_OK : lock2pl_acquire(t, a, waitdie_conflict);
}

static int waitdie_commit(struct txn *t)
{
	t->cts = cc_ts_next(t);
	return prim_commit_writes(t, t->cts);
}

static void waitdie_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_waitdie = {
	.name = "waitdie",
	.fetch_locks_writes = true,
	.read_stage = CC_STAGE_LOCK, /* its read takes the lock */
	.read = waitdie_lock,
	.read_post = lock2pl_post,
	.read_done = lock2pl_done,
	.write = waitdie_lock,
	.commit = waitdie_commit,
	.abort = waitdie_abort,
};

/*
 * woundwait.c: RDMA-Wound-Wait, RCBench Algorithm 5 (section 6.2.1).
 *
 * Item metadata: word 0 (lock) = 0 when free, else the holder's owner word
 * node:8 | age:55 | 1 (cc.h). The age orders transactions; its low 10 bits
 * name the holder's transaction record on its node, so the lock word alone
 * says whom to wound (RCBench keeps <bts, Tid> in X^m.pL, set by an extra
 * Read + Write after the lock CAS; here the CAS writes both at once).
 * meta[] unused (0).
 *
 * Transaction record (st.h, struct st_txn_state) word 0, the status:
 *   ST_RN | owner's low 56 bits   running
 *   ST_AB | ...                   wounded (set by a wounder) or aborted
 *   ST_CM | ...                   committing: can no longer be wounded
 * The owner bits make a status word name one transaction, so a wound
 * aimed at a finished transaction (whose record moved on) fails.
 *
 * States and transitions (function):
 *   RUNNING  --begin (ww_begin): status := RN (Write^T, queued with the
 *              first lock batch)
 *   RUNNING  --read/write (ww_lock): CAS 0 -> owner + READ block, one batch
 *              (lock2pl_acquire). Busy, holder younger: wound it,
 *              Atomic^T(holder's status, RN -> AB) (One-Cas), then WAITING;
 *              holder older: WAITING (ww_conflict).
 *   WAITING  --cc_wait, then the CAS again; wounded meanwhile: ABORTED
 *   RUNNING  --at every step (ww_check): our status is AB -> ABORTED, cause
 *              "wounded" (the holder notices at its next step)
 *   RUNNING  --commit (ww_commit): Atomic^T(our status, RN -> CM); lost to
 *              a wound -> ABORTED; else prim_commit_writes --> COMMITTED
 *   ABORTED  --abort: status := AB, prim_release_locks; the retry keeps its
 *              age (cc_run), so it only gets older.
 *
 * Invariants:
 *  (1) Strict 2PL with exclusive locks, as nowait's (1) and (2).
 *  (2) A transaction waits only for an older holder, or for a younger one
 *      it has wounded. A wounded transaction that is still RUNNING aborts
 *      at its next step or wait round, releasing its locks, so the older
 *      one's wait ends: no deadlock.
 *  (3) After our status is CM no wound lands (the CAS expects RN), and we
 *      finish without waiting for any lock: wounders wait at most for our
 *      commit.
 */
#include "cc/node.h"
#include "cc/protocols/lock2pl.h"


enum { ST_RN = 1, ST_CM = 2, ST_AB = 3 };

static uint64_t status_word(int state, uint64_t owner)
{
	return ((uint64_t)state << 56) | (owner & ((1ull << 56) - 1));
}

/* Our own status is in our own region: a load, no verb, sees a wound whole
 * (prim_read_own_txn). */
static int ww_check(struct txn *t)
{
	if (prim_read_own_txn(t, 0) == status_word(ST_AB, t->owner))
		return cc_abort_with(t, CC_CAUSE_WOUNDED);
	return CC_OK;
}

static int ww_begin(struct txn *t)
{
	prim_post_write_txn(t, prim_self(t), t->rec, 0, status_word(ST_RN, t->owner));
	return prim_exec(t);
}

static int ww_conflict(struct txn *t, uint64_t holder, int round)
{
	int rc = ww_check(t);
	if (rc)
		return rc;
	if (cc_lock_older(t->owner, holder)) {
		/* Older: wound the holder (if it still runs), then wait for it
		 * to notice and release. */
		uint64_t old = 0;
		prim_post_atomic_txn(t, (uint16_t)cc_lock_holder_node(holder), cc_lock_rec(holder), 0,
				     status_word(ST_RN, holder), status_word(ST_AB, holder), &old);
		if ((rc = prim_exec(t)))
			return rc;
		if (old == status_word(ST_RN, holder))
			cc_worker_stats(t->ccw)->wounds++;
	}
	return cc_wait(t, round);
}

static int ww_lock(struct txn *t, struct cc_access *a)
{
	int rc = ww_check(t);
	if (rc || acc_locked(a))
		return rc;
	return lock2pl_acquire(t, a, ww_conflict);
}

/* The fetch's batched first try; a wounded transaction reads alone (and
 * aborts there, ww_lock). */
static bool ww_read_post(struct txn *t, struct cc_access *a)
{
	return ww_check(t) == CC_OK && lock2pl_post(t, a);
}

static int ww_commit(struct txn *t)
{
	uint64_t old = 0;
	prim_stage(t, CC_STAGE_VALIDATE); /* not wounded: RN -> CM */
	prim_post_atomic_txn(t, prim_self(t), t->rec, 0, status_word(ST_RN, t->owner),
			     status_word(ST_CM, t->owner), &old);
	int rc = prim_exec(t);
	if (rc)
		return rc;
	if (old != status_word(ST_RN, t->owner))
		return cc_abort_with(t, CC_CAUSE_WOUNDED);
	t->cts = cc_ts_next(t);
	return prim_commit_writes(t, t->cts);
}

static void ww_abort(struct txn *t)
{
	prim_release_locks(t);
	/* Whatever it was (wounded or not), the attempt is over: no wound
	 * aimed at it may land on the retry, which writes RN again. */
	prim_post_write_txn(t, prim_self(t), t->rec, 0, status_word(ST_AB, t->owner));
	(void)prim_exec(t);
}

const struct cc_protocol cc_woundwait = {
	.name = "woundwait",
	.begin = ww_begin,
	.fetch_locks_writes = true,
	.read_stage = CC_STAGE_LOCK, /* its read takes the lock */
	.read = ww_lock,
	.read_post = ww_read_post,
	.read_done = lock2pl_done,
	.write = ww_lock,
	.commit = ww_commit,
	.abort = ww_abort,
};

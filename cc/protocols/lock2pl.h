/*
 * lock2pl.h: the lock step wait-die and wound-wait share (RCBench 6.2.1,
 * RCC 4.3): CAS the item's lock word from 0 to our owner word and READ the
 * block in one batch; on a busy lock, the CAS result (the holder's owner
 * word, which carries its age) goes to the protocol's conflict rule, which
 * waits (CC_OK: try again) or aborts.
 */
#ifndef RCKV_CC_LOCK2PL_H
#define RCKV_CC_LOCK2PL_H

#include "cc/cc.h"

/* conflict(t, holder, round): CC_OK after waiting, else CC_ABORT. */
typedef int (*lock2pl_conflict_fn)(struct txn *t, uint64_t holder, int round);

static inline int lock2pl_acquire(struct txn *t, struct cc_access *a, lock2pl_conflict_fn conflict)
{
	for (int round = 0;; round++) {
		uint64_t old = ~0ull;
		int rc = prim_lock_and_read(t, a, 0, &old); /* the item as its last holder left it */
		if (rc)
			return rc;
		if (old == 0)
			return prim_lock_won(t, a);
		/* Busy, and the block is not our key's any more (our address
		 * is stale: the block was freed, and is claimed by an
		 * allocator, reused by another key, or ours for another key):
		 * the word's holder is not our key's, so its age cannot decide,
		 * and dying or waiting would repeat at every retry through the
		 * same address. STALE re-resolves it (cc_run forgets the
		 * transaction's addresses). */
		if ((rc = prim_check_block(t, a)))
			return rc;
		if (old == t->owner || old == cc_lock_installing(t->owner))
			return cc_abort_with(t, CC_CAUSE_STALE); /* cannot be ours: as above */
		if ((rc = conflict(t, old, round)))
			return rc;
	}
}

/*
 * The fetch stage's batched first try (cc_protocol.read_post/read_done):
 * the same CAS and READ, for every key in one batch. A lock won is
 * recorded; a busy one goes to lock2pl_acquire alone (CC_RETRY), where the
 * protocol's rule waits or aborts, as at a first touch.
 */
static inline bool lock2pl_post(struct txn *t, struct cc_access *a)
{
	if (acc_locked(a))
		return false;
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
	prim_post_read_block(t, a);
	return true;
}

static inline int lock2pl_done(struct txn *t, struct cc_access *a)
{
	uint64_t old = a->stage[2];
	if (old == 0)
		return prim_lock_won(t, a);
	if (old == t->owner || old == cc_lock_installing(t->owner))
		return cc_abort_with(t, CC_CAUSE_STALE); /* as lock2pl_acquire */
	return CC_RETRY;
}

#endif

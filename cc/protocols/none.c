/*
 * none.c: NO concurrency control. Deliberately broken, selectable only with
 * `testing yes`. It exists so that the serializability checker
 * (tests/checker) can prove it sees anomalies: a checker that finds nothing
 * under `none` is blind, and its silence under the real protocols would
 * prove nothing.
 *
 * What it does: every read is a Double-Read (a clean image of one item at
 * one instant, so values are never torn), nothing is ever validated, and
 * commit installs every write computed from whatever was read, however old.
 * Lost updates, write skew, fractured reads and every other isolation
 * anomaly are therefore allowed.
 *
 * What it keeps, and why: physical integrity of the MemStore, which is not
 * concurrency control. An install rewrites the item block in place, and
 * prim_relocate requires the caller to hold the old block's lock word (the
 * index swap and the retire rely on it). Two unlatched installs into one
 * block, or an install into a block another commit just relocated and
 * freed, would corrupt a block that may already belong to another key. So
 * commit latches the lock word of each written item for the one round trip
 * of its install, exactly as long as the install itself takes, and aborts
 * (the executor retries) if the latch is busy or the block moved since the
 * read. Reads never latch and nothing read is checked.
 *
 * States and transitions:
 *   READING  --read: Double-Read (prim_read_consistent)--> READING
 *            --write: nothing (the value is buffered by the executor)
 *   LATCHING --commit: CAS lock 0 -> owner on each written item, then READ
 *              its block (the undo record's old image), one batch; a busy latch or a moved block ->
 *              ABORTED
 *   INSTALLING --per written item: data, ver := cts, lock := 0 --> COMMITTED
 *   ABORTED  --abort: lock := 0 on every item we latched.
 *
 * Invariants (physical only):
 *  (1) The lock word is set to our owner word only by our CAS from 0 and
 *      cleared only by our install or release, so no two installs into one
 *      block overlap.
 *  (2) A block is written or relocated only while latched and after the
 *      block, read after the latch was taken, showed it is still the
 *      block we resolved (prim_check_block), so a retired or reused
 *      block is never written.
 */
#include "cc/cc.h"

static int none_read(struct txn *t, struct cc_access *a)
{
	return prim_read_consistent(t, a);
}

static int none_write(struct txn *t, struct cc_access *a)
{
	(void)t;
	(void)a;
	return CC_OK; /* no lock, no version kept: nothing will be checked */
}

static int none_commit(struct txn *t)
{
	int nw = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		nw++;
		/* Ordered on the item's endpoint: the header READ sees the block
		 * after our CAS (invariant 2). */
		prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
		prim_post_read_block(t, a); /* the image the undo record keeps */
	}
	if (nw == 0)
		return CC_OK;
	int rc = prim_exec(t);
	/* A failed exec still ran the parts of the nodes that answered: their
	 * locks are noted, so the abort releases them. */
	uint64_t lost = rc ? prim_failed_nodes(t) : 0;
	bool busy = false, moved = false;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W) || (lost & (1ull << a->node)))
			continue;
		if (rc) {
			if (a->stage[2] == 0)
				a->pstate |= ACC_LOCKED;
			continue;
		}
		if (a->stage[2] != 0) {
			busy = true;
			continue;
		}
		a->pstate |= ACC_LOCKED;
		if (prim_check_block(t, a) != CC_OK)
			moved = true;
	}
	if (rc)
		return rc;
	if (busy)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	if (moved)
		return cc_abort_with(t, CC_CAUSE_STALE);

	t->cts = cc_ts_next(t);
	return prim_commit_writes(t, t->cts);
}

static void none_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_none = {
	.name = "none",
	.testing_only = true,
	.read = none_read,
	.write = none_write,
	.commit = none_commit,
	.abort = none_abort,
};

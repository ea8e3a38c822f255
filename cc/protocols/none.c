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
 *              its block (the undo record's old image), one batch
 *              (prim_post_lock_writes, reading every block); then
 *              prim_note_locks: a busy latch -> ABORTED (lock); a failed
 *              node -> ABORTED with CC_EFAB, its CASes may have won unseen
 *              (t->unknown has it release them); then a moved block ->
 *              ABORTED (stale)
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
	/* Nothing is latched before commit, so this latches every written
	 * item. Every block is read behind its latch (read_all): the image of
	 * a read may be of any age (nothing is validated), and both the undo
	 * record and the check of invariant (2) need the current one. */
	if (prim_post_lock_writes(t, true) == 0)
		return CC_OK;
	/* A failed exec still ran the parts of the nodes that answered: their
	 * latches are noted, so the abort releases them. */
	int rc = prim_note_locks(t, prim_exec(t));
	if (rc)
		return rc;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if ((a->mode & ACC_W) && (rc = prim_check_block(t, a)))
			return rc; /* moved since the read: STALE, invariant (2) */
	}

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

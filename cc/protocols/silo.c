/*
 * silo.c: RDMA-Silo, RCBench Algorithm 8 (section 6.2.3): optimistic
 * reads, then lock the write set, validate the read and write sets, install.
 *
 * Item metadata: word 0 (lockb) = 0, or the owner word of the transaction
 * holding the item's exclusive lock; word 1 (ver) = the paper's wts, the
 * commit timestamp of the last writer. meta[] unused (0).
 *
 * States and transitions:
 *   READING    --read: Double-Read of the item (One-Read, consistent image),
 *                remember ver-->                                   READING
 *                (the fetch stage posts every declared key's Double-Read
 *                in one batch: silo_read_post / silo_read_done)
 *              --write: as read, unless blind (never read by the txn) -->
 *   LOCKING    --commit: CAS lockb 0 -> owner on every written item not
 *                locked by a pessimistic read, and behind the CAS a READ of
 *                the block of a blind write (the undo record's image), one
 *                batch (prim_post_lock_writes, One-Cas); then
 *                prim_note_locks: a busy lock -> ABORTED (lock); a failed
 *                node -> ABORTED with CC_EFAB, its CASes may have won
 *                unseen (t->unknown has it release them)
 *   VALIDATING --READ the header of every accessed item, one batch: lockb is
 *                0 or ours, ver unchanged, block neither retired nor reused
 *                (validate_one); else ABORTED. (On one node, LOCKING and
 *                VALIDATING share one ordered batch; see silo_commit.)
 *                With writes on several nodes (commit_spread), VALIDATING
 *                is split: each written item's header is READ behind its
 *                own lock CAS and validated once every lock is held; the
 *                read-only items' header READs run in the INSTALLING batch,
 *                ahead of the installs, and their verdict comes before the
 *                commit point (prim_commit_checked): failing, the installs
 *                are rolled back --> ABORTED. Invariant (7).
 *   INSTALLING --prim_commit_writes: undo records, then per written item
 *                ver := cts and data (One-Write), then the commit point,
 *                then lockb := 0 (cc.h, the durable commit) --> COMMITTED
 *   ABORTED    --abort: lockb := 0 on every item we locked.
 *
 * Invariants:
 *  (1) lockb is set to our owner word only by our CAS from 0 and cleared only
 *      by our install or release.
 *  (2) Every install writes a fresh, unique ver with its data, before
 *      unlocking (prim.c), so "ver unchanged and unlocked" at validation means
 *      no write committed to the item since we read it.
 *  (3) A retired or reused block changes its DEAD flag or generation while
 *      locked, so validation detects that the key moved.
 *  (4) Serialization point: the moment all write locks are held. Every read
 *      is validated after it and every write is installed after it.
 *  (5) A read-only transaction of one item needs no validation: its
 *      Double-Read image is a snapshot of the item at one instant.
 *  (6) A pessimistic read (after SILO_PESSIMISTIC_AFTER aborts, or at once
 *      for a one-key write command, txn_hint_single_write) holds lockb
 *      from its read to the end of the transaction, so the item cannot
 *      change in between and its validation (lockb is ours, ver unchanged)
 *      passes without a READ; writers that meet that lock abort and retry,
 *      as they do on any other lock. For INCR this is 2 round trips
 *      instead of 3 (read; lock and validate; install), and the lock would
 *      be taken at commit anyway.
 *  (7) An install that a later validation may undo is sound: it happens
 *      under our lock, so no reader accepts it (a Double-Read rejects a
 *      locked image, a validation a foreign lock) and no writer overwrites
 *      it (invariant 1); and its undo record holds the item as committed,
 *      since the item's own ver was validated under that lock first
 *      (invariant 2: unchanged ver, unchanged image). The read-only
 *      validations still follow every lock (invariant 4). This saves the
 *      round trip between VALIDATING and INSTALLING on the commits that
 *      need three (a decision record): lock, validate + install, release,
 *      and so a fetched ycsb-t transaction takes at most 4.
 */
#include <string.h>

#include "cc/cc.h"

/*
 * After this many aborted attempts a transaction reads pessimistically: it
 * takes lockb on every item it reads (CAS, then READ, in one batch), so a
 * long read set that writers keep invalidating (a 300-key audit over tcp)
 * still commits. Not in RCBench's Algorithm 8; Silo's original design has
 * the same starvation and leaves it to the application. See invariant (6).
 */
#define SILO_PESSIMISTIC_AFTER 3

/* ACC_PROTO: the lock was taken at the read (a pessimistic read), so the
 * item cannot have changed since: invariant (6), no validation READ. */
#define ACC_READ_LOCKED ACC_PROTO

static int silo_read(struct txn *t, struct cc_access *a)
{
	if ((t->attempt >= SILO_PESSIMISTIC_AFTER || t->single_write) && !acc_locked(a)) {
		uint64_t old = ~0ull;
		int rc = prim_lock_and_read(t, a, 0, &old);
		if (rc)
			return rc;
		if (old != 0)
			return cc_abort_with(t, CC_CAUSE_LOCK);
		rc = prim_lock_won(t, a);
		if (rc == CC_OK) {
			a->img->lock = t->owner;
			a->p[0] = a->img->ver;
			a->pstate |= ACC_READ_LOCKED;
		}
		return rc;
	}
	int rc = prim_read_consistent(t, a);
	if (rc == CC_OK)
		a->p[0] = a->img->ver;
	return rc;
}

/* The fetch stage's batched read: every key's Double-Read in one batch
 * (all nodes in flight together); a pessimistic read, and an image caught
 * mid-install, take silo_read alone. */
static bool silo_read_post(struct txn *t, struct cc_access *a)
{
	if (t->attempt >= SILO_PESSIMISTIC_AFTER || t->single_write || acc_locked(a))
		return false;
	prim_post_double_read(t, a);
	return true;
}

static int silo_read_done(struct txn *t, struct cc_access *a)
{
	int rc = prim_double_read_done(t, a);
	if (rc == CC_OK)
		a->p[0] = a->img->ver;
	return rc;
}

static int silo_write(struct txn *t, struct cc_access *a)
{
	if (a->mode & ACC_R)
		return CC_OK; /* already read: its version is in p[0] */
	/* Blind write: the value is replaced whole, so nothing read needs
	 * validating; the block identity is still checked at commit. */
	a->pstate |= ACC_BLIND;
	return CC_OK;
}

/* VALIDATING one access from the header words v (lock, ver, ident, data)
 * read after every lock was held: invariants (2)-(4). */
static int validate_one(struct txn *t, struct cc_access *a, const uint64_t v[6])
{
	if (!prim_header_same_block(a, v))
		return cc_abort_with(t, CC_CAUSE_STALE);
	if ((a->pstate & ACC_BLIND) && prim_check_block(t, a) != CC_OK)
		return CC_ABORT;
	if (v[0] != 0 && v[0] != t->owner)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	if (!(a->pstate & ACC_BLIND) && v[1] != a->p[0])
		return cc_abort_with(t, CC_CAUSE_VALIDATE);
	return CC_OK;
}

/* Does the commit validate a? Not if unused (rolled back to a savepoint),
 * nor if a pessimistic read holds its lock (invariant (6)). */
static bool validates(const struct cc_access *a)
{
	return a->mode && !(a->pstate & ACC_READ_LOCKED);
}

/* prim_commit_checked's verdict on the read-only accesses whose header
 * READs ran with the installs (silo_commit, several written nodes). */
static int validate_reads(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		int rc;
		if (validates(a) && !(a->mode & ACC_W) && (rc = validate_one(t, a, a->vhdr)))
			return rc;
	}
	return CC_OK;
}

/*
 * Several written nodes: LOCKING with each written item's header READ
 * behind its CAS (the image of a blind write, whole), so the written items
 * are validated as soon as the locks are held (invariant (7)); then the
 * read-only items' header READs ahead of the installs, in one batch, and
 * their verdict before the commit point (prim_commit_checked). Round trips:
 * lock, validate + install, release (the decision record is our own
 * region's), against lock, validate, install, release.
 */
static int commit_spread(struct txn *t)
{
	prim_post_lock_writes(t, false);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if ((a->pstate & ACC_CASPEND) && !(a->pstate & ACC_NEEDIMG))
			prim_post_read_header(t, a, a->vhdr);
	}
	int rc = prim_note_locks(t, prim_exec(t));
	if (rc)
		return rc;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!validates(a) || !(a->mode & ACC_W))
			continue;
		if (a->pstate & ACC_BLIND) /* its header came with its image */
			memcpy(a->vhdr, a->img, sizeof(a->vhdr));
		if ((rc = validate_one(t, a, a->vhdr)))
			return rc;
	}
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (validates(a) && !(a->mode & ACC_W))
			prim_post_read_header(t, a, a->vhdr);
	}
	t->cts = cc_ts_unique(t); /* a version: unique is enough (cc.h) */
	return prim_commit_checked(t, t->cts, validate_reads);
}

static int silo_commit(struct txn *t)
{
	int nw = 0, nr = 0;
	uint64_t wnodes = 0;
	for (int i = 0; i < t->nacc; i++) {
		nw += (t->acc[i]->mode & ACC_W) != 0;
		nr += t->acc[i]->mode != 0;
		if (t->acc[i]->mode & ACC_W)
			wnodes |= 1ull << (t->acc[i]->node & 63);
	}
	if (nw == 0 && nr <= 1) { /* invariant (5) */
		return prim_commit_writes(t, 0); /* releases a pessimistic read lock */
	}
	if ((wnodes & (wnodes - 1)) != 0)
		return commit_spread(t);

	/* LOCKING, then VALIDATING. When every item lives on one node, both go
	 * in one batch: operations on one endpoint complete in order, so every
	 * header READ still happens after every lock CAS (invariant 4) and one
	 * round trip is saved. Across nodes they need two round trips: a READ
	 * on one node could otherwise overtake a CAS on another. */
	bool one_node = true;
	for (int i = 1; i < t->nacc && one_node; i++)
		one_node = t->acc[i]->node == t->acc[0]->node;
	/* A blind write was never read: its image for the undo record is
	 * read under the lock, behind the CAS (ACC_NEEDIMG). Items locked by
	 * a pessimistic read are not locked again. */
	prim_post_lock_writes(t, false);
	int rc;
	if (!one_node) {
		/* A failed exec still ran the parts of the nodes that answered:
		 * the locks won there are noted, so the abort releases them. */
		if ((rc = prim_note_locks(t, prim_exec(t))))
			return rc;
	}
	/* On one node, a blind write's block READ follows its own lock CAS in
	 * the batch; once that CAS won, only we change the item (invariants 1
	 * and 3), so that READ's header words are what a validation READ after
	 * every CAS would see, and no second READ of them is posted. */
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (validates(a) && !(one_node && (a->pstate & ACC_NEEDIMG)))
			prim_post_read_header(t, a, a->vhdr);
	}
	rc = prim_exec(t); /* nothing posted: no round trip (fab_exec) */
	if (rc) {
		/* The batch also reached the backups' nodes (cc/repl.c): one
		 * of them may be the one that failed, so the locks won on the
		 * others are noted, and the abort releases them. */
		if (one_node)
			(void)prim_note_locks(t, rc);
		return rc;
	}
	if (one_node) {
		for (int i = 0; i < t->nacc; i++) {
			struct cc_access *a = t->acc[i];
			if (a->pstate & ACC_NEEDIMG)
				memcpy(a->vhdr, a->img, sizeof(a->vhdr));
		}
		if ((rc = prim_note_locks(t, 0)))
			return rc;
	}
	t->cts = cc_ts_unique(t); /* a version: unique is enough (cc.h) */
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (validates(a) && (rc = validate_one(t, a, a->vhdr)))
			return rc;
	}

	/* INSTALLING, and the read locks of a pessimistic attempt released. */
	return prim_commit_writes(t, t->cts);
}

static void silo_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_silo = {
	.name = "silo",
	.read = silo_read,
	.read_post = silo_read_post,
	.read_done = silo_read_done,
	.write = silo_write,
	.commit = silo_commit,
	.abort = silo_abort,
};

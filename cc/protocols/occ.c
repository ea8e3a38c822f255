/*
 * occ.c: OCC as RCC implements it after DrTM+H (RCC sections 4 and 4.1,
 * notes-rcc.md 5.3): reads take no lock and remember the version they saw;
 * commit locks the write set, validates the read set, logs, installs and
 * releases (the stages RCC's OCC names: Read, Lock, Validate, Log, Commit,
 * Release; notes-rcc.md 4.7 and appendix A), every stage one-sided: the
 * lock stage is CAS+READ per written item (RCC 4.2's lock-and-fetch, the
 * READ behind the CAS on the same endpoint, so after it), validation is
 * READs, the log and the install are WRITEs. RCC's text gives no OCC
 * detail beyond this and DrTM+H's paper is not among ../shared/papers, so
 * what follows is the classic OCC (Kung and Robinson, RCC [21]) on those
 * one-sided stages; where it chooses, it says so.
 *
 * How it differs from silo (silo.c, RCBench Algorithm 8), in what it
 * validates and when:
 *  - silo locks the write set with bare CASes (a READ behind the CAS only
 *    for a blind write's image) and then, in a stage of its own once every
 *    lock is held, READs the header of every accessed item, read set and
 *    write set alike, and checks each version. (Writing several nodes, it
 *    takes occ's lock stage below, and validates its read-only items in
 *    the batch that installs, rolling the installs back if they fail:
 *    silo.c invariant (7), an rckv optimization, not Algorithm 8.)
 *  - occ checks a written item at the lock stage, on the header the READ
 *    behind its own CAS fetched under the lock, and its validation stage
 *    READs only the items read and not written, before any install (RCC's
 *    stage order: lock, validate, log, commit). A transaction whose reads
 *    are all written (read-modify-write) has no validation stage: across
 *    nodes its lock stage is its only round trip before the log, where
 *    silo writing one node needs two (lock, then validate);
 *    test_protocol_occ.py counts it. With items only read, occ takes a
 *    validation round of its own.
 *  - occ never reads pessimistically. silo takes the lock at the read for
 *    a one-key write command and after 3 aborts (its invariant (6)); occ
 *    reads optimistically on every attempt and leaves a transaction that
 *    keeps failing validation to the executor's backoff and txn-timeout.
 *    That is the OCC RCC measures, the one that loses most as contention
 *    grows (RCC 6.4). A one-key INCR costs 3 round trips and 9 verbs
 *    (read; lock and fetch; install) where silo's costs 2 and 6.
 *
 * Deviations from RCC (and the DrTM+H choices it takes), and why:
 *  - Versions are unique stamps (cc_ts_unique), not per-record sequence
 *    numbers incremented by each commit (the `seq` word of the RCC code's
 *    header, notes-rcc.md appendix A, a hint): the shared install path
 *    (prim_commit_writes) writes one version to every item of a commit,
 *    and WATCH compares versions across protocol switches. A stamp never
 *    installed before detects a change exactly as a new sequence number
 *    does (invariant (2)).
 *  - The read is a Double-Read (READ lock+ver, READ block, READ lock+ver,
 *    one batch; cc.h), not one READ of the record: the fabric is atomic
 *    per 8 bytes only and orders nothing inside one READ, so a single
 *    READ could pair new data with an old version.
 *  - The READ behind a CAS fetches the 48-byte header (lock, ver, ident,
 *    data) of an item the transaction read already, and the whole block
 *    only for a blind write (whose image the undo record needs): the
 *    value of a read item is in hand, and the header is what the check
 *    needs.
 *  - Logging is rckv's undo log inside prim_commit_writes (records, then
 *    installs, then the commit point), not RCC 4.1's coordinator log of
 *    the updates to backups: every protocol commits through that one
 *    durable path, replication included (DESIGN.md section 7).
 *  - On one node, the lock stage and the validation stage share one batch
 *    (as silo does): operations on one endpoint complete in order, so
 *    every validation READ still runs after every lock CAS (invariant (5)).
 *    Across nodes they are two round trips.
 *  - No abort cause of its own: a changed item is `validate` whichever
 *    stage found it, a held lock `lock`, a moved block `stale`.
 *
 * Item metadata: word 0 (lock) = 0, or the owner word (cc.h) of the
 * transaction holding the item's exclusive lock, from its lock stage to
 * its install or release; word 1 (ver) = the stamp of the last committed
 * write. meta[] unused (0). Per access: p[0] = ver as read; vhdr = the
 * header READ at the lock or validation stage.
 *
 * States and transitions (function):
 *   READING    --read (occ_read; batched by the fetch stage: occ_read_post,
 *                occ_read_done): Double-Read, p[0] := ver --> READING
 *              --write (occ_write): a read item keeps its p[0]; an item
 *                never read is a blind write (ACC_BLIND) --> READING
 *              --commit (occ_commit) --> LOCKING, or COMMITTED at once for
 *                a read-only transaction of one item (invariant (6))
 *   LOCKING    --occ_post_lock: per written item CAS lock 0 -> owner and
 *                behind it READ the header (a read item) or the block (a
 *                blind write), one batch over every node; prim_note_locks:
 *                a busy lock -> ABORTED (lock); occ_check_written: a
 *                changed version -> ABORTED (validate), a moved block ->
 *                ABORTED (stale) --> VALIDATING
 *   VALIDATING --occ_post_validate: READ the header of every item read and
 *                not written, one batch (none: no round trip); occ_check_read:
 *                locked by another -> ABORTED (lock), ver changed ->
 *                ABORTED (validate), moved -> ABORTED (stale) --> LOGGING
 *   LOGGING, INSTALLING, RELEASING
 *              --prim_commit_writes(t, cts): undo records, per written item
 *                ver := cts with its data, commit point, lock := 0
 *                --> COMMITTED
 *   ABORTED    --abort (occ_abort): prim_release_locks: lock := 0 on every
 *                item whose CAS won (and a rollback if installs were
 *                posted).
 *
 * Invariants:
 *  (1) A lock word holds our owner word only from our CAS from 0 at the
 *      lock stage to our install or release; reads never lock.
 *  (2) Every install writes a fresh, unique ver (a stamp from
 *      cc_ts_unique, cluster-unique) with its data while holding the
 *      item's lock, and unlocks after (prim.c). No ver seen unlocked ever
 *      comes back (a commit that fails after its installs restores the
 *      old ver and data before it releases the lock, prim_release_locks),
 *      so an item whose ver is the one we read, seen unlocked or locked by
 *      us, holds the value we read.
 *  (3) A block that is retired or reused changes its DEAD flag or its
 *      generation while locked, so a header READ tells that the key moved
 *      (prim_header_same_block, prim_check_block).
 *  (4) Lock-stage validation: the READ behind our won CAS runs after it
 *      (same endpoint, in order); by (1) nobody changes the item from that
 *      CAS to our install, so ver == p[0] in that READ means the item is
 *      as we read it, up to our install. A written item needs no later
 *      check.
 *  (5) Serialization point: the instant the last write lock is won. Every
 *      validation READ runs after it (across nodes: the next round trip;
 *      on one node: later on the same endpoint), and by (2) an item read
 *      and found unchanged and unlocked then held the value we read at
 *      the serialization point; every install follows it under locks held
 *      since before it.
 *  (6) A read-only transaction of one item needs no validation: its
 *      Double-Read image is the item at one instant (cc.h).
 *  (7) A blind write validates nothing read (the value is replaced
 *      whole), only that the block it locked is still the key's (3).
 */
#include "cc/cc.h"

static int occ_read(struct txn *t, struct cc_access *a)
{
	int rc = prim_read_consistent(t, a); /* no lock: invariant (1) */
	if (rc == CC_OK)
		a->p[0] = a->img->ver;
	return rc;
}

/* The fetch stage's batched read: every key's Double-Read in one batch; an
 * image caught mid-install is read again alone (CC_RETRY -> occ_read). */
static bool occ_read_post(struct txn *t, struct cc_access *a)
{
	prim_post_double_read(t, a);
	return true;
}

static int occ_read_done(struct txn *t, struct cc_access *a)
{
	int rc = prim_double_read_done(t, a);
	if (rc == CC_OK)
		a->p[0] = a->img->ver;
	return rc;
}

static int occ_write(struct txn *t, struct cc_access *a)
{
	(void)t;
	if (!(a->mode & ACC_R))
		a->pstate |= ACC_BLIND; /* invariant (7) */
	return CC_OK;
}

/* Read and not written: checked by the validation stage. */
static bool only_read(const struct cc_access *a)
{
	return a->mode == ACC_R;
}

/* VALIDATING, posted: the header of every item only read. */
static int occ_post_validate(struct txn *t)
{
	int n = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (only_read(a)) {
			prim_post_read_header(t, a, a->vhdr);
			n++;
		}
	}
	return n;
}

/* LOCKING, posted: per written item the lock CAS and, behind it on the
 * same endpoint, the READ that fetches what the lock protects: the block
 * of a blind write (ACC_NEEDIMG, prim_post_lock_writes), the header of a
 * read item. With `and_validate`, the validation READs follow in the same
 * batch (one node only: invariant (5)). */
static void occ_post_lock(struct txn *t, bool and_validate)
{
	prim_post_lock_writes(t, false);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if ((a->pstate & ACC_CASPEND) && !(a->pstate & ACC_BLIND))
			prim_post_read_header(t, a, a->vhdr);
	}
	if (and_validate)
		(void)occ_post_validate(t);
}

/* LOCKING, checked once every write lock is ours: invariants (4), (7). */
static int occ_check_written(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		if (a->pstate & ACC_BLIND) {
			if (prim_check_block(t, a) != CC_OK)
				return CC_ABORT; /* stale: invariant (3) */
			continue;
		}
		const uint64_t *v = a->vhdr;
		if (!prim_header_same_block(a, v))
			return cc_abort_with(t, CC_CAUSE_STALE);
		if (v[0] != t->owner) /* our CAS won, then this READ: (1) */
			return cc_abort_with(t, CC_CAUSE_LOCK);
		if (v[1] != a->p[0])
			return cc_abort_with(t, CC_CAUSE_VALIDATE);
	}
	return CC_OK;
}

/* VALIDATING, checked: invariants (2), (3), (5). */
static int occ_check_read(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!only_read(a))
			continue;
		const uint64_t *v = a->vhdr;
		if (!prim_header_same_block(a, v))
			return cc_abort_with(t, CC_CAUSE_STALE);
		if (v[0] != 0)
			return cc_abort_with(t, CC_CAUSE_LOCK); /* a writer may install now */
		if (v[1] != a->p[0])
			return cc_abort_with(t, CC_CAUSE_VALIDATE);
	}
	return CC_OK;
}

static bool on_one_node(const struct txn *t)
{
	for (int i = 1; i < t->nacc; i++)
		if (t->acc[i]->node != t->acc[0]->node)
			return false;
	return true;
}

static int occ_commit(struct txn *t)
{
	int nw = 0, nr = 0;
	for (int i = 0; i < t->nacc; i++) {
		nw += (t->acc[i]->mode & ACC_W) != 0;
		nr += t->acc[i]->mode != 0;
	}
	if (nw == 0 && nr <= 1)
		return prim_commit_writes(t, 0); /* invariant (6): nothing to do */

	/* LOCKING (and, on one node, VALIDATING in the same batch). A failed
	 * exec still ran the parts of the nodes that answered: the locks won
	 * there are noted, so the abort releases them. */
	const bool one_node = on_one_node(t);
	occ_post_lock(t, one_node);
	int rc = prim_note_locks(t, prim_exec(t));
	if (rc == CC_OK)
		rc = occ_check_written(t);
	if (rc)
		return rc;

	/* VALIDATING: after every lock is held (invariant (5)). */
	if (!one_node && occ_post_validate(t) > 0 && (rc = prim_exec(t)))
		return rc;
	if ((rc = occ_check_read(t)))
		return rc;

	/* LOGGING, INSTALLING, RELEASING. */
	t->cts = cc_ts_unique(t); /* a version: unique is enough (2) */
	return prim_commit_writes(t, t->cts);
}

static void occ_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_occ = {
	.name = "occ",
	.read = occ_read,
	.read_post = occ_read_post,
	.read_done = occ_read_done,
	.write = occ_write,
	.commit = occ_commit,
	.abort = occ_abort,
};

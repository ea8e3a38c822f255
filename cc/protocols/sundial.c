/*
 * sundial.c: RDMA-SUNDIAL, RCC section 4.5 (Figs. 9 and 10; notes-rcc.md
 * 5.5), after Sundial's logical leases: every item carries a lease
 * [wts, rts] (the version was written at wts and may be read by any
 * transaction that commits at a timestamp inside it), and a transaction
 * picks its commit timestamp commit_tts from the leases it met, instead of
 * aborting when a read item changed as OCC does: it aborts only when a
 * lease it needs cannot be extended up to commit_tts.
 *
 * Item metadata (words of struct st_item, cc.h):
 *   word 0 lock   0, or the owner word (cc.h) of the writer that holds it
 *                 from its LOCK stage to its install. Set by CAS from 0,
 *                 cleared by its holder only (invariant (1)).
 *   word 1 ver    wts: the commit_tts of the version's writer
 *                 (prim_commit_writes(t, commit_tts)); 0 for a block never
 *                 written. Strictly increasing per item (invariant (2)), so
 *                 it changes on every install, as the Double-Read needs.
 *   word 2 meta0  rts: the end of the version's lease. Raised only by a
 *                 renewal's CAS, set to commit_tts (= the new wts) by an
 *                 install. After a protocol switch it is 0 (st_reset_meta)
 *                 with ver kept, so the lease's end is read as
 *                 max(meta0, ver) everywhere (lease_end).
 *   word 3 meta1  unused (0).
 * Timestamps are cc.h's 64-bit stamps (clock:48 | node:6 | rec:10),
 * compared as integers; rts + 1 is simply the next integer.
 *
 * Per access: p[0] = wts of the version read, p[1] = meta0 as last seen
 * (the next renewal CAS compares with it). Per transaction: t->cts =
 * commit_tts so far, t->start_ts = its lower bound (the first deviation
 * below).
 *
 * States and transitions (function):
 *   BEGIN     --sd_begin: start_ts := first_ts, a fresh stamp of the first
 *               attempt (kept across retries); commit_tts := start_ts
 *               --> RUNNING
 *   RUNNING   --first read of X (sd_read; batched in the fetch stage by
 *               sd_read_post/sd_read_done): Double-Read (RCBench 6.1: READ
 *               lock+ver, READ block, READ lock+ver, one batch); consistent
 *               and unlocked: remember wts and rts, commit_tts :=
 *               max(commit_tts, wts) --> RUNNING. Locked by a writer, or
 *               torn: WAITING. A one-key write command (INCR:
 *               txn_hint_single_write) instead locks X at the read (CAS +
 *               READ, lock2pl_acquire), waiting while it is held.
 *   WAITING   --cc_wait (the coroutine yields, bounded by CC_WAIT_MAX_MS:
 *               then ABORTED, cause lock), then the read again.
 *   RUNNING   --write (sd_write): nothing yet; the write is pending in the
 *               access (blind if never read).
 *   LOCKING   --commit (sd_commit, lock_writes): CAS lock 0 -> owner and
 *               READ the block behind it, every written item not locked
 *               yet, one batch (prim_post_lock_writes). A busy lock:
 *               ABORTED (lock), as RCC. Under the lock: the block is still
 *               the key's (else ABORTED, stale); if X was read, wts is the
 *               one read (else ABORTED, validate); commit_tts :=
 *               max(commit_tts, lease_end + 1).
 *   WAITCLOCK --commit_wait: the worker's clock is advanced past
 *               commit_tts and the coroutine sleeps until the real clock
 *               has passed it (cc_ts_observe + cc_ts_next; invariant (6)).
 *   RENEWING  --renew_start, renew_post_all, renew_finish: every
 *               read-only item whose lease ends before commit_tts: CAS rts
 *               (seen -> commit_tts), then READ the header, then READ
 *               lock+ver, three ordered verbs per item, all items in one
 *               batch (invariant (4)); with writes on several nodes that
 *               batch is the installs' (prim_commit_checked: the verdict
 *               comes before the commit point, and the installs, under our
 *               locks, are rolled back if it fails). Then per item:
 *               - block moved or wts changed: ABORTED (renew);
 *               - locked by another writer: WAITING for it if we hold no
 *                 lock or it is older than us (invariant (5)), else
 *                 ABORTED (renew); after the wait, the renewal again;
 *               - CAS lost to another renewal below commit_tts: again
 *                 from the value it returned (ABORTED, renew, after
 *                 SD_RENEW_TRIES rounds);
 *               - else renewed. A read whose lease already covers
 *                 commit_tts needs no verb (INFO cc_lease_hits).
 *   INSTALLING --prim_commit_writes(t, commit_tts): undo records, each
 *               written item gets its value with wts = rts = commit_tts
 *               (ver := commit_tts, meta0 := commit_tts), the commit
 *               point, unlock --> COMMITTED
 *   ABORTED   --sd_abort: prim_release_locks (nothing was installed, or
 *               the undo records roll it back).
 *
 * Invariants:
 *  (1) A lock word holds our owner word only from our CAS (from 0) to our
 *      install or release; while it does, only our install changes the
 *      item's ver and data. A renewal's CAS may change rts under a lock,
 *      but such a renewal sees the lock and does not count (invariant 4),
 *      and the install overwrites rts anyway.
 *  (2) wts strictly grows per item: a writer installs wts = commit_tts >=
 *      lease_end + 1 > wts, with lease_end read under its lock, where it
 *      cannot change (by (1) and (4) only failed renewals touch it then).
 *      So every install changes ver (the Double-Read's torn-read
 *      detection, cc.h) and a changed version is never mistaken for the
 *      one read (no ABA).
 *  (3) A committed reader's commit_tts lies in the lease of the version it
 *      read: commit_tts >= wts by construction, and <= rts either because
 *      the rts it read was already >= commit_tts, or by a renewal that
 *      succeeded (4).
 *  (4) Renewal atomicity. RCC renews with a CAS on rts alone, which does
 *      not see a change of wts or of the lock (notes-rcc.md 5.5). Here the
 *      CAS on rts is followed, on the same endpoint and so after it, by a
 *      READ of the header (the lock word, and ident/data: same block) and
 *      then a READ of lock+ver (its ver). A renewal counts only if the
 *      first READ shows the lock free (or ours) and the second the wts we
 *      read. Then every writer W of the item's next version has
 *      commit_tts(W) > ours: W reads lease_end under its lock. If that read
 *      comes after our CAS, it sees rts >= our commit_tts (only installs
 *      lower rts, and W holds the lock). If it came before, W locked
 *      before our CAS, and either still held the lock when our first READ
 *      read the lock word (we saw it: no renewal) or had released it
 *      before, so it had written ver before that too (install order, cc.h:
 *      ver before the unlock) and our second READ, later still, saw the new
 *      ver (no renewal). The lock and ver are read by two READs in that
 *      order because the words of one READ have no order. A CAS that
 *      failed because rts was already >= commit_tts counts the same way.
 *      Packing wts and rts in one word (RCC's code, Appendix A) would cost
 *      the 64-bit timestamps and make ver protocol-specific; WATCH and the
 *      other protocols read ver as a version.
 *  (5) Waits. A read waits for a lock only while its transaction holds no
 *      lock (locks are taken at commit; the one-key write command waits
 *      for its lock holding none). A renewal waits for a lock only if we
 *      hold none, or its holder is older (cc_lock_older on the owner
 *      words, whose ages are first-attempt stamps). Lock acquisition
 *      never waits at commit (a busy lock aborts). In a cycle of waits
 *      every member would be waited for, so would hold a lock, so would
 *      wait only for an older one: impossible. No deadlock; and every wait
 *      is bounded (CC_WAIT_MAX_MS) for holders on a failed node.
 *  (6) No wts or rts is ever ahead of the real clock when written: a
 *      transaction that would install or renew with commit_tts sleeps
 *      first until the clock has passed it (commit_wait), and reads take
 *      no timestamp. With (7), commit order follows real time.
 *  (7) commit_tts >= start_ts, a stamp taken after the transaction was
 *      invoked (its first attempt's cc_ts_next). If T1 replied before T2
 *      was invoked, commit_tts(T1) < start_ts(T2) <= commit_tts(T2) by (6).
 *  Serial order: by commit_tts, then by commit instant. A read-from edge
 *  goes to an equal or larger commit_tts (reads see committed versions
 *  only, and commit_tts >= wts) and to a later commit; an anti-dependency
 *  (R read the version W replaced) and a write-write edge go to a strictly
 *  larger one, by (2)-(4). So the conflict graph has no cycle, and with
 *  (7) no cycle through real-time edges either: strictly serializable.
 *
 * Deviations from the paper, and why:
 *  - commit_tts starts at a fresh stamp of the transaction's first attempt
 *    (invariant (7)), where Sundial starts it at 0. Leases alone order
 *    transactions only logically: a read-only transaction that reads old
 *    leases would commit at a small timestamp, before a transaction that
 *    finished before it began, and with a third transaction between them
 *    (it read what the first overwrote and wrote what the second read)
 *    the history is serializable but not strictly (the checker's
 *    G2-realtime; with commit_tts starting at 0, tests/checker/run.py
 *    found exactly that cycle, T1 -rt-> T2 -rw-> T3 -rw-> T1 with T2 a
 *    read-only append-list read, in 15 s on shm3 at zipf 0.99). The price: a lease that ends before the transaction
 *    began must be renewed; leases that later transactions extended (hot
 *    items) still cover it, and a retry keeps the first attempt's bound,
 *    so the leases extended meanwhile cover it too.
 *  - Writes lock at commit, all in one batch (as silo does), not at each
 *    write access: the checks under the lock are the paper's (wts
 *    unchanged, commit_tts > rts), one round trip for all writes instead
 *    of one per write, and the lock is held only for the commit, so
 *    readers can afford to wait for it.
 *  - Reads wait for a writer's lock (bounded) where RCC's renewal fails:
 *    if the writer aborts, the renewal then succeeds. A first read also
 *    waits rather than read the version under a lock: the lock covers a
 *    few round trips, and a relocation's new block carries its writer's
 *    plain lock before the commit point.
 *  - Renewal is a CAS on rts followed by two READs (invariant (4)), not a
 *    CAS alone; RCC's RPC form of the stages is not implemented.
 *  - Absent keys keep their item (keep_tombstones) and are read as items
 *    (reads_mark), as under timestamp: the lease a reader renews on an
 *    absent key must outlive the transaction, or a writer that creates the
 *    key would not be ordered after that reader.
 *  - commit_tts is made of real stamps, so a commit waits for the clock
 *    to pass it (invariant (6)); it is already past in all but the rarest
 *    cases (rts + 1 carried into the next microsecond).
 */
#include "cc/node.h"
#include "cc/protocols/lock2pl.h"

/* Inconsistent Double-Reads retried at once before waiting between them:
 * an install holds the lock for about one round trip. */
#define SD_REREAD_NOW 2
/* Renewal rounds before giving up (other renewals keep moving rts, or a
 * lock keeps coming back). */
#define SD_RENEW_TRIES 32

/* ACC_PROTO: a renewal of this read is under way (renew_start..renew_finish). */
#define ACC_RENEWING ACC_PROTO

/* The end of the lease of the version an image shows: rts, or wts after a
 * switch reset rts to 0. */
static inline uint64_t lease_end(uint64_t ver, uint64_t meta0)
{
	return meta0 > ver ? meta0 : ver;
}

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int sd_begin(struct txn *t)
{
	if (!t->first_ts)
		t->first_ts = cc_ts_next(t); /* invariant (7) */
	t->start_ts = t->first_ts;
	t->cts = t->start_ts;
	return CC_OK;
}

/* A consistent image of a's current version is in a->img: remember its
 * lease and order commit_tts after its writer (RS access). */
static void note_read(struct txn *t, struct cc_access *a)
{
	a->p[0] = a->img->ver;
	a->p[1] = a->img->meta[0];
	t->cts = max64(t->cts, a->img->ver);
}

/* One-key write command: lock at the read, waiting for a holder; we hold
 * no other lock (invariant (5)). */
static int wait_for_holder(struct txn *t, uint64_t holder, int round)
{
	(void)holder;
	return cc_wait(t, round);
}

static int read_locked(struct txn *t, struct cc_access *a)
{
	int rc = lock2pl_acquire(t, a, wait_for_holder);
	if (rc)
		return rc;
	a->img->lock = t->owner;
	note_read(t, a);
	return CC_OK;
}

static int sd_read(struct txn *t, struct cc_access *a)
{
	if (t->single_write && !acc_locked(a))
		return read_locked(t, a);
	int waits = 0;
	for (int tries = 0;; tries++) {
		int rc = prim_double_read(t, a);
		if (rc)
			return rc;
		rc = prim_double_read_done(t, a); /* consistent, and free or ours */
		if (rc == CC_OK)
			note_read(t, a);
		if (rc != CC_RETRY)
			return rc;
		if (tries < SD_REREAD_NOW)
			continue;
		/* A writer holds it (invariant (5): we hold no lock). */
		if ((rc = prim_check_block(t, a)))
			return rc; /* retired meanwhile */
		if ((rc = cc_wait(t, waits++)))
			return rc;
	}
}

static bool sd_read_post(struct txn *t, struct cc_access *a)
{
	if (t->single_write || acc_locked(a))
		return false;
	prim_post_double_read(t, a);
	return true;
}

static int sd_read_done(struct txn *t, struct cc_access *a)
{
	int rc = prim_double_read_done(t, a);
	if (rc == CC_OK)
		note_read(t, a);
	return rc; /* CC_RETRY: sd_read alone, which waits */
}

static int sd_write(struct txn *t, struct cc_access *a)
{
	(void)t;
	if (!(a->mode & ACC_R))
		a->pstate |= ACC_BLIND; /* replaced whole: no wts to check */
	return CC_OK;
}

/* LOCKING: every written item locked, checked under its lock, and
 * commit_tts ordered after its lease. */
static int lock_writes(struct txn *t)
{
	int rc;
	if (prim_post_lock_writes(t, true) > 0 && (rc = prim_note_locks(t, prim_exec(t))))
		return rc;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		/* The image was read behind our CAS (or under the lock taken
		 * at the read): the item as its last writer left it, if still
		 * the key's block. */
		if ((rc = prim_check_block(t, a)))
			return rc;
		if (!(a->pstate & ACC_BLIND) && a->img->ver != a->p[0])
			return cc_abort_with(t, CC_CAUSE_VALIDATE); /* written since our read */
		/* After the lease, which cannot move while we hold the lock:
		 * the install's wts is new (invariant (2)). */
		t->cts = max64(t->cts, lease_end(a->img->ver, a->img->meta[0]) + 1);
	}
	return CC_OK;
}

/* WAITCLOCK: invariant (6). */
static void commit_wait(struct txn *t)
{
	cc_ts_observe(t, t->cts);
	(void)cc_ts_next(t); /* sleeps until the clock passed t->cts (cc.h) */
}

/* Does a's lease need extending to commit_tts? Read-only accesses only:
 * a written item is locked and ordered by lock_writes. */
static bool needs_renewal(const struct txn *t, const struct cc_access *a)
{
	return a->mode == ACC_R && lease_end(a->p[0], a->p[1]) < t->cts;
}

/* The three verbs of one renewal (invariant (4)). The CAS compares with
 * the rts we know and never lowers it: once that is at or above
 * commit_tts (a round that met a lock), it is a CAS of the value onto
 * itself, which still tells that rts held it at that instant. */
static void renew_post(struct txn *t, struct cc_access *a)
{
	prim_stage(t, CC_STAGE_VALIDATE); /* Renew (RCC) */
	a->stage[0] = ~a->p[1];
	prim_post_cas_item(t, a, W_META0, a->p[1], max64(a->p[1], t->cts), &a->stage[0]);
	prim_post_read_header(t, a, a->vhdr);
	prim_post_read_hdr(t, a, a->hdr[0]);
}

enum { RENEWED, RENEW_AGAIN, RENEW_LOCKED, RENEW_FAILED };

/* The verdict on one renewal once its verbs ran (invariant (4)). */
static int renew_done(struct txn *t, struct cc_access *a, uint64_t *holder)
{
	const uint64_t *h = a->vhdr; /* first READ: lock, ident, data */
	const uint64_t rts = a->stage[0]; /* rts when the CAS ran */
	if (!prim_header_same_block(a, h) || a->hdr[0][1] != a->p[0])
		return RENEW_FAILED; /* moved, or a newer version: the lease is over */
	a->p[1] = rts == a->p[1] ? max64(rts, t->cts) : rts;
	if (h[0] != 0 && h[0] != t->owner) {
		*holder = h[0];
		return RENEW_LOCKED;
	}
	return lease_end(a->p[0], a->p[1]) >= t->cts ? RENEWED : RENEW_AGAIN;
}

/* May we wait for a lock held by `holder` (invariant (5))? */
static bool may_wait(const struct txn *t, uint64_t holder)
{
	for (int i = 0; i < t->nacc; i++)
		if (acc_locked(t->acc[i]))
			return cc_lock_older(holder, t->owner);
	return true;
}

/* Mark every read whose lease ends before commit_tts (ACC_RENEWING);
 * returns how many. The others are covered already (invariant (3)). */
static int renew_start(struct txn *t)
{
	struct cc_stats *st = cc_worker_stats(t->ccw);
	int n = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (needs_renewal(t, a)) {
			a->pstate |= ACC_RENEWING;
			n++;
		} else if (a->mode == ACC_R) {
			st->lease_hits++;
		}
	}
	return n;
}

static void renew_post_all(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++)
		if (t->acc[i]->pstate & ACC_RENEWING)
			renew_post(t, t->acc[i]);
}

/*
 * RENEWING, once the first round's verbs ran: the verdict on each, and
 * more rounds for those that met a lock (after a wait, invariant (5)) or
 * lost their CAS to another renewal. Also prim_commit_checked's check
 * when the first round rides with the installs (sd_commit).
 */
static int renew_finish(struct txn *t)
{
	struct cc_stats *st = cc_worker_stats(t->ccw);
	int waits = 0;
	for (int round = 1;; round++) {
		bool locked = false, left = false;
		for (int i = 0; i < t->nacc; i++) {
			struct cc_access *a = t->acc[i];
			if (!(a->pstate & ACC_RENEWING))
				continue;
			uint64_t holder = 0;
			switch (renew_done(t, a, &holder)) {
			case RENEWED:
				a->pstate &= (uint8_t)~ACC_RENEWING;
				st->lease_renewals++;
				break;
			case RENEW_LOCKED:
				if (!may_wait(t, holder))
					return cc_abort_with(t, CC_CAUSE_RENEW);
				locked = left = true;
				break;
			case RENEW_FAILED:
				return cc_abort_with(t, CC_CAUSE_RENEW);
			default: /* RENEW_AGAIN */
				left = true;
			}
		}
		if (!left)
			return CC_OK;
		if (round == SD_RENEW_TRIES)
			return cc_abort_with(t, CC_CAUSE_RENEW);
		int rc;
		if (locked && (rc = cc_wait(t, waits++)))
			return rc;
		renew_post_all(t);
		if ((rc = prim_exec(t)))
			return rc;
	}
}

/* Nodes written (bit per node). */
static uint64_t written_nodes(const struct txn *t)
{
	uint64_t w = 0;
	for (int i = 0; i < t->nacc; i++)
		if (t->acc[i]->mode & ACC_W)
			w |= 1ull << (t->acc[i]->node & 63);
	return w;
}

static int sd_commit(struct txn *t)
{
	int rc = lock_writes(t);
	if (rc)
		return rc;
	commit_wait(t);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (a->mode & ACC_W) {
			a->wmeta[0] = t->cts; /* the new lease: [cts, cts] */
			a->wmeta[1] = 0;
		}
	}
	if (renew_start(t) == 0)
		return prim_commit_writes(t, t->cts);
	renew_post_all(t);
	uint64_t w = written_nodes(t);
	if (w & (w - 1)) {
		/* Several written nodes: the renewals ride with the installs,
		 * and their verdict comes before the commit point (the installs
		 * are under our locks, rolled back on CC_ABORT), saving a round
		 * trip. With one written node that would cost one instead
		 * (prim_commit_checked), so there they go first. */
		return prim_commit_checked(t, t->cts, renew_finish);
	}
	if ((rc = prim_exec(t)) || (rc = renew_finish(t)))
		return rc;
	return prim_commit_writes(t, t->cts);
}

static void sd_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_sundial = {
	.name = "sundial",
	.keep_tombstones = true,
	.reads_mark = true,
	.begin = sd_begin,
	.read = sd_read,
	.read_post = sd_read_post,
	.read_done = sd_read_done,
	.write = sd_write,
	.commit = sd_commit,
	.abort = sd_abort,
};

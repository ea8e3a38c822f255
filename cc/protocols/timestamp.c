/*
 * timestamp.c: RDMA-T/O, RCBench section 6.2.2 (Algorithm 6), in the
 * variant the paper discusses right after it, "T/O without cascading
 * abort" (notes-rcbench.md A.1, after Bernstein and Goodman): writes are
 * deferred to commit, and a transaction that meets an uncommitted write of
 * an older transaction waits for it instead of reading it.
 *
 * Decisions (the open choices of notes-rcbench.md A.1):
 *  - Order: a per-attempt begin timestamp, t->start_ts = cc_ts_next() in
 *    the begin hook (cc_begin_fresh_ts). A retry needs a newer timestamp (the item
 *    that rejected it keeps its rts/wts), so unlike wait-die the age is an
 *    attempt's, and the owner word carries it: owner = node | start_ts | 1.
 *    Its low bits still name t->rec (cc.h), as the undo log and recovery
 *    need. An abort caused by a newer rts/wts calls cc_ts_observe with it,
 *    so the retry's timestamp is larger.
 *  - DEVIATION from the paper's main variant: no write is applied in place
 *    before commit. Algorithm 6 writes X^d in place at Write() and makes
 *    readers of dirty data depend on the writer (bL/wL lists, cascading
 *    aborts, and the restore rule of the abort path). Here the pending
 *    value stays in the transaction (cc.h, struct cc_access) and is
 *    installed by prim_commit_writes, so nobody ever reads uncommitted
 *    data: no bL, no wL, no cascading abort, no restore ordering. The
 *    reason is issue 7's durability rule that recovery never undoes a
 *    value another transaction may have read (undo records are written at
 *    commit, prim_commit_writes): dirty in-place writes would break it.
 *  - Waiting instead of the paper's pending lists X^m.prL/pwL: a
 *    transaction that must wait for an older writer yields its coroutine
 *    (cc_wait) and reads again, so no list lives in the item and no
 *    scheduler runs at commit. Waits go only from younger to older
 *    transactions (invariant (5)).
 *  - Double-Read (RCBench 6.1) for the rts update, as the paper does, but
 *    on lock+ver only: the install order of cc.h makes a change of the
 *    data words visible in lock or ver, and rts is one atomic word.
 *  - Absent items are kept (keep_tombstones): a key read while absent, or
 *    deleted, keeps its rts/wts in its block. Reaping it would lose them,
 *    and an older transaction could then create the key behind a younger
 *    reader's back (the x-absent case of test_protocol_timestamp.py). The
 *    cost is memory for absent keys while timestamp is the protocol; after
 *    a switch, a transaction that leaves such a key absent reaps it. A
 *    GET of a key with no block at all takes a placeholder and its rts
 *    too (reads_mark): answered from the index alone, it would be
 *    serialized at its read, not in timestamp order, and an older writer
 *    could create the key behind it after a transaction that read past
 *    that writer had finished (a cycle through a real-time edge).
 *  - The fetch stage (cc/fetch.c) batches reads and writes alike, each by
 *    its own first steps. Not through fetch_locks_writes: that flag has
 *    the fetch run the *read* on a key declared for writing only, and a
 *    read here locks nothing; it would leave rts := ts on the key (so
 *    every older writer of it aborts, invariant (3)) and ts_write would
 *    still lock it in the body, a round trip per key. Instead the fetch
 *    takes ts_write's own first step for such keys (ts_write_post/
 *    ts_write_done: the lock CAS and the READ behind it, in round 1 with
 *    the reads' Double-Reads). Locking before the body rather than at its
 *    first write changes no invariant: (1) and (2) are about what happens
 *    under the lock, whenever it was taken, and the checks of Algorithm 6
 *    line 18 run under it either way; a key locked and then not written
 *    (no command of the body got to it) is released at commit untouched,
 *    and nothing was read under that lock (the key stays unread: a read
 *    of it in the body is ts_read, rts and all, invariant (3)); and the
 *    fetch never waits: a busy lock is left to ts_write in the body,
 *    which waits only for an older holder (invariant (5)).
 *
 * Item metadata (words of struct st_item, cc.h):
 *   word 0 lock   0                      no write pending;
 *                 owner word             a writer's pending write: node:8 |
 *                                        start_ts:55 | 1 (cc.h), its age is
 *                                        the writer's begin timestamp;
 *                 owner word & ~1        "installing" (install_mark): the
 *                                        writer is writing the block now.
 *   word 1 ver    wts: the begin timestamp of the last committed writer
 *                 (prim_commit_writes(t, t->start_ts)); 0 if never written.
 *   word 2 meta0  rts: the largest begin timestamp of a reader, raised by
 *                 CAS (Read-Cas); an install writes it to the writer's own
 *                 timestamp (a->wmeta[0], see invariant (4)).
 *   word 3 meta1  unused (0).
 * Timestamps are full 64-bit values (cc.h: clock:48 | node:6 | rec:10),
 * compared as integers; lock-word ages with cc_lock_older.
 *
 * States and transitions (function):
 *   BEGIN    --cc_begin_fresh_ts: start_ts := cc_ts_next, owner word from it --> RUNNING
 *   RUNNING  --first read of X (ts_read; for a declared key, the fetch
 *              stage's ts_read_post/ts_read_done, the same steps with every
 *              key's step in one batch: round 1 the Double-Reads, round 2
 *              the rts CASes and READs, and CC_RETRY, so ts_read alone,
 *              wherever ts_read would read again, wait or start over):
 *              Double-Read (READ lock+ver, READ
 *              block, READ lock+ver, one batch; consistent iff both halves
 *              are equal and not "installing"):
 *              - lock held by an OLDER transaction: WAITING (its write
 *                comes before us in timestamp order, we must see it);
 *              - lock "installing" by a younger one: ABORTED (ts): its
 *                install makes wts newer than us;
 *              - otherwise (free, ours, or a younger writer's pending write)
 *                the image is the committed one. wts > ts: ABORTED (ts),
 *                a late read. rts < ts: CAS rts -> ts and READ lock+ver in
 *                one batch (raise_rts); CAS lost: again from the rts it
 *                returned (ABORTED, validate, after TS_RTS_TRIES); then,
 *                if wts changed or an older writer holds the lock, the read
 *                starts over (that writer may have checked rts before our
 *                CAS landed, invariant (3)) --> RUNNING.
 *   WAITING  --cc_wait (coroutine yields, 2 us doubling to 256 us), then the
 *              read or lock again; after CC_WAIT_MAX_MS: ABORTED (lock).
 *   RUNNING  --first write of X (ts_write; for a key declared for writing
 *              only, the fetch stage's ts_write_post/ts_write_done, the
 *              same CAS and READ in its round 1 and the same checks, a
 *              busy lock left to ts_write): CAS lock 0 -> owner and READ the
 *              block, one batch (lock2pl_acquire). Held by an older
 *              transaction: WAITING; by a younger one: ABORTED (ts), the
 *              paper's "abort T if T.bts < T'.bts". Locked: rts > ts or
 *              wts > ts: ABORTED (ts), a late write is rejected; else the
 *              write stays pending --> RUNNING.
 *   RUNNING  --commit (ts_commit): nothing to validate; prim_commit_writes
 *              with ver := start_ts: undo records, install (lock word
 *              "installing", data and rts, wts), commit point, unlock
 *              --> COMMITTED
 *   ABORTED  --abort (ts_abort): prim_release_locks (no write was applied,
 *              so nothing is restored); the retry takes a new timestamp.
 *
 * Invariants:
 *  (1) A lock word holds our owner word only from our CAS (from 0) to our
 *      install or release; while it does, the item's data, wts and rts
 *      change only by our install (readers change rts, see (4)). Writes
 *      to an item are exclusive and deferred: the block always holds a
 *      committed value, except while "installing" (cc.h's install order,
 *      which a Double-Read detects) and in a relocation's new block, whose
 *      wts is already the writer's (a reader older than it aborts on
 *      wts > ts, one younger waits for its lock).
 *  (2) wts grows: a writer installs only after checking, under its lock,
 *      wts < ts (ts_write), and installs wts := ts. So every ww edge goes
 *      from a smaller to a larger timestamp, and so does every wr edge: a
 *      read is accepted only with wts <= ts.
 *  (3) Once a read of X by R is accepted (ts_read returns), no writer with
 *      a smaller timestamp than R's commits X: at the accepting instant
 *      (the Double-Read's snapshot when it showed rts >= ts, or our CAS),
 *      rts >= ts(R), no older writer holds the lock (we would wait), and
 *      one that held it and installed since changed wts (we would start
 *      over, as the READ after the CAS tells). A writer older than R that
 *      locks later reads rts >= ts(R) under its lock and aborts. So every
 *      rw edge goes from a smaller to a larger timestamp, and with (2) the
 *      conflict graph is acyclic: serializable in timestamp order. The
 *      batched read accepts at the same instants: per key it posts the
 *      same verbs in the same order (the CAS and the READ behind it on
 *      the key's endpoint, so in order) and accepts only where ts_read
 *      would; that other keys' steps share its rounds only stretches the
 *      time between the Double-Read and the CAS, which the argument does
 *      not use (a CAS that finds rts changed loses and is retried).
 *  (4) max(rts, wts) never falls below an accepted reader's timestamp:
 *      only installs lower rts (to the writer's ts, which is also the new
 *      wts), and a writer that installs checked rts while holding the lock
 *      from before that reader's accepting instant, which (3) rules out
 *      for writers older than the reader. Readers older than the writer
 *      that raised rts meanwhile are covered by wts = ts(writer).
 *      Exception: a commit that fails after its installs were posted (a
 *      fabric or power failure) rolls the block back from its undo image,
 *      rts included; a reader whose CAS landed in that window loses its
 *      mark. Only failures reach that path.
 *  (5) A transaction waits only for an older one (ts_read, ts_conflict),
 *      so waits form no cycle: no deadlock. Timestamps are unique (cc.h).
 */
#include "cc/protocols/lock2pl.h"

/* CAS attempts on one item's rts before giving up (readers keep raising
 * it); the executor retries the transaction. */
#define TS_RTS_TRIES 32
/* Inconsistent Double-Reads retried at once before waiting between them:
 * an install holds the lock for about one round trip. */
#define TS_REREAD_NOW 2
/* Rounds of rts CASes a batched read runs for one key (the fetch stage)
 * before it leaves the key to ts_read alone: each lost CAS costs every
 * key of the fetch a round. */
#define TS_RTS_BATCHED 3

/* An abort caused by a newer timestamp `seen` in an item: the retry's
 * timestamp must be past it (clock part + 1, cc.h layout). */
static int ts_too_late(struct txn *t, uint64_t seen)
{
	cc_ts_observe(t, seen + (1ull << 16));
	return cc_abort_with(t, CC_CAUSE_TS);
}

/* A lock word another transaction holds (not 0, not ours), older than us? */
static bool held_by_older(const struct txn *t, uint64_t lock)
{
	return lock && lock != t->owner && cc_lock_older(lock, t->owner);
}

/* What a Double-Read (a->hdr[0], a->img, a->hdr[1]) shows: ts_read's
 * verdict, shared by the batched read. */
enum ts_seen {
	TS_SEEN_COMMITTED, /* free, ours, or a younger writer's pending write:
			      the block is the committed image (invariant (1)) */
	TS_SEEN_TORN,      /* the halves differ: an install or a lock change */
	TS_SEEN_WAIT,      /* an install in progress, or an older writer's
			      pending write we must see (invariant (5)) */
	TS_SEEN_LATE,      /* a younger commit is landing: we are too late */
};

static enum ts_seen ts_seen(const struct txn *t, const struct cc_access *a)
{
	const uint64_t lock = a->hdr[0][0];
	if (lock != a->hdr[1][0] || a->hdr[0][1] != a->hdr[1][1])
		return TS_SEEN_TORN;
	if (cc_lock_is_installing(lock))
		return cc_lock_older(lock, t->owner) ? TS_SEEN_WAIT : TS_SEEN_LATE;
	return held_by_older(t, lock) ? TS_SEEN_WAIT : TS_SEEN_COMMITTED;
}

/* Queue one raise of rts from `rts` to our timestamp (Read-Cas): the CAS,
 * its result in a->stage[2], and behind it on the same endpoint (so after
 * it) a READ of lock+ver into a->hdr[1]. */
static void post_raise(struct txn *t, struct cc_access *a, uint64_t rts)
{
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_META0, rts, t->start_ts, &a->stage[2]);
	prim_post_read_hdr(t, a, a->hdr[1]);
}

/* After that CAS and READ ran: the rts now known (ours if the CAS won,
 * else the one it returned) in *rts, and whether the read must start over
 * (wts changed, or an older writer holds the lock: it may have checked rts
 * before our CAS landed, invariant (3)). */
static bool raised(const struct txn *t, const struct cc_access *a, uint64_t *rts)
{
	*rts = a->stage[2] == *rts ? t->start_ts : a->stage[2];
	return a->hdr[1][1] != a->img->ver || held_by_older(t, a->hdr[1][0]);
}

/*
 * Raise rts to our timestamp, one CAS and READ per round until it holds,
 * from `rts`. CC_OK, CC_ABORT or an error; with CC_OK, *redo says the read
 * must start over (raised).
 */
static int raise_rts(struct txn *t, struct cc_access *a, uint64_t rts, bool *redo)
{
	const uint64_t ts = t->start_ts;
	*redo = false;
	for (int tries = 0; rts < ts; tries++) {
		if (tries == TS_RTS_TRIES)
			return cc_abort_with(t, CC_CAUSE_VALIDATE);
		post_raise(t, a, rts);
		int rc = prim_exec(t);
		if (rc)
			return rc;
		if ((*redo = raised(t, a, &rts)))
			return CC_OK;
	}
	return CC_OK;
}

/* A committed image accepted (TS_SEEN_COMMITTED): its lock and ver into
 * a->img, the late read ruled out. CC_OK, or CC_ABORT. */
static int ts_accept(struct txn *t, struct cc_access *a)
{
	int rc = prim_check_block(t, a);
	if (rc)
		return rc;
	a->img->lock = a->hdr[0][0];
	a->img->ver = a->hdr[0][1];
	if (a->img->ver > t->start_ts)
		return ts_too_late(t, a->img->ver); /* a late read */
	return CC_OK;
}

static int ts_read(struct txn *t, struct cc_access *a)
{
	int waits = 0; /* cc_wait rounds: one time limit for the whole read */
	for (int tries = 0;; tries++) {
		int rc = prim_double_read(t, a);
		if (rc)
			return rc;
		enum ts_seen seen = ts_seen(t, a);
		if (seen == TS_SEEN_LATE)
			return cc_abort_with(t, CC_CAUSE_TS); /* a younger commit lands now */
		if (seen == TS_SEEN_TORN && tries < TS_REREAD_NOW)
			continue; /* torn by an install or a lock change: at once again */
		if (seen != TS_SEEN_COMMITTED) {
			if ((rc = prim_check_block(t, a)))
				return rc; /* retired meanwhile */
			if ((rc = cc_wait(t, waits++)))
				return rc;
			continue;
		}
		if ((rc = ts_accept(t, a)))
			return rc;
		bool redo;
		if ((rc = raise_rts(t, a, a->img->meta[0], &redo)))
			return rc;
		if (redo)
			continue; /* start over: see raised */
		a->p[0] = a->img->ver;
		return CC_OK;
	}
}

/*
 * The fetch stage's batched read (cc_protocol.read_post/read_done): ts_read
 * in rounds, each key's step in the batch of every key's. Round 1 is the
 * Double-Read, judged as ts_read judges it; an image accepted whose rts is
 * below ours queues the CAS and READ of raise_rts (CC_AGAIN), round 2 runs
 * them, and a CAS lost to a reader still below us is tried again, up to
 * TS_RTS_BATCHED rounds. What ts_read would do otherwise (read again at
 * once, wait, start over, go on losing CASes) it does alone (CC_RETRY):
 * the batched read never waits and never decides differently. Between
 * rounds a->p[1] is 1 + the CASes posted so far (TS_STEP_READ: the
 * Double-Read's round), a->img->meta[0] the rts last seen.
 */
#define TS_STEP_READ 1

static bool ts_read_post(struct txn *t, struct cc_access *a)
{
	prim_post_double_read(t, a);
	a->p[1] = TS_STEP_READ;
	return true;
}

static int ts_read_done(struct txn *t, struct cc_access *a)
{
	const uint64_t ts = t->start_ts;
	uint64_t rts = a->img->meta[0];
	if (a->p[1] == TS_STEP_READ) {
		enum ts_seen seen = ts_seen(t, a);
		if (seen == TS_SEEN_LATE)
			return cc_abort_with(t, CC_CAUSE_TS);
		if (seen != TS_SEEN_COMMITTED)
			return CC_RETRY; /* read again or wait: ts_read alone */
		int rc = ts_accept(t, a);
		if (rc)
			return rc;
	} else {
		if (raised(t, a, &rts))
			return CC_RETRY; /* start over: ts_read alone */
		a->img->meta[0] = rts;
	}
	if (rts >= ts) {
		a->p[0] = a->img->ver;
		return CC_OK;
	}
	if (a->p[1] - TS_STEP_READ >= TS_RTS_BATCHED)
		return CC_RETRY; /* readers keep raising it: raise_rts alone */
	post_raise(t, a, rts);
	a->p[1]++;
	return CC_AGAIN;
}

/* A busy lock (the paper: on a conflict with T', abort T if T.bts <
 * T'.bts, otherwise wait): a younger holder's write will carry a larger
 * wts than ours, so we are too late already; an older one's we wait out. */
static int ts_conflict(struct txn *t, uint64_t holder, int round)
{
	if (cc_lock_older(holder, t->owner))
		return cc_wait(t, round);
	return cc_abort_with(t, CC_CAUSE_TS);
}

/* Under our lock, the block read behind the CAS in a->img: the checks of
 * Algorithm 6 line 18. The abort hook releases the lock. */
static int ts_locked(struct txn *t, struct cc_access *a)
{
	const uint64_t ts = t->start_ts, rts = a->img->meta[0], ver = a->img->ver;
	if (rts > ts || ver > ts)
		return ts_too_late(t, rts > ver ? rts : ver); /* a late write is rejected */
	/* Read before: by invariant (3) nobody committed since (a changed
	 * wts would be > ts and aborted us above); checked all the same. */
	if ((a->mode & ACC_R) && ver != a->p[0])
		return cc_abort_with(t, CC_CAUSE_VALIDATE);
	a->wmeta[0] = ts; /* the install's rts: invariant (4) */
	a->wmeta[1] = 0;
	return CC_OK;
}

static int ts_write(struct txn *t, struct cc_access *a)
{
	if (acc_locked(a))
		return CC_OK; /* locked and checked already (invariant (1)) */
	int rc = lock2pl_acquire(t, a, ts_conflict);
	return rc ? rc : ts_locked(t, a);
}

/* The fetch stage's first step of a write (cc_protocol.write_post/
 * write_done, for keys declared for writing only): ts_write's CAS and
 * READ, every key's in the batch of the reads' round 1. A busy lock goes
 * to ts_write at the body's first write (CC_RETRY), whose ts_conflict
 * waits for an older holder or aborts (invariant (5): the fetch never
 * waits). */
static bool ts_write_post(struct txn *t, struct cc_access *a)
{
	return lock2pl_post(t, a);
}

static int ts_write_done(struct txn *t, struct cc_access *a)
{
	int rc = lock2pl_done(t, a);
	return rc ? rc : ts_locked(t, a);
}

static int ts_commit(struct txn *t)
{
	/* Every conflict was settled at read and write time (invariants
	 * (2)-(3)): install with wts := our begin timestamp. */
	return prim_commit_writes(t, t->start_ts);
}

static void ts_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_timestamp = {
	.name = "timestamp",
	.install_mark = true,
	.keep_tombstones = true,
	.reads_mark = true,
	.begin = cc_begin_fresh_ts,
	.read = ts_read,
	.read_post = ts_read_post,
	.read_done = ts_read_done,
	.write = ts_write,
	.write_post = ts_write_post,
	.write_done = ts_write_done,
	.commit = ts_commit,
	.abort = ts_abort,
};

/*
 * mvcc.c: RDMA-MVCC, RCC 4.4 (one-sided MVCC, Figs. 7 and 8) and RCBench
 * 6.2.2 (Algorithm 7): multi-version timestamp ordering with a fixed
 * number of version slots per item, every version inside the item's own
 * block so that one READ fetches all of them.
 *
 * Timestamps. Each attempt takes its timestamp ctts when it begins
 * (cc_begin_fresh_ts: t->start_ts = cc_ts_next) and its lock word is the owner
 * word of ctts (cc.h), so a lock's holder is ordered against us by the
 * lock word alone, as in RCC 4.3. The serial order of committed
 * transactions is ctts order. A retry takes a new ctts: an old timestamp
 * would only find its versions gone and its writes too late again. When
 * an abort is caused by a newer timestamp in an item (W1, R1), the worker's
 * clock is advanced past it (cc_ts_observe, RCC 4.4 "clock handling"), so
 * the retry is ordered after it even across skewed nodes.
 *
 * Item metadata:
 *   word 0, lock (RCC's tts):
 *     0                   no uncommitted writer;
 *     owner word          node:8 | ctts:55 | 1 of the writer that holds it
 *                         (cc.h): its age is its ctts (cc_lock_older);
 *     owner word & ~1     "installing": that writer is writing the item
 *                         (install_mark, prim.c post_install_locked).
 *   word 1, ver           wts of the newest committed version.
 *   meta[0], rts          the largest ctts of a reader of the item (RCC's
 *                         tuple.rts); see invariant (4) for when it drops.
 *   meta[1], descriptor   count:8 (bits 32..39) | bytes:32 (bits 0..31) of
 *                         the older versions after the value (versions.h,
 *                         shared with cicada, whose status bits 40..47
 *                         stay 0 here). 0 = no older version (also what a
 *                         switch into mvcc, st_reset_meta, and a
 *                         relocation leave).
 * Block: header, key, the newest version's value (data word 5), then the
 * tail: `count` older versions, newest first, each
 *   wts:8 | data:8 (the item's data word: vlen, vflags, ST_F_ABSENT) | value, padded
 *   with zeros to a multiple of 8 bytes,
 * `bytes` bytes in all. An ABSENT version (the key deleted or not yet
 * created at that time) has vlen 0. At most mvcc-versions versions are
 * kept (the newest plus mvcc-versions - 1 in the tail), and only as many
 * as fit the block after the new value and within cc_inplace_max (so an
 * undo record stays as small as any protocol's): RCBench's "fixed version
 * slots", where the oldest is overwritten on commit (mvcc_commit drops
 * the oldest entries; the layout and its helpers are versions.h's). The
 * block's class is chosen by the value's size (cc/txn.c), so an item
 * whose block has no room after its value keeps one version only.
 *
 * States and transitions (function):
 *   BEGIN    --cc_begin_fresh_ts: ctts := cc_ts_next, owner := owner word of ctts
 *   RUNNING  --read (mvcc_read, RCC RS, one-sided; for a declared key,
 *              the fetch stage's mvcc_read_post/mvcc_read_done, the same
 *              steps with every key's step in one batch: round 1 the
 *              Double-Reads, round 2 the rts CASes and READs, and CC_RETRY,
 *              so mvcc_read alone, wherever mvcc_read would read again,
 *              wait or start over):
 *              Double-Read: READ lock+ver, READ block, READ lock+ver, one
 *              batch; retried while the halves differ or the lock says
 *              "installing". R2: the lock is 0, ours, or a younger
 *              writer's; an older writer's -> WAITING. R1: the version
 *              with the largest wts < ctts (ver first, then the tail);
 *              none -> ABORTED (cause version). Then, if rts < ctts: CAS
 *              rts -> ctts and READ lock+ver, one batch; a CAS lost to
 *              another reader is retried from the value it returned (not
 *              a conflict); if the READ shows ver changed or an older
 *              writer holding the lock, the read starts over (invariant
 *              (3)). The chosen version becomes the access image.
 *   WAITING  --cc_wait (the coroutine yields) --> the read again; after
 *              CC_WAIT_MAX_MS -> ABORTED (cause lock). A read waits only
 *              for an older writer and a write never waits, so every wait
 *              goes from younger to older: no deadlock.
 *   RUNNING  --write (mvcc_write, RCC WS; for a key declared for writing
 *              only, the fetch stage's mvcc_write_post/mvcc_write_done: the
 *              same CAS and READ in its round 1, with the reads'
 *              Double-Reads, and the same W2 and W1; not fetch_locks_writes,
 *              which would run the read, an rts mark and no lock): if read
 *              before, W1 checked on
 *              what the read saw (no lock taken if it fails; a blind write
 *              skips RCC's metadata READ before the lock, which would cost
 *              a round trip to spare a lock W1 may refuse); CAS lock
 *              0 -> owner and READ block, one batch; lock busy (W2) ->
 *              ABORTED (cause lock); W1 (ctts > ver and ctts >= rts) on
 *              the fresh image, else ABORTED (cause ts) --> RUNNING, locked
 *   RUNNING  --commit (mvcc_commit): per written item the tail is rebuilt
 *              locally (the replaced version first, the oldest dropped),
 *              then prim_commit_writes(ctts): undo records, installs
 *              (lock "installing", words 2.. with rts, descriptor, value
 *              and tail, and ver := ctts), commit point, unlock -->
 *              COMMITTED. A read-only transaction holds nothing and
 *              validates nothing: it commits without a verb.
 *   ABORTED  --abort (mvcc_abort): prim_release_locks (rolls installs
 *              back if any were posted).
 * The RPC variants of RCC 4.4 are not implemented; every stage is one-sided.
 *
 * Invariants:
 *  (1) The lock word is set to our owner word only by our CAS from 0 and
 *      cleared only by us (install or release); versions are added only
 *      under it, with ver := ctts of the installer, so ver only grows and
 *      versions are installed in ctts order (W1: ctts > ver).
 *  (2) Readers return committed versions only: an install runs under the
 *      "installing" lock word from its first data word to its unlock, which
 *      comes after the commit point (prim.c), and a Double-Read whose lock
 *      word is "installing", or whose halves differ, is not used. A
 *      younger writer's plain lock word is accepted: it writes nothing
 *      before marking the word "installing".
 *  (3) When a read at ctts returns version V, no version with a wts in
 *      (V.wts, ctts) ever commits: a writer older than us that held the
 *      lock at the Double-Read made us wait (R2); one that took it before
 *      our rts CAS shows in the READ after that CAS (its lock, or a new
 *      ver if it already installed) and the read starts over; one that
 *      takes it later reads rts >= ctts under its lock and fails W1. When
 *      the Double-Read already showed rts >= ctts there is no CAS: a
 *      writer that locks after it still reads rts >= ctts (by (4), only a
 *      lock holder lowers rts, and none older than us held it then).
 *      The batched read (mvcc_read_done) posts the same verbs per key in
 *      the same order and returns only where mvcc_read would; sharing
 *      rounds with other keys only stretches the time between the
 *      Double-Read and the CAS, which this argument does not use.
 *      Together with (1) and (2), every transaction reads, for every
 *      item, the last version before its ctts: the execution is
 *      equivalent to the serial one in ctts order.
 *  (4) rts only drops when an install overwrites meta[0], with the max of
 *      the rts the installer read under its lock and its own ctts (the
 *      undo record carries the same value: mvcc_commit raises the image's
 *      rts before undo_build). What it overwrites is a raise made after
 *      that read, by a reader that either read under the installer's lock,
 *      so is older than it (R2), and whose rts the new ver (the
 *      installer's ctts) already outdoes in W1; or saw the installer's
 *      lock in the READ after its CAS and starts over (invariant 3). A
 *      rollback restores the old ver but leaves rts at least the
 *      installer's ctts, above every reader of the first kind.
 *  (5) The tail of a written item is what its access image carries
 *      (a->otail): the block was read under our lock, so the undo record
 *      restores the old versions too. A read of the item after the lock
 *      (the fetch locks a key declared for writing only before the body
 *      reads it) keeps otail: it reads the same block under the same
 *      lock. Taking that lock at fetch rather than at the body's first
 *      write changes nothing else: W1 and W2 are decided under it as in
 *      mvcc_write, and a key locked and then not written is released at
 *      commit untouched, never having been read under that lock.
 *  (6) A transaction of one read-only command on one key (a plain GET)
 *      reads like any other: at its ctts, raising rts. Returning the
 *      newest committed version without raising rts is serializable but
 *      not in real time: a writer with an older ctts could then install
 *      behind it, a transaction that finished before the GET began
 *      having already read past that writer (the checker found this
 *      G2-realtime once its clients sent plain commands). For the same
 *      reason a read of an absent key takes a placeholder (reads_mark).
 *
 * Versions lost. A reader older than every kept version aborts (cause
 * version) and retries with a new ctts. That happens when more than
 * mvcc-versions - 1 versions committed after it began, when the block had
 * no room for them, and after a relocation: a value that outgrows its
 * block moves to a new one with no tail (prim.c reloc_post_block writes a
 * zero descriptor), and readers of the old block re-resolve (STALE).
 */
#include "cc/cc.h"
#include "cc/node.h"
#include "cc/protocols/lock2pl.h"
#include "cc/protocols/versions.h"

#define MV_TORN_RETRIES 2   /* Double-Reads retried at once before waiting */
#define MV_REDO_MAX 16      /* reads started over (invariant 3) before giving up */
#define MV_RTS_TRIES 64     /* rts CASes lost to readers before giving up */
#define MV_RTS_BATCHED 3    /* rounds of rts CASes a batched read (the fetch
			       stage) runs for one key before it leaves the key
			       to mvcc_read alone: each costs the fetch a round */

/* ---- reads ---- */

/* The Double-Read halves agree and no install is under way (invariant 2). */
static bool double_read_ok(const struct cc_access *a)
{
	return a->hdr[0][0] == a->hdr[1][0] && a->hdr[0][1] == a->hdr[1][1] &&
	       !cc_lock_is_installing(a->hdr[0][0]);
}

/* A lock word held by a transaction older than us (R2 fails). */
static bool held_by_older(const struct txn *t, uint64_t lock)
{
	return lock != 0 && lock != t->owner && cc_lock_older(lock, t->owner);
}

/* Queue one raise of rts from `rts` to ctts (Read-Cas): the CAS, its
 * result in a->stage[2], and behind it on the same endpoint (so after it)
 * a READ of lock+ver into a->hdr[1]. */
static void post_raise(struct txn *t, struct cc_access *a, uint64_t rts)
{
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_META0, rts, t->start_ts, &a->stage[2]);
	prim_post_read_hdr(t, a, a->hdr[1]);
}

/* After that CAS and READ ran: the rts now known (ctts if the CAS won,
 * else the one it returned) in *rts, and whether the read must start over:
 * ver changed from `ver`, or an older writer holds the lock (invariant 3). */
static bool raised(const struct txn *t, const struct cc_access *a, uint64_t ver, uint64_t *rts)
{
	*rts = a->stage[2] == *rts ? t->start_ts : a->stage[2];
	return a->hdr[1][1] != ver || held_by_older(t, a->hdr[1][0]);
}

/*
 * rts_raise - make rts >= ctts (post_raise, repeated while the CAS loses to
 * readers below ctts). Returns CC_OK with *redo set when the read must
 * start over (raised), CC_ABORT or an error.
 */
static int rts_raise(struct txn *t, struct cc_access *a, uint64_t rts, uint64_t ver, bool *redo)
{
	const uint64_t ctts = t->start_ts;
	*redo = false;
	for (int tries = 0; rts < ctts; tries++) {
		if (tries == MV_RTS_TRIES)
			return cc_abort_with(t, CC_CAUSE_VALIDATE);
		post_raise(t, a, rts);
		int rc = prim_exec(t);
		if (rc)
			return rc;
		if ((*redo = raised(t, a, ver, &rts)))
			return CC_OK;
	}
	a->p[1] = rts;
	return CC_OK;
}

/* A consistent Double-Read (double_read_ok): its lock and ver into the
 * image, which must still be the key's (STALE), and what W1 needs later
 * into p[] (ver, and rts as seen). */
static int dread_accept(struct txn *t, struct cc_access *a)
{
	a->img->lock = a->hdr[0][0];
	a->img->ver = a->hdr[0][1];
	int rc = prim_check_block(t, a);
	if (rc)
		return rc;
	a->p[0] = a->img->ver;
	a->p[1] = a->img->meta[0];
	a->pstate &= (uint8_t)~ACC_PROTO;
	return CC_OK;
}

/*
 * R1: the version to read at ctts, ver first, then the tail, newest first.
 * CC_OK with *older set and the version in *e when it is an older one,
 * or CC_ABORT (cause version) when none is old enough.
 */
static int pick_version(struct txn *t, struct cc_access *a, struct ver_entry *e, bool *older)
{
	int which = ver_pick(a, t->start_ts, e);
	*older = which == 2;
	if (which)
		return CC_OK;
	cc_ts_observe(t, a->img->ver);
	return cc_abort_with(t, CC_CAUSE_VERSION);
}

/* The read is done: an older version chosen becomes the image's. */
static void show_version(struct cc_access *a, const struct ver_entry *e, bool older)
{
	if (older) {
		ver_img_show(a, e);
		a->pstate |= ACC_PROTO; /* the image is not the item's newest version */
	}
}

static int mvcc_read(struct txn *t, struct cc_access *a)
{
	int round = 0, torn = 0, redo = 0;
	/* An image used for reading only: no undo record. Under our own lock
	 * (a write's, taken first at fetch: mvcc_write_done) the block read
	 * is the one the lock was taken on, and its tail stays in the undo
	 * record (invariant (5)). */
	if (!acc_locked(a))
		a->otail = 0;
	for (;;) {
		int rc = prim_double_read(t, a);
		if (rc)
			return rc;
		if (!double_read_ok(a)) {
			/* An install is a round trip from done: read again at
			 * once, then yield between tries. */
			if (++torn > MV_TORN_RETRIES && (rc = cc_wait(t, round++)))
				return rc;
			continue;
		}
		if ((rc = dread_accept(t, a)))
			return rc;
		if (held_by_older(t, a->img->lock)) { /* R2 */
			if ((rc = cc_wait(t, round++)))
				return rc;
			continue;
		}
		struct ver_entry e = { 0 };
		bool older;
		if ((rc = pick_version(t, a, &e, &older)))
			return rc;
		bool again;
		if ((rc = rts_raise(t, a, a->img->meta[0], a->img->ver, &again)))
			return rc;
		if (again) {
			if (++redo > MV_REDO_MAX)
				return cc_abort_with(t, CC_CAUSE_VALIDATE);
			continue;
		}
		show_version(a, &e, older);
		return CC_OK;
	}
}

/*
 * The fetch stage's batched read (cc_protocol.read_post/read_done):
 * mvcc_read in rounds, each key's step in the batch of every key's. Round
 * 1 is the Double-Read, judged as mvcc_read judges it (R2, then R1); if
 * rts is below ctts it queues the CAS and READ of rts_raise (CC_AGAIN),
 * round 2 runs them, and a CAS lost to a reader still below ctts is tried
 * again, up to MV_RTS_BATCHED rounds. What mvcc_read would do otherwise
 * (read a torn image again, wait for an older writer, start over, go on
 * losing CASes) it does alone (CC_RETRY): the batched read never waits and
 * never decides differently. The version R1 chose is shown in the image
 * only when the read is done (show_version): rounds after the first need
 * the tail as read. Between rounds a->p[1] is 1 + the CASes posted so far
 * (MV_STEP_READ: the Double-Read's round; it becomes W1's rts when the
 * read is done), a->img->meta[0] the rts last seen; a->p[0] is ver.
 */
#define MV_STEP_READ 1

static bool mvcc_read_post(struct txn *t, struct cc_access *a)
{
	if (!acc_locked(a))
		a->otail = 0; /* as mvcc_read */
	prim_post_double_read(t, a);
	a->p[1] = MV_STEP_READ;
	return true;
}

static int mvcc_read_done(struct txn *t, struct cc_access *a)
{
	const uint64_t ctts = t->start_ts;
	uint64_t rts = a->img->meta[0], step = a->p[1];
	if (step == MV_STEP_READ) {
		if (!double_read_ok(a))
			return CC_RETRY; /* torn or installing: mvcc_read alone */
		int rc = dread_accept(t, a);
		if (rc)
			return rc;
		if (held_by_older(t, a->img->lock))
			return CC_RETRY; /* R2: mvcc_read waits for it */
	} else {
		if (raised(t, a, a->p[0], &rts))
			return CC_RETRY; /* start over: mvcc_read alone */
		a->img->meta[0] = rts;
	}
	/* R1, on the image as read (the tail is intact until the end). */
	struct ver_entry e = { 0 };
	bool older;
	int rc = pick_version(t, a, &e, &older);
	if (rc)
		return rc;
	if (rts >= ctts) {
		a->p[1] = rts;
		show_version(a, &e, older);
		return CC_OK;
	}
	if (step - MV_STEP_READ >= MV_RTS_BATCHED)
		return CC_RETRY; /* readers keep raising it: rts_raise alone */
	post_raise(t, a, rts);
	a->p[1] = step + 1;
	return CC_AGAIN;
}

/* ---- writes ---- */

/* W1 fails: our write would come before a committed version or a read. */
static int too_late(struct txn *t, uint64_t ver, uint64_t rts)
{
	cc_ts_observe(t, ver > rts ? ver : rts);
	return cc_abort_with(t, CC_CAUSE_TS);
}

/* W2 fails: the item is locked by another writer. RCC aborts at once. */
static int w2_failed(struct txn *t, uint64_t holder, int round)
{
	(void)holder;
	(void)round;
	return cc_abort_with(t, CC_CAUSE_LOCK);
}

/* The lock won, the block read behind the CAS in a->img: W1 again under
 * the lock (RCC's double check), and the tail the undo record keeps. */
static int mvcc_locked(struct txn *t, struct cc_access *a)
{
	const uint64_t ctts = t->start_ts;
	a->pstate &= (uint8_t)~ACC_PROTO;
	a->img->lock = t->owner;
	uint32_t off[VER_MAX], bytes;
	(void)ver_tail_parse(a, a->img, off, &bytes);
	a->otail = bytes; /* invariant (5) */
	/* W1 again under the lock (RCC's double check). */
	if (!(ctts > a->img->ver && ctts >= a->img->meta[0]))
		return too_late(t, a->img->ver, a->img->meta[0]);
	return CC_OK;
}

static int mvcc_write(struct txn *t, struct cc_access *a)
{
	const uint64_t ctts = t->start_ts;
	if (acc_locked(a))
		return CC_OK; /* locked at fetch (mvcc_write_done), or written
				 before a savepoint rollback: still ours */
	/* W1 on what our read saw first (RCC: no lock for a write that cannot
	 * be serialized): an older version read means a newer one exists. */
	if ((a->mode & ACC_R) && ((a->pstate & ACC_PROTO) || !(ctts > a->p[0] && ctts >= a->p[1])))
		return too_late(t, a->p[0], a->p[1]);
	int rc = lock2pl_acquire(t, a, w2_failed); /* CAS + READ, one batch */
	return rc ? rc : mvcc_locked(t, a);
}

/* The fetch stage's first step of a write (cc_protocol.write_post/
 * write_done, for keys declared for writing only, so never read: no W1
 * before the lock): mvcc_write's CAS and READ, every key's in the batch of
 * the reads' round 1. A busy lock fails W2 at once, as in mvcc_write. */
static bool mvcc_write_post(struct txn *t, struct cc_access *a)
{
	return lock2pl_post(t, a);
}

static int mvcc_write_done(struct txn *t, struct cc_access *a)
{
	int rc = lock2pl_done(t, a);
	if (rc == CC_RETRY)
		return w2_failed(t, a->stage[2], 0);
	return rc ? rc : mvcc_locked(t, a);
}

/* ---- commit ---- */

static int mvcc_commit(struct txn *t)
{
	const uint64_t ctts = t->start_ts;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		/* Invariant (4): the install and the undo record both carry
		 * rts raised to our ctts. */
		uint64_t rts = a->img->meta[0] > ctts ? a->img->meta[0] : ctts;
		a->img->meta[0] = rts;
		a->wmeta[0] = rts;
	}
	char *buf;
	int rc = ver_build_tails(t, ver_keep(t), VER_ST_CM, &buf);
	if (rc)
		return rc;
	t->cts = ctts;
	rc = prim_commit_writes(t, ctts);
	ver_free_tails(t, buf);
	return rc;
}

static void mvcc_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_mvcc = {
	.name = "mvcc",
	.install_mark = true,
	.keep_tombstones = true,
	.reads_mark = true,
	.versions = true,
	.begin = cc_begin_fresh_ts,
	.read = mvcc_read,
	.read_post = mvcc_read_post,
	.read_done = mvcc_read_done,
	.write = mvcc_write,
	.write_post = mvcc_write_post,
	.write_done = mvcc_write_done,
	.commit = mvcc_commit,
	.abort = mvcc_abort,
};

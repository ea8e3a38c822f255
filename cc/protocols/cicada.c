/*
 * cicada.c: RDMA-Cicada, RCBench 6.2.3 (Algorithm 11; paper text lines
 * 898-992, notes-rcbench.md A.3): multi-version OCC. Every transaction
 * reads at its beginning timestamp bts the newest version older than bts,
 * writes nothing remotely until it validates, and at validation installs
 * its writes as new versions with wts = bts, each with a status (RN until
 * the commit flips it to CM), and raises the read timestamp of what it
 * only read. The serial order is bts order.
 *
 * Versions live in the fixed version slots mvcc uses (versions.h): the
 * newest version in the block's header and value, the older ones in the
 * tail after the value, at most mvcc-versions in all, the oldest
 * overwritten. One READ fetches every version and its status.
 *
 * Item metadata:
 *   word 0, lock     the item's latch (RCBench MT_LATCH): 0, the owner
 *                    word of a validating transaction (cc.h), or its
 *                    "installing" mark while it writes the item
 *                    (install_mark, prim.c post_install_locked).
 *   word 1, ver      wts of the newest version.
 *   meta[0], rts     the largest bts of a transaction that validated a
 *                    read of the item, or the newest version's wts if
 *                    larger: one read timestamp per item, not per version
 *                    (deviation (3)).
 *   meta[1]          the descriptor (versions.h): the older versions'
 *                    count and bytes, and in bits 40..47 the newest
 *                    version's status, VER_ST_RN or VER_ST_CM (0). Tail
 *                    versions are committed by construction (versions.h).
 * Per access: p[0] = wts of the version the read returned, p[1] = ver
 * (the newest wts) the read saw; ACC_PROTO: the image shows an older
 * version than the newest; ACC_BLIND: written without being read.
 *
 * States and transitions (function):
 *   BEGIN      --cc_begin_fresh_ts: bts := cc_ts_next (a new one per
 *                attempt), owner := owner word of bts
 *   READING    --read (cicada_read; the fetch stage's cicada_read_post/
 *                cicada_read_done batch every declared key's first READs,
 *                and leave to cicada_read what must wait or read again):
 *                Double-Read (READ lock+ver, READ block, READ lock+ver,
 *                one batch; Algorithm 11 line 3's Read^D, made safe
 *                against torn reads, deviation (1)); retried while an
 *                install is under way. getProperVer: the version with the
 *                largest wts < bts (ver_pick); none kept -> ABORTED
 *                (version). The proper version is RN -> WAITING (line 6);
 *                an older one is read although newer ones, RN or CM,
 *                exist (invariant (3)). Nothing is written.
 *   WAITING    --cc_wait, then the read again; after CI_RN_WAITS polls the
 *                reader resolves the RN version itself (resolve_rn: CAS
 *                its status RN -> CM, invariant (2)) and reads it.
 *   READING    --write (cicada_write, Algorithm 11 lines 9-11): on what the
 *                read saw, abort if the newest version is newer than bts
 *                or read after bts (-> ABORTED, cause newer); a key never
 *                read is a blind write, checked at validation only. The
 *                new value stays in the transaction (cc_access.wval).
 *   READING    --commit (cicada_commit) --> VALIDATING
 *   VALIDATING --post_latches: per item of the write set and of the
 *                read-only set, CAS latch 0 -> owner and READ the block
 *                behind it, one batch over every node (Algorithm 11 lines
 *                14, 16, 25, 27; deviation (4)); prim_note_locks: a busy
 *                latch -> ABORTED (lock), no retry (line 15).
 *                check_written (lines 17-19): the newest version is the
 *                one read, older than bts and not read after bts, else
 *                ABORTED (newer); check_read (lines 28-31): the proper
 *                version is the one read, else ABORTED (newer, or version
 *                if it fell out of the slots); rts := max(rts, bts) staged
 *                as a WRITE under the latch.
 *              --prim_commit_writes(bts) (lines 20-23, 32): undo records;
 *                per written item the new version X_{k+1} with wts = bts,
 *                status RN and the replaced version pushed into the tail
 *                (ver_build_tails), under the installing mark; the rts
 *                WRITEs; the commit point; every latch released
 *                --> COMMITTING
 *   COMMITTING --flip_committed (lines 33-35): CAS status RN -> CM on every
 *                new version, one batch (One-Cas each) --> COMMITTED
 *   ABORTED    --abort (cicada_abort): prim_release_locks: latches
 *                released, and installs rolled back from their undo
 *                records if they were posted (deviation (5)).
 *
 * Invariants:
 *  (1) ver, the tail and the status bits change only by an install under
 *      the latch, under the installing mark, with ver := the installer's
 *      bts, which must exceed the old ver (check_written): versions are
 *      installed in wts order, and the newest is the largest. The one
 *      exception, a status flip RN -> CM by CAS, changes no version's wts
 *      or value.
 *  (2) An RN version whose latch is not "installing" belongs to a writer
 *      past its commit point. Its writer held the latch from before its
 *      install to after its commit point (prim.c releases after it) or,
 *      aborting, rolled the install back before releasing (undo record);
 *      recovery rolls back an undecided writer's installs before it
 *      releases its latches. So any transaction may treat it as committed,
 *      and flip it (resolve_rn, flip_committed's CAS): this is how an RN
 *      version left by a crashed coordinator gets resolved (test_cc.c,
 *      test_cicada_rn_left_behind). A flip CAS
 *      that meets a later writer's equal descriptor flips a version that
 *      is, by the same argument, committed or under an installing mark
 *      (and then rewritten by the install's rollback if it aborts).
 *  (3) A read at bts returns the version with the largest wts < bts that
 *      is committed: it waits while that version is RN, and a version with
 *      a larger wts, RN or not, is a later one in bts order, which the
 *      reader must not see (the rule the scenario test checks).
 *  (4) When a transaction commits, for every item it read and did not
 *      write, no version with a wts in (p[0], bts) ever commits: under the
 *      latch, check_read found the proper version unchanged (none was
 *      installed before), and it raised rts to bts, so a later writer with
 *      a wts < bts fails check_written (rts > its bts); a writer holding
 *      the latch meanwhile made our latch CAS fail. For every item it
 *      wrote, check_written found under the latch the version it read
 *      (p[1], the newest), ver < bts and rts < bts, so its version comes
 *      right after the one it read and after every validated read of it.
 *      Together with (1) and (3) the execution is equivalent to the serial
 *      one in bts order.
 *  (5) rts only grows: a validator writes max(rts, bts) under the latch,
 *      an install writes its bts, which exceeds the rts it read under the
 *      latch (check_written), and a rollback restores, under the same
 *      latch, the rts the installer read (no one else writes while it
 *      holds the latch).
 *  (6) A transaction of one read-only command on one key (a plain GET)
 *      validates like any other (latch, re-read, rts): returning the
 *      version without raising rts would let an older writer install
 *      behind a reader that finished before it, out of real-time order
 *      (mvcc.c invariant (6)). For the same reason a read of an absent
 *      key takes a placeholder (reads_mark).
 *  (7) The tail of a written item is what its image, read under our latch,
 *      carries (a->otail): the undo record restores the older versions too.
 *
 * Deviations from the paper, and why:
 *  (1) Reads are a Double-Read, not one Read^D: the fabric is atomic per 8
 *      bytes only and a single READ could pair one install's ver with
 *      another's value (cc.h).
 *  (2) The new version's status lives in the descriptor's bits 40..47, not
 *      in a per-slot word: only the newest version can be RN (a writer
 *      that finds the newest RN treats it as committed by invariant (2)
 *      and pushes it into the tail as such), so one status per item is
 *      every status the paper's layout can hold at once.
 *  (3) One rts per item (meta[0]), as mvcc, rather than per version: a
 *      read of an older version raises the item's rts, which can only make
 *      writers abort more (a writer checks it against the newest version).
 *      The new version's rts starts at its wts (the notes' reading of
 *      Fig. 9, which Algorithm 11 leaves unset).
 *  (4) The latches of the whole validation are taken in one batch over
 *      every node (doorbell batching; RCBench's own advice), not item by
 *      item, and the checks of lines 18 and 29 run once every latch is
 *      held. Write's test of line 10 (wts, rts, RN) is repeated under the
 *      latch (check_written): between the read and validation a reader
 *      may have raised rts past bts, which line 18 alone (a version
 *      comparison) would miss. Blind writes (a SET) skip the Read^D of
 *      line 9: the validation's READ under the latch checks the same.
 *  (5) The install and the latch release go through rckv's undo log and
 *      commit point (prim_commit_writes): the latches of the write set are
 *      held until the commit point, not released at the install (lines
 *      23); the RN window a reader can see is from there to the flip. An
 *      abort after the install rolls it back from its undo record under
 *      the latch, before anyone reads it (the installing mark): that is
 *      the paper's "set X_{k+1}.st to AB" (line 996) without leaving an
 *      AB slot behind, so no status AB is ever stored. A crash is settled
 *      the same way by recovery (storage/log.c), and invariant (2)
 *      resolves an RN version whose writer died after its commit point.
 *  (6) A writer that meets an RN newest version at validation treats it as
 *      committed (invariant (2)) instead of aborting (line 10's RN test):
 *      the latch it holds proves the writer of that version is past its
 *      commit point. The read of a key later written still waits for the
 *      RN version it would read, as line 6 says.
 *  (7) Cicada reads other transactions' states only through the versions'
 *      status (X_n^m.st replaces MVCC's wid, line 907); no Read^T is made.
 *      The transaction record is used as every protocol uses it, by the
 *      undo log's slot.
 *  (8) A writer whose retry would meet the same newer version advances
 *      its clock past it (cc_ts_observe), as mvcc and timestamp do.
 *
 * Garbled and open points of the paper (notes-rcbench.md A.3), as read here:
 *  - line 987's "X^m.st = RN" is X_k^m.st, the newest version's status
 *    (cicada_write, check_written);
 *  - the new version's rts, which Algorithm 11 leaves unset and Fig. 9's
 *    prose sets: its wts (deviation (3));
 *  - an item both read and written is validated once, as written (lines
 *    24-32 take rs - ws): check_written's X'_k == X_k covers the read,
 *    since the read returned the newest version (cicada_write);
 *  - "set X_{k+1}.st to AB" on abort (line 996) for versions already
 *    installed: their rollback (deviation (5)).
 *
 * Full slots: at most mvcc-versions versions per item, and only as many
 * as fit the block after the value and within cc_inplace_max; installing
 * drops the oldest. A reader older than every kept version aborts (cause
 * version) and retries with a new bts.
 */
#include "cc/cc.h"
#include "cc/node.h"
#include "cc/protocols/versions.h"

#define CI_TORN_RETRIES 2 /* Double-Reads retried at once before waiting */
#define CI_RN_WAITS 4     /* polls of an RN version before resolving it */

/* ---- reads ---- */

/* The Double-Read halves agree and no install is under way (cc.h). A latch
 * held by a validator is no obstacle: it writes only rts, one word. */
static bool dread_ok(const struct cc_access *a)
{
	return a->hdr[0][0] == a->hdr[1][0] && a->hdr[0][1] == a->hdr[1][1] &&
	       !cc_lock_is_installing(a->hdr[0][0]);
}

static int dread_accept(struct txn *t, struct cc_access *a)
{
	a->img->lock = a->hdr[0][0];
	a->img->ver = a->hdr[0][1];
	a->pstate &= (uint8_t)~ACC_PROTO;
	return prim_check_block(t, a);
}

/*
 * getProperVer on a consistent image (invariant (3)). CC_OK with *rn set
 * when the proper version is the newest and RN (the read must wait), else
 * the version read: p[0], p[1], and an older one shown in the image.
 * CC_ABORT (version) when no kept version is old enough.
 */
static int proper_version(struct txn *t, struct cc_access *a, bool *rn)
{
	struct ver_entry e = { 0 };
	int which = ver_pick(a, t->start_ts, &e);
	*rn = false;
	if (which == 0) {
		cc_ts_observe(t, a->img->ver);
		return cc_abort_with(t, CC_CAUSE_VERSION);
	}
	if (which == 1 && ver_desc_status(a->img->meta[1]) == VER_ST_RN) {
		*rn = true;
		return CC_OK;
	}
	a->p[1] = a->img->ver;
	a->p[0] = which == 1 ? a->img->ver : e.wts;
	if (which == 2) {
		ver_img_show(a, &e);
		a->pstate |= ACC_PROTO;
	}
	return CC_OK;
}

/* An RN version seen unlocked (not installing) is committed (invariant
 * (2)): flip it, as its writer is about to, unless it changed. */
static int resolve_rn(struct txn *t, struct cc_access *a)
{
	uint64_t d = a->img->meta[1], old = 0;
	prim_post_cas_item(t, a, W_META1, d, ver_desc_with(d, VER_ST_CM), &old);
	return prim_exec(t);
}

static int cicada_read(struct txn *t, struct cc_access *a)
{
	int round = 0, torn = 0, rn = 0;
	a->otail = 0; /* read, not locked: no undo record of this image */
	for (;;) {
		int rc = prim_double_read(t, a);
		if (rc)
			return rc;
		if (!dread_ok(a)) {
			/* An install is a round trip from done: read again at
			 * once, then yield between tries. */
			if (++torn > CI_TORN_RETRIES && (rc = cc_wait(t, round++)))
				return rc;
			continue;
		}
		bool pending;
		if ((rc = dread_accept(t, a)) || (rc = proper_version(t, a, &pending)))
			return rc;
		if (!pending)
			return CC_OK;
		/* Line 6: wait for the writer of the proper version. */
		if (++rn > CI_RN_WAITS) {
			if ((rc = resolve_rn(t, a)))
				return rc;
		} else if ((rc = cc_wait(t, round++))) {
			return rc;
		}
	}
}

/* The fetch stage's batched read: every key's Double-Read in one batch.
 * A torn image or an RN proper version is left to cicada_read (CC_RETRY),
 * which reads again or waits: the batched read decides nothing else. */
static bool cicada_read_post(struct txn *t, struct cc_access *a)
{
	a->otail = 0;
	prim_post_double_read(t, a);
	return true;
}

static int cicada_read_done(struct txn *t, struct cc_access *a)
{
	if (!dread_ok(a))
		return CC_RETRY;
	bool pending;
	int rc = dread_accept(t, a);
	if (rc == CC_OK)
		rc = proper_version(t, a, &pending);
	if (rc == CC_OK && pending)
		return CC_RETRY;
	return rc;
}

/* ---- writes ---- */

/* A newer version than bts exists, or the one we would replace was read
 * after bts: our write cannot come right after it in bts order. */
static int newer(struct txn *t, uint64_t ver, uint64_t rts)
{
	cc_ts_observe(t, ver > rts ? ver : rts); /* deviation (8) */
	return cc_abort_with(t, CC_CAUSE_NEWER);
}

static int cicada_write(struct txn *t, struct cc_access *a)
{
	const uint64_t bts = t->start_ts;
	if (!(a->mode & ACC_R)) {
		a->pstate |= ACC_BLIND; /* deviation (4) */
		return CC_OK;
	}
	/* Line 10 on what the read saw: it read the newest version (not an
	 * older one, ACC_PROTO), which must be older than us and not read
	 * after us. It was not RN: the read waited (line 6). */
	if ((a->pstate & ACC_PROTO) || a->p[1] >= bts || a->img->meta[0] > bts)
		return newer(t, a->p[1], a->img->meta[0]);
	return CC_OK;
}

/* ---- validation and commit ---- */

static bool only_read(const struct cc_access *a)
{
	return a->mode == ACC_R;
}

/* Latch and re-read every item of the write set and the read-only set, in
 * one batch (deviation (4)). */
static void post_latches(struct txn *t)
{
	prim_post_lock_writes(t, true);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!only_read(a))
			continue;
		/* As prim_post_lock_writes: the result in stage[2], noted by
		 * prim_note_locks, the READ behind the CAS. */
		a->pstate |= ACC_CASPEND | ACC_NEEDIMG;
		a->stage[2] = ~0ull;
		prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
		prim_post_read_block(t, a);
	}
}

/* Lines 17-19 and line 10 again, under the latch: invariant (4). */
static int check_written(struct txn *t, struct cc_access *a)
{
	const uint64_t bts = t->start_ts;
	int rc = prim_check_block(t, a);
	if (rc)
		return rc;
	uint64_t ver = a->img->ver, rts = a->img->meta[0];
	if (!(a->pstate & ACC_BLIND) && ver != a->p[1])
		return newer(t, ver, rts); /* X'_k != X_k */
	if (ver >= bts || rts > bts) /* invariants (1), (4) */
		return newer(t, ver, rts);
	uint32_t off[VER_MAX], bytes;
	(void)ver_tail_parse(a, a->img, off, &bytes);
	a->otail = bytes; /* invariant (7) */
	a->img->lock = t->owner;
	a->wmeta[0] = bts; /* the new version's rts: deviation (3) */
	return CC_OK;
}

/* Lines 28-31 under the latch: invariant (4). The rts WRITE is queued, to
 * run before the latch's release. */
static int check_read(struct txn *t, struct cc_access *a)
{
	const uint64_t bts = t->start_ts;
	int rc = prim_check_block(t, a);
	if (rc)
		return rc;
	struct ver_entry e = { 0 };
	int which = ver_pick(a, bts, &e);
	if (which == 0) {
		cc_ts_observe(t, a->img->ver);
		return cc_abort_with(t, CC_CAUSE_VERSION);
	}
	uint64_t wts = which == 1 ? a->img->ver : e.wts;
	if (wts != a->p[0])
		return newer(t, a->img->ver, 0); /* X'_i != X_i */
	if (a->img->meta[0] < bts) /* invariant (5) */
		prim_post_write_word(t, a, W_META0, bts);
	return CC_OK;
}

/* Lines 33-35: every new version RN -> CM, one CAS each, one batch. A
 * relocated write's new block was written committed (prim.c writes its
 * descriptor 0). Committed whatever this batch does (invariant (2)). */
static void flip_committed(struct txn *t)
{
	int n = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W) || (a->pstate & ACC_MOVED))
			continue;
		prim_post_cas_item(t, a, W_META1, a->wmeta[1], ver_desc_with(a->wmeta[1], VER_ST_CM),
				   &a->stage[2]);
		n++;
	}
	if (n > 0 && prim_exec(t) != CC_OK)
		t->fatal = 0; /* an RN left behind is resolved by its readers */
}

static int cicada_commit(struct txn *t)
{
	int nacc = 0, nw = 0;
	for (int i = 0; i < t->nacc; i++) {
		nacc += t->acc[i]->mode != 0;
		nw += (t->acc[i]->mode & ACC_W) != 0;
	}
	if (nacc == 0)
		return prim_commit_writes(t, 0);
	/* Anything read is validated, one GET too: invariant (6). */

	/* VALIDATING: a failed exec still ran the parts of the nodes that
	 * answered; the latches won there are noted, so the abort releases
	 * them. */
	post_latches(t);
	prim_stage(t, CC_STAGE_VALIDATE);
	int rc = prim_note_locks(t, prim_exec(t));
	for (int i = 0; rc == CC_OK && i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (a->mode & ACC_W)
			rc = check_written(t, a);
		else if (only_read(a))
			rc = check_read(t, a);
	}
	if (rc)
		return rc;

	char *buf = NULL;
	if (nw && (rc = ver_build_tails(t, ver_keep(t), VER_ST_RN, &buf)))
		return rc;
	t->cts = t->start_ts;
	rc = prim_commit_writes(t, t->start_ts);
	if (nw)
		ver_free_tails(t, buf);
	if (rc == CC_OK && nw)
		flip_committed(t);
	return rc;
}

static void cicada_abort(struct txn *t)
{
	prim_release_locks(t);
}

const struct cc_protocol cc_cicada = {
	.name = "cicada",
	.install_mark = true,
	.keep_tombstones = true,
	.reads_mark = true,
	.versions = true,
	.begin = cc_begin_fresh_ts,
	.read = cicada_read,
	.read_post = cicada_read_post,
	.read_done = cicada_read_done,
	.write = cicada_write,
	.commit = cicada_commit,
	.abort = cicada_abort,
};

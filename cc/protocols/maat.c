/*
 * maat.c: RDMA-MaaT, RCBench section 6.2.3 (Algorithms 9 and 10; notes-
 * rcbench.md A.2), after MaaT's dynamic timestamp ranges: every
 * transaction T owns an interval [T.lb, T.ub] of commit timestamps, kept
 * in its transaction record where other transactions read and shrink it;
 * items list the running transactions that read and wrote them, so that
 * whoever validates second sees the first; a transaction commits at
 * cts = T.lb iff T.lb <= T.ub when it decides, and the serial order is cts
 * order. Two transactions whose reads and writes cross (T1 reads X, T2
 * writes X and commits, T1 then writes Y) both commit, T1 before T2,
 * where silo would abort T1 (tests/integration/test_protocol_maat.py).
 *
 * Transaction record T^g (st.h struct st_txn_state; words 1..7, word 0
 * unused here). Every word below is written only by the holder of the
 * latch, and read only by it (Read^T of the whole record under the latch):
 *   word 1 latch  0, or the tid of the transaction that holds it (CAS
 *                 0 -> tid by Atomic^T, released by a WRITE of 0 behind
 *                 its other writes on the same endpoint);
 *   word 2 tid    the attempt that owns the record now: its start stamp
 *                 (cc_ts_next at mt_begin: clock:48 | node:6 | rec:10, so a
 *                 tid names its record, and the clock part, growing per
 *                 record, is the generation that tells a reused record);
 *   word 3 st     MT_RUN, MT_CM (committed: lb = ub = cts) or MT_AB;
 *   word 4 lb, word 5 ub   the interval; lb starts at tid, ub at
 *                 UINT64_MAX; lb only grows and ub only shrinks.
 *   word 6 ptid, word 7 pcts   the attempt that had the record before
 *                 (a retry of the same transaction, or the worker's last
 *                 one) and its outcome: its cts, or 0 if it aborted.
 *                 Written by mt_begin, so that a validator that still
 *                 holds that tid finds out how it ended (invariant (7)).
 * A worker zeroes words 1..7 of its records when it starts (cc/exec.c).
 *
 * Item metadata (struct st_item, cc.h):
 *   word 0 lock   X^m.latch: 0, or the owner word (cc.h) of the holder. A
 *                 latch is held for one round trip by a read or a write
 *                 that registers in a list (Algorithm 9), from the LOCK
 *                 stage to the install by a committing writer, and for the
 *                 whole transaction in exclusive mode (below).
 *   word 1 ver    X^m.wts: cts of the last committed writer (installs set
 *                 ver := cts, prim_commit_writes).
 *   word 2 meta0  X^m.rts: the largest cts of a committed reader or writer.
 *   word 3 meta1  the list descriptor: MT_TAG | S when the last 16*S bytes
 *                 of the block hold X^m.rL (S tids) then X^m.wL (S tids),
 *                 a free slot being 0; anything else means "no lists"
 *                 (st_reset_meta's 0 after a switch, a relocation's new
 *                 block, another protocol's descriptor).
 * The lists sit at the end of the block, so an install (words 1 up to the
 * end of the value) never moves them; cc/txn.c reserves blocks with room
 * for them (cc_protocol.item_room) and never installs a value over them.
 * S is maat-list-slots when a block's lists are set up, and the
 * descriptor's S afterwards (so nodes and CONFIG SET may differ).
 *
 * Exclusive mode. A block with no room for lists after its value (a
 * placeholder, an item last written under another protocol) cannot list
 * anyone: its latch is then kept from the access to the end of the
 * transaction (F_EXCL), so no other transaction touches it meanwhile,
 * and it is ordered against the past by wts and rts alone. The first
 * write of such an item moves it to a block with room.
 *
 * Per access: p[0] = ver seen by the read; p[1] = flags F_* | S << 8 (the
 * lists we are in, and their size); stage[2] = the latch CAS's result.
 *
 * States and transitions (function):
 *   BEGIN     --mt_begin: tid := cc_ts_next; latch our own record (waiting
 *               for a validator that holds it), tid, st := RUN,
 *               [lb, ub] := [tid, +inf], unlatch --> RUNNING
 *   RUNNING   --read of X (mt_read; batched at fetch by mt_read_post /
 *               mt_read_done, two rounds): CAS latch + READ block (round
 *               1), add tid to rL and WRITE the lists + unlatch (round 2).
 *               The writers then in wL are T.aL (ordered after T), kept in
 *               the read image; gwts is the image's ver + 1. No room:
 *               exclusive mode. Latch busy: WAITING.
 *   RUNNING   --first write of X (mt_write; for a key declared for writing
 *               only, at fetch with the reads, mt_write_post/_done): the
 *               same, into wL; rL and wL are read again at commit under
 *               the latch (T.bL, T.oL).
 *   WAITING   --cc_wait, then again (invariant (4)).
 *   LOCKING   --commit (mt_commit, lock_writes): CAS latch + READ every
 *               written item not held, one batch. A busy one: give back
 *               what this round took, wait, again (abort, cause lock, past
 *               CC_WAIT_MAX_MS). Under the latches: same block (else
 *               stale), ver unchanged since our read (else interval: we
 *               would follow the writer we read before), and
 *               floor := max(ver + 1, rts + 1) (T.gwts, T.grts); the rL
 *               entries are T.bL, the wL entries T.oL.
 *   VALIDATING --validate (Algorithm 10, Validation and Commit's decision
 *               in one latch hold): CAS the latch of our record and of
 *               every other transaction's record in T.bL, T.aL, T.oL, each
 *               with a READ of the record behind it, one batch; a busy
 *               one: unlatch all, wait, again (invariant (3)). Then
 *               adjust (decide), write the records back and unlatch, one
 *               batch: st := CM and lb = ub = cts, or st := AB and
 *               ABORTED (cause interval).
 *   WAITCLOCK --commit_wait: until the real clock passed cts (invariant (6)).
 *   INSTALLING --our tid out of the written items' lists (a WRITE under
 *               our latch), rts of exclusive read items raised, then
 *               prim_commit_writes(cts): undo records, installs (ver := cts,
 *               rts := max(rts, cts), the descriptor kept), commit point,
 *               unlatch --> COMMITTED
 *   RELEASING --unregister: for every read-only item we are listed in,
 *               CAS latch + READ, then tid out of rL, rts := max(rts, cts),
 *               unlatch (Commit lines 30-35), two rounds for all items.
 *   ABORTED   --mt_abort: prim_release_locks (rolls back installs, drops
 *               every latch held), then unregister as above without rts.
 *
 * Invariants:
 *  (1) An item's lists, meta[1] and the list bytes change only under its
 *      latch; so do ver and rts, except a failed commit's rollback, also
 *      under it. A latch is 0 or one owner word, taken by CAS from 0.
 *  (2) A transaction is in an item's lists from its registration until
 *      its effect on wts/rts is in place (a writer leaves wL in the same
 *      latch hold as its install; a reader leaves rL in the same WRITE
 *      batch that raises rts), and every attempt leaves every list before
 *      it ends (commit: unregister; abort: mt_abort). So a transaction
 *      listed in an item we hold latched is still running its attempt:
 *      its record still carries its tid, and what it did to the item is
 *      not yet in rts/wts. One that left is covered by rts/wts: floor.
 *  (3) Validation takes every record latch it needs with one try each
 *      and holds none while it waits (it gives them all back first), and
 *      latches are never awaited while a record latch is held: no
 *      deadlock between validators, whatever order the paper's loop would
 *      take them in (notes A.2: it holds two at once, in no fixed order).
 *      A validator that died holding record latches (its node killed)
 *      gives them back through its node's restart: every node then drops
 *      the latches that name it (mt_peer_restarted).
 *  (4) Waits for an item latch happen only while the transaction holds no
 *      latch at all (no exclusive item: with one, a busy latch aborts,
 *      cause lock); latch holders in LOCKING/VALIDATING wait only for
 *      record latches, which by (3) are never held across a wait. So no
 *      cycle of waits.
 *  (5) Every conflicting pair T, T' gets an interval constraint from the
 *      one that decides second, while it holds both records' latches:
 *      - T reads X and T' writes it, T' installing after T's read: if T'
 *        was in X.wL when T registered, T' is in T.aL (T -> T'); else T
 *        is in X.rL when T' latches X at commit (T left only after it
 *        decided and raised rts: then T'.floor > T.cts), so T is in
 *        T'.bL (T -> T'). If T' installed before T registered, T read
 *        T''s value and T.floor > wts >= T'.cts (T' -> T);
 *      - both write X: the first to latch X at commit keeps the latch
 *        to its install, finds the other in X.wL (T.oL), undecided, and
 *        orders it after itself (it decides first); the second latches X
 *        after that install and finds wts >= the first's cts: floor.
 *      With cts = lb and lb <= ub at the decision, every constraint
 *      A.ub < B.lb gives cts(A) < cts(B): cts order is a serial order.
 *  (6) No commit is visible before the real clock passed its cts
 *      (commit_wait), and lb starts at a stamp taken when the attempt
 *      began: if T1 returned before T2 began, cts(T1) < tid(T2) <=
 *      cts(T2). With (5): strictly serializable.
 *  (7) A record whose tid is not the one we listed belongs to a later
 *      attempt: ours ended. If its ptid is ours, pcts says how it ended.
 *      Else, if it had to follow us (aL), its cts is at least its lb's
 *      first value, its tid: ub := min(ub, tid' - 1) is safe whether it
 *      committed or not. By (2) this never happens to a bL or oL entry
 *      read under our latch, except for a transaction whose node died;
 *      such an entry is treated as a reader that committed before now
 *      (lb := past a fresh stamp). Entries of such attempts (zombies) are
 *      dropped from a list found full (list_gc) and, from a wL, after
 *      they emptied a reader's interval (drop_zombies): a writer leaves
 *      wL with its install, so one still listed never committed. A live
 *      node's attempt whose cleanup could not reach an item (its node was
 *      down then) leaves zombies too, whose record still carries their
 *      tid: it says CM, or AB (mt_abort writes it then), so list_gc tells
 *      them from running ones by st.
 *
 * Deviations from the paper, and why:
 *  - Garbled passages, as read here (notes-rcbench.md A.2): "AcaTMExcLock"
 *    and Algorithm 9's Atomic^D on a Tid are the record latch, Atomic^T;
 *    Commit's lines 33-35 (lost in the text) release a read item as its
 *    lines 23-29 do a written one, with rts and rL; T's own tid, which
 *    Write puts in X^m.wL, is left out of T.oL (and out of every list it
 *    reads); the initial interval is [start stamp, +inf) (below).
 *  - Records keep the previous attempt's tid and outcome (ptid, pcts),
 *    which the paper's T^g does not: a record is reused by the next
 *    attempt at once (cc/exec.c), and a validator still holding the old
 *    tid would otherwise not know how it ended (invariant (7)).
 *  - Validation and the commit decision run in one hold of every record
 *    latch involved (our own and each other's), taken in one batch with
 *    one try each, instead of the paper's loop that takes our latch and
 *    one other's per step (Algorithm 10 lines 6-15) and then our latch
 *    again to decide: one round trip for all records instead of three per
 *    record, no deadlock (invariant (3)), and no state between validated
 *    and committed that other validators would have to tell apart. That
 *    also settles "if T enters validation first" (notes A.2, left open):
 *    an other writer found running has not decided yet, so it follows us.
 *  - Eq. 2 pushes a running T' after us with T'.lb := T.ub + 1; with
 *    T.ub still +inf (nothing bounded it) that dooms T'. Since we decide
 *    in the same hold and commit at cts = lb, we push T'.lb past our lb
 *    instead (T.ub := T.lb first, as Commit line 20 does anyway). For a
 *    running T' that must precede us we shrink T'.ub below our lb, or, if
 *    its lb is not below ours, raise our lb past it when our interval
 *    stays non-empty (our choice: both intervals stay non-empty when they
 *    can), else Eq. 2.
 *  - If we end up with an empty interval we write nobody's record: the
 *    paper writes Eq. 2's adjustments before Commit checks lb <= ub, which
 *    only makes the others abort more.
 *  - Writes latch their items at commit (LOCKING) and keep the latch
 *    through validation to the install, as silo locks its write set;
 *    Algorithm 10 latches each written item once more after the decision.
 *    bL and oL are read again under that latch, so they hold every
 *    running transaction (invariant (2)), and the floor (grts, gwts) is
 *    taken there, where it cannot move.
 *  - lb starts at the attempt's start stamp, not 0, and the commit waits
 *    for the clock to pass cts (invariant (6)): strict serializability,
 *    which the checker tests (sundial.c made the same choice for the same
 *    G2-realtime cycle).
 *  - Reads and writes register in two round trips per batch of items
 *    (CAS + READ, then WRITE + unlatch), all the fetch stage's keys
 *    together, and INCR-like commands in both lists in one latch hold.
 *  - Exclusive mode for blocks with no room for the lists (above): the
 *    paper's items always have their fixed-length lists.
 *  - A full list aborts the transaction that would have been added
 *    (cause list_full, INFO aborts_list_full) rather than dropping an
 *    entry: an entry dropped is a conflict nobody would order.
 *  - Lists that outlive their transactions (a killed node's) are cleaned
 *    by whoever they get in the way of (list_gc, drop_zombies); the paper
 *    has no failures. Every stage is one-sided; RCBench's two-sided
 *    (RPC) variant of MaaT is not implemented.
 *  - An aborted attempt does not write st := AB: its entries leave every
 *    list before the retry begins, and its record's tid changes then;
 *    whoever still holds its tid treats it as running or over, which only
 *    constrains them (the paper's AB is only ever read to skip T').
 *    Except when its cleanup left entries behind (a node it could not
 *    reach): then it writes AB, for list_gc (invariant (7)).
 */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "cc/cc.h"
#include "cc/node.h"
#include "cc/sched.h"

#define MT_TAG 0x4d41415400000000ull /* "MAAT" in meta1's top half */
#define MT_SLOTS_DEFAULT 4
#define MT_SLOTS_MAX 16 /* maat-list-slots' bound (server/config.c) */

/* Record words (struct st_txn_state.word[] + 1 = record word index). */
enum { RW_LATCH = 1, RW_TID = 2, RW_ST = 3, RW_LB = 4, RW_UB = 5, RW_PTID = 6, RW_PCTS = 7 };
enum { MT_RUN = 1, MT_CM = 2, MT_AB = 3 };

/* p[1] flags. */
#define F_RL 1u    /* our tid is in the item's rL */
#define F_WL 2u    /* ... in its wL */
#define F_EXCL 4u  /* exclusive mode: we hold its latch until we end */
#define F_READ 8u  /* read: p[0] is the ver we read */
#define F_PROTO_AGAIN 16u /* mt_read_done: round 2 (the lists' WRITE) queued */
#define F_SHIFT 8  /* S of the lists we are in, bits 8..15 */

/* A record latch taken by another node's validator for longer than this
 * belongs to a dead node (a validator holds one for a round trip). */
#define MT_STEAL_NS 1000000000ull
/* Latch rounds of unregister before it leaves entries to their fate
 * (a node died: its lists keep our tid; invariant (7) reads it as over). */
#define MT_UNREG_ROUNDS 4000

static const uint64_t zero_word;

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static inline uint64_t tid_of(const struct txn *t) { return t->start_ts; }
static inline uint16_t tid_node(uint64_t tid) { return (uint16_t)cc_ts_node(tid); }
static inline int tid_rec(uint64_t tid) { return cc_ts_rec(tid); }

static inline bool desc_valid(uint64_t d)
{
	uint64_t s = d & 0xffu;
	return (d & ~0xffull) == MT_TAG && s >= 1 && s <= MT_SLOTS_MAX;
}
static inline unsigned desc_slots(uint64_t d) { return (unsigned)(d & 0xffu); }

static unsigned cfg_slots(const struct txn *t)
{
	uint64_t s = ck_pr_load_64((uint64_t *)&t->node->limits.maat_list_slots);
	return s >= 1 && s <= MT_SLOTS_MAX ? (unsigned)s : MT_SLOTS_DEFAULT;
}

static uint32_t cur_vlen(const struct st_item *it)
{
	return (st_data_flags(it->data) & ST_F_ABSENT) ? 0 : st_data_vlen(it->data);
}

/* The room a write of a must leave for the lists (cc_protocol.item_room). */
static uint32_t mt_item_room(const struct txn *t, const struct cc_access *a)
{
	unsigned s = cfg_slots(t);
	if (a->img && desc_valid(a->img->meta[1]))
		s = desc_slots(a->img->meta[1]) > s ? desc_slots(a->img->meta[1]) : s;
	return 16u * s;
}

/* S of the lists of a's block as a->img shows it (read under the latch),
 * or 0: no room for them (exclusive mode). */
static unsigned area_slots(const struct txn *t, const struct cc_access *a)
{
	const struct st_item *it = a->img;
	unsigned s = desc_valid(it->meta[1]) ? desc_slots(it->meta[1]) : cfg_slots(t);
	uint64_t used = sizeof(*it) + (uint64_t)a->klen + cur_vlen(it);
	return used + 16u * s <= st_class_size(a->ref.cls) ? s : 0;
}

static inline uint32_t area_off(const struct cc_access *a, unsigned s)
{
	return st_class_size(a->ref.cls) - 16u * s;
}
static inline uint64_t *area(struct cc_access *a, unsigned s)
{
	return (uint64_t *)((char *)a->img + area_off(a, s));
}
static inline unsigned acc_slots(const struct cc_access *a) { return (unsigned)(a->p[1] >> F_SHIFT) & 0xffu; }

static bool list_add(uint64_t *l, unsigned s, uint64_t tid)
{
	int free = -1;
	for (unsigned i = 0; i < s; i++) {
		if (l[i] == tid)
			return true;
		if (!l[i] && free < 0)
			free = (int)i;
	}
	if (free < 0)
		return false;
	l[free] = tid;
	return true;
}

static void list_del(uint64_t *l, unsigned s, uint64_t tid)
{
	for (unsigned i = 0; i < s; i++)
		if (l[i] == tid)
			l[i] = 0;
}

static bool holds_excl(const struct txn *t)
{
	for (int i = 0; i < t->nacc; i++)
		if ((t->acc[i]->p[1] & F_EXCL) && acc_locked(t->acc[i]))
			return true;
	return false;
}

/* ---- BEGIN ---- */

static int mt_begin(struct txn *t)
{
	uint64_t tid = t->start_ts = cc_ts_next(t);
	uint16_t self = prim_self(t);
	uint64_t since = 0;
	for (int round = 0;; round++) {
		uint64_t old = ~0ull;
		prim_post_atomic_txn(t, self, t->rec, RW_LATCH, 0, tid, &old);
		int rc = prim_exec(t);
		if (rc)
			return rc;
		if (old == 0)
			break;
		/* A validator adjusting the record's previous transaction:
		 * one round trip, unless its node died holding it. */
		uint64_t now = sched_now_ns();
		if (!since)
			since = now;
		if (now - since > MT_STEAL_NS) {
			uint64_t held = old;
			prim_post_atomic_txn(t, self, t->rec, RW_LATCH, held, tid, &old);
			if ((rc = prim_exec(t)))
				return rc;
			if (old == held)
				break; /* ours now (a CAS from 0 would find our tid) */
			since = 0; /* another holder: time it afresh */
			continue;
		}
		int cause = t->cause;
		(void)cc_wait(t, round < 8 ? round : 8);
		t->cause = cause;
	}
	t->cts = 0;
	/* Under our latch the record is still the last attempt's, as its
	 * validators left it (their WRITEs came before their unlatch). */
	uint64_t ptid = prim_read_own_txn(t, RW_TID);
	uint64_t pcts = prim_read_own_txn(t, RW_ST) == MT_CM ? prim_read_own_txn(t, RW_LB) : 0;
	/* tid, st, lb, ub, ptid, pcts */
	uint64_t f[6] = { tid, MT_RUN, tid, UINT64_MAX, ptid, pcts };
	prim_post_write_txn_buf(t, self, t->rec, RW_TID, f, sizeof(f));
	prim_post_write_txn_buf(t, self, t->rec, RW_LATCH, &zero_word, 8);
	return prim_exec(t);
}

/* ---- RUNNING: registration in an item's lists (Algorithm 9) ---- */

static void latch_post(struct txn *t, struct cc_access *a)
{
	a->stage[2] = ~0ull;
	prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
	prim_post_read_block(t, a); /* after the CAS: the item under our latch */
}

/* Give back a latch taken by latch_post, without writing anything. */
static void unlatch_post(struct txn *t, struct cc_access *a)
{
	prim_post_write_word(t, a, W_LOCK, 0);
	a->pstate &= (uint8_t)~ACC_LOCKED;
}

/*
 * A full list (we hold its latch): drop the entries of attempts that
 * ended without leaving it. By invariant (2) only an attempt whose node
 * died does that; its record then names another attempt (a restarted
 * worker zeroes its records). One Read^T per entry. A reader dropped so
 * may have committed, before now: rts goes past its cts if its record
 * still says (ptid), else past a fresh stamp. Returns whether any went.
 */
static bool list_gc(struct txn *t, struct cc_access *a, uint64_t *l, unsigned s, bool readers)
{
	uint64_t rec[MT_SLOTS_MAX][8];
	for (unsigned i = 0; i < s; i++)
		prim_post_read_txn(t, tid_node(l[i]), tid_rec(l[i]), rec[i], sizeof(rec[i]));
	if (prim_exec(t))
		return false;
	bool dropped = false;
	for (unsigned i = 0; i < s; i++) {
		uint64_t cts;
		if (rec[i][RW_TID] == l[i]) {
			if (rec[i][RW_ST] == MT_RUN)
				continue; /* running, or deciding: it leaves by itself */
			/* Decided and still listed: its attempt left the entry
			 * (its cleanup could not reach this node, mt_abort), or
			 * is about to leave it, and raise rts to its cts as we
			 * do here. An abort leaves rts alone. */
			cts = rec[i][RW_ST] == MT_CM ? rec[i][RW_LB] : 0;
		} else {
			cts = rec[i][RW_PTID] == l[i] ? rec[i][RW_PCTS] : cc_ts_next(t);
		}
		if (readers && cts > a->img->meta[0]) {
			a->img->meta[0] = cts;
			prim_post_write_bytes(t, a, 16, &a->img->meta[0], 8);
		}
		l[i] = 0;
		dropped = true;
	}
	return dropped;
}

/*
 * After latch_post ran: register a in the lists of `kind` (F_RL, F_WL, or
 * both: a one-key command that reads and writes its key, INCR).
 * CC_AGAIN: the lists' WRITE and the unlatch are queued (run them);
 * CC_OK: exclusive mode, the latch kept; CC_RETRY: the latch was busy;
 * CC_ABORT.
 */
static int reg_done(struct txn *t, struct cc_access *a, unsigned kind)
{
	uint64_t old = a->stage[2];
	if (old != 0) {
		if (old == t->owner || old == cc_lock_installing(t->owner))
			return cc_abort_with(t, CC_CAUSE_STALE); /* as lock2pl_done */
		return CC_RETRY;
	}
	int rc = prim_lock_won(t, a);
	if (rc)
		return rc;
	if ((a->p[1] & F_READ) && a->img->ver != a->p[0]) {
		/* Written since we read it: we would follow that writer
		 * (write-write) and precede it (we read what it replaced). */
		unlatch_post(t, a);
		(void)prim_exec(t);
		return cc_abort_with(t, CC_CAUSE_INTERVAL);
	}
	unsigned s = area_slots(t, a);
	if (!s) {
		a->p[1] |= F_EXCL;
		return CC_OK;
	}
	uint64_t *l = area(a, s);
	if (!desc_valid(a->img->meta[1])) {
		/* First maat registration in this block since a switch or a
		 * relocation: whatever is there is not a list. */
		memset(l, 0, 16u * s);
		a->img->meta[1] = MT_TAG | s;
		prim_post_write_word(t, a, W_META1, a->img->meta[1]);
	}
	for (unsigned w = 0; w < 2; w++) {
		if (!(kind & (w ? F_WL : F_RL)))
			continue;
		uint64_t *kl = w ? l + s : l;
		if (!list_add(kl, s, tid_of(t)) &&
		    !(list_gc(t, a, kl, s, !w) && list_add(kl, s, tid_of(t)))) {
			unlatch_post(t, a); /* nothing of img's lists written */
			(void)prim_exec(t);
			return cc_abort_with(t, CC_CAUSE_LIST_FULL);
		}
	}
	prim_post_write_bytes(t, a, area_off(a, s), l, 16u * s);
	unlatch_post(t, a);
	a->p[1] = (a->p[1] & ~(0xffull << F_SHIFT)) | kind | ((uint64_t)s << F_SHIFT);
	return CC_AGAIN;
}

static void note_read(struct cc_access *a)
{
	a->p[0] = a->img->ver;
	a->p[1] |= F_READ;
}

/* Register a in `kind`, alone, waiting for a busy latch (invariant (4)). */
static int reg_alone(struct txn *t, struct cc_access *a, unsigned kind)
{
	for (int round = 0;; round++) {
		latch_post(t, a);
		int rc = prim_exec(t);
		if (rc)
			return rc;
		rc = reg_done(t, a, kind);
		if (rc == CC_AGAIN)
			return prim_exec(t);
		if (rc != CC_RETRY)
			return rc;
		if (holds_excl(t))
			return cc_abort_with(t, CC_CAUSE_LOCK);
		if ((rc = cc_wait(t, round)))
			return rc;
	}
}

static int mt_read(struct txn *t, struct cc_access *a)
{
	if (!(a->p[1] & F_EXCL)) {
		/* INCR and its kind will write what they read: list them as
		 * the writer too now, sparing mt_write its round trips. */
		int rc = reg_alone(t, a, t->single_write ? F_RL | F_WL : F_RL);
		if (rc)
			return rc;
	}
	/* Exclusive: the image read under the latch we hold is current. */
	note_read(a);
	return CC_OK;
}

static bool mt_read_post(struct txn *t, struct cc_access *a)
{
	if (a->p[1] & F_EXCL)
		return false;
	a->p[1] &= ~(uint64_t)F_PROTO_AGAIN;
	latch_post(t, a);
	return true;
}

static int mt_read_done(struct txn *t, struct cc_access *a)
{
	if (a->p[1] & F_PROTO_AGAIN) { /* round 2 ran: the lists are written */
		a->p[1] &= ~(uint64_t)F_PROTO_AGAIN;
		note_read(a);
		return CC_OK;
	}
	int rc = reg_done(t, a, F_RL);
	if (rc == CC_AGAIN) {
		a->p[1] |= F_PROTO_AGAIN;
		return CC_AGAIN;
	}
	if (rc == CC_OK)
		note_read(a);
	return rc; /* CC_RETRY: mt_read alone, which waits */
}

static int mt_write(struct txn *t, struct cc_access *a)
{
	if (a->p[1] & (F_EXCL | F_WL))
		return CC_OK;
	return reg_alone(t, a, F_WL);
}

/* A key declared for writing only: its registration in wL rides in the
 * fetch's rounds with the reads' (then mt_write finds it done). */
static bool mt_write_post(struct txn *t, struct cc_access *a)
{
	if (a->p[1] & (F_EXCL | F_WL))
		return false;
	a->p[1] &= ~(uint64_t)F_PROTO_AGAIN;
	latch_post(t, a);
	return true;
}

static int mt_write_done(struct txn *t, struct cc_access *a)
{
	if (a->p[1] & F_PROTO_AGAIN) {
		a->p[1] &= ~(uint64_t)F_PROTO_AGAIN;
		return CC_OK;
	}
	int rc = reg_done(t, a, F_WL);
	if (rc == CC_AGAIN)
		a->p[1] |= F_PROTO_AGAIN;
	return rc; /* CC_RETRY: the body's first write runs mt_write alone */
}

/* ---- LOCKING ---- */

/* Give back the latches the last lock round took (not exclusive holds),
 * by CAS: the blocks were not checked yet (prim_lock_won's reason). */
static int unlock_round(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if ((a->mode & ACC_W) && acc_locked(a) && !(a->p[1] & F_EXCL)) {
			prim_post_cas_item(t, a, W_LOCK, t->owner, 0, &a->stage[0]);
			a->pstate &= (uint8_t)~ACC_LOCKED;
		}
	}
	return prim_exec(t);
}

/* Every written item latched, its image read under the latch. */
static int lock_check(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		int rc = prim_check_block(t, a);
		if (rc)
			return rc;
		if ((a->p[1] & F_READ) && a->img->ver != a->p[0])
			return cc_abort_with(t, CC_CAUSE_INTERVAL); /* as in reg_done */
	}
	return CC_OK;
}

static int lock_writes(struct txn *t)
{
	int rc;
	for (int round = 0;; round++) {
		if (prim_post_lock_writes(t, true) == 0)
			break;
		rc = prim_note_locks(t, prim_exec(t));
		if (rc != CC_ABORT)
			return rc == CC_OK ? lock_check(t) : rc;
		/* Busy: hold nothing while we wait (invariant (4)). */
		if ((rc = unlock_round(t)))
			return rc;
		if (holds_excl(t))
			return cc_abort_with(t, CC_CAUSE_LOCK);
		if ((rc = cc_wait(t, round)))
			return rc;
	}
	return lock_check(t);
}

/* ---- VALIDATING (Algorithm 10) ---- */

/* How another transaction must be ordered against us. */
#define O_BEFORE 1u /* it read an item we write: it precedes us (T.bL) */
#define O_AFTER 2u  /* it wrote an item we read, before our read: it follows (T.aL) */
#define O_WW 4u     /* it writes an item we write (T.oL): decided by its state */

struct other {
	uint64_t tid;
	unsigned rel;   /* O_* */
	int lead;       /* the entry that latches this record (the first with it) */
	bool dirty;     /* lead: lb or ub changed, to write back */
	bool over;      /* its attempt ended, how is not known (invariant (7)) */
	uint64_t old;   /* lead: the latch CAS's result */
	uint64_t r[8];  /* lead: the record, read under the latch */
};

struct others {
	struct other *v;
	int n, cap;
};

static int others_add(struct txn *t, struct others *o, uint64_t tid, unsigned rel)
{
	if (!tid || tid == tid_of(t))
		return CC_OK;
	if (tid_node(tid) == prim_self(t) && tid_rec(tid) == t->rec)
		return CC_OK; /* an earlier attempt of ours: over, and aborted */
	for (int i = 0; i < o->n; i++) {
		if (o->v[i].tid == tid) {
			o->v[i].rel |= rel;
			return CC_OK;
		}
	}
	if (o->n == o->cap) {
		int cap = o->cap ? 2 * o->cap : 16;
		struct other *v = realloc(o->v, (size_t)cap * sizeof(*v));
		if (!v)
			return CC_EINTERNAL;
		o->v = v;
		o->cap = cap;
	}
	struct other *x = &o->v[o->n];
	memset(x, 0, sizeof(*x));
	x->tid = tid;
	x->rel = rel;
	x->lead = o->n;
	for (int i = 0; i < o->n; i++) {
		if (tid_node(o->v[i].tid) == tid_node(tid) && tid_rec(o->v[i].tid) == tid_rec(tid)) {
			x->lead = o->v[i].lead;
			break;
		}
	}
	o->n++;
	return CC_OK;
}

/*
 * T.bL, T.aL, T.oL and the floor max(gwts, grts): written items from the
 * images read under our latch at LOCKING (invariant (2)), read-only items
 * from the image read when we registered.
 */
static int gather(struct txn *t, struct others *o, uint64_t *floor)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		const struct st_item *it = a->img;
		int rc = CC_OK;
		if (a->mode & ACC_W) {
			*floor = max64(*floor, max64(it->ver, it->meta[0]) + 1);
			if ((a->p[1] & F_EXCL) || !desc_valid(it->meta[1]) || !area_slots(t, a))
				continue;
			unsigned s = desc_slots(it->meta[1]);
			const uint64_t *l = area(a, s);
			for (unsigned k = 0; k < s && rc == CC_OK; k++)
				if ((rc = others_add(t, o, l[k], O_BEFORE)) == CC_OK)
					rc = others_add(t, o, l[s + k], O_WW);
		} else if (a->p[1] & F_READ) {
			*floor = max64(*floor, a->p[0] + 1);
			unsigned s = acc_slots(a);
			if ((a->p[1] & F_EXCL) || !(a->p[1] & F_RL) || !s)
				continue;
			const uint64_t *l = area(a, s);
			for (unsigned k = 0; k < s && rc == CC_OK; k++)
				rc = others_add(t, o, l[s + k], O_AFTER);
		}
		if (rc)
			return rc;
	}
	return CC_OK;
}

/* Latch our record and every other's, each read behind its CAS: one
 * batch, one try each (invariant (3)). *mold: our latch's CAS result. */
static int latch_records(struct txn *t, struct others *o, uint64_t me[8], uint64_t *mold)
{
	uint16_t self = prim_self(t);
	uint64_t tid = tid_of(t);
	*mold = ~0ull;
	prim_post_atomic_txn(t, self, t->rec, RW_LATCH, 0, tid, mold);
	prim_post_read_txn(t, self, t->rec, me, 8 * 8);
	for (int i = 0; i < o->n; i++) {
		struct other *x = &o->v[i];
		if (x->lead != i)
			continue;
		x->old = ~0ull;
		prim_post_atomic_txn(t, tid_node(x->tid), tid_rec(x->tid), RW_LATCH, 0, tid, &x->old);
		prim_post_read_txn(t, tid_node(x->tid), tid_rec(x->tid), x->r, sizeof(x->r));
	}
	return prim_exec(t);
}

/* Unlatch every record whose latch we won; with `write`, write back our
 * record's st, lb, ub (from me) and every changed lb, ub first (the same
 * endpoint: before the unlatch). */
static int unlatch_records(struct txn *t, struct others *o, uint64_t me[8], uint64_t mold,
			   bool write)
{
	uint16_t self = prim_self(t);
	uint64_t failed = prim_failed_nodes(t);
	if (mold == 0 && !(failed >> self & 1)) {
		if (write)
			prim_post_write_txn_buf(t, self, t->rec, RW_ST, &me[RW_ST], 3 * 8);
		prim_post_write_txn_buf(t, self, t->rec, RW_LATCH, &zero_word, 8);
	}
	for (int i = 0; i < o->n; i++) {
		struct other *x = &o->v[i];
		uint16_t nd = tid_node(x->tid);
		if (x->lead != i || x->old != 0 || (failed >> nd & 1))
			continue;
		if (write && x->dirty)
			prim_post_write_txn_buf(t, nd, tid_rec(x->tid), RW_LB, &x->r[RW_LB], 2 * 8);
		prim_post_write_txn_buf(t, nd, tid_rec(x->tid), RW_LATCH, &zero_word, 8);
	}
	return prim_exec(t);
}

/*
 * The adjustments (Eq. 1 and 2, with the deviations in the header), on
 * our interval [*lb, *ub] and on the copies of the others' records.
 */
static void adjust(struct txn *t, struct others *o, uint64_t *lb, uint64_t *ub)
{
	/* Pass 1: the others that decided, or are over (invariant (7)). */
	for (int i = 0; i < o->n; i++) {
		struct other *x = &o->v[i];
		const uint64_t *r = o->v[x->lead].r;
		uint64_t cts;
		if (r[RW_TID] == x->tid) {
			if (r[RW_ST] != MT_CM)
				continue;
			cts = r[RW_LB]; /* = its ub */
		} else if (r[RW_PTID] == x->tid) {
			if (!(cts = r[RW_PCTS]))
				continue; /* it aborted */
		} else {
			/* Over, outcome unknown. */
			x->over = true;
			if (x->rel & O_AFTER)
				*ub = min64(*ub, x->tid - 1);
			if (x->rel & (O_BEFORE | O_WW))
				*lb = max64(*lb, cc_ts_next(t) + 1); /* a dead node's */
			continue;
		}
		if (x->rel & (O_BEFORE | O_WW)) /* Eq. 1: it -> T */
			*lb = max64(*lb, cts + 1);
		if (x->rel & O_AFTER) /* Eq. 1: T -> it */
			*ub = min64(*ub, cts - 1);
	}
	/* Pass 2: running ones that must precede us: below our lb. */
	for (int i = 0; i < o->n; i++) {
		struct other *x = &o->v[i];
		struct other *L = &o->v[x->lead];
		uint64_t *r = L->r;
		if (r[RW_TID] != x->tid || r[RW_ST] != MT_RUN || !(x->rel & O_BEFORE) ||
		    r[RW_LB] > r[RW_UB])
			continue; /* not running, or doomed already */
		if (r[RW_LB] < *lb) {
			if (r[RW_UB] >= *lb) { /* Eq. 2 */
				r[RW_UB] = *lb - 1;
				L->dirty = true;
			}
		} else if (r[RW_LB] + 1 <= *ub) {
			/* Its interval starts at or past ours: split at its lb
			 * rather than doom it. */
			if (r[RW_UB] != r[RW_LB]) {
				r[RW_UB] = r[RW_LB];
				L->dirty = true;
			}
			*lb = r[RW_LB] + 1;
		} else { /* Eq. 2: it cannot precede us and live */
			r[RW_UB] = *lb - 1;
			L->dirty = true;
		}
	}
	if (*lb > *ub)
		return; /* we abort: nothing more to decide */
	/* Pass 3: running ones that must follow us (aL; oL, which have not
	 * decided: we decide first). We commit at lb: they start past it. */
	*ub = *lb;
	for (int i = 0; i < o->n; i++) {
		struct other *x = &o->v[i];
		struct other *L = &o->v[x->lead];
		uint64_t *r = L->r;
		if (r[RW_TID] != x->tid || r[RW_ST] != MT_RUN || !(x->rel & (O_AFTER | O_WW)) ||
		    r[RW_LB] > r[RW_UB])
			continue;
		if (r[RW_LB] <= *lb) {
			r[RW_LB] = *lb + 1;
			L->dirty = true;
		}
	}
}

/*
 * After an empty interval: an aL entry whose attempt is over, outcome
 * unknown, bounded our ub by its tid. If it is still in the item's wL,
 * it never installed there (a writer leaves wL with its install,
 * invariant (2)), so it never committed: its node died, or its abort's
 * cleanup could not reach the item. Drop it, or every later reader of
 * the item would meet the same bound. Best effort, no wait: one latch
 * round for the items that listed one.
 */
static void drop_zombies(struct txn *t, struct others *o)
{
	const uint64_t mark = 1ull << 41;
	int n = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		unsigned s = acc_slots(a);
		if ((a->mode & ACC_W) || !(a->p[1] & F_RL) || (a->p[1] & F_EXCL) || !s)
			continue;
		const uint64_t *wl = area(a, s) + s;
		for (int k = 0; k < o->n && !(a->p[1] & mark); k++)
			for (unsigned j = 0; j < s; j++)
				if (o->v[k].over && (o->v[k].rel & O_AFTER) && wl[j] == o->v[k].tid)
					a->p[1] |= mark;
		if (a->p[1] & mark) {
			latch_post(t, a);
			n++;
		}
	}
	if (!n)
		return;
	int rc = prim_exec(t);
	uint64_t failed = rc ? prim_failed_nodes(t) : 0;
	int cause = t->cause;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->p[1] & mark))
			continue;
		a->p[1] &= ~mark;
		/* Where the batch failed, t->unknown has the node release
		 * what the CAS may have won; elsewhere a won latch is ours to
		 * give back, even if another node failed. */
		if ((failed >> a->node & 1) || a->stage[2] != 0)
			continue;
		unsigned s = acc_slots(a);
		if (rc || prim_check_block(t, a) != CC_OK || !desc_valid(a->img->meta[1]) ||
		    desc_slots(a->img->meta[1]) != s || area_slots(t, a) != s) {
			prim_post_cas_item(t, a, W_LOCK, t->owner, 0, &a->stage[0]);
			continue;
		}
		uint64_t *wl = area(a, s) + s;
		for (int k = 0; k < o->n; k++)
			if (o->v[k].over && (o->v[k].rel & O_AFTER))
				list_del(wl, s, o->v[k].tid);
		prim_post_write_bytes(t, a, area_off(a, s), area(a, s), 16u * s);
		prim_post_write_word(t, a, W_LOCK, 0);
	}
	(void)prim_exec(t);
	t->cause = cause;
}

/* VALIDATING: on CC_OK, t->cts is our commit timestamp and our record
 * says CM. */
static int validate(struct txn *t, struct others *o, uint64_t floor)
{
	uint64_t me[8], mold;
	int rc;
	for (int round = 0;; round++) {
		rc = latch_records(t, o, me, &mold);
		if (rc) {
			(void)unlatch_records(t, o, me, mold, false);
			return rc;
		}
		bool all = mold == 0;
		for (int i = 0; i < o->n && all; i++)
			all = o->v[i].lead != i || o->v[i].old == 0;
		if (all)
			break;
		/* Hold none while we wait (invariant (3)). */
		if ((rc = unlatch_records(t, o, me, mold, false)) || (rc = cc_wait(t, round)))
			return rc;
	}
	if (me[RW_TID] != tid_of(t)) { /* our record is ours alone: never */
		(void)unlatch_records(t, o, me, mold, false);
		return cc_abort_with(t, CC_CAUSE_OTHER);
	}
	uint64_t lb = max64(me[RW_LB], floor), ub = me[RW_UB];
	adjust(t, o, &lb, &ub);
	bool ok = lb <= ub;
	me[RW_ST] = ok ? MT_CM : MT_AB;
	me[RW_LB] = lb;
	me[RW_UB] = ok ? lb : ub;
	/* Aborting, we leave the others' intervals as they were. */
	for (int i = 0; i < o->n && !ok; i++)
		o->v[i].dirty = false;
	if ((rc = unlatch_records(t, o, me, mold, true)))
		return rc;
	if (!ok) {
		drop_zombies(t, o);
		return cc_abort_with(t, CC_CAUSE_INTERVAL);
	}
	t->cts = lb;
	return CC_OK;
}

/* ---- WAITCLOCK, INSTALLING, RELEASING ---- */

/* Invariant (6). */
static void commit_wait(struct txn *t)
{
	cc_ts_observe(t, t->cts);
	(void)cc_ts_next(t); /* sleeps until the clock passed t->cts (cc.h) */
}

/* What the installs write besides the values, and what goes out with them
 * under our latches: our tid out of the written items' lists, rts of
 * exclusive read items. */
static void install_prep(struct txn *t)
{
	uint64_t tid = tid_of(t), cts = t->cts;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		struct st_item *it = a->img;
		if (a->mode & ACC_W) {
			bool lists = !(a->p[1] & F_EXCL) && desc_valid(it->meta[1]) && area_slots(t, a);
			a->wmeta[0] = max64(it->meta[0], cts);
			a->wmeta[1] = lists ? it->meta[1] : 0;
			if (lists && (a->p[1] & (F_RL | F_WL))) {
				unsigned s = desc_slots(it->meta[1]);
				/* A relocated item's old block dies with its lists
				 * (its a->img is reused for the new block). */
				if (!acc_relocates(a, t->node->layout)) {
					uint64_t *l = area(a, s);
					list_del(l, s, tid);
					list_del(l + s, s, tid);
					prim_post_write_bytes(t, a, area_off(a, s), l, 16u * s);
				}
			}
			a->p[1] &= ~(uint64_t)(F_RL | F_WL);
		} else if ((a->p[1] & F_EXCL) && acc_locked(a) && it->meta[0] < cts) {
			prim_post_write_word(t, a, W_META0, cts); /* unlatched by the commit */
		}
	}
}

/*
 * RELEASING (cts != 0) and the abort's cleanup (cts == 0): our tid out of
 * every list we are still in, and rts raised for the reads of a commit.
 * Runs to the end (a commit cannot be undone), waiting for busy latches
 * while it holds none; gives up only when a node failed (its entries then
 * read as over, invariant (7)) or after MT_UNREG_ROUNDS. Returns whether
 * it left any entry behind.
 */
static bool unregister(struct txn *t, uint64_t cts)
{
	const uint64_t pend = 1ull << 40; /* latch posted this round */
	uint64_t tid = tid_of(t);
	int cause = t->cause;
	bool abandoned = false;
	for (int round = 0;; round++) {
		int n = 0;
		for (int i = 0; i < t->nacc; i++) {
			struct cc_access *a = t->acc[i];
			if ((a->p[1] & (F_RL | F_WL)) && !acc_locked(a)) {
				latch_post(t, a);
				a->p[1] |= pend;
				n++;
			}
		}
		if (!n)
			break;
		if (round == MT_UNREG_ROUNDS) {
			abandoned = true;
			break;
		}
		int rc = prim_exec(t);
		uint64_t failed = prim_failed_nodes(t);
		bool left = false;
		for (int i = 0; i < t->nacc; i++) {
			struct cc_access *a = t->acc[i];
			if (!(a->p[1] & pend))
				continue;
			a->p[1] &= ~pend;
			if (failed >> a->node & 1) {
				a->p[1] &= ~(uint64_t)(F_RL | F_WL);
				abandoned = true;
				continue;
			}
			uint64_t old = a->stage[2];
			if (old != 0) {
				if (old == t->owner || old == cc_lock_installing(t->owner))
					a->p[1] &= ~(uint64_t)(F_RL | F_WL); /* not our block now */
				else
					left = !rc;
				continue;
			}
			if (rc || prim_check_block(t, a) != CC_OK) {
				/* Moved or retired: nobody reads its lists now.
				 * Or another node failed: we give up here too. */
				prim_post_cas_item(t, a, W_LOCK, t->owner, 0, &a->stage[0]);
				a->p[1] &= ~(uint64_t)(F_RL | F_WL);
				abandoned |= rc != 0;
				continue;
			}
			unsigned s = acc_slots(a);
			if (s && desc_valid(a->img->meta[1]) && desc_slots(a->img->meta[1]) == s &&
			    area_slots(t, a) == s) {
				uint64_t *l = area(a, s);
				list_del(l, s, tid);
				list_del(l + s, s, tid);
				prim_post_write_bytes(t, a, area_off(a, s), l, 16u * s);
			}
			if (cts && (a->p[1] & F_RL) && a->img->meta[0] < cts)
				prim_post_write_word(t, a, W_META0, cts);
			prim_post_write_word(t, a, W_LOCK, 0);
			a->p[1] &= ~(uint64_t)(F_RL | F_WL);
		}
		if (prim_exec(t)) {
			abandoned = true;
			break;
		}
		if (!left)
			break;
		(void)cc_wait(t, round < 8 ? round : 8);
	}
	t->cause = cause;
	return abandoned;
}

static int mt_commit(struct txn *t)
{
	int rc = lock_writes(t);
	if (rc)
		return rc;
	struct others o = { 0 };
	uint64_t floor = 0;
	prim_stage(t, CC_STAGE_VALIDATE); /* the records' lists and bounds */
	rc = gather(t, &o, &floor);
	if (rc == CC_OK)
		rc = validate(t, &o, floor);
	free(o.v);
	if (rc)
		return rc;
	commit_wait(t);
	install_prep(t);
	if ((rc = prim_commit_writes(t, t->cts)))
		return rc;
	(void)unregister(t, t->cts); /* what it leaves, list_gc drops: st is CM */
	prim_locks_pending(t); /* a latch it won where a reply was lost */
	return CC_OK;
}

static void mt_abort(struct txn *t)
{
	int cause = t->cause;
	prim_release_locks(t); /* rolls installs back, drops every latch */
	bool left = unregister(t, 0);
	prim_locks_pending(t); /* a latch it won where a reply was lost */
	if (left) {
		/* Entries left in lists we could not reach: our record says
		 * this attempt is over, so whoever finds them drops them
		 * (list_gc). Without it they would read as running for as
		 * long as the record keeps this tid: a list full for good.
		 * Only we write our st (a validator writes lb, ub). */
		static const uint64_t ab = MT_AB;
		prim_post_write_txn_buf(t, prim_self(t), t->rec, RW_ST, &ab, 8);
		(void)prim_exec(t);
	}
	t->cause = cause;
}

/*
 * A validator holds the record latches it took for one round trip, but one
 * whose node died holding them never gives them back: every validator
 * that needs such a record then waits at validate until it aborts (cause
 * lock), for as long as the record's own worker starts no attempt (which
 * would steal its latch, mt_begin). When the dead node comes back, its
 * earlier incarnation's tids latch nothing anymore (invariant (3)).
 */
static unsigned mt_peer_restarted(struct cc_node *n, uint16_t peer)
{
	return prim_drop_node_words(n, RW_LATCH, peer);
}

const struct cc_protocol cc_maat = {
	.name = "maat",
	.keep_tombstones = true,
	.reads_mark = true,
	.item_room = mt_item_room,
	.begin = mt_begin,
	.read = mt_read,
	.read_post = mt_read_post,
	.read_done = mt_read_done,
	.write_post = mt_write_post,
	.write_done = mt_write_done,
	.write = mt_write,
	.commit = mt_commit,
	.abort = mt_abort,
	.peer_restarted = mt_peer_restarted,
};

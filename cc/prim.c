/*
 * prim.c: the primitives of RCBench section 5.2 on rckv's item layout.
 * Protocols call these and never the fabric (DESIGN.md principle 2). Every
 * verb is counted in the transaction's fab_stats by the batch.
 * See cc.h for the install order and the Double-Read argument.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cc/cc.h"
#include "cc/durable.h"
#include "cc/exec_internal.h"
#include "cc/node.h"

static inline uint64_t word_off(const struct cc_access *a, int word)
{
	return a->ref.off + (uint64_t)word * 8u;
}

/* Make sure a->img can hold a block of class cls. */
static int img_reserve(struct cc_access *a, uint8_t cls)
{
	uint32_t need = st_class_size(cls);
	if (a->img_cap >= need)
		return 0;
	struct st_item *p = realloc(a->img, need);
	if (!p)
		return -ENOMEM;
	a->img = p;
	a->img_cap = need;
	return 0;
}

int prim_exec(struct txn *t)
{
	uint64_t nodes = 0;
	for (int i = 0; i < t->batch.n; i++)
		nodes |= 1ull << (t->batch.ops[i].node & 63);
	int rc = fab_exec(&t->batch);
	uint64_t reached = t->reached;
	t->reached |= nodes & ~t->batch.unsent;
	if (rc) {
		/* A part that failed after it was sent may have run: a lock CAS
		 * in it may hold a lock that no access records. One refused at
		 * post ran nothing, but on a node an earlier exec of this
		 * attempt reached it may have been the release of a lock won
		 * there (a latch given back in the next round, maat's): that
		 * lock is no access's either. */
		t->unknown |= t->batch.failed & (~t->batch.unsent | reached);
		t->fatal = CC_EFAB;
		return CC_EFAB;
	}
	return CC_OK;
}

uint64_t prim_failed_nodes(const struct txn *t)
{
	return t->batch.failed;
}

uint16_t prim_self(const struct txn *t)
{
	return fab_self(t->node->fab);
}

void prim_post_read_block(struct txn *t, struct cc_access *a)
{
	if (img_reserve(a, a->ref.cls))
		abort(); /* out of memory for a block image: nothing sane to do */
	fab_read(&t->batch, a->ref.node, a->ref.off, a->img, st_class_size(a->ref.cls));
}

/* The block still holds our key, in the generation we resolved? */
int prim_check_block(struct txn *t, struct cc_access *a)
{
	const struct st_item *it = a->img;
	if (st_ident_gen(it->ident) != a->ref.gen || st_ident_klen(it->ident) != a->klen ||
	    (st_data_flags(it->data) & ST_F_DEAD) ||
	    sizeof(*it) + a->klen + st_data_vlen(it->data) > st_class_size(a->ref.cls) ||
	    memcmp(st_item_key(it), a->key, a->klen) != 0)
		return cc_abort_with(t, CC_CAUSE_STALE);
	return CC_OK;
}

int prim_lock_won(struct txn *t, struct cc_access *a)
{
	int rc = prim_check_block(t, a);
	if (rc == CC_OK) {
		a->pstate |= ACC_LOCKED;
		return CC_OK;
	}
	/* Not our key's block (anymore): it may be free and about to be
	 * initialized for another key, which writes its lock word. Give the
	 * word back only if it is still ours. */
	prim_stage(t, CC_STAGE_RELEASE);
	prim_post_cas_item(t, a, W_LOCK, t->owner, 0, &a->stage[0]);
	(void)prim_exec(t);
	return rc;
}

int prim_shared_won(struct txn *t, struct cc_access *a)
{
	int rc = prim_check_block(t, a);
	if (rc == CC_OK) {
		a->pstate |= ACC_SHARED;
		return CC_OK;
	}
	/* Not our key's block (anymore): our count is still in its word,
	 * whoever's block it is now, because nobody overwrites a word that
	 * may hold a count (storage/alloc.c invariant (5)). Take it off,
	 * and the word back to 0 if that left it free-but-tagged. */
	prim_stage(t, CC_STAGE_RELEASE);
	prim_post_faa_item(t, a, W_LOCK, -cc_shared_unit(prim_self(t)), &a->stage[0]);
	prim_post_cas_item(t, a, W_LOCK, CC_SHARED_TAG << 56, 0, &a->stage[1]);
	(void)prim_exec(t);
	return rc;
}

int prim_lock_and_read(struct txn *t, struct cc_access *a, uint64_t cmp, uint64_t *old)
{
	prim_stage(t, CC_STAGE_LOCK);
	prim_post_cas_item(t, a, W_LOCK, cmp, t->owner, old);
	/* Ordered after the CAS on the same endpoint: if the CAS won, this
	 * READ sees the item as the previous holder left it. */
	prim_post_read_block(t, a);
	/* A key this transaction writes: its backups' locks ride along
	 * (cc/repl.c). One not won here is locked again at commit, so this
	 * round's verdict on them does not abort anything. */
	bool backups = (t->single_write || (a->mode & ACC_W)) && repl_post_locks_of(t, a);
	int rc = prim_exec(t);
	if (backups)
		(void)repl_note_locks(t, rc ? prim_failed_nodes(t) : 0, rc == 0 && *old != cmp);
	return rc;
}

int prim_post_lock_writes(struct txn *t, bool read_all)
{
	int n = 0;
	prim_stage(t, CC_STAGE_LOCK);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W) || acc_locked(a))
			continue;
		a->pstate |= ACC_CASPEND;
		prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
		if (read_all || (a->pstate & ACC_BLIND)) {
			a->pstate |= ACC_NEEDIMG;
			prim_post_read_block(t, a);
		}
		n++;
	}
	if (n)
		repl_post_locks(t); /* their backups, in the same round */
	return n;
}

int prim_note_locks(struct txn *t, int rc)
{
	uint64_t lost = rc ? prim_failed_nodes(t) : 0;
	bool busy = false;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->pstate & ACC_CASPEND))
			continue;
		a->pstate &= (uint8_t)~(ACC_CASPEND | ACC_NEEDIMG);
		if (lost & (1ull << a->node))
			continue; /* no result: t->unknown covers it */
		if (a->stage[2] == 0)
			a->pstate |= ACC_LOCKED;
		else
			busy = true;
	}
	int bk = t->nbk ? repl_note_locks(t, lost, busy) : CC_OK;
	if (rc)
		return rc;
	return busy ? cc_abort_with(t, CC_CAUSE_LOCK) : bk;
}

void prim_post_read_hdr(struct txn *t, struct cc_access *a, uint64_t hdr[2])
{
	fab_read(&t->batch, a->ref.node, a->ref.off, hdr, 16);
}

void prim_post_read_header(struct txn *t, struct cc_access *a, uint64_t v[6])
{
	prim_stage(t, CC_STAGE_VALIDATE);
	fab_read(&t->batch, a->ref.node, a->ref.off, v, 48);
}

void prim_post_double_read(struct txn *t, struct cc_access *a)
{
	prim_stage(t, CC_STAGE_READ);
	prim_post_read_hdr(t, a, a->hdr[0]);
	prim_post_read_block(t, a);
	prim_post_read_hdr(t, a, a->hdr[1]);
}

int prim_double_read(struct txn *t, struct cc_access *a)
{
	prim_post_double_read(t, a);
	return prim_exec(t);
}

int prim_double_read_done(struct txn *t, struct cc_access *a)
{
	if (a->hdr[0][0] != a->hdr[1][0] || a->hdr[0][1] != a->hdr[1][1] ||
	    (a->hdr[0][0] != 0 && a->hdr[0][0] != t->owner))
		return CC_RETRY;
	a->img->lock = a->hdr[0][0];
	a->img->ver = a->hdr[0][1];
	return prim_check_block(t, a);
}

int prim_read_consistent(struct txn *t, struct cc_access *a)
{
	for (int tries = 0; tries < 8; tries++) {
		int rc = prim_double_read(t, a);
		if (rc)
			return rc;
		rc = prim_double_read_done(t, a);
		if (rc != CC_RETRY)
			return rc;
		/* A writer is installing: its lock is held only for one round
		 * trip of installs, so re-reading soon usually succeeds. */
		if (tries >= 2) {
			rc = prim_check_block(t, a);
			if (rc)
				return rc; /* retired meanwhile */
		}
	}
	return cc_abort_with(t, a->hdr[1][0] ? CC_CAUSE_LOCK : CC_CAUSE_VALIDATE);
}

/* The op just queued: if it is on the lock word, no log needs it
 * (FAB_OP_VOLATILE): recovery releases every lock (storage/scan.c), so
 * a write-ahead log that noted lock words would only grow (a third of an
 * update's bytes: the lock's CAS and its release). */
static void mark_lock_word(struct txn *t, int word)
{
	if (word == W_LOCK)
		t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE;
}

void prim_post_cas_item(struct txn *t, struct cc_access *a, int word, uint64_t cmp,
			uint64_t swp, uint64_t *old)
{
	fab_cas(&t->batch, a->ref.node, word_off(a, word), cmp, swp, old);
	mark_lock_word(t, word);
}

void prim_post_faa_item(struct txn *t, struct cc_access *a, int word, uint64_t add,
			uint64_t *old)
{
	fab_faa(&t->batch, a->ref.node, word_off(a, word), add, old);
	mark_lock_word(t, word);
}

void prim_post_write_word(struct txn *t, struct cc_access *a, int word, uint64_t val)
{
	/* The batch keeps a pointer until exec: stage the value in the access. */
	uint64_t *slot = &a->stage[word == W_LOCK ? 0 : word == W_VER ? 1 : 2];
	*slot = val;
	fab_write(&t->batch, a->ref.node, word_off(a, word), slot, 8);
	mark_lock_word(t, word);
}

void prim_post_write_bytes(struct txn *t, struct cc_access *a, uint32_t off, const void *src,
			   uint32_t len)
{
	assert(off + len <= st_class_size(a->ref.cls));
	fab_write(&t->batch, a->ref.node, a->ref.off + off, src, len);
}

/* Lay the pending write into a->img (words 2.. onward) for one WRITE:
 * meta words, data, key, value, then the protocol's tail (a->wtail). */
static uint32_t stage_image(struct cc_access *a, const uint64_t meta[2])
{
	struct st_item *it = a->img;
	it->meta[0] = meta ? meta[0] : a->wmeta[0];
	it->meta[1] = meta ? meta[1] : a->wmeta[1];
	uint32_t vlen = a->wdel ? 0 : a->wvlen;
	it->data = a->wdel ? st_make_data(0, ST_F_ABSENT) : st_make_vdata(vlen, a->wvflags, 0);
	char *v = (char *)(it + 1) + a->klen;
	if (vlen)
		memcpy(v, a->wval, vlen);
	if (a->wtlen && !meta)
		memcpy(v + vlen, a->wtail, a->wtlen);
	return (uint32_t)sizeof(*it) + a->klen + vlen + (meta ? 0 : a->wtlen);
}

void prim_post_install(struct txn *t, struct cc_access *a, uint64_t ver, const uint64_t meta[2],
		       uint64_t unlock)
{
	uint32_t len = stage_image(a, meta);
	prim_stage(t, CC_STAGE_COMMIT);
	/* words 2..: meta, ident (unchanged), data, key, value */
	fab_write(&t->batch, a->ref.node, word_off(a, W_META0), &a->img->meta[0], len - 16);
	prim_post_write_word(t, a, W_VER, ver);
	prim_post_write_word(t, a, W_LOCK, unlock);
}

/*
 * Relocation, in three steps around the commit point (cc.h):
 *  reloc_post_block  the new block, complete and locked by us, queued with
 *                    the installs (after its RELOC record);
 *  reloc_swap        after they completed: the index slot to the new block;
 *  reloc_post_finish after the commit point: unlock the new block, mark
 *                    the old one DEAD and unlock it; then st_retire it.
 * Until the commit point the old block is intact and locked, so a rollback
 * (cc/undo.c, storage/log.c) only swaps the slot back and frees the new one.
 */
static int reloc_post_block(struct txn *t, struct cc_access *a, uint64_t ver)
{
	uint32_t need = st_class_size(a->nref.cls);
	if (img_reserve(a, a->nref.cls) || need < sizeof(struct st_item) + a->klen + a->wvlen)
		return CC_EINTERNAL;
	prim_stage(t, CC_STAGE_COMMIT);
	/* a->img is free to reuse: the record already holds the old image. */
	struct st_item *nb = a->img;
	nb->lock = t->owner;
	nb->ver = ver;
	nb->meta[0] = a->wmeta[0]; /* a protocol's tail (older versions) stays behind */
	nb->meta[1] = 0;
	nb->ident = st_make_ident(a->nref.gen, a->klen, a->nref.cls);
	nb->data = st_make_vdata(a->wvlen, a->wvflags, 0);
	memmove(nb + 1, a->key, a->klen);
	memcpy((char *)(nb + 1) + a->klen, a->wval, a->wvlen);
	fab_write(&t->batch, a->nref.node, a->nref.off, nb,
		  (uint32_t)(sizeof(*nb) + a->klen + a->wvlen));
	return CC_OK;
}

static int reloc_swap(struct txn *t, struct cc_access *a)
{
	prim_stage(t, CC_STAGE_COMMIT);
	int rc = st_swap(&t->batch, st_region_coord(t->node->region), t->owner, a->hash, &a->ref,
			 &a->nref);
	if (rc == 0) {
		a->pstate |= ACC_SWAPPED;
		return CC_OK;
	}
	if (rc == ST_EBUSY || rc == ST_ESTALE)
		return CC_EINTERNAL; /* we hold the old lock: the slot cannot move */
	t->unknown |= 1ull << a->ref.node; /* its bucket lock may be held there */
	t->fatal = CC_EFAB;
	return CC_EFAB;
}

static void reloc_post_finish(struct txn *t, struct cc_access *a, uint64_t ver)
{
	uint64_t nlock = a->nref.off + (uint64_t)W_LOCK * 8;
	prim_stage(t, CC_STAGE_RELEASE);
	fab_write(&t->batch, a->nref.node, nlock, &t->undo.zero, 8);
	/* Old block: DEAD first, then release, so whoever takes the lock next
	 * sees DEAD and re-resolves. */
	a->stage[2] = st_make_data(0, ST_F_DEAD);
	fab_write(&t->batch, a->ref.node, word_off(a, W_DATA), &a->stage[2], 8);
	prim_post_write_word(t, a, W_VER, ver);
	prim_post_write_word(t, a, W_LOCK, 0);
}

/* Install a write in place, keeping its lock: ver and words 2.. in one
 * WRITE. With install_mark, the lock word first becomes "installing"
 * (cc.h). */
static void post_install_locked(struct txn *t, struct cc_access *a, uint64_t ver)
{
	prim_stage(t, CC_STAGE_COMMIT);
	if (t->proto->install_mark) {
		/* Not through stage[0]: the unlock of this same batch goes there. */
		a->stage[2] = cc_lock_installing(t->owner);
		fab_write(&t->batch, a->ref.node, word_off(a, W_LOCK), &a->stage[2], 8);
	}
	/* After undo_build took the old image. One WRITE from ver to the end
	 * of the value: our lock (or installing mark) keeps every reader off
	 * the item until it is released, so the order of ver and the data
	 * within the WRITE is never seen; recovery restores both from the
	 * record. */
	uint32_t len = stage_image(a, NULL);
	a->img->ver = ver;
	fab_write(&t->batch, a->ref.node, word_off(a, W_VER), &a->img->ver, len - 8);
}

void prim_post_read_txn(struct txn *t, uint16_t node, int rec, void *buf, uint32_t len)
{
	fab_read(&t->batch, node, st_txn_state_off(t->node->layout, (unsigned)rec), buf, len);
}

void prim_post_write_txn(struct txn *t, uint16_t node, int rec, int word, uint64_t val)
{
	/* Staged in the transaction: the batch keeps a pointer until exec. */
	t->txn_stage = val;
	fab_write(&t->batch, node, st_txn_state_off(t->node->layout, (unsigned)rec) + (uint64_t)word * 8u,
		  &t->txn_stage, 8);
}

void prim_post_write_txn_buf(struct txn *t, uint16_t node, int rec, int word, const void *src,
			     uint32_t len)
{
	assert(word >= 0 && (uint32_t)word * 8u + len <= ST_TXN_BYTES && len % 8 == 0);
	fab_write(&t->batch, node, st_txn_state_off(t->node->layout, (unsigned)rec) + (uint64_t)word * 8u,
		  src, len);
}

void prim_post_atomic_txn(struct txn *t, uint16_t node, int rec, int word, uint64_t cmp,
			  uint64_t swp, uint64_t *old)
{
	fab_cas(&t->batch, node, st_txn_state_off(t->node->layout, (unsigned)rec) + (uint64_t)word * 8u,
		cmp, swp, old);
}

uint64_t prim_read_own_txn(const struct txn *t, int word)
{
	assert(word >= 0 && (size_t)word < sizeof(struct st_txn_state) / 8);
	const char *rec = (const char *)st_region_base(t->node->region) +
			  st_txn_state_off(t->node->layout, (unsigned)t->rec);
	return __atomic_load_n((const uint64_t *)rec + word, __ATOMIC_ACQUIRE);
}

unsigned prim_drop_node_words(struct cc_node *n, int word, uint16_t peer)
{
	assert(word > 0 && (size_t)word < sizeof(struct st_txn_state) / 8);
	char *base = st_region_base(n->region);
	unsigned cleared = 0;
	for (unsigned r = 0; r < ST_TXN_STATES; r++) {
		uint64_t *w = (uint64_t *)(base + st_txn_state_off(n->layout, r)) + word;
		uint64_t v = ck_pr_load_64(w);
		if (v && cc_ts_node(v) == peer && ck_pr_cas_64(w, v, 0))
			cleared++;
	}
	return cleared;
}

/* Release the lock word of every access still locked (after the commit
 * point, or on abort). */
static void post_unlocks(struct txn *t, bool abort)
{
	uint64_t dec = -cc_shared_unit(prim_self(t));
	prim_stage(t, CC_STAGE_RELEASE);
	for (int i = 0; i < txn_nwrit(t); i++) { /* backups hold locks too */
		struct cc_access *a = txn_writ(t, i);
		if (acc_locked(a) && !(a->pstate & ACC_SWAPPED) && abort) {
			/* A lock taken at commit (prim_note_locks) is ours before the
			 * block's identity is checked; an abort may be that check
			 * failing, and the block, retired before our CAS, may belong
			 * to another key by now, its lock word rewritten and taken
			 * again. So the release is a CAS from our word (or its
			 * installing mark, cc_lock_installing), never a WRITE. */
			prim_post_cas_item(t, a, W_LOCK, t->owner, 0, &a->stage[0]);
			prim_post_cas_item(t, a, W_LOCK, cc_lock_installing(t->owner), 0,
					   &a->stage[1]);
		} else if (acc_locked(a) && !(a->pstate & ACC_SWAPPED))
			prim_post_write_word(t, a, W_LOCK, 0);
		else if (a->pstate & ACC_SHARED) {
			/* Drop our count; then, if that left no holder, the word
			 * back to 0 (a CAS that fails harmlessly otherwise). */
			prim_post_faa_item(t, a, W_LOCK, dec, &a->stage[0]);
			prim_post_cas_item(t, a, W_LOCK, CC_SHARED_TAG << 56, 0, &a->stage[1]);
		}
		a->pstate &= ~(ACC_LOCKED | ACC_SHARED);
	}
}

/*
 * The commit every protocol ends with, durable per the undo log (st.h):
 *   one written node, no relocation: records, installs, retire, unlocks,
 *     in one batch: the node applies them in order, so the retire of the
 *     records is the commit point and comes before every release on that
 *     node;
 *   otherwise: (B2) records, installs and new blocks everywhere; index
 *     swaps; (B3) the decision record in our own region: the commit
 *     point; (B4) marks, unlocks, retires everywhere. Where fab_exec
 *     applies own-region ops itself (not verbs), B3 and B4 are one batch:
 *     the decision is applied before any B4 op leaves (fab.h).
 * Round trips: 1 for the first case (as without a log), 2 for the second
 * (3 on verbs, whose own region is behind the NIC).
 *
 * With persistence power (t->node->durable), order in memory is not
 * enough: a power cut keeps any subset of the pages not yet flushed. So
 * each step waits until what it depends on is durable (durable_wait, group
 * commit), splitting the single-node batch:
 *   (P1) the records, before any install is posted: a durable install
 *        always has its durable record (cc/undo.c invariant (2));
 *   (P2) the installs, new blocks and index swaps, before the commit
 *        point: a durable commit point never names a lost install;
 *   (P3) the commit point (single node: the retire; else the decision),
 *        before any lock is released and before the client hears of it:
 *        nothing acknowledged, and nothing another transaction read, can
 *        be rolled back by recovery.
 * A wait persists every range the worker wrote since its last wait (rdma
 * fab_dirty), so it also covers what st_create, st_alloc and st_swap
 * wrote for this transaction (index slots, slab table words: a new key
 * survives) and the previous transactions' marks and retires. The latter
 * is why the marks of a multi-node commit need no wait of their own: the
 * next transaction to reuse the slot overwrites its decision record only
 * after its own P1 and P2, which the flusher serves after those marks
 * (durable.h invariant (1)); until then the decision stands for them.
 * Round trips are unchanged except the single-node case (3); durable
 * waits: 3 per committing transaction with writes. Where other nodes'
 * logs are reached by remote flush (a tcp cluster, durable_post_flushes),
 * a wait for them rides as a flush in the batch whose writes it covers,
 * at no round trip of its own. With the write-ahead
 * log (durable_ordered), a write is never durable before an earlier one,
 * so P1 and P2 hold by order alone: only P3 waits, one sync per commit,
 * and the single-node case keeps its one batch before that wait. Lock
 * words are never noted for persistence (FAB_OP_VOLATILE): recovery
 * releases every lock.
 */
static int persist_step(struct txn *t, uint64_t nodes, bool commit)
{
	int rc = durable_wait_nodes(t, nodes, commit);
	if (rc) {
		t->fatal = CC_EFAB;
		return CC_EFAB;
	}
	return CC_OK;
}

int prim_commit_writes(struct txn *t, uint64_t ver)
{
	return prim_commit_checked(t, ver, NULL);
}

/* After the batch that ran the installs (and whatever the caller queued
 * before them): the caller's verdict, before the commit point. */
static int run_check(struct txn *t, int (*check)(struct txn *t))
{
	return check ? check(t) : CC_OK;
}

/*
 * A connection of this worker broke since the attempt began (tcp): the
 * node at its other end may have restarted, and the locks this attempt
 * took there before are gone (server/recovery.c releases every lock a
 * replayed log brought back). What the attempt read under them, and what
 * it would install, is not guarded: it aborts (and retries) before its
 * commit writes anything or releases anything as committed. Checked again
 * after the wait for a coordinator slot, which can last until a failed
 * node is back.
 */
static int check_connections(struct txn *t)
{
	if (fab_worker_breaks(t->ccw->fw) != t->breaks)
		return cc_abort_with(t, CC_CAUSE_OTHER);
	return CC_OK;
}

int prim_commit_checked(struct txn *t, uint64_t ver, int (*check)(struct txn *t))
{
	int rc;
	if ((rc = check_connections(t)))
		return rc;
	uint64_t wnodes = 0;
	bool reloc = false;
	for (int i = 0; i < t->nacc; i++)
		if (t->acc[i]->mode & ACC_W)
			wnodes = 1;
	/* Every replica of a written key is written (cc/repl.c). */
	if (wnodes && (rc = repl_resolve(t)))
		return rc;
	wnodes = 0;
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if (a->mode & ACC_W) {
			wnodes |= 1ull << a->node;
			reloc |= acc_relocates(a, t->node->layout);
		}
	}
	const bool power = t->node->durable != NULL;
	const bool ordered = power && durable_ordered(t->node); /* no P1, P2 waits */
	const bool per_node = power && durable_per_node(t->node); /* P2 waits for the others */
	t->ring_epoch = durable_epoch(t);
	if (!wnodes) {
		post_unlocks(t, false); /* lock words: volatile, never noted */
		rc = prim_exec(t);
		if (rc)
			undo_locks_pending(t, t->batch.failed);
		return rc;
	}
	bool unsure = false; /* power: the commit point's flush failed */
	undo_slot_get(t);
	if ((rc = check_connections(t)))
		return rc;
	rc = undo_build(t);
	if (rc)
		return rc;
	const int rec_from = t->batch.n;
	const uint32_t rec_exec = t->batch.execs;
	undo_post_records(t);
	const int rec_to = t->batch.n;
	t->undo.phase = UNDO_INSTALLED;
	if (power && !ordered && ((rc = prim_exec(t)) || (rc = persist_step(t, wnodes, false))))
		return rc; /* (P1) */
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if (!(a->mode & ACC_W))
			continue;
		if (acc_relocates(a, t->node->layout)) {
			if ((rc = reloc_post_block(t, a, ver)))
				return rc;
		} else {
			post_install_locked(t, a, ver);
		}
	}

	if (!reloc && (wnodes & (wnodes - 1)) == 0) {
		uint16_t nd = (uint16_t)__builtin_ctzll(wnodes);
		if (power && !ordered &&
		    ((rc = prim_exec(t)) || (rc = run_check(t, check)) ||
		     (rc = persist_step(t, wnodes, false))))
			return rc; /* (P2) */
		if ((!power || ordered) && check &&
		    ((rc = prim_exec(t)) || (rc = run_check(t, check))))
			return rc; /* the abort hook rolls back (UNDO_INSTALLED) */
		/* The retire (txn := 0) is the commit point: a slot whose records
		 * are retired is kept whole by recovery, one still naming us is
		 * rolled back. No mark is needed, as no other node's records
		 * hang on this one's fate. */
		prim_stage(t, CC_STAGE_COMMIT); /* a commit's retires are its stage's */
		undo_post_retire(t, nd);
		if (ordered && !per_node && !check && t->batch.execs == rec_exec)
			/* Records, installs and retire apply as one batch, one
			 * step of the log (fab.h, struct fab_journal): any prefix
			 * of the log has all of them or none, so the records,
			 * needed only to roll back installs without their
			 * retire, need not be logged (half the log's bytes). */
			for (int i = rec_from; i < rec_to; i++)
				t->batch.ops[i].flags |= FAB_OP_UNJOURNALED;
		/* Early lock release: the locks go with the commit point, and
		 * the log's one order keeps a reader's acknowledgment behind
		 * ours (durable_early_release). */
		const bool early = power && durable_early_release(t->node);
		if (early)
			post_unlocks(t, false);
		if (power) {
			/* A remote written node's flush rides in the batch. */
			const uint64_t flushed = durable_post_flushes(t, wnodes);
			rc = prim_exec(t);
			if (early && rc == 0)
				/* The retire is applied, so logged before anything
				 * a next user of the slot writes: the slot is free
				 * (undo.c invariant (1)) while we wait for the log. */
				undo_slot_put(t);
			if (rc == 0 && !(flushed == wnodes && durable_flushes_count(t)) &&
			    persist_step(t, wnodes, true) != 0) {
				/* (P3) failed: committed here, durability unknown */
				t->fatal = 0;
				unsure = true;
			}
		} else {
			post_unlocks(t, false);
			rc = prim_exec(t);
		}
		if (rc && (t->batch.failed & wnodes)) {
			/* Its retire may or may not have landed: the node settles
			 * it when it rejoins; we cannot tell the client which. The
			 * abort hook releases the locks still held (power). */
			t->undo.phase = UNDO_UNKNOWN;
			undo_slot_quarantine(t, t->batch.failed | wnodes);
			return CC_EUNKNOWN;
		}
		if (power && !early) {
			/* Lock words need no persisting: recovery releases every
			 * lock. Volatile, the pages they touch (just flushed)
			 * are not written again by the next flush. */
			post_unlocks(t, false);
			rc = prim_exec(t);
		}
		if (rc)
			undo_locks_pending(t, t->batch.failed); /* a lock's release failed */
		t->fatal = 0; /* committed */
		undo_slot_put(t);
		return unsure ? CC_EUNKNOWN : CC_OK;
	}

	/* Per node, the other written nodes' logs must hold the installs
	 * before the decision (P2): with remote flushes, those ride behind
	 * the installs (not behind index swaps, which come after). */
	const uint64_t others = wnodes & ~(1ull << prim_self(t));
	const uint64_t p2_flushed = per_node && !reloc ? durable_post_flushes(t, others) : 0;
	if ((rc = prim_exec(t)) || (rc = run_check(t, check)))
		return rc; /* the abort hook rolls back (UNDO_INSTALLED) */
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if ((a->mode & ACC_W) && acc_relocates(a, t->node->layout) && (rc = reloc_swap(t, a)))
			return rc;
	}
	const bool p2_done = per_node && p2_flushed == others && durable_flushes_count(t);
	if (power && (!ordered || per_node) && !p2_done &&
	    (rc = persist_step(t, per_node ? others : wnodes, false)))
		return rc; /* (P2) */
	undo_post_decision(t);
	/* Without power, where this CPU applies the own region's ops, the
	 * decision rides in the batch of the marks and unlocks: fab_exec
	 * applies it before it hands any of them to another node (fab.h), so
	 * it is still the commit point that precedes them. Else it is a batch
	 * of its own (P3 waits in between). */
	const bool merged = !power && fab_node_direct(t->node->fab, prim_self(t)) &&
			    !(t->batch.twosided & (1u << CC_STAGE_LOG)); /* an RPC applies it later */
	if (!merged) {
		if ((rc = prim_exec(t)))
			return rc;
		if (power && persist_step(t, 1ull << prim_self(t), true) != 0) {
			t->fatal = 0; /* (P3) failed: committed here, durability unknown */
			unsure = true;
		}
		t->undo.phase = UNDO_DECIDED;
	}

	prim_stage(t, CC_STAGE_COMMIT);
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
		if (wnodes & (1ull << nd))
			undo_post_mark(t, (uint16_t)nd);
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if (a->pstate & ACC_SWAPPED)
			reloc_post_finish(t, a, ver);
	}
	post_unlocks(t, false);
	prim_stage(t, CC_STAGE_COMMIT);
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
		if (wnodes & (1ull << nd))
			undo_post_retire(t, (uint16_t)nd);
	const uint64_t marks_flushed = per_node ? durable_post_flushes(t, others) : 0;
	rc = prim_exec(t);
	if (merged) {
		if (rc && !undo_decision_landed(t))
			return rc; /* fab_exec applied nothing: the abort hook rolls back */
		t->undo.phase = UNDO_DECIDED;
	}
	t->fatal = 0; /* committed whatever fails from here on */
	uint64_t unsettled = rc ? t->batch.failed : 0;
	if (!rc && per_node && others &&
	    !(marks_flushed == others && durable_flushes_count(t))) {
		/* The slot's next user overwrites our decision record, and
		 * nothing orders our log after the others': the marks must be
		 * in their logs first, or a power cut could leave records that
		 * name a decision no longer there (remote flushes ride in the
		 * marks' batch instead). */
		if (durable_wait_nodes(t, others, false) != 0)
			unsettled = others;
	}
	if (unsettled)
		undo_slot_quarantine(t, unsettled);
	else
		undo_slot_put(t);
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if (!(a->pstate & ACC_SWAPPED))
			continue;
		if (!rc)
			(void)st_retire(&t->batch, t->node->layout, &a->ref);
		a->ref = a->nref;
		a->has_nref = false;
		a->pstate = (uint8_t)((a->pstate & ~ACC_SWAPPED) | ACC_MOVED);
	}
	return unsure ? CC_EUNKNOWN : CC_OK;
}

void prim_locks_pending(struct txn *t)
{
	if (t->unknown & ~t->unknown_noted)
		undo_locks_pending(t, 0); /* t->unknown's nodes */
}

/*
 * The abort every protocol ends with: if installs were posted, put the old
 * images back (and swapped index slots), then release every lock and
 * retire the records. A node that fails meanwhile settles our records
 * itself when it rejoins (the slot waits in quarantine until then).
 */
void prim_release_locks(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	uint64_t failed = 0;
	prim_stage(t, CC_STAGE_RELEASE);
	if (u->phase == UNDO_INSTALLED) {
		for (int i = 0; i < txn_nwrit(t); i++) {
			struct cc_access *a = txn_writ(t, i);
			if (!(a->pstate & ACC_SWAPPED))
				continue;
			if (st_swap(&t->batch, st_region_coord(t->node->region), t->owner, a->hash, &a->nref,
				    &a->ref) != 0)
				failed |= 1ull << a->node;
			a->pstate &= ~ACC_SWAPPED;
		}
		undo_post_rollback(t);
		/* Power: the old images must be durable before the records that
		 * could restore them are retired; a cut in between would keep the
		 * retire and lose the rollback. */
		if (t->node->durable && !durable_ordered(t->node)) {
			if (prim_exec(t) != 0)
				failed |= t->batch.failed;
			else if (persist_step(t, u->nodes, false) != 0)
				failed |= u->nodes;
		}
	}
	/* Retires before unlocks (per node, one endpoint: in order): a slot
	 * that still names us always has its items locked, which a node
	 * recovering from lost lock words relies on (st_log_relock). */
	prim_stage(t, CC_STAGE_RELEASE);
	if (u->phase == UNDO_INSTALLED)
		for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
			if (u->nodes & (1ull << nd))
				undo_post_retire(t, (uint16_t)nd);
	repl_release_pending(t);
	post_unlocks(t, true);
	if (prim_exec(t) != 0)
		failed |= t->batch.failed;
	if (u->slot >= 0 && failed && u->phase == UNDO_INSTALLED) {
		undo_slot_quarantine(t, failed); /* settling releases its locks too */
	} else {
		undo_locks_pending(t, failed);
		undo_slot_put(t);
	}
}

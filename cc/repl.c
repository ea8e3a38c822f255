/*
 * repl.c: the backup copies of a commit's writes (DESIGN.md section 7;
 * FORD 3.3 and 4.3, primary-backup replication with coalescent commit).
 *
 * With `replicas N` a key's slot maps to N nodes, the first its primary.
 * Locks and CC metadata are the primary's: every protocol reads, locks and
 * validates there only (cc_key_node). At commit, prim_commit_checked asks
 * repl_resolve for one backup access per written key and other node of its
 * set: the key's block on that node, found through that node's index (a
 * placeholder is created where the key is new there), locked with the
 * transaction's owner word and read. From then on the shared commit and
 * abort paths (prim.c, undo.c) treat backups as written accesses like the
 * others: undo records on every replica, installs in the same batches as
 * the primary's, relocations where a value outgrows the backup's block,
 * the decision record as the commit point, then marks, unlocks and
 * retires. A commit with backups is a multi-node commit (two batches),
 * whatever the number of primaries it wrote.
 *
 * Rounds. The protocols that lock their writes at commit with the shared
 * primitive (prim_post_lock_writes: silo, occ, sundial, cicada, maat)
 * carry, in that same batch, the lock CAS and READ of every backup whose
 * block the address cache knows (FORD 4.2's hitchhiking): no round of its
 * own. What is left at commit (2PL protocols, which lock before it; cache
 * misses) takes one round for the
 * lock CAS and READ of cached blocks and probe candidates together, after
 * one READ of every other backup's primary bucket; a key the probe misses
 * (new on that node, in a later way) is resolved alone with st_create
 * first. Cached entries are a backup's key followed by 0xff 'R' and its
 * node, so that they never meet the primary's entry of the key; near
 * nodes' backups are cached too (their probe would be a batch of its own).
 *
 * Invariants:
 *  (1) A backup block of a key is written only by a transaction that holds
 *      the key's lock on its primary and the backup block's own lock word:
 *      the image read here is the backup's committed state, and the block's
 *      index slot cannot move under a relocation's swap.
 *  (2) A backup keeps the value and the version, not the protocol's
 *      metadata words or tail (mvcc's older versions): no reader reads it.
 *  (3) Backup accesses live in t->bk, never in t->acc or t's key table, so
 *      no protocol hook sees one.
 *  (4) Every backup lock CAS posted is settled (repl_note_locks) or given
 *      back by CAS (repl_release_pending), and a round that lost any lock
 *      keeps no backup's: no lock of ours is left on a backup after the
 *      transaction, and none is held while maat waits.
 */
#include <stdlib.h>
#include <string.h>

#include "cc/cache.h"
#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

/* Does the placement put any slot on more than one node? */
static bool replicated(const struct txn *t)
{
	const struct pl_map *m = ck_pr_load_ptr(&t->node->place.cur);
	return m->replicas > 1;
}

/* A backup's candidate block came from the address cache (backups are no
 * protocol's accesses: the protocol's own pstate bit is free here). */
#define BK_CACHED ACC_PROTO

/* A backup's block is cached under its key followed by 0xff 'R' and its
 * node (cc/cache.h keys by bytes; the primary's entry has the key alone).
 * False for a key too long to extend here: such keys are not cached. */
#define BK_CACHE_KEY 512
struct bk_ckey {
	char buf[BK_CACHE_KEY + 3];
	size_t len;
	uint64_t hash;
};

static bool bk_ckey(const struct cc_access *b, struct bk_ckey *k)
{
	/* Near nodes too: unlike a primary's lookup (txn.c, cache_pays), a
	 * backup's probe is a batch of its own, which the cache saves. */
	if (b->klen > BK_CACHE_KEY)
		return false;
	memcpy(k->buf, b->key, b->klen);
	k->buf[b->klen] = (char)0xff;
	k->buf[b->klen + 1] = 'R';
	k->buf[b->klen + 2] = (char)b->node;
	k->len = b->klen + 3;
	k->hash = st_hash(k->buf, k->len);
	return true;
}

/* Keep (or forget) where a backup's block is. */
static void bk_cache_set(struct txn *t, const struct cc_access *b, bool keep)
{
	struct bk_ckey k;
	if (!bk_ckey(b, &k))
		return;
	if (keep)
		cc_cache_put(t->ccw->cache, k.buf, k.len, k.hash, &b->ref);
	else
		cc_cache_drop(t->ccw->cache, k.buf, k.len, k.hash);
}

/* List the backups of access a (written, or declared for writing), once. */
static int list_backups(struct txn *t, struct cc_access *a)
{
	if (a->bk_n)
		return CC_OK;
	const struct pl_set *set = cc_key_set(t->ccw, a->key, a->klen);
	if (!set || set->n < 2)
		return CC_OK;
	if (txn_accs_grow(&t->bk, &t->bk_cap, t->nbk + set->n - 1))
		return CC_EINTERNAL;
	a->bk_first = t->nbk;
	for (int r = 1; r < set->n; r++) {
		struct cc_access *b = txn_acc_new(t, a->key, a->klen, a->hash);
		if (!b)
			return CC_EINTERNAL;
		b->node = set->node[r];
		b->p[0] = (uint64_t)(uintptr_t)a; /* its primary */
		t->bk[t->nbk++] = b;
		a->bk_n++;
	}
	return CC_OK;
}

/* Is b's primary written (else it was only declared for writing, and
 * its backup, locked at the fetch, is only unlocked)? */
static bool primary_writes(const struct cc_access *b)
{
	return ((const struct cc_access *)(uintptr_t)b->p[0])->mode & ACC_W;
}

/* The lock CAS and READ of a backup's candidate block. */
static int post_lock_read(struct txn *t, struct cc_access *b, uint64_t off, uint8_t cls)
{
	if (txn_acc_img(b, cls) != CC_OK)
		return CC_EINTERNAL;
	b->cand_off = off;
	b->cand_cls = cls;
	b->pstate |= ACC_CASPEND;
	b->stage[2] = ~0ull;
	fab_cas(&t->batch, b->node, off, 0, t->owner, &b->stage[2]);
	t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE; /* a lock word (prim.c) */
	fab_read(&t->batch, b->node, off, b->img, st_class_size(cls));
	return CC_OK;
}

/* A backup's candidate from the address cache, its lock CAS posted. */
static bool post_cached(struct txn *t, struct cc_access *b)
{
	struct bk_ckey k;
	struct st_ref ref;
	if (!bk_ckey(b, &k) || !cc_cache_get(t->ccw->cache, k.buf, k.len, k.hash, &ref) ||
	    ref.node != b->node || post_lock_read(t, b, ref.off, ref.cls) != CC_OK)
		return false;
	b->pstate |= BK_CACHED;
	t->ccw->stats.addr_cache_hits++;
	return true;
}

/* Give back a lock CAS won on a block (owner word back to 0, by CAS). */
static void give_back(struct txn *t, struct cc_access *b, uint64_t off)
{
	fab_cas(&t->batch, b->node, off, t->owner, 0, &b->stage[2]);
	t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE;
}

/* After a lock CAS and READ: locked and resolved (ACC_LOCKED), or not (a
 * lock won on another key's block given back), or CC_ABORT when the key's
 * block is locked: a writer still finishing, or a dead one. */
static int settle(struct txn *t, struct cc_access *b)
{
	struct st_ref ref;
	bool match = st_probe_match(b->img, b->key, b->klen, b->node, b->cand_cls, b->cand_off,
				    &ref) == 0;
	bool won = b->stage[2] == 0, cached = b->pstate & BK_CACHED;
	b->pstate &= (uint8_t)~(ACC_CASPEND | BK_CACHED);
	if (won && match) {
		b->ref = ref;
		b->pstate |= ACC_LOCKED;
		if (!cached)
			bk_cache_set(t, b, true);
		return CC_OK;
	}
	if (cached) /* a stale entry */
		bk_cache_set(t, b, false);
	if (won)
		give_back(t, b, b->cand_off);
	else if (match)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	return CC_OK;
}

void repl_post_locks(struct txn *t)
{
	if (!replicated(t))
		return;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if ((a->pstate & ACC_CASPEND) && (a->mode & ACC_W))
			repl_post_locks_of(t, a);
	}
}

bool repl_post_locks_of(struct txn *t, struct cc_access *a)
{
	bool posted = false;
	if (!replicated(t) || list_backups(t, a) != CC_OK)
		return false;
	for (int r = 0; r < a->bk_n; r++) {
		struct cc_access *b = t->bk[a->bk_first + r];
		if (!(b->pstate & (ACC_LOCKED | ACC_CASPEND)))
			posted |= post_cached(t, b);
	}
	return posted;
}

int repl_note_locks(struct txn *t, uint64_t lost, bool busy)
{
	int verdict = CC_OK;
	for (int i = 0; i < t->nbk; i++) {
		struct cc_access *b = t->bk[i];
		if (!(b->pstate & ACC_CASPEND))
			continue;
		if (lost & (1ull << b->node)) { /* no result: t->unknown covers it */
			b->pstate &= (uint8_t)~(ACC_CASPEND | BK_CACHED);
			continue;
		}
		int r = settle(t, b);
		if (verdict == CC_OK)
			verdict = r;
	}
	/* A round that lost a lock keeps no backup's (maat waits holding
	 * nothing, then locks again; the others abort). */
	if (busy || verdict != CC_OK)
		for (int i = 0; i < t->nbk; i++) {
			struct cc_access *b = t->bk[i];
			if (b->pstate & ACC_LOCKED) {
				give_back(t, b, b->ref.off);
				b->pstate &= (uint8_t)~ACC_LOCKED;
			}
		}
	return verdict;
}

/* The backups not yet locked: the cached ones straight to their lock
 * round, the others through a probe round first; then those the probe
 * missed through the index, one by one. With every backup locked already
 * (hitchhiked on the primaries' lock round), no round at all: what the
 * caller queued (silo's read validation) goes with its installs. */
static int lock_backups(struct txn *t)
{
	const struct st_layout *L = t->node->layout;
	int rc = CC_OK;
	bool probing = false, locking = false;
	uint64_t (*bucket)[8] = calloc((size_t)t->nbk, sizeof(*bucket));
	bool *probed = calloc((size_t)t->nbk, sizeof(*probed));
	if (!bucket || !probed) {
		rc = CC_EINTERNAL;
		goto out;
	}
	for (int i = 0; i < t->nbk; i++) {
		struct cc_access *b = t->bk[i];
		if ((b->pstate & ACC_LOCKED) || !primary_writes(b))
			continue;
		locking = true;
		if (post_cached(t, b))
			continue;
		t->ccw->stats.addr_cache_misses++; /* warm-ups wait for these too */
		st_probe_post(&t->batch, L, b->node, b->hash, bucket[i]);
		probed[i] = probing = true;
	}
	if (!locking)
		goto out;
	if (probing && (rc = prim_exec(t)))
		goto out;
	for (int i = 0; i < t->nbk; i++) {
		uint64_t off;
		uint8_t cls;
		if (probed[i] && st_probe_candidate(L, t->bk[i]->hash, bucket[i], &off, &cls) == 0 &&
		    (rc = post_lock_read(t, t->bk[i], off, cls)))
			goto out;
	}
	/* Every posted CAS is settled, even after one aborts: a lock won
	 * must be on record (ACC_LOCKED) for the abort to release it. */
	rc = repl_note_locks(t, (rc = prim_exec(t)) ? prim_failed_nodes(t) : 0, false);
	if (t->fatal)
		rc = t->fatal;
	for (int i = 0; i < t->nbk && rc == CC_OK; i++) {
		struct cc_access *b = t->bk[i];
		if ((b->pstate & ACC_LOCKED) || !primary_writes(b))
			continue;
		if ((rc = txn_acc_create(t, b, false)) ||
		    (rc = post_lock_read(t, b, b->ref.off, b->ref.cls)) || (rc = prim_exec(t)) ||
		    (rc = settle(t, b)))
			break;
		if (!(b->pstate & ACC_LOCKED))
			rc = cc_abort_with(t, CC_CAUSE_STALE); /* it moved meanwhile */
	}
	if (rc == CC_OK)
		rc = prim_exec(t); /* the CASes that gave back a lock */
out:
	free(bucket);
	free(probed);
	return rc; /* a fabric failure: prim_exec set t->fatal and t->unknown */
}

/* The write a backup installs: its primary's value and version, none of
 * the protocol's words (invariant (2)); a block of its own if it outgrew
 * the backup's. */
static int stage_write(struct txn *t, struct cc_access *b)
{
	const struct cc_access *a = (const struct cc_access *)(uintptr_t)b->p[0];
	const struct st_layout *L = t->node->layout;
	b->wdel = a->wdel;
	b->wvflags = a->wdel ? 0 : a->wvflags;
	b->wvlen = a->wdel ? 0 : a->wvlen;
	if (b->wvlen && (b->wcap < b->wvlen || !b->wval)) {
		char *p = realloc(b->wval, b->wvlen);
		if (!p)
			return CC_EINTERNAL;
		b->wval = p;
		b->wcap = b->wvlen;
	}
	if (b->wvlen)
		memcpy(b->wval, a->wval, b->wvlen);
	b->mode = ACC_W;
	uint32_t room = (uint32_t)sizeof(struct st_item) + b->klen + b->wvlen;
	if (b->wdel || (room <= st_class_size(b->ref.cls) && b->wvlen <= cc_inplace_max(L)))
		return CC_OK;
	int rc = st_alloc(&t->batch, L, b->node, b->klen, b->wvlen, &b->nref);
	if (rc == ST_EFULL)
		return CC_EFULL;
	if (rc) {
		/* Any of its requests may have run: the node settles them. */
		t->unknown |= 1ull << b->node;
		t->fatal = CC_EFAB;
		return CC_EFAB;
	}
	b->has_nref = true;
	return CC_OK;
}

int repl_resolve(struct txn *t)
{
	if (!replicated(t))
		return CC_OK;
	int rc = CC_OK;
	for (int i = 0; i < t->nacc && rc == CC_OK; i++)
		if (t->acc[i]->mode & ACC_W)
			rc = list_backups(t, t->acc[i]);
	if (rc == CC_OK && t->nbk)
		rc = lock_backups(t);
	for (int i = 0; i < t->nbk && rc == CC_OK; i++)
		if (primary_writes(t->bk[i]))
			rc = stage_write(t, t->bk[i]);
	return rc;
}

void repl_release_pending(struct txn *t)
{
	for (int i = 0; i < t->nbk; i++) {
		struct cc_access *b = t->bk[i];
		if (b->pstate & ACC_CASPEND) { /* posted, never settled: it may have won */
			give_back(t, b, b->cand_off);
			b->pstate &= (uint8_t)~(ACC_CASPEND | BK_CACHED);
		}
	}
}

void repl_after_commit(struct txn *t)
{
	for (int i = 0; i < t->nbk; i++)
		if (t->bk[i]->pstate & ACC_MOVED) /* relocated: the new block */
			bk_cache_set(t, t->bk[i], true);
}

void repl_release(struct txn *t)
{
	for (int i = 0; i < t->nbk; i++)
		txn_acc_drop(t, t->bk[i]);
	t->nbk = 0;
}

int cc_read_copies(struct cc_worker *ccw, const char *key, size_t klen, struct cc_copy *out)
{
	uint64_t deadline = 0;
	if (ck_pr_load_64(&ccw->node->lease_until_ns))
		(void)cc_wait_lease(ccw, &deadline); /* without one, peers do not answer */
	cc_enter(ccw); /* not across a flush or a protocol switch */
	const struct pl_map *m = ck_pr_load_ptr(&ccw->node->place.cur);
	const struct pl_set set = *pl_slot_set(m, pl_keyslot(key, klen));
	struct st_item *buf = cc_scratch_get(ccw);
	if (!buf) {
		cc_leave(ccw);
		return -1;
	}
	struct fab_batch b;
	cc_batch_init(&b, ccw, NULL);
	uint64_t h = st_hash(key, klen);
	for (int r = 0; r < set.n; r++) {
		struct cc_copy *c = &out[r];
		struct st_ref ref;
		memset(c, 0, sizeof(*c));
		c->node = set.node[r];
		int rc = st_lookup(&b, ccw->node->layout, c->node, key, (uint32_t)klen, h, &ref, buf);
		c->state = rc == 0 ? CC_COPY_FOUND : rc == ST_ENOTFOUND ? CC_COPY_ABSENT : CC_COPY_ERROR;
		if (rc == 0 && (st_data_flags(buf->data) & ST_F_ABSENT))
			c->state = CC_COPY_ABSENT;
		if (c->state != CC_COPY_FOUND)
			continue;
		c->ver = buf->ver;
		c->vlen = st_data_vlen(buf->data);
		c->val = malloc(c->vlen ? c->vlen : 1);
		if (c->val)
			memcpy(c->val, st_item_val(buf), c->vlen);
		else
			c->state = CC_COPY_ERROR;
	}
	cc_scratch_put(ccw, buf);
	cc_leave(ccw);
	return set.n;
}

/*
 * calvin.c: deterministic transactions in epochs (RCBench 6.2.4, RCC 4.6;
 * notes-rcbench.md A.4, notes-rcc.md 5.6). The sequencer and the
 * deterministic lock manager are node-wide (cc/calvin.h); this file is
 * what a transaction does with them, stage by stage:
 *
 *   SEQUENCE --begin: the declared keys (and those OLLP learned) become
 *              the lock set; calvin_sequence returns once every
 *              participant granted it, in the epoch's global order
 *   FORWARD  --begin (adopt): every participant sent the items it holds
 *              for the transaction with its grant (value forwarding, RCC
 *              4.6: read on its own node, the exclusive ones latched for
 *              us); they become read accesses, with no round trip
 *   FETCH    --read_post/read_done, for what was not forwarded (keys on
 *              this node, long keys, images that did not fit a GRANT):
 *              one batch per node, all in flight:
 *              a key locked exclusive gets its item latched (CAS) and read
 *              behind the latch (FORD's hitchhiking), a shared one is read.
 *              The latch never waits: the deterministic lock already
 *              excludes every other calvin writer of the key
 *   EXECUTE  --the body, on the fetched images
 *   COMMIT   --prim_commit_writes (undo records, installs, the decision:
 *              whole on every node or on none, as for every protocol),
 *              then, once the executor reaped what it left absent
 *              (committed), RELEASE on every participant
 *   ABORT    --only OLLP (below) or a failure: latches released, RELEASE
 *
 * No transaction aborts for a conflict: the lock order is the same on
 * every node (cc/calvin.c invariant (1)).
 *
 * What Calvin cannot know up front, OLLP (Calvin 3.2.1): a key the body
 * reaches outside the lock set (a script's computed key), or a write to a
 * key locked shared, aborts the attempt with cause "ollp" after noting the
 * key in the transaction's OLLP set (struct cc_ollp, kept across
 * attempts); the next attempt declares it. The aborted attempt was the
 * reconnaissance read: it wrote nothing. An attempt whose keys depend on
 * values that changed meanwhile reaches another new key and goes round
 * again, within txn-timeout. WATCH needs nothing of its own: the watched
 * keys are declared reads, and EXEC compares their versions inside the
 * deterministic transaction.
 *
 * Why the coordinator executes, and not every active participant as in
 * Calvin: rckv replicates no transaction input (the replication issue),
 * so a participant that died after its peers applied their parts would
 * leave the transaction torn. The shared commit path keeps it whole or
 * absent on every node (the dead node's undo log or decision settles it).
 * Values reach the executor as Calvin's do, forwarded by the nodes that
 * hold them, but to the one executor rather than to every participant.
 */
#include <stdlib.h>
#include <string.h>

#include "cc/calvin.h"
#include "cc/cc.h"
#include "cc/cache.h"
#include "cc/exec_internal.h"

static int lock_cmp(const void *a, const void *b)
{
	const struct calvin_lock *x = a, *y = b;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->h < y->h ? -1 : x->h > y->h;
}

static void add_key(struct txn *t, struct calvin_lock *out, int *k, const char *p, uint32_t len,
		    bool x)
{
	if (txn_key_too_big(t, len))
		return; /* it cannot exist, and writing it is an error */
	out[*k] = (struct calvin_lock){ .h = st_hash(p, len),
					.key = p,
					.klen = len,
					.node = cc_key_node(t->ccw, p, len),
					.x = x };
	(*k)++;
}

static struct calvin_lock *lock_of(const struct txn *t, const struct cc_access *a)
{
	const struct calvin_mine *m = t->pdata;
	if (!m)
		return NULL;
	struct calvin_lock key = { .h = a->hash, .node = a->node };
	return bsearch(&key, m->locks, (size_t)m->nlocks, sizeof(key), lock_cmp);
}

/* An item the participant latched for us that we do not take: its latch
 * given back (a CAS from our owner word), in the batch adopt_node runs. */
static void give_back(struct txn *t, uint16_t nd, uint64_t off, uint64_t *old)
{
	fab_cas(&t->batch, nd, off + (uint64_t)W_LOCK * 8u, t->owner, 0, old);
	t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE;
}

/* Can forwarded item f become an access of lock lk (it fits its class,
 * names a lock of node nd, and is latched only where we lock exclusive)? */
static bool fwd_fits(const struct txn *t, const struct calvin_lock *lk, uint16_t nd,
		     const struct calvin_fwd *f)
{
	return lk->node == nd && lk->key && f->len <= st_class_size(f->cls) &&
	       (!f->latched || lk->x) && !txn_acc_find((struct txn *)t, lk->key, lk->klen, lk->h);
}

/* The accesses of one participant's forwarded items (fwd, len bytes:
 * struct calvin_fwd + padded image each) for m's nlk locks on node nd,
 * which start at locks[first]: read, and latched where the participant
 * latched them. An item whose image is not its key's, or that cannot be
 * taken, has its latch given back, and the fetch reads the key. Returns
 * how many it took; *all: every latched item it was sent is now taken or
 * given back (the participant need not give any back: RELEASE_ADOPTED). */
static unsigned adopt_node(struct txn *t, const struct calvin_mine *m, uint16_t nd, int first,
			   int nlk, const char *fwd, uint32_t len, bool *all)
{
	const int cause = t->cause;
	unsigned took = 0, back = 0;
	uint64_t *olds = malloc((size_t)nlk * sizeof(*olds));
	*all = olds != NULL;
	for (uint32_t off = 0; len - off >= sizeof(struct calvin_fwd);) {
		struct calvin_fwd f;
		memcpy(&f, fwd + off, sizeof(f));
		off += (uint32_t)sizeof(f);
		if (f.len > len - off || CALVIN_FWD_PAD(f.len) > len - off || f.idx >= (uint32_t)nlk) {
			*all = false; /* malformed: whatever it latched, it gives back */
			break;
		}
		const char *img = fwd + off;
		off += CALVIN_FWD_PAD(f.len);
		const struct calvin_lock *lk = &m->locks[first + (int)f.idx];
		struct cc_access *a = NULL;
		if (fwd_fits(t, lk, nd, &f) && txn_acc_reserve(t, 1) == CC_OK)
			a = txn_acc_new(t, lk->key, lk->klen, lk->h);
		if (a) {
			a->ref = (struct st_ref){ .node = nd, .cls = f.cls, .gen = f.gen,
						  .off = f.off };
			if (a->node != nd || txn_acc_img(a, f.cls) != CC_OK) {
				txn_acc_drop(t, a);
				a = NULL;
			}
		}
		if (a) {
			memcpy(a->img, img, f.len);
			if (prim_check_block(t, a) != CC_OK) {
				t->cause = cause;
				txn_acc_drop(t, a);
				a = NULL;
			}
		}
		if (!a) {
			if (f.latched && olds && back < (unsigned)nlk)
				give_back(t, nd, f.off, &olds[back++]);
			continue;
		}
		a->p[0] = lk->x;
		if (f.latched)
			a->pstate |= ACC_LOCKED;
		a->mode |= ACC_R;
		txn_acc_add(t, a);
		took++;
	}
	if (back && prim_exec(t) != 0)
		*all = false; /* not given back: the participant does it */
	free(olds);
	return took;
}

/* Value forwarding (cc/calvin.h): the items the participants sent with
 * their grants become the transaction's accesses, read (and the
 * exclusive ones latched), so the fetch stage reads only the rest. */
static void adopt(struct txn *t, struct calvin_mine *m)
{
	unsigned took = 0;
	for (int i = 0; i < m->nlocks;) {
		const uint16_t nd = m->locks[i].node;
		int n = 0;
		while (i + n < m->nlocks && m->locks[i + n].node == nd)
			n++;
		bool all = false;
		if (m->fwd[nd])
			took += adopt_node(t, m, nd, i, n, m->fwd[nd], m->fwdlen[nd], &all);
		if (all) /* its commit or abort releases them */
			m->adopted |= 1ull << nd;
		free(m->fwd[nd]);
		m->fwd[nd] = NULL;
		i += n;
	}
	calvin_note_adopted(t, took);
}

static int calvin_begin(struct txn *t)
{
	const struct cc_txn *d = t->decl;
	const struct cc_ollp *o = t->ollp;
	const int cap = (d ? d->nkeys : 0) + (o ? o->n : 0);
	t->pdata = NULL;
	if (cap == 0)
		return CC_OK; /* keyless: nothing to order */
	struct calvin_mine *m = calloc(1, sizeof(*m));
	struct calvin_lock *lk = malloc((size_t)cap * sizeof(*lk));
	if (!m || !lk) {
		free(m);
		free(lk);
		return CC_EINTERNAL;
	}
	int k = 0;
	for (int i = 0; d && i < d->nkeys; i++)
		add_key(t, lk, &k, d->keys[i].p, d->keys[i].len,
			(d->keys[i].access & CC_KEY_WRITE) != 0);
	for (int i = 0; o && i < o->n; i++)
		add_key(t, lk, &k, o->keys[i].p, o->keys[i].len,
			(o->keys[i].access & CC_KEY_WRITE) != 0);
	qsort(lk, (size_t)k, sizeof(*lk), lock_cmp);
	int u = 0; /* one lock per key, exclusive if any access writes */
	for (int i = 0; i < k; i++) {
		if (u > 0 && lk[u - 1].node == lk[i].node && lk[u - 1].h == lk[i].h)
			lk[u - 1].x |= lk[i].x;
		else
			lk[u++] = lk[i];
	}
	m->locks = lk;
	m->nlocks = u;
	for (int i = 0; i < u; i++)
		m->nodes |= 1ull << lk[i].node;
	t->pdata = m;
	if (u == 0)
		return CC_OK;
	int rc = calvin_sequence(t, m);
	if (rc == CC_OK)
		adopt(t, m);
	return rc;
}

static void mine_free(struct txn *t)
{
	struct calvin_mine *m = t->pdata;
	if (!m)
		return;
	calvin_release(t, m);
	free(m->locks);
	free(m);
	t->pdata = NULL;
}

/* OLLP: remember the key for the next attempt. */
static int ollp(struct txn *t, const struct cc_access *a)
{
	struct cc_ollp *o = t->ollp;
	if (!o)
		return cc_abort_with(t, CC_CAUSE_OLLP);
	for (int i = 0; i < o->n; i++)
		if (o->keys[i].len == a->klen && memcmp(o->keys[i].p, a->key, a->klen) == 0) {
			o->keys[i].access |= CC_KEY_WRITE;
			return cc_abort_with(t, CC_CAUSE_OLLP);
		}
	if (o->n == o->cap) {
		int nc = o->cap ? 2 * o->cap : 8;
		struct cc_key *nk = realloc(o->keys, (size_t)nc * sizeof(*nk));
		if (!nk)
			return CC_EINTERNAL;
		o->keys = nk;
		o->cap = nc;
	}
	char *p = malloc(a->klen ? a->klen : 1);
	if (!p)
		return CC_EINTERNAL;
	memcpy(p, a->key, a->klen);
	/* Exclusive even for a read: a script that reads a key it did not
	 * declare mostly writes it next, and another OLLP round costs more
	 * than the concurrency a shared lock would keep. */
	o->keys[o->n++] = (struct cc_key){ .p = p, .len = a->klen,
					   .access = CC_KEY_READ | CC_KEY_WRITE };
	return cc_abort_with(t, CC_CAUSE_OLLP);
}

/* The item latch of a key locked exclusive: free but for a latch of
 * another protocol's cleanup (none runs under calvin), so a busy one is
 * waited for, never a reason to abort. */
static int latch(struct txn *t, struct cc_access *a)
{
	for (int round = 0;; round++) {
		uint64_t old = ~0ull;
		int rc = prim_lock_and_read(t, a, 0, &old);
		if (rc)
			return rc;
		/* Our own word: a participant latched it for us, and its
		 * image did not reach us (a GRANT sent again carries none). */
		if (old == 0 || old == t->owner)
			return prim_lock_won(t, a);
		if ((rc = prim_check_block(t, a)))
			return rc; /* a stale address: resolved again */
		if ((rc = cc_wait(t, round)))
			return rc;
	}
}

/* A read found a's cached address stale (the item moved since this worker
 * cached it): the key resolved again through its node's index. Under the
 * key's deterministic lock nothing moves it meanwhile, so this is no
 * conflict and no reason to abort. */
static int reresolve(struct txn *t, struct cc_access *a)
{
	cc_cache_drop(t->ccw->cache, a->key, a->klen, a->hash);
	int rc = txn_acc_create(t, a, !fab_node_near(t->node->fab, a->node));
	if (rc == CC_EFAB)
		return rc;
	return rc ? cc_abort_with(t, CC_CAUSE_STALE) : CC_OK;
}

/* A shared read: the block, once no install holds its latch. Under the
 * key's shared lock none does, but for a node purged while it was alive
 * (cc/calvin.c, purge) whose commit still runs: its install is waited
 * for rather than read half done. */
static int read_once(struct txn *t, struct cc_access *a, const struct calvin_lock *lk)
{
	if (lk->x)
		return latch(t, a);
	for (int round = 0;; round++) {
		prim_post_read_block(t, a);
		int rc = prim_exec(t);
		if (rc || (rc = prim_check_block(t, a)))
			return rc;
		if (a->img->lock == 0)
			return CC_OK;
		if ((rc = cc_wait(t, round)))
			return rc;
	}
}

static int calvin_read(struct txn *t, struct cc_access *a)
{
	const struct calvin_lock *lk = lock_of(t, a);
	if (!lk)
		return ollp(t, a);
	if (acc_locked(a))
		return CC_OK;
	for (int tries = 0;; tries++) {
		int rc = read_once(t, a, lk);
		if (rc != CC_ABORT || t->cause != CC_CAUSE_STALE || tries == 3)
			return rc;
		if ((rc = reresolve(t, a)))
			return rc;
	}
}

static bool calvin_read_post(struct txn *t, struct cc_access *a)
{
	const struct calvin_lock *lk = lock_of(t, a);
	if (!lk || acc_locked(a))
		return false;
	a->p[0] = lk->x;
	if (lk->x) {
		a->stage[2] = ~0ull;
		prim_stage(t, CC_STAGE_LOCK);
		prim_post_cas_item(t, a, W_LOCK, 0, t->owner, &a->stage[2]);
	}
	prim_post_read_block(t, a); /* behind the CAS, if any */
	return true;
}

/* A stale address (STALE) or a busy latch: calvin_read, alone, resolves
 * the key again or waits for the latch. A shared read that saw a latch
 * held likewise. */
static int calvin_read_done(struct txn *t, struct cc_access *a)
{
	if (a->p[0] && a->stage[2] != 0 && a->stage[2] != t->owner) /* ours: latch */
		return CC_RETRY;
	int rc = a->p[0] ? prim_lock_won(t, a) : prim_check_block(t, a);
	if (rc == CC_OK && !a->p[0] && a->img->lock != 0)
		return CC_RETRY; /* latched: read_once waits */
	return rc == CC_ABORT && t->cause == CC_CAUSE_STALE ? CC_RETRY : rc;
}

static int calvin_write(struct txn *t, struct cc_access *a)
{
	const struct calvin_lock *lk = lock_of(t, a);
	if (!lk || !lk->x)
		return ollp(t, a);
	return acc_locked(a) ? CC_OK : calvin_read(t, a);
}

static int calvin_commit(struct txn *t)
{
	t->cts = cc_ts_next(t);
	return prim_commit_writes(t, t->cts);
}

/* RELEASE once the executor reaped what the commit left absent: the reap
 * locks items under our owner word, which a participant's late giving
 * back of a forwarded latch (a CAS from that word) must not meet, and it
 * runs under the deterministic locks, so the next transaction finds the
 * index settled. */
static void calvin_committed(struct txn *t)
{
	mine_free(t);
}

static void calvin_abort(struct txn *t)
{
	prim_release_locks(t);
	mine_free(t);
}

const struct cc_protocol cc_calvin = {
	.name = "calvin",
	.fetch_locks_writes = true,
	.read_stage = CC_STAGE_READ,
	.begin = calvin_begin,
	.read = calvin_read,
	.read_post = calvin_read_post,
	.read_done = calvin_read_done,
	.write = calvin_write,
	.commit = calvin_commit,
	.abort = calvin_abort,
	.committed = calvin_committed,
};

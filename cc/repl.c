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
 * Rounds: one READ of every backup's primary bucket, then the lock CAS and
 * block READ of every candidate, all keys and nodes in one batch each; a key
 * the probe misses (new on that node, in a later way) is resolved alone with
 * st_create first.
 *
 * Invariants:
 *  (1) A backup block of a key is written only by a transaction that holds
 *      the key's lock on its primary and the backup block's own lock word:
 *      the image read here is the backup's committed state, and the block's
 *      index slot cannot move under a relocation's swap.
 *  (2) A backup keeps the value and the version, not the protocol's
 *      metadata words or tail (mvcc's older versions): no reader reads it.
 *  (3) Backup accesses live in t->bk, never in t->acc or t's key table, so
 *      no protocol hook and no address cache entry ever names one.
 */
#include <stdlib.h>
#include <string.h>

#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

struct bprobe {
	struct cc_access *b;
	uint64_t bucket[8];
	uint64_t off;
	uint64_t old;       /* the lock CAS's result */
	uint8_t cls;
	bool posted;        /* lock CAS and READ posted at (off, cls) */
};

/* The backups t needs: one per written key and other node of its set. */
static int list_backups(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		const struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		const struct pl_set *set = cc_key_set(t->ccw, a->key, a->klen);
		if (!set || set->n < 2)
			continue;
		if (txn_accs_grow(&t->bk, &t->bk_cap, t->nbk + set->n - 1))
			return CC_EINTERNAL;
		for (int r = 1; r < set->n; r++) {
			struct cc_access *b = txn_acc_new(t, a->key, a->klen, a->hash);
			if (!b)
				return CC_EINTERNAL;
			b->node = set->node[r];
			b->p[0] = (uint64_t)i; /* its primary's index in t->acc */
			t->bk[t->nbk++] = b;
		}
	}
	return CC_OK;
}

static void post_lock_read(struct txn *t, struct bprobe *p)
{
	struct cc_access *b = p->b;
	fab_cas(&t->batch, b->node, p->off, 0, t->owner, &p->old);
	t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE; /* a lock word (prim.c) */
	fab_read(&t->batch, b->node, p->off, b->img, st_class_size(p->cls));
	p->posted = true;
}

/* After a lock CAS and READ: the access locked and resolved, or not (the
 * lock given back if we won it on another key's block). */
static int settle(struct txn *t, struct bprobe *p, bool *resolved)
{
	struct cc_access *b = p->b;
	struct st_ref ref;
	bool match = st_probe_match(b->img, b->key, b->klen, b->node, p->cls, p->off, &ref) == 0;
	bool won = p->old == 0;
	*resolved = false;
	p->posted = false;
	if (won && match) {
		b->ref = ref;
		b->pstate |= ACC_LOCKED;
		*resolved = true;
		return CC_OK;
	}
	if (won) { /* not the key's block (any more): give it back */
		fab_cas(&t->batch, b->node, p->off, t->owner, 0, &p->old);
		t->batch.ops[t->batch.n - 1].flags |= FAB_OP_VOLATILE;
	}
	else if (match) /* the key's block, locked: a writer still finishing, or a dead one */
		return cc_abort_with(t, CC_CAUSE_LOCK);
	return CC_OK;
}

/* Lock and read each backup (invariant (1)); see the header for the rounds. */
static int lock_backups(struct txn *t, int from)
{
	const struct st_layout *L = t->node->layout;
	int n = t->nbk - from;
	struct bprobe *pr = calloc((size_t)n, sizeof(*pr));
	if (!pr)
		return CC_EINTERNAL;
	int rc = CC_OK;
	for (int i = 0; i < n; i++) {
		pr[i].b = t->bk[from + i];
		st_probe_post(&t->batch, L, pr[i].b->node, pr[i].b->hash, pr[i].bucket);
	}
	if ((rc = prim_exec(t)))
		goto out;
	for (int i = 0; i < n; i++)
		if (st_probe_candidate(L, pr[i].b->hash, pr[i].bucket, &pr[i].off, &pr[i].cls) == 0 &&
		    txn_acc_img(pr[i].b, pr[i].cls) == CC_OK)
			post_lock_read(t, &pr[i]);
	if ((rc = prim_exec(t)))
		goto out;
	bool *done = calloc((size_t)n, sizeof(*done));
	if (!done) {
		rc = CC_EINTERNAL;
		goto out;
	}
	/* Every posted CAS is settled, even after one aborts: a lock won
	 * must be on record (ACC_LOCKED) for the abort to release it. */
	for (int i = 0; i < n; i++) {
		int r = pr[i].posted ? settle(t, &pr[i], &done[i]) : CC_OK;
		if (rc == CC_OK)
			rc = r;
	}
	/* The probe's misses, one by one through the index (st_create). */
	for (int i = 0; i < n && rc == CC_OK; i++) {
		if (done[i])
			continue;
		struct cc_access *b = pr[i].b;
		rc = txn_acc_create(t, b, false);
		if (rc)
			break;
		pr[i].off = b->ref.off;
		pr[i].cls = b->ref.cls;
		post_lock_read(t, &pr[i]);
		if ((rc = prim_exec(t)) || (rc = settle(t, &pr[i], &done[i])))
			break;
		if (!done[i])
			rc = cc_abort_with(t, CC_CAUSE_STALE); /* it moved meanwhile */
	}
	free(done);
	if (rc == CC_OK)
		rc = prim_exec(t); /* the CASes that gave back a lock */
out:
	free(pr); /* a fabric failure: prim_exec set t->fatal and t->unknown */
	return rc;
}

/* The write a backup installs: its primary's value and version, none of
 * the protocol's words (invariant (2)); a block of its own if it outgrew
 * the backup's. */
static int stage_write(struct txn *t, struct cc_access *b)
{
	const struct cc_access *a = t->acc[b->p[0]];
	const struct st_layout *L = t->node->layout;
	b->wdel = a->wdel;
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
	const struct pl_map *m = ck_pr_load_ptr(&t->node->place.cur);
	if (m->replicas < 2)
		return CC_OK;
	int from = t->nbk;
	int rc = list_backups(t);
	if (rc == CC_OK && t->nbk > from)
		rc = lock_backups(t, from);
	for (int i = from; i < t->nbk && rc == CC_OK; i++)
		rc = stage_write(t, t->bk[i]);
	return rc;
}

void repl_release(struct txn *t)
{
	for (int i = 0; i < t->nbk; i++)
		txn_acc_drop(t, t->bk[i]);
	t->nbk = 0;
}

int cc_read_copies(struct cc_worker *ccw, const char *key, size_t klen, struct cc_copy *out)
{
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

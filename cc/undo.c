/*
 * undo.c: the coordinator's side of the undo log (st.h, "the undo log";
 * FORD 4.3, coalescent commit with undo logging). The owner's side, which
 * settles what a dead coordinator left, is storage/log.c.
 *
 * Slots: a node owns ST_LOG_SLOTS coordinator slots in every region of the
 * cluster (its own included) and its decision records (st_txn_rec) in its
 * own region. Worker w of W uses slots s with s % W == w, so handing them
 * out needs no sharing between threads; a transaction takes one only when
 * it commits writes, and waits if its worker has none free.
 *
 * Invariants:
 * (1) A slot is written only by the transaction holding it; it is free in
 *     the pool only after its records were retired on every node it wrote,
 *     or settled by that node (a slot whose retire failed stays out of the
 *     pool until the peer that failed has rejoined: node->log_pending).
 * (2) Records are posted before the installs they protect, on the same
 *     endpoint, so a node never holds an install without its record.
 * (3) The commit point (the decision record; or, with one written node
 *     and no relocation, that node's retire) is written only after every
 *     install has completed; no lock of the transaction is released before
 *     it.
 * (4) Records that overflow a slot go to extents (st.h) allocated before
 *     any record is posted, written in the same batch as the slot (before
 *     it, on the same endpoint), and freed only after the slot's retire
 *     landed: recovery never follows a chain into a block given back.
 */
#include <stdlib.h>
#include <string.h>

#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

int cc_lock_holder_node(uint64_t lockword)
{
	return (int)(lockword >> 56);
}

static unsigned self_node(struct txn *t)
{
	return fab_self(t->node->fab);
}

void undo_slot_get(struct txn *t)
{
	struct cc_worker *ccw = t->ccw;
	struct cc_node *n = t->node;
	unsigned nw = (unsigned)(n->nworkers > 0 ? n->nworkers : 1);
	for (;;) {
		for (unsigned s = (unsigned)ccw->worker_id % nw; s < ST_LOG_SLOTS; s += nw) {
			uint64_t bit = 1ull << s;
			if (ccw->slots_busy & bit)
				continue;
			if (ck_pr_load_64(&n->log_pending[s]))
				continue; /* invariant (1): waiting for a peer */
			ccw->slots_busy |= bit;
			t->undo.slot = (int)s;
			return;
		}
		sched_sleep(ccw->sched, 100000);
	}
}

/* Give the extents back (invariant (4): the slot is retired); one whose
 * node fails stays allocated until that node restarts (st_recover frees
 * every block the index does not name). */
static void ext_free(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	for (int i = 0; i < u->next; i++)
		(void)st_free(&t->batch, t->node->layout, &u->ext[i].ref, 0);
	u->next = 0;
}

void undo_slot_put(struct txn *t)
{
	ext_free(t);
	if (t->undo.slot < 0)
		return;
	t->ccw->slots_busy &= ~(1ull << t->undo.slot);
	t->undo.slot = -1;
	t->undo.phase = UNDO_NONE;
	t->undo.nodes = 0;
}

/* Keep the slot out of use until the nodes in `failed` have rejoined and
 * settled its records (invariant 1). */
void undo_slot_quarantine(struct txn *t, uint64_t failed)
{
	struct cc_node *n = t->node;
	int s = t->undo.slot;
	if (s < 0)
		return;
	failed |= t->unknown; /* settling a slot releases its txn's locks too */
	t->undo.next = 0;     /* and frees its extents (st_log_resolve) */
	ck_pr_store_64(&n->log_pending_nodes[s], failed);
	ck_pr_fence_store();
	ck_pr_store_64(&n->log_pending[s], t->owner);
	undo_slot_put(t);
}

void undo_locks_pending(struct txn *t, uint64_t failed)
{
	struct cc_node *n = t->node;
	failed |= t->unknown;
	if (!failed)
		return;
	/* Full (more transactions lost a node mid-flight than there are
	 * entries): wait for the control plane to settle some, until
	 * txn-timeout. Dropping one would leave its locks held for good. */
	uint64_t waited_ms = 0;
	for (;;) {
		for (unsigned i = 0; i < CC_LOCK_PENDING; i++) {
			if (ck_pr_load_64(&n->lock_pending[i]) != 0 ||
			    !ck_pr_cas_64(&n->lock_pending[i], 0, ~0ull))
				continue;
			ck_pr_store_64(&n->lock_pending_nodes[i], failed);
			ck_pr_fence_store();
			ck_pr_store_64(&n->lock_pending[i], t->owner);
			t->unknown_noted |= failed;
			return;
		}
		long long limit = (long long)ck_pr_load_64(&n->limits.txn_timeout_ms);
		if ((long long)waited_ms >= limit)
			break;
		sched_sleep(t->ccw->sched, 10ull * 1000 * 1000);
		waited_ms += 10;
	}
	cc_log(n, CC_LOG_WARNING,
		"no room to remember the locks a failed transaction may hold on nodes 0x%llx: "
		"they stay held until this node restarts",
		(unsigned long long)failed);
}

static int buf_reserve(struct txn *t, uint64_t need)
{
	struct txn_undo *u = &t->undo;
	struct cc_worker *ccw = t->ccw;
	if (!u->buf && ccw->nundo_spare) {
		ccw->nundo_spare--;
		u->buf = ccw->undo_spare[ccw->nundo_spare];
		u->cap = ccw->undo_spare_cap[ccw->nundo_spare];
	}
	if (need <= u->cap)
		return 0;
	if (need > UINT32_MAX)
		return -1;
	char *p = realloc(u->buf, need);
	if (!p)
		return -1;
	u->buf = p;
	u->cap = (uint32_t)need;
	return 0;
}

/* Payload bytes of the record of a written access: words 1..5 and the old
 * value bytes the install overwrites (an install rewrites the key with the
 * same bytes and writes the new value only; a delete writes no value
 * bytes at all). A protocol's tail after the value (mvcc's versions:
 * a->otail before, a->wtlen after) counts as value bytes. */
static uint32_t rec_payload(const struct txn *t, const struct cc_access *a)
{
	if (acc_relocates(a, t->node->layout))
		return sizeof(struct st_log_reloc);
	uint32_t vlen = st_data_vlen(a->img->data);
	if (st_data_flags(a->img->data) & ST_F_ABSENT)
		vlen = 0;
	vlen += a->otail;
	uint32_t nlen = (a->wdel ? 0 : a->wvlen) + a->wtlen;
	return 40u + (vlen < nlen ? vlen : nlen);
}

/* Fills the record of `a` at `at`; returns its size with padding. */
static uint32_t rec_fill(struct txn *t, const struct cc_access *a, char *at)
{
	struct st_log_rec *rec = (struct st_log_rec *)at;
	uint32_t len = rec_payload(t, a);
	char *pl = (char *)(rec + 1);
	rec->txn = t->owner;
	if (acc_relocates(a, t->node->layout)) {
		struct st_log_reloc rl = {
			.hash = a->hash,
			.old_gen_cls = ((uint64_t)a->ref.gen << 32) | a->ref.cls,
			.new_gen_cls = ((uint64_t)a->nref.gen << 32) | a->nref.cls,
		};
		rec->kind_len = ((uint64_t)ST_REC_RELOC << 32) | len;
		rec->off = a->ref.off;
		rec->aux = a->nref.off;
		memcpy(pl, &rl, sizeof(rl));
	} else {
		/* Words 1..5 as read (ver, meta, ident, data), key, old value. */
		rec->kind_len = ((uint64_t)ST_REC_IMAGE << 32) | len;
		rec->off = a->ref.off;
		rec->aux = a->ref.gen;
		memcpy(pl, &a->img->ver, 40);
		memcpy(pl + 40, st_item_val(a->img), len - 40);
	}
	uint32_t padded = st_rec_bytes(len) - (uint32_t)sizeof(*rec);
	if (padded > len)
		memset(pl + len, 0, padded - len);
	rec->sum = st_log_rec_sum(rec, pl);
	return (uint32_t)sizeof(*rec) + padded;
}

/* The nodes of a bitmask, lowest first: `for (m = mask; m; m &= m - 1)`
 * with nd = NODE_OF(m) visits only the nodes written (a transaction
 * usually writes one or two of FAB_MAX_NODES). */
#define NODE_OF(m) ((unsigned)__builtin_ctzll(m))

/* Room for one more extent. */
static struct undo_ext *ext_push(struct txn_undo *u)
{
	if (u->next == u->ext_cap) {
		int cap = u->ext_cap ? 2 * u->ext_cap : 8;
		struct undo_ext *p = realloc(u->ext, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		u->ext = p;
		u->ext_cap = cap;
	}
	return &u->ext[u->next++];
}

static uint32_t rec_at(const char *p)
{
	return st_rec_bytes((uint32_t)((const struct st_log_rec *)p)->kind_len);
}

/*
 * Node nd's records past what its slot holds: cut them, at record bounds,
 * into extents of up to ST_LOG_EXT_BYTES, allocate a block on nd for each
 * (in a batch of its own: t->batch may hold the caller's ops for the
 * install round), and chain them from the slot's header. blen[nd] becomes
 * what the slot holds. CC_ETXNLOG if a record fits no extent, or nd has
 * no room for them (the extents taken go back with the slot).
 */
static int ext_build(struct txn *t, unsigned nd)
{
	struct txn_undo *u = &t->undo;
	const char *recs = u->buf + u->boff[nd];
	uint32_t end = u->blen[nd], p = sizeof(struct st_log_hdr);
	while (p < end && p + rec_at(recs + p) <= t->node->layout->log_slot_bytes)
		p += rec_at(recs + p);
	u->blen[nd] = p;
	struct fab_batch *b = malloc(sizeof(*b));
	if (!b)
		return CC_ETXNLOG;
	fab_batch_init(b, t->batch.fw, t->batch.waiter, &t->fstats);
	b->twosided = t->batch.twosided;
	b->tag = CC_STAGE_LOG;
	int first = u->next, rc = CC_OK;
	while (p < end) {
		uint32_t start = p;
		while (p < end && p - start + rec_at(recs + p) <= ST_LOG_EXT_BYTES)
			p += rec_at(recs + p);
		struct undo_ext *e = p > start ? ext_push(u) : NULL;
		if (!e || st_alloc(b, t->node->layout, (uint16_t)nd, 0, p - start, &e->ref) != 0) {
			if (e)
				u->next--;
			rc = CC_ETXNLOG;
			break;
		}
		e->boff = u->boff[nd] + start;
		e->blen = p - start;
		e->hdr[0] = ST_LOCK_CLAIMED; /* kept: no item lock lands on an extent */
		e->hdr[2] = t->owner;
		e->data = st_make_data(e->blen, ST_F_ABSENT);
	}
	free(b);
	if (rc != CC_OK)
		return rc;
	for (int i = first; i < u->next; i++) { /* the chain */
		const struct undo_ext *nx = i + 1 < u->next ? &u->ext[i + 1] : NULL;
		u->ext[i].hdr[1] = nx ? ((uint64_t)nx->ref.gen << 32) | nx->ref.cls : 0;
		u->ext[i].hdr[3] = nx ? nx->ref.off : 0;
	}
	struct st_log_hdr *h = (struct st_log_hdr *)(u->buf + u->boff[nd]);
	h->ext = u->ext[first].ref.off;
	h->ext_gc = ((uint64_t)u->ext[first].ref.gen << 32) | u->ext[first].ref.cls;
	h->ext_txn = t->owner;
	return CC_OK;
}

int undo_build(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	const struct st_layout *L = t->node->layout;
	u->nodes = 0;
	u->next = 0;
	for (int i = 0; i < txn_nwrit(t); i++) { /* backups too (cc/repl.c) */
		const struct cc_access *a = txn_writ(t, i);
		if (!(a->mode & ACC_W))
			continue;
		if (!(u->nodes & (1ull << a->node)))
			u->blen[a->node] = sizeof(struct st_log_hdr);
		u->nodes |= 1ull << a->node;
		uint32_t rec = st_rec_bytes(rec_payload(t, a));
		if ((uint64_t)u->blen[a->node] + rec > ST_LOG_MAX_BYTES)
			return CC_ETXNLOG; /* checked per record: blen is 32 bits */
		u->blen[a->node] += rec;
	}
	uint64_t total = 0;
	for (uint64_t m = u->nodes; m; m &= m - 1) {
		unsigned nd = NODE_OF(m);
		u->boff[nd] = (uint32_t)total;
		total += u->blen[nd];
	}
	if (total > UINT32_MAX || buf_reserve(t, total))
		return CC_ETXNLOG;
	uint32_t fill[FAB_MAX_NODES];
	for (uint64_t m = u->nodes; m; m &= m - 1) {
		unsigned nd = NODE_OF(m);
		struct st_log_hdr *h = (struct st_log_hdr *)(u->buf + u->boff[nd]);
		memset(h, 0, sizeof(*h));
		h->txn = t->owner;
		fill[nd] = u->boff[nd] + (uint32_t)sizeof(*h);
	}
	for (int i = 0; i < txn_nwrit(t); i++) { /* backups too (cc/repl.c) */
		const struct cc_access *a = txn_writ(t, i);
		if (!(a->mode & ACC_W))
			continue;
		fill[a->node] += rec_fill(t, a, u->buf + fill[a->node]);
	}
	u->mark = t->owner;
	u->zero = 0;
	for (uint64_t m = u->nodes; m; m &= m - 1) {
		unsigned nd = NODE_OF(m);
		int rc = u->blen[nd] > L->log_slot_bytes ? ext_build(t, nd) : CC_OK;
		if (rc)
			return rc;
	}
	return CC_OK;
}

void undo_post_records(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	const struct st_layout *L = t->node->layout;
	prim_stage(t, CC_STAGE_LOG);
	/* Extents before the slots that chain them (invariant (4)); an
	 * extent's ident word is st_alloc's, left alone. */
	for (int i = 0; i < u->next; i++) {
		struct undo_ext *e = &u->ext[i];
		fab_write(&t->batch, e->ref.node, e->ref.off, e->hdr, sizeof(e->hdr));
		fab_write(&t->batch, e->ref.node, e->ref.off + offsetof(struct st_item, data),
			  &e->data, 8);
		fab_write(&t->batch, e->ref.node, e->ref.off + sizeof(struct st_item),
			  u->buf + e->boff, e->blen);
	}
	for (uint64_t m = u->nodes; m; m &= m - 1) {
		unsigned nd = NODE_OF(m);
		fab_write(&t->batch, (uint16_t)nd, st_log_slot_off(L, self_node(t), u->slot),
			  u->buf + u->boff[nd], u->blen[nd]);
	}
}

void undo_post_decision(struct txn *t)
{
	prim_stage(t, CC_STAGE_LOG);
	fab_write(&t->batch, (uint16_t)self_node(t), st_txn_rec_off(t->node->layout, t->undo.slot),
		  &t->undo.mark, 8);
}

bool undo_decision_landed(struct txn *t)
{
	const char *rec = (const char *)st_region_base(t->node->region) +
			  st_txn_rec_off(t->node->layout, t->undo.slot);
	return __atomic_load_n((const uint64_t *)rec, __ATOMIC_ACQUIRE) == t->undo.mark;
}

void undo_post_mark(struct txn *t, uint16_t node)
{
	uint64_t off = st_log_slot_off(t->node->layout, self_node(t), t->undo.slot);
	fab_write(&t->batch, node, off + offsetof(struct st_log_hdr, mark), &t->undo.mark, 8);
}

void undo_post_retire(struct txn *t, uint16_t node)
{
	uint64_t off = st_log_slot_off(t->node->layout, self_node(t), t->undo.slot);
	fab_write(&t->batch, node, off + offsetof(struct st_log_hdr, txn), &t->undo.zero, 8);
}

void undo_post_rollback(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	prim_stage(t, CC_STAGE_RELEASE);
	uint32_t fill[FAB_MAX_NODES];
	for (uint64_t m = u->nodes; m; m &= m - 1)
		fill[NODE_OF(m)] = u->boff[NODE_OF(m)] + (uint32_t)sizeof(struct st_log_hdr);
	for (int i = 0; i < txn_nwrit(t); i++) {
		struct cc_access *a = txn_writ(t, i);
		if (!(a->mode & ACC_W))
			continue;
		const struct st_log_rec *rec = (const struct st_log_rec *)(u->buf + fill[a->node]);
		uint32_t len = (uint32_t)rec->kind_len;
		fill[a->node] += st_rec_bytes(len);
		if ((uint8_t)(rec->kind_len >> 32) != ST_REC_IMAGE)
			continue; /* relocations are undone by prim_undo_relocations */
		/* Still locked by us: words 2..5 and the value first, then ver
		 * (as an install). */
		const char *pl = (const char *)(rec + 1);
		fab_write(&t->batch, a->ref.node, a->ref.off + 16, pl + 8, 32);
		if (len > 40)
			fab_write(&t->batch, a->ref.node, a->ref.off + 48 + a->klen, pl + 40,
				  len - 40);
		fab_write(&t->batch, a->ref.node, a->ref.off + 8, pl, 8);
	}
}

void undo_txn_release(struct txn *t)
{
	struct txn_undo *u = &t->undo;
	struct cc_worker *ccw = t->ccw;
	if (!u->buf)
		return;
	if (u->cap <= (64u << 10) && ccw->nundo_spare < 8) {
		ccw->undo_spare[ccw->nundo_spare] = u->buf;
		ccw->undo_spare_cap[ccw->nundo_spare++] = u->cap;
	} else {
		free(u->buf);
	}
	u->buf = NULL;
	u->cap = 0;
	free(u->ext);
	u->ext = NULL;
	u->next = u->ext_cap = 0;
}

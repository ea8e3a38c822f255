/*
 * prim.c: the primitives of RCBench section 5.2 on rckv's item layout.
 * Protocols call these and never the fabric (DESIGN.md principle 2). Every
 * verb is counted in the transaction's fab_stats by the batch.
 * See cc.h for the install order and the Double-Read argument.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cc/cc.h"
#include "server/node.h"

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
	int rc = fab_exec(&t->batch);
	if (rc) {
		t->fatal = CC_EFAB;
		return CC_EFAB;
	}
	return CC_OK;
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

void prim_post_read_hdr(struct txn *t, struct cc_access *a, uint64_t hdr[2])
{
	fab_read(&t->batch, a->ref.node, a->ref.off, hdr, 16);
}

void prim_post_read_header(struct txn *t, struct cc_access *a, uint64_t v[6])
{
	fab_read(&t->batch, a->ref.node, a->ref.off, v, 48);
}

int prim_read_consistent(struct txn *t, struct cc_access *a)
{
	for (int tries = 0; tries < 8; tries++) {
		prim_post_read_hdr(t, a, a->hdr[0]);
		prim_post_read_block(t, a);
		prim_post_read_hdr(t, a, a->hdr[1]);
		int rc = prim_exec(t);
		if (rc)
			return rc;
		if (a->hdr[0][0] == a->hdr[1][0] && a->hdr[0][1] == a->hdr[1][1] &&
		    (a->hdr[0][0] == 0 || a->hdr[0][0] == t->owner)) {
			a->img->lock = a->hdr[0][0];
			a->img->ver = a->hdr[0][1];
			return prim_check_block(t, a);
		}
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

void prim_post_cas_item(struct txn *t, struct cc_access *a, int word, uint64_t cmp,
			uint64_t swp, uint64_t *old)
{
	fab_cas(&t->batch, a->ref.node, word_off(a, word), cmp, swp, old);
}

void prim_post_write_word(struct txn *t, struct cc_access *a, int word, uint64_t val)
{
	/* The batch keeps a pointer until exec: stage the value in the access. */
	uint64_t *slot = &a->stage[word == W_LOCK ? 0 : word == W_VER ? 1 : 2];
	*slot = val;
	fab_write(&t->batch, a->ref.node, word_off(a, word), slot, 8);
}

/* Lay the pending write into a->img (words 2.. onward) for one WRITE. */
static uint32_t stage_image(struct cc_access *a, const uint64_t meta[2])
{
	struct st_item *it = a->img;
	it->meta[0] = meta ? meta[0] : 0;
	it->meta[1] = meta ? meta[1] : 0;
	uint32_t vlen = a->wdel ? 0 : a->wvlen;
	it->data = st_make_data(vlen, a->wdel ? ST_F_ABSENT : 0);
	if (vlen)
		memcpy((char *)(it + 1) + a->klen, a->wval, vlen);
	return (uint32_t)sizeof(*it) + a->klen + vlen;
}

void prim_post_install(struct txn *t, struct cc_access *a, uint64_t ver, const uint64_t meta[2],
		       uint64_t unlock)
{
	uint32_t len = stage_image(a, meta);
	/* words 2..: meta, ident (unchanged), data, key, value */
	fab_write(&t->batch, a->ref.node, word_off(a, W_META0), &a->img->meta[0], len - 16);
	prim_post_write_word(t, a, W_VER, ver);
	prim_post_write_word(t, a, W_LOCK, unlock);
}

int prim_relocate(struct txn *t, struct cc_access *a, uint64_t ver, const uint64_t meta[2])
{
	struct node *n = t->node;
	const struct st_layout *L = n->layout;
	struct st_ref old = a->ref;

	/* The new block, complete and unlocked, before anyone can reach it. */
	uint32_t need = st_class_size(a->nref.cls);
	struct st_item *nb = calloc(1, need);
	if (!nb)
		return CC_EINTERNAL;
	nb->lock = 0;
	nb->ver = ver;
	nb->meta[0] = meta ? meta[0] : 0;
	nb->meta[1] = meta ? meta[1] : 0;
	nb->ident = st_make_ident(a->nref.gen, a->klen, a->nref.cls);
	nb->data = st_make_data(a->wvlen, 0);
	memcpy(nb + 1, a->key, a->klen);
	memcpy((char *)(nb + 1) + a->klen, a->wval, a->wvlen);
	fab_write(&t->batch, a->nref.node, a->nref.off, nb,
		  (uint32_t)(sizeof(*nb) + a->klen + a->wvlen));
	int rc = prim_exec(t);
	free(nb);
	if (rc)
		return rc;
	rc = st_swap(&t->batch, L, a->hash, &old, &a->nref);
	if (rc)
		return CC_EINTERNAL; /* we hold old's lock, so the slot cannot move */
	/* Old block: DEAD first, then release, so whoever takes the lock next
	 * sees DEAD and re-resolves; then give it back. */
	uint64_t dead = st_make_data(0, ST_F_DEAD);
	prim_post_write_word(t, a, W_DATA, dead);
	prim_post_write_word(t, a, W_VER, ver);
	prim_post_write_word(t, a, W_LOCK, 0);
	rc = prim_exec(t);
	if (rc)
		return rc;
	(void)st_retire(&t->batch, L, &old);
	a->ref = a->nref;
	a->has_nref = false;
	a->pstate |= ACC_MOVED;
	return CC_OK;
}

int prim_commit_writes(struct txn *t, uint64_t ver)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (a->mode & ACC_W) {
			if (acc_relocates(a)) {
				int rc = prim_relocate(t, a, ver, NULL);
				if (rc)
					return rc;
			} else {
				prim_post_install(t, a, ver, NULL, 0);
			}
		} else if (acc_locked(a)) {
			prim_post_write_word(t, a, W_LOCK, 0);
		}
		a->pstate &= ~ACC_LOCKED;
	}
	return prim_exec(t);
}

void prim_release_locks(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (acc_locked(a)) {
			prim_post_write_word(t, a, W_LOCK, 0);
			a->pstate &= ~ACC_LOCKED;
		}
	}
	(void)prim_exec(t);
}

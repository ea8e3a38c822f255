/*
 * txn.c: the key-level transaction API (cc/txn.h) over the protocol hooks.
 * It keeps the access set (first-touch order plus a small hash table),
 * resolves keys to item blocks (creating placeholders for absent keys, so
 * every key a transaction touches has an item carrying CC metadata and a
 * version), buffers writes so a transaction reads its own writes, and
 * reserves a bigger block at write time when a value outgrows its block,
 * so that commit never runs out of memory.
 */
#include <ck_pr.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc/cache.h"
#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

const char *cc_cause_name(int cause)
{
#define CC_CAUSE_NAME(sym, name, what) [CC_CAUSE_##sym] = name,
	static const char *const names[CC_CAUSES] = { CC_CAUSE_TABLE(CC_CAUSE_NAME) };
#undef CC_CAUSE_NAME
	return cause >= 0 && cause < CC_CAUSES ? names[cause] : names[CC_CAUSE_OTHER];
}

const char *cc_strerror(int rc)
{
	switch (rc) {
	case CC_OK: return "ok";
	case CC_ABORT: return "aborted by concurrency control";
	case CC_EFULL: return "the MemStore is full";
	case CC_ETOOBIG: return "key or value too large";
	case CC_EFAB: return "fabric failure";
	case CC_ETIMEOUT: return "transaction kept aborting until txn-timeout";
	case CC_ETXNLOG:
		return "its undo log does not fit: it changes more than 1 GB on one node, or "
		       "the node has no free memory for the log";
	case CC_EUNKNOWN: return "outcome unknown: a node failed during the commit";
	case CC_EALONE: return "gave up after an abort, to run its parts alone";
	case CC_ENOTSERVING: return "this node does not serve: no lease, or out of the configuration";
	default: return "internal error";
	}
}

static uint16_t key_node(struct txn *t, const char *key, size_t klen)
{
	return cc_key_node(t->ccw, key, klen);
}

/*
 * Does the address cache pay for a key on node? Not for a near node (one
 * this CPU reads with loads and no delay: shm, the own node): there the
 * index lookup it saves is one bucket read, and the cache's own probe and
 * key compare cost as many cache misses; with more keys than it holds, it
 * also keeps clearing and refilling. For a node over a network (or a
 * delayed fabric) it saves a round trip per key.
 */
static bool cache_pays(const struct cc_node *n, uint16_t node)
{
	return !fab_node_near(n->fab, node);
}

static int img_reserve_acc(struct cc_access *a, uint8_t cls)
{
	uint32_t csz = st_class_size(cls);
	if (a->img_cap >= csz)
		return 0;
	struct st_item *img = realloc(a->img, csz);
	if (!img)
		return -ENOMEM;
	a->img = img;
	a->img_cap = csz;
	return 0;
}

static struct cc_access *acc_alloc(struct txn *t)
{
	struct cc_worker *ccw = t->ccw;
	struct cc_access *a = ccw->free_acc;
	if (a) {
		ccw->free_acc = a->hnext;
	} else {
		a = calloc(1, sizeof(*a));
		if (!a)
			return NULL;
	}
	return a;
}

static int tab_grow(struct txn *t)
{
	uint32_t n = t->tab ? (t->tab_mask + 1) * 2 : 16;
	struct cc_access **tab = calloc(n, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		uint32_t b = (uint32_t)a->hash & (n - 1);
		a->hnext = tab[b];
		tab[b] = a;
	}
	free(t->tab);
	t->tab = tab;
	t->tab_mask = n - 1;
	return 0;
}

static struct cc_access *acc_find(struct txn *t, const char *key, size_t klen, uint64_t h)
{
	if (!t->tab)
		return NULL;
	for (struct cc_access *a = t->tab[h & t->tab_mask]; a; a = a->hnext)
		if (a->hash == h && a->klen == klen && memcmp(a->key, key, klen) == 0)
			return a;
	return NULL;
}

void txn_acc_drop(struct txn *t, struct cc_access *a)
{
	/* Keep small buffers for reuse; drop big ones. */
	if (a->img_cap > 4096) {
		free(a->img);
		a->img = NULL;
		a->img_cap = 0;
	}
	if (a->wcap > 4096) {
		free(a->wval);
		a->wval = NULL;
		a->wcap = 0;
	}
	free(a->s_val);
	a->s_val = NULL;
	a->sp_gen = 0;
	a->hnext = t->ccw->free_acc;
	t->ccw->free_acc = a;
}

int txn_accs_grow(struct cc_access ***arr, int *cap, int need)
{
	if (need <= *cap)
		return CC_OK;
	int c = *cap ? *cap : 8;
	while (c < need)
		c *= 2;
	struct cc_access **p = realloc(*arr, (size_t)c * sizeof(*p));
	if (!p)
		return CC_EINTERNAL;
	*arr = p;
	*cap = c;
	return CC_OK;
}

int txn_acc_reserve(struct txn *t, int more)
{
	int need = t->nacc + more;
	if (txn_accs_grow(&t->acc, &t->acc_cap, need))
		return CC_EINTERNAL;
	while ((uint32_t)need > (t->tab ? t->tab_mask + 1 : 0))
		if (tab_grow(t))
			return CC_EINTERNAL;
	return CC_OK;
}

struct cc_access *txn_acc_new(struct txn *t, const char *key, size_t klen, uint64_t h)
{
	struct cc_access *a = acc_alloc(t);
	if (!a)
		return NULL;
	if (a->kcap < klen || !a->key) {
		char *kcopy = realloc(a->key, klen > 32 ? klen : 32);
		if (!kcopy) {
			txn_acc_drop(t, a);
			return NULL;
		}
		a->key = kcopy;
		a->kcap = (uint32_t)(klen > 32 ? klen : 32);
	}
	memcpy(a->key, key, klen);
	a->klen = (uint32_t)klen;
	a->hash = h;
	a->node = key_node(t, key, klen);
	a->mode = 0;
	a->pstate = 0;
	a->wdel = false;
	a->wvflags = 0;
	a->wvlen = 0;
	a->has_nref = false;
	a->p[0] = a->p[1] = 0;
	a->wmeta[0] = a->wmeta[1] = 0;
	a->grow = false;
	a->wtail = NULL;
	a->wtlen = a->otail = 0;
	a->bk_n = 0;
	return a;
}

void txn_acc_add(struct txn *t, struct cc_access *a)
{
	t->acc[t->nacc++] = a;
	uint32_t b = (uint32_t)a->hash & t->tab_mask;
	a->hnext = t->tab[b];
	t->tab[b] = a;
}

struct cc_access *txn_acc_find(struct txn *t, const char *key, size_t klen, uint64_t h)
{
	return acc_find(t, key, klen, h);
}

/* Not read yet: a header the protocol's first read replaces. A blind write
 * installs it as is, so ident and key must be right; the block's identity
 * is checked by the protocol (cc/prim.c). */
static void img_header(struct cc_access *a)
{
	memset(a->img, 0, sizeof(*a->img));
	a->img->ident = st_make_ident(a->ref.gen, a->klen, a->ref.cls);
	a->img->data = st_make_data(0, ST_F_ABSENT);
	memcpy(a->img + 1, a->key, a->klen);
}

bool txn_acc_from_cache(struct txn *t, struct cc_access *a, bool cached)
{
	if (!(cached ? cc_cache_get(t->ccw->cache, a->key, a->klen, a->hash, &a->ref)
		     : cc_cache_take(t->ccw->cache, a->key, a->klen, a->hash, &a->ref)) ||
	    a->ref.node != a->node)
		return false;
	t->ccw->stats.addr_cache_hits++;
	if (img_reserve_acc(a, a->ref.cls) != 0)
		return false;
	img_header(a);
	return true;
}

int txn_acc_img(struct cc_access *a, uint8_t cls)
{
	return img_reserve_acc(a, cls) ? CC_EINTERNAL : CC_OK;
}

int txn_acc_found(struct txn *t, struct cc_access *a, const struct st_ref *ref, bool cached)
{
	a->ref = *ref;
	if (img_reserve_acc(a, a->ref.cls) != 0)
		return CC_EINTERNAL;
	img_header(a);
	if (cached)
		cc_cache_put(t->ccw->cache, a->key, a->klen, a->hash, &a->ref);
	return CC_OK;
}

int txn_acc_create(struct txn *t, struct cc_access *a, bool cached)
{
	if (cached)
		t->ccw->stats.addr_cache_misses++;
	/* The lookup may yield, so its buffer is this coroutine's own. */
	struct st_item *buf = cc_scratch_get(t->ccw);
	if (!buf)
		return CC_EINTERNAL;
	/* Its bucket locks carry our owner word: if a reply is lost after
	 * one was taken, settling this transaction releases it (t->unknown,
	 * cc/undo.c undo_locks_pending). */
	prim_stage(t, CC_STAGE_READ); /* an index lookup is the Read stage's */
	int rc = st_create(&t->batch, st_region_coord(t->node->region), t->owner, a->node, a->key,
			   a->klen, a->hash, &a->ref, buf);
	if (rc == 0 && img_reserve_acc(a, a->ref.cls) != 0)
		rc = -ENOMEM;
	if (rc) {
		cc_scratch_put(t->ccw, buf);
		if (rc != ST_EFULL && rc != -ENOMEM) {
			/* Any of its requests to the node may have run: one that
			 * took the bucket lock before a reply was lost, say. */
			t->unknown |= 1ull << a->node;
			t->fatal = CC_EFAB;
		}
		return rc == ST_EFULL ? CC_EFULL : rc == -ENOMEM ? CC_EINTERNAL : CC_EFAB;
	}
	memcpy(a->img, buf, st_class_size(a->ref.cls));
	cc_scratch_put(t->ccw, buf);
	if (cached)
		cc_cache_put(t->ccw->cache, a->key, a->klen, a->hash, &a->ref);
	return CC_OK;
}

/*
 * acc_get - the access of a key, resolving the key to its block (and
 * creating a placeholder item) on first touch: the address cache, else
 * the owner's index (finding the item, or creating an ABSENT placeholder
 * for it).
 */
static int acc_get_hashed(struct txn *t, const char *key, size_t klen, uint64_t h,
			  struct cc_access **out)
{
	struct cc_access *a = acc_find(t, key, klen, h);
	if (a) {
		*out = a;
		return CC_OK;
	}
	if (txn_acc_reserve(t, 1) != CC_OK)
		return CC_EINTERNAL;
	a = txn_acc_new(t, key, klen, h);
	if (!a)
		return CC_EINTERNAL;
	bool cached = cache_pays(t->node, a->node);
	if (!txn_acc_from_cache(t, a, cached)) {
		int rc = txn_acc_create(t, a, cached);
		if (rc) {
			txn_acc_drop(t, a);
			return rc;
		}
	}
	txn_acc_add(t, a);
	*out = a;
	return CC_OK;
}

static int acc_get(struct txn *t, const char *key, size_t klen, struct cc_access **out)
{
	/* A command that reads a key and then writes it (INCR, APPEND) asks
	 * for it twice in a row: compare with the last access before hashing. */
	if (t->nacc > 0) {
		struct cc_access *last = t->acc[t->nacc - 1];
		if (last->klen == klen && memcmp(last->key, key, klen) == 0) {
			*out = last;
			return CC_OK;
		}
	}
	return acc_get_hashed(t, key, klen, st_hash(key, klen), out);
}

static bool key_too_long(struct cc_node *n, size_t klen)
{
	return klen > ck_pr_load_64(&n->limits.max_key_bytes);
}

bool txn_key_too_big(struct txn *t, size_t klen)
{
	return key_too_long(t->node, klen);
}

/* What the transaction sees for an access. */
/* What the transaction sees of a as stored: the bytes (with ST_V_EXPIRES
 * the expiry first), their vflags, and whether the key is there. */
static void stored(const struct cc_access *a, const char **raw, size_t *rlen, uint8_t *vflags,
		   bool *found)
{
	if (a->mode & ACC_W) {
		*found = !a->wdel;
		*raw = a->wval;
		*rlen = a->wdel ? 0 : a->wvlen;
		*vflags = a->wdel ? 0 : a->wvflags;
		return;
	}
	const struct st_item *it = a->img;
	*found = !(st_data_flags(it->data) & ST_F_ABSENT);
	*raw = st_item_val(it);
	*rlen = *found ? st_data_vlen(it->data) : 0;
	*vflags = *found ? st_data_vflags(it->data) : 0;
}

/* The expiry of stored bytes with ST_V_EXPIRES (0: none, or too short to
 * hold one, which no writer makes: then the bytes are the value). */
static int64_t stored_expiry(const char *raw, size_t rlen)
{
	int64_t exp = 0;
	if (rlen >= sizeof(exp))
		memcpy(&exp, raw, sizeof(exp)); /* little-endian, as every node */
	return exp;
}

int64_t txn_now_ms(struct txn *t)
{
	if (!t->now_ms) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		t->now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	return t->now_ms;
}

/* What a read returns: the value after its expiry, nothing once expired;
 * its type and expiry in *m (if m). */
static void visible(struct txn *t, const struct cc_access *a, const char **val, size_t *vlen,
		    bool *found, struct txn_meta *m)
{
	uint8_t vf;
	int64_t exp = 0;
	stored(a, val, vlen, &vf, found);
	if (*found && (vf & ST_V_EXPIRES) && (exp = stored_expiry(*val, *vlen)) != 0) {
		if (exp <= txn_now_ms(t)) {
			*found = false;
			*vlen = 0;
		} else {
			*val += sizeof(exp);
			*vlen -= sizeof(exp);
		}
	}
	if (m)
		*m = *found ? (struct txn_meta){ .type = (uint8_t)((vf & ST_V_TYPE_MASK) >>
								   ST_V_TYPE_SHIFT),
						 .expire_ms = exp }
			    : (struct txn_meta){ 0 };
}

int txn_acc_read(struct txn *t, struct cc_access *a)
{
	if (a->mode)
		return CC_OK;
	prim_stage(t, t->proto->read_stage);
	int rc = t->proto->read(t, a);
	if (rc == CC_OK)
		a->mode |= ACC_R;
	return rc;
}

/* Before the first change of an access after a savepoint, keep what to
 * restore. Accesses created after the savepoint need nothing kept. */
static int save_for_sp(struct txn *t, struct cc_access *a)
{
	if (!t->sp_gen || a->sp_gen == t->sp_gen)
		return CC_OK;
	free(a->s_val);
	a->s_val = NULL;
	if ((a->mode & ACC_W) && !a->wdel && a->wvlen) {
		a->s_val = malloc(a->wvlen);
		if (!a->s_val)
			return CC_EINTERNAL;
		memcpy(a->s_val, a->wval, a->wvlen);
	}
	a->s_mode = a->mode;
	a->s_pstate = a->pstate;
	a->s_wdel = a->wdel;
	a->s_vflags = a->wvflags;
	a->s_vlen = a->wvlen;
	a->sp_gen = t->sp_gen;
	return CC_OK;
}

struct txn_savepoint txn_savepoint(struct txn *t)
{
	t->sp_gen++;
	return (struct txn_savepoint){ .nacc = t->nacc, .gen = t->sp_gen, .changes = t->changes };
}

void txn_rollback(struct txn *t, struct txn_savepoint sp)
{
	t->changes = sp.changes;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (i >= sp.nacc && a->sp_gen != sp.gen) {
			/* First touched after the savepoint: keep the resolution
			 * and any lock, forget the write. */
			a->mode &= (uint8_t)~ACC_W;
			a->pstate &= (uint8_t)~ACC_BLIND;
			a->wdel = false;
			a->wvflags = 0;
			a->wvlen = 0;
		} else if (a->sp_gen == sp.gen) {
			a->mode = a->s_mode;
			a->pstate = (uint8_t)((a->pstate & ~ACC_BLIND) | (a->s_pstate & ACC_BLIND));
			a->wdel = a->s_wdel;
			a->wvflags = a->s_vflags;
			a->wvlen = a->s_vlen;
			if (a->s_vlen && a->s_val)
				memcpy(a->wval, a->s_val, a->s_vlen); /* wcap only grows */
		}
		a->sp_gen = 0;
	}
}

static int ensure_write(struct txn *t, struct cc_access *a)
{
	int src = save_for_sp(t, a);
	if (src)
		return src;
	if (a->mode & ACC_W)
		return CC_OK;
	prim_stage(t, CC_STAGE_LOCK);
	int rc = t->proto->write(t, a);
	if (rc != CC_OK)
		return rc;
	/* Start the pending value from what the transaction sees now, as
	 * stored (an expiry in it stays). */
	const char *v;
	size_t vl;
	bool found;
	uint8_t vf;
	stored(a, &v, &vl, &vf, &found);
	if (a->wcap < vl || !a->wval) {
		char *p = realloc(a->wval, vl ? vl : 16);
		if (!p)
			return CC_EINTERNAL;
		a->wval = p;
		a->wcap = (uint32_t)(vl ? vl : 16);
	}
	if (vl)
		memcpy(a->wval, v, vl);
	a->wvlen = (uint32_t)vl;
	a->wvflags = vf;
	a->wdel = !found;
	a->mode |= ACC_W;
	return CC_OK;
}

void txn_hint_single_read(struct txn *t)
{
	t->single_read = true;
}

void txn_hint_single_write(struct txn *t)
{
	t->single_write = true;
}

uint64_t txn_unique(struct txn *t)
{
	/* splitmix64's finalizer, a bijection: distinct (prio_ts, seq)
	 * inputs below 2^64 stay distinct but for the sum's wrap */
	uint64_t z = t->prio_ts + 0x9e3779b97f4a7c15ull * ++t->uniq_seq;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

int txn_attempt(const struct txn *t)
{
	return t->attempt;
}

/* splitmix64's finalizer over the first attempt's timestamp (prio_ts,
 * unique in the cluster and kept across attempts) and the call's number. */
uint64_t txn_rand(struct txn *t)
{
	uint64_t z = t->prio_ts + (uint64_t)++t->rand_n * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

bool txn_deleted(struct txn *t, const char *key, size_t klen)
{
	const struct cc_access *a = acc_find(t, key, klen, st_hash(key, klen));
	return a && (a->mode & ACC_W) && a->wdel;
}

bool txn_written_next(struct txn *t, int *pos, const char **key, size_t *klen)
{
	while (*pos >= 0 && *pos < t->nacc) {
		const struct cc_access *a = t->acc[(*pos)++];
		if ((a->mode & ACC_W) && !a->wdel) {
			*key = a->key;
			*klen = a->klen;
			return true;
		}
	}
	return false;
}

/*
 * Is the key absent from its owner's index? A lookup that takes no lock
 * and creates no placeholder. A key found is put in the address cache (held
 * apart from it, on a near node: cache_pays), so the transaction that reads
 * it next does not look it up again.
 */
static bool lookup_absent(struct cc_worker *ccw, struct fab_batch *b, uint16_t node,
			  const char *key, size_t klen, uint64_t h)
{
	struct st_ref ref;
	bool cached = cache_pays(ccw->node, node);
	if (cached && cc_cache_get(ccw->cache, key, klen, h, &ref))
		return false;
	struct st_item *buf = cc_scratch_get(ccw);
	if (!buf)
		return false;
	int rc = st_lookup(b, ccw->node->layout, node, key, (uint32_t)klen, h, &ref, buf);
	cc_scratch_put(ccw, buf);
	if (rc == 0 && cached)
		cc_cache_put(ccw->cache, key, klen, h, &ref);
	else if (rc == 0)
		cc_cache_hold(ccw->cache, key, klen, h, &ref);
	return rc == ST_ENOTFOUND;
}

/* For a single-key read (txn_hint_single_read): is the key absent? On a
 * hit the normal path runs. */
static bool single_read_absent(struct txn *t, const char *key, size_t klen, uint64_t h)
{
	if (!t->single_read || t->nacc != 0 || t->proto->reads_mark)
		return false;
	return lookup_absent(t->ccw, &t->batch, key_node(t, key, klen), key, klen, h);
}

/*
 * Why a read of one absent key needs no transaction: every protocol puts a
 * key in its owner's index (as a placeholder, locked or versioned as the
 * protocol wants) before it writes the key, and takes it out only once the
 * key is absent in committed state. So "not in the index" is only ever
 * true of a key whose committed state is absent and that no transaction is
 * writing. The lookup reads each slot atomically, in way order (index.c,
 * invariant (3)), and sees a key that was there during the whole lookup;
 * the instant it read the key's last slot can serve as the read's place in
 * the serial order. A found key (even a placeholder or a tombstone) is left
 * to a transaction and its protocol.
 */
bool cc_key_absent(struct cc_worker *ccw, const char *key, size_t klen)
{
	struct cc_node *n = ccw->node;
	if (key_too_long(n, klen))
		return true; /* such a key cannot exist */
	uint64_t lease = ck_pr_load_64(&n->lease_until_ns), deadline = 0;
	if (lease && cc_wait_lease(ccw, &deadline) != CC_OK)
		return false; /* the transaction says why not */
	cc_enter(ccw); /* not across a flush or a protocol switch */
	const struct cc_protocol *proto = ck_pr_load_ptr(&n->proto);
	if (proto->reads_mark) {
		cc_leave(ccw);
		return false;
	}
	cc_cache_sync(ccw);
	struct fab_batch b;
	cc_batch_init(&b, ccw, NULL);
	bool absent = lookup_absent(ccw, &b, cc_key_node(ccw, key, klen), key, klen,
				    st_hash(key, klen));
	cc_leave(ccw);
	return absent;
}

int txn_get(struct txn *t, const char *key, size_t klen, const char **val, size_t *vlen,
	    bool *found)
{
	return txn_get_meta(t, key, klen, val, vlen, found, NULL);
}

int txn_get_meta(struct txn *t, const char *key, size_t klen, const char **val, size_t *vlen,
		 bool *found, struct txn_meta *m)
{
	uint64_t h = st_hash(key, klen);
	if (m)
		*m = (struct txn_meta){ 0 };
	if (single_read_absent(t, key, klen, h)) {
		*found = false;
		*val = NULL;
		*vlen = 0;
		return CC_OK;
	}
	if (txn_key_too_big(t, klen)) { /* such a key cannot exist */
		*found = false;
		*val = NULL;
		*vlen = 0;
		return CC_OK;
	}
	struct cc_access *a;
	int rc = acc_get_hashed(t, key, klen, h, &a);
	if (rc == CC_EFULL) {
		/* The key is absent and its node has no room for the placeholder
		 * that would carry its CC metadata: answer "absent" (true at the
		 * lookup) rather than refuse a read, as Redis never refuses reads
		 * under maxmemory. Such a read is not validated at commit. */
		*found = false;
		*val = NULL;
		*vlen = 0;
		return CC_OK;
	}
	if (rc == CC_OK)
		rc = txn_acc_read(t, a);
	if (rc != CC_OK)
		return rc;
	visible(t, a, val, vlen, found, m);
	return CC_OK;
}

int txn_version(struct txn *t, const char *key, size_t klen, uint64_t *ver)
{
	if (txn_key_too_big(t, klen)) {
		*ver = 0;
		return CC_OK;
	}
	struct cc_access *a;
	int rc = acc_get(t, key, klen, &a);
	if (rc == CC_EFULL) { /* absent, no room for a placeholder: see txn_get */
		*ver = 0;
		return CC_OK;
	}
	if (rc == CC_OK)
		rc = txn_acc_read(t, a);
	if (rc == CC_OK)
		*ver = a->img->ver;
	return rc;
}

/* Reserve a block big enough for the pending value, before it is copied,
 * so a failure leaves the access as it was. */
/* Value bytes to size a block for: vlen, or under a protocol that keeps
 * older versions in the item (mvcc) room for mvcc-versions of them, up to
 * cc_inplace_max (what an in-place install may write). */
static size_t block_vlen(struct txn *t, size_t vlen)
{
	uint32_t imax = cc_inplace_max(t->node->layout);
	if (!t->proto->versions || vlen >= imax)
		return vlen;
	size_t v = (size_t)ck_pr_load_64(&t->node->limits.mvcc_versions);
	size_t want = vlen + (v > 1 ? (v - 1) * (16 + ((vlen + 7) & ~(size_t)7)) : 0);
	return want < imax ? want : imax;
}

/*
 * A protocol's own room after the value (cc_protocol.item_room, maat's
 * lists at the end of the block) is not optional as versions are: a
 * value that would run into it is never installed in place, and when no
 * block with the room can be had the write fails as the MemStore being
 * full would (CC_EFULL), rather than overwrite what other transactions
 * wrote there.
 */
#define TXN_SHRINK_MIN 1024 /* bytes a block must waste before a write moves it */

static int reserve_block(struct txn *t, struct cc_access *a, size_t vlen)
{
	uint32_t pad = t->proto->item_room ? t->proto->item_room(t, a) : 0;
	uint32_t csz = st_class_size(a->ref.cls);
	/* moving is needed although the value alone fits: acc_relocates must
	 * be told (grow) */
	bool alone = sizeof(struct st_item) + a->klen + vlen <= csz;
	/* in place is allowed: the value and the protocol's room fit */
	bool fits = sizeof(struct st_item) + a->klen + vlen + pad <= csz;
	size_t bvlen = block_vlen(t, vlen) + pad;
	uint32_t room = (uint32_t)(sizeof(struct st_item) + a->klen + bvlen);
	/* A block far bigger than what it will hold (a collection's root
	 * that went bucketed, a string overwritten by a short one) is traded
	 * for one that fits: every read of the item reads its whole block. */
	const bool oversized = csz >= 2 * room && csz - room >= TXN_SHRINK_MIN;
	a->grow = false;
	if (room <= csz && vlen <= cc_inplace_max(t->node->layout) && !oversized)
		return CC_OK; /* in place (cc.h, cc_inplace_max) */
	const uint32_t nsz = a->has_nref ? st_class_size(a->nref.cls) : 0;
	if (a->has_nref && room <= nsz && !(nsz >= 2 * room && nsz - room >= TXN_SHRINK_MIN)) {
		a->grow = alone; /* move even though the value alone fits */
		return CC_OK;
	}
	struct st_ref nref;
	int rc = st_class_for(a->klen, (uint32_t)bvlen) < 0 ? ST_EFULL
		: st_alloc(&t->batch, t->node->layout, a->node, a->klen, (uint32_t)bvlen, &nref);
	if ((rc == ST_EFULL || st_class_for(a->klen, (uint32_t)bvlen) < 0) && bvlen != vlen + pad) {
		bvlen = vlen + pad; /* no room for versions: the value alone */
		if (fits && vlen <= cc_inplace_max(t->node->layout))
			return CC_OK;
		rc = st_alloc(&t->batch, t->node->layout, a->node, a->klen, (uint32_t)bvlen, &nref);
	}
	if (rc == ST_EFULL && fits)
		return CC_OK; /* no room to move it: in place, with a bigger record */
	if (rc) {
		if (rc != ST_EFULL)
			t->fatal = CC_EFAB;
		return rc == ST_EFULL ? CC_EFULL : CC_EFAB;
	}
	if (a->has_nref)
		(void)st_free(&t->batch, t->node->layout, &a->nref, t->owner);
	a->nref = nref;
	a->has_nref = true;
	a->grow = alone; /* move for the versions' room though the value fits */
	return CC_OK;
}

int txn_set(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen)
{
	return txn_set_meta(t, key, klen, val, vlen, NULL);
}

int txn_set_meta(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen,
		 const struct txn_meta *m)
{
	struct cc_node *n = t->node;
	const int64_t exp = m ? m->expire_ms : 0;
	if (exp && exp <= txn_now_ms(t)) {
		bool existed; /* past its time already: as Redis, gone at once */
		return txn_del(t, key, klen, &existed);
	}
	const size_t pre = exp ? sizeof(exp) : 0, slen = pre + vlen;
	if (txn_key_too_big(t, klen) ||
	    vlen > ck_pr_load_64(&n->limits.max_value_bytes) ||
	    st_class_for((uint32_t)klen, (uint32_t)slen) < 0)
		return CC_ETOOBIG;
	struct cc_access *a;
	int rc = acc_get(t, key, klen, &a);
	if (rc == CC_OK)
		rc = ensure_write(t, a);
	if (rc == CC_OK)
		rc = reserve_block(t, a, slen);
	if (rc != CC_OK)
		return rc;
	/* val may point into a->wval (a value read back and changed in
	 * place): copied before the old buffer goes, else moved. */
	if (a->wcap < slen) {
		char *p = malloc(slen);
		if (!p)
			return CC_EINTERNAL;
		if (vlen)
			memcpy(p + pre, val, vlen);
		free(a->wval);
		a->wval = p;
		a->wcap = (uint32_t)slen;
	} else if (vlen) {
		memmove(a->wval + pre, val, vlen);
	}
	if (exp)
		memcpy(a->wval, &exp, sizeof(exp));
	a->wvlen = (uint32_t)slen;
	a->wvflags = (uint8_t)((((m ? m->type : 0) << ST_V_TYPE_SHIFT) & ST_V_TYPE_MASK) |
			       (exp ? ST_V_EXPIRES : 0));
	a->wdel = false;
	t->changes++;
	return CC_OK;
}

int txn_set_keepttl(struct txn *t, const char *key, size_t klen, const char *val, size_t vlen)
{
	const char *old;
	size_t olen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(t, key, klen, &old, &olen, &found, &m);
	if (rc != CC_OK)
		return rc;
	return txn_set_meta(t, key, klen, val, vlen, found ? &m : NULL);
}

int txn_reap_expired(struct txn *t, const char *key, size_t klen, bool *reaped)
{
	*reaped = false;
	if (txn_key_too_big(t, klen))
		return CC_OK;
	struct cc_access *a;
	int rc = acc_get(t, key, klen, &a);
	if (rc == CC_EFULL)
		return CC_OK; /* absent */
	if (rc == CC_OK)
		rc = txn_acc_read(t, a);
	if (rc != CC_OK)
		return rc;
	const char *raw;
	size_t rlen;
	uint8_t vf;
	bool found;
	stored(a, &raw, &rlen, &vf, &found);
	int64_t exp = found && (vf & ST_V_EXPIRES) ? stored_expiry(raw, rlen) : 0;
	if (!exp || exp > txn_now_ms(t))
		return CC_OK;
	rc = ensure_write(t, a);
	if (rc != CC_OK)
		return rc;
	a->wdel = true;
	a->wvlen = 0;
	a->wvflags = 0;
	*reaped = true;
	return CC_OK;
}

int txn_del(struct txn *t, const char *key, size_t klen, bool *existed)
{
	const char *v;
	size_t vl;
	int rc = txn_get(t, key, klen, &v, &vl, existed);
	if (rc != CC_OK || !*existed)
		return rc; /* deleting nothing changes nothing (WATCH stays valid) */
	struct cc_access *a;
	rc = acc_get(t, key, klen, &a);
	if (rc == CC_OK)
		rc = ensure_write(t, a);
	if (rc == CC_OK) {
		a->wdel = true;
		a->wvlen = 0;
		a->wvflags = 0;
		t->changes++;
	}
	return rc;
}

/* A block taken for a relocation that did not happen, given back. */
static void free_nref(struct txn *t, struct cc_access *a)
{
	if (a->has_nref) {
		(void)st_free(&t->batch, t->node->layout, &a->nref, t->owner);
		a->has_nref = false;
	}
}

void txn_after_commit(struct txn *t)
{
	/* Relocated items live in their new blocks now (prim_relocate set
	 * a->ref): keep the address cache pointing there. */
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->pstate & ACC_MOVED))
			continue;
		/* A near node's key may be cached by a fetch (cc/fetch.c): drop
		 * it there rather than cache every relocation (mvcc's). */
		if (cache_pays(t->node, a->node))
			cc_cache_put(t->ccw->cache, a->key, a->klen, a->hash, &a->ref);
		else
			cc_cache_drop(t->ccw->cache, a->key, a->klen, a->hash);
	}
	repl_after_commit(t);
	/* Items that end absent (deleted, or placeholders only read) are
	 * removed from the index now that no lock of ours is on them. Best
	 * effort: a busy item stays and is reaped by whoever leaves it absent
	 * next. */
	uint64_t lost = 0;
	for (int i = 0; i < txn_nwrit(t); i++) { /* backups too (cc/repl.c) */
		struct cc_access *a = txn_writ(t, i);
		free_nref(t, a);
		if (!a->mode || t->proto->keep_tombstones)
			continue; /* resolved only: its image was never read */
		bool absent = (a->mode & ACC_W) ? a->wdel
						: (st_data_flags(a->img->data) & ST_F_ABSENT);
		if (!absent)
			continue;
		int rc = st_reap(&t->batch, st_region_coord(t->node->region), a->hash, &a->ref,
				 t->owner);
		if (rc == 0 && i < t->nacc)
			cc_cache_drop(t->ccw->cache, a->key, a->klen, a->hash);
		else if (rc < 0 && rc > ST_ENOTFOUND) /* the fabric's -errno */
			lost |= 1ull << a->ref.node;
	}
	/* A reap whose reply was lost may have left its item or bucket lock
	 * (both carry our owner word): the node settles it. */
	if (lost)
		undo_locks_pending(t, lost);
}

void txn_forget_addresses(struct txn *t)
{
	for (int i = 0; i < t->nacc; i++)
		cc_cache_drop(t->ccw->cache, t->acc[i]->key, t->acc[i]->klen, t->acc[i]->hash);
}

void txn_after_abort(struct txn *t)
{
	for (int i = 0; i < txn_nwrit(t); i++)
		free_nref(t, txn_writ(t, i));
}

/* An access array back to the worker's spare, or freed. */
static void lend_back(struct cc_access ***spare, int *spare_cap, struct cc_access **arr, int cap)
{
	if (*spare || cap > 1024) {
		free(arr);
		return;
	}
	*spare = arr;
	*spare_cap = cap;
}

void txn_release(struct txn *t)
{
	struct cc_worker *ccw = t->ccw;
	undo_txn_release(t);
	repl_release(t);
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (t->tab)
			t->tab[a->hash & t->tab_mask] = NULL;
		txn_acc_drop(t, a);
	}
	/* Hand the arrays back as the worker's spares, unless it already got
	 * one back from another transaction, or they grew for a huge MULTI
	 * (those are dropped rather than kept forever). */
	if (ccw->tab || t->tab_mask > 1023) {
		free(t->tab);
	} else {
		ccw->tab = t->tab;
		ccw->tab_mask = t->tab_mask;
	}
	lend_back(&ccw->acc, &ccw->acc_cap, t->acc, t->acc_cap);
	lend_back(&ccw->bk, &ccw->bk_cap, t->bk, t->bk_cap);
	t->tab = NULL;
	t->acc = t->bk = NULL;
	t->tab_mask = 0;
	t->acc_cap = t->bk_cap = 0;
	t->nacc = 0;
}

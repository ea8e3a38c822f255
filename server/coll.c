/*
 * coll.c: collections as a root and parts (coll.h has the format and the
 * invariants; storage/st.h's "Collections" section the reasons).
 *
 * Linear hashing (Litwin): with level i and split pointer p, nbuckets =
 * 2^i + p and a field of hash h lives in bucket h mod 2^(i+1) when
 * h mod 2^i < p (its bucket was split already), else in h mod 2^i. When
 * count exceeds COLL_LOAD * nbuckets, bucket p is split into p and
 * p + 2^i (each element goes by h mod 2^(i+1)), and p advances; at 2^i it
 * wraps to 0 and i grows. One split moves one bucket: an insert never
 * rewrites the whole collection. Elements only ever move from bucket b to
 * b + 2^i > b, so a cursor that walks buckets upwards (coll_scan) meets
 * every element that stays (some twice, as SCAN allows).
 */
#include "server/coll.h"

#include <stdlib.h>
#include <string.h>

#include "cc/txn.h"
#include "server/list.h"
#include "server/bytes.h"
#include "storage/st.h"

/* ---- (a) part keys, owner, garbage ---- */

void coll_part_key(char out[PL_PART_KEYLEN], uint16_t slot, uint64_t gen, uint32_t id)
{
	memcpy(out, PL_PART_PREFIX, PL_PART_PREFIX_LEN);
	put16(out + 6, slot);
	put64(out + 8, gen);
	put32(out + 16, id);
}

bool coll_part_parse(const char *key, size_t klen, uint16_t *slot, uint64_t *gen, uint32_t *id)
{
	if (!pl_part_key(key, klen))
		return false;
	*slot = get16(key + 6);
	*gen = get64(key + 8);
	*id = get32(key + 16);
	return true;
}

bool coll_root_gen(const char *v, size_t vlen, uint64_t *gen)
{
	uint16_t slot;
	if (list_root_gen(v, vlen, gen, &slot))
		return true; /* a chunked list (server/list.h) */
	if (vlen != COLL_ROOT_BUCKETED_LEN || (uint8_t)v[0] != COLL_ENC_BUCKETED)
		return false;
	*gen = get64(v + 16);
	return *gen != 0;
}

static bool is_collection(uint8_t type)
{
	return type == TXN_T_HASH || type == TXN_T_SET || type == TXN_T_LIST ||
	       type == TXN_T_ZSET;
}

int coll_gc_gen(struct txn *t, uint16_t slot, uint64_t gen, const uint32_t *ids, int n,
		int *collected)
{
	char ok[PL_PART_KEYLEN];
	const char *v;
	size_t vl;
	bool found;
	struct txn_meta m;
	int rc;

	*collected = 0;
	coll_part_key(ok, slot, gen, COLL_OWNER_ID);
	if ((rc = txn_get(t, ok, sizeof(ok), &v, &vl, &found)))
		return rc;
	if (found) {
		/* the name, copied: the transaction's buffers for the owner
		 * may move while the root is read */
		char *root = malloc(vl ? vl : 1);
		if (!root)
			return CC_EINTERNAL;
		memcpy(root, v, vl);
		uint64_t rg = 0;
		rc = txn_get_meta(t, root, vl, &v, &vl, &found, &m);
		free(root);
		if (rc)
			return rc;
		if (found && is_collection(m.type) && coll_root_gen(v, vl, &rg) && rg == gen)
			return CC_OK; /* alive */
	}
	for (int i = 0; i < n; i++) {
		char k[PL_PART_KEYLEN];
		bool existed;
		coll_part_key(k, slot, gen, ids[i]);
		if ((rc = txn_del(t, k, sizeof(k), &existed)))
			return rc;
		*collected += existed;
	}
	return CC_OK;
}

/* ---- (b) element lists ---- */

static size_t vlen_of(uint64_t v)
{
	size_t n = 1;
	while (v >>= 7)
		n++;
	return n;
}

/* One element at p (before end); its length, 0 when malformed. */
static size_t elem_parse(const char *p, const char *end, bool vals, struct coll_elem *e)
{
	const char *s = p;
	uint64_t l;
	size_t k = vget(p, end, &l);
	if (!k || l > (uint64_t)(end - p - (ptrdiff_t)k))
		return 0;
	e->f = p + k;
	e->fl = (size_t)l;
	p += k + l;
	e->v = NULL;
	e->vl = 0;
	if (vals) {
		k = vget(p, end, &l);
		if (!k || l > (uint64_t)(end - p - (ptrdiff_t)k))
			return 0;
		e->v = p + k;
		e->vl = (size_t)l;
		p += k + l;
	}
	return (size_t)(p - s);
}

bool coll_ebuf_check(const char *p, size_t len, bool vals, uint32_t *n)
{
	const char *end = p + len;
	struct coll_elem e;
	*n = 0;
	while (p < end) {
		size_t k = elem_parse(p, end, vals, &e);
		if (!k)
			return false;
		p += k;
		++*n;
	}
	return true;
}

bool coll_ebuf_next(const struct coll_ebuf *b, bool vals, size_t *off, struct coll_elem *e)
{
	if (*off >= b->len)
		return false;
	size_t k = elem_parse(b->p + *off, b->p + b->len, vals, e);
	if (!k)
		return false;
	e->off = *off;
	e->len = k;
	*off += k;
	return true;
}

static int ebuf_reserve(struct coll_ebuf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int ebuf_set(struct coll_ebuf *b, const char *p, size_t len, uint32_t n)
{
	b->len = 0;
	if (ebuf_reserve(b, len))
		return -1;
	if (len)
		memcpy(b->p, p, len);
	b->len = len;
	b->n = n;
	return 0;
}

static size_t elem_size(bool vals, size_t fl, size_t vl)
{
	return vlen_of(fl) + fl + (vals ? vlen_of(vl) + vl : 0);
}

static void elem_write(char *p, bool vals, const char *f, size_t fl, const char *v, size_t vl)
{
	p += vput(p, fl);
	memcpy(p, f, fl);
	p += fl;
	if (vals) {
		p += vput(p, vl);
		if (vl)
			memcpy(p, v, vl);
	}
}

static bool ebuf_find(const struct coll_ebuf *b, bool vals, const char *f, size_t fl,
		      struct coll_elem *e)
{
	size_t off = 0;
	while (coll_ebuf_next(b, vals, &off, e))
		if (e->fl == fl && memcmp(e->f, f, fl) == 0)
			return true;
	return false;
}

/* Replace the element e (found in b) by a new one, in place; or append one
 * when e is NULL. f and v must not point into b. */
static int ebuf_put(struct coll_ebuf *b, bool vals, const struct coll_elem *e, const char *f,
		    size_t fl, const char *v, size_t vl)
{
	size_t sz = elem_size(vals, fl, vl);
	size_t at = e ? e->off : b->len, old = e ? e->len : 0;
	if (sz > old && ebuf_reserve(b, sz - old))
		return -1;
	memmove(b->p + at + sz, b->p + at + old, b->len - at - old);
	elem_write(b->p + at, vals, f, fl, v, vl);
	b->len = b->len + sz - old;
	if (!e)
		b->n++;
	return 0;
}

static void ebuf_cut(struct coll_ebuf *b, const struct coll_elem *e)
{
	memmove(b->p + e->off, b->p + e->off + e->len, b->len - e->off - e->len);
	b->len -= e->len;
	b->n--;
}

/* ---- (c) the dict ---- */

struct coll_bucket {
	uint32_t id;
	bool dirty;
	struct coll_ebuf b;
};

#define INLINE_HDR 8

static uint64_t nbuckets(const struct coll *c)
{
	return ((uint64_t)1 << c->level) + c->split;
}

uint64_t coll_nbuckets(const struct coll *c)
{
	return c->enc == COLL_ENC_BUCKETED ? nbuckets(c) : 0;
}

static uint32_t bucket_of(const struct coll *c, uint64_t h)
{
	uint64_t lo = h & (((uint64_t)1 << c->level) - 1);
	if (lo < c->split)
		return (uint32_t)(h & (((uint64_t)1 << (c->level + 1)) - 1));
	return (uint32_t)lo;
}

static int parse_root(struct coll *c, const char *v, size_t vl)
{
	if (vl < 1)
		return COLL_ECORRUPT;
	c->enc = (uint8_t)v[0];
	if (c->enc == COLL_ENC_INLINE) {
		uint32_t n;
		if (vl < INLINE_HDR)
			return COLL_ECORRUPT;
		c->flags = (uint8_t)v[1];
		if (!coll_ebuf_check(v + INLINE_HDR, vl - INLINE_HDR, c->vals, &n) ||
		    n != get32(v + 4))
			return COLL_ECORRUPT;
		return ebuf_set(&c->in, v + INLINE_HDR, vl - INLINE_HDR, n) ? CC_EINTERNAL : CC_OK;
	}
	if (c->enc != COLL_ENC_BUCKETED || vl != COLL_ROOT_BUCKETED_LEN)
		return COLL_ECORRUPT;
	c->flags = (uint8_t)v[1];
	c->level = (uint8_t)v[2];
	c->slot = get16(v + 4);
	c->split = get32(v + 8);
	c->gen = get64(v + 16);
	c->count = get64(v + 24);
	if (c->level > 31 || c->split >= (1u << c->level) || !c->gen)
		return COLL_ECORRUPT;
	return CC_OK;
}

void coll_init(struct coll *c, struct txn *t, const char *key, size_t klen, uint8_t type,
	       bool vals)
{
	memset(c, 0, sizeof(*c));
	c->t = t;
	c->key = key;
	c->klen = klen;
	c->type = type;
	c->vals = vals;
	c->enc = COLL_ENC_INLINE;
	c->big_entries = 512; /* Redis's defaults */
	c->big_value = 64;
}

int coll_open(struct txn *t, const char *key, size_t klen, uint8_t type, bool vals,
	      struct coll *c)
{
	coll_init(c, t, key, klen, type, vals);
	const char *v;
	size_t vl;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(t, key, klen, &v, &vl, &found, &m);
	if (rc)
		return rc;
	if (!found)
		return CC_OK;
	if (m.type != type)
		return COLL_EWRONGTYPE;
	c->exists = true;
	c->expire_ms = m.expire_ms;
	return parse_root(c, v, vl);
}

void coll_set_limits(struct coll *c, uint64_t entries, uint64_t value)
{
	c->big_entries = entries;
	c->big_value = value;
}

void coll_free(struct coll *c)
{
	free(c->in.p);
	for (int i = 0; i < c->nbk; i++)
		free(c->bk[i].b.p);
	free(c->bk);
	memset(c, 0, sizeof(*c));
}

/* The bucket `id` as loaded in this transaction; read when first met
 * unless `fresh` (a bucket that cannot exist yet: made empty). */
static int bucket_get(struct coll *c, uint32_t id, bool fresh, struct coll_bucket **out)
{
	for (int i = 0; i < c->nbk; i++)
		if (c->bk[i].id == id) {
			*out = &c->bk[i];
			return CC_OK;
		}
	if (c->nbk == c->bkcap) {
		int cap = c->bkcap ? c->bkcap * 2 : 8;
		struct coll_bucket *p = realloc(c->bk, (size_t)cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		c->bk = p;
		c->bkcap = cap;
	}
	struct coll_bucket *b = &c->bk[c->nbk];
	memset(b, 0, sizeof(*b));
	b->id = id;
	if (!fresh) {
		char k[PL_PART_KEYLEN];
		const char *v;
		size_t vl;
		bool found;
		uint32_t n;
		coll_part_key(k, c->slot, c->gen, id);
		int rc = txn_get(c->t, k, sizeof(k), &v, &vl, &found);
		if (rc)
			return rc;
		if (found) {
			if (!coll_ebuf_check(v, vl, c->vals, &n))
				return COLL_ECORRUPT;
			if (ebuf_set(&b->b, v, vl, n))
				return CC_EINTERNAL;
		}
	}
	c->nbk++;
	*out = b;
	return CC_OK;
}

/* The bucket of field f, loaded. */
static int bucket_for(struct coll *c, const char *f, size_t fl, struct coll_bucket **out)
{
	return bucket_get(c, bucket_of(c, st_hash(f, fl)), false, out);
}

int coll_get(struct coll *c, const char *f, size_t fl, const char **v, size_t *vl, bool *found)
{
	*found = false;
	*v = NULL;
	*vl = 0;
	struct coll_ebuf *b = &c->in;
	struct coll_elem e;
	if (c->enc == COLL_ENC_BUCKETED) {
		struct coll_bucket *bk;
		int rc = bucket_for(c, f, fl, &bk);
		if (rc)
			return rc;
		b = &bk->b;
	}
	*found = ebuf_find(b, c->vals, f, fl, &e);
	*v = *found ? e.v : NULL;
	*vl = *found ? e.vl : 0;
	return CC_OK;
}

/* Is s the text of an integer Redis's intset would hold? */
static bool intset_member(const char *s, size_t l)
{
	if (l == 0 || l > 20)
		return false;
	size_t i = s[0] == '-';
	if (i == l || (s[i] == '0' && l > i + 1) || (i && s[1] == '0'))
		return false;
	for (size_t k = i; k < l; k++)
		if (s[k] < '0' || s[k] > '9')
			return false;
	if (l - i == 19 || l - i == 20) { /* within int64? */
		const char *lim = i ? "9223372036854775808" : "9223372036854775807";
		if (l - i == 20 || memcmp(s + i, lim, 19) > 0)
			return false;
	}
	return true;
}

/* Redis's conversion to a hashtable, one way (OBJECT ENCODING). */
static void note_big(struct coll *c, const char *f, size_t fl, size_t vl)
{
	if (c->type == TXN_T_HASH) {
		if (fl > c->big_value || vl > c->big_value || coll_len(c) > c->big_entries)
			c->flags |= COLL_F_BIG;
	} else if (c->type == TXN_T_SET) {
		if (!intset_member(f, fl) || coll_len(c) > c->big_entries)
			c->flags |= COLL_F_BIG;
	} else if (c->type == TXN_T_ZSET) {
		if (fl > c->big_value || coll_len(c) > c->big_entries)
			c->flags |= COLL_F_BIG;
	}
}

static int make_bucketed(struct coll *c);
static int split_one(struct coll *c);

int coll_put(struct coll *c, const char *f, size_t fl, const char *v, size_t vl, bool *added)
{
	struct coll_elem e;
	int rc;
	*added = false; /* also when it fails (an abort): callers add it up */
	if (!c->vals) {
		/* A set's member already there: nothing to write (and no event). */
		const char *pv;
		size_t pvl;
		bool present;
		if ((rc = coll_get(c, f, fl, &pv, &pvl, &present)))
			return rc;
		if (present) {
			*added = false;
			return CC_OK;
		}
	}
	if (c->enc == COLL_ENC_INLINE) {
		bool had = ebuf_find(&c->in, c->vals, f, fl, &e);
		if (ebuf_put(&c->in, c->vals, had ? &e : NULL, f, fl, v, vl))
			return CC_EINTERNAL;
		*added = !had;
		c->dirty = true;
		note_big(c, f, fl, vl);
		if (c->in.n > COLL_INLINE_MAX || INLINE_HDR + c->in.len > COLL_INLINE_BYTES)
			return make_bucketed(c);
		return CC_OK;
	}
	struct coll_bucket *bk;
	if ((rc = bucket_for(c, f, fl, &bk)))
		return rc;
	bool had = ebuf_find(&bk->b, c->vals, f, fl, &e);
	if (ebuf_put(&bk->b, c->vals, had ? &e : NULL, f, fl, v, vl))
		return CC_EINTERNAL;
	bk->dirty = true;
	*added = !had;
	if (!had)
		c->count++;
	uint8_t flags = c->flags;
	note_big(c, f, fl, vl);
	if (had && flags == c->flags)
		return CC_OK; /* the root is unchanged: only read */
	c->dirty = true;
	if (c->count > (uint64_t)COLL_LOAD * nbuckets(c) && nbuckets(c) < (1ull << 31))
		return split_one(c);
	return CC_OK;
}

int coll_remove(struct coll *c, const char *f, size_t fl, bool *removed)
{
	*removed = false;
	struct coll_ebuf *b = &c->in;
	struct coll_bucket *bk = NULL;
	struct coll_elem e;
	if (c->enc == COLL_ENC_BUCKETED) {
		int rc = bucket_for(c, f, fl, &bk);
		if (rc)
			return rc;
		b = &bk->b;
	}
	*removed = ebuf_find(b, c->vals, f, fl, &e);
	if (!*removed)
		return CC_OK;
	ebuf_cut(b, &e);
	c->dirty = true;
	if (bk) {
		bk->dirty = true;
		c->count--;
	}
	return CC_OK;
}

/*
 * Inline to bucketed: a new gen and slot, a level with about COLL_LOAD
 * elements or fewer per bucket, every element into its bucket (buckets
 * that cannot exist yet: not read), the owner written. The root is
 * written by coll_save.
 */
static int make_bucketed(struct coll *c)
{
	uint64_t n = c->in.n;
	uint8_t level = 0;
	while (((uint64_t)COLL_LOAD << level) < n)
		level++;
	c->enc = COLL_ENC_BUCKETED;
	c->level = level;
	c->split = 0;
	c->gen = txn_unique(c->t);
	c->slot = (uint16_t)pl_keyslot(c->key, c->klen);
	c->count = n;
	c->dirty = true;
	struct coll_ebuf in = c->in;
	memset(&c->in, 0, sizeof(c->in));
	int rc = CC_OK;
	for (uint32_t b = 0; b < (1u << level) && rc == CC_OK; b++) {
		struct coll_bucket *bk;
		rc = bucket_get(c, b, true, &bk);
		if (rc == CC_OK)
			bk->dirty = true; /* written even if empty: nothing to delete */
	}
	size_t off = 0;
	struct coll_elem e;
	while (rc == CC_OK && coll_ebuf_next(&in, c->vals, &off, &e)) {
		struct coll_bucket *bk;
		rc = bucket_for(c, e.f, e.fl, &bk);
		if (rc == CC_OK && ebuf_put(&bk->b, c->vals, NULL, e.f, e.fl, e.v, e.vl))
			rc = CC_EINTERNAL;
	}
	free(in.p);
	if (rc)
		return rc;
	char ok[PL_PART_KEYLEN];
	const struct txn_meta pm = { .type = TXN_T_PART };
	coll_part_key(ok, c->slot, c->gen, COLL_OWNER_ID);
	return txn_set_meta(c->t, ok, sizeof(ok), c->key, c->klen, &pm);
}

/* Split bucket `split` into itself and split + 2^level; advance. */
static int split_one(struct coll *c)
{
	uint32_t from = c->split, to = from + (1u << c->level);
	struct coll_bucket *a, *b;
	int rc = bucket_get(c, from, false, &a);
	if (rc == CC_OK)
		rc = bucket_get(c, to, true, &b);
	if (rc)
		return rc;
	a = NULL; /* bucket_get may have moved the array */
	for (int i = 0; i < c->nbk; i++)
		if (c->bk[i].id == from)
			a = &c->bk[i];
	struct coll_ebuf old = a->b;
	memset(&a->b, 0, sizeof(a->b));
	a->dirty = b->dirty = true;
	const uint64_t mask = ((uint64_t)2 << c->level) - 1;
	size_t off = 0;
	struct coll_elem e;
	while (coll_ebuf_next(&old, c->vals, &off, &e)) {
		struct coll_bucket *d = (st_hash(e.f, e.fl) & mask) == from ? a : b;
		if (ebuf_put(&d->b, c->vals, NULL, e.f, e.fl, e.v, e.vl)) {
			free(old.p);
			return CC_EINTERNAL;
		}
	}
	free(old.p);
	if (++c->split == (1u << c->level)) {
		c->level++;
		c->split = 0;
	}
	c->dirty = true;
	return CC_OK;
}

int coll_foreach(struct coll *c, coll_elem_fn fn, void *arg)
{
	uint64_t cursor = 0;
	do {
		int rc = coll_scan(c, &cursor, UINT64_MAX, fn, arg);
		if (rc)
			return rc > 0 && rc != CC_ABORT ? CC_OK : rc;
	} while (cursor);
	return CC_OK;
}

/* Give every element of b to fn; 1 when fn stopped. */
static int give(const struct coll_ebuf *b, bool vals, coll_elem_fn fn, void *arg, uint64_t *n)
{
	size_t off = 0;
	struct coll_elem e;
	while (coll_ebuf_next(b, vals, &off, &e)) {
		++*n;
		if (fn(arg, &e))
			return 1;
	}
	return 0;
}

int coll_scan(struct coll *c, uint64_t *cursor, uint64_t count, coll_elem_fn fn, void *arg)
{
	uint64_t n = 0;
	if (c->enc == COLL_ENC_INLINE) {
		*cursor = 0;
		give(&c->in, c->vals, fn, arg, &n);
		return CC_OK;
	}
	uint64_t b = *cursor, nb = nbuckets(c);
	while (b < nb && n < count) {
		struct coll_bucket *bk;
		int rc = bucket_get(c, (uint32_t)b, false, &bk);
		if (rc)
			return rc;
		b++;
		if (give(&bk->b, c->vals, fn, arg, &n)) {
			*cursor = b < nb ? b : 0;
			return 2; /* stopped (coll_foreach) */
		}
	}
	*cursor = b < nb ? b : 0;
	return CC_OK;
}

static int collect_one(void *arg, const struct coll_elem *e)
{
	struct coll_elems *a = arg;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct coll_elem *p = realloc(a->e, cap * sizeof(*p));
		if (!p)
			return 1;
		a->e = p;
		a->cap = cap;
	}
	a->e[a->n++] = *e;
	return 0;
}

int coll_collect(struct coll *c, struct coll_elems *a)
{
	int rc = coll_foreach(c, collect_one, a);
	if (rc == 0 && a->n != coll_len(c))
		rc = a->n < a->cap || a->n == 0 ? COLL_ECORRUPT : CC_EINTERNAL;
	return rc;
}

int coll_random(struct coll *c, uint64_t rnd, struct coll_elem *e)
{
	const struct coll_ebuf *b = &c->in;
	if (c->enc == COLL_ENC_BUCKETED) {
		uint64_t nb = nbuckets(c);
		/* Buckets hold COLL_LOAD / 2 or more on average: a random one
		 * is rarely empty; after a few misses, walk every bucket on from
		 * the last one tried (a set that SPOP emptied down to one bucket
		 * must still find it). The ids come from the LCG's high bits:
		 * its low bits have short periods. */
		const struct coll_ebuf *pick = NULL;
		uint64_t id = 0;
		for (uint64_t tries = 0; tries < nb + 8 && !pick; tries++) {
			rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
			id = tries < 8 ? (rnd >> 33) % nb : (id + 1) % nb;
			struct coll_bucket *bk;
			int rc = bucket_get(c, (uint32_t)id, false, &bk);
			if (rc)
				return rc;
			if (bk->b.n)
				pick = &bk->b;
		}
		if (!pick)
			return COLL_ECORRUPT; /* count says not empty */
		b = pick;
	}
	uint32_t k = (uint32_t)((rnd >> 17) % b->n);
	size_t off = 0;
	for (uint32_t i = 0; i <= k; i++)
		if (!coll_ebuf_next(b, c->vals, &off, e))
			return COLL_ECORRUPT;
	return CC_OK;
}

int coll_usage(struct coll *c, uint64_t samples, uint64_t *bytes)
{
	uint64_t nb = nbuckets(c), sum = 0;
	*bytes = 0;
	if (c->enc != COLL_ENC_BUCKETED || nb == 0)
		return CC_OK;
	uint64_t k = samples == 0 || samples > nb ? nb : samples;
	for (uint64_t i = 0; i < k; i++) {
		/* Spread over the ids: those below the split point hold half. */
		struct coll_bucket *bk;
		int rc = bucket_get(c, (uint32_t)(i * nb / k), false, &bk);
		if (rc)
			return rc;
		if (bk->b.n)
			sum += st_item_bytes(PL_PART_KEYLEN, (uint32_t)bk->b.len);
	}
	char ok[PL_PART_KEYLEN];
	const char *v;
	size_t vl;
	bool found;
	coll_part_key(ok, c->slot, c->gen, COLL_OWNER_ID);
	int rc = txn_get(c->t, ok, sizeof(ok), &v, &vl, &found);
	if (rc)
		return rc;
	*bytes = sum * nb / k + (found ? st_item_bytes(sizeof(ok), (uint32_t)vl) : 0);
	return CC_OK;
}

static int write_root(struct coll *c)
{
	const struct txn_meta m = { .type = c->type, .expire_ms = c->expire_ms };
	if (c->enc == COLL_ENC_INLINE) {
		size_t len = INLINE_HDR + c->in.len;
		char small[512], *v = len <= sizeof(small) ? small : malloc(len);
		if (!v)
			return CC_EINTERNAL;
		memset(v, 0, INLINE_HDR);
		v[0] = COLL_ENC_INLINE;
		v[1] = (char)c->flags;
		put32(v + 4, c->in.n);
		if (c->in.len)
			memcpy(v + INLINE_HDR, c->in.p, c->in.len);
		int rc = txn_set_meta(c->t, c->key, c->klen, v, len, &m);
		if (v != small)
			free(v);
		return rc;
	}
	char v[COLL_ROOT_BUCKETED_LEN] = { 0 };
	v[0] = COLL_ENC_BUCKETED;
	v[1] = (char)c->flags;
	v[2] = (char)c->level;
	put16(v + 4, c->slot);
	put32(v + 8, c->split);
	put64(v + 16, c->gen);
	put64(v + 24, c->count);
	return txn_set_meta(c->t, c->key, c->klen, v, sizeof(v), &m);
}

int coll_save(struct coll *c)
{
	int rc;
	const struct txn_meta pm = { .type = TXN_T_PART };
	for (int i = 0; i < c->nbk; i++) {
		struct coll_bucket *bk = &c->bk[i];
		if (!bk->dirty)
			continue;
		char k[PL_PART_KEYLEN];
		bool existed;
		coll_part_key(k, c->slot, c->gen, bk->id);
		rc = bk->b.n ? txn_set_meta(c->t, k, sizeof(k), bk->b.p, bk->b.len, &pm)
			     : txn_del(c->t, k, sizeof(k), &existed);
		if (rc)
			return rc;
		bk->dirty = false;
	}
	if (!c->dirty)
		return CC_OK;
	c->dirty = false;
	if (coll_len(c) == 0) {
		bool existed;
		if (c->enc == COLL_ENC_BUCKETED) {
			char ok[PL_PART_KEYLEN];
			coll_part_key(ok, c->slot, c->gen, COLL_OWNER_ID);
			if ((rc = txn_del(c->t, ok, sizeof(ok), &existed)))
				return rc;
		}
		return c->exists ? txn_del(c->t, c->key, c->klen, &existed) : CC_OK;
	}
	if ((rc = write_root(c)))
		return rc;
	c->exists = true;
	return CC_OK;
}

/* ---- COPY, RENAME ---- */

int coll_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		    char **nv, size_t *nvl)
{
	if (vl && (uint8_t)v[0] == LIST_ENC_CHUNKED)
		return list_copy_parts(t, v, vl, to, tolen, nv, nvl);
	struct coll c = { .t = t, .vals = false };
	int rc = parse_root(&c, v, vl);
	if (rc)
		return rc;
	if (c.enc != COLL_ENC_BUCKETED)
		return COLL_ECORRUPT;
	const uint16_t oslot = c.slot;
	const uint64_t ogen = c.gen, nb = nbuckets(&c);
	const uint16_t slot = (uint16_t)pl_keyslot(to, tolen);
	const uint64_t gen = txn_unique(t);
	const struct txn_meta pm = { .type = TXN_T_PART };
	for (uint64_t b = 0; b < nb; b++) {
		char ok[PL_PART_KEYLEN], nk[PL_PART_KEYLEN];
		const char *pv;
		size_t pl;
		bool found;
		coll_part_key(ok, oslot, ogen, (uint32_t)b);
		if ((rc = txn_get(t, ok, sizeof(ok), &pv, &pl, &found)))
			return rc;
		if (!found)
			continue;
		coll_part_key(nk, slot, gen, (uint32_t)b);
		if ((rc = txn_set_meta(t, nk, sizeof(nk), pv, pl, &pm)))
			return rc;
	}
	char owner[PL_PART_KEYLEN];
	coll_part_key(owner, slot, gen, COLL_OWNER_ID);
	if ((rc = txn_set_meta(t, owner, sizeof(owner), to, tolen, &pm)))
		return rc;
	char *r = malloc(vl);
	if (!r)
		return CC_EINTERNAL;
	memcpy(r, v, vl);
	put16(r + 4, slot);
	put64(r + 16, gen);
	*nv = r;
	*nvl = vl;
	return CC_OK;
}

int coll_rename_owner(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen)
{
	uint64_t gen;
	uint16_t slot;
	if (list_root_gen(v, vl, &gen, &slot)) { /* a chunked list */
		char lk[PL_PART_KEYLEN];
		const struct txn_meta lm = { .type = TXN_T_PART };
		coll_part_key(lk, slot, gen, COLL_OWNER_ID);
		return txn_set_meta(t, lk, sizeof(lk), to, tolen, &lm);
	}
	if (vl != COLL_ROOT_BUCKETED_LEN || (uint8_t)v[0] != COLL_ENC_BUCKETED)
		return CC_OK; /* inline: nothing but the root */
	char ok[PL_PART_KEYLEN];
	const struct txn_meta pm = { .type = TXN_T_PART };
	coll_part_key(ok, get16(v + 4), get64(v + 16), COLL_OWNER_ID);
	return txn_set_meta(t, ok, sizeof(ok), to, tolen, &pm);
}

const char *coll_encoding_of(uint8_t type, const char *v, size_t vl)
{
	struct coll c = { .type = type, .flags = vl >= 2 ? (uint8_t)v[1] : 0 };
	return coll_redis_encoding(&c);
}

const char *coll_redis_encoding(const struct coll *c)
{
	if (c->type == TXN_T_HASH)
		return (c->flags & COLL_F_BIG) ? "hashtable" : "listpack";
	if (c->type == TXN_T_SET)
		return (c->flags & COLL_F_BIG) ? "hashtable" : "intset";
	if (c->type == TXN_T_LIST)
		return "quicklist"; /* Redis 7.0's only list encoding */
	if (c->type == TXN_T_ZSET)
		return (c->flags & COLL_F_BIG) ? "skiplist" : "listpack";
	return "unknown";
}

/*
 * zset.c: a sorted set's dict and order (zset.h has the layout, why, and
 * the invariants cited here).
 */
#include "server/zset.h"

#include <stdlib.h>
#include <string.h>

#include "cc/exec.h"
#include "cc/txn.h"
#include "placement/placement.h"
#include "server/bytes.h"
#include "storage/st.h"

void zs_score_put(char out[8], double s)
{
	uint64_t b;
	memcpy(&b, &s, 8);
	for (int i = 0; i < 8; i++)
		out[i] = (char)(b >> (8 * i));
}

double zs_score_get(const char *p)
{
	uint64_t b = 0;
	for (int i = 7; i >= 0; i--)
		b = b << 8 | (uint8_t)p[i];
	double s;
	memcpy(&s, &b, 8);
	return s;
}

/* Bytes of one encoded element (score, len, member). */
static size_t elem_bytes(size_t ml)
{
	char tmp[10];
	return 8 + vput(tmp, ml) + ml;
}

static size_t elem_write(char *p, double s, const char *m, size_t ml)
{
	zs_score_put(p, s);
	size_t k = 8 + vput(p + 8, ml);
	if (ml)
		memcpy(p + k, m, ml);
	return k + ml;
}

/* The element at p (before end); its length, 0 when malformed. */
static size_t elem_parse(const char *p, const char *end, struct zs_elem *e)
{
	uint64_t l;
	if (end - p < 9)
		return 0;
	size_t k = vget(p + 8, end, &l);
	if (!k || l > (uint64_t)(end - p - 8 - (ptrdiff_t)k))
		return 0;
	e->score = zs_score_get(p);
	e->m = p + 8 + k;
	e->ml = (size_t)l;
	return 8 + k + (size_t)l;
}

/* (score, member) order: Redis's skiplist order (scores, then bytes). */
static int zcmp(double s1, const char *m1, size_t l1, double s2, const char *m2, size_t l2)
{
	if (s1 < s2)
		return -1;
	if (s1 > s2)
		return 1;
	size_t l = l1 < l2 ? l1 : l2;
	int r = l ? memcmp(m1, m2, l) : 0;
	if (r)
		return r;
	return l1 < l2 ? -1 : l1 > l2;
}

/* ---- chunks and leaves in memory ---- */

/* An element as a bound: a chunk's or a leaf's first. */
struct zkey {
	double s;
	char *m;
	size_t ml;
};

struct zs_chunk {
	uint32_t k;       /* part id - ZS_CHUNK_BASE */
	uint32_t n;       /* elements (the leaf's entry) */
	struct zkey first;
	bool loaded, dirty;
	char *p; /* elements, when loaded */
	size_t len, cap;
	uint32_t *off; /* each element's offset in p, when loaded */
	uint32_t offcap;
};

struct zs_leaf {
	uint32_t id;      /* part id - ZS_LEAF_BASE */
	uint32_t n;       /* elements (the top's entry) */
	struct zkey first;
	bool loaded, dirty;
	struct zs_chunk *ch; /* when loaded */
	int nch, chcap;
};

static int reserve(char **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	char *q = realloc(*p, c);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int key_set(struct zkey *k, double s, const char *m, size_t ml)
{
	char *f = malloc(ml ? ml : 1);
	if (!f)
		return -1;
	if (ml)
		memcpy(f, m, ml);
	free(k->m);
	k->m = f;
	k->ml = ml;
	k->s = s;
	return 0;
}

static int key_cmp(const struct zkey *k, double s, const char *m, size_t ml)
{
	return zcmp(k->s, k->m, k->ml, s, m, ml);
}

static void chunk_free(struct zs_chunk *c)
{
	free(c->first.m);
	free(c->p);
	free(c->off);
}

static void leaf_free(struct zs_leaf *l)
{
	for (int i = 0; i < l->nch; i++)
		chunk_free(&l->ch[i]);
	free(l->ch);
	free(l->first.m);
}

/* Parse a loaded chunk's bytes: offsets, count, first element. */
static int chunk_reindex(struct zs_chunk *c)
{
	const char *end = c->p + c->len;
	uint32_t n = 0;
	struct zs_elem e;
	for (size_t at = 0; at < c->len;) {
		size_t k = elem_parse(c->p + at, end, &e);
		if (!k)
			return COLL_ECORRUPT;
		if (n == c->offcap) {
			uint32_t cap = c->offcap ? c->offcap * 2 : 64;
			uint32_t *o = realloc(c->off, cap * sizeof(*o));
			if (!o)
				return CC_EINTERNAL;
			c->off = o;
			c->offcap = cap;
		}
		c->off[n++] = (uint32_t)at;
		at += k;
	}
	c->n = n;
	if (n) {
		elem_parse(c->p, end, &e);
		if (key_set(&c->first, e.score, e.m, e.ml))
			return CC_EINTERNAL;
	}
	return CC_OK;
}

static void elem_at(const struct zs_chunk *c, uint32_t i, struct zs_elem *e)
{
	elem_parse(c->p + c->off[i], c->p + c->len, e);
}

static size_t elem_end(const struct zs_chunk *c, uint32_t i)
{
	return i + 1 < c->n ? c->off[i + 1] : c->len;
}

/* ---- index entries: u32 id | u32 count | first element ---- */

static size_t entry_bytes(const struct zkey *k)
{
	return 8 + elem_bytes(k->ml);
}

static size_t entry_put(char *p, uint32_t id, uint32_t n, const struct zkey *k)
{
	put32(p, id);
	put32(p + 4, n);
	return 8 + elem_write(p + 8, k->s, k->m, k->ml);
}

/* One entry at p (before end): its length, 0 when malformed. */
static size_t entry_get(const char *p, const char *end, uint32_t *id, uint32_t *n,
			struct zs_elem *e)
{
	if (end - p < 8)
		return 0;
	size_t k = elem_parse(p + 8, end, e);
	if (!k)
		return 0;
	*id = get32(p);
	*n = get32(p + 4);
	return 8 + k;
}

static size_t leaf_bytes(const struct zs_leaf *l)
{
	size_t b = 4;
	for (int i = 0; i < l->nch; i++)
		b += entry_bytes(&l->ch[i].first);
	return b;
}

/* ---- the zset's arrays ---- */

static void part_key(const struct zset *z, uint32_t id, char out[PL_PART_KEYLEN])
{
	coll_part_key(out, z->d.slot, z->d.gen, id);
}

static int gone_add(struct zset *z, uint32_t id)
{
	if (!z->chunked)
		return CC_OK;
	if (z->ngone == z->gonecap) {
		int cap = z->gonecap ? z->gonecap * 2 : 8;
		uint32_t *g = realloc(z->gone, (size_t)cap * sizeof(*g));
		if (!g)
			return CC_EINTERNAL;
		z->gone = g;
		z->gonecap = cap;
	}
	z->gone[z->ngone++] = id;
	return CC_OK;
}

/* A new empty leaf at position i (loaded, dirty); a new empty chunk at
 * position i of leaf l (loaded, dirty). Both may move the arrays they
 * grow: callers take their pointers again. */
static int leaf_new(struct zset *z, int i)
{
	if (z->nlf == z->lfcap) {
		int cap = z->lfcap ? z->lfcap * 2 : 4;
		struct zs_leaf *p = realloc(z->lf, (size_t)cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		z->lf = p;
		z->lfcap = cap;
	}
	memmove(&z->lf[i + 1], &z->lf[i], (size_t)(z->nlf - i) * sizeof(*z->lf));
	z->nlf++;
	struct zs_leaf *l = &z->lf[i];
	memset(l, 0, sizeof(*l));
	l->id = z->next_leaf++;
	l->loaded = l->dirty = true;
	z->idx_dirty = true;
	return CC_OK;
}

static int chunk_new(struct zset *z, struct zs_leaf *l, int i)
{
	if (l->nch == l->chcap) {
		int cap = l->chcap ? l->chcap * 2 : 8;
		struct zs_chunk *p = realloc(l->ch, (size_t)cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		l->ch = p;
		l->chcap = cap;
	}
	memmove(&l->ch[i + 1], &l->ch[i], (size_t)(l->nch - i) * sizeof(*l->ch));
	l->nch++;
	struct zs_chunk *c = &l->ch[i];
	memset(c, 0, sizeof(*c));
	c->k = z->next_k++;
	c->loaded = c->dirty = true;
	l->dirty = true;
	z->idx_dirty = true;
	return CC_OK;
}

static int chunk_drop(struct zset *z, struct zs_leaf *l, int i)
{
	if (gone_add(z, ZS_CHUNK_BASE + l->ch[i].k))
		return CC_EINTERNAL;
	chunk_free(&l->ch[i]);
	memmove(&l->ch[i], &l->ch[i + 1], (size_t)(l->nch - i - 1) * sizeof(*l->ch));
	l->nch--;
	l->dirty = true;
	z->idx_dirty = true;
	return CC_OK;
}

static int leaf_drop(struct zset *z, int i)
{
	if (gone_add(z, ZS_LEAF_BASE + z->lf[i].id))
		return CC_EINTERNAL;
	leaf_free(&z->lf[i]);
	memmove(&z->lf[i], &z->lf[i + 1], (size_t)(z->nlf - i - 1) * sizeof(*z->lf));
	z->nlf--;
	z->idx_dirty = true;
	return CC_OK;
}

/* ---- loading ---- */

static int parse_leaf(struct zs_leaf *l, const char *v, size_t vl)
{
	const char *p = v + 4, *end = v + vl;
	if (vl < 4)
		return COLL_ECORRUPT;
	uint32_t n = get32(v);
	l->ch = calloc(n ? n : 1, sizeof(*l->ch));
	if (!l->ch)
		return CC_EINTERNAL;
	l->chcap = (int)(n ? n : 1);
	for (uint32_t i = 0; i < n; i++) {
		struct zs_chunk *c = &l->ch[l->nch];
		struct zs_elem e;
		size_t k = entry_get(p, end, &c->k, &c->n, &e);
		if (!k)
			return COLL_ECORRUPT;
		l->nch++;
		if (key_set(&c->first, e.score, e.m, e.ml))
			return CC_EINTERNAL;
		p += k;
	}
	return p == end && l->nch ? CC_OK : COLL_ECORRUPT; /* invariant (3) */
}

static int leaf_load(struct zset *z, int i)
{
	struct zs_leaf *l = &z->lf[i];
	if (l->loaded)
		return CC_OK;
	char k[PL_PART_KEYLEN];
	const char *v;
	size_t vl;
	bool found;
	part_key(z, ZS_LEAF_BASE + l->id, k);
	int rc = txn_get(z->d.t, k, sizeof(k), &v, &vl, &found);
	if (rc)
		return rc;
	if (!found)
		return COLL_ECORRUPT;
	if ((rc = parse_leaf(l, v, vl)))
		return rc;
	l->loaded = true;
	return CC_OK;
}

static int chunk_load(struct zset *z, struct zs_leaf *l, int i)
{
	struct zs_chunk *c = &l->ch[i];
	if (c->loaded)
		return CC_OK;
	char k[PL_PART_KEYLEN];
	const char *v;
	size_t vl;
	bool found;
	part_key(z, ZS_CHUNK_BASE + c->k, k);
	int rc = txn_get(z->d.t, k, sizeof(k), &v, &vl, &found);
	if (rc)
		return rc;
	if (!found)
		return COLL_ECORRUPT; /* invariant (3) */
	if (reserve(&c->p, &c->cap, vl ? vl : 1))
		return CC_EINTERNAL;
	memcpy(c->p, v, vl);
	c->len = vl;
	c->loaded = true;
	uint32_t n = c->n;
	if ((rc = chunk_reindex(c)))
		return rc;
	return c->n == n ? CC_OK : COLL_ECORRUPT;
}

static int parse_top(struct zset *z, const char *v, size_t vl)
{
	const char *p = v + 12, *end = v + vl;
	if (vl < 12)
		return COLL_ECORRUPT;
	uint32_t n = get32(v);
	z->next_k = get32(v + 4);
	z->next_leaf = get32(v + 8);
	z->lf = calloc(n ? n : 1, sizeof(*z->lf));
	if (!z->lf)
		return CC_EINTERNAL;
	z->lfcap = (int)(n ? n : 1);
	for (uint32_t i = 0; i < n; i++) {
		struct zs_leaf *l = &z->lf[z->nlf];
		struct zs_elem e;
		size_t k = entry_get(p, end, &l->id, &l->n, &e);
		if (!k)
			return COLL_ECORRUPT;
		z->nlf++;
		if (key_set(&l->first, e.score, e.m, e.ml))
			return CC_EINTERNAL;
		p += k;
	}
	return p == end ? CC_OK : COLL_ECORRUPT;
}

struct view {
	struct zs_elem *e;
	size_t n, cap;
};

static int view_add(void *arg, const struct coll_elem *ce)
{
	struct view *v = arg;
	if (ce->vl != 8)
		return 1;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		struct zs_elem *p = realloc(v->e, cap * sizeof(*p));
		if (!p)
			return 1;
		v->e = p;
		v->cap = cap;
	}
	v->e[v->n++] = (struct zs_elem){ .score = zs_score_get(ce->v), .m = ce->f, .ml = ce->fl };
	return 0;
}

static int view_cmp(const void *a, const void *b)
{
	const struct zs_elem *x = a, *y = b;
	return zcmp(x->score, x->m, x->ml, y->score, y->m, y->ml);
}

/* A leaf's count and first element from its chunks (after a change). */
static int leaf_refresh(struct zs_leaf *l)
{
	uint64_t n = 0;
	for (int i = 0; i < l->nch; i++)
		n += l->ch[i].n;
	l->n = (uint32_t)n;
	if (l->nch && key_set(&l->first, l->ch[0].first.s, l->ch[0].first.m, l->ch[0].first.ml))
		return CC_EINTERNAL;
	return CC_OK;
}

/*
 * The order rebuilt from the dict: chunks of up to cmax bytes, leaves of
 * up to lmax bytes of entries. The view of an inline zset (one leaf, one
 * chunk: no limits), or the parts of one just bucketed.
 */
static int build_from_dict(struct zset *z, size_t cmax, size_t lmax)
{
	struct view v = { 0 };
	int rc = coll_foreach(&z->d, view_add, &v);
	if (rc == 0 && v.n != zs_len(z))
		rc = COLL_ECORRUPT;
	if (rc == 0)
		qsort(v.e, v.n, sizeof(*v.e), view_cmp);
	struct zs_leaf *l = NULL;
	struct zs_chunk *c = NULL;
	for (size_t i = 0; rc == 0 && i < v.n; i++) {
		size_t sz = elem_bytes(v.e[i].ml);
		if (c && c->len + sz > cmax && c->len) {
			if ((rc = chunk_reindex(c)))
				break;
			c = NULL;
			if (leaf_bytes(l) > lmax)
				l = NULL;
		}
		if (!l) {
			if ((rc = leaf_new(z, z->nlf)))
				break;
			l = &z->lf[z->nlf - 1];
		}
		if (!c) {
			if ((rc = chunk_new(z, l, l->nch)))
				break;
			c = &l->ch[l->nch - 1];
		}
		if (reserve(&c->p, &c->cap, c->len + sz)) {
			rc = CC_EINTERNAL;
			break;
		}
		c->len += elem_write(c->p + c->len, v.e[i].score, v.e[i].m, v.e[i].ml);
	}
	free(v.e);
	if (rc == 0 && c)
		rc = chunk_reindex(c);
	for (int i = 0; rc == 0 && i < z->nlf; i++)
		rc = leaf_refresh(&z->lf[i]);
	return rc;
}

static int order_load(struct zset *z)
{
	if (z->ordered)
		return CC_OK;
	int rc;
	if (z->chunked) {
		char k[PL_PART_KEYLEN];
		const char *v;
		size_t vl;
		bool found;
		part_key(z, ZS_INDEX_ID, k);
		if ((rc = txn_get(z->d.t, k, sizeof(k), &v, &vl, &found)))
			return rc;
		if (!found)
			return zs_len(z) ? COLL_ECORRUPT : CC_OK; /* invariant (2) */
		rc = parse_top(z, v, vl);
	} else {
		rc = build_from_dict(z, SIZE_MAX, SIZE_MAX);
	}
	z->idx_dirty = false;
	if (rc == 0)
		z->ordered = true;
	return rc;
}

/* The last leaf (or chunk of l) whose first element is not after (s, m),
 * or the first: where (s, m) belongs (invariant (3)). */
static int leaf_for(const struct zset *z, double s, const char *m, size_t ml)
{
	int lo = 1, hi = z->nlf - 1, ans = 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (key_cmp(&z->lf[mid].first, s, m, ml) <= 0) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return ans;
}

static int chunk_for(const struct zs_leaf *l, double s, const char *m, size_t ml)
{
	int lo = 1, hi = l->nch - 1, ans = 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (key_cmp(&l->ch[mid].first, s, m, ml) <= 0) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return ans;
}

/* The first element of c not before (s, m). */
static uint32_t lower_bound(const struct zs_chunk *c, double s, const char *m, size_t ml)
{
	uint32_t lo = 0, hi = c->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		struct zs_elem e;
		elem_at(c, mid, &e);
		if (zcmp(e.score, e.m, e.ml, s, m, ml) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- changes ---- */

/* Split chunk i of leaf l in two halves. */
static int chunk_split(struct zset *z, struct zs_leaf *l, int i)
{
	int rc = chunk_new(z, l, i + 1);
	if (rc)
		return rc;
	struct zs_chunk *c = &l->ch[i], *nc = &l->ch[i + 1];
	size_t at = c->off[c->n / 2];
	if (reserve(&nc->p, &nc->cap, c->len - at))
		return CC_EINTERNAL;
	memcpy(nc->p, c->p + at, c->len - at);
	nc->len = c->len - at;
	c->len = at;
	c->dirty = true;
	if ((rc = chunk_reindex(c)) || (rc = chunk_reindex(nc)))
		return rc;
	return CC_OK;
}

/* Leaf i changed: its entry again, and a split when it outgrew a part. */
static int leaf_touch(struct zset *z, int i)
{
	struct zs_leaf *l = &z->lf[i];
	l->dirty = true;
	z->idx_dirty = true;
	int rc = leaf_refresh(l);
	if (rc || !z->chunked || l->nch < 2 || leaf_bytes(l) <= ZS_LEAF_BYTES)
		return rc;
	if ((rc = leaf_new(z, i + 1)))
		return rc;
	l = &z->lf[i];
	struct zs_leaf *nl = &z->lf[i + 1];
	int half = l->nch / 2, moved = l->nch - half;
	nl->ch = malloc((size_t)moved * sizeof(*nl->ch));
	if (!nl->ch)
		return CC_EINTERNAL;
	memcpy(nl->ch, &l->ch[half], (size_t)moved * sizeof(*nl->ch));
	nl->nch = nl->chcap = moved;
	l->nch = half;
	if ((rc = leaf_refresh(l)) || (rc = leaf_refresh(nl)))
		return rc;
	return CC_OK;
}

static int order_insert(struct zset *z, double s, const char *m, size_t ml)
{
	if (!z->chunked && !z->ordered)
		return CC_OK; /* an inline zset's view is built from the dict when needed */
	int rc = order_load(z);
	if (rc)
		return rc;
	if (z->nlf == 0 && (rc = leaf_new(z, 0)))
		return rc;
	int li = leaf_for(z, s, m, ml);
	if ((rc = leaf_load(z, li)))
		return rc;
	struct zs_leaf *l = &z->lf[li];
	if (l->nch == 0 && (rc = chunk_new(z, l, 0)))
		return rc;
	int ci = chunk_for(l, s, m, ml);
	if ((rc = chunk_load(z, l, ci)))
		return rc;
	struct zs_chunk *c = &l->ch[ci];
	uint32_t pos = lower_bound(c, s, m, ml);
	size_t at = pos < c->n ? c->off[pos] : c->len, sz = elem_bytes(ml);
	if (reserve(&c->p, &c->cap, c->len + sz))
		return CC_EINTERNAL;
	memmove(c->p + at + sz, c->p + at, c->len - at);
	elem_write(c->p + at, s, m, ml);
	c->len += sz;
	c->dirty = true;
	if ((rc = chunk_reindex(c)))
		return rc;
	if (z->chunked && c->len > ZS_CHUNK_BYTES && c->n > 1 && (rc = chunk_split(z, l, ci)))
		return rc;
	return leaf_touch(z, li);
}

static int order_remove(struct zset *z, double s, const char *m, size_t ml)
{
	if (!z->chunked && !z->ordered)
		return CC_OK;
	int rc = order_load(z);
	if (rc)
		return rc;
	if (z->nlf == 0)
		return COLL_ECORRUPT; /* invariant (1) */
	int li = leaf_for(z, s, m, ml);
	if ((rc = leaf_load(z, li)))
		return rc;
	struct zs_leaf *l = &z->lf[li];
	int ci = chunk_for(l, s, m, ml);
	if ((rc = chunk_load(z, l, ci)))
		return rc;
	struct zs_chunk *c = &l->ch[ci];
	uint32_t pos = lower_bound(c, s, m, ml);
	struct zs_elem e;
	if (pos == c->n)
		return COLL_ECORRUPT;
	elem_at(c, pos, &e);
	if (zcmp(e.score, e.m, e.ml, s, m, ml) != 0)
		return COLL_ECORRUPT;
	size_t at = c->off[pos], end = elem_end(c, pos);
	memmove(c->p + at, c->p + end, c->len - end);
	c->len -= end - at;
	c->dirty = true;
	if ((rc = chunk_reindex(c)))
		return rc;
	if (c->n == 0) {
		if ((rc = chunk_drop(z, l, ci)))
			return rc;
	} else if (z->chunked && c->len < ZS_CHUNK_BYTES / 4 && ci + 1 < l->nch) {
		/* a small chunk merges into its successor when both fit */
		if ((rc = chunk_load(z, l, ci + 1)))
			return rc;
		c = &l->ch[ci];
		struct zs_chunk *nx = &l->ch[ci + 1];
		if (c->len + nx->len <= ZS_CHUNK_BYTES) {
			if (reserve(&c->p, &c->cap, c->len + nx->len))
				return CC_EINTERNAL;
			memcpy(c->p + c->len, nx->p, nx->len);
			c->len += nx->len;
			if ((rc = chunk_reindex(c)) || (rc = chunk_drop(z, l, ci + 1)))
				return rc;
		}
	}
	if (l->nch == 0)
		return leaf_drop(z, li);
	return leaf_touch(z, li);
}

/* ---- the zset ---- */

int zs_open(struct txn *t, const char *key, size_t klen, uint64_t entries, uint64_t value,
	    struct zset *z)
{
	memset(z, 0, sizeof(*z));
	int rc = coll_open(t, key, klen, TXN_T_ZSET, true, &z->d);
	coll_set_limits(&z->d, entries, value);
	z->chunked = z->d.enc == COLL_ENC_BUCKETED;
	return rc;
}

void zs_init(struct zset *z, struct txn *t, const char *key, size_t klen, uint64_t entries,
	     uint64_t value)
{
	memset(z, 0, sizeof(*z));
	coll_init(&z->d, t, key, klen, TXN_T_ZSET, true);
	coll_set_limits(&z->d, entries, value);
}

static void order_drop(struct zset *z)
{
	for (int i = 0; i < z->nlf; i++)
		leaf_free(&z->lf[i]);
	free(z->lf);
	z->lf = NULL;
	z->nlf = z->lfcap = 0;
	z->ordered = false;
}

void zs_free(struct zset *z)
{
	order_drop(z);
	free(z->gone);
	coll_free(&z->d);
	memset(z, 0, sizeof(*z));
}

int zs_score(struct zset *z, const char *m, size_t ml, double *score, bool *found)
{
	const char *v;
	size_t vl;
	*found = false;
	if (!z->d.exists && coll_len(&z->d) == 0)
		return CC_OK;
	int rc = coll_get(&z->d, m, ml, &v, &vl, found);
	if (rc)
		return rc;
	if (*found) {
		if (vl != 8)
			return COLL_ECORRUPT;
		*score = zs_score_get(v);
	}
	return CC_OK;
}

/* The dict just became bucketed: the order becomes parts (invariant (2)),
 * chunks and leaves half full. */
static int make_chunked(struct zset *z)
{
	order_drop(z);
	z->chunked = true;
	z->next_k = z->next_leaf = 0;
	int rc = build_from_dict(z, ZS_CHUNK_BYTES / 2, ZS_LEAF_BYTES / 2);
	if (rc == 0) {
		z->ordered = true;
		z->idx_dirty = true;
	}
	return rc;
}

int zs_put(struct zset *z, const char *m, size_t ml, double score, bool *added)
{
	double old;
	bool found;
	char sb[8];
	int rc = zs_score(z, m, ml, &old, &found);
	*added = !found;
	if (score == 0 && !(z->d.flags & COLL_F_BIG))
		score = 0; /* Redis's listpack keeps -0 as 0 */
	if (rc || (found && old == score))
		return rc;
	/* the member, copied: m may point into this zset's buffers */
	char *mc = malloc(ml ? ml : 1);
	if (!mc)
		return CC_EINTERNAL;
	if (ml)
		memcpy(mc, m, ml);
	if (found)
		rc = order_remove(z, old, mc, ml);
	zs_score_put(sb, score);
	bool was_chunked = z->chunked, add;
	if (rc == 0)
		rc = coll_put(&z->d, mc, ml, sb, 8, &add);
	if (rc == 0) {
		if (!was_chunked && z->d.enc == COLL_ENC_BUCKETED)
			rc = make_chunked(z); /* the new element included */
		else
			rc = order_insert(z, score, mc, ml);
	}
	free(mc);
	return rc;
}

int zs_del(struct zset *z, const char *m, size_t ml, bool *removed)
{
	double old;
	int rc = zs_score(z, m, ml, &old, removed);
	if (rc || !*removed)
		return rc;
	char *mc = malloc(ml ? ml : 1);
	if (!mc)
		return CC_EINTERNAL;
	if (ml)
		memcpy(mc, m, ml);
	bool r;
	rc = order_remove(z, old, mc, ml);
	if (rc == 0)
		rc = coll_remove(&z->d, mc, ml, &r);
	free(mc);
	return rc;
}

int zs_count_prefix(struct zset *z, zs_pred pred, void *arg, uint64_t *n)
{
	*n = 0;
	int rc = order_load(z);
	if (rc || z->nlf == 0)
		return rc;
	int lo = 0, hi = z->nlf - 1, li = -1; /* the last leaf whose first is in */
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const struct zkey *k = &z->lf[mid].first;
		if (pred(arg, k->s, k->m, k->ml)) {
			li = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (li < 0)
		return CC_OK;
	uint64_t before = 0;
	for (int i = 0; i < li; i++)
		before += z->lf[i].n;
	if ((rc = leaf_load(z, li)))
		return rc;
	struct zs_leaf *l = &z->lf[li];
	int ci = 0; /* the last chunk whose first is in: chunk 0's is the leaf's */
	lo = 1;
	hi = l->nch - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const struct zkey *k = &l->ch[mid].first;
		if (pred(arg, k->s, k->m, k->ml)) {
			ci = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	for (int i = 0; i < ci; i++)
		before += l->ch[i].n;
	if ((rc = chunk_load(z, l, ci)))
		return rc;
	const struct zs_chunk *c = &l->ch[ci];
	uint32_t a = 0, b = c->n;
	while (a < b) {
		uint32_t mid = (a + b) / 2;
		struct zs_elem e;
		elem_at(c, mid, &e);
		if (pred(arg, e.score, e.m, e.ml))
			a = mid + 1;
		else
			b = mid;
	}
	*n = before + a;
	return CC_OK;
}

int zs_walk(struct zset *z, uint64_t from, bool rev, zs_elem_fn fn, void *arg)
{
	int rc = order_load(z);
	if (rc)
		return rc;
	uint64_t before = 0;
	int li = 0, ci = 0;
	while (li < z->nlf && before + z->lf[li].n <= from)
		before += z->lf[li++].n;
	if (li == z->nlf)
		return CC_OK;
	if ((rc = leaf_load(z, li)))
		return rc;
	while (ci < z->lf[li].nch && before + z->lf[li].ch[ci].n <= from)
		before += z->lf[li].ch[ci++].n;
	if (ci == z->lf[li].nch)
		return COLL_ECORRUPT; /* the counts disagree: invariant (3) */
	uint32_t k = (uint32_t)(from - before);
	for (;;) {
		struct zs_leaf *l = &z->lf[li];
		if ((rc = chunk_load(z, l, ci)))
			return rc;
		const struct zs_chunk *c = &l->ch[ci];
		while (k < c->n) {
			struct zs_elem e;
			elem_at(c, k, &e);
			if (fn(arg, &e))
				return CC_OK;
			if (rev) {
				if (k == 0)
					break;
				k--;
			} else {
				k++;
			}
		}
		if (rev) {
			if (ci == 0) {
				if (li == 0)
					return CC_OK;
				if ((rc = leaf_load(z, --li)))
					return rc;
				ci = z->lf[li].nch;
			}
			ci--;
			k = z->lf[li].ch[ci].n - 1;
		} else {
			if (++ci == l->nch) {
				if (++li == z->nlf)
					return CC_OK;
				if ((rc = leaf_load(z, li)))
					return rc;
				ci = 0;
			}
			k = 0;
		}
	}
}

/* ---- read-ahead ---- */

/* The part keys of ids[0..n), fetched in one round (cc_fetch_more). */
static int fetch_parts(struct zset *z, const uint32_t *ids, int n, uint8_t access)
{
	if (n < 2)
		return CC_OK; /* one is read when reached, in as many rounds */
	char *keys = malloc((size_t)n * PL_PART_KEYLEN);
	struct cc_key *ck = malloc((size_t)n * sizeof(*ck));
	int rc = CC_EINTERNAL;
	if (keys && ck) {
		for (int i = 0; i < n; i++) {
			part_key(z, ids[i], keys + (size_t)i * PL_PART_KEYLEN);
			ck[i] = (struct cc_key){ .p = keys + (size_t)i * PL_PART_KEYLEN,
						 .len = PL_PART_KEYLEN, .access = access };
		}
		rc = cc_fetch_more(z->d.t, ck, n);
	}
	free(keys);
	free(ck);
	return rc;
}

int zs_prefetch(struct zset *z, uint64_t lo, uint64_t hi, bool write)
{
	int rc = order_load(z);
	if (rc || !z->chunked || hi <= lo)
		return rc;
	uint8_t access = write ? CC_KEY_READ | CC_KEY_WRITE : CC_KEY_READ;
	uint32_t *ids = malloc((size_t)(z->nlf ? z->nlf : 1) * sizeof(*ids));
	int n = 0, first = -1, last = -1;
	if (!ids)
		return CC_EINTERNAL;
	uint64_t at = 0;
	for (int i = 0; i < z->nlf; at += z->lf[i++].n) /* the leaves ranks lo..hi-1 are in */
		if (at < hi && at + z->lf[i].n > lo) {
			if (first < 0)
				first = i;
			last = i;
			if (!z->lf[i].loaded)
				ids[n++] = ZS_LEAF_BASE + z->lf[i].id;
		}
	rc = fetch_parts(z, ids, n, CC_KEY_READ);
	free(ids);
	if (rc || first < 0)
		return rc;
	int cap = 0;
	for (int i = first; rc == 0 && i <= last; i++)
		if ((rc = leaf_load(z, i)) == 0)
			cap += z->lf[i].nch;
	if (rc)
		return rc;
	if (!(ids = malloc((size_t)(cap ? cap : 1) * sizeof(*ids))))
		return CC_EINTERNAL;
	n = 0;
	at = 0;
	for (int i = 0; i < first; i++)
		at += z->lf[i].n;
	for (int i = first; i <= last; i++)
		for (int j = 0; j < z->lf[i].nch; at += z->lf[i].ch[j++].n)
			if (at < hi && at + z->lf[i].ch[j].n > lo && !z->lf[i].ch[j].loaded)
				ids[n++] = ZS_CHUNK_BASE + z->lf[i].ch[j].k;
	rc = fetch_parts(z, ids, n, access);
	free(ids);
	return rc;
}

/* ---- saving ---- */

static int write_leaf(struct zset *z, const struct zs_leaf *l)
{
	size_t len = leaf_bytes(l);
	char *v = malloc(len), *p = v + 4;
	if (!v)
		return CC_EINTERNAL;
	put32(v, (uint32_t)l->nch);
	for (int i = 0; i < l->nch; i++)
		p += entry_put(p, l->ch[i].k, l->ch[i].n, &l->ch[i].first);
	char k[PL_PART_KEYLEN];
	const struct txn_meta pm = { .type = TXN_T_PART };
	part_key(z, ZS_LEAF_BASE + l->id, k);
	int rc = txn_set_meta(z->d.t, k, sizeof(k), v, len, &pm);
	free(v);
	return rc;
}

static int write_top(struct zset *z)
{
	char k[PL_PART_KEYLEN];
	bool existed;
	part_key(z, ZS_INDEX_ID, k);
	if (zs_len(z) == 0)
		return txn_del(z->d.t, k, sizeof(k), &existed);
	size_t len = 12;
	for (int i = 0; i < z->nlf; i++)
		len += entry_bytes(&z->lf[i].first);
	char *v = malloc(len), *p = v + 12;
	if (!v)
		return CC_EINTERNAL;
	put32(v, (uint32_t)z->nlf);
	put32(v + 4, z->next_k);
	put32(v + 8, z->next_leaf);
	for (int i = 0; i < z->nlf; i++)
		p += entry_put(p, z->lf[i].id, z->lf[i].n, &z->lf[i].first);
	const struct txn_meta pm = { .type = TXN_T_PART };
	int rc = txn_set_meta(z->d.t, k, sizeof(k), v, len, &pm);
	free(v);
	return rc;
}

int zs_save(struct zset *z)
{
	int rc = coll_save(&z->d);
	if (rc || !z->chunked)
		return rc;
	const struct txn_meta pm = { .type = TXN_T_PART };
	for (int i = 0; i < z->nlf; i++) {
		struct zs_leaf *l = &z->lf[i];
		for (int j = 0; l->loaded && j < l->nch; j++) {
			struct zs_chunk *c = &l->ch[j];
			if (!c->dirty)
				continue;
			char k[PL_PART_KEYLEN];
			part_key(z, ZS_CHUNK_BASE + c->k, k);
			if ((rc = txn_set_meta(z->d.t, k, sizeof(k), c->p, c->len, &pm)))
				return rc;
			c->dirty = false;
		}
		if (l->dirty) {
			if ((rc = write_leaf(z, l)))
				return rc;
			l->dirty = false;
		}
	}
	for (int i = 0; i < z->ngone; i++) {
		char k[PL_PART_KEYLEN];
		bool existed;
		part_key(z, z->gone[i], k);
		if ((rc = txn_del(z->d.t, k, sizeof(k), &existed)))
			return rc;
	}
	z->ngone = 0;
	if (z->idx_dirty) {
		if ((rc = write_top(z)))
			return rc;
		z->idx_dirty = false;
	}
	return CC_OK;
}

/* ---- MEMORY USAGE, COPY ---- */

int zs_usage(struct zset *z, uint64_t samples, uint64_t *bytes)
{
	int rc = coll_usage(&z->d, samples, bytes);
	if (rc || !z->chunked || (rc = order_load(z)) || z->nlf == 0)
		return rc;
	uint64_t nch = 0, top = 12, sum = 0, k;
	for (int i = 0; i < z->nlf; i++) {
		if ((rc = leaf_load(z, i)))
			return rc;
		nch += (uint64_t)z->lf[i].nch;
		top += entry_bytes(&z->lf[i].first);
		*bytes += st_item_bytes(PL_PART_KEYLEN, (uint32_t)leaf_bytes(&z->lf[i]));
	}
	k = samples == 0 || samples > nch ? nch : samples;
	for (uint64_t s = 0; s < k; s++) {
		uint64_t at = s * nch / k; /* the at-th chunk, in order */
		int li = 0;
		while (at >= (uint64_t)z->lf[li].nch)
			at -= (uint64_t)z->lf[li++].nch;
		if ((rc = chunk_load(z, &z->lf[li], (int)at)))
			return rc;
		sum += st_item_bytes(PL_PART_KEYLEN, (uint32_t)z->lf[li].ch[at].len);
	}
	*bytes += sum * nch / k + st_item_bytes(PL_PART_KEYLEN, (uint32_t)top);
	return CC_OK;
}

/* Copy part `id` of (slot, gen) `from` to `to`; *v, *vl: its bytes (valid
 * until the transaction's next call). */
static int copy_part(struct txn *t, const struct zset *from, const struct zset *to, uint32_t id,
		     const char **v, size_t *vl)
{
	char ok[PL_PART_KEYLEN], nk[PL_PART_KEYLEN];
	bool found;
	const struct txn_meta pm = { .type = TXN_T_PART };
	part_key(from, id, ok);
	part_key(to, id, nk);
	int rc = txn_get(t, ok, sizeof(ok), v, vl, &found);
	if (rc)
		return rc;
	if (!found)
		return COLL_ECORRUPT;
	return txn_set_meta(t, nk, sizeof(nk), *v, *vl, &pm);
}

/* The ids in a list of entries (a top's or a leaf's), copied out. */
static int entry_ids(const char *v, size_t vl, size_t hdr, uint32_t **ids, uint32_t *n)
{
	const char *p = v + hdr, *end = v + vl;
	if (vl < hdr)
		return COLL_ECORRUPT;
	*n = get32(v);
	*ids = malloc((*n ? *n : 1) * sizeof(**ids));
	if (!*ids)
		return CC_EINTERNAL;
	for (uint32_t i = 0; i < *n; i++) {
		uint32_t cnt;
		struct zs_elem e;
		size_t k = entry_get(p, end, &(*ids)[i], &cnt, &e);
		if (!k)
			return COLL_ECORRUPT;
		p += k;
	}
	return CC_OK;
}

int zs_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		  char **nv, size_t *nvl)
{
	int rc = coll_copy_parts(t, v, vl, to, tolen, nv, nvl);
	if (rc)
		return rc;
	/* the old and new (slot, gen): the root's bytes 4..5 and 16..23 */
	struct zset from = { .d = { .t = t } }, dst = { .d = { .t = t } };
	from.d.slot = (uint16_t)((uint8_t)v[4] | (uint8_t)v[5] << 8);
	dst.d.slot = (uint16_t)pl_keyslot(to, tolen);
	uint32_t *leaves = NULL, nl = 0;
	const char *pv;
	size_t pl;
	if (!coll_root_gen(v, vl, &from.d.gen) || !coll_root_gen(*nv, *nvl, &dst.d.gen))
		rc = COLL_ECORRUPT;
	if (rc == 0 && (rc = copy_part(t, &from, &dst, ZS_INDEX_ID, &pv, &pl)) == 0)
		rc = entry_ids(pv, pl, 12, &leaves, &nl);
	for (uint32_t i = 0; rc == 0 && i < nl; i++) {
		uint32_t *chunks = NULL, nc = 0;
		if ((rc = copy_part(t, &from, &dst, ZS_LEAF_BASE + leaves[i], &pv, &pl)) == 0)
			rc = entry_ids(pv, pl, 4, &chunks, &nc);
		for (uint32_t j = 0; rc == 0 && j < nc; j++)
			rc = copy_part(t, &from, &dst, ZS_CHUNK_BASE + chunks[j], &pv, &pl);
		free(chunks);
	}
	free(leaves);
	if (rc) {
		free(*nv);
		*nv = NULL;
	}
	return rc;
}

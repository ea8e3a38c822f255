/*
 * zset.c: a sorted set's dict and order (zset.h has the layout, why, and
 * the invariants cited here).
 */
#include "server/zset.h"

#include <stdlib.h>
#include <string.h>

#include "cc/txn.h"
#include "placement/placement.h"
#include "storage/st.h"

struct zs_chunk {
	uint32_t k;       /* part id - ZS_CHUNK_BASE */
	uint32_t n;       /* elements */
	double fs;        /* first element (index) */
	char *fm;
	size_t fml;
	bool loaded, dirty;
	char *p; /* elements, when loaded */
	size_t len, cap;
	uint32_t *off; /* each element's offset in p, when loaded */
	uint32_t offcap;
};

/* ---- bytes ---- */

static void put32(char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (char)(v >> (8 * i));
}

static uint32_t get32(const char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

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

static size_t vput(char *p, uint64_t v)
{
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		p[n++] = (char)(b | (v ? 0x80 : 0));
	} while (v);
	return n;
}

static size_t vget(const char *p, const char *end, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		uint8_t b = (uint8_t)p[i];
		r |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
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

/* ---- chunks in memory ---- */

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

static void chunk_free(struct zs_chunk *c)
{
	free(c->fm);
	free(c->p);
	free(c->off);
}

static int set_first(struct zs_chunk *c, double s, const char *m, size_t ml)
{
	char *f = malloc(ml ? ml : 1);
	if (!f)
		return -1;
	if (ml)
		memcpy(f, m, ml);
	free(c->fm);
	c->fm = f;
	c->fml = ml;
	c->fs = s;
	return 0;
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
		if (set_first(c, e.score, e.m, e.ml))
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

static void part_key(const struct zset *z, uint32_t id, char out[PL_PART_KEYLEN])
{
	coll_part_key(out, z->d.slot, z->d.gen, id);
}

static int chunk_load(struct zset *z, int i)
{
	struct zs_chunk *c = &z->ch[i];
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
	if (!found || reserve(&c->p, &c->cap, vl ? vl : 1))
		return found ? CC_EINTERNAL : COLL_ECORRUPT; /* invariant (3) */
	memcpy(c->p, v, vl);
	c->len = vl;
	c->loaded = true;
	uint32_t n = c->n;
	if ((rc = chunk_reindex(c)))
		return rc;
	return c->n == n ? CC_OK : COLL_ECORRUPT;
}

/* A new empty chunk at position i of the order (loaded, dirty). */
static int chunk_insert_at(struct zset *z, int i, struct zs_chunk **out)
{
	if (z->nch == z->chcap) {
		int cap = z->chcap ? z->chcap * 2 : 8;
		struct zs_chunk *p = realloc(z->ch, (size_t)cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		z->ch = p;
		z->chcap = cap;
	}
	memmove(&z->ch[i + 1], &z->ch[i], (size_t)(z->nch - i) * sizeof(*z->ch));
	z->nch++;
	struct zs_chunk *c = &z->ch[i];
	memset(c, 0, sizeof(*c));
	c->k = z->next_k++;
	c->loaded = c->dirty = true;
	z->idx_dirty = true;
	*out = c;
	return CC_OK;
}

static int chunk_remove_at(struct zset *z, int i)
{
	if (z->chunked) {
		if (z->ngone == z->gonecap) {
			int cap = z->gonecap ? z->gonecap * 2 : 8;
			uint32_t *g = realloc(z->gone, (size_t)cap * sizeof(*g));
			if (!g)
				return CC_EINTERNAL;
			z->gone = g;
			z->gonecap = cap;
		}
		z->gone[z->ngone++] = z->ch[i].k;
	}
	chunk_free(&z->ch[i]);
	memmove(&z->ch[i], &z->ch[i + 1], (size_t)(z->nch - i - 1) * sizeof(*z->ch));
	z->nch--;
	z->idx_dirty = true;
	return CC_OK;
}

/* ---- the order: loading ---- */

static int parse_index(struct zset *z, const char *v, size_t vl)
{
	const char *p = v, *end = v + vl;
	if (vl < 8)
		return COLL_ECORRUPT;
	uint32_t n = get32(p);
	z->next_k = get32(p + 4);
	p += 8;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t l;
		size_t k;
		struct zs_chunk *c;
		if (end - p < 17 || !(k = vget(p + 16, end, &l)) ||
		    l > (uint64_t)(end - p - 16 - (ptrdiff_t)k))
			return COLL_ECORRUPT;
		uint32_t next = z->next_k;
		if (chunk_insert_at(z, z->nch, &c))
			return CC_EINTERNAL;
		z->next_k = next;
		c->k = get32(p);
		c->n = get32(p + 4);
		c->loaded = c->dirty = false;
		if (set_first(c, zs_score_get(p + 8), p + 16 + k, (size_t)l))
			return CC_EINTERNAL;
		p += 16 + k + l;
	}
	z->idx_dirty = false;
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

/*
 * The order rebuilt from the dict, in chunks of up to `max` bytes: the
 * view of an inline zset (one chunk), or the parts of one just bucketed.
 */
static int build_from_dict(struct zset *z, size_t max)
{
	struct view v = { 0 };
	int rc = coll_foreach(&z->d, view_add, &v);
	if (rc == 0 && v.n != zs_len(z))
		rc = COLL_ECORRUPT;
	if (rc == 0)
		qsort(v.e, v.n, sizeof(*v.e), view_cmp);
	struct zs_chunk *c = NULL;
	for (size_t i = 0; rc == 0 && i < v.n; i++) {
		size_t sz = elem_bytes(v.e[i].ml);
		if (!c || (c->len + sz > max && c->len))
			if ((rc = chunk_insert_at(z, z->nch, &c)))
				break;
		if (reserve(&c->p, &c->cap, c->len + sz)) {
			rc = CC_EINTERNAL;
			break;
		}
		c->len += elem_write(c->p + c->len, v.e[i].score, v.e[i].m, v.e[i].ml);
	}
	free(v.e);
	for (int i = 0; rc == 0 && i < z->nch; i++)
		rc = chunk_reindex(&z->ch[i]);
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
		rc = parse_index(z, v, vl);
	} else {
		rc = build_from_dict(z, SIZE_MAX);
		z->idx_dirty = false;
	}
	if (rc == 0)
		z->ordered = true;
	return rc;
}

/* The chunk an element (s, m) belongs in: the last whose first element
 * is not after it, or the first chunk (invariant (3)). */
static int chunk_for(const struct zset *z, double s, const char *m, size_t ml)
{
	int lo = 1, hi = z->nch - 1, ans = 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const struct zs_chunk *c = &z->ch[mid];
		if (zcmp(c->fs, c->fm, c->fml, s, m, ml) <= 0) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return ans;
}

/* ---- the order: changes ---- */

static int chunk_split(struct zset *z, int i)
{
	struct zs_chunk *nc;
	int rc = chunk_insert_at(z, i + 1, &nc);
	if (rc)
		return rc;
	struct zs_chunk *c = &z->ch[i];
	uint32_t half = c->n / 2;
	size_t at = c->off[half];
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

static int order_insert(struct zset *z, double s, const char *m, size_t ml)
{
	if (!z->chunked && !z->ordered)
		return CC_OK; /* an inline zset's view is built from the dict when needed */
	int rc = order_load(z);
	if (rc)
		return rc;
	struct zs_chunk *c;
	if (z->nch == 0 && (rc = chunk_insert_at(z, 0, &c)))
		return rc;
	int i = chunk_for(z, s, m, ml);
	if ((rc = chunk_load(z, i)))
		return rc;
	c = &z->ch[i];
	uint32_t lo = 0, hi = c->n; /* first element after (s, m) */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		struct zs_elem e;
		elem_at(c, mid, &e);
		if (zcmp(e.score, e.m, e.ml, s, m, ml) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t at = lo < c->n ? c->off[lo] : c->len, sz = elem_bytes(ml);
	if (reserve(&c->p, &c->cap, c->len + sz))
		return CC_EINTERNAL;
	memmove(c->p + at + sz, c->p + at, c->len - at);
	elem_write(c->p + at, s, m, ml);
	c->len += sz;
	c->dirty = true;
	z->idx_dirty = true;
	if ((rc = chunk_reindex(c)))
		return rc;
	if (z->chunked && c->len > ZS_CHUNK_BYTES && c->n > 1)
		return chunk_split(z, i);
	return CC_OK;
}

static int order_remove(struct zset *z, double s, const char *m, size_t ml)
{
	if (!z->chunked && !z->ordered)
		return CC_OK;
	int rc = order_load(z);
	if (rc)
		return rc;
	if (z->nch == 0)
		return COLL_ECORRUPT;
	int i = chunk_for(z, s, m, ml);
	if ((rc = chunk_load(z, i)))
		return rc;
	struct zs_chunk *c = &z->ch[i];
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
	struct zs_elem e;
	if (lo == c->n)
		return COLL_ECORRUPT; /* invariant (1) */
	elem_at(c, lo, &e);
	if (zcmp(e.score, e.m, e.ml, s, m, ml) != 0)
		return COLL_ECORRUPT;
	size_t at = c->off[lo], end = elem_end(c, lo);
	memmove(c->p + at, c->p + end, c->len - end);
	c->len -= end - at;
	c->dirty = true;
	z->idx_dirty = true;
	if ((rc = chunk_reindex(c)))
		return rc;
	if (c->n == 0)
		return chunk_remove_at(z, i);
	/* A small chunk merges into its successor when both fit. */
	if (z->chunked && c->len < ZS_CHUNK_BYTES / 4 && i + 1 < z->nch) {
		if ((rc = chunk_load(z, i + 1)))
			return rc;
		c = &z->ch[i];
		struct zs_chunk *nx = &z->ch[i + 1];
		if (c->len + nx->len <= ZS_CHUNK_BYTES) {
			if (reserve(&c->p, &c->cap, c->len + nx->len))
				return CC_EINTERNAL;
			memcpy(c->p + c->len, nx->p, nx->len);
			c->len += nx->len;
			if ((rc = chunk_reindex(c)))
				return rc;
			return chunk_remove_at(z, i + 1);
		}
	}
	return CC_OK;
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
	for (int i = 0; i < z->nch; i++)
		chunk_free(&z->ch[i]);
	z->nch = 0;
	z->ordered = false;
}

void zs_free(struct zset *z)
{
	order_drop(z);
	free(z->ch);
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

/* The dict just became bucketed: the order becomes parts (invariant (2)). */
static int make_chunked(struct zset *z)
{
	order_drop(z);
	z->chunked = true;
	z->next_k = 0;
	int rc = build_from_dict(z, ZS_CHUNK_BYTES / 2);
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
	if (rc || z->nch == 0)
		return rc;
	int lo = 0, hi = z->nch - 1, ans = -1; /* last chunk whose first is in */
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const struct zs_chunk *c = &z->ch[mid];
		if (pred(arg, c->fs, c->fm, c->fml)) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (ans < 0)
		return CC_OK;
	uint64_t before = 0;
	for (int i = 0; i < ans; i++)
		before += z->ch[i].n;
	if ((rc = chunk_load(z, ans)))
		return rc;
	const struct zs_chunk *c = &z->ch[ans];
	uint32_t l = 0, h = c->n;
	while (l < h) {
		uint32_t mid = (l + h) / 2;
		struct zs_elem e;
		elem_at(c, mid, &e);
		if (pred(arg, e.score, e.m, e.ml))
			l = mid + 1;
		else
			h = mid;
	}
	*n = before + l;
	return CC_OK;
}

int zs_walk(struct zset *z, uint64_t from, bool rev, zs_elem_fn fn, void *arg)
{
	int rc = order_load(z);
	if (rc)
		return rc;
	uint64_t before = 0;
	int i = 0;
	while (i < z->nch && before + z->ch[i].n <= from)
		before += z->ch[i++].n;
	if (i == z->nch)
		return CC_OK;
	uint32_t k = (uint32_t)(from - before);
	for (;;) {
		if ((rc = chunk_load(z, i)))
			return rc;
		const struct zs_chunk *c = &z->ch[i];
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
			if (i == 0)
				return CC_OK;
			i--;
			k = z->ch[i].n - 1; /* the count is the index's: invariant (3) */
		} else {
			if (++i == z->nch)
				return CC_OK;
			k = 0;
		}
	}
}

static int write_index(struct zset *z)
{
	char k[PL_PART_KEYLEN];
	bool existed;
	part_key(z, ZS_INDEX_ID, k);
	if (zs_len(z) == 0)
		return txn_del(z->d.t, k, sizeof(k), &existed);
	size_t len = 8;
	for (int i = 0; i < z->nch; i++)
		len += 16 + elem_bytes(z->ch[i].fml) - 8;
	char *v = malloc(len), *p = v;
	if (!v)
		return CC_EINTERNAL;
	put32(p, (uint32_t)z->nch);
	put32(p + 4, z->next_k);
	p += 8;
	for (int i = 0; i < z->nch; i++) {
		const struct zs_chunk *c = &z->ch[i];
		put32(p, c->k);
		put32(p + 4, c->n);
		p += 8;
		p += elem_write(p, c->fs, c->fm, c->fml);
	}
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
	for (int i = 0; i < z->nch; i++) {
		struct zs_chunk *c = &z->ch[i];
		if (!c->dirty)
			continue;
		char k[PL_PART_KEYLEN];
		part_key(z, ZS_CHUNK_BASE + c->k, k);
		if ((rc = txn_set_meta(z->d.t, k, sizeof(k), c->p, c->len, &pm)))
			return rc;
		c->dirty = false;
	}
	for (int i = 0; i < z->ngone; i++) {
		char k[PL_PART_KEYLEN];
		bool existed;
		part_key(z, ZS_CHUNK_BASE + z->gone[i], k);
		if ((rc = txn_del(z->d.t, k, sizeof(k), &existed)))
			return rc;
	}
	z->ngone = 0;
	if (z->idx_dirty) {
		if ((rc = write_index(z)))
			return rc;
		z->idx_dirty = false;
	}
	return CC_OK;
}

int zs_usage(struct zset *z, uint64_t samples, uint64_t *bytes)
{
	int rc = coll_usage(&z->d, samples, bytes);
	if (rc || !z->chunked || (rc = order_load(z)) || z->nch == 0)
		return rc;
	uint64_t k = samples == 0 || samples > (uint64_t)z->nch ? (uint64_t)z->nch : samples;
	uint64_t sum = 0, idx = 8;
	for (uint64_t i = 0; i < k; i++) {
		int at = (int)(i * (uint64_t)z->nch / k);
		if ((rc = chunk_load(z, at)))
			return rc;
		sum += st_item_bytes(PL_PART_KEYLEN, (uint32_t)z->ch[at].len);
	}
	for (int i = 0; i < z->nch; i++)
		idx += 16 + elem_bytes(z->ch[i].fml) - 8;
	*bytes += sum * (uint64_t)z->nch / k + st_item_bytes(PL_PART_KEYLEN, (uint32_t)idx);
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
	if (!coll_root_gen(v, vl, &from.d.gen) || !coll_root_gen(*nv, *nvl, &dst.d.gen))
		return COLL_ECORRUPT;
	char ok[PL_PART_KEYLEN], nk[PL_PART_KEYLEN];
	const char *iv;
	size_t il;
	bool found;
	const struct txn_meta pm = { .type = TXN_T_PART };
	part_key(&from, ZS_INDEX_ID, ok);
	if ((rc = txn_get(t, ok, sizeof(ok), &iv, &il, &found)))
		goto fail;
	rc = COLL_ECORRUPT;
	if (!found || il < 8)
		goto fail;
	char *idx = malloc(il);
	if (!idx) {
		rc = CC_EINTERNAL;
		goto fail;
	}
	memcpy(idx, iv, il);
	part_key(&dst, ZS_INDEX_ID, nk);
	rc = txn_set_meta(t, nk, sizeof(nk), idx, il, &pm);
	const char *p = idx + 8, *end = idx + il;
	for (uint32_t i = 0, n = get32(idx); rc == 0 && i < n; i++) {
		uint64_t l;
		size_t k;
		const char *cv;
		size_t cl;
		if (end - p < 17 || !(k = vget(p + 16, end, &l)) ||
		    l > (uint64_t)(end - p - 16 - (ptrdiff_t)k)) {
			rc = COLL_ECORRUPT;
			break;
		}
		uint32_t id = ZS_CHUNK_BASE + get32(p);
		p += 16 + k + l;
		part_key(&from, id, ok);
		part_key(&dst, id, nk);
		if ((rc = txn_get(t, ok, sizeof(ok), &cv, &cl, &found)) == 0)
			rc = found ? txn_set_meta(t, nk, sizeof(nk), cv, cl, &pm) : COLL_ECORRUPT;
	}
	free(idx);
	if (rc == 0)
		return CC_OK;
fail:
	free(*nv);
	*nv = NULL;
	return rc;
}

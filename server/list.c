/*
 * list.c: lists as a root and chunk parts (list.h has the format, the
 * invariants and why).
 *
 * In memory a list is its index (l->seg, head to tail) and the chunks
 * read or made in this transaction (l->buf). The inline form is the same
 * with one segment whose buffer comes from the root, so every operation
 * below is written once, for segments; list_save decides what is written
 * where. An operation finds element i by summing the segments' counts
 * (no chunk read), then reads the one chunk it needs.
 */
#include "server/list.h"

#include <stdlib.h>
#include <string.h>

#include "cc/txn.h"
#include "placement/placement.h"
#include "server/bytes.h"
#include "storage/st.h"

#define INLINE_HDR 8

/* ---- element runs (coll.h's format, vals false) ---- */

static size_t elem_size(size_t vl)
{
	size_t n = 1;
	for (uint64_t v = vl; v >>= 7;)
		n++;
	return n + vl;
}

static int eb_reserve(struct coll_ebuf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return CC_EINTERNAL;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* The byte offset of element k of b (k == b->n: the end). */
static size_t eb_off(const struct coll_ebuf *b, uint32_t k)
{
	size_t off = 0;
	struct coll_elem e;
	for (uint32_t i = 0; i < k && coll_ebuf_next(b, false, &off, &e); i++)
		;
	return off;
}

/* Insert v at byte offset `at` (an element boundary). v must not point
 * into b. */
static int eb_insert(struct coll_ebuf *b, size_t at, const char *v, size_t vl)
{
	size_t sz = elem_size(vl);
	if (eb_reserve(b, sz))
		return CC_EINTERNAL;
	memmove(b->p + at + sz, b->p + at, b->len - at);
	size_t k = vput(b->p + at, vl);
	if (vl)
		memcpy(b->p + at + k, v, vl);
	b->len += sz;
	b->n++;
	return 0;
}

/* Cut bytes [at, at+len) holding n elements. */
static void eb_cut(struct coll_ebuf *b, size_t at, size_t len, uint32_t n)
{
	memmove(b->p + at, b->p + at + len, b->len - at - len);
	b->len -= len;
	b->n -= n;
}

/* ---- segments and chunk buffers ---- */

static int seg_insert(struct list *l, uint32_t pos, uint32_t id, int buf)
{
	if (l->nseg == l->segcap) {
		uint32_t cap = l->segcap ? 2 * l->segcap : 8;
		struct list_seg *p = realloc(l->seg, cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		l->seg = p;
		l->segcap = cap;
	}
	memmove(&l->seg[pos + 1], &l->seg[pos], (l->nseg - pos) * sizeof(*l->seg));
	l->seg[pos] = (struct list_seg){ .id = id, .n = 0, .buf = buf };
	l->nseg++;
	return 0;
}

static int gone_add(struct list *l, uint32_t id)
{
	if (l->ngone == l->gonecap) {
		int cap = l->gonecap ? 2 * l->gonecap : 8;
		uint32_t *p = realloc(l->gone, (size_t)cap * sizeof(*p));
		if (!p)
			return CC_EINTERNAL;
		l->gone = p;
		l->gonecap = cap;
	}
	l->gone[l->ngone++] = id;
	return 0;
}

/* Drop segment pos (empty now): its chunk is deleted at save. */
static int seg_drop(struct list *l, uint32_t pos)
{
	struct list_seg *s = &l->seg[pos];
	if (s->buf >= 0)
		l->buf[s->buf].dirty = false;
	int rc = l->enc == LIST_ENC_CHUNKED ? gone_add(l, s->id) : 0;
	memmove(&l->seg[pos], &l->seg[pos + 1], (l->nseg - pos - 1) * sizeof(*l->seg));
	l->nseg--;
	l->dirty = true;
	return rc;
}

static int buf_new(struct list *l, uint32_t id)
{
	if (l->nbuf == l->bufcap) {
		int cap = l->bufcap ? 2 * l->bufcap : 8;
		struct list_buf *p = realloc(l->buf, (size_t)cap * sizeof(*p));
		if (!p)
			return -1;
		l->buf = p;
		l->bufcap = cap;
	}
	memset(&l->buf[l->nbuf], 0, sizeof(l->buf[0]));
	l->buf[l->nbuf].id = id;
	return l->nbuf++;
}

/* Segment pos's elements, read when first needed. */
static int seg_load(struct list *l, uint32_t pos, struct coll_ebuf **out)
{
	struct list_seg *s = &l->seg[pos];
	if (s->buf < 0) {
		char k[PL_PART_KEYLEN];
		const char *v;
		size_t vl;
		bool found;
		uint32_t n;
		coll_part_key(k, l->slot, l->gen, s->id);
		int rc = txn_get(l->t, k, sizeof(k), &v, &vl, &found);
		if (rc)
			return rc;
		if (!found || !coll_ebuf_check(v, vl, false, &n) || n != s->n)
			return COLL_ECORRUPT;
		int b = buf_new(l, s->id);
		if (b < 0 || eb_reserve(&l->buf[b].b, vl))
			return CC_EINTERNAL;
		if (vl)
			memcpy(l->buf[b].b.p, v, vl);
		l->buf[b].b.len = vl;
		l->buf[b].b.n = n;
		s = &l->seg[pos];
		s->buf = b;
	}
	*out = &l->buf[s->buf].b;
	return 0;
}

/* A new, empty segment at pos: a fresh chunk (never read: it cannot
 * exist yet, list.h invariant (3)), or the inline one. */
static int seg_fresh(struct list *l, uint32_t pos)
{
	uint32_t id = l->enc == LIST_ENC_CHUNKED ? l->next_id++ : 0;
	int b = buf_new(l, id);
	if (b < 0)
		return CC_EINTERNAL;
	l->buf[b].dirty = true;
	l->dirty = true;
	return seg_insert(l, pos, id, b);
}

static void seg_changed(struct list *l, uint32_t pos)
{
	l->buf[l->seg[pos].buf].dirty = true;
	l->dirty = true;
}

/* The segment holding index i, and i's place in it. */
static void locate(const struct list *l, uint64_t i, uint32_t *pos, uint32_t *k)
{
	uint32_t s = 0;
	while (s + 1 < l->nseg && i >= l->seg[s].n) {
		i -= l->seg[s].n;
		s++;
	}
	*pos = s;
	*k = (uint32_t)i;
}

/* ---- open, free ---- */

static int parse_root(struct list *l, const char *v, size_t vl)
{
	if (vl < 1)
		return COLL_ECORRUPT;
	l->enc = (uint8_t)v[0];
	if (l->enc == COLL_ENC_INLINE) {
		uint32_t n;
		if (vl < INLINE_HDR || !coll_ebuf_check(v + INLINE_HDR, vl - INLINE_HDR, false, &n) ||
		    n != get32(v + 4) || n == 0)
			return COLL_ECORRUPT;
		int b = buf_new(l, 0);
		if (b < 0 || eb_reserve(&l->buf[b].b, vl - INLINE_HDR))
			return CC_EINTERNAL;
		memcpy(l->buf[b].b.p, v + INLINE_HDR, vl - INLINE_HDR);
		l->buf[b].b.len = vl - INLINE_HDR;
		l->buf[b].b.n = n;
		l->count = n;
		if (seg_insert(l, 0, 0, b))
			return CC_EINTERNAL;
		l->seg[0].n = n;
		return 0;
	}
	if (l->enc != LIST_ENC_CHUNKED || vl != LIST_ROOT_HDR)
		return COLL_ECORRUPT;
	uint32_t nseg = get32(v + 4);
	l->slot = get16(v + 2);
	l->gen = get64(v + 8);
	l->count = get64(v + 16);
	l->next_id = get32(v + 24);
	l->nchunks = nseg;
	l->partial = nseg > 2;
	if (!l->gen || nseg == 0)
		return COLL_ECORRUPT;
	/* the ends, from the root (list.h invariant (1)) */
	if (seg_insert(l, 0, get32(v + 32), -1))
		return CC_EINTERNAL;
	l->seg[0].n = get32(v + 36);
	if (nseg > 1) {
		if (seg_insert(l, 1, get32(v + 40), -1))
			return CC_EINTERNAL;
		l->seg[1].n = get32(v + 44);
	}
	uint64_t ends = l->seg[0].n + (nseg > 1 ? l->seg[1].n : 0);
	if (!l->partial && ends != l->count)
		return COLL_ECORRUPT;
	return 0;
}

/*
 * The whole index, from the index part, when only the ends are known
 * (list.h invariant (1)): every chunk between them, the ends keeping what
 * this transaction made of them.
 */
static int ix_load(struct list *l)
{
	if (!l->partial)
		return 0;
	char k[PL_PART_KEYLEN];
	const char *v;
	size_t vl;
	bool found;
	coll_part_key(k, l->slot, l->gen, LIST_INDEX_ID);
	int rc = txn_get(l->t, k, sizeof(k), &v, &vl, &found);
	if (rc)
		return rc;
	uint32_t n = l->nchunks;
	if (!found || vl != (size_t)n * LIST_INDEX_ENT || n < 3 ||
	    get32(v) != l->seg[0].id || get32(v + vl - LIST_INDEX_ENT) != l->seg[1].id)
		return COLL_ECORRUPT;
	struct list_seg *seg = malloc(n * sizeof(*seg));
	if (!seg)
		return CC_EINTERNAL;
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *e = v + (size_t)i * LIST_INDEX_ENT;
		seg[i] = (struct list_seg){ .id = get32(e), .n = get16(e + 4), .buf = -1 };
		if (i == 0)
			seg[i] = l->seg[0];
		else if (i == n - 1)
			seg[i] = l->seg[1];
		sum += seg[i].n;
	}
	if (sum != l->count) {
		free(seg);
		return COLL_ECORRUPT;
	}
	free(l->seg);
	l->seg = seg;
	l->nseg = l->segcap = n;
	l->partial = false;
	return 0;
}

int list_open(struct txn *t, const char *key, size_t klen, struct list *l)
{
	memset(l, 0, sizeof(*l));
	l->t = t;
	l->key = key;
	l->klen = klen;
	l->enc = COLL_ENC_INLINE;
	const char *v;
	size_t vl;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(t, key, klen, &v, &vl, &found, &m);
	if (rc || !found)
		return rc;
	if (m.type != TXN_T_LIST)
		return COLL_EWRONGTYPE;
	l->exists = true;
	l->expire_ms = m.expire_ms;
	return parse_root(l, v, vl);
}

void list_free(struct list *l)
{
	for (int i = 0; i < l->nbuf; i++)
		free(l->buf[i].b.p);
	free(l->buf);
	free(l->seg);
	free(l->gone);
	memset(l, 0, sizeof(*l));
}

/* ---- push, pop ---- */

int list_push(struct list *l, bool left, const char *v, size_t vl)
{
	struct coll_ebuf *b;
	int rc;
	if (l->nseg == 0 && (rc = seg_fresh(l, 0)))
		return rc;
	uint32_t pos = left ? 0 : l->nseg - 1;
	if ((rc = seg_load(l, pos, &b)))
		return rc;
	/* A full end chunk stays as it is: the element starts a new one,
	 * so a push writes one chunk however long the list. */
	if (l->enc == LIST_ENC_CHUNKED && b->n &&
	    (b->len + elem_size(vl) > LIST_CHUNK_BYTES || b->n >= LIST_CHUNK_MAX)) {
		if ((rc = ix_load(l)))
			return rc;
		pos = left ? 0 : l->nseg;
		if ((rc = seg_fresh(l, pos)) || (rc = seg_load(l, pos, &b)))
			return rc;
	}
	if ((rc = eb_insert(b, left ? 0 : b->len, v, vl)))
		return rc;
	l->seg[pos].n++;
	l->count++;
	seg_changed(l, pos);
	return 0;
}

int list_pop(struct list *l, bool left, char **v, size_t *vl)
{
	struct coll_ebuf *b;
	uint32_t pos = left ? 0 : l->nseg - 1;
	int rc;
	if (l->count == 0 || l->nseg == 0)
		return COLL_ECORRUPT;
	if ((rc = seg_load(l, pos, &b)))
		return rc;
	size_t off = eb_off(b, left ? 0 : b->n - 1);
	struct coll_elem e;
	size_t o2 = off;
	if (!coll_ebuf_next(b, false, &o2, &e))
		return COLL_ECORRUPT;
	*v = malloc(e.fl ? e.fl : 1);
	if (!*v)
		return CC_EINTERNAL;
	memcpy(*v, e.f, e.fl);
	*vl = e.fl;
	eb_cut(b, off, e.len, 1);
	l->seg[pos].n--;
	l->count--;
	seg_changed(l, pos);
	if (l->seg[pos].n)
		return 0;
	/* a chunk goes: the index changes (its read may abort: *v is then
	 * not the caller's) */
	if ((rc = ix_load(l)) == 0)
		rc = seg_drop(l, left ? 0 : l->nseg - 1);
	if (rc) {
		free(*v);
		*v = NULL;
	}
	return rc;
}

/* ---- by index ---- */

/* Element i: its segment, buffer and the element itself. */
static int at(struct list *l, uint64_t i, uint32_t *pos, struct coll_ebuf **b,
	      struct coll_elem *e)
{
	uint32_t k;
	int rc;
	uint64_t tail_n = l->seg[l->nseg - 1].n;
	if (l->partial && i < l->seg[0].n) { /* in an end chunk: no index */
		*pos = 0;
		k = (uint32_t)i;
	} else if (l->partial && i >= l->count - tail_n) {
		*pos = l->nseg - 1;
		k = (uint32_t)(i - (l->count - tail_n));
	} else {
		if ((rc = ix_load(l)))
			return rc;
		locate(l, i, pos, &k);
	}
	rc = seg_load(l, *pos, b);
	if (rc)
		return rc;
	size_t off = eb_off(*b, k);
	if (!coll_ebuf_next(*b, false, &off, e))
		return COLL_ECORRUPT;
	return 0;
}

int list_get(struct list *l, uint64_t i, const char **v, size_t *vl)
{
	uint32_t pos;
	struct coll_ebuf *b;
	struct coll_elem e;
	int rc = at(l, i, &pos, &b, &e);
	if (rc)
		return rc;
	*v = e.f;
	*vl = e.fl;
	return 0;
}

int list_set(struct list *l, uint64_t i, const char *v, size_t vl)
{
	uint32_t pos;
	struct coll_ebuf *b;
	struct coll_elem e;
	int rc = at(l, i, &pos, &b, &e);
	if (rc)
		return rc;
	eb_cut(b, e.off, e.len, 1);
	if ((rc = eb_insert(b, e.off, v, vl)))
		return rc;
	seg_changed(l, pos);
	return 0;
}

int list_insert(struct list *l, uint64_t i, const char *v, size_t vl)
{
	if (i == 0 || l->count == 0)
		return list_push(l, true, v, vl);
	if (i >= l->count)
		return list_push(l, false, v, vl);
	uint32_t pos, k;
	struct coll_ebuf *b;
	int rc = ix_load(l);
	if (rc)
		return rc;
	locate(l, i, &pos, &k);
	if ((rc = seg_load(l, pos, &b)))
		return rc;
	if ((rc = eb_insert(b, eb_off(b, k), v, vl)))
		return rc;
	l->seg[pos].n++;
	l->count++;
	seg_changed(l, pos); /* list_save splits it if it grew too big */
	return 0;
}

int list_walk(struct list *l, uint64_t from, bool back, list_elem_fn fn, void *arg)
{
	if (from >= l->count)
		return 0;
	int rc0 = ix_load(l);
	if (rc0)
		return rc0;
	uint32_t pos, k;
	locate(l, from, &pos, &k);
	uint64_t i = from;
	for (;;) {
		struct coll_ebuf *b;
		int rc = seg_load(l, pos, &b);
		if (rc)
			return rc;
		if (!back) {
			size_t off = eb_off(b, k);
			struct coll_elem e;
			while (coll_ebuf_next(b, false, &off, &e))
				if (fn(arg, i++, e.f, e.fl))
					return 0;
			if (++pos == l->nseg)
				return 0;
			k = 0;
		} else {
			/* element offsets of this segment, walked backwards */
			size_t *offs = malloc((size_t)(k + 1) * sizeof(*offs)), off = 0;
			struct coll_elem e;
			if (!offs)
				return CC_EINTERNAL;
			for (uint32_t j = 0; j <= k; j++) {
				offs[j] = off;
				if (!coll_ebuf_next(b, false, &off, &e)) {
					free(offs);
					return COLL_ECORRUPT;
				}
			}
			for (uint32_t j = k + 1; j-- > 0;) {
				off = offs[j];
				coll_ebuf_next(b, false, &off, &e);
				if (fn(arg, i--, e.f, e.fl)) {
					free(offs);
					return 0;
				}
			}
			free(offs);
			if (pos == 0)
				return 0;
			pos--;
			k = l->seg[pos].n - 1;
		}
	}
}

/* ---- LREM, LTRIM ---- */

int list_rem(struct list *l, const char *v, size_t vl, uint64_t limit, bool back,
	     uint64_t *removed)
{
	*removed = 0;
	int rc0 = ix_load(l);
	if (rc0)
		return rc0;
	for (uint32_t s = 0; s < l->nseg; s++) {
		uint32_t pos = back ? l->nseg - 1 - s : s;
		struct coll_ebuf *b;
		int rc = seg_load(l, pos, &b);
		if (rc)
			return rc;
		/* matches of this segment, in its order */
		size_t off = 0, nm = 0, cap = 0, *m = NULL;
		struct coll_elem e;
		while (coll_ebuf_next(b, false, &off, &e)) {
			if (e.fl != vl || (vl && memcmp(e.f, v, vl)))
				continue;
			if (nm == cap) {
				cap = cap ? 2 * cap : 16;
				size_t *p = realloc(m, cap * sizeof(*p));
				if (!p) {
					free(m);
					return CC_EINTERNAL;
				}
				m = p;
			}
			m[nm++] = e.off;
		}
		/* take from the walk's end of the segment first */
		size_t take = nm;
		if (limit && take > limit - *removed)
			take = limit - *removed;
		size_t from = back ? nm - take : 0;
		for (size_t j = from + take; j-- > from;) {
			size_t o = m[j];
			struct coll_elem x;
			coll_ebuf_next(b, false, &o, &x);
			eb_cut(b, x.off, x.len, 1);
		}
		free(m);
		if (take) {
			l->seg[pos].n -= (uint32_t)take;
			l->count -= take;
			*removed += take;
			seg_changed(l, pos);
			if (l->seg[pos].n == 0) {
				if ((rc = seg_drop(l, pos)))
					return rc;
				/* forwards, the next segment moved into pos;
				 * backwards, pos - 1 is next and nseg shrank */
				s--;
			}
		}
		if (limit && *removed == limit)
			break;
	}
	return 0;
}

int list_trim(struct list *l, uint64_t start, uint64_t stop, bool none)
{
	int rc = ix_load(l);
	if (rc)
		return rc;
	if (none) {
		while (l->nseg)
			if ((rc = seg_drop(l, l->nseg - 1)))
				return rc;
		l->count = 0;
		return 0;
	}
	/* the tail first: indexes before it stay as they are */
	uint64_t tail = l->count - 1 - stop, head = start;
	while (tail) {
		uint32_t pos = l->nseg - 1;
		struct list_seg *s = &l->seg[pos];
		if (s->n <= tail) {
			tail -= s->n;
			l->count -= s->n;
			if ((rc = seg_drop(l, pos)))
				return rc;
			continue;
		}
		struct coll_ebuf *b;
		if ((rc = seg_load(l, pos, &b)))
			return rc;
		size_t off = eb_off(b, b->n - (uint32_t)tail);
		eb_cut(b, off, b->len - off, (uint32_t)tail);
		l->seg[pos].n -= (uint32_t)tail;
		l->count -= tail;
		seg_changed(l, pos);
		tail = 0;
	}
	while (head) {
		struct list_seg *s = &l->seg[0];
		if (s->n <= head) {
			head -= s->n;
			l->count -= s->n;
			if ((rc = seg_drop(l, 0)))
				return rc;
			continue;
		}
		struct coll_ebuf *b;
		if ((rc = seg_load(l, 0, &b)))
			return rc;
		size_t off = eb_off(b, (uint32_t)head);
		eb_cut(b, 0, off, (uint32_t)head);
		l->seg[0].n -= (uint32_t)head;
		l->count -= head;
		seg_changed(l, 0);
		head = 0;
	}
	return 0;
}

/* ---- save ---- */

/* Split segment pos (loaded) into pieces of about `target` bytes, at
 * most LIST_CHUNK_MAX elements each; the first keeps its id. */
static int seg_split(struct list *l, uint32_t pos, size_t target)
{
	struct list_buf *lb = &l->buf[l->seg[pos].buf];
	struct coll_ebuf old = lb->b;
	memset(&lb->b, 0, sizeof(lb->b));
	size_t off = 0;
	struct coll_elem e;
	uint32_t cur = pos;
	int rc = 0;
	l->seg[pos].n = 0;
	while (rc == 0 && coll_ebuf_next(&old, false, &off, &e)) {
		struct coll_ebuf *b = &l->buf[l->seg[cur].buf].b;
		if (b->n && (b->len + e.len > target || b->n >= LIST_CHUNK_MAX)) {
			if ((rc = seg_fresh(l, ++cur)))
				break;
			b = &l->buf[l->seg[cur].buf].b;
		}
		if (eb_reserve(b, e.len)) {
			rc = CC_EINTERNAL;
			break;
		}
		memcpy(b->p + b->len, old.p + e.off, e.len);
		b->len += e.len;
		b->n++;
		l->seg[cur].n++;
		l->buf[l->seg[cur].buf].dirty = true;
	}
	free(old.p);
	return rc;
}

/* Inline to chunked: a new gen and slot, the elements cut into chunks,
 * the owner written (coll.h invariant (2)). */
static int make_chunked(struct list *l)
{
	l->enc = LIST_ENC_CHUNKED;
	l->gen = txn_unique(l->t);
	l->slot = (uint16_t)pl_keyslot(l->key, l->klen);
	l->next_id = 1;
	l->seg[0].id = l->next_id++;
	l->buf[l->seg[0].buf].id = l->seg[0].id;
	l->dirty = true;
	int rc = seg_split(l, 0, LIST_CHUNK_BYTES);
	if (rc)
		return rc;
	char ok[PL_PART_KEYLEN];
	const struct txn_meta pm = { .type = TXN_T_PART };
	coll_part_key(ok, l->slot, l->gen, COLL_OWNER_ID);
	return txn_set_meta(l->t, ok, sizeof(ok), l->key, l->klen, &pm);
}

static int write_root(struct list *l)
{
	const struct txn_meta m = { .type = TXN_T_LIST, .expire_ms = l->expire_ms };
	size_t len;
	char *v;
	if (l->enc == COLL_ENC_INLINE) {
		const struct coll_ebuf *b = &l->buf[l->seg[0].buf].b;
		len = INLINE_HDR + b->len;
		if (!(v = malloc(len)))
			return CC_EINTERNAL;
		memset(v, 0, INLINE_HDR);
		v[0] = COLL_ENC_INLINE;
		put32(v + 4, b->n);
		memcpy(v + INLINE_HDR, b->p, b->len);
	} else {
		len = LIST_ROOT_HDR;
		if (!(v = calloc(1, len)))
			return CC_EINTERNAL;
		const struct list_seg *h = &l->seg[0], *t = &l->seg[l->nseg - 1];
		v[0] = LIST_ENC_CHUNKED;
		put16(v + 2, l->slot);
		put32(v + 4, l->partial ? l->nchunks : l->nseg);
		put64(v + 8, l->gen);
		put64(v + 16, l->count);
		put32(v + 24, l->next_id);
		put32(v + 32, h->id);
		put32(v + 36, h->n);
		put32(v + 40, t->id);
		put32(v + 44, l->nseg > 1 ? t->n : 0);
	}
	int rc = txn_set_meta(l->t, l->key, l->klen, v, len, &m);
	free(v);
	return rc;
}

static int del_chunk(struct list *l, uint32_t id)
{
	char k[PL_PART_KEYLEN];
	bool existed;
	coll_part_key(k, l->slot, l->gen, id);
	return txn_del(l->t, k, sizeof(k), &existed);
}

/* The index part, from the whole index (list.h invariant (1)); with two
 * chunks or fewer the root says it all and nothing is written. */
static int write_index(struct list *l)
{
	if (l->partial || l->nseg <= 2)
		return 0;
	size_t len = (size_t)l->nseg * LIST_INDEX_ENT;
	char *v = malloc(len);
	if (!v)
		return CC_EINTERNAL;
	for (uint32_t i = 0; i < l->nseg; i++) {
		put32(v + (size_t)i * LIST_INDEX_ENT, l->seg[i].id);
		put16(v + (size_t)i * LIST_INDEX_ENT + 4, (uint16_t)l->seg[i].n);
	}
	char k[PL_PART_KEYLEN];
	const struct txn_meta pm = { .type = TXN_T_PART };
	coll_part_key(k, l->slot, l->gen, LIST_INDEX_ID);
	int rc = txn_set_meta(l->t, k, sizeof(k), v, len, &pm);
	free(v);
	return rc;
}

int list_save(struct list *l, bool touch)
{
	int rc;
	if (l->count == 0) {
		if (!l->exists)
			return 0;
		bool existed;
		if (l->enc == LIST_ENC_CHUNKED) {
			/* every chunk left (a pop-all took them one by one), the
			 * index and the owner */
			if ((rc = ix_load(l)) || (rc = del_chunk(l, LIST_INDEX_ID)))
				return rc;
			for (uint32_t i = 0; i < l->nseg; i++)
				if ((rc = gone_add(l, l->seg[i].id)))
					return rc;
			for (int i = 0; i < l->ngone; i++)
				if ((rc = del_chunk(l, l->gone[i])))
					return rc;
			char ok[PL_PART_KEYLEN];
			coll_part_key(ok, l->slot, l->gen, COLL_OWNER_ID);
			if ((rc = txn_del(l->t, ok, sizeof(ok), &existed)))
				return rc;
		}
		l->exists = false;
		return txn_del(l->t, l->key, l->klen, &existed);
	}
	if (l->enc == COLL_ENC_INLINE) {
		const struct coll_ebuf *b = &l->buf[l->seg[0].buf].b;
		if (b->n > COLL_INLINE_MAX || INLINE_HDR + b->len > COLL_INLINE_BYTES) {
			if ((rc = make_chunked(l)))
				return rc;
		} else {
			if (!l->dirty && !touch)
				return 0;
			l->dirty = false;
			l->exists = true;
			return write_root(l);
		}
	}
	for (uint32_t pos = 0; pos < l->nseg; pos++) {
		int bi = l->seg[pos].buf;
		if (bi < 0 || !l->buf[bi].dirty)
			continue;
		const struct coll_ebuf *b = &l->buf[bi].b;
		if (b->n > 1 && (b->len > 2 * LIST_CHUNK_BYTES || b->n > LIST_CHUNK_MAX)) {
			if (l->partial) { /* the split changes the index */
				if ((rc = ix_load(l)))
					return rc;
				pos = (uint32_t)-1; /* the positions moved: again */
				continue;
			}
			size_t half = b->len / 2 + 1;
			if ((rc = seg_split(l, pos, half < LIST_CHUNK_BYTES ? half : LIST_CHUNK_BYTES)))
				return rc;
			l->dirty = true;
		}
	}
	const struct txn_meta pm = { .type = TXN_T_PART };
	for (uint32_t pos = 0; pos < l->nseg; pos++) {
		int bi = l->seg[pos].buf;
		if (bi < 0 || !l->buf[bi].dirty)
			continue;
		char k[PL_PART_KEYLEN];
		coll_part_key(k, l->slot, l->gen, l->seg[pos].id);
		if ((rc = txn_set_meta(l->t, k, sizeof(k), l->buf[bi].b.p, l->buf[bi].b.len, &pm)))
			return rc;
		l->buf[bi].dirty = false;
	}
	for (int i = 0; i < l->ngone; i++)
		if ((rc = del_chunk(l, l->gone[i])))
			return rc;
	l->ngone = 0;
	if (!l->dirty && !touch)
		return 0;
	if ((rc = write_index(l)))
		return rc;
	l->dirty = false;
	l->exists = true;
	return write_root(l);
}

/* ---- MEMORY USAGE, COPY ---- */

int list_usage(struct list *l, uint64_t samples, uint64_t *bytes)
{
	*bytes = 0;
	if (l->enc != LIST_ENC_CHUNKED || l->nseg == 0)
		return 0;
	int rc0 = ix_load(l);
	if (rc0)
		return rc0;
	uint64_t k = samples == 0 || samples > l->nseg ? l->nseg : samples, sum = 0;
	for (uint64_t i = 0; i < k; i++) {
		struct coll_ebuf *b;
		int rc = seg_load(l, (uint32_t)(i * l->nseg / k), &b);
		if (rc)
			return rc;
		sum += st_item_bytes(PL_PART_KEYLEN, (uint32_t)b->len);
	}
	*bytes = sum * l->nseg / k + st_item_bytes(PL_PART_KEYLEN, (uint32_t)l->klen) +
		 (l->nseg > 2 ? st_item_bytes(PL_PART_KEYLEN, l->nseg * LIST_INDEX_ENT) : 0);
	return 0;
}

bool list_root_gen(const char *v, size_t vl, uint64_t *gen, uint16_t *slot)
{
	if (vl < LIST_ROOT_HDR || (uint8_t)v[0] != LIST_ENC_CHUNKED)
		return false;
	*gen = get64(v + 8);
	*slot = get16(v + 2);
	return *gen != 0;
}

int list_copy_parts(struct txn *t, const char *v, size_t vl, const char *to, size_t tolen,
		    char **nv, size_t *nvl)
{
	uint64_t ogen;
	uint16_t oslot;
	if (!list_root_gen(v, vl, &ogen, &oslot))
		return COLL_ECORRUPT;
	uint32_t nseg = get32(v + 4);
	if (vl != LIST_ROOT_HDR || nseg == 0)
		return COLL_ECORRUPT;
	const uint16_t slot = (uint16_t)pl_keyslot(to, tolen);
	const uint64_t gen = txn_unique(t);
	const struct txn_meta pm = { .type = TXN_T_PART };
	int rc;
	/* the chunk ids: the root's ends, or the index part (copied too) */
	uint32_t *ids = malloc((size_t)nseg * sizeof(*ids) + 8);
	if (!ids)
		return CC_EINTERNAL;
	ids[0] = get32(v + 32);
	ids[nseg - 1] = get32(v + 40);
	if (nseg > 2) {
		char ik[PL_PART_KEYLEN], nk[PL_PART_KEYLEN];
		const char *iv;
		size_t il;
		bool found;
		coll_part_key(ik, oslot, ogen, LIST_INDEX_ID);
		rc = txn_get(t, ik, sizeof(ik), &iv, &il, &found);
		if (rc == 0 && (!found || il != (size_t)nseg * LIST_INDEX_ENT))
			rc = COLL_ECORRUPT;
		for (uint32_t i = 0; rc == 0 && i < nseg; i++)
			ids[i] = get32(iv + (size_t)i * LIST_INDEX_ENT);
		coll_part_key(nk, slot, gen, LIST_INDEX_ID);
		if (rc == 0)
			rc = txn_set_meta(t, nk, sizeof(nk), iv, il, &pm);
		if (rc) {
			free(ids);
			return rc;
		}
	}
	for (uint32_t i = 0; i < nseg; i++) {
		char ok[PL_PART_KEYLEN], nk[PL_PART_KEYLEN];
		const char *pv;
		size_t pl;
		bool found;
		coll_part_key(ok, oslot, ogen, ids[i]);
		rc = txn_get(t, ok, sizeof(ok), &pv, &pl, &found);
		if (rc == 0 && !found)
			rc = COLL_ECORRUPT;
		coll_part_key(nk, slot, gen, ids[i]);
		if (rc == 0)
			rc = txn_set_meta(t, nk, sizeof(nk), pv, pl, &pm);
		if (rc) {
			free(ids);
			return rc;
		}
	}
	free(ids);
	char owner[PL_PART_KEYLEN];
	coll_part_key(owner, slot, gen, COLL_OWNER_ID);
	if ((rc = txn_set_meta(t, owner, sizeof(owner), to, tolen, &pm)))
		return rc;
	char *r = malloc(vl);
	if (!r)
		return CC_EINTERNAL;
	memcpy(r, v, vl);
	put16(r + 2, slot);
	put64(r + 8, gen);
	*nv = r;
	*nvl = vl;
	return 0;
}

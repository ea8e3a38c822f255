/*
 * test_storage: unit tests of the MemStore (storage/), through the shm
 * fabric exactly as a coordinator would use it.
 *
 * Covers: size classes and the hash; create/lookup of 100k keys; scan and
 * count; allocation until ST_EFULL with earlier data intact; index full;
 * reopen after clean and unclean close with recovery; refusal of foreign,
 * garbage, truncated, wrong-size and busy region files without touching
 * them; swap, retire, reap; concurrent inserts of the same keys (no
 * duplicate, no leaked block); lookups racing relocations and kick-outs
 * (never a miss); two nodes in one process (each one's bucket locks carry
 * its own id, each one's persister serves only its own inserts).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdma/fab.h"
#include "storage/st.h"
#include "storage/st_internal.h" /* white-box: ways, slot words */

static char tmpdir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	/* Regions of persistence none still open when a CHECK failed (node 2:
	 * test_two_nodes). */
	char p[128];
	for (int node = 1; node <= 2; node++)
		for (int i = 0; i <= 100; i++) {
			if (i == 0)
				snprintf(p, sizeof(p), "/dev/shm/rckv-%d-node-%d.region",
					 (int)getpid(), node);
			else
				snprintf(p, sizeof(p), "/dev/shm/rckv-%d-node-%d-%d.region",
					 (int)getpid(), node, i);
			unlink(p);
		}
}

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			exit(1);                                                           \
		}                                                                          \
	} while (0)
#define CHECK_RC(expr, want)                                                               \
	do {                                                                               \
		int rc_ = (expr);                                                          \
		CHECK(rc_ == (want), "%s = %d (%s), want %d", #expr, rc_, st_strerror(rc_), \
		      (want));                                                             \
	} while (0)

/* One node: its region, its fabric attached to it, one worker's batch. */
struct env {
	struct st_config cfg;
	struct st_region *r;
	const struct st_layout *L;
	const struct st_coord *C; /* the node as a coordinator (st_create, st_swap, st_reap) */
	struct fab *f;
	struct fab_worker *fw;
	struct fab_batch b;
	struct st_item *buf; /* ST_SLAB_BYTES */
};

static struct st_config config(uint64_t size, enum st_persistence p, uint64_t cluster)
{
	return (struct st_config){ .dir = tmpdir, .node_id = 1, .cluster_id = cluster,
				   .size = size, .persistence = p };
}

static void env_open(struct env *e, const struct st_config *cfg)
{
	char err[256] = "";
	memset(e, 0, sizeof(*e));
	e->cfg = *cfg;
	int rc = st_region_open(cfg, &e->r, err, sizeof(err));
	CHECK(rc == 0, "st_region_open: %d %s", rc, err);
	e->L = st_region_layout(e->r);
	e->C = st_region_coord(e->r);
	struct fab_config fc = { .backend = "shm", .self = 1 };
	CHECK(fab_open(&fc, &e->f, err, sizeof(err)) == 0, "fab_open: %s", err);
	CHECK(fab_attach(e->f, 1, st_region_base(e->r), e->L->size) == 0, "fab_attach");
	e->fw = fab_worker_create(e->f, 0);
	fab_batch_init(&e->b, e->fw, (struct fab_waiter){ 0 }, NULL);
	e->buf = malloc(ST_SLAB_BYTES);
	CHECK(e->fw && e->buf, "alloc");
}

static void env_close(struct env *e, bool clean)
{
	free(e->buf);
	fab_worker_destroy(e->fw);
	fab_close(e->f);
	st_region_close(e->r, clean);
}

static int keyf(char *k, int i) { return sprintf(k, "key:%07d", i); }

static int create(struct env *e, int i, struct st_ref *ref)
{
	char k[32];
	int n = keyf(k, i);
	return st_create(&e->b, e->C, 0, 1, k, n, st_hash(k, n), ref, e->buf);
}

static int lookup(struct env *e, int i, struct st_ref *ref)
{
	char k[32];
	int n = keyf(k, i);
	return st_lookup(&e->b, e->L, 1, k, n, st_hash(k, n), ref, e->buf);
}

/* Commit a value the way a cc protocol would: one WRITE of data + value. */
static void put_value(struct env *e, const struct st_ref *ref, uint32_t klen, const char *val,
		      uint32_t vlen)
{
	char tmp[4096];
	uint64_t data = st_make_data(vlen, 0);
	memcpy(tmp, &data, 8);
	memcpy(tmp + 8, val, vlen);
	/* data word, then key (unchanged, skip), then value */
	CHECK_RC(fab_write1(&e->b, ref->node, ref->off + 40, &data, 8), 0);
	if (vlen)
		CHECK_RC(fab_write1(&e->b, ref->node, ref->off + 48 + klen, val, vlen), 0);
}

static bool bit_used(struct env *e, const struct st_ref *ref)
{
	const struct st_layout *L = e->L;
	uint64_t rel = ref->off - L->slab_off, slab = rel / ST_SLAB_BYTES;
	uint64_t idx = (rel % ST_SLAB_BYTES) / st_class_size(ref->cls);
	const uint64_t *bm = (const uint64_t *)((char *)st_region_base(e->r) + L->bitmap_off +
						slab * ST_SLAB_BITMAP_BYTES);
	return bm[idx / 64] >> (idx % 64) & 1;
}

static uint64_t bits_in_use(struct env *e)
{
	const struct st_layout *L = e->L;
	const uint64_t *bm = (const uint64_t *)((char *)st_region_base(e->r) + L->bitmap_off);
	uint64_t n = 0;
	for (uint64_t i = 0; i < L->slab_count * ST_SLAB_BITMAP_BYTES / 8; i++)
		n += (uint64_t)__builtin_popcountll(bm[i]);
	return n;
}

static uint64_t file_hash(const char *path)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	uint64_t h = 1469598103934665603ull;
	static char blk[1 << 16];
	ssize_t n;
	while ((n = read(fd, blk, sizeof(blk))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (unsigned char)blk[i]) * 1099511628211ull;
	close(fd);
	return h;
}

/*
 * A stale holder on a reaped block (alloc.c invariant (5)): a coordinator
 * that still had the address of a reaped placeholder wins a shared count
 * on the free block's lock word (cc/protocols/nowait.c's shared mode), and
 * takes it off after its next READ shows the block is not its key's. The
 * key's next placeholder may be that very block. Its lock word must come
 * out free once the stale holder is gone: the allocator must not clear
 * the word under the count, or the count's removal leaves a lock that
 * nobody holds (every transaction on the key aborted until txn-timeout).
 */
#define STALE_COUNT 0xff00000000000100ull /* nowait's shared word: node 2's lane, 1 */

struct stale_holder {
	uint64_t *word; /* the reaped block's lock word */
	int pauses;
	bool leave_in_pause; /* the holder leaves while the allocator waits */
	bool gone;
};

static void stale_leave(struct stale_holder *x)
{
	__atomic_fetch_sub(x->word, STALE_COUNT & 0xffffffffffffffull, __ATOMIC_SEQ_CST);
	uint64_t tag = STALE_COUNT & ~0xffffffffffffffull;
	__atomic_compare_exchange_n(x->word, &tag, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	x->gone = true;
}

static void stale_pause(void *ctx, uint64_t ns)
{
	struct stale_holder *x = ctx;
	(void)ns;
	x->pauses++;
	if (x->leave_in_pause && !x->gone)
		stale_leave(x);
}

static void stale_count_case(bool leave_in_pause)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	char *base = st_region_base(e.r);
	const char *K = "fresh-key";
	uint32_t kl = (uint32_t)strlen(K);
	uint64_t h = st_hash(K, kl);
	struct st_ref p1, p2;
	CHECK_RC(st_create(&e.b, e.C, 0, 1, K, kl, h, &p1, e.buf), 0);
	CHECK(*(uint64_t *)(base + p1.off) == 0, "a placeholder starts unlocked");
	CHECK_RC(st_reap(&e.b, e.C, h, &p1, 0x51), 0);
	struct stale_holder x = { .word = (uint64_t *)(base + p1.off),
				  .leave_in_pause = leave_in_pause };
	uint64_t zero = 0;
	CHECK(__atomic_compare_exchange_n(x.word, &zero, STALE_COUNT, false, __ATOMIC_SEQ_CST,
					  __ATOMIC_SEQ_CST),
	      "the stale count lands on the free block");

	struct fab_batch sb;
	fab_batch_init(&sb, e.fw, (struct fab_waiter){ .wait = stale_pause, .ctx = &x }, NULL);
	CHECK_RC(st_create(&sb, e.C, 0, 1, K, kl, h, &p2, e.buf), 0);
	if (!x.gone)
		stale_leave(&x);
	uint64_t w1 = *x.word, w2 = *(uint64_t *)(base + p2.off);
	CHECK(w1 == 0 && w2 == 0,
	      "lock words after the stale holder left: reaped block %#llx, new placeholder %#llx "
	      "(%s block; the allocator paused %d times)",
	      (unsigned long long)w1, (unsigned long long)w2, p2.off == p1.off ? "same" : "another",
	      x.pauses);
	if (leave_in_pause)
		CHECK(p2.off == p1.off && x.pauses >= 1, "waited for the holder, then took its block");
	else
		CHECK(p2.off != p1.off, "a block held for good is not handed out");
	struct st_ref ref;
	CHECK_RC(st_lookup(&e.b, e.L, 1, K, kl, h, &ref, e.buf), 0);
	CHECK(ref.off == p2.off && ref.gen == p2.gen, "the key resolves to its new placeholder");
	env_close(&e, true);
}

static void test_stale_count_on_reused_block(void)
{
	stale_count_case(true);
	stale_count_case(false);
}

/* st_alloc claims the lock word; st_free gives the claim (and a lock word
 * the caller wrote) back, so the block is handed out again at once. */
static void test_alloc_claims_lock(void)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	char *base = st_region_base(e.r);
	struct st_ref a, b;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, 8, &a), 0);
	CHECK(*(uint64_t *)(base + a.off) == ST_LOCK_CLAIMED, "st_alloc claims the lock word");
	CHECK_RC(st_free(&e.b, e.L, &a, 0), 0);
	CHECK(*(uint64_t *)(base + a.off) == 0, "st_free gives the claim back");
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, 8, &b), 0);
	CHECK(b.off == a.off, "the freed block is taken again");
	*(uint64_t *)(base + b.off) = 0x0300000000000041ull; /* a relocation's owner word */
	CHECK_RC(st_free(&e.b, e.L, &b, 0x0300000000000041ull), 0);
	CHECK(*(uint64_t *)(base + b.off) == 0, "st_free gives the caller's lock back");
	env_close(&e, true);
}

/* ---- classes and hash ---- */

static void test_classes(void)
{
	unsigned n = st_class_count();
	CHECK(n > 0 && n <= 128, "class count %u fits a slot word's 7 class bits", n);
	CHECK(st_class_size(0) == ST_MIN_BLOCK, "first class");
	CHECK(st_class_size((uint8_t)(n - 1)) == ST_SLAB_BYTES, "last class");
	for (unsigned c = 1; c < n; c++) {
		uint32_t sz = st_class_size((uint8_t)c), prev = st_class_size((uint8_t)(c - 1));
		/* 16-aligned blocks: every item word 8-aligned, offset/16 in a slot */
		CHECK(sz > prev && sz % 16 == 0, "class %u size %u", c, sz);
		/* The step below a class is the most a block of it wastes on an
		 * item it holds (the item is bigger than the class below): at
		 * most 16 bytes up to 256, 1/16 of the block up to 4 KiB, 1/4
		 * above. */
		uint32_t step = sz - prev;
		if (sz <= 256)
			CHECK(step <= 16, "class %u (%u): step %u", c, sz, step);
		else if (sz <= 4096)
			CHECK(step * 16 <= sz, "class %u (%u): step %u over 1/16", c, sz, step);
		else
			CHECK(step * 4 <= sz, "class %u (%u): step %u over 1/4", c, sz, step);
	}
	CHECK(st_class_size((uint8_t)n) == 0, "past the last class");
	/* Every length lands in the smallest class that holds it. */
	for (uint32_t need = 48; need <= ST_SLAB_BYTES; need++) {
		int c = st_class_for(0, need - 48);
		uint32_t want = (need + 7) & ~7u;
		if (!(c >= 0 && st_class_size((uint8_t)c) >= want &&
		      (c == 0 || st_class_size((uint8_t)(c - 1)) < want))) {
			CHECK(0, "need %u -> class %d (%u)", need, c,
			      c >= 0 ? st_class_size((uint8_t)c) : 0);
			break;
		}
	}
	/* The example: a 1,000-byte value under a 16-byte key. */
	CHECK(st_class_size((uint8_t)st_class_for(16, 1000)) == 1088, "1064-byte item in %u",
	      st_class_size((uint8_t)st_class_for(16, 1000)));
	CHECK(st_class_size((uint8_t)st_class_for(16, 100)) == 176, "168-byte item in %u",
	      st_class_size((uint8_t)st_class_for(16, 100)));
	CHECK(st_class_for(16, ST_SLAB_BYTES - 64) == (int)n - 1, "exact fit of the largest");
	CHECK(st_class_for(16, ST_SLAB_BYTES - 63) == -1, "too big");
	CHECK(st_class_for(UINT32_MAX, UINT32_MAX) == -1, "no overflow");
	/* White-box: a slab's blocks need at most 1024 bitmap words (the
	 * allocator's hint packs the word in 10 bits) and every class and
	 * the region's last offset survive a slot word. */
	for (unsigned c = 0; c < n; c++) {
		CHECK(st_cwords(c) <= 1024, "class %u: %u bitmap words", c, st_cwords(c));
		uint64_t off = ST_MAX_REGION - st_csize(c);
		uint64_t s = st_slot_make(off, (uint8_t)c, 2, 0x2a5a5);
		CHECK(st_slot_off(s) == off && st_slot_cls(s) == c && st_slot_way(s) == 2 &&
			      st_slot_tag(s) == 0x2a5a5,
		      "slot word of class %u", c);
	}
}

/* Slab-table words of a region: unassigned slabs, and slabs of class c. */
static uint64_t slabs_of(struct env *e, uint64_t c_plus_1)
{
	const uint64_t *tab = (const uint64_t *)((char *)st_region_base(e->r) + e->L->slabtab_off);
	uint64_t n = 0;
	for (uint64_t s = 0; s < e->L->slab_count; s++)
		n += tab[s] == c_plus_1;
	return n;
}

/*
 * alloc.c invariant (6): a fine class takes a slab only while more than
 * ST_SLAB_RESERVE stay unassigned; otherwise its items go to the smallest
 * coarse class that holds them. A small region allocates as layout
 * version 2 did (coarse classes only); a big one gives fine classes their
 * slabs until the reserve is reached, and never below it.
 */
static void test_class_reserve(void)
{
	struct st_config cfg = config(64ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	CHECK(e.L->slab_count <= ST_SLAB_RESERVE, "64 MiB: %llu slabs",
	      (unsigned long long)e.L->slab_count);
	struct st_ref ref;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 16, 1000, &ref), 0);
	CHECK(st_class_size(ref.cls) == 1536, "small region: 1064 bytes in %u (coarse)",
	      st_class_size(ref.cls));
	CHECK(st_class_coarse(ref.cls) && slabs_of(&e, 0) == e.L->slab_count - 1,
	      "one slab assigned");
	env_close(&e, true);

	cfg = config(256ull << 20, ST_PERSIST_NONE, 0);
	env_open(&e, &cfg);
	const uint64_t spare = e.L->slab_count - ST_SLAB_RESERVE;
	CHECK(e.L->slab_count > ST_SLAB_RESERVE + 4, "256 MiB: %llu slabs",
	      (unsigned long long)e.L->slab_count);
	CHECK_RC(st_alloc(&e.b, e.L, 1, 16, 1000, &ref), 0);
	CHECK(st_class_size(ref.cls) == 1088, "big region: 1064 bytes in %u (fine)",
	      st_class_size(ref.cls));
	/* One item of every fine class from 256 bytes up: the first `spare`
	 * classes get slabs, then items round up to coarse classes. */
	uint64_t fine = 1, coarse = 0;
	for (unsigned c = ST_CLASS_FINE_FIRST; c < ST_CLASS_WIDE_FIRST; c++) {
		if (st_class_coarse(c) || st_csize(c) == 1088)
			continue;
		uint32_t vlen = st_csize(c) - 48 - 16;
		CHECK_RC(st_alloc(&e.b, e.L, 1, 16, vlen, &ref), 0);
		if (st_class_coarse(ref.cls)) {
			CHECK(st_class_size(ref.cls) >= st_csize(c), "rounded up");
			coarse++;
		} else {
			CHECK(ref.cls == c, "class %u got %u", c, ref.cls);
			fine++;
			CHECK(slabs_of(&e, 0) >= ST_SLAB_RESERVE, "%llu unassigned slabs left",
			      (unsigned long long)slabs_of(&e, 0));
		}
	}
	CHECK(fine == spare && coarse > 0, "%llu fine classes got slabs, %llu spare",
	      (unsigned long long)fine, (unsigned long long)spare);
	env_close(&e, true);
}

static void test_hash(void)
{
	/* Regions on disk depend on these values: a change of st_hash makes
	 * every existing region unreadable. Update only with the layout
	 * version. */
	CHECK(st_hash("", 0) == 0x7005c7b8923636dbull, "hash('') = %#llx",
	      (unsigned long long)st_hash("", 0));
	CHECK(st_hash("foo", 3) == 0xf4a2a5b7015105daull, "hash('foo') = %#llx",
	      (unsigned long long)st_hash("foo", 3));
	CHECK(st_hash("key:0000001", 11) == 0xc207643bd2fa5c93ull, "hash('key:0000001') = %#llx",
	      (unsigned long long)st_hash("key:0000001", 11));
	/* Different lengths of zeros differ; one flipped bit changes about
	 * half of the output bits. */
	char z[64] = { 0 };
	for (int i = 0; i < 63; i++)
		CHECK(st_hash(z, i) != st_hash(z, i + 1), "len %d", i);
	uint64_t flips = 0;
	for (int i = 0; i < 32 * 8; i++) {
		char a[32];
		memset(a, 'x', sizeof(a));
		uint64_t h0 = st_hash(a, sizeof(a));
		a[i / 8] ^= (char)(1 << (i % 8));
		flips += (uint64_t)__builtin_popcountll(h0 ^ st_hash(a, sizeof(a)));
	}
	double avg = (double)flips / 256;
	CHECK(avg > 28 && avg < 36, "avalanche %.1f bits", avg);
}

/* ---- create, lookup, scan ---- */

#define NKEYS 100000

struct seen {
	uint8_t *hits;
	uint64_t calls;
	int stop_every; /* fn returns 1 every n-th call (0: never) */
};

static int seen_fn(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct seen *s = arg;
	(void)it;
	CHECK(klen == 11 && memcmp(key, "key:", 4) == 0, "scan key %.*s", (int)klen, key);
	int i = atoi(key + 4);
	CHECK(i >= 0 && i < NKEYS, "key index %d", i);
	s->hits[i]++;
	s->calls++;
	return s->stop_every && s->calls % s->stop_every == 0;
}

static void scan_all(struct env *e, int stop_every, uint64_t count, uint8_t *hits)
{
	struct seen s = { .hits = hits, .stop_every = stop_every };
	memset(hits, 0, NKEYS);
	uint64_t cursor = 0;
	int rounds = 0;
	do {
		st_scan(e->r, &cursor, count, seen_fn, &s);
		CHECK(++rounds < 100000000, "scan does not end");
	} while (cursor != 0);
}

static void test_create_lookup(void)
{
	struct env e;
	struct st_config cfg = config(64ull << 20, ST_PERSIST_PROCESS, 7);
	env_open(&e, &cfg);
	CHECK(!st_region_reopened(e.r) && st_region_was_clean(e.r), "fresh region");
	struct st_ref *refs = calloc(NKEYS, sizeof(*refs));
	struct st_ref ref;
	char k[32];

	for (int i = 0; i < NKEYS; i++) {
		CHECK_RC(create(&e, i, &refs[i]), 0);
		int n = keyf(k, i);
		const struct st_item *it = e.buf;
		CHECK(refs[i].node == 1 && refs[i].gen != 0 && refs[i].cls == 0, "ref of %d", i);
		CHECK(st_data_flags(it->data) == ST_F_ABSENT && st_data_vlen(it->data) == 0 &&
			      it->lock == 0 && it->ver == 0 && it->meta[0] == 0 && it->meta[1] == 0,
		      "placeholder of %d", i);
		CHECK(st_ident_gen(it->ident) == refs[i].gen && st_ident_klen(it->ident) == (uint32_t)n &&
			      memcmp(st_item_key(it), k, n) == 0,
		      "ident/key of %d", i);
	}
	for (int i = 0; i < NKEYS; i++) {
		CHECK_RC(lookup(&e, i, &ref), 0);
		CHECK(ref.off == refs[i].off && ref.gen == refs[i].gen && ref.cls == refs[i].cls,
		      "lookup %d", i);
		CHECK(st_data_flags(e.buf->data) & ST_F_ABSENT, "still absent");
		/* create of an existing key returns it */
		if (i % 97 == 0) {
			CHECK_RC(create(&e, i, &ref), 0);
			CHECK(ref.off == refs[i].off, "create existing %d", i);
		}
	}
	CHECK_RC(lookup(&e, NKEYS + 1, &ref), ST_ENOTFOUND);
	CHECK_RC(st_lookup(&e.b, e.L, 1, "", 0, st_hash("", 0), &ref, e.buf), ST_ENOTFOUND);
	CHECK(bits_in_use(&e) == NKEYS, "blocks in use %llu", (unsigned long long)bits_in_use(&e));

	/* Nothing live yet: placeholders are invisible to scans. */
	CHECK(st_count(e.r) == 0, "count of placeholders %llu", (unsigned long long)st_count(e.r));
	for (int i = 0; i < NKEYS; i += 2)
		put_value(&e, &refs[i], 11, "v", 1);
	CHECK(st_count(e.r) == NKEYS / 2, "count %llu", (unsigned long long)st_count(e.r));
	uint8_t *hits = malloc(NKEYS);
	const int stops[] = { 0, 1, 3, 7, 0 };
	const uint64_t counts[] = { 1, 5, 10, 1000, UINT64_MAX };
	for (int v = 0; v < 5; v++) {
		scan_all(&e, stops[v], counts[v], hits);
		for (int i = 0; i < NKEYS; i++)
			CHECK(hits[i] == (i % 2 == 0), "scan(stop %d, count %llu) saw key %d %d times",
			      stops[v], (unsigned long long)counts[v], i, hits[i]);
	}

	/* Reopen after a clean close: everything is where it was. */
	uint64_t size = e.L->size;
	env_close(&e, true);
	env_open(&e, &cfg);
	CHECK(st_region_reopened(e.r) && st_region_was_clean(e.r), "clean reopen");
	CHECK(e.L->size == size && st_region_header(e.r)->incarnation == 2, "header after reopen");
	for (int i = 0; i < NKEYS; i += 7) {
		CHECK_RC(lookup(&e, i, &ref), 0);
		CHECK(ref.off == refs[i].off && ref.gen == refs[i].gen, "after reopen %d", i);
	}
	CHECK(st_count(e.r) == NKEYS / 2, "count after reopen");

	/* Unclean stop with debris: a lock held, a bucket lock held, a block
	 * allocated but never published, and a lock held on that free block
	 * (a latch won through a stale address). Recovery clears all of
	 * them. */
	struct st_ref lost;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 10, 500, &lost), 0);
	CHECK(bit_used(&e, &lost), "lost block is taken");
	uint64_t one = 0x1234, owner = 0x0100000000012345ull;
	CHECK_RC(fab_write1(&e.b, 1, refs[4].off, &one, 8), 0);
	CHECK_RC(fab_write1(&e.b, 1, lost.off, &owner, 8), 0);
	CHECK_RC(fab_write1(&e.b, 1, e.L->index_off + 64 * 5, &one, 8), 0);
	env_close(&e, false);
	env_open(&e, &cfg);
	CHECK(st_region_reopened(e.r) && !st_region_was_clean(e.r), "unclean reopen");
	uint64_t live = 0;
	CHECK_RC(st_recover(e.r, &live), 0);
	CHECK(live == NKEYS / 2, "recovered live keys %llu", (unsigned long long)live);
	CHECK(!bit_used(&e, &lost), "unpublished block freed by recovery");
	CHECK(*(uint64_t *)((char *)st_region_base(e.r) + lost.off) == 0,
	      "a free block's lock word reset by recovery");
	CHECK(bits_in_use(&e) == NKEYS, "blocks in use after recovery");
	CHECK_RC(lookup(&e, 4, &ref), 0);
	CHECK(e.buf->lock == 0, "lock reset");
	CHECK(*(uint64_t *)((char *)st_region_base(e.r) + e.L->index_off + 64 * 5) == 0,
	      "bucket lock reset");
	for (int i = 0; i < NKEYS; i++) {
		CHECK_RC(lookup(&e, i, &ref), 0);
		CHECK(ref.off == refs[i].off, "after recovery %d", i);
	}
	/* The lost block's slab stays assigned (it has live blocks); new
	 * allocations still work and reuse freed space. */
	CHECK_RC(create(&e, NKEYS + 5, &ref), 0);

	/* st_reset_meta keeps ver, clears lock and meta. */
	uint64_t words[4] = { 9, 42, 5, 6 };
	CHECK_RC(fab_write1(&e.b, 1, refs[0].off, words, 32), 0);
	st_reset_meta(e.r);
	CHECK_RC(lookup(&e, 0, &ref), 0);
	CHECK(e.buf->lock == 0 && e.buf->ver == 42 && e.buf->meta[0] == 0 && e.buf->meta[1] == 0,
	      "reset_meta");

	/* FLUSHALL: nothing left, and the space is usable again. */
	st_flush(e.r);
	CHECK(st_count(e.r) == 0 && bits_in_use(&e) == 0, "flushed");
	CHECK_RC(lookup(&e, 0, &ref), ST_ENOTFOUND);
	for (int i = 0; i < 1000; i++)
		CHECK_RC(create(&e, i, &ref), 0);
	CHECK(bits_in_use(&e) == 1000, "after flush");
	free(hits);
	free(refs);
	env_close(&e, true);
	char path[256];
	snprintf(path, sizeof(path), "%s/node-1.region", tmpdir);
	unlink(path);
}

/* ---- refusals ---- */

static void expect_refusal(const struct st_config *cfg, const char *path, int want,
			   const char *reason)
{
	struct stat st0;
	bool exists = stat(path, &st0) == 0;
	uint64_t h0 = exists ? file_hash(path) : 0;
	char err[256] = "";
	struct st_region *r = NULL;
	int rc = st_region_open(cfg, &r, err, sizeof(err));
	CHECK(rc == want, "open %s: rc %d (%s), want %d", path, rc, err, want);
	CHECK(strstr(err, reason) != NULL, "error '%s' should say '%s'", err, reason);
	if (exists) {
		struct stat st1;
		CHECK(stat(path, &st1) == 0 && st1.st_size == st0.st_size &&
			      file_hash(path) == h0,
		      "%s was modified by a refused open", path);
	}
}

static void test_refusals(void)
{
	char path[256], other[256];
	snprintf(path, sizeof(path), "%s/node-1.region", tmpdir);
	struct st_config cfg = config(32ull << 20, ST_PERSIST_POWER, 7);
	struct env e;
	env_open(&e, &cfg);
	struct st_ref ref;
	CHECK_RC(create(&e, 1, &ref), 0);

	/* A second process (here: open) on the same file. */
	expect_refusal(&cfg, path, ST_EBUSY, "in use");
	env_close(&e, true);

	struct st_config c = cfg;
	c.cluster_id = 8;
	expect_refusal(&c, path, ST_ECORRUPT, "created for cluster 7, this node is in cluster 8");
	c = cfg;
	c.size = 64ull << 20;
	expect_refusal(&c, path, ST_ECORRUPT, "config says memory");
	c = cfg;
	c.size = 8ull << 20;
	expect_refusal(&c, path, ST_ECORRUPT, "too small");
	/* The file of node 1 under node 2's name. */
	snprintf(other, sizeof(other), "%s/node-2.region", tmpdir);
	CHECK(rename(path, other) == 0, "rename");
	c = cfg;
	c.node_id = 2;
	expect_refusal(&c, other, ST_ECORRUPT, "created for node 1, this is node 2");
	CHECK(rename(other, path) == 0, "rename back");

	/* A region of layout version 2 (other size classes, other slot
	 * words): refused as such, and left as it is. */
	int vfd = open(path, O_RDWR);
	CHECK(vfd >= 0, "open %s", path);
	uint64_t ver = 0, v2 = 2;
	CHECK(pread(vfd, &ver, 8, offsetof(struct st_header, layout_version)) == 8 &&
		      ver == ST_LAYOUT_VERSION,
	      "layout version %llu", (unsigned long long)ver);
	CHECK(pwrite(vfd, &v2, 8, offsetof(struct st_header, layout_version)) == 8, "pwrite");
	uint64_t before = file_hash(path);
	expect_refusal(&cfg, path, ST_ECORRUPT,
		       "layout version 2, this build reads version 3 (written by an older build");
	CHECK(file_hash(path) == before, "a refused region is not written");
	CHECK(pwrite(vfd, &ver, 8, offsetof(struct st_header, layout_version)) == 8, "pwrite");
	close(vfd);

	/* Still fine after all that. */
	env_open(&e, &cfg);
	CHECK_RC(lookup(&e, 1, &ref), 0);
	env_close(&e, true);

	/* Truncated. */
	uint64_t h = file_hash(path);
	CHECK(truncate(path, 16ull << 20) == 0, "truncate");
	expect_refusal(&cfg, path, ST_ECORRUPT, "truncated");
	CHECK(truncate(path, 100) == 0, "truncate");
	expect_refusal(&cfg, path, ST_ECORRUPT, "truncated");
	(void)h;

	/* Garbage of the right size. */
	int fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0, "open");
	char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	for (uint64_t off = 0; off < cfg.size; off += sizeof(junk))
		CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk), "write");
	close(fd);
	expect_refusal(&cfg, path, ST_ECORRUPT, "not an rckv region (bad magic)");
	unlink(path);
}

/* ---- full ---- */

static void test_full(void)
{
	struct st_config cfg = config(32ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	enum { MAXB = 100000 };
	struct st_ref *refs = calloc(MAXB, sizeof(*refs));
	int n = 0, rc;
	char val[1000];
	/* 1000-byte items until the memory is gone; each gets its own bytes. */
	while ((rc = st_alloc(&e.b, e.L, 1, 8, sizeof(val), &refs[n])) == 0) {
		CHECK(n + 1 < MAXB, "never full");
		memset(val, 'a' + n % 26, sizeof(val));
		memcpy(val, &n, sizeof(n));
		CHECK_RC(fab_write1(&e.b, 1, refs[n].off + 48 + 8, val, sizeof(val)), 0);
		n++;
	}
	CHECK_RC(rc, ST_EFULL);
	uint32_t per_slab = ST_SLAB_BYTES / st_class_size(refs[0].cls);
	CHECK((uint64_t)n == per_slab * e.L->slab_count, "%d blocks of %u in %llu slabs", n,
	      st_class_size(refs[0].cls), (unsigned long long)e.L->slab_count);
	/* Every slab went to that class: a small item finds no room either. */
	struct st_ref small;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, 8, &small), ST_EFULL);
	for (int i = 0; i < n; i++) {
		CHECK_RC(fab_read1(&e.b, 1, refs[i].off + 48 + 8, val, sizeof(val)), 0);
		int got;
		memcpy(&got, val, sizeof(got));
		CHECK(got == i && val[999] == 'a' + i % 26, "block %d overwritten", i);
		uint64_t ident;
		CHECK_RC(fab_read1(&e.b, 1, refs[i].off + 32, &ident, 8), 0);
		CHECK(st_ident_gen(ident) == refs[i].gen && st_ident_klen(ident) == 8, "ident %d", i);
		for (int j = 0; j < i && i < 64; j++)
			CHECK(refs[j].off != refs[i].off, "block given twice");
	}
	/* Give one back: exactly that one comes back, with a new generation. */
	CHECK_RC(st_free(&e.b, e.L, &refs[17], 0), 0);
	CHECK_RC(st_free(&e.b, e.L, &refs[17], 0), ST_ESTALE);
	struct st_ref again;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, sizeof(val), &again), 0);
	CHECK(again.off == refs[17].off && again.gen != refs[17].gen, "reuse");
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, sizeof(val), &again), ST_EFULL);
	free(refs);

	/* Index full: tiny items on a fresh small region fill the 21 slots of
	 * some key's buckets before the memory runs out. */
	st_flush(e.r);
	int i = 0;
	struct st_ref ref;
	while ((rc = create(&e, i, &ref)) == 0)
		i++;
	CHECK_RC(rc, ST_EFULL);
	uint64_t slots = e.L->index_buckets * ST_BUCKET_SLOTS;
	printf("index full at %d keys: load %.1f%% of %llu slots (%llu blocks free)\n", i,
	       100.0 * i / slots, (unsigned long long)slots,
	       (unsigned long long)(e.L->slab_count * (ST_SLAB_BYTES / 64) - bits_in_use(&e)));
	/* With the kick-out, ~93% (one level, simulated); ~50% without. */
	CHECK((double)i / slots > 0.85, "index load at first full %.2f", (double)i / slots);
	CHECK(bits_in_use(&e) == (uint64_t)i, "a failed create leaks no block");
	/* Every key survived the kick-outs, each in its own block. */
	uint8_t *used = calloc(e.L->slab_count * (ST_SLAB_BYTES / 64), 1);
	for (int j = 0; j < i; j++) {
		CHECK_RC(lookup(&e, j, &ref), 0);
		uint64_t blk = (ref.off - e.L->slab_off) / 64;
		CHECK(!used[blk]++, "two keys in one block");
	}
	free(used);
	env_close(&e, true);
}

/* ---- swap, retire, reap ---- */

static void test_swap_retire_reap(void)
{
	struct st_config cfg = config(32ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	struct st_ref a, big, ref;
	char k[32];
	int kl = keyf(k, 1);
	uint64_t h = st_hash(k, kl);
	CHECK_RC(create(&e, 1, &a), 0);
	put_value(&e, &a, kl, "small", 5);

	/* Relocate to a bigger block: alloc, write the item, swap, retire. */
	char val[700];
	memset(val, 'z', sizeof(val));
	CHECK_RC(st_alloc(&e.b, e.L, 1, kl, sizeof(val), &big), 0);
	CHECK(big.cls > a.cls, "bigger class");
	struct st_item *it = calloc(1, 2048);
	it->ident = st_make_ident(big.gen, kl, big.cls);
	it->data = st_make_data(sizeof(val), 0);
	memcpy(it + 1, k, kl);
	memcpy((char *)(it + 1) + kl, val, sizeof(val));
	CHECK_RC(fab_write1(&e.b, 1, big.off, it, 48 + kl + sizeof(val)), 0);
	CHECK_RC(st_swap(&e.b, e.C, 0, h, &a, &big), 0);
	CHECK_RC(st_swap(&e.b, e.C, 0, h, &a, &big), ST_ESTALE);
	CHECK_RC(lookup(&e, 1, &ref), 0);
	CHECK(ref.off == big.off && ref.gen == big.gen && st_data_vlen(e.buf->data) == sizeof(val) &&
		      memcmp(st_item_val(e.buf), val, sizeof(val)) == 0,
	      "lookup after swap");
	CHECK(bit_used(&e, &a), "old still allocated before retire");
	CHECK_RC(st_retire(&e.b, e.L, &a), 0);
	CHECK(!bit_used(&e, &a), "retired block is free");
	uint64_t data;
	CHECK_RC(fab_read1(&e.b, 1, a.off + 40, &data, 8), 0);
	CHECK((st_data_flags(data) & ST_F_DEAD) && st_data_vlen(data) == 5, "DEAD keeps vlen");
	CHECK_RC(st_retire(&e.b, e.L, &a), ST_ESTALE);
	struct st_ref wrong = big;
	wrong.gen++;
	CHECK_RC(st_retire(&e.b, e.L, &wrong), ST_ESTALE);
	CHECK(st_count(e.r) == 1, "one live key");

	/* The freed block gets a new generation when reused. */
	struct st_ref b2;
	CHECK_RC(create(&e, 2, &b2), 0);
	CHECK(b2.off != a.off || b2.gen != a.gen, "recycled block has a new gen");

	/* Reap: only ABSENT, unlocked items of the right generation. */
	const uint64_t owner = 0xabcdef;
	kl = keyf(k, 2);
	uint64_t h2 = st_hash(k, kl);
	uint64_t lockv = 77;
	CHECK_RC(fab_write1(&e.b, 1, b2.off, &lockv, 8), 0);
	CHECK_RC(st_reap(&e.b, e.C, h2, &b2, owner), ST_EBUSY); /* locked */
	lockv = 0;
	CHECK_RC(fab_write1(&e.b, 1, b2.off, &lockv, 8), 0);
	wrong = b2;
	wrong.gen--;
	CHECK_RC(st_reap(&e.b, e.C, h2, &wrong, owner), ST_ESTALE);
	CHECK_RC(fab_read1(&e.b, 1, b2.off, &lockv, 8), 0);
	CHECK(lockv == 0, "failed reap restores the lock");
	CHECK_RC(st_reap(&e.b, e.C, h, &big, owner), ST_EBUSY); /* has a value */
	CHECK_RC(st_reap(&e.b, e.C, h2, &b2, owner), 0);
	CHECK_RC(lookup(&e, 2, &ref), ST_ENOTFOUND);
	CHECK(!bit_used(&e, &b2), "reaped block freed");
	CHECK_RC(fab_read1(&e.b, 1, b2.off, e.buf, 48), 0);
	CHECK(e.buf->lock == 0 && (st_data_flags(e.buf->data) & ST_F_DEAD), "reaped: DEAD, unlocked");
	CHECK_RC(st_reap(&e.b, e.C, h2, &b2, owner), ST_ESTALE);
	/* Re-create after reap: a new item (maybe the same block, new gen). */
	CHECK_RC(create(&e, 2, &ref), 0);
	CHECK(ref.off != b2.off || ref.gen != b2.gen, "re-created");
	CHECK_RC(lookup(&e, 1, &ref), 0);
	CHECK(ref.off == big.off, "key 1 untouched");
	free(it);
	env_close(&e, true);
}

/* ---- concurrency ---- */

#define CKEYS 10000
#define CTHREADS 4

struct cshared {
	struct env *e;
	uint64_t offs[CTHREADS][CKEYS];
};
struct carg {
	struct cshared *sh;
	int t;
};

static void *create_thread(void *p)
{
	struct carg *a = p;
	struct env *e = a->sh->e;
	struct fab_worker *fw = fab_worker_create(e->f, a->t + 1);
	struct fab_batch b;
	fab_batch_init(&b, fw, (struct fab_waiter){ 0 }, NULL);
	struct st_item *buf = malloc(ST_SLAB_BYTES);
	for (int n = 0; n < CKEYS; n++) {
		/* Each thread walks the keys from its own start, so threads
		 * collide on every key at different times. */
		int i = (n + a->t * (CKEYS / CTHREADS / 2)) % CKEYS;
		char k[32];
		int kl = keyf(k, i);
		struct st_ref ref;
		int rc = st_create(&b, e->C, 0, 1, k, kl, st_hash(k, kl), &ref, buf);
		CHECK(rc == 0, "thread %d create %d: %s", a->t, i, st_strerror(rc));
		CHECK(memcmp(st_item_key(buf), k, kl) == 0, "buf key");
		a->sh->offs[a->t][i] = ref.off;
	}
	free(buf);
	fab_worker_destroy(fw);
	return NULL;
}

static void test_concurrent_create(void)
{
	struct st_config cfg = config(64ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	struct cshared *sh = calloc(1, sizeof(*sh));
	sh->e = &e;
	pthread_t th[CTHREADS];
	struct carg args[CTHREADS];
	for (int t = 0; t < CTHREADS; t++) {
		args[t] = (struct carg){ sh, t };
		CHECK(pthread_create(&th[t], NULL, create_thread, &args[t]) == 0, "pthread_create");
	}
	for (int t = 0; t < CTHREADS; t++)
		pthread_join(th[t], NULL);
	for (int i = 0; i < CKEYS; i++)
		for (int t = 1; t < CTHREADS; t++)
			CHECK(sh->offs[t][i] == sh->offs[0][i], "key %d: thread %d got %#llx, thread 0 %#llx",
			      i, t, (unsigned long long)sh->offs[t][i],
			      (unsigned long long)sh->offs[0][i]);
	CHECK(bits_in_use(&e) == CKEYS, "blocks in use %llu (losers' blocks leaked?)",
	      (unsigned long long)bits_in_use(&e));
	/* Make them visible to scans and count distinct keys. */
	struct st_ref ref;
	for (int i = 0; i < CKEYS; i++) {
		CHECK_RC(lookup(&e, i, &ref), 0);
		put_value(&e, &ref, 11, "", 0);
	}
	uint8_t *hits = malloc(NKEYS);
	scan_all(&e, 0, 100, hits);
	for (int i = 0; i < NKEYS; i++)
		CHECK(hits[i] == (i < CKEYS), "key %d seen %d times", i, hits[i]);
	free(hits);
	free(sh);
	env_close(&e, true);
}

/* One thread relocates a key back and forth between blocks (alloc, write,
 * swap, retire) while others look it up: a lookup must always find it,
 * whole, never a miss and never another key. */
struct race {
	struct env *e;
	int stop;
	uint64_t lookups;
	int t;
};

#define RACE_KEY "the-racing-key"

static void *lookup_thread(void *p)
{
	struct race *r = p;
	struct fab_worker *fw = fab_worker_create(r->e->f, 10 + r->t);
	struct fab_batch b;
	fab_batch_init(&b, fw, (struct fab_waiter){ 0 }, NULL);
	struct st_item *buf = malloc(ST_SLAB_BYTES);
	const uint32_t kl = sizeof(RACE_KEY) - 1;
	uint64_t h = st_hash(RACE_KEY, kl), n = 0;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct st_ref ref;
		int rc = st_lookup(&b, r->e->L, 1, RACE_KEY, kl, h, &ref, buf);
		CHECK(rc == 0, "racing lookup: %s", st_strerror(rc));
		CHECK(st_ident_klen(buf->ident) == kl && memcmp(st_item_key(buf), RACE_KEY, kl) == 0,
		      "racing lookup returned another key");
		CHECK(!(st_data_flags(buf->data) & ST_F_DEAD), "racing lookup returned a DEAD block");
		n++;
	}
	__atomic_fetch_add(&r->lookups, n, __ATOMIC_RELAXED);
	free(buf);
	fab_worker_destroy(fw);
	return NULL;
}

static void test_lookup_races_relocation(void)
{
	struct st_config cfg = config(32ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	const uint32_t kl = sizeof(RACE_KEY) - 1;
	uint64_t h = st_hash(RACE_KEY, kl);
	struct st_ref cur, nw;
	CHECK_RC(st_create(&e.b, e.C, 0, 1, RACE_KEY, kl, h, &cur, e.buf), 0);
	struct race r[2];
	pthread_t th[2];
	for (int t = 0; t < 2; t++) {
		r[t] = (struct race){ .e = &e, .t = t };
		CHECK(pthread_create(&th[t], NULL, lookup_thread, &r[t]) == 0, "pthread_create");
	}
	/* Other keys churn the same class too, so retired blocks are reused
	 * by other keys while lookups may still hold their old slot. */
	struct st_item *it = calloc(1, 4096);
	for (int i = 0; i < 20000; i++) {
		uint32_t vlen = (uint32_t)(i % 3) * 40;
		CHECK_RC(st_alloc(&e.b, e.L, 1, kl, vlen, &nw), 0);
		it->ident = st_make_ident(nw.gen, kl, nw.cls);
		it->data = st_make_data(vlen, 0);
		memcpy(it + 1, RACE_KEY, kl);
		CHECK_RC(fab_write1(&e.b, 1, nw.off, it, (48 + kl + vlen + 7) & ~7u), 0);
		CHECK_RC(st_swap(&e.b, e.C, 0, h, &cur, &nw), 0);
		CHECK_RC(st_retire(&e.b, e.L, &cur), 0);
		cur = nw;
		if (i % 2) {
			char k[32];
			int n = keyf(k, i);
			struct st_ref o;
			CHECK_RC(st_create(&e.b, e.C, 0, 1, k, n, st_hash(k, n), &o, e.buf), 0);
			CHECK_RC(st_reap(&e.b, e.C, st_hash(k, n), &o, 1), 0);
		}
	}
	__atomic_store_n(&r[0].stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r[1].stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	printf("relocation race: 20000 relocations, %llu + %llu lookups, no miss\n",
	       (unsigned long long)r[0].lookups, (unsigned long long)r[1].lookups);
	free(it);
	env_close(&e, true);
}

/*
 * Kick-outs under concurrency: near full, two threads insert the same new
 * keys (forcing kick-outs that move existing keys between buckets) while
 * two threads look up the existing keys: those must never miss, and the
 * new keys must not be duplicated.
 */
struct kick_shared {
	struct env *e;
	int prefill, nnew;
	uint64_t *pre_off;     /* [prefill] */
	uint64_t *new_off[2];  /* [nnew], 0 when the insert said ST_EFULL */
	int inserters_done;
	uint64_t lookups, efull[2];
};
struct kick_arg {
	struct kick_shared *sh;
	int t;
};

static void *kick_insert_thread(void *p)
{
	struct kick_arg *a = p;
	struct kick_shared *sh = a->sh;
	struct fab_worker *fw = fab_worker_create(sh->e->f, 20 + a->t);
	struct fab_batch b;
	fab_batch_init(&b, fw, (struct fab_waiter){ 0 }, NULL);
	struct st_item *buf = malloc(ST_SLAB_BYTES);
	for (int n = 0; n < sh->nnew; n++) {
		int i = a->t ? sh->nnew - 1 - n : n; /* opposite orders */
		char k[32];
		int kl = keyf(k, sh->prefill + i);
		struct st_ref ref;
		int rc = st_create(&b, sh->e->C, 0, 1, k, kl, st_hash(k, kl), &ref, buf);
		CHECK(rc == 0 || rc == ST_EFULL, "kick insert: %s", st_strerror(rc));
		sh->new_off[a->t][i] = rc == 0 ? ref.off : 0;
		sh->efull[a->t] += rc == ST_EFULL;
	}
	__atomic_fetch_add(&sh->inserters_done, 1, __ATOMIC_RELEASE);
	free(buf);
	fab_worker_destroy(fw);
	return NULL;
}

static void *kick_lookup_thread(void *p)
{
	struct kick_arg *a = p;
	struct kick_shared *sh = a->sh;
	struct fab_worker *fw = fab_worker_create(sh->e->f, 30 + a->t);
	struct fab_batch b;
	fab_batch_init(&b, fw, (struct fab_waiter){ 0 }, NULL);
	struct st_item *buf = malloc(ST_SLAB_BYTES);
	uint64_t n = 0, x = 0x9e3779b97f4a7c15ull * (a->t + 1);
	while (__atomic_load_n(&sh->inserters_done, __ATOMIC_ACQUIRE) < 2) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int i = (int)(x % (uint64_t)sh->prefill);
		char k[32];
		int kl = keyf(k, i);
		struct st_ref ref;
		int rc = st_lookup(&b, sh->e->L, 1, k, kl, st_hash(k, kl), &ref, buf);
		CHECK(rc == 0 && ref.off == sh->pre_off[i], "existing key %d during kick-outs: %s", i,
		      st_strerror(rc));
		n++;
	}
	__atomic_fetch_add(&sh->lookups, n, __ATOMIC_RELAXED);
	free(buf);
	fab_worker_destroy(fw);
	return NULL;
}

static void test_kick_races(void)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	uint64_t slots = e.L->index_buckets * ST_BUCKET_SLOTS;
	struct kick_shared sh = { .e = &e, .prefill = (int)(slots * 80 / 100),
				  .nnew = (int)(slots * 16 / 100) };
	sh.pre_off = calloc(sh.prefill, sizeof(uint64_t));
	sh.new_off[0] = calloc(sh.nnew, sizeof(uint64_t));
	sh.new_off[1] = calloc(sh.nnew, sizeof(uint64_t));
	struct st_ref ref;
	for (int i = 0; i < sh.prefill; i++) {
		CHECK_RC(create(&e, i, &ref), 0);
		sh.pre_off[i] = ref.off;
	}
	pthread_t th[4];
	struct kick_arg args[4];
	for (int t = 0; t < 4; t++) {
		args[t] = (struct kick_arg){ &sh, t % 2 };
		CHECK(pthread_create(&th[t], NULL, t < 2 ? kick_insert_thread : kick_lookup_thread,
				     &args[t]) == 0,
		      "pthread_create");
	}
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	uint64_t inserted = 0;
	for (int i = 0; i < sh.nnew; i++) {
		uint64_t o0 = sh.new_off[0][i], o1 = sh.new_off[1][i];
		CHECK(!o0 || !o1 || o0 == o1, "new key %d inserted twice", i);
		int rc = lookup(&e, sh.prefill + i, &ref);
		if (o0 || o1) {
			CHECK(rc == 0 && ref.off == (o0 ? o0 : o1), "new key %d lost", i);
			inserted++;
		} else {
			CHECK(rc == ST_ENOTFOUND, "new key %d: %s", i, st_strerror(rc));
		}
	}
	for (int i = 0; i < sh.prefill; i++) {
		CHECK_RC(lookup(&e, i, &ref), 0);
		CHECK(ref.off == sh.pre_off[i], "existing key %d moved block", i);
	}
	CHECK(bits_in_use(&e) == (uint64_t)sh.prefill + inserted, "blocks %llu, keys %llu",
	      (unsigned long long)bits_in_use(&e), (unsigned long long)(sh.prefill + inserted));
	printf("kick-out race: %d + %llu keys (%.1f%% of slots), %llu lookups, no miss\n",
	       sh.prefill, (unsigned long long)inserted,
	       100.0 * (sh.prefill + inserted) / slots, (unsigned long long)sh.lookups);
	free(sh.pre_off);
	free(sh.new_off[0]);
	free(sh.new_off[1]);
	env_close(&e, true);
}

/*
 * The kick-out's ordering, deterministically. V sits at its way 1, in the
 * primary bucket of a new key K whose 21 slots are all full, and only V
 * can move (to its way 2). Inserting K kicks V. A lookup of V must find it
 * at every moment (index.c invariant (3)):
 *  - mode 0: the lookup has read V's way 0 and not yet ways 1, 2 when the
 *    whole insert happens;
 *  - mode 1: the insert pauses after each of its round trips, and V is
 *    looked up in every pause.
 * The interleaving comes from the fabric's latency hook: with delay_us
 * set, fab_exec calls the batch's waiter after each round trip.
 */
struct interleave {
	struct env *e;
	int mode, calls, rc, misses;
	const char *key; /* mode 0: key to insert; mode 1: key to look up */
	uint64_t want;   /* mode 1: V's block */
	struct st_ref ref;
	struct st_item *buf;
};

static void between(void *ctx, uint64_t ns)
{
	struct interleave *x = ctx;
	(void)ns;
	uint32_t kl = (uint32_t)strlen(x->key);
	struct st_ref ref;
	if (x->mode == 0) {
		if (x->calls++ == 0) /* between the lookup's first and second round trip */
			x->rc = st_create(&x->e->b, x->e->C, 0, 1, x->key, kl, st_hash(x->key, kl),
					  &x->ref, x->e->buf);
		return;
	}
	x->calls++;
	int rc = st_lookup(&x->e->b, x->e->L, 1, x->key, kl, st_hash(x->key, kl), &ref, x->buf);
	x->misses += rc != 0 || ref.off != x->want;
}

static void kick_scenario(int mode)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	const struct st_layout *L = e.L;
	uint64_t *ix = (uint64_t *)((char *)st_region_base(e.r) + L->index_off);
	const char *K = "the-new-key";
	struct st_ways kw, vw;
	st_ways_of(L, st_hash(K, strlen(K)), &kw);
	/* V: a key whose way 1 is K's primary bucket and whose other ways are
	 * none of K's buckets. */
	static char V[32];
	int vl = 0;
	for (int i = 0;; i++) {
		CHECK(i < 50000000, "no key with the wanted ways");
		vl = sprintf(V, "v:%d", i);
		st_ways_of(L, st_hash(V, vl), &vw);
		bool other = false;
		for (int a = 0; a < 3; a++)
			other |= vw.b[0] == kw.b[a] || vw.b[2] == kw.b[a];
		if (vw.b[1] == kw.b[0] && !other)
			break;
	}
	/* V's item, published at its way 1 (slot 1 of K's primary). */
	struct st_ref vref, dummy;
	CHECK_RC(st_alloc(&e.b, L, 1, vl, 0, &vref), 0);
	struct st_item *it = calloc(1, 256);
	it->ident = st_make_ident(vref.gen, vl, vref.cls);
	it->data = st_make_data(0, ST_F_ABSENT);
	memcpy(it + 1, V, vl);
	CHECK_RC(fab_write1(&e.b, 1, vref.off, it, 128), 0);
	ix[kw.b[0] * 8 + 1] = st_slot_make(vref.off, vref.cls, 1, vw.tag);
	/* The other 20 slots of K's buckets: keys at their last way (cannot
	 * move) with another tag, pointing at a dummy block. */
	CHECK_RC(st_alloc(&e.b, L, 1, 4, 0, &dummy), 0);
	for (int a = 0; a < 3; a++)
		for (int j = 1; j <= 7; j++)
			if (a || j > 1)
				ix[kw.b[a] * 8 + j] =
					st_slot_make(dummy.off, dummy.cls, 2, (kw.tag + 1) & ST_TAG_MASK);

	char err[128];
	struct fab *slow;
	struct fab_config fc = { .backend = "shm", .self = 1, .delay_us = 1 };
	CHECK(fab_open(&fc, &slow, err, sizeof(err)) == 0, "fab_open");
	fab_attach(slow, 1, st_region_base(e.r), L->size);
	struct fab_worker *sw = fab_worker_create(slow, 5);
	struct st_item *buf = malloc(ST_SLAB_BYTES);
	struct interleave x = { .e = &e, .mode = mode, .rc = 1, .key = mode ? V : K,
				.want = vref.off, .buf = malloc(ST_SLAB_BYTES) };
	struct fab_batch sb;
	fab_batch_init(&sb, sw, (struct fab_waiter){ .wait = between, .ctx = &x }, NULL);
	struct st_ref ref, kref;
	if (mode == 0) {
		int rc = st_lookup(&sb, L, 1, V, vl, st_hash(V, vl), &ref, buf);
		CHECK(x.calls >= 2 && x.rc == 0, "the insert ran between the round trips (%d, %s)",
		      x.calls, st_strerror(x.rc));
		CHECK(rc == 0 && ref.off == vref.off, "V lost by a concurrent kick-out: %s",
		      st_strerror(rc));
		kref = x.ref;
	} else {
		CHECK_RC(st_create(&sb, e.C, 0, 1, K, strlen(K), st_hash(K, strlen(K)), &kref, buf), 0);
		CHECK(x.calls >= 4 && x.misses == 0,
		      "V missed by %d of %d lookups during the kick-out", x.misses, x.calls);
	}
	/* V moved to its way 2; K took V's old slot. */
	CHECK(ix[kw.b[0] * 8 + 1] == st_slot_make(kref.off, kref.cls, 0, kw.tag), "K's slot");
	int found = 0;
	for (int j = 1; j <= 7; j++)
		found += ix[vw.b[2] * 8 + j] == st_slot_make(vref.off, vref.cls, 2, vw.tag);
	CHECK(found == 1, "V at its way 2");
	CHECK_RC(st_lookup(&e.b, L, 1, K, strlen(K), st_hash(K, strlen(K)), &ref, e.buf), 0);
	CHECK(ix[vw.b[0] * 8] == 0 && ix[kw.b[0] * 8] == 0, "bucket locks released");
	free(x.buf);
	free(buf);
	free(it);
	fab_worker_destroy(sw);
	fab_close(slow);
	env_close(&e, true);
}

/*
 * A lookup that read a slot, then finds the block retired (DEAD) or
 * already reused by another key, must look again (index.c invariant (5)),
 * not report the key missing. The relocation runs between the lookup's
 * bucket READ and its block READ (fabric latency hook, as above).
 */
struct reloc {
	struct env *e;
	int calls, reuse;
	struct st_ref cur, nw;
	const char *key;
};

static void relocate_between(void *ctx, uint64_t ns)
{
	struct reloc *x = ctx;
	(void)ns;
	if (x->calls++ != 0)
		return;
	struct env *e = x->e;
	uint32_t kl = (uint32_t)strlen(x->key);
	CHECK_RC(st_alloc(&e->b, e->L, 1, kl, 100, &x->nw), 0);
	struct st_item it[4] = { { 0 } };
	it->ident = st_make_ident(x->nw.gen, kl, x->nw.cls);
	it->data = st_make_data(100, 0);
	memcpy(it + 1, x->key, kl);
	CHECK_RC(fab_write1(&e->b, 1, x->nw.off, it, sizeof(it)), 0);
	CHECK_RC(st_swap(&e->b, e->C, 0, st_hash(x->key, kl), &x->cur, &x->nw), 0);
	CHECK_RC(st_retire(&e->b, e->L, &x->cur), 0);
	if (x->reuse) { /* the old block now holds another key's placeholder */
		memset(it, 0, sizeof(it));
		it->ident = st_make_ident(x->cur.gen + 1, 5, x->cur.cls);
		it->data = st_make_data(0, ST_F_ABSENT);
		memcpy(it + 1, "other", 5);
		CHECK_RC(fab_write1(&e->b, 1, x->cur.off, it, 64), 0);
	}
}

static void test_lookup_vs_relocation(void)
{
	for (int reuse = 0; reuse < 2; reuse++) {
		struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
		struct env e;
		env_open(&e, &cfg);
		const char *X = "moving-key";
		uint32_t xl = (uint32_t)strlen(X);
		struct reloc x = { .e = &e, .reuse = reuse, .key = X };
		CHECK_RC(st_create(&e.b, e.C, 0, 1, X, xl, st_hash(X, xl), &x.cur, e.buf), 0);
		char err[128];
		struct fab *slow;
		struct fab_config fc = { .backend = "shm", .self = 1, .delay_us = 1 };
		CHECK(fab_open(&fc, &slow, err, sizeof(err)) == 0, "fab_open");
		fab_attach(slow, 1, st_region_base(e.r), e.L->size);
		struct fab_worker *sw = fab_worker_create(slow, 6);
		struct fab_batch sb;
		fab_batch_init(&sb, sw, (struct fab_waiter){ .wait = relocate_between, .ctx = &x }, NULL);
		struct st_item *buf = malloc(ST_SLAB_BYTES);
		struct st_ref ref;
		int rc = st_lookup(&sb, e.L, 1, X, xl, st_hash(X, xl), &ref, buf);
		CHECK(rc == 0 && ref.off == x.nw.off && !(st_data_flags(buf->data) & ST_F_DEAD),
		      "lookup across a relocation (old block %s): %s, off %#llx want %#llx",
		      reuse ? "reused" : "DEAD", st_strerror(rc), (unsigned long long)ref.off,
		      (unsigned long long)x.nw.off);
		free(buf);
		fab_worker_destroy(sw);
		fab_close(slow);
		env_close(&e, true);
	}
}

/*
 * Mutual exclusion of inserters, deterministically: st_create(K, 0) finds
 * K's primary bucket locked by another inserter, which (in the pause)
 * inserts K into another slot and unlocks. st_create must then return
 * that item, not insert a second one.
 */
struct holder {
	struct env *e;
	int calls;
	const char *key;
	struct st_ways w;
	struct st_ref ref;
};

static void holder_inserts(void *ctx, uint64_t ns)
{
	struct holder *x = ctx;
	(void)ns;
	if (x->calls++ != 1)
		return; /* right after st_create's lock attempt */
	struct env *e = x->e;
	uint64_t *ix = (uint64_t *)((char *)st_region_base(e->r) + e->L->index_off);
	uint32_t kl = (uint32_t)strlen(x->key);
	CHECK_RC(st_alloc(&e->b, e->L, 1, kl, 0, &x->ref), 0);
	struct st_item it[2] = { { 0 } };
	it->ident = st_make_ident(x->ref.gen, kl, x->ref.cls);
	it->data = st_make_data(0, ST_F_ABSENT);
	memcpy(it + 1, x->key, kl);
	CHECK_RC(fab_write1(&e->b, 1, x->ref.off, it, 64), 0);
	/* the last slot of the primary, so a lock-ignoring inserter would
	 * pick another (the first) */
	ix[x->w.b[0] * 8 + 7] = st_slot_make(x->ref.off, x->ref.cls, 0, x->w.tag);
	__atomic_store_n(&ix[x->w.b[0] * 8], 0, __ATOMIC_RELEASE); /* unlock */
}

static void test_insert_exclusion(void)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	uint64_t *ix = (uint64_t *)((char *)st_region_base(e.r) + e.L->index_off);
	const char *K = "contended-key";
	uint32_t kl = (uint32_t)strlen(K);
	struct holder x = { .e = &e, .key = K };
	st_ways_of(e.L, st_hash(K, kl), &x.w);
	ix[x.w.b[0] * 8] = 0x0badcafe; /* another inserter holds K's primary */
	char err[128];
	struct fab *slow;
	struct fab_config fc = { .backend = "shm", .self = 1, .delay_us = 1 };
	CHECK(fab_open(&fc, &slow, err, sizeof(err)) == 0, "fab_open");
	fab_attach(slow, 1, st_region_base(e.r), e.L->size);
	struct fab_worker *sw = fab_worker_create(slow, 7);
	struct fab_batch sb;
	fab_batch_init(&sb, sw, (struct fab_waiter){ .wait = holder_inserts, .ctx = &x }, NULL);
	struct st_ref ref;
	CHECK_RC(st_create(&sb, e.C, 0, 1, K, kl, st_hash(K, kl), &ref, e.buf), 0);
	CHECK(x.calls >= 2 && ref.off == x.ref.off,
	      "st_create ignored a held bucket lock: got %#llx, the holder inserted %#llx",
	      (unsigned long long)ref.off, (unsigned long long)x.ref.off);
	CHECK(bits_in_use(&e) == 1 && ix[x.w.b[0] * 8] == 0, "one block, lock free");
	fab_worker_destroy(sw);
	fab_close(slow);
	env_close(&e, true);
}

/*
 * The allocator's Read-Cas, deterministically: between st_alloc's bitmap
 * READ and its CAS, another allocation takes the block it saw free. The
 * CAS fails and st_alloc must take another block.
 */
struct thief {
	struct env *e;
	int calls;
	struct st_ref got;
};

static void steal_block(void *ctx, uint64_t ns)
{
	struct thief *x = ctx;
	(void)ns;
	if (x->calls++ == 0) /* after the bitmap READ */
		CHECK_RC(st_alloc(&x->e->b, x->e->L, 1, 8, 8, &x->got), 0);
}

static void test_alloc_race(void)
{
	struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
	struct env e;
	env_open(&e, &cfg);
	struct st_ref first, mine;
	CHECK_RC(st_alloc(&e.b, e.L, 1, 8, 8, &first), 0); /* the slab exists, hints set */
	char err[128];
	struct fab *slow;
	struct fab_config fc = { .backend = "shm", .self = 1, .delay_us = 1 };
	CHECK(fab_open(&fc, &slow, err, sizeof(err)) == 0, "fab_open");
	fab_attach(slow, 1, st_region_base(e.r), e.L->size);
	struct thief x = { .e = &e };
	/* The thief runs in our waiter, on this thread, after our bitmap READ:
	 * both saw the same first free bit. */
	struct fab_worker *sw = fab_worker_create(slow, 8);
	struct fab_batch sb;
	fab_batch_init(&sb, sw, (struct fab_waiter){ .wait = steal_block, .ctx = &x }, NULL);
	CHECK_RC(st_alloc(&sb, e.L, 1, 8, 8, &mine), 0);
	CHECK(x.calls >= 1 && x.got.off != 0, "the thief ran");
	CHECK(mine.off != x.got.off && mine.off != first.off,
	      "one block given twice: %#llx", (unsigned long long)mine.off);
	CHECK(bits_in_use(&e) == 3, "3 blocks in use");
	fab_worker_destroy(sw);
	fab_close(slow);
	env_close(&e, true);
}

/* ---- two nodes in one process (DESIGN.md principle 5) ---- */

/*
 * Node 1 and node 2, each with its own region, handle (st_region_coord)
 * and fabric, the other's region attached as a peer. Both insert into
 * node 1's region, from this one thread: node 1 locally, node 2 through
 * the fabric, as a peer coordinator does.
 */
struct two {
	struct st_region *r[2]; /* r[i] is node i + 1's */
	struct fab *f[2];
	struct fab_worker *fw[2];
	struct fab_batch b[2];
	struct st_item *buf;
	uint64_t *ix;           /* node 1's index */
};

static void no_wait(void *ctx, uint64_t ns) { (void)ctx, (void)ns; }

static void two_open(struct two *t)
{
	char err[256] = "";
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 2; i++) {
		struct st_config cfg = config(16ull << 20, ST_PERSIST_NONE, 0);
		cfg.node_id = (uint16_t)(i + 1);
		int rc = st_region_open(&cfg, &t->r[i], err, sizeof(err));
		CHECK(rc == 0, "st_region_open node %d: %d %s", i + 1, rc, err);
	}
	for (int i = 0; i < 2; i++) {
		/* delay_us: fab_exec calls the batch's waiter after each round
		 * trip (the hooks below); no_wait otherwise, so nothing sleeps. */
		struct fab_config fc = { .backend = "shm", .self = (uint16_t)(i + 1), .delay_us = 1 };
		CHECK(fab_open(&fc, &t->f[i], err, sizeof(err)) == 0, "fab_open: %s", err);
		CHECK(fab_attach(t->f[i], (uint16_t)(i + 1), st_region_base(t->r[i]),
				 st_region_layout(t->r[i])->size) == 0,
		      "fab_attach");
		struct fab_peer_info pi = { .node = (uint16_t)(2 - i),
					    .region_size = st_region_layout(t->r[1 - i])->size };
		snprintf(pi.region_path, sizeof(pi.region_path), "%s", st_region_path(t->r[1 - i]));
		CHECK(fab_attach_peer(t->f[i], &pi, err, sizeof(err)) == 0, "attach_peer: %s", err);
		t->fw[i] = fab_worker_create(t->f[i], 30 + i);
		CHECK(t->fw[i], "fab_worker_create");
		fab_batch_init(&t->b[i], t->fw[i], (struct fab_waiter){ .wait = no_wait }, NULL);
	}
	t->buf = malloc(ST_SLAB_BYTES);
	CHECK(t->buf, "alloc");
	t->ix = (uint64_t *)((char *)st_region_base(t->r[0]) + st_region_layout(t->r[0])->index_off);
}

static void two_close(struct two *t)
{
	free(t->buf);
	for (int i = 0; i < 2; i++) {
		fab_worker_destroy(t->fw[i]);
		fab_close(t->f[i]);
	}
	for (int i = 0; i < 2; i++)
		st_region_close(t->r[i], true);
}

/*
 * One node's insert of a key into node 1's region, watched between its
 * round trips (the batch's waiter): the first time the key's primary
 * bucket lock is seen held, `seen` keeps the owner word; then the insert
 * of `inner` runs (by the other node, while this one holds its lock), or,
 * for the innermost, st_release_locks(node `release`) runs with both
 * locks held, and `after_mine`/`after_outer` keep what it left.
 */
struct lock_watch {
	struct two *t;
	int who; /* 0: node 1, 1: node 2 */
	const char *key;
	uint64_t *lockw;
	uint64_t seen;
	struct lock_watch *inner, *outer;
	int release;
	uint64_t after_mine, after_outer, released;
	struct st_ref ref;
	int rc;
};

static void watch_insert(struct lock_watch *x);

/* st_release_locks' item lock match: none of them is a dead node's. */
static uint64_t keep_lock(void *arg, uint64_t lockword)
{
	(void)arg;
	return lockword;
}

static void watch_between(void *ctx, uint64_t ns)
{
	struct lock_watch *x = ctx;
	(void)ns;
	uint64_t w = __atomic_load_n(x->lockw, __ATOMIC_ACQUIRE);
	if (x->seen || !w)
		return;
	x->seen = w;
	if (x->inner) {
		watch_insert(x->inner);
		return;
	}
	CHECK(__atomic_load_n(x->outer->lockw, __ATOMIC_ACQUIRE) == x->outer->seen,
	      "the outer insert holds its lock");
	struct st_log_stats st = { 0 };
	st_release_locks(x->t->r[0], keep_lock, NULL, x->release, &st);
	x->released = st.locks_released;
	x->after_mine = __atomic_load_n(x->lockw, __ATOMIC_ACQUIRE);
	x->after_outer = __atomic_load_n(x->outer->lockw, __ATOMIC_ACQUIRE);
}

static void watch_insert(struct lock_watch *x)
{
	struct fab_batch *b = &x->t->b[x->who];
	uint32_t kl = (uint32_t)strlen(x->key);
	b->waiter = (struct fab_waiter){ .wait = watch_between, .ctx = x };
	x->rc = st_create(b, st_region_coord(x->t->r[x->who]), 0, 1, x->key, kl, st_hash(x->key, kl),
			  &x->ref, x->t->buf);
	b->waiter = (struct fab_waiter){ .wait = no_wait };
}

/* A key of node 1's region whose primary bucket is not `other`'s. */
static void pick_key(struct two *t, char *k, size_t cap, const char *prefix, uint64_t other,
		     uint64_t **lockw, uint64_t *bucket)
{
	for (int i = 0;; i++) {
		snprintf(k, cap, "%s-%d", prefix, i);
		struct st_ways w;
		st_ways_of(st_region_layout(t->r[0]), st_hash(k, strlen(k)), &w);
		if (w.b[0] != other) {
			*bucket = w.b[0];
			*lockw = &t->ix[w.b[0] * 8];
			return;
		}
	}
}

/* The bucket locks of node 1's index: each one's owner word carries the
 * node that took it, and st_release_locks of one node's id clears only
 * that node's, both times with the two locks taken on one thread. */
static void two_nodes_locks(struct two *t, int outer_who)
{
	char ko[64], ki[64];
	uint64_t bo, bi;
	struct lock_watch in = { .t = t, .who = 1 - outer_who, .key = ki };
	in.release = in.who + 1; /* the inner node's own locks */
	struct lock_watch out = { .t = t, .who = outer_who, .key = ko, .inner = &in };
	in.outer = &out;
	pick_key(t, ko, sizeof(ko), outer_who ? "outer-2" : "outer-1", ~0ull, &out.lockw, &bo);
	pick_key(t, ki, sizeof(ki), outer_who ? "inner-1" : "inner-2", bo, &in.lockw, &bi);
	watch_insert(&out);
	CHECK_RC(out.rc, 0);
	CHECK_RC(in.rc, 0);
	CHECK(out.seen >> 56 == (uint64_t)out.who + 1 && in.seen >> 56 == (uint64_t)in.who + 1,
	      "bucket lock owners %#llx (node %d's) and %#llx (node %d's)",
	      (unsigned long long)out.seen, out.who + 1, (unsigned long long)in.seen, in.who + 1);
	CHECK(in.after_mine == 0 && in.after_outer == out.seen && in.released == 1,
	      "releasing node %d's bucket locks left %#llx of its own and %#llx of node %d's "
	      "(was %#llx), %llu released",
	      in.release, (unsigned long long)in.after_mine, (unsigned long long)in.after_outer,
	      out.who + 1, (unsigned long long)out.seen, (unsigned long long)in.released);
	/* Both inserts went through; node 1's unlock left nothing held. */
	struct st_ref ref;
	CHECK_RC(st_lookup(&t->b[0], st_region_layout(t->r[0]), 1, ko, strlen(ko),
			   st_hash(ko, strlen(ko)), &ref, t->buf), 0);
	CHECK(ref.off == out.ref.off, "outer key");
	CHECK_RC(st_lookup(&t->b[0], st_region_layout(t->r[0]), 1, ki, strlen(ki),
			   st_hash(ki, strlen(ki)), &ref, t->buf), 0);
	CHECK(ref.off == in.ref.off, "inner key");
	CHECK(*out.lockw == 0 && *in.lockw == 0, "bucket locks free");
}

/* A persister that counts its calls, and the calls that came with another
 * node's batch. */
struct persist_count {
	const struct fab_batch *mine;
	uint64_t index_off, index_end;
	int calls, foreign;
};

static int count_persist(void *arg, struct fab_batch *b, uint16_t node, uint64_t off, uint64_t len)
{
	struct persist_count *p = arg;
	p->calls++;
	p->foreign += b != p->mine;
	CHECK(node == 1 && len == 8 && off >= p->index_off && off + len <= p->index_end,
	      "persist of node %u [%#llx, +%llu): not a slot of node 1's index", node,
	      (unsigned long long)off, (unsigned long long)len);
	return 0;
}

/* Key n of a fill of node 1's index, inserted by node n % 2 + 1. */
static int fill_one(struct two *t, int n)
{
	char k[32];
	int kl = snprintf(k, sizeof(k), "fill:%07d", n);
	struct st_ref ref;
	return st_create(&t->b[n % 2], st_region_coord(t->r[n % 2]), 0, 1, k, (uint32_t)kl,
			 st_hash(k, (size_t)kl), &ref, t->buf);
}

/* Each node's persister is called for the kick-outs of its own inserts,
 * and never for the other node's. */
static void two_nodes_persisters(struct two *t)
{
	const struct st_layout *L = st_region_layout(t->r[0]);
	struct persist_count pc[2];
	for (int i = 0; i < 2; i++) {
		pc[i] = (struct persist_count){ .mine = &t->b[i], .index_off = L->index_off,
						.index_end = L->index_off + L->index_buckets * 64 };
		st_region_set_persister(t->r[i], count_persist, &pc[i]);
	}
	/* Fill node 1's index, the two nodes taking turns, until each has
	 * had kick-outs (they begin near half load). */
	int n = 0, rc = 0;
	while (rc == 0 && (pc[0].calls == 0 || pc[1].calls == 0))
		rc = fill_one(t, n++);
	CHECK_RC(rc, 0);
	CHECK(pc[0].foreign == 0 && pc[1].foreign == 0,
	      "a node's persister was called for the other's insert (%d, %d of %d, %d calls)",
	      pc[0].foreign, pc[1].foreign, pc[0].calls, pc[1].calls);
	/* Removed from node 2, it is called no more; node 1's still is. */
	st_region_set_persister(t->r[1], NULL, NULL);
	const int before[2] = { pc[0].calls, pc[1].calls };
	while (rc == 0 && pc[0].calls < before[0] + 3)
		rc = fill_one(t, n++);
	CHECK_RC(rc, 0);
	CHECK(pc[1].calls == before[1] && pc[0].foreign == 0,
	      "node 2's persister called %d times after its removal, node 1's %d times for "
	      "node 2's inserts", pc[1].calls - before[1], pc[0].foreign);
	printf("two nodes: %d keys in node 1's index (%.1f%% of slots), kick-out persists: "
	       "node 1 %d, node 2 %d\n",
	       n, 100.0 * n / (double)(L->index_buckets * ST_BUCKET_SLOTS), pc[0].calls,
	       pc[1].calls);
	st_region_set_persister(t->r[0], NULL, NULL);
}

static void test_two_nodes(void)
{
	struct two t;
	two_open(&t);
	two_nodes_locks(&t, 0);
	two_nodes_locks(&t, 1);
	two_nodes_persisters(&t);
	two_close(&t);
}

static void test_kick_order(void)
{
	kick_scenario(0);
	kick_scenario(1);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rckv-test-storage-XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
	atexit(cleanup);
	test_classes();
	test_class_reserve();
	test_hash();
	test_create_lookup();
	test_stale_count_on_reused_block();
	test_alloc_claims_lock();
	test_refusals();
	test_full();
	test_swap_retire_reap();
	test_concurrent_create();
	test_lookup_races_relocation();
	test_insert_exclusion();
	test_alloc_race();
	test_lookup_vs_relocation();
	test_kick_order();
	test_kick_races();
	test_two_nodes();
	printf("test_storage: all passed\n");
	return 0;
}

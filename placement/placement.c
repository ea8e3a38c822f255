/*
 * placement.c: key slots, slot maps and their publication (placement.h).
 * The CRC table is computed once from the polynomial, not copied in.
 */
#include "placement/placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint16_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (int i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)(i << 8);
		for (int b = 0; b < 8; b++)
			c = (c & 0x8000) ? (uint16_t)((c << 1) ^ 0x1021) : (uint16_t)(c << 1);
		crc_table[i] = c;
	}
}

uint16_t pl_crc16(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint16_t crc = 0;
	pthread_once(&crc_once, crc_init);
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ p[i]) & 0xff]);
	return crc;
}

unsigned pl_keyslot(const char *key, size_t len)
{
	if (pl_part_key(key, len)) {
		const uint8_t *s = (const uint8_t *)key + PL_PART_PREFIX_LEN;
		return ((unsigned)s[0] | (unsigned)s[1] << 8) & (PL_SLOTS - 1);
	}
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;
		const char *close = memchr(open + 1, '}', rest);
		/* "{}" is no tag: the whole key is hashed, as Redis does */
		if (close && close > open + 1)
			return pl_crc16(open + 1, (size_t)(close - open - 1)) & (PL_SLOTS - 1);
	}
	return pl_crc16(key, len) & (PL_SLOTS - 1);
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

struct pl_map *pl_map_spread(const uint16_t *ids, int nnodes, int replicas, uint64_t epoch)
{
	if (nnodes < 1 || nnodes >= PL_MAX_NODES || replicas < 1 || replicas > nnodes ||
	    replicas > PL_MAX_REPLICAS)
		return NULL;
	struct pl_map *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->epoch = epoch;
	m->replicas = replicas;
	m->nnodes = nnodes;
	memcpy(m->nodes, ids, (size_t)nnodes * sizeof(*ids));
	qsort(m->nodes, (size_t)nnodes, sizeof(m->nodes[0]), cmp_u16);
	/* Ascending: 0 (no node) can only be first, a duplicate only next to
	 * its twin. */
	for (int i = 0; i < nnodes; i++)
		if (m->nodes[i] == 0 || m->nodes[i] >= PL_MAX_NODES ||
		    (i > 0 && m->nodes[i] == m->nodes[i - 1])) {
			free(m);
			return NULL;
		}
	/* One set per primary: member i and the replicas-1 members after it. */
	m->nsets = nnodes;
	for (int i = 0; i < nnodes; i++) {
		m->sets[i].n = (uint8_t)replicas;
		for (int r = 0; r < replicas; r++)
			m->sets[i].node[r] = m->nodes[(i + r) % nnodes];
	}
	for (unsigned s = 0; s < PL_SLOTS; s++)
		m->slot_set[s] = (uint8_t)((uint64_t)s * (uint64_t)nnodes / PL_SLOTS);
	return m;
}

void pl_map_free(struct pl_map *m)
{
	free(m);
}

struct pl_map *pl_map_derive(const struct pl_map *base, uint64_t out, uint64_t late,
			     uint64_t joining, uint64_t epoch)
{
	struct pl_map *m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	*m = *base;
	m->epoch = epoch;
	memset(&m->reclaim, 0, sizeof(m->reclaim));
	late &= ~out;
	joining &= ~(out | late);
	const uint64_t behind = late | joining;
	for (int i = 0; i < m->nsets; i++) {
		const struct pl_set *from = &base->sets[i];
		struct pl_set to = { 0 };
		const uint64_t groups[3] = { ~(out | behind), late, joining };
		for (int g = 0; g < 3; g++)
			for (int r = 0; r < from->n; r++)
				if (groups[g] & (1ull << from->node[r]))
					to.node[to.n++] = from->node[r];
		if (to.n > 0 && !(joining & (1ull << to.node[0])))
			m->sets[i] = to;
	}
	return m;
}

bool pl_map_holds(const struct pl_map *m, uint16_t id)
{
	for (int i = 0; i < m->nsets; i++)
		for (int r = 0; r < m->sets[i].n; r++)
			if (m->sets[i].node[r] == id)
				return true;
	return false;
}

/* ---- the published map ---- */

static ck_epoch_record_t *record_new(struct pl_table *t)
{
	if (t->nrecs == PL_MAX_READERS)
		return NULL;
	ck_epoch_record_t *r = aligned_alloc(CK_MD_CACHELINE, (sizeof(*r) + CK_MD_CACHELINE - 1) / CK_MD_CACHELINE * CK_MD_CACHELINE);
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	ck_epoch_register(&t->epoch, r, NULL);
	t->recs[t->nrecs++] = r;
	return r;
}

int pl_table_init(struct pl_table *t, struct pl_map *first)
{
	memset(t, 0, sizeof(*t));
	ck_epoch_init(&t->epoch);
	pthread_mutex_init(&t->wlock, NULL);
	t->writer = record_new(t);
	if (!t->writer)
		return -ENOMEM;
	ck_pr_store_ptr(&t->cur, first);
	return 0;
}

void pl_table_destroy(struct pl_table *t)
{
	/* ck_epoch keeps every record on the epoch's list for good: records
	 * are freed with the table, never one by one. */
	if (t->writer)
		ck_epoch_barrier(t->writer); /* runs callbacks still deferred */
	pl_map_free(ck_pr_load_ptr(&t->cur));
	for (int i = 0; i < t->nrecs; i++)
		free(t->recs[i]);
	pthread_mutex_destroy(&t->wlock);
	memset(t, 0, sizeof(*t));
}

ck_epoch_record_t *pl_reader_get(struct pl_table *t)
{
	pthread_mutex_lock(&t->wlock);
	ck_epoch_record_t *r = ck_epoch_recycle(&t->epoch, NULL);
	if (!r)
		r = record_new(t);
	pthread_mutex_unlock(&t->wlock);
	return r;
}

void pl_reader_put(struct pl_table *t, ck_epoch_record_t *rec)
{
	if (!rec)
		return;
	pthread_mutex_lock(&t->wlock);
	ck_epoch_unregister(rec);
	pthread_mutex_unlock(&t->wlock);
}

void pl_table_lock(struct pl_table *t)
{
	pthread_mutex_lock(&t->wlock);
}

void pl_table_unlock(struct pl_table *t)
{
	pthread_mutex_unlock(&t->wlock);
}

CK_EPOCH_CONTAINER(struct pl_map, reclaim, map_of_entry)

static void map_reclaim(ck_epoch_entry_t *e)
{
	pl_map_free(map_of_entry(e));
}

/* ck_epoch_barrier_wait's callback: a grace period takes as long as the
 * longest transaction in flight, so sleep rather than spin. */
static void wait_sleep(ck_epoch_t *e, ck_epoch_record_t *r, void *arg)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200000 };
	nanosleep(&ts, NULL);
}

void pl_publish(struct pl_table *t, struct pl_map *m)
{
	pthread_mutex_lock(&t->wlock);
	struct pl_map *old = ck_pr_load_ptr(&t->cur);
	ck_pr_fence_store(); /* the map's contents before its pointer */
	ck_pr_store_ptr(&t->cur, m);
	if (old) {
		ck_epoch_call(t->writer, &old->reclaim, map_reclaim);
		ck_epoch_barrier_wait(t->writer, wait_sleep, NULL);
	}
	pthread_mutex_unlock(&t->wlock);
}

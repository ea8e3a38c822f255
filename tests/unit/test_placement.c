/*
 * test_placement: key slots as Redis Cluster computes them, slot maps
 * spread over members with replica sets, and a map replaced while a reader
 * holds it: pl_publish does not return (and so does not free the old map)
 * until the reader's epoch section that could see it has ended.
 * Linked with rckv_placement alone.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "placement/placement.h"

#define CHECK(c)                                                                    \
	do {                                                                        \
		if (!(c)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

static void test_keyslot(void)
{
	/* CRC-16/XMODEM's check value, and slots Redis Cluster documents. */
	CHECK(pl_crc16("123456789", 9) == 0x31c3);
	CHECK(pl_keyslot("foo", 3) == 12182);
	CHECK(pl_keyslot("somekey", 7) == 11058);
	CHECK(pl_keyslot("{user1000}.following", 20) == pl_keyslot("user1000", 8));
	CHECK(pl_keyslot("foo{}bar", 8) == (pl_crc16("foo{}bar", 8) & 16383u));
	CHECK(pl_keyslot("foo{{bar}}zap", 13) == pl_keyslot("{bar", 4));
}

/* A part key's slot is the one embedded in it (its root's), whatever its
 * other bytes hash to; one byte more or less and it is an ordinary key. */
static void test_part_keyslot(void)
{
	char k[PL_PART_KEYLEN + 1];
	memcpy(k, PL_PART_PREFIX, PL_PART_PREFIX_LEN);
	const unsigned slot = pl_keyslot("foo", 3); /* 12182 */
	k[6] = (char)(slot & 0xff);
	k[7] = (char)(slot >> 8);
	memcpy(k + 8, "\x01\x02\x03\x04\x05\x06\x07\x08{x}", 11); /* gen, id: a tag too */
	k[19] = k[20] = 0;
	CHECK(pl_part_key(k, PL_PART_KEYLEN) && pl_reserved_key(k, PL_PART_KEYLEN));
	CHECK(pl_keyslot(k, PL_PART_KEYLEN) == slot);
	CHECK(pl_crc16(k, PL_PART_KEYLEN) % PL_SLOTS != slot); /* not by chance */
	CHECK(!pl_part_key(k, PL_PART_KEYLEN + 1) && pl_reserved_key(k, PL_PART_KEYLEN + 1));
	CHECK(pl_keyslot(k, PL_PART_KEYLEN + 1) == pl_keyslot("x", 1)); /* its tag */
	k[0] = 'x'; /* another prefix: hashed */
	CHECK(!pl_part_key(k, PL_PART_KEYLEN) && !pl_reserved_key(k, PL_PART_KEYLEN));
	CHECK(pl_keyslot(k, PL_PART_KEYLEN) == pl_keyslot("x", 1));
	/* Slots above 16383 cannot be embedded by rckv; masked like any. */
	k[0] = (char)0xff;
	k[6] = (char)0xff;
	k[7] = (char)0xff;
	CHECK(pl_keyslot(k, PL_PART_KEYLEN) == 16383u);
}

static void test_spread(void)
{
	const uint16_t ids[3] = { 3, 1, 2 }; /* any order: kept ascending */
	struct pl_map *m = pl_map_spread(ids, 3, 2, 7);
	CHECK(m && m->epoch == 7 && m->nnodes == 3);
	CHECK(m->nodes[0] == 1 && m->nodes[1] == 2 && m->nodes[2] == 3);
	unsigned owned[4] = { 0 };
	for (unsigned s = 0; s < PL_SLOTS; s++) {
		const struct pl_set *set = pl_slot_set(m, s);
		CHECK(set->n == 2 && set->node[0] != set->node[1]); /* distinct replicas */
		owned[pl_slot_primary(m, s)]++;
	}
	/* Even, in id order: slot 0 on node 1, the last slot on node 3. */
	CHECK(pl_slot_primary(m, 0) == 1 && pl_slot_primary(m, PL_SLOTS - 1) == 3);
	for (int n = 1; n <= 3; n++)
		CHECK(owned[n] >= PL_SLOTS / 3 && owned[n] <= PL_SLOTS / 3 + 1);
	CHECK(pl_primary(m, "foo", 3) == pl_slot_primary(m, 12182));
	pl_map_free(m);
	/* Refused: no member, a duplicate id, id 0, more replicas than members. */
	const uint16_t dup[2] = { 4, 4 }, zero[2] = { 0, 4 };
	CHECK(!pl_map_spread(ids, 0, 1, 1));
	CHECK(!pl_map_spread(dup, 2, 1, 1));
	CHECK(!pl_map_spread(zero, 2, 1, 1));
	CHECK(!pl_map_spread(ids, 3, 4, 1));
}

/* A failover's map: the dead node leaves every set, its slots' first
 * backup is their primary, and a set with no live member stays whole. */
static void test_without(void)
{
	const uint16_t ids[3] = { 1, 2, 3 };
	struct pl_map *base = pl_map_spread(ids, 3, 2, 1);
	struct pl_map *m = pl_map_derive(base, 1ull << 2, 0, 0, 2);
	CHECK(m && m->epoch == 2 && m->nnodes == 3);
	for (unsigned s = 0; s < PL_SLOTS; s++) {
		const struct pl_set *b = pl_slot_set(base, s), *set = pl_slot_set(m, s);
		for (int r = 0; r < set->n; r++)
			CHECK(set->node[r] != 2);
		if (b->node[0] == 2)
			CHECK(set->n == 1 && set->node[0] == 3);
		else if (b->node[1] == 2)
			CHECK(set->n == 1 && set->node[0] == 1);
		else
			CHECK(set->n == 2 && set->node[0] == b->node[0]);
	}
	CHECK(!pl_map_holds(m, 2) && pl_map_holds(m, 1) && pl_map_holds(base, 2));
	struct pl_map *m2 = pl_map_derive(base, (1ull << 2) | (1ull << 3), 0, 0, 3);
	CHECK(pl_slot_set(m2, PL_SLOTS - 1)->n == 1 && pl_slot_primary(m2, PL_SLOTS - 1) == 1);
	CHECK(pl_slot_set(m2, PL_SLOTS / 2)->n == 2 && pl_slot_primary(m2, PL_SLOTS / 2) == 2);
	pl_map_free(m2);
	/* Node 2 back: joining, it is written (last of its sets) but never
	 * primary; late, it is a full backup until the rebalance. */
	struct pl_map *j = pl_map_derive(base, 0, 0, 1ull << 2, 4);
	struct pl_map *l = pl_map_derive(base, 0, 1ull << 2, 0, 5);
	for (unsigned s = 0; s < PL_SLOTS; s++) {
		const struct pl_set *b = pl_slot_set(base, s);
		CHECK((pl_slot_set(j, s)->n == 2 && pl_slot_set(j, s)->node[1] == 2) ||
		      (b->node[0] != 2 && b->node[1] != 2));
		if (b->node[0] == 2) {
			CHECK(pl_slot_primary(j, s) == 3 && pl_slot_primary(l, s) == 3);
			CHECK(pl_slot_set(l, s)->node[1] == 2);
		}
	}
	/* A set whose only live member is joining stays as it was. */
	struct pl_map *u = pl_map_derive(base, 1ull << 3, 0, 1ull << 2, 6);
	CHECK(pl_slot_primary(u, PL_SLOTS / 2) == 2 && pl_slot_set(u, PL_SLOTS / 2)->n == 2);
	pl_map_free(u);
	pl_map_free(l);
	pl_map_free(j);
	pl_map_free(m);
	pl_map_free(base);
}

struct publisher {
	struct pl_table *t;
	struct pl_map *next;
	int done;
};

static void *publish_main(void *arg)
{
	struct publisher *p = arg;
	pl_publish(p->t, p->next);
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void test_publish_waits_for_readers(void)
{
	const uint16_t one[1] = { 1 }, two[2] = { 1, 2 };
	struct pl_table t;
	CHECK(pl_table_init(&t, pl_map_spread(one, 1, 1, 1)) == 0);
	ck_epoch_record_t *rec = pl_reader_get(&t);
	CHECK(rec);

	/* A reader holds the first map. */
	const struct pl_map *seen = pl_read_begin(&t, rec);
	CHECK(seen->epoch == 1 && seen->nnodes == 1);
	struct publisher p = { &t, pl_map_spread(two, 2, 1, 2), 0 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, publish_main, &p) == 0);
	/* The new map is visible at once, but the publisher waits for us. */
	for (int i = 0; i < 200 && pl_table_current(&t)->epoch != 2; i++)
		sleep_ms(1);
	CHECK(pl_table_current(&t)->epoch == 2);
	sleep_ms(100);
	CHECK(!__atomic_load_n(&p.done, __ATOMIC_ACQUIRE));
	CHECK(seen->epoch == 1 && seen->nodes[0] == 1); /* still the old map, intact */
	pl_read_end(rec);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK(p.done);

	/* A reader that begins now sees the new map; publishing with no
	 * reader inside returns at once. */
	const struct pl_map *now = pl_read_begin(&t, rec);
	CHECK(now->epoch == 2 && now->nnodes == 2);
	pl_read_end(rec);
	pl_publish(&t, pl_map_spread(one, 1, 1, 3));
	CHECK(pl_table_current(&t)->epoch == 3);
	pl_reader_put(&t, rec);
	pl_table_destroy(&t);
}

int main(void)
{
	test_keyslot();
	test_part_keyslot();
	test_spread();
	test_without();
	test_publish_waits_for_readers();
	printf("test_placement: ok\n");
	return 0;
}

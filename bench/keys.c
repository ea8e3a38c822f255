/*
 * keys.c: keys, the per-node keyspace and ycsb-t's key chooser (keys.h).
 */
#include "bench/keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_key(char *buf, uint64_t id)
{
	/* fixed width by hand: this runs for every operation */
	memcpy(buf, BENCH_KEY_PREFIX, 4);
	for (int i = BENCH_KEY_LEN - 1; i >= 4; i--) {
		buf[i] = (char)('0' + id % 10);
		id /= 10;
	}
	buf[BENCH_KEY_LEN] = '\0';
	return BENCH_KEY_LEN;
}

void bench_keyspace_free(struct bench_keyspace *ks)
{
	for (int i = 0; i < RCKV_MAX_NODES; i++) {
		free(ks->ids[i]);
		free(ks->zipf[i]);
	}
	memset(ks, 0, sizeof(*ks));
}

int bench_keyspace_build(struct bench_keyspace *ks, const struct rckv_map *map,
			 uint64_t records, double theta, int head)
{
	uint8_t *owner = NULL;
	char key[BENCH_KEY_LEN + 1];
	int rc = -ENOMEM;

	memset(ks, 0, sizeof(*ks));
	if (records == 0 || records > UINT32_MAX || map->nnodes < 1 ||
	    map->nnodes > RCKV_MAX_NODES)
		return -EINVAL;
	ks->records = records;
	ks->nnodes = map->nnodes;
	/* two passes (count, then fill) so each list is allocated once */
	owner = malloc(records);
	if (!owner)
		goto fail;
	for (uint64_t id = 0; id < records; id++) {
		bench_key(key, id);
		owner[id] = (uint8_t)rckv_map_node_of(map, key, BENCH_KEY_LEN);
		if (owner[id] >= map->nnodes) {
			rc = -EINVAL; /* a map with a slot nobody owns */
			goto fail;
		}
		ks->count[owner[id]]++;
	}
	for (int n = 0; n < ks->nnodes; n++) {
		if (!ks->count[n])
			continue;
		ks->ids[n] = malloc(ks->count[n] * sizeof(uint32_t));
		ks->zipf[n] = malloc(sizeof(struct bench_zipf));
		if (!ks->ids[n] || !ks->zipf[n])
			goto fail;
		rc = bench_zipf_init(ks->zipf[n], ks->count[n], theta, head);
		if (rc)
			goto fail;
		rc = -ENOMEM;
		ks->eligible[ks->neligible++] = n;
	}
	uint64_t fill[RCKV_MAX_NODES] = { 0 };
	for (uint64_t id = 0; id < records; id++)
		ks->ids[owner[id]][fill[owner[id]]++] = (uint32_t)id;
	free(owner);
	return 0;
fail:
	free(owner);
	bench_keyspace_free(ks);
	return rc;
}

int bench_keyspace_check(const struct bench_keyspace *ks, int nodes_per_txn, int ops, char *err,
			 size_t errlen)
{
	if (nodes_per_txn < 1) {
		snprintf(err, errlen, "--nodes-per-txn must be at least 1");
		return -EINVAL;
	}
	if (ops < 1 || ops > BENCH_TXN_MAX_OPS) {
		snprintf(err, errlen, "--ops must be between 1 and %d", BENCH_TXN_MAX_OPS);
		return -EINVAL;
	}
	if (ops < nodes_per_txn) {
		snprintf(err, errlen,
			 "--ops %d is fewer than --nodes-per-txn %d: a transaction cannot touch "
			 "more nodes than it has operations",
			 ops, nodes_per_txn);
		return -EINVAL;
	}
	if (ks->neligible < nodes_per_txn) {
		snprintf(err, errlen,
			 "--nodes-per-txn %d, but the slot map has %d node%s%s; use "
			 "--nodes-per-txn %d or a larger cluster",
			 nodes_per_txn, ks->nnodes, ks->nnodes == 1 ? "" : "s",
			 ks->neligible < ks->nnodes ? " owning records" : "",
			 ks->neligible > 0 ? ks->neligible : 1);
		return -EINVAL;
	}
	for (int i = 0; i < ks->neligible; i++) {
		int n = ks->eligible[i];
		if (ks->count[n] < (uint64_t)ops) {
			snprintf(err, errlen,
				 "node %d owns only %llu of the %llu records, fewer than --ops %d: "
				 "use more --records",
				 n, (unsigned long long)ks->count[n],
				 (unsigned long long)ks->records, ops);
			return -EINVAL;
		}
	}
	return 0;
}

/* Draw a record of node n not yet in ids[0..have). */
static uint64_t draw_distinct(const struct bench_keyspace *ks, struct bench_rng *r, int n,
			      const uint64_t *ids, int have)
{
	uint64_t rank = bench_zipf_next(ks->zipf[n], r);

	/* a few redraws keep the distribution; then walk on from the last draw,
	 * which ends because the node owns at least ops records (check) */
	for (int attempt = 0;; attempt++) {
		uint64_t id = ks->ids[n][rank];
		int dup = 0;
		for (int i = 0; i < have && !dup; i++)
			dup = ids[i] == id;
		if (!dup)
			return id;
		if (attempt < 16)
			rank = bench_zipf_next(ks->zipf[n], r);
		else
			rank = (rank + 1) % ks->count[n];
	}
}

void bench_txn_keys(const struct bench_keyspace *ks, struct bench_rng *r, int nodes_per_txn,
		    int ops, uint64_t *out_ids, int *out_nodes)
{
	int pick[RCKV_MAX_NODES];

	/* partial Fisher-Yates: the first nodes_per_txn of a shuffled copy */
	memcpy(pick, ks->eligible, sizeof(int) * (size_t)ks->neligible);
	for (int i = 0; i < nodes_per_txn; i++) {
		int j = i + (int)bench_rng_below(r, (uint64_t)(ks->neligible - i));
		int t = pick[i];
		pick[i] = pick[j];
		pick[j] = t;
	}
	for (int i = 0; i < ops; i++) {
		int n = i < nodes_per_txn ? pick[i]
					  : pick[bench_rng_below(r, (uint64_t)nodes_per_txn)];
		out_ids[i] = draw_distinct(ks, r, n, out_ids, i);
		if (out_nodes)
			out_nodes[i] = n;
	}
}

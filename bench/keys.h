/*
 * keys.h: the benchmark's keys, and the choice of keys for a transaction.
 *
 * Record i is the key "user" followed by i in 10 decimal digits (YCSB
 * names its keys "user..."), so keys have a fixed length of 14 bytes.
 *
 * ycsb-t chooses the keys of a transaction from exactly --nodes-per-txn
 * nodes of the slot map (RCBench's distributed transactions; Deneva's
 * YCSB does the same with partitions): the records are grouped by the
 * node that owns them (the same CRC16 the servers use), the transaction
 * picks that many distinct nodes uniformly at random, its first operations
 * go one to each picked node (so each is really touched) and the rest to
 * a node picked at random among them; within a node, the record is drawn
 * from a Zipf distribution over that node's records (rank 0 the hottest),
 * and keys are distinct within a transaction.
 *
 * Threads: a struct bench_keyspace is read-only once built and may be
 * shared; each thread brings its own struct bench_rng.
 */
#ifndef RCKV_BENCH_KEYS_H
#define RCKV_BENCH_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "bench/rng.h"
#include "bench/zipf.h"
#include "client/rckv.h"

#define BENCH_KEY_PREFIX "user"
#define BENCH_KEY_LEN 14 /* "user" + 10 digits */
#define BENCH_KEY_MAX_ID 9999999999ull
#define BENCH_TXN_MAX_OPS 1024

/* Write the key of record id into buf (at least BENCH_KEY_LEN + 1 bytes,
 * NUL-terminated); returns BENCH_KEY_LEN. */
int bench_key(char *buf, uint64_t id);

struct bench_keyspace {
	uint64_t records;
	int nnodes;                      /* nodes of the map, with or without records */
	uint32_t *ids[RCKV_MAX_NODES];   /* records owned by node i, ascending */
	uint64_t count[RCKV_MAX_NODES];  /* length of ids[i] */
	struct bench_zipf *zipf[RCKV_MAX_NODES]; /* over ids[i]; NULL when count[i] == 0 */
	int eligible[RCKV_MAX_NODES];    /* nodes with records, as indices */
	int neligible;
};

/*
 * bench_keyspace_build - group records 0..records-1 by owning node under
 * map, with a Zipf(theta, head) generator per node.
 * Returns 0; -EINVAL for records == 0, records > UINT32_MAX or a bad
 * theta/head; -ENOMEM.
 */
int bench_keyspace_build(struct bench_keyspace *ks, const struct rckv_map *map,
			 uint64_t records, double theta, int head);
void bench_keyspace_free(struct bench_keyspace *ks);

/*
 * bench_keyspace_check - can transactions of `ops` operations touch
 * exactly `nodes_per_txn` nodes with distinct keys? Returns 0, or -EINVAL
 * with a sentence in err: fewer nodes (that own records) than
 * nodes_per_txn, ops < nodes_per_txn, ops > BENCH_TXN_MAX_OPS, or a node
 * owning fewer records than ops.
 */
int bench_keyspace_check(const struct bench_keyspace *ks, int nodes_per_txn, int ops, char *err,
			 size_t errlen);

/*
 * bench_txn_keys - choose the records of one transaction (see above):
 * ops distinct record ids, owned by exactly nodes_per_txn distinct nodes.
 * Preconditions: bench_keyspace_check(ks, nodes_per_txn, ops) == 0.
 * out_ids gets the ids; out_nodes (may be NULL) the owning node index of
 * each.
 */
void bench_txn_keys(const struct bench_keyspace *ks, struct bench_rng *r, int nodes_per_txn,
		    int ops, uint64_t *out_ids, int *out_nodes);

#endif

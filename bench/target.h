/*
 * target.h: a server (or an rckv cluster) that rckv-bench measures.
 *
 * Opening a target connects to it, asks `RCKV NODES` for the slot map
 * (a Redis server does not know the command: it is then a standalone
 * target, one node owning every slot) and keeps one control connection
 * per node for INFO snapshots, CONFIG SET and key checks.
 *
 * Where the workload's connections go: with --cluster, round-robin over
 * the map's nodes (a node's address from the cluster file when the file
 * names it, else the one the map publishes); with --host/--port, all to
 * that address (every rckv node serves every key).
 *
 * Threads: opened, prepared and snapshotted by the main thread only;
 * workers read the map, keyspace, generators and the OLTP state (its
 * placement and script digests; all read-only during a run) and bump
 * next_insert atomically.
 */
#ifndef RCKV_BENCH_TARGET_H
#define RCKV_BENCH_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "bench/config.h"
#include "bench/info.h"
#include "bench/keys.h"
#include "bench/zipf.h"
#include "client/rckv.h"

struct bench_addr {
	char host[256];
	int port;
};

struct bench_oltp;

struct bench_target {
	char name[300];          /* "host:port", or the cluster file's path */
	bool is_rckv;            /* RCKV NODES answered */
	struct rckv_map map;     /* rckv's map, or a one-node map for Redis */
	int naddrs;              /* where workload connections go, round-robin */
	struct bench_addr addrs[RCKV_MAX_NODES];
	int nctl;                /* control connections: one per node */
	struct bench_addr ctl_addrs[RCKV_MAX_NODES];
	redisContext *ctl[RCKV_MAX_NODES];
	char version[32];        /* redis_version of the first node */
	char cc[32];             /* cc_protocol now in force ("" for Redis) */
	int timeout_ms;

	/* set by bench_target_prepare for the run's configuration */
	bool have_keyspace;
	struct bench_keyspace ks; /* ycsb-t: records by node */
	struct bench_zipf zipf;   /* other workloads: over all records */
	uint64_t next_insert;     /* ycsb-d/e: next new record id (atomic) */
	int nodes_per_txn;        /* ycsb-t as run: 1 for a standalone Redis */
	struct bench_oltp *oltp;  /* OLTP workloads: placement, script digests (oltp.h) */
};

/*
 * bench_target_open - connect to host:port, or to the nodes of
 * cluster_file (non-NULL) until one answers, and learn the slot map.
 * Returns 0, or -1 with err filled (unreachable, bad cluster file, bad
 * map, or a node of the map unreachable for INFO).
 */
int bench_target_open(struct bench_target *t, const char *host, int port,
		      const char *cluster_file, int timeout_ms, char *err, size_t errlen);
void bench_target_close(struct bench_target *t);

/* "rckv" or "redis". */
static inline const char *bench_target_kind(const struct bench_target *t)
{
	return t->is_rckv ? "rckv" : "redis";
}

/*
 * bench_target_prepare - get ready for a run of cfg: CONFIG SET cc when
 * cfg->cc is set (rckv only; the node that gets it switches the whole
 * cluster), build the key chooser, and check that a ycsb-t transaction
 * can touch cfg->nodes_per_txn nodes of the map. A standalone Redis runs
 * ycsb-t as a plain one-node run. Returns 0, or -1 with err filled.
 */
int bench_target_prepare(struct bench_target *t, const struct bench_config *cfg, char *err,
			 size_t errlen);

/*
 * bench_target_snapshot - INFO from every node, summed (info.h). CPU time
 * comes from /proc for a local node whose INFO lacks it.
 * Returns 0, or -1 with err filled.
 */
int bench_target_snapshot(struct bench_target *t, struct bench_info *sum, char *err,
			  size_t errlen);

/*
 * bench_target_loaded - whether records 0..records-1 look loaded: a
 * sample of them (the first, the last and 30 drawn with the seed) exist
 * with value_size bytes (bank: hold an integer balance). Returns 1, 0, or
 * -1 with err filled.
 */
int bench_target_loaded(struct bench_target *t, const struct bench_config *cfg, char *err,
			size_t errlen);

/*
 * bench_target_bank_total - the sum of the balances of records
 * 0..records-1 (bank), read with pipelined MGETs on the first node. Not a
 * snapshot: call it while no transfer runs. Returns 0, or -1 with err
 * filled (an absent account or one that holds no integer included).
 */
int bench_target_bank_total(struct bench_target *t, const struct bench_config *cfg,
			    long long *total, char *err, size_t errlen);

#endif

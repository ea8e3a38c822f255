/*
 * cluster: membership and the control plane of a node (DESIGN.md section
 * 7). Every node listens on its fabric address. A connection there starts
 * with a tcp_hello (rdma/tcp_wire.h): DATA connections are the tcp fabric's
 * and are handed to it; CTL connections carry control requests, each
 * answered by a control thread of the receiving node:
 *   HELLO     exchange region facts (cluster id, layout, region file, ...)
 *   FAB       a backend's setup message (verbs queue-pair exchange)
 *   QUIESCE / SWITCH / RESUME   the phases of an online protocol switch
 *   FLUSH     empty the MemStore (FLUSHALL), between QUIESCE and RESUME
 *   COUNT / KEYS / SCAN         keyspace administration
 * Data never goes through the control plane: transactions reach other
 * nodes' MemStores only through one-sided fabric operations.
 */
#ifndef RCKV_SRV_CLUSTER_H
#define RCKV_SRV_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

struct node;
struct worker;

/*
 * cluster_start - with cfg.cluster_nodes listed: check that this node is
 * one of them, listen on its fabric address, connect to every other node
 * (waiting, and logging what it waits for, until each answers), exchange
 * HELLOs, attach every peer to the fabric and publish the slot map. Main
 * thread, after the region and the fabric are open and before workers
 * start. Returns 0, or -1 with err.
 */
int cluster_start(struct node *n, char *err, size_t errlen);
/* Stop the listener and control threads. */
void cluster_stop(struct node *n);

/* The control-plane call given to the fabric (fab_config.ctl_call, with the
 * node as its ctx): backends' setup exchanges with peers. */
fab_ctl_call_fn cluster_fab_bridge(void);

/*
 * cluster_takeover - for each node of `out` (bit per id), settle what it
 * left as a coordinator on the `live` nodes (this one included) from the
 * marks they hold (srv_takeover_*); then have every live node reset the
 * items it newly serves as primary (mb_takeover_local). A control thread,
 * while no node runs transactions; 0, or -errno with err (a live node did
 * not answer: try again).
 */
int cluster_takeover(struct node *n, uint64_t out, uint64_t live, char *err, size_t errlen);

/* The cluster id derived from the node list (0 for a standalone node). */
uint64_t cluster_id_of(const struct node *n);

/*
 * Keyspace administration across the cluster (KEYS, SCAN, DBSIZE, and the
 * transactional FLUSH inside MULTI). Not transactional: see cmd_keys.c.
 * Each visits this node's keys and asks every peer for its own.
 * fn returns non-zero to stop. Returns 0 or -1 with err (a peer is gone).
 */
typedef int (*cluster_key_fn)(void *arg, const char *key, size_t klen);
int cluster_keys(struct node *n, struct worker *w, const char *pattern, size_t plen,
		 cluster_key_fn fn, void *arg, char *err, size_t errlen);
int cluster_count(struct node *n, struct worker *w, uint64_t *count, char *err, size_t errlen);
/* The keys of this node's region it lists (KEYS, SCAN, DBSIZE, INFO
 * keyspace): with `replicas` N, those it is the primary of. */
uint64_t cluster_local_count(struct node *n);
/*
 * One SCAN step across nodes: the cursor's high 16 bits index the node (in
 * slot-map order), the rest is that node's st_scan cursor. Visits up to
 * about `count` buckets' worth of keys and returns the next cursor (0 when
 * done). Collection parts are left out; type >= 0 (SCAN's TYPE): keys of
 * that enum txn_type only.
 */
int cluster_scan(struct node *n, struct worker *w, uint64_t *cursor, uint64_t count, int type,
		 cluster_key_fn fn, void *arg, char *err, size_t errlen);

/*
 * cluster_random_key - RANDOMKEY's candidate: the first key the keyspace
 * walk (cluster_scan, every node) meets from a place chosen by seed,
 * wrapping around once, that skip (if not NULL) does not skip. skip runs
 * on the caller's thread in the middle of the walk: it must not yield.
 * Not transactional (see cmd_keys.c): the caller reads the key in a
 * transaction to know it still exists. *key is malloc'd (the caller
 * frees it), NULL when there is no such key at all. Returns 0, or -1 with
 * err (a peer is gone, out of memory).
 */
typedef bool (*cluster_skip_fn)(void *arg, const char *key, size_t klen);
int cluster_random_key(struct node *n, struct worker *w, uint64_t seed, cluster_skip_fn skip,
		       void *skip_arg, char **key, size_t *klen, char *err, size_t errlen);

/* One page of the keys node `id` lists (those it is the primary of), from
 * *cursor (0 to start; 0 again when done): fn for each. 0 or -1 with err. */
int cluster_scan_node(struct node *n, unsigned id, uint64_t *cursor, uint64_t count,
		      cluster_key_fn fn, void *arg, char *err, size_t errlen);

#endif

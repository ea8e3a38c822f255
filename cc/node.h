/*
 * cc/node.h: what the CC layer knows of the node it runs on (DESIGN.md
 * principles 5 and 8). The server embeds a struct cc_node in its own node
 * and fills it before its workers start; cc reaches nothing of the server
 * beyond it: configuration comes as struct cc_limits (refreshed by the
 * server on CONFIG SET), logs go through a hook, statistics are counted in
 * each cc_worker's struct cc_stats for INFO to read, and cluster-wide steps
 * are the server's through struct cc_cluster_ops.
 */
#ifndef RCKV_CC_NODE_H
#define RCKV_CC_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cc/txn.h"
#include "placement/placement.h"
#include "rdma/fab.h"
#include "storage/st.h"

struct cc_node;
struct cc_worker;
struct cc_protocol;
struct durable;
struct calvin;

/* Entries for transactions whose locks a failed node may still hold
 * (cc_node.lock_pending): about one per transaction in flight when a node
 * fails. */
#define CC_LOCK_PENDING 256

/*
 * Limits and options cc reads while transactions run. Written by the
 * server (at start, and on CONFIG SET) with ck_pr stores, one word at a
 * time; read with ck_pr loads. A transaction may see the old value of one
 * and the new value of another, as a Redis command may around CONFIG SET.
 */
struct cc_limits {
	uint64_t max_key_bytes;      /* longer keys: CC_ETOOBIG, or absent to a read */
	uint64_t max_value_bytes;    /* longer values: CC_ETOOBIG */
	uint64_t txn_timeout_ms;     /* retries after CC aborts stop after this */
	uint64_t mvcc_versions;      /* versions kept in an item under mvcc */
	uint64_t maat_list_slots;    /* maat: slots of an item's reader list and of
					its writer list, each (0: the default, 4) */
	uint64_t addr_cache_entries; /* each worker's address cache (cc/cache.h) */
	uint64_t testing;            /* 1: testing-only protocols may be chosen */
	uint64_t calvin_epoch_us;    /* calvin: how long an epoch stays open */
	uint64_t calvin_trace;       /* calvin: log each epoch's order (notice) */
	uint64_t calvin_acquire;     /* calvin: ACQUIRE by RPC (0) or by WRITE into the
					participant's request buffer (1; calvin_ring.h) */
	uint64_t fabric_wait_ms;     /* a transaction's fabric exec that waits this
					long is told to on_fabric_wait (0: off) */
};

/* Counters of one protocol (cc/protocols/registry.c order). */
struct cc_proto_stats {
	uint64_t commits;
	uint64_t errors;              /* ended with an error, not a commit */
	uint64_t aborts_by_cause[CC_CAUSES];
	struct fab_stats fab;         /* verbs, RPCs, round trips and time of every
					 attempt (by stage: fab.tag_*) */
	uint64_t fetches;             /* attempts that ran a fetch stage (cc/fetch.c) */
	uint64_t fetch_round_trips;   /* round trips those fetch stages took */
};

/*
 * A worker's transaction statistics (INFO stats and cc). Written by the
 * owner worker only, with plain stores; readers sum every worker's with
 * relaxed loads (values may be a few operations old, as Redis's are).
 * 64-bit counters only, so that a reader may treat it as an array.
 */
struct cc_stats {
	uint64_t addr_cache_hits, addr_cache_misses; /* key-to-address cache (cc/cache.c) */
	uint64_t txn_committed;       /* transactions that committed */
	uint64_t txn_aborts;          /* attempts that aborted (each retry counts) */
	uint64_t txn_retries;         /* re-runs after an abort */
	uint64_t txn_timeouts;        /* gave up after txn-timeout */
	uint64_t aborts_by_cause[CC_CAUSES];
	struct fab_stats fab;         /* verbs and round trips of committed txns */
	uint64_t fab_txns;            /* txns whose verbs are in fab */
	uint64_t lock_waits;          /* cc_wait pauses (wait-die, wound-wait, T/O) */
	uint64_t wounds;              /* wound-wait: running holders we wounded */
	uint64_t lease_renewals;      /* sundial: read leases extended at commit */
	uint64_t lease_hits;          /* sundial: reads whose lease already covered
					 the commit timestamp (no verb at commit) */
	struct cc_proto_stats proto[CC_MAX_PROTOCOLS];
};

/* Cluster-wide steps, supplied by the server's control plane; NULL on a
 * standalone node. */
struct cc_cluster_ops {
	/* Switch every node to `to` (quiesce all, switch all, resume all).
	 * ccw: the calling worker (its coroutine yields), or NULL. */
	int (*switch_all)(struct cc_node *n, struct cc_worker *ccw, const struct cc_protocol *to,
			  char *err, size_t errlen);
	/* Set every node's cc-stages (cc_stages_set); NULL: this node only. */
	int (*stages_all)(struct cc_node *n, struct cc_worker *ccw, uint32_t mask, char *err,
			  size_t errlen);
};

/* Log levels of cc_log (the server's levels, in the same order). */
enum cc_loglevel { CC_LOG_DEBUG, CC_LOG_VERBOSE, CC_LOG_NOTICE, CC_LOG_WARNING };

struct cc_node {
	uint16_t id;                  /* this node's id (1..63) */
	uint16_t max_node_id;         /* the largest id of the cluster (this one alone) */
	struct st_region *region;
	const struct st_layout *layout;
	struct fab *fab;

	/* Key -> slot -> replica set (placement/placement.h): published by
	 * the server, read by transactions inside their epoch section (every
	 * cc_worker holds a record, cc_enter opens the section). */
	struct pl_table place;

	/* Workers, by id: set by cc_worker_create, cleared by
	 * cc_worker_destroy. nworkers is set before the first is created. */
	int nworkers;
	struct cc_worker **workers;

	/* Current protocol: written only by the switch (cc/switch.c) while the
	 * node is quiesced; read with ck_pr_load_ptr at transaction begin. */
	const struct cc_protocol *proto;
	uint64_t proto_epoch;
	/* The stages that go two-sided (bit per enum cc_stage): ck_pr store by
	 * cc_stages_set, read at transaction begin. Any mix is sound (above),
	 * so a change needs no quiesce. */
	uint32_t rpc_stages;
	/* Told of every switch this node applies (the server keeps CONFIG GET
	 * cc and cc-lock-mode true); optional. Runs while quiesced. */
	void (*on_switch)(struct cc_node *n, const struct cc_protocol *to);
	/* Told of a transaction's fabric exec (one round trip of a batch)
	 * that waited limits.fabric_wait_ms or more; optional. Any worker. */
	void (*on_fabric_wait)(struct cc_node *n, uint64_t ms);

	/* Quiesce (protocol switch, FLUSHALL): `quiesce` is set with ck_pr
	 * store; a transaction increments its worker's `inflight` at begin
	 * and re-checks `quiesce`; the switcher waits until every worker's
	 * inflight is 0 (cc/exec.c, cc/switch.c). */
	int quiesce;
	pthread_mutex_t switch_lock;  /* one quiesce at a time (cc/switch.c) */
	/* Bumped by every flush of this node's MemStore and every protocol
	 * switch (while quiesced); a worker whose address cache is older
	 * clears it (cc/exec.c). Every node flushes and switches together, so
	 * any node's bump means refs are void. */
	uint64_t flush_epoch;

	/* Replicated clusters (server/membership.c): transactions start only
	 * while sched_now_ns() < lease_until_ns (0: no leases, one copy per
	 * key or standalone); config_epoch is the configuration whose map is
	 * published, moved by the server after each pl_publish. */
	uint64_t lease_until_ns;
	uint64_t config_epoch;
	/* Non-zero: refuse at once rather than wait for a lease; also checked
	 * once a transaction entered (cc_enter), so that a quiesce after it
	 * was set drains the node of every transaction for good. */
	uint32_t config_refuse;

	const struct cc_cluster_ops *cops; /* NULL: standalone */
	/* calvin's sequencer and lock manager (cc/calvin.h): made with the
	 * node, its RPC handlers registered once the fabric is open. */
	struct calvin *calvin;
	struct cc_limits limits;

	/* Logging: one line, no newline; NULL logs to stderr. */
	void (*log)(struct cc_node *n, int level, const char *line);

	/* Coordinator slots whose records a failed peer still has to settle
	 * (cc/undo.c invariant 1): the txn id, and the nodes that failed. The
	 * control plane clears them when those peers have rejoined. */
	uint64_t log_pending[ST_LOG_SLOTS];
	uint64_t log_pending_nodes[ST_LOG_SLOTS];
	/* Transactions (no log slot involved) whose lock releases failed on
	 * the nodes in lock_pending_nodes, or whose lock CAS there may have
	 * won unseen: those nodes release them when the control plane reaches
	 * them (at rejoin, or its periodic retry). Entries are claimed by CAS
	 * on the txn word. */
	uint64_t lock_pending[CC_LOCK_PENDING];
	uint64_t lock_pending_nodes[CC_LOCK_PENDING];

	/* persistence power: group commit (cc/durable.c), NULL otherwise. Set
	 * at start before the workers, cleared after they stopped. */
	struct durable *durable;
	/* With the write-ahead log (st_region_is_wal): sync it once a second,
	 * not before each reply (persistence power-everysec). Set before
	 * durable_start. */
	bool durable_everysec;
	/* A cluster node whose peers' logs are reached by remote flush
	 * (fab_flush: tcp), not by their journal rings. Set before
	 * durable_start. */
	bool durable_remote;
	/* power's log: a worker syncs a round itself when at least this many
	 * of its commits wait (0: never; cc/durable.c, wal_round). Set before
	 * durable_start. */
	int durable_worker_sync_min;
	/* Group commit: flusher rounds (each one msync per distinct page
	 * range), and transactions whose commit point those rounds made
	 * durable; gc_commits / gc_flushes is the commits one flush served.
	 * Written by the flusher thread (ck_pr_add_64), read by anyone with
	 * ck_pr_load_64. */
	uint64_t gc_flushes, gc_commits;
};

/*
 * cc_node_init - set up n's own state (locks, the placement table with
 * `first` as its map, which n then owns) for node `id`; the caller fills
 * region, layout, fab, limits, proto and the hooks. 0 or -ENOMEM.
 */
int cc_node_init(struct cc_node *n, uint16_t id, struct pl_map *first);
/* Undo cc_node_init, once every worker is destroyed. */
void cc_node_destroy(struct cc_node *n);

/* Node `peer` restarted: the current protocol drops what of its earlier
 * incarnation's transactions n's records hold (cc_protocol.peer_restarted).
 * Returns how many words it cleared. Call before the peer's new
 * incarnation reaches n (server/recovery.c, with its locks). */
unsigned cc_peer_restarted(struct cc_node *n, uint16_t peer);

/* Log a line through n->log (any thread). */
void cc_log(struct cc_node *n, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The node a key's CC metadata lives on: its slot's primary (the node
 * itself on a one-node map). Caller inside a read section of its worker
 * (any transaction is). */
uint16_t cc_key_node(struct cc_worker *ccw, const char *key, size_t klen);

/* The replica set of a key, inside the caller's section (cc_enter); NULL
 * with `replicas` 1. */
const struct pl_set *cc_key_set(struct cc_worker *ccw, const char *key, size_t klen);

/*
 * cc_placement_begin / cc_placement_end - the node's current placement map
 * for a reader on a worker's thread (RCKV KEYNODE, INFO): valid until the
 * matching end; no yield in between.
 */
const struct pl_map *cc_placement_begin(struct cc_worker *ccw);
void cc_placement_end(struct cc_worker *ccw);

/* Statistics of a worker (read by INFO with relaxed loads, reset by
 * CONFIG RESETSTAT with relaxed stores). */
struct cc_stats *cc_worker_stats(struct cc_worker *ccw);

/* A worker's transactions in flight (the quiescer sums them). */
uint64_t cc_worker_inflight(const struct cc_worker *ccw);

#endif

/*
 * node: everything one rckv-server process is, passed down explicitly (no
 * globals, so tests can hold several nodes in one process).
 */
#ifndef RCKV_SRV_NODE_H
#define RCKV_SRV_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cc/txn.h"
#include "rdma/fab.h"
#include "server/config.h"
#include "storage/st.h"

/* Entries for transactions whose locks a failed node may still hold
 * (node.lock_pending): about one per transaction in flight when a node
 * fails. */
#define NODE_LOCK_PENDING 256

struct worker;
struct cc_protocol;
struct slot_map;
struct node;
struct durable;

/* Cluster-wide operations (server/cluster.c); NULL on a standalone node. */
struct node_cluster_ops {
	/* Switch every node to `to` (quiesce all, switch all, resume all). */
	int (*switch_all)(struct node *n, struct worker *w, const struct cc_protocol *to,
			  char *err, size_t errlen);
	/* Empty every node's MemStore (FLUSHALL). */
	int (*flush_all)(struct node *n, struct worker *w, char *err, size_t errlen);
};

/*
 * Per-worker statistics. Written by the owner worker only with plain
 * stores; INFO on any worker sums them with relaxed loads (values may be a
 * few operations old, as Redis's are).
 */
/* Counters of one protocol (cc/protocols/registry.c order). */
struct srv_proto_stats {
	uint64_t commits;
	uint64_t errors;              /* ended with an error, not a commit */
	uint64_t aborts_by_cause[CC_CAUSES];
	struct fab_stats fab;         /* verbs and round trips of every attempt */
};

struct srv_stats {
	uint64_t commands;            /* total_commands_processed */
	uint64_t conns_received;      /* total_connections_received */
	uint64_t conns_rejected;      /* rejected_connections (maxclients) */
	uint64_t net_in, net_out;     /* bytes */
	uint64_t proto_errors;        /* total_error_replies of protocol kind */
	uint64_t error_replies;       /* total_error_replies */
	uint64_t keyspace_hits, keyspace_misses;
	uint64_t addr_cache_hits, addr_cache_misses; /* key-to-address cache (cc/cache.c) */
	uint64_t txn_committed;       /* transactions that committed */
	uint64_t txn_aborts;          /* attempts that aborted (each retry counts) */
	uint64_t txn_retries;         /* re-runs after an abort */
	uint64_t txn_timeouts;        /* gave up after txn-timeout */
	uint64_t txn_watch_failed;    /* EXEC replied null because of WATCH */
	uint64_t txn_groups;          /* pipelined write groups committed as one txn */
	uint64_t txn_group_splits;    /* groups run again command by command */
	uint64_t absent_reads;        /* reads of one absent key answered without a txn */
	uint64_t aborts_by_cause[CC_CAUSES];
	struct fab_stats fab;         /* verbs and round trips of committed txns */
	uint64_t fab_txns;            /* txns whose verbs are in fab */
	uint64_t lock_waits;          /* cc_wait pauses (wait-die, wound-wait, T/O) */
	uint64_t wounds;              /* wound-wait: running holders we wounded */
	struct srv_proto_stats proto[CC_MAX_PROTOCOLS];
};

struct node {
	struct srv_config cfg;
	char *config_file;            /* absolute path, or NULL */
	pthread_mutex_t cfg_lock;     /* CONFIG SET and readers of string options */

	struct st_region *region;
	const struct st_layout *layout;
	struct fab *fab;

	/* Slot map: replaced whole by the control plane (ck_pr_store_ptr), never
	 * edited in place; read with ck_pr_load_ptr. */
	const struct slot_map *slots;

	int nworkers;
	struct worker **workers;

	/* Current protocol: written only by the switch (cc/switch.c) while the
	 * node is quiesced; read with ck_pr_load_ptr at transaction begin. */
	const struct cc_protocol *proto;
	uint64_t proto_epoch;

	/* Quiesce (protocol switch, FLUSHALL): `quiesce` is set with ck_pr
	 * store; a transaction increments its worker's `inflight` at begin
	 * and re-checks `quiesce`; the switcher waits until every worker's
	 * inflight is 0 (cc/exec.c, cc/switch.c). */
	int quiesce;
	pthread_mutex_t switch_lock;  /* one quiesce at a time (cc/switch.c) */
	/* Bumped by every flush of this node's MemStore (while quiesced); a
	 * worker whose address cache is older clears it (cc/exec.c). Every
	 * node flushes together, so any node's bump means refs are void. */
	uint64_t flush_epoch;

	const struct node_cluster_ops *cops; /* NULL: standalone */
	struct cluster *cluster;      /* control plane state (server/cluster.c) */

	int shutdown;                 /* set by SHUTDOWN or a signal; workers exit */
	int exit_code;
	uint64_t next_client_id;      /* ck_pr_faa */
	uint64_t connected_clients;   /* ck_pr_inc/dec */
	time_t start_time;
	char run_id[41];
	char executable[4096];
	int listen_fds[SRV_MAX_BIND];
	int nlisten;
	int log_fd;                   /* log destination (server/log.c) */
	uint64_t recovered_keys;      /* live keys found at start */
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
	uint64_t lock_pending[NODE_LOCK_PENDING];
	uint64_t lock_pending_nodes[NODE_LOCK_PENDING];
	struct st_log_stats recovery;  /* what recovery settled at start */
	uint64_t recovery_ms;
	bool recovered_unclean;       /* the last stop was not clean */
	/* persistence power: group commit (cc/durable.c), NULL otherwise. Set
	 * at start before the workers, cleared after they stopped. */
	struct durable *durable;
	/* Group commit: flusher rounds (each one msync per distinct page
	 * range), and transactions whose commit point those rounds made
	 * durable; gc_commits / gc_flushes is the commits one flush served.
	 * Written by the flusher thread (ck_pr_add_64), read by anyone with
	 * ck_pr_load_64. */
	uint64_t gc_flushes, gc_commits;
};

#endif

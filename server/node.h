/*
 * node: everything one rckv-server process is, passed down explicitly (no
 * globals, so tests can hold several nodes in one process).
 */
#ifndef RCKV_SRV_NODE_H
#define RCKV_SRV_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cc/node.h"
#include "cc/txn.h"
#include "rdma/fab.h"
#include "server/config.h"
#include "storage/st.h"

struct worker;
struct cc_protocol;
struct slot_map;
struct node;
struct durable;
struct script_cache;
struct srv_save;
struct ps_node;
struct slowlog;
struct latency;

/* Cluster-wide operations (server/cluster.c); NULL on a standalone node.
 * (The protocol switch is cc's: cc_node.cops.) */
struct node_cluster_ops {
	/* Empty every node's MemStore (FLUSHALL). */
	int (*flush_all)(struct node *n, struct worker *w, char *err, size_t errlen);
	/* Save every node's region (SAVE, BGSAVE: server/save.c), this one's
	 * with srv_save_local, the peers' at the same time. Blocking: save.c's
	 * job thread. 0, or -errno with err naming the node. */
	int (*save_all)(struct node *n, char *err, size_t errlen);
	/* PUBLISH / SPUBLISH on every node (server/pubsub.h, ps_publish): the
	 * receivers on all of them, or -errno. On a coroutine of w. */
	long long (*publish)(struct node *n, struct worker *w, int kind, const char *ch,
			     size_t clen, const char *msg, size_t mlen);
};

/*
 * Per-worker statistics of the server (its transactions' are cc's: struct
 * cc_stats). Written by the owner worker only with plain stores; INFO on
 * any worker sums them with relaxed loads (values may be a few operations
 * old, as Redis's are).
 */
struct srv_stats {
	uint64_t commands;            /* total_commands_processed */
	uint64_t conns_received;      /* total_connections_received */
	uint64_t conns_rejected;      /* rejected_connections (maxclients) */
	uint64_t net_in, net_out;     /* bytes */
	uint64_t proto_errors;        /* total_error_replies of protocol kind */
	uint64_t error_replies;       /* total_error_replies */
	uint64_t keyspace_hits, keyspace_misses;
	uint64_t txn_watch_failed;    /* EXEC replied null because of WATCH */
	uint64_t txn_groups;          /* pipelined write groups committed as one txn */
	uint64_t txn_group_splits;    /* groups run again command by command */
	uint64_t absent_reads;        /* reads of one absent key answered without a txn */
	uint64_t pubsub_delivered;    /* messages taken from the worker's Pub/Sub inbox */
	uint64_t pubsub_cutoffs;      /* subscribers closed by client-output-buffer-limit */
};

struct node {
	/* What the CC layer knows of this node (cc/node.h): region, layout,
	 * fabric, placement, protocol, quiesce, pending settlements, group
	 * commit. First, so that cc's hooks find the node (node_of_cc). */
	struct cc_node cc;
	struct srv_config cfg;
	char *config_file;            /* absolute path, or NULL */
	pthread_mutex_t cfg_lock;     /* CONFIG SET and readers of string options */

	/* Membership: the nodes' addresses (placement is cc.place). Replaced
	 * whole at start (ck_pr_store_ptr), never edited in place. */
	const struct slot_map *slots;

	int nworkers;
	struct worker **workers;

	const struct node_cluster_ops *cops; /* NULL: standalone */
	struct cluster *cluster;      /* control plane state (server/cluster.c) */
	struct membership *membership; /* replicas > 1: the configuration (server/membership.c) */

	int shutdown;                 /* set by SHUTDOWN or a signal; workers exit */
	/* CLIENT PAUSE (server/client_ctl.c): until when (monotonic ms, 0:
	 * none) and whether ALL commands wait (else writes): set under
	 * cfg_lock with ck_pr stores, read with ck_pr loads by every command. */
	uint64_t pause_until_ms;
	int pause_all;
	int exit_code;
	uint64_t next_client_id;      /* ck_pr_faa */
	uint64_t connected_clients;   /* ck_pr_inc/dec */
	uint64_t blocked_clients;     /* parked in a blocking list command (dispatch.c); ck_pr_inc/dec */
	/* used_memory's cache and peak (server/memory.c): ck_pr, any thread. */
	uint64_t mem_used, mem_at_ms, mem_peak;
	time_t start_time;
	char run_id[41];
	char executable[4096];
	int listen_fds[SRV_MAX_BIND];
	int nlisten;
	int log_fd;                   /* log destination (server/log.c) */
	struct script_cache *scripts; /* EVAL's cache, shared by the workers (server/script.h) */
	struct ps_node *pubsub;       /* Pub/Sub registry (server/pubsub.c) */
	struct slowlog *slowlog;      /* SLOWLOG (server/slowlog.c) */
	struct latency *latency;      /* LATENCY (server/latency.c) */
	struct acl *acl;              /* users (server/acl.c) */
	uint64_t acl_gen;             /* ACL changes so far: acl.h, invariant (2) */
	struct srv_save *save;        /* SAVE, BGSAVE, LASTSAVE (server/save.h) */
	struct expire_cycle *expire;  /* active expiry (server/expire.h) */
	uint64_t recovered_keys;      /* live keys found at start */
	struct st_log_stats recovery;  /* what recovery settled at start */
	uint64_t recovery_ms;
	bool recovered_unclean;       /* the last stop was not clean */
	/* INFO's log fsyncs per second: the last two samples (cfg_lock). */
	uint64_t fsync_rate_at_us, fsync_rate_count;
	double fsync_rate;
};

/* The server node that embeds a cc node (cc's hooks get the cc node). */
static inline struct node *node_of_cc(struct cc_node *cn)
{
	return (struct node *)(void *)((char *)cn - offsetof(struct node, cc));
}

#endif

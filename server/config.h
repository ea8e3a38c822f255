/*
 * config: rckv-server options. Syntax is redis.conf's: one option per line,
 * `name value [value ...]`, # comments, double or single quotes with
 * Redis's escapes, sizes with units (1k 1kb 1m 1mb 1g 1gb, case-insensitive).
 * Command-line `--name value ...` overrides the file. Every option, its
 * default and whether CONFIG SET may change it are in one table (config.c)
 * and documented in conf/rckv.conf.
 *
 * Threads: loaded by main before workers start; CONFIG SET runs on a worker
 * while the node holds srv_config_lock (see node.h), so readers of mutable
 * fields on the hot path read them with ck_pr_load or a snapshot.
 */
#ifndef RCKV_SRV_CONFIG_H
#define RCKV_SRV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define SRV_MAX_BIND 16
#define SRV_MAX_CLUSTER_NODES 63

/* One `cluster-node <id> <client host:port> <fabric host:port>` line. */
struct cfg_cluster_node {
	int id;
	char client[128];
	char fabric[128];
	char raft[128];   /* the configuration's Raft group and leases (replicas > 1) */
};

enum { SRV_COBL_NORMAL = 0, SRV_COBL_REPLICA = 1, SRV_COBL_PUBSUB = 2 };

/* `coroutines auto`: 32 per worker, 256 under persistence power or
 * power-everysec, where every writing client waits for a sync and the next
 * sync takes the commits of every client waiting (srv_node_start). */
#define CFG_COROUTINES_AUTO 0
#define CFG_COROUTINES_DEFAULT 32
#define CFG_COROUTINES_POWER 256

struct srv_config {
	/* network */
	int port;                       /* port 6379 */
	char *bind[SRV_MAX_BIND];       /* bind 127.0.0.1 */
	int nbind;
	int tcp_backlog;                /* tcp-backlog 511 */
	int maxclients;                 /* maxclients 10000 (mutable) */
	int timeout;                    /* timeout 0: idle seconds before closing a client (mutable) */
	char *requirepass;              /* requirepass "" (mutable) */

	/* execution */
	int threads;                    /* threads auto: cores - 1, at least 1 */
	int coroutines;                 /* coroutines auto per worker (CFG_COROUTINES_AUTO) */
	int busy_poll_us;               /* busy-poll-us 30 (mutable): poll before sleeping */
	char *cc;                       /* cc silo (mutable: online switch) */
	char *cc_lock_mode;             /* cc-lock-mode exclusive: exclusive|shared (nowait) */
	uint32_t cc_stages;             /* cc-stages onesided: the RPC stages, a bit per
					   enum cc_stage (mutable, cluster-wide) */
	int mvcc_versions;              /* mvcc-versions 4: version slots per item (mvcc) */
	int maat_list_slots;            /* maat-list-slots 4: reader/writer list slots per item */
	int list_max_listpack_size;     /* list-max-listpack-size -2 (mutable): stored, no effect */
	int list_compress_depth;        /* list-compress-depth 0 (mutable): stored, no effect */
	long long calvin_epoch_us;      /* calvin-epoch-us 5000 (mutable): an epoch's length */
	bool calvin_trace;              /* calvin-trace no (mutable): log each epoch's order */
	char *calvin_acquire;           /* calvin-acquire rpc (mutable): rpc|write, how a
					   coordinator sends ACQUIRE (cc/calvin_ring.h) */
	long long addr_cache_entries;   /* addr-cache-entries 262144: per worker (cc/cache.h) */
	long long txn_timeout_ms;       /* txn-timeout 5000 (mutable) */
	long long busy_reply_ms;        /* busy-reply-threshold (lua-time-limit) 5000: a
					   script running longer is stopped (mutable) */
	long long script_memory_limit;  /* script-memory-limit 64mb: bytes a script's Lua
					   heap may grow by (mutable) */

	/* limits */
	long long max_key_bytes;        /* max-key-bytes 64kb (mutable) */
	long long max_value_bytes;      /* max-value-bytes 1mb (mutable) */
	long long query_buf_limit;      /* client-query-buffer-limit 1gb (mutable) */
	long long proto_max_bulk_len;   /* proto-max-bulk-len 512mb (mutable) */
	/* client-output-buffer-limit normal 0 0 0 replica 256mb 64mb 60 pubsub
	 * 32mb 8mb 60 (mutable): per class (SRV_COBL_*), hard bytes, soft
	 * bytes, soft seconds; 0 is no limit. rckv enforces pubsub's
	 * (server/pubsub.c); normal and replica are kept for CONFIG GET. */
	uint64_t cobl[3][3];

	/* storage */
	long long memory;               /* memory 512mb: MemStore region bytes */
	long long maxmemory;            /* maxmemory 0 (mutable): past it, commands that
					   may add data fail with OOM (server/memory.c); 0: none */
	char *maxmemory_policy;         /* maxmemory-policy noeviction (mutable): the only one */
	char *dir;                      /* dir ./data */
	char *persistence;              /* persistence process: none|process|power|power-everysec */
	bool power_log;                 /* power-log yes: power off pmem keeps a write-ahead log */
	long long checkpoint_log_size;  /* checkpoint-log-size 64mb: log between checkpoints */
	int power_worker_sync_min;      /* power-worker-sync-min 8: cc/durable.c, wal_round */
	bool power_sim;                 /* power-sim no: simulate power loss (testing) */
	long long power_sim_crash_after; /* power-sim-crash-after 0: cut at this persist */
	char *power_sim_crash_in;       /* power-sim-crash-in any: count only checkpoint persists */

	/* fabric and cluster */
	int node_id;                    /* node 1 */
	char *fabric;                   /* fabric shm: shm|tcp|verbs */
	int fabric_delay_us;            /* fabric-delay-us 0 */
	int replicas;                   /* replicas 1: nodes that hold each slot */
	bool auto_rebalance;            /* auto-rebalance yes: primaries back after a rejoin (mutable) */
	char *fabric_device;            /* fabric-device "": verbs device, "" = the first */
	struct cfg_cluster_node cluster_nodes[SRV_MAX_CLUSTER_NODES]; /* cluster-node lines */
	int ncluster_nodes;             /* 0: a standalone node */

	/* operations */
	long long slowlog_slower_than;  /* slowlog-log-slower-than 10000 (mutable): us; -1 off */
	long long slowlog_max_len;      /* slowlog-max-len 128 (mutable) */
	bool latency_tracking;          /* latency-tracking yes (mutable): INFO latencystats */
	long long latency_threshold_ms; /* latency-monitor-threshold 0 (mutable): LATENCY; 0 off */
	uint32_t notify_flags;          /* notify-keyspace-events "" (mutable): server/notify.h */
	char *loglevel;                 /* loglevel notice: debug|verbose|notice|warning (mutable) */
	char *logfile;                  /* logfile "": stdout */
	bool testing;                   /* testing no: enables test-only protocols and faults */
};

/* Where a setting comes from, for error messages. */
struct cfg_origin {
	const char *file; /* config file path, or "command line", or NULL (CONFIG SET) */
	int line;
};

/* Fill every field with its default. */
void cfg_defaults(struct srv_config *c);
void cfg_free(struct srv_config *c);

/*
 * cfg_set - set one option from its name and arguments (already split).
 * Returns 0, or -1 with err filled: "unknown option", "argument must be a
 * memory value", etc. (the reason only; callers add file and line).
 */
int cfg_set(struct srv_config *c, const char *name, int argc, char **argv, char *err,
	    size_t errlen);

/*
 * cfg_load_file - read a redis.conf-syntax file. On error returns -1 and
 * err is the whole message, e.g.
 *   "conf/rckv.conf:12: unknown option 'prot'"
 */
int cfg_load_file(struct srv_config *c, const char *path, char *err, size_t errlen);
/* The same from an open stream (the fuzz harness reads from memory);
 * `path` names it in messages. The caller closes f. */
int cfg_load_stream(struct srv_config *c, FILE *f, const char *path, char *err, size_t errlen);

/*
 * cfg_parse_argv - `rckv-server [file.conf] [--name value ...]`: loads the
 * file if one is given, then applies each --name with the arguments that
 * follow it up to the next --option. argv holds the arguments after the
 * program name (main passes argc - 1, argv + 1). Errors name "command
 * line" and the option. Returns 0 or -1 with err.
 */
int cfg_parse_argv(struct srv_config *c, int argc, char **argv, char *err, size_t errlen);

/* Options visible through CONFIG GET, with their current value as text. */
typedef void (*cfg_visit_fn)(void *arg, const char *name, const char *value);
/* Visit every option whose name matches the glob pattern (case-insensitive). */
void cfg_get(const struct srv_config *c, const char *pattern, cfg_visit_fn fn, void *arg);

/* True if CONFIG SET may change this option at run time; false for unknown. */
bool cfg_is_mutable(const char *name);
/* True if the option exists. */
bool cfg_exists(const char *name);

/*
 * cfg_rewrite - CONFIG REWRITE: write c back to the file at path, keeping
 * its comments, blank lines and the lines of options CONFIG SET cannot
 * change; each mutable option's first line takes its current value (later
 * lines of it are dropped), and mutable options that differ from their
 * default and have no line are appended under "# Generated by CONFIG
 * REWRITE". Written to a temporary file, synced, then renamed over path.
 * 0, or -1 with the reason (strerror text) in err. Caller holds cfg_lock.
 */
int cfg_rewrite(const struct srv_config *c, const char *path, char *err, size_t errlen);

/* Parse "1gb" style memory values. Returns 0 or -1. */
int cfg_parse_memory(const char *s, long long *out);

#endif

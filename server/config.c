/*
 * config.c: the option table of rckv-server, the redis.conf-syntax parser
 * and the command-line overrides (see config.h).
 *
 * Every option is one row of `options` below: its name, its type, whether
 * CONFIG SET may change it, where it lives in struct srv_config, its bounds
 * and its default *as text*. cfg_defaults() applies each default through
 * cfg_set(), so a default is written once and parsed like any other value,
 * and conf/rckv.conf documents the same texts (tests/unit/test_config.c
 * checks that the file and the table agree).
 *
 * Error reasons are Redis 7.0's CONFIG SET texts ("argument couldn't be
 * parsed into an integer", "argument must be a memory value", ...), so that
 * CONFIG SET replies match Redis byte for byte once cmd_server.c wraps them.
 *
 * Threads: cfg_defaults/cfg_load_file/cfg_parse_argv run on the main thread
 * before workers start. Later cfg_set calls (CONFIG SET) run with the node's
 * cfg_lock held; numeric options are stored with ck_pr stores so that hot
 * paths may read them with ck_pr loads without the lock. Enum options
 * (loglevel, persistence, fabric) and cc point at static strings and may
 * also be read without the lock (ck_pr_load_ptr). Free-text options
 * (requirepass, dir, logfile) are replaced and the old copy freed, so
 * their readers must hold cfg_lock.
 */
#include "server/config.h"

#include <ck_pr.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cc/cc.h"
#include "placement/placement.h"
#include "rdma/fab.h"
#include "server/notify.h"
#include "server/strutil.h"
#include "storage/st.h"

enum opt_type {
	OT_INT,    /* int, decimal */
	OT_LL,     /* long long, decimal */
	OT_MEM,    /* long long, memory value with optional unit */
	OT_BOOL,   /* bool, yes|no */
	OT_STR,    /* char *, any text */
	OT_ENUM,   /* char *, one of `choices` (stored lower case) */
	OT_BIND,   /* bind: 1..SRV_MAX_BIND addresses */
	OT_PROTO,  /* char *, a name of the cc protocol table (stored as listed) */
	OT_STAGES, /* uint32_t, cc-stages: a mask of RPC stages (cc_stages_parse) */
	OT_PSEUDO, /* not an rckv option: a fixed CONFIG GET answer for Redis tools */
	OT_CNODE,  /* cluster-node <id> <client> <fabric> [<raft>] (host:port each), repeatable */
	OT_COBL,   /* client-output-buffer-limit <class> <hard> <soft> <secs> [...] */
	OT_NOTIFY, /* uint32_t, notify-keyspace-events: Redis's class letters (notify.h) */
};

struct opt {
	const char *name;
	enum opt_type type;
	bool mutable_;
	size_t off;                  /* offsetof(struct srv_config, field) */
	long long min, max;          /* OT_INT, OT_LL, OT_MEM */
	const char *const *choices;  /* OT_ENUM, NULL-terminated */
	const char *def;             /* default as text; OT_PSEUDO: the CONFIG GET value */
};

static const char *const crash_in_choices[] = { "any", "checkpoint", NULL };
static const char *const persistence_choices[] = { "none", "process", "power", "power-everysec",
						     NULL };
static const char *const loglevel_choices[] = { "debug", "verbose", "notice", "warning", NULL };
static const char *const fabric_choices[] = { "shm", "tcp", "verbs", NULL };
static const char *const lock_mode_choices[] = { "exclusive", "shared", NULL };
static const char *const calvin_acquire_choices[] = { "rpc", "write", NULL };
/* rckv never evicts: a key is data a transaction committed, and evicting
 * one would be a write no client asked for. Redis's other policies are
 * refused by name (evicting_policy). */
static const char *const maxmemory_policy_choices[] = { "noeviction", NULL };
static const char *const redis_evicting_policies[] = { "volatile-lru", "volatile-lfu",
						       "volatile-random", "volatile-ttl",
						       "allkeys-lru", "allkeys-lfu",
						       "allkeys-random", NULL };

/*
 * An item (header, key and value) must fit the largest size class, one
 * slab (storage/st.h). The two limits are bounded separately so that no
 * pair of accepted values can exceed it, whatever order they are set in:
 * 512kb + 3mb + the 48-byte header < 4 MiB.
 */
#define CFG_MAX_KEY_BYTES (512LL << 10)
#define CFG_MAX_VALUE_BYTES (3LL << 20)
static_assert(CFG_MAX_KEY_BYTES + CFG_MAX_VALUE_BYTES + sizeof(struct st_item) <= ST_SLAB_BYTES,
	      "the largest key plus the largest value must fit one slab");

#define OFF(f) offsetof(struct srv_config, f)

/*
 * `threads auto`: one worker per online core but one, at least one. The
 * spare core runs the kernel's network processing and, on a small machine,
 * the clients: with redis-benchmark on the same 2-core box, one worker
 * serves GET/SET at -P 16 faster than two (bench/redis-compare.sh; two
 * workers and the client then share two cores and switch constantly).
 */
static long long auto_threads(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	long long n = cores > 1 ? cores - 1 : 1;
	return n > 64 ? 64 : n;
}

/* The order is the order of CONFIG GET * and of conf/rckv.conf. */
static const struct opt options[] = {
	/* network */
	{ "port", OT_INT, false, OFF(port), 0, 65535, NULL, "6379" },
	{ "bind", OT_BIND, false, OFF(bind), 0, 0, NULL, "127.0.0.1" },
	{ "tcp-backlog", OT_INT, false, OFF(tcp_backlog), 0, INT_MAX, NULL, "511" },
	{ "maxclients", OT_INT, true, OFF(maxclients), 1, INT_MAX, NULL, "10000" },
	{ "timeout", OT_INT, true, OFF(timeout), 0, INT_MAX, NULL, "0" },
	{ "requirepass", OT_STR, true, OFF(requirepass), 0, 0, NULL, "" },
	/* execution */
	{ "threads", OT_INT, false, OFF(threads), 1, 64, NULL, "auto" },
	{ "coroutines", OT_INT, false, OFF(coroutines), 1, 1024, NULL, "auto" },
	{ "busy-poll-us", OT_INT, true, OFF(busy_poll_us), 0, 1000000, NULL, "30" },
	{ "cc", OT_PROTO, true, OFF(cc), 0, 0, NULL, "silo" },
	{ "cc-lock-mode", OT_ENUM, true, OFF(cc_lock_mode), 0, 0, lock_mode_choices, "exclusive" },
	{ "cc-stages", OT_STAGES, true, OFF(cc_stages), 0, 0, NULL, "onesided" },
	{ "mvcc-versions", OT_INT, true, OFF(mvcc_versions), 1, 16, NULL, "4" },
	{ "maat-list-slots", OT_INT, true, OFF(maat_list_slots), 1, 16, NULL, "4" },
	{ "calvin-epoch-us", OT_LL, true, OFF(calvin_epoch_us), 100, 1000000, NULL, "5000" },
	{ "calvin-trace", OT_BOOL, true, OFF(calvin_trace), 0, 0, NULL, "no" },
	{ "calvin-acquire", OT_ENUM, true, OFF(calvin_acquire), 0, 0, calvin_acquire_choices,
	  "rpc" },
	{ "addr-cache-entries", OT_LL, true, OFF(addr_cache_entries), 1, 1LL << 30, NULL,
	  "262144" },
	{ "txn-timeout", OT_LL, true, OFF(txn_timeout_ms), 1, 3600000, NULL, "5000" },
	/* scripts; lua-time-limit is Redis's older name of busy-reply-threshold */
	{ "busy-reply-threshold", OT_LL, true, OFF(busy_reply_ms), 0, LLONG_MAX, NULL, "5000" },
	{ "lua-time-limit", OT_LL, true, OFF(busy_reply_ms), 0, LLONG_MAX, NULL, "5000" },
	{ "script-memory-limit", OT_MEM, true, OFF(script_memory_limit), 1LL << 20, 1LL << 40,
	  NULL, "64mb" },
	/* limits */
	{ "max-key-bytes", OT_MEM, true, OFF(max_key_bytes), 1, CFG_MAX_KEY_BYTES, NULL, "64kb" },
	{ "max-value-bytes", OT_MEM, true, OFF(max_value_bytes), 1, CFG_MAX_VALUE_BYTES, NULL,
	  "1mb" },
	{ "client-query-buffer-limit", OT_MEM, true, OFF(query_buf_limit), 1LL << 20, LLONG_MAX,
	  NULL, "1gb" },
	{ "proto-max-bulk-len", OT_MEM, true, OFF(proto_max_bulk_len), 1LL << 20, LLONG_MAX, NULL,
	  "512mb" },
	{ "client-output-buffer-limit", OT_COBL, true, OFF(cobl), 0, 0, NULL,
	  "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60" },
	/* Redis's list encoding knobs (list-max-ziplist-size is the older
	 * name): accepted and stored so that Redis's tools and test suites
	 * may set them, with no effect: rckv's lists keep their own layout
	 * (server/list.h). */
	{ "list-max-listpack-size", OT_INT, true, OFF(list_max_listpack_size), INT_MIN, INT_MAX,
	  NULL, "-2" },
	{ "list-max-ziplist-size", OT_INT, true, OFF(list_max_listpack_size), INT_MIN, INT_MAX,
	  NULL, "-2" },
	{ "list-compress-depth", OT_INT, true, OFF(list_compress_depth), 0, INT_MAX, NULL, "0" },
	/* storage */
	{ "memory", OT_MEM, false, OFF(memory), 16LL << 20, 1LL << 44, NULL, "512mb" },
	{ "maxmemory", OT_MEM, true, OFF(maxmemory), 0, LLONG_MAX, NULL, "0" },
	{ "maxmemory-policy", OT_ENUM, true, OFF(maxmemory_policy), 0, 0,
	  maxmemory_policy_choices, "noeviction" },
	{ "dir", OT_STR, false, OFF(dir), 0, 0, NULL, "./data" },
	{ "persistence", OT_ENUM, false, OFF(persistence), 0, 0, persistence_choices, "process" },
	{ "power-log", OT_BOOL, false, OFF(power_log), 0, 0, NULL, "yes" },
	{ "checkpoint-log-size", OT_MEM, false, OFF(checkpoint_log_size), 64LL << 10, 1LL << 44,
	  NULL, "64mb" },
	{ "power-worker-sync-min", OT_INT, false, OFF(power_worker_sync_min), 0, INT_MAX, NULL,
	  "8" },
	{ "power-sim", OT_BOOL, false, OFF(power_sim), 0, 0, NULL, "no" },
	{ "power-sim-crash-in", OT_ENUM, false, OFF(power_sim_crash_in), 0, 0, crash_in_choices,
	  "any" },
	{ "power-sim-crash-after", OT_LL, false, OFF(power_sim_crash_after), 0, LLONG_MAX, NULL,
	  "0" },
	/* fabric and cluster */
	{ "node", OT_INT, false, OFF(node_id), 1, FAB_MAX_NODES - 1, NULL, "1" },
	{ "fabric", OT_ENUM, false, OFF(fabric), 0, 0, fabric_choices, "shm" },
	{ "fabric-delay-us", OT_INT, false, OFF(fabric_delay_us), 0, 1000000, NULL, "0" },
	{ "fabric-device", OT_STR, false, OFF(fabric_device), 0, 0, NULL, "" },
	{ "replicas", OT_INT, false, OFF(replicas), 1, PL_MAX_REPLICAS, NULL, "1" },
	{ "auto-rebalance", OT_BOOL, true, OFF(auto_rebalance), 0, 0, NULL, "yes" },
	{ "cluster-node", OT_CNODE, false, OFF(cluster_nodes), 0, 0, NULL, "" },
	/* operations */
	{ "slowlog-log-slower-than", OT_LL, true, OFF(slowlog_slower_than), -1, LLONG_MAX, NULL,
	  "10000" },
	{ "slowlog-max-len", OT_LL, true, OFF(slowlog_max_len), 0, LLONG_MAX, NULL, "128" },
	{ "latency-tracking", OT_BOOL, true, OFF(latency_tracking), 0, 0, NULL, "yes" },
	{ "notify-keyspace-events", OT_NOTIFY, true, OFF(notify_flags), 0, 0, NULL, "" },
	{ "latency-monitor-threshold", OT_LL, true, OFF(latency_threshold_ms), 0, LLONG_MAX, NULL,
	  "0" },
	{ "loglevel", OT_ENUM, true, OFF(loglevel), 0, 0, loglevel_choices, "notice" },
	{ "logfile", OT_STR, false, OFF(logfile), 0, 0, NULL, "" },
	{ "testing", OT_BOOL, false, OFF(testing), 0, 0, NULL, "no" },
	/* Redis tools ask for these (redis-benchmark: save, appendonly); rckv
	 * persists every commit by itself and has one database. */
	{ "save", OT_PSEUDO, false, 0, 0, 0, NULL, "" },
	{ "appendonly", OT_PSEUDO, false, 0, 0, 0, NULL, "no" },
	{ "databases", OT_PSEUDO, false, 0, 0, 0, NULL, "1" },
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const struct opt *find_opt(const char *name)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (strcasecmp(options[i].name, name) == 0)
			return &options[i];
	return NULL;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int cfg_parse_memory(const char *s, long long *out)
{
	/* Units as Redis's memtoull: k/m/g are powers of 1000, kb/mb/gb powers
	 * of 1024, b or nothing is bytes; case-insensitive. */
	static const struct {
		const char *unit;
		long long mul;
	} units[] = {
		{ "", 1 },          { "b", 1 },
		{ "k", 1000 },      { "kb", 1024 },
		{ "m", 1000000 },   { "mb", 1LL << 20 },
		{ "g", 1000000000 }, { "gb", 1LL << 30 },
	};
	size_t n = strlen(s), digits = 0;
	while (digits < n && isdigit((unsigned char)s[digits]))
		digits++;
	const char *unit = s + digits;
	long long mul = 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcasecmp(unit, units[i].unit) == 0)
			mul = units[i].mul;
	long long v;
	if (mul == 0 || srv_str2ll(s, digits, &v) != 0 || v < 0)
		return -1;
	if (v > LLONG_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static int store_string(char **slot, const char *a, char *err, size_t errlen)
{
	char *s = strdup(a);
	if (!s)
		return fail(err, errlen, "out of memory");
	free(*slot);
	*slot = s;
	return 0;
}

/*
 * Enum and protocol options point at their choice's static string instead
 * of a copy, so that a reader that does not hold cfg_lock (the logger
 * reading loglevel, say) never sees freed memory when CONFIG SET changes
 * the value; cfg_free leaves them alone. Nobody writes through them.
 */
static void store_static(char **slot, const char *s)
{
	ck_pr_store_ptr(slot, (void *)s);
}

/* The canonical spelling of an enum value, or NULL with the reason. */
static const char *enum_name(const struct opt *o, const char *a, char *err, size_t errlen)
{
	for (int i = 0; o->choices[i]; i++)
		if (strcasecmp(a, o->choices[i]) == 0)
			return o->choices[i];
	if (o->choices == maxmemory_policy_choices)
		for (int i = 0; redis_evicting_policies[i]; i++)
			if (strcasecmp(a, redis_evicting_policies[i]) == 0) {
				fail(err, errlen,
				     "'%s' evicts keys, which rckv does not do: the only policy "
				     "supported is noeviction (writes past maxmemory fail with OOM)",
				     redis_evicting_policies[i]);
				return NULL;
			}
	char list[256];
	size_t len = 0;
	list[0] = '\0';
	for (int i = 0; o->choices[i] && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
					o->choices[i]);
	fail(err, errlen, "argument(s) must be one of the following: %s", list);
	return NULL;
}

/*
 * The name of a protocol of the cc table, or NULL with the reason. Whether
 * a testing-only protocol may run depends on `testing`, which a file may
 * set on a later line, so that is checked by the server at start and by
 * cc_switch() at CONFIG SET; an unknown name fails here, with its line.
 */
static const char *proto_name(const char *a, char *err, size_t errlen)
{
	const struct cc_protocol *p = cc_protocol_find(a);
	if (p)
		return p->name;
	char list[256];
	size_t len = 0;
	const struct cc_protocol *const *all = cc_protocol_all();
	list[0] = '\0';
	for (int i = 0; all[i] && len < sizeof(list); i++)
		if (!all[i]->testing_only && !all[i]->id)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
						len ? ", " : "", all[i]->name);
	fail(err, errlen, "unknown concurrency control protocol '%s' (one of: %s)", a, list);
	return NULL;
}

/* host:port with a port in 1..65535 */
static bool is_host_port(const char *s)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s)
		return false;
	long long port;
	return srv_str2ll(colon + 1, strlen(colon + 1), &port) == 0 && port >= 1 && port <= 65535;
}

static int set_cluster_node(struct srv_config *c, int argc, char **argv, char *err,
			    size_t errlen)
{
	long long id;
	if (argc != 3 && argc != 4)
		return fail(err, errlen,
			    "wrong number of arguments (want: cluster-node <id> <client host:port> "
			    "<fabric host:port> [<raft host:port>])");
	if (srv_str2ll(argv[0], strlen(argv[0]), &id) != 0 || id < 1 || id >= FAB_MAX_NODES)
		return fail(err, errlen, "node id must be between 1 and %d", FAB_MAX_NODES - 1);
	for (int i = 1; i < argc; i++)
		if (!is_host_port(argv[i]) || strlen(argv[i]) >= sizeof(c->cluster_nodes[0].client))
			return fail(err, errlen, "'%s' is not a host:port address", argv[i]);
	for (int i = 0; i < c->ncluster_nodes; i++)
		if (c->cluster_nodes[i].id == id)
			return fail(err, errlen, "node %lld is listed twice", id);
	if (c->ncluster_nodes == SRV_MAX_CLUSTER_NODES)
		return fail(err, errlen, "too many cluster nodes (max %d)", SRV_MAX_CLUSTER_NODES);
	struct cfg_cluster_node *cn = &c->cluster_nodes[c->ncluster_nodes++];
	cn->id = (int)id;
	snprintf(cn->client, sizeof(cn->client), "%s", argv[1]);
	snprintf(cn->fabric, sizeof(cn->fabric), "%s", argv[2]);
	if (argc == 4) {
		snprintf(cn->raft, sizeof(cn->raft), "%s", argv[3]);
		return 0;
	}
	/* By default the fabric's host, 10000 ports away (Redis Cluster's
	 * bus is its client port + 10000). */
	const char *colon = strrchr(argv[2], ':');
	long long port = atoll(colon + 1);
	port = port + 10000 <= 65535 ? port + 10000 : port - 10000;
	snprintf(cn->raft, sizeof(cn->raft), "%.*s:%lld", (int)(colon - argv[2]), argv[2], port);
	return 0;
}

/*
 * client-output-buffer-limit, as Redis 7.0 parses it: groups of <class>
 * <hard> <soft> <soft-seconds>, given as separate words (a config file
 * line) or as one string (CONFIG SET); a class not named keeps its
 * limits. All groups are checked before any is stored. The texts are
 * Redis's.
 */
static int set_cobl(struct srv_config *c, int argc, char **argv, char *err, size_t errlen)
{
	char *words[64];
	int nw = 0;
	char *copy = NULL;
	if (argc == 1) { /* one string: split it on spaces */
		copy = strdup(argv[0]);
		if (!copy)
			return fail(err, errlen, "out of memory");
		char *save = NULL;
		for (char *s = strtok_r(copy, " \t", &save); s && nw < 64;
		     s = strtok_r(NULL, " \t", &save))
			words[nw++] = s;
	} else {
		for (int i = 0; i < argc && nw < 64; i++)
			words[nw++] = argv[i];
	}
	long long v[3][3];
	bool set[3] = { false, false, false };
	int rc = 0;
	if (nw == 0 || nw % 4 != 0) {
		rc = fail(err, errlen, "Wrong number of arguments in buffer limit configuration.");
		goto out;
	}
	for (int i = 0; i < nw; i += 4) {
		int cls;
		if (strcasecmp(words[i], "normal") == 0)
			cls = SRV_COBL_NORMAL;
		else if (strcasecmp(words[i], "replica") == 0 || strcasecmp(words[i], "slave") == 0)
			cls = SRV_COBL_REPLICA;
		else if (strcasecmp(words[i], "pubsub") == 0)
			cls = SRV_COBL_PUBSUB;
		else {
			rc = fail(err, errlen,
				  "Invalid client class specified in buffer limit configuration.");
			goto out;
		}
		long long hard, soft, secs;
		if (cfg_parse_memory(words[i + 1], &hard) != 0 ||
		    cfg_parse_memory(words[i + 2], &soft) != 0 ||
		    srv_str2ll(words[i + 3], strlen(words[i + 3]), &secs) != 0 || secs < 0) {
			rc = fail(err, errlen, "Error in hard, soft or soft_seconds setting in buffer "
					       "limit configuration.");
			goto out;
		}
		v[cls][0] = hard;
		v[cls][1] = soft;
		v[cls][2] = secs;
		set[cls] = true;
	}
	for (int k = 0; k < 3; k++)
		for (int j = 0; set[k] && j < 3; j++)
			ck_pr_store_64(&c->cobl[k][j], (uint64_t)v[k][j]);
out:
	free(copy);
	return rc;
}

/* Parse one value of `o` and store it. Returns 0 or -1 with the reason. */
static int set_value(struct srv_config *c, const struct opt *o, int argc, char **argv, char *err,
		     size_t errlen)
{
	char *field = (char *)c + o->off;
	long long v;

	if (o->type == OT_PSEUDO)
		return fail(err, errlen,
			    "'%s' is not an rckv option (CONFIG GET reports '%s' for Redis tools only)",
			    o->name, o->def);
	if (o->type == OT_BIND) {
		if (argc < 1 || argc > SRV_MAX_BIND)
			return fail(err, errlen, "wrong number of arguments (1 to %d addresses)",
				    SRV_MAX_BIND);
		for (int i = 0; i < argc; i++)
			if (argv[i][0] == '\0')
				return fail(err, errlen, "an address of bind is empty");
		char *copy[SRV_MAX_BIND];
		for (int i = 0; i < argc; i++) {
			copy[i] = strdup(argv[i]);
			if (!copy[i]) {
				while (i--)
					free(copy[i]);
				return fail(err, errlen, "out of memory");
			}
		}
		for (int i = 0; i < c->nbind; i++)
			free(c->bind[i]);
		for (int i = 0; i < argc; i++)
			c->bind[i] = copy[i];
		c->nbind = argc;
		return 0;
	}
	if (o->type == OT_CNODE)
		return set_cluster_node(c, argc, argv, err, errlen);
	if (o->type == OT_COBL)
		return set_cobl(c, argc, argv, err, errlen);
	if (argc != 1)
		return fail(err, errlen, "wrong number of arguments");

	const char *a = argv[0];
	switch (o->type) {
	case OT_INT:
	case OT_LL:
		if (o->off == OFF(threads) && strcasecmp(a, "auto") == 0)
			v = auto_threads();
		else if (o->off == OFF(coroutines) && strcasecmp(a, "auto") == 0)
			v = CFG_COROUTINES_AUTO; /* resolved at start (srv_node_start) */
		else if (srv_str2ll(a, strlen(a), &v) != 0)
			return fail(err, errlen, "argument couldn't be parsed into an integer");
		if ((v < o->min || v > o->max) &&
		    !(o->off == OFF(coroutines) && v == CFG_COROUTINES_AUTO))
			return fail(err, errlen, "argument must be between %lld and %lld inclusive",
				    o->min, o->max);
		if (o->type == OT_INT)
			ck_pr_store_int((int *)field, (int)v);
		else
			ck_pr_store_64((uint64_t *)field, (uint64_t)v);
		return 0;
	case OT_MEM:
		if (cfg_parse_memory(a, &v) != 0)
			return fail(err, errlen, "argument must be a memory value");
		if ((v < o->min || v > o->max) &&
		    !(o->off == OFF(coroutines) && v == CFG_COROUTINES_AUTO))
			return fail(err, errlen, "argument must be between %lld and %lld inclusive",
				    o->min, o->max);
		ck_pr_store_64((uint64_t *)field, (uint64_t)v);
		return 0;
	case OT_BOOL:
		if (strcasecmp(a, "yes") == 0)
			*(bool *)field = true;
		else if (strcasecmp(a, "no") == 0)
			*(bool *)field = false;
		else
			return fail(err, errlen, "argument must be 'yes' or 'no'");
		return 0;
	case OT_ENUM:
		if (!(a = enum_name(o, a, err, errlen)))
			return -1;
		store_static((char **)field, a);
		return 0;
	case OT_PROTO:
		if (!(a = proto_name(a, err, errlen)))
			return -1;
		store_static((char **)field, a);
		return 0;
	case OT_STAGES: {
		uint32_t mask;
		if (cc_stages_parse(a, &mask, err, errlen) != 0)
			return -1;
		ck_pr_store_32((uint32_t *)field, mask);
		return 0;
	}
	case OT_STR:
		return store_string((char **)field, a, err, errlen);
	case OT_NOTIFY: {
		uint32_t f;
		if (notify_parse(a, &f) != 0)
			return fail(err, errlen,
				    "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.");
		ck_pr_store_32((uint32_t *)field, f);
		return 0;
	}
	default:
		return fail(err, errlen, "internal error: option type %d", (int)o->type);
	}
}

int cfg_set(struct srv_config *c, const char *name, int argc, char **argv, char *err,
	    size_t errlen)
{
	const struct opt *o = find_opt(name);
	if (!o)
		return fail(err, errlen, "unknown option '%s'", name);
	return set_value(c, o, argc, argv, err, errlen);
}

void cfg_defaults(struct srv_config *c)
{
	char err[256];
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct opt *o = &options[i];
		if (o->type == OT_PSEUDO || o->type == OT_CNODE)
			continue; /* no cluster nodes: a standalone node */
		/* One string, as CONFIG SET gives it. */
		char *arg = (char *)o->def;
		/* A default that does not parse is a bug in the table above, and
		 * the unit test exercises every one of them. */
		if (set_value(c, o, 1, &arg, err, sizeof(err)) != 0) {
			fprintf(stderr, "rckv: bad built-in default of '%s': %s\n", o->name, err);
			abort();
		}
	}
}

void cfg_free(struct srv_config *c)
{
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct opt *o = &options[i];
		char **slot = (char **)((char *)c + o->off);
		if (o->type == OT_STR)
			free(*slot);
		if (o->type == OT_STR || o->type == OT_ENUM || o->type == OT_PROTO)
			*slot = NULL; /* enum and protocol names are static */
	}
	for (int i = 0; i < c->nbind; i++) {
		free(c->bind[i]);
		c->bind[i] = NULL;
	}
	c->nbind = 0;
}

/* ---- the redis.conf line syntax ---- */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

struct words {
	char **v;
	int n, cap;
};

static void words_free(struct words *w)
{
	for (int i = 0; i < w->n; i++)
		free(w->v[i]);
	free(w->v);
	w->v = NULL;
	w->n = w->cap = 0;
}

static int words_push(struct words *w, const char *p, size_t len)
{
	if (w->n == w->cap) {
		int cap = w->cap ? w->cap * 2 : 8;
		char **v = realloc(w->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		w->v = v;
		w->cap = cap;
	}
	char *s = malloc(len + 1);
	if (!s)
		return -1;
	memcpy(s, p, len);
	s[len] = '\0';
	w->v[w->n++] = s;
	return 0;
}

/*
 * Split a line into words as redis.conf does: blanks separate words;
 * "double quotes" take \n \r \t \b \a \\ \" and \xHH escapes; 'single
 * quotes' take only \'; a closing quote must end the word. Returns 0, or
 * -1 with the reason.
 */
static int split_line(const char *line, struct words *out, char *err, size_t errlen)
{
	const char *p = line;
	size_t cap = strlen(line) + 1;
	char *buf = malloc(cap);
	if (!buf)
		return fail(err, errlen, "out of memory");

	for (;;) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		size_t len = 0;
		bool dq = false, sq = false, done = false;
		while (!done) {
			if (dq) {
				if (!*p)
					goto unbalanced;
				if (p[0] == '\\' && p[1] == 'x' && hexval(p[2]) >= 0 &&
				    hexval(p[3]) >= 0) {
					buf[len++] = (char)(hexval(p[2]) * 16 + hexval(p[3]));
					p += 3;
				} else if (p[0] == '\\' && p[1]) {
					char ch;
					p++;
					switch (*p) {
					case 'n': ch = '\n'; break;
					case 'r': ch = '\r'; break;
					case 't': ch = '\t'; break;
					case 'b': ch = '\b'; break;
					case 'a': ch = '\a'; break;
					default: ch = *p; break;
					}
					buf[len++] = ch;
				} else if (*p == '"') {
					/* The closing quote must be followed by a blank. */
					if (p[1] && !isspace((unsigned char)p[1]))
						goto unbalanced;
					done = true;
				} else {
					buf[len++] = *p;
				}
			} else if (sq) {
				if (!*p)
					goto unbalanced;
				if (p[0] == '\\' && p[1] == '\'') {
					p++;
					buf[len++] = '\'';
				} else if (*p == '\'') {
					if (p[1] && !isspace((unsigned char)p[1]))
						goto unbalanced;
					done = true;
				} else {
					buf[len++] = *p;
				}
			} else {
				switch (*p) {
				case ' ': case '\n': case '\r': case '\t': case '\0':
					done = true;
					break;
				case '"':
					dq = true;
					break;
				case '\'':
					sq = true;
					break;
				default:
					buf[len++] = *p;
					break;
				}
			}
			if (*p)
				p++;
		}
		if (words_push(out, buf, len) != 0) {
			free(buf);
			return fail(err, errlen, "out of memory");
		}
	}
	free(buf);
	return 0;
unbalanced:
	free(buf);
	return fail(err, errlen, "Unbalanced quotes in configuration line");
}

/* Apply one option with a location prefix for errors. */
static int apply(struct srv_config *c, const char *where, const char *name, int argc,
		 char **argv, char *err, size_t errlen)
{
	char why[512];
	if (!find_opt(name))
		return fail(err, errlen, "%s: unknown option '%s'", where, name);
	if (cfg_set(c, name, argc, argv, why, sizeof(why)) != 0)
		return fail(err, errlen, "%s: option '%s': %s", where, name, why);
	return 0;
}

int cfg_load_file(struct srv_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
	int rc = cfg_load_stream(c, f, path, err, errlen);
	fclose(f);
	return rc;
}

int cfg_load_stream(struct srv_config *c, FILE *f, const char *path, char *err, size_t errlen)
{
	char *line = NULL;
	size_t linecap = 0;
	ssize_t n;
	int lineno = 0, rc = 0;
	while ((n = getline(&line, &linecap, f)) >= 0) {
		lineno++;
		char where[4200];
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		const char *p = line;
		while (*p && isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		struct words w = { 0 };
		char why[512];
		if (split_line(p, &w, why, sizeof(why)) != 0) {
			rc = fail(err, errlen, "%s: %s", where, why);
		} else if (w.n > 0) {
			rc = apply(c, where, w.v[0], w.n - 1, w.v + 1, err, errlen);
		}
		words_free(&w);
		if (rc != 0)
			break;
	}
	if (rc == 0 && ferror(f))
		rc = fail(err, errlen, "%s: read error: %s", path, strerror(errno));
	free(line);
	return rc;
}

int cfg_parse_argv(struct srv_config *c, int argc, char **argv, char *err, size_t errlen)
{
	int i = 0; /* argv holds the arguments after the program name */
	if (i < argc && strncmp(argv[i], "--", 2) != 0) {
		if (cfg_load_file(c, argv[i], err, errlen) != 0)
			return -1;
		i++;
	}
	while (i < argc) {
		const char *opt = argv[i];
		if (strncmp(opt, "--", 2) != 0 || opt[2] == '\0')
			return fail(err, errlen, "command line: unexpected argument '%s'", opt);
		int j = i + 1;
		while (j < argc && strncmp(argv[j], "--", 2) != 0)
			j++;
		if (apply(c, "command line", opt + 2, j - i - 1, argv + i + 1, err, errlen) != 0)
			return -1;
		i = j;
	}
	return 0;
}

/* ---- introspection ---- */

/* The current value of `o` as CONFIG GET shows it. */
static void format_value(const struct srv_config *c, const struct opt *o, char *buf, size_t cap)
{
	const char *field = (const char *)c + o->off;
	switch (o->type) {
	case OT_INT:
		snprintf(buf, cap, "%d", ck_pr_load_int((const int *)field));
		break;
	case OT_LL:
	case OT_MEM:
		snprintf(buf, cap, "%lld", (long long)ck_pr_load_64((const uint64_t *)field));
		break;
	case OT_BOOL:
		snprintf(buf, cap, "%s", *(const bool *)field ? "yes" : "no");
		break;
	case OT_STR:
	case OT_ENUM:
	case OT_PROTO: {
		const char *s = *(char *const *)field;
		snprintf(buf, cap, "%s", s ? s : "");
		break;
	}
	case OT_BIND: {
		size_t len = 0;
		buf[0] = '\0';
		for (int i = 0; i < c->nbind && len < cap; i++)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? " " : "",
						c->bind[i]);
		break;
	}
	case OT_PSEUDO:
		snprintf(buf, cap, "%s", o->def);
		break;
	case OT_STAGES:
		cc_stages_format(ck_pr_load_32((const uint32_t *)field), buf, cap);
		break;
	case OT_NOTIFY:
		notify_format(ck_pr_load_32((const uint32_t *)field), buf, cap);
		break;
	case OT_COBL:
		snprintf(buf, cap, "normal %lld %lld %lld slave %lld %lld %lld pubsub %lld %lld %lld",
			 (long long)ck_pr_load_64(&c->cobl[0][0]),
			 (long long)ck_pr_load_64(&c->cobl[0][1]),
			 (long long)ck_pr_load_64(&c->cobl[0][2]),
			 (long long)ck_pr_load_64(&c->cobl[1][0]),
			 (long long)ck_pr_load_64(&c->cobl[1][1]),
			 (long long)ck_pr_load_64(&c->cobl[1][2]),
			 (long long)ck_pr_load_64(&c->cobl[2][0]),
			 (long long)ck_pr_load_64(&c->cobl[2][1]),
			 (long long)ck_pr_load_64(&c->cobl[2][2]));
		break;
	case OT_CNODE: {
		size_t len = 0;
		buf[0] = '\0';
		for (int i = 0; i < c->ncluster_nodes && len < cap; i++)
			len += (size_t)snprintf(buf + len, cap - len, "%s%d %s %s %s", i ? " " : "",
						c->cluster_nodes[i].id, c->cluster_nodes[i].client,
						c->cluster_nodes[i].fabric, c->cluster_nodes[i].raft);
		break;
	}
	}
}

void cfg_get(const struct srv_config *c, const char *pattern, cfg_visit_fn fn, void *arg)
{
	size_t plen = strlen(pattern);
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct opt *o = &options[i];
		if (!srv_strmatch(pattern, plen, o->name, strlen(o->name), true))
			continue;
		if (o->type == OT_STR) {
			/* No copy: a string option may be of any length. */
			const char *s = *(char *const *)((const char *)c + o->off);
			fn(arg, o->name, s ? s : "");
		} else if (o->type == OT_BIND || o->type == OT_CNODE) {
			size_t cap = 1 + (size_t)c->ncluster_nodes * 300;
			for (int k = 0; k < c->nbind; k++)
				cap += strlen(c->bind[k]) + 1;
			char *buf = malloc(cap);
			if (!buf)
				continue; /* CONFIG GET shows what it can */
			format_value(c, o, buf, cap);
			fn(arg, o->name, buf);
			free(buf);
		} else {
			char buf[256]; /* numbers, yes/no, enum names, pseudo values, cobl */
			format_value(c, o, buf, sizeof(buf));
			fn(arg, o->name, buf);
		}
	}
}

bool cfg_is_mutable(const char *name)
{
	const struct opt *o = find_opt(name);
	return o && o->mutable_;
}

bool cfg_exists(const char *name)
{
	return find_opt(name) != NULL;
}

/* ---- CONFIG REWRITE ---- */

/* A value as a config line writes it: words as they are, a string that
 * would not read back as one word quoted with Redis's escapes. */
static void put_value(FILE *f, const struct opt *o, const char *v)
{
	bool plain = v[0] != '\0';
	for (const char *p = v; *p && plain; p++)
		plain = *p > ' ' && *p < 0x7f && *p != '"' && *p != '\'' && *p != '\\';
	if (plain || (o->type != OT_STR && o->type != OT_ENUM && o->type != OT_PROTO)) {
		fputs(v, f); /* bind, client-output-buffer-limit: several words */
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < ' ' || *p >= 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* Does the config line w (name and arguments) give option o the value
 * cur (as CONFIG GET shows it)? */
static bool line_says(const struct opt *o, const struct words *w, const char *cur)
{
	if (!cur)
		return false;
	struct srv_config scratch;
	char why[256];
	cfg_defaults(&scratch);
	bool same = false;
	if (set_value(&scratch, o, w->n - 1, w->v + 1, why, sizeof(why)) == 0) {
		char buf[256];
		format_value(&scratch, o, buf, sizeof(buf));
		same = o->type != OT_STR && o->type != OT_BIND && strcmp(buf, cur) == 0;
		if (o->type == OT_STR) {
			const char *s = *(char *const *)((const char *)&scratch + o->off);
			same = strcmp(s ? s : "", cur) == 0;
		}
	}
	cfg_free(&scratch);
	return same;
}

struct rw_value {
	char *cur;
	bool differs; /* from the default */
	bool written;
};

static void rw_visit(void *arg, const char *name, const char *value)
{
	struct rw_value *vals = arg;
	const struct opt *o = find_opt(name);
	struct rw_value *v = &vals[o - options];
	free(v->cur);
	v->cur = strdup(value);
}

static void rw_visit_default(void *arg, const char *name, const char *value)
{
	struct rw_value *vals = arg;
	const struct opt *o = find_opt(name);
	struct rw_value *v = &vals[o - options];
	v->differs = !v->cur || strcmp(v->cur, value) != 0;
}

int cfg_rewrite(const struct srv_config *c, const char *path, char *err, size_t errlen)
{
	struct rw_value vals[NOPTIONS];
	memset(vals, 0, sizeof(vals));
	struct srv_config def;
	cfg_get(c, "*", rw_visit, vals);
	cfg_defaults(&def);
	cfg_get(&def, "*", rw_visit_default, vals);
	cfg_free(&def);

	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.rewrite-%ld", path, (long)getpid());
	FILE *in = fopen(path, "r"), *out = NULL;
	int rc = 0;
	if (!in) {
		rc = fail(err, errlen, "%s", strerror(errno));
		goto done;
	}
	out = fopen(tmp, "w");
	if (!out) {
		rc = fail(err, errlen, "%s", strerror(errno));
		goto done;
	}
	char *line = NULL;
	size_t cap = 0;
	bool generated = false;
	while (getline(&line, &cap, in) >= 0) {
		const char *p = line;
		while (*p && isspace((unsigned char)*p))
			p++;
		struct words w = { 0 };
		char why[256];
		const struct opt *o = NULL;
		if (*p && *p != '#' && split_line(p, &w, why, sizeof(why)) == 0 && w.n > 0)
			o = find_opt(w.v[0]);
		if (strcmp(line, "# Generated by CONFIG REWRITE\n") == 0)
			generated = true;
		if (!o || !o->mutable_) {
			/* Comments, blank lines, and options CONFIG SET cannot
			 * change (they have their value since start): kept. */
			fputs(line, out);
		} else if (!vals[o - options].written && line_says(o, &w, vals[o - options].cur)) {
			fputs(line, out); /* the value it has: the user's spelling kept */
			vals[o - options].written = true;
		} else if (!vals[o - options].written) {
			fprintf(out, "%s ", o->name);
			put_value(out, o, vals[o - options].cur ? vals[o - options].cur : "");
			fputc('\n', out);
			vals[o - options].written = true;
		} /* else: a later line of an option already written: dropped */
		words_free(&w);
	}
	free(line);
	/* Mutable options changed from their default and not in the file. */
	for (size_t i = 0; i < NOPTIONS; i++) {
		if (!options[i].mutable_ || vals[i].written || !vals[i].differs || !vals[i].cur)
			continue;
		if (!generated) {
			fputs("# Generated by CONFIG REWRITE\n", out);
			generated = true;
		}
		fprintf(out, "%s ", options[i].name);
		put_value(out, &options[i], vals[i].cur);
		fputc('\n', out);
	}
	if (fflush(out) != 0 || fsync(fileno(out)) != 0 || ferror(in)) {
		rc = fail(err, errlen, "%s", strerror(errno ? errno : EIO));
		goto done;
	}
	if (fclose(out) != 0) {
		out = NULL;
		rc = fail(err, errlen, "%s", strerror(errno));
		goto done;
	}
	out = NULL;
	if (rename(tmp, path) != 0)
		rc = fail(err, errlen, "%s", strerror(errno));
done:
	if (out)
		fclose(out);
	if (in)
		fclose(in);
	if (rc != 0)
		unlink(tmp);
	for (size_t i = 0; i < NOPTIONS; i++)
		free(vals[i].cur);
	return rc;
}

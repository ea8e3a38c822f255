/*
 * node.c: bring a node up and down (server/srv.h).
 */
#include <arpa/inet.h>
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cc/calvin.h"
#include "cc/cc.h"
#include "cc/durable.h"
#include "cc/switch.h"
#include "server/acl.h"
#include "server/log.h"
#include "server/save.h"
#include "server/sigbus.h"
#include "server/script.h"
#include "server/membership.h"
#include "server/recovery.h"
#include "server/cluster.h"
#include "server/node.h"
#include "server/expire.h"
#include "server/pubsub.h"
#include "server/latency.h"
#include "server/slowlog.h"
#include "server/slots.h"
#include "server/srv.h"
#include "server/worker.h"

static int mkdir_p(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int listen_on(struct node *n, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *s4 = (void *)&ss;
	struct sockaddr_in6 *s6 = (void *)&ss;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)n->cfg.port);
		sl = sizeof(*s4);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)n->cfg.port);
		sl = sizeof(*s6);
	} else {
		snprintf(err, errlen, "bind: '%s' is not an IPv4 or IPv6 address", addr);
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, n->cfg.tcp_backlog) != 0)
		goto fail;
	n->listen_fds[n->nlisten++] = fd;
	return 0;
fail:
	snprintf(err, errlen, "Could not create server TCP listening socket %s:%d: %s", addr,
		 n->cfg.port, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static void make_run_id(struct node *n)
{
	unsigned char rnd[20];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
		uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		for (size_t i = 0; i < sizeof(rnd); i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			rnd[i] = (unsigned char)(x >> 56);
		}
	}
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 20; i++)
		sprintf(n->run_id + 2 * i, "%02x", rnd[i]);
}

static enum st_persistence persistence_of(const char *s)
{
	if (strcasecmp(s, "none") == 0)
		return ST_PERSIST_NONE;
	if (strcasecmp(s, "power") == 0 || strcasecmp(s, "power-everysec") == 0)
		return ST_PERSIST_POWER;
	return ST_PERSIST_PROCESS;
}

/* Coordinator node ids the undo log has slots for: every id of the cluster
 * file, so every node of a cluster computes the same layout. */
static unsigned log_nodes_of(const struct node *n)
{
	int max = n->cfg.node_id;
	for (int i = 0; i < n->cfg.ncluster_nodes; i++)
		if (n->cfg.cluster_nodes[i].id > max)
			max = n->cfg.cluster_nodes[i].id;
	return (unsigned)max;
}

static uint64_t protocol_id(const struct cc_protocol *p)
{
	const struct cc_protocol *const *all = cc_protocol_all();
	for (int i = 0; all[i]; i++)
		if (all[i] == p)
			return (uint64_t)i + 1;
	return 0;
}

/* A cluster member serves clients at its cluster-node line's address. */
static int apply_cluster_self(struct node *n, char *err, size_t errlen)
{
	struct srv_config *c = &n->cfg;
	for (int i = 0; i < c->ncluster_nodes; i++) {
		if (c->cluster_nodes[i].id != c->node_id)
			continue;
		const char *addr = c->cluster_nodes[i].client;
		const char *colon = strrchr(addr, ':');
		char host[128];
		if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
			snprintf(err, errlen, "bad client address '%s' of node %d", addr, c->node_id);
			return -1;
		}
		memcpy(host, addr, (size_t)(colon - addr));
		host[colon - addr] = '\0';
		char *argv[1] = { host };
		char cerr[200];
		if (cfg_set(c, "bind", 1, argv, cerr, sizeof(cerr)) != 0) {
			snprintf(err, errlen, "client address of node %d: %s", c->node_id, cerr);
			return -1;
		}
		c->port = atoi(colon + 1);
		return 0;
	}
	return 0; /* standalone, or not listed: cluster_start says so */
}

/* `replicas` against the members, before a region is made for a layout
 * that cannot be (the cluster id, which the region keeps, counts it). */
static int check_replicas(struct node *n, char *err, size_t errlen)
{
	const struct srv_config *c = &n->cfg;
	if (c->ncluster_nodes == 0 && c->replicas > 1) {
		snprintf(err, errlen, "replicas %d: a standalone server has no other node to copy to "
			 "(replicas needs cluster-node lines)", c->replicas);
		return -1;
	}
	if (c->ncluster_nodes > 0 && c->replicas > c->ncluster_nodes) {
		snprintf(err, errlen, "replicas %d: the cluster has only %d nodes", c->replicas,
			 c->ncluster_nodes);
		return -1;
	}
	return 0;
}

/*
 * persistence power makes what a commit wrote durable on every node it
 * wrote: on shm each node's log is fed through a journal ring that the
 * writers map (storage/jring.c), or its pages are flushed by the writer
 * (power-log no); on tcp each node's NIC thread logs what peers write and
 * answers their remote flushes (fab_flush), so only the log works there;
 * on verbs the NICs write the regions in place, and only persistent
 * memory keeps what a remote flush (a READ behind the WRITEs) has seen
 * arrive (check_power_medium, once the region is open). power-sim is a
 * test harness: it needs `testing yes`, persistence power, and a
 * standalone node (its copies reach only this node's own file).
 */
static int check_power(const struct node *n, const struct st_config *sc, char *err,
		       size_t errlen)
{
	if (n->cfg.power_sim) {
		if (!n->cfg.testing) {
			snprintf(err, errlen, "'power-sim yes' is a test harness: it needs "
				 "'testing yes'");
			return -1;
		}
		if (sc->persistence != ST_PERSIST_POWER) {
			snprintf(err, errlen, "'power-sim yes' simulates power loss for "
				 "'persistence power'; persistence is '%s'",
				 n->cfg.persistence);
			return -1;
		}
		if (n->cfg.ncluster_nodes > 0) {
			snprintf(err, errlen, "'power-sim yes' runs on a standalone node only "
				 "(this node has cluster-node lines)");
			return -1;
		}
	} else if (n->cfg.power_sim_crash_after > 0) {
		snprintf(err, errlen, "'power-sim-crash-after' needs 'power-sim yes'");
		return -1;
	}
	if (sc->persistence == ST_PERSIST_POWER && n->cfg.ncluster_nodes > 0 &&
	    strcasecmp(n->cfg.fabric, "tcp") == 0 && !n->cfg.power_log) {
		snprintf(err, errlen, "'persistence %s' with 'power-log no' needs 'fabric shm' in "
			 "a cluster: page flushes reach a peer's memory only where it is mapped "
			 "here (use power-log yes on tcp)", n->cfg.persistence);
		return -1;
	}
	return 0;
}

/* persistence power on a verbs cluster, once the region is open: only in
 * place on persistent memory (no log: no CPU of this node sees the
 * peers' writes). */
static int check_power_medium(const struct node *n, const struct st_config *sc, char *err,
			      size_t errlen)
{
	if (sc->persistence != ST_PERSIST_POWER || n->cfg.ncluster_nodes == 0 ||
	    strcasecmp(n->cfg.fabric, "verbs") != 0 || st_region_is_pmem(n->cc.region))
		return 0;
	snprintf(err, errlen, "'persistence %s' on 'fabric verbs' needs the region on persistent "
		 "memory (a DAX file system; dir '%s' is not): the peers' NICs write it with no CPU "
		 "here to log or flush their writes (use persistence process, or fabric tcp or shm)",
		 n->cfg.persistence, n->cfg.dir);
	return -1;
}

const char *srv_durable_path(struct node *n)
{
	struct st_region *r = n->cc.region;
	if (!r || persistence_of(n->cfg.persistence) != ST_PERSIST_POWER)
		return "none";
	if (st_wal_ring(r))
		return n->cc.durable_everysec
			       ? "write-ahead log per node (journal ring), fdatasync every second"
			       : "write-ahead log per node (journal ring), fdatasync per commit round";
	if (st_region_is_wal(r) && n->cc.durable_remote)
		return n->cc.durable_everysec
			       ? "write-ahead log per node (peers' writes logged by its NIC thread, "
				 "remote flush), fdatasync every second"
			       : "write-ahead log per node (peers' writes logged by its NIC thread, "
				 "remote flush), fdatasync per commit round";
	if (st_region_is_wal(r))
		return n->cc.durable_everysec ? "write-ahead log, fdatasync every second"
					      : "write-ahead log, fdatasync per commit round";
	if (st_region_is_pmem(r) && n->cc.durable_remote)
		return "in place on persistent memory (the NICs write it; remote flush: a READ "
		       "behind the WRITEs)";
	if (st_region_is_pmem(r))
		return "pmem_persist (persistent memory)";
	return "msync of the changed pages";
}

void srv_node_limits(struct node *n)
{
	struct cc_limits *l = &n->cc.limits;
	ck_pr_store_64(&l->max_key_bytes, (uint64_t)n->cfg.max_key_bytes);
	ck_pr_store_64(&l->max_value_bytes, (uint64_t)n->cfg.max_value_bytes);
	ck_pr_store_64(&l->txn_timeout_ms, (uint64_t)n->cfg.txn_timeout_ms);
	ck_pr_store_64(&l->mvcc_versions, (uint64_t)n->cfg.mvcc_versions);
	ck_pr_store_64(&l->maat_list_slots, (uint64_t)n->cfg.maat_list_slots);
	ck_pr_store_64(&l->calvin_epoch_us, (uint64_t)n->cfg.calvin_epoch_us);
	ck_pr_store_64(&l->calvin_trace, n->cfg.calvin_trace ? 1 : 0);
	const char *acq = ck_pr_load_ptr(&n->cfg.calvin_acquire);
	ck_pr_store_64(&l->calvin_acquire, acq && strcmp(acq, "write") == 0 ? 1 : 0);
	ck_pr_store_64(&l->addr_cache_entries, (uint64_t)n->cfg.addr_cache_entries);
	ck_pr_store_64(&l->testing, n->cfg.testing ? 1 : 0);
	ck_pr_store_64(&l->fabric_wait_ms, (uint64_t)n->cfg.latency_threshold_ms);
}

/* cc's log lines go to the node's log. */
static void log_from_cc(struct cc_node *cn, int level, const char *line)
{
	static_assert((int)CC_LOG_WARNING == (int)LOG_WARNING &&
			      (int)CC_LOG_NOTICE == (int)LOG_NOTICE,
		      "cc's log levels are the server's");
	srv_log(node_of_cc(cn), level, "%s", line);
}

/* A switch applied here (ours or a peer's) keeps CONFIG GET cc and, for a
 * protocol with a shared-lock variant, cc-lock-mode true. */
static void switched(struct cc_node *cn, const struct cc_protocol *to)
{
	struct node *n = node_of_cc(cn);
	ck_pr_store_ptr(&n->cfg.cc, (void *)to->name);
	if (cc_protocol_resolve(to->name, true) != cc_protocol_resolve(to->name, false))
		ck_pr_store_ptr(&n->cfg.cc_lock_mode,
				(void *)(to->shared_locks ? "shared" : "exclusive"));
}

/* A transaction's round trip that waited latency-monitor-threshold or more:
 * the latency monitor's fabric-wait event (server/latency.h). */
static void fabric_waited(struct cc_node *cn, uint64_t ms)
{
	latency_add(node_of_cc(cn), "fabric-wait", ms);
}

/* The CC layer's view of the node, before anything uses it: one member
 * (itself) until the cluster's placement is published. */
static int cc_setup(struct node *n, char *err, size_t errlen)
{
	uint16_t self = (uint16_t)n->cfg.node_id;
	struct pl_map *pm = pl_map_spread(&self, 1, 1, 0);
	if (!pm || cc_node_init(&n->cc, self, pm) != 0) {
		pl_map_free(pm);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n->cc.max_node_id = (uint16_t)log_nodes_of(n);
	n->cc.log = log_from_cc;
	n->cc.on_switch = switched;
	n->cc.on_fabric_wait = fabric_waited;
	n->cc.nworkers = n->cfg.threads;
	n->cc.workers = calloc((size_t)n->cc.nworkers, sizeof(*n->cc.workers));
	if (!n->cc.workers) {
		cc_node_destroy(&n->cc);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	srv_node_limits(n);
	return 0;
}

static void cc_teardown(struct node *n)
{
	free(n->cc.workers);
	n->cc.workers = NULL;
	cc_node_destroy(&n->cc);
}

int srv_node_start(struct node *n, char *err, size_t errlen)
{
	pthread_mutex_init(&n->cfg_lock, NULL);
	n->start_time = time(NULL);
	make_run_id(n);
	if (srv_log_open(n) != 0) {
		snprintf(err, errlen, "can't open the log file '%s': %s", n->cfg.logfile,
			 strerror(errno));
		return -1;
	}
	/* Before the region is mapped: a SIGBUS in it is logged (sigbus.h). */
	srv_sigbus_install(n);
	if (cc_setup(n, err, errlen) != 0)
		return -1;
	const struct cc_protocol *proto =
		cc_protocol_resolve(n->cfg.cc, strcmp(n->cfg.cc_lock_mode, "shared") == 0);
	if (!proto || (proto->testing_only && !n->cfg.testing)) {
		snprintf(err, errlen, "bad value for 'cc': unknown protocol '%s'%s", n->cfg.cc,
			 proto ? " (it needs 'testing yes')" : "");
		goto fail_cc;
	}
	n->cc.proto = proto;
	if (n->cfg.coroutines == CFG_COROUTINES_AUTO)
		n->cfg.coroutines = persistence_of(n->cfg.persistence) == ST_PERSIST_POWER
					    ? CFG_COROUTINES_POWER
					    : CFG_COROUTINES_DEFAULT;
	if (apply_cluster_self(n, err, errlen) != 0)
		goto fail_cc;
	srv_log(n, LOG_NOTICE, "rckv-server starting: node %d, pid %d, port %d, cc %s",
		n->cfg.node_id, (int)getpid(), n->cfg.port, proto->name);

	int rc = mkdir_p(n->cfg.dir);
	if (rc) {
		snprintf(err, errlen, "can't create dir '%s': %s", n->cfg.dir, strerror(-rc));
		goto fail_cc;
	}
	struct st_config sc = {
		.dir = n->cfg.dir,
		.node_id = (uint16_t)n->cfg.node_id,
		.cluster_id = cluster_id_of(n),
		.size = (uint64_t)n->cfg.memory,
		.log_nodes = log_nodes_of(n),
		.persistence = persistence_of(n->cfg.persistence),
		.power_sim = n->cfg.power_sim,
		.power_sim_crash_after = (uint64_t)n->cfg.power_sim_crash_after,
		.power_sim_crash_in_checkpoint = strcasecmp(n->cfg.power_sim_crash_in, "checkpoint") == 0,
		/* A shm cluster node's log is fed through its journal ring,
		 * which shm peers write too (storage/jring.c); on tcp, only
		 * this process writes the region (its NIC thread serves the
		 * peers), so the log is the standalone one. */
		.wal = n->cfg.power_log && !(n->cfg.ncluster_nodes > 0 &&
					     strcasecmp(n->cfg.fabric, "verbs") == 0),
		.wal_ring = n->cfg.power_log && n->cfg.ncluster_nodes > 0 &&
			    strcasecmp(n->cfg.fabric, "shm") == 0,
		.wal_on_pmem = n->cfg.ncluster_nodes > 0 && strcasecmp(n->cfg.fabric, "tcp") == 0,
		.checkpoint_bytes = (uint64_t)n->cfg.checkpoint_log_size,
	};
	if (check_power(n, &sc, err, errlen) != 0 || check_replicas(n, err, errlen) != 0)
		goto fail_cc;
	char serr[512] = "";
	rc = st_region_open(&sc, &n->cc.region, serr, sizeof(serr));
	if (rc) {
		snprintf(err, errlen, "can't open the MemStore: %s", serr[0] ? serr : st_strerror(rc));
		goto fail_cc;
	}
	srv_sigbus_watch(st_region_base(n->cc.region), st_region_layout(n->cc.region)->size,
			 st_region_path(n->cc.region));
	if (check_power_medium(n, &sc, err, errlen) != 0)
		goto fail_region;
	n->cc.layout = st_region_layout(n->cc.region);
	struct st_header *h = st_region_header(n->cc.region);
	struct st_wal_stats ws;
	st_wal_get_stats(n->cc.region, &ws);
	if (ws.replayed_segments)
		srv_log(n, LOG_NOTICE,
			"write-ahead log: replayed %llu records (%llu bytes) from %llu segments",
			(unsigned long long)ws.replayed_records, (unsigned long long)ws.replayed_bytes,
			(unsigned long long)ws.replayed_segments);
	if (ws.torn[0])
		srv_log(n, LOG_WARNING, "write-ahead log: %s", ws.torn);
	if (ws.adopted_copy)
		srv_log(n, LOG_NOTICE,
			"write-ahead log: took the region copy the last run left in /dev/shm "
			"(it stopped without a power cut: the copy holds every write, the log a "
			"prefix)");
	if (st_region_reopened(n->cc.region)) {
		n->recovered_unclean = !st_region_was_clean(n->cc.region);
		uint64_t live = 0;
		if (n->recovered_unclean) {
			/* The last process died: roll back the transactions it was
			 * running and release their locks (recovery.c). */
			srv_recover_local(n);
			live = n->recovered_keys;
		} else {
			live = st_count(n->cc.region);
			srv_log(n, LOG_NOTICE, "MemStore reopened after a clean shutdown: %llu keys",
				(unsigned long long)live);
		}
		n->recovered_keys = live;
	}
	if (h->protocol_id != protocol_id(proto)) {
		/* Another protocol's metadata. Not after a replay alone: a
		 * switch cuts a checkpoint (cc/switch.c), so a log never spans
		 * one, and the lock words recovery left guard a cluster's
		 * transactions until their peers settle them (recovery.c).
		 * A new region holds no item: its walk would only fault in
		 * every page of the index (RSS the size of the index before
		 * the first key; bench/memory.py). */
		if (st_region_reopened(n->cc.region))
			st_reset_meta(n->cc.region);
		h->protocol_id = protocol_id(proto);
	}
	n->cc.proto_epoch = h->protocol_epoch;
	if (st_region_is_wal(n->cc.region)) {
		/* Recovery and the lines above wrote the region without the
		 * log: a checkpoint takes them in before any commit. */
		bool ck = n->recovered_unclean || ws.replayed_records || ws.torn[0] ||
			  !st_region_reopened(n->cc.region);
		if (st_wal_start(n->cc.region, ck, err, errlen) != 0)
			goto fail_region;
	}

	struct fab_config fc = { .backend = n->cfg.fabric, .self = (uint16_t)n->cfg.node_id,
				 /* shm peers' RPCs come through rings it names */
				 .region_path = n->cfg.ncluster_nodes > 0 ? st_region_path(n->cc.region)
									  : NULL,
				 .nodes = (uint16_t)n->cfg.ncluster_nodes,
				 .delay_us = (uint32_t)n->cfg.fabric_delay_us,
				 .device = n->cfg.fabric_device,
				 .ctl_call = cluster_fab_bridge(), .ctl_ctx = n };
	if (fab_open(&fc, &n->cc.fab, err, errlen) != 0)
		goto fail_region;
	n->cc.rpc_stages = n->cfg.cc_stages;
	if (calvin_attach(&n->cc, err, errlen) != 0 || ps_cluster_attach(n, err, errlen) != 0)
		goto fail_listen;
	if (fab_attach_err(n->cc.fab, fc.self, st_region_base(n->cc.region), n->cc.layout->size, err,
			   errlen) != 0)
		goto fail_listen;
	if (sc.persistence == ST_PERSIST_POWER) {
		/* Group commit (cc/durable.c): before the workers' endpoints,
		 * which it equips with write tracking (or the log's journal)
		 * and its wake-up fd. */
		n->cc.durable_everysec = strcasecmp(n->cfg.persistence, "power-everysec") == 0;
		n->cc.durable_worker_sync_min = n->cfg.power_worker_sync_min;
		n->cc.durable_remote = n->cfg.ncluster_nodes > 0 &&
				       (strcasecmp(n->cfg.fabric, "tcp") == 0 ||
					strcasecmp(n->cfg.fabric, "verbs") == 0);
		if (durable_start(&n->cc, err, errlen) != 0)
			goto fail_listen;
		srv_log(n, LOG_NOTICE, "persistence %s: %s%s, group commit on", n->cfg.persistence,
			srv_durable_path(n),
			n->cfg.power_sim ? " (power-sim: the files get only what is persisted)" : "");
	}

	for (int i = 0; i < n->cfg.nbind; i++)
		if (listen_on(n, n->cfg.bind[i], err, errlen) != 0)
			goto fail_listen;
	struct slot_map *sm = calloc(1, sizeof(*sm));
	if (!sm) {
		snprintf(err, errlen, "out of memory");
		goto fail_listen;
	}
	slot_map_single(sm, n->cfg.node_id, n->cfg.bind[0], n->cfg.port);
	n->slots = sm;
	/* A cluster member waits here for every peer, then publishes the
	 * cluster's slot map in place of the single-node one. */
	if (cluster_start(n, err, errlen) != 0 || mb_start(n, err, errlen) != 0)
		goto fail_listen;

	n->nworkers = n->cfg.threads;
	n->workers = calloc((size_t)n->nworkers, sizeof(*n->workers));
	n->scripts = script_cache_create();
	if (!n->workers || !n->scripts || ps_node_create(n, n->nworkers) != 0 ||
	    slowlog_create(n) != 0 || latency_create(n) != 0 || acl_create(n) != 0 ||
	    srv_save_create(n) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail_listen;
	}
	for (int i = 0; i < n->nworkers; i++) {
		if (worker_start(n, i, &n->workers[i], err, errlen) != 0)
			goto fail_workers;
	}
	for (int i = 0; i < n->nworkers; i++)
		worker_run(n->workers[i]);
	latency_add(n, "recovery", n->recovery_ms); /* LATENCY, if the threshold is set */
	if (expire_cycle_start(n) != 0)
		srv_log(n, LOG_WARNING, "active expiry not started (out of memory or threads): "
			"expired keys stay absent but keep their memory");
	srv_log(n, LOG_NOTICE, "Ready to accept connections on %s:%d (%d threads, %d coroutines each)",
		n->cfg.bind[0], n->cfg.port, n->cfg.threads, n->cfg.coroutines);
	return 0;

fail_workers:
	for (int i = 0; i < n->nworkers; i++)
		worker_destroy(n->workers[i]);
	free(n->workers);
	n->workers = NULL;
fail_listen:
	ps_node_destroy(n);
	acl_destroy(n);
	slowlog_destroy(n);
	latency_destroy(n);
	script_cache_free(n->scripts);
	n->scripts = NULL;
	mb_stop(n);
	cluster_stop(n);
	srv_save_destroy(n);
	for (int i = 0; i < n->nlisten; i++)
		close(n->listen_fds[i]);
	n->nlisten = 0;
	durable_stop(&n->cc);
	if (n->cc.fab)
		fab_close(n->cc.fab);
fail_region:
	srv_sigbus_unwatch(st_region_base(n->cc.region));
	st_region_close(n->cc.region, true);
fail_cc:
	cc_teardown(n);
	return -1;
}

void srv_request_shutdown(struct node *n)
{
	ck_pr_store_int(&n->shutdown, 1);
}

void srv_node_stop(struct node *n)
{
	srv_log(n, LOG_NOTICE, "User requested shutdown...");
	expire_cycle_stop(n); /* its slices run on the workers */
	mb_leave(n); /* with replicas: the others serve its slots from now */
	ck_pr_store_int(&n->shutdown, 1);
	for (int i = 0; i < n->nworkers; i++)
		worker_wake(n->workers[i]);
	for (int i = 0; i < n->nworkers; i++)
		worker_join(n->workers[i]);
	mb_stop(n); /* its adopter may wait for the workers' transactions */
	for (int i = 0; i < n->nlisten; i++)
		close(n->listen_fds[i]);
	for (int i = 0; i < n->nworkers; i++)
		worker_destroy(n->workers[i]);
	free(n->workers);
	n->workers = NULL;
	ps_node_destroy(n); /* after the workers: their clients unsubscribed */
	acl_destroy(n); /* after the workers: their clients released their users */
	slowlog_destroy(n);
	latency_destroy(n);
	script_cache_free(n->scripts);
	n->scripts = NULL;
	srv_save_stop(n); /* a running save ends first: it writes the region */
	cluster_stop(n);
	srv_save_destroy(n); /* after the control threads, which serve CTL_SAVE */
	durable_stop(&n->cc); /* after the workers: nobody waits any more */
	fab_close(n->cc.fab);
	free((void *)n->slots);
	n->slots = NULL;
	srv_sigbus_unwatch(st_region_base(n->cc.region));
	st_region_close(n->cc.region, true);
	cc_teardown(n);
	srv_log(n, LOG_NOTICE, "MemStore closed cleanly. rckv is now ready to exit, bye bye...");
}

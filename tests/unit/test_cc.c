/*
 * test_cc: the CC layer without the network. Two workers (each a thread
 * driving its own scheduler, as the server's workers do) run coroutines
 * that execute transactions through cc_run and cc/txn.h, under each
 * protocol and across online switches. What a user would notice is
 * checked: lost increments, a bank total that drifts, torn values, values
 * that grow past their block, deletes that come back.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cc/calvin.h"
#include "cc/cache.h"
#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/exec_internal.h"
#include "cc/sched.h"
#include "cc/switch.h"
#include "cc/node.h"
#include "placement/placement.h"
#include "rdma/fab.h"
#include "storage/st.h"

#define CHECK(c)                                                                    \
	do {                                                                        \
		if (!(c)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

#define NWORKERS 2
#define NCORO 8
#define MAX_NODES 2

/* A worker as the server makes one: a scheduler, fabric endpoints and the
 * executor state, driven by a thread of the test. */
struct tworker {
	struct sched *sched;
	struct fab_worker *fw;
	struct cc_worker *ccw;
};

/* A node as cc sees it (cc/node.h): no server is linked into this test. */
struct tnode {
	struct cc_node cc;
	struct cc_worker *ccws[NWORKERS];
	struct tworker w[NWORKERS];
};

static struct tnode nodes[MAX_NODES];
static int nnodes;
#define N (nodes[0])
static char dir[] = "/tmp/rckv-test-cc-XXXXXX";

static uint32_t fabric_delay_us; /* > 0: coroutines interleave at every round trip */
static int replicas = 1;         /* nodes per slot (`replicas`) */

/* Nodes 1..count in this process, on the shm fabric, each mapping every
 * region (as shm peers do), keys spread over all of them. */
static void nodes_up(int count, const char *proto)
{
	char err[256];
	uint16_t ids[MAX_NODES];
	for (int i = 0; i < count; i++)
		ids[i] = (uint16_t)(i + 1);
	nnodes = count;
	for (int i = 0; i < count; i++) {
		struct tnode *tn = &nodes[i];
		memset(tn, 0, sizeof(*tn));
		CHECK(cc_node_init(&tn->cc, ids[i], pl_map_spread(ids, count, replicas, 1)) == 0);
		tn->cc.max_node_id = (uint16_t)count;
		tn->cc.limits = (struct cc_limits){ .max_key_bytes = 64 << 10,
						    .max_value_bytes = 1 << 20,
						    .txn_timeout_ms = 20000,
						    .mvcc_versions = 4 };
		struct st_config sc = { .dir = dir, .node_id = ids[i], .size = 64ull << 20,
					.log_nodes = (unsigned)count,
					.persistence = ST_PERSIST_NONE };
		CHECK(st_region_open(&sc, &tn->cc.region, err, sizeof(err)) == 0);
		tn->cc.layout = st_region_layout(tn->cc.region);
		struct fab_config fc = { .backend = "shm", .self = ids[i],
					 .delay_us = fabric_delay_us };
		CHECK(fab_open(&fc, &tn->cc.fab, err, sizeof(err)) == 0);
		CHECK(calvin_attach(&tn->cc, err, sizeof(err)) == 0);
		tn->cc.limits.calvin_epoch_us = 200;
		tn->cc.proto = cc_protocol_find(proto);
		CHECK(tn->cc.proto);
	}
	/* Its own region by address; a peer's by its file, as the control
	 * plane's HELLO tells a shm peer (server/cluster.c). */
	for (int i = 0; i < count; i++)
		for (int j = 0; j < count; j++) {
			struct cc_node *cn = &nodes[j].cc;
			if (i == j) {
				CHECK(fab_attach(nodes[i].cc.fab, ids[j], st_region_base(cn->region),
						 cn->layout->size) == 0);
				continue;
			}
			struct fab_peer_info pi = { .node = ids[j], .region_size = cn->layout->size };
			snprintf(pi.region_path, sizeof(pi.region_path), "%s",
				 st_region_path(cn->region));
			CHECK(fab_attach_peer(nodes[i].cc.fab, &pi, err, sizeof(err)) == 0);
		}
	for (int i = 0; i < count; i++) {
		struct tnode *tn = &nodes[i];
		tn->cc.nworkers = NWORKERS;
		tn->cc.workers = tn->ccws;
		for (int k = 0; k < NWORKERS; k++) {
			struct tworker *w = &tn->w[k];
			w->sched = sched_create(NCORO + 2, 256 * 1024);
			w->fw = fab_worker_create_err(tn->cc.fab, k, err, sizeof(err));
			CHECK(w->sched && w->fw);
			w->ccw = cc_worker_create(&tn->cc, k, w->sched, w->fw);
			CHECK(w->ccw && tn->cc.workers[k] == w->ccw);
		}
	}
}

static void node_up(const char *proto)
{
	nodes_up(1, proto);
}

static void node_down(void)
{
	for (int i = 0; i < nnodes; i++) {
		struct tnode *tn = &nodes[i];
		for (int k = 0; k < NWORKERS; k++) {
			cc_worker_destroy(tn->w[k].ccw);
			CHECK(tn->cc.workers[k] == NULL);
			fab_worker_destroy(tn->w[k].fw);
			sched_destroy(tn->w[k].sched);
		}
		fab_close(tn->cc.fab);
	}
	for (int i = 0; i < nnodes; i++) {
		st_region_close(nodes[i].cc.region, true);
		cc_node_destroy(&nodes[i].cc);
	}
	nnodes = 0;
}

/* The longest a driver sleeps while a coroutine sleeps, so that requests
 * and hand-offs from other workers are still polled: 100 us. */
#define DRIVE_MAX_SLEEP_NS 100000

static void *drive(void *arg)
{
	struct tworker *w = arg;
	/* The default timer slack (50 us) would stretch each 20 us wait
	 * past three round trips' worth: 1 us, this thread only. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!sched_idle(w->sched)) {
		sched_run(w->sched);
		fab_worker_poll(w->fw); /* requests and hand-offs (calvin's mailbox) */
		/* Until the next sleeper is due, as the server's worker waits
		 * (server/worker.c): a fixed 100 us for a 20 us fabric delay
		 * made every round trip five times as long, and the delayed
		 * half of this test most of its wall time. */
		int64_t ns = sched_timeout_ns(w->sched);
		if (ns > 0) {
			struct timespec ts = { 0, ns < DRIVE_MAX_SLEEP_NS ? ns : DRIVE_MAX_SLEEP_NS };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

/* Drive every worker of every node until all their coroutines ended. */
static void run_all(void)
{
	pthread_t th[MAX_NODES * NWORKERS];
	int n = 0;
	for (int i = 0; i < nnodes; i++)
		for (int k = 0; k < NWORKERS; k++)
			pthread_create(&th[n++], NULL, drive, &nodes[i].w[k]);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

/* ---- transactions used by the tests ---- */

static long long get_ll(struct txn *t, const char *k, int *rc)
{
	const char *v;
	size_t vl;
	bool found;
	*rc = txn_get(t, k, strlen(k), &v, &vl, &found);
	if (*rc || !found)
		return 0;
	char buf[32];
	memcpy(buf, v, vl < 31 ? vl : 31);
	buf[vl < 31 ? vl : 31] = 0;
	return atoll(buf);
}

static int set_ll(struct txn *t, const char *k, long long x)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%lld", x);
	return txn_set(t, k, strlen(k), buf, (size_t)n);
}

static int incr_body(struct txn *t, void *arg)
{
	int rc;
	long long x = get_ll(t, arg, &rc);
	if (rc)
		return rc;
	return set_ll(t, arg, x + 1);
}

#define ACCOUNTS 20
#define TOTAL (ACCOUNTS * 100)
static int audit_failures, audits;

struct transfer {
	int from, to, amount;
};

static int transfer_body(struct txn *t, void *arg)
{
	struct transfer *tr = arg;
	char a[16], b[16];
	snprintf(a, sizeof(a), "acct:%d", tr->from);
	snprintf(b, sizeof(b), "acct:%d", tr->to);
	int rc;
	long long x = get_ll(t, a, &rc);
	if (rc)
		return rc;
	long long y = get_ll(t, b, &rc);
	if (rc)
		return rc;
	if (x < tr->amount)
		return CC_OK; /* insufficient funds: commit nothing */
	if ((rc = set_ll(t, a, x - tr->amount)) || (rc = set_ll(t, b, y + tr->amount)))
		return rc;
	return CC_OK;
}

static int audit_body(struct txn *t, void *arg)
{
	long long *sum = arg;
	*sum = 0;
	for (int i = 0; i < ACCOUNTS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "acct:%d", i);
		int rc;
		long long x = get_ll(t, k, &rc);
		if (rc)
			return rc;
		if (x < 0)
			__atomic_fetch_add(&audit_failures, 1, __ATOMIC_RELAXED);
		*sum += x;
	}
	return CC_OK;
}

static int init_body(struct txn *t, void *arg)
{
	for (int i = 0; i < ACCOUNTS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "acct:%d", i);
		int rc = set_ll(t, k, 100);
		if (rc)
			return rc;
	}
	return CC_OK;
}

/* The keys a body declares (cc/exec.h, struct cc_txn): the bank's
 * transfers and audits declare theirs, so they run the fetch stage (every
 * account read, and locked under nowait, in one batch) under every
 * protocol; the other bodies declare nothing and reach keys one by one. */
static char acct_names[ACCOUNTS][16];

static struct cc_txn declared(cc_body_fn fn, void *arg, struct cc_key keys[ACCOUNTS])
{
	struct cc_txn tx = { .keys = keys, .nkeys = 0, .body = fn, .arg = arg };
	if (!acct_names[0][0])
		for (int i = 0; i < ACCOUNTS; i++)
			snprintf(acct_names[i], sizeof(acct_names[i]), "acct:%d", i);
	if (fn == transfer_body) {
		const struct transfer *tr = arg;
		keys[tx.nkeys++] = (struct cc_key){ acct_names[tr->from], (uint32_t)strlen(
						    acct_names[tr->from]), CC_KEY_READ | CC_KEY_WRITE };
		keys[tx.nkeys++] = (struct cc_key){ acct_names[tr->to], (uint32_t)strlen(
						    acct_names[tr->to]), CC_KEY_READ | CC_KEY_WRITE };
	} else if (fn == audit_body) {
		for (int i = 0; i < ACCOUNTS; i++)
			keys[tx.nkeys++] = (struct cc_key){ acct_names[i],
							    (uint32_t)strlen(acct_names[i]),
							    CC_KEY_READ };
	}
	return tx;
}

/* cc_run that must commit; a failure names its error. */
static void must_commit(struct cc_worker *ccw, cc_body_fn fn, void *arg, const char *what)
{
	struct cc_key keys[ACCOUNTS];
	const struct cc_txn tx = declared(fn, arg, keys);
	int rc = cc_run(ccw, &tx);
	if (rc != 0) {
		fprintf(stderr, "%s: cc_run: %d (%s)\n", what, rc, cc_strerror(rc));
		exit(1);
	}
}

struct worker_job {
	struct tworker *w;
	int kind;
	int n;
	unsigned seed;
};

static const char *switch_to[] = { "nowait", "mvcc", "waitdie", "silo", "nowait/shared",
				    "occ", "cicada", "timestamp", "woundwait", "sundial",
				    "cicada", "maat", "mvcc", "silo" };
#define NSWITCH (int)(sizeof(switch_to) / sizeof(switch_to[0]))

static void job(struct sched *s, void *arg)
{
	struct worker_job *j = arg;
	struct cc_worker *ccw = j->w->ccw;
	for (int i = 0; i < j->n; i++) {
		if (j->kind == 0) {
			must_commit(ccw, incr_body, "counter", "increment");
		} else if (j->kind == 1) {
			struct transfer tr = { rand_r(&j->seed) % ACCOUNTS, rand_r(&j->seed) % ACCOUNTS,
					       1 + rand_r(&j->seed) % 50 };
			if (tr.from == tr.to)
				continue;
			must_commit(ccw, transfer_body, &tr, "transfer");
			if (i % 20 == 0) {
				long long sum;
				must_commit(ccw, audit_body, &sum, "audit");
				__atomic_fetch_add(&audits, 1, __ATOMIC_RELAXED);
				if (sum != TOTAL) {
					fprintf(stderr, "audit: sum %lld != %d\n", sum, TOTAL);
					__atomic_fetch_add(&audit_failures, 1, __ATOMIC_RELAXED);
				}
			}
		} else if (j->kind == 3) {
			/* Keys that do not exist yet, created by whoever gets there
			 * first while the others race to create them too. */
			char k[32];
			snprintf(k, sizeof(k), "fresh:%d", i % 10);
			must_commit(ccw, incr_body, k, "creation");
		} else if (j->kind == 4) {
			/* Half the coroutines pay account 1, half account 0. */
			int me = (int)(j->seed & 1);
			struct transfer tr = { me, 1 - me, 1 };
			must_commit(ccw, transfer_body, &tr, "opposite transfer");
		} else if (j->kind == 2) {
			char err[128];
			sched_sleep(s, 3 * 1000 * 1000);
			CHECK(cc_switch(&N.cc, j->w->ccw, switch_to[i % NSWITCH], false, err, sizeof(err)) == 0);
		}
	}
}

static int get_counter(struct txn *t, void *arg)
{
	int rc;
	*(long long *)arg = get_ll(t, "counter", &rc);
	return rc;
}

/* Runs `per` jobs of `kind` on every coroutine of both workers, plus an
 * optional switcher coroutine. */
static void run_jobs(int kind, int per, bool switching)
{
	static struct worker_job jobs[NWORKERS][NCORO + 1];
	for (int w = 0; w < NWORKERS; w++) {
		for (int c = 0; c < NCORO; c++) {
			jobs[w][c] = (struct worker_job){ &N.w[w], kind, per,
							  (unsigned)(w * 100 + c + 1) };
			CHECK(sched_spawn(N.w[w].sched, job, &jobs[w][c]) == 0);
		}
	}
	if (switching) {
		jobs[0][NCORO] = (struct worker_job){ &N.w[0], 2, 4, 0 };
		CHECK(sched_spawn(N.w[0].sched, job, &jobs[0][NCORO]) == 0);
	}
	run_all();
}

struct one_shot {
	cc_body_fn fn;
	void *arg;
};

static int shot_node, shot_worker;

static void one_shot_job(struct sched *s, void *arg)
{
	struct one_shot *o = arg;
	struct cc_key keys[ACCOUNTS];
	const struct cc_txn tx = declared(o->fn, o->arg, keys);
	int rc = cc_run(nodes[shot_node].w[shot_worker].ccw, &tx);
	if (rc != 0)
		fprintf(stderr, "cc_run: %d (%s)\n", rc, cc_strerror(rc));
	CHECK(rc == 0);
}

/* One transaction on worker w of node i (0-based), driven to its end. */
static void run_one_at(int i, int w, cc_body_fn fn, void *arg)
{
	struct one_shot o = { fn, arg };
	shot_node = i;
	shot_worker = w;
	CHECK(sched_spawn(nodes[i].w[w].sched, one_shot_job, &o) == 0);
	drive(&nodes[i].w[w]);
}

static void run_one_on(int w, cc_body_fn fn, void *arg)
{
	run_one_at(0, w, fn, arg);
}

static void run_one(cc_body_fn fn, void *arg)
{
	run_one_on(0, fn, arg);
}

static void test_increments(const char *proto, bool switching)
{
	node_up(proto);
	run_jobs(0, 250, switching);
	long long v = 0;
	run_one(get_counter, &v);
	printf("  %s%s: counter = %lld (expect %d)\n", proto, switching ? "+switch" : "", v,
	       NWORKERS * NCORO * 250);
	CHECK(v == NWORKERS * NCORO * 250);
	node_down();
}

static int sum_fresh(struct txn *t, void *arg)
{
	long long *sum = arg;
	*sum = 0;
	for (int i = 0; i < 10; i++) {
		char k[32];
		snprintf(k, sizeof(k), "fresh:%d", i);
		int rc;
		long long x = get_ll(t, k, &rc);
		if (rc)
			return rc;
		*sum += x;
	}
	return CC_OK;
}

/* Concurrent creation of the same keys: one item per key, no lost update. */
static void test_fresh_keys(const char *proto)
{
	node_up(proto);
	run_jobs(3, 100, false);
	long long sum = 0;
	run_one(sum_fresh, &sum);
	printf("  %s: racing creations, total %lld (expect %d), %llu keys\n", proto, sum,
	       NWORKERS * NCORO * 100, (unsigned long long)st_count(N.cc.region));
	CHECK(sum == NWORKERS * NCORO * 100);
	CHECK(st_count(N.cc.region) == 10);
	node_down();
}

static void test_bank(const char *proto, bool switching)
{
	node_up(proto);
	run_one(init_body, NULL);
	audit_failures = audits = 0;
	run_jobs(1, 300, switching);
	long long sum = 0;
	run_one(audit_body, &sum);
	printf("  %s%s: bank total %lld (expect %d), %d audits\n", proto,
	       switching ? "+switch" : "", sum, TOTAL, audits);
	CHECK(sum == TOTAL);
	CHECK(audit_failures == 0);
	node_down();
}

/* `per` bank transfers on every coroutine of every worker of every node,
 * all at once, to their end. */
static void transfers_everywhere(int per)
{
	static struct worker_job jobs[MAX_NODES][NWORKERS][NCORO];
	for (int i = 0; i < nnodes; i++)
		for (int k = 0; k < NWORKERS; k++)
			for (int c = 0; c < NCORO; c++) {
				jobs[i][k][c] = (struct worker_job){ &nodes[i].w[k], 1, per,
								     (unsigned)(i * 1000 + k * 100 + c + 1) };
				CHECK(sched_spawn(nodes[i].w[k].sched, job, &jobs[i][k][c]) == 0);
			}
	run_all();
}

/*
 * Two nodes in one process (DESIGN.md principle 5): each has its own
 * region, fabric, placement and workers, and nothing of one leaks into the
 * other through a process global. The accounts spread over both regions;
 * both nodes' workers transfer between them at once, each transaction
 * reaching the other node's region through the fabric; an audit through
 * either node sees the total, and a write through one is read through the
 * other.
 */
static void test_two_nodes(const char *proto)
{
	nodes_up(2, proto);
	run_one_at(0, 0, init_body, NULL);
	uint64_t on1 = st_count(nodes[0].cc.region), on2 = st_count(nodes[1].cc.region);
	CHECK(on1 > 0 && on2 > 0 && on1 + on2 == ACCOUNTS);
	audit_failures = audits = 0;
	transfers_everywhere(100);
	long long sum1 = 0, sum2 = 0;
	run_one_at(0, 1, audit_body, &sum1);
	run_one_at(1, 0, audit_body, &sum2);
	printf("  %s: two nodes in one process, %llu + %llu accounts, bank total %lld / %lld "
	       "(expect %d), %d audits\n",
	       proto, (unsigned long long)on1, (unsigned long long)on2, sum1, sum2, TOTAL, audits);
	CHECK(sum1 == TOTAL && sum2 == TOTAL && audit_failures == 0);
	/* Real-time order across nodes and workers: an increment that
	 * committed through one node is read by the next transaction through
	 * the other, whatever the protocol orders transactions by (timestamp
	 * and mvcc: their timestamps, never ahead of real time, exec.c). */
	for (int i = 0; i < 200; i++) {
		run_one_at(i % 2, i % NWORKERS, incr_body, "counter");
		long long c = 0;
		run_one_at(1 - i % 2, (i + 1) % NWORKERS, get_counter, &c);
		if (c != i + 1)
			fprintf(stderr, "%s: round %d read %lld after the increment to %d\n", proto, i,
				c, i + 1);
		CHECK(c == i + 1);
	}
	node_down();
}

/* A body that learns its keys from a value: "dir" names six accounts,
 * which it fetches in one more round (cc_fetch_more) and then sums. */
struct chase {
	long long sum;
	uint64_t fetch_rt, get_rt; /* round trips of the round, of the reads after it */
};

static int set_dir(struct txn *t, void *arg)
{
	const char *v = arg;
	return txn_set(t, "dir", 3, v, strlen(v));
}

static int chase_body(struct txn *t, void *arg)
{
	struct chase *c = arg;
	const char *v;
	size_t vl;
	bool found;
	int rc = txn_get(t, "dir", 3, &v, &vl, &found);
	if (rc || !found)
		return rc ? rc : CC_EINTERNAL;
	char names[128];
	snprintf(names, sizeof(names), "%.*s", (int)vl, v);
	struct cc_key keys[8];
	int n = 0;
	for (char *save, *k = strtok_r(names, " ", &save); k && n < 8;
	     k = strtok_r(NULL, " ", &save))
		keys[n++] = (struct cc_key){ k, (uint32_t)strlen(k), CC_KEY_READ };
	uint64_t rt0 = t->fstats.round_trips;
	if ((rc = cc_fetch_more(t, keys, n)))
		return rc;
	uint64_t rt1 = t->fstats.round_trips;
	c->sum = 0;
	for (int i = 0; i < n; i++) {
		char k[16];
		snprintf(k, sizeof(k), "%.*s", (int)keys[i].len, keys[i].p);
		c->sum += get_ll(t, k, &rc);
		if (rc)
			return rc;
	}
	c->fetch_rt = rt1 - rt0;
	c->get_rt = t->fstats.round_trips - rt1;
	return CC_OK;
}

/* Keys that depend on an earlier value, on two nodes: one more fetch
 * round reads all of them in one round trip (once their addresses are
 * known), and the reads that follow cost none. Key by key they took a
 * round trip each at least. */
static void test_fetch_more(const char *proto)
{
	nodes_up(2, proto);
	run_one_at(0, 0, init_body, NULL);
	run_one_at(0, 0, set_dir, "acct:0 acct:3 acct:6 acct:9 acct:12 acct:15");
	struct chase c = { 0 };
	run_one_at(0, 0, chase_body, &c); /* learns the addresses */
	CHECK(c.sum == 600);
	memset(&c, 0, sizeof(c));
	run_one_at(0, 0, chase_body, &c);
	printf("  %s: a second fetch round of 6 keys on 2 nodes: %llu round trip(s), reads "
	       "after it %llu\n",
	       proto, (unsigned long long)c.fetch_rt, (unsigned long long)c.get_rt);
	/* maat registers every reader in the item's list under its latch:
	 * CAS + READ, then WRITE + unlatch (cc/protocols/maat.c), for all
	 * keys together. */
	uint64_t want = strcmp(proto, "maat") == 0 ? 2 : 1;
	CHECK(c.sum == 600 && c.fetch_rt == want && c.get_rt == 0);
	node_down();
}

/* Two transfers between the same two accounts, in opposite directions,
 * over and over: under shared locks each reads both accounts and then
 * upgrades one, so two that overlap abort each other, and restarted a
 * backoff apart they overlap again whenever an attempt takes longer than
 * the backoff (slow round trips). The executor's backoff must outgrow the
 * attempt, or they livelock until txn-timeout. */
static void test_opposite_transfers(const char *proto)
{
	node_up(proto);
	N.cc.limits.txn_timeout_ms = 5000;
	run_one(init_body, NULL);
	run_jobs(4, 50, false);
	long long sum = 0;
	run_one(audit_body, &sum);
	printf("  %s: opposite transfers, bank total %lld (expect %d)\n", proto, sum, TOTAL);
	CHECK(sum == TOTAL);
	node_down();
}

/* Values that grow across size classes, deletes, and reads of own writes. */
static int grow_body(struct txn *t, void *arg)
{
	const char *v;
	size_t vl;
	bool found;
	int rc = txn_get(t, "grow", 4, &v, &vl, &found);
	if (rc)
		return rc;
	char *nv = malloc(vl + 100);
	memcpy(nv, v, vl);
	memset(nv + vl, 'a' + (int)(vl / 100) % 26, 100);
	rc = txn_set(t, "grow", 4, nv, vl + 100);
	free(nv);
	if (rc)
		return rc;
	/* read own write */
	rc = txn_get(t, "grow", 4, &v, &vl, &found);
	if (rc)
		return rc;
	CHECK(found && vl % 100 == 0);
	return CC_OK;
}

static int check_grow(struct txn *t, void *arg)
{
	const char *v;
	size_t vl;
	bool found;
	int rc = txn_get(t, "grow", 4, &v, &vl, &found);
	if (rc)
		return rc;
	CHECK(found);
	*(size_t *)arg = vl;
	for (size_t i = 0; i < vl; i++)
		CHECK(v[i] == 'a' + (int)(i / 100) % 26);
	return CC_OK;
}

static int del_body(struct txn *t, void *arg)
{
	bool existed = false; /* set only when txn_del returns 0 (UBSan: a garbage bool) */
	int rc = txn_del(t, "grow", 4, &existed);
	if (rc == CC_OK)
		*(bool *)arg = existed;
	return rc;
}

static void test_grow_and_delete(const char *proto)
{
	node_up(proto);
	for (int i = 0; i < 120; i++)
		run_one(grow_body, NULL);
	size_t len = 0;
	run_one(check_grow, &len);
	CHECK(len == 12000);
	bool existed = false;
	run_one(del_body, &existed);
	CHECK(existed);
	run_one(del_body, &existed);
	CHECK(!existed);
	CHECK(st_count(N.cc.region) == 0);
	node_down();
	printf("  %s: grow to 12000 bytes and delete ok\n", proto);
}

/* ---- replicas: every commit writes every node of a key's set ---- */

/* A region's live items, as "key ver value" lines, sorted. */
struct dump {
	char **line;
	int n, cap;
};

static int dump_item(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct dump *d = arg;
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 64;
		d->line = realloc(d->line, (size_t)d->cap * sizeof(*d->line));
		CHECK(d->line);
	}
	uint32_t vl = st_data_vlen(it->data);
	char *l = malloc(klen + vl + 40);
	CHECK(l);
	int h = sprintf(l, "%.*s %llu ", (int)klen, key, (unsigned long long)it->ver);
	memcpy(l + h, st_item_val(it), vl);
	l[h + vl] = 0;
	d->line[d->n++] = l;
	return 0;
}

static int cmp_line(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static void dump_region(struct st_region *r, struct dump *d)
{
	memset(d, 0, sizeof(*d));
	uint64_t cursor = 0;
	do
		st_scan(r, &cursor, 1024, dump_item, d);
	while (cursor);
	qsort(d->line, (size_t)d->n, sizeof(*d->line), cmp_line);
}

static int no_lock(void *arg, const char *key, uint32_t klen, uint64_t lock, uint64_t bucket,
		   bool absent)
{
	(void)bucket;
	(void)absent;
	fprintf(stderr, "lock left behind: %.*s 0x%llx\n", key ? (int)klen : 6, key ? key : "bucket",
		(unsigned long long)lock);
	++*(int *)arg;
	return 0;
}

/* The two regions hold the same items, version for version, and no lock. */
static void check_replicas_equal(const char *proto, const char *when)
{
	struct dump d1, d2;
	dump_region(nodes[0].cc.region, &d1);
	dump_region(nodes[1].cc.region, &d2);
	int diff = d1.n != d2.n;
	for (int i = 0; i < d1.n && i < d2.n; i++)
		if (strcmp(d1.line[i], d2.line[i]) != 0) {
			if (diff++ < 3)
				fprintf(stderr, "%s: node 1 has '%.60s', node 2 '%.60s'\n", proto,
					d1.line[i], d2.line[i]);
		}
	int locks = 0;
	st_scan_locks(nodes[0].cc.region, no_lock, &locks);
	st_scan_locks(nodes[1].cc.region, no_lock, &locks);
	printf("  %s: replicas 2, %s: %d items on each node, %d differ, %d locks held\n", proto,
	       when, d1.n, diff, locks);
	CHECK(d1.n > 0 && diff == 0 && locks == 0);
	for (int i = 0; i < d1.n; i++)
		free(d1.line[i]);
	for (int i = 0; i < d2.n; i++)
		free(d2.line[i]);
	free(d1.line);
	free(d2.line);
}

/*
 * With `replicas 2` on two nodes every key lives on both: the bank's
 * transfers from both nodes at once, a value that grows past its block
 * (a relocation on each replica) and a delete leave the two regions with
 * the same items at the same versions, whatever the protocol.
 */
static void test_replicas(const char *proto)
{
	replicas = 2;
	nodes_up(2, proto);
	run_one_at(0, 0, init_body, NULL);
	audit_failures = audits = 0;
	transfers_everywhere(40);
	long long sum = 0;
	run_one_at(1, 0, audit_body, &sum);
	CHECK(sum == TOTAL && audit_failures == 0);
	for (int i = 0; i < 30; i++)
		run_one_at(i % 2, 0, grow_body, NULL);
	check_replicas_equal(proto, "after transfers and growth");
	bool existed = false;
	run_one_at(1, 1, del_body, &existed);
	CHECK(existed);
	check_replicas_equal(proto, "after a delete");
	node_down();
	replicas = 1;
}

/* ---- stale addresses: one worker's cache, another worker's changes ---- */

struct kv {
	const char *key;
	const char *val; /* NULL: delete */
	size_t len;      /* value length (the value is val repeated) */
	char got[64];
	bool found;
};

static int kv_set(struct txn *t, void *arg)
{
	struct kv *kv = arg;
	bool existed;
	if (!kv->val)
		return txn_del(t, kv->key, strlen(kv->key), &existed);
	char *v = malloc(kv->len);
	for (size_t i = 0; i < kv->len; i++)
		v[i] = kv->val[i % strlen(kv->val)];
	int rc = txn_set(t, kv->key, strlen(kv->key), v, kv->len);
	free(v);
	return rc;
}

static int kv_get(struct txn *t, void *arg)
{
	struct kv *kv = arg;
	const char *v;
	size_t vl;
	int rc = txn_get(t, kv->key, strlen(kv->key), &v, &vl, &kv->found);
	if (rc == CC_OK && kv->found) {
		size_t n = vl < sizeof(kv->got) - 1 ? vl : sizeof(kv->got) - 1;
		memcpy(kv->got, v, n);
		kv->got[n] = 0;
		kv->len = vl;
	}
	return rc;
}

/* kv_get, and the block the key's access resolved to. */
static uint64_t got_off;

static int kv_get_at(struct txn *t, void *arg)
{
	struct kv *kv = arg;
	int rc = kv_get(t, arg);
	struct cc_access *a = txn_acc_find(t, kv->key, strlen(kv->key),
					   st_hash(kv->key, strlen(kv->key)));
	got_off = a ? a->ref.off : 0;
	return rc;
}

static void test_stale_addresses(const char *proto)
{
	node_up(proto);
	struct kv a = { .key = "moving", .val = "one", .len = 3 }, r = { .key = "moving" };
	run_one_on(0, kv_set, &a);            /* worker 0 caches the block */
	run_one_on(0, kv_get, &r);
	CHECK(r.found && strcmp(r.got, "one") == 0);
	struct kv del = { .key = "moving" };
	run_one_on(1, kv_set, &del);          /* worker 1 deletes: block reaped */
	struct kv b = { .key = "moving", .val = "two", .len = 3 };
	run_one_on(1, kv_set, &b);            /* ... and re-creates it elsewhere */
	run_one_on(0, kv_get, &r);            /* worker 0's cached address is stale */
	CHECK(r.found && strcmp(r.got, "two") == 0);
	struct kv big = { .key = "moving", .val = "3", .len = 5000 };
	run_one_on(1, kv_set, &big);          /* relocation to a bigger block */
	run_one_on(0, kv_get, &r);
	CHECK(r.found && r.len == 5000 && r.got[0] == '3');
	struct kv blind = { .key = "moving", .val = "four", .len = 4 };
	run_one_on(0, kv_set, &blind);        /* a blind write through the stale entry */
	run_one_on(1, kv_get, &r);
	CHECK(r.found && strcmp(r.got, "four") == 0);
	CHECK(st_count(N.cc.region) == 1);
	/* A worker that relocates a key itself keeps its cache right: no
	 * STALE abort when it reads the key next. */
	uint64_t stale0 = cc_worker_stats(N.w[0].ccw)->aborts_by_cause[CC_CAUSE_STALE];
	struct kv grow = { .key = "moving", .val = "5", .len = 20000 };
	run_one_on(0, kv_set, &grow);
	run_one_on(0, kv_get, &r);
	CHECK(r.found && r.len == 20000);
	CHECK(cc_worker_stats(N.w[0].ccw)->aborts_by_cause[CC_CAUSE_STALE] == stale0);

	/* The stale address's block stays held by what is not the key's (an
	 * allocator's claim on the freed block, kept for good): a 2PL waiter
	 * must see that the block is not its key's and resolve it again, not
	 * die or wait on that holder at every retry through the same address
	 * (seen: waitdie's reads dying until txn-timeout after kill -9s). */
	struct kv h = { .key = "held", .val = "h", .len = 1 }, hr = { .key = "held" };
	run_one_on(0, kv_set, &h);
	run_one_on(0, kv_get_at, &hr);        /* worker 0 has its address */
	CHECK(hr.found && got_off != 0);
	struct kv hbig = { .key = "held", .val = "H", .len = 5000 };
	run_one_on(1, kv_set, &hbig);         /* relocated: the old block retired */
	struct st_item *old_it = (struct st_item *)((char *)st_region_base(N.cc.region) + got_off);
	CHECK(st_data_flags(old_it->data) & ST_F_DEAD);
	uint64_t *word = &old_it->lock;
	CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0);
	__atomic_store_n(word, ST_LOCK_CLAIMED, __ATOMIC_RELEASE);
	const uint64_t timeout = N.cc.limits.txn_timeout_ms;
	N.cc.limits.txn_timeout_ms = 2000;    /* a failure shows as cc_run's timeout */
	hr.found = false;
	run_one_on(0, kv_get, &hr);
	CHECK(hr.found && hr.len == 5000 && hr.got[0] == 'H');
	N.cc.limits.txn_timeout_ms = timeout;
	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	node_down();
	printf("  %s: stale cached addresses detected\n", proto);
}

/*
 * sundial's renewal meets a writer's lock (cc/protocols/sundial.c
 * invariant (5)): a transaction reads lease:a and lease:b; before it
 * commits, lease:b's lock word is set by hand to another transaction's
 * owner word (older or younger than ours), as a writer in its commit
 * holds it, and cleared 2 ms later by another coroutine. Its commit_tts
 * is past both leases, so both must be renewed. Holding no lock, or
 * meeting an older holder, it waits (cc_lock_waits) and then renews and
 * commits without an abort, where RCC's renewal fails; holding a lock
 * itself (it writes lease:c) and meeting a younger holder, it must not
 * wait (a cycle of waits could form): it aborts with cause renew, and a
 * later attempt commits once the lock is gone.
 */
struct lease_case {
	bool writes;        /* the transaction also writes lease:c (holds its lock) */
	bool older_holder;  /* the hand-set lock names an older transaction */
};

static void release_later(struct sched *s, void *arg)
{
	sched_sleep(s, 2000000);
	__atomic_store_n((uint64_t *)arg, 0, __ATOMIC_RELEASE);
}

static int lease_body(struct txn *t, void *arg)
{
	const struct lease_case *lc = arg;
	const char *v;
	size_t vl;
	bool found;
	int rc;
	if ((rc = txn_get(t, "lease:a", 7, &v, &vl, &found)) ||
	    (rc = txn_get(t, "lease:b", 7, &v, &vl, &found)))
		return rc;
	if (lc->writes && (rc = txn_set(t, "lease:c", 7, "w", 1)))
		return rc;
	if (txn_attempt(t) == 0) {
		struct cc_access *a = txn_acc_find(t, "lease:b", 7, st_hash("lease:b", 7));
		CHECK(a && a->ref.node == 1);
		uint64_t *lock = (uint64_t *)((char *)st_region_base(N.cc.region) + a->ref.off);
		uint64_t age = cc_lock_age(t->owner);
		uint64_t other = lc->older_holder ? age - (1ull << 20) : age + (1ull << 20);
		__atomic_store_n(lock, cc_owner_word(1, other), __ATOMIC_RELEASE);
		CHECK(sched_spawn(N.w[0].sched, release_later, lock) == 0);
	}
	return CC_OK;
}

static void test_sundial_renewal_waits(void)
{
	static const struct lease_case cases[] = {
		{ .writes = false, .older_holder = false },
		{ .writes = true, .older_holder = true },
		{ .writes = true, .older_holder = false },
	};
	node_up("sundial");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lease_case *lc = &cases[i];
		struct kv a = { .key = "lease:a", .val = "a", .len = 1 };
		struct kv b = { .key = "lease:b", .val = "b", .len = 1 };
		run_one(kv_set, &a);
		run_one(kv_set, &b);
		const struct cc_stats before = *cc_worker_stats(N.w[0].ccw);
		run_one(lease_body, (void *)lc);
		const struct cc_stats *after = cc_worker_stats(N.w[0].ccw);
		uint64_t renew = after->aborts_by_cause[CC_CAUSE_RENEW] -
				 before.aborts_by_cause[CC_CAUSE_RENEW];
		CHECK(after->txn_committed == before.txn_committed + 1);
		/* Both leases extended: here, or by an aborted attempt whose
		 * CAS held (its retry then finds them long enough). */
		CHECK(after->lease_renewals + after->lease_hits >=
		      before.lease_renewals + before.lease_hits + 2);
		if (lc->writes && !lc->older_holder) {
			CHECK(renew >= 1); /* must not wait while holding lease:c */
		} else {
			CHECK(after->lock_waits > before.lock_waits);
			CHECK(after->txn_aborts == before.txn_aborts); /* waited, renewed */
		}
		printf("  sundial: renewal meets a lock (%s, %s holder): %s\n",
		       lc->writes ? "holding a lock" : "holding none",
		       lc->older_holder ? "older" : "younger",
		       renew ? "aborts (renew), then commits" : "waits, renews, commits");
	}
	node_down();
}

/*
 * cicada: an RN version whose writer is past its commit point, as a
 * coordinator that died between its commit point and its RN -> CM flip
 * leaves it (cc/protocols/cicada.c invariant (2)). The status bits of
 * rn:x's newest version are set to RN by hand. A reader younger than it
 * waits (cc_lock_waits), then resolves it itself (flips it to CM) and
 * reads it, without an abort; a writer that meets it RN at validation
 * treats it as committed and installs behind it, and its own new version
 * ends CM.
 */
#define CI_STATUS_SHIFT 40 /* versions.h: the descriptor's status bits */

static uint64_t *rn_desc_word; /* meta[1] of rn:x, found by rn_mark */

static int rn_mark(struct txn *t, void *arg)
{
	(void)arg;
	const char *v;
	size_t vl;
	bool found;
	int rc = txn_get(t, "rn:x", 4, &v, &vl, &found);
	if (rc)
		return rc;
	struct cc_access *a = txn_acc_find(t, "rn:x", 4, st_hash("rn:x", 4));
	CHECK(a && a->ref.node == 1);
	rn_desc_word = (uint64_t *)((char *)st_region_base(N.cc.region) + a->ref.off + 8 * W_META1);
	return CC_OK;
}

static void rn_set(void)
{
	uint64_t d = __atomic_load_n(rn_desc_word, __ATOMIC_ACQUIRE);
	d = (d & ~(0xffull << CI_STATUS_SHIFT)) | (1ull << CI_STATUS_SHIFT);
	__atomic_store_n(rn_desc_word, d, __ATOMIC_RELEASE);
}

static unsigned rn_status(void)
{
	return (unsigned)(__atomic_load_n(rn_desc_word, __ATOMIC_ACQUIRE) >> CI_STATUS_SHIFT) & 0xffu;
}

static void test_cicada_rn_left_behind(void)
{
	node_up("cicada");
	struct kv v0 = { .key = "rn:x", .val = "0", .len = 1 };
	struct kv v1 = { .key = "rn:x", .val = "1", .len = 1 };
	run_one(kv_set, &v0);
	run_one(kv_set, &v1);
	run_one(rn_mark, NULL);
	CHECK(rn_status() == 0);
	rn_set();

	const struct cc_stats before = *cc_worker_stats(N.w[0].ccw);
	struct kv r = { .key = "rn:x" };
	run_one(kv_get, &r);
	const struct cc_stats *after = cc_worker_stats(N.w[0].ccw);
	CHECK(r.found && strcmp(r.got, "1") == 0);
	CHECK(after->lock_waits > before.lock_waits);     /* line 6: it waited */
	CHECK(after->txn_aborts == before.txn_aborts);
	CHECK(rn_status() == 0);                           /* and resolved it */

	rn_set();
	const struct cc_stats mid = *cc_worker_stats(N.w[0].ccw);
	struct kv v2 = { .key = "rn:x", .val = "2", .len = 1 };
	run_one(kv_set, &v2);
	CHECK(after->txn_aborts == mid.txn_aborts);
	CHECK(rn_status() == 0);                           /* its version flipped */
	struct kv r2 = { .key = "rn:x" };
	run_one(kv_get, &r2);
	CHECK(r2.found && strcmp(r2.got, "2") == 0);
	printf("  cicada: an RN version left behind is waited for, resolved, written over\n");
	node_down();
}

/*
 * maat's metadata where cc/protocols/maat.c's header puts it: a written
 * key's block has room for its lists at its end (descriptor in meta[1]),
 * a reader is listed in rL there while it runs and gone after its commit,
 * which left rts at or past its start; its transaction record holds its
 * tid and the interval [tid, +inf) while it runs. A placeholder (a read of
 * an absent key: no room) is held exclusively, its lock word ours, until
 * the end.
 */
#define MAAT_TAG 0x4d41415400000000ull /* maat.c MT_TAG */

struct maat_seen {
	uint64_t tid;
	bool listed, excl, record;
	uint64_t off_x, off_none;
};

/* ---- st_log_relock: locks lost with a power cut, taken again ---- */

static struct st_ref rl_ref;

static int rl_find(struct txn *t, void *arg)
{
	struct kv *kv = arg;
	int rc = kv_get(t, arg);
	struct cc_access *a = txn_acc_find(t, kv->key, strlen(kv->key),
					   st_hash(kv->key, strlen(kv->key)));
	CHECK(a);
	rl_ref = a->ref;
	return rc;
}

/* Record of rl_ref's item (words 1..5 and the value as they are) for txn,
 * whole and summed, as the first of its slot's (after header h). */
static struct st_log_rec *rl_record(struct st_log_hdr *h, struct st_item *it, uint64_t txn)
{
	struct st_log_rec *rec = (struct st_log_rec *)(h + 1);
	uint32_t vlen = st_data_vlen(it->data);
	rec->txn = txn;
	rec->kind_len = ((uint64_t)ST_REC_IMAGE << 32) | (40 + vlen);
	rec->off = rl_ref.off;
	rec->aux = rl_ref.gen;
	memcpy(rec + 1, &it->ver, 40);
	memcpy((char *)(rec + 1) + 40, st_item_val(it), vlen);
	rec->sum = st_log_rec_sum(rec, rec + 1);
	return rec;
}

/*
 * A region rebuilt from its log has lost its lock words. An item named by
 * another coordinator's slot that holds records and no mark (a transaction
 * undecided when the power went) is locked again with that transaction's
 * word, and nothing else is: not for a slot with its mark, not for the
 * node's own slots (it settled those itself).
 */
static void test_relock(void)
{
	nodes_up(2, "nowait");
	struct kv kv = { .key = "rl", .val = "old", .len = 3 };
	run_one_at(0, 0, kv_set, &kv);
	run_one_at(0, 0, rl_find, &kv);
	int k = rl_ref.node - 1;             /* the key's node (0-based) */
	unsigned coord = (unsigned)(2 - k);  /* the other node's id */
	struct st_region *r = nodes[k].cc.region;
	const struct st_layout *L = nodes[k].cc.layout;
	char *base = st_region_base(r);
	struct st_item *it = (struct st_item *)(base + rl_ref.off);
	uint64_t txn = cc_owner_word((uint16_t)coord, 12345);
	/* The slot: its header, then the record of "rl". */
	struct st_log_hdr *h = (struct st_log_hdr *)(base + st_log_slot_off(L, coord, 3));
	struct st_log_rec *rec = rl_record(h, it, txn);
	h->txn = txn;
	CHECK(it->lock == 0);
	CHECK(st_log_relock(r, coord) == 0); /* the caller's own slots: not these */
	CHECK(st_log_relock(r, (unsigned)k + 1) == 1);
	CHECK(it->lock == txn);
	CHECK(st_log_relock(r, (unsigned)k + 1) == 0); /* already locked */
	it->lock = 0;
	h->mark = txn; /* committed: its installs stand unlocked */
	CHECK(st_log_relock(r, (unsigned)k + 1) == 0 && it->lock == 0);
	h->mark = 0;
	rec->sum ^= 1; /* a torn record names nothing */
	CHECK(st_log_relock(r, (unsigned)k + 1) == 0 && it->lock == 0);
	memset(h, 0, sizeof(*h));
	node_down();
	printf("  st_log_relock: an undecided slot's item locked again, nothing else\n");
}

/*
 * The same recovery while that coordinator is alive (a shm peer keeps
 * running on the restarted node's region): it commits (mark, then unlock;
 * a single-node commit retires instead of marking) between the relock's
 * look at the slot and its CAS. The relock must not keep a lock it took
 * after the owner's release: nobody would ever release it, and every
 * later transaction on the item would abort. A thread commits one
 * transaction after another while this one relocks without pause.
 */
struct rl_race {
	struct st_region *r;
	unsigned self;
	int stop;
	uint64_t passes;
};

static void *rl_relocker(void *arg)
{
	struct rl_race *rr = arg;
	while (!ck_pr_load_int(&rr->stop)) {
		(void)st_log_relock(rr->r, rr->self);
		ck_pr_inc_64(&rr->passes);
	}
	return NULL;
}

static void test_relock_live_coordinator(void)
{
	nodes_up(2, "nowait");
	struct kv kv = { .key = "rl", .val = "old", .len = 3 };
	run_one_at(0, 0, kv_set, &kv);
	run_one_at(0, 0, rl_find, &kv);
	int k = rl_ref.node - 1;
	unsigned coord = (unsigned)(2 - k);
	struct st_region *r = nodes[k].cc.region;
	char *base = st_region_base(r);
	struct st_item *it = (struct st_item *)(base + rl_ref.off);
	struct st_log_hdr *h =
		(struct st_log_hdr *)(base + st_log_slot_off(nodes[k].cc.layout, coord, 3));
	struct rl_race rr = { .r = r, .self = (unsigned)k + 1 };
	pthread_t th;
	pthread_create(&th, NULL, rl_relocker, &rr);
	int leaked = 0;
	for (uint32_t i = 1; i <= 20000; i++) {
		uint64_t txn = cc_owner_word((uint16_t)coord, i);
		/* lock, records, slot: as the coordinator posts them */
		ck_pr_store_64(&it->lock, txn);
		(void)rl_record(h, it, txn);
		ck_pr_fence_store();
		ck_pr_store_64(&h->txn, txn);
		for (volatile unsigned d = 0; d < (i * 7919u) % 3000u; d++)
			;
		if (i & 1)
			ck_pr_store_64(&h->mark, txn); /* a multi-node commit's mark */
		else
			ck_pr_store_64(&h->txn, 0); /* a single-node commit's retire */
		ck_pr_store_64(&it->lock, 0);
		/* Two whole passes later, nothing of the relock is left. */
		uint64_t p0 = ck_pr_load_64(&rr.passes);
		while (ck_pr_load_64(&rr.passes) < p0 + 2)
			;
		if (ck_pr_load_64(&it->lock) != 0) {
			leaked++;
			ck_pr_store_64(&it->lock, 0);
		}
		ck_pr_store_64(&h->txn, 0);
		ck_pr_store_64(&h->mark, 0);
	}
	ck_pr_store_int(&rr.stop, 1);
	pthread_join(th, NULL);
	printf("  st_log_relock: a live coordinator's commit meanwhile leaves no lock behind "
	       "(%d of 20000 left)\n", leaked);
	CHECK(leaked == 0);
	memset(h, 0, sizeof(*h));
	node_down();
}

static struct st_item *item_at(uint64_t off)
{
	return (struct st_item *)((char *)st_region_base(N.cc.region) + off);
}

static int maat_body(struct txn *t, void *arg)
{
	struct maat_seen *m = arg;
	const char *v;
	size_t vl;
	bool found;
	int rc;
	if ((rc = txn_get(t, "ml:x", 4, &v, &vl, &found)) ||
	    (rc = txn_get(t, "ml:none", 7, &v, &vl, &found)))
		return rc;
	CHECK(!found);
	struct cc_access *x = txn_acc_find(t, "ml:x", 4, st_hash("ml:x", 4));
	struct cc_access *none = txn_acc_find(t, "ml:none", 7, st_hash("ml:none", 7));
	CHECK(x && none);
	m->tid = t->start_ts;
	m->off_x = x->ref.off;
	m->off_none = none->ref.off;
	const struct st_item *it = item_at(x->ref.off);
	uint32_t csz = st_class_size(x->ref.cls);
	CHECK(it->meta[1] == (MAAT_TAG | 4));
	CHECK(sizeof(*it) + 4 + st_data_vlen(it->data) + 64 <= csz);
	const uint64_t *rl = (const uint64_t *)((const char *)it + csz - 64);
	for (int i = 0; i < 4; i++)
		m->listed |= rl[i] == m->tid;
	m->excl = item_at(none->ref.off)->lock == t->owner;
	const uint64_t *rec = (const uint64_t *)((char *)st_region_base(N.cc.region) +
						 st_txn_state_off(N.cc.layout, (unsigned)t->rec));
	m->record = rec[2] == m->tid && rec[3] == 1 && rec[4] == m->tid && rec[5] == UINT64_MAX;
	return CC_OK;
}

static void test_maat_lists(void)
{
	node_up("maat");
	struct kv x = { .key = "ml:x", .val = "x0", .len = 2 };
	run_one(kv_set, &x);
	struct maat_seen m = { 0 };
	run_one(maat_body, &m);
	CHECK(m.listed && m.excl && m.record);
	const struct st_item *it = item_at(m.off_x);
	const uint64_t *rl = (const uint64_t *)((const char *)it + st_class_size(st_ident_class(it->ident)) - 64);
	for (int i = 0; i < 4; i++)
		CHECK(rl[i] != m.tid);
	CHECK(it->meta[0] >= m.tid && it->lock == 0);
	CHECK(item_at(m.off_none)->lock == 0);
	node_down();
	printf("  maat: a reader listed at the end of the block while it runs, gone after; "
	       "a placeholder held exclusively\n");
}

/* A record of node 1 (maat's words: 2 tid, 3 st, 4 lb) saying that the
 * attempt tid ended as st (2 CM at cts, 3 AB) while its entry stayed. */
static void maat_record(unsigned rec, uint64_t tid, uint64_t st, uint64_t cts)
{
	uint64_t *w = (uint64_t *)((char *)st_region_base(N.cc.region) +
				   st_txn_state_off(N.cc.layout, rec));
	w[2] = tid;
	w[3] = st;
	w[4] = w[5] = cts;
}

/*
 * A reader list full of entries whose attempts ended without leaving it
 * (their cleanup could not reach the item: its node was down), each
 * record still carrying its tid: the next reader drops them (list_gc)
 * and registers, where it used to abort on the full list until
 * txn-timeout. rts moves past the committed one's cts.
 */
static void test_maat_decided_zombies(void)
{
	node_up("maat");
	N.cc.limits.txn_timeout_ms = 2000;
	struct kv x = { .key = "ml:x", .val = "x0", .len = 2 };
	run_one(kv_set, &x);
	struct maat_seen m = { 0 };
	run_one(maat_body, &m);
	struct st_item *it = item_at(m.off_x);
	uint64_t *rl = (uint64_t *)((char *)it + st_class_size(st_ident_class(it->ident)) - 64);
	const uint64_t clock = m.tid >> 16, cts = m.tid + (1ull << 30);
	for (unsigned i = 0; i < 4; i++) {
		unsigned rec = 1000 + i;
		rl[i] = ((clock - 1000 + i) << 16) | (1u << 10) | rec;
		maat_record(rec, rl[i], i == 0 ? 2 : 3, i == 0 ? cts : 0);
	}
	struct kv r = { .key = "ml:x" };
	run_one(kv_get, &r);
	CHECK(r.found && strcmp(r.got, "x0") == 0);
	for (unsigned i = 0; i < 4; i++)
		CHECK(rl[i] == 0);
	CHECK(it->meta[0] >= cts); /* past the committed entry's cts */
	node_down();
	printf("  maat: a list full of decided attempts' leftovers is cleaned by the next reader\n");
}

/* Word 1 (maat's latch) of node 1's record rec. */
static uint64_t *maat_latch(unsigned rec)
{
	return (uint64_t *)((char *)st_region_base(N.cc.region) + st_txn_state_off(N.cc.layout, rec)) +
	       1;
}

static void stuck_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_cc: maat never got its own record back from a dead latch holder\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

/*
 * Record latches a validator took and never gave back (its node was
 * killed while it held them). Its node's restart makes every node drop
 * the latches that name it, and no other's (cc_peer_restarted). Before
 * that, a worker whose own record is so latched takes it back after
 * MT_STEAL_NS and runs: it used to take it back over and over, never
 * leaving its begin, its worker spinning (found by the checker's tcp3
 * kill -9 runs: final reads waited on that record until txn-timeout).
 */
static void test_maat_dead_validator(void)
{
	node_up("maat");
	const uint64_t clock = (uint64_t)1 << 40;
	const uint64_t of2 = (clock << 16) | (2u << 10) | 7u, of3 = (clock << 16) | (3u << 10) | 9u;
	*maat_latch(10) = of2;
	*maat_latch(11) = of3;
	*maat_latch(12) = of2 + (1ull << 16);
	CHECK(cc_peer_restarted(&N.cc, 2) == 2);
	CHECK(*maat_latch(10) == 0 && *maat_latch(12) == 0 && *maat_latch(11) == of3);
	*maat_latch(11) = 0;

	struct kv x = { .key = "dv:x", .val = "x0", .len = 2 };
	run_one(kv_set, &x);
	for (unsigned r = 0; r < ST_TXN_STATES; r++)
		*maat_latch(r) = of3;
	signal(SIGALRM, stuck_alarm);
	alarm(20);
	struct kv r = { .key = "dv:x" };
	run_one(kv_get, &r);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	CHECK(r.found && strcmp(r.got, "x0") == 0);
	unsigned left = 0;
	for (unsigned k = 0; k < ST_TXN_STATES; k++)
		left += *maat_latch(k) != 0;
	CHECK(left == ST_TXN_STATES - 1); /* its own record's latch: back to 0 */
	for (unsigned k = 0; k < ST_TXN_STATES; k++)
		*maat_latch(k) = 0;
	node_down();
	printf("  maat: a dead validator's record latches go with its node's restart, "
	       "and a worker takes its own back once\n");
}

/* The ref held apart from the address cache (cc_cache_hold): given back
 * once, for the same key only, and forgotten by a clear or a drop. */
static void test_cache_hold(void)
{
	struct cc_cache *c = cc_cache_create(4);
	CHECK(c);
	struct st_ref ref = { .node = 2, .off = 4096, .cls = 3, .gen = 7 }, out;
	uint64_t h = st_hash("k1", 2);
	cc_cache_hold(c, "k1", 2, h, &ref);
	CHECK(!cc_cache_take(c, "k2", 2, st_hash("k2", 2), &out));
	CHECK(!cc_cache_take(c, "k1x", 3, h, &out)); /* same hash, other key */
	CHECK(cc_cache_take(c, "k1", 2, h, &out));
	CHECK(out.node == 2 && out.off == 4096 && out.cls == 3 && out.gen == 7);
	CHECK(!cc_cache_take(c, "k1", 2, h, &out)); /* once */
	CHECK(!cc_cache_get(c, "k1", 2, h, &out));  /* never in the table */
	cc_cache_hold(c, "k1", 2, h, &ref);
	cc_cache_clear(c);
	CHECK(!cc_cache_take(c, "k1", 2, h, &out));
	cc_cache_hold(c, "k1", 2, h, &ref);
	cc_cache_drop(c, "k1", 2, h);
	CHECK(!cc_cache_take(c, "k1", 2, h, &out));
	char longkey[CC_CACHE_HOLD_KEY + 1];
	memset(longkey, 'x', sizeof(longkey));
	cc_cache_hold(c, longkey, sizeof(longkey), st_hash(longkey, sizeof(longkey)), &ref);
	CHECK(!cc_cache_take(c, longkey, sizeof(longkey), st_hash(longkey, sizeof(longkey)), &out));
	cc_cache_destroy(c);
	printf("  address cache: a held ref is taken once\n");
}

/* A full address cache forgets its oldest entry first; an entry replaced
 * by a later put does not take the newer one with it when its turn comes;
 * resizing empties the cache. */
static void test_cache_fifo(void)
{
	struct cc_cache *c = cc_cache_create(4);
	CHECK(c);
	const char *keys[] = { "a", "b", "c", "d", "e" };
	struct st_ref out;
	for (int i = 0; i < 4; i++) {
		struct st_ref r = { .node = 1, .off = 4096u * (i + 1), .cls = 1, .gen = 1 };
		cc_cache_put(c, keys[i], 1, st_hash(keys[i], 1), &r);
	}
	for (int i = 0; i < 4; i++)
		CHECK(cc_cache_get(c, keys[i], 1, st_hash(keys[i], 1), &out));
	/* b again, at a new address: a (the oldest) goes. */
	struct st_ref moved = { .node = 2, .off = 777 * 64, .cls = 2, .gen = 9 };
	cc_cache_put(c, "b", 1, st_hash("b", 1), &moved);
	CHECK(!cc_cache_get(c, "a", 1, st_hash("a", 1), &out));
	/* e reuses the slot of b's first entry: the newer b stays. */
	struct st_ref re = { .node = 1, .off = 4096 * 5, .cls = 1, .gen = 1 };
	cc_cache_put(c, "e", 1, st_hash("e", 1), &re);
	CHECK(cc_cache_get(c, "b", 1, st_hash("b", 1), &out));
	CHECK(out.node == 2 && out.off == 777 * 64 && out.gen == 9);
	CHECK(cc_cache_get(c, "c", 1, st_hash("c", 1), &out));
	CHECK(cc_cache_get(c, "e", 1, st_hash("e", 1), &out) && out.off == 4096 * 5);
	/* A thousand more puts keep at most 4 keys, the newest ones. */
	char k[16];
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(k, sizeof(k), "k%d", i);
		cc_cache_put(c, k, (size_t)n, st_hash(k, (size_t)n), &re);
	}
	int found = 0;
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(k, sizeof(k), "k%d", i);
		found += cc_cache_get(c, k, (size_t)n, st_hash(k, (size_t)n), &out);
	}
	CHECK(found == 4 && cc_cache_get(c, "k999", 4, st_hash("k999", 4), &out));
	CHECK(cc_cache_resize(c, 2) == 0 && cc_cache_max(c) == 2);
	CHECK(!cc_cache_get(c, "k999", 4, st_hash("k999", 4), &out));
	cc_cache_destroy(c);
	printf("  address cache: first in, first out\n");
}

/* Timestamps (cc.h): strictly increasing per record, naming the node and
 * the record; ages of lock words compare across the 55-bit wrap. */
static int ts_body(struct txn *t, void *arg)
{
	(void)arg;
	uint64_t prev = cc_ts_next(t);
	for (int i = 0; i < 10000; i++) {
		uint64_t ts = cc_ts_next(t);
		CHECK(ts > prev);
		CHECK(cc_ts_rec(ts) == t->rec && cc_ts_node(ts) == 1);
		prev = ts;
	}
	/* A timestamp seen far ahead (a skewed peer) moves ours past it. */
	uint64_t ahead = prev + (1000000ull << 16);
	cc_ts_observe(t, ahead);
	CHECK(cc_ts_next(t) > ahead);
	uint64_t o = cc_owner_word(1, prev);
	CHECK((o >> 56) == 1 && (o & 1) && cc_lock_rec(o) == t->rec);
	CHECK(cc_lock_older(cc_owner_word(2, 100), cc_owner_word(1, 200)));
	CHECK(!cc_lock_older(cc_owner_word(1, 200), cc_owner_word(2, 100)));
	CHECK(!cc_lock_older(o, o));
	/* Across the wrap of the 55-bit age: the one just before it is older. */
	uint64_t wrap = 1ull << 55;
	CHECK(cc_lock_older(cc_owner_word(1, wrap - 5), cc_owner_word(1, wrap + 5)));
	return CC_OK;
}

static void test_timestamps(void)
{
	node_up("nowait");
	run_one(ts_body, NULL);
	printf("  timestamps: ok\n");
	node_down();
}

int main(void)
{
	CHECK(mkdtemp(dir));
	test_cache_hold();
	test_cache_fifo();
	test_timestamps();
	const char *protos[] = { "nowait", "nowait/shared", "waitdie", "woundwait",
				 "timestamp",  "mvcc",          "silo",   "occ",
				 "sundial",   "cicada",        "maat",   "calvin" };
	const int nprotos = (int)(sizeof(protos) / sizeof(protos[0]));
	for (int i = 0; i < nprotos; i++) {
		test_increments(protos[i], false);
		test_bank(protos[i], false);
		test_grow_and_delete(protos[i]);
		test_stale_addresses(protos[i]);
	}
	/* Not calvin, here or in the two-node tests below: they drive one
	 * node's worker at a time, and calvin's sequencing needs every node's
	 * workers to answer its RPCs. Its clusters are tested end to end
	 * (test_protocol_calvin.py, the checker's shm3 and tcp3 runs). */
	for (int i = 0; i < nprotos; i++)
		if (strcmp(protos[i], "calvin") != 0)
			test_replicas(protos[i]);
	test_relock();
	test_relock_live_coordinator();
	test_increments("nowait", true);
	test_bank("silo", true);
	test_two_nodes("silo");
	test_two_nodes("nowait");
	test_two_nodes("mvcc");
	test_two_nodes("timestamp");
	test_two_nodes("occ");
	test_fetch_more("silo");
	test_fetch_more("nowait");
	test_fetch_more("occ");
	test_two_nodes("sundial");
	test_fetch_more("sundial");
	test_sundial_renewal_waits();
	test_two_nodes("cicada");
	test_fetch_more("cicada");
	test_cicada_rn_left_behind();
	test_two_nodes("maat");
	test_fetch_more("maat");
	test_maat_lists();
	test_maat_decided_zombies();
	test_maat_dead_validator();
	/* With a fabric delay every round trip yields, so the coroutines of a
	 * worker interleave inside their transactions: per-worker state that
	 * is not per-transaction shows up here (it lost increments once). */
	fabric_delay_us = 20;
	printf(" with fabric-delay-us 20:\n");
	for (int i = 0; i < nprotos; i++) {
		test_increments(protos[i], false);
		test_bank(protos[i], false);
		test_fresh_keys(protos[i]);
		test_opposite_transfers(protos[i]);
		/* Only a delayed fabric uses the address cache for its own
		 * node (txn.c, cache_pays). */
		test_stale_addresses(protos[i]);
		/* And for backups: their lock CAS rides in the protocol's lock
		 * round at commit (cc/repl.c). Not calvin: as above. */
		if (strcmp(protos[i], "calvin") != 0)
			test_replicas(protos[i]);
	}
	rmdir(dir);
	printf("test_cc: ok\n");
	return 0;
}

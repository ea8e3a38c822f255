/*
 * recovery.c: what a node does about transactions that died with their
 * coordinator (DESIGN.md section 9; st.h "the undo log"):
 *  - at start, after an unclean stop: settle its own coordinator's
 *    transactions in its own region, release their locks; standalone, also
 *    reset every lock and rebuild the free bitmaps (st_recover); a cluster
 *    node whose region was rebuilt from its write-ahead log and that no
 *    peer maps (tcp), also every peer's lock (srv_recover_local);
 *  - at a peer's join (server/cluster.c): if the peer has a new
 *    incarnation, settle the peer's old transactions in this region from
 *    the peer's decision records, and release their locks;
 *  - when a live peer reports slots it could not retire here (it saw this
 *    node fail mid-commit): settle exactly those.
 */
#include "server/recovery.h"

#include <ck_pr.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cc/cc.h"
#include "server/log.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

void srv_read_decisions(struct node *n, uint64_t out[ST_LOG_SLOTS])
{
	const char *base = st_region_base(n->cc.region);
	for (unsigned s = 0; s < ST_LOG_SLOTS; s++) {
		const struct st_txn_rec *tr =
			(const struct st_txn_rec *)(base + st_txn_rec_off(n->cc.layout, s));
		out[s] = ck_pr_load_64((uint64_t *)&tr->committed);
	}
}

/* A lock word without node `arg`'s holds (cc.h: an owner word names its
 * node in the top byte; a shared word counts each node's holders in a
 * lane of its own). */
static uint64_t held_by_node(void *arg, uint64_t lockword)
{
	unsigned node = (unsigned)(uintptr_t)arg;
	if (cc_lock_is_shared(lockword)) {
		uint64_t w = lockword - (uint64_t)cc_shared_count(lockword, node) * cc_shared_unit(node);
		return w == (CC_SHARED_TAG << 56) ? 0 : w;
	}
	return cc_lock_holder_node(lockword) == (int)node ? 0 : lockword;
}

/* Every lock word goes (srv_recover_local, a region rebuilt from its log). */
static uint64_t held_by_anyone(void *arg, uint64_t lockword)
{
	(void)arg;
	(void)lockword;
	return 0;
}

/*
 * A cluster node's region rebuilt from its checkpoint and write-ahead log
 * (not a copy that holds every write), which no peer maps: while the node
 * was down, nobody touched it. The log is a prefix of the writes (the
 * moment of its last flush), and on tcp its NIC thread noted the peers'
 * lock words in it too; a peer's release is acknowledged without a sync
 * (only a remote flush waits for one, and a commit's flush comes before
 * its releases), so the replay can bring back a lock whose holder has
 * finished and will never settle it: held for good. Every transaction of
 * a peer that held a lock here either finished, or failed here (its
 * coordinator settles it by its owner word: a lock already gone is no
 * harm), or is still running and finds the connection it locked through
 * broken (cc/prim.c aborts its commit); and installs of undecided ones
 * are locked again from the log slots (st_log_relock).
 */
static bool region_rebuilt_alone(struct node *n)
{
	if (!st_region_is_wal(n->cc.region) || !n->cfg.fabric || strcmp(n->cfg.fabric, "shm") == 0)
		return false;
	struct st_wal_stats ws;
	st_wal_get_stats(n->cc.region, &ws);
	return !ws.adopted_copy;
}

/* Lock words to release: those naming one of a list of txns. */
struct txn_list {
	unsigned n;
	uint64_t txn[ST_LOG_SLOTS + CC_LOCK_PENDING];
};

static uint64_t held_by_txn(void *arg, uint64_t lockword)
{
	const struct txn_list *l = arg;
	for (unsigned i = 0; i < l->n; i++)
		if (l->txn[i] == (lockword | 1u)) /* or its "installing" mark */
			return 0;
	return lockword;
}

/* Settling runs on control threads (a join's HELLO, each side of it, and
 * the periodic retry of cluster.c): one at a time, so a slot is never
 * resolved twice at once and a pending entry's node mask is updated by
 * one thread. */
static pthread_mutex_t settle_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_settled(struct node *n, const char *what, const struct st_log_stats *st,
			uint64_t ms)
{
	if (!st->txns_committed && !st->txns_rolled_back && !st->locks_released)
		return;
	srv_log(n, LOG_WARNING,
		"%s: %" PRIu64 " transactions rolled back (%" PRIu64 " records undone), %" PRIu64
		" committed ones finished, %" PRIu64 " locks released, in %" PRIu64 " ms",
		what, st->txns_rolled_back, st->records_undone, st->txns_committed,
		st->locks_released, ms);
}

void srv_recover_local(struct node *n)
{
	uint64_t t0 = mono_ms();
	unsigned self = (unsigned)n->cfg.node_id;
	uint64_t decided[ST_LOG_SLOTS];
	struct st_log_stats st = { 0 };
	srv_read_decisions(n, decided);
	st_log_resolve(n->cc.region, self, decided, NULL, &st);
	uint64_t t1 = mono_ms();
	uint64_t live = 0, relocked = 0;
	if (n->cfg.ncluster_nodes == 0) {
		/* Nobody else maps this region: every lock is a dead one, and
		 * blocks not reachable from the index can be freed. The locks
		 * it resets count as released (INFO recovered_locks_released). */
		st_recover_stats(n->cc.region, &live, &st);
	} else {
		/* Peers may be running transactions here right now (shm): only
		 * our own dead transactions' locks go (every lock, when the
		 * region was rebuilt from the log and nobody maps it:
		 * region_rebuilt_alone), and the free bitmaps stay (a block a
		 * dead transaction allocated and never published stays
		 * allocated: a leak, never a double use). */
		if (region_rebuilt_alone(n))
			st_release_locks(n->cc.region, held_by_anyone, NULL, (int)self, &st);
		else
			st_release_locks(n->cc.region, held_by_node, (void *)(uintptr_t)self, (int)self,
					 &st);
		/* Installs of other coordinators' undecided transactions stay
		 * locked until those settle (a lost lock word would show them). */
		relocked = st_log_relock(n->cc.region, self);
		live = st_count(n->cc.region);
	}
	uint64_t t2 = mono_ms();
	n->recovery = st;
	n->recovery_ms = t2 - t0;
	n->recovered_keys = live;
	srv_log(n, LOG_WARNING,
		"MemStore was not closed cleanly: recovered in %" PRIu64 " ms (undo log %" PRIu64
		" ms: %" PRIu64 " transactions rolled back, %" PRIu64 " records undone, %" PRIu64
		" committed ones finished; scan %" PRIu64 " ms: %" PRIu64 " locks released%s, %" PRIu64
		" items locked again for other nodes' undecided transactions), %" PRIu64 " keys",
		t2 - t0, t1 - t0, st.txns_rolled_back, st.records_undone, st.txns_committed, t2 - t1,
		st.locks_released, n->cfg.ncluster_nodes == 0 ? ", free bitmaps rebuilt" : "", relocked,
		live);
}

void srv_settle_restarted_peer(struct node *n, unsigned peer, uint64_t incarnation,
			       const uint64_t decided[ST_LOG_SLOTS])
{
	struct st_header *h = st_region_header(n->cc.region);
	if (peer >= FAB_MAX_NODES)
		return;
	pthread_mutex_lock(&settle_mu);
	uint64_t known = ck_pr_load_64(&h->peer_incarnation[peer]);
	if (known == incarnation) {
		pthread_mutex_unlock(&settle_mu);
		return;
	}
	if (known != 0) {
		uint64_t t0 = mono_ms();
		struct st_log_stats st = { 0 };
		st_log_resolve(n->cc.region, peer, decided, NULL, &st);
		st_release_locks(n->cc.region, held_by_node, (void *)(uintptr_t)peer, (int)peer, &st);
		st.locks_released += cc_peer_restarted(&n->cc, (uint16_t)peer);
		char what[96];
		snprintf(what, sizeof(what), "node %u restarted (incarnation %" PRIu64 ")", peer,
			 incarnation);
		log_settled(n, what, &st, mono_ms() - t0);
	}
	ck_pr_store_64(&h->peer_incarnation[peer], incarnation);
	st_region_persist(n->cc.region, (uint64_t)((char *)&h->peer_incarnation[peer] - (char *)h), 8);
	/* Durable before the peer hears it is settled and reuses its slots
	 * (a write-ahead log has the settling's writes only as notes). */
	(void)st_region_sync(n->cc.region);
	pthread_mutex_unlock(&settle_mu);
}

void srv_settle_pending(struct node *n, unsigned peer, const uint64_t decided[ST_LOG_SLOTS],
			const struct srv_pending *p)
{
	static struct txn_list l; /* under settle_mu */
	pthread_mutex_lock(&settle_mu);
	l.n = 0;
	for (unsigned s = 0; s < ST_LOG_SLOTS; s++)
		if (p->slots[s])
			l.txn[l.n++] = p->slots[s];
	for (unsigned i = 0; i < CC_LOCK_PENDING; i++)
		if (p->locks[i])
			l.txn[l.n++] = p->locks[i];
	if (l.n) {
		uint64_t t0 = mono_ms();
		struct st_log_stats st = { 0 };
		st_log_resolve(n->cc.region, peer, decided, p->slots, &st);
		st_release_locks(n->cc.region, held_by_txn, &l, -1, &st);
		char what[96];
		snprintf(what, sizeof(what), "transactions node %u could not finish here", peer);
		log_settled(n, what, &st, mono_ms() - t0);
		(void)st_region_sync(n->cc.region);
	}
	pthread_mutex_unlock(&settle_mu);
}

bool srv_pending_for(struct node *n, unsigned peer, struct srv_pending *out)
{
	bool any = false;
	for (unsigned s = 0; s < ST_LOG_SLOTS; s++) {
		uint64_t txn = ck_pr_load_64(&n->cc.log_pending[s]);
		uint64_t nodes = ck_pr_load_64(&n->cc.log_pending_nodes[s]);
		out->slots[s] = txn && (nodes & (1ull << peer)) ? txn : 0;
		any |= out->slots[s] != 0;
	}
	for (unsigned i = 0; i < CC_LOCK_PENDING; i++) {
		uint64_t txn = ck_pr_load_64(&n->cc.lock_pending[i]);
		uint64_t nodes = ck_pr_load_64(&n->cc.lock_pending_nodes[i]);
		out->locks[i] = txn && txn != ~0ull && (nodes & (1ull << peer)) ? txn : 0;
		any |= out->locks[i] != 0;
	}
	return any;
}

/* Drop `peer` from a pending entry that still names `txn`; free the entry
 * when no node is left. */
static void settled_one(uint64_t *txnw, uint64_t *nodesw, uint64_t txn, unsigned peer)
{
	if (!txn || ck_pr_load_64(txnw) != txn)
		return;
	uint64_t left = ck_pr_load_64(nodesw) & ~(1ull << peer);
	ck_pr_store_64(nodesw, left);
	if (!left) {
		ck_pr_fence_store();
		ck_pr_store_64(txnw, 0); /* usable again */
	}
}

void srv_pending_settled(struct node *n, unsigned peer, const struct srv_pending *p)
{
	pthread_mutex_lock(&settle_mu);
	for (unsigned s = 0; s < ST_LOG_SLOTS; s++)
		settled_one(&n->cc.log_pending[s], &n->cc.log_pending_nodes[s], p->slots[s], peer);
	for (unsigned i = 0; i < CC_LOCK_PENDING; i++)
		settled_one(&n->cc.lock_pending[i], &n->cc.lock_pending_nodes[i], p->locks[i], peer);
	pthread_mutex_unlock(&settle_mu);
}

void srv_takeover_scan(struct node *n, unsigned dead, uint64_t txn[ST_LOG_SLOTS],
		       uint64_t mark[ST_LOG_SLOTS])
{
	pthread_mutex_lock(&settle_mu);
	st_log_slots(n->cc.region, dead, txn, mark);
	pthread_mutex_unlock(&settle_mu);
}

void srv_takeover_settle(struct node *n, unsigned dead, const uint64_t decided[ST_LOG_SLOTS])
{
	if (dead >= FAB_MAX_NODES || dead == (unsigned)n->cfg.node_id)
		return;
	uint64_t t0 = mono_ms();
	struct st_log_stats st = { 0 };
	pthread_mutex_lock(&settle_mu);
	st_log_resolve(n->cc.region, dead, decided, NULL, &st);
	st_release_locks(n->cc.region, held_by_node, (void *)(uintptr_t)dead, (int)dead, &st);
	st.locks_released += cc_peer_restarted(&n->cc, (uint16_t)dead);
	(void)st_region_sync(n->cc.region);
	pthread_mutex_unlock(&settle_mu);
	struct srv_pending owed;
	if (srv_pending_for(n, dead, &owed))
		srv_pending_settled(n, dead, &owed);
	char what[96];
	snprintf(what, sizeof(what), "takeover of node %u (out of the configuration)", dead);
	log_settled(n, what, &st, mono_ms() - t0);
}

/*
 * membership.c: the configuration's Raft group, the leases, the adoption
 * of a new configuration, and a restarted node's rejoin (membership.h).
 *
 * Threads:
 *  - the Raft thread runs a libuv loop: libraft's I/O, the FSM, the tick
 *    that renews leases (and, on the leader, proposes changes), the UDP
 *    socket of the leases. Only it calls libraft.
 *  - the configuration thread adopts each configuration the FSM applied
 *    (it may quiesce the node, which the Raft thread must never wait
 *    for), runs the leader's takeovers, and drives this node's rejoin.
 * They share `applied` and `view` under mu; the lease is the cc node's
 * lease_until_ns, which the Raft thread extends and the configuration
 * thread clears when it adopts.
 */
#include "server/membership.h"

#include <arpa/inet.h>
#include <ck_pr.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <raft.h>
#include <raft/uv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <uv.h>

#include "cc/calvin.h"
#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/switch.h"
#include "cc/txn.h"
#include "placement/placement.h"
#include "rdma/fab.h"
#include "server/cluster.h"
#include "server/log.h"
#include "server/node.h"
#include "server/recovery.h"
#include "server/sigbus.h"
#include "server/worker.h"

/*
 * Timing, for a 2-core box that also runs the load and the other nodes:
 * a lease outlives five missed renewals (a scheduler stall of a second
 * costs nothing), and the leader waits one more election timeout. A dead
 * node is out about LEASE_MS + GRACE_MS after its last renewal, 2 s; a
 * dead leader adds an election (0.5 to 1 s, within the leases, which the
 * new leader goes on granting at once: all_quiet) and that wait again.
 * A stalled leader costs an election at worst (pre-vote keeps a follower
 * that merely lagged from deposing it).
 */
#define RENEW_MS 250
#define LEASE_MS 1500
#define HEARTBEAT_MS 100
#define ELECTION_MS 500
#define GRACE_MS ELECTION_MS
#define SENT_RING 32
/* Without a leader for this long (a lease and more: longer than an
 * election), transactions are refused at once rather than left to wait. */
#define NO_LEADER_MS (2 * LEASE_MS)
#define START_WAIT_MS 15000
#define COPY_BATCH 256 /* keys per CTL_SCAN of the rejoin copy */
#define COPY_TXN 32    /* keys per copying transaction */
/* A clean shutdown's hand-over (mb_leave): at most this long. */
#define LEAVE_WAIT_MS 5000

#define CMD_MAGIC 0x524b4346u  /* a log entry */
#define WIRE_MAGIC 0x524b4c53u /* a lease message */

/*
 * The log's commands, each from configuration `epoch` to the next:
 *   OUT node        the node leaves every replica set (a failover);
 *   JOIN node       an out node that restarted with its region emptied
 *                   comes back as the last backup of its sets, copying;
 *   READY node      it has copied everything: a full backup (late);
 *   REBALANCE       every late node back to its place in the cluster
 *                   file's sets, primaries included;
 *   SETTLED         the takeover this configuration needs is done (no
 *                   new epoch): leases may be granted under it, by this
 *                   leader or the next.
 * A command made from a stale state (epoch differs) is a no-op on every
 * node, so a deposed leader's proposal cannot undo a newer decision.
 */
enum { CMD_OUT = 1, CMD_JOIN, CMD_READY, CMD_REBALANCE, CMD_SETTLED };
/* Lease requests and grants; a rejoining node's JOIN and READY requests;
 * RCKV REBALANCE asked of a follower; a node that shuts down asks to be
 * taken out (LEAVE), and the leader may answer that it stays (STAY). */
enum { WIRE_ASK = 1, WIRE_GRANT, WIRE_JOIN, WIRE_READY, WIRE_REBALANCE, WIRE_LEAVE,
       WIRE_STAY };
/* cc_node.config_refuse: why transactions are refused at once. */
enum { REFUSE_NONE, REFUSE_OUT, REFUSE_NO_LEADER, REFUSE_LEAVING };
/* mb_leave's steps (membership.leaving), each X_ASKED by mb_leave and
 * done by the Raft thread: refuse new transactions; (drained) drop the
 * lease and take no grant; (DRAINED) ask to leave. STAYS: the leader
 * keeps it in. */
enum { LEAVE_NONE, LEAVE_ASKED, LEAVE_REFUSING, LEAVE_DROP_ASKED, LEAVE_DROPPED, LEAVE_DRAINED,
       LEAVE_STAYS };

/* A log entry (fixed layout, little-endian). */
struct mb_cmd {
	uint32_t magic;
	uint32_t kind;
	uint64_t node;
	uint64_t epoch;
};

/* One UDP datagram each. */
struct mb_wire {
	uint32_t magic;
	uint16_t kind;
	uint16_t node;
	uint64_t cluster;
	uint64_t seq;
	uint64_t epoch; /* ASK: the configuration the node uses; GRANT: the one
			   the grant belongs to; READY: the one it copied under */
};

/* The FSM: configuration 1 is the cluster file's, every node in place.
 * Bit i of a mask is node i (pl_map_derive). */
struct mb_state {
	uint64_t epoch;
	uint64_t out;
	uint64_t joining;
	uint64_t late;
	uint64_t settled; /* the last configuration whose takeover is done */
};

/* The rejoin of this node (configuration thread). */
enum { REJOIN_NONE, REJOIN_ASKING, REJOIN_COPYING, REJOIN_READY };

struct membership {
	struct node *n;
	unsigned self;
	uint64_t cluster;
	uint64_t members;                /* bit per node id */
	char addr[PL_MAX_NODES][128];    /* raft address per node id */
	struct sockaddr_storage sa[PL_MAX_NODES]; /* its UDP address */
	bool sa_ok[PL_MAX_NODES];
	struct pl_map *base;             /* the cluster file's map */
	char dir[4096];

	uv_loop_t loop;
	struct raft_uv_transport transport;
	struct raft_io io;
	struct raft_fsm fsm;
	struct raft raft;
	uv_timer_t tick;
	uv_udp_t udp;
	uv_async_t wake;                 /* mb_stop, mb_leave, nudge */
	int nudged;                      /* ck_pr: the configuration thread's news */
	int stop;                        /* ck_pr: mb_stop asked */
	pthread_t thread;
	bool running;

	/* The Raft thread's. */
	struct mb_state st;
	uint64_t applied_ms;             /* when st.epoch was applied here */
	bool proposing;
	struct raft_apply req;
	struct raft_transfer transfer;   /* mb_leave: the leadership to another node */
	bool transferring, transfer_failed;
	uint64_t no_leader_since;        /* 0: a leader is known */
	uint64_t seq;
	uint64_t sent_ms[SENT_RING], sent_seq[SENT_RING];
	char rbuf[256];
	/* The leader's, reset at each new term (leader_tick). */
	raft_term led_term;
	uint64_t granted_ms;             /* the last tick it could grant */
	uint64_t withheld_log_ms;        /* the last "withheld" warning */
	uint64_t heard_ms[PL_MAX_NODES];   /* last message */
	uint64_t leave_asked;            /* nodes that shut down and asked to be out */
	uint64_t ask_seq[PL_MAX_NODES];  /* a node's last lease request not granted */
	uint64_t ask_ms[PL_MAX_NODES];   /* when it came */
	uint64_t last_copy_log_ms[PL_MAX_NODES]; /* "stays in" warnings */
	uint64_t adopted_at[PL_MAX_NODES]; /* the configuration it said it uses */

	/* Shared, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mb_state applied;
	struct mb_view view;
	uint64_t want_takeover;          /* the leader asks its configuration thread */

	/* ck_pr. */
	uint64_t took_over;              /* the configuration the leader's takeover did */
	uint64_t adopted_epoch;          /* the configuration whose map is published */
	uint64_t failovers;
	int rebalance_asked;             /* RCKV REBALANCE */
	uint32_t rejoin_ask;             /* WIRE_JOIN or WIRE_READY to send each tick, 0: none */
	uint64_t rejoin_epoch;           /* READY: the configuration it copied under */
	uint64_t copied_keys;            /* the last rejoin's */
	int leaving;                     /* LEAVE_*: mb_leave's progress */

	/* The configuration thread's. */
	pthread_t adopter;
	bool adopting;
	struct mb_state adopted;
	pthread_mutex_t promoted_mu;     /* the configuration thread and a takeover's reset */
	uint8_t promoted[PL_SLOTS / 8];  /* slots that became primary here since the last reset */
	int rejoin;                      /* REJOIN_* */
	uint64_t retry_ms;
};

static uint64_t now_ms(void)
{
	return sched_now_ns() / 1000000ull;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static void set_lease(struct membership *m, uint64_t until_ms)
{
	/* 1, not 0: 0 means "no leases" to cc_run. */
	ck_pr_store_64(&m->n->cc.lease_until_ns, until_ms ? until_ms * 1000000ull : 1);
}

static uint64_t bit(unsigned id)
{
	return 1ull << id;
}

/* ---- the FSM (Raft thread) ---- */

static bool settle_step(struct membership *m, uint64_t now);
static void grant_waiting(struct membership *m, uint64_t now);

static void publish_state(struct membership *m)
{
	pthread_mutex_lock(&m->mu);
	m->applied = m->st;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

static const char *const cmd_names[] = { "", "is out", "rejoins, copying", "is ready",
					 "rebalanced" };

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct membership *m = fsm->data;
	struct mb_state *st = &m->st;
	struct mb_cmd c;
	*result = NULL;
	if (buf->len != sizeof(c))
		return 0; /* not ours: a no-op, as on every node */
	memcpy(&c, buf->base, sizeof(c));
	if (c.magic != CMD_MAGIC || c.kind < CMD_OUT || c.kind > CMD_SETTLED ||
	    c.node >= PL_MAX_NODES || c.epoch != st->epoch ||
	    (c.kind < CMD_REBALANCE && !(m->members & bit((unsigned)c.node))))
		return 0;
	if (c.kind == CMD_SETTLED) {
		st->settled = st->epoch;
		publish_state(m);
		grant_waiting(m, now_ms());
		return 0;
	}
	const uint64_t b = bit((unsigned)c.node);
	switch (c.kind) {
	case CMD_OUT:
		st->out |= b;
		st->joining &= ~b;
		st->late &= ~b;
		/* Fenced now, not when the configuration thread adopts the
		 * change: it may be held in an earlier adoption's quiesce by a
		 * transaction waiting on this node, hung (SIGSTOP), which only
		 * the fence wakes (adopt unfences it if it comes back). */
		if ((unsigned)c.node != m->self)
			fab_fence(m->n->cc.fab, c.node);
		break;
	case CMD_JOIN:
		if (!(st->out & b))
			return 0;
		st->out &= ~b;
		st->joining |= b;
		break;
	case CMD_READY:
		if (!(st->joining & b))
			return 0;
		st->joining &= ~b;
		st->late |= b;
		break;
	case CMD_REBALANCE:
		if (!st->late)
			return 0;
		st->late = 0;
		break;
	}
	st->epoch++;
	m->applied_ms = now_ms();
	if (st->out & bit(m->self))
		set_lease(m, 0);
	if (c.kind == CMD_REBALANCE)
		srv_log(m->n, LOG_NOTICE, "configuration %" PRIu64 ": primaries back in place",
			st->epoch);
	else
		srv_log(m->n, c.kind == CMD_OUT ? LOG_WARNING : LOG_NOTICE,
			"configuration %" PRIu64 ": node %u %s", st->epoch, (unsigned)c.node,
			cmd_names[c.kind]);
	publish_state(m);
	return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct membership *m = fsm->data;
	*bufs = raft_malloc(sizeof(**bufs));
	if (!*bufs)
		return RAFT_NOMEM;
	(*bufs)[0].base = raft_malloc(sizeof(m->st));
	if (!(*bufs)[0].base) {
		raft_free(*bufs);
		return RAFT_NOMEM;
	}
	memcpy((*bufs)[0].base, &m->st, sizeof(m->st));
	(*bufs)[0].len = sizeof(m->st);
	*n = 1;
	return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct membership *m = fsm->data;
	if (buf->len != sizeof(m->st))
		return RAFT_MALFORMED;
	memcpy(&m->st, buf->base, sizeof(m->st));
	raft_free(buf->base);
	m->applied_ms = now_ms();
	if (m->st.out & bit(m->self))
		set_lease(m, 0);
	publish_state(m);
	return 0;
}

/* ---- leases and proposals (Raft thread) ---- */

static void udp_send(struct membership *m, unsigned to, const struct mb_wire *w)
{
	if (!m->sa_ok[to])
		return;
	uv_buf_t b = uv_buf_init((char *)w, sizeof(*w));
	(void)uv_udp_try_send(&m->udp, &b, 1, (const struct sockaddr *)&m->sa[to]);
}

/*
 * Every live node uses configuration st.epoch, or has no lease left. A
 * lease for an older one was granted before st.epoch was committed, and
 * so before this node applied it (applied_ms), or by a deposed leader
 * that has not heard of it, which gives up within GRACE_MS of losing its
 * majority, before the commit; either way it has ended by applied_ms +
 * GRACE_MS + LEASE_MS. So a leader elected long after the last change
 * grants at once, even with a member dead and not yet out.
 */
static bool all_quiet(struct membership *m, uint64_t now)
{
	if (now >= m->applied_ms + GRACE_MS + LEASE_MS)
		return true;
	for (unsigned i = 1; i < PL_MAX_NODES; i++) {
		if (!(m->members & bit(i)) || (m->st.out & bit(i)))
			continue;
		uint64_t adopted = i == m->self ? ck_pr_load_64(&m->adopted_epoch) : m->adopted_at[i];
		if (adopted < m->st.epoch)
			return false;
	}
	return true;
}

/*
 * Has the leader heard a majority of the members (itself included) within
 * a lease? A leader that was hung (SIGSTOP) runs its tick once or twice
 * when it wakes, before it hears that another was elected meanwhile: it
 * must not grant itself a lease then (its peers' messages are a lease
 * old). A new leader counts everyone as heard: a majority just elected it.
 */
static bool majority_heard(struct membership *m, uint64_t now)
{
	int heard = 0, members = __builtin_popcountll(m->members);
	for (unsigned i = 1; i < PL_MAX_NODES; i++)
		if ((m->members & bit(i)) && (i == m->self || now - m->heard_ms[i] < LEASE_MS))
			heard++;
	return heard > members / 2;
}

/*
 * May the leader grant leases for configuration st.epoch? Only once no
 * node can still run a transaction under an older one (all_quiet), the
 * takeover made for it is done (no transaction runs during it), and while
 * a majority still answers it (majority_heard).
 */
static bool can_grant(struct membership *m, uint64_t now)
{
	return m->st.settled >= m->st.epoch && all_quiet(m, now) && majority_heard(m, now);
}

/*
 * Would taking `node` out leave one of its replica sets without a live,
 * complete copy (every other node of the set out or still copying)? Then
 * it stays in: out, it would empty its region when it restarts, and the
 * set's last copy with it; in, it serves again when it comes back. The
 * set's index, or -1.
 */
static int last_copy_of(const struct membership *m, const struct mb_state *st, unsigned node)
{
	for (int i = 0; i < m->base->nsets; i++) {
		const struct pl_set *set = &m->base->sets[i];
		bool member = false, other = false;
		for (int r = 0; r < set->n; r++) {
			unsigned id = set->node[r];
			member |= id == node;
			other |= id != node && !((st->out | st->joining) & bit(id));
		}
		if (member && !other)
			return i;
	}
	return -1;
}

static void on_proposed(struct raft_apply *req, int status, void *result)
{
	struct membership *m = req->data;
	m->proposing = false;
	if (status != 0)
		srv_log(m->n, LOG_NOTICE, "configuration change not committed: %s",
			raft_strerror(status));
}

/* The leader proposes one change at a time, from a configuration it has
 * adopted itself and (but to settle it, or to take a node out: one may
 * die during a takeover, which then cannot finish) settled. */
static bool propose(struct membership *m, uint32_t kind, unsigned node)
{
	/* A node taken out need not wait for the leader to adopt the
	 * configuration before it: that adoption may be what waits for the
	 * node (a transaction in flight to it when it hung), and the fence
	 * that ends the wait comes with the change (fsm_apply). */
	if (m->proposing || raft_state(&m->raft) != RAFT_LEADER ||
	    (kind != CMD_OUT && m->st.epoch != ck_pr_load_64(&m->adopted_epoch)) ||
	    (kind != CMD_OUT && kind != CMD_SETTLED && m->st.settled < m->st.epoch))
		return false;
	struct mb_cmd c = { .magic = CMD_MAGIC, .kind = kind, .node = node, .epoch = m->st.epoch };
	struct raft_buffer b = { .base = raft_malloc(sizeof(c)), .len = sizeof(c) };
	if (!b.base)
		return false;
	memcpy(b.base, &c, sizeof(c));
	m->req.data = m;
	if (raft_apply(&m->raft, &m->req, &b, 1, on_proposed) != 0) {
		raft_free(b.base);
		return false;
	}
	m->proposing = true;
	return true;
}

static void on_udp(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from,
		   unsigned flags)
{
	struct membership *m = h->data;
	struct mb_wire w;
	if (nread != (ssize_t)sizeof(w) || !from)
		return;
	memcpy(&w, buf->base, sizeof(w));
	if (w.magic != WIRE_MAGIC || w.cluster != m->cluster || w.node >= PL_MAX_NODES ||
	    !(m->members & bit(w.node)))
		return;
	uint64_t now = now_ms();
	if (w.kind == WIRE_GRANT) {
		unsigned i = (unsigned)(w.seq % SENT_RING);
		if (m->sent_seq[i] != w.seq || (m->st.out & bit(m->self)) ||
		    ck_pr_load_int(&m->leaving) >= LEAVE_DROP_ASKED)
			return;
		/* Only for the configuration this node uses, all of it
		 * applied: else it would serve under an old map. */
		if (w.epoch != m->st.epoch || w.epoch != ck_pr_load_64(&m->adopted_epoch))
			return;
		uint64_t until = m->sent_ms[i] + LEASE_MS;
		if (until * 1000000ull > ck_pr_load_64(&m->n->cc.lease_until_ns))
			set_lease(m, until);
		return;
	}
	if (w.kind == WIRE_STAY) {
		if (ck_pr_load_int(&m->leaving) == LEAVE_DRAINED)
			ck_pr_store_int(&m->leaving, LEAVE_STAYS);
		return;
	}
	if (raft_state(&m->raft) != RAFT_LEADER)
		return;
	m->heard_ms[w.node] = now;
	const uint64_t b = bit(w.node);
	if (w.kind == WIRE_ASK) {
		const bool news = m->adopted_at[w.node] != w.epoch;
		m->adopted_at[w.node] = w.epoch;
		m->ask_seq[w.node] = w.seq;
		m->ask_ms[w.node] = now;
		if (news)
			settle_step(m, now); /* all quiet now? */
		if ((m->st.out & b) || !can_grant(m, now))
			return; /* out (no lease until it rejoins), or not yet */
		m->ask_seq[w.node] = 0;
		struct mb_wire g = { .magic = WIRE_MAGIC, .kind = WIRE_GRANT,
				     .node = (uint16_t)m->self, .cluster = m->cluster, .seq = w.seq,
				     .epoch = m->st.epoch };
		udp_send(m, w.node, &g);
	} else if (w.kind == WIRE_JOIN) {
		if ((m->st.out & b) && propose(m, CMD_JOIN, w.node))
			srv_log(m->n, LOG_NOTICE, "node %u asks to rejoin: proposing it as a backup",
				w.node);
	} else if (w.kind == WIRE_REBALANCE) {
		ck_pr_store_int(&m->rebalance_asked, 1);
	} else if (w.kind == WIRE_LEAVE) {
		if (!(m->st.out & b))
			m->leave_asked |= b;
	} else if (w.kind == WIRE_READY) {
		if ((m->st.joining & b) && w.epoch == m->st.epoch && propose(m, CMD_READY, w.node))
			srv_log(m->n, LOG_NOTICE, "node %u copied its slots: proposing it ready",
				w.node);
	}
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
	struct membership *m = h->data;
	*buf = uv_buf_init(m->rbuf, sizeof(m->rbuf));
}

/*
 * The leader's way to leases under a new configuration: a takeover
 * (idempotent: a new leader may redo its predecessor's) once every live
 * node is quiet, then SETTLED. Each tick, and at once when a node says it
 * adopted the configuration or the takeover is done. True if it proposed.
 */
static bool settle_step(struct membership *m, uint64_t now)
{
	if (raft_state(&m->raft) != RAFT_LEADER || m->st.settled >= m->st.epoch)
		return false;
	if (ck_pr_load_64(&m->took_over) == m->st.epoch)
		return propose(m, CMD_SETTLED, 0);
	if (all_quiet(m, now)) {
		pthread_mutex_lock(&m->mu);
		if (m->want_takeover < m->st.epoch) {
			m->want_takeover = m->st.epoch;
			pthread_cond_broadcast(&m->cv);
		}
		pthread_mutex_unlock(&m->mu);
	}
	return false;
}

/* The leader, once it may grant again (SETTLED applied): the last lease
 * request of each node, if recent, answered now rather than at its next
 * one. Its lease counts from when it asked, as always. */
static void grant_waiting(struct membership *m, uint64_t now)
{
	if (raft_state(&m->raft) != RAFT_LEADER || !can_grant(m, now))
		return;
	for (unsigned i = 1; i < PL_MAX_NODES; i++) {
		if (!(m->members & bit(i)) || (m->st.out & bit(i)) || !m->ask_seq[i] ||
		    now - m->ask_ms[i] > RENEW_MS || m->adopted_at[i] != m->st.epoch)
			continue;
		struct mb_wire g = { .magic = WIRE_MAGIC, .kind = WIRE_GRANT,
				     .node = (uint16_t)m->self, .cluster = m->cluster,
				     .seq = m->ask_seq[i], .epoch = m->st.epoch };
		udp_send(m, i, &g);
		m->ask_seq[i] = 0;
	}
}

/* The leader, every tick: its own lease, the takeover a new configuration
 * needs, then at most one proposal: a node not heard for LEASE_MS +
 * GRACE_MS out, or the primaries back in place. */
static void leader_tick(struct membership *m, uint64_t now)
{
	if (m->raft.current_term != m->led_term) {
		/* New leader: it knows nothing of the others yet. */
		m->led_term = m->raft.current_term;
		m->granted_ms = now;
		for (unsigned i = 0; i < PL_MAX_NODES; i++) {
			m->heard_ms[i] = now;
			m->adopted_at[i] = 0;
		}
	}
	m->heard_ms[m->self] = now;
	if (can_grant(m, now)) {
		m->granted_ms = now;
		if (!(m->st.out & bit(m->self)) && m->st.epoch == ck_pr_load_64(&m->adopted_epoch) &&
		    ck_pr_load_int(&m->leaving) < LEAVE_DROP_ASKED)
			set_lease(m, now + LEASE_MS);
	} else if (now - m->granted_ms > LEASE_MS && now - m->withheld_log_ms > 2000) {
		/* Say why every node is about to stop serving. */
		m->withheld_log_ms = now;
		char who[128] = "";
		size_t len = 0;
		for (unsigned i = 1; i < PL_MAX_NODES && len < sizeof(who); i++)
			if ((m->members & bit(i)) && !(m->st.out & bit(i)) && i != m->self &&
			    m->adopted_at[i] < m->st.epoch)
				len += (size_t)snprintf(who + len, sizeof(who) - len, " %u", i);
		srv_log(m->n, LOG_WARNING, "leases withheld for %" PRIu64 " ms (configuration %"
			PRIu64 "): %s", now - m->granted_ms, m->st.epoch,
			m->st.settled < m->st.epoch ?
				(ck_pr_load_64(&m->took_over) == m->st.epoch ? "settling it" :
				 "its takeover is not done") :
			!majority_heard(m, now) ? "no majority heard from" : "nodes not on it yet:");
		if (who[0] && m->st.settled >= m->st.epoch)
			srv_log(m->n, LOG_WARNING, "  not on configuration %" PRIu64 ":%s", m->st.epoch,
				who);
	}
	if (settle_step(m, now))
		return;
	/* A node that shuts down cleanly (mb_leave) serves nothing any more
	 * and asked to be out: no need to wait for its lease. */
	m->leave_asked &= m->members & ~m->st.out;
	while (m->leave_asked) {
		unsigned i = (unsigned)__builtin_ctzll(m->leave_asked);
		if (last_copy_of(m, &m->st, i) >= 0) {
			srv_log(m->n, LOG_NOTICE, "node %u shuts down holding the last live copy of "
				"some slots: it stays in the configuration", i);
			m->leave_asked &= ~bit(i);
			struct mb_wire w = { .magic = WIRE_MAGIC, .kind = WIRE_STAY,
					     .node = (uint16_t)m->self, .cluster = m->cluster };
			if (i == m->self)
				ck_pr_store_int(&m->leaving, LEAVE_STAYS);
			else
				udp_send(m, i, &w);
			continue;
		}
		if (propose(m, CMD_OUT, i))
			srv_log(m->n, LOG_NOTICE, "node %u shuts down: proposing it out", i);
		return;
	}
	for (unsigned i = 1; i < PL_MAX_NODES; i++) {
		if (!(m->members & bit(i)) || (m->st.out & bit(i)) || i == m->self ||
		    now - m->heard_ms[i] <= LEASE_MS + GRACE_MS)
			continue;
		if (last_copy_of(m, &m->st, i) >= 0) {
			if (now - m->last_copy_log_ms[i] > 10000) {
				m->last_copy_log_ms[i] = now;
				srv_log(m->n, LOG_WARNING, "node %u silent for %" PRIu64 " ms, but it "
					"holds the last live copy of some slots: it stays in (they "
					"wait for it)", i, now - m->heard_ms[i]);
			}
			continue;
		}
		if (propose(m, CMD_OUT, i))
			srv_log(m->n, LOG_WARNING, "node %u silent for %" PRIu64 " ms: proposing it "
				"out", i, now - m->heard_ms[i]);
		return;
	}
	/* Primaries back in place once every rejoined node has copied
	 * everything (auto-rebalance), or when RCKV REBALANCE asks. */
	bool asked = ck_pr_load_int(&m->rebalance_asked);
	if (m->st.late &&
	    (asked || (!m->st.joining && ck_pr_load_8((uint8_t *)&m->n->cfg.auto_rebalance))) &&
	    propose(m, CMD_REBALANCE, 0)) {
		ck_pr_store_int(&m->rebalance_asked, 0);
		srv_log(m->n, LOG_NOTICE, "moving primaries back to their nodes (%s)",
			asked ? "RCKV REBALANCE" : "auto-rebalance");
	}
}

static void on_transferred(struct raft_transfer *req)
{
	struct membership *m = req->data;
	m->transferring = false;
	if (raft_state(&m->raft) == RAFT_LEADER)
		m->transfer_failed = true; /* leave as the leader, then */
}

/* mb_leave, once this node serves nothing (LEAVE_DRAINED): ask the leader
 * to take it out. The leader first hands its leadership to another node,
 * so its exit costs the others no election; the new leader takes it out
 * as it would a follower. */
static void leave_step(struct membership *m)
{
	if (ck_pr_load_int(&m->leaving) != LEAVE_DRAINED || (m->st.out & bit(m->self)))
		return;
	raft_id lid = 0;
	const char *laddr = NULL;
	raft_leader(&m->raft, &lid, &laddr);
	if (raft_state(&m->raft) == RAFT_LEADER) {
		if (m->transferring || (m->leave_asked & bit(m->self)))
			return;
		/* To a node that is in, answers, and is not leaving too. */
		unsigned to = 0;
		uint64_t now = now_ms();
		for (unsigned i = 1; i < PL_MAX_NODES && !to; i++)
			if ((m->members & bit(i)) && i != m->self &&
			    !((m->st.out | m->leave_asked) & bit(i)) &&
			    now - m->heard_ms[i] < LEASE_MS)
				to = i;
		m->transfer.data = m;
		if (!to || m->transfer_failed ||
		    raft_transfer(&m->raft, &m->transfer, to, on_transferred) != 0)
			m->leave_asked |= bit(m->self);
		else
			m->transferring = true;
	} else if (lid && lid < PL_MAX_NODES) {
		struct mb_wire w = { .magic = WIRE_MAGIC, .kind = WIRE_LEAVE,
				     .node = (uint16_t)m->self, .cluster = m->cluster };
		udp_send(m, (unsigned)lid, &w);
	}
}

static const char *role_name(int state)
{
	switch (state) {
	case RAFT_LEADER: return "leader";
	case RAFT_FOLLOWER: return "follower";
	case RAFT_CANDIDATE: return "candidate";
	default: return "unavailable";
	}
}

/* A follower's lease request, saying which configuration it uses. */
static void send_ask(struct membership *m, unsigned leader, uint64_t now)
{
	m->seq++;
	unsigned i = (unsigned)(m->seq % SENT_RING);
	m->sent_ms[i] = now;
	m->sent_seq[i] = m->seq;
	struct mb_wire w = { .magic = WIRE_MAGIC, .kind = WIRE_ASK, .node = (uint16_t)m->self,
			     .cluster = m->cluster, .seq = m->seq,
			     .epoch = ck_pr_load_64(&m->adopted_epoch) };
	udp_send(m, leader, &w);
}

static void on_tick(uv_timer_t *t)
{
	struct membership *m = t->data;
	uint64_t now = now_ms();
	int state = raft_state(&m->raft);
	raft_id lid = 0;
	const char *laddr = NULL;
	raft_leader(&m->raft, &lid, &laddr);
	if (lid >= PL_MAX_NODES)
		lid = 0;
	const int leaving = ck_pr_load_int(&m->leaving);
	leave_step(m);
	if (state == RAFT_LEADER) {
		leader_tick(m, now);
	} else if (lid && leaving < LEAVE_DROP_ASKED) {
		send_ask(m, (unsigned)lid, now);
	}
	if (state != RAFT_LEADER && lid && ck_pr_load_int(&m->rebalance_asked)) {
		struct mb_wire w = { .magic = WIRE_MAGIC, .kind = WIRE_REBALANCE,
				     .node = (uint16_t)m->self, .cluster = m->cluster };
		udp_send(m, (unsigned)lid, &w);
		ck_pr_store_int(&m->rebalance_asked, 0);
	}
	uint32_t ask = ck_pr_load_32(&m->rejoin_ask);
	if (ask && lid) {
		struct mb_wire w = { .magic = WIRE_MAGIC, .kind = (uint16_t)ask,
				     .node = (uint16_t)m->self, .cluster = m->cluster,
				     .epoch = ck_pr_load_64(&m->rejoin_epoch) };
		if (state == RAFT_LEADER) { /* to itself, as to anyone */
			uv_buf_t b = uv_buf_init((char *)&w, sizeof(w));
			on_udp(&m->udp, sizeof(w), &b, (const struct sockaddr *)&m->sa[m->self], 0);
		} else {
			udp_send(m, (unsigned)lid, &w);
		}
	}
	/* What cc_run does without a lease: wait for one (a failover is
	 * brief), or refuse at once: this node is out, or no leader has been
	 * known for a while (no majority: it may not come back soon). */
	if (lid)
		m->no_leader_since = 0;
	else if (!m->no_leader_since)
		m->no_leader_since = now;
	uint32_t refuse = leaving != LEAVE_NONE ? REFUSE_LEAVING :
			  (m->st.out & bit(m->self)) ? REFUSE_OUT :
			  m->no_leader_since && now - m->no_leader_since > NO_LEADER_MS ?
				  REFUSE_NO_LEADER : REFUSE_NONE;
	ck_pr_store_32(&m->n->cc.config_refuse, refuse);
	pthread_mutex_lock(&m->mu);
	m->view.role = role_name(state);
	m->view.leader = (unsigned)lid;
	m->view.term = m->raft.current_term;
	pthread_mutex_unlock(&m->mu);
}

/* ---- start and stop (Raft thread) ---- */

static void on_closed_handle(uv_handle_t *h)
{
	(void)h;
}

static void on_raft_closed(struct raft *r)
{
	struct membership *m = r->data;
	raft_uv_close(&m->io);
	raft_uv_tcp_close(&m->transport);
	uv_close((uv_handle_t *)&m->tick, on_closed_handle);
	uv_close((uv_handle_t *)&m->udp, on_closed_handle);
	uv_close((uv_handle_t *)&m->wake, on_closed_handle);
}

static void on_wake(uv_async_t *a)
{
	struct membership *m = a->data;
	if (ck_pr_load_int(&m->leaving) == LEAVE_ASKED) {
		ck_pr_store_32(&m->n->cc.config_refuse, REFUSE_LEAVING);
		ck_pr_store_int(&m->leaving, LEAVE_REFUSING);
	}
	if (ck_pr_load_int(&m->leaving) == LEAVE_DROP_ASKED) {
		/* On this thread, which alone takes grants: no lease from now. */
		set_lease(m, 0);
		ck_pr_store_int(&m->leaving, LEAVE_DROPPED);
	}
	leave_step(m);
	if (ck_pr_fas_int(&m->nudged, 0)) {
		/* A configuration adopted here, or a takeover done: tell the
		 * leader now rather than at the next tick. */
		raft_id lid = 0;
		const char *laddr = NULL;
		raft_leader(&m->raft, &lid, &laddr);
		if (raft_state(&m->raft) == RAFT_LEADER)
			settle_step(m, now_ms());
		else if (lid && lid < PL_MAX_NODES && ck_pr_load_int(&m->leaving) < LEAVE_DROP_ASKED)
			send_ask(m, (unsigned)lid, now_ms());
	}
	if (!ck_pr_load_int(&m->stop))
		return;
	uv_timer_stop(&m->tick);
	uv_udp_recv_stop(&m->udp);
	raft_close(&m->raft, on_raft_closed);
}

static void *raft_main(void *arg)
{
	struct membership *m = arg;
	pthread_setname_np(pthread_self(), "rckv-raft");
	srv_block_async_signals(); /* signals are the main thread's, faults not (sigbus.h) */
	uv_run(&m->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* ---- adoption and takeover (configuration thread) ---- */

static struct pl_map *map_of(struct membership *m, const struct mb_state *st)
{
	return pl_map_derive(m->base, st->out, st->late, st->joining, st->epoch);
}

static void adopt(struct membership *m, const struct mb_state *st)
{
	struct node *n = m->n;
	struct fab *f = n->cc.fab;
	/* Fenced first: a transaction waiting on a node that is out fails
	 * now, so the quiesce below does not wait for it. A node that came
	 * back (joining) is reachable again. */
	for (unsigned i = 1; i < PL_MAX_NODES; i++) {
		if (i == m->self)
			continue;
		if ((st->out & bit(i)) && !fab_fenced(f, (uint16_t)i))
			fab_fence(f, (uint16_t)i);
		else if (!(st->out & bit(i)) && fab_fenced(f, (uint16_t)i))
			fab_unfence(f, (uint16_t)i);
	}
	struct pl_map *pm = map_of(m, st);
	if (!pm) {
		srv_log(n, LOG_WARNING, "configuration %" PRIu64 ": out of memory for its map; "
			"retrying", st->epoch);
		return;
	}
	cc_quiesce_begin(&n->cc, NULL);
	/* Nothing runs under the new map before the leader grants a lease
	 * for it, which it does once no node runs under the old one. */
	set_lease(m, 0);
	pl_table_lock(&n->cc.place);
	const struct pl_map *old = pl_table_current(&n->cc.place);
	pthread_mutex_lock(&m->promoted_mu);
	for (unsigned s = 0; s < PL_SLOTS; s++)
		if (pl_slot_primary(pm, s) == m->self && pl_slot_primary(old, s) != m->self)
			m->promoted[s / 8] |= (uint8_t)(1u << (s % 8));
	pthread_mutex_unlock(&m->promoted_mu);
	pl_table_unlock(&n->cc.place);
	pl_publish(&n->cc.place, pm);
	ck_pr_store_64(&n->cc.config_epoch, st->epoch);
	/* Cached addresses may name a node that is out (cc/exec.c clears a
	 * worker's cache when this moves). */
	ck_pr_inc_64(&n->cc.flush_epoch);
	cc_quiesce_end(&n->cc);
	m->adopted = *st;
	ck_pr_store_64(&m->adopted_epoch, st->epoch);
	ck_pr_inc_64(&m->failovers);
	srv_log(n, LOG_NOTICE, "configuration %" PRIu64 " adopted: %d of %d nodes in it%s",
		st->epoch, __builtin_popcountll(m->members & ~st->out),
		__builtin_popcountll(m->members),
		(st->out & bit(m->self)) ? "; this node is out and serves nothing" : "");
}

/* The leader's takeover for configuration `epoch`: every out node's
 * transactions settled, every node's newly promoted items reset
 * (idempotent: a new leader does it again); then leases may be granted. */
static void takeover(struct membership *m, const struct mb_state *st)
{
	char err[256] = "";
	uint64_t t0 = now_ms();
	if (cluster_takeover(m->n, st->out, m->members & ~st->out, err, sizeof(err)) != 0) {
		srv_log(m->n, LOG_WARNING, "takeover for configuration %" PRIu64 " not done: %s; "
			"retrying", st->epoch, err);
		return;
	}
	ck_pr_store_64(&m->took_over, st->epoch);
	srv_log(m->n, now_ms() - t0 > 500 ? LOG_NOTICE : LOG_VERBOSE,
		"takeover for configuration %" PRIu64 " done in %" PRIu64 " ms", st->epoch,
		now_ms() - t0);
}

struct promoted {
	const uint8_t *slots;
};

static bool is_promoted(void *arg, const char *key, uint32_t klen)
{
	const struct promoted *p = arg;
	unsigned s = pl_keyslot(key, klen);
	return p->slots[s / 8] & (1u << (s % 8));
}

void mb_takeover_local(struct node *n, unsigned dead, const uint64_t *decided)
{
	struct membership *m = n->membership;
	if (dead) {
		srv_takeover_settle(n, dead, decided);
		return;
	}
	if (!m)
		return;
	static const uint8_t none[PL_SLOTS / 8];
	pthread_mutex_lock(&m->promoted_mu);
	if (!memcmp(m->promoted, none, sizeof(none))) {
		pthread_mutex_unlock(&m->promoted_mu);
		return;
	}
	struct promoted p = { m->promoted };
	uint64_t reset = st_reset_meta_if(n->cc.region, is_promoted, &p);
	memset(m->promoted, 0, sizeof(m->promoted));
	pthread_mutex_unlock(&m->promoted_mu);
	srv_log(n, LOG_NOTICE, "%" PRIu64 " items whose slots this node now serves as primary "
		"start with fresh protocol metadata", reset);
}

/* ---- rejoin (configuration thread) ---- */

struct copy_batch {
	struct cc_key keys[COPY_TXN];
	int n;
	int rc;
};

/* The body of a copying transaction: each key read on its primary and
 * written back as it is, so every replica's copy, this node's included,
 * gets it (cc/repl.c). An absent key is left absent. */
static int copy_body(struct txn *t, void *arg)
{
	struct copy_batch *b = arg;
	for (int i = 0; i < b->n; i++) {
		const char *v;
		size_t vlen;
		bool found;
		struct txn_meta m;
		int rc = txn_get_meta(t, b->keys[i].p, b->keys[i].len, &v, &vlen, &found, &m);
		if (rc)
			return rc;
		if (!found)
			continue;
		char *copy = malloc(vlen ? vlen : 1);
		if (!copy)
			return CC_EFULL;
		memcpy(copy, v, vlen);
		rc = txn_set_meta(t, b->keys[i].p, b->keys[i].len, copy, vlen, &m);
		free(copy);
		if (rc)
			return rc;
	}
	return CC_OK;
}

static void copy_on_worker(struct worker *w, void *arg)
{
	struct copy_batch *b = arg;
	const struct cc_txn tx = { .keys = b->keys, .nkeys = b->n, .body = copy_body, .arg = b };
	b->rc = cc_run(w->ccw, &tx);
}

struct copy_run {
	struct membership *m;
	struct copy_batch b;
	int rc;
	uint64_t copied;
};

static int copy_flush(struct copy_run *c)
{
	if (c->b.n == 0)
		return 0;
	struct node *n = c->m->n;
	struct worker *w = n->workers[c->copied % (uint64_t)n->nworkers];
	int rc = worker_call(w, copy_on_worker, &c->b);
	if (rc == 0)
		rc = c->b.rc;
	if (rc > 0 || rc == CC_ETIMEOUT) {
		/* Hot keys abort a many-key copy under the timestamp-ordered and
		 * multiversion protocols: copy them one per transaction. */
		struct copy_batch one = { .n = 1 };
		rc = 0;
		for (int i = 0; i < c->b.n && rc == 0; i++) {
			one.keys[0] = c->b.keys[i];
			rc = worker_call(w, copy_on_worker, &one);
			if (rc == 0)
				rc = one.rc;
		}
		if (rc)
			srv_log(n, LOG_NOTICE, "rejoin copy: a transaction failed: %s; retrying",
				cc_strerror(rc));
	}
	for (int i = 0; i < c->b.n; i++)
		free((void *)c->b.keys[i].p);
	c->copied += (uint64_t)c->b.n;
	c->b.n = 0;
	return rc;
}

/* A key listed by a peer (its primary): copy it if this node holds its slot. */
static int copy_key(void *arg, const char *key, size_t klen)
{
	struct copy_run *c = arg;
	const struct pl_set *set = pl_slot_set(c->m->base, pl_keyslot(key, klen));
	bool mine = false;
	for (int r = 0; r < set->n; r++)
		mine |= set->node[r] == c->m->self;
	if (!mine)
		return 0;
	char *k = malloc(klen ? klen : 1);
	if (!k) {
		c->rc = -ENOMEM;
		return 1;
	}
	memcpy(k, key, klen);
	c->b.keys[c->b.n++] = (struct cc_key){ .p = k, .len = (uint32_t)klen,
					       .access = CC_KEY_READ | CC_KEY_WRITE };
	if (c->b.n == COPY_TXN && (c->rc = copy_flush(c)) != 0)
		return 1;
	return 0;
}

/*
 * Copy every key of this node's slots from the nodes that list them (their
 * primaries) through transactions, while others go on. 0 when all of it
 * was copied under configuration `epoch`; else try again.
 */
static int copy_slots(struct membership *m, uint64_t epoch, uint64_t live)
{
	struct copy_run c = { .m = m };
	for (unsigned id = 1; id < PL_MAX_NODES && c.rc == 0; id++) {
		if (!(live & bit(id)) || id == m->self)
			continue;
		uint64_t cursor = 0;
		do {
			char err[256] = "";
			if (cluster_scan_node(m->n, id, &cursor, COPY_BATCH, copy_key, &c, err,
					      sizeof(err)) != 0) {
				srv_log(m->n, LOG_NOTICE, "rejoin copy: %s", err);
				c.rc = -EAGAIN;
			}
			if (c.rc == 0 && ck_pr_load_64(&m->adopted_epoch) != epoch)
				c.rc = -EAGAIN; /* the sets moved: start over */
		} while (cursor && c.rc == 0 && !ck_pr_load_int(&m->stop));
	}
	if (c.rc == 0)
		c.rc = copy_flush(&c);
	for (int i = 0; i < c.b.n; i++)
		free((void *)c.b.keys[i].p);
	ck_pr_store_64(&m->copied_keys, c.copied);
	return ck_pr_load_int(&m->stop) ? -ESHUTDOWN : c.rc;
}

/* This node's part of its rejoin, at each wake-up of the configuration
 * thread. */
static void rejoin_step(struct membership *m, const struct mb_state *st)
{
	struct node *n = m->n;
	const uint64_t me = bit(m->self);
	if (st->epoch != ck_pr_load_64(&m->adopted_epoch) || !n->workers ||
	    ck_pr_load_int(&m->leaving) != LEAVE_NONE)
		return; /* (a node that shuts down keeps its region as it is) */
	if (st->out & me) {
		if (m->rejoin != REJOIN_ASKING) {
			/* Its copies are stale, and others own its slots: empty
			 * the region before it is written again. Nobody reaches
			 * it (every live node fenced it), nothing runs here (no
			 * lease). */
			cc_quiesce_begin(&n->cc, NULL);
			st_wipe(n->cc.region);
			calvin_reset(&n->cc); /* whatever the protocol, as cc_peer_restarted */
			ck_pr_inc_64(&n->cc.flush_epoch);
			cc_quiesce_end(&n->cc);
			srv_log(n, LOG_WARNING, "this node is out of configuration %" PRIu64 ": its "
				"MemStore was emptied; asking to rejoin as a backup", st->epoch);
			m->rejoin = REJOIN_ASKING;
			ck_pr_store_32(&m->rejoin_ask, WIRE_JOIN);
		}
		return;
	}
	if (st->joining & me) {
		if (m->rejoin == REJOIN_READY && ck_pr_load_64(&m->rejoin_epoch) == st->epoch)
			return; /* READY asked (each tick) for this configuration */
		ck_pr_store_32(&m->rejoin_ask, 0);
		if (now_ms() < m->retry_ms || now_ms() >= ck_pr_load_64(&n->cc.lease_until_ns) / 1000000ull)
			return; /* no lease yet: the copy's transactions would wait */
		m->rejoin = REJOIN_COPYING;
		uint64_t t0 = now_ms();
		int rc = copy_slots(m, st->epoch, m->members & ~st->out & ~st->joining);
		if (rc) {
			m->retry_ms = now_ms() + 500;
			return;
		}
		srv_log(n, LOG_NOTICE, "rejoin: %" PRIu64 " keys copied in %" PRIu64 " ms; asking to "
			"count as a replica", ck_pr_load_64(&m->copied_keys), now_ms() - t0);
		m->rejoin = REJOIN_READY;
		ck_pr_store_64(&m->rejoin_epoch, st->epoch);
		ck_pr_store_32(&m->rejoin_ask, WIRE_READY);
		return;
	}
	m->rejoin = REJOIN_NONE;
	ck_pr_store_32(&m->rejoin_ask, 0);
}

/* The configuration thread has news for the Raft thread (on_wake). */
static void nudge(struct membership *m)
{
	ck_pr_store_int(&m->nudged, 1);
	uv_async_send(&m->wake);
}

static void *adopter_main(void *arg)
{
	struct membership *m = arg;
	pthread_setname_np(pthread_self(), "rckv-config");
	srv_block_async_signals();
	pthread_mutex_lock(&m->mu);
	while (!ck_pr_load_int(&m->stop)) {
		struct mb_state st = m->applied;
		uint64_t want = m->want_takeover;
		pthread_mutex_unlock(&m->mu);
		if (st.epoch > ck_pr_load_64(&m->adopted_epoch)) {
			adopt(m, &st);
			nudge(m);
		} else if (want == st.epoch && st.settled < want &&
			   ck_pr_load_64(&m->took_over) < want) {
			takeover(m, &st);
			nudge(m);
			pthread_mutex_lock(&m->mu);
			if (ck_pr_load_64(&m->took_over) < want)
				m->want_takeover = 0; /* the next tick asks again */
			pthread_mutex_unlock(&m->mu);
		}
		rejoin_step(m, &st);
		pthread_mutex_lock(&m->mu);
		if (m->applied.epoch == ck_pr_load_64(&m->adopted_epoch) &&
		    (m->want_takeover != m->applied.epoch ||
		     ck_pr_load_64(&m->took_over) >= m->want_takeover) &&
		    !ck_pr_load_int(&m->stop)) {
			/* Woken by a change, or every 200 ms for the rejoin. */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&m->cv, &m->mu, &ts);
		}
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

/* ---- the API ---- */

static int resolve_udp(struct membership *m, unsigned id, char *err, size_t errlen)
{
	char host[128];
	const char *colon = strrchr(m->addr[id], ':');
	snprintf(host, sizeof(host), "%.*s", (int)(colon - m->addr[id]), m->addr[id]);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *res;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
		snprintf(err, errlen, "raft address '%s' of node %u: cannot resolve", m->addr[id],
			 id);
		return -1;
	}
	memcpy(&m->sa[id], res->ai_addr, res->ai_addrlen);
	m->sa_ok[id] = true;
	freeaddrinfo(res);
	return 0;
}

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(path, 0755);
		*p = '/';
		if (rc != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int open_raft(struct membership *m, char *err, size_t errlen)
{
	struct node *n = m->n;
	int rc;
	if (uv_loop_init(&m->loop) != 0) {
		snprintf(err, errlen, "raft: cannot make its event loop");
		return -1;
	}
	if ((rc = raft_uv_tcp_init(&m->transport, &m->loop)) != 0 ||
	    (rc = raft_uv_init(&m->io, &m->loop, m->dir, &m->transport)) != 0) {
		snprintf(err, errlen, "raft: cannot open %s: %s", m->dir, raft_strerror(rc));
		return -1;
	}
	m->fsm = (struct raft_fsm){ .version = 1, .data = m, .apply = fsm_apply,
				    .snapshot = fsm_snapshot, .restore = fsm_restore };
	if ((rc = raft_init(&m->raft, &m->io, &m->fsm, m->self, m->addr[m->self])) != 0) {
		snprintf(err, errlen, "raft: %s", raft_errmsg(&m->raft));
		return -1;
	}
	m->raft.data = m;
	struct raft_configuration conf;
	raft_configuration_init(&conf);
	for (unsigned i = 1; i < PL_MAX_NODES; i++)
		if ((m->members & (1ull << i)) &&
		    raft_configuration_add(&conf, i, m->addr[i], RAFT_VOTER) != 0) {
			raft_configuration_close(&conf);
			snprintf(err, errlen, "raft: out of memory");
			return -1;
		}
	rc = raft_bootstrap(&m->raft, &conf);
	raft_configuration_close(&conf);
	if (rc != 0 && rc != RAFT_CANTBOOTSTRAP) { /* CANTBOOTSTRAP: state kept from before */
		snprintf(err, errlen, "raft: cannot create its state in %s: %s", m->dir,
			 raft_errmsg(&m->raft));
		return -1;
	}
	raft_set_heartbeat_timeout(&m->raft, HEARTBEAT_MS);
	raft_set_election_timeout(&m->raft, ELECTION_MS);
	raft_set_pre_vote(&m->raft, true); /* a node back from a pause does not depose the leader */
	if ((rc = raft_start(&m->raft)) != 0) {
		snprintf(err, errlen, "raft: cannot start: %s (%s)", raft_errmsg(&m->raft), m->dir);
		return -1;
	}
	uv_timer_init(&m->loop, &m->tick);
	m->tick.data = m;
	uv_timer_start(&m->tick, on_tick, RENEW_MS, RENEW_MS);
	uv_async_init(&m->loop, &m->wake, on_wake);
	m->wake.data = m;
	uv_udp_init(&m->loop, &m->udp);
	m->udp.data = m;
	if ((rc = uv_udp_bind(&m->udp, (const struct sockaddr *)&m->sa[m->self], 0)) != 0 ||
	    (rc = uv_udp_recv_start(&m->udp, on_alloc, on_udp)) != 0) {
		snprintf(err, errlen, "raft: cannot bind the lease socket at %s: %s",
			 m->addr[m->self], uv_strerror(rc));
		return -1;
	}
	(void)n;
	return 0;
}

int mb_start(struct node *n, char *err, size_t errlen)
{
	const struct srv_config *c = &n->cfg;
	if (c->ncluster_nodes == 0 || c->replicas < 2)
		return 0;
	struct membership *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->n = n;
	m->self = (unsigned)c->node_id;
	m->cluster = cluster_id_of(n);
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	m->st.epoch = 1;
	m->st.settled = 1;
	m->applied_ms = now_ms();
	m->applied = m->st;
	m->adopted = m->st;
	m->adopted_epoch = 1;
	pthread_mutex_init(&m->promoted_mu, NULL);
	m->view.role = "unavailable";
	uint16_t ids[PL_MAX_NODES];
	int nids = 0;
	for (int i = 0; i < c->ncluster_nodes; i++) {
		unsigned id = (unsigned)c->cluster_nodes[i].id;
		m->members |= 1ull << id;
		ids[nids++] = (uint16_t)id;
		snprintf(m->addr[id], sizeof(m->addr[id]), "%s", c->cluster_nodes[i].raft);
		if (resolve_udp(m, id, err, errlen) != 0)
			goto fail;
	}
	m->base = pl_map_spread(ids, nids, c->replicas, 1);
	if (!m->base) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(m->dir, sizeof(m->dir), "%s/raft-%016" PRIx64 "-node%u", c->dir, m->cluster,
		 m->self);
	if (mkdirs(m->dir) != 0) {
		snprintf(err, errlen, "can't create the Raft directory '%s': %s", m->dir,
			 strerror(errno));
		goto fail;
	}
	set_lease(m, 0); /* nothing is served before the first lease */
	fab_set_lease(n->cc.fab, &n->cc.lease_until_ns);
	ck_pr_store_64(&n->cc.config_epoch, 1);
	n->membership = m;
	if (open_raft(m, err, errlen) != 0)
		goto fail;
	if (pthread_create(&m->thread, NULL, raft_main, m) != 0) {
		snprintf(err, errlen, "can't start the Raft thread");
		goto fail;
	}
	m->running = true;
	if (pthread_create(&m->adopter, NULL, adopter_main, m) != 0) {
		snprintf(err, errlen, "can't start the configuration thread");
		goto fail;
	}
	m->adopting = true;
	srv_log(n, LOG_NOTICE, "configuration: Raft group of %d nodes at %s (state in %s); "
		"waiting for a lease", nids, m->addr[m->self], m->dir);
	/* Serve with a lease from the start: wait for the group to elect a
	 * leader and grant one, or to say this node is out. */
	uint64_t until = now_ms() + START_WAIT_MS;
	while (now_ms() < until) {
		uint64_t l = ck_pr_load_64(&n->cc.lease_until_ns);
		pthread_mutex_lock(&m->mu);
		bool out = m->applied.out & (1ull << m->self);
		pthread_mutex_unlock(&m->mu);
		if (l > 1 || out)
			break;
		sleep_ms(20);
	}
	struct mb_view v;
	mb_view(m, &v);
	srv_log(n, LOG_NOTICE, "configuration %" PRIu64 ": %s, leader node %u%s", v.epoch, v.role,
		v.leader, v.lease_ms_left ? "" : "; no lease yet: transactions are refused");
	return 0;
fail:
	mb_stop(n);
	return -1;
}

void mb_stop(struct node *n)
{
	struct membership *m = n->membership;
	if (!m)
		return;
	ck_pr_store_int(&m->stop, 1);
	pthread_mutex_lock(&m->mu);
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	if (m->adopting)
		pthread_join(m->adopter, NULL);
	if (m->running) {
		uv_async_send(&m->wake);
		pthread_join(m->thread, NULL);
		uv_loop_close(&m->loop);
	}
	pl_map_free(m->base);
	n->membership = NULL;
	fab_set_lease(n->cc.fab, NULL);
	ck_pr_store_64(&n->cc.lease_until_ns, 0);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->promoted_mu);
	free(m);
}

void mb_view(struct membership *m, struct mb_view *v)
{
	pthread_mutex_lock(&m->mu);
	*v = m->view;
	v->epoch = m->applied.epoch;
	v->out = m->applied.out;
	v->joining = m->applied.joining;
	v->late = m->applied.late;
	pthread_mutex_unlock(&m->mu);
	v->copied_keys = ck_pr_load_64(&m->copied_keys);
	v->adopted = ck_pr_load_64(&m->adopted_epoch);
	v->failovers = ck_pr_load_64(&m->failovers);
	uint64_t l = ck_pr_load_64(&m->n->cc.lease_until_ns) / 1000000ull, now = now_ms();
	v->lease_ms_left = l > now ? l - now : 0;
}

void mb_refusal(struct membership *m, char *buf, size_t cap)
{
	struct mb_view v;
	mb_view(m, &v);
	int members = __builtin_popcountll(m->members);
	if (ck_pr_load_int(&m->leaving) != LEAVE_NONE)
		snprintf(buf, cap, "CLUSTERDOWN this node is shutting down: the other nodes take "
			 "its slots over");
	else if (v.out & (1ull << m->self))
		snprintf(buf, cap, "CLUSTERDOWN this node is out of the cluster's configuration "
			 "(epoch %" PRIu64 "): another node serves its slots", v.epoch);
	else if (v.adopted < v.epoch)
		snprintf(buf, cap, "TRYAGAIN the cluster's configuration is changing (epoch %" PRIu64
			 ")", v.epoch);
	else
		snprintf(buf, cap, "CLUSTERDOWN no lease: this node cannot reach the Raft leader of "
			 "a majority of the %d nodes (%d needed)", members, members / 2 + 1);
}

/* mb_leave: has the configuration without this node been applied here
 * (and settled, when this node leads: its takeover is this node's)? */
static bool left(struct membership *m)
{
	pthread_mutex_lock(&m->mu);
	struct mb_state st = m->applied;
	bool leads = m->view.leader == m->self;
	pthread_mutex_unlock(&m->mu);
	return (st.out & bit(m->self)) && ck_pr_load_64(&m->adopted_epoch) >= st.epoch &&
	       (!leads || st.settled >= st.epoch);
}

/* mb_leave: ask the Raft thread for step `asked`, and wait for it. */
static int leave_await(struct membership *m, int asked, uint64_t end)
{
	ck_pr_store_int(&m->leaving, asked);
	uv_async_send(&m->wake);
	while (ck_pr_load_int(&m->leaving) == asked && now_ms() < end)
		sleep_ms(5);
	if (ck_pr_load_int(&m->leaving) != asked)
		return 0;
	srv_log(m->n, LOG_WARNING, "shutdown: the Raft thread did not answer; the others take "
		"this node out after its lease");
	return -1;
}

void mb_leave(struct node *n)
{
	struct membership *m = n->membership;
	if (!m || !m->running)
		return;
	pthread_mutex_lock(&m->mu);
	struct mb_state st = m->applied;
	pthread_mutex_unlock(&m->mu);
	if (st.out & bit(m->self))
		return;
	if (last_copy_of(m, &st, m->self) >= 0) {
		srv_log(n, LOG_NOTICE, "shutdown: this node holds the last live copy of some slots; "
			"they wait for it to restart");
		return;
	}
	uint64_t t0 = now_ms(), end = t0 + LEAVE_WAIT_MS;
	/* 1. Every new transaction refused (cc_wait_lease, and cc_run once
	 * entered); then those in flight end, under the lease this node
	 * still renews: nothing of this node's is left in doubt. */
	if (leave_await(m, LEAVE_ASKED, end))
		return;
	cc_quiesce_begin(&n->cc, NULL);
	cc_quiesce_end(&n->cc);
	/* 2. No lease from now (the Raft thread drops it): nothing of this
	 * node's reaches another node any more. */
	if (leave_await(m, LEAVE_DROP_ASKED, end))
		return;
	/* 3. Out, by the leader (asked now, and at each tick). */
	ck_pr_store_int(&m->leaving, LEAVE_DRAINED);
	uv_async_send(&m->wake);
	while (!left(m) && ck_pr_load_int(&m->leaving) != LEAVE_STAYS && now_ms() < end)
		sleep_ms(20);
	if (ck_pr_load_int(&m->leaving) == LEAVE_STAYS)
		srv_log(n, LOG_NOTICE, "shutdown: the other copies of some of this node's slots are "
			"out: it stays in the configuration, and they wait for it to restart");
	else if (left(m))
		srv_log(n, LOG_NOTICE, "shutdown: slots handed over to the other nodes in %" PRIu64
			" ms (configuration %" PRIu64 ")", now_ms() - t0,
			ck_pr_load_64(&m->adopted_epoch));
	else
		srv_log(n, LOG_WARNING, "shutdown: not taken out within %d ms (no leader?); the "
			"others take this node out after its lease", LEAVE_WAIT_MS);
}

void mb_rebalance(struct membership *m)
{
	ck_pr_store_int(&m->rebalance_asked, 1);
}

/*
 * membership: the cluster's configuration in a Raft group, and the leases
 * that tell its leader which nodes live (DESIGN.md section 7). Runs on a
 * cluster with `replicas` 2 or more, where a dead node's slots have a
 * copy to fail over to.
 *
 * The configuration is a replicated state machine (libraft, Debian's
 * libraft-dev, on its libuv I/O backend, in a thread of its own): an epoch
 * and the set of nodes out of it. Every node applies the same log, so
 * every node derives the same slot map from it: the cluster file's map
 * with the nodes out removed from every replica set (pl_map_without), so
 * a slot whose primary is out is served by its first live backup. Every
 * member of the cluster file is a Raft voter; the group decides while a
 * majority of them is up.
 *
 * Leases. Every RENEW_MS each node asks the Raft leader for a lease (UDP,
 * at the raft address); the leader grants it to a node that is not out,
 * and the node serves transactions until the time it asked plus LEASE_MS.
 * The leader proposes "node X out" once it has not heard X for LEASE_MS +
 * GRACE_MS: by then X's own lease has run out (it counted from an earlier
 * time), so X has stopped serving, even if it is only hung (SIGSTOP) and
 * wakes later: it finds itself without a lease, then out of the
 * configuration, and refuses everything. GRACE_MS is the election timeout:
 * a deposed leader that still grants leases loses its leadership within
 * that time, so no lease it granted outlives the moment its successor may
 * take the node out.
 *
 * Adopting a configuration (each node, on its own thread): fence the
 * nodes out (rdma/fab.h fab_fence: nothing touches them, what was in
 * flight to them fails), quiesce, publish the new map, clear address
 * caches, resume.
 *
 * Rejoin: a node that restarts and finds itself out empties its region,
 * asks to rejoin (JOIN: the last backup of its sets, written by every
 * commit, never primary), copies its slots' keys from their primaries by
 * transactions while the others serve, then asks to count (READY); the
 * leader then moves the primaries back (REBALANCE, at once with
 * auto-rebalance, else on RCKV REBALANCE).
 */
#ifndef RCKV_SRV_MEMBERSHIP_H
#define RCKV_SRV_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node;
struct membership;

/* What INFO cluster and RCKV NODES show (mb_view). */
struct mb_view {
	const char *role;       /* "leader", "follower", "candidate", "unavailable" */
	unsigned leader;        /* node id, 0: none known */
	uint64_t term;
	uint64_t epoch;         /* the configuration applied here */
	uint64_t adopted;       /* the configuration whose map this node uses */
	uint64_t out;           /* bit per node id: out of the configuration */
	uint64_t joining;       /* rejoined, copying its slots: written, never primary */
	uint64_t late;          /* copied, not yet back in place (a rebalance moves it) */
	uint64_t copied_keys;   /* this node's last rejoin copy */
	uint64_t lease_ms_left; /* this node's lease, 0: none */
	uint64_t failovers;     /* configurations adopted since start */
};

/*
 * mb_start - with cfg.replicas > 1 in a cluster: open (or create and
 * bootstrap) the Raft state under `dir`, start the Raft and adoption
 * threads. Main thread, after cluster_start (the peers are attached and
 * the first map is published), before the workers serve. 0, or -1 with
 * err. Without replicas it does nothing and leaves n->membership NULL.
 */
int mb_start(struct node *n, char *err, size_t errlen);
void mb_stop(struct node *n);

void mb_view(struct membership *m, struct mb_view *v);

/*
 * mb_leave - a clean shutdown's hand-over (SIGTERM, SHUTDOWN), before the
 * workers stop: this node stops serving (every transaction refused, its
 * lease dropped, what was in flight ended), asks the leader to take it
 * out, and waits, at most 5 s, until the configuration without it is
 * applied (and settled, when it leads). Its slots are served elsewhere a
 * Raft commit after the shutdown began, not a lease later; it rejoins
 * when it restarts, as after a crash. Main thread. Without replicas, or
 * when the node is out, nothing happens.
 */
void mb_leave(struct node *n);

/* This node's part of the takeover of `dead` (cluster_takeover): settle
 * its transactions here (server/recovery.c), then clear the protocol's
 * metadata words of the items this node serves as the primary of an out
 * node's slots: a backup's copy never had them (cc/repl.c invariant (2)),
 * and no transaction runs anywhere during a takeover, so this is the
 * same reset a protocol switch makes. */
void mb_takeover_local(struct node *n, unsigned dead, const uint64_t *decided);
/* RCKV REBALANCE: the leader moves every rejoined node's primaries back
 * (a configuration change), whichever node is asked. */
void mb_rebalance(struct membership *m);

/* Why this node refuses transactions now, for the client's error reply:
 * "CLUSTERDOWN ..." without the leading '-'. */
void mb_refusal(struct membership *m, char *buf, size_t cap);

#endif

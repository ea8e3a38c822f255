/*
 * durable: group commit for `persistence power` (DESIGN.md section 9; FORD
 * 4.5, selective flush: one flush after the last write, notes-ford.md 3.4).
 *
 * Every WRITE, CAS and FAA a worker's batches execute is noted, as a range,
 * in the worker's struct fab_dirty (rdma/fab.h, fab_track_writes). A
 * transaction that must know its writes durable (cc/prim.c,
 * prim_commit_writes) calls durable_wait: the worker's ranges so far,
 * whoever posted them, go to the node's flusher, and the coroutine parks.
 * The flusher is one thread per node that sleeps on a condition variable
 * while nothing is queued; it takes everything queued at once, merges the
 * ranges to pages, persists each distinct page range once (the own region
 * with st_region_persist_ranges: pmem_persist of each, or writeback of
 * exactly those pages and one device flush; a shm peer's with one
 * fab_persist, an msync, over their span), then wakes every waiter of that
 * round through its
 * worker's loop (fab_set_aux: an eventfd per worker, drained and answered
 * on the worker's own thread). Commits that queue while a round's msync
 * runs share the next round: one msync serves many.
 *
 * With the write-ahead log (st_region_is_wal) no ranges are tracked: the
 * fabric notes every write in the log as it is made (fab_journal), and a
 * round is one st_wal_flush, an append and one fdatasync for everything
 * noted so far. durable_wait only parks; at the end of a pass of its loop
 * (durable_ring) the worker takes the round for the commits of the pass,
 * one round at a time: it syncs them on its own thread, as Redis's event
 * loop does, when many wait, and hands them to the flusher when few do
 * (wal_round says why). Under power-everysec the round is always the
 * worker's own, at that same point (a write() without the sync, which a
 * timer makes once a second).
 *
 * Invariants:
 * (1) Rounds complete in the order they were taken, and a request belongs
 *     to the first round taken after it was queued. So when durable_wait
 *     returns, every range noted by the worker before the call is durable,
 *     including ranges another coroutine of the worker queued earlier
 *     (they were in the same or an earlier round).
 * (2) The flusher never touches a request after it set its `done` flag:
 *     the request lives on the waiting coroutine's stack, which may
 *     return as soon as it sees the flag.
 * (3) The waiting list of a worker is touched only on that worker's
 *     thread (durable_wait, and the aux poll fab_worker_poll runs there).
 */
#ifndef RCKV_CC_DURABLE_H
#define RCKV_CC_DURABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

struct cc_node;
struct cc_worker;
struct txn;
struct durable;

/*
 * durable_start - set up group commit for node n (persistence power):
 * writes tracking and the workers' wake-up source on n->fab, the flusher
 * thread, n->durable. Main thread, after fab_open and before the workers
 * are created. Returns 0, or -errno with err filled.
 */
int durable_start(struct cc_node *n, char *err, size_t errlen);

/* durable_stop - after the workers have stopped: let the flusher finish
 * what is queued, join it, log the group-commit totals, free. */
void durable_stop(struct cc_node *n);

/*
 * durable_wait - make every range the calling worker has written so far
 * durable (invariant (1)), parking the calling coroutine meanwhile; outside
 * a coroutine, persists on the calling thread. `commit` says this wait is
 * a transaction's commit point (counted in n->gc_commits). Returns 0, or
 * -errno from msync/fab_persist (the round failed; nothing can be said of
 * its ranges). Transaction's coroutine only.
 */
int durable_wait(struct txn *t, bool commit);
/* durable_wait for the writes on the nodes in `nodes` only (a mask of
 * node ids); the same as durable_wait except with journal rings, where
 * each node has a log of its own (durable_per_node). */
int durable_wait_nodes(struct txn *t, uint64_t nodes, bool commit);

/*
 * durable_post_flushes - with remote flushes (a tcp cluster's logs):
 * queue on t's batch, behind what it holds, a remote flush (fab_flush) of
 * every node of `nodes` but the own one, so that the batch's exec also
 * waits for those nodes' logs to hold everything t wrote there, without a
 * round trip of its own. Returns the nodes queued; 0 elsewhere (journal
 * rings are waited for by durable_wait_nodes alone). After the exec, they
 * count only if durable_flushes_count: else durable_wait_nodes, which
 * fails then, decides.
 */
uint64_t durable_post_flushes(struct txn *t, uint64_t nodes);
/* No connection of t's worker broke since the commit began (txn.ring_epoch):
 * the flushes t posted reached the incarnations its writes did. */
bool durable_flushes_count(const struct txn *t);

/*
 * durable_attach_peer - a shm peer joined with its region at region_path:
 * if it keeps a write-ahead log, this node's writes to it go through its
 * journal ring from now on (storage/jring.c). Control thread. Returns 0
 * (also when the peer keeps no log), or -errno with err filled (the peer
 * keeps a log and this node cannot feed it).
 */
int durable_attach_peer(struct cc_node *n, uint16_t node, const char *region_path,
			char *err, size_t errlen);

/*
 * durable_ring - worker `worker` ended a pass of its loop: if its
 * coroutines queued requests during the pass, wake the flusher for them
 * now (durable_wait queues without waking it, so every commit of a pass
 * shares one round: one fdatasync per pass of the event loop, as Redis's
 * appendfsync always), or sync them on this thread (wal_round). Returns
 * true when this thread synced and woke coroutines. Worker's thread; a
 * no-op without persistence power.
 */
bool durable_ring(struct cc_node *n, int worker);

/*
 * durable_pass_due - whether worker `worker` has requests that only its
 * next durable_ring sends on: its coroutines queued them after its last
 * one (they ran after an inline round woke them), and no round in flight
 * will wake the worker for them. Then its loop must not sleep before
 * that pass ends. Worker's thread.
 */
bool durable_pass_due(const struct cc_node *n, int worker);

/*
 * durable_ordered - true when what a transaction writes reaches the medium
 * in the order it was written (the write-ahead log, storage/wal.c
 * invariant (1)): a later write is never durable without every earlier
 * one, so only the commit point needs a wait. False for page flushes
 * (msync, pmem_persist), where each step waits (cc/prim.c).
 */
bool durable_ordered(const struct cc_node *n);
/*
 * durable_per_node - true when each node's writes are ordered in that
 * node's own log (a cluster's logs, fed through journal rings on shm, or
 * written by each node's own NIC thread on tcp): a write is
 * never durable without the earlier ones on the same node, but nothing
 * orders two nodes' logs, so a step that depends on another node's writes
 * waits for that node (cc/prim.c, P2).
 */
bool durable_per_node(const struct cc_node *n);
/*
 * durable_early_release - true on a standalone node's write-ahead log: a
 * commit releases its locks in the batch of its commit point and then waits
 * for the log (early lock release), so the fsync does not hold its keys. A
 * write is never durable without every write logged before it (the log's
 * one order), so a writer that read a value not yet durable is acknowledged
 * only after it is; a transaction that only read must wait too:
 * durable_wait_reads.
 */
bool durable_early_release(const struct cc_node *n);
/*
 * durable_wait_reads - after a commit that did not wait for the log (it
 * wrote nothing): under early lock release, if the log holds writes no
 * flush covers yet (any of them may be one this transaction read), wait
 * until it does, as a commit would. 0 at once elsewhere, or when the log
 * is all flushed. Returns 0, or -errno (nothing can be said of what it
 * read). Transaction's coroutine only.
 */
int durable_wait_reads(struct txn *t);
/* The same wait for a command that read the store outside a transaction
 * (KEYS, SCAN, DBSIZE), on worker w's coroutine. */
int durable_wait_seen(struct cc_node *n, struct cc_worker *w);
/* What a commit's peer waits compare (txn.ring_epoch, taken at its
 * start): with journal rings, bumped whenever a peer's ring is replaced
 * (it restarted); with remote flushes, the worker's broken connections
 * (fab_worker_breaks). A commit that began under another epoch cannot know
 * its writes logged: its peer waits fail with -EHOSTDOWN. */
uint64_t durable_epoch(const struct txn *t);

/* Totals since start (any thread; relaxed reads). */
struct durable_stats {
	uint64_t rounds;    /* flusher rounds that persisted anything (n->gc_flushes) */
	uint64_t commits;   /* commit-point waits served (n->gc_commits) */
	uint64_t requests;  /* every wait served */
	uint64_t syncs;     /* flushes: one per node per round (plus whole-region ones) */
	uint64_t pages;     /* pages they covered (a peer's: its span) */
	uint64_t inline_rounds; /* power's log rounds a worker synced on its own
				   thread (wal_round), not the flusher */
};
void durable_get_stats(const struct cc_node *n, struct durable_stats *out);

/*
 * durable_merge - sort ranges (node, then offset), round each out to
 * `page` boundaries and merge those that overlap or touch. Returns the
 * count left at the front of r. Pure; exposed for the unit test.
 */
size_t durable_merge(struct fab_range *r, size_t n, uint64_t page);

#endif

/*
 * pubsub: Pub/Sub on a node (Redis 7.0's channels, patterns and shard
 * channels), and the hand-off that brings a message to subscribers on any
 * worker. See pubsub.c for the design; the commands are cmd_pubsub.c's.
 *
 * Threads: ps_publish_local on any thread (a worker's coroutine, a fabric
 * RPC handler); everything that takes a struct client or struct worker on
 * the owner worker only (the _st rule of client.h).
 */
#ifndef RCKV_SRV_PUBSUB_H
#define RCKV_SRV_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node;
struct worker;
struct client;
struct srv_sbuf;

enum ps_kind {
	PS_CHANNEL = 0, /* SUBSCRIBE / PUBLISH */
	PS_PATTERN = 1, /* PSUBSCRIBE (never a PUBLISH kind) */
	PS_SHARD = 2,   /* SSUBSCRIBE / SPUBLISH */
	PS_MONITOR = 3, /* a MONITOR line, to the worker's monitors (server/monitor.c) */
	PS_KILL = 4,    /* CLIENT KILL of one of the worker's clients (server/client_ctl.c) */
};

/* The node's registry (who subscribes to what, on which worker) for
 * nworkers workers. 0 or -ENOMEM. Before the workers start. */
int ps_node_create(struct node *n, int nworkers);
void ps_node_destroy(struct node *n);

/* A worker's inbox and its local subscriptions. NULL if out of memory. */
struct ps_worker *ps_worker_create(void);
/* After the worker's clients were freed; frees undelivered messages. */
void ps_worker_destroy(struct ps_worker *pw);
/* The eventfd of the worker was readable: deliver what the inbox holds.
 * Owner worker, from its loop (never inside a coroutine). */
void ps_worker_drain(struct worker *w);
/* Has w's inbox something (the loop then must not sleep: a worker's
 * messages to itself come with no wake-up)? Owner worker. */
bool ps_worker_pending(struct worker *w);

/*
 * ps_publish_local - publish on this node: every subscriber of `ch` (kind
 * PS_CHANNEL: channel and matching pattern subscribers; PS_SHARD: shard
 * channel subscribers) on every worker gets the message, in the order of
 * this thread's calls. Returns the number of receivers (Redis's PUBLISH
 * reply), or -ENOMEM (nothing delivered). Never blocks on a subscriber.
 * Any thread; `self` is the worker it runs on, if any (NULL otherwise):
 * its own inbox needs no wake-up.
 */
long long ps_publish_local(struct node *n, struct worker *self, int kind, const char *ch,
			   size_t clen, const char *msg, size_t mlen);

/*
 * ps_publish - PUBLISH / SPUBLISH of a client on worker w: on this node
 * and, in a cluster, on every other node (n->cops->publish). Returns the
 * receivers or -ENOMEM. On a coroutine of w (a cluster publish waits for
 * the other nodes there).
 */
long long ps_publish(struct worker *w, int kind, const char *ch, size_t clen, const char *msg,
		     size_t mlen);

/*
 * A PUBLISH inside a transaction (queued in MULTI) must not be sent by an
 * attempt that aborts and runs again: it is kept in the client's queue
 * (ps_defer, which returns the receivers as of now, or -ENOMEM) and sent
 * when the transaction committed (ps_defer_send); ps_defer_reset forgets
 * the queue (an attempt starts, or the transaction failed). Owner worker.
 */
long long ps_defer(struct worker *w, struct client *cl, int kind, const char *ch, size_t clen,
		   const char *msg, size_t mlen);
void ps_defer_reset(struct client *cl);
void ps_defer_send(struct worker *w, struct client *cl);

/*
 * Subscribe / unsubscribe the client (kind PS_CHANNEL, PS_PATTERN or
 * PS_SHARD). Return 1 if it changed, 0 if it was already (not)
 * subscribed, -ENOMEM. Owner worker.
 */
int ps_subscribe(struct client *cl, int kind, const char *name, size_t len);
int ps_unsubscribe(struct client *cl, int kind, const char *name, size_t len);
/* The client's subscriptions of a kind, to unsubscribe from all: calls fn
 * for each (fn may unsubscribe the one it is given). */
void ps_client_each(struct client *cl, int kind, void (*fn)(void *arg, const char *name,
							    size_t len), void *arg);
/* Its number of subscriptions of a kind. */
long ps_client_count(const struct client *cl, int kind);
/*
 * MONITOR (server/monitor.c) rides the same inboxes: ps_monitor_add makes
 * cl a monitor of its worker (0, or -ENOMEM), ps_monitor_remove undoes it
 * (close, RESET); ps_monitor_mask is the workers with monitors, one
 * relaxed load, for the per-command check; ps_monitor_send pushes a
 * formatted line to those workers, which append it to their monitors'
 * replies. Owner worker (mask and send: any thread).
 */
int ps_monitor_add(struct client *cl);
/* Have worker wid close its client `id` (if it still has it). Any thread. */
void ps_kill_send(struct node *n, struct worker *self, int wid, uint64_t id);
void ps_monitor_remove(struct client *cl);
uint64_t ps_monitor_mask(struct node *n);
void ps_monitor_send(struct node *n, struct worker *self, const char *line, size_t len);
/* Drop every subscription (RESET, close). */
void ps_client_drop(struct client *cl);
/* Messages that arrived while the client's coroutine ran go to its reply
 * buffer now: between two commands, never inside one's reply. Owner, in
 * the client's coroutine. */
void ps_client_flush_deferred(struct client *cl);

/* PUBSUB CHANNELS / SHARDCHANNELS: fn for each active channel of kind
 * (PS_CHANNEL or PS_SHARD) matching pattern (NULL: all). Any thread. */
void ps_node_channels(struct node *n, int kind, const char *pat, size_t plen,
		      void (*fn)(void *arg, const char *name, size_t len), void *arg);
/* PUBSUB NUMSUB / SHARDNUMSUB: subscribers of one channel. Any thread. */
long long ps_node_numsub(struct node *n, int kind, const char *ch, size_t clen);
/* Distinct channels / patterns / shard channels with subscribers (NUMPAT,
 * INFO). Any thread. */
long long ps_node_count(struct node *n, int kind);

/*
 * Across the cluster (server/pubsub_cluster.c): the fabric RPC handler id
 * (apart from cc's: calvin.h 8.., calvin_ring.h 16..), its registration
 * (after fab_open, before the workers start: 0 or -EINVAL with err), and
 * the node_cluster_ops.publish of a cluster member: this node's receivers
 * plus every other node's, -EMSGSIZE when channel and message together
 * pass what one RPC carries (FAB_RPC_MAX less a header), -ENOMEM.
 */
#define SRV_RPC_PUBLISH 24
int ps_cluster_attach(struct node *n, char *err, size_t errlen);
long long ps_cluster_publish(struct node *n, struct worker *w, int kind, const char *ch,
			     size_t clen, const char *msg, size_t mlen);

#endif

/*
 * notify: keyspace notifications (notify-keyspace-events), Redis 7.0's
 * events for rckv's commands, published only when the transaction that
 * made them committed: a command's events are queued with the client's
 * deferred PUBLISHes (ps_defer) and sent after the commit, on every node
 * of the cluster, in the block's order; an aborted attempt sends none.
 *
 * Threads: notify_pre/notify_post on the command's worker, around the
 * handler (srv_call, a script's redis.call).
 */
#ifndef RCKV_SRV_NOTIFY_H
#define RCKV_SRV_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cmd_ctx;
struct cmd_def;
struct node;
struct worker;

/* What a command's events need from before it ran. */
struct notify_pre {
	bool on;          /* events wanted for this command */
	uint64_t changes; /* the transaction's changes before it */
	uint64_t deleted; /* bit i: the i-th key was deleted in the txn before */
};

/* One relaxed load: is any event class on? */
bool notify_enabled(struct node *n);
void notify_pre(struct cmd_ctx *c, const struct cmd_def *def, struct notify_pre *p);
/* After the handler returned 0 without an error reply: queue its events. */
void notify_post(struct cmd_ctx *c, const struct cmd_def *def, const struct notify_pre *p);
/* An expired key removed by active expiry (class x), after its commit. */
void notify_expired(struct worker *w, const char *key, size_t klen);

/* notify-keyspace-events: parse Redis's class letters into flags (0, or
 * -1 for a bad letter), and format flags as CONFIG GET shows them. */
int notify_parse(const char *s, uint32_t *flags);
void notify_format(uint32_t flags, char *buf, size_t cap);

#endif

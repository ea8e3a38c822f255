/*
 * dispatch: from a parsed request to a reply: command lookup, arity, auth,
 * MULTI queueing, and running the command as its own transaction.
 */
#ifndef RCKV_SRV_DISPATCH_H
#define RCKV_SRV_DISPATCH_H

#include <stdbool.h>

#include "resp/resp.h"

struct worker;
struct client;
struct cmd_def;
struct cmd_ctx;

/* Run one request of cl; the reply is appended to cl->out. On a coroutine.
 * `top`: cmd_lookup of argv[0] (NULL if unknown), looked up once by the
 * caller for both this and srv_group_add. */
void srv_dispatch(struct worker *w, struct client *cl, const struct cmd_def *top, int argc,
		  struct resp_arg *argv);

/*
 * Groups: consecutive pipelined write commands of one client run as one
 * transaction. srv_group_add takes a request into cl's group if it may
 * join one (returns true; the request's bytes are copied), else returns
 * false and the caller runs srv_group_run first, then srv_dispatch.
 * srv_group_run runs and empties the group; the replies are appended to
 * cl->out in request order. On a coroutine.
 */
bool srv_group_add(struct worker *w, struct client *cl, const struct cmd_def *top, int argc,
		   const struct resp_arg *argv);
void srv_group_run(struct worker *w, struct client *cl);

/* Run a command def with ctx (handler or subcommand handler), inside the
 * transaction ctx->txn if any. Used by dispatch and EXEC. */
int srv_call(const struct cmd_def *def, struct cmd_ctx *ctx);

/* The error reply of a transaction that cc_run could not commit (rc from
 * cc_run: CC_ETIMEOUT, CC_EFAB, ...). */
struct node;
void srv_reply_txn_failed(struct resp_w *out, struct node *n, int rc);

/* From `top` (cmd_lookup of argv[0], NULL if unknown) to the command to
 * run, its subcommand for a container; writes the Redis error and returns
 * NULL when unknown or when arity fails. */
const struct cmd_def *srv_resolve(struct client *cl, struct resp_w *out, const struct cmd_def *top,
				  int argc, struct resp_arg *argv, bool *dirty);

#endif

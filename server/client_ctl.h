/*
 * client_ctl: CLIENT KILL, PAUSE, UNPAUSE, REPLY and TRACKING (the
 * subcommands that act on other clients or on the reply stream); the rest
 * of CLIENT is cmd_conn.c's.
 *
 * Threads: handlers on the caller's worker. A client of another worker is
 * closed by its owner: the killer sends it a PS_KILL through the worker's
 * inbox (server/pubsub.h).
 */
#ifndef RCKV_SRV_CLIENT_CTL_H
#define RCKV_SRV_CLIENT_CTL_H

#include <stdbool.h>

struct cmd_ctx;
struct worker;
struct node;
struct cmd_def;
struct client;

void client_kill(struct cmd_ctx *c);
void client_pause(struct cmd_ctx *c);
void client_unpause(struct cmd_ctx *c);
void client_reply(struct cmd_ctx *c);

/* CLIENT PAUSE: would the command def of cl wait now? One relaxed load
 * when no pause is on. Any worker. */
bool client_paused(struct node *n, const struct client *cl, const struct cmd_def *def);
/* Wait, on cl's coroutine, until it would not (the pause ended). */
void client_wait_unpaused(struct worker *w, const struct client *cl, const struct cmd_def *def);

#endif

/*
 * monitor: MONITOR, Redis's stream of every command the server runs, as
 * lines "+<unix time.us> [0 <client addr>] "arg" "arg" ...". Delivered to
 * monitors on any worker through the Pub/Sub inboxes (server/pubsub.h).
 *
 * Threads: monitor_feed on the worker of the client whose command ran.
 */
#ifndef RCKV_SRV_MONITOR_H
#define RCKV_SRV_MONITOR_H

#include <stdbool.h>

#include "resp/resp.h"

struct node;
struct worker;
struct cmd_def;

/* Is any client a monitor? One relaxed load: call it before monitor_feed. */
bool monitor_on(struct node *n);
/* Show a command that ran on worker w for the client at addr ("lua" for
 * a script's redis.call, as Redis shows them): not an admin command
 * (Redis shows none of them), AUTH's and HELLO's secrets redacted. */
void monitor_feed(struct node *n, struct worker *w, const char *addr, const struct cmd_def *def,
		  int argc, const struct resp_arg *argv);

#endif

/*
 * multi: MULTI/EXEC/DISCARD/WATCH/UNWATCH (DESIGN.md section 5). EXEC runs
 * every queued command as ONE transaction under the node's protocol; WATCH
 * records versions that EXEC re-reads inside that same transaction.
 */
#ifndef RCKV_SRV_MULTI_H
#define RCKV_SRV_MULTI_H

#include "resp/resp.h"

struct client;
struct cmd_def;

/* Queue a command (copying its arguments). 0 or -ENOMEM. */
int multi_queue(struct client *cl, const struct cmd_def *def, int argc,
		const struct resp_arg *argv);

#endif
